/* The attention kernels in portable C (cpu/attention_internal.h): plain
 * loops over the lanes that the compiler vectorizes for the baseline ISA;
 * exp is the C library's expf. No register tiles and no prefetching: the
 * copy for CPUs without AVX2 and for other architectures. */
#include <math.h>

#include "cpu/attention_internal.h"

static void decode_generic(const attn_keyfmt *f, const uint8_t *blk, int64_t t, float *out)
{
    attn_decode_key(f, blk, t, out);
}

static void qk_generic(const float *qt, int64_t mp, int nv, const float *kt, int64_t ks, int nk,
                       int64_t D, float *st, attn_pf *pf)
{
    (void)pf;
    const int64_t w = (int64_t)nv * VL;
    for (int a = 0; a < nk; ++a) {
        const float *kr = kt + a * ks;
        float *sr = st + a * mp;
        for (int64_t m = 0; m < w; ++m)
            sr[m] = 0.0f;
        for (int64_t d = 0; d < D; ++d) {
            const float kv = kr[d];
            const float *qr = qt + d * mp;
            MLA_SIMD for (int64_t m = 0; m < w; ++m) sr[m] += qr[m] * kv;
        }
    }
}

static void softmax_generic(float *st, int64_t mp, int nv, int nk, float scale, const int32_t *kpos,
                            const int32_t *plim, int mask, float *mx, float *l, float *alpha)
{
    const int64_t w = (int64_t)nv * VL;
    for (int64_t m = 0; m < w; ++m) {
        const float old = mx[m];
        float t = -INFINITY;
        for (int a = 0; a < nk; ++a) {
            float v = st[a * mp + m] * scale;
            if (mask && kpos[a] > plim[m])
                v = -INFINITY;
            st[a * mp + m] = v;
            t = v > t ? v : t;
        }
        const float nm = t > old ? t : old, safe = nm == -INFINITY ? 0.0f : nm;
        const float al = expf(old - safe);
        float sum = 0.0f;
        for (int a = 0; a < nk; ++a) {
            const float p = expf(st[a * mp + m] - safe);
            st[a * mp + m] = p;
            sum += p;
        }
        l[m] = l[m] * al + sum;
        mx[m] = nm;
        alpha[m] = al;
    }
}

static void pv_generic(const float *pt, int64_t mp, int nv, const float *kt, int64_t ks, int nk,
                       int64_t ls, float *ot, const float *alpha, attn_pf *pf)
{
    (void)pf;
    for (int64_t m = 0; m < (int64_t)nv * VL; ++m) {
        float *orow = ot + m * ls;
        const float al = alpha ? alpha[m] : 0.0f;
        if (alpha) {
            MLA_SIMD for (int64_t v = 0; v < ls; ++v) orow[v] *= al;
        } else {
            for (int64_t v = 0; v < ls; ++v)
                orow[v] = 0.0f;
        }
        for (int a = 0; a < nk; ++a) {
            const float p = pt[a * mp + m];
            const float *kr = kt + a * ks;
            MLA_SIMD for (int64_t v = 0; v < ls; ++v) orow[v] += p * kr[v];
        }
    }
}

const attn_kernels mla_cpu_attn_generic = {decode_generic, qk_generic, softmax_generic, pv_generic,
                                           NULL, NULL};
