/* A random layer for the layer tests (tests/layer_model.h). */
#include "tests/layer_model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static float rnd(uint32_t *s)
{
    *s ^= *s << 13, *s ^= *s >> 17, *s ^= *s << 5;
    return (float)(*s >> 8) / 8388608.0f - 1.0f; /* [-1, 1) */
}

size_t lm_bytes(const mla_tensor *t)
{
    return (size_t)mla_tensor_numel(t) * mla_dtype_size(t->dtype);
}

mla_tensor lm_tensor(mla_context *ctx, mla_dtype dt, int32_t ndim, const int64_t *shape,
                     const void *host)
{
    mla_tensor t;
    mla_tensor_init(&t, NULL, dt, mla_context_memory(ctx), ndim, shape);
    size_t b = lm_bytes(&t);
    void *p = NULL;
    if (mla_malloc(ctx, b ? b : 1, &p) != MLA_OK)
        return t;
    if (host)
        mla_memcpy(ctx, p, host, b, MLA_COPY_HOST_TO_CONTEXT);
    else
        mla_memset(ctx, p, 0, b ? b : 1);
    t.data = p;
    return t;
}

void lm_free_tensor(mla_context *ctx, mla_tensor *t)
{
    if (t->data)
        mla_free(ctx, t->data);
    t->data = NULL;
}

void *lm_download(mla_context *ctx, const mla_tensor *t)
{
    size_t b = lm_bytes(t);
    void *h = malloc(b ? b : 1);
    mla_memcpy(ctx, h, t->data, b, MLA_COPY_CONTEXT_TO_HOST);
    return h;
}

void lm_random_bf16(uint32_t *state, int64_t n, float scale, uint16_t *bits, double *values)
{
    for (int64_t i = 0; i < n; ++i) {
        bits[i] = mla_f32_to_bf16(scale * rnd(state));
        if (values)
            values[i] = mla_bf16_to_f32(bits[i]);
    }
}

static void keep(layer_model *m, void *p) { m->bufs[m->nbufs++].p = p; }

/* A projection [out, in], uniform with std 1/sqrt(in), as bf16 or as fp8
 * codes with one scale per 128 x 128 block (amax / 448, DeepSeek's). */
static mla_weight projection(layer_model *m, uint32_t *st, int64_t out, int64_t in, int fp8,
                             double **host)
{
    const float a = (float)sqrt(3.0 / (double)in);
    float *v = malloc((size_t)(out * in) * sizeof *v);
    double *h = malloc((size_t)(out * in) * sizeof *h);
    for (int64_t i = 0; i < out * in; ++i)
        v[i] = mla_bf16_to_f32(mla_f32_to_bf16(a * rnd(st)));
    mla_weight w;
    memset(&w, 0, sizeof w);
    if (!fp8) {
        uint16_t *b = malloc((size_t)(out * in) * 2);
        for (int64_t i = 0; i < out * in; ++i)
            b[i] = mla_f32_to_bf16(v[i]), h[i] = v[i];
        w.w = lm_tensor(m->ctx, MLA_DTYPE_BF16, 2, (int64_t[]){out, in}, b);
        free(b);
    } else {
        const int64_t bo = (out + 127) / 128, bi = (in + 127) / 128;
        float *s = malloc((size_t)(bo * bi) * sizeof *s);
        uint8_t *c = malloc((size_t)(out * in));
        for (int64_t br = 0; br < bo; ++br)
            for (int64_t bc = 0; bc < bi; ++bc) {
                float amax = 0;
                for (int64_t r = br * 128; r < out && r < br * 128 + 128; ++r)
                    for (int64_t k = bc * 128; k < in && k < bc * 128 + 128; ++k)
                        amax = fmaxf(amax, fabsf(v[r * in + k]));
                s[br * bi + bc] = amax > 0 ? amax / 448.0f : 1.0f;
            }
        for (int64_t r = 0; r < out; ++r)
            for (int64_t k = 0; k < in; ++k) {
                const float sc = s[(r / 128) * bi + k / 128];
                c[r * in + k] =
                    mla_f32_to_fp8(v[r * in + k] / sc, MLA_DTYPE_FP8_E4M3FN, MLA_SATURATE);
                h[r * in + k] = (double)mla_fp8_to_f32(c[r * in + k], MLA_DTYPE_FP8_E4M3FN) * sc;
            }
        w.w = lm_tensor(m->ctx, MLA_DTYPE_FP8_E4M3FN, 2, (int64_t[]){out, in}, c);
        w.scale = lm_tensor(m->ctx, MLA_DTYPE_F32, 2, (int64_t[]){bo, bi}, s);
        keep(m, w.scale.data);
        free(s), free(c);
    }
    keep(m, w.w.data);
    free(v);
    *host = h;
    return w;
}

