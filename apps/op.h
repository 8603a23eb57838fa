/* `mla op`: ops are registered as small descriptors (op_table.c); the
 * runner (cmd_op.c) parses --in/--out/--param, loads .npy files into the
 * context's memory, and writes the outputs back. A new op adds one
 * descriptor and one run function. */
#ifndef MLA_APPS_OP_H
#define MLA_APPS_OP_H

#include "mla/mla.h"

#define OP_MAX_ARGS 16   /* attention: q, cache, block table, lengths, top-k, sinks, RoPE's */
#define OP_MAX_PARAMS 32 /* the layer's 28 */

typedef struct op_param_desc {
    const char *key;
    const char *def; /* default value; NULL = no default (required when the op needs it) */
    const char *help;
} op_param_desc;

typedef struct op_run op_run;

typedef struct op_desc {
    const char *name;
    const char *summary;
    const char *inputs[OP_MAX_ARGS + 1]; /* NULL-terminated */
    const char *outputs[OP_MAX_ARGS + 1];
    op_param_desc params[OP_MAX_PARAMS + 1]; /* key NULL ends */
    int (*run)(op_run *r);                   /* returns an exit code */
} op_desc;

extern const op_desc mla_op_table[]; /* number-format ops (op_table.c) */
extern const int mla_op_table_size;
extern const op_desc mla_op_table_prepare[]; /* prepare-path ops (op_table_prepare.c) */
extern const int mla_op_table_prepare_size;
extern const op_desc mla_op_table_mxfp4[]; /* MXFP4 GEMM path (op_table_mxfp4.c) */
extern const int mla_op_table_mxfp4_size;
extern const op_desc mla_op_table_indexer[]; /* DSA indexer (op_table_indexer.c) */
extern const int mla_op_table_indexer_size;
extern const op_desc mla_op_table_attention[]; /* fused RoPE + cache, attention */
extern const int mla_op_table_attention_size;
extern const op_desc mla_op_table_layer[]; /* prepare, indexer prepare, the layer */
extern const int mla_op_table_layer_size;

/* The op named name (NULL when none), and the number of ops. */
const op_desc *op_find(const char *name);
int op_count(void);
const op_desc *op_at(int i);
/* mla op --replay DIR (apps/op_replay.c). */
int op_replay(int argc, char **argv);
/* Runs one `mla op NAME ...` command line (argv[0] = "op"); the outputs' files
 * are written. */
int op_main(int argc, char **argv);

mla_context *op_ctx(op_run *r);
/* The parameter's value, else its default, else NULL. */
const char *op_param(op_run *r, const char *key);
/* 1 when the op has the parameter (given or not). */
int op_param_known(op_run *r, const char *key);
/* A dtype named by a parameter, one of the mask's (1u << dtype) bits. */
int op_param_dtype(op_run *r, const char *key, unsigned allowed, mla_dtype *out);
int op_param_choice(op_run *r, const char *key, const char *const *names, int n, int *out);
int op_param_i64(op_run *r, const char *key, int64_t *out);
/* A finite real number (eps, scales). */
int op_param_f64(op_run *r, const char *key, double *out);
/* 1 when --in name=FILE was given (optional inputs). */
int op_has_input(op_run *r, const char *name);
/* 1 when --out name=FILE was given (optional outputs). */
int op_has_output(op_run *r, const char *name);
/* Context memory of the run, freed after it (tables, caches, workspaces). */
int op_scratch(op_run *r, size_t bytes, void **out);
/* A contiguous tensor in scratch memory, from host data (or zeroed). */
int op_tensor(op_run *r, mla_dtype dtype, int32_t ndim, const int64_t *shape, const void *host,
              mla_tensor *t);
/* n * m, or a usage error naming what when the product overflows int64. */
int op_mul(op_run *r, int64_t n, int64_t m, const char *what, int64_t *out);
/* The model config of --param config=PRESET (any case), or of a checkpoint
 * --param model=DIR when the op has that parameter. */
int op_model_config(op_run *r, mla_model_config *cfg);
/* The latent cache's descriptor from --param layout, dtype, block_size,
 * k_scale (num_blocks 0). */
int op_cache_desc(op_run *r, int64_t L, int64_t R, mla_cache_desc *d);
/* The cache: --in cache (its blocks into d), else the fewest blocks that
 * hold every slot of slots (NULL: --in cache is required); out, when not
 * NULL, is --out cache holding --in cache's bytes or zeros. */
int op_latent_cache(op_run *r, const mla_tensor *slots, mla_cache_desc *d, mla_tensor *in,
                    mla_tensor *out);
/* in's rows (U8 [rows, bytes], a cache) into out's, each view with its own
 * row stride; every row of out zeroed. */
int op_copy_rows(op_run *r, mla_tensor *out, const mla_tensor *in);
int op_zero_rows(op_run *r, mla_tensor *out);
/* cos and sin [P, R/2]: --in cos / sin, else built from the config's RoPE
 * (rope dim R, --param max_pos rows, default the config's). */
int op_rope_table(op_run *r, int64_t R, mla_tensor *cos, mla_tensor *sin);

/* Input `name` as a tensor in context memory. Its dtype: implied when the op
 * knows it (MLA_DTYPE_COUNT = from the file), else the dtype_key parameter
 * when given, else the file's (<f4 f32, <f2 f16, <u2 bf16, <f8 f64, <i4 i32,
 * <i8 i64; |u1 needs the parameter). transposed: a 2-D input is laid out
 * with strides (1, M) (the file is always logical row-major). */
int op_input(op_run *r, const char *name, mla_dtype implied, const char *dtype_key,
             int transposed, mla_tensor *t);
/* Output `name`: allocated in context memory, written to its file after run. */
int op_output(op_run *r, const char *name, mla_dtype dtype, int32_t ndim, const int64_t *shape,
              int transposed, mla_tensor *t);
/* Reports a failed library call (status, parameter, detail); returns the exit code. */
int op_check(op_run *r, mla_status st);
/* An output dtype parameter that defaults to def. */
int op_param_dtype_or(op_run *r, const char *key, unsigned allowed, mla_dtype def, mla_dtype *out);
/* The values of an I32 / I64 tensor in context memory, on the host (free() them). */
int op_host_indices(op_run *r, const mla_tensor *t, int64_t **out);
/* The fewest cache blocks of block_size tokens that hold every slot of
 * `slots` (a cache write given no cache to write into). */
int op_blocks_for_slots(op_run *r, const mla_tensor *slots, int64_t block_size,
                        int64_t *num_blocks);
/* Prints a usage error for this op; returns the usage exit code. */
int op_usage_error(op_run *r, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

#endif
