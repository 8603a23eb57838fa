/* DSA indexer K cache writer and gather (MLA.md section 6), bytes identical
 * to the reference (core/ref/indexer_cache.c). Offsets come from
 * core/ref/indexer_layout.h, the one place the NORMAL / SHUFFLE layout is
 * written down (seed 002). Per token t over the whole head (D values of k,
 * loaded exactly as fp32):
 *
 *     amax  = max |k[t, :]|, or the last NaN's |.| (the reference's scan)
 *     scale = max(amax, 1e-4) / div            div 448 (e4m3fn) | 224 (e4m3fnuz)
 *             2^ceil(log2(that)) when ue8m0    from the quotient's bits
 *     value = sat_fp8(fl(k / scale))
 *
 * i.e. mla_fb_fp8_group_scale / mla_fb_fp8_group_code of core/format_bits.h
 * with group D and rule UE8M0 or DIV (both code x / s). A team of 32 lanes
 * owns a token (it fits a wave of either vendor), lane l taking d = l, l +
 * 32, ...; the first kCached values per lane stay in registers between the
 * amax and the code pass. The fp32 scale goes after the block's values,
 * little-endian, byte by byte (block_size * D need not be a multiple of 4).
 * Negative slots are skipped. The validated slots are distinct, so no two
 * teams write one token.
 *
 * The gather is the exact inverse: a team per output row n finds its
 * sequence (the last s with cu[s] <= n), block block_table[s, j / bs] and
 * token j % bs, and copies the code bytes and the scale's bits. */
#include "hip/indexer_util.h" /* first: the runtime headers select MLA_HD's device form */

#include "core/ref/indexer_layout.h"

