/* `mla bench decode`: the MLA attention core in decode (include/mla/
 * mla_attention.h: next_n 1, dense, paged, block 64, q bf16 [B, H, 576],
 * o bf16 [B, H, 512], lse f32; L = 512, R = 64) on FlashMLA's benchmark
 * shapes (batch 128, context 4096, heads 16 and 128; cache bf16 NORMAL,
 * fp8 e4m3fn NORMAL and FP8_SCALED) and small laptop shapes (batch 1 and 4,
 * contexts 1024..8192, heads 16, bf16 cache).
 *
 * Counted as FlashMLA counts them:
 *   FLOPs = 2 * B * s_q * H * C * (d + dv), d = L + R = 576, dv = L = 512
 *   bytes = B * C * bytes_per_token (1152 bf16, 576 fp8, 656 FP8_SCALED)
 *           + q (B H 576 x 2) + o (B H 512 x 2)
 * Roofline time: max(bytes / copy bandwidth, FLOPs / matmul rate), both
 * ceilings measured in this run (bench/ceilings.c); a row's ratio is that
 * time over the measured median. The plan (mla_attention_plan_create, the
 * automatic split-KV schedule) is made before timing; only
 * mla_attention_run is timed. Small caches rotate over several input sets
 * (each its own blocks, q, o and plan) so that the keys come from memory.
 *
 * Rows run in ascending FLOPs; a row predicted slower than --max-call-s
 * (from the seconds per FLOP of the largest row so far) is skipped.
 * --quick: batch 1 and 4, context 1024, heads 16, the three caches (the
 * smoke test). --batch / --contexts / --heads give a cross product over the
 * three caches instead of the default table. */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "apps/cmd.h"
#include "bench/bench_mxfp4.h"

#define DC_L 512
#define DC_R 64
#define DC_BLOCK 64
#define DC_MAX_INST 32
#define DC_MAX_ROWS 64

typedef enum dc_cache { DC_BF16 = 0, DC_FP8 = 1, DC_FP8_SCALED = 2, DC_CACHES } dc_cache;

static const char *const dc_cache_names[DC_CACHES] = {"bf16", "fp8", "fp8_scaled"};

typedef struct dc_row {
    int64_t B, C, H;
    dc_cache cache;
    int ok, skipped;
    char note[200];
    bench_mx_timing t;
    int n_inst, splits;
    int64_t bytes, cache_bytes;
    double flops, roof_s;
    const char *bound;
    double ratio, gbs, gflops;
} dc_row;

/* Everything one row allocates: n_inst input sets over one cache buffer. */
typedef struct dc_set {
    mla_context *ctx;
    mla_attention_desc desc;
    int n;
    void *cache_mem, *lens_mem, *ws_mem;
    void *bt_mem[DC_MAX_INST], *q_mem[DC_MAX_INST], *o_mem[DC_MAX_INST], *lse_mem[DC_MAX_INST];
    mla_tensor cache, lens, ws, bt[DC_MAX_INST], q[DC_MAX_INST], o[DC_MAX_INST], lse[DC_MAX_INST];
    mla_attention_args args[DC_MAX_INST];
    mla_attention_plan *plan[DC_MAX_INST];
} dc_set;

static mla_status dc_run(void *arg, int inst)
{
    dc_set *s = arg;
    return mla_attention_run(s->ctx, s->plan[inst], &s->args[inst]);
}

