/* Entry points of the DSA indexer (MLA.md section 6). */
#include <math.h>
#include <stdlib.h>

#include "core/dump_ops.h"
#include "core/indexer_internal.h"
#include "core/indices.h"
#include "core/validate.h"
#include "core/variant.h"

#define SHUFFLE_TILE 16
#define HADAMARD_MAX 1024

mla_indexer_layout mla_indexer_layout_for(int64_t block_size)
{
    return block_size == 1 ? MLA_INDEXER_NORMAL : MLA_INDEXER_SHUFFLE;
}

mla_status mla_idx_check_desc(mla_context *ctx, const mla_indexer_cache_desc *in,
                              mla_indexer_cache_desc *out, int64_t *bytes)
{
    if (!in)
        return mla_fail(ctx, MLA_ERR_NULL_POINTER, "cache_desc", "cache descriptor is NULL");
    *out = *in;
    if ((int)in->layout < 0 || in->layout >= MLA_INDEXER_LAYOUT_COUNT)
        return mla_fail(ctx, MLA_ERR_INVALID_ARGUMENT, "cache_desc.layout",
                        "unknown indexer layout %d", (int)in->layout);
    if (in->dtype != MLA_DTYPE_FP8_E4M3FN && in->dtype != MLA_DTYPE_FP8_E4M3FNUZ)
        return mla_fail(ctx, MLA_ERR_DTYPE, "cache_desc.dtype", "the indexer cache holds fp8");
    if (in->num_blocks < 0 || in->block_size < 1 || in->head_dim < 1)
        return mla_fail(ctx, MLA_ERR_SHAPE, "cache_desc",
                        "num_blocks >= 0, block_size >= 1, head_dim >= 1");
    if (in->ue8m0 != 0 && in->ue8m0 != 1)
        return mla_fail(ctx, MLA_ERR_INVALID_ARGUMENT, "cache_desc.ue8m0", "ue8m0 is 0 or 1");
    if (in->layout == MLA_INDEXER_LAYOUT_AUTO)
        out->layout = mla_indexer_layout_for(in->block_size);
    if (out->layout == MLA_INDEXER_SHUFFLE &&
        (in->block_size % SHUFFLE_TILE || in->head_dim % SHUFFLE_TILE))
        return mla_fail(ctx, MLA_ERR_INVALID_ARGUMENT, "cache_desc.block_size",
                        "the shuffle layout needs block_size and head_dim multiples of 16, "
                        "block_size is %lld", (long long)in->block_size);
    const int64_t per_token = mla_sz_add(in->head_dim, 4); /* fp8 values, an fp32 scale */
    int64_t total;
    if (per_token < 0 || !mla_ck_mul(per_token, in->block_size, bytes) ||
        !mla_ck_mul(*bytes, in->num_blocks, &total))
        return mla_fail(ctx, MLA_ERR_OVERFLOW, "cache_desc", "cache bytes overflow");
    return MLA_OK;
}

mla_status mla_indexer_cache_block_bytes(const mla_indexer_cache_desc *desc, int64_t *block_bytes)
{
    if (!block_bytes)
        return MLA_ERR_NULL_POINTER;
    mla_indexer_cache_desc d;
    return mla_idx_check_desc(NULL, desc, &d, block_bytes);
}

static mla_status check_cache(mla_context *ctx, const mla_indexer_cache_desc *in,
                              const mla_tensor *cache, mla_indexer_cache_args *a)
{
    MLA_TRY(mla_idx_check_desc(ctx, in, &a->desc, &a->block_bytes));
    MLA_TRY(mla_check_tensor(ctx, cache, "cache", 2));
    MLA_TRY(mla_check_dtype(ctx, cache, "cache", MLA_DT(MLA_DTYPE_U8)));
    MLA_TRY(mla_check_extent(ctx, cache, "cache", 0, in->num_blocks));
    MLA_TRY(mla_check_extent(ctx, cache, "cache", 1, a->block_bytes));
    if (cache->shape[1] > 1 && cache->stride[1] != 1)
        return mla_fail_field(ctx, MLA_ERR_STRIDE, "cache", "stride",
                              "cache bytes of a block must be contiguous");
    a->cache = *cache;
    return MLA_OK;
}

