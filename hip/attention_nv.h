/* The NVIDIA matrix body of hip/attention.hip (mma.sync m16n8k16 through
 * hip/mfma.h), on the pieces every body shares (hip/attention_common.h).
 *
 * A block record is TM = 16 RG (query row, head) pairs (RG = 1, 2, 4 row
 * groups of 16, the host's choice from the rows a tile can fill) against the
 * work item's keys in tiles of NK (64; 32 at RG = 4, for shared memory). The
 * 8 warps split each tile twice, so that no warp waits on another's partial
 * sums:
 *   scores: warp w owns row group w % RG and keys KW (w / RG) .. + KW - 1
 *     (KW = NK RG / 8), over all L + R dims, q and keys by ldmatrix from
 *     shared memory (q staged once per record as bf16, f32 q as hi + lo);
 *   P V:    warp w owns O's columns 64 w .. 64 w + 63 for every row, P and
 *     V (the first L dims of the key rows) by ldmatrix (V transposed).
 * The softmax between them: each warp's row maxima of its keys through
 * shared memory (one barrier), then every warp forms the same running max
 * per row (so the alpha rescale needs no exchange), P = exp2(S - m) rounded
 * to bf16 into shared memory (a second barrier), and each lane keeps the sum
 * of its own unrounded P; the sums meet once after the last tile.
 *
 * Keys: the next tile is in flight while the current one is used: on sm_90
 * one bulk copy per token where its bytes are contiguous 16-byte multiples
 * (NORMAL, FP8_SCALED; counted on an mbarrier per key buffer), else
 * cp.async per chunk when the cache's chunks are aligned (bf16 chunks 16
 * bytes, fp8 8, FP8_SCALED scales 4). bf16 caches land in the key rows directly; fp8
 * caches land as their bytes in raw rows and are converted to bf16 rows
 * (exact: e4m3 codes and code x power-of-two group scale are bf16 values;
 * e4m3fn by the sm_89+ cvt) before the scores. Key rows have DP = D rounded
 * up to 32 plus 8 values: an odd number of 16-byte units, so the 8 rows an
 * ldmatrix reads fall in distinct banks; dims D .. DP - 8 stay zero. */

#ifndef MLA_HIP_ATTENTION_NV_H
#define MLA_HIP_ATTENTION_NV_H

#include "hip/attention_common.h"
#include "hip/fp8_f16.h"
#include "hip/nv_copy.h"

