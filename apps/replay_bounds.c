/* The judges of the ops the conformance suites hold to a per-value bound
 * (apps/replay.h): the dumped inputs become a conformance problem in the
 * suite's argument order, the suite's own bound function sizes every
 * value's tolerance (conformance/bounds.c and the case files), and
 * conf_compare (or compare_quant.c's, or the search's top-k check) judges
 * the dumped and the rerun's outputs against the reference backend's rerun,
 * as the conformance runner judges a backend against the reference. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps/cmd.h"
#include "apps/replay.h"
#include "conformance/cases_indexer.h"

#define NONE MLA_DTYPE_COUNT

static int fail_setup(replay *r)
{
    for (int i = 0; i < r->nout; ++i)
        if (!r->out[i].judged)
            replay_say(&r->out[i], MLA_EXIT_FAIL, "DIFFERENT: the dump's arrays do not fit the op");
    return MLA_EXIT_FAIL;
}

static int any_negative(const int *ix, int n)
{
    for (int i = 0; i < n; ++i)
        if (ix[i] < 0)
            return 1;
    return 0;
}

/* The output's judge, or the failure of its bound's computation. */
static int judge(replay *r, const conf_problem *p, int i, mla_status st)
{
    if (st != MLA_OK)
        return replay_say(replay_find(r, p->arg[i].name), MLA_EXIT_FAIL,
                          "DIFFERENT: its bound cannot be computed (%s)", mla_status_name(st));
    return replay_judge(r, p, i);
}

static int gemms(replay *r, conf_problem *p)
{
    if (!strcmp(r->op, "linear")) {
        const int ix = replay_add_input(r, p, "x", NONE), iw = replay_add_input(r, p, "w", NONE);
        const int has_s = replay_word(r, "--in", "w_scale") != NULL;
        const int is = has_s ? replay_add_input(r, p, "w_scale", NONE) : 0;
        const int iy = replay_add_output(r, p, "y", NULL);
        if (any_negative((int[]){ix, iw, is, iy}, 4))
            return fail_setup(r);
        return judge(r, p, iy, conf_linear_tol(p, ix, iw, has_s ? is : -1, iy));
    }
    if (!strcmp(r->op, "batched_gemm")) {
        const int ix = replay_add_input(r, p, "x", NONE), iw = replay_add_input(r, p, "w", NONE);
        const int iy = replay_add_output(r, p, "y", NULL);
        if (any_negative((int[]){ix, iw, iy}, 3) || p->arg[ix].t.ndim != 3)
            return fail_setup(r);
        const float ws = (float)replay_param(r, "w_scale", 1.0);
        return judge(r, p, iy, conf_batched_tol(p, ix, iw, iy, ws));
    }
    const int a4w4 = !strcmp(r->op, "gemm_a4w4");
    if (!a4w4 && strcmp(r->op, "gemm_a16wfp4"))
        return -1;
    /* the suite's order: x (a4w4: x codes, x scales), w codes, w scales, y */
    const int ix = replay_add_input(r, p, a4w4 ? "x_codes" : "x", NONE);
    const int ixs = a4w4 ? replay_add_input(r, p, "x_scales", MLA_DTYPE_E8M0) : 0;
    const int iwc = replay_add_input(r, p, "w_codes", MLA_DTYPE_FP4X2);
    const int iws = replay_add_input(r, p, "w_scales", MLA_DTYPE_E8M0);
    const int iy = replay_add_output(r, p, "y", NULL);
    if (any_negative((int[]){ix, ixs, iwc, iws, iy}, 5) || p->arg[iy].t.ndim != 3)
        return fail_setup(r);
    const char *wl = replay_word(r, "--param", "w_layout"),
               *xl = replay_word(r, "--param", "x_layout");
    const char *rule = replay_word(r, "--param", "rule");
    const conf_arg *y = &p->arg[iy];
    conf_p_mxfp4_gemm q;
    memset(&q, 0, sizeof q);
    q.B = y->t.shape[0], q.M = y->t.shape[1], q.N = y->t.shape[2];
    q.K = 2 * p->arg[iwc].t.shape[2];
    q.prequant = !a4w4 && replay_param(r, "prequant", 1) != 0;
    q.rule = rule && !strcmp(rule, "ocp") ? MLA_MXFP4_OCP : MLA_MXFP4_PRODUCTION;
    q.w_layout = wl && strncmp(wl, "preshuffled", 11) == 0 ? MLA_SCALE_PRESHUFFLED_GFX950
                                                           : MLA_SCALE_ROW_MAJOR;
    q.x_layout = xl && strncmp(xl, "preshuffled", 11) == 0 ? MLA_SCALE_PRESHUFFLED_GFX950
                                                           : MLA_SCALE_ROW_MAJOR;
    return judge(r, p, iy, conf_mxfp4_gemm_tol(p, &q, a4w4));
}

