/* Entry points of RMSNorm, fused QK RMSNorm and RoPE. */
#include <math.h>
#include <stdlib.h>

#include "core/dump_ops.h"
#include "core/indices.h"
#include "core/validate.h"
#include "core/variant.h"

#define QUANT_GROUP_FP8 128
#define QUANT_GROUP_MXFP4 32

static mla_status check_eps(mla_context *ctx, float eps, const char *name)
{
    if (!(eps >= 0.0f) || !isfinite(eps))
        return mla_fail(ctx, MLA_ERR_INVALID_ARGUMENT, name, "%s must be finite and >= 0", name);
    return MLA_OK;
}

/* x [T, D] and w [D], float dtypes. */
static mla_status check_norm_input(mla_context *ctx, const mla_tensor *x, const char *xname,
                                   const mla_tensor *w, const char *wname)
{
    MLA_TRY(mla_check_tensor(ctx, x, xname, 2));
    MLA_TRY(mla_check_dtype(ctx, x, xname, MLA_DT_FLOAT));
    MLA_TRY(mla_check_tensor(ctx, w, wname, 1));
    MLA_TRY(mla_check_dtype(ctx, w, wname, MLA_DT_FLOAT));
    return mla_check_extent(ctx, w, wname, 0, x->shape[1]);
}

/* y [T, D] float, the same shape as x; in place allowed. */
static mla_status check_norm_output(mla_context *ctx, const mla_tensor *y, const char *yname,
                                    const mla_tensor *x, const char *xname)
{
    MLA_TRY(mla_check_tensor(ctx, y, yname, 2));
    MLA_TRY(mla_check_dtype(ctx, y, yname, MLA_DT_FLOAT));
    MLA_TRY(mla_check_extent(ctx, y, yname, 0, x->shape[0]));
    MLA_TRY(mla_check_extent(ctx, y, yname, 1, x->shape[1]));
    MLA_TRY(mla_check_output(ctx, y, yname));
    return mla_check_inplace_or_disjoint(ctx, y, yname, x, xname);
}

mla_status mla_rmsnorm(mla_context *ctx, const mla_tensor *x, const mla_tensor *w, float eps,
                       mla_tensor *y)
{
    MLA_DUMP_HOOK(ctx, MLA_OP_RMSNORM, mla_dump_rmsnorm(ctx, x, w, eps, y));
    MLA_TRY(mla_begin(ctx));
    MLA_TRY(check_norm_input(ctx, x, "x", w, "w"));
    MLA_TRY(check_eps(ctx, eps, "eps"));
    MLA_TRY(check_norm_output(ctx, y, "y", x, "x"));
    MLA_TRY(mla_check_disjoint(ctx, y, "y", w, "w"));
    mla_variant v =
        mla_variant_of(MLA_OP_RMSNORM, x->dtype, y->dtype, 0, 0, 0, x->shape[0], x->shape[1]);
    mla_variant_tensors(&v, 3, (const mla_tensor *[]){x, w, y});
    MLA_TRY(mla_check_supported(ctx, &v));
    MLA_SLOT(ctx, rmsnorm);
    if (x->shape[0] == 0 || x->shape[1] == 0)
        return MLA_OK;
    mla_rmsnorm_args a = {*x, *w, *y, eps};
    return MLA_DISPATCH(ctx, ctx->ops->rmsnorm(ctx, &a));
}

/* q_out in its quantized forms, with the scales that go with it. */
static mla_status check_q_out(mla_context *ctx, const mla_tensor *q, const mla_tensor *q_out,
                              const mla_tensor *q_scales)
{
    const int64_t T = q->shape[0], D = q->shape[1];
    MLA_TRY(mla_check_tensor(ctx, q_out, "q_out", 2));
    MLA_TRY(mla_check_dtype(ctx, q_out, "q_out",
                            MLA_DT_FLOAT | MLA_DT_FP8 | MLA_DT(MLA_DTYPE_FP4X2)));
    MLA_TRY(mla_check_extent(ctx, q_out, "q_out", 0, T));
    MLA_TRY(mla_check_output(ctx, q_out, "q_out"));
    MLA_TRY(mla_check_inplace_or_disjoint(ctx, q_out, "q_out", q, "q"));
    const int fp8 = (MLA_DT(q_out->dtype) & MLA_DT_FP8) != 0;
    const int fp4 = q_out->dtype == MLA_DTYPE_FP4X2;
    if (!fp8 && !fp4) {
        if (q_scales)
            return mla_fail(ctx, MLA_ERR_INVALID_ARGUMENT, "q_scales",
                            "q_scales must be NULL when q_out is not quantized");
        return mla_check_extent(ctx, q_out, "q_out", 1, D);
    }
    const int64_t group = fp8 ? QUANT_GROUP_FP8 : QUANT_GROUP_MXFP4;
    if (D % group)
        return mla_fail_field(ctx, MLA_ERR_SHAPE, "q", "shape[1]",
                              "%lld is not a multiple of the quantization group %lld",
                              (long long)D, (long long)group);
    MLA_TRY(mla_check_extent(ctx, q_out, "q_out", 1, fp4 ? D / 2 : D));
    if (!q_scales)
        return mla_fail(ctx, MLA_ERR_NULL_POINTER, "q_scales",
                        "a quantized q_out needs q_scales");
    MLA_TRY(mla_check_tensor(ctx, q_scales, "q_scales", 2));
    MLA_TRY(mla_check_dtype(ctx, q_scales, "q_scales",
                            fp8 ? MLA_DT(MLA_DTYPE_F32) : MLA_DT_BYTE_SCALE));
    MLA_TRY(mla_check_extent(ctx, q_scales, "q_scales", 0, T));
    MLA_TRY(mla_check_extent(ctx, q_scales, "q_scales", 1, D / group));
    MLA_TRY(mla_check_output(ctx, q_scales, "q_scales"));
    MLA_TRY(mla_check_disjoint(ctx, q_scales, "q_scales", q, "q"));
    return mla_check_disjoint(ctx, q_scales, "q_scales", q_out, "q_out");
}

