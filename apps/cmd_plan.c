/* mla plan: what the RoPE-once plan decides for a model config on a target:
 * the config's shapes, the one RoPE site, and the kernel of every stage, so
 * that a wrong path (a double rotation, a target left off a fast path, as in
 * seeds 000 and 001) is visible without running anything. */
#include <stdio.h>
#include <string.h>

#include "apps/cmd.h"
#include "apps/suggest.h"

void usage_plan(FILE *out)
{
    fprintf(out,
            "usage: mla plan (--config NAME | --model DIR) [--json]\n"
            "                [--target cpu|gfx942|gfx950|sm_90|reference]\n"
            "                [--site separate|fused_cache|attention]\n"
            "                [--cache-layout normal|shuffled|fp8_scaled]\n"
            "                [--cache-dtype bf16|e4m3fn|e4m3fnuz]\n"
            "                [--q-dtype bf16|e4m3fn|e4m3fnuz]\n"
            "                [--weights bf16|fp8]\n"
            "       mla plan --list\n\n"
            "Prints the config's shapes, the RoPE site and the kernel of every prepare stage\n"
            "(mla_plan_kernel). Defaults: target cpu, the plan's own site, a NORMAL bf16 cache,\n"
            "bf16 q_cat and weights. --site forces a site (as the tests do); a site the plan\n"
            "cannot honour is refused (exit 1). --model takes the config of a checkpoint\n"
            "directory's config.json. --json prints one JSON object. --list lists the config\n"
            "presets.\n");
}

/* Index of s among the names f(0..n-1), or -1. */
static int pick(const char *s, const char *(*f)(int), int n)
{
    for (int i = 0; i < n; ++i)
        if (!strcmp(s, f(i)))
            return i;
    return -1;
}

static const char *target_at(int i) { return mla_target_name((mla_target)i); }
static const char *site_at(int i) { return mla_rope_site_name((mla_rope_site)i); }
static const char *layout_at(int i) { return mla_cache_layout_name((mla_cache_layout)i); }

/* bf16, e4m3fn / fp8_e4m3fn, e4m3fnuz / fp8_e4m3fnuz. */
static int pick_dtype(const char *s, mla_dtype *out)
{
    if (!strcmp(s, "bf16"))
        *out = MLA_DTYPE_BF16;
    else if (!strcmp(s, "e4m3fn") || !strcmp(s, "fp8_e4m3fn") || !strcmp(s, "fp8"))
        *out = MLA_DTYPE_FP8_E4M3FN;
    else if (!strcmp(s, "e4m3fnuz") || !strcmp(s, "fp8_e4m3fnuz"))
        *out = MLA_DTYPE_FP8_E4M3FNUZ;
    else
        return -1;
    return 0;
}

static void list_presets(void)
{
    printf("%-18s %6s %4s %6s %5s %5s %5s %4s  %s\n", "config", "hidden", "H", "q_lora", "L",
           "nope", "rope", "v", "indexer");
    for (int i = 0; mla_model_config_preset_name(i); ++i) {
        mla_model_config c;
        mla_model_config_preset(mla_model_config_preset_name(i), &c);
        printf("%-18s %6lld %4lld %6lld %5lld %5lld %5lld %4lld  ", c.name, (long long)c.hidden,
               (long long)c.heads, (long long)c.q_lora, (long long)c.kv_lora, (long long)c.nope,
               (long long)c.rope, (long long)c.v);
        if (c.index_heads)
            printf("%lld heads x %lld, top-k %lld\n", (long long)c.index_heads,
                   (long long)c.index_head_dim, (long long)c.index_topk);
        else
            printf("no\n");
    }
}

