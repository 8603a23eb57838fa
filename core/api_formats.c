/* Entry points of the number-format ops: validate once, ask the backend,
 * dispatch. Nothing is written unless every check passed. */
#include "core/checked.h"
#include "core/dump_ops.h"
#include "core/validate.h"
#include "core/variant.h"

#define MXFP4_BLOCK 32

static int is_empty(const mla_tensor *t) { return mla_tensor_numel(t) == 0; }

/* Same extents, except that a FP4X2 side holds two values per element of
 * its last dim. */
static mla_status check_convert_shapes(mla_context *ctx, const mla_tensor *x, const mla_tensor *y)
{
    int xp = x->dtype == MLA_DTYPE_FP4X2, yp = y->dtype == MLA_DTYPE_FP4X2;
    if (y->ndim != x->ndim)
        return mla_fail_field(ctx, MLA_ERR_SHAPE, "y", "ndim", "rank %d, x has rank %d",
                              (int)y->ndim, (int)x->ndim);
    if ((xp || yp) && x->ndim == 0)
        return mla_fail_field(ctx, MLA_ERR_SHAPE, xp ? "x" : "y", "ndim",
                              "packed fp4 needs at least one dimension");
    for (int32_t i = 0; i < x->ndim; ++i) {
        int64_t want = x->shape[i];
        if (i == x->ndim - 1 && xp && !yp && !mla_ck_mul(x->shape[i], 2, &want))
            return mla_fail_field(ctx, MLA_ERR_OVERFLOW, "x", "shape",
                                  "last extent %lld unpacks to more than 2^63 values",
                                  (long long)x->shape[i]);
        if (i == x->ndim - 1 && yp && !xp)
            want = x->shape[i] / 2;
        if (i == x->ndim - 1 && yp && !xp && x->shape[i] % 2)
            return mla_fail_field(ctx, MLA_ERR_SHAPE, "x", "shape",
                                  "last extent %lld is odd; fp4 packs pairs",
                                  (long long)x->shape[i]);
        MLA_TRY(mla_check_extent(ctx, y, "y", i, want));
    }
    return MLA_OK;
}

mla_status mla_convert(mla_context *ctx, const mla_tensor *x, mla_tensor *y, mla_saturation mode)
{
    MLA_DUMP_HOOK(ctx, MLA_OP_CONVERT, mla_dump_convert(ctx, x, y, mode));
    MLA_TRY(mla_begin(ctx));
    MLA_TRY(mla_check_tensor(ctx, x, "x", -1));
    MLA_TRY(mla_check_tensor(ctx, y, "y", -1));
    MLA_TRY(mla_check_dtype(ctx, x, "x",
                            MLA_DT_FLOAT | MLA_DT_FP8 | MLA_DT(MLA_DTYPE_E8M0) |
                                MLA_DT(MLA_DTYPE_FP4X2)));
    MLA_TRY(mla_check_dtype(ctx, y, "y", MLA_DT_FLOAT | MLA_DT_FP8 | MLA_DT(MLA_DTYPE_FP4X2)));
    if ((int)mode < 0 || mode >= MLA_SATURATION_COUNT)
        return mla_fail(ctx, MLA_ERR_INVALID_ARGUMENT, "mode", "unknown saturation mode %d",
                        (int)mode);
    MLA_TRY(check_convert_shapes(ctx, x, y));
    MLA_TRY(mla_check_output(ctx, y, "y"));
    MLA_TRY(mla_check_inplace_or_disjoint(ctx, y, "y", x, "x"));
    mla_variant v = mla_variant_of(MLA_OP_CONVERT, x->dtype, y->dtype, 0, (int32_t)mode, 0,
                                   mla_tensor_numel(x), x->ndim ? x->shape[x->ndim - 1] : 1);
    mla_variant_tensors(&v, 2, (const mla_tensor *[]){x, y});
    MLA_TRY(mla_check_supported(ctx, &v));
    if (is_empty(y))
        return MLA_OK;
    mla_convert_args a = {*x, *y, mode};
    return MLA_DISPATCH(ctx, ctx->ops->convert(ctx, &a));
}

