/* MXFP4 batched GEMMs (MLA.md section 7): y[b] = A[b] @ deq(w[b])^T with fp32
 * accumulation, y written through its strides (any pattern: a [M, B, N]
 * buffer passed as a transposed [B, M, N] view included), one rounding to
 * y's dtype. A is x (a16wfp4, prequant 0), deq(Q(x)) by the MXFP4 rule
 * (a16wfp4, prequant 1) or deq(xq) (a4w4). K is never split: every output is
 * one thread's or one wave's fixed sequence of operations over all of K, so
 * the result does not depend on the launch configuration, and each output is
 * stored once, at y's strides.
 *
 * Two paths.
 *
 * FMA (always correct: f32 x without prequant, the fallback below, and
 * MLA_HIP_MXFP4=fma): a thread computes one output, k ascending, one fmaf per
 * term, each weight decoded to fp32 where it is used (fp4 * 2^(s - 127),
 * exact, core/format_bits.h) and each activation too (x as is; the MXFP4
 * round trip of x from format_bits' scale byte and codes; or the a4w4
 * dequant).
 *
 * Matrix (bf16 x without prequant, prequant with either x dtype, a4w4): one
 * block of 256 threads per tile of kMT rows x kNB = 128 columns of one batch.
 * Per stage of K (NVIDIA 512 values, AMD 256) each lane first issues the
 * loads of its weights for the whole stage, then the block stages the tile's
 * activations into shared memory, one 32-block per thread (as exact bf16, or
 * as fp4 codes + e8m0 scales for gfx950's scaled MFMA), and each wave runs
 * the matrix unit over its columns:
 *   NVIDIA sm_90: mma.sync m16n8k16 bf16 (rows 16, two n8 tiles per warp);
 *   gfx942 (and gfx950 for bf16 x): MFMA 32x32x8 bf16;
 *   gfx950, a4w4 and prequant: MFMA scale 32x32x64 fp4 x fp4 with the e8m0
 *   scales: no conversion at all.
 * On the bf16 units both operands are exact: a weight fp4 * 2^(s - 127) has
 * two significant bits, a prequant or a4w4 activation likewise, and bf16 x is
 * bf16. Weights are decoded to bf16 in registers from a per-lane 8-entry
 * table of the block's scale, read with byte permutes (two table reads, two
 * interleaves and the signs per 4 codes).
 *
 * "Clean" inputs. The matrix units are used only where they reproduce fp32
 * arithmetic on exact products: every bf16 input normal (or zero), every
 * product normal and finite. A block is clean when its e8m0 scale lies in
 * [65, 187] (|fp4 * 2^(s-127)| in [2^-63, 1.5 * 2^63)) or all its codes are
 * +-0 (and the scale is not NaN); a bf16 x value when it is zero or its
 * exponent field lies in [64, 190]. Then every nonzero product lies in
 * [2^-126, 2^127) and no flush-to-zero or overflow inside the unit can
 * matter (AMD's MI200 matrix units flush bf16 subnormals; later ones are not
 * documented here). A tile that meets anything else (NaN or Inf values, NaN
 * scales, extreme scales, subnormal activations) is recomputed by the FMA
 * path, which has the reference semantics for all of them. The test is a
 * vote over the whole tile, so a tile's result never mixes the two paths.
 *
 * Hardware fp4 conversions (gfx950 v_cvt_scalef32_*fp4*) are not used: the
 * MXFP4 quantization needs MLA.md's RNE-with-saturation from x * 2^-e in
 * fp32 bit for bit, and neither that nor the instructions' handling of fp32
 * subnormal inputs, NaN and the scale operand can be checked here (no gfx950
 * to run on); the software conversions below are cheap and are checked bit
 * for bit against core/format_bits.h. The scaled MFMA needs no conversion.
 *
 * Activation quantization in the stage (prequant): amax and the scale byte
 * come from format_bits; the round trip of each value is computed in fp32 as
 * |x| * 2^-e rounded to the e2m1 grid by one magic-number add (RNE at step
 * 0.5, 1 or 2), clamped at 6, times 2^e: identical bits to format_bits' code +
 * dequant for every value of a clean block (the FMA path covers the others). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "hip/device_util.h"
#include "hip/mfma.h"

namespace {

/* Helpers of the matrix paths only, which a pass without one (the AMD host
 * pass, other targets) compiles but does not use. */
#define MLA_MX_DEV static __device__ __forceinline__ __attribute__((unused))

enum { MODE_PLAIN = 0, MODE_PREQUANT = 1, MODE_A4W4 = 2 };

/* Path of the matrix kernel: the target's own (gfx950: the scaled MFMA for
 * a4w4 and prequant), or tuning.hip_mxfp4 (MLA_HIP_MXFP4) fma (every tile
 * by FMA: a check of one path against the other on a GPU) or f4 (the CPU
 * emulation's wave64 build runs gfx942's bodies, and gfx950's scaled one
 * with f4). */
enum { PATH_TARGET = 0, PATH_FMA = 1, PATH_F4 = 2 };

constexpr int kBlk = 32;     /* MXFP4 block */
#if defined(__CUDACC__)
constexpr int kMT = 16;      /* rows of a matrix tile: one m16 mma tile */
#else
constexpr int kMT = 32;      /* one 32-row MFMA tile */
#endif
constexpr int kNB = 128;         /* columns of a matrix tile */
constexpr int kThreads = MLA_HIP_BLOCK;
static_assert(kThreads == 256, "the matrix tile assumes 256 threads");
/* K blocks staged at a time: one (row, block) per thread (NVIDIA 512 values
 * of K, AMD 256). */
[[maybe_unused]] constexpr int kStageBlocks = kThreads / kMT;

/* Clean ranges (see the header comment). */
constexpr uint32_t kScaleLo = 65, kScaleHi = 187;
constexpr uint32_t kFieldLo = 64, kFieldHi = 190;

struct mx_operand_desc {
    const uint8_t *codes, *scales;
    /* Code strides (bytes); c2 = -1: stride 1 and every block's 16 bytes
     * 16-byte aligned (one vector load). Scale strides; s2 = -1: the
     * pre-shuffled layout (s0 per batch, s1 per byte). Strides are never
     * negative, so the flags cost no registers of their own (the AMD
     * compiler keeps separate flag words live and spills them). */
    int64_t c0, c1, c2;
    int64_t s0, s1, s2;
};
/* gemm_desc::flags */
constexpr int32_t kXVec = 1;       /* every 32-block of x contiguous, 16-byte aligned */
constexpr int32_t kProduction = 2; /* MLA_MXFP4_PRODUCTION */

