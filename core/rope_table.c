/* The cos/sin table of MLA.md section 3, the same bits on every host:
 *
 *   f_i = base^(-2i/R) * (1 - ramp_i * (1 - 1/factor))
 *   cos[p][i] = RN32(cos(p f_i) * ratio),  sin[p][i] = RN32(sin(p f_i) * ratio)
 *
 * with YaRN's ramp_i (0 without YaRN) and ratio = m(factor, mscale) /
 * m(factor, mscale_all_dim) as MLA.md section 3 defines them, every operation
 * taken in real arithmetic, and RN32 the rounding to the nearest fp32, ties to
 * even. Each entry is that correctly rounded value, whatever the host's libm,
 * FPU or compiler.
 *
 * Method. f_i, ratio and 1/(2 pi) come from 256-bit integer arithmetic
 * (core/rope_bigfloat.c). The turn p f_i / (2 pi) mod 1 is kept as a 192-bit
 * fixed-point fraction, exact in integers (u_p = p G_i mod 2^192). Its offset
 * from the nearest quarter turn, in [-1/8, 1/8], goes to double; cos and sin of
 * 2 pi times it are Taylor polynomials in double, with a proven error bound.
 * When the interval the bound spans rounds to one fp32, that is the entry;
 * otherwise (about one entry in a million) the entry is recomputed in 256-bit
 * arithmetic (relative error < 2^-200) and rounded the same way. If even that
 * interval holds an fp32 rounding boundary (not seen; p f_i is algebraic, so
 * an exact tie would need ratio != 1), the 256-bit value is rounded: still
 * the same bits on every host. */
#include <math.h>
#include <string.h>

#include "core/rope_bigfloat.h"
#include "core/rope_table.h"
#include "mla/mla.h"

/* The exact quantities of one table (all but the per-frequency f_i). */
typedef struct rope_consts {
    bigfloat pi, inv_2pi, ratio;
    bigfloat step;              /* base^(-2/R): f0_i = step^i */
    bigfloat low, inv_width;    /* ramp_i = clamp((i - low) * inv_width, 0, 1) */
    bigfloat shrink;            /* 1 - 1/factor */
    int yarn;
} rope_consts;

static int is_finite(double v)
{
    return v - v == 0;
}

/* m(s, k) = 0.1 k ln s + 1 (ln_s = ln s). */
static bigfloat yarn_m(double k, bigfloat ln_s)
{
    return mla_bf_add(mla_bf_div_u(mla_bf_mul(mla_bf_from_double(k), ln_s), 10), mla_bf_from_int(1));
}

/* corr(r) = R ln(orig / (2 pi r)) / (2 ln base): the dim index whose
 * wavelength completes r rotations over the original context. */
static bigfloat yarn_corr(const mla_rope_config *c, const rope_consts *k, bigfloat ln_base,
                          double rotations)
{
    const bigfloat two_pi_r = mla_bf_mul(mla_bf_ldexp(k->pi, 1), mla_bf_from_double(rotations));
    const bigfloat ln_ratio = mla_bf_ln(mla_bf_div(mla_bf_from_int(c->original_max_pos), two_pi_r));
    return mla_bf_div(mla_bf_mul(mla_bf_from_int(c->dim), ln_ratio), mla_bf_ldexp(ln_base, 1));
}

