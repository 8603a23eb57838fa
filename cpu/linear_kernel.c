/* Per-ISA pieces of the CPU projection (cpu/linear_kernel.h).
 *
 * Portable copy: plain C, fp32 tiles only, multiply then add; the AVX2
 * copy's micro-kernel (cpu/linear_kernel_avx2.c) does the same arithmetic
 * in ymm registers and also reads bf16 W in place.
 * AVX-512: the micro-kernel keeps MT x NR zmm accumulators and uses FMA; it
 * reads W either from a decoded fp32 tile or straight from the weights
 * (cpu/avx512_vec.h: bf16 by a shift, fp8 through fp16 and the folded scale,
 * fl(code * scale) exactly). The AVX512-BF16 kernels are in
 * cpu/linear_kernel_bf16.c. */
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
static const lin_fns fns_generic = {pack_generic, decode_generic, ukr_generic, 0, NULL, NULL, NULL, NULL, 0};

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
/* bf16 W in place up to 4 tokens: W's bytes once, instead of a decode pass
 * writing and re-reading twice as many */
static const lin_fns fns_avx2 = {
    pack_avx2, decode_avx2, mla_cpu_linear_ukr_avx2, 0, NULL, NULL, NULL, NULL, 4};

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
MLA_TARGET_AVX512 void mla_cpu_linear_finish512(const float *lanes, int n, float *sums)
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
        mla_cpu_linear_finish512(lanes, MTC * NR, sums);
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
static const lin_fns fns_avx512 = {pack_avx512, decode_avx512, ukr_avx512, 1, NULL, NULL, NULL, NULL, 0};
static const lin_fns fns_avx512_bf16 = {pack_avx512, decode_avx512, ukr_avx512, 1,
                                        mla_cpu_linear_ukr_dp, mla_cpu_linear_min_exp,
                                        mla_cpu_linear_fp8_to_bf16, mla_cpu_linear_ukr_dp8, 0};

#endif

const lin_fns *mla_cpu_linear_fns(mla_cpu_isa isa, int bf16)
{
#if MLA_CPU_X86
    if (isa == MLA_CPU_ISA_AVX512)
        return bf16 ? &fns_avx512_bf16 : &fns_avx512;
    if (isa == MLA_CPU_ISA_AVX2)
        return &fns_avx2;
#endif
    (void)isa, (void)bf16;
    return &fns_generic;
}
