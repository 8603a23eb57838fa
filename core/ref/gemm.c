/* Reference projections, in float64, one rounding to y's dtype, every tensor
 * through its strides:
 *
 *     linear:       y[t, n]    = sum_k x[t, k] * W[n, k]
 *                   (fp8 W: W[n, k] = code * w_scale[n / 128, k / 128], in double)
 *     batched gemm: y[b, m, n] = w_scale * sum_k x[b, m, k] * W[b, k, n]
 *                   (fp8 W: the code's value; one per-tensor w_scale)
 *
 * Every input value is exact in double and so is each product (at most
 * 24 + 4 + 24 significant bits); only the sums (k ascending) and the final
 * w_scale product round, in double, then the result once to y's dtype.
 *
 * Where MLA uses them (MLA.md section 2): linear is every projection (steps
 * 1, 3 and 9). The batched gemm is where absorption happens: with b = head,
 * x = q_nope seen as [H, T, nope] and W = W_kc seen as [H, nope, L] (a view
 * of kv_b_proj, no copy), y[h] = q_nope[:, h] @ W_kc[h] is step 4, the
 * absorb that moves each head's query into the latent space, so attention
 * scores against the cached latent rows directly (core/prepare.c makes this
 * call); with x = o_lat [H, T, L] and W = W_vc [H, L, v] it is step 8, which
 * takes the latent attention output back to v dims (core/layer.c). */
#include "core/ref/ref_kernels.h"
#include "core/ref/tensor_access.h"

#define WEIGHT_BLOCK 128 /* DeepSeek fp8 checkpoints: one scale per 128 x 128 block */

/* W[n, k] as the checkpoint means it: the bf16 value, or code * block scale. */
static double weight(const mla_linear_args *a, int64_t n, int64_t k)
{
    double w = mla_ref_load_f64(&a->w, mla_ref_offset2(&a->w, n, k));
    if (a->w.dtype == MLA_DTYPE_BF16)
        return w;
    return w * mla_ref_load_f64(&a->w_scale,
                                mla_ref_offset2(&a->w_scale, n / WEIGHT_BLOCK, k / WEIGHT_BLOCK));
}

mla_status mla_ref_linear(mla_context *ctx, const mla_linear_args *a)
{
    (void)ctx;
    const int64_t T = a->x.shape[0], K = a->x.shape[1], N = a->w.shape[0];
    for (int64_t t = 0; t < T; ++t) {
        for (int64_t n = 0; n < N; ++n) {
            double acc = 0.0;
            for (int64_t k = 0; k < K; ++k)
                acc += mla_ref_load_f64(&a->x, mla_ref_offset2(&a->x, t, k)) * weight(a, n, k);
            mla_ref_store_f64(&a->y, mla_ref_offset2(&a->y, t, n), acc, MLA_SATURATE);
        }
    }
    return MLA_OK;
}

mla_status mla_ref_batched_gemm(mla_context *ctx, const mla_batched_gemm_args *a)
{
    (void)ctx;
    const mla_tensor *x = &a->x, *w = &a->w, *y = &a->y;
    const int64_t B = x->shape[0], M = x->shape[1], K = x->shape[2], N = w->shape[2];
    for (int64_t b = 0; b < B; ++b) {
        for (int64_t m = 0; m < M; ++m) {
            for (int64_t n = 0; n < N; ++n) {
                double acc = 0.0;
                for (int64_t k = 0; k < K; ++k)
                    acc += mla_ref_load_f64(x, mla_ref_offset3(x, b, m, k)) *
                           mla_ref_load_f64(w, mla_ref_offset3(w, b, k, n));
                mla_ref_store_f64(y, mla_ref_offset3(y, b, m, n), (double)a->w_scale * acc,
                                  MLA_SATURATE);
            }
        }
    }
    return MLA_OK;
}
