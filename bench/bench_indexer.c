/* `mla bench indexer`: the DSA indexer's decode-time search
 * (include/mla/mla_indexer.h) for each (context length C, batch B): paged
 * MQA logits (Hi = 64, head_dim 128, block size 64 in the layout
 * mla_indexer_layout_for(64) picks (SHUFFLE), next_n 1, FP8_E4M3FN cache and
 * q) and then top-k (k = 2048) over the logits it produced.
 *
 * Roofline of a case: max(cache bytes / copy bandwidth, logits FLOPs /
 * matmul rate), cache bytes = 132 per key per sequence (128 fp8 + one f32
 * scale), FLOPs = 2 * 64 * 128 per key per query row; both ceilings come from
 * the same run. Reported: logits time / its roofline fraction, top-k time /
 * its copy-bandwidth fraction (logits read once + indices written once), and
 * the total's roofline fraction (the case's roofline over logits + top-k).
 * The same two ops as one planned search (mla_indexer_search: the index
 * checks made once by mla_indexer_plan_*, as a decode step makes them for
 * all its layers, no host round trip per call) against the same roofline,
 * and the plan's update (once per step) in microseconds. Last, a size-matched
 * ceiling: mla_memcpy within the context of half the keys' bytes, so that its
 * reads plus writes are the bytes the roofline counts, timed at this size
 * with its launch and ramp (the roofline's copy rate is that of 1 GiB): how
 * far a case is from the device's own copy of the same traffic at its size
 * (a kernel that only reads can be faster: docs/PERFORMANCE.md).
 * Cases whose predicted call time exceeds --max-call-s are skipped (the host
 * default keeps the sweep near a minute on two cores); --contexts / --batch
 * narrow the sweep. */
#define _POSIX_C_SOURCE 200809L

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_mxfp4.h"

#define IX_HI 64
#define IX_D 128
#define IX_BLOCK 64
#define IX_TOPK 2048
#define IX_KEY_BYTES 132

typedef struct ix_row {
    int64_t C, B;
    int ok_logits, ok_topk, ok_search, ok_copy, skipped;
    char note[200];
    bench_mx_timing tl, tk, ts, tp, tc;
    int64_t cache_bytes, topk_bytes;
    double flops;
    double roof_s;     /* the case's roofline time */
    const char *bound; /* "copy" or "matmul" */
    double r_logits, r_topk, r_total, r_search, r_copy;
    double gbs, gflops;
} ix_row;

typedef struct ix_set {
    mla_context *ctx;
    mla_indexer_cache_desc cd;
    void *mem[8];
    mla_tensor cache, q, w, bt, lens, logits, idx;
    int64_t k;
    mla_indexer_plan *plan;
    size_t copy_bytes; /* half the cache's: mem[7] <- its first half */
} ix_set;

static mla_status ix_logits(void *arg, int inst)
{
    (void)inst;
    ix_set *s = arg;
    return mla_indexer_logits(s->ctx, &s->cd, &s->cache, &s->q, &s->w, &s->bt, &s->lens, 1,
                              &s->logits);
}

static mla_status ix_topk(void *arg, int inst)
{
    (void)inst;
    ix_set *s = arg;
    return mla_topk(s->ctx, &s->logits, &s->lens, s->k, &s->idx);
}

static mla_status ix_search(void *arg, int inst)
{
    (void)inst;
    ix_set *s = arg;
    return mla_indexer_search(s->ctx, s->plan, &s->cache, &s->q, &s->w, &s->logits, s->k, &s->idx);
}

static mla_status ix_plan_update(void *arg, int inst)
{
    (void)inst;
    ix_set *s = arg;
    return mla_indexer_plan_update(s->ctx, s->plan, &s->bt, &s->lens);
}

static mla_status ix_copy(void *arg, int inst)
{
    (void)inst;
    ix_set *s = arg;
    return mla_memcpy(s->ctx, s->mem[7], s->mem[0], s->copy_bytes, MLA_COPY_CONTEXT_TO_CONTEXT);
}

static void ix_free(ix_set *s)
{
    mla_indexer_plan_destroy(s->plan);
    s->plan = NULL;
    for (int i = 0; i < 8; ++i)
        if (s->mem[i])
            mla_free(s->ctx, s->mem[i]);
    memset(s->mem, 0, sizeof s->mem);
}

