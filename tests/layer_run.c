/* A prefill step and decode steps of one layer on one backend, with the
 * float64 reference alongside (tests/layer_run.h). */
#include "tests/layer_run.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/layer_internal.h"
#include "core/prepare_internal.h"

enum { BS = 16 };

#define TRY(expr)                                                                                  \
    do {                                                                                           \
        mla_status st_ = (expr);                                                                   \
        if (st_ != MLA_OK) {                                                                       \
            fprintf(stderr, "%s:%d: %s: %s (%s: %s)\n", __FILE__, __LINE__, #expr,                 \
                    mla_status_name(st_), mla_context_error_param(ctx),                            \
                    mla_context_error_detail(ctx));                                                \
            return st_;                                                                            \
        }                                                                                          \
    } while (0)

typedef struct step_in {
    int64_t T, S;
    int64_t pos[512], slot[512];
    int32_t cu[LR_MAX_SEQS + 1], ctx[LR_MAX_SEQS];
    int use_cu;
} step_in;

typedef struct run_state {
    mla_context *ctx;
    const layer_model *m;
    const lr_case *c;
    mla_plan *plan;
    mla_cache_desc cd;
    mla_layer_options opt;
    int64_t bps, max_ctx;
    int32_t *bt;
    mla_tensor bt_t, cache, icache, ws;
    ref64_model rm;
    ref64_cache rc;
    uint32_t rng;
    mla_layer_form form;
} run_state;

/* The prefill's unrotated kv rows, through the same backend's public ops as
 * the prepare calls them (for the RoPE-once check). */
static mla_status unrotated_kv(run_state *s, const mla_tensor *x, lr_result *r)
{
    mla_context *ctx = s->ctx;
    const mla_model_config *c = &s->m->cfg;
    const int64_t T = x->shape[0], D = c->kv_lora + c->rope;
    mla_tensor kv = lm_tensor(ctx, MLA_DTYPE_BF16, 2, (int64_t[]){T, D}, NULL), kn = kv;
    kn.shape[1] = c->kv_lora;
    const mla_weight *w = &s->m->w.base.kv_a_proj_with_mqa;
    TRY(mla_project(ctx, x, w, &kv));
    TRY(mla_rmsnorm(ctx, &kn, &s->m->w.base.kv_a_layernorm, c->rms_eps, &kn));
    r->kv_prefill = lm_download(ctx, &kv);
    lm_free_tensor(ctx, &kv);
    return MLA_OK;
}

/* Allocates the step's reference outputs and checks the sparse top-k. */
static void check_step(run_state *s, const step_in *in, int step, lr_result *r, const int32_t *topk)
{
    const mla_model_config *c = &s->m->cfg;
    const int64_t N = in->T * c->hidden;
    r->ref[step] = calloc((size_t)N, 8);
    r->sd[step] = calloc((size_t)N, 8);
    if (!topk)
        return;
    for (int64_t q = 0; q < in->S; ++q) {
        const int64_t r0 = in->use_cu ? in->cu[q] : q, r1 = in->use_cu ? in->cu[q + 1] : q + 1;
        for (int64_t row = r0; row < r1; ++row)
            r->topk_bad += !ref64_selection_valid(topk + row * c->index_topk, c->index_topk,
                                                  in->ctx[q] - (r1 - row));
    }
}

/* The RoPE-once negative control: the attention re-planned to rotate q and
 * the new keys as well, whatever the plan's site. */
static mla_status rotate_twice(mla_context *ctx, mla_layer_plan *lp)
{
    mla_attention_plan_destroy(lp->attn);
    lp->attn = NULL;
    return mla_layer_plan_attention(ctx, lp, 0, 1);
}

