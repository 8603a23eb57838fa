/* The copy-bandwidth and matmul ceilings (ceilings.h). */
#define _POSIX_C_SOURCE 200809L

#include "bench/ceilings.h"

#include <stdlib.h>
#include <string.h>

#if defined(MLA_HAVE_OPENMP)
#include <omp.h>
#endif
#if defined(MLA_HAVE_OPENBLAS)
#include <cblas.h>
#endif

#define MIB ((int64_t)1 << 20)
#define DEFAULT_REPS 7
#define DEVICE_COPY_BATCH 10 /* device copies per timed sample */

static const int64_t gemm_m[] = {128, 256, 512, 1024};
#define GEMM_N 7168
#define GEMM_K 1536
#define N_GEMM_M ((int)(sizeof gemm_m / sizeof gemm_m[0]))

void bench_ceiling_options_default(bench_ceiling_options *o)
{
    memset(o, 0, sizeof *o);
    o->max_call_s = 1.0;
}

static int host_threads(int asked)
{
    if (asked > 0)
        return asked;
#if defined(MLA_HAVE_OPENMP)
    return omp_get_max_threads();
#else
    return 1;
#endif
}

mla_status bench_fill_context(mla_context *ctx, void *dst, mla_dtype dt, int64_t n,
                              bench_fill kind, uint64_t seed)
{
    const int64_t es = (int64_t)mla_dtype_size(dt), per = 64 * MIB / es;
    const int64_t chunk = n < per ? n : per;
    uint8_t *h = malloc((size_t)(chunk > 0 ? chunk * es : 1));
    if (!h)
        return MLA_ERR_OUT_OF_MEMORY;
    bench_rng r;
    bench_rng_seed(&r, seed);
    bench_fill_host(&r, h, dt, chunk, kind);
    mla_status st = MLA_OK;
    for (int64_t at = 0; at < n && st == MLA_OK; at += chunk) {
        const int64_t k = n - at < chunk ? n - at : chunk;
        st = mla_memcpy(ctx, (uint8_t *)dst + at * es, h, (size_t)(k * es),
                        MLA_COPY_HOST_TO_CONTEXT);
    }
    free(h);
    return st;
}

/* ------------------------------------------------------------- copy */

/* One OpenMP memcpy of bytes, each thread a contiguous page-aligned slice. */
static void host_parallel_copy(uint8_t *dst, const uint8_t *src, int64_t bytes, int threads)
{
#if defined(MLA_HAVE_OPENMP)
#pragma omp parallel num_threads(threads)
    {
        const int64_t nt = omp_get_num_threads(), id = omp_get_thread_num();
        int64_t per = (bytes / nt + 4095) & ~(int64_t)4095;
        int64_t lo = id * per, hi = lo + per < bytes ? lo + per : bytes;
        if (lo < hi)
            memcpy(dst + lo, src + lo, (size_t)(hi - lo));
    }
#else
    (void)threads;
    memcpy(dst, src, (size_t)bytes);
#endif
}

/* First touch by the thread that will copy the slice (NUMA placement). */
static void host_parallel_fill(uint8_t *p, int64_t bytes, int threads, uint64_t seed)
{
#if defined(MLA_HAVE_OPENMP)
#pragma omp parallel num_threads(threads)
    {
        const int64_t nt = omp_get_num_threads(), id = omp_get_thread_num();
        int64_t per = (bytes / nt + 4095) & ~(int64_t)4095;
        int64_t lo = id * per, hi = lo + per < bytes ? lo + per : bytes;
        bench_rng r;
        bench_rng_seed(&r, seed + (uint64_t)id);
        if (lo < hi)
            bench_fill_host(&r, p + lo, MLA_DTYPE_U8, hi - lo, BENCH_FILL_BYTES);
    }
#else
    (void)threads;
    bench_rng r;
    bench_rng_seed(&r, seed);
    bench_fill_host(&r, p, MLA_DTYPE_U8, bytes, BENCH_FILL_BYTES);
#endif
}