namespace {

constexpr int kTeam = 32;
constexpr int kCached = 8;
static_assert(MLA_WAVE_SIZE % kTeam == 0, "teams must not straddle waves");

struct kw_desc {
    int64_t T, D, bs;
    int64_t ks0, ks1, ss, cs0; /* k strides, slot stride, cache block stride (bytes) */
    int32_t layout;
};

template <int DK, int FNUZ, int UE8M0, typename SLOT>
__global__ __launch_bounds__(MLA_HIP_BLOCK) void k_cache_write_kernel(const void *k,
                                                                       const SLOT *slots,
                                                                       uint8_t *cache, kw_desc d)
{
    constexpr int32_t rule = UE8M0 ? MLA_FB_FP8_RULE_UE8M0 : MLA_FB_FP8_RULE_DIV;
    const int lane = (int)threadIdx.x & (kTeam - 1);
    const int64_t total = d.T * kTeam;
    for (int64_t i0 = block_first_item(); i0 < total; i0 += grid_items()) {
        const int64_t i = i0 + threadIdx.x;
        const int64_t t = i < total ? i / kTeam : 0;
        const int64_t slot = i < total ? (int64_t)slots[t * d.ss] : -1;
        /* skipped and idle teams see an empty row: they only feed the shuffles */
        const int64_t n = slot >= 0 ? d.D : 0;
        const int64_t x0 = t * d.ks0;
        float v[kCached];
        uint32_t amax = 0;
        int64_t c = lane;
#pragma unroll
        for (int j = 0; j < kCached; ++j, c += kTeam) {
            v[j] = c < n ? load_value<DK>(k, x0 + c * d.ks1) : 0.0f;
            const uint32_t a = mla_fb_bits(v[j]) & 0x7FFFFFFFu;
            amax = a > amax ? a : amax;
        }
        for (; c < n; c += kTeam) {
            const uint32_t a = mla_fb_bits(load_value<DK>(k, x0 + c * d.ks1)) & 0x7FFFFFFFu;
            amax = a > amax ? a : amax;
        }
        amax = team_max_u32(amax, kTeam);
        /* A NaN row's amax is its last NaN, |x| (the reference keeps taking
         * NaNs); the search shuffles, so the whole wave enters it or none. */
        const bool nan_row = amax > 0x7F800000u;
        if (mla_wave_any(nan_row)) {
            long long last = -1;
            for (c = lane; nan_row && c < n; c += kTeam) {
                const float xv = load_value<DK>(k, x0 + c * d.ks1);
                if (xv != xv)
                    last = c;
            }
            last = team_max_i64(last, kTeam);
            if (nan_row)
                amax = mla_fb_bits(load_value<DK>(k, x0 + last * d.ks1)) & 0x7FFFFFFFu;
        }
        if (n == 0)
            continue;
        const float s = mla_fb_fp8_group_scale(mla_fb_float(amax), rule, FNUZ);
        uint8_t *blk = cache + (slot / d.bs) * d.cs0;
        const int64_t tok = slot % d.bs;
        c = lane;
#pragma unroll
        for (int j = 0; j < kCached; ++j, c += kTeam)
            if (c < n)
                blk[mla_il_value_byte(d.layout, tok, c, d.D)] =
                    mla_fb_fp8_group_code(v[j], s, s, MLA_FB_FP8_RULE_DIV, FNUZ);
        for (; c < n; c += kTeam)
            blk[mla_il_value_byte(d.layout, tok, c, d.D)] = mla_fb_fp8_group_code(
                load_value<DK>(k, x0 + c * d.ks1), s, s, MLA_FB_FP8_RULE_DIV, FNUZ);
        if (lane == 0)
            mla_il_put_scale(blk + mla_il_scale_byte(tok, d.bs, d.D), s);
    }
}

template <int DK, int FNUZ, int UE8M0, typename SLOT>
mla_status launch_write(mla_context *ctx, const mla_indexer_cache_args *a, const kw_desc &d)
{
    const unsigned blocks = mla_hip_grid_blocks(ctx, d.T * kTeam, MLA_HIP_BLOCK);
    k_cache_write_kernel<DK, FNUZ, UE8M0, SLOT>
        <<<blocks, MLA_HIP_BLOCK, 0, mla_hip_state_of(ctx)->stream>>>(
            a->k.data, static_cast<const SLOT *>(a->slots.data),
            static_cast<uint8_t *>(a->cache.data), d);
    return mla_hip_check_launch(ctx, "indexer k cache write kernel launch");
}

template <int DK, int FNUZ, int UE8M0>
mla_status write_slots(mla_context *ctx, const mla_indexer_cache_args *a, const kw_desc &d)
{
    if (a->slots.dtype == MLA_DTYPE_I64)
        return launch_write<DK, FNUZ, UE8M0, int64_t>(ctx, a, d);
    return launch_write<DK, FNUZ, UE8M0, int32_t>(ctx, a, d);
}

template <int DK>
mla_status write_rule(mla_context *ctx, const mla_indexer_cache_args *a, const kw_desc &d)
{
    const bool fnuz = a->desc.dtype == MLA_DTYPE_FP8_E4M3FNUZ;
    if (fnuz)
        return a->desc.ue8m0 ? write_slots<DK, 1, 1>(ctx, a, d) : write_slots<DK, 1, 0>(ctx, a, d);
    return a->desc.ue8m0 ? write_slots<DK, 0, 1>(ctx, a, d) : write_slots<DK, 0, 0>(ctx, a, d);
}

/* ------------------------------------------------------------- gather */

struct kg_desc {
    int64_t rows, S, D, bs;
    int64_t cs0, bts0, bts1, cus, fs0, fs1, ss;
    int32_t layout;
};

__global__ __launch_bounds__(MLA_HIP_BLOCK) void k_gather_kernel(const uint8_t *cache,
                                                                  const int32_t *table,
                                                                  const int32_t *cu, uint8_t *k_fp8,
                                                                  uint32_t *k_scale, kg_desc d)
{
    const int lane = (int)threadIdx.x & (kTeam - 1);
    for (int64_t i = block_first_item() + threadIdx.x; i < d.rows * kTeam; i += grid_items()) {
        const int64_t n = i / kTeam;
        int64_t lo = 0, hi = d.S - 1; /* the last s with cu[s] <= n */
        while (lo < hi) {
            const int64_t mid = (lo + hi + 1) / 2;
            if ((int64_t)cu[mid * d.cus] <= n)
                lo = mid;
            else
                hi = mid - 1;
        }
        const int64_t j = n - cu[lo * d.cus];
        const int64_t block = table[lo * d.bts0 + (j / d.bs) * d.bts1];
        const uint8_t *blk = cache + block * d.cs0;
        const int64_t tok = j % d.bs;
        for (int64_t c = lane; c < d.D; c += kTeam)
            k_fp8[n * d.fs0 + c * d.fs1] = blk[mla_il_value_byte(d.layout, tok, c, d.D)];
        if (lane == 0)
            k_scale[n * d.ss] = mla_fb_bits(mla_il_get_scale(blk + mla_il_scale_byte(tok, d.bs, d.D)));
    }
}

mla_status check_memory(mla_context *ctx, const mla_tensor *const *ts, const char *const *names, int n)
{
    for (int i = 0; i < n; ++i) {
        mla_status st = mla_hip_check_tensor_memory(ctx, ts[i], names[i]);
        if (st != MLA_OK)
            return st;
    }
    return MLA_OK;
}

} // namespace

