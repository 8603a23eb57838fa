/* The HIP backend table: device selection, the context's stream, device
 * memory, and supports(). The ops live in one file each. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hip/hip_internal.h"

namespace {

__attribute__((format(printf, 3, 4))) void write_reason(char *reason, size_t len,
                                                        const char *fmt, ...)
{
    if (!reason || !len)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, len, fmt, ap);
    va_end(ap);
}

/* "AMD Instinct MI300X (gfx942)" / "NVIDIA H200 (sm_90)"; false when it was
 * cut to fit (a readable prefix is still there). Marketing names are short;
 * the precision bounds them so that the context's buffer always holds the
 * architecture too. */
bool describe_device(const hipDeviceProp_t &p, char *buf, size_t len)
{
#if defined(__CUDACC__)
    return snprintf(buf, len, "%.96s (sm_%d%d)", p.name, p.major, p.minor) < (int)len;
#else
    /* gcnArchName carries target features ("gfx942:sramecc+:xnack-"). */
    const int arch_len = (int)strcspn(p.gcnArchName, ":");
    return snprintf(buf, len, "%.96s (%.*s)", p.name, arch_len, p.gcnArchName) < (int)len;
#endif
}

/* The plan's target for a device: the kernel variants are chosen per
 * target, so an architecture the plan does not know maps to the nearest one
 * of its vendor (gfx942 for other gfx9 parts, sm_90 for other NVIDIA GPUs). */
mla_target device_target(const hipDeviceProp_t &p)
{
#if defined(__CUDACC__)
    (void)p;
    return MLA_TARGET_SM90;
#else
    return strncmp(p.gcnArchName, "gfx950", 6) == 0 ? MLA_TARGET_GFX950 : MLA_TARGET_GFX942;
#endif
}

/* The device count, or a reason why there is no usable device. */
hipError_t device_count(int *count)
{
    *count = 0;
    hipError_t err = hipGetDeviceCount(count);
    if (err != hipSuccess) {
        *count = 0;
        (void)hipGetLastError(); /* not sticky; keep it from reaching a later check */
    }
    return err;
}

mla_status hip_init(mla_context *ctx, const mla_context_options *opt, char *reason,
                    size_t reason_len)
{
    const int device = opt ? opt->device : 0;
    int count = 0;
    hipError_t err = device_count(&count);
    if (err != hipSuccess) {
        const char *text = mla_hip_error_text(err);
        write_reason(reason, reason_len, "no usable GPU: the runtime reports %s%s%s",
                     hipGetErrorName(err), text[0] ? ": " : "", text);
        return MLA_ERR_NO_DEVICE;
    }
    if (count <= 0) {
        write_reason(reason, reason_len, "no GPU found");
        return MLA_ERR_NO_DEVICE;
    }
    if (device < 0 || device >= count) {
        write_reason(reason, reason_len, "device %d requested, but %d GPU(s) present", device,
                     count);
        return MLA_ERR_NO_DEVICE;
    }
    const mla_hip_device_scope scope(device);
    hipDeviceProp_t prop;
    if ((err = scope.error()) != hipSuccess ||
        (err = hipGetDeviceProperties(&prop, device)) != hipSuccess) {
        (void)hipGetLastError();
        const char *text = mla_hip_error_text(err);
        write_reason(reason, reason_len, "GPU %d unusable: %s%s%s", device, hipGetErrorName(err),
                     text[0] ? ": " : "", text);
        return MLA_ERR_NO_DEVICE;
    }
    mla_hip_state *s = static_cast<mla_hip_state *>(calloc(1, sizeof(mla_hip_state)));
    if (!s)
        return MLA_ERR_OUT_OF_MEMORY;
    s->device = device;
    s->multiprocessors = prop.multiProcessorCount > 0 ? prop.multiProcessorCount : 1;
    if (opt && opt->stream) {
        s->stream = static_cast<hipStream_t>(opt->stream);
        s->own_stream = false;
    } else {
        if ((err = hipStreamCreate(&s->stream)) != hipSuccess) {
            (void)hipGetLastError();
            free(s);
            const char *text = mla_hip_error_text(err);
            write_reason(reason, reason_len, "cannot create a stream on GPU %d: %s%s%s", device,
                         hipGetErrorName(err), text[0] ? ": " : "", text);
            return err == hipErrorOutOfMemory ? MLA_ERR_OUT_OF_MEMORY : MLA_ERR_NO_DEVICE;
        }
        s->created = s->stream;
        s->own_stream = true;
    }
    s->pdl = mla_hip_loaded_pdl();
    ctx->impl = s;
    (void)describe_device(prop, ctx->device_name, sizeof ctx->device_name);
    ctx->target = device_target(prop);
    ctx->compute_units = s->multiprocessors;
    return MLA_OK;
}

