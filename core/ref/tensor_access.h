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

/* Stores the pair (lo, hi) as one FP4X2 byte: lo is element 2i (low nibble). */
static inline void mla_ref_store_fp4_pair(const mla_tensor *t, int64_t off, float lo, float hi)
{
    mla_ref_store_u8(t, off, (uint8_t)(mla_f32_to_fp4(lo) | (mla_f32_to_fp4(hi) << 4)));
}

#endif
