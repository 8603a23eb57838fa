/* The float64 reference layer with its propagated error variances; the
 * model and the formulas are in conformance/layer_ref64.h. */
#include "conformance/layer_ref64.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define U32 (1.0 / 16777216.0) /* fp32 unit roundoff, 2^-24 */

static double sq(double v) { return v * v; }

void ref64_cache_init(ref64_cache *c, const mla_model_config *cfg, int64_t num_slots)
{
    const int64_t D = cfg->kv_lora + cfg->rope;
    c->num_slots = num_slots;
    c->row = calloc((size_t)(num_slots * D), sizeof(double));
    c->var = calloc((size_t)(num_slots * D), sizeof(double));
    c->pre = c->vpre = NULL;
}

void ref64_cache_free(ref64_cache *c)
{
    free(c->row);
    free(c->var);
    free(c->pre);
    free(c->vpre);
}

void ref64_cache_from_normal(ref64_cache *c, const mla_model_config *cfg, const void *bytes,
                             mla_dtype dtype, float k_scale)
{
    const int64_t n = c->num_slots * (cfg->kv_lora + cfg->rope);
    for (int64_t i = 0; i < n; ++i) {
        c->row[i] = dtype == MLA_DTYPE_BF16
                        ? mla_bf16_to_f32(((const uint16_t *)bytes)[i])
                        : (double)mla_fp8_to_f32(((const uint8_t *)bytes)[i], dtype) * k_scale;
        c->var[i] = 0;
    }
}

/* MXFP4 quantization of a row of K values (K % 32 == 0) as the library's
 * GEMMs do it to their activations, in place, with the flip term. */
static void mx_quant(double *x, double *vx, int64_t K)
{
    for (int64_t b = 0; b < K; b += 32) {
        float f[32];
        uint8_t codes[16], scale = 0;
        for (int i = 0; i < 32; ++i)
            f[i] = (float)x[b + i];
        mla_mxfp4_quantize_block(f, MLA_MXFP4_PRODUCTION, codes, &scale);
        const double s = mla_e8m0_to_f32(scale);
        for (int i = 0; i < 32; ++i) {
            const double q = mla_fp4_to_f32((uint8_t)((codes[i / 2] >> (4 * (i % 2))) & 15u));
            const double a = fabs(q), step = (a < 2 ? 0.5 : a < 4 ? 1.0 : 2.0) * s;
            x[b + i] = q * s;
            vx[b + i] += 2.0 * step * sqrt(vx[b + i]);
        }
    }
}

/* y[T, N] = x[T, K] @ W[N, K]^T with the variances of the linear model;
 * u_out: the rounding of y; mx: x is MXFP4-quantized first. */
static void linear(int64_t T, int64_t N, int64_t K, const double *x_in, const double *vx_in,
                   int64_t ldx_in, const double *w, double u_out, double *y, double *vy,
                   int64_t ldy, int mx)
{
    double *xq = malloc((size_t)(T * K) * 8), *vq = malloc((size_t)(T * K) * 8);
    for (int64_t t = 0; t < T; ++t) {
        memcpy(xq + t * K, x_in + t * ldx_in, (size_t)K * 8);
        memcpy(vq + t * K, vx_in + t * ldx_in, (size_t)K * 8);
        if (mx)
            mx_quant(xq + t * K, vq + t * K, K);
    }
    const double *x = xq, *vx = vq;
    const int64_t ldx = K;
    for (int64_t t = 0; t < T; ++t)
        for (int64_t n = 0; n < N; ++n) {
            const double *wr = w + n * K, *xr = x + t * ldx, *vr = vx + t * ldx;
            double s = 0, a = 0, v = 0;
            for (int64_t k = 0; k < K; ++k) {
                s += wr[k] * xr[k];
                a += fabs(wr[k] * xr[k]);
                v += sq(wr[k]) * vr[k];
            }
            y[t * ldy + n] = s;
            vy[t * ldy + n] = v + sq(U32 * sqrt((double)K) * a) + sq(u_out * s);
        }
    free(xq);
    free(vq);
}

