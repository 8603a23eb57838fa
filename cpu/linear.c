/* CPU projection (mla_linear): y [T, N] = x [T, K] @ W^T with fp32
 * accumulation; W [N, K] bf16, or fp8 with DeepSeek's 128 x 128 block scales
 * (the weight is fl(code * scale), one fp32 rounding), one rounding to y.
 *
 * Two paths, picked by T; each gives bits that do not depend on the thread
 * count (threads own whole outputs, and every output's sum has a fixed order):
 *
 * - T >= SGEMM_MIN_T with OpenBLAS: tasks of PANEL rows of W, decoded to fp32
 *   (an L2-sized panel) and multiplied by one single-threaded cblas_sgemm
 *   against x in fp32. The panel boundaries are fixed, and OpenBLAS is kept to
 *   one thread per call (its partition of a call can change the bits).
 * - otherwise (and always without OpenBLAS): a dot-product kernel. W tiles of
 *   NR rows x KC values are decoded to fp32 in L1; a micro-kernel
 *   accumulates MT tokens x NR rows in LANES-wide partial sums (lane l holds
 *   k = l mod 16, in k order), which persist across k chunks in a per-task
 *   buffer; at the end the lanes are added in a fixed tree. Tasks are TB
 *   tokens x NS rows of W. The AVX-512 micro-kernel uses FMA; the portable
 *   one multiplies and adds.
 *
 * x that is not F32 with unit inner stride is first converted into an fp32
 * [T, K] copy. */
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
#define NR 3          /* W rows per micro-tile */
#define MT 8          /* tokens per micro-tile (MT * NR accumulators) */
#define KC 512        /* k values per chunk: a multiple of LANES and of WBLOCK */
#define NS 48         /* W rows per task, a multiple of NR */
#define TB 64         /* tokens per task, a multiple of MT */
#define WBLOCK 128    /* fp8 checkpoints: one scale per 128 x 128 block */
#define PANEL 128     /* sgemm path: W rows per task, a multiple of WBLOCK */
#define SGEMM_MIN_T 64

typedef void (*pack_fn)(const mla_tensor *x, int64_t t0, int64_t t1, float *out);
typedef void (*decode_fn)(const mla_linear_args *a, int64_t n0, int64_t nr, int64_t k0,
                          int64_t kc, float *out, int64_t ldo);
typedef void (*ukr_fn)(const float *x, int64_t ldx, int mt, const float *w, int64_t ldw,
                       int64_t kc, float *lanes, int first);

typedef struct isa_fns {
    pack_fn pack;
    decode_fn decode;
    ukr_fn ukr;
} isa_fns;

/* Rows [t0, t1) of x as fp32 rows of K values (row stride K). */
MLA_CPU_INLINE void pack_body(const mla_tensor *x, int64_t t0, int64_t t1, float *out)
{
    const int64_t K = x->shape[1], sz = (int64_t)mla_dtype_size(x->dtype);
    for (int64_t t = t0; t < t1; ++t)
        mla_cpu_load_float((const char *)x->data + t * x->stride[0] * sz, x->dtype, x->stride[1],
                           K, out + t * K);
}

/* W rows [n0, n0 + nr), values k0 .. k0 + kc - 1, as fp32 rows of out (row
 * stride ldo). fp8: fl(code * scale of its block); k0 is a multiple of WBLOCK. */
MLA_CPU_INLINE void decode_body(const mla_linear_args *a, int64_t n0, int64_t nr, int64_t k0,
                                int64_t kc, float *out, int64_t ldo)
{
    const mla_tensor *w = &a->w, *sc = &a->w_scale;
    for (int64_t r = 0; r < nr; ++r) {
        const int64_t n = n0 + r;
        float *o = out + r * ldo;
        if (w->dtype == MLA_DTYPE_BF16) {
            mla_cpu_load_float((const uint16_t *)w->data + n * w->stride[0] + k0 * w->stride[1],
                               MLA_DTYPE_BF16, w->stride[1], kc, o);
            continue;
        }
        const uint8_t *c = (const uint8_t *)w->data + n * w->stride[0];
        const float *srow = (const float *)sc->data + (n / WBLOCK) * sc->stride[0];
        for (int64_t b = 0; b < kc; b += WBLOCK) {
            const int64_t len = kc - b < WBLOCK ? kc - b : WBLOCK, k = k0 + b;
            const float s = srow[(k / WBLOCK) * sc->stride[1]];
            mla_cpu_load_fp8(c + k * w->stride[1], w->dtype, w->stride[1], len, o + b);
            MLA_SIMD for (int64_t i = 0; i < len; ++i) o[b + i] *= s;
        }
    }
}