mla_status mla_indexer_k_cache_write(mla_context *ctx, const mla_indexer_cache_desc *desc,
                                     mla_tensor *cache, const mla_tensor *k,
                                     const mla_tensor *slots)
{
    MLA_DUMP_HOOK(ctx, MLA_OP_INDEXER_K_CACHE_WRITE,
                  mla_dump_indexer_k_cache_write(ctx, desc, cache, k, slots));
    MLA_TRY(mla_begin(ctx));
    mla_indexer_cache_args a = {0};
    MLA_TRY(check_cache(ctx, desc, cache, &a));
    MLA_TRY(mla_check_tensor(ctx, k, "k", 2));
    MLA_TRY(mla_check_dtype(ctx, k, "k", MLA_DT_FLOAT));
    MLA_TRY(mla_check_extent(ctx, k, "k", 1, desc->head_dim));
    const int64_t T = k->shape[0];
    MLA_TRY(mla_check_tensor(ctx, slots, "slots", 1));
    MLA_TRY(mla_check_dtype(ctx, slots, "slots", MLA_DT(MLA_DTYPE_I32) | MLA_DT(MLA_DTYPE_I64)));
    MLA_TRY(mla_check_extent(ctx, slots, "slots", 0, T));
    MLA_TRY(mla_check_output(ctx, cache, "cache"));
    MLA_TRY(mla_check_disjoint(ctx, cache, "cache", k, "k"));
    MLA_TRY(mla_check_disjoint(ctx, cache, "cache", slots, "slots"));
    /* the capacity fits: the cache's bytes do, at 5 or more a token */
    MLA_TRY(mla_check_slot_values(ctx, slots, T, desc->num_blocks * desc->block_size, "slots"));
    mla_variant var =
        mla_variant_of(MLA_OP_INDEXER_K_CACHE_WRITE, k->dtype, desc->dtype, (int32_t)a.desc.layout,
                       desc->ue8m0, desc->block_size, T, desc->head_dim);
    mla_variant_tensors(&var, 3, (const mla_tensor *[]){cache, k, slots});
    MLA_TRY(mla_check_supported(ctx, &var));
    MLA_SLOT(ctx, indexer_k_cache_write);
    if (T == 0)
        return MLA_OK;
    a.k = *k;
    a.slots = *slots;
    return MLA_DISPATCH(ctx, ctx->ops->indexer_k_cache_write(ctx, &a));
}

mla_status mla_idx_check_table_shape(mla_context *ctx, const mla_tensor *table, int64_t S)
{
    MLA_TRY(mla_check_tensor(ctx, table, "block_table", 2));
    MLA_TRY(mla_check_dtype(ctx, table, "block_table", MLA_DT(MLA_DTYPE_I32)));
    return mla_check_extent(ctx, table, "block_table", 0, S);
}

/* ... whose first ceil(len_s / block_size) ids of row s are valid blocks.
 * lens: host copy of the S lengths, which came from the parameter lname. */
static mla_status check_table(mla_context *ctx, const mla_indexer_cache_desc *d,
                              const mla_tensor *table, const int64_t *lens, int64_t S,
                              const char *lname)
{
    MLA_TRY(mla_idx_check_table_shape(ctx, table, S));
    const int64_t max_blocks = table->shape[1];
    /* a row's capacity */
    const int64_t cap = mla_sz_mul(max_blocks, d->block_size);
    MLA_TRY(mla_check_index_range(ctx, lens, S, 0, mla_sz_past(cap), 0, lname));
    int64_t *ids = NULL;
    MLA_TRY(mla_read_indices(ctx, table, "block_table", &ids));
    mla_status st = MLA_OK;
    for (int64_t s = 0; s < S && st == MLA_OK; ++s)
        st = mla_check_index_range(ctx, ids + s * max_blocks,
                                   mla_sz_ceil_div(lens[s], d->block_size), 0, d->num_blocks, 0,
                                   "block_table");
    free(ids);
    return st;
}

