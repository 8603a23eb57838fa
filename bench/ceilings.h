/* The two ceilings every benchmark figure is divided by, measured in the
 * same run as the figures (docs/PERFORMANCE.md):
 *
 *  copy bandwidth  bytes read + bytes written per second, in the context's
 *                  own memory. Host: OpenMP memcpy, each thread its slice,
 *                  over a buffer several times the last-level cache. Device:
 *                  mla_memcpy CONTEXT_TO_CONTEXT of a 1 GiB buffer.
 *  matmul rate     Host: cblas_sgemm (OpenBLAS, f32) at M = 128..1024,
 *                  N = 7168, K = 1536, x @ W^T as mla_linear computes it; the
 *                  best rate; none without OpenBLAS. Device: the vendor BLAS
 *                  (cuBLAS on NVIDIA, rocBLAS on ROCm, loaded at run time) on
 *                  a large square bf16 GEMM with fp32 accumulation, timed by
 *                  device events (bench/ceilings_device.c); where it cannot
 *                  be loaded or run, the device's theoretical peak from its
 *                  attributes, labelled THEORETICAL. A side measurement passed
 *                  on the command line replaces either. The library's own
 *                  kernels are never a ceiling. */
#ifndef MLA_BENCH_CEILINGS_H
#define MLA_BENCH_CEILINGS_H

#include <stdint.h>
#include <stdio.h>

#include "bench/bench_util.h"
#include "mla/mla.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum bench_mm_source {
    BENCH_MM_NONE = 0,    /* not measured */
    BENCH_MM_BLAS = 1,    /* cblas_sgemm: a real ceiling for f32 on this host */
    BENCH_MM_GIVEN = 2,   /* side measurement passed on the command line */
    BENCH_MM_VENDOR = 3,  /* the device vendor's BLAS, bf16, measured in this run */
    BENCH_MM_PEAK = 4,    /* the device's theoretical peak from its attributes */
} bench_mm_source;

typedef struct bench_gemm_point {
    int64_t M, N, K;
    double seconds; /* median */
    double gflops;  /* 0: skipped or failed */
    const char *note;
} bench_gemm_point;

#define BENCH_MAX_GEMM_POINTS 8

typedef struct bench_ceilings {
    double copy_gbs;     /* (read + written bytes) / s / 1e9; 0 when not measured */
    double copy_seconds; /* median of one copy */
    int64_t copy_bytes;  /* size of the source (and of the destination) */
    int copy_threads;    /* host: OpenMP threads; device: 0 */
    int copy_reps;
    char copy_how[256];

    double matmul_gflops; /* 0 when not measured */
    bench_mm_source matmul_source;
    char matmul_how[256];
    bench_gemm_point mm[BENCH_MAX_GEMM_POINTS];
    int n_mm;

    double peak_gflops; /* device: theoretical dense bf16 peak (0: unknown); host: 0 */
    char peak_how[256];
} bench_ceilings;

typedef struct bench_ceiling_options {
    int threads;           /* host copy and BLAS threads; 0 = the default */
    int64_t copy_bytes;    /* 0 = default (host: max(8 x LLC, 256 MiB); device: 1 GiB) */
    int reps;              /* samples per measurement; 0 = default (7) */
    double max_call_s;     /* vendor GEMM sizes predicted slower than this are skipped */
    double given_gflops;   /* > 0: a side measurement of the matmul ceiling */
    const char *given_how; /* its label */
    int skip_matmul;       /* 1: copy only */
} bench_ceiling_options;

void bench_ceiling_options_default(bench_ceiling_options *o);

/* Measures both ceilings on ctx's memory and units. Unmeasurable parts are
 * left 0 with the reason in *_how; returns 0, or -1 when nothing could be
 * allocated at all. Progress lines go to log (may be NULL). */
int bench_measure_ceilings(mla_context *ctx, const bench_ceiling_options *o, bench_ceilings *c,
                           FILE *log);

void bench_print_ceilings(FILE *out, const bench_ceilings *c);
/* Writes "ceilings": {...} into an open JSON object. */
void bench_json_ceilings(bench_json *j, const bench_ceilings *c);

/* n values of dtype dt into context memory at dst, seeded random values of
 * the kind: a host pattern of up to 64 MiB, copied over and over. */
mla_status bench_fill_context(mla_context *ctx, void *dst, mla_dtype dt, int64_t n,
                              bench_fill kind, uint64_t seed);

/* bench/ceilings_device.c: the vendor BLAS GEMM into c (matmul_*, mm[]),
 * 0 when measured, else -1 with the reason in matmul_how; the theoretical
 * peak into c->peak_*, 0 when known. */
int bench_vendor_gemm(mla_context *ctx, const bench_ceiling_options *o, bench_ceilings *c,
                      FILE *log);
int bench_device_peak(mla_context *ctx, bench_ceilings *c);

#ifdef __cplusplus
}
#endif

#endif
