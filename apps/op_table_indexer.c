/* The DSA indexer's ops for `mla op` (include/mla/mla_indexer.h): one
 * descriptor and one short run function each. The K cache travels as its raw
 * bytes, U8 [num_blocks, block_bytes] (|u1 files); fp8 tensors as their
 * codes. */
#include <stdlib.h>
#include <string.h>

#include "apps/cmd.h"
#include "apps/op.h"

#define DT(d) (1u << (unsigned)(d))
#define FLOATS (DT(MLA_DTYPE_F32) | DT(MLA_DTYPE_F16) | DT(MLA_DTYPE_BF16))
#define FP8S (DT(MLA_DTYPE_FP8_E4M3FN) | DT(MLA_DTYPE_FP8_E4M3FNUZ))

static const char *const layouts[] = {"auto", "normal", "shuffle"};

/* The cache descriptor from the parameters (num_blocks set by the caller). */
static int cache_desc(op_run *r, mla_indexer_cache_desc *d)
{
    int layout;
    int64_t ue8m0;
    memset(d, 0, sizeof *d);
    OP_TRY(op_param_choice(r, "layout", layouts, 3, &layout));
    OP_TRY(op_param_dtype(r, "dtype", FP8S, &d->dtype));
    OP_TRY(op_param_i64(r, "block_size", &d->block_size));
    OP_TRY(op_param_i64(r, "head_dim", &d->head_dim));
    OP_TRY(op_param_i64(r, "ue8m0", &ue8m0));
    d->layout = (mla_indexer_layout)layout;
    d->ue8m0 = ue8m0 != 0;
    return MLA_EXIT_OK;
}

/* --in cache [blocks, block_bytes]: its blocks go into the descriptor. */
static int cache_input(op_run *r, mla_indexer_cache_desc *d, mla_tensor *cache)
{
    OP_TRY(op_input(r, "cache", MLA_DTYPE_U8, NULL, 0, cache));
    if (cache->ndim != 2)
        return op_usage_error(r, "cache must be 2-D [blocks, block_bytes]");
    d->num_blocks = cache->shape[0];
    return MLA_EXIT_OK;
}

static int run_layernorm(op_run *r)
{
    mla_tensor x, w, b, y;
    double eps;
    mla_dtype yd;
    OP_TRY(op_param_f64(r, "eps", &eps));
    OP_TRY(op_input(r, "x", MLA_DTYPE_COUNT, "in_dtype", 0, &x));
    OP_TRY(op_input(r, "w", MLA_DTYPE_F32, NULL, 0, &w));
    OP_TRY(op_input(r, "b", MLA_DTYPE_F32, NULL, 0, &b));
    OP_TRY(op_param_dtype_or(r, "dtype", FLOATS, x.dtype, &yd));
    OP_TRY(op_output(r, "y", yd, x.ndim, x.shape, 0, &y));
    return op_check(r, mla_layernorm(op_ctx(r), &x, &w, &b, (float)eps, &y));
}

static int run_hadamard(op_run *r)
{
    mla_tensor x, y;
    mla_dtype yd;
    OP_TRY(op_input(r, "x", MLA_DTYPE_COUNT, "in_dtype", 0, &x));
    OP_TRY(op_param_dtype_or(r, "dtype", DT(MLA_DTYPE_F32) | DT(MLA_DTYPE_BF16), x.dtype, &yd));
    OP_TRY(op_output(r, "y", yd, x.ndim, x.shape, 0, &y));
    return op_check(r, mla_hadamard(op_ctx(r), &x, &y));
}