namespace
{

/* Shared memory of the NVIDIA body, bytes from the start (after the
 * descriptor and block record of smem_layout). */
struct nv_smem {
    int32_t mb, orow, fs, ms, mx, lw, kp, kb, ps, qs, ks, raw, ks_bytes, raw_bytes, total;
};

static __host__ __device__ constexpr int nv_keys(int RG) { return RG == 4 ? 32 : 64; }

/* RB: bytes of a raw key row (0: bf16 cache, keys straight into Ks). */
static __host__ __device__ inline nv_smem nv_layout(int RG, int DP, int RB, int qsplit)
{
    const int TM = 16 * RG, NK = nv_keys(RG);
    nv_smem s;
    s.mb = align16((int)sizeof(att_desc)) + align16((int)sizeof(att_blk)); /* 2 mbarriers */
    s.orow = s.mb + 16;
    s.fs = s.orow + align16(TM * 8);
    s.ms = s.fs + align16(TM * 4);
    s.mx = s.ms + align16(TM * 4);
    s.lw = s.mx + align16(kNW * 16 * 4);
    s.kp = s.lw + align16(kNW * 16 * 4);
    s.kb = s.kp + align16(2 * NK * 4);
    s.ps = s.kb + align16(2 * NK * (int)sizeof(key_ref));
    s.qs = s.ps + align16(TM * (NK + 8) * 2);
    s.ks = s.qs + align16(TM * DP * 2 * (qsplit ? 2 : 1));
    s.ks_bytes = align16(NK * DP * 2);
    s.raw = s.ks + (RB ? 1 : 2) * s.ks_bytes;
    s.raw_bytes = align16(NK * RB);
    s.total = s.raw + (RB ? 2 : 0) * s.raw_bytes;
    return s;
}

#if MLA_ATT_MATRIX_KIND == 1

/* Offset of chunk c in a raw key row, laid out like a NORMAL / FP8_SCALED
 * token (so that a bulk copy of the token is the row): fp8 code chunks of 8
 * bytes, FP8_SCALED's scales at d.raw_so, then the rope chunks (bf16 16
 * bytes, FP8_SCALED). */
MLA_DEV int nv_raw_off(const att_desc &d, int c)
{
    const int sb = cache_fp8s(d.c) ? 4 * ((int)d.c.L / MLA_CL_SCALE_GROUP) : 0;
    return c < d.nope_chunks ? 8 * c : d.raw_so + sb + (c - d.nope_chunks) * (d.rope_bf16 ? 16 : 8);
}

/* This thread's share of every key tile: chunk c of keys k0, k0 + tpc, ..
 * (tpc threads per chunk column; threads past them idle), where chunk c sits
 * in the cache (its part and byte offset there) and in the tile's rows:
 * worked out once per record. */
struct nv_map {
    int32_t k0, tpc, off, d0, ro, n;
    bool rope, bf;
};

template <int CT> MLA_DEV nv_map nv_map_of(const att_desc &d)
{
    nv_map m;
    const int c = (int)threadIdx.x % d.cpk;
    const chunk_at ch = chunk_of(d, c);
    m.tpc = kThreads / d.cpk; /* >= 3: cpk <= 81 for L + R <= 640 */
    m.k0 = (int)threadIdx.x / d.cpk;
    m.off = ch.off;
    m.d0 = ch.d0;
    m.ro = nv_raw_off(d, c);
    m.n = ch.n;
    m.rope = !ch.nope;
    m.bf = CT == MLA_DTYPE_BF16 || (!ch.nope && d.rope_bf16);
    return m;
}

/* The keys of a tile (positions KP, -1 none: zeros; addresses KR) into Ks
 * (bf16 caches) or the raw rows (fp8); commits one cp.async group. */
template <int CT, int NK>
MLA_DEV void nv_issue(const att_desc &d, const nv_map &m, const int32_t *KP, const key_ref *KR,
                      uint16_t *Ks, uint8_t *raw)
{
    for (int k = m.k0; m.k0 < m.tpc && k < NK; k += m.tpc) {
        const bool valid = KP[k] >= 0;
        const uint8_t *src = valid ? (m.rope ? KR[k].rope : KR[k].nope) + m.off : d.c.data;
        uint16_t *kd = Ks + k * d.DP + m.d0;
        uint8_t *rd = raw + k * d.rb + m.ro;
        if (d.async) {
            void *dst = CT == MLA_DTYPE_BF16 ? static_cast<void *>(kd) : static_cast<void *>(rd);
            if (m.bf)
                cp_async<16>(dst, src, valid);
            else
                cp_async<8>(dst, src, valid);
            continue;
        }
        uint32_t w[4] = {0, 0, 0, 0};
        if (valid)
            load_bytes(src, w, m.bf ? 2 * m.n : m.n);
        if constexpr (CT == MLA_DTYPE_BF16) {
            if (m.n == kChunk && is_aligned(kd, 16)) {
                mla_u32x4 q;
#pragma unroll
                for (int j = 0; j < 4; ++j)
                    q.v[j] = w[j];
                *reinterpret_cast<mla_u32x4 *>(kd) = q;
            } else { /* a short chunk: the next part's dims follow it */
#pragma unroll
                for (int j = 0; j < kChunk; ++j)
                    if (j < m.n)
                        kd[j] = (uint16_t)(w[j / 2] >> (16 * (j % 2)));
            }
        } else { /* raw slots do not overlap: whole words */
            uint32_t *p = reinterpret_cast<uint32_t *>(rd);
#pragma unroll
            for (int j = 0; j < 4; ++j)
                if (j < (m.bf ? 4 : 2))
                    p[j] = w[j];
        }
    }
    if (CT != MLA_DTYPE_BF16 && cache_fp8s(d.c)) { /* the group scales */
        const int G = (int)d.c.L / MLA_CL_SCALE_GROUP;
        for (int it = (int)threadIdx.x; it < NK * G; it += kThreads) {
            const int k = it / G, grp = it - k * G;
            const bool valid = KP[k] >= 0;
            const uint8_t *src = valid ? KR[k].nope + d.c.L + 4 * grp : d.c.data;
            uint8_t *dst = raw + k * d.rb + d.raw_so + 4 * grp;
            if (d.async) {
                cp_async<4>(dst, src, valid);
            } else {
                uint32_t w[4] = {0, 0, 0, 0};
                if (valid)
                    load_bytes(src, w, 4);
                *reinterpret_cast<uint32_t *>(dst) = w[0];
            }
        }
    }
    if (d.async)
        cp_async_commit();
}

#if MLA_IDX_BULK
/* Key row `row` of a tile (position pos, -1 none: zeros) by one bulk copy of
 * the token's d.bulk contiguous bytes (bf16 NORMAL: the key row; fp8 NORMAL
 * and FP8_SCALED: the raw row), counted on bar: the thread's one arrival of
 * the phase. */
MLA_DEV void nv_bulk_key(const att_desc &d, int32_t pos, const key_ref &ref, void *row,
                         uint64_t *bar)
{
    const uint32_t bytes = (uint32_t)d.bulk;
    if (pos < 0) {
        mla_u32x4 z = {{0, 0, 0, 0}};
        for (uint32_t i = 0; i < bytes / 16; ++i)
            reinterpret_cast<mla_u32x4 *>(row)[i] = z;
    }
    fence_proxy_async(); /* after this thread's generic accesses to the row */
    mbar_arrive_expect_tx(bar, pos < 0 ? 0u : bytes);
    if (pos >= 0)
        bulk_copy(row, ref.nope, bytes, bar);
}
#endif

MLA_DEV float nv_f16(uint32_t h)
{
#if defined(__CUDA_ARCH__) && !MLA_IDX_EMU
    return __half2float(__ushort_as_half((unsigned short)h));
#else
    return mla_fb_f16_to_f32((uint16_t)h);
#endif
}

/* 2^x for the softmax: the hardware's approximation on NVIDIA (relative
 * error below 2^-22, far inside the bf16 rounding of P; -inf gives 0). */
MLA_DEV float nv_exp2(float x)
{
#if defined(__CUDA_ARCH__) && !MLA_IDX_EMU
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
#else
    return exp2f(x);
#endif
}

/* Two exact values -> a bf16 pair (lo in the low half). */
MLA_DEV uint32_t nv_bf16x2(float lo, float hi)
{
#if defined(__CUDA_ARCH__) && !MLA_IDX_EMU
    uint32_t r;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
    return r;
#else
    return mla_fb_f32_to_bf16(lo) | ((uint32_t)mla_fb_f32_to_bf16(hi) << 16);
#endif
}

/* fp8 codes x (bytes 0..3) times sc (FP8_SCALED's power-of-two group scale
 * when SCALED) -> bf16 pairs lo (bytes 0, 1), hi: exact. */
template <int CT, bool SCALED>
MLA_DEV void nv_fp8x4_bf16(uint32_t x, float sc, uint32_t &lo, uint32_t &hi)
{
    float v[4];
#if MLA_IDX_CVT_E4M3
    if constexpr (CT == MLA_DTYPE_FP8_E4M3FN) {
        uint32_t h0, h1; /* exact f16, NaN codes NaN */
        e4m3fn_x4_to_f16_cvt(x, h0, h1);
        v[0] = nv_f16(h0 & 0xFFFFu), v[1] = nv_f16(h0 >> 16);
        v[2] = nv_f16(h1 & 0xFFFFu), v[3] = nv_f16(h1 >> 16);
    } else
#endif
    {
#pragma unroll
        for (int j = 0; j < 4; ++j)
            v[j] = unpack_value<CT>(&x, j);
    }
    if constexpr (SCALED) {
#pragma unroll
        for (int j = 0; j < 4; ++j)
            v[j] = mla_fb_mul(v[j], sc);
    }
    lo = nv_bf16x2(v[0], v[1]);
    hi = nv_bf16x2(v[2], v[3]);
}

/* The bf16 factor of nv_fp8x8_bf16_placed for codes of dtype CT times sc: an fp8
 * code's 7 magnitude bits at bf16 bits 4..10 (sign at 15) are a bf16 of
 * value code * 2^-(127 - bias), subnormal codes included, so one bf16
 * product by f = 2^(127 - bias) * sc gives code * sc rounded once, the bits
 * of the fp32 product rounded to bf16 (exact but where it underflows).
 * Both halves hold f; 0 where f is no normal bf16 power of two (sc not a
 * power of two, zero, subnormal, inf, NaN, or above 2^7). */
template <int CT> MLA_DEV uint32_t nv_fp8_bf16_factor(float sc)
{
    constexpr uint32_t bias = CT == MLA_DTYPE_FP8_E4M3FNUZ ? 119u : 120u;
    const uint32_t b = mla_fb_bits(sc), t = b & 0x7FFFFFFFu;
    /* |sc| = 2^(e - 127) with 1 <= e <= 254 - bias: no mantissa bits, and
     * (e - 1) << 23 below that bound (e = 0 wraps above it) */
    if ((t & 0x7FFFFFu) != 0 || t - 0x00800000u >= (254u - bias) << 23)
        return 0;
    const uint32_t f = (b >> 16) + (bias << 7); /* sign, e + bias; no carry */
    return f | f << 16;
}

/* Codes bytes 0, 1 (SEL 0x9180) or 2, 3 (0xB3A2) of x as the bf16 pair of
 * patterns nv_fp8_bf16_factor describes (the lower byte in the low half). */
template <uint32_t SEL> MLA_DEV uint32_t nv_fp8x2_bf16_pattern(uint32_t x)
{
#if defined(__CUDA_ARCH__) && !MLA_IDX_EMU
    uint32_t u; /* each half: the byte, its sign replicated above it */
    asm("prmt.b32 %0, %1, 0, %2;" : "=r"(u) : "r"(x), "n"(SEL));
    return (u << 4) & 0x87F087F0u;
#else
    const uint32_t t = SEL == 0x9180u ? x : x >> 16;
    const uint32_t lo = ((t & 0x80u) << 8) | (t & 0x7Fu) << 4;
    const uint32_t hi = ((t & 0x8000u)) | (t >> 8 & 0x7Fu) << 4;
    return lo | hi << 16;
#endif
}

/* A bf16 pair times the factor pair f, rounded to nearest even. */
MLA_DEV uint32_t nv_bf16x2_mul(uint32_t a, uint32_t f)
{
#if defined(__CUDA_ARCH__) && !MLA_IDX_EMU
    uint32_t r; /* + -0: a zero product keeps its sign */
    asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(f), "r"(0x80008000u));
    return r;
#else
    const float lo = mla_fb_float(a << 16) * mla_fb_float(f << 16);
    const float hi = mla_fb_float(a & 0xFFFF0000u) * mla_fb_float(f & 0xFFFF0000u);
    return nv_bf16x2(lo, hi); /* products exact in fp32 (4 + 1 significant bits) */
#endif
}

