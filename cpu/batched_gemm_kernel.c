/* Per-ISA pieces of the CPU batched GEMM (cpu/batched_gemm_kernel.h).
 * Portable: plain C over an fp32 copy of W, multiply then add; AVX2: the
 * same arithmetic in ymm registers (cpu/batched_gemm_avx2.c), bf16 W read
 * in place.
 * AVX-512: W read where it lies (bf16 by a shift, fp8 codes through
 * cpu/avx512_vec.h, exact values), FMA, y written by the kernel; with
 * AVX512-BF16, a vdpbf16ps kernel over bf16 pairs. Each output is summed
 * over k in one fixed order per kernel. */
#include <stdlib.h>
#include <string.h>

#include "cpu/batched_gemm_kernel.h"
#include "cpu/cpu_rows.h"

#define LANES BG_LANES
#define NV BG_NV
#define NTILE BG_NTILE
#define MR BG_MR

/* t[b, r0 .. r0 + rows, c0 .. c0 + cols] (F32, BF16 or fp8 codes) as fp32
 * rows of out (row stride ldo). */
MLA_CPU_INLINE void rows_body(const mla_tensor *t, int64_t b, int64_t r0, int64_t rows,
                              int64_t c0, int64_t cols, float *out, int64_t ldo)
{
    const int64_t sz = (int64_t)mla_dtype_size(t->dtype);
    for (int64_t r = 0; r < rows; ++r) {
        const char *p = (const char *)t->data +
                        (b * t->stride[0] + (r0 + r) * t->stride[1] + c0 * t->stride[2]) * sz;
        if (t->dtype == MLA_DTYPE_FP8_E4M3FN || t->dtype == MLA_DTYPE_FP8_E4M3FNUZ)
            mla_cpu_load_fp8(p, t->dtype, t->stride[2], cols, out + r * ldo);
        else
            mla_cpu_load_float(p, t->dtype, t->stride[2], cols, out + r * ldo);
    }
}

/* y[b, m0 + r, n0 + c] = fl(tile[r][c] * w_scale) for r < rows, c < cols. */
MLA_CPU_INLINE void store_body(const mla_batched_gemm_args *a, int64_t b, int64_t m0, int64_t rows,
                               int64_t n0, int64_t cols, float *tile)
{
    const mla_tensor *y = &a->y;
    const float s = a->w_scale;
    for (int64_t r = 0; r < rows; ++r) {
        const int64_t off = b * y->stride[0] + (m0 + r) * y->stride[1] + n0 * y->stride[2];
        float *v = tile + r * NTILE;
        MLA_SIMD for (int64_t c = 0; c < cols; ++c) v[c] *= s;
        mla_cpu_store_float(v, (char *)y->data + off * (int64_t)mla_dtype_size(y->dtype),
                            y->dtype, y->stride[2], cols);
    }
}

MLA_CPU_INLINE void ukr_body(const float *x, int64_t ldx, int mr, const bg_w *w, int64_t K,
                             int64_t nc, float *out, const bg_y *y)
{
    (void)y; /* never given to the portable kernels */
    for (int r = 0; r < mr; ++r) {
        float acc[NTILE] = {0};
        for (int64_t k = 0; k < K; ++k) {
            const float xv = x[r * ldx + k];
            const float *wk = (const float *)(w->p + k * w->ld);
            for (int64_t c = 0; c < nc; ++c)
                acc[c] += xv * wk[c];
        }
        memcpy(out + r * NTILE, acc, sizeof acc);
    }
}

static void rows_generic(const mla_tensor *t, int64_t b, int64_t r0, int64_t rows, int64_t c0,
                         int64_t cols, float *out, int64_t ldo)
{
    rows_body(t, b, r0, rows, c0, cols, out, ldo);
}
static void ukr_generic(const float *x, int64_t ldx, int mr, const bg_w *w, int64_t K,
                        int64_t nc, float *out, const bg_y *y)
{
    ukr_body(x, ldx, mr, w, K, nc, out, y);
}
static void store_generic(const mla_batched_gemm_args *a, int64_t b, int64_t m0, int64_t rows,
                          int64_t n0, int64_t cols, float *tile)
{
    store_body(a, b, m0, rows, n0, cols, tile);
}
static const bg_fns fns_generic = {rows_generic, ukr_generic, store_generic, 0, NULL, NULL, 0};