/* The index check of a paged call: lens in [lo, hi] and, with a table (desc
 * then its cache), the table's ids in use. */
typedef struct index_check {
    const mla_tensor *lens, *table;
    const mla_indexer_cache_desc *desc;
    int64_t lo, hi;
} index_check;

/* On the host: reads the indices back and names the first bad entry. */
static mla_status host_index_check(mla_context *ctx, const index_check *c)
{
    if (!mla_check_values(ctx, MLA_TRUST_INDICES))
        return MLA_OK;
    const int64_t S = c->lens->shape[0];
    int64_t *lens = NULL;
    MLA_TRY(mla_read_indices(ctx, c->lens, c->table ? "context_lens" : "lengths", &lens));
    mla_status st = MLA_OK;
    if (!c->table) {
        st = mla_check_index_range(ctx, lens, S, c->lo, c->hi + 1, 0, "lengths");
    } else {
        for (int64_t b = 0; st == MLA_OK && b < S; ++b)
            if (lens[b] < c->lo || lens[b] > c->hi)
                st = mla_fail(ctx, MLA_ERR_OUT_OF_RANGE, "context_lens",
                              "context_lens[%lld] = %lld is outside [next_n, logits.shape[1]]",
                              (long long)b, (long long)lens[b]);
        if (st == MLA_OK)
            st = check_table(ctx, c->desc, c->table, lens, S, "context_lens");
    }
    free(lens);
    return st;
}

/* The check queued on the device ahead of the op, where the backend has one
 * and the tensors live in its memory: its ticket, or 0 (the caller then
 * checks on the host). The lengths' bound is capped by the table's capacity
 * there, as check_table does here. */
static uint32_t queue_device_check(mla_context *ctx, const index_check *c)
{
    if (!ctx->ops->paged_check_queue || c->lens->memory == MLA_MEMORY_HOST ||
        (c->table && c->table->memory == MLA_MEMORY_HOST))
        return 0;
    int64_t bs = 1, nb = 0, hi = c->hi;
    if (c->table) {
        bs = c->desc->block_size;
        nb = c->desc->num_blocks;
        const int64_t cap =
            c->table->shape[1] > INT64_MAX / bs ? INT64_MAX : c->table->shape[1] * bs;
        hi = hi < cap ? hi : cap;
    }
    uint32_t gate = 0;
    return ctx->ops->paged_check_queue(ctx, c->lens, c->lo, hi, c->table, bs, nb, &gate) == MLA_OK
               ? gate
               : 0;
}

/* op(ctx, args, gate) behind the index check. On the device the op is queued
 * right behind the check, gated by its ticket, and the host waits for the
 * check alone (the device runs both back to back); a failed check wrote
 * nothing, and the host check names the bad entry (should it find none, the
 * op runs again, ungated). */
typedef mla_status (*gated_op)(mla_context *ctx, void *args, uint32_t gate);

static mla_status run_checked(mla_context *ctx, const index_check *c, gated_op op, void *args)
{
    if (ctx->dry_run)
        return host_index_check(ctx, c);
    if (!mla_check_values(ctx, MLA_TRUST_INDICES)) /* a composite's checked real pass */
        return op(ctx, args, 0);
    const uint32_t gate = queue_device_check(ctx, c);
    if (!gate) {
        MLA_TRY(host_index_check(ctx, c));
        return op(ctx, args, 0);
    }
    const mla_status st = op(ctx, args, gate);
    int ok = 0;
    const mla_status vs = ctx->ops->paged_check_verdict(ctx, gate, &ok);
    MLA_TRY(st);
    if (vs == MLA_OK && ok)
        return MLA_OK;
    MLA_TRY(host_index_check(ctx, c));
    return op(ctx, args, 0);
}

