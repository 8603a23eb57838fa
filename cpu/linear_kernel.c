/* Per-ISA pieces of the CPU projection (cpu/linear_kernel.h).
 *
 * Portable and AVX2 copies: plain C, fp32 tiles only, multiply then add.
 * AVX-512: the micro-kernel keeps MT x NR zmm accumulators and uses FMA; it
 * reads W either from a decoded fp32 tile or straight from the weights
 * (cpu/avx512_vec.h: bf16 by a shift, fp8 through fp16 and the folded scale,
 * fl(code * scale) exactly). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu_rows.h"
#include "cpu/linear_kernel.h"

#if MLA_CPU_X86
#include <immintrin.h>
#endif

MLA_CPU_INLINE void pack_body(const mla_tensor *x, int64_t t0, int64_t t1, float *out,
                              int64_t ldo)
{
    const int64_t K = x->shape[1], sz = (int64_t)mla_dtype_size(x->dtype);
    for (int64_t t = t0; t < t1; ++t)
        mla_cpu_load_float((const char *)x->data + t * x->stride[0] * sz, x->dtype, x->stride[1],
                           K, out + t * ldo);
}

/* fp8 row values [k, k + len) of row n, within one scale block, times s. */
MLA_CPU_INLINE void fp8_exact(const mla_tensor *w, int64_t n, int64_t k, int64_t len, float s,
                              float *o)
{
    mla_cpu_load_fp8((const uint8_t *)w->data + n * w->stride[0] + k * w->stride[1], w->dtype,
                     w->stride[1], len, o);
    MLA_SIMD for (int64_t i = 0; i < len; ++i) o[i] *= s;
}

MLA_CPU_INLINE void decode_body(const mla_linear_args *a, int64_t n0, int64_t nr, int64_t k0,
                                int64_t kc, float *out, int64_t ldo)
{
    const mla_tensor *w = &a->w, *sc = &a->w_scale;
    for (int64_t r = 0; r < nr; ++r) {
        const int64_t n = n0 + r;
        float *o = out + r * ldo;
        if (w->dtype == MLA_DTYPE_BF16) {
            mla_cpu_load_float((const uint16_t *)w->data + n * w->stride[0] + k0 * w->stride[1],
                               MLA_DTYPE_BF16, w->stride[1], kc, o);
            continue;
        }
        const float *srow = (const float *)sc->data + (n / WBLOCK) * sc->stride[0];
        for (int64_t b = 0; b < kc; b += WBLOCK)
            fp8_exact(w, n, k0 + b, kc - b < WBLOCK ? kc - b : WBLOCK,
                      srow[((k0 + b) / WBLOCK) * sc->stride[1]], o + b);
    }
}

/* Portable: one output's 16 lanes at a time, over the fp32 tile. */
MLA_CPU_INLINE void ukr_body(const float *x, int64_t ldx, int mt, const lin_wtile *w, int64_t kc,
                             float *lanes, int first, float *sums)
{
    for (int t = 0; t < mt; ++t)
        for (int j = 0; j < NR; ++j) {
            const float *xr = x + t * ldx, *wr = (const float *)w->row[j];
            float *ln = lanes + (t * NR + j) * LANES, acc[LANES];
            for (int l = 0; l < LANES; ++l)
                acc[l] = first ? 0.0f : ln[l];
            int64_t k = 0;
            for (; k + LANES <= kc; k += LANES)
                for (int l = 0; l < LANES; ++l)
                    acc[l] += xr[k + l] * wr[k + l];
            for (int l = 0; k + l < kc; ++l)
                acc[l] += xr[k + l] * wr[k + l];
            if (sums)
                sums[t * NR + j] = mla_cpu_linear_reduce(acc);
            else
                memcpy(ln, acc, sizeof acc);
        }
}

