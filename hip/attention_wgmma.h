/* The sm_90a body of hip/attention.hip: Hopper's warpgroup matrix units
 * (wgmma, operands from shared memory) with warp-specialized roles, after
 * the schedule of FlashMLA's sm90 decode kernels (64 rows per warpgroup
 * tile, the 576-dim QK product, V = the first 512 dims of the same key
 * tile, two consumer warpgroups splitting the 512 output columns, P handed
 * over through shared memory).
 *
 * A block record is 64 (query row, head) pairs (HT = min(H, 64) heads of
 * JT = 64 / HT query rows; sparse: JT = 1) against the work item's keys in
 * tiles of 64; L + R <= 576 (9 blocks of 64 dims), L <= 512. 384 threads in
 * three warpgroups, each with its register budget (setmaxnreg):
 *   producer (warps 0-3, 120 registers): the keys of a tile into one of two
 *     key stages, as bf16 rows in the 128-byte swizzle wgmma reads: bf16
 *     caches by cp.async (16 bytes a chunk, zero-filled for keys past the
 *     context), fp8 caches through registers, dequantized exactly on the
 *     way (e4m3 codes are bf16 values; FP8_SCALED codes times their
 *     power-of-two group scale; NORMAL's k_scale stays in the score scale
 *     and the output factor), the next tile's tokens prefetched into the L2
 *     a tile ahead. A stage's mbarrier "full" completes when each producer
 *     thread has arrived twice (once after its stores, once when its
 *     cp.async copies land); "empty" when all 256 consumer threads are done
 *     with it;
 *   score warpgroup (warps 4-7, 224 registers): S = Q K^T by wgmma
 *     m64n64k16 (Q and K from shared memory, 4 k-steps per 64-dim block),
 *     the online softmax in fp32 (log2 domain; each thread holds two rows'
 *     scores of 16 keys, so a row's max and sum need two shuffles), P
 *     rounded to bf16 into registers (wgmma's A fragment, no exchange) and
 *     into shared memory for the value warpgroup with the rows' rescale
 *     factors, then O[:, 0:256] = alpha O + P V by wgmma m64n256k16 with A
 *     from registers;
 *   value warpgroup (warps 8-11, 160 registers): O[:, 256:512] = alpha O +
 *     P V by wgmma m64n256k16 with P from shared memory.
 * P goes from the score to the value warpgroup through one buffer guarded
 * by two named barriers (full: the score warpgroup arrives, the value one
 * waits; empty: the other way round), so the value warpgroup's P V of tile
 * t runs beside the score warpgroup's next S. Row sums come from unrounded
 * P, as in every body. Columns past L are computed and never stored; dims
 * past L + R are zero in q and in the key stages.
 *
 * Shared memory (227 KB, one block per SM): a small area (block record,
 * mbarriers, the tile's key positions, rescale factors, key addresses),
 * then from the next 1024-byte boundary Q (64 rows x 576 bf16), two key
 * stages (64 x 576 bf16 each) and P (64 x 64 bf16), all in the 128-byte
 * swizzle (hip/wgmma.h). */
#ifndef MLA_HIP_ATTENTION_WGMMA_H
#define MLA_HIP_ATTENTION_WGMMA_H

#include "hip/attention_nv.h"
#include "hip/nv_copy.h"
#include "hip/wgmma.h"

/* the device pass (or the wave-32 emulation) has the body */
#if defined(__CUDACC__) && MLA_WG_BF16 && MLA_IDX_BULK && MLA_ATT_MATRIX_KIND == 1
#define MLA_ATT_WGMMA 1
#else
#define MLA_ATT_WGMMA 0
#endif

