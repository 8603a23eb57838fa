/* The pipelined gfx942 / gfx950 body of hip/attention.hip, after the
 * schedule of the sm_90a body (hip/attention_wgmma.h): 64-row records (HT =
 * min(H, 64) heads of JT = 64 / HT query rows; sparse: JT = 1), the 576-dim
 * QK product, V = the first L <= 512 dims of the same key tile, the online
 * softmax in fp32 (log2 domain), P rounded to bf16 once and used for all
 * 512 output columns.
 *
 * 256 threads, four waves; wave w takes row half rh = w & 1 (rows 32 rh ..
 * 32 rh + 31) and pair index pq = w >> 1. Two geometries (ap_geom):
 *   gfx950: 64-key tiles in two LDS stages (2 x 73 KB of the 160 KB),
 *     v_mfma_f32_32x32x16_bf16; wave (rh, pq) computes S^T for keys 32 pq ..
 *     32 pq + 31 over all 576 dims, the pair's row maxima and P meet in LDS;
 *   gfx942: 32-key tiles in one LDS stage (37 KB of the 64 KB) with the next
 *     tile in registers, v_mfma_f32_32x32x8_bf16; wave (rh, pq) computes S^T
 *     over dims 288 pq .. 288 pq + 287, and the pair adds its partial sums
 *     through LDS, so both hold the whole tile's scores (and P) of their rows.
 * Both run on gfx950 (tuning.hip_attention mfma942 forces the second there).
 *
 * Per tile: every wave first issues the global loads of the next tile's
 * keys (each thread its chunks, in registers), then S^T = K Q^T (A = key
 * rows from LDS, B = q in registers, loaded once per record: a lane holds
 * row 32 rh + lane % 32), the softmax on the accumulators (a lane holds 16
 * keys of its row: the row's max and sum are 15 register operations and one
 * exchange with lane ^ 32), then the dequantized next tile into the free
 * stage (gfx950; gfx942 after the tile, its only stage being in use), then
 * O^T = V^T P^T for the wave's 256 output columns pq (8 accumulator tiles of
 * 32 x 32: A = V^T read from LDS, B = P straight from the softmax registers,
 * whose layout is B's; each lane's accumulators are one row, so the rescale
 * by alpha is lane-local). The producer's role is taken by every wave
 * between its matrix instructions rather than by dedicated waves: AMD
 * allocates registers per kernel, so a producer wave would cost a consumer's
 * registers. The positions and cache addresses of tile t + 2 are resolved
 * by wave 0 during tile t (rings of three and two slots).
 *
 * Keys are dequantized exactly on the way into LDS: bf16 as is, fp8 codes
 * (e4m3fn, e4m3fnuz) are bf16 values, FP8_SCALED codes times their
 * power-of-two group scale; NORMAL's k_scale stays in the score scale and the
 * output factor (desc ss2, kso). Dims D .. 575 are zero in q and in the key
 * rows (zeroed once per kernel), keys past the context are zero rows, and
 * columns past L read column L - 1 and are never stored.
 *
 * Takes (ap_takes): q bf16 or fp8, L + R <= 576, L <= 512, L and R multiples
 * of 8 (fp8 caches: L of 16, NORMAL and SHUFFLED's R of 16, at most 40
 * 16-byte units a key), the cache's base and block stride multiples of 4
 * bytes; every layout, block size, head count, decode, MTP, prefill and
 * sparse run; MLA_HIP_ATTENTION=mfma (the synchronous MFMA body of
 * hip/attention_mfma.h) or fma (the plain body) keeps the others. */
#ifndef MLA_HIP_ATTENTION_MFMA_PIPE_H
#define MLA_HIP_ATTENTION_MFMA_PIPE_H

#include "hip/attention_common.h"
#include "hip/hip_internal.h"

/* which geometries the pass has: the gfx942 one on gfx942 and gfx950, the
 * gfx950 one on gfx950, both in the wave-64 emulation */
#if MLA_IDX_EMU && MLA_WAVE_SIZE == 64
#define MLA_AP_942 1
#define MLA_AP_950 1
#elif defined(__HIP_DEVICE_COMPILE__) && defined(__gfx950__)
#define MLA_AP_942 1
#define MLA_AP_950 1
#elif defined(__HIP_DEVICE_COMPILE__) && defined(__gfx942__)
#define MLA_AP_942 1
#define MLA_AP_950 0
#else
#define MLA_AP_942 0
#define MLA_AP_950 0
#endif

