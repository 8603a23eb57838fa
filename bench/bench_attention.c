/* The attention benchmarks' shared part (bench_attention.h). */
#define _POSIX_C_SOURCE 200809L

#include "bench/bench_attention.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const char *const ba_cache_names[BA_CACHES] = {"bf16", "fp8", "fp8_scaled"};

int64_t ba_token_bytes(ba_cache c)
{
    return c == BA_BF16  ? 2 * (BA_L + BA_R)
           : c == BA_FP8 ? BA_L + BA_R
                         : BA_L + BA_L / 32 + 2 * BA_R;
}

static mla_cache_desc cache_desc(ba_cache c, int64_t num_blocks)
{
    mla_cache_desc d;
    memset(&d, 0, sizeof d);
    d.layout = c == BA_FP8_SCALED ? MLA_CACHE_FP8_SCALED : MLA_CACHE_NORMAL;
    d.dtype = c == BA_BF16 ? MLA_DTYPE_BF16 : MLA_DTYPE_FP8_E4M3FN;
    d.num_blocks = num_blocks;
    d.block_size = BA_BLOCK;
    d.kv_lora = BA_L;
    d.rope = BA_R;
    d.k_scale = c == BA_FP8 ? 1.0f / 64.0f : 1.0f;
    return d;
}

int ba_input_sets(const ba_shape *w, int64_t rotate_bytes)
{
    const int64_t nb_seq = (w->C + BA_BLOCK - 1) / BA_BLOCK;
    const int64_t set_bytes = w->B * nb_seq * BA_BLOCK * ba_token_bytes(w->cache);
    const int64_t n = (rotate_bytes + set_bytes - 1) / set_bytes;
    return (int)(n < 1 ? 1 : n > BA_MAX_INST ? BA_MAX_INST : n);
}

/* An I32 tensor in context memory from host values. */
static mla_status ints(mla_context *ctx, const int32_t *h, int32_t ndim, const int64_t *shape,
                       void **mem, mla_tensor *t)
{
    int64_t n = 1;
    for (int32_t d = 0; d < ndim; ++d)
        n *= shape[d];
    MLA_BENCH_TRY(mla_malloc(ctx, (size_t)(n > 0 ? n : 1) * 4, mem));
    MLA_BENCH_TRY(mla_memcpy(ctx, *mem, h, (size_t)n * 4, MLA_COPY_HOST_TO_CONTEXT));
    return mla_tensor_init(t, *mem, MLA_DTYPE_I32, mla_context_memory(ctx), ndim, shape);
}

/* The cache: a pool of up to 64 blocks written by mla_cache_write from
 * random rows, copied over all nblocks blocks. */
