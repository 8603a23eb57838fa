/* Safetensors reading: header parse and validation at open, tensor data
 * read on demand into host or context memory. */
#define _POSIX_C_SOURCE 200809L /* fseeko / ftello: files beyond 2 GiB */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/json_mini.h"
#include "core/safetensors.h"

typedef struct st_entry {
    char *name;
    char file_dtype[12];
    mla_dtype dtype;
    int32_t ndim;
    int64_t shape[MLA_MAX_DIMS];
    int64_t begin, end; /* relative to the data section */
} st_entry;

struct mla_safetensors {
    FILE *fp;
    int64_t bytes_read; /* headers included: what loading a layer really read */
    int64_t data_start, data_bytes;
    int64_t count, cap;
    st_entry *entries;
    int64_t meta_count, meta_cap;
    char **meta; /* key, value pairs */
};

static const struct {
    const char *name;
    mla_dtype dtype;
} dtype_table[] = {
    {"F64", MLA_DTYPE_F64},
    {"F32", MLA_DTYPE_F32},
    {"F16", MLA_DTYPE_F16},
    {"BF16", MLA_DTYPE_BF16},
    {"F8_E4M3", MLA_DTYPE_FP8_E4M3FN},
    {"F8_E8M0", MLA_DTYPE_E8M0},
    {"U8", MLA_DTYPE_U8},
    {"I8", MLA_DTYPE_U8},
    {"I32", MLA_DTYPE_I32},
    {"I64", MLA_DTYPE_I64},
};
enum { DTYPE_TABLE_LEN = sizeof dtype_table / sizeof dtype_table[0] };

int mla_st_dtype_parse(const char *s, mla_dtype *out)
{
    for (int i = 0; i < DTYPE_TABLE_LEN; ++i)
        if (!strcmp(s, dtype_table[i].name)) {
            *out = dtype_table[i].dtype;
            return 1;
        }
    return 0;
}

const char *mla_st_dtype_string(mla_dtype dtype)
{
    switch (dtype) {
    case MLA_DTYPE_F64:
        return "F64";
    case MLA_DTYPE_F32:
        return "F32";
    case MLA_DTYPE_F16:
        return "F16";
    case MLA_DTYPE_BF16:
        return "BF16";
    case MLA_DTYPE_FP8_E4M3FN:
        return "F8_E4M3";
    /* Quark stores packed fp4 and e8m0 scales as plain bytes. */
    case MLA_DTYPE_U8:
    case MLA_DTYPE_E8M0:
    case MLA_DTYPE_FP4X2:
        return "U8";
    case MLA_DTYPE_I32:
        return "I32";
    case MLA_DTYPE_I64:
        return "I64";
    default:
        return NULL;
    }
}

mla_status mla_st_bytes(mla_dtype dtype, int32_t ndim, const int64_t *shape, int64_t *bytes)
{
    if (ndim < 0 || ndim > MLA_MAX_DIMS)
        return MLA_ERR_SHAPE;
    int64_t n = (int64_t)mla_dtype_size(dtype);
    for (int32_t d = 0; d < ndim; ++d) {
        if (shape[d] < 0)
            return MLA_ERR_SHAPE;
        if (shape[d] != 0 && n > INT64_MAX / shape[d])
            return MLA_ERR_OVERFLOW;
        n *= shape[d];
    }
    *bytes = n;
    return MLA_OK;
}

void mla_safetensors_close(mla_safetensors *f)
{
    if (!f)
        return;
    if (f->fp)
        fclose(f->fp);
    for (int64_t i = 0; i < f->count; ++i)
        free(f->entries[i].name);
    free(f->entries);
    for (int64_t i = 0; i < 2 * f->meta_count; ++i)
        free(f->meta[i]);
    free(f->meta);
    free(f);
}

/* Grows an array of elem-byte items to hold one more. */
static int grow(void **arr, int64_t *cap, int64_t count, size_t elem)
{
    if (count < *cap)
        return 1;
    int64_t ncap = *cap ? *cap * 2 : 16;
    void *p = realloc(*arr, (size_t)ncap * elem);
    if (!p)
        return 0;
    *arr = p;
    *cap = ncap;
    return 1;
}