static mla_status rope_consts_init(const mla_rope_config *c, rope_consts *k)
{
    memset(k, 0, sizeof *k);
    const bigfloat one = mla_bf_from_int(1), ln_base = mla_bf_ln(mla_bf_from_double(c->base));
    k->pi = mla_bf_pi();
    k->inv_2pi = mla_bf_div(one, mla_bf_ldexp(k->pi, 1));
    k->step = mla_bf_exp(mla_bf_neg(mla_bf_div_u(mla_bf_ldexp(ln_base, 1), (uint32_t)c->dim)));
    k->ratio = one;
    k->yarn = c->factor > 1.0;
    if (!k->yarn)
        return MLA_OK;
    const bigfloat dim_1 = mla_bf_from_int(c->dim - 1), zero = mla_bf_from_int(0);
    bigfloat low = mla_bf_floor(yarn_corr(c, k, ln_base, c->beta_fast));
    bigfloat high = mla_bf_ceil(yarn_corr(c, k, ln_base, c->beta_slow));
    low = mla_bf_cmp(low, zero) < 0 ? zero : low;
    high = mla_bf_cmp(high, dim_1) > 0 ? dim_1 : high;
    if (mla_bf_cmp(low, high) == 0)
        high = mla_bf_add(high, mla_bf_div_u(one, 1000));
    k->low = low;
    k->inv_width = mla_bf_div(one, mla_bf_sub(high, low));
    const bigfloat factor = mla_bf_from_double(c->factor);
    k->shrink = mla_bf_sub(one, mla_bf_div(one, factor));
    if (c->mscale != c->mscale_all_dim) { /* else ratio = 1 exactly */
        const bigfloat ln_s = mla_bf_ln(factor), den = yarn_m(c->mscale_all_dim, ln_s);
        if (mla_bf_is_zero(den))
            return MLA_ERR_INVALID_ARGUMENT;
        k->ratio = mla_bf_div(yarn_m(c->mscale, ln_s), den);
    }
    return MLA_OK;
}

/* f_i from f0_i = base^(-2i/R). */
static bigfloat rope_frequency(const rope_consts *k, int64_t i, bigfloat f0)
{
    if (!k->yarn)
        return f0;
    const bigfloat zero = mla_bf_from_int(0), one = mla_bf_from_int(1);
    bigfloat ramp = mla_bf_mul(mla_bf_sub(mla_bf_from_int(i), k->low), k->inv_width);
    ramp = mla_bf_cmp(ramp, zero) < 0 ? zero : mla_bf_cmp(ramp, one) > 0 ? one : ramp;
    return mla_bf_mul(f0, mla_bf_sub(one, mla_bf_mul(ramp, k->shrink)));
}

/* One entry in 256-bit arithmetic: t = p g turns (g = f_i / (2 pi)), reduced
 * to x = 2 pi (t - n/4) in [-pi/4, pi/4]. Error bound: 2^-200 |v|, and
 * 2^-200 |ratio| |t| for g's own error (< 2^-204 relative: f0_i = step^i
 * accumulates i roundings of 2^-235). */
static void entry_exact(const rope_consts *k, bigfloat g, int64_t p, uint32_t *cos_bits,
                        uint32_t *sin_bits)
{
    const bigfloat t = mla_bf_mul(mla_bf_from_int(p), g);
    const bigfloat w = mla_bf_ldexp(mla_bf_sub(t, mla_bf_floor(t)), 2); /* quarter turns, [0, 4) */
    const bigfloat n = mla_bf_floor(mla_bf_add(w, mla_bf_ldexp(mla_bf_from_int(1), -1)));
    const int quad = (int)mla_bf_to_double(n) & 3;
    bigfloat s, c;
    mla_bf_sincos(mla_bf_mul(mla_bf_sub(w, n), mla_bf_ldexp(k->pi, -1)), &s, &c);
    /* cos and sin of x + quad pi/2 */
    const bigfloat cv = quad == 0 ? c : quad == 1 ? mla_bf_neg(s) : quad == 2 ? mla_bf_neg(c) : s;
    const bigfloat sv = quad == 0 ? s : quad == 1 ? c : quad == 2 ? mla_bf_neg(s) : mla_bf_neg(c);
    const bigfloat abs_err = mla_bf_ldexp(mla_bf_mul(mla_bf_abs(k->ratio), t), -200);
    for (int j = 0; j < 2; ++j) {
        const bigfloat v = mla_bf_mul(j ? sv : cv, k->ratio);
        const bigfloat err = mla_bf_add(mla_bf_ldexp(mla_bf_abs(v), -200), abs_err);
        const uint32_t lo = mla_bf_to_f32_bits(mla_bf_sub(v, err)), hi = mla_bf_to_f32_bits(mla_bf_add(v, err));
        *(j ? sin_bits : cos_bits) = lo == hi ? lo : mla_bf_to_f32_bits(v);
    }
}