struct gemm_desc {
    int64_t B, M, N, K, nblk;
    const void *x; /* a16wfp4 */
    int64_t x0, x1, x2;
    int32_t flags; /* kXVec, kProduction */
    int32_t path;  /* PATH_* */
    mx_operand_desc xq, w; /* a4w4 activations, weights */
    void *y;
    int64_t y0, y1, y2;
};

/* -------------------------------------------------- operand access */

/* NV values of dtype DT from element off on, element stride st, as fp32. The
 * pointer steps by st: written as off + i * st, the AMD compiler keeps the
 * NV uniform products in scalar registers and spills them. */
template <int DT, int NV>
MLA_DEV void load_run(const void *base, int64_t off, int64_t st, float out[NV])
{
    if constexpr (DT == MLA_DTYPE_F32) {
        const float *p = static_cast<const float *>(base) + off;
#pragma unroll
        for (int i = 0; i < NV; ++i, p += st)
            out[i] = *p;
    } else {
        const uint16_t *p = static_cast<const uint16_t *>(base) + off;
#pragma unroll
        for (int i = 0; i < NV; ++i, p += st)
            out[i] = load_value<DT>(p, 0);
    }
}

MLA_DEV uint32_t scale_at(const mx_operand_desc &o, int64_t b, int64_t r, int64_t j, int64_t nblk)
{
    const int64_t off = o.s2 < 0 ? b * o.s0 + mla_fb_preshuffled_offset(r, j, nblk) * o.s1
                                      : b * o.s0 + r * o.s1 + j * o.s2;
    return o.scales[off];
}

/* The 16 code bytes of block j of row r, little-endian in four words (byte
 * q in bits 8 (q % 4) of word q / 4: value 2q in the low nibble). One
 * 16-byte load when o.vec, else a rolled loop of byte loads (an unrolled one
 * makes the AMD compiler keep 16 addresses live). */
MLA_DEV void codes_at(const mx_operand_desc &o, int64_t b, int64_t r, int64_t j, uint32_t c[4])
{
    const uint8_t *p = o.codes + b * o.c0 + r * o.c1;
    if (o.c2 < 0) {
        const mla_u32x4 q = *reinterpret_cast<const mla_u32x4 *>(p + j * (kBlk / 2));
#pragma unroll
        for (int i = 0; i < 4; ++i)
            c[i] = q.v[i];
        return;
    }
    uint64_t lo = 0, hi = 0;
    p += j * (kBlk / 2) * o.c2;
#pragma unroll 1
    for (int q = 0; q < 16; ++q, p += o.c2) {
        const uint64_t v = (uint64_t)*p << (8 * (q % 8));
        lo |= q < 8 ? v : 0;
        hi |= q < 8 ? 0 : v;
    }
    c[0] = (uint32_t)lo, c[1] = (uint32_t)(lo >> 32), c[2] = (uint32_t)hi, c[3] = (uint32_t)(hi >> 32);
}

/* codes_at when o.vec (the prefetch of the matrix tiles), zeros otherwise. */
MLA_MX_DEV void codes_vec(const mx_operand_desc &o, int64_t b, int64_t r, int64_t j, uint32_t c[4])
{
#pragma unroll
    for (int i = 0; i < 4; ++i)
        c[i] = 0;
    if (o.c2 < 0) {
        const mla_u32x4 q =
            *reinterpret_cast<const mla_u32x4 *>(o.codes + b * o.c0 + r * o.c1 + j * (kBlk / 2));
#pragma unroll
        for (int i = 0; i < 4; ++i)
            c[i] = q.v[i];
    }
}

/* A weight (or a4w4) block is clean: scale in range, or only +-0 codes with
 * a scale that is not NaN. */
MLA_MX_DEV bool block_clean(const uint32_t c[4], uint32_t s)
{
    const bool zero = ((c[0] | c[1] | c[2] | c[3]) & 0x77777777u) == 0;
    return (s - kScaleLo <= kScaleHi - kScaleLo) || (zero && s != 255u);
}

/* ------------------------------------------------------ FMA path */

/* One output by fmaf, K ascending, each value decoded where it is used:
 * weights fp4 * 2^(s - 127) (exact, NaN scale: NaN), activations x, the
 * MXFP4 round trip of x (format_bits' scale byte and codes) or the a4w4
 * dequant. Few live registers: the loop over a word's 8 codes stays rolled,
 * so the compiler cannot hoist a block's 32 loads and their addresses. */
template <int MODE, int XDT>
MLA_DEV float dot_one(const gemm_desc &d, int64_t b, int64_t m, int64_t n)
{
    float acc = 0.0f;
    for (int64_t j = 0; j < d.nblk; ++j) {
        uint32_t c[4], xc[4] = {0, 0, 0, 0};
        codes_at(d.w, b, n, j, c);
        const uint8_t s = (uint8_t)scale_at(d.w, b, n, j, d.nblk);
        uint8_t xs = 0, sb = 0;
        uint32_t mask = 0;
        const int64_t base = b * d.x0 + m * d.x1 + j * kBlk * d.x2;
        if constexpr (MODE == MODE_A4W4) {
            codes_at(d.xq, b, m, j, xc);
            xs = (uint8_t)scale_at(d.xq, b, m, j, d.nblk);
        } else if constexpr (MODE == MODE_PREQUANT) {
            uint32_t amax = 0;
            for (int i = 0; i < kBlk; ++i) {
                const uint32_t u = mla_fb_bits(load_value<XDT>(d.x, base + i * d.x2)) & 0x7FFFFFFFu;
                amax = u > amax ? u : amax;
            }
            sb = mla_fb_mxfp4_scale_byte(amax, (d.flags & kProduction) != 0);
            mask = mla_fb_mxfp4_code_mask(amax);
        }
#pragma unroll
        for (int q = 0; q < 4; ++q) {
            uint32_t wc = c[q], ac = xc[q];
#pragma unroll 1
            for (int k = 0; k < 8; ++k, wc >>= 4, ac >>= 4) {
                float a;
                if constexpr (MODE == MODE_A4W4) {
                    a = mla_fb_e2m1_scaled_to_f32((uint8_t)(ac & 0xFu), xs);
                } else {
                    a = load_value<XDT>(d.x, base + (8 * q + k) * d.x2);
                    if constexpr (MODE == MODE_PREQUANT)
                        a = mla_fb_e2m1_scaled_to_f32(mla_fb_mxfp4_code(a, sb, mask), sb);
                }
                acc = fmaf(a, mla_fb_e2m1_scaled_to_f32((uint8_t)(wc & 0xFu), s), acc);
            }
        }
    }
    return acc;
}

