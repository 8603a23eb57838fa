/* The GEMM behind linear and batched_gemm: an FMA kernel, a matrix-unit
 * tile kernel and a small-M weight-streaming kernel (hip/gemm_tile.h
 * describes the operation, the three designs and their error). */
#include <stdlib.h>
#include <string.h>

#include "core/checked.h"
#include "hip/chunk8.h"
#include "hip/gemm_tile.h"
#include "hip/gemm_wgmma.h"
#include "hip/mfma.h" /* mla_block_sync, the matrix units */

namespace
{

/* Helpers of the matrix paths, which a pass without one (the AMD host pass,
 * other targets) compiles but does not use. */
#define MLA_GM_DEV static __device__ __forceinline__ __attribute__((unused))

#if defined(MLA_HAVE_MMA_BF16) || defined(MLA_EMU_MATRIX_NV)
#define MLA_GEMM_NV 1
#elif defined(MLA_HAVE_MFMA_BF16) || defined(MLA_EMU_MATRIX_AMD)
#define MLA_GEMM_AMD 1
#endif

/* ================================================================ FMA */

/* B[b, k, n] in fp32; fp8 codes of linear times their block scale. */
template <int BT> MLA_DEV float b_value(const gemm_desc &g, int64_t b, int64_t k, int64_t n)
{
    const float w = load_value<BT>(g.b, b * g.bs_b + k * g.bs_k + n * g.bs_n);
    if (!g.bscale)
        return w;
    return w * g.bscale[(n / kBlockScale) * g.sc_n + (k / kBlockScale) * g.sc_k];
}

/* Fills the k step at k0 of tile (b, m0, n0) into shared memory; outside
 * the matrices: 0 (it meets only outputs that are not stored, or k >= K,
 * which the compute loop never reaches). */
template <int AT, int BT>
MLA_DEV void load_tiles(const gemm_desc &g, int64_t b, int64_t m0, int64_t n0, int64_t k0,
                        float (*As)[kBM + 1], float (*Bs)[kBN + 1])
{
    const int tid = (int)threadIdx.x;
#pragma unroll
    for (int r = 0; r < kBM * kBK / MLA_HIP_BLOCK; ++r) {
        const int e = tid + r * MLA_HIP_BLOCK;
        const int m = g.a_kfast ? e / kBK : e % kBM, k = g.a_kfast ? e % kBK : e / kBM;
        const bool in = m0 + m < g.M && k0 + k < g.K;
        As[k][m] =
            in ? load_value<AT>(g.a, b * g.as_b + (m0 + m) * g.as_m + (k0 + k) * g.as_k) : 0.0f;
    }
#pragma unroll
    for (int r = 0; r < kBN * kBK / MLA_HIP_BLOCK; ++r) {
        const int e = tid + r * MLA_HIP_BLOCK;
        const int n = g.b_kfast ? e / kBK : e % kBN, k = g.b_kfast ? e % kBK : e / kBN;
        const bool in = n0 + n < g.N && k0 + k < g.K;
        Bs[k][n] = in ? b_value<BT>(g, b, k0 + k, n0 + n) : 0.0f;
    }
}

/* Output value (b, m, n) of K split s, sb = s batch + b: alpha v rounded
 * once to C's dtype (one split: sb is b), or v into the split's fp32 partial
 * sums [splits, batch, M, N] (several: gemm_split_reduce adds them). */
MLA_DEV void put_out(const gemm_desc &g, int64_t sb, int64_t m, int64_t n, float v)
{
    if (g.splits > 1) {
        g.partial[(sb * g.M + m) * g.N + n] = v;
        return;
    }
    const int64_t off = sb * g.cs_b + m * g.cs_m + n * g.cs_n;
    if (g.cdt == MLA_DTYPE_F32)
        store_value<MLA_DTYPE_F32>(g.c, off, g.alpha * v, 1);
    else
        store_value<MLA_DTYPE_BF16>(g.c, off, g.alpha * v, 1);
}

/* One 64 x 64 tile of C by FMA over k in [kb, ke) (ke: K, or a K split's
 * end, a multiple of kBK); every thread of the block calls it. */
template <int AT, int BT>
MLA_DEV void fma_tile(const gemm_desc &g, int64_t b, int64_t m0, int64_t n0, int64_t kb, int64_t ke,
                      int64_t split)
{
    __shared__ float As[kBK][kBM + 1]; /* +1: the transposed fills avoid bank conflicts */
    __shared__ float Bs[kBK][kBN + 1];
    const int tx = (int)threadIdx.x % (kBN / kTN), ty = (int)threadIdx.x / (kBN / kTN);
    float acc[kTM][kTN];
#pragma unroll
    for (int i = 0; i < kTM; ++i)
#pragma unroll
        for (int j = 0; j < kTN; ++j)
            acc[i][j] = 0.0f;
    for (int64_t k0 = kb; k0 < ke; k0 += kBK) {
        load_tiles<AT, BT>(g, b, m0, n0, k0, As, Bs);
        mla_block_sync();
        const int kn = ke - k0 < kBK ? (int)(ke - k0) : kBK;
        for (int kk = 0; kk < kn; ++kk) {
            float av[kTM], bv[kTN];
#pragma unroll
            for (int i = 0; i < kTM; ++i)
                av[i] = As[kk][ty + i * (kBM / kTM)];
#pragma unroll
            for (int j = 0; j < kTN; ++j)
                bv[j] = Bs[kk][tx + j * (kBN / kTN)];
#pragma unroll
            for (int i = 0; i < kTM; ++i)
#pragma unroll
                for (int j = 0; j < kTN; ++j)
                    acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
        }
        mla_block_sync();
    }
#pragma unroll
    for (int i = 0; i < kTM; ++i) {
        const int64_t m = m0 + ty + i * (kBM / kTM);
#pragma unroll
        for (int j = 0; j < kTN; ++j) {
            const int64_t n = n0 + tx + j * (kBN / kTN);
            if (m < g.M && n < g.N)
                put_out(g, split * g.batch + b, m, n, acc[i][j]);
        }
    }
}

template <int AT, int BT>
__global__ __launch_bounds__(MLA_HIP_BLOCK) void gemm_fma_kernel(gemm_desc g)
{
    const int64_t tiles = g.batch * g.tiles_m * g.tiles_n;
    for (int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
        int64_t b, mn, tm, tn;
        divmod64(tile, g.tiles_m * g.tiles_n, b, mn);
        divmod64(mn, g.tiles_n, tm, tn);
        fma_tile<AT, BT>(g, b, tm * kBM, tn * kBN, 0, g.K, 0);
    }
}

/* ===================================================== shared pieces */

/* bf16 bits of every code of the fp8 dtype BT (exact: e4m3 values are bf16
 * values; NaN codes give a bf16 NaN), one entry per thread. */
template <int BT> MLA_GM_DEV void fill_lut(uint16_t *lut)
{
    if constexpr (BT != MLA_DTYPE_BF16) {
        const uint8_t code = (uint8_t)threadIdx.x;
        lut[threadIdx.x] = mla_fb_f32_to_bf16(load_value<BT>(&code, 0));
    }
}
static_assert(MLA_HIP_BLOCK == 256, "one table entry per thread");

/* Two bf16 (low half: the lower k) from two 16-bit raw values: bf16 bits,
 * or fp8 codes through the table. */
template <int BT> MLA_GM_DEV uint32_t pair_bf16(uint32_t lo, uint32_t hi, const uint16_t *lut)
{
    if constexpr (BT == MLA_DTYPE_BF16)
        return (lo & 0xFFFFu) | (hi << 16);
    else
        return (uint32_t)lut[lo & 0xFFu] | ((uint32_t)lut[hi & 0xFFu] << 16);
}

/* Element off of a 16-bit or 8-bit operand as its raw bits. */
template <int DT> MLA_GM_DEV uint32_t raw_at(const void *base, int64_t off)
{
    if constexpr (DT == MLA_DTYPE_BF16)
        return static_cast<const uint16_t *>(base)[off];
    else
        return static_cast<const uint8_t *>(base)[off];
}

/* alpha v rounded once to C's dtype. */
MLA_GM_DEV void store_out(const gemm_desc &g, int64_t off, float v)
{
    if (g.cdt == MLA_DTYPE_F32)
        store_value<MLA_DTYPE_F32>(g.c, off, g.alpha * v, 1);
    else
        store_value<MLA_DTYPE_BF16>(g.c, off, g.alpha * v, 1);
}

/* ====================================================== matrix tiles */

constexpr int kMM = 128, kMN = 128, kMK = 32; /* block tile, K step */
constexpr int kRowW = kMK / 2 + 4;            /* words per staged row: 16 + 4 pad (80 bytes) */

/* Staged bf16 tiles of one K step: rows of A (m) and of B (n), k along the
 * row; two buffers. */
struct alignas(16) mt_smem {
    uint32_t a[2][kMM][kRowW];
    uint32_t b[2][kMN][kRowW];
    uint16_t lut[256];
};

/* One operand of a tile: rows r (m of A, n of B), k. */
struct mt_operand {
    const void *p;
    int64_t s_row, s_k, rows;
};

/* A thread's share of one operand's K step: 16 raw 16-bit values (bf16
 * bits or fp8 codes), or for a wide fp8 load 16 codes in words 0-3. */
struct mt_regs {
    uint32_t w[8];
};

/* The first n (< 16 bytes' worth) values of a run from element off on,
 * element step st, packed little-endian into w[0..3] (the rest 0): a rolled
 * loop over two 64-bit shift registers (an unrolled one keeps every
 * address live; AMD spilled scalar registers). */
template <int DT>
MLA_GM_DEV void tail16(const void *base, int64_t off, int64_t st, int64_t n, uint32_t *w)
{
    constexpr int bits = DT == MLA_DTYPE_BF16 ? 16 : 8;
    uint64_t lo = 0, hi = 0;
#pragma unroll 1
    for (int e = 0; e < n && e * bits < 128; ++e) {
        const uint64_t v = raw_at<DT>(base, off + e * st);
        const int sh = e * bits;
        lo |= sh < 64 ? v << sh : 0;
        hi |= sh < 64 ? 0 : v << (sh - 64);
    }
    w[0] = (uint32_t)lo, w[1] = (uint32_t)(lo >> 32), w[2] = (uint32_t)hi,
    w[3] = (uint32_t)(hi >> 32);
}

/* Loads this thread's share of rows [r0, r0 + 128) x k [k0, k0 + 32) of o.
 * VK: 16 bytes of consecutive k per load; VR: 16 bytes of consecutive rows
 * (one k); else one value per load, the unit-stride index across threads. */
template <int DT>
MLA_GM_DEV void mt_fetch(const mt_operand &o, int64_t K, int64_t r0, int64_t k0, bool vk, bool vr,
                         bool kfast, mt_regs &x)
{
    constexpr int E = DT == MLA_DTYPE_BF16 ? 8 : 16; /* values per 16 bytes */
    const int tid = (int)threadIdx.x;
#pragma unroll
    for (int j = 0; j < 8; ++j)
        x.w[j] = 0;
    if (vk) {
#pragma unroll
        for (int p = 0; p < 16 / E; ++p) {
            const int idx = tid + MLA_HIP_BLOCK * p, r = idx / (kMK / E),
                      kq = (idx % (kMK / E)) * E;
            const int64_t row = r0 + r, k = k0 + kq;
            if (row >= o.rows)
                continue;
            if (k + E <= K) {
                const mla_u32x4 q = *reinterpret_cast<const mla_u32x4 *>(
                    static_cast<const uint8_t *>(o.p) + (row * o.s_row + k) * (16 / E));
#pragma unroll
                for (int j = 0; j < 4; ++j)
                    x.w[4 * p + j] = q.v[j];
            } else {
                tail16<DT>(o.p, row * o.s_row + k, 1, K - k, &x.w[4 * p]);
            }
        }
    } else if (vr) {
#pragma unroll
        for (int p = 0; p < 16 / E; ++p) {
            const int idx = tid + MLA_HIP_BLOCK * p, k = idx / (kMM / E),
                      rq = (idx % (kMM / E)) * E;
            const int64_t row = r0 + rq, kk = k0 + k;
            if (kk >= K)
                continue;
            if (row + E <= o.rows) {
                const mla_u32x4 q = *reinterpret_cast<const mla_u32x4 *>(
                    static_cast<const uint8_t *>(o.p) + (row + kk * o.s_k) * (16 / E));
#pragma unroll
                for (int j = 0; j < 4; ++j)
                    x.w[4 * p + j] = q.v[j];
            } else {
                tail16<DT>(o.p, row + kk * o.s_k, 1, o.rows - row, &x.w[4 * p]);
            }
        }
    } else {
        /* Value j: row tid / 32 + 8 j, k tid % 32 (kfast), else row
         * tid % 128, k tid / 128 + 2 j: one uniform step between values. */
        const int64_t row = r0 + (kfast ? tid / kMK : tid % kMM);
        const int64_t kk = k0 + (kfast ? tid % kMK : tid / kMM);
        const int64_t st = kfast ? 8 * o.s_row : 2 * o.s_k;
        int64_t off = row * o.s_row + kk * o.s_k;
#pragma unroll
        for (int j = 0; j < 16; ++j, off += st) {
            const bool in = kfast ? row + 8 * j < o.rows && kk < K : row < o.rows && kk + 2 * j < K;
            if (in)
                x.w[j / 2] |= raw_at<DT>(o.p, off) << (16 * (j % 2));
        }
    }
}

/* Writes a thread's share (mt_fetch's layout) into a staged tile as bf16. */
template <int DT>
MLA_GM_DEV void mt_stash(const mt_regs &x, bool vk, bool vr, bool kfast, uint32_t (*s)[kRowW],
                         const uint16_t *lut)
{
    constexpr int E = DT == MLA_DTYPE_BF16 ? 8 : 16;
    const int tid = (int)threadIdx.x;
    if (vk) {
#pragma unroll
        for (int p = 0; p < 16 / E; ++p) {
            const int idx = tid + MLA_HIP_BLOCK * p, r = idx / (kMK / E),
                      kq = (idx % (kMK / E)) * E;
            uint32_t *d = &s[r][kq / 2];
            if constexpr (DT == MLA_DTYPE_BF16) {
                mla_u32x4 q;
#pragma unroll
                for (int j = 0; j < 4; ++j)
                    q.v[j] = x.w[4 * p + j];
                *reinterpret_cast<mla_u32x4 *>(d) = q;
            } else {
#pragma unroll
                for (int h = 0; h < 2; ++h) {
                    mla_u32x4 q;
#pragma unroll
                    for (int j = 0; j < 4; ++j) {
                        const uint32_t c = x.w[2 * h + j / 2] >> (16 * (j % 2));
                        q.v[j] = pair_bf16<DT>(c, c >> 8, lut);
                    }
                    *reinterpret_cast<mla_u32x4 *>(d + 4 * h) = q;
                }
            }
        }
    } else if (vr) {
#pragma unroll
        for (int p = 0; p < 16 / E; ++p) {
            const int idx = tid + MLA_HIP_BLOCK * p, k = idx / (kMM / E),
                      rq = (idx % (kMM / E)) * E;
#pragma unroll
            for (int e = 0; e < E; ++e) {
                const int bits = DT == MLA_DTYPE_BF16 ? 16 : 8;
                const uint32_t v =
                    (x.w[4 * p + e * bits / 32] >> (e * bits % 32)) & ((1u << bits) - 1u);
                const uint16_t h = (uint16_t)(pair_bf16<DT>(v, 0, lut) & 0xFFFFu);
                reinterpret_cast<uint16_t *>(s[rq + e])[k] = h;
            }
        }
    } else {
#pragma unroll
        for (int j = 0; j < 16; ++j) {
            const int e = tid + MLA_HIP_BLOCK * j;
            const int r = kfast ? e / kMK : e % kMM, k = kfast ? e % kMK : e / kMM;
            const uint32_t v = (x.w[j / 2] >> (16 * (j % 2))) & 0xFFFFu;
            reinterpret_cast<uint16_t *>(s[r])[k] = (uint16_t)(pair_bf16<DT>(v, 0, lut) & 0xFFFFu);
        }
    }
}

#if defined(MLA_GEMM_NV)
/* 8 warps as 2 (m) x 4 (n), 64 x 32 each: 4 m16 x 4 n8 mma tiles. */
struct mt_acc {
    float v[4][4][4];
};

MLA_GM_DEV void mt_zero(mt_acc &a)
{
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int q = 0; q < 4; ++q)
                a.v[i][j][q] = 0.0f;
}

