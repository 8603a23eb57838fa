/* `mla op` for the ops that take a layer's weights: mla_prepare, the V3.2
 * indexer's prepare and the whole layer (include/mla/mla_prepare.h,
 * mla_indexer.h, mla_layer.h). The weights come from a safetensors file or a
 * checkpoint directory (--param weights), through the layer loader. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "apps/cmd.h"
#include "apps/op.h"

#define DT(d) (1u << (unsigned)(d))
#define FP8S (DT(MLA_DTYPE_FP8_E4M3FN) | DT(MLA_DTYPE_FP8_E4M3FNUZ))

static const char *const styles[] = {"interleaved", "neox"};
static const char *const sites[] = {"auto", "separate", "fused_cache", "attention"};
static const char *const kv_b_modes[] = {"keep", "to_bf16", "to_tensor"};
static const char *const idx_layouts[] = {"auto", "normal", "shuffle"};
static const char *const mx_rules[] = {"production", "ocp"};
static const char *const forms[] = {"auto", "absorbed", "expanded"};

/* "R/W" of --param tp. */
static int parse_tp(op_run *r, int32_t *rank, int32_t *world)
{
    const char *v = op_param(r, "tp");
    int64_t a, b;
    char *end;
    if (!v || mla_app_parse_i64_prefix(v, &a, &end) || *end != '/' ||
        mla_app_parse_i64(end + 1, &b) || b < 1 || b > 4096 || a >= b)
        return op_usage_error(r, "--param tp=%s: want RANK/WORLD with 0 <= RANK < WORLD",
                              v ? v : "");
    *rank = (int32_t)a;
    *world = (int32_t)b;
    return MLA_EXIT_OK;
}

/* Layer --param layer of --param weights (a file: the config from --param
 * config / model; a checkpoint directory: its own), tensor-parallel slice
 * --param tp. w->config is what the plan takes. */
static int load_layer(op_run *r, mla_layer_weights_ex *w)
{
    const char *path = op_param(r, "weights");
    int64_t layer;
    int kvb;
    mla_layer_load_options lo;
    mla_layer_load_options_default(&lo);
    OP_TRY(op_param_i64(r, "layer", &layer));
    int kc;
    OP_TRY(op_param_choice(r, "kv_b_fp8", kv_b_modes, 3, &kvb));
    OP_TRY(op_param_choice(r, "kc_rule", mx_rules, 2, &kc));
    lo.kc_rule = (mla_mxfp4_rule)kc;
    OP_TRY(parse_tp(r, &lo.rank, &lo.world_size));
    lo.kv_b_fp8 = (mla_kv_b_fp8)kvb;
    const char *prefix = op_param(r, "prefix");
    lo.prefix = prefix && strcmp(prefix, "auto") ? prefix : NULL;
    if (!path || !*path)
        return op_usage_error(r, "needs --param weights=FILE.safetensors or a checkpoint DIR");
    struct stat sb;
    mla_context *ctx = op_ctx(r);
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        mla_checkpoint *ck = NULL;
        mla_status st = mla_checkpoint_open(ctx, path, &ck);
        if (st == MLA_OK)
            st = mla_layer_weights_load_checkpoint(ctx, ck, layer, &lo, w);
        mla_checkpoint_close(ck);
        return op_check(r, st);
    }
    mla_model_config cfg;
    OP_TRY(op_model_config(r, &cfg));
    mla_safetensors *f = NULL;
    mla_status st = mla_safetensors_open(ctx, path, &f);
    if (st == MLA_OK)
        st = mla_layer_weights_load(ctx, f, &cfg, layer, &lo, w);
    mla_safetensors_close(f);
    return op_check(r, st);
}

