/* batched_gemm: y[b] = w_scale * (x[b] @ W[b]) for x [B, M, K] (F32, BF16),
 * W [B, K, N] (BF16, or fp8 codes with the per-tensor w_scale), y [B, M, N]
 * (F32, BF16), every operand through its strides: the absorb passes q_nope
 * as a [H, T, nope] view, W_kc as a [H, nope, L] view of kv_b_proj (strides
 * ((nope + v) L, L, 1)) and y as a [H, T, L] view of a [T, H, L] buffer.
 * The GEMM is hip/gemm_tile.h's, w_scale applied once to each fp32 sum. */
#include "hip/gemm_tile.h"

mla_status mla_hip_batched_gemm(mla_context *ctx, const mla_batched_gemm_args *a)
{
    const mla_hip_device_scope scope(mla_hip_state_of(ctx)->device);
    if (scope.error() != hipSuccess)
        return mla_hip_fail(ctx, scope.error(), "selecting the context's GPU");
    const mla_tensor *t[] = {&a->x, &a->w, &a->y};
    const char *names[] = {"x", "w", "y"};
    for (int k = 0; k < 3; ++k) {
        mla_status st = mla_hip_check_tensor_memory(ctx, t[k], names[k]);
        if (st != MLA_OK)
            return st;
    }
    gemm_desc g = {};
    g.a = a->x.data;
    g.b = a->w.data;
    g.c = a->y.data;
    g.batch = a->x.shape[0];
    g.M = a->x.shape[1];
    g.K = a->x.shape[2];
    g.N = a->w.shape[2];
    g.as_b = a->x.stride[0];
    g.as_m = a->x.stride[1];
    g.as_k = a->x.stride[2];
    g.bs_b = a->w.stride[0];
    g.bs_k = a->w.stride[1];
    g.bs_n = a->w.stride[2];
    g.cs_b = a->y.stride[0];
    g.cs_m = a->y.stride[1];
    g.cs_n = a->y.stride[2];
    g.alpha = a->w_scale;
    g.adt = a->x.dtype;
    g.bdt = a->w.dtype;
    g.cdt = a->y.dtype;
    gemm_finish_desc(g);
    return mla_hip_gemm(ctx, g, "batched_gemm kernel launch");
}
