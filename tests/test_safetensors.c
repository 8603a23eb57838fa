/* Safetensors reader / writer, the DeepSeek layer loader and the seeded
 * generator: round trips, every refused header, missing and mis-shaped
 * tensors, and the MXFP4 W_kc transform against the reference ops. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mla/mla.h"
#include "tests/test_util.h"

static char dir[256];

/* Rotating buffers: enough for the paths one test holds at a time. */
static const char *path_of(const char *name)
{
    static char buf[16][512];
    static int k;
    k = (k + 1) % 16;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

/* A file of [8-byte length][header][data_bytes zero bytes]. */
static void write_raw(const char *path, const char *header, size_t data_bytes)
{
    FILE *fp = fopen(path, "wb");
    size_t n = strlen(header);
    unsigned char len[8];
    for (int i = 0; i < 8; ++i)
        len[i] = (unsigned char)((unsigned long long)n >> (8 * i));
    fwrite(len, 1, 8, fp);
    fwrite(header, 1, n, fp);
    for (size_t i = 0; i < data_bytes; ++i)
        fputc(0, fp);
    fclose(fp);
}

static mla_status open_status(mla_context *ctx, const char *path)
{
    mla_safetensors *f = (mla_safetensors *)0x1;
    mla_status st = mla_safetensors_open(ctx, path, &f);
    if (st == MLA_OK)
        mla_safetensors_close(f);
    else
        CHECK(f == (mla_safetensors *)0x1); /* untouched on failure */
    return st;
}

static void test_writer_reader(mla_context *ctx)
{
    mla_safetensors_writer *w;
    CHECK_STATUS(mla_safetensors_writer_create(ctx, &w), MLA_OK);
    float a[6] = {1, 2, 3, 4, 5, -6};
    uint16_t b[3] = {0x3F80, 0x4000, 0xBF80};
    int64_t c[2] = {-1, 1LL << 40};
    uint8_t d[5] = {0x38, 0x40, 0x7E, 0x00, 0xB8};
    int64_t sa[2] = {2, 3}, sb[1] = {3}, sc[1] = {2}, sd[1] = {5}, s0[2] = {0, 4};
    CHECK_STATUS(mla_safetensors_writer_add(ctx, w, "a", MLA_DTYPE_F32, 2, sa, a), MLA_OK);
    CHECK_STATUS(mla_safetensors_writer_add(ctx, w, "b.bf16", MLA_DTYPE_BF16, 1, sb, b), MLA_OK);
    CHECK_STATUS(mla_safetensors_writer_add(ctx, w, "c", MLA_DTYPE_I64, 1, sc, c), MLA_OK);
    CHECK_STATUS(mla_safetensors_writer_add(ctx, w, "d", MLA_DTYPE_FP8_E4M3FN, 1, sd, d), MLA_OK);
    CHECK_STATUS(mla_safetensors_writer_add(ctx, w, "empty", MLA_DTYPE_F32, 2, s0, NULL), MLA_OK);
    CHECK_STATUS(mla_safetensors_writer_add(ctx, w, "scalar", MLA_DTYPE_F32, 0, NULL, a), MLA_OK);
    CHECK_STATUS(mla_safetensors_writer_add(ctx, w, "a", MLA_DTYPE_F32, 2, sa, a),
                 MLA_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(mla_safetensors_writer_add(ctx, w, "x", MLA_DTYPE_FP8_E4M3FNUZ, 1, sd, d),
                 MLA_ERR_DTYPE);
    CHECK_STATUS(mla_safetensors_writer_add(ctx, w, "q\"", MLA_DTYPE_U8, 1, sd, d),
                 MLA_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(mla_safetensors_writer_metadata(ctx, w, "k", "v"), MLA_OK);
    CHECK_STATUS(mla_safetensors_writer_save(ctx, w, path_of("basic.safetensors")), MLA_OK);
    mla_safetensors_writer_destroy(w);

    /* The data section starts 8-byte aligned. */
    FILE *fp = fopen(path_of("basic.safetensors"), "rb");
    unsigned char len[8];
    CHECK(fread(len, 1, 8, fp) == 8);
    fclose(fp);
    unsigned long long n = 0;
    for (int i = 7; i >= 0; --i)
        n = n << 8 | len[i];
    CHECK((8 + n) % 8 == 0);

    mla_safetensors *f = NULL;
    CHECK_STATUS(mla_safetensors_open(ctx, path_of("basic.safetensors"), &f), MLA_OK);
    if (!f)
        return;
    CHECK(mla_safetensors_count(f) == 6);
    CHECK(mla_safetensors_metadata(f, "k") && !strcmp(mla_safetensors_metadata(f, "k"), "v"));
    CHECK(mla_safetensors_metadata(f, "nope") == NULL);
    mla_safetensors_info info;
    CHECK_STATUS(mla_safetensors_info_at(f, 0, &info), MLA_OK);
    CHECK(!strcmp(info.name, "a") && info.dtype == MLA_DTYPE_F32 && info.ndim == 2 &&
          info.shape[1] == 3 && info.bytes == 24);
    CHECK_STATUS(mla_safetensors_find(ctx, f, "d", &info), MLA_OK);
    CHECK(!strcmp(info.file_dtype, "F8_E4M3") && info.dtype == MLA_DTYPE_FP8_E4M3FN);
    CHECK_STATUS(mla_safetensors_find(ctx, f, "zz", &info), MLA_ERR_FORMAT);
    CHECK(!strcmp(mla_context_error_param(ctx), "zz"));

    float ra[6] = {0};
    mla_tensor t;
    mla_tensor_init(&t, ra, MLA_DTYPE_F32, MLA_MEMORY_HOST, 2, sa);
    CHECK_STATUS(mla_safetensors_read(NULL, f, "a", &t), MLA_OK);
    CHECK(!memcmp(ra, a, sizeof a));
    uint16_t rb[3];
    mla_tensor_init(&t, rb, MLA_DTYPE_BF16, MLA_MEMORY_HOST, 1, sb);
    CHECK_STATUS(mla_safetensors_read(ctx, f, "b.bf16", &t), MLA_OK);
    CHECK(!memcmp(rb, b, sizeof b));
    int64_t rc[2];
    mla_tensor_init(&t, rc, MLA_DTYPE_I64, MLA_MEMORY_HOST, 1, sc);
    CHECK_STATUS(mla_safetensors_read(ctx, f, "c", &t), MLA_OK);
    CHECK(rc[0] == -1 && rc[1] == (1LL << 40));
    /* Wrong dtype, wrong shape, non-contiguous destination. */
    mla_tensor_init(&t, rb, MLA_DTYPE_F16, MLA_MEMORY_HOST, 1, sb);
    CHECK_STATUS(mla_safetensors_read(ctx, f, "b.bf16", &t), MLA_ERR_DTYPE);
    mla_tensor_init(&t, ra, MLA_DTYPE_F32, MLA_MEMORY_HOST, 1, sd);
    CHECK_STATUS(mla_safetensors_read(ctx, f, "a", &t), MLA_ERR_SHAPE);
    mla_tensor_init(&t, ra, MLA_DTYPE_F32, MLA_MEMORY_HOST, 2, sa);
    mla_tensor_transpose(&t, 0, 1);
    t.shape[0] = 2, t.shape[1] = 3;
    CHECK_STATUS(mla_safetensors_read(ctx, f, "a", &t), MLA_ERR_STRIDE);
    mla_safetensors_close(f);
}

static void test_corrupt(mla_context *ctx)
{
    const char *p = path_of("bad.safetensors");
    FILE *fp = fopen(p, "wb");
    fwrite("\x10\0\0\0", 1, 4, fp); /* shorter than the length field */
    fclose(fp);
    CHECK_STATUS(open_status(ctx, p), MLA_ERR_FORMAT);

    fp = fopen(p, "wb"); /* length beyond the file */
    fwrite("\xff\0\0\0\0\0\0\0{}", 1, 10, fp);
    fclose(fp);
    CHECK_STATUS(open_status(ctx, p), MLA_ERR_FORMAT);
    fp = fopen(p, "wb"); /* a length that would wrap int64 */
    fwrite("\xff\xff\xff\xff\xff\xff\xff\xff{}", 1, 10, fp);
    fclose(fp);
    CHECK_STATUS(open_status(ctx, p), MLA_ERR_FORMAT);

    CHECK_STATUS(open_status(ctx, path_of("does-not-exist")), MLA_ERR_IO);

    static const struct {
        const char *header;
        size_t data;
        mla_status want;
        const char *param;
    } cases[] = {
        {"{}", 0, MLA_OK, ""},
        {"{\"__metadata__\":{\"a\":\"b\"}}   ", 0, MLA_OK, ""},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}", 4, MLA_ERR_FORMAT,
         "header"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}} x", 4, MLA_ERR_FORMAT,
         "header"},
        {"", 0, MLA_ERR_FORMAT, "header"},
        {"[]", 0, MLA_ERR_FORMAT, "header"},
        {"{\"a\":{\"dtype\":F32,\"shape\":[1],\"data_offsets\":[0,4]}}", 4, MLA_ERR_FORMAT, "a"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}", 4, MLA_ERR_FORMAT,
         "a"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 4, MLA_ERR_FORMAT,
         "a"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0]}}", 4, MLA_ERR_FORMAT, "a"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1]}}", 4, MLA_ERR_FORMAT, "a"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 4,
         MLA_ERR_FORMAT, "a"},
        {"{\"a\":{\"dtype\":\"F7\",\"shape\":[1],\"data_offsets\":[0,4]}}", 4, MLA_ERR_DTYPE, "a"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", 4, MLA_ERR_SHAPE, "a"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4, MLA_ERR_FORMAT,
         "a"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,0]}}", 4, MLA_ERR_FORMAT,
         "a"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
         "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[2,6]}}",
         6, MLA_ERR_FORMAT, "b"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
         "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}",
         12, MLA_ERR_FORMAT, "b"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 8, MLA_ERR_FORMAT,
         "header"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
         "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
         8, MLA_ERR_FORMAT, "a"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,4]}}", 4,
         MLA_ERR_OVERFLOW, "a"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,99999999999999999999]}}", 4,
         MLA_ERR_OVERFLOW, "a"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],\"extra\":[{\"x\":null}]}"
         "}",
         4, MLA_OK, ""},
        {"{\"a\\u00e9\\n\":{\"dtype\":\"I8\",\"shape\":[4],\"data_offsets\":[0,4]}}", 4, MLA_OK,
         ""},
        {"{\"a\\ud800\":{\"dtype\":\"I8\",\"shape\":[4],\"data_offsets\":[0,4]}}", 4,
         MLA_ERR_FORMAT, "header"},
        {"{\"__metadata__\":{\"a\":1}}", 0, MLA_ERR_FORMAT, "__metadata__"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
        write_raw(p, cases[i].header, cases[i].data);
        mla_status st = open_status(ctx, p);
        if (st != cases[i].want || strcmp(mla_context_error_param(ctx), cases[i].param) != 0)
            fprintf(stderr, "case %zu: %s (%s: %s), expected %s (%s)\n", i, mla_status_name(st),
                    mla_context_error_param(ctx), mla_context_error_detail(ctx),
                    mla_status_name(cases[i].want), cases[i].param);
        CHECK(st == cases[i].want);
        CHECK(!strcmp(mla_context_error_param(ctx), cases[i].param));
    }
}