/* An MXFP4 projection [out, in]: the same values quantized along in by the
 * production rule, codes [out, in/2] FP4X2 and scales [out, in/32] E8M0;
 * *host the dequantized values. */
static mla_weight projection_mx(layer_model *m, uint32_t *st, int64_t out, int64_t in,
                                double **host)
{
    const float a = (float)sqrt(3.0 / (double)in);
    uint8_t *codes = malloc((size_t)(out * in / 2)), *scales = malloc((size_t)(out * in / 32));
    double *h = malloc((size_t)(out * in) * sizeof *h);
    for (int64_t b = 0; b < out * in / 32; ++b) {
        float v[32];
        for (int i = 0; i < 32; ++i)
            v[i] = a * rnd(st);
        mla_mxfp4_quantize_block(v, MLA_MXFP4_PRODUCTION, codes + b * 16, scales + b);
        for (int i = 0; i < 32; ++i)
            h[b * 32 + i] =
                mla_fp4_to_f32((uint8_t)((codes[b * 16 + i / 2] >> (4 * (i % 2))) & 15u)) *
                (double)mla_e8m0_to_f32(scales[b]);
    }
    mla_weight w;
    memset(&w, 0, sizeof w);
    w.w = lm_tensor(m->ctx, MLA_DTYPE_FP4X2, 2, (int64_t[]){out, in / 2}, codes);
    w.scale = lm_tensor(m->ctx, MLA_DTYPE_E8M0, 2, (int64_t[]){out, in / 32}, scales);
    keep(m, w.w.data);
    keep(m, w.scale.data);
    free(codes), free(scales);
    *host = h;
    return w;
}

/* The loader's MXFP4 W_kc and W_vc (include/mla/mla_weights.h): W_vc a view
 * of kv_b_proj; W_kc [H, L, nope/2] re-quantized along nope from kv_b_proj's
 * dequantized rows; m->w_kc its values [H, nope, L]. */
static void kv_b_mx_operands(layer_model *m)
{
    const mla_model_config *c = &m->cfg;
    const int64_t H = c->heads, L = c->kv_lora, nope = c->nope, nv = nope + c->v;
    const mla_weight *kv = &m->w.base.kv_b_proj;
    const mla_memory mem = kv->w.memory;
    m->w.w_vc_fp4.codes = (mla_tensor){(uint8_t *)kv->w.data + nope * L / 2,
                                       MLA_DTYPE_FP4X2,
                                       mem,
                                       3,
                                       {H, c->v, L / 2},
                                       {nv * L / 2, L / 2, 1}};
    m->w.w_vc_fp4.scales = (mla_tensor){(uint8_t *)kv->scale.data + nope * L / 32,
                                        MLA_DTYPE_E8M0,
                                        mem,
                                        3,
                                        {H, c->v, L / 32},
                                        {nv * L / 32, L / 32, 1}};
    m->w.w_vc_fp4.layout = MLA_SCALE_ROW_MAJOR;
    uint8_t *codes = malloc((size_t)(H * L * nope / 2)),
            *scales = malloc((size_t)(H * L * nope / 32));
    m->w_kc = malloc((size_t)(H * nope * L) * sizeof(double));
    for (int64_t h = 0; h < H; ++h)
        for (int64_t l = 0; l < L; ++l)
            for (int64_t b = 0; b < nope / 32; ++b) {
                float v[32];
                const int64_t blk = (h * L + l) * (nope / 32) + b;
                for (int i = 0; i < 32; ++i)
                    v[i] = (float)m->wkv_b[(h * nv + b * 32 + i) * L + l];
                mla_mxfp4_quantize_block(v, MLA_MXFP4_PRODUCTION, codes + blk * 16, scales + blk);
                for (int i = 0; i < 32; ++i)
                    m->w_kc[(h * nope + b * 32 + i) * L + l] =
                        mla_fp4_to_f32(
                            (uint8_t)((codes[blk * 16 + i / 2] >> (4 * (i % 2))) & 15u)) *
                        (double)mla_e8m0_to_f32(scales[blk]);
            }
    m->w.w_kc_fp4.codes = lm_tensor(m->ctx, MLA_DTYPE_FP4X2, 3, (int64_t[]){H, L, nope / 2}, codes);
    m->w.w_kc_fp4.scales =
        lm_tensor(m->ctx, MLA_DTYPE_E8M0, 3, (int64_t[]){H, L, nope / 32}, scales);
    m->w.w_kc_fp4.layout = MLA_SCALE_ROW_MAJOR;
    keep(m, m->w.w_kc_fp4.codes.data);
    keep(m, m->w.w_kc_fp4.scales.data);
    free(codes), free(scales);
}