/* lanes[t][j][l] (+)= sum of x[t, k] * w[j, k] over k < kc with k % 16 == l. */
MLA_CPU_INLINE void ukr_body(const float *x, int64_t ldx, int mt, const float *w, int64_t ldw,
                             int64_t kc, float *lanes, int first)
{
    for (int t = 0; t < mt; ++t)
        for (int j = 0; j < NR; ++j) {
            const float *xr = x + t * ldx, *wr = w + j * ldw;
            float *ln = lanes + (t * NR + j) * LANES, acc[LANES];
            for (int l = 0; l < LANES; ++l)
                acc[l] = first ? 0.0f : ln[l];
            int64_t k = 0;
            for (; k + LANES <= kc; k += LANES)
                for (int l = 0; l < LANES; ++l)
                    acc[l] += xr[k + l] * wr[k + l];
            for (int l = 0; k + l < kc; ++l)
                acc[l] += xr[k + l] * wr[k + l];
            memcpy(ln, acc, sizeof acc);
        }
}

static void pack_generic(const mla_tensor *x, int64_t t0, int64_t t1, float *out)
{
    pack_body(x, t0, t1, out);
}
static void decode_generic(const mla_linear_args *a, int64_t n0, int64_t nr, int64_t k0,
                           int64_t kc, float *out, int64_t ldo)
{
    decode_body(a, n0, nr, k0, kc, out, ldo);
}
static void ukr_generic(const float *x, int64_t ldx, int mt, const float *w, int64_t ldw,
                        int64_t kc, float *lanes, int first)
{
    ukr_body(x, ldx, mt, w, ldw, kc, lanes, first);
}
static const isa_fns fns_generic = {pack_generic, decode_generic, ukr_generic};

#if MLA_CPU_X86
MLA_TARGET_AVX2 static void pack_avx2(const mla_tensor *x, int64_t t0, int64_t t1, float *out)
{
    pack_body(x, t0, t1, out);
}
MLA_TARGET_AVX2 static void decode_avx2(const mla_linear_args *a, int64_t n0, int64_t nr,
                                        int64_t k0, int64_t kc, float *out, int64_t ldo)
{
    decode_body(a, n0, nr, k0, kc, out, ldo);
}
MLA_TARGET_AVX2 static void ukr_avx2(const float *x, int64_t ldx, int mt, const float *w,
                                     int64_t ldw, int64_t kc, float *lanes, int first)
{
    ukr_body(x, ldx, mt, w, ldw, kc, lanes, first);
}
static const isa_fns fns_avx2 = {pack_avx2, decode_avx2, ukr_avx2};

MLA_TARGET_AVX512 static void pack_avx512(const mla_tensor *x, int64_t t0, int64_t t1,
                                          float *out)
{
    pack_body(x, t0, t1, out);
}
MLA_TARGET_AVX512 static void decode_avx512(const mla_linear_args *a, int64_t n0, int64_t nr,
                                            int64_t k0, int64_t kc, float *out, int64_t ldo)
{
    decode_body(a, n0, nr, k0, kc, out, ldo);
}

/* The AVX-512 micro-kernel: MTC x NR zmm accumulators, one FMA per (token,
 * row, 16 values); the last partial step loads under a mask. */