namespace
{

constexpr int kWgThreads = 384;
constexpr int kWgRows = 64;                     /* (query row, head) pairs of a record */
constexpr int kWgKeys = 64;                     /* keys per tile */
constexpr int kWgMaxDims = 576;                 /* L + R the body takes */
constexpr int kWgMaxL = 512;                    /* O columns: two warpgroups x 256 */
constexpr int kWgBlockBytes = kWgKeys * 128;    /* 64 rows x 64 dims of bf16 */
constexpr int kWgTileBytes = 9 * kWgBlockBytes; /* 64 rows x 576 dims */
constexpr int kWgSmallBytes = 2048;

/* The small area, bytes from the start of the dynamic shared memory. The
 * producer and the consumers walk the block's records each with its own
 * cursor (the same sequence), so the producer runs into the next record
 * while the consumers finish one. The rows' output addresses and factors
 * (uint8_t *Or[64], float Fs[64]) take the P tile after a record's last
 * tile. */
constexpr int kWgBlkC = 0;     /* att_blk of the consumers */
constexpr int kWgBlkP = 96;    /* att_blk of the producer */
constexpr int kWgMbar = 192;   /* full[2], empty[2] */
constexpr int kWgPos = 256;    /* int32 [2][64]: key positions per stage, -1 none */
constexpr int kWgScale = 768;  /* float [64]: the tile's rescale factor per row */
constexpr int kWgRefs = 1024;  /* key_ref [64]: the producer's key addresses */
constexpr int kWgSmemBytes = kWgSmallBytes + 1024 + 3 * kWgTileBytes + kWgBlockBytes;
static_assert(sizeof(att_blk) <= kWgBlkP - kWgBlkC && sizeof(att_blk) <= kWgMbar - kWgBlkP,
              "block records in their slots");
static_assert(kWgRefs + 64 * (int)sizeof(key_ref) <= kWgSmallBytes, "small area");

#if defined(__CUDACC__)

/* named barriers (0 is __syncthreads) */
enum { WG_BAR_PROD = 1, WG_BAR_PFULL = 2, WG_BAR_PEMPTY = 3, WG_BAR_Q = 4, WG_BAR_OUT = 5,
       WG_BAR_REC = 6 };

#if MLA_ATT_WGMMA

/* The tiles: Q, key stage s, P. */
struct wg_tiles {
    unsigned char *q, *k, *p;
};

MLA_DEV wg_tiles wg_tiles_of(unsigned char *smem)
{
    /* the swizzle XORs address bits: the tiles start 1024-byte aligned in
     * the shared window */
    const uint32_t a = wg_addr(smem + kWgSmallBytes);
    unsigned char *base = smem + kWgSmallBytes + ((1024u - (a & 1023u)) & 1023u);
    return {base, base + kWgTileBytes, base + 3 * kWgTileBytes};
}

/* Byte offset of the 8-value chunk at dim d0 (a multiple of 8) of row r in
 * a 64-row tile of 64-dim blocks in the 128-byte swizzle. */
MLA_DEV uint32_t wg_chunk_at(int r, int d0)
{
    return (uint32_t)(d0 >> 6) * kWgBlockBytes + (uint32_t)r * 128u +
           ((((uint32_t)d0 >> 3 & 7u) ^ ((uint32_t)r & 7u)) << 4);
}

MLA_DEV int32_t wg_tiles_in(const att_blk &b)
{
    return b.kv_hi > b.kv_lo ? (b.kv_hi - b.kv_lo + kWgKeys - 1) / kWgKeys : 0;
}

/* q rows of the record into Q as bf16 (exact for bf16 and fp8 q), zero for
 * invalid rows and dims D .. 575; by the 256 consumer threads (ct). */
MLA_DEV void wg_stage_q(const att_desc &d, const att_blk &b, unsigned char *Q, int ct)
{
    constexpr int per = kWgMaxDims / 8; /* chunks per row */
    const bool vec = d.q_dtype == MLA_DTYPE_BF16 && d.qs2 == 1;
    for (int it = ct; it < kWgRows * per; it += 256) {
        const int r = it / per, c = it - r * per;
        const bool live = row_valid(d, b, r) && 8 * c < d.D;
        const int64_t qoff = (b.row0 + b.j0 + r / d.HT) * d.qs0 +
                             (int64_t)(b.h0 + r % d.HT) * d.qs1 + (int64_t)8 * c * d.qs2;
        mla_u32x4 v = {{0, 0, 0, 0}};
        if (live && vec) {
            load_bytes(d.q + 2 * qoff, v.v, 16);
        } else if (live) {
#pragma unroll
            for (int j = 0; j < 4; ++j)
                v.v[j] = nv_bf16x2(q_value(d, qoff + (int64_t)(2 * j) * d.qs2),
                                   q_value(d, qoff + (int64_t)(2 * j + 1) * d.qs2));
        }
        *reinterpret_cast<mla_u32x4 *>(Q + wg_chunk_at(r, 8 * c)) = v;
    }
}

/* One copy unit of a key (fp8 caches: 16 codes, or 8 bf16 rope values of
 * FP8_SCALED; bf16 caches: one 8-value chunk): its chunk and kind. */
struct wg_unit {
    chunk_at ch;
    bool bf; /* the unit is 16 bytes of bf16 */
};

template <int CT> MLA_DEV wg_unit wg_unit_of(const att_desc &d, int u)
{
    wg_unit w;
    if constexpr (CT == MLA_DTYPE_BF16) {
        w.ch = chunk_of(d, u);
        w.bf = true;
    } else {
        const int nu = (int)d.c.L / 16;
        const int c = u < nu ? 2 * u : d.nope_chunks + (d.rope_bf16 ? u - nu : 2 * (u - nu));
        w.ch = chunk_of(d, c);
        w.bf = u >= nu && d.rope_bf16;
    }
    return w;
}

template <int CT> MLA_DEV int wg_units(const att_desc &d)
{
    if constexpr (CT == MLA_DTYPE_BF16)
        return d.cpk;
    else
        return (int)(d.c.L / 16 + (d.rope_bf16 ? d.c.R / 8 : d.c.R / 16));
}

/* The key copies of one tile into stage st (bf16 caches): unit u of key k
 * for the producer's units pt, pt + 128, .. of the tile's 64 x units. */
template <int CT>
MLA_DEV void wg_copy_bf16(const att_desc &d, const int32_t *KP, const key_ref *KR,
                          unsigned char *st, int pt)
{
    const int nu = wg_units<CT>(d), dk = 128 / nu, du = 128 % nu;
    if (d.c.layout == MLA_CL_NORMAL) {
        /* A NORMAL row is its cpk chunks back to back (rope after nope):
         * eight threads per key, thread j taking chunks j, j + 8, .. , which
         * all land in slot j ^ (k & 7) of successive 64-dim blocks, so the
         * addresses step by constants (the general walk below spends ~60
         * instructions a copy, more than the copies' own time). */
        const int j = pt % 8;
        for (int k = pt / 8; k < kWgKeys; k += 16) {
            const bool valid = KP[k] >= 0;
            const uint8_t *src = (valid ? KR[k].nope : d.c.data) + 16 * j;
            unsigned char *dst = st + k * 128 + ((j ^ (k & 7)) << 4);
            for (int c = j; c < nu; c += 8, src += 128, dst += kWgBlockBytes)
                cp_async<16>(dst, src, valid);
        }
        return;
    }
    int k = pt / nu, u = pt % nu;
    while (k < kWgKeys) {
        const wg_unit w = wg_unit_of<CT>(d, u);
        const bool valid = KP[k] >= 0;
        const key_ref kr = KR[k];
        const uint8_t *src = valid ? (w.ch.nope ? kr.nope : kr.rope) + w.ch.off : d.c.data;
        cp_async<16>(st + wg_chunk_at(k, w.ch.d0), src, valid);
        u += du;
        k += dk;
        if (u >= nu) {
            u -= nu;
            ++k;
        }
    }
}

/* A loaded unit into the stage at byte dst: 16 bytes of bf16 as they are,
 * or 16 fp8 codes dequantized to bf16 (times sc, FP8_SCALED's power-of-two
 * group scale) into chunk dst (codes 0-7) and the next chunk of its 64-dim
 * block (codes 8-15), whose swizzled slot is dst's XOR partner: chunk j ->
 * j + 1 (j even) flips bit 4 of the unswizzled offset, and the swizzle XOR
 * keeps that bit's flip. */
template <int CT>
MLA_DEV void wg_put_unit(unsigned char *st, uint32_t dst, const uint32_t raw[4], float sc, bool bf,
                         bool scaled)
{
    if (bf) {
        mla_u32x4 v;
#pragma unroll
        for (int j = 0; j < 4; ++j)
            v.v[j] = raw[j];
        *reinterpret_cast<mla_u32x4 *>(st + dst) = v;
        return;
    }
    mla_u32x4 lo, hi;
    nv_fp8x16_bf16<CT>(raw, sc, scaled, lo, hi);
    *reinterpret_cast<mla_u32x4 *>(st + dst) = lo;
    *reinterpret_cast<mla_u32x4 *>(st + (dst ^ 16u)) = hi;
}

/* Units of a key per thread in wg_copy_fp8_rows: 576 dims / 16 per unit /
 * 8 threads, rounded up. */
constexpr int kWgRowUnits = 5;

/* Unit i of thread j of a key's eight (u = j + 8 i) in wg_copy_fp8_rows:
 * fp8 codes (kind 1, group scale i), bf16 rope (kind 2) or none (0); its
 * byte offset in the row's codes or rope, and in the stage for key kq. The
 * thread's keys kq + 16 q share the swizzle slot: rows 128 bytes apart. */
struct wg_row_unit {
    uint32_t dst;
    int32_t src;
    int32_t kind;
};

MLA_DEV wg_row_unit wg_row_unit_of(const att_desc &d, int j, int i, int kq, int nn, int nr)
{
    const int u = j + 8 * i;
    if (u < nn)
        return {wg_chunk_at(kq, 16 * u), 16 * u, 1};
    if (u - nn < nr)
        return {wg_chunk_at(kq, (int)d.c.L + 8 * (u - nn)), 16 * (u - nn), 2};
    return {0u, 0, 0};
}

/* Row geometries wg_copy_fp8_rows knows at compile time: any (0), or
 * DeepSeek's L 512, R 64 in FP8_SCALED (1: units 0-3 codes of scale group
 * i, unit 4 the rope) or NORMAL (2: units 0-3 codes, unit 4 codes where
 * j < 4), whose kinds then cost no instruction. */
template <int G> MLA_DEV int wg_row_kind(const wg_row_unit &un, int i, int j)
{
    if constexpr (G == 0)
        return un.kind;
    else
        return i < 4 ? 1 : G == 1 ? 2 : j < 4 ? 1 : 0;
}

/* fp8 NORMAL and FP8_SCALED keys (a row's units at constant steps: fp8
 * codes from the row's start, then FP8_SCALED's bf16 rope; wg_takes keeps
 * rows 16-byte aligned), eight threads a key, two keys' loads in flight
 * before their conversion. The producer is one warp per scheduler, so its
 * instructions are the tile's pace: a round's conversion runs without a
 * branch (nv_fp8x8_bf16_placed) unless one of the warp's codes is a NaN
 * code or one of its scales no small power of two, when the warp takes
 * wg_put_unit's checked route for the round. */
template <int CT, int G>
MLA_DEV void wg_copy_fp8_rows(const att_desc &d, const int32_t *KP, const key_ref *KR,
                              unsigned char *st, int pt)
{
    const bool scaled = G ? G == 1 : cache_fp8s(d.c);
    const int j = pt & 7, kq = pt >> 3, L = G ? 512 : (int)d.c.L, R = G ? 64 : (int)d.c.R;
    const int nn = scaled ? L / 16 : (L + R) / 16; /* units of fp8 codes */
    const int nr = scaled ? R / 8 : 0;             /* units of bf16 rope */
    wg_row_unit un[kWgRowUnits];
#pragma unroll
    for (int i = 0; i < kWgRowUnits; ++i)
        un[i] = wg_row_unit_of(d, j, i, kq, nn, nr);
    const uint32_t f1 = nv_fp8_bf16_factor<CT>(1.0f);
    for (int k0 = kq; k0 < kWgKeys; k0 += 32) {
        uint32_t raw[2][kWgRowUnits][4], f[2][kWgRowUnits], bad = 0;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const bool valid = KP[k0 + 16 * h] >= 0;
            const key_ref kr = KR[k0 + 16 * h];
#pragma unroll
            for (int i = 0; i < kWgRowUnits; ++i) {
                const int kind = wg_row_kind<G>(un[i], i, j);
                mla_u32x4 v = {{0, 0, 0, 0}};
                if (valid && kind != 0)
                    v = *reinterpret_cast<const mla_u32x4 *>((kind == 2 ? kr.rope : kr.nope) +
                                                             un[i].src);
                float sc = 1.0f;
                if (valid && scaled && kind == 1)
                    sc = *reinterpret_cast<const float *>(kr.nope + L + 4 * i);
#pragma unroll
                for (int e = 0; e < 4; ++e)
                    raw[h][i][e] = v.v[e];
                f[h][i] = scaled ? nv_fp8_bf16_factor<CT>(sc) : f1;
                if (kind == 1)
                    bad |= (f[h][i] == 0u) | nv_fp8_nan8<CT>(raw[h][i]) |
                           nv_fp8_nan8<CT>(raw[h][i] + 2);
            }
        }
        const bool checked = mla_wave_any(bad != 0);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int k = k0 + 16 * h;
            const key_ref kr = KR[k];
#pragma unroll
            for (int i = 0; i < kWgRowUnits; ++i) {
                const int kind = wg_row_kind<G>(un[i], i, j);
                const uint32_t dst = un[i].dst + (uint32_t)(k - kq) * 128u;
                if (kind == 2 || (kind == 1 && checked)) {
                    const float sc = kind == 1 && scaled && KP[k] >= 0
                                         ? *reinterpret_cast<const float *>(kr.nope + L + 4 * i)
                                         : 1.0f;
                    wg_put_unit<CT>(st, dst, raw[h][i], sc, kind == 2, scaled);
                } else if (kind == 1) {
                    mla_u32x4 lo, hi;
                    nv_fp8x8_bf16_placed(raw[h][i], f[h][i], lo.v);
                    nv_fp8x8_bf16_placed(raw[h][i] + 2, f[h][i], hi.v);
                    *reinterpret_cast<mla_u32x4 *>(st + dst) = lo;
                    *reinterpret_cast<mla_u32x4 *>(st + (dst ^ 16u)) = hi;
                }
            }
        }
    }
}

