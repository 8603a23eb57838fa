/* libmla: DeepSeek-style Multi-head Latent Attention, one C API, several backends.
 *
 * Conventions
 * - Every fallible call returns mla_status; MLA_OK is 0. On failure nothing is
 *   written to any output, and mla_context_error_param()/_detail() say which
 *   argument was refused and why.
 * - Tensors are described by mla_tensor: dtype, shape and strides in elements
 *   (for MLA_DTYPE_FP4X2 an element is one byte holding two fp4 values).
 *   Non-contiguous views are legal inputs and outputs everywhere.
 * - All sizes and offsets are 64-bit.
 * - The library never aborts, exits or prints. Distinct contexts may be used
 *   from distinct threads at the same time; one context is not thread-safe.
 * - Enums have explicit values, only grow at the end, and end in a _COUNT entry.
 */
#ifndef MLA_MLA_H
#define MLA_MLA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(MLA_STATIC_DEFINE)
#define MLA_API
#elif defined(_WIN32)
#define MLA_API __declspec(dllimport)
#else
#define MLA_API __attribute__((visibility("default")))
#endif

#define MLA_VERSION_MAJOR 0
#define MLA_VERSION_MINOR 1
#define MLA_VERSION_PATCH 0

/* ------------------------------------------------------------------ status */

typedef enum mla_status {
    MLA_OK = 0,
    MLA_ERR_NULL_POINTER = 1,     /* a required pointer is NULL */
    MLA_ERR_INVALID_ARGUMENT = 2, /* unknown enum value, bad scalar parameter */
    MLA_ERR_DTYPE = 3,            /* a tensor has a dtype the op does not take */
    MLA_ERR_SHAPE = 4,            /* rank or extents do not match */
    MLA_ERR_STRIDE = 5,           /* negative, self-overlapping or layout-violating strides */
    MLA_ERR_OVERFLOW = 6,         /* a size or byte span does not fit in 64 bits */
    MLA_ERR_OUT_OF_RANGE = 7,     /* an index (slot, block, position, token) is out of range */
    MLA_ERR_ALIAS = 8,            /* an output overlaps an input or another output */
    MLA_ERR_WRONG_DEVICE = 9,     /* a tensor lives in memory the context cannot use */
    MLA_ERR_UNSUPPORTED = 10,     /* valid, but this backend cannot do it (see error_param) */
    MLA_ERR_OUT_OF_MEMORY = 11,
    MLA_ERR_NO_DEVICE = 12,       /* no usable GPU */
    MLA_ERR_DEVICE = 13,          /* a GPU runtime call failed */
    MLA_ERR_IO = 14,              /* a file could not be read or written */
    MLA_ERR_FORMAT = 15,          /* a file's content is malformed */
    MLA_ERR_NOT_COMPILED = 16,    /* the backend is not part of this build */
    MLA_STATUS_COUNT
} mla_status;

MLA_API const char *mla_status_name(mla_status status);

/* ----------------------------------------------------------------- version */

MLA_API void mla_version(int *major, int *minor, int *patch);
MLA_API const char *mla_version_string(void);

/* ------------------------------------------------------------------ dtypes */

typedef enum mla_dtype {
    MLA_DTYPE_F32 = 0,
    MLA_DTYPE_F16 = 1,
    MLA_DTYPE_BF16 = 2,
    MLA_DTYPE_FP8_E4M3FN = 3,   /* OCP e4m3: bias 7, max 448, NaN 0x7F/0xFF */
    MLA_DTYPE_FP8_E4M3FNUZ = 4, /* gfx942: bias 8, max 240, NaN 0x80, no -0 */
    MLA_DTYPE_E8M0 = 5,         /* 2^(byte-127), 0xFF is NaN */
    MLA_DTYPE_FP4X2 = 6,        /* two e2m1 values per byte, element 2i in the low nibble */
    MLA_DTYPE_U8 = 7,
    MLA_DTYPE_I32 = 8,
    MLA_DTYPE_I64 = 9,
    MLA_DTYPE_F64 = 10,
    MLA_DTYPE_COUNT
} mla_dtype;

MLA_API const char *mla_dtype_name(mla_dtype dtype);
/* Bytes per element (FP4X2: 1 byte = 2 values). 0 for an unknown dtype. */
MLA_API size_t mla_dtype_size(mla_dtype dtype);

