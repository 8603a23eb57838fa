/* libmla: the DeepSeek-V3.2 sparse (DSA) indexer, MLA.md section 6:
 * LayerNorm and Hadamard for its projections, fp8 K quant-and-cache in the
 * NORMAL and SHUFFLE layouts, the gather back, paged MQA logits and top-k.
 * Included by mla/mla.h; conventions are those of mla.h. */
#ifndef MLA_MLA_INDEXER_H
#define MLA_MLA_INDEXER_H

#ifndef MLA_MLA_H
#error "include mla/mla.h"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* --------------------------------------------------------- building blocks */

/* y = (x - mean) * rsqrt(var + eps) * w + b over each row, fp32 math, one
 * rounding to y's dtype. x, y [T, D] (F32, BF16, F16); w, b [D] F32. */
MLA_API mla_status mla_layernorm(mla_context *ctx, const mla_tensor *x, const mla_tensor *w,
                                 const mla_tensor *b, float eps, mla_tensor *y);

/* y = x @ H_D / sqrt(D) over the last dim (D a power of two, <= 1024), the
 * Sylvester Hadamard matrix; x, y [..., D] (F32, BF16), y may be x. fp32
 * butterflies in a fixed order, one rounding to y's dtype. */
MLA_API mla_status mla_hadamard(mla_context *ctx, const mla_tensor *x, mla_tensor *y);

/* ----------------------------------------------------------- the K cache */

typedef enum mla_indexer_layout {
    MLA_INDEXER_LAYOUT_AUTO = 0, /* mla_indexer_layout_for(block_size) */
    MLA_INDEXER_NORMAL = 1,      /* value (t, d) at t * 128 + d */
    MLA_INDEXER_SHUFFLE = 2,     /* 16 x 16 tiles; block_size % 16 == 0 */
    MLA_INDEXER_LAYOUT_COUNT
} mla_indexer_layout;

MLA_API const char *mla_indexer_layout_name(mla_indexer_layout layout);

/* The one place the layout is chosen (seed 002): NORMAL when block_size ==
 * 1, SHUFFLE otherwise. The writer, the gather and the logits kernel all
 * resolve AUTO through it. */
MLA_API mla_indexer_layout mla_indexer_layout_for(int64_t block_size);

typedef struct mla_indexer_cache_desc {
    int64_t num_blocks;
    int64_t block_size;        /* 1, or a multiple of 16 for SHUFFLE */
    int64_t head_dim;          /* 128 */
    mla_dtype dtype;           /* FP8_E4M3FN (divisor 448) or FP8_E4M3FNUZ (divisor 224) */
    mla_indexer_layout layout; /* AUTO, or forced by the caller */
    int32_t ue8m0;             /* scales rounded up to a power of two (vLLM's default) */
} mla_indexer_cache_desc;

/* Block bytes: [block_size * head_dim fp8 values][block_size fp32 scales]. */
MLA_API mla_status mla_indexer_cache_block_bytes(const mla_indexer_cache_desc *desc,
                                                 int64_t *block_bytes);

/* Per token over the whole head: scale = max(amax, 1e-4) / div (power of two
 * when ue8m0), value sat_fp8(k / scale). k [T, head_dim] (F32, BF16, F16);
 * slots [T] I32/I64, negative = skip; cache U8 [num_blocks, block_bytes]. */
MLA_API mla_status mla_indexer_k_cache_write(mla_context *ctx, const mla_indexer_cache_desc *desc,
                                             mla_tensor *cache, const mla_tensor *k,
                                             const mla_tensor *slots);

/* The exact inverse for S listed sequences: cu_seq_lens [S + 1] I32 (rows of
 * sequence s are cu[s] .. cu[s+1]-1), block_table [S, max_blocks] I32 ->
 * k_fp8 [cu[S], head_dim] (the cache's fp8 dtype) and k_scale [cu[S]] F32.
 * cu_seq_lens starting elsewhere than 0, decreasing, or giving a sequence
 * more rows than its table row holds is MLA_ERR_OUT_OF_RANGE naming
 * "cu_seq_lens"; a block id in use outside the cache names "block_table". */
