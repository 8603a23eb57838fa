/* A refused call writes nothing (issue 18, section 3 and Deliver 4), for
 * every composite op: mla_prepare, mla_indexer_prepare, mla_layer_forward
 * (dense and sparse, every RoPE site) and mla_layer_plan_create / _update.
 * Each refusable input in turn: the status, the parameter named, and every
 * byte of every output, the workspace and the caches as before the call
 * (canary-filled, then compared byte for byte). Refusals that only a later
 * stage's own checks make (an fp8 scale of the wrong shape, a duplicate
 * slot) are among them, so the test fails if any stage writes before the
 * last check. A control call with the same buffers then succeeds and
 * writes, so the comparison is not vacuous. Reference and CPU backends. */
#include <stdlib.h>
#include <string.h>

#include "tests/layer_model.h"
#include "tests/test_guard.h"
#include "tests/test_util.h"

enum { T = 4, BS = 16, NB = 2 };

static const char *where = "";

/* ------------------------------------------------------------ snapshots */

/* The bytes of up to 6 host tensors, canary-filled, to compare after a call. */
typedef struct snap {
    const mla_tensor *t[6];
    uint8_t *copy[6];
    int n;
} snap;

static void snap_take(snap *s, int n, const mla_tensor *const *t, int canary)
{
    s->n = n;
    for (int i = 0; i < n; ++i) {
        s->t[i] = t[i];
        const size_t b = lm_bytes(t[i]);
        uint8_t *p = t[i]->data;
        for (size_t j = 0; canary && j < b; ++j)
            p[j] = guard_canary(j + 977 * (size_t)i);
        s->copy[i] = malloc(b ? b : 1);
        memcpy(s->copy[i], p, b);
    }
}

static int snap_same(const snap *s)
{
    int same = 1;
    for (int i = 0; i < s->n; ++i)
        same &= memcmp(s->copy[i], s->t[i]->data, lm_bytes(s->t[i])) == 0;
    return same;
}

static void snap_free(snap *s)
{
    for (int i = 0; i < s->n; ++i)
        free(s->copy[i]);
    s->n = 0;
}

static void refused(mla_context *ctx, mla_status got, mla_status want, const char *param,
                    const snap *s, const char *what)
{
    const char *p = mla_context_error_param(ctx);
    const int ok = got == want && strcmp(p, param) == 0;
    const int same = snap_same(s);
    CHECK(ok);
    CHECK(same);
    if (!ok || !same)
        fprintf(stderr, "  %s, %s: got %s '%s', expected %s '%s'%s\n", where, what,
                mla_status_name(got), p, mla_status_name(want), param,
                same ? "" : "; an output changed");
}

#define REFUSED(call, status, param, s) refused(ctx, (call), (status), (param), (s), #call)

/* ------------------------------------------------------------ the rig */

/* A host tensor over caller memory (a view: aliasing cases). */
static mla_tensor over(void *data, mla_dtype dt, int32_t ndim, const int64_t *shape)
{
    mla_tensor t;
    mla_tensor_init(&t, data, dt, MLA_MEMORY_HOST, ndim, shape);
    return t;
}

typedef struct rig {
    mla_context *ctx;
    layer_model m;
    mla_plan *plan;
    mla_cache_desc cd;
    int64_t pos[T], slot[T];
    int32_t bt[NB], cl[1], cu[2];
    mla_tensor tpos, tslot, tbt, tcl, tcu, cache, icache, x, y;
} rig;