/* param names the refused part: "header", "__metadata__" or a tensor. */
static mla_status json_fail(mla_context *ctx, mla_json_result r, const char *param,
                            const char *what)
{
    if (r == MLA_JSON_NOMEM)
        return mla_fail(ctx, MLA_ERR_OUT_OF_MEMORY, param, "out of memory reading %s", what);
    if (r == MLA_JSON_OVERFLOW)
        return mla_fail(ctx, MLA_ERR_OVERFLOW, param, "%s: an integer beyond int64", what);
    return mla_fail(ctx, MLA_ERR_FORMAT, param, "malformed JSON in %s", what);
}

static mla_status parse_metadata(mla_context *ctx, mla_safetensors *f, mla_json_cursor *c)
{
    if (!mla_json_take(c, '{'))
        return mla_fail(ctx, MLA_ERR_FORMAT, "__metadata__", "__metadata__ is not an object");
    if (mla_json_take(c, '}'))
        return MLA_OK;
    do {
        char *k = NULL, *v = NULL;
        mla_json_result r = mla_json_string(c, &k);
        if (r == MLA_JSON_OK && !mla_json_take(c, ':'))
            r = MLA_JSON_BAD;
        if (r == MLA_JSON_OK)
            r = mla_json_string(c, &v); /* safetensors: metadata values are strings */
        if (r == MLA_JSON_OK &&
            !grow((void **)&f->meta, &f->meta_cap, 2 * f->meta_count + 1, sizeof *f->meta))
            r = MLA_JSON_NOMEM;
        if (r != MLA_JSON_OK) {
            free(k);
            free(v);
            return json_fail(ctx, r, "__metadata__", "__metadata__");
        }
        f->meta[2 * f->meta_count] = k;
        f->meta[2 * f->meta_count + 1] = v;
        ++f->meta_count;
    } while (mla_json_take(c, ','));
    if (!mla_json_take(c, '}'))
        return json_fail(ctx, MLA_JSON_BAD, "__metadata__", "__metadata__");
    return MLA_OK;
}

/* An array of non-negative integers, at most max of them. */
static mla_json_result parse_uint_array(mla_json_cursor *c, int64_t *vals, int32_t max, int32_t *n)
{
    *n = 0;
    if (!mla_json_take(c, '['))
        return MLA_JSON_BAD;
    if (mla_json_take(c, ']'))
        return MLA_JSON_OK;
    do {
        int64_t v;
        mla_json_result r = mla_json_uint(c, &v);
        if (r != MLA_JSON_OK)
            return r;
        if (*n >= max)
            return MLA_JSON_BAD;
        vals[(*n)++] = v;
    } while (mla_json_take(c, ','));
    return mla_json_take(c, ']') ? MLA_JSON_OK : MLA_JSON_BAD;
}

