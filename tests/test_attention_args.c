/* Refusals of the attention entry points (include/mla/mla_attention.h):
 * every bad descriptor, tensor, stride, alias and index value gets its
 * status and names its parameter, and leaves o, lse and the cache as they
 * were (plan create, update and run); a run with a plan of other shapes, of
 * another context, without or with too small a workspace; a backend whose
 * supports() refuses the variant, and one without an attention slot. */
#include "core/backend.h"
#include "tests/attention_fixture.h"

static uint8_t cache_copy[NB * BS * D * 2];

/* o, lse and the cache before a call that must be refused. */
static void snapshot(fixture *f)
{
    memset(f->o, 0x5A, sizeof f->o);
    memset(f->lse, 0x5A, sizeof f->lse);
    memcpy(cache_copy, f->cache, (size_t)(f->t_cache.shape[0] * f->t_cache.shape[1]));
}

static int untouched(const fixture *f)
{
    for (size_t i = 0; i < sizeof f->o; ++i)
        if (((const uint8_t *)f->o)[i] != 0x5A)
            return 0;
    for (size_t i = 0; i < sizeof f->lse; ++i)
        if (((const uint8_t *)f->lse)[i] != 0x5A)
            return 0;
    return memcmp(cache_copy, f->cache, (size_t)(f->t_cache.shape[0] * f->t_cache.shape[1])) == 0;
}

/* plan_create on f must fail with st naming param, writing nothing. */
static void refuse_plan(mla_context *ctx, fixture *f, mla_status st, const char *param)
{
    mla_attention_plan *plan = (mla_attention_plan *)&plan; /* must come back NULL */
    snapshot(f);
    CHECK_STATUS(mla_attention_plan_create(ctx, &f->desc, &f->args, &plan), st);
    CHECK(param_is(ctx, param));
    CHECK(plan == NULL);
    CHECK(untouched(f));
}

static const int32_t lens0[S] = {37, 0, 9}, cu0[S + 1] = {0, 2, 4, 6};

static void fresh(fixture *f, mla_context *ctx)
{
    fx_free(f);
    fx_init(f, ctx, 3, lens0, cu0);
}

