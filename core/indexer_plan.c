/* The planned search of the DSA indexer (include/mla/mla_indexer.h): a
 * decode step's block table and context lengths are checked once and copied
 * into the plan; each search then only queues the logits and the top-k. */
#include <stdlib.h>
#include <string.h>

#include "core/dump_ops.h"
#include "core/indexer_internal.h"
#include "core/indices.h"
#include "core/validate.h"

struct mla_indexer_plan {
    mla_context *ctx;
    mla_indexer_cache_desc desc; /* as the caller gave it */
    int32_t next_n;
    int64_t B, max_blocks, max_len;
    size_t count; /* int32 values: the table [B, max_blocks], lens [B], bounds [B * next_n] */
    int32_t *host;
    int32_t *dev; /* host's twin in context memory (host itself on a host backend) */
};

int64_t mla_indexer_plan_max_len(const mla_indexer_plan *plan) { return plan ? plan->max_len : 0; }

void mla_indexer_plan_index_views(const mla_indexer_plan *p, mla_indexer_cache_desc *desc,
                                  int32_t *next_n, mla_tensor *table, mla_tensor *lens)
{
    const mla_memory mem = mla_context_memory(p->ctx);
    *desc = p->desc;
    *next_n = p->next_n;
    mla_tensor_init(table, p->dev, MLA_DTYPE_I32, mem, 2, (int64_t[]){p->B, p->max_blocks});
    mla_tensor_init(lens, p->dev + p->B * p->max_blocks, MLA_DTYPE_I32, mem, 1, &p->B);
}

void mla_indexer_plan_destroy(mla_indexer_plan *plan)
{
    if (!plan)
        return;
    if (plan->dev && plan->dev != plan->host)
        plan->ctx->ops->mem_free(plan->ctx, plan->dev);
    free(plan->host);
    free(plan);
}

/* Reads the index data back, checks it, and writes the plan's int32 image of
 * it (table, lengths, each row's causal bound) into out. *max_len: the
 * longest context. */
static mla_status plan_image(mla_context *ctx, const mla_indexer_plan *p, const mla_tensor *table,
                             const mla_tensor *lens, int32_t *out, int64_t *max_len)
{
    const int64_t B = p->B, mb = p->max_blocks, bs = p->desc.block_size;
    const int64_t cap = mb > INT64_MAX / bs ? INT64_MAX : mb * bs;
    int64_t *ids = NULL, *len = NULL;
    mla_status st = mla_read_indices(ctx, lens, "context_lens", &len);
    if (st == MLA_OK)
        st = mla_read_indices(ctx, table, "block_table", &ids);
    *max_len = 0;
    for (int64_t b = 0; st == MLA_OK && b < B; ++b) {
        if (len[b] < p->next_n || len[b] > cap) {
            st = mla_fail(ctx, MLA_ERR_OUT_OF_RANGE, "context_lens",
                          "context_lens[%lld] = %lld is outside [next_n, %lld] (next_n %d, the "
                          "table's %lld blocks of %lld)",
                          (long long)b, (long long)len[b], (long long)cap, (int)p->next_n,
                          (long long)mb, (long long)bs);
            break;
        }
        st = mla_check_index_range(ctx, ids + b * mb, mla_sz_ceil_div(len[b], bs), 0,
                                   p->desc.num_blocks, 0, "block_table");
        *max_len = len[b] > *max_len ? len[b] : *max_len;
    }
    if (st == MLA_OK) {
        int32_t *lo = out + B * mb, *bound = lo + B;
        for (int64_t i = 0; i < B * mb; ++i)
            out[i] = (int32_t)ids[i];
        for (int64_t b = 0; b < B; ++b) {
            lo[b] = (int32_t)len[b];
            for (int64_t j = 0; j < p->next_n; ++j)
                bound[b * p->next_n + j] = (int32_t)(len[b] - p->next_n + j + 1);
        }
    }
    free(ids);
    free(len);
    return st;
}