/* One tensor's {dtype, shape, data_offsets}; e->name is set. */
static mla_status parse_entry(mla_context *ctx, mla_json_cursor *c, st_entry *e)
{
    const char *nm = e->name;
    int have_dtype = 0, have_shape = 0, have_offsets = 0;
    if (!mla_json_take(c, '{'))
        return mla_fail(ctx, MLA_ERR_FORMAT, nm, "tensor '%s': entry is not an object", nm);
    if (!mla_json_take(c, '}')) {
        do {
            char *key = NULL;
            mla_json_result r = mla_json_string(c, &key);
            if (r == MLA_JSON_OK && !mla_json_take(c, ':'))
                r = MLA_JSON_BAD;
            if (r == MLA_JSON_OK && !strcmp(key, "dtype")) {
                char *s = NULL;
                r = mla_json_string(c, &s);
                if (r == MLA_JSON_OK && !mla_st_dtype_parse(s, &e->dtype)) {
                    mla_status st = mla_fail(ctx, MLA_ERR_DTYPE, nm,
                                             "tensor '%s': unknown dtype '%.16s'", nm, s);
                    free(s);
                    free(key);
                    return st;
                }
                if (r == MLA_JSON_OK)
                    snprintf(e->file_dtype, sizeof e->file_dtype, "%s", s);
                free(s);
                have_dtype = 1;
            } else if (r == MLA_JSON_OK && !strcmp(key, "shape")) {
                int32_t n = 0;
                r = parse_uint_array(c, e->shape, MLA_MAX_DIMS, &n);
                e->ndim = n;
                have_shape = 1;
            } else if (r == MLA_JSON_OK && !strcmp(key, "data_offsets")) {
                int64_t off[2];
                int32_t n = 0;
                r = parse_uint_array(c, off, 2, &n);
                if (r == MLA_JSON_OK && n != 2)
                    r = MLA_JSON_BAD;
                e->begin = off[0];
                e->end = off[1];
                have_offsets = 1;
            } else if (r == MLA_JSON_OK) {
                r = mla_json_skip(c); /* fields a later format version may add */
            }
            free(key);
            if (r != MLA_JSON_OK) {
                if (r != MLA_JSON_BAD)
                    return json_fail(ctx, r, nm, "a tensor entry");
                return mla_fail(ctx, MLA_ERR_FORMAT, nm,
                                "tensor '%s': malformed entry (or more than %d dims)", nm,
                                MLA_MAX_DIMS);
            }
        } while (mla_json_take(c, ','));
        if (!mla_json_take(c, '}'))
            return mla_fail(ctx, MLA_ERR_FORMAT, nm, "tensor '%s': malformed entry", nm);
    }
    if (!have_dtype || !have_shape || !have_offsets)
        return mla_fail(ctx, MLA_ERR_FORMAT, nm, "tensor '%s': missing %s", nm,
                        !have_dtype   ? "dtype"
                        : !have_shape ? "shape"
                                      : "data_offsets");
    int64_t bytes;
    mla_status st = mla_st_bytes(e->dtype, e->ndim, e->shape, &bytes);
    if (st != MLA_OK)
        return mla_fail(ctx, st, nm, "tensor '%s': its size overflows 64 bits", nm);
    if (e->end < e->begin)
        return mla_fail(ctx, MLA_ERR_FORMAT, nm, "tensor '%s': data_offsets end before begin", nm);
    if (e->end - e->begin != bytes)
        return mla_fail(ctx, MLA_ERR_SHAPE, nm,
                        "tensor '%s': data_offsets span %lld bytes, shape and dtype need %lld", nm,
                        (long long)(e->end - e->begin), (long long)bytes);
    return MLA_OK;
}

static mla_status parse_header(mla_context *ctx, mla_safetensors *f, const char *text, int64_t len)
{
    mla_json_cursor c = {text, text + len, 0};
    if (!mla_json_take(&c, '{'))
        return mla_fail(ctx, MLA_ERR_FORMAT, "header", "the header is not a JSON object");
    if (!mla_json_take(&c, '}')) {
        do {
            char *name = NULL;
            mla_json_result r = mla_json_string(&c, &name);
            if (r == MLA_JSON_OK && !mla_json_take(&c, ':'))
                r = MLA_JSON_BAD;
            if (r != MLA_JSON_OK) {
                free(name);
                return json_fail(ctx, r, "header", "the header");
            }
            mla_status st;
            if (!*name) {
                free(name);
                return mla_fail(ctx, MLA_ERR_FORMAT, "header",
                                "tensor %lld of the header has an empty name",
                                (long long)f->count);
            }
            if (!strcmp(name, "__metadata__")) {
                free(name);
                st = parse_metadata(ctx, f, &c);
            } else if (!grow((void **)&f->entries, &f->cap, f->count, sizeof *f->entries)) {
                free(name);
                st = mla_fail(ctx, MLA_ERR_OUT_OF_MEMORY, "header", "out of memory");
            } else {
                st_entry *e = &f->entries[f->count++];
                memset(e, 0, sizeof *e);
                e->name = name;
                st = parse_entry(ctx, &c, e);
            }
            if (st != MLA_OK)
                return st;
        } while (mla_json_take(&c, ','));
        if (!mla_json_take(&c, '}'))
            return json_fail(ctx, MLA_JSON_BAD, "header", "the header");
    }
    mla_json_skip_ws(&c); /* writers pad the header with spaces */
    if (c.p != c.end)
        return mla_fail(ctx, MLA_ERR_FORMAT, "header", "bytes after the header's JSON object");
    return MLA_OK;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const st_entry *)a)->name, ((const st_entry *)b)->name);
}

