/* Entry points of the latent cache (MLA.md section 4): descriptor checks,
 * write, gather, and the fused RoPE + concat + cache write. */
#include <math.h>
#include <stdlib.h>

#include "core/cache_checks.h"
#include "core/checked.h"
#include "core/dump_ops.h"
#include "core/indices.h"
#include "core/validate.h"
#include "core/variant.h"

#define FP8_SCALE_GROUP 128
#define SHUFFLE_TOKENS 16

/* Elements per tile row of the SHUFFLED layout: 16 bytes of a 16-token tile. */
static int64_t shuffle_k(mla_dtype dtype) { return dtype == MLA_DTYPE_BF16 ? 8 : 16; }

static mla_status desc_block_bytes(mla_context *ctx, const mla_cache_desc *d, int64_t *bytes)
{
    if (!d)
        return mla_fail(ctx, MLA_ERR_NULL_POINTER, "cache_desc", "cache descriptor is NULL");
    if ((int)d->layout < 0 || d->layout >= MLA_CACHE_LAYOUT_COUNT)
        return mla_fail(ctx, MLA_ERR_INVALID_ARGUMENT, "cache_desc.layout",
                        "unknown cache layout %d", (int)d->layout);
    const unsigned ok = MLA_DT(MLA_DTYPE_BF16) | MLA_DT_FP8;
    if ((int)d->dtype < 0 || d->dtype >= MLA_DTYPE_COUNT || !(ok & MLA_DT(d->dtype)))
        return mla_fail(ctx, MLA_ERR_DTYPE, "cache_desc.dtype",
                        "cache elements are bf16, fp8_e4m3fn or fp8_e4m3fnuz");
    if (d->num_blocks < 0 || d->block_size < 1 || d->kv_lora < 1 || d->rope < 0 || d->rope % 2)
        return mla_fail(ctx, MLA_ERR_SHAPE, "cache_desc",
                        "num_blocks >= 0, block_size >= 1, kv_lora >= 1, even rope >= 0");
    const int64_t L = d->kv_lora, R = d->rope, bs = d->block_size;
    const int64_t es = (int64_t)mla_dtype_size(d->dtype);
    int64_t per_token; /* bytes; -1 when they do not fit */
    switch (d->layout) {
    case MLA_CACHE_FP8_SCALED:
        if (d->dtype == MLA_DTYPE_BF16)
            return mla_fail(ctx, MLA_ERR_INVALID_ARGUMENT, "cache_desc.dtype",
                            "the fp8_scaled layout stores fp8 values");
        if (L % FP8_SCALE_GROUP)
            return mla_fail(ctx, MLA_ERR_SHAPE, "cache_desc.kv_lora",
                            "the fp8_scaled layout needs kv_lora %% 128 == 0");
        per_token = mla_sz_add(mla_sz_add(L, L / FP8_SCALE_GROUP * 4), mla_sz_mul(R, 2));
        break;
    case MLA_CACHE_SHUFFLED:
        if (bs % SHUFFLE_TOKENS)
            return mla_fail(ctx, MLA_ERR_INVALID_ARGUMENT, "cache_desc.block_size",
                            "the shuffled layout needs block_size %% 16 == 0, got %lld",
                            (long long)bs);
        if (L % shuffle_k(d->dtype) || R % shuffle_k(d->dtype))
            return mla_fail(ctx, MLA_ERR_SHAPE, "cache_desc.kv_lora",
                            "the shuffled layout needs kv_lora and rope multiples of %lld",
                            (long long)shuffle_k(d->dtype));
        per_token = mla_sz_mul(mla_sz_add(L, R), es); /* NORMAL's bytes, reordered */
        break;
    default:
        per_token = mla_sz_mul(mla_sz_add(L, R), es);
        break;
    }
    if (per_token < 0)
        return mla_fail(ctx, MLA_ERR_OVERFLOW, "cache_desc.kv_lora",
                        "the bytes of a token (kv_lora %lld, rope %lld) overflow", (long long)L,
                        (long long)R);
    if (d->layout != MLA_CACHE_FP8_SCALED && d->dtype != MLA_DTYPE_BF16 &&
        (!(d->k_scale > 0.0f) || !isfinite(d->k_scale)))
        return mla_fail(ctx, MLA_ERR_INVALID_ARGUMENT, "cache_desc.k_scale",
                        "an fp8 cache needs a finite k_scale > 0");
    if (!mla_ck_mul(per_token, bs, bytes))
        return mla_fail(ctx, MLA_ERR_OVERFLOW, "cache_desc.block_size", "block bytes overflow");
    int64_t total;
    if (!mla_ck_mul(*bytes, d->num_blocks, &total))
        return mla_fail(ctx, MLA_ERR_OVERFLOW, "cache_desc.num_blocks", "cache bytes overflow");
    return MLA_OK;
}

