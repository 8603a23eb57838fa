/* Positive controls of the prepare-path bounds: correct kernels that round
 * differently from the float64 reference, as a real backend does (fp32
 * accumulation with FMA in reverse order, split accumulators, 1/sqrtf off by
 * an ulp, quantizing from fp32 rows). They must PASS: a bound that refuses
 * legitimate fp32 arithmetic is as useless as one that accepts anything
 * (the negative controls check that side). */
#include <math.h>
#include <stdio.h>

#include "tests/conformance_negative.h"

/* linear: fp32, k descending, fused multiply-adds, the weight dequantized in fp32. */
static mla_status linear_fp32_fma(mla_context *ctx, const mla_linear_args *a)
{
    (void)ctx;
    const int64_t T = a->x.shape[0], K = a->x.shape[1], N = a->w.shape[0];
    for (int64_t t = 0; t < T; ++t)
        for (int64_t n = 0; n < N; ++n) {
            float acc = 0.0f;
            for (int64_t k = K - 1; k >= 0; --k) {
                float w = neg_load(&a->w, n * a->w.stride[0] + k * a->w.stride[1]);
                if (a->w_scale.data)
                    w *= neg_load(&a->w_scale, (n / 128) * a->w_scale.stride[0] +
                                                   (k / 128) * a->w_scale.stride[1]);
                acc = fmaf(neg_load(&a->x, t * a->x.stride[0] + k * a->x.stride[1]), w, acc);
            }
            neg_store(&a->y, t * a->y.stride[0] + n * a->y.stride[1], acc);
        }
    return MLA_OK;
}

/* batched GEMM: fp32, four interleaved partial sums (a vector kernel's lanes),
 * then the per-tensor scale. */
static mla_status batched_fp32_lanes(mla_context *ctx, const mla_batched_gemm_args *a)
{
    (void)ctx;
    const mla_tensor *x = &a->x, *w = &a->w, *y = &a->y;
    const int64_t B = x->shape[0], M = x->shape[1], K = x->shape[2], N = w->shape[2];
    for (int64_t b = 0; b < B; ++b)
        for (int64_t m = 0; m < M; ++m)
            for (int64_t n = 0; n < N; ++n) {
                float lane[4] = {0, 0, 0, 0};
                for (int64_t k = 0; k < K; ++k) {
                    const float p =
                        neg_load(x, b * x->stride[0] + m * x->stride[1] + k * x->stride[2]) *
                        neg_load(w, b * w->stride[0] + k * w->stride[1] + n * w->stride[2]);
                    lane[k % 4] += p;
                }
                const float s = (lane[0] + lane[2]) + (lane[1] + lane[3]);
                neg_store(y, b * y->stride[0] + m * y->stride[1] + n * y->stride[2],
                          s * a->w_scale);
            }
    return MLA_OK;
}

/* One row of RMSNorm in fp32: eight partial sums of squares, the mean by a
 * product with fl(1/D), 1/sqrtf, and on odd rows an rsqrt one ulp high (a
 * hardware approximation); out[d] = (x r) w. */
static void norm_row(const mla_tensor *x, const mla_tensor *w, float eps, int64_t t, float *out)
{
    const int64_t D = x->shape[1];
    float lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int64_t d = 0; d < D; ++d) {
        out[d] = neg_load(x, t * x->stride[0] + d * x->stride[1]);
        const float sq = out[d] * out[d];
        lane[d % 8] += sq;
    }
    float ss = 0.0f;
    for (int i = 0; i < 8; ++i)
        ss += lane[i];
    const float mean = ss * (1.0f / (float)D);
    float r = 1.0f / sqrtf(mean + eps);
    if (t % 2 && r > 0.0f && isfinite(r)) /* an approximation still gives 0 for an Inf row */
        r = nextafterf(r, INFINITY);
    for (int64_t d = 0; d < D; ++d) {
        const float xr = out[d] * r;
        out[d] = xr * neg_load(w, d * w->stride[0]);
    }
}

static void norm_rows(const mla_tensor *x, const mla_tensor *w, float eps, const mla_tensor *y,
                      float *row)
{
    for (int64_t t = 0; t < x->shape[0]; ++t) {
        norm_row(x, w, eps, t, row); /* the whole row is read first: in place is safe */
        for (int64_t d = 0; d < x->shape[1]; ++d)
            neg_store(y, t * y->stride[0] + d * y->stride[1], row[d]);
    }
}

static mla_status rmsnorm_fp32(mla_context *ctx, const mla_rmsnorm_args *a)
{
    (void)ctx;
    float *row = malloc((size_t)(a->x.shape[1] + 1) * sizeof *row);
    if (!row)
        return MLA_ERR_OUT_OF_MEMORY;
    norm_rows(&a->x, &a->w, a->eps, &a->y, row);
    free(row);
    return MLA_OK;
}

/* fused QK RMSNorm in fp32; a quantized q_out is quantized from the fp32
 * rows by the table's own quantizers (fp8 group 128 / MXFP4 production). */
static mla_status qk_rmsnorm_fp32(mla_context *ctx, const mla_qk_rmsnorm_args *a)
{
    const int64_t T = a->q.shape[0], Dq = a->q.shape[1], Dkv = a->kv.shape[1];
    float *row = malloc((size_t)((Dq > Dkv ? Dq : Dkv) + 1) * sizeof *row);
    if (!row)
        return MLA_ERR_OUT_OF_MEMORY;
    norm_rows(&a->kv, &a->kv_w, a->kv_eps, &a->kv_out, row);
    mla_status st = MLA_OK;
    const mla_dtype qd = a->q_out.dtype;
    if (qd == MLA_DTYPE_F32 || qd == MLA_DTYPE_BF16 || qd == MLA_DTYPE_F16) {
        norm_rows(&a->q, &a->q_w, a->q_eps, &a->q_out, row);
    } else {
        mla_tensor tmp = neg_alloc(MLA_DTYPE_F32, 2, a->q.shape);
        if (!tmp.data) {
            free(row);
            return MLA_ERR_OUT_OF_MEMORY;
        }
        norm_rows(&a->q, &a->q_w, a->q_eps, &tmp, row);
        if (qd == MLA_DTYPE_FP4X2) {
            mla_mxfp4_quant_args m = {tmp, a->q_out, a->q_scales, MLA_SCALE_ROW_MAJOR,
                                      MLA_MXFP4_PRODUCTION, T, Dq};
            st = neg_base->mxfp4_quant(ctx, &m);
        } else {
            mla_fp8_group_quant_args g = {tmp, a->q_out, a->q_scales, 128, MLA_FP8_SCALE_AITER,
                                          T, Dq};
            st = neg_base->fp8_group_quant(ctx, &g);
        }
        free(tmp.data);
    }
    free(row);
    return st;
}

void neg_positive_controls(const mla_backend_ops *from)
{
    mla_backend_ops t = *from;
    t.linear = linear_fp32_fma;
    neg_positive(from, &t, "fp32 linear (FMA, reverse order)", "linear");
    t = *from, t.batched_gemm = batched_fp32_lanes;
    neg_positive(from, &t, "fp32 batched gemm (4 partial sums)", "batched_gemm");
    t = *from, t.rmsnorm = rmsnorm_fp32;
    neg_positive(from, &t, "fp32 rmsnorm (8 partial sums, rsqrt 1 ulp high)", "rmsnorm");
    t = *from, t.qk_rmsnorm = qk_rmsnorm_fp32;
    neg_positive(from, &t, "fp32 qk rmsnorm, q_out quantized from fp32 rows", "qk_rmsnorm");
}