static int by_begin(const void *a, const void *b)
{
    const st_entry *x = a, *y = b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

/* Names are unique; the tensors tile the data section exactly (no overlap,
 * no hole, nothing past its end), as safetensors requires. Sorts copies. */
static mla_status check_layout(mla_context *ctx, const mla_safetensors *f)
{
    if (f->count == 0)
        return f->data_bytes == 0
                   ? MLA_OK
                   : mla_fail(ctx, MLA_ERR_FORMAT, "header", "%lld data bytes but no tensor",
                              (long long)f->data_bytes);
    st_entry *tmp = malloc((size_t)f->count * sizeof *tmp);
    if (!tmp)
        return mla_fail(ctx, MLA_ERR_OUT_OF_MEMORY, "header", "out of memory");
    memcpy(tmp, f->entries, (size_t)f->count * sizeof *tmp);
    mla_status st = MLA_OK;
    qsort(tmp, (size_t)f->count, sizeof *tmp, by_name);
    for (int64_t i = 1; i < f->count && st == MLA_OK; ++i)
        if (!strcmp(tmp[i - 1].name, tmp[i].name))
            st = mla_fail(ctx, MLA_ERR_FORMAT, tmp[i].name, "tensor '%s' appears twice",
                          tmp[i].name);
    qsort(tmp, (size_t)f->count, sizeof *tmp, by_begin);
    int64_t at = 0;
    for (int64_t i = 0; i < f->count && st == MLA_OK; ++i) {
        const st_entry *e = &tmp[i];
        if (e->end > f->data_bytes)
            st = mla_fail(ctx, MLA_ERR_FORMAT, e->name,
                          "tensor '%s': data_offsets end %lld beyond the %lld data bytes", e->name,
                          (long long)e->end, (long long)f->data_bytes);
        else if (e->begin < at)
            st = mla_fail(ctx, MLA_ERR_FORMAT, e->name, "tensor '%s' overlaps another tensor",
                          e->name);
        else if (e->begin > at)
            st = mla_fail(ctx, MLA_ERR_FORMAT, e->name, "a hole before tensor '%s'", e->name);
        at = e->end;
    }
    if (st == MLA_OK && at != f->data_bytes)
        st = mla_fail(ctx, MLA_ERR_FORMAT, "header", "%lld data bytes after the last tensor",
                      (long long)(f->data_bytes - at));
    free(tmp);
    return st;
}

static mla_status read_at(mla_context *ctx, mla_safetensors *f, int64_t offset, void *dst,
                          size_t bytes, const char *what)
{
    if (bytes == 0)
        return MLA_OK;
    if (fseeko(f->fp, (off_t)offset, SEEK_SET) != 0 || fread(dst, 1, bytes, f->fp) != bytes)
        return mla_fail(ctx, MLA_ERR_IO, what, "could not read %zu bytes of '%s'", bytes, what);
    f->bytes_read += (int64_t)bytes;
    return MLA_OK;
}

mla_status mla_st_read_at(mla_context *ctx, mla_safetensors *f, int64_t offset, void *dst,
                          size_t bytes, const char *what)
{
    return read_at(ctx, f, offset, dst, bytes, what);
}

int64_t mla_safetensors_bytes_read(const mla_safetensors *f)
{
    return f ? f->bytes_read : 0;
}

mla_status mla_safetensors_open(mla_context *ctx, const char *path, mla_safetensors **out)
{
    if (ctx)
        mla_clear_error(ctx);
    if (!path || !out)
        return mla_fail(ctx, MLA_ERR_NULL_POINTER, path ? "out" : "path", "null argument");
    mla_safetensors *f = calloc(1, sizeof *f);
    if (!f)
        return mla_fail(ctx, MLA_ERR_OUT_OF_MEMORY, "file", "out of memory");
    mla_status st = MLA_OK;
    char *text = NULL;
    f->fp = fopen(path, "rb");
    if (!f->fp) {
        st = mla_fail(ctx, MLA_ERR_IO, "path", "cannot open '%s'", path);
        goto done;
    }
    struct stat sb;
    const int stat_ok = fstat(fileno(f->fp), &sb) == 0;
    if (!stat_ok || !S_ISREG(sb.st_mode)) {
        st = mla_fail(ctx, MLA_ERR_IO, "path", "'%s' is %s", path,
                      !stat_ok               ? "not stat-able"
                      : S_ISDIR(sb.st_mode) ? "a directory (a checkpoint: mla_checkpoint_open)"
                                            : "not a regular file");
        goto done;
    }
    int64_t size = -1;
    if (fseeko(f->fp, 0, SEEK_END) == 0)
        size = (int64_t)ftello(f->fp);
    if (size < 0) {
        st = mla_fail(ctx, MLA_ERR_IO, "path", "cannot size '%s'", path);
        goto done;
    }
    unsigned char lenbuf[8];
    if (size < 8) {
        st = mla_fail(ctx, MLA_ERR_FORMAT, "header", "'%s' is %lld bytes: no header length", path,
                      (long long)size);
        goto done;
    }
    if ((st = read_at(ctx, f, 0, lenbuf, 8, "header length")) != MLA_OK)
        goto done;
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i)
        n = n << 8 | lenbuf[i];
    if (n > (uint64_t)(size - 8) || n > (uint64_t)MLA_ST_MAX_HEADER) {
        st = mla_fail(ctx, MLA_ERR_FORMAT, "header",
                      "header length %llu beyond the file (%lld bytes) or the 100 MB limit",
                      (unsigned long long)n, (long long)size);
        goto done;
    }
    f->data_start = 8 + (int64_t)n;
    f->data_bytes = size - f->data_start;
    text = malloc(n ? (size_t)n : 1);
    if (!text) {
        st = mla_fail(ctx, MLA_ERR_OUT_OF_MEMORY, "header", "out of memory");
        goto done;
    }
    if ((st = read_at(ctx, f, 8, text, (size_t)n, "header")) != MLA_OK)
        goto done;
    if ((st = parse_header(ctx, f, text, (int64_t)n)) != MLA_OK)
        goto done;
    st = check_layout(ctx, f);
done:
    free(text);
    if (st != MLA_OK) {
        mla_safetensors_close(f);
        return st;
    }
    *out = f;
    return MLA_OK;
}