static void measure_copy(mla_context *ctx, const bench_ceiling_options *o, bench_ceilings *c,
                         FILE *log)
{
    const int host = mla_context_memory(ctx) == MLA_MEMORY_HOST;
    const int reps = o->reps > 0 ? o->reps : DEFAULT_REPS;
    int64_t bytes = o->copy_bytes;
    if (bytes <= 0) {
        if (host) {
            bytes = 8 * bench_llc_bytes();
            bytes = bytes < 256 * MIB ? 256 * MIB : bytes;
            bytes = bytes > 1024 * MIB ? 1024 * MIB : bytes;
        } else {
            bytes = 1024 * MIB;
        }
    }
    c->copy_bytes = bytes;
    c->copy_reps = reps;
    void *src = NULL, *dst = NULL;
    mla_status st = mla_malloc(ctx, (size_t)bytes, &src);
    if (st == MLA_OK)
        st = mla_malloc(ctx, (size_t)bytes, &dst);
    if (st != MLA_OK) {
        snprintf(c->copy_how, sizeof c->copy_how, "not measured: mla_malloc of 2 x %lld MiB: %s",
                 (long long)(bytes / MIB), mla_status_name(st));
        goto out;
    }
    double *t = calloc((size_t)reps, sizeof *t);
    if (!t)
        goto out;
    if (host) {
        const int threads = host_threads(o->threads);
        c->copy_threads = threads;
        host_parallel_fill(src, bytes, threads, 0x5eed0001);
        host_parallel_fill(dst, bytes, threads, 0x5eed0002);
        host_parallel_copy(dst, src, bytes, threads); /* warm-up */
        for (int i = 0; i < reps; ++i) {
            double t0 = bench_now();
            host_parallel_copy(dst, src, bytes, threads);
            t[i] = bench_now() - t0;
        }
        snprintf(c->copy_how, sizeof c->copy_how,
                 "%s memcpy, %d thread%s, 2 x %lld MiB (%.0f x LLC), read + write counted",
#if defined(MLA_HAVE_OPENMP)
                 "OpenMP",
#else
                 "single-thread (no OpenMP)",
#endif
                 threads, threads == 1 ? "" : "s", (long long)(bytes / MIB),
                 (double)bytes / (double)bench_llc_bytes());
    } else {
        st = bench_fill_context(ctx, src, MLA_DTYPE_U8, bytes, BENCH_FILL_BYTES, 0x5eed0001u);
        if (st == MLA_OK)
            st = bench_fill_context(ctx, dst, MLA_DTYPE_U8, bytes, BENCH_FILL_BYTES,
                                    0x5eed0002u);
        for (int w = 0; w < 2 && st == MLA_OK; ++w) /* warm-up */
            st = mla_memcpy(ctx, dst, src, (size_t)bytes, MLA_COPY_CONTEXT_TO_CONTEXT);
        if (st == MLA_OK)
            st = mla_context_synchronize(ctx);
        for (int i = 0; i < reps && st == MLA_OK; ++i) {
            double t0 = bench_now();
            for (int k = 0; k < DEVICE_COPY_BATCH && st == MLA_OK; ++k)
                st = mla_memcpy(ctx, dst, src, (size_t)bytes, MLA_COPY_CONTEXT_TO_CONTEXT);
            if (st == MLA_OK)
                st = mla_context_synchronize(ctx);
            t[i] = (bench_now() - t0) / DEVICE_COPY_BATCH;
        }
        if (st != MLA_OK) {
            snprintf(c->copy_how, sizeof c->copy_how, "not measured: mla_memcpy: %s",
                     mla_status_name(st));
            free(t);
            goto out;
        }
        snprintf(c->copy_how, sizeof c->copy_how,
                 "mla_memcpy CONTEXT_TO_CONTEXT, 2 x %lld MiB, batches of %d, read + write counted",
                 (long long)(bytes / MIB), DEVICE_COPY_BATCH);
    }
    c->copy_seconds = bench_median(t, reps);
    c->copy_gbs = c->copy_seconds > 0 ? 2.0 * (double)bytes / c->copy_seconds / 1e9 : 0.0;
    free(t);
    if (log)
        fprintf(log, "ceiling copy   : %.1f GB/s (%s)\n", c->copy_gbs, c->copy_how);
out:
    if (src)
        mla_free(ctx, src);
    if (dst)
        mla_free(ctx, dst);
}

