/* Dump folders (core/dump.h, docs/REPLAY.md): in.NAME.npy / out.NAME.npy,
 * replay.sh with the `mla op` line, manifest.txt with every file's size and
 * FNV-1a hash, so that `mla op --replay` can refuse a missing or altered
 * file by name. A dump never changes the call's result or status; if a file
 * cannot be written the folder is left without its manifest (replay refuses
 * it) and mla_context_dump_status says so. */
#define _POSIX_C_SOURCE 200809L /* mkdir */
#include "core/dump.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/safetensors.h"

enum { DUMP_MAX_OUT = 16, DUMP_MAX_FILES = 48, DUMP_LINE = 16384 };

struct mla_dump_state {
    uint64_t mask;
    char dir[1024];
    int32_t max, count;
    int busy;
    char status[1300];
};

typedef struct dump_out {
    char name[48];
    mla_tensor t;
    int side; /* not an output of the line: a record of the call's own (name: the file) */
} dump_out;

struct mla_dump {
    mla_context *ctx;
    int op;
    char path[1200];
    char line[DUMP_LINE];
    size_t len;
    int failed;
    int nout, nfiles;
    dump_out out[DUMP_MAX_OUT];
    char files[DUMP_MAX_FILES][64];
};

static const char *const composite_names[] = {"prepare", "indexer_prepare", "indexer_search",
                                              "layer"};

static const char *op_name(int op)
{
    return op < MLA_OP_COUNT ? mla_op_name((mla_op)op) : composite_names[op - MLA_OP_COUNT];
}

/* ctx->dump for ops (NULL / "": off). */
static mla_status set_dump(mla_context *ctx, const char *ops, const char *dir, int32_t max)
{
    free(ctx->dump);
    ctx->dump = NULL;
    if (!ops || !*ops)
        return MLA_OK;
    mla_dump_state *s = calloc(1, sizeof *s);
    if (!s)
        return MLA_ERR_OUT_OF_MEMORY;
    snprintf(s->dir, sizeof s->dir, "%s", dir && *dir ? dir : "mla-dump");
    s->max = max > 0 ? max : 8;
    char unknown[64] = "";
    for (const char *p = ops; *p;) {
        const size_t n = strcspn(p, ", ");
        int hit = 0;
        /* the expanded attention has no `mla op` to replay it, hence no capture */
        for (int op = 0; op < MLA_DUMP_OP_COUNT; ++op)
            if (op != MLA_OP_ATTENTION_EXPANDED &&
                ((n == 1 && *p == '*') ||
                 (strlen(op_name(op)) == n && !strncmp(op_name(op), p, n))))
                s->mask |= 1ull << op, hit = 1;
        if (!hit && n && !*unknown)
            snprintf(unknown, sizeof unknown, "%.*s", (int)(n < 40 ? n : 40), p);
        p += n;
        p += strspn(p, ", ");
    }
    if (*unknown)
        snprintf(s->status, sizeof s->status, "MLA_DUMP names no op '%s' (mla op --help)", unknown);
    else
        snprintf(s->status, sizeof s->status, "dumping '%.200s' to %.1000s (at most %d calls)", ops,
                 s->dir, (int)s->max);
    ctx->dump = s;
    return MLA_OK;
}

void mla_dump_init(mla_context *ctx)
{
    const char *max = getenv("MLA_DUMP_MAX");
    ctx->dump = NULL;
    set_dump(ctx, getenv("MLA_DUMP"), getenv("MLA_DUMP_DIR"), max ? atoi(max) : 0);
}

mla_status mla_context_set_dump(mla_context *ctx, const char *ops, const char *dir,
                                int32_t max_calls)
{
    if (!ctx)
        return MLA_ERR_NULL_POINTER;
    mla_clear_error(ctx);
    if (ctx->dump && ctx->dump->busy)
        return mla_fail(ctx, MLA_ERR_INVALID_ARGUMENT, "ctx", "a dumped call is running");
    return set_dump(ctx, ops, dir, max_calls);
}