int64_t mla_safetensors_count(const mla_safetensors *f)
{
    return f ? f->count : 0;
}

static void fill_info(const mla_safetensors *f, const st_entry *e, mla_safetensors_info *out)
{
    memset(out, 0, sizeof *out);
    out->name = e->name;
    memcpy(out->file_dtype, e->file_dtype, sizeof out->file_dtype);
    out->dtype = e->dtype;
    out->ndim = e->ndim;
    memcpy(out->shape, e->shape, sizeof out->shape);
    out->offset = f->data_start + e->begin;
    out->bytes = e->end - e->begin;
}

mla_status mla_safetensors_info_at(const mla_safetensors *f, int64_t index,
                                   mla_safetensors_info *out)
{
    if (!f || !out)
        return MLA_ERR_NULL_POINTER;
    if (index < 0 || index >= f->count)
        return MLA_ERR_OUT_OF_RANGE;
    fill_info(f, &f->entries[index], out);
    return MLA_OK;
}

static const st_entry *lookup(const mla_safetensors *f, const char *name)
{
    /* Linear: a layer has about twenty tensors and a shard a few thousand;
     * lookups are per load, not per token. */
    for (int64_t i = 0; i < f->count; ++i)
        if (!strcmp(f->entries[i].name, name))
            return &f->entries[i];
    return NULL;
}

