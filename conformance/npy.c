/* .npy reading and writing: the preamble, size checks, and file I/O. The
 * header dict is in npy_header.c. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conformance/npy_internal.h"

void npy_set_err(char *err, size_t errlen, const char *fmt, ...)
{
    if (!err || errlen == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

/* Magic, version and header length. Version 1.0 has a 16-bit length at
 * byte 8; 2.0 (and 3.0, which only allows UTF-8 in the dict) a 32-bit one. */
static mla_status parse_preamble(const unsigned char *p, size_t avail, size_t *pre, size_t *hl,
                                 char *err, size_t errlen)
{
    if (avail < 10 || memcmp(p, "\x93NUMPY", 6) != 0) {
        npy_set_err(err, errlen, "not a .npy file (bad magic or shorter than 10 bytes)");
        return MLA_ERR_FORMAT;
    }
    if (p[6] < 1 || p[6] > 3 || p[7] != 0) {
        npy_set_err(err, errlen, "unsupported .npy version %u.%u", p[6], p[7]);
        return MLA_ERR_FORMAT;
    }
    if (p[6] == 1) {
        *pre = 10;
        *hl = (size_t)p[8] | (size_t)p[9] << 8;
    } else {
        if (avail < 12) {
            npy_set_err(err, errlen, "truncated preamble");
            return MLA_ERR_FORMAT;
        }
        *pre = 12;
        *hl = (size_t)p[8] | (size_t)p[9] << 8 | (size_t)p[10] << 16 | (size_t)p[11] << 24;
    }
    if (*hl == 0 || *hl > MLA_NPY_MAX_HEADER) {
        npy_set_err(err, errlen, "header length %zu out of range", *hl);
        return MLA_ERR_FORMAT;
    }
    return MLA_OK;
}

static mla_status size_mismatch(const mla_npy *a, unsigned long long have, char *err,
                                size_t errlen)
{
    npy_set_err(err, errlen, "data is %llu bytes, the header declares %zu (%s)", have, a->nbytes,
                have < a->nbytes ? "truncated" : "trailing bytes");
    return MLA_ERR_FORMAT;
}

static mla_status alloc_data(mla_npy *a, char *err, size_t errlen)
{
    a->data = NULL;
    if (a->nbytes == 0)
        return MLA_OK;
    a->data = malloc(a->nbytes);
    if (!a->data) {
        npy_set_err(err, errlen, "cannot allocate %zu bytes", a->nbytes);
        return MLA_ERR_OUT_OF_MEMORY;
    }
    return MLA_OK;
}

mla_status mla_npy_parse(const void *buf, size_t len, mla_npy *out, char *err, size_t errlen)
{
    if (!out || (!buf && len))
        return MLA_ERR_NULL_POINTER;
    memset(out, 0, sizeof *out);
    const unsigned char *p = buf;
    size_t pre, hl;
    mla_status st = parse_preamble(p, len, &pre, &hl, err, errlen);
    if (st != MLA_OK)
        return st;
    if (hl > len - pre) {
        npy_set_err(err, errlen, "truncated header");
        return MLA_ERR_FORMAT;
    }
    mla_npy a = {0};
    if ((st = npy_parse_dict((const char *)p + pre, hl, &a, err, errlen)) != MLA_OK)
        return st;
    size_t have = len - pre - hl;
    if (have != a.nbytes)
        return size_mismatch(&a, have, err, errlen);
    if ((st = alloc_data(&a, err, errlen)) != MLA_OK)
        return st;
    if (a.nbytes)
        memcpy(a.data, p + pre + hl, a.nbytes);
    *out = a;
    return MLA_OK;
}

/* Bytes left from the current position to the end; -1 when the stream
 * cannot seek (then the size is checked after reading). */
static long long bytes_left(FILE *f)
{
    long here = ftell(f);
    if (here < 0 || fseek(f, 0, SEEK_END) != 0)
        return -1;
    long end = ftell(f);
    if (end < 0 || fseek(f, here, SEEK_SET) != 0)
        return -1;
    return (long long)end - here;
}

static mla_status read_exact(FILE *f, void *dst, size_t n, const char *what, char *err,
                             size_t errlen)
{
    if (n == 0 || fread(dst, 1, n, f) == n)
        return MLA_OK;
    if (ferror(f)) {
        npy_set_err(err, errlen, "read error in %s: %s", what, strerror(errno));
        return MLA_ERR_IO;
    }
    npy_set_err(err, errlen, "file ends inside the %s", what);
    return MLA_ERR_FORMAT;
}

