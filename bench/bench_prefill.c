/* `mla bench prefill`: the attention of a prompt chunk, T new tokens per
 * sequence attending causally to themselves (context = T, next_n = T), on
 * DeepSeek-V3's geometry (bench_attention.h): T = 512..16384, one sequence
 * and a batch of 4, heads 16 and 128, bf16 cache, q bf16, o bf16 + lse.
 *
 * A form is how the attention is computed; each shape runs in both, each
 * form with its own FLOP count:
 *   absorbed  mla_attention_run over the latent cache: 576-dim scores and
 *             512-dim values per head (MLA.md section 2, step 7),
 *             FLOPs = 2 * B * H * P * (576 + 512);
 *   expanded  mla_attention_expanded (MLA.md, "The expanded form"): K_nope
 *             and V decompressed through a bf16 kv_b_proj, 192-dim scores,
 *             128-dim values, FLOPs = 2 B H P (192 + 128) + 2 B T H 256 512
 *             (the decompression);
 * with P = T (T + 1) / 2 the causal (query, key) pairs of a sequence. Every
 * row also reports the attention part of the expanded count, 2 B H P (192 +
 * 128), as xGFLOP/s: what `python3 bench/peer_torch.py --prefill` times with
 * torch's scaled_dot_product_attention, so that the forms and the peer can
 * be set side by side (peer_torch.py --compare). A new form is one more
 * entry of `forms` below (its name, FLOPs per pair and per key, its bytes,
 * set-up / run / free).
 *
 * plan_form: the form a layer plan chooses for the row's step (AUTO,
 * mla_layer_form_for: expanded when the step's T B rows reach
 * mla_layer_expanded_min_rows per sequence, i.e. T >= that count; the bench's
 * step is dense, bf16, rotated before the attention, which the expanded form
 * takes), so that a report can check the rule against both forms' times.
 *
 * bytes = cache (B T 1152) + q (B T H 576 x 2) + o (B T H 512 x 2) absorbed,
 * cache + q (B T H 192 x 2) + o (B T H 128 x 2) + kv_b_proj (H 256 512 x 2)
 * expanded;
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

#define PF_NOPE 128
#define PF_V 128
#define PF_EXPANDED_PER_PAIR (2.0 * (PF_NOPE + BA_R + PF_V))

/* ------------------------------------------------------ the expanded form */

/* The absorbed form's input sets (cache, block tables, lengths; its q and o
 * hold the expanded form's q_nope / q_pe and o as views), a bf16 kv_b_proj
 * and the expanded workspace. */
static struct {
    mla_attention_expanded_desc desc;
    void *kvb_mem, *ws_mem;
    mla_weight kvb;
    mla_tensor ws, q_nope[BA_MAX_INST], q_pe[BA_MAX_INST], o[BA_MAX_INST];
} ex;

static mla_tensor sub(const mla_tensor *t, int64_t first, int64_t n)
{
    mla_tensor v = *t;
    v.data = (uint8_t *)t->data + first * t->stride[2] * (int64_t)mla_dtype_size(t->dtype);
    v.shape[2] = n;
    return v;
}