/* --------------------------------------------------------- layer loading */

static int tensor_equals_file(mla_safetensors *f, const char *name, const mla_tensor *t)
{
    mla_safetensors_info info;
    if (mla_safetensors_find(NULL, f, name, &info) != MLA_OK)
        return 0;
    unsigned char *buf = malloc((size_t)info.bytes + 1);
    mla_tensor h;
    mla_tensor_init(&h, buf, info.dtype, MLA_MEMORY_HOST, info.ndim, info.shape);
    int ok = mla_safetensors_read(NULL, f, name, &h) == MLA_OK && mla_tensor_is_contiguous(t) &&
             !memcmp(buf, t->data, (size_t)info.bytes);
    free(buf);
    return ok;
}

#define PFX "model.layers.%d.self_attn."

static const char *tname(int layer, const char *suffix)
{
    static char buf[4][192];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], PFX "%s", layer, suffix);
    return buf[k];
}

static int files_equal(const char *a, const char *b)
{
    FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
    int eq = fa && fb;
    while (eq) {
        int ca = fgetc(fa), cb = fgetc(fb);
        eq = ca == cb;
        if (ca == EOF || cb == EOF)
            break;
    }
    if (fa)
        fclose(fa);
    if (fb)
        fclose(fb);
    return eq;
}

