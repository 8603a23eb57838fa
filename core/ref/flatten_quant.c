/* Reference fused flatten + quant (MLA.md section 7): x [T, H, v] with any
 * strides is read as the rows [T, H*v] (value j of row t is x[t, j / v,
 * j % v]) and each row is quantized exactly as the format ops quantize a
 * contiguous row: the row is gathered into fp32 (exact for every input
 * dtype) and handed, as a [1, H*v] matrix, to the reference MXFP4 quant
 * (blocks of 32, `rule`) or fp8 group quant (groups of 128, the AITER rule),
 * writing row t of codes and scales through their strides. */
#include <stdlib.h>

#include "core/checked.h"
#include "core/ref/ref_kernels.h"
#include "core/ref/tensor_access.h"

#define FP8_GROUP 128

/* Row t of a 2-D tensor as a [1, n] view (same strides). */
static mla_tensor row_view(const mla_tensor *t, int64_t row)
{
    mla_tensor v = *t;
    v.data = (unsigned char *)t->data + row * t->stride[0] * (int64_t)mla_dtype_size(t->dtype);
    v.shape[0] = 1;
    return v;
}

/* The flattened row t of x into buf[0..H*v), and a [1, H*v] F32 view of it. */
static mla_tensor gather_row(const mla_tensor *x, int64_t t, float *buf)
{
    const int64_t H = x->shape[1], v = x->shape[2];
    for (int64_t h = 0; h < H; ++h)
        for (int64_t i = 0; i < v; ++i)
            buf[h * v + i] = mla_ref_load_f32(x, mla_ref_offset3(x, t, h, i));
    mla_tensor r;
    const int64_t shape[2] = {1, H * v};
    mla_tensor_init(&r, buf, MLA_DTYPE_F32, MLA_MEMORY_HOST, 2, shape);
    return r;
}

mla_status mla_ref_flatten_mxfp4_quant(mla_context *ctx, const mla_flatten_quant_args *a)
{
    const int64_t T = a->x.shape[0], HV = a->x.shape[1] * a->x.shape[2];
    float *buf;
    MLA_TRY(mla_alloc_array(ctx, (void **)&buf, HV, 1, sizeof *buf, "x"));
    mla_status st = MLA_OK;
    for (int64_t t = 0; st == MLA_OK && t < T; ++t) {
        /* ROW_MAJOR: the reference quant addresses scales through both strides */
        mla_mxfp4_quant_args q = {gather_row(&a->x, t, buf), row_view(&a->codes, t),
                                  row_view(&a->scales, t), MLA_SCALE_ROW_MAJOR, a->rule, 1, HV};
        st = mla_ref_mxfp4_quant(ctx, &q);
    }
    free(buf);
    return st;
}

mla_status mla_ref_flatten_fp8_quant(mla_context *ctx, const mla_flatten_quant_args *a)
{
    const int64_t T = a->x.shape[0], HV = a->x.shape[1] * a->x.shape[2];
    float *buf;
    MLA_TRY(mla_alloc_array(ctx, (void **)&buf, HV, 1, sizeof *buf, "x"));
    mla_status st = MLA_OK;
    for (int64_t t = 0; st == MLA_OK && t < T; ++t) {
        mla_fp8_group_quant_args q = {gather_row(&a->x, t, buf), row_view(&a->codes, t),
                                      row_view(&a->scales, t), FP8_GROUP, MLA_FP8_SCALE_AITER,
                                      1, HV};
        st = mla_ref_fp8_group_quant(ctx, &q);
    }
    free(buf);
    return st;
}
