/* HIP expanded attention (include/mla/mla_attention.h, mla_attention_expanded;
 * MLA.md section 2, "The expanded form").
 *
 * 1. Decompression (core/attention_expanded.c through this backend's slots):
 *    the latent rows gathered into the workspace (hip/cache_gather.hip), then
 *    [K_nope | V] = c @ kv_b_proj^T by the HIP linear (hip/linear.hip, the
 *    matrix-unit GEMM; on sm_90a its wgmma body, hip/gemm_wgmma.h), rounded
 *    once to the kv dtype (q's).
 * 2. Causal flash attention, one block per (sequence, head, block of query
 *    rows), by one of four bodies:
 *      wgmma, sm_90a (hip/attention_expanded_wgmma.h): DeepSeek's heads
 *        (nope 128, R 64, v 128) with bf16 q, 128 rows a block, 64-key
 *        tiles by cp.async, S and P V on the warpgroup matrix units; taken
 *        before the others where it applies (exw_takes; tuning.hip_attention
 *        mma and cpasync keep the mma.sync body);
 *      matrix, NVIDIA (hip/attention_expanded_nv.h): mma.sync m16n8k16,
 *        64 or 128 rows a block (RG = 1, 2 row groups of 16 per warp), 64-key
 *        tiles by cp.async;
 *      matrix, gfx9 (hip/attention_expanded_mfma.h): MFMA 32x32x8, 128 rows
 *        a block, 64-key tiles through registers;
 *      FMA (hip/attention_expanded_common.h): fp32 FMA, 8 rows a block.
 *    Padding sequences: o = 0, lse = -inf.
 *
 * The rule (ex_matrix_rows): the matrix body takes bf16 q (kv then bf16 as
 * well; k_pe bf16 from a bf16 cache, else fp32 from the gathered rows, split
 * exactly into three bf16 pieces) where its tiles hold the heads: nope and R
 * multiples of 16, nope + R <= 256, v 32 or 128, L a multiple of 8 (16-byte
 * aligned chunks of every row); gfx9 exactly (nope, R, v) = (128, 64, 128)
 * or (32, 16, 32), the shapes it is instantiated for. f32 q, other heads and
 * tuning.hip_attention = fma take the FMA body: f32 keys and values would
 * need three bf16 pieces each (nine products for a score, three for P V),
 * where the FMA body computes the same in fp32 directly. A device pass
 * without the matrix instruction runs the matrix kernels' rows by the FMA
 * body (hip/vendor.h's rule), in the same grid.
 *
 * RG (NVIDIA): 2 where a sequence has more than 64 rows and the 128-row
 * grid still holds two blocks per multiprocessor, else 1 (the smaller tiles
 * where the shared memory of 2 would not fit); tuning.hip_att_row_groups 1
 * forces 1, 2 and 4 force 2.
 *
 * Shared memory: the FMA tiles hold DQ = nope + R <= 256 and v <= 192
 * (DeepSeek: 192, 128); larger heads are refused by the run, naming desc.nope
 * or desc.v. */
#include <math.h>

#include "hip/attention_expanded_common.h" /* first: the device pass */

#include "core/checked.h"
#include "hip/attention_expanded_mfma.h"
#include "hip/attention_expanded_nv.h"
#include "hip/attention_expanded_wgmma.h"

