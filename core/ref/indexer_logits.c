/* Reference paged MQA logits of the DSA indexer (MLA.md section 6). Row r =
 * b * next_n + j (query token j of sequence b), key position n:
 *
 *     logits[r, n] = k_scale[n] * sum_h w[r, h] * relu(q[r, h, :] . k[n, :])
 *                    for n < ctx_len[b] - next_n + j + 1 (causal among the next_n)
 *     logits[r, n] = -inf for the rest of the row
 *
 * q and k are the values of their fp8 codes. Key n is read in place: block
 * block_table[b, n / block_size], token n % block_size, in the cache's layout
 * (resolved, never AUTO; offsets from core/ref/indexer_layout.h).
 *
 * float64: each q . k is exact (every fp8 product is a multiple of 2^-20 below
 * 448^2 < 2^18, so sums of up to 2^15 of them fit in 53 bits; head_dim is 128),
 * then the head sum and the k_scale product round in double, and the result
 * once to fp32. relu passes a NaN (torch.relu does). */
#include "core/ref/indexer_layout.h"
#include "core/ref/ref_kernels.h"
#include "core/ref/tensor_access.h"

/* q[r, h, :] . k of token tok in blk, the values of the fp8 codes. */
static double dot(const mla_indexer_logits_args *a, int64_t r, int64_t h, const uint8_t *blk,
                  int64_t tok)
{
    const int64_t D = a->desc.head_dim;
    double acc = 0.0;
    for (int64_t i = 0; i < D; ++i) {
        const uint8_t code = blk[mla_il_value_byte((int32_t)a->desc.layout, tok, i, D)];
        acc += mla_ref_load_f64(&a->q, mla_ref_offset3(&a->q, r, h, i)) *
               (double)mla_fp8_to_f32(code, a->desc.dtype);
    }
    return acc;
}

/* max(v, 0) with a NaN passed through. */
static double relu(double v)
{
    return v < 0.0 ? 0.0 : v;
}

/* logits[r, n] for a key position n inside the row's bound, in double. */
static double logit(const mla_indexer_logits_args *a, int64_t r, int64_t b, int64_t n)
{
    const int64_t bs = a->desc.block_size, Hi = a->q.shape[1];
    const int64_t block =
        mla_ref_load_index(&a->block_table, mla_ref_offset2(&a->block_table, b, n / bs));
    const uint8_t *blk = (const uint8_t *)a->cache.data + block * a->cache.stride[0];
    double sum = 0.0;
    for (int64_t h = 0; h < Hi; ++h)
        sum +=
            mla_ref_load_f64(&a->w, mla_ref_offset2(&a->w, r, h)) * relu(dot(a, r, h, blk, n % bs));
    const double k_scale =
        (double)mla_il_get_scale(blk + mla_il_scale_byte(n % bs, bs, a->desc.head_dim));
    return k_scale * sum;
}

mla_status mla_ref_indexer_logits(mla_context *ctx, const mla_indexer_logits_args *a)
{
    (void)ctx;
    const int64_t B = a->context_lens.shape[0], next_n = a->next_n, N = a->logits.shape[1];
    for (int64_t b = 0; b < B; ++b) {
        const int64_t ctx_len = mla_ref_load_index(&a->context_lens, b * a->context_lens.stride[0]);
        for (int64_t j = 0; j < next_n; ++j) {
            const int64_t r = b * next_n + j, bound = ctx_len - next_n + j + 1;
            float *row = (float *)a->logits.data + r * a->logits.stride[0];
            for (int64_t n = 0; n < N; ++n)
                row[n * a->logits.stride[1]] = n < bound ? (float)logit(a, r, b, n) : -INFINITY;
        }
    }
    return MLA_OK;
}
