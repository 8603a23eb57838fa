/* mla demo: the weights (generated or given, loaded through the layer
 * loader), the paged caches with their synthetic history, the RoPE table,
 * the plan and the workspace; the teardown. */
#define _POSIX_C_SOURCE 200809L
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "apps/demo.h"
#include "apps/progress.h"
#include "bench/bench_util.h"


int demo_fail(demo *d, mla_status st, const char *what)
{
    fprintf(stderr, "mla demo: %s: %s", what, mla_status_name(st));
    if (d->ctx)
        bench_print_error(stderr, d->ctx);
    fprintf(stderr, "\n");
    return MLA_EXIT_FAIL;
}

void demo_say(const demo *d, const char *fmt, ...)
{
    if (d->a.json)
        return;
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    fflush(stdout);
}

/* Seeded weights of layer --layer as a checkpoint directory in TMPDIR (the
 * same path as a published one), with progress on a terminal. */
static int generate(demo *d)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(d->path, sizeof d->path, "%s/mla-demo-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(d->path)) {
        fprintf(stderr, "mla demo: cannot create a temporary directory in %s\n", d->path);
        return MLA_EXIT_FAIL;
    }
    d->generated = 1;
    const mla_weight_format f = d->a.fp8 ? MLA_WEIGHT_FP8_BLOCK : MLA_WEIGHT_BF16;
    /* kv_b_proj too: an fp8 checkpoint's blocks, converted at load to one
     * scale per tensor (the absorb's per-head views need that) */
    const mla_layer_weight_formats fm = {f, f, f, f, f, 0, 0, 0};
    mla_generate_options o;
    mla_generate_options_default(&o);
    o.first = d->a.layer;
    o.seed = (uint64_t)d->a.seed;
    o.formats = &fm;
    mla_progress pr;
    mla_progress_begin(&pr, "weights: generating");
    o.progress = mla_progress_cb;
    o.progress_user = &pr;
    const double t0 = bench_now();
    mla_status st = mla_checkpoint_generate(d->ctx, d->path, &d->cfg, &o);
    mla_progress_end(&pr);
    DTRY(st, "generating the weights");
    demo_say(d, "weights: seeded (seed %lld, %s) -> %s, %.2f s\n", (long long)d->a.seed,
             d->a.fp8 ? "fp8 128x128 blocks" : "bf16", d->path, bench_now() - t0);
    return MLA_EXIT_OK;
}

int demo_setup_weights(demo *d)
{
    if (!d->a.model && !d->a.weights)
        OP_TRY(generate(d));
    else
        snprintf(d->path, sizeof d->path, "%s", d->a.model ? d->a.model : d->a.weights);
    mla_layer_load_options lo;
    mla_layer_load_options_default(&lo);
    lo.kv_b_fp8 = MLA_KV_B_FP8_TO_TENSOR;
    lo.rank = d->a.tp_rank;
    lo.world_size = d->a.tp_world;
    const double t0 = bench_now();
    mla_status st;
    if (d->a.weights) { /* one safetensors file of the --config preset */
        mla_safetensors *f = NULL;
        DTRY(mla_safetensors_open(d->ctx, d->path, &f), d->path);
        st = mla_layer_weights_load(d->ctx, f, &d->cfg, d->a.layer, &lo, &d->w);
        mla_safetensors_close(f);
    } else { /* a checkpoint directory: its config.json */
        mla_checkpoint *ck = NULL;
        DTRY(mla_checkpoint_open(d->ctx, d->path, &ck), d->path);
        st = mla_layer_weights_load_checkpoint(d->ctx, ck, d->a.layer, &lo, &d->w);
        mla_checkpoint_close(ck);
    }
    if (st != MLA_OK)
        return demo_fail(d, st, "loading the layer");
    char name[sizeof d->cfg.name]; /* the preset's, or the checkpoint directory's */
    memcpy(name, d->a.model ? d->w.config.name : d->cfg.name, sizeof name);
    d->cfg = d->w.config; /* the rank's heads */
    memcpy(d->cfg.name, name, sizeof name);
    demo_say(d, "weights: layer %lld, rank %d of %d (%lld of the heads): %.1f MiB into %s memory "
                "in %.2f s\n",
             (long long)d->a.layer, (int)d->w.tp_rank, (int)d->w.tp_world_size,
             (long long)d->cfg.heads, (double)d->w.storage_bytes / 1048576.0,
             mla_memory_name(mla_context_memory(d->ctx)), bench_now() - t0);
    return MLA_EXIT_OK;
}