MLA_TARGET_AVX512 static inline __attribute__((always_inline)) void
ukr512(const float *x, int64_t ldx, const int MTC, const float *w, int64_t ldw, int64_t kc,
       float *lanes, int first)
{
    __m512 acc[MT][NR];
    for (int t = 0; t < MTC; ++t)
        for (int j = 0; j < NR; ++j)
            acc[t][j] = first ? _mm512_setzero_ps()
                              : _mm512_loadu_ps(lanes + (t * NR + j) * LANES);
    int64_t k = 0;
    for (; k + LANES <= kc; k += LANES) {
        const __m512 w0 = _mm512_loadu_ps(w + k), w1 = _mm512_loadu_ps(w + ldw + k);
        const __m512 w2 = _mm512_loadu_ps(w + 2 * ldw + k);
        for (int t = 0; t < MTC; ++t) {
            const __m512 xv = _mm512_loadu_ps(x + t * ldx + k);
            acc[t][0] = _mm512_fmadd_ps(xv, w0, acc[t][0]);
            acc[t][1] = _mm512_fmadd_ps(xv, w1, acc[t][1]);
            acc[t][2] = _mm512_fmadd_ps(xv, w2, acc[t][2]);
        }
    }
    if (k < kc) {
        const __mmask16 m = (__mmask16)((1u << (kc - k)) - 1u);
        const __m512 w0 = _mm512_maskz_loadu_ps(m, w + k), w1 = _mm512_maskz_loadu_ps(m, w + ldw + k);
        const __m512 w2 = _mm512_maskz_loadu_ps(m, w + 2 * ldw + k);
        for (int t = 0; t < MTC; ++t) {
            const __m512 xv = _mm512_maskz_loadu_ps(m, x + t * ldx + k);
            acc[t][0] = _mm512_mask3_fmadd_ps(xv, w0, acc[t][0], m);
            acc[t][1] = _mm512_mask3_fmadd_ps(xv, w1, acc[t][1], m);
            acc[t][2] = _mm512_mask3_fmadd_ps(xv, w2, acc[t][2], m);
        }
    }
    for (int t = 0; t < MTC; ++t)
        for (int j = 0; j < NR; ++j)
            _mm512_storeu_ps(lanes + (t * NR + j) * LANES, acc[t][j]);
}

MLA_TARGET_AVX512 static void ukr_avx512(const float *x, int64_t ldx, int mt, const float *w,
                                         int64_t ldw, int64_t kc, float *lanes, int first)
{
    switch (mt) { /* a constant token count per copy: the accumulators stay in registers */
    case 1: ukr512(x, ldx, 1, w, ldw, kc, lanes, first); break;
    case 2: ukr512(x, ldx, 2, w, ldw, kc, lanes, first); break;
    case 3: ukr512(x, ldx, 3, w, ldw, kc, lanes, first); break;
    case 4: ukr512(x, ldx, 4, w, ldw, kc, lanes, first); break;
    case 5: ukr512(x, ldx, 5, w, ldw, kc, lanes, first); break;
    case 6: ukr512(x, ldx, 6, w, ldw, kc, lanes, first); break;
    case 7: ukr512(x, ldx, 7, w, ldw, kc, lanes, first); break;
    default: ukr512(x, ldx, MT, w, ldw, kc, lanes, first); break;
    }
}
static const isa_fns fns_avx512 = {pack_avx512, decode_avx512, ukr_avx512};
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

/* y[t, n] = v, rounded once to y's dtype (F32 or BF16). */
static void store_y(const mla_tensor *y, int64_t t, int64_t n, float v)
{
    const int64_t off = t * y->stride[0] + n * y->stride[1];
    if (y->dtype == MLA_DTYPE_F32)
        ((float *)y->data)[off] = v;
    else
        ((uint16_t *)y->data)[off] = mla_fb_f32_to_bf16(v);
}

/* The lanes of one output added in a fixed tree (8, 4, 2, 1 apart). */
static float reduce_lanes(const float *lanes)
{
    float v[LANES];
    memcpy(v, lanes, sizeof v);
    for (int w = LANES / 2; w >= 1; w /= 2)
        for (int l = 0; l < w; ++l)
            v[l] += v[l + w];
    return v[0];
}

