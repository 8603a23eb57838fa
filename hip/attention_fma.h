/* The synchronous attention body (hip/attention.hip): one key tile at a
 * time, loaded and dequantized to bf16 rows by all threads, then scores,
 * online softmax and P V through per-path ops. This file holds the loop
 * (attend), the tile load and the portable ops (fma_ops: plain fp32 FMA, q
 * read from memory in fp32, P in fp32), which run on any target, the host
 * pass and under MLA_HIP_ATTENTION=fma; gfx9's MFMA ops
 * (hip/attention_mfma.h) plug into the same loop. */
#ifndef MLA_HIP_ATTENTION_FMA_H
#define MLA_HIP_ATTENTION_FMA_H

#include "hip/attention_common.h"

namespace
{

/* Keys of the tile into Ks (bf16 rows of DP values), synchronously: each
 * thread issues the loads of G chunks before converting any. */
template <int CT, int NK, int G>
MLA_DEV void load_tile(const att_desc &d, const int32_t *KP, const key_ref *KR, uint16_t *Ks)
{
    const int items = NK * d.cpk;
    for (int base = (int)threadIdx.x; base < items; base += G * kThreads) {
        uint32_t raw[G][4];
        float sc[G];
        int32_t dst[G];
        int cnt[G];
        bool bf[G];
#pragma unroll
        for (int g = 0; g < G; ++g) {
            const int it = base + g * kThreads;
            raw[g][0] = raw[g][1] = raw[g][2] = raw[g][3] = 0;
            sc[g] = 1.0f;
            dst[g] = -1;
            cnt[g] = 0;
            bf[g] = true;
            if (it < items) {
                const int k = it / d.cpk;
                const chunk_at ch = chunk_of(d, it - k * d.cpk);
                cnt[g] = ch.n;
                dst[g] = k * d.DP + ch.d0;
                bf[g] = CT == MLA_DTYPE_BF16 || (!ch.nope && d.rope_bf16);
                if (KP[k] >= 0) {
                    const key_ref kr = KR[k];
                    load_bytes((ch.nope ? kr.nope : kr.rope) + ch.off, raw[g],
                               bf[g] ? 2 * ch.n : ch.n);
                    if (!bf[g] && cache_fp8s(d.c)) { /* the group's scale */
                        uint32_t sw[4];
                        load_bytes(kr.nope + d.c.L + 4 * (ch.d0 / MLA_CL_SCALE_GROUP), sw, 4);
                        sc[g] = mla_fb_float(sw[0]);
                    }
                }
            }
        }
#pragma unroll
        for (int g = 0; g < G; ++g) {
            if (dst[g] < 0)
                continue;
            uint32_t w[4];
            if (bf[g]) {
#pragma unroll
                for (int j = 0; j < 4; ++j)
                    w[j] = raw[g][j];
            } else if constexpr (CT != MLA_DTYPE_BF16) {
                /* codes (times an FP8_SCALED group scale: a power of two) are
                 * exact in bf16 */
#pragma unroll
                for (int j = 0; j < 4; ++j)
                    w[j] =
                        mla_fb_f32_to_bf16(mla_fb_mul(unpack_value<CT>(raw[g], 2 * j), sc[g])) |
                        (mla_fb_f32_to_bf16(mla_fb_mul(unpack_value<CT>(raw[g], 2 * j + 1), sc[g]))
                         << 16);
            } else {
                w[0] = w[1] = w[2] = w[3] = 0;
            }
            uint16_t *p = Ks + dst[g];
            if (cnt[g] == kChunk && is_aligned(p, 16)) {
                mla_u32x4 q;
#pragma unroll
                for (int j = 0; j < 4; ++j)
                    q.v[j] = w[j];
                *reinterpret_cast<mla_u32x4 *>(p) = q;
            } else {
#pragma unroll
                for (int j = 0; j < kChunk; ++j)
                    if (j < cnt[g])
                        p[j] = (uint16_t)(w[j / 2] >> (16 * (j % 2)));
            }
        }
    }
}

/* -------------------------------------------------- plain FMA body */

template <int TM, int NK, int W> struct fma_ops {
    static constexpr int TPR = kThreads / TM; /* threads per row */
    static constexpr int OPT = W / TPR;       /* O values per thread */
    float o[OPT];

    MLA_ATT_MEMBER void init(const att_desc &, const att_blk &)
    {
#pragma unroll
        for (int i = 0; i < OPT; ++i)
            o[i] = 0.0f;
    }

    MLA_ATT_MEMBER void scores(const att_desc &d, const att_blk &b, const uint16_t *Ks, float *Sp)
    {
        for (int pidx = (int)threadIdx.x; pidx < TM * NK; pidx += kThreads) {
            const int r = pidx / NK, k = pidx - r * NK;
            /* an invalid row reads the tile's first row (its scores are masked) */
            const bool rv = row_valid(d, b, r);
            const int64_t qoff =
                rv ? (b.row0 + b.j0 + r / d.HT) * d.qs0 + (int64_t)(b.h0 + r % d.HT) * d.qs1
                   : (b.row0 + b.j0) * d.qs0 + (int64_t)b.h0 * d.qs1;
            const uint16_t *kr = Ks + (int64_t)k * d.DP;
            float acc = 0.0f;
            for (int dd = 0; dd < d.D; ++dd)
                acc = fmaf(q_value(d, qoff + (int64_t)dd * d.qs2), mla_fb_bf16_to_f32(kr[dd]), acc);
            Sp[r * NK + k] = acc;
        }
    }

    /* O = alpha O + P V (P in fp32) */
    MLA_ATT_MEMBER void pv(const att_desc &d, const att_blk &b, const float *P, const float *As,
                           const uint16_t *Ks)
    {
        const int r = (int)threadIdx.x / TPR, u = (int)threadIdx.x % TPR;
        const float alpha = As[r];
#pragma unroll
        for (int i = 0; i < OPT; ++i) {
            /* columns past L read column L - 1 (never stored): no test */
            const int col = imin(b.c0 + u + TPR * i, (int)d.c.L - 1);
            float acc = o[i] * alpha;
            for (int k = 0; k < NK; ++k)
                acc = fmaf(P[r * NK + k], mla_fb_bf16_to_f32(Ks[k * d.DP + col]), acc);
            o[i] = acc;
        }
    }

    template <typename E> MLA_ATT_MEMBER void store(const att_desc &d, const att_blk &b, E &&emit)
    {
        const int r = (int)threadIdx.x / TPR, u = (int)threadIdx.x % TPR;
#pragma unroll
        for (int i = 0; i < OPT; ++i) {
            const int col = b.c0 + u + TPR * i;
            if (col < (int)d.c.L)
                emit(r, col, o[i]);
        }
    }
};

template <int KIND, int QT, int W> struct ops_of {
    using type = fma_ops<kTM, kNKFma, W>;
    static constexpr int NK = kNKFma, NPART = 1;
};

/* Dims D .. DP of every key row stay 0 (the matrix steps read them; no
 * tile load writes them): once per kernel, before its first record. */
template <int KIND, int QT, int W> MLA_DEV void zero_pads(const att_desc &d, unsigned char *smem)
{
    using OPS = ops_of<KIND, QT, W>;
    const att_smem L = smem_layout(kTM, OPS::NK, OPS::NPART, d.DP);
    const int pad = d.DP - d.D;
    for (int i = (int)threadIdx.x; i < OPS::NK * pad; i += kThreads)
        reinterpret_cast<uint16_t *>(smem + L.ks)[(i / pad) * d.DP + d.D + i % pad] = 0;
}

/* The plain-FMA and gfx9 bodies: one key tile at a time, loaded
 * synchronously. */
template <int KIND, int CT, int QT, int W>
MLA_DEV void attend(const att_desc &d, const att_blk &b, unsigned char *smem)
{
    using OPS = ops_of<KIND, QT, W>;
    constexpr int TM = kTM, NK = OPS::NK, NPART = OPS::NPART;
    constexpr int TPR = kThreads / TM, KPT = NK / TPR;
    static_assert(KPT >= 1 && KPT * TPR == NK, "whole keys per softmax thread");
    /* the launch sized shared memory for the matrix tiles (NPART, NK of the
     * vendor) or the plain ones; the plain body fits in either */
    const att_smem L = smem_layout(TM, NK, NPART, d.DP);
    float *Sp = reinterpret_cast<float *>(smem + L.sp);
    float *As = reinterpret_cast<float *>(smem + L.as);
    float *Fs = reinterpret_cast<float *>(smem + L.fs);
    uint8_t **Or = reinterpret_cast<uint8_t **>(smem + L.orow);
    int32_t *KP = reinterpret_cast<int32_t *>(smem + L.kp);
    key_ref *KBs = reinterpret_cast<key_ref *>(smem + L.kb);
    uint16_t *Pb = reinterpret_cast<uint16_t *>(smem + L.ps);
    float *Pf = reinterpret_cast<float *>(smem + L.ps);
    uint16_t *Ks = reinterpret_cast<uint16_t *>(smem + L.ks);

    const int tid = (int)threadIdx.x;
    typename OPS::type ops;
    ops.init(d, b);

    /* softmax thread: row r, keys u * KPT .. */
    const int r = tid / TPR, u = tid % TPR;
    const bool rv = row_valid(d, b, r);
    /* the row's causal limit, -1 for an invalid row (no key passes) */
    const int32_t lim = !rv ? -1 : d.sparse ? 0x7FFFFFFF : row_limit(d, b, r);
    float m_run = -INFINITY, l_run = 0.0f;

    /* key information of the next tile, held by threads < NK a tile ahead */
    int32_t npos = -1;
    key_ref nblk;
    if (tid < NK)
        key_info<CT>(d, b, b.kv_lo, npos, nblk);

    for (int32_t kb = b.kv_lo; kb < b.kv_hi; kb += NK) {
        if (tid < NK) {
            KP[tid] = npos;
            KBs[tid] = nblk;
            key_info<CT>(d, b, kb + NK, npos, nblk);
        }
        idx_sync();
        /* G chunks a thread loads before it converts them: 2 for f32 q in
         * the matrix body (its hi + lo fragments leave no room for 4 in a
         * loop over records: spills on gfx942) */
        constexpr int G = KIND != KIND_FMA && QT == MLA_DTYPE_F32 ? 2 : 4;
        load_tile<CT, NK, G>(d, KP, KBs, Ks);
        idx_sync();
        ops.scores(d, b, Ks, Sp);
        idx_sync();
        float x[KPT];
        float mx = -INFINITY;
#pragma unroll
        for (int e = 0; e < KPT; ++e) {
            const int k = u * KPT + e;
            float s = 0.0f;
#pragma unroll
            for (int p = 0; p < NPART; ++p)
                s += Sp[(p * TM + r) * NK + k];
            const int32_t pos = KP[k];
            x[e] = (pos >= 0 && pos <= lim) ? s * d.ss2 : -INFINITY;
            mx = fmaxf(mx, x[e]);
        }
        for (int off = 1; off < TPR; off *= 2)
            mx = fmaxf(mx, mla_shfl_xor(mx, off));
        const float m_new = fmaxf(m_run, mx);
        const float alpha = m_new == -INFINITY ? 1.0f : exp2f(m_run - m_new);
        float sum = 0.0f;
#pragma unroll
        for (int e = 0; e < KPT; ++e) {
            const float p = x[e] == -INFINITY ? 0.0f : exp2f(x[e] - m_new);
            sum += p;
            const int k = u * KPT + e;
            if constexpr (KIND == KIND_FMA)
                Pf[r * NK + k] = p;
            else
                Pb[r * (NK + 8) + k] = (uint16_t)mla_fb_f32_to_bf16(p);
        }
        for (int off = 1; off < TPR; off *= 2)
            sum += mla_shfl_xor(sum, off);
        l_run = l_run * alpha + sum;
        m_run = m_new;
        if (u == 0)
            As[r] = alpha;
        idx_sync();
        if constexpr (KIND == KIND_FMA)
            ops.pv(d, b, Pf, As, Ks);
        else
            ops.pv(d, b, Pb, As, Ks);
        idx_sync();
    }

    if (u == 0)
        row_finish(d, b, r, m_run, l_run, Fs, Or);
    idx_sync();
    ops.store(d, b, [&](int rr, int col, float v) { out_store(d, b, Or, Fs, rr, col, v); });
}

} // namespace

#endif
