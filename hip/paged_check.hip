/* The index check of a paged call on the device: every lens[s] in [lo, hi]
 * and the first ceil(lens[s] / bs) block ids of row s of the table in [0,
 * num_blocks). The core's host check reads both tensors back and walks them
 * (for the indexer's tables, B x C / 64 ids: 512 KB at batch 64 and 128k
 * keys, most of the call); here one thread per table entry tests it where
 * it lies and only a flag comes back. A flagged call then takes the host
 * check, which names the first bad entry, so the statuses and messages are
 * the host's. Without a table (top-k's row lengths) the lengths alone.
 *
 * The flag is a word of pinned host memory that the kernel writes only on
 * a bad entry: the host zeroes it before the launch and reads it after the
 * stream is idle, with no memset or copy on the stream (each a call of a
 * few microseconds, in a check that the indexer pays on every call). */
#include "hip/device_util.h"
#include "hip/hip_internal.h"

namespace
{

constexpr int kThreads = 256;

struct pc_desc {
    const int32_t *lens, *table;
    int64_t ls, ts0, ts1, S, MB, lo, hi, bs, nb;
};

__global__ __launch_bounds__(kThreads) void paged_check_kernel(pc_desc d, volatile int32_t *bad)
{
    const int64_t n = d.S * d.MB;
    for (int64_t i = (int64_t)blockIdx.x * kThreads + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * kThreads) {
        const int64_t s = i / d.MB, j = i - s * d.MB, len = d.lens[s * d.ls];
        bool fail;
        if (len < d.lo || len > d.hi) {
            fail = j == 0;
        } else if (d.table && j < (len + d.bs - 1) / d.bs) {
            const int64_t v = d.table[s * d.ts0 + j * d.ts1];
            fail = v < 0 || v >= d.nb;
        } else {
            fail = false;
        }
        if (fail)
            *bad = 1; /* every writer stores the same value */
    }
}

} // namespace

mla_status mla_hip_paged_indices_ok(mla_context *ctx, const mla_tensor *lens, int64_t lo,
                                    int64_t hi, const mla_tensor *table, int64_t block_size,
                                    int64_t num_blocks, int *ok)
{
    *ok = 0;
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
    if (!s->flag) {
        void *p = NULL;
        hipError_t err = hipHostMalloc(&p, sizeof(int32_t), hipHostMallocDefault);
        if (err != hipSuccess) {
            (void)hipGetLastError();
            return mla_fail(ctx, MLA_ERR_OUT_OF_MEMORY, NULL, "hipHostMalloc of the check flag: %s",
                            hipGetErrorString(err));
        }
        s->flag = static_cast<volatile int32_t *>(p);
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
    if (d.MB == 0) /* no entry to carry a length's verdict: the host check */
        return MLA_OK;
    /* the previous check waited for its kernel: nothing on the device
     * writes the word now */
    *s->flag = 0;
    if (d.S > 0) {
        paged_check_kernel<<<mla_hip_grid_blocks(ctx, d.S * d.MB, kThreads), kThreads, 0,
                             s->stream>>>(d, s->flag);
        const mla_status st = mla_hip_check_launch(ctx, "paged index check kernel launch");
        if (st != MLA_OK)
            return st;
    }
    const hipError_t err = hipStreamSynchronize(s->stream);
    if (err != hipSuccess)
        return mla_hip_fail(ctx, err, "waiting for the index check");
    *ok = *s->flag == 0;
    return MLA_OK;
}
