/* Entry points of the projections: linear (x @ W^T) and the batched GEMM of
 * the W_kc / W_vc absorb. */
#include <math.h>

#include "core/checked.h"
#include "core/dump_ops.h"
#include "core/validate.h"
#include "core/variant.h"

#define WEIGHT_BLOCK 128

#define GEMM_X_DTYPES (MLA_DT(MLA_DTYPE_F32) | MLA_DT(MLA_DTYPE_BF16))
#define GEMM_W_DTYPES (MLA_DT(MLA_DTYPE_BF16) | MLA_DT_FP8)
#define GEMM_Y_DTYPES (MLA_DT(MLA_DTYPE_F32) | MLA_DT(MLA_DTYPE_BF16))

mla_status mla_linear(mla_context *ctx, const mla_tensor *x, const mla_tensor *w,
                      const mla_tensor *w_scale, mla_tensor *y)
{
    MLA_DUMP_HOOK(ctx, MLA_OP_LINEAR, mla_dump_linear(ctx, x, w, w_scale, y));
    MLA_TRY(mla_begin(ctx));
    MLA_TRY(mla_check_tensor(ctx, x, "x", 2));
    MLA_TRY(mla_check_dtype(ctx, x, "x", GEMM_X_DTYPES));
    MLA_TRY(mla_check_tensor(ctx, w, "w", 2));
    MLA_TRY(mla_check_dtype(ctx, w, "w", GEMM_W_DTYPES));
    const int64_t T = x->shape[0], K = x->shape[1], N = w->shape[0];
    MLA_TRY(mla_check_extent(ctx, w, "w", 1, K));
    const int fp8 = w->dtype != MLA_DTYPE_BF16;
    if (fp8) {
        if (!w_scale)
            return mla_fail(ctx, MLA_ERR_NULL_POINTER, "w_scale", "fp8 weights need block scales");
        MLA_TRY(mla_check_tensor(ctx, w_scale, "w_scale", 2));
        MLA_TRY(mla_check_dtype(ctx, w_scale, "w_scale", MLA_DT(MLA_DTYPE_F32)));
        MLA_TRY(mla_check_extent(ctx, w_scale, "w_scale", 0, mla_sz_ceil_div(N, WEIGHT_BLOCK)));
        MLA_TRY(mla_check_extent(ctx, w_scale, "w_scale", 1, mla_sz_ceil_div(K, WEIGHT_BLOCK)));
    } else if (w_scale) {
        return mla_fail(ctx, MLA_ERR_INVALID_ARGUMENT, "w_scale",
                        "bf16 weights take no scales (pass NULL)");
    }
    MLA_TRY(mla_check_tensor(ctx, y, "y", 2));
    MLA_TRY(mla_check_dtype(ctx, y, "y", GEMM_Y_DTYPES));
    MLA_TRY(mla_check_extent(ctx, y, "y", 0, T));
    MLA_TRY(mla_check_extent(ctx, y, "y", 1, N));
    MLA_TRY(mla_check_output(ctx, y, "y"));
    MLA_TRY(mla_check_disjoint(ctx, y, "y", x, "x"));
    MLA_TRY(mla_check_disjoint(ctx, y, "y", w, "w"));
    if (fp8)
        MLA_TRY(mla_check_disjoint(ctx, y, "y", w_scale, "w_scale"));
    mla_variant v = mla_variant_of(MLA_OP_LINEAR, w->dtype, y->dtype, 0, 0, N, T, K);
    mla_variant_tensors(&v, 4, (const mla_tensor *[]){x, w, fp8 ? w_scale : NULL, y});
    MLA_TRY(mla_check_supported(ctx, &v));
    MLA_SLOT(ctx, linear);
    if (T == 0 || N == 0)
        return MLA_OK;
    mla_linear_args a = {*x, *w, *y, {0}};
    if (fp8)
        a.w_scale = *w_scale;
    return MLA_DISPATCH(ctx, ctx->ops->linear(ctx, &a));
}

mla_status mla_batched_gemm(mla_context *ctx, const mla_tensor *x, const mla_tensor *w,
                            float w_scale, mla_tensor *y)
{
    MLA_DUMP_HOOK(ctx, MLA_OP_BATCHED_GEMM, mla_dump_batched_gemm(ctx, x, w, w_scale, y));
    MLA_TRY(mla_begin(ctx));
    MLA_TRY(mla_check_tensor(ctx, x, "x", 3));
    MLA_TRY(mla_check_dtype(ctx, x, "x", GEMM_X_DTYPES));
    MLA_TRY(mla_check_tensor(ctx, w, "w", 3));
    MLA_TRY(mla_check_dtype(ctx, w, "w", GEMM_W_DTYPES));
    const int64_t B = x->shape[0], M = x->shape[1], K = x->shape[2], N = w->shape[2];
    MLA_TRY(mla_check_extent(ctx, w, "w", 0, B));
    MLA_TRY(mla_check_extent(ctx, w, "w", 1, K));
    if (!isfinite(w_scale))
        return mla_fail(ctx, MLA_ERR_INVALID_ARGUMENT, "w_scale", "w_scale must be finite");
    MLA_TRY(mla_check_tensor(ctx, y, "y", 3));
    MLA_TRY(mla_check_dtype(ctx, y, "y", GEMM_Y_DTYPES));
    MLA_TRY(mla_check_extent(ctx, y, "y", 0, B));
    MLA_TRY(mla_check_extent(ctx, y, "y", 1, M));
    MLA_TRY(mla_check_extent(ctx, y, "y", 2, N));
    MLA_TRY(mla_check_output(ctx, y, "y"));
    MLA_TRY(mla_check_disjoint(ctx, y, "y", x, "x"));
    MLA_TRY(mla_check_disjoint(ctx, y, "y", w, "w"));
    mla_variant v = mla_variant_of(MLA_OP_BATCHED_GEMM, w->dtype, y->dtype, 0, 0, N, M, K);
    mla_variant_tensors(&v, 3, (const mla_tensor *[]){x, w, y});
    MLA_TRY(mla_check_supported(ctx, &v));
    MLA_SLOT(ctx, batched_gemm);
    if (B == 0 || M == 0 || N == 0)
        return MLA_OK;
    mla_batched_gemm_args a = {*x, *w, *y, w_scale};
    return MLA_DISPATCH(ctx, ctx->ops->batched_gemm(ctx, &a));
}