/* Descriptors, dtypes, shapes, strides, aliasing, memory kinds. */
static void test_shapes(mla_context *ctx)
{
    fixture f;
    fx_init(&f, ctx, 3, lens0, cu0);
    CHECK_STATUS(mla_attention_plan_create(ctx, NULL, &f.args, NULL), MLA_ERR_NULL_POINTER);
    CHECK(param_is(ctx, "desc"));
    mla_attention_plan *plan = NULL;
    CHECK_STATUS(mla_attention_plan_create(ctx, &f.desc, NULL, &plan), MLA_ERR_NULL_POINTER);
    CHECK(param_is(ctx, "args"));
    CHECK_STATUS(mla_attention_plan_create(NULL, &f.desc, &f.args, &plan), MLA_ERR_NULL_POINTER);

    f.desc.heads = 0;
    refuse_plan(ctx, &f, MLA_ERR_INVALID_ARGUMENT, "desc.heads");
    f.desc.heads = 129;
    refuse_plan(ctx, &f, MLA_ERR_INVALID_ARGUMENT, "desc.heads");
    fresh(&f, ctx);
    f.desc.q_dtype = MLA_DTYPE_F16;
    refuse_plan(ctx, &f, MLA_ERR_DTYPE, "desc.q_dtype");
    fresh(&f, ctx);
    f.desc.q_dtype = MLA_DTYPE_FP8_E4M3FN;
    f.desc.q_scale = 0.0f;
    refuse_plan(ctx, &f, MLA_ERR_INVALID_ARGUMENT, "desc.q_scale");
    fresh(&f, ctx);
    f.desc.out_dtype = MLA_DTYPE_F16;
    refuse_plan(ctx, &f, MLA_ERR_DTYPE, "desc.out_dtype");
    fresh(&f, ctx);
    f.desc.softmax_scale = NAN;
    refuse_plan(ctx, &f, MLA_ERR_INVALID_ARGUMENT, "desc.softmax_scale");
    fresh(&f, ctx);
    f.desc.num_splits = 257;
    refuse_plan(ctx, &f, MLA_ERR_INVALID_ARGUMENT, "desc.num_splits");
    fresh(&f, ctx);
    f.desc.paged = 2;
    refuse_plan(ctx, &f, MLA_ERR_INVALID_ARGUMENT, "desc.paged");
    fresh(&f, ctx);
    f.desc.cache.layout = (mla_cache_layout)7;
    refuse_plan(ctx, &f, MLA_ERR_INVALID_ARGUMENT, "cache_desc.layout");
    fresh(&f, ctx);
    f.t_cache.shape[0] = NB - 1;
    refuse_plan(ctx, &f, MLA_ERR_SHAPE, "cache.shape[0]");

    fresh(&f, ctx);
    f.t_q.dtype = MLA_DTYPE_BF16;
    refuse_plan(ctx, &f, MLA_ERR_DTYPE, "q.dtype");
    fresh(&f, ctx);
    f.t_q.shape[2] = D - 1;
    refuse_plan(ctx, &f, MLA_ERR_SHAPE, "q.shape[2]");
    fresh(&f, ctx);
    f.t_q.memory = MLA_MEMORY_DEVICE;
    refuse_plan(ctx, &f, MLA_ERR_WRONG_DEVICE, "q.memory");
    fresh(&f, ctx);
    f.t_o.shape[2] = L / 2;
    refuse_plan(ctx, &f, MLA_ERR_SHAPE, "o.shape[2]");
    fresh(&f, ctx);
    f.t_o.dtype = MLA_DTYPE_BF16;
    refuse_plan(ctx, &f, MLA_ERR_DTYPE, "o.dtype");
    fresh(&f, ctx);
    f.t_o.stride[1] = 0; /* every head on one row: overlapping */
    refuse_plan(ctx, &f, MLA_ERR_STRIDE, "o.stride");
    fresh(&f, ctx);
    f.t_lse.dtype = MLA_DTYPE_BF16;
    refuse_plan(ctx, &f, MLA_ERR_DTYPE, "lse.dtype");
    fresh(&f, ctx);
    f.t_table.dtype = MLA_DTYPE_I64;
    refuse_plan(ctx, &f, MLA_ERR_DTYPE, "block_table.dtype");
    fresh(&f, ctx);
    f.t_table.shape[0] = S - 1;
    refuse_plan(ctx, &f, MLA_ERR_SHAPE, "block_table.shape[0]");
    fresh(&f, ctx);
    f.args.block_table = NULL;
    refuse_plan(ctx, &f, MLA_ERR_NULL_POINTER, "block_table");
    fresh(&f, ctx);
    f.t_cu.shape[0] = S;
    refuse_plan(ctx, &f, MLA_ERR_SHAPE, "cu_q_lens.shape[0]");
    fresh(&f, ctx);
    f.args.cu_q_lens = NULL;
    f.desc.next_n = 3; /* 6 rows are not 3 sequences x 3 */
    refuse_plan(ctx, &f, MLA_ERR_SHAPE, "q.shape[0]");
    fresh(&f, ctx);
    f.args.cu_q_lens = NULL;
    f.desc.next_n = 0;
    refuse_plan(ctx, &f, MLA_ERR_INVALID_ARGUMENT, "desc.next_n");
    fresh(&f, ctx);
    f.desc.topk = 8;
    refuse_plan(ctx, &f, MLA_ERR_NULL_POINTER, "topk_indices");
    fresh(&f, ctx);
    f.t_topk = view(f.topk, MLA_DTYPE_I32, 2, (int64_t[]){f.T, 8});
    f.args.topk_indices = &f.t_topk;
    refuse_plan(ctx, &f, MLA_ERR_INVALID_ARGUMENT, "topk_indices");
    f.desc.topk = 4;
    refuse_plan(ctx, &f, MLA_ERR_SHAPE, "topk_indices.shape[1]");
    fresh(&f, ctx);
    f.t_sinks.shape[0] = 2;
    f.args.sinks = &f.t_sinks;
    refuse_plan(ctx, &f, MLA_ERR_SHAPE, "sinks.shape[0]");

    /* aliasing: an output over an input, the two outputs over each other */
    fresh(&f, ctx);
    f.t_o.data = f.q;
    refuse_plan(ctx, &f, MLA_ERR_ALIAS, "o");
    fresh(&f, ctx);
    f.t_lse.data = f.o + 5;
    refuse_plan(ctx, &f, MLA_ERR_ALIAS, "o");
    fresh(&f, ctx);
    f.t_lse.data = f.lens; /* lse over context_lens */
    refuse_plan(ctx, &f, MLA_ERR_ALIAS, "lse");

    /* contiguous mode: no block table, at most num_blocks sequences */
    fresh(&f, ctx);
    f.desc.paged = 0;
    refuse_plan(ctx, &f, MLA_ERR_INVALID_ARGUMENT, "block_table");
    f.args.block_table = NULL;
    f.desc.cache.num_blocks = 2;
    f.t_cache.shape[0] = 2;
    refuse_plan(ctx, &f, MLA_ERR_SHAPE, "context_lens.shape[0]");
    fx_free(&f);
}