namespace
{

constexpr int kApRows = 64;                   /* (query row, head) pairs of a record */
constexpr int kApDims = 576;                  /* L + R the body takes */
[[maybe_unused]] constexpr int kApMaxL = 512; /* O columns: two waves x 256 */
constexpr int kApSmall = 128;                 /* att_blk */

template <int G> struct ap_geom {
    static constexpr int NK = G == 950 ? 64 : 32;      /* keys per tile */
    static constexpr int STAGES = G == 950 ? 2 : 1;    /* LDS key stages */
    static constexpr int KW = G == 950 ? 16 : 8;       /* k of one MFMA */
    static constexpr int QW = KW / 4;                  /* operand words per lane */
    static constexpr int KQ = NK / 32;                 /* 32-key blocks of a tile */
    static constexpr int DPART = 2 / KQ;               /* dim parts of S^T */
    static constexpr int NSTEP = kApDims / KW / DPART; /* S^T k-steps per wave */
    /* key row stride (values): rows 16-byte aligned (the stores are), 16-byte
     * reads of 8 consecutive lanes fall on distinct banks (gfx942's 8-byte
     * reads: two lanes a bank pair) */
    static constexpr int DP = kApDims + 8;
    /* LDS, bytes: block record, key positions [3][NK], key addresses [2][NK],
     * the pair exchange (gfx950: row maxima / sums [4][64] f32, then P [4][8]
     * [64] words; gfx942: partial scores [4][16][64] f32), row factors and
     * output addresses, the key stages */
    static constexpr int KP = kApSmall, KR = KP + 3 * NK * 4, XM = KR + 2 * NK * 16;
    static constexpr int XP = XM + 4 * 64 * 4;
    static constexpr int FS = XP + (G == 950 ? 4 * 8 * 64 * 4 : 4 * 16 * 64 * 4);
    static constexpr int ORW = FS + kApRows * 4, KS = ORW + kApRows * 8;
    static constexpr int STAGE = NK * DP * 2, TOTAL = KS + STAGES * STAGE;
    static_assert(2 * KQ * DPART == 4, "four waves");
};
static_assert(ap_geom<950>::TOTAL <= 160 * 1024, "gfx950's LDS");
static_assert(ap_geom<942>::TOTAL <= 64 * 1024, "gfx942's LDS");
static_assert(sizeof(att_blk) <= kApSmall, "block record in its slot");

#if MLA_AP_942 || MLA_AP_950

/* acc += A B on 32 x 32 tiles, k = 8 (QW = 2) or 16 (QW = 4): lane l holds
 * A[l % 32][QW 2 (l / 32) + e] and B[QW 2 (l / 32) + e][l % 32] (e < 2 QW),
 * two bf16 a word, the lower k in the low half; D as in hip/mfma.h. */
template <int QW>
MLA_DEV mla_f32x16 ap_mfma(const uint32_t (&a)[QW], const uint32_t (&b)[QW], mla_f32x16 acc)
{
    if constexpr (QW == 2) {
        return mla_mfma_bf16_32x32x8(a[0], a[1], b[0], b[1], acc);
    } else {
#if MLA_IDX_EMU
        /* elements 0-3 and 4-7 of each lane as two k = 8 steps: the same
         * products (A's and B's k orders agree), rounded to fp32 twice */
        acc = mla_mfma_bf16_32x32x8(a[0], a[1], b[0], b[1], acc);
        return mla_mfma_bf16_32x32x8(a[2], a[3], b[2], b[3], acc);
#elif MLA_AP_950
        typedef __bf16 bf16x8 __attribute__((ext_vector_type(8)));
        typedef unsigned u32x4 __attribute__((ext_vector_type(4)));
        const u32x4 av = {a[0], a[1], a[2], a[3]}, bv = {b[0], b[1], b[2], b[3]};
        return __builtin_amdgcn_mfma_f32_32x32x16_bf16(
            __builtin_bit_cast(bf16x8, av), __builtin_bit_cast(bf16x8, bv), acc, 0, 0, 0);
#else
        return acc; /* not instantiated: gfx942 has no 32x32x16 */
#endif
    }
}

/* The block's barrier after this wave's LDS accesses. Not idx_sync: the
 * compiler puts vmcnt(0) before an s_barrier behind workgroup fences, which
 * would wait for the next tile's loads; they stay in flight across it. */
MLA_DEV void ap_sync()
{
#if MLA_IDX_EMU
    __syncthreads();
#else
    asm volatile("s_waitcnt lgkmcnt(0)\n\ts_barrier" ::: "memory");
#endif
}

MLA_DEV uint32_t ap_bf16x2(float lo, float hi)
{
    return mla_fb_f32_to_bf16(lo) | (mla_fb_f32_to_bf16(hi) << 16);
}

/* The key positions and cache addresses of tile t (keys kb ..) into ring
 * slots t % 3 and t % 2; by threads < NK. */
template <int G, int CT>
MLA_DEV void ap_keys(const att_desc &d, const att_blk &b, unsigned char *smem, int32_t t)
{
    using GM = ap_geom<G>;
    int32_t pos;
    key_ref ref;
    key_info<CT>(d, b, b.kv_lo + t * GM::NK, pos, ref);
    reinterpret_cast<int32_t *>(smem + GM::KP)[(t % 3) * GM::NK + threadIdx.x] = pos;
    reinterpret_cast<key_ref *>(smem + GM::KR)[(t & 1) * GM::NK + threadIdx.x] = ref;
}

/* A key's 16-byte copy units (each one load: the host takes caches whose
 * base and block stride are multiples of 4 bytes, and every unit starts a
 * multiple of 4 bytes into its token): bf16 caches one
 * 8-value chunk each; fp8 caches 16 codes (two chunks; at most 40 units,
 * ap_takes), or 8 bf16 rope values of FP8_SCALED. */
template <int CT> constexpr int ap_max_units() { return CT == MLA_DTYPE_BF16 ? 72 : 40; }

template <int CT> MLA_DEV int ap_units(const att_desc &d)
{
    if constexpr (CT == MLA_DTYPE_BF16)
        return d.cpk;
    else
        return (int)(d.c.L / 16 + (d.rope_bf16 ? d.c.R / 8 : d.c.R / 16));
}

/* Unit u's chunk (its first, for 16 codes) and whether it is bf16. */
template <int CT> MLA_DEV chunk_at ap_unit(const att_desc &d, int u, bool &bf)
{
    if constexpr (CT == MLA_DTYPE_BF16) {
        bf = true;
        return chunk_of(d, u);
    } else {
        const int nu = (int)d.c.L / 16;
        bf = u >= nu && d.rope_bf16;
        return chunk_of(d, u < nu ? 2 * u : d.nope_chunks + (d.rope_bf16 ? u - nu : 2 * (u - nu)));
    }
}

/* 16 bytes at p, 4-byte aligned (one dwordx4 load: gfx9 takes global
 * accesses aligned to 4 bytes). */
MLA_DEV void ap_load16(const uint8_t *p, uint32_t w[4])
{
#if MLA_IDX_EMU
    std::memcpy(w, p, 16);
#else
    typedef unsigned u32x4a4 __attribute__((ext_vector_type(4), aligned(4)));
    const u32x4a4 v = *reinterpret_cast<const u32x4a4 *>(p);
    w[0] = v[0], w[1] = v[1], w[2] = v[2], w[3] = v[3];
#endif
}

/* fp8 code byte j of x as fp32, exactly: its 7 magnitude bits put at fp32's
 * bits 26..20 read as the value times 2^-120 (e4m3fn, bias 7) or 2^-119
 * (e4m3fnuz, bias 8), subnormal codes included (fp32 denormals are kept);
 * NaN codes (e4m3fn magnitude 0x7F, e4m3fnuz 0x80) give fp32's quiet NaN, as
 * unpack_value does. */
template <int CT> MLA_DEV float ap_fp8(uint32_t x, int j)
{
    const uint32_t c = (x >> (8 * j)) & 0xFFu;
    const float mag =
        mla_fb_float((c & 0x7Fu) << 20) * (CT == MLA_DTYPE_FP8_E4M3FN ? 0x1p120f : 0x1p119f);
    const bool nan = CT == MLA_DTYPE_FP8_E4M3FN ? (c & 0x7Fu) == 0x7Fu : c == 0x80u;
    return mla_fb_float(nan ? MLA_FB_F32_QNAN : mla_fb_bits(mag) | (c & 0x80u) << 24);
}

/* v hidden from loop-invariant code motion: what depends only on the
 * thread and the call is recomputed per tile instead of held in registers
 * across the record loop. */
MLA_DEV int ap_opaque(int v)
{
#if !MLA_IDX_EMU
    asm volatile("" : "+v"(v));
#endif
    return v;
}

/* A thread's units of a tile: key tid / TPK, units tid % TPK + TPK g. */
template <int G, int CT> struct ap_loads {
    static constexpr int TPK = kThreads / ap_geom<G>::NK; /* threads per key */
    static constexpr int ITEMS = (ap_max_units<CT>() + TPK - 1) / TPK;
    uint32_t raw[ITEMS][4];
    float sc[ITEMS];
};

/* Issues the loads of items G0 .. G1 - 1 of tile t's units (ring slots of
 * t) into l: invalid keys and units load the cache's first bytes and keep
 * zeros (no branch around a load). */
template <int G, int CT, int G0, int G1>
MLA_DEV void ap_issue(const att_desc &d, const unsigned char *smem, int32_t t, ap_loads<G, CT> &l)
{
    using GM = ap_geom<G>;
    using LD = ap_loads<G, CT>;
    const int tid = ap_opaque((int)threadIdx.x), k = tid / LD::TPK, q = tid % LD::TPK;
    const bool kv = reinterpret_cast<const int32_t *>(smem + GM::KP)[(t % 3) * GM::NK + k] >= 0;
    const key_ref kr = reinterpret_cast<const key_ref *>(smem + GM::KR)[(t & 1) * GM::NK + k];
    const int nu = ap_units<CT>(d);
#pragma unroll
    for (int g = G0; g < G1; ++g) {
        const int u = q + LD::TPK * g;
        const bool valid = kv && u < nu;
        bool bf;
        const chunk_at ch = ap_unit<CT>(d, valid ? u : 0, bf);
        const uint8_t *src = valid ? (ch.nope ? kr.nope : kr.rope) + ch.off : d.c.data;
        uint32_t v[4];
        ap_load16(src, v);
#pragma unroll
        for (int j = 0; j < 4; ++j)
            l.raw[g][j] = valid ? v[j] : 0u;
        l.sc[g] = 1.0f;
        if constexpr (CT != MLA_DTYPE_BF16) {
            if (cache_fp8s(d.c)) { /* the group's scale (a power of two) */
                const bool sv = valid && !bf;
                const float sc = *reinterpret_cast<const float *>(
                    sv ? kr.nope + d.c.L + 4 * (ch.d0 / MLA_CL_SCALE_GROUP) : d.c.data);
                l.sc[g] = sv ? sc : 1.0f;
            }
        }
    }
}

/* Items G0 .. G1 - 1, as bf16 (exact), into key stage Ks. */
template <int G, int CT, int G0, int G1>
MLA_DEV void ap_store(const att_desc &d, const ap_loads<G, CT> &l, uint16_t *Ks)
{
    using GM = ap_geom<G>;
    using LD = ap_loads<G, CT>;
    const int tid = ap_opaque((int)threadIdx.x), k = tid / LD::TPK, q = tid % LD::TPK;
    const int nu = ap_units<CT>(d);
    uint16_t *row = Ks + k * GM::DP;
#pragma unroll
    for (int g = G0; g < G1; ++g) {
        const int u = q + LD::TPK * g;
        if (u >= nu)
            break;
        mla_u32x4 w;
        if constexpr (CT == MLA_DTYPE_BF16) {
#pragma unroll
            for (int j = 0; j < 4; ++j)
                w.v[j] = l.raw[g][j];
            *reinterpret_cast<mla_u32x4 *>(row + 8 * u) = w;
        } else {
            const int nn = (int)d.c.L / 16; /* nope units */
            if (u >= nn && d.rope_bf16) {
#pragma unroll
                for (int j = 0; j < 4; ++j)
                    w.v[j] = l.raw[g][j];
                *reinterpret_cast<mla_u32x4 *>(row + d.c.L + 8 * (u - nn)) = w;
                continue;
            }
            const bool scaled = cache_fp8s(d.c);
#pragma unroll
            for (int half = 0; half < 2; ++half) {
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                    const uint32_t x = l.raw[g][2 * half + j / 2];
                    const float v0 = ap_fp8<CT>(x, 2 * (j % 2)),
                                v1 = ap_fp8<CT>(x, 2 * (j % 2) + 1);
                    /* unscaled codes are normal fp32 of 4 significant bits (or
                     * NaN, 0x7FC00000): their upper halves are the bf16 */
                    w.v[j] = scaled ? ap_bf16x2(v0 * l.sc[g], v1 * l.sc[g])
                                    : (mla_fb_bits(v0) >> 16) | (mla_fb_bits(v1) & 0xFFFF0000u);
                }
                *reinterpret_cast<mla_u32x4 *>(row + 16 * u + 8 * half) = w;
            }
        }
    }
}