/* The same for fp8 SHUFFLED caches through registers: kWgBatch units'
 * loads in flight before their conversion (a thread has 18 units of a
 * DeepSeek tile: three rounds; a batch of 10, seven registers a unit, made
 * ptxas spill within the producer's 120). */
constexpr int kWgBatch = 6;

template <int CT>
MLA_DEV void wg_copy_fp8(const att_desc &d, const int32_t *KP, const key_ref *KR,
                         unsigned char *st, int pt)
{
    if (d.c.layout != MLA_CL_SHUFFLED) {
        if (d.c.L == 512 && d.c.R == 64)
            return cache_fp8s(d.c) ? wg_copy_fp8_rows<CT, 1>(d, KP, KR, st, pt)
                                   : wg_copy_fp8_rows<CT, 2>(d, KP, KR, st, pt);
        return wg_copy_fp8_rows<CT, 0>(d, KP, KR, st, pt);
    }
    const int nu = wg_units<CT>(d), dk = 128 / nu, du = 128 % nu;
    const bool scaled = cache_fp8s(d.c);
    int k = pt / nu, u = pt % nu;
    while (k < kWgKeys) {
        uint32_t raw[kWgBatch][4];
        float sc[kWgBatch];
        uint32_t dst[kWgBatch];
        bool bf[kWgBatch];
#pragma unroll
        for (int e = 0; e < kWgBatch; ++e) {
            raw[e][0] = raw[e][1] = raw[e][2] = raw[e][3] = 0;
            sc[e] = 1.0f;
            dst[e] = 0xFFFFFFFFu;
            bf[e] = false;
            if (k < kWgKeys) {
                const wg_unit w = wg_unit_of<CT>(d, u);
                dst[e] = wg_chunk_at(k, w.ch.d0);
                bf[e] = w.bf;
                if (KP[k] >= 0) {
                    const key_ref kr = KR[k];
                    load_bytes((w.ch.nope ? kr.nope : kr.rope) + w.ch.off, raw[e], 16);
                    if (scaled && !w.bf)
                        sc[e] = *reinterpret_cast<const float *>(
                            kr.nope + d.c.L + 4 * (w.ch.d0 / MLA_CL_SCALE_GROUP));
                }
                u += du;
                k += dk;
                if (u >= nu) {
                    u -= nu;
                    ++k;
                }
            }
        }
#pragma unroll
        for (int e = 0; e < kWgBatch; ++e)
            if (dst[e] != 0xFFFFFFFFu)
                wg_put_unit<CT>(st, dst[e], raw[e], sc[e], bf[e], scaled);
    }
}

