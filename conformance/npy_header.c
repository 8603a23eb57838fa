/* The .npy header: a Python dict literal such as
 *   {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
 * parsed by a small bounded tokenizer (never eval, never unbounded), and
 * written the way NumPy writes it (padded so the data starts at a multiple
 * of 64 bytes). */
#include <stdio.h>
#include <string.h>

#include "conformance/npy_internal.h"

static const struct {
    const char *descr;
    size_t size;
} types[MLA_NPY_TYPE_COUNT] = {
    {"<f4", 4}, {"<f8", 8}, {"<f2", 2}, {"<u2", 2}, {"|u1", 1}, {"|i1", 1}, {"<i4", 4}, {"<i8", 8},
};

const char *mla_npy_type_descr(mla_npy_type type)
{
    return ((int)type >= 0 && type < MLA_NPY_TYPE_COUNT) ? types[type].descr : "?";
}

size_t mla_npy_type_size(mla_npy_type type)
{
    return ((int)type >= 0 && type < MLA_NPY_TYPE_COUNT) ? types[type].size : 0;
}

mla_status mla_npy_type_parse(const char *descr, mla_npy_type *out)
{
    if (!descr || strlen(descr) != 3)
        return MLA_ERR_FORMAT;
    for (int t = 0; t < MLA_NPY_TYPE_COUNT; ++t) {
        const char *d = types[t].descr;
        if (strcmp(descr + 1, d + 1) != 0)
            continue;
        /* Single bytes have no byte order: NumPy writes '|', '<' and '=' mean the same. */
        int ok = descr[0] == d[0] || (types[t].size == 1 && (descr[0] == '<' || descr[0] == '='));
        if (ok) {
            *out = (mla_npy_type)t;
            return MLA_OK;
        }
    }
    return MLA_ERR_FORMAT;
}

typedef struct cursor {
    const char *p, *end;
    char *err;
    size_t errlen;
} cursor;

static mla_status bad(cursor *c, const char *what)
{
    npy_set_err(c->err, c->errlen, "malformed header: %s", what);
    return MLA_ERR_FORMAT;
}

static void skip_ws(cursor *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
        ++c->p;
}

static int accept(cursor *c, char ch)
{
    skip_ws(c);
    if (c->p < c->end && *c->p == ch) {
        ++c->p;
        return 1;
    }
    return 0;
}

/* A quoted string without escapes, at most cap-1 characters. */
static mla_status parse_string(cursor *c, char *buf, size_t cap)
{
    skip_ws(c);
    if (c->p >= c->end || (*c->p != '\'' && *c->p != '"'))
        return bad(c, "expected a quoted string");
    char quote = *c->p++;
    size_t n = 0;
    while (c->p < c->end && *c->p != quote) {
        if (*c->p == '\\' || n + 1 >= cap)
            return bad(c, "string too long or escaped");
        buf[n++] = *c->p++;
    }
    if (c->p >= c->end)
        return bad(c, "unterminated string");
    ++c->p;
    buf[n] = '\0';
    return MLA_OK;
}

static mla_status parse_int(cursor *c, int64_t *out)
{
    skip_ws(c);
    if (c->p >= c->end || *c->p < '0' || *c->p > '9')
        return bad(c, "expected a non-negative integer in shape");
    int64_t v = 0;
    while (c->p < c->end && *c->p >= '0' && *c->p <= '9') {
        int d = *c->p++ - '0';
        if (v > (INT64_MAX - d) / 10)
            return bad(c, "extent does not fit in 64 bits");
        v = v * 10 + d;
    }
    if (c->p < c->end && *c->p == 'L') /* Python 2 NumPy wrote longs as 5L */
        ++c->p;
    *out = v;
    return MLA_OK;
}

/* A tuple of ints: (), (5,), (3, 4), (3, 4,). "(5)" is an int in Python, not a tuple. */
static mla_status parse_shape(cursor *c, mla_npy *a)
{
    if (!accept(c, '('))
        return bad(c, "shape is not a tuple");
    a->ndim = 0;
    if (accept(c, ')'))
        return MLA_OK;
    for (;;) {
        if (a->ndim >= MLA_NPY_MAX_DIMS)
            return bad(c, "too many dimensions");
        mla_status st = parse_int(c, &a->shape[a->ndim++]);
        if (st != MLA_OK)
            return st;
        int comma = accept(c, ',');
        if (accept(c, ')')) {
            if (a->ndim == 1 && !comma)
                return bad(c, "shape '(n)' is not a tuple");
            return MLA_OK;
        }
        if (!comma)
            return bad(c, "expected ',' or ')' in shape");
    }
}

static mla_status parse_bool(cursor *c, int *out)
{
    skip_ws(c);
    size_t left = (size_t)(c->end - c->p);
    if (left >= 4 && memcmp(c->p, "True", 4) == 0) {
        c->p += 4;
        *out = 1;
    } else if (left >= 5 && memcmp(c->p, "False", 5) == 0) {
        c->p += 5;
        *out = 0;
    } else {
        return bad(c, "fortran_order is not True or False");
    }
    return MLA_OK;
}