static mla_status logits_op(mla_context *ctx, void *args, uint32_t gate)
{
    mla_indexer_logits_args *a = args;
    a->gate = gate;
    return ctx->ops->indexer_logits(ctx, a);
}

static mla_status topk_op(mla_context *ctx, void *args, uint32_t gate)
{
    mla_topk_args *a = args;
    a->gate = gate;
    return ctx->ops->topk(ctx, a);
}

mla_status mla_indexer_k_gather(mla_context *ctx, const mla_indexer_cache_desc *desc,
                                const mla_tensor *cache, const mla_tensor *block_table,
                                const mla_tensor *cu_seq_lens, mla_tensor *k_fp8,
                                mla_tensor *k_scale)
{
    MLA_DUMP_HOOK(
        ctx, MLA_OP_INDEXER_K_GATHER,
        mla_dump_indexer_k_gather(ctx, desc, cache, block_table, cu_seq_lens, k_fp8, k_scale));
    MLA_TRY(mla_begin(ctx));
    mla_indexer_cache_args a = {0};
    MLA_TRY(check_cache(ctx, desc, cache, &a));
    MLA_TRY(mla_check_tensor(ctx, cu_seq_lens, "cu_seq_lens", 1));
    MLA_TRY(mla_check_dtype(ctx, cu_seq_lens, "cu_seq_lens", MLA_DT(MLA_DTYPE_I32)));
    if (cu_seq_lens->shape[0] < 1)
        return mla_fail_field(ctx, MLA_ERR_SHAPE, "cu_seq_lens", "shape[0]", "needs S + 1 >= 1");
    const int64_t S = cu_seq_lens->shape[0] - 1;
    int64_t *cu = NULL, *lens = NULL;
    MLA_TRY(mla_read_indices(ctx, cu_seq_lens, "cu_seq_lens", &cu));
    mla_status st = mla_alloc_array(ctx, (void **)&lens, S, 1, sizeof *lens, "cu_seq_lens");
    if (st == MLA_OK && cu[0] != 0)
        st = mla_fail(ctx, MLA_ERR_OUT_OF_RANGE, "cu_seq_lens", "cu_seq_lens[0] = %lld, must be 0",
                      (long long)cu[0]);
    for (int64_t s = 0; st == MLA_OK && s < S; ++s) {
        lens[s] = cu[s + 1] - cu[s]; /* I32 values: no overflow */
        if (lens[s] < 0)
            st = mla_fail(ctx, MLA_ERR_OUT_OF_RANGE, "cu_seq_lens", "cu_seq_lens decreases at %lld",
                          (long long)(s + 1));
    }
    const int64_t rows = st == MLA_OK ? cu[S] : 0;
    if (st == MLA_OK)
        st = check_table(ctx, desc, block_table, lens, S, "cu_seq_lens");
    free(cu);
    free(lens);
    MLA_TRY(st);
    MLA_TRY(mla_check_tensor(ctx, k_fp8, "k_fp8", 2));
    MLA_TRY(mla_check_dtype(ctx, k_fp8, "k_fp8", MLA_DT(desc->dtype)));
    MLA_TRY(mla_check_extent(ctx, k_fp8, "k_fp8", 0, rows));
    MLA_TRY(mla_check_extent(ctx, k_fp8, "k_fp8", 1, desc->head_dim));
    MLA_TRY(mla_check_tensor(ctx, k_scale, "k_scale", 1));
    MLA_TRY(mla_check_dtype(ctx, k_scale, "k_scale", MLA_DT(MLA_DTYPE_F32)));
    MLA_TRY(mla_check_extent(ctx, k_scale, "k_scale", 0, rows));
    MLA_TRY(mla_check_output(ctx, k_fp8, "k_fp8"));
    MLA_TRY(mla_check_output(ctx, k_scale, "k_scale"));
    const mla_tensor *ins[3] = {cache, block_table, cu_seq_lens};
    const char *names[3] = {"cache", "block_table", "cu_seq_lens"};
    for (int i = 0; i < 3; ++i) {
        MLA_TRY(mla_check_disjoint(ctx, k_fp8, "k_fp8", ins[i], names[i]));
        MLA_TRY(mla_check_disjoint(ctx, k_scale, "k_scale", ins[i], names[i]));
    }
    MLA_TRY(mla_check_disjoint(ctx, k_scale, "k_scale", k_fp8, "k_fp8"));
    mla_variant var =
        mla_variant_of(MLA_OP_INDEXER_K_GATHER, desc->dtype, desc->dtype, (int32_t)a.desc.layout, 0,
                       desc->block_size, rows, desc->head_dim);
    mla_variant_tensors(&var, 5,
                        (const mla_tensor *[]){cache, block_table, cu_seq_lens, k_fp8, k_scale});
    MLA_TRY(mla_check_supported(ctx, &var));
    MLA_SLOT(ctx, indexer_k_gather);
    if (rows == 0)
        return MLA_OK;
    a.block_table = *block_table;
    a.cu_seq_lens = *cu_seq_lens;
    a.k_fp8 = *k_fp8;
    a.k_scale = *k_scale;
    return MLA_DISPATCH(ctx, ctx->ops->indexer_k_gather(ctx, &a));
}

