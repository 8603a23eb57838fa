/* libmla: the MLA attention core (MLA.md section 2, step 7): absorbed MQA of
 * q_cat over the paged latent cache, dense or sparse (DSA top-k), decode with
 * next_n >= 1 and chunked prefill through one call, split-KV with a combine,
 * and RoPE inside attention as the plan's third RoPE site.
 * Included by mla/mla.h; conventions are those of mla.h. */
#ifndef MLA_MLA_ATTENTION_H
#define MLA_MLA_ATTENTION_H

#ifndef MLA_MLA_H
#error "include mla/mla.h"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Semantics (every backend, every path):
 *
 * S sequences. Sequence s owns query rows cu_q[s] .. cu_q[s+1]-1 of q
 * (n_s = cu_q[s+1] - cu_q[s] rows; decode has n_s = next_n, prefill the new
 * tokens) and context_lens[s] = c_s keys, its new tokens included (they are
 * in the cache already). Query row j of s sits at position p = c_s - n_s + j
 * and attends to the keys at positions 0..p (causal among the new tokens).
 * c_s == 0 is a padding sequence: its rows get o = 0 and lse = -inf. A
 * sequence with 0 < c_s < n_s is refused ("next_n larger than the context").
 *
 * Key k at position t of s is the cached row [k_nope | k_pe] (L + R values,
 * dequantized per the cache layout), read at slot block_table[s][t / bs] * bs
 * + t % bs; values are its first L dims (MQA: one KV head for all H).
 *   score(t) = softmax_scale * sum_d q[row, h, d] * k[t, d]   (d < L + R)
 *   o[row, h, :] = sum_t e^(score(t) - m) * k[t, :L] / Z
 *   Z = sum_t e^(score(t) - m) (+ e^(sink[h] - m) with sinks)
 *   lse[row, h] = m + ln(Z)     (natural log; -inf when no key is visible)
 * fp8 q is q_code * q_scale. A row with no visible key (sparse with every
 * index -1 or masked) gets o = 0, lse = -inf.
 *
 * Sparse (topk > 0): row r attends only to the logical positions
 * topk_indices[r, i] (-1: none); an index above the row's position p is
 * masked (the causal rule); each listed index counts once per listing.
 *
 * Contiguous (non-paged) mode: paged = 0 and block_table NULL; sequence s
 * owns cache block s, so block_size is the per-sequence capacity. */

typedef struct mla_attention_desc {
    int64_t heads;         /* H, 1..128 */
    mla_cache_desc cache;  /* layout, element type, geometry, L, R, k_scale */
    int32_t paged;         /* 1: block_table [S, max_blocks]; 0: contiguous */
    mla_dtype q_dtype;     /* q_cat: BF16, F32, FP8_E4M3FN or FP8_E4M3FNUZ */
    float q_scale;         /* fp8 q: value = code * q_scale (1 otherwise) */
    mla_dtype out_dtype;   /* o: F32 or BF16 */
    float softmax_scale;   /* mla_softmax_scale(cfg) for a model */
    int64_t topk;          /* 0: dense; > 0: sparse with [T, topk] indices */
    int32_t next_n;        /* query rows per sequence when cu_q_lens is NULL */
    int32_t num_splits;    /* split-KV: 0 the plan decides, 1 off, n (<= 256): at most n each */
} mla_attention_desc;

/* Defaults for a model: H, L, R, softmax scale from cfg; the given cache;
 * paged, bf16 q, f32 out, dense, next_n 1, splits decided by the plan. */
MLA_API mla_status mla_attention_desc_default(const mla_model_config *cfg,
                                              const mla_cache_desc *cache,
                                              mla_attention_desc *out);

/* RoPE inside attention (MLA_ROPE_SITE_ATTENTION): q's rope part arrives
 * unrotated; the call rotates it (into the workspace, q is not modified), and
 * rotates the new tokens' k_pe and writes [k_nope | rotated k_pe] to the cache
 * at slots, before attending. Same arithmetic as mla_rope and
 * mla_fused_rope_concat_cache, so the cache bytes are identical to the other
 * two sites. q must then be BF16 or F32. */
