/* fp8 group quant: x [M, K] in groups of G consecutive values along K ->
 * fp8 codes [M, K] and one fp32 scale per group (mla_fp8_scale_rule), with the
 * scale and code formulas of core/format_bits.h.
 *
 * A team of T lanes (a power of two up to 32, so it fits a wave on both
 * vendors) owns a group; lane l takes values l, l + T, l + 2T, ..., so a
 * team's loads are contiguous. The first kCached values of each lane stay in
 * registers between the amax pass and the code pass (G <= 256 never reloads);
 * longer groups read the rest again, from cache.
 *
 * NaN, as the host reference does it: its amax loop keeps taking NaNs, so a
 * group's amax is its last NaN (by k) with the sign cleared (fabsf); the
 * scale and code formulas then follow format_bits' NaN rule (the first NaN
 * operand, quieted), which is the x86 hosts'. */
#include "hip/device_util.h"

namespace {

constexpr int kMaxTeam = 32;
constexpr int kCached = 8;
static_assert(MLA_WAVE_SIZE % kMaxTeam == 0, "teams must not straddle waves");

struct fq_desc {
    int64_t M, G, groups; /* groups per row = K / G */
    int64_t xs0, xs1, cs0, cs1, ss0, ss1;
    int32_t team; /* lanes per group */
};

/* RULE is a template parameter so that each kernel keeps only its own
 * quotient (AITER's product or the others' division) in the code loop. */
template <int DT, int FP8, int RULE>
__global__ __launch_bounds__(MLA_HIP_BLOCK) void fp8_group_quant_kernel(const void *x,
                                                                         uint8_t *codes,
                                                                         float *scales, fq_desc d)
{
    constexpr int fnuz = FP8 == MLA_DTYPE_FP8_E4M3FNUZ;
    const int T = d.team;
    const int lane = (int)threadIdx.x & (T - 1);
    const int64_t total = d.M * d.groups * T;
    const int64_t xstep = T * d.xs1, cstep = T * d.cs1;
    for (int64_t t0 = block_first_item(); t0 < total; t0 += grid_items()) {
        const int64_t t = t0 + threadIdx.x;
        const bool active = t < total;
        int64_t m, g;
        divmod64(active ? t / T : 0, d.groups, m, g);
        /* This lane's first element; it then steps T elements at a time. */
        const int64_t k0 = g * d.G;
        const int64_t x0 = m * d.xs0 + (k0 + lane) * d.xs1;
        const int64_t c0 = m * d.cs0 + (k0 + lane) * d.cs1;
        /* Inactive lanes see an empty group: they only feed the shuffles. */
        const int64_t n = active ? d.G : 0;

        float v[kCached];
        uint32_t amax = 0;
        int64_t k = lane, xo = x0;
#pragma unroll
        for (int j = 0; j < kCached; ++j, k += T, xo += xstep) {
            v[j] = k < n ? load_value<DT>(x, xo) : 0.0f;
            const uint32_t a = mla_fb_bits(v[j]) & 0x7FFFFFFFu;
            amax = a > amax ? a : amax;
        }
        for (; k < n; k += T, xo += xstep) {
            const uint32_t a = mla_fb_bits(load_value<DT>(x, xo)) & 0x7FFFFFFFu;
            amax = a > amax ? a : amax;
        }
        amax = team_max_u32(amax, T);

        /* A NaN group's amax is its last NaN, |x| (see above). The search
         * shuffles, so the whole wave enters it or none. */
        const bool nan_group = amax > 0x7F800000u;
        if (mla_wave_any(nan_group)) {
            long long last = -1;
            xo = x0;
            for (k = lane; nan_group && k < n; k += T, xo += xstep) {
                const float xv = load_value<DT>(x, xo);
                if (xv != xv)
                    last = k;
            }
            last = team_max_i64(last, T);
            if (nan_group)
                amax = mla_fb_bits(load_value<DT>(x, x0 + (last - lane) * d.xs1)) & 0x7FFFFFFFu;
        }
        if (!active)
            continue;
        const float s = mla_fb_fp8_group_scale(mla_fb_float(amax), RULE, fnuz);
        const float inv = mla_fb_div(1.0f, s); /* AITER: the reciprocal in fp32 first */
        if (lane == 0)
            scales[m * d.ss0 + g * d.ss1] = s;

        int64_t co = c0;
        k = lane;
        xo = x0;
#pragma unroll
        for (int j = 0; j < kCached; ++j, k += T, co += cstep, xo += xstep)
            if (k < n)
                codes[co] = mla_fb_fp8_group_code(v[j], s, inv, RULE, fnuz);
        for (; k < n; k += T, co += cstep, xo += xstep)
            codes[co] = mla_fb_fp8_group_code(load_value<DT>(x, xo), s, inv, RULE, fnuz);
    }
}

template <int DT, int FP8, int RULE>
mla_status launch(mla_context *ctx, const mla_fp8_group_quant_args *a, const fq_desc &d)
{
    const unsigned blocks = mla_hip_grid_blocks(ctx, d.M * d.groups * d.team, MLA_HIP_BLOCK);
    fp8_group_quant_kernel<DT, FP8, RULE>
        <<<blocks, MLA_HIP_BLOCK, 0, mla_hip_state_of(ctx)->stream>>>(
            a->x.data, static_cast<uint8_t *>(a->codes.data), static_cast<float *>(a->scales.data),
            d);
    return mla_hip_check_launch(ctx, "fp8_group_quant kernel launch");
}

template <int DT, int FP8>
mla_status dispatch_rule(mla_context *ctx, const mla_fp8_group_quant_args *a, const fq_desc &d)
{
    switch (a->rule) {
    case MLA_FP8_SCALE_AITER:
        return launch<DT, FP8, MLA_FB_FP8_RULE_AITER>(ctx, a, d);
    case MLA_FP8_SCALE_UE8M0:
        return launch<DT, FP8, MLA_FB_FP8_RULE_UE8M0>(ctx, a, d);
    case MLA_FP8_SCALE_DIV:
        return launch<DT, FP8, MLA_FB_FP8_RULE_DIV>(ctx, a, d);
    default:
        return mla_fail(ctx, MLA_ERR_UNSUPPORTED, "rule", "fp8 scale rule %d: no HIP kernel",
                        (int)a->rule);
    }
}

template <int DT>
mla_status dispatch_fp8(mla_context *ctx, const mla_fp8_group_quant_args *a, const fq_desc &d)
{
    if (a->codes.dtype == MLA_DTYPE_FP8_E4M3FNUZ)
        return dispatch_rule<DT, MLA_DTYPE_FP8_E4M3FNUZ>(ctx, a, d);
    return dispatch_rule<DT, MLA_DTYPE_FP8_E4M3FN>(ctx, a, d);
}

} // namespace