/* The e8m0 scale tensor of an MXFP4 [M, K] matrix, in the given layout. */
static mla_status check_mxfp4_scales(mla_context *ctx, const mla_tensor *s,
                                     mla_scale_layout layout, int64_t M, int64_t K)
{
    int64_t N = K / MXFP4_BLOCK;
    if ((int)layout < 0 || layout >= MLA_SCALE_LAYOUT_COUNT)
        return mla_fail(ctx, MLA_ERR_INVALID_ARGUMENT, "layout", "unknown scale layout %d",
                        (int)layout);
    if (layout == MLA_SCALE_PRESHUFFLED_GFX950) {
        MLA_TRY(mla_check_tensor(ctx, s, "scales", 1));
        MLA_TRY(mla_check_dtype(ctx, s, "scales", MLA_DT_BYTE_SCALE));
        const int64_t bytes = mla_scale_preshuffled_bytes(M, N);
        if (bytes < 0)
            return mla_fail_field(ctx, MLA_ERR_OVERFLOW, "scales", "shape",
                                  "the pre-shuffled scales of [%lld, %lld] overflow", (long long)M,
                                  (long long)N);
        MLA_TRY(mla_check_extent(ctx, s, "scales", 0, bytes));
        if (s->shape[0] > 1 && s->stride[0] != 1)
            return mla_fail_field(ctx, MLA_ERR_STRIDE, "scales", "stride",
                                  "the pre-shuffled layout is a contiguous byte array");
        return MLA_OK;
    }
    MLA_TRY(mla_check_tensor(ctx, s, "scales", 2));
    MLA_TRY(mla_check_dtype(ctx, s, "scales", MLA_DT_BYTE_SCALE));
    MLA_TRY(mla_check_extent(ctx, s, "scales", 0, M));
    MLA_TRY(mla_check_extent(ctx, s, "scales", 1, N));
    int unit = layout == MLA_SCALE_ROW_MAJOR ? 1 : 0; /* the dim with stride 1 */
    if (s->shape[unit] > 1 && s->stride[unit] != 1)
        return mla_fail_field(ctx, MLA_ERR_STRIDE, "scales", "stride",
                              "layout %s needs stride[%d] == 1", mla_scale_layout_name(layout),
                              unit);
    return MLA_OK;
}

static mla_status check_mxfp4_matrix(mla_context *ctx, const mla_tensor *m, const char *name,
                                     int64_t *M, int64_t *K)
{
    MLA_TRY(mla_check_tensor(ctx, m, name, 2));
    MLA_TRY(mla_check_dtype(ctx, m, name, MLA_DT_FLOAT));
    *M = m->shape[0];
    *K = m->shape[1];
    if (*K % MXFP4_BLOCK)
        return mla_fail_field(ctx, MLA_ERR_SHAPE, name, "shape[1]",
                              "K = %lld is not a multiple of %d", (long long)*K, MXFP4_BLOCK);
    return MLA_OK;
}

static mla_status check_fp4_codes(mla_context *ctx, const mla_tensor *c, int64_t M, int64_t K)
{
    MLA_TRY(mla_check_tensor(ctx, c, "codes", 2));
    MLA_TRY(mla_check_dtype(ctx, c, "codes", MLA_DT(MLA_DTYPE_FP4X2) | MLA_DT(MLA_DTYPE_U8)));
    MLA_TRY(mla_check_extent(ctx, c, "codes", 0, M));
    return mla_check_extent(ctx, c, "codes", 1, K / 2);
}

