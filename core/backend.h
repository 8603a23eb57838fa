/* Internal: the backend table, the context, and the op argument records.
 *
 * A backend is a table of op slots (BLIS context / ggml backend style). The
 * reference table fills every slot; the CPU backend starts from it and
 * overrides what it vectorizes; the HIP backend overrides every op it runs on
 * the GPU and refuses the others through supports(). The public entry points
 * (core/api_*.c) validate arguments once, ask supports(), then call the slot:
 * kernels trust their inputs. */
#ifndef MLA_CORE_BACKEND_H
#define MLA_CORE_BACKEND_H

#include "mla/mla.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Op argument records: validated, so kernels trust them. M and K are the
 * logical row count and row length in values (not packed bytes). */
typedef struct mla_convert_args {
    mla_tensor x, y;
    mla_saturation mode;
} mla_convert_args;

typedef struct mla_mxfp4_quant_args {
    mla_tensor x;      /* [M, K] */
    mla_tensor codes;  /* [M, K/2] FP4X2 */
    mla_tensor scales; /* per layout */
    mla_scale_layout layout;
    mla_mxfp4_rule rule;
    int64_t M, K;
} mla_mxfp4_quant_args;

typedef struct mla_mxfp4_dequant_args {
    mla_tensor codes, scales, y;
    mla_scale_layout layout;
    int64_t M, K;
} mla_mxfp4_dequant_args;

typedef struct mla_fp8_group_quant_args {
    mla_tensor x;      /* [M, K] */
    mla_tensor codes;  /* [M, K] fp8 */
    mla_tensor scales; /* [M, K/group] F32 */
    int64_t group;
    mla_fp8_scale_rule rule;
    int64_t M, K;
} mla_fp8_group_quant_args;

typedef struct mla_fp8_group_dequant_args {
    mla_tensor codes, scales, y;
    int64_t group;
    int64_t M, K;
} mla_fp8_group_dequant_args;

/* ---- prepare path (include/mla/mla_prepare.h) ---- */

typedef struct mla_rmsnorm_args {
    mla_tensor x, w, y; /* [T, D], [D], [T, D] */
    float eps;
} mla_rmsnorm_args;

typedef struct mla_qk_rmsnorm_args {
    mla_tensor q, q_w, kv, kv_w, q_out, kv_out;
    mla_tensor q_scales; /* valid when q_out is fp8 (F32 [T, Dq/128]) or FP4X2 (e8m0 [T, Dq/32]) */
    float q_eps, kv_eps;
} mla_qk_rmsnorm_args;

typedef struct mla_rope_args {
    mla_tensor cos, sin; /* [P, R/2] F32 */
    mla_tensor positions; /* [T] I32 / I64, validated < P */
    mla_tensor x, y;      /* [T, H, D], D >= R; a 2-D input arrives as [T, 1, D] */
    mla_rope_style style;
    int64_t rope_dim;     /* R = 2 * cos.shape[1] */
} mla_rope_args;

typedef struct mla_linear_args {
    mla_tensor x, w, y; /* [T, K], [N, K], [T, N] */
    mla_tensor w_scale; /* fp8 W: [ceil(N/128), ceil(K/128)] F32; data NULL for BF16 */
} mla_linear_args;

typedef struct mla_batched_gemm_args {
    mla_tensor x, w, y; /* [B, M, K], [B, K, N], [B, M, N] */
    float w_scale;
} mla_batched_gemm_args;

typedef struct mla_cache_write_args {
    mla_cache_desc desc;
    int64_t block_bytes;
    mla_tensor cache;        /* U8 [num_blocks, block_bytes] */
    mla_tensor k_nope, k_pe; /* [T, L], [T, R] */
    mla_tensor slots;        /* [T] I32 / I64, validated < num_blocks * block_size */
} mla_cache_write_args;

typedef struct mla_cache_gather_args {
    mla_cache_desc desc;
    int64_t block_bytes;
    mla_tensor cache;       /* U8 [num_blocks, block_bytes] */
    mla_tensor block_table; /* [S, max_blocks] I32, validated */
    mla_tensor seq_lens;    /* [S] I32, validated */
    mla_tensor out;         /* [sum(seq_lens), L + R] */
} mla_cache_gather_args;