static void test_round_trip_bf16(mla_context *ctx)
{
    mla_model_config cfg;
    mla_model_config_preset("test-tiny", &cfg);
    const char *p = path_of("tiny.safetensors");
    CHECK_STATUS(mla_weights_generate(ctx, p, &cfg, 2, 2, 7, NULL), MLA_OK);
    CHECK_STATUS(mla_weights_generate(ctx, path_of("tiny2.safetensors"), &cfg, 2, 2, 7, NULL),
                 MLA_OK);
    CHECK(files_equal(p, path_of("tiny2.safetensors")));
    CHECK_STATUS(mla_weights_generate(ctx, path_of("tiny3.safetensors"), &cfg, 2, 2, 8, NULL),
                 MLA_OK);
    CHECK(!files_equal(p, path_of("tiny3.safetensors")));

    mla_safetensors *f = NULL;
    CHECK_STATUS(mla_safetensors_open(ctx, p, &f), MLA_OK);
    if (!f)
        return;
    CHECK(!strcmp(mla_safetensors_metadata(f, "mla.config"), "test-tiny"));
    CHECK(!strcmp(mla_safetensors_metadata(f, "mla.seed"), "7"));
    mla_layer_weights_ex w;
    CHECK_STATUS(mla_layer_weights_load(ctx, f, &cfg, 0, NULL, &w), MLA_ERR_FORMAT);
    CHECK(!strcmp(mla_context_error_param(ctx), "model.layers.0.self_attn.q_a_proj.weight"));
    CHECK_STATUS(mla_layer_weights_load(ctx, f, &cfg, 3, NULL, &w), MLA_OK);
    const mla_layer_weights *b = &w.base;
    CHECK(w.formats.q_b_proj == MLA_WEIGHT_BF16 && w.formats.kv_b_proj == MLA_WEIGHT_BF16);
    CHECK(!w.has_indexer && w.base.kv_b_proj.scale.data == NULL);
    CHECK(tensor_equals_file(f, tname(3, "q_a_proj.weight"), &b->q_a_proj.w));
    CHECK(tensor_equals_file(f, tname(3, "q_a_layernorm.weight"), &b->q_a_layernorm));
    CHECK(tensor_equals_file(f, tname(3, "q_b_proj.weight"), &b->q_b_proj.w));
    CHECK(tensor_equals_file(f, tname(3, "kv_a_proj_with_mqa.weight"), &b->kv_a_proj_with_mqa.w));
    CHECK(tensor_equals_file(f, tname(3, "kv_a_layernorm.weight"), &b->kv_a_layernorm));
    CHECK(tensor_equals_file(f, tname(3, "kv_b_proj.weight"), &b->kv_b_proj.w));
    CHECK(tensor_equals_file(f, tname(3, "o_proj.weight"), &b->o_proj.w));
    CHECK(b->q_b_proj.w.shape[0] == cfg.heads * (cfg.nope + cfg.rope) &&
          b->q_b_proj.w.shape[1] == cfg.q_lora);

    /* Scaled like a checkpoint: std 1/sqrt(in), norms near 1. */
    double s2 = 0.0;
    const uint16_t *qa = b->q_a_proj.w.data;
    int64_t n = cfg.q_lora * cfg.hidden;
    for (int64_t i = 0; i < n; ++i)
        s2 += (double)mla_bf16_to_f32(qa[i]) * mla_bf16_to_f32(qa[i]);
    double sd = sqrt(s2 / (double)n) * sqrt((double)cfg.hidden);
    CHECK(sd > 0.95 && sd < 1.05);
    const uint16_t *ln = b->kv_a_layernorm.data;
    double mean = 0.0;
    for (int64_t i = 0; i < cfg.kv_lora; ++i)
        mean += mla_bf16_to_f32(ln[i]);
    mean /= (double)cfg.kv_lora;
    CHECK(fabs(mean - 1.0) < 0.02);

    /* W_kc and W_vc views of kv_b_proj. */
    const uint16_t *kv = b->kv_b_proj.w.data;
    const int64_t dv = cfg.nope + cfg.v, L = cfg.kv_lora;
    const uint16_t *kc = w.w_kc.data, *vc = w.w_vc.data;
    int views_ok = w.w_kc.shape[0] == cfg.heads && w.w_kc.shape[1] == cfg.nope &&
                   w.w_kc.shape[2] == L && w.w_vc.shape[1] == L && w.w_vc.shape[2] == cfg.v;
    for (int64_t h = 0; h < cfg.heads; ++h)
        for (int64_t l = 0; l < L; ++l) {
            for (int64_t i = 0; i < cfg.nope; ++i)
                views_ok &=
                    kc[h * w.w_kc.stride[0] + i * w.w_kc.stride[1] + l * w.w_kc.stride[2]] ==
                    kv[(h * dv + i) * L + l];
            for (int64_t j = 0; j < cfg.v; ++j)
                views_ok &=
                    vc[h * w.w_vc.stride[0] + l * w.w_vc.stride[1] + j * w.w_vc.stride[2]] ==
                    kv[(h * dv + cfg.nope + j) * L + l];
        }
    CHECK(views_ok);
    mla_layer_weights_free(ctx, &w);
    CHECK(w.storage == NULL);
    mla_safetensors_close(f);

    /* No q_lora: q_proj lands in q_b_proj. */
    mla_model_config noq;
    mla_model_config_preset("test-tiny-noq", &noq);
    p = path_of("noq.safetensors");
    CHECK_STATUS(mla_weights_generate(ctx, p, &noq, 0, 1, 1, NULL), MLA_OK);
    CHECK_STATUS(mla_safetensors_open(ctx, p, &f), MLA_OK);
    CHECK(mla_safetensors_has(f, tname(0, "q_proj.weight")));
    CHECK(!mla_safetensors_has(f, tname(0, "q_a_proj.weight")));
    CHECK_STATUS(mla_layer_weights_load(ctx, f, &noq, 0, NULL, &w), MLA_OK);
    CHECK(tensor_equals_file(f, tname(0, "q_proj.weight"), &w.base.q_b_proj.w));
    CHECK(w.base.q_b_proj.w.shape[1] == noq.hidden);
    mla_layer_weights_free(ctx, &w);
    /* A file of the other config: q_proj has the wrong in-extent for test-tiny. */
    CHECK_STATUS(mla_layer_weights_load(ctx, f, &cfg, 0, NULL, &w), MLA_ERR_FORMAT);
    mla_safetensors_close(f);
}

