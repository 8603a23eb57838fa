/* The per-op dumps (core/dump_ops.c, core/dump_calls.c): the same
 * signatures as the public entry points, which hand a dumped call here. */
#ifndef MLA_CORE_DUMP_OPS_H
#define MLA_CORE_DUMP_OPS_H

#include "core/dump.h"

mla_status mla_dump_convert(mla_context *ctx, const mla_tensor *x, mla_tensor *y,
                            mla_saturation mode);
mla_status mla_dump_mxfp4_quant(mla_context *ctx, const mla_tensor *x, mla_tensor *codes,
                                mla_tensor *scales, mla_scale_layout layout, mla_mxfp4_rule rule);
mla_status mla_dump_mxfp4_dequant(mla_context *ctx, const mla_tensor *codes,
                                  const mla_tensor *scales, mla_scale_layout layout, mla_tensor *y);
mla_status mla_dump_fp8_group_quant(mla_context *ctx, const mla_tensor *x, mla_tensor *codes,
                                    mla_tensor *scales, int64_t group, mla_fp8_scale_rule rule);
mla_status mla_dump_fp8_group_dequant(mla_context *ctx, const mla_tensor *codes,
                                      const mla_tensor *scales, int64_t group, mla_tensor *y);
mla_status mla_dump_rmsnorm(mla_context *ctx, const mla_tensor *x, const mla_tensor *w, float eps,
                            mla_tensor *y);
mla_status mla_dump_qk_rmsnorm(mla_context *ctx, const mla_tensor *q, const mla_tensor *q_w,
                               float q_eps, const mla_tensor *kv, const mla_tensor *kv_w,
                               float kv_eps, mla_tensor *q_out, mla_tensor *q_scales,
                               mla_tensor *kv_out);
mla_status mla_dump_rope(mla_context *ctx, const mla_tensor *cos, const mla_tensor *sin,
                         const mla_tensor *positions, const mla_tensor *x, mla_tensor *y,
                         mla_rope_style style);
mla_status mla_dump_linear(mla_context *ctx, const mla_tensor *x, const mla_tensor *w,
                           const mla_tensor *w_scale, mla_tensor *y);
mla_status mla_dump_batched_gemm(mla_context *ctx, const mla_tensor *x, const mla_tensor *w,
                                 float w_scale, mla_tensor *y);
mla_status mla_dump_cache_write(mla_context *ctx, const mla_cache_desc *desc, mla_tensor *cache,
                                const mla_tensor *k_nope, const mla_tensor *k_pe,
                                const mla_tensor *slots);
mla_status mla_dump_cache_gather(mla_context *ctx, const mla_cache_desc *desc,
                                 const mla_tensor *cache, const mla_tensor *block_table,
                                 const mla_tensor *seq_lens, mla_tensor *out);
mla_status mla_dump_gemm_a16wfp4(mla_context *ctx, const mla_tensor *x, const mla_mxfp4_operand *w,
                                 int32_t prequant, mla_mxfp4_rule rule, mla_tensor *y);
mla_status mla_dump_gemm_a4w4(mla_context *ctx, const mla_mxfp4_operand *x,
                              const mla_mxfp4_operand *w, mla_tensor *y);
mla_status mla_dump_flatten_mxfp4_quant(mla_context *ctx, const mla_tensor *x, mla_tensor *codes,
                                        mla_tensor *scales, mla_mxfp4_rule rule);
mla_status mla_dump_flatten_fp8_quant(mla_context *ctx, const mla_tensor *x, mla_tensor *codes,
                                      mla_tensor *scales);
mla_status mla_dump_layernorm(mla_context *ctx, const mla_tensor *x, const mla_tensor *w,
                              const mla_tensor *b, float eps, mla_tensor *y);
mla_status mla_dump_hadamard(mla_context *ctx, const mla_tensor *x, mla_tensor *y);
mla_status mla_dump_indexer_k_cache_write(mla_context *ctx, const mla_indexer_cache_desc *desc,
                                          mla_tensor *cache, const mla_tensor *k,
                                          const mla_tensor *slots);
mla_status mla_dump_indexer_k_gather(mla_context *ctx, const mla_indexer_cache_desc *desc,
                                     const mla_tensor *cache, const mla_tensor *block_table,
                                     const mla_tensor *cu_seq_lens, mla_tensor *k_fp8,
                                     mla_tensor *k_scale);
mla_status mla_dump_indexer_logits(mla_context *ctx, const mla_indexer_cache_desc *desc,
                                   const mla_tensor *cache, const mla_tensor *q,
                                   const mla_tensor *w, const mla_tensor *block_table,
                                   const mla_tensor *context_lens, int32_t next_n,
                                   mla_tensor *logits);
mla_status mla_dump_topk(mla_context *ctx, const mla_tensor *logits, const mla_tensor *lengths,
                         int64_t k, mla_tensor *indices);
mla_status mla_dump_indexer_head_weights(mla_context *ctx, const mla_tensor *w,
                                         const mla_tensor *s_q, mla_tensor *w_out);
/* The indexer cache descriptor's parameters (dtype, block_size, layout, head_dim, ue8m0). */
void mla_dump_index_desc(mla_dump *d, const mla_indexer_cache_desc *c);

/* core/dump_calls.c: the calls that plan or compose. */
mla_status mla_dump_rope_cache(mla_context *ctx, const mla_rope_cache_args *args);
mla_status mla_dump_attention(mla_context *ctx, const mla_attention_plan *plan,
                              const mla_attention_args *args);
mla_status mla_dump_indexer_search(mla_context *ctx, const mla_indexer_plan *plan,
                                   const mla_tensor *cache, const mla_tensor *q,
                                   const mla_tensor *w, mla_tensor *logits, int64_t k,
                                   mla_tensor *indices);
mla_status mla_dump_prepare(mla_context *ctx, const mla_plan *plan,
                            const mla_layer_weights *weights, const mla_tensor *x,
                            const mla_tensor *positions, const mla_tensor *slots,
                            const mla_tensor *cos, const mla_tensor *sin,
                            const mla_cache_desc *cache_desc, mla_tensor *cache, mla_tensor *q_cat,
                            mla_tensor *workspace);
/* core/indexer_plan.c: the plan's copies of its block table [B, max_blocks]
 * and context lengths [B] (I32, context memory), for the search's dump. */
void mla_indexer_plan_index_views(const mla_indexer_plan *plan, mla_indexer_cache_desc *desc,
                                  int32_t *next_n, mla_tensor *table, mla_tensor *lens);
mla_status mla_dump_layer(mla_context *ctx, const mla_layer_plan *lp,
                          const mla_layer_weights_ex *weights, const mla_tensor *x, mla_tensor *y);
mla_status mla_dump_indexer_prepare(mla_context *ctx, const mla_model_config *cfg,
                                    const mla_indexer_weights *weights,
                                    const mla_indexer_options *options,
                                    const mla_tensor *q_lat_normed, const mla_tensor *x,
                                    const mla_tensor *positions, const mla_tensor *cos,
                                    const mla_tensor *sin, mla_tensor *q_fp8, mla_tensor *w_out,
                                    mla_tensor *k, mla_tensor *workspace);

#endif
