/* Reference head weights of the DSA indexer (MLA.md section 6):
 *
 *     w_out[t, h] = fl(fl(fl(w[t, h] * s_q[t, h]) * c_d) * c_h)
 *     c_d = fl(128^-0.5) (softmax scale of the 128-dim head), c_h = fl(Hi^-0.5)
 *
 * fp32 products in that order, each correctly rounded (as the model's
 * `weights * q_scale * softmax_scale * n_head ** -0.5` does with fp32 tensors
 * and Python scalars), with the NaN rule of core/format_bits.h, so every
 * backend gets the same bits. The constants are rounded to fp32 first. */
#include "core/format_bits.h"
#include "core/ref/ref_kernels.h"
#include "core/ref/tensor_access.h"

#define INDEXER_HEAD_DIM 128 /* the 128^-0.5 of MLA.md, fixed by the model */

/* fp32 nearest n^-0.5. The double 1 / sqrt(n) lies within an ulp of n^-0.5,
 * and rounding it to fp32 gives the correctly rounded value for every n <
 * 2^17 (checked exactly, with rationals, against the fp32 midpoints). */
static float inv_sqrt_f32(int64_t n)
{
    return (float)(1.0 / sqrt((double)n));
}

mla_status mla_ref_indexer_head_weights(mla_context *ctx, const mla_head_weights_args *a)
{
    (void)ctx;
    const int64_t T = a->w.shape[0], Hi = a->w.shape[1];
    const float c_d = inv_sqrt_f32(INDEXER_HEAD_DIM), c_h = inv_sqrt_f32(Hi);
    for (int64_t t = 0; t < T; ++t) {
        for (int64_t h = 0; h < Hi; ++h) {
            const float w = mla_ref_load_f32(&a->w, mla_ref_offset2(&a->w, t, h));
            const float s = ((const float *)a->s_q.data)[mla_ref_offset2(&a->s_q, t, h)];
            const float v = mla_fb_mul(mla_fb_mul(mla_fb_mul(w, s), c_d), c_h);
            ((float *)a->w_out.data)[mla_ref_offset2(&a->w_out, t, h)] = v;
        }
    }
    return MLA_OK;
}
