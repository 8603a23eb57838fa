/* fp8 e4m3 codes -> exact f16 pairs on the device (the indexer's matrix
 * operands, the attention's fp8 key rows), each with its CPU emulation.
 *
 * fp8 e4m3 values (fn and fnuz) are exact f16 NORMAL numbers (4 significant
 * bits, magnitudes 2^-10 .. 448), and the product of two has at most 8
 * significant bits, exact in fp32: the matrix units then only round the
 * fp32 sums, which is the summation the logits bound allows. The fp8 -> f16
 * conversion is exact and uses no table: the 7 magnitude bits placed at f16
 * bits 7..13 are an f16 of value fp8 * 2^-(15 - bias) (fp8 subnormals land
 * on f16 subnormals by the same factor), then one packed f16 product by
 * 2^(15 - bias) gives the exact normal f16 (so no subnormal ever reaches a
 * matrix unit, whose subnormal handling differs between generations). The
 * fp8 NaN codes (0x7F/0xFF e4m3fn, 0x80 e4m3fnuz) come out finite there;
 * callers test for them separately (fp8_nan_bytes). */
#ifndef MLA_HIP_FP8_F16_H
#define MLA_HIP_FP8_F16_H

#include "hip/device_sync.h"

#if defined(__CUDACC__) && !MLA_IDX_EMU
#include <cuda_fp16.h>
#endif

/* ------------------------------------------------------- fp8 -> f16 */

/* Bytes of x (4 fp8 codes) that are NaN codes: 0x80 in their byte. */
template <int FNUZ> MLA_DEV uint32_t fp8_nan_bytes(uint32_t x)
{
    if (FNUZ) {
        const uint32_t v = x ^ 0x80808080u; /* zero byte <=> 0x80 */
        return (v - 0x01010101u) & ~v & 0x80808080u;
    }
    return ((x & 0x7F7F7F7Fu) + 0x01010101u) & 0x80808080u; /* low 7 bits all ones */
}

/* Codes byte0 (low half) and byte1 (high half) of x as f16 bit patterns of
 * value * 2^-(15 - bias): magnitude << 7, sign to bit 15. */
MLA_DEV uint32_t fp8x2_f16_scaled(uint32_t x)
{
#if defined(__CUDA_ARCH__) && !MLA_IDX_EMU
    uint32_t u;
    /* [sign(b1) b1 sign(b0) b0]: the selector's msb replicates a byte's sign */
    asm("prmt.b32 %0, %1, 0, 0x9180;" : "=r"(u) : "r"(x));
    return (u << 7) & 0xBF80BF80u;
#else
    const uint32_t t = ((x & 0xFFu) | ((x & 0xFF00u) << 8)) << 7;
    return (t & 0x3F803F80u) | ((t << 1) & 0x80008000u);
#endif
}

/* Two f16 (bit patterns, low and high half) times 2^e (e = 7 or 8), exact:
 * the results are fp8 values, normal f16 numbers. */
MLA_DEV uint32_t f16x2_mul_pow2(uint32_t h, int e)
{
#if MLA_IDX_EMU
    const float s = e == 8 ? 256.0f : 128.0f;
    const uint32_t lo = mla_fb_f32_to_f16(mla_fb_f16_to_f32((uint16_t)(h & 0xFFFFu)) * s);
    const uint32_t hi = mla_fb_f32_to_f16(mla_fb_f16_to_f32((uint16_t)(h >> 16)) * s);
    return lo | (hi << 16);
#elif defined(__CUDACC__)
    __half2 v;
    __builtin_memcpy(&v, &h, 4);
    const __half s = __float2half_rn(e == 8 ? 256.0f : 128.0f);
    v = __hmul2(v, __halves2half2(s, s));
    uint32_t r;
    __builtin_memcpy(&r, &v, 4);
    return r;
#else
    typedef _Float16 h2_t __attribute__((ext_vector_type(2)));
    h2_t v;
    __builtin_memcpy(&v, &h, 4);
    const _Float16 s = e == 8 ? (_Float16)256.0f : (_Float16)128.0f;
    v = v * (h2_t){s, s};
    uint32_t r;
    __builtin_memcpy(&r, &v, 4);
    return r;
#endif
}

/* 4 fp8 codes (x's bytes 0..3) -> exact f16 pairs: lo = bytes 0, 1; hi =
 * bytes 2, 3 (each pair: the lower byte in the low half). */
template <int FNUZ> MLA_DEV void fp8x4_to_f16(uint32_t x, uint32_t &lo, uint32_t &hi)
{
    constexpr int e = FNUZ ? 7 : 8; /* 15 - bias */
    lo = f16x2_mul_pow2(fp8x2_f16_scaled(x), e);
    hi = f16x2_mul_pow2(fp8x2_f16_scaled(x >> 16), e);
}

/* e4m3fn codes -> f16 pairs by the conversion sm_89 and later have
 * (cvt.rn.f16x2.e4m3x2, the lower byte to the low half; the emulation
 * builds the same bits): the values are those of fp8x4_to_f16<0>, in 2
 * instructions instead of 8, and the NaN codes become f16 NaNs, which the
 * matrix unit carries into every sum they enter (no separate test). */
#if MLA_IDX_EMU || (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890)
#define MLA_IDX_CVT_E4M3 1
MLA_DEV void e4m3fn_x4_to_f16_cvt(uint32_t x, uint32_t &lo, uint32_t &hi)
{
#if MLA_IDX_EMU
    uint32_t h[2];
    fp8x4_to_f16<0>(x, h[0], h[1]);
    for (int i = 0; i < 4; ++i) /* NaN codes: an f16 NaN of the code's sign */
        if (((x >> (8 * i)) & 0x7Fu) == 0x7Fu)
            h[i / 2] = (h[i / 2] & ~(0xFFFFu << (16 * (i % 2)))) |
                       ((((x >> (8 * i)) & 0x80u) << 8 | 0x7FFFu) << (16 * (i % 2)));
    lo = h[0];
    hi = h[1];
#else
    asm("{.reg .b16 l, h;\n\t"
        "mov.b32 {l, h}, %2;\n\t"
        "cvt.rn.f16x2.e4m3x2 %0, l;\n\t"
        "cvt.rn.f16x2.e4m3x2 %1, h;}"
        : "=r"(lo), "=r"(hi)
        : "r"(x));
#endif
}
#else
#define MLA_IDX_CVT_E4M3 0
#endif

#endif
