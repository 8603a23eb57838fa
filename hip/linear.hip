/* linear: y [T, N] = x [T, K] @ W^T with W [N, K] bf16, or fp8 with DeepSeek's
 * 128 x 128 block scales (weight = code * scale[n / 128, k / 128]), as the
 * GEMM of hip/gemm_tile.h with A = x, B[k, n] = W[n, k] (a transposed view:
 * no copy) and alpha = 1. */
#include "hip/gemm_tile.h"

mla_status mla_hip_linear(mla_context *ctx, const mla_linear_args *a)
{
    const mla_hip_device_scope scope(mla_hip_state_of(ctx)->device);
    if (scope.error() != hipSuccess)
        return mla_hip_fail(ctx, scope.error(), "selecting the context's GPU");
    const bool fp8 = a->w.dtype != MLA_DTYPE_BF16;
    const mla_tensor *t[] = {&a->x, &a->w, &a->y, &a->w_scale};
    const char *names[] = {"x", "w", "y", "w_scale"};
    for (int k = 0; k < (fp8 ? 4 : 3); ++k) {
        mla_status st = mla_hip_check_tensor_memory(ctx, t[k], names[k]);
        if (st != MLA_OK)
            return st;
    }
    gemm_desc g = {};
    g.a = a->x.data;
    g.b = a->w.data;
    g.c = a->y.data;
    g.bscale = fp8 ? static_cast<const float *>(a->w_scale.data) : nullptr;
    g.M = a->x.shape[0];
    g.K = a->x.shape[1];
    g.N = a->w.shape[0];
    g.batch = 1;
    g.as_m = a->x.stride[0];
    g.as_k = a->x.stride[1];
    g.bs_k = a->w.stride[1];
    g.bs_n = a->w.stride[0];
    g.cs_m = a->y.stride[0];
    g.cs_n = a->y.stride[1];
    if (fp8) {
        g.sc_n = a->w_scale.stride[0];
        g.sc_k = a->w_scale.stride[1];
    }
    g.alpha = 1.0f;
    g.adt = a->x.dtype;
    g.bdt = a->w.dtype;
    g.cdt = a->y.dtype;
    gemm_finish_desc(g);
    return mla_hip_gemm(ctx, g, "linear kernel launch");
}