/* The RoPE-once plan for these weights and parameters. */
static int make_plan(op_run *r, const mla_layer_weights_ex *w, const mla_cache_desc *d,
                     mla_plan **plan)
{
    mla_plan_options po;
    int site;
    mla_plan_options_default(mla_context_target(op_ctx(r)), &po);
    OP_TRY(op_param_choice(r, "site", sites, 4, &site));
    OP_TRY(op_param_dtype(r, "q_dtype", DT(MLA_DTYPE_BF16) | FP8S, &po.q_dtype));
    po.weight_dtype = w->base.o_proj.w.dtype;
    po.cache_layout = d->layout;
    po.cache_dtype = d->dtype;
    po.force_rope_site = site - 1;
    return op_check(r, mla_plan_create(&w->config, &po, plan));
}

static int run_prepare(op_run *r)
{
    mla_layer_weights_ex w;
    OP_TRY(load_layer(r, &w));
    mla_tensor x, pos, slots, cache_in, cache, cos, sin, qcat, ws;
    mla_cache_desc d;
    mla_plan *plan = NULL;
    const mla_model_config *c = &w.config;
    int rc = op_input(r, "x", MLA_DTYPE_COUNT, "in_dtype", 0, &x);
    if (rc == MLA_EXIT_OK)
        rc = op_input(r, "positions", MLA_DTYPE_COUNT, NULL, 0, &pos);
    if (rc == MLA_EXIT_OK)
        rc = op_input(r, "slots", MLA_DTYPE_COUNT, NULL, 0, &slots);
    if (rc == MLA_EXIT_OK && x.ndim != 2)
        rc = op_usage_error(r, "x must be [T, hidden]");
    if (rc == MLA_EXIT_OK)
        rc = op_rope_table(r, c->rope, &cos, &sin);
    if (rc == MLA_EXIT_OK)
        rc = op_cache_desc(r, c->kv_lora, c->rope, &d);
    if (rc == MLA_EXIT_OK)
        rc = op_latent_cache(r, &slots, &d, &cache_in, &cache);
    if (rc == MLA_EXIT_OK)
        rc = make_plan(r, &w, &d, &plan);
    int64_t wb = 0;
    if (rc == MLA_EXIT_OK)
        rc = op_check(r, mla_prepare_workspace_bytes(plan, x.shape[0], x.dtype, &wb));
    if (rc == MLA_EXIT_OK)
        rc = op_tensor(r, MLA_DTYPE_U8, 1, &wb, NULL, &ws);
    const int64_t qs[3] = {x.shape[0], c->heads, c->kv_lora + c->rope};
    if (rc == MLA_EXIT_OK)
        rc = op_output(r, "q_cat", mla_plan_options_get(plan)->q_dtype, 3, qs, 0, &qcat);
    if (rc == MLA_EXIT_OK)
        rc = op_check(r, mla_prepare(op_ctx(r), plan, &w.base, &x, &pos, &slots, &cos, &sin, &d,
                                     &cache, &qcat, &ws));
    mla_context_synchronize(op_ctx(r));
    mla_plan_destroy(plan);
    mla_layer_weights_free(op_ctx(r), &w);
    return rc;
}

/* One projection of --in NAME (and NAME_scale for fp8). */
static int in_proj(op_run *r, const char *name, mla_weight *w)
{
    char nm[48];
    snprintf(nm, sizeof nm, "%s_scale", name);
    memset(w, 0, sizeof *w);
    OP_TRY(op_input(r, name, MLA_DTYPE_COUNT, NULL, 0, &w->w));
    if (op_has_input(r, nm))
        return op_input(r, nm, MLA_DTYPE_F32, NULL, 0, &w->scale);
    return MLA_EXIT_OK;
}

/* The indexer's weights as inputs (a dump's), its config from --param model / config. */
static int indexer_inputs(op_run *r, mla_layer_weights_ex *w)
{
    memset(w, 0, sizeof *w);
    mla_indexer_weights *x = &w->indexer;
    OP_TRY(op_model_config(r, &w->config));
    w->has_indexer = w->config.index_heads > 0;
    OP_TRY(in_proj(r, "wq_b", &x->wq_b));
    OP_TRY(in_proj(r, "wk", &x->wk));
    OP_TRY(op_input(r, "k_norm_weight", MLA_DTYPE_F32, NULL, 0, &x->k_norm_weight));
    OP_TRY(op_input(r, "k_norm_bias", MLA_DTYPE_F32, NULL, 0, &x->k_norm_bias));
    return in_proj(r, "weights_proj", &x->weights_proj);
}

