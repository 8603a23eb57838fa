/* The sm_90a body of the matrix tiles (hip/gemm.hip, hip/gemm_tile.h):
 * C = alpha A B for bf16 A and bf16 B with k unit-stride in both (linear's
 * x @ W^T and the expanded attention's decompression, any batch), on
 * Hopper's warpgroup matrix units.
 *
 * A block is a 128 x 128 tile of C: two warpgroups of 64 rows, 256 threads,
 * two blocks a multiprocessor (one block's loads and stores run under the
 * other's products). K goes in steps of 64 through three stages of shared
 * memory, each A's 128 rows and B's 128 rows of the step in the 128-byte
 * swizzle (hip/wgmma.h: a row of 64 bf16 is 128 bytes), filled by cp.async
 * from a fixed share per thread (row tid / 8 + 32 i, 16-byte chunk tid % 8;
 * rows past M or N and k past K zero). Per step, all threads:
 *
 *   wait for step s, barrier; issue step s + 2 into the stage step s - 1
 *   used; C(warpgroup's 64 x 128) += A(s) B(s) by 4 wgmma m64n128k16
 *
 * both operands K-major from shared memory. Arithmetic as the mma.sync
 * tiles' (hip/gemm_tile.h): exact bf16 products, fp32 sums, alpha and one
 * rounding to C's dtype at the store. */
#ifndef MLA_HIP_GEMM_WGMMA_H
#define MLA_HIP_GEMM_WGMMA_H

#include "hip/gemm_tile.h"
#include "hip/nv_copy.h"
#include "hip/wgmma.h"

/* the device pass (or the wave-32 emulation) has the body */
#if defined(__CUDACC__) && MLA_WG_BF16 && MLA_IDX_MMA_NV
#define MLA_GEMM_WG 1
#else
#define MLA_GEMM_WG 0
#endif

