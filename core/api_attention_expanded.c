/* Entry points of the expanded attention (include/mla/mla_attention.h,
 * MLA.md section 2, "The expanded form").
 *
 * Checks run in the order descriptor, cache, shapes and dtypes, strides and
 * aliasing, index values (read back from device memory: the lengths size
 * the decompression), the workspace's size, supports() of the op and of
 * the gather and linear the fast backends compose it from: a refused call
 * writes nothing. */
#include <stdlib.h>
#include <string.h>

#include "core/attention_check.h"
#include "core/attention_expanded.h"
#include "core/attention_planner.h"
#include "core/cache_checks.h"
#include "core/prepare_internal.h"
#include "core/validate.h"
#include "core/variant.h"

#define MAX_HEADS 128

mla_status mla_attention_expanded_desc_default(const mla_model_config *cfg,
                                               const mla_cache_desc *cache,
                                               mla_attention_expanded_desc *out)
{
    if (!cfg || !cache || !out)
        return MLA_ERR_NULL_POINTER;
    if (cache->kv_lora != cfg->kv_lora || cache->rope != cfg->rope)
        return MLA_ERR_SHAPE;
    memset(out, 0, sizeof *out);
    out->heads = cfg->heads;
    out->nope = cfg->nope;
    out->v = cfg->v;
    out->cache = *cache;
    out->paged = 1;
    out->q_dtype = MLA_DTYPE_BF16;
    out->out_dtype = MLA_DTYPE_F32;
    out->softmax_scale = (float)mla_softmax_scale(cfg);
    out->next_n = 1;
    return MLA_OK;
}

static mla_status check_desc(mla_context *ctx, const mla_attention_expanded_desc *d)
{
    if (!d)
        return mla_fail(ctx, MLA_ERR_NULL_POINTER, "desc", "NULL argument");
    if (d->heads < 1 || d->heads > MAX_HEADS)
        return mla_fail(ctx, MLA_ERR_INVALID_ARGUMENT, "desc.heads",
                        "heads must be 1..128, got %lld", (long long)d->heads);
    if (d->nope < 1 || d->nope > 4096 || d->v < 1 || d->v > 4096)
        return mla_fail(
            ctx, MLA_ERR_INVALID_ARGUMENT, d->nope < 1 || d->nope > 4096 ? "desc.nope" : "desc.v",
            "nope and v must be 1..4096, got %lld and %lld", (long long)d->nope, (long long)d->v);
    if (d->q_dtype != MLA_DTYPE_BF16 && d->q_dtype != MLA_DTYPE_F32)
        return mla_fail(ctx, MLA_ERR_DTYPE, "desc.q_dtype", "q is bf16 or f32");
    return mla_attn_check_common_desc(ctx, d->out_dtype, d->softmax_scale, d->paged);
}

mla_status mla_attention_expanded_workspace_bytes(mla_context *ctx,
                                                  const mla_attention_expanded_desc *desc,
                                                  int64_t S, int64_t total_keys, int64_t *bytes)
{
    MLA_TRY(mla_begin(ctx));
    MLA_TRY(check_desc(ctx, desc));
    if (!bytes)
        return mla_fail(ctx, MLA_ERR_NULL_POINTER, "bytes", "NULL argument");
    if (S < 0 || total_keys < 0)
        return mla_fail(ctx, MLA_ERR_SHAPE, S < 0 ? "S" : "total_keys", "negative");
    if (total_keys > INT32_MAX || S > INT32_MAX / 4)
        return mla_fail(ctx, MLA_ERR_OVERFLOW, total_keys > INT32_MAX ? "total_keys" : "S",
                        "past 2^31");
    mla_expanded_layout ws;
    if (mla_expanded_layout_of(ctx, desc, S, total_keys, &ws) != MLA_OK)
        return mla_fail(ctx, MLA_ERR_OVERFLOW, "total_keys", "the workspace overflows 64 bits");
    *bytes = ws.bytes;
    return MLA_OK;
}

