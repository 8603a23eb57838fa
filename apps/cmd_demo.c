/* mla demo: one MLA layer end to end on the AUTO backend: seeded weights
 * through the safetensors generator and loader, a synthetic cache history,
 * a chunked prefill, then decode steps with a progress line each; time per
 * step, tokens/s, bandwidth and FLOP rate against ceilings measured in the
 * same run, and one decode step checked against the float64 layer
 * reference (conformance/layer_ref64.h) with its error bound. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "apps/demo.h"
#include "bench/bench_util.h"
#include "apps/suggest.h"
#include "bench/ceilings.h"

void usage_demo(FILE *out)
{
    fprintf(out,
            "usage: mla demo [--config NAME] [--backend auto|cpu|hip|reference]\n"
            "                [--model DIR | --weights FILE] [--layer N] [--tp RANK/WORLD]\n"
            "                [--prefill N] [--steps N] [--batch B] [--context C] [--fp8]\n"
            "                [--seed S] [--no-ceilings] [--json]\n\n"
            "Runs one MLA attention layer (mla_layer_forward): B sequences with C tokens of\n"
            "synthetic cache history each, a prefill of N tokens per sequence, then decode\n"
            "steps of one token per sequence, a progress line per step. Weights: layer N\n"
            "(default 0) of a Hugging Face checkpoint directory (--model: config.json and\n"
            "its shards, docs/CHECKPOINTS.md), of a safetensors FILE of --config, or seeded\n"
            "ones generated as a temporary checkpoint and loaded back (--fp8: e4m3fn 128x128\n"
            "blocks; an fp8 kv_b_proj gets one scale per tensor at load). --tp loads rank\n"
            "RANK's heads of WORLD: y is that rank's partial o_proj output. Prints time\n"
            "per step, tokens/s, bandwidth and FLOP rate against the copy and matmul ceilings\n"
            "measured in the same run, and the first decode step's error against the float64\n"
            "layer reference with its bound. Defaults: DeepSeek-V3 on a GPU (B 16, C 4096,\n"
            "N 64, 16 steps), DeepSeek-V2-Lite on the CPU (B 1, C 256, N 16, 8 steps).\n"
            "--json prints one JSON object instead. Exit 0 when every step ran and the check\n"
            "is within its bound.\n");
}

static int parse(int argc, char **argv, demo_args *a)
{
    memset(a, 0, sizeof *a);
    a->backend = MLA_BACKEND_AUTO;
    a->tp_world = 1;
    for (int i = 1; i < argc; ++i) {
        const char *k = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int64_t *num = !strcmp(k, "--prefill")   ? &a->prefill
                       : !strcmp(k, "--steps")   ? &a->steps
                       : !strcmp(k, "--batch")   ? &a->batch
                       : !strcmp(k, "--context") ? &a->context
                       : !strcmp(k, "--seed")    ? &a->seed
                       : !strcmp(k, "--layer")   ? &a->layer
                                                 : NULL;
        if (!strcmp(k, "--fp8")) {
            a->fp8 = 1;
        } else if (!strcmp(k, "--json")) {
            a->json = 1;
        } else if (!strcmp(k, "--no-ceilings")) {
            a->no_ceilings = 1;
        } else if (!strcmp(k, "--help") || !strcmp(k, "-h")) {
            usage_demo(stdout);
            exit(MLA_EXIT_OK);
        } else if (!v) {
            fprintf(stderr, "mla demo: %s needs a value (or is unknown)\n", k);
            return -1;
        } else if (num) {
            if (mla_app_parse_i64(v, num) || *num > 1000000) {
                fprintf(stderr, "mla demo: bad %s '%s'\n", k, v);
                return -1;
            }
            if (num != &a->seed && num != &a->layer)
                a->set[num == &a->prefill ? 0
                       : num == &a->steps ? 1
                       : num == &a->batch ? 2
                                          : 3] = 1;
            ++i;
        } else if (!strcmp(k, "--config")) {
            a->config = v, ++i;
        } else if (!strcmp(k, "--weights")) {
            a->weights = v, ++i;
        } else if (!strcmp(k, "--model")) {
            a->model = v, ++i;
        } else if (!strcmp(k, "--tp")) {
            int64_t r, w;
            char *end;
            if (mla_app_parse_i64_prefix(v, &r, &end) || *end != '/' ||
                mla_app_parse_i64(end + 1, &w) || w < 1 || w > 4096 || r >= w) {
                fprintf(stderr, "mla demo: --tp wants RANK/WORLD, 0 <= RANK < WORLD\n");
                return -1;
            }
            a->tp_rank = (int32_t)r, a->tp_world = (int32_t)w, ++i;
        } else if (!strcmp(k, "--backend")) {
            if (mla_app_parse_backend(v, &a->backend)) {
                fprintf(stderr, "mla demo: unknown backend '%s'\n", v);
                return -1;
            }
            ++i;
        } else {
            fprintf(stderr, "mla demo: unknown option '%s'\n", k);
            return -1;
        }
    }
    if (a->model && a->weights) {
        fprintf(stderr, "mla demo: --model and --weights exclude each other\n");
        return -1;
    }
    return 0;
}

/* What fits the machine: DeepSeek-V3 sizes on a GPU, V2-Lite on a CPU. */
static void pick_defaults(demo *d)
{
    const int gpu = mla_context_backend(d->ctx) == MLA_BACKEND_HIP;
    demo_args *a = &d->a;
    if (!a->config && !a->model)
        a->config = gpu ? "DeepSeek-V3" : "DeepSeek-V2-Lite";
    const int64_t defs[2][4] = {{16, 8, 1, 256}, {64, 16, 16, 4096}};
    int64_t *v[4] = {&a->prefill, &a->steps, &a->batch, &a->context};
    for (int i = 0; i < 4; ++i)
        if (!a->set[i])
            *v[i] = defs[gpu][i];
    if (a->batch < 1)
        a->batch = 1;
    if (a->prefill < 1)
        a->prefill = 1;
}

