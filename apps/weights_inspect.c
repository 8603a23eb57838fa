/* mla weights inspect DIR: what the library would load of a Hugging Face
 * checkpoint directory, layer by layer, read from config.json, the index and
 * the shard headers only (the loader's check_only pass: no tensor data). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps/cmd.h"

typedef struct inspect_args {
    const char *dir;
    int64_t layer; /* -1: every layer */
    int32_t rank, world;
    mla_kv_b_fp8 kv_b;
    int json;
} inspect_args;

/* One tensor the loader reads: its entry in the file, what it becomes. */
static void show_tensor(mla_context *ctx, mla_checkpoint *ck, const inspect_args *a,
                        const char *prefix, const char *base, const char *suffix,
                        const char *format, const mla_tensor *t, int *first)
{
    char name[256], pr[600];
    snprintf(name, sizeof name, "%s%s%s", prefix, base, suffix);
    mla_safetensors *f = NULL;
    mla_safetensors_info info;
    const char *nm = NULL, *shard = "?";
    if (mla_checkpoint_find(ctx, ck, name, &f, &info) != MLA_OK)
        return;
    for (int64_t i = 0; i < mla_checkpoint_tensor_count(ck); ++i)
        if (mla_checkpoint_tensor_at(ck, i, &nm, &shard) == MLA_OK && !strcmp(nm, name))
            break;
    char shape[96] = "";
    size_t n = 0;
    for (int32_t d = 0; d < t->ndim; ++d)
        n += (size_t)snprintf(shape + n, sizeof shape - n, "%s%lld", d ? ", " : "",
                              (long long)t->shape[d]);
    if (a->json) {
        printf("%s\n      {\"name\": ", *first ? "" : ",");
        mla_app_json_string(stdout, name);
        printf(", \"dtype\": \"%s\", \"format\": \"%s\", \"shape\": [%s], \"loads_as\": \"%s\", "
               "\"shard\": ",
               info.file_dtype, format, shape, mla_dtype_name(t->dtype));
        mla_app_json_string(stdout, shard);
        printf("}");
    } else {
        printf("    %-58s %-8s %-10s [%s] %s  (%s)\n", mla_app_printable(name, pr, sizeof pr),
               info.file_dtype, format, shape, mla_dtype_name(t->dtype),
               mla_app_printable(shard, pr + 300, sizeof pr - 300));
    }
    *first = 0;
}

static void show_proj(mla_context *ctx, mla_checkpoint *ck, const inspect_args *a,
                      const char *prefix, const char *base, const mla_weight *w,
                      mla_weight_format fmt, int *first)
{
    const char *f = mla_weight_format_name(fmt);
    show_tensor(ctx, ck, a, prefix, base, ".weight", f, &w->w, first);
    if (fmt == MLA_WEIGHT_FP8_BLOCK || fmt == MLA_WEIGHT_FP8_TENSOR)
        show_tensor(ctx, ck, a, prefix, base, ".weight_scale_inv", f, &w->scale, first);
    else if (fmt == MLA_WEIGHT_MXFP4)
        show_tensor(ctx, ck, a, prefix, base, ".weight_scale", f, &w->scale, first);
}