static mla_status fill_cache(ba_set *s, bench_rng *rng, ba_cache c, int64_t nblocks)
{
    mla_context *ctx = s->ctx;
    const int64_t pool = nblocks < 64 ? nblocks : 64, tokens = pool * BA_BLOCK;
    mla_cache_desc pd = cache_desc(c, pool), cd = cache_desc(c, nblocks);
    int64_t bb = 0;
    MLA_BENCH_TRY(mla_cache_block_bytes(&cd, &bb));
    void *kn = NULL, *kp = NULL, *sl = NULL, *pm = NULL;
    mla_tensor tkn, tkp, tsl, tpool;
    const int64_t kns[2] = {tokens, BA_L}, kps[2] = {tokens, BA_R}, ps[2] = {pool, bb};
    mla_status st = bench_mx_upload(ctx, rng, MLA_DTYPE_F32, 2, kns, BENCH_FILL_ACT, &kn, &tkn);
    if (st == MLA_OK)
        st = bench_mx_upload(ctx, rng, MLA_DTYPE_F32, 2, kps, BENCH_FILL_ACT, &kp, &tkp);
    int32_t *slots = malloc((size_t)tokens * 4);
    if (!slots)
        st = MLA_ERR_OUT_OF_MEMORY;
    for (int64_t i = 0; st == MLA_OK && i < tokens; ++i)
        slots[i] = (int32_t)i;
    if (st == MLA_OK)
        st = ints(ctx, slots, 1, (const int64_t[]){tokens}, &sl, &tsl);
    free(slots);
    if (st == MLA_OK)
        st = mla_malloc(ctx, (size_t)(pool * bb), &pm);
    if (st == MLA_OK)
        st = mla_tensor_init(&tpool, pm, MLA_DTYPE_U8, mla_context_memory(ctx), 2, ps);
    if (st == MLA_OK)
        st = mla_cache_write(ctx, &pd, &tpool, &tkn, &tkp, &tsl);
    if (st == MLA_OK)
        st = mla_malloc(ctx, (size_t)(nblocks * bb), &s->cache_mem);
    for (int64_t b = 0; st == MLA_OK && b < nblocks; b += pool) {
        const int64_t n = nblocks - b < pool ? nblocks - b : pool;
        st = mla_memcpy(ctx, (uint8_t *)s->cache_mem + b * bb, pm, (size_t)(n * bb),
                        MLA_COPY_CONTEXT_TO_CONTEXT);
    }
    if (st == MLA_OK) {
        const int64_t cs[2] = {nblocks, bb};
        st = mla_tensor_init(&s->cache, s->cache_mem, MLA_DTYPE_U8, mla_context_memory(ctx), 2, cs);
    }
    void *m[4] = {kn, kp, sl, pm};
    for (int k = 0; k < 4; ++k)
        if (m[k])
            mla_free(ctx, m[k]);
    return st;
}

/* A contiguous tensor in context memory of seeded values of the kind: a
 * pattern of up to 64 MiB repeated (bench_fill_context), so that prefill's
 * q of many GiB costs no host time to draw. */
static mla_status filled(mla_context *ctx, bench_rng *rng, mla_dtype dt, int32_t ndim,
                         const int64_t *shape, bench_fill kind, void **mem, mla_tensor *t)
{
    int64_t n = 1;
    for (int32_t d = 0; d < ndim; ++d)
        n *= shape[d];
    MLA_BENCH_TRY(mla_malloc(ctx, (size_t)(n > 0 ? n : 1) * mla_dtype_size(dt), mem));
    MLA_BENCH_TRY(bench_fill_context(ctx, *mem, dt, n, kind, bench_rng_next(rng)));
    return mla_tensor_init(t, *mem, dt, mla_context_memory(ctx), ndim, shape);
}

/* rows x topk distinct positions of [0, C) per row in random order (a
 * partial Fisher-Yates shuffle of 0..C-1 per row), -1 past C. */
static int32_t *draw_topk(bench_rng *rng, int64_t rows, int64_t C, int64_t topk)
{
    int32_t *out = malloc((size_t)(rows * topk) * 4), *perm = malloc((size_t)C * 4);
    if (!out || !perm) {
        free(out);
        free(perm);
        return NULL;
    }
    for (int64_t r = 0; r < rows; ++r) {
        for (int64_t t = 0; t < C; ++t)
            perm[t] = (int32_t)t;
        int32_t *o = out + r * topk;
        for (int64_t i = 0; i < topk; ++i) {
            if (i >= C) {
                o[i] = -1;
                continue;
            }
            const int64_t j = i + (int64_t)bench_rng_below(rng, (uint64_t)(C - i));
            const int32_t t = perm[j];
            perm[j] = perm[i];
            perm[i] = t;
            o[i] = t;
        }
    }
    free(perm);
    return out;
}