/* The producer's record: tiles n .. n + ntiles - 1 of the block's tile
 * sequence into stages n & 1 (n advances). Threads pt < 64 hold key pt of
 * the next tile (its position and cache block loaded a tile ahead, its
 * addresses resolved after the current tile's copies). */
template <int CT>
MLA_DEV void wg_produce(const att_desc &d, const att_blk &b, unsigned char *smem,
                        const wg_tiles &tl, uint32_t &n)
{
    const int pt = (int)threadIdx.x;
    uint64_t *full = reinterpret_cast<uint64_t *>(smem + kWgMbar), *empty = full + 2;
    int32_t *KPs = reinterpret_cast<int32_t *>(smem + kWgPos);
    key_ref *KR = reinterpret_cast<key_ref *>(smem + kWgRefs);
    const int32_t ntiles = wg_tiles_in(b);
    int32_t npos = -1;
    int64_t nblock = 0;
    key_ref nref;
    nref.nope = nref.rope = d.c.data;
    if (pt < kWgKeys && ntiles > 0)
        key_info<CT>(d, b, b.kv_lo, npos, nref);
    for (int32_t i = 0; i < ntiles; ++i, ++n) {
        const int s = (int)(n & 1u);
        mbar_wait(empty + s, ((n >> 1) & 1u) ^ 1u);
        named_bar_sync(WG_BAR_PROD, 128); /* the last tile's key addresses are read */
        if (pt < kWgKeys) {
            KPs[s * kWgKeys + pt] = npos;
            KR[pt] = nref;
        }
        named_bar_sync(WG_BAR_PROD, 128);
        if (pt < kWgKeys) {
            npos = key_position(d, b, b.kv_lo + (i + 1) * kWgKeys, pt);
            if (npos >= 0)
                nblock = key_block(d, b, npos);
        }
        unsigned char *st = tl.k + s * kWgTileBytes;
        if constexpr (CT == MLA_DTYPE_BF16)
            wg_copy_bf16<CT>(d, KPs + s * kWgKeys, KR, st, pt);
        else
            wg_copy_fp8<CT>(d, KPs + s * kWgKeys, KR, st, pt);
        fence_proxy_async(); /* the stores, for wgmma */
        mbar_arrive(full + s);
        cp_async_mbar_arrive(full + s);
        if (pt < kWgKeys) {
            nref.nope = nref.rope = d.c.data;
            if (npos >= 0) {
                nref = key_bases<CT>(d, nblock, key_token(d, npos));
                if (CT != MLA_DTYPE_BF16 && d.bulk)
                    prefetch_l2(nref.nope, (uint32_t)d.bulk);
            }
        }
    }
}

