/* 16-value loads and stores for the AVX-512 copies of the CPU kernels, bit
 * for bit the conversions of core/format_bits.h:
 *
 * - bf16 -> fp32: a 16-bit shift (exact);
 * - fp8 code -> fp32 times sp: the code moved into fp16 bit positions is an
 *   fp16 whose value is the code's value * 2^-8 (e4m3fn) or 2^-7 (e4m3fnuz),
 *   exactly, subnormals included; vcvtph2ps widens it exactly, and one
 *   multiply by sp = scale * 2^8 | 2^7 gives fl(code * scale) (the same real
 *   product, rounded once) as long as sp itself is exact. NaN codes (e4m3fn
 *   0x7F / 0xFF, e4m3fnuz 0x80) give the quiet NaN 0x7FC00000, as
 *   mla_fb_fp8_bits' decoders do;
 * - fp32 -> bf16: round to nearest even, NaN -> sign | 0x7FC0.
 *
 * The enum is plain C; the functions exist on x86 and carry MLA_TARGET_AVX512. */
#ifndef MLA_CPU_AVX512_VEC_H
#define MLA_CPU_AVX512_VEC_H

#include "cpu/cpu_kernels.h"

typedef enum mla_v16_kind {
    MLA_V16_F32 = 0,
    MLA_V16_BF16 = 1,
    MLA_V16_FN = 2,  /* fp8 e4m3fn codes */
    MLA_V16_FNUZ = 3 /* fp8 e4m3fnuz codes */
} mla_v16_kind;

/* Bytes per value of a kind. */
#define MLA_V16_SIZE(kind) ((kind) == MLA_V16_F32 ? 4 : (kind) == MLA_V16_BF16 ? 2 : 1)

/* The kind of a weight dtype (BF16 or fp8). */
static inline mla_v16_kind mla_v16_kind_of(mla_dtype dt)
{
    return dt == MLA_DTYPE_BF16         ? MLA_V16_BF16
           : dt == MLA_DTYPE_FP8_E4M3FN ? MLA_V16_FN
           : dt == MLA_DTYPE_F32        ? MLA_V16_F32
                                        : MLA_V16_FNUZ;
}

/* sp of a code scale s (see above): exact unless it overflows. */
static inline float mla_v16_fp8_fold(mla_v16_kind kind, float s)
{
    return s * (kind == MLA_V16_FN ? 256.0f : 128.0f);
}

#if MLA_CPU_X86
#include <immintrin.h>

#define MLA_AVX512_INLINE MLA_TARGET_AVX512 static inline __attribute__((always_inline))

/* The lanes of m loaded from p as fp32 (others 0); fp8: times sp (see above). */
MLA_AVX512_INLINE __m512 mla_v16_load(const void *p, const int kind, float sp, __mmask16 m)
{
    if (kind == MLA_V16_F32)
        return _mm512_maskz_loadu_ps(m, p);
    if (kind == MLA_V16_BF16) {
        const __m256i h = _mm256_maskz_loadu_epi16(m, p);
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    }
    const __m128i c = _mm_maskz_loadu_epi8(m, p);
    /* magnitude bits 6..0 -> fp16 bits 13..7, sign 7 -> 15: t + (t & 0x4000)
     * carries bit 14 up into bit 15 */
    const __m256i t = _mm256_slli_epi16(_mm256_cvtepu8_epi16(c), 7);
    const __m256i h = _mm256_add_epi16(t, _mm256_and_si256(t, _mm256_set1_epi16(0x4000)));
    const __m512 v = _mm512_mul_ps(_mm512_cvtph_ps(h), _mm512_set1_ps(sp));
    const __mmask16 nan =
        kind == MLA_V16_FN
            ? _mm_cmpeq_epi8_mask(_mm_and_si128(c, _mm_set1_epi8(0x7F)), _mm_set1_epi8(0x7F))
            : _mm_cmpeq_epi8_mask(c, _mm_set1_epi8((char)0x80));
    return _mm512_mask_mov_ps(v, nan & m, _mm512_castsi512_ps(_mm512_set1_epi32(0x7FC00000)));
}

/* The 16 lanes of v as bf16 (mla_fb_f32_to_bf16: nearest even, NaN ->
 * sign | 0x7FC0). */
