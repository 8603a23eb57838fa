/* Paged MQA logits of the DSA indexer (spec section 6). Row r = b * next_n +
 * j, key position n < bound_r = ctx_len[b] - next_n + j + 1:
 *
 *     logits[r, n] = k_scale[n] * sum_h w[r, h] * relu(q[r, h, :] . k[n, :])
 *
 * and -inf from bound_r to logits.shape[1]. Key n is read IN PLACE from the
 * paged cache: block block_table[b, n / block_size], token n % block_size,
 * value offsets of core/ref/indexer_layout.h (NORMAL, or SHUFFLE's 16 x 16
 * tiles, whose 16-byte rows the fast paths load as they lie).
 *
 * A block of 256 threads owns one row and a chunk of keys. Three bodies:
 *
 * - NVIDIA (sm_80+), mma.sync m16n8k16 f16 -> f32: M = heads (16 per tile,
 *   up to 4 tiles), N = keys (8 per tile, 4 tiles = 32 keys per warp
 *   step), K = head dims (8 steps of 16). The dims are permuted inside each
 *   step so that a lane reads its key bytes contiguously: lane (g = l / 4,
 *   t = l % 4) of n-tile j holds key 8 j + g, dims [32 t, 32 t + 32), and
 *   step c's fragment rows 2t, 2t+1, 2t+8, 2t+9 are dims 32 t + 4 c + 0, 1,
 *   2, 3 (q uses the same permutation; the dot product does not care). q
 *   is converted once per block into shared memory in fragment order (one
 *   16-byte load per fragment). After the steps, each lane adds
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

constexpr int kThreads = 256;
constexpr int kHeadDimFast = 128;
constexpr int kMaxHeadsFast = 64;
constexpr int kGenericQFloats = 8192; /* shared q of the plain path: 32 KB */