/* ----------------------------------------------------------------- tensors */

#define MLA_MAX_DIMS 6

typedef enum mla_memory {
    MLA_MEMORY_HOST = 0,   /* ordinary host memory */
    MLA_MEMORY_DEVICE = 1, /* memory of the context's GPU (mla_malloc on a HIP context) */
    MLA_MEMORY_COUNT
} mla_memory;

MLA_API const char *mla_memory_name(mla_memory memory);

typedef struct mla_tensor {
    void *data;
    mla_dtype dtype;
    mla_memory memory;
    int32_t ndim;
    int64_t shape[MLA_MAX_DIMS];
    int64_t stride[MLA_MAX_DIMS]; /* in elements, >= 0 */
} mla_tensor;

/* A contiguous row-major descriptor. Returns MLA_ERR_SHAPE for ndim outside
 * [0, MLA_MAX_DIMS] or a negative extent. */
MLA_API mla_status mla_tensor_init(mla_tensor *t, void *data, mla_dtype dtype, mla_memory memory,
                                   int32_t ndim, const int64_t *shape);
/* Number of elements (product of the shape); -1 on overflow. */
MLA_API int64_t mla_tensor_numel(const mla_tensor *t);
/* 1 when the strides are those of a contiguous row-major tensor. */
MLA_API int mla_tensor_is_contiguous(const mla_tensor *t);
/* Swaps dims a and b in place (a view, no data moves). */
MLA_API mla_status mla_tensor_transpose(mla_tensor *t, int32_t a, int32_t b);

/* ---------------------------------------------------------------- contexts */

typedef enum mla_backend {
    MLA_BACKEND_AUTO = 0, /* a working GPU if there is one, else CPU */
    MLA_BACKEND_REFERENCE = 1,
    MLA_BACKEND_CPU = 2,
    MLA_BACKEND_HIP = 3,
    MLA_BACKEND_COUNT
} mla_backend;

MLA_API const char *mla_backend_name(mla_backend backend);
/* 1 when the backend was compiled into this build. */
MLA_API int mla_backend_compiled(mla_backend backend);

typedef struct mla_context mla_context;

typedef struct mla_context_options {
    int32_t num_threads; /* CPU: OpenMP threads, 0 = library default */
    int32_t device;      /* HIP: device index, default 0 */
    void *stream;        /* HIP: hipStream_t to run on, NULL = the context's own stream
                          * (created with it); see mla_context_set_stream */
} mla_context_options;

/* options may be NULL. For AUTO, *out is a CPU context when no GPU works;
 * mla_context_fallback_reason() then says why. */
MLA_API mla_status mla_context_create(mla_backend backend, const mla_context_options *options,
                                      mla_context **out);
MLA_API void mla_context_destroy(mla_context *ctx);
/* The backend actually in use (never AUTO). */
MLA_API mla_backend mla_context_backend(const mla_context *ctx);
/* Where tensors for this context must live. */
MLA_API mla_memory mla_context_memory(const mla_context *ctx);
/* Why AUTO did not pick a GPU; "" when it did or AUTO was not asked. */
MLA_API const char *mla_context_fallback_reason(const mla_context *ctx);
/* Human-readable device description, e.g. "NVIDIA H200 (sm_90)" or "host CPU, 2 threads". */
MLA_API const char *mla_context_device_name(const mla_context *ctx);
/* After a failed call: the name of the parameter that ruled the call out
 * (e.g. "x.dtype", "block_size", "scales.stride"), and a sentence. "" after success. */
MLA_API const char *mla_context_error_param(const mla_context *ctx);
MLA_API const char *mla_context_error_detail(const mla_context *ctx);
/* Capture for replay (docs/REPLAY.md). Each call of the named ops (the `mla
 * op` names, comma-separated, or "*") writes its inputs, parameters, backend,
 * library version and outputs into a new folder under dir (NULL:
 * "mla-dump"), at most max_calls of them (0: 8), with a replay.sh that
 * `mla op --replay` reruns. ops NULL or "" turns it off. The environment
 * does the same at context creation: MLA_DUMP (ops), MLA_DUMP_DIR,
 * MLA_DUMP_MAX; this call replaces that. Off, an op pays one pointer test;
 * on, a dumped call synchronizes and writes files (not for graph capture).
 * The op's result and status are never changed by its dump. */
