/* The NVIDIA matrix body of the expanded attention (hip/attention_expanded.hip):
 * causal flash attention after FlashAttention-2's forward schedule, on
 * mma.sync m16n8k16 bf16 -> f32 with operands by ldmatrix (hip/mfma.h).
 *
 * A block is BQ = 64 RG query rows of one (sequence, head), 4 warps, warp w
 * owning rows 16 RG w .. + 16 RG - 1 (RG row groups of 16). Shared memory
 * holds the block's q rows [q_pe | q_nope] once, and one 64-key tile of key
 * rows [k_pe pieces | K_nope] and value rows, filled by cp.async (16-byte
 * chunks of the workspace's gathered rows and decompressed [K_nope | V]):
 *
 *   wait K(j), barrier; issue V(j); S = Q K(j)^T; softmax; wait V(j),
 *   barrier; issue K(j + 1); O = alpha O + P V(j)
 *
 * so the values load under the scores and the next keys under P V. Per
 * tile a warp computes S (RG x 8 accumulator tiles of 16 x 8) over the
 * k-steps of 16 dims, q and keys by ldmatrix x4 from rows padded to an odd
 * number of 16-byte units (the 8 rows of a phase in distinct banks); scales
 * to log2 units (ss2), masks keys past each row's position on the diagonal
 * tiles only, and keeps the running max m and each lane's share of the row
 * sum l of unrounded P = 2^(S - m) (quad shuffles for the max); P rounded
 * to bf16 is the A operand of P V straight from the accumulators (the
 * m16n8 D layout of two key tiles is the m16k16 A layout), V the B operand
 * by ldmatrix.trans. A warp skips the tiles past its last row's position
 * (it still joins the loads and barriers). o = O / l and lse = (m + log2 l)
 * ln 2 after the last tile.
 *
 * Score arithmetic: q and keys are bf16, so every product is exact in fp32
 * and S is an fp32 sum in some order, inside the bound's gamma_{D+6}. f32
 * key rope values (fp8 caches: code x scale) enter as lo + mid + hi, three
 * bf16 pieces that add up to the value exactly, each against the same
 * q_pe: the small pieces' k-steps (lo, mid: below 2^-8 |k| together) come
 * first in every accumulation chain, so the main terms see the roundings
 * they would without them (gamma_{nope+R} over the main terms plus
 * gamma_{nope+3R} 2^-8 over the small ones). */
#ifndef MLA_HIP_ATTENTION_EXPANDED_NV_H
#define MLA_HIP_ATTENTION_EXPANDED_NV_H

#include "hip/attention_expanded_common.h"
#include "hip/attention_nv.h" /* nv_exp2, nv_bf16x2 */