MLA_API mla_status mla_indexer_k_gather(mla_context *ctx, const mla_indexer_cache_desc *desc,
                                        const mla_tensor *cache, const mla_tensor *block_table,
                                        const mla_tensor *cu_seq_lens, mla_tensor *k_fp8,
                                        mla_tensor *k_scale);

/* -------------------------------------------------------- logits, top-k */

/* Paged MQA logits for B sequences with next_n query tokens each (row r =
 * b * next_n + j): logits[r, n] = k_scale[n] * sum_h w[r, h] *
 * relu(q[r, h] . k[n]) for key positions n < ctx_len[b] - next_n + j + 1
 * (causal among the next_n), -inf at and beyond. q [B*next_n, Hi, 128] fp8
 * (the cache's dtype), w [B*next_n, Hi] F32, block_table [B, max_blocks] I32,
 * context_lens [B] I32 (>= next_n), logits [B*next_n, max_len] F32 with
 * max_len >= every ctx_len. Both cache layouts are read in place. */
MLA_API mla_status mla_indexer_logits(mla_context *ctx, const mla_indexer_cache_desc *desc,
                                      const mla_tensor *cache, const mla_tensor *q,
                                      const mla_tensor *w, const mla_tensor *block_table,
                                      const mla_tensor *context_lens, int32_t next_n,
                                      mla_tensor *logits);

/* Per row r: the indices of the min(k, lengths[r]) largest of
 * logits[r, :lengths[r]], in ascending index order (the set alone is
 * MLA.md's; the order is this library's: no sort on a device, and the sparse
 * attention walks the cache in page order), ties to the lower index (+0 and
 * -0 tie), NaN below every number (-inf included), padded with -1 to k.
 * logits [R, N] F32, lengths [R] I32 (<= N), indices [R, k] I32. The HIP
 * backend takes k <= 2048 (the model's; more is MLA_ERR_UNSUPPORTED). */
MLA_API mla_status mla_topk(mla_context *ctx, const mla_tensor *logits, const mla_tensor *lengths,
                            int64_t k, mla_tensor *indices);

/* ------------------------------------------- the planned search (decode) */

/* A decode step's index data for the search, validated once: every layer's
 * indexer of the step reads the same block table and context lengths, so
 * mla_indexer_logits' and mla_topk's per-call index checks (and the host
 * round trip each costs) are paid here instead. */
typedef struct mla_indexer_plan mla_indexer_plan;

/* Checks next_n <= context_lens[b] <= block_table.shape[1] * block_size
 * and every block id in use (the first ceil(len / block_size) of row b) in
 * [0, num_blocks), then keeps copies of both tensors and of each row's
 * causal bound (ctx_len[b] - next_n + j + 1, the top-k length) in context
 * memory: later changes to the caller's tensors do not reach the search.
 * block_table [B, max_blocks] I32, context_lens [B] I32 (either memory).
 * May synchronize (device tensors are read back). */
MLA_API mla_status mla_indexer_plan_create(mla_context *ctx, const mla_indexer_cache_desc *desc,
                                           const mla_tensor *block_table,
                                           const mla_tensor *context_lens, int32_t next_n,
                                           mla_indexer_plan **out);
/* New index data of the same shapes into the same buffers (a captured graph
 * of mla_indexer_search stays valid); ordered after the searches already
 * queued. A refused update leaves the plan as it was. */
MLA_API mla_status mla_indexer_plan_update(mla_context *ctx, mla_indexer_plan *plan,
                                           const mla_tensor *block_table,
                                           const mla_tensor *context_lens);
/* Frees the plan's buffers (in its context's memory): call it before
 * destroying that context. NULL is a no-op. */
MLA_API void mla_indexer_plan_destroy(mla_indexer_plan *plan);
/* The longest context of the plan: the least logits.shape[1] a search takes. */
MLA_API int64_t mla_indexer_plan_max_len(const mla_indexer_plan *plan);

