/* Paged MQA logits of the DSA indexer (MLA.md section 6). Row r = b * next_n +
 * j, key position n < bound_r = ctx_len[b] - next_n + j + 1:
 *
 *     logits[r, n] = k_scale[n] * sum_h w[r, h] * relu(q[r, h, :] . k[n, :])
 *
 * and -inf from bound_r to logits.shape[1]. Key n is read IN PLACE from the
 * paged cache: block block_table[b, n / block_size], token n % block_size,
 * value offsets of core/ref/indexer_layout.h (NORMAL, or SHUFFLE's 16 x 16
 * tiles, whose 16-byte rows the fast paths load as they lie).
 *
 * A block of 256 threads owns one row and a chunk of keys. Four bodies:
 *
 * - NVIDIA sm_90a (Hopper builds for "90a"; e4m3fn, 49..64 heads, 16-byte
 *   aligned blocks), wgmma m64n64k16 f16 -> f32 per warpgroup: M = 64 keys
 *   (16 per warp, A from registers in mma's A fragment, the dims permuted
 *   as below), N = 64 heads (q, B, once per block in shared memory), K = 8
 *   steps of 16. The tensor cores run asynchronously while the warps
 *   convert the next 16 keys; 1.8x fewer instructions per key than the
 *   mma.sync body (H200, ncu: 112M against 202M at batch 64, 128k keys),
 *   which is what made it faster: both were issue- and latency-bound.
 * - NVIDIA (sm_80+), mma.sync m16n8k16 f16 -> f32: M = heads (16 per tile,
 *   up to 4 tiles), N = keys (8 per tile, 4 tiles = 32 keys per warp
 *   step), K = head dims (8 steps of 16). The dims are permuted inside each
 *   step so that a lane reads its key bytes contiguously: lane (g = l / 4,
 *   t = l % 4) of n-tile j holds key 8 j + g, dims [32 t, 32 t + 32), and
 *   step c's fragment rows 2t, 2t+1, 2t+8, 2t+9 are dims 32 t + 4 c + 0, 1,
 *   2, 3 (q uses the same permutation; the dot product does not care). q
 *   is converted once per block into shared memory in fragment order (one
 *   16-byte load per fragment). Keys arrive by cp.async in up to 4 stages
 *   per warp (3 tiles in flight while one is worked on; both NVIDIA
 *   bodies), each quarter warp reading 128 contiguous bytes; e4m3fn keys are
 *   converted by sm_89+'s cvt.rn.f16x2.e4m3x2 (2 instructions per 4 codes,
 *   NaN codes become NaNs the mma carries). After the steps, each lane adds
 *   w_h relu(dot_h) over its 8 heads (fmaf), and a transposing butterfly
 *   over the 8 lanes of a column (xor 16, 8, 4: 7 shuffles for 8 sums)
 *   leaves lane (g, t) with key 8 (g / 2) + 2 t + g % 2 of the step.
 * - gfx9 (gfx908 .. gfx950), v_mfma_f32_32x32x8_f16: M = heads (32 per
 *   tile, up to 2), N = 32 keys per wave step, K = 16 steps of 8 dims. Lane
 *   (i = l % 32, h = l / 32) holds key i's dims [64 h, 64 h + 64) and step
 *   c's k = 4 h + 0..3 are dims 64 h + 4 c + 0..3; q lives in registers (64
 *   VGPRs for 64 heads). Lanes l and l + 32 hold complementary heads of key
 *   i: one shuffle completes the head sum.
 * - Plain FMA, any head_dim and head count, any cache alignment (the CPU
 *   emulation's path too when MLA_HIP_LOGITS=generic): a thread per key,
 *   fp32 dots over q in shared memory.
 *
 * Arithmetic: fp8 codes become exact f16 (hip/indexer_util.h), products of
 * two are exact in fp32, and the matrix units add them in fp32; relu, the
 * head weights (fmaf: one rounding per head instead of two) and the key
 * scale follow in fp32. The roundings are those the conformance bound
 * allows (gamma_{Hi+131} of the sum of |terms|). A NaN code anywhere in a
 * row's q (any head) or in a key makes that logit NaN, as in the reference
 * (the fast paths test the codes; their f16 images are finite). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hip/indexer_util.h" /* first: the runtime headers select MLA_HD's device form */

#include "core/ref/indexer_layout.h"