/* Descriptors: Q and K (K-major, 8-row groups 1024 bytes apart), V
 * (MN-major: 64-column blocks 8 KB apart, 8-key groups 1024 bytes apart). */
MLA_DEV uint64_t wg_kdesc(uint32_t addr) { return wg_desc_sw128(addr, 16, 1024); }
MLA_DEV uint64_t wg_vdesc(uint32_t addr) { return wg_desc_sw128(addr, kWgBlockBytes, 1024); }

/* This thread's accumulators (rows 16 w + g and + 8, columns c + 8 j + 2 t
 * and + 1, c the warpgroup's first column) to the output, two columns a
 * store. */
MLA_DEV void wg_store_rows(const att_desc &d, const att_blk &b, uint8_t *const *Or,
                           const float *Fs, int w, int g, int t, int c, const float (&o)[128])
{
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const out_row r = out_row_of(d, b, Or, Fs, 16 * w + g + 8 * h);
        if (!r.p)
            continue;
#pragma unroll
        for (int j = 0; j < 32; ++j) {
            const int col = c + 8 * j + 2 * t; /* L is a multiple of 8 */
            if (col < (int)d.c.L)
                out_store2(d, b, r, col, o[4 * j + 2 * h], o[4 * j + 2 * h + 1]);
        }
    }
}