void mla_dump_fini(mla_context *ctx)
{
    free(ctx->dump);
    ctx->dump = NULL;
}

const char *mla_context_dump_status(const mla_context *ctx)
{
    return ctx && ctx->dump ? ctx->dump->status : "";
}

int mla_dump_wants(mla_context *ctx, int op)
{
    const mla_dump_state *s = ctx->dump;
    /* a composite's dry pass (core/validate.h) computes nothing to record */
    return !ctx->dry_run && !s->busy && s->count < s->max && (s->mask >> op & 1u);
}

static void add_text(mla_dump *d, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static void add_text(mla_dump *d, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    const int n = vsnprintf(d->line + d->len, sizeof d->line - d->len, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof d->line - d->len)
        d->failed = 1;
    else
        d->len += (size_t)n;
}

/* Keeps the context's record of the call (err_param / detail) across the
 * dump's own library calls. */
typedef struct saved_error {
    char param[sizeof((mla_context *)0)->err_param];
    char detail[sizeof((mla_context *)0)->err_detail];
} saved_error;

static void save_error(const mla_context *ctx, saved_error *e)
{
    memcpy(e->param, ctx->err_param, sizeof e->param);
    memcpy(e->detail, ctx->err_detail, sizeof e->detail);
}

static void restore_error(mla_context *ctx, const saved_error *e)
{
    memcpy(ctx->err_param, e->param, sizeof e->param);
    memcpy(ctx->err_detail, e->detail, sizeof e->detail);
}

mla_dump *mla_dump_begin(mla_context *ctx, int op)
{
    mla_dump_state *s = ctx->dump;
    mla_dump *d = calloc(1, sizeof *d);
    if (!d) { /* no dump, and none from the call's own entry (it would recurse) */
        s->max = 0;
        snprintf(s->status, sizeof s->status, "out of memory: dumping stopped");
        return NULL;
    }
    d->ctx = ctx;
    d->op = op;
    s->busy = 1;
    if (mkdir(s->dir, 0777) != 0 && errno != EEXIST)
        d->failed = 1;
    for (int k = s->count; !d->failed && k < s->count + 100000; ++k) {
        snprintf(d->path, sizeof d->path, "%s/%04d-%s", s->dir, k, op_name(op));
        if (mkdir(d->path, 0777) == 0)
            break;
        if (errno != EEXIST)
            d->failed = 1;
    }
    if (d->failed)
        d->path[0] = '\0';
    ++s->count;
    if (d->failed) /* the call runs; mla_dump_end reports */
        return d;
    saved_error e;
    save_error(ctx, &e);
    mla_context_synchronize(ctx); /* the inputs' producers have finished */
    restore_error(ctx, &e);
    add_text(d, "op %s --backend %s", op_name(op), mla_backend_name(ctx->backend));
    return d;
}

static const char *npy_descr(mla_dtype t)
{
    switch (t) {
    case MLA_DTYPE_F32:
        return "<f4";
    case MLA_DTYPE_F64:
        return "<f8";
    case MLA_DTYPE_F16:
        return "<f2";
    case MLA_DTYPE_BF16:
        return "<u2";
    case MLA_DTYPE_I32:
        return "<i4";
    case MLA_DTYPE_I64:
        return "<i8";
    default:
        return "|u1";
    }
}

/* Elements a view spans (1 + sum (extent - 1) stride), or -1 when the
 * descriptor is one the op will refuse (the dump runs before validation):
 * a rank, dtype, extent or stride out of range, a span past 2^40 bytes,
 * no data, or memory the context cannot reach. */
static int64_t view_span(const mla_context *ctx, const mla_tensor *t)
{
    const size_t es = mla_dtype_size(t->dtype);
    if (t->ndim < 0 || t->ndim > MLA_MAX_DIMS || !es || t->memory != mla_context_memory(ctx))
        return -1;
    int64_t span = 1, term;
    for (int32_t i = 0; i < t->ndim; ++i) {
        if (t->shape[i] < 0 || t->stride[i] < 0)
            return -1;
        if (t->shape[i] == 0)
            return 0;
        if (__builtin_mul_overflow(t->shape[i] - 1, t->stride[i], &term) ||
            __builtin_add_overflow(span, term, &span))
            return -1;
    }
    return span > ((int64_t)1 << 40) / (int64_t)es || !t->data ? -1 : span;
}

/* The tensor's logical elements, C order, as a .npy file. */
static int write_npy(mla_dump *d, const char *file, const mla_tensor *t)
{
    const size_t es = mla_dtype_size(t->dtype);
    const int64_t span = view_span(d->ctx, t), n = span > 0 ? mla_tensor_numel(t) : 0;
    if (span < 0)
        return 0; /* not a tensor the call can take: left out of the dump */
    unsigned char *raw = malloc((size_t)span * es + 1), *flat = malloc((size_t)n * es + 1);
    int ok = raw && flat && n >= 0;
    if (ok && span)
        ok =
            mla_memcpy(d->ctx, raw, t->data, (size_t)span * es, MLA_COPY_CONTEXT_TO_HOST) == MLA_OK;
    int64_t idx[MLA_MAX_DIMS] = {0};
    for (int64_t i = 0; ok && i < n; ++i) {
        int64_t off = 0;
        for (int32_t k = 0; k < t->ndim; ++k)
            off += idx[k] * t->stride[k];
        memcpy(flat + (size_t)i * es, raw + (size_t)off * es, es);
        for (int32_t k = t->ndim - 1; k >= 0 && ++idx[k] == t->shape[k]; --k)
            idx[k] = 0;
    }
    char head[512], shape[256] = "";
    size_t sl = 0;
    for (int32_t k = 0; k < t->ndim; ++k)
        sl += (size_t)snprintf(shape + sl, sizeof shape - sl, "%lld,%s", (long long)t->shape[k],
                               k + 1 < t->ndim ? " " : "");
    if (t->ndim > 1) /* (3,) for one dim, (3, 4) for more */
        shape[sl - 1] = '\0';
    int hl = snprintf(head, sizeof head, "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }",
                      npy_descr(t->dtype), shape);
    const int total = (10 + hl + 1 + 63) / 64 * 64; /* magic + length + dict + '\n', 64-aligned */
    while (10 + hl + 1 < total)
        head[hl++] = ' ';
    head[hl++] = '\n';
    char path[1300];
    snprintf(path, sizeof path, "%s/%s", d->path, file);
    FILE *fp = ok ? fopen(path, "wb") : NULL;
    const unsigned char pre[10] = {
        0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(hl & 0xFF), (unsigned char)(hl >> 8)};
    ok = fp && fwrite(pre, 1, 10, fp) == 10 && fwrite(head, 1, (size_t)hl, fp) == (size_t)hl &&
         (n == 0 || fwrite(flat, es, (size_t)n, fp) == (size_t)n);
    if (fp && fclose(fp) != 0)
        ok = 0;
    free(raw);
    free(flat);
    if (ok && d->nfiles < DUMP_MAX_FILES)
        snprintf(d->files[d->nfiles++], sizeof d->files[0], "%s", file);
    else
        d->failed = 1;
    return ok;
}

/* --dtype where the file's type does not say it, --stride where the view is not C order. */
static void view_options(mla_dump *d, const char *name, const mla_tensor *t)
{
    if (!strcmp(npy_descr(t->dtype), "|u1"))
        add_text(d, " --dtype %s=%s", name, mla_dtype_name(t->dtype));
    if (mla_tensor_is_contiguous(t) || t->ndim == 0)
        return;
    add_text(d, " --stride %s=", name);
    for (int32_t k = 0; k < t->ndim; ++k)
        add_text(d, "%lld%s", (long long)t->stride[k], k + 1 < t->ndim ? "," : "");
}

void mla_dump_in(mla_dump *d, const char *name, const mla_tensor *t)
{
    if (!d || !t || d->failed)
        return;
    char file[64];
    snprintf(file, sizeof file, "in.%s.npy", name);
    saved_error e;
    save_error(d->ctx, &e);
    if (write_npy(d, file, t)) {
        add_text(d, " --in %s=%s", name, file);
        view_options(d, name, t);
    }
    restore_error(d->ctx, &e);
}

/* An output (or a side record) to write after the call; 0 when none is taken. */
static int add_out(mla_dump *d, const char *name, const mla_tensor *t, int side)
{
    if (!d || !t || d->nout == DUMP_MAX_OUT || t->ndim < 0 || t->ndim > MLA_MAX_DIMS)
        return 0;
    dump_out *o = &d->out[d->nout++];
    snprintf(o->name, sizeof o->name, "%s", name);
    o->t = *t;
    o->side = side;
    return 1;
}

void mla_dump_out(mla_dump *d, const char *name, const mla_tensor *t)
{
    if (!add_out(d, name, t, 0))
        return;
    add_text(d, " --out %s=got.%s.npy --dtype %s=%s --shape %s=", name, name, name,
             mla_dtype_name(t->dtype), name);
    for (int32_t k = 0; k < t->ndim; ++k)
        add_text(d, "%lld%s", (long long)t->shape[k], k + 1 < t->ndim ? "," : "");
    if (!mla_tensor_is_contiguous(t) && t->ndim > 0) {
        add_text(d, " --stride %s=", name);
        for (int32_t k = 0; k < t->ndim; ++k)
            add_text(d, "%lld%s", (long long)t->stride[k], k + 1 < t->ndim ? "," : "");
    }
}

void mla_dump_side(mla_dump *d, const char *file, const mla_tensor *t) { add_out(d, file, t, 1); }

void mla_dump_param(mla_dump *d, const char *key, const char *fmt, ...)
{
    if (!d)
        return;
    char v[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v, sizeof v, fmt, ap);
    va_end(ap);
    add_text(d, " --param %s=%s", key, v);
}

void mla_dump_cache_desc(mla_dump *d, const mla_cache_desc *c)
{
    mla_dump_param(d, "layout", "%s", mla_cache_layout_name(c->layout));
    mla_dump_param(d, "dtype", "%s", mla_dtype_name(c->dtype));
    mla_dump_param(d, "block_size", "%lld", (long long)c->block_size);
    mla_dump_param(d, "k_scale", "%.9g", (double)c->k_scale);
}

/* One projection's tensors under its loader names (scale: fp8 blocks or a
 * per-tensor [1, 1] as *.weight_scale_inv, MXFP4 e8m0 as *.weight_scale). */
static mla_status add_weight(mla_dump *d, mla_safetensors_writer *w, const char *base,
                             const mla_weight *p, const mla_tensor *vec)
{
    const mla_tensor *parts[2] = {vec ? vec : &p->w, vec ? NULL : &p->scale};
    for (int k = 0; k < 2; ++k) {
        const mla_tensor *t = parts[k];
        if (!t || !t->data)
            continue;
        char nm[160];
        snprintf(nm, sizeof nm, "%s%s", base,
                 vec                          ? ""
                 : k == 0                     ? ".weight"
                 : t->dtype == MLA_DTYPE_E8M0 ? ".weight_scale"
                                              : ".weight_scale_inv");
        const int64_t n = mla_tensor_numel(t);
        const size_t bytes = (size_t)n * mla_dtype_size(t->dtype);
        void *h = malloc(bytes + 1);
        mla_status st = h && mla_tensor_is_contiguous(t)
                            ? mla_memcpy(d->ctx, h, t->data, bytes, MLA_COPY_CONTEXT_TO_HOST)
                            : MLA_ERR_OUT_OF_MEMORY;
        if (st == MLA_OK)
            st = mla_safetensors_writer_add(NULL, w, nm, t->dtype, t->ndim, t->shape, h);
        free(h);
        if (st != MLA_OK)
            return st;
    }
    return MLA_OK;
}

/* cfg as config.json, and the replay line's --param model=. that reads it. */
static void write_config(mla_dump *d, const mla_model_config *cfg)
{
    char path[1300];
    char *json = mla_hf_config_json(cfg, 1, "");
    snprintf(path, sizeof path, "%s/config.json", d->path);
    FILE *fp = json ? fopen(path, "wb") : NULL;
    int ok = fp && fputs(json, fp) >= 0;
    if (fp && fclose(fp) != 0)
        ok = 0;
    free(json);
    if (ok && d->nfiles < DUMP_MAX_FILES)
        snprintf(d->files[d->nfiles++], sizeof d->files[0], "config.json");
    else
        d->failed = 1;
    add_text(d, " --param model=.");
}

void mla_dump_config(mla_dump *d, const mla_model_config *cfg)
{
    if (!d || d->failed)
        return;
    saved_error e;
    save_error(d->ctx, &e);
    write_config(d, cfg);
    restore_error(d->ctx, &e);
}

void mla_dump_weights(mla_dump *d, const mla_layer_weights *lw, const mla_indexer_weights *idx,
                      const mla_model_config *cfg, mla_mxfp4_rule kc_rule)
{
    if (!d || d->failed)
        return;
    saved_error e;
    save_error(d->ctx, &e);
    mla_safetensors_writer *w = NULL;
    mla_status st = mla_safetensors_writer_create(NULL, &w);
    if (st == MLA_OK && cfg->q_lora > 0) {
        st = add_weight(d, w, "q_a_proj", &lw->q_a_proj, NULL);
        if (st == MLA_OK)
            st = add_weight(d, w, "q_a_layernorm.weight", NULL, &lw->q_a_layernorm);
    }
    if (st == MLA_OK)
        st = add_weight(d, w, cfg->q_lora > 0 ? "q_b_proj" : "q_proj", &lw->q_b_proj, NULL);
    if (st == MLA_OK)
        st = add_weight(d, w, "kv_a_proj_with_mqa", &lw->kv_a_proj_with_mqa, NULL);
    if (st == MLA_OK)
        st = add_weight(d, w, "kv_a_layernorm.weight", NULL, &lw->kv_a_layernorm);
    if (st == MLA_OK)
        st = add_weight(d, w, "kv_b_proj", &lw->kv_b_proj, NULL);
    if (st == MLA_OK)
        st = add_weight(d, w, "o_proj", &lw->o_proj, NULL);
    if (st == MLA_OK && idx) {
        st = add_weight(d, w, "indexer.wq_b", &idx->wq_b, NULL);
        if (st == MLA_OK)
            st = add_weight(d, w, "indexer.wk", &idx->wk, NULL);
        if (st == MLA_OK)
            st = add_weight(d, w, "indexer.k_norm.weight", NULL, &idx->k_norm_weight);
        if (st == MLA_OK)
            st = add_weight(d, w, "indexer.k_norm.bias", NULL, &idx->k_norm_bias);
        if (st == MLA_OK)
            st = add_weight(d, w, "indexer.weights_proj", &idx->weights_proj, NULL);
    }
    char path[1300];
    snprintf(path, sizeof path, "%s/weights.safetensors", d->path);
    if (st == MLA_OK)
        st = mla_safetensors_writer_save(NULL, w, path);
    mla_safetensors_writer_destroy(w);
    if (st == MLA_OK && d->nfiles < DUMP_MAX_FILES)
        snprintf(d->files[d->nfiles++], sizeof d->files[0], "weights.safetensors");
    else
        d->failed = 1;
    write_config(d, cfg);
    add_text(d,
             " --param weights=weights.safetensors --param prefix= --param kv_b_fp8=keep "
             "--param kc_rule=%s",
             mla_mxfp4_rule_name(kc_rule));
    restore_error(d->ctx, &e);
}

/* FNV-1a 64 of a file and its size; 0 when unreadable. */
static int file_hash(const char *path, uint64_t *h, int64_t *bytes)
{
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return 0;
    uint64_t x = 0xCBF29CE484222325ull;
    int64_t n = 0;
    unsigned char buf[65536];
    size_t k;
    while ((k = fread(buf, 1, sizeof buf, fp)) > 0) {
        for (size_t i = 0; i < k; ++i)
            x = (x ^ buf[i]) * 0x100000001B3ull;
        n += (int64_t)k;
    }
    const int ok = !ferror(fp);
    fclose(fp);
    *h = x, *bytes = n;
    return ok;
}

mla_status mla_dump_end(mla_dump *d, mla_status status)
{
    if (!d)
        return status;
    mla_context *ctx = d->ctx;
    mla_dump_state *s = ctx->dump;
    if (d->failed && !*d->path) {
        snprintf(s->status, sizeof s->status, "cannot make a dump folder in %.1000s", s->dir);
        s->busy = 0;
        free(d);
        return status;
    }
    saved_error e;
    save_error(ctx, &e);
    mla_context_synchronize(ctx);
    for (int i = 0; status == MLA_OK && i < d->nout; ++i) {
        char file[64];
        snprintf(file, sizeof file, d->out[i].side ? "%s" : "out.%s.npy", d->out[i].name);
        write_npy(d, file, &d->out[i].t);
    }
    char path[1300];
    snprintf(path, sizeof path, "%s/replay.sh", d->path);
    FILE *fp = d->failed ? NULL : fopen(path, "wb");
    int ok = fp && fprintf(fp,
                           "#!/bin/sh\n# libmla %s: %s on %s (%s), returned '%s'%s%s.\n"
                           "# `mla op --replay <this folder>` reruns it and compares; this line "
                           "writes got.*.npy.\n"
                           "cd \"$(dirname \"$0\")\" && exec \"${MLA:-mla}\" %s\n",
                           mla_version_string(), op_name(d->op), mla_backend_name(ctx->backend),
                           ctx->device_name, mla_status_name(status), *e.param ? ": " : "", e.param,
                           d->line) > 0;
    if (fp && fclose(fp) != 0)
        ok = 0;
    if (ok && d->nfiles < DUMP_MAX_FILES)
        snprintf(d->files[d->nfiles++], sizeof d->files[0], "replay.sh");
    snprintf(path, sizeof path, "%s/manifest.txt", d->path);
    fp = ok ? fopen(path, "wb") : NULL;
    ok = fp &&
         fprintf(fp, "mla-dump 1\nop %s\nbackend %s\nversion %s\nstatus %s\n", op_name(d->op),
                 mla_backend_name(ctx->backend), mla_version_string(), mla_status_name(status)) > 0;
    for (int i = 0; ok && i < d->nfiles; ++i) {
        char f[1300];
        uint64_t h;
        int64_t n;
        snprintf(f, sizeof f, "%s/%s", d->path, d->files[i]);
        ok = file_hash(f, &h, &n) && fprintf(fp, "file %016llx %lld %s\n", (unsigned long long)h,
                                             (long long)n, d->files[i]) > 0;
    }
    if (fp && fclose(fp) != 0)
        ok = 0;
    if (!ok)
        remove(path);
    snprintf(s->status, sizeof s->status, "%s %.1200s", ok ? "wrote" : "could not complete",
             d->path);
    restore_error(ctx, &e);
    s->busy = 0;
    free(d);
    return status;
}