/* A [T, H, n] q part of the descriptor's dtype. */
static mla_status check_q(mla_context *ctx, const mla_tensor *q, const char *name, mla_dtype dt,
                          int64_t T, int64_t H, int64_t n)
{
    MLA_TRY(mla_check_tensor(ctx, q, name, 3));
    if (q->dtype != dt)
        return mla_fail_field(ctx, MLA_ERR_DTYPE, name, "dtype", "%s is %s, the descriptor says %s",
                              name, mla_dtype_name(q->dtype), mla_dtype_name(dt));
    if (T >= 0)
        MLA_TRY(mla_check_extent(ctx, q, name, 0, T));
    MLA_TRY(mla_check_extent(ctx, q, name, 1, H));
    return mla_check_extent(ctx, q, name, 2, n);
}

/* Shapes, dtypes, strides and aliasing; fills *sh. */
static mla_status check_args(mla_context *ctx, const mla_attention_expanded_desc *d,
                             const mla_attention_expanded_args *a, mla_attn_shape *sh)
{
    if (!a)
        return mla_fail(ctx, MLA_ERR_NULL_POINTER, "args", "NULL argument");
    memset(sh, 0, sizeof *sh);
    MLA_TRY(mla_check_cache(ctx, &d->cache, a->cache, &sh->block_bytes));
    const int64_t H = d->heads, L = d->cache.kv_lora, R = d->cache.rope;
    MLA_TRY(check_q(ctx, a->q_nope, "q_nope", d->q_dtype, -1, H, d->nope));
    sh->T = a->q_nope->shape[0];
    MLA_TRY(check_q(ctx, a->q_pe, "q_pe", d->q_dtype, sh->T, H, R));
    MLA_TRY(mla_attn_check_batch(ctx, &d->cache, d->paged, d->next_n, a->q_nope, "q_nope",
                                 a->block_table, a->context_lens, a->cu_q_lens, INT32_MAX / 4, sh));
    if (!a->kv_b_proj)
        return mla_fail(ctx, MLA_ERR_NULL_POINTER, "kv_b_proj", "NULL argument");
    MLA_TRY(mla_check_linear_weight(ctx, a->kv_b_proj, "kv_b_proj", H * (d->nope + d->v), L));
    MLA_TRY(mla_check_tensor(ctx, a->o, "o", 3));
    if (a->o->dtype != d->out_dtype)
        return mla_fail_field(ctx, MLA_ERR_DTYPE, "o", "dtype", "o is %s, the descriptor says %s",
                              mla_dtype_name(a->o->dtype), mla_dtype_name(d->out_dtype));
    MLA_TRY(mla_check_extent(ctx, a->o, "o", 0, sh->T));
    MLA_TRY(mla_check_extent(ctx, a->o, "o", 1, H));
    MLA_TRY(mla_check_extent(ctx, a->o, "o", 2, d->v));
    MLA_TRY(mla_check_output(ctx, a->o, "o"));
    if (a->lse) {
        MLA_TRY(mla_check_tensor(ctx, a->lse, "lse", 2));
        MLA_TRY(mla_check_dtype(ctx, a->lse, "lse", MLA_DT(MLA_DTYPE_F32)));
        MLA_TRY(mla_check_extent(ctx, a->lse, "lse", 0, sh->T));
        MLA_TRY(mla_check_extent(ctx, a->lse, "lse", 1, H));
        MLA_TRY(mla_check_output(ctx, a->lse, "lse"));
    }
    if (!a->workspace)
        return mla_fail(ctx, MLA_ERR_NULL_POINTER, "workspace", "NULL argument");
    MLA_TRY(mla_check_tensor(ctx, a->workspace, "workspace", 1));
    MLA_TRY(mla_check_dtype(ctx, a->workspace, "workspace", MLA_DT(MLA_DTYPE_U8)));
    if (a->workspace->shape[0] > 1 && a->workspace->stride[0] != 1)
        return mla_fail_field(ctx, MLA_ERR_STRIDE, "workspace", "stride",
                              "the workspace bytes must be contiguous");
    if ((uintptr_t)a->workspace->data % MLA_ATTN_WS_ALIGN)
        return mla_fail_field(ctx, MLA_ERR_INVALID_ARGUMENT, "workspace", "data",
                              "the workspace must be %d-byte aligned (mla_malloc is)",
                              MLA_ATTN_WS_ALIGN);
    const int fp8 = a->kv_b_proj->w.dtype != MLA_DTYPE_BF16;
    const mla_tensor *outs[3] = {a->o, a->lse, a->workspace};
    const char *onames[3] = {"o", "lse", "workspace"};
    const mla_tensor *ins[8] = {
        a->q_nope,       a->q_pe,      a->cache,         a->block_table,
        a->context_lens, a->cu_q_lens, &a->kv_b_proj->w, fp8 ? &a->kv_b_proj->scale : NULL};
    const char *inames[8] = {"q_nope",       "q_pe",      "cache",       "block_table",
                             "context_lens", "cu_q_lens", "kv_b_proj.w", "kv_b_proj.scale"};
    MLA_TRY(mla_check_apart(ctx, outs, onames, 3, ins, inames, 8));
    for (int i = 0; i < 3; ++i)
        for (int j = i + 1; j < 3; ++j)
            if (outs[i] && outs[j])
                MLA_TRY(mla_check_disjoint(ctx, outs[i], onames[i], outs[j], onames[j]));
    return MLA_OK;
}