mla_status ba_setup(ba_set *s, bench_rng *rng, const ba_shape *w, int n)
{
    mla_context *ctx = s->ctx;
    const int64_t B = w->B, C = w->C, H = w->H, nq = w->n, nb_seq = (C + BA_BLOCK - 1) / BA_BLOCK;
    const int64_t nblocks = (int64_t)n * B * nb_seq, T = B * nq;
    s->n = n;
    MLA_BENCH_TRY(fill_cache(s, rng, w->cache, nblocks));

    mla_model_config cfg;
    MLA_BENCH_TRY(mla_model_config_preset("DeepSeek-V3", &cfg));
    mla_cache_desc cd = cache_desc(w->cache, nblocks);
    MLA_BENCH_TRY(mla_attention_desc_default(&cfg, &cd, &s->desc));
    s->desc.heads = H;
    s->desc.out_dtype = MLA_DTYPE_BF16;
    s->desc.next_n = (int32_t)nq;
    s->desc.topk = w->topk;

    int32_t *lens = malloc((size_t)B * 4), *bt = malloc((size_t)nblocks * 4);
    mla_status st = lens && bt ? MLA_OK : MLA_ERR_OUT_OF_MEMORY;
    for (int64_t b = 0; st == MLA_OK && b < B; ++b)
        lens[b] = (int32_t)C;
    /* block tables: a random permutation of all blocks, a slice per set */
    for (int64_t i = 0; st == MLA_OK && i < nblocks; ++i)
        bt[i] = (int32_t)i;
    for (int64_t i = nblocks - 1; st == MLA_OK && i > 0; --i) {
        const int64_t j = (int64_t)bench_rng_below(rng, (uint64_t)i + 1);
        const int32_t t = bt[i];
        bt[i] = bt[j];
        bt[j] = t;
    }
    if (st == MLA_OK)
        st = ints(ctx, lens, 1, (const int64_t[]){B}, &s->lens_mem, &s->lens);
    const int64_t bts[2] = {B, nb_seq}, qs[3] = {T, H, BA_L + BA_R}, os[3] = {T, H, BA_L},
                  ls[2] = {T, H}, tis[2] = {T, w->topk};
    int64_t ws_bytes = 1;
    for (int i = 0; st == MLA_OK && i < n; ++i) {
        st = ints(ctx, bt + (int64_t)i * B * nb_seq, 2, bts, &s->bt_mem[i], &s->bt[i]);
        if (st == MLA_OK)
            st = filled(ctx, rng, MLA_DTYPE_BF16, 3, qs, BENCH_FILL_ACT, &s->q_mem[i], &s->q[i]);
        if (st == MLA_OK)
            st = filled(ctx, rng, MLA_DTYPE_BF16, 3, os, BENCH_FILL_BYTES, &s->o_mem[i], &s->o[i]);
        if (st == MLA_OK)
            st = filled(ctx, rng, MLA_DTYPE_F32, 2, ls, BENCH_FILL_BYTES, &s->lse_mem[i],
                        &s->lse[i]);
        if (st == MLA_OK && w->topk > 0) {
            int32_t *ti = draw_topk(rng, T, C, w->topk);
            st = ti ? ints(ctx, ti, 2, tis, &s->ti_mem[i], &s->ti[i]) : MLA_ERR_OUT_OF_MEMORY;
            free(ti);
        }
        if (st != MLA_OK)
            break;
        mla_attention_args *a = &s->args[i];
        memset(a, 0, sizeof *a);
        a->q = &s->q[i];
        a->cache = &s->cache;
        a->block_table = &s->bt[i];
        a->context_lens = &s->lens;
        a->topk_indices = w->topk > 0 ? &s->ti[i] : NULL;
        a->o = &s->o[i];
        a->lse = &s->lse[i];
        st = mla_attention_plan_create(ctx, &s->desc, a, &s->plan[i]);
        if (st == MLA_OK) {
            const int64_t b = mla_attention_plan_workspace_bytes(s->plan[i]);
            ws_bytes = b > ws_bytes ? b : ws_bytes;
        }
    }
    free(lens);
    free(bt);
    MLA_BENCH_TRY(st);
    MLA_BENCH_TRY(mla_malloc(ctx, (size_t)ws_bytes, &s->ws_mem));
    MLA_BENCH_TRY(mla_tensor_init(&s->ws, s->ws_mem, MLA_DTYPE_U8, mla_context_memory(ctx), 1,
                                  (const int64_t[]){ws_bytes}));
    for (int i = 0; i < n; ++i)
        s->args[i].workspace = &s->ws;
    return MLA_OK;
}

