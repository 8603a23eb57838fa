/* The AVX-512 tile of the CPU MXFP4 GEMMs (layout and contract in
 * cpu/mxfp4_gemm.h). Per 32-block and weight row: the 16 code bytes widen
 * to 16 lanes, vpermps picks the even-k weights (low nibble; vpermps reads
 * only an index's low 4 bits) and the odd-k weights (high nibble) from the
 * fp4 table times the block scale, and two FMAs per activation row add them
 * in. Lane l of an accumulator sums the k = 2l, 2l + 1 terms of every block;
 * one fixed reduction tree adds the 16 lanes of all 16 accumulators at the
 * end, so the summation order depends on nothing but K. */
#include <string.h>

#include "core/format_bits.h"
#include "cpu/cpu_kernels.h"
#include "cpu/mxfp4_gemm.h"

#if MLA_CPU_X86
#include <immintrin.h>

#include "cpu/avx512_vec.h"

#define TILE_INLINE MLA_TARGET_AVX512 static inline __attribute__((always_inline))

/* Adds lane groups of two vectors pairwise: returns a + b after the 128-bit
 * lanes (f32x4) or elements (ps) are regrouped by the two selectors. */
TILE_INLINE __m512 pair_lanes(__m512 x, __m512 y, int hi)
{
    __m512 a = hi ? _mm512_shuffle_f32x4(x, y, 0x88) : _mm512_shuffle_f32x4(x, y, 0x44);
    __m512 b = hi ? _mm512_shuffle_f32x4(x, y, 0xDD) : _mm512_shuffle_f32x4(x, y, 0xEE);
    return _mm512_add_ps(a, b);
}

TILE_INLINE __m512 pair_elems(__m512 x, __m512 y, int hi)
{
    __m512 a = hi ? _mm512_shuffle_ps(x, y, 0x88) : _mm512_shuffle_ps(x, y, 0x44);
    __m512 b = hi ? _mm512_shuffle_ps(x, y, 0xDD) : _mm512_shuffle_ps(x, y, 0xEE);
    return _mm512_add_ps(a, b);
}

/* The sums of the 16 lanes of v[0..16), in order, by a transpose-and-add
 * tree (45 instructions for all 16 instead of 16 separate reductions):
 * halves, then quarters (128-bit lanes), then element pairs, then elements;
 * element 4q + j of the tree's result is the sum of v[q + 4j], which one
 * permute puts back in order. */
TILE_INLINE __m512 reduce16(const __m512 *v)
{
    __m512 h[8], q[4], p[2];
    for (int i = 0; i < 8; ++i)
        h[i] = pair_lanes(v[2 * i], v[2 * i + 1], 0);
    for (int i = 0; i < 4; ++i)
        q[i] = pair_lanes(h[2 * i], h[2 * i + 1], 1);
    for (int i = 0; i < 2; ++i)
        p[i] = pair_elems(q[2 * i], q[2 * i + 1], 0);
    const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    return _mm512_permutexvar_ps(order, pair_elems(p[0], p[1], 1));
}

/* One MT x NT tile at weight row n0 (rows past the last repeat it); MT and
 * NT are constants at every call site, so the loops unroll and the 16
 * accumulators stay in registers. */