/* One thread per output, columns fastest (the f32-x path without prequant,
 * where bf16 matrix units do not apply). */
template <int MODE, int XDT, int YDT>
__global__ __launch_bounds__(MLA_HIP_BLOCK) void fma_kernel(gemm_desc d)
{
    const int64_t items = d.B * d.M * d.N;
    for (int64_t it = block_first_item() + threadIdx.x; it < items; it += grid_items()) {
        int64_t rest, n, b, m;
        divmod64(it, d.N, rest, n);
        divmod64(rest, d.M, b, m);
        store_value<YDT>(d.y, b * d.y0 + m * d.y1 + n * d.y2, dot_one<MODE, XDT>(d, b, m, n), 1);
    }
}

/* ----------------------------------------------- matrix path pieces */

/* The whole tile by FMA, outputs spread over the block's threads. */
/* v, hidden from the optimizer: the fallback derives its addresses from its
 * own copies of the tile's coordinates, so that the AMD compiler does not
 * keep values it shares with the matrix body live in scalar registers
 * across the whole kernel (it spills them otherwise). */
MLA_DEV int64_t opaque(int64_t v)
{
#if defined(__HIP_DEVICE_COMPILE__) && defined(__GFX9__) && !defined(MLA_HIP_EMU_HIP_COMPAT_H)
    asm volatile("" : "+s"(v));
#elif defined(__CUDA_ARCH__)
    asm volatile("" : "+l"(v));
#endif
    return v;
}

template <int MODE, int XDT, int YDT>
MLA_DEV void tile_by_fma(const gemm_desc &d, int64_t b_, int64_t m0_, int64_t n0_)
{
    const int64_t b = opaque(b_), m0 = opaque(m0_), n0 = opaque(n0_);
    for (int idx = (int)threadIdx.x; idx < kMT * kNB; idx += kThreads) {
        const int64_t m = m0 + idx / kNB, n = n0 + idx % kNB;
        if (m < d.M && n < d.N)
            store_value<YDT>(d.y, b * d.y0 + m * d.y1 + n * d.y2, dot_one<MODE, XDT>(d, b, m, n), 1);
    }
}

/* The round trip deq(Q(x)) of one value of a clean block with exponent e
 * (inv = 2^-e, pw = 2^e), as fp32 (sign copied, two significant bits):
 * |q| = |x| 2^-e is < 8; RNE onto the e2m1 grid (steps 0.5 below 2, 1 below
 * 4, 2 above) by adding and removing 2^22, 2^23 or 2^24; |q| >= 6 gives 6. */
MLA_MX_DEV float round_trip_fast(float x, float inv, float pw)
{
    const float a = fabsf(x) * inv;
    const float big = a < 2.0f ? 0x1p22f : (a < 4.0f ? 0x1p23f : 0x1p24f);
    float r = (a + big) - big;
    r = r > 6.0f ? 6.0f : r;
    return copysignf(r * pw, x);
}

/* Values 8 g .. 8 g + 7 of the x block at element base, as fp32 (exact). */
template <int XDT>
MLA_DEV void load_x8(const gemm_desc &d, int64_t base, int g, float v[8])
{
    if (d.flags & kXVec) {
        if constexpr (XDT == MLA_DTYPE_BF16) {
            const mla_u32x4 q =
                *reinterpret_cast<const mla_u32x4 *>(static_cast<const uint16_t *>(d.x) + base + 8 * g);
#pragma unroll
            for (int i = 0; i < 4; ++i) {
                v[2 * i] = mla_fb_float(q.v[i] << 16);
                v[2 * i + 1] = mla_fb_float(q.v[i] & 0xFFFF0000u);
            }
        } else {
            load4_contig<XDT>(d.x, base + 8 * g, v);
            load4_contig<XDT>(d.x, base + 8 * g + 4, v + 4);
        }
    } else {
        load_run<XDT, 8>(d.x, base + 8 * g * d.x2, d.x2, v);
    }
}

/* Bits of max |x| over the x block at element base. */
template <int XDT>
MLA_DEV uint32_t block_amax(const gemm_desc &d, int64_t base)
{
    uint32_t amax = 0;
#pragma unroll 1
    for (int g = 0; g < 4; ++g) {
        float v[8];
        load_x8<XDT>(d, base, g, v);
#pragma unroll
        for (int i = 0; i < 8; ++i) {
            const uint32_t u = mla_fb_bits(v[i]) & 0x7FFFFFFFu;
            amax = u > amax ? u : amax;
        }
    }
    return amax;
}

/* Four pair words w (values 8 g .. 8 g + 7, word p = values 2p, 2p + 1) into
 * dst: in this order (NVIDIA), or in the MFMA k order of tile_mfma_bf16
 * (even values, then odd values). */
template <bool AMD>
MLA_DEV void put_group(uint32_t *dst, int g, const uint32_t w[4])
{
    if constexpr (AMD) {
        dst[4 * g + 0] = (w[0] & 0xFFFFu) | (w[1] << 16);         /* 8g, 8g + 2 */
        dst[4 * g + 1] = (w[2] & 0xFFFFu) | (w[3] << 16);         /* 8g + 4, 8g + 6 */
        dst[4 * g + 2] = (w[0] >> 16) | (w[1] & 0xFFFF0000u);     /* 8g + 1, 8g + 3 */
        dst[4 * g + 3] = (w[2] >> 16) | (w[3] & 0xFFFF0000u);     /* 8g + 5, 8g + 7 */
    } else {
#pragma unroll
        for (int p = 0; p < 4; ++p)
            dst[4 * g + p] = w[p];
    }
}