struct lg_desc {
    int64_t R, N, next_n, Hi, D, bs;
    int64_t cs0; /* cache block stride, bytes */
    int64_t qs0, qs1, qs2, ws0, ws1, bts0, bts1, cls, ls0, ls1;
    int64_t chunk, chunks; /* keys per block, blocks per row */
    int32_t layout;
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

#if MLA_IDX_MMA_NV
template <int FNUZ, int LAYOUT, int MT, bool A16>
MLA_DEV void nv_block(const lg_desc &d, const lg_block &k, const uint8_t *cache, const uint8_t *q,
                      const float *w, const int32_t *table, float *out, uint32_t *qs)
{
    float *wsm = reinterpret_cast<float *>(qs + MT * 8 * 32 * 4);
    uint32_t *rownan = reinterpret_cast<uint32_t *>(wsm + kMaxHeadsFast);
    const int tid = (int)threadIdx.x;
    if (tid == 0)
        *rownan = 0;
    idx_sync();
    /* q in fragment order: word ((i * 8 + c) * 32 + lane) * 4 + reg */
    for (int idx = tid; idx < MT * 8 * 32 * 4; idx += kThreads) {
        const int reg = idx & 3, ln = (idx >> 2) & 31, c = (idx >> 7) & 7, i = idx >> 10;
        const int64_t head = 16 * i + (ln >> 2) + ((reg & 1) ? 8 : 0);
        const int64_t dim = 32 * (ln & 3) + 4 * c + ((reg & 2) ? 2 : 0);
        uint32_t x = 0;
        if (head < d.Hi) {
            const uint8_t *p = q + k.r * d.qs0 + head * d.qs1 + dim * d.qs2;
            x = (uint32_t)p[0] | ((uint32_t)p[d.qs2] << 8);
        }
        if (fp8_nan_bytes<FNUZ>(x & 0xFFFFu))
            *rownan = 1;
        uint32_t lo, hi;
        fp8x4_to_f16<FNUZ>(x, lo, hi);
        qs[idx] = lo;
    }
    if (tid < kMaxHeadsFast)
        wsm[tid] = tid < d.Hi ? w[k.r * d.ws0 + tid * d.ws1] : 0.0f;
    idx_sync();
    const bool nan_row = *rownan != 0;
    const int lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3;
    float wr[MT][2];
#pragma unroll
    for (int i = 0; i < MT; ++i) {
        wr[i][0] = wsm[16 * i + g];
        wr[i][1] = wsm[16 * i + g + 8];
    }
    const int64_t nc = k.bound < k.n1 ? k.bound : k.n1;
    const u32x4 *qf = reinterpret_cast<const u32x4 *>(qs);
    for (int64_t tile0 = k.n0 + 32 * warp; tile0 < nc; tile0 += 32 * (kThreads / 32)) {
        /* the bytes of key 8 j + g, dims [32 t, 32 t + 32), and their NaN codes */
        uint32_t raw[4][8];
        uint32_t nanmask = 0;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int64_t n = tile0 + 8 * j + g;
            u32x4 v0 = {}, v1 = {};
            if (n < nc) {
                int64_t tok;
                const uint8_t *blk = key_block(d, cache, table, k.b, n, tok);
                const uint8_t *p0, *p1;
                if (LAYOUT == MLA_IL_SHUFFLE) {
                    const uint8_t *tb = blk + (tok / 16) * 16 * kHeadDimFast + (tok % 16) * 16;
                    p0 = tb + (2 * t) * 256;
                    p1 = tb + (2 * t + 1) * 256;
                } else {
                    p0 = blk + tok * kHeadDimFast + 32 * t;
                    p1 = p0 + 16;
                }
                if (A16) {
                    v0 = *reinterpret_cast<const u32x4 *>(p0);
                    v1 = *reinterpret_cast<const u32x4 *>(p1);
                } else {
#pragma unroll
                    for (int e = 0; e < 4; ++e) {
                        v0.v[e] = reinterpret_cast<const uint32_t *>(p0)[e];
                        v1.v[e] = reinterpret_cast<const uint32_t *>(p1)[e];
                    }
                }
            }
            uint32_t nb = 0;
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                raw[j][e] = v0.v[e];
                raw[j][4 + e] = v1.v[e];
                nb |= fp8_nan_bytes<FNUZ>(v0.v[e]) | fp8_nan_bytes<FNUZ>(v1.v[e]);
            }
            nanmask |= nb ? 1u << j : 0u;
        }
        float acc[MT][4][4];
#pragma unroll
        for (int i = 0; i < MT; ++i)
#pragma unroll
            for (int j = 0; j < 4; ++j)
#pragma unroll
                for (int e = 0; e < 4; ++e)
                    acc[i][j][e] = 0.0f;
#pragma unroll
        for (int c = 0; c < 8; ++c) {
            uint32_t bf[4][2];
#pragma unroll
            for (int j = 0; j < 4; ++j)
                fp8x4_to_f16<FNUZ>(raw[j][c], bf[j][0], bf[j][1]);
#pragma unroll
            for (int i = 0; i < MT; ++i) {
                const u32x4 a = qf[(i * 8 + c) * 32 + lane];
#pragma unroll
                for (int j = 0; j < 4; ++j)
                    mma_16816(acc[i][j], a.v, bf[j]);
            }
        }
        /* sums over this lane's heads: value 2 j + p is key 8 j + 2 t + p */
        float P[8];
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int p = 0; p < 2; ++p) {
                float s = 0.0f;
#pragma unroll
                for (int i = 0; i < MT; ++i) {
                    s = fmaf(wr[i][0], relu(acc[i][j][p]), s);
                    s = fmaf(wr[i][1], relu(acc[i][j][2 + p]), s);
                }
                P[2 * j + p] = s;
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
        /* NaN codes of the key this lane stores: its loaders are the lanes
         * (2 t + g % 2) * 4 + 0..3 of n-tile g / 2 */
        nanmask |= mla_shfl_xor(nanmask, 1);
        nanmask |= mla_shfl_xor(nanmask, 2);
        const uint32_t theirs = shfl_u32(nanmask, 4 * (2 * t + (g & 1)));
        const int64_t n = tile0 + 8 * (g >> 1) + 2 * t + (g & 1);
        if (n < nc) {
            int64_t tok;
            const uint8_t *blk = key_block(d, cache, table, k.b, n, tok);
            const float scale = mla_fb_float(
                *reinterpret_cast<const uint32_t *>(blk + mla_il_scale_byte(tok, d.bs, kHeadDimFast)));
            const bool nan = nan_row || ((theirs >> (g >> 1)) & 1u);
            out[k.r * d.ls0 + n * d.ls1] = nan ? mla_fb_float(MLA_FB_F32_QNAN) : S * scale;
        }
    }
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
#pragma unroll
        for (int c = 0; c < 16; ++c) {
            uint32_t x = 0;
            if (head < d.Hi) {
                const uint8_t *p = q + k.r * d.qs0 + head * d.qs1 + (64 * h + 4 * c) * d.qs2;
                x = (uint32_t)p[0] | ((uint32_t)p[d.qs2] << 8) | ((uint32_t)p[2 * d.qs2] << 16) |
                    ((uint32_t)p[3 * d.qs2] << 24);
            }
            nan_q |= fp8_nan_bytes<FNUZ>(x) != 0;
            fp8x4_to_f16<FNUZ>(x, qr[tt][c][0], qr[tt][c][1]);
        }