namespace {

constexpr int kThreads = 256; /* whole waves on either vendor */
constexpr int kHeadDimFast = 128;
constexpr int kMaxHeadsFast = 64;
constexpr int kGenericQFloats = 8192; /* shared q of the plain path: 32 KB */

struct lg_desc {
    int64_t R, N, next_n, Hi, D, bs;
    int64_t cs0; /* cache block stride, bytes */
    int64_t qs0, qs1, qs2, ws0, ws1, bts0, bts1, cls, ls0, ls1;
    int64_t chunk, chunks; /* keys per block, blocks per row */
    int32_t layout;
    int32_t stages; /* NVIDIA body: key tiles of a warp in shared memory (2 .. 4) */
    int32_t bs_log2; /* log2(block size) when it is a power of two, else -1 */
    mla_gate gate;
};

struct alignas(16) u32x4 {
    uint32_t v[4];
};

/* This block's row, keys [n0, n1), and the row's bound. */
struct lg_block {
    int64_t r, b, n0, n1, bound;
};

MLA_DEV lg_block block_of(const lg_desc &d, const int32_t *ctx_lens)
{
    lg_block k;
    k.r = (int64_t)blockIdx.x / d.chunks;
    const int64_t c = (int64_t)blockIdx.x - k.r * d.chunks;
    k.b = k.r / d.next_n;
    const int64_t j = k.r - k.b * d.next_n;
    k.bound = (int64_t)ctx_lens[k.b * d.cls] - d.next_n + j + 1;
    k.n0 = c * d.chunk;
    k.n1 = k.n0 + d.chunk < d.N ? k.n0 + d.chunk : d.N;
    return k;
}

/* Start of key n's block in the cache, and its token. */
MLA_DEV const uint8_t *key_block(const lg_desc &d, const uint8_t *cache, const int32_t *table,
                                 int64_t b, int64_t n, int64_t &tok)
{
    int64_t jb;
    divmod64(n, d.bs, jb, tok);
    return cache + (int64_t)table[b * d.bts0 + jb * d.bts1] * d.cs0;
}

MLA_DEV float relu(float v) { return v < 0.0f ? 0.0f : v; }

/* Key position n (32 bits) / the block size bs (clamped to 32 bits), by a
 * shift when sh = log2(bs) >= 0 (block sizes 1, 16, 64 ...: no division in
 * the fast bodies' address math). */
[[maybe_unused]] MLA_DEV uint32_t blk_of(uint32_t n, uint32_t bs, int sh)
{
    return sh >= 0 ? n >> sh : n / bs;
}
[[maybe_unused]] MLA_DEV uint32_t tok_of(uint32_t n, uint32_t bs, int sh)
{
    return sh >= 0 ? n & (bs - 1u) : n % bs;
}

/* 4 codes of q from element off on, dims stride qs2: one word load when
 * they are contiguous and aligned. */
[[maybe_unused]] MLA_DEV uint32_t load_q4(const uint8_t *q, int64_t off, int64_t qs2)
{
    const uint8_t *p = q + off;
    if (qs2 == 1 && (reinterpret_cast<uintptr_t>(p) & 3) == 0)
        return *reinterpret_cast<const uint32_t *>(p);
    return (uint32_t)p[0] | ((uint32_t)p[qs2] << 8) | ((uint32_t)p[2 * qs2] << 16) |
           ((uint32_t)p[3 * qs2] << 24);
}

MLA_DEV float fp8_value(uint8_t c, int fnuz)
{
    return fnuz ? mla_fb_e4m3fnuz_to_f32(c) : mla_fb_e4m3fn_to_f32(c);
}

/* -inf at [max(n0, bound), n1). */
MLA_DEV void fill_neg_inf(const lg_desc &d, const lg_block &k, float *out)
{
    const int64_t from = k.bound > k.n0 ? k.bound : k.n0;
    for (int64_t n = from + threadIdx.x; n < k.n1; n += kThreads)
        out[k.r * d.ls0 + n * d.ls1] = -INFINITY;
}

/* ---------------------------------------------------------- plain FMA */

template <int FNUZ>
MLA_DEV void generic_block(const lg_desc &d, const lg_block &k, const uint8_t *cache,
                           const uint8_t *q, const float *w, const int32_t *table, float *out,
                           float *smem, int64_t smem_floats)
{
    /* the 256 code values, then q's heads */
    float *lut = smem, *qs = smem + 256;
    const int64_t q_floats = smem_floats - 256;
    for (int c = (int)threadIdx.x; c < 256; c += kThreads)
        lut[c] = fp8_value((uint8_t)c, FNUZ);
    idx_sync();
    const int64_t nc = k.bound < k.n1 ? k.bound : k.n1;
    /* 32-bit arithmetic: head_dim <= 8192 (supports()), q_floats <= 8192 */
    const int D = (int)d.D, per = (int)q_floats / D > 0 ? (int)q_floats / D : 1;
    const int64_t HG = per < d.Hi ? per : d.Hi;
    const bool once = HG >= d.Hi; /* q fits: load it once */
    for (int64_t kb = k.n0; kb < nc; kb += kThreads) { /* bound uniform per block */
        const int64_t n = kb + threadIdx.x;
        const bool valid = n < nc;
        int64_t tok = 0;
        const uint8_t *blk = valid ? key_block(d, cache, table, k.b, n, tok) : cache;
        float S = 0.0f;
        for (int64_t g0 = 0; g0 < d.Hi; g0 += HG) {
            const int64_t hn = d.Hi - g0 < HG ? d.Hi - g0 : HG;
            if (!once || kb == k.n0) {
                idx_sync();
                for (int i = (int)threadIdx.x; i < (int)hn * D; i += kThreads) {
                    const int h = i / D, c = i - h * D;
                    qs[i] = lut[q[k.r * d.qs0 + (g0 + h) * d.qs1 + c * d.qs2]];
                }
                idx_sync();
            }
            if (!valid)
                continue;
            /* value (tok, c) = value (tok, 0) + value (0, c) in both layouts */
            const uint8_t *kp = blk + mla_il_value_byte(d.layout, tok, 0, d.D);
            for (int h = 0; h < (int)hn; ++h) {
                float dot = 0.0f;
                for (int c = 0; c < D; ++c)
                    dot = fmaf(qs[h * D + c], lut[kp[(int)mla_il_value_byte(d.layout, 0, c, D)]], dot);
                S = fmaf(w[k.r * d.ws0 + (g0 + h) * d.ws1], relu(dot), S);
            }
        }
        if (valid)
            out[k.r * d.ls0 + n * d.ls1] =
                S * mla_il_get_scale(blk + mla_il_scale_byte(tok, d.bs, d.D));
    }
}

/* ------------------------------------------------- NVIDIA: mma.sync */

/* Shared memory of the NVIDIA body: q's fragments, w, a flag, then per warp
 * `stages` tiles of 32 keys (4 n-tiles x 2 halves x 32 lanes x 16 bytes)
 * and their 32 scales (148 KB for 64 heads and 4 stages). A warp keeps
 * stages - 1 tiles of keys in flight (12 KB at 4: about 100 KB per
 * multiprocessor, what HBM3's latency wants at its bandwidth) while it
 * works on one, without holding them in registers. */
constexpr int64_t kNvStageBytes = 4 * 2 * 32 * 16;
[[maybe_unused]] constexpr int kNvMaxStages = 4;
[[maybe_unused]] constexpr int64_t nv_smem_bytes(int mt, int stages)
{
    return mt * 8 * 32 * 16 + (kMaxHeadsFast + 4) * 4 +
           (int64_t)(kThreads / 32) * stages * (kNvStageBytes + 32 * 4);
}

#if MLA_IDX_MMA_NV

/* The cache block of key tile0 + lane (0 past nc): loaded a tile ahead of
 * its use, so that issuing a tile never waits for the block table; the
 * copies take each key's id from its lane by a shuffle. */
MLA_DEV int32_t nv_block_id(const lg_desc &d, const int32_t *trow, int32_t tile0, int32_t nc,
                            uint32_t bs, int lane)
{
    const int32_t n = tile0 + lane;
    return n < nc ? trow[(int64_t)blk_of((uint32_t)n, bs, d.bs_log2) * d.bts1] : 0;
}

/* Where the consumer lane (g, t) finds its 16 bytes of an (n-tile, half)
 * group of the stage: slot 8 t + (g ^ 2 t). The reads (a quarter warp: g
 * in {2q, 2q + 1}, t = 0..3) and the copies (a quarter warp: one t, g =
 * 0..7) both touch 8 distinct 16-byte bank groups. */
MLA_DEV int nv_slot(int g, int t) { return 8 * t + (g ^ (2 * t)); }

/* Where piece p (dims 16 p ..) of key k of a tile goes in its stage: the
 * (n-tile, half) group of consumer lane (k % 8, p / 2). */
MLA_DEV uint8_t *nv_dst(uint8_t *st, int k, int p)
{
    return st + (((k >> 3) * 2 + (p & 1)) * 32 + nv_slot(k & 7, p >> 1)) * 16;
}

/* Keys [tile0, tile0 + 32) of the warp into stage buffer `st` (bytes) and
 * their scales into `sc` (key tile0 + i at sc[i]), with cp.async. Consumer
 * lane (g, t) of n-tile j wants dims [32 t, 32 t + 32) of key 8 j + g, as
 * halves of 16 bytes; the copies are assigned so that each quarter warp
 * reads 128 contiguous bytes (a whole 16 x 16 tile row of 8 tokens in
 * SHUFFLE, one key row in NORMAL): 16-byte reads of lanes that split
 * 32-byte sectors cost the L2 twice the sectors. Keys at or past nc are
 * zero (their results are not stored). */
template <int LAYOUT, bool A16>
MLA_DEV void nv_issue(const lg_desc &d, const uint8_t *cache, int32_t id, int32_t tile0,
                      int32_t nc, uint32_t bs, int lane, uint8_t *st, float *sc)
{
    if (A16 && bs % 32 == 0) {
        /* the tile's 32 keys are 4 KB in one block (tile0 is a multiple of
         * 32; both layouts place tokens 32 m .. 32 m + 31 there, SHUFFLE as
         * two 2 KB runs of 16 x 16 tiles): copy u moves bytes 512 u + 16
         * lane of the run, with no per-key address */
        const uint32_t tok0 = tok_of((uint32_t)tile0, bs, d.bs_log2);
        const int32_t id0 = (int32_t)shfl_u32((uint32_t)id, 0); /* lanes past nc hold 0 */
        const uint8_t *blk = cache + (int64_t)id0 * d.cs0, *run = blk + tok0 * kHeadDimFast;
#pragma unroll
        for (int u = 0; u < 8; ++u) {
            const int k = LAYOUT == MLA_IL_SHUFFLE ? 16 * (u >> 2) + (lane & 15) : 4 * u + (lane >> 3);
            const int p = LAYOUT == MLA_IL_SHUFFLE ? 2 * (u & 3) + (lane >> 4) : lane & 7;
            cp_async16_stream(nv_dst(st, k, p), run + 512 * u + 16 * lane, tile0 + k < nc);
        }
        cp_async<4>(sc + lane, blk + d.bs * kHeadDimFast + 4 * (int64_t)(tok0 + lane),
                    tile0 + lane < nc);
        cp_async_commit();
        return;
    }
#pragma unroll
    for (int u = 0; u < 8; ++u) {
        /* key k of the tile and its 16-byte piece p (dims 16 p ..) */
        const int k = LAYOUT == MLA_IL_SHUFFLE ? 8 * (u >> 1) + (lane & 7) : 4 * u + (lane >> 3);
        const int p = LAYOUT == MLA_IL_SHUFFLE ? 2 * (lane >> 3) + (u & 1) : lane & 7;
        const int32_t idk = (int32_t)shfl_u32((uint32_t)id, k), n = tile0 + k;
        const bool valid = n < nc;
        const uint8_t *src = cache;
        if (valid) {
            const uint32_t tok = tok_of((uint32_t)n, bs, d.bs_log2);
            const uint8_t *blk = cache + (int64_t)idk * d.cs0;
            src = LAYOUT == MLA_IL_SHUFFLE
                      ? blk + (tok / 16) * 16 * kHeadDimFast + p * 256 + (tok % 16) * 16
                      : blk + tok * kHeadDimFast + 16 * p;
        }
        uint8_t *dst = nv_dst(st, k, p);
        if (A16) {
            cp_async16_stream(dst, src, valid);
        } else {
#pragma unroll
            for (int e = 0; e < 4; ++e)
                cp_async<4>(dst + 4 * e, src + 4 * e, valid);
        }
    }
    const int32_t n = tile0 + lane;
    const bool valid = n < nc;
    const uint8_t *ps = cache;
    if (valid)
        ps = cache + (int64_t)id * d.cs0 + d.bs * kHeadDimFast +
             4 * (int64_t)tok_of((uint32_t)n, bs, d.bs_log2);
    cp_async<4>(sc + lane, ps, valid);
    cp_async_commit();
}

/* The mma body's work on one stage: this warp's 32 keys against every
 * head tile (K = 8 steps of 16), then the weighted relu sums. */
template <int FNUZ, int MT>
MLA_DEV void mma_stage(const u32x4 *kb, const u32x4 *qf, const float *sc, const float (&wl)[MT][2],
                       int32_t tile0, int32_t nc, bool nan_row, int64_t ls1, float *orow, int lane)
{
    const int g = lane >> 2, t = lane & 3;
    /* e4m3fn keys through the hardware conversion: NaN codes reach the
     * matrix unit as NaNs and need no test */
    constexpr bool kCvt = MLA_IDX_CVT_E4M3 && FNUZ == 0;
    float acc[MT][4][4];
#pragma unroll
    for (int i = 0; i < MT; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e)
                acc[i][j][e] = 0.0f;
    uint32_t nanbits = 0;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
        /* this lane's words of key 8 j + g, dims 32 t + 16 half + 0..15 */
        u32x4 raw[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            raw[j] = kb[(j * 2 + half) * 32 + nv_slot(g, t)];
            if constexpr (!kCvt) {
#pragma unroll
                for (int e = 0; e < 4; ++e)
                    nanbits |= fp8_nan_bytes<FNUZ>(raw[j].v[e]) ? 1u << j : 0u;
            }
        }
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            const int c = 4 * half + e;
            uint32_t bf[4][2];
#pragma unroll
            for (int j = 0; j < 4; ++j) {
#if MLA_IDX_CVT_E4M3
                if constexpr (kCvt)
                    e4m3fn_x4_to_f16_cvt(raw[j].v[e], bf[j][0], bf[j][1]);
                else
#endif
                    fp8x4_to_f16<FNUZ>(raw[j].v[e], bf[j][0], bf[j][1]);
            }
#pragma unroll
            for (int i = 0; i < MT; ++i) {
                const u32x4 a = qf[(i * 8 + c) * 32 + lane];
#pragma unroll
                for (int j = 0; j < 4; ++j)
                    mma_16816(acc[i][j], a.v, bf[j]);
            }
        }
    }
    /* a NaN code in the key (any of its 4 loaders) or in q: its scale
     * becomes NaN, and so does the logit */
    if constexpr (!kCvt) {
        nanbits |= mla_shfl_xor(nanbits, 1);
        nanbits |= mla_shfl_xor(nanbits, 2);
    }
    float scale = sc[8 * t + g]; /* key 8 t + g */
    if (nan_row || ((nanbits >> t) & 1u))
        scale = mla_fb_float(MLA_FB_F32_QNAN);
    /* sums over this lane's heads: value 2 j + p is key 8 j + 2 t + p */
    float P[8];
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int p = 0; p < 2; ++p) {
            float sum = 0.0f;
#pragma unroll
            for (int i = 0; i < MT; ++i) {
                sum = fmaf(wl[i][0], relu(acc[i][j][p]), sum);
                sum = fmaf(wl[i][1], relu(acc[i][j][2 + p]), sum);
            }
            P[2 * j + p] = sum;
        }
    /* over the 8 lanes of a column: the half a lane keeps follows g's bits */
    const bool b2 = (g & 4) != 0, b1 = (g & 2) != 0, b0 = (g & 1) != 0;
    float Q1[4], Q2[2];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const float send = b2 ? P[i] : P[i + 4], keep = b2 ? P[i + 4] : P[i];
        Q1[i] = keep + mla_shfl_xor(send, 16);
    }
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        const float send = b1 ? Q1[i] : Q1[i + 2], keep = b1 ? Q1[i + 2] : Q1[i];
        Q2[i] = keep + mla_shfl_xor(send, 8);
    }
    const float S = (b0 ? Q2[1] : Q2[0]) + mla_shfl_xor(b0 ? Q2[0] : Q2[1], 4);
    /* this lane stores key 8 (g / 2) + 2 t + g % 2, whose scale lane
     * (2 t + g % 2, g / 2) fetched */
    const float ks = mla_fb_float(shfl_u32(mla_fb_bits(scale), 4 * (2 * t + (g & 1)) + (g >> 1)));
    const int32_t n = tile0 + 8 * (g >> 1) + 2 * t + (g & 1);
    if (n < nc)
        orow[(int64_t)n * ls1] = S * ks;
}

