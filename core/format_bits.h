/* Bit-level number formats of MLA.md section 5, shared by the CPU backend (C11)
 * and the HIP backend (HIP / CUDA C++ device code).
 *
 * Every conversion here is exact integer logic on the fp32 bit pattern: no
 * libm, no FP environment dependence (FTZ/DAZ, rounding mode) and nothing the
 * compiler could contract into an FMA. The few fp32 operations left are the
 * ones MLA.md itself writes in fp32 (the fp8 group scale, x * inv or x / s,
 * the dequant product; one correctly rounded operation each).
 *
 * The functions are branch-free selects so that loops over them vectorize.
 * core/formats.c is the independent math-style reference; the conformance
 * layer checks that the two agree bit for bit. NaN conventions (theirs too):
 *   bf16 / f16: NaN -> sign | quiet NaN (0x7FC0, 0x7E00); widening keeps sign
 *               and payload;
 *   fp8 e4m3fn: NaN and non-saturated overflow -> 0x7F | sign; e4m3fnuz: 0x80;
 *   fp8 / e8m0 decode: NaN codes -> +NaN (0x7FC00000);
 *   e2m1 has no NaN: NaN encodes like an infinity, 0x7 | sign. */
#ifndef MLA_CORE_FORMAT_BITS_H
#define MLA_CORE_FORMAT_BITS_H

#include <stdint.h>
#include <string.h>

/* Host C: always inlined, so that the CPU kernels' ISA-specific copies of a
 * loop (cpu/cpu_kernels.h) vectorize these functions with their own ISA. */
#if defined(__HIPCC__) || defined(__CUDACC__)
#define MLA_HD __host__ __device__ inline
#elif defined(__GNUC__)
#define MLA_HD static inline __attribute__((always_inline))
#else
#define MLA_HD static inline
#endif

/* Type punning by copy is defined behaviour in C and C++. clang's HIP mode
 * only knows the builtin on the device side without the HIP headers. */
#if defined(__HIPCC__) && defined(__clang__)
#define MLA_FB_MEMCPY __builtin_memcpy
#else
#define MLA_FB_MEMCPY memcpy
#endif

/* Values of mla_fp8_scale_rule (mla.h), repeated so that device code needs
 * no host header. */
#define MLA_FB_FP8_RULE_AITER 0
#define MLA_FB_FP8_RULE_UE8M0 1
#define MLA_FB_FP8_RULE_DIV 2

#define MLA_FB_F32_QNAN 0x7FC00000u

/* ---------------------------------------------------------------- punning */

MLA_HD uint32_t mla_fb_bits(float x)
{
    uint32_t u;
    MLA_FB_MEMCPY(&u, &x, sizeof u);
    return u;
}

MLA_HD float mla_fb_float(uint32_t u)
{
    float x;
    MLA_FB_MEMCPY(&x, &u, sizeof x);
    return x;
}

/* ------------------------------------------------------ generic rounding */

/* v / 2^s rounded to nearest, ties to even, for 1 <= s <= 31 and v < 2^31:
 * adding 2^(s-1) - 1 plus the result's would-be low bit makes exact halves
 * round up only from odd quotients. */
MLA_HD uint32_t mla_fb_shr_rne(uint32_t v, uint32_t s)
{
    return (v + (1u << (s - 1u)) - 1u + ((v >> s) & 1u)) >> s;
}

/* Magnitude code (exponent field << mbits | mantissa) of the finite or
 * infinite |x| (bits a, sign clear) rounded to nearest even in a binary
 * format with mbits mantissa bits and exponent bias `bias`. The exponent is
 * unbounded above: results past the format's largest code carry on upwards,
 * so callers detect overflow by comparing with their max code.
 * bias may carry a power-of-two block scale: the code of |x| * 2^-e is
 * mla_fb_round_mag(a, mbits, bias - e) (the MXFP4 case, bias up to 128).
 * Two paths:
 *   normal target (field te >= 1, x a normal fp32): rebias the fp32 exponent,
 *     round away 23 - mbits mantissa bits (carries ripple into the exponent);
 *   otherwise: value / 2^(1 - bias - mbits) rounded, the code of a value in
 *     the subnormal range or the first normal binade (codes are linear there),
 *     which is where every fp32 subnormal lands for bias <= 128. */
