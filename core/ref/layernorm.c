/* Reference LayerNorm of the DSA indexer's k (MLA.md section 6):
 *
 *     mean = sum_d x[t, d] / D,   var = sum_d (x[t, d] - mean)^2 / D   (population)
 *     y[t, d] = (x[t, d] - mean) / sqrt(var + eps) * w[d] + b[d]
 *
 * in float64 (two passes: the mean first, then the squared deviations from
 * it), rounded once to y's dtype. In place is safe: a row's mean and variance
 * are taken before the row is written, and element d is read before it is
 * overwritten. */
#include "core/ref/ref_kernels.h"
#include "core/ref/tensor_access.h"

static double x_at(const mla_tensor *x, int64_t t, int64_t d)
{
    return mla_ref_load_f64(x, mla_ref_offset2(x, t, d));
}

mla_status mla_ref_layernorm(mla_context *ctx, const mla_layernorm_args *a)
{
    (void)ctx;
    const mla_tensor *x = &a->x, *w = &a->w, *b = &a->b, *y = &a->y;
    const int64_t T = x->shape[0], D = x->shape[1];
    for (int64_t t = 0; t < T; ++t) {
        double sum = 0.0, sq = 0.0;
        for (int64_t d = 0; d < D; ++d)
            sum += x_at(x, t, d);
        const double mean = sum / (double)D;
        for (int64_t d = 0; d < D; ++d)
            sq += (x_at(x, t, d) - mean) * (x_at(x, t, d) - mean);
        const double sd = sqrt(sq / (double)D + (double)a->eps);
        for (int64_t d = 0; d < D; ++d) {
            const double v = (x_at(x, t, d) - mean) / sd * mla_ref_load_f64(w, d * w->stride[0]) +
                             mla_ref_load_f64(b, d * b->stride[0]);
            mla_ref_store_f64(y, mla_ref_offset2(y, t, d), v, MLA_SATURATE);
        }
    }
    return MLA_OK;
}
