/* The composite calls' judges (apps/replay.h): mla_prepare, the layer
 * forward and the indexer's prepare are held, as tests/test_layer.c holds
 * the layer on every backend, to the float64 references of
 * conformance/layer_ref64.h and indexer_ref64.h computed here from the
 * dump's weights and inputs: every value within LAYER_REF64_LAMBDA of its
 * propagated standard deviation sd, the dumped values and the rerun's
 * alike. The caches' written elements: |value - v| <= lambda sd(v) + half
 * the element's quantization step, v the reference's value before the
 * cache's rounding (|Q(a) - a| is at most that half step). The sparse
 * layer attends to each side's own top-k selection (the dump's
 * sel.topk.npy, the rerun's own record), which must be a valid causal
 * selection, as in tests/test_layer.c. The indexer's q is judged with the
 * power-of-two scale s_q its side chose: any scale the rule gives for an
 * amax within lambda sd of the reference's, the one that fits both q's
 * codes and w_out = w s_q 128^-0.5 Hi^-0.5 (five fp32 roundings, 8u). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps/cmd.h"
#include "apps/demo.h"
#include "apps/replay.h"
#include "conformance/indexer_ref64.h"
#include "conformance/layer_ref64.h"

#define LAMBDA LAYER_REF64_LAMBDA
#define U32 0x1p-24

/* ------------------------------------------------------------ arrays */

/* Every value of an array of dtype dt, in double. */
static double *values_of(const mla_npy *a, mla_dtype dt)
{
    const size_t es = mla_dtype_size(dt);
    double *v = malloc((size_t)a->numel * sizeof *v + 1);
    for (int64_t i = 0; v && i < a->numel; ++i)
        v[i] = conf_decode_value(dt, conf_load_bits((const unsigned char *)a->data + i * es, es));
    return v;
}

/* Input `name`: its file (in a) and its values (NULL when absent or unreadable). */
static double *input(const replay *r, const char *name, mla_npy *a, mla_dtype *dt)
{
    const char *path = replay_word(r, "--in", name);
    memset(a, 0, sizeof *a);
    if (!path || replay_load(path, a))
        return NULL;
    const mla_dtype d = replay_dtype(r, name, a->type);
    if (dt)
        *dt = d;
    return values_of(a, d);
}

static int64_t *indices(const replay *r, const char *name, int64_t *n)
{
    mla_npy a;
    double *v = input(r, name, &a, NULL);
    int64_t *out = v ? malloc((size_t)a.numel * sizeof *out + 1) : NULL;
    for (int64_t i = 0; out && i < a.numel; ++i)
        out[i] = (int64_t)v[i];
    *n = a.numel;
    free(v);
    mla_npy_free(&a);
    return out;
}

static double unit_roundoff(mla_dtype dt)
{
    return dt == MLA_DTYPE_F32                                            ? U32
           : (dt == MLA_DTYPE_FP8_E4M3FN || dt == MLA_DTYPE_FP8_E4M3FNUZ) ? 0x1p-4
                                                                          : 0x1p-8;
}

/* ------------------------------------------------------------ judging */

typedef struct side_stat {
    int64_t bad;
    double worst;
    char first[160];
} side_stat;

static void judge_value(side_stat *s, int64_t i, double v, double ref, double allowed)
{
    int ok;
    double e = 0;
    if (!isfinite(ref) || !isfinite(v)) {
        ok = (isnan(ref) && isnan(v)) || v == ref;
    } else {
        e = v == ref ? 0.0 : fabs(v - ref) / allowed;
        ok = e <= 1.0;
        s->worst = fmax(s->worst, e);
    }
    if (!ok && !s->bad++)
        snprintf(s->first, sizeof s->first, "value %lld: %.9g, the reference %.9g +- %.3g",
                 (long long)i, v, ref, allowed);
}

static int report(replay_out *o, const side_stat *st, const char *what)
{
    const int bad = st[0].bad || st[1].bad;
    return replay_say(o, bad ? MLA_EXIT_FAIL : MLA_EXIT_OK,
                      "against %s (%g sd): dumped %s (worst %.3g of it); rerun %s (worst %.3g)%s%s",
                      what, LAMBDA, st[0].bad ? "OUTSIDE" : "within", st[0].worst,
                      st[1].bad ? "OUTSIDE" : "within", st[1].worst, bad ? ": " : "",
                      st[0].bad ? st[0].first : st[1].first);
}