/* Index values, each refused by the plan (create and update). */
static void test_values(mla_context *ctx)
{
    fixture f;
    fx_init(&f, ctx, 3, lens0, cu0);
    f.lens[0] = MAXB * BS + 1; /* beyond the block table's capacity */
    refuse_plan(ctx, &f, MLA_ERR_OUT_OF_RANGE, "context_lens");
    f.lens[0] = -1;
    refuse_plan(ctx, &f, MLA_ERR_OUT_OF_RANGE, "context_lens");
    f.lens[0] = 1; /* 0 < c_s < n_s = 2 */
    refuse_plan(ctx, &f, MLA_ERR_OUT_OF_RANGE, "context_lens");
    fresh(&f, ctx);
    f.table[2 * MAXB] = NB; /* a block sequence 2 uses */
    refuse_plan(ctx, &f, MLA_ERR_OUT_OF_RANGE, "block_table");
    f.table[2 * MAXB] = -1;
    refuse_plan(ctx, &f, MLA_ERR_OUT_OF_RANGE, "block_table");
    f.table[2 * MAXB] = 0;
    f.table[2 * MAXB + 1] = NB + 7; /* beyond sequence 2's 9 keys: never read, accepted */
    mla_attention_plan *plan = NULL;
    CHECK_STATUS(mla_attention_plan_create(ctx, &f.desc, &f.args, &plan), MLA_OK);
    mla_attention_plan_destroy(plan);
    fresh(&f, ctx);
    f.cu[1] = 5, f.cu[2] = 4; /* decreasing */
    refuse_plan(ctx, &f, MLA_ERR_OUT_OF_RANGE, "cu_q_lens");
    fresh(&f, ctx);
    f.cu[0] = 1;
    refuse_plan(ctx, &f, MLA_ERR_OUT_OF_RANGE, "cu_q_lens");
    fresh(&f, ctx);
    f.cu[S] = 5; /* not ending at T */
    refuse_plan(ctx, &f, MLA_ERR_OUT_OF_RANGE, "cu_q_lens");

    fresh(&f, ctx);
    f.desc.topk = 8;
    memset(f.topk, 0xFF, sizeof f.topk); /* all -1: accepted */
    f.t_topk = view(f.topk, MLA_DTYPE_I32, 2, (int64_t[]){f.T, 8});
    f.args.topk_indices = &f.t_topk;
    CHECK_STATUS(mla_attention_plan_create(ctx, &f.desc, &f.args, &plan), MLA_OK);
    f.topk[5 * 8 + 3] = 9; /* row 5 is sequence 2's: c_s = 9 */
    CHECK_STATUS(mla_attention_plan_update(ctx, plan, &f.args), MLA_ERR_OUT_OF_RANGE);
    CHECK(param_is(ctx, "topk_indices"));
    refuse_plan(ctx, &f, MLA_ERR_OUT_OF_RANGE, "topk_indices");
    f.topk[5 * 8 + 3] = -2;
    refuse_plan(ctx, &f, MLA_ERR_OUT_OF_RANGE, "topk_indices");
    f.topk[5 * 8 + 3] = 8;
    CHECK_STATUS(mla_attention_plan_update(ctx, plan, &f.args), MLA_OK);
    mla_attention_plan_destroy(plan);
    fx_free(&f);
}

