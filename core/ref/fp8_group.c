/* Reference fp8 group quant and dequant: x [M, K] in groups of `group`
 * consecutive values along K, one fp32 scale per group (mla_fp8_scale_rule).
 *
 * Special values follow the formulas: amax propagates NaN (like torch.amax),
 * so a group holding a NaN gets a NaN scale and NaN codes; an infinity gives
 * an infinite scale. */
#include "core/ref/ref_kernels.h"
#include "core/ref/tensor_access.h"

/* max(a, floor) that keeps a NaN a (torch.clamp(min=) semantics). */
static float max_keep_nan(float a, float floor_value)
{
    return (isnan(a) || a > floor_value) ? a : floor_value;
}

/* 2^ceil(log2 q), taken exactly from q's exponent: q = f * 2^e with f in
 * [0.5, 1); f == 0.5 means q is already a power of two. NaN / inf stay. */
static float pow2_ceil(float q)
{
    if (!isfinite(q))
        return q;
    int e;
    float f = frexpf(q, &e);
    return f == 0.5f ? q : ldexpf(1.0f, e);
}

/* The divisor of each rule: AITER the format's max (448 | 240); UE8M0 and
 * DIV 448 for e4m3fn and 224 for e4m3fnuz (vLLM's indexer). */
static float rule_divisor(mla_fp8_scale_rule rule, mla_dtype fp8)
{
    if (rule == MLA_FP8_SCALE_AITER)
        return mla_fp8_max(fp8);
    return fp8 == MLA_DTYPE_FP8_E4M3FNUZ ? 224.0f : 448.0f;
}

/* Scale of a group from its amax, all in fp32:
 * AITER s = max(amax, 1e-10) / 448|240; UE8M0 s = 2^ceil(log2(max(amax, 1e-4) / 448|224));
 * DIV s = max(amax, 1e-4) / 448|224. */
static float group_scale(float amax, mla_fp8_scale_rule rule, mla_dtype fp8)
{
    float div = rule_divisor(rule, fp8);
    if (rule == MLA_FP8_SCALE_AITER)
        return max_keep_nan(amax, 1e-10f) / div;
    float s = max_keep_nan(amax, 1e-4f) / div;
    return rule == MLA_FP8_SCALE_UE8M0 ? pow2_ceil(s) : s;
}

/* q = sat(x * fp32(1/s)) for AITER, sat(x / s) otherwise: clamp to
 * [-max, max] (NaN passes), then the saturating fp8 conversion. */
static uint8_t quantize(float x, float s, float inv, mla_fp8_scale_rule rule, mla_dtype fp8)
{
    float fmax = mla_fp8_max(fp8);
    float q = rule == MLA_FP8_SCALE_AITER ? x * inv : x / s;
    if (q > fmax)
        q = fmax;
    else if (q < -fmax)
        q = -fmax;
    return mla_f32_to_fp8(q, fp8, MLA_SATURATE);
}

mla_status mla_ref_fp8_group_quant(mla_context *ctx, const mla_fp8_group_quant_args *a)
{
    (void)ctx;
    mla_dtype fp8 = a->codes.dtype;
    for (int64_t m = 0; m < a->M; ++m) {
        for (int64_t g = 0; g < a->K / a->group; ++g) {
            int64_t k0 = g * a->group;
            float amax = 0.0f;
            for (int64_t k = k0; k < k0 + a->group; ++k) {
                float v = fabsf(mla_ref_load_f32(&a->x, mla_ref_offset2(&a->x, m, k)));
                if (isnan(v) || v > amax) /* once NaN, amax stays NaN */
                    amax = v;
            }
            float s = group_scale(amax, a->rule, fp8);
            float inv = 1.0f / s; /* AITER: the reciprocal rounded to fp32 first */
            ((float *)a->scales.data)[mla_ref_offset2(&a->scales, m, g)] = s;
            for (int64_t k = k0; k < k0 + a->group; ++k) {
                float x = mla_ref_load_f32(&a->x, mla_ref_offset2(&a->x, m, k));
                mla_ref_store_u8(&a->codes, mla_ref_offset2(&a->codes, m, k),
                                 quantize(x, s, inv, a->rule, fp8));
            }
        }
    }
    return MLA_OK;
}

/* y[m, k] = fp8(code) * scale[m, k / group] in fp32, rounded once to y's dtype. */
mla_status mla_ref_fp8_group_dequant(mla_context *ctx, const mla_fp8_group_dequant_args *a)
{
    (void)ctx;
    for (int64_t m = 0; m < a->M; ++m) {
        for (int64_t k = 0; k < a->K; ++k) {
            float s = ((const float *)a->scales.data)[mla_ref_offset2(&a->scales, m, k / a->group)];
            float v = mla_ref_load_f32(&a->codes, mla_ref_offset2(&a->codes, m, k)) * s;
            mla_ref_store_f32(&a->y, mla_ref_offset2(&a->y, m, k), v, MLA_SATURATE);
        }
    }
    return MLA_OK;
}