mla_status mla_mxfp4_quant(mla_context *ctx, const mla_tensor *x, mla_tensor *codes,
                           mla_tensor *scales, mla_scale_layout layout, mla_mxfp4_rule rule)
{
    MLA_DUMP_HOOK(ctx, MLA_OP_MXFP4_QUANT,
                  mla_dump_mxfp4_quant(ctx, x, codes, scales, layout, rule));
    MLA_TRY(mla_begin(ctx));
    int64_t M, K;
    MLA_TRY(check_mxfp4_matrix(ctx, x, "x", &M, &K));
    MLA_TRY(check_fp4_codes(ctx, codes, M, K));
    MLA_TRY(check_mxfp4_scales(ctx, scales, layout, M, K));
    if ((int)rule < 0 || rule >= MLA_MXFP4_RULE_COUNT)
        return mla_fail(ctx, MLA_ERR_INVALID_ARGUMENT, "rule", "unknown MXFP4 rule %d", (int)rule);
    MLA_TRY(mla_check_output(ctx, codes, "codes"));
    MLA_TRY(mla_check_output(ctx, scales, "scales"));
    MLA_TRY(mla_check_disjoint(ctx, codes, "codes", x, "x"));
    MLA_TRY(mla_check_disjoint(ctx, scales, "scales", x, "x"));
    MLA_TRY(mla_check_disjoint(ctx, scales, "scales", codes, "codes"));
    mla_variant v = mla_variant_of(MLA_OP_MXFP4_QUANT, x->dtype, MLA_DTYPE_FP4X2, (int32_t)layout,
                                   (int32_t)rule, MXFP4_BLOCK, M, K);
    mla_variant_tensors(&v, 3, (const mla_tensor *[]){x, codes, scales});
    MLA_TRY(mla_check_supported(ctx, &v));
    if (M == 0 || K == 0)
        return MLA_OK;
    mla_mxfp4_quant_args a = {*x, *codes, *scales, layout, rule, M, K};
    return MLA_DISPATCH(ctx, ctx->ops->mxfp4_quant(ctx, &a));
}

mla_status mla_mxfp4_dequant(mla_context *ctx, const mla_tensor *codes, const mla_tensor *scales,
                             mla_scale_layout layout, mla_tensor *y)
{
    MLA_DUMP_HOOK(ctx, MLA_OP_MXFP4_DEQUANT, mla_dump_mxfp4_dequant(ctx, codes, scales, layout, y));
    MLA_TRY(mla_begin(ctx));
    int64_t M, K;
    MLA_TRY(check_mxfp4_matrix(ctx, y, "y", &M, &K));
    MLA_TRY(check_fp4_codes(ctx, codes, M, K));
    MLA_TRY(check_mxfp4_scales(ctx, scales, layout, M, K));
    MLA_TRY(mla_check_output(ctx, y, "y"));
    MLA_TRY(mla_check_disjoint(ctx, y, "y", codes, "codes"));
    MLA_TRY(mla_check_disjoint(ctx, y, "y", scales, "scales"));
    mla_variant v = mla_variant_of(MLA_OP_MXFP4_DEQUANT, MLA_DTYPE_FP4X2, y->dtype, (int32_t)layout,
                                   0, MXFP4_BLOCK, M, K);
    mla_variant_tensors(&v, 3, (const mla_tensor *[]){codes, scales, y});
    MLA_TRY(mla_check_supported(ctx, &v));
    if (M == 0 || K == 0)
        return MLA_OK;
    mla_mxfp4_dequant_args a = {*codes, *scales, *y, layout, M, K};
    return MLA_DISPATCH(ctx, ctx->ops->mxfp4_dequant(ctx, &a));
}

/* The pieces shared by fp8 group quant and dequant: a float [M, K] matrix,
 * fp8 codes of the same shape, F32 scales [M, K / group]. */
static mla_status check_fp8_group(mla_context *ctx, const mla_tensor *f, const char *fname,
                                  const mla_tensor *codes, const mla_tensor *scales, int64_t group)
{
    MLA_TRY(mla_check_tensor(ctx, f, fname, 2));
    MLA_TRY(mla_check_dtype(ctx, f, fname, MLA_DT_FLOAT));
    MLA_TRY(mla_check_tensor(ctx, codes, "codes", 2));
    MLA_TRY(mla_check_dtype(ctx, codes, "codes", MLA_DT_FP8));
    MLA_TRY(mla_check_tensor(ctx, scales, "scales", 2));
    MLA_TRY(mla_check_dtype(ctx, scales, "scales", MLA_DT(MLA_DTYPE_F32)));
    if (group <= 0)
        return mla_fail(ctx, MLA_ERR_INVALID_ARGUMENT, "group", "group size %lld is not positive",
                        (long long)group);
    int64_t M = f->shape[0], K = f->shape[1];
    if (K % group)
        return mla_fail_field(ctx, MLA_ERR_SHAPE, fname, "shape[1]",
                              "K = %lld is not a multiple of the group size %lld", (long long)K,
                              (long long)group);
    MLA_TRY(mla_check_extent(ctx, codes, "codes", 0, M));
    MLA_TRY(mla_check_extent(ctx, codes, "codes", 1, K));
    MLA_TRY(mla_check_extent(ctx, scales, "scales", 0, M));
    return mla_check_extent(ctx, scales, "scales", 1, K / group);
}

