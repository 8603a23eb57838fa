/* config.json of a Hugging Face DeepSeek-V2 / V3 / V3.2 or Kimi-K2
 * checkpoint -> mla_hf_config (docs/CHECKPOINTS.md lists the fields). Every
 * field the attention layer depends on is required, so that a config is
 * never completed with a default the publisher did not mean; a field the
 * library cannot honour is refused naming it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/json_mini.h"
#include "core/safetensors.h"
#include "core/validate.h"

/* Extents beyond this are refused here, long before any size would overflow
 * (the loader's own limit, core/layer_weights.c). */
#define HF_MAX_EXTENT ((int64_t)1 << 24)

typedef struct hf_reader {
    mla_context *ctx;
    const mla_json_value *root;
} hf_reader;

static mla_status field_fail(hf_reader *r, mla_status st, const char *field, const char *why)
{
    return mla_fail(r->ctx, st, field, "config.json: %s %s", field, why);
}

/* A positive integer field (max: its largest legal value). */
static mla_status get_int(hf_reader *r, const mla_json_value *obj, const char *field, const char *key,
                          int64_t max, int64_t *out)
{
    const mla_json_value *v = mla_json_value_get(obj, key);
    if (!v)
        return field_fail(r, MLA_ERR_FORMAT, field, "is missing");
    if (v->type != MLA_JSON_NUMBER || !v->is_integer)
        return field_fail(r, MLA_ERR_FORMAT, field, "is not an integer");
    if (v->integer < 1 || v->integer > max)
        return mla_fail(r->ctx, MLA_ERR_OUT_OF_RANGE, field,
                        "config.json: %s = %lld is outside [1, %lld]", field, (long long)v->integer,
                        (long long)max);
    *out = v->integer;
    return MLA_OK;
}

/* A finite number field; *present 0 (and *out untouched) when absent and
 * present is given, else absence is refused. */
static mla_status get_num(hf_reader *r, const mla_json_value *obj, const char *field, const char *key,
                          int *present, double *out)
{
    const mla_json_value *v = mla_json_value_get(obj, key);
    if (present)
        *present = v != NULL;
    if (!v)
        return present ? MLA_OK : field_fail(r, MLA_ERR_FORMAT, field, "is missing");
    if (v->type != MLA_JSON_NUMBER || !isfinite(v->number))
        return field_fail(r, MLA_ERR_FORMAT, field, "is not a number");
    *out = v->number;
    return MLA_OK;
}

static int is_yarn(const char *s) { return !strcmp(s, "yarn") || !strcmp(s, "deepseek_yarn"); }

/* DeepSeek's m(s, k) = 0.1 k ln(s) + 1 (1 without scaling). */
static double yarn_m(double factor, double k)
{
    return factor <= 1.0 ? 1.0 : 0.1 * k * log(factor) + 1.0;
}

/* rope_scaling (transformers < 5) or rope_parameters (transformers 5, which
 * also moves rope_theta into it). NULL or {"rope_type": "default"}: no
 * scaling. YaRN's keys: DeepSeek's modeling code and transformers'
 * _compute_yarn_parameters agree on beta_fast 32, beta_slow 1 and m(s, 1) /
 * m(s, 0) when mscale and mscale_all_dim are both absent; they disagree on
 * original_max_position_embeddings (4096 against max_position_embeddings)
 * and on mscale without mscale_all_dim, so those are required. */
