/* Scalar number formats of MLA.md section 5: the reference ("teaching")
 * implementation.
 *
 * Every narrow format here is a small binary floating-point format described
 * by (mantissa bits, minimum normal exponent, exponent bias). Encoding is done
 * the way the definitions read: round the real value to the format's grid with
 * round-to-nearest-even (one generic routine on doubles, using frexp/ldexp and
 * an explicit tie rule, so the current FP rounding mode does not matter), then
 * apply the format's overflow rule, then write sign / exponent / mantissa
 * fields. Decoding evaluates (-1)^s * 2^(e - bias) * (1 + m / 2^mbits).
 *
 * The CPU and HIP backends use an independent bit-level implementation
 * (core/format_bits.h); the conformance layer checks that both agree. Keep
 * this file free of bit tricks where the math can be written directly.
 *
 * Every value of every format handled here is exact in fp32 and in double,
 * and every float is exact in double, so the only rounding is the one in
 * round_to_grid.
 */
#include "mla/mla.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

/* ------------------------------------------------------------ the grid */

/* A binary floating-point format: fraction bits, minimum normal exponent
 * (values below 2^emin use the subnormal spacing 2^(emin - mbits)), bias. */
typedef struct fmt_desc {
    int mbits;
    int emin;
    int bias;
} fmt_desc;

static const fmt_desc FMT_BF16 = {7, -126, 127};
static const fmt_desc FMT_F16 = {10, -14, 15};
static const fmt_desc FMT_E4M3FN = {3, -6, 7};
static const fmt_desc FMT_E4M3FNUZ = {3, -7, 8};
static const fmt_desc FMT_E2M1 = {1, 0, 1};

/* Round to nearest integer, ties to even, written out so that it does not
 * depend on the FP rounding mode: n = floor(v) + frac, frac compared to 1/2. */
static double round_half_even(double v)
{
    double fl = floor(v);
    double frac = v - fl; /* exact: v has few significant bits here */
    if (frac > 0.5)
        return fl + 1.0;
    if (frac < 0.5)
        return fl;
    return fmod(fl, 2.0) == 0.0 ? fl : fl + 1.0;
}

/* Nearest value of the grid of f to the finite x, ties to even:
 * q = 2^(max(floor(log2|x|), emin) - mbits) is the spacing of the grid at x,
 * result = RNE(x / q) * q. The exponent is unbounded above (the caller applies
 * the format's overflow rule); the result keeps the sign of x, also for 0. */
static double round_to_grid(double x, fmt_desc f)
{
    if (x == 0.0)
        return x;
    int e2;
    (void)frexp(x, &e2); /* |x| = m * 2^e2, m in [0.5, 1): floor(log2|x|) = e2 - 1 */
    int e = e2 - 1 < f.emin ? f.emin : e2 - 1;
    double q = ldexp(1.0, e - f.mbits);
    double r = round_half_even(x / q) * q; /* x / q and * q are exact (powers of 2) */
    return r == 0.0 ? copysign(0.0, x) : r;
}

/* Largest finite value whose exponent field is at most emax_field and whose
 * mantissa is at most mmax: (1 + mmax / 2^mbits) * 2^(emax_field - bias). */
static double max_value(fmt_desc f, int emax_field, int mmax)
{
    return ldexp(1.0 + ldexp((double)mmax, -f.mbits), emax_field - f.bias);
}

/* Sign-less fields of a magnitude that lies on the grid of f and in range:
 * subnormal (|v| < 2^emin): exponent field 0, mantissa |v| / 2^(emin - mbits);
 * normal: exponent field floor(log2|v|) + bias, mantissa (|v| / 2^e - 1) * 2^mbits. */
static uint32_t encode_magnitude(double v, fmt_desc f)
{
    v = fabs(v);
    if (v < ldexp(1.0, f.emin))
        return (uint32_t)ldexp(v, f.mbits - f.emin);
    int e2;
    (void)frexp(v, &e2);
    int e = e2 - 1;
    uint32_t mant = (uint32_t)ldexp(ldexp(v, -e) - 1.0, f.mbits);
    return ((uint32_t)(e + f.bias) << f.mbits) | mant;
}