namespace
{

__global__ __launch_bounds__(kExFmaThreads) void expanded_fma_kernel(exp_desc d)
{
    MLA_IDX_SMEM(unsigned char, smem);
    int s, h, qb;
    ex_block_of(d, s, h, qb);
    ex_fma_rows<kExFmaThreads>(d, s, h, (int64_t)qb * kExFmaRows, smem);
}

/* A matrix body's rows (BQ from q0) in a pass without its instruction. */
template <int NT>
MLA_DEV void ex_fma_block(const exp_desc &d, int s, int h, int64_t q0, int BQ, unsigned char *smem)
{
    for (int64_t q = q0; q < q0 + BQ; q += kExFmaRows)
        ex_fma_rows<NT>(d, s, h, q, smem);
}

#if defined(__CUDACC__)
template <int RG, int V>
__global__ __launch_bounds__(kExNvThreads) void expanded_nv_kernel(exp_desc d)
{
    MLA_IDX_SMEM(unsigned char, smem);
    int s, h, qb;
    ex_block_of(d, s, h, qb);
#if MLA_ATT_MATRIX_KIND == 1
    exn_rows<RG, V>(d, s, h, (int64_t)qb * 64 * RG, smem);
#else
    ex_fma_block<kExNvThreads>(d, s, h, (int64_t)qb * 64 * RG, 64 * RG, smem);
#endif
}

/* A device pass without wgmma compiles a marker instead (static shared
 * memory, which the host reads through cudaFuncGetAttributes before it
 * takes this body). */
template <int P> __global__ __launch_bounds__(kExwThreads, 1) void expanded_wg_kernel(exp_desc d)
{
#if MLA_EXW
    MLA_IDX_SMEM(unsigned char, smem);
    int s, h, qb;
    ex_block_of(d, s, h, qb);
    exw_rows<P>(d, s, h, (int64_t)qb * kExwRows, smem);
#else
    __shared__ int mla_exw_absent[1];
    *static_cast<volatile int *>(mla_exw_absent) = d.H;
#endif
}
#else
template <int NOPE, int R, int V, int P>
__global__ __launch_bounds__(256) void expanded_mfma_kernel(exp_desc d)
{
    MLA_IDX_SMEM(unsigned char, smem);
    int s, h, qb;
    ex_block_of(d, s, h, qb);
    constexpr int BQ = exa_geom<NOPE, R, V, P>::BQ;
#if MLA_ATT_MATRIX_KIND == 2
    exa_rows<NOPE, R, V, P>(d, s, h, (int64_t)qb * BQ, smem);
#else
    ex_fma_block<256>(d, s, h, (int64_t)qb * BQ, BQ, smem);
#endif
}
#endif

/* --------------------------------------------------------------- host */

/* Rows per block of the matrix body for the call (the rule above), 0 when
 * the FMA body takes it. */
int ex_matrix_rows(const mla_context *ctx, const mla_attention_expanded_desc *de, const exp_desc &d,
                   int64_t qmax)
{
    const int nope = d.nope, R = d.R, V = d.V;
    if (ctx->tuning.hip_attention == MLA_TUNE_HIP_ATTENTION_FMA || de->q_dtype != MLA_DTYPE_BF16 ||
        d.L % 8)
        return 0;
#if defined(__CUDACC__)
    if (nope % 16 || R % 16 || nope + R > 256 || (V != 32 && V != 128))
        return 0;
    const int64_t mp = mla_hip_state_of(ctx)->multiprocessors;
    int rg = qmax > 64 && (qmax + 127) / 128 * d.H * d.S >= 2 * mp ? 2 : 1;
    if (ctx->tuning.hip_att_row_groups) /* 4 counts as 2 here */
        rg = ctx->tuning.hip_att_row_groups >= 2 ? 2 : 1;
    for (int g = rg; g >= 1; --g)
        if (exn_layout(g, nope, R, V, d.P).total <= kSmemMax)
            return 64 * g;
    return 0;
#else
    (void)qmax;
    return (nope == 128 && R == 64 && V == 128) || (nope == 32 && R == 16 && V == 32) ? 128 : 0;
#endif
}

#if defined(__CUDACC__)
/* Whether the sm_90a body (hip/attention_expanded_wgmma.h) takes the call:
 * bf16 q, DeepSeek's heads (nope 128, R 64, v 128; the body's fixed
 * blocks of 64 dims), L a multiple of 8, tuning.hip_attention auto or
 * wgmma (mma and cpasync keep the mma.sync body), a device of compute
 * capability 9.0 whose code has the body. */
bool exw_takes(mla_context *ctx, const mla_attention_expanded_desc *de, const exp_desc &d)
{
    const int32_t tune = ctx->tuning.hip_attention;
    if (tune != MLA_TUNE_HIP_ATTENTION_AUTO && tune != MLA_TUNE_HIP_ATTENTION_WGMMA)
        return false;
    if (de->q_dtype != MLA_DTYPE_BF16 || d.L % 8 || d.nope != kExwNope || d.R != kExwR ||
        d.V != kExwV)
        return false;
#if MLA_IDX_EMU
    (void)ctx;
    return MLA_EXW;
#else
    const int dev = mla_hip_state_of(ctx)->device;
    int major = 0, optin = 0;
    cudaFuncAttributes fa = {};
    cudaError_t err = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
    if (err == cudaSuccess)
        err = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
    if (err == cudaSuccess)
        err = d.P == 3 ? cudaFuncGetAttributes(&fa, expanded_wg_kernel<3>)
                       : cudaFuncGetAttributes(&fa, expanded_wg_kernel<1>);
    if (err != cudaSuccess) {
        (void)cudaGetLastError(); /* a query, not a failure of the call */
        return false;
    }
    const int need = d.P == 3 ? exw_geom<3>::TOTAL : exw_geom<1>::TOTAL;
    return major == 9 && optin >= need && fa.sharedSizeBytes == 0;
#endif
}
#endif

template <typename K>
mla_status ex_launch(mla_context *ctx, K kernel, const exp_desc &d, int smem, unsigned threads)
{
    const int64_t blocks = (int64_t)d.qblocks * d.H * d.S;
#if defined(__CUDACC__) && !MLA_IDX_EMU
    if (smem > 48 * 1024) {
        const cudaError_t err =
            cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
        if (err != cudaSuccess)
            return mla_hip_fail(ctx, err,
                                "cudaFuncSetAttribute (expanded attention shared memory)");
    }
#endif
    kernel<<<(unsigned)blocks, threads, (size_t)smem, mla_hip_state_of(ctx)->stream>>>(d);
    return mla_hip_check_launch(ctx, "expanded attention kernel launch");
}

/* The matrix body of BQ rows a block (at least the FMA body's shared
 * memory: a pass without the instruction runs that in the same launch). */
mla_status ex_launch_matrix(mla_context *ctx, const exp_desc &d, int BQ)
{
    const auto go = [&](auto kernel, int bytes, unsigned threads) {
        return ex_launch(ctx, kernel, d, bytes > kExFmaSmem ? bytes : kExFmaSmem, threads);
    };
#if defined(__CUDACC__)
    const int bytes = exn_layout(BQ / 64, d.nope, d.R, d.V, d.P).total;
    if (BQ == 128)
        return d.V == 128 ? go(expanded_nv_kernel<2, 128>, bytes, kExNvThreads)
                          : go(expanded_nv_kernel<2, 32>, bytes, kExNvThreads);
    return d.V == 128 ? go(expanded_nv_kernel<1, 128>, bytes, kExNvThreads)
                      : go(expanded_nv_kernel<1, 32>, bytes, kExNvThreads);
#else
    (void)BQ;
    if (d.nope == 128)
        return d.P == 3 ? go(expanded_mfma_kernel<128, 64, 128, 3>,
                             exa_geom<128, 64, 128, 3>::TOTAL, 256)
                        : go(expanded_mfma_kernel<128, 64, 128, 1>,
                             exa_geom<128, 64, 128, 1>::TOTAL, 256);
    return d.P == 3 ? go(expanded_mfma_kernel<32, 16, 32, 3>, exa_geom<32, 16, 32, 3>::TOTAL, 256)
                    : go(expanded_mfma_kernel<32, 16, 32, 1>, exa_geom<32, 16, 32, 1>::TOTAL, 256);
#endif
}

} // namespace