MLA_API mla_status mla_context_set_dump(mla_context *ctx, const char *ops, const char *dir,
                                        int32_t max_calls);
/* What the dump switch did: "" when off; the ops and folder; the last
 * folder written; or why nothing was (an unknown op name, a folder that
 * cannot be made). */
MLA_API const char *mla_context_dump_status(const mla_context *ctx);
/* Waits for all work queued on the context (no-op on host backends). */
MLA_API mla_status mla_context_synchronize(mla_context *ctx);

/* The GPU stream a HIP context queues all its work on: every op, plan
 * creates and updates, runs and forwards, mla_memcpy / mla_memset and
 * mla_context_synchronize. stream is a hipStream_t (cudaStream_t on NVIDIA);
 * NULL is the runtime's default stream (PyTorch's default stream), not the
 * context's own (mla_context_get_stream right after create returns that one,
 * to switch back to). Plans hold no stream: they run on the stream set when
 * they run, so a framework sets its current stream before each call.
 *
 * Ordering: work the context queued before the switch is ordered before work
 * it queues after it: the new stream waits, on the device, for an event
 * recorded on the old stream at the switch (the host does not wait). It waits
 * for nothing the old stream gets later. When either stream is being captured
 * into a graph no dependency is added (a capture cannot wait on work outside
 * it): the caller orders the two, as torch.cuda.graph does by synchronizing
 * before it captures. Setting the stream in use is free (no runtime call).
 * The stream must be one of the context's device and stay valid while it is
 * in use and until the switch away from it; the context destroys only the
 * stream it created itself.
 *
 * Host backends (reference, CPU) run on the calling thread and have no
 * stream: NULL is accepted (MLA_OK, nothing changes), anything else is
 * MLA_ERR_UNSUPPORTED with error_param "stream". */
MLA_API mla_status mla_context_set_stream(mla_context *ctx, void *stream);
/* The stream in use (the one set last, else options.stream, else the
 * context's own); NULL on host backends and for the runtime's default
 * stream. */
MLA_API void *mla_context_get_stream(const mla_context *ctx);

/* ------------------------------------------------------------------ memory */

typedef enum mla_copy_kind {
    MLA_COPY_HOST_TO_HOST = 0,
    MLA_COPY_HOST_TO_CONTEXT = 1,
    MLA_COPY_CONTEXT_TO_HOST = 2,
    MLA_COPY_CONTEXT_TO_CONTEXT = 3,
    MLA_COPY_KIND_COUNT
} mla_copy_kind;

/* Memory of the context's kind (mla_context_memory), 256-byte aligned. */
MLA_API mla_status mla_malloc(mla_context *ctx, size_t bytes, void **out);
MLA_API mla_status mla_free(mla_context *ctx, void *ptr);
/* Synchronous with respect to the host. */
MLA_API mla_status mla_memcpy(mla_context *ctx, void *dst, const void *src, size_t bytes,
                              mla_copy_kind kind);
MLA_API mla_status mla_memset(mla_context *ctx, void *dst, int value, size_t bytes);

/* ------------------------------------------------- scalar number formats */
/* MLA.md section 5. All conversions round to nearest, ties to even. */

MLA_API uint16_t mla_f32_to_bf16(float x); /* NaN -> 0x7FC0 (sign kept) */
MLA_API float mla_bf16_to_f32(uint16_t bits);
MLA_API uint16_t mla_f32_to_f16(float x); /* overflow -> inf, NaN -> quiet NaN */
MLA_API float mla_f16_to_f32(uint16_t bits);

typedef enum mla_saturation {
    MLA_SATURATE = 0,     /* magnitudes rounding above max become +-max; inf too */
    MLA_NON_SATURATE = 1, /* they become NaN (PyTorch / ml_dtypes casts) */
    MLA_SATURATION_COUNT
} mla_saturation;

