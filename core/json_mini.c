/* The small JSON reader of core/json_mini.h (RFC 8259 grammar, for the
 * subset it reads). Safetensors headers come from untrusted files: every
 * read is bounded by the cursor's end and nesting is capped. */
#define _POSIX_C_SOURCE 200809L /* newlocale / uselocale: numbers in the C locale */

#include "core/json_mini.h"

#include <locale.h>
#include <stdlib.h>
#include <string.h>

enum { MLA_JSON_MAX_DEPTH = 64 };

void mla_json_skip_ws(mla_json_cursor *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
        ++c->p;
}

char mla_json_peek(mla_json_cursor *c)
{
    mla_json_skip_ws(c);
    return c->p < c->end ? *c->p : '\0';
}

int mla_json_take(mla_json_cursor *c, char ch)
{
    if (mla_json_peek(c) != ch || c->p >= c->end)
        return 0;
    ++c->p;
    return 1;
}

static int hex4(const char *p, unsigned *out)
{
    unsigned v = 0;
    for (int i = 0; i < 4; ++i) {
        char h = p[i];
        v <<= 4;
        if (h >= '0' && h <= '9')
            v |= (unsigned)(h - '0');
        else if (h >= 'a' && h <= 'f')
            v |= (unsigned)(h - 'a' + 10);
        else if (h >= 'A' && h <= 'F')
            v |= (unsigned)(h - 'A' + 10);
        else
            return 0;
    }
    *out = v;
    return 1;
}