/* Copies src to dst, dropping `drop` and giving `reshape` the shape [r0, r1]. */
static void rewrite(const char *src, const char *dst, const char *drop, const char *reshape,
                    int64_t r0, int64_t r1)
{
    mla_safetensors *f = NULL;
    mla_safetensors_open(NULL, src, &f);
    mla_safetensors_writer *w;
    mla_safetensors_writer_create(NULL, &w);
    for (int64_t i = 0; i < mla_safetensors_count(f); ++i) {
        mla_safetensors_info info;
        mla_safetensors_info_at(f, i, &info);
        if (drop && !strcmp(info.name, drop))
            continue;
        unsigned char *buf = calloc((size_t)(info.bytes + r0 * r1 * 8 + 1), 1);
        mla_tensor t;
        mla_tensor_init(&t, buf, info.dtype, MLA_MEMORY_HOST, info.ndim, info.shape);
        mla_safetensors_read(NULL, f, info.name, &t);
        if (reshape && !strcmp(info.name, reshape)) {
            int64_t sh[2] = {r0, r1};
            mla_safetensors_writer_add(NULL, w, info.name, info.dtype, 2, sh, buf);
        } else {
            mla_safetensors_writer_add(NULL, w, info.name, info.dtype, info.ndim, info.shape, buf);
        }
        free(buf);
    }
    mla_safetensors_writer_save(NULL, w, dst);
    mla_safetensors_writer_destroy(w);
    mla_safetensors_close(f);
}

static mla_status load_status(mla_context *ctx, const char *path, const mla_model_config *cfg)
{
    mla_safetensors *f = NULL;
    mla_status st = mla_safetensors_open(ctx, path, &f);
    if (st != MLA_OK)
        return st;
    mla_layer_weights_ex w;
    memset(&w, 0xAB, sizeof w);
    mla_layer_weights_ex before = w;
    st = mla_layer_weights_load(ctx, f, cfg, 0, NULL, &w);
    if (st == MLA_OK)
        mla_layer_weights_free(ctx, &w);
    else
        CHECK(!memcmp(&w, &before, sizeof w)); /* nothing written on failure */
    mla_safetensors_close(f);
    return st;
}

/* A checkpoint in two shards (tensors alternating) loads like the whole;
 * one shard alone lacks a tensor. */
static void test_shards(mla_context *ctx, const char *whole, const mla_model_config *cfg)
{
    mla_safetensors *f = NULL, *sh[2] = {NULL, NULL};
    mla_safetensors_open(ctx, whole, &f);
    mla_safetensors_writer *w[2];
    mla_safetensors_writer_create(ctx, &w[0]);
    mla_safetensors_writer_create(ctx, &w[1]);
    for (int64_t i = 0; i < mla_safetensors_count(f); ++i) {
        mla_safetensors_info info;
        mla_safetensors_info_at(f, i, &info);
        unsigned char *buf = malloc((size_t)info.bytes + 1);
        mla_tensor t;
        mla_tensor_init(&t, buf, info.dtype, MLA_MEMORY_HOST, info.ndim, info.shape);
        mla_safetensors_read(ctx, f, info.name, &t);
        mla_safetensors_writer_add(ctx, w[i % 2], info.name, info.dtype, info.ndim, info.shape,
                                   buf);
        free(buf);
    }
    const char *paths[2] = {path_of("shard1.safetensors"), path_of("shard2.safetensors")};
    for (int k = 0; k < 2; ++k) {
        CHECK_STATUS(mla_safetensors_writer_save(ctx, w[k], paths[k]), MLA_OK);
        mla_safetensors_writer_destroy(w[k]);
        CHECK_STATUS(mla_safetensors_open(ctx, paths[k], &sh[k]), MLA_OK);
    }
    mla_layer_weights_ex a, b;
    CHECK_STATUS(mla_layer_weights_load(ctx, f, cfg, 0, NULL, &a), MLA_OK);
    CHECK_STATUS(mla_layer_weights_load_shards(ctx, sh, 2, cfg, 0, NULL, &b), MLA_OK);
    CHECK(a.storage_bytes == b.storage_bytes &&
          !memcmp(a.storage, b.storage, (size_t)a.storage_bytes));
    mla_layer_weights_free(ctx, &a);
    mla_layer_weights_free(ctx, &b);
    CHECK_STATUS(mla_layer_weights_load_shards(ctx, sh, 1, cfg, 0, NULL, &b), MLA_ERR_FORMAT);
    CHECK(!strcmp(mla_context_error_param(ctx),
                  "model.layers.0.self_attn.q_a_proj.weight_scale_inv"));
    CHECK_STATUS(mla_layer_weights_load_shards(ctx, sh, 0, cfg, 0, NULL, &b),
                 MLA_ERR_INVALID_ARGUMENT);
    mla_safetensors_close(sh[0]);
    mla_safetensors_close(sh[1]);
    mla_safetensors_close(f);
}

