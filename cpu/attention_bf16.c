/* The attention core's bf16 dot-product part (attn_dp of
 * cpu/attention_internal.h), for CPUs with AVX512-BF16 (and no AMX,
 * mla_cpu_has_bf16; cpu/attention.c says when it is used).
 *
 * Scores: vdpbf16ps on q's bf16 pairs and the keys as bf16 (a bf16 cache's
 * bytes as stored; fp8 NORMAL / SHUFFLED: the codes' exact bf16 values,
 * k_scale applied to the score; FP8_SCALED: code * s, exact for the
 * writer's power-of-two scales, else the tile takes the fp32 path), two
 * exact products per lane and step, fp32 adds: twice the FMA rate.
 * P @ V: P rounded to bf16 (RNE), paired over keys, against the values
 * paired over the same keys (fp8 NORMAL / SHUFFLED: P k_scale against the
 * codes), as FlashMLA does (the conformance bound allows bf16 P).
 * Register tiles as in cpu/attention_tiles.h: scores, one group (16 pairs)
 * or two x 8 keys (q's pairs loaded, the key's pair broadcast); P @ V, 4
 * pairs x 64 value dims (the values' pairs loaded, P's pair broadcast); one
 * vdpbf16ps per accumulator and pair of values. */
#include "cpu/attention_internal.h"

#include "cpu/linear_kernel.h" /* mla_cpu_linear_min_exp */

#if MLA_CPU_X86
#include <immintrin.h>

#define DP_TARGET __attribute__((target(MLA_AVX512_ISAS ",avx512bf16")))
#define DP_INLINE static inline __attribute__((always_inline)) DP_TARGET
#define DP_UNROLL _Pragma("GCC unroll 32")
#define DP_NA_MAX 8
#define DP_MP 4 /* pairs of a P @ V tile */

DP_TARGET int mla_cpu_attn_copy_key_bf16(const attn_keyfmt *f, const uint8_t *blk, int64_t t,
                                         uint32_t *out)
{
    const int64_t L = f->L, R = f->R, D = f->D;
    uint8_t *o = (uint8_t *)out;
    uint16_t *o16 = (uint16_t *)out;
    const int fnuz = f->kdt == MLA_DTYPE_FP8_E4M3FNUZ;
    int exact = 1;
    if (f->layout == MLA_CL_FP8_SCALED) {
        /* code * s is exact in bf16 when s is a power of two (the writer's
         * scales; MLA.md section 4): else the tile takes the fp32 path */
        for (int64_t g = 0; g < L / MLA_CL_SCALE_GROUP; ++g) {
            float sc;
            memcpy(&sc, blk + mla_cl_fp8s_scale_byte(t, g, L, R), sizeof sc);
            const uint32_t sb = mla_fb_bits(sc), se = (sb >> 23) & 0xFFu;
            exact &= (sb & 0x807FFFFFu) == 0 && se >= 1 && se <= 254;
            const uint8_t *c = blk + mla_cl_fp8s_value_byte(t, g * MLA_CL_SCALE_GROUP, L, R);
            uint16_t *og = o16 + g * MLA_CL_SCALE_GROUP;
            MLA_SIMD for (int64_t j = 0; j < MLA_CL_SCALE_GROUP; ++j) og[j] =
                (uint16_t)(mla_fb_bits(attn_fp8_value(c[j], fnuz) * sc) >> 16);
        }
        memcpy(o + 2 * L, blk + mla_cl_fp8s_rope_byte(t, 0, L, R), (size_t)(2 * R));
    } else if (f->kdt != MLA_DTYPE_BF16) {
        const int64_t K = f->layout == MLA_CL_NORMAL ? D : 16; /* contiguous codes */
        for (int64_t i = 0; i < D; i += K) {
            const uint8_t *c = blk + mla_cl_elem_byte(f->layout, t, i, L, R, f->bs, 1);
            MLA_SIMD for (int64_t j = 0; j < K; ++j) o16[i + j] =
                (uint16_t)(mla_fb_bits(attn_fp8_value(c[j], fnuz)) >> 16);
        }
    } else if (f->layout == MLA_CL_NORMAL) {
        memcpy(o, blk + mla_cl_elem_byte(MLA_CL_NORMAL, t, 0, L, R, f->bs, 2), (size_t)(2 * D));
    } else { /* SHUFFLED: whole 16-byte tile rows of 8 values */
        for (int64_t i = 0; i < D; i += 8)
            memcpy(o + 2 * i, blk + mla_cl_elem_byte(MLA_CL_SHUFFLED, t, i, L, R, f->bs, 2),
                   MLA_CL_TILE_BYTES);
    }
    memset(o + 2 * D, 0, (size_t)(2 * (f->KS - D)));
    return exact;
}