/* Rows r0 .. r0 + n - 1 of the record's q into rows of Qs (stride DP values)
 * as bf16 (exact for bf16 and fp8 q), zero for invalid rows and dims D ..
 * 575: 16-byte loads for unit-stride bf16 q. */
template <int QT>
MLA_DEV void ap_stage_q(const att_desc &d, const att_blk &b, int r0, int n, uint16_t *Qs, int DP)
{
    constexpr int per = kApDims / kChunk;
    const bool vec = QT == MLA_DTYPE_BF16 && d.qs2 == 1;
    for (int it = (int)threadIdx.x; it < n * per; it += kThreads) {
        const int r = it / per, c = it - r * per, rr = r0 + r;
        const bool live = row_valid(d, b, rr) && kChunk * c < d.D;
        const int64_t qoff = (b.row0 + b.j0 + rr / d.HT) * d.qs0 +
                             (int64_t)(b.h0 + rr % d.HT) * d.qs1 + (int64_t)kChunk * c * d.qs2;
        uint32_t v[4] = {0, 0, 0, 0};
        if (live && vec) {
            load_bytes(d.q + 2 * qoff, v, 16);
        } else if (live) {
#pragma unroll
            for (int e = 0; e < 4; ++e)
                v[e] = ap_bf16x2(load_value<QT>(d.q, qoff + (int64_t)(2 * e) * d.qs2),
                                 load_value<QT>(d.q, qoff + (int64_t)(2 * e + 1) * d.qs2));
        }
        mla_u32x4 w;
#pragma unroll
        for (int e = 0; e < 4; ++e)
            w.v[e] = v[e];
        *reinterpret_cast<mla_u32x4 *>(Qs + r * DP + kChunk * c) = w;
    }
}

