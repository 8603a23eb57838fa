/* The attention benchmarks' shared part (bench_decode.c: `mla bench decode`,
 * dense and --sparse; bench_prefill.c: `mla bench prefill`): DeepSeek-V3's
 * MLA geometry (L 512, R 64, block 64, the preset's softmax scale), q bf16
 * [B n, H, 576], o bf16 [B n, H, 512] + lse, a paged cache of one of three
 * kinds, and input sets that each own their blocks, q, o, plan (and top-k
 * lists), so that small problems rotate through memory instead of a cache. */
#ifndef MLA_BENCH_ATTENTION_H
#define MLA_BENCH_ATTENTION_H

#include "bench/bench_mxfp4.h"

#ifdef __cplusplus
extern "C" {
#endif

#define BA_L 512
#define BA_R 64
#define BA_BLOCK 64
#define BA_MAX_INST 32

typedef enum ba_cache { BA_BF16 = 0, BA_FP8 = 1, BA_FP8_SCALED = 2, BA_CACHES } ba_cache;

extern const char *const ba_cache_names[BA_CACHES];

/* Bytes of one cached token: 1152 bf16, 576 fp8, 656 FP8_SCALED. */
int64_t ba_token_bytes(ba_cache c);

/* One problem: B sequences of context C, each with n query rows (decode 1,
 * prefill C: the causal rule among the new tokens), H heads; topk > 0:
 * sparse, each row attends to topk distinct positions drawn uniformly from
 * its context (all of them, in random order, when C <= topk, -1 past C). */
typedef struct ba_shape {
    int64_t B, C, n, H, topk;
    ba_cache cache;
} ba_shape;

/* Everything the input sets of one problem allocate. */
typedef struct ba_set {
    mla_context *ctx;
    mla_attention_desc desc;
    int n;
    void *cache_mem, *lens_mem, *ws_mem;
    void *bt_mem[BA_MAX_INST], *q_mem[BA_MAX_INST], *o_mem[BA_MAX_INST], *lse_mem[BA_MAX_INST],
        *ti_mem[BA_MAX_INST];
    mla_tensor cache, lens, ws, bt[BA_MAX_INST], q[BA_MAX_INST], o[BA_MAX_INST], lse[BA_MAX_INST],
        ti[BA_MAX_INST];
    mla_attention_args args[BA_MAX_INST];
    mla_attention_plan *plan[BA_MAX_INST];
} ba_set;

/* Input sets for a shape: n_inst of them when the cache of one is smaller
 * than rotate_bytes (at most BA_MAX_INST), else one. */
int ba_input_sets(const ba_shape *w, int64_t rotate_bytes);

/* n input sets of shape w and their plans (the automatic split-KV schedule);
 * the workspace fits the largest. s->ctx must be set. */
mla_status ba_setup(ba_set *s, bench_rng *rng, const ba_shape *w, int n);
void ba_free(ba_set *s); /* keeps s->ctx */
/* bench_mx_call: mla_attention_run of input set inst. */
mla_status ba_run(void *arg, int inst);

/* What a sweep measured for one row; bytes and flops are set before
 * ba_measure. */
typedef struct ba_result {
    int ok, skipped;
    char note[200];
    bench_mx_timing t;
    int n_inst, splits;
    int64_t bytes;
    double flops, roof_s, ratio, gbs, gflops;
    const char *bound;
} ba_result;

/* A way to set up and run a problem (the absorbed attention: ba_setup,
 * ba_run, ba_free). */
typedef struct ba_form {
    const char *name;
    mla_status (*setup)(ba_set *s, bench_rng *rng, const ba_shape *w, int n);
    bench_mx_call run;
    void (*free)(ba_set *s);
} ba_form;

extern const ba_form ba_absorbed;

/* The state of a sweep that runs its rows in ascending FLOPs. */
typedef struct ba_sweep {
    mla_context *ctx;
    const bench_mx_args *a;
    const bench_ceilings *c;
    bench_rng rng;
    double sec_per_flop, flops_seen; /* of the largest row measured so far */
    int errors;
    ba_set s;
} ba_sweep;

void ba_sweep_init(ba_sweep *sw, mla_context *ctx, const bench_mx_args *a, const bench_ceilings *c);

/* One row: the roofline from r->bytes and r->flops and the ceilings; skipped
 * when predicted slower than --max-call-s; else the input sets set up, the
 * run timed (bench_mx_time) and freed. A progress line starting with label
 * goes to stderr. */
void ba_measure(ba_sweep *sw, const ba_form *f, const ba_shape *w, const char *label, ba_result *r);

/* The result columns of a row's table line (after its shape columns; the
 * header is BA_RESULT_HEADER) with a newline, or "-", bytes, bound, roof and
 * the note for a row that did not run; and its JSON fields. */
#define BA_RESULT_HEADER                                                                           \
    "splits  bytes_MiB   bound    roof_us    median_us       min_us       cpu_us   GFLOP/s  "      \
    "reps    roof%"
void ba_print_result(FILE *out, const ba_result *r);
void ba_json_result(bench_json *j, const ba_result *r);

/* The attention benches' own options, taken out of argv by ba_strip_args
 * (the rest goes to bench_mx_parse). */
typedef struct ba_opts {
    int64_t heads[BENCH_MX_MAX_LIST];
    int n_heads;
    int quick, sparse;
    int64_t topk;
    unsigned caches; /* --caches: bit c for ba_cache c; 0 = the sweep's default */
} ba_opts;

/* Takes --heads LIST, --quick, --caches LIST and (when sparse_ok) --sparse
 * and --topk N out of argv. Returns -1 on a bad value. */
int ba_strip_args(int *argc, char **argv, int sparse_ok, ba_opts *o);

int bench_decode_cmd(int argc, char **argv);  /* bench_decode.c */
int bench_prefill_cmd(int argc, char **argv); /* bench_prefill.c */

#ifdef __cplusplus
}
#endif

#endif