/* Output o's values, side k against ref[k] within lambda sd[k]. */
static int judge_sd(replay_out *o, double *const *ref, double *const *sd, const char *what)
{
    side_stat st[2] = {{0, 0, ""}, {0, 0, ""}};
    for (int k = 0; k < 2; ++k) {
        double *v = values_of(k ? &o->got : &o->dumped, o->dt);
        for (int64_t i = 0; v && i < o->got.numel; ++i)
            judge_value(&st[k], i, v[i], ref[k][i], LAMBDA * sd[k][i] + 1e-300);
        if (!v)
            st[k].bad = 1;
        free(v);
    }
    return report(o, st, what);
}

/* ------------------------------------------------------------- the model */

typedef struct model {
    mla_context *ctx;
    mla_layer_weights_ex w;
    int loaded;
    demo_ref dr;
    mla_npy cos, sin;
    replay_cache_geom cg;
    ref64_cache cache;
} model;

static void model_free(model *m)
{
    if (m->loaded)
        demo_ref_free(&m->dr), mla_layer_weights_free(m->ctx, &m->w);
    ref64_cache_free(&m->cache);
    mla_npy_free(&m->cos), mla_npy_free(&m->sin);
    mla_context_destroy(m->ctx);
    memset(m, 0, sizeof *m);
}

static int fail_all(replay *r, const char *why)
{
    for (int i = 0; i < r->nout; ++i)
        replay_say(&r->out[i], MLA_EXIT_FAIL, "DIFFERENT: no reference: %s", why);
    return MLA_EXIT_FAIL;
}

/* The layer of the dump's weights.safetensors and config.json, on the
 * host, and the float64 model over it with the call's roundings. */
static int load_model(replay *r, model *m, mla_dtype act, mla_dtype y_dt)
{
    const char *weights = replay_word(r, "--param", "weights");
    const char *rule = replay_word(r, "--param", "kc_rule");
    char path[4200], err[300] = "the weights or the config cannot be read";
    mla_hf_config hc;
    mla_safetensors *f = NULL;
    mla_layer_load_options lo;
    mla_layer_load_options_default(&lo);
    lo.prefix = "";
    lo.kv_b_fp8 = MLA_KV_B_FP8_KEEP;
    lo.kc_rule = rule && !strcmp(rule, "ocp") ? MLA_MXFP4_OCP : MLA_MXFP4_PRODUCTION;
    snprintf(path, sizeof path, "%s/config.json", r->dir);
    mla_dtype cd = MLA_DTYPE_F32;
    if (!weights || mla_context_create(MLA_BACKEND_REFERENCE, NULL, &m->ctx) != MLA_OK ||
        mla_hf_config_load(m->ctx, path, &hc) != MLA_OK ||
        mla_safetensors_open(m->ctx, weights, &f) != MLA_OK ||
        mla_layer_weights_load(m->ctx, f, &hc.model, 0, &lo, &m->w) != MLA_OK) {
        mla_safetensors_close(f);
        return fail_all(r, err);
    }
    mla_safetensors_close(f);
    m->loaded = -1; /* the weights only */
    double *c = input(r, "cos", &m->cos, &cd), *s = input(r, "sin", &m->sin, &cd);
    free(c), free(s);
    if (!m->cos.data || !m->sin.data || m->cos.type != MLA_NPY_F4 || m->sin.type != MLA_NPY_F4)
        return fail_all(r, "the RoPE table (cos, sin) is not in the dump");
    if (demo_ref_from_weights(m->ctx, &m->w, m->cos.data, m->sin.data, &m->dr, err, sizeof err))
        return fail_all(r, err);
    m->loaded = 1;
    const mla_model_config *cfg = &m->w.config;
    m->cg = replay_latent_geom(r, cfg->kv_lora, cfg->rope);
    ref64_model *rm = &m->dr.m;
    rm->cache_dtype = m->cg.g.cache_dtype;
    rm->k_scale = (float)m->cg.g.k_scale;
    rm->fp8_scaled = m->cg.g.layout == MLA_CACHE_FP8_SCALED;
    rm->u_act = unit_roundoff(act);
    rm->u_q = unit_roundoff(replay_dtype_param(r, "q_dtype", MLA_DTYPE_BF16));
    rm->u_out = unit_roundoff(y_dt);
    const char *form = replay_word(r, "--param", "form");
    rm->expanded =
        form && !strcmp(form, "expanded") && m->w.base.kv_b_proj.w.dtype == MLA_DTYPE_BF16;
    return MLA_EXIT_OK;
}

