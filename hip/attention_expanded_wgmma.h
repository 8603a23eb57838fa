/* The sm_90a body of the expanded attention (hip/attention_expanded.hip):
 * causal flash attention on Hopper's warpgroup matrix units for DeepSeek's
 * heads (nope 128, R 64, v 128), the schedule of FlashAttention-3's forward
 * kernel without its producer warpgroup.
 *
 * A block is 128 query rows of one (sequence, head): two warpgroups of 64
 * rows, 256 threads. Shared memory, in the 128-byte swizzle wgmma reads
 * (hip/wgmma.h): Q [q_pe | q_nope] (3 blocks of 64 dims x 128 rows), and
 * two stages of a 64-key tile, each the key rows [k_pe pieces | K_nope] (P
 * + 2 blocks of 64 dims) and the value rows V (2 blocks of 64 columns),
 * filled by cp.async (16-byte chunks of the workspace's gathered rows and
 * decompressed [K_nope | V]; keys past the block's last position zero).
 * Per tile, all threads:
 *
 *   wait for tile j, barrier; issue tile j + 1 into the other stage;
 *   S = Q K(j)^T; softmax; O = alpha O + P V(j)
 *
 * so a tile loads under the previous one's products. A warpgroup computes
 * S (64 x 64, f32) by wgmma m64n64k16 with Q and K from shared memory, a
 * fixed chain of 4 (P + 2) k-steps; scales it to log2 units (ss2), masks
 * keys past each row's position on the diagonal tiles only, keeps the
 * running max m and each thread's share of the row sum l of unrounded P =
 * 2^(S - m) (quad shuffles), and rounds P to bf16 into wgmma's A fragment
 * (the accumulator layout of S is the A layout, no exchange); then O (64 x
 * 128) += P V by wgmma m64n128k16 with A from registers and V MN-major. A
 * warpgroup skips the tiles past its last row's position and the rows past
 * the block's (it still joins the loads and barriers). o = O / l and lse =
 * (m + log2 l) ln 2 after the last tile.
 *
 * Arithmetic: the mma.sync body's (hip/attention_expanded_nv.h): bf16 q and
 * keys, exact products, fp32 sums in the bound's gamma_{D+6}; f32 key rope
 * values (fp8 caches) as three exact bf16 pieces lo, mid, hi (blocks 0, 1,
 * 2 of the key rows, each against q_pe's block), the small pieces first in
 * the chain. */
#ifndef MLA_HIP_ATTENTION_EXPANDED_WGMMA_H
#define MLA_HIP_ATTENTION_EXPANDED_WGMMA_H

#include "hip/attention_expanded_common.h"
#include "hip/attention_nv.h" /* nv_exp2, nv_bf16x2 */
#include "hip/nv_copy.h"
#include "hip/wgmma.h"

/* the device pass (or the wave-32 emulation) has the body */
#if defined(__CUDACC__) && MLA_WG_BF16 && MLA_ATT_MATRIX_KIND == 1
#define MLA_EXW 1
#else
#define MLA_EXW 0
#endif

