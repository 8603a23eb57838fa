/* The small JSON reader of core/json_mini.h (RFC 8259 grammar, for the
 * subset it reads). Safetensors headers come from untrusted files: every
 * read is bounded by the cursor's end and nesting is capped. */
#define _POSIX_C_SOURCE 200809L /* newlocale / uselocale: numbers in the C locale */

#include "core/json_mini.h"

#include <locale.h>
#include <stdlib.h>
#include <string.h>

enum { JSON_MAX_DEPTH = 64 };

void json_skip_ws(json_cursor *c)
{
    while (c->p < c->end && (*c->p == ' ' || *c->p == '\t' || *c->p == '\n' || *c->p == '\r'))
        ++c->p;
}

char json_peek(json_cursor *c)
{
    json_skip_ws(c);
    return c->p < c->end ? *c->p : '\0';
}

int json_take(json_cursor *c, char ch)
{
    if (json_peek(c) != ch || c->p >= c->end)
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
static json_result unescape(const char **pp, const char *end, char *dst, size_t *n)
{
    const char *p = *pp;
    if (p >= end)
        return JSON_BAD;
    char e = *p++;
    static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
    const char *hit = e ? strchr(from, e) : NULL;
    if (hit) {
        dst[(*n)++] = to[hit - from];
        *pp = p;
        return JSON_OK;
    }
    if (e != 'u' || end - p < 4)
        return JSON_BAD;
    unsigned cp;
    if (!hex4(p, &cp))
        return JSON_BAD;
    p += 4;
    if (cp >= 0xD800 && cp < 0xDC00) { /* a high surrogate needs its low half */
        unsigned lo;
        if (end - p < 6 || p[0] != '\\' || p[1] != 'u' || !hex4(p + 2, &lo) || lo < 0xDC00 ||
            lo > 0xDFFF)
            return JSON_BAD;
        p += 6;
        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
    } else if (cp >= 0xDC00 && cp < 0xE000) {
        return JSON_BAD;
    }
    if (cp == 0)
        return JSON_BAD;
    *n += put_utf8(dst + *n, cp);
    *pp = p;
    return JSON_OK;
}

json_result json_string(json_cursor *c, char **out)
{
    if (!json_take(c, '"'))
        return JSON_BAD;
    /* The decoded string is never longer than its escaped form. */
    const char *start = c->p, *q = c->p;
    while (q < c->end && *q != '"')
        q += (*q == '\\' && c->end - q > 1) ? 2 : 1;
    if (q >= c->end)
        return JSON_BAD;
    char *s = malloc((size_t)(q - start) + 1);
    if (!s)
        return JSON_NOMEM;
    size_t n = 0;
    const char *p = start;
    while (p < q) {
        unsigned char ch = (unsigned char)*p;
        if (ch < 0x20) { /* control characters must be escaped */
            free(s);
            return JSON_BAD;
        }
        if (ch == '\\') {
            ++p;
            if (unescape(&p, q, s, &n) != JSON_OK) {
                free(s);
                return JSON_BAD;
            }
        } else {
            s[n++] = (char)ch;
            ++p;
        }
    }
    s[n] = '\0';
    c->p = q + 1;
    *out = s;
    return JSON_OK;
}

json_result json_uint(json_cursor *c, int64_t *out)
{
    json_skip_ws(c);
    const char *p = c->p;
    if (p >= c->end || *p < '0' || *p > '9')
        return JSON_BAD;
    if (*p == '0' && p + 1 < c->end && p[1] >= '0' && p[1] <= '9')
        return JSON_BAD; /* no leading zeros in JSON */
    int64_t v = 0;
    while (p < c->end && *p >= '0' && *p <= '9') {
        int d = *p - '0';
        if (v > (INT64_MAX - d) / 10)
            return JSON_OVERFLOW;
        v = v * 10 + d;
        ++p;
    }
    if (p < c->end && (*p == '.' || *p == 'e' || *p == 'E'))
        return JSON_BAD;
    c->p = p;
    *out = v;
    return JSON_OK;
}

static json_result skip_number(json_cursor *c)
{
    const char *p = c->p;
    if (p < c->end && *p == '-')
        ++p;
    const char *digits = p;
    while (p < c->end && ((*p >= '0' && *p <= '9') || *p == '.' || *p == 'e' || *p == 'E' ||
                          *p == '+' || *p == '-'))
        ++p;
    if (p == digits || *digits < '0' || *digits > '9')
        return JSON_BAD;
    c->p = p;
    return JSON_OK;
}

static json_result skip_literal(json_cursor *c, const char *word)
{
    size_t n = strlen(word);
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, word, n) != 0)
        return JSON_BAD;
    c->p += n;
    return JSON_OK;
}