/* B fragments of the warp's 4 n8 tiles at word kw (k 2 kw ..): two
 * ldmatrix x4, each two n tiles x two k halves. pb: this lane's row
 * address (mt_compute). */
MLA_GM_DEV void mt_frag_b(const uint32_t *pb, int kw, uint32_t b[4][2])
{
#pragma unroll
    for (int jj = 0; jj < 2; ++jj) {
        uint32_t r[4];
        mla_ldsm_x4(r, pb + 16 * jj * kRowW + kw);
        b[2 * jj][0] = r[0], b[2 * jj][1] = r[1], b[2 * jj + 1][0] = r[2], b[2 * jj + 1][1] = r[3];
    }
}

/* acc += A B over the staged K step; SC: acc += s (A B), the step's sum
 * formed first (half of the m tiles at a time: fewer live registers).
 * Fragments by ldmatrix x4 (mfma.h's layout: with lane l giving row l % 8 of
 * matrix l / 8, A's matrices are rows +0 / +8 x k +0 / +8, i.e. a[0..3]
 * of the mma; B's are k +0 / +8 of n tile j, then of tile j + 1): a quarter
 * of the shared-memory instructions of 32-bit loads. Without SC the B
 * fragments of a k half serve all 4 m tiles. */
template <bool SC>
MLA_GM_DEV void mt_compute(mt_acc &acc, float s, const uint32_t (*sa)[kRowW],
                           const uint32_t (*sb)[kRowW])
{
    const int lane = (int)threadIdx.x % 32, warp = (int)threadIdx.x / 32;
    const int wm = warp / 4, wn = warp % 4, li = lane % 8, lj = lane / 8;
    const uint32_t *pa = &sa[wm * 64 + li + 8 * (lj % 2)][4 * (lj / 2)];
    const uint32_t *pb = &sb[wn * 32 + li + 8 * (lj / 2)][4 * (lj % 2)];
    if constexpr (!SC) {
#pragma unroll
        for (int kw = 0; kw < kMK / 2; kw += 8) {
            uint32_t b[4][2];
            mt_frag_b(pb, kw, b);
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                uint32_t a[4];
                mla_ldsm_x4(a, pa + 16 * i * kRowW + kw);
#pragma unroll
                for (int j = 0; j < 4; ++j)
                    mla_mma_bf16_16x8x16(acc.v[i][j], a, b[j]);
            }
        }
    } else {
#pragma unroll
        for (int hf = 0; hf < 2; ++hf) {
            float part[2][4][4];
#pragma unroll
            for (int ii = 0; ii < 2; ++ii)
#pragma unroll
                for (int j = 0; j < 4; ++j)
#pragma unroll
                    for (int q = 0; q < 4; ++q)
                        part[ii][j][q] = 0.0f;
#pragma unroll
            for (int kw = 0; kw < kMK / 2; kw += 8) {
                uint32_t b[4][2];
                mt_frag_b(pb, kw, b);
#pragma unroll
                for (int ii = 0; ii < 2; ++ii) {
                    uint32_t a[4];
                    mla_ldsm_x4(a, pa + 16 * (2 * hf + ii) * kRowW + kw);
#pragma unroll
                    for (int j = 0; j < 4; ++j)
                        mla_mma_bf16_16x8x16(part[ii][j], a, b[j]);
                }
            }
#pragma unroll
            for (int ii = 0; ii < 2; ++ii)
#pragma unroll
                for (int j = 0; j < 4; ++j)
#pragma unroll
                    for (int q = 0; q < 4; ++q)
                        acc.v[2 * hf + ii][j][q] =
                            fmaf(s, part[ii][j][q], acc.v[2 * hf + ii][j][q]);
        }
    }
}