namespace
{

constexpr int kExwThreads = 256, kExwRows = 128, kExwKeys = 64;
constexpr int kExwNope = 128, kExwR = 64, kExwV = 128;
constexpr int kExwBlock = kExwKeys * 128; /* 64 rows x 64 bf16 dims */

/* Shared memory of the body for P pieces of k_pe, bytes from the first
 * 1024-byte boundary: Q, then the two stages (keys, values, P = 3: the f32
 * k_pe as copied). */
template <int P> struct exw_geom {
    static constexpr int QB = (kExwR + kExwNope) / 64, KB = (P * kExwR + kExwNope) / 64;
    static constexpr int VB = kExwV / 64;
    static constexpr int QBYTES = QB * 2 * kExwBlock; /* 128 rows a block */
    static constexpr int V = KB * kExwBlock, RAW = V + VB * kExwBlock;
    static constexpr int STAGE = RAW + (P == 3 ? kExwKeys * kExwR * 4 : 0);
    static constexpr int TOTAL = 1024 + QBYTES + 2 * STAGE;
};

/* Byte offset of chunk c (8 values) of row r in a swizzled block of rows of
 * 128 bytes. */
MLA_DEV uint32_t exw_swz(int r, int c)
{
    return (uint32_t)r * 128u + (((uint32_t)c ^ ((uint32_t)r & 7u)) << 4);
}

#if MLA_EXW

/* A thread's share of every tile: four threads a key, key kExwKeys_thread
 * k = thread / 4 and the chunks q, q + 4, ... of its K_nope, V and k_pe
 * rows (q = thread % 4), so that the destinations are fixed for the block
 * and a tile is one row pointer step: the copies cost their count. */
struct exw_lane {
    int k, q;
    const uint16_t *kv;        /* the [K_nope | V] of (key0 + k, head) */
    const unsigned char *rope; /* the k_pe of row key0 + k */
    int64_t kv_step, rope_step; /* one key on */
};

template <int P> MLA_DEV exw_lane exw_lane_of(const exp_desc &d, int64_t key0, int64_t hk)
{
    exw_lane l;
    l.k = (int)threadIdx.x / 4, l.q = (int)threadIdx.x % 4;
    const int eb = P == 3 ? 4 : 2; /* bytes of an element of the rows */
    l.kv = static_cast<const uint16_t *>(d.kv) + (key0 + l.k) * d.N + hk;
    l.rope = static_cast<const unsigned char *>(d.rows) + ((key0 + l.k) * (d.L + d.R) + d.L) * eb;
    l.kv_step = d.N, l.rope_step = (int64_t)(d.L + d.R) * eb;
    return l;
}

/* Tile at t0 into stage st: K_nope chunks into key blocks P, P + 1, k_pe
 * (bf16 rows) into block 0 or (f32 rows) into the raw rows, V into the
 * value blocks; keys past pmax zero. Commits a group. */
template <int P>
MLA_DEV void exw_issue(const exp_desc &d, const exw_lane &l, unsigned char *st, int t0, int pmax)
{
    using G = exw_geom<P>;
    static_assert(kExwThreads == 4 * kExwKeys, "four threads a key");
    const bool valid = t0 + l.k <= pmax;
    const uint16_t *kv = l.kv + t0 * l.kv_step;
    const unsigned char *rope = l.rope + t0 * l.rope_step;
#pragma unroll
    for (int i = 0; i < kExwNope / 32; ++i) {
        const int c = l.q + 4 * i; /* chunk c of 16 in K_nope and in V */
        const uint32_t at = (uint32_t)(c / 8) * kExwBlock + exw_swz(l.k, c % 8);
        cp_async<16>(st + P * kExwBlock + at, valid ? kv + 8 * c : d.kv, valid);
        cp_async<16>(st + G::V + at, valid ? kv + kExwNope + 8 * c : d.kv, valid);
    }
#pragma unroll
    for (int i = 0; i < (P == 3 ? 4 : 2); ++i) {
        const int r = l.q + 4 * i; /* chunk r of the k_pe row */
        unsigned char *dst = P == 3 ? st + G::RAW + l.k * kExwR * 4 + 16 * r : st + exw_swz(l.k, r);
        cp_async<16>(dst, valid ? rope + 16 * r : d.rows, valid);
    }
    cp_async_commit();
}

/* P = 3: this thread's raw k_pe chunks (its own copies, landed) -> lo, mid,
 * hi into key blocks 0, 1, 2. */
template <int P> MLA_DEV void exw_convert(const exw_lane &l, unsigned char *st)
{
    using G = exw_geom<P>;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const int r = l.q + 4 * i; /* values 4r .. 4r + 3: half of chunk r / 2 */
        const mla_u32x4 x =
            *reinterpret_cast<const mla_u32x4 *>(st + G::RAW + l.k * kExwR * 4 + 16 * r);
        uint32_t p[3][2];
        ex_split3x4(x, p);
#pragma unroll
        for (int q = 0; q < 3; ++q) {
            uint32_t *dst = reinterpret_cast<uint32_t *>(st + q * kExwBlock +
                                                         exw_swz(l.k, r / 2) + 8 * (r % 2));
            dst[0] = p[q][0], dst[1] = p[q][1];
        }
    }
}