static void dc_free(dc_set *s)
{
    for (int i = 0; i < DC_MAX_INST; ++i) {
        mla_attention_plan_destroy(s->plan[i]);
        void *m[4] = {s->bt_mem[i], s->q_mem[i], s->o_mem[i], s->lse_mem[i]};
        for (int k = 0; k < 4; ++k)
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

static int64_t dc_token_bytes(dc_cache c)
{
    return c == DC_BF16  ? 2 * (DC_L + DC_R)
           : c == DC_FP8 ? DC_L + DC_R
                         : DC_L + DC_L / 32 + 2 * DC_R;
}

static mla_cache_desc dc_cache_desc(dc_cache c, int64_t num_blocks)
{
    mla_cache_desc d;
    memset(&d, 0, sizeof d);
    d.layout = c == DC_FP8_SCALED ? MLA_CACHE_FP8_SCALED : MLA_CACHE_NORMAL;
    d.dtype = c == DC_BF16 ? MLA_DTYPE_BF16 : MLA_DTYPE_FP8_E4M3FN;
    d.num_blocks = num_blocks;
    d.block_size = DC_BLOCK;
    d.kv_lora = DC_L;
    d.rope = DC_R;
    d.k_scale = c == DC_FP8 ? 1.0f / 64.0f : 1.0f;
    return d;
}

/* An I32 tensor in context memory from host values. */
static mla_status dc_ints(mla_context *ctx, const int32_t *h, int32_t ndim, const int64_t *shape,
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
 * random rows, copied over all n * B * ceil(C / 64) blocks. */
static mla_status dc_fill_cache(dc_set *s, bench_rng *rng, dc_cache c, int64_t nblocks)
{
    mla_context *ctx = s->ctx;
    const int64_t pool = nblocks < 64 ? nblocks : 64, tokens = pool * DC_BLOCK;
    mla_cache_desc pd = dc_cache_desc(c, pool), cd = dc_cache_desc(c, nblocks);
    int64_t bb = 0;
    MLA_BENCH_TRY(mla_cache_block_bytes(&cd, &bb));
    void *kn = NULL, *kp = NULL, *sl = NULL, *pm = NULL;
    mla_tensor tkn, tkp, tsl, tpool;
    const int64_t kns[2] = {tokens, DC_L}, kps[2] = {tokens, DC_R}, ps[2] = {pool, bb};
    mla_status st = bench_mx_upload(ctx, rng, MLA_DTYPE_F32, 2, kns, BENCH_FILL_ACT, &kn, &tkn);
    if (st == MLA_OK)
        st = bench_mx_upload(ctx, rng, MLA_DTYPE_F32, 2, kps, BENCH_FILL_ACT, &kp, &tkp);
    int32_t *slots = malloc((size_t)tokens * 4);
    if (!slots)
        st = MLA_ERR_OUT_OF_MEMORY;
    for (int64_t i = 0; st == MLA_OK && i < tokens; ++i)
        slots[i] = (int32_t)i;
    if (st == MLA_OK)
        st = dc_ints(ctx, slots, 1, (const int64_t[]){tokens}, &sl, &tsl);
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

/* n input sets of one row and their plans; the workspace fits the largest. */
static mla_status dc_setup(dc_set *s, bench_rng *rng, const dc_row *w, int n)
{
    mla_context *ctx = s->ctx;
    const int64_t B = w->B, C = w->C, H = w->H, nb_seq = (C + DC_BLOCK - 1) / DC_BLOCK;
    const int64_t nblocks = (int64_t)n * B * nb_seq;
    s->n = n;
    MLA_BENCH_TRY(dc_fill_cache(s, rng, w->cache, nblocks));

    mla_model_config cfg;
    MLA_BENCH_TRY(mla_model_config_preset("DeepSeek-V3", &cfg));
    mla_cache_desc cd = dc_cache_desc(w->cache, nblocks);
    MLA_BENCH_TRY(mla_attention_desc_default(&cfg, &cd, &s->desc));
    s->desc.heads = H;
    s->desc.out_dtype = MLA_DTYPE_BF16;

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
        st = dc_ints(ctx, lens, 1, (const int64_t[]){B}, &s->lens_mem, &s->lens);
    const int64_t bts[2] = {B, nb_seq}, qs[3] = {B, H, DC_L + DC_R}, os[3] = {B, H, DC_L},
                  ls[2] = {B, H};
    int64_t ws_bytes = 1;
    for (int i = 0; st == MLA_OK && i < n; ++i) {
        st = dc_ints(ctx, bt + (int64_t)i * B * nb_seq, 2, bts, &s->bt_mem[i], &s->bt[i]);
        if (st == MLA_OK)
            st = bench_mx_upload(ctx, rng, MLA_DTYPE_BF16, 3, qs, BENCH_FILL_ACT, &s->q_mem[i],
                                 &s->q[i]);
        if (st == MLA_OK)
            st = bench_mx_upload(ctx, rng, MLA_DTYPE_BF16, 3, os, BENCH_FILL_BYTES, &s->o_mem[i],
                                 &s->o[i]);
        if (st == MLA_OK)
            st = bench_mx_upload(ctx, rng, MLA_DTYPE_F32, 2, ls, BENCH_FILL_BYTES, &s->lse_mem[i],
                                 &s->lse[i]);
        if (st != MLA_OK)
            break;
        mla_attention_args *a = &s->args[i];
        memset(a, 0, sizeof *a);
        a->q = &s->q[i];
        a->cache = &s->cache;
        a->block_table = &s->bt[i];
        a->context_lens = &s->lens;
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

static void dc_print(FILE *out, const void *rp, int n)
{
    const dc_row *rows = rp;
    fprintf(out, "%5s %6s %4s %-10s %6s %10s %7s %10s %11s %11s %9s %9s %5s %8s\n", "batch", "ctx",
            "H", "cache", "splits", "bytes_MiB", "bound", "roof_us", "median_us", "min_us", "GB/s",
            "GFLOP/s", "reps", "roof%");
    for (int i = 0; i < n; ++i) {
        const dc_row *w = &rows[i];
        fprintf(out, "%5lld %6lld %4lld %-10s ", (long long)w->B, (long long)w->C, (long long)w->H,
                dc_cache_names[w->cache]);
        if (!w->ok) {
            fprintf(out, "%6s %10.1f %7s %10.1f %s\n", "-", (double)w->bytes / 1048576.0, w->bound,
                    1e6 * w->roof_s, w->note);
            continue;
        }
        fprintf(out, "%6d %10.1f %7s %10.1f %11.1f %11.1f %9.2f %9.1f %5d ", w->splits,
                (double)w->bytes / 1048576.0, w->bound, 1e6 * w->roof_s, 1e6 * w->t.median_s,
                1e6 * w->t.min_s, w->gbs, w->gflops, w->t.reps);
        if (isnan(w->ratio))
            fprintf(out, "%8s\n", "n/a");
        else
            fprintf(out, "%7.1f%%\n", 100.0 * w->ratio);
    }
}

static void dc_json(bench_json *j, const void *rp, int n)
{
    const dc_row *rows = rp;
    bench_json_array(j, "rows");
    for (int i = 0; i < n; ++i) {
        const dc_row *w = &rows[i];
        bench_json_object(j, NULL);
        bench_json_str(j, "op", "decode");
        bench_json_int(j, "batch", w->B);
        bench_json_int(j, "context", w->C);
        bench_json_int(j, "heads", w->H);
        bench_json_str(j, "cache", dc_cache_names[w->cache]);
        bench_json_int(j, "s_q", 1);
        bench_json_int(j, "block_size", DC_BLOCK);
        bench_json_str(j, "q_dtype", "bf16");
        bench_json_str(j, "out_dtype", "bf16");
        bench_json_str(j, "status", w->skipped ? "skipped" : w->ok ? "ok" : "failed");
        bench_json_str(j, "note", w->note);
        bench_json_int(j, "splits", w->splits);
        bench_json_int(j, "input_sets", w->n_inst);
        bench_json_int(j, "bytes", w->bytes);
        bench_json_int(j, "cache_bytes", w->cache_bytes);
        bench_json_num(j, "flops", w->flops);
        bench_json_num(j, "roofline_s", w->roof_s);
        bench_json_str(j, "bound", w->bound);
        bench_json_num(j, "median_s", w->ok ? w->t.median_s : NAN);
        bench_json_num(j, "min_s", w->ok ? w->t.min_s : NAN);
        bench_json_int(j, "reps", w->t.reps);
        bench_json_num(j, "gbs", w->ok ? w->gbs : NAN);
        bench_json_num(j, "gflops", w->ok ? w->gflops : NAN);
        bench_json_num(j, "ratio", w->ok ? w->ratio : NAN);
        bench_json_close(j, '}');
    }
    bench_json_close(j, ']');
}

/* Takes --heads LIST and --quick out of argv (the rest goes to
 * bench_mx_parse). Returns -1 on a bad --heads value. */
static int dc_strip(int *argc, char **argv, int64_t *heads, int *n_heads, int *quick)
{
    int k = 0;
    for (int i = 0; i < *argc; ++i) {
        if (i >= 2 && !strcmp(argv[i], "--quick")) {
            *quick = 1;
            continue;
        }
        if (i >= 2 && !strcmp(argv[i], "--heads")) {
            if (i + 1 >= *argc)
                return -1;
            char *p = argv[++i];
            *n_heads = 0;
            while (*p && *n_heads < BENCH_MX_MAX_LIST) {
                char *end = NULL;
                const long long v = strtoll(p, &end, 10);
                if (end == p || v < 1 || v > 128)
                    return -1;
                heads[(*n_heads)++] = v;
                p = *end == ',' ? end + 1 : end;
                if (*end && *end != ',')
                    return -1;
            }
            continue;
        }
        argv[k++] = argv[i];
    }
    *argc = k;
    return 0;
}

static int dc_add(dc_row *rows, int n, int64_t B, int64_t C, int64_t H, dc_cache c)
{
    if (n >= DC_MAX_ROWS)
        return n;
    memset(&rows[n], 0, sizeof rows[n]);
    rows[n].B = B;
    rows[n].C = C;
    rows[n].H = H;
    rows[n].cache = c;
    return n + 1;
}

static int dc_by_flops(const void *x, const void *y)
{
    const dc_row *a = x, *b = y;
    const double fa = (double)a->B * (double)a->C * (double)a->H,
                 fb = (double)b->B * (double)b->C * (double)b->H;
    if (fa != fb)
        return fa < fb ? -1 : 1;
    return (int)a->cache - (int)b->cache;
}

int bench_decode_cmd(int argc, char **argv)
{
    int64_t heads[BENCH_MX_MAX_LIST];
    int n_heads = 0, quick = 0;
    char **av = malloc((size_t)(argc + 1) * sizeof *av);
    if (!av)
        return MLA_EXIT_FAIL;
    memcpy(av, argv, (size_t)argc * sizeof *av);
    int ac = argc;
    if (dc_strip(&ac, av, heads, &n_heads, &quick)) {
        fprintf(stderr, "mla bench decode: bad --heads (a list of 1..128)\n");
        free(av);
        return MLA_EXIT_USAGE;
    }
    bench_mx_args a;
    int rc = bench_mx_parse(ac, av, "decode", "--contexts", "--batch", &a);
    free(av);
    if (rc != MLA_EXIT_OK)
        return rc;
    dc_row *rows = calloc(DC_MAX_ROWS, sizeof *rows);
    if (!rows)
        return MLA_EXIT_FAIL;
    int n = 0;
    if (a.n_list[0] || a.n_list[1] || n_heads) { /* a cross product over the three caches */
        const int64_t dc[1] = {4096}, db[1] = {128}, dh[1] = {16};
        const int nc = a.n_list[0] ? a.n_list[0] : 1, nb = a.n_list[1] ? a.n_list[1] : 1,
                  nh = n_heads ? n_heads : 1;
        for (int ci = 0; ci < nc; ++ci)
            for (int bi = 0; bi < nb; ++bi)
                for (int hi = 0; hi < nh; ++hi)
                    for (int k = 0; k < DC_CACHES; ++k)
                        n = dc_add(rows, n, a.n_list[1] ? a.list[1][bi] : db[0],
                                   a.n_list[0] ? a.list[0][ci] : dc[0], n_heads ? heads[hi] : dh[0],
                                   (dc_cache)k);
    } else if (quick) {
        for (int k = 0; k < DC_CACHES; ++k) {
            n = dc_add(rows, n, 1, 1024, 16, (dc_cache)k);
            n = dc_add(rows, n, 4, 1024, 16, (dc_cache)k);
        }
    } else {
        const int64_t lb[2] = {1, 4}, lc[3] = {1024, 4096, 8192};
        for (int bi = 0; bi < 2; ++bi) /* laptop shapes */
            for (int ci = 0; ci < 3; ++ci)
                n = dc_add(rows, n, lb[bi], lc[ci], 16, DC_BF16);
        for (int h = 0; h < 2; ++h) /* FlashMLA's */
            for (int k = 0; k < DC_CACHES; ++k)
                n = dc_add(rows, n, 128, 4096, h ? 128 : 16, (dc_cache)k);
    }
    qsort(rows, (size_t)n, sizeof *rows, dc_by_flops);

    bench_ceilings c;
    mla_context *ctx = bench_mx_open(&a, &c);
    if (!ctx) {
        free(rows);
        return MLA_EXIT_FAIL;
    }
    printf("decode    : DeepSeek-V3 MLA (L %d, R %d, softmax scale of the preset), next_n 1, "
           "dense, paged block %d, q bf16, o bf16 + lse; splits: the plan's automatic choice\n\n",
           DC_L, DC_R, DC_BLOCK);
    fflush(stdout);
    const double start = bench_now();
    bench_rng rng;
    bench_rng_seed(&rng, a.seed);
    const double bw = c.copy_gbs * 1e9, mm = c.matmul_gflops * 1e9;
    double sec_per_flop = 0.0, flops_seen = 0.0;
    int errors = 0;
    dc_set s;
    memset(&s, 0, sizeof s);
    s.ctx = ctx;
    fprintf(stderr, "rows:\n");
    for (int i = 0; i < n; ++i) {
        dc_row *w = &rows[i];
        const int64_t nb_seq = (w->C + DC_BLOCK - 1) / DC_BLOCK;
        w->ratio = NAN;
        w->cache_bytes = w->B * w->C * dc_token_bytes(w->cache);
        w->bytes = w->cache_bytes + w->B * w->H * (DC_L + DC_R) * 2 + w->B * w->H * DC_L * 2;
        w->flops = 2.0 * (double)w->B * (double)w->H * (double)w->C * (DC_L + DC_R + DC_L);
        const double t_bw = bw > 0 ? (double)w->bytes / bw : 0.0,
                     t_mm = mm > 0 ? w->flops / mm : 0.0;
        w->roof_s = t_bw > t_mm ? t_bw : t_mm;
        w->bound = t_bw >= t_mm ? "copy" : "matmul";
        const double predicted = sec_per_flop * w->flops;
        if (predicted > a.max_call_s) {
            w->skipped = 1;
            snprintf(w->note, sizeof w->note,
                     "skipped: predicted %.2f s per call > --max-call-s %.2f", predicted,
                     a.max_call_s);
            fprintf(stderr, "  B=%-3lld C=%-6lld H=%-3lld %-10s %s\n", (long long)w->B,
                    (long long)w->C, (long long)w->H, dc_cache_names[w->cache], w->note);
            continue;
        }
        const int64_t set_bytes = w->B * nb_seq * DC_BLOCK * dc_token_bytes(w->cache);
        int64_t ni = (a.rotate_bytes + set_bytes - 1) / set_bytes;
        w->n_inst = (int)(ni < 1 ? 1 : ni > DC_MAX_INST ? DC_MAX_INST : ni);
        mla_status st = dc_setup(&s, &rng, w, w->n_inst);
        if (st == MLA_OK) {
            w->splits = mla_attention_plan_splits(s.plan[0]);
            st = bench_mx_time(ctx, &a, dc_run, &s, w->n_inst, a.row_budget_s, &w->t);
        }
        if (st == MLA_OK) {
            w->ok = 1;
            const double t = w->t.median_s;
            w->gbs = (double)w->bytes / t / 1e9;
            w->gflops = w->flops / t / 1e9;
            w->ratio = w->roof_s > 0 ? w->roof_s / t : NAN;
            if (w->flops >= flops_seen) {
                sec_per_flop = t / w->flops;
                flops_seen = w->flops;
            }
        } else {
            bench_mx_note(ctx, st, w->note, sizeof w->note);
            errors += st != MLA_ERR_UNSUPPORTED;
        }
        dc_free(&s);
        fprintf(stderr, "  B=%-3lld C=%-6lld H=%-3lld %-10s %.1f us %s\n", (long long)w->B,
                (long long)w->C, (long long)w->H, dc_cache_names[w->cache],
                w->ok ? 1e6 * w->t.median_s : 0.0, w->note);
    }
    if (bench_mx_finish(
            &a, ctx, &c, dc_print, dc_json, rows, n, start,
            "FLOPs = 2 B H C (576 + 512), bytes = cache (B C bytes per token) + q + o; roof = "
            "max(bytes / copy BW, FLOPs / matmul rate); roof% = roof / median "
            "(docs/PERFORMANCE.md)",
            errors) != MLA_EXIT_OK)
        rc = MLA_EXIT_FAIL;
    free(rows);
    mla_context_destroy(ctx);
    return rc;
}
