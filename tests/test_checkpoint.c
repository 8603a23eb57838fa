/* Checkpoint directories in the Hugging Face layout, written by the
 * library's generator (sharded with an index, and one model.safetensors):
 * a layer loads through the index with the bytes of the single-file load,
 * reading only that layer's tensors (counted, and with every other layer's
 * bytes overwritten by garbage); each malformed or missing piece is refused
 * naming the file or the field, with nothing loaded. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/safetensors.h"
#include "mla/mla.h"
#include "tests/test_util.h"

static const char *root = "test_checkpoint.tmp";

static const char *at(const char *sub)
{
    static char buf[8][512];
    static int k;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", root, sub);
    return buf[k];
}

/* fmt's %s are a and b; "$0" in it is a again (sh -c's first argument). */
static void sh(const char *fmt, const char *a, const char *b)
{
    char cmd[1200], inner[1100];
    snprintf(inner, sizeof inner, fmt, a, b);
    snprintf(cmd, sizeof cmd, "sh -c '%s' '%s'", inner, a);
    if (system(cmd) != 0)
        fprintf(stderr, "command failed: %s\n", cmd);
}

static void spill(const char *path, const char *text)
{
    FILE *fp = fopen(path, "wb");
    if (fp) {
        fputs(text, fp);
        fclose(fp);
    }
}

static char *slurp(const char *path)
{
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return NULL;
    fseek(fp, 0, SEEK_END);
    long n = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (s && fread(s, 1, (size_t)n, fp) == (size_t)n)
        s[n] = '\0';
    fclose(fp);
    return s;
}

/* A copy of the sharded fixture named sub, for one mutilation. */
static const char *copy_of(const char *sub)
{
    const char *d = at(sub);
    sh("rm -rf %s && cp -r %s \"$0\"", d, at("sharded"));
    return d;
}

/* The storage bytes of a loaded layer, on the host (reference context). */
static int same_storage(const mla_layer_weights_ex *a, const mla_layer_weights_ex *b)
{
    return a->storage_bytes == b->storage_bytes &&
           !memcmp(a->storage, b->storage, (size_t)a->storage_bytes);
}

static mla_status ck_load(mla_context *ctx, const char *dir, int64_t layer, mla_layer_weights_ex *w)
{
    mla_checkpoint *ck = NULL;
    mla_status st = mla_checkpoint_open(ctx, dir, &ck);
    if (st == MLA_OK)
        st = mla_layer_weights_load_checkpoint(ctx, ck, layer, NULL, w);
    mla_checkpoint_close(ck);
    return st;
}

static const mla_layer_weight_formats fp8_formats = {
    MLA_WEIGHT_FP8_BLOCK, MLA_WEIGHT_FP8_BLOCK, MLA_WEIGHT_BF16, MLA_WEIGHT_MXFP4,
    MLA_WEIGHT_FP8_BLOCK, MLA_WEIGHT_BF16,      MLA_WEIGHT_BF16, MLA_WEIGHT_BF16};

static void make_fixtures(mla_context *ctx, const mla_model_config *cfg)
{
    mla_generate_options o;
    mla_generate_options_default(&o);
    o.count = 3;
    o.seed = 7;
    o.formats = &fp8_formats;
    o.shards = 3;
    CHECK_STATUS(mla_checkpoint_generate(ctx, at("sharded"), cfg, &o), MLA_OK);
    o.shards = 1;
    CHECK_STATUS(mla_checkpoint_generate(ctx, at("single"), cfg, &o), MLA_OK);
    /* The plain generator's file of the same seed: the reference bytes. */
    CHECK_STATUS(mla_weights_generate(ctx, at("plain.safetensors"), cfg, 0, 3, 7, &fp8_formats),
                 MLA_OK);
}