typedef struct step_in {
    int64_t T;
    uint16_t *x; /* [T, hidden] bf16 */
    int64_t *pos, *slot;
    int32_t *cu, *ctxl; /* cu NULL: one token per sequence */
} step_in;

typedef struct step_out {
    double seconds;
    float *y;      /* host copy of y [T, hidden] when asked for */
    int32_t *topk; /* sparse: host copy of row 0's top-k when asked for */
} step_out;

static int run_step(demo *d, const step_in *in, mla_layer_plan **lp, int want, step_out *out)
{
    const mla_model_config *c = &d->cfg;
    const int64_t T = in->T, B = d->a.batch;
    mla_status st = MLA_OK;
    mla_tensor x = demo_dev_tensor(d, MLA_DTYPE_BF16, 2, (int64_t[]){T, c->hidden}, in->x, &st);
    mla_tensor y = demo_dev_tensor(d, MLA_DTYPE_F32, 2, (int64_t[]){T, c->hidden}, NULL, &st);
    mla_tensor pos = demo_dev_tensor(d, MLA_DTYPE_I64, 1, &T, in->pos, &st);
    mla_tensor slot = demo_dev_tensor(d, MLA_DTYPE_I64, 1, &T, in->slot, &st);
    mla_tensor cl = demo_dev_tensor(d, MLA_DTYPE_I32, 1, &B, in->ctxl, &st);
    mla_tensor cu = demo_dev_tensor(d, MLA_DTYPE_I32, 1, (int64_t[]){B + 1}, in->cu, &st);
    mla_layer_batch b = {&pos, &slot, &d->bt_t, &cl, in->cu ? &cu : NULL, 1};
    mla_layer_buffers bufs = {&d->cos, &d->sin, &d->cache, d->sparse ? &d->icache : NULL, &d->ws};
    if (st == MLA_OK)
        st = *lp ? mla_layer_plan_update(d->ctx, *lp, &b)
                 : mla_layer_plan_create(d->ctx, d->plan, &d->cd, &d->opt, &b, d->max_ctx, &bufs,
                                         lp);
    const double t0 = bench_now();
    if (st == MLA_OK)
        st = mla_layer_forward(d->ctx, *lp, &d->w, &x, &y);
    if (st == MLA_OK)
        st = mla_context_synchronize(d->ctx);
    out->seconds = bench_now() - t0;
    if (st == MLA_OK && want) {
        out->y = malloc((size_t)(T * c->hidden) * 4);
        st = mla_memcpy(d->ctx, out->y, y.data, (size_t)(T * c->hidden) * 4,
                        MLA_COPY_CONTEXT_TO_HOST);
        mla_tensor tk;
        if (st == MLA_OK && mla_layer_plan_sparse(*lp) &&
            (st = mla_layer_plan_topk(*lp, &tk)) == MLA_OK) {
            out->topk = malloc((size_t)c->index_topk * 4);
            st = mla_memcpy(d->ctx, out->topk, tk.data, (size_t)c->index_topk * 4,
                            MLA_COPY_CONTEXT_TO_HOST);
        }
    }
    mla_tensor all[] = {x, y, pos, slot, cl, cu};
    for (int i = 0; i < 6; ++i)
        demo_free_tensor(d, &all[i]);
    DTRY(st, "layer step");
    return MLA_EXIT_OK;
}