/* 8 fp8 codes x -> 4 bf16 pairs w by integer placement and one bf16
 * product per pair with the factor pair f of nv_fp8_bf16_factor (nonzero):
 * the bits of nv_fp8x4_bf16 where no code is a NaN code (nv_fp8_nan8). */
MLA_DEV void nv_fp8x8_bf16_placed(const uint32_t x[2], uint32_t f, uint32_t w[4])
{
#pragma unroll
    for (int j = 0; j < 2; ++j) {
        w[2 * j] = nv_bf16x2_mul(nv_fp8x2_bf16_pattern<0x9180u>(x[j]), f);
        w[2 * j + 1] = nv_bf16x2_mul(nv_fp8x2_bf16_pattern<0xB3A2u>(x[j]), f);
    }
}

/* Nonzero where one of the 8 codes x of dtype CT is a NaN code. */
template <int CT> MLA_DEV uint32_t nv_fp8_nan8(const uint32_t x[2])
{
    constexpr int fnuz = CT == MLA_DTYPE_FP8_E4M3FNUZ;
    return fp8_nan_bytes<fnuz>(x[0]) | fp8_nan_bytes<fnuz>(x[1]);
}

/* 8 fp8 codes x (FP8_SCALED: times the group scale sc) -> 4 bf16 pairs w,
 * the bits of nv_fp8x4_bf16: placed (12 operations for 4 codes where the
 * fp32 route takes 16 conversions) unless a code is a NaN code or the scale
 * no small power of two, which go the fp32 route. */
