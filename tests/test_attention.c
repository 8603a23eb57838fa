/* The attention core's entry points (include/mla/mla_attention.h) on the
 * reference backend: the reference kernel against a direct float64
 * evaluation of the header's formulas over rows read back with
 * mla_cache_gather; the plan life cycle (create, update, run, splits,
 * workspace); RoPE inside attention against the two other RoPE sites
 * (identical cache bytes, identical q_cat and outputs; a second rotation
 * caught). The refusals: tests/test_attention_args.c. */
#include "tests/attention_fixture.h"

/* -------------------------------------------- the direct evaluation */

/* o and lse of every row and head from the header's formulas, in float64,
 * over the rows mla_cache_gather returns (sequence s's keys in order). */
static void direct(mla_context *ctx, const fixture *f, double *o, double *lse)
{
    static float rows[S * MAXB * BS * D];
    mla_tensor tr = view(rows, MLA_DTYPE_F32, 2, (int64_t[]){0, D});
    int64_t total = 0, first[S];
    for (int s = 0; s < S; ++s)
        first[s] = total, total += f->lens[s];
    tr.shape[0] = total;
    CHECK_STATUS(mla_cache_gather(ctx, &f->cd, &f->t_cache, &f->t_table, &f->t_lens, &tr), MLA_OK);
    const double scale = f->desc.softmax_scale;
    for (int s = 0; s < S; ++s) {
        const int64_t c = f->lens[s], n = f->cu[s + 1] - f->cu[s];
        for (int64_t r = f->cu[s]; r < f->cu[s + 1]; ++r) {
            const int64_t p = c - n + (r - f->cu[s]);
            for (int64_t h = 0; h < f->H; ++h) {
                double sc[S * MAXB * BS], m = -INFINITY, Z = 0.0;
                int vis[S * MAXB * BS], nv = 0;
                for (int64_t t = 0; c > 0 && t <= p; ++t) {
                    int ok = 1;
                    if (f->desc.topk > 0) {
                        int cnt = 0;
                        for (int64_t i = 0; i < f->desc.topk; ++i)
                            cnt += f->topk[r * f->desc.topk + i] == t;
                        ok = cnt;
                    }
                    for (int k = 0; k < ok; ++k)
                        vis[nv++] = (int)t;
                }
                for (int k = 0; k < nv; ++k) {
                    double dot = 0.0;
                    for (int64_t d = 0; d < D; ++d)
                        dot += (double)f->q[(r * f->H + h) * D + d] *
                               rows[(first[s] + vis[k]) * D + d];
                    sc[k] = scale * dot;
                    m = fmax(m, sc[k]);
                }
                const int sink = f->args.sinks != NULL && nv > 0;
                if (sink)
                    m = fmax(m, f->sinks[h]);
                for (int k = 0; k < nv; ++k)
                    Z += exp(sc[k] - m);
                if (sink)
                    Z += exp(f->sinks[h] - m);
                for (int64_t i = 0; i < L; ++i) {
                    double acc = 0.0;
                    for (int k = 0; k < nv; ++k)
                        acc += exp(sc[k] - m) * rows[(first[s] + vis[k]) * D + i];
                    o[(r * f->H + h) * L + i] = nv ? acc / Z : 0.0;
                }
                lse[r * f->H + h] = nv ? m + log(Z) : -INFINITY;
            }
        }
    }
}

/* got (fp32) within one fp32 rounding of want (float64; the two float64
 * evaluations differ by far less than an fp32 ulp, the sums being in the
 * same order) plus 2^-30 of the row's scale for the last-bit cases. */
static int close_f32(float got, double want)
{
    if (isinf(want))
        return got == (float)want;
    return fabs((double)got - want) <= 0x1p-23 * fabs(want) + 0x1p-40;
}