/* Bytes a decode step must move at least (every weight once, every cached
 * row it attends to once) and the FLOPs it does, for the ceilings. */
static void step_cost(const demo *d, const int32_t *ctxl, double *bytes, double *flops)
{
    const mla_model_config *c = &d->cfg;
    const mla_layer_weights *w = &d->w.base;
    const mla_weight *ws[] = {&w->q_a_proj, &w->q_b_proj, &w->kv_a_proj_with_mqa, &w->kv_b_proj,
                              &w->o_proj};
    double wb = 0;
    for (int i = 0; i < 5; ++i)
        if (ws[i]->w.data) {
            wb += (double)mla_tensor_numel(&ws[i]->w) * (double)mla_dtype_size(ws[i]->w.dtype);
            if (ws[i]->scale.data)
                wb += (double)mla_tensor_numel(&ws[i]->scale) * 4.0;
        }
    const double H = (double)c->heads, L = (double)c->kv_lora, R = (double)c->rope;
    const double qin = c->q_lora ? (double)c->q_lora : (double)c->hidden;
    const double per_tok = 2.0 * ((double)c->hidden * ((double)c->q_lora + L + R) +
                                  qin * H * ((double)c->nope + R) + H * (double)c->nope * L +
                                  H * L * (double)c->v + H * (double)c->v * (double)c->hidden);
    double keys = 0, fl = 0;
    for (int64_t s = 0; s < d->a.batch; ++s) {
        const double k = d->sparse && ctxl[s] > c->index_topk ? (double)c->index_topk : ctxl[s];
        keys += k;
        fl += per_tok + 2.0 * H * k * (L + R) + 2.0 * H * k * L;
        if (d->sparse) /* the indexer scores every key */
            fl += 2.0 * (double)c->index_heads * (double)c->index_head_dim * ctxl[s];
    }
    *bytes = wb + keys * (L + R) * 2.0;
    *flops = fl;
}

/* The first decode step of sequence 0 against the float64 layer reference
 * started from the library's own cache (so only this step's arithmetic is
 * measured): max abs / rel error next to the bound, 6 propagated standard
 * deviations per element. Returns 0 within the bound. */