static void test_load(mla_context *ctx, const mla_model_config *cfg)
{
    mla_safetensors *f = NULL;
    CHECK_STATUS(mla_safetensors_open(ctx, at("plain.safetensors"), &f), MLA_OK);
    for (int64_t layer = 0; layer < 3; ++layer) {
        mla_layer_weights_ex want, a, b;
        CHECK_STATUS(mla_layer_weights_load(ctx, f, cfg, layer, NULL, &want), MLA_OK);
        CHECK_STATUS(ck_load(ctx, at("sharded"), layer, &a), MLA_OK);
        CHECK_STATUS(ck_load(ctx, at("single"), layer, &b), MLA_OK);
        CHECK(same_storage(&a, &want) && same_storage(&b, &want));
        CHECK(a.config.heads == cfg->heads && a.tp_world_size == 1);
        CHECK(a.formats.q_b_proj == MLA_WEIGHT_FP8_BLOCK &&
              a.formats.kv_b_proj == MLA_WEIGHT_MXFP4);
        mla_layer_weights_free(ctx, &want);
        mla_layer_weights_free(ctx, &a);
        mla_layer_weights_free(ctx, &b);
    }
    mla_safetensors_close(f);

    mla_checkpoint *ck = NULL;
    CHECK_STATUS(mla_checkpoint_open(ctx, at("sharded"), &ck), MLA_OK);
    const mla_hf_config *hc = mla_checkpoint_config(ck);
    mla_model_config named = *cfg;
    memcpy(named.name, "sharded", 8);
    CHECK(hc->num_layers == 3 && !strcmp(hc->quant_method, "fp8"));
    CHECK(!memcmp(&hc->model, &named, sizeof named) || !strcmp(hc->model.name, "sharded"));
    CHECK(hc->model.kv_lora == cfg->kv_lora && hc->model.rope_cfg.factor == cfg->rope_cfg.factor);
    CHECK(mla_checkpoint_bytes_read(ck) == 0); /* open reads no shard */
    const char *name = NULL, *shard = NULL;
    CHECK_STATUS(mla_checkpoint_tensor_at(ck, 0, &name, &shard), MLA_OK);
    CHECK(!strncmp(shard, "model-0000", 10));
    CHECK_STATUS(mla_checkpoint_tensor_at(ck, mla_checkpoint_tensor_count(ck), &name, &shard),
                 MLA_ERR_OUT_OF_RANGE);

    /* check_only: the same descriptors, nothing read or allocated */
    mla_layer_load_options lo;
    mla_layer_load_options_default(&lo);
    lo.check_only = 1;
    mla_layer_weights_ex d, w;
    CHECK_STATUS(mla_layer_weights_load_checkpoint(ctx, ck, 2, &lo, &d), MLA_OK);
    const int64_t headers = mla_checkpoint_bytes_read(ck);
    CHECK_STATUS(mla_layer_weights_load_checkpoint(ctx, ck, 2, NULL, &w), MLA_OK);
    CHECK(d.storage == NULL && d.base.q_b_proj.w.data == NULL &&
          d.storage_bytes == w.storage_bytes);
    CHECK(!memcmp(&d.formats, &w.formats, sizeof d.formats));
    CHECK(!memcmp(d.base.o_proj.w.shape, w.base.o_proj.w.shape, sizeof d.base.o_proj.w.shape));
    CHECK(d.base.q_b_proj.scale.dtype == MLA_DTYPE_F32 &&
          d.base.q_b_proj.scale.shape[0] == w.base.q_b_proj.scale.shape[0]);
    /* Exactly layer 2's tensors were read after the headers (the check read none). */
    int64_t layer_bytes = 0;
    for (int64_t i = 0; i < mla_checkpoint_tensor_count(ck); ++i) {
        mla_checkpoint_tensor_at(ck, i, &name, &shard);
        if (!strncmp(name, "model.layers.2.", 15)) {
            mla_safetensors *sf = NULL;
            mla_safetensors_info info;
            CHECK_STATUS(mla_checkpoint_find(ctx, ck, name, &sf, &info), MLA_OK);
            layer_bytes += info.bytes;
        }
    }
    CHECK(layer_bytes > 0);
    if (mla_checkpoint_bytes_read(ck) - headers != layer_bytes)
        fprintf(stderr, "read %lld bytes for layer 2's %lld\n",
                (long long)(mla_checkpoint_bytes_read(ck) - headers), (long long)layer_bytes);
    CHECK(mla_checkpoint_bytes_read(ck) - headers == layer_bytes);
    mla_layer_weights_free(ctx, &w);

    /* past num_hidden_layers */
    memset(&w, 0x5A, sizeof w);
    CHECK_STATUS(mla_layer_weights_load_checkpoint(ctx, ck, 3, NULL, &w), MLA_ERR_OUT_OF_RANGE);
    CHECK(!strcmp(mla_context_error_param(ctx), "layer"));
    mla_checkpoint_close(ck);
}