mla_tensor demo_dev_tensor(demo *d, mla_dtype dt, int32_t ndim, const int64_t *shape,
                           const void *host, mla_status *st)
{
    mla_tensor t;
    mla_tensor_init(&t, NULL, dt, mla_context_memory(d->ctx), ndim, shape);
    size_t b = (size_t)mla_tensor_numel(&t) * mla_dtype_size(dt);
    void *p = NULL;
    if (*st == MLA_OK)
        *st = mla_malloc(d->ctx, b ? b : 1, &p);
    if (*st == MLA_OK && host)
        *st = mla_memcpy(d->ctx, p, host, b, MLA_COPY_HOST_TO_CONTEXT);
    else if (*st == MLA_OK)
        *st = mla_memset(d->ctx, p, 0, b ? b : 1);
    t.data = p;
    return t;
}

void demo_free_tensor(demo *d, mla_tensor *t)
{
    if (t->data)
        mla_free(d->ctx, t->data);
    t->data = NULL;
}

/* Random bf16 rows [n, cols] in context memory, |x| in [2^-3, 2). */
mla_tensor demo_random_rows(demo *d, int64_t n, int64_t cols, mla_status *st)
{
    uint16_t *h = malloc((size_t)(n * cols) * 2);
    bench_fill_host(&d->rng, h, MLA_DTYPE_BF16, n * cols, BENCH_FILL_ACT);
    mla_tensor t = demo_dev_tensor(d, MLA_DTYPE_BF16, 2, (int64_t[]){n, cols}, h, st);
    free(h);
    return t;
}

int demo_setup_cache(demo *d)
{
    const mla_model_config *c = &d->cfg;
    const int64_t B = d->a.batch;
    mla_status st = MLA_OK;
    d->max_ctx = d->a.context + d->a.prefill + d->a.steps;
    d->bps = (d->max_ctx + BS - 1) / BS;
    d->NB = B * d->bps;
    d->bt = malloc((size_t)(B * d->bps) * 4);
    for (int64_t i = 0; i < B * d->bps; ++i)
        d->bt[i] = (int32_t)i;
    d->bt_t = demo_dev_tensor(d, MLA_DTYPE_I32, 2, (int64_t[]){B, d->bps}, d->bt, &st);
    d->cd =
        (mla_cache_desc){MLA_CACHE_NORMAL, MLA_DTYPE_BF16, d->NB, BS, c->kv_lora, c->rope, 1.0f};
    int64_t bb = 0;
    DTRY(mla_cache_block_bytes(&d->cd, &bb), "cache");
    d->cache = demo_dev_tensor(d, MLA_DTYPE_U8, 2, (int64_t[]){d->NB, bb}, NULL, &st);
    mla_layer_options_default(c, &d->cd, &d->opt);
    d->sparse = c->index_heads > 0 && c->q_lora > 0;
    if (d->sparse) {
        DTRY(mla_indexer_cache_block_bytes(&d->opt.index_cache, &bb), "indexer cache");
        d->icache = demo_dev_tensor(d, MLA_DTYPE_U8, 2, (int64_t[]){d->NB, bb}, NULL, &st);
    }
    const int64_t P = d->cfg.max_pos, half = c->rope / 2;
    d->hcos = malloc((size_t)(P * half) * 4), d->hsin = malloc((size_t)(P * half) * 4);
    if (st == MLA_OK)
        st = mla_rope_table_build(&c->rope_cfg, P, d->hcos, d->hsin);
    d->cos = demo_dev_tensor(d, MLA_DTYPE_F32, 2, (int64_t[]){P, half}, d->hcos, &st);
    d->sin = demo_dev_tensor(d, MLA_DTYPE_F32, 2, (int64_t[]){P, half}, d->hsin, &st);
    DTRY(st, "allocating the cache");
    mla_plan_options po;
    mla_plan_options_default(mla_context_target(d->ctx), &po);
    po.weight_dtype = d->w.base.o_proj.w.dtype;
    DTRY(mla_plan_create(c, &po, &d->plan), "plan");
    int64_t w0 = 0, w1 = 0;
    DTRY(mla_layer_workspace_bytes(d->ctx, d->plan, &d->opt, B * d->a.prefill, B, d->max_ctx, &w0),
         "workspace");
    DTRY(mla_layer_workspace_bytes(d->ctx, d->plan, &d->opt, B, B, d->max_ctx, &w1), "workspace");
    d->ws = demo_dev_tensor(d, MLA_DTYPE_U8, 1, (int64_t[]){w0 > w1 ? w0 : w1}, NULL, &st);
    DTRY(st, "allocating the workspace");
    demo_say(d, "cache: %lld blocks of %d tokens (%.1f MiB), workspace %.1f MiB, RoPE at %s\n",
           (long long)d->NB, BS, (double)(d->NB * bb) / 1048576.0,
           (double)(w0 > w1 ? w0 : w1) / 1048576.0,
           mla_rope_site_name(mla_plan_rope_site(d->plan)));
    return MLA_EXIT_OK;
}