/* Value of the sign-less fields (exp_field, mant): subnormal when exp_field
 * is 0: mant * 2^(emin - mbits); else (1 + mant / 2^mbits) * 2^(exp_field - bias). */
static double decode_magnitude(uint32_t exp_field, uint32_t mant, fmt_desc f)
{
    if (exp_field == 0)
        return ldexp((double)mant, f.emin - f.mbits);
    return ldexp(1.0 + ldexp((double)mant, -f.mbits), (int)exp_field - f.bias);
}

/* Raw bits -> float, only to build NaNs whose payload a format defines. */
static float f32_from_bits(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
}

/* -------------------------------------------------------- bf16 and fp16 */

/* IEEE-style 16-bit encode: r = RNE(x) on the grid; r > max -> inf (IEEE
 * overflow: the rounded value with unbounded exponent exceeds max);
 * NaN -> sign | quiet NaN (qnan = exponent all ones, top mantissa bit). */
static uint16_t encode_ieee16(float x, fmt_desc f, int ebits, uint16_t qnan)
{
    uint16_t sign = signbit(x) ? (uint16_t)0x8000u : 0u;
    if (isnan(x))
        return (uint16_t)(sign | qnan);
    uint16_t inf = (uint16_t)(((1u << ebits) - 1u) << f.mbits);
    if (isinf(x))
        return (uint16_t)(sign | inf);
    double r = round_to_grid((double)x, f);
    if (fabs(r) > max_value(f, (1 << ebits) - 2, (1 << f.mbits) - 1))
        return (uint16_t)(sign | inf);
    return (uint16_t)(sign | encode_magnitude(r, f));
}

/* Value of an IEEE-style 16-bit code: (-1)^s * decode_magnitude; exponent all
 * ones is inf (mantissa 0) or NaN, which keeps its sign and payload as the
 * top bits of the fp32 payload (what widening a NaN does). */
static float decode_ieee16(uint16_t bits, fmt_desc f, int ebits)
{
    uint32_t sign = bits >> 15;
    uint32_t exp_field = (bits >> f.mbits) & ((1u << ebits) - 1u);
    uint32_t mant = bits & ((1u << f.mbits) - 1u);
    if (exp_field == (1u << ebits) - 1u) {
        if (mant == 0)
            return sign ? -INFINITY : INFINITY;
        return f32_from_bits((sign << 31) | 0x7F800000u | (mant << (23 - f.mbits)));
    }
    double v = decode_magnitude(exp_field, mant, f);
    return (float)(sign ? -v : v);
}

/* bf16: 8 exponent bits, 7 mantissa bits, bias 127, RNE; NaN -> sign | 0x7FC0. */
uint16_t mla_f32_to_bf16(float x)
{
    return encode_ieee16(x, FMT_BF16, 8, 0x7FC0u);
}

/* bf16 -> fp32 is exact: (-1)^s * 2^(e-127) * (1 + m/128), subnormals m * 2^-133. */
float mla_bf16_to_f32(uint16_t bits)
{
    return decode_ieee16(bits, FMT_BF16, 8);
}

/* fp16: 5 exponent bits, 10 mantissa bits, bias 15, RNE incl. subnormals
 * (spacing 2^-24), |r| > 65504 -> inf; NaN -> sign | 0x7E00. */
uint16_t mla_f32_to_f16(float x)
{
    return encode_ieee16(x, FMT_F16, 5, 0x7E00u);
}

/* fp16 -> fp32 is exact: (-1)^s * 2^(e-15) * (1 + m/1024), subnormals m * 2^-24. */
float mla_f16_to_f32(uint16_t bits)
{
    return decode_ieee16(bits, FMT_F16, 5);
}

/* ------------------------------------------------------------------ fp8 */

/* fp8 e4m3: r = RNE(x) on the grid (e4m3fn: bias 7, e4m3fnuz: bias 8);
 * |r| > max (448 | 240) or |x| = inf -> +-max when saturating, NaN otherwise;
 * NaN -> NaN. NaN codes: e4m3fn 0x7F | sign, e4m3fnuz 0x80. e4m3fnuz has no
 * -0: a result that is zero encodes as 0x00 whatever its sign. */