static void pack_generic(const mla_tensor *x, int64_t t0, int64_t t1, float *out, int64_t ldo)
{
    pack_body(x, t0, t1, out, ldo);
}
static void decode_generic(const mla_linear_args *a, int64_t n0, int64_t nr, int64_t k0,
                           int64_t kc, float *out, int64_t ldo)
{
    decode_body(a, n0, nr, k0, kc, out, ldo);
}
static void ukr_generic(const float *x, int64_t ldx, int mt, const lin_wtile *w, int64_t kc,
                        float *lanes, int first, float *sums)
{
    ukr_body(x, ldx, mt, w, kc, lanes, first, sums);
}
static const lin_fns fns_generic = {pack_generic, decode_generic, ukr_generic, 0, NULL, NULL, NULL, NULL};

#if MLA_CPU_X86
MLA_TARGET_AVX2 static void pack_avx2(const mla_tensor *x, int64_t t0, int64_t t1, float *out,
                                      int64_t ldo)
{
    pack_body(x, t0, t1, out, ldo);
}
MLA_TARGET_AVX2 static void decode_avx2(const mla_linear_args *a, int64_t n0, int64_t nr,
                                        int64_t k0, int64_t kc, float *out, int64_t ldo)
{
    decode_body(a, n0, nr, k0, kc, out, ldo);
}
MLA_TARGET_AVX2 static void ukr_avx2(const float *x, int64_t ldx, int mt, const lin_wtile *w,
                                     int64_t kc, float *lanes, int first, float *sums)
{
    ukr_body(x, ldx, mt, w, kc, lanes, first, sums);
}
static const lin_fns fns_avx2 = {pack_avx2, decode_avx2, ukr_avx2, 0, NULL, NULL, NULL, NULL};

#define AVX512_INLINE MLA_AVX512_INLINE
#if defined(__clang__)
#define MLA_UNROLL _Pragma("unroll")
#elif defined(__GNUC__)
#define MLA_UNROLL _Pragma("GCC unroll 8")
#else
#define MLA_UNROLL
#endif

MLA_TARGET_AVX512 static void pack_avx512(const mla_tensor *x, int64_t t0, int64_t t1,
                                          float *out, int64_t ldo)
{
    pack_body(x, t0, t1, out, ldo);
}

/* decode_body with the vector fp8 path where W's rows are contiguous and the
 * fold s * 2^8 | 2^7 is exact (no overflow). */
MLA_TARGET_AVX512 static void decode_avx512(const mla_linear_args *a, int64_t n0, int64_t nr,
                                            int64_t k0, int64_t kc, float *out, int64_t ldo)
{
    const mla_tensor *w = &a->w, *sc = &a->w_scale;
    if (w->stride[1] != 1 || w->dtype == MLA_DTYPE_BF16) {
        decode_body(a, n0, nr, k0, kc, out, ldo);
        return;
    }
    const int fn = w->dtype == MLA_DTYPE_FP8_E4M3FN;
    for (int64_t r = 0; r < nr; ++r) {
        const int64_t n = n0 + r;
        const uint8_t *c = (const uint8_t *)w->data + n * w->stride[0];
        const float *srow = (const float *)sc->data + (n / WBLOCK) * sc->stride[0];
        for (int64_t b = 0; b < kc; b += WBLOCK) {
            const int64_t len = kc - b < WBLOCK ? kc - b : WBLOCK, k = k0 + b;
            const float s = srow[(k / WBLOCK) * sc->stride[1]];
            const float sp = mla_v16_fp8_fold(fn ? MLA_V16_FN : MLA_V16_FNUZ, s);
            float *o = out + r * ldo + b;
            if (isfinite(s) && !isfinite(sp)) {
                fp8_exact(w, n, k, len, s, o);
                continue;
            }
            for (int64_t i = 0; i < len; i += LANES) {
                const __mmask16 m = mla_v16_mask(len - i);
                _mm512_mask_storeu_ps(o + i, m,
                                      fn ? mla_v16_load(c + k + i, MLA_V16_FN, sp, m)
                                         : mla_v16_load(c + k + i, MLA_V16_FNUZ, sp, m));
            }
        }
    }
}

