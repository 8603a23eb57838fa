/* The DeepSeek attention-layer loader (MLA.md section 2 names, section 5
 * formats, section 7 MXFP4 operands): find and check every tensor first,
 * then one allocation in context memory, then the reads. With tensor
 * parallelism each projection of the heads is read as its rank's rows or
 * columns (include/mla/mla_weights.h). The only transforms are the opt-in
 * fp8 kv_b_proj conversions and the MXFP4 W_kc re-quantization along nope. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/safetensors.h"
#include "core/validate.h"

enum { NAME_LEN = 192, ALIGN = 256 };
/* Device loads go through host buffers of about this size. */
#define CHUNK_BYTES ((int64_t)16 << 20)

typedef enum slot_kind { SLOT_PROJ, SLOT_VEC } slot_kind;

/* A rectangle of a 2-D tensor in the file: rows [r0, r0 + nr), bytes
 * [cb0, cb0 + ncb) of each row. */
typedef struct region {
    int64_t r0, nr, cb0, ncb;
} region;

typedef struct slot {
    slot_kind kind;
    char base[NAME_LEN]; /* PROJ: name without ".weight"; VEC: the full name */
    int64_t out, in;     /* PROJ: the whole [out, in] in the file; VEC: [out] */
    int64_t row0, col0;  /* PROJ: the slice loaded, [out_l, in_l] at (row0, col0) */
    int64_t out_l, in_l;
    int force_f32;        /* VEC: converted to F32 at load */
    int per_tensor_ok;    /* PROJ: a [1, 1] fp8 scale is read as FP8_TENSOR (kv_b_proj) */
    mla_kv_b_fp8 convert; /* PROJ: an FP8_BLOCK weight converted at load */
    mla_weight *w;        /* PROJ destination */
    mla_weight_format *fmt;
    mla_tensor *v; /* VEC destination */
    /* resolved by the check pass */
    mla_safetensors_info wi, si;
    mla_safetensors *wf, *sf; /* the shards holding the weight and its scale */
    region wr, sr;            /* what is read of each */
    mla_dtype w_dtype, s_dtype, v_dtype;
    int64_t w_shape[2], s_shape[2];
    int64_t w_off, s_off, w_bytes, s_bytes;
} slot;

const char *mla_weight_format_name(mla_weight_format format)
{
    switch (format) {
    case MLA_WEIGHT_BF16:
        return "bf16";
    case MLA_WEIGHT_FP8_BLOCK:
        return "fp8";
    case MLA_WEIGHT_MXFP4:
        return "mxfp4";
    case MLA_WEIGHT_FP8_TENSOR:
        return "fp8_tensor";
    default:
        return "unknown";
    }
}

void mla_layer_load_options_default(mla_layer_load_options *out)
{
    if (!out)
        return;
    memset(out, 0, sizeof *out);
    out->kc_rule = MLA_MXFP4_PRODUCTION;
    out->world_size = 1;
}

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

static int name_of(char *dst, const char *prefix, const char *base, const char *suffix)
{
    int n = snprintf(dst, NAME_LEN, "%s%s%s", prefix, base, suffix);
    return n > 0 && n < NAME_LEN;
}

/* Where tensors come from: shard files (the first holding a name), or a
 * checkpoint directory's index. */
typedef struct source {
    mla_safetensors *const *f;
    int32_t n;
    mla_checkpoint *ck;
} source;

/* Finds a tensor, naming it when absent. */
static mla_status need(mla_context *ctx, const source *src, const char *name,
                       mla_safetensors_info *out, mla_safetensors **owner)
{
    if (src->ck)
        return mla_checkpoint_find(ctx, src->ck, name, owner, out);
    for (int32_t i = 0; i < src->n; ++i)
        if (mla_safetensors_has(src->f[i], name)) {
            *owner = src->f[i];
            return mla_safetensors_find(ctx, src->f[i], name, out);
        }
    return mla_fail(ctx, MLA_ERR_FORMAT, name, "the checkpoint has no tensor '%s'", name);
}

static mla_status check_2d(mla_context *ctx, const mla_safetensors_info *i, int64_t r, int64_t c)
{
    if (i->ndim != 2 || i->shape[0] != r || i->shape[1] != c)
        return mla_fail(ctx, MLA_ERR_SHAPE, i->name, "tensor '%s': expected [%lld, %lld]", i->name,
                        (long long)r, (long long)c);
    return MLA_OK;
}

/* A slice [a, a + n) of an extent split in blocks of b is whole blocks. */
static mla_status check_blocks(mla_context *ctx, const slot *s, const char *what, int64_t a,
                               int64_t n, int64_t full, int64_t b)
{
    if (a % b == 0 && ((a + n) % b == 0 || a + n == full))
        return MLA_OK;
    return mla_fail(ctx, MLA_ERR_SHAPE, s->wi.name,
                    "tensor '%s': the rank's %s [%lld, %lld) cut its %lld-wide blocks (their "
                    "scales cannot be split)",
                    s->wi.name, what, (long long)a, (long long)(a + n), (long long)b);
}

