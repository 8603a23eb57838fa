/* Comparators, in order: exact bits; NaN / Inf / signed-zero class; then the
 * output's declared bound. The decoders here are written from the format
 * definitions (MLA.md section 5) and do not call the library, so a wrong
 * library decoder cannot hide a wrong result. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "conformance/conf.h"

typedef enum vclass { VC_NAN, VC_PINF, VC_NINF, VC_PZERO, VC_NZERO, VC_FINITE } vclass;

static const char *const class_names[] = {"nan", "+inf", "-inf", "+0", "-0", "finite"};

typedef struct decoded {
    vclass cls;
    int64_t key; /* monotone in the value: neighbours differ by 1 (an ulp, or a code step) */
    double val;
} decoded;

/* Sign-magnitude binary float with ebits exponent bits and mbits mantissa
 * bits. ieee: all-ones exponent is Inf/NaN; otherwise nan_mag (if >= 0) is
 * the one NaN magnitude (e4m3fn: 0x7F). */
static decoded decode_float(uint64_t bits, int ebits, int mbits, int bias, int ieee, int64_t nan_mag)
{
    decoded d;
    int sign = (int)((bits >> (ebits + mbits)) & 1);
    int64_t mag = (int64_t)(bits & ((1ull << (ebits + mbits)) - 1));
    int64_t ex = mag >> mbits, man = mag & ((1ll << mbits) - 1);
    d.key = sign ? -mag : mag;
    if ((ieee && ex == (1ll << ebits) - 1) || (!ieee && mag == nan_mag)) {
        d.cls = (!ieee || man) ? VC_NAN : sign ? VC_NINF : VC_PINF;
        d.val = d.cls == VC_NAN ? NAN : sign ? -INFINITY : INFINITY;
        return d;
    }
    d.val = ex ? ldexp(1.0 + ldexp((double)man, -mbits), (int)ex - bias)
               : ldexp((double)man, 1 - bias - mbits);
    if (sign)
        d.val = -d.val;
    d.cls = mag ? VC_FINITE : sign ? VC_NZERO : VC_PZERO;
    return d;
}

static decoded decode(mla_dtype dt, uint64_t bits)
{
    decoded d;
    switch (dt) {
    case MLA_DTYPE_F32:
        return decode_float(bits, 8, 23, 127, 1, -1);
    case MLA_DTYPE_F64:
        return decode_float(bits, 11, 52, 1023, 1, -1);
    case MLA_DTYPE_F16:
        return decode_float(bits, 5, 10, 15, 1, -1);
    case MLA_DTYPE_BF16:
        return decode_float(bits, 8, 7, 127, 1, -1);
    case MLA_DTYPE_FP8_E4M3FN:
        return decode_float(bits, 4, 3, 7, 0, 0x7F);
    case MLA_DTYPE_FP8_E4M3FNUZ:
        if (bits == 0x80) /* the single NaN; there is no -0 */
            return (decoded){VC_NAN, 0, NAN};
        return decode_float(bits, 4, 3, 8, 0, -1);
    case MLA_DTYPE_FP4X2: /* called per nibble */
        return decode_float(bits, 2, 1, 1, 0, -1);
    case MLA_DTYPE_E8M0:
        d.key = (int64_t)bits;
        d.cls = bits == 0xFF ? VC_NAN : VC_FINITE;
        d.val = bits == 0xFF ? NAN : ldexp(1.0, (int)bits - 127);
        return d;
    case MLA_DTYPE_I32:
        d.key = (int32_t)(uint32_t)bits;
        break;
    case MLA_DTYPE_I64:
        d.key = (int64_t)bits;
        break;
    default:
        d.key = (int64_t)bits;
        break;
    }
    d.val = (double)d.key;
    d.cls = d.key ? VC_FINITE : VC_PZERO;
    return d;
}

uint64_t conf_load_bits(const unsigned char *p, size_t es)
{
    uint64_t v = 0;
    for (size_t i = 0; i < es; ++i) /* little-endian, whatever the host */
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

typedef struct cmp_state {
    const conf_arg *a;
    conf_cmp *r;
    double nmse_num, nmse_den;
} cmp_state;

/* snprintf through va_list: a truncated message is fine here, and GCC's
 * -Wformat-truncation does not second-guess it. */
static void say(char *buf, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, len, fmt, ap);
    va_end(ap);
}

static void note_first(cmp_state *s, int64_t k, int half, uint64_t g, uint64_t w, decoded dg,
                       decoded dw, const char *why)
{
    if (s->r->first[0])
        return;
    char idx[96];
    conf_index_str(&s->a->t, k, idx, sizeof idx);
    say(s->r->first, sizeof s->r->first, "%s%s%s: got 0x%llx (%s %.9g) want 0x%llx (%s %.9g) [%s]",
        s->a->name, idx, half < 0 ? "" : half ? ".hi" : ".lo", (unsigned long long)g,
        class_names[dg.cls], dg.val, (unsigned long long)w, class_names[dw.cls], dw.val, why);
}

static int is_zero(vclass c) { return c == VC_PZERO || c == VC_NZERO; }

double conf_decode_value(mla_dtype dt, uint64_t bits) { return decode(dt, bits).val; }