/* Every other layer's bytes overwritten: layer 1 still loads the same. And
 * a shard holding none of layer 2's tensors may be garbage altogether. */
static void test_only_its_bytes(mla_context *ctx)
{
    copy_of("garbage");
    mla_layer_weights_ex want, got;
    CHECK_STATUS(ck_load(ctx, at("sharded"), 1, &want), MLA_OK);
    mla_checkpoint *ck = NULL;
    CHECK_STATUS(mla_checkpoint_open(ctx, at("garbage"), &ck), MLA_OK);
    char *shard_of_layer2 = NULL;
    for (int64_t i = 0; i < mla_checkpoint_tensor_count(ck); ++i) {
        const char *name = NULL, *shard = NULL;
        mla_checkpoint_tensor_at(ck, i, &name, &shard);
        if (!strncmp(name, "model.layers.2.", 15) && !shard_of_layer2)
            shard_of_layer2 = strcpy(malloc(strlen(shard) + 1), shard);
        if (!strncmp(name, "model.layers.1.", 15))
            continue;
        mla_safetensors *sf = NULL;
        mla_safetensors_info info;
        CHECK_STATUS(mla_checkpoint_find(ctx, ck, name, &sf, &info), MLA_OK);
        char path[600];
        snprintf(path, sizeof path, "%s/%s", at("garbage"), shard);
        FILE *fp = fopen(path, "r+b");
        CHECK(fp != NULL);
        if (!fp)
            continue;
        fseek(fp, (long)info.offset, SEEK_SET);
        for (int64_t k = 0; k < info.bytes; ++k)
            fputc(0xFF, fp); /* NaN in every float format */
        fclose(fp);
    }
    mla_checkpoint_close(ck);
    CHECK_STATUS(ck_load(ctx, at("garbage"), 1, &got), MLA_OK);
    CHECK(same_storage(&got, &want));
    mla_layer_weights_free(ctx, &got);
    mla_layer_weights_free(ctx, &want);
    /* model-00001 holds only layer 0 (first third of the tensors) */
    CHECK(shard_of_layer2 && strcmp(shard_of_layer2, "model-00001-of-00003.safetensors"));
    free(shard_of_layer2);
    spill(at("garbage/model-00001-of-00003.safetensors"), "not a safetensors file");
    CHECK_STATUS(ck_load(ctx, at("garbage"), 2, &got), MLA_OK);
    mla_layer_weights_free(ctx, &got);
    CHECK_STATUS(ck_load(ctx, at("garbage"), 0, &got), MLA_ERR_FORMAT);
    CHECK(!strcmp(mla_context_error_param(ctx), "header"));
}

static void expect_open(mla_context *ctx, const char *dir, int64_t layer, mla_status want,
                        const char *param)
{
    mla_layer_weights_ex w;
    memset(&w, 0x5A, sizeof w);
    mla_layer_weights_ex probe;
    memset(&probe, 0x5A, sizeof probe);
    const mla_status st = ck_load(ctx, dir, layer, &w);
    const int ok = st == want && !strcmp(mla_context_error_param(ctx), param);
    if (!ok)
        fprintf(stderr, "%s layer %lld: %s (%s: %s), expected %s (%s)\n", dir, (long long)layer,
                mla_status_name(st), mla_context_error_param(ctx), mla_context_error_detail(ctx),
                mla_status_name(want), param);
    CHECK(ok);
    CHECK(!memcmp(&w, &probe, sizeof w)); /* nothing loaded half-way */
}