static int rig_make(rig *r, mla_context *ctx, const char *cfg, int fmt, int site)
{
    memset(r, 0, sizeof *r);
    r->ctx = ctx;
    if (layer_model_make(ctx, cfg, fmt, 11u, &r->m) != 0)
        return -1;
    const mla_model_config *c = &r->m.cfg;
    mla_plan_options po;
    mla_plan_options_default(MLA_TARGET_CPU, &po);
    po.weight_dtype = r->m.w.base.o_proj.w.dtype;
    po.force_rope_site = site;
    if (mla_plan_create(c, &po, &r->plan) != MLA_OK)
        return -1;
    r->cd = (mla_cache_desc){MLA_CACHE_NORMAL, MLA_DTYPE_BF16, NB, BS, c->kv_lora, c->rope, 1.0f};
    int64_t bb = 0;
    mla_cache_block_bytes(&r->cd, &bb);
    for (int t = 0; t < T; ++t)
        r->pos[t] = t, r->slot[t] = BS + t; /* block 1 */
    r->bt[0] = 1, r->bt[1] = 0, r->cl[0] = T, r->cu[0] = 0, r->cu[1] = T;
    /* views of the arrays: a test changes a value in place (host contexts) */
    r->tpos = over(r->pos, MLA_DTYPE_I64, 1, (int64_t[]){T});
    r->tslot = over(r->slot, MLA_DTYPE_I64, 1, (int64_t[]){T});
    r->tbt = over(r->bt, MLA_DTYPE_I32, 2, (int64_t[]){1, NB});
    r->tcl = over(r->cl, MLA_DTYPE_I32, 1, (int64_t[]){1});
    r->tcu = over(r->cu, MLA_DTYPE_I32, 1, (int64_t[]){2});
    r->cache = lm_tensor(ctx, MLA_DTYPE_U8, 2, (int64_t[]){NB, bb}, NULL);
    uint16_t *xb = malloc((size_t)(T * c->hidden) * 2);
    uint32_t st = 5u;
    lm_random_bf16(&st, T * c->hidden, 1.0f, xb, NULL);
    r->x = lm_tensor(ctx, MLA_DTYPE_BF16, 2, (int64_t[]){T, c->hidden}, xb);
    free(xb);
    r->y = lm_tensor(ctx, MLA_DTYPE_F32, 2, (int64_t[]){T, c->hidden}, NULL);
    return 0;
}

static void rig_free(rig *r)
{
    mla_tensor *all[] = {&r->cache, &r->icache, &r->x, &r->y};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i)
        lm_free_tensor(r->ctx, all[i]);
    mla_plan_destroy(r->plan);
    layer_model_free(&r->m);
}

/* ------------------------------------------------------------ mla_prepare */