#if MLA_IDX_WGMMA
/* relu that keeps NaN (max.NaN: one instruction; NaN codes must reach the
 * logit, and relu(-0) = +0 changes no sum that starts at +0). */
MLA_DEV float relu_nan(float v)
{
    float r;
    asm("max.NaN.f32 %0, %1, 0f00000000;" : "=f"(r) : "f"(v));
    return r;
}

/* The A operand of set s of a stage (keys 16 s + g and 16 s + g + 8 of the
 * warp: the rows of mma.m16n8k16's A fragment), one register quad per step
 * c, the dims permuted as in the mma body: step c's pairs are dims 32 t +
 * 4 c + (0, 1) and (2, 3). */
MLA_DEV void wg_keys(const u32x4 *kb, int s, int g, int t, uint32_t (&a)[8][4])
{
#pragma unroll
    for (int half = 0; half < 2; ++half) {
        const u32x4 r0 = kb[((2 * s) * 2 + half) * 32 + nv_slot(g, t)];
        const u32x4 r1 = kb[((2 * s + 1) * 2 + half) * 32 + nv_slot(g, t)];
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            e4m3fn_x4_to_f16_cvt(r0.v[e], a[4 * half + e][0], a[4 * half + e][2]);
            e4m3fn_x4_to_f16_cvt(r1.v[e], a[4 * half + e][1], a[4 * half + e][3]);
        }
    }
}