/* The image into the plan's context memory, ordered after the work queued
 * (the copy goes through the context's stream and waits for it). */
static mla_status publish(mla_context *ctx, const mla_indexer_plan *p)
{
    if (p->dev == p->host)
        return MLA_OK;
    return ctx->ops->mem_copy(ctx, p->dev, p->host, p->count * 4, MLA_COPY_HOST_TO_CONTEXT);
}

static mla_status index_shapes(mla_context *ctx, const mla_tensor *table, const mla_tensor *lens)
{
    MLA_TRY(mla_check_tensor(ctx, lens, "context_lens", 1));
    MLA_TRY(mla_check_dtype(ctx, lens, "context_lens", MLA_DT(MLA_DTYPE_I32)));
    return mla_idx_check_table_shape(ctx, table, lens->shape[0]);
}

mla_status mla_indexer_plan_create(mla_context *ctx, const mla_indexer_cache_desc *desc,
                                   const mla_tensor *block_table, const mla_tensor *context_lens,
                                   int32_t next_n, mla_indexer_plan **out)
{
    MLA_TRY(mla_begin(ctx));
    if (!out)
        return mla_fail(ctx, MLA_ERR_NULL_POINTER, "out", "NULL argument");
    *out = NULL;
    mla_indexer_cache_desc resolved;
    int64_t block_bytes;
    MLA_TRY(mla_idx_check_desc(ctx, desc, &resolved, &block_bytes));
    if (next_n < 1)
        return mla_fail(ctx, MLA_ERR_INVALID_ARGUMENT, "next_n", "next_n must be >= 1");
    MLA_TRY(index_shapes(ctx, block_table, context_lens));
    const int64_t B = context_lens->shape[0], mb = block_table->shape[1];
    /* int32 values: the table, the lengths, next_n bounds per sequence */
    const int64_t n = mla_sz_mul(B, mla_sz_add(mb, 1 + (int64_t)next_n));
    if (n < 0 || n > INT64_MAX / 8)
        return mla_fail(ctx, MLA_ERR_OVERFLOW, "block_table", "the plan's size overflows");
    mla_indexer_plan *p = calloc(1, sizeof *p);
    if (!p)
        return mla_fail(ctx, MLA_ERR_OUT_OF_MEMORY, "plan", "no memory for the plan");
    *p = (mla_indexer_plan){ctx, *desc, next_n, B, mb, 0, (size_t)n, NULL, NULL};
    p->host = malloc(n ? (size_t)n * 4 : 4);
    mla_status st = p->host ? MLA_OK : mla_fail(ctx, MLA_ERR_OUT_OF_MEMORY, "plan", "no memory");
    if (st == MLA_OK && ctx->ops->memory == MLA_MEMORY_HOST)
        p->dev = p->host;
    else if (st == MLA_OK && ctx->ops->mem_alloc(ctx, n ? (size_t)n * 4 : 4, (void **)&p->dev))
        st = mla_fail(ctx, MLA_ERR_OUT_OF_MEMORY, "plan", "cannot allocate %lld bytes of plan data",
                      (long long)n * 4);
    if (st == MLA_OK)
        st = plan_image(ctx, p, block_table, context_lens, p->host, &p->max_len);
    if (st == MLA_OK)
        st = publish(ctx, p);
    if (st != MLA_OK) {
        mla_indexer_plan_destroy(p);
        return st;
    }
    *out = p;
    return MLA_OK;
}

static mla_status check_plan(mla_context *ctx, const mla_indexer_plan *plan)
{
    return mla_check_plan_of(ctx, plan != NULL, plan ? plan->ctx : NULL);
}