int mla_safetensors_has(const mla_safetensors *f, const char *name)
{
    return f && name && lookup(f, name) != NULL;
}

mla_status mla_safetensors_find(mla_context *ctx, const mla_safetensors *f, const char *name,
                                mla_safetensors_info *out)
{
    if (!f || !name || !out)
        return mla_fail(ctx, MLA_ERR_NULL_POINTER,
                        !f      ? "file"
                        : !name ? "name"
                                : "out",
                        "null argument");
    const st_entry *e = lookup(f, name);
    if (!e)
        return mla_fail(ctx, MLA_ERR_FORMAT, name, "the file has no tensor '%s'", name);
    fill_info(f, e, out);
    return MLA_OK;
}

const char *mla_safetensors_metadata(const mla_safetensors *f, const char *key)
{
    if (!f || !key)
        return NULL;
    for (int64_t i = 0; i < f->meta_count; ++i)
        if (!strcmp(f->meta[2 * i], key))
            return f->meta[2 * i + 1];
    return NULL;
}

static int byte_dtype(mla_dtype d)
{
    return d == MLA_DTYPE_U8 || d == MLA_DTYPE_E8M0 || d == MLA_DTYPE_FP4X2;
}

mla_status mla_safetensors_read(mla_context *ctx, mla_safetensors *f, const char *name,
                                mla_tensor *dst)
{
    if (!f || !name || !dst)
        return mla_fail(ctx, MLA_ERR_NULL_POINTER,
                        !f      ? "file"
                        : !name ? "name"
                                : "dst",
                        "null argument");
    const st_entry *e = lookup(f, name);
    if (!e)
        return mla_fail(ctx, MLA_ERR_FORMAT, name, "the file has no tensor '%s'", name);
    if (dst->dtype != e->dtype && !(byte_dtype(dst->dtype) && byte_dtype(e->dtype)))
        return mla_fail(ctx, MLA_ERR_DTYPE, name, "tensor '%s' is %s, dst is %s", name,
                        e->file_dtype, mla_dtype_name(dst->dtype));
    int same = dst->ndim == e->ndim;
    for (int32_t d = 0; same && d < e->ndim; ++d)
        same = dst->shape[d] == e->shape[d];
    if (!same)
        return mla_fail(ctx, MLA_ERR_SHAPE, name, "dst's shape is not that of tensor '%s'", name);
    if (!mla_tensor_is_contiguous(dst))
        return mla_fail(ctx, MLA_ERR_STRIDE, "dst.stride", "dst must be contiguous");
    size_t bytes = (size_t)(e->end - e->begin);
    if (bytes && !dst->data)
        return mla_fail(ctx, MLA_ERR_NULL_POINTER, "dst.data", "null data");
    int64_t at = f->data_start + e->begin;
    if (dst->memory == MLA_MEMORY_HOST)
        return read_at(ctx, f, at, dst->data, bytes, name);
    if (!ctx || mla_context_memory(ctx) != dst->memory)
        return mla_fail(ctx, MLA_ERR_WRONG_DEVICE, "dst.memory",
                        "dst is %s memory; the context cannot reach it",
                        mla_memory_name(dst->memory));
    /* Device memory: through a bounded host buffer, so a large tensor never
     * needs its full size twice. */
    size_t chunk = bytes < ((size_t)16 << 20) ? bytes : ((size_t)16 << 20);
    unsigned char *buf = malloc(chunk ? chunk : 1);
    if (!buf)
        return mla_fail(ctx, MLA_ERR_OUT_OF_MEMORY, name, "out of memory");
    mla_status st = MLA_OK;
    for (size_t done = 0; done < bytes && st == MLA_OK; done += chunk) {
        size_t n = bytes - done < chunk ? bytes - done : chunk;
        st = read_at(ctx, f, at + (int64_t)done, buf, n, name);
        if (st == MLA_OK)
            st = mla_memcpy(ctx, (unsigned char *)dst->data + done, buf, n,
                            MLA_COPY_HOST_TO_CONTEXT);
    }
    free(buf);
    return st;
}