void hip_fini(mla_context *ctx)
{
    mla_hip_state *s = mla_hip_state_of(ctx);
    if (!s)
        return;
    /* Nothing to report to from here: queued work still completes, and the
     * runtime frees the stream once it has. */
    if (s->own_stream || s->switched) {
        const mla_hip_device_scope scope(s->device);
        if (scope.error() == hipSuccess && s->own_stream)
            (void)hipStreamDestroy(s->created);
        if (scope.error() == hipSuccess && s->switched)
            (void)hipEventDestroy(s->switched);
        (void)hipGetLastError();
    }
    if (s->scratch) {
        const mla_hip_device_scope scope(s->device);
        if (scope.error() == hipSuccess)
            (void)hipFree(s->scratch);
        (void)hipGetLastError();
    }
    if (s->check_dev) {
        const mla_hip_device_scope scope(s->device);
        if (scope.error() == hipSuccess) {
            (void)hipEventDestroy(s->check_done);
            (void)hipFree(s->check_dev);
        }
        (void)hipHostFree(const_cast<uint32_t *>(s->check_host));
        (void)hipGetLastError();
    }
    free(s);
    ctx->impl = NULL;
}

mla_status hip_alloc(mla_context *ctx, size_t bytes, void **out)
{
    *out = NULL;
    const mla_hip_device_scope scope(mla_hip_state_of(ctx)->device);
    if (scope.error() != hipSuccess)
        return mla_hip_fail(ctx, scope.error(), "selecting the context's GPU");
    void *p = NULL;
    hipError_t err = hipMalloc(&p, bytes);
    if (err == hipErrorOutOfMemory) {
        (void)hipGetLastError();
        return mla_fail(ctx, MLA_ERR_OUT_OF_MEMORY, "bytes", "hipMalloc of %zu bytes: %s", bytes,
                        hipGetErrorString(err));
    }
    if (err != hipSuccess)
        return mla_hip_fail(ctx, err, "hipMalloc");
    *out = p;
    return MLA_OK;
}

mla_status hip_free(mla_context *ctx, void *ptr)
{
    if (!ptr)
        return MLA_OK;
    const mla_hip_device_scope scope(mla_hip_state_of(ctx)->device);
    if (scope.error() != hipSuccess)
        return mla_hip_fail(ctx, scope.error(), "selecting the context's GPU");
    hipError_t err = hipFree(ptr);
    return err == hipSuccess ? MLA_OK : mla_hip_fail(ctx, err, "hipFree");
}

mla_status hip_sync(mla_context *ctx)
{
    const mla_hip_device_scope scope(mla_hip_state_of(ctx)->device);
    if (scope.error() != hipSuccess)
        return mla_hip_fail(ctx, scope.error(), "selecting the context's GPU");
    hipError_t err = hipStreamSynchronize(mla_hip_state_of(ctx)->stream);
    return err == hipSuccess ? MLA_OK : mla_hip_fail(ctx, err, "hipStreamSynchronize");
}

/* mla_context_set_stream (include/mla/mla.h): the new stream waits for an
 * event recorded on the old one, unless either is being captured. */