/* The block's q rows [q_pe | q_nope] as bf16 into Q, zero past its rows. */
MLA_DEV void exw_stage_q(const exp_desc &d, unsigned char *Q, int64_t r0, int h, int rows)
{
    constexpr int PER = (kExwNope + kExwR) / 8;
    for (int it = (int)threadIdx.x; it < kExwRows * PER; it += kExwThreads) {
        const int r = it / PER, c = it - r * PER;
        const mla_u32x4 zero = {{0, 0, 0, 0}};
        const mla_u32x4 w = r < rows ? ex_q_chunk(d, r0 + r, h, c) : zero;
        *reinterpret_cast<mla_u32x4 *>(Q + (c / 8) * 2 * kExwBlock + exw_swz(r, c % 8)) = w;
    }
}

/* Rows q0 .. q0 + 127 of (s, h); one call per block. */
template <int P> MLA_DEV void exw_rows(const exp_desc &d, int s, int h, int64_t q0, unsigned char *smem)
{
    using G = exw_geom<P>;
    const int64_t r0 = d.cu[s], n = d.cu[s + 1] - r0, c = d.ctx[s];
    if (q0 >= n)
        return;
    const int rows = (int)(n - q0 < kExwRows ? n - q0 : kExwRows);
    if (c == 0) {
        ex_padding(d, r0 + q0, h, rows, kExwThreads);
        return;
    }
    /* the swizzle XORs address bits: the tiles start 1024-byte aligned */
    unsigned char *Q = smem + ((1024u - (wg_addr(smem) & 1023u)) & 1023u);
    unsigned char *stage0 = Q + G::QBYTES;
    const int p0 = (int)(c - n + q0), pmax = p0 + rows - 1;
    const exw_lane lane_ = exw_lane_of<P>(d, d.key0[s], (int64_t)h * (kExwNope + kExwV));
    exw_issue<P>(d, lane_, stage0, 0, pmax);
    exw_stage_q(d, Q, r0 + q0, h, rows);

    const int wgi = (int)threadIdx.x / 128, wt = (int)threadIdx.x % 128;
    const int w = wt / 32, lane = wt % 32, g = lane / 4, t = lane % 4;
    const int rb = 64 * wgi; /* the warpgroup's first row */
    const bool wg_rows = rb < rows;
    const int w_lo = p0 + rb, w_hi = p0 + rb + 63 < pmax ? p0 + rb + 63 : pmax;
    float o[64], m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.0f, 0.0f};
#pragma unroll
    for (int i = 0; i < 64; ++i)
        o[i] = 0.0f;
    /* K-major descriptors (8-row groups 1024 bytes apart), V MN-major
     * (64-column blocks kExwBlock apart) */
    const uint64_t dq = wg_desc_sw128(wg_addr(Q + rb * 128), 16, 1024);
    const uint64_t dk0 = wg_desc_sw128(wg_addr(stage0), 16, 1024);
    const uint64_t dv0 = wg_desc_sw128(wg_addr(stage0 + G::V), kExwBlock, 1024);

    for (int t0 = 0, j = 0; t0 <= pmax; t0 += kExwKeys, ++j) {
        const int sidx = j & 1;
        unsigned char *st = stage0 + sidx * G::STAGE;
        cp_async_wait<0>();
        if constexpr (P == 3)
            exw_convert<P>(lane_, st);
        fence_proxy_async(); /* Q and the tile's bytes, for the async proxy */
        idx_sync(); /* tile j in; every warpgroup is done with tile j - 1 */
        if (t0 + kExwKeys <= pmax)
            exw_issue<P>(d, lane_, stage0 + (sidx ^ 1) * G::STAGE, t0 + kExwKeys, pmax);
        if (!wg_rows || t0 > w_hi)
            continue;
        const uint64_t soff = (uint64_t)((sidx * G::STAGE) >> 4);
        float sc[32];
#pragma unroll
        for (int e = 0; e < 32; ++e)
            sc[e] = 0.0f;
        wg_fence();
#pragma unroll
        for (int a = 0; a < G::KB; ++a) {
            const int qa = a < P ? 0 : a - P + 1; /* q_pe against each rope piece */
#pragma unroll
            for (int kk = 0; kk < 4; ++kk)
                wg_ss_64x64(sc, dq + (uint64_t)((qa * 2 * kExwBlock + 32 * kk) >> 4),
                            dk0 + soff + (uint64_t)((a * kExwBlock + 32 * kk) >> 4), a + kk);
        }
        wg_commit();
        wg_wait<0>();
        wg_pin(sc);

        /* masked, scaled scores (log2 units); the rows' maxima. Accumulator
         * e: row 16 w + g + 8 ((e % 4) / 2), key 8 (e / 4) + 2 t + e % 2 */
        const bool diag = t0 + kExwKeys - 1 > w_lo;
        float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int e = 0; e < 32; ++e) {
            const int hh = (e % 4) / 2, k = 8 * (e / 4) + 2 * t + e % 2;
            const int r = rb + 16 * w + g + 8 * hh;
            const float x = sc[e] * d.ss2;
            sc[e] = diag && (t0 + k > p0 + r || r >= rows) ? -INFINITY : x;
            mx[hh] = fmaxf(mx[hh], sc[e]);
        }
        float alpha[2], psum[2] = {0.0f, 0.0f};
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
            mx[hh] = fmaxf(mx[hh], mla_shfl_xor(mx[hh], 1));
            mx[hh] = fmaxf(mx[hh], mla_shfl_xor(mx[hh], 2));
            const float mn = fmaxf(m_run[hh], mx[hh]);
            alpha[hh] = mn == -INFINITY ? 1.0f : nv_exp2(m_run[hh] - mn);
            m_run[hh] = mn;
            mx[hh] = mn == -INFINITY ? 0.0f : mn; /* the exponent's offset */
        }
        /* P in bf16 pairs: pw[jj][hh] = keys 8 jj + 2 t, + 1 of row half hh */
        uint32_t pw[8][2];
