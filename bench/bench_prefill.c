/* `mla bench prefill`: the attention of a prompt chunk, T new tokens per
 * sequence attending causally to themselves (context = T, next_n = T), on
 * DeepSeek-V3's geometry (bench_attention.h): T = 512..16384, one sequence
 * and a batch of 4, heads 16 and 128, bf16 cache, q bf16, o bf16 + lse.
 *
 * A form is how the attention is computed; each has its own FLOP count:
 *   absorbed  mla_attention_run over the latent cache: 576-dim scores and
 *             512-dim values per head (MLA.md section 2, step 7),
 *             FLOPs = 2 * B * H * P * (576 + 512);
 * with P = T (T + 1) / 2 the causal (query, key) pairs of a sequence. Every
 * row also reports the expanded form's count, 2 * B * H * P * (192 + 128)
 * (K_nope and V decompressed through kv_b_proj, 192-dim scores, 128-dim
 * values: what `python3 bench/peer_torch.py --prefill` times with torch's
 * scaled_dot_product_attention), so that the two can be set side by side
 * (peer_torch.py --compare). A new form is one more entry of `forms` below
 * (its name, FLOPs per pair, set-up / run / free).
 *
 * bytes = cache (B T 1152) + q (B T H 576 x 2) + o (B T H 512 x 2);
 * roof = max(bytes / copy BW, FLOPs / matmul rate) with the ceilings of this
 * run; roof% = roof / median. Rows run in ascending FLOPs; a row predicted
 * slower than --max-call-s is skipped. --quick: T = 256 and 512, batch 1,
 * heads 16 (the smoke test). --tokens / --batch / --heads give a cross
 * product. */
#define _POSIX_C_SOURCE 200809L

#include <stdlib.h>
#include <string.h>

#include "bench/bench_attention.h"

#define PF_MAX_ROWS 64

typedef struct pf_form {
    const ba_form *form;
    double flops_per_pair; /* per head: 2 (d_qk + d_v) */
} pf_form;

static const pf_form forms[] = {
    {&ba_absorbed, 2.0 * (BA_L + BA_R + BA_L)},
};

#define PF_EXPANDED_PER_PAIR (2.0 * (192 + 128))

typedef struct pf_row {
    ba_shape w; /* n = C = T */
    const pf_form *form;
    double flops_expanded;
    ba_result r;
} pf_row;

static double pairs(int64_t T) { return (double)T * (double)(T + 1) / 2.0; }

static void pf_print(FILE *out, const void *rp, int n)
{
    const pf_row *rows = rp;
    fprintf(out, "%5s %6s %4s %-9s %9s %s\n", "batch", "T", "H", "form", "xGFLOP/s",
            BA_RESULT_HEADER);
    for (int i = 0; i < n; ++i) {
        const ba_result *r = &rows[i].r;
        fprintf(out, "%5lld %6lld %4lld %-9s ", (long long)rows[i].w.B, (long long)rows[i].w.C,
                (long long)rows[i].w.H, rows[i].form->form->name);
        if (r->ok)
            fprintf(out, "%9.1f ", rows[i].flops_expanded / r->t.median_s / 1e9);
        else
            fprintf(out, "%9s ", "-");
        ba_print_result(out, r);
    }
}

static void pf_json(bench_json *j, const void *rp, int n)
{
    const pf_row *rows = rp;
    bench_json_array(j, "rows");
    for (int i = 0; i < n; ++i) {
        bench_json_object(j, NULL);
        bench_json_str(j, "op", "prefill");
        bench_json_str(j, "form", rows[i].form->form->name);
        bench_json_int(j, "batch", rows[i].w.B);
        bench_json_int(j, "tokens", rows[i].w.C);
        bench_json_int(j, "heads", rows[i].w.H);
        bench_json_str(j, "cache", ba_cache_names[rows[i].w.cache]);
        bench_json_int(j, "causal", 1);
        bench_json_str(j, "q_dtype", "bf16");
        bench_json_str(j, "out_dtype", "bf16");
        bench_json_num(j, "flops_expanded", rows[i].flops_expanded);
        ba_json_result(j, &rows[i].r);
        bench_json_close(j, '}');
    }
    bench_json_close(j, ']');
}

static int pf_add(pf_row *rows, int n, int64_t B, int64_t T, int64_t H, const pf_form *f)
{
    if (n >= PF_MAX_ROWS)
        return n;
    memset(&rows[n], 0, sizeof rows[n]);
    const ba_shape w = {B, T, T, H, 0, BA_BF16};
    rows[n].w = w;
    rows[n].form = f;
    return n + 1;
}

static int pf_by_flops(const void *x, const void *y)
{
    const pf_row *a = x, *b = y;
    const double fa = (double)a->w.B * pairs(a->w.C) * (double)a->w.H,
                 fb = (double)b->w.B * pairs(b->w.C) * (double)b->w.H;
    return fa < fb ? -1 : fa > fb;
}