/* An I32 tensor from host values. */
static mla_status ix_ints(mla_context *ctx, const int32_t *h, int32_t ndim, const int64_t *shape,
                          void **mem, mla_tensor *t)
{
    int64_t n = 1;
    for (int32_t d = 0; d < ndim; ++d)
        n *= shape[d];
    MLA_BENCH_TRY(mla_malloc(ctx, (size_t)n * 4, mem));
    MLA_BENCH_TRY(mla_memcpy(ctx, *mem, h, (size_t)n * 4, MLA_COPY_HOST_TO_CONTEXT));
    return mla_tensor_init(t, *mem, MLA_DTYPE_I32, mla_context_memory(ctx), ndim, shape);
}

static mla_status ix_setup(ix_set *s, bench_rng *rng, int64_t C, int64_t B)
{
    mla_context *ctx = s->ctx;
    const int64_t nb_seq = (C + IX_BLOCK - 1) / IX_BLOCK, nblocks = B * nb_seq;
    s->cd.num_blocks = nblocks;
    s->cd.block_size = IX_BLOCK;
    s->cd.head_dim = IX_D;
    s->cd.dtype = MLA_DTYPE_FP8_E4M3FN;
    s->cd.layout = mla_indexer_layout_for(IX_BLOCK);
    s->cd.ue8m0 = 1;
    int64_t bb = 0;
    MLA_BENCH_TRY(mla_indexer_cache_block_bytes(&s->cd, &bb));

    /* the cache: random fp8 values and positive f32 scales per block, built
     * from a pool of distinct random blocks copied across the whole cache */
    const int64_t pool_blocks = nblocks < 256 ? nblocks : 256;
    uint8_t *h = malloc((size_t)(pool_blocks * bb));
    if (!h)
        return MLA_ERR_OUT_OF_MEMORY;
    for (int64_t b = 0; b < pool_blocks; ++b) {
        bench_fill_host(rng, h + b * bb, MLA_DTYPE_FP8_E4M3FN, IX_BLOCK * IX_D, BENCH_FILL_ACT);
        bench_fill_host(rng, h + b * bb + IX_BLOCK * IX_D, MLA_DTYPE_F32, IX_BLOCK,
                        BENCH_FILL_SCALE);
    }
    mla_status st = mla_malloc(ctx, (size_t)(nblocks * bb), &s->mem[0]);
    for (int64_t b = 0; b < nblocks && st == MLA_OK; b += pool_blocks) {
        const int64_t n = nblocks - b < pool_blocks ? nblocks - b : pool_blocks;
        st = mla_memcpy(ctx, (uint8_t *)s->mem[0] + b * bb, h, (size_t)(n * bb),
                        MLA_COPY_HOST_TO_CONTEXT);
    }
    free(h);
    MLA_BENCH_TRY(st);
    const int64_t cs[2] = {nblocks, bb};
    MLA_BENCH_TRY(
        mla_tensor_init(&s->cache, s->mem[0], MLA_DTYPE_U8, mla_context_memory(ctx), 2, cs));
    s->copy_bytes = (size_t)(nblocks * bb / 2);
    MLA_BENCH_TRY(mla_malloc(ctx, s->copy_bytes, &s->mem[7]));

    const int64_t qs[3] = {B, IX_HI, IX_D}, ws[2] = {B, IX_HI}, ls[2] = {B, C},
                  is[2] = {B, IX_TOPK};
    MLA_BENCH_TRY(
        bench_mx_upload(ctx, rng, MLA_DTYPE_FP8_E4M3FN, 3, qs, BENCH_FILL_ACT, &s->mem[1], &s->q));
    MLA_BENCH_TRY(
        bench_mx_upload(ctx, rng, MLA_DTYPE_F32, 2, ws, BENCH_FILL_ACT, &s->mem[2], &s->w));
    MLA_BENCH_TRY(
        bench_mx_upload(ctx, rng, MLA_DTYPE_F32, 2, ls, BENCH_FILL_BYTES, &s->mem[3], &s->logits));
    MLA_BENCH_TRY(
        bench_mx_upload(ctx, rng, MLA_DTYPE_I32, 2, is, BENCH_FILL_BYTES, &s->mem[4], &s->idx));

    /* block table: a random permutation of the blocks (pages scattered) */
    int32_t *bt = malloc((size_t)nblocks * 4);
    int32_t *lens = malloc((size_t)B * 4);
    if (!bt || !lens) {
        free(bt);
        free(lens);
        return MLA_ERR_OUT_OF_MEMORY;
    }
    for (int64_t i = 0; i < nblocks; ++i)
        bt[i] = (int32_t)i;
    for (int64_t i = nblocks - 1; i > 0; --i) {
        const int64_t j = (int64_t)bench_rng_below(rng, (uint64_t)i + 1);
        const int32_t t = bt[i];
        bt[i] = bt[j];
        bt[j] = t;
    }
    for (int64_t b = 0; b < B; ++b)
        lens[b] = (int32_t)C;
    const int64_t bts[2] = {B, nb_seq}, lss[1] = {B};
    st = ix_ints(ctx, bt, 2, bts, &s->mem[5], &s->bt);
    if (st == MLA_OK)
        st = ix_ints(ctx, lens, 1, lss, &s->mem[6], &s->lens);
    free(bt);
    free(lens);
    s->k = IX_TOPK;
    if (st == MLA_OK)
        st = mla_indexer_plan_create(ctx, &s->cd, &s->bt, &s->lens, 1, &s->plan);
    return st;
}