MLA_GM_DEV void mt_store(const gemm_desc &g, int64_t sb, int64_t m0, int64_t n0, const mt_acc &acc)
{
    const int lane = (int)threadIdx.x % 32, warp = (int)threadIdx.x / 32;
    const int gg = lane / 4, t = lane % 4, wm = warp / 4, wn = warp % 4;
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
#pragma unroll
            for (int q = 0; q < 4; ++q) {
                const int64_t m = m0 + wm * 64 + 16 * i + gg + 8 * (q / 2);
                const int64_t n = n0 + wn * 32 + 8 * j + 2 * t + q % 2;
                if (m < g.M && n < g.N)
                    put_out(g, sb, m, n, acc.v[i][j][q]);
            }
}
#elif defined(MLA_GEMM_AMD)
/* 4 waves as 2 (m) x 2 (n), 64 x 64 each: 2 x 2 MFMA 32x32 tiles. Lane
 * (i, h) reads 16 bytes, k 16 c + 8 h .. + 7 of its row, per 16-k chunk c:
 * MFMA step s of the chunk takes values 4 s .. 4 s + 3 of them, for A and B
 * alike (a k permutation inside the chunk). */
struct mt_acc {
    mla_f32x16 v[2][2];
};

MLA_GM_DEV void mt_zero(mt_acc &a)
{
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j)
#pragma unroll
            for (int r = 0; r < 16; ++r)
                a.v[i][j][r] = 0.0f;
}

