/* libmla: the MXFP4 GEMM path (MLA.md sections 5 and 7, seed 003): batched
 * a16wfp4 / a4w4 GEMMs writing through any output strides, and the fused
 * flatten + quant that hands the W_vc output to o_proj without a copy.
 * Included by mla/mla.h; conventions are those of mla.h. */
#ifndef MLA_MLA_MXFP4_H
#define MLA_MLA_MXFP4_H

#ifndef MLA_MLA_H
#error "include mla/mla.h"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* An MXFP4 operand: codes [B, R, K/2] FP4X2 (element 2i in the low nibble)
 * and e8m0 scales for 32-element blocks along K, per batch in one of the
 * three layouts: ROW_MAJOR [B, R, K/32] (stride[2] == 1), TRANSPOSED
 * [B, R, K/32] (stride[1] == 1), PRESHUFFLED_GFX950 [B, bytes] with bytes =
 * mla_scale_preshuffled_bytes(R, K/32) (stride[1] == 1). */
typedef struct mla_mxfp4_operand {
    mla_tensor codes;
    mla_tensor scales;
    mla_scale_layout layout;
} mla_mxfp4_operand;

/* y[b] = A(x[b]) @ deq(w[b])^T with fp32 accumulation, one rounding to y:
 * x [B, M, K] (BF16 or F32), w codes [B, N, K/2], y [B, M, N] (BF16 or F32)
 * through its strides (a [M, B, N] buffer passed as a transposed view).
 * A is the MXFP4 quantization of x along K by `rule` followed by dequant
 * when prequant is nonzero (aiter's only mode), else the identity. */
MLA_API mla_status mla_batched_gemm_a16wfp4(mla_context *ctx, const mla_tensor *x,
                                            const mla_mxfp4_operand *w, int32_t prequant,
                                            mla_mxfp4_rule rule, mla_tensor *y);

/* The same with activations already quantized: x codes [B, M, K/2] and
 * scales; y = deq(x) @ deq(w)^T. */
MLA_API mla_status mla_batched_gemm_a4w4(mla_context *ctx, const mla_mxfp4_operand *x,
                                         const mla_mxfp4_operand *w, mla_tensor *y);

/* [T, H, v] (F32, BF16 or F16, any strides) -> MXFP4 of the flattened rows
 * [T, H*v]: codes [T, H*v/2] FP4X2, scales [T, H*v/32] e8m0 row-major or
 * transposed (per the strides), in one pass. H*v % 32 == 0. */
MLA_API mla_status mla_fused_flatten_mxfp4_quant(mla_context *ctx, const mla_tensor *x,
                                                 mla_tensor *codes, mla_tensor *scales,
                                                 mla_mxfp4_rule rule);

/* [T, H, v] (F32, BF16 or F16, any strides) -> fp8 of [T, H*v] in groups
 * of 128 (MLA_FP8_SCALE_AITER):
 * codes [T, H*v] FP8_E4M3FN or FP8_E4M3FNUZ, scales F32 [T, H*v/128] with
 * any strides (row-major or transposed), in one pass. H*v % 128 == 0. */
MLA_API mla_status mla_fused_flatten_fp8_group_quant(mla_context *ctx, const mla_tensor *x,
                                                     mla_tensor *codes, mla_tensor *scales);

#ifdef __cplusplus
}
#endif

#endif /* MLA_MLA_MXFP4_H */