static mla_status one_step(run_state *s, const step_in *in, mla_layer_plan **lp, int step,
                           int with_ref, lr_result *r)
{
    mla_context *ctx = s->ctx;
    const mla_model_config *c = &s->m->cfg;
    const int64_t T = in->T, S = in->S, hid = c->hidden;
    uint16_t *xb = malloc((size_t)(T * hid) * 2);
    double *xd = malloc((size_t)(T * hid) * 8);
    lm_random_bf16(&s->rng, T * hid, 1.0f, xb, xd);
    /* f32 activations take the same (bf16-representable) values */
    float *xf = malloc((size_t)(T * hid) * 4);
    for (int64_t i = 0; i < T * hid; ++i)
        xf[i] = (float)xd[i];
    const int f32_act = s->opt.act == MLA_DTYPE_F32;
    mla_tensor x = lm_tensor(ctx, s->opt.act, 2, (int64_t[]){T, hid}, f32_act ? (void *)xf : xb);
    mla_tensor y = lm_tensor(ctx, s->c->y_dtype, 2, (int64_t[]){T, hid}, NULL);
    mla_tensor pos = lm_tensor(ctx, MLA_DTYPE_I64, 1, &T, in->pos);
    mla_tensor slot = lm_tensor(ctx, MLA_DTYPE_I64, 1, &T, in->slot);
    mla_tensor cl = lm_tensor(ctx, MLA_DTYPE_I32, 1, &S, in->ctx);
    mla_tensor cu = lm_tensor(ctx, MLA_DTYPE_I32, 1, (int64_t[]){S + 1}, in->cu);
    mla_layer_batch b = {&pos, &slot, &s->bt_t, &cl, in->use_cu ? &cu : NULL, 1};
    mla_layer_buffers bufs = {&s->m->cos, &s->m->sin, &s->cache,
                              c->index_heads > 0 && !s->c->dense ? &s->icache : NULL, &s->ws};
    if (!*lp) {
        TRY(mla_layer_plan_create(ctx, s->plan, &s->cd, &s->opt, &b, s->max_ctx, &bufs, lp));
        if (s->c->rotate_twice)
            TRY(rotate_twice(ctx, *lp));
    } else {
        TRY(mla_layer_plan_update(ctx, *lp, &b));
    }
    TRY(mla_layer_forward(ctx, *lp, &s->m->w, &x, &y));
    s->rm.expanded = mla_layer_plan_form(*lp) == MLA_LAYER_FORM_EXPANDED &&
                     s->m->w.base.kv_b_proj.w.dtype == MLA_DTYPE_BF16;
    r->expanded_steps += s->rm.expanded;
    TRY(mla_context_synchronize(ctx));
    if (step == 0) {
        TRY(unrotated_kv(s, &x, r));
        r->slot_prefill = malloc((size_t)T * 8), r->pos_prefill = malloc((size_t)T * 8);
        memcpy(r->slot_prefill, in->slot, (size_t)T * 8);
        memcpy(r->pos_prefill, in->pos, (size_t)T * 8);
    }
    r->T[step] = T;
    r->y[step] = malloc((size_t)(T * hid) * 8);
    void *hy = lm_download(ctx, &y);
    for (int64_t i = 0; i < T * hid; ++i)
        r->y[step][i] = s->c->y_dtype == MLA_DTYPE_F32 ? ((float *)hy)[i]
                                                       : mla_bf16_to_f32(((uint16_t *)hy)[i]);
    free(hy);
    int32_t *topk = NULL;
    if (mla_layer_plan_sparse(*lp)) {
        mla_tensor tk = (*lp)->workspace;
        tk.data = (uint8_t *)tk.data + (*lp)->ws.topk;
        tk.shape[0] = T * c->index_topk * 4;
        topk = lm_download(ctx, &tk);
    }
    check_step(s, in, step, r, topk);
    if (with_ref) {
        int32_t cuh[LR_MAX_SEQS + 1];
        for (int64_t q = 0; q <= S; ++q)
            cuh[q] = in->use_cu ? in->cu[q] : (int32_t)q;
        ref64_step(&s->rm, &s->rc, T, xd, in->pos, in->slot, S, cuh, in->ctx, s->bt, s->bps, BS,
                   topk, c->index_topk, r->ref[step], r->sd[step]);
        for (int64_t i = 0; i < T * hid; ++i) {
            const double e = fabs(r->y[step][i] - r->ref[step][i]);
            const double ratio = e / (LAYER_REF64_LAMBDA * r->sd[step][i] + 1e-300);
            r->max_ratio = ratio > r->max_ratio ? ratio : r->max_ratio;
            r->max_err = e > r->max_err ? e : r->max_err;
            r->max_abs_y =
                fabs(r->ref[step][i]) > r->max_abs_y ? fabs(r->ref[step][i]) : r->max_abs_y;
        }
    }
    free(topk);
    mla_tensor all[] = {x, y, pos, slot, cl, cu};
    for (int i = 0; i < 6; ++i)
        lm_free_tensor(ctx, &all[i]);
    free(xb), free(xd), free(xf);
    return MLA_OK;
}

