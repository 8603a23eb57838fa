/* Top-k of the DSA indexer (spec section 6), indices identical to the
 * reference (core/ref/topk.c): per row r, the min(k, len) largest of
 * logits[r, 0:len], largest first, ties to the lower index (+0 and -0 tie),
 * NaN below every number (NaNs by index), -1 padding to k.
 *
 * The order is the unsigned order of one 64-bit key per element,
 *     K = key32 << 32 | (2^32 - 1 - n),
 *     key32: NaN -> 0; -0 -> +0; x >= +0 -> bits | 2^31; x < 0 -> ~bits
 * (the CPU backend's key; the index half makes every K distinct and puts
 * the lower index first among equal values). The answer is the m = min(k,
 * len) largest K, sorted descending. K = 0 marks "no element" (n >= len):
 * every real K is above it.
 *
 * Radix select over K, 11 bits a level (6 levels at most), cooperatively:
 * G blocks share a row, each holding its slice of the row in registers
 * (TILE = 8192 keys of 16 per thread; longer slices re-read their tiles).
 * A level: every block histograms the digit of its keys that match the
 * prefix so far (shared-memory atomics), adds the non-zero bins into the
 * row's global histogram, and arrives; the last block to arrive finds the
 * digit of the m-th largest, publishes the new prefix and zeroes the
 * histogram; the others wait for that. As soon as the bucket of the m-th
 * largest holds at most CAND keys, every block writes its keys above the
 * bucket ("sure", fewer than m) and in it ("candidates") to the row's
 * lists, and the last block to arrive sorts the two lists together
 * (bitonic, descending, in shared memory) and writes the first m indices
 * and the -1 padding. Different bucket contents give the same answer: the
 * sort is over distinct keys, so the bits never depend on timing.
 *
 * Blocks that wait for other blocks must be resident with them: a block
 * takes a ticket when it starts, and its row is ticket / G, so the blocks a
 * row waits for started earlier or alongside it (the rows before it need
 * nothing later), and G is at most the number of multiprocessors. The
 * per-row state lives in the context's scratch, zeroed once, and every
 * launch leaves it zeroed (the last blocks reset what they used).
 *
 * k > KMAX = 2048 (beyond the model) runs in batches of KMAX positions: a
 * batch takes the largest K below the last one the previous batch chose. */
#include "hip/indexer_util.h"

