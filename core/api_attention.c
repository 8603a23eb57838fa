/* Entry points of the MLA attention core (include/mla/mla_attention.h):
 * the descriptor defaults, the plan (validation of every index value, the
 * split-KV schedule of core/attention_planner.c) and the run.
 *
 * Checks run in the order descriptor, cache, shapes and dtypes, strides and
 * aliasing, then (plan; run on host memory) index values, then supports():
 * a refused call writes nothing. The run on device memory reads no index
 * value and allocates nothing (a HIP/CUDA graph can capture it). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/attention_check.h"
#include "core/attention_plan.h"
#include "core/attention_planner.h"
#include "core/dump_ops.h"
#include "core/validate.h"

mla_status mla_attention_desc_default(const mla_model_config *cfg, const mla_cache_desc *cache,
                                      mla_attention_desc *out)
{
    if (!cfg || !cache || !out)
        return MLA_ERR_NULL_POINTER;
    if (cache->kv_lora != cfg->kv_lora || cache->rope != cfg->rope)
        return MLA_ERR_SHAPE;
    memset(out, 0, sizeof *out);
    out->heads = cfg->heads;
    out->cache = *cache;
    out->paged = 1;
    out->q_dtype = MLA_DTYPE_BF16;
    out->q_scale = 1.0f;
    out->out_dtype = MLA_DTYPE_F32;
    out->softmax_scale = (float)mla_softmax_scale(cfg);
    out->topk = 0;
    out->next_n = 1;
    out->num_splits = 0;
    return MLA_OK;
}

/* ---------------------------------------------------------------- plan */

static void free_plan_buffers(mla_attention_plan *p)
{
    if (p->work_dev && p->work_dev != p->work_host)
        p->ctx->ops->mem_free(p->ctx, p->work_dev);
    if (p->cu_q_dev && p->cu_q_dev != p->cu_q_host)
        p->ctx->ops->mem_free(p->ctx, p->cu_q_dev);
    if (p->splits_dev && p->splits_dev != p->splits_host)
        p->ctx->ops->mem_free(p->ctx, p->splits_dev);
    free(p->work_host);
    free(p->cu_q_host);
    free(p->splits_host);
}

void mla_attention_plan_destroy(mla_attention_plan *plan)
{
    if (!plan)
        return;
    free_plan_buffers(plan);
    free(plan);
}

/* A context-memory twin of a host array (the same pointer for host memory). */
static mla_status twin(mla_context *ctx, void *host, size_t bytes, void **dev)
{
    if (ctx->ops->memory == MLA_MEMORY_HOST) {
        *dev = host;
        return MLA_OK;
    }
    mla_status st = ctx->ops->mem_alloc(ctx, bytes, dev);
    if (st != MLA_OK)
        return mla_fail(ctx, st, "plan", "cannot allocate %zu bytes of plan data", bytes);
    return MLA_OK;
}

/* Validates the values, schedules, and copies the arrays to context memory. */
static mla_status plan_fill(mla_context *ctx, mla_attention_plan *p, const mla_attention_args *a,
                            const mla_attn_shape *sh)
{
    const int64_t S = p->S;
    int64_t *len, max_q = 0; /* S + 1 fits: the plan's S + 1 row starts do */
    MLA_TRY(mla_alloc_array(ctx, (void **)&len, S + 1, 1, sizeof *len, "context_lens"));
    mla_status st = mla_attn_check_values(ctx, &p->desc, a, sh, len, &max_q, p->cu_q_host);
    if (st == MLA_OK) {
        p->max_q_len = max_q;
        mla_attention_schedule(p, len, ctx->compute_units,
                               ctx->min_split_keys > 0 ? ctx->min_split_keys : MLA_ATTN_CHUNK);
    }
    free(len);
    if (st != MLA_OK || ctx->ops->memory == MLA_MEMORY_HOST)
        return st;
    const mla_copy_kind k = MLA_COPY_HOST_TO_CONTEXT;
    st = ctx->ops->mem_copy(ctx, p->work_dev, p->work_host,
                            (size_t)p->work_capacity * sizeof *p->work_host, k);
    if (st == MLA_OK)
        st = ctx->ops->mem_copy(ctx, p->cu_q_dev, p->cu_q_host, (size_t)(S + 1) * 4, k);
    if (st == MLA_OK)
        st = ctx->ops->mem_copy(ctx, p->splits_dev, p->splits_host, (size_t)(S ? S : 1) * 4, k);
    return st == MLA_OK ? MLA_OK : mla_fail(ctx, st, "plan", "cannot copy the plan to the device");
}