static float fp8_weight(const mla_weight *wt, int64_t r, int64_t c)
{
    const uint8_t *codes = wt->w.data;
    const float *s = wt->scale.data;
    int64_t in = wt->w.shape[1];
    return mla_fp8_to_f32(codes[r * in + c], MLA_DTYPE_FP8_E4M3FN) *
           s[(r / 128) * wt->scale.shape[1] + c / 128];
}

/* FP8_BLOCK kv_b_proj converted at load: to bf16, and to one scale per
 * tensor (SGLang's rule), both checked element by element. */
static void test_kv_b_conversions(mla_context *ctx, const char *path, const mla_model_config *cfg)
{
    mla_safetensors *f = NULL;
    CHECK_STATUS(mla_safetensors_open(ctx, path, &f), MLA_OK);
    if (!f)
        return;
    mla_layer_weights_ex keep, bf, ten;
    mla_layer_load_options opt;
    mla_layer_load_options_default(&opt);
    CHECK_STATUS(mla_layer_weights_load(ctx, f, cfg, 0, &opt, &keep), MLA_OK);
    opt.kv_b_fp8 = MLA_KV_B_FP8_TO_BF16;
    CHECK_STATUS(mla_layer_weights_load(ctx, f, cfg, 0, &opt, &bf), MLA_OK);
    opt.kv_b_fp8 = MLA_KV_B_FP8_TO_TENSOR;
    CHECK_STATUS(mla_layer_weights_load(ctx, f, cfg, 0, &opt, &ten), MLA_OK);
    opt.kv_b_fp8 = MLA_KV_B_FP8_COUNT;
    CHECK_STATUS(mla_layer_weights_load(ctx, f, cfg, 0, &opt, &ten), MLA_ERR_INVALID_ARGUMENT);
    CHECK(keep.formats.kv_b_proj == MLA_WEIGHT_FP8_BLOCK && keep.kv_b_tensor_scale == 1.0f);
    CHECK(bf.formats.kv_b_proj == MLA_WEIGHT_BF16 && bf.base.kv_b_proj.w.dtype == MLA_DTYPE_BF16 &&
          bf.base.kv_b_proj.scale.data == NULL && bf.w_kc.dtype == MLA_DTYPE_BF16);
    CHECK(ten.formats.kv_b_proj == MLA_WEIGHT_FP8_TENSOR &&
          ten.base.kv_b_proj.w.dtype == MLA_DTYPE_FP8_E4M3FN &&
          ten.base.kv_b_proj.scale.shape[0] == 1 && ten.w_vc.dtype == MLA_DTYPE_FP8_E4M3FN &&
          *(const float *)ten.base.kv_b_proj.scale.data == ten.kv_b_tensor_scale);
    CHECK(bf.formats.o_proj == MLA_WEIGHT_FP8_BLOCK); /* only kv_b_proj converts */
    const mla_weight *kv = &keep.base.kv_b_proj;
    const int64_t out = kv->w.shape[0], in = kv->w.shape[1];
    float amax = 0.0f;
    for (int64_t r = 0; r < out; ++r)
        for (int64_t c = 0; c < in; ++c)
            amax = fmaxf(amax, fabsf(fp8_weight(kv, r, c)));
    float sc = 448.0f / amax;
    int ok = fabsf(ten.kv_b_tensor_scale - 1.0f / sc) == 0.0f;
    const uint16_t *b16 = bf.base.kv_b_proj.w.data;
    const uint8_t *t8 = ten.base.kv_b_proj.w.data;
    for (int64_t r = 0; r < out; ++r)
        for (int64_t c = 0; c < in; ++c) {
            float x = fp8_weight(kv, r, c);
            ok &= b16[r * in + c] == mla_f32_to_bf16(x);
            ok &= t8[r * in + c] == mla_f32_to_fp8(x * sc, MLA_DTYPE_FP8_E4M3FN, MLA_SATURATE);
        }
    CHECK(ok);
    mla_layer_weights_free(ctx, &keep);
    mla_layer_weights_free(ctx, &bf);
    mla_layer_weights_free(ctx, &ten);
    mla_safetensors_close(f);
}