/* 8 wgmma steps of 64 keys (16 per warp) x 64 heads x 16 dims, q (B) at
 * descriptor q0 + step * 2048 bytes; one commit group. */
MLA_DEV void wg_issue(float (&acc)[32], const uint32_t (&a)[8][4], uint64_t q0)
{
    wg_fence();
#pragma unroll
    for (int c = 0; c < 8; ++c)
        wgmma_m64n64k16(acc, a[c], q0 + 128u * (uint64_t)c, c > 0);
    wg_commit();
}

/* The logits of a finished set: lane (g, t) holds heads 8 i + 2 t + 0, 1
 * of keys g (acc[4 i + 0, 1]) and g + 8 (acc[4 i + 2, 3]); lanes t = 0, 1
 * store keys key0 + g and key0 + g + 8 (position tile0 + key), whose scale
 * is ks. */
MLA_DEV void wg_store(float (&acc)[32], const float (&wl)[16], float ks, int32_t tile0, int key0,
                      int32_t nc, int64_t ls1, float *orow, int g, int t)
{
    wg_pin(acc);
    float S0 = 0.0f, S1 = 0.0f;
#pragma unroll
    for (int i = 0; i < 8; ++i) {
        S0 = fmaf(wl[2 * i], relu_nan(acc[4 * i]), S0);
        S0 = fmaf(wl[2 * i + 1], relu_nan(acc[4 * i + 1]), S0);
        S1 = fmaf(wl[2 * i], relu_nan(acc[4 * i + 2]), S1);
        S1 = fmaf(wl[2 * i + 1], relu_nan(acc[4 * i + 3]), S1);
    }
    S0 += mla_shfl_xor(S0, 1);
    S1 += mla_shfl_xor(S1, 1);
    S0 += mla_shfl_xor(S0, 2);
    S1 += mla_shfl_xor(S1, 2);
    const int32_t n = tile0 + key0 + g + 8 * (t & 1);
    if (t < 2 && n < nc)
        orow[(int64_t)n * ls1] = ((t & 1) ? S1 : S0) * ks;
}
#endif

/* WG: the warpgroup body (sm_90a, e4m3fn, 64 heads: FNUZ 0, MT 4); q then
 * lies in shared memory as wgmma's K-major B operand, step c (dims 32 t +
 * 4 c + 0..3 for t = 0..3, the mma body's permutation) at c * 2048 bytes,
 * head n's 16 values of the step in core matrix n / 8 (256 bytes apart),
 * the pairs (+0, +1) in its first 128 bytes and (+2, +3) in the next. */