/* RoPE inside attention: positions beyond the table, slots beyond the
 * cache or twice, fp8 q, a table of another rope dim. */
static void test_rope_args(mla_context *ctx)
{
    enum { T = 6, RP = 40 };
    static float cos_t[RP * R / 2], sin_t[RP * R / 2], kn[T * L], kp[T * R];
    int32_t pos[T] = {35, 36, 0, 0, 7, 8}, slots[T] = {1, 2, -1, -1, 3, 4};
    mla_tensor tcos = view(cos_t, MLA_DTYPE_F32, 2, (int64_t[]){RP, R / 2});
    mla_tensor tsin = view(sin_t, MLA_DTYPE_F32, 2, (int64_t[]){RP, R / 2});
    mla_tensor tpos = view(pos, MLA_DTYPE_I32, 1, (int64_t[]){T});
    mla_tensor tslots = view(slots, MLA_DTYPE_I32, 1, (int64_t[]){T});
    mla_tensor tkn = view(kn, MLA_DTYPE_F32, 2, (int64_t[]){T, L});
    mla_tensor tkp = view(kp, MLA_DTYPE_F32, 2, (int64_t[]){T, R});
    mla_attention_rope rope = {&tcos, &tsin,  MLA_ROPE_INTERLEAVED, &tpos, &tkn, &tkp,
                               &tpos, &tslots};
    fixture f;
    fx_init(&f, ctx, 3, lens0, cu0);
    f.args.rope = &rope;
    mla_attention_plan *plan = NULL;
    CHECK_STATUS(mla_attention_plan_create(ctx, &f.desc, &f.args, &plan), MLA_OK);
    /* values changed since the plan: the host run re-checks them in place */
    const int64_t wb = mla_attention_plan_workspace_bytes(plan);
    void *ws = NULL;
    mla_malloc(ctx, (size_t)wb, &ws);
    mla_tensor tws = view(ws, MLA_DTYPE_U8, 1, (int64_t[]){wb});
    f.args.workspace = &tws;
    pos[1] = RP;
    snapshot(&f);
    CHECK_STATUS(mla_attention_run(ctx, plan, &f.args), MLA_ERR_OUT_OF_RANGE);
    CHECK(param_is(ctx, "q_pos") && untouched(&f));
    pos[1] = 36;
    slots[0] = -5; /* skipped: fine */
    slots[1] = NB * BS;
    CHECK_STATUS(mla_attention_run(ctx, plan, &f.args), MLA_ERR_OUT_OF_RANGE);
    CHECK(param_is(ctx, "slots") && untouched(&f));
    slots[0] = 1, slots[1] = 2;
    CHECK_STATUS(mla_attention_run(ctx, plan, &f.args), MLA_OK);
    f.args.workspace = NULL;
    mla_free(ctx, ws);
    mla_attention_plan_destroy(plan);
    tpos.shape[0] = T - 1;
    refuse_plan(ctx, &f, MLA_ERR_SHAPE, "q_pos.shape[0]");
    tpos.shape[0] = T;
    tslots.dtype = MLA_DTYPE_F32;
    refuse_plan(ctx, &f, MLA_ERR_DTYPE, "slots.dtype");
    tslots.dtype = MLA_DTYPE_I32;
    pos[1] = RP;
    refuse_plan(ctx, &f, MLA_ERR_OUT_OF_RANGE, "q_pos");
    pos[1] = 36;
    slots[4] = NB * BS;
    refuse_plan(ctx, &f, MLA_ERR_OUT_OF_RANGE, "slots");
    slots[4] = 2; /* slot 2 twice */
    refuse_plan(ctx, &f, MLA_ERR_INVALID_ARGUMENT, "slots");
    slots[4] = 3;
    tcos.shape[1] = R / 4;
    tsin.shape[1] = R / 4;
    refuse_plan(ctx, &f, MLA_ERR_SHAPE, "cos.shape[1]");
    tcos.shape[1] = tsin.shape[1] = R / 2;
    rope.style = (mla_rope_style)5;
    refuse_plan(ctx, &f, MLA_ERR_INVALID_ARGUMENT, "style");
    rope.style = MLA_ROPE_INTERLEAVED;
    tkp.shape[1] = R - 2;
    refuse_plan(ctx, &f, MLA_ERR_SHAPE, "k_pe.shape[1]");
    tkp.shape[1] = R;
    f.t_q.dtype = f.desc.q_dtype = MLA_DTYPE_FP8_E4M3FN;
    f.t_q.shape[2] = D; /* codes over the f32 buffer: only the dtype is wrong */
    refuse_plan(ctx, &f, MLA_ERR_DTYPE, "q.dtype");
    fx_free(&f);
}