/* One record: its tiles through the stages, then its rows' outputs. */
template <int G, int CT, int QT>
MLA_DEV void ap_record(const att_desc &d, const att_blk &b, unsigned char *smem)
{
    using GM = ap_geom<G>;
    constexpr int NK = GM::NK, QW = GM::QW, KW = GM::KW;
    const int tid = (int)threadIdx.x, lane = tid % 64, w = mla_wave_uniform(tid / 64);
    const int j = lane % 32, h = lane / 32, rh = w & 1, pq = w >> 1;
    const int kq = GM::KQ == 2 ? pq : 0, pdim = GM::DPART == 2 ? pq : 0;
    const int row = 32 * rh + j;
    const int32_t ntiles = b.kv_hi > b.kv_lo ? (b.kv_hi - b.kv_lo + NK - 1) / NK : 0;

    if (tid < NK) {
        ap_keys<G, CT>(d, b, smem, 0);
        ap_keys<G, CT>(d, b, smem, 1);
    }
    const int32_t lim = !row_valid(d, b, row) ? -1 : d.sparse ? 0x7FFFFFFF : row_limit(d, b, row);
    float m_run = -INFINITY, l_run = 0.0f; /* l_run: this lane's keys */
    mla_f32x16 o[8];
#pragma unroll
    for (int c = 0; c < 8; ++c)
#pragma unroll
        for (int r = 0; r < 16; ++r)
            o[c][r] = 0.0f;

    uint16_t *K0 = reinterpret_cast<uint16_t *>(smem + GM::KS);
    float *XM = reinterpret_cast<float *>(smem + GM::XM);
    uint32_t *XP = reinterpret_cast<uint32_t *>(smem + GM::XP);
    float *XS = reinterpret_cast<float *>(smem + GM::XP); /* gfx942's partial scores */
    const int32_t *KPr = reinterpret_cast<const int32_t *>(smem + GM::KP);
    /* q of this lane's row as B fragments, qf[s] = q[row][KW (pdim NSTEP +
     * s) + KW / 2 h ..], through key stage 0 (gfx942: in two passes of 32
     * rows, as many as the stage holds) */
    constexpr int QROWS = NK;
    uint32_t qf[GM::NSTEP][QW];
#pragma unroll
    for (int pass = 0; pass < kApRows / QROWS; ++pass) {
        ap_stage_q<QT>(d, b, QROWS * pass, QROWS, K0, GM::DP);
        ap_sync();
        if (row / QROWS == pass) {
            const uint32_t *qr = reinterpret_cast<const uint32_t *>(
                K0 + (row % QROWS) * GM::DP + KW * pdim * GM::NSTEP + KW / 2 * h);
#pragma unroll
            for (int s2 = 0; s2 < GM::NSTEP; ++s2)
#pragma unroll
                for (int e = 0; e < QW; ++e)
                    qf[s2][e] = qr[KW / 2 * s2 + e];
        }
        ap_sync();
    }
    /* the next tile's loads: gfx950 in three parts, held across S^T, the
     * first and the second half of P V; gfx942 all across the tile */
    using LD = ap_loads<G, CT>;
    constexpr int NI = LD::ITEMS;
    constexpr int H1 = GM::STAGES == 2 ? (NI + 2) / 3 : NI,
                  H2 = GM::STAGES == 2 ? (2 * NI + 2) / 3 : NI;
    LD ld;
    if (ntiles > 0) {
        ap_issue<G, CT, 0, NI>(d, smem, 0, ld);
        ap_store<G, CT, 0, NI>(d, ld, K0);
    }
    ap_sync();

    for (int32_t t = 0; t < ntiles; ++t) {
        const uint16_t *Ks = K0 + (t % GM::STAGES) * (GM::STAGE / 2);
        uint16_t *Kn = K0 + ((t + 1) % GM::STAGES) * (GM::STAGE / 2);
        if (t + 1 < ntiles)
            ap_issue<G, CT, 0, H1>(d, smem, t + 1, ld);

        /* S^T[key 32 kq + 8 (r / 4) + 4 h + r % 4][row] in acc[r] */
        mla_f32x16 acc;
#pragma unroll
        for (int r = 0; r < 16; ++r)
            acc[r] = 0.0f;
        const uint16_t *kr = Ks + (32 * kq + j) * GM::DP + KW * pdim * GM::NSTEP + KW / 2 * h;
#pragma unroll
        for (int s = 0; s < GM::NSTEP; ++s) {
            uint32_t a[QW];
            const uint32_t *kp = reinterpret_cast<const uint32_t *>(kr + KW * s);
#pragma unroll
            for (int e = 0; e < QW; ++e)
                a[e] = kp[e];
            acc = ap_mfma<QW>(a, qf[s], acc);
        }

        /* the pair: gfx942 adds its partial scores, gfx950 meets for the
         * rows' maxima */
        const int32_t *KP = KPr + (t % 3) * NK;
        float x[16], mx = -INFINITY;
        if constexpr (GM::DPART == 2) {
#pragma unroll
            for (int r = 0; r < 16; ++r)
                XS[(w * 16 + r) * 64 + lane] = acc[r];
            ap_sync();
#pragma unroll
            for (int r = 0; r < 16; ++r)
                acc[r] += XS[((w ^ 2) * 16 + r) * 64 + lane];
        }
#pragma unroll
        for (int r = 0; r < 16; ++r) {
            const int32_t pos = KP[32 * kq + 8 * (r / 4) + 4 * h + r % 4];
            x[r] = (pos >= 0 && pos <= lim) ? acc[r] * d.ss2 : -INFINITY;
            mx = fmaxf(mx, x[r]);
        }
        mx = fmaxf(mx, mla_shfl_xor(mx, 32));
        if constexpr (GM::DPART == 1) {
            XM[w * 64 + lane] = mx;
            ap_sync();
            mx = fmaxf(mx, XM[(w ^ 2) * 64 + lane]);
        }
        const float m_new = fmaxf(m_run, mx);
        const float alpha = m_new == -INFINITY ? 1.0f : exp2f(m_run - m_new);
        m_run = m_new;
        /* P in bf16 pairs: pw[m] = keys of r = 2 m, 2 m + 1, B's layout */
        uint32_t pw[8];
        float sum = 0.0f;
#pragma unroll
        for (int m = 0; m < 8; ++m) {
            const float p0 = x[2 * m] == -INFINITY ? 0.0f : exp2f(x[2 * m] - m_new);
            const float p1 = x[2 * m + 1] == -INFINITY ? 0.0f : exp2f(x[2 * m + 1] - m_new);
            sum += p0 + p1;
            pw[m] = ap_bf16x2(p0, p1);
        }
        l_run = l_run * alpha + sum;

        if (GM::STAGES == 2 && t + 1 < ntiles) {
            ap_store<G, CT, 0, H1>(d, ld, Kn);
            ap_issue<G, CT, H1, H2>(d, smem, t + 1, ld);
        }
        /* gfx950: the partner's P (its key block), read at its use */
        if constexpr (GM::KQ == 2) {
#pragma unroll
            for (int m = 0; m < 8; ++m)
                XP[(w * 8 + m) * 64 + lane] = pw[m];
            ap_sync();
        }

        /* O^T[col 256 pq + 32 c + 8 (r / 4) + 4 h + r % 4][row] in o[c][r]:
         * A = V^T (lane: column 256 pq + 32 c + j, keys of B's slots); the
         * wave's own key block first */
#pragma unroll
        for (int c = 0; c < 8; ++c)
#pragma unroll
            for (int r = 0; r < 16; ++r)
                o[c][r] *= alpha;
#pragma unroll
        for (int kb = 0; kb < GM::KQ; ++kb) {
            const int kblk = kb == 0 ? kq : 1 - kq;
            if (GM::STAGES == 2 && kb == 1 && t + 1 < ntiles) {
                ap_store<G, CT, H1, H2>(d, ld, Kn);
                ap_issue<G, CT, H2, NI>(d, smem, t + 1, ld);
            }
#pragma unroll
            for (int s = 0; s < 32 / KW; ++s) {
                uint32_t bp[QW];
#pragma unroll
                for (int e = 0; e < QW; ++e)
                    bp[e] = kb == 0 ? pw[QW * s + e] : XP[((w ^ 2) * 8 + QW * s + e) * 64 + lane];
#pragma unroll
                for (int c = 0; c < 8; ++c) {
                    const int col = imin(256 * pq + 32 * c + j, (int)d.c.L - 1);
                    uint32_t a[QW];
#pragma unroll
                    for (int e = 0; e < QW; ++e) {
                        /* slots 2 e, 2 e + 1: r = KW s / 2 .. of the S^T layout */
                        const int r0 = QW * 2 * s + 2 * e;
                        const int key = 32 * kblk + 8 * (r0 / 4) + 4 * h + r0 % 4;
                        const uint16_t *v = Ks + key * GM::DP + col;
                        a[e] = (uint32_t)v[0] | ((uint32_t)v[GM::DP] << 16);
                    }
                    o[c] = ap_mfma<QW>(a, bp, o[c]);
                }
            }
        }

        if (GM::STAGES == 2 && t + 1 < ntiles)
            ap_store<G, CT, H2, NI>(d, ld, Kn);
        if (tid < NK && t + 2 < ntiles)
            ap_keys<G, CT>(d, b, smem, t + 2);
        ap_sync();
        if (GM::STAGES == 1 && t + 1 < ntiles) {
            ap_store<G, CT, 0, NI>(d, ld, Kn);
            ap_sync();
        }
    }

    /* the rows' sums (lane halves, and the gfx950 pair); factors, lse and
     * output addresses */
    l_run += mla_shfl_xor(l_run, 32);
    if constexpr (GM::KQ == 2) {
        XM[w * 64 + lane] = l_run;
        ap_sync();
        l_run += XM[(w ^ 2) * 64 + lane];
    }
    float *Fs = reinterpret_cast<float *>(smem + GM::FS);
    uint8_t **Or = reinterpret_cast<uint8_t **>(smem + GM::ORW);
    if (pq == 0 && h == 0)
        row_finish(d, b, row, m_run, l_run, Fs, Or);
    ap_sync();
#pragma unroll
    for (int c = 0; c < 8; ++c)
#pragma unroll
        for (int r = 0; r < 16; ++r) {
            const int col = 256 * pq + 32 * c + 8 * (r / 4) + 4 * h + r % 4;
            if (col < (int)d.c.L)
                out_store(d, b, Or, Fs, row, col, o[c][r]);
        }
}

