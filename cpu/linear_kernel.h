/* The per-ISA pieces of the CPU projection (cpu/linear.c, which documents
 * the method; cpu/linear_kernel.c holds the code): x packing, W decoding and
 * the dot-product micro-kernel. */
#ifndef MLA_CPU_LINEAR_KERNEL_H
#define MLA_CPU_LINEAR_KERNEL_H

#include "cpu/avx512_vec.h"
#include "cpu/cpu_kernels.h"

#define LANES 16   /* partial sums per output: lane l holds k = l mod 16 */
#define NR 3       /* W rows per micro-tile */
#define MT 8       /* tokens per micro-tile (MT * NR accumulators) */
#define WBLOCK 128 /* fp8 checkpoints: one scale per 128 x 128 block */


/* NR rows of W from value k0 on, as the micro-kernel reads them. */
typedef struct lin_wtile {
    const void *row[NR]; /* row j at k0 */
    const float *s[NR];  /* fp8: row j's folded scales (mla_v16_fp8_fold) per 128
                          * values, indexed by (k0 + k) / WBLOCK */
    int64_t k0;
    int64_t ahead; /* bytes from a row to the row read NR rows later (prefetched), or 0 */
    mla_v16_kind kind; /* F32: a decoded tile; else W's own values (fp8 scaled by s[j]) */
} lin_wtile;

typedef struct lin_fns {
    /* rows [t0, t1) of x as fp32 rows of out (row stride ldo) */
    void (*pack)(const mla_tensor *x, int64_t t0, int64_t t1, float *out, int64_t ldo);
    /* W rows [n0, n0 + nr), values [k0, k0 + kc) as fp32 rows of out (row
     * stride ldo): bf16 as is, fp8 fl(code * scale); k0 % WBLOCK == 0 */
    void (*decode)(const mla_linear_args *a, int64_t n0, int64_t nr, int64_t k0, int64_t kc,
                   float *out, int64_t ldo);
    /* lanes[t][j][l] (+)= sum of x[t, k] * w[j, k] over k < kc, k % 16 == l,
     * for t < mt (<= MT), j < NR; first: start from zero. With sums (the last
     * chunk), sums[t * NR + j] = the 16 lanes added in the fixed tree of
     * mla_cpu_linear_reduce instead (lanes are then left as they were). */
    void (*ukr)(const float *x, int64_t ldx, int mt, const lin_wtile *w, int64_t kc,
                float *lanes, int first, float *sums);
    int direct; /* ukr takes bf16 / fp8 tiles (else only MLA_V16_F32) */
    /* AVX512-BF16 (vdpbf16ps), or NULL (no such CPU, or MLA_CPU_ISA=avx512-nobf16):
     * ukr for bf16 x rows (ldx in values) against a bf16 tile read in place.
     * Lane l sums the pairs k = 32 s + 2l, 32 s + 2l + 1 (per pair: + odd
     * product, round, + even product, round; products are exact). The
     * instruction treats subnormal inputs and results as zero, so it is used
     * only where none can occur (see cpu/linear.c). */
    void (*ukr_dp)(const uint16_t *x, int64_t ldx, int mt, const lin_wtile *w, int64_t kc,
                   float *lanes, int first, float *sums);
    int (*min_exp)(const uint16_t *p, int64_t n); /* mla_cpu_bf16_min_exp, vectorized */
    /* fp8 W with AVX512-BF16: out[0, n rounded up to 32) = the exact values of
     * the codes (fnuz: e4m3fnuz) as bf16, zeros past n */
    void (*fp8_to_bf16)(const uint8_t *codes, int64_t n, int fnuz, uint16_t *out);
    /* ... and the kernel over such a tile (w: NR rows, stride ldw): per block of
     * WBLOCK values a vdpbf16ps partial sum of x * code, then one FMA adds it
     * times the row's scale (s[j][b * ss] for block b of the chunk) to the
     * lanes. mt <= MT / 2 (twice the accumulators). */
    void (*ukr_dp8)(const uint16_t *x, int64_t ldx, int mt, const uint16_t *w, int64_t ldw,
                    const float *const *s, int64_t ss, int64_t kc, float *lanes, int first,
                    float *sums);
    /* ukr also takes bf16 tiles read in place (not fp8) for calls of up to
     * this many tokens, where the W stream bounds the time (0: per direct) */
    int64_t bf16_direct_t;
} lin_fns;