/* ----------------------------------------------------------- matmul */

#if defined(MLA_HAVE_OPENBLAS)
/* y [M, N] = x [M, K] @ W^T, W [N, K]: the shape mla_linear computes. */
static void measure_sgemm(const bench_ceiling_options *o, bench_ceilings *c, FILE *log)
{
    const int reps = o->reps > 0 ? (o->reps < 3 ? o->reps : 3) : 3;
    const int64_t Mmax = gemm_m[N_GEMM_M - 1], N = GEMM_N, K = GEMM_K;
    if (o->threads > 0)
        openblas_set_num_threads(o->threads);
    float *x = malloc((size_t)(Mmax * K) * sizeof *x), *w = malloc((size_t)(N * K) * sizeof *w),
          *y = malloc((size_t)(Mmax * N) * sizeof *y);
    if (!x || !w || !y) {
        snprintf(c->matmul_how, sizeof c->matmul_how, "not measured: out of host memory");
        goto out;
    }
    bench_rng r;
    bench_rng_seed(&r, 0x5eed0010);
    bench_fill_host(&r, x, MLA_DTYPE_F32, Mmax * K, BENCH_FILL_ACT);
    bench_fill_host(&r, w, MLA_DTYPE_F32, N * K, BENCH_FILL_WEIGHT);
    bench_fill_host(&r, y, MLA_DTYPE_F32, Mmax * N, BENCH_FILL_ACT);
    double best = 0.0;
    for (int i = 0; i < N_GEMM_M; ++i) {
        const int64_t M = gemm_m[i];
        double t[8];
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)M, (int)N, (int)K, 1.0f, x,
                    (int)K, w, (int)K, 0.0f, y, (int)N); /* warm-up */
        for (int k = 0; k < reps; ++k) {
            double t0 = bench_now();
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)M, (int)N, (int)K, 1.0f, x,
                        (int)K, w, (int)K, 0.0f, y, (int)N);
            t[k] = bench_now() - t0;
        }
        bench_gemm_point *p = &c->mm[c->n_mm++];
        p->M = M;
        p->N = N;
        p->K = K;
        p->seconds = bench_median(t, reps);
        p->gflops = 2.0 * (double)(M * N * K) / p->seconds / 1e9;
        p->note = "cblas_sgemm f32";
        best = p->gflops > best ? p->gflops : best;
        if (log)
            fprintf(log, "ceiling sgemm  : M=%lld N=%lld K=%lld  %.1f GFLOP/s\n", (long long)M,
                    (long long)N, (long long)K, p->gflops);
    }
    c->matmul_gflops = best;
    c->matmul_source = BENCH_MM_BLAS;
    snprintf(c->matmul_how, sizeof c->matmul_how,
             "cblas_sgemm (OpenBLAS %s, %d threads), f32, x @ W^T, best of M=128..1024, N=%d, "
             "K=%d",
             openblas_get_corename(), openblas_get_num_threads(), GEMM_N, GEMM_K);
out:
    free(x);
    free(w);
    free(y);
}
#endif

int bench_measure_ceilings(mla_context *ctx, const bench_ceiling_options *o, bench_ceilings *c,
                           FILE *log)
{
    memset(c, 0, sizeof *c);
    measure_copy(ctx, o, c, log);
    if (o->skip_matmul) {
        snprintf(c->matmul_how, sizeof c->matmul_how, "not measured (skipped)");
        return 0;
    }
    const int host = mla_context_memory(ctx) == MLA_MEMORY_HOST;
    if (!host)
        bench_device_peak(ctx, c);
    if (o->given_gflops > 0.0) {
        c->matmul_gflops = o->given_gflops;
        c->matmul_source = BENCH_MM_GIVEN;
        snprintf(c->matmul_how, sizeof c->matmul_how, "side measurement in the same job: %s",
                 o->given_how && *o->given_how ? o->given_how : "(unlabelled)");
    } else if (host) {
#if defined(MLA_HAVE_OPENBLAS)
        measure_sgemm(o, c, log);
#else
        snprintf(c->matmul_how, sizeof c->matmul_how,
                 "not measured: the build has no OpenBLAS (the host ceiling is cblas_sgemm)");
#endif
    } else if (bench_vendor_gemm(ctx, o, c, log) != 0 && c->peak_gflops > 0.0) {
        char why[256];
        snprintf(why, sizeof why, "%s", c->matmul_how);
        c->matmul_gflops = c->peak_gflops;
        c->matmul_source = BENCH_MM_PEAK;
        snprintf(c->matmul_how, sizeof c->matmul_how, "%.150s; %.100s", c->peak_how, why);
    }
    if (log)
        fprintf(log, "ceiling matmul : %.1f GFLOP/s (%s)\n", c->matmul_gflops, c->matmul_how);
    return 0;
}