mla_status mla_idx_logits_args(mla_context *ctx, const mla_indexer_cache_desc *desc,
                               const mla_tensor *cache, const mla_tensor *q, const mla_tensor *w,
                               const mla_tensor *block_table, const mla_tensor *context_lens,
                               int32_t next_n, mla_tensor *logits, mla_indexer_logits_args *a)
{
    mla_indexer_cache_args c = {0};
    MLA_TRY(check_cache(ctx, desc, cache, &c));
    if (next_n < 1)
        return mla_fail(ctx, MLA_ERR_INVALID_ARGUMENT, "next_n", "next_n must be >= 1");
    MLA_TRY(mla_check_tensor(ctx, context_lens, "context_lens", 1));
    MLA_TRY(mla_check_dtype(ctx, context_lens, "context_lens", MLA_DT(MLA_DTYPE_I32)));
    const int64_t B = context_lens->shape[0], rows = mla_sz_mul(B, next_n);
    if (rows < 0)
        return mla_fail_field(ctx, MLA_ERR_OVERFLOW, "context_lens", "shape[0]",
                              "%lld sequences of next_n = %d rows overflow", (long long)B,
                              (int)next_n);
    MLA_TRY(mla_check_tensor(ctx, q, "q", 3));
    MLA_TRY(mla_check_dtype(ctx, q, "q", MLA_DT(desc->dtype)));
    MLA_TRY(mla_check_extent(ctx, q, "q", 0, rows));
    MLA_TRY(mla_check_extent(ctx, q, "q", 2, desc->head_dim));
    const int64_t Hi = q->shape[1];
    MLA_TRY(mla_check_tensor(ctx, w, "w", 2));
    MLA_TRY(mla_check_dtype(ctx, w, "w", MLA_DT(MLA_DTYPE_F32)));
    MLA_TRY(mla_check_extent(ctx, w, "w", 0, rows));
    MLA_TRY(mla_check_extent(ctx, w, "w", 1, Hi));
    MLA_TRY(mla_check_tensor(ctx, logits, "logits", 2));
    MLA_TRY(mla_check_dtype(ctx, logits, "logits", MLA_DT(MLA_DTYPE_F32)));
    MLA_TRY(mla_check_extent(ctx, logits, "logits", 0, rows));
    MLA_TRY(mla_idx_check_table_shape(ctx, block_table, B));
    MLA_TRY(mla_check_output(ctx, logits, "logits"));
    const mla_tensor *ins[5] = {cache, q, w, block_table, context_lens};
    const char *names[5] = {"cache", "q", "w", "block_table", "context_lens"};
    for (int i = 0; i < 5; ++i)
        MLA_TRY(mla_check_disjoint(ctx, logits, "logits", ins[i], names[i]));
    mla_variant var =
        mla_variant_of(MLA_OP_INDEXER_LOGITS, desc->dtype, MLA_DTYPE_F32, (int32_t)c.desc.layout,
                       next_n, desc->block_size, rows, desc->head_dim);
    mla_variant_tensors(&var, 6,
                        (const mla_tensor *[]){cache, q, w, block_table, context_lens, logits});
    var.next_n = next_n;
    MLA_TRY(mla_check_supported(ctx, &var));
    MLA_SLOT(ctx, indexer_logits);
    *a = (mla_indexer_logits_args){c.desc, c.block_bytes,   *cache,  *q,     *w,
                                   *block_table, *context_lens, *logits, next_n, 0};
    return MLA_OK;
}