mla_status npy_parse_dict(const char *text, size_t len, mla_npy *a, char *err, size_t errlen)
{
    cursor c = {text, text + len, err, errlen};
    int seen_descr = 0, seen_order = 0, seen_shape = 0, fortran = 0;
    char descr[16] = "";
    mla_status st;
    for (size_t i = 0; i < len; ++i)
        if ((unsigned char)text[i] < 0x20 && text[i] != '\n' && text[i] != ' ' && text[i] != '\t' &&
            text[i] != '\r')
            return bad(&c, "control character");
    if (!accept(&c, '{'))
        return bad(&c, "does not start with '{'");
    while (!accept(&c, '}')) {
        char key[32];
        if ((st = parse_string(&c, key, sizeof key)) != MLA_OK)
            return st;
        if (!accept(&c, ':'))
            return bad(&c, "expected ':'");
        if (strcmp(key, "descr") == 0 && !seen_descr++) {
            st = parse_string(&c, descr, sizeof descr);
        } else if (strcmp(key, "fortran_order") == 0 && !seen_order++) {
            st = parse_bool(&c, &fortran);
        } else if (strcmp(key, "shape") == 0 && !seen_shape++) {
            st = parse_shape(&c, a);
        } else {
            return bad(&c, "unknown or repeated key");
        }
        if (st != MLA_OK)
            return st;
        if (!accept(&c, ',')) {
            if (!accept(&c, '}'))
                return bad(&c, "expected ',' or '}'");
            break;
        }
    }
    skip_ws(&c);
    if (c.p != c.end)
        return bad(&c, "text after the dict");
    if (!seen_descr || !seen_order || !seen_shape)
        return bad(&c, "missing descr, fortran_order or shape");
    if (fortran) {
        npy_set_err(err, errlen, "fortran_order arrays are not supported (C order only)");
        return MLA_ERR_FORMAT;
    }
    if (mla_npy_type_parse(descr, &a->type) != MLA_OK) {
        npy_set_err(err, errlen,
                    "dtype '%s' is not supported (<f4 <f8 <f2 <u2 |u1 |i1 <i4 <i8, little-endian)",
                    descr);
        return MLA_ERR_FORMAT;
    }
    return npy_sizes(a, err, errlen);
}

mla_status npy_sizes(mla_npy *a, char *err, size_t errlen)
{
    int64_t n = 1;
    for (int32_t i = 0; i < a->ndim; ++i) {
        if (a->shape[i] < 0 || (a->shape[i] != 0 && n > INT64_MAX / a->shape[i])) {
            npy_set_err(err, errlen, "element count overflows 64 bits");
            return MLA_ERR_FORMAT;
        }
        n *= a->shape[i];
    }
    size_t es = mla_npy_type_size(a->type);
    if ((uint64_t)n > (uint64_t)INT64_MAX / es || (uint64_t)n * es > (uint64_t)SIZE_MAX) {
        npy_set_err(err, errlen, "byte size overflows");
        return MLA_ERR_FORMAT;
    }
    a->numel = n;
    a->nbytes = (size_t)n * es;
    return MLA_OK;
}

mla_status mla_npy_header(mla_npy_type type, int32_t ndim, const int64_t *shape, char *buf,
                          size_t cap, size_t *len)
{
    if (!buf || !len || (ndim > 0 && !shape))
        return MLA_ERR_NULL_POINTER;
    if (mla_npy_type_size(type) == 0)
        return MLA_ERR_DTYPE;
    if (ndim < 0 || ndim > MLA_NPY_MAX_DIMS)
        return MLA_ERR_SHAPE;
    char dict[64 + 24 * MLA_NPY_MAX_DIMS];
    int n = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (",
                     mla_npy_type_descr(type));
    for (int32_t i = 0; i < ndim; ++i) {
        if (shape[i] < 0)
            return MLA_ERR_SHAPE;
        n += snprintf(dict + n, sizeof dict - (size_t)n, "%s%lld", i ? ", " : "",
                      (long long)shape[i]);
    }
    n += snprintf(dict + n, sizeof dict - (size_t)n, "%s), }", ndim == 1 ? "," : "");
    /* Version 1.0 has a 16-bit header length; the dict is always far below it. */
    size_t pre = 10, total = pre + (size_t)n + 1;
    total = (total + 63) / 64 * 64;
    if (total > cap)
        return MLA_ERR_OVERFLOW;
    memcpy(buf, "\x93NUMPY\x01\x00", 8);
    size_t hl = total - pre;
    buf[8] = (char)(hl & 0xFF);
    buf[9] = (char)(hl >> 8);
    memcpy(buf + pre, dict, (size_t)n);
    memset(buf + pre + n, ' ', total - pre - (size_t)n - 1);
    buf[total - 1] = '\n';
    *len = total;
    return MLA_OK;
}