void bench_print_ceilings(FILE *out, const bench_ceilings *c)
{
    fprintf(out, "ceilings (measured in this run)\n");
    if (c->copy_gbs > 0)
        fprintf(out, "  copy bandwidth : %8.1f GB/s    %s\n", c->copy_gbs, c->copy_how);
    else
        fprintf(out, "  copy bandwidth :      n/a        %s\n", c->copy_how);
    if (c->matmul_gflops > 0)
        fprintf(out, "  matmul rate    : %8.1f GFLOP/s %s\n", c->matmul_gflops, c->matmul_how);
    else
        fprintf(out, "  matmul rate    :      n/a        %s\n", c->matmul_how);
    if (c->peak_gflops > 0 && c->matmul_source != BENCH_MM_PEAK)
        fprintf(out, "  device peak    : %8.1f GFLOP/s %s\n", c->peak_gflops, c->peak_how);
    for (int i = 0; i < c->n_mm; ++i)
        fprintf(out, "    M=%-5lld N=%-5lld K=%-5lld %9.2f GFLOP/s  %10.3f ms  %s\n",
                (long long)c->mm[i].M, (long long)c->mm[i].N, (long long)c->mm[i].K,
                c->mm[i].gflops, 1e3 * c->mm[i].seconds, c->mm[i].note ? c->mm[i].note : "");
}

static const char *mm_source_name(bench_mm_source s)
{
    switch (s) {
    case BENCH_MM_BLAS: return "blas";
    case BENCH_MM_GIVEN: return "side_measurement";
    case BENCH_MM_VENDOR: return "vendor_blas";
    case BENCH_MM_PEAK: return "theoretical_peak";
    default: return "none";
    }
}

void bench_json_ceilings(bench_json *j, const bench_ceilings *c)
{
    bench_json_object(j, "ceilings");
    bench_json_num(j, "copy_gbs", c->copy_gbs);
    bench_json_num(j, "copy_seconds", c->copy_seconds);
    bench_json_int(j, "copy_bytes_each", c->copy_bytes);
    bench_json_int(j, "copy_threads", c->copy_threads);
    bench_json_int(j, "copy_reps", c->copy_reps);
    bench_json_str(j, "copy_how", c->copy_how);
    bench_json_num(j, "matmul_gflops", c->matmul_gflops);
    bench_json_str(j, "matmul_source", mm_source_name(c->matmul_source));
    bench_json_str(j, "matmul_how", c->matmul_how);
    bench_json_num(j, "peak_gflops", c->peak_gflops);
    bench_json_str(j, "peak_how", c->peak_how);
    bench_json_array(j, "matmul_points");
    for (int i = 0; i < c->n_mm; ++i) {
        bench_json_object(j, NULL);
        bench_json_int(j, "M", c->mm[i].M);
        bench_json_int(j, "N", c->mm[i].N);
        bench_json_int(j, "K", c->mm[i].K);
        bench_json_num(j, "seconds", c->mm[i].seconds);
        bench_json_num(j, "gflops", c->mm[i].gflops);
        bench_json_str(j, "note", c->mm[i].note ? c->mm[i].note : "");
        bench_json_close(j, '}');
    }
    bench_json_close(j, ']');
    bench_json_close(j, '}');
}
