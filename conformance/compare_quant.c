/* The fused QK RMSNorm's quantized q_out, judged together with its scales.
 *
 * Each side quantizes its own normalized value: the backend its fp32 y',
 * the reference fl32 of its float64 y. They differ by at most tol_y[k] (the
 * norm bound of conformance/bounds.c, which also carries the fp32 roundings
 * of the quantizer's product v * fl(1/s)). Where a value sits on a rounding
 * boundary of the code grid, or a group maximum on a step of the scale rule,
 * codes and scales may then legitimately differ, so they are compared as
 * dequantized values. For value k with codes c', c and scales s', s:
 *
 *     |c' s' - c s| <= |c' s' - y'| + |y' - y| + |y - c s|
 *                   <= gap(c')/2 s' + tol_y[k] + gap(c)/2 s
 *
 * where gap(c) is the larger distance from c to its two neighbouring codes
 * (rounding to nearest lands within half of it; saturation at the largest
 * code only overshoots by the product's rounding, inside tol_y): the norm
 * bound plus one quantization step. Scales:
 * - F32 (fp8 group 128, s = max(amax, 1e-10) / fp8_max): the group maxima
 *   differ by at most the largest tol of the group, so |s' - s| <= tol_s[g]
 *   (= that / fp8_max, set by the case) + 1 fp32 ulp (both divisions round);
 * - e8m0 (MXFP4 production rule): |b' - b| <= tol_s[g], the number of steps
 *   the rule takes while amax moves over the norm bound around its exact
 *   value (0 unless the exact amax sits within the bound of a step: then
 *   the scales are equal OR one step apart, never more).
 * NaN must meet NaN (the inputs of these cases are finite, so none is
 * expected). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "conformance/conf.h"

static unsigned char *elem0(const conf_arg *a, unsigned char *const buf)
{
    return buf + a->offset * (int64_t)mla_dtype_size(a->t.dtype);
}

/* Code of value (t, d) of q_out [T, D] values (FP4X2: nibble d % 2 of byte d / 2). */
static unsigned code_at(const conf_arg *a, unsigned char *buf, int64_t t, int64_t d, int64_t D)
{
    if (a->t.dtype == MLA_DTYPE_FP4X2) {
        unsigned b = *conf_elem_at(a, elem0(a, buf), t * (D / 2) + d / 2);
        return (d % 2) ? b >> 4 : b & 0xF;
    }
    return *conf_elem_at(a, elem0(a, buf), t * D + d);
}

double conf_code_half_gap(mla_dtype dt, unsigned code)
{
    const unsigned sign = dt == MLA_DTYPE_FP4X2 ? 0x8 : 0x80;
    const unsigned maxmag = dt == MLA_DTYPE_FP4X2 ? 0x7 : dt == MLA_DTYPE_FP8_E4M3FN ? 0x7E : 0x7F;
    const unsigned mag = code & (sign - 1);
    const double v = conf_decode_value(dt, mag);
    double above = mag < maxmag ? conf_decode_value(dt, mag + 1) - v : 0.0;
    double below = mag > 0 ? v - conf_decode_value(dt, mag - 1) : conf_decode_value(dt, 1);
    return 0.5 * fmax(above, below);
}

static double scale_at(const conf_arg *s, unsigned char *buf, int64_t k)
{
    size_t es = mla_dtype_size(s->t.dtype);
    uint64_t bits = conf_load_bits(conf_elem_at(s, elem0(s, buf), k), es);
    return s->t.dtype == MLA_DTYPE_F32 ? conf_decode_value(MLA_DTYPE_F32, bits)
                                       : conf_decode_value(MLA_DTYPE_E8M0, bits);
}

/* One compared value: err is in units of the allowed distance. */
static void judge_value(conf_cmp *r, double got, double want, double allowed, const char *name,
                        int64_t t, int64_t j)
{
    r->count++;
    if (want == 0.0)
        r->zeros++;
    double err;
    if (isnan(got) || isnan(want)) {
        if (isnan(got) && isnan(want))
            return;
        r->class_bad++;
        err = INFINITY;
    } else {
        err = fabs(got - want) / allowed;
        if (allowed == 0.0)
            err = got == want ? 0.0 : INFINITY;
    }
    if (err > r->max_err && isfinite(err))
        r->max_err = err;
    if (err <= 1.0)
        return;
    r->mismatches++;
    if (!r->first[0])
        snprintf(r->first, sizeof r->first,
                 "%s[%lld, %lld]: got %.9g want %.9g, allowed %.3g (dequantized) [%s]", name,
                 (long long)t, (long long)j, got, want, allowed,
                 isnan(got) != isnan(want) ? "class" : "bound");
}

void conf_compare_quant(const conf_problem *p, int iq, int is, int which,
                        unsigned char *const *got, unsigned char *const *want, conf_cmp *r)
{
    const conf_arg *q = &p->arg[iq], *s = &p->arg[is];
    const mla_dtype dt = q->t.dtype;
    const int64_t T = q->t.shape[0], G = s->t.shape[1];
    const int64_t D = dt == MLA_DTYPE_FP4X2 ? 2 * q->t.shape[1] : q->t.shape[1], group = D / G;
    memset(r, 0, sizeof *r);
    r->unit = "x bound";
    for (int64_t t = 0; t < T; ++t) {
        if (which == is) {
            for (int64_t g = 0; g < G; ++g) {
                const double sg = scale_at(s, got[is], t * G + g);
                const double sw = scale_at(s, want[is], t * G + g);
                const double tol = s->bound.tol[t * G + g];
                if (s->t.dtype == MLA_DTYPE_F32) {
                    judge_value(r, sg, sw, tol + conf_ulp(MLA_DTYPE_F32, fmax(fabs(sg), fabs(sw))),
                                s->name, t, g);
                } else { /* e8m0: compared as exponents, tol in steps */
                    const double eg = isnan(sg) ? NAN : log2(sg), ew = isnan(sw) ? NAN : log2(sw);
                    judge_value(r, eg, ew, tol + 0.5, s->name, t, g);
                }
            }
            continue;
        }
        for (int64_t d = 0; d < D; ++d) {
            const unsigned cg = code_at(q, got[iq], t, d, D), cw = code_at(q, want[iq], t, d, D);
            const double sg = scale_at(s, got[is], t * G + d / group);
            const double sw = scale_at(s, want[is], t * G + d / group);
            const double vg = conf_decode_value(dt, cg) * sg, vw = conf_decode_value(dt, cw) * sw;
            const double allowed = q->bound.tol[t * D + d] + conf_code_half_gap(dt, cg) * fabs(sg) +
                                   conf_code_half_gap(dt, cw) * fabs(sw);
            judge_value(r, vg, vw, allowed, q->name, t, d);
        }
    }
}
