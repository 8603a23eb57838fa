/* The attention tile kernels as a template, included once per instruction
 * set (cpu/attention_avx2.c, cpu/attention_avx512.c) after that file has
 * defined:
 *
 *   ATT_SUFFIX         the suffix of the copy's names (avx2, avx512)
 *   ATT_TARGET         the target attribute of every function
 *   ATT_W              fp32 lanes per vector register (8, 16); V its type
 *   v_load v_store v_set1 v_zero v_fma (a b + c) v_mul v_add v_sub v_max
 *   v_mask_above(x, kp, plim)   x, or -inf in lanes where kp > plim[lane]
 *   v_ninf_to_zero(x)           x with -inf lanes replaced by 0
 *   v_exp (with SLEEF); v_min v_round (to nearest) v_fnma (c - a b)
 *   v_scale2(p, n) (p 2^n, integral n) and v_zero_where_le(y, x, c) (the
 *   polynomial exp: v_exp without SLEEF, softmax_poly always)
 *   ATT_GROUPS         groups of VL pairs a score tile may span (1, 2)
 *   ATT_QK_NA1 / ATT_QK_NA2     keys of a one- / two-group score tile
 *   ATT_PV_MP / ATT_PV_NV       pairs x vector registers of value dims of a
 *                               P @ V tile (ATT_PV_MP divides VL)
 *
 * and defines the attn_kernels table mla_cpu_attn_<ATT_SUFFIX>.
 *
 * Both products are FMA register tiles. Scores: MR vector registers of
 * (row, head) pairs x NA keys of accumulators, per dim one vector load per
 * register of pairs and one broadcast per key; a tile spans at most two
 * groups (32 pairs), so that q, which lives in L2 at 128 heads, is not
 * streamed once per FMA (2 x 8 measured faster than 4 x 4 and 8 x 2 with
 * AVX-512). P @ V into O's rows: MP pairs x NV vectors of value dims, per
 * key NV vector loads of the key's values and MP broadcasts of P. The tile
 * functions are one body each, inlined with constant shapes into the few
 * wrappers the walkers call; every sum runs in increasing d (or key), so
 * the order is fixed by the tile sizes alone. */

#define ATT_CAT_(a, b) a##_##b
#define ATT_CAT(a, b) ATT_CAT_(a, b)
#define ATT_FN(name) ATT_CAT(name, ATT_SUFFIX)
#define ATT_INLINE static inline __attribute__((always_inline)) ATT_TARGET
#define ATT_UNROLL _Pragma("GCC unroll 32")

#define ATT_R (VL / ATT_W) /* registers per group of VL pairs */
#define ATT_MR_MAX (ATT_GROUPS * ATT_R)
#if ATT_GROUPS > 1 && ATT_QK_NA2 > ATT_QK_NA1
#define ATT_NA_MAX ATT_QK_NA2
#else
#define ATT_NA_MAX ATT_QK_NA1
#endif

/* e^x: n = round(x log2 e), r = x - n ln2 (Cody-Waite, ln2 = C1 + C2), e^r
 * by cephes expf's polynomial on |r| <= ln2 / 2 (about 2 ulp), times 2^n;
 * results below 2^-150 (x < -104, -inf included) are +0. */
ATT_INLINE V ATT_FN(exp_poly)(V x)
{
    const V xc = v_min(v_max(x, v_set1(-104.0f)), v_set1(88.72f));
    const V n = v_round(v_mul(xc, v_set1(1.44269504088896341f)));
    V r = v_fnma(n, v_set1(0.693359375f), xc);
    r = v_fnma(n, v_set1(-2.12194440e-4f), r);
    V p = v_set1(1.9875691500e-4f);
    p = v_fma(p, r, v_set1(1.3981999507e-3f));
    p = v_fma(p, r, v_set1(8.3334519073e-3f));
    p = v_fma(p, r, v_set1(4.1665795894e-2f));
    p = v_fma(p, r, v_set1(1.6666665459e-1f));
    p = v_fma(p, r, v_set1(5.0000001201e-1f));
    p = v_fma(p, v_mul(r, r), v_add(r, v_set1(1.0f)));
    return v_zero_where_le(v_scale2(p, n), x, -104.0f);
}
#if !defined(MLA_HAVE_SLEEF)
ATT_INLINE V v_exp(V x) { return ATT_FN(exp_poly)(x); }
#endif

ATT_TARGET static void ATT_FN(decode)(const attn_keyfmt *f, const uint8_t *blk, int64_t t,
                                      float *out)
{
    attn_decode_key(f, blk, t, out);
}

