/* The sm_90a body of the expanded attention (hip/attention_expanded.hip):
 * causal flash attention on Hopper's warpgroup matrix units for DeepSeek's
 * heads (nope 128, R 64, v 128).
 *
 * A block is 128 query rows of one (sequence, head), 384 threads in three
 * warpgroups joined by mbarriers only. Shared memory, in the 128-byte
 * swizzle wgmma reads (hip/wgmma.h): Q [q_pe | q_nope] (3 blocks of 64 dims
 * x 128 rows), NS stages of a 64-key tile's key rows [k_pe pieces |
 * K_nope] (P + 2 blocks of 64 dims) and NS of its value rows V (2 blocks of
 * 64 columns).
 *   The producer (warpgroup 0) puts tile j's keys, then its values, into
 * stage j % NS once both consumers have released the tile NS before:
 * cp.async of 16-byte chunks of the workspace's gathered rows and
 * decompressed [K_nope | V] (keys past the block's last position zero),
 * the stage's full mbarrier arrived on as they land.
 *   Each consumer (warpgroups 1, 2: 64 rows) stages its Q rows, then per
 * tile j of its own:
 *
 *   wait for V(j - 1) and K(j); issue S(j) = Q K(j)^T, then O += P(j - 1)
 *   V(j - 1); wait for S(j), release K(j); softmax(j) while the second
 *   runs; wait, release V(j - 1); O *= alpha(j)
 *
 * (FlashAttention-3's intra-warpgroup overlap), so the exponentials run
 * under the matrix units. S (64 x 64, f32) is wgmma m64n64k16 with Q and K
 * from shared memory, a fixed chain of 4 (P + 2) k-steps; the softmax
 * scales it to log2 units (ss2), masks keys past each row's position on the
 * diagonal tiles only, keeps the running max m and each thread's share of
 * the row sum l of unrounded P = 2^(S - m) (quad shuffles), and rounds P to
 * bf16 into wgmma's A fragment (the accumulator layout of S is the A
 * layout, no exchange); O (64 x 128) += P V is wgmma m64n128k16 with A from
 * registers and V MN-major. A consumer computes only its tiles (through its
 * last row's position) and rows (through the block's) and releases the
 * later tiles unread. o = O / l and lse = (m + log2 l) ln 2 after its last
 * tile.
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
#if defined(__CUDACC__) && MLA_WG_BF16 && MLA_IDX_BULK && MLA_ATT_MATRIX_KIND == 1
#define MLA_EXW 1
#else
#define MLA_EXW 0
#endif

namespace
{

/* 128 producer threads (warpgroup 0), two consumer warpgroups of 64 rows */
constexpr int kExwThreads = 384, kExwRows = 128, kExwKeys = 64, kExwTpk = 2;
constexpr int kExwNope = 128, kExwR = 64, kExwV = 128;
constexpr int kExwBlock = kExwKeys * 128; /* 64 rows x 64 bf16 dims */
enum { EXW_BAR_Q = 1 };                   /* named barriers EXW_BAR_Q + consumer warpgroup */

/* Shared memory of the body for P pieces of k_pe: the mbarriers (full and
 * empty of every key and value stage), then from the next 1024-byte
 * boundary Q, NS key stages (P = 3: each with the f32 k_pe as copied, RAW)
 * and NS value stages; NS = 3, or 2 for f32 rows (three of their stages
 * would not fit). */
template <int P> struct exw_geom {
    static constexpr int NS = P == 1 ? 3 : 2;
    static constexpr int QB = (kExwR + kExwNope) / 64, KB = (P * kExwR + kExwNope) / 64;
    static constexpr int VB = kExwV / 64;
    static constexpr int QBYTES = QB * 2 * kExwBlock; /* 128 rows a block */
    static constexpr int RAW = KB * kExwBlock;
    static constexpr int KSTAGE = RAW + (P == 3 ? kExwKeys * kExwR * 4 : 0);
    static constexpr int VSTAGE = VB * kExwBlock;
    static constexpr int MBAR = 4 * NS * 8;
    static constexpr int TOTAL = MBAR + 1024 + QBYTES + NS * (KSTAGE + VSTAGE);
};

/* Byte offset of chunk c (8 values) of row r in a swizzled block of rows of
 * 128 bytes. */
MLA_DEV uint32_t exw_swz(int r, int c)
{
    return (uint32_t)r * 128u + (((uint32_t)c ^ ((uint32_t)r & 7u)) << 4);
}

#if MLA_EXW