typedef struct mla_attention_rope {
    const mla_tensor *cos, *sin; /* [P, R/2] F32 */
    mla_rope_style style;
    const mla_tensor *q_pos;     /* [T] I32/I64 */
    const mla_tensor *k_nope;    /* [Tk, L] new tokens (F32, BF16, F16) */
    const mla_tensor *k_pe;      /* [Tk, R] unrotated */
    const mla_tensor *k_pos;     /* [Tk] */
    const mla_tensor *slots;     /* [Tk], negative = not written */
} mla_attention_rope;

typedef struct mla_attention_args {
    const mla_tensor *q;            /* q_cat [T, H, L + R] (any strides) */
    mla_tensor *cache;              /* U8 [num_blocks, block_bytes]; written only with rope */
    const mla_tensor *block_table;  /* [S, max_blocks] I32; NULL when not paged */
    const mla_tensor *context_lens; /* [S] I32 */
    const mla_tensor *cu_q_lens;    /* [S + 1] I32, or NULL: next_n rows each (T = S * next_n) */
    const mla_tensor *topk_indices; /* sparse: [T, topk] I32 logical positions; NULL dense */
    const mla_tensor *sinks;        /* [H] F32 per-head sink logits, or NULL */
    const mla_attention_rope *rope; /* NULL unless RoPE happens inside attention */
    mla_tensor *o;                  /* [T, H, L] (any strides) */
    mla_tensor *lse;                /* [T, H] F32, or NULL */
    mla_tensor *workspace;          /* U8, context memory, 256-byte aligned, >= the plan's bytes */
} mla_attention_args;

typedef struct mla_attention_plan mla_attention_plan;

/* Planning, separate from the run: validates every index value the run will
 * read (context lengths against the block table's capacity, n_s <= c_s,
 * block ids < num_blocks for the blocks in use, top-k indices < c_s, RoPE
 * positions and slots), then builds the split-KV schedule from the actual
 * lengths into buffers the plan owns in context memory. May synchronize
 * (index tensors in device memory are read back). The tensors' data may be
 * uninitialised only for q, o, lse and workspace. */
MLA_API mla_status mla_attention_plan_create(mla_context *ctx, const mla_attention_desc *desc,
                                             const mla_attention_args *args,
                                             mla_attention_plan **out);
/* Re-plans for new index data of the same shapes into the same buffers (so a
 * captured graph of mla_attention_run stays valid). The split capacity
 * (and so the workspace) is the one fixed at create; a refused update
 * leaves the plan as it was. */
MLA_API mla_status mla_attention_plan_update(mla_context *ctx, mla_attention_plan *plan,
                                             const mla_attention_args *args);
/* Frees the plan's buffers (in its context's memory): call it before
 * destroying that context. NULL is a no-op. */
MLA_API void mla_attention_plan_destroy(mla_attention_plan *plan);
/* Workspace the run needs (partial outputs of the splits, rotated q). */
MLA_API int64_t mla_attention_plan_workspace_bytes(const mla_attention_plan *plan);
/* Largest split count of any sequence (1: no split). */
MLA_API int32_t mla_attention_plan_splits(const mla_attention_plan *plan);

/* The run: checks shapes, dtypes and strides against the plan, then attends
 * (partial passes and the combine). Allocates nothing and never waits for the
 * device, so it can be captured in a HIP/CUDA graph. It trusts the index
 * values validated by the plan; if they change without mla_attention_plan_
 * update the kernels still never read or write outside the cache, q, o, lse
 * and workspace, but the result is unspecified. */
MLA_API mla_status mla_attention_run(mla_context *ctx, const mla_attention_plan *plan,
                                     const mla_attention_args *args);

/* ----------------------------------------------- the expanded form */

