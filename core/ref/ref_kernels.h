/* Reference kernels. They take validated argument records (core/backend.h)
 * and fail only when a scratch buffer cannot be allocated; the CPU backend
 * starts from the reference table and may call them directly for variants it
 * does not specialise. Semantics: mla.h, mla_prepare.h, mla_mxfp4.h,
 * mla_indexer.h and MLA.md sections 2-7. */
#ifndef MLA_CORE_REF_REF_KERNELS_H
#define MLA_CORE_REF_REF_KERNELS_H

#include "core/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

mla_status mla_ref_convert(mla_context *ctx, const mla_convert_args *a);
mla_status mla_ref_mxfp4_quant(mla_context *ctx, const mla_mxfp4_quant_args *a);
mla_status mla_ref_mxfp4_dequant(mla_context *ctx, const mla_mxfp4_dequant_args *a);
mla_status mla_ref_fp8_group_quant(mla_context *ctx, const mla_fp8_group_quant_args *a);
mla_status mla_ref_fp8_group_dequant(mla_context *ctx, const mla_fp8_group_dequant_args *a);

/* Prepare path (one file each under core/ref/). */
mla_status mla_ref_rmsnorm(mla_context *ctx, const mla_rmsnorm_args *a);
mla_status mla_ref_qk_rmsnorm(mla_context *ctx, const mla_qk_rmsnorm_args *a);
mla_status mla_ref_rope(mla_context *ctx, const mla_rope_args *a);
mla_status mla_ref_linear(mla_context *ctx, const mla_linear_args *a);
mla_status mla_ref_batched_gemm(mla_context *ctx, const mla_batched_gemm_args *a);
mla_status mla_ref_cache_write(mla_context *ctx, const mla_cache_write_args *a);
mla_status mla_ref_cache_gather(mla_context *ctx, const mla_cache_gather_args *a);
mla_status mla_ref_rope_cache(mla_context *ctx, const mla_rope_cache_op_args *a);

/* MXFP4 GEMM path (mxfp4_gemm.c, flatten_quant.c). */
mla_status mla_ref_gemm_a16wfp4(mla_context *ctx, const mla_mxfp4_gemm_args *a);
mla_status mla_ref_gemm_a4w4(mla_context *ctx, const mla_mxfp4_gemm_args *a);
mla_status mla_ref_flatten_mxfp4_quant(mla_context *ctx, const mla_flatten_quant_args *a);
mla_status mla_ref_flatten_fp8_quant(mla_context *ctx, const mla_flatten_quant_args *a);

/* DSA indexer (MLA.md section 6; layernorm.c, hadamard.c, indexer_cache.c,
 * indexer_logits.c, topk.c, indexer_weights.c). */
mla_status mla_ref_layernorm(mla_context *ctx, const mla_layernorm_args *a);
mla_status mla_ref_hadamard(mla_context *ctx, const mla_hadamard_args *a);
mla_status mla_ref_indexer_k_cache_write(mla_context *ctx, const mla_indexer_cache_args *a);
mla_status mla_ref_indexer_k_gather(mla_context *ctx, const mla_indexer_cache_args *a);
mla_status mla_ref_indexer_logits(mla_context *ctx, const mla_indexer_logits_args *a);
mla_status mla_ref_topk(mla_context *ctx, const mla_topk_args *a);
mla_status mla_ref_indexer_head_weights(mla_context *ctx, const mla_head_weights_args *a);

/* The one RoPE of the reference (rope.c), used by mla_ref_rope and
 * mla_ref_rope_cache: out[0, R) = the fp32 rotation by position pos of the
 * first R values of a row of x, value j at offset base + j * step, style's
 * pairing (MLA.md section 3). Reads the whole row before returning, so a caller
 * may write out back over x (in place). */
void mla_ref_rope_row(const mla_tensor *x, int64_t base, int64_t step, const mla_tensor *cos,
                      const mla_tensor *sin, int64_t pos, mla_rope_style style, int64_t R,
                      float *out);

/* The one cache writer of the reference (cache.c), used by mla_ref_cache_write
 * and mla_ref_rope_cache: stores the fp32 row [k_nope (L) | k_pe (R)] at
 * slot >= 0 of the cache, in desc's layout and element type (MLA.md section 4). */
void mla_ref_cache_write_slot(const mla_cache_desc *desc, const mla_tensor *cache, int64_t slot,
                              const float *row);

/* The cache reader of the reference (cache.c), used by the gather and the
 * attention: row[0, L + R) = token t of block `block`, dequantized exactly
 * in float64 (bf16 as is, fp8 code * k_scale, FP8_SCALED code * its group's
 * scale and the rope part bf16; MLA.md section 4). */
void mla_ref_cache_read_row(const mla_cache_desc *desc, const mla_tensor *cache, int64_t block,
                            int64_t t, double *row);

/* Attention core (attention.c; include/mla/mla_attention.h, MLA.md section 2
 * step 7). The argument record is core/attention_plan.h's. */
mla_status mla_ref_attention(mla_context *ctx, const struct mla_attention_op_args *a);
/* Expanded attention (attention_expanded.c; core/attention_expanded.h). */
struct mla_attention_expanded_op_args;
mla_status mla_ref_attention_expanded(mla_context *ctx,
                                      const struct mla_attention_expanded_op_args *a);

#ifdef __cplusplus
}
#endif

#endif
