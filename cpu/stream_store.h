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
    _mm256_stream_si256((__m256i *)p, mla_v16_bf16(v));
}
#endif

#endif