mla_status hip_set_stream(mla_context *ctx, void *stream)
{
    mla_hip_state *s = mla_hip_state_of(ctx);
    hipStream_t next = static_cast<hipStream_t>(stream);
    if (next == s->stream)
        return MLA_OK;
    const mla_hip_device_scope scope(s->device);
    if (scope.error() != hipSuccess)
        return mla_hip_fail(ctx, scope.error(), "selecting the context's GPU");
    hipStreamCaptureStatus cap_next = hipStreamCaptureStatusNone;
    hipStreamCaptureStatus cap_old = hipStreamCaptureStatusNone;
    hipError_t err = hipStreamIsCapturing(next, &cap_next);
    if (err == hipSuccess && cap_next == hipStreamCaptureStatusNone)
        err = hipStreamIsCapturing(s->stream, &cap_old);
    if (err != hipSuccess) {
        (void)hipGetLastError();
        return mla_fail(ctx, MLA_ERR_DEVICE, "stream", "hipStreamIsCapturing failed: %s",
                        hipGetErrorName(err));
    }
    if (cap_next == hipStreamCaptureStatusNone && cap_old == hipStreamCaptureStatusNone) {
        if (!s->switched &&
            (err = hipEventCreateWithFlags(&s->switched, hipEventDisableTiming)) != hipSuccess) {
            (void)hipGetLastError();
            s->switched = NULL;
            return mla_hip_fail(ctx, err, "hipEventCreateWithFlags");
        }
        if ((err = hipEventRecord(s->switched, s->stream)) != hipSuccess ||
            (err = hipStreamWaitEvent(next, s->switched, 0)) != hipSuccess) {
            (void)hipGetLastError();
            return mla_fail(ctx, MLA_ERR_DEVICE, "stream",
                            "ordering the new stream after the old one failed: %s",
                            hipGetErrorName(err));
        }
    }
    s->stream = next;
    return MLA_OK;
}

void *hip_get_stream(const mla_context *ctx)
{
    return static_cast<void *>(mla_hip_state_of(ctx)->stream);
}

/* Copies go through the context's stream, so they are ordered after the
 * work already queued on it; the wait makes them synchronous for the host. */
mla_status hip_copy(mla_context *ctx, void *dst, const void *src, size_t bytes, mla_copy_kind kind)
{
    if (bytes == 0)
        return MLA_OK;
    if (kind == MLA_COPY_HOST_TO_HOST) {
        memmove(dst, src, bytes);
        return MLA_OK;
    }
    const mla_hip_device_scope scope(mla_hip_state_of(ctx)->device);
    if (scope.error() != hipSuccess)
        return mla_hip_fail(ctx, scope.error(), "selecting the context's GPU");
    hipMemcpyKind k = kind == MLA_COPY_HOST_TO_CONTEXT   ? hipMemcpyHostToDevice
                      : kind == MLA_COPY_CONTEXT_TO_HOST ? hipMemcpyDeviceToHost
                                                         : hipMemcpyDeviceToDevice;
    hipError_t err = hipMemcpyAsync(dst, src, bytes, k, mla_hip_state_of(ctx)->stream);
    if (err != hipSuccess)
        return mla_hip_fail(ctx, err, "hipMemcpyAsync");
    return hip_sync(ctx);
}

/* Synchronous like the host backends' memset, so that the bytes are in
 * place whatever the caller does next. */
mla_status hip_set(mla_context *ctx, void *dst, int value, size_t bytes)
{
    if (bytes == 0)
        return MLA_OK;
    const mla_hip_device_scope scope(mla_hip_state_of(ctx)->device);
    if (scope.error() != hipSuccess)
        return mla_hip_fail(ctx, scope.error(), "selecting the context's GPU");
    hipError_t err = hipMemsetAsync(dst, value, bytes, mla_hip_state_of(ctx)->stream);
    if (err != hipSuccess)
        return mla_hip_fail(ctx, err, "hipMemsetAsync");
    return hip_sync(ctx);
}

bool is_float(mla_dtype d)
{
    return d == MLA_DTYPE_F32 || d == MLA_DTYPE_F16 || d == MLA_DTYPE_BF16;
}

bool is_fp8(mla_dtype d) { return d == MLA_DTYPE_FP8_E4M3FN || d == MLA_DTYPE_FP8_E4M3FNUZ; }

/* What the kernels of this backend implement. The entry points have checked
 * the arguments; this answers which of the valid variants run here, and
 * names the parameter of any that does not. It reads the variant alone (and
 * may read ctx->target, never the device state): tests/test_coverage.c asks
 * it on a context without a device and requires a conformance case for every
 * pair of variant axis values it accepts. */