mla_status mla_fused_qk_rmsnorm(mla_context *ctx, const mla_tensor *q, const mla_tensor *q_w,
                                float q_eps, const mla_tensor *kv, const mla_tensor *kv_w,
                                float kv_eps, mla_tensor *q_out, mla_tensor *q_scales,
                                mla_tensor *kv_out)
{
    MLA_DUMP_HOOK(
        ctx, MLA_OP_QK_RMSNORM,
        mla_dump_qk_rmsnorm(ctx, q, q_w, q_eps, kv, kv_w, kv_eps, q_out, q_scales, kv_out));
    MLA_TRY(mla_begin(ctx));
    MLA_TRY(check_norm_input(ctx, q, "q", q_w, "q_w"));
    MLA_TRY(check_norm_input(ctx, kv, "kv", kv_w, "kv_w"));
    MLA_TRY(mla_check_extent(ctx, kv, "kv", 0, q->shape[0]));
    MLA_TRY(check_eps(ctx, q_eps, "q_eps"));
    MLA_TRY(check_eps(ctx, kv_eps, "kv_eps"));
    MLA_TRY(check_q_out(ctx, q, q_out, q_scales));
    MLA_TRY(check_norm_output(ctx, kv_out, "kv_out", kv, "kv"));
    const mla_tensor *outs[3] = {q_out, kv_out, q_scales};
    const char *onames[3] = {"q_out", "kv_out", "q_scales"};
    const mla_tensor *ins[4] = {q, q_w, kv, kv_w};
    const char *inames[4] = {"q", "q_w", "kv", "kv_w"};
    for (int o = 0; o < 3; ++o) {
        if (!outs[o])
            continue;
        for (int i = 0; i < 4; ++i) {
            /* in place on the own input is checked above */
            if ((o == 0 && i == 0) || (o == 1 && i == 2))
                continue;
            MLA_TRY(mla_check_disjoint(ctx, outs[o], onames[o], ins[i], inames[i]));
        }
    }
    MLA_TRY(mla_check_disjoint(ctx, kv_out, "kv_out", q_out, "q_out"));
    mla_variant v = mla_variant_of(MLA_OP_QK_RMSNORM, q->dtype, q_out->dtype, 0, 0, 0, q->shape[0],
                                   q->shape[1]);
    mla_variant_tensors(&v, 7, (const mla_tensor *[]){q, q_w, kv, kv_w, q_out, q_scales, kv_out});
    MLA_TRY(mla_check_supported(ctx, &v));
    MLA_SLOT(ctx, qk_rmsnorm);
    if (q->shape[0] == 0)
        return MLA_OK;
    mla_qk_rmsnorm_args a = {*q, *q_w, *kv, *kv_w, *q_out, *kv_out, {0}, q_eps, kv_eps};
    if (q_scales)
        a.q_scales = *q_scales;
    return MLA_DISPATCH(ctx, ctx->ops->qk_rmsnorm(ctx, &a));
}