mla_status mla_attention_plan_create(mla_context *ctx, const mla_attention_desc *desc,
                                     const mla_attention_args *args, mla_attention_plan **out)
{
    MLA_TRY(mla_begin(ctx));
    if (!desc || !out)
        return mla_fail(ctx, MLA_ERR_NULL_POINTER, desc ? "out" : "desc", "NULL argument");
    *out = NULL;
    mla_attn_shape sh;
    MLA_TRY(mla_attn_check_args(ctx, desc, args, &sh, 0));
    mla_variant v = mla_attn_variant(desc, args, sh.T);
    MLA_TRY(mla_check_supported(ctx, &v));
    /* capacity: every split count stays within max_splits (fixed here) */
    const int64_t cap = desc->num_splits >= 1 ? desc->num_splits : MLA_ATTN_AUTO_SPLITS;
    const int64_t work = mla_sz_mul(sh.S, cap);
    size_t wb, sb;
    if (!mla_ck_bytes(work > 0 ? work : 1, 1, sizeof(mla_attention_work), &wb) ||
        !mla_ck_bytes(sh.S + 1, 1, 4, &sb))
        return mla_fail_field(ctx, MLA_ERR_OVERFLOW, "context_lens", "shape[0]",
                              "the work list of %lld sequences overflows", (long long)sh.S);
    mla_attention_plan *p = calloc(1, sizeof *p);
    if (!p)
        return mla_fail(ctx, MLA_ERR_OUT_OF_MEMORY, "plan", "no memory for the plan");
    p->ctx = ctx;
    p->desc = *desc;
    p->block_bytes = sh.block_bytes;
    p->S = sh.S;
    p->T = sh.T;
    p->max_blocks = sh.max_blocks;
    p->Tk = args->rope ? sh.Tk : 0;
    p->has_rope = args->rope != NULL;
    p->has_cu_q = args->cu_q_lens != NULL;
    p->work_capacity = work > 0 ? work : 1;
    p->work_host = calloc(1, wb);
    p->cu_q_host = calloc(1, sb);
    p->splits_host = calloc(1, sb);
    mla_status st = MLA_OK;
    if (!p->work_host || !p->cu_q_host || !p->splits_host)
        st = mla_fail(ctx, MLA_ERR_OUT_OF_MEMORY, "plan", "no memory for the work list");
    if (st == MLA_OK)
        st = twin(ctx, p->work_host, wb, (void **)&p->work_dev);
    if (st == MLA_OK)
        st = twin(ctx, p->cu_q_host, sb, (void **)&p->cu_q_dev);
    if (st == MLA_OK)
        st = twin(ctx, p->splits_host, sb, (void **)&p->splits_dev);
    if (st == MLA_OK)
        st = plan_fill(ctx, p, args, &sh);
    if (st == MLA_OK && mla_attention_layout_workspace(p) != MLA_OK)
        st = mla_fail(ctx, MLA_ERR_OVERFLOW, "q", "the workspace size overflows 64 bits");
    if (st != MLA_OK) {
        mla_attention_plan_destroy(p);
        return st;
    }
    *out = p;
    return MLA_OK;
}

/* The shapes of a call against those the plan was made for. */
static mla_status same_shapes(mla_context *ctx, const mla_attention_plan *p,
                              const mla_attention_args *a, const mla_attn_shape *sh)
{
    if (sh->T != p->T)
        return mla_fail_field(ctx, MLA_ERR_SHAPE, "q", "shape[0]", "%lld rows, the plan has %lld",
                              (long long)sh->T, (long long)p->T);
    if (sh->S != p->S)
        return mla_fail_field(ctx, MLA_ERR_SHAPE, "context_lens", "shape[0]",
                              "%lld sequences, the plan has %lld", (long long)sh->S,
                              (long long)p->S);
    if (sh->max_blocks != p->max_blocks)
        return mla_fail_field(ctx, MLA_ERR_SHAPE, "block_table", "shape[1]",
                              "%lld blocks per sequence, the plan has %lld",
                              (long long)sh->max_blocks, (long long)p->max_blocks);
    if ((a->cu_q_lens != NULL) != p->has_cu_q)
        return mla_fail(ctx, MLA_ERR_INVALID_ARGUMENT, "cu_q_lens",
                        "the plan was made %s cu_q_lens", p->has_cu_q ? "with" : "without");
    if ((a->rope != NULL) != p->has_rope)
        return mla_fail(ctx, MLA_ERR_INVALID_ARGUMENT, "rope", "the plan was made %s rope",
                        p->has_rope ? "with" : "without");
    if (a->rope && sh->Tk != p->Tk)
        return mla_fail_field(ctx, MLA_ERR_SHAPE, "k_nope", "shape[0]",
                              "%lld key tokens, the plan has %lld", (long long)sh->Tk,
                              (long long)p->Tk);
    return MLA_OK;
}

static mla_status check_plan(mla_context *ctx, const mla_attention_plan *plan)
{
    return mla_check_plan_of(ctx, plan != NULL, plan ? plan->ctx : NULL);
}

