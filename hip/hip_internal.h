/* Shared by the HIP backend's translation units: the context state, the
 * status helpers every op uses, and the op entry points the table holds. */
#ifndef MLA_HIP_HIP_INTERNAL_H
#define MLA_HIP_HIP_INTERNAL_H

#include <stdint.h>
#include <string.h>

#include "core/backend.h"
#include "hip/vendor.h"

/* ctx->impl of a HIP context. */
struct mla_hip_state {
    int device;
    int multiprocessors; /* CUs / SMs, to size grid-stride launches */
    hipStream_t stream;  /* where work is queued now (mla_context_set_stream) */
    hipStream_t created; /* the stream init created (options.stream NULL), destroyed by fini */
    bool own_stream;     /* created is valid */
    hipEvent_t switched; /* recorded on the old stream at a switch (made at the first one) */
    void *scratch;   /* device memory of the ops that need some (mla_hip_scratch); freed by fini */
    size_t scratch_bytes;
    /* the device index check (paged_check.hip): the words its kernel sets to
     * the ticket of a check that found a bad entry (pinned host memory, read
     * without a copy; device memory, read by the gated kernels), the event
     * after its latest kernel, its latest ticket; freed by fini */
    volatile uint32_t *check_host;
    uint32_t *check_dev;
    hipEvent_t check_done;
    uint32_t check_ticket;
    /* the loaded kernels are sm_90 or later (mla_hip_loaded_pdl), so a kernel
     * may be launched as a programmatic dependent of the one before it: the
     * gated ones of the check (mla_gate_closed waits), the search's top-k of
     * its logits (griddepcontrol.wait); an sm_80 binary on a newer device
     * has no such wait */
    bool pdl;
};

static inline mla_hip_state *mla_hip_state_of(const mla_context *ctx)
{
    return static_cast<mla_hip_state *>(ctx->impl);
}

/* What a kernel queued behind the device index check (paged_check.hip)
 * reads first: the check's device word and the op's ticket (0: ungated). */
struct mla_gate {
    const uint32_t *word;
    uint32_t ticket;
};

static inline mla_gate mla_hip_gate(const mla_context *ctx, uint32_t ticket)
{
    return mla_gate{mla_hip_state_of(ctx)->check_dev, ticket};
}

/* The runtime's description of err, or "" where it only repeats the name
 * (ROCm 5's hipGetErrorString does). Written after the name and ": ". */
static inline const char *mla_hip_error_text(hipError_t err)
{
    const char *name = hipGetErrorName(err), *text = hipGetErrorString(err);
    return (text && name && strcmp(text, name) != 0) ? text : "";
}

/* A failed runtime call: MLA_ERR_DEVICE with the runtime's own words. */
static inline mla_status mla_hip_fail(mla_context *ctx, hipError_t err, const char *what)
{
    const char *text = mla_hip_error_text(err);
    return mla_fail(ctx, MLA_ERR_DEVICE, NULL, "%s failed: %s%s%s", what, hipGetErrorName(err),
                    text[0] ? ": " : "", text);
}

/* Makes `device` the calling thread's current device for the scope and gives
 * the caller's own current device back at its end: the current device is
 * per-thread state of the application, and a context may be used from any
 * thread, so every call that queues work enters one of these first. */
class mla_hip_device_scope {
  public:
    explicit mla_hip_device_scope(int device)
    {
        err_ = hipGetDevice(&prev_);
        if (err_ == hipSuccess && prev_ != device) {
            err_ = hipSetDevice(device);
            switched_ = err_ == hipSuccess;
        }
    }
    ~mla_hip_device_scope()
    {
        if (switched_)
            (void)hipSetDevice(prev_);
    }
    mla_hip_device_scope(const mla_hip_device_scope &) = delete;
    mla_hip_device_scope &operator=(const mla_hip_device_scope &) = delete;
    hipError_t error() const { return err_; }

  private:
    int prev_ = 0;
    bool switched_ = false;
    hipError_t err_;
};

/* After a launch: a bad configuration or a dead device shows up here. Errors
 * of the kernel's execution surface at the next synchronizing call. */
static inline mla_status mla_hip_check_launch(mla_context *ctx, const char *kernel)
{
    hipError_t err = hipGetLastError();
    return err == hipSuccess ? MLA_OK : mla_hip_fail(ctx, err, kernel);
}

