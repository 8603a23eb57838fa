/* The tiled FMA GEMM behind linear and batched_gemm (hip/gemm_tile.h
 * describes the operation and the tiling). */
#include "hip/chunk8.h"
#include "hip/gemm_tile.h"
#include "hip/mfma.h" /* mla_block_sync */

namespace {

/* B[b, k, n] in fp32; fp8 codes of linear times their block scale. */
template <int BT> MLA_DEV float b_value(const gemm_desc &g, int64_t b, int64_t k, int64_t n)
{
    const float w = load_value<BT>(g.b, b * g.bs_b + k * g.bs_k + n * g.bs_n);
    if (!g.bscale)
        return w;
    return w * g.bscale[(n / kBlockScale) * g.sc_n + (k / kBlockScale) * g.sc_k];
}

/* Fills the k step at k0 of tile (b, m0, n0) into shared memory; outside
 * the matrices: 0 (it meets only outputs that are not stored, or k >= K,
 * which the compute loop never reaches). */
template <int AT, int BT>
MLA_DEV void load_tiles(const gemm_desc &g, int64_t b, int64_t m0, int64_t n0, int64_t k0,
                        float (*As)[kBM + 1], float (*Bs)[kBN + 1])
{
    const int tid = (int)threadIdx.x;
#pragma unroll
    for (int r = 0; r < kBM * kBK / MLA_HIP_BLOCK; ++r) {
        const int e = tid + r * MLA_HIP_BLOCK;
        const int m = g.a_kfast ? e / kBK : e % kBM, k = g.a_kfast ? e % kBK : e / kBM;
        const bool in = m0 + m < g.M && k0 + k < g.K;
        As[k][m] = in ? load_value<AT>(g.a, b * g.as_b + (m0 + m) * g.as_m + (k0 + k) * g.as_k)
                      : 0.0f;
    }
#pragma unroll
    for (int r = 0; r < kBN * kBK / MLA_HIP_BLOCK; ++r) {
        const int e = tid + r * MLA_HIP_BLOCK;
        const int n = g.b_kfast ? e / kBK : e % kBN, k = g.b_kfast ? e % kBK : e / kBN;
        const bool in = n0 + n < g.N && k0 + k < g.K;
        Bs[k][n] = in ? b_value<BT>(g, b, k0 + k, n0 + n) : 0.0f;
    }
}

template <int AT, int BT>
__global__ __launch_bounds__(MLA_HIP_BLOCK) void gemm_fma_kernel(gemm_desc g)
{
    __shared__ float As[kBK][kBM + 1]; /* +1: the transposed fills avoid bank conflicts */
    __shared__ float Bs[kBK][kBN + 1];
    const int tx = (int)threadIdx.x % (kBN / kTN), ty = (int)threadIdx.x / (kBN / kTN);
    const int64_t tiles = g.batch * g.tiles_m * g.tiles_n;
    for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        int64_t b, mn, tm, tn;
        divmod64(tile, g.tiles_m * g.tiles_n, b, mn);
        divmod64(mn, g.tiles_n, tm, tn);
        const int64_t m0 = tm * kBM, n0 = tn * kBN;
        float acc[kTM][kTN];
#pragma unroll
        for (int i = 0; i < kTM; ++i)
#pragma unroll
            for (int j = 0; j < kTN; ++j)
                acc[i][j] = 0.0f;
        for (int64_t k0 = 0; k0 < g.K; k0 += kBK) {
            load_tiles<AT, BT>(g, b, m0, n0, k0, As, Bs);
            mla_block_sync();
            const int kn = g.K - k0 < kBK ? (int)(g.K - k0) : kBK;
            for (int kk = 0; kk < kn; ++kk) {
                float av[kTM], bv[kTN];
#pragma unroll
                for (int i = 0; i < kTM; ++i)
                    av[i] = As[kk][ty + i * (kBM / kTM)];
#pragma unroll
                for (int j = 0; j < kTN; ++j)
                    bv[j] = Bs[kk][tx + j * (kBN / kTN)];
#pragma unroll
                for (int i = 0; i < kTM; ++i)
#pragma unroll
                    for (int j = 0; j < kTN; ++j)
                        acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
            }
            mla_block_sync();
        }
#pragma unroll
        for (int i = 0; i < kTM; ++i) {
            const int64_t m = m0 + ty + i * (kBM / kTM);
#pragma unroll
            for (int j = 0; j < kTN; ++j) {
                const int64_t n = n0 + tx + j * (kBN / kTN);
                if (m >= g.M || n >= g.N)
                    continue;
                const int64_t off = b * g.cs_b + m * g.cs_m + n * g.cs_n;
                const float y = g.alpha * acc[i][j];
                if (g.cdt == MLA_DTYPE_F32)
                    store_value<MLA_DTYPE_F32>(g.c, off, y, 1);
                else
                    store_value<MLA_DTYPE_BF16>(g.c, off, y, 1);
            }
        }
    }
}

} // namespace

mla_status mla_hip_gemm(mla_context *ctx, const gemm_desc &g, const char *what)
{
    const int64_t tiles = g.batch * g.tiles_m * g.tiles_n;
    const unsigned blocks = mla_hip_grid_blocks(ctx, tiles * MLA_HIP_BLOCK, MLA_HIP_BLOCK);
    hipStream_t stream = mla_hip_state_of(ctx)->stream;
    /* x: F32 or BF16; W: BF16 or an fp8 */
    return with_cache_dtype(g.bdt, [&](auto bt) {
        constexpr int BT = decltype(bt)::value;
        if (g.adt == MLA_DTYPE_F32)
            gemm_fma_kernel<MLA_DTYPE_F32, BT><<<blocks, MLA_HIP_BLOCK, 0, stream>>>(g);
        else
            gemm_fma_kernel<MLA_DTYPE_BF16, BT><<<blocks, MLA_HIP_BLOCK, 0, stream>>>(g);
        return mla_hip_check_launch(ctx, what);
    });
}
