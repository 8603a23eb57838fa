/* The GEMM of the projections, for linear (x @ W^T, fp8 W with 128 x 128
 * block scales) and the batched absorb GEMMs (per-tensor scale):
 *
 *     C[b, m, n] = alpha * sum_k A[b, m, k] * B[b, k, n]
 *
 * every operand through its own strides (transposed views and kv_b_proj's
 * W_kc / W_vc views included), inputs widened to fp32 exactly (fp8 weights
 * of linear dequantized as fl(code * block scale)), fp32 accumulation, one
 * rounding to C's dtype.
 *
 * Shared-memory tiles: a 256-thread block computes a 64 x 64 tile of C,
 * 4 x 4 values per thread, in K steps of 16. Each output is one fmaf chain
 * over k ascending, so its bits do not depend on the tiling, the grid or the
 * device: only the operands decide them. Tiles are loaded with the operand's
 * unit-stride index running across the threads (coalesced either way). */
#ifndef MLA_HIP_GEMM_TILE_H
#define MLA_HIP_GEMM_TILE_H

#include "hip/device_util.h"

constexpr int kBM = 64, kBN = 64, kBK = 16, kTM = 4, kTN = 4;
constexpr int kBlockScale = 128; /* DeepSeek fp8 checkpoints */
static_assert((kBM / kTM) * (kBN / kTN) == MLA_HIP_BLOCK, "one output group per thread");
static_assert(kBM * kBK % MLA_HIP_BLOCK == 0 && kBN * kBK % MLA_HIP_BLOCK == 0, "whole tile loads");

struct gemm_desc {
    const void *a, *b;
    void *c;
    const float *bscale; /* linear fp8: [ceil(N/128), ceil(K/128)]; NULL otherwise */
    int64_t M, N, K, batch, tiles_m, tiles_n;
    int64_t as_b, as_m, as_k, bs_b, bs_k, bs_n, cs_b, cs_m, cs_n, sc_n, sc_k;
    float alpha;
    int32_t adt, bdt, cdt;
    int32_t a_kfast, b_kfast; /* k is A's (B's) unit-stride index */
};

/* Tile counts, and which operand index runs with unit stride. */
static inline void gemm_finish_desc(gemm_desc &g)
{
    g.tiles_m = (g.M + kBM - 1) / kBM;
    g.tiles_n = (g.N + kBN - 1) / kBN;
    g.a_kfast = g.as_k <= g.as_m;
    g.b_kfast = g.bs_k <= g.bs_n;
}

/* Queues the GEMM on the context's stream (hip/gemm.hip). */
mla_status mla_hip_gemm(mla_context *ctx, const gemm_desc &g, const char *what);

#endif
