/* The gfx9 matrix body of the expanded attention (hip/attention_expanded.hip):
 * the schedule of the NVIDIA body (hip/attention_expanded_nv.h) on
 * v_mfma_f32_32x32x8_bf16 (hip/mfma.h), wave64.
 *
 * A block is 128 query rows of one (sequence, head), 4 waves, wave w owning
 * rows 32 w .. 32 w + 31; a lane holds row 32 w + lane % 32 throughout. q
 * stays in registers (its 8-dim k-steps in the MFMA's B layout, loaded
 * once); per 64-key tile
 *
 *   barrier; the tile's registers into LDS; barrier; the next tile's
 *   global loads into registers; S^T = K Q^T; softmax; O^T = V^T P^T
 *
 * so the next tile's loads are in flight under the tile's matrix work. Key
 * rows [k_pe pieces | K_nope] (8-byte reads of 16 lanes fall in distinct
 * banks: rows 2 mod 32 words apart), values transposed (Vt[dim][key], the
 * A operand of O^T read 8 bytes a lane). S^T: two 32 x 32 accumulators (keys
 * x rows, A = key rows from LDS, B = q): a lane holds 16 keys of its row,
 * the other 16 in lane ^ 32, so the row max and sum are register operations
 * and one exchange. P = 2^(S - m) rounded to bf16 is the B operand of O^T
 * as it lies in the accumulators; O^T's accumulators hold one row per lane,
 * so the rescale is lane-local. Masks on the diagonal tiles only; a wave
 * skips the tiles past its last row's position.
 *
 * Instantiated per head shape (q's k-steps and O's tiles in registers):
 * (nope, R, v) = (128, 64, 128) (DeepSeek) and (32, 16, 32); P = 1 (bf16
 * rows) or 3 (f32 rows as lo + mid + hi, the small pieces' k-steps first:
 * the score bound of hip/attention_expanded_nv.h). */
#ifndef MLA_HIP_ATTENTION_EXPANDED_MFMA_H
#define MLA_HIP_ATTENTION_EXPANDED_MFMA_H

#include "hip/attention_expanded_common.h"

namespace
{

template <int NOPE, int R, int V, int P> struct exa_geom {
    static constexpr int NK = 64, BQ = 128, THREADS = 256;
    static constexpr int DK = P * R + NOPE;         /* key row dims */
    static constexpr int KP = DK + 4, VTP = NK + 4; /* row strides, values */
    static constexpr int QS = (NOPE + R) / 8, KS = DK / 8, RS = R / 8, VC = V / 32;
    /* the tile's loads: 16-byte key chunks (K_nope, then k_pe: bf16 or f32),
     * value units of 4 keys x 2 columns (4-byte loads, one 8-byte store per
     * column into Vt) */
    static constexpr int NC = NOPE / 8, KCH = NC + (P == 1 ? R / 8 : R / 4);
    static constexpr int KIT = (NK * KCH + THREADS - 1) / THREADS;
    static constexpr int VU = NK / 4 * (V / 2), VIT = (VU + THREADS - 1) / THREADS;
    static constexpr int VT = NK * KP * 2, TOTAL = VT + V * VTP * 2; /* LDS bytes */
    static_assert(NOPE % 8 == 0 && R % 8 == 0 && V % 32 == 0, "k-steps and column tiles");
};

#if MLA_ATT_MATRIX_KIND == 2

template <class G> struct exa_regs {
    mla_u32x4 k[G::KIT];
    uint32_t v[G::VIT][4];
};

/* The tile at t0 into registers (keys past pmax: zeros). */
template <class G, int NOPE, int R, int V, int P>
MLA_DEV void exa_load(const exp_desc &d, exa_regs<G> &x, int64_t key0, int t0, int pmax, int64_t hk)
{
    const int tid = (int)threadIdx.x;
#pragma unroll
    for (int it = 0; it < G::KIT; ++it) {
        const int u = it * G::THREADS + tid, k = u / G::KCH, c = u % G::KCH;
        x.k[it] = mla_u32x4{{0, 0, 0, 0}};
        if (u >= G::NK * G::KCH || t0 + k > pmax)
            continue;
        const int64_t key = key0 + t0 + k;
        const void *src =
            c < G::NC ? static_cast<const void *>(static_cast<const uint16_t *>(d.kv) + key * d.N +
                                                  hk + 8 * c)
            : P == 1  ? static_cast<const void *>(static_cast<const uint16_t *>(d.rows) +
                                                 key * (d.L + R) + d.L + 8 * (c - G::NC))
                      : static_cast<const void *>(static_cast<const float *>(d.rows) +
                                                 key * (d.L + R) + d.L + 4 * (c - G::NC));
        x.k[it] = *static_cast<const mla_u32x4 *>(src);
    }
#pragma unroll
    for (int it = 0; it < G::VIT; ++it) {
        const int u = it * G::THREADS + tid, kq = u / (V / 2), dp = u % (V / 2);
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const bool valid = u < G::VU && t0 + 4 * kq + e <= pmax;
            x.v[it][e] = valid ? *reinterpret_cast<const uint32_t *>(
                                     static_cast<const uint16_t *>(d.kv) +
                                     (key0 + t0 + 4 * kq + e) * d.N + hk + NOPE + 2 * dp)
                               : 0u;
        }
    }
}