/* The reference cache from the input cache's bytes (any layout), every
 * row's variance 0: only this call's arithmetic is measured. */
static int cache_from_input(replay *r, model *m, int64_t *nb)
{
    mla_npy in;
    double *unused = input(r, "cache", &in, NULL);
    free(unused);
    const conf_attn_geom *g = &m->cg.g;
    const int64_t D = g->L + g->R, bs = g->block_size;
    *nb = in.ndim == 2 ? in.shape[0] : 0;
    ref64_cache_init(&m->cache, &m->w.config, *nb * bs);
    ref64_cache *c = &m->cache;
    c->pre = calloc((size_t)(*nb * bs * D + 1), sizeof *c->pre);
    c->vpre = calloc((size_t)(*nb * bs * D + 1), sizeof *c->vpre);
    const int ok = in.data && c->row && c->var && c->pre && c->vpre && bs > 0;
    for (int64_t slot = 0; ok && slot < *nb * bs; ++slot)
        for (int64_t d = 0; d < D; ++d)
            c->row[slot * D + d] = conf_cache_value(
                g, (const unsigned char *)in.data + (slot / bs) * in.shape[1], slot % bs, d);
    mla_npy_free(&in);
    return ok ? MLA_EXIT_OK : fail_all(r, "the input cache is not in the dump");
}

/* The latent cache's oracle: the reference's row before the cache's rounding. */
static int latent_oracle(void *ctx, int64_t slot, int64_t d, double *v, double *tol)
{
    const model *m = ctx;
    const int64_t D = m->cg.g.L + m->cg.g.R;
    if (d >= D)
        return 2; /* FP8_SCALED's group scales: judged through the values */
    *v = m->cache.pre[slot * D + d];
    *tol = LAMBDA * sqrt(m->cache.vpre[slot * D + d]);
    return 1;
}

/* The step's indices are the model's: positions in the RoPE table, slots
 * and blocks in the cache (a dump the library accepted has them so; a
 * folder edited by hand must not make the reference read past its arrays). */
static int indices_fit(const model *m, const int64_t *pos, const int64_t *slots, int64_t T,
                       int64_t nb)
{
    const int64_t P = m->cos.ndim == 2 ? m->cos.shape[0] : 0, cap = nb * m->cg.g.block_size;
    for (int64_t t = 0; t < T; ++t)
        if (pos[t] < 0 || pos[t] >= P || slots[t] >= cap)
            return 0;
    return 1;
}

/* ----------------------------------------------------------- prepare */

static int judge_prepare(replay *r, model *m)
{
    mla_npy xa;
    mla_dtype act = MLA_DTYPE_BF16;
    int64_t T = 0, ns = 0, nb = 0;
    double *x = input(r, "x", &xa, &act);
    int64_t *pos = indices(r, "positions", &T), *slots = indices(r, "slots", &ns);
    replay_out *oq = replay_find(r, "q_cat"), *oc = replay_find(r, "cache");
    int rc = !x || !pos || !slots || !oq || !oc || T != ns ? fail_all(r, "inputs missing")
                                                           : load_model(r, m, act, MLA_DTYPE_F32);
    if (rc == MLA_EXIT_OK)
        rc = cache_from_input(r, m, &nb);
    const mla_model_config *c = &m->w.config;
    if (rc == MLA_EXIT_OK &&
        (xa.numel != T * c->hidden || oq->got.numel != T * c->heads * (c->kv_lora + c->rope) ||
         !indices_fit(m, pos, slots, T, nb)))
        rc = fail_all(r, "the dump's arrays do not fit the layer's config");
    double *q = rc ? NULL : malloc((size_t)oq->got.numel * sizeof *q + 1);
    double *sd = rc ? NULL : malloc((size_t)oq->got.numel * sizeof *sd + 1);
    if (rc == MLA_EXIT_OK && (!q || !sd))
        rc = fail_all(r, "out of memory");
    if (rc == MLA_EXIT_OK) {
        ref64_prepare(&m->dr.m, &m->cache, T, x, pos, slots, q, sd);
        rc = judge_sd(oq, (double *[]){q, q}, (double *[]){sd, sd},
                      "the float64 layer reference's q_cat");
        rc |= replay_cache(r, oc, "cache", "slots", &m->cg, latent_oracle, m);
    }
    free(x), free(pos), free(slots), free(q), free(sd);
    mla_npy_free(&xa);
    return rc ? MLA_EXIT_FAIL : MLA_EXIT_OK;
}