mla_status mla_fp8_group_quant(mla_context *ctx, const mla_tensor *x, mla_tensor *codes,
                               mla_tensor *scales, int64_t group, mla_fp8_scale_rule rule)
{
    MLA_DUMP_HOOK(ctx, MLA_OP_FP8_GROUP_QUANT,
                  mla_dump_fp8_group_quant(ctx, x, codes, scales, group, rule));
    MLA_TRY(mla_begin(ctx));
    MLA_TRY(check_fp8_group(ctx, x, "x", codes, scales, group));
    if ((int)rule < 0 || rule >= MLA_FP8_SCALE_RULE_COUNT)
        return mla_fail(ctx, MLA_ERR_INVALID_ARGUMENT, "rule", "unknown fp8 scale rule %d",
                        (int)rule);
    MLA_TRY(mla_check_output(ctx, codes, "codes"));
    MLA_TRY(mla_check_output(ctx, scales, "scales"));
    MLA_TRY(mla_check_disjoint(ctx, codes, "codes", x, "x"));
    MLA_TRY(mla_check_disjoint(ctx, scales, "scales", x, "x"));
    MLA_TRY(mla_check_disjoint(ctx, scales, "scales", codes, "codes"));
    int64_t M = x->shape[0], K = x->shape[1];
    mla_variant v = mla_variant_of(MLA_OP_FP8_GROUP_QUANT, x->dtype, codes->dtype, 0, (int32_t)rule,
                                   group, M, K);
    mla_variant_tensors(&v, 3, (const mla_tensor *[]){x, codes, scales});
    MLA_TRY(mla_check_supported(ctx, &v));
    if (M == 0 || K == 0)
        return MLA_OK;
    mla_fp8_group_quant_args a = {*x, *codes, *scales, group, rule, M, K};
    return MLA_DISPATCH(ctx, ctx->ops->fp8_group_quant(ctx, &a));
}

mla_status mla_fp8_group_dequant(mla_context *ctx, const mla_tensor *codes,
                                 const mla_tensor *scales, int64_t group, mla_tensor *y)
{
    MLA_DUMP_HOOK(ctx, MLA_OP_FP8_GROUP_DEQUANT,
                  mla_dump_fp8_group_dequant(ctx, codes, scales, group, y));
    MLA_TRY(mla_begin(ctx));
    MLA_TRY(check_fp8_group(ctx, y, "y", codes, scales, group));
    MLA_TRY(mla_check_output(ctx, y, "y"));
    MLA_TRY(mla_check_disjoint(ctx, y, "y", codes, "codes"));
    MLA_TRY(mla_check_disjoint(ctx, y, "y", scales, "scales"));
    int64_t M = y->shape[0], K = y->shape[1];
    mla_variant v =
        mla_variant_of(MLA_OP_FP8_GROUP_DEQUANT, codes->dtype, y->dtype, 0, 0, group, M, K);
    mla_variant_tensors(&v, 3, (const mla_tensor *[]){codes, scales, y});
    MLA_TRY(mla_check_supported(ctx, &v));
    if (M == 0 || K == 0)
        return MLA_OK;
    mla_fp8_group_dequant_args a = {*codes, *scales, *y, group, M, K};
    return MLA_DISPATCH(ctx, ctx->ops->fp8_group_dequant(ctx, &a));
}
