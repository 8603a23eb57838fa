/* Seeded random weights of any config as a real safetensors file with
 * DeepSeek's names. Values come from a counter-based generator, so each
 * tensor is produced on demand (the writer's fill callbacks) and a file of
 * any size needs one tensor in memory at a time. */
#define _POSIX_C_SOURCE 200809L /* mkdir */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/safetensors.h"
#include "core/validate.h"

enum { GEN_NAME = 192 };

typedef enum gen_kind { GEN_PROJ, GEN_NORM, GEN_BIAS } gen_kind;
typedef enum gen_part { PART_WEIGHT, PART_SCALE } gen_part;

typedef struct gen_tensor {
    gen_kind kind;
    gen_part part;
    mla_weight_format fmt;
    int64_t out, in; /* PROJ [out, in]; NORM / BIAS [out] */
    uint64_t key;    /* from the seed and the weight's name: weight and scale agree */
} gen_tensor;

static uint64_t mix64(uint64_t x) /* splitmix64's output function */
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

static uint64_t name_hash(const char *s) /* FNV-1a */
{
    uint64_t h = 0xCBF29CE484222325ull;
    for (; *s; ++s)
        h = (h ^ (unsigned char)*s) * 0x100000001B3ull;
    return h;
}

/* An approximately standard normal draw for element i: the Irwin-Hall sum
 * of four uniforms, centred and scaled to unit variance. Only +, * and
 * sqrt (all correctly rounded), so every machine gets the same bits, which
 * log / cos of a Box-Muller would not promise. */
static float gauss(uint64_t key, int64_t i)
{
    uint64_t r0 = mix64(key ^ mix64((uint64_t)i));
    double s = 0.0;
    for (int k = 0; k < 4; ++k) {
        uint64_t r = mix64(r0 + (uint64_t)k);
        s += (double)(r >> 11) * (1.0 / 9007199254740992.0);
    }
    return (float)((s - 2.0) * sqrt(3.0));
}

/* Projection element (r, c): N(0, 1/in) approximately. */
static float proj_value(const gen_tensor *g, int64_t r, int64_t c)
{
    return gauss(g->key, r * g->in + c) * (float)(1.0 / sqrt((double)g->in));
}

static void fill_fp8(const gen_tensor *g, void *buf)
{
    const int64_t bo = (g->out + 127) / 128, bi = (g->in + 127) / 128;
    float *scales = g->part == PART_SCALE ? buf : NULL;
    uint8_t *codes = g->part == PART_WEIGHT ? buf : NULL;
    for (int64_t br = 0; br < bo; ++br) {
        int64_t r1 = (br + 1) * 128 < g->out ? (br + 1) * 128 : g->out;
        for (int64_t bc = 0; bc < bi; ++bc) {
            int64_t c1 = (bc + 1) * 128 < g->in ? (bc + 1) * 128 : g->in;
            float amax = 0.0f;
            for (int64_t r = br * 128; r < r1; ++r)
                for (int64_t c = bc * 128; c < c1; ++c)
                    amax = fmaxf(amax, fabsf(proj_value(g, r, c)));
            /* DeepSeek's block quant: scale = amax / 448, weight = code * scale. */
            float s = amax > 0.0f ? amax / 448.0f : 1.0f;
            if (scales) {
                scales[br * bi + bc] = s;
                continue;
            }
            for (int64_t r = br * 128; r < r1; ++r)
                for (int64_t c = bc * 128; c < c1; ++c)
                    codes[r * g->in + c] =
                        mla_f32_to_fp8(proj_value(g, r, c) / s, MLA_DTYPE_FP8_E4M3FN, MLA_SATURATE);
        }
    }
}

static void fill_mxfp4(const gen_tensor *g, void *buf)
{
    uint8_t *out = buf;
    for (int64_t r = 0; r < g->out; ++r)
        for (int64_t b = 0; b < g->in / 32; ++b) {
            float x[32];
            uint8_t codes[16], scale;
            for (int k = 0; k < 32; ++k)
                x[k] = proj_value(g, r, b * 32 + k);
            mla_mxfp4_quantize_block(x, MLA_MXFP4_PRODUCTION, codes, &scale);
            if (g->part == PART_SCALE)
                out[r * (g->in / 32) + b] = scale;
            else
                memcpy(out + r * (g->in / 2) + b * 16, codes, 16);
        }
}