/* The run: a plan of other shapes, another context's plan, the workspace,
 * index values changed since the plan (host memory: re-checked). */
static void test_run(mla_context *ctx)
{
    fixture f, g;
    fx_init(&f, ctx, 3, lens0, cu0);
    f.desc.num_splits = 4;
    f.desc.next_n = 2; /* unused with cu_q_lens; a run without them would fit */
    mla_attention_plan *plan = NULL;
    CHECK_STATUS(mla_attention_plan_create(ctx, &f.desc, &f.args, &plan), MLA_OK);
    const int64_t wb = mla_attention_plan_workspace_bytes(plan);
    void *ws = NULL;
    mla_malloc(ctx, (size_t)wb, &ws);
    mla_tensor tws = view(ws, MLA_DTYPE_U8, 1, (int64_t[]){wb});

    snapshot(&f);
    CHECK_STATUS(mla_attention_run(ctx, plan, &f.args), MLA_ERR_NULL_POINTER);
    CHECK(param_is(ctx, "workspace") && untouched(&f));
    tws.shape[0] = wb - 1;
    f.args.workspace = &tws;
    CHECK_STATUS(mla_attention_run(ctx, plan, &f.args), MLA_ERR_SHAPE);
    CHECK(param_is(ctx, "workspace.shape[0]") && untouched(&f));
    tws.shape[0] = wb;
    tws.data = (uint8_t *)ws + 1;
    CHECK_STATUS(mla_attention_run(ctx, plan, &f.args), MLA_ERR_INVALID_ARGUMENT);
    CHECK(param_is(ctx, "workspace.data") && untouched(&f));
    tws.data = ws;
    CHECK_STATUS(mla_attention_run(ctx, NULL, &f.args), MLA_ERR_NULL_POINTER);
    CHECK(param_is(ctx, "plan"));

    /* another shape: 4 rows of 2 sequences' worth through cu_q */
    const int32_t cu_other[S + 1] = {0, 2, 3, 4};
    fx_init(&g, ctx, 3, lens0, cu_other);
    g.args.workspace = &tws;
    snapshot(&g);
    CHECK_STATUS(mla_attention_run(ctx, plan, &g.args), MLA_ERR_SHAPE);
    CHECK(param_is(ctx, "q.shape[0]") && untouched(&g));
    fx_free(&g);
    f.args.cu_q_lens = NULL; /* planned with cu_q_lens */
    snapshot(&f);
    CHECK_STATUS(mla_attention_run(ctx, plan, &f.args), MLA_ERR_INVALID_ARGUMENT);
    CHECK(param_is(ctx, "cu_q_lens") && untouched(&f));
    f.args.cu_q_lens = &f.t_cu;
    f.t_o.data = ws; /* o over the workspace */
    CHECK_STATUS(mla_attention_run(ctx, plan, &f.args), MLA_ERR_ALIAS);
    CHECK(param_is(ctx, "o"));
    f.t_o.data = f.o;

    /* a length changed since the plan, out of range: the host run re-checks */
    f.lens[2] = 90;
    snapshot(&f);
    CHECK_STATUS(mla_attention_run(ctx, plan, &f.args), MLA_ERR_OUT_OF_RANGE);
    CHECK(param_is(ctx, "context_lens") && untouched(&f));
    f.lens[2] = 9;

    /* another context's plan */
    mla_context *other = NULL;
    CHECK_STATUS(mla_context_create(MLA_BACKEND_REFERENCE, NULL, &other), MLA_OK);
    CHECK_STATUS(mla_attention_run(other, plan, &f.args), MLA_ERR_INVALID_ARGUMENT);
    CHECK(param_is(other, "plan"));
    mla_context_destroy(other);
    CHECK_STATUS(mla_attention_run(ctx, plan, &f.args), MLA_OK);
    mla_attention_plan_destroy(plan);
    mla_free(ctx, ws);
    fx_free(&f);
}