/* As NVIDIA's: acc += A B, or (SC) acc += s (A B), one m tile at a time. */
template <bool SC>
MLA_GM_DEV void mt_compute(mt_acc &acc, float s, const uint32_t (*sa)[kRowW],
                           const uint32_t (*sb)[kRowW])
{
    const int lane = (int)threadIdx.x % 64, wave = (int)threadIdx.x / 64;
    const int i = lane % 32, h = lane / 32, wm = wave / 2, wn = wave % 2;
#pragma unroll
    for (int ti = 0; ti < 2; ++ti) {
        mla_f32x16 part[2];
#pragma unroll
        for (int tj = 0; tj < 2; ++tj)
#pragma unroll
            for (int r = 0; r < 16; ++r)
                part[tj][r] = 0.0f;
#pragma unroll
        for (int c = 0; c < kMK / 16; ++c) {
            const mla_u32x4 a =
                *reinterpret_cast<const mla_u32x4 *>(&sa[wm * 64 + 32 * ti + i][8 * c + 4 * h]);
            mla_u32x4 b[2];
#pragma unroll
            for (int tj = 0; tj < 2; ++tj)
                b[tj] =
                    *reinterpret_cast<const mla_u32x4 *>(&sb[wn * 64 + 32 * tj + i][8 * c + 4 * h]);
#pragma unroll
            for (int st = 0; st < 2; ++st)
#pragma unroll
                for (int tj = 0; tj < 2; ++tj) {
                    mla_f32x16 &d = SC ? part[tj] : acc.v[ti][tj];
                    d = mla_mfma_bf16_32x32x8(a.v[2 * st], a.v[2 * st + 1], b[tj].v[2 * st],
                                              b[tj].v[2 * st + 1], d);
                }
        }
        if (SC) {
#pragma unroll
            for (int tj = 0; tj < 2; ++tj)
#pragma unroll
                for (int r = 0; r < 16; ++r)
                    acc.v[ti][tj][r] = fmaf(s, part[tj][r], acc.v[ti][tj][r]);
        }
    }
}

MLA_GM_DEV void mt_store(const gemm_desc &g, int64_t sb, int64_t m0, int64_t n0, const mt_acc &acc)
{
    const int lane = (int)threadIdx.x % 64, wave = (int)threadIdx.x / 64;
    const int i = lane % 32, h = lane / 32, wm = wave / 2, wn = wave % 2;
#pragma unroll
    for (int ti = 0; ti < 2; ++ti)
#pragma unroll
        for (int tj = 0; tj < 2; ++tj)
#pragma unroll
            for (int r = 0; r < 16; ++r) {
                const int64_t m = m0 + wm * 64 + 32 * ti + 8 * (r / 4) + 4 * h + r % 4;
                const int64_t n = n0 + wn * 64 + 32 * tj + i;
                if (m < g.M && n < g.N)
                    put_out(g, sb, m, n, acc.v[ti][tj][r]);
            }
}
#endif

/* Operand access of a matrix kernel, fixed at compile time (fewer live
 * registers): linear's layouts (A and B with k unit-stride: 16-byte loads),
 * the absorb's (B with n unit-stride), and kModeAny: one load per value for
 * both operands, any strides. */
enum { kModeKK = 0, kModeKN = 1, kModeAny = 2 };

/* Resident blocks per multiprocessor that the split rule (tile_splits)
 * counts on. sm_90: two for linear's layout (kModeKK) and the bf16 absorb
 * (kModeKN), with at most 128 registers per thread (the launch bounds) and
 * 2 x 41.5 KB of shared memory; the others need more registers and get one.
 * gfx9: one (gfx942's 64 KB of LDS per CU holds one block's 41.5 KB). */
#if defined(__CUDACC__)
template <int BT, int MODE>
constexpr int kTileBlocksPerUnit = MODE == kModeKK || (MODE == kModeKN && BT == MLA_DTYPE_BF16) ? 2
                                                                                                : 1;
#else
template <int BT, int MODE> constexpr int kTileBlocksPerUnit = 1;
#endif

/* One block per 128 x 128 tile of C and K split (m tiles fastest: the
 * blocks that run together share B's tile, so the weights come from memory
 * about once). Split s takes the K steps [s cps, (s + 1) cps) (cps:
 * g.chunks_per_split, whole steps, so every step still lies inside one
 * 128-wide scale block) and, with several splits, writes its fp32 sums to
 * the partials that gemm_split_reduce adds. */
template <int BT, int MODE>
__global__
MLA_LAUNCH_BOUNDS_BLOCKS(MLA_HIP_BLOCK,
                         (kTileBlocksPerUnit<BT, MODE>)) void gemm_matrix_kernel(gemm_desc g)
{
    const int64_t tm_count = (g.M + kMM - 1) / kMM, tn_count = (g.N + kMN - 1) / kMN;
    int64_t rest, tm, sb, tn, split, b; /* sb = split * batch + b */
    divmod64((int64_t)blockIdx.x, tm_count, rest, tm);
    divmod64(rest, tn_count, sb, tn);
    divmod64(sb, g.batch, split, b);
    const int64_t m0 = tm * kMM, n0 = tn * kMN;
    const int64_t steps = (g.K + kMK - 1) / kMK, st0 = split * g.chunks_per_split;
    const int64_t st1 = st0 + g.chunks_per_split < steps ? st0 + g.chunks_per_split : steps;
#if defined(MLA_GEMM_NV) || defined(MLA_GEMM_AMD)
    __shared__ mt_smem sm;
    fill_lut<BT>(sm.lut);
    const mt_operand oa = {static_cast<const uint16_t *>(g.a) + b * g.as_b, g.as_m, g.as_k, g.M};
    const mt_operand ob = {static_cast<const uint8_t *>(g.b) +
                               b * g.bs_b * (int64_t)(BT == MLA_DTYPE_BF16 ? 2 : 1),
                           g.bs_n, g.bs_k, g.N};
    const bool avk = MODE != kModeAny, bvk = MODE == kModeKK, bvn = MODE == kModeKN;
    mt_acc acc;
    mt_zero(acc);
    mt_regs ra, rb;
    mla_block_sync(); /* the table */
    /* Linear's fp8 block scales: row n0 / 128 of the scales (a K step lies
     * inside one 128-wide scale block). */
    constexpr bool scaled = BT != MLA_DTYPE_BF16;
    const float *srow = scaled && g.bscale ? g.bscale + (n0 / kBlockScale) * g.sc_n : nullptr;
    /* The split's k range [kb, ke), whole steps (the last may pass K); 32-bit
     * (the host keeps K below 2^31 here: fewer registers in the loop). */
    const int32_t kb = (int32_t)(st0 * kMK), ke = (int32_t)(st1 * kMK);
    if (kb < ke) {
        mt_fetch<MLA_DTYPE_BF16>(oa, g.K, m0, kb, avk, false, g.a_kfast, ra);
        mt_fetch<BT>(ob, g.K, n0, kb, bvk, bvn, g.b_kfast, rb);
        mt_stash<MLA_DTYPE_BF16>(ra, avk, false, g.a_kfast, sm.a[0], sm.lut);
        mt_stash<BT>(rb, bvk, bvn, g.b_kfast, sm.b[0], sm.lut);
    }
    mla_block_sync();
    int cur = 0;
    for (int32_t k0 = kb; k0 < ke; k0 += kMK, cur ^= 1) {
        const bool next = k0 + kMK < ke;
        const float sc = srow ? srow[(k0 / kBlockScale) * g.sc_k] : 1.0f;
        if (next) {
            mt_fetch<MLA_DTYPE_BF16>(oa, g.K, m0, k0 + kMK, avk, false, g.a_kfast, ra);
            mt_fetch<BT>(ob, g.K, n0, k0 + kMK, bvk, bvn, g.b_kfast, rb);
        }
        /* The fp8 block scale multiplies each step's sum. */
        if (scaled && srow)
            mt_compute<true>(acc, sc, sm.a[cur], sm.b[cur]);
        else
            mt_compute<false>(acc, 1.0f, sm.a[cur], sm.b[cur]);
        if (next) {
            mt_stash<MLA_DTYPE_BF16>(ra, avk, false, g.a_kfast, sm.a[cur ^ 1], sm.lut);
            mt_stash<BT>(rb, bvk, bvn, g.b_kfast, sm.b[cur ^ 1], sm.lut);
        }
        mla_block_sync();
    }
    mt_store(g, sb, m0, n0, acc);
#else
    /* No matrix unit on this target: the FMA tiles over the split's range. */
    const int64_t kend = st1 * kMK < g.K ? st1 * kMK : g.K;
    for (int q = 0; q < (kMM / kBM) * (kMN / kBN); ++q)
        fma_tile<MLA_DTYPE_BF16, BT>(g, b, m0 + (q / (kMN / kBN)) * kBM,
                                     n0 + (q % (kMN / kBN)) * kBN, st0 * kMK, kend, split);
#endif
}