static void check_against_direct(mla_context *ctx, fixture *f, const char *what)
{
    static double o[TMAX * HMAX * L], lse[TMAX * HMAX];
    direct(ctx, f, o, lse);
    int bad = 0;
    for (int64_t i = 0; i < f->T * f->H * L; ++i)
        bad += !close_f32(f->o[i], o[i]);
    for (int64_t i = 0; i < f->T * f->H; ++i)
        bad += !close_f32(f->lse[i], lse[i]);
    if (bad)
        fprintf(stderr, "  %s: %d values off\n", what, bad);
    CHECK(bad == 0);
}

/* ------------------------------------------------------------- tests */

/* Dense decode with next_n 2 (causal among the new rows), a padding
 * sequence, sinks; chunked prefill through cu_q; sparse with -1, masked
 * and repeated indices; split off, forced 4, forced beyond the keys. */
static void test_reference(mla_context *ctx)
{
    const int32_t lens[S] = {37, 0, 9}, cu_dec[S + 1] = {0, 2, 4, 6};
    const int32_t cu_pre[S + 1] = {0, 7, 7, 12}, lens_pre[S] = {30, 0, 5};
    fixture f;
    const int32_t splits[4] = {1, 4, 64, 0};
    for (int k = 0; k < 4; ++k) {
        fx_init(&f, ctx, 3, lens, cu_dec);
        f.desc.num_splits = splits[k];
        f.args.cu_q_lens = NULL;
        f.desc.next_n = 2;
        CHECK_STATUS(plan_and_run(ctx, &f), MLA_OK);
        check_against_direct(ctx, &f, "dense next_n 2");
        for (int64_t i = 2 * 3 * L; i < 4 * 3 * L; ++i) /* the padding sequence's rows */
            CHECK(f.o[i] == 0.0f);
        CHECK(isinf(f.lse[2 * 3]) && f.lse[2 * 3] < 0);
        fx_free(&f);
    }
    fx_init(&f, ctx, 2, lens_pre, cu_pre);
    f.args.sinks = &f.t_sinks;
    CHECK_STATUS(plan_and_run(ctx, &f), MLA_OK);
    check_against_direct(ctx, &f, "prefill + sinks");
    fx_free(&f);

    fx_init(&f, ctx, 4, lens, cu_dec);
    f.desc.topk = 8;
    for (int64_t r = 0; r < f.T; ++r)
        for (int i = 0; i < 8; ++i) {
            const int32_t c = f.lens[r < 2 ? 0 : r < 4 ? 1 : 2];
            const int32_t pick[8] = {0, c - 1, -1, 3, 3, c / 2, -1, 1};
            f.topk[r * 8 + i] = c == 0 ? -1 : pick[i] < c ? pick[i] : -1;
        }
    f.t_topk = view(f.topk, MLA_DTYPE_I32, 2, (int64_t[]){f.T, 8});
    f.args.topk_indices = &f.t_topk;
    f.args.sinks = &f.t_sinks;
    f.desc.num_splits = 2;
    CHECK_STATUS(plan_and_run(ctx, &f), MLA_OK);
    check_against_direct(ctx, &f, "sparse");
    fx_free(&f);
}

/* ------------------------------------------------------- life cycle */

static int same_floats(const float *a, const float *b, int64_t n)
{
    return memcmp(a, b, (size_t)n * sizeof *a) == 0;
}

/* create -> run -> update (new lengths) -> run equals a fresh plan's run; a
 * refused update leaves the plan working; splits and workspace bytes. */
