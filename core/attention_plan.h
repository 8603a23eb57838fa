/* Internal: the attention plan (include/mla/mla_attention.h) as the kernels
 * read it, and the op argument record of the attention slot. */
#ifndef MLA_CORE_ATTENTION_PLAN_H
#define MLA_CORE_ATTENTION_PLAN_H

#include "core/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One unit of split-KV work: keys kv_begin .. kv_end-1 of sequence seq for
 * all its query rows and heads, written to partial slot `split` of each row.
 * Dense: key positions; sparse: columns of topk_indices. */
typedef struct mla_attention_work {
    int32_t seq, split, kv_begin, kv_end;
} mla_attention_work;

/* seq of an unused entry (num_work .. work_capacity-1): see the work list */
#define MLA_ATTN_WORK_UNUSED (-1)

struct mla_attention_plan {
    mla_context *ctx;
    mla_attention_desc desc;
    int64_t block_bytes;
    int64_t S, T, max_blocks; /* max_blocks: block_table columns (1 when not paged) */
    int64_t max_q_len;        /* largest n_s */
    /* Split capacity, fixed at create: every splits[s] <= max_splits, and the
     * split dimension of the partial buffers. 1 = no split. */
    int32_t max_splits;
    int64_t num_work, work_capacity;
    /* Fixed at create (launch sizes of graph-capturable kernels): max_q_len
     * and num_work as create planned them; updates may exceed both. */
    int64_t q_len_at_create, work_at_create;
    /* Host copies (what the plan computed) and the same arrays in context
     * memory (equal pointers for host backends). */
    mla_attention_work *work_host, *work_dev; /* [work_capacity] */
    int32_t *cu_q_host, *cu_q_dev;            /* [S + 1] */
    int32_t *splits_host, *splits_dev;        /* [S]: splits of sequence s */
    /* Workspace carve-up (byte offsets; 256-byte aligned). */
    int64_t part_o_offset;   /* F32 [T, H, max_splits, L] when max_splits > 1 */
    int64_t part_lse_offset; /* F32 [T, H, max_splits] */
    int64_t q_rot_offset;    /* rotated q copy [T, H, L + R] (rope inside attention) */
    int64_t workspace_bytes;
    /* Added by core/api_attention.c (offsets are -1 for an absent region):
     * the rotated k_pe F32 [Tk, R] (rope inside attention) and what the plan
     * was made for, so that a run with other shapes is refused. */
    int64_t k_rot_offset;
    /* The backend's attention_scratch bytes (core/backend.h; the CPU's
     * per-thread tiles); -1 when it wants none. */
    int64_t kernel_scratch_offset;
    int64_t Tk;       /* rope: new key tokens; 0 without rope */
    int32_t has_rope; /* planned with args->rope */
    int32_t has_cu_q; /* planned with cu_q_lens (else next_n rows each) */
};

/* The work list (written by core/attention_planner.c):
 * - items ordered by sequence, then split; sequence s owns splits[s]
 *   consecutive items (0 for a padding sequence, c_s == 0, whose rows the
 *   kernel writes as o = 0, lse = -inf);
 * - dense: kv_begin .. kv_end-1 are key positions < c_s; sparse: columns of
 *   topk_indices (< topk); chunks are multiples of 64 keys / columns except
 *   the last; an item may be empty (kv_begin == kv_end, forced splits): its
 *   partial gets zero weight (lse -inf);
 * - when splits[s] > 1 the kernel writes partial slot `split` of each row
 *   (part_o, part_lse; lse natural-log, -inf for no visible key) and a
 *   combine writes o and lse; when splits[s] == 1 it may write o directly;
 * - entries num_work .. work_capacity-1 (host and device copies) have seq
 *   MLA_ATTN_WORK_UNUSED, after create and after every update. A kernel
 *   captured in a graph must not depend on num_work or max_q_len (an update
 *   changes them): it sizes its launch from quantities fixed at create
 *   (work_capacity, T, S, max_splits) and skips marked entries, writing
 *   nothing for them. */

/* Validated: kernels trust it. cu_q_lens is always valid (the plan's array
 * when the caller passed next_n); block_table, topk_indices, sinks and lse
 * have data NULL when absent. */
typedef struct mla_attention_op_args {
    const mla_attention_plan *plan;
    mla_tensor q;            /* [T, H, L + R] (the rotated copy with rope inside attention) */
    mla_tensor cache;        /* U8 [num_blocks, block_bytes] */
    mla_tensor block_table;  /* [S, max_blocks] I32 */
    mla_tensor context_lens; /* [S] I32 */
    mla_tensor cu_q_lens;    /* [S + 1] I32 */
    mla_tensor topk_indices; /* [T, topk] I32 */
    mla_tensor sinks;        /* [H] F32 */
    mla_tensor o;            /* [T, H, L] */
    mla_tensor lse;          /* [T, H] F32 */
    void *workspace;         /* context memory, plan->workspace_bytes */
} mla_attention_op_args;

#ifdef __cplusplus
}
#endif

#endif