static mla_status read_rope(hf_reader *r, mla_model_config *m)
{
    const mla_json_value *rs = mla_json_value_get(r->root, "rope_scaling");
    const char *grp = "rope_scaling";
    const mla_json_value *rp = mla_json_value_get(r->root, "rope_parameters");
    if ((!rs || rs->type == MLA_JSON_NULL) && rp) {
        rs = rp;
        grp = "rope_parameters";
    }
    char f[64];
    m->rope_cfg.dim = (int32_t)m->rope;
    m->rope_cfg.factor = 1.0;
    m->rope_cfg.beta_fast = 32.0;
    m->rope_cfg.beta_slow = 1.0;
    m->rope_cfg.original_max_pos = m->max_pos;
    m->rope_cfg.mscale = 1.0;
    m->rope_cfg.mscale_all_dim = 0.0;
    int have_theta = 0;
    MLA_TRY(get_num(r, r->root, "rope_theta", "rope_theta", &have_theta, &m->rope_cfg.base));
    if (!have_theta && rs && rs->type == MLA_JSON_OBJECT) {
        snprintf(f, sizeof f, "%s.rope_theta", grp);
        MLA_TRY(get_num(r, rs, f, "rope_theta", &have_theta, &m->rope_cfg.base));
    }
    if (!have_theta)
        return field_fail(r, MLA_ERR_FORMAT, "rope_theta", "is missing");
    if (!(m->rope_cfg.base > 1.0))
        return field_fail(r, MLA_ERR_OUT_OF_RANGE, "rope_theta", "must be above 1");
    if (!rs || rs->type == MLA_JSON_NULL)
        return MLA_OK;
    if (rs->type != MLA_JSON_OBJECT)
        return field_fail(r, MLA_ERR_FORMAT, grp, "is neither null nor an object");
    const mla_json_value *t = mla_json_value_get(rs, "rope_type");
    const mla_json_value *t2 = mla_json_value_get(rs, "type");
    snprintf(f, sizeof f, "%s.%s", grp, t ? "rope_type" : "type");
    if (!t)
        t = t2;
    if (!t || t->type != MLA_JSON_STRING)
        return field_fail(r, MLA_ERR_FORMAT, f, "is missing or not a string");
    if (t2 && t2 != t && (t2->type != MLA_JSON_STRING || strcmp(t2->string, t->string)))
        return mla_fail(r->ctx, MLA_ERR_FORMAT, f, "config.json: %s.type and %s.rope_type disagree",
                        grp, grp);
    if (!strcmp(t->string, "default"))
        return MLA_OK;
    if (!is_yarn(t->string))
        return mla_fail(r->ctx, MLA_ERR_UNSUPPORTED, f,
                        "config.json: %s '%.32s': the library implements YaRN (yarn, "
                        "deepseek_yarn) and unscaled RoPE only",
                        f, t->string);
    mla_rope_config *rc = &m->rope_cfg;
    double omax = 0.0, af = 0.0;
    int have_ms = 0, have_msa = 0, have_af = 0, have = 0;
    snprintf(f, sizeof f, "%s.factor", grp);
    MLA_TRY(get_num(r, rs, f, "factor", NULL, &rc->factor));
    if (!(rc->factor >= 1.0))
        return field_fail(r, MLA_ERR_OUT_OF_RANGE, f, "must be at least 1");
    snprintf(f, sizeof f, "%s.original_max_position_embeddings", grp);
    MLA_TRY(get_num(r, rs, f, "original_max_position_embeddings", NULL, &omax));
    if (!(omax >= 1.0 && omax <= 9.0e15) || omax != floor(omax))
        return field_fail(r, MLA_ERR_OUT_OF_RANGE, f, "must be a positive integer");
    rc->original_max_pos = (int64_t)omax;
    snprintf(f, sizeof f, "%s.beta_fast", grp);
    MLA_TRY(get_num(r, rs, f, "beta_fast", &have, &rc->beta_fast));
    snprintf(f, sizeof f, "%s.beta_slow", grp);
    MLA_TRY(get_num(r, rs, f, "beta_slow", &have, &rc->beta_slow));
    if (!(rc->beta_fast > 0.0) || !(rc->beta_slow > 0.0))
        return field_fail(r, MLA_ERR_OUT_OF_RANGE, f, "and beta_fast must be positive");
    snprintf(f, sizeof f, "%s.mscale", grp);
    MLA_TRY(get_num(r, rs, f, "mscale", &have_ms, &rc->mscale));
    snprintf(f, sizeof f, "%s.mscale_all_dim", grp);
    MLA_TRY(get_num(r, rs, f, "mscale_all_dim", &have_msa, &rc->mscale_all_dim));
    if (have_ms && !have_msa && rc->mscale != 1.0)
        return field_fail(r, MLA_ERR_FORMAT, f,
                          "is missing while mscale is not 1 (DeepSeek's code and "
                          "transformers' disagree on that case)");
    snprintf(f, sizeof f, "%s.attention_factor", grp);
    MLA_TRY(get_num(r, rs, f, "attention_factor", &have_af, &af));
    const double ratio = yarn_m(rc->factor, rc->mscale) / yarn_m(rc->factor, rc->mscale_all_dim);
    if (have_af && fabs(af - ratio) > 1e-12 * ratio)
        return mla_fail(r->ctx, MLA_ERR_UNSUPPORTED, f,
                        "config.json: %s %.17g differs from m(factor, mscale) / m(factor, "
                        "mscale_all_dim) = %.17g, the only cos/sin scale the library applies",
                        f, af, ratio);
    const mla_json_value *tr = mla_json_value_get(rs, "truncate");
    snprintf(f, sizeof f, "%s.truncate", grp);
    if (tr && tr->type != MLA_JSON_TRUE)
        return field_fail(r, MLA_ERR_UNSUPPORTED, f,
                          "is not true: the library's YaRN ramp rounds its ends (floor, ceil)");
    return MLA_OK;
}