static int run_indexer_prepare(op_run *r)
{
    mla_layer_weights_ex w;
    const int given = op_has_input(r, "wq_b");
    OP_TRY(given ? indexer_inputs(r, &w) : load_layer(r, &w));
    mla_tensor q, x, pos, cos, sin, qf, wo, k, ws;
    mla_indexer_options io;
    int style;
    int64_t had;
    mla_dtype kd;
    const mla_model_config *c = &w.config;
    int rc = op_param_choice(r, "style", styles, 2, &style);
    if (rc == MLA_EXIT_OK)
        rc = op_param_i64(r, "hadamard", &had);
    if (rc == MLA_EXIT_OK)
        rc = op_param_dtype(r, "fp8", FP8S, &io.fp8);
    if (rc == MLA_EXIT_OK)
        rc = op_param_dtype(r, "k_dtype", DT(MLA_DTYPE_F32) | DT(MLA_DTYPE_BF16), &kd);
    io.style = (mla_rope_style)style;
    io.hadamard = had != 0;
    if (rc == MLA_EXIT_OK && !w.has_indexer)
        rc = op_usage_error(r, "the weights have no indexer (a V3.2 config's index_n_heads)");
    if (rc == MLA_EXIT_OK)
        rc = op_input(r, "q_lat_normed", MLA_DTYPE_COUNT, "in_dtype", 0, &q);
    if (rc == MLA_EXIT_OK)
        rc = op_input(r, "x", MLA_DTYPE_COUNT, "in_dtype", 0, &x);
    if (rc == MLA_EXIT_OK)
        rc = op_input(r, "positions", MLA_DTYPE_COUNT, NULL, 0, &pos);
    if (rc == MLA_EXIT_OK && x.ndim != 2)
        rc = op_usage_error(r, "x must be [T, hidden]");
    if (rc == MLA_EXIT_OK)
        rc = op_rope_table(r, c->rope, &cos, &sin);
    int64_t wb = 0;
    if (rc == MLA_EXIT_OK)
        rc = op_check(r, mla_indexer_workspace_bytes(c, x.shape[0], &wb));
    if (rc == MLA_EXIT_OK)
        rc = op_tensor(r, MLA_DTYPE_U8, 1, &wb, NULL, &ws);
    const int64_t T = x.shape[0], Hi = c->index_heads, Di = c->index_head_dim;
    const int64_t qs[3] = {T, Hi, Di}, wsh[2] = {T, Hi}, ks[2] = {T, Di};
    if (rc == MLA_EXIT_OK)
        rc = op_output(r, "q_fp8", io.fp8, 3, qs, 0, &qf);
    if (rc == MLA_EXIT_OK)
        rc = op_output(r, "w_out", MLA_DTYPE_F32, 2, wsh, 0, &wo);
    if (rc == MLA_EXIT_OK)
        rc = op_output(r, "k", kd, 2, ks, 0, &k);
    if (rc == MLA_EXIT_OK)
        rc = op_check(r, mla_indexer_prepare(op_ctx(r), c, &w.indexer, &io, &q, &x, &pos, &cos,
                                             &sin, &qf, &wo, &k, &ws));
    mla_context_synchronize(op_ctx(r));
    if (!given) /* inputs are the run's own */
        mla_layer_weights_free(op_ctx(r), &w);
    return rc;
}