/* Quantized q_out and its scales, judged together (compare_quant.c):
 * each side's pair against the reference's pair. */
static int quant_pair(replay *r, const conf_problem *p, int iqo, int iqs)
{
    replay_out *oq = replay_find(r, p->arg[iqo].name), *os = replay_find(r, p->arg[iqs].name);
    if (!oq->has_ref || !os->has_ref)
        return replay_judge(r, p, iqo);
    int rc = MLA_EXIT_OK;
    for (int which = 0; which < 2; ++which) {
        const int i = which ? iqs : iqo;
        conf_cmp c[2];
        unsigned char *want[CONF_MAX_ARGS] = {0}, *got[CONF_MAX_ARGS] = {0};
        want[iqo] = oq->ref.data, want[iqs] = os->ref.data;
        for (int k = 0; k < 2; ++k) {
            got[iqo] = k ? oq->got.data : oq->dumped.data;
            got[iqs] = k ? os->got.data : os->dumped.data;
            conf_compare_quant(p, iqo, iqs, i, got, want, &c[k]);
        }
        const int bad = c[0].mismatches || c[1].mismatches;
        replay_say(which ? os : oq, bad ? MLA_EXIT_FAIL : MLA_EXIT_OK,
                   "against the reference backend's rerun, with its %s, within the conformance "
                   "bound: dumped %s (worst %.3g); rerun %s (worst %.3g)%s%s",
                   which ? "codes" : "scales", c[0].mismatches ? "OUTSIDE" : "within", c[0].max_err,
                   c[1].mismatches ? "OUTSIDE" : "within", c[1].max_err, bad ? ": " : "",
                   c[0].mismatches ? c[0].first : c[1].first);
        rc |= bad;
    }
    return rc ? MLA_EXIT_FAIL : MLA_EXIT_OK;
}