/* fp8 is MLA_DTYPE_FP8_E4M3FN or MLA_DTYPE_FP8_E4M3FNUZ; other dtypes give 0 / NaN. */
MLA_API uint8_t mla_f32_to_fp8(float x, mla_dtype fp8, mla_saturation mode);
MLA_API float mla_fp8_to_f32(uint8_t code, mla_dtype fp8);
MLA_API float mla_fp8_max(mla_dtype fp8); /* 448 or 240 */
MLA_API float mla_e8m0_to_f32(uint8_t code);
/* Nearest e2m1 code (4 bits), ties to even, |x| >= 6 -> 6, sign always kept. */
MLA_API uint8_t mla_f32_to_fp4(float x);
MLA_API float mla_fp4_to_f32(uint8_t code);

typedef enum mla_mxfp4_rule {
    MLA_MXFP4_PRODUCTION = 0, /* aiter: amax rounded up at the mantissa before the exponent */
    MLA_MXFP4_OCP = 1,        /* OCP MX v1.0: floor(log2(amax)) - 2 */
    MLA_MXFP4_RULE_COUNT
} mla_mxfp4_rule;

/* One 32-element block: 16 packed code bytes and one e8m0 scale byte. */
MLA_API void mla_mxfp4_quantize_block(const float x[32], mla_mxfp4_rule rule, uint8_t codes[16],
                                      uint8_t *scale);

/* MXFP4 scale tensors, for x [M, K]: N = K / 32 scales per row. */
typedef enum mla_scale_layout {
    MLA_SCALE_ROW_MAJOR = 0,        /* logical [M, N], stride[1] == 1 (aiter dynamic_mxfp4_quant) */
    MLA_SCALE_TRANSPOSED = 1,       /* logical [M, N], stride[0] == 1 (fused_flatten_mxfp4_quant) */
    MLA_SCALE_PRESHUFFLED_GFX950 = 2, /* 1-D u8/e8m0, mla_scale_preshuffled_bytes(M, N) bytes */
    MLA_SCALE_LAYOUT_COUNT
} mla_scale_layout;

MLA_API const char *mla_scale_layout_name(mla_scale_layout layout);
/* ceil(M/256)*256 * ceil(N/8)*8; padding bytes are written as 0. */
MLA_API int64_t mla_scale_preshuffled_bytes(int64_t M, int64_t N);
/* Byte offset of scale[m, n] in the pre-shuffled layout (MLA.md section 5). */
MLA_API int64_t mla_scale_preshuffled_offset(int64_t m, int64_t n, int64_t N);

typedef enum mla_fp8_scale_rule {
    /* aiter per-token-group quant (o_proj input): s = max(amax, 1e-10) / fp8_max,
     * fp8_max 448 (e4m3fn) or 240 (e4m3fnuz); q = sat(x * fp32(1/s)). */
    MLA_FP8_SCALE_AITER = 0,
    /* power of two (ue8m0): s = 2^ceil(log2(max(amax, 1e-4) / fp8_max)),
     * fp8_max 448 or 224; q = sat(x / s). (indexer q and K, vLLM default) */
    MLA_FP8_SCALE_UE8M0 = 1,
    /* plain division: s = max(amax, 1e-4) / div, div 448 or 224; q = sat(x / s) (indexer K). */
    MLA_FP8_SCALE_DIV = 2,
    MLA_FP8_SCALE_RULE_COUNT
} mla_fp8_scale_rule;

MLA_API const char *mla_mxfp4_rule_name(mla_mxfp4_rule rule);
MLA_API const char *mla_fp8_scale_rule_name(mla_fp8_scale_rule rule);

/* ------------------------------------------------------------------- ops */

typedef enum mla_op {
    MLA_OP_CONVERT = 0,
    MLA_OP_MXFP4_QUANT = 1,
    MLA_OP_MXFP4_DEQUANT = 2,
    MLA_OP_FP8_GROUP_QUANT = 3,
    MLA_OP_FP8_GROUP_DEQUANT = 4,
    MLA_OP_RMSNORM = 5,
    MLA_OP_QK_RMSNORM = 6,
    MLA_OP_ROPE = 7,
    MLA_OP_LINEAR = 8,
    MLA_OP_BATCHED_GEMM = 9,
    MLA_OP_CACHE_WRITE = 10,
    MLA_OP_CACHE_GATHER = 11,
    MLA_OP_ROPE_CACHE = 12, /* fused RoPE + concat + cache write */
    MLA_OP_GEMM_A16WFP4 = 13,
    MLA_OP_GEMM_A4W4 = 14,
    MLA_OP_FLATTEN_MXFP4_QUANT = 15,
    MLA_OP_FLATTEN_FP8_QUANT = 16,
    MLA_OP_LAYERNORM = 17,
    MLA_OP_HADAMARD = 18,
    MLA_OP_INDEXER_K_CACHE_WRITE = 19,
    MLA_OP_INDEXER_K_GATHER = 20,
    MLA_OP_INDEXER_LOGITS = 21,
    MLA_OP_TOPK = 22,
    MLA_OP_INDEXER_HEAD_WEIGHTS = 23,
    MLA_OP_ATTENTION = 24, /* dense or sparse MLA attention over the latent cache */
    MLA_OP_ATTENTION_EXPANDED = 25, /* prefill attention over decompressed K / V */
    MLA_OP_COUNT
} mla_op;