/* The synthetic history: C random latent rows per sequence (and indexer
 * keys), written straight to the cache in chunks. */
int demo_history(demo *d)
{
    const mla_model_config *c = &d->cfg;
    const int64_t C = d->a.context, chunk = 4096;
    for (int64_t s = 0; s < d->a.batch; ++s)
        for (int64_t t0 = 0; t0 < C; t0 += chunk) {
            const int64_t n = C - t0 < chunk ? C - t0 : chunk;
            mla_status st = MLA_OK;
            int64_t *sl = malloc((size_t)n * 8);
            for (int64_t i = 0; i < n; ++i)
                sl[i] = (int64_t)d->bt[s * d->bps + (t0 + i) / BS] * BS + (t0 + i) % BS;
            mla_tensor slots = demo_dev_tensor(d, MLA_DTYPE_I64, 1, &n, sl, &st);
            mla_tensor kn = demo_random_rows(d, n, c->kv_lora, &st);
            mla_tensor kp = demo_random_rows(d, n, c->rope, &st);
            if (st == MLA_OK)
                st = mla_cache_write(d->ctx, &d->cd, &d->cache, &kn, &kp, &slots);
            mla_tensor ki = {0};
            if (d->sparse) {
                ki = demo_random_rows(d, n, c->index_head_dim, &st);
                if (st == MLA_OK)
                    st = mla_indexer_k_cache_write(d->ctx, &d->opt.index_cache, &d->icache, &ki,
                                                   &slots);
            }
            demo_free_tensor(d, &slots), demo_free_tensor(d, &kn), demo_free_tensor(d, &kp),
                demo_free_tensor(d, &ki);
            free(sl);
            DTRY(st, "writing the cache history");
        }
    return MLA_EXIT_OK;
}

void demo_cleanup(demo *d)
{
    mla_tensor *all[] = {&d->bt_t, &d->cos, &d->sin, &d->cache, &d->icache, &d->ws};
    for (int i = 0; i < 6; ++i)
        demo_free_tensor(d, all[i]);
    if (d->w.storage)
        mla_layer_weights_free(d->ctx, &d->w);
    mla_plan_destroy(d->plan);
    if (d->generated) { /* the temporary checkpoint */
        static const char *const files[] = {"config.json", "model.safetensors"};
        char p[600];
        for (int i = 0; i < 2; ++i) {
            snprintf(p, sizeof p, "%s/%s", d->path, files[i]);
            unlink(p);
        }
        rmdir(d->path);
    }
    free(d->bt), free(d->hcos), free(d->hsin);
    mla_context_destroy(d->ctx);
}