/* The V3.2 indexer: index_n_heads, index_head_dim, index_topk, all or none;
 * deepseek_v32 needs them. */
static mla_status read_indexer(hf_reader *r, mla_model_config *m, const char *model_type)
{
    const int any = mla_json_value_get(r->root, "index_n_heads") ||
                    mla_json_value_get(r->root, "index_head_dim") ||
                    mla_json_value_get(r->root, "index_topk");
    if (!any && strcmp(model_type, "deepseek_v32") != 0)
        return MLA_OK;
    MLA_TRY(get_int(r, r->root, "index_n_heads", "index_n_heads", 4096, &m->index_heads));
    MLA_TRY(
        get_int(r, r->root, "index_head_dim", "index_head_dim", HF_MAX_EXTENT, &m->index_head_dim));
    MLA_TRY(get_int(r, r->root, "index_topk", "index_topk", HF_MAX_EXTENT, &m->index_topk));
    if (m->q_lora == 0)
        return field_fail(r, MLA_ERR_FORMAT, "q_lora_rank",
                          "is null, but the indexer's wq_b reads the compressed q");
    if (m->index_head_dim < m->rope)
        return field_fail(r, MLA_ERR_FORMAT, "index_head_dim",
                          "is below qk_rope_head_dim (its RoPE rotates that many dims)");
    return MLA_OK;
}

/* quantization_config: fp8 with 128 x 128 blocks (DeepSeek, Kimi) is what
 * the loader dequantizes; other methods are recorded and left to the
 * loader, which reads each tensor's format from its dtype. */
static mla_status read_quant(hf_reader *r, mla_hf_config *out)
{
    const mla_json_value *q = mla_json_value_get(r->root, "quantization_config");
    if (!q || q->type == MLA_JSON_NULL)
        return MLA_OK;
    if (q->type != MLA_JSON_OBJECT)
        return field_fail(r, MLA_ERR_FORMAT, "quantization_config", "is not an object");
    const mla_json_value *qm = mla_json_value_get(q, "quant_method");
    if (!qm || qm->type != MLA_JSON_STRING)
        return field_fail(r, MLA_ERR_FORMAT, "quantization_config.quant_method",
                          "is missing or not a string");
    snprintf(out->quant_method, sizeof out->quant_method, "%s", qm->string);
    if (strcmp(qm->string, "fp8") != 0)
        return MLA_OK;
    const mla_json_value *fm = mla_json_value_get(q, "fmt");
    if (fm && (fm->type != MLA_JSON_STRING || strcmp(fm->string, "e4m3") != 0))
        return field_fail(r, MLA_ERR_UNSUPPORTED, "quantization_config.fmt",
                          "is not \"e4m3\" (the fp8 checkpoints' float8_e4m3fn)");
    const mla_json_value *bs = mla_json_value_get(q, "weight_block_size");
    const char *f = "quantization_config.weight_block_size";
    if (!bs)
        return field_fail(r, MLA_ERR_FORMAT, f, "is missing");
    if (bs->type != MLA_JSON_ARRAY || bs->count != 2 || bs->items[0].type != MLA_JSON_NUMBER ||
        bs->items[1].type != MLA_JSON_NUMBER || !bs->items[0].is_integer || !bs->items[1].is_integer)
        return field_fail(r, MLA_ERR_FORMAT, f, "is not two integers");
    out->fp8_block[0] = bs->items[0].integer;
    out->fp8_block[1] = bs->items[1].integer;
    if (out->fp8_block[0] != 128 || out->fp8_block[1] != 128)
        return mla_fail(r->ctx, MLA_ERR_UNSUPPORTED, f,
                        "config.json: %s [%lld, %lld]: the library's fp8 weights have 128 x 128 "
                        "blocks",
                        f, (long long)out->fp8_block[0], (long long)out->fp8_block[1]);
    return MLA_OK;
}

