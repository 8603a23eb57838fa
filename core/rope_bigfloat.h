/* 256-bit binary floating point in integer arithmetic, for the RoPE table
 * (core/rope_table.c). Each operation is exact integer work on 32-bit limbs
 * followed by at most one truncation towards zero (relative error < 2^-255),
 * so its results are the same bits on every host and compiler, whatever the
 * FPU, the libm or floating contraction. Not a general library: exponents are
 * int64, nothing overflows for the values the RoPE table meets. */
#ifndef MLA_CORE_ROPE_BIGFLOAT_H
#define MLA_CORE_ROPE_BIGFLOAT_H

#include <stdint.h>

#define BF_LIMBS 8

typedef struct bigfloat {
    int neg;
    int64_t e;            /* value = (-1)^neg * M * 2^e */
    uint32_t m[BF_LIMBS]; /* M, m[0] most significant; top bit set unless M = 0 */
} bigfloat;

bigfloat mla_bf_from_int(int64_t v);
bigfloat mla_bf_from_double(double v); /* exact; v finite */
int mla_bf_is_zero(bigfloat a);
int64_t mla_bf_top(bigfloat a); /* t with 2^t <= |a| < 2^(t+1); a != 0 */
bigfloat mla_bf_abs(bigfloat a);
bigfloat mla_bf_neg(bigfloat a);
bigfloat mla_bf_ldexp(bigfloat a, int64_t k); /* a * 2^k, exact */
bigfloat mla_bf_add(bigfloat a, bigfloat b);
bigfloat mla_bf_sub(bigfloat a, bigfloat b);
bigfloat mla_bf_mul(bigfloat a, bigfloat b);
bigfloat mla_bf_div(bigfloat a, bigfloat b); /* b != 0 */
bigfloat mla_bf_div_u(bigfloat a, uint32_t d); /* d != 0 */
int mla_bf_cmp(bigfloat a, bigfloat b);      /* -1, 0, 1 */
bigfloat mla_bf_floor(bigfloat a);           /* exact */
bigfloat mla_bf_ceil(bigfloat a);            /* exact */

/* Elementary functions, relative error below 2^-230 where used: exp for
 * |y| < 2^11, ln for a > 0, sin and cos for |x| <= 1. */
bigfloat mla_bf_exp(bigfloat y);
bigfloat mla_bf_ln(bigfloat a);
bigfloat mla_bf_pi(void);
void mla_bf_sincos(bigfloat x, bigfloat *s, bigfloat *c);

/* a truncated to a double (relative error < 2^-52; 0 and inf outside the
 * double range). */
double mla_bf_to_double(bigfloat a);
/* Bits [lo, lo + 64) of M (bit 0 its least significant), zero outside M. */
uint64_t mla_bf_bits64(bigfloat a, int64_t lo);

/* The fp32 nearest (ties to even) to (-1)^neg * (m + f) * 2^e, where m's top
 * bit is set or m = 0 (value 0, +0), 0 <= f < 1 and sticky = (f != 0):
 * its bits. Integer arithmetic only, for any rounding mode of the FPU. */
uint32_t mla_bf_f32_round(int neg, uint64_t m, int sticky, int64_t e);
/* The fp32 nearest to a and to the double v. */
uint32_t mla_bf_to_f32_bits(bigfloat a);
uint32_t mla_bf_double_to_f32_bits(double v);

#endif