mla_status mla_indexer_logits(mla_context *ctx, const mla_indexer_cache_desc *desc,
                              const mla_tensor *cache, const mla_tensor *q, const mla_tensor *w,
                              const mla_tensor *block_table, const mla_tensor *context_lens,
                              int32_t next_n, mla_tensor *logits)
{
    MLA_DUMP_HOOK(
        ctx, MLA_OP_INDEXER_LOGITS,
        mla_dump_indexer_logits(ctx, desc, cache, q, w, block_table, context_lens, next_n, logits));
    MLA_TRY(mla_begin(ctx));
    mla_indexer_logits_args a;
    MLA_TRY(mla_idx_logits_args(ctx, desc, cache, q, w, block_table, context_lens, next_n, logits,
                                &a));
    const index_check ic = {context_lens, block_table, &a.desc, next_n, logits->shape[1]};
    if (a.logits.shape[0] == 0 || a.logits.shape[1] == 0)
        return host_index_check(ctx, &ic);
    return run_checked(ctx, &ic, logits_op, &a);
}

mla_status mla_idx_topk_args(mla_context *ctx, const mla_tensor *logits, const mla_tensor *lengths,
                             int64_t k, mla_tensor *indices, mla_topk_args *a)
{
    MLA_TRY(mla_check_tensor(ctx, logits, "logits", 2));
    MLA_TRY(mla_check_dtype(ctx, logits, "logits", MLA_DT(MLA_DTYPE_F32)));
    const int64_t R = logits->shape[0], N = logits->shape[1];
    if (k < 1 || k > N)
        return mla_fail(ctx, MLA_ERR_INVALID_ARGUMENT, "k",
                        "k = %lld must be in [1, %lld], the logits row", (long long)k,
                        (long long)N);
    MLA_TRY(mla_check_tensor(ctx, lengths, "lengths", 1));
    MLA_TRY(mla_check_dtype(ctx, lengths, "lengths", MLA_DT(MLA_DTYPE_I32)));
    MLA_TRY(mla_check_extent(ctx, lengths, "lengths", 0, R));
    MLA_TRY(mla_check_tensor(ctx, indices, "indices", 2));
    MLA_TRY(mla_check_dtype(ctx, indices, "indices", MLA_DT(MLA_DTYPE_I32)));
    MLA_TRY(mla_check_extent(ctx, indices, "indices", 0, R));
    MLA_TRY(mla_check_extent(ctx, indices, "indices", 1, k));
    MLA_TRY(mla_check_output(ctx, indices, "indices"));
    MLA_TRY(mla_check_disjoint(ctx, indices, "indices", logits, "logits"));
    MLA_TRY(mla_check_disjoint(ctx, indices, "indices", lengths, "lengths"));
    mla_variant var = mla_variant_of(MLA_OP_TOPK, MLA_DTYPE_F32, MLA_DTYPE_I32, 0, 0, k, R, N);
    mla_variant_tensors(&var, 3, (const mla_tensor *[]){logits, lengths, indices});
    MLA_TRY(mla_check_supported(ctx, &var));
    MLA_SLOT(ctx, topk);
    *a = (mla_topk_args){*logits, *lengths, *indices, k, 0, 0};
    return MLA_OK;
}

