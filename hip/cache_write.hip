/* Latent cache writer: [k_nope[t] | k_pe[t]] to slot slots[t] (negative:
 * skipped), in the cache's layout and element type; byte-identical with the
 * reference (hip/cache_chunk.h says how).
 *
 * A thread per 8-value chunk of a token (V3: 72 chunks of 576 values):
 * 16-byte loads of bf16 rows, 16-byte (bf16) or 8-byte (fp8) stores. The
 * FP8_SCALED scales come from a 16-lane team reduction per 128 dims.
 * Instantiated per (input dtype, cache element type, access mode: the host
 * picks wide accesses throughout when every row and block is contiguous
 * and aligned, chunk-by-chunk one-value accesses otherwise); k_nope and
 * k_pe of different dtypes take one launch each (nope chunks, then rope
 * chunks). */
#include "hip/cache_chunk.h"

namespace {

struct cw_desc {
    cache_dev c;
    const void *kn, *kp, *slots;
    int64_t kns0, kns1, kps0, kps1, ss;
    int64_t nope_chunks, per_token, tokens;
    int32_t slot64;
    int32_t nope, rope; /* which parts this launch writes */
};

template <int KT, int CT, int MODE>
__global__ __launch_bounds__(MLA_HIP_BLOCK) void cache_write_kernel(cw_desc d, item_window w)
{
    /* The bound is tested per block: the scale teams shuffle. */
    for (uint32_t i0 = window_first(); i0 < w.count; i0 += window_stride()) {
        const uint32_t i = i0 + threadIdx.x;
        int64_t tok;
        uint32_t c;
        window_item(w, i < w.count ? i : 0, tok, c);
        const int64_t slot = i < w.count ? load_index(d.slots, d.slot64, tok * d.ss) : -1;
        float v[kChunk] = {0, 0, 0, 0, 0, 0, 0, 0};
        int64_t d0 = 0;
        int n = 0;
        if (slot >= 0 && c < d.nope_chunks) {
            d0 = c * kChunk;
            n = d.nope ? mode_chunk_len<MODE>(d.c.L - d0) : 0;
            load8<KT, MODE>(d.kn, tok * d.kns0 + d0 * d.kns1, d.kns1, n, v);
        } else if (slot >= 0) {
            const int64_t r0 = ((int64_t)c - d.nope_chunks) * kChunk;
            d0 = d.c.L + r0;
            n = d.rope ? mode_chunk_len<MODE>(d.c.R - r0) : 0; /* 0 on FP8_SCALED padding */
            load8<KT, MODE>(d.kp, tok * d.kps0 + r0 * d.kps1, d.kps1, n, v);
        }
        float s = 0.0f;
        if constexpr (CT != MLA_DTYPE_BF16)
            if (cache_fp8s(d.c))
                s = fp8s_group_scale<CT>(d0, d0 < d.c.L ? n : 0, v);
        if (n > 0)
            cache_put<CT, MODE>(d.c, slot_pos(d.c, slot), d0, n, v, s);
    }
}

mla_status launch(mla_context *ctx, const mla_cache_write_args *a, const cw_desc &d, int kt)
{
    hipStream_t stream = mla_hip_state_of(ctx)->stream;
    const bool wide =
        cache_wide_ok(a->desc, a->cache) && wide_ok(a->k_nope, 1) && wide_ok(a->k_pe, 1);
    return for_windows(ctx, d.tokens, d.per_token, [&](const item_window &w) {
        const unsigned blocks = mla_hip_grid_blocks(ctx, w.count, MLA_HIP_BLOCK);
        return with_float(kt, [&](auto k) {
            return with_cache_dtype(a->desc.dtype, [&](auto ct) {
                return with_access(wide, [&](auto m) {
                    cache_write_kernel<decltype(k)::value, decltype(ct)::value, decltype(m)::value>
                        <<<blocks, MLA_HIP_BLOCK, 0, stream>>>(d, w);
                    return mla_hip_check_launch(ctx, "cache_write kernel launch");
                });
            });
        });
    });
}

} // namespace

mla_status mla_hip_cache_write(mla_context *ctx, const mla_cache_write_args *a)
{
    const mla_hip_device_scope scope(mla_hip_state_of(ctx)->device);
    if (scope.error() != hipSuccess)
        return mla_hip_fail(ctx, scope.error(), "selecting the context's GPU");
    const mla_tensor *t[] = {&a->cache, &a->k_nope, &a->k_pe, &a->slots};
    const char *names[] = {"cache", "k_nope", "k_pe", "slots"};
    for (int k = 0; k < 4; ++k) {
        mla_status st = mla_hip_check_tensor_memory(ctx, t[k], names[k]);
        if (st != MLA_OK)
            return st;
    }
    cw_desc d = {};
    mla_status st = make_cache_dev(ctx, a->desc, a->cache, d.c);
    if (st != MLA_OK)
        return st;
    d.kn = a->k_nope.data;
    d.kp = a->k_pe.data;
    d.slots = a->slots.data;
    d.kns0 = a->k_nope.stride[0];
    d.kns1 = a->k_nope.stride[1];
    d.kps0 = a->k_pe.stride[0];
    d.kps1 = a->k_pe.stride[1];
    d.ss = a->slots.stride[0];
    d.nope_chunks = (a->desc.kv_lora + kChunk - 1) / kChunk;
    d.per_token = token_items(a->desc, (a->desc.rope + kChunk - 1) / kChunk);
    d.tokens = a->k_nope.shape[0];
    d.slot64 = a->slots.dtype == MLA_DTYPE_I64;
    d.nope = 1;
    d.rope = a->k_pe.dtype == a->k_nope.dtype;
    st = launch(ctx, a, d, a->k_nope.dtype);
    if (st != MLA_OK || d.rope)
        return st;
    d.nope = 0;
    d.rope = 1;
    return launch(ctx, a, d, a->k_pe.dtype);
}