/* The weight's region: its rows, and its columns at es_num / es_den bytes each. */
static region weight_region(const slot *s, int64_t es_num, int64_t es_den)
{
    return (region){s->row0, s->out_l, s->col0 * es_num / es_den, s->in_l * es_num / es_den};
}

/* A projection: its format from the weight's file dtype, its scale, and
 * what of both this rank reads. */
static mla_status check_proj(mla_context *ctx, const source *f, slot *s)
{
    char nm[NAME_LEN];
    if (!name_of(nm, "", s->base, ".weight"))
        return mla_fail(ctx, MLA_ERR_INVALID_ARGUMENT, "prefix", "tensor name too long");
    MLA_TRY(need(ctx, f, nm, &s->wi, &s->wf));
    const char *fd = s->wi.file_dtype;
    s->w_shape[0] = s->out_l, s->w_shape[1] = s->in_l;
    if (!strcmp(fd, "BF16")) {
        *s->fmt = MLA_WEIGHT_BF16;
        MLA_TRY(check_2d(ctx, &s->wi, s->out, s->in));
        s->w_dtype = MLA_DTYPE_BF16;
        s->wr = weight_region(s, 2, 1);
        return MLA_OK;
    }
    if (!strcmp(fd, "F8_E4M3")) {
        *s->fmt = MLA_WEIGHT_FP8_BLOCK;
        MLA_TRY(check_2d(ctx, &s->wi, s->out, s->in));
        s->w_dtype = MLA_DTYPE_FP8_E4M3FN;
        s->wr = weight_region(s, 1, 1);
        name_of(nm, "", s->base, ".weight_scale_inv");
        MLA_TRY(need(ctx, f, nm, &s->si, &s->sf));
        if (s->si.dtype != MLA_DTYPE_F32)
            return mla_fail(ctx, MLA_ERR_DTYPE, s->si.name, "tensor '%s' is %s, expected F32",
                            s->si.name, s->si.file_dtype);
        const int64_t bo = ceil_div(s->out, 128), bi = ceil_div(s->in, 128);
        if (s->per_tensor_ok && s->si.ndim == 2 && s->si.shape[0] == 1 && s->si.shape[1] == 1 &&
            bo * bi > 1) { /* one scale for the tensor: the FP8_TENSOR form, as written */
            *s->fmt = MLA_WEIGHT_FP8_TENSOR;
            s->s_dtype = MLA_DTYPE_F32;
            s->s_shape[0] = s->s_shape[1] = 1;
            s->sr = (region){0, 1, 0, 4};
            return MLA_OK;
        }
        MLA_TRY(check_blocks(ctx, s, "rows", s->row0, s->out_l, s->out, 128));
        MLA_TRY(check_blocks(ctx, s, "columns", s->col0, s->in_l, s->in, 128));
        MLA_TRY(check_2d(ctx, &s->si, bo, bi));
        s->s_dtype = MLA_DTYPE_F32;
        s->s_shape[0] = ceil_div(s->out_l, 128), s->s_shape[1] = ceil_div(s->in_l, 128);
        s->sr = (region){s->row0 / 128, s->s_shape[0], s->col0 / 128 * 4, s->s_shape[1] * 4};
        return MLA_OK;
    }
    if (!strcmp(fd, "U8")) { /* Quark MXFP4: packed codes and e8m0 scales as bytes */
        *s->fmt = MLA_WEIGHT_MXFP4;
        if (s->in % 32 != 0)
            return mla_fail(ctx, MLA_ERR_SHAPE, s->wi.name,
                            "tensor '%s': MXFP4 needs in (%lld) a multiple of 32", s->wi.name,
                            (long long)s->in);
        MLA_TRY(check_2d(ctx, &s->wi, s->out, s->in / 2));
        MLA_TRY(check_blocks(ctx, s, "columns", s->col0, s->in_l, s->in, 32));
        s->w_dtype = MLA_DTYPE_FP4X2;
        s->w_shape[1] = s->in_l / 2;
        s->wr = weight_region(s, 1, 2);
        name_of(nm, "", s->base, ".weight_scale");
        MLA_TRY(need(ctx, f, nm, &s->si, &s->sf));
        if (s->si.dtype != MLA_DTYPE_U8 && s->si.dtype != MLA_DTYPE_E8M0)
            return mla_fail(ctx, MLA_ERR_DTYPE, s->si.name, "tensor '%s' is %s, expected U8 (e8m0)",
                            s->si.name, s->si.file_dtype);
        MLA_TRY(check_2d(ctx, &s->si, s->out, s->in / 32));
        s->s_dtype = MLA_DTYPE_E8M0;
        s->s_shape[0] = s->out_l, s->s_shape[1] = s->in_l / 32;
        s->sr = (region){s->row0, s->out_l, s->col0 / 32, s->in_l / 32};
        return MLA_OK;
    }
    return mla_fail(ctx, MLA_ERR_DTYPE, s->wi.name,
                    "tensor '%s' is %s: expected BF16, F8_E4M3 (+weight_scale_inv) or U8 "
                    "(MXFP4, +weight_scale)",
                    s->wi.name, fd);
}