static mla_status load_stream(FILE *f, mla_npy *a, char *err, size_t errlen)
{
    unsigned char pre_buf[12];
    size_t got = fread(pre_buf, 1, sizeof pre_buf, f), pre, hl;
    if (got < sizeof pre_buf && ferror(f)) {
        npy_set_err(err, errlen, "read error: %s", strerror(errno));
        return MLA_ERR_IO;
    }
    mla_status st = parse_preamble(pre_buf, got, &pre, &hl, err, errlen);
    if (st != MLA_OK)
        return st;
    char *text = malloc(hl);
    if (!text)
        return MLA_ERR_OUT_OF_MEMORY;
    size_t in_pre = got - pre; /* header bytes already read with the preamble */
    if (in_pre > hl)
        in_pre = hl;
    memcpy(text, pre_buf + pre, in_pre);
    st = read_exact(f, text + in_pre, hl - in_pre, "header", err, errlen);
    if (st == MLA_OK)
        st = npy_parse_dict(text, hl, a, err, errlen);
    free(text);
    if (st != MLA_OK)
        return st;
    /* Data bytes already consumed by the 12-byte preamble read (tiny headers). */
    size_t early = got > pre + hl ? got - pre - hl : 0;
    long long left = bytes_left(f);
    if (left >= 0 && (unsigned long long)left + early != a->nbytes)
        return size_mismatch(a, (unsigned long long)left + early, err, errlen);
    if ((st = alloc_data(a, err, errlen)) != MLA_OK)
        return st;
    if (early > a->nbytes)
        early = a->nbytes;
    if (early)
        memcpy(a->data, pre_buf + pre + hl, early);
    /* an empty array has no data pointer to offset */
    st = a->nbytes > early
             ? read_exact(f, (char *)a->data + early, a->nbytes - early, "data", err, errlen)
             : MLA_OK;
    if (st == MLA_OK && getc(f) != EOF)
        st = size_mismatch(a, a->nbytes + 1, err, errlen);
    return st;
}

mla_status mla_npy_load(const char *path, mla_npy *out, char *err, size_t errlen)
{
    if (!path || !out)
        return MLA_ERR_NULL_POINTER;
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "rb");
    if (!f) {
        npy_set_err(err, errlen, "cannot open %s: %s", path, strerror(errno));
        return MLA_ERR_IO;
    }
    mla_npy a = {0};
    mla_status st = load_stream(f, &a, err, errlen);
    fclose(f);
    if (st != MLA_OK) {
        free(a.data);
        return st;
    }
    *out = a;
    return MLA_OK;
}

mla_status mla_npy_save(const char *path, mla_npy_type type, int32_t ndim, const int64_t *shape,
                        const void *data, char *err, size_t errlen)
{
    if (!path)
        return MLA_ERR_NULL_POINTER;
    char header[1024];
    size_t hl;
    mla_status st = mla_npy_header(type, ndim, shape, header, sizeof header, &hl);
    if (st != MLA_OK) {
        npy_set_err(err, errlen, "cannot describe the array (%s)", mla_status_name(st));
        return st;
    }
    mla_npy a = {.type = type, .ndim = ndim};
    if (ndim > 0)
        memcpy(a.shape, shape, sizeof(int64_t) * (size_t)ndim);
    if ((st = npy_sizes(&a, err, errlen)) != MLA_OK)
        return MLA_ERR_OVERFLOW;
    if (a.nbytes && !data)
        return MLA_ERR_NULL_POINTER;
    FILE *f = fopen(path, "wb");
    if (!f) {
        npy_set_err(err, errlen, "cannot create %s: %s", path, strerror(errno));
        return MLA_ERR_IO;
    }
    int ok = fwrite(header, 1, hl, f) == hl;
    ok = ok && (a.nbytes == 0 || fwrite(data, 1, a.nbytes, f) == a.nbytes);
    ok = (fclose(f) == 0) && ok;
    if (!ok) {
        npy_set_err(err, errlen, "write error on %s: %s", path, strerror(errno));
        return MLA_ERR_IO;
    }
    return MLA_OK;
}

void mla_npy_free(mla_npy *a)
{
    if (!a)
        return;
    free(a->data);
    memset(a, 0, sizeof *a);
}
