/* `mla bench decode`: the MLA attention core in decode (include/mla/
 * mla_attention.h: next_n 1, paged, block 64, q bf16 [B, H, 576], o bf16
 * [B, H, 512], lse f32; L = 512, R = 64; bench_attention.h).
 *
 * Dense (default): FlashMLA's benchmark shapes (batch 128, context 4096,
 * heads 16 and 128; cache bf16 NORMAL, fp8 e4m3fn NORMAL and FP8_SCALED) and
 * small laptop shapes (batch 1 and 4, contexts 1024..8192, heads 16, bf16).
 * --sparse: DeepSeek-V3.2's top-k decode, each row attending to --topk
 * (2048) distinct positions drawn from its context (device 32768, host
 * 8192), caches bf16 and FP8_SCALED, heads 16, 64, 128, batch 1, 16, 64, 128.
 *
 * Counted as FlashMLA counts them, over the keys a row attends to (dense: C;
 * sparse: min(topk, C), the selected rows only):
 *   FLOPs = 2 * B * s_q * H * keys * (d + dv), d = L + R = 576, dv = L = 512
 *   bytes = B * keys * bytes_per_token (1152 bf16, 576 fp8, 656 FP8_SCALED)
 *           + q (B H 576 x 2) + o (B H 512 x 2) (+ sparse: the indices, B topk x 4)
 * Roofline time: max(bytes / copy bandwidth, FLOPs / matmul rate), both
 * ceilings measured in this run (bench/ceilings.c); a row's ratio is that
 * time over the measured median. The plan (mla_attention_plan_create, the
 * automatic split-KV schedule) is made before timing; only
 * mla_attention_run is timed. Small caches rotate over several input sets
 * (each its own blocks, q, o, indices and plan) so that the keys come from
 * memory.
 *
 * cpu_us: the process's CPU time per call (all threads; near threads x
 * median_us when nothing else ran on the cores). Rows run in ascending
 * FLOPs; a row predicted slower than --max-call-s (from the seconds per
 * FLOP of the largest row so far) is skipped.
 * --quick: batch 1 and 4, context 1024 (sparse: 4096), heads 16, each cache
 * (the smoke tests). --batch / --contexts / --heads give a cross product
 * over the caches instead of the default table; --caches keeps only those. */
#define _POSIX_C_SOURCE 200809L

#include <stdlib.h>
#include <string.h>

#include "bench/bench_attention.h"

#define DC_MAX_ROWS 64
#define DC_TOPK 2048

typedef struct dc_row {
    ba_shape w;
    int64_t keys; /* attended per row */
    int64_t cache_bytes;
    ba_result r;
} dc_row;

static void dc_print(FILE *out, const void *rp, int n)
{
    const dc_row *rows = rp;
    fprintf(out, "%5s %6s %4s %-10s %5s %s\n", "batch", "ctx", "H", "cache", "topk",
            BA_RESULT_HEADER);
    for (int i = 0; i < n; ++i) {
        const ba_shape *w = &rows[i].w;
        fprintf(out, "%5lld %6lld %4lld %-10s %5lld ", (long long)w->B, (long long)w->C,
                (long long)w->H, ba_cache_names[w->cache], (long long)w->topk);
        ba_print_result(out, &rows[i].r);
    }
}

static void dc_json(bench_json *j, const void *rp, int n)
{
    const dc_row *rows = rp;
    bench_json_array(j, "rows");
    for (int i = 0; i < n; ++i) {
        const ba_shape *w = &rows[i].w;
        bench_json_object(j, NULL);
        bench_json_str(j, "op", w->topk > 0 ? "sparse_decode" : "decode");
        bench_json_int(j, "batch", w->B);
        bench_json_int(j, "context", w->C);
        bench_json_int(j, "heads", w->H);
        bench_json_str(j, "cache", ba_cache_names[w->cache]);
        bench_json_int(j, "topk", w->topk);
        bench_json_int(j, "keys", rows[i].keys);
        bench_json_int(j, "s_q", 1);
        bench_json_int(j, "block_size", BA_BLOCK);
        bench_json_str(j, "q_dtype", "bf16");
        bench_json_str(j, "out_dtype", "bf16");
        bench_json_int(j, "cache_bytes", rows[i].cache_bytes);
        ba_json_result(j, &rows[i].r);
        bench_json_close(j, '}');
    }
    bench_json_close(j, ']');
}

