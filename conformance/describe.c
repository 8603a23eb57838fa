/* A case as text and back: every parameter by name (the suite's conf_field
 * table), then the seed. REPRO lines and --list print it, --repro parses it,
 * so a case is rerun from its description alone, whatever the case order. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "conformance/conf.h"

const char *conf_name_saturation(int v)
{
    return v == MLA_SATURATE ? "sat" : v == MLA_NON_SATURATE ? "nonsat" : "unknown";
}
const char *conf_name_scale_layout(int v) { return mla_scale_layout_name((mla_scale_layout)v); }
const char *conf_name_mxfp4_rule(int v) { return mla_mxfp4_rule_name((mla_mxfp4_rule)v); }
const char *conf_name_fp8_rule(int v) { return mla_fp8_scale_rule_name((mla_fp8_scale_rule)v); }
const char *conf_name_rope_style(int v) { return mla_rope_style_name((mla_rope_style)v); }
const char *conf_name_cache_layout(int v) { return mla_cache_layout_name((mla_cache_layout)v); }
const char *conf_name_indexer_layout(int v)
{
    return mla_indexer_layout_name((mla_indexer_layout)v);
}
const char *conf_name_dist(int v) { return conf_dist_name(v); }

static void *field_at(conf_case *c, const conf_field *f) { return (char *)&c->p + f->offset; }

static const void *cfield_at(const conf_case *c, const conf_field *f)
{
    return (const char *)&c->p + f->offset;
}

/* The shortest %g form that reads back as the same double. */
static void real_str(double v, char *buf, size_t len)
{
    for (int prec = 6; prec <= 17; ++prec) {
        snprintf(buf, len, "%.*g", prec, v);
        if (strtod(buf, NULL) == v)
            return;
    }
}

static void value_str(const conf_case *c, const conf_field *f, char *buf, size_t len)
{
    const void *at = cfield_at(c, f);
    switch (f->kind) {
    case CONF_F_I64:
        snprintf(buf, len, "%lld", (long long)*(const int64_t *)at);
        break;
    case CONF_F_I32:
        snprintf(buf, len, "%d", (int)*(const int32_t *)at);
        break;
    case CONF_F_REAL:
        real_str(*(const double *)at, buf, len);
        break;
    case CONF_F_DTYPE: {
        const mla_dtype d = *(const mla_dtype *)at;
        snprintf(buf, len, "%s", d == MLA_DTYPE_COUNT ? "none" : mla_dtype_name(d));
        break;
    }
    case CONF_F_ENUM:
        snprintf(buf, len, "%s", f->enum_name(*(const int32_t *)at));
        break;
    case CONF_F_LAY:
        conf_layout_str(*(const unsigned *)at, buf, len);
        break;
    case CONF_F_SHAPE: {
        const conf_shape *s = at;
        size_t n = 0;
        buf[0] = '\0';
        for (int32_t d = 0; d < s->ndim && d < 3 && n < len; ++d)
            n += (size_t)snprintf(buf + n, len - n, "%s%lld", d ? "x" : "", (long long)s->d[d]);
        break;
    }
    }
}

/* The suite, every parameter and the golden index: all but the seed. */
static size_t describe_params(const conf_suite *s, const conf_case *c, char *buf, size_t len)
{
    size_t n = (size_t)snprintf(buf, len, "%s", s->name);
    for (int i = 0; i < s->nfields && n < len; ++i) {
        char v[64];
        value_str(c, &s->fields[i], v, sizeof v);
        n += (size_t)snprintf(buf + n, len - n, " %s=%s", s->fields[i].name, v);
    }
    if (c->golden >= 0 && n < len)
        n += (size_t)snprintf(buf + n, len - n, " golden=%d", c->golden);
    return n < len ? n : len;
}

void conf_describe(const conf_suite *s, const conf_case *c, char *buf, size_t len)
{
    size_t n = describe_params(s, c, buf, len);
    if (n < len)
        snprintf(buf + n, len - n, " seed=0x%llx", (unsigned long long)c->seed);
}

uint64_t conf_case_seed(const conf_suite *s, const conf_case *c)
{
    char buf[1024];
    const size_t n = describe_params(s, c, buf, sizeof buf);
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
    for (size_t i = 0; i < n; ++i)
        h = (h ^ (unsigned char)buf[i]) * 0x100000001b3ull;
    return conf_mix64(h);
}

/* ------------------------------------------------------------ parsing */

static int parse_i64(const char *s, int64_t *v)
{
    char *end;
    errno = 0;
    long long x = strtoll(s, &end, 0);
    if (errno || end == s || *end)
        return 0;
    *v = x;
    return 1;
}