TILE_INLINE void tile(const mla_mx_rows *r, const int MT, const int NT, int64_t n0)
{
    const __m512 fp4 = _mm512_setr_ps(0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f, -0.0f, -0.5f,
                                      -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f);
    const uint8_t *w[MLA_MX_TILE];
    const float *ws[MLA_MX_TILE];
    for (int ni = 0; ni < NT; ++ni) {
        const int64_t n = n0 + ni < r->rows ? n0 + ni : r->rows - 1;
        w[ni] = r->w + n * r->ldw;
        ws[ni] = r->ws + n * r->nblk;
    }
    __m512 acc[MLA_MX_TILE];
#pragma GCC unroll 16
    for (int i = 0; i < MLA_MX_TILE; ++i)
        acc[i] = _mm512_setzero_ps();
    for (int64_t j = 0; j < r->nblk; ++j) {
        /* A once per block and row; each weight row decoded and used at
         * once, so that nothing but the accumulators stays live long */
        __m512 ae[MLA_MX_TILE], ao[MLA_MX_TILE];
#pragma GCC unroll 16
        for (int mi = 0; mi < MT; ++mi) {
            const float *a = r->a + mi * r->lda + MLA_MX_BLOCK * j;
            ae[mi] = _mm512_loadu_ps(a);
            ao[mi] = _mm512_loadu_ps(a + 16);
        }
#pragma GCC unroll 16
        for (int ni = 0; ni < NT; ++ni) {
            __m512 table = _mm512_mul_ps(fp4, _mm512_set1_ps(ws[ni][j]));
            __m512i c = _mm512_cvtepu8_epi32(
                _mm_loadu_si128((const __m128i *)(const void *)(w[ni] + 16 * j)));
            __m512 we = _mm512_permutexvar_ps(c, table);
            __m512 wo = _mm512_permutexvar_ps(_mm512_srli_epi32(c, 4), table);
#pragma GCC unroll 16
            for (int mi = 0; mi < MT; ++mi) {
                acc[mi * NT + ni] = _mm512_fmadd_ps(we, ae[mi], acc[mi * NT + ni]);
                acc[mi * NT + ni] = _mm512_fmadd_ps(wo, ao[mi], acc[mi * NT + ni]);
            }
        }
    }
    __m512 sum = reduce16(acc); /* element mi * NT + ni */
    if (NT == MLA_MX_TILE) {
        _mm512_storeu_ps(r->out + n0, sum);
        return;
    }
    float v[MLA_MX_TILE];
    _mm512_storeu_ps(v, sum);
    for (int mi = 0; mi < MT; ++mi)
        for (int ni = 0; ni < NT; ++ni)
            r->out[mi * r->ldo + n0 + ni] = v[mi * NT + ni];
}

TILE_INLINE void rows_body(const mla_mx_rows *r, const int MT)
{
    const int NT = MLA_MX_TILE / MT;
    for (int64_t n0 = 0; n0 < r->rows; n0 += NT)
        tile(r, MT, NT, n0);
}

MLA_TARGET_AVX512 void mla_cpu_mx_rows_avx512(const mla_mx_rows *r, int mt)
{
    switch (mt) {
    case 4:
        rows_body(r, 4);
        break;
    case 2:
        rows_body(r, 2);
        break;
    default:
        rows_body(r, 1);
        break;
    }
}

#if defined(__clang__)
#define TARGET_BF16 __attribute__((target(MLA_AVX512_ISAS ",avx512bf16")))
#else
#define TARGET_BF16 __attribute__((target(MLA_AVX512_ISAS ",avx512bf16,prefer-vector-width=512")))
#endif

/* bf16 pairs (lo's value in the low half) of 16 fp32 lo / hi values exact
 * in bf16, and the smallest exponent field of their nonzero values into
 * *emin. */
TARGET_BF16 static inline __attribute__((always_inline)) __m512i bf16_pairs(__m512i lo, __m512i hi,
                                                                            __m512i *emin)
{
    const __m512i eight = _mm512_set1_epi32(0xFF), mag = _mm512_set1_epi32(0x7FFFFFFF);
    *emin = _mm512_mask_min_epu32(*emin, _mm512_test_epi32_mask(lo, mag), *emin,
                                  _mm512_and_si512(_mm512_srli_epi32(lo, 23), eight));
    *emin = _mm512_mask_min_epu32(*emin, _mm512_test_epi32_mask(hi, mag), *emin,
                                  _mm512_and_si512(_mm512_srli_epi32(hi, 23), eight));
    return _mm512_or_si512(_mm512_srli_epi32(lo, 16),
                           _mm512_and_si512(hi, _mm512_set1_epi32((int)0xFFFF0000u)));
}

/* r[0..16) transposed in place (lane c of row i <-> lane i of row c): per
 * bit b of the index, rows r and r + b (bit b of r clear) swap their
 * off-diagonal b x b blocks. */
TARGET_BF16 static inline __attribute__((always_inline)) void transpose16(__m512i *r)
{
#pragma GCC unroll 4
    for (int b = 8; b >= 1; b /= 2) {
        int lo[16], hi[16];
        for (int c = 0; c < 16; ++c) {
            lo[c] = c & b ? 16 + c - b : c;
            hi[c] = c & b ? 16 + c : c + b;
        }
        const __m512i il = _mm512_loadu_si512(lo), ih = _mm512_loadu_si512(hi);
#pragma GCC unroll 16
        for (int i = 0; i < 16; ++i)
            if (!(i & b)) {
                const __m512i x = r[i], y = r[i + b];
                r[i] = _mm512_permutex2var_epi32(x, il, y);
                r[i + b] = _mm512_permutex2var_epi32(x, ih, y);
            }
    }
}