static size_t put_utf8(char *dst, unsigned cp)
{
    if (cp < 0x80) {
        dst[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        dst[0] = (char)(0xC0 | (cp >> 6));
        dst[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        dst[0] = (char)(0xE0 | (cp >> 12));
        dst[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        dst[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    dst[0] = (char)(0xF0 | (cp >> 18));
    dst[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    dst[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    dst[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Decodes the escape after a backslash at *pp; advances past it. */
static mla_json_result unescape(const char **pp, const char *end, char *dst, size_t *n)
{
    const char *p = *pp;
    if (p >= end)
        return MLA_JSON_BAD;
    char e = *p++;
    static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
    const char *hit = e ? strchr(from, e) : NULL;
    if (hit) {
        dst[(*n)++] = to[hit - from];
        *pp = p;
        return MLA_JSON_OK;
    }
    if (e != 'u' || end - p < 4)
        return MLA_JSON_BAD;
    unsigned cp;
    if (!hex4(p, &cp))
        return MLA_JSON_BAD;
    p += 4;
    if (cp >= 0xD800 && cp < 0xDC00) { /* a high surrogate needs its low half */
        unsigned lo;
        if (end - p < 6 || p[0] != '\\' || p[1] != 'u' || !hex4(p + 2, &lo) || lo < 0xDC00 ||
            lo > 0xDFFF)
            return MLA_JSON_BAD;
        p += 6;
        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
    } else if (cp >= 0xDC00 && cp < 0xE000) {
        return MLA_JSON_BAD;
    }
    if (cp == 0)
        return MLA_JSON_BAD;
    *n += put_utf8(dst + *n, cp);
    *pp = p;
    return MLA_JSON_OK;
}

mla_json_result mla_json_string(mla_json_cursor *c, char **out)
{
    if (!mla_json_take(c, '"'))
        return MLA_JSON_BAD;
    /* The decoded string is never longer than its escaped form. */
    const char *start = c->p, *q = c->p;
    while (q < c->end && *q != '"')
        q += (*q == '\\' && c->end - q > 1) ? 2 : 1;
    if (q >= c->end)
        return MLA_JSON_BAD;
    char *s = malloc((size_t)(q - start) + 1);
    if (!s)
        return MLA_JSON_NOMEM;
    size_t n = 0;
    const char *p = start;
    while (p < q) {
        unsigned char ch = (unsigned char)*p;
        if (ch < 0x20) { /* control characters must be escaped */
            free(s);
            return MLA_JSON_BAD;
        }
        if (ch == '\\') {
            ++p;
            if (unescape(&p, q, s, &n) != MLA_JSON_OK) {
                free(s);
                return MLA_JSON_BAD;
            }
        } else {
            s[n++] = (char)ch;
            ++p;
        }
    }
    s[n] = '\0';
    c->p = q + 1;
    *out = s;
    return MLA_JSON_OK;
}

mla_json_result mla_json_uint(mla_json_cursor *c, int64_t *out)
{
    mla_json_skip_ws(c);
    const char *p = c->p;
    if (p >= c->end || *p < '0' || *p > '9')
        return MLA_JSON_BAD;
    if (*p == '0' && p + 1 < c->end && p[1] >= '0' && p[1] <= '9')
        return MLA_JSON_BAD; /* no leading zeros in JSON */
    int64_t v = 0;
    while (p < c->end && *p >= '0' && *p <= '9') {
        int d = *p - '0';
        if (v > (INT64_MAX - d) / 10)
            return MLA_JSON_OVERFLOW;
        v = v * 10 + d;
        ++p;
    }
    if (p < c->end && (*p == '.' || *p == 'e' || *p == 'E'))
        return MLA_JSON_BAD;
    c->p = p;
    *out = v;
    return MLA_JSON_OK;
}

static mla_json_result skip_number(mla_json_cursor *c)
{
    const char *p = c->p;
    if (p < c->end && *p == '-')
        ++p;
    const char *digits = p;
    while (p < c->end && ((*p >= '0' && *p <= '9') || *p == '.' || *p == 'e' || *p == 'E' ||
                          *p == '+' || *p == '-'))
        ++p;
    if (p == digits || *digits < '0' || *digits > '9')
        return MLA_JSON_BAD;
    c->p = p;
    return MLA_JSON_OK;
}

static mla_json_result skip_literal(mla_json_cursor *c, const char *word)
{
    size_t n = strlen(word);
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, word, n) != 0)
        return MLA_JSON_BAD;
    c->p += n;
    return MLA_JSON_OK;
}

mla_json_result mla_json_skip(mla_json_cursor *c)
{
    char ch = mla_json_peek(c);
    mla_json_result r = MLA_JSON_OK;
    if (ch == '"') {
        char *s = NULL;
        r = mla_json_string(c, &s);
        free(s);
        return r;
    }
    if (ch == '{' || ch == '[') {
        if (++c->depth > MLA_JSON_MAX_DEPTH)
            return MLA_JSON_BAD;
        char close = ch == '{' ? '}' : ']';
        ++c->p;
        if (!mla_json_take(c, close)) {
            do {
                if (ch == '{') {
                    char *key = NULL;
                    r = mla_json_string(c, &key);
                    free(key);
                    if (r != MLA_JSON_OK)
                        return r;
                    if (!mla_json_take(c, ':'))
                        return MLA_JSON_BAD;
                }
                if ((r = mla_json_skip(c)) != MLA_JSON_OK)
                    return r;
            } while (mla_json_take(c, ','));
            if (!mla_json_take(c, close))
                return MLA_JSON_BAD;
        }
        --c->depth;
        return MLA_JSON_OK;
    }
    if (ch == 't')
        return skip_literal(c, "true");
    if (ch == 'f')
        return skip_literal(c, "false");
    if (ch == 'n')
        return skip_literal(c, "null");
    return skip_number(c);
}

/* ------------------------------------------------------- document tree */

/* RFC 8259's number grammar: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)? */
static mla_json_result parse_number(mla_json_cursor *c, mla_json_value *v)
{
    const char *p = c->p, *e = c->end;
    int integral = 1;
    if (p < e && *p == '-')
        ++p;
    if (p >= e || *p < '0' || *p > '9')
        return MLA_JSON_BAD;
    if (*p == '0')
        ++p;
    else
        while (p < e && *p >= '0' && *p <= '9')
            ++p;
    if (p < e && *p == '.') {
        integral = 0;
        if (++p >= e || *p < '0' || *p > '9')
            return MLA_JSON_BAD;
        while (p < e && *p >= '0' && *p <= '9')
            ++p;
    }
    if (p < e && (*p == 'e' || *p == 'E')) {
        integral = 0;
        ++p;
        if (p < e && (*p == '+' || *p == '-'))
            ++p;
        if (p >= e || *p < '0' || *p > '9')
            return MLA_JSON_BAD;
        while (p < e && *p >= '0' && *p <= '9')
            ++p;
    }
    char buf[512];
    const size_t n = (size_t)(p - c->p);
    if (n >= sizeof buf)
        return MLA_JSON_BAD;
    memcpy(buf, c->p, n);
    buf[n] = '\0';
    /* strtod reads the decimal point of the thread's locale: read in "C". */
    locale_t cl = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
    if (!cl)
        return MLA_JSON_NOMEM;
    locale_t old = uselocale(cl);
    v->number = strtod(buf, NULL);
    uselocale(old);
    freelocale(cl);
    v->type = MLA_JSON_NUMBER;
    v->is_integer = 0;
    if (integral) {
        const char *d = buf + (buf[0] == '-');
        int64_t x = 0;
        int fits = 1;
        for (; *d && fits; ++d) {
            const int dig = *d - '0';
            fits = x <= (INT64_MAX - dig) / 10;
            if (fits)
                x = x * 10 + dig;
        }
        if (fits) {
            v->is_integer = 1;
            v->integer = buf[0] == '-' ? -x : x;
        }
    }
    c->p = p;
    return MLA_JSON_OK;
}

static mla_json_result parse_value(mla_json_cursor *c, mla_json_value *v);

/* Appends one item (and its key) to an array or object under construction. */
static mla_json_result push_item(mla_json_value *v, int64_t *cap, char *key, mla_json_value *item)
{
    if (v->count == *cap) {
        const int64_t ncap = *cap ? 2 * *cap : 8;
        mla_json_value *items = realloc(v->items, (size_t)ncap * sizeof *items);
        if (!items)
            return MLA_JSON_NOMEM;
        v->items = items;
        if (v->type == MLA_JSON_OBJECT) {
            char **keys = realloc(v->keys, (size_t)ncap * sizeof *keys);
            if (!keys)
                return MLA_JSON_NOMEM;
            v->keys = keys;
        }
        *cap = ncap;
    }
    if (v->type == MLA_JSON_OBJECT)
        v->keys[v->count] = key;
    v->items[v->count++] = *item;
    return MLA_JSON_OK;
}

static int by_key(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted copy of the keys, adjacent pairs compared: n log n, so an index
 * of a hundred thousand tensors is checked as fast as it is read. */
static mla_json_result unique_keys(const mla_json_value *v)
{
    if (v->count < 2)
        return MLA_JSON_OK;
    char **k = malloc((size_t)v->count * sizeof *k);
    if (!k)
        return MLA_JSON_NOMEM;
    memcpy(k, v->keys, (size_t)v->count * sizeof *k);
    qsort(k, (size_t)v->count, sizeof *k, by_key);
    mla_json_result r = MLA_JSON_OK;
    for (int64_t i = 1; i < v->count && r == MLA_JSON_OK; ++i)
        if (!strcmp(k[i - 1], k[i]))
            r = MLA_JSON_DUPLICATE;
    free(k);
    return r;
}

static mla_json_result parse_container(mla_json_cursor *c, mla_json_value *v, char open)
{
    const char close = open == '{' ? '}' : ']';
    if (++c->depth > MLA_JSON_MAX_DEPTH)
        return MLA_JSON_BAD;
    ++c->p;
    v->type = open == '{' ? MLA_JSON_OBJECT : MLA_JSON_ARRAY;
    int64_t cap = 0;
    if (!mla_json_take(c, close)) {
        do {
            char *key = NULL;
            mla_json_value item = {0};
            mla_json_result r = MLA_JSON_OK;
            if (v->type == MLA_JSON_OBJECT) {
                r = mla_json_string(c, &key);
                if (r == MLA_JSON_OK && !mla_json_take(c, ':'))
                    r = MLA_JSON_BAD;
            }
            if (r == MLA_JSON_OK)
                r = parse_value(c, &item);
            if (r == MLA_JSON_OK)
                r = push_item(v, &cap, key, &item);
            if (r != MLA_JSON_OK) {
                free(key);
                mla_json_value_free(&item);
                return r;
            }
        } while (mla_json_take(c, ','));
        if (!mla_json_take(c, close))
            return MLA_JSON_BAD;
    }
    --c->depth;
    return v->type == MLA_JSON_OBJECT ? unique_keys(v) : MLA_JSON_OK;
}

static mla_json_result parse_literal(mla_json_cursor *c, const char *word, mla_json_type type, mla_json_value *v)
{
    if (skip_literal(c, word) != MLA_JSON_OK)
        return MLA_JSON_BAD;
    v->type = type;
    return MLA_JSON_OK;
}

static mla_json_result parse_value(mla_json_cursor *c, mla_json_value *v)
{
    memset(v, 0, sizeof *v);
    const char ch = mla_json_peek(c);
    if (ch == '{' || ch == '[')
        return parse_container(c, v, ch);
    if (ch == '"') {
        v->type = MLA_JSON_STRING;
        return mla_json_string(c, &v->string);
    }
    if (ch == 't')
        return parse_literal(c, "true", MLA_JSON_TRUE, v);
    if (ch == 'f')
        return parse_literal(c, "false", MLA_JSON_FALSE, v);
    if (ch == 'n')
        return parse_literal(c, "null", MLA_JSON_NULL, v);
    return parse_number(c, v);
}

mla_json_result mla_json_value_parse(const char *text, size_t len, mla_json_value *out, size_t *err_at)
{
    mla_json_cursor c = {text, text + len, 0};
    mla_json_result r = parse_value(&c, out);
    if (r == MLA_JSON_OK) {
        mla_json_skip_ws(&c);
        if (c.p != c.end)
            r = MLA_JSON_BAD;
    }
    if (r != MLA_JSON_OK) {
        mla_json_value_free(out);
        if (err_at)
            *err_at = (size_t)(c.p - text);
    }
    return r;
}

void mla_json_value_free(mla_json_value *v)
{
    if (!v)
        return;
    for (int64_t i = 0; i < v->count; ++i) {
        mla_json_value_free(&v->items[i]);
        if (v->keys)
            free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
    free(v->string);
    memset(v, 0, sizeof *v);
}

const mla_json_value *mla_json_value_get(const mla_json_value *v, const char *key)
{
    if (!v || v->type != MLA_JSON_OBJECT || !key)
        return NULL;
    for (int64_t i = 0; i < v->count; ++i)
        if (!strcmp(v->keys[i], key))
            return &v->items[i];
    return NULL;
}