uint8_t mla_f32_to_fp8(float x, mla_dtype fp8, mla_saturation mode)
{
    int fnuz;
    if (fp8 == MLA_DTYPE_FP8_E4M3FN)
        fnuz = 0;
    else if (fp8 == MLA_DTYPE_FP8_E4M3FNUZ)
        fnuz = 1;
    else
        return 0;
    fmt_desc f = fnuz ? FMT_E4M3FNUZ : FMT_E4M3FN;
    uint8_t sign = signbit(x) ? (uint8_t)0x80u : 0u;
    uint8_t nan = fnuz ? (uint8_t)0x80u : (uint8_t)(0x7Fu | sign);
    /* e4m3fn: exponent 15 mantissa 7 is NaN, so max = 1.75 * 2^8 = 448;
     * e4m3fnuz: all codes but 0x80 are finite, max = 1.875 * 2^7 = 240. */
    double maxv = fnuz ? max_value(f, 15, 7) : max_value(f, 15, 6);
    if (isnan(x))
        return nan;
    double r = isinf(x) ? (double)x : round_to_grid((double)x, f);
    if (fabs(r) > maxv) {
        if (mode != MLA_SATURATE)
            return nan;
        r = maxv;
    }
    if (r == 0.0)
        return fnuz ? 0u : sign;
    return (uint8_t)(sign | encode_magnitude(r, f));
}

/* fp8 e4m3 value: (-1)^s * decode_magnitude(e, m); NaN codes (e4m3fn 0x7F,
 * 0xFF; e4m3fnuz 0x80) -> NaN. */
float mla_fp8_to_f32(uint8_t code, mla_dtype fp8)
{
    int fnuz;
    if (fp8 == MLA_DTYPE_FP8_E4M3FN)
        fnuz = 0;
    else if (fp8 == MLA_DTYPE_FP8_E4M3FNUZ)
        fnuz = 1;
    else
        return NAN;
    if (fnuz ? code == 0x80u : (code & 0x7Fu) == 0x7Fu)
        return NAN;
    fmt_desc f = fnuz ? FMT_E4M3FNUZ : FMT_E4M3FN;
    double v = decode_magnitude((code >> 3) & 0xFu, code & 0x7u, f);
    return (float)((code & 0x80u) ? -v : v);
}

/* Largest finite fp8 value: e4m3fn 1.75 * 2^8 = 448, e4m3fnuz 1.875 * 2^7 = 240;
 * NaN for any other dtype. */
float mla_fp8_max(mla_dtype fp8)
{
    if (fp8 == MLA_DTYPE_FP8_E4M3FN)
        return (float)max_value(FMT_E4M3FN, 15, 6);
    if (fp8 == MLA_DTYPE_FP8_E4M3FNUZ)
        return (float)max_value(FMT_E4M3FNUZ, 15, 7);
    return NAN;
}

/* -------------------------------------------------------- e8m0 and fp4 */

/* e8m0: 2^(byte - 127) (byte 0 is 2^-127, an fp32 subnormal); byte 255 is NaN. */
float mla_e8m0_to_f32(uint8_t code)
{
    if (code == 255u)
        return NAN;
    return ldexpf(1.0f, (int)code - 127);
}

/* fp4 e2m1 (bias 1, grid 0, 0.5, 1, 1.5, 2, 3, 4, 6): r = RNE(|x|) on the grid,
 * |x| >= 6 -> 6; the sign bit is always copied, so -0 and
 * negative values rounding to 0 give 0x8. e2m1 has no NaN: a NaN input is
 * treated like an infinity and gives the largest magnitude, 0x7 | sign. */
uint8_t mla_f32_to_fp4(float x)
{
    uint8_t sign = signbit(x) ? (uint8_t)0x8u : 0u;
    double maxv = max_value(FMT_E2M1, 3, 1); /* 1.5 * 2^2 = 6 */
    if (isnan(x) || fabs((double)x) >= maxv)
        return (uint8_t)(sign | 0x7u);
    double r = round_to_grid((double)x, FMT_E2M1); /* |x| < 6: |r| <= 6 */
    if (r == 0.0)
        return sign;
    return (uint8_t)(sign | encode_magnitude(r, FMT_E2M1));
}