/* Weight rows n0 .. n0 + 16 (rows past the last repeat it) as bf16 pairs,
 * pair p of row ni at panel[p * 16 + ni]; code byte i of a block is the
 * pair of its k = 2i, 2i + 1. The block's table is the bf16 fp4 values with
 * the scale's exponent s - 127 added to the fields of the nonzero ones:
 * exact for scale bytes 2 ..  252 (the caller's guard), where every value
 * stays a normal bf16. The 16 entries sit twice in 32 words, so that one
 * vpermw decodes both nibbles: a dword b + (b << 12) holds b (index b & 31)
 * in its low word and b >> 4 in its high one. */
TARGET_BF16 static void decode16(const mla_mx_dp *d, int64_t n0, uint32_t *panel)
{
    const __m512i fp4 = _mm512_set_epi16(
        (short)0xC0C0, (short)0xC080, (short)0xC040, (short)0xC000, (short)0xBFC0, (short)0xBF80,
        (short)0xBF00, (short)0x8000, 0x40C0, 0x4080, 0x4040, 0x4000, 0x3FC0, 0x3F80, 0x3F00, 0,
        (short)0xC0C0, (short)0xC080, (short)0xC040, (short)0xC000, (short)0xBFC0, (short)0xBF80,
        (short)0xBF00, (short)0x8000, 0x40C0, 0x4080, 0x4040, 0x4000, 0x3FC0, 0x3F80, 0x3F00, 0);
    const __mmask32 nz = 0xFEFEFEFEu;
    /* row ni at c + ni * ldc, its scales at ws + ni * lds (the last row
     * repeated in a short last tile) */
    const int full = n0 + MLA_MX_TILE <= d->rows;
    const uint8_t *c = d->w + n0 * d->ldw;
    const float *ws = d->ws + n0 * d->nblk;
    const int64_t ldc = d->ldw, lds = d->nblk;
    const int64_t last = d->rows - 1 - n0;
    for (int64_t j = 0; j < d->nblk; ++j) {
        __m512i v[MLA_MX_TILE];
#pragma GCC unroll 16
        for (int ni = 0; ni < MLA_MX_TILE; ++ni) {
            const int64_t r = full || ni <= last ? ni : last;
            uint32_t sb;
            memcpy(&sb, ws + r * lds + j, sizeof sb);
            const short e = (short)(((int)(sb >> 23) - 127) * 128);
            const __m512i t = _mm512_mask_add_epi16(fp4, nz, fp4, _mm512_set1_epi16(e));
            const __m512i cb = _mm512_cvtepu8_epi32(
                _mm_loadu_si128((const __m128i *)(const void *)(c + r * ldc + 16 * j)));
            v[ni] = _mm512_permutexvar_epi16(_mm512_add_epi32(cb, _mm512_slli_epi32(cb, 12)), t);
        }
        transpose16(v); /* v[i] lane ni: pair 16 j + i */
#pragma GCC unroll 16
        for (int i = 0; i < 16; ++i)
            _mm512_storeu_si512(panel + (16 * j + i) * 16, v[i]);
    }
}

/* MT activation rows x 16 weight rows: acc[m] lane ni sums the pairs p in
 * order; written to out[m * ldo + n0 + ni]. */
TARGET_BF16 static inline __attribute__((always_inline)) void
tile_dp(const mla_mx_dp *d, const int MT, const uint32_t *panel, int64_t n0)
{
    const int64_t P = d->nblk * 16;
    __m512 acc[16];
#pragma GCC unroll 16
    for (int m = 0; m < MT; ++m)
        acc[m] = _mm512_setzero_ps();
    for (int64_t p = 0; p < P; ++p) {
        const __m512bh wv = (__m512bh)_mm512_loadu_si512(panel + p * 16);
#pragma GCC unroll 16
        for (int m = 0; m < MT; ++m)
            acc[m] =
                _mm512_dpbf16_ps(acc[m], (__m512bh)_mm512_set1_epi32((int)d->xt[p * 16 + m]), wv);
    }
    if (d->y) { /* F32 or BF16 y, unit stride: rows past d->rows masked off */
        const __mmask16 k = mla_v16_mask(d->rows - n0);
#pragma GCC unroll 16
        for (int m = 0; m < MT; ++m)
            mla_v16_store(d->y + m * d->ldy + n0 * (d->ybf16 ? 2 : 4), acc[m], d->ybf16, k);
        return;
    }
#pragma GCC unroll 16
    for (int m = 0; m < MT; ++m) /* ldo: a multiple of 16 */
        _mm512_storeu_ps(d->out + m * d->ldo + n0, acc[m]);
}

