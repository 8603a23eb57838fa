/* libmla: the whole MLA attention layer (MLA.md section 2, steps 1-9) for a
 * batch of sequences, prefill chunks and decode steps alike: prepare, the
 * DeepSeek-V3.2 indexer when the config has one, attention over the paged
 * latent cache, W_vc and o_proj. RoPE happens once, at the plan's site.
 * Included by mla/mla.h; conventions are those of mla.h. */
#ifndef MLA_MLA_LAYER_H
#define MLA_MLA_LAYER_H

#ifndef MLA_MLA_H
#error "include mla/mla.h"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* The step's sequences, as the attention call reads them
 * (include/mla/mla_attention.h): S sequences, T new tokens in all. */
typedef struct mla_layer_batch {
    const mla_tensor *positions;    /* [T] I32/I64: each new token's position */
    const mla_tensor *slots;        /* [T] I32/I64: its cache slot (negative: not written) */
    const mla_tensor *block_table;  /* [S, max_blocks] I32 */
    const mla_tensor *context_lens; /* [S] I32, this step's tokens included */
    const mla_tensor *cu_q_lens;    /* [S + 1] I32, or NULL: next_n tokens per sequence */
    int32_t next_n;                 /* used when cu_q_lens is NULL */
} mla_layer_batch;

/* The attention's form (MLA.md section 2, "The expanded form"). */
typedef enum mla_layer_form {
    MLA_LAYER_FORM_AUTO = 0,     /* the plan's rule (mla_layer_plan_form) */
    MLA_LAYER_FORM_ABSORBED = 1, /* q absorbed through W_kc, attention over latent rows, W_vc */
    MLA_LAYER_FORM_EXPANDED = 2  /* K_nope / V decompressed per head, o straight to o_proj */
} mla_layer_form;

typedef struct mla_layer_options {
    int32_t dense;                      /* 1: dense attention even when the config has an indexer */
    int32_t num_splits;                 /* attention split-KV cap per sequence; 0: 8 */
    mla_dtype act;                      /* activations x, y and the intermediates: BF16 or F32 */
    mla_indexer_options indexer;        /* V3.2 only */
    mla_indexer_cache_desc index_cache; /* V3.2 only: its K cache, same block table and slots */
    mla_layer_form form;                /* AUTO by default */
    /* The most keys (a step's context lengths summed) the workspace holds
     * decompressed for the expanded form, at most S * max_context; 0: T
     * (fresh prompts; chunks after cached tokens need more). */
    int64_t expanded_keys;
} mla_layer_options;

/* Defaults: the indexer runs when the config has one (NeoX RoPE, no
 * Hadamard, e4m3fn, ue8m0 K scales, layout chosen by block size), bf16
 * activations, splits capped at 8, the AUTO form. */
MLA_API void mla_layer_options_default(const mla_model_config *cfg, const mla_cache_desc *cache,
                                       mla_layer_options *out);

typedef struct mla_layer_plan mla_layer_plan;

/* Workspace bytes for a step of up to T tokens over S sequences whose
 * contexts are at most max_context long, on ctx (one caller buffer holds
 * every intermediate and the attention's scratch, whose size depends on
 * the backend; with room for the expanded form's decompressed keys,
 * opt.expanded_keys of them, when the plan may choose it: form EXPANDED,
 * or AUTO with T >= mla_layer_expanded_min_rows). Like every entry point
 * it records a refusal on ctx (mla_context_error_param): MLA_ERR_SHAPE
 * names "T", "S" or "max_context" when one is negative; MLA_ERR_OVERFLOW
 * names "T" (more than 2^24 tokens, or bytes past int64) or "max_context"
 * (past 2^31); MLA_ERR_DTYPE names "opt.act"; MLA_ERR_INVALID_ARGUMENT
 * "opt.form" (not one of the three) or "opt.expanded_keys" (negative). */
MLA_API mla_status mla_layer_workspace_bytes(mla_context *ctx, const mla_plan *plan,
                                             const mla_layer_options *opt, int64_t T, int64_t S,
                                             int64_t max_context, int64_t *bytes);

/* The buffers a planned step runs on. cos, sin: the model's RoPE table;
 * cache: U8 [num_blocks, block_bytes] latent cache; index_cache: the V3.2
 * indexer K cache (U8 [num_blocks, block_bytes]) when the layer is sparse,
 * else NULL; workspace: U8 [>= mla_layer_workspace_bytes], contiguous, in
 * context memory. The plan keeps the descriptors: the forward runs on
 * these exact buffers. */
typedef struct mla_layer_buffers {
    const mla_tensor *cos, *sin;
    mla_tensor *cache;
    mla_tensor *index_cache;
    mla_tensor *workspace;
} mla_layer_buffers;

/* Plans one step: validates the batch's index data (positions within the
 * RoPE table, slots within the cache (and the index cache) and none twice,
 * the block table's ids in use within both caches, context lengths,
 * cu_q_lens) and builds the attention plan over the buffers; the forward
 * on device memory relies on this validation (as mla_attention_run does),
 * on host memory it checks the values again. Nothing is written until
 * every check passed (then the workspace's top-k rows). Allocates (the
 * attention plan's buffers); may synchronize. max_context bounds every
 * context length (the sparse logits rows are that long, and at least the
 * config's index_topk). */