/* Stages block j of activation row m as 16 words of exact bf16 pairs into
 * dst (shared memory); false when the block is not clean (dst is then left
 * as it is: the tile is recomputed by FMA). Rows past M and blocks past K
 * stage zeros. Groups of 8 values go through registers one at a time, with
 * two passes over x for prequant (amax, then the values). */
template <int MODE, int XDT, bool AMD>
MLA_DEV bool stage_bf16(const gemm_desc &d, int64_t b, int64_t m, int64_t j, uint32_t *dst)
{
    if (m >= d.M || j >= d.nblk) {
#pragma unroll
        for (int p = 0; p < 16; ++p)
            dst[p] = 0;
        return true;
    }
    if constexpr (MODE == MODE_A4W4) {
        uint32_t c[4];
        codes_at(d.xq, b, m, j, c);
        const uint32_t s = scale_at(d.xq, b, m, j, d.nblk);
#pragma unroll
        for (int g = 0; g < 4; ++g) {
            uint32_t w[4];
#pragma unroll
            for (int p = 0; p < 4; ++p)
                w[p] = (mla_fb_e2m1_scaled_bits((c[g] >> (8 * p)) & 0xFu, s) >> 16) |
                       (mla_fb_e2m1_scaled_bits((c[g] >> (8 * p + 4)) & 0xFu, s) & 0xFFFF0000u);
            put_group<AMD>(dst, g, w);
        }
        return block_clean(c, s);
    } else {
        const int64_t base = b * d.x0 + m * d.x1 + j * kBlk * d.x2;
        float inv = 1.0f, pw = 1.0f;
        if constexpr (MODE == MODE_PREQUANT) {
            const uint32_t amax = block_amax<XDT>(d, base);
            if (amax == 0) { /* all +-0: codes 0, values +0 */
#pragma unroll
                for (int p = 0; p < 16; ++p)
                    dst[p] = 0;
                return true;
            }
            const uint32_t sb = mla_fb_mxfp4_scale_byte(amax, (d.flags & kProduction) != 0);
            if (sb - kScaleLo > kScaleHi - kScaleLo)
                return false;
            inv = mla_fb_pow2(127 - (int32_t)sb);
            pw = mla_fb_pow2((int32_t)sb - 127);
        } else {
            static_assert(XDT == MLA_DTYPE_BF16, "the matrix path takes bf16 x as is");
        }
        bool clean = true;
#pragma unroll 1
        for (int g = 0; g < 4; ++g) {
            float v[8];
            load_x8<XDT>(d, base, g, v);
            uint32_t w[4];
#pragma unroll
            for (int p = 0; p < 4; ++p) {
                float v0 = v[2 * p], v1 = v[2 * p + 1];
                if constexpr (MODE == MODE_PREQUANT) {
                    v0 = round_trip_fast(v0, inv, pw);
                    v1 = round_trip_fast(v1, inv, pw);
                } else {
#pragma unroll
                    for (int h = 0; h < 2; ++h) {
                        const uint32_t u = (mla_fb_bits(h ? v1 : v0) >> 16) & 0x7FFFu;
                        clean = clean && (u == 0 || ((u >> 7) - kFieldLo <= kFieldHi - kFieldLo));
                    }
                }
                w[p] = (mla_fb_bits(v0) >> 16) | (mla_fb_bits(v1) & 0xFFFF0000u);
            }
            put_group<AMD>(dst, g, w);
        }
        return clean;
    }
}

/* bf16 bits of fp4 magnitude i times 2^(s - 127), i = 0..7, as byte tables
 * for the permutes: h0 = high bytes of i = 0..3, h1 of 4..7, l0, l1 the low
 * bytes. Exact for 2 <= s <= 252 (normal results); entry 0 is 0 for every s.
 * In 16-bit pairs: B1 = (s - 1) << 7 (0.5 * 2^(s-127)), B2 = B1 + 0x80 (1.0),
 * B3 = B1 + 0xC0 (1.5), ..., B7 = B1 + 0x1C0 (6.0). */
struct bf16_lut {
    uint32_t h0, h1, l0, l1;
};

MLA_MX_DEV uint32_t lut_words(uint32_t s, uint32_t &p01, uint32_t &p23, uint32_t &p45)
{
    const uint32_t k = (s - 1u) << 7;
    const uint32_t k2 = (k & 0xFFFFu) | (k << 16);
    p01 = k << 16;
    p23 = k2 + 0x00C00080u;
    p45 = k2 + 0x01400100u;
    return k2 + 0x01C00180u; /* p67 */
}

/* --------------------------------------------- NVIDIA: mma m16n8k16 */

#if defined(MLA_HAVE_MMA_BF16) || defined(MLA_EMU_MATRIX_NV)
/* Shared A: kMT rows; block jj of a stage at word 18 jj of its row (16 words
 * of bf16 pairs + 2 pad); rows kRowWords apart. A warp's 8-byte A reads (8
 * rows g x 4 blocks t) then hit distinct banks. */
constexpr int kBlockWords = 18;
constexpr int kRowWords = kStageBlocks * kBlockWords + 8;
constexpr int kChunks = kStageBlocks / 4; /* 4 blocks (128 values of K) per chunk */

MLA_DEV bf16_lut lut_nv(uint32_t s)
{
    uint32_t p01, p23, p45;
    const uint32_t p67 = lut_words(s, p01, p23, p45);
    return {mla_prmt(p01, p23, 0x7531u), mla_prmt(p45, p67, 0x7531u), mla_prmt(p01, p23, 0x6420u),
            mla_prmt(p45, p67, 0x6420u)};
}

/* Codes 4u .. 4u + 3 of word w (u = 0, 1) -> bf16 pairs (4u, 4u + 1) and
 * (4u + 2, 4u + 3): table reads by the codes' magnitudes, their sign bits
 * replicated by a permute into the high bytes, then the interleave. */