void ba_free(ba_set *s)
{
    for (int i = 0; i < BA_MAX_INST; ++i) {
        mla_attention_plan_destroy(s->plan[i]);
        void *m[5] = {s->bt_mem[i], s->q_mem[i], s->o_mem[i], s->lse_mem[i], s->ti_mem[i]};
        for (int k = 0; k < 5; ++k)
            if (m[k])
                mla_free(s->ctx, m[k]);
    }
    void *m[3] = {s->cache_mem, s->lens_mem, s->ws_mem};
    for (int k = 0; k < 3; ++k)
        if (m[k])
            mla_free(s->ctx, m[k]);
    mla_context *ctx = s->ctx;
    memset(s, 0, sizeof *s);
    s->ctx = ctx;
}

mla_status ba_run(void *arg, int inst)
{
    ba_set *s = arg;
    return mla_attention_run(s->ctx, s->plan[inst], &s->args[inst]);
}

const ba_form ba_absorbed = {"absorbed", ba_setup, ba_run, ba_free};

void ba_sweep_init(ba_sweep *sw, mla_context *ctx, const bench_mx_args *a, const bench_ceilings *c)
{
    memset(sw, 0, sizeof *sw);
    sw->ctx = ctx;
    sw->a = a;
    sw->c = c;
    sw->s.ctx = ctx;
    bench_rng_seed(&sw->rng, a->seed);
}

void ba_measure(ba_sweep *sw, const ba_form *f, const ba_shape *w, const char *label, ba_result *r)
{
    const bench_mx_args *a = sw->a;
    const double bw = sw->c->copy_gbs * 1e9, mm = sw->c->matmul_gflops * 1e9;
    const double t_bw = bw > 0 ? (double)r->bytes / bw : 0.0, t_mm = mm > 0 ? r->flops / mm : 0.0;
    r->ratio = NAN;
    r->roof_s = t_bw > t_mm ? t_bw : t_mm;
    r->bound = t_bw >= t_mm ? "copy" : "matmul";
    const double predicted = sw->sec_per_flop * r->flops;
    if (predicted > a->max_call_s) {
        r->skipped = 1;
        snprintf(r->note, sizeof r->note, "skipped: predicted %.2f s per call > --max-call-s %.2f",
                 predicted, a->max_call_s);
        fprintf(stderr, "  %s %s\n", label, r->note);
        return;
    }
    r->n_inst = ba_input_sets(w, a->rotate_bytes);
    mla_status st = f->setup(&sw->s, &sw->rng, w, r->n_inst);
    if (st == MLA_OK) {
        r->splits = mla_attention_plan_splits(sw->s.plan[0]);
        st = bench_mx_time(sw->ctx, a, f->run, &sw->s, r->n_inst, a->row_budget_s, &r->t);
    }
    if (st == MLA_OK) {
        r->ok = 1;
        const double t = r->t.median_s;
        r->gbs = (double)r->bytes / t / 1e9;
        r->gflops = r->flops / t / 1e9;
        r->ratio = r->roof_s > 0 ? r->roof_s / t : NAN;
        if (r->flops >= sw->flops_seen) {
            sw->sec_per_flop = t / r->flops;
            sw->flops_seen = r->flops;
        }
    } else {
        bench_mx_note(sw->ctx, st, r->note, sizeof r->note);
        sw->errors += st != MLA_ERR_UNSUPPORTED;
    }
    f->free(&sw->s);
    fprintf(stderr, "  %s %.1f us %s\n", label, r->ok ? 1e6 * r->t.median_s : 0.0, r->note);
}