static void prepare_cases(mla_context *ctx, int fmt, int site)
{
    rig r;
    if (rig_make(&r, ctx, "test-tiny", fmt, site) != 0) {
        CHECK(0);
        return;
    }
    const mla_model_config *c = &r.m.cfg;
    const int64_t H = c->heads, D = c->kv_lora + c->rope;
    int64_t wsb = 0;
    CHECK_STATUS(mla_prepare_workspace_bytes(r.plan, T, MLA_DTYPE_BF16, &wsb), MLA_OK);
    mla_tensor q_cat = lm_tensor(ctx, MLA_DTYPE_BF16, 3, (int64_t[]){T, H, D}, NULL);
    mla_tensor ws = lm_tensor(ctx, MLA_DTYPE_U8, 1, (int64_t[]){wsb}, NULL);
    const mla_layer_weights *w = &r.m.w.base;
    snap s;
    snap_take(&s, 3, (const mla_tensor *[]){&q_cat, &r.cache, &ws}, 1);
#define PREPARE(wt, ...) mla_prepare(ctx, r.plan, wt, __VA_ARGS__)
#define GOOD &r.x, &r.tpos, &r.tslot, &r.m.cos, &r.m.sin, &r.cd, &r.cache, &q_cat, &ws

    /* index values: a slot twice (the absorb wrote q_cat before this was
     * refused), past the cache, a position past the table */
    r.slot[2] = r.slot[1];
    REFUSED(PREPARE(w, GOOD), MLA_ERR_INVALID_ARGUMENT, "slots", &s);
    r.slot[2] = NB * BS;
    REFUSED(PREPARE(w, GOOD), MLA_ERR_OUT_OF_RANGE, "slots", &s);
    r.slot[2] = BS + 2;
    r.pos[3] = r.m.cos.shape[0];
    REFUSED(PREPARE(w, GOOD), MLA_ERR_OUT_OF_RANGE, "positions", &s);
    r.pos[3] = 3;

    /* weights */
    mla_layer_weights bad = *w;
    bad.q_a_layernorm.dtype = MLA_DTYPE_I32;
    REFUSED(PREPARE(&bad, GOOD), MLA_ERR_DTYPE, "weights.q_a_layernorm.dtype", &s);
    bad = *w;
    bad.kv_a_layernorm.shape[0] -= 1;
    REFUSED(PREPARE(&bad, GOOD), MLA_ERR_SHAPE, "weights.kv_a_layernorm.shape[0]", &s);
    bad = *w;
    bad.kv_b_proj.w.shape[0] -= 1;
    REFUSED(PREPARE(&bad, GOOD), MLA_ERR_SHAPE, "weights.kv_b_proj", &s);
    if (fmt == 1) {
        /* a check only the third stage (q_b_proj's mla_linear) makes */
        bad = *w;
        bad.q_b_proj.scale.shape[0] += 1;
        REFUSED(PREPARE(&bad, GOOD), MLA_ERR_SHAPE, "w_scale.shape[0]", &s);
    }

    /* shapes, dtypes, the cache, the workspace */
    mla_tensor xb = r.x;
    xb.dtype = MLA_DTYPE_F16;
    REFUSED(PREPARE(w, &xb, &r.tpos, &r.tslot, &r.m.cos, &r.m.sin, &r.cd, &r.cache, &q_cat, &ws),
            MLA_ERR_DTYPE, "x.dtype", &s);
    mla_tensor qb = q_cat;
    qb.shape[1] -= 1;
    REFUSED(PREPARE(w, &r.x, &r.tpos, &r.tslot, &r.m.cos, &r.m.sin, &r.cd, &r.cache, &qb, &ws),
            MLA_ERR_SHAPE, "q_cat.shape[1]", &s);
    mla_tensor sb = r.m.sin;
    sb.shape[0] -= 1;
    REFUSED(PREPARE(w, &r.x, &r.tpos, &r.tslot, &r.m.cos, &sb, &r.cd, &r.cache, &q_cat, &ws),
            MLA_ERR_SHAPE, "sin.shape[0]", &s);
    mla_cache_desc cdb = r.cd;
    cdb.num_blocks = NB + 1;
    REFUSED(PREPARE(w, &r.x, &r.tpos, &r.tslot, &r.m.cos, &r.m.sin, &cdb, &r.cache, &q_cat, &ws),
            MLA_ERR_SHAPE, "cache.shape[0]", &s);
    mla_tensor wsb_small = ws;
    wsb_small.shape[0] = wsb - 1;
    REFUSED(PREPARE(w, &r.x, &r.tpos, &r.tslot, &r.m.cos, &r.m.sin, &r.cd, &r.cache, &q_cat,
                    &wsb_small),
            MLA_ERR_SHAPE, "workspace", &s);
    mla_tensor slot_f = r.tslot;
    slot_f.dtype = MLA_DTYPE_F32;
    REFUSED(PREPARE(w, &r.x, &r.tpos, &slot_f, &r.m.cos, &r.m.sin, &r.cd, &r.cache, &q_cat, &ws),
            MLA_ERR_DTYPE, "slots.dtype", &s);

    /* aliasing across stages: positions inside the workspace (the first
     * stage would overwrite them before the RoPE reads them), x inside
     * q_cat, the cache over the workspace */
    mla_tensor ws_big = lm_tensor(ctx, MLA_DTYPE_U8, 1, (int64_t[]){wsb + 64}, NULL);
    mla_tensor pos_in_ws = over((uint8_t *)ws_big.data + wsb, MLA_DTYPE_I64, 1, (int64_t[]){T});
    memcpy(pos_in_ws.data, r.pos, sizeof r.pos);
    snap s2;
    snap_take(&s2, 3, (const mla_tensor *[]){&q_cat, &r.cache, &ws_big}, 0);
    REFUSED(PREPARE(w, &r.x, &pos_in_ws, &r.tslot, &r.m.cos, &r.m.sin, &r.cd, &r.cache, &q_cat,
                    &ws_big),
            MLA_ERR_ALIAS, "workspace", &s2);
    snap_free(&s2);
    lm_free_tensor(ctx, &ws_big);
    mla_tensor x_in_q = over(q_cat.data, MLA_DTYPE_BF16, 2, (int64_t[]){T, c->hidden});
    REFUSED(
        PREPARE(w, &x_in_q, &r.tpos, &r.tslot, &r.m.cos, &r.m.sin, &r.cd, &r.cache, &q_cat, &ws),
        MLA_ERR_ALIAS, "q_cat", &s);
    mla_tensor cache_on_ws = over(ws.data, MLA_DTYPE_U8, 2, r.cache.shape);
    if (lm_bytes(&cache_on_ws) <= lm_bytes(&ws))
        REFUSED(PREPARE(w, &r.x, &r.tpos, &r.tslot, &r.m.cos, &r.m.sin, &r.cd, &cache_on_ws, &q_cat,
                        &ws),
                MLA_ERR_ALIAS, "cache", &s);

    /* the control: the same buffers, accepted, written */
    CHECK_STATUS(PREPARE(w, GOOD), MLA_OK);
    CHECK(!snap_same(&s));
#undef PREPARE
#undef GOOD
    snap_free(&s);
    lm_free_tensor(ctx, &q_cat);
    lm_free_tensor(ctx, &ws);
    rig_free(&r);
}