static void ix_print(FILE *out, const void *rp, int n)
{
    const ix_row *rows = rp;
    fprintf(out,
            "%7s %3s %10s %7s %9s %8s %11s %6s %8s %10s %9s %7s %9s %10s %6s %8s %8s %8s %7s\n",
            "context", "B", "cache_MiB", "bound", "roof_us", "logit_us", "logit_GB/s", "reps",
            "logit%", "topk_us", "topk%BW", "reps", "total%", "search_us", "reps", "search%",
            "plan_us", "copy_us", "%copy");
    for (int i = 0; i < n; ++i) {
        const ix_row *w = &rows[i];
        fprintf(out, "%7lld %3lld %10.1f %7s %9.1f ", (long long)w->C, (long long)w->B,
                (double)w->cache_bytes / 1048576.0, w->bound, 1e6 * w->roof_s);
        if (!w->ok_logits) {
            fprintf(out, "%s\n", w->note);
            continue;
        }
        fprintf(out, "%8.1f %11.2f %6d %7.1f%% ", 1e6 * w->tl.median_s, w->gbs, w->tl.reps,
                100.0 * w->r_logits);
        if (!w->ok_topk) {
            fprintf(out, "top-k %s\n", w->note);
            continue;
        }
        fprintf(out, "%10.1f %8.1f%% %7d %8.1f%% ", 1e6 * w->tk.median_s, 100.0 * w->r_topk,
                w->tk.reps, 100.0 * w->r_total);
        if (!w->ok_search) {
            fprintf(out, "search %s\n", w->note);
            continue;
        }
        fprintf(out, "%10.1f %6d %7.1f%% %8.1f", 1e6 * w->ts.median_s, w->ts.reps,
                100.0 * w->r_search, 1e6 * w->tp.median_s);
        if (w->ok_copy)
            fprintf(out, " %8.1f %6.1f%%\n", 1e6 * w->tc.median_s, 100.0 * w->r_copy);
        else
            fprintf(out, " copy %s\n", w->note);
    }
}