static void test_fp8_indexer(mla_context *ctx)
{
    mla_model_config cfg;
    mla_model_config_preset("test-tiny-indexer", &cfg);
    mla_layer_weight_formats fp8 = {
        MLA_WEIGHT_FP8_BLOCK, MLA_WEIGHT_FP8_BLOCK, MLA_WEIGHT_FP8_BLOCK, MLA_WEIGHT_FP8_BLOCK,
        MLA_WEIGHT_FP8_BLOCK, MLA_WEIGHT_FP8_BLOCK, MLA_WEIGHT_FP8_BLOCK, MLA_WEIGHT_BF16};
    const char *p8 = path_of("fp8.safetensors"), *p16 = path_of("bf16.safetensors");
    CHECK_STATUS(mla_weights_generate(ctx, p8, &cfg, 0, 1, 3, &fp8), MLA_OK);
    CHECK_STATUS(mla_weights_generate(ctx, p16, &cfg, 0, 1, 3, NULL), MLA_OK);
    mla_safetensors *f8 = NULL, *f16 = NULL;
    CHECK_STATUS(mla_safetensors_open(ctx, p8, &f8), MLA_OK);
    CHECK_STATUS(mla_safetensors_open(ctx, p16, &f16), MLA_OK);
    if (!f8 || !f16)
        return;
    mla_layer_weights_ex a, b;
    CHECK_STATUS(mla_layer_weights_load(ctx, f8, &cfg, 0, NULL, &a), MLA_OK);
    CHECK_STATUS(mla_layer_weights_load(ctx, f16, &cfg, 0, NULL, &b), MLA_OK);
    CHECK(a.formats.q_a_proj == MLA_WEIGHT_FP8_BLOCK && a.formats.o_proj == MLA_WEIGHT_FP8_BLOCK &&
          a.formats.idx_wk == MLA_WEIGHT_FP8_BLOCK &&
          a.formats.idx_weights_proj == MLA_WEIGHT_BF16);
    CHECK(a.has_indexer && a.indexer.wq_b.w.shape[0] == cfg.index_heads * cfg.index_head_dim);
    CHECK(a.indexer.k_norm_weight.dtype == MLA_DTYPE_F32 &&
          a.indexer.k_norm_bias.shape[0] == cfg.index_head_dim);
    CHECK(a.base.q_b_proj.w.dtype == MLA_DTYPE_FP8_E4M3FN && a.base.q_b_proj.scale.shape[0] == 2 &&
          a.base.q_b_proj.scale.shape[1] == 1);
    CHECK(tensor_equals_file(f8, tname(0, "q_b_proj.weight_scale_inv"), &a.base.q_b_proj.scale));
    /* The fp8 weight dequantizes to the bf16 file's values within e4m3's
     * step (2^-3 relative to the block amax at most). */
    const mla_weight *w8[] = {&a.base.q_a_proj, &a.base.q_b_proj, &a.base.kv_b_proj, &a.base.o_proj,
                              &a.indexer.wk};
    const mla_weight *w16[] = {&b.base.q_a_proj, &b.base.q_b_proj, &b.base.kv_b_proj,
                               &b.base.o_proj, &b.indexer.wk};
    for (int k = 0; k < 5; ++k) {
        int ok = 1;
        const uint16_t *ref = w16[k]->w.data;
        for (int64_t r = 0; r < w8[k]->w.shape[0]; ++r)
            for (int64_t c = 0; c < w8[k]->w.shape[1]; ++c) {
                float x = mla_bf16_to_f32(ref[r * w8[k]->w.shape[1] + c]);
                float y = fp8_weight(w8[k], r, c);
                float s =
                    ((const float *)w8[k]->scale.data)[(r / 128) * w8[k]->scale.shape[1] + c / 128];
                ok &= fabsf(x - y) <= fabsf(x) / 16.0f + 448.0f * s / 64.0f + 1e-6f;
            }
        CHECK(ok);
    }
    const float *kn = a.indexer.k_norm_weight.data;
    CHECK(fabsf(kn[0] - 1.0f) < 0.3f);
    mla_layer_weights_free(ctx, &a);
    mla_layer_weights_free(ctx, &b);
    mla_safetensors_close(f8);
    mla_safetensors_close(f16);

    /* Missing, mis-shaped, missing scale, mis-shaped scale. */
    const char *q = path_of("broken.safetensors");
    rewrite(p8, q, tname(0, "kv_a_layernorm.weight"), NULL, 0, 0);
    CHECK_STATUS(load_status(ctx, q, &cfg), MLA_ERR_FORMAT);
    CHECK(!strcmp(mla_context_error_param(ctx), tname(0, "kv_a_layernorm.weight")));
    rewrite(p8, q, NULL, tname(0, "o_proj.weight"), cfg.heads * cfg.v, cfg.hidden);
    CHECK_STATUS(load_status(ctx, q, &cfg), MLA_ERR_SHAPE);
    CHECK(!strcmp(mla_context_error_param(ctx), tname(0, "o_proj.weight")));
    rewrite(p8, q, tname(0, "kv_b_proj.weight_scale_inv"), NULL, 0, 0);
    CHECK_STATUS(load_status(ctx, q, &cfg), MLA_ERR_FORMAT);
    CHECK(!strcmp(mla_context_error_param(ctx), tname(0, "kv_b_proj.weight_scale_inv")));
    rewrite(p8, q, NULL, tname(0, "q_a_proj.weight_scale_inv"), 1, 1);
    CHECK_STATUS(load_status(ctx, q, &cfg), MLA_ERR_SHAPE);
    CHECK(!strcmp(mla_context_error_param(ctx), tname(0, "q_a_proj.weight_scale_inv")));
    rewrite(p8, q, tname(0, "indexer.k_norm.bias"), NULL, 0, 0);
    CHECK_STATUS(load_status(ctx, q, &cfg), MLA_ERR_FORMAT);
    CHECK(!strcmp(mla_context_error_param(ctx), tname(0, "indexer.k_norm.bias")));
    rewrite(p8, q, NULL, NULL, 0, 0);
    CHECK_STATUS(load_status(ctx, q, &cfg), MLA_OK);
    test_shards(ctx, p8, &cfg);
    test_kv_b_conversions(ctx, p8, &cfg);
}