#if defined(__CUDACC__)
/* The sm_90a body (hip/gemm_wgmma.h): one block per 128 x 128 tile of C, m
 * tiles fastest as above, all of K. A device pass without wgmma compiles a
 * marker instead (static shared memory, which the host reads through
 * cudaFuncGetAttributes before it takes this body). */
__global__ __launch_bounds__(kGwThreads, 2) void gemm_wg_kernel(gemm_desc g)
{
#if MLA_GEMM_WG
    MLA_IDX_SMEM(unsigned char, smem);
    int64_t rest, tm, tn, b;
    divmod64((int64_t)blockIdx.x, (g.M + kGwM - 1) / kGwM, rest, tm);
    divmod64(rest, (g.N + kGwN - 1) / kGwN, b, tn);
    gw_tile(g, b, tm * kGwM, tn * kGwN, smem);
#else
    __shared__ int mla_gw_absent[1];
    *static_cast<volatile int *>(mla_gw_absent) = (int)g.M;
#endif
}
#endif

/* ========================================================== small M */

/* A block owns kSRows rows of W and a K range; K goes in chunks of 16 bytes
 * of W per lane per row (s_vals values), kSLanes lanes per row side by side. */
constexpr int kSRows = 64;
#if defined(__CUDACC__)
constexpr int kSLanes = 4;                   /* t of the mma layout */
[[maybe_unused]] constexpr int kSUnroll = 2; /* chunks in flight per warp */
#else
constexpr int kSLanes = 2; /* h of the MFMA layout */
[[maybe_unused]] constexpr int kSUnroll = 4;
#endif
constexpr int kSMaxM = 16; /* the path's largest M */
template <int BT> constexpr int kSVals = BT == MLA_DTYPE_BF16 ? 8 : 16;
template <int BT> constexpr int kSChunk = kSLanes *kSVals<BT>;

/* 16 bytes of W row n from k on (values past K or rows past N: 0). */
template <int BT> MLA_GM_DEV void s_fetch_w(const gemm_desc &g, int64_t n, int64_t k, uint32_t r[4])
{
    constexpr int E = kSVals<BT>, bits = 128 / E;
#pragma unroll
    for (int j = 0; j < 4; ++j)
        r[j] = 0;
    if (n >= g.N)
        return;
    if ((g.vec & kBVecK) && k + E <= g.K) {
        const mla_u32x4 q = *reinterpret_cast<const mla_u32x4 *>(static_cast<const uint8_t *>(g.b) +
                                                                 (n * g.bs_n + k) * (16 / E));
#pragma unroll
        for (int j = 0; j < 4; ++j)
            r[j] = q.v[j];
        return;
    }
#pragma unroll
    for (int e = 0; e < E; ++e)
        if (k + e < g.K)
            r[e * bits / 32] |= raw_at<BT>(g.b, n * g.bs_n + (k + e) * g.bs_k) << (e * bits % 32);
}

/* 8 bf16 of x row m from k on (past K or M: 0). */
MLA_GM_DEV void s_fetch_x(const gemm_desc &g, int64_t m, int64_t k, uint32_t r[4])
{
#pragma unroll
    for (int j = 0; j < 4; ++j)
        r[j] = 0;
    if (m >= g.M)
        return;
    if ((g.vec & kAVecK) && k + 8 <= g.K) {
        const mla_u32x4 q = *reinterpret_cast<const mla_u32x4 *>(
            static_cast<const uint16_t *>(g.a) + m * g.as_m + k);
#pragma unroll
        for (int j = 0; j < 4; ++j)
            r[j] = q.v[j];
        return;
    }
#pragma unroll
    for (int e = 0; e < 8; ++e)
        if (k + e < g.K)
            r[e / 2] |= raw_at<MLA_DTYPE_BF16>(g.a, m * g.as_m + (k + e) * g.as_k)
                        << (16 * (e % 2));
}

/* bf16 pair q (values 2q, 2q + 1) of a lane's 16 raw bytes of W. */
template <int BT> MLA_GM_DEV uint32_t s_pair(const uint32_t r[4], int q, const uint16_t *lut)
{
    if constexpr (BT == MLA_DTYPE_BF16) {
        return r[q];
    } else {
        const uint32_t c = r[q / 2] >> (16 * (q % 2));
        return pair_bf16<BT>(c, c >> 8, lut);
    }
}

/* The block's sum for W row n, x row m: to y (one split) or to the split's
 * partial sums. */
MLA_GM_DEV void s_emit(const gemm_desc &g, int64_t split, int64_t n, int64_t m, float v)
{
    if (n < g.N && m < g.M)
        put_out(g, split, m, n, v); /* batch 1 */
}

template <int BT> MLA_GM_DEV float s_scale(const gemm_desc &g, int64_t n0, int64_t k)
{
    return g.bscale[(n0 / kBlockScale) * g.sc_n + (k / kBlockScale) * g.sc_k];
}