#pragma unroll
        for (int jj = 0; jj < 8; ++jj)
#pragma unroll
            for (int hh = 0; hh < 2; ++hh) {
                const float p0v = nv_exp2(sc[4 * jj + 2 * hh] - mx[hh]);
                const float p1v = nv_exp2(sc[4 * jj + 2 * hh + 1] - mx[hh]);
                psum[hh] += p0v + p1v;
                pw[jj][hh] = nv_bf16x2(p0v, p1v);
            }
#pragma unroll
        for (int hh = 0; hh < 2; ++hh)
            l_run[hh] = l_run[hh] * alpha[hh] + psum[hh];
        /* A fragments of the four 16-key steps (hip/wgmma.h) */
        uint32_t pa[4][4];
        wg_p_frags(pw, pa);
        /* a factor of 1 (the rows' maxima held) changes no bit */
        if (mla_wave_any(alpha[0] != 1.0f || alpha[1] != 1.0f)) {
#pragma unroll
            for (int e = 0; e < 64; ++e)
                o[e] *= alpha[(e % 4) / 2];
        }
        wg_fence();
#pragma unroll
        for (int kk = 0; kk < 4; ++kk)
            wg_rs_64x128(o, pa[kk], dv0 + soff + (uint64_t)((16 * 128 * kk) >> 4), 1);
        wg_commit();
        wg_wait<0>();
        wg_pin(o);
#pragma unroll
        for (int kk = 0; kk < 4; ++kk)
            wg_pin(pa[kk]);
    }

    if (!wg_rows)
        return;
#pragma unroll
    for (int hh = 0; hh < 2; ++hh) {
        float l = l_run[hh];
        l += mla_shfl_xor(l, 1);
        l += mla_shfl_xor(l, 2);
        const int r = rb + 16 * w + g + 8 * hh;
        if (r >= rows)
            continue;
        const int64_t row = r0 + q0 + r;
#pragma unroll
        for (int jj = 0; jj < 16; ++jj)
#pragma unroll
            for (int e = 0; e < 2; ++e)
                ex_st(d.o, row * d.o_s0 + h * d.o_s1 + (8 * jj + 2 * t + e) * d.o_s2,
                      o[4 * jj + 2 * hh + e] / l, d.o_dt);
        if (d.lse && t == 0)
            d.lse[row * d.lse_s0 + h * d.lse_s1] = (m_run[hh] + log2f(l)) * kLn2;
    }
}

#endif /* MLA_EXW */

} // namespace

#endif