static void test_mxfp4(mla_context *ctx)
{
    mla_model_config cfg;
    mla_model_config_preset("test-tiny", &cfg);
    mla_layer_weight_formats fm = {0};
    fm.q_b_proj = fm.o_proj = fm.kv_b_proj = MLA_WEIGHT_MXFP4;
    const char *p = path_of("mxfp4.safetensors");
    CHECK_STATUS(mla_weights_generate(ctx, p, &cfg, 0, 1, 11, &fm), MLA_OK);
    mla_safetensors *f = NULL;
    CHECK_STATUS(mla_safetensors_open(ctx, p, &f), MLA_OK);
    if (!f)
        return;
    mla_safetensors_info info;
    CHECK_STATUS(mla_safetensors_find(ctx, f, tname(0, "kv_b_proj.weight_scale"), &info), MLA_OK);
    CHECK(!strcmp(info.file_dtype, "U8") && info.shape[1] == cfg.kv_lora / 32);
    mla_layer_weights_ex w;
    CHECK_STATUS(mla_layer_weights_load(ctx, f, &cfg, 0, NULL, &w), MLA_OK);
    CHECK(w.formats.kv_b_proj == MLA_WEIGHT_MXFP4 && w.formats.q_b_proj == MLA_WEIGHT_MXFP4 &&
          w.formats.q_a_proj == MLA_WEIGHT_BF16);
    CHECK(w.base.o_proj.w.dtype == MLA_DTYPE_FP4X2 && w.base.o_proj.scale.dtype == MLA_DTYPE_E8M0);
    CHECK(w.w_kc.data == NULL && w.w_vc.data == NULL);
    const int64_t H = cfg.heads, L = cfg.kv_lora, nope = cfg.nope, dv = cfg.nope + cfg.v;

    /* W_vc: a view of kv_b_proj's rows nope .. nope + v. */
    const uint8_t *kc = w.base.kv_b_proj.w.data, *ks = w.base.kv_b_proj.scale.data;
    const uint8_t *vc = w.w_vc_fp4.codes.data, *vs = w.w_vc_fp4.scales.data;
    int ok = w.w_vc_fp4.codes.shape[1] == cfg.v && w.w_vc_fp4.codes.shape[2] == L / 2 &&
             w.w_vc_fp4.layout == MLA_SCALE_ROW_MAJOR;
    for (int64_t h = 0; h < H; ++h)
        for (int64_t j = 0; j < cfg.v; ++j) {
            for (int64_t k = 0; k < L / 2; ++k)
                ok &= vc[h * w.w_vc_fp4.codes.stride[0] + j * w.w_vc_fp4.codes.stride[1] + k] ==
                      kc[(h * dv + nope + j) * (L / 2) + k];
            for (int64_t k = 0; k < L / 32; ++k)
                ok &= vs[h * w.w_vc_fp4.scales.stride[0] + j * w.w_vc_fp4.scales.stride[1] + k] ==
                      ks[(h * dv + nope + j) * (L / 32) + k];
        }
    CHECK(ok);

    /* W_kc: dequantize kv_b_proj with the reference op, take each head's
     * W_kc^T [L, nope], quantize with the reference op: the same bytes. */
    int64_t rows = H * dv;
    float *deq = malloc((size_t)(rows * L) * sizeof *deq);
    mla_tensor codes_t, scales_t, y;
    int64_t cs[2] = {rows, L / 2}, ss[2] = {rows, L / 32}, ys[2] = {rows, L};
    mla_tensor_init(&codes_t, (void *)kc, MLA_DTYPE_FP4X2, MLA_MEMORY_HOST, 2, cs);
    mla_tensor_init(&scales_t, (void *)ks, MLA_DTYPE_E8M0, MLA_MEMORY_HOST, 2, ss);
    mla_tensor_init(&y, deq, MLA_DTYPE_F32, MLA_MEMORY_HOST, 2, ys);
    CHECK_STATUS(mla_mxfp4_dequant(ctx, &codes_t, &scales_t, MLA_SCALE_ROW_MAJOR, &y), MLA_OK);
    float *xt = malloc((size_t)(H * L * nope) * sizeof *xt);
    for (int64_t h = 0; h < H; ++h)
        for (int64_t l = 0; l < L; ++l)
            for (int64_t i = 0; i < nope; ++i)
                xt[(h * L + l) * nope + i] = deq[(h * dv + i) * L + l];
    uint8_t *qc = malloc((size_t)(H * L * nope / 2)), *qs = malloc((size_t)(H * L * nope / 32));
    int64_t xs[2] = {H * L, nope}, qcs[2] = {H * L, nope / 2}, qss[2] = {H * L, nope / 32};
    mla_tensor x, qct, qst;
    mla_tensor_init(&x, xt, MLA_DTYPE_F32, MLA_MEMORY_HOST, 2, xs);
    mla_tensor_init(&qct, qc, MLA_DTYPE_FP4X2, MLA_MEMORY_HOST, 2, qcs);
    mla_tensor_init(&qst, qs, MLA_DTYPE_E8M0, MLA_MEMORY_HOST, 2, qss);
    CHECK_STATUS(mla_mxfp4_quant(ctx, &x, &qct, &qst, MLA_SCALE_ROW_MAJOR, MLA_MXFP4_PRODUCTION),
                 MLA_OK);
    CHECK(w.w_kc_fp4.codes.shape[0] == H && w.w_kc_fp4.codes.shape[1] == L &&
          w.w_kc_fp4.codes.shape[2] == nope / 2 && w.w_kc_fp4.scales.shape[2] == nope / 32);
    CHECK(!memcmp(qc, w.w_kc_fp4.codes.data, (size_t)(H * L * nope / 2)));
    CHECK(!memcmp(qs, w.w_kc_fp4.scales.data, (size_t)(H * L * nope / 32)));
    mla_layer_weights_free(ctx, &w);

    /* The OCP rule gives the OCP quantization of the same values. */
    mla_layer_load_options opt;
    mla_layer_load_options_default(&opt);
    opt.kc_rule = MLA_MXFP4_OCP;
    CHECK_STATUS(mla_layer_weights_load(ctx, f, &cfg, 0, &opt, &w), MLA_OK);
    CHECK_STATUS(mla_mxfp4_quant(ctx, &x, &qct, &qst, MLA_SCALE_ROW_MAJOR, MLA_MXFP4_OCP), MLA_OK);
    CHECK(!memcmp(qc, w.w_kc_fp4.codes.data, (size_t)(H * L * nope / 2)));
    CHECK(!memcmp(qs, w.w_kc_fp4.scales.data, (size_t)(H * L * nope / 32)));
    mla_layer_weights_free(ctx, &w);
    mla_safetensors_close(f);
    free(deq);
    free(xt);
    free(qc);
    free(qs);

    /* A missing MXFP4 scale, and one of the wrong shape. */
    const char *q = path_of("mxbroken.safetensors");
    rewrite(p, q, tname(0, "o_proj.weight_scale"), NULL, 0, 0);
    CHECK_STATUS(load_status(ctx, q, &cfg), MLA_ERR_FORMAT);
    CHECK(!strcmp(mla_context_error_param(ctx), tname(0, "o_proj.weight_scale")));
    rewrite(p, q, NULL, tname(0, "kv_b_proj.weight_scale"), H * dv, L / 16);
    CHECK_STATUS(load_status(ctx, q, &cfg), MLA_ERR_SHAPE);
    CHECK(!strcmp(mla_context_error_param(ctx), tname(0, "kv_b_proj.weight_scale")));

    /* MXFP4 needs in % 32 == 0: q_b_proj's in is q_lora = 96, fine; a config
     * with q_lora 100 is refused, naming the weight. */
    mla_model_config odd = cfg;
    odd.q_lora = 100;
    CHECK_STATUS(mla_weights_generate(ctx, q, &odd, 0, 1, 1, &fm), MLA_ERR_SHAPE);
    CHECK(!strcmp(mla_context_error_param(ctx), tname(0, "q_b_proj")));
    fm.o_proj = MLA_WEIGHT_FP8_TENSOR;
    CHECK_STATUS(mla_weights_generate(ctx, q, &cfg, 0, 1, 1, &fm), MLA_ERR_INVALID_ARGUMENT);
    CHECK(!strcmp(mla_context_error_param(ctx), tname(0, "o_proj")));
}