static int dc_add(dc_row *rows, int n, int64_t B, int64_t C, int64_t H, ba_cache c, int64_t topk)
{
    if (n >= DC_MAX_ROWS)
        return n;
    memset(&rows[n], 0, sizeof rows[n]);
    const ba_shape w = {B, C, 1, H, topk, c};
    rows[n].w = w;
    rows[n].keys = topk > 0 && topk < C ? topk : C;
    return n + 1;
}

static int dc_by_flops(const void *x, const void *y)
{
    const dc_row *a = x, *b = y;
    const double fa = (double)a->w.B * (double)a->keys * (double)a->w.H,
                 fb = (double)b->w.B * (double)b->keys * (double)b->w.H;
    if (fa != fb)
        return fa < fb ? -1 : 1;
    return (int)a->w.cache - (int)b->w.cache;
}

/* The rows of the sweep (see the top of the file); --caches keeps those caches. */
static int dc_rows(const bench_mx_args *a, const ba_opts *o, int device, dc_row *rows)
{
    const int sparse = o->sparse;
    const int64_t tk = sparse ? o->topk : 0;
    const unsigned want = o->caches ? o->caches
                          : sparse  ? (1u << BA_BF16) | (1u << BA_FP8_SCALED)
                                    : (1u << BA_CACHES) - 1;
    dc_row all[DC_MAX_ROWS];
    int n = 0;
    if (a->n_list[0] || a->n_list[1] || o->n_heads) { /* a cross product over the caches */
        const int64_t dctx = sparse ? (device ? 32768 : 8192) : 4096;
        const int nc = a->n_list[0] ? a->n_list[0] : 1, nb = a->n_list[1] ? a->n_list[1] : 1,
                  nh = o->n_heads ? o->n_heads : 1;
        for (int ci = 0; ci < nc; ++ci)
            for (int bi = 0; bi < nb; ++bi)
                for (int hi = 0; hi < nh; ++hi)
                    for (int k = 0; k < BA_CACHES; ++k)
                        n = dc_add(all, n, a->n_list[1] ? a->list[1][bi] : 128,
                                   a->n_list[0] ? a->list[0][ci] : dctx,
                                   o->n_heads ? o->heads[hi] : 16, (ba_cache)k, tk);
    } else if (o->quick) {
        for (int k = 0; k < BA_CACHES; ++k) {
            n = dc_add(all, n, 1, sparse ? 4096 : 1024, 16, (ba_cache)k, tk);
            n = dc_add(all, n, 4, sparse ? 4096 : 1024, 16, (ba_cache)k, tk);
        }
    } else if (sparse) {
        const int64_t sb[4] = {1, 16, 64, 128}, sh[3] = {16, 64, 128};
        for (int bi = 0; bi < 4; ++bi)
            for (int hi = 0; hi < 3; ++hi)
                for (int k = 0; k < BA_CACHES; ++k)
                    n = dc_add(all, n, sb[bi], device ? 32768 : 8192, sh[hi], (ba_cache)k, tk);
    } else {
        const int64_t lb[2] = {1, 4}, lc[3] = {1024, 4096, 8192};
        for (int bi = 0; bi < 2; ++bi) /* laptop shapes: bf16 */
            for (int ci = 0; ci < 3; ++ci)
                n = dc_add(all, n, lb[bi], lc[ci], 16, BA_BF16, 0);
        for (int h = 0; h < 2; ++h) /* FlashMLA's */
            for (int k = 0; k < BA_CACHES; ++k)
                n = dc_add(all, n, 128, 4096, h ? 128 : 16, (ba_cache)k, 0);
    }
    int m = 0;
    for (int i = 0; i < n; ++i)
        if (want & 1u << all[i].w.cache)
            rows[m++] = all[i];
    qsort(rows, (size_t)m, sizeof *rows, dc_by_flops);
    return m;
}