typedef struct mla_rope_cache_op_args {
    mla_tensor cos, sin;
    mla_rope_style style;
    mla_tensor q_nope, q_pe, q_pos; /* [T, H, L], [T, H, R], [T] */
    mla_tensor k_nope, k_pe, k_pos; /* [Tk, L], [Tk, R], [Tk] */
    mla_tensor slots;               /* [Tk] */
    mla_cache_desc desc;
    int64_t block_bytes;
    mla_tensor cache;
    mla_tensor q_cat; /* [T, H, L + R] */
    float q_scale;
    mla_tensor k_pe_out; /* [Tk, R]; data NULL when not wanted */
} mla_rope_cache_op_args;

/* ---- MXFP4 GEMM path (include/mla/mla_mxfp4.h) ---- */

typedef struct mla_mxfp4_gemm_args {
    mla_tensor x;            /* a16wfp4: [B, M, K] float; a4w4: unused */
    mla_mxfp4_operand xq;    /* a4w4: quantized activations [B, M, K/2] */
    mla_mxfp4_operand w;     /* [B, N, K/2] */
    mla_tensor y;            /* [B, M, N] */
    int32_t prequant;        /* a16wfp4: quantize x by rule first */
    mla_mxfp4_rule rule;
    int64_t B, M, N, K;
} mla_mxfp4_gemm_args;

typedef struct mla_flatten_quant_args {
    mla_tensor x;      /* [T, H, v] */
    mla_tensor codes;  /* [T, H*v/2] FP4X2 or [T, H*v] fp8 */
    mla_tensor scales; /* [T, H*v/32] e8m0 or [T, H*v/128] F32 */
    mla_mxfp4_rule rule;
} mla_flatten_quant_args;

/* ---- DSA indexer (include/mla/mla_indexer.h) ---- */

typedef struct mla_layernorm_args {
    mla_tensor x, w, b, y; /* [T, D], [D], [D], [T, D] */
    float eps;
} mla_layernorm_args;

typedef struct mla_hadamard_args {
    mla_tensor x, y; /* [T, H, D]; a 2-D input arrives as [T, 1, D] */
} mla_hadamard_args;

typedef struct mla_indexer_cache_args {
    mla_indexer_cache_desc desc; /* layout resolved: never AUTO */
    int64_t block_bytes;
    mla_tensor cache;       /* U8 [num_blocks, block_bytes] */
    mla_tensor k;           /* write: [T, head_dim] */
    mla_tensor slots;       /* write: [T] */
    mla_tensor block_table; /* gather / logits: [S, max_blocks] I32 */
    mla_tensor cu_seq_lens; /* gather: [S + 1] I32 */
    mla_tensor k_fp8, k_scale; /* gather outputs */
} mla_indexer_cache_args;

typedef struct mla_indexer_logits_args {
    mla_indexer_cache_desc desc; /* layout resolved */
    int64_t block_bytes;
    mla_tensor cache, q, w, block_table, context_lens, logits;
    int32_t next_n;
    uint32_t gate; /* nonzero: the ticket of the device index check (paged_check_queue) */
} mla_indexer_logits_args;

typedef struct mla_topk_args {
    mla_tensor logits, lengths, indices;
    int64_t k;
    uint32_t gate; /* as in mla_indexer_logits_args */
    /* 1: the op queued just before is the indexer logits that write these
     * logits (mla_indexer_search), which a device backend may overlap its
     * start with */
    int32_t after_logits;
} mla_topk_args;

typedef struct mla_head_weights_args {
    mla_tensor w, s_q, w_out;
} mla_head_weights_args;

struct mla_attention_op_args;          /* core/attention_plan.h */
struct mla_attention_expanded_op_args; /* core/attention_expanded.h */