/* A backend that refuses fp8 caches for attention, and one without the slot. */
static const char *no_fp8_cache(const mla_context *ctx, const mla_variant *v)
{
    (void)ctx;
    return v->op == MLA_OP_ATTENTION && v->rule != MLA_DTYPE_BF16 ? "cache_desc.dtype" : NULL;
}

static void test_supports(void)
{
    mla_backend_ops t = mla_reference_ops;
    t.supports = no_fp8_cache;
    mla_context *ctx = NULL;
    CHECK_STATUS(mla_context_create_with_ops(&t, NULL, &ctx), MLA_OK);
    fixture f;
    fx_init(&f, ctx, 3, lens0, cu0);
    mla_attention_plan *plan = NULL;
    CHECK_STATUS(mla_attention_plan_create(ctx, &f.desc, &f.args, &plan), MLA_OK);
    mla_attention_plan_destroy(plan);
    f.desc.cache.dtype = f.cd.dtype = MLA_DTYPE_FP8_E4M3FN;
    f.desc.cache.k_scale = 1.0f;
    f.t_cache.shape[1] /= 2; /* the fp8 cache's block bytes */
    refuse_plan(ctx, &f, MLA_ERR_UNSUPPORTED, "cache_desc.dtype");
    fx_free(&f);
    mla_context_destroy(ctx);

    t = mla_reference_ops;
    t.attention = NULL;
    CHECK_STATUS(mla_context_create_with_ops(&t, NULL, &ctx), MLA_OK);
    fx_init(&f, ctx, 3, lens0, cu0);
    CHECK_STATUS(mla_attention_plan_create(ctx, &f.desc, &f.args, &plan), MLA_OK);
    snapshot(&f);
    CHECK_STATUS(mla_attention_run(ctx, plan, &f.args), MLA_ERR_UNSUPPORTED);
    CHECK(param_is(ctx, "op") && untouched(&f));
    mla_attention_plan_destroy(plan);
    fx_free(&f);
    mla_context_destroy(ctx);
}

/* The descriptor defaults for a model, and their refusals. */
static void test_desc_default(void)
{
    mla_model_config cfg;
    CHECK_STATUS(mla_model_config_preset("DeepSeek-V3", &cfg), MLA_OK);
    mla_cache_desc cd = {MLA_CACHE_FP8_SCALED, MLA_DTYPE_FP8_E4M3FN, 8, 64, 512, 64, 1.0f};
    mla_attention_desc d;
    CHECK_STATUS(mla_attention_desc_default(&cfg, &cd, &d), MLA_OK);
    CHECK(d.heads == 128 && d.paged == 1 && d.q_dtype == MLA_DTYPE_BF16 && d.q_scale == 1.0f);
    CHECK(d.out_dtype == MLA_DTYPE_F32 && d.topk == 0 && d.next_n == 1 && d.num_splits == 0);
    CHECK(d.softmax_scale == (float)mla_softmax_scale(&cfg));
    CHECK(memcmp(&d.cache, &cd, sizeof cd) == 0);
    cd.kv_lora = 256; /* not the model's L */
    CHECK_STATUS(mla_attention_desc_default(&cfg, &cd, &d), MLA_ERR_SHAPE);
    CHECK_STATUS(mla_attention_desc_default(NULL, &cd, &d), MLA_ERR_NULL_POINTER);
}

int main(void)
{
    test_desc_default();
    mla_context *ref = NULL;
    CHECK_STATUS(mla_context_create(MLA_BACKEND_REFERENCE, NULL, &ref), MLA_OK);
    test_shapes(ref);
    test_values(ref);
    test_rope_args(ref);
    test_run(ref);
    test_supports();
    mla_context_destroy(ref);
    return TEST_SUMMARY();
}