mla_status mla_attention_plan_update(mla_context *ctx, mla_attention_plan *plan,
                                     const mla_attention_args *args)
{
    MLA_TRY(mla_begin(ctx));
    MLA_TRY(check_plan(ctx, plan));
    mla_attn_shape sh;
    MLA_TRY(mla_attn_check_args(ctx, &plan->desc, args, &sh, 0));
    MLA_TRY(same_shapes(ctx, plan, args, &sh));
    if (ctx->dry_run) { /* a composite's check: the values, the plan untouched */
        int64_t max_q;
        return mla_check_values(ctx, MLA_TRUST_INDICES)
                   ? mla_attn_check_values(ctx, &plan->desc, args, &sh, NULL, &max_q, NULL)
                   : MLA_OK;
    }
    /* validated into a copy: a refused update leaves the plan as it was */
    mla_attention_plan next = *plan;
    const size_t wb = (size_t)plan->work_capacity * sizeof *plan->work_host;
    const size_t sb = ((size_t)plan->S + 1) * 4;
    next.work_host = malloc(wb);
    next.cu_q_host = malloc(sb);
    next.splits_host = malloc(sb);
    mla_status st = MLA_OK;
    if (!next.work_host || !next.cu_q_host || !next.splits_host)
        st = mla_fail(ctx, MLA_ERR_OUT_OF_MEMORY, "plan", "no memory for the work list");
    if (st == MLA_OK) {
        memset(next.work_host, 0, wb);
        if (ctx->ops->memory == MLA_MEMORY_HOST) /* host: the plan's arrays are the twins */
            next.work_dev = next.work_host, next.cu_q_dev = next.cu_q_host,
            next.splits_dev = next.splits_host;
        st = plan_fill(ctx, &next, args, &sh);
    }
    if (st != MLA_OK) {
        free(next.work_host);
        free(next.cu_q_host);
        free(next.splits_host);
        return st;
    }
    if (ctx->ops->memory == MLA_MEMORY_HOST) {
        /* the same buffers (a captured run keeps its pointers) */
        memcpy(plan->work_host, next.work_host, wb);
        memcpy(plan->cu_q_host, next.cu_q_host, sb);
        memcpy(plan->splits_host, next.splits_host, sb);
    } else {
        free(plan->work_host);
        free(plan->cu_q_host);
        free(plan->splits_host);
        plan->work_host = next.work_host;
        plan->cu_q_host = next.cu_q_host;
        plan->splits_host = next.splits_host;
        next.work_host = NULL;
    }
    plan->num_work = next.num_work;
    plan->max_q_len = next.max_q_len;
    if (ctx->ops->memory == MLA_MEMORY_HOST) {
        free(next.work_host);
        free(next.cu_q_host);
        free(next.splits_host);
    }
    return MLA_OK;
}

int64_t mla_attention_plan_workspace_bytes(const mla_attention_plan *plan)
{
    return plan ? plan->workspace_bytes : 0;
}

int32_t mla_attention_plan_splits(const mla_attention_plan *plan)
{
    if (!plan)
        return 0;
    int32_t m = 1;
    for (int64_t s = 0; s < plan->S; ++s)
        m = plan->splits_host[s] > m ? plan->splits_host[s] : m;
    return m;
}

/* ----------------------------------------------------------------- run */

/* RoPE inside attention (MLA.md section 3, the ATTENTION site): q copied into
 * the workspace with its rope part rotated (one rounding to q's dtype, as
 * mla_rope into q_cat), k_pe rotated into fp32 and [k_nope | k_rot] written
 * to the cache, exactly the SEPARATE site's sequence (core/prepare.c), whose
 * bytes equal the fused kernel's. */