/* vdpbf16ps flushes subnormal inputs and results to zero; it computes the
 * exact answer when neither can occur. With ex, ew the smallest exponent
 * fields of the nonzero x and W values (8-bit significands), every product
 * and every partial sum is an integer multiple of 2^(ex + ew - 268): no
 * nonzero one is below 2^-126 when ex + ew >= 142, and no input is
 * subnormal when both fields are >= 1. */
static inline int mla_cpu_dp_safe(int ex, int ew)
{
    return ex >= 1 && ew >= 1 && ex + ew >= 142;
}

/* The smallest exponent field (bits 14..7) of the nonzero bf16 values
 * p[0, n), or 255 when there are none. */
static inline int mla_cpu_bf16_min_exp(const uint16_t *p, int64_t n)
{
    unsigned m = 0xFF;
    for (int64_t i = 0; i < n; ++i) {
        const unsigned e = (p[i] >> 7) & 0xFFu;
        m = (p[i] & 0x7FFFu) && e < m ? e : m;
    }
    return (int)m;
}

/* bf16: mla_cpu_has_bf16 of the context */
const lin_fns *mla_cpu_linear_fns(mla_cpu_isa isa, int bf16);

#if MLA_CPU_X86
/* Shared by the AVX-512 copies (cpu/linear_kernel.c, cpu/linear_kernel_bf16.c):
 * sums[f] = mla_cpu_linear_reduce of the lanes at lanes[f][16], f < n <= 32. */
void mla_cpu_linear_finish512(const float *lanes, int n, float *sums);
/* The lin_fns fields of the AVX512-BF16 copy (mla_cpu_has_bf16, in
 * cpu_kernels.h, says whether to take it). */
void mla_cpu_linear_ukr_dp(const uint16_t *x, int64_t ldx, int mt, const lin_wtile *w,
                           int64_t kc, float *lanes, int first, float *sums);
int mla_cpu_linear_min_exp(const uint16_t *p, int64_t n);
void mla_cpu_linear_fp8_to_bf16(const uint8_t *codes, int64_t n, int fnuz, uint16_t *out);
void mla_cpu_linear_ukr_dp8(const uint16_t *x, int64_t ldx, int mt, const uint16_t *w,
                            int64_t ldw, const float *const *s, int64_t ss, int64_t kc,
                            float *lanes, int first, float *sums);
/* The AVX2 copy's ukr (cpu/linear_kernel_avx2.c): fp32 or bf16 tiles. */
void mla_cpu_linear_ukr_avx2(const float *x, int64_t ldx, int mt, const lin_wtile *w,
                             int64_t kc, float *lanes, int first, float *sums);
#else
/* Portable builds never take a vdpbf16ps path (dp is 0); the generic bodies
 * still name this. */
static inline int mla_cpu_linear_min_exp(const uint16_t *p, int64_t n)
{
    (void)p, (void)n;
    return 0;
}
#endif

/* The 16 lanes of one output added pairwise: lanes l and l + 8, then the
 * results l and l + 4, then l and l + 2, then the last two. */
static inline float mla_cpu_linear_reduce(const float *lanes)
{
    float v[LANES];
    for (int l = 0; l < LANES; ++l)
        v[l] = lanes[l];
    for (int w = LANES / 2; w >= 1; w /= 2)
        for (int l = 0; l < w; ++l)
            v[l] += v[l + w];
    return v[0];
}

#endif
