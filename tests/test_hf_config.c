/* config.json parsing (core/hf_config.c): every preset's config.json form
 * parses to the preset; each required field missing, mistyped or out of
 * range, each contradiction and each unsupported setting is refused naming
 * the field. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "mla/mla.h"
#include "tests/test_util.h"

static int same_config(const mla_model_config *a, const mla_model_config *b)
{
    const mla_rope_config *x = &a->rope_cfg, *y = &b->rope_cfg;
    return a->hidden == b->hidden && a->heads == b->heads && a->q_lora == b->q_lora &&
           a->kv_lora == b->kv_lora && a->nope == b->nope && a->rope == b->rope && a->v == b->v &&
           memcmp(&a->rms_eps, &b->rms_eps, sizeof a->rms_eps) == 0 && a->max_pos == b->max_pos &&
           x->dim == y->dim && x->base == y->base && x->factor == y->factor &&
           x->beta_fast == y->beta_fast && x->beta_slow == y->beta_slow &&
           x->original_max_pos == y->original_max_pos && x->mscale == y->mscale &&
           x->mscale_all_dim == y->mscale_all_dim && a->index_heads == b->index_heads &&
           a->index_head_dim == b->index_head_dim && a->index_topk == b->index_topk;
}

static void test_presets(mla_context *ctx)
{
    for (int i = 0; mla_model_config_preset_name(i); ++i) {
        const char *name = mla_model_config_preset_name(i);
        mla_model_config want;
        mla_hf_config got;
        CHECK_STATUS(mla_model_config_preset(name, &want), MLA_OK);
        const char *json = mla_model_config_preset_json(name);
        CHECK(json != NULL);
        if (!json)
            continue;
        CHECK_STATUS(mla_hf_config_parse(ctx, json, strlen(json), &got), MLA_OK);
        if (!same_config(&got.model, &want))
            fprintf(stderr, "preset %s: config.json form parses to another config\n", name);
        CHECK(same_config(&got.model, &want));
        CHECK(mla_softmax_scale(&got.model) == mla_softmax_scale(&want));
        CHECK(got.num_layers >= 1);
    }
    mla_model_config a, b;
    CHECK_STATUS(mla_model_config_preset("deepseek-V3", &a), MLA_OK); /* any case */
    CHECK_STATUS(mla_model_config_preset("DeepSeek-V3", &b), MLA_OK);
    CHECK(!strcmp(a.name, "DeepSeek-V3") && same_config(&a, &b));
    CHECK(mla_model_config_preset_json("no-such-model") == NULL);
    mla_hf_config v3;
    const char *j = mla_model_config_preset_json("DeepSeek-V3");
    CHECK_STATUS(mla_hf_config_parse(ctx, j, strlen(j), &v3), MLA_OK);
    CHECK(!strcmp(v3.model_type, "deepseek_v3") && !strcmp(v3.quant_method, "fp8"));
    CHECK(v3.fp8_block[0] == 128 && v3.fp8_block[1] == 128 && v3.num_layers == 61);
}

/* DeepSeek-V3's attention fields, one "key": value each, so that a test
 * can drop, replace or add one. */
static const char *const v3_fields[] = {
    "\"model_type\": \"deepseek_v3\"",
    "\"hidden_size\": 7168",
    "\"num_attention_heads\": 128",
    "\"num_hidden_layers\": 61",
    "\"q_lora_rank\": 1536",
    "\"kv_lora_rank\": 512",
    "\"qk_nope_head_dim\": 128",
    "\"qk_rope_head_dim\": 64",
    "\"v_head_dim\": 128",
    "\"max_position_embeddings\": 163840",
    "\"rms_norm_eps\": 1e-06",
    "\"rope_theta\": 10000",
    "\"rope_scaling\": {\"beta_fast\": 32, \"beta_slow\": 1, \"factor\": 40, \"mscale\": 1.0, "
    "\"mscale_all_dim\": 1.0, \"original_max_position_embeddings\": 4096, \"type\": \"yarn\"}",
    "\"quantization_config\": {\"quant_method\": \"fp8\", \"fmt\": \"e4m3\", "
    "\"weight_block_size\": [128, 128]}",
    NULL,
};

/* The V3 fields with the one whose key is `key` replaced by `field` (NULL:
 * dropped); a key not among them is added. */
static const char *v3_with(const char *key, const char *field)
{
    static char buf[4096];
    char k[80];
    snprintf(k, sizeof k, "\"%s\":", key);
    size_t n = 0;
    int replaced = 0;
    buf[n++] = '{';
    for (int i = 0; v3_fields[i]; ++i) {
        const char *f = v3_fields[i];
        if (key && !strncmp(f, k, strlen(k))) {
            replaced = 1;
            if (!field)
                continue;
            f = field;
        }
        n += (size_t)snprintf(buf + n, sizeof buf - n, "%s%s", n > 1 ? ", " : "", f);
    }
    if (key && !replaced && field)
        n += (size_t)snprintf(buf + n, sizeof buf - n, ", %s", field);
    snprintf(buf + n, sizeof buf - n, "}");
    return buf;
}