#pragma unroll
        for (int v = 0; v < 16; ++v) {
            const int64_t hd = 32 * tt + 8 * (v / 4) + 4 * h + v % 4;
            wr[tt][v] = hd < d.Hi ? w[k.r * d.ws0 + hd * d.ws1] : 0.0f;
        }
    }
    const bool nan_row = mla_wave_any(nan_q);
    const int64_t nc = k.bound < k.n1 ? k.bound : k.n1;
    for (int64_t tile0 = k.n0 + 32 * wave; tile0 < nc; tile0 += 32 * (kThreads / 64)) {
        const int64_t n = tile0 + i;
        uint32_t raw[16];
        const uint8_t *blk = cache;
        int64_t tok = 0;
        if (n < nc) {
            blk = key_block(d, cache, table, k.b, n, tok);
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
                *reinterpret_cast<const uint32_t *>(blk + mla_il_scale_byte(tok, d.bs, kHeadDimFast)));
            out[k.r * d.ls0 + n * d.ls1] =
                (nan_row || nb != 0) ? mla_fb_float(MLA_FB_F32_QNAN) : S * scale;
        }
    }
}
#endif

/* FAST: 0 the plain body; 1, 2 the matrix body of this device (the plain
 * one where it has none) for key rows aligned to 4 or 16 bytes. */
template <int FAST, int FNUZ, int LAYOUT, int MT>
__global__ __launch_bounds__(kThreads) void logits_kernel(const uint8_t *cache, const uint8_t *q,
                                                           const float *w, const int32_t *table,
                                                           const int32_t *ctx_lens, float *out,
                                                           lg_desc d, int64_t smem_bytes)
{
    MLA_IDX_SMEM(uint32_t, smem);
    const lg_block k = block_of(d, ctx_lens);
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

template <int FAST, int FNUZ, int LAYOUT, int MT>
mla_status launch(mla_context *ctx, const mla_indexer_logits_args *a, const lg_desc &d)
{
    /* the NVIDIA body's q fragments, w and a flag; the plain body's q */
    const int64_t smem = FAST ? MT * 8 * 32 * 4 * 4 + (kMaxHeadsFast + 4) * 4
                              : (256 + kGenericQFloats) * 4;
    const int64_t blocks = d.R * d.chunks;
    logits_kernel<FAST, FNUZ, LAYOUT, MT>
        <<<(unsigned)blocks, kThreads, (size_t)smem, mla_hip_state_of(ctx)->stream>>>(
            static_cast<const uint8_t *>(a->cache.data), static_cast<const uint8_t *>(a->q.data),
            static_cast<const float *>(a->w.data), static_cast<const int32_t *>(a->block_table.data),
            static_cast<const int32_t *>(a->context_lens.data), static_cast<float *>(a->logits.data),
            d, smem);
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
 * MLA_HIP_LOGITS=generic forces the plain body (a check of one against the
 * other). */
int fast_kind(const mla_indexer_logits_args *a)
{
    const char *force = getenv("MLA_HIP_LOGITS");
    if (force && !strcmp(force, "generic"))
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
    if (d.R == 0 || d.N == 0)
        return MLA_OK;
    /* chunks: about 8 blocks per multiprocessor over the whole call, each a
     * multiple of the 256 keys one pass of the block covers */
    const int64_t target = (int64_t)mla_hip_state_of(ctx)->multiprocessors * 8;
    int64_t chunk = (d.N * d.R + target - 1) / target;
    chunk = (chunk + kThreads - 1) / kThreads * kThreads;
    chunk = chunk < kThreads ? kThreads : chunk > 16 * kThreads ? 16 * kThreads : chunk;
    d.chunk = chunk;
    d.chunks = (d.N + chunk - 1) / chunk;
    if (d.R * d.chunks > 0x7FFFFFFF)
        return mla_fail(ctx, MLA_ERR_UNSUPPORTED, "logits.shape",
                        "%lld rows of %lld keys: too many blocks for one launch", (long long)d.R,
                        (long long)d.N);
    switch (fast_kind(a)) {
    case 2:
        return dispatch_fmt<2>(ctx, a, d);
    case 1:
        return dispatch_fmt<1>(ctx, a, d);
    default:
        return dispatch_fmt<0>(ctx, a, d);
    }
}