/* Slots in the cache: num_blocks * block_size, which fits (the cache's
 * bytes do, and a token takes at least one byte). */
static int64_t capacity(const mla_cache_desc *d) { return d->num_blocks * d->block_size; }

mla_status mla_cache_block_bytes(const mla_cache_desc *desc, int64_t *block_bytes)
{
    if (!block_bytes)
        return MLA_ERR_NULL_POINTER;
    return desc_block_bytes(NULL, desc, block_bytes);
}

/* The cache tensor: U8 [num_blocks, >= block_bytes] with unit inner stride. */
mla_status mla_check_cache(mla_context *ctx, const mla_cache_desc *d, const mla_tensor *cache,
                           int64_t *block_bytes)
{
    MLA_TRY(desc_block_bytes(ctx, d, block_bytes));
    MLA_TRY(mla_check_tensor(ctx, cache, "cache", 2));
    MLA_TRY(mla_check_dtype(ctx, cache, "cache", MLA_DT(MLA_DTYPE_U8)));
    MLA_TRY(mla_check_extent(ctx, cache, "cache", 0, d->num_blocks));
    MLA_TRY(mla_check_extent(ctx, cache, "cache", 1, *block_bytes));
    if (cache->shape[1] > 1 && cache->stride[1] != 1)
        return mla_fail_field(ctx, MLA_ERR_STRIDE, "cache", "stride",
                              "cache bytes of a block must be contiguous");
    return MLA_OK;
}

/* k_nope [T, L] and k_pe [T, R], float. */
mla_status mla_check_cache_k(mla_context *ctx, const mla_cache_desc *d, const mla_tensor *k_nope,
                             const mla_tensor *k_pe)
{
    MLA_TRY(mla_check_tensor(ctx, k_nope, "k_nope", 2));
    MLA_TRY(mla_check_dtype(ctx, k_nope, "k_nope", MLA_DT_FLOAT));
    MLA_TRY(mla_check_extent(ctx, k_nope, "k_nope", 1, d->kv_lora));
    MLA_TRY(mla_check_tensor(ctx, k_pe, "k_pe", 2));
    MLA_TRY(mla_check_dtype(ctx, k_pe, "k_pe", MLA_DT_FLOAT));
    MLA_TRY(mla_check_extent(ctx, k_pe, "k_pe", 0, k_nope->shape[0]));
    return mla_check_extent(ctx, k_pe, "k_pe", 1, d->rope);
}

/* slots [T]: each < capacity; negative = skip; no slot written twice (two
 * writers of one slot would race on a GPU).
 *
 * Checked on the host before anything is queued: that is the API's promise
 * that a refused call writes nothing, and the reason for the synchronous
 * copy of device slots (mla_read_indices: one copy straight into the values
 * for contiguous I64 slots). The host work after it is O(T): a hash set
 * finds repeats (it replaced a sort of the T slots on every call). */
mla_status mla_check_cache_slots(mla_context *ctx, const mla_cache_desc *d,
                                 const mla_tensor *slots, int64_t T)
{
    MLA_TRY(mla_check_tensor(ctx, slots, "slots", 1));
    MLA_TRY(mla_check_dtype(ctx, slots, "slots", MLA_DT(MLA_DTYPE_I32) | MLA_DT(MLA_DTYPE_I64)));
    MLA_TRY(mla_check_extent(ctx, slots, "slots", 0, T));
    return mla_check_slot_values(ctx, slots, T, capacity(d), "slots");
}

