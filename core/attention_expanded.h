/* Internal: the expanded attention (include/mla/mla_attention.h,
 * mla_attention_expanded) as its backend slot reads it, the workspace
 * carve-up, and the decompression the fast backends share. */
#ifndef MLA_CORE_ATTENTION_EXPANDED_H
#define MLA_CORE_ATTENTION_EXPANDED_H

#include "core/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Byte offsets into the workspace (256-byte aligned; -1: absent). */
typedef struct mla_expanded_layout {
    int64_t rows;  /* the gathered latent rows [Nk, L + R] (rows_dtype) */
    int64_t kv;    /* [K_nope | V] [Nk, H (nope + v)] (q_dtype) */
    int64_t meta;  /* I32: cu [S + 1], key0 [S + 1], ctx [S], table [S] (contiguous mode) */
    int64_t tiles; /* CPU: per-thread tiles, threads x mla_cpu_expanded_tile_bytes */
    int64_t bytes;
} mla_expanded_layout;

/* The gathered rows' dtype: the cache's bf16 values exactly, else fp32
 * (an fp8 code times its scale). */
mla_dtype mla_expanded_rows_dtype(const mla_cache_desc *cache);

/* The carve-up for S sequences of Nk keys in all; MLA_ERR_OVERFLOW when the
 * bytes do not fit in 64 bits. */
mla_status mla_expanded_layout_of(const mla_context *ctx, const mla_attention_expanded_desc *d,
                                  int64_t S, int64_t Nk, mla_expanded_layout *out);

/* Validated: kernels trust it. Host arrays and their copies in the
 * workspace's meta region (context memory) hold the same values. */
typedef struct mla_attention_expanded_op_args {
    mla_attention_expanded_desc desc;
    int64_t S, T, Nk, block_bytes, max_blocks;
    const int32_t *cu_host;   /* [S + 1]: first row of each sequence */
    const int32_t *key0_host; /* [S + 1]: first key of each sequence in the gathered rows */
    const int32_t *ctx_host;  /* [S]: c_s */
    mla_tensor q_nope, q_pe;  /* [T, H, nope], [T, H, R] */
    mla_tensor cache;         /* U8 [num_blocks, block_bytes] */
    mla_tensor block_table;   /* [S, max_blocks] I32 (contiguous mode: the meta table) */
    mla_tensor context_lens;  /* [S] I32 */
    mla_tensor kv_b, kv_b_scale; /* [H (nope + v), L]; scale data NULL for bf16 */
    mla_tensor o, lse;        /* [T, H, v]; [T, H] F32 (data NULL when absent) */
    uint8_t *workspace;       /* context memory */
    mla_expanded_layout ws;
} mla_attention_expanded_op_args;

/* The fast backends' first step: the sequences' latent rows gathered into
 * the workspace (the cache_gather slot) and decompressed through kv_b_proj
 * (the linear slot), [K_nope | V] = c @ kv_b_proj^T in fp32 rounded to the
 * kv dtype. Views of the results: */
typedef struct mla_expanded_kv {
    mla_tensor rows; /* [Nk, L + R] */
    mla_tensor kv;   /* [Nk, H (nope + v)] */
} mla_expanded_kv;
/* Its first half alone (the CPU backend decompresses itself): the rows
 * gathered, both views set, kv not written. */
mla_status mla_expanded_gather(mla_context *ctx, const mla_attention_expanded_op_args *a,
                               mla_expanded_kv *out);
mla_status mla_expanded_decompress(mla_context *ctx, const mla_attention_expanded_op_args *a,
                                   mla_expanded_kv *out);

#ifdef __cplusplus
}
#endif

#endif