/* One step of the micro-kernel: values k .. k+15 (lanes m) of every row. */
AVX512_INLINE void step512(__m512 acc[MT][NR], const float *x, int64_t ldx, const int MTC,
                           const lin_wtile *w, const int KIND, int64_t k, __mmask16 m)
{
    const int64_t wsz = MLA_V16_SIZE(KIND);
    const char *w0 = w->row[0], *w1 = w->row[1], *w2 = w->row[2];
    const uint64_t blk = (uint64_t)(w->k0 + k) / WBLOCK;
    const float s0 = KIND >= MLA_V16_FN ? w->s[0][blk] : 0.0f;
    const float s1 = KIND >= MLA_V16_FN ? w->s[1][blk] : 0.0f;
    const float s2 = KIND >= MLA_V16_FN ? w->s[2][blk] : 0.0f;
    if (w->ahead) { /* W streams in: fetch the next tile's rows */
        _mm_prefetch(w0 + k * wsz + w->ahead, _MM_HINT_T0);
        _mm_prefetch(w1 + k * wsz + w->ahead, _MM_HINT_T0);
        _mm_prefetch(w2 + k * wsz + w->ahead, _MM_HINT_T0);
    }
    const __m512 v0 = mla_v16_load(w0 + k * wsz, KIND, s0, m), v1 = mla_v16_load(w1 + k * wsz, KIND, s1, m);
    const __m512 v2 = mla_v16_load(w2 + k * wsz, KIND, s2, m);
    MLA_UNROLL for (int t = 0; t < MTC; ++t) {
        __m512 xv = _mm512_maskz_loadu_ps(m, x + t * ldx + k);
#if defined(__GNUC__)
        __asm__("" : "+v"(xv)); /* one load into a register, not one per FMA operand */
#endif
        acc[t][0] = _mm512_fmadd_ps(xv, v0, acc[t][0]);
        acc[t][1] = _mm512_fmadd_ps(xv, v1, acc[t][1]);
        acc[t][2] = _mm512_fmadd_ps(xv, v2, acc[t][2]);
    }
}

/* sums[f] = mla_cpu_linear_reduce(lanes of v[f]) for f < 16, as a network:
 * each level adds the lanes of one tree level for pairs of vectors at once
 * (128-bit halves, 128-bit quarters, then within quarters), which leaves
 * the sum of v[4c + i] in lane 4i + c. */
AVX512_INLINE void reduce16(const __m512 v[16], float *sums, int n)
{
    __m512 u[8], r[4], g[2];
    for (int p = 0; p < 8; ++p) /* lanes l + (l + 8) */
        u[p] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * p], v[2 * p + 1], 0x44),
                             _mm512_shuffle_f32x4(v[2 * p], v[2 * p + 1], 0xEE));
    for (int q = 0; q < 4; ++q) /* then l + (l + 4) */
        r[q] = _mm512_add_ps(_mm512_shuffle_f32x4(u[2 * q], u[2 * q + 1], 0x88),
                             _mm512_shuffle_f32x4(u[2 * q], u[2 * q + 1], 0xDD));
    for (int h = 0; h < 2; ++h) /* then l + (l + 2) */
        g[h] = _mm512_add_ps(_mm512_shuffle_ps(r[2 * h], r[2 * h + 1], 0x44),
                             _mm512_shuffle_ps(r[2 * h], r[2 * h + 1], 0xEE));
    const __m512 f = _mm512_add_ps(_mm512_shuffle_ps(g[0], g[1], 0x88),
                                   _mm512_shuffle_ps(g[0], g[1], 0xDD));
    /* sum of v[j] sits in lane 4 (j % 4) + j / 4 */
    const __m512i idx = _mm512_set_epi32(15, 11, 7, 3, 14, 10, 6, 2, 13, 9, 5, 1, 12, 8, 4, 0);
    _mm512_mask_storeu_ps(sums, (__mmask16)((1u << n) - 1u), _mm512_permutexvar_ps(idx, f));
}

/* sums[f] for the n <= 2 * 16 outputs whose lanes are stored at lanes[f][16]. */
MLA_TARGET_AVX512 static void finish512(const float *lanes, int n, float *sums)
{
    __m512 v[32];
    for (int f = 0; f < 32; ++f)
        v[f] = f < n ? _mm512_loadu_ps(lanes + f * LANES) : _mm512_setzero_ps();
    reduce16(v, sums, n < 16 ? n : 16);
    if (n > 16)
        reduce16(v + 16, sums + 16, n - 16);
}