MLA_DEV void decode4_nv(uint32_t w, int u, const bf16_lut &t, uint32_t &p0, uint32_t &p1)
{
    const uint32_t sel = (u ? w >> 16 : w) & 0x7777u;
    uint32_t h = mla_prmt(t.h0, t.h1, sel);
    const uint32_t l = mla_prmt(t.l0, t.l1, sel);
    const uint32_t sg = mla_prmt(w << 4, w, u ? 0xFBEAu : 0xD9C8u);
    h |= sg & 0x80808080u;
    p0 = mla_prmt(l, h, 0x5140u);
    p1 = mla_prmt(l, h, 0x7362u);
}

/* Warp w of the block owns columns nt0 + 16 w .. + 15 (two n8 tiles); lane
 * (g, t) = (lane / 4, lane % 4) loads weight rows nt0 + 16 w + 8 i + g and,
 * in chunk c of a stage, all 32 values of block 4 c + t: mma step st of the
 * chunk gives it values 4 st .. 4 st + 3 of that block, for A (rows g, g + 8
 * from shared memory) and B alike. */
template <int MODE, int XDT, int YDT>
MLA_DEV bool tile_nv(const gemm_desc &d, int64_t b, int64_t m0, int64_t nt0)
{
    __shared__ uint32_t sa[kMT][kRowWords];
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    const int g = lane / 4, t = lane % 4;
    const int64_t n0 = nt0 + 16 * warp;
    const bool busy = n0 < d.N;
    int64_t wrow[2];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
        const int64_t n = n0 + 8 * i + g;
        wrow[i] = n < d.N ? n : d.N - 1;
    }
    float acc[2][4];
#pragma unroll
    for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int q = 0; q < 4; ++q)
            acc[i][q] = 0.0f;
    int dirty = 0;

    for (int64_t jb = 0; jb < d.nblk; jb += kStageBlocks) {
        /* This lane's weights of the stage, in flight during the staging. */
        uint32_t raw[kChunks][2][4], sw[kChunks][2];
#pragma unroll
        for (int c = 0; c < kChunks; ++c) {
            const int64_t j = jb + 4 * c + t;
#pragma unroll
            for (int i = 0; i < 2; ++i) {
                sw[c][i] = 127;
#pragma unroll
                for (int q = 0; q < 4; ++q)
                    raw[c][i][q] = 0;
                if (busy && j < d.nblk) {
                    codes_vec(d.w, b, wrow[i], j, raw[c][i]);
                    sw[c][i] = scale_at(d.w, b, wrow[i], j, d.nblk);
                }
            }
        }
        mla_block_sync(); /* the previous stage is consumed */
        {
            const int r = threadIdx.x / kStageBlocks, jj = threadIdx.x % kStageBlocks;
            dirty |= !stage_bf16<MODE, XDT, false>(d, b, m0 + r, jb + jj, &sa[r][jj * kBlockWords]);
        }
        mla_block_sync();
        if (!busy)
            continue;
#pragma unroll
        for (int c = 0; c < kChunks; ++c) {
            if (jb + 4 * c >= d.nblk)
                break;
            bf16_lut lut[2];
#pragma unroll
            for (int i = 0; i < 2; ++i) {
                if (d.w.c2 >= 0 && jb + 4 * c + t < d.nblk)
                    codes_at(d.w, b, wrow[i], jb + 4 * c + t, raw[c][i]);
                dirty |= !block_clean(raw[c][i], sw[c][i]);
                lut[i] = lut_nv(sw[c][i]);
            }
            const uint32_t *ra = &sa[g][(4 * c + t) * kBlockWords];
            const uint32_t *rb = &sa[g + 8][(4 * c + t) * kBlockWords];
#pragma unroll
            for (int st = 0; st < 8; ++st) {
                const uint32_t a[4] = {ra[2 * st], rb[2 * st], ra[2 * st + 1], rb[2 * st + 1]};
#pragma unroll
                for (int i = 0; i < 2; ++i) {
                    uint32_t bb[2];
                    decode4_nv(raw[c][i][st / 2], st % 2, lut[i], bb[0], bb[1]);
                    mla_mma_bf16_16x8x16(acc[i], a, bb);
                }
            }
        }
    }
    if (mla_block_any(dirty))
        return true;
    if (busy) {
#pragma unroll
        for (int i = 0; i < 2; ++i)
#pragma unroll
            for (int q = 0; q < 4; ++q) {
                const int64_t m = m0 + g + 8 * (q / 2), n = n0 + 8 * i + 2 * t + q % 2;
                if (m < d.M && n < d.N)
                    store_value<YDT>(d.y, b * d.y0 + m * d.y1 + n * d.y2, acc[i][q], 1);
            }
    }
    return false;
}
#endif

/* ------------------------------------------ AMD: MFMA 32x32x8 bf16 */

#if defined(MLA_HAVE_MFMA_BF16) || defined(MLA_EMU_MATRIX_AMD)
/* Shared A in the k order of the weight decode: within a block, position
 * 4 s + q (s = MFMA step 0..7, q = 0..3) holds k = 8 (s / 2) + 2 q + s % 2
 * (the even codes, then the odd codes, of each 8-code word). Block jj of a
 * stage at word 18 jj of its row. */
constexpr int kBlockWordsA = 18;
constexpr int kRowWordsA = kStageBlocks * kBlockWordsA + 4;
constexpr int kChunksA = kStageBlocks / 2; /* 2 blocks (64 values of K) per chunk */

MLA_DEV bf16_lut lut_amd(uint32_t s)
{
    uint32_t p01, p23, p45;
    const uint32_t p67 = lut_words(s, p01, p23, p45);
    return {mla_perm(p23, p01, 0x07050301u), mla_perm(p67, p45, 0x07050301u),
            mla_perm(p23, p01, 0x06040200u), mla_perm(p67, p45, 0x06040200u)};
}

/* Word w (codes 0..7) -> even pairs (0, 2), (4, 6) and odd pairs (1, 3),
 * (5, 7): the magnitudes of a byte's low (high) nibbles are byte selectors
 * as they stand, and each byte's sign bit lands on its high byte's. */
MLA_DEV void decode8_amd(uint32_t w, const bf16_lut &t, uint32_t e[2], uint32_t o[2])
{
    const uint32_t me = w & 0x07070707u, mo = (w >> 4) & 0x07070707u;
    const uint32_t he = mla_perm(t.h1, t.h0, me) | ((w << 4) & 0x80808080u);
    const uint32_t le = mla_perm(t.l1, t.l0, me);
    const uint32_t ho = mla_perm(t.h1, t.h0, mo) | (w & 0x80808080u);
    const uint32_t lo = mla_perm(t.l1, t.l0, mo);
    e[0] = mla_perm(he, le, 0x05010400u);
    e[1] = mla_perm(he, le, 0x07030602u);
    o[0] = mla_perm(ho, lo, 0x05010400u);
    o[1] = mla_perm(ho, lo, 0x07030602u);
}