static void print_config(const mla_model_config *c, const mla_plan_options *o)
{
    const mla_rope_config *r = &c->rope_cfg;
    const long long H = c->heads, qk = c->nope + c->rope, D = c->kv_lora + c->rope;
    printf("config %s\n", c->name);
    printf("  hidden %lld, heads %lld, q_lora %lld, kv_lora (L) %lld, nope %lld, rope (R) %lld, "
           "v %lld, rms_eps %g, max_pos %lld\n",
           (long long)c->hidden, H, (long long)c->q_lora, (long long)c->kv_lora,
           (long long)c->nope, (long long)c->rope, (long long)c->v, (double)c->rms_eps,
           (long long)c->max_pos);
    printf("  rope: dim %d, base %g", (int)r->dim, r->base);
    if (r->factor > 1.0)
        printf(", YaRN factor %g (beta_fast %g, beta_slow %g, original %lld, mscale %g / %g)",
               r->factor, r->beta_fast, r->beta_slow, (long long)r->original_max_pos, r->mscale,
               r->mscale_all_dim);
    printf("; softmax scale %.6g\n", mla_softmax_scale(c));
    printf("  per token: x [%lld] -> ", (long long)c->hidden);
    if (c->q_lora)
        printf("q_lat [%lld] + ", (long long)c->q_lora);
    printf("kv_lat [%lld] -> q [%lld, %lld] -> q_cat [%lld, %lld]\n", D, H, qk, H, D);
    mla_cache_desc d = {o->cache_layout, o->cache_dtype, 1, 16, c->kv_lora, c->rope, 1.0f};
    int64_t bytes = 0;
    if (mla_cache_block_bytes(&d, &bytes) == MLA_OK)
        printf("  cache row: %lld values, %lld bytes per token (%s, %s)\n", D,
               (long long)(bytes / 16), mla_cache_layout_name(o->cache_layout),
               mla_dtype_name(o->cache_dtype));
    else
        printf("  cache row: %lld values; %s / %s does not take this config\n", D,
               mla_cache_layout_name(o->cache_layout), mla_dtype_name(o->cache_dtype));
    printf("  weights: ");
    if (c->q_lora)
        printf("q_a_proj [%lld, %lld], q_b_proj [%lld, %lld], ", (long long)c->q_lora,
               (long long)c->hidden, H * qk, (long long)c->q_lora);
    else
        printf("q_proj [%lld, %lld], ", H * qk, (long long)c->hidden);
    printf("kv_a_proj_with_mqa [%lld, %lld], kv_b_proj [%lld, %lld], o_proj [%lld, %lld]\n", D,
           (long long)c->hidden, H * (c->nope + c->v), (long long)c->kv_lora,
           (long long)c->hidden, H * c->v);
}

/* The value of an option that takes one, or NULL after printing why. */
static const char *value(int argc, char **argv, int *i)
{
    if (*i + 1 >= argc) {
        fprintf(stderr, "mla plan: %s needs a value\n", argv[*i]);
        return NULL;
    }
    return argv[++*i];
}

static int bad(const char *opt, const char *v)
{
    fprintf(stderr, "mla plan: %s %s is not one of the choices (see --help)\n", opt, v);
    return MLA_EXIT_USAGE;
}

/* The layer's attention form (mla_layer_form_for, default layer options)
 * for a decode step and for a prefill chunk of the rule's rows. */
static const char *form_name(mla_layer_form f)
{
    return f == MLA_LAYER_FORM_EXPANDED ? "expanded" : "absorbed";
}

static void forms(const mla_model_config *c, const mla_plan *plan, int64_t *rows,
                  mla_layer_form *decode, mla_layer_form *prefill)
{
    mla_layer_options lo;
    mla_layer_options_default(c, NULL, &lo);
    *rows = mla_layer_expanded_min_rows(c);
    *decode = mla_layer_form_for(plan, &lo, 1, 1);
    *prefill = mla_layer_form_for(plan, &lo, *rows > 0 ? *rows : INT32_MAX, 1);
}