typedef struct mla_backend_ops {
    const char *name;
    mla_backend backend;
    mla_memory memory;
    /* The context's target before init; MLA_TARGET_COUNT: init names it
     * (a device backend reads it off the device). */
    mla_target target;
    /* AUTO tries the registered backends from the highest auto_order down
     * and takes the first whose init succeeds; 0: never picked by AUTO. */
    int32_t auto_order;

    /* Lifecycle. init may fail (no device); it writes a reason. */
    mla_status (*init)(mla_context *ctx, const mla_context_options *opt, char *reason,
                       size_t reason_len);
    void (*fini)(mla_context *ctx);

    mla_status (*mem_alloc)(mla_context *ctx, size_t bytes, void **out);
    mla_status (*mem_free)(mla_context *ctx, void *ptr);
    mla_status (*mem_copy)(mla_context *ctx, void *dst, const void *src, size_t bytes,
                           mla_copy_kind kind);
    mla_status (*mem_set)(mla_context *ctx, void *dst, int value, size_t bytes);
    mla_status (*synchronize)(mla_context *ctx);

    /* NULL when the variant runs here, else the name of the parameter that
     * rules it out. The single source of truth for dispatch and conformance. */
    const char *(*supports)(const mla_context *ctx, const mla_variant *v);

    mla_status (*convert)(mla_context *ctx, const mla_convert_args *a);
    mla_status (*mxfp4_quant)(mla_context *ctx, const mla_mxfp4_quant_args *a);
    mla_status (*mxfp4_dequant)(mla_context *ctx, const mla_mxfp4_dequant_args *a);
    mla_status (*fp8_group_quant)(mla_context *ctx, const mla_fp8_group_quant_args *a);
    mla_status (*fp8_group_dequant)(mla_context *ctx, const mla_fp8_group_dequant_args *a);

    mla_status (*rmsnorm)(mla_context *ctx, const mla_rmsnorm_args *a);
    mla_status (*qk_rmsnorm)(mla_context *ctx, const mla_qk_rmsnorm_args *a);
    mla_status (*rope)(mla_context *ctx, const mla_rope_args *a);
    mla_status (*linear)(mla_context *ctx, const mla_linear_args *a);
    mla_status (*batched_gemm)(mla_context *ctx, const mla_batched_gemm_args *a);
    mla_status (*cache_write)(mla_context *ctx, const mla_cache_write_args *a);
    mla_status (*cache_gather)(mla_context *ctx, const mla_cache_gather_args *a);
    mla_status (*rope_cache)(mla_context *ctx, const mla_rope_cache_op_args *a);

    mla_status (*gemm_a16wfp4)(mla_context *ctx, const mla_mxfp4_gemm_args *a);
    mla_status (*gemm_a4w4)(mla_context *ctx, const mla_mxfp4_gemm_args *a);
    mla_status (*flatten_mxfp4_quant)(mla_context *ctx, const mla_flatten_quant_args *a);
    mla_status (*flatten_fp8_quant)(mla_context *ctx, const mla_flatten_quant_args *a);

    mla_status (*layernorm)(mla_context *ctx, const mla_layernorm_args *a);
    mla_status (*hadamard)(mla_context *ctx, const mla_hadamard_args *a);
    mla_status (*indexer_k_cache_write)(mla_context *ctx, const mla_indexer_cache_args *a);
    mla_status (*indexer_k_gather)(mla_context *ctx, const mla_indexer_cache_args *a);
    mla_status (*indexer_logits)(mla_context *ctx, const mla_indexer_logits_args *a);
    mla_status (*topk)(mla_context *ctx, const mla_topk_args *a);
    mla_status (*indexer_head_weights)(mla_context *ctx, const mla_head_weights_args *a);

    mla_status (*attention)(mla_context *ctx, const struct mla_attention_op_args *a);
    mla_status (*attention_expanded)(mla_context *ctx,
                                     const struct mla_attention_expanded_op_args *a);

    /* Optional, both or neither (NULL: the core reads the indices back and
     * checks them on the host before the op). paged_check_queue queues the
     * check of every lens[s] in [lo, hi] and the first ceil(lens[s] /
     * block_size) ids of row s of table in [0, num_blocks) (table NULL: the
     * lengths alone) where the tensors lie, and sets *gate to its ticket
     * (0: no check was queued, the caller checks on the host). An op whose
     * args carry the ticket and is queued next writes nothing if the check
     * failed. paged_check_verdict waits for the check alone and sets *ok
     * (0: a bad entry; the caller's host check then names it). */
    mla_status (*paged_check_queue)(mla_context *ctx, const mla_tensor *lens, int64_t lo,
                                    int64_t hi, const mla_tensor *table, int64_t block_size,
                                    int64_t num_blocks, uint32_t *gate);
    mla_status (*paged_check_verdict)(mla_context *ctx, uint32_t gate, int *ok);

    /* Optional, both or neither (NULL: a host backend, no stream): the
     * stream the context queues its work on (mla_context_set_stream). */
    mla_status (*set_stream)(mla_context *ctx, void *stream);
    void *(*get_stream)(const mla_context *ctx);

    /* Optional (NULL: none): bytes of scratch the attention kernel wants in
     * the plan's workspace (core/attention_planner.c carves it at
     * kernel_scratch_offset), -1 when the size does not fit in int64. */
    int64_t (*attention_scratch)(const mla_context *ctx, const mla_attention_desc *d);
    /* Optional: called after mla_context_set_tuning changed ctx->tuning,
     * for a backend that derives state from it (NULL: it reads the fields
     * where it uses them). */
    void (*tuning_changed)(mla_context *ctx);
} mla_backend_ops;

