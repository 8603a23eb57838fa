/* AVX2 micro-kernel of the CPU projection (lin_fns.ukr of the AVX2 copy,
 * cpu/linear_kernel.h): the portable kernel's arithmetic, lane l of output
 * (t, j) adding fl(x[t, k] * w[j, k]) for k % 16 == l in k order (multiply,
 * then add: no FMA, so the bits are the portable copy's), with the 16 lanes
 * of an output as two ymm vectors. Tokens go in pairs (2 x NR x 2
 * accumulators); a later pair reads the tile again from cache. W is a
 * decoded fp32 tile or bf16 read where it lies (a shift per value). */
#include <string.h>

#include "cpu/avx2_vec.h"
#include "cpu/linear_kernel.h"

#if MLA_CPU_X86
#define INL MLA_AVX2_INLINE
#define UNROLL MLA_AVX2_UNROLL

/* The 16 lanes a0 (0..7), a1 (8..15) added in mla_cpu_linear_reduce's tree:
 * l + (l + 8), then + 4, + 2, + 1, the lower lane first. */
INL float reduce(__m256 a0, __m256 a1)
{
    const __m256 v = _mm256_add_ps(a0, a1);
    __m128 q = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    q = _mm_add_ps(q, _mm_movehl_ps(q, q));
    q = _mm_add_ss(q, _mm_shuffle_ps(q, q, 1));
    return _mm_cvtss_f32(q);
}

/* TC (1 or 2) tokens x NR rows; pf: the next tile's rows (NULL: none), read
 * ahead in address order, NR * LANES values of W per step. */
INL void tokens(const float *x, int64_t ldx, const int TC, const lin_wtile *w, const int BF,
                int64_t kc, const char *pf, float *lanes, int first, float *sums)
{
    const int64_t wsz = BF ? 2 : 4;
    const char *wr[NR];
    __m256 acc[2][NR][2];
    UNROLL for (int j = 0; j < NR; ++j)
    {
        wr[j] = (const char *)w->row[j];
        UNROLL for (int t = 0; t < TC; ++t) UNROLL for (int h = 0; h < 2; ++h) acc[t][j][h] =
            first ? _mm256_setzero_ps() : _mm256_loadu_ps(lanes + (t * NR + j) * LANES + 8 * h);
    }
    int64_t k = 0;
    for (; k + LANES <= kc; k += LANES) {
        if (pf)
            for (int64_t o = 0; o < NR * LANES * wsz; o += 64)
                _mm_prefetch(pf + NR * k * wsz + o, _MM_HINT_T0);
        UNROLL for (int j = 0; j < NR; ++j)
        {
            const __m256 w0 = mla_avx2_w8(wr[j] + k * wsz, BF), w1 = mla_avx2_w8(wr[j] + (k + 8) * wsz, BF);
            UNROLL for (int t = 0; t < TC; ++t)
            {
                const float *xt = x + t * ldx + k;
                acc[t][j][0] = _mm256_add_ps(acc[t][j][0], _mm256_mul_ps(_mm256_loadu_ps(xt), w0));
                acc[t][j][1] =
                    _mm256_add_ps(acc[t][j][1], _mm256_mul_ps(_mm256_loadu_ps(xt + 8), w1));
            }
        }
    }
    if (k < kc) { /* the last n < 16 values: zero-padded copies, the sums blended in by lane */
        const int n = (int)(kc - k);
        const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), nv = _mm256_set1_epi32(n);
        const __m256 m[2] = {_mm256_castsi256_ps(_mm256_cmpgt_epi32(nv, lane)),
                             _mm256_castsi256_ps(_mm256_cmpgt_epi32(
                                 nv, _mm256_add_epi32(lane, _mm256_set1_epi32(8))))};
        float xt[2][LANES] = {{0}}, wt[NR][LANES] = {{0}};
        for (int t = 0; t < TC; ++t)
            for (int l = 0; l < n; ++l)
                xt[t][l] = x[t * ldx + k + l];
        for (int j = 0; j < NR; ++j)
            for (int l = 0; l < n; ++l) {
                if (!BF) {
                    wt[j][l] = ((const float *)wr[j])[k + l];
                    continue;
                }
                const uint32_t u = (uint32_t)((const uint16_t *)wr[j])[k + l] << 16;
                memcpy(&wt[j][l], &u, sizeof u);
            }
        UNROLL for (int j = 0; j < NR; ++j) UNROLL for (int t = 0; t < TC; ++t)
            UNROLL for (int h = 0; h < 2; ++h)
        {
            const __m256 p =
                _mm256_mul_ps(_mm256_loadu_ps(xt[t] + 8 * h), _mm256_loadu_ps(wt[j] + 8 * h));
            acc[t][j][h] = _mm256_blendv_ps(acc[t][j][h], _mm256_add_ps(acc[t][j][h], p), m[h]);
        }
    }
    UNROLL for (int t = 0; t < TC; ++t) UNROLL for (int j = 0; j < NR; ++j)
    {
        if (sums) {
            sums[t * NR + j] = reduce(acc[t][j][0], acc[t][j][1]);
            continue;
        }
        _mm256_storeu_ps(lanes + (t * NR + j) * LANES, acc[t][j][0]);
        _mm256_storeu_ps(lanes + (t * NR + j) * LANES + 8, acc[t][j][1]);
    }
}

/* Token pairs over one tile of kind BF (bf16) or fp32; only the first pair
 * reads ahead. */
INL void ukr_kind(const float *x, int64_t ldx, int mt, const lin_wtile *w, const int BF, int64_t kc,
                  float *lanes, int first, float *sums)
{
    const char *pf = w->ahead ? (const char *)w->row[0] + w->ahead : NULL;
    for (int t0 = 0; t0 < mt; t0 += 2) {
        float *ln = lanes + t0 * NR * LANES, *sm = sums ? sums + t0 * NR : NULL;
        if (mt - t0 >= 2)
            tokens(x + t0 * ldx, ldx, 2, w, BF, kc, t0 ? NULL : pf, ln, first, sm);
        else
            tokens(x + t0 * ldx, ldx, 1, w, BF, kc, t0 ? NULL : pf, ln, first, sm);
    }
}

MLA_TARGET_AVX2 void mla_cpu_linear_ukr_avx2(const float *x, int64_t ldx, int mt,
                                             const lin_wtile *w, int64_t kc, float *lanes,
                                             int first, float *sums)
{
    if (w->kind == MLA_V16_BF16)
        ukr_kind(x, ldx, mt, w, 1, kc, lanes, first, sums);
    else
        ukr_kind(x, ldx, mt, w, 0, kc, lanes, first, sums);
}
#endif