/* The score warpgroup's record (wt: its thread 0..127). */
MLA_DEV void wg_score(const att_desc &d, const att_blk &b, unsigned char *smem,
                      const wg_tiles &tl, uint32_t &n)
{
    const int wt = (int)threadIdx.x - 128, w = wt / 32, lane = wt % 32, g = lane / 4, t = lane % 4;
    uint64_t *full = reinterpret_cast<uint64_t *>(smem + kWgMbar), *empty = full + 2;
    const int32_t *KPs = reinterpret_cast<const int32_t *>(smem + kWgPos);
    float *Sc = reinterpret_cast<float *>(smem + kWgScale);
    wg_stage_q(d, b, tl.q, wt);
    fence_proxy_async();
    named_bar_sync(WG_BAR_Q, 256);

    int32_t lim[2]; /* causal limits of this thread's rows, -1: invalid row */
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int r = 16 * w + g + 8 * h;
        lim[h] = !row_valid(d, b, r) ? -1 : d.sparse ? 0x7FFFFFFF : row_limit(d, b, r);
    }
    float o[128], m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.0f, 0.0f};
#pragma unroll
    for (int i = 0; i < 128; ++i)
        o[i] = 0.0f;
    const uint64_t dq = wg_kdesc(wg_addr(tl.q)), dk0 = wg_kdesc(wg_addr(tl.k));
    const uint64_t dv0 = wg_vdesc(wg_addr(tl.k));
    const int32_t ntiles = wg_tiles_in(b);
    for (int32_t i = 0; i < ntiles; ++i, ++n) {
        const int s = (int)(n & 1u);
        mbar_wait(full + s, (n >> 1) & 1u);
        fence_proxy_async(); /* the stage's bytes, for the async proxy */
        const uint64_t dk = dk0 + (uint64_t)((s * kWgTileBytes) >> 4);
        float sc[32];
#pragma unroll
        for (int e = 0; e < 32; ++e)
            sc[e] = 0.0f;
        /* all 9 blocks of 64 dims (zero past L + R): a fixed chain, which
         * ptxas issues back to back (a loop over the blocks the dims need
         * would have it serialize the wgmmas) */
        wg_fence();
#pragma unroll
        for (int a = 0; a < 9; ++a) {
#pragma unroll
            for (int kk = 0; kk < 4; ++kk) {
                const uint64_t off = (uint64_t)((a * kWgBlockBytes + 32 * kk) >> 4);
                wg_ss_64x64(sc, dq + off, dk + off, a + kk);
            }
        }
        wg_commit();
        wg_wait<0>();
        wg_pin(sc);

        /* masked, scaled scores (log2 units); the rows' maxima */
        const int32_t *KP = KPs + s * kWgKeys;
        float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int e = 0; e < 32; ++e) {
            const int h = (e % 4) / 2;
            const int32_t pos = KP[8 * (e / 4) + 2 * t + e % 2];
            sc[e] = (pos >= 0 && pos <= lim[h]) ? sc[e] * d.ss2 : -INFINITY;
            mx[h] = fmaxf(mx[h], sc[e]);
        }
        float alpha[2], psum[2] = {0.0f, 0.0f};
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            mx[h] = fmaxf(mx[h], mla_shfl_xor(mx[h], 1));
            mx[h] = fmaxf(mx[h], mla_shfl_xor(mx[h], 2));
            const float mn = fmaxf(m_run[h], mx[h]);
            alpha[h] = mn == -INFINITY ? 1.0f : nv_exp2(m_run[h] - mn);
            m_run[h] = mn;
        }
        /* P in bf16 pairs: pw[j][h] = keys 8 j + 2 t, +1 of row half h */
        uint32_t pw[8][2];