/* ------------------------------------------------------------- layer */

typedef struct step_in {
    int64_t T, S, mb, K, nx;
    double *x;
    int64_t *pos, *slots;
    int32_t *cu, *ctx, *bt;
} step_in;

/* A side's selection [T, K] from its record (NULL path: none); NULL with
 * *full set when every row attends to all its keys anyway. */
static int32_t *selection(const step_in *s, const char *path, int *full, char *why, size_t len)
{
    *full = 1;
    for (int64_t q = 0; q < s->S; ++q)
        for (int64_t row = s->cu[q]; row < s->cu[q + 1]; ++row)
            *full &= s->ctx[q] - (s->cu[q + 1] - row) + 1 <= s->K;
    mla_npy a;
    if (!path || replay_load(path, &a)) {
        snprintf(why, len, "the layer's top-k selection was not recorded");
        return NULL;
    }
    int ok = a.type == MLA_NPY_I4 && a.ndim == 2 && a.shape[0] == s->T && a.shape[1] == s->K;
    for (int64_t q = 0; ok && q < s->S; ++q)
        for (int64_t row = s->cu[q]; ok && row < s->cu[q + 1]; ++row)
            ok = s->ctx[q] == 0 || ref64_selection_valid((int32_t *)a.data + row * s->K, s->K,
                                                         s->ctx[q] - (s->cu[q + 1] - row));
    if (!ok) { /* a record that is not a selection fails, needed or not */
        snprintf(why, len, "its top-k selection is not a valid causal one");
        mla_npy_free(&a);
        *full = 0;
        return NULL;
    }
    *full = 0;
    return a.data;
}

/* x and y [T, hidden], the rows of every sequence cu[s] .. cu[s + 1] - 1
 * within its context, every block a context reads in the cache. */
static int step_fits(const step_in *s, const model *m, int64_t nb, const replay_out *oy)
{
    const int64_t hid = m->w.config.hidden, bs = m->cg.g.block_size;
    int ok = s->nx == s->T * hid && oy->got.numel == s->T * hid && s->cu[0] == 0 &&
             s->cu[s->S] == s->T && indices_fit(m, s->pos, s->slots, s->T, nb);
    for (int64_t q = 0; ok && q < s->S; ++q) {
        ok = s->cu[q + 1] >= s->cu[q] && (s->ctx[q] == 0 || s->ctx[q] >= s->cu[q + 1] - s->cu[q]) &&
             s->ctx[q] <= s->mb * bs;
        for (int64_t b = 0; ok && b * bs < s->ctx[q]; ++b)
            ok = s->bt[q * s->mb + b] >= 0 && s->bt[q * s->mb + b] < nb;
    }
    return ok;
}

static int step_inputs(replay *r, step_in *s, mla_dtype *act)
{
    mla_npy xa;
    int64_t n = 0, *ctx = NULL, *cu = NULL, *bt = NULL;
    memset(s, 0, sizeof *s);
    s->x = input(r, "x", &xa, act);
    s->nx = xa.numel;
    mla_npy_free(&xa);
    s->pos = indices(r, "positions", &s->T);
    s->slots = indices(r, "slots", &n);
    ctx = indices(r, "context_lens", &s->S);
    bt = indices(r, "block_table", &s->mb);
    const int has_cu = replay_word(r, "--in", "cu_q_lens") != NULL;
    int64_t ncu = 0;
    cu = has_cu ? indices(r, "cu_q_lens", &ncu) : NULL;
    const int64_t nn = (int64_t)replay_param(r, "next_n", 1);
    int ok = s->x && s->pos && s->slots && ctx && bt && n == s->T && (!has_cu || cu) && s->S > 0;
    s->cu = malloc((size_t)(s->S + 1) * sizeof *s->cu);
    s->ctx = malloc((size_t)(s->S + 1) * sizeof *s->ctx);
    s->bt = malloc((size_t)(s->mb + 1) * sizeof *s->bt);
    ok = ok && s->cu && s->ctx && s->bt && (!has_cu || ncu == s->S + 1);
    for (int64_t q = 0; ok && q <= s->S; ++q) {
        s->cu[q] = (int32_t)(has_cu ? cu[q] : q * nn);
        if (q < s->S)
            s->ctx[q] = (int32_t)ctx[q];
    }
    for (int64_t i = 0; ok && i < s->mb; ++i)
        s->bt[i] = (int32_t)bt[i];
    s->mb = ok ? s->mb / s->S : 0;
    free(ctx), free(cu), free(bt);
    return ok ? MLA_EXIT_OK : fail_all(r, "the step's inputs are not in the dump");
}

