/* Internal: the split-KV planner of the attention core
 * (core/attention_planner.c), used by the entry points (core/api_attention.c).
 */
#ifndef MLA_CORE_ATTENTION_PLANNER_H
#define MLA_CORE_ATTENTION_PLANNER_H

#include "core/attention_plan.h"

#define MLA_ATTN_CHUNK 64       /* split chunks: multiples of 64 keys / top-k columns */
#define MLA_ATTN_MAX_SPLITS 256 /* largest desc.num_splits accepted */
#define MLA_ATTN_AUTO_SPLITS                                                                       \
    64                        /* largest split count the plan picks itself                         \
                               */
#define MLA_ATTN_WS_ALIGN 256 /* workspace regions start 256-byte aligned */
/* The compute units the host backends plan for, whatever their thread count:
 * the automatic split count must not depend on the threads option (the bits
 * of a split attention depend on the split count). 8 units give a lone
 * sequence about 16 items: both cores of a small host busy with dynamic
 * scheduling, and full occupancy up to 16 threads. */
#define MLA_HOST_COMPUTE_UNITS 8
/* The host's shortest automatic split chunk (ctx->min_split_keys), in keys:
 * a split costs a CPU task its q packing, its partial rows and their
 * combine, which for one query row of 16 heads measured as much as a few
 * hundred keys' work (one thread, 1024 keys: 16 splits of 64 keys about
 * 480 us, 2 of 512 about 315, unsplit 296). A long single sequence still
 * gets 16 chunks from 8192 keys on. */
#define MLA_HOST_MIN_CHUNK 512

/* Split counts and the work list from the per-sequence work lengths len[s]
 * (dense: c_s keys; sparse: topk columns, 0 for a padding sequence), into
 * plan->splits_host / work_host / num_work. At create (plan->max_splits ==
 * 0) it also fixes the split capacity plan->max_splits; afterwards every
 * split count stays within it. compute_units: the units the plan fills;
 * min_chunk: the shortest automatic chunk (a multiple of MLA_ATTN_CHUNK). */
void mla_attention_schedule(mla_attention_plan *plan, const int64_t *len, int32_t compute_units,
                            int64_t min_chunk);

/* Workspace carve-up of the plan (needs T, desc, max_splits, has_rope, Tk):
 * fills the offsets (-1: absent) and workspace_bytes. MLA_ERR_OVERFLOW when
 * the bytes do not fit in 64 bits. */
mla_status mla_attention_layout_workspace(mla_attention_plan *plan);

#endif