static mla_status read_config(hf_reader *r, mla_hf_config *out)
{
    const mla_json_value *root = r->root;
    mla_model_config *m = &out->model;
    if (root->type != MLA_JSON_OBJECT)
        return mla_fail(r->ctx, MLA_ERR_FORMAT, "config.json", "config.json is not an object");
    const mla_json_value *mt = mla_json_value_get(root, "model_type");
    if (mt && mt->type != MLA_JSON_STRING)
        return field_fail(r, MLA_ERR_FORMAT, "model_type", "is not a string");
    snprintf(out->model_type, sizeof out->model_type, "%s", mt ? mt->string : "");
    snprintf(m->name, sizeof m->name, "%s", out->model_type[0] ? out->model_type : "hf");
    MLA_TRY(get_int(r, root, "hidden_size", "hidden_size", HF_MAX_EXTENT, &m->hidden));
    MLA_TRY(get_int(r, root, "num_attention_heads", "num_attention_heads", 4096, &m->heads));
    const mla_json_value *ql = mla_json_value_get(root, "q_lora_rank");
    if (!ql)
        return field_fail(r, MLA_ERR_FORMAT, "q_lora_rank",
                          "is missing (null for no q "
                          "compression)");
    if (ql->type != MLA_JSON_NULL)
        MLA_TRY(get_int(r, root, "q_lora_rank", "q_lora_rank", HF_MAX_EXTENT, &m->q_lora));
    MLA_TRY(get_int(r, root, "kv_lora_rank", "kv_lora_rank", HF_MAX_EXTENT, &m->kv_lora));
    MLA_TRY(get_int(r, root, "qk_nope_head_dim", "qk_nope_head_dim", HF_MAX_EXTENT, &m->nope));
    MLA_TRY(get_int(r, root, "qk_rope_head_dim", "qk_rope_head_dim", HF_MAX_EXTENT, &m->rope));
    MLA_TRY(get_int(r, root, "v_head_dim", "v_head_dim", HF_MAX_EXTENT, &m->v));
    if (m->rope % 2)
        return field_fail(r, MLA_ERR_FORMAT, "qk_rope_head_dim", "is odd (RoPE rotates pairs)");
    int64_t qk = 0;
    const mla_json_value *qh = mla_json_value_get(root, "qk_head_dim");
    if (qh && (get_int(r, root, "qk_head_dim", "qk_head_dim", 2 * HF_MAX_EXTENT, &qk) != MLA_OK ||
               qk != m->nope + m->rope))
        return field_fail(r, MLA_ERR_FORMAT, "qk_head_dim",
                          "is not qk_nope_head_dim + qk_rope_head_dim");
    MLA_TRY(get_int(r, root, "max_position_embeddings", "max_position_embeddings", (int64_t)1 << 40,
                    &m->max_pos));
    MLA_TRY(get_int(r, root, "num_hidden_layers", "num_hidden_layers", 1 << 20, &out->num_layers));
    double eps = 0.0;
    MLA_TRY(get_num(r, root, "rms_norm_eps", "rms_norm_eps", NULL, &eps));
    if (!(eps > 0.0 && eps < 1.0))
        return field_fail(r, MLA_ERR_OUT_OF_RANGE, "rms_norm_eps", "is not in (0, 1)");
    m->rms_eps = (float)eps;
    const mla_json_value *ri = mla_json_value_get(root, "rope_interleave");
    if (ri && ri->type != MLA_JSON_TRUE)
        return field_fail(r, MLA_ERR_UNSUPPORTED, "rope_interleave",
                          "is not true: MLA's q_pe / k_pe pairs are interleaved (GPT-J)");
    MLA_TRY(read_rope(r, m));
    MLA_TRY(read_indexer(r, m, out->model_type));
    return read_quant(r, out);
}

mla_status mla_hf_config_parse(mla_context *ctx, const char *text, size_t len, mla_hf_config *out)
{
    if (ctx)
        mla_clear_error(ctx);
    if (!text || !out)
        return mla_fail(ctx, MLA_ERR_NULL_POINTER, !text ? "text" : "out", "null argument");
    mla_json_value root;
    size_t at = 0;
    mla_json_result jr = mla_json_value_parse(text, len, &root, &at);
    if (jr == MLA_JSON_NOMEM)
        return mla_fail(ctx, MLA_ERR_OUT_OF_MEMORY, "config.json", "out of memory");
    if (jr != MLA_JSON_OK)
        return mla_fail(ctx, MLA_ERR_FORMAT, "config.json", "config.json: %s at byte %zu",
                        jr == MLA_JSON_DUPLICATE ? "an object names a key twice (the object ends)"
                                             : "malformed JSON",
                        at);
    mla_hf_config c;
    memset(&c, 0, sizeof c);
    hf_reader r = {ctx, &root};
    mla_status st = read_config(&r, &c);
    mla_json_value_free(&root);
    if (st == MLA_OK)
        *out = c;
    return st;
}