static void step_free(step_in *s)
{
    free(s->x), free(s->pos), free(s->slots), free(s->cu), free(s->ctx), free(s->bt);
}

/* The index cache's oracle: the reference k of the token written at slot. */
typedef struct index_ref {
    const double *k, *sd;
    const int64_t *token; /* [slots]: the token written there, or -1 */
    int64_t D;
} index_ref;

static int index_oracle(void *ctx, int64_t slot, int64_t d, double *v, double *tol)
{
    const index_ref *x = ctx;
    if (d >= x->D || x->token[slot] < 0)
        return 2; /* the scale: judged through the values */
    *v = x->k[x->token[slot] * x->D + d];
    *tol = LAMBDA * x->sd[x->token[slot] * x->D + d];
    return 1;
}

/* The layer's indexer k (tests its index cache): indexer_ref64 over the
 * loaded indexer weights, the layer's own dtypes. */
static int judge_index_cache(replay *r, model *m, const step_in *s, mla_dtype act, int64_t nb)
{
    const mla_model_config *c = &m->w.config;
    const mla_indexer_weights *iw = &m->w.indexer;
    const replay_cache_geom cg = replay_index_geom(r, 1);
    const int64_t D = c->index_head_dim, slots = nb * cg.idx.block_size;
    int mx = 0;
    double *wk = demo_weight_values(m->ctx, &iw->wk.w, &iw->wk.scale, 1, &mx);
    double *lw = demo_weight_values(m->ctx, &iw->k_norm_weight, NULL, 1, &mx);
    double *lb = demo_weight_values(m->ctx, &iw->k_norm_bias, NULL, 1, &mx);
    double *k = malloc((size_t)(s->T * D + 1) * sizeof *k);
    double *sd = malloc((size_t)(s->T * D + 1) * sizeof *sd);
    int64_t *token = malloc((size_t)(slots + 1) * sizeof *token);
    int rc = MLA_EXIT_FAIL;
    const char *style = replay_word(r, "--param", "idx_style");
    if (wk && lw && lb && k && sd && token) {
        const ref64_indexer im = {.Hi = c->index_heads,
                                  .D = D,
                                  .R = c->rope,
                                  .q_lora = c->q_lora,
                                  .hidden = c->hidden,
                                  .wk = wk,
                                  .ln_w = lw,
                                  .ln_b = lb,
                                  .cos = m->cos.data,
                                  .sin = m->sin.data,
                                  .neox = !style || !strcmp(style, "neox"),
                                  .hadamard = replay_param(r, "idx_hadamard", 0) != 0,
                                  .u_act = unit_roundoff(act),
                                  .u_k = unit_roundoff(act)}; /* the layer's k is act */
        ref64_indexer_k(&im, s->T, s->x, s->pos, k, sd);
        for (int64_t i = 0; i < slots; ++i)
            token[i] = -1;
        for (int64_t t = 0; t < s->T; ++t)
            if (s->slots[t] >= 0 && s->slots[t] < slots)
                token[s->slots[t]] = t;
        index_ref ir = {k, sd, token, D};
        rc = replay_cache(r, replay_find(r, "index_cache"), "index_cache", "slots", &cg,
                          index_oracle, &ir);
    }
    free(wk), free(lw), free(lb), free(k), free(sd), free(token);
    return rc;
}