/* st[i][r] = the pair products of qp[p][r] and key row i's pair p, summed over p < P. */
DP_INLINE void qk_tile(const int MR, const int NA, const uint32_t *qp, int64_t mp,
                       const uint32_t *kb, int64_t kbs, int64_t P, float *st)
{
    __m512 acc[DP_NA_MAX][2];
    const uint32_t *kr[DP_NA_MAX];
    DP_UNROLL for (int i = 0; i < NA; ++i)
    {
        kr[i] = kb + i * kbs;
        DP_UNROLL for (int r = 0; r < MR; ++r) acc[i][r] = _mm512_setzero_ps();
    }
    for (int64_t p = 0; p < P; ++p) {
        __m512bh q[2];
        DP_UNROLL for (int r = 0; r < MR; ++r) q[r] =
            (__m512bh)_mm512_loadu_si512(qp + p * mp + VL * r);
        DP_UNROLL for (int i = 0; i < NA; ++i)
        {
            const __m512bh b = (__m512bh)_mm512_set1_epi32((int)kr[i][p]);
            DP_UNROLL for (int r = 0; r < MR; ++r) acc[i][r] = _mm512_dpbf16_ps(acc[i][r], q[r], b);
        }
    }
    DP_UNROLL for (int i = 0; i < NA; ++i) DP_UNROLL for (int r = 0; r < MR; ++r)
        _mm512_storeu_ps(st + i * mp + VL * r, acc[i][r]);
}

/* ot[i][r] = (alpha ? alpha[i] ot[i][r] : 0) + the pair products of pp[j][i]
 * and vp[j][r], summed over j < np, for MP pairs (O rows, stride ls) x NV
 * vectors of value dims (pp, vp and ot at the tile's first pair and dim). */
DP_INLINE void pv_tile(const int NV, const uint32_t *pp, int64_t mp, const uint32_t *vp, int64_t ls,
                       int np, float *ot, const float *alpha)
{
    __m512 acc[DP_MP][4];
    DP_UNROLL for (int i = 0; i < DP_MP; ++i) DP_UNROLL for (int r = 0; r < NV; ++r) acc[i][r] =
        alpha ? _mm512_mul_ps(_mm512_loadu_ps(ot + i * ls + VL * r), _mm512_set1_ps(alpha[i]))
              : _mm512_setzero_ps();
    for (int j = 0; j < np; ++j) {
        __m512bh v[4];
        DP_UNROLL for (int r = 0; r < NV; ++r) v[r] =
            (__m512bh)_mm512_loadu_si512(vp + j * ls + VL * r);
        DP_UNROLL for (int i = 0; i < DP_MP; ++i)
        {
            const __m512bh b = (__m512bh)_mm512_set1_epi32((int)pp[j * mp + i]);
            DP_UNROLL for (int r = 0; r < NV; ++r) acc[i][r] = _mm512_dpbf16_ps(acc[i][r], v[r], b);
        }
    }
    DP_UNROLL for (int i = 0; i < DP_MP; ++i) DP_UNROLL for (int r = 0; r < NV; ++r)
        _mm512_storeu_ps(ot + i * ls + VL * r, acc[i][r]);
}