namespace {

#if MLA_IDX_EMU
/* small enough that the emulation's few thousand keys cover every path:
 * several blocks per row, several tiles per slice, several batches and
 * levels */
constexpr int kThreads = 128;
constexpr int kPer = 4;
constexpr int kKmax = 128;
constexpr int kCand = 128;
constexpr int kGmax = 4;
#else
constexpr int kThreads = 512;
constexpr int kPer = 16;
constexpr int kKmax = 2048;
constexpr int kCand = 2048;
constexpr int kGmax = 64;
#endif
constexpr int64_t kTile = (int64_t)kThreads * kPer;
constexpr int kBits = 11;
constexpr int kBins = 1 << kBits;
constexpr int kSort = kKmax + kCand; /* a power of two */
constexpr int kRowsPerLaunch = 128;
static_assert((kSort & (kSort - 1)) == 0, "the sort buffer is a power of two");
static_assert(kBins % kThreads == 0, "whole bins per thread");

/* Per row, in the scratch. Zero between launches, except ceil. */
struct tk_row {
    uint32_t hist[kBins];
    uint32_t arrive, release, nsure, ncand;
    uint32_t res_bin, res_above, res_mode, pad;
    uint64_t ceil; /* the last key the previous batch chose */
    uint64_t sure[kKmax];
    uint64_t cand[kCand];
};

struct tk_global {
    uint32_t ticket, done;
    uint32_t pad[62];
};

struct tk_desc {
    int64_t N, k, base; /* row length, k, first output position of the batch */
    int64_t row0, G, S, tiles;
    int64_t ls0, ls1, lens, is0, is1;
};

/* Shared memory of a block. */
struct tk_smem {
    uint32_t hist[kBins];
    uint64_t sort[kSort];
    uint32_t scan[kThreads];
    uint32_t ticket, finisher, bin, above, mode;
};

MLA_DEV uint32_t order_key(float v)
{
    uint32_t u = mla_fb_bits(v);
    u = u == 0x80000000u ? 0u : u;
    const uint32_t k = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
    return (u & 0x7FFFFFFFu) > 0x7F800000u ? 0u : k;
}

/* Keys of tile `tile` of this block's slice [lo, hi): element e of thread
 * t is index lo + tile * TILE + e * THREADS + t; 0 outside the slice and at
 * or above the ceiling. */
MLA_DEV void load_tile(const float *row, int64_t ls1, int64_t lo, int64_t hi, int64_t tile,
                       uint64_t ceil, uint64_t kk[kPer])
{
#pragma unroll
    for (int e = 0; e < kPer; ++e) {
        const int64_t n = lo + tile * kTile + (int64_t)e * kThreads + threadIdx.x;
        uint64_t K = 0;
        if (n < hi) {
            K = ((uint64_t)order_key(row[n * ls1]) << 32) | (uint64_t)(0xFFFFFFFFu - (uint32_t)n);
            K = K < ceil ? K : 0;
        }
        kk[e] = K;
    }
}

/* Waits until the row's stage counter passes `stage` (thread 0 only). */
MLA_DEV void wait_release(const tk_row *st, uint32_t stage)
{
    while (ld_shared_u32(&st->release) <= stage)
        idx_pause();
    idx_fence();
}

/* The last block of the row to arrive at a stage gets true (every thread). */
MLA_DEV bool arrive(tk_row *st, tk_smem &sm, int64_t G)
{
    idx_fence();
    idx_sync();
    if (threadIdx.x == 0)
        sm.finisher = atomicAdd(&st->arrive, 1u) == (uint32_t)(G - 1);
    idx_sync();
    const bool last = sm.finisher != 0;
    if (last)
        idx_fence();
    return last;
}

/* Bitonic sort of sort[0, n) descending, n a power of two. */
MLA_DEV void sort_desc(uint64_t *s, int n)
{
    for (int size = 2; size <= n; size *= 2)
        for (int stride = size / 2; stride > 0; stride /= 2) {
            for (int i = (int)threadIdx.x; i < n / 2; i += kThreads) {
                const int lo = 2 * stride * (i / stride) + i % stride, hi = lo + stride;
                const bool desc = (lo & size) == 0;
                const uint64_t a = s[lo], b = s[hi];
                if ((a < b) == desc) {
                    s[lo] = b;
                    s[hi] = a;
                }
            }
            idx_sync();
        }
}

enum { MODE_NEXT = 0, MODE_COLLECT = 1 };

__global__ __launch_bounds__(kThreads) void topk_kernel(const float *logits, const int32_t *lengths,
                                                        int32_t *indices, tk_global *glob,
                                                        tk_row *rows, tk_desc d)
{
    MLA_IDX_SMEM(tk_smem, smp);
    tk_smem &sm = *smp;
    const int tid = (int)threadIdx.x;
    if (tid == 0)
        sm.ticket = atomicAdd(&glob->ticket, 1u);
    idx_sync();
    const int64_t ticket = sm.ticket, rl = ticket / d.G, part = ticket - rl * d.G;
    const int64_t r = d.row0 + rl;
    const int64_t len = lengths[r * d.lens];
    const int64_t m_total = d.k < len ? d.k : len;
    const int64_t m = m_total - d.base < kKmax ? m_total - d.base : kKmax;
    const int64_t positions = d.k - d.base < kKmax ? d.k - d.base : kKmax;
    int32_t *out = indices + r * d.is0;
    tk_row *st = rows + rl;

    if (m <= 0) {
        for (int64_t c = tid; part == 0 && c < positions; c += kThreads)
            out[(d.base + c) * d.is1] = -1;
    } else {
        const float *row = logits + r * d.ls0;
        const uint64_t ceil = d.base > 0 ? ld_shared_u64(&st->ceil) : ~0ull;
        const int64_t lo = part * d.S, hi = lo + d.S < len ? lo + d.S : len;
        uint64_t kk[kPer];
        if (d.tiles == 1)
            load_tile(row, d.ls1, lo, hi, 0, ceil, kk);

        /* ---- levels: the prefix P (bits above `shift`) of the m-th largest */
        uint64_t P = 0, mask = 0;
        int shift = 64;
        uint32_t need = (uint32_t)m, stage = 0;
        for (;;) {
            const int b = shift > kBits ? kBits : shift, ds = shift - b;
            const uint32_t dmask = (1u << b) - 1u;
            for (int i = tid; i < kBins; i += kThreads)
                sm.hist[i] = 0;
            idx_sync();
            for (int64_t tile = 0; tile < d.tiles; ++tile) {
                if (d.tiles > 1)
                    load_tile(row, d.ls1, lo, hi, tile, ceil, kk);
#pragma unroll
                for (int e = 0; e < kPer; ++e)
                    if (kk[e] != 0 && (kk[e] & mask) == P)
                        atomicAdd(&sm.hist[(uint32_t)(kk[e] >> ds) & dmask], 1u);
            }
            idx_sync();
            for (int i = tid; i < kBins; i += kThreads)
                if (sm.hist[i])
                    atomicAdd(&st->hist[i], sm.hist[i]);
            if (arrive(st, sm, d.G)) {
                /* the row's histogram, zeroed behind us for the next level */
                for (int i = tid; i < kBins; i += kThreads) {
                    sm.hist[i] = ld_shared_u32(&st->hist[i]);
                    st->hist[i] = 0;
                }
                idx_sync();
                /* thread t owns bins [t q, t q + q); the bin of the need-th largest */
                constexpr int q = kBins / kThreads;
                uint32_t s = 0;
                for (int i = 0; i < q; ++i)
                    s += sm.hist[tid * q + i];
                const uint32_t incl = block_scan_u32<true>(s, sm.scan);
                uint32_t acc = incl - s;
                if (s != 0 && acc < need && need <= incl)
                    for (int i = q - 1; i >= 0; --i) {
                        const uint32_t h = sm.hist[tid * q + i];
                        if (acc + h >= need) {
                            sm.bin = (uint32_t)(tid * q + i);
                            sm.above = acc;
                            break;
                        }
                        acc += h;
                    }
                idx_sync();
                if (tid == 0) {
                    st->res_bin = sm.bin;
                    st->res_above = sm.above;
                    st->res_mode = sm.hist[sm.bin] <= (uint32_t)kCand ? MODE_COLLECT : MODE_NEXT;
                    st->arrive = 0;
                    idx_fence();
                    atomicExch(&st->release, stage + 1u);
                }
            } else if (tid == 0) {
                wait_release(st, stage);
            }
            if (tid == 0) {
                sm.bin = ld_shared_u32(&st->res_bin);
                sm.above = ld_shared_u32(&st->res_above);
                sm.mode = ld_shared_u32(&st->res_mode);
            }
            idx_sync();
            P |= (uint64_t)sm.bin << ds;
            mask |= (uint64_t)dmask << ds;
            need -= sm.above;
            shift = ds;
            ++stage;
            const uint32_t mode = sm.mode;
            idx_sync(); /* sm.bin etc. are rewritten by the next level */
            if (mode == MODE_COLLECT)
                break;
        }

        /* ---- collect: keys above the bucket (sure) and in it (candidates),
         * staged in shared memory, then appended to the row's lists */
        if (tid == 0) {
            sm.bin = 0;   /* sure, staged at sort[0, kKmax) */
            sm.above = 0; /* candidates, staged at sort[kKmax, kSort) */
        }
        idx_sync();
        for (int64_t tile = 0; tile < d.tiles; ++tile) {
            if (d.tiles > 1)
                load_tile(row, d.ls1, lo, hi, tile, ceil, kk);
#pragma unroll
            for (int e = 0; e < kPer; ++e) {
                const uint64_t K = kk[e], top = K & mask;
                if (K == 0 || top < P)
                    continue;
                if (top > P)
                    sm.sort[atomicAdd(&sm.bin, 1u)] = K;
                else
                    sm.sort[kKmax + atomicAdd(&sm.above, 1u)] = K;
            }
        }
        idx_sync();
        const uint32_t ns = sm.bin, nc = sm.above;
        idx_sync(); /* everyone has the counts before thread 0 reuses the words */
        if (tid == 0) {
            sm.bin = atomicAdd(&st->nsure, ns);
            sm.above = atomicAdd(&st->ncand, nc);
        }
        idx_sync();
        for (uint32_t i = tid; i < ns; i += kThreads)
            st->sure[sm.bin + i] = sm.sort[i];
        for (uint32_t i = tid; i < nc; i += kThreads)
            st->cand[sm.above + i] = sm.sort[kKmax + i];
        if (arrive(st, sm, d.G)) {
            const uint32_t tns = ld_shared_u32(&st->nsure), tnc = ld_shared_u32(&st->ncand);
            const uint32_t total = tns + tnc;
            int n2 = 1;
            while ((uint32_t)n2 < total)
                n2 *= 2;
            for (int i = tid; i < n2; i += kThreads)
                sm.sort[i] = (uint32_t)i < tns ? ld_shared_u64(&st->sure[i])
                             : (uint32_t)i < total ? ld_shared_u64(&st->cand[i - tns])
                                                   : 0ull;
            idx_sync();
            sort_desc(sm.sort, n2);
            for (int64_t c = tid; c < positions; c += kThreads)
                out[(d.base + c) * d.is1] =
                    c < m ? (int32_t)(0xFFFFFFFFu - (uint32_t)sm.sort[c]) : -1;
            if (tid == 0) {
                st->ceil = sm.sort[m - 1];
                st->nsure = 0;
                st->ncand = 0;
                st->arrive = 0;
                st->release = 0;
                idx_fence();
            }
        }
    }
    /* the launch's last block resets the tickets */
    idx_sync();
    if (tid == 0) {
        idx_fence();
        if (atomicAdd(&glob->done, 1u) == gridDim.x - 1) {
            glob->ticket = 0;
            glob->done = 0;
            idx_fence();
        }
    }
}

} // namespace