struct mla_context {
    const mla_backend_ops *ops;
    mla_backend backend;
    mla_target target;   /* set by init; the HIP backend reads it off the device */
    int32_t num_threads; /* host backends: OpenMP threads to use (>= 1) */
    int32_t compute_units; /* parallel units the split-KV planner fills (threads, GPU CUs/SMs) */
    int32_t min_split_keys; /* the planner's shortest automatic chunk; 0: MLA_ATTN_CHUNK */
    void *impl;          /* backend-private state (HIP: device, stream) */
    char fallback_reason[256];
    char device_name[128];
    char err_param[64];
    char err_detail[256];
    struct mla_dump_state *dump; /* NULL unless calls are dumped (core/dump.h) */
    /* The composite ops' two passes (mla_run_composite, core/validate.h):
     * dry_run 1: every entry point validates, then returns before its
     * backend slot; trusted: MLA_TRUST_* bits, what an entry point need not
     * check again. Both 0 outside a composite. */
    int32_t dry_run;
    uint32_t trusted;
    mla_tuning tuning; /* the kernel-path knobs, validated (core/tuning.c) */
};

/* The reference table: every op slot filled; the CPU table starts from it,
 * and the tests build deliberately wrong backends from it. */
extern const mla_backend_ops mla_reference_ops;
/* The CPU and HIP tables, for the tests that start from them (mla_hip_ops
 * is NULL in a build without HIP); the core finds tables only through the
 * registry below. */
const mla_backend_ops *mla_cpu_ops(void);
const mla_backend_ops *mla_hip_ops(void);

/* The backends of this build: the getters each backend's CMakeLists.txt
 * registers (mla_register_backend), NULL-terminated, in a source the build
 * writes (core/backend_registry.c.in). */
extern const mla_backend_ops *(*const mla_backend_registry[])(void);
/* The registered table of a backend; NULL when it is not compiled in. */
const mla_backend_ops *mla_backend_find(mla_backend backend);

/* A caller's tuning (its struct_size and version) over the defaults, every
 * field in range, into *out; refused with the field named otherwise. */
mla_status mla_tuning_check(mla_context *ctx, const mla_tuning *in, mla_tuning *out);

/* Creates a context around any table: the public create uses it, and the
 * tests use it to run deliberately wrong backends (negative controls). */
mla_status mla_context_create_with_ops(const mla_backend_ops *ops,
                                       const mla_context_options *options, mla_context **out);

/* Records why a call failed and returns status. param may be NULL. */
mla_status mla_fail(mla_context *ctx, mla_status status, const char *param, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
void mla_clear_error(mla_context *ctx);

/* Host-memory helpers shared by the reference and CPU tables. */
mla_status mla_host_init(mla_context *ctx, const mla_context_options *opt, char *reason,
                         size_t reason_len);
void mla_host_fini(mla_context *ctx);
mla_status mla_host_alloc(mla_context *ctx, size_t bytes, void **out);
mla_status mla_host_free(mla_context *ctx, void *ptr);
mla_status mla_host_copy(mla_context *ctx, void *dst, const void *src, size_t bytes,
                         mla_copy_kind kind);
mla_status mla_host_set(mla_context *ctx, void *dst, int value, size_t bytes);
mla_status mla_host_synchronize(mla_context *ctx);

#ifdef __cplusplus
}
#endif

#endif