/* Reads a whole file. */
static unsigned char *slurp(const char *path, long *len)
{
    FILE *fp = fopen(path, "rb");
    fseek(fp, 0, SEEK_END);
    *len = ftell(fp);
    fseek(fp, 0, SEEK_SET);
    unsigned char *buf = malloc((size_t)*len + 1);
    *len = (long)fread(buf, 1, (size_t)*len, fp);
    fclose(fp);
    return buf;
}

static void spill(const char *path, const unsigned char *buf, long len)
{
    FILE *fp = fopen(path, "wb");
    fwrite(buf, 1, (size_t)len, fp);
    fclose(fp);
}

/* Every truncation of a valid file is refused; random byte changes in the
 * header are refused or give a file that still reads and loads (under the
 * sanitizers: never a crash, an overread or a leak). */
static void test_mangled(mla_context *ctx)
{
    long len;
    unsigned char *good = slurp(path_of("basic.safetensors"), &len);
    const char *p = path_of("mangled.safetensors");
    int all_refused = 1;
    for (long n = 0; n < len; ++n) {
        spill(p, good, n);
        all_refused &= open_status(ctx, p) != MLA_OK;
    }
    CHECK(all_refused);
    free(good);

    good = slurp(path_of("mxfp4.safetensors"), &len);
    unsigned char *bad = malloc((size_t)len);
    long header = 8;
    for (int i = 0; i < 4; ++i)
        header += (long)good[i] << (8 * i);
    uint32_t x = 12345;
    mla_model_config cfg;
    mla_model_config_preset("test-tiny", &cfg);
    int loaded = 0;
    for (int iter = 0; iter < 300; ++iter) {
        memcpy(bad, good, (size_t)len);
        for (int k = 0; k < 1 + iter % 3; ++k) {
            x ^= x << 13, x ^= x >> 17, x ^= x << 5;
            long at = (long)(x % (uint32_t)header);
            x ^= x << 13, x ^= x >> 17, x ^= x << 5;
            static const char syms[] = "{}[]\\\",:0919e-";
            bad[at] = iter % 2 ? (unsigned char)syms[x % (sizeof syms - 1)] : (unsigned char)x;
        }
        spill(p, bad, len);
        mla_safetensors *f = NULL;
        if (mla_safetensors_open(ctx, p, &f) != MLA_OK)
            continue;
        mla_layer_weights_ex w;
        if (mla_layer_weights_load(ctx, f, &cfg, 0, NULL, &w) == MLA_OK) {
            ++loaded;
            mla_layer_weights_free(ctx, &w);
        }
        mla_safetensors_close(f);
    }
    CHECK(loaded < 300);
    free(bad);
    free(good);
}

int main(void)
{
    snprintf(dir, sizeof dir, "test_safetensors.tmp");
    char cmd[300];
    snprintf(cmd, sizeof cmd, "mkdir -p %s", dir);
    if (system(cmd) != 0)
        return 1;
    mla_context *ctx = NULL;
    if (mla_context_create(MLA_BACKEND_REFERENCE, NULL, &ctx) != MLA_OK)
        return 1;
    test_writer_reader(ctx);
    test_corrupt(ctx);
    test_round_trip_bf16(ctx);
    test_fp8_indexer(ctx);
    test_mxfp4(ctx);
    test_mangled(ctx);
    mla_context_destroy(ctx);
    return TEST_SUMMARY();
}