/* Block (row group, split): rows n0 .. n0 + 63 of W, chunks [c0, c1). */
template <int BT> __global__ __launch_bounds__(MLA_HIP_BLOCK) void gemm_small_kernel(gemm_desc g)
{
    constexpr int KC = kSChunk<BT>, E = kSVals<BT>;
    const int64_t groups = (g.N + kSRows - 1) / kSRows;
    int64_t split, rg;
    divmod64((int64_t)blockIdx.x, groups, split, rg);
    const int64_t n0 = rg * kSRows, nch = (g.K + KC - 1) / KC;
    const int64_t c0 = split * g.chunks_per_split;
    const int64_t c1 = c0 + g.chunks_per_split < nch ? c0 + g.chunks_per_split : nch;
#if defined(MLA_GEMM_NV) || defined(MLA_GEMM_AMD)
    constexpr int W = MLA_WAVE_SIZE, NW = MLA_HIP_BLOCK / W;
    __shared__ float red[NW][32][W];
    __shared__ uint16_t lut[256];
    fill_lut<BT>(lut);
    mla_block_sync();
    const int lane = (int)threadIdx.x % W, warp = (int)threadIdx.x / W;
#if defined(MLA_GEMM_NV)
    /* Warp: 4 m16 tiles of W rows x 2 n8 tiles of x rows. Lane (g, t) loads
     * rows 16 rt + g (+ 8) at k = c KC + E t; mma step s of the chunk takes
     * its pair words 2 s, 2 s + 1 (a k permutation shared by A and B). */
    const int gq = lane / 4, t = lane % 4;
    float acc[4][2][4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j)
#pragma unroll
            for (int q = 0; q < 4; ++q)
                acc[i][j][q] = 0.0f;
    for (int64_t cb = c0 + warp; cb < c1; cb += NW * kSUnroll) {
        uint32_t wr[kSUnroll][4][2][4], xr[kSUnroll][2][E / 8][4];
#pragma unroll
        for (int u = 0; u < kSUnroll; ++u) {
            const int64_t c = cb + NW * u, k = c * KC + E * t;
#pragma unroll
            for (int rt = 0; rt < 4; ++rt)
#pragma unroll
                for (int hr = 0; hr < 2; ++hr)
                    s_fetch_w<BT>(g, c < c1 ? n0 + 16 * rt + 8 * hr + gq : g.N, k, wr[u][rt][hr]);
#pragma unroll
            for (int j = 0; j < 2; ++j)
#pragma unroll
                for (int hx = 0; hx < E / 8; ++hx)
                    s_fetch_x(g, c < c1 ? 8 * j + gq : g.M, k + 8 * hx, xr[u][j][hx]);
        }
#pragma unroll
        for (int u = 0; u < kSUnroll; ++u) {
            const int64_t c = cb + NW * u;
            if (c >= c1)
                break;
            float part[4][2][4];
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 2; ++j)
#pragma unroll
                    for (int q = 0; q < 4; ++q)
                        part[i][j][q] = 0.0f;
#pragma unroll
            for (int s = 0; s < E / 4; ++s) {
                uint32_t b[2][2];
#pragma unroll
                for (int j = 0; j < 2; ++j) {
                    b[j][0] = xr[u][j][(2 * s) / 4][(2 * s) % 4];
                    b[j][1] = xr[u][j][(2 * s + 1) / 4][(2 * s + 1) % 4];
                }
#pragma unroll
                for (int rt = 0; rt < 4; ++rt) {
                    const uint32_t a[4] = {s_pair<BT>(wr[u][rt][0], 2 * s, lut),
                                           s_pair<BT>(wr[u][rt][1], 2 * s, lut),
                                           s_pair<BT>(wr[u][rt][0], 2 * s + 1, lut),
                                           s_pair<BT>(wr[u][rt][1], 2 * s + 1, lut)};
                    mla_mma_bf16_16x8x16(part[rt][0], a, b[0]);
                    if (g.M > 8)
                        mla_mma_bf16_16x8x16(part[rt][1], a, b[1]);
                }
            }
            const float sc = g.bscale ? s_scale<BT>(g, n0, c * KC) : 1.0f;
#pragma unroll
            for (int i = 0; i < 4; ++i)
#pragma unroll
                for (int j = 0; j < 2; ++j)
#pragma unroll
                    for (int q = 0; q < 4; ++q)
                        acc[i][j][q] = g.bscale ? fmaf(sc, part[i][j][q], acc[i][j][q])
                                                : acc[i][j][q] + part[i][j][q];
        }
    }
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j)
#pragma unroll
            for (int q = 0; q < 4; ++q)
                red[warp][(i * 2 + j) * 4 + q][lane] = acc[i][j][q];
#else
    /* Wave: 2 MFMA tiles of 32 W rows; x rows are the 32 columns (M <= 16
     * of them used). Lane (i, h) loads row 32 rt + i at k = c KC + E h;
     * MFMA step s takes its pair words 2 s, 2 s + 1. */
    const int i = lane % 32, h = lane / 32;
    mla_f32x16 acc[2];
#pragma unroll
    for (int rt = 0; rt < 2; ++rt)
#pragma unroll
        for (int r = 0; r < 16; ++r)
            acc[rt][r] = 0.0f;
    for (int64_t cb = c0 + warp; cb < c1; cb += NW * kSUnroll) {
        uint32_t wr[kSUnroll][2][4], xr[kSUnroll][E / 8][4];
#pragma unroll
        for (int u = 0; u < kSUnroll; ++u) {
            const int64_t c = cb + NW * u, k = c * KC + E * h;
#pragma unroll
            for (int rt = 0; rt < 2; ++rt)
                s_fetch_w<BT>(g, c < c1 ? n0 + 32 * rt + i : g.N, k, wr[u][rt]);
#pragma unroll
            for (int hx = 0; hx < E / 8; ++hx)
                s_fetch_x(g, c < c1 ? i : g.M, k + 8 * hx, xr[u][hx]);
        }
#pragma unroll
        for (int u = 0; u < kSUnroll; ++u) {
            const int64_t c = cb + NW * u;
            if (c >= c1)
                break;
            mla_f32x16 part[2];
#pragma unroll
            for (int rt = 0; rt < 2; ++rt)
#pragma unroll
                for (int r = 0; r < 16; ++r)
                    part[rt][r] = 0.0f;
#pragma unroll
            for (int s = 0; s < E / 4; ++s) {
                const uint32_t b0 = xr[u][(2 * s) / 4][(2 * s) % 4];
                const uint32_t b1 = xr[u][(2 * s + 1) / 4][(2 * s + 1) % 4];
#pragma unroll
                for (int rt = 0; rt < 2; ++rt)
                    part[rt] = mla_mfma_bf16_32x32x8(s_pair<BT>(wr[u][rt], 2 * s, lut),
                                                     s_pair<BT>(wr[u][rt], 2 * s + 1, lut), b0, b1,
                                                     part[rt]);
            }
            const float sc = g.bscale ? s_scale<BT>(g, n0, c * KC) : 1.0f;
#pragma unroll
            for (int rt = 0; rt < 2; ++rt)
#pragma unroll
                for (int r = 0; r < 16; ++r)
                    acc[rt][r] =
                        g.bscale ? fmaf(sc, part[rt][r], acc[rt][r]) : acc[rt][r] + part[rt][r];
        }
    }
#pragma unroll
    for (int rt = 0; rt < 2; ++rt)
#pragma unroll
        for (int r = 0; r < 16; ++r)
            red[warp][rt * 16 + r][lane] = acc[rt][r];
#endif
    mla_block_sync();
    /* The warps' sums in warp order; value v of lane l is one (row, m). */
#pragma unroll
    for (int p = 0; p < 32 * W / MLA_HIP_BLOCK; ++p) {
        const int it = (int)threadIdx.x + MLA_HIP_BLOCK * p, v = it / W, l = it % W;
        float sum = red[0][v][l];
#pragma unroll
        for (int w = 1; w < NW; ++w)
            sum += red[w][v][l];
#if defined(MLA_GEMM_NV)
        const int rt = v / 8, j = (v / 4) % 2, q = v % 4;
        const int64_t n = n0 + 16 * rt + l / 4 + 8 * (q / 2), m = 8 * j + 2 * (l % 4) + q % 2;
#else
        const int rt = v / 16, r = v % 16;
        const int64_t n = n0 + 32 * rt + 8 * (r / 4) + 4 * (l / 32) + r % 4, m = l % 32;
#endif
        s_emit(g, split, n, m, sum);
    }
