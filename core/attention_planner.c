/* The split-KV planner: how many splits each sequence gets, the work list,
 * and the workspace carve-up (core/attention_plan.h).
 *
 * Split counts, from the actual lengths and ctx->compute_units U (SMs / CUs
 * on a GPU; on the host the fixed MLA_HOST_COMPUTE_UNITS, not the thread
 * count, so that a result's bits do not depend on the threads option):
 * - desc.num_splits == 1: no split; > 1: exactly that many items per
 *   non-padding sequence, chunk = ceil(len / n) rounded up to 64, so the
 *   trailing items may be empty (forced splits test the zero-weight path);
 * - desc.num_splits == 0, the plan decides. An item of sequence s is g_s
 *   records on a GPU (its row tiles: (query row, head) pairs in tiles of
 *   64, the rows a matrix-unit body takes; row_tiles below). When the
 *   non-padding sequences already give every unit a record (sum g >= U)
 *   nothing is split; otherwise about 2U records in total (two per unit
 *   hides the tail of uneven items), shared in proportion to the lengths:
 *   n_s = floor(2U len_s / sum (len g)) (rounded down: the records fit in
 *   one wave of two per unit, where rounding up made e.g. 128 equal
 *   sequences on 132 units 384 items, one and a half waves), at least 1, at
 *   most ceil(len_s / min_chunk) (ctx->min_split_keys: 64 on a GPU,
 *   MLA_HOST_MIN_CHUNK on the host; no shorter chunk) and the split capacity;
 *   then chunk_s = ceil(len_s / n_s) rounded up to 64 and n_s = ceil(len_s /
 *   chunk_s), so no automatic item is empty. Records, not sequences: 128
 *   sequences of 128 heads on 132 units are 256 records, which a split
 *   would only turn into partial rows to combine. */
#include "core/attention_planner.h"

#include <math.h>

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

/* The row tiles of sequence s: its query rows times the heads in tiles of
 * 64 pairs (HT = min(H, 64) heads of JT = 64 / HT rows; a sparse row is a
 * tile of its own, its keys being its own). */
static int64_t row_tiles(const mla_attention_plan *plan, int64_t s)
{
    const int64_t H = plan->desc.heads, HT = H < 64 ? H : 64;
    const int64_t JT = plan->desc.topk > 0 ? 1 : 64 / HT;
    const int64_t rows = plan->cu_q_host[s + 1] - plan->cu_q_host[s];
    return ceil_div(rows > 0 ? rows : 1, JT) * ceil_div(H, HT);
}

/* The split count of each sequence before the chunking, into n[s]. */
static void choose_splits(const mla_attention_plan *plan, const int64_t *len, int32_t units,
                          int64_t min_chunk, int32_t cap, int32_t *n)
{
    const int64_t S = plan->S, forced = plan->desc.num_splits;
    int64_t busy = 0;
    double total = 0.0;
    for (int64_t s = 0; s < S; ++s) {
        const int64_t g = len[s] > 0 ? row_tiles(plan, s) : 0;
        busy += g;
        total += (double)len[s] * (double)g;
    }
    const int64_t U = units > 0 ? units : 1;
    for (int64_t s = 0; s < S; ++s) {
        int64_t k = 1;
        if (len[s] == 0) {
            k = 0;
        } else if (forced >= 1) {
            k = forced;
        } else if (busy < U) {
            k = (int64_t)floor(2.0 * (double)U * (double)len[s] / total);
            const int64_t by_len = ceil_div(len[s], min_chunk);
            k = k < 1 ? 1 : k > by_len ? by_len : k;
        }
        n[s] = (int32_t)(k > cap ? cap : k);
    }
}