mla_status mla_hip_fp8_group_quant(mla_context *ctx, const mla_fp8_group_quant_args *a)
{
    const mla_hip_device_scope scope(mla_hip_state_of(ctx)->device);
    if (scope.error() != hipSuccess)
        return mla_hip_fail(ctx, scope.error(), "selecting the context's GPU");
    mla_status st = mla_hip_check_tensor_memory(ctx, &a->x, "x");
    if (st == MLA_OK)
        st = mla_hip_check_tensor_memory(ctx, &a->codes, "codes");
    if (st == MLA_OK)
        st = mla_hip_check_tensor_memory(ctx, &a->scales, "scales");
    if (st != MLA_OK)
        return st;
    fq_desc d = {};
    d.M = a->M;
    d.G = a->group;
    d.groups = a->K / a->group;
    d.xs0 = a->x.stride[0];
    d.xs1 = a->x.stride[1];
    d.cs0 = a->codes.stride[0];
    d.cs1 = a->codes.stride[1];
    d.ss0 = a->scales.stride[0];
    d.ss1 = a->scales.stride[1];
    /* The largest power of two <= G, up to a wave-safe 32: no idle lane in
     * the first round, and G = 128 takes 4 values per lane. */
    d.team = 1;
    while (d.team < kMaxTeam && 2 * d.team <= d.G)
        d.team *= 2;
    if (d.M == 0 || d.groups == 0)
        return MLA_OK;
    switch (a->x.dtype) {
    case MLA_DTYPE_F32:
        return dispatch_fp8<MLA_DTYPE_F32>(ctx, a, d);
    case MLA_DTYPE_F16:
        return dispatch_fp8<MLA_DTYPE_F16>(ctx, a, d);
    case MLA_DTYPE_BF16:
        return dispatch_fp8<MLA_DTYPE_BF16>(ctx, a, d);
    default:
        return mla_fail(ctx, MLA_ERR_UNSUPPORTED, "x.dtype", "x.dtype %s: no HIP fp8 kernel",
                        mla_dtype_name(a->x.dtype));
    }
}