/* The V3.2 index cache: --in index_cache's bytes, or zeros, as the output. */
static int index_cache(op_run *r, mla_layer_options *opt, const mla_cache_desc *d,
                       mla_tensor *icache)
{
    int layout;
    int64_t ue8m0, had, bb = 0, bytes;
    int style;
    OP_TRY(op_param_dtype(r, "idx_dtype", FP8S, &opt->index_cache.dtype));
    OP_TRY(op_param_choice(r, "idx_layout", idx_layouts, 3, &layout));
    OP_TRY(op_param_i64(r, "idx_ue8m0", &ue8m0));
    OP_TRY(op_param_choice(r, "idx_style", styles, 2, &style));
    OP_TRY(op_param_i64(r, "idx_hadamard", &had));
    opt->index_cache.layout = (mla_indexer_layout)layout;
    opt->index_cache.ue8m0 = ue8m0 != 0;
    opt->index_cache.num_blocks = d->num_blocks;
    opt->indexer.style = (mla_rope_style)style;
    opt->indexer.hadamard = had != 0;
    opt->indexer.fp8 = opt->index_cache.dtype;
    OP_TRY(op_check(r, mla_indexer_cache_block_bytes(&opt->index_cache, &bb)));
    OP_TRY(op_mul(r, d->num_blocks, bb, "the index cache", &bytes));
    const int64_t cs[2] = {d->num_blocks, bb};
    OP_TRY(op_output(r, "index_cache", MLA_DTYPE_U8, 2, cs, 0, icache));
    if (!op_has_input(r, "index_cache"))
        return op_zero_rows(r, icache);
    mla_tensor in;
    OP_TRY(op_input(r, "index_cache", MLA_DTYPE_U8, NULL, 0, &in));
    if (in.ndim != 2 || in.shape[0] != d->num_blocks || in.shape[1] != bb)
        return op_usage_error(r, "index_cache must be [%lld, %lld] bytes", (long long)d->num_blocks,
                              (long long)bb);
    return op_copy_rows(r, icache, &in);
}

