/* Reference RMSNorm and the fused QK RMSNorm (MLA.md section 2, step 2):
 *
 *     y[t, d] = x[t, d] * rsqrt(mean_d(x[t, :]^2) + eps) * w[d]
 *
 * in float64 (sum of squares, mean, 1/sqrt, products), rounded once to y's
 * dtype. In place is safe: a row's sum of squares is taken before the row is
 * written, and element d is read before it is overwritten. */
#include <stdlib.h>

#include "core/checked.h"
#include "core/ref/ref_kernels.h"
#include "core/ref/tensor_access.h"

#define GROUP_FP8 128 /* fp8 q_out: one F32 scale per 128 values (MLA_FP8_SCALE_AITER) */

/* 1 / sqrt(mean(x[t, :]^2) + eps), in double. */
static double inv_rms(const mla_tensor *x, int64_t t, int64_t D, float eps)
{
    double sum_sq = 0.0;
    for (int64_t d = 0; d < D; ++d) {
        double v = mla_ref_load_f64(x, mla_ref_offset2(x, t, d));
        sum_sq += v * v;
    }
    return 1.0 / sqrt(sum_sq / (double)D + (double)eps);
}

/* y[t, d] in double, before any rounding. */
static double normalized(const mla_tensor *x, const mla_tensor *w, int64_t t, int64_t d, double r)
{
    return mla_ref_load_f64(x, mla_ref_offset2(x, t, d)) * r *
           mla_ref_load_f64(w, d * w->stride[0]);
}

/* Every row of x normalized into y, one rounding from double. */
static void rmsnorm_rows(const mla_tensor *x, const mla_tensor *w, float eps, const mla_tensor *y)
{
    const int64_t T = x->shape[0], D = x->shape[1];
    for (int64_t t = 0; t < T; ++t) {
        const double r = inv_rms(x, t, D, eps);
        for (int64_t d = 0; d < D; ++d)
            mla_ref_store_f64(y, mla_ref_offset2(y, t, d), normalized(x, w, t, d, r), MLA_SATURATE);
    }
}

mla_status mla_ref_rmsnorm(mla_context *ctx, const mla_rmsnorm_args *a)
{
    (void)ctx;
    rmsnorm_rows(&a->x, &a->w, a->eps, &a->y);
    return MLA_OK;
}

/* Row `row` of a 2-D tensor as a [1, n] tensor (n = its row length). */
static mla_tensor row_view(const mla_tensor *t, int64_t row)
{
    mla_tensor r = *t;
    r.data = (char *)t->data + row * t->stride[0] * (int64_t)mla_dtype_size(t->dtype);
    r.shape[0] = 1;
    return r;
}

/* Quantized q_out: each normalized q row is rounded once to fp32 (what the
 * quantizer of a production fused kernel sees: the row held in fp32
 * registers), then quantized by the reference quantizers themselves, exactly
 * as mla_fp8_group_quant (group 128, MLA_FP8_SCALE_AITER) or mla_mxfp4_quant
 * (MLA_MXFP4_PRODUCTION, row-major e8m0 scales) would quantize that fp32 row. */
static mla_status quantized_q_rows(mla_context *ctx, const mla_qk_rmsnorm_args *a)
{
    const mla_tensor *q = &a->q;
    const int64_t T = q->shape[0], D = q->shape[1];
    float *row;
    MLA_TRY(mla_alloc_array(ctx, (void **)&row, D, 1, sizeof *row, "q"));
    const int64_t shape[2] = {1, D};
    mla_tensor xf;
    mla_tensor_init(&xf, row, MLA_DTYPE_F32, MLA_MEMORY_HOST, 2, shape);
    for (int64_t t = 0; t < T; ++t) {
        const double r = inv_rms(q, t, D, a->q_eps);
        for (int64_t d = 0; d < D; ++d)
            row[d] = (float)normalized(q, &a->q_w, t, d, r);
        const mla_tensor codes = row_view(&a->q_out, t), scales = row_view(&a->q_scales, t);
        if (a->q_out.dtype == MLA_DTYPE_FP4X2) {
            mla_mxfp4_quant_args m = {xf, codes, scales, MLA_SCALE_ROW_MAJOR,
                                      MLA_MXFP4_PRODUCTION, 1, D};
            mla_ref_mxfp4_quant(ctx, &m);
        } else {
            mla_fp8_group_quant_args g = {xf, codes, scales, GROUP_FP8, MLA_FP8_SCALE_AITER, 1, D};
            mla_ref_fp8_group_quant(ctx, &g);
        }
    }
    free(row);
    return MLA_OK;
}

mla_status mla_ref_qk_rmsnorm(mla_context *ctx, const mla_qk_rmsnorm_args *a)
{
    const mla_dtype qd = a->q_out.dtype;
    if (qd == MLA_DTYPE_FP4X2 || qd == MLA_DTYPE_FP8_E4M3FN || qd == MLA_DTYPE_FP8_E4M3FNUZ) {
        mla_status st = quantized_q_rows(ctx, a); /* first: the only step that can fail */
        if (st != MLA_OK)
            return st;
    } else {
        rmsnorm_rows(&a->q, &a->q_w, a->q_eps, &a->q_out);
    }
    rmsnorm_rows(&a->kv, &a->kv_w, a->kv_eps, &a->kv_out);
    return MLA_OK;
}