template <int FNUZ, int LAYOUT, int MT, bool A16, bool WG = false>
MLA_DEV void nv_block(const lg_desc &d, const lg_block &k, const uint8_t *cache, const uint8_t *q,
                      const float *w, const int32_t *table, float *out, uint32_t *qs)
{
    static_assert(!WG || (FNUZ == 0 && MT == 4 && A16), "the warpgroup body's case");
    float *wsm = reinterpret_cast<float *>(qs + MT * 8 * 32 * 4);
    uint32_t *rownan = reinterpret_cast<uint32_t *>(wsm + kMaxHeadsFast);
    const int S = d.stages;
    uint8_t *stages = reinterpret_cast<uint8_t *>(rownan + 4);
    float *scales = reinterpret_cast<float *>(stages + (kThreads / 32) * S * kNvStageBytes);
    const int tid = (int)threadIdx.x;
    const int lane = tid & 31, warp = tid >> 5, g = lane >> 2;
    [[maybe_unused]] const int t = lane & 3;
    /* key positions are below a context length (I32): 32-bit index math; a
     * block size past it behaves as INT32_MAX (one block holds every key) */
    const int32_t nc = (int32_t)(k.bound < k.n1 ? k.bound : k.n1);
    const uint32_t bs = d.bs < 0x7FFFFFFF ? (uint32_t)d.bs : 0x7FFFFFFFu;
    const int32_t *trow = table + k.b * d.bts0;
    uint8_t *st = stages + warp * S * kNvStageBytes;
    float *sc = scales + warp * S * 32;
    constexpr int32_t kStep = 32 * (kThreads / 32);
    int32_t tile0 = (int32_t)k.n0 + 32 * warp;
    /* the first S - 1 tiles are on their way while q is converted (their
     * block ids loaded together first); the ids of the tile after them are
     * loaded one step ahead */
    int32_t id;
    {
        int32_t pre[kNvMaxStages - 1];
#pragma unroll
        for (int s = 0; s < kNvMaxStages - 1; ++s)
            pre[s] = nv_block_id(d, trow, s < S - 1 ? tile0 + s * kStep : nc, nc, bs, lane);
#pragma unroll
        for (int s = 0; s < kNvMaxStages - 1; ++s) {
            if (s >= S - 1)
                break;
            if (tile0 + s * kStep < nc)
                nv_issue<LAYOUT, A16>(d, cache, pre[s], tile0 + s * kStep, nc, bs, lane,
                                      st + s * kNvStageBytes, sc + s * 32);
            else
                cp_async_commit(); /* an empty group keeps the count */
        }
    }
    id = nv_block_id(d, trow, tile0 + (S - 1) * kStep, nc, bs, lane);
    if (tid == 0)
        *rownan = 0;
    idx_sync();
    /* q in fragment order, word ((i * 8 + c) * 32 + lane) * 4 + reg: dims
     * 32 t + 4 c + 0..3 of head h are one word of q (quad x = h * 32 + 8 t +
     * c, so a warp reads whole rows), split into the fragment's words for
     * dims + 0, 1 (reg 0 | 1) and + 2, 3 (reg 2 | 3) */
    constexpr int kQW = MT * 16 * 32 / kThreads; /* q words per thread */
    static_assert(kQW * kThreads == MT * 16 * 32, "whole q words per thread");
    uint32_t qv[kQW];
#pragma unroll
    for (int u = 0; u < kQW; ++u) { /* all loads first: one latency */
        const int x = tid + u * kThreads, h = x >> 5, tq = (x >> 3) & 3, c = x & 7;
        qv[u] = h < d.Hi ? load_q4(q, k.r * d.qs0 + h * d.qs1 + (32 * tq + 4 * c) * d.qs2, d.qs2)
                         : 0u;
    }
    const float wv = tid < d.Hi && tid < kMaxHeadsFast ? w[k.r * d.ws0 + tid * d.ws1] : 0.0f;
    bool qnan = false;
#pragma unroll
    for (int u = 0; u < kQW; ++u) {
        const int x = tid + u * kThreads, h = x >> 5, tq = (x >> 3) & 3, c = x & 7;
        qnan |= fp8_nan_bytes<FNUZ>(qv[u]) != 0;
        uint32_t lo, hi;
        fp8x4_to_f16<FNUZ>(qv[u], lo, hi);
        if constexpr (WG) {
            const int word = (c * 2048 + (h >> 3) * 256 + (h & 7) * 16 + 4 * tq) / 4;
            qs[word] = lo;
            qs[word + 32] = hi; /* the next core matrix along K: 128 bytes on */
        } else {
            const int i = h >> 4, up = (h >> 3) & 1, ln = (h & 7) * 4 + tq;
            const int word = ((i * 8 + c) * 32 + ln) * 4;
            qs[word + up] = lo;
            qs[word + 2 + up] = hi;
        }
    }
    if (qnan)
        *rownan = 1;
    if (tid < kMaxHeadsFast)
        wsm[tid] = wv;
    if constexpr (WG)
        fence_proxy_async(); /* q, written by stores, is read by wgmma */
    idx_sync();
    const bool nan_row = *rownan != 0;
    /* this lane's head weights: heads 16 i + g and 16 i + g + 8 */
    float wl[MT][2];
#pragma unroll
    for (int i = 0; i < MT; ++i) {
        wl[i][0] = wsm[16 * i + g];
        wl[i][1] = wsm[16 * i + g + 8];
    }
    const u32x4 *qf = reinterpret_cast<const u32x4 *>(qs);
    float *orow = out + k.r * d.ls0;
#if MLA_IDX_WGMMA
    float wg_w[16]; /* heads 8 i + 2 t + 0, 1 */
    const float nan_f = mla_fb_float(MLA_FB_F32_QNAN);
    uint64_t q0 = 0;
    if constexpr (WG) {
#pragma unroll
        for (int i = 0; i < 8; ++i) {
            wg_w[2 * i] = wsm[8 * i + 2 * t];
            wg_w[2 * i + 1] = wsm[8 * i + 2 * t + 1];
        }
        q0 = wg_desc(qs, 128, 256); /* K: core matrices 128 bytes apart, heads 256 */
    }
#endif
    /* the warpgroup body's warps run the same steps (wgmma is collective):
     * its loop ends with its first warp's */
    const int32_t lead = WG ? 32 * (warp & 3) : 0;
    for (int buf = 0; tile0 - lead < nc; tile0 += kStep, buf = buf + 1 == S ? 0 : buf + 1) {
        /* the tile S - 1 steps ahead goes out, into the stage the last step
         * used, before this one's keys are used */
        const int32_t ahead = tile0 + (S - 1) * kStep;
        const int nb = buf == 0 ? S - 1 : buf - 1;
        if (ahead < nc)
            nv_issue<LAYOUT, A16>(d, cache, id, ahead, nc, bs, lane, st + nb * kNvStageBytes,
                                  sc + nb * 32);
        else
            cp_async_commit(); /* an empty group keeps the count */
        id = nv_block_id(d, trow, ahead + kStep, nc, bs, lane); /* lands during this tile */
        /* this tile's group is done when at most S - 1 are in flight */
        if (S >= 4)
            cp_async_wait<3>();
        else if (S == 3)
            cp_async_wait<2>();
        else
            cp_async_wait<1>();
        const u32x4 *kb = reinterpret_cast<const u32x4 *>(st + buf * kNvStageBytes);
#if MLA_IDX_WGMMA
        if constexpr (WG) {
            /* set 1 goes out before set 0 is summed (a pipeline across
             * stages made ptxas serialize the wgmma: it cannot follow a
             * group past the loop's back edge) */
            const float *scb = sc + buf * 32;
            const int row = g + 8 * (t & 1);
            float acc[2][32];
            uint32_t a[2][8][4];
#pragma unroll
            for (int s = 0; s < 2; ++s) {
                wg_keys(kb, s, g, t, a[s]);
                wg_issue(acc[s], a[s], q0);
            }
            wg_wait<1>();
            wg_store(acc[0], wg_w, nan_row ? nan_f : scb[row], tile0, 0, nc, d.ls1, orow, g, t);
            wg_wait<0>();
            wg_store(acc[1], wg_w, nan_row ? nan_f : scb[16 + row], tile0, 16, nc, d.ls1, orow, g,
                     t);
        } else
#endif
            mma_stage<FNUZ, MT>(kb, qf, sc + buf * 32, wl, tile0, nc, nan_row, d.ls1, orow, lane);
    }
    cp_async_wait<0>();
}
#endif

/* ---------------------------------------------------- gfx9: MFMA */