mla_status mla_hip_scratch(mla_context *ctx, size_t bytes, void **out)
{
    mla_hip_state *s = mla_hip_state_of(ctx);
    if (s->scratch_bytes < bytes) {
        if (s->scratch) {
            hipError_t err = hipFree(s->scratch); /* waits for the work that used it */
            s->scratch = NULL;
            s->scratch_bytes = 0;
            if (err != hipSuccess)
                return mla_hip_fail(ctx, err, "hipFree of the scratch");
        }
        void *p = NULL;
        hipError_t err = hipMalloc(&p, bytes);
        if (err != hipSuccess) {
            (void)hipGetLastError();
            return mla_fail(ctx, MLA_ERR_OUT_OF_MEMORY, NULL, "hipMalloc of %zu scratch bytes: %s",
                            bytes, hipGetErrorString(err));
        }
        err = hipMemsetAsync(p, 0, bytes, s->stream);
        if (err != hipSuccess) {
            (void)hipFree(p);
            return mla_hip_fail(ctx, err, "hipMemsetAsync of the scratch");
        }
        s->scratch = p;
        s->scratch_bytes = bytes;
    }
    *out = s->scratch;
    return MLA_OK;
}

mla_status mla_hip_topk(mla_context *ctx, const mla_topk_args *a)
{
    const mla_hip_device_scope scope(mla_hip_state_of(ctx)->device);
    if (scope.error() != hipSuccess)
        return mla_hip_fail(ctx, scope.error(), "selecting the context's GPU");
    const mla_tensor *ts[3] = {&a->logits, &a->lengths, &a->indices};
    const char *names[3] = {"logits", "lengths", "indices"};
    for (int i = 0; i < 3; ++i) {
        mla_status st = mla_hip_check_tensor_memory(ctx, ts[i], names[i]);
        if (st != MLA_OK)
            return st;
    }
    const int64_t R = a->logits.shape[0], N = a->logits.shape[1];
    if (R == 0)
        return MLA_OK;
    tk_desc d = {};
    d.N = N;
    d.k = a->k;
    d.ls0 = a->logits.stride[0];
    d.ls1 = a->logits.stride[1];
    d.lens = a->lengths.stride[0];
    d.is0 = a->indices.stride[0];
    d.is1 = a->indices.stride[1];
    /* blocks per row: one per tile, at most one per multiprocessor (a row's
     * blocks wait for each other, so they must fit on the device at once) */
    int64_t gmax = kGmax;
#if !MLA_IDX_EMU
    gmax = mla_hip_state_of(ctx)->multiprocessors < gmax ? mla_hip_state_of(ctx)->multiprocessors
                                                         : gmax;
#endif
    d.G = (N + kTile - 1) / kTile;
    d.G = d.G < 1 ? 1 : d.G > gmax ? gmax : d.G;
    d.S = (N + d.G - 1) / d.G;
    d.tiles = (d.S + kTile - 1) / kTile;
    d.tiles = d.tiles < 1 ? 1 : d.tiles;

    void *scratch = NULL;
    mla_status st = mla_hip_scratch(
        ctx, sizeof(tk_global) + (size_t)kRowsPerLaunch * sizeof(tk_row), &scratch);
    if (st != MLA_OK)
        return st;
    tk_global *glob = static_cast<tk_global *>(scratch);
    tk_row *rows = reinterpret_cast<tk_row *>(glob + 1);
    const size_t smem = sizeof(tk_smem);
    for (int64_t row0 = 0; row0 < R; row0 += kRowsPerLaunch) {
        const int64_t nr = R - row0 < kRowsPerLaunch ? R - row0 : kRowsPerLaunch;
        d.row0 = row0;
        for (int64_t base = 0; base < d.k; base += kKmax) {
            d.base = base;
            const unsigned blocks = (unsigned)(nr * d.G);
#if MLA_IDX_EMU
            mla_emu_launch_resident(blocks, kThreads, smem, 2 * kGmax, topk_kernel,
                                    static_cast<const float *>(a->logits.data),
                                    static_cast<const int32_t *>(a->lengths.data),
                                    static_cast<int32_t *>(a->indices.data), glob, rows, d);
#else
            topk_kernel<<<blocks, kThreads, smem, mla_hip_state_of(ctx)->stream>>>(
                static_cast<const float *>(a->logits.data),
                static_cast<const int32_t *>(a->lengths.data),
                static_cast<int32_t *>(a->indices.data), glob, rows, d);
#endif
            st = mla_hip_check_launch(ctx, "topk kernel launch");
            if (st != MLA_OK)
                return st;
        }
    }
    return MLA_OK;
}
