/* Seeded input generation (benchdnn fill_data style).
 *
 * Every value is a pure function of (seed, stream, logical index): the draws
 * come from splitmix64's output function applied to a counter, and the
 * per-block choices (a zero block, a huge block...) from the block's index.
 * The data is therefore the same for any thread count, any fill order and
 * any memory layout of the view. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "conformance/conf.h"

uint64_t conf_mix64(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

uint64_t conf_rng(uint64_t seed, uint64_t stream, uint64_t i, unsigned r)
{
    return conf_mix64(conf_mix64(seed ^ conf_mix64(stream)) + i * 8u + r);
}

const char *conf_dist_name(int dist)
{
    static const char *const names[] = {"edge",   "blocks",       "specials",
                                        "codes",  "scales",       "scales+specials",
                                        "act",    "act+specials", "finite codes",
                                        "act narrow", "norm weight"};
    return (dist >= 0 && dist < CONF_DIST_COUNT) ? names[dist] : "?";
}

/* Exponent range of a float source: smallest subnormal, smallest and largest normal. */
typedef struct erange {
    int sub, min, max;
} erange;

static erange range_of(mla_dtype dt)
{
    if (dt == MLA_DTYPE_F16)
        return (erange){-24, -14, 15};
    return (erange){-149, -126, 127};
}

static int clampi(int v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : v; }

/* A significand in [1, 2): random, or with only its top t bits kept so that
 * exact grid points and round-to-nearest ties of the narrow formats occur. */
static float significand(uint64_t r)
{
    uint32_t m = (uint32_t)(r & 0x7FFFFF);
    if ((r >> 23) & 1) {
        unsigned t = (unsigned)((r >> 24) % 12); /* 0..11 bits: fp4, fp8, bf16, f16 ties */
        m &= ~((1u << (23 - t)) - 1u);
    }
    return 1.0f + (float)m / 8388608.0f;
}

static float signed_value(uint64_t r, float mag) { return (r >> 63) ? -mag : mag; }

/* Element-wise edge mix (convert). */
static float edge_value(uint64_t r0, uint64_t r1, erange rg)
{
    unsigned cat = (unsigned)(r0 % 100);
    int e;
    if (cat < 3)
        return signed_value(r1, NAN);
    if (cat < 6)
        return signed_value(r1, INFINITY);
    if (cat < 11)
        return signed_value(r1, 0.0f);
    if (cat < 18) /* the source's subnormals and the narrow formats' underflow region */
        e = (r0 >> 8) & 1 ? rg.sub + (int)((r1 >> 8) % (unsigned)(rg.min - rg.sub + 3))
                          : -16 + (int)((r1 >> 8) % 10);
    else if (cat < 25) /* near the source's maximum, and the fp8 / f16 saturation edge */
        e = (r0 >> 8) & 1 ? rg.max - (int)((r1 >> 8) % 4) : 7 + (int)((r1 >> 8) % 10);
    else if (cat < 35) { /* exact fp8 midpoints: 4 significant mantissa bits */
        e = -12 + (int)((r1 >> 8) % 22);
        float m = 1.0f + (float)((r1 >> 16) % 16) / 16.0f;
        return signed_value(r1, ldexpf(m, e));
    } else
        e = -14 + (int)((r1 >> 8) % 25);
    e = clampi(e, rg.sub, rg.max);
    return signed_value(r1, ldexpf(significand(r0 >> 8), e));
}

/* Block-structured values (quantizers): per block, one of several regimes. */
static float block_value(uint64_t seed, uint64_t stream, int64_t i, int64_t block, erange rg,
                         int specials)
{
    uint64_t b = conf_rng(seed, stream, (uint64_t)(i / block), 7);
    uint64_t r0 = conf_rng(seed, stream, (uint64_t)i, 0), r1 = conf_rng(seed, stream, (uint64_t)i, 1);
    unsigned cat = (unsigned)(b % 100);
    int E = -20 + (int)((b >> 8) % 41);
    if (cat < 60) { /* ordinary block: a block exponent, elements within 4 binades below
                       * it (a 4-bit format resolves little more: wider spreads are mostly 0) */
        if (r0 % 20 == 0)
            return signed_value(r1, 0.0f);
        return signed_value(r1, ldexpf(significand(r0 >> 8), clampi(E - (int)(r1 % 4), rg.sub, rg.max)));
    }
    if (cat < 66) /* all zeros, both signs */
        return signed_value(r1, 0.0f);
    if (cat < 72) /* subnormal or tiny block */
        return signed_value(r1, ldexpf(significand(r0 >> 8), rg.sub + (int)(r1 % 12)));
    if (cat < 78) /* huge block, up to the source's max */
        return signed_value(r1, ldexpf(significand(r0 >> 8), rg.max - (int)(r1 % 5)));
    if (cat < 90) {
        /* Rounding boundaries: the block max has a mantissa >= 1.75 (where the
         * MXFP4 production rule rounds the scale up and OCP does not), the
         * rest sit on e2m1 grid points and midpoints of that scale. */
        static const float grid[] = {0.25f, 0.5f, 0.75f, 1.0f, 1.25f, 1.5f, 1.75f,
                                     2.0f,  2.5f, 3.0f,  3.5f, 4.0f,  5.0f, 6.0f};
        if (i % block == (int64_t)((b >> 16) % (uint64_t)block))
            return signed_value(r1, ldexpf(1.75f + (float)(r0 % 64) / 256.0f, E));
        return signed_value(r1, ldexpf(grid[r0 % 14], E - 2));
    }
    if (specials && r0 % 16 == 0) /* NaN / Inf sprinkled into an otherwise ordinary block */
        return signed_value(r1, (r1 & 2) ? NAN : INFINITY);
    return signed_value(r1, ldexpf(significand(r0 >> 8), clampi(E - (int)(r1 % 4), rg.sub, rg.max)));
}