MLA_HD uint32_t mla_fb_round_mag(uint32_t a, int32_t mbits, int32_t bias)
{
    int32_t fe = (int32_t)(a >> 23);
    int32_t fe1 = fe + (fe == 0);             /* fp32 subnormals scale like field 1 */
    int32_t te = fe1 - 127 + bias;            /* target exponent field */
    uint32_t sig = (a & 0x7FFFFFu) | (fe != 0 ? 0x800000u : 0u);
    int32_t ls = 24 - mbits - te;             /* linear path: sig * 2^-ls */
    ls = ls < 1 ? 1 : (ls > 31 ? 31 : ls);    /* 31 already rounds every sig to 0 */
    uint32_t lin = mla_fb_shr_rne(sig, (uint32_t)ls);
    uint32_t rebias = (uint32_t)(127 - bias) << 23; /* modular when 127 - bias < 0 */
    uint32_t nrm = mla_fb_shr_rne(a - rebias, (uint32_t)(23 - mbits));
    return (te < 1 || fe == 0) ? lin : nrm;
}

/* Bits of the fp32 m * 2^k for 0 < m < 2^11 (a subnormal significand of a
 * narrower format), normalized in integers: p = index of m's top bit (a
 * binary search of selects), exponent field p + k + 127, the bits below the
 * top one as the mantissa. k + p must lie in [-126, 127]. Returns 0 for m = 0. */
MLA_HD uint32_t mla_fb_small_int_bits(uint32_t m, int32_t k)
{
    uint32_t p = 0, t = m, c;
    c = t >= (1u << 8) ? 8u : 0u;
    p += c, t >>= c;
    c = t >= (1u << 4) ? 4u : 0u;
    p += c, t >>= c;
    c = t >= (1u << 2) ? 2u : 0u;
    p += c, t >>= c;
    p += t >= 2u ? 1u : 0u;
    uint32_t u = ((uint32_t)((int32_t)p + k + 127) << 23) | ((m << (23u - p)) & 0x7FFFFFu);
    return m != 0 ? u : 0u;
}

/* ------------------------------------------------------------ bf16, f16 */

/* RNE to bf16: add 0x7FFF plus the kept low bit, truncate (overflow carries to
 * inf); NaN -> sign | 0x7FC0. */
