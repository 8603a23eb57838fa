/* Safetensors writing: tensors are declared in order, the header is built
 * at save, then each tensor's bytes are copied or produced by its fill
 * callback, one tensor in memory at a time. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/safetensors.h"

typedef struct wr_entry {
    char *name;
    mla_dtype dtype;
    int32_t ndim;
    int64_t shape[MLA_MAX_DIMS];
    int64_t bytes;
    void *data; /* owned copy, or NULL when fill produces the bytes */
    mla_safetensors_fill_fn fill;
    void *user;
} wr_entry;

struct mla_safetensors_writer {
    mla_progress_fn progress; /* after each tensor: done0 + bytes so far, of total */
    void *progress_user;
    int64_t done0, total;
    wr_entry *entries;
    int64_t count, cap;
    char **meta; /* key, value pairs */
    int64_t meta_count, meta_cap;
};

mla_status mla_safetensors_writer_create(mla_context *ctx, mla_safetensors_writer **out)
{
    if (ctx)
        mla_clear_error(ctx);
    if (!out)
        return mla_fail(ctx, MLA_ERR_NULL_POINTER, "out", "null argument");
    mla_safetensors_writer *w = calloc(1, sizeof *w);
    if (!w)
        return mla_fail(ctx, MLA_ERR_OUT_OF_MEMORY, "writer", "out of memory");
    *out = w;
    return MLA_OK;
}

void mla_safetensors_writer_destroy(mla_safetensors_writer *w)
{
    if (!w)
        return;
    for (int64_t i = 0; i < w->count; ++i) {
        free(w->entries[i].name);
        free(w->entries[i].data);
    }
    free(w->entries);
    for (int64_t i = 0; i < 2 * w->meta_count; ++i)
        free(w->meta[i]);
    free(w->meta);
    free(w);
}

