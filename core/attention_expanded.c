/* The expanded attention's workspace carve-up and the decompression the
 * fast backends run before their attention kernel (core/attention_expanded.h). */
#include "core/attention_expanded.h"
#include "core/attention_planner.h" /* MLA_ATTN_WS_ALIGN */
#include "core/checked.h"
#include "core/validate.h"
#include "cpu/cpu_kernels.h" /* mla_cpu_expanded_tile_bytes */

mla_dtype mla_expanded_rows_dtype(const mla_cache_desc *cache)
{
    return cache->dtype == MLA_DTYPE_BF16 ? MLA_DTYPE_BF16 : MLA_DTYPE_F32;
}

/* Places `bytes` at *cursor (256-aligned); -1 for an empty region. */
static int64_t place(int64_t *cursor, int64_t bytes)
{
    if (bytes == 0)
        return -1;
    const int64_t at = *cursor;
    *cursor = mla_sz_add(at, mla_sz_round_up(bytes, MLA_ATTN_WS_ALIGN));
    return at;
}

mla_status mla_expanded_layout_of(const mla_context *ctx, const mla_attention_expanded_desc *d,
                                  int64_t S, int64_t Nk, mla_expanded_layout *out)
{
    const int64_t L = d->cache.kv_lora, R = d->cache.rope, H = d->heads;
    const int64_t rows =
        mla_sz_mul3(Nk, L + R, (int64_t)mla_dtype_size(mla_expanded_rows_dtype(&d->cache)));
    const int64_t kv = mla_sz_mul4(Nk, H, d->nope + d->v, (int64_t)mla_dtype_size(d->q_dtype));
    const int64_t meta = mla_sz_mul(mla_sz_add(mla_sz_mul(S, 4), 2), 4);
    const int64_t tiles =
        ctx->backend == MLA_BACKEND_CPU
            ? mla_sz_mul(ctx->num_threads, mla_cpu_expanded_tile_bytes(d->nope, R, d->v, L))
            : 0;
    if (rows < 0 || kv < 0 || meta < 0 || tiles < 0)
        return MLA_ERR_OVERFLOW;
    int64_t cur = 0;
    out->rows = place(&cur, rows);
    out->kv = place(&cur, kv);
    out->meta = place(&cur, meta);
    out->tiles = place(&cur, tiles);
    out->bytes = cur;
    return cur < 0 ? MLA_ERR_OVERFLOW : MLA_OK;
}

mla_status mla_expanded_gather(mla_context *ctx, const mla_attention_expanded_op_args *a,
                               mla_expanded_kv *out)
{
    const mla_attention_expanded_desc *d = &a->desc;
    const int64_t L = d->cache.kv_lora, R = d->cache.rope, N = d->heads * (d->nope + d->v);
    const mla_memory mem = ctx->ops->memory;
    out->rows = mla_view(a->workspace + a->ws.rows, mla_expanded_rows_dtype(&d->cache), mem, 2,
                         (int64_t[]){a->Nk, L + R}, (int64_t[]){L + R, 1});
    out->kv = mla_view(a->workspace + a->ws.kv, d->q_dtype, mem, 2, (int64_t[]){a->Nk, N},
                       (int64_t[]){N, 1});
    if (a->Nk == 0)
        return MLA_OK;
    mla_cache_gather_args g = {d->cache,      a->block_bytes, a->cache, a->block_table,
                               a->context_lens, out->rows};
    return ctx->ops->cache_gather(ctx, &g);
}

mla_status mla_expanded_decompress(mla_context *ctx, const mla_attention_expanded_op_args *a,
                                   mla_expanded_kv *out)
{
    MLA_TRY(mla_expanded_gather(ctx, a, out));
    if (a->Nk == 0)
        return MLA_OK;
    const int64_t L = a->desc.cache.kv_lora, R = a->desc.cache.rope;
    const mla_memory mem = ctx->ops->memory;
    mla_linear_args lin = {mla_view(out->rows.data, out->rows.dtype, mem, 2,
                                    (int64_t[]){a->Nk, L}, (int64_t[]){L + R, 1}),
                           a->kv_b, out->kv, a->kv_b_scale};
    return ctx->ops->linear(ctx, &lin);
}