static mla_status check_vec(mla_context *ctx, const source *f, slot *s)
{
    MLA_TRY(need(ctx, f, s->base, &s->wi, &s->wf));
    mla_dtype d = s->wi.dtype;
    if (d != MLA_DTYPE_F32 && d != MLA_DTYPE_BF16 && d != MLA_DTYPE_F16)
        return mla_fail(ctx, MLA_ERR_DTYPE, s->wi.name, "tensor '%s' is %s, expected a float",
                        s->wi.name, s->wi.file_dtype);
    if (s->wi.ndim != 1 || s->wi.shape[0] != s->out)
        return mla_fail(ctx, MLA_ERR_SHAPE, s->wi.name, "tensor '%s': expected [%lld]", s->wi.name,
                        (long long)s->out);
    s->v_dtype = s->force_f32 ? MLA_DTYPE_F32 : d;
    return MLA_OK;
}

/* Places n bytes at the next 256-byte boundary of the storage plan. */
static mla_status place(mla_context *ctx, int64_t *total, int64_t bytes, int64_t *off)
{
    int64_t at = ceil_div(*total, ALIGN) * ALIGN;
    if (bytes > INT64_MAX - at)
        return mla_fail(ctx, MLA_ERR_OVERFLOW, "weights", "layer storage overflows int64");
    *off = at;
    *total = at + bytes;
    return MLA_OK;
}

static mla_tensor tensor2(void *data, mla_dtype dt, mla_memory mem, int32_t ndim,
                          const int64_t *shape)
{
    mla_tensor t;
    mla_tensor_init(&t, data, dt, mem, ndim, shape);
    return t;
}

/* Rows [r0 + first, r0 + first + n) of a region into host memory, packed
 * (ncb bytes a row): one read when the rows are whole, else one a row. */
static mla_status read_rows(mla_context *ctx, mla_safetensors *f, const mla_safetensors_info *i,
                            const region *g, int64_t first, int64_t n, unsigned char *dst)
{
    const int64_t row_bytes = i->shape[0] ? i->bytes / i->shape[0] : 0;
    const int64_t at = i->offset + (g->r0 + first) * row_bytes + g->cb0;
    if (g->ncb == row_bytes)
        return mla_st_read_at(ctx, f, at, dst, (size_t)(n * row_bytes), i->name);
    for (int64_t r = 0; r < n; ++r)
        MLA_TRY(
            mla_st_read_at(ctx, f, at + r * row_bytes, dst + r * g->ncb, (size_t)g->ncb, i->name));
    return MLA_OK;
}

/* A region into memory of the context: straight into host memory, through
 * bounded host buffers into device memory. */
static mla_status read_region(mla_context *ctx, mla_safetensors *f, const mla_safetensors_info *i,
                              const region *g, void *dst)
{
    if (mla_context_memory(ctx) == MLA_MEMORY_HOST || g->ncb == 0)
        return read_rows(ctx, f, i, g, 0, g->nr, dst);
    const int64_t rows = CHUNK_BYTES / g->ncb > 0 ? CHUNK_BYTES / g->ncb : 1;
    const int64_t step = rows < g->nr ? rows : g->nr;
    unsigned char *buf = malloc((size_t)(step * g->ncb) + 1);
    if (!buf)
        return mla_fail(ctx, MLA_ERR_OUT_OF_MEMORY, i->name, "out of memory");
    mla_status st = MLA_OK;
    for (int64_t r = 0; r < g->nr && st == MLA_OK; r += step) {
        const int64_t n = g->nr - r < step ? g->nr - r : step;
        st = read_rows(ctx, f, i, g, r, n, buf);
        if (st == MLA_OK)
            st = mla_memcpy(ctx, (unsigned char *)dst + r * g->ncb, buf, (size_t)(n * g->ncb),
                            MLA_COPY_HOST_TO_CONTEXT);
    }
    free(buf);
    return st;
}

/* A region into a fresh host buffer (free() it). */
static mla_status read_host(mla_context *ctx, mla_safetensors *f, const mla_safetensors_info *i,
                            const region *g, unsigned char **out)
{
    *out = malloc((size_t)(g->nr * g->ncb) + 1);
    if (!*out)
        return mla_fail(ctx, MLA_ERR_OUT_OF_MEMORY, i->name, "out of memory");
    mla_status st = read_rows(ctx, f, i, g, 0, g->nr, *out);
    if (st != MLA_OK) {
        free(*out);
        *out = NULL;
    }
    return st;
}