/* The absorbed attention's descriptor over the same cache and rows: its
 * index checks are this call's. */
static mla_attention_desc as_absorbed(const mla_attention_expanded_desc *d)
{
    mla_attention_desc ad;
    memset(&ad, 0, sizeof ad);
    ad.heads = d->heads;
    ad.cache = d->cache;
    ad.paged = d->paged;
    ad.q_dtype = d->q_dtype;
    ad.q_scale = 1.0f;
    ad.out_dtype = d->out_dtype;
    ad.softmax_scale = d->softmax_scale;
    ad.next_n = d->next_n;
    ad.num_splits = 1;
    return ad;
}

/* supports() of the op and of the gather and linear it is composed of. */
static mla_status check_supported(mla_context *ctx, const mla_attention_expanded_desc *d,
                                  const mla_attention_expanded_args *a, int64_t T, int64_t Nk)
{
    mla_variant v = mla_variant_of(MLA_OP_ATTENTION_EXPANDED, d->q_dtype, d->out_dtype,
                                   (int32_t)d->cache.layout, (int32_t)d->cache.dtype,
                                   d->cache.block_size, T, d->heads);
    const mla_weight *w = a->kv_b_proj;
    mla_variant_tensors(&v, 10,
                        (const mla_tensor *[]){a->q_nope, a->q_pe, a->cache, a->block_table,
                                               a->context_lens, a->cu_q_lens, &w->w,
                                               w->w.dtype == MLA_DTYPE_BF16 ? NULL : &w->scale,
                                               a->o, a->lse});
    v.next_n = d->next_n;
    MLA_TRY(mla_check_supported(ctx, &v));
    MLA_SLOT(ctx, attention_expanded);
    const int64_t L = d->cache.kv_lora, R = d->cache.rope, N = d->heads * (d->nope + d->v);
    const mla_variant g =
        mla_variant_of(MLA_OP_CACHE_GATHER, d->cache.dtype, mla_expanded_rows_dtype(&d->cache),
                       (int32_t)d->cache.layout, 0, d->cache.block_size, Nk, L + R);
    const mla_variant lin =
        mla_variant_of(MLA_OP_LINEAR, a->kv_b_proj->w.dtype, d->q_dtype, 0, 0, N, Nk, L);
    MLA_TRY(mla_check_supported(ctx, &g));
    MLA_TRY(mla_check_supported(ctx, &lin));
    MLA_SLOT(ctx, cache_gather);
    MLA_SLOT(ctx, linear);
    return MLA_OK;
}

