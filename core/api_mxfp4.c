/* Entry points of the MXFP4 GEMM path (MLA.md section 7): batched a16wfp4 /
 * a4w4 GEMMs through any output strides, and the fused flatten + quant. */
#include <stdio.h>

#include "core/checked.h"
#include "core/dump_ops.h"
#include "core/validate.h"
#include "core/variant.h"

#define MX_BLOCK 32
#define FP8_GROUP 128

static mla_status check_layout(mla_context *ctx, mla_scale_layout layout, const char *name)
{
    if ((int)layout < 0 || layout >= MLA_SCALE_LAYOUT_COUNT)
        return mla_fail(ctx, MLA_ERR_INVALID_ARGUMENT, name, "unknown scale layout %d",
                        (int)layout);
    return MLA_OK;
}

/* codes [B, R, K/2] and scales per layout (see mla_mxfp4_operand). */
static mla_status check_operand(mla_context *ctx, const mla_mxfp4_operand *op, const char *name,
                                int64_t B, int64_t R, int64_t K)
{
    char cname[32], sname[32], lname[32];
    snprintf(cname, sizeof cname, "%s.codes", name);
    snprintf(sname, sizeof sname, "%s.scales", name);
    snprintf(lname, sizeof lname, "%s.layout", name);
    if (!op)
        return mla_fail(ctx, MLA_ERR_NULL_POINTER, name, "%s is NULL", name);
    MLA_TRY(mla_check_tensor(ctx, &op->codes, cname, 3));
    MLA_TRY(mla_check_dtype(ctx, &op->codes, cname, MLA_DT(MLA_DTYPE_FP4X2) | MLA_DT(MLA_DTYPE_U8)));
    MLA_TRY(mla_check_extent(ctx, &op->codes, cname, 0, B));
    MLA_TRY(mla_check_extent(ctx, &op->codes, cname, 1, R));
    MLA_TRY(mla_check_extent(ctx, &op->codes, cname, 2, K / 2));
    MLA_TRY(check_layout(ctx, op->layout, lname));
    const mla_tensor *s = &op->scales;
    const int64_t N = K / MX_BLOCK;
    if (op->layout == MLA_SCALE_PRESHUFFLED_GFX950) {
        MLA_TRY(mla_check_tensor(ctx, s, sname, 2));
        MLA_TRY(mla_check_dtype(ctx, s, sname, MLA_DT_BYTE_SCALE));
        MLA_TRY(mla_check_extent(ctx, s, sname, 0, B));
        const int64_t bytes = mla_scale_preshuffled_bytes(R, N);
        if (bytes < 0)
            return mla_fail_field(ctx, MLA_ERR_OVERFLOW, sname, "shape",
                                  "the pre-shuffled scales of [%lld, %lld] overflow", (long long)R,
                                  (long long)N);
        MLA_TRY(mla_check_extent(ctx, s, sname, 1, bytes));
        if (s->shape[1] > 1 && s->stride[1] != 1)
            return mla_fail_field(ctx, MLA_ERR_STRIDE, sname, "stride",
                                  "pre-shuffled scales are contiguous bytes per batch");
        return MLA_OK;
    }
    MLA_TRY(mla_check_tensor(ctx, s, sname, 3));
    MLA_TRY(mla_check_dtype(ctx, s, sname, MLA_DT_BYTE_SCALE));
    MLA_TRY(mla_check_extent(ctx, s, sname, 0, B));
    MLA_TRY(mla_check_extent(ctx, s, sname, 1, R));
    MLA_TRY(mla_check_extent(ctx, s, sname, 2, N));
    const int unit = op->layout == MLA_SCALE_ROW_MAJOR ? 2 : 1;
    if (s->shape[unit] > 1 && s->stride[unit] != 1)
        return mla_fail_field(ctx, MLA_ERR_STRIDE, sname, "stride",
                              "layout %s needs stride[%d] == 1", mla_scale_layout_name(op->layout),
                              unit);
    return MLA_OK;
}

static mla_status check_k(mla_context *ctx, int64_t K, const char *name)
{
    if (K % MX_BLOCK)
        return mla_fail(ctx, MLA_ERR_SHAPE, name, "K = %lld is not a multiple of %d",
                        (long long)K, MX_BLOCK);
    return MLA_OK;
}