double conf_ulp(mla_dtype dt, double m)
{
    int mbits = 23, emin = -126;
    if (dt == MLA_DTYPE_BF16)
        mbits = 7;
    else if (dt == MLA_DTYPE_F16)
        mbits = 10, emin = -14;
    else if (dt == MLA_DTYPE_F64)
        mbits = 52, emin = -1022;
    int e;
    frexp(fabs(m), &e); /* m = f * 2^e, f in [0.5, 1): the binade's exponent is e - 1 */
    if (!(fabs(m) > 0) || e - 1 < emin)
        e = emin + 1;
    return ldexp(1.0, e - 1 - mbits);
}

/* CONF_BOUND_TOL: the value's allowed distance, from the case's arithmetic
 * bound and the output roundings. */
static double tol_allowed(const conf_arg *a, int64_t k, int half, decoded dg, decoded dw)
{
    int64_t v = a->t.dtype == MLA_DTYPE_FP4X2 ? 2 * k + (half > 0) : k;
    double m = fmax(fabs(dg.val), fabs(dw.val));
    return (a->bound.tol ? a->bound.tol[v] : 0.0) + a->bound.limit * conf_ulp(a->t.dtype, m);
}

static int zero_or_finite(vclass c) { return c == VC_FINITE || is_zero(c); }

/* One value: bits, then class, then bound. */
static void compare_value(cmp_state *s, int64_t k, int half, uint64_t g, uint64_t w)
{
    const conf_bound *b = &s->a->bound;
    mla_dtype dt = s->a->t.dtype;
    decoded dg = decode(dt, g), dw = decode(dt, w);
    s->r->count++;
    if (is_zero(dw.cls))
        s->r->zeros++;
    if (g == w)
        return;
    if (b->raw) { /* bytes: no class, no distance */
        s->r->mismatches++;
        note_first(s, k, half, g, w, dg, dw, "bits");
        return;
    }
    if (dg.cls == VC_NAN && dw.cls == VC_NAN && (b->nan_any || b->kind != CONF_BOUND_EXACT))
        return;
    int class_ok = dg.cls == dw.cls || (b->zero_sign_free && is_zero(dg.cls) && is_zero(dw.cls)) ||
                   (b->kind == CONF_BOUND_TOL && zero_or_finite(dg.cls) && zero_or_finite(dw.cls));
    if (!class_ok) {
        s->r->mismatches++;
        s->r->class_bad++;
        note_first(s, k, half, g, w, dg, dw, "class");
        return;
    }
    if (dg.cls == VC_NAN) { /* NaN payloads differ: a mismatch with no distance */
        s->r->mismatches++;
        note_first(s, k, half, g, w, dg, dw, "NaN bits");
        return;
    }
    double err;
    switch (b->kind) {
    case CONF_BOUND_EXACT:
    case CONF_BOUND_ULP:
        err = fabs((double)(dg.key - dw.key));
        break;
    case CONF_BOUND_REL:
        err = fabs(dg.val - dw.val) / fmax(fabs(dw.val), b->floor);
        break;
    case CONF_BOUND_TOL: /* in units of the allowed distance: 1 is the bound */
        err = fabs(dg.val - dw.val) / tol_allowed(s->a, k, half, dg, dw);
        if (err > 1.0) {
            if (err > s->r->max_err)
                s->r->max_err = err;
            s->r->mismatches++;
            note_first(s, k, half, g, w, dg, dw, "bound");
        } else if (err > s->r->max_err) {
            s->r->max_err = err;
        }
        return;
    default: /* NMSE: judged on the whole tensor */
        if (dw.cls == VC_FINITE || is_zero(dw.cls)) {
            s->nmse_num += (dg.val - dw.val) * (dg.val - dw.val);
            s->nmse_den += dw.val * dw.val;
        }
        return;
    }
    if (err > s->r->max_err)
        s->r->max_err = err;
    if (b->kind == CONF_BOUND_EXACT || err > b->limit) {
        s->r->mismatches++;
        note_first(s, k, half, g, w, dg, dw, b->kind == CONF_BOUND_EXACT ? "bits" : "bound");
    }
}

void conf_compare(const conf_arg *a, const unsigned char *got, const unsigned char *want,
                  int want_contig, conf_cmp *r)
{
    static const char *const units[] = {"ulp", "ulp", "rel", "nmse", "x bound"};
    memset(r, 0, sizeof *r);
    r->unit = units[a->bound.kind];
    cmp_state s = {a, r, 0.0, 0.0};
    size_t es = mla_dtype_size(a->t.dtype);
    conf_iter it;
    int64_t off, k = 0;
    conf_iter_init(&it, &a->t);
    while (conf_iter_next(&it, &off)) {
        uint64_t g = conf_load_bits(got + off * (int64_t)es, es);
        uint64_t w = conf_load_bits(want + (want_contig ? k : off) * (int64_t)es, es);
        if (a->t.dtype == MLA_DTYPE_FP4X2) { /* element 2i in the low nibble */
            compare_value(&s, k, 0, g & 0xF, w & 0xF);
            compare_value(&s, k, 1, g >> 4, w >> 4);
        } else {
            compare_value(&s, k, -1, g, w);
        }
        ++k;
    }
    if (a->bound.kind == CONF_BOUND_NMSE) {
        double nmse = s.nmse_den > 0 ? s.nmse_num / s.nmse_den : (s.nmse_num > 0 ? INFINITY : 0);
        r->max_err = nmse;
        if (nmse > a->bound.limit) {
            r->mismatches++;
            snprintf(r->first, sizeof r->first, "%s: NMSE %.3g above the bound %.3g", a->name,
                     nmse, a->bound.limit);
        }
    }
}
