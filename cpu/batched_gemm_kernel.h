/* The per-ISA pieces of the CPU batched GEMM (cpu/batched_gemm.c documents
 * the method; cpu/batched_gemm_kernel.c holds the code). */
#ifndef MLA_CPU_BATCHED_GEMM_KERNEL_H
#define MLA_CPU_BATCHED_GEMM_KERNEL_H

#include "cpu/avx512_vec.h"
#include "cpu/cpu_kernels.h"

#define BG_LANES 16
#define BG_NV 4 /* vectors of 16 columns per micro-tile */
#define BG_NTILE (BG_NV * BG_LANES)
#define BG_MR 6 /* rows per micro-tile (MR * NV accumulators) */

/* W[b][k, n0 + c] for k < K, c < nc: where it lies (direct kernels) or fp32. */
typedef struct bg_w {
    const char *p; /* (k, c) = (0, 0) */
    int64_t ld;    /* bytes from one k to the next */
    mla_v16_kind kind;
} bg_w;

/* Output rows written by a kernel itself: y (F32 / BF16, unit column stride)
 * at row r = p + r * ld bytes, values times scale. */
typedef struct bg_y {
    char *p;
    int64_t ld;
    int bf16;
    float scale;
} bg_y;

typedef struct bg_fns {
    /* t[b, r0 .. r0 + rows, c0 .. c0 + cols] (F32, BF16 or fp8 codes) as fp32
     * rows of out (row stride ldo) */
    void (*rows)(const mla_tensor *t, int64_t b, int64_t r0, int64_t rows, int64_t c0,
                 int64_t cols, float *out, int64_t ldo);
    /* out[r][c] = sum_k x[r, k] * w[k, c] for r < mr, c < nc <= NTILE, k in
     * order; or straight into y when given (direct kernels only) */
    void (*ukr)(const float *x, int64_t ldx, int mr, const bg_w *w, int64_t K, int64_t nc,
                float *out, const bg_y *y);
    /* y[b, m0 + r, n0 + c] = fl(tile[r][c] * w_scale) */
    void (*store)(const mla_batched_gemm_args *a, int64_t b, int64_t m0, int64_t rows,
                  int64_t n0, int64_t cols, float *tile);
    int direct; /* ukr reads bf16 / fp8 W and writes y */
    /* AVX512-BF16, or NULL: x rows as bf16 pairs (xp[r * ldx + p] = x[r, 2p] |
     * x[r, 2p + 1] << 16) against W as pairs along k (wp[p * ldw + c], the same
     * packing), vdpbf16ps over the P pairs: per pair + odd product, round, +
     * even product, round (exact products). Only where no subnormal can occur
     * (mla_cpu_dp_safe). Output as ukr. */
    void (*ukr_dp)(const uint32_t *xp, int64_t ldx, int mr, const uint32_t *wp, int64_t ldw,
                   int64_t P, int64_t nc, float *out, const bg_y *y);
    /* out[c] = lo[c] | hi[c] << 16 for c < n (hi NULL: 0), with ukr_dp */
    void (*pair_rows)(const uint16_t *lo, const uint16_t *hi, int64_t n, uint32_t *out);
    int direct_bf16; /* ukr also reads bf16 W where it lies (not fp8; y through store) */
} bg_fns;

/* bf16: mla_cpu_has_bf16 of the context */
const bg_fns *mla_cpu_bgemm_fns(mla_cpu_isa isa, int bf16);

#if MLA_CPU_X86
/* The AVX2 copy's ukr (cpu/batched_gemm_avx2.c): fp32 or bf16 W, never y. */
void mla_cpu_bgemm_ukr_avx2(const float *x, int64_t ldx, int mr, const bg_w *w, int64_t K,
                            int64_t nc, float *out, const bg_y *y);
#endif

/* The product over a W contiguous along k with few rows
 * (cpu/batched_gemm_dot.c): whether it takes the call, and the call. */
int mla_cpu_bgemm_dot_takes(const mla_batched_gemm_args *a);
mla_status mla_cpu_bgemm_dot(mla_context *ctx, const mla_batched_gemm_args *a);

#endif