#pragma unroll
        for (int j = 0; j < 8; ++j)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const float x0 = sc[4 * j + 2 * h], x1 = sc[4 * j + 2 * h + 1];
                const float p0 = x0 == -INFINITY ? 0.0f : nv_exp2(x0 - m_run[h]);
                const float p1 = x1 == -INFINITY ? 0.0f : nv_exp2(x1 - m_run[h]);
                psum[h] += p0 + p1;
                pw[j][h] = nv_bf16x2(p0, p1);
            }
#pragma unroll
        for (int h = 0; h < 2; ++h)
            l_run[h] = l_run[h] * alpha[h] + psum[h];
        /* A fragments of the four 16-key steps (hip/wgmma.h) */
        uint32_t pa[4][4];
        wg_p_frags(pw, pa);

        if (i > 0) /* the value warpgroup is done with the last P */
            named_bar_sync(WG_BAR_PEMPTY, 256);
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const int r = 16 * w + g + 8 * h;
#pragma unroll
            for (int j = 0; j < 8; ++j)
                *reinterpret_cast<uint32_t *>(tl.p + wg_chunk_at(r, 8 * j) + 4 * t) = pw[j][h];
            if (t == 0)
                Sc[r] = alpha[h];
        }
        fence_proxy_async(); /* P, for the value warpgroup's wgmma */
        named_bar_arrive(WG_BAR_PFULL, 256);

        /* a factor of 1 (the rows' maxima held: most tiles of a long
         * context) changes no bit, so a warp whose rows all kept theirs skips
         * the 128 products */
        if (mla_wave_any(alpha[0] != 1.0f || alpha[1] != 1.0f)) {
#pragma unroll
            for (int e = 0; e < 128; ++e)
                o[e] *= alpha[(e % 4) / 2];
        }
        const uint64_t dv = dv0 + (uint64_t)((s * kWgTileBytes) >> 4);
        wg_fence();
#pragma unroll
        for (int kk = 0; kk < 4; ++kk)
            wg_rs_64x256(o, pa[kk], dv + (uint64_t)((16 * 128 * kk) >> 4), 1);
        wg_commit();
        wg_wait<0>();
        wg_pin(o);
#pragma unroll
        for (int kk = 0; kk < 4; ++kk)
            wg_pin(pa[kk]);
        mbar_arrive(empty + s);
    }

    /* the rows' sums over the quad; factors, lse and output addresses (in
     * the P tile, once the value warpgroup is done with the last P) */
    if (ntiles > 0)
        named_bar_sync(WG_BAR_PEMPTY, 256);
    uint8_t **Or = reinterpret_cast<uint8_t **>(tl.p);
    float *Fs = reinterpret_cast<float *>(tl.p + 64 * 8);
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        l_run[h] += mla_shfl_xor(l_run[h], 1);
        l_run[h] += mla_shfl_xor(l_run[h], 2);
        if (t == 0)
            row_finish(d, b, 16 * w + g + 8 * h, m_run[h], l_run[h], Fs, Or);
    }
    named_bar_sync(WG_BAR_OUT, 256);
    wg_store_rows(d, b, Or, Fs, w, g, t, b.c0, o);
}

/* The value warpgroup's record (its thread wt 0..127): columns 256 ..
 * 511. */