/* kv_b_proj as the loader's FP8_TENSOR form (SGLang's block_quant_to_tensor_
 * quant): s = 448 / amax in fp32, code = sat_e4m3fn(x * s), scale 1 / s. */
static mla_weight projection_fp8_tensor(layer_model *m, uint32_t *st, int64_t out, int64_t in,
                                        double **host)
{
    const float a = (float)sqrt(3.0 / (double)in);
    float *v = malloc((size_t)(out * in) * sizeof *v), amax = 0;
    for (int64_t i = 0; i < out * in; ++i)
        v[i] = a * rnd(st), amax = fmaxf(amax, fabsf(v[i]));
    const float s = 448.0f / amax, inv = 1.0f / s;
    uint8_t *c = malloc((size_t)(out * in));
    double *h = malloc((size_t)(out * in) * sizeof *h);
    for (int64_t i = 0; i < out * in; ++i) {
        c[i] = mla_f32_to_fp8(v[i] * s, MLA_DTYPE_FP8_E4M3FN, MLA_SATURATE);
        h[i] = (double)mla_fp8_to_f32(c[i], MLA_DTYPE_FP8_E4M3FN) * inv;
    }
    mla_weight w;
    memset(&w, 0, sizeof w);
    w.w = lm_tensor(m->ctx, MLA_DTYPE_FP8_E4M3FN, 2, (int64_t[]){out, in}, c);
    w.scale = lm_tensor(m->ctx, MLA_DTYPE_F32, 2, (int64_t[]){1, 1}, &inv);
    keep(m, w.w.data);
    keep(m, w.scale.data);
    m->w.kv_b_tensor_scale = inv;
    free(v), free(c);
    *host = h;
    return w;
}

/* One projection in the model's format (0 bf16, 1 fp8 blocks, 2 MXFP4). */
static mla_weight proj_fmt(layer_model *m, uint32_t *st, int64_t out, int64_t in, int fmt,
                           double **host)
{
    return fmt == 2 ? projection_mx(m, st, out, in, host) : projection(m, st, out, in, fmt, host);
}

/* A norm weight [n] near 1 in bf16, or F32 when f32. */
static mla_tensor norm_weight(layer_model *m, uint32_t *st, int64_t n, float centre, int f32,
                              double **host)
{
    double *h = malloc((size_t)n * sizeof *h);
    uint16_t *b = malloc((size_t)n * 2);
    float *f = malloc((size_t)n * 4);
    for (int64_t i = 0; i < n; ++i) {
        b[i] = mla_f32_to_bf16(centre + 0.25f * rnd(st));
        f[i] = mla_bf16_to_f32(b[i]);
        h[i] = f[i];
    }
    mla_tensor t =
        lm_tensor(m->ctx, f32 ? MLA_DTYPE_F32 : MLA_DTYPE_BF16, 1, &n, f32 ? (void *)f : (void *)b);
    keep(m, t.data);
    free(b), free(f);
    if (host)
        *host = h;
    else
        free(h);
    return t;
}

static void make_indexer(layer_model *m, uint32_t *st)
{
    const mla_model_config *c = &m->cfg;
    const int64_t Hi = c->index_heads, D = c->index_head_dim;
    double *h = NULL;
    m->w.has_indexer = 1;
    m->w.indexer.wq_b = projection(m, st, Hi * D, c->q_lora, 0, &h);
    free(h);
    m->w.indexer.wk = projection(m, st, D, c->hidden, 0, &h);
    free(h);
    m->w.indexer.weights_proj = projection(m, st, Hi, c->hidden, 0, &h);
    free(h);
    m->w.indexer.k_norm_weight = norm_weight(m, st, D, 1.0f, 1, NULL);
    m->w.indexer.k_norm_bias = norm_weight(m, st, D, 0.0f, 1, NULL);
}