static int check(demo *d, const uint8_t *cache_before, const step_in *in, const step_out *out)
{
    const mla_model_config *c = &d->cfg;
    demo_ref r;
    char err[256];
    const double t0 = bench_now();
    if (demo_ref_from_weights(d->ctx, &d->w, d->hcos, d->hsin, &r, err, sizeof err) != 0) {
        demo_say(d, "check: not run (%s)\n", err);
        return 0;
    }
    ref64_cache rc;
    ref64_cache_init(&rc, c, d->NB * BS);
    ref64_cache_from_normal(&rc, c, cache_before, MLA_DTYPE_BF16, 1.0f);
    const int64_t H = c->hidden;
    double *x = malloc((size_t)H * 8), *y = malloc((size_t)H * 8), *sd = malloc((size_t)H * 8);
    for (int64_t i = 0; i < H; ++i) /* the step's x, as the library got it */
        x[i] = mla_bf16_to_f32(in->x[i]);
    const int32_t cu[2] = {0, 1};
    ref64_step(&r.m, &rc, 1, x, in->pos, in->slot, 1, cu, in->ctxl, d->bt, d->bps, BS, out->topk,
               c->index_topk, y, sd);
    double max_abs = 0, max_rel = 0, worst = 0, bound_at_worst = 0, ymax = 0;
    for (int64_t i = 0; i < H; ++i) {
        const double e = fabs(out->y[i] - y[i]), b = LAYER_REF64_LAMBDA * sd[i];
        max_abs = e > max_abs ? e : max_abs;
        ymax = fabs(y[i]) > ymax ? fabs(y[i]) : ymax;
        if (e / b > worst)
            worst = e / b, bound_at_worst = b;
    }
    max_rel = max_abs / (ymax > 0 ? ymax : 1);
    d->res.checked = 1;
    d->res.max_abs = max_abs, d->res.max_rel = max_rel, d->res.worst = worst;
    demo_say(d, "check: first decode step, sequence 0, against the float64 layer reference (%.1f s):\n"
           "       max |err| %.3g, max |err| / max |y| %.3g; bound 6 sd per element (propagated\n"
           "       from the bf16 roundings), worst element at %.2f of its bound (%.3g): %s\n",
           bench_now() - t0, max_abs, max_rel, worst, bound_at_worst,
           worst <= 1.0 ? "within" : "OUTSIDE");
    free(x), free(y), free(sd);
    ref64_cache_free(&rc);
    demo_ref_free(&r);
    return worst <= 1.0 ? 0 : -1;
}

static void fill_step(demo *d, step_in *in, int64_t T, int prefill)
{
    const int64_t B = d->a.batch, N = d->a.prefill;
    in->T = T;
    bench_fill_host(&d->rng, in->x, MLA_DTYPE_BF16, T * d->cfg.hidden, BENCH_FILL_ACT);
    for (int64_t s = 0; s < B; ++s) {
        const int64_t n = prefill ? N : 1;
        if (prefill)
            in->cu[s + 1] = (int32_t)((s + 1) * N);
        for (int64_t j = 0; j < n; ++j) {
            const int64_t r = prefill ? s * N + j : s, p = in->ctxl[s] + j;
            in->pos[r] = p;
            in->slot[r] = (int64_t)d->bt[s * d->bps + p / BS] * BS + p % BS;
        }
        in->ctxl[s] += (int32_t)n;
    }
}

static void print_ceilings(const demo *d, const bench_ceilings *cl)
{
    demo_say(d, "ceilings (this run): copy %.1f GB/s (%s); matmul %.1f GFLOP/s (%s)\n", cl->copy_gbs,
           cl->copy_how, cl->matmul_gflops, cl->matmul_how);
}