/* MLA_OK when t's data is memory of the context's device (an empty tensor
 * needs none). Catches host pointers that were declared device memory, which
 * would otherwise fault inside a kernel. */
mla_status mla_hip_check_tensor_memory(mla_context *ctx, const mla_tensor *t, const char *name);

/* Blocks for a grid-stride loop over n work items: enough to fill the
 * device, never more than the items need. */
unsigned mla_hip_grid_blocks(const mla_context *ctx, int64_t n, unsigned block);

/* The ops, one file each. */
mla_status mla_hip_convert(mla_context *ctx, const mla_convert_args *a);
mla_status mla_hip_mxfp4_quant(mla_context *ctx, const mla_mxfp4_quant_args *a);
mla_status mla_hip_mxfp4_dequant(mla_context *ctx, const mla_mxfp4_dequant_args *a);
mla_status mla_hip_fp8_group_quant(mla_context *ctx, const mla_fp8_group_quant_args *a);
mla_status mla_hip_fp8_group_dequant(mla_context *ctx, const mla_fp8_group_dequant_args *a);
mla_status mla_hip_rmsnorm(mla_context *ctx, const mla_rmsnorm_args *a);
mla_status mla_hip_qk_rmsnorm(mla_context *ctx, const mla_qk_rmsnorm_args *a);
mla_status mla_hip_rope(mla_context *ctx, const mla_rope_args *a);
mla_status mla_hip_linear(mla_context *ctx, const mla_linear_args *a);
mla_status mla_hip_batched_gemm(mla_context *ctx, const mla_batched_gemm_args *a);
mla_status mla_hip_cache_write(mla_context *ctx, const mla_cache_write_args *a);
mla_status mla_hip_cache_gather(mla_context *ctx, const mla_cache_gather_args *a);
mla_status mla_hip_rope_cache(mla_context *ctx, const mla_rope_cache_op_args *a);
mla_status mla_hip_gemm_a16wfp4(mla_context *ctx, const mla_mxfp4_gemm_args *a);
mla_status mla_hip_gemm_a4w4(mla_context *ctx, const mla_mxfp4_gemm_args *a);
mla_status mla_hip_flatten_mxfp4_quant(mla_context *ctx, const mla_flatten_quant_args *a);
mla_status mla_hip_flatten_fp8_quant(mla_context *ctx, const mla_flatten_quant_args *a);
mla_status mla_hip_layernorm(mla_context *ctx, const mla_layernorm_args *a);
mla_status mla_hip_hadamard(mla_context *ctx, const mla_hadamard_args *a);
mla_status mla_hip_indexer_k_cache_write(mla_context *ctx, const mla_indexer_cache_args *a);
mla_status mla_hip_indexer_k_gather(mla_context *ctx, const mla_indexer_cache_args *a);
mla_status mla_hip_indexer_logits(mla_context *ctx, const mla_indexer_logits_args *a);
mla_status mla_hip_topk(mla_context *ctx, const mla_topk_args *a);
mla_status mla_hip_paged_check_queue(mla_context *ctx, const mla_tensor *lens, int64_t lo,
                                     int64_t hi, const mla_tensor *table, int64_t block_size,
                                     int64_t num_blocks, uint32_t *gate);
mla_status mla_hip_paged_check_verdict(mla_context *ctx, uint32_t gate, int *ok);
/* Whether the library's loaded kernels (one fat binary) are sm_90 or later:
 * mla_hip_state::pdl. Call with the context's device current. */
bool mla_hip_loaded_pdl(void);
mla_status mla_hip_indexer_head_weights(mla_context *ctx, const mla_head_weights_args *a);
mla_status mla_hip_attention(mla_context *ctx, const struct mla_attention_op_args *a);
mla_status mla_hip_attention_expanded(mla_context *ctx,
                                      const struct mla_attention_expanded_op_args *a);

/* At least `bytes` of device memory owned by the context, zeroed when it is
 * first allocated (or grown); ops that use it leave it as they need to find
 * it. Ordered on the context's stream. */
mla_status mla_hip_scratch(mla_context *ctx, size_t bytes, void **out);

#endif
