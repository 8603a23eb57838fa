/* What the bodies of the HIP expanded attention (hip/attention_expanded.hip)
 * share: the kernel's descriptor, the element access by run-time dtype, the
 * rows of a padding sequence, the exact three-way bf16 split of an fp32 key
 * value, and the plain fp32-FMA body (the always-correct path: every device
 * pass, every shape the tiles hold, f32 q).
 *
 * Rows of a block: query rows q0 .. q0 + BQ - 1 of sequence s, head h; row
 * i sits at position p_i = c - n + q0 + i (n rows, c = ctx[s] keys, the
 * chunk's rows last) and sees keys 0 .. p_i, which are the gathered rows
 * key0[s] .. key0[s] + p_i of the workspace. */
#ifndef MLA_HIP_ATTENTION_EXPANDED_COMMON_H
#define MLA_HIP_ATTENTION_EXPANDED_COMMON_H

#include <math.h>

#include "hip/attention_traits.h" /* first: the device pass (MLA_ATT_MATRIX_KIND) */

#include "core/attention_expanded.h"

namespace
{

struct exp_desc {
    const void *qn, *qp, *kv, *rows;
    void *o;
    float *lse;
    const int32_t *cu, *key0, *ctx;
    int64_t qn_s0, qn_s1, qn_s2, qp_s0, qp_s1, qp_s2, o_s0, o_s1, o_s2, lse_s0, lse_s1;
    int32_t q_dt, kv_dt, rows_dt, o_dt;
    int32_t nope, R, V, L, H, N, S, qblocks;
    int32_t hg; /* heads a group of the grid's order (ex_block_of) */
    /* matrix bodies: pieces of k_pe (1: bf16 rows; 3: f32 rows, split
     * exactly into lo + mid + hi bf16), q rows in 16-byte chunks (both q
     * views with unit last stride and 16-byte aligned rows) */
    int32_t P, q_vec;
    float scale, ss2; /* softmax scale; times log2 e (the matrix bodies) */
};

MLA_DEV float ex_ld(const void *p, int64_t off, int dt)
{
    return dt == MLA_DTYPE_F32 ? load_value<MLA_DTYPE_F32>(p, off)
                               : load_value<MLA_DTYPE_BF16>(p, off);
}

MLA_DEV void ex_st(void *p, int64_t off, float v, int dt)
{
    if (dt == MLA_DTYPE_F32)
        store_value<MLA_DTYPE_F32>(p, off, v, 1);
    else
        store_value<MLA_DTYPE_BF16>(p, off, v, 1);
}

/* Element i (< nope + R) of the q row of (row r, head h), dims ordered as
 * in the key rows of the body that asks (rope_first: [q_pe | q_nope]). */
MLA_DEV float ex_q(const exp_desc &d, int64_t r, int h, int i, bool rope_first)
{
    const int rope_at = rope_first ? 0 : d.nope, nope_at = rope_first ? d.R : 0;
    return i >= rope_at && i < rope_at + d.R
               ? ex_ld(d.qp, r * d.qp_s0 + h * d.qp_s1 + (i - rope_at) * d.qp_s2, d.q_dt)
               : ex_ld(d.qn, r * d.qn_s0 + h * d.qn_s1 + (i - nope_at) * d.qn_s2, d.q_dt);
}

/* Chunk c (8 values, bf16) of the [q_pe | q_nope] row of (row r, head h):
 * one 16-byte load where both q views allow it (d.q_vec), else per value
 * (rounded once to bf16, the matrix bodies' q). */
MLA_DEV mla_u32x4 ex_q_chunk(const exp_desc &d, int64_t r, int h, int c)
{
    const int rc = d.R / 8;
    if (d.q_vec) {
        const uint16_t *src =
            c < rc ? static_cast<const uint16_t *>(d.qp) + r * d.qp_s0 + h * d.qp_s1 + 8 * c
                   : static_cast<const uint16_t *>(d.qn) + r * d.qn_s0 + h * d.qn_s1 + 8 * (c - rc);
        return *reinterpret_cast<const mla_u32x4 *>(src);
    }
    mla_u32x4 w = {{0, 0, 0, 0}};
#pragma unroll
    for (int j = 0; j < 8; ++j)
        w.v[j / 2] |= mla_fb_f32_to_bf16(ex_q(d, r, h, 8 * c + j, true)) << (16 * (j % 2));
    return w;
}

/* A padding sequence's rows of the block (c = 0): o = 0, lse = -inf. */
MLA_DEV void ex_padding(const exp_desc &d, int64_t r0, int h, int rows, int nthreads)
{
    const int tid = (int)threadIdx.x, V = d.V;
    for (int e = tid; e < rows * V; e += nthreads)
        ex_st(d.o, (r0 + e / V) * d.o_s0 + h * d.o_s1 + (e % V) * d.o_s2, 0.0f, d.o_dt);
    if (d.lse && tid < rows)
        d.lse[(r0 + tid) * d.lse_s0 + h * d.lse_s1] = -INFINITY;
}

/* x = hi + mid + lo exactly, each a bf16 (bits in the low half): hi = x
 * rounded, mid = (x - hi) rounded, lo = the rest; x - hi and its rest are
 * exact in fp32, and the rest of 24 significant bits after two 8-bit
 * roundings fits in 8 (below bf16's normal range, under 2^-133 absolute,
 * it may round). hi alone for a non-finite x. */
[[maybe_unused]] MLA_DEV void ex_split3(float x, uint32_t &hi, uint32_t &mid, uint32_t &lo)
{
    hi = mla_fb_f32_to_bf16(x);
    const float h = mla_fb_bf16_to_f32((uint16_t)hi);
    if (h - h != 0.0f) {
        mid = lo = 0;
        return;
    }
    const float r = x - h;
    mid = mla_fb_f32_to_bf16(r);
    lo = mla_fb_f32_to_bf16(r - mla_fb_bf16_to_f32((uint16_t)mid));
}

/* Four f32 values (x, one 16-byte chunk) split as ex_split3, packed in
 * bf16 pairs: p[0] the lo pieces, p[1] mid, p[2] hi, values 0-1 in word 0
 * and 2-3 in word 1 of each. */
[[maybe_unused]] MLA_DEV void ex_split3x4(const mla_u32x4 &x, uint32_t (&p)[3][2])
{
#pragma unroll
    for (int j = 0; j < 2; ++j) {
        uint32_t h0, m0, l0, h1, m1, l1;
        ex_split3(mla_fb_float(x.v[2 * j]), h0, m0, l0);
        ex_split3(mla_fb_float(x.v[2 * j + 1]), h1, m1, l1);
        p[0][j] = l0 | (l1 << 16), p[1][j] = m0 | (m1 << 16), p[2][j] = h0 | (h1 << 16);
    }
}

/* ------------------------------------------------------------ FMA body */

constexpr int kExFmaRows = 8, kExFmaKeys = 16, kExFmaThreads = kExFmaRows * kExFmaKeys;
constexpr int kExDqMax = 256, kExVMax = 192; /* what the FMA tiles hold */
/* The grid order's group of heads (ex_block_of): half of Hopper's 50 MB
 * L2; MI300X's 4 MB L2 of an XCD sits in front of a 256 MB Infinity Cache. */
constexpr int64_t kExL2Group = (int64_t)24 << 20;

/* Shared memory of the FMA body, floats: Q [8][256], K [16][256], V [16][192],
 * O [8][192], S [8][16], the rows' max, sum and rescale factor. */
constexpr int kExFmaSmem =
    4 * (kExFmaRows * kExDqMax + kExFmaKeys * kExDqMax + kExFmaKeys * kExVMax +
         kExFmaRows * kExVMax + kExFmaRows * kExFmaKeys + 3 * kExFmaRows);

/* Rows q0 .. q0 + 7 of (s, h) by a block of NT >= 128 threads, fp32 FMA.
 * Per tile of 16 keys (0 .. the rows' last position) the keys [K_nope |
 * k_pe] and values in shared memory as fp32, then
 *   S[i][k] = scale * Q[i] . K[k]   (-inf where t > p_i)      a thread per (i, k)
 *   mx' = max(mx, max_k S[i]);  alpha = e^(mx - mx');  P = e^(S - mx')
 *   l = l alpha + sum_k P[i][k]                                  a thread per row
 *   O[i][j] = alpha O[i][j] + sum_k P[i][k] V[k][j]              threads over (i, j)
 * and o = O / l, lse = mx + ln l at the end (the CPU kernel's recurrence;
 * its sums in a fixed order). Every thread of the block calls it. */
template <int NT>
MLA_DEV void ex_fma_rows(const exp_desc &d, int s, int h, int64_t q0, unsigned char *smem)
{
    static_assert(NT >= kExFmaThreads, "a thread per (row, key)");
    constexpr int BQ = kExFmaRows, BK = kExFmaKeys;
    float *Q = reinterpret_cast<float *>(smem), *K = Q + BQ * kExDqMax;
    float *Vt = K + BK * kExDqMax, *O = Vt + BK * kExVMax, *S = O + BQ * kExVMax;
    float *mx = S + BQ * BK, *l = mx + BQ, *alpha = l + BQ;
    const int tid = (int)threadIdx.x;
    const int64_t r0 = d.cu[s], n = d.cu[s + 1] - r0, c = d.ctx[s];
    if (q0 >= n)
        return;
    const int rows = (int)(n - q0 < BQ ? n - q0 : BQ), DQ = d.nope + d.R, V = d.V;
    if (c == 0) {
        ex_padding(d, r0 + q0, h, rows, NT);
        return;
    }
    const int64_t p0 = c - n + q0, pmax = p0 + rows - 1, key0 = d.key0[s];
    idx_sync(); /* the block's earlier rows are done with the tiles */
    for (int e = tid; e < rows * DQ; e += NT)
        Q[e] = ex_q(d, r0 + q0 + e / DQ, h, e % DQ, false);
    for (int e = tid; e < BQ * V; e += NT)
        O[e] = 0.0f;
    if (tid < BQ)
        mx[tid] = -INFINITY, l[tid] = 0.0f;
    const int64_t hk = (int64_t)h * (d.nope + V);
    for (int64_t t0 = 0; t0 <= pmax; t0 += BK) {
        const int nk = (int)(pmax + 1 - t0 < BK ? pmax + 1 - t0 : BK);
        idx_sync(); /* the previous tile's readers are done */
        for (int e = tid; e < nk * DQ; e += NT) {
            const int64_t key = key0 + t0 + e / DQ, i = e % DQ;
            K[e] = i < d.nope ? ex_ld(d.kv, key * d.N + hk + i, d.kv_dt)
                              : ex_ld(d.rows, key * (d.L + d.R) + d.L + (i - d.nope), d.rows_dt);
        }
        for (int e = tid; e < nk * V; e += NT)
            Vt[e] = ex_ld(d.kv, (key0 + t0 + e / V) * d.N + hk + d.nope + e % V, d.kv_dt);
        idx_sync();
        if (tid < BQ * BK) { /* S: a thread per (row, key) */
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
        for (int e = tid; e < rows * V; e += NT) {
            const int i = e / V, j = e % V;
            float acc = alpha[i] * O[e];
            for (int k = 0; k < nk; ++k)
                acc = fmaf(S[i * BK + k], Vt[k * V + j], acc);
            O[e] = acc;
        }
    }
    idx_sync();
    for (int e = tid; e < rows * V; e += NT) {
        const int i = e / V;
        const int64_t r = r0 + q0 + i;
        ex_st(d.o, r * d.o_s0 + h * d.o_s1 + (e % V) * d.o_s2, O[e] / l[i], d.o_dt);
    }
    if (d.lse && tid < rows)
        d.lse[(r0 + q0 + tid) * d.lse_s0 + h * d.lse_s1] = mx[tid] + logf(l[tid]);
}

/* The block's sequence, head and query block in a grid of qblocks x H x S
 * blocks: groups of hg heads one after another, and in a group the query
 * blocks of the highest positions first (they have the most keys), each
 * over the group's heads and sequences. The blocks that run together then
 * read the keys and values of a few heads, which stay in L2 (a head's are
 * read by every query block of it), and a group's last wave of short blocks
 * runs beside the next group's long ones. */
MLA_DEV void ex_block_of(const exp_desc &d, int &s, int &h, int &qb)
{
    const int64_t per = (int64_t)d.qblocks * d.hg * d.S; /* blocks of a whole group */
    const int64_t gi = blockIdx.x / per, b = blockIdx.x % per;
    const int64_t hn = d.H - gi * d.hg < d.hg ? d.H - gi * d.hg : d.hg, hs = hn * d.S;
    qb = d.qblocks - 1 - (int)(b / hs);
    h = (int)(gi * d.hg + b % hs % hn);
    s = (int)(b % hs / hn);
}

} // namespace

#endif
