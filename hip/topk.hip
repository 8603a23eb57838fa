/* Top-k of the DSA indexer (MLA.md section 6), indices identical to the
 * reference (core/ref/topk.c): per row r, the min(k, len) largest of
 * logits[r, 0:len], in ascending index order, ties to the lower index (+0
 * and -0 tie), NaN below every number (NaNs by index), -1 padding to k;
 * k <= KMAX = 2048 (supports() refuses more).
 *
 * The rank order is the unsigned order of one 64-bit key per element,
 *     K = key32 << 32 | (2^32 - 1 - n),
 *     key32: NaN -> 0; -0 -> +0; x >= +0 -> bits | 2^31; x < 0 -> ~bits
 * (the CPU backend's key; the index half makes every K distinct and puts
 * the lower index first among equal values). The answer is the set of the
 * m = min(k, len) largest K. Threads hold key32 in registers; the index
 * half comes from the element's position.
 *
 * Radix select over K, 11 bits a level (6 levels at most): a level
 * histograms (shared-memory atomics) the digit of the keys that match the
 * prefix chosen so far, and a block scan finds the digit of the m-th
 * largest. As soon as the bucket of the m-th largest holds at most CAND
 * keys, the keys above the bucket ("sure", fewer than m) and in it
 * ("candidates") are collected, and the levels go on over the collected
 * keys alone (in registers) until the bucket of the m-th largest is taken
 * whole: its prefix P is then the threshold, and the answer is exactly the
 * m collected keys >= P (once the bucket holds at most a wave's keys, one
 * wave ranks them and P is the m-th largest key itself). They are put in
 * index order without a sort: each sets its position's bit in a bitmap of
 * a window of positions in shared memory (one window covers 2^18
 * positions, every row of the model), and a block scan of the words' bit
 * counts gives each set bit its output slot (staged in shared memory, then
 * written out in contiguous runs).
 * Everything is over distinct keys: the bits never depend on timing or on
 * which thread wrote first.
 *
 * A row is one block when the rows alone fill the device; otherwise G
 * blocks share a row, one per 8192 keys as far as the device holds them. A
 * block's slice stays in registers (16 keys a thread up to 8192, 32 up to
 * 16384: re-reading a tile costs as much as a level's histogram of it);
 * longer slices re-read tiles of 16384 at each pass. At each level they add
 * their histograms into the row's histogram for that level in the context's
 * scratch, count themselves in, and, once all G have, each reads the whole
 * histogram (no block waits on another's decision); at the end they append
 * their sure keys and candidates to the row's lists and the last to arrive
 * selects and writes. Blocks that wait for each other must be resident
 * together: a block takes a ticket when it starts and its row is ticket /
 * G, so the blocks a row waits for started earlier or alongside it, and G
 * is at most the number of multiprocessors. The last block of a row zeroes
 * what the row used; the scratch is zeroed once, when allocated. */
#include <stdlib.h>

#include "hip/indexer_util.h"

