/* AVX2 micro-kernel of the CPU batched GEMM (bg_fns.ukr of the AVX2 copy,
 * cpu/batched_gemm_kernel.h): the portable kernel's arithmetic, out[r][c] =
 * sum over k in order of fl(x[r, k] * w[k, c]) (multiply, then add: no FMA,
 * so the bits are the portable copy's), 16 columns (two ymm vectors) x up
 * to MR rows at a time, W an fp32 copy or bf16 read where it lies (a shift
 * per value). Columns past the last multiple of 16 run the same sum in
 * scalar code. */
#include <string.h>

#include "cpu/avx2_vec.h"
#include "cpu/batched_gemm_kernel.h"

#if MLA_CPU_X86
#define INL MLA_AVX2_INLINE
#define UNROLL MLA_AVX2_UNROLL

INL float wvalue(const char *p, const int BF)
{
    float f;
    if (!BF) {
        memcpy(&f, p, sizeof f);
        return f;
    }
    uint16_t h;
    memcpy(&h, p, sizeof h);
    const uint32_t u = (uint32_t)h << 16;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* MRC rows x 16 columns from wc (column c0 of W at k = 0). */
INL void cols16(const float *x, int64_t ldx, const int MRC, const char *wc, int64_t ld,
                const int BF, int64_t K, float *out)
{
    const int64_t wsz = BF ? 2 : 4;
    __m256 acc[BG_MR][2];
    UNROLL for (int r = 0; r < MRC; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
    for (int64_t k = 0; k < K; ++k) {
        const char *wk = wc + k * ld;
        const __m256 w0 = mla_avx2_w8(wk, BF), w1 = mla_avx2_w8(wk + 8 * wsz, BF);
        UNROLL for (int r = 0; r < MRC; ++r)
        {
            const __m256 xb = _mm256_broadcast_ss(x + r * ldx + k);
            acc[r][0] = _mm256_add_ps(acc[r][0], _mm256_mul_ps(xb, w0));
            acc[r][1] = _mm256_add_ps(acc[r][1], _mm256_mul_ps(xb, w1));
        }
    }
    UNROLL for (int r = 0; r < MRC; ++r)
    {
        _mm256_storeu_ps(out + r * BG_NTILE, acc[r][0]);
        _mm256_storeu_ps(out + r * BG_NTILE + 8, acc[r][1]);
    }
}

INL void ukr_kind(const float *x, int64_t ldx, int mr, const bg_w *w, const int BF, int64_t K,
                  int64_t nc, float *out)
{
    const int64_t wsz = BF ? 2 : 4;
    int64_t c = 0;
    for (; c + 16 <= nc; c += 16) {
        const char *wc = w->p + c * wsz;
        switch (mr) {
        case 1:
            cols16(x, ldx, 1, wc, w->ld, BF, K, out + c);
            break;
        case 2:
            cols16(x, ldx, 2, wc, w->ld, BF, K, out + c);
            break;
        case 3:
            cols16(x, ldx, 3, wc, w->ld, BF, K, out + c);
            break;
        case 4:
            cols16(x, ldx, 4, wc, w->ld, BF, K, out + c);
            break;
        case 5:
            cols16(x, ldx, 5, wc, w->ld, BF, K, out + c);
            break;
        default:
            cols16(x, ldx, BG_MR, wc, w->ld, BF, K, out + c);
            break;
        }
    }
    for (int r = 0; r < mr; ++r)
        for (int64_t cc = c; cc < nc; ++cc) {
            float acc = 0.0f;
            for (int64_t k = 0; k < K; ++k)
                acc += x[r * ldx + k] * wvalue(w->p + k * w->ld + cc * wsz, BF);
            out[r * BG_NTILE + cc] = acc;
        }
}

MLA_TARGET_AVX2 void mla_cpu_bgemm_ukr_avx2(const float *x, int64_t ldx, int mr, const bg_w *w,
                                            int64_t K, int64_t nc, float *out, const bg_y *y)
{
    (void)y; /* y is written by the copy's store */
    if (w->kind == MLA_V16_BF16)
        ukr_kind(x, ldx, mr, w, 1, K, nc, out);
    else
        ukr_kind(x, ldx, mr, w, 0, K, nc, out);
}
#endif
