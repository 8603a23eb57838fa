/* MLA attention over the paged latent cache (include/mla/mla_attention.h):
 * dense or sparse, decode and prefill, split-KV partial passes and their
 * combine, following the plan of core/attention_plan.h.
 *
 * One block record (256 threads) per (work item, row tile, column chunk).
 * The launch is graph-capturable across plan updates: its grid comes from
 * what the plan fixed at create (the items create planned, at least two per
 * compute unit, at most work_capacity; row tiles from create's largest
 * n_s), and each block walks virtual blocks with a grid stride, stopping at
 * the first unused item (seq MLA_ATTN_WORK_UNUSED, core/attention_plan.h)
 * and skipping row tiles past its sequence's rows. A row
 * tile is TM (query row, head) pairs of one sequence: HT = min(H, TM)
 * consecutive heads of JT = TM / HT consecutive query rows (dense; sparse
 * rows list their own keys, so JT = 1). Every block streams the work
 * item's keys in tiles of NK through shared memory once for all its rows:
 *
 *   1. key positions of the tile (dense: consecutive, cut at the tile's last
 *      causal limit; sparse: the listed top-k positions), then the keys
 *      themselves, dequantized exactly to bf16 (bf16 values as they are; fp8
 *      codes, which e4m3 bf16 holds exactly, with the per-tensor k_scale left
 *      out and folded into the score scale and the output; FP8_SCALED codes
 *      times their power-of-two group scale, exact too), rows Ks[NK][DP];
 *   2. scores S = Q K^T over all L + R dims: partial sums per wave (each wave
 *      owns a share of the dims, its q fragments in registers), in shared
 *      memory;
 *   3. online softmax in fp32 (log2 domain, score scale softmax_scale *
 *      q_scale * k_scale * log2 e), masked keys (-1, beyond the row's causal
 *      limit) excluded; P rounded to bf16 for the matrix units (FlashMLA's
 *      rounding), the row sums of unrounded P;
 *   4. O = alpha O + P V with V = the first L dims of the same key rows.
 *
 * Matrix units through hip/mfma.h:
 *   NVIDIA mma m16n8k16: the body of hip/attention_nv.h (TM = 16, 32 or
 *     64 rows, 64-key tiles, q and keys staged in shared memory, the next
 *     tile in flight by cp.async; steps 2-4 as there);
 *   gfx9 MFMA 32x32x8: TM = 32 rows, NK = 32 keys, 4 waves; wave w holds
 *     q's 8-dim k-steps w, w + 4, .. and O's 32-column tiles w, w + 4, ...
 * f32 q is split into bf16 hi + lo (two products per step: 16 significant
 * bits of q), bf16 and fp8 q are exact. The plain-FMA body (any target, the
 * host pass, MLA_HIP_ATTENTION=fma, and L + R above the matrix bodies' 640)
 * reads q from memory in fp32, multiplies in fp32 and keeps P in fp32.
 * L above 512 takes several column chunks (blocks that repeat the scores).
 *
 * Output: with one split of the sequence the block writes o (F32 or BF16,
 * any strides) and lse directly, sinks applied there; with several it writes
 * normalized partials (part_o F32 [T, H, max_splits, L], part_lse [T, H,
 * max_splits]) and finish_kernel merges them with weights e^(lse_i - max)
 * (empty splits weigh 0), sinks applied once (hip/attention_finish.h). A
 * row without a visible key gets o = 0 and lse = -inf. Cache addresses are
 * 64-bit throughout.
 *
 * Files, by body (the layout of FlashMLA's kernels):
 *   hip/attention_traits.h  constants, descriptor, block record, layouts
 *   hip/attention_common.h  rows, keys and outputs every body shares
 *   hip/attention_fma.h     the synchronous body and its plain-FMA ops
 *   hip/attention_mfma.h    gfx9's MFMA ops for that body
 *   hip/attention_mfma_pipe.h  the pipelined gfx942 / gfx950 body
 *   hip/attention_nv.h      NVIDIA's mma.sync body
 *   hip/attention_finish.h  the split combine (finish_kernel)
 *   hip/attention.hip       the record loop, the kernel, host planning and
 *                           launch */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hip/attention_traits.h" /* first: the runtime headers select MLA_HD's device form */

