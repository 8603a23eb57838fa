/* HIP expanded attention (include/mla/mla_attention.h, mla_attention_expanded;
 * MLA.md section 2, "The expanded form").
 *
 * 1. Decompression (core/attention_expanded.c through this backend's slots):
 *    the latent rows gathered into the workspace (hip/cache_gather.hip), then
 *    [K_nope | V] = c @ kv_b_proj^T by the HIP linear (hip/linear.hip, the
 *    matrix-unit GEMM), rounded once to the kv dtype.
 * 2. Causal flash attention, one block per (sequence, head, block of BQ
 *    query rows), fp32 FMA (the always-correct path; it runs in the CPU
 *    emulation on waves of 32 and 64). Per tile of BK keys (0 .. the block's
 *    last position) the keys [K_nope | k_pe] and values are staged in shared
 *    memory as fp32, then
 *      S[i][k] = scale * Q[i] . K[k]   (-inf where t > p_i)      a thread per (i, k)
 *      mx' = max(mx, max_k S[i]);  alpha = e^(mx - mx');  P = e^(S - mx')
 *      l = l alpha + sum_k P[i][k]                                  a thread per row
 *      O[i][j] = alpha O[i][j] + sum_k P[i][k] V[k][j]              threads over (i, j)
 *    and o = O / l, lse = mx + ln l at the end (the CPU kernel's recurrence;
 *    its sums in a fixed order). Padding sequences: o = 0, lse = -inf.
 * Shared memory holds DQ = nope + R <= 256 and v <= 192 (DeepSeek: 192,
 * 128); larger heads are refused by the run, naming desc.nope or desc.v. */
#include <math.h>

#include "core/attention_expanded.h"
#include "core/checked.h"
#include "hip/device_sync.h"
#include "hip/device_util.h"
#include "hip/hip_internal.h"