json_result json_skip(json_cursor *c)
{
    char ch = json_peek(c);
    json_result r = JSON_OK;
    if (ch == '"') {
        char *s = NULL;
        r = json_string(c, &s);
        free(s);
        return r;
    }
    if (ch == '{' || ch == '[') {
        if (++c->depth > JSON_MAX_DEPTH)
            return JSON_BAD;
        char close = ch == '{' ? '}' : ']';
        ++c->p;
        if (!json_take(c, close)) {
            do {
                if (ch == '{') {
                    char *key = NULL;
                    r = json_string(c, &key);
                    free(key);
                    if (r != JSON_OK)
                        return r;
                    if (!json_take(c, ':'))
                        return JSON_BAD;
                }
                if ((r = json_skip(c)) != JSON_OK)
                    return r;
            } while (json_take(c, ','));
            if (!json_take(c, close))
                return JSON_BAD;
        }
        --c->depth;
        return JSON_OK;
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
static json_result parse_number(json_cursor *c, json_value *v)
{
    const char *p = c->p, *e = c->end;
    int integral = 1;
    if (p < e && *p == '-')
        ++p;
    if (p >= e || *p < '0' || *p > '9')
        return JSON_BAD;
    if (*p == '0')
        ++p;
    else
        while (p < e && *p >= '0' && *p <= '9')
            ++p;
    if (p < e && *p == '.') {
        integral = 0;
        if (++p >= e || *p < '0' || *p > '9')
            return JSON_BAD;
        while (p < e && *p >= '0' && *p <= '9')
            ++p;
    }
    if (p < e && (*p == 'e' || *p == 'E')) {
        integral = 0;
        ++p;
        if (p < e && (*p == '+' || *p == '-'))
            ++p;
        if (p >= e || *p < '0' || *p > '9')
            return JSON_BAD;
        while (p < e && *p >= '0' && *p <= '9')
            ++p;
    }
    char buf[512];
    const size_t n = (size_t)(p - c->p);
    if (n >= sizeof buf)
        return JSON_BAD;
    memcpy(buf, c->p, n);
    buf[n] = '\0';
    /* strtod reads the decimal point of the thread's locale: read in "C". */
    locale_t cl = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
    if (!cl)
        return JSON_NOMEM;
    locale_t old = uselocale(cl);
    v->number = strtod(buf, NULL);
    uselocale(old);
    freelocale(cl);
    v->type = JSON_NUMBER;
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
    return JSON_OK;
}

static json_result parse_value(json_cursor *c, json_value *v);

/* Appends one item (and its key) to an array or object under construction. */
static json_result push_item(json_value *v, int64_t *cap, char *key, json_value *item)
{
    if (v->count == *cap) {
        const int64_t ncap = *cap ? 2 * *cap : 8;
        json_value *items = realloc(v->items, (size_t)ncap * sizeof *items);
        if (!items)
            return JSON_NOMEM;
        v->items = items;
        if (v->type == JSON_OBJECT) {
            char **keys = realloc(v->keys, (size_t)ncap * sizeof *keys);
            if (!keys)
                return JSON_NOMEM;
            v->keys = keys;
        }
        *cap = ncap;
    }
    if (v->type == JSON_OBJECT)
        v->keys[v->count] = key;
    v->items[v->count++] = *item;
    return JSON_OK;
}

static int by_key(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Sorted copy of the keys, adjacent pairs compared: n log n, so an index
 * of a hundred thousand tensors is checked as fast as it is read. */
static json_result unique_keys(const json_value *v)
{
    if (v->count < 2)
        return JSON_OK;
    char **k = malloc((size_t)v->count * sizeof *k);
    if (!k)
        return JSON_NOMEM;
    memcpy(k, v->keys, (size_t)v->count * sizeof *k);
    qsort(k, (size_t)v->count, sizeof *k, by_key);
    json_result r = JSON_OK;
    for (int64_t i = 1; i < v->count && r == JSON_OK; ++i)
        if (!strcmp(k[i - 1], k[i]))
            r = JSON_DUPLICATE;
    free(k);
    return r;
}

static json_result parse_container(json_cursor *c, json_value *v, char open)
{
    const char close = open == '{' ? '}' : ']';
    if (++c->depth > JSON_MAX_DEPTH)
        return JSON_BAD;
    ++c->p;
    v->type = open == '{' ? JSON_OBJECT : JSON_ARRAY;
    int64_t cap = 0;
    if (!json_take(c, close)) {
        do {
            char *key = NULL;
            json_value item = {0};
            json_result r = JSON_OK;
            if (v->type == JSON_OBJECT) {
                r = json_string(c, &key);
                if (r == JSON_OK && !json_take(c, ':'))
                    r = JSON_BAD;
            }
            if (r == JSON_OK)
                r = parse_value(c, &item);
            if (r == JSON_OK)
                r = push_item(v, &cap, key, &item);
            if (r != JSON_OK) {
                free(key);
                json_value_free(&item);
                return r;
            }
        } while (json_take(c, ','));
        if (!json_take(c, close))
            return JSON_BAD;
    }
    --c->depth;
    return v->type == JSON_OBJECT ? unique_keys(v) : JSON_OK;
}

static json_result parse_literal(json_cursor *c, const char *word, json_type type, json_value *v)
{
    if (skip_literal(c, word) != JSON_OK)
        return JSON_BAD;
    v->type = type;
    return JSON_OK;
}

static json_result parse_value(json_cursor *c, json_value *v)
{
    memset(v, 0, sizeof *v);
    const char ch = json_peek(c);
    if (ch == '{' || ch == '[')
        return parse_container(c, v, ch);
    if (ch == '"') {
        v->type = JSON_STRING;
        return json_string(c, &v->string);
    }
    if (ch == 't')
        return parse_literal(c, "true", JSON_TRUE, v);
    if (ch == 'f')
        return parse_literal(c, "false", JSON_FALSE, v);
    if (ch == 'n')
        return parse_literal(c, "null", JSON_NULL, v);
    return parse_number(c, v);
}

json_result json_value_parse(const char *text, size_t len, json_value *out, size_t *err_at)
{
    json_cursor c = {text, text + len, 0};
    json_result r = parse_value(&c, out);
    if (r == JSON_OK) {
        json_skip_ws(&c);
        if (c.p != c.end)
            r = JSON_BAD;
    }
    if (r != JSON_OK) {
        json_value_free(out);
        if (err_at)
            *err_at = (size_t)(c.p - text);
    }
    return r;
}

void json_value_free(json_value *v)
{
    if (!v)
        return;
    for (int64_t i = 0; i < v->count; ++i) {
        json_value_free(&v->items[i]);
        if (v->keys)
            free(v->keys[i]);
    }
    free(v->items);
    free(v->keys);
    free(v->string);
    memset(v, 0, sizeof *v);
}

const json_value *json_value_get(const json_value *v, const char *key)
{
    if (!v || v->type != JSON_OBJECT || !key)
        return NULL;
    for (int64_t i = 0; i < v->count; ++i)
        if (!strcmp(v->keys[i], key))
            return &v->items[i];
    return NULL;
}
