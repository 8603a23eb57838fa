/* Internal: the DSA indexer's argument checks (core/api_indexer.c), shared
 * by the single calls and the planned search (core/indexer_plan.c). */
#ifndef MLA_CORE_INDEXER_INTERNAL_H
#define MLA_CORE_INDEXER_INTERNAL_H

#include "core/backend.h"

/* Resolves AUTO and checks the descriptor; *bytes is one block's size. */
mla_status mla_idx_check_desc(mla_context *ctx, const mla_indexer_cache_desc *in,
                              mla_indexer_cache_desc *out, int64_t *bytes);
/* block_table [S, max_blocks] I32. */
mla_status mla_idx_check_table_shape(mla_context *ctx, const mla_tensor *table, int64_t S);
/* Everything of mla_indexer_logits but the index values (shapes, dtypes,
 * strides, aliasing, support); fills *a, gate 0. */
mla_status mla_idx_logits_args(mla_context *ctx, const mla_indexer_cache_desc *desc,
                               const mla_tensor *cache, const mla_tensor *q, const mla_tensor *w,
                               const mla_tensor *block_table, const mla_tensor *context_lens,
                               int32_t next_n, mla_tensor *logits, mla_indexer_logits_args *a);
/* The same for mla_topk. */
mla_status mla_idx_topk_args(mla_context *ctx, const mla_tensor *logits, const mla_tensor *lengths,
                             int64_t k, mla_tensor *indices, mla_topk_args *a);

#endif
