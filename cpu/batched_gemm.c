/* CPU batched GEMM (mla_batched_gemm): y[b] = fl(fl32(x[b] @ W[b]) * w_scale),
 * x [B, M, K], W [B, K, N] (bf16, or fp8 codes under one per-tensor scale),
 * y [B, M, N], every operand through its strides (the absorb passes q_nope
 * as a [H, T, nope] view, W_kc / W_vc as views of kv_b_proj, and y as a
 * [H, T, L] view of a [T, H, L] buffer). fp32 accumulation.
 *
 * A task is one batch b and NC columns of W: W[b][:, n0 : n0 + NC] is
 * decoded into an fp32 panel [K, NC] (at most PANEL_FLOATS values, so it
 * stays in L2), then
 * - M >= SGEMM_MIN_M with OpenBLAS: one single-threaded cblas_sgemm with
 *   x[b] in fp32 (copied when it is not F32 with unit inner stride);
 * - otherwise: a broadcast micro-kernel over MR rows x NV vectors of 16
 *   columns, each output summed in k order (AVX-512: FMA; portable: multiply
 *   and add).
 * Panels and their boundaries do not depend on the thread count, and one
 * thread computes each output: the bits do not either. */
#include <stdlib.h>
#include <string.h>

#if defined(MLA_HAVE_OPENMP)
#include <omp.h>
#endif
#if defined(MLA_HAVE_OPENBLAS)
#include <cblas.h>
#endif

#include "cpu/cpu_kernels.h"
#include "cpu/cpu_rows.h"

#if MLA_CPU_X86
#include <immintrin.h>
#endif

#define LANES 16
#define NV 4                  /* vectors of 16 columns per micro-tile */
#define NTILE (NV * LANES)
#define MR 6                  /* rows per micro-tile (MR * NV accumulators) */
#define PANEL_FLOATS 131072   /* 512 KB of decoded W per task */
#define SGEMM_MIN_M 64

typedef void (*rows_fn)(const mla_tensor *t, int64_t b, int64_t r0, int64_t rows, int64_t c0,
                        int64_t cols, float *out, int64_t ldo);
typedef void (*ukr_fn)(const float *x, int64_t ldx, int mr, const float *w, int64_t ldw,
                       int64_t K, int64_t nc, float *out);

typedef struct isa_fns {
    rows_fn rows; /* x rows and W rows to fp32 alike */
    ukr_fn ukr;
} isa_fns;

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

/* out[r][n] = sum_k x[r, k] * w[k, n] for r < mr, n < nc (<= NTILE). */
MLA_CPU_INLINE void ukr_body(const float *x, int64_t ldx, int mr, const float *w, int64_t ldw,
                             int64_t K, int64_t nc, float *out)
{
    for (int r = 0; r < mr; ++r) {
        float acc[NTILE] = {0};
        for (int64_t k = 0; k < K; ++k) {
            const float xv = x[r * ldx + k];
            const float *wk = w + k * ldw;
            for (int64_t n = 0; n < nc; ++n)
                acc[n] += xv * wk[n];
        }
        memcpy(out + r * NTILE, acc, sizeof acc);
    }
}

static void rows_generic(const mla_tensor *t, int64_t b, int64_t r0, int64_t rows, int64_t c0,
                         int64_t cols, float *out, int64_t ldo)
{
    rows_body(t, b, r0, rows, c0, cols, out, ldo);
}
static void ukr_generic(const float *x, int64_t ldx, int mr, const float *w, int64_t ldw,
                        int64_t K, int64_t nc, float *out)
{
    ukr_body(x, ldx, mr, w, ldw, K, nc, out);
}
static const isa_fns fns_generic = {rows_generic, ukr_generic};

#if MLA_CPU_X86
MLA_TARGET_AVX2 static void rows_avx2(const mla_tensor *t, int64_t b, int64_t r0, int64_t rows,
                                      int64_t c0, int64_t cols, float *out, int64_t ldo)
{
    rows_body(t, b, r0, rows, c0, cols, out, ldo);
}
MLA_TARGET_AVX2 static void ukr_avx2(const float *x, int64_t ldx, int mr, const float *w,
                                     int64_t ldw, int64_t K, int64_t nc, float *out)
{
    ukr_body(x, ldx, mr, w, ldw, K, nc, out);
}
static const isa_fns fns_avx2 = {rows_avx2, ukr_avx2};

MLA_TARGET_AVX512 static void rows_avx512(const mla_tensor *t, int64_t b, int64_t r0,
                                          int64_t rows, int64_t c0, int64_t cols, float *out,
                                          int64_t ldo)
{
    rows_body(t, b, r0, rows, c0, cols, out, ldo);
}