MLA_DEV void exa_put8(uint16_t *dst, uint32_t lo, uint32_t hi)
{
    uint32_t *p = reinterpret_cast<uint32_t *>(dst);
    p[0] = lo, p[1] = hi;
}

/* The registers into the tile's rows: key rows (f32 rope split), Vt. */
template <class G, int NOPE, int R, int V, int P>
MLA_DEV void exa_store(const exa_regs<G> &x, unsigned char *smem)
{
    const int tid = (int)threadIdx.x;
    uint16_t *Ks = reinterpret_cast<uint16_t *>(smem),
             *Vt = reinterpret_cast<uint16_t *>(smem + G::VT);
#pragma unroll
    for (int it = 0; it < G::KIT; ++it) {
        const int u = it * G::THREADS + tid, k = u / G::KCH, c = u % G::KCH;
        if (u >= G::NK * G::KCH)
            continue;
        uint16_t *row = Ks + k * G::KP;
        const uint32_t *w = x.k[it].v;
        if (c < G::NC || P == 1) {
            uint16_t *dst = c < G::NC ? row + P * R + 8 * c : row + 8 * (c - G::NC);
            exa_put8(dst, w[0], w[1]);
            exa_put8(dst + 4, w[2], w[3]);
        } else { /* 4 f32 rope values -> lo, mid, hi at columns 0, R, 2R */
            uint32_t hi[4], mid[4], lo[4];
#pragma unroll
            for (int e = 0; e < 4; ++e)
                ex_split3(mla_fb_float(w[e]), hi[e], mid[e], lo[e]);
            const int col = 4 * (c - G::NC);
            exa_put8(row + col, lo[0] | lo[1] << 16, lo[2] | lo[3] << 16);
            exa_put8(row + R + col, mid[0] | mid[1] << 16, mid[2] | mid[3] << 16);
            exa_put8(row + 2 * R + col, hi[0] | hi[1] << 16, hi[2] | hi[3] << 16);
        }
    }
#pragma unroll
    for (int it = 0; it < G::VIT; ++it) {
        const int u = it * G::THREADS + tid, kq = u / (V / 2), dp = u % (V / 2);
        if (u >= G::VU)
            continue;
        const uint32_t *v = x.v[it]; /* keys 4 kq + e, columns 2 dp (low), 2 dp + 1 */
        exa_put8(Vt + 2 * dp * G::VTP + 4 * kq, (v[0] & 0xFFFFu) | v[1] << 16,
                 (v[2] & 0xFFFFu) | v[3] << 16);
        exa_put8(Vt + (2 * dp + 1) * G::VTP + 4 * kq, v[0] >> 16 | (v[1] & 0xFFFF0000u),
                 v[2] >> 16 | (v[3] & 0xFFFF0000u));
    }
}

