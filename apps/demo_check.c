/* mla demo: the host float64 copy of the loaded layer, read back from
 * context memory and dequantized exactly (bf16, fp8 code * block or tensor
 * scale, MXFP4 code * 2^e), for the float64 layer reference
 * (conformance/layer_ref64.h). Read back rather than re-read from the file,
 * so a checkpoint directory and a tensor-parallel slice are checked as
 * loaded. */
#include "apps/demo.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A host copy of a contiguous tensor in context memory; NULL on failure. */
static void *download(mla_context *ctx, const mla_tensor *t)
{
    const size_t b = (size_t)mla_tensor_numel(t) * mla_dtype_size(t->dtype);
    void *h = malloc(b + 1);
    if (h && (!mla_tensor_is_contiguous(t) ||
              mla_memcpy(ctx, h, t->data, b, MLA_COPY_CONTEXT_TO_HOST) != MLA_OK)) {
        free(h);
        h = NULL;
    }
    return h;
}

/* The values of a vector (norm weight) or a projection [out, in] as the
 * layer uses them; NULL when its form is not one the check dequantizes. */
static double *values(mla_context *ctx, const mla_tensor *w, const mla_tensor *scale,
                      float tensor_scale, int *mx)
{
    const int64_t rows = w->shape[0], cols = w->ndim == 2 ? w->shape[1] : 1;
    const int64_t in = w->dtype == MLA_DTYPE_FP4X2 ? 2 * cols : cols, n = rows * in;
    uint8_t *raw = download(ctx, w);
    float *s = scale && scale->data ? download(ctx, scale) : NULL;
    double *out = raw ? malloc((size_t)n * sizeof *out) : NULL;
    const int64_t sb = (in + 127) / 128;
    const int per_tensor = scale && scale->data && mla_tensor_numel(scale) == 1;
    *mx = w->dtype == MLA_DTYPE_FP4X2;
    for (int64_t i = 0; out && i < n; ++i) {
        const int64_t r = i / in, c = i % in;
        switch (w->dtype) {
        case MLA_DTYPE_BF16:
            out[i] = mla_bf16_to_f32(((uint16_t *)raw)[i]);
            break;
        case MLA_DTYPE_F32:
            out[i] = ((float *)raw)[i];
            break;
        case MLA_DTYPE_F16:
            out[i] = mla_f16_to_f32(((uint16_t *)raw)[i]);
            break;
        case MLA_DTYPE_FP8_E4M3FN:
            out[i] = (double)mla_fp8_to_f32(raw[i], w->dtype) *
                     (per_tensor ? tensor_scale : s[(r / 128) * sb + c / 128]);
            break;
        case MLA_DTYPE_FP4X2: {
            const uint8_t b = raw[r * cols + c / 2];
            out[i] = mla_fp4_to_f32((uint8_t)(c & 1 ? b >> 4 : b & 0xF)) *
                     (double)mla_e8m0_to_f32(((uint8_t *)s)[r * (in / 32) + c / 32]);
            break;
        }
        default:
            free(out);
            out = NULL;
        }
    }
    free(raw);
    free(s);
    return out;
}

double *demo_weight_values(mla_context *ctx, const mla_tensor *w, const mla_tensor *scale,
                           float tensor_scale, int *mx)
{
    return values(ctx, w, scale, tensor_scale, mx);
}

/* W_kc [H, nope, L] from the loader's MXFP4 w_kc_fp4 (codes [H, L, nope/2]). */
static double *w_kc_values(mla_context *ctx, const mla_layer_weights_ex *w)
{
    const mla_model_config *c = &w->config;
    const int64_t H = c->heads, L = c->kv_lora, nope = c->nope;
    uint8_t *codes = download(ctx, &w->w_kc_fp4.codes), *sc = download(ctx, &w->w_kc_fp4.scales);
    double *out = codes && sc ? malloc((size_t)(H * nope * L) * sizeof *out) : NULL;
    for (int64_t h = 0; out && h < H; ++h)
        for (int64_t l = 0; l < L; ++l)
            for (int64_t i = 0; i < nope; ++i) {
                const int64_t row = h * L + l;
                const uint8_t b = codes[row * (nope / 2) + i / 2];
                out[(h * nope + i) * L + l] =
                    mla_fp4_to_f32((uint8_t)(i & 1 ? b >> 4 : b & 0xF)) *
                    (double)mla_e8m0_to_f32(sc[row * (nope / 32) + i / 32]);
            }
    free(codes), free(sc);
    return out;
}

int demo_ref_from_weights(mla_context *ctx, const mla_layer_weights_ex *w, const float *cos,
                          const float *sin, demo_ref *r, char *err, size_t errlen)
{
    memset(r, 0, sizeof *r);
    const mla_layer_weights *b = &w->base;
    const mla_model_config *c = &w->config;
    ref64_model *m = &r->m;
    int ok = 1, unused;
    const float ts = w->kv_b_tensor_scale;
    if (c->q_lora) {
        ok &= !!(r->wq_a = values(ctx, &b->q_a_proj.w, &b->q_a_proj.scale, 1, &m->mx[REF64_Q_A]));
        ok &= !!(r->ln_q = values(ctx, &b->q_a_layernorm, NULL, 1, &unused));
    }
    ok &= !!(r->wq_b = values(ctx, &b->q_b_proj.w, &b->q_b_proj.scale, 1, &m->mx[REF64_Q_B]));
    ok &= !!(r->wkv_a = values(ctx, &b->kv_a_proj_with_mqa.w, &b->kv_a_proj_with_mqa.scale, 1,
                               &m->mx[REF64_KV_A]));
    ok &= !!(r->ln_kv = values(ctx, &b->kv_a_layernorm, NULL, 1, &unused));
    ok &= !!(r->wkv_b = values(ctx, &b->kv_b_proj.w, &b->kv_b_proj.scale, ts, &m->mx[REF64_KV_B]));
    ok &= !!(r->wo = values(ctx, &b->o_proj.w, &b->o_proj.scale, 1, &m->mx[REF64_O]));
    if (ok && m->mx[REF64_KV_B])
        ok &= !!(r->w_kc = w_kc_values(ctx, w));
    if (!ok) {
        snprintf(err, errlen,
                 "a weight could not be read back or is in a form the check does "
                 "not dequantize");
        demo_ref_free(r);
        return -1;
    }
    m->cfg = *c;
    m->wq_a = r->wq_a, m->wq_b = r->wq_b, m->wkv_a = r->wkv_a, m->wkv_b = r->wkv_b, m->wo = r->wo;
    m->ln_q = r->ln_q, m->ln_kv = r->ln_kv, m->w_kc = r->w_kc;
    m->cos = cos, m->sin = sin;
    m->cache_dtype = MLA_DTYPE_BF16;
    m->k_scale = 1.0f;
    m->u_act = m->u_q = m->u_p = 1.0 / 256.0; /* bf16 intermediates, q_cat and P */
    m->u_out = 1.0 / 16777216.0; /* f32 y */
    return 0;
}

void demo_ref_free(demo_ref *r)
{
    double *all[] = {r->wq_a, r->wq_b, r->wkv_a, r->wkv_b, r->wo, r->ln_q, r->ln_kv, r->w_kc};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i)
        free(all[i]);
    memset(r, 0, sizeof *r);
}