static int run(demo *d)
{
    const int64_t B = d->a.batch, N = d->a.prefill, Tmax = B * N > B ? B * N : B;
    int rc = demo_setup_weights(d);
    if (rc != MLA_EXIT_OK)
        return rc;
    /* the table's rows do not depend on its length: only what the run reaches */
    const int64_t reach = d->a.context + d->a.prefill + d->a.steps;
    d->cfg.max_pos = reach < d->cfg.max_pos ? (reach > 4096 ? reach : 4096) : d->cfg.max_pos;
    demo_say(d, "mla demo: %s on %s (%s)%s%s\n", d->cfg.name,
             mla_backend_name(mla_context_backend(d->ctx)), mla_context_device_name(d->ctx),
             *mla_context_fallback_reason(d->ctx) ? "; AUTO: " : "",
             mla_context_fallback_reason(d->ctx));
    rc = demo_setup_cache(d);
    if (rc == MLA_EXIT_OK)
        rc = demo_history(d);
    if (rc != MLA_EXIT_OK)
        return rc;
    bench_ceilings cl;
    memset(&cl, 0, sizeof cl);
    if (!d->a.no_ceilings) {
        bench_ceiling_options co;
        bench_ceiling_options_default(&co);
        co.reps = 3;
        co.max_call_s = 0.25;
        bench_measure_ceilings(d->ctx, &co, &cl, NULL);
        print_ceilings(d, &cl);
    }
    step_in in = {0,
                  malloc((size_t)(Tmax * d->cfg.hidden) * 2),
                  malloc((size_t)Tmax * 8),
                  malloc((size_t)Tmax * 8),
                  calloc((size_t)B + 1, 4),
                  calloc((size_t)B, 4)};
    for (int64_t s = 0; s < B; ++s)
        in.ctxl[s] = (int32_t)d->a.context;
    mla_layer_plan *pre = NULL, *dec = NULL;
    step_out o = {0};
    fill_step(d, &in, B * N, 1);
    rc = run_step(d, &in, &pre, 0, &o);
    d->res.prefill_s = o.seconds;
    if (rc == MLA_EXIT_OK)
        demo_say(
            d, "prefill: %lld sequences x %lld tokens after %lld of history: %.2f ms, %.0f tokens/s\n",
            (long long)B, (long long)N, (long long)d->a.context, o.seconds * 1e3,
            (double)(B * N) / o.seconds);
    double *times = calloc((size_t)d->a.steps + 1, 8), bytes = 0, flops = 0;
    int checked = 0, check_rc = 0;
    int32_t *cu_keep = in.cu;
    in.cu = NULL;
    for (int64_t i = 0; rc == MLA_EXIT_OK && i < d->a.steps; ++i) {
        fill_step(d, &in, B, 0);
        uint8_t *before = NULL;
        if (i == 0) { /* the checked step: the cache as it was before it */
            before = malloc((size_t)mla_tensor_numel(&d->cache));
            mla_memcpy(d->ctx, before, d->cache.data, (size_t)mla_tensor_numel(&d->cache),
                       MLA_COPY_CONTEXT_TO_HOST);
        }
        step_out so = {0};
        rc = run_step(d, &in, &dec, i == 0, &so);
        if (rc != MLA_EXIT_OK) {
            free(before);
            break;
        }
        step_cost(d, in.ctxl, &bytes, &flops);
        times[i] = so.seconds;
        const double gbs = bytes / so.seconds / 1e9, gfs = flops / so.seconds / 1e9;
        demo_say(d, "step %3lld/%lld: context %6d  %8.3f ms  %9.1f tokens/s  %7.1f GB/s",
                 (long long)i + 1, (long long)d->a.steps, in.ctxl[0], so.seconds * 1e3,
                 (double)B / so.seconds, gbs);
        if (cl.copy_gbs > 0)
            demo_say(d, " (%4.1f%% of copy)", 100.0 * gbs / cl.copy_gbs);
        demo_say(d, "  %8.1f GFLOP/s", gfs);
        if (cl.matmul_gflops > 0)
            demo_say(d, " (%4.1f%% of matmul)", 100.0 * gfs / cl.matmul_gflops);
        demo_say(d, "\n");
        if (i == 0) {
            check_rc = check(d, before, &in, &so);
            checked = 1;
        }
        free(before), free(so.y), free(so.topk);
    }
    if (rc == MLA_EXIT_OK && d->a.steps > 0) {
        const double med = bench_median(times, (int)d->a.steps);
        d->res.decode_median_s = med, d->res.bytes = bytes, d->res.flops = flops;
        demo_say(
            d,
            "decode: median step %.3f ms, %.1f tokens/s (batch %lld); last step moved >= %.1f MB "
            "and did %.2f GFLOP\n",
            med * 1e3, (double)B / med, (long long)B, bytes / 1e6, flops / 1e9);
    }
    in.cu = cu_keep;
    free(in.x), free(in.pos), free(in.slot), free(in.cu), free(in.ctxl), free(times);
    mla_layer_plan_destroy(pre);
    mla_layer_plan_destroy(dec);
    if (rc == MLA_EXIT_OK && checked && check_rc != 0)
        rc = MLA_EXIT_FAIL;
    return rc;
}

