/* `mla bench mxfp4` (bench_mxfp4.c): the MXFP4 GEMM path on DeepSeek-V3's
 * W_kc / W_vc shapes next to the bf16 batched GEMM, and the fused flatten +
 * quant feeding o_proj. `mla bench indexer` (bench_indexer.c): the DSA
 * indexer's paged MQA logits and top-k against their roofline. Both measure
 * the ceilings (bench/ceilings.h) in the same run. The small shared part
 * (options, context, timing, uploads) is declared here. */
#ifndef MLA_BENCH_MXFP4_H
#define MLA_BENCH_MXFP4_H

#include <stdint.h>
#include <stdio.h>

#include "bench/ceilings.h"
#include "mla/mla.h"

#ifdef __cplusplus
extern "C" {
#endif

#define BENCH_MX_MAX_LIST 16

typedef struct bench_mx_args {
    const char *sub;
    mla_backend backend;
    int threads;
    const char *json;
    int no_ceilings;
    bench_ceiling_options c;
    int reps, warmup;     /* 0 = default (host 5 / 2, device 20 / 5) */
    double max_call_s;    /* 0 = default: cases predicted slower are skipped */
    double row_budget_s;  /* 0 = default: time spent on one row's samples */
    int64_t rotate_bytes; /* input sets rotate over this many bytes; 0 = default */
    uint64_t seed;
    int64_t list[2][BENCH_MX_MAX_LIST]; /* mxfp4: tokens; indexer: contexts, batch */
    int n_list[2];
    int device; /* set by bench_mx_open */
} bench_mx_args;

/* Parses argv[2..] (the options common to the benchmarks plus the two list
 * options named list0 / list1, list1 may be NULL). Returns an MLA_EXIT_ code. */
int bench_mx_parse(int argc, char **argv, const char *sub, const char *list0, const char *list1,
                   bench_mx_args *a);

/* Creates the context, fills the defaults that depend on it, prints the
 * header and measures the ceilings into c. NULL on failure (reported). */
mla_context *bench_mx_open(bench_mx_args *a, bench_ceilings *c);

/* One call of the op on input set `inst`. */
typedef mla_status (*bench_mx_call)(void *arg, int inst);

typedef struct bench_mx_timing {
    double median_s, min_s, max_s;
    double cpu_s; /* median over the samples of the process's CPU time per call (all threads) */
    int reps, batch;
} bench_mx_timing;

/* Warm-up, then reps samples (each `batch` calls between two
 * synchronizations) rotating over n_inst input sets; fewer samples when one
 * call is slow so that the samples take about budget_s. */
mla_status bench_mx_time(mla_context *ctx, const bench_mx_args *a, bench_mx_call fn, void *arg,
                         int n_inst, double budget_s, bench_mx_timing *t);

/* Context memory of a contiguous tensor, filled with seeded random data of
 * the kind (never zeros). *mem receives the allocation (mla_free it). */
mla_status bench_mx_upload(mla_context *ctx, bench_rng *rng, mla_dtype dt, int32_t ndim,
                           const int64_t *shape, bench_fill kind, void **mem, mla_tensor *t);

/* "unsupported (param)" or "error: STATUS (param): detail" for a failed call. */
void bench_mx_note(mla_context *ctx, mla_status st, char *buf, size_t len);

/* Writes the run's JSON to a->json (nothing when NULL): the header fields,
 * the ceilings, then rows_json's "rows" array. */
int bench_mx_write_json(const bench_mx_args *a, mla_context *ctx, const bench_ceilings *c,
                        void (*rows_json)(bench_json *, const void *, int), const void *rows, int n,
                        double seconds);

/* The end of a sweep: the ceilings, the table (print), "sweep: <seconds> s; <note>", and the
 * JSON. MLA_EXIT_FAIL when the JSON could not be written or errors > 0. */
int bench_mx_finish(const bench_mx_args *a, mla_context *ctx, const bench_ceilings *c,
                    void (*print)(FILE *, const void *, int),
                    void (*rows_json)(bench_json *, const void *, int), const void *rows, int n,
                    double start, const char *note, int errors);

int bench_mxfp4_cmd(int argc, char **argv);
int bench_indexer_cmd(int argc, char **argv);

#ifdef __cplusplus
}
#endif

#endif