/* Prepare-path activations and weights, one regime per row (block = row
 * length). Magnitudes stay below 2^15 (finite in f16, and an fp32 sum of
 * squares of a few thousand of them cannot overflow) and above 2^-16 (no
 * fp32 underflow in squares or products), so that a correct fp32 kernel and
 * the float64 reference differ only by rounding. */
static float act_value(uint64_t seed, uint64_t stream, int64_t i, int64_t block, int specials,
                       int narrow)
{
    uint64_t b = conf_rng(seed, stream, (uint64_t)(i / block), 7);
    uint64_t r0 = conf_rng(seed, stream, (uint64_t)i, 0), r1 = conf_rng(seed, stream, (uint64_t)i, 1);
    unsigned cat = (unsigned)(b % 100);
    int E = -3 + (int)((b >> 8) % 7);
    if (narrow) /* 3 binades: what a 4-bit format resolves without flushing to zero */
        return signed_value(r1, r0 % 29 == 0 ? 0.0f
                                             : ldexpf(significand(r0 >> 8), E - (int)(r1 % 3)));
    if (specials && r0 % 23 == 0) {
        static const float sp[] = {NAN, INFINITY, 0.0f};
        return signed_value(r1, sp[(r1 >> 8) % 3]);
    }
    if (cat < 62) { /* ordinary row: a row binade, elements up to 6 binades below it */
        if (r0 % 33 == 0)
            return signed_value(r1, 0.0f);
        return signed_value(r1, ldexpf(significand(r0 >> 8), E - (int)(r1 % 6)));
    }
    if (cat < 74) /* tiny row: mean square 2^-26 .. 2^-18, where eps = 1e-6 matters */
        return signed_value(r1, ldexpf(significand(r0 >> 8), -13 + (int)((b >> 8) % 4) -
                                                              (int)(r1 % 3)));
    if (cat < 84) { /* one outlier per row, 2^6 .. 2^10 above the row */
        float v = ldexpf(significand(r0 >> 8), E - (int)(r1 % 4));
        if (i % block == (int64_t)((b >> 16) % (uint64_t)block))
            v = ldexpf(v, 6 + (int)(r0 % 5));
        return signed_value(r1, v);
    }
    if (cat < 88) /* zero row, both signs */
        return signed_value(r1, 0.0f);
    /* a coarse grid (k / 8): exact in every format, ties of bf16 sums */
    return signed_value(r1, (float)(r0 % 64) / 8.0f);
}

static int is_fp8_nan(mla_dtype dt, unsigned char c)
{
    if (dt == MLA_DTYPE_FP8_E4M3FNUZ)
        return c == 0x80;
    return dt == MLA_DTYPE_FP8_E4M3FN && (c & 0x7F) == 0x7F;
}

/* Scale inputs of the dequantizers. */
static void scale_bytes(mla_dtype dt, uint64_t r, int specials, unsigned char *out)
{
    unsigned cat = (unsigned)(r % 100);
    if (dt == MLA_DTYPE_E8M0 || dt == MLA_DTYPE_U8) {
        static const unsigned char edge[] = {0, 1, 2, 125, 253, 254};
        *out = cat < 90 ? (unsigned char)(107 + (r >> 8) % 41) : edge[(r >> 8) % 6];
        if (specials && cat >= 96)
            *out = 0xFF;
        return;
    }
    float s;
    if (cat < 85)
        s = ldexpf(significand(r >> 8), -20 + (int)((r >> 40) % 25));
    else if (cat < 90)
        s = ldexpf(significand(r >> 8), -140 + (int)((r >> 40) % 10)); /* subnormal scales */
    else if (cat < 95)
        s = ldexpf(significand(r >> 8), 110 + (int)((r >> 40) % 18)); /* overflow on use */
    else
        s = (cat < 98 || !specials) ? (cat & 1 ? 1.0f : 0.0f) : (cat & 1 ? INFINITY : NAN);
    memcpy(out, &s, 4);
}

