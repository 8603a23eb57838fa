/* Internal: the layer plan (include/mla/mla_layer.h) and its workspace
 * carve-up, shared by core/layer.c, core/layer_plan.c and the tests. */
#ifndef MLA_CORE_LAYER_INTERNAL_H
#define MLA_CORE_LAYER_INTERNAL_H

#include "core/backend.h"

/* Byte offsets into the layer workspace, each 256-byte aligned. */
typedef struct mla_layer_ws {
    int64_t prep;     /* mla_prepare's own workspace */
    int64_t q_cat;    /* [T, H, L + R] plan's q dtype */
    int64_t o_lat;    /* [T, H, L] act: the attention output */
    int64_t o;        /* [T, H, v] act: W_vc's output, flattened in place for o_proj */
    int64_t oq, oq_scales; /* MXFP4 o_proj: o quantized, [T, H*v/2] FP4X2, [T, H*v/32] e8m0 */
    int sparse;       /* the indexer regions below exist */
    int64_t idx_ws;   /* mla_indexer_prepare's workspace */
    int64_t idx_q;    /* [T, Hi, 128] fp8 */
    int64_t idx_w;    /* [T, Hi] F32 */
    int64_t idx_k;    /* [T, 128] act */
    int64_t logits;   /* [T, max_context] F32 */
    int64_t topk;     /* [T, topk] I32 */
    int64_t topk_len; /* [T] I32 */
    int64_t attn;     /* the attention call's scratch */
    int64_t attn_cap; /* its size */
    int64_t exp;      /* the expanded form's workspace (-1: none reserved) */
    int64_t exp_cap, exp_keys; /* its size, and the keys it holds */
    int64_t bytes;
} mla_layer_ws;

struct mla_layer_plan {
    const mla_plan *plan;
    mla_cache_desc cache_desc;
    mla_layer_options opt;
    mla_layer_ws ws;
    int64_t T, S, max_context;
    mla_tensor positions, slots, block_table, context_lens, cu_q;
    int has_cu_q;
    int32_t next_n;
    int32_t *cu_host, *ctx_host; /* [S + 1] and [S], read at planning */
    mla_tensor cos, sin, cache, index_cache, workspace;
    int has_index_cache;
    mla_attention_plan *attn;
    mla_layer_form form; /* ABSORBED or EXPANDED, chosen at planning */
};

/* The workspace carve-up for T tokens (tname: the parameter T came from);
 * a refusal is recorded on ctx. */
mla_status mla_layer_layout(mla_context *ctx, const mla_plan *plan, const mla_layer_options *opt,
                            int64_t T, int64_t S, int64_t max_context, const char *tname,
                            mla_layer_ws *w);
/* Columns of the sparse layer's logits rows: max_context, at least the
 * top-k's k (mla_topk takes k <= the row; the lengths bound what is read). */
int64_t mla_layer_logits_cols(const mla_model_config *c, int64_t max_context);
/* The expanded form's descriptor for a plan (q_cat's dtype as q's; 0
 * when q_cat is not bf16 or f32: no expanded form). */
int mla_layer_expanded_desc(const mla_plan *plan, mla_dtype out_dtype,
                            mla_attention_expanded_desc *d);
/* The attention (re)plan over the planned buffers (core/layer.c). Create
 * (update 0) puts RoPE inside the attention call when rope_inside (the
 * plan's site is ATTENTION; the RoPE-once tests' negative control asks for
 * it at another site too, rotating twice); an update and the forward keep
 * what create chose. */
mla_status mla_layer_plan_attention(mla_context *ctx, mla_layer_plan *lp, int update,
                                    int rope_inside);

#endif
