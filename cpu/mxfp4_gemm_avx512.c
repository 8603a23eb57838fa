/* The AVX-512 tile of the CPU MXFP4 GEMMs (layout and contract in
 * cpu/mxfp4_gemm.h). Per 32-block and weight row: the 16 code bytes widen
 * to 16 lanes, vpermps picks the even-k weights (low nibble; vpermps reads
 * only an index's low 4 bits) and the odd-k weights (high nibble) from the
 * fp4 table times the block scale, and two FMAs per activation row add them
 * in. Lane l of an accumulator sums the k = 2l, 2l + 1 terms of every block;
 * one fixed reduction tree adds the 16 lanes of all 16 accumulators at the
 * end, so the summation order depends on nothing but K. */
#include "cpu/cpu_kernels.h"
#include "cpu/mxfp4_gemm.h"

#if MLA_CPU_X86
#include <immintrin.h>

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
    const __m512 fp4 = _mm512_setr_ps(0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f, -0.0f,
                                      -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f);
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
#else
/* Not x86: the driver never picks these tiles. */
void mla_cpu_mx_rows_avx512(const mla_mx_rows *r, int mt)
{
    (void)r, (void)mt;
}
#endif