#if MLA_IDX_MMA_AMD
template <int FNUZ, int LAYOUT, int MT, bool A16>
MLA_DEV void amd_block(const lg_desc &d, const lg_block &k, const uint8_t *cache, const uint8_t *q,
                       const float *w, const int32_t *table, float *out)
{
    constexpr int HT = (MT + 1) / 2; /* tiles of 32 heads */
    const int tid = (int)threadIdx.x, lane = tid & 63, wave = tid >> 6;
    const int i = lane & 31, h = lane >> 5;
    /* q[32 tt + i][64 h + 4 c .. + 3] as two f16 pairs, w of this lane's heads */
    uint32_t qr[HT][16][2];
    float wr[HT][16];
    bool nan_q = false;
#pragma unroll
    for (int tt = 0; tt < HT; ++tt) {
        const int64_t head = 32 * tt + i;
        uint32_t xv[16];
#pragma unroll
        for (int c = 0; c < 16; ++c) /* all loads first: one latency */
            xv[c] = head < d.Hi
                        ? load_q4(q, k.r * d.qs0 + head * d.qs1 + (64 * h + 4 * c) * d.qs2, d.qs2)
                        : 0u;
#pragma unroll
        for (int c = 0; c < 16; ++c) {
            nan_q |= fp8_nan_bytes<FNUZ>(xv[c]) != 0;
            fp8x4_to_f16<FNUZ>(xv[c], qr[tt][c][0], qr[tt][c][1]);
        }
#pragma unroll
        for (int v = 0; v < 16; ++v) {
            const int64_t hd = 32 * tt + 8 * (v / 4) + 4 * h + v % 4;
            wr[tt][v] = hd < d.Hi ? w[k.r * d.ws0 + hd * d.ws1] : 0.0f;
        }
    }
    const bool nan_row = mla_wave_any(nan_q);
    /* 32-bit key positions (below an I32 context length); the block id of
     * this lane's key in the next tile is loaded a tile ahead */
    const int32_t nc = (int32_t)(k.bound < k.n1 ? k.bound : k.n1);
    const uint32_t bs = d.bs < 0x7FFFFFFF ? (uint32_t)d.bs : 0x7FFFFFFFu;
    const int32_t *trow = table + k.b * d.bts0;
    constexpr int32_t kStep = 32 * (kThreads / 64);
    int32_t tile0 = (int32_t)k.n0 + 32 * wave;
    const int sh = d.bs_log2;
    int32_t id = tile0 + i < nc ? trow[(int64_t)blk_of((uint32_t)(tile0 + i), bs, sh) * d.bts1] : 0;
    for (; tile0 < nc; tile0 += kStep) {
        const int32_t n = tile0 + i, nn = n + kStep;
        const int32_t id_next = nn < nc ? trow[(int64_t)blk_of((uint32_t)nn, bs, sh) * d.bts1] : 0;
        uint32_t raw[16];
        const uint8_t *blk = cache;
        uint32_t tok = 0;
        if (n < nc) {
            tok = tok_of((uint32_t)n, bs, sh);
            blk = cache + (int64_t)id * d.cs0;
#pragma unroll
            for (int qq = 0; qq < 4; ++qq) {
                const uint8_t *p = LAYOUT == MLA_IL_SHUFFLE
                                       ? blk + (tok / 16) * 16 * kHeadDimFast + (tok % 16) * 16 +
                                             (4 * h + qq) * 256
                                       : blk + tok * kHeadDimFast + 64 * h + 16 * qq;
                if (A16) {
                    const u32x4 v = *reinterpret_cast<const u32x4 *>(p);
#pragma unroll
                    for (int e = 0; e < 4; ++e)
                        raw[4 * qq + e] = v.v[e];
                } else {
#pragma unroll
                    for (int e = 0; e < 4; ++e)
                        raw[4 * qq + e] = reinterpret_cast<const uint32_t *>(p)[e];
                }
            }
        } else {
#pragma unroll
            for (int e = 0; e < 16; ++e)
                raw[e] = 0;
        }
        uint32_t nb = 0;
#pragma unroll
        for (int e = 0; e < 16; ++e)
            nb |= fp8_nan_bytes<FNUZ>(raw[e]);
        float acc[HT][16];
#pragma unroll
        for (int tt = 0; tt < HT; ++tt)
#pragma unroll
            for (int v = 0; v < 16; ++v)
                acc[tt][v] = 0.0f;
#pragma unroll
        for (int c = 0; c < 16; ++c) {
            uint32_t bf[2];
            fp8x4_to_f16<FNUZ>(raw[c], bf[0], bf[1]);
#pragma unroll
            for (int tt = 0; tt < HT; ++tt)
                mfma_32x32x8(acc[tt], qr[tt][c], bf);
        }
        float S = 0.0f;
#pragma unroll
        for (int tt = 0; tt < HT; ++tt)
#pragma unroll
            for (int v = 0; v < 16; ++v)
                S = fmaf(wr[tt][v], relu(acc[tt][v]), S);
        S += mla_shfl_xor(S, 32);
        nb |= mla_shfl_xor(nb, 32);
        if (h == 0 && n < nc) {
            const float scale = mla_fb_float(
                *reinterpret_cast<const uint32_t *>(blk + d.bs * kHeadDimFast + 4 * (int64_t)tok));
            out[k.r * d.ls0 + (int64_t)n * d.ls1] =
                (nan_row || nb != 0) ? mla_fb_float(MLA_FB_F32_QNAN) : S * scale;
        }
        id = id_next;
    }
}
#endif

/* ptxas keeps the NVIDIA body near 128 registers with small spills unless
 * told it may use more: 168 at most (165 used for 64 heads: one block of 8
 * warps per SM, each with three tiles of keys in flight in shared memory). */
#if defined(__CUDACC__) && !MLA_IDX_EMU &&                                                         \
    (__CUDACC_VER_MAJOR__ > 12 || (__CUDACC_VER_MAJOR__ == 12 && __CUDACC_VER_MINOR__ >= 4))
#define MLA_IDX_LOGITS_BOUNDS __maxnreg__(168)
#else
#define MLA_IDX_LOGITS_BOUNDS __launch_bounds__(kThreads)
#endif

/* FAST: 0 the plain body; 1, 2 the matrix body of this device (the plain
 * one where it has none) for key rows aligned to 4 or 16 bytes. */

template <int FAST, int FNUZ, int LAYOUT, int MT>
__global__ MLA_IDX_LOGITS_BOUNDS void logits_kernel(const uint8_t *cache, const uint8_t *q,
                                                           const float *w, const int32_t *table,
                                                           const int32_t *ctx_lens, float *out,
                                                           lg_desc d, int64_t smem_bytes)
{
    MLA_IDX_SMEM(uint32_t, smem);
    const lg_block k = block_of(d, ctx_lens); /* its load beside the gate's */
    if (mla_gate_closed(d.gate))
        return;
    if (k.n0 < k.bound) {
        if constexpr (FAST != 0) {
#if MLA_IDX_MMA_NV
            nv_block<FNUZ, LAYOUT, MT, FAST == 2>(d, k, cache, q, w, table, out, smem);
#elif MLA_IDX_MMA_AMD
            amd_block<FNUZ, LAYOUT, MT, FAST == 2>(d, k, cache, q, w, table, out);
#else
            generic_block<FNUZ>(d, k, cache, q, w, table, out, reinterpret_cast<float *>(smem),
                                smem_bytes / 4);
#endif
        } else {
            generic_block<FNUZ>(d, k, cache, q, w, table, out, reinterpret_cast<float *>(smem),
                                smem_bytes / 4);
        }
    }
    fill_neg_inf(d, k, out);
}