/* Reads a VEC slot, converting bf16 / f16 to f32 on the host when asked. */
static mla_status read_vec(mla_context *ctx, slot *s, unsigned char *base, mla_memory mem)
{
    mla_tensor dst = tensor2(base + s->w_off, s->v_dtype, mem, 1, &s->out);
    if (s->v_dtype == s->wi.dtype)
        return mla_safetensors_read(ctx, s->wf, s->base, &dst);
    size_t n = (size_t)s->out;
    uint16_t *raw = malloc(n * 2 + 1);
    float *val = malloc(n * 4 + 1);
    mla_status st = raw && val ? MLA_OK : MLA_ERR_OUT_OF_MEMORY;
    if (st != MLA_OK)
        st = mla_fail(ctx, st, s->base, "out of memory");
    if (st == MLA_OK) {
        mla_tensor tmp = tensor2(raw, s->wi.dtype, MLA_MEMORY_HOST, 1, &s->out);
        st = mla_safetensors_read(ctx, s->wf, s->base, &tmp);
    }
    for (size_t i = 0; st == MLA_OK && i < n; ++i)
        val[i] = s->wi.dtype == MLA_DTYPE_BF16 ? mla_bf16_to_f32(raw[i]) : mla_f16_to_f32(raw[i]);
    if (st == MLA_OK)
        st = mla_memcpy(ctx, dst.data, val, n * 4, MLA_COPY_HOST_TO_CONTEXT);
    free(raw);
    free(val);
    return st;
}

/* W_kc in MXFP4 along nope: kv_b_proj's rows h*(nope+v) + i (i < nope) of
 * the loaded heads are dequantized and, for each latent column l, the nope
 * values re-quantized in blocks of 32 -> codes [H, L, nope/2], scales
 * [H, L, nope/32]. The checkpoint packs along L, the absorb contracts over
 * nope: there is no view that serves, so this is made once at load. The
 * one read of kv_b_proj serves both: its bytes go to w (and scale) too. */
static mla_status make_w_kc(mla_context *ctx, const slot *kvb, const mla_model_config *cfg,
                            int64_t H, mla_mxfp4_rule rule, void *codes_dst, void *scales_dst)
{
    const int64_t L = cfg->kv_lora, nope = cfg->nope, dv = cfg->nope + cfg->v;
    size_t ob = (size_t)(H * L * nope / 2), osb = (size_t)(H * L * nope / 32);
    uint8_t *codes = NULL, *scales = NULL;
    uint8_t *oc = malloc(ob + 1), *os = malloc(osb + 1);
    mla_status st =
        oc && os ? MLA_OK
                 : mla_fail(ctx, MLA_ERR_OUT_OF_MEMORY, "kv_b_proj", "out of memory for W_kc");
    if (st == MLA_OK)
        st = read_host(ctx, kvb->wf, &kvb->wi, &kvb->wr, &codes);
    if (st == MLA_OK)
        st = read_host(ctx, kvb->sf, &kvb->si, &kvb->sr, &scales);
    if (st == MLA_OK)
        st = mla_memcpy(ctx, kvb->w->w.data, codes, (size_t)kvb->w_bytes, MLA_COPY_HOST_TO_CONTEXT);
    if (st == MLA_OK)
        st = mla_memcpy(ctx, kvb->w->scale.data, scales, (size_t)kvb->s_bytes,
                        MLA_COPY_HOST_TO_CONTEXT);
    for (int64_t h = 0; st == MLA_OK && h < H; ++h) {
        for (int64_t l = 0; l < L; ++l) {
            for (int64_t b = 0; b < nope / 32; ++b) {
                float x[32];
                for (int k = 0; k < 32; ++k) {
                    int64_t row = h * dv + b * 32 + k;
                    uint8_t byte = codes[row * (L / 2) + l / 2];
                    uint8_t code = (l & 1) ? (uint8_t)(byte >> 4) : (uint8_t)(byte & 0xF);
                    x[k] = mla_fp4_to_f32(code) * mla_e8m0_to_f32(scales[row * (L / 32) + l / 32]);
                }
                int64_t r = h * L + l;
                mla_mxfp4_quantize_block(x, rule, oc + r * (nope / 2) + b * 16,
                                         os + r * (nope / 32) + b);
            }
        }
    }
    if (st == MLA_OK)
        st = mla_memcpy(ctx, codes_dst, oc, ob, MLA_COPY_HOST_TO_CONTEXT);
    if (st == MLA_OK)
        st = mla_memcpy(ctx, scales_dst, os, osb, MLA_COPY_HOST_TO_CONTEXT);
    free(codes);
    free(scales);
    free(oc);
    free(os);
    return st;
}

/* An FP8_BLOCK weight (the rank's slice) dequantized (code * block scale,
 * fp32) and stored as bf16 or re-quantized per tensor (see mla_kv_b_fp8 for
 * the exact rule). */
