/* gfx9's attention ops for the synchronous body (hip/attention_fma.h):
 * v_mfma_f32_32x32x8_bf16 through hip/mfma.h, TM = 32 rows, NK = 32 keys, 4
 * waves; wave w holds q's 8-dim k-steps w, w + 4, .. in registers and O's
 * 32-column tiles w, w + 4, ... */
#ifndef MLA_HIP_ATTENTION_MFMA_H
#define MLA_HIP_ATTENTION_MFMA_H

#include "hip/attention_fma.h"

namespace
{

/* ---------------------------------------------------- gfx9: MFMA */

#if MLA_ATT_MATRIX_KIND == 2
/* Layouts of hip/mfma.h (i = lane % 32, h = lane / 32). Scores: A = q rows
 * (32) x dims 8 ks + 4h .., B = Ks^T (key i); P V: A = P rows x keys
 * 8 kk + 4h .., B = V (keys 8 kk + 4h .., column i). Rows of D:
 * 8 (r / 4) + 4h + r % 4. */
template <int QT> struct amd_ops {
    static constexpr bool QSPLIT = QT == MLA_DTYPE_F32;
    static constexpr int NK = kNKMat;
    static_assert(NK == 32, "one MFMA column tile of keys");
    uint32_t qh[kKSW][2], ql[QSPLIT ? kKSW : 1][2];
    mla_f32x16 o[kCTW];

    MLA_ATT_MEMBER void init(const att_desc &d, const att_blk &b)
    {
        const int lane = (int)threadIdx.x % 64, w = mla_wave_uniform((int)threadIdx.x / 64);
        const int i = lane % 32, h = lane / 32;
        const bool valid = row_valid(d, b, i);
        const int64_t qrow =
            (b.row0 + b.j0 + i / d.HT) * d.qs0 + (int64_t)(b.h0 + i % d.HT) * d.qs1;
#pragma unroll
        for (int it = 0; it < kKSW; ++it) {
            const int ks = w + 4 * it;
#pragma unroll
            for (int reg = 0; reg < 2; ++reg) {
                const int dim = 8 * ks + 4 * h + 2 * reg;
                uint32_t hi[2] = {0, 0}, lo[2] = {0, 0};
#pragma unroll
                for (int e = 0; e < 2; ++e)
                    if (ks < d.KS && valid && dim + e < d.D)
                        split_bf16(load_value<QT>(d.q, qrow + (int64_t)(dim + e) * d.qs2), hi[e],
                                   lo[e]);
                qh[it][reg] = hi[0] | (hi[1] << 16);
                if constexpr (QSPLIT)
                    ql[it][reg] = lo[0] | (lo[1] << 16);
            }
        }
#pragma unroll
        for (int c = 0; c < kCTW; ++c)
#pragma unroll
            for (int r = 0; r < 16; ++r)
                o[c][r] = 0.0f;
    }

    MLA_ATT_MEMBER void scores(const att_desc &d, const att_blk &, const uint16_t *Ks, float *Sp)
    {
        const int lane = (int)threadIdx.x % 64, w = mla_wave_uniform((int)threadIdx.x / 64);
        const int i = lane % 32, h = lane / 32;
        mla_f32x16 acc;
#pragma unroll
        for (int r = 0; r < 16; ++r)
            acc[r] = 0.0f;
        const uint16_t *kr = Ks + i * d.DP + 4 * h;
#pragma unroll
        for (int it = 0; it < kKSW; ++it) {
            const uint32_t *kp = reinterpret_cast<const uint32_t *>(kr + 8 * (w + 4 * it));
            const uint32_t b0 = kp[0], b1 = kp[1];
            acc = mla_mfma_bf16_32x32x8(qh[it][0], qh[it][1], b0, b1, acc);
            if constexpr (QSPLIT)
                acc = mla_mfma_bf16_32x32x8(ql[it][0], ql[it][1], b0, b1, acc);
        }
        float *sp = Sp + w * 32 * NK;
#pragma unroll
        for (int r = 0; r < 16; ++r)
            sp[(8 * (r / 4) + 4 * h + r % 4) * NK + i] = acc[r];
    }

    MLA_ATT_MEMBER void pv(const att_desc &d, const att_blk &b, const uint16_t *P, const float *As,
                           const uint16_t *Ks)
    {
        const int lane = (int)threadIdx.x % 64, w = mla_wave_uniform((int)threadIdx.x / 64);
        const int i = lane % 32, h = lane / 32;
#pragma unroll
        for (int r = 0; r < 16; ++r) {
            const float a = As[8 * (r / 4) + 4 * h + r % 4];
#pragma unroll
            for (int c = 0; c < kCTW; ++c)
                o[c][r] *= a;
        }
        constexpr int PS = NK + 8;
#pragma unroll
        for (int kk = 0; kk < NK / 8; ++kk) {
            const uint32_t *pp = reinterpret_cast<const uint32_t *>(P + i * PS + 8 * kk + 4 * h);
            const uint32_t a0 = pp[0], a1 = pp[1];
            const uint16_t *v0 = Ks + (8 * kk + 4 * h) * d.DP;
#pragma unroll
            for (int c = 0; c < kCTW; ++c) {
                /* columns past L read column L - 1 (never stored): no test */
                const uint16_t *v = v0 + imin(b.c0 + 32 * (w + 4 * c) + i, (int)d.c.L - 1);
                const uint32_t b0 = (uint32_t)v[0] | ((uint32_t)v[d.DP] << 16);
                const uint32_t b1 = (uint32_t)v[2 * d.DP] | ((uint32_t)v[3 * d.DP] << 16);
                o[c] = mla_mfma_bf16_32x32x8(a0, a1, b0, b1, o[c]);
            }
        }
    }

    template <typename E> MLA_ATT_MEMBER void store(const att_desc &d, const att_blk &b, E &&emit)
    {
        const int lane = (int)threadIdx.x % 64, w = mla_wave_uniform((int)threadIdx.x / 64);
        const int i = lane % 32, h = lane / 32;
#pragma unroll
        for (int c = 0; c < kCTW; ++c) {
            const int col = b.c0 + 32 * (w + 4 * c) + i;
            if (col < (int)d.c.L)
#pragma unroll
                for (int r = 0; r < 16; ++r)
                    emit(8 * (r / 4) + 4 * h + r % 4, col, o[c][r]);
        }
    }
};
#endif

#if MLA_ATT_MATRIX_KIND == 2
template <int QT, int W> struct ops_of<KIND_AMD, QT, W> {
    using type = amd_ops<QT>;
    static constexpr int NK = kNKMat, NPART = kNW;
};
#endif

} // namespace

#endif