static mla_status ex_setup(ba_set *s, bench_rng *rng, const ba_shape *w, int n)
{
    MLA_BENCH_TRY(ba_setup(s, rng, w, n));
    mla_context *ctx = s->ctx;
    for (int i = 0; i < n; ++i) { /* not this form's (the splits column reads 0) */
        mla_attention_plan_destroy(s->plan[i]);
        s->plan[i] = NULL;
    }
    mla_model_config cfg;
    MLA_BENCH_TRY(mla_model_config_preset("DeepSeek-V3", &cfg));
    MLA_BENCH_TRY(mla_attention_expanded_desc_default(&cfg, &s->desc.cache, &ex.desc));
    ex.desc.heads = w->H;
    ex.desc.out_dtype = MLA_DTYPE_BF16;
    ex.desc.next_n = (int32_t)w->n;
    const int64_t N = w->H * (PF_NOPE + PF_V), kshape[2] = {N, BA_L};
    MLA_BENCH_TRY(mla_malloc(ctx, (size_t)(N * BA_L * 2), &ex.kvb_mem));
    MLA_BENCH_TRY(bench_fill_context(ctx, ex.kvb_mem, MLA_DTYPE_BF16, N * BA_L, BENCH_FILL_ACT,
                                     bench_rng_next(rng)));
    memset(&ex.kvb, 0, sizeof ex.kvb);
    MLA_BENCH_TRY(mla_tensor_init(&ex.kvb.w, ex.kvb_mem, MLA_DTYPE_BF16,
                                  mla_context_memory(ctx), 2, kshape));
    int64_t bytes = 0;
    MLA_BENCH_TRY(mla_attention_expanded_workspace_bytes(ctx, &ex.desc, w->B, w->B * w->C, &bytes));
    MLA_BENCH_TRY(mla_malloc(ctx, (size_t)bytes, &ex.ws_mem));
    MLA_BENCH_TRY(mla_tensor_init(&ex.ws, ex.ws_mem, MLA_DTYPE_U8, mla_context_memory(ctx), 1,
                                  (const int64_t[]){bytes}));
    for (int i = 0; i < n; ++i) {
        ex.q_nope[i] = sub(&s->q[i], 0, PF_NOPE);
        ex.q_pe[i] = sub(&s->q[i], BA_L, BA_R);
        ex.o[i] = sub(&s->o[i], 0, PF_V);
    }
    return MLA_OK;
}

static mla_status ex_run(void *arg, int inst)
{
    ba_set *s = arg;
    const mla_attention_expanded_args a = {&ex.q_nope[inst], &ex.q_pe[inst],   &s->cache,
                                           &s->bt[inst],     &s->lens,         NULL,
                                           &ex.kvb,          &ex.o[inst],      &s->lse[inst],
                                           &ex.ws};
    return mla_attention_expanded(s->ctx, &ex.desc, &a);
}

static void ex_free(ba_set *s)
{
    void *m[2] = {ex.kvb_mem, ex.ws_mem};
    for (int k = 0; k < 2; ++k)
        if (m[k])
            mla_free(s->ctx, m[k]);
    memset(&ex, 0, sizeof ex);
    ba_free(s);
}

static const ba_form ba_expanded = {"expanded", ex_setup, ex_run, ex_free};

typedef struct pf_form {
    const ba_form *form;
    double flops_per_pair; /* per head: 2 (d_qk + d_v) */
    double flops_per_key;  /* per head: the decompression's 2 (nope + v) L */
    int64_t q_dims, o_dims, weight_bytes_per_head;
} pf_form;

static const pf_form forms[] = {
    {&ba_absorbed, 2.0 * (BA_L + BA_R + BA_L), 0.0, BA_L + BA_R, BA_L, 0},
    {&ba_expanded, PF_EXPANDED_PER_PAIR, 2.0 * (PF_NOPE + PF_V) * BA_L, PF_NOPE + BA_R, PF_V,
     (PF_NOPE + PF_V) * BA_L * 2},
};
#define PF_FORMS ((int)(sizeof forms / sizeof forms[0]))

typedef struct pf_row {
    ba_shape w; /* n = C = T */
    const pf_form *form;
    double flops_expanded;
    const char *plan_form; /* the layer plan's AUTO choice for the step */
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
        const char *name = rows[i].form->form->name;
        fprintf(out, "%5lld %6lld %4lld %s%-*s ", (long long)rows[i].w.B, (long long)rows[i].w.C,
                (long long)rows[i].w.H, name, 9 - (int)strlen(name),
                strcmp(name, rows[i].plan_form) ? "" : "*");
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
        bench_json_str(j, "plan_form", rows[i].plan_form);
        ba_json_result(j, &rows[i].r);
        bench_json_close(j, '}');
    }
    bench_json_close(j, ']');
}

/* The shape's rows, one per form. */
static int pf_add(pf_row *rows, int n, int64_t B, int64_t T, int64_t H)
{
    for (int f = 0; f < PF_FORMS && n < PF_MAX_ROWS; ++f, ++n) {
        memset(&rows[n], 0, sizeof rows[n]);
        const ba_shape w = {B, T, T, H, 0, BA_BF16};
        rows[n].w = w;
        rows[n].form = &forms[f];
    }
    return n;
}