template <int CT>
MLA_DEV void nv_fp8x8_bf16(const uint32_t x[2], float sc, bool scaled, uint32_t w[4])
{
    const uint32_t f = nv_fp8_bf16_factor<CT>(scaled ? sc : 1.0f);
    if (f != 0 && nv_fp8_nan8<CT>(x) == 0) {
        nv_fp8x8_bf16_placed(x, f, w);
    } else if (scaled) {
        nv_fp8x4_bf16<CT, true>(x[0], sc, w[0], w[1]);
        nv_fp8x4_bf16<CT, true>(x[1], sc, w[2], w[3]);
    } else {
        nv_fp8x4_bf16<CT, false>(x[0], 1.0f, w[0], w[1]);
        nv_fp8x4_bf16<CT, false>(x[1], 1.0f, w[2], w[3]);
    }
}

/* 16 codes: lo codes 0-7, hi 8-15. */
template <int CT>
MLA_DEV void nv_fp8x16_bf16(const uint32_t x[4], float sc, bool scaled, mla_u32x4 &lo,
                            mla_u32x4 &hi)
{
    nv_fp8x8_bf16<CT>(x, sc, scaled, lo.v);
    nv_fp8x8_bf16<CT>(x + 2, sc, scaled, hi.v);
}

/* Raw rows (fp8 caches) -> bf16 key rows. */
template <int CT, int NK>
MLA_DEV void nv_convert(const att_desc &d, const nv_map &m, const uint8_t *raw, uint16_t *Ks)
{
    const int so = d.raw_so + 4 * (m.d0 / MLA_CL_SCALE_GROUP);
    for (int k = m.k0; m.k0 < m.tpc && k < NK; k += m.tpc) {
        const uint8_t *row = raw + k * d.rb;
        const uint32_t *src = reinterpret_cast<const uint32_t *>(row + m.ro);
        uint32_t w[4];
        if (m.rope && d.rope_bf16) {
#pragma unroll
            for (int j = 0; j < 4; ++j)
                w[j] = src[j];
        } else {
            const bool scaled = cache_fp8s(d.c);
            nv_fp8x8_bf16<CT>(src, scaled ? *reinterpret_cast<const float *>(row + so) : 1.0f,
                              scaled, w);
        }
        uint16_t *kd = Ks + k * d.DP + m.d0;
        if (m.n == kChunk) {
            mla_u32x4 q;
#pragma unroll
            for (int j = 0; j < 4; ++j)
                q.v[j] = w[j];
            *reinterpret_cast<mla_u32x4 *>(kd) = q;
        } else {
#pragma unroll
            for (int j = 0; j < kChunk; ++j)
                if (j < m.n)
                    kd[j] = (uint16_t)(w[j / 2] >> (16 * (j % 2)));
        }
    }
}