MLA_HD uint16_t mla_fb_f32_to_bf16(float x)
{
    uint32_t u = mla_fb_bits(x);
    uint32_t r = (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
    uint32_t nan = ((u >> 16) & 0x8000u) | 0x7FC0u;
    return (uint16_t)((u & 0x7FFFFFFFu) > 0x7F800000u ? nan : r);
}

/* bf16 is the top half of an fp32. */
MLA_HD float mla_fb_bf16_to_f32(uint16_t h)
{
    return mla_fb_float((uint32_t)h << 16);
}

/* RNE to f16 (bias 15, 10 mantissa bits, subnormals 2^-24); results above
 * 65504 become inf (code 0x7C00 is where the rounding carry lands first). */
MLA_HD uint16_t mla_fb_f32_to_f16(float x)
{
    uint32_t u = mla_fb_bits(x), a = u & 0x7FFFFFFFu;
    uint32_t mag = mla_fb_round_mag(a, 10, 15);
    mag = mag > 0x7C00u ? 0x7C00u : mag;
    mag = a > 0x7F800000u ? 0x7E00u : mag;
    return (uint16_t)(((u >> 16) & 0x8000u) | mag);
}

/* f16 -> fp32, exact: normal fields rebias (+112); field 31 is inf/NaN with
 * the payload widened; subnormals m * 2^-24. */
MLA_HD float mla_fb_f16_to_f32(uint16_t h)
{
    uint32_t s = ((uint32_t)h & 0x8000u) << 16;
    uint32_t e = ((uint32_t)h >> 10) & 0x1Fu, m = (uint32_t)h & 0x3FFu;
    uint32_t nrm = ((e + 112u) << 23) | (m << 13);
    uint32_t sub = mla_fb_small_int_bits(m, -24);
    uint32_t spc = 0x7F800000u | (m << 13);
    return mla_fb_float(s | (e == 0 ? sub : (e == 31 ? spc : nrm)));
}

/* ------------------------------------------------------------------- fp8 */

/* e4m3fn (bias 7, max 448 = 0x7E): |r| > 448 or inf -> 0x7E | sign when
 * saturating, else 0x7F | sign (NaN); NaN -> 0x7F | sign. */
MLA_HD uint8_t mla_fb_f32_to_e4m3fn(float x, int saturate)
{
    uint32_t u = mla_fb_bits(x), a = u & 0x7FFFFFFFu, sign = (u >> 24) & 0x80u;
    uint32_t mag = mla_fb_round_mag(a, 3, 7);
    mag = mag > 0x7Eu ? (saturate ? 0x7Eu : 0x7Fu) : mag;
    mag = a > 0x7F800000u ? 0x7Fu : mag;
    return (uint8_t)(sign | mag);
}

/* e4m3fnuz (bias 8, max 240 = 0x7F, no -0): overflow -> 0x7F | sign when
 * saturating, else 0x80 (the only NaN); zero results are 0x00; NaN -> 0x80. */
MLA_HD uint8_t mla_fb_f32_to_e4m3fnuz(float x, int saturate)
{
    uint32_t u = mla_fb_bits(x), a = u & 0x7FFFFFFFu, sign = (u >> 24) & 0x80u;
    uint32_t mag = mla_fb_round_mag(a, 3, 8);
    uint32_t code = mag == 0 ? 0u : (sign | mag);
    code = mag > 0x7Fu ? (saturate ? (sign | 0x7Fu) : 0x80u) : code;
    return (uint8_t)(a > 0x7F800000u ? 0x80u : code);
}

/* fp8 -> fp32, exact: normal (field e, mantissa m) rebias to e + 127 - bias;
 * subnormals m * 2^(1 - bias - 3). */
MLA_HD uint32_t mla_fb_fp8_bits(uint32_t c, uint32_t bias)
{
    uint32_t s = (c & 0x80u) << 24, e = (c >> 3) & 0xFu, m = c & 7u;
    uint32_t nrm = ((e + 127u - bias) << 23) | (m << 20);
    uint32_t sub = mla_fb_small_int_bits(m, -(int32_t)bias - 2);
    return s | (e == 0 ? sub : nrm);
}

MLA_HD float mla_fb_e4m3fn_to_f32(uint8_t c)
{
    return mla_fb_float((c & 0x7Fu) == 0x7Fu ? MLA_FB_F32_QNAN : mla_fb_fp8_bits(c, 7u));
}

MLA_HD float mla_fb_e4m3fnuz_to_f32(uint8_t c)
{
    return mla_fb_float(c == 0x80u ? MLA_FB_F32_QNAN : mla_fb_fp8_bits(c, 8u));
}

/* -------------------------------------------------------- powers of two */

/* Bits of 2^e for e in [-149, 127]: normal fields, or the subnormal bit. */
MLA_HD uint32_t mla_fb_pow2_bits(int32_t e)
{
    return e >= -126 ? (uint32_t)(e + 127) << 23 : 1u << ((e + 149) & 31);
}

MLA_HD float mla_fb_pow2(int32_t e)
{
    return mla_fb_float(mla_fb_pow2_bits(e));
}

/* e8m0: 2^(c - 127); c = 0 is the fp32 subnormal 2^-127; 255 is NaN. */
MLA_HD float mla_fb_e8m0_to_f32(uint8_t c)
{
    uint32_t u = c == 0 ? 0x00400000u : (uint32_t)c << 23;
    return mla_fb_float(c == 255u ? MLA_FB_F32_QNAN : u);
}

/* ------------------------------------------------------------ fp4 e2m1 */

/* e2m1 code of x * 2^-e (bias 1, 1 mantissa bit), exactly from x's bits (the
 * scale folds into the bias: no fp32 product, no FTZ hazard); RNE, anything
 * rounding above 6 (and inf, NaN) -> 6 = 0x7; the sign is always copied. e in
 * [-127, 127]; a product that would be an fp32 subnormal encodes as 0 | sign
 * either way, so this equals encoding fp32(x * 2^-e). */
MLA_HD uint8_t mla_fb_f32_to_e2m1_scaled(float x, int32_t e)
{
    uint32_t u = mla_fb_bits(x);
    uint32_t mag = mla_fb_round_mag(u & 0x7FFFFFFFu, 1, 1 - e);
    mag = mag > 7u ? 7u : mag;
    return (uint8_t)(((u >> 28) & 8u) | mag);
}

MLA_HD uint8_t mla_fb_f32_to_e2m1(float x)
{
    return mla_fb_f32_to_e2m1_scaled(x, 0);
}

/* e2m1 value: field e > 0: 2^(e-1) * (1 + m/2); e = 0: m * 0.5. */
MLA_HD float mla_fb_e2m1_to_f32(uint8_t c)
{
    uint32_t s = ((uint32_t)c & 8u) << 28, e = ((uint32_t)c >> 1) & 3u, m = (uint32_t)c & 1u;
    uint32_t nrm = ((e + 126u) << 23) | (m << 22);
    uint32_t sub = m != 0 ? 0x3F000000u : 0u;
    return mla_fb_float(s | (e == 0 ? sub : nrm));
}

/* Bits of fp4(c) * 2^(scale - 127) for a finite scale (not 255), exact (two
 * significant bits: no rounding, only overflow to inf). In fp32 fields: |fp4|
 * has field fe (0.5 -> 126) and mantissa bit mb; the product has field
 * re = fe + scale - 127; at or below 0 it is the subnormal (1.mb) >> (1 - re),
 * shifted 1 or 2 places (re >= -1). */
MLA_HD uint32_t mla_fb_e2m1_scaled_bits(uint32_t c, uint32_t scale)
{
    uint32_t s = (c & 8u) << 28, e = (c >> 1) & 3u;
    uint32_t mb = e != 0 ? (c & 1u) << 22 : 0u;
    int32_t fe = e != 0 ? (int32_t)e + 126 : 126;
    int32_t re = fe + (int32_t)scale - 127;
    uint32_t sh = (uint32_t)(1 - re) & 3u; /* 1 or 2 where used */
    uint32_t sub = (0x800000u | mb) >> sh;
    uint32_t mag = re >= 255 ? 0x7F800000u : (re >= 1 ? ((uint32_t)re << 23) | mb : sub);
    return s | ((c & 7u) == 0 ? 0u : mag);
}

/* fp4(c) * 2^(scale - 127); the NaN scale 255 gives +NaN. */
MLA_HD float mla_fb_e2m1_scaled_to_f32(uint8_t c, uint8_t scale)
{
    return mla_fb_float(scale == 255u ? MLA_FB_F32_QNAN : mla_fb_e2m1_scaled_bits(c, scale));
}

/* ---------------------------------------------------------------- MXFP4 */

/* Block exponent e from the bits of amax = max |x| (finite):
 *   production: bits(amax_r) = (bits(amax) + 0x200000) & 0xFF800000;
 *   OCP:        amax_r = amax;
 *   e = clamp(floor(log2(amax_r)) - 2, -127, 127), floor(log2) being the
 *   exponent field - 127 (field 0: below -126, clamps; a round-up carried
 *   into field 255 is fp32 inf, whose log2 clamps to 127). */
MLA_HD int32_t mla_fb_mxfp4_exponent(uint32_t amax, int32_t production)
{
    uint32_t r = production ? (amax + 0x200000u) & 0xFF800000u : amax;
    int32_t fe = (int32_t)(r >> 23);
    int32_t e = fe - 127 - 2;
    e = fe == 255 ? 127 : e;
    return e < -127 ? -127 : e;
}

/* Scale byte of a block: 0xFF when amax is inf or NaN (its bits >= inf),
 * else e + 127 (0 for an all-zero block). */
MLA_HD uint8_t mla_fb_mxfp4_scale_byte(uint32_t amax, int32_t production)
{
    int32_t e = mla_fb_mxfp4_exponent(amax & 0x7FFFFFFFu, production);
    return (uint8_t)(amax >= 0x7F800000u ? 255 : e + 127);
}

/* Mask for the codes of a block: 0xF normally; 0 when the block is all zero
 * (also -0: codes 0) or holds inf/NaN (scale NaN, codes 0). */
MLA_HD uint32_t mla_fb_mxfp4_code_mask(uint32_t amax)
{
    return (amax == 0 || amax >= 0x7F800000u) ? 0u : 0xFu;
}

/* Code of one element of a block with scale byte `scale` and code mask. */
MLA_HD uint8_t mla_fb_mxfp4_code(float x, uint8_t scale, uint32_t mask)
{
    return (uint8_t)(mla_fb_f32_to_e2m1_scaled(x, (int32_t)scale - 127) & mask);
}

/* Byte offset of scale[m, n] in aiter's gfx950 pre-shuffled layout, with
 * N_pad = ceil(N/8)*8: (m%32)/16 + ((n%8)/4)*2 + (m%16)*4 + (n%4)*64
 * + (n/8)*256 + (m/32)*32*N_pad. */
MLA_HD int64_t mla_fb_preshuffled_offset(int64_t m, int64_t n, int64_t N)
{
    int64_t n_pad = (N + 7) / 8 * 8;
    return (m % 32) / 16 + ((n % 8) / 4) * 2 + (m % 16) * 4 + (n % 4) * 64 + (n / 8) * 256 +
           (m / 32) * 32 * n_pad;
}

/* ------------------------------------------------- fp32 products, NaN */

/* IEEE 754 leaves the payload of a NaN result open; x86 SSE/AVX (where the
 * reference runs) returns the first NaN operand, quieted, or the default NaN
 * 0xFFC00000 for an invalid operation (0 * inf, 0 / 0, inf / inf). Written
 * out here, so that neither the operand order a vectorizer picks nor a GPU's
 * canonical NaN changes any bit: r is the fp32 result of a op b. */
MLA_HD float mla_fb_nan_rule(float a, float b, float r)
{
    uint32_t ua = mla_fb_bits(a), ub = mla_fb_bits(b), ur = mla_fb_bits(r);
    ur = (ur & 0x7FFFFFFFu) > 0x7F800000u ? 0xFFC00000u : ur;
    ur = (ub & 0x7FFFFFFFu) > 0x7F800000u ? (ub | 0x400000u) : ur;
    ur = (ua & 0x7FFFFFFFu) > 0x7F800000u ? (ua | 0x400000u) : ur;
    return mla_fb_float(ur);
}

/* fp32 a * b and a / b, one correctly rounded operation each. */
MLA_HD float mla_fb_mul(float a, float b)
{
    return mla_fb_nan_rule(a, b, a * b);
}

MLA_HD float mla_fb_div(float a, float b)
{
    return mla_fb_nan_rule(a, b, a / b);
}

/* ---------------------------------------------------- fp8 group scales */

/* The rule's divisor: AITER the format's max (448 | 240); UE8M0 and DIV
 * 448 | 224 (vLLM's indexer). */
MLA_HD float mla_fb_fp8_rule_divisor(int32_t rule, int fnuz)
{
    return fnuz ? (rule == MLA_FB_FP8_RULE_AITER ? 240.0f : 224.0f) : 448.0f;
}

/* 2^ceil(log2 q) from q's bits: the exponent field, plus one when the mantissa
 * is not zero (q not a power of two); q is normal here (>= 1e-4 / 448).
 * inf and NaN stay as they are. */
MLA_HD float mla_fb_pow2_ceil(float q)
{
    uint32_t u = mla_fb_bits(q);
    uint32_t up = (u & 0xFF800000u) + ((u & 0x7FFFFFu) != 0 ? 0x800000u : 0u);
    return mla_fb_float((u & 0x7F800000u) == 0x7F800000u ? u : up);
}

/* max(q, lo) for lo > 0, as q < lo ? lo : q, on the bits: NaN passes with
 * its payload. (Compilers turn the float select into a max instruction
 * that returns the canonical NaN: nvcc's FMNMX.NAN writes 0x7FFFFFFF.) */
MLA_HD float mla_fb_floor_pos(float q, float lo)
{
    uint32_t u = mla_fb_bits(q);
    int keep = (u & 0x7FFFFFFFu) > 0x7F800000u || (u < 0x80000000u && u >= mla_fb_bits(lo));
    return keep ? q : lo;
}

/* Group scale from amax (NaN propagates, as torch.amax and the reference):
 *   AITER: s = max(amax, 1e-10) / (448 | 240)
 *   UE8M0: s = 2^ceil(log2(max(amax, 1e-4) / (448 | 224)))
 *   DIV:   s = max(amax, 1e-4) / (448 | 224)
 * each an fp32 division, correctly rounded. The AITER reciprocal is
 * mla_fb_div(1.0f, s). */
MLA_HD float mla_fb_fp8_group_scale(float amax, int32_t rule, int fnuz)
{
    float lo = rule == MLA_FB_FP8_RULE_AITER ? 1e-10f : 1e-4f;
    float a = mla_fb_floor_pos(amax, lo);
    float s = mla_fb_div(a, mla_fb_fp8_rule_divisor(rule, fnuz));
    return rule == MLA_FB_FP8_RULE_UE8M0 ? mla_fb_pow2_ceil(s) : s;
}

/* clamp(q, -mx, mx) for mx > 0 finite, on the bits: magnitudes above mx's
 * (inf included) become mx's, the sign stays; NaN passes, as with
 * q > mx ? mx : (q < -mx ? -mx : q). (Integer selects: gcc 12 vectorizes
 * these, not the float select chain.) */
MLA_HD float mla_fb_clamp_mag(float q, float mx)
{
    uint32_t u = mla_fb_bits(q), a = u & 0x7FFFFFFFu, m = mla_fb_bits(mx);
    a = (a > m && a <= 0x7F800000u) ? m : a;
    return mla_fb_float((u & 0x80000000u) | a);
}

/* One code: q = x * inv (AITER, inv = fp32(1/s)) or x / s (UE8M0, DIV);
 * clamp to [-max, max] (NaN passes: max 448 | 240, the format's own), then
 * the saturating fp8 conversion. */
MLA_HD uint8_t mla_fb_fp8_group_code(float x, float s, float inv, int32_t rule, int fnuz)
{
    float q = rule == MLA_FB_FP8_RULE_AITER ? mla_fb_mul(x, inv) : mla_fb_div(x, s);
    q = mla_fb_clamp_mag(q, fnuz ? 240.0f : 448.0f);
    return fnuz ? mla_fb_f32_to_e4m3fnuz(q, 1) : mla_fb_f32_to_e4m3fn(q, 1);
}

#endif
