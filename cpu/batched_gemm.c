/* CPU batched GEMM (mla_batched_gemm): y[b] = fl(fl32(x[b] @ W[b]) * w_scale),
 * x [B, M, K], W [B, K, N] (bf16, or fp8 codes under one per-tensor scale),
 * y [B, M, N], every operand through its strides (the absorb passes q_nope
 * as a [H, T, nope] view, W_kc / W_vc as views of kv_b_proj, and y as a
 * [H, T, L] view of a [T, H, L] buffer). fp32 accumulation.
 *
 * A task is one batch b and up to NC columns: x[b] is copied to fp32 rows,
 * then a broadcast micro-kernel computes MR rows x NV vectors of 16 columns,
 * each output summed over k in order, so neither the thread count nor the
 * tiling changes a bit. The AVX-512 kernel reads W[b] where it lies (bf16 by
 * a shift, fp8 codes through cpu/avx512_vec.h) and uses FMA; the portable
 * kernels read an fp32 copy of the W columns and multiply, then add. */
#include <stdlib.h>
#include <string.h>

#if defined(MLA_HAVE_OPENMP)
#include <omp.h>
#endif

#include "cpu/avx512_vec.h"
#include "cpu/cpu_kernels.h"
#include "cpu/cpu_rows.h"

#define LANES 16
#define NV 4 /* vectors of 16 columns per micro-tile */
#define NTILE (NV * LANES)
#define MR 6 /* rows per micro-tile (MR * NV accumulators) */
#define NC 512 /* columns per task */
#define PREFETCH_MAX_M 4

/* W[b][k, n0 + c] for k < K, c < nc: where it lies (direct kernels) or fp32. */
typedef struct bg_w {
    const char *p;  /* (k, c) = (0, 0) */
    int64_t ld;     /* bytes from one k to the next */
    mla_v16_kind kind;
} bg_w;

typedef void (*rows_fn)(const mla_tensor *t, int64_t b, int64_t r0, int64_t rows, int64_t c0,
                        int64_t cols, float *out, int64_t ldo);
/* Output rows written by the kernel itself: y (F32 / BF16, unit column
 * stride) at row r = p + r * ld bytes, values times scale. */
typedef struct bg_y {
    char *p;
    int64_t ld;
    int bf16;
    float scale;
} bg_y;

typedef void (*ukr_fn)(const float *x, int64_t ldx, int mr, const bg_w *w, int64_t K,
                       int64_t nc, float *out, const bg_y *y);
typedef void (*store_fn)(const mla_batched_gemm_args *a, int64_t b, int64_t m0, int64_t rows,
                         int64_t n0, int64_t cols, float *tile);