mla_status mla_indexer_plan_update(mla_context *ctx, mla_indexer_plan *plan,
                                   const mla_tensor *block_table, const mla_tensor *context_lens)
{
    MLA_TRY(mla_begin(ctx));
    MLA_TRY(check_plan(ctx, plan));
    MLA_TRY(index_shapes(ctx, block_table, context_lens));
    if (context_lens->shape[0] != plan->B)
        return mla_fail_field(ctx, MLA_ERR_SHAPE, "context_lens", "shape[0]",
                              "%lld sequences, the plan has %lld",
                              (long long)context_lens->shape[0], (long long)plan->B);
    if (block_table->shape[1] != plan->max_blocks)
        return mla_fail_field(ctx, MLA_ERR_SHAPE, "block_table", "shape[1]",
                              "%lld blocks per sequence, the plan has %lld",
                              (long long)block_table->shape[1], (long long)plan->max_blocks);
    /* checked into a copy: a refused update leaves the plan as it was */
    int32_t *next = malloc(plan->count ? plan->count * 4 : 4);
    if (!next)
        return mla_fail(ctx, MLA_ERR_OUT_OF_MEMORY, "plan", "no memory");
    int64_t max_len;
    mla_status st = plan_image(ctx, plan, block_table, context_lens, next, &max_len);
    if (st == MLA_OK) {
        memcpy(plan->host, next, plan->count * 4);
        plan->max_len = max_len;
        st = publish(ctx, plan);
    }
    free(next);
    return st;
}

/* The plan's arrays as tensors in context memory. */
static void plan_views(const mla_indexer_plan *p, mla_context *ctx, mla_tensor *table,
                       mla_tensor *lens, mla_tensor *bounds)
{
    const mla_memory mem = mla_context_memory(ctx);
    mla_tensor_init(table, p->dev, MLA_DTYPE_I32, mem, 2, (int64_t[]){p->B, p->max_blocks});
    mla_tensor_init(lens, p->dev + p->B * p->max_blocks, MLA_DTYPE_I32, mem, 1,
                    (int64_t[]){p->B});
    mla_tensor_init(bounds, p->dev + p->B * (p->max_blocks + 1), MLA_DTYPE_I32, mem, 1,
                    (int64_t[]){p->B * p->next_n});
}

mla_status mla_indexer_search(mla_context *ctx, const mla_indexer_plan *plan,
                              const mla_tensor *cache, const mla_tensor *q, const mla_tensor *w,
                              mla_tensor *logits, int64_t k, mla_tensor *indices)
{
    MLA_DUMP_HOOK(ctx, MLA_DUMP_INDEXER_SEARCH,
                  mla_dump_indexer_search(ctx, plan, cache, q, w, logits, k, indices));
    MLA_TRY(mla_begin(ctx));
    MLA_TRY(check_plan(ctx, plan));
    mla_tensor table, lens, bounds;
    plan_views(plan, ctx, &table, &lens, &bounds);
    mla_indexer_logits_args la;
    MLA_TRY(mla_idx_logits_args(ctx, &plan->desc, cache, q, w, &table, &lens, plan->next_n, logits,
                                &la));
    if (logits->shape[1] < plan->max_len)
        return mla_fail_field(ctx, MLA_ERR_SHAPE, "logits", "shape[1]",
                              "%lld columns, the plan's longest context is %lld",
                              (long long)logits->shape[1], (long long)plan->max_len);
    mla_topk_args ta;
    MLA_TRY(mla_idx_topk_args(ctx, logits, &bounds, k, indices, &ta));
    const mla_tensor *ins[3] = {cache, q, w};
    const char *names[3] = {"cache", "q", "w"};
    for (int i = 0; i < 3; ++i)
        MLA_TRY(mla_check_disjoint(ctx, indices, "indices", ins[i], names[i]));
    if (plan->B == 0 || ctx->dry_run)
        return MLA_OK;
    MLA_TRY(ctx->ops->indexer_logits(ctx, &la));
    ta.after_logits = 1;
    return ctx->ops->topk(ctx, &ta);
}