static mla_status convert_fp8(mla_context *ctx, const slot *t, void *w_dst, void *s_dst,
                              float *tensor_scale)
{
    const int64_t out = t->out_l, in = t->in_l, sb = t->sr.ncb / 4; /* the blocks read */
    const size_t n = (size_t)(out * in);
    uint8_t *codes = NULL;
    unsigned char *sraw = NULL;
    float *x = malloc(n * sizeof *x + 1);
    void *res = malloc(n * 2 + 1);
    mla_status st =
        x && res ? MLA_OK
                 : mla_fail(ctx, MLA_ERR_OUT_OF_MEMORY, t->wi.name, "out of memory converting it");
    if (st == MLA_OK)
        st = read_host(ctx, t->wf, &t->wi, &t->wr, &codes);
    if (st == MLA_OK)
        st = read_host(ctx, t->sf, &t->si, &t->sr, &sraw);
    const float *scales = (const float *)sraw;
    float amax = 0.0f;
    for (int64_t r = 0; st == MLA_OK && r < out; ++r)
        for (int64_t c = 0; c < in; ++c) {
            float v = mla_fp8_to_f32(codes[r * in + c], MLA_DTYPE_FP8_E4M3FN) *
                      scales[(r / 128) * sb + c / 128];
            x[r * in + c] = v;
            amax = fmaxf(amax, fabsf(v));
        }
    size_t bytes = n;
    if (st == MLA_OK && t->convert == MLA_KV_B_FP8_TO_BF16) {
        for (size_t i = 0; i < n; ++i)
            ((uint16_t *)res)[i] = mla_f32_to_bf16(x[i]);
        bytes = n * 2;
    } else if (st == MLA_OK) {
        /* SGLang's input_to_float8: amax clamped to 1e-12, scale = max / amax. */
        float s = 448.0f / fmaxf(amax, 1e-12f);
        for (size_t i = 0; i < n; ++i)
            ((uint8_t *)res)[i] = mla_f32_to_fp8(x[i] * s, MLA_DTYPE_FP8_E4M3FN, MLA_SATURATE);
        float inv = 1.0f / s;
        st = mla_memcpy(ctx, s_dst, &inv, sizeof inv, MLA_COPY_HOST_TO_CONTEXT);
        if (st == MLA_OK)
            *tensor_scale = inv;
    }
    if (st == MLA_OK)
        st = mla_memcpy(ctx, w_dst, res, bytes, MLA_COPY_HOST_TO_CONTEXT);
    free(codes);
    free(sraw);
    free(x);
    free(res);
    return st;
}

mla_status mla_st_check_config(mla_context *ctx, const mla_model_config *c)
{
    if (c->hidden <= 0 || c->heads <= 0 || c->q_lora < 0 || c->kv_lora <= 0 || c->nope <= 0 ||
        c->rope <= 0 || c->v <= 0 || c->index_heads < 0 ||
        (c->index_heads > 0 && (c->index_head_dim <= 0 || c->q_lora == 0)))
        return mla_fail(ctx, MLA_ERR_INVALID_ARGUMENT, "cfg", "config '%.32s' has bad extents",
                        c->name);
    /* Every weight extent below is a product of two of these: keep each
     * product, and the whole layer, far inside int64. */
    const int64_t lim = (int64_t)1 << 24;
    if (c->hidden > lim || c->heads > 4096 || c->q_lora > lim || c->kv_lora > lim ||
        c->nope > lim || c->rope > lim || c->v > lim || c->index_heads > 4096 ||
        c->index_head_dim > lim)
        return mla_fail(ctx, MLA_ERR_OVERFLOW, "cfg", "config '%.32s' is too large", c->name);
    return MLA_OK;
}

/* The options, their defaults filled in and checked. */
static mla_status check_options(mla_context *ctx, const mla_layer_load_options *options,
                                const mla_model_config *cfg, mla_layer_load_options *opt)
{
    mla_layer_load_options_default(opt);
    if (options)
        *opt = *options;
    if (opt->world_size == 0)
        opt->world_size = 1;
    if ((unsigned)opt->kc_rule >= MLA_MXFP4_RULE_COUNT)
        return mla_fail(ctx, MLA_ERR_INVALID_ARGUMENT, "options.kc_rule", "unknown rule");
    if ((unsigned)opt->kv_b_fp8 >= MLA_KV_B_FP8_COUNT)
        return mla_fail(ctx, MLA_ERR_INVALID_ARGUMENT, "options.kv_b_fp8", "unknown conversion");
    if (opt->world_size < 1)
        return mla_fail(ctx, MLA_ERR_INVALID_ARGUMENT, "options.world_size",
                        "world_size %d: at least 1", (int)opt->world_size);
    if (opt->rank < 0 || opt->rank >= opt->world_size)
        return mla_fail(ctx, MLA_ERR_OUT_OF_RANGE, "options.rank", "rank %d outside [0, %d)",
                        (int)opt->rank, (int)opt->world_size);
    if (cfg->heads % opt->world_size != 0)
        return mla_fail(ctx, MLA_ERR_INVALID_ARGUMENT, "options.world_size",
                        "%lld heads do not split evenly over %d ranks", (long long)cfg->heads,
                        (int)opt->world_size);
    return MLA_OK;
}