/* Rows q0 .. q0 + 127 of (s, h); one call per block. */
template <int NOPE, int R, int V, int P>
MLA_DEV void exa_rows(const exp_desc &d, int s, int h, int64_t q0, unsigned char *smem)
{
    using G = exa_geom<NOPE, R, V, P>;
    constexpr int NK = G::NK;
    const int64_t r0 = d.cu[s], n = d.cu[s + 1] - r0, c = d.ctx[s];
    if (q0 >= n)
        return;
    const int rows = (int)(n - q0 < G::BQ ? n - q0 : G::BQ);
    if (c == 0) {
        ex_padding(d, r0 + q0, h, rows, G::THREADS);
        return;
    }
    const int p0 = (int)(c - n + q0), pmax = p0 + rows - 1;
    const int64_t key0 = d.key0[s], hk = (int64_t)h * (NOPE + V);
    exa_regs<G> x;
    exa_load<G, NOPE, R, V, P>(d, x, key0, 0, pmax, hk);

    const int tid = (int)threadIdx.x, lane = tid % 64, w = mla_wave_uniform(tid / 64);
    const int i = lane % 32, hh = lane / 32, r = 32 * w + i;
    const int lim = r < rows ? p0 + r : -1;
    /* q [q_pe | q_nope] as B of S^T: dims 8 qs + 4 hh + 0..3 of row r */
    uint32_t qb[G::QS][2];
#pragma unroll
    for (int qs = 0; qs < G::QS; ++qs)
#pragma unroll
        for (int j = 0; j < 2; ++j) {
            uint32_t e[2] = {0, 0};
#pragma unroll
            for (int k = 0; k < 2; ++k)
                if (r < rows)
                    e[k] = mla_fb_f32_to_bf16(
                        ex_q(d, r0 + q0 + r, h, 8 * qs + 4 * hh + 2 * j + k, true));
            qb[qs][j] = e[0] | e[1] << 16;
        }
    const bool wave_rows = 32 * w < rows;
    const int w_lo = p0 + 32 * w, w_hi = p0 + 32 * w + 31 < pmax ? p0 + 32 * w + 31 : pmax;
    mla_f32x16 o[G::VC];
#pragma unroll
    for (int cc = 0; cc < G::VC; ++cc)
#pragma unroll
        for (int e = 0; e < 16; ++e)
            o[cc][e] = 0.0f;
    float m_run = -INFINITY, l_run = 0.0f;
    const uint16_t *Ks = reinterpret_cast<const uint16_t *>(smem) + i * G::KP + 4 * hh;
    const uint16_t *Vt = reinterpret_cast<const uint16_t *>(smem + G::VT) + i * G::VTP + 4 * hh;

    for (int t0 = 0; t0 <= pmax; t0 += NK) {
        idx_sync(); /* every wave is done with the previous tile */
        exa_store<G, NOPE, R, V, P>(x, smem);
        idx_sync();
        if (t0 + NK <= pmax)
            exa_load<G, NOPE, R, V, P>(d, x, key0, t0 + NK, pmax, hk);
        if (!wave_rows || t0 > w_hi)
            continue;
        mla_f32x16 sa[2];
#pragma unroll
        for (int sb = 0; sb < 2; ++sb) {
#pragma unroll
            for (int e = 0; e < 16; ++e)
                sa[sb][e] = 0.0f;
#pragma unroll
            for (int st = 0; st < G::KS; ++st) { /* q_pe against each rope piece, then q_nope */
                const int qs = st < P * G::RS ? st % G::RS : st - (P - 1) * G::RS;
                const uint32_t *a =
                    reinterpret_cast<const uint32_t *>(Ks + 32 * sb * G::KP + 8 * st);
                sa[sb] = mla_mfma_bf16_32x32x8(a[0], a[1], qb[qs][0], qb[qs][1], sa[sb]);
            }
        }
        /* lane: keys 32 sb + 8 (e / 4) + 4 hh + e % 4 of row r */
        const bool diag = t0 + NK - 1 > w_lo;
        float mx = -INFINITY;
#pragma unroll
        for (int sb = 0; sb < 2; ++sb)
#pragma unroll
            for (int e = 0; e < 16; ++e) {
                const int key = t0 + 32 * sb + 8 * (e / 4) + 4 * hh + e % 4;
                const float v = sa[sb][e] * d.ss2;
                sa[sb][e] = diag && key > lim ? -INFINITY : v;
                mx = fmaxf(mx, sa[sb][e]);
            }
        mx = fmaxf(mx, mla_shfl_xor(mx, 32));
        const float mn = fmaxf(m_run, mx);
        const float alpha = mn == -INFINITY ? 1.0f : exp2f(m_run - mn),
                    off = mn == -INFINITY ? 0.0f : mn;
        m_run = mn;
        uint32_t pb[NK / 8][2]; /* P^T as B: key step kk = 4 sb + e / 4 */
        float psum = 0.0f;
#pragma unroll
        for (int sb = 0; sb < 2; ++sb)
#pragma unroll
            for (int q = 0; q < 4; ++q) {
                float p[4];
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                    p[e] = exp2f(sa[sb][4 * q + e] - off);
                    psum += p[e];
                }
                pb[4 * sb + q][0] = mla_fb_f32_to_bf16(p[0]) | mla_fb_f32_to_bf16(p[1]) << 16;
                pb[4 * sb + q][1] = mla_fb_f32_to_bf16(p[2]) | mla_fb_f32_to_bf16(p[3]) << 16;
            }
        l_run = l_run * alpha + psum;
#pragma unroll
        for (int cc = 0; cc < G::VC; ++cc) {
#pragma unroll
            for (int e = 0; e < 16; ++e)
                o[cc][e] *= alpha;
#pragma unroll
            for (int kk = 0; kk < NK / 8; ++kk) {
                const uint32_t *a =
                    reinterpret_cast<const uint32_t *>(Vt + 32 * cc * G::VTP + 8 * kk);
                o[cc] = mla_mfma_bf16_32x32x8(a[0], a[1], pb[kk][0], pb[kk][1], o[cc]);
            }
        }
    }

    const float l = l_run + mla_shfl_xor(l_run, 32);
    if (r >= rows)
        return;
    const int64_t row = r0 + q0 + r;
#pragma unroll
    for (int cc = 0; cc < G::VC; ++cc)
#pragma unroll
        for (int e = 0; e < 16; ++e)
            ex_st(d.o,
                  row * d.o_s0 + h * d.o_s1 + (32 * cc + 8 * (e / 4) + 4 * hh + e % 4) * d.o_s2,
                  o[cc][e] / l, d.o_dt);
    if (d.lse && hh == 0)
        d.lse[row * d.lse_s0 + h * d.lse_s1] = (m_run + log2f(l)) * kLn2;
}

#endif

} // namespace

#endif