static int run_k_cache_write(op_run *r)
{
    mla_tensor k, slots, old, cache;
    mla_indexer_cache_desc d;
    OP_TRY(cache_desc(r, &d));
    OP_TRY(op_input(r, "k", MLA_DTYPE_COUNT, "in_dtype", 0, &k));
    OP_TRY(op_input(r, "slots", MLA_DTYPE_COUNT, NULL, 0, &slots));
    if (k.ndim != 2 || slots.ndim != 1)
        return op_usage_error(r, "k [T, head_dim] and slots [T]");
    const int has_old = op_has_input(r, "cache");
    if (has_old) { /* the cache to write into; else a zeroed one just big enough */
        OP_TRY(cache_input(r, &d, &old));
    } else {
        OP_TRY(op_blocks_for_slots(r, &slots, d.block_size, &d.num_blocks));
    }
    int64_t bb = 0;
    OP_TRY(op_check(r, mla_indexer_cache_block_bytes(&d, &bb)));
    if (has_old && old.shape[1] != bb)
        return op_usage_error(r, "cache must be [blocks, %lld] bytes for these parameters",
                              (long long)bb);
    const int64_t cs[2] = {d.num_blocks, bb};
    OP_TRY(op_output(r, "cache", MLA_DTYPE_U8, 2, cs, 0, &cache));
    OP_TRY(has_old ? op_copy_rows(r, &cache, &old) : op_zero_rows(r, &cache));
    return op_check(r, mla_indexer_k_cache_write(op_ctx(r), &d, &cache, &k, &slots));
}

static int run_k_gather(op_run *r)
{
    mla_tensor cache, bt, cu, k_fp8, k_scale;
    mla_indexer_cache_desc d;
    int64_t *c = NULL;
    OP_TRY(cache_desc(r, &d));
    OP_TRY(cache_input(r, &d, &cache));
    OP_TRY(op_input(r, "block_table", MLA_DTYPE_I32, NULL, 0, &bt));
    OP_TRY(op_input(r, "cu_seq_lens", MLA_DTYPE_I32, NULL, 0, &cu));
    if (cu.ndim != 1 || cu.shape[0] < 1)
        return op_usage_error(r, "cu_seq_lens [S + 1]");
    OP_TRY(op_host_indices(r, &cu, &c));
    const int64_t rows = c[cu.shape[0] - 1] > 0 ? c[cu.shape[0] - 1] : 0;
    free(c);
    const int64_t ks[2] = {rows, d.head_dim}, ss[1] = {rows};
    OP_TRY(op_output(r, "k_fp8", d.dtype, 2, ks, 0, &k_fp8));
    OP_TRY(op_output(r, "k_scale", MLA_DTYPE_F32, 1, ss, 0, &k_scale));
    return op_check(r, mla_indexer_k_gather(op_ctx(r), &d, &cache, &bt, &cu, &k_fp8, &k_scale));
}

/* What the logits and the planned search read: the K cache and its
 * descriptor, q, w, the block table, the lengths and next_n. */
static int logits_inputs(op_run *r, mla_indexer_cache_desc *d, int64_t *next_n, mla_tensor *cache,
                         mla_tensor *q, mla_tensor *w, mla_tensor *bt, mla_tensor *lens)
{
    OP_TRY(cache_desc(r, d));
    OP_TRY(op_param_i64(r, "next_n", next_n));
    OP_TRY(cache_input(r, d, cache));
    OP_TRY(op_input(r, "q", d->dtype, NULL, 0, q));
    OP_TRY(op_input(r, "w", MLA_DTYPE_F32, NULL, 0, w));
    OP_TRY(op_input(r, "block_table", MLA_DTYPE_I32, NULL, 0, bt));
    OP_TRY(op_input(r, "context_lens", MLA_DTYPE_I32, NULL, 0, lens));
    if (lens->ndim != 1 || *next_n < 1 || *next_n > INT32_MAX)
        return op_usage_error(r, "context_lens [B] and next_n >= 1");
    return MLA_EXIT_OK;
}