mla_status mla_topk(mla_context *ctx, const mla_tensor *logits, const mla_tensor *lengths,
                    int64_t k, mla_tensor *indices)
{
    MLA_DUMP_HOOK(ctx, MLA_OP_TOPK, mla_dump_topk(ctx, logits, lengths, k, indices));
    MLA_TRY(mla_begin(ctx));
    mla_topk_args a;
    MLA_TRY(mla_idx_topk_args(ctx, logits, lengths, k, indices, &a));
    const index_check ic = {lengths, NULL, NULL, 0, logits->shape[1]};
    if (a.logits.shape[0] == 0)
        return MLA_OK;
    return run_checked(ctx, &ic, topk_op, &a);
}

mla_status mla_layernorm(mla_context *ctx, const mla_tensor *x, const mla_tensor *w,
                         const mla_tensor *b, float eps, mla_tensor *y)
{
    MLA_DUMP_HOOK(ctx, MLA_OP_LAYERNORM, mla_dump_layernorm(ctx, x, w, b, eps, y));
    MLA_TRY(mla_begin(ctx));
    MLA_TRY(mla_check_tensor(ctx, x, "x", 2));
    MLA_TRY(mla_check_dtype(ctx, x, "x", MLA_DT_FLOAT));
    const int64_t T = x->shape[0], D = x->shape[1];
    const mla_tensor *wb[2] = {w, b};
    const char *names[2] = {"w", "b"};
    for (int i = 0; i < 2; ++i) {
        MLA_TRY(mla_check_tensor(ctx, wb[i], names[i], 1));
        MLA_TRY(mla_check_dtype(ctx, wb[i], names[i], MLA_DT(MLA_DTYPE_F32)));
        MLA_TRY(mla_check_extent(ctx, wb[i], names[i], 0, D));
    }
    if (!(eps >= 0.0f) || !isfinite(eps))
        return mla_fail(ctx, MLA_ERR_INVALID_ARGUMENT, "eps", "eps must be finite and >= 0");
    MLA_TRY(mla_check_tensor(ctx, y, "y", 2));
    MLA_TRY(mla_check_dtype(ctx, y, "y", MLA_DT_FLOAT));
    MLA_TRY(mla_check_extent(ctx, y, "y", 0, T));
    MLA_TRY(mla_check_extent(ctx, y, "y", 1, D));
    MLA_TRY(mla_check_output(ctx, y, "y"));
    MLA_TRY(mla_check_inplace_or_disjoint(ctx, y, "y", x, "x"));
    MLA_TRY(mla_check_disjoint(ctx, y, "y", w, "w"));
    MLA_TRY(mla_check_disjoint(ctx, y, "y", b, "b"));
    mla_variant var = mla_variant_of(MLA_OP_LAYERNORM, x->dtype, y->dtype, 0, 0, 0, T, D);
    mla_variant_tensors(&var, 4, (const mla_tensor *[]){x, w, b, y});
    MLA_TRY(mla_check_supported(ctx, &var));
    MLA_SLOT(ctx, layernorm);
    if (T == 0 || D == 0)
        return MLA_OK;
    mla_layernorm_args a = {*x, *w, *b, *y, eps};
    return MLA_DISPATCH(ctx, ctx->ops->layernorm(ctx, &a));
}