static int fill(void *user, const char *name, void *buf, size_t bytes)
{
    (void)name;
    (void)bytes;
    const gen_tensor *g = user;
    if (g->kind == GEN_NORM || g->kind == GEN_BIAS) {
        /* Norms near 1, the bias near 0: like trained checkpoints. */
        for (int64_t i = 0; i < g->out; ++i) {
            float v = 0.05f * gauss(g->key, i) + (g->kind == GEN_NORM ? 1.0f : 0.0f);
            if (g->fmt == MLA_WEIGHT_BF16)
                ((uint16_t *)buf)[i] = mla_f32_to_bf16(v);
            else
                ((float *)buf)[i] = v;
        }
        return 0;
    }
    if (g->fmt == MLA_WEIGHT_FP8_BLOCK)
        fill_fp8(g, buf);
    else if (g->fmt == MLA_WEIGHT_MXFP4)
        fill_mxfp4(g, buf);
    else
        for (int64_t r = 0; r < g->out; ++r)
            for (int64_t c = 0; c < g->in; ++c)
                ((uint16_t *)buf)[r * g->in + c] = mla_f32_to_bf16(proj_value(g, r, c));
    return 0;
}

typedef struct gen_state {
    mla_context *ctx;
    mla_safetensors_writer **w; /* one a shard; NULL: count only */
    int32_t nw;
    uint64_t seed;
    gen_tensor *t;
    int64_t n, cap; /* tensors added; cap: all of them (the counting pass) */
    char **names;   /* the index's names, [cap] */
    char prefix[64];
} gen_state;

/* The writer keeps pointers to these records until the save: the array is
 * sized once for every tensor of every layer and never moves. Tensor k of
 * the cap goes to shard k * nw / cap, so a layer may straddle two shards. */
static mla_status add_one(gen_state *s, const char *base, const char *suffix, gen_tensor g,
                          mla_dtype dt, int32_t ndim, const int64_t *shape)
{
    char nm[GEN_NAME];
    int k = snprintf(nm, sizeof nm, "%s%s%s", s->prefix, base, suffix);
    if (k < 0 || k >= (int)sizeof nm)
        return mla_fail(s->ctx, MLA_ERR_INVALID_ARGUMENT, base, "tensor name too long");
    if (!s->w) {
        ++s->n;
        return MLA_OK;
    }
    const int64_t i = s->n++;
    gen_tensor *t = &s->t[i];
    *t = g;
    s->names[i] = malloc(strlen(nm) + 1);
    if (!s->names[i])
        return mla_fail(s->ctx, MLA_ERR_OUT_OF_MEMORY, nm, "out of memory");
    memcpy(s->names[i], nm, strlen(nm) + 1);
    return mla_safetensors_writer_add_fill(s->ctx, s->w[i * s->nw / s->cap], nm, dt, ndim, shape,
                                           fill, t);
}
static mla_status add_proj(gen_state *s, const char *base, int64_t out, int64_t in,
                           mla_weight_format fmt)
{
    char full[GEN_NAME];
    snprintf(full, sizeof full, "%s%s", s->prefix, base);
    gen_tensor g = {GEN_PROJ, PART_WEIGHT, fmt, out, in, mix64(s->seed ^ name_hash(full))};
    /* FP8_TENSOR is a load-time form only; checkpoints do not ship it. */
    if ((unsigned)fmt >= MLA_WEIGHT_FORMAT_COUNT || fmt == MLA_WEIGHT_FP8_TENSOR)
        return mla_fail(s->ctx, MLA_ERR_INVALID_ARGUMENT, full, "weight format %d not generated",
                        (int)fmt);
    if (fmt == MLA_WEIGHT_MXFP4 && in % 32 != 0)
        return mla_fail(s->ctx, MLA_ERR_SHAPE, full, "'%s': MXFP4 needs in (%lld) a multiple of 32",
                        full, (long long)in);
    if (fmt == MLA_WEIGHT_BF16) {
        int64_t sh[2] = {out, in};
        return add_one(s, base, ".weight", g, MLA_DTYPE_BF16, 2, sh);
    }
    if (fmt == MLA_WEIGHT_FP8_BLOCK) {
        int64_t sh[2] = {out, in}, ss[2] = {(out + 127) / 128, (in + 127) / 128};
        MLA_TRY(add_one(s, base, ".weight", g, MLA_DTYPE_FP8_E4M3FN, 2, sh));
        g.part = PART_SCALE;
        return add_one(s, base, ".weight_scale_inv", g, MLA_DTYPE_F32, 2, ss);
    }
    int64_t sh[2] = {out, in / 2}, ss[2] = {out, in / 32};
    MLA_TRY(add_one(s, base, ".weight", g, MLA_DTYPE_FP4X2, 2, sh));
    g.part = PART_SCALE;
    return add_one(s, base, ".weight_scale", g, MLA_DTYPE_E8M0, 2, ss);
}