static mla_status rope_inside(mla_context *ctx, const mla_attention_plan *p,
                              const mla_attention_args *a, uint8_t *ws, mla_tensor *q_rot)
{
    const mla_attention_rope *r = a->rope;
    const mla_attention_desc *d = &p->desc;
    const int64_t T = p->T, H = d->heads, L = d->cache.kv_lora, R = d->cache.rope, D = L + R;
    const mla_memory mem = ctx->ops->memory;
    const size_t es = mla_dtype_size(a->q->dtype);
    const int64_t *qs = a->q->stride;
    *q_rot = mla_view(ws + p->q_rot_offset, a->q->dtype, mem, 3, (int64_t[]){T, H, D},
                      (int64_t[]){H * D, D, 1});
    if (T > 0) {
        mla_convert_args cp = {
            mla_view(a->q->data, a->q->dtype, mem, 3, (int64_t[]){T, H, L}, qs),
            mla_view(q_rot->data, a->q->dtype, mem, 3, (int64_t[]){T, H, L}, q_rot->stride),
            MLA_SATURATE};
        MLA_TRY(ctx->ops->convert(ctx, &cp));
        mla_rope_args qr = {*r->cos,
                            *r->sin,
                            *r->q_pos,
                            mla_view((uint8_t *)a->q->data + (size_t)(L * qs[2]) * es, a->q->dtype,
                                     mem, 3, (int64_t[]){T, H, R}, qs),
                            mla_view((uint8_t *)q_rot->data + (size_t)L * es, a->q->dtype, mem, 3,
                                     (int64_t[]){T, H, R}, q_rot->stride),
                            r->style,
                            R};
        MLA_TRY(ctx->ops->rope(ctx, &qr));
    }
    if (p->Tk == 0)
        return MLA_OK;
    mla_tensor k_rot = mla_view(ws + p->k_rot_offset, MLA_DTYPE_F32, mem, 2, (int64_t[]){p->Tk, R},
                                (int64_t[]){R, 1});
    mla_rope_args kr = {*r->cos,           *r->sin,  *r->k_pos, mla_as_3d(r->k_pe),
                        mla_as_3d(&k_rot), r->style, R};
    MLA_TRY(ctx->ops->rope(ctx, &kr));
    mla_cache_write_args cw = {d->cache, p->block_bytes, *a->cache, *r->k_nope, k_rot, *r->slots};
    return ctx->ops->cache_write(ctx, &cw);
}

mla_status mla_attention_run(mla_context *ctx, const mla_attention_plan *plan,
                             const mla_attention_args *args)
{
    MLA_DUMP_HOOK(ctx, MLA_OP_ATTENTION, mla_dump_attention(ctx, plan, args));
    MLA_TRY(mla_begin(ctx));
    MLA_TRY(check_plan(ctx, plan));
    mla_attn_shape sh;
    MLA_TRY(mla_attn_check_args(ctx, &plan->desc, args, &sh, 1));
    MLA_TRY(same_shapes(ctx, plan, args, &sh));
    if (plan->workspace_bytes > 0) {
        if (!args->workspace)
            return mla_fail(ctx, MLA_ERR_NULL_POINTER, "workspace",
                            "the plan needs %lld bytes of workspace",
                            (long long)plan->workspace_bytes);
        if (args->workspace->shape[0] < plan->workspace_bytes)
            return mla_fail_field(
                ctx, MLA_ERR_SHAPE, "workspace", "shape[0]", "%lld bytes, the plan needs %lld",
                (long long)args->workspace->shape[0], (long long)plan->workspace_bytes);
        if ((uintptr_t)args->workspace->data % MLA_ATTN_WS_ALIGN)
            return mla_fail_field(ctx, MLA_ERR_INVALID_ARGUMENT, "workspace", "data",
                                  "the workspace must be %d-byte aligned (mla_malloc is)",
                                  MLA_ATTN_WS_ALIGN);
    }
    /* Host memory: the values are re-checked in place (no copy, no
     * allocation), so a kernel never follows an index changed since the plan
     * outside the tensors. Device memory: the plan's validation stands. */
    if (ctx->ops->memory == MLA_MEMORY_HOST && mla_check_values(ctx, MLA_TRUST_INDICES))
        MLA_TRY(mla_attn_recheck_host(ctx, &plan->desc, args, &sh));
    MLA_TRY(mla_attn_check_supported(ctx, &plan->desc, args, &sh));
    if (ctx->dry_run)
        return MLA_OK;
    uint8_t *ws = args->workspace ? (uint8_t *)args->workspace->data : NULL;
    mla_attention_op_args op;
    memset(&op, 0, sizeof op);
    op.plan = plan;
    op.q = *args->q;
    if (args->rope)
        MLA_TRY(rope_inside(ctx, plan, args, ws, &op.q));
    if (plan->T == 0)
        return MLA_OK;
    const mla_memory mem = ctx->ops->memory;
    op.cache = *args->cache;
    if (args->block_table)
        op.block_table = *args->block_table;
    else
        op.block_table =
            mla_view(NULL, MLA_DTYPE_I32, mem, 2, (int64_t[]){plan->S, 1}, (int64_t[]){1, 1});
    op.context_lens = *args->context_lens;
    if (args->cu_q_lens)
        op.cu_q_lens = *args->cu_q_lens;
    else
        op.cu_q_lens = mla_view(plan->cu_q_dev, MLA_DTYPE_I32, mem, 1, (int64_t[]){plan->S + 1},
                                (int64_t[]){1});
    if (args->topk_indices)
        op.topk_indices = *args->topk_indices;
    if (args->sinks)
        op.sinks = *args->sinks;
    op.o = *args->o;
    if (args->lse)
        op.lse = *args->lse;
    op.workspace = ws;
    return ctx->ops->attention(ctx, &op);
}
