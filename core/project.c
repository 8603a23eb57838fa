/* One projection y = x @ W^T for every stored form of W the layer loader
 * produces (include/mla/mla_weights.h): bf16 and fp8 128x128 blocks go to
 * mla_linear; MXFP4 goes to the a16wfp4 GEMM as a batch of one, with the
 * activations quantized by the production rule first (aiter's only mode,
 * what MI350X checkpoints are calibrated for). */
#include "core/prepare_internal.h"
#include "core/validate.h"

int64_t mla_weight_in(const mla_weight *w)
{
    return w->w.dtype == MLA_DTYPE_FP4X2 ? 2 * w->w.shape[1] : w->w.shape[1];
}

mla_status mla_check_projection(mla_context *ctx, const mla_weight *w, const char *name,
                                int64_t rows, int64_t cols)
{
    MLA_TRY(mla_check_tensor(ctx, &w->w, name, 2));
    if (w->w.shape[0] != rows || mla_weight_in(w) != cols)
        return mla_fail(ctx, MLA_ERR_SHAPE, name,
                        "%s is [%lld, %lld], the config needs [%lld, %lld]", name,
                        (long long)w->w.shape[0], (long long)mla_weight_in(w), (long long)rows,
                        (long long)cols);
    if (w->w.dtype == MLA_DTYPE_FP4X2) {
        MLA_TRY(mla_check_tensor(ctx, &w->scale, name, 2));
        if (w->scale.shape[0] != rows || w->scale.shape[1] * 32 != cols)
            return mla_fail_field(ctx, MLA_ERR_SHAPE, name, "scale",
                                  "MXFP4 scales are [%lld, %lld]", (long long)rows,
                                  (long long)(cols / 32));
    } else if (w->w.dtype == MLA_DTYPE_FP8_E4M3FN) {
        MLA_TRY(mla_check_tensor(ctx, &w->scale, name, 2));
    } else if (w->w.dtype != MLA_DTYPE_BF16) {
        return mla_fail_field(ctx, MLA_ERR_DTYPE, name, "w.dtype",
                              "bf16, fp8 e4m3fn with block scales, or MXFP4");
    }
    return MLA_OK;
}

mla_status mla_check_linear_weight(mla_context *ctx, const mla_weight *w, const char *name,
                                   int64_t rows, int64_t cols)
{
    MLA_TRY(mla_check_projection(ctx, w, name, rows, cols));
    if (w->w.dtype == MLA_DTYPE_FP4X2)
        return mla_fail_field(ctx, MLA_ERR_UNSUPPORTED, name, "w.dtype",
                              "the indexer's projections take bf16 or fp8 blocks");
    return MLA_OK;
}

int mla_weight_tensors(const mla_layer_weights *w, int q_lora, int with_o, const mla_tensor **t,
                       const char **names)
{
    const mla_weight *ws[5] = {&w->q_a_proj, &w->q_b_proj, &w->kv_a_proj_with_mqa, &w->kv_b_proj,
                               &w->o_proj};
    static const char *const wn[5][2] = {
        {"weights.q_a_proj.w", "weights.q_a_proj.scale"},
        {"weights.q_b_proj.w", "weights.q_b_proj.scale"},
        {"weights.kv_a_proj_with_mqa.w", "weights.kv_a_proj_with_mqa.scale"},
        {"weights.kv_b_proj.w", "weights.kv_b_proj.scale"},
        {"weights.o_proj.w", "weights.o_proj.scale"}};
    int n = 0;
    for (int i = q_lora ? 0 : 1; i < (with_o ? 5 : 4); ++i) {
        t[n] = &ws[i]->w, names[n++] = wn[i][0];
        if (ws[i]->w.dtype != MLA_DTYPE_BF16)
            t[n] = &ws[i]->scale, names[n++] = wn[i][1];
    }
    if (q_lora)
        t[n] = &w->q_a_layernorm, names[n++] = "weights.q_a_layernorm";
    t[n] = &w->kv_a_layernorm, names[n++] = "weights.kv_a_layernorm";
    return n;
}

/* [r, c] seen as [1, r, c]. */
static mla_tensor batch1(const mla_tensor *t)
{
    return mla_view(t->data, t->dtype, t->memory, 3, (int64_t[]){1, t->shape[0], t->shape[1]},
                    (int64_t[]){t->shape[0] * t->stride[0], t->stride[0], t->stride[1]});
}

mla_status mla_project(mla_context *ctx, const mla_tensor *x, const mla_weight *w, mla_tensor *y)
{
    if (w->w.dtype == MLA_DTYPE_BF16)
        return mla_linear(ctx, x, &w->w, NULL, y);
    if (w->w.dtype != MLA_DTYPE_FP4X2)
        return mla_linear(ctx, x, &w->w, &w->scale, y);
    mla_mxfp4_operand op = {batch1(&w->w), batch1(&w->scale), MLA_SCALE_ROW_MAJOR};
    mla_tensor x3 = batch1(x), y3 = batch1(y);
    return mla_batched_gemm_a16wfp4(ctx, &x3, &op, 1, MLA_MXFP4_PRODUCTION, &y3);
}