TARGET_BF16 static inline __attribute__((always_inline)) void rows_mt(const mla_mx_dp *d,
                                                                      const int MT)
{
    for (int64_t n0 = 0; n0 < d->rows; n0 += MLA_MX_TILE) {
        decode16(d, n0, d->panel);
        tile_dp(d, MT, d->panel, n0);
    }
}

#define MT_CASE(n)                                                                                 \
    case n:                                                                                        \
        rows_mt(d, n);                                                                             \
        break;

TARGET_BF16 static void rows_dp(const mla_mx_dp *d)
{
    switch (d->M) {
        MT_CASE(1)
        MT_CASE(2)
        MT_CASE(3)
        MT_CASE(4)
        MT_CASE(5)
        MT_CASE(6)
        MT_CASE(7)
        MT_CASE(8)
        MT_CASE(9)
        MT_CASE(10)
        MT_CASE(11)
        MT_CASE(12)
        MT_CASE(13)
        MT_CASE(14)
        MT_CASE(15)
    default:
        rows_mt(d, 16);
        break;
    }
}

/* The e2m1 value nearest to |s| (ties to the even code, above 6: 6) with
 * s's sign: the grid has steps 0.5 below 2, 1 below 4, 2 above, and its
 * even codes are the even multiples of each step, so round-to-nearest-even
 * at the step is the code's rounding. */
TARGET_BF16 static inline __attribute__((always_inline)) __m512 e2m1_round(__m512 s)
{
    const __m512 a = _mm512_abs_ps(s);
    const __m512 r1 = _mm512_roundscale_ps(a, 0x18); /* multiples of 0.5 */
    const __m512 r2 = _mm512_roundscale_ps(a, 0x08); /* of 1 */
    const __m512 r4 = _mm512_min_ps(
        _mm512_mul_ps(_mm512_roundscale_ps(_mm512_mul_ps(a, _mm512_set1_ps(0.5f)), 0x08),
                      _mm512_set1_ps(2.0f)),
        _mm512_set1_ps(6.0f));
    const __mmask16 lt4 = _mm512_cmp_ps_mask(a, _mm512_set1_ps(4.0f), _CMP_LT_OQ);
    const __mmask16 lt2 = _mm512_cmp_ps_mask(a, _mm512_set1_ps(2.0f), _CMP_LT_OQ);
    const __m512 r = _mm512_mask_blend_ps(lt2, _mm512_mask_blend_ps(lt4, r4, r2), r1);
    return _mm512_or_ps(r, _mm512_and_ps(s, _mm512_castsi512_ps(_mm512_set1_epi32(INT32_MIN))));
}

/* ad[0, K) = deq(Q(v[0, K))) de-interleaved per block (cpu/mxfp4_gemm.h),
 * Q the MXFP4 quant: per block the scale byte of core/format_bits.h, then
 * each value v * 2^-e rounded to e2m1 (exact: a power of two) and scaled
 * back (exact). 0 when a block's scale byte is 254 or 255 (the caller then
 * takes the scalar path). */
TARGET_BF16 static int round_trip_dp(const float *v, int64_t K, int production, float *ad)
{
    const __m512i mag = _mm512_set1_epi32(0x7FFFFFFF);
    const __m512i ie = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i io = _mm512_add_epi32(ie, _mm512_set1_epi32(1));
    for (int64_t k0 = 0; k0 < K; k0 += MLA_MX_BLOCK) {
        const __m512 a = _mm512_loadu_ps(v + k0), b = _mm512_loadu_ps(v + k0 + 16);
        const __m512i ma = _mm512_and_si512(_mm512_castps_si512(a), mag);
        const __m512i mb = _mm512_and_si512(_mm512_castps_si512(b), mag);
        const uint32_t amax = _mm512_reduce_max_epu32(_mm512_max_epu32(ma, mb));
        const uint8_t sb = mla_fb_mxfp4_scale_byte(amax, production);
        if (sb >= 254)
            return 0;
        __m512 ra = _mm512_setzero_ps(), rb = _mm512_setzero_ps(); /* a zero block: codes 0 */
        if (amax != 0) {
            const __m512 inv = _mm512_castsi512_ps(_mm512_set1_epi32((254 - sb) << 23));
            const __m512 sc = _mm512_set1_ps(mla_fb_e8m0_to_f32(sb));
            ra = _mm512_mul_ps(e2m1_round(_mm512_mul_ps(a, inv)), sc);
            rb = _mm512_mul_ps(e2m1_round(_mm512_mul_ps(b, inv)), sc);
        }
        _mm512_storeu_ps(ad + k0, _mm512_permutex2var_ps(ra, ie, rb));
        _mm512_storeu_ps(ad + k0 + 16, _mm512_permutex2var_ps(ra, io, rb));
    }
    return 1;
}