static void print_json(const mla_model_config *c, const mla_plan_options *o, const mla_plan *plan)
{
    const mla_rope_config *r = &c->rope_cfg;
    printf("{\"config\": {\"name\": ");
    mla_app_json_string(stdout, c->name);
    printf(", \"hidden\": %lld, \"heads\": %lld, \"q_lora\": %lld, \"kv_lora\": %lld, \"nope\": "
           "%lld, \"rope\": %lld, \"v\": %lld, \"rms_eps\": %.9g, \"max_pos\": %lld, \"rope_base\": "
           "%.17g, \"yarn_factor\": %.17g, \"beta_fast\": %.17g, \"beta_slow\": %.17g, "
           "\"original_max_pos\": %lld, \"mscale\": %.17g, \"mscale_all_dim\": %.17g, "
           "\"index_heads\": %lld, \"index_head_dim\": %lld, \"index_topk\": %lld, "
           "\"softmax_scale\": %.17g},\n \"plan\": {\"target\": \"%s\", \"weights\": \"%s\", "
           "\"q_cat\": \"%s\", \"cache_layout\": \"%s\", \"cache_dtype\": \"%s\", \"rope_site\": "
           "\"%s\", \"forced\": %s, \"stages\": {",
           (long long)c->hidden, (long long)c->heads, (long long)c->q_lora, (long long)c->kv_lora,
           (long long)c->nope, (long long)c->rope, (long long)c->v, (double)c->rms_eps,
           (long long)c->max_pos, r->base, r->factor, r->beta_fast, r->beta_slow,
           (long long)r->original_max_pos, r->mscale, r->mscale_all_dim,
           (long long)c->index_heads, (long long)c->index_head_dim, (long long)c->index_topk,
           mla_softmax_scale(c), mla_target_name(o->target), mla_dtype_name(o->weight_dtype),
           mla_dtype_name(o->q_dtype), mla_cache_layout_name(o->cache_layout),
           mla_dtype_name(o->cache_dtype), mla_rope_site_name(mla_plan_rope_site(plan)),
           o->force_rope_site < 0 ? "false" : "true");
    for (int s = 0; s < MLA_STAGE_COUNT; ++s) {
        printf("%s\"%s\": ", s ? ", " : "", mla_stage_name((mla_stage)s));
        mla_app_json_string(stdout, mla_plan_kernel(plan, (mla_stage)s));
    }
    int64_t rows;
    mla_layer_form dec, pre;
    forms(c, plan, &rows, &dec, &pre);
    printf("}, \"attention_form\": {\"expanded_min_rows\": %lld, \"decode\": \"%s\", "
           "\"prefill\": \"%s\"}}}\n",
           (long long)rows, form_name(dec), form_name(pre));
}