template <int YDT>
MLA_DEV void store_mfma(const gemm_desc &d, int64_t b, int64_t m0, int64_t n, int h,
                        const float acc[16])
{
    if (n >= d.N)
        return;
#pragma unroll
    for (int r = 0; r < 16; ++r) {
        const int64_t m = m0 + 8 * (r / 4) + 4 * h + r % 4;
        if (m < d.M)
            store_value<YDT>(d.y, b * d.y0 + m * d.y1 + n * d.y2, acc[r], 1);
    }
}

/* Wave w owns columns nt0 + 32 w .. + 31; lane (i, h) = (lane % 32,
 * lane / 32) loads weight row nt0 + 32 w + i and, in chunk c of a stage,
 * all of block 2 c + h; A row i comes from shared memory. */
template <int MODE, int XDT, int YDT>
MLA_DEV bool tile_mfma_bf16(const gemm_desc &d, int64_t b, int64_t m0, int64_t nt0)
{
    __shared__ uint32_t sa[kMT][kRowWordsA];
    const int lane = threadIdx.x % 64, wave = threadIdx.x / 64;
    const int i = lane % 32, h = lane / 32;
    const int64_t n0 = nt0 + 32 * wave;
    const bool busy = n0 < d.N;
    const int64_t n = n0 + i, wrow = n < d.N ? n : d.N - 1;
    mla_f32x16 acc;
#pragma unroll
    for (int r = 0; r < 16; ++r)
        acc[r] = 0.0f;
    int dirty = 0;

    for (int64_t jb = 0; jb < d.nblk; jb += kStageBlocks) {
        uint32_t raw[kChunksA][4], sw[kChunksA];
#pragma unroll
        for (int c = 0; c < kChunksA; ++c) {
            const int64_t j = jb + 2 * c + h;
            sw[c] = 127;
#pragma unroll
            for (int q = 0; q < 4; ++q)
                raw[c][q] = 0;
            if (busy && j < d.nblk) {
                codes_vec(d.w, b, wrow, j, raw[c]);
                sw[c] = scale_at(d.w, b, wrow, j, d.nblk);
            }
        }
        mla_block_sync();
        {
            const int r = threadIdx.x / kStageBlocks, jj = threadIdx.x % kStageBlocks;
            dirty |= !stage_bf16<MODE, XDT, true>(d, b, m0 + r, jb + jj, &sa[r][jj * kBlockWordsA]);
        }
        mla_block_sync();
        if (!busy)
            continue;
#pragma unroll
        for (int c = 0; c < kChunksA; ++c) {
            if (jb + 2 * c >= d.nblk)
                break;
            if (d.w.c2 >= 0 && jb + 2 * c + h < d.nblk)
                codes_at(d.w, b, wrow, jb + 2 * c + h, raw[c]);
            dirty |= !block_clean(raw[c], sw[c]);
            const bf16_lut lut = lut_amd(sw[c]);
            const uint32_t *ra = &sa[i][(2 * c + h) * kBlockWordsA];
#pragma unroll
            for (int p = 0; p < 4; ++p) {
                uint32_t e[2], o[2];
                decode8_amd(raw[c][p], lut, e, o);
                acc = mla_mfma_bf16_32x32x8(ra[4 * p], ra[4 * p + 1], e[0], e[1], acc);
                acc = mla_mfma_bf16_32x32x8(ra[4 * p + 2], ra[4 * p + 3], o[0], o[1], acc);
            }
        }
    }
    if (mla_block_any(dirty))
        return true;
    if (busy) {
        float out[16];
#pragma unroll
        for (int r = 0; r < 16; ++r)
            out[r] = acc[r];
        store_mfma<YDT>(d, b, m0, n, h, out);
    }
    return false;
}
#endif

/* ------------------------------- gfx950: scaled MFMA, fp4 x fp4 */

#if defined(MLA_HAVE_MFMA_SCALE_F4) || defined(MLA_EMU_MATRIX_F4)
/* e2m1 code of a round-trip value v = +-r 2^e (inv = 2^-e). */
MLA_DEV uint32_t code_of(float v, float inv)
{
    const uint32_t u = mla_fb_bits(fabsf(v) * inv); /* r, exact */
    const int32_t m = (int32_t)(u >> 22) - 0xFC;      /* 0.5 -> 0, 1 -> 2, ..., 6 -> 7 */
    const uint32_t mag = u == 0 ? 0u : (m < 1 ? 1u : (uint32_t)m);
    return mag | ((mla_fb_bits(v) >> 28) & 8u);
}

/* Stages block j of activation row m as fp4 codes (4 words into dst) and
 * its scale byte (into *sdst); false when not clean. */
template <int MODE, int XDT>
MLA_DEV bool stage_fp4(const gemm_desc &d, int64_t b, int64_t m, int64_t j, uint32_t *dst,
                       uint8_t *sdst)
{
    if (m >= d.M || j >= d.nblk) {
#pragma unroll
        for (int q = 0; q < 4; ++q)
            dst[q] = 0;
        *sdst = 127;
        return true;
    }
    if constexpr (MODE == MODE_A4W4) {
        uint32_t c[4];
        codes_at(d.xq, b, m, j, c);
        const uint32_t s = scale_at(d.xq, b, m, j, d.nblk);
#pragma unroll
        for (int q = 0; q < 4; ++q)
            dst[q] = c[q];
        *sdst = (uint8_t)s;
        return block_clean(c, s);
    } else {
        static_assert(MODE == MODE_PREQUANT, "fp4 staging quantizes x");
        const int64_t base = b * d.x0 + m * d.x1 + j * kBlk * d.x2;
        const uint32_t amax = block_amax<XDT>(d, base);
        if (amax == 0) {
#pragma unroll
            for (int q = 0; q < 4; ++q)
                dst[q] = 0;
            *sdst = 127;
            return true;
        }
        const uint32_t s = mla_fb_mxfp4_scale_byte(amax, (d.flags & kProduction) != 0);
        if (s - kScaleLo > kScaleHi - kScaleLo)
            return false;
        const float inv = mla_fb_pow2(127 - (int32_t)s), pw = mla_fb_pow2((int32_t)s - 127);
#pragma unroll 1
        for (int g = 0; g < 4; ++g) {
            float v[8];
            load_x8<XDT>(d, base, g, v);
            uint32_t w = 0;
#pragma unroll
            for (int i = 0; i < 8; ++i)
                w |= code_of(round_trip_fast(v[i], inv, pw), inv) << (4 * i);
            dst[g] = w;
        }
        *sdst = (uint8_t)s;
        return true;
    }
}