#if defined(__CUDACC__)
/* The warpgroup body where the device pass has wgmma (sm_90a), the mma
 * body otherwise; its own kernel for its own register budget (two
 * accumulator sets and two A sets: 128 registers before any address). */
template <int LAYOUT>
__global__ __launch_bounds__(kThreads, 1) void logits_wg_kernel(const uint8_t *cache,
                                                               const uint8_t *q, const float *w,
                                                               const int32_t *table,
                                                               const int32_t *ctx_lens, float *out,
                                                               lg_desc d)
{
    MLA_IDX_SMEM(uint32_t, smem);
    const lg_block k = block_of(d, ctx_lens); /* its load beside the gate's */
    if (mla_gate_closed(d.gate))
        return;
#if MLA_IDX_MMA_NV
    if (k.n0 < k.bound)
        nv_block<0, LAYOUT, 4, true, MLA_IDX_WGMMA != 0>(d, k, cache, q, w, table, out, smem);
#else
    (void)cache, (void)q, (void)w, (void)table, (void)smem;
#endif
    fill_neg_inf(d, k, out);
}

/* tuning.hip_logits mma keeps the mma body where the warpgroup one would
 * run (a check of one against the other). */
bool wg_wanted(const mla_context *ctx)
{
    return ctx->tuning.hip_logits != MLA_TUNE_HIP_LOGITS_MMA;
}
#endif

template <int FAST, int FNUZ, int LAYOUT, int MT>
mla_status launch(mla_context *ctx, const mla_indexer_logits_args *a, const lg_desc &d)
{
    /* the NVIDIA body's q fragments, w, a flag and key stages; the plain
     * body's code table and q (also what the fast kernel falls back to on a
     * device without matrix instructions) */
    int64_t smem = (256 + kGenericQFloats) * 4;
    lg_desc dl = d;
    if (FAST) {
#if defined(__CUDACC__)
        /* as many key stages as the device's shared memory holds (4 on
         * sm_80 and sm_90; the emulation takes 3, no power of two) */
        int stages = kNvMaxStages;
#if MLA_IDX_EMU
        stages = 3;
#else
        int optin = 0;
        cudaError_t err = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin,
                                                 mla_hip_state_of(ctx)->device);
        if (err != cudaSuccess)
            return mla_hip_fail(ctx, err, "cudaDeviceGetAttribute (shared memory per block)");
        /* When the blocks are one wave, they all start at once and their
         * first copies are the whole device's requests: with 2 stages the
         * first tiles land sooner; over several waves 4 keep more in
         * flight (both measured on the H200, bench/bench_indexer.c). */
        if (d.R * d.chunks <= (int64_t)mla_hip_state_of(ctx)->multiprocessors)
            stages = 2;
        /* tuning.hip_logits_stages 2, 3 or 4: that many (a measurement of
         * what they buy) */
        if (ctx->tuning.hip_logits_stages)
            stages = ctx->tuning.hip_logits_stages;
        while (stages > 2 && nv_smem_bytes(MT, stages) > optin)
            --stages;
#endif
        dl.stages = stages;
        smem = nv_smem_bytes(MT, stages);
        if constexpr (FAST == 2 && FNUZ == 0 && MT == 4) {
            if (wg_wanted(ctx)) {
#if !MLA_IDX_EMU
                err = cudaFuncSetAttribute(logits_wg_kernel<LAYOUT>,
                                           cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
                if (err != cudaSuccess)
                    return mla_hip_fail(ctx, err, "cudaFuncSetAttribute (logits shared memory)");
#endif
#if MLA_IDX_EMU
                logits_wg_kernel<LAYOUT>
                    <<<(unsigned)(d.R * d.chunks), kThreads, (size_t)smem,
                       mla_hip_state_of(ctx)->stream>>>(
                        static_cast<const uint8_t *>(a->cache.data),
                        static_cast<const uint8_t *>(a->q.data), static_cast<const float *>(a->w.data),
                        static_cast<const int32_t *>(a->block_table.data),
                        static_cast<const int32_t *>(a->context_lens.data),
                        static_cast<float *>(a->logits.data), dl);
#else
                err = mla_cuda_launch_gated(
                    logits_wg_kernel<LAYOUT>, (unsigned)(d.R * d.chunks), kThreads, (size_t)smem,
                    mla_hip_state_of(ctx)->stream,
                    a->gate != 0 && mla_hip_state_of(ctx)->pdl,
                    static_cast<const uint8_t *>(a->cache.data),
                    static_cast<const uint8_t *>(a->q.data), static_cast<const float *>(a->w.data),
                    static_cast<const int32_t *>(a->block_table.data),
                    static_cast<const int32_t *>(a->context_lens.data),
                    static_cast<float *>(a->logits.data), dl);
                if (err != cudaSuccess)
                    return mla_hip_fail(ctx, err, "indexer logits kernel launch");
#endif
                return mla_hip_check_launch(ctx, "indexer logits kernel launch");
            }
        }
#if !MLA_IDX_EMU
        /* past 48 KB needs the kernel's consent (per device: every launch) */
        err = cudaFuncSetAttribute(logits_kernel<FAST, FNUZ, LAYOUT, MT>,
                                   cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
        if (err != cudaSuccess)
            return mla_hip_fail(ctx, err, "cudaFuncSetAttribute (logits shared memory)");
#endif
#else
        smem = (256 + 1024) * 4; /* the MFMA body needs none; a fallback's q */
#endif
    }
    const int64_t blocks = d.R * d.chunks;
    logits_kernel<FAST, FNUZ, LAYOUT, MT>
        <<<(unsigned)blocks, kThreads, (size_t)smem, mla_hip_state_of(ctx)->stream>>>(
            static_cast<const uint8_t *>(a->cache.data), static_cast<const uint8_t *>(a->q.data),
            static_cast<const float *>(a->w.data), static_cast<const int32_t *>(a->block_table.data),
            static_cast<const int32_t *>(a->context_lens.data), static_cast<float *>(a->logits.data),
            dl, smem);
    return mla_hip_check_launch(ctx, "indexer logits kernel launch");
}

template <int FAST, int FNUZ, int LAYOUT>
mla_status dispatch_mt(mla_context *ctx, const mla_indexer_logits_args *a, const lg_desc &d)
{
    if constexpr (!FAST) {
        return launch<0, FNUZ, LAYOUT, 1>(ctx, a, d);
    } else {
        switch ((d.Hi + 15) / 16) {
        case 1:
            return launch<FAST, FNUZ, LAYOUT, 1>(ctx, a, d);
        case 2:
            return launch<FAST, FNUZ, LAYOUT, 2>(ctx, a, d);
        case 3:
            return launch<FAST, FNUZ, LAYOUT, 3>(ctx, a, d);
        default:
            return launch<FAST, FNUZ, LAYOUT, 4>(ctx, a, d);
        }
    }
}

template <int FAST>
mla_status dispatch_fmt(mla_context *ctx, const mla_indexer_logits_args *a, const lg_desc &d)
{
    const bool fnuz = a->desc.dtype == MLA_DTYPE_FP8_E4M3FNUZ;
    if constexpr (!FAST) { /* the plain body reads the layout from d */
        return fnuz ? dispatch_mt<0, 1, MLA_IL_NORMAL>(ctx, a, d)
                    : dispatch_mt<0, 0, MLA_IL_NORMAL>(ctx, a, d);
    } else {
        if (d.layout == MLA_IL_SHUFFLE)
            return fnuz ? dispatch_mt<FAST, 1, MLA_IL_SHUFFLE>(ctx, a, d)
                        : dispatch_mt<FAST, 0, MLA_IL_SHUFFLE>(ctx, a, d);
        return fnuz ? dispatch_mt<FAST, 1, MLA_IL_NORMAL>(ctx, a, d)
                    : dispatch_mt<FAST, 0, MLA_IL_NORMAL>(ctx, a, d);
    }
}

/* The matrix bodies want head_dim 128, at most 64 heads, and key rows
 * aligned to 4 bytes (2: to 16, one vector load per 16 bytes; block_size 1
 * caches, 132-byte blocks, are the 4-byte case); 0: the plain body.
 * tuning.hip_logits generic forces the plain body (a check of one against
 * the other). */
int fast_kind(const mla_context *ctx, const mla_indexer_logits_args *a)
{
    if (ctx->tuning.hip_logits == MLA_TUNE_HIP_LOGITS_GENERIC)
        return 0;
    if (a->desc.head_dim != kHeadDimFast || a->q.shape[1] > kMaxHeadsFast ||
        (a->desc.layout != MLA_INDEXER_NORMAL && a->desc.layout != MLA_INDEXER_SHUFFLE))
        return 0;
    const uintptr_t base = reinterpret_cast<uintptr_t>(a->cache.data);
    const int64_t stride = a->cache.stride[0];
    if (base % 16 == 0 && stride % 16 == 0)
        return 2;
    return base % 4 == 0 && stride % 4 == 0 ? 1 : 0;
}

} // namespace