static int judge_layer(replay *r, model *m)
{
    step_in s;
    mla_dtype act = MLA_DTYPE_BF16;
    replay_out *oy = replay_find(r, "y"), *oc = replay_find(r, "cache");
    int rc = oy && oc ? step_inputs(r, &s, &act) : fail_all(r, "outputs missing");
    if (rc == MLA_EXIT_OK)
        rc = load_model(r, m, act, oy->dt);
    int64_t nb = 0;
    if (rc == MLA_EXIT_OK)
        rc = cache_from_input(r, m, &nb);
    const mla_model_config *c = &m->w.config;
    const int sparse = c->index_heads > 0 && replay_param(r, "dense", 0) == 0;
    s.K = c->index_topk;
    if (rc == MLA_EXIT_OK && !step_fits(&s, m, nb, oy))
        rc = fail_all(r, "the dump's arrays do not fit the layer's config");
    char path[4200], why[2][300] = {"", ""};
    snprintf(path, sizeof path, "%s/sel.topk.npy", r->dir);
    int32_t *sel[2] = {NULL, NULL};
    int full[2] = {1, 1};
    for (int k = 0; rc == MLA_EXIT_OK && sparse && k < 2; ++k) {
        sel[k] = selection(&s, k ? r->sel_rerun : path, &full[k], why[k], sizeof why[k]);
        if (!sel[k] && !full[k])
            rc = replay_say(oy, MLA_EXIT_FAIL, "DIFFERENT: the %s side: %s", k ? "rerun" : "dumped",
                            why[k]);
    }
    const int64_t n = s.T * c->hidden;
    double *y[2] = {NULL, NULL}, *sd[2] = {NULL, NULL};
    ref64_cache start = m->cache, run;
    for (int k = 0; rc == MLA_EXIT_OK && k < 2; ++k) {
        if (k == 1 && (sel[1] == sel[0] ||
                       (sel[0] && sel[1] && !memcmp(sel[0], sel[1], (size_t)(s.T * s.K) * 4)))) {
            y[1] = y[0], sd[1] = sd[0]; /* the same selection: the same reference */
            break;
        }
        y[k] = malloc((size_t)n * sizeof *y[k] + 1), sd[k] = malloc((size_t)n * sizeof *sd[k] + 1);
        /* each run from the input cache; the rows it writes do not depend on the selection */
        ref64_cache_init(&run, c, start.num_slots);
        run.pre = start.pre, run.vpre = start.vpre;
        const size_t rows = (size_t)(start.num_slots * (c->kv_lora + c->rope)) * sizeof(double);
        if (!y[k] || !sd[k] || !run.row || !run.var) {
            rc = fail_all(r, "out of memory");
        } else {
            memcpy(run.row, start.row, rows);
            ref64_step(&m->dr.m, &run, s.T, s.x, s.pos, s.slots, s.S, s.cu, s.ctx, s.bt, s.mb,
                       m->cg.g.block_size, sel[k], s.K, y[k], sd[k]);
        }
        run.pre = run.vpre = NULL;
        ref64_cache_free(&run);
    }
    if (rc == MLA_EXIT_OK) {
        rc = judge_sd(oy, y, sd, "the float64 layer reference");
        rc |= replay_cache(r, oc, "cache", "slots", &m->cg, latent_oracle, m);
        if (sparse && replay_find(r, "index_cache"))
            rc |= judge_index_cache(r, m, &s, act, nb);
    }
    if (y[1] != y[0])
        free(y[1]), free(sd[1]);
    free(y[0]), free(sd[0]), free(sel[0]), free(sel[1] != sel[0] ? sel[1] : NULL);
    if (oy && oc)
        step_free(&s);
    return rc ? MLA_EXIT_FAIL : MLA_EXIT_OK;
}

/* --------------------------------------------------- indexer prepare */

/* Projection `name` ([N, K] bf16, or fp8 codes with NAME_scale blocks of
 * 128 x 128, or one [1, 1]) as values. */
static double *projection(const replay *r, const char *name, int64_t *N, int64_t *K)
{
    char nm[64];
    mla_npy a, s;
    double *w = input(r, name, &a, NULL);
    snprintf(nm, sizeof nm, "%s_scale", name);
    double *sc = input(r, nm, &s, NULL);
    *N = a.ndim == 2 ? a.shape[0] : 0, *K = a.ndim == 2 ? a.shape[1] : 0;
    const int64_t cols = s.ndim == 2 ? s.shape[1] : 0, one = s.numel == 1;
    for (int64_t i = 0; w && sc && i < *N * *K; ++i)
        w[i] *= sc[one ? 0 : (i / *K / 128) * cols + (i % *K) / 128];
    free(sc);
    mla_npy_free(&a), mla_npy_free(&s);
    return *N && *K ? w : (free(w), NULL);
}

