/* mla demo: the host float64 copy of a layer's weights, read back from its
 * safetensors file and dequantized exactly (bf16, fp8 code * block scale),
 * for the float64 layer reference (conformance/layer_ref64.h). */
#include "apps/demo.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static double *read_weight(mla_safetensors *f, const char *prefix, const char *name, int64_t *rows,
                           int64_t *cols, char *err, size_t errlen)
{
    char full[256], sname[256];
    snprintf(full, sizeof full, "%s%s.weight", prefix, name);
    mla_safetensors_info info;
    if (mla_safetensors_find(NULL, f, full, &info) != MLA_OK || info.ndim < 1 || info.ndim > 2) {
        snprintf(err, errlen, "%s: missing or not a matrix", full);
        return NULL;
    }
    const int64_t r = info.shape[0], c = info.ndim == 2 ? info.shape[1] : 1, n = r * c;
    void *raw = malloc((size_t)info.bytes);
    double *out = malloc((size_t)n * sizeof *out);
    mla_tensor t;
    mla_tensor_init(&t, raw, info.dtype, MLA_MEMORY_HOST, info.ndim, info.shape);
    int ok = raw && out && mla_safetensors_read(NULL, f, full, &t) == MLA_OK;
    float *scale = NULL;
    if (ok && info.dtype == MLA_DTYPE_FP8_E4M3FN) {
        snprintf(sname, sizeof sname, "%s%s.weight_scale_inv", prefix, name);
        mla_safetensors_info si;
        ok = mla_safetensors_find(NULL, f, sname, &si) == MLA_OK && si.dtype == MLA_DTYPE_F32;
        scale = ok ? malloc((size_t)si.bytes) : NULL;
        mla_tensor st;
        mla_tensor_init(&st, scale, MLA_DTYPE_F32, MLA_MEMORY_HOST, si.ndim, si.shape);
        ok = ok && scale && mla_safetensors_read(NULL, f, sname, &st) == MLA_OK;
    }
    const int64_t bc = (c + 127) / 128;
    for (int64_t i = 0; ok && i < n; ++i) {
        switch (info.dtype) {
        case MLA_DTYPE_BF16:
            out[i] = mla_bf16_to_f32(((uint16_t *)raw)[i]);
            break;
        case MLA_DTYPE_F32:
            out[i] = ((float *)raw)[i];
            break;
        case MLA_DTYPE_FP8_E4M3FN:
            out[i] = (double)mla_fp8_to_f32(((uint8_t *)raw)[i], MLA_DTYPE_FP8_E4M3FN) *
                     scale[(i / c / 128) * bc + (i % c) / 128];
            break;
        default:
            ok = 0;
        }
    }
    if (!ok) {
        snprintf(err, errlen, "%s: unreadable, or a format the check does not dequantize", full);
        free(out);
        out = NULL;
    }
    free(raw);
    free(scale);
    *rows = r, *cols = c;
    return out;
}

int demo_ref_load(const char *path, const mla_model_config *cfg, const float *cos, const float *sin,
                  demo_ref *r, char *err, size_t errlen)
{
    memset(r, 0, sizeof *r);
    mla_safetensors *f = NULL;
    if (mla_safetensors_open(NULL, path, &f) != MLA_OK) {
        snprintf(err, errlen, "%s: cannot open", path);
        return -1;
    }
    const char *p = "model.layers.0.self_attn.";
    int64_t a, b;
    int ok = 1;
    if (cfg->q_lora) {
        ok &= !!(r->wq_a = read_weight(f, p, "q_a_proj", &a, &b, err, errlen));
        ok &= ok && !!(r->ln_q = read_weight(f, p, "q_a_layernorm", &a, &b, err, errlen));
    }
    ok &= ok &&
          !!(r->wq_b = read_weight(f, p, cfg->q_lora ? "q_b_proj" : "q_proj", &a, &b, err, errlen));
    ok &= ok && !!(r->wkv_a = read_weight(f, p, "kv_a_proj_with_mqa", &a, &b, err, errlen));
    ok &= ok && !!(r->ln_kv = read_weight(f, p, "kv_a_layernorm", &a, &b, err, errlen));
    ok &= ok && !!(r->wkv_b = read_weight(f, p, "kv_b_proj", &a, &b, err, errlen));
    ok &= ok && !!(r->wo = read_weight(f, p, "o_proj", &a, &b, err, errlen));
    mla_safetensors_close(f);
    if (!ok) {
        demo_ref_free(r);
        return -1;
    }
    ref64_model *m = &r->m;
    m->cfg = *cfg;
    m->wq_a = r->wq_a, m->wq_b = r->wq_b, m->wkv_a = r->wkv_a, m->wkv_b = r->wkv_b, m->wo = r->wo;
    m->ln_q = r->ln_q, m->ln_kv = r->ln_kv;
    m->cos = cos, m->sin = sin;
    m->cache_dtype = MLA_DTYPE_BF16;
    m->k_scale = 1.0f;
    m->u_act = m->u_q = m->u_p = 1.0 / 256.0; /* bf16 intermediates, q_cat and P */
    m->u_out = 1.0 / 16777216.0; /* f32 y */
    return 0;
}

int demo_ref_kv_b_from(mla_context *ctx, const mla_layer_weights_ex *w, demo_ref *r)
{
    if (w->formats.kv_b_proj != MLA_WEIGHT_FP8_TENSOR)
        return 0;
    const mla_tensor *t = &w->base.kv_b_proj.w;
    const int64_t n = mla_tensor_numel(t);
    uint8_t *codes = malloc((size_t)n);
    if (!codes || !mla_tensor_is_contiguous(t) ||
        mla_memcpy(ctx, codes, t->data, (size_t)n, MLA_COPY_CONTEXT_TO_HOST) != MLA_OK) {
        free(codes);
        return -1;
    }
    for (int64_t i = 0; i < n; ++i)
        r->wkv_b[i] = (double)mla_fp8_to_f32(codes[i], t->dtype) * w->kv_b_tensor_scale;
    free(codes);
    return 0;
}

void demo_ref_free(demo_ref *r)
{
    double *all[] = {r->wq_a, r->wq_b, r->wkv_a, r->wkv_b, r->wo, r->ln_q, r->ln_kv};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i)
        free(all[i]);
    memset(r, 0, sizeof *r);
}
