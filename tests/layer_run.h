/* Test support: runs a layer through a prefill step and decode steps on one
 * backend (tests/test_layer.c, tests/test_layer_rope_once.c), optionally
 * with the float64 reference alongside. */
#ifndef MLA_TESTS_LAYER_RUN_H
#define MLA_TESTS_LAYER_RUN_H

#include "tests/layer_model.h"

#define LR_MAX_SEQS 4
#define LR_MAX_STEPS 4

typedef struct lr_case {
    int site;              /* -1: the plan's choice, else an mla_rope_site */
    int dense;             /* force dense attention on an indexer config */
    mla_dtype cache_dtype; /* BF16 or FP8_E4M3FN (NORMAL layout) */
    mla_dtype y_dtype;     /* F32 or BF16 */
    int S;                 /* sequences */
    int prefill[LR_MAX_SEQS];
    int decode_steps; /* next_n = 1 steps after the prefill (<= LR_MAX_STEPS - 1)
                       */
    int rotate_twice; /* negative control: the attention rotates too */
    mla_dtype act;    /* activations x and the intermediates: BF16 or F32 */
} lr_case;

typedef struct lr_result {
    int steps;
    int64_t T[LR_MAX_STEPS];
    double *y[LR_MAX_STEPS];                      /* the library's y, [T, hidden] */
    double *ref[LR_MAX_STEPS], *sd[LR_MAX_STEPS]; /* the reference and its error scale */
    uint8_t *cache;                               /* the latent cache bytes after the last step */
    size_t cache_bytes;
    uint16_t *kv_prefill; /* the prefill's unrotated [T, L + R] (k_nope normed), bf16 */
    int64_t *slot_prefill, *pos_prefill;
    int64_t block_size;
    double max_ratio; /* max |y - ref| / (lambda sd) over every step; > 1 fails */
    double max_err, max_abs_y;
    int topk_bad; /* sparse: rows whose top-k is not a valid causal selection */
    int expanded_steps; /* steps whose plan chose the expanded form */
} lr_result;

/* Returns MLA_OK, or the first failing call's status (printed). */
mla_status lr_run(mla_context *ctx, const layer_model *m, const lr_case *c, int with_ref,
                  lr_result *r);
/* lr_run with the attention in the given form (lr_run: AUTO, the plan's rule). */
mla_status lr_run_form(mla_context *ctx, const layer_model *m, const lr_case *c,
                       mla_layer_form form, int with_ref, lr_result *r);
void lr_free(lr_result *r);

#endif