/* In place over rows [T, n] at stride ld. */
static void rmsnorm(int64_t T, int64_t n, double *x, double *vx, int64_t ld, const double *w,
                    double eps, double u_out)
{
    for (int64_t t = 0; t < T; ++t) {
        double *r = x + t * ld, *vr = vx + t * ld, ss = 0, sv = 0;
        for (int64_t i = 0; i < n; ++i) {
            ss += r[i] * r[i];
            sv += sq(r[i]) * vr[i];
        }
        const double denom = ss + (double)n * eps, inv = 1.0 / sqrt(denom / (double)n);
        const double rel_var = sv / sq(denom); /* var(r) / r^2 */
        for (int64_t i = 0; i < n; ++i) {
            const double yv = r[i] * inv * w[i];
            vr[i] =
                sq(w[i] * inv) * (vr[i] + sq(r[i]) * rel_var) + sq(4 * U32 * yv) + sq(u_out * yv);
            r[i] = yv;
        }
    }
}

void ref64_rope_row(double *x, double *vx, int64_t R, const float *cos, const float *sin,
                    int64_t pos, int neox, double u_out)
{
    const int64_t half = R / 2;
    for (int64_t i = 0; i < half; ++i) {
        const int64_t i0 = neox ? i : 2 * i, i1 = neox ? i + half : 2 * i + 1;
        const double c = cos[pos * half + i], s = sin[pos * half + i];
        const double a = x[i0], b = x[i1], va = vx[i0], vb = vx[i1];
        const double oa = a * c - b * s, ob = a * s + b * c;
        vx[i0] = sq(c) * va + sq(s) * vb + sq(U32 * (fabs(a * c) + fabs(b * s))) + sq(u_out * oa);
        vx[i1] = sq(s) * va + sq(c) * vb + sq(U32 * (fabs(a * s) + fabs(b * c))) + sq(u_out * ob);
        x[i0] = oa, x[i1] = ob;
    }
}

/* Interleaved RoPE of one row of R values by pos, in place. */
static void rope(double *x, double *vx, int64_t R, const ref64_model *m, int64_t pos, double u_out)
{
    ref64_rope_row(x, vx, R, m->cos, m->sin, pos, 0, u_out);
}

/* The value a cache of dtype dt (fp8: stored as v / k) holds for v, and
 * the size of one unit in its last place there (for the flip term). */
static double cache_store(mla_dtype dt, float k, double v, double *ulp)
{
    if (dt == MLA_DTYPE_BF16) {
        const double q = mla_bf16_to_f32(mla_f32_to_bf16((float)v));
        /* bf16: 8 significant bits; below the normal range, the subnormal step */
        *ulp = (q != 0 ? ldexp(1.0, ilogb(q) - 7) : 0.0) + ldexp(1.0, -133);
        return q;
    }
    const float code = mla_fp8_to_f32(mla_f32_to_fp8((float)v / k, dt, MLA_SATURATE), dt);
    const int min_exp = dt == MLA_DTYPE_FP8_E4M3FN ? -6 : -7;
    const int e = code != 0 && ilogb(code) > min_exp ? ilogb(code) : min_exp;
    *ulp = ldexp(1.0, e - 3) * k;
    return (double)code * k;
}

/* FP8_SCALED's scale of a group of 128 (MLA.md section 4):
 * 2^ceil(log2(max(amax / fp8_max, 1e-4))). */
static float group_scale(const ref64_model *m, const double *row)
{
    double amax = 0;
    for (int i = 0; i < 128; ++i)
        amax = fmax(amax, fabs(row[i]));
    const double fmax8 = m->cache_dtype == MLA_DTYPE_FP8_E4M3FNUZ ? 224.0 : 448.0;
    int e;
    const double f = frexp(fmax(amax / fmax8, 1e-4), &e); /* f in [0.5, 1) */
    return (float)ldexp(1.0, f == 0.5 ? e - 1 : e);
}

