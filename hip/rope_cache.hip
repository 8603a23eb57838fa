/* Fused RoPE + concat + cache write (mla_fused_rope_concat_cache):
 *
 *     q_cat[t, h, :L] = q_nope[t, h],  q_cat[t, h, L:] = RoPE(q_pe[t, h], q_pos[t])
 *     every key token j < Tk (Tk >= T, each one rotated):
 *         k_rot = RoPE(k_pe[j], k_pos[j]);  cache[slots[j]] = [k_nope[j] | k_rot]
 *         k_pe_out[j] = k_rot                                     (if wanted)
 *
 * bit-exact with the reference: the rotation is hip/rope_util.h's, values
 * reach q_cat and k_pe_out by one rounding from fp32 (fp8 q_cat as
 * sat_fp8(fl(v / q_scale))), and the cache through hip/cache_chunk.h, the
 * writer mla_cache_write uses.
 *
 * Three kernels on the stream (four with k_pe_out, which is mla_rope's
 * kernel on [Tk, 1, R] views): queries, key nope chunks, key rotation
 * pieces, each instantiated for its input's dtype and its output's (q_cat's,
 * the cache's element type). Items are 8-value nope chunks and the two
 * 8-value pieces of a rotation unit of 8 pairs, one thread each (one
 * store site per kernel keeps the layout arithmetic's registers in budget;
 * a query item is its chunk in kQHeads heads, all loaded before the first
 * store, so that several 16-byte loads are in flight per thread and the
 * index arithmetic is paid once per kQHeads chunks); the key nope chunks are
 * laid out as the cache writer's (FP8_SCALED scale teams on 16 lanes). The
 * keys take two kernels because one holding both parts has more arguments
 * and layout constants than a gfx9 wave's scalar registers (it spilled);
 * split, each carries only its own. q_nope and q_pe of different dtypes take
 * a query launch each. When q_nope is q_cat's own first L dims, each nope
 * value is read and written back by the same thread. */
#include "hip/cache_chunk.h"
#include "hip/rope_util.h"

