/* Internal: the attention entry points' validation (core/attention_check.c). */
#ifndef MLA_CORE_ATTENTION_CHECK_H
#define MLA_CORE_ATTENTION_CHECK_H

#include "core/backend.h"

/* What the shapes of a call say. */
typedef struct mla_attn_shape {
    int64_t S, T, max_blocks, Tk, block_bytes;
} mla_attn_shape;

/* The descriptor fields both attention forms check last: o f32 or bf16, a
 * finite softmax scale > 0, paged 0 or 1. */
mla_status mla_attn_check_common_desc(mla_context *ctx, mla_dtype out_dtype, float softmax_scale,
                                      int32_t paged);
/* Descriptor, cache, every tensor's dtype / shape / strides, aliasing of the
 * outputs (o, lse; the cache with rope; the workspace when run) with each
 * other and every input. Fills *sh. */
mla_status mla_attn_check_args(mla_context *ctx, const mla_attention_desc *d,
                               const mla_attention_args *a, mla_attn_shape *sh, int run);
/* The batch tensors both attention forms take: context_lens (S <= max_seqs),
 * the block table (paged) or none (contiguous: S <= the cache's blocks),
 * cu_q_lens [S + 1] or next_n >= 1 rows each (q, named qname, has S next_n
 * rows). Fills sh->S and sh->max_blocks. */
mla_status mla_attn_check_batch(mla_context *ctx, const mla_cache_desc *cache, int32_t paged,
                                int32_t next_n, const mla_tensor *q, const char *qname,
                                const mla_tensor *block_table, const mla_tensor *context_lens,
                                const mla_tensor *cu_q_lens, int64_t max_seqs, mla_attn_shape *sh);
/* Every index value the kernels read (the plan: device tensors are read
 * back). len[S] (work lengths), *max_q (largest n_s) and cu[S + 1] (row
 * starts) are filled when not NULL. */
mla_status mla_attn_check_values(mla_context *ctx, const mla_attention_desc *d,
                                 const mla_attention_args *a, const mla_attn_shape *sh,
                                 int64_t *len, int64_t *max_q, int32_t *cu);
/* The same ranges on host memory, read in place: no copy, no allocation
 * (the run on a host context). */
mla_status mla_attn_recheck_host(mla_context *ctx, const mla_attention_desc *d,
                                 const mla_attention_args *a, const mla_attn_shape *sh);
/* The attention variant: in = q dtype, out = o dtype, layout = cache layout,
 * rule = cache element dtype, group = block_size, rows = T, cols = heads,
 * the tensors of a, splits and next_n. */
mla_variant mla_attn_variant(const mla_attention_desc *d, const mla_attention_args *a, int64_t T);
/* supports() and the slots for the attention and, with rope inside
 * attention, for the convert, rope and cache_write the run composes. */
mla_status mla_attn_check_supported(mla_context *ctx, const mla_attention_desc *d,
                                    const mla_attention_args *a, const mla_attn_shape *sh);

#endif