DP_TARGET static void qk_g1(const uint32_t *qp, int64_t mp, const uint32_t *kb, int64_t kbs,
                            int64_t P, float *st)
{
    qk_tile(1, 8, qp, mp, kb, kbs, P, st);
}
DP_TARGET static void qk_g1_tail(const uint32_t *qp, int64_t mp, const uint32_t *kb, int64_t kbs,
                                 int64_t P, float *st)
{
    qk_tile(1, 1, qp, mp, kb, kbs, P, st);
}
DP_TARGET static void qk_g2(const uint32_t *qp, int64_t mp, const uint32_t *kb, int64_t kbs,
                            int64_t P, float *st)
{
    qk_tile(2, 8, qp, mp, kb, kbs, P, st);
}
DP_TARGET static void qk_g2_tail(const uint32_t *qp, int64_t mp, const uint32_t *kb, int64_t kbs,
                                 int64_t P, float *st)
{
    qk_tile(2, 1, qp, mp, kb, kbs, P, st);
}

DP_TARGET static void pv_full(const uint32_t *pp, int64_t mp, const uint32_t *vp, int64_t ls,
                              int np, float *ot, const float *alpha)
{
    pv_tile(4, pp, mp, vp, ls, np, ot, alpha);
}
DP_TARGET static void pv_tail(const uint32_t *pp, int64_t mp, const uint32_t *vp, int64_t ls,
                              int np, float *ot, const float *alpha)
{
    pv_tile(1, pp, mp, vp, ls, np, ot, alpha);
}

/* The tiles' shapes match the FMA copy's (cpu/attention_avx512.c), so that
 * its calls() paces the prefetches here too. */
DP_TARGET static void qk_dp(const uint32_t *qp, int64_t mp, int nv, const uint32_t *kb, int64_t kbs,
                            int nk, int64_t P, float *st, attn_pf *pf)
{
    for (int v = 0; v < nv;) {
        const int two = nv - v >= 2;
        const uint32_t *q = qp + VL * v;
        float *s = st + VL * v;
        int a = 0;
        for (; a + 8 <= nk; a += 8, attn_pf_step(pf))
            (two ? qk_g2 : qk_g1)(q, mp, kb + a * kbs, kbs, P, s + a * mp);
        for (; a < nk; ++a, attn_pf_step(pf))
            (two ? qk_g2_tail : qk_g1_tail)(q, mp, kb + a * kbs, kbs, P, s + a * mp);
        v += 1 + two;
    }
}

DP_TARGET static void pv_dp(const float *st, int64_t mp, int nv, int nk, float pscale,
                            const uint16_t *kb, int64_t kbs, uint32_t *pp, uint32_t *vp, int64_t ls,
                            float *ot, const float *alpha, attn_pf *pf)
{
    const int np = (nk + 1) / 2;
    for (int j = 0; j < np; ++j) { /* P (times pscale) to bf16, pairs of keys */
        const float *p0 = st + 2 * j * mp, *p1 = p0 + mp;
        const int odd = 2 * j + 1 < nk;
        uint32_t *o = pp + j * mp;
        MLA_SIMD for (int64_t m = 0; m < mp; ++m) o[m] =
            (uint32_t)mla_fb_f32_to_bf16(p0[m] * pscale) |
            (odd ? (uint32_t)mla_fb_f32_to_bf16(p1[m] * pscale) << 16 : 0u);
    }
    for (int j = 0; j < np; ++j) { /* values: the same pairs of keys */
        const uint16_t *v0 = kb + 2 * j * kbs, *v1 = v0 + kbs;
        const int odd = 2 * j + 1 < nk;
        uint32_t *o = vp + j * ls;
        MLA_SIMD for (int64_t d = 0; d < ls; ++d) o[d] =
            (uint32_t)v0[d] | (odd ? (uint32_t)v1[d] << 16 : 0u);
    }
    const int64_t np_pairs = (int64_t)nv * VL;
    for (int64_t v = 0; v < ls;) {
        const int full = v + 4 * VL <= ls;
        for (int64_t m = 0; m < np_pairs; m += DP_MP, attn_pf_step(pf))
            (full ? pv_full : pv_tail)(pp + m, mp, vp + v, ls, np, ot + m * ls + v,
                                       alpha ? alpha + m : NULL);
        v += full ? 4 * VL : VL;
    }
}

const attn_dp mla_cpu_attn_dp_avx512 = {mla_cpu_attn_copy_key_bf16, mla_cpu_linear_min_exp, qk_dp,
                                        pv_dp, NULL};

#endif