/* Shared A codes: 4 words per block (+1 pad); scales one byte per block. */
constexpr int kBlockWordsF4 = 5;
constexpr int kRowWordsF4 = kStageBlocks * kBlockWordsF4 + 1;
constexpr int kChunksF4 = kStageBlocks / 2;

/* As tile_mfma_bf16, one scaled MFMA per chunk: no conversion at all. */
template <int MODE, int XDT, int YDT>
MLA_DEV bool tile_mfma_f4(const gemm_desc &d, int64_t b, int64_t m0, int64_t nt0)
{
    __shared__ uint32_t sc[kMT][kRowWordsF4];
    __shared__ uint8_t ss[kMT][kStageBlocks];
    const int lane = threadIdx.x % 64, wave = threadIdx.x / 64;
    const int i = lane % 32, h = lane / 32;
    const int64_t n0 = nt0 + 32 * wave;
    const bool busy = n0 < d.N;
    const int64_t n = n0 + i, wrow = n < d.N ? n : d.N - 1;
    mla_f32x16 acc;
#pragma unroll
    for (int r = 0; r < 16; ++r)
        acc[r] = 0.0f;
    int dirty = 0;

    for (int64_t jb = 0; jb < d.nblk; jb += kStageBlocks) {
        uint32_t raw[kChunksF4][4], sw[kChunksF4];
#pragma unroll
        for (int c = 0; c < kChunksF4; ++c) {
            const int64_t j = jb + 2 * c + h;
            sw[c] = 127;
#pragma unroll
            for (int q = 0; q < 4; ++q)
                raw[c][q] = 0;
            if (busy && j < d.nblk) {
                codes_vec(d.w, b, wrow, j, raw[c]);
                sw[c] = scale_at(d.w, b, wrow, j, d.nblk);
            }
        }
        mla_block_sync();
        {
            const int r = threadIdx.x / kStageBlocks, jj = threadIdx.x % kStageBlocks;
            dirty |= !stage_fp4<MODE, XDT>(d, b, m0 + r, jb + jj, &sc[r][jj * kBlockWordsF4], &ss[r][jj]);
        }
        mla_block_sync();
        if (!busy)
            continue;
#pragma unroll
        for (int c = 0; c < kChunksF4; ++c) {
            if (jb + 2 * c >= d.nblk)
                break;
            if (d.w.c2 >= 0 && jb + 2 * c + h < d.nblk)
                codes_at(d.w, b, wrow, jb + 2 * c + h, raw[c]);
            dirty |= !block_clean(raw[c], sw[c]);
            const uint32_t *ra = &sc[i][(2 * c + h) * kBlockWordsF4];
            const uint32_t a[4] = {ra[0], ra[1], ra[2], ra[3]};
            acc = mla_mfma_scale_f4_32x32x64(a, raw[c], ss[i][2 * c + h], sw[c], acc);
        }
    }
    if (mla_block_any(dirty))
        return true;
    if (busy) {
        float out[16];
#pragma unroll
        for (int r = 0; r < 16; ++r)
            out[r] = acc[r];
        store_mfma<YDT>(d, b, m0, n, h, out);
    }
    return false;
}
#endif

/* One block per tile (batch, kMT rows, kNB columns), columns fastest. No
 * loop over tiles: a loop lets the compiler hoist tile-invariant values out
 * of it and keep them live throughout (scalar-register spills on AMD). */
template <int MODE, int XDT, int YDT>
__global__ __launch_bounds__(MLA_HIP_BLOCK) void matrix_kernel(gemm_desc d)
{
    const int64_t mt = (d.M + kMT - 1) / kMT, nt = (d.N + kNB - 1) / kNB;
    int64_t rest, ntile, b, mtile;
    divmod64((int64_t)blockIdx.x, nt, rest, ntile);
    divmod64(rest, mt, b, mtile);
    const int64_t m0 = mtile * kMT, n0 = ntile * kNB;
    /* Every thread takes the same branches: the tile bodies' barriers. */
    bool redo = d.path == PATH_FMA;
#if defined(MLA_HAVE_MMA_BF16) || defined(MLA_EMU_MATRIX_NV)
    if (!redo)
        redo = tile_nv<MODE, XDT, YDT>(d, b, m0, n0);
#elif defined(MLA_HAVE_MFMA_SCALE_F4)
    if (redo) {
    } else if constexpr (MODE == MODE_PLAIN) {
        redo = tile_mfma_bf16<MODE, XDT, YDT>(d, b, m0, n0);
    } else {
        redo = tile_mfma_f4<MODE, XDT, YDT>(d, b, m0, n0);
    }
#elif defined(MLA_EMU_MATRIX_F4) /* wave64 emulation: gfx942's bodies, or gfx950's by PATH_F4 */
    if (redo) {
    } else if constexpr (MODE == MODE_PLAIN) {
        redo = tile_mfma_bf16<MODE, XDT, YDT>(d, b, m0, n0);
    } else {
        redo = d.path == PATH_F4 ? tile_mfma_f4<MODE, XDT, YDT>(d, b, m0, n0)
                                 : tile_mfma_bf16<MODE, XDT, YDT>(d, b, m0, n0);
    }
#elif defined(MLA_HAVE_MFMA_BF16)
    if (!redo)
        redo = tile_mfma_bf16<MODE, XDT, YDT>(d, b, m0, n0);
#else
    redo = true;
#endif
    if (redo)
        tile_by_fma<MODE, XDT, YDT>(d, b, m0, n0);
}