/* ------------------------------------------------------ the indexer prepare */

static void indexer_cases(mla_context *ctx)
{
    rig r;
    if (rig_make(&r, ctx, "test-tiny-indexer", 0, -1) != 0) {
        CHECK(0);
        return;
    }
    const mla_model_config *c = &r.m.cfg;
    const int64_t Hi = c->index_heads, D = c->index_head_dim;
    int64_t wsb = 0;
    CHECK_STATUS(mla_indexer_workspace_bytes(c, T, &wsb), MLA_OK);
    uint16_t *ql = malloc((size_t)(T * c->q_lora) * 2);
    uint32_t st = 9u;
    lm_random_bf16(&st, T * c->q_lora, 1.0f, ql, NULL);
    mla_tensor q_lat = lm_tensor(ctx, MLA_DTYPE_BF16, 2, (int64_t[]){T, c->q_lora}, ql);
    free(ql);
    mla_tensor q_fp8 = lm_tensor(ctx, MLA_DTYPE_FP8_E4M3FN, 3, (int64_t[]){T, Hi, D}, NULL);
    mla_tensor w_out = lm_tensor(ctx, MLA_DTYPE_F32, 2, (int64_t[]){T, Hi}, NULL);
    mla_tensor k = lm_tensor(ctx, MLA_DTYPE_BF16, 2, (int64_t[]){T, D}, NULL);
    mla_tensor ws = lm_tensor(ctx, MLA_DTYPE_U8, 1, (int64_t[]){wsb}, NULL);
    mla_indexer_options o = {MLA_ROPE_NEOX, 1, MLA_DTYPE_FP8_E4M3FN};
    const mla_indexer_weights *iw = &r.m.w.indexer;
    snap s;
    snap_take(&s, 4, (const mla_tensor *[]){&q_fp8, &w_out, &k, &ws}, 1);
#define IDX(wt, pos, q8, wo, kk, wk)                                                               \
    mla_indexer_prepare(ctx, c, wt, &o, &q_lat, &r.x, pos, &r.m.cos, &r.m.sin, q8, wo, kk, wk)

    r.pos[1] = r.m.cos.shape[0] + 5;
    REFUSED(IDX(iw, &r.tpos, &q_fp8, &w_out, &k, &ws), MLA_ERR_OUT_OF_RANGE, "positions", &s);
    r.pos[1] = 1;
    mla_indexer_weights bw = *iw;
    bw.wk.w.shape[0] -= 1;
    REFUSED(IDX(&bw, &r.tpos, &q_fp8, &w_out, &k, &ws), MLA_ERR_SHAPE, "weights.wk", &s);
    bw = *iw;
    bw.k_norm_bias.dtype = MLA_DTYPE_BF16;
    REFUSED(IDX(&bw, &r.tpos, &q_fp8, &w_out, &k, &ws), MLA_ERR_DTYPE, "weights.k_norm_bias.dtype",
            &s);
    mla_tensor kb = k;
    kb.dtype = MLA_DTYPE_I32;
    REFUSED(IDX(iw, &r.tpos, &q_fp8, &w_out, &kb, &ws), MLA_ERR_DTYPE, "k.dtype", &s);
    mla_tensor wob = w_out;
    wob.dtype = MLA_DTYPE_BF16;
    REFUSED(IDX(iw, &r.tpos, &q_fp8, &wob, &k, &ws), MLA_ERR_DTYPE, "w_out.dtype", &s);
    mla_tensor qb = q_fp8;
    qb.dtype = MLA_DTYPE_FP8_E4M3FNUZ;
    REFUSED(IDX(iw, &r.tpos, &qb, &w_out, &k, &ws), MLA_ERR_DTYPE, "q_fp8.dtype", &s);
    mla_tensor k_on_ws = over(ws.data, MLA_DTYPE_BF16, 2, (int64_t[]){T, D});
    REFUSED(IDX(iw, &r.tpos, &q_fp8, &w_out, &k_on_ws, &ws), MLA_ERR_ALIAS, "k", &s);
    mla_tensor wo_on_k = over(k.data, MLA_DTYPE_F32, 2, (int64_t[]){T, Hi});
    REFUSED(IDX(iw, &r.tpos, &q_fp8, &wo_on_k, &k, &ws), MLA_ERR_ALIAS, "w_out", &s);
    mla_tensor small = ws;
    small.shape[0] = 256;
    REFUSED(IDX(iw, &r.tpos, &q_fp8, &w_out, &k, &small), MLA_ERR_SHAPE, "workspace", &s);

    CHECK_STATUS(IDX(iw, &r.tpos, &q_fp8, &w_out, &k, &ws), MLA_OK);
    CHECK(!snap_same(&s));
#undef IDX
    snap_free(&s);
    mla_tensor all[] = {q_lat, q_fp8, w_out, k, ws};
    for (int i = 0; i < 5; ++i)
        lm_free_tensor(ctx, &all[i]);
    rig_free(&r);
}