/* mla_indexer_logits over the plan's sequences into logits [B*next_n, N]
 * (N >= the plan's longest context), then mla_topk of each row's causal
 * bound into indices [B*next_n, k]: the same kernels and the same results,
 * with the index checks the plan made. Checks only what the host holds
 * (shapes, dtypes, strides, aliasing) and never waits for the device; once
 * a first search of the shape has run (the HIP top-k sizes its scratch),
 * it allocates nothing either, so it may be captured in a HIP/CUDA graph
 * (tests/test_indexer_graph.c replays one across a plan update). */
MLA_API mla_status mla_indexer_search(mla_context *ctx, const mla_indexer_plan *plan,
                                      const mla_tensor *cache, const mla_tensor *q,
                                      const mla_tensor *w, mla_tensor *logits, int64_t k,
                                      mla_tensor *indices);

/* The indexer's head weights (MLA.md section 6): w_out = w * s_q * 128^-0.5 *
 * Hi^-0.5 in fp32, in that order. w [T, Hi] (BF16, F32), s_q [T, Hi] F32
 * (q's per-(token, head) fp8 scales), w_out [T, Hi] F32. */
MLA_API mla_status mla_indexer_head_weights(mla_context *ctx, const mla_tensor *w,
                                            const mla_tensor *s_q, mla_tensor *w_out);

/* ----------------------------------------------------- the projections */

typedef struct mla_indexer_weights {
    mla_weight wq_b;          /* [Hi * 128, q_lora] */
    mla_weight wk;            /* [128, hidden] */
    mla_tensor k_norm_weight; /* [128] F32 */
    mla_tensor k_norm_bias;   /* [128] F32 */
    mla_weight weights_proj;  /* [Hi, hidden] */
} mla_indexer_weights;

typedef struct mla_indexer_options {
    mla_rope_style style; /* NeoX by default (DeepSeek's later reference, vLLM) */
    int32_t hadamard;     /* rotate q and k by H_128 / sqrt(128) (DeepSeek's reference) */
    mla_dtype fp8;        /* q's fp8 flavour: FP8_E4M3FN (448) or FP8_E4M3FNUZ (224) */
} mla_indexer_options;

/* MLA.md section 6, per token: q = q_lat_normed @ W_qb_idx^T -> [T, Hi, 128];
 * k = LayerNorm(x @ W_k^T) (eps 1e-6); w = x @ W_w^T (rounded to bf16);
 * RoPE on the first R dims of q and k (cos/sin of the model, R =
 * 2 * cos.shape[1]); optional Hadamard; q to fp8 per (token, head) with a
 * power-of-two scale s_q; w_out = w * s_q * 128^-0.5 * Hi^-0.5 in fp32 in
 * that order. Outputs: q_fp8 [T, Hi, 128], w_out [T, Hi] F32, k [T, 128]
 * (F32 or BF16, ready for mla_indexer_k_cache_write). workspace U8, at least
 * mla_indexer_workspace_bytes (MLA_ERR_SHAPE for T < 0, MLA_ERR_OVERFLOW for
 * T > 2^40 or bytes past int64), its bytes contiguous. Every argument, the
 * positions and the aliasing (no output or the workspace overlapping an
 * input or another output: MLA_ERR_ALIAS) are checked, and every step's own
 * checks made, before the first step writes: a refused call writes nothing.
 * With options.hadamard the head dim must be a power of two <= 1024. */
MLA_API mla_status mla_indexer_workspace_bytes(const mla_model_config *cfg, int64_t T,
                                               int64_t *bytes);
MLA_API mla_status mla_indexer_prepare(mla_context *ctx, const mla_model_config *cfg,
                                       const mla_indexer_weights *weights,
                                       const mla_indexer_options *options,
                                       const mla_tensor *q_lat_normed, const mla_tensor *x,
                                       const mla_tensor *positions, const mla_tensor *cos,
                                       const mla_tensor *sin, mla_tensor *q_fp8,
                                       mla_tensor *w_out, mla_tensor *k, mla_tensor *workspace);

#ifdef __cplusplus
}
#endif

#endif /* MLA_MLA_INDEXER_H */