namespace
{

constexpr int kExNvThreads = 128, kExNvKeys = 64;

/* Shared memory of the body: row strides (values) and byte offsets. */
struct exn_smem {
    int QP, KP, VP, qs, ks, vs, raw, total;
};

static __host__ __device__ inline exn_smem exn_layout(int RG, int nope, int R, int V, int P)
{
    exn_smem s;
    s.QP = nope + R + 8;
    s.KP = P * R + nope + 8;
    s.VP = V + 8;
    s.qs = 0;
    s.ks = s.qs + 64 * RG * s.QP * 2;
    s.vs = s.ks + kExNvKeys * s.KP * 2;
    s.raw = s.vs + kExNvKeys * s.VP * 2; /* f32 k_pe as copied (P = 3) */
    s.total = s.raw + (P == 3 ? kExNvKeys * R * 4 : 0);
    return s;
}

#if MLA_ATT_MATRIX_KIND == 1

/* The key rows of the tile at t0 (keys past pmax: zeros): K_nope at column
 * P R, k_pe at 0 (bf16 rows) or as fp32 into the raw rows (converted by
 * exn_convert). Commits a group. */
MLA_DEV void exn_issue_k(const exp_desc &d, const exn_smem &L, unsigned char *smem, int64_t key0,
                         int t0, int pmax, int64_t hk)
{
    const int nc = d.nope / 8, rc = d.P == 3 ? d.R / 4 : d.R / 8, per = nc + rc;
    uint16_t *Ks = reinterpret_cast<uint16_t *>(smem + L.ks);
    for (int it = (int)threadIdx.x; it < kExNvKeys * per; it += kExNvThreads) {
        const int k = it / per, c = it - k * per;
        const bool valid = t0 + k <= pmax;
        const int64_t key = key0 + t0 + k;
        if (c < nc) {
            const uint16_t *src = static_cast<const uint16_t *>(d.kv) + key * d.N + hk + 8 * c;
            cp_async<16>(Ks + k * L.KP + d.P * d.R + 8 * c, valid ? src : d.kv, valid);
        } else if (d.P == 1) {
            const uint16_t *src =
                static_cast<const uint16_t *>(d.rows) + key * (d.L + d.R) + d.L + 8 * (c - nc);
            cp_async<16>(Ks + k * L.KP + 8 * (c - nc), valid ? src : d.rows, valid);
        } else {
            const float *src =
                static_cast<const float *>(d.rows) + key * (d.L + d.R) + d.L + 4 * (c - nc);
            cp_async<16>(smem + L.raw + (k * d.R + 4 * (c - nc)) * 4, valid ? src : d.rows, valid);
        }
    }
    cp_async_commit();
}

/* This thread's raw k_pe chunks (its own copies, landed) -> lo, mid, hi at
 * columns 0, R, 2R of the key rows. */
MLA_DEV void exn_convert(const exp_desc &d, const exn_smem &L, unsigned char *smem)
{
    const int nc = d.nope / 8, rc = d.R / 4, per = nc + rc;
    uint16_t *Ks = reinterpret_cast<uint16_t *>(smem + L.ks);
    for (int it = (int)threadIdx.x; it < kExNvKeys * per; it += kExNvThreads) {
        const int k = it / per, c = it - k * per - nc;
        if (c < 0)
            continue;
        const mla_u32x4 x =
            *reinterpret_cast<const mla_u32x4 *>(smem + L.raw + (k * d.R + 4 * c) * 4);
        uint32_t p[3][2];
        ex_split3x4(x, p);
#pragma unroll
        for (int q = 0; q < 3; ++q) {
            uint32_t *dst = reinterpret_cast<uint32_t *>(Ks + k * L.KP + q * d.R + 4 * c);
            dst[0] = p[q][0], dst[1] = p[q][1];
        }
    }
}

/* The value rows of the tile at t0; commits a group. */
MLA_DEV void exn_issue_v(const exp_desc &d, const exn_smem &L, unsigned char *smem, int64_t key0,
                         int t0, int pmax, int64_t hk)
{
    const int per = d.V / 8;
    uint16_t *Vs = reinterpret_cast<uint16_t *>(smem + L.vs);
    for (int it = (int)threadIdx.x; it < kExNvKeys * per; it += kExNvThreads) {
        const int k = it / per, c = it - k * per;
        const bool valid = t0 + k <= pmax;
        const uint16_t *src =
            static_cast<const uint16_t *>(d.kv) + (key0 + t0 + k) * d.N + hk + d.nope + 8 * c;
        cp_async<16>(Vs + k * L.VP + 8 * c, valid ? src : d.kv, valid);
    }
    cp_async_commit();
}

/* The block's q rows [q_pe | q_nope] as bf16, zero past its rows. */
MLA_DEV void exn_stage_q(const exp_desc &d, const exn_smem &L, unsigned char *smem, int64_t r0,
                         int h, int BQ, int rows)
{
    const int per = (d.nope + d.R) / 8;
    uint16_t *Qs = reinterpret_cast<uint16_t *>(smem + L.qs);
    for (int it = (int)threadIdx.x; it < BQ * per; it += kExNvThreads) {
        const int r = it / per, c = it - r * per;
        const mla_u32x4 zero = {{0, 0, 0, 0}};
        const mla_u32x4 w = r < rows ? ex_q_chunk(d, r0 + r, h, c) : zero;
        *reinterpret_cast<mla_u32x4 *>(Qs + r * L.QP + 8 * c) = w;
    }
}

/* acc[rr][n], acc[rr][n + 1] += A_rr B for every row group rr, B the two
 * 8-column halves of one ldmatrix x4 (b), A_rr = a(rr). */
template <int RG, int X, typename A>
MLA_DEV void exn_mma_pair(float (&acc)[RG][X][4], int n, const uint32_t (&b)[4], A &&a)
{
#pragma unroll
    for (int rr = 0; rr < RG; ++rr) {
        mla_mma_bf16_16x8x16(acc[rr][n], a(rr), &b[0]);
        mla_mma_bf16_16x8x16(acc[rr][n + 1], a(rr), &b[2]);
    }
}

/* Rows q0 .. q0 + 64 RG - 1 of (s, h), V values a row; one call per block. */
template <int RG, int V>
MLA_DEV void exn_rows(const exp_desc &d, int s, int h, int64_t q0, unsigned char *smem)
{
    constexpr int BQ = 64 * RG, NK = kExNvKeys, NT = NK / 8, VN = V / 8;
    static_assert(V % 16 == 0 && V <= 128, "value columns in pairs of 8-column tiles");
    const int64_t r0 = d.cu[s], n = d.cu[s + 1] - r0, c = d.ctx[s];
    if (q0 >= n)
        return;
    const int rows = (int)(n - q0 < BQ ? n - q0 : BQ);
    if (c == 0) {
        ex_padding(d, r0 + q0, h, rows, kExNvThreads);
        return;
    }
    const exn_smem L = exn_layout(RG, d.nope, d.R, V, d.P);
    const int p0 = (int)(c - n + q0), pmax = p0 + rows - 1;
    const int64_t key0 = d.key0[s], hk = (int64_t)h * (d.nope + V);
    exn_issue_k(d, L, smem, key0, 0, pmax, hk);
    exn_stage_q(d, L, smem, r0 + q0, h, BQ, rows);

    const int lane = (int)threadIdx.x % 32, w = (int)threadIdx.x / 32, g = lane / 4, t = lane % 4;
    const int rb = 16 * RG * w; /* the warp's first row */
    const bool warp_rows = rb < rows;
    const int w_lo = p0 + rb, w_hi = p0 + rb + 16 * RG - 1 < pmax ? p0 + rb + 16 * RG - 1 : pmax;
    float o[RG][VN][4] = {}, m_run[RG][2], l_run[RG][2];
#pragma unroll
    for (int rr = 0; rr < RG; ++rr)
#pragma unroll
        for (int hh = 0; hh < 2; ++hh)
            m_run[rr][hh] = -INFINITY, l_run[rr][hh] = 0.0f;
    /* ldmatrix row addresses (bytes): q rows rb + 16 rr + lane % 16 at dims
     * 8 (lane / 16); keys (lane % 8) + 8 (lane / 16) at dims 8 ((lane / 8) % 2);
     * values keys (lane % 8) + 8 ((lane / 8) % 2) at columns 8 (lane / 16) */
    const mla_saddr qa =
        mla_smem_addr(smem + L.qs) + 2 * ((rb + lane % 16) * L.QP + 8 * (lane / 16));
    const mla_saddr ka = mla_smem_addr(smem + L.ks) +
                         2 * ((lane % 8 + 8 * (lane / 16)) * L.KP + 8 * ((lane / 8) % 2));
    const mla_saddr va = mla_smem_addr(smem + L.vs) +
                         2 * ((lane % 8 + 8 * ((lane / 8) % 2)) * L.VP + 8 * (lane / 16));
    const int RS = d.R / 16, PRS = d.P * RS, KSTEPS = PRS + d.nope / 16;

    for (int t0 = 0; t0 <= pmax; t0 += NK) {
        cp_async_wait<0>();
        if (d.P == 3)
            exn_convert(d, L, smem);
        idx_sync(); /* K(j) in; every warp is done with V(j - 1) */
        exn_issue_v(d, L, smem, key0, t0, pmax, hk);
        const bool live = warp_rows && t0 <= w_hi;
        uint32_t pa[RG][NK / 16][4]; /* P as A fragments, key steps of 16 */
        float alpha[RG][2];
        if (live) {
            float sc[RG][NT][4] = {};
#pragma unroll 2
            for (int st = 0; st < KSTEPS; ++st) {
                /* q's dims: q_pe against each rope piece, then q_nope */
                const int qcol = st < PRS ? 16 * (st % RS) : 16 * (st - PRS + RS);
                uint32_t a[RG][4];
#pragma unroll
                for (int rr = 0; rr < RG; ++rr)
                    mla_ldsm_x4_at(a[rr], qa + 2 * (16 * rr * L.QP + qcol));
#pragma unroll
                for (int kp = 0; kp < NK / 16; ++kp) {
                    uint32_t b[4];
                    mla_ldsm_x4_at(b, ka + 2 * (16 * kp * L.KP + 16 * st));
                    exn_mma_pair(sc, 2 * kp, b, [&](int rr) { return a[rr]; });
                }
            }
            const bool diag = t0 + NK - 1 > w_lo;
#pragma unroll
            for (int rr = 0; rr < RG; ++rr) {
                float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
                for (int nt = 0; nt < NT; ++nt)
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        /* key t0 + k past row r (its position p0 + r, none past rows) */
                        const int k = 8 * nt + 2 * t + (e & 1), r = rb + 16 * rr + g + 8 * (e >> 1);
                        const float x = sc[rr][nt][e] * d.ss2;
                        sc[rr][nt][e] = diag && (t0 + k > p0 + r || r >= rows) ? -INFINITY : x;
                        mx[e >> 1] = fmaxf(mx[e >> 1], sc[rr][nt][e]);
                    }
#pragma unroll
                for (int hh = 0; hh < 2; ++hh) {
                    mx[hh] = fmaxf(mx[hh], mla_shfl_xor(mx[hh], 1));
                    mx[hh] = fmaxf(mx[hh], mla_shfl_xor(mx[hh], 2));
                    const float mn = fmaxf(m_run[rr][hh], mx[hh]);
                    alpha[rr][hh] = mn == -INFINITY ? 1.0f : nv_exp2(m_run[rr][hh] - mn);
                    m_run[rr][hh] = mn;
                    mx[hh] = mn == -INFINITY ? 0.0f : mn; /* the exponent's offset */
                }
                float psum[2] = {0.0f, 0.0f};
#pragma unroll
                for (int nt = 0; nt < NT; ++nt) {
                    float p[4];
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        p[e] = nv_exp2(sc[rr][nt][e] - mx[e >> 1]);
                        psum[e >> 1] += p[e];
                    }
                    /* D of key tile nt: rows g, g + 8 x keys 2t, 2t + 1 = A's
                     * words 0, 1 (even nt) or 2, 3 (odd nt) of key step nt / 2 */
                    pa[rr][nt / 2][2 * (nt % 2)] = nv_bf16x2(p[0], p[1]);
                    pa[rr][nt / 2][2 * (nt % 2) + 1] = nv_bf16x2(p[2], p[3]);
                }
#pragma unroll
                for (int hh = 0; hh < 2; ++hh)
                    l_run[rr][hh] = l_run[rr][hh] * alpha[rr][hh] + psum[hh];
            }
        }
        cp_async_wait<0>();
        idx_sync(); /* V(j) in; every warp is done with K(j) */
        if (t0 + NK <= pmax)
            exn_issue_k(d, L, smem, key0, t0 + NK, pmax, hk);
        if (live) {
#pragma unroll
            for (int rr = 0; rr < RG; ++rr)
#pragma unroll
                for (int nn = 0; nn < VN; ++nn)
#pragma unroll
                    for (int e = 0; e < 4; ++e)
                        o[rr][nn][e] *= alpha[rr][e >> 1];
#pragma unroll
            for (int kk = 0; kk < NK / 16; ++kk)
#pragma unroll
                for (int np = 0; np < VN / 2; ++np) {
                    uint32_t b[4];
                    mla_ldsm_x4_trans_at(b, va + 2 * (16 * kk * L.VP + 16 * np));
                    exn_mma_pair(o, 2 * np, b, [&](int rr) { return pa[rr][kk]; });
                }
        }
    }

#pragma unroll
    for (int rr = 0; rr < RG; ++rr)
#pragma unroll
        for (int hh = 0; hh < 2; ++hh) {
            float l = l_run[rr][hh];
            l += mla_shfl_xor(l, 1);
            l += mla_shfl_xor(l, 2);
            const int r = rb + 16 * rr + g + 8 * hh;
            if (r >= rows)
                continue;
            const int64_t row = r0 + q0 + r;
#pragma unroll
            for (int nn = 0; nn < VN; ++nn)
#pragma unroll
                for (int e = 0; e < 2; ++e)
                    ex_st(d.o, row * d.o_s0 + h * d.o_s1 + (8 * nn + 2 * t + e) * d.o_s2,
                          o[rr][nn][2 * hh + e] / l, d.o_dt);
            if (d.lse && t == 0)
                d.lse[row * d.lse_s0 + h * d.lse_s1] = (m_run[rr][hh] + log2f(l)) * kLn2;
        }
}

#endif

} // namespace

#endif