mla_status mla_hip_indexer_k_cache_write(mla_context *ctx, const mla_indexer_cache_args *a)
{
    const mla_hip_device_scope scope(mla_hip_state_of(ctx)->device);
    if (scope.error() != hipSuccess)
        return mla_hip_fail(ctx, scope.error(), "selecting the context's GPU");
    const mla_tensor *ts[3] = {&a->cache, &a->k, &a->slots};
    const char *names[3] = {"cache", "k", "slots"};
    mla_status st = check_memory(ctx, ts, names, 3);
    if (st != MLA_OK)
        return st;
    kw_desc d = {};
    d.T = a->k.shape[0];
    d.D = a->desc.head_dim;
    d.bs = a->desc.block_size;
    d.ks0 = a->k.stride[0];
    d.ks1 = a->k.stride[1];
    d.ss = a->slots.stride[0];
    d.cs0 = a->cache.stride[0];
    d.layout = (int32_t)a->desc.layout;
    if (d.T == 0)
        return MLA_OK;
    switch (a->k.dtype) {
    case MLA_DTYPE_F32:
        return write_rule<MLA_DTYPE_F32>(ctx, a, d);
    case MLA_DTYPE_BF16:
        return write_rule<MLA_DTYPE_BF16>(ctx, a, d);
    case MLA_DTYPE_F16:
        return write_rule<MLA_DTYPE_F16>(ctx, a, d);
    default:
        return mla_fail(ctx, MLA_ERR_UNSUPPORTED, "k.dtype", "k.dtype %s: no HIP cache writer",
                        mla_dtype_name(a->k.dtype));
    }
}

mla_status mla_hip_indexer_k_gather(mla_context *ctx, const mla_indexer_cache_args *a)
{
    const mla_hip_device_scope scope(mla_hip_state_of(ctx)->device);
    if (scope.error() != hipSuccess)
        return mla_hip_fail(ctx, scope.error(), "selecting the context's GPU");
    const mla_tensor *ts[5] = {&a->cache, &a->block_table, &a->cu_seq_lens, &a->k_fp8, &a->k_scale};
    const char *names[5] = {"cache", "block_table", "cu_seq_lens", "k_fp8", "k_scale"};
    mla_status st = check_memory(ctx, ts, names, 5);
    if (st != MLA_OK)
        return st;
    kg_desc d = {};
    d.rows = a->k_fp8.shape[0];
    d.S = a->cu_seq_lens.shape[0] - 1;
    d.D = a->desc.head_dim;
    d.bs = a->desc.block_size;
    d.cs0 = a->cache.stride[0];
    d.bts0 = a->block_table.stride[0];
    d.bts1 = a->block_table.stride[1];
    d.cus = a->cu_seq_lens.stride[0];
    d.fs0 = a->k_fp8.stride[0];
    d.fs1 = a->k_fp8.stride[1];
    d.ss = a->k_scale.stride[0];
    d.layout = (int32_t)a->desc.layout;
    if (d.rows == 0 || d.S <= 0)
        return MLA_OK;
    const unsigned blocks = mla_hip_grid_blocks(ctx, d.rows * kTeam, MLA_HIP_BLOCK);
    k_gather_kernel<<<blocks, MLA_HIP_BLOCK, 0, mla_hip_state_of(ctx)->stream>>>(
        static_cast<const uint8_t *>(a->cache.data), static_cast<const int32_t *>(a->block_table.data),
        static_cast<const int32_t *>(a->cu_seq_lens.data), static_cast<uint8_t *>(a->k_fp8.data),
        static_cast<uint32_t *>(a->k_scale.data), d);
    return mla_hip_check_launch(ctx, "indexer k gather kernel launch");
}