mla_status mla_cache_write(mla_context *ctx, const mla_cache_desc *desc, mla_tensor *cache,
                           const mla_tensor *k_nope, const mla_tensor *k_pe,
                           const mla_tensor *slots)
{
    MLA_DUMP_HOOK(ctx, MLA_OP_CACHE_WRITE,
                  mla_dump_cache_write(ctx, desc, cache, k_nope, k_pe, slots));
    MLA_TRY(mla_begin(ctx));
    int64_t block_bytes = 0;
    MLA_TRY(mla_check_cache(ctx, desc, cache, &block_bytes));
    MLA_TRY(mla_check_cache_k(ctx, desc, k_nope, k_pe));
    const int64_t T = k_nope->shape[0];
    MLA_TRY(mla_check_output(ctx, cache, "cache"));
    MLA_TRY(mla_check_disjoint(ctx, cache, "cache", k_nope, "k_nope"));
    MLA_TRY(mla_check_disjoint(ctx, cache, "cache", k_pe, "k_pe"));
    MLA_TRY(mla_check_tensor(ctx, slots, "slots", 1));
    MLA_TRY(mla_check_disjoint(ctx, cache, "cache", slots, "slots"));
    MLA_TRY(mla_check_cache_slots(ctx, desc, slots, T));
    mla_variant v =
        mla_variant_of(MLA_OP_CACHE_WRITE, desc->dtype, desc->dtype, (int32_t)desc->layout, 0,
                       desc->block_size, T, desc->kv_lora + desc->rope);
    mla_variant_tensors(&v, 4, (const mla_tensor *[]){cache, k_nope, k_pe, slots});
    MLA_TRY(mla_check_supported(ctx, &v));
    MLA_SLOT(ctx, cache_write);
    if (T == 0)
        return MLA_OK;
    mla_cache_write_args a = {*desc, block_bytes, *cache, *k_nope, *k_pe, *slots};
    return MLA_DISPATCH(ctx, ctx->ops->cache_write(ctx, &a));
}

mla_status mla_cache_gather(mla_context *ctx, const mla_cache_desc *desc, const mla_tensor *cache,
                            const mla_tensor *block_table, const mla_tensor *seq_lens,
                            mla_tensor *out)
{
    MLA_DUMP_HOOK(ctx, MLA_OP_CACHE_GATHER,
                  mla_dump_cache_gather(ctx, desc, cache, block_table, seq_lens, out));
    MLA_TRY(mla_begin(ctx));
    int64_t block_bytes = 0;
    MLA_TRY(mla_check_cache(ctx, desc, cache, &block_bytes));
    MLA_TRY(mla_check_tensor(ctx, block_table, "block_table", 2));
    MLA_TRY(mla_check_dtype(ctx, block_table, "block_table", MLA_DT(MLA_DTYPE_I32)));
    MLA_TRY(mla_check_tensor(ctx, seq_lens, "seq_lens", 1));
    MLA_TRY(mla_check_dtype(ctx, seq_lens, "seq_lens", MLA_DT(MLA_DTYPE_I32)));
    const int64_t S = block_table->shape[0], max_blocks = block_table->shape[1];
    MLA_TRY(mla_check_extent(ctx, seq_lens, "seq_lens", 0, S));
    /* a table row's capacity */
    const int64_t cap = mla_sz_mul(max_blocks, desc->block_size);
    int64_t *lens = NULL, *table = NULL;
    mla_status st = mla_read_indices(ctx, seq_lens, "seq_lens", &lens);
    if (st == MLA_OK)
        st = mla_check_index_range(ctx, lens, S, 0, mla_sz_past(cap), 0, "seq_lens");
    if (st == MLA_OK)
        st = mla_read_indices(ctx, block_table, "block_table", &table);
    int64_t rows = 0;
    for (int64_t s = 0; st == MLA_OK && s < S; ++s) {
        st = mla_check_index_range(ctx, table + s * max_blocks,
                                   mla_sz_ceil_div(lens[s], desc->block_size), 0, desc->num_blocks,
                                   0, "block_table");
        if (st == MLA_OK && !mla_ck_add(rows, lens[s], &rows))
            st = mla_fail(ctx, MLA_ERR_OVERFLOW, "seq_lens", "the rows to gather overflow");
    }
    free(lens);
    free(table);
    MLA_TRY(st);
    MLA_TRY(mla_check_tensor(ctx, out, "out", 2));
    MLA_TRY(mla_check_dtype(ctx, out, "out", MLA_DT(MLA_DTYPE_F32) | MLA_DT(MLA_DTYPE_BF16)));
    MLA_TRY(mla_check_extent(ctx, out, "out", 0, rows));
    MLA_TRY(mla_check_extent(ctx, out, "out", 1, desc->kv_lora + desc->rope));
    MLA_TRY(mla_check_output(ctx, out, "out"));
    MLA_TRY(mla_check_disjoint(ctx, out, "out", cache, "cache"));
    MLA_TRY(mla_check_disjoint(ctx, out, "out", block_table, "block_table"));
    MLA_TRY(mla_check_disjoint(ctx, out, "out", seq_lens, "seq_lens"));
    mla_variant v =
        mla_variant_of(MLA_OP_CACHE_GATHER, desc->dtype, out->dtype, (int32_t)desc->layout, 0,
                       desc->block_size, rows, desc->kv_lora + desc->rope);
    mla_variant_tensors(&v, 4, (const mla_tensor *[]){cache, block_table, seq_lens, out});
    MLA_TRY(mla_check_supported(ctx, &v));
    MLA_SLOT(ctx, cache_gather);
    if (rows == 0)
        return MLA_OK;
    mla_cache_gather_args a = {*desc, block_bytes, *cache, *block_table, *seq_lens, *out};
    return MLA_DISPATCH(ctx, ctx->ops->cache_gather(ctx, &a));
}