/* q rows of the record into Qs (bf16; f32 q: hi, and lo into Ql), zero for
 * invalid rows and dims D .. DP - 8. */
MLA_DEV void nv_stage_q(const att_desc &d, const att_blk &b, int TM, uint16_t *Qs, uint16_t *Ql)
{
    const int per = (d.DP - 8) / kChunk;
    for (int it = (int)threadIdx.x; it < TM * per; it += kThreads) {
        const int r = it / per, c = it - r * per;
        const bool rv = row_valid(d, b, r);
        const int64_t qoff =
            (b.row0 + b.j0 + r / d.HT) * d.qs0 + (int64_t)(b.h0 + r % d.HT) * d.qs1;
        mla_u32x4 hi, lo;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            uint32_t h[2], l[2];
#pragma unroll
            for (int e = 0; e < 2; ++e) {
                const int dim = kChunk * c + 2 * j + e;
                const float v = rv && dim < d.D ? q_value(d, qoff + (int64_t)dim * d.qs2) : 0.0f;
                split_bf16(v, h[e], l[e]);
            }
            hi.v[j] = h[0] | (h[1] << 16);
            lo.v[j] = l[0] | (l[1] << 16);
        }
        *reinterpret_cast<mla_u32x4 *>(Qs + r * d.DP + kChunk * c) = hi;
        if (d.qsplit)
            *reinterpret_cast<mla_u32x4 *>(Ql + r * d.DP + kChunk * c) = lo;
    }
}

/* Dims D .. DP - 8 of the key rows stay 0 (the scores read them; no key
 * load writes them): once per kernel, before its first record. */
template <int CT, int RG> MLA_DEV void nv_zero_pads(const att_desc &d, unsigned char *smem)
{
    constexpr int NK = nv_keys(RG);
    const nv_smem L = nv_layout(RG, d.DP, d.rb, d.qsplit);
    const int pad = d.DP - 8 - d.D, rows = (CT == MLA_DTYPE_BF16 ? 2 : 1) * NK;
    uint16_t *Ks = reinterpret_cast<uint16_t *>(smem + L.ks);
    for (int i = (int)threadIdx.x; i < rows * pad; i += kThreads) {
        const int row = i / pad; /* the two buffers are consecutive rows */
        Ks[row * d.DP + d.D + i % pad] = 0;
    }
#if MLA_IDX_BULK
    if (d.bulk && threadIdx.x == 0) /* one arrival per key of a tile */
        for (int i = 0; i < 2; ++i)
            mbar_init(reinterpret_cast<uint64_t *>(smem + L.mb) + i, NK);
    idx_sync(); /* initialized before any thread's first arrival */
#endif
}

/* ph: the parities of the two key buffers' mbarriers (bulk copies), kept
 * by every thread across the kernel's records. */