/* MRC x NV zmm accumulators; columns past nc load as zeros (masks). */
MLA_TARGET_AVX512 static inline __attribute__((always_inline)) void
ukr512(const float *x, int64_t ldx, const int MRC, const float *w, int64_t ldw, int64_t K,
       int64_t nc, float *out)
{
    __m512 acc[MR][NV];
    __mmask16 m[NV];
    for (int v = 0; v < NV; ++v) {
        const int64_t left = nc - v * LANES;
        m[v] = left >= LANES ? (__mmask16)0xFFFF : left > 0 ? (__mmask16)((1u << left) - 1u) : 0;
        for (int r = 0; r < MRC; ++r)
            acc[r][v] = _mm512_setzero_ps();
    }
    for (int64_t k = 0; k < K; ++k) {
        __m512 wv[NV];
        for (int v = 0; v < NV; ++v)
            wv[v] = _mm512_maskz_loadu_ps(m[v], w + k * ldw + v * LANES);
        for (int r = 0; r < MRC; ++r) {
            const __m512 xb = _mm512_set1_ps(x[r * ldx + k]);
            for (int v = 0; v < NV; ++v)
                acc[r][v] = _mm512_fmadd_ps(xb, wv[v], acc[r][v]);
        }
    }
    for (int r = 0; r < MRC; ++r)
        for (int v = 0; v < NV; ++v)
            _mm512_storeu_ps(out + r * NTILE + v * LANES, acc[r][v]);
}

MLA_TARGET_AVX512 static void ukr_avx512(const float *x, int64_t ldx, int mr, const float *w,
                                         int64_t ldw, int64_t K, int64_t nc, float *out)
{
    switch (mr) { /* a constant row count per copy: the accumulators stay in registers */
    case 1: ukr512(x, ldx, 1, w, ldw, K, nc, out); break;
    case 2: ukr512(x, ldx, 2, w, ldw, K, nc, out); break;
    case 3: ukr512(x, ldx, 3, w, ldw, K, nc, out); break;
    case 4: ukr512(x, ldx, 4, w, ldw, K, nc, out); break;
    case 5: ukr512(x, ldx, 5, w, ldw, K, nc, out); break;
    default: ukr512(x, ldx, MR, w, ldw, K, nc, out); break;
    }
}
static const isa_fns fns_avx512 = {rows_avx512, ukr_avx512};
#endif

static const isa_fns *pick(mla_cpu_isa isa)
{
#if MLA_CPU_X86
    if (isa == MLA_CPU_ISA_AVX512)
        return &fns_avx512;
    if (isa == MLA_CPU_ISA_AVX2)
        return &fns_avx2;
#endif
    (void)isa;
    return &fns_generic;
}

/* y[b, m0 + r, n0 + n] = fl(v[r * ldv + n] * w_scale) for r < rows, n < cols. */
static void store_y(const mla_batched_gemm_args *a, int64_t b, int64_t m0, int64_t rows,
                    int64_t n0, int64_t cols, const float *v, int64_t ldv)
{
    const mla_tensor *y = &a->y;
    for (int64_t r = 0; r < rows; ++r) {
        const int64_t off = b * y->stride[0] + (m0 + r) * y->stride[1] + n0 * y->stride[2];
        for (int64_t n = 0; n < cols; ++n) {
            const float s = v[r * ldv + n] * a->w_scale;
            if (y->dtype == MLA_DTYPE_F32)
                ((float *)y->data)[off + n * y->stride[2]] = s;
            else
                ((uint16_t *)y->data)[off + n * y->stride[2]] = mla_fb_f32_to_bf16(s);
        }
    }
}

typedef struct bg_plan {
    int64_t B, M, K, N, nc, chunks; /* nc columns per task, chunks per batch */
    int sgemm;
    int64_t per; /* floats of scratch per thread */
} bg_plan;

#if defined(MLA_HAVE_OPENBLAS)
/* C = w_scale * A B on this thread only (see cpu/linear.c: OpenBLAS must not
 * split a call, or its bits may change with the thread count). */
static void sgemm_one_thread(int64_t M, int64_t n, int64_t K, float alpha, const float *A,
                             int64_t lda, const float *Bm, int64_t ldb, float *C, int64_t ldc)
{
#if defined(MLA_HAVE_OPENMP)
    const int outer = !omp_in_parallel(), prev = omp_get_max_threads();
    if (outer)
        omp_set_num_threads(1);
#endif
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (blasint)M, (blasint)n, (blasint)K,
                alpha, A, (blasint)lda, Bm, (blasint)ldb, 0.0f, C, (blasint)ldc);
#if defined(MLA_HAVE_OPENMP)
    if (outer)
        omp_set_num_threads(prev);