static char *dup_string(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

/* Characters that would need escaping are refused rather than escaped:
 * tensor names and metadata of this library are plain ASCII. */
static int plain_string(const char *s)
{
    for (; *s; ++s)
        if ((unsigned char)*s < 0x20 || *s == '"' || *s == '\\')
            return 0;
    return 1;
}

static mla_status add_entry(mla_context *ctx, mla_safetensors_writer *w, const char *name,
                            mla_dtype dtype, int32_t ndim, const int64_t *shape, const void *data,
                            mla_safetensors_fill_fn fill, void *user)
{
    if (ctx)
        mla_clear_error(ctx);
    if (!w || !name || (ndim > 0 && !shape))
        return mla_fail(ctx, MLA_ERR_NULL_POINTER,
                        !w      ? "writer"
                        : !name ? "name"
                                : "shape",
                        "null argument");
    if (!*name || !plain_string(name) || !strcmp(name, "__metadata__"))
        return mla_fail(ctx, MLA_ERR_INVALID_ARGUMENT, "name", "unusable tensor name '%s'", name);
    if ((unsigned)dtype >= MLA_DTYPE_COUNT || !mla_st_dtype_string(dtype))
        return mla_fail(ctx, MLA_ERR_DTYPE, name, "%s has no safetensors dtype",
                        mla_dtype_name(dtype));
    int64_t bytes;
    mla_status st = mla_st_bytes(dtype, ndim, shape, &bytes);
    if (st != MLA_OK)
        return mla_fail(ctx, st, name, "tensor '%s': bad rank or extents, or size overflow", name);
    if (bytes > 0 && !data && !fill)
        return mla_fail(ctx, MLA_ERR_NULL_POINTER, "data", "null data");
    if (bytes > 0 && (uint64_t)bytes > (uint64_t)SIZE_MAX)
        return mla_fail(ctx, MLA_ERR_OVERFLOW, name, "tensor '%s' too large", name);
    for (int64_t i = 0; i < w->count; ++i)
        if (!strcmp(w->entries[i].name, name))
            return mla_fail(ctx, MLA_ERR_INVALID_ARGUMENT, name, "tensor '%s' added twice", name);
    if (w->count == w->cap) {
        int64_t ncap = w->cap ? 2 * w->cap : 16;
        wr_entry *p = realloc(w->entries, (size_t)ncap * sizeof *p);
        if (!p)
            return mla_fail(ctx, MLA_ERR_OUT_OF_MEMORY, name, "out of memory");
        w->entries = p;
        w->cap = ncap;
    }
    wr_entry e = {0};
    e.name = dup_string(name);
    e.dtype = dtype;
    e.ndim = ndim;
    for (int32_t d = 0; d < ndim; ++d)
        e.shape[d] = shape[d];
    e.bytes = bytes;
    e.fill = fill;
    e.user = user;
    if (data && bytes > 0) {
        e.data = malloc((size_t)bytes);
        if (e.data)
            memcpy(e.data, data, (size_t)bytes);
    }
    if (!e.name || (data && bytes > 0 && !e.data)) {
        free(e.name);
        free(e.data);
        return mla_fail(ctx, MLA_ERR_OUT_OF_MEMORY, name, "out of memory");
    }
    w->entries[w->count++] = e;
    return MLA_OK;
}

mla_status mla_safetensors_writer_add(mla_context *ctx, mla_safetensors_writer *w, const char *name,
                                      mla_dtype dtype, int32_t ndim, const int64_t *shape,
                                      const void *data)
{
    return add_entry(ctx, w, name, dtype, ndim, shape, data, NULL, NULL);
}

mla_status mla_safetensors_writer_add_fill(mla_context *ctx, mla_safetensors_writer *w,
                                           const char *name, mla_dtype dtype, int32_t ndim,
                                           const int64_t *shape, mla_safetensors_fill_fn fill,
                                           void *user)
{
    if (!fill)
        return mla_fail(ctx, MLA_ERR_NULL_POINTER, "fill", "null argument");
    return add_entry(ctx, w, name, dtype, ndim, shape, NULL, fill, user);
}

mla_status mla_safetensors_writer_metadata(mla_context *ctx, mla_safetensors_writer *w,
                                           const char *key, const char *value)
{
    if (ctx)
        mla_clear_error(ctx);
    if (!w || !key || !value)
        return mla_fail(ctx, MLA_ERR_NULL_POINTER,
                        !w     ? "writer"
                        : !key ? "key"
                               : "value",
                        "null argument");
    if (!plain_string(key) || !plain_string(value))
        return mla_fail(ctx, MLA_ERR_INVALID_ARGUMENT, key,
                        "metadata with quotes, backslashes or control characters");
    if (w->meta_count == w->meta_cap) {
        int64_t ncap = w->meta_cap ? 2 * w->meta_cap : 8;
        char **p = realloc(w->meta, (size_t)(2 * ncap) * sizeof *p);
        if (!p)
            return mla_fail(ctx, MLA_ERR_OUT_OF_MEMORY, key, "out of memory");
        w->meta = p;
        w->meta_cap = ncap;
    }
    char *k = dup_string(key), *v = dup_string(value);
    if (!k || !v) {
        free(k);
        free(v);
        return mla_fail(ctx, MLA_ERR_OUT_OF_MEMORY, key, "out of memory");
    }
    w->meta[2 * w->meta_count] = k;
    w->meta[2 * w->meta_count + 1] = v;
    ++w->meta_count;
    return MLA_OK;
}

/* A growing text buffer for the header. */
typedef struct text_buf {
    char *p;
    size_t len, cap;
    int failed;
} text_buf;

static void append(text_buf *b, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

static void append(text_buf *b, const char *fmt, ...)
{
    if (b->failed)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(b->p ? b->p + b->len : NULL, b->p ? b->cap - b->len : 0, fmt, ap);
        va_end(ap);
        if (n < 0) {
            b->failed = 1;
            return;
        }
        if (b->p && b->len + (size_t)n < b->cap) {
            b->len += (size_t)n;
            return;
        }
        size_t ncap = (b->cap ? b->cap * 2 : 4096) + (size_t)n;
        char *p = realloc(b->p, ncap);
        if (!p) {
            b->failed = 1;
            return;
        }
        b->p = p;
        b->cap = ncap;
    }
}

static mla_status build_header(mla_context *ctx, const mla_safetensors_writer *w, text_buf *b)
{
    append(b, "{");
    if (w->meta_count) {
        append(b, "\"__metadata__\":{");
        for (int64_t i = 0; i < w->meta_count; ++i)
            append(b, "%s\"%s\":\"%s\"", i ? "," : "", w->meta[2 * i], w->meta[2 * i + 1]);
        append(b, "}%s", w->count ? "," : "");
    }
    int64_t at = 0;
    for (int64_t i = 0; i < w->count; ++i) {
        const wr_entry *e = &w->entries[i];
        append(b, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[", i ? "," : "", e->name,
               mla_st_dtype_string(e->dtype));
        for (int32_t d = 0; d < e->ndim; ++d)
            append(b, "%s%lld", d ? "," : "", (long long)e->shape[d]);
        if (e->bytes > INT64_MAX - at)
            return mla_fail(ctx, MLA_ERR_OVERFLOW, e->name, "the file would exceed int64 bytes");
        append(b, "],\"data_offsets\":[%lld,%lld]}", (long long)at, (long long)(at + e->bytes));
        at += e->bytes;
    }
    append(b, "}");
    /* Pad with spaces so the data section starts 8-byte aligned. */
    while (!b->failed && (8 + b->len) % 8 != 0)
        append(b, " ");
    if (b->failed)
        return mla_fail(ctx, MLA_ERR_OUT_OF_MEMORY, "header", "out of memory");
    return MLA_OK;
}

void mla_st_writer_progress(mla_safetensors_writer *w, mla_progress_fn fn, void *user,
                            int64_t done0, int64_t total)
{
    w->progress = fn;
    w->progress_user = user;
    w->done0 = done0;
    w->total = total;
}

int64_t mla_st_writer_data_bytes(const mla_safetensors_writer *w)
{
    int64_t n = 0;
    for (int64_t i = 0; i < w->count; ++i)
        n += w->entries[i].bytes;
    return n;
}

mla_status mla_safetensors_writer_save(mla_context *ctx, mla_safetensors_writer *w,
                                       const char *path)
{
    if (ctx)
        mla_clear_error(ctx);
    if (!w || !path)
        return mla_fail(ctx, MLA_ERR_NULL_POINTER, !w ? "writer" : "path", "null argument");
    text_buf b = {0};
    mla_status st = build_header(ctx, w, &b);
    if (st != MLA_OK) {
        free(b.p);
        return st;
    }
    FILE *fp = fopen(path, "wb");
    if (!fp) {
        free(b.p);
        return mla_fail(ctx, MLA_ERR_IO, "path", "cannot create '%s'", path);
    }
    unsigned char len[8];
    for (int i = 0; i < 8; ++i)
        len[i] = (unsigned char)((uint64_t)b.len >> (8 * i));
    if (fwrite(len, 1, 8, fp) != 8 || fwrite(b.p, 1, b.len, fp) != b.len)
        st = mla_fail(ctx, MLA_ERR_IO, "path", "cannot write '%s'", path);
    free(b.p);
    int64_t done = 0;
    for (int64_t i = 0; i < w->count && st == MLA_OK; ++i) {
        const wr_entry *e = &w->entries[i];
        if (e->bytes == 0)
            continue;
        void *buf = e->data;
        if (!buf) {
            buf = malloc((size_t)e->bytes);
            if (!buf) {
                st = mla_fail(ctx, MLA_ERR_OUT_OF_MEMORY, e->name, "out of memory");
                break;
            }
            if (e->fill(e->user, e->name, buf, (size_t)e->bytes) != 0)
                st = mla_fail(ctx, MLA_ERR_IO, e->name, "producing tensor '%s' failed", e->name);
        }
        if (st == MLA_OK && fwrite(buf, 1, (size_t)e->bytes, fp) != (size_t)e->bytes)
            st = mla_fail(ctx, MLA_ERR_IO, "path", "cannot write '%s'", path);
        if (buf != e->data)
            free(buf);
        done += e->bytes;
        if (st == MLA_OK && w->progress)
            w->progress(w->progress_user, w->done0 + done, w->total);
    }
    if (fclose(fp) != 0 && st == MLA_OK)
        st = mla_fail(ctx, MLA_ERR_IO, "path", "cannot write '%s'", path);
    if (st != MLA_OK)
        remove(path); /* never leave a truncated file behind */
    return st;
}