static mla_status setup(run_state *s)
{
    mla_context *ctx = s->ctx;
    const mla_model_config *c = &s->m->cfg;
    const lr_case *k = s->c;
    int maxp = 0;
    for (int q = 0; q < k->S; ++q)
        maxp = k->prefill[q] > maxp ? k->prefill[q] : maxp;
    s->max_ctx = maxp + k->decode_steps;
    s->bps = (s->max_ctx + BS - 1) / BS;
    const int64_t NB = k->S * s->bps + 1;
    s->bt = malloc((size_t)(k->S * s->bps) * 4);
    for (int64_t q = 0; q < k->S; ++q) /* blocks in reverse order, block 0 unused: paging shows */
        for (int64_t j = 0; j < s->bps; ++j)
            s->bt[q * s->bps + j] = (int32_t)(1 + q * s->bps + (s->bps - 1 - j));
    s->bt_t = lm_tensor(ctx, MLA_DTYPE_I32, 2, (int64_t[]){k->S, s->bps}, s->bt);
    s->cd = (mla_cache_desc){MLA_CACHE_NORMAL, k->cache_dtype, NB, BS, c->kv_lora, c->rope, 1.0f};
    int64_t bb = 0;
    TRY(mla_cache_block_bytes(&s->cd, &bb));
    s->cache = lm_tensor(ctx, MLA_DTYPE_U8, 2, (int64_t[]){NB, bb}, NULL);
    mla_plan_options po;
    mla_plan_options_default(mla_context_target(ctx), &po);
    po.weight_dtype = s->m->w.base.o_proj.w.dtype;
    po.cache_dtype = k->cache_dtype;
    po.force_rope_site = k->site;
    TRY(mla_plan_create(c, &po, &s->plan));
    mla_layer_options_default(c, &s->cd, &s->opt);
    s->opt.dense = k->dense;
    s->opt.act = k->act;
    s->opt.form = s->form;
    /* a forced expanded form decompresses every step's keys, decode included */
    s->opt.expanded_keys = s->form == MLA_LAYER_FORM_EXPANDED ? k->S * s->max_ctx : 0;
    if (c->index_heads > 0 && !k->dense) {
        TRY(mla_indexer_cache_block_bytes(&s->opt.index_cache, &bb));
        s->icache = lm_tensor(ctx, MLA_DTYPE_U8, 2, (int64_t[]){NB, bb}, NULL);
    }
    int64_t T0 = 0, w0 = 0, w1 = 0;
    for (int q = 0; q < k->S; ++q)
        T0 += k->prefill[q];
    TRY(mla_layer_workspace_bytes(ctx, s->plan, &s->opt, T0, k->S, s->max_ctx, &w0));
    TRY(mla_layer_workspace_bytes(ctx, s->plan, &s->opt, k->S, k->S, s->max_ctx, &w1));
    s->ws = lm_tensor(ctx, MLA_DTYPE_U8, 1, (int64_t[]){w0 > w1 ? w0 : w1}, NULL);
    layer_model_ref(s->m, &s->rm);
    s->rm.cache_dtype = k->cache_dtype;
    s->rm.u_out = k->y_dtype == MLA_DTYPE_F32 ? ldexp(1.0, -24) : ldexp(1.0, -8);
    if (s->opt.act == MLA_DTYPE_F32)
        s->rm.u_act = ldexp(1.0, -24);
    ref64_cache_init(&s->rc, c, NB * BS);
    return MLA_OK;
}

static int64_t slot_of(const run_state *s, int64_t q, int64_t p)
{
    return (int64_t)s->bt[q * s->bps + p / BS] * BS + p % BS;
}

mla_status lr_run(mla_context *ctx, const layer_model *m, const lr_case *c, int with_ref,
                  lr_result *r)
{
    return lr_run_form(ctx, m, c, MLA_LAYER_FORM_AUTO, with_ref, r);
}

mla_status lr_run_form(mla_context *ctx, const layer_model *m, const lr_case *c,
                       mla_layer_form form, int with_ref, lr_result *r)
{
    memset(r, 0, sizeof *r);
    r->block_size = BS;
    run_state s;
    memset(&s, 0, sizeof s);
    s.ctx = ctx, s.m = m, s.c = c, s.rng = 0x9E3779B9u, s.form = form;
    mla_status st = setup(&s);
    mla_layer_plan *pre = NULL, *dec = NULL;
    step_in in;
    memset(&in, 0, sizeof in);
    in.S = c->S, in.use_cu = 1;
    for (int q = 0; q < c->S; ++q) {
        in.cu[q + 1] = in.cu[q] + c->prefill[q];
        in.ctx[q] = c->prefill[q];
        for (int p = 0; p < c->prefill[q]; ++p)
            in.pos[in.cu[q] + p] = p, in.slot[in.cu[q] + p] = slot_of(&s, q, p);
    }
    in.T = in.cu[c->S];
    if (st == MLA_OK)
        st = one_step(&s, &in, &pre, 0, with_ref, r);
    for (int d = 0; st == MLA_OK && d < c->decode_steps; ++d) {
        in.T = c->S, in.use_cu = 0;
        for (int q = 0; q < c->S; ++q) {
            in.ctx[q] = c->prefill[q] + d + 1;
            in.pos[q] = in.ctx[q] - 1, in.slot[q] = slot_of(&s, q, in.ctx[q] - 1);
        }
        st = one_step(&s, &in, &dec, d + 1, with_ref, r);
    }
    r->steps = st == MLA_OK ? 1 + c->decode_steps : 0;
    if (st == MLA_OK) {
        r->cache = lm_download(ctx, &s.cache);
        r->cache_bytes = lm_bytes(&s.cache);
    }
    mla_layer_plan_destroy(pre);
    mla_layer_plan_destroy(dec);
    mla_plan_destroy(s.plan);
    mla_tensor all[] = {s.bt_t, s.cache, s.icache, s.ws};
    for (int i = 0; i < 4; ++i)
        lm_free_tensor(ctx, &all[i]);
    free(s.bt);
    ref64_cache_free(&s.rc);
    return st;
}

void lr_free(lr_result *r)
{
    for (int i = 0; i < LR_MAX_STEPS; ++i)
        free(r->y[i]), free(r->ref[i]), free(r->sd[i]);
    free(r->cache), free(r->kv_prefill), free(r->slot_prefill), free(r->pos_prefill);
}