/* cos and sin of 2 pi r, |r| <= 1/8, in double: Taylor to x^17 / x^18
 * (truncation < 2^-62 relative). With r's own error (2^-52 |r| + 2^-117) the
 * results are within 2^-49 relative plus 2^-114 absolute, and times ratio
 * within 2^-48.6 plus 2^-114 |ratio|; fast_bits allows more than four times
 * that, so that any rounding mode, FMA or not, stays inside. */
static void sincos_turn(double r, double *s, double *c)
{
    const double x = r * 0x1.921fb54442d18p+2, x2 = x * x; /* 2 pi */
    double ps = 1.0 / 355687428096000.0; /* 1/17! */
    ps = ps * x2 - 1.0 / 1307674368000.0;
    ps = ps * x2 + 1.0 / 6227020800.0;
    ps = ps * x2 - 1.0 / 39916800.0;
    ps = ps * x2 + 1.0 / 362880.0;
    ps = ps * x2 - 1.0 / 5040.0;
    ps = ps * x2 + 1.0 / 120.0;
    ps = ps * x2 - 1.0 / 6.0;
    *s = x + x * x2 * ps;
    double pc = 1.0 / 6402373705728000.0; /* 1/18! */
    pc = pc * x2 - 1.0 / 20922789888000.0;
    pc = pc * x2 + 1.0 / 87178291200.0;
    pc = pc * x2 - 1.0 / 479001600.0;
    pc = pc * x2 + 1.0 / 3628800.0;
    pc = pc * x2 - 1.0 / 40320.0;
    pc = pc * x2 + 1.0 / 720.0;
    pc = pc * x2 - 1.0 / 24.0;
    pc = pc * x2 + 0.5;
    *c = 1.0 - x2 * pc;
}

/* RN32(v) when every value within the error bound of v rounds the same,
 * else -1 (ask entry_exact). */
static int64_t fast_bits(double v, double ratio)
{
    const double err = fabs(v) * 0x1p-46 + fabs(ratio) * 0x1p-100;
    const uint32_t lo = mla_bf_double_to_f32_bits(v - err), hi = mla_bf_double_to_f32_bits(v + err);
    return lo == hi ? (int64_t)lo : -1;
}