static void write_cache(const ref64_model *m, ref64_cache *c, int64_t slot, const double *row,
                        const double *var)
{
    const int64_t L = m->cfg.kv_lora, D = L + m->cfg.rope;
    float s = m->k_scale;
    for (int64_t d = 0; d < D; ++d) {
        double ulp = 0;
        mla_dtype dt = m->cache_dtype;
        if (m->fp8_scaled && d % 128 == 0 && d < L)
            s = group_scale(m, row + d);
        if (m->fp8_scaled && d >= L) /* the rope part: bf16, unscaled */
            dt = MLA_DTYPE_BF16;
        c->row[slot * D + d] = cache_store(dt, s, row[d], &ulp);
        c->var[slot * D + d] = var[d] + 2.0 * ulp * sqrt(var[d]);
        if (c->pre)
            c->pre[slot * D + d] = row[d], c->vpre[slot * D + d] = var[d];
    }
}

/* A score: the dot product s over `dims` terms (a = sum |q k|, v its
 * inputs' variance) scaled into *p with its variance *vs; returns the
 * running max. */
static double score(double s, double a, double v, double scale, int64_t dims, double *p,
                    double *vs, double mx)
{
    *p = s * scale;
    *vs = sq(scale) * (v + sq(U32 * sqrt((double)dims) * a)) + sq(4 * U32 * *p);
    return *p > mx ? *p : mx;
}

/* p_i = e^(p_i - mx) in place; returns their sum. */
static double exp_sum(double *p, int64_t n, double mx)
{
    double z = 0;
    for (int64_t i = 0; i < n; ++i)
        z += p[i] = exp(p[i] - mx);
    return z;
}

/* Attention of one (row, head): q [L + R] against the listed cache rows;
 * o [L] and its variances. */
static void attend(const ref64_model *m, const ref64_cache *c, const double *q, const double *vq,
                   const int64_t *rows, int64_t n, double *o, double *vo, double *p, double *vs)
{
    const int64_t L = m->cfg.kv_lora, D = L + m->cfg.rope;
    const double scale = mla_softmax_scale(&m->cfg);
    double mx = -INFINITY;
    for (int64_t i = 0; i < n; ++i) {
        const double *k = c->row + rows[i] * D, *vk = c->var + rows[i] * D;
        double s = 0, a = 0, v = 0;
        for (int64_t d = 0; d < D; ++d) {
            s += q[d] * k[d];
            a += fabs(q[d] * k[d]);
            v += sq(q[d]) * vk[d] + sq(k[d]) * vq[d];
        }
        mx = score(s, a, v, scale, D, &p[i], &vs[i], mx);
    }
    const double z = exp_sum(p, n, mx);
    for (int64_t l = 0; l < L; ++l)
        o[l] = 0, vo[l] = 0;
    if (n == 0)
        return;
    for (int64_t i = 0; i < n; ++i) {
        p[i] /= z;
        for (int64_t l = 0; l < L; ++l)
            o[l] += p[i] * c->row[rows[i] * D + l];
    }
    for (int64_t i = 0; i < n; ++i)
        for (int64_t l = 0; l < L; ++l) {
            const double k = c->row[rows[i] * D + l];
            vo[l] += sq(p[i]) * (vs[i] * sq(k - o[l]) + c->var[rows[i] * D + l]) +
                     sq(m->u_p * p[i] * k);
        }
    for (int64_t l = 0; l < L; ++l)
        vo[l] += sq(4 * U32 * o[l]) + sq(m->u_act * o[l]);
}

/* Head h's decompression of cache row `row`: K_nope [nope] and V [v] with
 * their variances (the library's fp32 GEMM rounded to the kv dtype, u_q). */
static void decompress(const ref64_model *m, const ref64_cache *c, int64_t row, int64_t h,
                       double *kv, double *vkv)
{
    const mla_model_config *cf = &m->cfg;
    const int64_t L = cf->kv_lora, D = L + cf->rope, nv = cf->nope + cf->v;
    const double *x = c->row + row * D, *vx = c->var + row * D;
    for (int64_t j = 0; j < nv; ++j) {
        const double *w = m->wkv_b + (h * nv + j) * L;
        double acc = 0, a = 0, v = 0;
        for (int64_t d = 0; d < L; ++d)
            acc += w[d] * x[d], a += fabs(w[d] * x[d]), v += sq(w[d]) * vx[d];
        kv[j] = acc;
        vkv[j] = v + sq(U32 * sqrt((double)L) * a) + sq(m->u_q * acc);
    }
}