#endif
}

/* x[b] against the panel through OpenBLAS. buf: M * K (+ M * nc) floats. */
static void sgemm_task(const mla_batched_gemm_args *a, const isa_fns *f, const bg_plan *p,
                       int64_t b, int64_t n0, int64_t nc, const float *panel, float *buf)
{
    const mla_tensor *x = &a->x, *y = &a->y;
    const float *xs = (const float *)x->data + b * x->stride[0];
    int64_t ldx = x->stride[1];
    if (x->dtype != MLA_DTYPE_F32 || (x->stride[2] != 1 && p->K > 1) || ldx < p->K) {
        f->rows(x, b, 0, p->M, 0, p->K, buf, p->K);
        xs = buf, ldx = p->K;
    }
    if (y->dtype == MLA_DTYPE_F32 && y->stride[2] == 1 && y->stride[1] >= nc) {
        float *yd = (float *)y->data + b * y->stride[0] + n0;
        sgemm_one_thread(p->M, nc, p->K, a->w_scale, xs, ldx, panel, nc, yd, y->stride[1]);
        return;
    }
    float *tmp = buf + p->M * p->K;
    sgemm_one_thread(p->M, nc, p->K, 1.0f, xs, ldx, panel, nc, tmp, nc);
    store_y(a, b, 0, p->M, n0, nc, tmp, nc);
}
#endif

/* x[b] against the panel with the micro-kernel. buf: MR * K + MR * NTILE floats. */
static void own_task(const mla_batched_gemm_args *a, const isa_fns *f, const bg_plan *p,
                     int64_t b, int64_t n0, int64_t nc, const float *panel, float *buf)
{
    float *xr = buf, *tile = buf + MR * p->K;
    for (int64_t m0 = 0; m0 < p->M; m0 += MR) {
        const int64_t mr = p->M - m0 < MR ? p->M - m0 : MR;
        f->rows(&a->x, b, m0, mr, 0, p->K, xr, p->K);
        for (int64_t j = 0; j < nc; j += NTILE) {
            const int64_t cols = nc - j < NTILE ? nc - j : NTILE;
            f->ukr(xr, p->K, (int)mr, panel + j, nc, p->K, cols, tile);
            store_y(a, b, m0, mr, n0 + j, cols, tile, NTILE);
        }
    }
}

mla_status mla_cpu_batched_gemm(mla_context *ctx, const mla_batched_gemm_args *a)
{
    bg_plan p = {a->x.shape[0], a->x.shape[1], a->x.shape[2], a->w.shape[2], 0, 0, 0, 0};
    int64_t nc = PANEL_FLOATS / (p.K > 0 ? p.K : 1) / NTILE * NTILE;
    nc = nc < NTILE ? NTILE : nc;
    p.nc = nc < p.N ? nc : p.N;
    p.chunks = (p.N + p.nc - 1) / p.nc;
#if defined(MLA_HAVE_OPENBLAS)
    p.sgemm = p.M >= SGEMM_MIN_M && p.K > 0;
#endif
    p.per = p.K * p.nc + (p.sgemm ? p.M * p.K + p.M * p.nc : MR * p.K + MR * NTILE);
    const int64_t tasks = p.B * p.chunks;
    const int nt = mla_cpu_threads(ctx, tasks, p.B * p.M * p.N * p.K / 64);
    float *bufs = malloc((size_t)(nt * p.per) * sizeof(float));
    if (!bufs)
        return mla_fail(ctx, MLA_ERR_OUT_OF_MEMORY, "w", "no memory for %d weight panels", nt);
    const isa_fns *f = pick(mla_cpu_isa_of(ctx));
#if defined(MLA_HAVE_OPENMP)
#pragma omp parallel for num_threads(nt) schedule(dynamic) if (nt > 1)
#endif
    for (int64_t k = 0; k < tasks; ++k) {
        int id = 0;
#if defined(MLA_HAVE_OPENMP)
        id = omp_get_thread_num();
#endif
        const int64_t b = k / p.chunks, n0 = (k % p.chunks) * p.nc;
        const int64_t cols = p.N - n0 < p.nc ? p.N - n0 : p.nc;
        float *panel = bufs + id * p.per;
        f->rows(&a->w, b, 0, p.K, n0, cols, panel, cols);
#if defined(MLA_HAVE_OPENBLAS)
        if (p.sgemm) {
            sgemm_task(a, f, &p, b, n0, cols, panel, panel + p.K * p.nc);
            continue;
        }
#endif
        own_task(a, f, &p, b, n0, cols, panel, panel + p.K * p.nc);
    }
    free(bufs);
    return MLA_OK;
}
