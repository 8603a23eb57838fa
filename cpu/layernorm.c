/* CPU LayerNorm of the DSA indexer's k (MLA.md section 6), fp32 math:
 *
 *     mean = fl(S1 / D),  S1 = sum_d x[t, d]
 *     var  = fl(S2 / D),  S2 = sum_d fl(x[t, d] - mean)^2      (population)
 *     sd   = sqrtf(var + eps)
 *     y[t, d] = fl(fl(fl(x - mean) / sd) * w[d]) + b[d], then one rounding
 *               to y's dtype
 *
 * Both sums run in 16 lanes (lane l takes d = l, l + 16, ... in order), then
 * a fixed pairwise tree; every product and sum is its own fp32 operation
 * (-ffp-contract=off), so the three ISA copies give the same bits. The
 * reference works in float64 (two passes as here); the difference is inside
 * the conformance bound. A row is read whole into a per-thread fp32 buffer
 * before it is written, so y may be x. Rows are spread over the threads. */
#include <math.h>
#include <stdlib.h>

#if defined(MLA_HAVE_OPENMP)
#include <omp.h>
#endif

#include "core/checked.h"
#include "cpu/cpu_kernels.h"
#include "cpu/cpu_rows.h"

#define LANES 16

/* The lanes of the header, folded by the tree (8, 4, 2, 1). */
MLA_CPU_INLINE float fold(float *lane)
{
    for (int w = LANES / 2; w >= 1; w /= 2)
        for (int l = 0; l < w; ++l)
            lane[l] += lane[l + w];
    return lane[0];
}

MLA_CPU_INLINE float lane_sum(const float *restrict v, int64_t n)
{
    float lane[LANES] = {0};
    int64_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int l = 0; l < LANES; ++l)
            lane[l] += v[i + l];
    for (int l = 0; i + l < n; ++l)
        lane[l] += v[i + l];
    return fold(lane);
}

MLA_CPU_INLINE float lane_dev2(const float *restrict v, int64_t n, float mean)
{
    float lane[LANES] = {0};
    int64_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int l = 0; l < LANES; ++l) {
            const float e = v[i + l] - mean;
            lane[l] += e * e;
        }
    for (int l = 0; i + l < n; ++l) {
        const float e = v[i + l] - mean;
        lane[l] += e * e;
    }
    return fold(lane);
}

MLA_CPU_INLINE void rows_body(const mla_layernorm_args *a, const float *restrict w,
                              const float *restrict b, int64_t t0, int64_t t1, float *restrict buf)
{
    const mla_tensor *x = &a->x, *y = &a->y;
    const int64_t D = x->shape[1];
    const int64_t xsz = (int64_t)mla_dtype_size(x->dtype), ysz = (int64_t)mla_dtype_size(y->dtype);
    for (int64_t t = t0; t < t1; ++t) {
        mla_cpu_load_float((const char *)x->data + t * x->stride[0] * xsz, x->dtype, x->stride[1],
                           D, buf);
        const float mean = lane_sum(buf, D) / (float)D;
        const float var = lane_dev2(buf, D, mean) / (float)D;
        const float sd = sqrtf(var + a->eps);
        MLA_SIMD for (int64_t d = 0; d < D; ++d)
        {
            const float n = (buf[d] - mean) / sd;
            const float s = n * w[d];
            buf[d] = s + b[d];
        }
        mla_cpu_store_float(buf, (char *)y->data + t * y->stride[0] * ysz, y->dtype, y->stride[1],
                            D);
    }
}

typedef void (*rows_fn)(const mla_layernorm_args *, const float *, const float *, int64_t, int64_t,
                        float *);

static void rows_generic(const mla_layernorm_args *a, const float *w, const float *b, int64_t t0,
                         int64_t t1, float *buf)
{
    rows_body(a, w, b, t0, t1, buf);
}

#if MLA_CPU_X86
MLA_TARGET_AVX2 static void rows_avx2(const mla_layernorm_args *a, const float *w, const float *b,
                                      int64_t t0, int64_t t1, float *buf)
{
    rows_body(a, w, b, t0, t1, buf);
}

MLA_TARGET_AVX512 static void rows_avx512(const mla_layernorm_args *a, const float *w,
                                          const float *b, int64_t t0, int64_t t1, float *buf)
{
    rows_body(a, w, b, t0, t1, buf);
}
#endif

mla_status mla_cpu_layernorm(mla_context *ctx, const mla_layernorm_args *a)
{
    const int64_t T = a->x.shape[0], D = a->x.shape[1];
    const int nt = mla_cpu_threads(ctx, T, T * D);
    /* w and b as contiguous fp32, then one row buffer per thread */
    float *mem;
    MLA_TRY(mla_alloc_array(ctx, (void **)&mem, 2 + nt, D, sizeof *mem, "x"));
    float *w = mem, *b = mem + D, *bufs = mem + 2 * D;
    mla_cpu_load_float(a->w.data, MLA_DTYPE_F32, a->w.stride[0], D, w);
    mla_cpu_load_float(a->b.data, MLA_DTYPE_F32, a->b.stride[0], D, b);
    const rows_fn run = MLA_CPU_PICK(mla_cpu_isa_of(ctx), rows);
#if defined(MLA_HAVE_OPENMP)
#pragma omp parallel num_threads(nt) if (nt > 1)
#endif
    {
        int id = 0, cnt = 1;
#if defined(MLA_HAVE_OPENMP)
        id = omp_get_thread_num();
        cnt = omp_get_num_threads();
#endif
        run(a, w, b, T * id / cnt, T * (id + 1) / cnt, bufs + (int64_t)id * D);
    }
    free(mem);
    return MLA_OK;
}