#else
    /* No matrix unit on this target: one fmaf chain per output over the
     * block's K range (W dequantized as fl(code * block scale)). */
    const int64_t k0 = c0 * KC, k1 = c1 * KC < g.K ? c1 * KC : g.K;
    for (int p = 0; p < kSRows * kSMaxM / MLA_HIP_BLOCK; ++p) {
        const int it = (int)threadIdx.x + MLA_HIP_BLOCK * p;
        const int64_t n = n0 + it % kSRows, m = it / kSRows;
        if (n >= g.N || m >= g.M)
            continue;
        float sum = 0.0f;
        for (int64_t k = k0; k < k1; ++k)
            sum = fmaf(load_value<MLA_DTYPE_BF16>(g.a, m * g.as_m + k * g.as_k),
                       b_value<BT>(g, 0, k, n), sum);
        s_emit(g, split, n, m, sum);
    }
    (void)E;
#endif
}

/* y = alpha * (sum of the splits' partials [splits, batch, M, N], split 0
 * first); the partials are zeroed again (the scratch is all-zero between
 * ops). The loads go out kRedBatch at a time before any zeroing store (a
 * store between two loads would make each load wait for the one before). */
constexpr int kRedBatch = 8;

__global__ __launch_bounds__(MLA_HIP_BLOCK) void gemm_split_reduce(gemm_desc g)
{
    const int64_t items = g.batch * g.M * g.N;
    for (int64_t it = block_first_item() + threadIdx.x; it < items; it += grid_items()) {
        int64_t bm, b, m, n;
        divmod64(it, g.N, bm, n);
        divmod64(bm, g.M, b, m);
        float *p = g.partial + it;
        float sum = 0.0f;
        for (int64_t s0 = 0; s0 < g.splits; s0 += kRedBatch) {
            float v[kRedBatch];
#pragma unroll
            for (int u = 0; u < kRedBatch; ++u)
                v[u] = s0 + u < g.splits ? p[(s0 + u) * items] : 0.0f;
#pragma unroll
            for (int u = 0; u < kRedBatch; ++u)
                if (s0 + u < g.splits)
                    sum += v[u];
#pragma unroll
            for (int u = 0; u < kRedBatch; ++u)
                if (s0 + u < g.splits)
                    p[(s0 + u) * items] = 0.0f;
        }
        store_out(g, b * g.cs_b + m * g.cs_m + n * g.cs_n, sum);
    }
}

/* ============================================================== host */

enum { PATH_AUTO = 0, PATH_FMA = 1, PATH_TILE = 2, PATH_MMA = 3 };
constexpr int64_t kMaxSplits = 64;     /* K splits of one launch, either path */
constexpr int64_t kMinSplitSteps = 16; /* tile path: K steps per split, at least */

/* tuning.hip_gemm (MLA_HIP_GEMM) fma: every GEMM by the FMA kernel; tile:
 * the matrix tiles for every M (the small-M path off); mma: the mma.sync
 * tiles where the wgmma body would run. For checking one path against
 * another on a GPU. */
int path_of(const mla_context *ctx)
{
    switch (ctx->tuning.hip_gemm) {
    case MLA_TUNE_HIP_GEMM_FMA:
        return PATH_FMA;
    case MLA_TUNE_HIP_GEMM_TILE:
        return PATH_TILE;
    case MLA_TUNE_HIP_GEMM_MMA:
        return PATH_MMA;
    default:
        return PATH_AUTO;
    }
}

bool aligned16(const void *p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

/* The wide accesses the operands allow for the whole launch. */
int32_t vec_flags(const gemm_desc &g)
{
    int32_t v = 0;
    if (g.as_k == 1 && g.as_m % 8 == 0 && g.as_b % 8 == 0 && aligned16(g.a))
        v |= kAVecK;
    const int64_t per16 = g.bdt == MLA_DTYPE_BF16 ? 8 : 16;
    if (g.bs_k == 1 && g.bs_n % per16 == 0 && g.bs_b % per16 == 0 && aligned16(g.b))
        v |= kBVecK;
    else if (g.bs_n == 1 && g.bs_k % per16 == 0 && g.bs_b % per16 == 0 && aligned16(g.b))
        v |= kBVecN;
    return v;
}

static_assert(kMaxSplits == 64, "tuning.hip_gemm_splits takes 1 to 64 (core/tuning.c)");

/* The tile path's K splits: where the output tiles leave resident block
 * slots idle (q_a_proj and kv_a_proj at T <= 1024: K = 7168 in 224 steps on
 * 5-96 tiles, for 132 SMs x 2), as many splits as keep the launch within
 * one wave of resident blocks (`slots`: multiprocessors x
 * kTileBlocksPerUnit), each at least kMinSplitSteps steps of K (the partial
 * sums' round trip through memory stays small against a split's work). */
int64_t tile_splits(int64_t slots, int64_t tiles, int64_t steps)
{
    int64_t s = tiles > 0 ? slots / tiles : 1;
    const int64_t most = steps / kMinSplitSteps;
    s = s > most ? most : s;
    return s > kMaxSplits ? kMaxSplits : s < 1 ? 1 : s;
}

/* The splits' fp32 partials [splits, batch, M, N] in the context's scratch. */
mla_status split_scratch(mla_context *ctx, gemm_desc &g)
{
    void *scratch = nullptr;
    size_t bytes; /* batch M N fits (y's elements); times the splits need not */
    if (!mla_ck_bytes(g.splits, g.batch * g.M * g.N, sizeof(float), &bytes))
        return mla_fail(ctx, MLA_ERR_OVERFLOW, "y", "%lld split partials of y overflow",
                        (long long)g.splits);
    const mla_status s = mla_hip_scratch(ctx, bytes, &scratch);
    g.partial = static_cast<float *>(scratch);
    return s;
}

/* After a split launch: y from the partials. */
mla_status launch_reduce(mla_context *ctx, const gemm_desc &g, const char *what)
{
    const unsigned rb = mla_hip_grid_blocks(ctx, g.batch * g.M * g.N, MLA_HIP_BLOCK);
    gemm_split_reduce<<<rb, MLA_HIP_BLOCK, 0, mla_hip_state_of(ctx)->stream>>>(g);
    return mla_hip_check_launch(ctx, what);
}

#if defined(__CUDACC__)
/* Whether the wgmma body takes a launch of the tile path: bf16 operands
 * with k unit-stride (16-byte chunks: K a multiple of 8), one K split, and
 * a device of compute capability 9.0 whose code has the body. */
bool gw_takes(mla_context *ctx, const gemm_desc &g, int mode)
{
    if (g.bdt != MLA_DTYPE_BF16 || mode != kModeKK || g.splits != 1 || g.K % 8)
        return false;
#if MLA_IDX_EMU
    (void)ctx;
    return MLA_GEMM_WG;
#else
    const int dev = mla_hip_state_of(ctx)->device;
    int major = 0, optin = 0;
    cudaFuncAttributes fa = {};
    cudaError_t err = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev);
    if (err == cudaSuccess)
        err = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
    if (err == cudaSuccess)
        err = cudaFuncGetAttributes(&fa, gemm_wg_kernel);
    if (err != cudaSuccess) {
        (void)cudaGetLastError(); /* a query, not a failure of the call */
        return false;
    }
    return major == 9 && optin >= kGwSmem && fa.sharedSizeBytes == 0;
#endif
}