const char *hip_supports(const mla_context *ctx, const mla_variant *v)
{
    (void)ctx;
    switch (v->op) {
    case MLA_OP_CONVERT:
        if (!is_float(v->in_dtype) && !is_fp8(v->in_dtype) && v->in_dtype != MLA_DTYPE_E8M0 &&
            v->in_dtype != MLA_DTYPE_FP4X2)
            return "x.dtype";
        if (!is_float(v->out_dtype) && !is_fp8(v->out_dtype) && v->out_dtype != MLA_DTYPE_FP4X2)
            return "y.dtype";
        return NULL;
    case MLA_OP_MXFP4_QUANT:
        if (!is_float(v->in_dtype))
            return "x.dtype";
        if (v->layout < 0 || v->layout >= MLA_SCALE_LAYOUT_COUNT)
            return "layout";
        if (v->rule < 0 || v->rule >= MLA_MXFP4_RULE_COUNT)
            return "rule";
        return v->group == 32 ? NULL : "group";
    case MLA_OP_MXFP4_DEQUANT:
        if (!is_float(v->out_dtype))
            return "y.dtype";
        if (v->layout < 0 || v->layout >= MLA_SCALE_LAYOUT_COUNT)
            return "layout";
        return v->group == 32 ? NULL : "group";
    case MLA_OP_FP8_GROUP_QUANT:
        if (!is_float(v->in_dtype))
            return "x.dtype";
        if (!is_fp8(v->out_dtype))
            return "codes.dtype";
        if (v->rule < 0 || v->rule >= MLA_FP8_SCALE_RULE_COUNT)
            return "rule";
        return v->group > 0 ? NULL : "group";
    case MLA_OP_FP8_GROUP_DEQUANT:
        if (!is_fp8(v->in_dtype))
            return "codes.dtype";
        if (!is_float(v->out_dtype))
            return "y.dtype";
        return v->group > 0 ? NULL : "group";
    /* MXFP4 GEMM path: every valid variant runs here (matrix units where
     * they reproduce fp32 arithmetic, FMA otherwise; hip/mxfp4_gemm.hip) */
    case MLA_OP_GEMM_A16WFP4:
        if (v->in_dtype != MLA_DTYPE_F32 && v->in_dtype != MLA_DTYPE_BF16)
            return "x.dtype";
        if (v->out_dtype != MLA_DTYPE_F32 && v->out_dtype != MLA_DTYPE_BF16)
            return "y.dtype";
        if (v->layout < 0 || v->layout >= MLA_SCALE_LAYOUT_COUNT)
            return "w.layout";
        return v->rule >= 0 && v->rule < MLA_MXFP4_RULE_COUNT ? NULL : "rule";
    case MLA_OP_GEMM_A4W4:
        if (v->out_dtype != MLA_DTYPE_F32 && v->out_dtype != MLA_DTYPE_BF16)
            return "y.dtype";
        return v->layout >= 0 && v->layout < MLA_SCALE_LAYOUT_COUNT ? NULL : "w.layout";
    case MLA_OP_FLATTEN_MXFP4_QUANT:
        if (!is_float(v->in_dtype))
            return "x.dtype";
        return v->rule >= 0 && v->rule < MLA_MXFP4_RULE_COUNT ? NULL : "rule";
    case MLA_OP_FLATTEN_FP8_QUANT:
        if (!is_float(v->in_dtype))
            return "x.dtype";
        return is_fp8(v->out_dtype) ? NULL : "codes.dtype";
    /* DSA indexer: every valid variant runs here (the logits' plain path
     * keeps a head of q in 32 KB of shared memory) */
    case MLA_OP_LAYERNORM:
    case MLA_OP_HADAMARD:
    case MLA_OP_INDEXER_K_CACHE_WRITE:
    case MLA_OP_INDEXER_K_GATHER:
    case MLA_OP_INDEXER_HEAD_WEIGHTS:
        return NULL;
    case MLA_OP_INDEXER_LOGITS:
        return v->cols <= 8192 ? NULL : "cache_desc.head_dim";
    case MLA_OP_TOPK: /* k (group) up to the model's 2048: hip/topk.hip */
        return v->cols > 0x7FFFFFFF ? "logits.shape" : v->group > 2048 ? "k" : NULL;
    /* prepare path: every valid variant runs here */
    case MLA_OP_RMSNORM:
        if (!is_float(v->in_dtype))
            return "x.dtype";
        return is_float(v->out_dtype) ? NULL : "y.dtype";
    case MLA_OP_QK_RMSNORM:
        if (!is_float(v->in_dtype))
            return "q.dtype";
        return is_float(v->out_dtype) || is_fp8(v->out_dtype) || v->out_dtype == MLA_DTYPE_FP4X2
                   ? NULL
                   : "q_out.dtype";
    case MLA_OP_ROPE:
        if (!is_float(v->in_dtype))
            return "x.dtype";
        if (!is_float(v->out_dtype))
            return "y.dtype";
        return v->rule >= 0 && v->rule < MLA_ROPE_STYLE_COUNT ? NULL : "style";
    case MLA_OP_LINEAR:
    case MLA_OP_BATCHED_GEMM:
        if (v->in_dtype != MLA_DTYPE_BF16 && !is_fp8(v->in_dtype))
            return "w.dtype";
        return v->out_dtype == MLA_DTYPE_F32 || v->out_dtype == MLA_DTYPE_BF16 ? NULL : "y.dtype";
    case MLA_OP_CACHE_WRITE:
    case MLA_OP_CACHE_GATHER:
    case MLA_OP_ROPE_CACHE:
        if (v->in_dtype != MLA_DTYPE_BF16 && !is_fp8(v->in_dtype))
            return "cache_desc.dtype";
        if (v->layout < 0 || v->layout >= MLA_CACHE_LAYOUT_COUNT)
            return "cache_desc.layout";
        if (v->op == MLA_OP_CACHE_GATHER && v->out_dtype != MLA_DTYPE_F32 &&
            v->out_dtype != MLA_DTYPE_BF16)
            return "out.dtype";
        if (v->op == MLA_OP_ROPE_CACHE && (v->rule < 0 || v->rule >= MLA_ROPE_STYLE_COUNT))
            return "style";
        return NULL;
    /* attention: every valid variant (hip/attention.hip; an L + R whose key
     * tile exceeds shared memory, past about 1900 on gfx9, is refused by
     * the run, naming cache_desc.kv_lora) */
    case MLA_OP_ATTENTION:
        if (v->in_dtype != MLA_DTYPE_BF16 && v->in_dtype != MLA_DTYPE_F32 && !is_fp8(v->in_dtype))
            return "desc.q_dtype";
        if (v->out_dtype != MLA_DTYPE_F32 && v->out_dtype != MLA_DTYPE_BF16)
            return "desc.out_dtype";
        if (v->layout < 0 || v->layout >= MLA_CACHE_LAYOUT_COUNT)
            return "cache_desc.layout";
        return v->rule == MLA_DTYPE_BF16 || is_fp8((mla_dtype)v->rule) ? NULL : "cache_desc.dtype";
    /* expanded attention: every valid variant (hip/attention_expanded.hip;
     * heads past nope + R = 256 or v = 192 are refused by the run) */
    case MLA_OP_ATTENTION_EXPANDED:
        if (v->in_dtype != MLA_DTYPE_BF16 && v->in_dtype != MLA_DTYPE_F32)
            return "desc.q_dtype";
        if (v->out_dtype != MLA_DTYPE_F32 && v->out_dtype != MLA_DTYPE_BF16)
            return "desc.out_dtype";
        if (v->layout < 0 || v->layout >= MLA_CACHE_LAYOUT_COUNT)
            return "cache_desc.layout";
        return v->rule == MLA_DTYPE_BF16 || is_fp8((mla_dtype)v->rule) ? NULL : "cache_desc.dtype";
    default:
        return "op";
    }
}

