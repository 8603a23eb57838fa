/* Shared helpers of the benchmarks: the clock, medians, seeded random
 * fills of context memory, the machine's description, and a small JSON
 * writer. Speed is measured here, never in tests. */
#ifndef MLA_BENCH_UTIL_H
#define MLA_BENCH_UTIL_H

#include <stdint.h>
#include <stdio.h>

#include "mla/mla.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Returns the status of expr from the calling function when it is not MLA_OK. */
#define MLA_BENCH_TRY(expr)                                                                       \
    do {                                                                                          \
        mla_status bench_try_status_ = (expr);                                                    \
        if (bench_try_status_ != MLA_OK)                                                          \
            return bench_try_status_;                                                             \
    } while (0)

/* What the bench commands return: the mla tool's exit codes (apps/cmd.h
 * checks that they agree; bench/ does not include apps/). */
enum { BENCH_EXIT_OK = 0, BENCH_EXIT_FAIL = 1, BENCH_EXIT_USAGE = 2 };

/* A decimal integer in [lo, hi], the whole of s: 0 and *out, else -1. */
int bench_parse_int(const char *s, int64_t lo, int64_t hi, int64_t *out);
/* A backend by its mla_backend_name: 0 and *out, else -1. */
int bench_parse_backend(const char *s, mla_backend *out);

/* CLOCK_MONOTONIC in seconds. */
double bench_now(void);
/* CPU time of the whole process (all threads), seconds. */
double bench_cpu_seconds(void);

/* Median of n values (sorts v in place); 0 for n == 0. */
double bench_median(double *v, int n);
double bench_min(const double *v, int n);
double bench_max(const double *v, int n);

/* xoshiro256** seeded by splitmix64: the same seed, the same bytes. */
typedef struct bench_rng {
    uint64_t s[4];
} bench_rng;

void bench_rng_seed(bench_rng *r, uint64_t seed);
uint64_t bench_rng_next(bench_rng *r);
/* Uniform in [0, n). */
uint64_t bench_rng_below(bench_rng *r, uint64_t n);

/* What a random fill draws. Never zeros: zeros hide unwritten outputs and
 * can run faster than real data. */
typedef enum bench_fill {
    BENCH_FILL_ACT = 0,    /* activations: |x| in [2^-3, 2), random sign */
    BENCH_FILL_WEIGHT = 1, /* weights: |w| in [2^-8, 2^-4), random sign */
    BENCH_FILL_NORM_W = 2, /* RMSNorm weights: [0.5, 1.5) */
    BENCH_FILL_SCALE = 3,  /* fp8 block scales: [2^-10, 2^-6), positive */
    BENCH_FILL_BYTES = 4,  /* any bytes (outputs, caches): poison */
} bench_fill;

/* Fills n elements of dtype at host memory p. Float-like dtypes (F32, BF16,
 * F16, FP8) draw from the kind's range; fp8 codes avoid NaN. Other dtypes
 * (U8, I32, I64) get random bytes. */
void bench_fill_host(bench_rng *r, void *p, mla_dtype dtype, int64_t n, bench_fill kind);

/* The host CPU's model name (/proc/cpuinfo), its logical CPU count, its
 * last-level cache in bytes (sysfs; 32 MiB when unknown). */
const char *bench_cpu_model(void);
int bench_cpu_count(void);
int64_t bench_llc_bytes(void);
/* The 1-minute load average (/proc/loadavg); -1 when unknown. */
double bench_loadavg(void);

/* Prints the last error of a context as " (param): detail". */
void bench_print_error(FILE *out, const mla_context *ctx);

/* ---- a minimal JSON writer: enough for flat objects and arrays ---- */
typedef struct bench_json {
    FILE *f;
    int depth;
    int first[16]; /* 1 while the object/array at that depth is empty */
} bench_json;

void bench_json_begin(bench_json *j, FILE *f); /* opens the top-level object */
void bench_json_end(bench_json *j);            /* closes it, adds a newline */
void bench_json_object(bench_json *j, const char *key); /* key NULL inside an array */
void bench_json_array(bench_json *j, const char *key);
void bench_json_close(bench_json *j, char bracket); /* '}' or ']' */
void bench_json_str(bench_json *j, const char *key, const char *value);
void bench_json_num(bench_json *j, const char *key, double value); /* non-finite: null */
void bench_json_int(bench_json *j, const char *key, int64_t value);

#ifdef __cplusplus
}
#endif

#endif