static void encode(mla_dtype dt, float v, int finite_only, unsigned char *out)
{
    uint32_t u;
    uint16_t h;
    switch (dt) {
    case MLA_DTYPE_F32:
        memcpy(out, &v, 4);
        break;
    case MLA_DTYPE_F64: {
        double d = v;
        memcpy(out, &d, 8);
        break;
    }
    case MLA_DTYPE_BF16: /* any bit pattern is a valid input: truncation is enough */
        memcpy(&u, &v, 4);
        h = (uint16_t)(u >> 16);
        if (finite_only && (h & 0x7F80) == 0x7F80)
            h = (uint16_t)((h & 0x8000) | 0x7F7F);
        memcpy(out, &h, 2);
        break;
    case MLA_DTYPE_F16:
        h = mla_f32_to_f16(v);
        if (finite_only && (h & 0x7C00) == 0x7C00)
            h = (uint16_t)((h & 0x8000) | 0x7BFF);
        memcpy(out, &h, 2);
        break;
    default: /* one-byte codes */
        *out = (unsigned char)(int)v;
        break;
    }
}

void conf_fill(conf_problem *p, int i, int dist, uint64_t seed, int64_t block)
{
    conf_arg *a = &p->arg[i];
    mla_dtype dt = a->t.dtype;
    size_t es = mla_dtype_size(dt);
    erange rg = range_of(dt);
    unsigned char *base = conf_arg_elem0(a);
    conf_iter it;
    int64_t off, k = 0;
    uint64_t stream = (uint64_t)i + 1;
    if (block <= 0)
        block = 32;
    conf_iter_init(&it, &a->t);
    while (conf_iter_next(&it, &off)) {
        unsigned char *dst = base + off * (int64_t)es;
        uint64_t r0 = conf_rng(seed, stream, (uint64_t)k, 0);
        uint64_t r1 = conf_rng(seed, stream, (uint64_t)k, 1);
        switch (dist) {
        case CONF_DIST_EDGE:
            encode(dt, edge_value(r0, r1, rg), 0, dst);
            break;
        case CONF_DIST_BLOCKS:
        case CONF_DIST_SPECIALS:
            encode(dt, block_value(seed, stream, k, block, rg, dist == CONF_DIST_SPECIALS),
                   dist == CONF_DIST_BLOCKS, dst);
            break;
        case CONF_DIST_CODES: /* every code once (an odd multiplier permutes 0..255, so
                               * short inputs still see varied nibbles), then uniform */
            *dst = (unsigned char)(k < 256 ? (k * 0x9D) & 0xFF : (int64_t)(r0 & 0xFF));
            break;
        case CONF_DIST_ACT:
        case CONF_DIST_ACT_SPECIALS:
        case CONF_DIST_ACT_NARROW:
            encode(dt,
                   act_value(seed, stream, k, block, dist == CONF_DIST_ACT_SPECIALS,
                             dist == CONF_DIST_ACT_NARROW),
                   0, dst);
            break;
        case CONF_DIST_NORM_WEIGHT: /* RMSNorm weights: 2^-3 .. 2^1, one in eight negative */
            encode(dt, signed_value(r1 % 8 ? 0 : ~0ull,
                                    ldexpf(significand(r0 >> 8), -3 + (int)(r1 % 4))),
                   0, dst);
            break;
        case CONF_DIST_CODES_FINITE: /* uniform codes, NaN codes moved to a finite one */
            *dst = (unsigned char)(r0 & 0xFF);
            if (is_fp8_nan(dt, *dst))
                *dst = (unsigned char)((r0 >> 8) & 0x7E);
            break;
        default: /* CONF_DIST_SCALES, CONF_DIST_SCALES_SPECIALS */
            scale_bytes(dt, r0, dist == CONF_DIST_SCALES_SPECIALS, dst);
            break;
        }
        ++k;
    }
}

void conf_fill_iota(conf_problem *p, int i)
{
    conf_arg *a = &p->arg[i];
    size_t es = mla_dtype_size(a->t.dtype);
    conf_iter it;
    int64_t off, k = 0;
    conf_iter_init(&it, &a->t);
    while (conf_iter_next(&it, &off)) {
        uint64_t v = (uint64_t)k++;
        memcpy(conf_arg_elem0(a) + off * (int64_t)es, &v, es); /* little-endian host */
    }
}

void conf_set_value(conf_problem *p, int i, int64_t k, double v)
{
    conf_arg *a = &p->arg[i];
    unsigned char *dst = conf_elem_at(a, conf_arg_elem0(a), k);
    if (a->t.dtype == MLA_DTYPE_I32) {
        int32_t x = (int32_t)v;
        memcpy(dst, &x, 4); /* little-endian host */
    } else if (a->t.dtype == MLA_DTYPE_I64) {
        int64_t x = (int64_t)v;
        memcpy(dst, &x, 8);
    } else {
        encode(a->t.dtype, (float)v, 0, dst);
    }
}