namespace {

constexpr int BQ = 8, BK = 16, THREADS = BQ * BK, DQ_MAX = 256, V_MAX = 192;

struct exp_desc {
    const void *qn, *qp, *kv, *rows;
    void *o;
    float *lse;
    const int32_t *cu, *key0, *ctx;
    int64_t qn_s0, qn_s1, qn_s2, qp_s0, qp_s1, qp_s2, o_s0, o_s1, o_s2, lse_s0, lse_s1;
    int32_t q_dt, kv_dt, rows_dt, o_dt;
    int32_t nope, R, V, L, H, N, qblocks;
    float scale;
};

MLA_DEV float ld(const void *p, int64_t off, int dt)
{
    return dt == MLA_DTYPE_F32 ? load_value<MLA_DTYPE_F32>(p, off)
                               : load_value<MLA_DTYPE_BF16>(p, off);
}

MLA_DEV void st(void *p, int64_t off, float v, int dt)
{
    if (dt == MLA_DTYPE_F32)
        store_value<MLA_DTYPE_F32>(p, off, v, 1);
    else
        store_value<MLA_DTYPE_BF16>(p, off, v, 1);
}

__global__ __launch_bounds__(THREADS) void expanded_kernel(exp_desc d)
{
    __shared__ float Q[BQ * DQ_MAX], K[BK * DQ_MAX], Vt[BK * V_MAX], O[BQ * V_MAX];
    __shared__ float S[BQ * BK], mx[BQ], l[BQ], alpha[BQ];
    const int tid = (int)threadIdx.x;
    const int64_t b = blockIdx.x;
    const int qb = (int)(b % d.qblocks), h = (int)(b / d.qblocks % d.H);
    const int s = (int)(b / d.qblocks / d.H);
    const int64_t r0 = d.cu[s], n = d.cu[s + 1] - r0, c = d.ctx[s];
    const int64_t q0 = (int64_t)qb * BQ;
    if (q0 >= n)
        return;
    const int rows = (int)(n - q0 < BQ ? n - q0 : BQ), DQ = d.nope + d.R, V = d.V;
    if (c == 0) { /* a padding sequence */
        for (int e = tid; e < rows * V; e += THREADS) {
            const int64_t r = r0 + q0 + e / V;
            st(d.o, r * d.o_s0 + h * d.o_s1 + (e % V) * d.o_s2, 0.0f, d.o_dt);
        }
        if (d.lse && tid < rows)
            d.lse[(r0 + q0 + tid) * d.lse_s0 + h * d.lse_s1] = -INFINITY;
        return;
    }
    const int64_t p0 = c - n + q0, pmax = p0 + rows - 1, key0 = d.key0[s];
    for (int e = tid; e < rows * DQ; e += THREADS) {
        const int64_t r = r0 + q0 + e / DQ, i = e % DQ;
        Q[e] = i < d.nope ? ld(d.qn, r * d.qn_s0 + h * d.qn_s1 + i * d.qn_s2, d.q_dt)
                          : ld(d.qp, r * d.qp_s0 + h * d.qp_s1 + (i - d.nope) * d.qp_s2, d.q_dt);
    }
    for (int e = tid; e < BQ * V; e += THREADS)
        O[e] = 0.0f;
    if (tid < BQ)
        mx[tid] = -INFINITY, l[tid] = 0.0f;
    const int64_t hk = (int64_t)h * (d.nope + V);
    for (int64_t t0 = 0; t0 <= pmax; t0 += BK) {
        const int nk = (int)(pmax + 1 - t0 < BK ? pmax + 1 - t0 : BK);
        idx_sync(); /* the previous tile's readers are done */
        for (int e = tid; e < nk * DQ; e += THREADS) {
            const int64_t key = key0 + t0 + e / DQ, i = e % DQ;
            K[e] = i < d.nope ? ld(d.kv, key * d.N + hk + i, d.kv_dt)
                              : ld(d.rows, key * (d.L + d.R) + d.L + (i - d.nope), d.rows_dt);
        }
        for (int e = tid; e < nk * V; e += THREADS)
            Vt[e] = ld(d.kv, (key0 + t0 + e / V) * d.N + hk + d.nope + e % V, d.kv_dt);
        idx_sync();
        { /* S: a thread per (row, key) */
            const int i = tid / BK, k = tid % BK;
            float dot = 0.0f;
            if (i < rows && k < nk)
                for (int e = 0; e < DQ; ++e)
                    dot = fmaf(Q[i * DQ + e], K[k * DQ + e], dot);
            S[tid] = i < rows && k < nk && t0 + k <= p0 + i ? d.scale * dot : -INFINITY;
        }
        idx_sync();
        if (tid < rows) { /* the online softmax of row tid */
            float m = mx[tid];
            for (int k = 0; k < nk; ++k)
                m = fmaxf(m, S[tid * BK + k]);
            if (m == -INFINITY) { /* the tile is past the row's position: P = 0 */
                alpha[tid] = 1.0f;
                for (int k = 0; k < BK; ++k)
                    S[tid * BK + k] = 0.0f;
            } else {
                float sum = 0.0f;
                for (int k = 0; k < BK; ++k) {
                    const float pk = k < nk ? expf(S[tid * BK + k] - m) : 0.0f;
                    S[tid * BK + k] = pk;
                    sum += pk;
                }
                alpha[tid] = expf(mx[tid] - m);
                l[tid] = l[tid] * alpha[tid] + sum;
                mx[tid] = m;
            }
        }
        idx_sync();
        for (int e = tid; e < rows * V; e += THREADS) {
            const int i = e / V, j = e % V;
            float acc = alpha[i] * O[e];
            for (int k = 0; k < nk; ++k)
                acc = fmaf(S[i * BK + k], Vt[k * V + j], acc);
            O[e] = acc;
        }
    }
    idx_sync();
    for (int e = tid; e < rows * V; e += THREADS) {
        const int i = e / V;
        const int64_t r = r0 + q0 + i;
        st(d.o, r * d.o_s0 + h * d.o_s1 + (e % V) * d.o_s2, O[e] / l[i], d.o_dt);
    }
    if (d.lse && tid < rows)
        d.lse[(r0 + q0 + tid) * d.lse_s0 + h * d.lse_s1] = mx[tid] + logf(l[tid]);
}

} // namespace

mla_status mla_hip_attention_expanded(mla_context *ctx, const mla_attention_expanded_op_args *a)
{
    const mla_attention_expanded_desc *de = &a->desc;
    if (de->nope + de->cache.rope > DQ_MAX)
        return mla_fail(ctx, MLA_ERR_UNSUPPORTED, "desc.nope",
                        "nope + R = %lld: the HIP tiles hold at most %d",
                        (long long)(de->nope + de->cache.rope), DQ_MAX);
    if (de->v > V_MAX)
        return mla_fail(ctx, MLA_ERR_UNSUPPORTED, "desc.v", "v = %lld: the HIP tiles hold at most %d",
                        (long long)de->v, V_MAX);
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
    const int64_t qblocks = (qmax + BQ - 1) / BQ, blocks = qblocks * de->heads * a->S;
    if (blocks == 0)
        return MLA_OK;
    if (blocks > 0x7FFFFFFF)
        return mla_fail(ctx, MLA_ERR_UNSUPPORTED, "q_nope", "%lld blocks: past the grid",
                        (long long)blocks);
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
    d.L = (int32_t)de->cache.kv_lora, d.H = (int32_t)de->heads;
    d.N = (int32_t)(de->heads * (de->nope + de->v)), d.qblocks = (int32_t)qblocks;
    d.scale = de->softmax_scale;
    expanded_kernel<<<(unsigned)blocks, THREADS, 0, mla_hip_state_of(ctx)->stream>>>(d);
    return mla_hip_check_launch(ctx, "expanded attention kernel launch");
}