/* Expanded attention (MLA.md section 2, "The expanded form"): prefill
 * chunks in the form serving engines use. Every key of a sequence is
 * decompressed per head from its cached latent row c (the first L values):
 * [K_nope | V][t, h] = c_t @ kv_b_proj^T viewed [H, nope + v]; k_pe (the
 * cached rope part, rotated once when written) is broadcast to every head;
 * then causal attention with nope + R dim scores and v dim values:
 *   score(t) = softmax_scale * ([q_nope | q_pe][r, h] . [K_nope[t, h] | k_pe_t])
 *   o[r, h, :] = sum_t e^(score(t) - m) V[t, h, :] / Z,  lse[r, h] = m + ln Z
 * over keys t = 0 .. p of the row's sequence (row j of s at p = c_s - n_s +
 * j, as in the absorbed attention above). q_nope is not absorbed: o is in
 * v dims ([T, H, v], what o_proj reads), the same quantity as the absorbed
 * form's o_lat @ W_vc. Dense only; no sinks. */
typedef struct mla_attention_expanded_desc {
    int64_t heads;        /* H, 1..128 */
    int64_t nope, v;      /* qk_nope_head_dim, v_head_dim (DeepSeek: 128, 128) */
    mla_cache_desc cache; /* layout, element type, geometry, L, R, k_scale */
    int32_t paged;        /* 1: block_table [S, max_blocks]; 0: contiguous (block s) */
    mla_dtype q_dtype;    /* q_nope and q_pe: BF16 or F32; also the decompressed K/V's dtype */
    mla_dtype out_dtype;  /* o: F32 or BF16 */
    float softmax_scale;  /* mla_softmax_scale(cfg): the absorbed form's */
    int32_t next_n;       /* query rows per sequence when cu_q_lens is NULL */
} mla_attention_expanded_desc;

/* Defaults for a model: H, nope, v, L, R and the softmax scale from cfg; the
 * given cache; paged, bf16 q, f32 out, next_n 1. */
MLA_API mla_status mla_attention_expanded_desc_default(const mla_model_config *cfg,
                                                       const mla_cache_desc *cache,
                                                       mla_attention_expanded_desc *out);

typedef struct mla_attention_expanded_args {
    const mla_tensor *q_nope;       /* [T, H, nope] (any strides) */
    const mla_tensor *q_pe;         /* [T, H, R] rotated (any strides) */
    const mla_tensor *cache;        /* U8 [num_blocks, block_bytes], read only */
    const mla_tensor *block_table;  /* [S, max_blocks] I32; NULL when not paged */
    const mla_tensor *context_lens; /* [S] I32, the new tokens included (in the cache already) */
    const mla_tensor *cu_q_lens;    /* [S + 1] I32, or NULL: next_n rows each */
    const mla_weight *kv_b_proj;    /* [H (nope + v), L]: BF16, or FP8_E4M3FN with
                                     * [ceil(N/128), ceil(L/128)] F32 block scales */
    mla_tensor *o;                  /* [T, H, v] (any strides) */
    mla_tensor *lse;                /* [T, H] F32, or NULL */
    mla_tensor *workspace;          /* U8, context memory, 256-byte aligned, contiguous */
} mla_attention_expanded_args;

/* Workspace bytes of a call over S sequences whose context lengths sum to
 * at most total_keys, on ctx (the decompressed keys and values, the latent
 * rows they come from, per-thread tiles). MLA_ERR_SHAPE names "S" or
 * "total_keys" when negative; MLA_ERR_OVERFLOW "total_keys" when the bytes
 * pass int64 or the keys 2^31. */
MLA_API mla_status mla_attention_expanded_workspace_bytes(mla_context *ctx,
                                                          const mla_attention_expanded_desc *desc,
                                                          int64_t S, int64_t total_keys,
                                                          int64_t *bytes);

/* The call: checks the descriptor, every tensor's dtype, shape and strides,
 * aliasing (o, lse and the workspace apart from each other and every
 * input), then every index value (context lengths against the block
 * table's capacity, n_s <= c_s, the block ids in use), the workspace's size
 * for the actual lengths, and supports(): a refused call writes nothing. It
 * reads the lengths back (a synchronization on device memory) to size the
 * decompression, so it is not capturable in a graph. */
MLA_API mla_status mla_attention_expanded(mla_context *ctx, const mla_attention_expanded_desc *desc,
                                          const mla_attention_expanded_args *args);

#ifdef __cplusplus
}
#endif

#endif /* MLA_MLA_ATTENTION_H */