mla_status mla_hip_attention_expanded(mla_context *ctx, const mla_attention_expanded_op_args *a)
{
    const mla_attention_expanded_desc *de = &a->desc;
    if (de->nope + de->cache.rope > kExDqMax)
        return mla_fail(ctx, MLA_ERR_UNSUPPORTED, "desc.nope",
                        "nope + R = %lld: the HIP tiles hold at most %d",
                        (long long)(de->nope + de->cache.rope), kExDqMax);
    if (de->v > kExVMax)
        return mla_fail(ctx, MLA_ERR_UNSUPPORTED, "desc.v",
                        "v = %lld: the HIP tiles hold at most %d", (long long)de->v, kExVMax);
    const mla_hip_device_scope scope(mla_hip_state_of(ctx)->device);
    if (scope.error() != hipSuccess)
        return mla_hip_fail(ctx, scope.error(), "selecting the context's GPU");
    mla_expanded_kv kv;
    MLA_TRY(mla_expanded_decompress(ctx, a, &kv));
    int64_t qmax = 0;
    for (int64_t s = 0; s < a->S; ++s) {
        const int64_t n = a->cu_host[s + 1] - a->cu_host[s];
        qmax = n > qmax ? n : qmax;
    }
    if (qmax == 0 || de->heads == 0)
        return MLA_OK;
    /* the largest grid (8-row blocks) bounds every body's */
    if ((qmax + kExFmaRows - 1) / kExFmaRows * de->heads * a->S > 0x7FFFFFFF)
        return mla_fail(ctx, MLA_ERR_UNSUPPORTED, "q_nope",
                        "%lld query rows x %lld heads: past the grid", (long long)qmax,
                        (long long)de->heads);
    const int32_t *meta = reinterpret_cast<const int32_t *>(a->workspace + a->ws.meta);
    exp_desc d;
    d.qn = a->q_nope.data, d.qp = a->q_pe.data, d.kv = kv.kv.data, d.rows = kv.rows.data;
    d.o = a->o.data, d.lse = static_cast<float *>(a->lse.data);
    d.cu = meta, d.key0 = meta + a->S + 1, d.ctx = meta + 2 * a->S + 2;
    d.qn_s0 = a->q_nope.stride[0], d.qn_s1 = a->q_nope.stride[1], d.qn_s2 = a->q_nope.stride[2];
    d.qp_s0 = a->q_pe.stride[0], d.qp_s1 = a->q_pe.stride[1], d.qp_s2 = a->q_pe.stride[2];
    d.o_s0 = a->o.stride[0], d.o_s1 = a->o.stride[1], d.o_s2 = a->o.stride[2];
    d.lse_s0 = a->lse.data ? a->lse.stride[0] : 0, d.lse_s1 = a->lse.data ? a->lse.stride[1] : 0;
    d.q_dt = a->q_nope.dtype, d.kv_dt = kv.kv.dtype, d.rows_dt = kv.rows.dtype;
    d.o_dt = a->o.dtype;
    d.nope = (int32_t)de->nope, d.R = (int32_t)de->cache.rope, d.V = (int32_t)de->v;
    d.L = (int32_t)de->cache.kv_lora, d.H = (int32_t)de->heads, d.S = (int32_t)a->S;
    d.N = (int32_t)(de->heads * (de->nope + de->v));
    /* heads whose decompressed keys and values fill at most kExL2Group bytes */
    const int64_t head_bytes = a->Nk * (de->nope + de->v) * (int64_t)mla_dtype_size(kv.kv.dtype);
    const int64_t hg = head_bytes > 0 ? kExL2Group / head_bytes : de->heads;
    d.hg = (int32_t)(hg < 1 ? 1 : hg > de->heads ? de->heads : hg);
    d.P = kv.rows.dtype == MLA_DTYPE_BF16 ? 1 : 3;
    const auto vec = [](const mla_tensor &t) { /* 16-byte chunks along the last dim */
                                               return t.stride[2] == 1 && t.stride[0] % 8 == 0 &&
                                                      t.stride[1] % 8 == 0 &&
                                                      reinterpret_cast<uintptr_t>(t.data) % 16 == 0;
    };
    d.q_vec = vec(a->q_nope) && vec(a->q_pe);
    d.scale = de->softmax_scale;
    d.ss2 = de->softmax_scale * kLog2e;
#if defined(__CUDACC__)
    if (exw_takes(ctx, de, d)) {
        d.qblocks = (int32_t)((qmax + kExwRows - 1) / kExwRows);
        return d.P == 3
                   ? ex_launch(ctx, expanded_wg_kernel<3>, d, exw_geom<3>::TOTAL, kExwThreads)
                   : ex_launch(ctx, expanded_wg_kernel<1>, d, exw_geom<1>::TOTAL, kExwThreads);
    }
#endif
    const int BQ = ex_matrix_rows(ctx, de, d, qmax);
    d.qblocks = (int32_t)((qmax + (BQ ? BQ : kExFmaRows) - 1) / (BQ ? BQ : kExFmaRows));
    if (BQ)
        return ex_launch_matrix(ctx, d, BQ);
    return ex_launch(ctx, expanded_fma_kernel, d, kExFmaSmem, kExFmaThreads);
}