int cmd_plan(int argc, char **argv)
{
    const char *config = NULL, *model = NULL;
    int json = 0;
    mla_plan_options o;
    mla_plan_options_default(MLA_TARGET_CPU, &o);
    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i], *v;
        int k;
        if (!strcmp(a, "--list")) {
            list_presets();
            return MLA_EXIT_OK;
        }
        if (!strcmp(a, "--json")) {
            json = 1;
            continue;
        }
        if (!(v = value(argc, argv, &i)))
            return MLA_EXIT_USAGE;
        if (!strcmp(a, "--config"))
            config = v;
        else if (!strcmp(a, "--model"))
            model = v;
        else if (!strcmp(a, "--target") && (k = pick(v, target_at, MLA_TARGET_COUNT)) >= 0)
            o.target = (mla_target)k;
        else if (!strcmp(a, "--site") && (k = pick(v, site_at, MLA_ROPE_SITE_COUNT)) >= 0)
            o.force_rope_site = k;
        else if (!strcmp(a, "--cache-layout") &&
                 (k = pick(v, layout_at, MLA_CACHE_LAYOUT_COUNT)) >= 0)
            o.cache_layout = (mla_cache_layout)k;
        else if (!strcmp(a, "--cache-dtype") && !pick_dtype(v, &o.cache_dtype))
            continue;
        else if (!strcmp(a, "--q-dtype") && !pick_dtype(v, &o.q_dtype))
            continue;
        else if (!strcmp(a, "--weights") && (!strcmp(v, "bf16") || !strcmp(v, "fp8")))
            o.weight_dtype = v[0] == 'b' ? MLA_DTYPE_BF16 : MLA_DTYPE_FP8_E4M3FN;
        else if (!strcmp(a, "--model") || !strcmp(a, "--config") || !strcmp(a, "--target") || !strcmp(a, "--site") ||
                 !strcmp(a, "--cache-layout") || !strcmp(a, "--cache-dtype") ||
                 !strcmp(a, "--q-dtype") || !strcmp(a, "--weights"))
            return bad(a, v);
        else {
            fprintf(stderr, "mla plan: unknown option '%s' (see --help)\n", a);
            return MLA_EXIT_USAGE;
        }
    }
    mla_model_config cfg;
    if (!config == !model) {
        fprintf(stderr, "mla plan: one of --config NAME (mla plan --list), --model DIR\n");
        return MLA_EXIT_USAGE;
    }
    if (model) {
        char path[4200];
        snprintf(path, sizeof path, "%s/config.json", model);
        mla_context *ctx = NULL;
        mla_hf_config hc;
        mla_context_create(MLA_BACKEND_REFERENCE, NULL, &ctx);
        const mla_status st = mla_hf_config_load(ctx, path, &hc);
        if (st != MLA_OK)
            fprintf(stderr, "mla plan: %s: %s (%s): %s\n", path, mla_status_name(st),
                    mla_context_error_param(ctx), mla_context_error_detail(ctx));
        mla_context_destroy(ctx);
        if (st != MLA_OK)
            return MLA_EXIT_FAIL;
        cfg = hc.model;
    } else if (mla_model_config_preset(config, &cfg) != MLA_OK) {
        fprintf(stderr, "mla plan: unknown config '%s'", config);
        mla_suggest_preset(stderr, config);
        fprintf(stderr, " (mla plan --list)\n");
        return MLA_EXIT_USAGE;
    }
    if (!json) {
        print_config(&cfg, &o);
        printf("plan: target %s, weights %s, q_cat %s, cache %s / %s\n",
               mla_target_name(o.target), mla_dtype_name(o.weight_dtype),
               mla_dtype_name(o.q_dtype), mla_cache_layout_name(o.cache_layout),
               mla_dtype_name(o.cache_dtype));
    }
    mla_plan *plan = NULL;
    mla_status st = mla_plan_create(&cfg, &o, &plan);
    if (st != MLA_OK) {
        fprintf(stderr, "mla plan: no plan: %s%s\n", mla_status_name(st),
                st == MLA_ERR_UNSUPPORTED ? " (the forced RoPE site is not available for these "
                                            "options)"
                                          : "");
        return MLA_EXIT_FAIL;
    }
    if (json) {
        print_json(&cfg, &o, plan);
        mla_plan_destroy(plan);
        return MLA_EXIT_OK;
    }
    const mla_rope_site site = mla_plan_rope_site(plan);
    printf("rope site: %s (%s); RoPE happens there and nowhere else\n", mla_rope_site_name(site),
           o.force_rope_site < 0 ? "the plan's choice" : "forced");
    printf("stages:\n");
    for (int s = 0; s < MLA_STAGE_COUNT; ++s)
        printf("  %-12s %s\n", mla_stage_name((mla_stage)s),
               mla_plan_kernel(plan, (mla_stage)s));
    int64_t rows;
    mla_layer_form dec, pre;
    forms(&cfg, plan, &rows, &dec, &pre);
    printf("attention form (the layer's AUTO rule): decode / MTP steps %s; prefill chunks of >= "
           "%lld new tokens per sequence %s",
           form_name(dec), (long long)rows, form_name(pre));
    if (pre == MLA_LAYER_FORM_ABSORBED)
        printf(" (%s)", cfg.index_heads > 0 && cfg.q_lora > 0 ? "sparse: the indexer's top-k"
                        : site == MLA_ROPE_SITE_ATTENTION ? "RoPE inside the absorbed attention"
                        : rows < 0                        ? "it never saves operations"
                                                          : "q_cat is fp8");
    printf("\n");
    mla_plan_destroy(plan);
    return MLA_EXIT_OK;
}