static mla_status check_gemm_y(mla_context *ctx, const mla_tensor *y, int64_t B, int64_t M,
                               int64_t N)
{
    MLA_TRY(mla_check_tensor(ctx, y, "y", 3));
    MLA_TRY(mla_check_dtype(ctx, y, "y", MLA_DT(MLA_DTYPE_F32) | MLA_DT(MLA_DTYPE_BF16)));
    MLA_TRY(mla_check_extent(ctx, y, "y", 0, B));
    MLA_TRY(mla_check_extent(ctx, y, "y", 1, M));
    MLA_TRY(mla_check_extent(ctx, y, "y", 2, N));
    return mla_check_output(ctx, y, "y");
}

static mla_status check_y_apart(mla_context *ctx, const mla_tensor *y,
                                const mla_mxfp4_operand *op, const char *cname,
                                const char *sname)
{
    MLA_TRY(mla_check_disjoint(ctx, y, "y", &op->codes, cname));
    return mla_check_disjoint(ctx, y, "y", &op->scales, sname);
}

mla_status mla_batched_gemm_a16wfp4(mla_context *ctx, const mla_tensor *x,
                                    const mla_mxfp4_operand *w, int32_t prequant,
                                    mla_mxfp4_rule rule, mla_tensor *y)
{
    MLA_DUMP_HOOK(ctx, MLA_OP_GEMM_A16WFP4, mla_dump_gemm_a16wfp4(ctx, x, w, prequant, rule, y));
    MLA_TRY(mla_begin(ctx));
    MLA_TRY(mla_check_tensor(ctx, x, "x", 3));
    MLA_TRY(mla_check_dtype(ctx, x, "x", MLA_DT(MLA_DTYPE_F32) | MLA_DT(MLA_DTYPE_BF16)));
    const int64_t B = x->shape[0], M = x->shape[1], K = x->shape[2];
    MLA_TRY(check_k(ctx, K, "x.shape[2]"));
    if (!w)
        return mla_fail(ctx, MLA_ERR_NULL_POINTER, "w", "w is NULL");
    const int64_t N = w->codes.ndim == 3 ? w->codes.shape[1] : -1;
    MLA_TRY(check_operand(ctx, w, "w", B, N, K));
    if (prequant != 0 && prequant != 1)
        return mla_fail(ctx, MLA_ERR_INVALID_ARGUMENT, "prequant", "prequant is 0 or 1");
    if ((int)rule < 0 || rule >= MLA_MXFP4_RULE_COUNT)
        return mla_fail(ctx, MLA_ERR_INVALID_ARGUMENT, "rule", "unknown MXFP4 rule %d", (int)rule);
    MLA_TRY(check_gemm_y(ctx, y, B, M, N));
    MLA_TRY(mla_check_disjoint(ctx, y, "y", x, "x"));
    MLA_TRY(check_y_apart(ctx, y, w, "w.codes", "w.scales"));
    mla_variant v = mla_variant_of(MLA_OP_GEMM_A16WFP4, x->dtype, y->dtype, (int32_t)w->layout,
                                   (int32_t)rule, N, M, K);
    mla_variant_tensors(&v, 4, (const mla_tensor *[]){x, &w->codes, &w->scales, y});
    v.prequant = prequant;
    MLA_TRY(mla_check_supported(ctx, &v));
    MLA_SLOT(ctx, gemm_a16wfp4);
    if (B == 0 || M == 0 || N == 0)
        return MLA_OK;
    mla_mxfp4_gemm_args a = {*x, {{0}, {0}, 0}, *w, *y, prequant, rule, B, M, N, K};
    return MLA_DISPATCH(ctx, ctx->ops->gemm_a16wfp4(ctx, &a));
}