static mla_status add_vec(gen_state *s, const char *name, gen_kind kind, int64_t len, mla_dtype dt)
{
    char full[GEN_NAME];
    snprintf(full, sizeof full, "%s%s", s->prefix, name);
    gen_tensor g = {
        kind, PART_WEIGHT, dt == MLA_DTYPE_BF16 ? MLA_WEIGHT_BF16 : MLA_WEIGHT_FP8_BLOCK,
        len,  1,           mix64(s->seed ^ name_hash(full))};
    /* fmt doubles as the storage flag of a vector: BF16, else F32. */
    return add_one(s, name, "", g, dt, 1, &len);
}

static mla_status add_layer(gen_state *s, const mla_model_config *c,
                            const mla_layer_weight_formats *f)
{
    const int64_t H = c->heads, L = c->kv_lora, R = c->rope, hid = c->hidden;
    if (c->q_lora > 0) {
        MLA_TRY(add_proj(s, "q_a_proj", c->q_lora, hid, f->q_a_proj));
        MLA_TRY(add_vec(s, "q_a_layernorm.weight", GEN_NORM, c->q_lora, MLA_DTYPE_BF16));
        MLA_TRY(add_proj(s, "q_b_proj", H * (c->nope + R), c->q_lora, f->q_b_proj));
    } else {
        MLA_TRY(add_proj(s, "q_proj", H * (c->nope + R), hid, f->q_b_proj));
    }
    MLA_TRY(add_proj(s, "kv_a_proj_with_mqa", L + R, hid, f->kv_a_proj_with_mqa));
    MLA_TRY(add_vec(s, "kv_a_layernorm.weight", GEN_NORM, L, MLA_DTYPE_BF16));
    MLA_TRY(add_proj(s, "kv_b_proj", H * (c->nope + c->v), L, f->kv_b_proj));
    MLA_TRY(add_proj(s, "o_proj", hid, H * c->v, f->o_proj));
    if (c->index_heads > 0) {
        const int64_t Hi = c->index_heads, Di = c->index_head_dim;
        MLA_TRY(add_proj(s, "indexer.wq_b", Hi * Di, c->q_lora, f->idx_wq_b));
        MLA_TRY(add_proj(s, "indexer.wk", Di, hid, f->idx_wk));
        MLA_TRY(add_vec(s, "indexer.k_norm.weight", GEN_NORM, Di, MLA_DTYPE_F32));
        MLA_TRY(add_vec(s, "indexer.k_norm.bias", GEN_BIAS, Di, MLA_DTYPE_F32));
        MLA_TRY(add_proj(s, "indexer.weights_proj", Hi, hid, f->idx_weights_proj));
    }
    return MLA_OK;
}

static void formats_text(const mla_layer_weight_formats *f, char *buf, size_t len)
{
    snprintf(buf, len,
             "q_a_proj=%s,q_b_proj=%s,kv_a_proj_with_mqa=%s,kv_b_proj=%s,o_proj=%s,"
             "indexer.wq_b=%s,indexer.wk=%s,indexer.weights_proj=%s",
             mla_weight_format_name(f->q_a_proj), mla_weight_format_name(f->q_b_proj),
             mla_weight_format_name(f->kv_a_proj_with_mqa), mla_weight_format_name(f->kv_b_proj),
             mla_weight_format_name(f->o_proj), mla_weight_format_name(f->idx_wq_b),
             mla_weight_format_name(f->idx_wk), mla_weight_format_name(f->idx_weights_proj));
}

/* What mla_weights_generate and mla_checkpoint_generate share: the layer
 * range and formats checked, every tensor declared to nw writers (made
 * here, with the metadata). */
