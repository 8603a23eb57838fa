/* The attention tile kernels for AVX-512 (cpu/attention_tiles.h): 16-lane
 * registers; score tiles of one group (16 pairs) or two x 8 keys; P @ V
 * tiles of 4 pairs x 64 value dims (16 accumulators, 8 loads per 16 FMAs). exp: SLEEF's Sleef_expf16_u10avx512f (1 ulp) when
 * the build has SLEEF, else the template's polynomial (2^n by vscalefps). */
#include <math.h>

#include "cpu/attention_internal.h"

#if MLA_CPU_X86
#include <immintrin.h>

#define ATT_SUFFIX avx512
#define ATT_TARGET MLA_TARGET_AVX512
#define ATT_W 16
#define ATT_GROUPS 2
#define ATT_QK_NA1 8
#define ATT_QK_NA2 8
#define ATT_PV_MP 4
#define ATT_PV_NV 4
typedef __m512 V;

#if defined(MLA_HAVE_SLEEF)
/* sleef.h declares its __m512 functions only under __AVX512F__; the library
 * is built without it (run-time dispatch), so the one used is declared here. */
#if defined(__clang__) /* clang takes the target on the declaration */
__attribute__((target("avx512f"))) __m512 Sleef_expf16_u10avx512f(__m512 x);
#else
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,avx512cd")
__m512 Sleef_expf16_u10avx512f(__m512 x);
#pragma GCC pop_options
#endif
#endif

#define ATT_V1 static inline __attribute__((always_inline)) ATT_TARGET

ATT_V1 V v_load(const float *p) { return _mm512_loadu_ps(p); }
ATT_V1 void v_store(float *p, V x) { _mm512_storeu_ps(p, x); }
ATT_V1 V v_set1(float x) { return _mm512_set1_ps(x); }
ATT_V1 V v_zero(void) { return _mm512_setzero_ps(); }
ATT_V1 V v_fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
ATT_V1 V v_mul(V a, V b) { return _mm512_mul_ps(a, b); }
ATT_V1 V v_add(V a, V b) { return _mm512_add_ps(a, b); }
ATT_V1 V v_sub(V a, V b) { return _mm512_sub_ps(a, b); }
ATT_V1 V v_max(V a, V b) { return _mm512_max_ps(a, b); }
ATT_V1 V v_mask_above(V x, int32_t kp, const int32_t *plim)
{
    const __mmask16 m = _mm512_cmpgt_epi32_mask(_mm512_set1_epi32(kp), _mm512_loadu_si512(plim));
    return _mm512_mask_mov_ps(x, m, _mm512_set1_ps(-INFINITY));
}
ATT_V1 V v_ninf_to_zero(V x)
{
    return _mm512_mask_mov_ps(x, _mm512_cmp_ps_mask(x, _mm512_set1_ps(-INFINITY), _CMP_EQ_OQ),
                              _mm512_setzero_ps());
}

/* the template's exp polynomial (always: softmax_poly) */
ATT_V1 V v_min(V a, V b) { return _mm512_min_ps(a, b); }
ATT_V1 V v_round(V x)
{
    return _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
}
ATT_V1 V v_fnma(V a, V b, V c) { return _mm512_fnmadd_ps(a, b, c); }
ATT_V1 V v_scale2(V p, V n) { return _mm512_scalef_ps(p, n); }
ATT_V1 V v_zero_where_le(V y, V x, float c)
{
    return _mm512_mask_mov_ps(y, _mm512_cmp_ps_mask(x, _mm512_set1_ps(c), _CMP_LE_OQ),
                              _mm512_setzero_ps());
}
#if defined(MLA_HAVE_SLEEF)
ATT_V1 V v_exp(V x) { return Sleef_expf16_u10avx512f(x); }
#endif

#include "cpu/attention_tiles.h"

#endif
