/* The attention core's entry points (include/mla/mla_attention.h) on the
 * reference backend: the reference kernel against a direct float64
 * evaluation of the header's formulas over rows read back with
 * mla_cache_gather; the plan life cycle; every refusal with its status and
 * parameter, with o, lse and the cache untouched; RoPE inside attention
 * against the two other RoPE sites (identical cache bytes, identical
 * outputs). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mla/mla.h"
#include "tests/test_util.h"

enum { L = 128, R = 16, D = L + R, BS = 16, NB = 12, S = 3, MAXB = 4, TMAX = 16, HMAX = 4 };

static uint32_t rng_state = 0x2545F491u;

/* A value in [-scale, scale), from a 32-bit xorshift. */
static float rnd(float scale)
{
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 17, rng_state ^= rng_state << 5;
    return scale * ((float)(rng_state >> 8) / 8388608.0f - 1.0f);
}

static mla_tensor view(void *data, mla_dtype dt, int32_t ndim, const int64_t *shape)
{
    mla_tensor t;
    mla_tensor_init(&t, data, dt, MLA_MEMORY_HOST, ndim, shape);
    return t;
}

static int param_is(mla_context *ctx, const char *name) __attribute__((unused));
static int param_is(mla_context *ctx, const char *name)
{
    int ok = strcmp(mla_context_error_param(ctx), name) == 0;
    if (!ok)
        fprintf(stderr, "  error param '%s', expected '%s' (%s)\n", mla_context_error_param(ctx),
                name, mla_context_error_detail(ctx));
    return ok;
}

/* ------------------------------------------------------------ fixture */

/* S = 3 sequences over a bf16 NORMAL cache of NB blocks of 16 tokens. */
typedef struct fixture {
    mla_cache_desc cd;
    mla_attention_desc desc;
    int64_t T, H;
    uint8_t *cache;
    int32_t table[S * MAXB], lens[S], cu[S + 1], topk[TMAX * 8];
    float q[TMAX * HMAX * D], o[TMAX * HMAX * L], lse[TMAX * HMAX], sinks[HMAX];
    mla_tensor t_cache, t_q, t_table, t_lens, t_cu, t_topk, t_sinks, t_o, t_lse;
    mla_attention_args args;
} fixture;

/* Fills the cache (every slot of every block: random k rows), the block
 * table (scattered blocks), q, and the args for lens / cu rows. */
static void fx_init(fixture *f, mla_context *ctx, int64_t H, const int32_t *lens, const int32_t *cu)
{
    memset(f, 0, sizeof *f);
    f->cd = (mla_cache_desc){MLA_CACHE_NORMAL, MLA_DTYPE_BF16, NB, BS, L, R, 1.0f};
    int64_t bb = 0;
    mla_cache_block_bytes(&f->cd, &bb);
    f->cache = calloc((size_t)(NB * bb), 1);
    f->t_cache = view(f->cache, MLA_DTYPE_U8, 2, (int64_t[]){NB, bb});
    static float kn[NB * BS * L], kp[NB * BS * R];
    static int32_t slots[NB * BS];
    for (int64_t i = 0; i < NB * BS; ++i) {
        slots[i] = (int32_t)i;
        for (int64_t d = 0; d < L; ++d)
            kn[i * L + d] = rnd(1.0f);
        for (int64_t d = 0; d < R; ++d)
            kp[i * R + d] = rnd(1.0f);
    }
    mla_tensor tkn = view(kn, MLA_DTYPE_F32, 2, (int64_t[]){NB * BS, L});
    mla_tensor tkp = view(kp, MLA_DTYPE_F32, 2, (int64_t[]){NB * BS, R});
    mla_tensor tsl = view(slots, MLA_DTYPE_I32, 1, (int64_t[]){NB * BS});
    CHECK_STATUS(mla_cache_write(ctx, &f->cd, &f->t_cache, &tkn, &tkp, &tsl), MLA_OK);
    for (int s = 0; s < S; ++s) {
        f->lens[s] = lens[s];
        f->cu[s] = cu[s];
        for (int b = 0; b < MAXB; ++b)
            f->table[s * MAXB + b] = (int32_t)((s * 5 + b * 7 + 3) % NB);
    }
    f->cu[S] = cu[S];
    f->T = cu[S];
    f->H = H;
    for (int64_t i = 0; i < f->T * H * D; ++i)
        f->q[i] = rnd(1.0f);
    for (int64_t h = 0; h < H; ++h)
        f->sinks[h] = rnd(2.0f);
    mla_model_config cfg;
    mla_model_config_preset("test-tiny", &cfg);
    cfg.heads = H;
    CHECK_STATUS(mla_attention_desc_default(&cfg, &f->cd, &f->desc), MLA_OK);
    f->desc.q_dtype = MLA_DTYPE_F32;
    f->t_q = view(f->q, MLA_DTYPE_F32, 3, (int64_t[]){f->T, H, D});
    f->t_table = view(f->table, MLA_DTYPE_I32, 2, (int64_t[]){S, MAXB});
    f->t_lens = view(f->lens, MLA_DTYPE_I32, 1, (int64_t[]){S});
    f->t_cu = view(f->cu, MLA_DTYPE_I32, 1, (int64_t[]){S + 1});
    f->t_sinks = view(f->sinks, MLA_DTYPE_F32, 1, (int64_t[]){H});
    f->t_o = view(f->o, MLA_DTYPE_F32, 3, (int64_t[]){f->T, H, L});
    f->t_lse = view(f->lse, MLA_DTYPE_F32, 2, (int64_t[]){f->T, H});
    f->args = (mla_attention_args){&f->t_q, &f->t_cache, &f->t_table, &f->t_lens, &f->t_cu, NULL,
                                   NULL,    NULL,        &f->t_o,     &f->t_lse,  NULL};
}

static void fx_free(fixture *f) { free(f->cache); }

/* Plans, runs with a workspace of the plan's size, destroys. */
static mla_status plan_and_run(mla_context *ctx, fixture *f)
{
    mla_attention_plan *plan = NULL;
    mla_status st = mla_attention_plan_create(ctx, &f->desc, &f->args, &plan);
    if (st != MLA_OK)
        return st;
    const int64_t wb = mla_attention_plan_workspace_bytes(plan);
    void *ws = NULL;
    mla_tensor tws;
    if (wb > 0) {
        mla_malloc(ctx, (size_t)wb, &ws);
        tws = view(ws, MLA_DTYPE_U8, 1, (int64_t[]){wb});
        f->args.workspace = &tws;
    }
    st = mla_attention_run(ctx, plan, &f->args);
    f->args.workspace = NULL;
    mla_free(ctx, ws);
    mla_attention_plan_destroy(plan);
    return st;
}

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

int main(void)
{
    mla_context *ref = NULL;
    CHECK_STATUS(mla_context_create(MLA_BACKEND_REFERENCE, NULL, &ref), MLA_OK);
    test_reference(ref);
    mla_context_destroy(ref);
    return TEST_SUMMARY();
}