static int run_layer(op_run *r)
{
    mla_layer_weights_ex w;
    OP_TRY(load_layer(r, &w));
    mla_tensor x, pos, slots, bt, lens, cu, cache_in, cache, icache, cos, sin, y, ws;
    mla_cache_desc d;
    mla_layer_options opt;
    mla_plan *plan = NULL;
    mla_layer_plan *lp = NULL;
    int64_t dense, splits, next_n, max_ctx = 0, *n = NULL;
    mla_dtype yd;
    const mla_model_config *c = &w.config;
    int rc = op_param_i64(r, "dense", &dense);
    if (rc == MLA_EXIT_OK)
        rc = op_param_i64(r, "num_splits", &splits);
    if (rc == MLA_EXIT_OK)
        rc = op_param_i64(r, "next_n", &next_n);
    if (rc == MLA_EXIT_OK)
        rc = op_input(r, "x", MLA_DTYPE_COUNT, "in_dtype", 0, &x);
    if (rc == MLA_EXIT_OK)
        rc = op_param_dtype_or(r, "y_dtype", DT(MLA_DTYPE_F32) | DT(MLA_DTYPE_BF16), x.dtype, &yd);
    if (rc == MLA_EXIT_OK)
        rc = op_input(r, "positions", MLA_DTYPE_COUNT, NULL, 0, &pos);
    if (rc == MLA_EXIT_OK)
        rc = op_input(r, "slots", MLA_DTYPE_COUNT, NULL, 0, &slots);
    if (rc == MLA_EXIT_OK)
        rc = op_input(r, "block_table", MLA_DTYPE_I32, NULL, 0, &bt);
    if (rc == MLA_EXIT_OK)
        rc = op_input(r, "context_lens", MLA_DTYPE_I32, NULL, 0, &lens);
    const int has_cu = op_has_input(r, "cu_q_lens");
    if (rc == MLA_EXIT_OK && has_cu)
        rc = op_input(r, "cu_q_lens", MLA_DTYPE_I32, NULL, 0, &cu);
    if (rc == MLA_EXIT_OK &&
        (x.ndim != 2 || lens.ndim != 1 || next_n < 1 || next_n > INT32_MAX || splits > 256))
        rc = op_usage_error(r, "x [T, hidden], context_lens [S], next_n >= 1, num_splits <= 256");
    if (rc == MLA_EXIT_OK && op_param(r, "max_context")) {
        rc = op_param_i64(r, "max_context", &max_ctx);
    } else if (rc == MLA_EXIT_OK) { /* the longest context */
        rc = op_host_indices(r, &lens, &n);
        for (int64_t s = 0; rc == MLA_EXIT_OK && s < lens.shape[0]; ++s)
            max_ctx = n[s] > max_ctx ? n[s] : max_ctx;
        free(n);
    }
    if (rc == MLA_EXIT_OK)
        rc = op_rope_table(r, c->rope, &cos, &sin);
    if (rc == MLA_EXIT_OK)
        rc = op_cache_desc(r, c->kv_lora, c->rope, &d);
    if (rc == MLA_EXIT_OK)
        rc = op_latent_cache(r, &slots, &d, &cache_in, &cache);
    mla_layer_options_default(c, &d, &opt);
    opt.dense = (int32_t)(dense != 0);
    opt.num_splits = (int32_t)splits;
    opt.act = x.dtype;
    int form = 0;
    if (rc == MLA_EXIT_OK)
        rc = op_param_choice(r, "form", forms, 3, &form);
    if (rc == MLA_EXIT_OK)
        rc = op_param_i64(r, "expanded_keys", &opt.expanded_keys);
    opt.form = (mla_layer_form)form;
    const int sparse = c->index_heads > 0 && !opt.dense;
    if (rc == MLA_EXIT_OK && sparse)
        rc = index_cache(r, &opt, &d, &icache);
    if (rc == MLA_EXIT_OK)
        rc = make_plan(r, &w, &d, &plan);
    int64_t wb = 0;
    const int64_t T = x.shape[0], S = lens.shape[0];
    if (rc == MLA_EXIT_OK)
        rc = op_check(r, mla_layer_workspace_bytes(op_ctx(r), plan, &opt, T, S, max_ctx, &wb));
    if (rc == MLA_EXIT_OK)
        rc = op_tensor(r, MLA_DTYPE_U8, 1, &wb, NULL, &ws);
    const int64_t ys[2] = {T, c->hidden};
    if (rc == MLA_EXIT_OK)
        rc = op_output(r, "y", yd, 2, ys, 0, &y);
    mla_layer_batch b = {&pos, &slots, &bt, &lens, has_cu ? &cu : NULL, (int32_t)next_n};
    mla_layer_buffers bufs = {&cos, &sin, &cache, sparse ? &icache : NULL, &ws};
    if (rc == MLA_EXIT_OK)
        rc = op_check(r, mla_layer_plan_create(op_ctx(r), plan, &d, &opt, &b, max_ctx, &bufs, &lp));
    if (rc == MLA_EXIT_OK)
        rc = op_check(r, mla_layer_forward(op_ctx(r), lp, &w, &x, &y));
    mla_context_synchronize(op_ctx(r));
    mla_layer_plan_destroy(lp);
    mla_plan_destroy(plan);
    mla_layer_weights_free(op_ctx(r), &w);
    return rc;
}

#define WEIGHT_PARAMS                                                                              \
    {"weights", NULL, "a safetensors file or a checkpoint directory (required)"},                  \
        {"layer", "0", "the layer to load"},                                                       \
        {"prefix", "auto", "tensor name prefix (auto: model.layers.<layer>.self_attn.)"},          \
        {"tp", "0/1", "tensor-parallel slice RANK/WORLD"},                                         \
        {"kv_b_fp8", "to_tensor", "an fp8 kv_b_proj: keep | to_bf16 | to_tensor"},                 \
        {"kc_rule", "production",                                                                  \
         "MXFP4 kv_b_proj: W_kc's re-quantization rule (production | ocp)"},                       \
        {"config", "DeepSeek-V3", "preset for a safetensors file (a directory has its own)"},      \
        {"model", NULL, "a checkpoint directory whose config.json describes the file"},            \
        {"max_pos", NULL, "RoPE table rows without --in cos (default the config's)"},              \
    {                                                                                              \
        "in_dtype", NULL, "x's dtype when its file is ambiguous"                                   \
    }