static mla_status load(mla_context *ctx, const source *src, const mla_model_config *cfg,
                       int64_t layer, const mla_layer_load_options *options,
                       mla_layer_weights_ex *out)
{
    if (layer < 0)
        return mla_fail(ctx, MLA_ERR_OUT_OF_RANGE, "layer", "negative layer index");
    MLA_TRY(mla_st_check_config(ctx, cfg));
    mla_layer_load_options opt;
    MLA_TRY(check_options(ctx, options, cfg, &opt));

    char prefix[NAME_LEN];
    if (opt.prefix)
        snprintf(prefix, sizeof prefix, "%s", opt.prefix);
    else
        snprintf(prefix, sizeof prefix, "model.layers.%lld.self_attn.", (long long)layer);
    if (strlen(prefix) > NAME_LEN - 48)
        return mla_fail(ctx, MLA_ERR_INVALID_ARGUMENT, "options.prefix", "prefix too long");

    mla_layer_weights_ex w;
    memset(&w, 0, sizeof w);
    w.kv_b_tensor_scale = 1.0f;
    mla_layer_weights *b = &w.base;
    const int64_t H = cfg->heads, Hl = H / opt.world_size, h0 = opt.rank * Hl;
    const int64_t L = cfg->kv_lora, R = cfg->rope, hid = cfg->hidden;
    const int64_t qk = cfg->nope + R, dv = cfg->nope + cfg->v;
    const int64_t Hi = cfg->index_heads, Di = cfg->index_head_dim;
    slot s[12];
    int n = 0;
    /* A replicated projection, and one whose rows (heads) or columns are the rank's. */
#define PROJ_AT(nm, o, i, r0, ol, c0, il, dst, fm)                                                 \
    s[n] = (slot){.kind = SLOT_PROJ,                                                               \
                  .out = (o),                                                                      \
                  .in = (i),                                                                       \
                  .row0 = (r0),                                                                    \
                  .out_l = (ol),                                                                   \
                  .col0 = (c0),                                                                    \
                  .in_l = (il),                                                                    \
                  .w = (dst),                                                                      \
                  .fmt = (fm)};                                                                    \
    name_of(s[n++].base, prefix, nm, "")
#define PROJ(nm, o, i, dst, fm) PROJ_AT(nm, o, i, 0, o, 0, i, dst, fm)
#define VEC(nm, o, f32, dst)                                                                       \
    s[n] = (slot){.kind = SLOT_VEC, .out = (o), .force_f32 = (f32), .v = (dst)};                   \
    name_of(s[n++].base, prefix, nm, "")
    if (cfg->q_lora > 0) {
        PROJ("q_a_proj", cfg->q_lora, hid, &b->q_a_proj, &w.formats.q_a_proj);
        VEC("q_a_layernorm.weight", cfg->q_lora, 0, &b->q_a_layernorm);
        PROJ_AT("q_b_proj", H * qk, cfg->q_lora, h0 * qk, Hl * qk, 0, cfg->q_lora, &b->q_b_proj,
                &w.formats.q_b_proj);
    } else {
        PROJ_AT("q_proj", H * qk, hid, h0 * qk, Hl * qk, 0, hid, &b->q_b_proj, &w.formats.q_b_proj);
    }
    PROJ("kv_a_proj_with_mqa", L + R, hid, &b->kv_a_proj_with_mqa, &w.formats.kv_a_proj_with_mqa);
    VEC("kv_a_layernorm.weight", L, 0, &b->kv_a_layernorm);
    slot *kvb = &s[n];
    PROJ_AT("kv_b_proj", H * dv, L, h0 * dv, Hl * dv, 0, L, &b->kv_b_proj, &w.formats.kv_b_proj);
    kvb->per_tensor_ok = 1;
    PROJ_AT("o_proj", hid, H * cfg->v, 0, hid, h0 * cfg->v, Hl * cfg->v, &b->o_proj,
            &w.formats.o_proj);
    if (Hi > 0) {
        mla_indexer_weights *x = &w.indexer;
        PROJ("indexer.wq_b", Hi * Di, cfg->q_lora, &x->wq_b, &w.formats.idx_wq_b);
        PROJ("indexer.wk", Di, hid, &x->wk, &w.formats.idx_wk);
        VEC("indexer.k_norm.weight", Di, 1, &x->k_norm_weight);
        VEC("indexer.k_norm.bias", Di, 1, &x->k_norm_bias);
        PROJ("indexer.weights_proj", Hi, hid, &x->weights_proj, &w.formats.idx_weights_proj);
        w.has_indexer = 1;
    }
#undef PROJ_AT
#undef PROJ
#undef VEC

    /* Pass 1: every tensor present and shaped right, the storage planned. */
    int64_t total = 0;
    for (int i = 0; i < n; ++i) {
        slot *t = &s[i];
        if (t->kind == SLOT_VEC) {
            MLA_TRY(check_vec(ctx, src, t));
            MLA_TRY(mla_st_bytes(t->v_dtype, 1, &t->out, &t->w_bytes));
            MLA_TRY(place(ctx, &total, t->w_bytes, &t->w_off));
            continue;
        }
        MLA_TRY(check_proj(ctx, src, t));
        if (t == kvb && *t->fmt == MLA_WEIGHT_FP8_BLOCK && opt.kv_b_fp8 != MLA_KV_B_FP8_KEEP) {
            t->convert = opt.kv_b_fp8;
            if (t->convert == MLA_KV_B_FP8_TO_BF16) {
                *t->fmt = MLA_WEIGHT_BF16;
                t->w_dtype = MLA_DTYPE_BF16;
            } else {
                *t->fmt = MLA_WEIGHT_FP8_TENSOR;
                t->s_shape[0] = t->s_shape[1] = 1;
            }
        }
        MLA_TRY(mla_st_bytes(t->w_dtype, 2, t->w_shape, &t->w_bytes));
        MLA_TRY(place(ctx, &total, t->w_bytes, &t->w_off));
        if (*t->fmt != MLA_WEIGHT_BF16) {
            MLA_TRY(mla_st_bytes(t->s_dtype, 2, t->s_shape, &t->s_bytes));
            MLA_TRY(place(ctx, &total, t->s_bytes, &t->s_off));
        }
    }
    int kc_fp4 = w.formats.kv_b_proj == MLA_WEIGHT_MXFP4;
    int64_t kc_codes_off = 0, kc_scales_off = 0;
    if (kc_fp4) {
        if (cfg->nope % 32 != 0)
            return mla_fail(ctx, MLA_ERR_SHAPE, kvb->wi.name,
                            "MXFP4 kv_b_proj needs nope (%lld) a multiple of 32 for W_kc",
                            (long long)cfg->nope);
        MLA_TRY(place(ctx, &total, Hl * L * cfg->nope / 2, &kc_codes_off));
        MLA_TRY(place(ctx, &total, Hl * L * cfg->nope / 32, &kc_scales_off));
    }
    if ((uint64_t)total > (uint64_t)SIZE_MAX)
        return mla_fail(ctx, MLA_ERR_OVERFLOW, "weights", "layer storage beyond size_t");
    w.config = *cfg;
    w.config.heads = Hl;
    w.tp_rank = opt.rank;
    w.tp_world_size = opt.world_size;
    w.kc_rule = opt.kc_rule;
    const mla_memory mem = mla_context_memory(ctx);
    if (opt.check_only) {
        for (int i = 0; i < n; ++i) {
            slot *t = &s[i];
            if (t->kind == SLOT_VEC) {
                *t->v = tensor2(NULL, t->v_dtype, mem, 1, &t->out);
                continue;
            }
            t->w->w = tensor2(NULL, t->w_dtype, mem, 2, t->w_shape);
            int64_t zero[2] = {0, 0};
            t->w->scale = tensor2(NULL, MLA_DTYPE_F32, mem, 2, zero);
            if (*t->fmt != MLA_WEIGHT_BF16)
                t->w->scale = tensor2(NULL, t->s_dtype, mem, 2, t->s_shape);
        }
        w.storage_bytes = total;
        *out = w;
        return MLA_OK;
    }

    /* Pass 2: one allocation, then the reads. */
    void *storage = NULL;
    MLA_TRY(mla_malloc(ctx, (size_t)(total ? total : 1), &storage));
    unsigned char *base = storage;
    /* Zeroed so the alignment gaps hold defined bytes (storage compares). */
    mla_status st = mla_memset(ctx, storage, 0, (size_t)(total ? total : 1));
    for (int i = 0; i < n && st == MLA_OK; ++i) {
        slot *t = &s[i];
        if (t->kind == SLOT_VEC) {
            st = read_vec(ctx, t, base, mem);
            if (st == MLA_OK)
                *t->v = tensor2(base + t->w_off, t->v_dtype, mem, 1, &t->out);
            continue;
        }
        t->w->w = tensor2(base + t->w_off, t->w_dtype, mem, 2, t->w_shape);
        if (t->convert) {
            t->w->scale = tensor2(t->convert == MLA_KV_B_FP8_TO_TENSOR ? base + t->s_off : NULL,
                                  MLA_DTYPE_F32, mem, 2, t->s_shape);
            if (t->convert == MLA_KV_B_FP8_TO_BF16)
                t->w->scale.shape[0] = t->w->scale.shape[1] = 0;
            st = convert_fp8(ctx, t, t->w->w.data, t->w->scale.data, &w.kv_b_tensor_scale);
            continue;
        }
        const int by_w_kc = t == kvb && kc_fp4; /* read by make_w_kc */
        if (!by_w_kc)
            st = read_region(ctx, t->wf, &t->wi, &t->wr, t->w->w.data);
        if (st == MLA_OK && *t->fmt != MLA_WEIGHT_BF16) {
            t->w->scale = tensor2(base + t->s_off, t->s_dtype, mem, 2, t->s_shape);
            if (!by_w_kc)
                st = read_region(ctx, t->sf, &t->si, &t->sr, t->w->scale.data);
            if (st == MLA_OK && *t->fmt == MLA_WEIGHT_FP8_TENSOR) /* w_scale on the host too */
                st = read_rows(ctx, t->sf, &t->si, &t->sr, 0, 1,
                               (unsigned char *)&w.kv_b_tensor_scale);
        } else if (st == MLA_OK) {
            /* No scale: a descriptor with NULL data, as mla_weight documents. */
            int64_t zero[2] = {0, 0};
            t->w->scale = tensor2(NULL, MLA_DTYPE_F32, mem, 2, zero);
        }
    }
    if (st == MLA_OK && kc_fp4)
        st = make_w_kc(ctx, kvb, cfg, Hl, opt.kc_rule, base + kc_codes_off, base + kc_scales_off);
    if (st != MLA_OK) {
        mla_free(ctx, storage);
        return st;
    }

    const mla_weight *kv = &b->kv_b_proj;
    if (kc_fp4) {
        int64_t cs[3] = {Hl, L, cfg->nope / 2}, ss[3] = {Hl, L, cfg->nope / 32};
        w.w_kc_fp4.codes = tensor2(base + kc_codes_off, MLA_DTYPE_FP4X2, mem, 3, cs);
        w.w_kc_fp4.scales = tensor2(base + kc_scales_off, MLA_DTYPE_E8M0, mem, 3, ss);
        w.w_kc_fp4.layout = MLA_SCALE_ROW_MAJOR;
        int64_t vc[3] = {Hl, cfg->v, L / 2}, vcs[3] = {dv * L / 2, L / 2, 1};
        int64_t vs[3] = {Hl, cfg->v, L / 32}, vss[3] = {dv * L / 32, L / 32, 1};
        w.w_vc_fp4.codes = mla_view((unsigned char *)kv->w.data + cfg->nope * L / 2,
                                    MLA_DTYPE_FP4X2, mem, 3, vc, vcs);
        w.w_vc_fp4.scales = mla_view((unsigned char *)kv->scale.data + cfg->nope * L / 32,
                                     MLA_DTYPE_E8M0, mem, 3, vs, vss);
        w.w_vc_fp4.layout = MLA_SCALE_ROW_MAJOR;
    } else {
        size_t es = mla_dtype_size(kv->w.dtype);
        int64_t kc[3] = {Hl, cfg->nope, L}, kcs[3] = {dv * L, L, 1};
        int64_t vc[3] = {Hl, L, cfg->v}, vcs[3] = {dv * L, 1, L};
        w.w_kc = mla_view(kv->w.data, kv->w.dtype, mem, 3, kc, kcs);
        w.w_vc = mla_view((unsigned char *)kv->w.data + (size_t)(cfg->nope * L) * es, kv->w.dtype,
                          mem, 3, vc, vcs);
    }
    w.storage = storage;
    w.storage_bytes = total;
    *out = w;
    return MLA_OK;
}

