/* Internal: the prepare as the layer runs it (core/layer.c). The layer
 * needs what the public mla_prepare keeps in its workspace: the normed
 * q_lat (the indexer's input) and the new tokens' k_nope / unrotated k_pe
 * (the attention call's input when RoPE happens inside attention). */
#ifndef MLA_CORE_PREPARE_INTERNAL_H
#define MLA_CORE_PREPARE_INTERNAL_H

#include "core/backend.h"

/* How the absorb (and W_vc) consume kv_b_proj beyond bf16: the loader's
 * MXFP4 W_kc operand, or one fp8 scale for the whole tensor (the loader's
 * FP8_TENSOR form). */
typedef struct mla_kv_b_form {
    const mla_mxfp4_operand *w_kc_fp4; /* kv_b_proj FP4X2 */
    float tensor_scale;                /* kv_b_proj FP8_E4M3FN: > 0 */
} mla_kv_b_form;

typedef struct mla_prepare_views {
    mla_tensor q_lat;  /* [T, q_lora] normed (q_lora > 0); [T, H*(nope+R)] q otherwise */
    mla_tensor k_nope; /* [T, L] normed */
    mla_tensor k_pe;   /* [T, R] unrotated */
    mla_tensor q;      /* [T, H, nope + R] act: q before the absorb, q_pe unrotated */
} mla_prepare_views;

/* mla_prepare without the context's error reset, for any plan site; at the
 * ATTENTION site q_cat's rope part is q_pe unrotated and the cache is not
 * written. kv_b: NULL for a bf16 kv_b_proj (the absorb takes a view of
 * it), else its MXFP4 W_kc operand (the a16wfp4 GEMM) or its per-tensor
 * fp8 scale (the fp8 view with that scale). views (may be NULL) receive the workspace views above.
 */
mla_status mla_prepare_run(mla_context *ctx, const mla_plan *plan, const mla_layer_weights *wt,
                           const mla_kv_b_form *kv_b, const mla_tensor *x,
                           const mla_tensor *positions, const mla_tensor *slots,
                           const mla_tensor *cos, const mla_tensor *sin,
                           const mla_cache_desc *cache_desc, mla_tensor *cache, mla_tensor *q_cat,
                           mla_tensor *workspace, mla_prepare_views *views);

/* core/project.c: projections in any stored form of the loader (bf16, fp8
 * 128x128 blocks, MXFP4 [out, in/2] codes + [out, in/32] e8m0 scales). */
int64_t mla_weight_in(const mla_weight *w); /* the logical input width */
mla_status mla_check_projection(mla_context *ctx, const mla_weight *w, const char *name,
                                int64_t rows, int64_t cols);
/* A projection mla_linear takes (the indexer's): bf16 or fp8 blocks. */
mla_status mla_check_linear_weight(mla_context *ctx, const mla_weight *w, const char *name,
                                   int64_t rows, int64_t cols);
/* The tensors of w the prepare (and, with_o, the layer) reads, named
 * "weights.<projection>.w" / ".scale", for the composites' aliasing checks:
 * q_a_proj and q_a_layernorm only with q_lora, scales only beside fp8 or
 * MXFP4 weights. Returns the count, at most MLA_WEIGHT_TENSORS. */
#define MLA_WEIGHT_TENSORS 12
int mla_weight_tensors(const mla_layer_weights *w, int q_lora, int with_o, const mla_tensor **t,
                       const char **names);
/* y [T, N] = x [T, K] @ W^T (MXFP4: the a16wfp4 GEMM, x quantized first). */
mla_status mla_project(mla_context *ctx, const mla_tensor *x, const mla_weight *w, mla_tensor *y);

/* The k_nope / k_pe views mla_prepare_run will use in a workspace at base
 * (for planning the attention call before the prepare has run). The plan,
 * T and act must be ones mla_prepare_workspace_bytes accepts. */
void mla_prepare_key_views(const mla_plan *plan, int64_t T, mla_dtype act, void *workspace,
                           mla_memory mem, mla_tensor *k_nope, mla_tensor *k_pe);

#endif