#if MLA_CPU_X86
MLA_TARGET_AVX2 static void rows_avx2(const mla_tensor *t, int64_t b, int64_t r0, int64_t rows,
                                      int64_t c0, int64_t cols, float *out, int64_t ldo)
{
    rows_body(t, b, r0, rows, c0, cols, out, ldo);
}
MLA_TARGET_AVX2 static void store_avx2(const mla_batched_gemm_args *a, int64_t b, int64_t m0,
                                       int64_t rows, int64_t n0, int64_t cols, float *tile)
{
    store_body(a, b, m0, rows, n0, cols, tile);
}
/* bf16 W in place: no fp32 copy of the W columns per task (W_kc at decode) */
static const bg_fns fns_avx2 = {rows_avx2, mla_cpu_bgemm_ukr_avx2, store_avx2, 0, NULL, NULL, 1};

MLA_TARGET_AVX512 static void rows_avx512(const mla_tensor *t, int64_t b, int64_t r0,
                                          int64_t rows, int64_t c0, int64_t cols, float *out,
                                          int64_t ldo)
{
    rows_body(t, b, r0, rows, c0, cols, out, ldo);
}
MLA_TARGET_AVX512 static void store_avx512(const mla_batched_gemm_args *a, int64_t b, int64_t m0,
                                           int64_t rows, int64_t n0, int64_t cols, float *tile)
{
    store_body(a, b, m0, rows, n0, cols, tile);
}

#if defined(__clang__)
#define BG_UNROLL _Pragma("unroll")
#else
#define BG_UNROLL _Pragma("GCC unroll 8")
#endif

/* MRC x NV zmm accumulators (unrolled early, so that they stay registers);
 * columns past nc load as zeros. fp8 codes are exact values (scale 1). */
MLA_AVX512_INLINE void ukr512(const float *x, int64_t ldx, const int MRC, const bg_w *w,
                              const int KIND, int64_t K, int64_t nc, float *out, const bg_y *y)
{
    const int64_t vb = LANES * MLA_V16_SIZE(KIND);
    const float one = KIND >= MLA_V16_FN ? mla_v16_fp8_fold((mla_v16_kind)KIND, 1.0f) : 0.0f;
    __m512 acc[MR][NV];
    __mmask16 m[NV];
    BG_UNROLL for (int v = 0; v < NV; ++v) {
        m[v] = mla_v16_mask(nc - v * LANES);
        BG_UNROLL for (int r = 0; r < MRC; ++r)
            acc[r][v] = _mm512_setzero_ps();
    }
    for (int64_t k = 0; k < K; ++k) {
        const char *wk = w->p + k * w->ld;
        __m512 wv[NV];
        BG_UNROLL for (int v = 0; v < NV; ++v)
            wv[v] = mla_v16_load(wk + v * vb, KIND, one, m[v]);
        BG_UNROLL for (int r = 0; r < MRC; ++r) {
            const __m512 xb = _mm512_set1_ps(x[r * ldx + k]);
            BG_UNROLL for (int v = 0; v < NV; ++v)
                acc[r][v] = _mm512_fmadd_ps(xb, wv[v], acc[r][v]);
        }
    }
    if (y) {
        const __m512 s = _mm512_set1_ps(y->scale);
        BG_UNROLL for (int r = 0; r < MRC; ++r)
            BG_UNROLL for (int v = 0; v < NV; ++v)
                mla_v16_store(y->p + r * y->ld + v * LANES * (y->bf16 ? 2 : 4),
                              _mm512_mul_ps(acc[r][v], s), y->bf16, m[v]);
        return;
    }
    BG_UNROLL for (int r = 0; r < MRC; ++r)
        BG_UNROLL for (int v = 0; v < NV; ++v)
            _mm512_storeu_ps(out + r * NTILE + v * LANES, acc[r][v]);
}

MLA_AVX512_INLINE void ukr512_mr(const float *x, int64_t ldx, int mr, const bg_w *w,
                                 const int KIND, int64_t K, int64_t nc, float *out,
                                 const bg_y *y)
{
    switch (mr) {
    case 1: ukr512(x, ldx, 1, w, KIND, K, nc, out, y); break;
    case 2: ukr512(x, ldx, 2, w, KIND, K, nc, out, y); break;
    case 3: ukr512(x, ldx, 3, w, KIND, K, nc, out, y); break;
    case 4: ukr512(x, ldx, 4, w, KIND, K, nc, out, y); break;
    case 5: ukr512(x, ldx, 5, w, KIND, K, nc, out, y); break;
    default: ukr512(x, ldx, MR, w, KIND, K, nc, out, y); break;
    }
}

MLA_TARGET_AVX512 static void ukr_avx512(const float *x, int64_t ldx, int mr, const bg_w *w,
                                         int64_t K, int64_t nc, float *out, const bg_y *y)
{
    switch (w->kind) {
    case MLA_V16_BF16: ukr512_mr(x, ldx, mr, w, MLA_V16_BF16, K, nc, out, y); break;
    case MLA_V16_FN: ukr512_mr(x, ldx, mr, w, MLA_V16_FN, K, nc, out, y); break;
    case MLA_V16_FNUZ: ukr512_mr(x, ldx, mr, w, MLA_V16_FNUZ, K, nc, out, y); break;
    default: ukr512_mr(x, ldx, mr, w, MLA_V16_F32, K, nc, out, y); break;
    }
}
static const bg_fns fns_avx512 = {rows_avx512, ukr_avx512, store_avx512, 1, NULL, NULL, 0};

