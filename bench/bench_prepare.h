/* `mla bench prepare`: every op of the MLA prepare path (MLA.md section 2,
 * steps 1-6) on a model's shapes, for a list of token counts, timed on one
 * context and reported as a ratio to the ceilings measured in the same run
 * (bench/ceilings.h). docs/PERFORMANCE.md explains the columns. */
#ifndef MLA_BENCH_PREPARE_H
#define MLA_BENCH_PREPARE_H

#include <stdint.h>
#include <stdio.h>

#include "bench/ceilings.h"
#include "mla/mla.h"

#ifdef __cplusplus
extern "C" {
#endif

#define BENCH_MAX_TOKENS 16

typedef struct bench_prepare_options {
    const char *config;      /* model preset, "DeepSeek-V3" */
    int64_t tokens[BENCH_MAX_TOKENS];
    int n_tokens;
    int reps;                /* timed samples per row (median); fewer when a row is slow */
    int warmup;              /* untimed calls before the samples (at least 1) */
    double max_call_s;       /* rows predicted slower than this per call are skipped */
    double row_budget_s;     /* timed samples of one row stop after about this long */
    double time_budget_s;    /* the whole sweep aims to stay under this (rows get fewer reps) */
    int64_t rotate_bytes;    /* input sets rotate until this many bytes are touched; 0 = default */
    const char *ops;         /* comma-separated op names to run, NULL = all */
    int threads;             /* the context's CPU threads, 0 = the OpenMP default (for cpu%) */
    uint64_t seed;
} bench_prepare_options;

void bench_prepare_options_default(bench_prepare_options *o, int device);

typedef enum bench_row_status {
    BENCH_ROW_OK = 0,
    BENCH_ROW_UNSUPPORTED = 1,
    BENCH_ROW_SKIPPED = 2,
    BENCH_ROW_ERROR = 3,
} bench_row_status;

typedef struct bench_row {
    const char *op;      /* short name (--ops), e.g. "q_a_proj" */
    const char *api;     /* the entry point timed, e.g. "mla_linear" */
    const char *variant; /* "bf16", "fp8 block-scaled", ... */
    char shape[48];      /* the weight or tensor shape that names the row */
    int64_t T;
    int is_gemm;         /* 1: judged against the matmul ceiling at T >= 128 */
    int is_whole;        /* 1: the whole mla_prepare (judged against the roofline) */
    bench_row_status status;
    char note[256];

    double median_s, min_s, max_s;
    int reps, batch, instances;
    int threads;          /* host: the context's threads; 0 on a device */
    double cpu_util;      /* host: process CPU time / (wall time x threads) over the
                           * samples; well under 1 means other processes took the
                           * cores (the times are then not the library's); < 0 on a device */
    int64_t bytes;        /* each input read once + each output written once */
    int64_t weight_bytes; /* the weight part of bytes */
    double flops;

    double gbs, gflops;   /* achieved, over the median */
    const char *basis;    /* which ceiling the ratio uses */
    double ratio;         /* achieved / ceiling (roofline: floor time / time) */
} bench_row;

typedef struct bench_prepare_result {
    bench_row *rows;
    int n_rows;
    int n_errors;
    double seconds; /* wall time of the sweep */
} bench_prepare_result;

/* Runs the sweep on ctx. Returns 0, or -1 when the sweep could not start
 * (unknown config, no memory for the RoPE tables). Rows that fail carry
 * their status; n_errors counts BENCH_ROW_ERROR rows. Progress to log. */
int bench_prepare_run(mla_context *ctx, const bench_prepare_options *o,
                      bench_prepare_result *res, FILE *log);

/* Fills bytes/s, FLOP/s, basis and ratio of every row from the ceilings. */
void bench_prepare_judge(bench_prepare_result *res, const bench_ceilings *c);

void bench_prepare_print(FILE *out, const bench_prepare_result *res);
void bench_prepare_json_rows(bench_json *j, const bench_prepare_result *res);
void bench_prepare_free(bench_prepare_result *res);

/* Comma list of the op names --ops takes. */
const char *bench_prepare_op_names(void);

#ifdef __cplusplus
}
#endif

#endif