/* The expanded form's attention of one (row, head): q [nope + R] (q_nope
 * unabsorbed, q_pe rotated) against the listed rows decompressed for head
 * h; o [v] and its variances. kv, vkv: scratch [n, nope + v]. */
static void attend_expanded(const ref64_model *m, const ref64_cache *c, int64_t h,
                            const double *q, const double *vq, const int64_t *rows, int64_t n,
                            double *o, double *vo, double *p, double *vs, double *kv, double *vkv)
{
    const mla_model_config *cf = &m->cfg;
    const int64_t L = cf->kv_lora, D = L + cf->rope, nope = cf->nope, R = cf->rope, V = cf->v;
    const int64_t nv = nope + V, Q = nope + R;
    const double scale = mla_softmax_scale(cf);
    double mx = -INFINITY;
    for (int64_t i = 0; i < n; ++i) {
        double *k = kv + i * nv, *vk = vkv + i * nv;
        decompress(m, c, rows[i], h, k, vk);
        const double *pe = c->row + rows[i] * D + L, *vpe = c->var + rows[i] * D + L;
        double s = 0, a = 0, v = 0;
        for (int64_t d = 0; d < Q; ++d) {
            const double kd = d < nope ? k[d] : pe[d - nope];
            const double vkd = d < nope ? vk[d] : vpe[d - nope];
            s += q[d] * kd, a += fabs(q[d] * kd), v += sq(q[d]) * vkd + sq(kd) * vq[d];
        }
        mx = score(s, a, v, scale, Q, &p[i], &vs[i], mx);
    }
    const double z = exp_sum(p, n, mx);
    for (int64_t j = 0; j < V; ++j) {
        o[j] = 0, vo[j] = 0;
        for (int64_t i = 0; i < n; ++i)
            o[j] += p[i] / z * kv[i * nv + nope + j];
        for (int64_t i = 0; i < n; ++i) {
            const double pi = p[i] / z, val = kv[i * nv + nope + j];
            vo[j] += sq(pi) * (vs[i] * sq(val - o[j]) + vkv[i * nv + nope + j]) +
                     sq(m->u_p * pi * val);
        }
        vo[j] += sq(4 * U32 * o[j]) + sq(m->u_act * o[j]);
    }
}

typedef struct scratch {
    double *qa, *vqa, *kv, *vkv, *q, *vq, *qc, *vqc, *ol, *vol, *o, *vo, *p, *vs;
    double *ekv, *evkv; /* the expanded form's decompressed keys [keys, nope + v] */
    int64_t *rows;
} scratch;

static void *zalloc(int64_t n, size_t size) { return calloc((size_t)(n > 0 ? n : 1), size); }

static void scratch_alloc(scratch *s, const mla_model_config *c, int64_t T, int64_t keys)
{
    const int64_t H = c->heads, qk = c->nope + c->rope, D = c->kv_lora + c->rope;
    const int64_t qa = c->q_lora ? c->q_lora : H * qk;
    s->qa = zalloc(T * qa, 8), s->vqa = zalloc(T * qa, 8);
    s->kv = zalloc(T * D, 8), s->vkv = zalloc(T * D, 8);
    s->q = zalloc(T * H * qk, 8), s->vq = zalloc(T * H * qk, 8);
    s->qc = zalloc(T * H * D, 8), s->vqc = zalloc(T * H * D, 8);
    s->ol = zalloc(T * H * c->kv_lora, 8), s->vol = zalloc(T * H * c->kv_lora, 8);
    s->o = zalloc(T * H * c->v, 8), s->vo = zalloc(T * H * c->v, 8);
    s->p = zalloc(keys, 8), s->vs = zalloc(keys, 8), s->rows = zalloc(keys, 8);
    s->ekv = zalloc(keys * (c->nope + c->v), 8), s->evkv = zalloc(keys * (c->nope + c->v), 8);
}

static void scratch_free(scratch *s)
{
    double *all[] = {s->qa, s->vqa, s->kv, s->vkv, s->q,  s->vq, s->qc,  s->vqc,
                     s->ol, s->vol, s->o,  s->vo,  s->p,  s->vs, s->ekv, s->evkv};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i)
        free(all[i]);
    free(s->rows);
}