void conf_fill_slots(conf_problem *p, int i, int64_t capacity, uint64_t seed, int negatives)
{
    const int64_t T = conf_numel(&p->arg[i]);
    /* distinct slots: the first T of a seeded permutation of the capacity,
     * with the cache's last slot first; every sixth token skipped (< 0) */
    int64_t *perm = malloc((size_t)(capacity > 0 ? capacity : 1) * sizeof *perm);
    if (!perm)
        return;
    for (int64_t k = 0; k < capacity; ++k)
        perm[k] = capacity - 1 - k;
    for (int64_t k = 1; k < capacity; ++k) { /* Fisher-Yates over all but the first */
        int64_t j = 1 + (int64_t)(conf_rng(seed, 13, (uint64_t)k, 0) % (uint64_t)k);
        int64_t tmp = perm[k];
        perm[k] = perm[j];
        perm[j] = tmp;
    }
    for (int64_t t = 0; t < T; ++t) {
        int64_t slot = t < capacity ? perm[t] : -1;
        if (negatives && t % 6 == 5)
            slot = -1 - (int64_t)(conf_rng(seed, 14, (uint64_t)t, 0) % 5);
        conf_set_value(p, i, t, (double)slot);
    }
    free(perm);
}

void conf_fill_block_table(conf_problem *p, int i, uint64_t seed, int64_t nb, int64_t S,
                           int64_t max_blocks, const int64_t *used, const int64_t *first,
                           int64_t *phys)
{
    for (int64_t k = 0; k < nb; ++k)
        phys[k] = k;
    for (int64_t k = nb - 1; k > 0; --k) { /* Fisher-Yates */
        const int64_t j = (int64_t)(conf_rng(seed, 42, (uint64_t)k, 0) % (uint64_t)(k + 1));
        const int64_t tmp = phys[k];
        phys[k] = phys[j], phys[j] = tmp;
    }
    for (int64_t s = 0; i >= 0 && s < S; ++s)
        for (int64_t b = 0; b < max_blocks; ++b)
            conf_set_value(p, i, s * max_blocks + b,
                           b < used[s] ? (double)phys[first[s] + b] : -1.0);
}

uint64_t conf_moderate_code(mla_dtype dt, uint64_t r)
{
    const uint64_t sign = (r >> 40) & 1;
    if (dt == MLA_DTYPE_BF16)
        return sign << 15 | (uint64_t)(124 + r % 4) << 7 | ((r >> 8) & 0x7F);
    const uint64_t e = (dt == MLA_DTYPE_FP8_E4M3FNUZ ? 5 : 4) + r % 4;
    return sign << 7 | e << 3 | ((r >> 8) & 7);
}

void conf_put_bits(unsigned char *p, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; ++i)
        p[i] = (unsigned char)(v >> (8 * i));
}

void conf_fill_cache_written(conf_problem *p, int i, uint64_t seed, mla_cache_layout layout,
                             mla_dtype dt, int64_t block_size, int64_t L, int64_t R)
{
    const conf_arg *a = &p->arg[i];
    const int64_t nb = a->t.shape[0], bb = a->t.shape[1];
    const int64_t tb = L + 4 * (L / 128) + 2 * R; /* an FP8_SCALED token's bytes */
    const int es = dt == MLA_DTYPE_BF16 ? 2 : 1;
    for (int64_t b = 0; b < nb; ++b) {
        unsigned char *blk = conf_arg_elem0(a) + b * a->t.stride[0];
        for (int64_t e = 0; layout != MLA_CACHE_FP8_SCALED && e < bb / es; ++e)
            conf_put_bits(blk + e * es,
                          conf_moderate_code(dt, conf_rng(seed, 40, (uint64_t)(b * bb + e), 0)),
                          es);
        for (int64_t j = 0; layout == MLA_CACHE_FP8_SCALED && j < block_size * tb; ++j) {
            const uint64_t r = conf_rng(seed, 41, (uint64_t)(b * block_size * tb + j), 0);
            const int64_t k = j % tb;
            if (k < L)
                blk[j] = (unsigned char)conf_moderate_code(dt, r);
            else if (k < L + 4 * (L / 128) && (k - L) % 4 == 0)
                conf_put_bits(blk + j, (uint64_t)(125 + r % 3) << 23, 4); /* 2^-2 .. 2^0 */
            else if (k >= L + 4 * (L / 128) && (k - L) % 2 == 0)
                conf_put_bits(blk + j, conf_moderate_code(MLA_DTYPE_BF16, r), 2);
        }
    }
}