void mla_attention_schedule(mla_attention_plan *plan, const int64_t *len, int32_t compute_units,
                            int64_t min_chunk)
{
    const int64_t S = plan->S;
    const int forced = plan->desc.num_splits > 1;
    /* create (max_splits 0): the capacity is the forced count, or what the
     * plan chose for the lengths at hand (so an unsplit plan has no partial
     * buffers); updates stay within it */
    const int creating = plan->max_splits == 0;
    const int32_t cap = !creating                    ? plan->max_splits
                        : plan->desc.num_splits >= 1 ? plan->desc.num_splits
                                                     : MLA_ATTN_AUTO_SPLITS;
    choose_splits(plan, len, compute_units, min_chunk, cap, plan->splits_host);
    int64_t w = 0;
    for (int64_t s = 0; s < S; ++s) {
        const int64_t n = plan->splits_host[s];
        if (n == 0)
            continue;
        const int64_t chunk = ceil_div(ceil_div(len[s], n), MLA_ATTN_CHUNK) * MLA_ATTN_CHUNK;
        const int64_t items = forced ? n : ceil_div(len[s], chunk);
        for (int64_t i = 0; i < items; ++i, ++w) {
            const int64_t b = i * chunk < len[s] ? i * chunk : len[s];
            const int64_t e = b + chunk < len[s] ? b + chunk : len[s];
            plan->work_host[w] =
                (mla_attention_work){(int32_t)s, (int32_t)i, (int32_t)b, (int32_t)e};
        }
        plan->splits_host[s] = (int32_t)items;
    }
    plan->num_work = w;
    /* the unused entries carry the marker (kernels sized from work_capacity
     * skip them: a graph captured before an update stays valid) */
    for (; w < plan->work_capacity; ++w)
        plan->work_host[w] = (mla_attention_work){MLA_ATTN_WORK_UNUSED, 0, 0, 0};
    if (creating) {
        plan->q_len_at_create = plan->max_q_len;
        plan->work_at_create = plan->num_work;
        plan->max_splits = plan->desc.num_splits >= 1 ? plan->desc.num_splits : 1;
        for (int64_t s = 0; s < S; ++s)
            if (plan->splits_host[s] > plan->max_splits)
                plan->max_splits = plan->splits_host[s];
    }
}

/* Places a region of `bytes`; its offset, or -1 when bytes == 0. */
static int place(int64_t *cursor, int64_t bytes, int64_t *offset)
{
    if (bytes == 0) {
        *offset = -1;
        return 1;
    }
    *offset = *cursor;
    const int64_t padded = (bytes + MLA_ATTN_WS_ALIGN - 1) / MLA_ATTN_WS_ALIGN * MLA_ATTN_WS_ALIGN;
    return bytes <= INT64_MAX - MLA_ATTN_WS_ALIGN &&
           !__builtin_add_overflow(*cursor, padded, cursor);
}

/* a * b * c * d bytes, 0 on overflow (with *ok cleared). */
static int64_t product(int64_t a, int64_t b, int64_t c, int64_t d, int *ok)
{
    int64_t r;
    if (__builtin_mul_overflow(a, b, &r) || __builtin_mul_overflow(r, c, &r) ||
        __builtin_mul_overflow(r, d, &r)) {
        *ok = 0;
        return 0;
    }
    return r;
}

mla_status mla_attention_layout_workspace(mla_attention_plan *plan)
{
    const mla_attention_desc *d = &plan->desc;
    const int64_t T = plan->T, H = d->heads, L = d->cache.kv_lora, R = d->cache.rope;
    const int64_t P = plan->max_splits > 1 ? plan->max_splits : 0;
    int ok = 1;
    const int64_t part_o = product(T * H, P, L, 4, &ok), part_lse = product(T, H, P, 4, &ok);
    const int64_t q_rot =
        plan->has_rope ? product(T, H, L + R, (int64_t)mla_dtype_size(d->q_dtype), &ok) : 0;
    const int64_t k_rot = plan->has_rope ? product(plan->Tk, R, 4, 1, &ok) : 0;
    const mla_context *ctx = plan->ctx;
    const int64_t scratch = ctx->ops->attention_scratch ? ctx->ops->attention_scratch(ctx, d) : 0;
    ok = ok && scratch >= 0;
    int64_t cur = 0;
    ok = ok && place(&cur, part_o, &plan->part_o_offset) &&
         place(&cur, part_lse, &plan->part_lse_offset) && place(&cur, q_rot, &plan->q_rot_offset) &&
         place(&cur, k_rot, &plan->k_rot_offset) &&
         place(&cur, scratch, &plan->kernel_scratch_offset);
    plan->workspace_bytes = cur;
    return ok ? MLA_OK : MLA_ERR_OVERFLOW;
}