/* --------------------------------------------------------------- host */

int32_t path_of(const mla_context *ctx)
{
    switch (ctx->tuning.hip_mxfp4) {
    case MLA_TUNE_HIP_MXFP4_FMA:
        return PATH_FMA;
    case MLA_TUNE_HIP_MXFP4_F4:
        return PATH_F4;
    default:
        return PATH_TARGET;
    }
}

mx_operand_desc operand_desc(const mla_mxfp4_operand &o)
{
    mx_operand_desc r = {};
    r.codes = static_cast<const uint8_t *>(o.codes.data);
    r.scales = static_cast<const uint8_t *>(o.scales.data);
    r.c0 = o.codes.stride[0];
    r.c1 = o.codes.stride[1];
    r.c2 = o.codes.stride[2];
    const bool preshuffled = o.layout == MLA_SCALE_PRESHUFFLED_GFX950;
    r.s0 = o.scales.stride[0];
    r.s1 = o.scales.stride[1];
    r.s2 = preshuffled ? -1 : o.scales.stride[2];
    const bool vec = r.c2 == 1 && r.c0 % 16 == 0 && r.c1 % 16 == 0 &&
                     reinterpret_cast<uintptr_t>(r.codes) % 16 == 0;
    r.c2 = vec ? -1 : r.c2;
    return r;
}

mla_status check_operand_memory(mla_context *ctx, const mla_mxfp4_operand &o, const char *codes,
                                const char *scales)
{
    mla_status st = mla_hip_check_tensor_memory(ctx, &o.codes, codes);
    return st == MLA_OK ? mla_hip_check_tensor_memory(ctx, &o.scales, scales) : st;
}

template <int MODE, int XDT, int YDT>
mla_status launch(mla_context *ctx, const gemm_desc &d)
{
    hipStream_t stream = mla_hip_state_of(ctx)->stream;
    if constexpr (MODE == MODE_PLAIN && XDT == MLA_DTYPE_F32) {
        const int64_t items = d.B * d.M * d.N;
        const unsigned blocks = mla_hip_grid_blocks(ctx, items, MLA_HIP_BLOCK);
        fma_kernel<MODE, XDT, YDT><<<blocks, MLA_HIP_BLOCK, 0, stream>>>(d);
        return mla_hip_check_launch(ctx, "mxfp4 gemm (fma) kernel launch");
    } else {
        const int64_t tiles = d.B * ((d.M + kMT - 1) / kMT) * ((d.N + kNB - 1) / kNB);
        if (tiles > 0x7FFFFFFF) /* y would hold more than 2^42 values */
            return mla_fail(ctx, MLA_ERR_UNSUPPORTED, "y", "%lld output tiles: beyond one launch",
                            (long long)tiles);
        matrix_kernel<MODE, XDT, YDT><<<(unsigned)tiles, kThreads, 0, stream>>>(d);
        return mla_hip_check_launch(ctx, "mxfp4 gemm kernel launch");
    }
}

template <int MODE, int XDT>
mla_status launch_y(mla_context *ctx, const mla_mxfp4_gemm_args *a, const gemm_desc &d)
{
    if (a->y.dtype == MLA_DTYPE_BF16)
        return launch<MODE, XDT, MLA_DTYPE_BF16>(ctx, d);
    return launch<MODE, XDT, MLA_DTYPE_F32>(ctx, d);
}

mla_status run(mla_context *ctx, const mla_mxfp4_gemm_args *a, int a4w4)
{
    const mla_hip_device_scope scope(mla_hip_state_of(ctx)->device);
    if (scope.error() != hipSuccess)
        return mla_hip_fail(ctx, scope.error(), "selecting the context's GPU");
    mla_status st = a4w4 ? check_operand_memory(ctx, a->xq, "x.codes", "x.scales")
                         : mla_hip_check_tensor_memory(ctx, &a->x, "x");
    if (st == MLA_OK)
        st = check_operand_memory(ctx, a->w, "w.codes", "w.scales");
    if (st == MLA_OK)
        st = mla_hip_check_tensor_memory(ctx, &a->y, "y");
    if (st != MLA_OK)
        return st;
    if (a->B == 0 || a->M == 0 || a->N == 0)
        return MLA_OK;

    gemm_desc d = {};
    d.B = a->B;
    d.M = a->M;
    d.N = a->N;
    d.K = a->K;
    d.nblk = a->K / kBlk;
    d.flags = a->rule == MLA_MXFP4_PRODUCTION ? kProduction : 0;
    d.path = path_of(ctx);
    d.w = operand_desc(a->w);
    d.y = a->y.data;
    d.y0 = a->y.stride[0];
    d.y1 = a->y.stride[1];
    d.y2 = a->y.stride[2];
    if (a4w4) {
        d.xq = operand_desc(a->xq);
        return launch_y<MODE_A4W4, 0>(ctx, a, d);
    }
    d.x = a->x.data;
    d.x0 = a->x.stride[0];
    d.x1 = a->x.stride[1];
    d.x2 = a->x.stride[2];
    const int64_t per16 = 16 / (int64_t)mla_dtype_size(a->x.dtype); /* values per 16 bytes */
    const bool xvec = d.x2 == 1 && d.x0 % per16 == 0 && d.x1 % per16 == 0 &&
             reinterpret_cast<uintptr_t>(d.x) % 16 == 0;
    d.flags |= xvec ? kXVec : 0;
    const bool f32 = a->x.dtype == MLA_DTYPE_F32;
    if (a->prequant)
        return f32 ? launch_y<MODE_PREQUANT, MLA_DTYPE_F32>(ctx, a, d)
                   : launch_y<MODE_PREQUANT, MLA_DTYPE_BF16>(ctx, a, d);
    return f32 ? launch_y<MODE_PLAIN, MLA_DTYPE_F32>(ctx, a, d)
               : launch_y<MODE_PLAIN, MLA_DTYPE_BF16>(ctx, a, d);
}

} // namespace

mla_status mla_hip_gemm_a16wfp4(mla_context *ctx, const mla_mxfp4_gemm_args *a)
{
    return run(ctx, a, 0);
}

mla_status mla_hip_gemm_a4w4(mla_context *ctx, const mla_mxfp4_gemm_args *a)
{
    return run(ctx, a, 1);
}
