/* Row loads and stores between a tensor row of any float-like dtype and a
 * contiguous fp32 buffer, through the bit-exact conversions of
 * core/format_bits.h. Every source value is exact in fp32, so a load never
 * rounds; a store rounds once, to the target dtype (RNE; fp8 by `saturate`).
 *
 * A row is n values with an element stride s (in elements of the dtype; for
 * FP4X2 a byte holds values 2j (low nibble) and 2j + 1, so n is even).
 * Contiguous rows take a unit-stride loop the compiler vectorizes with plain
 * vector loads; other strides the same loop with gathers/scatters. The
 * functions are always inlined into each ISA copy of an op's body. */
#ifndef MLA_CPU_CPU_ROWS_H
#define MLA_CPU_CPU_ROWS_H

#include "core/format_bits.h"
#include "cpu/cpu_kernels.h"

/* Pointer to value i of a row at p (i even for FP4X2). */
MLA_CPU_INLINE const unsigned char *mla_cpu_row_at(const void *p, mla_dtype dt, int64_t s,
                                                   int64_t i)
{
    int64_t elem = dt == MLA_DTYPE_FP4X2 ? i / 2 : i;
    return (const unsigned char *)p + elem * s * (int64_t)mla_dtype_size(dt);
}

/* Loops of one decoder, unit stride and strided. */
#define MLA_CPU_LOAD_LOOP(T, expr)                                                                 \
    do {                                                                                           \
        const T *x_ = (const T *)p;                                                                \
        if (s == 1) {                                                                              \
            MLA_SIMD for (int64_t i = 0; i < n; ++i) out[i] = expr(x_[i]);                         \
        } else {                                                                                   \
            MLA_SIMD for (int64_t i = 0; i < n; ++i) out[i] = expr(x_[i * s]);                     \
        }                                                                                          \
    } while (0)

MLA_CPU_INLINE float mla_cpu_id_f32(float v) { return v; }

/* out[0..n) = the values of a F32, F16 or BF16 row as fp32. */
MLA_CPU_INLINE void mla_cpu_load_float(const void *p, mla_dtype dt, int64_t s, int64_t n,
                                       float *restrict out)
{
    if (dt == MLA_DTYPE_F32)
        MLA_CPU_LOAD_LOOP(float, mla_cpu_id_f32);
    else if (dt == MLA_DTYPE_F16)
        MLA_CPU_LOAD_LOOP(uint16_t, mla_fb_f16_to_f32);
    else
        MLA_CPU_LOAD_LOOP(uint16_t, mla_fb_bf16_to_f32);
}

/* out[0..n) = the values of an fp8 row (e4m3fn or e4m3fnuz) as fp32. */
MLA_CPU_INLINE void mla_cpu_load_fp8(const void *p, mla_dtype dt, int64_t s, int64_t n,
                                     float *restrict out)
{
    if (dt == MLA_DTYPE_FP8_E4M3FN)
        MLA_CPU_LOAD_LOOP(uint8_t, mla_fb_e4m3fn_to_f32);
    else
        MLA_CPU_LOAD_LOOP(uint8_t, mla_fb_e4m3fnuz_to_f32);
}

/* out[0..n) = the row's values as fp32, any source dtype of convert. */
MLA_CPU_INLINE void mla_cpu_load(const void *p, mla_dtype dt, int64_t s, int64_t n,
                                 float *restrict out)
{
    switch (dt) {
    case MLA_DTYPE_F32:
    case MLA_DTYPE_F16:
    case MLA_DTYPE_BF16:
        mla_cpu_load_float(p, dt, s, n, out);
        break;
    case MLA_DTYPE_FP8_E4M3FN:
    case MLA_DTYPE_FP8_E4M3FNUZ:
        mla_cpu_load_fp8(p, dt, s, n, out);
        break;
    case MLA_DTYPE_E8M0:
        MLA_CPU_LOAD_LOOP(uint8_t, mla_fb_e8m0_to_f32);
        break;
    case MLA_DTYPE_FP4X2: {
        const uint8_t *x = (const uint8_t *)p;
        MLA_SIMD for (int64_t j = 0; j < n / 2; ++j) {
            uint8_t b = x[j * s];
            out[2 * j] = mla_fb_e2m1_to_f32((uint8_t)(b & 0xFu));
            out[2 * j + 1] = mla_fb_e2m1_to_f32((uint8_t)(b >> 4));
        }
        break;
    }
    default:
        break;
    }
}

/* Loops of one encoder, unit stride and strided. */
#define MLA_CPU_STORE_LOOP(T, expr)                                                                \
    do {                                                                                           \
        T *y_ = (T *)p;                                                                            \
        if (s == 1) {                                                                              \
            MLA_SIMD for (int64_t i = 0; i < n; ++i) y_[i] = expr;                                 \
        } else {                                                                                   \
            MLA_SIMD for (int64_t i = 0; i < n; ++i) y_[i * s] = expr;                             \
        }                                                                                          \
    } while (0)

/* A F32, F16 or BF16 row's values = in[0..n) rounded to its dtype. */
MLA_CPU_INLINE void mla_cpu_store_float(const float *restrict in, void *p, mla_dtype dt,
                                        int64_t s, int64_t n)
{
    if (dt == MLA_DTYPE_F32)
        MLA_CPU_STORE_LOOP(float, in[i]);
    else if (dt == MLA_DTYPE_F16)
        MLA_CPU_STORE_LOOP(uint16_t, mla_fb_f32_to_f16(in[i]));
    else
        MLA_CPU_STORE_LOOP(uint16_t, mla_fb_f32_to_bf16(in[i]));
}

/* The row's values = in[0..n) rounded to its dtype, any target of convert. */
MLA_CPU_INLINE void mla_cpu_store(const float *restrict in, void *p, mla_dtype dt, int64_t s,
                                  int64_t n, int saturate)
{
    switch (dt) {
    case MLA_DTYPE_F32:
    case MLA_DTYPE_F16:
    case MLA_DTYPE_BF16:
        mla_cpu_store_float(in, p, dt, s, n);
        break;
    case MLA_DTYPE_FP8_E4M3FN:
        MLA_CPU_STORE_LOOP(uint8_t, mla_fb_f32_to_e4m3fn(in[i], saturate));
        break;
    case MLA_DTYPE_FP8_E4M3FNUZ:
        MLA_CPU_STORE_LOOP(uint8_t, mla_fb_f32_to_e4m3fnuz(in[i], saturate));
        break;
    case MLA_DTYPE_FP4X2: {
        uint8_t *y = (uint8_t *)p;
        MLA_SIMD for (int64_t j = 0; j < n / 2; ++j) y[j * s] =
            (uint8_t)(mla_fb_f32_to_e2m1(in[2 * j]) | (mla_fb_f32_to_e2m1(in[2 * j + 1]) << 4));
        break;
    }
    default:
        break;
    }
}

#endif