/* One layer: its tensors, or why it is refused. Returns 1 when loadable. */
static int show_layer(mla_context *ctx, mla_checkpoint *ck, const inspect_args *a, int64_t layer,
                      int first_layer)
{
    mla_layer_load_options lo;
    mla_layer_load_options_default(&lo);
    lo.check_only = 1;
    lo.rank = a->rank;
    lo.world_size = a->world;
    lo.kv_b_fp8 = a->kv_b;
    mla_layer_weights_ex w;
    const mla_status st = mla_layer_weights_load_checkpoint(ctx, ck, layer, &lo, &w);
    if (a->json)
        printf("%s\n    {\"layer\": %lld, \"ok\": %s", first_layer ? "" : ",", (long long)layer,
               st == MLA_OK ? "true" : "false");
    if (st != MLA_OK) {
        char pr[700];
        if (a->json) {
            printf(", \"status\": \"%s\", \"param\": ", mla_status_name(st));
            mla_app_json_string(stdout, mla_context_error_param(ctx));
            printf(", \"why\": ");
            mla_app_json_string(stdout, mla_context_error_detail(ctx));
            printf("}");
        } else {
            printf("  layer %lld: REFUSED, %s (%s): %s\n", (long long)layer, mla_status_name(st),
                   mla_app_printable(mla_context_error_param(ctx), pr, 300),
                   mla_app_printable(mla_context_error_detail(ctx), pr + 300, 400));
        }
        return 0;
    }
    char prefix[64];
    snprintf(prefix, sizeof prefix, "model.layers.%lld.self_attn.", (long long)layer);
    if (a->json)
        printf(", \"heads\": %lld, \"bytes\": %lld, \"tensors\": [", (long long)w.config.heads,
               (long long)w.storage_bytes);
    else
        printf("  layer %lld: loads %lld heads, %.1f MiB:\n", (long long)layer,
               (long long)w.config.heads, (double)w.storage_bytes / 1048576.0);
    const mla_layer_weights *b = &w.base;
    const mla_layer_weight_formats *f = &w.formats;
    int first = 1;
    if (w.config.q_lora > 0) {
        show_proj(ctx, ck, a, prefix, "q_a_proj", &b->q_a_proj, f->q_a_proj, &first);
        show_tensor(ctx, ck, a, prefix, "q_a_layernorm.weight", "", "norm", &b->q_a_layernorm,
                    &first);
    }
    show_proj(ctx, ck, a, prefix, w.config.q_lora > 0 ? "q_b_proj" : "q_proj", &b->q_b_proj,
              f->q_b_proj, &first);
    show_proj(ctx, ck, a, prefix, "kv_a_proj_with_mqa", &b->kv_a_proj_with_mqa,
              f->kv_a_proj_with_mqa, &first);
    show_tensor(ctx, ck, a, prefix, "kv_a_layernorm.weight", "", "norm", &b->kv_a_layernorm,
                &first);
    show_proj(ctx, ck, a, prefix, "kv_b_proj", &b->kv_b_proj, f->kv_b_proj, &first);
    show_proj(ctx, ck, a, prefix, "o_proj", &b->o_proj, f->o_proj, &first);
    if (w.has_indexer) {
        const mla_indexer_weights *x = &w.indexer;
        show_proj(ctx, ck, a, prefix, "indexer.wq_b", &x->wq_b, f->idx_wq_b, &first);
        show_proj(ctx, ck, a, prefix, "indexer.wk", &x->wk, f->idx_wk, &first);
        show_tensor(ctx, ck, a, prefix, "indexer.k_norm.weight", "", "norm", &x->k_norm_weight,
                    &first);
        show_tensor(ctx, ck, a, prefix, "indexer.k_norm.bias", "", "norm", &x->k_norm_bias, &first);
        show_proj(ctx, ck, a, prefix, "indexer.weights_proj", &x->weights_proj, f->idx_weights_proj,
                  &first);
    }
    if (a->json)
        printf("]}");
    return 1;
}

static int parse(int argc, char **argv, inspect_args *a)
{
    memset(a, 0, sizeof *a);
    a->layer = -1;
    a->world = 1;
    a->kv_b = MLA_KV_B_FP8_TO_TENSOR;
    for (int i = 1; i < argc; ++i) {
        const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int64_t r, w;
        char *end;
        if (k[0] != '-' && !a->dir) {
            a->dir = k;
        } else if (!strcmp(k, "--json")) {
            a->json = 1;
        } else if (!strcmp(k, "--layer") && v && !mla_app_parse_i64(v, &a->layer)) {
            ++i;
        } else if (!strcmp(k, "--tp") && v && !mla_app_parse_i64_prefix(v, &r, &end) &&
                   *end == '/' && !mla_app_parse_i64(end + 1, &w) && w >= 1 && w <= 4096 && r < w) {
            a->rank = (int32_t)r, a->world = (int32_t)w, ++i;
        } else if (!strcmp(k, "--kv-b") && v &&
                   (!strcmp(v, "keep") || !strcmp(v, "to_bf16") || !strcmp(v, "to_tensor"))) {
            a->kv_b = v[0] == 'k'   ? MLA_KV_B_FP8_KEEP
                      : v[3] == 'b' ? MLA_KV_B_FP8_TO_BF16
                                    : MLA_KV_B_FP8_TO_TENSOR;
            ++i;
        } else {
            fprintf(stderr, "mla weights inspect: bad argument '%s' (see mla weights --help)\n", k);
            return -1;
        }
    }
    if (!a->dir) {
        fprintf(stderr, "mla weights inspect: a checkpoint DIR is needed\n");
        return -1;
    }
    return 0;
}