MLA_AVX512_INLINE __m256i mla_v16_bf16(__m512 v)
{
    const __m512i u = _mm512_castps_si512(v), hi = _mm512_srli_epi32(u, 16);
    const __m512i odd = _mm512_and_si512(hi, _mm512_set1_epi32(1));
    const __m512i r = _mm512_srli_epi32(
        _mm512_add_epi32(u, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7FFF))), 16);
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(
        _mm512_and_si512(u, _mm512_set1_epi32(0x7FFFFFFF)), _mm512_set1_epi32(0x7F800000));
    const __m512i q =
        _mm512_or_si512(_mm512_and_si512(hi, _mm512_set1_epi32(0x8000)), _mm512_set1_epi32(0x7FC0));
    return _mm512_cvtepi32_epi16(_mm512_mask_mov_epi32(r, nan, q));
}

/* The lanes of m of v stored at p as fp32 or bf16 (mla_v16_bf16). */
MLA_AVX512_INLINE void mla_v16_store(void *p, __m512 v, int bf16, __mmask16 m)
{
    if (!bf16)
        _mm512_mask_storeu_ps(p, m, v);
    else
        _mm256_mask_storeu_epi16(p, m, mla_v16_bf16(v));
}

/* Saturating fp8 codes of 16 fp32 values, bit for bit mla_fb_f32_to_e4m3fn
 * (fnuz = 0) or mla_fb_f32_to_e4m3fnuz (fnuz = 1) with saturate = 1: normal
 * codes round away 20 mantissa bits of the rebiased value (RNE); below the
 * smallest normal the codes are linear, m = |x| * 2^(bias + 2) rounded to
 * nearest even by the conversion's embedded rounding (independent of MXCSR;
 * the product is exact, and an fp32 subnormal gives 0 either way). */
MLA_AVX512_INLINE __m128i mla_v16_to_fp8(__m512 x, int fnuz)
{
    const int bias = fnuz ? 8 : 7;
    const __m512i u = _mm512_castps_si512(x);
    const __m512i a = _mm512_and_si512(u, _mm512_set1_epi32(0x7FFFFFFF));
    const __m512i odd = _mm512_and_si512(_mm512_srli_epi32(a, 20), _mm512_set1_epi32(1));
    const __m512i nrm = _mm512_srli_epi32(
        _mm512_add_epi32(_mm512_sub_epi32(a, _mm512_set1_epi32((127 - bias) << 23)),
                         _mm512_add_epi32(odd, _mm512_set1_epi32(0x7FFFF))),
        20);
    const __m512 scaled = _mm512_mul_ps(
        _mm512_castsi512_ps(a), _mm512_castsi512_ps(_mm512_set1_epi32((127 + bias + 2) << 23)));
    const __m512i sub =
        _mm512_cvt_roundps_epi32(scaled, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    const __mmask16 small = _mm512_cmplt_epu32_mask(a, _mm512_set1_epi32((128 - bias) << 23));
    __m512i c = _mm512_mask_mov_epi32(nrm, small, sub);
    c = _mm512_min_epu32(c, _mm512_set1_epi32(fnuz ? 0x7F : 0x7E)); /* saturate (inf too) */
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(a, _mm512_set1_epi32(0x7F800000));
    const __m512i sign = _mm512_and_si512(_mm512_srli_epi32(u, 24), _mm512_set1_epi32(0x80));
    if (fnuz) { /* no -0; the one NaN 0x80 */
        const __mmask16 zero = _mm512_cmpeq_epi32_mask(c, _mm512_setzero_si512());
        c = _mm512_mask_or_epi32(c, (__mmask16)~zero, c, sign);
        c = _mm512_mask_mov_epi32(c, nan, _mm512_set1_epi32(0x80));
    } else {
        c = _mm512_or_si512(c, sign);
        c = _mm512_mask_mov_epi32(c, nan, _mm512_or_si512(sign, _mm512_set1_epi32(0x7F)));
    }
    return _mm512_cvtepi32_epi8(c);
}

/* The lanes below n (0 <= n <= 16). */
static inline __mmask16 mla_v16_mask(int64_t n)
{
    return n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << (n > 0 ? n : 0)) - 1u);
}
#endif

#endif
