/* CPU MXFP4 GEMM internals shared by the driver (mxfp4_gemm.c) and the
 * AVX-512 tile (mxfp4_gemm_avx512.c).
 *
 * A tile computes MT x NT = 16 dot products along K, MT in {1, 2, 4}:
 *   out[mi * NT + ni] = sum_k A[mi][k] * W[ni][k]
 * A rows are fp32, de-interleaved per 32-block (the 16 even k, then the 16
 * odd k), so that a block's 16 code bytes widened to 16 lanes (low nibble =
 * even k, high nibble = odd k) line up with two plain vector loads of A.
 * W is decoded from its code bytes with a 16-entry fp4 table scaled by the
 * block's scale 2^(s - 127): a power of two, so every decoded weight is the
 * exact fp32 value deq(w) (or inf / NaN, as the dequant op gives). */
#ifndef MLA_CPU_MXFP4_GEMM_H
#define MLA_CPU_MXFP4_GEMM_H

#include <stdint.h>

#include "core/backend.h"

#define MLA_MX_BLOCK 32
#define MLA_MX_TILE 16 /* outputs per tile */

/* Tiles over all weight rows of a task for mt activation rows. */
typedef struct mla_mx_rows {
    const float *a;     /* activation row mi at a + mi * lda */
    int64_t lda;
    const uint8_t *w;   /* weight code rows: K/2 contiguous bytes, row n at w + n * ldw */
    int64_t ldw;
    const float *ws;    /* block scales as fp32, row n at ws + n * nblk */
    int64_t rows, nblk; /* weight rows, K / 32 */
    float *out;         /* out[mi * ldo + n]; ldo >= rows rounded up to 16 (tiles past the
                         * last row repeat it, and their columns are written too) */
    int64_t ldo;
} mla_mx_rows;

/* The e2m1 values of the 16 codes (sign bit 0x8). */
#define MLA_MX_FP4_VALUES                                                                          \
    {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f,                                               \
     -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f}

/* out for mt (1, 2 or 4) activation rows, NT = 16 / mt weight rows per
 * tile, AVX-512 F. */
void mla_cpu_mx_rows_avx512(const mla_mx_rows *r, int mt);

/* AVX512-BF16 path for at most 16 activation rows: 16 weight rows at a time
 * decoded once to bf16 pairs along k (code byte p = the pair k = 2p, 2p + 1:
 * both values fp4 times a power of two, exact in bf16) and transposed, so
 * that a vector holds pair p of the 16 rows; per pair one vdpbf16ps per
 * activation row (its pair broadcast), all M rows per weight load.
 * Products are exact; the instruction flushes subnormal inputs and results,
 * so the caller runs it only where mla_cpu_dp_safe rules them out, and only
 * for weight scale bytes up to 252 (the decode adds the scale's exponent to
 * bf16 fields). Each output sums its pairs in k order, in fp32. */
typedef struct mla_mx_dp {
    const uint32_t *xt; /* x as bf16 pairs: pair p of row m at xt[p * 16 + m] */
    int64_t M;          /* activation rows, <= 16 */
    const uint8_t *w;   /* weight code rows as in mla_mx_rows */
    int64_t ldw;
    const float *ws;    /* block scales as fp32 (powers of two: their exponents are used) */
    int64_t rows, nblk;
    uint32_t *panel; /* scratch: K / 2 pairs of 16 rows */
    float *out;      /* out[m * ldo + n] for m < M, n < rows, when y is NULL */
    int64_t ldo;
    char *y;         /* or y itself (F32 / BF16, unit stride): y[m, n] at y + m * ldy bytes */
    int64_t ldy;
    int ybf16;
} mla_mx_dp;

/* out for all rows (AVX512-BF16 CPUs only). */
void mla_cpu_mx_rows_dp(const mla_mx_dp *d);
/* xt of mla_mx_dp from M <= 16 de-interleaved fp32 rows ad (row stride K),
 * which must be exact in bf16; returns the smallest exponent field of the
 * nonzero values (255 when none). AVX512-BF16 CPUs only. */
int mla_cpu_mx_x_pairs(const float *ad, int64_t K, int64_t M, uint32_t *xt);
/* ... from M <= 16 rows of contiguous codes (row m at xc + m * K / 2) and
 * their scale bytes (row m at xs + m * K / 32). */
void mla_cpu_mx_x_codes(const uint8_t *xc, const uint8_t *xs, int64_t K, int64_t M, uint32_t *xt);
/* ad[0, K) = the MXFP4 round trip of v[0, K), de-interleaved per block, as
 * the driver's round_trip + deinterleave; 0 (ad partly written) when a
 * block's scale byte is 254 or 255. AVX512-BF16 CPUs only. */
int mla_cpu_mx_round_trip(const float *v, int64_t K, int production, float *ad);
/* xt of x[b]'s round trip (g->M <= 16 rows) straight from an F32 or BF16 x
 * at unit stride: the smallest exponent field of the nonzero values, -1
 * for any other x, -2 when a block's scale byte is 254 or 255. */
int mla_cpu_mx_x_prequant(const mla_mxfp4_gemm_args *g, int64_t b, uint32_t *xt);

#endif