static int parse_value(conf_case *c, const conf_field *f, const char *s)
{
    void *at = field_at(c, f);
    int64_t v;
    switch (f->kind) {
    case CONF_F_I64:
        return parse_i64(s, (int64_t *)at);
    case CONF_F_I32:
        if (!parse_i64(s, &v) || v < INT32_MIN || v > INT32_MAX)
            return 0;
        *(int32_t *)at = (int32_t)v;
        return 1;
    case CONF_F_REAL: {
        char *end;
        *(double *)at = strtod(s, &end);
        return end != s && !*end;
    }
    case CONF_F_DTYPE:
        for (int d = 0; d <= MLA_DTYPE_COUNT; ++d)
            if (!strcmp(s, d == MLA_DTYPE_COUNT ? "none" : mla_dtype_name((mla_dtype)d))) {
                *(mla_dtype *)at = (mla_dtype)d;
                return 1;
            }
        return 0;
    case CONF_F_ENUM:
        for (int e = 0; e < f->count; ++e)
            if (!strcmp(s, f->enum_name(e))) {
                *(int32_t *)at = e;
                return 1;
            }
        return 0;
    case CONF_F_LAY:
        return conf_layout_parse(s, (unsigned *)at);
    case CONF_F_SHAPE: {
        conf_shape *sh = at;
        memset(sh, 0, sizeof *sh);
        while (*s && sh->ndim < 3) {
            char *end;
            errno = 0;
            long long x = strtoll(s, &end, 10);
            if (errno || end == s || (*end && *end != 'x'))
                return 0;
            sh->d[sh->ndim++] = x;
            s = *end ? end + 1 : end;
        }
        return sh->ndim > 0 && !*s;
    }
    }
    return 0;
}

/* The next space-separated token of *p (terminated in place), or NULL. */
static char *next_token(char **p)
{
    char *s = *p + strspn(*p, " \t\n");
    if (!*s)
        return NULL;
    char *e = s + strcspn(s, " \t\n");
    *p = *e ? e + 1 : e;
    *e = '\0';
    return s;
}

mla_status conf_parse(const char *text, const conf_suite *const *suites, int nsuites,
                      const conf_suite **suite, conf_case *c, char *err, size_t errlen)
{
    char buf[2048];
    if (strlen(text) >= sizeof buf) {
        snprintf(err, errlen, "description too long");
        return MLA_ERR_INVALID_ARGUMENT;
    }
    snprintf(buf, sizeof buf, "%s", text);
    memset(c, 0, sizeof *c);
    c->golden = -1;
    char *rest = buf, *tok = next_token(&rest);
    const conf_suite *s = NULL;
    for (int i = 0; tok && i < nsuites; ++i)
        if (!strcmp(tok, suites[i]->name))
            s = suites[i];
    if (!s) {
        snprintf(err, errlen, "'%s' is not a conformance suite", tok ? tok : "");
        return MLA_ERR_INVALID_ARGUMENT;
    }
    unsigned long long seen = 0; /* bit i: field i given; bit 63: the seed */
    while ((tok = next_token(&rest)) != NULL) {
        char *eq = strchr(tok, '=');
        if (!eq) {
            snprintf(err, errlen, "'%s' is not name=value", tok);
            return MLA_ERR_INVALID_ARGUMENT;
        }
        *eq = '\0';
        const char *name = tok, *val = eq + 1;
        int64_t v;
        if (!strcmp(name, "seed")) {
            char *end;
            errno = 0;
            c->seed = strtoull(val, &end, 0);
            if (errno || end == val || *end) {
                snprintf(err, errlen, "seed=%s: not a number", val);
                return MLA_ERR_INVALID_ARGUMENT;
            }
            seen |= 1ull << 63;
            continue;
        }
        if (!strcmp(name, "golden")) {
            if (!parse_i64(val, &v) || v < 0 || v > INT32_MAX) {
                snprintf(err, errlen, "golden=%s: not a golden case number", val);
                return MLA_ERR_INVALID_ARGUMENT;
            }
            c->golden = (int)v;
            continue;
        }
        int i = 0;
        while (i < s->nfields && strcmp(s->fields[i].name, name))
            ++i;
        if (i == s->nfields) {
            snprintf(err, errlen, "%s has no parameter '%s'", s->name, name);
            return MLA_ERR_INVALID_ARGUMENT;
        }
        if (!parse_value(c, &s->fields[i], val)) {
            snprintf(err, errlen, "%s: '%s' is not a value of it", name, val);
            return MLA_ERR_INVALID_ARGUMENT;
        }
        seen |= 1ull << i;
    }
    for (int i = 0; i < s->nfields; ++i)
        if (!(seen & (1ull << i))) {
            snprintf(err, errlen, "%s needs %s=...", s->name, s->fields[i].name);
            return MLA_ERR_INVALID_ARGUMENT;
        }
    if (!(seen & (1ull << 63))) {
        snprintf(err, errlen, "seed=... is missing");
        return MLA_ERR_INVALID_ARGUMENT;
    }
    c->suite = s;
    s->label(c);
    *suite = s;
    return MLA_OK;
}