/* st[i][r] = sum_d qt[d][r] kt[i][d] over MR registers of pairs, NA keys. */
ATT_INLINE void ATT_FN(qk_tile)(const int MR, const int NA, const float *qt, int64_t mp,
                                const float *kt, int64_t ks, int64_t D, float *st)
{
    V acc[ATT_NA_MAX][ATT_MR_MAX];
    const float *kr[ATT_NA_MAX];
    ATT_UNROLL for (int i = 0; i < NA; ++i)
    {
        kr[i] = kt + i * ks;
        ATT_UNROLL for (int r = 0; r < MR; ++r) acc[i][r] = v_zero();
    }
    for (int64_t d = 0; d < D; ++d) {
        V q[ATT_MR_MAX];
        ATT_UNROLL for (int r = 0; r < MR; ++r) q[r] = v_load(qt + d * mp + ATT_W * r);
        ATT_UNROLL for (int i = 0; i < NA; ++i)
        {
            const V b = v_set1(kr[i][d]);
            ATT_UNROLL for (int r = 0; r < MR; ++r) acc[i][r] = v_fma(q[r], b, acc[i][r]);
        }
    }
    ATT_UNROLL for (int i = 0; i < NA; ++i) ATT_UNROLL for (int r = 0; r < MR; ++r)
        v_store(st + i * mp + ATT_W * r, acc[i][r]);
}

/* ot[i][r] = (alpha ? alpha[i] ot[i][r] : 0) + sum_a pt[a][i] kt[a][r] over
 * MP pairs (O rows, stride ls) x NV vectors of value dims (pt, kt and ot
 * point at the tile's first pair and value dim). */
ATT_INLINE void ATT_FN(pv_tile)(const int MP, const int NV, const float *pt, int64_t mp,
                                const float *kt, int64_t ks, int nk, float *ot, int64_t ls,
                                const float *alpha)
{
    V acc[ATT_PV_MP][ATT_PV_NV];
    ATT_UNROLL for (int i = 0; i < MP; ++i)
    {
        const V al = alpha ? v_set1(alpha[i]) : v_zero();
        ATT_UNROLL for (int r = 0; r < NV; ++r) acc[i][r] =
            alpha ? v_mul(v_load(ot + i * ls + ATT_W * r), al) : v_zero();
    }
    for (int a = 0; a < nk; ++a) {
        V kv[ATT_PV_NV];
        const float *kr = kt + a * ks, *pr = pt + a * mp;
        ATT_UNROLL for (int r = 0; r < NV; ++r) kv[r] = v_load(kr + ATT_W * r);
        ATT_UNROLL for (int i = 0; i < MP; ++i)
        {
            const V b = v_set1(pr[i]);
            ATT_UNROLL for (int r = 0; r < NV; ++r) acc[i][r] = v_fma(kv[r], b, acc[i][r]);
        }
    }
    ATT_UNROLL for (int i = 0; i < MP; ++i) ATT_UNROLL for (int r = 0; r < NV; ++r)
        v_store(ot + i * ls + ATT_W * r, acc[i][r]);
}

/* The tile shapes the walkers use: scores, a full tile and a one-key tail
 * per width in groups; P @ V, a full tile and a one-vector tail. */
ATT_TARGET static void ATT_FN(qk_g1)(const float *qt, int64_t mp, const float *kt, int64_t ks,
                                     int64_t D, float *st)
{
    ATT_FN(qk_tile)(ATT_R, ATT_QK_NA1, qt, mp, kt, ks, D, st);
}
ATT_TARGET static void ATT_FN(pv_full)(const float *pt, int64_t mp, const float *kt, int64_t ks,
                                       int nk, float *ot, int64_t ls, const float *alpha)
{
    ATT_FN(pv_tile)(ATT_PV_MP, ATT_PV_NV, pt, mp, kt, ks, nk, ot, ls, alpha);
}
ATT_TARGET static void ATT_FN(pv_tail)(const float *pt, int64_t mp, const float *kt, int64_t ks,
                                       int nk, float *ot, int64_t ls, const float *alpha)
{
    ATT_FN(pv_tile)(ATT_PV_MP, 1, pt, mp, kt, ks, nk, ot, ls, alpha);
}
ATT_TARGET static void ATT_FN(qk_g1_tail)(const float *qt, int64_t mp, const float *kt, int64_t ks,
                                          int64_t D, float *st)
{
    ATT_FN(qk_tile)(ATT_R, 1, qt, mp, kt, ks, D, st);
}
#if ATT_GROUPS > 1
ATT_TARGET static void ATT_FN(qk_g2)(const float *qt, int64_t mp, const float *kt, int64_t ks,
                                     int64_t D, float *st)
{
    ATT_FN(qk_tile)(2 * ATT_R, ATT_QK_NA2, qt, mp, kt, ks, D, st);
}
ATT_TARGET static void ATT_FN(qk_g2_tail)(const float *qt, int64_t mp, const float *kt, int64_t ks,
                                          int64_t D, float *st)
{
    ATT_FN(qk_tile)(2 * ATT_R, 1, qt, mp, kt, ks, D, st);
}
#endif

/* Groups the next tile spans when `left` groups remain. */
static inline int ATT_FN(tile_groups)(int left) { return ATT_GROUPS > 1 && left >= 2 ? 2 : 1; }