/* Designated, in the order of mla_backend_ops (C++ requires it): a slot
 * cannot silently take another's function of the same type. */
const mla_backend_ops hip_ops = {
    .name = "hip",
    .backend = MLA_BACKEND_HIP,
    .memory = MLA_MEMORY_DEVICE,
    .target = MLA_TARGET_COUNT, /* hip_init reads it off the device */
    .auto_order = 2,            /* AUTO's first choice */
    .init = hip_init,
    .fini = hip_fini,
    .mem_alloc = hip_alloc,
    .mem_free = hip_free,
    .mem_copy = hip_copy,
    .mem_set = hip_set,
    .synchronize = hip_sync,
    .supports = hip_supports,
    .convert = mla_hip_convert,
    .mxfp4_quant = mla_hip_mxfp4_quant,
    .mxfp4_dequant = mla_hip_mxfp4_dequant,
    .fp8_group_quant = mla_hip_fp8_group_quant,
    .fp8_group_dequant = mla_hip_fp8_group_dequant,
    .rmsnorm = mla_hip_rmsnorm,
    .qk_rmsnorm = mla_hip_qk_rmsnorm,
    .rope = mla_hip_rope,
    .linear = mla_hip_linear,
    .batched_gemm = mla_hip_batched_gemm,
    .cache_write = mla_hip_cache_write,
    .cache_gather = mla_hip_cache_gather,
    .rope_cache = mla_hip_rope_cache,
    .gemm_a16wfp4 = mla_hip_gemm_a16wfp4,
    .gemm_a4w4 = mla_hip_gemm_a4w4,
    .flatten_mxfp4_quant = mla_hip_flatten_mxfp4_quant,
    .flatten_fp8_quant = mla_hip_flatten_fp8_quant,
    .layernorm = mla_hip_layernorm,
    .hadamard = mla_hip_hadamard,
    .indexer_k_cache_write = mla_hip_indexer_k_cache_write,
    .indexer_k_gather = mla_hip_indexer_k_gather,
    .indexer_logits = mla_hip_indexer_logits,
    .topk = mla_hip_topk,
    .indexer_head_weights = mla_hip_indexer_head_weights,
    .attention = mla_hip_attention,
    .attention_expanded = mla_hip_attention_expanded,
    .paged_check_queue = mla_hip_paged_check_queue,
    .paged_check_verdict = mla_hip_paged_check_verdict,
    .set_stream = hip_set_stream,
    .get_stream = hip_get_stream,
    .attention_scratch = nullptr,
    .tuning_changed = nullptr,
};

} // namespace