mla_status launch_wg(mla_context *ctx, const gemm_desc &g, int64_t tiles, const char *what)
{
#if !MLA_IDX_EMU
    const cudaError_t err = cudaFuncSetAttribute(
        gemm_wg_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kGwSmem);
    if (err != cudaSuccess)
        return mla_hip_fail(ctx, err, "cudaFuncSetAttribute (GEMM shared memory)");
#endif
    gemm_wg_kernel<<<(unsigned)tiles, kGwThreads, kGwSmem, mla_hip_state_of(ctx)->stream>>>(g);
    return mla_hip_check_launch(ctx, what);
}
#endif

template <int BT>
mla_status launch_matrix(mla_context *ctx, gemm_desc &g, const char *what, int path)
{
    mla_hip_state *st = mla_hip_state_of(ctx);
    hipStream_t stream = st->stream;
    const int64_t tiles = g.batch * ((g.M + kMM - 1) / kMM) * ((g.N + kMN - 1) / kMN);
    const int64_t steps = (g.K + kMK - 1) / kMK;
    const bool avk = g.vec & kAVecK;
    const int mode = avk && (g.vec & kBVecK)   ? kModeKK
                     : avk && (g.vec & kBVecN) ? kModeKN
                                               : kModeAny;
    const int per_unit = mode == kModeKK   ? kTileBlocksPerUnit<BT, kModeKK>
                         : mode == kModeKN ? kTileBlocksPerUnit<BT, kModeKN>
                                           : kTileBlocksPerUnit<BT, kModeAny>;
    /* tuning.hip_gemm_splits (MLA_HIP_GEMM_SPLITS) n: the tile path's K
     * splits for every launch instead of the rule (0), for exercising the
     * split sums on shapes, or hosts, where the rule would not split */
    const int64_t forced = ctx->tuning.hip_gemm_splits;
    const int64_t want =
        forced ? forced : tile_splits((int64_t)st->multiprocessors * per_unit, tiles, steps);
    /* Whole steps per split; the count recomputed so that none is empty. */
    g.chunks_per_split = steps > 0 ? (steps + want - 1) / want : 0;
    g.splits =
        (int32_t)(g.chunks_per_split > 0 ? (steps + g.chunks_per_split - 1) / g.chunks_per_split
                                         : 1);
    const int64_t blocks = tiles * g.splits;
    if (blocks > 0x7FFFFFFF)
        return mla_fail(ctx, MLA_ERR_UNSUPPORTED, "y", "%lld output tiles: beyond one launch",
                        (long long)tiles);
    if (g.K > 0x7FFFFFFF - kMK) /* the kernel's k is 32-bit */
        return mla_fail(ctx, MLA_ERR_UNSUPPORTED, "x", "K = %lld: beyond the tile kernel's 2^31",
                        (long long)g.K);
#if defined(__CUDACC__)
    static_assert(kGwM == kMM && kGwN == kMN, "the wgmma body's tiles are the tile path's");
    if (path != PATH_MMA && gw_takes(ctx, g, mode))
        return launch_wg(ctx, g, tiles, what);
#else
    (void)path;
#endif
    if (g.splits > 1) {
        const mla_status s = split_scratch(ctx, g);
        if (s != MLA_OK)
            return s;
    }
    if (mode == kModeKK)
        gemm_matrix_kernel<BT, kModeKK><<<(unsigned)blocks, MLA_HIP_BLOCK, 0, stream>>>(g);
    else if (mode == kModeKN)
        gemm_matrix_kernel<BT, kModeKN><<<(unsigned)blocks, MLA_HIP_BLOCK, 0, stream>>>(g);
    else
        gemm_matrix_kernel<BT, kModeAny><<<(unsigned)blocks, MLA_HIP_BLOCK, 0, stream>>>(g);
    const mla_status s = mla_hip_check_launch(ctx, what);
    if (s != MLA_OK || g.splits == 1)
        return s;
    return launch_reduce(ctx, g, what);
}

template <int BT> mla_status launch_small(mla_context *ctx, gemm_desc &g, const char *what)
{
    mla_hip_state *st = mla_hip_state_of(ctx);
    constexpr int KC = kSChunk<BT>;
    const int64_t groups = (g.N + kSRows - 1) / kSRows, nch = (g.K + KC - 1) / KC;
    /* Splits of K: about two blocks per multiprocessor, each warp at least
     * two chunks. */
    const int64_t want = 2 * (int64_t)st->multiprocessors;
    int64_t splits = (want + groups - 1) / groups;
    const int64_t most = nch / (2 * (MLA_HIP_BLOCK / 64) * 2);
    splits = splits > most ? most : splits;
    splits = splits > kMaxSplits ? kMaxSplits : splits < 1 ? 1 : splits;
    g.chunks_per_split = nch > 0 ? (nch + splits - 1) / splits : 0;
    g.splits =
        (int32_t)(g.chunks_per_split > 0 ? (nch + g.chunks_per_split - 1) / g.chunks_per_split : 1);
    if (g.splits > 1) {
        const mla_status s = split_scratch(ctx, g);
        if (s != MLA_OK)
            return s;
    }
    const int64_t blocks = groups * g.splits;
    if (blocks > 0x7FFFFFFF)
        return mla_fail(ctx, MLA_ERR_UNSUPPORTED, "w", "%lld row groups: beyond one launch",
                        (long long)groups);
    gemm_small_kernel<BT><<<(unsigned)blocks, MLA_HIP_BLOCK, 0, st->stream>>>(g);
    mla_status s = mla_hip_check_launch(ctx, what);
    if (s != MLA_OK || g.splits == 1)
        return s;
    return launch_reduce(ctx, g, what);
}

} // namespace

mla_status mla_hip_gemm(mla_context *ctx, gemm_desc &g, const char *what)
{
    if (g.batch == 0 || g.M == 0 || g.N == 0)
        return MLA_OK;
    const int path = path_of(ctx);
    hipStream_t stream = mla_hip_state_of(ctx)->stream;
    g.splits = 1; /* the FMA kernel writes y; the other paths choose */
    if (g.adt == MLA_DTYPE_F32 || path == PATH_FMA) {
        const int64_t tiles = g.batch * g.tiles_m * g.tiles_n;
        const unsigned blocks = mla_hip_grid_blocks(ctx, tiles * MLA_HIP_BLOCK, MLA_HIP_BLOCK);
        return with_cache_dtype(g.bdt, [&](auto bt) {
            constexpr int BT = decltype(bt)::value;
            if (g.adt == MLA_DTYPE_F32)
                gemm_fma_kernel<MLA_DTYPE_F32, BT><<<blocks, MLA_HIP_BLOCK, 0, stream>>>(g);
            else
                gemm_fma_kernel<MLA_DTYPE_BF16, BT><<<blocks, MLA_HIP_BLOCK, 0, stream>>>(g);
            return mla_hip_check_launch(ctx, what);
        });
    }
    g.vec = vec_flags(g);
    const bool small = g.batch == 1 && g.M <= kSMaxM && path != PATH_TILE;
    return with_cache_dtype(g.bdt, [&](auto bt) {
        constexpr int BT = decltype(bt)::value;
        return small ? launch_small<BT>(ctx, g, what) : launch_matrix<BT>(ctx, g, what, path);
    });
}