/* MTC x NR zmm accumulators, W of kind KIND; the last partial step under a mask. */
AVX512_INLINE void ukr512(const float *x, int64_t ldx, const int MTC, const lin_wtile *w,
                          const int KIND, int64_t kc, float *lanes, int first, float *sums)
{
    __m512 acc[MT][NR]; /* unrolled early (pragmas), so that they become registers */
    MLA_UNROLL for (int t = 0; t < MTC; ++t)
        MLA_UNROLL for (int j = 0; j < NR; ++j)
            acc[t][j] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(lanes + (t * NR + j) * LANES);
    int64_t k = 0;
    for (; k + LANES <= kc; k += LANES)
        step512(acc, x, ldx, MTC, w, KIND, k, (__mmask16)0xFFFF);
    if (k < kc)
        step512(acc, x, ldx, MTC, w, KIND, k, (__mmask16)((1u << (kc - k)) - 1u));
    MLA_UNROLL for (int t = 0; t < MTC; ++t)
        MLA_UNROLL for (int j = 0; j < NR; ++j)
            _mm512_storeu_ps(lanes + (t * NR + j) * LANES, acc[t][j]);
    if (sums)
        finish512(lanes, MTC * NR, sums);
}

/* One copy per token count, so that the accumulators stay in registers. */
AVX512_INLINE void ukr512_mt(const float *x, int64_t ldx, int mt, const lin_wtile *w,
                             const int KIND, int64_t kc, float *lanes, int first, float *sums)
{
    switch (mt) {
    case 1: ukr512(x, ldx, 1, w, KIND, kc, lanes, first, sums); break;
    case 2: ukr512(x, ldx, 2, w, KIND, kc, lanes, first, sums); break;
    case 3: ukr512(x, ldx, 3, w, KIND, kc, lanes, first, sums); break;
    case 4: ukr512(x, ldx, 4, w, KIND, kc, lanes, first, sums); break;
    case 5: ukr512(x, ldx, 5, w, KIND, kc, lanes, first, sums); break;
    case 6: ukr512(x, ldx, 6, w, KIND, kc, lanes, first, sums); break;
    case 7: ukr512(x, ldx, 7, w, KIND, kc, lanes, first, sums); break;
    default: ukr512(x, ldx, MT, w, KIND, kc, lanes, first, sums); break;
    }
}

MLA_TARGET_AVX512 static void ukr_avx512(const float *x, int64_t ldx, int mt, const lin_wtile *w,
                                         int64_t kc, float *lanes, int first, float *sums)
{
    switch (w->kind) {
    case MLA_V16_BF16: ukr512_mt(x, ldx, mt, w, MLA_V16_BF16, kc, lanes, first, sums); break;
    case MLA_V16_FN: ukr512_mt(x, ldx, mt, w, MLA_V16_FN, kc, lanes, first, sums); break;
    case MLA_V16_FNUZ: ukr512_mt(x, ldx, mt, w, MLA_V16_FNUZ, kc, lanes, first, sums); break;
    default: ukr512_mt(x, ldx, mt, w, MLA_V16_F32, kc, lanes, first, sums); break;
    }
}
static const lin_fns fns_avx512 = {pack_avx512, decode_avx512, ukr_avx512, 1, NULL, NULL, NULL, NULL};

#if defined(__clang__)
#define TARGET_BF16 __attribute__((target(MLA_AVX512_ISAS ",avx512bf16")))
#else
#define TARGET_BF16 __attribute__((target(MLA_AVX512_ISAS ",avx512bf16,prefer-vector-width=512")))
#endif

/* 32 bf16 of row p from value k on (lanes m: 2 bits per fp32 lane), as pairs. */
TARGET_BF16 static inline __attribute__((always_inline)) __m512bh
pairs(const uint16_t *p, __mmask32 m)
{
    return (__m512bh)_mm512_maskz_loadu_epi16(m, p);
}