mla_status mla_layer_weights_load_shards(mla_context *ctx, mla_safetensors *const *files,
                                         int32_t count, const mla_model_config *cfg, int64_t layer,
                                         const mla_layer_load_options *options,
                                         mla_layer_weights_ex *out)
{
    if (!ctx)
        return MLA_ERR_NULL_POINTER;
    mla_clear_error(ctx);
    if (!files || !cfg || !out)
        return mla_fail(ctx, MLA_ERR_NULL_POINTER,
                        !files ? "files"
                        : !cfg ? "cfg"
                               : "out",
                        "null argument");
    if (count < 1)
        return mla_fail(ctx, MLA_ERR_INVALID_ARGUMENT, "count", "no file");
    for (int32_t i = 0; i < count; ++i)
        if (!files[i])
            return mla_fail(ctx, MLA_ERR_NULL_POINTER, "files", "file %d is NULL", (int)i);
    const source src = {files, count, NULL};
    return load(ctx, &src, cfg, layer, options, out);
}

mla_status mla_layer_weights_load(mla_context *ctx, mla_safetensors *file,
                                  const mla_model_config *cfg, int64_t layer,
                                  const mla_layer_load_options *options, mla_layer_weights_ex *out)
{
    if (!ctx)
        return MLA_ERR_NULL_POINTER;
    if (!file) {
        mla_clear_error(ctx);
        return mla_fail(ctx, MLA_ERR_NULL_POINTER, "file", "null argument");
    }
    return mla_layer_weights_load_shards(ctx, &file, 1, cfg, layer, options, out);
}