/* Steps 1-6: q_cat [T, H, L + R] in s->qc and the cache rows. */
static void prepare(const ref64_model *m, ref64_cache *cache, int64_t T, const double *x,
                    const int64_t *pos, const int64_t *slot, scratch *s)
{
    const mla_model_config *c = &m->cfg;
    const int64_t H = c->heads, L = c->kv_lora, R = c->rope, qk = c->nope + R, D = L + R;
    const int64_t hid = c->hidden, nv = c->nope + c->v;
    const double u = m->u_act;
    double *vx = zalloc(T * hid, 8); /* x is exact */
    linear(T, D, hid, x, vx, hid, m->wkv_a, u, s->kv, s->vkv, D, m->mx[REF64_KV_A]);
    rmsnorm(T, L, s->kv, s->vkv, D, m->ln_kv, c->rms_eps, u);
    if (c->q_lora) {
        linear(T, c->q_lora, hid, x, vx, hid, m->wq_a, u, s->qa, s->vqa, c->q_lora,
               m->mx[REF64_Q_A]);
        rmsnorm(T, c->q_lora, s->qa, s->vqa, c->q_lora, m->ln_q, c->rms_eps, u);
        linear(T, H * qk, c->q_lora, s->qa, s->vqa, c->q_lora, m->wq_b, u, s->q, s->vq, H * qk,
               m->mx[REF64_Q_B]);
    } else {
        linear(T, H * qk, hid, x, vx, hid, m->wq_b, u, s->q, s->vq, H * qk, m->mx[REF64_Q_B]);
    }
    free(vx);
    for (int64_t t = 0; t < T; ++t)
        for (int64_t h = 0; h < H; ++h) {
            /* absorb: q_cat[:L] = q_nope @ W_kc[h], W_kc[h][i][l] = kv_b[h*nv + i][l]
             */
            double qn[1024], vqn[1024]; /* nope + R <= 1024 */
            memcpy(qn, s->q + (t * H + h) * qk, (size_t)qk * 8);
            memcpy(vqn, s->vq + (t * H + h) * qk, (size_t)qk * 8);
            if (m->mx[REF64_KV_B])
                mx_quant(qn, vqn, c->nope);
            double *qc = s->qc + (t * H + h) * D, *vqc = s->vqc + (t * H + h) * D;
            for (int64_t l = 0; l < L; ++l) {
                double acc = 0, a = 0, v = 0;
                for (int64_t i = 0; i < c->nope; ++i) {
                    const double w = m->w_kc ? m->w_kc[(h * c->nope + i) * L + l]
                                             : m->wkv_b[(h * nv + i) * L + l];
                    acc += qn[i] * w, a += fabs(qn[i] * w), v += sq(w) * vqn[i];
                }
                qc[l] = acc;
                vqc[l] = v + sq(U32 * sqrt((double)c->nope) * a) + sq(m->u_q * acc);
            }
            memcpy(qc + L, s->q + (t * H + h) * qk + c->nope, (size_t)R * 8);
            memcpy(vqc + L, s->vq + (t * H + h) * qk + c->nope, (size_t)R * 8);
            rope(qc + L, vqc + L, R, m, pos[t], m->u_q);
        }
    for (int64_t t = 0; t < T; ++t) {
        /* k_pe is rotated from the act-rounded value and rounded once to the cache
         */
        rope(s->kv + t * D + L, s->vkv + t * D + L, R, m, pos[t], 0.0);
        if (slot[t] >= 0)
            write_cache(m, cache, slot[t], s->kv + t * D, s->vkv + t * D);
    }
}

int ref64_selection_valid(const int32_t *idx, int64_t K, int64_t p)
{
    int64_t n = 0;
    for (int64_t i = 0; i < K; ++i) {
        if (idx[i] < 0)
            continue;
        if (idx[i] > p)
            return 0;
        for (int64_t j = 0; j < i; ++j)
            if (idx[j] == idx[i])
                return 0;
        ++n;
    }
    return n == (K < p + 1 ? K : p + 1);
}

void ref64_linear(int64_t T, int64_t N, int64_t K, const double *x, const double *vx,
                  const double *w, double u_out, double *y, double *vy)
{
    linear(T, N, K, x, vx, K, w, u_out, y, vy, N, 0);
}