/* MTC x NR accumulators; 32 values of k per step, the tail under a mask. */
TARGET_BF16 static inline __attribute__((always_inline)) void
ukrdp(const uint16_t *x, int64_t ldx, const int MTC, const lin_wtile *w, int64_t kc, float *lanes,
      int first, float *sums)
{
    const uint16_t *w0 = w->row[0], *w1 = w->row[1], *w2 = w->row[2];
    __m512 acc[MT][NR];
    MLA_UNROLL for (int t = 0; t < MTC; ++t)
        MLA_UNROLL for (int j = 0; j < NR; ++j)
            acc[t][j] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(lanes + (t * NR + j) * LANES);
    for (int64_t k = 0; k < kc; k += 2 * LANES) {
        const __mmask32 m = kc - k >= 2 * LANES ? 0xFFFFFFFFu : (__mmask32)((1ull << (kc - k)) - 1u);
        if (w->ahead) {
            _mm_prefetch((const char *)(w0 + k) + w->ahead, _MM_HINT_T0);
            _mm_prefetch((const char *)(w1 + k) + w->ahead, _MM_HINT_T0);
            _mm_prefetch((const char *)(w2 + k) + w->ahead, _MM_HINT_T0);
        }
        const __m512bh v0 = pairs(w0 + k, m), v1 = pairs(w1 + k, m), v2 = pairs(w2 + k, m);
        MLA_UNROLL for (int t = 0; t < MTC; ++t) {
            __m512bh xv = pairs(x + t * ldx + k, m);
#if defined(__GNUC__)
            __asm__("" : "+v"(xv)); /* one load into a register, not one per operand */
#endif
            acc[t][0] = _mm512_dpbf16_ps(acc[t][0], xv, v0);
            acc[t][1] = _mm512_dpbf16_ps(acc[t][1], xv, v1);
            acc[t][2] = _mm512_dpbf16_ps(acc[t][2], xv, v2);
        }
    }
    MLA_UNROLL for (int t = 0; t < MTC; ++t)
        MLA_UNROLL for (int j = 0; j < NR; ++j)
            _mm512_storeu_ps(lanes + (t * NR + j) * LANES, acc[t][j]);
    if (sums)
        finish512(lanes, MTC * NR, sums);
}

TARGET_BF16 static void ukr_dp(const uint16_t *x, int64_t ldx, int mt, const lin_wtile *w,
                               int64_t kc, float *lanes, int first, float *sums)
{
    switch (mt) {
    case 1: ukrdp(x, ldx, 1, w, kc, lanes, first, sums); break;
    case 2: ukrdp(x, ldx, 2, w, kc, lanes, first, sums); break;
    case 3: ukrdp(x, ldx, 3, w, kc, lanes, first, sums); break;
    case 4: ukrdp(x, ldx, 4, w, kc, lanes, first, sums); break;
    case 5: ukrdp(x, ldx, 5, w, kc, lanes, first, sums); break;
    case 6: ukrdp(x, ldx, 6, w, kc, lanes, first, sums); break;
    case 7: ukrdp(x, ldx, 7, w, kc, lanes, first, sums); break;
    default: ukrdp(x, ldx, MT, w, kc, lanes, first, sums); break;
    }
}
/* mla_cpu_bf16_min_exp, 32 values at a time: the exponent bits of the
 * nonzero ones into an unsigned 16-bit minimum. */