namespace
{

/* Heads a query item covers: its loads in flight before its stores (gfx9:
 * 1; 2 and 4 spilled scalar registers in the fp8 q_cat kernels). */
#if defined(__CUDACC__)
constexpr int kQHeads = 4;
#else
constexpr int kQHeads = 1;
#endif

/* The items of a row: nope chunks, then rotation units. */
struct rc_items {
    uint32_t nope_chunks, units, per_row;
    int32_t nope, rope; /* the parts this launch does (queries) */
};

struct q_desc {
    rope_table tb;
    const void *qn, *qp, *pos;
    void *qcat;
    int64_t ns0, ns1, ns2, ps0, ps1, ps2, cs0, cs1, cs2;
    uint32_t poss, L, H, groups; /* groups: ceil(H / kQHeads) */
    float q_scale;
    int32_t pos64;
    rc_items it;
};

struct k_desc {
    cache_dev c;
    rope_table tb;
    const void *kn, *kp, *pos, *slots;
    int64_t ns0, ns1, ps0, ps1;
    uint32_t poss, slot_s;
    int32_t pos64, slot64;
    rc_items it;
};

/* n values into q_cat from element off: fp8 as sat(fl(v / q_scale)). */
template <int QT, int MODE>
MLA_DEV void store_q(const q_desc &d, int64_t off, int n, float v[kChunk])
{
    if constexpr (QT == MLA_DTYPE_FP8_E4M3FN || QT == MLA_DTYPE_FP8_E4M3FNUZ) {
#pragma unroll
        for (int j = 0; j < kChunk; ++j)
            v[j] = mla_fb_div(v[j], d.q_scale);
    }
    store8<QT, MODE>(d.qcat, off, d.cs2, n, v);
}

template <int IT, int QT, int MODE>
__global__ __launch_bounds__(MLA_HIP_BLOCK) void rope_cache_q_kernel(q_desc d, item_window w)
{
    /* Item (g, c) of token t: output chunk c of a q_cat row (nope chunk or
     * rotation piece) in the heads g, g + groups, ... (kQHeads of them): all
     * their loads, then all their stores, so that a thread keeps kQHeads
     * 16-byte loads in flight; the item's index arithmetic is shared. */
    for (uint32_t i = window_first() + threadIdx.x; i < w.count; i += window_stride()) {
        int64_t t;
        uint32_t k; /* item of token t */
        window_item(w, i, t, k);
        const uint32_t g = k / d.it.per_row, c = k % d.it.per_row;
        float v[kQHeads][kChunk];
        int64_t d0; /* q_cat dim of v[j][0] */
        int n;
        if (c < d.it.nope_chunks) {
            if (!d.it.nope)
                continue;
            d0 = (int64_t)c * kChunk;
            n = chunk_len(d.L - d0);
#pragma unroll
            for (int j = 0; j < kQHeads; ++j) {
                const int64_t h = (int64_t)g + (int64_t)j * d.groups;
                load8<IT, MODE>(d.qn, t * d.ns0 + h * d.ns1 + d0 * d.ns2, d.ns2, h < d.H ? n : 0,
                                v[j]);
            }
        } else {
            if (!d.it.rope)
                continue;
            const uint32_t un = c - d.it.nope_chunks; /* 2 items per unit: its pieces */
            const int64_t i0p = (int64_t)(un / 2) * kPairs;
            const int piece = (int)(un % 2);
            const int64_t pos = load_index(d.pos, d.pos64, t * d.poss);
#pragma unroll
            for (int j = 0; j < kQHeads; ++j) {
                const int64_t h = (int64_t)g + (int64_t)j * d.groups;
                if (h < d.H)
                    rope_piece<IT, MODE>(d.qp, t * d.ps0 + h * d.ps1, d.ps2, d.tb, pos, i0p, piece,
                                         v[j]);
            }
            n = piece_dims<MODE>(d.tb, i0p, piece, d0);
            d0 += d.L;
        }
#pragma unroll
        for (int j = 0; j < kQHeads; ++j) {
            const int64_t h = (int64_t)g + (int64_t)j * d.groups;
            if (h < d.H)
                store_q<QT, MODE>(d, t * d.cs0 + h * d.cs1 + d0 * d.cs2, n, v[j]);
        }
    }
}

/* Key nope chunks: item c of token j is dims 8c .. 8c+7 (per_row: the
 * cache writer's padded count, so FP8_SCALED groups sit on 16 lanes). */
template <int IT, int CT>
__global__ __launch_bounds__(MLA_HIP_BLOCK) void rope_cache_k_nope_kernel(k_desc d, item_window w)
{
    /* The bound is tested per block: the scale teams shuffle. */
    for (uint32_t i0 = window_first(); i0 < w.count; i0 += window_stride()) {
        const uint32_t i = i0 + threadIdx.x;
        int64_t j;
        uint32_t c;
        window_item(w, i < w.count ? i : 0, j, c);
        const int64_t slot = i < w.count ? load_index(d.slots, d.slot64, j * d.slot_s) : -1;
        const int64_t d0 = (int64_t)c * kChunk;
        const int n = (slot >= 0 && c < (uint32_t)d.it.nope_chunks) ? chunk_len(d.c.L - d0) : 0;
        float v[kChunk];
        load8<IT>(d.kn, j * d.ns0 + d0 * d.ns1, d.ns1, n, v);
        float s = 0.0f;
        if constexpr (CT != MLA_DTYPE_BF16)
            if (cache_fp8s(d.c))
                s = fp8s_group_scale<CT>(d0, n, v);
        if (n > 0)
            cache_put<CT>(d.c, slot_pos(d.c, slot), d0, n, v, s);
    }
}

/* Key rotation pieces into the cache (slot >= 0): a thread per piece of a
 * unit (it rotates the unit and keeps its piece). */
template <int IT, int CT, int MODE>
__global__ __launch_bounds__(MLA_HIP_BLOCK) void rope_cache_k_rope_kernel(k_desc d, item_window w)
{
    for (uint32_t i = window_first() + threadIdx.x; i < w.count; i += window_stride()) {
        int64_t j;
        uint32_t u; /* 2 items per unit: its pieces */
        window_item(w, i, j, u);
        const int64_t slot = load_index(d.slots, d.slot64, j * d.slot_s);
        const int64_t i0 = (int64_t)(u / 2) * kPairs;
        const int piece = (int)(u % 2);
        const int64_t pos = load_index(d.pos, d.pos64, j * d.poss);
        float v[kChunk];
        rope_piece<IT, MODE>(d.kp, j * d.ps0, d.ps1, d.tb, pos, i0, piece, v);
        int64_t d0;
        const int n = piece_dims<MODE>(d.tb, i0, piece, d0);
        if (slot >= 0 && n > 0)
            cache_put_rope<CT, MODE>(d.c, slot_pos(d.c, slot), d0, n, v);
    }
}

/* f(tag) for q_cat's dtypes: F32, BF16 and the fp8s. */
template <typename F> mla_status with_q_cat(int dt, F &&f)
{
    if (dt == MLA_DTYPE_F32)
        return f(dtype_tag<MLA_DTYPE_F32>{});
    return with_cache_dtype(dt, f);
}

mla_status launch_q(mla_context *ctx, q_desc d, int64_t T, int nope_dt, int pe_dt, int qcat_dt,
                    bool wide)
{
    hipStream_t stream = mla_hip_state_of(ctx)->stream;
    const int split = nope_dt != pe_dt; /* one launch per part */
    for (int part = 0; part <= split; ++part) {
        d.it.nope = !split || part == 0;
        d.it.rope = !split || part == 1;
        const mla_status st =
            for_windows(ctx, T, d.groups * d.it.per_row, [&](const item_window &w) {
                const unsigned blocks = mla_hip_grid_blocks(ctx, w.count, MLA_HIP_BLOCK);
                return with_float(part ? pe_dt : nope_dt, [&](auto it) {
                    return with_q_cat(qcat_dt, [&](auto qt) {
                        return with_access(wide, [&](auto m) {
                            rope_cache_q_kernel<decltype(it)::value, decltype(qt)::value,
                                                decltype(m)::value>
                                <<<blocks, MLA_HIP_BLOCK, 0, stream>>>(d, w);
                            return mla_hip_check_launch(ctx, "rope_cache query kernel launch");
                        });
                    });
                });
            });
        if (st != MLA_OK)
            return st;
    }
    return MLA_OK;
}

mla_status launch_k(mla_context *ctx, const k_desc &d, int64_t Tk, const mla_cache_desc &desc,
                    int nope_dt, int pe_dt, bool wide_rope)
{
    hipStream_t stream = mla_hip_state_of(ctx)->stream;
    mla_status st = for_windows(ctx, Tk, token_items(desc, 0), [&](const item_window &w) {
        const unsigned blocks = mla_hip_grid_blocks(ctx, w.count, MLA_HIP_BLOCK);
        return with_float(nope_dt, [&](auto it) {
            return with_cache_dtype(desc.dtype, [&](auto ct) {
                rope_cache_k_nope_kernel<decltype(it)::value, decltype(ct)::value>
                    <<<blocks, MLA_HIP_BLOCK, 0, stream>>>(d, w);
                return mla_hip_check_launch(ctx, "rope_cache key kernel launch");
            });
        });
    });
    if (st != MLA_OK)
        return st;
    return for_windows(ctx, Tk, 2 * d.it.units, [&](const item_window &w) {
        const unsigned blocks = mla_hip_grid_blocks(ctx, w.count, MLA_HIP_BLOCK);
        return with_float(pe_dt, [&](auto it) {
            return with_cache_dtype(desc.dtype, [&](auto ct) {
                return with_access(wide_rope, [&](auto m) {
                    rope_cache_k_rope_kernel<decltype(it)::value, decltype(ct)::value,
                                             decltype(m)::value>
                        <<<blocks, MLA_HIP_BLOCK, 0, stream>>>(d, w);
                    return mla_hip_check_launch(ctx, "rope_cache key kernel launch");
                });
            });
        });
    });
}

} // namespace