MLA_API const char *mla_op_name(mla_op op);

/* How a tensor argument is laid out, as mla_variant.arg_view tells a backend. */
typedef enum mla_arg_view {
    MLA_ARG_DENSE = 0,    /* contiguous row-major (at any address) */
    MLA_ARG_ROWS = 1,     /* unit stride along the last dim, gaps elsewhere: padded rows, a slice */
    MLA_ARG_STRIDED = 2,  /* the last dim's stride is not 1: element gaps, a transposed view */
    MLA_ARG_IN_PLACE = 3, /* the same data as an earlier tensor argument of the call */
    MLA_ARG_ABSENT = 4,   /* an optional tensor passed as NULL (its arg_dtype: MLA_DTYPE_COUNT) */
    MLA_ARG_VIEW_COUNT
} mla_arg_view;

#define MLA_VARIANT_MAX_ARGS 16

/* What a backend is asked to do: the op plus every parameter on which a
 * backend may refuse it. Built by every op entry point from its arguments
 * (the conformance layer records those and asks each backend the same);
 * mla_supports answers it. Fields an op does not use are 0.
 *
 * The tensor arguments (arg_dtype, arg_view) are listed in the order of the
 * entry point's tensor parameters:
 *   convert: x, y              mxfp4_quant, fp8_group_quant, flatten_*: x, codes, scales
 *   mxfp4_dequant, fp8_group_dequant: codes, scales, y
 *   rmsnorm: x, w, y           qk_rmsnorm: q, q_w, kv, kv_w, q_out, q_scales, kv_out
 *   rope: cos, sin, positions, x, y
 *   linear: x, w, w_scale, y   batched_gemm: x, w, y
 *   cache_write: cache, k_nope, k_pe, slots    cache_gather: cache, block_table, seq_lens, out
 *   rope_cache: the mla_rope_cache_args tensors in order (cos .. k_pe_out)
 *   gemm_a16wfp4: x, w.codes, w.scales, y   gemm_a4w4: x.codes, x.scales, w.codes, w.scales, y
 *   layernorm: x, w, b, y      hadamard: x, y      indexer_head_weights: w, s_q, w_out
 *   indexer_k_cache_write: cache, k, slots
 *   indexer_k_gather: cache, block_table, cu_seq_lens, k_fp8, k_scale
 *   indexer_logits: cache, q, w, block_table, context_lens, logits
 *   topk: logits, lengths, indices
 *   attention: q, cache, block_table, context_lens, cu_q_lens, topk_indices, sinks, then the
 *     rope's cos, sin, q_pos, k_nope, k_pe, k_pos, slots, then o, lse
 *   attention_expanded: q_nope, q_pe, cache, block_table, context_lens, cu_q_lens,
 *     kv_b_proj.w, kv_b_proj.scale (fp8 only), o, lse
 * Variants a composite op asks about its internal steps list no tensors (nargs 0). */