/* "model.layers.<N>." of a tensor name, N; -1 for other tensors. */
static int64_t layer_of(const char *name)
{
    int64_t n;
    char *end;
    if (strncmp(name, "model.layers.", 13) || mla_app_parse_i64_prefix(name + 13, &n, &end) ||
        *end != '.')
        return -1;
    return n;
}

int weights_inspect(int argc, char **argv)
{
    inspect_args a;
    if (parse(argc, argv, &a))
        return MLA_EXIT_USAGE;
    mla_context *ctx = NULL;
    if (mla_context_create(MLA_BACKEND_REFERENCE, NULL, &ctx) != MLA_OK)
        return MLA_EXIT_FAIL;
    mla_checkpoint *ck = NULL;
    mla_status st = mla_checkpoint_open(ctx, a.dir, &ck);
    if (st != MLA_OK) {
        fprintf(stderr, "mla weights inspect: %s: %s (%s): %s\n", a.dir, mla_status_name(st),
                mla_context_error_param(ctx), mla_context_error_detail(ctx));
        mla_context_destroy(ctx);
        return MLA_EXIT_FAIL;
    }
    const mla_hf_config *hc = mla_checkpoint_config(ck);
    const mla_model_config *c = &hc->model;
    int64_t last = hc->num_layers - 1, attn = 0, other = 0;
    const int64_t nt = mla_checkpoint_tensor_count(ck);
    for (int64_t i = 0; i < nt; ++i) { /* layers past num_hidden_layers (MTP) too */
        const char *nm, *sh;
        mla_checkpoint_tensor_at(ck, i, &nm, &sh);
        const int64_t l = layer_of(nm);
        last = l > last ? l : last;
        if (l >= 0 && strstr(nm, ".self_attn."))
            ++attn;
        else
            ++other;
    }
    if (a.json) {
        printf("{\"dir\": ");
        mla_app_json_string(stdout, a.dir);
        printf(", \"model_type\": ");
        mla_app_json_string(stdout, hc->model_type);
        printf(", \"num_layers\": %lld, \"hidden\": %lld, \"heads\": %lld, \"q_lora\": %lld, "
               "\"kv_lora\": %lld, \"nope\": %lld, \"rope\": %lld, \"v\": %lld, \"index_heads\": "
               "%lld, \"quant_method\": ",
               (long long)hc->num_layers, (long long)c->hidden, (long long)c->heads,
               (long long)c->q_lora, (long long)c->kv_lora, (long long)c->nope, (long long)c->rope,
               (long long)c->v, (long long)c->index_heads);
        mla_app_json_string(stdout, hc->quant_method);
        printf(", \"tensors\": %lld, \"attention_tensors\": %lld, \"not_read\": %lld, "
               "\"tp\": [%d, %d], \"layers\": [",
               (long long)nt, (long long)attn, (long long)other, (int)a.rank, (int)a.world);
    } else {
        char pr[300];
        printf("%s: %s, %lld layers; hidden %lld, heads %lld, q_lora %lld, kv_lora %lld, nope "
               "%lld, rope %lld, v %lld, indexer heads %lld; quantization %s\n",
               mla_app_printable(a.dir, pr, sizeof pr), hc->model_type, (long long)hc->num_layers,
               (long long)c->hidden, (long long)c->heads, (long long)c->q_lora,
               (long long)c->kv_lora, (long long)c->nope, (long long)c->rope, (long long)c->v,
               (long long)c->index_heads, *hc->quant_method ? hc->quant_method : "none");
        printf("index: %lld tensors, %lld of them attention (self_attn); the other %lld (MLP, "
               "experts, embeddings, norms) are not read by this library\n",
               (long long)nt, (long long)attn, (long long)other);
        if (a.world > 1)
            printf("tensor parallel: rank %d of %d\n", (int)a.rank, (int)a.world);
    }
    int refused = 0, first = 1;
    for (int64_t l = a.layer >= 0 ? a.layer : 0; l <= (a.layer >= 0 ? a.layer : last); ++l) {
        refused += !show_layer(ctx, ck, &a, l, first);
        first = 0;
    }
    if (a.json)
        printf("\n  ], \"refused\": %d}\n", refused);
    else
        printf("%d layer(s) refused\n", refused);
    mla_checkpoint_close(ck);
    mla_context_destroy(ctx);
    return refused ? MLA_EXIT_FAIL : MLA_EXIT_OK;
}
