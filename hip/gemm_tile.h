/* The GEMM of the projections, for linear (x @ W^T, fp8 W with 128 x 128
 * block scales) and the batched absorb GEMMs (per-tensor scale):
 *
 *     C[b, m, n] = alpha * sum_k A[b, m, k] * B[b, k, n]
 *
 * every operand through its own strides (transposed views and kv_b_proj's
 * W_kc / W_vc views included), fp32 accumulation, one rounding to C's dtype.
 * hip/gemm.hip has three kernels, and the tiles a second body on sm_90a:
 *
 * FMA (f32 A, MLA_HIP_GEMM=fma, targets without matrix units): inputs
 * widened to fp32 exactly (fp8 weights of linear dequantized as fl(code *
 * block scale)), 64 x 64 tiles of C in shared memory, 4 x 4 values per
 * thread, each output one fmaf chain over k ascending.
 *
 * Matrix tiles (bf16 A, M > 16 or batched): 128 x 128 tiles of C per block,
 * K in steps of 32 staged in shared memory as bf16 (fp8 codes widened to
 * bf16 exactly through a 256-entry table: every e4m3 value is a bf16 value),
 * the next step's loads in registers while the matrix units run the current
 * one: NVIDIA mma.sync m16n8k16 (8 warps of 64 x 32), AMD MFMA 32x32x8
 * (4 waves of 64 x 64). Linear's fp8 block scales multiply fp32 partial
 * sums, as DeepSeek's block-scaled GEMMs do: each K step's sum (32 values,
 * inside one 128-wide scale block) joins the accumulator as
 * fmaf(scale, partial, acc); alpha multiplies the final sum. Operand access
 * is compiled per layout (k unit-stride for both: linear; n unit-stride for
 * B: the absorb views; anything else through per-value loads). Where the
 * tiles would leave multiprocessors idle (q_a_proj / kv_a_proj at T <= 1024:
 * 5-96 tiles, K = 7168), K is split too, in whole K steps (see below). On
 * sm_90a the launches of bf16 A and B with k unit-stride, K a multiple of
 * 8 and one split take the wgmma body instead (hip/gemm_wgmma.h: the same
 * 128 x 128 tiles, K steps of 64 by cp.async, the products on the
 * warpgroup units; MLA_HIP_GEMM=mma keeps these tiles there).
 *
 * Small M (linear with bf16 x and T <= 16: a stream of the weights): W plays
 * the matrix unit's row operand (16 rows per NVIDIA mma, 32 per MFMA), x^T
 * the column operand; each lane loads 16 bytes of a weight row per access
 * and uses them for several matrix steps. A block owns 64 rows of W and a K
 * range; its warps take the range's chunks in turn (each chunk's sum
 * times its fp8 block scale, as above) and their sums meet in shared memory
 * in a fixed order. K is split over several blocks where the
 * rows alone would not fill the device.
 *
 * Split K (tiles and small M): the splits write fp32 partial sums [splits,
 * batch, M, N] to the context's scratch and a second kernel adds them in
 * split order, then applies alpha and the one rounding to C (and zeroes the
 * partials again: the scratch is kept all-zero between ops, which the other
 * users of it rely on). Each split's sum carries its own block scales as
 * above. Every reduction order is fixed by the shape and the device's
 * multiprocessor count, never by timing. MLA_HIP_GEMM=fma: the FMA kernel for
 * every GEMM; =tile: the tiles for every M (small-M path off);
 * MLA_HIP_GEMM_SPLITS=n: n tile-path splits for every launch (testing).
 *
 * Error: the bound of conformance/bounds.c (gamma_{K+3} S: any order and
 * blocking of fp32 sums, one rounding for the block scale applied to a
 * partial, one for alpha) holds on the matrix units: every product is exact
 * (bf16 x bf16 and bf16 x e4m3 fit fp32's 24 bits), and each mma / MFMA adds
 * its 8-16 products to the fp32 accumulator with at most a couple of units
 * of fp32 rounding (NVIDIA's tensor cores truncate after aligning to the
 * largest term), i.e. far fewer roundings than one per term. f32 x is not
 * sent to the bf16 units: x rounded to bf16 errs by 2^-9 relative, far
 * outside that bound (an exact hi + mid + lo split of x into three bf16
 * would fit it at three times the matrix work; not done). Subnormal bf16
 * inputs and products below 2^-126 may be flushed by the matrix units
 * (documented for MI200); the conformance inputs avoid that range. */
#ifndef MLA_HIP_GEMM_TILE_H
#define MLA_HIP_GEMM_TILE_H

#include "hip/device_util.h"

constexpr int kBM = 64, kBN = 64, kBK = 16, kTM = 4, kTN = 4; /* FMA tiles */
constexpr int kBlockScale = 128;                              /* DeepSeek fp8 checkpoints */
static_assert((kBM / kTM) * (kBN / kTN) == MLA_HIP_BLOCK, "one output group per thread");
static_assert(kBM * kBK % MLA_HIP_BLOCK == 0 && kBN * kBK % MLA_HIP_BLOCK == 0, "whole tile loads");

/* gemm_desc::vec: operand access the host proved possible for the whole
 * launch (unit stride along the named index, every other stride and the base
 * aligned to 16 bytes). */
constexpr int32_t kAVecK = 1; /* A: 8 consecutive k in one 16-byte load */
constexpr int32_t kBVecK = 2; /* B: 16 bytes of consecutive k (W rows of linear) */
constexpr int32_t kBVecN = 4; /* B: 16 bytes of consecutive n (W_kc / W_vc views) */

struct gemm_desc {
    const void *a, *b;
    void *c;
    const float *bscale; /* linear fp8: [ceil(N/128), ceil(K/128)]; NULL otherwise */
    float *partial;      /* split-K sums: [splits, batch, M, N] fp32 in the scratch */
    int64_t M, N, K, batch, tiles_m, tiles_n;
    int64_t as_b, as_m, as_k, bs_b, bs_k, bs_n, cs_b, cs_m, cs_n, sc_n, sc_k;
    float alpha;
    int32_t adt, bdt, cdt;
    int32_t a_kfast, b_kfast;         /* k is A's (B's) unit-stride index */
    int32_t vec;                      /* kAVecK | kBVecK | kBVecN */
    int32_t splits, chunks_per_split; /* split K: chunks (small M) or K steps (tiles) */
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
mla_status mla_hip_gemm(mla_context *ctx, gemm_desc &g, const char *what);

#endif