static int norms(replay *r, conf_problem *p)
{
    if (!strcmp(r->op, "rmsnorm")) {
        const int ix = replay_add_input(r, p, "x", NONE), iw = replay_add_input(r, p, "w", NONE);
        const int iy = replay_add_output(r, p, "y", NULL);
        if (any_negative((int[]){ix, iw, iy}, 3))
            return fail_setup(r);
        const double eps = (float)replay_param(r, "eps", 1e-6);
        return judge(r, p, iy, conf_norm_tol(p, ix, iw, iy, eps));
    }
    if (!strcmp(r->op, "qk_rmsnorm")) {
        const int iq = replay_add_input(r, p, "q", NONE), iqw = replay_add_input(r, p, "q_w", NONE);
        const int ikv = replay_add_input(r, p, "kv", NONE);
        const int ikw = replay_add_input(r, p, "kv_w", NONE);
        const int iqo = replay_add_output(r, p, "q_out", NULL);
        const int iko = replay_add_output(r, p, "kv_out", NULL);
        const int quant = replay_find(r, "q_scales") != NULL;
        const int iqs = quant ? replay_add_output(r, p, "q_scales", NULL) : 0;
        if (any_negative((int[]){iq, iqw, ikv, ikw, iqo, iko, iqs}, 7))
            return fail_setup(r);
        const double qe = (float)replay_param(r, "q_eps", 1e-6);
        const double ke = (float)replay_param(r, "kv_eps", 1e-6);
        int rc = judge(r, p, iko, conf_norm_tol(p, ikv, ikw, iko, ke));
        if (!quant)
            return rc | judge(r, p, iqo, conf_norm_tol(p, iq, iqw, iqo, qe));
        const mla_status st = conf_qk_quant_tol(p, iq, iqw, qe, iqo, iqs);
        return rc | (st == MLA_OK ? quant_pair(r, p, iqo, iqs) : judge(r, p, iqo, st));
    }
    if (!strcmp(r->op, "layernorm")) {
        const int ix = replay_add_input(r, p, "x", NONE), iw = replay_add_input(r, p, "w", NONE);
        const int ib = replay_add_input(r, p, "b", NONE), iy = replay_add_output(r, p, "y", NULL);
        if (any_negative((int[]){ix, iw, ib, iy}, 4) || p->arg[ix].t.ndim != 2)
            return fail_setup(r);
        const float eps = (float)replay_param(r, "eps", 1e-6);
        return judge(r, p, iy, conf_layernorm_tol(p, ix, iw, ib, iy, eps));
    }
    if (!strcmp(r->op, "hadamard")) {
        const int ix = replay_add_input(r, p, "x", NONE), iy = replay_add_output(r, p, "y", NULL);
        if (any_negative((int[]){ix, iy}, 2))
            return fail_setup(r);
        return judge(r, p, iy, conf_hadamard_tol(p, ix, iy));
    }
    return -1;
}

/* Every block a context reads is in the cache (nb blocks of bs tokens): a
 * dump the library accepted has them so; a folder edited by hand must not
 * make the bound read past its arrays. */
static int table_fits(const conf_arg *bt, const conf_arg *lens, int64_t bs, int64_t nb)
{
    const int64_t S = conf_numel(lens), mb = bt->t.ndim == 2 ? bt->t.shape[1] : 0;
    for (int64_t s = 0; s < S; ++s) {
        const int64_t len = (int64_t)conf_in_value(lens, s);
        if (len < 0 || len > mb * bs || (bt->t.ndim == 2 && bt->t.shape[0] < S))
            return 0;
        for (int64_t b = 0; b * bs < len; ++b) {
            const double blk = conf_in_value(bt, s * mb + b);
            if (blk < 0 || blk >= (double)nb)
                return 0;
        }
    }
    return 1;
}

/* The search's indices: each side's must be the top-k of its own logits. */
static int search_indices(replay *r, const conf_problem *p, int il, int ii, int64_t nn)
{
    replay_out *ol = replay_find(r, "logits"), *oi = replay_find(r, "indices");
    conf_cmp c[2];
    for (int k = 0; k < 2; ++k) {
        unsigned char *got[CONF_MAX_ARGS] = {0};
        got[il] = k ? ol->got.data : ol->dumped.data;
        got[ii] = k ? oi->got.data : oi->dumped.data;
        conf_idx_search_check(p, ii, nn, got, &c[k]);
    }
    const int bad = c[0].mismatches || c[1].mismatches;
    return replay_say(oi, bad ? MLA_EXIT_FAIL : MLA_EXIT_OK,
                      "the top-k of the side's own logits (ties to the lower index): dumped %s, "
                      "rerun %s%s%s",
                      c[0].mismatches ? "DIFFERENT" : "yes", c[1].mismatches ? "DIFFERENT" : "yes",
                      bad ? ": " : "", c[0].mismatches ? c[0].first : c[1].first);
}