template <int CT, int RG>
MLA_DEV void attend_nv(const att_desc &d, const att_blk &b, unsigned char *smem, uint32_t &ph)
{
    constexpr int TM = 16 * RG, NK = nv_keys(RG), KW = NK * RG / kNW, NT = KW / 8;
    constexpr int CW = kNW / RG, PSS = NK + 8; /* key groups; P row stride */
    constexpr bool RAW = CT != MLA_DTYPE_BF16;
    /* k-steps of the warp's q rows held in registers (bf16 q): fewer shared
     * memory reads per tile, in registers that 16 / 32 rows leave free */
    constexpr int QR = RG == 1 ? 24 : RG == 2 ? 16 : 0;
    static_assert(KW % 8 == 0 && kNW * 64 == kColChunk, "warp tiles");
    const nv_smem L = nv_layout(RG, d.DP, d.rb, d.qsplit);
    float *Fs = reinterpret_cast<float *>(smem + L.fs);
    float *Ms = reinterpret_cast<float *>(smem + L.ms);
    float *Mx = reinterpret_cast<float *>(smem + L.mx);
    float *Lw = reinterpret_cast<float *>(smem + L.lw);
    uint8_t **Or = reinterpret_cast<uint8_t **>(smem + L.orow);
    int32_t *KPs = reinterpret_cast<int32_t *>(smem + L.kp);
    key_ref *KBs = reinterpret_cast<key_ref *>(smem + L.kb);
    uint16_t *Ps = reinterpret_cast<uint16_t *>(smem + L.ps);
    uint16_t *Qs = reinterpret_cast<uint16_t *>(smem + L.qs);
    uint16_t *Ql = Qs + TM * d.DP;
    const mla_saddr qs_at = mla_smem_addr(Qs), ps_at = mla_smem_addr(Ps);
    const uint32_t ql_off = 2u * TM * d.DP; /* Ql after Qs */
    const bool qsplit = d.qsplit;
    uint16_t *Ks = reinterpret_cast<uint16_t *>(smem + L.ks);
    uint8_t *raw = smem + L.raw;
#if MLA_IDX_BULK
    const bool bulk = d.bulk;
    uint64_t *mb = reinterpret_cast<uint64_t *>(smem + L.mb);
#else
    constexpr bool bulk = false;
#endif

    const int tid = (int)threadIdx.x, lane = tid % 32, w = tid / 32, g = lane / 4, t = lane % 4;
    const int rg = w % RG, kg = w / RG, DP = d.DP, KS = (DP - 8) / 16;
#if MLA_IDX_BULK
    /* where key tid of buffer buf lands: its raw row (fp8) or key row */
    const auto key_row = [&](int buf) -> void * {
        return RAW ? static_cast<void *>(raw + buf * L.raw_bytes + tid * d.rb)
                   : static_cast<void *>(Ks + buf * (L.ks_bytes / 2) + tid * DP);
    };
#endif

    nv_stage_q(d, b, TM, Qs, Ql);
    /* key tid of the tile after next: its position and cache block are
     * loaded a tile ahead of their use, the addresses resolved after P V */
    int32_t npos = -1;
    int64_t nblock = 0;
    key_ref nref;
    if (tid < NK) {
        key_info<CT>(d, b, b.kv_lo, npos, nref);
        KPs[tid] = npos;
        KBs[tid] = nref;
#if MLA_IDX_BULK
        if (bulk && b.kv_lo < b.kv_hi)
            nv_bulk_key(d, npos, nref, key_row(0), mb);
#endif
        key_info<CT>(d, b, b.kv_lo + NK, npos, nref);
    }
    idx_sync();
    const nv_map map = nv_map_of<CT>(d);
    /* byte addresses: a k-step is 32 bytes along a row */
    const mla_saddr qa = qs_at + 2 * ((16 * rg + lane % 16) * DP + 8 * (lane / 16));
    const int qr_n = qsplit ? 0 : KS < QR ? KS : QR; /* even: KS is */
    uint32_t qreg[QR > 0 ? QR : 1][4];
#pragma unroll
    for (int ks = 0; ks < QR; ++ks)
        if (ks < qr_n)
            mla_ldsm_x4_at(qreg[ks], qa + 32 * ks);
    if (!bulk && b.kv_lo < b.kv_hi)
        nv_issue<CT, NK>(d, map, KPs, KBs, Ks, raw);

    int32_t lim[2]; /* causal limits of this lane's rows, -1: invalid row */
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        const int r = 16 * rg + g + 8 * h;
        lim[h] = !row_valid(d, b, r) ? -1 : d.sparse ? 0x7FFFFFFF : row_limit(d, b, r);
    }
    float m_run[RG][2], m_own[2] = {-INFINITY, -INFINITY}, l_own[2] = {0.0f, 0.0f};
    float o[RG][8][4];
#pragma unroll
    for (int rr = 0; rr < RG; ++rr) {
        m_run[rr][0] = m_run[rr][1] = -INFINITY;
#pragma unroll
        for (int n = 0; n < 8; ++n)
#pragma unroll
            for (int e = 0; e < 4; ++e)
                o[rr][n][e] = 0.0f;
    }
    const int colbase = b.c0 + 64 * w;
    const bool pv_live = colbase < (int)d.c.L;
    /* 8-column groups past the key row read its last one (never stored) */
    const int colmax = DP - 16;

    int cur = 0;
    for (int32_t kb = b.kv_lo; kb < b.kv_hi; kb += NK, cur ^= 1) {
        const int nxt = cur ^ 1;
        const int32_t ipos = npos; /* key tid of the next tile */
        const key_ref iref = nref;
        if (tid < NK) {
            KPs[nxt * NK + tid] = npos;
            KBs[nxt * NK + tid] = nref;
            npos = key_position(d, b, kb + 2 * NK, tid);
            if (npos >= 0)
                nblock = key_block(d, b, npos);
        }
#if MLA_IDX_BULK
        if (bulk) {
            mbar_wait(mb + cur, (ph >> cur) & 1u);
            ph ^= 1u << cur;
        }
#endif
        if (!bulk && d.async)
            cp_async_wait<0>();
        idx_sync(); /* tile kb is in; every warp is done with tile kb - NK */
        if (kb + NK < b.kv_hi) {
#if MLA_IDX_BULK
            if (bulk && tid < NK)
                nv_bulk_key(d, ipos, iref, key_row(nxt), mb + nxt);
#endif
            if (!bulk)
                nv_issue<CT, NK>(d, map, KPs + nxt * NK, KBs + nxt * NK,
                                 RAW ? Ks : Ks + nxt * (L.ks_bytes / 2), raw + nxt * L.raw_bytes);
        }
        const int32_t *KP = KPs + cur * NK;
        const uint16_t *Kt = RAW ? Ks : Ks + cur * (L.ks_bytes / 2);
        if constexpr (RAW) {
            nv_convert<CT, NK>(d, map, raw + cur * L.raw_bytes, Ks);
            idx_sync();
        }

        /* S for row group rg x keys KW kg .. (ldmatrix x4: q's 16x16 steps
         * ks, ks + 1; one 8-key tile's two steps) */
        float s[NT][4], s1[NT][4]; /* even and odd k-steps: two mma chains */
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e)
                s[nt][e] = s1[nt][e] = 0.0f;
        const mla_saddr ka = mla_smem_addr(Kt) + 2 * ((KW * kg + lane % 8) * DP + 8 * (lane / 8));