static void expect(mla_context *ctx, const char *json, mla_status want, const char *param)
{
    mla_hf_config out;
    memset(&out, 0x5A, sizeof out);
    const mla_status st = mla_hf_config_parse(ctx, json, strlen(json), &out);
    const int ok = st == want && (!param || !strcmp(mla_context_error_param(ctx), param));
    if (!ok)
        fprintf(stderr, "%s\n  -> %s (%s: %s), expected %s (%s)\n", json, mla_status_name(st),
                mla_context_error_param(ctx), mla_context_error_detail(ctx), mla_status_name(want),
                param ? param : "-");
    CHECK(ok);
    if (st != MLA_OK) { /* nothing written */
        unsigned char probe[sizeof out];
        memset(probe, 0x5A, sizeof probe);
        CHECK(!memcmp(&out, probe, sizeof out));
    }
}

static void test_refusals(mla_context *ctx)
{
    expect(ctx, v3_with(NULL, NULL), MLA_OK, NULL);
    static const char *const required[] = {
        "hidden_size",      "num_attention_heads",     "q_lora_rank",       "kv_lora_rank",
        "qk_nope_head_dim", "qk_rope_head_dim",        "v_head_dim",        "rms_norm_eps",
        "rope_theta",       "max_position_embeddings", "num_hidden_layers",
    };
    char f[256];
    for (size_t i = 0; i < sizeof required / sizeof required[0]; ++i) {
        expect(ctx, v3_with(required[i], NULL), MLA_ERR_FORMAT, required[i]);
        snprintf(f, sizeof f, "\"%s\": \"7\"", required[i]);
        expect(ctx, v3_with(required[i], f), MLA_ERR_FORMAT, required[i]);
    }
    static const char *const ints[] = {
        "hidden_size", "num_attention_heads",     "kv_lora_rank",     "qk_nope_head_dim",
        "v_head_dim",  "max_position_embeddings", "num_hidden_layers"};
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; ++i) {
        snprintf(f, sizeof f, "\"%s\": 0", ints[i]);
        expect(ctx, v3_with(ints[i], f), MLA_ERR_OUT_OF_RANGE, ints[i]);
        snprintf(f, sizeof f, "\"%s\": -4", ints[i]);
        expect(ctx, v3_with(ints[i], f), MLA_ERR_OUT_OF_RANGE, ints[i]);
        snprintf(f, sizeof f, "\"%s\": 64.0", ints[i]);
        expect(ctx, v3_with(ints[i], f), MLA_ERR_FORMAT, ints[i]);
        snprintf(f, sizeof f, "\"%s\": 99999999999999999999", ints[i]);
        expect(ctx, v3_with(ints[i], f), MLA_ERR_FORMAT, ints[i]);
    }
    expect(ctx, v3_with("hidden_size", "\"hidden_size\": 1e300"), MLA_ERR_FORMAT, "hidden_size");
    expect(ctx, v3_with("q_lora_rank", "\"q_lora_rank\": null"), MLA_OK, NULL);
    expect(ctx, v3_with("qk_rope_head_dim", "\"qk_rope_head_dim\": 63"), MLA_ERR_FORMAT,
           "qk_rope_head_dim");
    expect(ctx, v3_with("qk_head_dim", "\"qk_head_dim\": 192"), MLA_OK, NULL);
    expect(ctx, v3_with("qk_head_dim", "\"qk_head_dim\": 128"), MLA_ERR_FORMAT, "qk_head_dim");
    expect(ctx, v3_with("rms_norm_eps", "\"rms_norm_eps\": 0"), MLA_ERR_OUT_OF_RANGE,
           "rms_norm_eps");
    expect(ctx, v3_with("rope_theta", "\"rope_theta\": 1"), MLA_ERR_OUT_OF_RANGE, "rope_theta");
    expect(ctx, v3_with("rope_interleave", "\"rope_interleave\": true"), MLA_OK, NULL);
    expect(ctx, v3_with("rope_interleave", "\"rope_interleave\": false"), MLA_ERR_UNSUPPORTED,
           "rope_interleave");

    /* rope_scaling */
    mla_hf_config c;
    const char *none = v3_with("rope_scaling", "\"rope_scaling\": null");
    CHECK_STATUS(mla_hf_config_parse(ctx, none, strlen(none), &c), MLA_OK);
    CHECK(c.model.rope_cfg.factor == 1.0 && mla_softmax_scale(&c.model) == 1.0 / sqrt(192.0));
    const char *bare = v3_with("rope_scaling", "\"rope_scaling\": {\"type\": \"yarn\", \"factor\": "
                                               "40, \"original_max_position_embeddings\": 4096}");
    CHECK_STATUS(mla_hf_config_parse(ctx, bare, strlen(bare), &c), MLA_OK);
    CHECK(c.model.rope_cfg.beta_fast == 32.0 && c.model.rope_cfg.beta_slow == 1.0 &&
          c.model.rope_cfg.mscale == 1.0 && c.model.rope_cfg.mscale_all_dim == 0.0);
    CHECK(mla_softmax_scale(&c.model) == 1.0 / sqrt(192.0)); /* mscale_all_dim 0: no change */
    static const struct {
        const char *rs, *param;
        mla_status st;
    } rope_cases[] = {
        {"{\"type\": \"linear\", \"factor\": 4}", "rope_scaling.type", MLA_ERR_UNSUPPORTED},
        {"{\"rope_type\": \"dynamic\", \"factor\": 4}", "rope_scaling.rope_type",
         MLA_ERR_UNSUPPORTED},
        {"{\"type\": \"yarn\", \"rope_type\": \"linear\", \"factor\": 4, "
         "\"original_max_position_embeddings\": 4096}",
         "rope_scaling.rope_type", MLA_ERR_FORMAT},
        {"{\"factor\": 4}", "rope_scaling.type", MLA_ERR_FORMAT},
        {"{\"type\": \"yarn\", \"original_max_position_embeddings\": 4096}", "rope_scaling.factor",
         MLA_ERR_FORMAT},
        {"{\"type\": \"yarn\", \"factor\": 0.5, \"original_max_position_embeddings\": 4096}",
         "rope_scaling.factor", MLA_ERR_OUT_OF_RANGE},
        {"{\"type\": \"yarn\", \"factor\": 40}", "rope_scaling.original_max_position_embeddings",
         MLA_ERR_FORMAT},
        {"{\"type\": \"yarn\", \"factor\": 40, \"original_max_position_embeddings\": 40.5}",
         "rope_scaling.original_max_position_embeddings", MLA_ERR_OUT_OF_RANGE},
        {"{\"type\": \"yarn\", \"factor\": 40, \"original_max_position_embeddings\": 4096, "
         "\"mscale\": 0.707}",
         "rope_scaling.mscale_all_dim", MLA_ERR_FORMAT},
        {"{\"type\": \"yarn\", \"factor\": 40, \"original_max_position_embeddings\": 4096, "
         "\"attention_factor\": 1.5}",
         "rope_scaling.attention_factor", MLA_ERR_UNSUPPORTED},
        {"{\"type\": \"yarn\", \"factor\": 40, \"original_max_position_embeddings\": 4096, "
         "\"truncate\": false}",
         "rope_scaling.truncate", MLA_ERR_UNSUPPORTED},
        {"{\"type\": \"yarn\", \"factor\": 40, \"original_max_position_embeddings\": 4096, "
         "\"beta_fast\": \"32\"}",
         "rope_scaling.beta_fast", MLA_ERR_FORMAT},
        {"[1, 2]", "rope_scaling", MLA_ERR_FORMAT},
        {"{\"type\": \"deepseek_yarn\", \"factor\": 40, \"original_max_position_embeddings\": "
         "4096, \"mscale\": 1.0, \"mscale_all_dim\": 1.0, \"attention_factor\": 1.0}",
         NULL, MLA_OK},
        {"{\"rope_type\": \"default\"}", NULL, MLA_OK},
    };
    for (size_t i = 0; i < sizeof rope_cases / sizeof rope_cases[0]; ++i) {
        snprintf(f, sizeof f, "\"rope_scaling\": %s", rope_cases[i].rs);
        expect(ctx, v3_with("rope_scaling", f), rope_cases[i].st, rope_cases[i].param);
    }
    /* transformers 5: rope_parameters, rope_theta inside it */
    char t5[4096];
    snprintf(t5, sizeof t5, "%s", v3_with("rope_theta", NULL));
    const char *t5b = v3_with("rope_scaling", "\"rope_parameters\": {\"rope_type\": \"yarn\", "
                                              "\"rope_theta\": 10000.0, \"beta_fast\": 32, "
                                              "\"beta_slow\": 1, \"factor\": 40, \"mscale\": 1.0, "
                                              "\"mscale_all_dim\": 1.0, "
                                              "\"original_max_position_embeddings\": 4096}");
    char joined[4096];
    snprintf(joined, sizeof joined, "%s", t5b);
    char *theta = strstr(joined, "\"rope_theta\": 10000, ");
    CHECK(theta != NULL);
    if (theta)
        memmove(theta, theta + strlen("\"rope_theta\": 10000, "),
                strlen(theta + strlen("\"rope_theta\": 10000, ")) + 1);
    mla_model_config v3;
    mla_model_config_preset("DeepSeek-V3", &v3);
    CHECK_STATUS(mla_hf_config_parse(ctx, joined, strlen(joined), &c), MLA_OK);
    CHECK(same_config(&c.model, &v3));
    expect(ctx, t5, MLA_ERR_FORMAT, "rope_theta");

    /* the V3.2 indexer */
    expect(ctx, v3_with("index_n_heads", "\"index_n_heads\": 64"), MLA_ERR_FORMAT,
           "index_head_dim");
    expect(ctx, v3_with("model_type", "\"model_type\": \"deepseek_v32\""), MLA_ERR_FORMAT,
           "index_n_heads");
    snprintf(t5, sizeof t5, "%s",
             v3_with("q_lora_rank", "\"q_lora_rank\": null, \"index_n_heads\": 64, "
                                    "\"index_head_dim\": 128, \"index_topk\": 2048"));
    expect(ctx, t5, MLA_ERR_FORMAT, "q_lora_rank");
    expect(ctx, v3_with("model_type", "\"model_type\": 3"), MLA_ERR_FORMAT, "model_type");

    /* quantization_config */
    static const struct {
        const char *q, *param;
        mla_status st;
    } quant_cases[] = {
        {"{\"quant_method\": \"fp8\", \"weight_block_size\": [64, 64]}",
         "quantization_config.weight_block_size", MLA_ERR_UNSUPPORTED},
        {"{\"quant_method\": \"fp8\"}", "quantization_config.weight_block_size", MLA_ERR_FORMAT},
        {"{\"quant_method\": \"fp8\", \"weight_block_size\": [128]}",
         "quantization_config.weight_block_size", MLA_ERR_FORMAT},
        {"{\"quant_method\": \"fp8\", \"fmt\": \"e5m2\", \"weight_block_size\": [128, 128]}",
         "quantization_config.fmt", MLA_ERR_UNSUPPORTED},
        {"{\"fmt\": \"e4m3\"}", "quantization_config.quant_method", MLA_ERR_FORMAT},
        {"{\"quant_method\": \"quark\"}", NULL, MLA_OK},
        {"null", NULL, MLA_OK},
        {"7", "quantization_config", MLA_ERR_FORMAT},
    };
    for (size_t i = 0; i < sizeof quant_cases / sizeof quant_cases[0]; ++i) {
        snprintf(f, sizeof f, "\"quantization_config\": %s", quant_cases[i].q);
        expect(ctx, v3_with("quantization_config", f), quant_cases[i].st, quant_cases[i].param);
    }

    /* the document itself */
    expect(ctx, "", MLA_ERR_FORMAT, "config.json");
    expect(ctx, "[]", MLA_ERR_FORMAT, "config.json");
    expect(ctx, "{\"hidden_size\": 7168,}", MLA_ERR_FORMAT, "config.json");
    expect(ctx, "{\"hidden_size\": 7168} x", MLA_ERR_FORMAT, "config.json");
    expect(ctx, "{\"hidden_size\": 01}", MLA_ERR_FORMAT, "config.json");
    expect(ctx, "{\"a\": 1.}", MLA_ERR_FORMAT, "config.json");
    expect(ctx,
           "{\"a\": [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["
           "]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]}",
           MLA_ERR_FORMAT, "config.json");
    snprintf(t5, sizeof t5, "%s", v3_with("v_head_dim", "\"v_head_dim\": 128, \"v_head_dim\": 64"));
    expect(ctx, t5, MLA_ERR_FORMAT, "config.json");
}

static void test_files(mla_context *ctx)
{
    mla_hf_config c;
    CHECK_STATUS(mla_hf_config_load(ctx, "/nonexistent/config.json", &c), MLA_ERR_IO);
    CHECK(!strcmp(mla_context_error_param(ctx), "path"));
    CHECK_STATUS(mla_hf_config_load(ctx, "/", &c), MLA_ERR_IO);
    CHECK_STATUS(mla_hf_config_parse(NULL, NULL, 0, &c), MLA_ERR_NULL_POINTER);
    const char *j = mla_model_config_preset_json("Kimi-K2");
    CHECK_STATUS(mla_hf_config_parse(NULL, j, strlen(j), &c), MLA_OK); /* no context needed */
    CHECK(!strcmp(c.model_type, "kimi_k2") && c.model.heads == 64);
}

int main(void)
{
    mla_context *ctx = NULL;
    if (mla_context_create(MLA_BACKEND_REFERENCE, NULL, &ctx) != MLA_OK)
        return 1;
    test_presets(ctx);
    test_refusals(ctx);
    test_files(ctx);
    mla_context_destroy(ctx);
    return TEST_SUMMARY();
}