static int indexer(replay *r, conf_problem *p)
{
    const int search = !strcmp(r->op, "indexer_search");
    if (!search && strcmp(r->op, "indexer_logits"))
        return -1;
    /* cases_indexer.h's order: cache, q, w, block_table, context_lens, logits */
    const replay_cache_geom cg = replay_index_geom(r, 0);
    const int ic = replay_add_input(r, p, "cache", MLA_DTYPE_U8);
    const int iq = replay_add_input(r, p, "q", cg.idx.dtype);
    const int iw = replay_add_input(r, p, "w", NONE);
    const int ibt = replay_add_input(r, p, "block_table", MLA_DTYPE_I32);
    const int ict = replay_add_input(r, p, "context_lens", MLA_DTYPE_I32);
    const int il = replay_add_output(r, p, "logits", NULL);
    const int ii = search ? replay_add_output(r, p, "indices", NULL) : 0;
    if (any_negative((int[]){ic, iq, iw, ibt, ict, il, ii}, 7) || il != CONF_LG_LOGITS ||
        p->arg[iq].t.ndim != 3 || p->arg[ibt].t.ndim != 2 || p->arg[il].t.ndim != 2)
        return fail_setup(r);
    const int64_t nn = (int64_t)replay_param(r, "next_n", 1);
    if (nn < 1 || p->arg[il].t.shape[0] != nn * conf_numel(&p->arg[ict]) ||
        p->arg[iq].t.shape[0] != p->arg[il].t.shape[0] || p->arg[ic].t.ndim != 2 ||
        !table_fits(&p->arg[ibt], &p->arg[ict], cg.idx.block_size, p->arg[ic].t.shape[0]))
        return fail_setup(r);
    int rc = judge(r, p, il, conf_idx_logits_tol(p, &cg.idx, nn));
    return search ? rc | search_indices(r, p, il, ii, nn) : rc;
}

/* The attention's o and lse against the reference's; with RoPE inside it
 * the cache, bit-defined, by the cache rule (the bound's keys are those
 * the reference wrote). */