typedef struct isa_fns {
    rows_fn rows; /* x rows (and W rows for the portable kernels) to fp32 */
    ukr_fn ukr;   /* out[r][c] = sum_k x[r, k] * w[k, c], r < mr, c < nc <= NTILE; or
                   * straight into y when given (direct kernels only) */
    store_fn store;
    int direct;   /* ukr reads bf16 / fp8 W and writes y */
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
static const isa_fns fns_generic = {rows_generic, ukr_generic, store_generic, 0};

#if MLA_CPU_X86
MLA_TARGET_AVX2 static void rows_avx2(const mla_tensor *t, int64_t b, int64_t r0, int64_t rows,
                                      int64_t c0, int64_t cols, float *out, int64_t ldo)
{
    rows_body(t, b, r0, rows, c0, cols, out, ldo);
}
MLA_TARGET_AVX2 static void ukr_avx2(const float *x, int64_t ldx, int mr, const bg_w *w,
                                     int64_t K, int64_t nc, float *out, const bg_y *y)
{
    ukr_body(x, ldx, mr, w, K, nc, out, y);
}
MLA_TARGET_AVX2 static void store_avx2(const mla_batched_gemm_args *a, int64_t b, int64_t m0,
                                       int64_t rows, int64_t n0, int64_t cols, float *tile)
{
    store_body(a, b, m0, rows, n0, cols, tile);
}
static const isa_fns fns_avx2 = {rows_avx2, ukr_avx2, store_avx2, 0};

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
static const isa_fns fns_avx512 = {rows_avx512, ukr_avx512, store_avx512, 1};
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

/* Batch b, columns [n0, n0 + nc). buf: M * K floats for x[b] (+ K * nc for
 * the portable kernels' copy of W), then MR * NTILE for a tile. */
static void task(const mla_batched_gemm_args *a, const isa_fns *f, int direct, int64_t b,
                 int64_t n0, int64_t nc, float *buf)
{
    const int64_t M = a->x.shape[1], K = a->x.shape[2];
    const mla_tensor *w = &a->w;
    float *xr = buf, *wf = buf + M * K, *tile = wf + (direct ? 0 : K * nc);
    f->rows(&a->x, b, 0, M, 0, K, xr, K);
    bg_w wt;
    if (direct) {
        const int64_t sz = (int64_t)mla_dtype_size(w->dtype);
        wt.p = (const char *)w->data + (b * w->stride[0] + n0) * sz;
        wt.ld = w->stride[1] * sz, wt.kind = mla_v16_kind_of(w->dtype);
    } else {
        f->rows(w, b, 0, K, n0, nc, wf, nc);
        wt.p = (const char *)wf, wt.ld = nc * (int64_t)sizeof(float), wt.kind = MLA_V16_F32;
    }
    const int64_t esz = direct ? MLA_V16_SIZE(wt.kind) : (int64_t)sizeof(float);
    const int64_t *ys = a->y.stride, ysz = (int64_t)mla_dtype_size(a->y.dtype);
    const int ydirect = direct && ys[2] == 1; /* y is F32 or BF16 */
#if defined(__GNUC__)
    if (direct && M <= PREFETCH_MAX_M) /* few rows: W[b] is the stream; ask for all of it */
        for (int64_t k = 0; k < K; ++k)
            for (int64_t c = 0; c < nc * esz; c += 64)
                __builtin_prefetch(wt.p + k * wt.ld + c, 0, 2);
#endif
    for (int64_t j = 0; j < nc; j += NTILE) { /* a W column block stays in L1 over all rows */
        const int64_t cols = nc - j < NTILE ? nc - j : NTILE;
        bg_w wj = wt;
        wj.p += j * esz;
        for (int64_t m0 = 0; m0 < M; m0 += MR) {
            const int64_t mr = M - m0 < MR ? M - m0 : MR;
            if (ydirect) {
                bg_y yt = {(char *)a->y.data + ((b * ys[0] + m0 * ys[1] + n0 + j) * ysz),
                           ys[1] * ysz, ysz == 2, a->w_scale};
                f->ukr(xr + m0 * K, K, (int)mr, &wj, K, cols, tile, &yt);
                continue;
            }
            f->ukr(xr + m0 * K, K, (int)mr, &wj, K, cols, tile, NULL);
            f->store(a, b, m0, mr, n0 + j, cols, tile);
        }
    }
}

mla_status mla_cpu_batched_gemm(mla_context *ctx, const mla_batched_gemm_args *a)
{
    const int64_t B = a->x.shape[0], M = a->x.shape[1], K = a->x.shape[2], N = a->w.shape[2];
    const isa_fns *f = pick(mla_cpu_isa_of(ctx));
    const int direct = f->direct && a->w.stride[2] == 1;
    const int64_t nc = N < NC ? N : NC, chunks = (N + nc - 1) / nc, tasks = B * chunks;
    const int64_t per = M * K + (direct ? 0 : K * nc) + MR * NTILE;
    const int nt = mla_cpu_threads(ctx, tasks, B * M * N * K / 64);
    float *bufs = malloc((size_t)(nt * per) * sizeof(float));
    if (!bufs)
        return mla_fail(ctx, MLA_ERR_OUT_OF_MEMORY, "x", "no memory for %d row buffers", nt);
#if defined(MLA_HAVE_OPENMP)
#pragma omp parallel for num_threads(nt) schedule(dynamic) if (nt > 1)
#endif
    for (int64_t k = 0; k < tasks; ++k) {
        int id = 0;
#if defined(MLA_HAVE_OPENMP)
        id = omp_get_thread_num();
#endif
        const int64_t b = k / chunks, n0 = (k % chunks) * nc;
        task(a, f, direct, b, n0, N - n0 < nc ? N - n0 : nc, bufs + id * per);
    }
    free(bufs);
    return MLA_OK;
}