mla_status mla_batched_gemm_a4w4(mla_context *ctx, const mla_mxfp4_operand *x,
                                 const mla_mxfp4_operand *w, mla_tensor *y)
{
    MLA_DUMP_HOOK(ctx, MLA_OP_GEMM_A4W4, mla_dump_gemm_a4w4(ctx, x, w, y));
    MLA_TRY(mla_begin(ctx));
    if (!x || !w)
        return mla_fail(ctx, MLA_ERR_NULL_POINTER, x ? "w" : "x", "operand is NULL");
    if (x->codes.ndim != 3)
        return mla_fail_field(ctx, MLA_ERR_SHAPE, "x.codes", "ndim", "rank %d, expected 3",
                              (int)x->codes.ndim);
    const int64_t B = x->codes.shape[0], M = x->codes.shape[1];
    int64_t K;
    if (!mla_ck_mul(x->codes.shape[2], 2, &K))
        return mla_fail_field(ctx, MLA_ERR_OVERFLOW, "x.codes", "shape", "K = 2 * %lld overflows",
                              (long long)x->codes.shape[2]);
    MLA_TRY(check_k(ctx, K, "x.codes.shape[2]"));
    MLA_TRY(check_operand(ctx, x, "x", B, M, K));
    const int64_t N = w->codes.ndim == 3 ? w->codes.shape[1] : -1;
    MLA_TRY(check_operand(ctx, w, "w", B, N, K));
    MLA_TRY(check_gemm_y(ctx, y, B, M, N));
    MLA_TRY(check_y_apart(ctx, y, x, "x.codes", "x.scales"));
    MLA_TRY(check_y_apart(ctx, y, w, "w.codes", "w.scales"));
    mla_variant v =
        mla_variant_of(MLA_OP_GEMM_A4W4, MLA_DTYPE_FP4X2, y->dtype, (int32_t)w->layout, 0, N, M, K);
    mla_variant_tensors(&v, 5,
                        (const mla_tensor *[]){&x->codes, &x->scales, &w->codes, &w->scales, y});
    v.layout_x = (int32_t)x->layout;
    MLA_TRY(mla_check_supported(ctx, &v));
    MLA_SLOT(ctx, gemm_a4w4);
    if (B == 0 || M == 0 || N == 0)
        return MLA_OK;
    mla_mxfp4_gemm_args a = {{0}, *x, *w, *y, 0, MLA_MXFP4_PRODUCTION, B, M, N, K};
    return MLA_DISPATCH(ctx, ctx->ops->gemm_a4w4(ctx, &a));
}

/* x [T, H, v] float, flattened to rows of H*v that must split into groups. */
static mla_status check_flatten_input(mla_context *ctx, const mla_tensor *x, int64_t group,
                                      int64_t *T, int64_t *HV)
{
    MLA_TRY(mla_check_tensor(ctx, x, "x", 3));
    MLA_TRY(mla_check_dtype(ctx, x, "x", MLA_DT_FLOAT));
    *T = x->shape[0];
    if (!mla_ck_mul(x->shape[1], x->shape[2], HV))
        return mla_fail_field(ctx, MLA_ERR_OVERFLOW, "x", "shape", "H * v overflows");
    if (*HV % group)
        return mla_fail_field(ctx, MLA_ERR_SHAPE, "x", "shape",
                              "H * v = %lld is not a multiple of %lld", (long long)*HV,
                              (long long)group);
    return MLA_OK;
}

static mla_status check_flatten_outputs(mla_context *ctx, const mla_tensor *x,
                                        const mla_tensor *codes, const mla_tensor *scales)
{
    MLA_TRY(mla_check_output(ctx, codes, "codes"));
    MLA_TRY(mla_check_output(ctx, scales, "scales"));
    MLA_TRY(mla_check_disjoint(ctx, codes, "codes", x, "x"));
    MLA_TRY(mla_check_disjoint(ctx, scales, "scales", x, "x"));
    return mla_check_disjoint(ctx, scales, "scales", codes, "codes");
}

