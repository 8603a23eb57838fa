/* mla demo internals: the run's state and its setup (apps/demo_setup.c),
 * the float64 check of one step (apps/demo_check.c); the command and the
 * steps are apps/cmd_demo.c. */
#ifndef MLA_APPS_DEMO_H
#define MLA_APPS_DEMO_H

#include <stddef.h>

#include "apps/cmd.h"
#include "bench/bench_util.h"
#include "conformance/layer_ref64.h"
#include "mla/mla.h"

#define BS 16

typedef struct demo_args {
    const char *config, *weights, *model;
    mla_backend backend;
    int64_t prefill, steps, batch, context;
    int64_t seed, layer;
    int32_t tp_rank, tp_world;
    int fp8, no_ceilings, json, set[4]; /* set: prefill, steps, batch, context given */
} demo_args;

typedef struct demo_result {
    double prefill_s, decode_median_s, bytes, flops;
    int checked;
    double max_abs, max_rel, worst;
} demo_result;

typedef struct demo {
    demo_args a;
    demo_result res;
    mla_context *ctx;
    mla_model_config cfg;
    char path[512]; /* the weights: a file, or a (generated) checkpoint directory */
    int generated;
    mla_layer_weights_ex w;
    mla_plan *plan;
    mla_cache_desc cd;
    mla_layer_options opt;
    int64_t bps, NB, max_ctx;
    int32_t *bt;
    float *hcos, *hsin;
    mla_tensor bt_t, cos, sin, cache, icache, ws;
    bench_rng rng;
    int sparse;
} demo;

/* Prints what failed (with the context's error) and returns MLA_EXIT_FAIL. */
int demo_fail(demo *d, mla_status st, const char *what);
#define DTRY(expr, what)                                                                           \
    do {                                                                                           \
        mla_status s_ = (expr);                                                                    \
        if (s_ != MLA_OK)                                                                          \
            return demo_fail(d, s_, what);                                                         \
    } while (0)

int demo_setup_weights(demo *d); /* generated to a temporary file, or --weights; loaded */
int demo_setup_cache(demo *d);   /* caches, RoPE table, plan, workspace */
int demo_history(demo *d);       /* --context random rows per sequence, straight to the caches */
void demo_cleanup(demo *d);
/* A tensor in context memory from host data (or zeroed); *st keeps the first failure. */
mla_tensor demo_dev_tensor(demo *d, mla_dtype dt, int32_t ndim, const int64_t *shape,
                           const void *host, mla_status *st);
void demo_free_tensor(demo *d, mla_tensor *t);
/* Random bf16 rows [n, cols] in context memory, |x| in [2^-3, 2). */
mla_tensor demo_random_rows(demo *d, int64_t n, int64_t cols, mla_status *st);

/* Prints a progress or result line to stdout, except with --json. */
void demo_say(const demo *d, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* The loaded layer's weights on the host in float64 and the reference
 * model over them (bf16 intermediates, f32 y, bf16 cache). */
typedef struct demo_ref {
    ref64_model m;
    double *wq_a, *wq_b, *wkv_a, *wkv_b, *wo, *ln_q, *ln_kv, *w_kc;
} demo_ref;

/* The values of a vector (norm weight) or a projection [out, in] in context
 * memory as the layer uses them (fp8: code * block scale, or tensor_scale
 * for a [1, 1] scale; MXFP4: code * 2^e, *mx set); NULL when its form is
 * not one the check dequantizes. */
double *demo_weight_values(mla_context *ctx, const mla_tensor *w, const mla_tensor *scale,
                           float tensor_scale, int *mx);
/* 0 on success; else -1 with a sentence in err. */
int demo_ref_from_weights(mla_context *ctx, const mla_layer_weights_ex *w, const float *cos,
                          const float *sin, demo_ref *r, char *err, size_t errlen);
void demo_ref_free(demo_ref *r);

#endif
