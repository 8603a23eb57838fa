/* The AVX512-BF16 pieces of the CPU projection (cpu/linear_kernel.h):
 * vdpbf16ps micro-kernels for bf16 x against bf16 W (read in place) and
 * against fp8 W (decoded to its exact bf16 codes, block by block scaled),
 * the exponent scan behind mla_cpu_dp_safe, and the CPU check. Per lane and
 * pair of k the instruction adds the odd product, rounds, adds the even
 * product, rounds; products of bf16 values are exact in fp32. */
#include <stdlib.h>
#include <string.h>

#include "cpu/linear_kernel.h"

#if MLA_CPU_X86
#include <immintrin.h>

#if defined(__clang__)
#define MLA_UNROLL _Pragma("unroll")
#else
#define MLA_UNROLL _Pragma("GCC unroll 8")
#endif

#if defined(__clang__)
#define TARGET_BF16 __attribute__((target(MLA_AVX512_ISAS ",avx512bf16")))
#else
#define TARGET_BF16 __attribute__((target(MLA_AVX512_ISAS ",avx512bf16,prefer-vector-width=512")))
#endif

/* 32 bf16 of row p from value k on (lanes m: 2 bits per fp32 lane), as pairs. */
TARGET_BF16 static inline __attribute__((always_inline)) __m512bh
pairs(const uint16_t *p, __mmask32 m)
{
    return (__m512bh)_mm512_maskz_loadu_epi16(m, p);
}

/* MTC x NR accumulators; 32 values of k per step, the tail under a mask. */
TARGET_BF16 static inline __attribute__((always_inline)) void
ukrdp(const uint16_t *x, int64_t ldx, const int MTC, const lin_wtile *w, int64_t kc, float *lanes,
      int first, float *sums)
{
    const uint16_t *w0 = w->row[0], *w1 = w->row[1], *w2 = w->row[2];
    __m512 acc[MT][NR];
    MLA_UNROLL for (int t = 0; t < MTC; ++t)
        MLA_UNROLL for (int j = 0; j < NR; ++j)
            acc[t][j] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(lanes + (t * NR + j) * LANES);
    for (int64_t k = 0; k < kc; k += 2 * LANES) {
        const __mmask32 m = kc - k >= 2 * LANES ? 0xFFFFFFFFu : (__mmask32)((1ull << (kc - k)) - 1u);
        if (w->ahead) {
            _mm_prefetch((const char *)(w0 + k) + w->ahead, _MM_HINT_T0);
            _mm_prefetch((const char *)(w1 + k) + w->ahead, _MM_HINT_T0);
            _mm_prefetch((const char *)(w2 + k) + w->ahead, _MM_HINT_T0);
        }
        const __m512bh v0 = pairs(w0 + k, m), v1 = pairs(w1 + k, m), v2 = pairs(w2 + k, m);
        MLA_UNROLL for (int t = 0; t < MTC; ++t) {
            __m512bh xv = pairs(x + t * ldx + k, m);
#if defined(__GNUC__)
            __asm__("" : "+v"(xv)); /* one load into a register, not one per operand */
#endif
            acc[t][0] = _mm512_dpbf16_ps(acc[t][0], xv, v0);
            acc[t][1] = _mm512_dpbf16_ps(acc[t][1], xv, v1);
            acc[t][2] = _mm512_dpbf16_ps(acc[t][2], xv, v2);
        }
    }
    MLA_UNROLL for (int t = 0; t < MTC; ++t)
        MLA_UNROLL for (int j = 0; j < NR; ++j)
            _mm512_storeu_ps(lanes + (t * NR + j) * LANES, acc[t][j]);
    if (sums)
        mla_cpu_linear_finish512(lanes, MTC * NR, sums);
}

TARGET_BF16 void mla_cpu_linear_ukr_dp(const uint16_t *x, int64_t ldx, int mt, const lin_wtile *w,
                               int64_t kc, float *lanes, int first, float *sums)
{
    switch (mt) {
    case 1: ukrdp(x, ldx, 1, w, kc, lanes, first, sums); break;
    case 2: ukrdp(x, ldx, 2, w, kc, lanes, first, sums); break;
    case 3: ukrdp(x, ldx, 3, w, kc, lanes, first, sums); break;
    case 4: ukrdp(x, ldx, 4, w, kc, lanes, first, sums); break;
    case 5: ukrdp(x, ldx, 5, w, kc, lanes, first, sums); break;
    case 6: ukrdp(x, ldx, 6, w, kc, lanes, first, sums); break;
    case 7: ukrdp(x, ldx, 7, w, kc, lanes, first, sums); break;
    default: ukrdp(x, ldx, MT, w, kc, lanes, first, sums); break;
    }
}
/* mla_cpu_bf16_min_exp, 32 values at a time: the exponent bits of the
 * nonzero ones into an unsigned 16-bit minimum. */