static void ix_json(bench_json *j, const void *rp, int n)
{
    const ix_row *rows = rp;
    bench_json_array(j, "rows");
    for (int i = 0; i < n; ++i) {
        const ix_row *w = &rows[i];
        bench_json_object(j, NULL);
        bench_json_int(j, "context", w->C);
        bench_json_int(j, "batch", w->B);
        bench_json_int(j, "heads", IX_HI);
        bench_json_int(j, "head_dim", IX_D);
        bench_json_int(j, "block_size", IX_BLOCK);
        bench_json_str(j, "layout", mla_indexer_layout_name(mla_indexer_layout_for(IX_BLOCK)));
        bench_json_int(j, "topk", IX_TOPK);
        bench_json_str(j, "status",
                       w->skipped                   ? "skipped"
                       : w->ok_logits && w->ok_topk && w->ok_search ? "ok"
                                                    : "failed");
        bench_json_str(j, "note", w->note);
        bench_json_int(j, "cache_bytes", w->cache_bytes);
        bench_json_num(j, "flops", w->flops);
        bench_json_num(j, "roofline_s", w->roof_s);
        bench_json_str(j, "bound", w->bound);
        bench_json_num(j, "logits_median_s", w->ok_logits ? w->tl.median_s : NAN);
        bench_json_num(j, "logits_min_s", w->ok_logits ? w->tl.min_s : NAN);
        bench_json_int(j, "logits_reps", w->tl.reps);
        bench_json_num(j, "logits_gbs", w->ok_logits ? w->gbs : NAN);
        bench_json_num(j, "logits_gflops", w->ok_logits ? w->gflops : NAN);
        bench_json_num(j, "logits_roofline_fraction", w->ok_logits ? w->r_logits : NAN);
        bench_json_num(j, "topk_median_s", w->ok_topk ? w->tk.median_s : NAN);
        bench_json_num(j, "topk_min_s", w->ok_topk ? w->tk.min_s : NAN);
        bench_json_int(j, "topk_reps", w->tk.reps);
        bench_json_int(j, "topk_bytes", w->topk_bytes);
        bench_json_num(j, "topk_copy_bw_fraction", w->ok_topk ? w->r_topk : NAN);
        bench_json_num(j, "total_roofline_fraction", w->ok_topk ? w->r_total : NAN);
        bench_json_num(j, "search_median_s", w->ok_search ? w->ts.median_s : NAN);
        bench_json_num(j, "search_min_s", w->ok_search ? w->ts.min_s : NAN);
        bench_json_int(j, "search_reps", w->ts.reps);
        bench_json_num(j, "search_roofline_fraction", w->ok_search ? w->r_search : NAN);
        bench_json_num(j, "plan_update_median_s", w->ok_search ? w->tp.median_s : NAN);
        bench_json_int(j, "sized_copy_bytes", w->cache_bytes / 2);
        bench_json_num(j, "sized_copy_median_s", w->ok_copy ? w->tc.median_s : NAN);
        bench_json_num(j, "search_sized_copy_fraction", w->ok_copy ? w->r_copy : NAN);
        bench_json_close(j, '}');
    }
    bench_json_close(j, ']');
}