static int run_logits(op_run *r)
{
    mla_tensor cache, q, w, bt, lens, logits;
    mla_indexer_cache_desc d;
    int64_t next_n, max_len = 0, *n = NULL;
    OP_TRY(logits_inputs(r, &d, &next_n, &cache, &q, &w, &bt, &lens));
    if (op_param(r, "max_len")) {
        OP_TRY(op_param_i64(r, "max_len", &max_len));
    } else { /* the longest context */
        OP_TRY(op_host_indices(r, &lens, &n));
        for (int64_t b = 0; b < lens.shape[0]; ++b)
            max_len = n[b] > max_len ? n[b] : max_len;
        free(n);
    }
    const int64_t ls[2] = {lens.shape[0] * next_n, max_len};
    OP_TRY(op_output(r, "logits", MLA_DTYPE_F32, 2, ls, 0, &logits));
    return op_check(r, mla_indexer_logits(op_ctx(r), &d, &cache, &q, &w, &bt, &lens,
                                          (int32_t)next_n, &logits));
}

static int run_topk(op_run *r)
{
    mla_tensor logits, lens, idx;
    int64_t k;
    OP_TRY(op_param_i64(r, "k", &k));
    OP_TRY(op_input(r, "logits", MLA_DTYPE_F32, NULL, 0, &logits));
    OP_TRY(op_input(r, "lengths", MLA_DTYPE_I32, NULL, 0, &lens));
    if (logits.ndim != 2)
        return op_usage_error(r, "logits must be 2-D [R, N]");
    const int64_t is[2] = {logits.shape[0], k};
    OP_TRY(op_output(r, "indices", MLA_DTYPE_I32, 2, is, 0, &idx));
    return op_check(r, mla_topk(op_ctx(r), &logits, &lens, k, &idx));
}

static int run_search(op_run *r)
{
    mla_tensor cache, q, w, bt, lens, logits, idx;
    mla_indexer_cache_desc d;
    int64_t next_n, k, max_len;
    OP_TRY(op_param_i64(r, "k", &k));
    OP_TRY(logits_inputs(r, &d, &next_n, &cache, &q, &w, &bt, &lens));
    mla_indexer_plan *plan = NULL;
    OP_TRY(op_check(r, mla_indexer_plan_create(op_ctx(r), &d, &bt, &lens, (int32_t)next_n, &plan)));
    max_len = mla_indexer_plan_max_len(plan);
    int rc = op_param(r, "max_len") ? op_param_i64(r, "max_len", &max_len) : MLA_EXIT_OK;
    const int64_t ls[2] = {lens.shape[0] * next_n, max_len}, is[2] = {ls[0], k};
    if (rc == MLA_EXIT_OK)
        rc = op_output(r, "logits", MLA_DTYPE_F32, 2, ls, 0, &logits);
    if (rc == MLA_EXIT_OK)
        rc = op_output(r, "indices", MLA_DTYPE_I32, 2, is, 0, &idx);
    if (rc == MLA_EXIT_OK)
        rc = op_check(r, mla_indexer_search(op_ctx(r), plan, &cache, &q, &w, &logits, k, &idx));
    mla_context_synchronize(op_ctx(r));
    mla_indexer_plan_destroy(plan);
    return rc;
}

static int run_head_weights(op_run *r)
{
    mla_tensor w, s, out;
    OP_TRY(op_input(r, "w", MLA_DTYPE_COUNT, "in_dtype", 0, &w));
    OP_TRY(op_input(r, "s_q", MLA_DTYPE_F32, NULL, 0, &s));
    OP_TRY(op_output(r, "w_out", MLA_DTYPE_F32, w.ndim, w.shape, 0, &out));
    return op_check(r, mla_indexer_head_weights(op_ctx(r), &w, &s, &out));
}

#define CACHE_PARAMS                                                                              \
    {"dtype", "e4m3fn", "cache values: e4m3fn (divisor 448) | e4m3fnuz (224)"},                   \
        {"block_size", "64", "tokens per block (shuffle: a multiple of 16)"},                     \
        {"layout", "auto", "auto (normal at block_size 1, else shuffle) | normal | shuffle"},     \
        {"head_dim", "128", "values per token"}