static mla_status gen_begin(mla_context *ctx, gen_state *s, const mla_model_config *cfg,
                            int64_t first, int64_t count, uint64_t seed,
                            const mla_layer_weight_formats *formats, int32_t nw)
{
    memset(s, 0, sizeof *s);
    s->ctx = ctx;
    s->seed = seed;
    if (first < 0 || first > INT32_MAX - 1)
        return mla_fail(ctx, MLA_ERR_OUT_OF_RANGE, "first", "first layer %lld outside [0, 2^31)",
                        (long long)first);
    if (count < 1 || count > 100000 || first > INT32_MAX - count)
        return mla_fail(ctx, MLA_ERR_OUT_OF_RANGE, "count", "bad layer count %lld after %lld",
                        (long long)count, (long long)first);
    MLA_TRY(mla_st_check_config(ctx, cfg));
    mla_layer_weight_formats bf16 = {0};
    if (!formats)
        formats = &bf16;
    for (int pass = 0; pass < 2; ++pass) { /* count, then declare */
        s->n = 0;
        for (int64_t l = first; l < first + count; ++l) {
            snprintf(s->prefix, sizeof s->prefix, "model.layers.%lld.self_attn.", (long long)l);
            MLA_TRY(add_layer(s, cfg, formats));
        }
        if (pass == 1)
            break;
        s->cap = s->n;
        s->t = calloc((size_t)s->cap, sizeof *s->t);
        s->names = calloc((size_t)s->cap, sizeof *s->names);
        s->w = calloc((size_t)nw, sizeof *s->w);
        if (!s->t || !s->names || !s->w)
            return mla_fail(ctx, MLA_ERR_OUT_OF_MEMORY, "writer", "out of memory");
        s->nw = nw;
        char text[320];
        formats_text(formats, text, sizeof text);
        char seed_text[32];
        snprintf(seed_text, sizeof seed_text, "%llu", (unsigned long long)seed);
        for (int32_t i = 0; i < nw; ++i) {
            MLA_TRY(mla_safetensors_writer_create(ctx, &s->w[i]));
            MLA_TRY(mla_safetensors_writer_metadata(ctx, s->w[i], "format", "pt"));
            MLA_TRY(mla_safetensors_writer_metadata(ctx, s->w[i], "mla.config", cfg->name));
            MLA_TRY(mla_safetensors_writer_metadata(ctx, s->w[i], "mla.seed", seed_text));
            MLA_TRY(mla_safetensors_writer_metadata(ctx, s->w[i], "mla.formats", text));
        }
    }
    return MLA_OK;
}

static void gen_end(gen_state *s)
{
    for (int32_t i = 0; s->w && i < s->nw; ++i)
        mla_safetensors_writer_destroy(s->w[i]);
    for (int64_t i = 0; s->names && i < s->cap; ++i)
        free(s->names[i]);
    free(s->w);
    free(s->names);
    free(s->t);
}

mla_status mla_weights_generate(mla_context *ctx, const char *path, const mla_model_config *cfg,
                                int64_t first, int64_t count, uint64_t seed,
                                const mla_layer_weight_formats *formats)
{
    if (ctx)
        mla_clear_error(ctx);
    if (!path || !cfg)
        return mla_fail(ctx, MLA_ERR_NULL_POINTER, !path ? "path" : "cfg", "null argument");
    gen_state s;
    mla_status st = gen_begin(ctx, &s, cfg, first, count, seed, formats, 1);
    if (st == MLA_OK)
        st = mla_safetensors_writer_save(ctx, s.w[0], path);
    gen_end(&s);
    return st;
}

void mla_generate_options_default(mla_generate_options *out)
{
    if (!out)
        return;
    memset(out, 0, sizeof *out);
    out->count = 1;
    out->shards = 1;
}

static mla_status write_text(mla_context *ctx, const char *path, const char *name,
                             const char *text)
{
    FILE *fp = fopen(path, "wb");
    if (!fp)
        return mla_fail(ctx, MLA_ERR_IO, name, "cannot create '%s'", path);
    const size_t n = strlen(text);
    const int ok = fwrite(text, 1, n, fp) == n;
    if (fclose(fp) != 0 || !ok) {
        remove(path);
        return mla_fail(ctx, MLA_ERR_IO, name, "cannot write '%s'", path);
    }
    return MLA_OK;
}

/* {"metadata": {"total_size": bytes}, "weight_map": {name: shard file}} */
static char *index_json(const gen_state *s, char (*files)[48], int64_t total)
{
    size_t cap = 64;
    for (int64_t i = 0; i < s->cap; ++i)
        cap += strlen(s->names[i]) + 64;
    char *t = malloc(cap);
    if (!t)
        return NULL;
    size_t n = (size_t)snprintf(t, cap, "{\n  \"metadata\": {\"total_size\": %lld},\n"
                                        "  \"weight_map\": {",
                                (long long)total);
    for (int64_t i = 0; i < s->cap; ++i)
        n += (size_t)snprintf(t + n, cap - n, "%s\n    \"%s\": \"%s\"", i ? "," : "",
                              s->names[i], files[i * s->nw / s->cap]);
    snprintf(t + n, cap - n, "\n  }\n}\n");
    return t;
}

static const char *quant_of(const mla_layer_weight_formats *f)
{
    const mla_weight_format all[] = {f->q_a_proj,  f->q_b_proj, f->kv_a_proj_with_mqa,
                                     f->kv_b_proj, f->o_proj,   f->idx_wq_b,
                                     f->idx_wk,    f->idx_weights_proj};
    int fp8 = 0, mx = 0;
    for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i) {
        fp8 |= all[i] == MLA_WEIGHT_FP8_BLOCK;
        mx |= all[i] == MLA_WEIGHT_MXFP4;
    }
    return fp8 ? "fp8" : mx ? "quark" : "";
}