/* Ascending pairs, the forms of a shape side by side (qsort is not stable). */
static int pf_by_flops(const void *x, const void *y)
{
    const pf_row *a = x, *b = y;
    const double fa = (double)a->w.B * pairs(a->w.C) * (double)a->w.H,
                 fb = (double)b->w.B * pairs(b->w.C) * (double)b->w.H;
    if (fa != fb)
        return fa < fb ? -1 : 1;
    return (a->form > b->form) - (a->form < b->form);
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
    int n = 0;
    if (a.n_list[0] || a.n_list[1] || o.n_heads) {
        const int nt = a.n_list[0] ? a.n_list[0] : 1, nb = a.n_list[1] ? a.n_list[1] : 1,
                  nh = o.n_heads ? o.n_heads : 1;
        for (int ti = 0; ti < nt; ++ti)
            for (int bi = 0; bi < nb; ++bi)
                for (int hi = 0; hi < nh; ++hi)
                    n = pf_add(rows, n, a.n_list[1] ? a.list[1][bi] : 1,
                               a.n_list[0] ? a.list[0][ti] : 4096, o.n_heads ? o.heads[hi] : 128);
    } else if (o.quick) {
        n = pf_add(rows, n, 1, 256, 16);
        n = pf_add(rows, n, 1, 512, 16);
    } else {
        const int64_t ts[6] = {512, 1024, 2048, 4096, 8192, 16384}, bs[2] = {1, 4},
                      hs[2] = {16, 128};
        for (int ti = 0; ti < 6; ++ti)
            for (int bi = 0; bi < 2; ++bi)
                for (int hi = 0; hi < 2; ++hi)
                    n = pf_add(rows, n, bs[bi], ts[ti], hs[hi]);
    }
    qsort(rows, (size_t)n, sizeof *rows, pf_by_flops);
    mla_model_config cfg;
    const int64_t min_rows = mla_model_config_preset("DeepSeek-V3", &cfg) == MLA_OK
                                 ? mla_layer_expanded_min_rows(&cfg)
                                 : -1;
    for (int i = 0; i < n; ++i)
        rows[i].plan_form = min_rows > 0 && rows[i].w.C >= min_rows ? "expanded" : "absorbed";

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
        const pf_form *f = row->form;
        row->r.bytes = w->B * T * ba_token_bytes(w->cache) + w->B * T * w->H * f->q_dims * 2 +
                       w->B * T * w->H * f->o_dims * 2 + w->H * f->weight_bytes_per_head;
        row->r.flops = (double)w->B * (double)w->H *
                       (pairs(T) * f->flops_per_pair + (double)T * f->flops_per_key);
        row->flops_expanded = (double)w->B * (double)w->H * pairs(T) * PF_EXPANDED_PER_PAIR;
        char label[96];
        snprintf(label, sizeof label, "B=%-3lld T=%-6lld H=%-3lld %-9s", (long long)w->B,
                 (long long)T, (long long)w->H, row->form->form->name);
        ba_measure(&sw, row->form->form, w, label, &row->r);
    }
    const int errors = sw.errors;
    if (bench_mx_finish(&a, ctx, &c, pf_print, pf_json, rows, n, start,
                        "P = T (T + 1) / 2 causal pairs; FLOPs = 2 B H P (576 + 512) absorbed, "
                        "2 B H P (192 + 128) + 2 B T H 256 512 expanded (with the decompression); "
                        "xGFLOP/s = the expanded form's 2 B H P (192 + 128) per second, the "
                        "count of the PyTorch SDPA peer; roof = max(bytes / copy BW, FLOPs / "
                        "matmul rate); roof% = roof / median; form*: the layer plan's choice "
                        "for the step (docs/PERFORMANCE.md)",
                        errors) != BENCH_EXIT_OK)
        rc = BENCH_EXIT_FAIL;
    free(rows);
    mla_context_destroy(ctx);
    return rc;
}