TARGET_BF16 static int min_exp_dp(const uint16_t *p, int64_t n)
{
    __m512i m = _mm512_set1_epi16(0x7F80);
    const __m512i em = _mm512_set1_epi16(0x7F80), mag = _mm512_set1_epi16(0x7FFF);
    for (int64_t i = 0; i < n; i += 2 * LANES) {
        const __mmask32 ld = n - i >= 2 * LANES ? 0xFFFFFFFFu : (__mmask32)((1ull << (n - i)) - 1u);
        const __m512i v = _mm512_maskz_loadu_epi16(ld, p + i);
        const __mmask32 nz = _mm512_test_epi16_mask(v, mag);
        m = _mm512_mask_min_epu16(m, nz, m, _mm512_and_si512(v, em));
    }
    /* fold the 32 lanes: 256, 128, 64 bits, then the words of a qword */
    __m256i h = _mm256_min_epu16(_mm512_castsi512_si256(m), _mm512_extracti64x4_epi64(m, 1));
    __m128i q = _mm_min_epu16(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
    q = _mm_min_epu16(q, _mm_srli_si128(q, 8));
    q = _mm_min_epu16(q, _mm_srli_si128(q, 4));
    q = _mm_min_epu16(q, _mm_srli_si128(q, 2));
    const unsigned e = (unsigned)_mm_extract_epi16(q, 0) >> 7;
    return (int)e; /* 0xFF: no nonzero value (or only inf / NaN) */
}

/* 32 fp8 codes -> their exact values as bf16 (fp8 values are bf16 values):
 * normal codes rebias, (m << 4) + (127 - bias) << 7 for the 7 magnitude bits
 * m; the 8 subnormal magnitudes (exponent field 0) from a table; the sign to
 * bit 15; NaN codes (e4m3fn 0x7F / 0xFF, e4m3fnuz 0x80) -> 0x7FC0, the bf16
 * of mla_fb_e4m3fn(uz)_to_f32's +NaN. */
TARGET_BF16 static inline __attribute__((always_inline)) __m512i fp8x32_bf16(__m256i c8, int fnuz)
{
    static const uint16_t sub_fn[32] = {0, 0x3B00, 0x3B80, 0x3BC0, 0x3C00, 0x3C20, 0x3C40, 0x3C60};
    static const uint16_t sub_fnuz[32] = {0,      0x3A80, 0x3B00, 0x3B40,
                                          0x3B80, 0x3BA0, 0x3BC0, 0x3BE0};
    const __m512i c = _mm512_cvtepu8_epi16(c8);
    const __m512i m = _mm512_and_si512(c, _mm512_set1_epi16(0x7F));
    __m512i v = _mm512_add_epi16(_mm512_slli_epi16(m, 4),
                                 _mm512_set1_epi16((short)((fnuz ? 119 : 120) << 7)));
    const __mmask32 sub = _mm512_cmplt_epu16_mask(m, _mm512_set1_epi16(8));
    v = _mm512_mask_permutexvar_epi16(v, sub, m, _mm512_loadu_si512(fnuz ? sub_fnuz : sub_fn));
    v = _mm512_or_si512(v, _mm512_slli_epi16(_mm512_and_si512(c, _mm512_set1_epi16(0x80)), 8));
    const __mmask32 nan = fnuz ? _mm512_cmpeq_epi16_mask(c, _mm512_set1_epi16(0x80))
                               : _mm512_cmpeq_epi16_mask(m, _mm512_set1_epi16(0x7F));
    return _mm512_mask_mov_epi16(v, nan, _mm512_set1_epi16(0x7FC0));
}

TARGET_BF16 static void fp8_to_bf16(const uint8_t *codes, int64_t n, int fnuz, uint16_t *out)
{
    for (int64_t i = 0; i < n; i += 2 * LANES) {
        const __mmask32 m = n - i >= 2 * LANES ? 0xFFFFFFFFu : (__mmask32)((1ull << (n - i)) - 1u);
        const __m512i v = fp8x32_bf16(_mm256_maskz_loadu_epi8(m, codes + i), fnuz);
        _mm512_storeu_si512(out + i, _mm512_maskz_mov_epi16(m, v)); /* zeros past n */
    }
}

/* MTC (<= MT / 2) x NR lanes plus as many block sums; blocks of WBLOCK. */
TARGET_BF16 static inline __attribute__((always_inline)) void
ukrdp8(const uint16_t *x, int64_t ldx, const int MTC, const uint16_t *w, int64_t ldw,
       const float *const *s, int64_t ss, int64_t kc, float *lanes, int first, float *sums)
{
    __m512 acc[MT / 2][NR];
    MLA_UNROLL for (int t = 0; t < MTC; ++t)
        MLA_UNROLL for (int j = 0; j < NR; ++j)
            acc[t][j] = first ? _mm512_setzero_ps() : _mm512_loadu_ps(lanes + (t * NR + j) * LANES);
    for (int64_t b0 = 0; b0 < kc; b0 += WBLOCK) {
        const int64_t b1 = kc - b0 < WBLOCK ? kc : b0 + WBLOCK;
        __m512 blk[MT / 2][NR];
        MLA_UNROLL for (int t = 0; t < MTC; ++t)
            MLA_UNROLL for (int j = 0; j < NR; ++j)
                blk[t][j] = _mm512_setzero_ps();
        for (int64_t k = b0; k < b1; k += 2 * LANES) {
            const __mmask32 m = b1 - k >= 2 * LANES ? 0xFFFFFFFFu : (__mmask32)((1ull << (b1 - k)) - 1u);
            const __m512bh v0 = pairs(w + k, m), v1 = pairs(w + ldw + k, m);
            const __m512bh v2 = pairs(w + 2 * ldw + k, m);
            MLA_UNROLL for (int t = 0; t < MTC; ++t) {
                __m512bh xv = pairs(x + t * ldx + k, m);
#if defined(__GNUC__)
                __asm__("" : "+v"(xv));
#endif
                blk[t][0] = _mm512_dpbf16_ps(blk[t][0], xv, v0);
                blk[t][1] = _mm512_dpbf16_ps(blk[t][1], xv, v1);
                blk[t][2] = _mm512_dpbf16_ps(blk[t][2], xv, v2);
            }
        }
        const int64_t bi = (b0 / WBLOCK) * ss;
        const __m512 s0 = _mm512_set1_ps(s[0][bi]), s1 = _mm512_set1_ps(s[1][bi]);
        const __m512 s2 = _mm512_set1_ps(s[2][bi]);
        MLA_UNROLL for (int t = 0; t < MTC; ++t) {
            acc[t][0] = _mm512_fmadd_ps(blk[t][0], s0, acc[t][0]);
            acc[t][1] = _mm512_fmadd_ps(blk[t][1], s1, acc[t][1]);
            acc[t][2] = _mm512_fmadd_ps(blk[t][2], s2, acc[t][2]);
        }
    }
    MLA_UNROLL for (int t = 0; t < MTC; ++t)
        MLA_UNROLL for (int j = 0; j < NR; ++j)
            _mm512_storeu_ps(lanes + (t * NR + j) * LANES, acc[t][j]);
    if (sums)
        finish512(lanes, MTC * NR, sums);
}

TARGET_BF16 static void ukr_dp8(const uint16_t *x, int64_t ldx, int mt, const uint16_t *w,
                                int64_t ldw, const float *const *s, int64_t ss, int64_t kc,
                                float *lanes, int first, float *sums)
{
    switch (mt) {
    case 1: ukrdp8(x, ldx, 1, w, ldw, s, ss, kc, lanes, first, sums); break;
    case 2: ukrdp8(x, ldx, 2, w, ldw, s, ss, kc, lanes, first, sums); break;
    case 3: ukrdp8(x, ldx, 3, w, ldw, s, ss, kc, lanes, first, sums); break;
    default: ukrdp8(x, ldx, MT / 2, w, ldw, s, ss, kc, lanes, first, sums); break;
    }
}

static const lin_fns fns_avx512_bf16 = {pack_avx512, decode_avx512, ukr_avx512, 1, ukr_dp,
                                        min_exp_dp, fp8_to_bf16, ukr_dp8};

/* vdpbf16ps on this CPU, unless MLA_CPU_ISA=avx512-nobf16 (read per call, as
 * the indexer does, so tests can run both paths on one machine). */
static int has_bf16(void)
{
    const char *env = getenv("MLA_CPU_ISA");
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512bf16") && !(env && strcmp(env, "avx512-nobf16") == 0);
}
#endif

const lin_fns *mla_cpu_linear_fns(mla_cpu_isa isa)
{
#if MLA_CPU_X86
    if (isa == MLA_CPU_ISA_AVX512)
        return has_bf16() ? &fns_avx512_bf16 : &fns_avx512;
    if (isa == MLA_CPU_ISA_AVX2)
        return &fns_avx2;
#endif
    (void)isa;
    return &fns_generic;
}