const op_desc mla_op_table_indexer[] = {
    {"layernorm", "y = (x - mean) * rsqrt(var + eps) * w + b over rows of x [T, D]",
     {"x", "w", "b", NULL}, {"y", NULL},
     {{"eps", "1e-6", "added to the variance"},
      {"dtype", NULL, "y: f32 | f16 | bf16 (default x's)"},
      {"in_dtype", NULL, "x's dtype when its file is ambiguous"}, {NULL, NULL, NULL}},
     run_layernorm},
    {"hadamard", "y = x @ H_D / sqrt(D) over the last dim of x [T, D] or [T, H, D]",
     {"x", NULL}, {"y", NULL},
     {{"dtype", NULL, "y: f32 | bf16 (default x's)"},
      {"in_dtype", NULL, "x's dtype when its file is ambiguous"}, {NULL, NULL, NULL}},
     run_hadamard},
    {"indexer_k_cache_write",
     "k [T, head_dim] quantized per token into the fp8 K cache at slots[t] (< 0: skip);\n"
     "    --in cache is optional (default a zeroed one just big enough)",
     {"k", "slots", "cache", NULL}, {"cache", NULL},
     {CACHE_PARAMS, {"ue8m0", "1", "1: scales rounded up to a power of two (vLLM), 0: plain"},
      {"in_dtype", NULL, "k's dtype when its file is ambiguous"}, {NULL, NULL, NULL}},
     run_k_cache_write},
    {"indexer_k_gather", "the fp8 rows and scales of S sequences (cu_seq_lens [S + 1])",
     {"cache", "block_table", "cu_seq_lens", NULL}, {"k_fp8", "k_scale", NULL},
     {CACHE_PARAMS, {"ue8m0", "1", "unused by the gather"}, {NULL, NULL, NULL}},
     run_k_gather},
    {"indexer_logits",
     "paged MQA logits [B*next_n, max_len] of q [B*next_n, Hi, head_dim] (fp8 codes)\n"
     "    against the cache, head weights w [B*next_n, Hi] f32; -inf past the causal bound",
     {"cache", "q", "w", "block_table", "context_lens", NULL}, {"logits", NULL},
     {CACHE_PARAMS, {"ue8m0", "1", "unused by the logits"},
      {"next_n", "1", "query tokens per sequence"},
      {"max_len", NULL, "logits columns (default the longest context)"}, {NULL, NULL, NULL}},
     run_logits},
    {"indexer_search",
     "planned logits + top-k (a decode step's search): logits as indexer_logits, then the\n"
     "    k best of each row's causal bound; --out logits is the search's scratch too",
     {"cache", "q", "w", "block_table", "context_lens", NULL}, {"logits", "indices", NULL},
     {CACHE_PARAMS, {"ue8m0", "1", "unused by the search"},
      {"next_n", "1", "query tokens per sequence"},
      {"k", "2048", "indices per row"},
      {"max_len", NULL, "logits columns (default the plan's longest context)"},
      {NULL, NULL, NULL}},
     run_search},
    {"topk", "per row, the indices of the k largest of logits[r, :lengths[r]], -1 padded",
     {"logits", "lengths", NULL}, {"indices", NULL},
     {{"k", NULL, "indices per row (required, <= the row length N)"}, {NULL, NULL, NULL}},
     run_topk},
    {"indexer_head_weights", "w_out = w * s_q * 128^-0.5 * Hi^-0.5 in fp32, w [T, Hi]",
     {"w", "s_q", NULL}, {"w_out", NULL},
     {{"in_dtype", NULL, "w's dtype when its file is ambiguous"}, {NULL, NULL, NULL}},
     run_head_weights},
};

const int mla_op_table_indexer_size =
    (int)(sizeof mla_op_table_indexer / sizeof mla_op_table_indexer[0]);