void ref64_prepare(const ref64_model *m, ref64_cache *cache, int64_t T, const double *x,
                   const int64_t *pos, const int64_t *slot, double *q_cat, double *sd)
{
    const mla_model_config *c = &m->cfg;
    const int64_t n = T * c->heads * (c->kv_lora + c->rope);
    scratch s;
    scratch_alloc(&s, c, T, 1);
    prepare(m, cache, T, x, pos, slot, &s);
    for (int64_t i = 0; i < n; ++i)
        q_cat[i] = s.qc[i], sd[i] = sqrt(s.vqc[i]);
    scratch_free(&s);
}

void ref64_step(const ref64_model *m, ref64_cache *cache, int64_t T, const double *x,
                const int64_t *pos, const int64_t *slot, int64_t S, const int32_t *cu,
                const int32_t *ctx, const int32_t *block_table, int64_t max_blocks, int64_t bs,
                const int32_t *topk, int64_t K, double *y, double *sd)
{
    const mla_model_config *c = &m->cfg;
    const int64_t H = c->heads, L = c->kv_lora, D = L + c->rope, nv = c->nope + c->v, V = c->v;
    int64_t keys = 1;
    for (int64_t s = 0; s < S; ++s)
        keys = ctx[s] > keys ? ctx[s] : keys;
    keys = topk && K > keys ? K : keys;
    scratch s;
    scratch_alloc(&s, c, T, keys);
    prepare(m, cache, T, x, pos, slot, &s);
    for (int64_t q = 0; q < S; ++q)
        for (int64_t r = cu[q]; r < cu[q + 1]; ++r) {
            const int64_t p = ctx[q] - (cu[q + 1] - r); /* the row's position */
            int64_t n = 0;
            for (int64_t i = 0; i < (topk ? K : p + 1); ++i) {
                const int64_t lp = topk ? topk[r * K + i] : i;
                if (lp < 0 || lp > p || ctx[q] == 0)
                    continue;
                s.rows[n++] = (int64_t)block_table[q * max_blocks + lp / bs] * bs + lp % bs;
            }
            for (int64_t h = 0; h < H && !m->expanded; ++h)
                attend(m, cache, s.qc + (r * H + h) * D, s.vqc + (r * H + h) * D, s.rows, n,
                       s.ol + (r * H + h) * L, s.vol + (r * H + h) * L, s.p, s.vs);
            for (int64_t h = 0; h < H && m->expanded; ++h) {
                /* [q_nope (rounded to q's dtype) | q_pe rotated in q_cat] */
                const int64_t qk = c->nope + c->rope;
                double qe[1024], vqe[1024];
                const double *qn = s.q + (r * H + h) * qk, *vqn = s.vq + (r * H + h) * qk;
                for (int64_t i = 0; i < c->nope; ++i)
                    qe[i] = qn[i], vqe[i] = vqn[i] + sq(m->u_q * qn[i]);
                memcpy(qe + c->nope, s.qc + (r * H + h) * D + L, (size_t)c->rope * 8);
                memcpy(vqe + c->nope, s.vqc + (r * H + h) * D + L, (size_t)c->rope * 8);
                attend_expanded(m, cache, h, qe, vqe, s.rows, n, s.o + (r * H + h) * V,
                                s.vo + (r * H + h) * V, s.p, s.vs, s.ekv, s.evkv);
            }
        }
    /* W_vc: o[t, h, j] = sum_l o_lat[t, h, l] * kv_b[h*nv + nope + j][l] */
    for (int64_t t = 0; t < T && !m->expanded; ++t)
        for (int64_t h = 0; h < H; ++h)
            linear(1, V, L, s.ol + (t * H + h) * L, s.vol + (t * H + h) * L, L,
                   m->wkv_b + (h * nv + c->nope) * L, m->u_act, s.o + (t * H + h) * V,
                   s.vo + (t * H + h) * V, V, m->mx[REF64_KV_B]);
    linear(T, c->hidden, H * V, s.o, s.vo, H * V, m->wo, m->u_out, y, sd, c->hidden,
           m->mx[REF64_O]);
    for (int64_t i = 0; i < T * c->hidden; ++i)
        sd[i] = sqrt(sd[i]);
    scratch_free(&s);
}