void ba_print_result(FILE *out, const ba_result *r)
{
    if (!r->ok) {
        fprintf(out, "%6s %10.1f %7s %10.1f %s\n", "-", (double)r->bytes / 1048576.0, r->bound,
                1e6 * r->roof_s, r->note);
        return;
    }
    fprintf(out, "%6d %10.1f %7s %10.1f %12.1f %12.1f %12.1f %9.1f %5d ", r->splits,
            (double)r->bytes / 1048576.0, r->bound, 1e6 * r->roof_s, 1e6 * r->t.median_s,
            1e6 * r->t.min_s, 1e6 * r->t.cpu_s, r->gflops, r->t.reps);
    if (isnan(r->ratio))
        fprintf(out, "%8s\n", "n/a");
    else
        fprintf(out, "%7.1f%%\n", 100.0 * r->ratio);
}

void ba_json_result(bench_json *j, const ba_result *r)
{
    bench_json_str(j, "status", r->skipped ? "skipped" : r->ok ? "ok" : "failed");
    bench_json_str(j, "note", r->note);
    bench_json_int(j, "splits", r->splits);
    bench_json_int(j, "input_sets", r->n_inst);
    bench_json_int(j, "bytes", r->bytes);
    bench_json_num(j, "flops", r->flops);
    bench_json_num(j, "roofline_s", r->roof_s);
    bench_json_str(j, "bound", r->bound);
    bench_json_num(j, "median_s", r->ok ? r->t.median_s : NAN);
    bench_json_num(j, "min_s", r->ok ? r->t.min_s : NAN);
    bench_json_num(j, "cpu_s", r->ok ? r->t.cpu_s : NAN);
    bench_json_int(j, "reps", r->t.reps);
    bench_json_num(j, "gbs", r->ok ? r->gbs : NAN);
    bench_json_num(j, "gflops", r->ok ? r->gflops : NAN);
    bench_json_num(j, "ratio", r->ok ? r->ratio : NAN);
}

/* "16,64,128" into v (1..max each). */
static int parse_heads(const char *p, int64_t *v, int *n)
{
    *n = 0;
    while (*p && *n < BENCH_MX_MAX_LIST) {
        char *end = NULL;
        const long long x = strtoll(p, &end, 10);
        if (end == p || x < 1 || x > 128 || (*end && *end != ','))
            return -1;
        v[(*n)++] = x;
        p = *end == ',' ? end + 1 : end;
    }
    return *n > 0 && !*p ? 0 : -1;
}

/* "bf16,fp8_scaled" into a bit set of ba_cache. */
static int parse_caches(const char *p, unsigned *set)
{
    *set = 0;
    while (*p) {
        const size_t n = strcspn(p, ",");
        int k = 0;
        while (k < BA_CACHES &&
               (strlen(ba_cache_names[k]) != n || strncmp(p, ba_cache_names[k], n)))
            ++k;
        if (k == BA_CACHES)
            return -1;
        *set |= 1u << k;
        p += n;
        if (*p == ',' && *++p == '\0')
            return -1;
    }
    return *set ? 0 : -1;
}

int ba_strip_args(int *argc, char **argv, int sparse_ok, ba_opts *o)
{
    int k = 0;
    for (int i = 0; i < *argc; ++i) {
        const char *a = argv[i], *v = i + 1 < *argc ? argv[i + 1] : NULL;
        if (i < 2) {
            argv[k++] = argv[i];
        } else if (!strcmp(a, "--quick")) {
            o->quick = 1;
        } else if (sparse_ok && !strcmp(a, "--sparse")) {
            o->sparse = 1;
        } else if (!strcmp(a, "--heads")) {
            if (!v || parse_heads(v, o->heads, &o->n_heads))
                return -1;
            ++i;
        } else if (!strcmp(a, "--caches")) {
            if (!v || parse_caches(v, &o->caches))
                return -1;
            ++i;
        } else if (sparse_ok && !strcmp(a, "--topk")) {
            char *end = NULL;
            const long long t = v ? strtoll(v, &end, 10) : 0;
            if (!v || !*v || *end || t < 1 || t > (1 << 20))
                return -1;
            o->topk = t;
            ++i;
        } else {
            argv[k++] = argv[i];
        }
    }
    *argc = k;
    return 0;
}