/* The xt of x[b]'s MXFP4 round trip straight from x (F32 or BF16 at unit
 * stride): per block, each row's 32 values loaded, rounded as
 * round_trip_dp, paired, then the 16 rows transposed. Returns the smallest
 * exponent field of the nonzero values, -1 for any other x, -2 when a
 * block's scale byte is 254 or 255. */
TARGET_BF16 static int x_prequant_dp(const mla_mxfp4_gemm_args *g, int64_t b, uint32_t *xt)
{
    const mla_tensor *x = &g->x;
    const int bf16 = x->dtype == MLA_DTYPE_BF16;
    if (x->stride[2] != 1 || (!bf16 && x->dtype != MLA_DTYPE_F32))
        return -1;
    const int production = g->rule == MLA_MXFP4_PRODUCTION;
    const int64_t K = g->K, M = g->M;
    const __m512i mag = _mm512_set1_epi32(0x7FFFFFFF);
    const __m512i ie = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i io = _mm512_add_epi32(ie, _mm512_set1_epi32(1));
    __m512i emin = _mm512_set1_epi32(0xFF); /* above every exponent field */
    for (int64_t k0 = 0; k0 < K; k0 += MLA_MX_BLOCK) {
        __m512i v[16];
        for (int m = 0; m < 16; ++m) {
            if (m >= M) {
                v[m] = _mm512_setzero_si512();
                continue;
            }
            const int64_t off = b * x->stride[0] + m * x->stride[1] + k0;
            __m512 a, c;
            if (bf16) {
                const uint16_t *r = (const uint16_t *)x->data + off;
                a = _mm512_castsi512_ps(_mm512_slli_epi32(
                    _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(const void *)r)),
                    16));
                c = _mm512_castsi512_ps(
                    _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(
                                          (const __m256i *)(const void *)(r + 16))),
                                      16));
            } else {
                a = _mm512_loadu_ps((const float *)x->data + off);
                c = _mm512_loadu_ps((const float *)x->data + off + 16);
            }
            const __m512i ma = _mm512_and_si512(_mm512_castps_si512(a), mag);
            const __m512i mc = _mm512_and_si512(_mm512_castps_si512(c), mag);
            const uint32_t amax = _mm512_reduce_max_epu32(_mm512_max_epu32(ma, mc));
            const uint8_t sb = mla_fb_mxfp4_scale_byte(amax, production);
            if (sb >= 254)
                return -2;
            __m512 ra = _mm512_setzero_ps(), rc = _mm512_setzero_ps(); /* a zero block */
            if (amax != 0) {
                const __m512 inv = _mm512_castsi512_ps(_mm512_set1_epi32((254 - sb) << 23));
                const __m512 sc = _mm512_set1_ps(mla_fb_e8m0_to_f32(sb));
                ra = _mm512_mul_ps(e2m1_round(_mm512_mul_ps(a, inv)), sc);
                rc = _mm512_mul_ps(e2m1_round(_mm512_mul_ps(c, inv)), sc);
            }
            const __m512i lo = _mm512_castps_si512(_mm512_permutex2var_ps(ra, ie, rc));
            const __m512i hi = _mm512_castps_si512(_mm512_permutex2var_ps(ra, io, rc));
            v[m] = bf16_pairs(lo, hi, &emin);
        }
        transpose16(v); /* v[i] lane m: pair k0 / 2 + i */
#pragma GCC unroll 16
        for (int i = 0; i < 16; ++i)
            _mm512_storeu_si512(xt + (k0 / 2 + i) * 16, v[i]);
    }
    return (int)_mm512_reduce_min_epu32(emin);
}

int mla_cpu_mx_x_prequant(const mla_mxfp4_gemm_args *g, int64_t b, uint32_t *xt)
{
    return x_prequant_dp(g, b, xt);
}

int mla_cpu_mx_round_trip(const float *v, int64_t K, int production, float *ad)
{
    return round_trip_dp(v, K, production, ad);
}