MLA_API mla_status mla_layer_plan_create(mla_context *ctx, const mla_plan *plan,
                                         const mla_cache_desc *cache, const mla_layer_options *opt,
                                         const mla_layer_batch *batch, int64_t max_context,
                                         const mla_layer_buffers *buffers, mla_layer_plan **out);
/* Re-plans for the next step with the same T and S (a decode loop): new
 * positions, slots, lengths, validated as by mla_layer_plan_create; nothing
 * is allocated. A refused update leaves the plan and the workspace as they
 * were. */
MLA_API mla_status mla_layer_plan_update(mla_context *ctx, mla_layer_plan *lp,
                                         const mla_layer_batch *batch);
MLA_API void mla_layer_plan_destroy(mla_layer_plan *lp);
/* 1 when the forward runs the indexer and sparse attention. */
MLA_API int mla_layer_plan_sparse(const mla_layer_plan *lp);

/* The rows per sequence from which the expanded form does fewer operations
 * than the absorbed one: decompressing a key costs L (nope + v) MACs per
 * head, and each (row, key) pair then saves (2L + R) - (nope + R + v); a
 * causal chunk after no cached keys pairs each row with half the keys, so
 * the rule is n >= 2 L (nope + v) / (2L - nope - v) (DeepSeek: 342; -1 when
 * the expanded form never saves, 2L <= nope + v). */
MLA_API int64_t mla_layer_expanded_min_rows(const mla_model_config *cfg);

/* The form the plan chose (ABSORBED or EXPANDED). AUTO picks EXPANDED for a
 * dense step whose sequences with new tokens bring, on average, at least
 * mla_layer_expanded_min_rows of them (prefill chunks; decode and MTP steps
 * stay absorbed), when the plan rotates before the attention (RoPE site not
 * ATTENTION), q_cat is bf16 or f32 (the expanded form's q dtype), and the
 * step's keys fit the workspace's reservation; the forward then still runs
 * the absorbed form for a kv_b_proj other than bf16 (the layer's fp8 and
 * MXFP4 kv_b_proj forms are the absorbed GEMMs'). A forced EXPANDED plan
 * refuses what AUTO would skip (MLA_ERR_UNSUPPORTED naming "opt.form"; keys
 * past the reservation: MLA_ERR_SHAPE naming "buffers.workspace"; at the
 * forward, a kv_b_proj not bf16: MLA_ERR_UNSUPPORTED naming
 * "weights.kv_b_proj"). */
MLA_API mla_layer_form mla_layer_plan_form(const mla_layer_plan *lp);

/* The rule alone, before any batch (what `mla plan` prints): the form opt
 * gives a step of T new tokens over `active` sequences that have some, on
 * plan, when its keys fit the reservation and kv_b_proj is bf16. A forced
 * EXPANDED the plan cannot run answers ABSORBED here (the layer plan
 * refuses it). */
MLA_API mla_layer_form mla_layer_form_for(const mla_plan *plan, const mla_layer_options *opt,
                                          int64_t T, int64_t active);
/* Sparse plans: a view of the top-k indices the last forward attended to,
 * [T, index_topk] I32 (logical positions, -1 padded) in the planned
 * workspace, valid until the next forward. MLA_ERR_INVALID_ARGUMENT for a
 * dense plan. */
MLA_API mla_status mla_layer_plan_topk(const mla_layer_plan *lp, mla_tensor *out);

/* One layer for the planned step: x [T, hidden] (opt.act) -> y [T, hidden]
 * (BF16 or F32), writing every new token's latent row into the planned
 * cache (and its indexer K into the index cache when sparse). weights: the
 * loader's struct (include/mla/mla_weights.h), each projection in its own
 * format: BF16 and FP8_BLOCK through mla_linear; MXFP4 through the a16wfp4
 * GEMM (activations quantized by the production rule), with kv_b_proj
 * MXFP4 the absorb on w_kc_fp4 and W_vc on w_vc_fp4, and o_proj MXFP4 fed
 * by the fused flatten quant reading W_vc's [T, H, v] output in place, then
 * the a4w4 GEMM. kv_b_proj is BF16 or MXFP4 (fp8 128 x 128 block scales do
 * not factor into the per-head views); the indexer's weights BF16 or
 * FP8_BLOCK. Allocates nothing; the intermediates live in the planned
 * workspace. Sparse steps re-plan the attention for the fresh top-k
 * indices (a synchronization). Every check of every stage runs before the
 * first stage writes: a refused forward leaves y, the caches and the
 * workspace as they were. y overlapping x (or any buffer the layer writes
 * overlapping one it reads: weights, batch tensors, cos / sin) is
 * MLA_ERR_ALIAS. */
MLA_API mla_status mla_layer_forward(mla_context *ctx, const mla_layer_plan *lp,
                                     const mla_layer_weights_ex *weights, const mla_tensor *x,
                                     mla_tensor *y);

#ifdef __cplusplus
}
#endif

#endif /* MLA_MLA_LAYER_H */