/* The scale rule of q's quantization: 2^ceil(log2(max(amax, 1e-4) / fp8_max)). */
static double q_scale(double amax, double fp8_max)
{
    int e;
    const double f = frexp(fmax(amax, 1e-4) / fp8_max, &e);
    return ldexp(1.0, f == 0.5 ? e - 1 : e);
}

/* q_fp8 and w_out of one side: per (token, head) some scale the rule
 * allows must fit all of the row's codes and its head weight. */
static void judge_q_row(side_stat *st, const unsigned char *codes, mla_dtype fp8, float w_out,
                        const double *q, const double *sd_q, double w, double sd_w, int64_t D,
                        double c, int64_t row)
{
    const double fmax8 = fp8 == MLA_DTYPE_FP8_E4M3FNUZ ? 224.0 : 448.0;
    double lo = 0, hi = 0;
    for (int64_t d = 0; d < D; ++d) {
        lo = fmax(lo, fabs(q[d]) - LAMBDA * sd_q[d]);
        hi = fmax(hi, fabs(q[d]) + LAMBDA * sd_q[d]);
    }
    double best = INFINITY;
    for (double s = q_scale(lo, fmax8); s <= q_scale(hi, fmax8); s *= 2.0) {
        double e = 0;
        for (int64_t d = 0; d < D; ++d) {
            const double v = conf_decode_value(fp8, codes[d]) * s;
            const double allowed = LAMBDA * sd_q[d] + conf_code_half_gap(fp8, codes[d]) * s;
            e = fmax(e, v == q[d] ? 0.0 : isfinite(v) ? fabs(v - q[d]) / allowed : INFINITY);
        }
        const double want = w * s * c, allowed = LAMBDA * sd_w * s * c + 8.0 * U32 * fabs(want);
        e = fmax(e, (double)w_out == want ? 0.0 : fabs((double)w_out - want) / allowed);
        best = fmin(best, e);
    }
    st->worst = fmax(st->worst, isfinite(best) ? best : 0);
    if (!(best <= 1.0) && !st->bad++)
        snprintf(st->first, sizeof st->first,
                 "row %lld (token, head): no scale of the rule fits its codes and w_out %.9g "
                 "(the reference %.9g)",
                 (long long)row, (double)w_out, w * q_scale(hi, fmax8) * c);
}