int bench_prefill_cmd(int argc, char **argv)
{
    ba_opts o;
    memset(&o, 0, sizeof o);
    char **av = malloc((size_t)(argc + 1) * sizeof *av);
    if (!av)
        return BENCH_EXIT_FAIL;
    memcpy(av, argv, (size_t)argc * sizeof *av);
    int ac = argc;
    if (ba_strip_args(&ac, av, 0, &o) || (o.caches & ~(1u << BA_BF16))) {
        fprintf(stderr, "mla bench prefill: bad --heads (a list of 1..128) or --caches (bf16)\n");
        free(av);
        return BENCH_EXIT_USAGE;
    }
    bench_mx_args a;
    int rc = bench_mx_parse(ac, av, "prefill", "--tokens", "--batch", &a);
    free(av);
    if (rc != BENCH_EXIT_OK)
        return rc;
    pf_row *rows = calloc(PF_MAX_ROWS, sizeof *rows);
    if (!rows)
        return BENCH_EXIT_FAIL;
    const pf_form *f = &forms[0];
    int n = 0;
    if (a.n_list[0] || a.n_list[1] || o.n_heads) {
        const int nt = a.n_list[0] ? a.n_list[0] : 1, nb = a.n_list[1] ? a.n_list[1] : 1,
                  nh = o.n_heads ? o.n_heads : 1;
        for (int ti = 0; ti < nt; ++ti)
            for (int bi = 0; bi < nb; ++bi)
                for (int hi = 0; hi < nh; ++hi)
                    n = pf_add(rows, n, a.n_list[1] ? a.list[1][bi] : 1,
                               a.n_list[0] ? a.list[0][ti] : 4096, o.n_heads ? o.heads[hi] : 128,
                               f);
    } else if (o.quick) {
        n = pf_add(rows, n, 1, 256, 16, f);
        n = pf_add(rows, n, 1, 512, 16, f);
    } else {
        const int64_t ts[6] = {512, 1024, 2048, 4096, 8192, 16384}, bs[2] = {1, 4},
                      hs[2] = {16, 128};
        for (int ti = 0; ti < 6; ++ti)
            for (int bi = 0; bi < 2; ++bi)
                for (int hi = 0; hi < 2; ++hi)
                    n = pf_add(rows, n, bs[bi], ts[ti], hs[hi], f);
    }
    qsort(rows, (size_t)n, sizeof *rows, pf_by_flops);

    bench_ceilings c;
    mla_context *ctx = bench_mx_open(&a, &c);
    if (!ctx) {
        free(rows);
        return BENCH_EXIT_FAIL;
    }
    printf("prefill   : DeepSeek-V3 MLA (L %d, R %d, softmax scale of the preset), T new tokens "
           "per sequence attending causally (context = next_n = T), paged block %d, bf16 cache, "
           "q bf16, o bf16 + lse; splits: the plan's automatic choice\n\n",
           BA_L, BA_R, BA_BLOCK);
    fflush(stdout);
    const double start = bench_now();
    ba_sweep sw;
    ba_sweep_init(&sw, ctx, &a, &c);
    fprintf(stderr, "rows:\n");
    for (int i = 0; i < n; ++i) {
        pf_row *row = &rows[i];
        const ba_shape *w = &row->w;
        const int64_t T = w->C;
        row->r.bytes = w->B * T * ba_token_bytes(w->cache) + w->B * T * w->H * (BA_L + BA_R) * 2 +
                       w->B * T * w->H * BA_L * 2;
        row->r.flops = (double)w->B * (double)w->H * pairs(T) * row->form->flops_per_pair;
        row->flops_expanded = (double)w->B * (double)w->H * pairs(T) * PF_EXPANDED_PER_PAIR;
        char label[96];
        snprintf(label, sizeof label, "B=%-3lld T=%-6lld H=%-3lld %-9s", (long long)w->B,
                 (long long)T, (long long)w->H, row->form->form->name);
        ba_measure(&sw, row->form->form, w, label, &row->r);
    }
    const int errors = sw.errors;
    if (bench_mx_finish(&a, ctx, &c, pf_print, pf_json, rows, n, start,
                        "P = T (T + 1) / 2 causal pairs; FLOPs = 2 B H P (576 + 512) absorbed; "
                        "xGFLOP/s = the expanded form's 2 B H P (192 + 128) per second, the "
                        "count of the PyTorch SDPA peer; roof = max(bytes / copy BW, FLOPs / "
                        "matmul rate); roof% = roof / median (docs/PERFORMANCE.md)",
                        errors) != BENCH_EXIT_OK)
        rc = BENCH_EXIT_FAIL;
    free(rows);
    mla_context_destroy(ctx);
    return rc;
}