mla_status mla_fused_flatten_mxfp4_quant(mla_context *ctx, const mla_tensor *x,
                                         mla_tensor *codes, mla_tensor *scales,
                                         mla_mxfp4_rule rule)
{
    MLA_DUMP_HOOK(ctx, MLA_OP_FLATTEN_MXFP4_QUANT,
                  mla_dump_flatten_mxfp4_quant(ctx, x, codes, scales, rule));
    MLA_TRY(mla_begin(ctx));
    int64_t T, HV;
    MLA_TRY(check_flatten_input(ctx, x, MX_BLOCK, &T, &HV));
    MLA_TRY(mla_check_tensor(ctx, codes, "codes", 2));
    MLA_TRY(mla_check_dtype(ctx, codes, "codes", MLA_DT(MLA_DTYPE_FP4X2) | MLA_DT(MLA_DTYPE_U8)));
    MLA_TRY(mla_check_extent(ctx, codes, "codes", 0, T));
    MLA_TRY(mla_check_extent(ctx, codes, "codes", 1, HV / 2));
    MLA_TRY(mla_check_tensor(ctx, scales, "scales", 2));
    MLA_TRY(mla_check_dtype(ctx, scales, "scales", MLA_DT_BYTE_SCALE));
    MLA_TRY(mla_check_extent(ctx, scales, "scales", 0, T));
    MLA_TRY(mla_check_extent(ctx, scales, "scales", 1, HV / MX_BLOCK));
    if ((int)rule < 0 || rule >= MLA_MXFP4_RULE_COUNT)
        return mla_fail(ctx, MLA_ERR_INVALID_ARGUMENT, "rule", "unknown MXFP4 rule %d", (int)rule);
    MLA_TRY(check_flatten_outputs(ctx, x, codes, scales));
    mla_variant v = mla_variant_of(MLA_OP_FLATTEN_MXFP4_QUANT, x->dtype, MLA_DTYPE_FP4X2, 0,
                                   (int32_t)rule, MX_BLOCK, T, HV);
    mla_variant_tensors(&v, 3, (const mla_tensor *[]){x, codes, scales});
    MLA_TRY(mla_check_supported(ctx, &v));
    MLA_SLOT(ctx, flatten_mxfp4_quant);
    if (T == 0 || HV == 0)
        return MLA_OK;
    mla_flatten_quant_args a = {*x, *codes, *scales, rule};
    return MLA_DISPATCH(ctx, ctx->ops->flatten_mxfp4_quant(ctx, &a));
}

mla_status mla_fused_flatten_fp8_group_quant(mla_context *ctx, const mla_tensor *x,
                                             mla_tensor *codes, mla_tensor *scales)
{
    MLA_DUMP_HOOK(ctx, MLA_OP_FLATTEN_FP8_QUANT, mla_dump_flatten_fp8_quant(ctx, x, codes, scales));
    MLA_TRY(mla_begin(ctx));
    int64_t T, HV;
    MLA_TRY(check_flatten_input(ctx, x, FP8_GROUP, &T, &HV));
    MLA_TRY(mla_check_tensor(ctx, codes, "codes", 2));
    MLA_TRY(mla_check_dtype(ctx, codes, "codes", MLA_DT_FP8));
    MLA_TRY(mla_check_extent(ctx, codes, "codes", 0, T));
    MLA_TRY(mla_check_extent(ctx, codes, "codes", 1, HV));
    MLA_TRY(mla_check_tensor(ctx, scales, "scales", 2));
    MLA_TRY(mla_check_dtype(ctx, scales, "scales", MLA_DT(MLA_DTYPE_F32)));
    MLA_TRY(mla_check_extent(ctx, scales, "scales", 0, T));
    MLA_TRY(mla_check_extent(ctx, scales, "scales", 1, HV / FP8_GROUP));
    MLA_TRY(check_flatten_outputs(ctx, x, codes, scales));
    mla_variant v = mla_variant_of(MLA_OP_FLATTEN_FP8_QUANT, x->dtype, codes->dtype, 0,
                                   MLA_FP8_SCALE_AITER, FP8_GROUP, T, HV);
    mla_variant_tensors(&v, 3, (const mla_tensor *[]){x, codes, scales});
    MLA_TRY(mla_check_supported(ctx, &v));
    MLA_SLOT(ctx, flatten_fp8_quant);
    if (T == 0 || HV == 0)
        return MLA_OK;
    mla_flatten_quant_args a = {*x, *codes, *scales, MLA_MXFP4_PRODUCTION};
    return MLA_DISPATCH(ctx, ctx->ops->flatten_fp8_quant(ctx, &a));
}