mla_status mla_hip_rope_cache(mla_context *ctx, const mla_rope_cache_op_args *a)
{
    const mla_hip_device_scope scope(mla_hip_state_of(ctx)->device);
    if (scope.error() != hipSuccess)
        return mla_hip_fail(ctx, scope.error(), "selecting the context's GPU");
    const mla_tensor *t[] = {&a->cos,  &a->sin,   &a->q_nope, &a->q_pe,  &a->q_pos, &a->k_nope,
                             &a->k_pe, &a->k_pos, &a->slots,  &a->cache, &a->q_cat, &a->k_pe_out};
    const char *names[] = {"cos",  "sin",   "q_nope", "q_pe",  "q_pos", "k_nope",
                           "k_pe", "k_pos", "slots",  "cache", "q_cat", "k_pe_out"};
    const int ntensors = a->k_pe_out.data ? 12 : 11;
    for (int k = 0; k < ntensors; ++k) {
        mla_status st = mla_hip_check_tensor_memory(ctx, t[k], names[k]);
        if (st != MLA_OK)
            return st;
    }
    rope_table tb;
    mla_status st = make_rope_table(ctx, a->cos, a->sin, a->style, tb);
    if (st != MLA_OK)
        return st;
    k_desc k = {};
    st = make_cache_dev(ctx, a->desc, a->cache, k.c); /* L + R fit in 32 bits */
    if (st != MLA_OK)
        return st;
    rc_items it = {};
    it.nope_chunks = (uint32_t)((a->desc.kv_lora + kChunk - 1) / kChunk);
    it.units = (tb.half + kPairs - 1) / kPairs;
    it.per_row = it.nope_chunks + 2 * it.units; /* queries: a rotation item per piece */
    it.nope = it.rope = 1;

    const mla_tensor &qn = a->q_nope, &qp = a->q_pe, &qc = a->q_cat;
    q_desc q = {};
    q.tb = tb;
    q.qn = qn.data;
    q.qp = qp.data;
    q.pos = a->q_pos.data;
    q.qcat = qc.data;
    q.ns0 = qn.stride[0], q.ns1 = qn.stride[1], q.ns2 = qn.stride[2];
    q.ps0 = qp.stride[0], q.ps1 = qp.stride[1], q.ps2 = qp.stride[2];
    q.cs0 = qc.stride[0], q.cs1 = qc.stride[1], q.cs2 = qc.stride[2];
    for (const mla_tensor *ix : {&a->q_pos, &a->k_pos, &a->slots})
        if ((st = check_dim32(ctx, ix->stride[0], "positions / slots stride")) != MLA_OK)
            return st;
    q.poss = (uint32_t)a->q_pos.stride[0];
    q.L = k.c.L;
    q.q_scale = a->q_scale;
    q.pos64 = a->q_pos.dtype == MLA_DTYPE_I64;
    q.it = it;
    if ((st = check_dim32(ctx, qn.shape[1], "q_nope.shape[1]")) != MLA_OK)
        return st;
    q.H = (uint32_t)qn.shape[1];
    q.groups = (q.H + kQHeads - 1) / kQHeads;
    /* Whole chunks and pieces everywhere, every tensor contiguous along its
     * rows and aligned: the wide-access instantiation. */
    const bool table_wide = wide_ok(a->cos, 1) && wide_ok(a->sin, 1) && tb.half % kPairs == 0;
    const bool q_wide = table_wide && a->desc.kv_lora % kChunk == 0 && wide_ok(qn, 2) &&
                        wide_ok(qp, 2) && wide_ok(qc, 2);
    if (qn.shape[0] > 0) {
        st = launch_q(ctx, q, qn.shape[0], qn.dtype, qp.dtype, qc.dtype, q_wide);
        if (st != MLA_OK)
            return st;
    }

    k.tb = tb;
    k.kn = a->k_nope.data;
    k.kp = a->k_pe.data;
    k.pos = a->k_pos.data;
    k.slots = a->slots.data;
    k.ns0 = a->k_nope.stride[0], k.ns1 = a->k_nope.stride[1];
    k.ps0 = a->k_pe.stride[0], k.ps1 = a->k_pe.stride[1];
    k.poss = (uint32_t)a->k_pos.stride[0];
    k.slot_s = (uint32_t)a->slots.stride[0];
    k.pos64 = a->k_pos.dtype == MLA_DTYPE_I64;
    k.slot64 = a->slots.dtype == MLA_DTYPE_I64;
    k.it = it;
    const bool k_wide = table_wide && wide_ok(a->k_pe, 1) && cache_wide_ok(a->desc, a->cache);
    st = launch_k(ctx, k, a->k_nope.shape[0], a->desc, a->k_nope.dtype, a->k_pe.dtype, k_wide);
    if (st != MLA_OK || !a->k_pe_out.data)
        return st;
    /* k_pe_out = RoPE(k_pe): mla_rope's kernel, whose arithmetic this file's
     * rotation shares, on [Tk, 1, R] views. */
    mla_rope_args r = {a->cos, a->sin, a->k_pos, a->k_pe, a->k_pe_out, a->style, a->desc.rope};
    for (mla_tensor *v : {&r.x, &r.y}) {
        v->ndim = 3;
        v->shape[2] = v->shape[1];
        v->stride[2] = v->stride[1];
        v->shape[1] = 1;
        v->stride[1] = v->shape[2] * v->stride[2];
    }
    return mla_hip_rope(ctx, &r);
}
