/* Non-temporal 16-value stores for the CPU prepare kernels whose output is
 * far larger than the caches (rope.c's q_pe rows into q_cat, rope_cache.c's
 * q_cat rows): the lines go to memory without first being read for
 * ownership. The bits are those of mla_v16_store (fp32, or bf16 rounded to
 * nearest even with NaN -> sign | 0x7FC0) and mla_v16_to_fp8's codes. A
 * kernel that streams ends its task with _mm_sfence(). */
#ifndef MLA_CPU_STREAM_STORE_H
#define MLA_CPU_STREAM_STORE_H

#include "cpu/avx512_vec.h"

/* Outputs spanning more than this take the non-temporal stores. */
#define MLA_CPU_STREAM_MIN_BYTES (64ll << 20)

#if MLA_CPU_X86
/* v as fp32 (p 32-byte aligned: two 32-byte halves) or bf16 (p 32-byte aligned). */
MLA_AVX512_INLINE void mla_cpu_stream16(void *p, __m512 v, int bf16)
{
    if (!bf16) {
        _mm256_stream_ps((float *)p, _mm512_castps512_ps256(v));
        _mm256_stream_ps((float *)p + 8, _mm512_extractf32x8_ps(v, 1));
        return;
    }
    const __m512i u = _mm512_castps_si512(v), hi = _mm512_srli_epi32(u, 16);
    const __m512i odd = _mm512_and_si512(hi, _mm512_set1_epi32(1));
    const __m512i r = _mm512_srli_epi32(
        _mm512_add_epi32(u, _mm512_add_epi32(odd, _mm512_set1_epi32(0x7FFF))), 16);
    const __mmask16 nan = _mm512_cmpgt_epu32_mask(
        _mm512_and_si512(u, _mm512_set1_epi32(0x7FFFFFFF)), _mm512_set1_epi32(0x7F800000));
    const __m512i q =
        _mm512_or_si512(_mm512_and_si512(hi, _mm512_set1_epi32(0x8000)), _mm512_set1_epi32(0x7FC0));
    _mm256_stream_si256((__m256i *)p, _mm512_cvtepi32_epi16(_mm512_mask_mov_epi32(r, nan, q)));
}
#endif

#endif