static void test_life_cycle(mla_context *ctx)
{
    const int32_t lens[S] = {37, 0, 9}, lens2[S] = {50, 4, 2}, cu[S + 1] = {0, 2, 4, 6};
    fixture f;
    fx_init(&f, ctx, 3, lens, cu);
    f.desc.num_splits = 4;
    mla_attention_plan *plan = NULL;
    CHECK_STATUS(mla_attention_plan_create(ctx, &f.desc, &f.args, &plan), MLA_OK);
    CHECK(mla_attention_plan_splits(plan) == 4);
    const int64_t wb = mla_attention_plan_workspace_bytes(plan);
    CHECK(wb >= 3 * 6 * 4 * L * 4); /* partial o of every row, head and split */
    void *ws = NULL;
    CHECK_STATUS(mla_malloc(ctx, (size_t)wb, &ws), MLA_OK);
    mla_tensor tws = view(ws, MLA_DTYPE_U8, 1, (int64_t[]){wb});
    f.args.workspace = &tws;
    CHECK_STATUS(mla_attention_run(ctx, plan, &f.args), MLA_OK);
    check_against_direct(ctx, &f, "planned run");

    /* new lengths, same shapes: update in place, run, compare */
    memcpy(f.lens, lens2, sizeof lens2);
    CHECK_STATUS(mla_attention_plan_update(ctx, plan, &f.args), MLA_OK);
    CHECK_STATUS(mla_attention_run(ctx, plan, &f.args), MLA_OK);
    check_against_direct(ctx, &f, "updated run");
    static float o_upd[TMAX * HMAX * L];
    memcpy(o_upd, f.o, sizeof o_upd);

    /* a refused update (a block id beyond the cache) keeps the old plan */
    const int32_t saved = f.table[0];
    f.table[0] = NB;
    CHECK_STATUS(mla_attention_plan_update(ctx, plan, &f.args), MLA_ERR_OUT_OF_RANGE);
    CHECK(param_is(ctx, "block_table"));
    f.table[0] = saved;
    memset(f.o, 0, sizeof f.o);
    CHECK_STATUS(mla_attention_run(ctx, plan, &f.args), MLA_OK);
    CHECK(same_floats(f.o, o_upd, f.T * f.H * L));

    /* forced splits beyond the keys (empty items) and no split: the same bits
     * on the reference (it ignores the plan), the workspace 0 without split */
    f.args.workspace = NULL;
    mla_attention_plan_destroy(plan);
    plan = NULL;
    f.desc.num_splits = 1;
    CHECK_STATUS(mla_attention_plan_create(ctx, &f.desc, &f.args, &plan), MLA_OK);
    CHECK(mla_attention_plan_splits(plan) == 1);
    CHECK(mla_attention_plan_workspace_bytes(plan) == 0);
    CHECK_STATUS(mla_attention_run(ctx, plan, &f.args), MLA_OK);
    CHECK(same_floats(f.o, o_upd, f.T * f.H * L));
    mla_attention_plan_destroy(plan);
    mla_attention_plan_destroy(NULL);
    CHECK(mla_attention_plan_splits(NULL) == 0 && mla_attention_plan_workspace_bytes(NULL) == 0);
    mla_free(ctx, ws);
    fx_free(&f);
}

/* ------------------------------------------------------- RoPE-once */

enum { RP = 64 }; /* rope table rows */

/* The new tokens of the fixture's decode rows: position p of each row, its
 * slot in the sequence's blocks (-1 for the padding sequence's rows). */
static void new_tokens(const fixture *f, int32_t *pos, int32_t *slots)
{
    for (int s = 0; s < S; ++s)
        for (int32_t r = f->cu[s]; r < f->cu[s + 1]; ++r) {
            const int32_t n = f->cu[s + 1] - f->cu[s], p = f->lens[s] - n + (r - f->cu[s]);
            pos[r] = f->lens[s] ? p : 0;
            slots[r] = f->lens[s] ? f->table[s * MAXB + p / BS] * BS + p % BS : -1;
        }
}

/* The three sites (MLA.md section 3) from the same unrotated q_pe / k_pe:
 * SEPARATE (mla_rope into q_cat and into an f32 k, mla_cache_write, then
 * attention), FUSED_CACHE (mla_fused_rope_concat_cache, then attention),
 * ATTENTION (q_cat unrotated, the rope args of the attention call). */