/* cos and sin [P, R/2] F32, identical shapes. */
static mla_status check_rope_table(mla_context *ctx, const mla_tensor *cos, const mla_tensor *sin)
{
    MLA_TRY(mla_check_tensor(ctx, cos, "cos", 2));
    MLA_TRY(mla_check_dtype(ctx, cos, "cos", MLA_DT(MLA_DTYPE_F32)));
    MLA_TRY(mla_check_tensor(ctx, sin, "sin", 2));
    MLA_TRY(mla_check_dtype(ctx, sin, "sin", MLA_DT(MLA_DTYPE_F32)));
    MLA_TRY(mla_check_extent(ctx, sin, "sin", 0, cos->shape[0]));
    MLA_TRY(mla_check_extent(ctx, sin, "sin", 1, cos->shape[1]));
    if (cos->shape[1] == 0)
        return mla_fail_field(ctx, MLA_ERR_SHAPE, "cos", "shape[1]", "the rope dim is 0");
    /* every caller forms R = 2 * shape[1] */
    if (cos->shape[1] > INT64_MAX / 2)
        return mla_fail_field(ctx, MLA_ERR_OVERFLOW, "cos", "shape[1]",
                              "the rope dim 2 * %lld overflows", (long long)cos->shape[1]);
    return MLA_OK;
}

mla_status mla_check_positions(mla_context *ctx, const mla_tensor *pos, const char *name,
                               int64_t T, int64_t table_rows)
{
    MLA_TRY(mla_check_tensor(ctx, pos, name, 1));
    MLA_TRY(mla_check_dtype(ctx, pos, name, MLA_DT(MLA_DTYPE_I32) | MLA_DT(MLA_DTYPE_I64)));
    MLA_TRY(mla_check_extent(ctx, pos, name, 0, T));
    if (!mla_check_values(ctx, MLA_TRUST_INDICES))
        return MLA_OK;
    int64_t *v = NULL;
    MLA_TRY(mla_read_indices(ctx, pos, name, &v));
    mla_status st = mla_check_index_range(ctx, v, T, 0, table_rows, 0, name);
    free(v);
    return st;
}

mla_status mla_check_rope_table(mla_context *ctx, const mla_tensor *cos, const mla_tensor *sin)
{
    return check_rope_table(ctx, cos, sin);
}

mla_status mla_rope(mla_context *ctx, const mla_tensor *cos, const mla_tensor *sin,
                    const mla_tensor *positions, const mla_tensor *x, mla_tensor *y,
                    mla_rope_style style)
{
    MLA_DUMP_HOOK(ctx, MLA_OP_ROPE, mla_dump_rope(ctx, cos, sin, positions, x, y, style));
    MLA_TRY(mla_begin(ctx));
    MLA_TRY(check_rope_table(ctx, cos, sin));
    MLA_TRY(mla_check_tensor(ctx, x, "x", -1));
    if (x->ndim != 2 && x->ndim != 3)
        return mla_fail_field(ctx, MLA_ERR_SHAPE, "x", "ndim", "rank %d, expected 2 or 3",
                              (int)x->ndim);
    MLA_TRY(mla_check_dtype(ctx, x, "x", MLA_DT_FLOAT));
    MLA_TRY(mla_check_tensor(ctx, y, "y", x->ndim));
    MLA_TRY(mla_check_dtype(ctx, y, "y", MLA_DT_FLOAT));
    for (int32_t d = 0; d < x->ndim; ++d)
        MLA_TRY(mla_check_extent(ctx, y, "y", d, x->shape[d]));
    if ((int)style < 0 || style >= MLA_ROPE_STYLE_COUNT)
        return mla_fail(ctx, MLA_ERR_INVALID_ARGUMENT, "style", "unknown rope style %d",
                        (int)style);
    const int64_t R = 2 * cos->shape[1], D = x->shape[x->ndim - 1];
    if (R > D)
        return mla_fail_field(ctx, MLA_ERR_SHAPE, "x", "shape",
                              "the rope dim %lld is larger than the row (%lld)", (long long)R,
                              (long long)D);
    MLA_TRY(mla_check_output(ctx, y, "y"));
    MLA_TRY(mla_check_inplace_or_disjoint(ctx, y, "y", x, "x"));
    MLA_TRY(mla_check_disjoint(ctx, y, "y", cos, "cos"));
    MLA_TRY(mla_check_disjoint(ctx, y, "y", sin, "sin"));
    MLA_TRY(mla_check_tensor(ctx, positions, "positions", 1));
    MLA_TRY(mla_check_disjoint(ctx, y, "y", positions, "positions"));
    MLA_TRY(mla_check_positions(ctx, positions, "positions", x->shape[0], cos->shape[0]));
    mla_variant v =
        mla_variant_of(MLA_OP_ROPE, x->dtype, y->dtype, 0, (int32_t)style, 0, x->shape[0], R);
    mla_variant_tensors(&v, 5, (const mla_tensor *[]){cos, sin, positions, x, y});
    MLA_TRY(mla_check_supported(ctx, &v));
    MLA_SLOT(ctx, rope);
    if (mla_tensor_numel(x) == 0)
        return MLA_OK;
    mla_rope_args a = {*cos, *sin, *positions, mla_as_3d(x), mla_as_3d(y), style, R};
    return MLA_DISPATCH(ctx, ctx->ops->rope(ctx, &a));
}