/* fp4 e2m1 value of the low 4 bits of code: (-1)^s * decode_magnitude(e, m). */
float mla_fp4_to_f32(uint8_t code)
{
    double v = decode_magnitude((code >> 1) & 0x3u, code & 0x1u, FMT_E2M1);
    return (float)((code & 0x8u) ? -v : v);
}

/* -------------------------------------------------------------- MXFP4 */

/* One block of 32 (MLA.md section 5):
 *   amax = max |x|; NaN or inf in the block -> scale 0xFF, codes 0;
 *   amax == 0 -> scale 0, codes 0 (also for -0);
 *   OCP:        e = floor(log2 amax) - 2;
 *   production: amax_r = amax rounded up at the mantissa, i.e. the fp32 with
 *               bits (bits(amax) + 0x200000) & 0xFF800000: 2^floor(log2 amax),
 *               times 2 when amax's significand is >= 1.75; a carry past the
 *               largest exponent gives fp32 inf, whose log2 clamps to 127;
 *               e = floor(log2 amax_r) - 2;
 *   e clamped to [-127, 127]; scale byte e + 127;
 *   q_i = fp32(x_i * 2^-e); code_i = fp4(q_i) (RNE, |q| >= 6 -> 6, sign kept);
 *   element 2i in the low nibble of byte i. */
void mla_mxfp4_quantize_block(const float x[32], mla_mxfp4_rule rule, uint8_t codes[16],
                              uint8_t *scale)
{
    double amax = 0.0;
    int special = 0;
    for (int i = 0; i < 32; ++i) {
        if (!isfinite(x[i]))
            special = 1;
        else if (fabs((double)x[i]) > amax)
            amax = fabs((double)x[i]);
    }
    memset(codes, 0, 16);
    if (special) {
        *scale = 0xFFu;
        return;
    }
    if (amax == 0.0) {
        *scale = 0u;
        return;
    }
    int e2;
    double m = frexp(amax, &e2); /* amax = m * 2^e2, significand 2m in [1, 2) */
    int lg = e2 - 1;             /* floor(log2 amax) */
    if (rule == MLA_MXFP4_PRODUCTION && 2.0 * m >= 1.75)
        lg += 1; /* amax_r = 2^(lg + 1) */
    int e;
    if (lg > 127) /* amax_r overflowed fp32 to inf: log2(inf) clamps to 127 */
        e = 127;
    else
        e = lg - 2 < -127 ? -127 : (lg - 2 > 127 ? 127 : lg - 2);
    *scale = (uint8_t)(e + 127);
    for (int i = 0; i < 32; ++i) {
        float q = (float)ldexp((double)x[i], -e); /* exact product, one fp32 rounding */
        uint8_t c = mla_f32_to_fp4(q);
        codes[i / 2] |= (uint8_t)((i % 2) ? (c << 4) : c);
    }
}

/* ceil(M/256)*256 * ceil(N/8)*8 bytes; -1 for a negative extent or when the
 * product does not fit in int64. */
int64_t mla_scale_preshuffled_bytes(int64_t M, int64_t N)
{
    if (M < 0 || N < 0 || M > INT64_MAX - 255 || N > INT64_MAX - 7)
        return -1;
    int64_t mp = (M + 255) / 256 * 256;
    int64_t np = (N + 7) / 8 * 8;
    if (np != 0 && mp > INT64_MAX / np)
        return -1;
    return mp * np;
}

/* Offset of scale[m, n] in aiter's gfx950 pre-shuffled layout, N_pad = ceil(N/8)*8:
 * (m%32)/16 + ((n%8)/4)*2 + (m%16)*4 + (n%4)*64 + (n/8)*256 + (m/32)*32*N_pad. */
int64_t mla_scale_preshuffled_offset(int64_t m, int64_t n, int64_t N)
{
    int64_t n_pad = (N + 7) / 8 * 8;
    return (m % 32) / 16 + ((n % 8) / 4) * 2 + (m % 16) * 4 + (n % 4) * 64 + (n / 8) * 256 +
           (m / 32) * 32 * n_pad;
}
