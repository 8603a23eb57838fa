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

#endif