/* Rows [first, first + count) of frequency i into column i of cos_out / sin_out. */
static void rope_column(const rope_consts *k, bigfloat f, int64_t i, int64_t half, int64_t first,
                        int64_t count, float *cos_out, float *sin_out)
{
    const bigfloat g = mla_bf_mul(f, k->inv_2pi); /* turns per position, < 1/(2 pi) */
    /* G = floor(g 2^192) in three 64-bit limbs, u = first * G mod 2^192. */
    const int64_t sh = -(g.e + 192);
    const uint64_t G[3] = {mla_bf_bits64(g, sh + 128), mla_bf_bits64(g, sh + 64), mla_bf_bits64(g, sh)};
    uint64_t u[3] = {0, 0, 0};
    {
        /* first * G mod 2^192, in 32-bit pieces */
        const uint64_t p[2] = {(uint64_t)first >> 32, (uint64_t)first & 0xffffffffu};
        uint32_t gl[6], acc[6] = {0};
        for (int j = 0; j < 3; ++j) {
            gl[2 * j] = (uint32_t)(G[j] >> 32);
            gl[2 * j + 1] = (uint32_t)G[j];
        }
        for (int a = 0; a < 2; ++a) {
            uint64_t carry = 0;
            for (int b = 5; b >= 0; --b) {
                const int at = b - (1 - a); /* limb weight: p[a] * gl[b] lands at b - (1 - a) */
                if (at < 0)
                    break;
                const uint64_t t = p[a] * gl[b] + acc[at] + carry;
                acc[at] = (uint32_t)t;
                carry = t >> 32;
            }
        }
        for (int j = 0; j < 3; ++j)
            u[j] = (uint64_t)acc[2 * j] << 32 | acc[2 * j + 1];
    }
    const double ratio = mla_bf_to_double(k->ratio);
    const int fast = fabs(ratio) > 0x1p-900 && fabs(ratio) < 0x1p900;
    for (int64_t p = first; p < first + count; ++p) {
        /* u + 1/8 turn: the top two bits are the nearest quarter, the rest r + 1/8 */
        const uint64_t w2 = u[0] + (1ull << 61);
        const int quad = (int)(w2 >> 62);
        const double r = (double)((int64_t)(w2 & ((1ull << 62) - 1)) - (1ll << 61)) * 0x1p-64 +
                         (double)u[1] * 0x1p-128;
        double s, c;
        sincos_turn(r, &s, &c);
        const double cv = quad == 0 ? c : quad == 1 ? -s : quad == 2 ? -c : s;
        const double sv = quad == 0 ? s : quad == 1 ? c : quad == 2 ? -s : -c;
        int64_t cb = fast ? fast_bits(cv * ratio, ratio) : -1;
        int64_t sb = fast ? fast_bits(sv * ratio, ratio) : -1;
        if (cb < 0 || sb < 0) {
            uint32_t ce, se;
            entry_exact(k, g, p, &ce, &se);
            cb = ce;
            sb = se;
        }
        const uint32_t cbits = (uint32_t)cb, sbits = (uint32_t)sb;
        const int64_t at = (p - first) * half + i;
        memcpy(&cos_out[at], &cbits, sizeof cbits);
        memcpy(&sin_out[at], &sbits, sizeof sbits);
        /* u += G mod 2^192 */
        const uint64_t u2 = u[2] + G[2], c2 = u2 < G[2];
        const uint64_t u1 = u[1] + G[1] + c2, c1 = u1 < G[1] || (c2 && u1 == G[1]);
        u[2] = u2;
        u[1] = u1;
        u[0] += G[0] + c1;
    }
}

mla_status mla_rope_table_rows(const mla_rope_config *cfg, int64_t first, int64_t count,
                               float *cos_out, float *sin_out)
{
    if (!cfg || ((!cos_out || !sin_out) && count > 0))
        return MLA_ERR_NULL_POINTER;
    const int yarn = cfg->factor > 1.0;
    if (cfg->dim <= 0 || cfg->dim % 2 || !(cfg->base > 1.0) || !is_finite(cfg->base) ||
        !is_finite(cfg->factor) || first < 0 || count < 0 || count > INT64_MAX - first)
        return MLA_ERR_INVALID_ARGUMENT;
    if (yarn && (cfg->original_max_pos <= 0 || !(cfg->beta_fast > 0) || !(cfg->beta_slow > 0) ||
                 !is_finite(cfg->beta_fast) || !is_finite(cfg->beta_slow) || !is_finite(cfg->mscale) ||
                 !is_finite(cfg->mscale_all_dim)))
        return MLA_ERR_INVALID_ARGUMENT;
    const int64_t half = cfg->dim / 2;
    int64_t entries;
    if (__builtin_mul_overflow(count, half, &entries))
        return MLA_ERR_OVERFLOW;
    rope_consts k;
    const mla_status st = rope_consts_init(cfg, &k);
    if (st != MLA_OK || count == 0)
        return st;
    bigfloat f0 = mla_bf_from_int(1);
    for (int64_t i = 0; i < half; ++i) {
        rope_column(&k, rope_frequency(&k, i, f0), i, half, first, count, cos_out, sin_out);
        f0 = mla_bf_mul(f0, k.step);
    }
    return MLA_OK;
}

mla_status mla_rope_table_build(const mla_rope_config *cfg, int64_t max_pos, float *cos_out,
                                float *sin_out)
{
    return mla_rope_table_rows(cfg, 0, max_pos, cos_out, sin_out);
}