ATT_TARGET static void ATT_FN(qk)(const float *qt, int64_t mp, int nv, const float *kt, int64_t ks,
                                  int nk, int64_t D, float *st, attn_pf *pf)
{
    for (int v = 0; v < nv;) {
        const int g = ATT_FN(tile_groups)(nv - v);
        const float *q = qt + VL * v;
        float *s = st + VL * v;
        int a = 0;
#if ATT_GROUPS > 1
        if (g == 2) {
            for (; a + ATT_QK_NA2 <= nk; a += ATT_QK_NA2, attn_pf_step(pf))
                ATT_FN(qk_g2)(q, mp, kt + a * ks, ks, D, s + a * mp);
            for (; a < nk; ++a, attn_pf_step(pf))
                ATT_FN(qk_g2_tail)(q, mp, kt + a * ks, ks, D, s + a * mp);
        }
#endif
        if (g == 1) {
            for (; a + ATT_QK_NA1 <= nk; a += ATT_QK_NA1, attn_pf_step(pf))
                ATT_FN(qk_g1)(q, mp, kt + a * ks, ks, D, s + a * mp);
            for (; a < nk; ++a, attn_pf_step(pf))
                ATT_FN(qk_g1_tail)(q, mp, kt + a * ks, ks, D, s + a * mp);
        }
        v += g;
    }
}

/* Value dims outer, pairs inner: a block of the key tile's values stays in
 * L1 while every pair's row of O takes it. */
ATT_TARGET static void ATT_FN(pv)(const float *pt, int64_t mp, int nv, const float *kt, int64_t ks,
                                  int nk, int64_t ls, float *ot, const float *alpha, attn_pf *pf)
{
    const int64_t w = ATT_PV_NV * ATT_W, np = (int64_t)nv * VL;
    for (int64_t v = 0; v < ls;) {
        const int full = v + w <= ls;
        for (int64_t m = 0; m < np; m += ATT_PV_MP, attn_pf_step(pf))
            (full ? ATT_FN(pv_full) : ATT_FN(pv_tail))(pt + m, mp, kt + v, ks, nk, ot + m * ls + v,
                                                       ls, alpha ? alpha + m : NULL);
        v += full ? w : ATT_W;
    }
}

/* The register-tile calls (prefetch steps) of qk + pv for one tile. */
static int64_t ATT_FN(calls)(int nv, int nk, int64_t ls)
{
    const int64_t w = ATT_PV_NV * ATT_W;
    int64_t n = (ls / w + ls % w / ATT_W) * ((int64_t)nv * VL / ATT_PV_MP);
    for (int v = 0; v < nv;) {
        const int g = ATT_FN(tile_groups)(nv - v);
#if ATT_GROUPS > 1
        const int qna = g == 2 ? ATT_QK_NA2 : ATT_QK_NA1;
#else
        const int qna = ATT_QK_NA1;
#endif
        n += nk / qna + nk % qna;
        v += g;
    }
    return n > 0 ? n : 1;
}

ATT_INLINE void ATT_FN(softmax_body)(const int poly, float *st, int64_t mp, int nv, int nk,
                                     float scale, const int32_t *kpos, const int32_t *plim,
                                     int mask, float *mx, float *l, float *alpha)
{
    const V ninf = v_set1(-INFINITY), sc = v_set1(scale);
    for (int j = 0; j < nv * ATT_R; ++j) {
        const int64_t off = (int64_t)ATT_W * j;
        const V old = v_load(mx + off);
        V t = ninf;
        for (int a = 0; a < nk; ++a) {
            float *p = st + a * mp + off;
            V x = v_mul(v_load(p), sc);
            if (mask)
                x = v_mask_above(x, kpos[a], plim + off);
            v_store(p, x);
            t = v_max(t, x);
        }
        const V nm = v_max(t, old), safe = v_ninf_to_zero(nm);
        const V al = poly ? ATT_FN(exp_poly)(v_sub(old, safe)) : v_exp(v_sub(old, safe));
        V sum = v_zero();
        for (int a = 0; a < nk; ++a) {
            float *p = st + a * mp + off;
            const V x = v_sub(v_load(p), safe), e = poly ? ATT_FN(exp_poly)(x) : v_exp(x);
            v_store(p, e);
            sum = v_add(sum, e);
        }
        v_store(l + off, v_fma(v_load(l + off), al, sum));
        v_store(mx + off, nm);
        v_store(alpha + off, al);
    }
}

ATT_TARGET static void ATT_FN(softmax)(float *st, int64_t mp, int nv, int nk, float scale,
                                       const int32_t *kpos, const int32_t *plim, int mask,
                                       float *mx, float *l, float *alpha)
{
    ATT_FN(softmax_body)(0, st, mp, nv, nk, scale, kpos, plim, mask, mx, l, alpha);
}
ATT_TARGET static void ATT_FN(softmax_poly)(float *st, int64_t mp, int nv, int nk, float scale,
                                            const int32_t *kpos, const int32_t *plim, int mask,
                                            float *mx, float *l, float *alpha)
{
    ATT_FN(softmax_body)(1, st, mp, nv, nk, scale, kpos, plim, mask, mx, l, alpha);
}

const attn_kernels ATT_CAT(mla_cpu_attn, ATT_SUFFIX) = {ATT_FN(decode), ATT_FN(qk), ATT_FN(softmax),
                                                        ATT_FN(pv), ATT_FN(calls),
                                                        ATT_FN(softmax_poly)};