/* A producer thread's share of every tile: two threads a key, key k =
 * thread / 2 and the chunks q, q + 2, ... of its K_nope, V and k_pe rows (q
 * = thread % 2), so that the destinations are fixed for the block and a
 * tile is one row pointer step: the copies cost their count. */
struct exw_lane {
    int k, q;
    const uint16_t *kv;        /* the [K_nope | V] of (key0 + k, head) */
    const unsigned char *rope; /* the k_pe of row key0 + k */
    int64_t kv_step, rope_step; /* one key on */
};

template <int P> MLA_DEV exw_lane exw_lane_of(const exp_desc &d, int64_t key0, int64_t hk)
{
    exw_lane l;
    l.k = (int)threadIdx.x / kExwTpk, l.q = (int)threadIdx.x % kExwTpk;
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
    static_assert(128 == kExwTpk * kExwKeys, "the producer's threads a key");
    const bool valid = t0 + l.k <= pmax;
    const uint16_t *kv = l.kv + t0 * l.kv_step;
    const unsigned char *rope = l.rope + t0 * l.rope_step;
#pragma unroll
    for (int i = 0; i < kExwNope / 8 / kExwTpk; ++i) {
        const int c = l.q + kExwTpk * i; /* chunk c of 16 in K_nope */
        const uint32_t at = (uint32_t)(c / 8) * kExwBlock + exw_swz(l.k, c % 8);
        cp_async<16>(ks + P * kExwBlock + at, valid ? kv + 8 * c : d.kv, valid);
    }
#pragma unroll
    for (int i = 0; i < kExwR * (P == 3 ? 4 : 2) / 16 / kExwTpk; ++i) {
        const int r = l.q + kExwTpk * i; /* chunk r of the k_pe row */
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
    for (int i = 0; i < kExwV / 8 / kExwTpk; ++i) {
        const int c = l.q + kExwTpk * i; /* chunk c of 16 in V */
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
    for (int i = 0; i < kExwR / 4 / kExwTpk; ++i) {
        const int r = l.q + kExwTpk * i; /* values 4r .. 4r + 3: half of chunk r / 2 */
        const mla_u32x4 x =
            *reinterpret_cast<const mla_u32x4 *>(ks + G::RAW + l.k * kExwR * 4 + 16 * r);
        uint32_t p[3][2];
        ex_split3x4(x, p);
#pragma unroll
        for (int q = 0; q < 3; ++q) {
            uint32_t *dst = reinterpret_cast<uint32_t *>(ks + q * kExwBlock + exw_swz(l.k, r / 2) +
                                                         8 * (r % 2));
            dst[0] = p[q][0], dst[1] = p[q][1];
        }
    }
}

/* A consumer warpgroup's 64 q rows from rb (of the block's rows from r0)
 * [q_pe | q_nope] as bf16 into Q, zero past the block's rows; wt: the
 * thread in the warpgroup. */
MLA_DEV void exw_stage_q(const exp_desc &d, unsigned char *Q, int64_t r0, int h, int rows, int rb,
                         int wt)
{
    constexpr int PER = (kExwNope + kExwR) / 8;
    for (int it = wt; it < 64 * PER; it += 128) {
        const int r = rb + it / PER, c = it % PER;
        const mla_u32x4 zero = {{0, 0, 0, 0}};
        const mla_u32x4 w = r < rows ? ex_q_chunk(d, r0 + r, h, c) : zero;
        *reinterpret_cast<mla_u32x4 *>(Q + (c / 8) * 2 * kExwBlock + exw_swz(r, c % 8)) = w;
    }
}

/* The mbarriers of the stages: a key or value stage is full when each
 * producer thread's copies of it have landed (P = 3: and it has converted
 * its k_pe), empty when each consumer thread is done reading it. */
struct exw_bars {
    uint64_t *full_k, *empty_k, *full_v, *empty_v;
};

/* The producer warpgroup: tile j's keys into key stage j % NS, then its
 * values into value stage j % NS, each once every consumer is done with
 * the tile NS before. */
template <int P>
MLA_DEV void exw_produce(const exp_desc &d, const exw_lane &l, const exw_bars &b,
                         unsigned char *kst, unsigned char *vst, int nt, int pmax)
{
    using G = exw_geom<P>;
    for (int j = 0; j < nt; ++j) {
        const int st = j % G::NS;
        const uint32_t free = ((uint32_t)(j / G::NS) & 1u) ^ 1u; /* the round before's parity */
        unsigned char *ks = kst + st * G::KSTAGE;
        mbar_wait(b.empty_k + st, free);
        exw_issue_k<P>(d, l, ks, kExwKeys * j, pmax);
        if constexpr (P == 3) {
            cp_async_commit();
            cp_async_wait<0>();
            exw_convert<P>(l, ks);
            fence_proxy_async(); /* the pieces, for wgmma */
            mbar_arrive(b.full_k + st);
        } else {
            cp_async_mbar_arrive(b.full_k + st);
        }
        mbar_wait(b.empty_v + st, free);
        exw_issue_v(d, l, vst + st * G::VSTAGE, kExwKeys * j, pmax);
        cp_async_mbar_arrive(b.full_v + st);
    }
    /* the consumers may still wait for the last copies: they land before
     * the producer's warps exit */
    cp_async_commit();
    cp_async_wait<0>();
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
    uint64_t *mb = reinterpret_cast<uint64_t *>(smem);
    const exw_bars bars = {mb, mb + G::NS, mb + 2 * G::NS, mb + 3 * G::NS};
    /* the swizzle XORs address bits: the tiles start 1024-byte aligned */
    unsigned char *Q = smem + G::MBAR;
    Q += (1024u - (wg_addr(Q) & 1023u)) & 1023u;
    unsigned char *kst = Q + G::QBYTES, *vst = kst + G::NS * G::KSTAGE;
    const int p0 = (int)(c - n + q0), pmax = p0 + rows - 1, nt = pmax / kExwKeys + 1;
    if (threadIdx.x == 0) {
        for (int i = 0; i < G::NS; ++i) {
            mbar_init(bars.full_k + i, 128);
            mbar_init(bars.full_v + i, 128);
            mbar_init(bars.empty_k + i, 256);
            mbar_init(bars.empty_v + i, 256);
        }
        mbar_init_fence();
    }
    idx_sync();
    if (threadIdx.x < 128) {
        wg_regs_dec<56>();
        const exw_lane lane_ = exw_lane_of<P>(d, d.key0[s], (int64_t)h * (kExwNope + kExwV));
        exw_produce<P>(d, lane_, bars, kst, vst, nt, pmax);
        return;
    }
    wg_regs_inc<224>();

    const int wgi = (int)threadIdx.x / 128 - 1, wt = (int)threadIdx.x % 128;
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
    exw_stage_q(d, Q, r0 + q0, h, rows, rb, wt);
    fence_proxy_async(); /* Q, for the async proxy */
    named_bar_sync(EXW_BAR_Q + wgi, 128);

    /* tile j's keys (values) landed, for the async proxy; this thread done
     * with them */
    const auto wait_k = [&](int j) {
        mbar_wait(bars.full_k + j % G::NS, (uint32_t)(j / G::NS) & 1u);
    };
    const auto wait_v = [&](int j) {
        mbar_wait(bars.full_v + j % G::NS, (uint32_t)(j / G::NS) & 1u);
    };
    const auto done_k = [&](int j) { mbar_arrive(bars.empty_k + j % G::NS); };
    const auto done_v = [&](int j) { mbar_arrive(bars.empty_v + j % G::NS); };
    /* S(j) = Q K(j)^T by a fixed chain of KB x 4 k-steps, one group */
    const auto issue_s = [&](float(&sc)[32], int j) {
        const uint64_t koff = (uint64_t)(((j % G::NS) * G::KSTAGE) >> 4);
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
        const uint64_t voff = (uint64_t)(((j % G::NS) * G::VSTAGE) >> 4);
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
     * rescale by S(j)'s factor; the tiles past jw only released. */
    if (jw >= 0) {
        {
            float sc[32], alpha[2];
            uint32_t pw[8][2];
            wait_k(0);
            fence_proxy_async();
            issue_s(sc, 0);
            wg_wait<0>();
            wg_pin(sc);
            done_k(0);
            softmax(sc, 0, pw, alpha);
            wg_p_frags(pw, pa);
        }
        for (int j = 1; j <= jw; ++j) {
            float sc[32], alpha[2];
            uint32_t pw[8][2], pn[4][4];
            wait_v(j - 1);
            wait_k(j);
            fence_proxy_async();
            issue_s(sc, j);
            issue_pv(j - 1);
            wg_wait<1>();
            wg_pin(sc);
            done_k(j);
            softmax(sc, j, pw, alpha);
            pv_done();
            done_v(j - 1);
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
        wait_v(jw);
        fence_proxy_async();
        issue_pv(jw);
        pv_done();
        done_v(jw);
    }
    for (int j = jw + 1; j < nt; ++j) {
        wait_k(j);
        done_k(j);
        wait_v(j);
        done_v(j);
    }

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