/* q_cat [T, H, L + R]: bf16/f32, or fp8 with a finite q_scale > 0. */
static mla_status check_q_cat(mla_context *ctx, const mla_rope_cache_args *a, int64_t T,
                              int64_t H, int64_t D)
{
    const mla_tensor *q = a->q_cat;
    MLA_TRY(mla_check_tensor(ctx, q, "q_cat", 3));
    MLA_TRY(mla_check_dtype(ctx, q, "q_cat",
                            MLA_DT(MLA_DTYPE_F32) | MLA_DT(MLA_DTYPE_BF16) | MLA_DT_FP8));
    MLA_TRY(mla_check_extent(ctx, q, "q_cat", 0, T));
    MLA_TRY(mla_check_extent(ctx, q, "q_cat", 1, H));
    MLA_TRY(mla_check_extent(ctx, q, "q_cat", 2, D));
    if ((MLA_DT(q->dtype) & MLA_DT_FP8) && (!(a->q_scale > 0.0f) || !isfinite(a->q_scale)))
        return mla_fail(ctx, MLA_ERR_INVALID_ARGUMENT, "q_scale",
                        "an fp8 q_cat needs a finite q_scale > 0");
    return mla_check_output(ctx, q, "q_cat");
}

/* q_nope may be q_cat's own first L dims (the absorb wrote them in place):
 * then the concat of the nope part is a no-op on those elements. */
static int is_q_cat_nope_slice(const mla_tensor *q_nope, const mla_tensor *q_cat)
{
    if (q_nope->data != q_cat->data || q_nope->dtype != q_cat->dtype)
        return 0;
    for (int32_t d = 0; d < 3; ++d)
        if (q_nope->stride[d] != q_cat->stride[d])
            return 0;
    return 1;
}