#pragma unroll
        for (int ks = 0; ks < QR; ks += 2) {
            if (ks < qr_n) {
                uint32_t bb[NT][4];
#pragma unroll
                for (int nt = 0; nt < NT; ++nt)
                    mla_ldsm_x4_at(bb[nt], ka + 16 * nt * DP + 32 * ks);
#pragma unroll
                for (int nt = 0; nt < NT; ++nt) {
                    mla_mma_bf16_16x8x16(s[nt], qreg[ks], &bb[nt][0]);
                    mla_mma_bf16_16x8x16(s1[nt], qreg[ks + 1], &bb[nt][2]);
                }
            }
        }
#pragma unroll 6
        for (int ks = qr_n; ks < KS; ks += 2) {
            uint32_t a0[4], a1[4], bb[NT][4];
            mla_ldsm_x4_at(a0, qa + 32 * ks);
            mla_ldsm_x4_at(a1, qa + 32 * ks + 32);
#pragma unroll
            for (int nt = 0; nt < NT; ++nt)
                mla_ldsm_x4_at(bb[nt], ka + 16 * nt * DP + 32 * ks);
#pragma unroll
            for (int nt = 0; nt < NT; ++nt) {
                mla_mma_bf16_16x8x16(s[nt], a0, &bb[nt][0]);
                mla_mma_bf16_16x8x16(s1[nt], a1, &bb[nt][2]);
            }
            if (qsplit) {
                mla_ldsm_x4_at(a0, qa + ql_off + 32 * ks);
                mla_ldsm_x4_at(a1, qa + ql_off + 32 * ks + 32);
#pragma unroll
                for (int nt = 0; nt < NT; ++nt) {
                    mla_mma_bf16_16x8x16(s[nt], a0, &bb[nt][0]);
                    mla_mma_bf16_16x8x16(s1[nt], a1, &bb[nt][2]);
                }
            }
        }
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e)
                s[nt][e] += s1[nt][e];

        /* masked, scaled scores; this warp's row maxima */
        float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int32_t pos = KP[KW * kg + 8 * nt + 2 * t + (e & 1)];
                s[nt][e] = (pos >= 0 && pos <= lim[e >> 1]) ? s[nt][e] * d.ss2 : -INFINITY;
                mx[e >> 1] = fmaxf(mx[e >> 1], s[nt][e]);
            }
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            mx[h] = fmaxf(mx[h], mla_shfl_xor(mx[h], 1));
            mx[h] = fmaxf(mx[h], mla_shfl_xor(mx[h], 2));
        }
        if (t == 0) {
            Mx[16 * w + g] = mx[0];
            Mx[16 * w + g + 8] = mx[1];
        }
        idx_sync();

        /* every warp: the same running max of every row */
        float alpha[RG][2], a_own[2] = {1.0f, 1.0f};
#pragma unroll
        for (int rr = 0; rr < RG; ++rr)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                float tm = -INFINITY;
#pragma unroll
                for (int c = 0; c < CW; ++c)
                    tm = fmaxf(tm, Mx[16 * (c * RG + rr) + g + 8 * h]);
                const float mn = fmaxf(m_run[rr][h], tm);
                alpha[rr][h] = mn == -INFINITY ? 1.0f : nv_exp2(m_run[rr][h] - mn);
                m_run[rr][h] = mn;
                if (rr == rg) {
                    m_own[h] = mn;
                    a_own[h] = alpha[rr][h];
                }
            }
        float psum[2] = {0.0f, 0.0f};
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
            for (int h = 0; h < 2; ++h) {
                const float x0 = s[nt][2 * h], x1 = s[nt][2 * h + 1];
                const float p0 = x0 == -INFINITY ? 0.0f : nv_exp2(x0 - m_own[h]);
                const float p1 = x1 == -INFINITY ? 0.0f : nv_exp2(x1 - m_own[h]);
                psum[h] += p0 + p1;
                *reinterpret_cast<uint32_t *>(Ps + (16 * rg + g + 8 * h) * PSS + KW * kg + 8 * nt +
                                              2 * t) = nv_bf16x2(p0, p1);
            }
