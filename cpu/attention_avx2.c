/* The attention tile kernels for AVX2 + FMA (cpu/attention_tiles.h): 8-lane
 * registers, a group of 16 pairs in two of them; score tiles of one group x
 * 4 keys (8 accumulators, 6 loads per 8 FMAs), P @ V tiles of 4 pairs x 24
 * value dims (12 accumulators, 7 loads per 12 FMAs): with the loaded
 * operands they stay within the 16 ymm registers, and the two FMA ports,
 * not the loads, bound them. exp: SLEEF's Sleef_expf8_u10avx2 (1 ulp) when the build has SLEEF,
 * else the template's polynomial. */
#include <math.h>

#include "cpu/attention_internal.h"

#if MLA_CPU_X86
#include <immintrin.h>

#define ATT_SUFFIX avx2
#define ATT_TARGET __attribute__((target("avx2,fma")))
#define ATT_W 8
#define ATT_GROUPS 1
#define ATT_QK_NA1 4
#define ATT_PV_MP 4
#define ATT_PV_NV 3
typedef __m256 V;

#if defined(MLA_HAVE_SLEEF)
/* sleef.h declares its __m256 functions only under __AVX__ (see
 * cpu/attention_avx512.c). */
#if defined(__clang__)
__attribute__((target("avx2,fma"))) __m256 Sleef_expf8_u10avx2(__m256 x);
#else
#pragma GCC push_options
#pragma GCC target("avx2,fma")
__m256 Sleef_expf8_u10avx2(__m256 x);
#pragma GCC pop_options
#endif
#endif

#define ATT_V1 static inline __attribute__((always_inline)) ATT_TARGET

ATT_V1 V v_load(const float *p) { return _mm256_loadu_ps(p); }
ATT_V1 void v_store(float *p, V x) { _mm256_storeu_ps(p, x); }
ATT_V1 V v_set1(float x) { return _mm256_set1_ps(x); }
ATT_V1 V v_zero(void) { return _mm256_setzero_ps(); }
ATT_V1 V v_fma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
ATT_V1 V v_mul(V a, V b) { return _mm256_mul_ps(a, b); }
ATT_V1 V v_add(V a, V b) { return _mm256_add_ps(a, b); }
ATT_V1 V v_sub(V a, V b) { return _mm256_sub_ps(a, b); }
ATT_V1 V v_max(V a, V b) { return _mm256_max_ps(a, b); }
ATT_V1 V v_mask_above(V x, int32_t kp, const int32_t *plim)
{
    const __m256i m =
        _mm256_cmpgt_epi32(_mm256_set1_epi32(kp), _mm256_loadu_si256((const __m256i *)plim));
    return _mm256_blendv_ps(x, _mm256_set1_ps(-INFINITY), _mm256_castsi256_ps(m));
}
ATT_V1 V v_ninf_to_zero(V x)
{
    return _mm256_andnot_ps(_mm256_cmp_ps(x, _mm256_set1_ps(-INFINITY), _CMP_EQ_OQ), x);
}

/* the template's exp polynomial (always: softmax_poly) */
ATT_V1 V v_min(V a, V b) { return _mm256_min_ps(a, b); }
ATT_V1 V v_round(V x) { return _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
ATT_V1 V v_fnma(V a, V b, V c) { return _mm256_fnmadd_ps(a, b, c); }

/* 2^k for integer lanes -126 <= k <= 127. */
ATT_V1 V pow2i(__m256i k)
{
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(k, _mm256_set1_epi32(127)), 23));
}

/* p 2^n for n in [-150, 128] as p 2^(n/2) 2^(n - n/2), two normal powers,
 * so that only the last product rounds (as vscalefps does). */
ATT_V1 V v_scale2(V p, V n)
{
    const __m256i ni = _mm256_cvtps_epi32(n), half = _mm256_srai_epi32(ni, 1);
    return _mm256_mul_ps(_mm256_mul_ps(p, pow2i(half)), pow2i(_mm256_sub_epi32(ni, half)));
}
ATT_V1 V v_zero_where_le(V y, V x, float c)
{
    return _mm256_andnot_ps(_mm256_cmp_ps(x, _mm256_set1_ps(c), _CMP_LE_OQ), y);
}
#if defined(MLA_HAVE_SLEEF)
ATT_V1 V v_exp(V x) { return Sleef_expf8_u10avx2(x); }
#endif

#include "cpu/attention_tiles.h"

#endif