#include "hip/attention_common.h"
#include "hip/attention_finish.h"
#include "hip/attention_fma.h"
#include "hip/attention_mfma.h"
#include "hip/attention_mfma_pipe.h"
#include "hip/attention_nv.h"
#include "hip/attention_wgmma.h"

namespace
{

/* Graph-capturable: the grid is fixed at plan create, the work list is
 * device data; a block runs the records next_block gives it (NJT from the
 * row count at create: an update with more rows loops here). The
 * descriptor, the record and the cursor live in shared memory (see
 * smem_layout): nothing of the loop stays in scalar registers across the
 * attention body. */
template <int PATH, int CT, int QT, int RG>
__global__ __launch_bounds__(kThreads) void attention_kernel(att_desc d)
{
    MLA_IDX_SMEM(unsigned char, smem);
    att_desc &sd = *reinterpret_cast<att_desc *>(smem);
    att_blk &sb = *reinterpret_cast<att_blk *>(smem + align16((int)sizeof(att_desc)));
    if (threadIdx.x == 0) {
        sd = d;
        next_block<PATH>(d, sb, true);
    }
    idx_sync();
#if MLA_ATT_MATRIX_KIND == 1
    constexpr bool nv = PATH == PATH_MATRIX; /* RG: the NVIDIA body's row groups */
#else
    constexpr bool nv = false;
#endif
    /* the NVIDIA body reads the descriptor from the kernel's parameters
     * (constant operands; gfx9 keeps it in shared memory for want of scalar
     * registers) */
    if constexpr (nv)
        nv_zero_pads<CT, RG>(d, smem);
    else if constexpr (PATH == PATH_MATRIX)
        zero_pads<MLA_ATT_MATRIX_KIND, QT, kColChunk>(sd, smem);
    else
        zero_pads<KIND_FMA, MLA_DTYPE_BF16, kColChunkFma>(sd, smem);
    uint32_t nv_ph = 0; /* the NVIDIA body's mbarrier parities */
    while (sb.live) {
        if constexpr (nv)
            attend_nv<CT, RG>(d, sb, smem, nv_ph);
        else if constexpr (PATH == PATH_MATRIX)
            attend<MLA_ATT_MATRIX_KIND, CT, QT, kColChunk>(sd, sb, smem);
        else /* q read through its run-time dtype */
            attend<KIND_FMA, CT, MLA_DTYPE_BF16, kColChunkFma>(sd, sb, smem);
        idx_sync(); /* every thread is done with the record */
        if (threadIdx.x == 0)
            next_block<PATH>(sd, sb, false);
        idx_sync();
    }
}

/* --------------------------------------------------------------- host */

int path_of(const mla_context *ctx, const mla_attention_plan *p)
{
    if (ctx->tuning.hip_attention == MLA_TUNE_HIP_ATTENTION_FMA)
        return PATH_FMA;
    return p->desc.cache.kv_lora + p->desc.cache.rope <= kMaxDimsMatrix ? PATH_MATRIX : PATH_FMA;
}

template <int PATH, int CT, int QT, int RG>
mla_status launch(mla_context *ctx, const att_desc &d, int64_t blocks, int smem)
{
#if defined(__CUDACC__) && !MLA_IDX_EMU
    if (smem > 48 * 1024) {
        const cudaError_t err = cudaFuncSetAttribute(
            attention_kernel<PATH, CT, QT, RG>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
        if (err != cudaSuccess)
            return mla_hip_fail(ctx, err, "cudaFuncSetAttribute (attention shared memory)");
    }
#endif
    attention_kernel<PATH, CT, QT, RG>
        <<<(unsigned)blocks, kThreads, (size_t)smem, mla_hip_state_of(ctx)->stream>>>(d);
    return mla_hip_check_launch(ctx, "attention kernel launch");
}

/* f(tag) for q's dtype (BF16, F32, FP8_E4M3FN, FP8_E4M3FNUZ). */
template <typename F> static inline mla_status with_q_dtype(int dt, F &&f)
{
    if (dt == MLA_DTYPE_BF16)
        return f(dtype_tag<MLA_DTYPE_BF16>{});
    if (dt == MLA_DTYPE_F32)
        return f(dtype_tag<MLA_DTYPE_F32>{});
    if (dt == MLA_DTYPE_FP8_E4M3FN)
        return f(dtype_tag<MLA_DTYPE_FP8_E4M3FN>{});
    return f(dtype_tag<MLA_DTYPE_FP8_E4M3FNUZ>{});
}

/* NVIDIA: the body of hip/attention_nv.h, q's dtype read at run time, RG
 * row groups; gfx9: the MFMA body per q dtype. */
mla_status launch_matrix(mla_context *ctx, const att_desc &d, int64_t blocks, int smem, int ct,
                         int qt, int rg)
{
    return with_cache_dtype(ct, [&](auto ctag) {
        constexpr int CT = decltype(ctag)::value;
#if defined(__CUDACC__)
        (void)qt;
        if (rg == 1)
            return launch<PATH_MATRIX, CT, MLA_DTYPE_BF16, 1>(ctx, d, blocks, smem);
        if (rg == 2)
            return launch<PATH_MATRIX, CT, MLA_DTYPE_BF16, 2>(ctx, d, blocks, smem);
        return launch<PATH_MATRIX, CT, MLA_DTYPE_BF16, 4>(ctx, d, blocks, smem);
#else
        (void)rg;
        return with_q_dtype(qt, [&](auto qtag) {
            constexpr int QT = decltype(qtag)::value;
            return launch<PATH_MATRIX, CT, QT, 0>(ctx, d, blocks, smem);
        });
#endif
    });
}

mla_status launch_fma(mla_context *ctx, const att_desc &d, int64_t blocks, int smem, int ct)
{
    return with_cache_dtype(ct, [&](auto ctag) {
        constexpr int CT = decltype(ctag)::value;
        return launch<PATH_FMA, CT, MLA_DTYPE_BF16, 0>(ctx, d, blocks, smem);
    });
}

#if defined(__CUDACC__)
/* Whether the sm_90a body (hip/attention_wgmma.h) takes the call: q bf16 or
 * fp8 (f32 q's hi + lo rows would not fit beside two key stages), L + R <=
 * 576, L <= 512, L and R multiples of 8 (fp8 caches: of 16, FP8_SCALED's
 * bf16 rope of 8) with the cache's chunks aligned, a device of compute
 * capability 9.0 whose code has the body, tuning.hip_attention auto with at
 * least 64 rows per sequence (heads x query rows) or dense fp8 keys from
 * 2^16 key slots on (2^15 a sequence), or wgmma; mma, cpasync or
 * fma keep the mma.sync body, its per-chunk copies, the plain body. Every layout, block size, head count, decode, MTP, prefill
 * and sparse run takes it. */
bool wg_takes(mla_context *ctx, const mla_attention_desc &ds, const mla_attention_op_args *a)
{
    const int32_t tune = ctx->tuning.hip_attention;
    if (tune != MLA_TUNE_HIP_ATTENTION_AUTO && tune != MLA_TUNE_HIP_ATTENTION_WGMMA)
        return false;
    /* auto: the body's 64-row records need the rows, but for dense decode on
     * fp8 caches from 2^16 key slots on, or 2^15 a sequence (block-table
     * columns x block size, times S: shapes, one choice under a captured
     * graph), where the mma.sync body's conversion pass between two
     * barriers costs more than the empty rows (docs/TUNING.md) */
    const int64_t S = a->context_lens.shape[0];
    const int64_t seq_slots = a->plan->max_blocks * ds.cache.block_size;
    const bool fp8_wide = ds.cache.dtype != MLA_DTYPE_BF16 && ds.topk == 0 &&
                          (S * seq_slots >= (1 << 16) || seq_slots >= (1 << 15));
    if (tune == MLA_TUNE_HIP_ATTENTION_AUTO && S > 0 && ds.heads * a->q.shape[0] < 64 * S &&
        !fp8_wide)
        return false;
    const int64_t L = ds.cache.kv_lora, R = ds.cache.rope;
    if (a->q.dtype == MLA_DTYPE_F32 || L + R > kWgMaxDims || L > kWgMaxL || L % 8 || R % 8)
        return false;
    if (ds.cache.dtype != MLA_DTYPE_BF16 &&
        (L % 16 || (ds.cache.layout != MLA_CACHE_FP8_SCALED && R % 16)))
        return false;
    if (!cache_wide_ok(ds.cache, a->cache))
        return false;
#if MLA_IDX_EMU
    (void)ctx;
    return true;
#else
    const int dev = mla_hip_state_of(ctx)->device;
    int major = 0, optin = 0;
    cudaFuncAttributes fa = {};
    cudaError_t err = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
    if (err == cudaSuccess)
        err = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
    with_cache_dtype(ds.cache.dtype, [&](auto ctag) {
        constexpr int CT = decltype(ctag)::value;
        if (err == cudaSuccess)
            err = cudaFuncGetAttributes(&fa, attention_wg_kernel<CT>);
        return MLA_OK;
    });
    if (err != cudaSuccess) {
        (void)cudaGetLastError(); /* a query, not a failure of the call */
        return false;
    }
    return major == 9 && optin >= kWgSmemBytes && fa.sharedSizeBytes == 0;
#endif
}

mla_status launch_wg(mla_context *ctx, const att_desc &d, int64_t blocks, int ct)
{
    return with_cache_dtype(ct, [&](auto ctag) {
        constexpr int CT = decltype(ctag)::value;
#if !MLA_IDX_EMU
        const cudaError_t err = cudaFuncSetAttribute(
            attention_wg_kernel<CT>, cudaFuncAttributeMaxDynamicSharedMemorySize, kWgSmemBytes);
        if (err != cudaSuccess)
            return mla_hip_fail(ctx, err, "cudaFuncSetAttribute (attention shared memory)");
#endif
        attention_wg_kernel<CT><<<(unsigned)blocks, kWgThreads, (size_t)kWgSmemBytes,
                                  mla_hip_state_of(ctx)->stream>>>(d);
        return mla_hip_check_launch(ctx, "attention kernel launch");
    });
}
#endif

#if !defined(__CUDACC__)
template <int G, int CT, int QT>
mla_status ap_launch_one(mla_context *ctx, const att_desc &d, int64_t blocks)
{
    attention_ap_kernel<G, CT, QT><<<(unsigned)blocks, kThreads, (size_t)ap_geom<G>::TOTAL,
                                     mla_hip_state_of(ctx)->stream>>>(d);
    return mla_hip_check_launch(ctx, "attention kernel launch");
}

/* The body of geometry geom for the cache and q (bf16, e4m3fn, e4m3fnuz)
 * dtypes. */
mla_status ap_launch(mla_context *ctx, const att_desc &d, int64_t blocks, int geom, int ct, int qt)
{
    return with_cache_dtype(ct, [&](auto ctag) {
        constexpr int CT = decltype(ctag)::value;
        const auto by_q = [&](auto gtag) {
            constexpr int G = decltype(gtag)::value;
            if (qt == MLA_DTYPE_BF16)
                return ap_launch_one<G, CT, MLA_DTYPE_BF16>(ctx, d, blocks);
            if (qt == MLA_DTYPE_FP8_E4M3FN)
                return ap_launch_one<G, CT, MLA_DTYPE_FP8_E4M3FN>(ctx, d, blocks);
            return ap_launch_one<G, CT, MLA_DTYPE_FP8_E4M3FNUZ>(ctx, d, blocks);
        };
        return geom == 950 ? by_q(std::integral_constant<int, 950>{})
                           : by_q(std::integral_constant<int, 942>{});
    });
}
#endif

} // namespace

/* Key rows in shared memory, values: D rounded up to the body's k-steps
 * (NVIDIA: pairs of 16; gfx9: all of its 576), plus 8 against bank
 * conflicts. */
static int64_t key_row_values(int64_t D, int path)
{
    if (path != PATH_MATRIX)
        return (D + 15) / 16 * 16 + 8;
#if defined(__CUDACC__)
    return (D + 31) / 32 * 32 + 8;
#else
    return (D < kMaxDimsMatrix ? kMaxDimsMatrix : D + 15) / 16 * 16 + 8;
#endif
}

/* Row groups of 16 of the NVIDIA body: as many as a record's rows fill
 * (the heads of one query row, or of several in dense prefill and MTP
 * decode, from the largest query length create planned), one for f32 q
 * (its hi + lo rows would not fit beside 64 keys); at most two over bf16
 * caches, whose keys cost nothing to stage twice as often, while 64 rows'
 * scores read q and keys from shared memory at one load per mma and leave
 * no registers for q; four over fp8 caches, whose conversion is paid per
 * staging (docs/ATTENTION_ISA.md has the measurements). tuning.hip_att_row_groups
 * 1, 2 or 4 forces a count (bf16 / fp8 q only). */
static int nv_row_groups(const mla_context *ctx, int64_t H, int64_t qcap, bool sparse, bool qsplit,
                         bool bf16_cache)
{
    const int64_t rows = sparse ? H : H * qcap;
    if (ctx->tuning.hip_att_row_groups && !qsplit)
        return ctx->tuning.hip_att_row_groups;
    return qsplit || rows <= 16 ? 1 : rows <= 32 || bf16_cache ? 2 : 4;
}

mla_status mla_hip_attention(mla_context *ctx, const mla_attention_op_args *a)
{
    const mla_hip_device_scope scope(mla_hip_state_of(ctx)->device);
    if (scope.error() != hipSuccess)
        return mla_hip_fail(ctx, scope.error(), "selecting the context's GPU");
    const mla_tensor *ts[] = {&a->q, &a->cache, &a->context_lens, &a->cu_q_lens, &a->o};
    const char *names[] = {"q", "cache", "context_lens", "cu_q_lens", "o"};
    for (int i = 0; i < 5; ++i) {
        const mla_status st = mla_hip_check_tensor_memory(ctx, ts[i], names[i]);
        if (st != MLA_OK)
            return st;
    }
    const mla_tensor *opt[] = {&a->block_table, &a->topk_indices, &a->sinks, &a->lse};
    const char *opt_names[] = {"block_table", "topk_indices", "sinks", "lse"};
    for (int i = 0; i < 4; ++i) {
        if (!opt[i]->data)
            continue;
        const mla_status st = mla_hip_check_tensor_memory(ctx, opt[i], opt_names[i]);
        if (st != MLA_OK)
            return st;
    }
    const mla_attention_plan *p = a->plan;
    const mla_attention_desc &ds = p->desc;
    att_desc d = {};
    mla_status st = make_cache_dev(ctx, ds.cache, a->cache, d.c);
    if (st != MLA_OK)
        return st;
    const int64_t H = ds.heads, L = ds.cache.kv_lora, R = ds.cache.rope, D = L + R;
    const bool fp8_scaled = ds.cache.layout == MLA_CACHE_FP8_SCALED;
    const bool cache_fp8 = ds.cache.dtype != MLA_DTYPE_BF16 && !fp8_scaled;
    const bool q_fp8 = ds.q_dtype == MLA_DTYPE_FP8_E4M3FN || ds.q_dtype == MLA_DTYPE_FP8_E4M3FNUZ;
    d.q = static_cast<const uint8_t *>(a->q.data);
    d.q_dtype = (int32_t)a->q.dtype;
    d.paged = ds.paged;
    d.sparse = ds.topk > 0;
    d.o_bf16 = a->o.dtype == MLA_DTYPE_BF16;
    d.table = static_cast<const int32_t *>(a->block_table.data);
    d.ctx_lens = static_cast<const int32_t *>(a->context_lens.data);
    d.cu_q = static_cast<const int32_t *>(a->cu_q_lens.data);
    d.topk = static_cast<const int32_t *>(a->topk_indices.data);
    d.sinks = static_cast<const float *>(a->sinks.data);
    d.o = a->o.data;
    d.lse = static_cast<float *>(a->lse.data);
    struct {
        const mla_tensor *t;
        int dim;
        int32_t *out;
        const char *name;
    } strides[] = {{&a->q, 0, &d.qs0, "q.stride"},
                   {&a->q, 1, &d.qs1, "q.stride"},
                   {&a->q, 2, &d.qs2, "q.stride"},
                   {&a->block_table, 0, &d.bts0, "block_table.stride"},
                   {&a->block_table, 1, &d.bts1, "block_table.stride"},
                   {&a->context_lens, 0, &d.cls, "context_lens.stride"},
                   {&a->cu_q_lens, 0, &d.cus, "cu_q_lens.stride"},
                   {&a->topk_indices, 0, &d.tks0, "topk_indices.stride"},
                   {&a->topk_indices, 1, &d.tks1, "topk_indices.stride"},
                   {&a->sinks, 0, &d.sks, "sinks.stride"},
                   {&a->o, 0, &d.os0, "o.stride"},
                   {&a->o, 1, &d.os1, "o.stride"},
                   {&a->o, 2, &d.os2, "o.stride"},
                   {&a->lse, 0, &d.lse0, "lse.stride"},
                   {&a->lse, 1, &d.lse1, "lse.stride"}};
    for (const auto &e : strides) {
        if (!e.t->data || e.dim >= e.t->ndim)
            continue;
        if (e.t->stride[e.dim] > INT32_MAX)
            return mla_fail(ctx, MLA_ERR_UNSUPPORTED, e.name,
                            "%s[%d] = %lld: the attention kernels take strides below 2^31", e.name,
                            e.dim, (long long)e.t->stride[e.dim]);
        *e.out = (int32_t)e.t->stride[e.dim];
    }
    unsigned char *ws = static_cast<unsigned char *>(a->workspace);
    d.max_splits = p->max_splits;
    d.part_o = p->max_splits > 1 ? reinterpret_cast<float *>(ws + p->part_o_offset) : nullptr;
    d.part_lse = p->max_splits > 1 ? reinterpret_cast<float *>(ws + p->part_lse_offset) : nullptr;
    d.work = p->work_dev;
    d.splits = p->splits_dev;
    d.S = (int32_t)p->S;
    d.H = (int32_t)H;
    d.D = (int32_t)D;
    d.nope_chunks = (int32_t)((L + kChunk - 1) / kChunk);
    d.cpk = d.nope_chunks + (int32_t)((R + kChunk - 1) / kChunk);
    { /* chunk steps of the layout (key_bases, chunk_of) */
        const int32_t eb = (int32_t)mla_dtype_size(ds.cache.dtype);
        d.n_sh = d.r_sh = 0;
        d.n_cb = d.r_cb = 0;
        d.rope_bf16 = ds.cache.dtype == MLA_DTYPE_BF16 || fp8_scaled;
        d.tok_bytes = fp8_scaled ? (int32_t)(L + 4 * (L / MLA_CL_SCALE_GROUP) + 2 * R) : 0;
        if (ds.cache.layout == MLA_CACHE_SHUFFLED) { /* 16-token x 16-byte tiles */
            d.n_ts = d.r_ts = MLA_CL_TILE_TOKENS * MLA_CL_TILE_BYTES;
            if (eb == 1) { /* two 8-value chunks per tile row */
                d.n_sh = d.r_sh = 1;
                d.n_cb = d.r_cb = kChunk;
            }
        } else {
            d.n_ts = kChunk * eb;
            d.r_ts = kChunk * (d.rope_bf16 ? 2 : eb);
        }
    }
    double ss = (double)ds.softmax_scale * (double)kLog2e;
    if (q_fp8)
        ss *= (double)ds.q_scale;
    if (cache_fp8)
        ss *= (double)ds.cache.k_scale;
    d.ss2 = (float)ss;
    d.kso = cache_fp8 ? ds.cache.k_scale : 1.0f;

    const int path = path_of(ctx, p);
    /* launch sizes from what the plan fixed at create (an update under a
     * captured graph changes num_work and max_q_len, not these) */
    const int64_t qcap = p->q_len_at_create > 0 ? p->q_len_at_create : 1;
#if defined(__CUDACC__)
    const bool wg = path == PATH_MATRIX && wg_takes(ctx, ds, a);
    const bool nv = path == PATH_MATRIX && !wg;
    const int ap = 0;
#else
    const bool wg = false, nv = false;
    const int ap = path == PATH_MATRIX ? ap_takes(ctx, ds, a) : 0; /* gfx942 / gfx950 geometry */
#endif
    d.qsplit = a->q.dtype == MLA_DTYPE_F32;
    d.bs_sh = -1;
    for (int sh = 0; sh < 31; ++sh)
        if ((int64_t)1 << sh == ds.cache.block_size)
            d.bs_sh = sh;
    const int rg =
        nv ? nv_row_groups(ctx, H, qcap, d.sparse, d.qsplit, ds.cache.dtype == MLA_DTYPE_BF16) : 0;
    d.DP = (int32_t)key_row_values(D, path);
    const int TM = wg ? kWgRows : nv ? 16 * rg : ap ? kApRows : kTM;
#if !defined(__CUDACC__)
    d.KS = (int32_t)((D + kTK - 1) / kTK); /* gfx9's k-steps */
#endif
    d.HT = (int32_t)(H < TM ? H : TM);
    d.NHT = (int32_t)((H + d.HT - 1) / d.HT);
    d.JT = d.sparse ? 1 : TM / d.HT;
    d.NJT = (int32_t)((qcap + d.JT - 1) / d.JT);
    d.num_items = (int32_t)p->work_capacity;
    const int32_t col_chunk = path == PATH_MATRIX ? kColChunk : kColChunkFma;
    d.NCC = (int32_t)((L + col_chunk - 1) / col_chunk);
    if (p->T == 0)
        return MLA_OK;
    int64_t smem = 0;
    if (wg) {
        /* the next tile's tokens prefetched into the L2 where contiguous */
        const int64_t tok = fp8_scaled ? d.tok_bytes : D * (int64_t)mla_dtype_size(ds.cache.dtype);
        d.bulk = ds.cache.layout != MLA_CACHE_SHUFFLED && tok % 16 == 0 ? (int32_t)tok : 0;
        smem = kWgSmemBytes;
    } else if (nv) {
        /* cp.async where every chunk is aligned; fp8 caches as raw rows:
         * 8-byte code chunks, the scales, 16-byte bf16 rope chunks */
        d.async = cache_wide_ok(ds.cache, a->cache);
        if (ds.cache.dtype != MLA_DTYPE_BF16) {
            d.raw_so = 8 * d.nope_chunks;
            d.rb = (int32_t)((d.raw_so + (fp8_scaled ? 4 * (L / MLA_CL_SCALE_GROUP) : 0) +
                              (d.cpk - d.nope_chunks) * (d.rope_bf16 ? 16 : 8) + 15) /
                             16 * 16);
        }
        /* a whole token by one bulk copy where its bytes are contiguous and
         * 16-byte multiples: NORMAL and FP8_SCALED (tuning.hip_attention
         * cpasync: the per-chunk copies, for tests of that path) */
        const int64_t tok = fp8_scaled ? d.tok_bytes : D * (int64_t)mla_dtype_size(ds.cache.dtype);
        d.bulk = d.async && ds.cache.layout != MLA_CACHE_SHUFFLED && tok % 16 == 0 &&
                         ctx->tuning.hip_attention != MLA_TUNE_HIP_ATTENTION_CPASYNC
                     ? (int32_t)tok
                     : 0;
        smem = nv_layout(rg, d.DP, d.rb, d.qsplit).total;
#if !defined(__CUDACC__)
    } else if (ap) {
        smem = ap_smem_bytes(ap);
#endif
    } else {
#if defined(__CUDACC__)
        smem = smem_layout(kTM, kNKFma, 1, d.DP).total;
#else
        smem = smem_layout(kTM, path == PATH_MATRIX ? kNKMat : kNKFma,
                           path == PATH_MATRIX ? kNW : 1, d.DP)
                   .total;
#endif
    }
    if (!ap && smem > kSmemMax)
        return mla_fail(ctx, MLA_ERR_UNSUPPORTED, "cache_desc.kv_lora",
                        "L + R = %lld: the key tile needs %lld bytes of shared memory",
                        (long long)D, (long long)smem);
    /* the items create planned, at least two per compute unit (an update
     * may plan more: blocks then take several), at most the capacity */
    const int64_t cus = ctx->compute_units > 0 ? ctx->compute_units : 1, units = 2 * cus;
    int64_t grid_items = p->work_at_create > units ? p->work_at_create : units;
    grid_items = grid_items < p->work_capacity ? grid_items : p->work_capacity;
    int64_t blocks = grid_items * (int64_t)d.NJT * d.NHT * d.NCC;
    if (blocks > 0x7FFFFFFF || p->work_capacity * (int64_t)d.NJT * d.NHT * d.NCC > 0x7FFFFFFF)
        return mla_fail(ctx, MLA_ERR_UNSUPPORTED, "q.shape",
                        "%lld attention blocks: beyond one launch", (long long)blocks);
    if ((wg || ap) && blocks > cus) /* sm_90a, gfx942 / gfx950: one block per CU walking records */
        blocks = cus;
    if (blocks > 0) {
#if defined(__CUDACC__)
        if (wg)
            st = launch_wg(ctx, d, blocks, ds.cache.dtype);
        else
#else
        if (ap)
            st = ap_launch(ctx, d, blocks, ap, ds.cache.dtype, a->q.dtype);
        else
#endif
            st = path == PATH_MATRIX
                     ? launch_matrix(ctx, d, blocks, (int)smem, ds.cache.dtype, a->q.dtype, rg)
                     : launch_fma(ctx, d, blocks, (int)smem, ds.cache.dtype);
        if (st != MLA_OK)
            return st;
    }
    /* padding rows and the combine: every run (the split counts are device
     * data that a plan update may change under a captured graph) */
    const bool vec4 = L % 4 == 0;
    const int64_t per_pair = (L + kTeam * (vec4 ? 4 : 1) - 1) / (kTeam * (vec4 ? 4 : 1));
    const int64_t teams = p->T * H * per_pair, per = kThreads / kTeam;
    const int64_t fblocks = (teams + per - 1) / per;
    if (fblocks > 0x7FFFFFFF)
        return mla_fail(ctx, MLA_ERR_UNSUPPORTED, "q.shape", "%lld rows x heads: beyond one launch",
                        (long long)(p->T * H));
    hipStream_t stream = mla_hip_state_of(ctx)->stream;
    if (vec4)
        finish_kernel<4><<<(unsigned)fblocks, kThreads, 0, stream>>>(d, teams);
    else
        finish_kernel<1><<<(unsigned)fblocks, kThreads, 0, stream>>>(d, teams);
    return mla_hip_check_launch(ctx, "attention finish kernel launch");
}