static int attention(replay *r, conf_problem *p)
{
    if (strcmp(r->op, "attention"))
        return -1;
    int ix[CONF_AT_QPOS + 1];
    static const char *const names[] = {"q",         "cache",        "block_table", "context_lens",
                                        "cu_q_lens", "topk_indices", "sinks",       "o",
                                        "lse",       "cos",          "sin",         "q_pos"};
    static const mla_dtype implied[] = {NONE,          MLA_DTYPE_U8,  MLA_DTYPE_I32, MLA_DTYPE_I32,
                                        MLA_DTYPE_I32, MLA_DTYPE_I32, MLA_DTYPE_F32, NONE,
                                        NONE,          MLA_DTYPE_F32, MLA_DTYPE_F32, NONE};
    for (int i = 0; i <= CONF_AT_QPOS; ++i) {
        const int out = i == CONF_AT_O || (i == CONF_AT_LSE && replay_find(r, "lse"));
        ix[i] = out ? replay_add_output(r, p, names[i], NULL)
                    : replay_add_input(r, p, names[i], implied[i]);
    }
    if (any_negative(ix, CONF_AT_QPOS + 1) || p->arg[CONF_AT_Q].t.ndim != 3 ||
        p->arg[CONF_AT_O].t.ndim != 3)
        return fail_setup(r);
    const conf_arg *q = &p->arg[CONF_AT_Q], *o = &p->arg[CONF_AT_O];
    const conf_arg *ctxa = &p->arg[CONF_AT_CONTEXT], *cua = &p->arg[CONF_AT_CU];
    const int64_t S = conf_numel(ctxa), T = q->t.shape[0], H = q->t.shape[1], L = o->t.shape[2];
    const int64_t nn = (int64_t)replay_param(r, "next_n", 1);
    replay_cache_geom cg = replay_latent_geom(r, L, q->t.shape[2] - L);
    conf_attn_geom *g = &cg.g;
    int64_t *ctx = malloc((size_t)(S + 1) * sizeof *ctx),
            *cu = malloc((size_t)(S + 2) * sizeof *cu);
    double *tol_o = calloc((size_t)(T * H * L + 1), sizeof *tol_o);
    double *tol_lse = calloc((size_t)(T * H + 1), sizeof *tol_lse);
    int rc = MLA_EXIT_FAIL;
    if (!ctx || !cu || !tol_o || !tol_lse)
        goto done;
    for (int64_t s = 0; s <= S; ++s) {
        cu[s] = conf_numel(cua) ? (int64_t)conf_in_value(cua, s) : s * nn;
        if (s < S)
            ctx[s] = (int64_t)conf_in_value(ctxa, s);
    }
    g->S = S, g->H = H, g->ctx = ctx, g->cu = cu;
    g->contiguous = !replay_word(r, "--in", "block_table");
    g->max_blocks = g->contiguous ? 1 : p->arg[CONF_AT_TABLE].t.shape[1];
    g->topk = p->arg[CONF_AT_TOPK].t.ndim == 2 ? p->arg[CONF_AT_TOPK].t.shape[1] : 0;
    g->q_scale = (float)replay_param(r, "q_scale", 1.0);
    g->softmax_scale = (float)replay_param(r, "softmax_scale", 0.0);
    g->rope = replay_word(r, "--in", "k_nope") != NULL;
    g->sinks = replay_word(r, "--in", "sinks") != NULL;
    const char *style = replay_word(r, "--param", "style");
    g->style = style && !strcmp(style, "neox") ? MLA_ROPE_NEOX : MLA_ROPE_INTERLEAVED;
    const conf_arg *ca = &p->arg[CONF_AT_CACHE];
    int fits =
        cu[0] == 0 && cu[S] == T && ca->t.ndim == 2 &&
        (g->contiguous ? ca->t.shape[0] >= S
                       : table_fits(&p->arg[CONF_AT_TABLE], ctxa, g->block_size, ca->t.shape[0]));
    fits = fits && (!g->topk || p->arg[CONF_AT_TOPK].t.shape[0] == T) &&
           (!g->sinks || conf_numel(&p->arg[CONF_AT_SINKS]) == H) &&
           (!g->rope ||
            (p->arg[CONF_AT_COS].t.ndim == 2 && 2 * p->arg[CONF_AT_COS].t.shape[1] == g->R &&
             conf_numel(&p->arg[CONF_AT_QPOS]) == T));
    for (int64_t s = 0; fits && s < S; ++s)
        fits = cu[s + 1] >= cu[s] && (ctx[s] == 0 || ctx[s] >= cu[s + 1] - cu[s]) &&
               (!g->contiguous || ctx[s] <= g->block_size);
    const int64_t P = p->arg[CONF_AT_COS].t.shape[0];
    for (int64_t t = 0; fits && g->rope && t < T; ++t)
        fits = conf_in_value(&p->arg[CONF_AT_QPOS], t) >= 0 &&
               conf_in_value(&p->arg[CONF_AT_QPOS], t) < (double)P;
    if (!fits) {
        rc = fail_setup(r);
        goto done;
    }
    replay_out *oc = replay_find(r, "cache");
    if (g->rope && (!oc || !oc->has_ref))
        goto done;
    const unsigned char *keys = g->rope ? oc->ref.data : conf_arg_elem0(&p->arg[CONF_AT_CACHE]);
    const mla_status st = conf_attention_tols(p, g, keys, tol_o, tol_lse);
    const conf_bound b = {.kind = CONF_BOUND_TOL, .limit = 1.0, .zero_sign_free = 1};
    p->arg[CONF_AT_O].bound = b, p->arg[CONF_AT_O].bound.tol = tol_o;
    p->arg[CONF_AT_LSE].bound = b, p->arg[CONF_AT_LSE].bound.tol = tol_lse;
    rc = judge(r, p, CONF_AT_O, st);
    if (replay_find(r, "lse"))
        rc |= judge(r, p, CONF_AT_LSE, st);
    if (g->rope)
        rc |= replay_cache(r, oc, "cache", "slots", &cg, NULL, NULL);
done:
    free(ctx), free(cu), free(tol_o), free(tol_lse);
    return rc ? MLA_EXIT_FAIL : MLA_EXIT_OK;
}

int replay_bounds(replay *r)
{
    int (*const judges[])(replay *, conf_problem *) = {gemms, norms, indexer, attention};
    int rc = -1;
    for (size_t k = 0; k < sizeof judges / sizeof judges[0] && rc < 0; ++k) {
        conf_problem p;
        memset(&p, 0, sizeof p);
        rc = judges[k](r, &p);
        conf_problem_free(&p);
    }
    return rc;
}