#endif /* MLA_AP_942 || MLA_AP_950 */

/* Blocks walk their records (next_block); the key rows' dims 576 .. DP stay
 * zero in every stage, as do the dims D .. 575 (no store writes them). A pass
 * without the geometry compiles an empty kernel (the host never launches
 * it there). */
template <int G, int CT, int QT>
__global__ __launch_bounds__(kThreads) void attention_ap_kernel(att_desc d)
{
#if MLA_AP_942 || MLA_AP_950
    if constexpr ((G == 942 && MLA_AP_942) || (G == 950 && MLA_AP_950)) {
        using GM = ap_geom<G>;
        MLA_IDX_SMEM(unsigned char, smem);
        att_blk &sb = *reinterpret_cast<att_blk *>(smem);
        if (threadIdx.x == 0)
            next_block<PATH_MATRIX>(d, sb, true);
        uint16_t *K0 = reinterpret_cast<uint16_t *>(smem + GM::KS);
        const int pad = GM::DP - d.D;
        for (int i = (int)threadIdx.x; i < GM::STAGES * GM::NK * pad; i += kThreads)
            K0[(i / pad) * GM::DP + d.D + i % pad] = 0;
        idx_sync();
        while (sb.live) {
            ap_record<G, CT, QT>(d, sb, smem);
            idx_sync();
            if (threadIdx.x == 0)
                next_block<PATH_MATRIX>(d, sb, false);
            idx_sync();
        }
    }
#else
    (void)d;
#endif
}

