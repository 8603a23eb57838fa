/* mla_layer_* refuse bad input with a specific status and the parameter's
 * name, and a refused forward leaves y and the cache as they were. */
#include <stdlib.h>
#include <string.h>

#include "tests/layer_model.h"
#include "tests/test_util.h"

enum { T = 4, BS = 16, NB = 2 };

static int all_bytes(mla_context *ctx, const mla_tensor *t, uint8_t v)
{
    uint8_t *h = lm_download(ctx, t);
    int same = 1;
    for (size_t i = 0; i < lm_bytes(t); ++i)
        same &= h[i] == v;
    free(h);
    return same;
}

#define REFUSED(expr, status, param)                                                               \
    do {                                                                                           \
        CHECK_STATUS(expr, status);                                                                \
        CHECK(strcmp(mla_context_error_param(ctx), param) == 0);                                   \
        if (strcmp(mla_context_error_param(ctx), param))                                           \
            fprintf(stderr, "  param '%s', expected '%s'\n", mla_context_error_param(ctx), param); \
    } while (0)

int main(void)
{
    mla_context *ctx = NULL;
    CHECK_STATUS(mla_context_create(MLA_BACKEND_REFERENCE, NULL, &ctx), MLA_OK);
    layer_model m;
    if (!ctx || layer_model_make(ctx, "test-tiny", 0, 7u, &m) != 0)
        return TEST_SUMMARY();
    const mla_model_config *c = &m.cfg;
    mla_plan *plan = NULL;
    CHECK_STATUS(mla_plan_create(c, NULL, &plan), MLA_OK);
    mla_cache_desc cd = {MLA_CACHE_NORMAL, MLA_DTYPE_BF16, NB, BS, c->kv_lora, c->rope, 1.0f};
    int64_t bb = 0, wsb = 0;
    mla_cache_block_bytes(&cd, &bb);
    mla_layer_options opt;
    mla_layer_options_default(c, &cd, &opt);
    CHECK_STATUS(mla_layer_workspace_bytes(ctx, plan, &opt, T, 1, NB * BS, &wsb), MLA_OK);
    int64_t pos[T] = {0, 1, 2, 3}, slot[T] = {0, 1, 2, 3};
    int32_t bt[NB] = {0, 1}, ctxl[1] = {T}, cu[2] = {0, T};
    mla_tensor tpos = lm_tensor(ctx, MLA_DTYPE_I64, 1, (int64_t[]){T}, pos);
    mla_tensor tslot = lm_tensor(ctx, MLA_DTYPE_I64, 1, (int64_t[]){T}, slot);
    mla_tensor tbt = lm_tensor(ctx, MLA_DTYPE_I32, 2, (int64_t[]){1, NB}, bt);
    mla_tensor tcl = lm_tensor(ctx, MLA_DTYPE_I32, 1, (int64_t[]){1}, ctxl);
    mla_tensor tcu = lm_tensor(ctx, MLA_DTYPE_I32, 1, (int64_t[]){2}, cu);
    mla_tensor cache = lm_tensor(ctx, MLA_DTYPE_U8, 2, (int64_t[]){NB, bb}, NULL);
    mla_tensor ws = lm_tensor(ctx, MLA_DTYPE_U8, 1, (int64_t[]){wsb}, NULL);
    mla_tensor x = lm_tensor(ctx, MLA_DTYPE_BF16, 2, (int64_t[]){T, c->hidden}, NULL);
    mla_tensor y = lm_tensor(ctx, MLA_DTYPE_F32, 2, (int64_t[]){T, c->hidden}, NULL);
    mla_layer_batch b = {&tpos, &tslot, &tbt, &tcl, &tcu, 1};
    mla_layer_buffers bufs = {&m.cos, &m.sin, &cache, NULL, &ws};
    mla_layer_plan *lp = NULL;

    /* planning */
    mla_tensor small = ws;
    small.shape[0] = wsb - 1;
    mla_layer_buffers bad_bufs = bufs;
    bad_bufs.workspace = &small;
    REFUSED(mla_layer_plan_create(ctx, plan, &cd, &opt, &b, NB * BS, &bad_bufs, &lp), MLA_ERR_SHAPE,
            "buffers.workspace");
    int32_t long_ctx[1] = {NB * BS + 1};
    mla_tensor tlong = lm_tensor(ctx, MLA_DTYPE_I32, 1, (int64_t[]){1}, long_ctx);
    mla_layer_batch bad = b;
    bad.context_lens = &tlong;
    REFUSED(mla_layer_plan_create(ctx, plan, &cd, &opt, &bad, NB * BS, &bufs, &lp),
            MLA_ERR_OUT_OF_RANGE, "batch.context_lens");
    int32_t bad_cu[2] = {0, T - 1};
    mla_tensor tbcu = lm_tensor(ctx, MLA_DTYPE_I32, 1, (int64_t[]){2}, bad_cu);
    bad = b;
    bad.cu_q_lens = &tbcu;
    REFUSED(mla_layer_plan_create(ctx, plan, &cd, &opt, &bad, NB * BS, &bufs, &lp), MLA_ERR_SHAPE,
            "batch.cu_q_lens");
    mla_cache_desc other = cd;
    other.dtype = MLA_DTYPE_FP8_E4M3FN;
    REFUSED(mla_layer_plan_create(ctx, plan, &other, &opt, &b, NB * BS, &bufs, &lp),
            MLA_ERR_INVALID_ARGUMENT, "cache");
    CHECK(lp == NULL);

    /* the attention's form: bad options, a forced EXPANDED the plan cannot run */
    mla_layer_options fo = opt;
    fo.form = (mla_layer_form)7;
    REFUSED(mla_layer_workspace_bytes(ctx, plan, &fo, T, 1, NB * BS, &wsb), MLA_ERR_INVALID_ARGUMENT,
            "opt.form");
    fo = opt;
    fo.expanded_keys = -1;
    REFUSED(mla_layer_workspace_bytes(ctx, plan, &fo, T, 1, NB * BS, &wsb),
            MLA_ERR_INVALID_ARGUMENT, "opt.expanded_keys");
    fo = opt;
    fo.form = MLA_LAYER_FORM_EXPANDED;
    int64_t few = 0;
    CHECK_STATUS(mla_layer_workspace_bytes(ctx, plan, &fo, T, 1, NB * BS, &few), MLA_OK);
    CHECK(few > wsb); /* the decompressed keys' room */
    mla_tensor ws_exp = lm_tensor(ctx, MLA_DTYPE_U8, 1, (int64_t[]){few}, NULL);
    mla_layer_buffers exp_bufs = bufs;
    exp_bufs.workspace = &ws_exp;
    fo.expanded_keys = T - 1; /* the step has T keys */
    REFUSED(mla_layer_plan_create(ctx, plan, &cd, &fo, &b, NB * BS, &exp_bufs, &lp),
            MLA_ERR_SHAPE, "buffers.workspace");
    mla_plan_options po;
    mla_plan_options_default(mla_context_target(ctx), &po);
    po.force_rope_site = MLA_ROPE_SITE_ATTENTION;
    mla_plan *inside = NULL;
    CHECK_STATUS(mla_plan_create(c, &po, &inside), MLA_OK);
    fo.expanded_keys = 0;
    REFUSED(mla_layer_plan_create(ctx, inside, &cd, &fo, &b, NB * BS, &exp_bufs, &lp),
            MLA_ERR_UNSUPPORTED, "opt.form");
    mla_plan_destroy(inside);
    CHECK(lp == NULL);
    CHECK_STATUS(mla_layer_plan_create(ctx, plan, &cd, &fo, &b, NB * BS, &exp_bufs, &lp), MLA_OK);
    CHECK(mla_layer_plan_form(lp) == MLA_LAYER_FORM_EXPANDED);
    mla_layer_weights_ex fp8_kvb = m.w;
    fp8_kvb.base.kv_b_proj.w.dtype = MLA_DTYPE_FP8_E4M3FN;
    REFUSED(mla_layer_forward(ctx, lp, &fp8_kvb, &x, &y), MLA_ERR_UNSUPPORTED,
            "weights.kv_b_proj");
    mla_layer_plan_destroy(lp);
    lp = NULL;
    lm_free_tensor(ctx, &ws_exp);

    CHECK_STATUS(mla_layer_plan_create(ctx, plan, &cd, &opt, &b, NB * BS, &bufs, &lp), MLA_OK);
    CHECK(mla_layer_plan_form(lp) == MLA_LAYER_FORM_ABSORBED); /* T = 4: below the rule's rows */

    /* a refused forward writes nothing */
    mla_memset(ctx, cache.data, 0x5A, lm_bytes(&cache));
    mla_memset(ctx, y.data, 0x5A, lm_bytes(&y));
    mla_tensor xs = x;
    xs.shape[0] = T - 1;
    REFUSED(mla_layer_forward(ctx, lp, &m.w, &xs, &y), MLA_ERR_SHAPE, "x.shape[0]");
    mla_tensor yb = y;
    yb.dtype = MLA_DTYPE_I32;
    REFUSED(mla_layer_forward(ctx, lp, &m.w, &x, &yb), MLA_ERR_DTYPE, "y.dtype");
    mla_layer_weights_ex wrong = m.w;
    wrong.base.o_proj.w.shape[0] -= 1;
    REFUSED(mla_layer_forward(ctx, lp, &wrong, &x, &y), MLA_ERR_SHAPE, "weights.o_proj");
    wrong = m.w;
    wrong.base.kv_a_proj_with_mqa.w.shape[1] -= 1;
    REFUSED(mla_layer_forward(ctx, lp, &wrong, &x, &y), MLA_ERR_SHAPE,
            "weights.kv_a_proj_with_mqa");
    REFUSED(mla_layer_forward(ctx, lp, &m.w, &x, &ws), MLA_ERR_SHAPE, "y.ndim");
    CHECK(all_bytes(ctx, &cache, 0x5A));
    CHECK(all_bytes(ctx, &y, 0x5A));
    /* a refused update keeps the plan: the forward still runs */
    bad = b;
    bad.context_lens = &tlong;
    REFUSED(mla_layer_plan_update(ctx, lp, &bad), MLA_ERR_OUT_OF_RANGE, "batch.context_lens");
    CHECK_STATUS(mla_layer_forward(ctx, lp, &m.w, &x, &y), MLA_OK);
    CHECK(!all_bytes(ctx, &cache, 0x5A));

    mla_layer_plan_destroy(lp);
    mla_plan_destroy(plan);
    mla_tensor all[] = {tpos, tslot, tbt, tcl, tcu, cache, ws, x, y, tlong, tbcu};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; ++i)
        lm_free_tensor(ctx, &all[i]);
    layer_model_free(&m);
    mla_context_destroy(ctx);
    return TEST_SUMMARY();
}