/* One task of the own kernel: tokens [t0, t1) x W rows [n0, n1). wbuf: NR *
 * KC floats; part: the lanes of every micro-tile, (NS / NR) * (TB / MT) *
 * MT * NR * LANES floats. */
static void own_task(const mla_linear_args *a, const isa_fns *f, const float *x, int64_t ldx,
                     int64_t t0, int64_t t1, int64_t n0, int64_t n1, float *wbuf, float *part)
{
    const int64_t K = a->x.shape[1], groups = (t1 - t0 + MT - 1) / MT;
    for (int64_t k0 = 0; k0 < K; k0 += KC) {
        const int64_t kc = K - k0 < KC ? K - k0 : KC;
        for (int64_t nb = n0, bi = 0; nb < n1; nb += NR, ++bi) {
            const int64_t nr = n1 - nb < NR ? n1 - nb : NR;
            f->decode(a, nb, nr, k0, kc, wbuf, KC);
            if (nr < NR) /* missing rows contribute zeros, never stored */
                memset(wbuf + nr * KC, 0, (size_t)((NR - nr) * KC) * sizeof(float));
            for (int64_t tg = t0, gi = 0; tg < t1; tg += MT, ++gi) {
                const int mt = (int)(t1 - tg < MT ? t1 - tg : MT);
                float *lanes = part + (bi * groups + gi) * (MT * NR * LANES);
                f->ukr(x + tg * ldx + k0, ldx, mt, wbuf, KC, kc, lanes, k0 == 0);
                if (k0 + kc < K)
                    continue;
                for (int t = 0; t < mt; ++t)
                    for (int64_t j = 0; j < nr; ++j)
                        store_y(&a->y, tg + t, nb + j, reduce_lanes(lanes + (t * NR + j) * LANES));
            }
        }
    }
}

#if defined(MLA_HAVE_OPENBLAS)
/* C [T, n] = A [T, K] B^T with OpenBLAS on this thread only: inside an active
 * parallel region it runs single-threaded by itself; outside one it follows
 * the caller's nthreads ICV, set to 1 for the call. */
static void sgemm_one_thread(int64_t T, int64_t n, int64_t K, const float *A, int64_t lda,
                             const float *B, float *C, int64_t ldc)
{
#if defined(MLA_HAVE_OPENMP)
    const int outer = !omp_in_parallel(), prev = omp_get_max_threads();
    if (outer)
        omp_set_num_threads(1);
#endif
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (blasint)T, (blasint)n, (blasint)K, 1.0f,
                A, (blasint)lda, B, (blasint)K, 0.0f, C, (blasint)ldc);
#if defined(MLA_HAVE_OPENMP)
    if (outer)
        omp_set_num_threads(prev);
#endif
}

/* The sgemm path, once x is fp32: one task per PANEL rows of W. */
static mla_status sgemm_path(mla_context *ctx, const mla_linear_args *a, const isa_fns *f,
                             const float *x, int64_t ldx)
{
    const int64_t T = a->x.shape[0], K = a->x.shape[1], N = a->w.shape[0];
    const int direct = a->y.dtype == MLA_DTYPE_F32 && a->y.stride[1] == 1 && a->y.stride[0] >= N;
    const int64_t tasks = (N + PANEL - 1) / PANEL;
    const int nt = mla_cpu_threads(ctx, tasks, T * N * K / 64);
    const int64_t per = PANEL * K + (direct ? 0 : T * PANEL);
    float *bufs = malloc((size_t)(nt * per) * sizeof(float));
    if (!bufs)
        return mla_fail(ctx, MLA_ERR_OUT_OF_MEMORY, "w", "no memory for %d weight panels", nt);
#if defined(MLA_HAVE_OPENMP)
#pragma omp parallel for num_threads(nt) schedule(dynamic) if (nt > 1)
#endif
    for (int64_t p = 0; p < tasks; ++p) {
        int id = 0;
#if defined(MLA_HAVE_OPENMP)
        id = omp_get_thread_num();
#endif
        float *panel = bufs + id * per, *tmp = panel + PANEL * K;
        const int64_t n0 = p * PANEL, np = N - n0 < PANEL ? N - n0 : PANEL;
        f->decode(a, n0, np, 0, K, panel, K);
        if (direct) {
            sgemm_one_thread(T, np, K, x, ldx, panel, (float *)a->y.data + n0, a->y.stride[0]);
            continue;
        }
        sgemm_one_thread(T, np, K, x, ldx, panel, tmp, np);
        for (int64_t t = 0; t < T; ++t)
            for (int64_t j = 0; j < np; ++j)
                store_y(&a->y, t, n0 + j, tmp[t * np + j]);
    }
    free(bufs);
    return MLA_OK;
}
#endif