/* ------------------------------------------------------ the layer */

static void layer_cases(mla_context *ctx, const char *cfg, int site)
{
    rig r;
    if (rig_make(&r, ctx, cfg, 0, site) != 0) {
        CHECK(0);
        return;
    }
    const mla_model_config *c = &r.m.cfg;
    mla_layer_options opt;
    mla_layer_options_default(c, &r.cd, &opt);
    int64_t wsb = 0, ibb = 0;
    CHECK_STATUS(mla_layer_workspace_bytes(ctx, r.plan, &opt, T, 1, NB * BS, &wsb), MLA_OK);
    mla_tensor ws = lm_tensor(ctx, MLA_DTYPE_U8, 1, (int64_t[]){wsb}, NULL);
    const int sparse = c->index_heads > 0;
    if (sparse) {
        CHECK_STATUS(mla_indexer_cache_block_bytes(&opt.index_cache, &ibb), MLA_OK);
        r.icache = lm_tensor(ctx, MLA_DTYPE_U8, 2, (int64_t[]){NB, ibb}, NULL);
    }
    mla_layer_batch b = {&r.tpos, &r.tslot, &r.tbt, &r.tcl, &r.tcu, 1};
    mla_layer_buffers bufs = {&r.m.cos, &r.m.sin, &r.cache, sparse ? &r.icache : NULL, &ws};
    mla_layer_plan *lp = NULL;
    const mla_tensor *outs[4] = {&r.y, &r.cache, &ws, &r.icache};
    const int nout = sparse ? 4 : 3;
    snap s;

    /* planning writes the workspace's top-k rows: only once every index
     * value passed */
    snap_take(&s, nout, outs, 1);
    r.pos[2] = r.m.cos.shape[0];
    REFUSED(mla_layer_plan_create(ctx, r.plan, &r.cd, &opt, &b, NB * BS, &bufs, &lp),
            MLA_ERR_OUT_OF_RANGE, "batch.positions", &s);
    r.pos[2] = 2;
    r.slot[0] = NB * BS;
    REFUSED(mla_layer_plan_create(ctx, r.plan, &r.cd, &opt, &b, NB * BS, &bufs, &lp),
            MLA_ERR_OUT_OF_RANGE, "batch.slots", &s);
    r.slot[0] = r.slot[3];
    REFUSED(mla_layer_plan_create(ctx, r.plan, &r.cd, &opt, &b, NB * BS, &bufs, &lp),
            MLA_ERR_INVALID_ARGUMENT, "batch.slots", &s);
    r.slot[0] = BS;
    r.bt[0] = NB;
    REFUSED(mla_layer_plan_create(ctx, r.plan, &r.cd, &opt, &b, NB * BS, &bufs, &lp),
            MLA_ERR_OUT_OF_RANGE, sparse ? "batch.block_table" : "block_table", &s);
    r.bt[0] = 1;
    if (sparse) { /* an index cache of one block: block 1 is not in it */
        mla_layer_options small = opt;
        small.index_cache.num_blocks = 1;
        mla_tensor ic1 = r.icache;
        ic1.shape[0] = 1;
        mla_layer_buffers b1 = bufs;
        b1.index_cache = &ic1;
        REFUSED(mla_layer_plan_create(ctx, r.plan, &r.cd, &small, &b, NB * BS, &b1, &lp),
                MLA_ERR_OUT_OF_RANGE, "batch.slots", &s);
    }
    CHECK(lp == NULL);
    snap_free(&s);
    CHECK_STATUS(mla_layer_plan_create(ctx, r.plan, &r.cd, &opt, &b, NB * BS, &bufs, &lp), MLA_OK);
    if (!lp) {
        rig_free(&r);
        return;
    }

    /* the forward: y and the cache canary-filled, the workspace as planned */
    snap_take(&s, 2, outs, 1);
    snap_free(&s);
    snap_take(&s, nout, outs, 0);
    mla_tensor y_on_x = over(r.x.data, MLA_DTYPE_BF16, 2, r.x.shape);
    REFUSED(mla_layer_forward(ctx, lp, &r.m.w, &r.x, &y_on_x), MLA_ERR_ALIAS, "y", &s);
    mla_layer_weights_ex bw = r.m.w;
    bw.base.q_a_layernorm.dtype = MLA_DTYPE_I32;
    REFUSED(mla_layer_forward(ctx, lp, &bw, &r.x, &r.y), MLA_ERR_DTYPE,
            "weights.q_a_layernorm.dtype", &s);
    bw = r.m.w;
    bw.base.o_proj.w.shape[1] -= 1;
    REFUSED(mla_layer_forward(ctx, lp, &bw, &r.x, &r.y), MLA_ERR_SHAPE, "weights.o_proj", &s);
    if (sparse) {
        bw = r.m.w;
        bw.indexer.wk.w.shape[1] -= 1;
        REFUSED(mla_layer_forward(ctx, lp, &bw, &r.x, &r.y), MLA_ERR_SHAPE, "indexer.wk", &s);
    }
    /* a weight in the workspace would be overwritten by a stage */
    bw = r.m.w;
    bw.base.kv_a_layernorm.data = ws.data;
    REFUSED(mla_layer_forward(ctx, lp, &bw, &r.x, &r.y), MLA_ERR_ALIAS, "workspace", &s);
    /* index values changed in host memory since the plan */
    r.slot[3] = r.slot[1];
    REFUSED(mla_layer_forward(ctx, lp, &r.m.w, &r.x, &r.y), MLA_ERR_INVALID_ARGUMENT, "slots", &s);
    r.slot[3] = BS + 3;
    r.pos[0] = r.m.cos.shape[0];
    REFUSED(mla_layer_forward(ctx, lp, &r.m.w, &r.x, &r.y), MLA_ERR_OUT_OF_RANGE, "positions", &s);
    r.pos[0] = 0;
    r.bt[0] = NB;
    REFUSED(mla_layer_forward(ctx, lp, &r.m.w, &r.x, &r.y), MLA_ERR_OUT_OF_RANGE, "block_table",
            &s);
    r.bt[0] = 1;

    /* a refused update leaves plan and workspace: the forward that follows
     * gives the bits of an unrefused one */
    r.slot[1] = r.slot[2];
    REFUSED(mla_layer_plan_update(ctx, lp, &b), MLA_ERR_INVALID_ARGUMENT, "batch.slots", &s);
    r.slot[1] = BS + 1;
    r.cl[0] = NB * BS + 1;
    REFUSED(mla_layer_plan_update(ctx, lp, &b), MLA_ERR_OUT_OF_RANGE, "batch.context_lens", &s);
    r.cl[0] = T;
    CHECK_STATUS(mla_layer_forward(ctx, lp, &r.m.w, &r.x, &r.y), MLA_OK);
    CHECK(!snap_same(&s));
    snap_free(&s);
    void *y1 = lm_download(ctx, &r.y);
    mla_memset(ctx, r.cache.data, 0, lm_bytes(&r.cache));
    CHECK_STATUS(mla_layer_forward(ctx, lp, &r.m.w, &r.x, &r.y), MLA_OK);
    CHECK(memcmp(y1, r.y.data, lm_bytes(&r.y)) == 0);
    free(y1);
    mla_layer_plan_destroy(lp);
    lm_free_tensor(ctx, &ws);
    rig_free(&r);
}