#define CACHE_PARAMS                                                                               \
    {"layout", "normal", "normal | shuffled | fp8_scaled"},                                        \
        {"dtype", "bf16", "cache elements: bf16 | e4m3fn | e4m3fnuz"},                             \
        {"block_size", "16", "tokens per block"},                                                  \
        {"k_scale", "1", "per-tensor fp8 scale (normal, shuffled)"},                               \
        {"q_dtype", "bf16", "q_cat: bf16 | e4m3fn | e4m3fnuz"},                                    \
    {                                                                                              \
        "site", "auto", "RoPE site: auto (the plan's) | separate | fused_cache | attention"        \
    }

const op_desc mla_op_table_layer[] = {
    {"prepare",
     "mla_prepare: x [T, hidden] -> q_cat [T, H, L + R] and every token's latent row in\n"
     "    the cache at slots (--in cache optional), RoPE once at the plan's site",
     {"x", "positions", "slots", "cache", "cos", "sin", NULL},
     {"q_cat", "cache", NULL},
     {WEIGHT_PARAMS, CACHE_PARAMS, {NULL, NULL, NULL}},
     run_prepare},
    {"indexer_prepare",
     "the V3.2 indexer's q (fp8 [T, Hi, 128]), head weights w_out [T, Hi] and k [T, 128]\n"
     "    from q_lat_normed [T, q_lora] and x [T, hidden]; the weights from --param weights,\n"
     "    or as inputs (wq_b, wk, weights_proj with their fp8 _scale, k_norm_weight / _bias;\n"
     "    the config from --param model or config)",
     {"q_lat_normed", "x", "positions", "cos", "sin", "wq_b", "wq_b_scale", "wk", "wk_scale",
      "k_norm_weight", "k_norm_bias", "weights_proj", "weights_proj_scale", NULL},
     {"q_fp8", "w_out", "k", NULL},
     {WEIGHT_PARAMS,
      {"style", "neox", "the indexer's RoPE: neox | interleaved"},
      {"hadamard", "0", "1: rotate q and k by H_128 / sqrt(128)"},
      {"fp8", "e4m3fn", "q's fp8: e4m3fn | e4m3fnuz"},
      {"k_dtype", "bf16", "k: f32 | bf16"},
      {NULL, NULL, NULL}},
     run_indexer_prepare},
    {"layer",
     "mla_layer_forward: one step of S sequences, x [T, hidden] -> y [T, hidden], writing\n"
     "    the new tokens into the cache (and the V3.2 index cache); --in cache / index_cache\n"
     "    optional (default zeroed)",
     {"x", "positions", "slots", "block_table", "context_lens", "cu_q_lens", "cache", "index_cache",
      "cos", "sin", NULL},
     {"y", "cache", "index_cache", NULL},
     {WEIGHT_PARAMS,
      CACHE_PARAMS,
      {"y_dtype", NULL, "y: f32 | bf16 (default x's)"},
      {"dense", "0", "1: dense attention even with an indexer"},
      {"num_splits", "0", "attention split-KV cap (0: 8)"},
      {"next_n", "1", "tokens per sequence without cu_q_lens"},
      {"max_context", NULL, "bound on every context length (default the longest)"},
      {"idx_dtype", "e4m3fn", "index cache: e4m3fn | e4m3fnuz"},
      {"idx_layout", "auto", "index cache: auto | normal | shuffle"},
      {"idx_ue8m0", "1", "index cache scales rounded up to powers of two"},
      {"idx_style", "neox", "the indexer's RoPE: neox | interleaved"},
      {"idx_hadamard", "0", "1: the indexer rotates q and k by H_128 / sqrt(128)"},
      {"form", "auto", "the attention's form: auto | absorbed | expanded"},
      {"expanded_keys", "0", "keys the workspace holds decompressed (expanded form; 0: T)"},
      {NULL, NULL, NULL}},
     run_layer},
};

const int mla_op_table_layer_size = (int)(sizeof mla_op_table_layer / sizeof mla_op_table_layer[0]);