#if defined(__clang__)
#define TARGET_BF16 __attribute__((target(MLA_AVX512_ISAS ",avx512bf16")))
#else
#define TARGET_BF16 __attribute__((target(MLA_AVX512_ISAS ",avx512bf16,prefer-vector-width=512")))
#endif

/* MRC x NV accumulators; per pair p: NV vectors of W pairs, one broadcast x
 * pair per row. Columns past nc load as zeros. */
TARGET_BF16 static inline __attribute__((always_inline)) void
ukrdp(const uint32_t *xp, int64_t ldx, const int MRC, const uint32_t *wp, int64_t ldw, int64_t P,
      int64_t nc, float *out, const bg_y *y)
{
    __m512 acc[MR][NV];
    __mmask16 m[NV];
    BG_UNROLL for (int v = 0; v < NV; ++v) {
        m[v] = mla_v16_mask(nc - v * LANES);
        BG_UNROLL for (int r = 0; r < MRC; ++r)
            acc[r][v] = _mm512_setzero_ps();
    }
    for (int64_t p = 0; p < P; ++p) {
        __m512bh wv[NV];
        BG_UNROLL for (int v = 0; v < NV; ++v)
            wv[v] = (__m512bh)_mm512_maskz_loadu_epi32(m[v], wp + p * ldw + v * LANES);
        BG_UNROLL for (int r = 0; r < MRC; ++r) {
            const __m512bh xb = (__m512bh)_mm512_set1_epi32((int)xp[r * ldx + p]);
            BG_UNROLL for (int v = 0; v < NV; ++v)
                acc[r][v] = _mm512_dpbf16_ps(acc[r][v], xb, wv[v]);
        }
    }
    if (y) {
        const __m512 s = _mm512_set1_ps(y->scale);
        BG_UNROLL for (int r = 0; r < MRC; ++r)
            BG_UNROLL for (int v = 0; v < NV; ++v)
                mla_v16_store(y->p + r * y->ld + v * LANES * (y->bf16 ? 2 : 4),
                              _mm512_mul_ps(acc[r][v], s), y->bf16, m[v]);
        return;
    }
    BG_UNROLL for (int r = 0; r < MRC; ++r)
        BG_UNROLL for (int v = 0; v < NV; ++v)
            _mm512_storeu_ps(out + r * NTILE + v * LANES, acc[r][v]);
}

TARGET_BF16 static void ukr_dp(const uint32_t *xp, int64_t ldx, int mr, const uint32_t *wp,
                               int64_t ldw, int64_t P, int64_t nc, float *out, const bg_y *y)
{
    switch (mr) {
    case 1: ukrdp(xp, ldx, 1, wp, ldw, P, nc, out, y); break;
    case 2: ukrdp(xp, ldx, 2, wp, ldw, P, nc, out, y); break;
    case 3: ukrdp(xp, ldx, 3, wp, ldw, P, nc, out, y); break;
    case 4: ukrdp(xp, ldx, 4, wp, ldw, P, nc, out, y); break;
    case 5: ukrdp(xp, ldx, 5, wp, ldw, P, nc, out, y); break;
    default: ukrdp(xp, ldx, MR, wp, ldw, P, nc, out, y); break;
    }
}
TARGET_BF16 static void pair_rows(const uint16_t *lo, const uint16_t *hi, int64_t n, uint32_t *out)
{
    for (int64_t c = 0; c < n; c += LANES) {
        const __mmask16 m = mla_v16_mask(n - c);
        const __m512i a = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, lo + c));
        const __m512i b = hi ? _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, hi + c))
                             : _mm512_setzero_si512();
        _mm512_mask_storeu_epi32(out + c, m, _mm512_or_si512(a, _mm512_slli_epi32(b, 16)));
    }
}
static const bg_fns fns_avx512_bf16 = {rows_avx512, ukr_avx512, store_avx512, 1, ukr_dp,
                                       pair_rows, 0};

#endif

const bg_fns *mla_cpu_bgemm_fns(mla_cpu_isa isa, int bf16)
{
#if MLA_CPU_X86
    if (isa == MLA_CPU_ISA_AVX512)
        return bf16 ? &fns_avx512_bf16 : &fns_avx512;
    if (isa == MLA_CPU_ISA_AVX2)
        return &fns_avx2;
#endif
    (void)isa, (void)bf16;
    return &fns_generic;
}