int main(void)
{
    const mla_backend backends[2] = {MLA_BACKEND_REFERENCE, MLA_BACKEND_CPU};
    const char *names[2] = {"reference", "cpu"};
    for (int bi = 0; bi < 2; ++bi) {
        mla_context *ctx = NULL;
        CHECK_STATUS(mla_context_create(backends[bi], NULL, &ctx), MLA_OK);
        if (!ctx)
            continue;
        char buf[96];
        const int sites[3] = {-1, MLA_ROPE_SITE_SEPARATE, MLA_ROPE_SITE_ATTENTION};
        for (int fmt = 0; fmt < 2; ++fmt)
            for (int si = 0; si < 2; ++si) {
                snprintf(buf, sizeof buf, "%s prepare fmt %d site %d", names[bi], fmt, sites[si]);
                where = buf;
                prepare_cases(ctx, fmt, sites[si]);
            }
        snprintf(buf, sizeof buf, "%s indexer prepare", names[bi]);
        where = buf;
        indexer_cases(ctx);
        for (int si = 0; si < 3; ++si) {
            snprintf(buf, sizeof buf, "%s layer test-tiny site %d", names[bi], sites[si]);
            where = buf;
            layer_cases(ctx, "test-tiny", sites[si]);
        }
        snprintf(buf, sizeof buf, "%s layer test-tiny-indexer", names[bi]);
        where = buf;
        layer_cases(ctx, "test-tiny-indexer", -1);
        mla_context_destroy(ctx);
    }
    return TEST_SUMMARY();
}