static int judge_indexer_prepare(replay *r, model *m)
{
    char path[4200];
    mla_hf_config hc;
    snprintf(path, sizeof path, "%s/config.json", r->dir);
    if (mla_context_create(MLA_BACKEND_REFERENCE, NULL, &m->ctx) != MLA_OK ||
        mla_hf_config_load(m->ctx, path, &hc) != MLA_OK)
        return fail_all(r, "the dump's config.json cannot be read");
    const mla_model_config *c = &hc.model;
    int64_t N[3], K[3], T = 0;
    double *wq = projection(r, "wq_b", &N[0], &K[0]), *wk = projection(r, "wk", &N[1], &K[1]);
    double *wp = projection(r, "weights_proj", &N[2], &K[2]);
    mla_npy la, xa, wa, ba, ca = {0}, sa = {0};
    mla_dtype act = MLA_DTYPE_BF16, cd;
    double *ql = input(r, "q_lat_normed", &la, &act), *x = input(r, "x", &xa, NULL);
    double *lw = input(r, "k_norm_weight", &wa, NULL), *lb = input(r, "k_norm_bias", &ba, NULL);
    free(input(r, "cos", &ca, &cd)), free(input(r, "sin", &sa, &cd));
    int64_t *pos = indices(r, "positions", &T);
    replay_out *oq = replay_find(r, "q_fp8"), *ow = replay_find(r, "w_out");
    replay_out *ok_ = replay_find(r, "k");
    const int64_t Hi = c->index_heads, D = c->index_head_dim;
    int rc = MLA_EXIT_OK;
    if (!wq || !wk || !wp || !ql || !x || !lw || !lb || !pos || !ca.data || !sa.data || !oq ||
        !ow || !ok_ || N[0] != Hi * D || N[1] != D || N[2] != Hi || K[2] != K[1] ||
        la.numel != T * K[0] || xa.numel != T * K[1] || wa.numel != D || ba.numel != D ||
        ca.ndim != 2 || 2 * ca.shape[1] != c->rope || oq->got.numel != T * Hi * D ||
        ow->got.numel != T * Hi || ok_->got.numel != T * D)
        rc = fail_all(r, "the dump's weights and inputs do not make the indexer's prepare");
    for (int64_t t = 0; rc == MLA_EXIT_OK && t < T; ++t)
        if (pos[t] < 0 || pos[t] >= ca.shape[0])
            rc = fail_all(r, "a position past the RoPE table");
    const char *style = replay_word(r, "--param", "style");
    const ref64_indexer im = {.Hi = Hi,
                              .D = D,
                              .R = c->rope,
                              .q_lora = K[0],
                              .hidden = K[1],
                              .wq_b = wq,
                              .wk = wk,
                              .wproj = wp,
                              .ln_w = lw,
                              .ln_b = lb,
                              .cos = ca.data,
                              .sin = sa.data,
                              .neox = !style || !strcmp(style, "neox"),
                              .hadamard = replay_param(r, "hadamard", 0) != 0,
                              .u_act = unit_roundoff(act),
                              .u_k = unit_roundoff(ok_ ? ok_->dt : MLA_DTYPE_BF16)};
    const size_t nq = (size_t)(T * Hi * D + 1), nw = (size_t)(T * Hi + 1), nk = (size_t)(T * D + 1);
    double *q = rc ? NULL : malloc(nq * 8), *sq = rc ? NULL : malloc(nq * 8);
    double *w = rc ? NULL : malloc(nw * 8), *sw = rc ? NULL : malloc(nw * 8);
    double *k = rc ? NULL : malloc(nk * 8), *sk = rc ? NULL : malloc(nk * 8);
    if (rc == MLA_EXIT_OK && q && sq && w && sw && k && sk) {
        ref64_indexer_k(&im, T, x, pos, k, sk);
        ref64_indexer_q(&im, T, ql, x, pos, q, sq, w, sw);
        rc = judge_sd(ok_, (double *[]){k, k}, (double *[]){sk, sk},
                      "the float64 indexer reference's k");
        side_stat st[2] = {{0, 0, ""}, {0, 0, ""}};
        const double cst = 1.0 / sqrt(128.0) / sqrt((double)Hi);
        for (int s = 0; s < 2; ++s) {
            const mla_npy *cq = s ? &oq->got : &oq->dumped, *cw = s ? &ow->got : &ow->dumped;
            for (int64_t i = 0; i < T * Hi; ++i)
                judge_q_row(&st[s], (const unsigned char *)cq->data + i * D, oq->dt,
                            ((const float *)cw->data)[i], q + i * D, sq + i * D, w[i], sw[i], D,
                            cst, i);
        }
        rc |= report(oq, st, "the float64 indexer reference's q, with each side's scale");
        replay_say(ow, rc, "judged with q_fp8 (the scale they share)");
    } else if (rc == MLA_EXIT_OK) {
        rc = fail_all(r, "out of memory");
    }
    free(wq), free(wk), free(wp), free(ql), free(x), free(lw), free(lb), free(pos);
    free(q), free(sq), free(w), free(sw), free(k), free(sk);
    mla_npy_free(&la), mla_npy_free(&xa), mla_npy_free(&wa), mla_npy_free(&ba);
    mla_npy_free(&ca), mla_npy_free(&sa);
    return rc ? MLA_EXIT_FAIL : MLA_EXIT_OK;
}

int replay_layer(replay *r)
{
    int (*judge)(replay *, model *) = !strcmp(r->op, "prepare")           ? judge_prepare
                                      : !strcmp(r->op, "layer")           ? judge_layer
                                      : !strcmp(r->op, "indexer_prepare") ? judge_indexer_prepare
                                                                          : NULL;
    if (!judge)
        return -1;
    model m;
    memset(&m, 0, sizeof m);
    const int rc = judge(r, &m);
    model_free(&m);
    return rc;
}
