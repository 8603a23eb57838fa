/* The small JSON reader of core/json_mini.h (RFC 8259 grammar, for the
 * subset it reads). Safetensors headers come from untrusted files: every
 * read is bounded by the cursor's end and nesting is capped. */
#include "core/json_mini.h"

#include <stdlib.h>
#include <string.h>

enum { JSON_MAX_DEPTH = 64 };

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
        if (++c->depth > JSON_MAX_DEPTH)
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
