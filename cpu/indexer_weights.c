/* CPU head weights of the DSA indexer (MLA.md section 6), bits identical to
 * the reference (core/ref/indexer_weights.c):
 *
 *     w_out[t, h] = fl(fl(fl(w[t, h] * s_q[t, h]) * c_d) * c_h)
 *     c_d = fl(128^-0.5), c_h = fl(Hi^-0.5)
 *
 * each product one correctly rounded fp32 operation through mla_fb_mul (the
 * NaN rule of core/format_bits.h, so a vectorized operand order cannot change
 * a payload); the constants are the double 1 / sqrt(n) rounded to fp32, which
 * is the correctly rounded n^-0.5 for every n < 2^17 (the reference's own
 * argument). w (BF16 or F32) is widened exactly. A row is read before it is
 * written, so w_out may be w or s_q. Rows are spread over the threads. */
#include <math.h>
#include <stdlib.h>

#if defined(MLA_HAVE_OPENMP)
#include <omp.h>
#endif

#include "core/checked.h"
#include "cpu/cpu_kernels.h"
#include "cpu/cpu_rows.h"

#define INDEXER_HEAD_DIM 128 /* the 128^-0.5 of MLA.md, fixed by the model */

static float inv_sqrt_f32(int64_t n)
{
    return (float)(1.0 / sqrt((double)n));
}

/* Rows [t0, t1); buf: 2 Hi floats. */
MLA_CPU_INLINE void rows_body(const mla_head_weights_args *a, int64_t t0, int64_t t1, float c_d,
                              float c_h, float *restrict buf)
{
    const mla_tensor *w = &a->w, *s = &a->s_q, *o = &a->w_out;
    const int64_t Hi = w->shape[1], wsz = (int64_t)mla_dtype_size(w->dtype);
    float *restrict wv = buf, *restrict sv = buf + Hi;
    for (int64_t t = t0; t < t1; ++t) {
        mla_cpu_load_float((const char *)w->data + t * w->stride[0] * wsz, w->dtype, w->stride[1],
                           Hi, wv);
        mla_cpu_load_float((const float *)s->data + t * s->stride[0], MLA_DTYPE_F32, s->stride[1],
                           Hi, sv);
        MLA_SIMD for (int64_t h = 0; h < Hi; ++h) wv[h] =
            mla_fb_mul(mla_fb_mul(mla_fb_mul(wv[h], sv[h]), c_d), c_h);
        mla_cpu_store_float(wv, (float *)o->data + t * o->stride[0], MLA_DTYPE_F32, o->stride[1],
                            Hi);
    }
}

typedef void (*rows_fn)(const mla_head_weights_args *, int64_t, int64_t, float, float, float *);

static void rows_generic(const mla_head_weights_args *a, int64_t t0, int64_t t1, float c_d,
                         float c_h, float *buf)
{
    rows_body(a, t0, t1, c_d, c_h, buf);
}

#if MLA_CPU_X86
MLA_TARGET_AVX2 static void rows_avx2(const mla_head_weights_args *a, int64_t t0, int64_t t1,
                                      float c_d, float c_h, float *buf)
{
    rows_body(a, t0, t1, c_d, c_h, buf);
}

MLA_TARGET_AVX512 static void rows_avx512(const mla_head_weights_args *a, int64_t t0, int64_t t1,
                                          float c_d, float c_h, float *buf)
{
    rows_body(a, t0, t1, c_d, c_h, buf);
}
#endif

mla_status mla_cpu_indexer_head_weights(mla_context *ctx, const mla_head_weights_args *a)
{
    const int64_t T = a->w.shape[0], Hi = a->w.shape[1];
    const int nt = mla_cpu_threads(ctx, T, T * Hi);
    float *bufs;
    MLA_TRY(mla_alloc_array(ctx, (void **)&bufs, nt, mla_sz_mul(Hi, 2), sizeof *bufs, "w"));
    const float c_d = inv_sqrt_f32(INDEXER_HEAD_DIM), c_h = inv_sqrt_f32(Hi);
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
        run(a, T * id / cnt, T * (id + 1) / cnt, c_d, c_h, bufs + (int64_t)id * 2 * Hi);
    }
    free(bufs);
    return MLA_OK;
}