int layer_model_make(mla_context *ctx, const char *cfg_name, int fmt, uint32_t seed, layer_model *m)
{
    memset(m, 0, sizeof *m);
    m->ctx = ctx;
    if (mla_model_config_preset(cfg_name, &m->cfg) != MLA_OK)
        return -1;
    mla_model_config *c = &m->cfg;
    c->max_pos = c->max_pos < 4096 ? c->max_pos : 4096;
    uint32_t st = seed ? seed : 1;
    const int64_t H = c->heads, qk = c->nope + c->rope, in_q = c->q_lora ? c->q_lora : c->hidden;
    mla_layer_weights *b = &m->w.base;
    const int pf = fmt == 3 ? 1 : fmt; /* the other projections' format */
    const mla_weight_format f = fmt == 2  ? MLA_WEIGHT_MXFP4
                                : pf == 1 ? MLA_WEIGHT_FP8_BLOCK
                                          : MLA_WEIGHT_BF16;
    if (c->q_lora) {
        b->q_a_proj = proj_fmt(m, &st, c->q_lora, c->hidden, pf, &m->wq_a);
        b->q_a_layernorm = norm_weight(m, &st, c->q_lora, 1.0f, 0, &m->ln_q);
    }
    b->q_b_proj = proj_fmt(m, &st, H * qk, in_q, pf, &m->wq_b);
    b->kv_a_proj_with_mqa = proj_fmt(m, &st, c->kv_lora + c->rope, c->hidden, pf, &m->wkv_a);
    b->kv_a_layernorm = norm_weight(m, &st, c->kv_lora, 1.0f, 0, &m->ln_kv);
    /* kv_b_proj: bf16, MXFP4, or (fmt 3) fp8 with one scale per tensor (the
     * absorb cannot take fp8 blocks) */
    m->w.kv_b_tensor_scale = 1.0f;
    if (fmt == 3)
        b->kv_b_proj = projection_fp8_tensor(m, &st, H * (c->nope + c->v), c->kv_lora, &m->wkv_b);
    else
        b->kv_b_proj =
            proj_fmt(m, &st, H * (c->nope + c->v), c->kv_lora, fmt == 2 ? 2 : 0, &m->wkv_b);
    if (fmt == 2)
        kv_b_mx_operands(m);
    b->o_proj = proj_fmt(m, &st, c->hidden, H * c->v, pf, &m->wo);
    const mla_weight_format kvf = fmt == 2   ? MLA_WEIGHT_MXFP4
                                  : fmt == 3 ? MLA_WEIGHT_FP8_TENSOR
                                             : MLA_WEIGHT_BF16;
    m->w.formats = (mla_layer_weight_formats){f, f, f, kvf, f, 0, 0, 0};
    m->fmt = fmt;
    if (c->index_heads > 0)
        make_indexer(m, &st);
    const int64_t P = c->max_pos, half = c->rope / 2;
    m->hcos = malloc((size_t)(P * half) * sizeof(float));
    m->hsin = malloc((size_t)(P * half) * sizeof(float));
    if (mla_rope_table_build(&c->rope_cfg, P, m->hcos, m->hsin) != MLA_OK)
        return -1;
    m->cos = lm_tensor(ctx, MLA_DTYPE_F32, 2, (int64_t[]){P, half}, m->hcos);
    m->sin = lm_tensor(ctx, MLA_DTYPE_F32, 2, (int64_t[]){P, half}, m->hsin);
    keep(m, m->cos.data);
    keep(m, m->sin.data);
    return 0;
}

void layer_model_free(layer_model *m)
{
    for (int i = 0; i < m->nbufs; ++i)
        mla_free(m->ctx, m->bufs[i].p);
    double *h[] = {m->wq_a, m->wq_b, m->wkv_a, m->wkv_b, m->wo, m->ln_q, m->ln_kv, m->w_kc};
    for (size_t i = 0; i < sizeof h / sizeof h[0]; ++i)
        free(h[i]);
    free(m->hcos), free(m->hsin);
}

void layer_model_ref(const layer_model *m, ref64_model *r)
{
    memset(r, 0, sizeof *r);
    r->cfg = m->cfg;
    r->wq_a = m->wq_a, r->wq_b = m->wq_b, r->wkv_a = m->wkv_a, r->wkv_b = m->wkv_b, r->wo = m->wo;
    r->ln_q = m->ln_q, r->ln_kv = m->ln_kv;
    r->cos = m->hcos, r->sin = m->hsin;
    r->w_kc = m->w_kc;
    for (int i = 0; i < 5; ++i)
        r->mx[i] = m->fmt == 2;
    r->cache_dtype = MLA_DTYPE_BF16;
    r->k_scale = 1.0f;
    r->u_act = r->u_q = r->u_p = 1.0 / 256.0;
    r->u_out = 1.0 / 256.0;
}
