/* Pieces the AVX2 micro-kernels share (cpu/linear_kernel_avx2.c,
 * cpu/batched_gemm_avx2.c). */
#ifndef MLA_CPU_AVX2_VEC_H
#define MLA_CPU_AVX2_VEC_H

#include "cpu/cpu_kernels.h"

#if MLA_CPU_X86
#include <immintrin.h>

#define MLA_AVX2_INLINE MLA_TARGET_AVX2 static inline __attribute__((always_inline))
#if defined(__clang__)
#define MLA_AVX2_UNROLL _Pragma("unroll")
#else
#define MLA_AVX2_UNROLL _Pragma("GCC unroll 8")
#endif

/* 8 values of a W row from p: bf16 (BF, exact by a shift) or fp32. */
MLA_AVX2_INLINE __m256 mla_avx2_w8(const char *p, const int BF)
{
    if (BF)
        return _mm256_castsi256_ps(
            _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p)), 16));
    return _mm256_loadu_ps((const float *)p);
}
#endif

#endif
