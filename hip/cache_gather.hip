/* Latent cache gather: the rows of S sequences back as NORMAL rows
 * out [sum(seq_lens), L + R] (F32 or BF16), dequantized in fp32 as the
 * reference reads them (hip/cache_chunk.h), one rounding to out's dtype.
 *
 * A wave per kRows consecutive output rows, its lanes over the 8-value
 * chunks of a row. Row n is token j of sequence s, where s's rows start at
 * the sum of the lengths before it; each wave finds s by walking seq_lens
 * (forwards only: its rows only grow), a wave's worth of lengths per step
 * when far away, so no prefix sums need a buffer or a host round trip. */
#include "hip/cache_chunk.h"

namespace {

constexpr int kRows = 4;

struct cg_desc {
    cache_dev c;
    const int32_t *table, *lens;
    void *out;
    int64_t ts0, ts1, ls, S, rows;
    int64_t os0, os1;
    int64_t nope_chunks, per_row;
};

MLA_DEV long long wave_sum_i64(long long v)
{
    for (int o = MLA_WAVE_SIZE / 2; o > 0; o /= 2)
        v += mla_shfl_xor(v, o);
    return v;
}

/* Moves (s, start) = (a sequence, its first output row) forwards until row
 * n < rows lies in sequence s. Wave-uniform. */
MLA_DEV void find_sequence(const cg_desc &d, int64_t n, int64_t &s, int64_t &start, int lane)
{
    for (;;) {
        const int64_t len = d.lens[s * d.ls];
        if (n < start + len)
            return;
        const int64_t k = s + lane;
        const int64_t span = wave_sum_i64(k < d.S ? d.lens[k * d.ls] : 0);
        if (start + span <= n) { /* past all of s .. s + W - 1 */
            start += span;
            s += MLA_WAVE_SIZE;
        } else {
            start += len;
            ++s;
        }
    }
}

template <int CT, int OT>
__global__ __launch_bounds__(MLA_HIP_BLOCK) void cache_gather_kernel(cg_desc d)
{
    constexpr int W = MLA_WAVE_SIZE;
    const int lane = (int)(threadIdx.x % W);
    const int64_t waves = (int64_t)gridDim.x * (blockDim.x / W);
    int64_t s = 0, start = 0;
    const int wave = mla_wave_uniform((int)(threadIdx.x / W));
    for (int64_t n0 = ((int64_t)blockIdx.x * (blockDim.x / W) + wave) * kRows; n0 < d.rows;
         n0 += waves * kRows) {
        for (int64_t n = n0; n < n0 + kRows && n < d.rows; ++n) {
            find_sequence(d, n, s, start, lane);
            int64_t jb, t; /* block index in the sequence's table, token in the block */
            divmod64(n - start, d.c.bs, jb, t);
            const int64_t block = d.table[s * d.ts0 + jb * d.ts1];
            for (int64_t c = lane; c < d.per_row; c += W) {
                const bool nope = c < d.nope_chunks;
                const int64_t d0 = nope ? c * kChunk : d.c.L + (c - d.nope_chunks) * kChunk;
                const int cnt = chunk_len((nope ? d.c.L : d.c.L + d.c.R) - d0);
                float v[kChunk];
                cache_get<CT>(d.c, block, t, d0, cnt, v);
                store8<OT>(d.out, n * d.os0 + d0 * d.os1, d.os1, cnt, v);
            }
        }
    }
}

} // namespace

mla_status mla_hip_cache_gather(mla_context *ctx, const mla_cache_gather_args *a)
{
    const mla_hip_device_scope scope(mla_hip_state_of(ctx)->device);
    if (scope.error() != hipSuccess)
        return mla_hip_fail(ctx, scope.error(), "selecting the context's GPU");
    const mla_tensor *t[] = {&a->cache, &a->block_table, &a->seq_lens, &a->out};
    const char *names[] = {"cache", "block_table", "seq_lens", "out"};
    for (int k = 0; k < 4; ++k) {
        mla_status st = mla_hip_check_tensor_memory(ctx, t[k], names[k]);
        if (st != MLA_OK)
            return st;
    }
    cg_desc d = {};
    const mla_status st = make_cache_dev(ctx, a->desc, a->cache, d.c);
    if (st != MLA_OK)
        return st;
    d.table = static_cast<const int32_t *>(a->block_table.data);
    d.lens = static_cast<const int32_t *>(a->seq_lens.data);
    d.out = a->out.data;
    d.ts0 = a->block_table.stride[0];
    d.ts1 = a->block_table.stride[1];
    d.ls = a->seq_lens.stride[0];
    d.S = a->seq_lens.shape[0];
    d.rows = a->out.shape[0]; /* the entry point checked it is sum(seq_lens) */
    d.os0 = a->out.stride[0];
    d.os1 = a->out.stride[1];
    d.nope_chunks = (a->desc.kv_lora + kChunk - 1) / kChunk;
    d.per_row = d.nope_chunks + (a->desc.rope + kChunk - 1) / kChunk;
    if (d.rows == 0)
        return MLA_OK;
    const unsigned blocks =
        mla_hip_grid_blocks(ctx, (d.rows + kRows - 1) / kRows * MLA_WAVE_SIZE, MLA_HIP_BLOCK);
    hipStream_t stream = mla_hip_state_of(ctx)->stream;
    return with_cache_dtype(a->desc.dtype, [&](auto ct) {
        constexpr int CT = decltype(ct)::value;
        if (a->out.dtype == MLA_DTYPE_F32)
            cache_gather_kernel<CT, MLA_DTYPE_F32><<<blocks, MLA_HIP_BLOCK, 0, stream>>>(d);
        else
            cache_gather_kernel<CT, MLA_DTYPE_BF16><<<blocks, MLA_HIP_BLOCK, 0, stream>>>(d);
        return mla_hip_check_launch(ctx, "cache_gather kernel launch");
    });
}