MLA_DEV void wg_value(const att_desc &d, const att_blk &b, unsigned char *smem,
                      const wg_tiles &tl, uint32_t &n)
{
    const int wt = (int)threadIdx.x - 256, w = wt / 32, lane = wt % 32, g = lane / 4, t = lane % 4;
    uint64_t *full = reinterpret_cast<uint64_t *>(smem + kWgMbar), *empty = full + 2;
    const float *Sc = reinterpret_cast<const float *>(smem + kWgScale);
    wg_stage_q(d, b, tl.q, wt + 128);
    fence_proxy_async();
    named_bar_sync(WG_BAR_Q, 256);

    float o[128];
#pragma unroll
    for (int i = 0; i < 128; ++i)
        o[i] = 0.0f;
    const uint64_t dp = wg_kdesc(wg_addr(tl.p));
    const uint64_t dv0 = wg_vdesc(wg_addr(tl.k + 4 * kWgBlockBytes));
    const int32_t ntiles = wg_tiles_in(b);
    for (int32_t i = 0; i < ntiles; ++i, ++n) {
        const int s = (int)(n & 1u);
        named_bar_sync(WG_BAR_PFULL, 256);
        mbar_wait(full + s, (n >> 1) & 1u); /* over already: for the stage's bytes */
        fence_proxy_async();
        const float a0 = Sc[16 * w + g], a1 = Sc[16 * w + g + 8];
        if (mla_wave_any(a0 != 1.0f || a1 != 1.0f)) { /* as in wg_score */
#pragma unroll
            for (int e = 0; e < 128; ++e)
                o[e] *= (e % 4) / 2 ? a1 : a0;
        }
        const uint64_t dv = dv0 + (uint64_t)((s * kWgTileBytes) >> 4);
        wg_fence();
#pragma unroll
        for (int kk = 0; kk < 4; ++kk)
            wg_ss_64x256(o, dp + (uint64_t)((32 * kk) >> 4), dv + (uint64_t)((16 * 128 * kk) >> 4),
                         1);
        wg_commit();
        wg_wait<0>();
        wg_pin(o);
        mbar_arrive(empty + s);
        named_bar_arrive(WG_BAR_PEMPTY, 256);
    }
    named_bar_sync(WG_BAR_OUT, 256);
    uint8_t *const *Or = reinterpret_cast<uint8_t *const *>(tl.p);
    const float *Fs = reinterpret_cast<const float *>(tl.p + 64 * 8);
    wg_store_rows(d, b, Or, Fs, w, g, t, b.c0 + 256, o);
}

/* Between two records of a role (the producer, or the two consumer
 * warpgroups together): its threads are done with the record, its first
 * thread steps the role's cursor to the next. */
MLA_DEV void wg_next_record(const att_desc &d, att_blk &sb, int bar, int threads, int first)
{
    named_bar_sync(bar, threads);
    if ((int)threadIdx.x == first)
        next_block<PATH_MATRIX>(d, sb, false);
    named_bar_sync(bar, threads);
}

#endif /* MLA_ATT_WGMMA */

/* One block per SM walks its records (next_block) with the three roles;
 * every role counts the block's tiles in n alike (stage n & 1, mbarrier
 * parity (n >> 1) & 1), the producer up to two tiles ahead of the
 * consumers, across records too. A device pass without wgmma compiles a marker
 * instead (static shared memory, which the host reads through
 * cudaFuncGetAttributes before it takes this body). */
template <int CT> __global__ __launch_bounds__(kWgThreads, 1) void attention_wg_kernel(att_desc d)
{
#if MLA_ATT_WGMMA
    MLA_IDX_SMEM(unsigned char, smem);
    att_blk &sc = *reinterpret_cast<att_blk *>(smem + kWgBlkC);
    att_blk &sp = *reinterpret_cast<att_blk *>(smem + kWgBlkP);
    const wg_tiles tl = wg_tiles_of(smem);
    if (threadIdx.x == 0) {
        next_block<PATH_MATRIX>(d, sc, true);
        sp = sc;
        uint64_t *mb = reinterpret_cast<uint64_t *>(smem + kWgMbar);
        for (int i = 0; i < 4; ++i) /* full: 2 per producer thread; empty: 1 per consumer */
            mbar_init(mb + i, 256);
        mbar_init_fence();
    }
    /* dims past L + R stay zero in both key stages (no copy writes them) */
    for (int i = (int)threadIdx.x; i < 2 * kWgTileBytes / 16; i += kWgThreads)
        reinterpret_cast<mla_u32x4 *>(tl.k)[i] = mla_u32x4{{0, 0, 0, 0}};
    fence_proxy_async();
    __syncthreads();
    uint32_t n = 0;
    const int role = (int)threadIdx.x / 128;
    if (role == 0) {
        wg_regs_dec<120>();
        while (sp.live) {
            wg_produce<CT>(d, sp, smem, tl, n);
            wg_next_record(d, sp, WG_BAR_PROD, 128, 0);
        }
        /* the consumers may still wait for the last copies: they land
         * before the producer's warps exit */
        cp_async_commit();
        cp_async_wait<0>();
    } else if (role == 1) {
        wg_regs_inc<224>();
        while (sc.live) {
            wg_score(d, sc, smem, tl, n);
            wg_next_record(d, sc, WG_BAR_REC, 256, 128);
        }
    } else {
        wg_regs_dec<160>();
        while (sc.live) {
            wg_value(d, sc, smem, tl, n);
            wg_next_record(d, sc, WG_BAR_REC, 256, 128);
        }
    }
#else
    __shared__ int mla_wg_absent[1];
    *static_cast<volatile int *>(mla_wg_absent) = d.H;
#endif
}

#endif /* __CUDACC__ */

} // namespace

#endif