mla_status mla_hf_config_load(mla_context *ctx, const char *path, mla_hf_config *out)
{
    if (ctx)
        mla_clear_error(ctx);
    if (!path || !out)
        return mla_fail(ctx, MLA_ERR_NULL_POINTER, !path ? "path" : "out", "null argument");
    char *text = NULL;
    size_t len = 0;
    MLA_TRY(mla_read_small_file(ctx, path, "path", (size_t)64 << 20, &text, &len));
    mla_status st = mla_hf_config_parse(ctx, text, len, out);
    free(text);
    return st;
}

char *mla_hf_config_json(const mla_model_config *c, int64_t num_layers, const char *quant)
{
    const mla_rope_config *r = &c->rope_cfg;
    char rope[512] = "null", index[160] = "", q[160] = "", qlora[32] = "null";
    /* %.17g: every double reads back to the same bits; %.9g the same for a float. */
    if (r->factor > 1.0)
        snprintf(rope, sizeof rope,
                 "{\"type\": \"yarn\", \"factor\": %.17g, \"original_max_position_embeddings\": "
                 "%lld, \"beta_fast\": %.17g, \"beta_slow\": %.17g, \"mscale\": %.17g, "
                 "\"mscale_all_dim\": %.17g}",
                 r->factor, (long long)r->original_max_pos, r->beta_fast, r->beta_slow, r->mscale,
                 r->mscale_all_dim);
    if (c->index_heads > 0)
        snprintf(index, sizeof index,
                 ",\n  \"index_n_heads\": %lld, \"index_head_dim\": %lld, \"index_topk\": %lld",
                 (long long)c->index_heads, (long long)c->index_head_dim, (long long)c->index_topk);
    if (!strcmp(quant, "fp8"))
        snprintf(q, sizeof q,
                 ",\n  \"quantization_config\": {\"quant_method\": \"fp8\", \"fmt\": \"e4m3\", "
                 "\"activation_scheme\": \"dynamic\", \"weight_block_size\": [128, 128]}");
    else if (*quant)
        snprintf(q, sizeof q, ",\n  \"quantization_config\": {\"quant_method\": \"%.32s\"}", quant);
    if (c->q_lora > 0)
        snprintf(qlora, sizeof qlora, "%lld", (long long)c->q_lora);
    const char *fmt =
        "{\n  \"architectures\": [\"%s\"], \"model_type\": \"%s\",\n"
        "  \"hidden_size\": %lld, \"num_attention_heads\": %lld, \"num_key_value_heads\": %lld,\n"
        "  \"num_hidden_layers\": %lld, \"q_lora_rank\": %s, \"kv_lora_rank\": %lld,\n"
        "  \"qk_nope_head_dim\": %lld, \"qk_rope_head_dim\": %lld, \"v_head_dim\": %lld,\n"
        "  \"max_position_embeddings\": %lld, \"rms_norm_eps\": %.9g, \"rope_theta\": %.17g,\n"
        "  \"rope_scaling\": %s%s%s\n}\n";
    const char *arch = c->index_heads > 0 ? "DeepseekV32ForCausalLM" : "DeepseekV3ForCausalLM";
    const char *type = c->index_heads > 0 ? "deepseek_v32" : "deepseek_v3";
    const int n = snprintf(NULL, 0, fmt, arch, type, (long long)c->hidden, (long long)c->heads,
                           (long long)c->heads, (long long)num_layers, qlora, (long long)c->kv_lora,
                           (long long)c->nope, (long long)c->rope, (long long)c->v,
                           (long long)c->max_pos, (double)c->rms_eps, r->base, rope, index, q);
    char *text = n > 0 ? malloc((size_t)n + 1) : NULL;
    if (text)
        snprintf(text, (size_t)n + 1, fmt, arch, type, (long long)c->hidden, (long long)c->heads,
                 (long long)c->heads, (long long)num_layers, qlora, (long long)c->kv_lora,
                 (long long)c->nope, (long long)c->rope, (long long)c->v, (long long)c->max_pos,
                 (double)c->rms_eps, r->base, rope, index, q);
    return text;
}