static void test_refusals(mla_context *ctx)
{
    expect_open(ctx, at("nonexistent"), 0, MLA_ERR_IO, "dir");
    expect_open(ctx, at("plain.safetensors"), 0, MLA_ERR_IO, "dir");
    const char *d = copy_of("noconfig");
    sh("rm %s/config.json%s", d, "");
    expect_open(ctx, d, 0, MLA_ERR_IO, "config.json");
    d = copy_of("badconfig");
    char *cfg = slurp(at("sharded/config.json"));
    spill(at("badconfig/config.json"), "{\"hidden_size\": 256");
    expect_open(ctx, d, 0, MLA_ERR_FORMAT, "config.json");
    char *p = strstr(cfg, "\"kv_lora_rank\": 128");
    if (p) { /* a config that does not match the tensors */
        memcpy(p, "\"kv_lora_rank\": 256", 19);
        spill(at("badconfig/config.json"), cfg);
        expect_open(ctx, d, 0, MLA_ERR_SHAPE, "model.layers.0.self_attn.kv_a_proj_with_mqa.weight");
    }
    free(cfg);
    d = copy_of("noindex");
    sh("rm %s/model.safetensors.index.json%s", d, "");
    expect_open(ctx, d, 0, MLA_ERR_IO, "model.safetensors.index.json");
    d = copy_of("badindex");
    spill(at("badindex/model.safetensors.index.json"), "{\"weight_map\": [1]}");
    expect_open(ctx, d, 0, MLA_ERR_FORMAT, "model.safetensors.index.json");
    spill(at("badindex/model.safetensors.index.json"), "{\"weight_map\": {\"a\": 3}}");
    expect_open(ctx, d, 0, MLA_ERR_FORMAT, "model.safetensors.index.json");
    spill(at("badindex/model.safetensors.index.json"),
          "{\"weight_map\": {\"a\": \"../model-00001-of-00003.safetensors\"}}");
    expect_open(ctx, d, 0, MLA_ERR_FORMAT, "model.safetensors.index.json");
    spill(at("badindex/model.safetensors.index.json"),
          "{\"weight_map\": {\"a\": \"x.safetensors\", \"a\": \"y.safetensors\"}}");
    expect_open(ctx, d, 0, MLA_ERR_FORMAT, "model.safetensors.index.json");
    d = copy_of("noshard");
    sh("rm %s/model-00002-of-00003.safetensors%s", d, "");
    expect_open(ctx, d, 0, MLA_ERR_IO, "model-00002-of-00003.safetensors");
    /* The index puts a tensor in a shard that does not hold it. */
    d = copy_of("wrongshard");
    char *idx = slurp(at("wrongshard/model.safetensors.index.json"));
    const char *key = "\"model.layers.0.self_attn.kv_a_layernorm.weight\": \"model-0000";
    p = idx ? strstr(idx, key) : NULL;
    CHECK(p != NULL);
    if (p) {
        char *digit = p + strlen(key);
        *digit = *digit == '3' ? '2' : '3';
        spill(at("wrongshard/model.safetensors.index.json"), idx);
        expect_open(ctx, d, 0, MLA_ERR_FORMAT, "model.layers.0.self_attn.kv_a_layernorm.weight");
    }
    free(idx);
    /* a tensor of the layer absent from the index */
    d = copy_of("missing");
    idx = slurp(at("missing/model.safetensors.index.json"));
    p = idx ? strstr(idx, "\"model.layers.1.self_attn.o_proj.weight\"") : NULL;
    if (p) {
        p[1] = 'X';
        spill(at("missing/model.safetensors.index.json"), idx);
        expect_open(ctx, d, 1, MLA_ERR_FORMAT, "model.layers.1.self_attn.o_proj.weight");
    }
    free(idx);
    mla_checkpoint *ck = (mla_checkpoint *)0x1;
    CHECK_STATUS(mla_checkpoint_open(ctx, NULL, &ck), MLA_ERR_NULL_POINTER);
    CHECK(ck == (mla_checkpoint *)0x1);
}