static void test_rope_sites(mla_context *ctx, mla_cache_layout layout, mla_dtype cdt)
{
    const int32_t lens[S] = {37, 0, 9}, cu[S + 1] = {0, 2, 4, 6};
    enum { T = 6, H = 2 };
    fixture f[3];
    static float cos_t[RP * R / 2], sin_t[RP * R / 2];
    mla_rope_config rc = {R, 1e4, 4, 32, 1, 512, 1, 1};
    CHECK_STATUS(mla_rope_table_build(&rc, RP, cos_t, sin_t), MLA_OK);
    static uint16_t q_nope[T * H * L], q_pe[T * H * R], q_cat[3][T * H * D];
    static float k_nope[T * L], k_pe[T * R], k_rot[T * R];
    int32_t pos[T], slots[T];
    for (int64_t i = 0; i < T * H * L; ++i)
        q_nope[i] = mla_f32_to_bf16(rnd(1.0f));
    for (int64_t i = 0; i < T * H * R; ++i)
        q_pe[i] = mla_f32_to_bf16(rnd(1.0f));
    for (int64_t i = 0; i < T * L; ++i)
        k_nope[i] = rnd(1.0f);
    for (int64_t i = 0; i < T * R; ++i)
        k_pe[i] = rnd(1.0f);
    mla_tensor tcos = view(cos_t, MLA_DTYPE_F32, 2, (int64_t[]){RP, R / 2});
    mla_tensor tsin = view(sin_t, MLA_DTYPE_F32, 2, (int64_t[]){RP, R / 2});
    mla_tensor tqn = view(q_nope, MLA_DTYPE_BF16, 3, (int64_t[]){T, H, L});
    mla_tensor tqp = view(q_pe, MLA_DTYPE_BF16, 3, (int64_t[]){T, H, R});
    mla_tensor tkn = view(k_nope, MLA_DTYPE_F32, 2, (int64_t[]){T, L});
    mla_tensor tkp = view(k_pe, MLA_DTYPE_F32, 2, (int64_t[]){T, R});
    mla_tensor tkr = view(k_rot, MLA_DTYPE_F32, 2, (int64_t[]){T, R});
    for (int k = 0; k < 3; ++k) {
        rng_state = 0x51EDu; /* the same cache contents in all three */
        fx_init(&f[k], ctx, H, lens, cu);
        f[k].cd.layout = layout;
        f[k].cd.dtype = cdt;
        f[k].cd.k_scale = 0.75f;
        int64_t bb = 0;
        mla_cache_block_bytes(&f[k].cd, &bb);
        free(f[k].cache);
        f[k].cache = calloc((size_t)(NB * bb), 1);
        f[k].t_cache = view(f[k].cache, MLA_DTYPE_U8, 2, (int64_t[]){NB, bb});
        f[k].desc.cache = f[k].cd;
        f[k].desc.q_dtype = MLA_DTYPE_BF16;
        f[k].t_q = view(q_cat[k], MLA_DTYPE_BF16, 3, (int64_t[]){T, H, D});
    }
    new_tokens(&f[0], pos, slots);
    mla_tensor tpos = view(pos, MLA_DTYPE_I32, 1, (int64_t[]){T});
    mla_tensor tslots = view(slots, MLA_DTYPE_I32, 1, (int64_t[]){T});
    const int64_t qs[3] = {H * D, D, 1};

    /* SEPARATE */
    mla_tensor qc_nope = view(q_cat[0], MLA_DTYPE_BF16, 3, (int64_t[]){T, H, L});
    memcpy(qc_nope.stride, qs, sizeof qs);
    mla_tensor qc_pe = view(q_cat[0] + L, MLA_DTYPE_BF16, 3, (int64_t[]){T, H, R});
    memcpy(qc_pe.stride, qs, sizeof qs);
    CHECK_STATUS(mla_convert(ctx, &tqn, &qc_nope, MLA_SATURATE), MLA_OK);
    CHECK_STATUS(mla_rope(ctx, &tcos, &tsin, &tpos, &tqp, &qc_pe, MLA_ROPE_INTERLEAVED), MLA_OK);
    CHECK_STATUS(mla_rope(ctx, &tcos, &tsin, &tpos, &tkp, &tkr, MLA_ROPE_INTERLEAVED), MLA_OK);
    CHECK_STATUS(mla_cache_write(ctx, &f[0].cd, &f[0].t_cache, &tkn, &tkr, &tslots), MLA_OK);
    /* FUSED_CACHE */
    mla_rope_cache_args fa = {
        &tcos,   &tsin,    MLA_ROPE_INTERLEAVED, &tqn,      &tqp, &tpos, &tkn, &tkp, &tpos,
        &tslots, &f[1].cd, &f[1].t_cache,        &f[1].t_q, 1.0f, NULL};
    CHECK_STATUS(mla_fused_rope_concat_cache(ctx, &fa), MLA_OK);
    CHECK(memcmp(q_cat[0], q_cat[1], sizeof q_cat[0]) == 0);
    for (int k = 0; k < 2; ++k) {
        f[k].args.q = &f[k].t_q;
        CHECK_STATUS(plan_and_run(ctx, &f[k]), MLA_OK);
    }
    /* ATTENTION: q_cat unrotated; the call rotates q and k and writes the cache */
    qc_nope.data = q_cat[2];
    qc_pe.data = q_cat[2] + L;
    CHECK_STATUS(mla_convert(ctx, &tqn, &qc_nope, MLA_SATURATE), MLA_OK);
    CHECK_STATUS(mla_convert(ctx, &tqp, &qc_pe, MLA_SATURATE), MLA_OK);
    static uint16_t q_unrot[T * H * D];
    memcpy(q_unrot, q_cat[2], sizeof q_unrot);
    mla_attention_rope rope = {&tcos, &tsin,  MLA_ROPE_INTERLEAVED, &tpos, &tkn, &tkp,
                               &tpos, &tslots};
    f[2].args.q = &f[2].t_q;
    f[2].args.rope = &rope;
    CHECK_STATUS(plan_and_run(ctx, &f[2]), MLA_OK);
    CHECK(memcmp(q_cat[2], q_unrot, sizeof q_unrot) == 0); /* q is not modified */
    const size_t cb = (size_t)(f[0].t_cache.shape[0] * f[0].t_cache.shape[1]);
    CHECK(memcmp(f[0].cache, f[1].cache, cb) == 0);
    CHECK(memcmp(f[0].cache, f[2].cache, cb) == 0);
    for (int k = 1; k < 3; ++k) {
        CHECK(same_floats(f[0].o, f[k].o, T * H * L));
        CHECK(same_floats(f[0].lse, f[k].lse, T * H));
    }
    /* a second rotation (the rotated q_cat and cache, rotated again inside
     * attention) gives another cache and another answer */
    memcpy(q_cat[2], q_cat[0], sizeof q_unrot);
    rope.k_pe = &tkr;
    CHECK_STATUS(plan_and_run(ctx, &f[2]), MLA_OK);
    CHECK(memcmp(f[0].cache, f[2].cache, cb) != 0);
    CHECK(!same_floats(f[0].o, f[2].o, T * H * L));
    for (int k = 0; k < 3; ++k)
        fx_free(&f[k]);
}

int main(void)
{
    mla_context *ref = NULL;
    CHECK_STATUS(mla_context_create(MLA_BACKEND_REFERENCE, NULL, &ref), MLA_OK);
    test_reference(ref);
    test_life_cycle(ref);
    test_rope_sites(ref, MLA_CACHE_NORMAL, MLA_DTYPE_BF16);
    test_rope_sites(ref, MLA_CACHE_SHUFFLED, MLA_DTYPE_FP8_E4M3FN);
    test_rope_sites(ref, MLA_CACHE_FP8_SCALED, MLA_DTYPE_FP8_E4M3FNUZ);
    mla_context_destroy(ref);
    return TEST_SUMMARY();
}
