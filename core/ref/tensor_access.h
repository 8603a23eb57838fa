/* Element access for the reference kernels: strided offsets, loads of any
 * float-like dtype as float, stores of a float to any float-like dtype.
 * Conversions go through the scalar helpers of core/formats.c, so the
 * reference kernels round exactly as the public helpers do.
 *
 * Offsets are in elements of the tensor's dtype (for FP4X2 and U8: bytes),
 * 64-bit. Kernels get validated tensors, so nothing here checks ranges. */
#ifndef MLA_CORE_REF_TENSOR_ACCESS_H
#define MLA_CORE_REF_TENSOR_ACCESS_H

#include "mla/mla.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

/* sum_i idx[i] * stride[i] over the tensor's dims. */
static inline int64_t mla_ref_offset(const mla_tensor *t, const int64_t *idx)
{
    int64_t off = 0;
    for (int32_t i = 0; i < t->ndim; ++i)
        off += idx[i] * t->stride[i];
    return off;
}

/* Offset of element (i, j) of a 2-D tensor. */
static inline int64_t mla_ref_offset2(const mla_tensor *t, int64_t i, int64_t j)
{
    return i * t->stride[0] + j * t->stride[1];
}

/* Offset of element (i, j, k) of a 3-D tensor. */
static inline int64_t mla_ref_offset3(const mla_tensor *t, int64_t i, int64_t j, int64_t k)
{
    return i * t->stride[0] + j * t->stride[1] + k * t->stride[2];
}

/* Advances the row-major multi-index idx over shape[0..ndim); returns 0 after
 * the last index (idx is then all zeros again). */
static inline int mla_ref_next_index(int64_t *idx, const int64_t *shape, int32_t ndim)
{
    for (int32_t i = ndim - 1; i >= 0; --i) {
        if (++idx[i] < shape[i])
            return 1;
        idx[i] = 0;
    }
    return 0;
}

static inline uint8_t mla_ref_load_u8(const mla_tensor *t, int64_t off)
{
    return ((const uint8_t *)t->data)[off];
}

static inline void mla_ref_store_u8(const mla_tensor *t, int64_t off, uint8_t v)
{
    ((uint8_t *)t->data)[off] = v;
}

/* Element off of an index tensor (I32 or I64) as int64. */
static inline int64_t mla_ref_load_index(const mla_tensor *t, int64_t off)
{
    if (t->dtype == MLA_DTYPE_I32)
        return ((const int32_t *)t->data)[off];
    return ((const int64_t *)t->data)[off];
}

/* Element off of a float-like tensor (F32, F64, F16, BF16, FP8_*, E8M0) as
 * float; exact for all of them except F64. Other dtypes give NaN. */
static inline float mla_ref_load_f32(const mla_tensor *t, int64_t off)
{
    switch (t->dtype) {
    case MLA_DTYPE_F32:
        return ((const float *)t->data)[off];
    case MLA_DTYPE_F64:
        return (float)((const double *)t->data)[off];
    case MLA_DTYPE_F16:
        return mla_f16_to_f32(((const uint16_t *)t->data)[off]);
    case MLA_DTYPE_BF16:
        return mla_bf16_to_f32(((const uint16_t *)t->data)[off]);
    case MLA_DTYPE_FP8_E4M3FN:
    case MLA_DTYPE_FP8_E4M3FNUZ:
        return mla_fp8_to_f32(mla_ref_load_u8(t, off), t->dtype);
    case MLA_DTYPE_E8M0:
        return mla_e8m0_to_f32(mla_ref_load_u8(t, off));
    default:
        return NAN;
    }
}

/* Same as mla_ref_load_f32, widened to double (F64 is read exactly). */
static inline double mla_ref_load_f64(const mla_tensor *t, int64_t off)
{
    if (t->dtype == MLA_DTYPE_F64)
        return ((const double *)t->data)[off];
    return (double)mla_ref_load_f32(t, off);
}

/* Value of nibble `high` (0: low nibble = even element) of byte off of an
 * FP4X2 tensor. */
static inline float mla_ref_load_fp4(const mla_tensor *t, int64_t off, int high)
{
    uint8_t b = mla_ref_load_u8(t, off);
    return mla_fp4_to_f32((uint8_t)(high ? b >> 4 : b & 0xFu));
}

/* Stores v into element off, rounded once to the tensor's dtype (RNE):
 * F16/BF16 overflow to inf, fp8 by mode, F64 exactly. Other dtypes: no-op. */
static inline void mla_ref_store_f32(const mla_tensor *t, int64_t off, float v,
                                     mla_saturation mode)
{
    switch (t->dtype) {
    case MLA_DTYPE_F32:
        ((float *)t->data)[off] = v;
        break;
    case MLA_DTYPE_F64:
        ((double *)t->data)[off] = (double)v;
        break;
    case MLA_DTYPE_F16:
        ((uint16_t *)t->data)[off] = mla_f32_to_f16(v);
        break;
    case MLA_DTYPE_BF16:
        ((uint16_t *)t->data)[off] = mla_f32_to_bf16(v);
        break;
    case MLA_DTYPE_FP8_E4M3FN:
    case MLA_DTYPE_FP8_E4M3FNUZ:
        mla_ref_store_u8(t, off, mla_f32_to_fp8(v, t->dtype, mode));
        break;
    default:
        break;
    }
}

/* v rounded to fp32 "to odd": v itself when it is a float, else the float
 * next to v towards zero with its last significand bit set. Rounding that
 * float once more, to nearest even, into a format with at least two fewer
 * significand bits and no wider exponent range (bf16, f16, fp8) gives the
 * same result as rounding v directly (Boldo and Melquiond, "Emulation of a
 * FMA and correctly-rounded sums: proved algorithms using rounding to odd",
 * IEEE TC 2008): the odd last bit keeps an inexact v off the narrow
 * format's ties. Independent of the FP rounding mode. */
static inline float mla_ref_f64_to_f32_odd(double v)
{
    float f = (float)v;
    if (isnan(v) || (double)f == v)
        return f;
    if (fabs((double)f) > fabs(v))
        f = nextafterf(f, 0.0f); /* the neighbour towards zero: truncation */
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    u |= 1u;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Stores the double v into element off, rounded once to the tensor's dtype:
 * F64 exactly, F32 by the one double -> float rounding, the narrower
 * formats through mla_ref_f64_to_f32_odd (no double rounding). */
static inline void mla_ref_store_f64(const mla_tensor *t, int64_t off, double v,
                                     mla_saturation mode)
{
    if (t->dtype == MLA_DTYPE_F64)
        ((double *)t->data)[off] = v;
    else if (t->dtype == MLA_DTYPE_F32)
        ((float *)t->data)[off] = (float)v;
    else
        mla_ref_store_f32(t, off, mla_ref_f64_to_f32_odd(v), mode);
}

/* Stores the pair (lo, hi) as one FP4X2 byte: lo is element 2i (low nibble). */
static inline void mla_ref_store_fp4_pair(const mla_tensor *t, int64_t off, float lo, float hi)
{
    mla_ref_store_u8(t, off, (uint8_t)(mla_f32_to_fp4(lo) | (mla_f32_to_fp4(hi) << 4)));
}

#endif