typedef struct mla_variant {
    mla_op op;
    mla_dtype in_dtype;  /* main input (cache ops: the cache's element dtype) */
    mla_dtype out_dtype; /* main output */
    int32_t layout;      /* op's layout enum (scale layout of w, cache layout) */
    int32_t rule;        /* op's rule enum (mxfp4 rule, fp8 scale rule, saturation, rope
                            style, indexer ue8m0 and next_n, attention: the cache dtype) */
    int64_t group;       /* quantization group / block size / top-k k */
    int64_t rows;        /* M, or tokens */
    int64_t cols;        /* K, or row length (attention: heads) */
    /* Appended: */
    int32_t nargs;                             /* tensors listed below */
    mla_dtype arg_dtype[MLA_VARIANT_MAX_ARGS]; /* each tensor's dtype, MLA_DTYPE_COUNT if absent */
    uint8_t arg_view[MLA_VARIANT_MAX_ARGS];    /* each tensor's mla_arg_view */
    int32_t layout_x;                          /* gemm_a4w4: x's scale layout */
    int32_t prequant;                          /* gemm_a16wfp4: x quantized to MXFP4 first */
    int32_t splits;                            /* attention: desc.num_splits */
    int32_t next_n;                            /* attention, indexer_logits: rows per sequence */
} mla_variant;

/* MLA_OK when the context's backend can run the variant; otherwise
 * MLA_ERR_UNSUPPORTED and, if param is not NULL, *param names the parameter
 * that rules it out. */
MLA_API mla_status mla_supports(const mla_context *ctx, const mla_variant *variant,
                                const char **param);

/* y = x converted elementwise, same shape. Float-like dtypes: F32, F16, BF16,
 * FP8_E4M3FN, FP8_E4M3FNUZ; E8M0 and FP4X2 as sources; FP4X2 also as a target.
 * When one side is FP4X2 its last extent is half the other's. mode applies to
 * fp8 targets (fp4 always saturates; f16/bf16 overflow to inf). */
MLA_API mla_status mla_convert(mla_context *ctx, const mla_tensor *x, mla_tensor *y,
                               mla_saturation mode);

/* x [M, K] (F32, BF16, F16), K % 32 == 0 -> codes [M, K/2] FP4X2 and e8m0
 * scales in the given layout (see mla_scale_layout). */
MLA_API mla_status mla_mxfp4_quant(mla_context *ctx, const mla_tensor *x, mla_tensor *codes,
                                   mla_tensor *scales, mla_scale_layout layout,
                                   mla_mxfp4_rule rule);
/* codes [M, K/2] + scales -> y [M, K] (F32, BF16, F16): y = fp4 * 2^(scale-127);
 * a NaN scale gives NaN. */
MLA_API mla_status mla_mxfp4_dequant(mla_context *ctx, const mla_tensor *codes,
                                     const mla_tensor *scales, mla_scale_layout layout,
                                     mla_tensor *y);

/* x [M, K] (F32, BF16, F16), K % group == 0 -> codes [M, K] (FP8_E4M3FN or
 * FP8_E4M3FNUZ, the flavour is the codes' dtype) and F32 scales [M, K/group]
 * with any strides (row-major or transposed). */
MLA_API mla_status mla_fp8_group_quant(mla_context *ctx, const mla_tensor *x, mla_tensor *codes,
                                       mla_tensor *scales, int64_t group,
                                       mla_fp8_scale_rule rule);
/* y [M, K] (F32, BF16, F16) = fp8 * scale of its group. */
MLA_API mla_status mla_fp8_group_dequant(mla_context *ctx, const mla_tensor *codes,
                                         const mla_tensor *scales, int64_t group, mla_tensor *y);

/* ------------------------------------------------------------ build info */

typedef struct mla_build_info {
    const char *version;
    const char *compiler;
    int has_openmp;
    int has_openblas;
    int has_sleef;
    int has_hip;             /* HIP backend compiled in */
    const char *hip_platform; /* "amd", "nvidia" or "" */
    const char *gpu_targets;  /* e.g. "gfx942;gfx950" or "sm_90" */
    const char *cpu_isa;      /* vector ISAs the CPU kernels were built for */
} mla_build_info;

MLA_API const mla_build_info *mla_build_info_get(void);

/* Number of GPUs the HIP backend sees (0 without a device or without HIP),
 * and a description of device i. */
MLA_API int mla_gpu_count(void);
MLA_API mla_status mla_gpu_name(int device, char *buf, size_t len);

#ifdef __cplusplus
}
#endif

#include "mla/mla_prepare.h"
#include "mla/mla_mxfp4.h"
#include "mla/mla_indexer.h"
#include "mla/mla_attention.h"
#include "mla/mla_weights.h"
#include "mla/mla_layer.h"
#include "mla/mla_tuning.h"

#endif /* MLA_MLA_H */