int bench_indexer_cmd(int argc, char **argv)
{
    bench_mx_args a;
    int rc = bench_mx_parse(argc, argv, "indexer", "--contexts", "--batch", &a);
    if (rc != BENCH_EXIT_OK)
        return rc;
    if (!a.n_list[0]) {
        const int64_t c[3] = {4096, 32768, 131072};
        memcpy(a.list[0], c, sizeof c);
        a.n_list[0] = 3;
    }
    if (!a.n_list[1]) {
        const int64_t b[3] = {1, 16, 64};
        memcpy(a.list[1], b, sizeof b);
        a.n_list[1] = 3;
    }
    bench_ceilings c;
    mla_context *ctx = bench_mx_open(&a, &c);
    if (!ctx)
        return BENCH_EXIT_FAIL;
    printf("indexer   : Hi %d, head_dim %d, block %d (%s), next_n 1, e4m3fn, top-k %d\n\n", IX_HI,
           IX_D, IX_BLOCK, mla_indexer_layout_name(mla_indexer_layout_for(IX_BLOCK)), IX_TOPK);
    fflush(stdout);
    const double start = bench_now();
    const int n = a.n_list[0] * a.n_list[1];
    ix_row *rows = calloc((size_t)n, sizeof *rows);
    if (!rows) {
        mla_context_destroy(ctx);
        return BENCH_EXIT_FAIL;
    }
    bench_rng rng;
    bench_rng_seed(&rng, a.seed);
    const double bw = c.copy_gbs * 1e9, mm = c.matmul_gflops * 1e9;
    /* logits + top-k seconds per key of the largest case measured so far (small
     * cases overstate it: fixed costs, and on a busy host scheduler slices) */
    double sec_per_key = 0.0, keys_seen = 0.0;
    int errors = 0;
    fprintf(stderr, "rows:\n");
    for (int ci = 0; ci < a.n_list[0]; ++ci) {
        for (int bi = 0; bi < a.n_list[1]; ++bi) {
            ix_row *w = &rows[ci * a.n_list[1] + bi];
            w->C = a.list[0][ci];
            w->B = a.list[1][bi];
            w->r_logits = w->r_topk = w->r_total = w->r_search = w->r_copy = NAN;
            const double keys = (double)w->C * (double)w->B;
            w->cache_bytes = w->B * ((w->C + IX_BLOCK - 1) / IX_BLOCK) * IX_BLOCK * IX_KEY_BYTES;
            w->flops = 2.0 * IX_HI * IX_D * keys;
            w->topk_bytes = w->B * w->C * 4 + w->B * IX_TOPK * 4 + w->B * 4;
            const double t_bw = bw > 0 ? (double)w->B * (double)w->C * IX_KEY_BYTES / bw : 0.0,
                         t_mm = mm > 0 ? w->flops / mm : 0.0;
            w->roof_s = t_bw > t_mm ? t_bw : t_mm;
            w->bound = t_bw >= t_mm ? "copy" : "matmul";
            const double predicted = sec_per_key * keys;
            if (predicted > a.max_call_s) {
                w->skipped = 1;
                snprintf(w->note, sizeof w->note,
                         "skipped: predicted %.2f s per call > --max-call-s %.2f", predicted,
                         a.max_call_s);
                fprintf(stderr, "  C=%-6lld B=%-3lld %s\n", (long long)w->C, (long long)w->B,
                        w->note);
                continue;
            }
            ix_set s;
            memset(&s, 0, sizeof s);
            s.ctx = ctx;
            mla_status st = ix_setup(&s, &rng, w->C, w->B);
            if (st == MLA_OK)
                st = bench_mx_time(ctx, &a, ix_logits, &s, 1, a.row_budget_s, &w->tl);
            if (st == MLA_OK) {
                w->ok_logits = 1;
                st = bench_mx_time(ctx, &a, ix_topk, &s, 1, a.row_budget_s, &w->tk);
                if (st == MLA_OK)
                    w->ok_topk = 1;
            }
            if (st == MLA_OK)
                st = bench_mx_time(ctx, &a, ix_search, &s, 1, a.row_budget_s, &w->ts);
            if (st == MLA_OK)
                st = bench_mx_time(ctx, &a, ix_plan_update, &s, 1, a.row_budget_s / 4, &w->tp);
            if (st == MLA_OK) {
                w->ok_search = 1;
                w->r_search = w->roof_s > 0 ? w->roof_s / w->ts.median_s : NAN;
                st = bench_mx_time(ctx, &a, ix_copy, &s, 1, a.row_budget_s / 4, &w->tc);
            }
            if (st == MLA_OK) {
                w->ok_copy = 1;
                w->r_copy = w->tc.median_s / w->ts.median_s;
            }
            ix_free(&s);
            if (st != MLA_OK) {
                bench_mx_note(ctx, st, w->note, sizeof w->note);
                errors += st != MLA_ERR_UNSUPPORTED;
            }
            if (w->ok_logits) {
                const double tl = w->tl.median_s;
                w->gbs = (double)w->cache_bytes / tl / 1e9;
                w->gflops = w->flops / tl / 1e9;
                w->r_logits = w->roof_s > 0 ? w->roof_s / tl : NAN;
                const double tk = w->ok_topk ? w->tk.median_s : 0.0;
                if (keys >= keys_seen) {
                    sec_per_key = (tl + tk) / keys;
                    keys_seen = keys;
                }
                if (w->ok_topk) {
                    w->r_topk = bw > 0 ? (double)w->topk_bytes / bw / tk : NAN;
                    w->r_total = w->roof_s > 0 ? w->roof_s / (tl + tk) : NAN;
                }
            }
            fprintf(stderr, "  C=%-6lld B=%-3lld logits %.1f us, top-k %.1f us %s\n",
                    (long long)w->C, (long long)w->B, w->ok_logits ? 1e6 * w->tl.median_s : 0.0,
                    w->ok_topk ? 1e6 * w->tk.median_s : 0.0, w->note);
        }
    }
    if (bench_mx_finish(
            &a, ctx, &c, ix_print, ix_json, rows, n, start,
            "roof = max(132 B per key / copy BW, 2*64*128 FLOP per key / matmul rate); logit% "
            "and total% = roof / time (total = logits + top-k, each checked); topk%BW = (logits "
            "read + indices written) / copy BW / time; search% = roof / planned search (logits + "
            "top-k); plan_us = the plan's update, once per step; copy_us = mla_memcpy of half the "
            "cache's bytes (read + written = the roofline's bytes) at this size, %copy = copy_us / "
            "search_us (docs/PERFORMANCE.md)",
            errors) != BENCH_EXIT_OK)
        rc = BENCH_EXIT_FAIL;
    free(rows);
    mla_context_destroy(ctx);
    return rc;
}
