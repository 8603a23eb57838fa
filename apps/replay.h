/* mla op --replay's verdict (docs/REPLAY.md): apps/replay_compare.c holds
 * the rerun's outputs against the dump's, with the bounds of
 * apps/replay_bounds.c (the ops the conformance suites bound),
 * apps/replay_layer.c (prepare, the indexer's prepare and the layer,
 * against the float64 layer reference) and apps/replay_cache.c (the caches:
 * the slots a call writes, and the bytes it must leave alone). */
#ifndef MLA_APPS_REPLAY_H
#define MLA_APPS_REPLAY_H

#include "conformance/conf.h"
#include "conformance/npy.h"

enum { REPLAY_MAX_OUT = 8 };

/* One output: as dumped (DIR/out.NAME.npy), as rerun (TMP/got.NAME.npy)
 * and, for the ops judged against the reference backend, its rerun there
 * (TMP/ref.NAME.npy, or the rerun itself when that ran on the reference). */
typedef struct replay_out {
    char name[48];
    mla_dtype dt;
    mla_npy dumped, got, ref;
    int has_ref, judged;
} replay_out;

typedef struct replay {
    const char *dir, *op;
    int same_backend; /* the rerun ran on the backend the dump was made on */
    int on_reference; /* the rerun ran on the reference backend: its outputs are the oracle's */
    char **args;      /* the rerun's words: inputs in the dump folder, outputs in TMP */
    int n;
    const char *sel_rerun; /* the rerun's own layer selection file (sparse layers), or NULL */
    replay_out out[REPLAY_MAX_OUT];
    int nout;
} replay;

/* Verdict on every output; returns the exit code. */
int replay_compare(replay *r);
/* 1 when op's outputs are judged against its rerun on the reference
 * backend (the ops the conformance suites compare with the reference). */
int replay_wants_reference(const char *op);

/* Shared by the judges. The value of `--opt NAME=...` in the rerun's
 * words (NULL when absent); a --param as a number, as a dtype. */
const char *replay_word(const replay *r, const char *opt, const char *name);
double replay_param(const replay *r, const char *key, double def);
mla_dtype replay_dtype_param(const replay *r, const char *key, mla_dtype def);
/* The dtype of array `name` (an input or output): --dtype's, else its file's. */
mla_dtype replay_dtype(const replay *r, const char *name, mla_npy_type file);
/* Loads a .npy file; -1 (printed) on failure. */
int replay_load(const char *path, mla_npy *a);
/* Input `name` added to p as a contiguous argument of its file's dtype (or
 * --dtype's, or implied when not MLA_DTYPE_COUNT); an absent input as an
 * empty one. Output `name` (its dumped shape and dtype, no data) likewise;
 * *out (may be NULL) receives its replay_out. Return the argument's index,
 * -1 on failure (printed). */
int replay_add_input(const replay *r, conf_problem *p, const char *name, mla_dtype implied);
int replay_add_output(replay *r, conf_problem *p, const char *name, replay_out **out);
/* Output argument i of p (its bound set) against the reference rerun: the
 * dumped values, then the rerun's, each must be within the bound
 * (conf_compare). Prints one line; returns the exit code. */
int replay_judge(replay *r, const conf_problem *p, int i);
/* Prints a line for output o and marks it judged; returns rc. */
int replay_say(replay_out *o, int rc, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
replay_out *replay_find(replay *r, const char *name);

/* apps/replay_bounds.c: the judges of the ops with a conformance bound;
 * -1 when op is not one of them. */
int replay_bounds(replay *r);
/* apps/replay_layer.c: prepare, indexer_prepare, layer; -1 otherwise. */
int replay_layer(replay *r);
/* apps/replay_cache.c: output o, a latent (or indexer K) cache the call
 * writes at the slots of input slots_name over input in_name: every byte
 * outside the written slots must be the input cache's, on both sides; the
 * written slots are compared element by element, bit for bit without an
 * oracle, else each side within the oracle's bound. */
typedef struct replay_cache_geom {
    int indexer;                /* 0: latent cache (conf_attn_geom g), 1: indexer K cache */
    conf_attn_geom g;           /* layout, dtype, block_size, L, R, k_scale */
    mla_indexer_cache_desc idx; /* the indexer cache (layout resolved) */
} replay_cache_geom;
/* The oracle of written slot `slot`'s element d: 1 with its value and
 * bound (beyond the element's own half quantization step), 0 to compare
 * the element bit for bit, 2 to skip it (a scale, judged through the
 * values it scales). */
typedef int (*replay_slot_oracle)(void *ctx, int64_t slot, int64_t d, double *value, double *tol);
int replay_cache(replay *r, replay_out *o, const char *in_name, const char *slots_name,
                 const replay_cache_geom *cg, replay_slot_oracle oracle, void *octx);
/* The latent cache of the replay's layout, dtype, block_size and k_scale
 * parameters, L + R wide; the indexer K cache of its dtype, block_size,
 * layout, head_dim and ue8m0 (layer: idx_dtype, idx_layout, idx_ue8m0,
 * the latent cache's block size), the layout resolved. */
replay_cache_geom replay_latent_geom(const replay *r, int64_t L, int64_t R);
replay_cache_geom replay_index_geom(const replay *r, int layer);
/* The caches of the bit-defined writers (cache_write, rope_cache,
 * indexer_k_cache_write) by replay_cache's bit rule; -1 for other ops. */
int replay_bit_caches(replay *r);

#endif