mla_status mla_hadamard(mla_context *ctx, const mla_tensor *x, mla_tensor *y)
{
    MLA_DUMP_HOOK(ctx, MLA_OP_HADAMARD, mla_dump_hadamard(ctx, x, y));
    MLA_TRY(mla_begin(ctx));
    MLA_TRY(mla_check_tensor(ctx, x, "x", -1));
    if (x->ndim != 2 && x->ndim != 3)
        return mla_fail_field(ctx, MLA_ERR_SHAPE, "x", "ndim", "rank %d, expected 2 or 3",
                              (int)x->ndim);
    MLA_TRY(mla_check_dtype(ctx, x, "x", MLA_DT(MLA_DTYPE_F32) | MLA_DT(MLA_DTYPE_BF16)));
    const int64_t D = x->shape[x->ndim - 1];
    if (D < 1 || D > HADAMARD_MAX || (D & (D - 1)))
        return mla_fail_field(ctx, MLA_ERR_SHAPE, "x", "shape",
                              "the last dim %lld is not a power of two <= %d", (long long)D,
                              HADAMARD_MAX);
    MLA_TRY(mla_check_tensor(ctx, y, "y", x->ndim));
    MLA_TRY(mla_check_dtype(ctx, y, "y", MLA_DT(MLA_DTYPE_F32) | MLA_DT(MLA_DTYPE_BF16)));
    for (int32_t d = 0; d < x->ndim; ++d)
        MLA_TRY(mla_check_extent(ctx, y, "y", d, x->shape[d]));
    MLA_TRY(mla_check_output(ctx, y, "y"));
    MLA_TRY(mla_check_inplace_or_disjoint(ctx, y, "y", x, "x"));
    mla_variant var =
        mla_variant_of(MLA_OP_HADAMARD, x->dtype, y->dtype, 0, 0, 0, mla_tensor_numel(x) / D, D);
    mla_variant_tensors(&var, 2, (const mla_tensor *[]){x, y});
    MLA_TRY(mla_check_supported(ctx, &var));
    MLA_SLOT(ctx, hadamard);
    if (mla_tensor_numel(x) == 0)
        return MLA_OK;
    mla_hadamard_args a = {mla_as_3d(x), mla_as_3d(y)};
    return MLA_DISPATCH(ctx, ctx->ops->hadamard(ctx, &a));
}

mla_status mla_indexer_head_weights(mla_context *ctx, const mla_tensor *w, const mla_tensor *s_q,
                                    mla_tensor *w_out)
{
    MLA_DUMP_HOOK(ctx, MLA_OP_INDEXER_HEAD_WEIGHTS,
                  mla_dump_indexer_head_weights(ctx, w, s_q, w_out));
    MLA_TRY(mla_begin(ctx));
    MLA_TRY(mla_check_tensor(ctx, w, "w", 2));
    MLA_TRY(mla_check_dtype(ctx, w, "w", MLA_DT(MLA_DTYPE_F32) | MLA_DT(MLA_DTYPE_BF16)));
    const int64_t T = w->shape[0], Hi = w->shape[1];
    MLA_TRY(mla_check_tensor(ctx, s_q, "s_q", 2));
    MLA_TRY(mla_check_dtype(ctx, s_q, "s_q", MLA_DT(MLA_DTYPE_F32)));
    MLA_TRY(mla_check_extent(ctx, s_q, "s_q", 0, T));
    MLA_TRY(mla_check_extent(ctx, s_q, "s_q", 1, Hi));
    MLA_TRY(mla_check_tensor(ctx, w_out, "w_out", 2));
    MLA_TRY(mla_check_dtype(ctx, w_out, "w_out", MLA_DT(MLA_DTYPE_F32)));
    MLA_TRY(mla_check_extent(ctx, w_out, "w_out", 0, T));
    MLA_TRY(mla_check_extent(ctx, w_out, "w_out", 1, Hi));
    MLA_TRY(mla_check_output(ctx, w_out, "w_out"));
    MLA_TRY(mla_check_inplace_or_disjoint(ctx, w_out, "w_out", w, "w"));
    MLA_TRY(mla_check_inplace_or_disjoint(ctx, w_out, "w_out", s_q, "s_q"));
    mla_variant var =
        mla_variant_of(MLA_OP_INDEXER_HEAD_WEIGHTS, w->dtype, MLA_DTYPE_F32, 0, 0, 0, T, Hi);
    mla_variant_tensors(&var, 3, (const mla_tensor *[]){w, s_q, w_out});
    MLA_TRY(mla_check_supported(ctx, &var));
    MLA_SLOT(ctx, indexer_head_weights);
    if (T == 0 || Hi == 0)
        return MLA_OK;
    mla_head_weights_args a = {*w, *s_q, *w_out};
    return MLA_DISPATCH(ctx, ctx->ops->indexer_head_weights(ctx, &a));
}