mla_status mla_checkpoint_generate(mla_context *ctx, const char *dir, const mla_model_config *cfg,
                                   const mla_generate_options *options)
{
    if (ctx)
        mla_clear_error(ctx);
    if (!dir || !cfg)
        return mla_fail(ctx, MLA_ERR_NULL_POINTER, !dir ? "dir" : "cfg", "null argument");
    mla_generate_options o;
    mla_generate_options_default(&o);
    if (options)
        o = *options;
    if (o.shards < 1 || o.shards > 99999)
        return mla_fail(ctx, MLA_ERR_OUT_OF_RANGE, "options.shards", "%d shards: 1 to 99999",
                        (int)o.shards);
    if (o.num_layers < 0)
        return mla_fail(ctx, MLA_ERR_OUT_OF_RANGE, "options.num_layers", "negative layer count");
    const mla_layer_weight_formats bf16 = {0};
    const mla_layer_weight_formats *fm = o.formats ? o.formats : &bf16;
    gen_state s;
    mla_status st = gen_begin(ctx, &s, cfg, o.first, o.count, o.seed, fm, o.shards);
    if (st == MLA_OK && o.shards > s.cap)
        st = mla_fail(ctx, MLA_ERR_OUT_OF_RANGE, "options.shards",
                      "%d shards for %lld tensors: a shard would be empty", (int)o.shards,
                      (long long)s.cap);
    if (st == MLA_OK && mkdir(dir, 0777) != 0 && errno != EEXIST)
        st = mla_fail(ctx, MLA_ERR_IO, "dir", "cannot create directory '%s'", dir);
    const size_t dl = strlen(dir) + 64;
    char *path = malloc(dl);
    char(*files)[48] = calloc((size_t)o.shards, sizeof *files);
    if (st == MLA_OK && (!path || !files))
        st = mla_fail(ctx, MLA_ERR_OUT_OF_MEMORY, "dir", "out of memory");
    int64_t total = 0;
    for (int32_t i = 0; st == MLA_OK && i < o.shards; ++i) {
        if (o.shards == 1)
            snprintf(files[i], sizeof files[i], "model.safetensors");
        else
            snprintf(files[i], sizeof files[i], "model-%05d-of-%05d.safetensors", (int)i + 1,
                     (int)o.shards);
        total += mla_st_writer_data_bytes(s.w[i]);
    }
    int64_t done = 0;
    int32_t written = 0;
    for (int32_t i = 0; st == MLA_OK && i < o.shards; ++i, ++written) {
        snprintf(path, dl, "%s/%s", dir, files[i]);
        mla_st_writer_progress(s.w[i], o.progress, o.progress_user, done, total);
        st = mla_safetensors_writer_save(ctx, s.w[i], path);
        done += mla_st_writer_data_bytes(s.w[i]);
    }
    if (st == MLA_OK && o.shards == 1) { /* a stale index would win over model.safetensors */
        snprintf(path, dl, "%s/model.safetensors.index.json", dir);
        if (remove(path) != 0 && errno != ENOENT)
            st = mla_fail(ctx, MLA_ERR_IO, "dir", "cannot remove the old '%s'", path);
    }
    if (st == MLA_OK && o.shards > 1) {
        char *text = index_json(&s, files, total);
        snprintf(path, dl, "%s/model.safetensors.index.json", dir);
        st = text ? write_text(ctx, path, "model.safetensors.index.json", text)
                  : mla_fail(ctx, MLA_ERR_OUT_OF_MEMORY, "dir", "out of memory");
        free(text);
    }
    if (st == MLA_OK) {
        char *text = mla_hf_config_json(cfg, o.num_layers ? o.num_layers : o.first + o.count,
                                        quant_of(fm));
        snprintf(path, dl, "%s/config.json", dir);
        st = text ? write_text(ctx, path, "config.json", text)
                  : mla_fail(ctx, MLA_ERR_OUT_OF_MEMORY, "dir", "out of memory");
        free(text);
        if (st != MLA_OK && o.shards > 1) {
            snprintf(path, dl, "%s/model.safetensors.index.json", dir);
            remove(path);
        }
    }
    for (int32_t i = 0; st != MLA_OK && path && i < written; ++i) {
        snprintf(path, dl, "%s/%s", dir, files[i]);
        remove(path);
    }
    free(path);
    free(files);
    gen_end(&s);
    return st;
}