/* The run as one JSON object (--json). */
static void print_json(const demo *d, int rc, double seconds)
{
    const demo_result *r = &d->res;
    printf("{\"config\": ");
    mla_app_json_string(stdout, d->cfg.name);
    printf(", \"backend\": \"%s\", \"device\": ", mla_backend_name(mla_context_backend(d->ctx)));
    mla_app_json_string(stdout, mla_context_device_name(d->ctx));
    printf(", \"layer\": %lld, \"tp\": [%d, %d], \"heads\": %lld, \"batch\": %lld, \"context\": %lld, "
           "\"prefill\": %lld, \"steps\": %lld,\n \"prefill_ms\": %.6g, \"decode_median_ms\": %.6g, "
           "\"decode_tokens_per_s\": %.6g, \"decode_bytes\": %.6g, \"decode_flops\": %.6g,\n "
           "\"check\": ",
           (long long)d->a.layer, (int)d->a.tp_rank, (int)d->a.tp_world, (long long)d->cfg.heads,
           (long long)d->a.batch, (long long)d->a.context, (long long)d->a.prefill,
           (long long)d->a.steps, r->prefill_s * 1e3, r->decode_median_s * 1e3,
           r->decode_median_s > 0 ? (double)d->a.batch / r->decode_median_s : 0.0, r->bytes,
           r->flops);
    if (r->checked)
        printf("{\"max_abs\": %.6g, \"max_rel\": %.6g, \"worst_of_bound\": %.6g, \"within\": %s}",
               r->max_abs, r->max_rel, r->worst, r->worst <= 1.0 ? "true" : "false");
    else
        printf("null");
    printf(", \"ok\": %s, \"seconds\": %.3f}\n", rc == MLA_EXIT_OK ? "true" : "false", seconds);
}

int cmd_demo(int argc, char **argv)
{
    demo d;
    memset(&d, 0, sizeof d);
    if (parse(argc, argv, &d.a))
        return MLA_EXIT_USAGE;
    mla_status st = mla_context_create(d.a.backend, NULL, &d.ctx);
    if (st != MLA_OK) {
        fprintf(stderr, "mla demo: no %s context: %s\n", mla_backend_name(d.a.backend),
                mla_status_name(st));
        return MLA_EXIT_FAIL;
    }
    pick_defaults(&d);
    if (!d.a.model && mla_model_config_preset(d.a.config, &d.cfg) != MLA_OK) {
        fprintf(stderr, "mla demo: unknown config '%s'", d.a.config);
        mla_suggest_preset(stderr, d.a.config);
        fprintf(stderr, " (`mla plan --list`)\n");
        mla_context_destroy(d.ctx);
        return MLA_EXIT_USAGE;
    }
    bench_rng_seed(&d.rng, (uint64_t)d.a.seed + 1);
    const double t0 = bench_now();
    int rc = run(&d);
    if (d.a.json)
        print_json(&d, rc, bench_now() - t0);
    demo_cleanup(&d);
    if (!d.a.json)
        printf("mla demo: %s in %.1f s\n", rc == MLA_EXIT_OK ? "done" : "FAILED",
               bench_now() - t0);
    return rc;
}