namespace {

#if MLA_IDX_EMU
/* small enough that the emulation's few thousand keys cover every path:
 * several blocks per row, several tiles per slice, several batches and
 * levels */
constexpr int kThreads = 128;
constexpr int kPer = 4;
constexpr int kCand = 128;
constexpr int kGmax = 4;
constexpr int kWindowWords = 128; /* 4096 positions: rows of several windows */
#else
constexpr int kThreads = 512;
constexpr int kPer = 16;
constexpr int kCand = 2048;
constexpr int kGmax = 64;
constexpr int kWindowWords = 8192; /* the keys' buffer: 2^18 positions */
#endif
constexpr int kKmax = 2048;
constexpr int64_t kTile = (int64_t)kThreads * kPer;
constexpr int kBits = 11;
constexpr int kBins = 1 << kBits;
constexpr int kLevels = 6; /* ceil(64 / 11) */
constexpr int kSort = kKmax + kCand; /* the collected keys at most */
constexpr int kL = kSort / kThreads;   /* of them a thread holds */
constexpr int kWaves = kThreads / MLA_WAVE_SIZE;
constexpr int kRowsPerLaunch = 128;
static_assert((kThreads & (kThreads - 1)) == 0, "a power of two");
static_assert(kSort % kThreads == 0 && kWindowWords % kThreads == 0, "whole keys and words");
static_assert(kWindowWords <= 2 * kSort, "the window's bitmap fits the keys' buffer");
static_assert(kBins % (4 * kThreads) == 0 || (4 * kThreads) % kBins == 0, "histogram words");
static_assert(kBins % kThreads == 0, "whole bins per thread");
static_assert(kKmax <= kBins, "the answer is staged in the histogram's words");

/* Per row, in the scratch: zero between launches. */
struct tk_row {
    uint32_t hist[kLevels][kBins];
    uint32_t arrive[kLevels + 1];
    uint32_t nsure, ncand;
    uint64_t sure[kKmax];
    uint64_t cand[kCand];
};

struct tk_global {
    uint32_t ticket, done;
    uint32_t pad[62];
};

struct tk_desc { /* positions fit 31 bits (indices are I32, supports() checks N) */
    int32_t N, k; /* row length, k */
    int32_t row0, G, S, tiles;
    int64_t ls0, ls1, lens, is0, is1;
    mla_gate gate;
    int32_t after; /* a programmatic dependent of the logits that wrote them */
};

/* Shared memory of a block. */
struct tk_smem {
    uint32_t hist[kBins];
    /* the collected keys, then the window's bitmap */
    uint64_t sort[kSort];
    uint64_t kth; /* rank_in_wave's answer */
    uint32_t wsum[kWaves];
    uint32_t ticket, bin, above, ns, nc;
    uint32_t count;   /* collect: sure keys << 16 | candidates */
    uint32_t nbucket; /* rank_in_wave's keys */
    uint32_t closed; /* the gate (mla_gate_closed) */
};

MLA_DEV uint32_t order_key(float v)
{
    uint32_t u = mla_fb_bits(v);
    u = u == 0x80000000u ? 0u : u;
    const uint32_t k = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
    return (u & 0x7FFFFFFFu) > 0x7F800000u ? 0u : k;
}

/* The tile's positions: element e of thread t is lo + tile * PER * THREADS
 * + e * THREADS + t. */
template <int PER> MLA_DEV int32_t pos_of(int32_t lo, int32_t tile, int e)
{
    return lo + tile * PER * kThreads + e * kThreads + (int32_t)threadIdx.x;
}

/* Every load is issued before any key is formed (positions past the row's
 * N read position N - 1, a valid element, and keys at hi and past it are
 * dropped): a load under its own condition would wait out one memory
 * latency per element, and a clamp to hi one more for the length. */
template <int PER>
MLA_DEV void load_tile(const float *row, int64_t ls1, int32_t lo, int32_t hi, int32_t N,
                       int32_t tile, uint32_t kk[PER])
{
    float v[PER];
#pragma unroll
    for (int e = 0; e < PER; ++e) {
        const int32_t n = pos_of<PER>(lo, tile, e), nc = n < N ? n : N - 1;
        v[e] = row[nc * ls1];
    }
#pragma unroll
    for (int e = 0; e < PER; ++e)
        kk[e] = pos_of<PER>(lo, tile, e) < hi ? order_key(v[e]) : 0u;
}

/* K of position n with key32 kk, or 0 when it is outside [.., hi). */
MLA_DEV uint64_t full_key(uint32_t kk, int32_t n, int32_t hi)
{
    const uint64_t K = ((uint64_t)kk << 32) | (uint64_t)(0xFFFFFFFFu - (uint32_t)n);
    return n < hi ? K : 0ull;
}

/* The first of v slots of this thread in a list whose length is *counter:
 * a wave scan and one shared-memory atomic per wave, not one per key, all on
 * the same word. Every lane of the wave calls it. */
MLA_DEV uint32_t wave_append(uint32_t v, uint32_t *counter)
{
    const int lane = (int)threadIdx.x % MLA_WAVE_SIZE;
    uint32_t incl = v;
    for (int off = 1; off < MLA_WAVE_SIZE; off *= 2) {
        const uint32_t t = shfl_u32(incl, lane >= off ? lane - off : lane);
        incl += lane >= off ? t : 0u;
    }
    uint32_t base = 0;
    if (lane == MLA_WAVE_SIZE - 1 && incl != 0)
        base = atomicAdd(counter, incl);
    return shfl_u32(base, MLA_WAVE_SIZE - 1) + incl - v;
}

/* Inclusive suffix sum over the block (thread t: sum over threads >= t). */
MLA_DEV uint32_t block_suffix_sum(uint32_t v, tk_smem &sm)
{
    const int lane = (int)threadIdx.x % MLA_WAVE_SIZE, wave = (int)threadIdx.x / MLA_WAVE_SIZE;
    for (int off = 1; off < MLA_WAVE_SIZE; off *= 2) {
        const uint32_t t = shfl_u32(v, lane + off < MLA_WAVE_SIZE ? lane + off : lane);
        v += lane + off < MLA_WAVE_SIZE ? t : 0u;
    }
    if (lane == 0)
        sm.wsum[wave] = v;
    idx_sync();
    uint32_t after = 0;
    for (int w = wave + 1; w < kWaves; ++w)
        after += sm.wsum[w];
    idx_sync();
    return v + after;
}

/* sm.hist holds the level's histogram of the b-bit digit below `shift` of
 * the keys with prefix P: moves P, mask and shift to the bucket of the
 * need-th largest, need to its rank in the bucket, and returns the bucket's
 * count. Thread t owns bins [t q, t q + q). */
MLA_DEV uint32_t descend(tk_smem &sm, int b, uint64_t &P, uint64_t &mask, int &shift, uint32_t &need)
{
    const int tid = (int)threadIdx.x;
    constexpr int q = kBins / kThreads;
    uint32_t s = 0;
#pragma unroll
    for (int i = 0; i < q; ++i)
        s += sm.hist[tid * q + i];
    const uint32_t incl = block_suffix_sum(s, sm);
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
    const uint32_t bin = sm.bin, cnt = sm.hist[bin];
    shift -= b;
    P |= (uint64_t)bin << shift;
    mask |= (uint64_t)((1u << b) - 1u) << shift;
    need -= sm.above;
    idx_sync(); /* sm.bin and the histogram are rewritten next */
    return cnt;
}

/* The need-th largest of the keys of kv with prefix P (the bits of mask),
 * which are at most a wave's: one wave ranks each against the others
 * instead of a level per 11 bits (a histogram and a block-wide exchange
 * each). buf: a wave's keys in shared memory; sm.nbucket: zero (called once
 * a block). */
MLA_DEV uint64_t rank_in_wave(const uint64_t kv[kL], uint64_t P, uint64_t mask, uint32_t need,
                              uint64_t *buf, tk_smem &sm)
{
#pragma unroll
    for (int u = 0; u < kL; ++u)
        if (kv[u] != 0 && (kv[u] & mask) == P)
            buf[atomicAdd(&sm.nbucket, 1u)] = kv[u];
    idx_sync();
    const uint32_t n = sm.nbucket, t = threadIdx.x;
    if (t < n) { /* the keys are distinct: exactly one has need - 1 above it */
        const uint64_t mine = buf[t];
        uint32_t above = 0;
        for (uint32_t j = 0; j < n; ++j)
            above += buf[j] > mine ? 1u : 0u;
        if (above == need - 1u)
            sm.kth = mine;
    }
    idx_sync();
    return sm.kth;
}

/* The smallest v over the block (every thread gets it). */
MLA_DEV uint32_t block_min(uint32_t v, tk_smem &sm)
{
    const int lane = (int)threadIdx.x % MLA_WAVE_SIZE, wave = (int)threadIdx.x / MLA_WAVE_SIZE;
    for (int off = 1; off < MLA_WAVE_SIZE; off *= 2) {
        const uint32_t t = shfl_u32(v, lane ^ off);
        v = t < v ? t : v;
    }
    if (lane == 0)
        sm.wsum[wave] = v;
    idx_sync();
    for (int w = 0; w < kWaves; ++w)
        v = sm.wsum[w] < v ? sm.wsum[w] : v;
    idx_sync();
    return v;
}

/* The m keys of kv (kL a thread, 0: none) at or above P, their positions
 * (all below len) written to out[0, m) in ascending order, a window of
 * kWindowWords * 32 positions at a time (the windows holding none are
 * skipped). bits: the window's bitmap; staged: m slots in shared memory,
 * where each thread puts the positions of its words' set bits, so that
 * out is written by contiguous runs (storing them to global memory one by
 * one from the bit loop costs a scattered store per position). A thread
 * owns qn contiguous words of the part of the window the row reaches. */
MLA_DEV void write_in_index_order(const uint64_t kv[kL], uint64_t P, int32_t m, int32_t len,
                                  int32_t *out, int64_t os, uint32_t *bits, uint32_t *staged,
                                  tk_smem &sm)
{
    constexpr int q = kWindowWords / kThreads;
    constexpr uint32_t span = 32u * kWindowWords;
    const int tid = (int)threadIdx.x;
    uint32_t pos[kL];
#pragma unroll
    for (int u = 0; u < kL; ++u)
        pos[u] = kv[u] != 0 && kv[u] >= P ? 0xFFFFFFFFu - (uint32_t)kv[u] : 0xFFFFFFFFu;
    uint32_t from = 0;
    for (int32_t done = 0; done < m;) {
        uint32_t low = 0xFFFFFFFFu;
#pragma unroll
        for (int u = 0; u < kL; ++u)
            low = pos[u] >= from && pos[u] < low ? pos[u] : low;
        low = from == 0 && (uint32_t)len <= span ? 0u : block_min(low, sm); /* uniform */
        if (low == 0xFFFFFFFFu)
            break; /* no winner left: cannot happen (exactly m keys are >= P) */
        const uint32_t w0 = low / span * span, left = (uint32_t)len - w0;
        const int nw = (int)(((left < span ? left : span) + 31u) / 32u);
        const int qn = (nw + kThreads - 1) / kThreads;
        idx_sync(); /* the bitmap overwrites the keys kv were read from */
        for (int i = tid; i < nw; i += kThreads)
            bits[i] = 0;
        idx_sync();
#pragma unroll
        for (int u = 0; u < kL; ++u)
            if (pos[u] != 0xFFFFFFFFu && pos[u] >= w0 && pos[u] - w0 < span)
                atomicOr(&bits[(pos[u] - w0) >> 5], 1u << ((pos[u] - w0) & 31));
        idx_sync();
        uint32_t w[q], own = 0;
#pragma unroll
        for (int i = 0; i < q; ++i) {
            w[i] = i < qn && tid * qn + i < nw ? bits[tid * qn + i] : 0u;
            own += (uint32_t)__popc(w[i]);
        }
        const uint32_t after = block_suffix_sum(own, sm); /* this thread's and the later ones' */
        uint32_t total = 0;
        for (int v = 0; v < kWaves; ++v)
            total += sm.wsum[v];
        uint32_t c = (uint32_t)done + total - after;
#pragma unroll
        for (int i = 0; i < q; ++i)
            for (uint32_t b = w[i]; b != 0; b &= b - 1)
                staged[c++] = w0 + 32u * (uint32_t)(tid * qn + i) + (uint32_t)__ffs((int)b) - 1u;
        done += (int32_t)total;
        from = w0 + span;
        idx_sync(); /* the bitmap is rewritten next; staged is read below */
    }
    for (int32_t c = tid; c < m; c += kThreads)
        out[c * os] = (int32_t)staged[c];
}

template <int PER>
__global__ __launch_bounds__(kThreads) void topk_kernel(const float *logits, const int32_t *lengths,
                                                        int32_t *indices, tk_global *glob,
                                                        tk_row *rows, tk_desc d)
{
    MLA_IDX_SMEM(tk_smem, smp);
    tk_smem &sm = *smp;
    const int tid = (int)threadIdx.x;
    const bool coop = d.G > 1;
    if (d.after)
        mla_wait_prior(); /* before the scratch too: the logits' op may have launched nothing */
    if (tid == 0) { /* the gate's load and the ticket's atomic in flight together */
        sm.ticket = coop ? atomicAdd(&glob->ticket, 1u) : 0u;
        sm.closed = mla_gate_closed(d.gate);
        sm.nbucket = 0;
    }
    idx_sync();
    const bool closed = sm.closed != 0; /* then nothing is written (the tickets go on) */
    const int32_t ticket = coop ? (int32_t)sm.ticket : (int32_t)blockIdx.x, rl = ticket / d.G,
                  part = ticket - rl * d.G;
    const int64_t r = d.row0 + rl;
    const int32_t len = lengths[r * d.lens];
    const int32_t m = d.k < len ? d.k : len;
    int32_t *out = indices + r * d.is0;
    tk_row *st = rows + rl;

    if (closed) {
        /* the index check failed: nothing is written */
    } else if (m <= 0) {
        if (part == 0)
            for (int32_t c = tid; c < d.k; c += kThreads)
                out[c * d.is1] = -1;
    } else {
        const float *row = logits + r * d.ls0;
        const int32_t lo = part * d.S, hi = d.S < len - lo ? lo + d.S : len;
        uint32_t kk[PER];
        if (d.tiles == 1)
            load_tile<PER>(row, d.ls1, lo, hi, d.N, 0, kk);

        /* ---- levels: the prefix P (the bits of mask) of the m-th largest */
        uint64_t P = 0, mask = 0;
        int shift = 64, lv = 0;
        uint32_t need = (uint32_t)m, cnt;
        for (;; ++lv) {
            const int b = shift > kBits ? kBits : shift, ds = shift - b;
            const uint32_t dmask = (1u << b) - 1u;
            for (int i = tid; i < kBins; i += kThreads)
                sm.hist[i] = 0;
            idx_sync();
            for (int32_t tile = 0; tile < d.tiles; ++tile) {
                if (d.tiles > 1)
                    load_tile<PER>(row, d.ls1, lo, hi, d.N, tile, kk);
                if (ds >= 32) { /* digit and prefix in key32: half the operations */
                    const uint32_t mh = (uint32_t)(mask >> 32), ph = (uint32_t)(P >> 32);
#pragma unroll
                    for (int e = 0; e < PER; ++e)
                        if (pos_of<PER>(lo, tile, e) < hi && (kk[e] & mh) == ph)
                            atomicAdd(&sm.hist[(kk[e] >> (ds - 32)) & dmask], 1u);
                } else {
#pragma unroll
                    for (int e = 0; e < PER; ++e) {
                        const uint64_t K = full_key(kk[e], pos_of<PER>(lo, tile, e), hi);
                        if (K != 0 && (K & mask) == P)
                            atomicAdd(&sm.hist[(uint32_t)(K >> ds) & dmask], 1u);
                    }
                }
            }
            idx_sync();
            if (coop) {
                /* the row's histogram of this level: add ours, wait for all,
                 * read the sum */
                uint32_t *gh = st->hist[lv];
                for (int i = tid; i < kBins; i += kThreads)
                    if (sm.hist[i])
                        atomicAdd(&gh[i], sm.hist[i]);
                idx_fence();
                idx_sync();
                if (tid == 0) {
                    atomicAdd(&st->arrive[lv], 1u);
                    while (ld_shared_u32(&st->arrive[lv]) < (uint32_t)d.G)
                        idx_pause();
                    idx_fence();
                }
                idx_sync();
                constexpr int kW = kBins / kThreads;
                uint32_t hv[kW];
#pragma unroll
                for (int u = 0; u < kW; ++u) /* all loads first */
                    hv[u] = ld_shared_u32(&gh[tid * kW + u]);
#pragma unroll
                for (int u = 0; u < kW; ++u)
                    sm.hist[tid * kW + u] = hv[u];
                idx_sync();
            }
            cnt = descend(sm, b, P, mask, shift, need);
            if (cnt <= (uint32_t)kCand)
                break;
        }

        /* ---- collect: keys above the bucket (sure) at sort[0, ..) and in
         * it (candidates) at sort[KMAX, ..) */
        if (tid == 0)
            sm.count = 0;
        idx_sync();
        for (int32_t tile = 0; tile < d.tiles; ++tile) {
            if (d.tiles > 1)
                load_tile<PER>(row, d.ls1, lo, hi, d.N, tile, kk);
            uint32_t sure = 0, cand = 0; /* bit e: element e is a sure key, a candidate */
            if (shift >= 32) {           /* the prefix lies in key32 */
                const uint32_t mh = (uint32_t)(mask >> 32), ph = (uint32_t)(P >> 32);
#pragma unroll
                for (int e = 0; e < PER; ++e) {
                    const bool in = pos_of<PER>(lo, tile, e) < hi;
                    sure |= (uint32_t)(in && (kk[e] & mh) > ph) << e;
                    cand |= (uint32_t)(in && (kk[e] & mh) == ph) << e;
                }
            } else {
#pragma unroll
                for (int e = 0; e < PER; ++e) {
                    const uint64_t K = full_key(kk[e], pos_of<PER>(lo, tile, e), hi),
                                   top = K & mask;
                    sure |= (uint32_t)(K != 0 && top > P) << e;
                    cand |= (uint32_t)(K != 0 && top == P) << e;
                }
            }
            /* sure keys count 1 << 16, candidates 1 (fewer than 2^16 each) */
            const uint32_t at = wave_append((uint32_t)__popc((int)sure) << 16 |
                                                (uint32_t)__popc((int)cand),
                                            &sm.count);
            uint32_t as = at >> 16, ac = at & 0xFFFFu;
#pragma unroll
            for (int e = 0; e < PER; ++e)
                if ((sure | cand) >> e & 1u) {
                    const uint64_t K = full_key(kk[e], pos_of<PER>(lo, tile, e), hi);
                    if (sure >> e & 1u)
                        sm.sort[as++] = K;
                    else
                        sm.sort[kKmax + ac++] = K;
                }
        }
        idx_sync();
        uint32_t ns = sm.count >> 16, nc = sm.count & 0xFFFFu;
        bool finish = true;
        if (coop) {
            if (tid == 0) {
                sm.ns = atomicAdd(&st->nsure, ns);
                sm.nc = atomicAdd(&st->ncand, nc);
            }
            idx_sync();
            for (uint32_t i = tid; i < ns; i += kThreads)
                st->sure[sm.ns + i] = sm.sort[i];
            for (uint32_t i = tid; i < nc; i += kThreads)
                st->cand[sm.nc + i] = sm.sort[kKmax + i];
            idx_fence();
            idx_sync();
            if (tid == 0)
                sm.bin = atomicAdd(&st->arrive[kLevels], 1u) == (uint32_t)(d.G - 1);
            idx_sync();
            finish = sm.bin != 0;
            if (finish) { /* the last block of the row: every list is in */
                idx_fence();
                ns = ld_shared_u32(&st->nsure);
                nc = ld_shared_u32(&st->ncand);
            }
        }
        if (finish) {
            /* the row's sure keys and candidates, KMAX + CAND positions as
             * in sort, kL a thread (0: none) */
            uint64_t kv[kL];
#pragma unroll
            for (int u = 0; u < kL; ++u) { /* all loads first */
                const int i = tid + u * kThreads, c = i - kKmax;
                const bool has = i < kKmax ? (uint32_t)i < ns : (uint32_t)c < nc;
                kv[u] = !has ? 0ull
                        : !coop ? sm.sort[i]
                        : i < kKmax ? ld_shared_u64(&st->sure[i]) : ld_shared_u64(&st->cand[c]);
            }
            /* ---- exact selection: the levels go on over the candidates
             * until the bucket is taken whole (then the answer is the m keys
             * >= P) */
            while (cnt > need) {
                if (cnt <= (uint32_t)MLA_WAVE_SIZE) {
                    P = rank_in_wave(kv, P, mask, need, reinterpret_cast<uint64_t *>(sm.hist), sm);
                    break; /* the answer: the m keys >= the need-th of the bucket */
                }
                const int b = shift > kBits ? kBits : shift, ds = shift - b;
                for (int i = tid; i < kBins; i += kThreads)
                    sm.hist[i] = 0;
                idx_sync();
#pragma unroll
                for (int u = 0; u < kL; ++u)
                    if (kv[u] != 0 && (kv[u] & mask) == P)
                        atomicAdd(&sm.hist[(uint32_t)(kv[u] >> ds) & ((1u << b) - 1u)], 1u);
                idx_sync();
                cnt = descend(sm, b, P, mask, shift, need);
            }
            for (int32_t c = m + tid; c < d.k; c += kThreads)
                out[c * d.is1] = -1;
            /* the histogram is free: descend's last barrier follows its reads */
            write_in_index_order(kv, P, m, len, out, d.is1, reinterpret_cast<uint32_t *>(sm.sort),
                                 sm.hist, sm);
            if (coop) { /* zero what the row used, for the next call (every
                         * thread has read the counts: barriers since) */
                for (int l = 0; l <= lv; ++l)
                    for (int i = tid; i < kBins; i += kThreads)
                        st->hist[l][i] = 0;
                if (tid <= kLevels)
                    st->arrive[tid] = 0;
                if (tid == 0) {
                    st->nsure = 0;
                    st->ncand = 0;
                }
            }
            idx_fence();
        }
    }
    /* the launch's last block resets the tickets */
    if (coop) {
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
    d.N = (int32_t)N;
    d.k = (int32_t)a->k;
    d.ls0 = a->logits.stride[0];
    d.ls1 = a->logits.stride[1];
    d.lens = a->lengths.stride[0];
    d.is0 = a->indices.stride[0];
    d.is1 = a->indices.stride[1];
    d.gate = mla_hip_gate(ctx, a->gate);

    void *scratch = NULL;
    mla_status st = mla_hip_scratch(
        ctx, sizeof(tk_global) + (size_t)kRowsPerLaunch * sizeof(tk_row), &scratch);
    if (st != MLA_OK)
        return st;
    tk_global *glob = static_cast<tk_global *>(scratch);
    tk_row *rows = reinterpret_cast<tk_row *>(glob + 1);
    const size_t smem = sizeof(tk_smem);
    const int64_t sms = mla_hip_state_of(ctx)->multiprocessors;
    /* measurement knobs (docs/TUNING.md): hip_topk_blocks n, at most n
     * blocks per row (what cooperating blocks buy); hip_topk_pdl off, the
     * search's top-k not a programmatic dependent of its logits */
    const int64_t cap = ctx->tuning.hip_topk_blocks;
    [[maybe_unused]] const bool after = a->after_logits && ctx->tuning.hip_topk_pdl != MLA_TUNE_OFF;
    for (int64_t row0 = 0; row0 < R; row0 += kRowsPerLaunch) {
        const int64_t nr = R - row0 < kRowsPerLaunch ? R - row0 : kRowsPerLaunch;
        /* blocks per row: one per tile, while the rows alone do not fill
         * the device (a block per multiprocessor: 512 threads, 42 KB of
         * shared memory), and at most one per multiprocessor (a row's blocks
         * wait for each other, so they must fit on the device at once) */
        int64_t G = (N + kTile - 1) / kTile;
#if MLA_IDX_EMU
        (void)sms, (void)cap; /* both paths: cooperative rows, and one block (odd row counts) */
        G = nr % 2 == 1 && nr > 1 ? 1 : G > kGmax ? kGmax : G;
#else
        const int64_t fill = sms / nr;
        G = G > fill ? fill : G;
        G = G > kGmax ? kGmax : G > sms ? sms : G;
        if (cap >= 1 && G > cap)
            G = cap;
#endif
        d.G = (int32_t)(G < 1 ? 1 : G);
        d.S = (int32_t)((N + d.G - 1) / d.G);
        /* a slice of up to two tiles stays in registers (16 more keys a
         * thread): longer ones re-read their tiles at every level */
        const bool wide = d.S > kTile;
        const int64_t tile = wide ? 2 * kTile : kTile;
        d.tiles = (int32_t)((d.S + tile - 1) / tile);
        d.tiles = d.tiles < 1 ? 1 : d.tiles;
        d.row0 = (int32_t)row0;
        const unsigned blocks = (unsigned)(nr * d.G);
        const float *lg = static_cast<const float *>(a->logits.data);
        const int32_t *ln = static_cast<const int32_t *>(a->lengths.data);
        int32_t *ix = static_cast<int32_t *>(a->indices.data);
#if MLA_IDX_EMU
        if (wide)
            mla_emu_launch_resident(blocks, kThreads, smem, 2 * kGmax, topk_kernel<2 * kPer>, lg,
                                    ln, ix, glob, rows, d);
        else
            mla_emu_launch_resident(blocks, kThreads, smem, 2 * kGmax, topk_kernel<kPer>, lg, ln,
                                    ix, glob, rows, d);
#elif defined(__CUDACC__)
        /* the first launch right behind the check or the search's logits;
         * later ones reuse the scratch the one before used, so they wait for
         * it */
        const bool pdl = (a->gate != 0 || after) && mla_hip_state_of(ctx)->pdl && row0 == 0;
        d.after = pdl && after;
        const hipError_t err =
            wide ? mla_cuda_launch_gated(topk_kernel<2 * kPer>, blocks, kThreads, smem,
                                         mla_hip_state_of(ctx)->stream, pdl, lg, ln, ix, glob,
                                         rows, d)
                 : mla_cuda_launch_gated(topk_kernel<kPer>, blocks, kThreads, smem,
                                         mla_hip_state_of(ctx)->stream, pdl, lg, ln, ix, glob,
                                         rows, d);
        if (err != hipSuccess)
            return mla_hip_fail(ctx, err, "topk kernel launch");
#else
        if (wide)
            topk_kernel<2 * kPer><<<blocks, kThreads, smem, mla_hip_state_of(ctx)->stream>>>(
                lg, ln, ix, glob, rows, d);
        else
            topk_kernel<kPer><<<blocks, kThreads, smem, mla_hip_state_of(ctx)->stream>>>(
                lg, ln, ix, glob, rows, d);
#endif
        st = mla_hip_check_launch(ctx, "topk kernel launch");
        if (st != MLA_OK)
            return st;
    }
    return MLA_OK;
}