int bench_decode_cmd(int argc, char **argv)
{
    ba_opts o;
    memset(&o, 0, sizeof o);
    o.topk = DC_TOPK;
    char **av = malloc((size_t)(argc + 1) * sizeof *av);
    if (!av)
        return BENCH_EXIT_FAIL;
    memcpy(av, argv, (size_t)argc * sizeof *av);
    int ac = argc;
    if (ba_strip_args(&ac, av, 1, &o)) {
        fprintf(stderr, "mla bench decode: bad --heads (a list of 1..128), --caches (of bf16, "
                        "fp8, fp8_scaled) or --topk\n");
        free(av);
        return BENCH_EXIT_USAGE;
    }
    bench_mx_args a;
    int rc = bench_mx_parse(ac, av, "decode", "--contexts", "--batch", &a);
    free(av);
    if (rc != BENCH_EXIT_OK)
        return rc;
    dc_row *rows = calloc(DC_MAX_ROWS, sizeof *rows);
    if (!rows)
        return BENCH_EXIT_FAIL;
    bench_ceilings c;
    mla_context *ctx = bench_mx_open(&a, &c);
    if (!ctx) {
        free(rows);
        return BENCH_EXIT_FAIL;
    }
    const int n = dc_rows(&a, &o, a.device, rows);
    const int sparse = o.sparse;
    if (sparse)
        printf("decode    : DeepSeek-V3.2 sparse MLA (L %d, R %d, softmax scale of the preset), "
               "next_n 1, top-k %lld distinct positions per row drawn from the context, paged "
               "block %d, q bf16, o bf16 + lse; splits: the plan's automatic choice\n\n",
               BA_L, BA_R, (long long)o.topk, BA_BLOCK);
    else
        printf("decode    : DeepSeek-V3 MLA (L %d, R %d, softmax scale of the preset), next_n 1, "
               "dense, paged block %d, q bf16, o bf16 + lse; splits: the plan's automatic "
               "choice\n\n",
               BA_L, BA_R, BA_BLOCK);
    fflush(stdout);
    const double start = bench_now();
    ba_sweep sw;
    ba_sweep_init(&sw, ctx, &a, &c);
    fprintf(stderr, "rows:\n");
    for (int i = 0; i < n; ++i) {
        dc_row *row = &rows[i];
        const ba_shape *w = &row->w;
        row->cache_bytes = w->B * row->keys * ba_token_bytes(w->cache);
        row->r.bytes = row->cache_bytes + w->B * w->H * (BA_L + BA_R) * 2 + w->B * w->H * BA_L * 2 +
                       w->B * w->topk * 4;
        row->r.flops = 2.0 * (double)w->B * (double)w->H * (double)row->keys * (BA_L + BA_R + BA_L);
        char label[96];
        snprintf(label, sizeof label, "B=%-3lld C=%-6lld H=%-3lld %-10s", (long long)w->B,
                 (long long)w->C, (long long)w->H, ba_cache_names[w->cache]);
        ba_measure(&sw, &ba_absorbed, w, label, &row->r);
    }
    const int errors = sw.errors;
    if (bench_mx_finish(&a, ctx, &c, dc_print, dc_json, rows, n, start,
                        sparse ? "keys = min(topk, context); FLOPs = 2 B H keys (576 + 512), bytes "
                                 "= the selected rows (B keys bytes per token) + q + o + indices; "
                                 "roof = max(bytes / copy BW, FLOPs / matmul rate); roof% = roof "
                                 "/ median (docs/PERFORMANCE.md)"
                               : "FLOPs = 2 B H C (576 + 512), bytes = cache (B C bytes per token) "
                                 "+ q + o; roof = max(bytes / copy BW, FLOPs / matmul rate); "
                                 "roof% = roof / median (docs/PERFORMANCE.md)",
                        errors) != BENCH_EXIT_OK)
        rc = BENCH_EXIT_FAIL;
    free(rows);
    mla_context_destroy(ctx);
    return rc;
}