/* Issue 18 section 4: the parameter each refusal names. */
static void test_named_params(mla_context *ctx, const mla_model_config *cfg)
{
    CHECK_STATUS(mla_weights_generate(ctx, at("x.safetensors"), cfg, -1, 1, 0, NULL),
                 MLA_ERR_OUT_OF_RANGE);
    CHECK(!strcmp(mla_context_error_param(ctx), "first"));
    CHECK_STATUS(mla_weights_generate(ctx, at("x.safetensors"), cfg, 0, 0, 0, NULL),
                 MLA_ERR_OUT_OF_RANGE);
    CHECK(!strcmp(mla_context_error_param(ctx), "count"));
    mla_safetensors *f = NULL;
    CHECK_STATUS(mla_safetensors_open(ctx, root, &f), MLA_ERR_IO);
    CHECK(!strcmp(mla_context_error_param(ctx), "path"));
    CHECK(strstr(mla_context_error_detail(ctx), "directory") != NULL);
    /* a tensor named "" is refused naming the header, not "" */
    FILE *fp = fopen(at("empty.safetensors"), "wb");
    const char *h = "{\"\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}";
    const unsigned char len[8] = {(unsigned char)strlen(h)};
    fwrite(len, 1, 8, fp);
    fwrite(h, 1, strlen(h), fp);
    fputc(0, fp);
    fclose(fp);
    CHECK_STATUS(mla_safetensors_open(ctx, at("empty.safetensors"), &f), MLA_ERR_FORMAT);
    CHECK(!strcmp(mla_context_error_param(ctx), "header"));
    mla_generate_options o;
    mla_generate_options_default(&o);
    o.shards = 0;
    CHECK_STATUS(mla_checkpoint_generate(ctx, at("x"), cfg, &o), MLA_ERR_OUT_OF_RANGE);
    CHECK(!strcmp(mla_context_error_param(ctx), "options.shards"));
    o.shards = 1000; /* more shards than tensors */
    CHECK_STATUS(mla_checkpoint_generate(ctx, at("x"), cfg, &o), MLA_ERR_OUT_OF_RANGE);
}

/* config.json as the generator writes it reads back to the config, for
 * every preset. */
static void test_config_json(mla_context *ctx)
{
    for (int i = 0; mla_model_config_preset_name(i); ++i) {
        mla_model_config c;
        mla_model_config_preset(mla_model_config_preset_name(i), &c);
        char *text = mla_hf_config_json(&c, 5, i % 2 ? "fp8" : "");
        mla_hf_config back;
        CHECK(text != NULL);
        CHECK_STATUS(mla_hf_config_parse(ctx, text, strlen(text), &back), MLA_OK);
        memcpy(back.model.name, c.name, sizeof c.name);
        CHECK(!memcmp(&back.model, &c, sizeof c) && back.num_layers == 5);
        free(text);
    }
}

/* fp8 kv_b_proj converted at load, of a tensor-parallel slice whose latent
 * spans several 128-column blocks: every value is its block's code * scale,
 * then bf16, or re-quantized with the slice's own tensor scale. */
