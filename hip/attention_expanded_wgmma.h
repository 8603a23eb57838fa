/* The sm_90a body of the expanded attention (hip/attention_expanded.hip):
 * causal flash attention on Hopper's warpgroup matrix units for DeepSeek's
 * heads (nope 128, R 64, v 128).
 *
 * A block is 128 query rows of one (sequence, head): two warpgroups of 64
 * rows, 256 threads. Shared memory, in the 128-byte swizzle wgmma reads
 * (hip/wgmma.h): Q [q_pe | q_nope] (3 blocks of 64 dims x 128 rows), and
 * two stages of a 64-key tile's key rows [k_pe pieces | K_nope] (P + 2
 * blocks of 64 dims) and two of its value rows V (2 blocks of 64 columns),
 * filled by cp.async (16-byte chunks of the workspace's gathered rows and
 * decompressed [K_nope | V]; keys past the block's last position zero).
 * Step j, all threads: wait for tile j's keys and tile j - 1's values,
 * barrier, issue tile j + 1's keys and tile j's values; then a warpgroup
 *
 *   issues S(j) = Q K(j)^T, then O += P(j - 1) V(j - 1);
 *   waits for S(j); softmax(j) while the second runs; waits; O *= alpha(j)
 *
 * (FlashAttention-3's intra-warpgroup overlap, without its producer
 * warpgroup), so the exponentials run under the matrix units and a tile
 * loads under the previous one's products. S (64 x 64, f32) is wgmma
 * m64n64k16 with Q and K from shared memory, a fixed chain of 4 (P + 2)
 * k-steps; the softmax scales it to log2 units (ss2), masks keys past each
 * row's position on the diagonal tiles only, keeps the running max m and
 * each thread's share of the row sum l of unrounded P = 2^(S - m) (quad
 * shuffles), and rounds P to bf16 into wgmma's A fragment (the accumulator
 * layout of S is the A layout, no exchange); O (64 x 128) += P V is wgmma
 * m64n128k16 with A from registers and V MN-major. A warpgroup computes
 * only its tiles (through its last row's position) and rows (through the
 * block's); it joins every step's loads and barrier. o = O / l and lse = (m
 * + log2 l) ln 2 after the last tile.
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
 * 1024-byte boundary: Q, two key stages (P = 3: each with the f32 k_pe as
 * copied, RAW), then two value stages. */
