/* The index check of a paged call on the device: every lens[s] in [lo, hi]
 * and the first ceil(lens[s] / bs) block ids of row s of the table in [0,
 * num_blocks). The core's host check reads both tensors back and walks them
 * (for the indexer's tables, B x C / 64 ids: 512 KB at batch 64 and 128k
 * keys, most of the call); here one thread per table entry tests it where
 * it lies. Without a table (top-k's row lengths) the lengths alone.
 *
 * The check gates the op queued behind it instead of holding it back: the
 * kernel stores its ticket into a device word (which the op's kernels read
 * first, mla_gate_closed, and then write nothing) and into a word of pinned
 * host memory, only on a bad entry. The host waits for the check's event
 * alone, after it has queued the op, so the device runs check and op back to
 * back while the host waits; a flagged call then takes the host check, which
 * names the first bad entry. Tickets only grow, so neither word is ever
 * reset (no memset on the stream). */
#include "hip/device_util.h"
#include "hip/hip_internal.h"

namespace
{

constexpr int kThreads = 256;

struct pc_desc {
    const int32_t *lens, *table;
    int64_t ls, ts0, ts1, S, MB, lo, hi, bs, nb;
};

__global__ __launch_bounds__(kThreads) void paged_check_kernel(pc_desc d, uint32_t ticket,
                                                               uint32_t *dev_word,
                                                               volatile uint32_t *host_word)
{
    mla_let_dependents(); /* the gated op may be placed now */
    const int64_t n = d.S * d.MB;
    for (int64_t i = (int64_t)blockIdx.x * kThreads + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * kThreads) {
        const int64_t s = i / d.MB, j = i - s * d.MB;
        /* both loads at once (the entry lies in the table whatever the
         * length): one memory latency a call, not two */
        const int64_t len = d.lens[s * d.ls], v = d.table ? d.table[s * d.ts0 + j * d.ts1] : 0;
        bool fail;
        if (len < d.lo || len > d.hi)
            fail = j == 0;
        else
            fail = d.table && j < (len + d.bs - 1) / d.bs && (v < 0 || v >= d.nb);
        if (fail) { /* every writer stores the same value */
            *dev_word = ticket;
            *host_word = ticket;
        }
    }
}

/* The words and the event, made by the first check of the context (the
 * words are zeroed by its first ticket). */
mla_status check_state(mla_context *ctx, mla_hip_state *s)
{
    if (s->check_dev)
        return MLA_OK;
    void *h = NULL, *dv = NULL;
    hipEvent_t ev = NULL;
    hipError_t err = hipHostMalloc(&h, sizeof(uint32_t), hipHostMallocDefault);
    if (err == hipSuccess)
        err = hipMalloc(&dv, sizeof(uint32_t));
    if (err == hipSuccess)
        err = hipEventCreateWithFlags(&ev, hipEventDisableTiming);
    if (err != hipSuccess) {
        (void)hipGetLastError();
        if (h)
            (void)hipHostFree(h);
        if (dv)
            (void)hipFree(dv);
        return mla_hip_fail(ctx, err, "allocating the index check's words");
    }
    s->check_host = static_cast<volatile uint32_t *>(h);
    s->check_dev = static_cast<uint32_t *>(dv);
    s->check_done = ev;
    return MLA_OK;
}

} // namespace

bool mla_hip_loaded_pdl(void)
{
#if defined(__CUDACC__) && !defined(MLA_HIP_EMU_HIP_COMPAT_H)
    /* every kernel of the library comes from the same fat binary, so this
     * one's loaded version is theirs */
    cudaFuncAttributes fa;
    const bool sm90 = cudaFuncGetAttributes(&fa, paged_check_kernel) == cudaSuccess &&
                      fa.binaryVersion >= 90;
    (void)cudaGetLastError();
    return sm90;
#else
    return false;
#endif
}

mla_status mla_hip_paged_check_queue(mla_context *ctx, const mla_tensor *lens, int64_t lo,
                                     int64_t hi, const mla_tensor *table, int64_t block_size,
                                     int64_t num_blocks, uint32_t *gate)
{
    *gate = 0;
    mla_hip_state *s = mla_hip_state_of(ctx);
    const mla_hip_device_scope scope(s->device);
    if (scope.error() != hipSuccess)
        return mla_hip_fail(ctx, scope.error(), "selecting the context's GPU");
    const mla_tensor *ts[2] = {lens, table};
    const char *names[2] = {"lens", "block_table"};
    for (int i = 0; i < 2; ++i) {
        const mla_status st = ts[i] ? mla_hip_check_tensor_memory(ctx, ts[i], names[i]) : MLA_OK;
        if (st != MLA_OK)
            return st;
    }
    pc_desc d;
    d.lens = static_cast<const int32_t *>(lens->data);
    d.table = table ? static_cast<const int32_t *>(table->data) : NULL;
    d.ls = lens->stride[0];
    d.ts0 = table ? table->stride[0] : 0;
    d.ts1 = table ? table->stride[1] : 0;
    d.S = lens->shape[0];
    d.MB = table ? table->shape[1] : 1;
    d.lo = lo;
    d.hi = hi;
    d.bs = block_size;
    d.nb = num_blocks;
    if (d.S == 0 || d.MB == 0) /* no entry to carry a length's verdict: the host check */
        return MLA_OK;
    mla_status st = check_state(ctx, s);
    if (st != MLA_OK)
        return st;
    const uint32_t ticket = s->check_ticket == UINT32_MAX ? 1 : s->check_ticket + 1;
    if (ticket == 1) { /* first use, or the tickets wrapped: no word holds one yet */
        *s->check_host = 0;
        const hipError_t err = hipMemsetAsync(s->check_dev, 0, sizeof(uint32_t), s->stream);
        if (err != hipSuccess)
            return mla_hip_fail(ctx, err, "hipMemsetAsync of the index check's word");
    }
    paged_check_kernel<<<mla_hip_grid_blocks(ctx, d.S * d.MB, kThreads), kThreads, 0, s->stream>>>(
        d, ticket, s->check_dev, s->check_host);
    st = mla_hip_check_launch(ctx, "paged index check kernel launch");
    if (st != MLA_OK)
        return st;
    const hipError_t err = hipEventRecord(s->check_done, s->stream);
    if (err != hipSuccess)
        return mla_hip_fail(ctx, err, "hipEventRecord after the index check");
    s->check_ticket = ticket;
    *gate = ticket;
    return MLA_OK;
}

mla_status mla_hip_paged_check_verdict(mla_context *ctx, uint32_t gate, int *ok)
{
    *ok = 0;
    mla_hip_state *s = mla_hip_state_of(ctx);
    const mla_hip_device_scope scope(s->device);
    if (scope.error() != hipSuccess)
        return mla_hip_fail(ctx, scope.error(), "selecting the context's GPU");
    const hipError_t err = hipEventSynchronize(s->check_done);
    if (err != hipSuccess)
        return mla_hip_fail(ctx, err, "waiting for the index check");
    *ok = *s->check_host != gate;
    return MLA_OK;
}