TARGET_BF16 int mla_cpu_linear_min_exp(const uint16_t *p, int64_t n)
{
    __m512i m = _mm512_set1_epi16(0x7F80);
    const __m512i em = _mm512_set1_epi16(0x7F80), mag = _mm512_set1_epi16(0x7FFF);
    for (int64_t i = 0; i < n; i += 2 * LANES) {
        const __mmask32 ld = n - i >= 2 * LANES ? 0xFFFFFFFFu : (__mmask32)((1ull << (n - i)) - 1u);
        const __m512i v = _mm512_maskz_loadu_epi16(ld, p + i);
        const __mmask32 nz = _mm512_test_epi16_mask(v, mag);
        m = _mm512_mask_min_epu16(m, nz, m, _mm512_and_si512(v, em));
    }
    /* fold the 32 lanes: 256, 128, 64 bits, then the words of a qword */
    __m256i h = _mm256_min_epu16(_mm512_castsi512_si256(m), _mm512_extracti64x4_epi64(m, 1));
    __m128i q = _mm_min_epu16(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
    q = _mm_min_epu16(q, _mm_srli_si128(q, 8));
    q = _mm_min_epu16(q, _mm_srli_si128(q, 4));
    q = _mm_min_epu16(q, _mm_srli_si128(q, 2));
    const unsigned e = (unsigned)_mm_extract_epi16(q, 0) >> 7;
    return (int)e; /* 0xFF: no nonzero value (or only inf / NaN) */
}

/* 32 fp8 codes -> their exact values as bf16 (fp8 values are bf16 values):
 * normal codes rebias, (m << 4) + (127 - bias) << 7 for the 7 magnitude bits
 * m; the 8 subnormal magnitudes (exponent field 0) from a table; the sign to
 * bit 15; NaN codes (e4m3fn 0x7F / 0xFF, e4m3fnuz 0x80) -> 0x7FC0, the bf16
 * of mla_fb_e4m3fn(uz)_to_f32's +NaN. */
TARGET_BF16 static inline __attribute__((always_inline)) __m512i fp8x32_bf16(__m256i c8, int fnuz)
{
    static const uint16_t sub_fn[32] = {0, 0x3B00, 0x3B80, 0x3BC0, 0x3C00, 0x3C20, 0x3C40, 0x3C60};
    static const uint16_t sub_fnuz[32] = {0,      0x3A80, 0x3B00, 0x3B40,
                                          0x3B80, 0x3BA0, 0x3BC0, 0x3BE0};
    const __m512i c = _mm512_cvtepu8_epi16(c8);
    const __m512i m = _mm512_and_si512(c, _mm512_set1_epi16(0x7F));
    __m512i v = _mm512_add_epi16(_mm512_slli_epi16(m, 4),
                                 _mm512_set1_epi16((short)((fnuz ? 119 : 120) << 7)));
    const __mmask32 sub = _mm512_cmplt_epu16_mask(m, _mm512_set1_epi16(8));
    v = _mm512_mask_permutexvar_epi16(v, sub, m, _mm512_loadu_si512(fnuz ? sub_fnuz : sub_fn));
    v = _mm512_or_si512(v, _mm512_slli_epi16(_mm512_and_si512(c, _mm512_set1_epi16(0x80)), 8));
    const __mmask32 nan = fnuz ? _mm512_cmpeq_epi16_mask(c, _mm512_set1_epi16(0x80))
                               : _mm512_cmpeq_epi16_mask(m, _mm512_set1_epi16(0x7F));
    return _mm512_mask_mov_epi16(v, nan, _mm512_set1_epi16(0x7FC0));
}

TARGET_BF16 void mla_cpu_linear_fp8_to_bf16(const uint8_t *codes, int64_t n, int fnuz, uint16_t *out)
{
    for (int64_t i = 0; i < n; i += 2 * LANES) {
        const __mmask32 m = n - i >= 2 * LANES ? 0xFFFFFFFFu : (__mmask32)((1ull << (n - i)) - 1u);
        const __m512i v = fp8x32_bf16(_mm256_maskz_loadu_epi8(m, codes + i), fnuz);
        _mm512_storeu_si512(out + i, _mm512_maskz_mov_epi16(m, v)); /* zeros past n */
    }
}

/* MTC (<= MT / 2) x NR lanes plus as many block sums; blocks of WBLOCK. */
TARGET_BF16 static inline __attribute__((always_inline)) void
ukrdp8(const uint16_t *x, int64_t ldx, const int MTC, const uint16_t *w, int64_t ldw,
       const float *const *s, int64_t ss, int64_t kc, float *lanes, int first, float *sums)
{
    __m512 acc[MT / 2][NR];
    MLA_UNROLL for (int t = 0; t < MTC; ++t)
        MLA_UNROLL for (int j = 0; j < NR; ++j)
            acc[t][j] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(lanes + (t * NR + j) * LANES);
    for (int64_t b0 = 0; b0 < kc; b0 += WBLOCK) {
        const int64_t b1 = kc - b0 < WBLOCK ? kc : b0 + WBLOCK;
        __m512 blk[MT / 2][NR];
        MLA_UNROLL for (int t = 0; t < MTC; ++t)
            MLA_UNROLL for (int j = 0; j < NR; ++j)
                blk[t][j] = _mm512_setzero_ps();
        for (int64_t k = b0; k < b1; k += 2 * LANES) {
            const __mmask32 m = b1 - k >= 2 * LANES ? 0xFFFFFFFFu : (__mmask32)((1ull << (b1 - k)) - 1u);
            const __m512bh v0 = pairs(w + k, m), v1 = pairs(w + ldw + k, m);
            const __m512bh v2 = pairs(w + 2 * ldw + k, m);
            MLA_UNROLL for (int t = 0; t < MTC; ++t) {
                __m512bh xv = pairs(x + t * ldx + k, m);
#if defined(__GNUC__)
                __asm__("" : "+v"(xv));
#endif
                blk[t][0] = _mm512_dpbf16_ps(blk[t][0], xv, v0);
                blk[t][1] = _mm512_dpbf16_ps(blk[t][1], xv, v1);
                blk[t][2] = _mm512_dpbf16_ps(blk[t][2], xv, v2);
            }
        }
        const int64_t bi = (b0 / WBLOCK) * ss;
        const __m512 s0 = _mm512_set1_ps(s[0][bi]), s1 = _mm512_set1_ps(s[1][bi]);
        const __m512 s2 = _mm512_set1_ps(s[2][bi]);
        MLA_UNROLL for (int t = 0; t < MTC; ++t) {
            acc[t][0] = _mm512_fmadd_ps(blk[t][0], s0, acc[t][0]);
            acc[t][1] = _mm512_fmadd_ps(blk[t][1], s1, acc[t][1]);
            acc[t][2] = _mm512_fmadd_ps(blk[t][2], s2, acc[t][2]);
        }
    }
    MLA_UNROLL for (int t = 0; t < MTC; ++t)
        MLA_UNROLL for (int j = 0; j < NR; ++j)
            _mm512_storeu_ps(lanes + (t * NR + j) * LANES, acc[t][j]);
    if (sums)
        mla_cpu_linear_finish512(lanes, MTC * NR, sums);
}

TARGET_BF16 void mla_cpu_linear_ukr_dp8(const uint16_t *x, int64_t ldx, int mt, const uint16_t *w,
                                int64_t ldw, const float *const *s, int64_t ss, int64_t kc,
                                float *lanes, int first, float *sums)
{
    switch (mt) {
    case 1: ukrdp8(x, ldx, 1, w, ldw, s, ss, kc, lanes, first, sums); break;
    case 2: ukrdp8(x, ldx, 2, w, ldw, s, ss, kc, lanes, first, sums); break;
    case 3: ukrdp8(x, ldx, 3, w, ldw, s, ss, kc, lanes, first, sums); break;
    default: ukrdp8(x, ldx, MT / 2, w, ldw, s, ss, kc, lanes, first, sums); break;
    }
}

#endif