mla_status mla_fused_rope_concat_cache(mla_context *ctx, const mla_rope_cache_args *a)
{
    MLA_DUMP_HOOK(ctx, MLA_OP_ROPE_CACHE, mla_dump_rope_cache(ctx, a));
    MLA_TRY(mla_begin(ctx));
    if (!a)
        return mla_fail(ctx, MLA_ERR_NULL_POINTER, "args", "args is NULL");
    int64_t block_bytes = 0;
    MLA_TRY(mla_check_cache(ctx, a->cache_desc, a->cache, &block_bytes));
    const mla_cache_desc *d = a->cache_desc;
    MLA_TRY(mla_check_rope_table(ctx, a->cos, a->sin));
    if (2 * a->cos->shape[1] != d->rope)
        return mla_fail_field(ctx, MLA_ERR_SHAPE, "cos", "shape[1]",
                              "the table's rope dim %lld differs from the cache's %lld",
                              (long long)(2 * a->cos->shape[1]), (long long)d->rope);
    if ((int)a->style < 0 || a->style >= MLA_ROPE_STYLE_COUNT)
        return mla_fail(ctx, MLA_ERR_INVALID_ARGUMENT, "style", "unknown rope style %d",
                        (int)a->style);
    MLA_TRY(mla_check_tensor(ctx, a->q_nope, "q_nope", 3));
    MLA_TRY(mla_check_dtype(ctx, a->q_nope, "q_nope", MLA_DT_FLOAT));
    const int64_t T = a->q_nope->shape[0], H = a->q_nope->shape[1];
    MLA_TRY(mla_check_extent(ctx, a->q_nope, "q_nope", 2, d->kv_lora));
    MLA_TRY(mla_check_tensor(ctx, a->q_pe, "q_pe", 3));
    MLA_TRY(mla_check_dtype(ctx, a->q_pe, "q_pe", MLA_DT_FLOAT));
    MLA_TRY(mla_check_extent(ctx, a->q_pe, "q_pe", 0, T));
    MLA_TRY(mla_check_extent(ctx, a->q_pe, "q_pe", 1, H));
    MLA_TRY(mla_check_extent(ctx, a->q_pe, "q_pe", 2, d->rope));
    MLA_TRY(mla_check_cache_k(ctx, d, a->k_nope, a->k_pe));
    const int64_t Tk = a->k_nope->shape[0];
    if (Tk < T)
        return mla_fail_field(ctx, MLA_ERR_SHAPE, "k_nope", "shape[0]",
                              "%lld key tokens for %lld query tokens", (long long)Tk, (long long)T);
    MLA_TRY(check_q_cat(ctx, a, T, H, d->kv_lora + d->rope));
    const int has_kpe_out = a->k_pe_out != NULL;
    if (has_kpe_out) {
        MLA_TRY(mla_check_tensor(ctx, a->k_pe_out, "k_pe_out", 2));
        MLA_TRY(mla_check_dtype(ctx, a->k_pe_out, "k_pe_out", MLA_DT_FLOAT));
        MLA_TRY(mla_check_extent(ctx, a->k_pe_out, "k_pe_out", 0, Tk));
        MLA_TRY(mla_check_extent(ctx, a->k_pe_out, "k_pe_out", 1, d->rope));
        MLA_TRY(mla_check_output(ctx, a->k_pe_out, "k_pe_out"));
    }
    /* Every output apart from every input and from each other. */
    const mla_tensor *outs[3] = {a->cache, a->q_cat, a->k_pe_out};
    const char *onames[3] = {"cache", "q_cat", "k_pe_out"};
    const mla_tensor *ins[8] = {a->cos,    a->sin,  a->q_nope, a->q_pe,
                                a->k_nope, a->k_pe, a->q_pos,  a->k_pos};
    const char *inames[8] = {"cos", "sin", "q_nope", "q_pe", "k_nope", "k_pe", "q_pos", "k_pos"};
    MLA_TRY(mla_check_tensor(ctx, a->q_pos, "q_pos", 1));
    MLA_TRY(mla_check_tensor(ctx, a->k_pos, "k_pos", 1));
    MLA_TRY(mla_check_tensor(ctx, a->slots, "slots", 1));
    for (int o = 0; o < 3; ++o) {
        if (!outs[o])
            continue;
        for (int i = 0; i < 8; ++i) {
            if (o == 1 && i == 2 && is_q_cat_nope_slice(a->q_nope, a->q_cat))
                continue;
            MLA_TRY(mla_check_disjoint(ctx, outs[o], onames[o], ins[i], inames[i]));
        }
        MLA_TRY(mla_check_disjoint(ctx, outs[o], onames[o], a->slots, "slots"));
        for (int p = o + 1; p < 3; ++p)
            if (outs[p])
                MLA_TRY(mla_check_disjoint(ctx, outs[o], onames[o], outs[p], onames[p]));
    }
    MLA_TRY(mla_check_positions(ctx, a->q_pos, "q_pos", T, a->cos->shape[0]));
    MLA_TRY(mla_check_positions(ctx, a->k_pos, "k_pos", Tk, a->cos->shape[0]));
    MLA_TRY(mla_check_cache_slots(ctx, d, a->slots, Tk));
    mla_variant v = mla_variant_of(MLA_OP_ROPE_CACHE, d->dtype, a->q_cat->dtype, (int32_t)d->layout,
                                   (int32_t)a->style, d->block_size, T, d->kv_lora + d->rope);
    mla_variant_tensors(&v, 12,
                        (const mla_tensor *[]){a->cos, a->sin, a->q_nope, a->q_pe, a->q_pos,
                                               a->k_nope, a->k_pe, a->k_pos, a->slots, a->cache,
                                               a->q_cat, a->k_pe_out});
    MLA_TRY(mla_check_supported(ctx, &v));
    MLA_SLOT(ctx, rope_cache);
    if (Tk == 0)
        return MLA_OK;
    mla_rope_cache_op_args r = {*a->cos,    *a->sin,   a->style,  *a->q_nope, *a->q_pe,
                                *a->q_pos,  *a->k_nope, *a->k_pe, *a->k_pos,  *a->slots,
                                *d,         block_bytes, *a->cache, *a->q_cat, a->q_scale,
                                {0}};
    if (has_kpe_out)
        r.k_pe_out = *a->k_pe_out;
    return MLA_DISPATCH(ctx, ctx->ops->rope_cache(ctx, &r));
}