mla_status mla_hip_indexer_logits(mla_context *ctx, const mla_indexer_logits_args *a)
{
    const mla_hip_device_scope scope(mla_hip_state_of(ctx)->device);
    if (scope.error() != hipSuccess)
        return mla_hip_fail(ctx, scope.error(), "selecting the context's GPU");
    const mla_tensor *ts[6] = {&a->cache, &a->q, &a->w, &a->block_table, &a->context_lens,
                               &a->logits};
    const char *names[6] = {"cache", "q", "w", "block_table", "context_lens", "logits"};
    for (int i = 0; i < 6; ++i) {
        mla_status st = mla_hip_check_tensor_memory(ctx, ts[i], names[i]);
        if (st != MLA_OK)
            return st;
    }
    lg_desc d = {};
    d.R = a->logits.shape[0];
    d.N = a->logits.shape[1];
    d.next_n = a->next_n;
    d.Hi = a->q.shape[1];
    d.D = a->desc.head_dim;
    d.bs = a->desc.block_size;
    d.cs0 = a->cache.stride[0];
    d.qs0 = a->q.stride[0];
    d.qs1 = a->q.stride[1];
    d.qs2 = a->q.stride[2];
    d.ws0 = a->w.stride[0];
    d.ws1 = a->w.stride[1];
    d.bts0 = a->block_table.stride[0];
    d.bts1 = a->block_table.stride[1];
    d.cls = a->context_lens.stride[0];
    d.ls0 = a->logits.stride[0];
    d.ls1 = a->logits.stride[1];
    d.layout = (int32_t)a->desc.layout;
    d.gate = mla_hip_gate(ctx, a->gate);
    d.bs_log2 = -1;
    for (int s = 0; s < 31; ++s)
        if (d.bs == (int64_t)1 << s)
            d.bs_log2 = s;
    if (d.R == 0 || d.N == 0)
        return MLA_OK;
    const int fast = fast_kind(ctx, a);
    /* chunks: a row's keys in equal chunks, each a multiple of the 256 keys
     * one pass of a block covers and at most 32k (a block's q costs one
     * conversion, so long chunks amortize it), as many per row as keep the
     * resident blocks busy: the fewest waves of blocks over the device
     * times a block's work, its start counted as 1024 keys. Resident: one
     * block per multiprocessor for the NVIDIA body (its registers and key
     * stages), about 2 otherwise. */
    int64_t slots = (int64_t)mla_hip_state_of(ctx)->multiprocessors;
#if !defined(__CUDACC__)
    slots *= 2;
#else
    slots *= fast ? 1 : 2;
#endif
    const int64_t most = (d.N + kThreads - 1) / kThreads, least = (d.N + 32767) / 32768;
    int64_t best_chunk = 0, best_cost = 0;
    for (int64_t c = least; c <= most; ++c) {
        int64_t chunk = (d.N + c - 1) / c;
        chunk = (chunk + kThreads - 1) / kThreads * kThreads;
        const int64_t chunks = (d.N + chunk - 1) / chunk;
        if (d.R * chunks > 0x7FFFFFFF || (c > least && d.R * chunks > 4 * slots))
            break; /* past 4 waves, more blocks only add starts */
        const int64_t waves = (d.R * chunks + slots - 1) / slots, cost = waves * (chunk + 1024);
        if (best_chunk == 0 || cost < best_cost) {
            best_chunk = chunk;
            best_cost = cost;
        }
    }
    d.chunk = best_chunk > 0 ? best_chunk : 32768;
    d.chunks = (d.N + d.chunk - 1) / d.chunk;
    if (d.R * d.chunks > 0x7FFFFFFF)
        return mla_fail(ctx, MLA_ERR_UNSUPPORTED, "logits.shape",
                        "%lld rows of %lld keys: too many blocks for one launch", (long long)d.R,
                        (long long)d.N);
    switch (fast) {
    case 2:
        return dispatch_fmt<2>(ctx, a, d);
    case 1:
        return dispatch_fmt<1>(ctx, a, d);
    default:
        return dispatch_fmt<0>(ctx, a, d);
    }
}