/* xt (pair p of row m at xt[p * 16 + m]) from de-interleaved fp32 rows,
 * exact in bf16: 16 rows' pairs of a block (zeros past M), transposed. */
TARGET_BF16 static int x_pairs_dp(const float *ad, int64_t K, int64_t M, uint32_t *xt)
{
    __m512i emin = _mm512_set1_epi32(0xFF); /* above every exponent field */
    for (int64_t k0 = 0; k0 < K; k0 += MLA_MX_BLOCK) {
        __m512i v[16];
        for (int m = 0; m < 16; ++m) {
            if (m >= M) {
                v[m] = _mm512_setzero_si512();
                continue;
            }
            const __m512i lo = _mm512_loadu_si512(ad + m * K + k0);
            const __m512i hi = _mm512_loadu_si512(ad + m * K + k0 + 16);
            v[m] = bf16_pairs(lo, hi, &emin);
        }
        transpose16(v); /* v[i] lane m: pair k0 / 2 + i */
#pragma GCC unroll 16
        for (int i = 0; i < 16; ++i)
            _mm512_storeu_si512(xt + (k0 / 2 + i) * 16, v[i]);
    }
    return (int)_mm512_reduce_min_epu32(emin);
}

/* xt from M <= 16 rows of contiguous codes xc (row m at xc + m * K / 2)
 * and their scale bytes xs (row m at xs + m * K / 32), decoded like the
 * weights. */
TARGET_BF16 static void x_codes_dp(const uint8_t *xc, const uint8_t *xs, int64_t K, int64_t M,
                                   uint32_t *xt)
{
    const __m512 fp4 = _mm512_setr_ps(0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f, -0.0f, -0.5f,
                                      -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f);
    const int64_t nblk = K / MLA_MX_BLOCK;
    for (int64_t j = 0; j < nblk; ++j) {
        __m512i v[16];
        for (int m = 0; m < 16; ++m) {
            if (m >= M) {
                v[m] = _mm512_setzero_si512();
                continue;
            }
            const __m512 sc = _mm512_set1_ps(mla_fb_e8m0_to_f32(xs[m * nblk + j]));
            const __m512i t = _mm512_srli_epi32(_mm512_castps_si512(_mm512_mul_ps(fp4, sc)), 16);
            const __m512i cb = _mm512_cvtepu8_epi32(
                _mm_loadu_si128((const __m128i *)(const void *)(xc + m * (K / 2) + 16 * j)));
            const __m512i lo = _mm512_permutexvar_epi32(cb, t);
            const __m512i hi = _mm512_permutexvar_epi32(_mm512_srli_epi32(cb, 4), t);
            v[m] = _mm512_or_si512(lo, _mm512_slli_epi32(hi, 16));
        }
        transpose16(v);
#pragma GCC unroll 16
        for (int i = 0; i < 16; ++i)
            _mm512_storeu_si512(xt + (16 * j + i) * 16, v[i]);
    }
}

void mla_cpu_mx_x_codes(const uint8_t *xc, const uint8_t *xs, int64_t K, int64_t M, uint32_t *xt)
{
    x_codes_dp(xc, xs, K, M, xt);
}

int mla_cpu_mx_x_pairs(const float *ad, int64_t K, int64_t M, uint32_t *xt)
{
    return x_pairs_dp(ad, K, M, xt);
}

void mla_cpu_mx_rows_dp(const mla_mx_dp *d) { rows_dp(d); }
#else
/* Not x86: the driver never picks these tiles. */
void mla_cpu_mx_rows_avx512(const mla_mx_rows *r, int mt) { (void)r, (void)mt; }

void mla_cpu_mx_rows_dp(const mla_mx_dp *d) { (void)d; }

int mla_cpu_mx_x_pairs(const float *ad, int64_t K, int64_t M, uint32_t *xt)
{
    (void)ad, (void)K, (void)M, (void)xt;
    return 0;
}

void mla_cpu_mx_x_codes(const uint8_t *xc, const uint8_t *xs, int64_t K, int64_t M, uint32_t *xt)
{
    (void)xc, (void)xs, (void)K, (void)M, (void)xt;
}

int mla_cpu_mx_round_trip(const float *v, int64_t K, int production, float *ad)
{
    (void)v, (void)K, (void)production, (void)ad;
    return 0;
}

int mla_cpu_mx_x_prequant(const mla_mxfp4_gemm_args *g, int64_t b, uint32_t *xt)
{
    (void)g, (void)b, (void)xt;
    return -1;
}
#endif
