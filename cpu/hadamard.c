/* CPU Hadamard rotation of the DSA indexer's q and k (MLA.md section 6):
 *
 *     y[t, h, :] = x[t, h, :] @ H_D / sqrt(D)     (Sylvester H_D, D = 2^m)
 *
 * as the fast Walsh-Hadamard transform in fp32, butterflies in a fixed
 * order: for half = 1, 2, 4, ..., D/2, each pair (i, i + half) of every
 * block of 2 half becomes (a + b, a - b). That is H_D's product in natural
 * (Sylvester) order, since H_2n = [[H_n, H_n], [H_n, -H_n]]. Then each value
 * times c = fl(D^-0.5) (correctly rounded: the double 1 / sqrt(D) rounded to
 * fp32; exact for D a power of 4), and one rounding to y's dtype. The
 * reference sums in float64; the difference (log2 D fp32 add levels and the
 * scale product) is inside the conformance bound. A row is read whole into a
 * per-thread buffer before it is written, so y may be x. Rows (t, h) are
 * spread over the threads. */
#include <math.h>
#include <stdlib.h>

#if defined(MLA_HAVE_OPENMP)
#include <omp.h>
#endif

#include "core/checked.h"
#include "cpu/cpu_kernels.h"
#include "cpu/cpu_rows.h"

/* The butterflies of the header on v[0, D). */
MLA_CPU_INLINE void fwht(float *restrict v, int64_t D)
{
    for (int64_t half = 1; half < D; half *= 2)
        for (int64_t i0 = 0; i0 < D; i0 += 2 * half) {
            float *lo = v + i0, *hi = v + i0 + half;
            MLA_SIMD for (int64_t i = 0; i < half; ++i)
            {
                const float a = lo[i], b = hi[i];
                lo[i] = a + b;
                hi[i] = a - b;
            }
        }
}

/* Rows [r0, r1) of the [T * H, D] view. */
MLA_CPU_INLINE void rows_body(const mla_hadamard_args *a, int64_t r0, int64_t r1, float c,
                              float *restrict buf)
{
    const mla_tensor *x = &a->x, *y = &a->y;
    const int64_t H = x->shape[1], D = x->shape[2];
    const int64_t xsz = (int64_t)mla_dtype_size(x->dtype), ysz = (int64_t)mla_dtype_size(y->dtype);
    for (int64_t r = r0; r < r1; ++r) {
        const int64_t t = r / H, h = r % H;
        mla_cpu_load_float((const char *)x->data + (t * x->stride[0] + h * x->stride[1]) * xsz,
                           x->dtype, x->stride[2], D, buf);
        fwht(buf, D);
        MLA_SIMD for (int64_t d = 0; d < D; ++d) buf[d] = buf[d] * c;
        mla_cpu_store_float(buf, (char *)y->data + (t * y->stride[0] + h * y->stride[1]) * ysz,
                            y->dtype, y->stride[2], D);
    }
}

typedef void (*rows_fn)(const mla_hadamard_args *, int64_t, int64_t, float, float *);

static void rows_generic(const mla_hadamard_args *a, int64_t r0, int64_t r1, float c, float *buf)
{
    rows_body(a, r0, r1, c, buf);
}

#if MLA_CPU_X86
MLA_TARGET_AVX2 static void rows_avx2(const mla_hadamard_args *a, int64_t r0, int64_t r1, float c,
                                      float *buf)
{
    rows_body(a, r0, r1, c, buf);
}

MLA_TARGET_AVX512 static void rows_avx512(const mla_hadamard_args *a, int64_t r0, int64_t r1,
                                          float c, float *buf)
{
    rows_body(a, r0, r1, c, buf);
}
#endif

mla_status mla_cpu_hadamard(mla_context *ctx, const mla_hadamard_args *a)
{
    const int64_t rows = a->x.shape[0] * a->x.shape[1], D = a->x.shape[2];
    const int nt = mla_cpu_threads(ctx, rows, rows * D);
    float *bufs;
    MLA_TRY(mla_alloc_array(ctx, (void **)&bufs, nt, D, sizeof *bufs, "x"));
    const float c = (float)(1.0 / sqrt((double)D));
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
        run(a, rows * id / cnt, rows * (id + 1) / cnt, c, bufs + (int64_t)id * D);
    }
    free(bufs);
    return MLA_OK;
}