#pragma unroll
        for (int h = 0; h < 2; ++h)
            l_own[h] = l_own[h] * a_own[h] + psum[h];
        idx_sync();

        /* O = alpha O + P V over this warp's 64 columns */
        if (pv_live) {
#pragma unroll
            for (int rr = 0; rr < RG; ++rr)
#pragma unroll
                for (int n = 0; n < 8; ++n)
#pragma unroll
                    for (int e = 0; e < 4; ++e)
                        o[rr][n][e] *= alpha[rr][e >> 1];
            /* V: keys 16 kk + 8 ((lane / 8) % 2) + lane % 8, 8-column groups
             * 2 np + lane / 16 (clamped to the row); P: rows 16 rr + lane % 16 */
            const mla_saddr vb = mla_smem_addr(Kt) + 2 * ((8 * ((lane / 8) % 2) + lane % 8) * DP);
            mla_saddr vc[4];
#pragma unroll
            for (int np = 0; np < 4; ++np) {
                const int col = colbase + 8 * (2 * np + lane / 16);
                vc[np] = vb + 2 * (col < colmax ? col : colmax);
            }
            const mla_saddr pa = ps_at + 2 * ((lane % 16) * PSS + 8 * (lane / 16));
#pragma unroll
            for (int kk = 0; kk < NK / 16; ++kk) {
                uint32_t bv[8][2];
#pragma unroll
                for (int np = 0; np < 4; ++np) {
                    uint32_t q4[4];
                    mla_ldsm_x4_trans_at(q4, vc[np] + 32 * kk * DP);
                    bv[2 * np][0] = q4[0], bv[2 * np][1] = q4[1];
                    bv[2 * np + 1][0] = q4[2], bv[2 * np + 1][1] = q4[3];
                }
#pragma unroll
                for (int rr = 0; rr < RG; ++rr) {
                    uint32_t a[4];
                    mla_ldsm_x4_at(a, pa + 2 * (16 * rr * PSS + 16 * kk));
#pragma unroll
                    for (int n = 0; n < 8; ++n)
                        mla_mma_bf16_16x8x16(o[rr][n], a, bv[n]);
                }
            }
        }
        if (tid < NK) {
            nref.nope = nref.rope = d.c.data;
            if (npos >= 0)
                nref = key_bases<CT>(d, nblock, key_token(d, npos));
        }
    }

    /* the rows' sums: lanes, then key groups; the factors and lse */
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        l_own[h] += mla_shfl_xor(l_own[h], 1);
        l_own[h] += mla_shfl_xor(l_own[h], 2);
    }
    if (t == 0) {
        Lw[16 * w + g] = l_own[0];
        Lw[16 * w + g + 8] = l_own[1];
        if (kg == 0) {
            Ms[16 * rg + g] = m_own[0];
            Ms[16 * rg + g + 8] = m_own[1];
        }
    }
    idx_sync();
    if (tid < TM) {
        float l = 0.0f;
#pragma unroll
        for (int c = 0; c < CW; ++c)
            l += Lw[16 * (c * RG + tid / 16) + tid % 16];
        row_finish(d, b, tid, Ms[tid], l, Fs, Or);
    }
    idx_sync();
    if (!pv_live)
        return;
    /* two columns a store (the chunks are even; an odd L's last column alone) */
#pragma unroll
    for (int rr = 0; rr < RG; ++rr)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const out_row r = out_row_of(d, b, Or, Fs, 16 * rr + g + 8 * h);
            if (!r.p)
                continue;
#pragma unroll
            for (int n = 0; n < 8; ++n) {
                const int col = colbase + 8 * n + 2 * t;
                if (col + 1 < (int)d.c.L && col < b.c0 + kColChunk)
                    out_store2(d, b, r, col, o[rr][n][2 * h], o[rr][n][2 * h + 1]);
                else if (col < (int)d.c.L && col < b.c0 + kColChunk)
                    out_store(d, b, Or, Fs, 16 * rr + g + 8 * h, col, o[rr][n][2 * h]);
            }
        }
}

#else
/* passes without the matrix unit name them in discarded branches only */
template <int CT, int RG> MLA_DEV void nv_zero_pads(const att_desc &d, unsigned char *smem);
template <int CT, int RG>
MLA_DEV void attend_nv(const att_desc &d, const att_blk &b, unsigned char *smem, uint32_t &ph);
#endif

} // namespace

#endif
