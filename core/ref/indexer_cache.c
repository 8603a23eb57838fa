/* Reference DSA indexer K cache writer and gather (MLA.md section 6). Offsets
 * come from core/ref/indexer_layout.h. Per token, over the whole head (D
 * values of k, loaded exactly as fp32):
 *
 *     scale = max(amax, 1e-4) / div           fp32, div 448 (e4m3fn) | 224 (e4m3fnuz)
 *             2^ceil(log2(that)) when ue8m0   exactly from the quotient's bits
 *     value = sat_fp8(fl(k / scale))
 *
 * which is mla_fp8_group_quant with group = D and rule MLA_FP8_SCALE_DIV or
 * MLA_FP8_SCALE_UE8M0 (the golden indexer_k_* vectors): the writer calls that
 * reference quantizer on each row rather than rounding a second time here.
 * The gather copies the bytes back: k_fp8 rows hold the raw codes, k_scale
 * the stored fp32 scales. */
#include <stdlib.h>

#include "core/checked.h"
#include "core/ref/indexer_layout.h"
#include "core/ref/ref_kernels.h"
#include "core/ref/tensor_access.h"

_Static_assert(MLA_IL_NORMAL == (int)MLA_INDEXER_NORMAL &&
                   MLA_IL_SHUFFLE == (int)MLA_INDEXER_SHUFFLE,
               "indexer_layout.h repeats the values of mla_indexer_layout");

static uint8_t *block_at(const mla_tensor *cache, int64_t block)
{
    return (uint8_t *)cache->data + block * cache->stride[0];
}

/* Row t of the 2-D tensor x as a [1, D] tensor. */
static mla_tensor row_view(const mla_tensor *x, int64_t t)
{
    mla_tensor r = *x;
    r.data = (char *)x->data + t * x->stride[0] * (int64_t)mla_dtype_size(x->dtype);
    r.shape[0] = 1;
    return r;
}

mla_status mla_ref_indexer_k_cache_write(mla_context *ctx, const mla_indexer_cache_args *a)
{
    const mla_indexer_cache_desc *d = &a->desc;
    const int64_t D = d->head_dim, bs = d->block_size, T = a->k.shape[0];
    uint8_t *codes;
    MLA_TRY(mla_alloc_array(ctx, (void **)&codes, D, 1, 1, "k"));
    const int64_t shape[2] = {1, D}, one[2] = {1, 1};
    float scale;
    mla_tensor tc, ts;
    mla_tensor_init(&tc, codes, d->dtype, MLA_MEMORY_HOST, 2, shape);
    mla_tensor_init(&ts, &scale, MLA_DTYPE_F32, MLA_MEMORY_HOST, 2, one);
    const mla_fp8_scale_rule rule = d->ue8m0 ? MLA_FP8_SCALE_UE8M0 : MLA_FP8_SCALE_DIV;
    for (int64_t t = 0; t < T; ++t) {
        const int64_t slot = mla_ref_load_index(&a->slots, t * a->slots.stride[0]);
        if (slot < 0) /* "do not write" */
            continue;
        mla_fp8_group_quant_args q = {row_view(&a->k, t), tc, ts, D, rule, 1, D};
        mla_ref_fp8_group_quant(ctx, &q);
        uint8_t *blk = block_at(&a->cache, slot / bs);
        const int64_t tok = slot % bs;
        for (int64_t i = 0; i < D; ++i)
            blk[mla_il_value_byte((int32_t)d->layout, tok, i, D)] = codes[i];
        mla_il_put_scale(blk + mla_il_scale_byte(tok, bs, D), scale);
    }
    free(codes);
    return MLA_OK;
}

/* Row n of the outputs = token j of sequence s, for s in order and j in
 * [0, cu[s+1] - cu[s]): block block_table[s, j / block_size], token j %
 * block_size, bytes copied as they are. */
mla_status mla_ref_indexer_k_gather(mla_context *ctx, const mla_indexer_cache_args *a)
{
    (void)ctx;
    const mla_indexer_cache_desc *d = &a->desc;
    const int64_t D = d->head_dim, bs = d->block_size, S = a->cu_seq_lens.shape[0] - 1;
    const mla_tensor *cu = &a->cu_seq_lens;
    for (int64_t s = 0; s < S; ++s) {
        const int64_t first = mla_ref_load_index(cu, s * cu->stride[0]);
        const int64_t len = mla_ref_load_index(cu, (s + 1) * cu->stride[0]) - first;
        for (int64_t j = 0; j < len; ++j) {
            const int64_t n = first + j, tok = j % bs;
            const int64_t block =
                mla_ref_load_index(&a->block_table, mla_ref_offset2(&a->block_table, s, j / bs));
            const uint8_t *blk = block_at(&a->cache, block);
            for (int64_t i = 0; i < D; ++i)
                mla_ref_store_u8(&a->k_fp8, mla_ref_offset2(&a->k_fp8, n, i),
                                 blk[mla_il_value_byte((int32_t)d->layout, tok, i, D)]);
            ((float *)a->k_scale.data)[n * a->k_scale.stride[0]] =
                mla_il_get_scale(blk + mla_il_scale_byte(tok, bs, D));
        }
    }
    return MLA_OK;
}