static void test_kv_b_slices(mla_context *ctx)
{
    static const char *const json =
        "{\"model_type\": \"deepseek_v3\", \"hidden_size\": 128, \"num_attention_heads\": 4, "
        "\"num_hidden_layers\": 1, \"q_lora_rank\": null, \"kv_lora_rank\": 384, "
        "\"qk_nope_head_dim\": 64, \"qk_rope_head_dim\": 64, \"v_head_dim\": 64, "
        "\"max_position_embeddings\": 64, \"rms_norm_eps\": 1e-06, \"rope_theta\": 10000, "
        "\"rope_scaling\": null}";
    mla_hf_config hc;
    CHECK_STATUS(mla_hf_config_parse(ctx, json, strlen(json), &hc), MLA_OK);
    const mla_layer_weight_formats fm = {0, 0, 0, MLA_WEIGHT_FP8_BLOCK, 0, 0, 0, 0};
    mla_generate_options go;
    mla_generate_options_default(&go);
    go.formats = &fm;
    CHECK_STATUS(mla_checkpoint_generate(ctx, at("kvb"), &hc.model, &go), MLA_OK);
    mla_checkpoint *ck = NULL;
    CHECK_STATUS(mla_checkpoint_open(ctx, at("kvb"), &ck), MLA_OK);
    if (!ck)
        return;
    mla_layer_weights_ex keep, bf, ten;
    mla_layer_load_options o;
    mla_layer_load_options_default(&o);
    CHECK_STATUS(mla_layer_weights_load_checkpoint(ctx, ck, 0, &o, &keep), MLA_OK);
    o.rank = 1, o.world_size = 2, o.kv_b_fp8 = MLA_KV_B_FP8_TO_BF16;
    CHECK_STATUS(mla_layer_weights_load_checkpoint(ctx, ck, 0, &o, &bf), MLA_OK);
    o.kv_b_fp8 = MLA_KV_B_FP8_TO_TENSOR;
    CHECK_STATUS(mla_layer_weights_load_checkpoint(ctx, ck, 0, &o, &ten), MLA_OK);
    const mla_weight *kv = &keep.base.kv_b_proj;
    const int64_t L = 384, rows = 2 * 128, r0 = rows, sb = 3;
    const uint8_t *codes = kv->w.data;
    const float *scales = kv->scale.data;
    float amax = 0.0f, *x = malloc((size_t)(rows * L) * sizeof *x);
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < L; ++c) {
            const int64_t R = r0 + r;
            x[r * L + c] = mla_fp8_to_f32(codes[R * L + c], MLA_DTYPE_FP8_E4M3FN) *
                           scales[(R / 128) * sb + c / 128];
            amax = fmaxf(amax, fabsf(x[r * L + c]));
        }
    const float s = 448.0f / amax;
    int ok = ten.kv_b_tensor_scale == 1.0f / s && bf.base.kv_b_proj.w.shape[0] == rows;
    for (int64_t i = 0; ok && i < rows * L; ++i)
        ok = ((const uint16_t *)bf.base.kv_b_proj.w.data)[i] == mla_f32_to_bf16(x[i]) &&
             ((const uint8_t *)ten.base.kv_b_proj.w.data)[i] ==
                 mla_f32_to_fp8(x[i] * s, MLA_DTYPE_FP8_E4M3FN, MLA_SATURATE);
    CHECK(ok);
    free(x);
    mla_layer_weights_free(ctx, &keep);
    mla_layer_weights_free(ctx, &bf);
    mla_layer_weights_free(ctx, &ten);
    mla_checkpoint_close(ck);
}

int main(void)
{
    sh("rm -rf %s && mkdir -p %s", root, root);
    mla_context *ctx = NULL;
    if (mla_context_create(MLA_BACKEND_REFERENCE, NULL, &ctx) != MLA_OK)
        return 1;
    mla_model_config cfg;
    mla_model_config_preset("test-tiny", &cfg);
    make_fixtures(ctx, &cfg);
    test_load(ctx, &cfg);
    test_only_its_bytes(ctx);
    test_refusals(ctx);
    test_named_params(ctx, &cfg);
    test_config_json(ctx);
    test_kv_b_slices(ctx);
    mla_context_destroy(ctx);
    return TEST_SUMMARY();
}