mla_status mla_hip_check_tensor_memory(mla_context *ctx, const mla_tensor *t, const char *name)
{
    if (mla_tensor_numel(t) == 0)
        return MLA_OK;
    if (mla_hip_is_device_pointer(t->data, mla_hip_state_of(ctx)->device))
        return MLA_OK;
    return mla_fail(ctx, MLA_ERR_WRONG_DEVICE, name,
                    "%s: data is not memory of this context's GPU (device %d)", name,
                    mla_hip_state_of(ctx)->device);
}

unsigned mla_hip_grid_blocks(const mla_context *ctx, int64_t n, unsigned block)
{
    /* Enough resident blocks to cover latency; grid-stride loops do the rest. */
    const int64_t cap = (int64_t)mla_hip_state_of(ctx)->multiprocessors * 16;
    int64_t blocks = (n + block - 1) / block;
    if (blocks > cap)
        blocks = cap;
    return blocks < 1 ? 1u : (unsigned)blocks;
}

extern "C" const mla_backend_ops *mla_hip_ops(void) { return &hip_ops; }

extern "C" int mla_gpu_count(void)
{
    int count = 0;
    return device_count(&count) == hipSuccess && count > 0 ? count : 0;
}

extern "C" mla_status mla_gpu_name(int device, char *buf, size_t len)
{
    if (!buf)
        return MLA_ERR_NULL_POINTER;
    if (len == 0)
        return MLA_ERR_INVALID_ARGUMENT;
    int count = 0;
    if (device_count(&count) != hipSuccess || count <= 0)
        return MLA_ERR_NO_DEVICE;
    if (device < 0 || device >= count)
        return MLA_ERR_OUT_OF_RANGE;
    hipDeviceProp_t prop;
    if (hipGetDeviceProperties(&prop, device) != hipSuccess) {
        (void)hipGetLastError();
        return MLA_ERR_DEVICE;
    }
    (void)describe_device(prop, buf, len); /* a cut name is still the answer */
    return MLA_OK;
}