/* --------------------------------------------------------------- host */

#if !defined(__CUDACC__)
/* The geometry that takes the call (942, 950), or 0: see the file's head.
 * The gfx950 geometry on a gfx950 device (or the emulation, where
 * tuning.hip_attention mfma950 picks it), the gfx942 one elsewhere. */
int ap_takes(mla_context *ctx, const mla_attention_desc &ds, const mla_attention_op_args *a)
{
    const int32_t tune = ctx->tuning.hip_attention;
    if (tune == MLA_TUNE_HIP_ATTENTION_MFMA || tune == MLA_TUNE_HIP_ATTENTION_FMA)
        return 0;
    const int64_t L = ds.cache.kv_lora, R = ds.cache.rope;
    if (a->q.dtype == MLA_DTYPE_F32 || L + R > kApDims || L > kApMaxL || L % 8 || R % 8 ||
        reinterpret_cast<uintptr_t>(a->cache.data) % 4 || a->cache.stride[0] % 4)
        return 0;
    /* fp8 caches: 16-code units (ap_max_units) */
    const bool scaled = ds.cache.layout == MLA_CACHE_FP8_SCALED;
    if (ds.cache.dtype != MLA_DTYPE_BF16 &&
        (L % 16 || (!scaled && R % 16) || (scaled ? L / 16 + R / 8 : (L + R) / 16) > 40))
        return 0;
    const bool g950 = MLA_IDX_EMU ? tune == MLA_TUNE_HIP_ATTENTION_MFMA950
                                  : ctx->target == MLA_TARGET_GFX950;
    return g950 && tune != MLA_TUNE_HIP_ATTENTION_MFMA942 ? 950 : 942;
}

int ap_smem_bytes(int geom) { return geom == 950 ? ap_geom<950>::TOTAL : ap_geom<942>::TOTAL; }
#endif

} // namespace

#endif