/* Host index arrays of a call: cu [S + 1], key0 [S + 1], ctx [S], table [S]. */
static mla_status read_lengths(mla_context *ctx, const mla_attention_expanded_desc *d,
                               const mla_attention_expanded_args *a, const mla_attn_shape *sh,
                               int32_t *meta, int64_t *Nk)
{
    const int64_t S = sh->S;
    const mla_attention_desc ad = as_absorbed(d);
    const mla_attention_args aa = {.q = NULL,
                                   .block_table = a->block_table,
                                   .context_lens = a->context_lens,
                                   .cu_q_lens = a->cu_q_lens};
    int64_t *len, max_q = 0;
    MLA_TRY(mla_alloc_array(ctx, (void **)&len, S + 1, 1, sizeof *len, "context_lens"));
    mla_status st = mla_attn_check_values(ctx, &ad, &aa, sh, len, &max_q, meta);
    int64_t total = 0;
    for (int64_t s = 0; st == MLA_OK && s < S; ++s) {
        meta[S + 1 + s] = (int32_t)total;
        meta[2 * S + 2 + s] = (int32_t)len[s];
        meta[3 * S + 2 + s] = (int32_t)s;
        total += len[s];
        if (total > INT32_MAX)
            st = mla_fail(ctx, MLA_ERR_OVERFLOW, "context_lens", "the contexts sum past 2^31 keys");
    }
    meta[2 * S + 1] = (int32_t)total;
    free(len);
    *Nk = total;
    return st;
}

mla_status mla_attention_expanded(mla_context *ctx, const mla_attention_expanded_desc *d,
                                  const mla_attention_expanded_args *a)
{
    MLA_TRY(mla_begin(ctx));
    MLA_TRY(check_desc(ctx, d));
    mla_attn_shape sh;
    MLA_TRY(check_args(ctx, d, a, &sh));
    const int64_t S = sh.S;
    int32_t *meta;
    MLA_TRY(mla_alloc_array(ctx, (void **)&meta, 4 * S + 2, 1, sizeof *meta, "context_lens"));
    int64_t Nk = 0;
    mla_expanded_layout ws;
    mla_status st = read_lengths(ctx, d, a, &sh, meta, &Nk);
    if (st == MLA_OK && mla_expanded_layout_of(ctx, d, S, Nk, &ws) != MLA_OK)
        st = mla_fail(ctx, MLA_ERR_OVERFLOW, "context_lens", "the workspace overflows 64 bits");
    if (st == MLA_OK && a->workspace->shape[0] < ws.bytes)
        st = mla_fail_field(ctx, MLA_ERR_SHAPE, "workspace", "shape[0]",
                            "%lld bytes, the call needs %lld for %lld keys",
                            (long long)a->workspace->shape[0], (long long)ws.bytes, (long long)Nk);
    if (st == MLA_OK)
        st = check_supported(ctx, d, a, sh.T, Nk);
    if (st != MLA_OK || ctx->dry_run || sh.T == 0) {
        free(meta);
        return st;
    }
    const mla_memory mem = ctx->ops->memory;
    uint8_t *work = a->workspace->data;
    st = ctx->ops->mem_copy(ctx, work + ws.meta, meta, (size_t)(4 * S + 2) * sizeof *meta,
                            MLA_COPY_HOST_TO_CONTEXT);
    if (st != MLA_OK) {
        free(meta);
        return mla_fail(ctx, st, "workspace", "cannot copy the lengths to the workspace");
    }
    mla_attention_expanded_op_args op;
    memset(&op, 0, sizeof op);
    op.desc = *d;
    op.S = S;
    op.T = sh.T;
    op.Nk = Nk;
    op.block_bytes = sh.block_bytes;
    op.max_blocks = sh.max_blocks;
    op.cu_host = meta;
    op.key0_host = meta + S + 1;
    op.ctx_host = meta + 2 * S + 2;
    op.q_nope = *a->q_nope;
    op.q_pe = *a->q_pe;
    op.cache = *a->cache;
    op.block_table = d->paged ? *a->block_table
                              : mla_view(work + ws.meta + (3 * S + 2) * 4, MLA_DTYPE_I32, mem, 2,
                                         (int64_t[]){S, 1}, (int64_t[]){1, 1});
    op.context_lens = *a->context_lens;
    op.kv_b = a->kv_b_proj->w;
    if (a->kv_b_proj->w.dtype != MLA_DTYPE_BF16)
        op.kv_b_scale = a->kv_b_proj->scale;
    op.o = *a->o;
    if (a->lse)
        op.lse = *a->lse;
    op.workspace = work;
    op.ws = ws;
    st = ctx->ops->attention_expanded(ctx, &op);
    /* the host arrays may be read by queued work only through their
     * workspace copy, made above */
    free(meta);
    return st;
}