template <int P> struct exw_geom {
    static constexpr int QB = (kExwR + kExwNope) / 64, KB = (P * kExwR + kExwNope) / 64;
    static constexpr int VB = kExwV / 64;
    static constexpr int QBYTES = QB * 2 * kExwBlock; /* 128 rows a block */
    static constexpr int RAW = KB * kExwBlock;
    static constexpr int KSTAGE = RAW + (P == 3 ? kExwKeys * kExwR * 4 : 0);
    static constexpr int VSTAGE = VB * kExwBlock;
    static constexpr int TOTAL = 1024 + QBYTES + 2 * KSTAGE + 2 * VSTAGE;
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

/* The keys of the tile at t0 into key stage ks: K_nope chunks into key
 * blocks P, P + 1, k_pe (bf16 rows) into block 0 or (f32 rows) into the raw
 * rows; keys past pmax zero. */
template <int P>
MLA_DEV void exw_issue_k(const exp_desc &d, const exw_lane &l, unsigned char *ks, int t0, int pmax)
{
    using G = exw_geom<P>;
    static_assert(kExwThreads == 4 * kExwKeys, "four threads a key");
    const bool valid = t0 + l.k <= pmax;
    const uint16_t *kv = l.kv + t0 * l.kv_step;
    const unsigned char *rope = l.rope + t0 * l.rope_step;
#pragma unroll
    for (int i = 0; i < kExwNope / 32; ++i) {
        const int c = l.q + 4 * i; /* chunk c of 16 in K_nope */
        const uint32_t at = (uint32_t)(c / 8) * kExwBlock + exw_swz(l.k, c % 8);
        cp_async<16>(ks + P * kExwBlock + at, valid ? kv + 8 * c : d.kv, valid);
    }
#pragma unroll
    for (int i = 0; i < (P == 3 ? 4 : 2); ++i) {
        const int r = l.q + 4 * i; /* chunk r of the k_pe row */
        unsigned char *dst = P == 3 ? ks + G::RAW + l.k * kExwR * 4 + 16 * r : ks + exw_swz(l.k, r);
        cp_async<16>(dst, valid ? rope + 16 * r : d.rows, valid);
    }
}

/* The values of the tile at t0 into value stage vs (keys past pmax zero). */
MLA_DEV void exw_issue_v(const exp_desc &d, const exw_lane &l, unsigned char *vs, int t0, int pmax)
{
    const bool valid = t0 + l.k <= pmax;
    const uint16_t *kv = l.kv + t0 * l.kv_step + kExwNope;
#pragma unroll
    for (int i = 0; i < kExwV / 32; ++i) {
        const int c = l.q + 4 * i; /* chunk c of 16 in V */
        const uint32_t at = (uint32_t)(c / 8) * kExwBlock + exw_swz(l.k, c % 8);
        cp_async<16>(vs + at, valid ? kv + 8 * c : d.kv, valid);
    }
}

/* P = 3: this thread's raw k_pe chunks (its own copies, landed) -> lo, mid,
 * hi into key blocks 0, 1, 2 of key stage ks. */
template <int P> MLA_DEV void exw_convert(const exw_lane &l, unsigned char *ks)
{
    using G = exw_geom<P>;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const int r = l.q + 4 * i; /* values 4r .. 4r + 3: half of chunk r / 2 */
        const mla_u32x4 x =
            *reinterpret_cast<const mla_u32x4 *>(ks + G::RAW + l.k * kExwR * 4 + 16 * r);
        uint32_t p[3][2];
        ex_split3x4(x, p);
#pragma unroll
        for (int q = 0; q < 3; ++q) {
            uint32_t *dst = reinterpret_cast<uint32_t *>(ks + q * kExwBlock +
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
    unsigned char *kst = Q + G::QBYTES, *vst = kst + 2 * G::KSTAGE;
    const int p0 = (int)(c - n + q0), pmax = p0 + rows - 1, nt = pmax / kExwKeys + 1;
    const exw_lane lane_ = exw_lane_of<P>(d, d.key0[s], (int64_t)h * (kExwNope + kExwV));
    exw_issue_k<P>(d, lane_, kst, 0, pmax);
    cp_async_commit();
    exw_stage_q(d, Q, r0 + q0, h, rows);

    const int wgi = (int)threadIdx.x / 128, wt = (int)threadIdx.x % 128;
    const int w = wt / 32, lane = wt % 32, g = lane / 4, t = lane % 4;
    const int rb = 64 * wgi; /* the warpgroup's first row */
    const int w_lo = p0 + rb, w_hi = p0 + rb + 63 < pmax ? p0 + rb + 63 : pmax;
    const int jw = rb < rows ? w_hi / kExwKeys : -1; /* the warpgroup's last tile */
    float o[64], m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.0f, 0.0f};
    uint32_t pa[4][4]; /* P of the previous tile: wgmma's A fragments of 4 key steps */
#pragma unroll
    for (int i = 0; i < 64; ++i)
        o[i] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < 4; ++kk)
        pa[kk][0] = pa[kk][1] = pa[kk][2] = pa[kk][3] = 0u;
    /* K-major descriptors (8-row groups 1024 bytes apart), V MN-major
     * (64-column blocks kExwBlock apart) */
    const uint64_t dq = wg_desc_sw128(wg_addr(Q + rb * 128), 16, 1024);
    const uint64_t dk0 = wg_desc_sw128(wg_addr(kst), 16, 1024);
    const uint64_t dv0 = wg_desc_sw128(wg_addr(vst), kExwBlock, 1024);

    /* Step j (all threads, j = 0 .. nt): wait for tile j's keys and tile j -
     * 1's values, barrier (every warpgroup is done with step j - 1), issue
     * tile j + 1's keys and tile j's values. */
    const auto step = [&](int j) {
        cp_async_wait<0>();
        if constexpr (P == 3)
            if (j < nt)
                exw_convert<P>(lane_, kst + (j & 1) * G::KSTAGE);
        fence_proxy_async(); /* Q and the tiles' bytes, for the async proxy */
        idx_sync();
        if (j + 1 < nt)
            exw_issue_k<P>(d, lane_, kst + ((j + 1) & 1) * G::KSTAGE, kExwKeys * (j + 1), pmax);
        if (j < nt)
            exw_issue_v(d, lane_, vst + (j & 1) * G::VSTAGE, kExwKeys * j, pmax);
        cp_async_commit();
    };
    /* S(j) = Q K(j)^T by a fixed chain of KB x 4 k-steps, one group */
    const auto issue_s = [&](float(&sc)[32], int j) {
        const uint64_t koff = (uint64_t)(((j & 1) * G::KSTAGE) >> 4);
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
                            dk0 + koff + (uint64_t)((a * kExwBlock + 32 * kk) >> 4), a + kk);
        }
        wg_commit();
    };
    /* O += P(j) V(j), P from pa, one group */
    const auto issue_pv = [&](int j) {
        const uint64_t voff = (uint64_t)(((j & 1) * G::VSTAGE) >> 4);
        wg_fence();
#pragma unroll
        for (int kk = 0; kk < 4; ++kk)
            wg_rs_64x128(o, pa[kk], dv0 + voff + (uint64_t)((16 * 128 * kk) >> 4), 1);
        wg_commit();
    };
    const auto pv_done = [&]() {
        wg_wait<0>();
        wg_pin(o);
#pragma unroll
        for (int kk = 0; kk < 4; ++kk)
            wg_pin(pa[kk]);
    };
    /* Tile j's softmax on its landed S: masked, scaled scores (log2 units),
     * the rows' running maxima and sums, P in bf16 pairs into pw; alpha, the
     * factor O's earlier tiles take. Accumulator e: row 16 w + g + 8 ((e %
     * 4) / 2), key 8 (e / 4) + 2 t + e % 2 */
    const auto softmax = [&](float(&sc)[32], int j, uint32_t(&pw)[8][2], float(&alpha)[2]) {
        const int t0 = kExwKeys * j;
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
        float psum[2] = {0.0f, 0.0f};
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
            mx[hh] = fmaxf(mx[hh], mla_shfl_xor(mx[hh], 1));
            mx[hh] = fmaxf(mx[hh], mla_shfl_xor(mx[hh], 2));
            const float mn = fmaxf(m_run[hh], mx[hh]);
            alpha[hh] = mn == -INFINITY ? 1.0f : nv_exp2(m_run[hh] - mn);
            m_run[hh] = mn;
            mx[hh] = mn == -INFINITY ? 0.0f : mn; /* the exponent's offset */
        }
        /* pw[jj][hh] = keys 8 jj + 2 t, + 1 of row half hh */
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
    };

    /* The warpgroup's tiles 0 .. jw: S(j) and O += P(j - 1) V(j - 1) in
     * flight together, the softmax of S(j) under the second, then O's
     * rescale by S(j)'s factor; its barriers past jw + 1 alone. */
    if (jw >= 0) {
        step(0);
        {
            float sc[32], alpha[2];
            uint32_t pw[8][2];
            issue_s(sc, 0);
            wg_wait<0>();
            wg_pin(sc);
            softmax(sc, 0, pw, alpha);
            wg_p_frags(pw, pa);
        }
        for (int j = 1; j <= jw; ++j) {
            float sc[32], alpha[2];
            uint32_t pw[8][2], pn[4][4];
            step(j);
            issue_s(sc, j);
            issue_pv(j - 1);
            wg_wait<1>();
            wg_pin(sc);
            softmax(sc, j, pw, alpha);
            pv_done();
            /* a factor of 1 (the rows' maxima held) changes no bit */
            if (mla_wave_any(alpha[0] != 1.0f || alpha[1] != 1.0f)) {
#pragma unroll
                for (int e = 0; e < 64; ++e)
                    o[e] *= alpha[(e % 4) / 2];
            }
            wg_p_frags(pw, pn);
#pragma unroll
            for (int kk = 0; kk < 4; ++kk)
                wg_move(pa[kk], pn[kk]);
        }
        step(jw + 1);
        issue_pv(jw);
        pv_done();
    }
    for (int j = jw >= 0 ? jw + 2 : 0; j <= nt; ++j)
        step(j);

    if (jw < 0)
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
