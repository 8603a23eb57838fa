/* Unit tests of the scalar number formats (MLA.md section 5) and of the
 * reference format ops built on them. Self-contained: the expected values
 * come from the format definitions, not from files.
 *
 * Strategy for every rounding: walk all codes of a format, and for each pair
 * of adjacent finite codes check the midpoint (a tie: goes to the even code)
 * and its two float neighbours (go to the nearer code). */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mla/mla.h"
#include "tests/test_util.h"

static uint32_t bits_of(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
}

static float float_of(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* Reports the first few failures of a loop with their inputs. */
static int loop_fail_budget = 20;
#define CHECK_LOOP(cond, ...)                                                                     \
    do {                                                                                          \
        if (cond) {                                                                               \
            ++test_passed_;                                                                       \
        } else {                                                                                  \
            ++test_failed_;                                                                       \
            if (loop_fail_budget-- > 0) {                                                         \
                fprintf(stderr, "%s:%d: CHECK failed: %s: ", __FILE__, __LINE__, #cond);         \
                fprintf(stderr, __VA_ARGS__);                                                     \
                fputc('\n', stderr);                                                              \
            }                                                                                     \
        }                                                                                         \
    } while (0)

/* ----------------------------------------------- a format under test */

typedef struct format {
    const char *name;
    int ncodes;                 /* 1 << bits */
    unsigned sign_bit;          /* code bit of the sign */
    float (*decode)(unsigned code, const struct format *f);
    unsigned (*encode)(float x, const struct format *f);
    mla_dtype fp8;
    mla_saturation mode;
} format;

static float dec_bf16(unsigned c, const format *f) { (void)f; return mla_bf16_to_f32((uint16_t)c); }
static unsigned enc_bf16(float x, const format *f) { (void)f; return mla_f32_to_bf16(x); }
static float dec_f16(unsigned c, const format *f) { (void)f; return mla_f16_to_f32((uint16_t)c); }
static unsigned enc_f16(float x, const format *f) { (void)f; return mla_f32_to_f16(x); }
static float dec_fp8(unsigned c, const format *f) { return mla_fp8_to_f32((uint8_t)c, f->fp8); }
static unsigned enc_fp8(float x, const format *f) { return mla_f32_to_fp8(x, f->fp8, f->mode); }
static float dec_fp4(unsigned c, const format *f) { (void)f; return mla_fp4_to_f32((uint8_t)c); }
static unsigned enc_fp4(float x, const format *f) { (void)f; return mla_f32_to_fp4(x); }

static const format FORMATS[] = {
    {"bf16", 1 << 16, 0x8000u, dec_bf16, enc_bf16, MLA_DTYPE_COUNT, MLA_SATURATE},
    {"f16", 1 << 16, 0x8000u, dec_f16, enc_f16, MLA_DTYPE_COUNT, MLA_SATURATE},
    {"e4m3fn sat", 256, 0x80u, dec_fp8, enc_fp8, MLA_DTYPE_FP8_E4M3FN, MLA_SATURATE},
    {"e4m3fn nonsat", 256, 0x80u, dec_fp8, enc_fp8, MLA_DTYPE_FP8_E4M3FN, MLA_NON_SATURATE},
    {"e4m3fnuz sat", 256, 0x80u, dec_fp8, enc_fp8, MLA_DTYPE_FP8_E4M3FNUZ, MLA_SATURATE},
    {"e4m3fnuz nonsat", 256, 0x80u, dec_fp8, enc_fp8, MLA_DTYPE_FP8_E4M3FNUZ, MLA_NON_SATURATE},
    {"e2m1", 16, 0x8u, dec_fp4, enc_fp4, MLA_DTYPE_COUNT, MLA_SATURATE},
};

/* Sign applied to a code; e4m3fnuz has no -0, so -0 results encode as 0. */
static unsigned negate_code(unsigned c, const format *f)
{
    if (f->fp8 == MLA_DTYPE_FP8_E4M3FNUZ && c == 0)
        return 0;
    return c | f->sign_bit;
}

/* decode(c) then encode gives c back for every non-NaN code. */
static void test_round_trip(const format *f)
{
    for (int c = 0; c < f->ncodes; ++c) {
        float v = f->decode((unsigned)c, f);
        if (isnan(v))
            continue;
        CHECK_LOOP(f->encode(v, f) == (unsigned)c, "%s code 0x%x value %a", f->name, c, (double)v);
    }
}

/* Positive finite codes in increasing order are 0, 1, 2, ... up to the
 * largest finite one: midpoints tie to the even code, their float
 * neighbours go to the nearer code, and the negatives mirror that. */
static void test_ties(const format *f)
{
    for (unsigned c = 0; c + 1 < f->sign_bit; ++c) {
        float lo = f->decode(c, f), hi = f->decode(c + 1, f);
        if (!isfinite(lo) || !isfinite(hi))
            break;
        float mid = (float)(((double)lo + hi) / 2); /* exact: few significant bits */
        unsigned even = (c % 2 == 0) ? c : c + 1;
        float below = nextafterf(mid, -INFINITY), above = nextafterf(mid, INFINITY);
        CHECK_LOOP(f->encode(mid, f) == even, "%s tie %a", f->name, (double)mid);
        CHECK_LOOP(f->encode(below, f) == c, "%s below tie %a", f->name, (double)below);
        CHECK_LOOP(f->encode(above, f) == c + 1, "%s above tie %a", f->name, (double)above);
        CHECK_LOOP(f->encode(-mid, f) == negate_code(even, f), "%s tie -%a", f->name, (double)mid);
        CHECK_LOOP(f->encode(-below, f) == negate_code(c, f), "%s -%a", f->name, (double)below);
        CHECK_LOOP(f->encode(-above, f) == negate_code(c + 1, f), "%s -%a", f->name,
                   (double)above);
    }
}

static void test_all_formats_exhaustive(void)
{
    for (size_t i = 0; i < sizeof FORMATS / sizeof FORMATS[0]; ++i) {
        test_round_trip(&FORMATS[i]);
        test_ties(&FORMATS[i]);
    }
}

/* ------------------------------------------------------ bf16 and fp16 */

static void test_bf16(void)
{
    CHECK(mla_f32_to_bf16(1.0f) == 0x3F80u);
    CHECK(mla_f32_to_bf16(-2.0f) == 0xC000u);
    CHECK(mla_f32_to_bf16(0.0f) == 0x0000u);
    CHECK(mla_f32_to_bf16(-0.0f) == 0x8000u);
    CHECK(mla_f32_to_bf16(1.0f + 0x1p-8f) == 0x3F80u);        /* tie, down to even */
    CHECK(mla_f32_to_bf16(1.0f + 3 * 0x1p-8f) == 0x3F82u);    /* tie, up to even */
    CHECK(mla_f32_to_bf16(INFINITY) == 0x7F80u);
    CHECK(mla_f32_to_bf16(-INFINITY) == 0xFF80u);
    CHECK(mla_f32_to_bf16(FLT_MAX) == 0x7F80u);                /* rounds past the max */
    CHECK(mla_f32_to_bf16(0x1.FEp127f) == 0x7F7Fu);            /* the largest bf16 */
    CHECK(mla_f32_to_bf16(0x1.FF0000p127f) == 0x7F80u);        /* tie above max: odd -> inf */
    CHECK(mla_f32_to_bf16(nextafterf(0x1.FFp127f, 0)) == 0x7F7Fu);
    CHECK(mla_f32_to_bf16(0x1p-133f) == 0x0001u);              /* smallest subnormal */
    CHECK(mla_f32_to_bf16(0x1p-134f) == 0x0000u);              /* tie to 0 */
    CHECK(mla_f32_to_bf16(nextafterf(0x1p-134f, 1)) == 0x0001u);
    CHECK(mla_f32_to_bf16(-0x1p-135f) == 0x8000u);             /* negative underflow keeps sign */
    CHECK(mla_f32_to_bf16(NAN) == 0x7FC0u);
    CHECK(mla_f32_to_bf16(-NAN) == 0xFFC0u);                   /* sign kept */
    CHECK(mla_f32_to_bf16(float_of(0x7F800001u)) == 0x7FC0u);  /* signalling, tiny payload */
    CHECK(mla_bf16_to_f32(0x3F80u) == 1.0f);
    CHECK(mla_bf16_to_f32(0x0001u) == 0x1p-133f);
    CHECK(isinf(mla_bf16_to_f32(0xFF80u)) && mla_bf16_to_f32(0xFF80u) < 0);
    CHECK(bits_of(mla_bf16_to_f32(0x7FC1u)) == 0x7FC10000u);   /* widening keeps the payload */
    CHECK(bits_of(mla_bf16_to_f32(0x8000u)) == 0x80000000u);
}

static void test_f16(void)
{
    CHECK(mla_f32_to_f16(1.0f) == 0x3C00u);
    CHECK(mla_f32_to_f16(-0.0f) == 0x8000u);
    CHECK(mla_f32_to_f16(65504.0f) == 0x7BFFu);
    CHECK(mla_f32_to_f16(65519.0f) == 0x7BFFu);
    CHECK(mla_f32_to_f16(65520.0f) == 0x7C00u);                /* tie above max: odd -> inf */
    CHECK(mla_f32_to_f16(-1e6f) == 0xFC00u);
    CHECK(mla_f32_to_f16(INFINITY) == 0x7C00u);
    CHECK(mla_f32_to_f16(0x1p-24f) == 0x0001u);
    CHECK(mla_f32_to_f16(0x1p-25f) == 0x0000u);                /* tie to 0 */
    CHECK(mla_f32_to_f16(3 * 0x1p-25f) == 0x0002u);            /* tie 1|2 -> 2 */
    CHECK(mla_f32_to_f16(nextafterf(0x1p-25f, 1)) == 0x0001u);
    CHECK(mla_f32_to_f16(0x1p-14f) == 0x0400u);                /* smallest normal */
    CHECK(mla_f32_to_f16(0x1.FF8p-15f) == 0x03FFu);            /* largest subnormal */
    CHECK(mla_f32_to_f16(0x1.FFCp-15f) == 0x0400u);            /* tie 0x3FF|0x400 -> even */
    CHECK(mla_f32_to_f16(1e-10f) == 0x0000u);
    CHECK(mla_f32_to_f16(-1e-10f) == 0x8000u);
    CHECK(mla_f32_to_f16(NAN) == 0x7E00u);
    CHECK(mla_f32_to_f16(-NAN) == 0xFE00u);
    CHECK(mla_f16_to_f32(0x7BFFu) == 65504.0f);
    CHECK(mla_f16_to_f32(0x0001u) == 0x1p-24f);
    CHECK(mla_f16_to_f32(0x3555u) == 0x1.554p-2f);
    CHECK(isnan(mla_f16_to_f32(0x7E00u)));
    CHECK(bits_of(mla_f16_to_f32(0xFC00u)) == 0xFF800000u);
}

/* ------------------------------------------------------------------ fp8 */

static void test_fp8_values(void)
{
    const mla_dtype fn = MLA_DTYPE_FP8_E4M3FN, uz = MLA_DTYPE_FP8_E4M3FNUZ;
    CHECK(mla_fp8_max(fn) == 448.0f);
    CHECK(mla_fp8_max(uz) == 240.0f);
    CHECK(isnan(mla_fp8_max(MLA_DTYPE_F32)));
    CHECK(mla_fp8_to_f32(0x7E, fn) == 448.0f);
    CHECK(mla_fp8_to_f32(0xFE, fn) == -448.0f);
    CHECK(mla_fp8_to_f32(0x01, fn) == 0x1p-9f);
    CHECK(mla_fp8_to_f32(0x08, fn) == 0x1p-6f);
    CHECK(mla_fp8_to_f32(0x38, fn) == 1.0f);
    CHECK(bits_of(mla_fp8_to_f32(0x80, fn)) == 0x80000000u);
    CHECK(isnan(mla_fp8_to_f32(0x7F, fn)) && isnan(mla_fp8_to_f32(0xFF, fn)));
    CHECK(mla_fp8_to_f32(0x7F, uz) == 240.0f);
    CHECK(mla_fp8_to_f32(0xFF, uz) == -240.0f);
    CHECK(mla_fp8_to_f32(0x01, uz) == 0x1p-10f);
    CHECK(mla_fp8_to_f32(0x08, uz) == 0x1p-7f);
    CHECK(mla_fp8_to_f32(0x40, uz) == 1.0f);
    CHECK(isnan(mla_fp8_to_f32(0x80, uz)));
    CHECK(isnan(mla_fp8_to_f32(0x38, MLA_DTYPE_BF16)));
    CHECK(mla_f32_to_fp8(1.0f, MLA_DTYPE_F16, MLA_SATURATE) == 0);
    int nan_fn = 0, nan_uz = 0;
    for (int c = 0; c < 256; ++c) {
        nan_fn += isnan(mla_fp8_to_f32((uint8_t)c, fn));
        nan_uz += isnan(mla_fp8_to_f32((uint8_t)c, uz));
    }
    CHECK(nan_fn == 2);
    CHECK(nan_uz == 1);
}

static void test_fp8_specials(void)
{
    const mla_dtype fn = MLA_DTYPE_FP8_E4M3FN, uz = MLA_DTYPE_FP8_E4M3FNUZ;
    const mla_saturation S = MLA_SATURATE, N = MLA_NON_SATURATE;
    /* e4m3fn: 448 = 1.75 * 2^8; 464 ties between 448 (even) and 480 (not a
     * value): stays 448; above it overflows. */
    CHECK(mla_f32_to_fp8(464.0f, fn, S) == 0x7E);
    CHECK(mla_f32_to_fp8(464.0f, fn, N) == 0x7E);
    CHECK(mla_f32_to_fp8(nextafterf(464.0f, 1e9f), fn, S) == 0x7E);
    CHECK(mla_f32_to_fp8(nextafterf(464.0f, 1e9f), fn, N) == 0x7F);
    CHECK(mla_f32_to_fp8(-nextafterf(464.0f, 1e9f), fn, S) == 0xFE);
    CHECK(mla_f32_to_fp8(-nextafterf(464.0f, 1e9f), fn, N) == 0xFF);
    CHECK(mla_f32_to_fp8(1e30f, fn, S) == 0x7E);
    CHECK(mla_f32_to_fp8(INFINITY, fn, S) == 0x7E);
    CHECK(mla_f32_to_fp8(-INFINITY, fn, S) == 0xFE);
    CHECK(mla_f32_to_fp8(INFINITY, fn, N) == 0x7F);
    CHECK(mla_f32_to_fp8(-INFINITY, fn, N) == 0xFF);
    CHECK(mla_f32_to_fp8(NAN, fn, S) == 0x7F);
    CHECK(mla_f32_to_fp8(-NAN, fn, S) == 0xFF);
    CHECK(mla_f32_to_fp8(NAN, fn, N) == 0x7F);
    CHECK(mla_f32_to_fp8(-0.0f, fn, S) == 0x80);
    CHECK(mla_f32_to_fp8(-0x1p-11f, fn, S) == 0x80); /* below half the smallest: -0 */
    CHECK(mla_f32_to_fp8(0x1p-10f, fn, S) == 0x00);  /* tie 0|2^-9 -> 0 */
    CHECK(mla_f32_to_fp8(0x1.8p-9f, fn, S) == 0x02); /* tie 1|2 -> 2 */
    /* e4m3fnuz: 240 = 1.875 * 2^7 is odd; the tie 248 goes to 256: overflow. */
    CHECK(mla_f32_to_fp8(240.0f, uz, N) == 0x7F);
    CHECK(mla_f32_to_fp8(nextafterf(248.0f, 0), uz, N) == 0x7F);
    CHECK(mla_f32_to_fp8(248.0f, uz, S) == 0x7F);
    CHECK(mla_f32_to_fp8(248.0f, uz, N) == 0x80);
    CHECK(mla_f32_to_fp8(-248.0f, uz, S) == 0xFF);
    CHECK(mla_f32_to_fp8(-248.0f, uz, N) == 0x80);
    CHECK(mla_f32_to_fp8(INFINITY, uz, S) == 0x7F);
    CHECK(mla_f32_to_fp8(-INFINITY, uz, S) == 0xFF);
    CHECK(mla_f32_to_fp8(-INFINITY, uz, N) == 0x80);
    CHECK(mla_f32_to_fp8(NAN, uz, S) == 0x80);
    CHECK(mla_f32_to_fp8(-NAN, uz, N) == 0x80);
    CHECK(mla_f32_to_fp8(-0.0f, uz, S) == 0x00);       /* no -0 */
    CHECK(mla_f32_to_fp8(-0x1p-12f, uz, N) == 0x00);   /* negative underflow: +0 */
    CHECK(mla_f32_to_fp8(-0x1p-11f, uz, S) == 0x00);   /* tie 0|-2^-10 -> 0 */
    CHECK(mla_f32_to_fp8(-nextafterf(0x1p-11f, 1), uz, S) == 0x81);
}

/* ------------------------------------------------------- e8m0 and fp4 */

static void test_e8m0(void)
{
    for (int c = 0; c < 255; ++c)
        CHECK_LOOP(mla_e8m0_to_f32((uint8_t)c) == ldexpf(1.0f, c - 127), "e8m0 0x%x", c);
    CHECK(mla_e8m0_to_f32(0) == 0x1p-127f);
    CHECK(mla_e8m0_to_f32(127) == 1.0f);
    CHECK(mla_e8m0_to_f32(254) == 0x1p127f);
    CHECK(isnan(mla_e8m0_to_f32(255)));
}

static void test_fp4(void)
{
    static const float values[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
    for (int c = 0; c < 16; ++c) {
        float v = mla_fp4_to_f32((uint8_t)c);
        CHECK_LOOP(fabsf(v) == values[c & 7] && !signbit(v) == !(c & 8), "fp4 code %d", c);
        CHECK_LOOP(mla_fp4_to_f32((uint8_t)(c | 0xF0)) == v, "fp4 high bits ignored, %d", c);
    }
    CHECK(mla_f32_to_fp4(0.25f) == 0x0);  /* ties to the even code */
    CHECK(mla_f32_to_fp4(0.75f) == 0x2);
    CHECK(mla_f32_to_fp4(1.25f) == 0x2);
    CHECK(mla_f32_to_fp4(1.75f) == 0x4);
    CHECK(mla_f32_to_fp4(2.5f) == 0x4);
    CHECK(mla_f32_to_fp4(3.5f) == 0x6);
    CHECK(mla_f32_to_fp4(5.0f) == 0x6);
    CHECK(mla_f32_to_fp4(nextafterf(5.0f, 6)) == 0x7);
    CHECK(mla_f32_to_fp4(6.0f) == 0x7);
    CHECK(mla_f32_to_fp4(7.0f) == 0x7);
    CHECK(mla_f32_to_fp4(1e30f) == 0x7);
    CHECK(mla_f32_to_fp4(-1e30f) == 0xF);
    CHECK(mla_f32_to_fp4(INFINITY) == 0x7);
    CHECK(mla_f32_to_fp4(-INFINITY) == 0xF);
    CHECK(mla_f32_to_fp4(-0.0f) == 0x8);  /* sign always kept */
    CHECK(mla_f32_to_fp4(-0.1f) == 0x8);
    CHECK(mla_f32_to_fp4(-0.25f) == 0x8);
    CHECK(mla_f32_to_fp4(-nextafterf(0.25f, 1)) == 0x9);
    CHECK(mla_f32_to_fp4(0x1p-149f) == 0x0);
    CHECK(mla_f32_to_fp4(NAN) == 0x7);    /* documented choice: like an infinity */
    CHECK(mla_f32_to_fp4(-NAN) == 0xF);
}

/* -------------------------------------------------------------- MXFP4 */

static const mla_mxfp4_rule RULES[2] = {MLA_MXFP4_PRODUCTION, MLA_MXFP4_OCP};

/* Quantizes a block and compares scale and all 32 codes. */
static void check_block(const float x[32], mla_mxfp4_rule rule, uint8_t want_scale,
                        const uint8_t want_codes[32], const char *what)
{
    uint8_t codes[16], scale;
    memset(codes, 0xAA, sizeof codes);
    mla_mxfp4_quantize_block(x, rule, codes, &scale);
    CHECK_LOOP(scale == want_scale, "%s rule %d: scale %d, want %d", what, (int)rule, scale,
               want_scale);
    for (int i = 0; i < 32; ++i) {
        uint8_t c = (uint8_t)((i % 2) ? codes[i / 2] >> 4 : codes[i / 2] & 0xF);
        CHECK_LOOP(c == want_codes[i], "%s rule %d: code %d is 0x%x, want 0x%x", what, (int)rule,
                   i, c, want_codes[i]);
    }
}

static void fill(float x[32], float v) { for (int i = 0; i < 32; ++i) x[i] = v; }

static void test_mxfp4_specials(void)
{
    float x[32];
    uint8_t zero[32] = {0};
    for (int r = 0; r < 2; ++r) {
        fill(x, 0.0f);
        check_block(x, RULES[r], 0, zero, "all zero");
        fill(x, -0.0f);
        check_block(x, RULES[r], 0, zero, "all -0"); /* amax 0: codes 0, not 0x8 */
        fill(x, 1.0f);
        x[7] = NAN;
        check_block(x, RULES[r], 0xFF, zero, "NaN");
        x[7] = INFINITY;
        check_block(x, RULES[r], 0xFF, zero, "inf");
        x[7] = -INFINITY;
        check_block(x, RULES[r], 0xFF, zero, "-inf");
    }
}

/* amax 6 = 1.5 * 2^2: both rules give e = 0 (scale 127) and q = x. */
static void test_mxfp4_ties(void)
{
    static const float in[16] = {6.0f, 0.25f, 0.75f, 1.25f, 1.75f, 2.5f,  3.5f,  5.0f,
                                 -0.0f, -0.1f, -0.25f, -0.3f, -5.0f, -6.0f, 0.5f, 3.0f};
    static const uint8_t out[16] = {0x7, 0x0, 0x2, 0x2, 0x4, 0x4, 0x6, 0x6,
                                    0x8, 0x8, 0x8, 0x9, 0xE, 0xF, 0x1, 0x5};
    float x[32];
    uint8_t want[32];
    for (int i = 0; i < 32; ++i) {
        x[i] = in[i % 16];
        want[i] = out[i % 16];
    }
    for (int r = 0; r < 2; ++r)
        check_block(x, RULES[r], 127, want, "ties");
}

/* The rules differ when amax's significand is >= 1.75: production rounds
 * amax up to the next power of two first. */
static void test_mxfp4_rules(void)
{
    float x[32];
    uint8_t want[32];
    /* amax 7 = 1.75 * 2^2: production e = 1, q = 3.5 -> 4; OCP e = 0, q = 7 -> 6. */
    fill(x, 7.0f);
    memset(want, 0x6, sizeof want);
    check_block(x, MLA_MXFP4_PRODUCTION, 128, want, "amax 7");
    memset(want, 0x7, sizeof want);
    check_block(x, MLA_MXFP4_OCP, 127, want, "amax 7");
    /* just below 1.75: both rules e = -2, q = 4 * x = 6.99.. -> 6 (saturation) */
    fill(x, nextafterf(1.75f, 0));
    check_block(x, MLA_MXFP4_PRODUCTION, 125, want, "amax 1.75-");
    check_block(x, MLA_MXFP4_OCP, 125, want, "amax 1.75-");
    /* amax 1: e = -2, q = 4x; 0.3 * 4 = 1.2 -> 1, -0.375 * 4 = -1.5 */
    fill(x, 0.3f);
    x[0] = 1.0f;
    x[1] = -0.375f;
    memset(want, 0x2, sizeof want);
    want[0] = 0x6;
    want[1] = 0xB;
    for (int r = 0; r < 2; ++r)
        check_block(x, RULES[r], 125, want, "amax 1");
}

/* The exponent clamps to [-127, 127]. */
static void test_mxfp4_range(void)
{
    float x[32];
    uint8_t want[32];
    /* subnormal amax: e = -127 (byte 0); q = x * 2^127. */
    fill(x, 0x1.8p-127f);                 /* q = 1.5 */
    memset(want, 0x3, sizeof want);
    for (int r = 0; r < 2; ++r)
        check_block(x, RULES[r], 0, want, "subnormal 1.5 * 2^-127");
    fill(x, 1e-40f);                      /* q = 0.017 -> 0 */
    memset(want, 0x0, sizeof want);
    for (int r = 0; r < 2; ++r)
        check_block(x, RULES[r], 0, want, "subnormal 1e-40");
    fill(x, 0x1p-126f);                   /* floor(log2) - 2 = -128 -> -127, q = 2 */
    memset(want, 0x4, sizeof want);
    for (int r = 0; r < 2; ++r)
        check_block(x, RULES[r], 0, want, "2^-126");
    /* FLT_MAX: OCP e = 125, q = 7.99.. -> 6. Production: amax rounded up
     * overflows fp32 to inf, log2(inf) clamps to 127, q = 1.99.. -> 2. */
    fill(x, FLT_MAX);
    memset(want, 0x7, sizeof want);
    check_block(x, MLA_MXFP4_OCP, 252, want, "FLT_MAX");
    memset(want, 0x4, sizeof want);
    check_block(x, MLA_MXFP4_PRODUCTION, 254, want, "FLT_MAX");
    fill(x, 0x1p127f);                    /* significand 1: both e = 125, q = 4 */
    memset(want, 0x6, sizeof want);
    for (int r = 0; r < 2; ++r)
        check_block(x, RULES[r], 252, want, "2^127");
}

static void test_preshuffle(void)
{
    CHECK(mla_scale_preshuffled_bytes(0, 0) == 0);
    CHECK(mla_scale_preshuffled_bytes(1, 1) == 256 * 8);
    CHECK(mla_scale_preshuffled_bytes(256, 8) == 256 * 8);
    CHECK(mla_scale_preshuffled_bytes(257, 9) == 512 * 16);
    CHECK(mla_scale_preshuffled_bytes(-1, 8) == -1);
    CHECK(mla_scale_preshuffled_bytes(INT64_MAX / 4, INT64_MAX / 4) == -1);
    CHECK(mla_scale_preshuffled_offset(0, 0, 8) == 0);
    CHECK(mla_scale_preshuffled_offset(16, 0, 8) == 1);
    CHECK(mla_scale_preshuffled_offset(0, 4, 8) == 2);
    CHECK(mla_scale_preshuffled_offset(1, 0, 8) == 4);
    CHECK(mla_scale_preshuffled_offset(0, 1, 8) == 64);
    CHECK(mla_scale_preshuffled_offset(0, 8, 16) == 256);
    CHECK(mla_scale_preshuffled_offset(32, 0, 16) == 32 * 16);
    /* Every (m, n) of the padded grid maps to a distinct byte of [0, bytes). */
    static const int64_t Ms[] = {1, 31, 256, 300}, Ns[] = {1, 7, 8, 13};
    for (int a = 0; a < 4; ++a) {
        for (int b = 0; b < 4; ++b) {
            int64_t M = Ms[a], N = Ns[b], bytes = mla_scale_preshuffled_bytes(M, N);
            int64_t Mp = (M + 255) / 256 * 256, Np = (N + 7) / 8 * 8;
            unsigned char *seen = calloc((size_t)bytes, 1);
            int ok = seen != NULL && bytes == Mp * Np;
            for (int64_t m = 0; ok && m < Mp; ++m)
                for (int64_t n = 0; ok && n < Np; ++n) {
                    int64_t o = mla_scale_preshuffled_offset(m, n, N);
                    ok = o >= 0 && o < bytes && !seen[o];
                    if (ok)
                        seen[o] = 1;
                }
            CHECK_LOOP(ok, "pre-shuffle bijection M=%lld N=%lld", (long long)M, (long long)N);
            free(seen);
        }
    }
}

/* ------------------------------------- reference ops through the API */

static mla_tensor tensor2(void *data, mla_dtype dtype, int64_t rows, int64_t cols)
{
    mla_tensor t;
    int64_t shape[2] = {rows, cols};
    mla_tensor_init(&t, data, dtype, MLA_MEMORY_HOST, 2, shape);
    return t;
}

/* A spread of values: ties, subnormals, large, negative zero. */
static float sample(int i)
{
    static const float v[12] = {0.25f, -1.75f, 3.5f, -0.0f, 1e-3f, 500.0f,
                                -7.0f, 0x1p-10f, 5.0f, -2.5f, 0.1f, 100.0f};
    return v[i % 12] * (float)(1 + i / 12);
}

/* Convert through strided views: x is a transposed [4, 6] view of a [6, 4]
 * buffer; every conversion must equal the scalar helpers. */
static void test_convert(mla_context *ctx)
{
    float xb[24];
    for (int i = 0; i < 24; ++i)
        xb[i] = sample(i);
    mla_tensor x = tensor2(xb, MLA_DTYPE_F32, 6, 4);
    mla_tensor_transpose(&x, 0, 1); /* x[r][c] = xb[c * 4 + r] */

    uint8_t p[4 * 3];
    mla_tensor y = tensor2(p, MLA_DTYPE_FP4X2, 4, 3);
    CHECK_STATUS(mla_convert(ctx, &x, &y, MLA_SATURATE), MLA_OK);
    int ok = 1;
    for (int r = 0; r < 4; ++r)
        for (int j = 0; j < 3; ++j) {
            uint8_t lo = mla_f32_to_fp4(xb[(2 * j) * 4 + r]);
            uint8_t hi = mla_f32_to_fp4(xb[(2 * j + 1) * 4 + r]);
            ok &= p[r * 3 + j] == (uint8_t)(lo | hi << 4);
        }
    CHECK(ok);

    uint16_t back[24];
    mla_tensor yb = tensor2(back, MLA_DTYPE_BF16, 4, 6);
    CHECK_STATUS(mla_convert(ctx, &y, &yb, MLA_SATURATE), MLA_OK);
    ok = 1;
    for (int r = 0; r < 4; ++r)
        for (int c = 0; c < 6; ++c) {
            uint8_t b = p[r * 3 + c / 2];
            float v = mla_fp4_to_f32((uint8_t)(c % 2 ? b >> 4 : b & 0xF));
            ok &= back[r * 6 + c] == mla_f32_to_bf16(v);
        }
    CHECK(ok);

    for (int fl = 0; fl < 2; ++fl)
        for (int mode = 0; mode < 2; ++mode) {
            mla_dtype d = fl ? MLA_DTYPE_FP8_E4M3FNUZ : MLA_DTYPE_FP8_E4M3FN;
            uint8_t q[24];
            mla_tensor yq = tensor2(q, d, 4, 6);
            CHECK_STATUS(mla_convert(ctx, &x, &yq, (mla_saturation)mode), MLA_OK);
            ok = 1;
            for (int r = 0; r < 4; ++r)
                for (int c = 0; c < 6; ++c)
                    ok &= q[r * 6 + c] == mla_f32_to_fp8(xb[c * 4 + r], d, (mla_saturation)mode);
            CHECK(ok);
            /* fp8 -> f16 goes through fp32 exactly */
            uint16_t h[24];
            mla_tensor yh = tensor2(h, MLA_DTYPE_F16, 4, 6);
            CHECK_STATUS(mla_convert(ctx, &yq, &yh, MLA_SATURATE), MLA_OK);
            ok = 1;
            for (int i = 0; i < 24; ++i)
                ok &= h[i] == mla_f32_to_f16(mla_fp8_to_f32(q[i], d));
            CHECK(ok);
        }

    uint8_t e[256];
    float ef[256];
    for (int i = 0; i < 256; ++i)
        e[i] = (uint8_t)i;
    int64_t n = 256;
    mla_tensor te, tf;
    mla_tensor_init(&te, e, MLA_DTYPE_E8M0, MLA_MEMORY_HOST, 1, &n);
    mla_tensor_init(&tf, ef, MLA_DTYPE_F32, MLA_MEMORY_HOST, 1, &n);
    CHECK_STATUS(mla_convert(ctx, &te, &tf, MLA_SATURATE), MLA_OK);
    ok = 1;
    for (int i = 0; i < 255; ++i)
        ok &= ef[i] == ldexpf(1.0f, i - 127);
    CHECK(ok && isnan(ef[255]));

    /* in place, same width: f16 -> bf16 */
    uint16_t buf[8];
    for (int i = 0; i < 8; ++i)
        buf[i] = mla_f32_to_f16(sample(i));
    n = 8;
    mla_tensor th, tb;
    mla_tensor_init(&th, buf, MLA_DTYPE_F16, MLA_MEMORY_HOST, 1, &n);
    mla_tensor_init(&tb, buf, MLA_DTYPE_BF16, MLA_MEMORY_HOST, 1, &n);
    CHECK_STATUS(mla_convert(ctx, &th, &tb, MLA_SATURATE), MLA_OK);
    ok = 1;
    for (int i = 0; i < 8; ++i)
        ok &= buf[i] == mla_f32_to_bf16(mla_f16_to_f32(mla_f32_to_f16(sample(i))));
    CHECK(ok);
}

/* MXFP4 quant equals mla_mxfp4_quantize_block per block in every scale
 * layout; pre-shuffled padding is written as 0; dequant is fp4 * 2^(s-127). */
static void test_mxfp4_ops(mla_context *ctx)
{
    enum { MM = 3, KK = 96, NN = KK / 32 };
    float xb[MM * KK];
    for (int i = 0; i < MM * KK; ++i)
        xb[i] = sample(i) * ((i / 32) % 2 ? 1e-3f : 1.0f);
    xb[KK + 40] = NAN; /* row 1, block 1 */
    mla_tensor x = tensor2(xb, MLA_DTYPE_F32, MM, KK);
    for (int layout = 0; layout < MLA_SCALE_LAYOUT_COUNT; ++layout) {
        for (int rule = 0; rule < MLA_MXFP4_RULE_COUNT; ++rule) {
            uint8_t codes[MM * KK / 2], sbuf[256 * 8 + 16];
            memset(sbuf, 0xAA, sizeof sbuf);
            mla_tensor c = tensor2(codes, MLA_DTYPE_FP4X2, MM, KK / 2);
            mla_tensor s = tensor2(sbuf, MLA_DTYPE_E8M0, MM, NN);
            int64_t bytes = mla_scale_preshuffled_bytes(MM, NN);
            if (layout == MLA_SCALE_TRANSPOSED) {
                s = tensor2(sbuf, MLA_DTYPE_E8M0, NN, MM);
                mla_tensor_transpose(&s, 0, 1);
            } else if (layout == MLA_SCALE_PRESHUFFLED_GFX950) {
                mla_tensor_init(&s, sbuf, MLA_DTYPE_U8, MLA_MEMORY_HOST, 1, &bytes);
            }
            CHECK_STATUS(mla_mxfp4_quant(ctx, &x, &c, &s, (mla_scale_layout)layout,
                                         (mla_mxfp4_rule)rule),
                         MLA_OK);
            int ok = 1;
            for (int m = 0; m < MM; ++m)
                for (int n = 0; n < NN; ++n) {
                    uint8_t wc[16], ws;
                    mla_mxfp4_quantize_block(xb + m * KK + n * 32, (mla_mxfp4_rule)rule, wc, &ws);
                    int64_t so = mla_scale_preshuffled_offset(m, n, NN);
                    if (layout == MLA_SCALE_ROW_MAJOR)
                        so = m * NN + n;
                    else if (layout == MLA_SCALE_TRANSPOSED)
                        so = n * MM + m;
                    ok &= sbuf[so] == ws && memcmp(codes + m * KK / 2 + n * 16, wc, 16) == 0;
                    if (layout == MLA_SCALE_PRESHUFFLED_GFX950)
                        sbuf[so] = 0; /* leaves only padding to check */
                }
            CHECK_LOOP(ok, "mxfp4 quant layout %d rule %d", layout, rule);
            if (layout == MLA_SCALE_PRESHUFFLED_GFX950) {
                int pad_ok = 1;
                for (int64_t i = 0; i < bytes; ++i)
                    pad_ok &= sbuf[i] == 0;
                CHECK_LOOP(pad_ok, "pre-shuffled padding rule %d", rule);
                CHECK(sbuf[bytes] == 0xAA); /* nothing past the end */
                continue;
            }
            float y[MM * KK];
            mla_tensor ty = tensor2(y, MLA_DTYPE_F32, MM, KK);
            CHECK_STATUS(mla_mxfp4_dequant(ctx, &c, &s, (mla_scale_layout)layout, &ty), MLA_OK);
            ok = 1;
            for (int m = 0; m < MM; ++m)
                for (int k = 0; k < KK; ++k) {
                    uint8_t b = codes[m * KK / 2 + k / 2];
                    float v = mla_fp4_to_f32((uint8_t)(k % 2 ? b >> 4 : b & 0xF));
                    uint8_t sb = layout == MLA_SCALE_ROW_MAJOR ? sbuf[m * NN + k / 32]
                                                               : sbuf[(k / 32) * MM + m];
                    float want = sb == 255 ? NAN : ldexpf(v, sb - 127);
                    ok &= isnan(want) ? isnan(y[m * KK + k]) : y[m * KK + k] == want;
                }
            CHECK_LOOP(ok, "mxfp4 dequant layout %d rule %d", layout, rule);
        }
    }
}

/* fp8 group quant of each rule against the formulas of mla.h, written out
 * here once more; dequant is fp8 * scale in fp32. */
static void test_fp8_group_ops(mla_context *ctx)
{
    enum { MM = 2, KK = 64, G = 32 };
    float xb[MM * KK];
    for (int i = 0; i < MM * KK; ++i)
        xb[i] = sample(i) * (i < KK ? 1.0f : 1e-7f);
    mla_tensor x = tensor2(xb, MLA_DTYPE_F32, MM, KK);
    for (int fl = 0; fl < 2; ++fl) {
        mla_dtype d = fl ? MLA_DTYPE_FP8_E4M3FNUZ : MLA_DTYPE_FP8_E4M3FN;
        for (int rule = 0; rule < MLA_FP8_SCALE_RULE_COUNT; ++rule) {
            uint8_t q[MM * KK];
            float sc[MM * KK / G];
            mla_tensor c = tensor2(q, d, MM, KK), s = tensor2(sc, MLA_DTYPE_F32, MM, KK / G);
            CHECK_STATUS(mla_fp8_group_quant(ctx, &x, &c, &s, G, (mla_fp8_scale_rule)rule),
                         MLA_OK);
            int ok = 1;
            for (int m = 0; m < MM; ++m)
                for (int g = 0; g < KK / G; ++g) {
                    float amax = 0.0f;
                    for (int k = g * G; k < (g + 1) * G; ++k)
                        amax = fmaxf(amax, fabsf(xb[m * KK + k]));
                    float fmax = mla_fp8_max(d), want;
                    if (rule == MLA_FP8_SCALE_AITER) {
                        want = fmaxf(amax, 1e-10f) / fmax;
                    } else {
                        want = fmaxf(amax, 1e-4f) / (fl ? 224.0f : 448.0f);
                        if (rule == MLA_FP8_SCALE_UE8M0) { /* smallest 2^i >= want */
                            float p2 = 0x1p-40f;
                            while (p2 < want)
                                p2 *= 2.0f;
                            want = p2;
                        }
                    }
                    ok &= sc[m * (KK / G) + g] == want;
                    for (int k = g * G; k < (g + 1) * G; ++k) {
                        float v = rule == MLA_FP8_SCALE_AITER ? xb[m * KK + k] * (1.0f / want)
                                                              : xb[m * KK + k] / want;
                        v = fminf(fmaxf(v, -fmax), fmax);
                        ok &= q[m * KK + k] == mla_f32_to_fp8(v, d, MLA_SATURATE);
                    }
                }
            CHECK_LOOP(ok, "fp8 group quant fp8 %d rule %d", fl, rule);
            uint16_t y[MM * KK];
            mla_tensor ty = tensor2(y, MLA_DTYPE_BF16, MM, KK);
            CHECK_STATUS(mla_fp8_group_dequant(ctx, &c, &s, G, &ty), MLA_OK);
            ok = 1;
            for (int i = 0; i < MM * KK; ++i)
                ok &= y[i] == mla_f32_to_bf16(mla_fp8_to_f32(q[i], d) * sc[i / G]);
            CHECK_LOOP(ok, "fp8 group dequant fp8 %d rule %d", fl, rule);
        }
    }
}

static void test_reference_ops(void)
{
    mla_context *ctx = NULL;
    CHECK_STATUS(mla_context_create(MLA_BACKEND_REFERENCE, NULL, &ctx), MLA_OK);
    if (!ctx)
        return;
    test_convert(ctx);
    test_mxfp4_ops(ctx);
    test_fp8_group_ops(ctx);
    mla_context_destroy(ctx);
}

int main(void)
{
    test_all_formats_exhaustive();
    test_bf16();
    test_f16();
    test_fp8_values();
    test_fp8_specials();
    test_e8m0();
    test_fp4();
    test_mxfp4_specials();
    test_mxfp4_ties();
    test_mxfp4_rules();
    test_mxfp4_range();
    test_preshuffle();
    test_reference_ops();
    return TEST_SUMMARY();
}