namespace
{

constexpr int kGwM = 128, kGwN = 128, kGwK = 64, kGwStages = 3, kGwThreads = 256;
constexpr int kGwTile = kGwM * kGwK * 2;      /* bytes of one operand's step */
constexpr int kGwStage = 2 * kGwTile;         /* A then B */
constexpr int kGwSmem = 1024 + kGwStages * kGwStage; /* from a 1024-byte boundary */

#if MLA_GEMM_WG

/* The epilogue of a warpgroup's 64 x 128 tile of C (rows from m0, columns
 * from n0) through its buf of shared memory: alpha v rounded to C's dtype
 * (ES bytes) into rows of 128 ES bytes, 16-byte chunks XOR-swizzled by row
 * % 8 (a warp's pair writes spread over the banks); then whole chunks to C,
 * 16-byte stores where C's rows are unit-stride and aligned, value by value
 * elsewhere. */
template <int ES>
MLA_DEV void gw_store(const gemm_desc &g, int64_t b, int64_t m0, int64_t n0, const float (&acc)[64],
                      unsigned char *buf)
{
    constexpr int ROW = 128 * ES, CPR = ROW / 16, PER = 16 / ES; /* chunks a row, values a chunk */
    const int wt = (int)threadIdx.x % 128, w = wt / 32, lane = wt % 32;
    /* accumulator e: row 16 w + lane / 4 + 8 ((e % 4) / 2), column 8 (e / 4)
     * + 2 (lane % 4) + e % 2 (hip/wgmma.h) */
#pragma unroll
    for (int e = 0; e < 64; e += 2) {
        const int r = 16 * w + lane / 4 + 8 * ((e % 4) / 2);
        const int byte = (8 * (e / 4) + 2 * (lane % 4)) * ES;
        unsigned char *at = buf + r * ROW + (((byte / 16) ^ (r & 7)) << 4) + byte % 16;
        const float v0 = g.alpha * acc[e], v1 = g.alpha * acc[e + 1];
        if constexpr (ES == 4) {
            reinterpret_cast<float *>(at)[0] = v0;
            reinterpret_cast<float *>(at)[1] = v1;
        } else {
            *reinterpret_cast<uint32_t *>(at) =
                (uint32_t)mla_fb_f32_to_bf16(v0) | (uint32_t)mla_fb_f32_to_bf16(v1) << 16;
        }
    }
    idx_sync();
    const bool vec = g.cs_n == 1 && (g.cs_m * ES) % 16 == 0 && (g.cs_b * ES) % 16 == 0 &&
                     reinterpret_cast<uintptr_t>(g.c) % 16 == 0;
    for (int it = wt; it < 64 * CPR; it += 128) {
        const int r = it / CPR, cc = it % CPR;
        const int64_t m = m0 + r, n = n0 + (int64_t)cc * PER;
        if (m >= g.M || n >= g.N)
            continue;
        const unsigned char *src = buf + r * ROW + ((cc ^ (r & 7)) << 4);
        const int64_t off = b * g.cs_b + m * g.cs_m + n * g.cs_n;
        unsigned char *dst = static_cast<unsigned char *>(g.c);
        if (vec && n + PER <= g.N) {
            *reinterpret_cast<mla_u32x4 *>(dst + off * ES) =
                *reinterpret_cast<const mla_u32x4 *>(src);
            continue;
        }
        for (int q = 0; q < PER && n + q < g.N; ++q)
            for (int k = 0; k < ES; ++k)
                dst[(off + q * g.cs_n) * ES + k] = src[q * ES + k];
    }
}

/* Tile (b, m0, n0) of C over all of K, stored with alpha and one rounding
 * (gemm.hip's put_out for one split). */
MLA_DEV void gw_tile(const gemm_desc &g, int64_t b, int64_t m0, int64_t n0, unsigned char *smem)
{
    unsigned char *st0 = smem + ((1024u - (wg_addr(smem) & 1023u)) & 1023u);
    const int tid = (int)threadIdx.x, c = tid % 8, r0 = tid / 8;
    const uint16_t *pa = static_cast<const uint16_t *>(g.a) + b * g.as_b;
    const uint16_t *pb = static_cast<const uint16_t *>(g.b) + b * g.bs_b;
    const int32_t steps = (int32_t)((g.K + kGwK - 1) / kGwK);

    /* step s into stage s % 3 (a group per step, empty past the last) */
    const auto issue = [&](int32_t s) {
        if (s < steps) {
            unsigned char *st = st0 + (s % kGwStages) * kGwStage;
            const int64_t k = (int64_t)s * kGwK + 8 * c;
#pragma unroll
            for (int i = 0; i < kGwM / 32; ++i) {
                const int r = r0 + 32 * i;
                const uint32_t at = (uint32_t)r * 128u + (((uint32_t)c ^ ((uint32_t)r & 7u)) << 4);
                const bool va = m0 + r < g.M && k < g.K, vb = n0 + r < g.N && k < g.K;
                cp_async<16>(st + at, va ? pa + (m0 + r) * g.as_m + k : g.a, va);
                cp_async<16>(st + kGwTile + at, vb ? pb + (n0 + r) * g.bs_n + k : g.b, vb);
            }
        }
        cp_async_commit();
    };
    issue(0);
    issue(1);

    const int wgi = tid / 128;
    float acc[64];
#pragma unroll
    for (int i = 0; i < 64; ++i)
        acc[i] = 0.0f;
    const uint64_t da = wg_desc_sw128(wg_addr(st0 + wgi * 64 * 128), 16, 1024);
    const uint64_t db = wg_desc_sw128(wg_addr(st0 + kGwTile), 16, 1024);
    for (int32_t s = 0; s < steps; ++s) {
        cp_async_wait<1>(); /* step s landed: only step s + 1 may still fly */
        fence_proxy_async();
        idx_sync(); /* everyone's step s in; everyone done with step s - 1 */
        issue(s + 2);
        const uint64_t off = (uint64_t)(((s % kGwStages) * kGwStage) >> 4);
        wg_fence();
#pragma unroll
        for (int kk = 0; kk < kGwK / 16; ++kk)
            wg_ss_64x128(acc, da + off + (uint64_t)(2 * kk), db + off + (uint64_t)(2 * kk), 1);
        wg_commit();
        wg_wait<0>();
        wg_pin(acc);
    }

    /* every warpgroup's products done: the stages hold the epilogue */
    idx_sync();
    unsigned char *buf = st0 + wgi * 64 * 128 * (g.cdt == MLA_DTYPE_F32 ? 4 : 2);
    if (g.cdt == MLA_DTYPE_F32)
        gw_store<4>(g, b, m0 + 64 * wgi, n0, acc, buf);
    else
        gw_store<2>(g, b, m0 + 64 * wgi, n0, acc, buf);
}

#endif /* MLA_GEMM_WG */

} // namespace

#endif