mla_status mla_layer_weights_load_checkpoint(mla_context *ctx, mla_checkpoint *ck, int64_t layer,
                                             const mla_layer_load_options *options,
                                             mla_layer_weights_ex *out)
{
    if (!ctx)
        return MLA_ERR_NULL_POINTER;
    mla_clear_error(ctx);
    if (!ck || !out)
        return mla_fail(ctx, MLA_ERR_NULL_POINTER, !ck ? "ck" : "out", "null argument");
    const mla_hf_config *hc = mla_checkpoint_config(ck);
    if (layer >= hc->num_layers && !(options && options->prefix)) {
        /* Past num_hidden_layers only a layer the index holds (the MTP layer). */
        char nm[NAME_LEN];
        snprintf(nm, sizeof nm, "model.layers.%lld.self_attn.kv_a_proj_with_mqa.weight",
                 (long long)layer);
        const int found = mla_ck_has(ck, nm);
        if (!found)
            return mla_fail(ctx, MLA_ERR_OUT_OF_RANGE, "layer",
                            "layer %lld: the checkpoint has %lld layers (num_hidden_layers) and "
                            "no attention tensors of layer %lld",
                            (long long)layer, (long long)hc->num_layers, (long long)layer);
    }
    const source src = {NULL, 0, ck};
    return load(ctx, &src, &hc->model, layer, options, out);
}

void mla_layer_weights_free(mla_context *ctx, mla_layer_weights_ex *weights)
{
    if (!weights)
        return;
    if (ctx && weights->storage)
        mla_free(ctx, weights->storage);
    memset(weights, 0, sizeof *weights);
}