static mla_status own_path(mla_context *ctx, const mla_linear_args *a, const isa_fns *f,
                           const float *x, int64_t ldx)
{
    const int64_t T = a->x.shape[0], K = a->x.shape[1], N = a->w.shape[0];
    const int64_t tt = (T + TB - 1) / TB, tn = (N + NS - 1) / NS, tasks = tt * tn;
    const int nt = mla_cpu_threads(ctx, tasks, T * N * K / 64);
    const int64_t per = NR * KC + (NS / NR) * (TB / MT) * MT * NR * LANES;
    float *bufs = malloc((size_t)(nt * per) * sizeof(float));
    if (!bufs)
        return mla_fail(ctx, MLA_ERR_OUT_OF_MEMORY, "w", "no memory for %d weight tiles", nt);
#if defined(MLA_HAVE_OPENMP)
#pragma omp parallel for num_threads(nt) schedule(dynamic) if (nt > 1)
#endif
    for (int64_t k = 0; k < tasks; ++k) {
        int id = 0;
#if defined(MLA_HAVE_OPENMP)
        id = omp_get_thread_num();
#endif
        const int64_t t0 = (k / tn) * TB, n0 = (k % tn) * NS;
        float *wbuf = bufs + id * per;
        own_task(a, f, x, ldx, t0, T - t0 < TB ? T : t0 + TB, n0, N - n0 < NS ? N : n0 + NS,
                 wbuf, wbuf + NR * KC);
    }
    free(bufs);
    return MLA_OK;
}

mla_status mla_cpu_linear(mla_context *ctx, const mla_linear_args *a)
{
    const int64_t T = a->x.shape[0], K = a->x.shape[1];
    const isa_fns *f = pick(mla_cpu_isa_of(ctx));
    const float *x = (const float *)a->x.data;
    int64_t ldx = a->x.stride[0];
    float *xf = NULL;
    if (K == 0) { /* empty sums */
        for (int64_t t = 0; t < T; ++t)
            for (int64_t n = 0; n < a->w.shape[0]; ++n)
                store_y(&a->y, t, n, 0.0f);
        return MLA_OK;
    }
    /* fp32 rows with unit stride, in BLAS form (lda >= K) */
    if (a->x.dtype != MLA_DTYPE_F32 || (a->x.stride[1] != 1 && K > 1) || a->x.stride[0] < K) {
        xf = malloc((size_t)(T * K) * sizeof(float));
        if (!xf)
            return mla_fail(ctx, MLA_ERR_OUT_OF_MEMORY, "x", "no memory for x in fp32");
        const int nt = mla_cpu_threads(ctx, T, T * K);
        (void)nt;
#if defined(MLA_HAVE_OPENMP)
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
#endif
        for (int64_t t = 0; t < T; t += 8)
            f->pack(&a->x, t, T - t < 8 ? T : t + 8, xf);
        x = xf, ldx = K;
    }
    mla_status st;
#if defined(MLA_HAVE_OPENBLAS)
    if (T >= SGEMM_MIN_T)
        st = sgemm_path(ctx, a, f, x, ldx);
    else
#endif
        st = own_path(ctx, a, f, x, ldx);
    free(xf);
    return st;
}
