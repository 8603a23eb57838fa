/* Capture of a call for replay (docs/REPLAY.md): with MLA_DUMP / the
 * context's dump_ops naming an op, the op's entry point hands the call to
 * its mla_dump_<op> (core/dump_ops*.c), which writes the inputs, calls the
 * op, writes the outputs, and leaves a folder `mla op --replay` reruns.
 * When dumping is off the entry pays one test of ctx->dump (NULL), set at
 * context creation (or by mla_context_set_dump). */
#ifndef MLA_CORE_DUMP_H
#define MLA_CORE_DUMP_H

#include "core/backend.h"

/* The ops a dump can name: the mla_op values, then the composite calls. */
enum {
    MLA_DUMP_PREPARE = MLA_OP_COUNT,
    MLA_DUMP_INDEXER_PREPARE,
    MLA_DUMP_INDEXER_SEARCH,
    MLA_DUMP_LAYER,
    MLA_DUMP_OP_COUNT
};

typedef struct mla_dump_state mla_dump_state;
typedef struct mla_dump mla_dump;

/* Reads MLA_DUMP, MLA_DUMP_DIR, MLA_DUMP_MAX into ctx->dump (NULL when no
 * op is named); mla_context_set_dump replaces it. */
void mla_dump_init(mla_context *ctx);
void mla_dump_fini(mla_context *ctx);
/* 1 when this call of op should be dumped (named, under the count, not
 * inside another dumped call). */
int mla_dump_wants(mla_context *ctx, int op);

#define MLA_DUMP_HOOK(ctx, op, call)                                                               \
    do {                                                                                           \
        if ((ctx) && (ctx)->dump && mla_dump_wants((ctx), (op)))                                   \
            return call;                                                                           \
    } while (0)

/* A dump in progress: begin (NULL when its folder cannot be made: the call
 * then runs undumped), inputs and parameters as the call starts, outputs
 * registered to be written after it, end with the call's status (returned).
 * Every function takes NULL. */
mla_dump *mla_dump_begin(mla_context *ctx, int op);
void mla_dump_in(mla_dump *d, const char *name, const mla_tensor *t);
void mla_dump_out(mla_dump *d, const char *name, const mla_tensor *t);
void mla_dump_param(mla_dump *d, const char *key, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* The layer's weights as weights.safetensors (the loader's names without a
 * prefix) and cfg as config.json, with the parameters that load them. */
void mla_dump_weights(mla_dump *d, const mla_layer_weights *w, const mla_indexer_weights *idx,
                      const mla_model_config *cfg, mla_mxfp4_rule kc_rule);
/* cfg as config.json, read back by the line's --param model=. (composite
 * calls whose weights are inputs of their own). */
void mla_dump_config(mla_dump *d, const mla_model_config *cfg);
/* A record of the call besides its outputs, written after it as `file`
 * (listed in the manifest, not on the line): the layer's top-k selection. */
void mla_dump_side(mla_dump *d, const char *file, const mla_tensor *t);
/* A cache descriptor's parameters (layout, dtype, block_size, k_scale). */
void mla_dump_cache_desc(mla_dump *d, const mla_cache_desc *c);
mla_status mla_dump_end(mla_dump *d, mla_status status);

#endif
