/* CPU fp8 group dequant: y [M, K] (F32, BF16, F16) = fp8 code * scale of its
 * group, one fp32 product (value first, as the reference writes it), rounded
 * once to y's dtype. Tasks are tiles of TILE values of one row; inside a
 * tile each run of values sharing a group is scaled by one loop. */
#include "cpu/cpu_kernels.h"
#include "cpu/cpu_rows.h"

#define TILE 8192

/* n values of one row starting at value k0: codes (dtype ct, stride cs),
 * the row's scales sc (float stride ss), group size G, y (dtype yt, stride ys). */
MLA_CPU_INLINE void span_body(const uint8_t *codes, mla_dtype ct, int64_t cs, const float *sc,
                              int64_t ss, int64_t G, int64_t k0, int64_t n, void *y,
                              mla_dtype yt, int64_t ys)
{
    float buf[MLA_CPU_CHUNK];
    for (int64_t i = 0; i < n; i += MLA_CPU_CHUNK) {
        int64_t c = n - i < MLA_CPU_CHUNK ? n - i : MLA_CPU_CHUNK;
        mla_cpu_load_fp8(codes + i * cs, ct, cs, c, buf);
        for (int64_t j = 0; j < c;) {
            int64_t g = (k0 + i + j) / G;
            int64_t end = (g + 1) * G - (k0 + i); /* first value of the next group */
            end = end < c ? end : c;
            float s = sc[g * ss];
            MLA_SIMD for (int64_t l = j; l < end; ++l) buf[l] = mla_fb_mul(buf[l], s);
            j = end;
        }
        mla_cpu_store_float(buf, (void *)mla_cpu_row_at(y, yt, ys, i), yt, ys, c);
    }
}

typedef void (*span_fn)(const uint8_t *, mla_dtype, int64_t, const float *, int64_t, int64_t,
                        int64_t, int64_t, void *, mla_dtype, int64_t);

static void span_generic(const uint8_t *codes, mla_dtype ct, int64_t cs, const float *sc,
                         int64_t ss, int64_t G, int64_t k0, int64_t n, void *y, mla_dtype yt,
                         int64_t ys)
{
    span_body(codes, ct, cs, sc, ss, G, k0, n, y, yt, ys);
}

#if MLA_CPU_X86
MLA_TARGET_AVX2 static void span_avx2(const uint8_t *codes, mla_dtype ct, int64_t cs,
                                      const float *sc, int64_t ss, int64_t G, int64_t k0,
                                      int64_t n, void *y, mla_dtype yt, int64_t ys)
{
    span_body(codes, ct, cs, sc, ss, G, k0, n, y, yt, ys);
}

MLA_TARGET_AVX512 static void span_avx512(const uint8_t *codes, mla_dtype ct, int64_t cs,
                                          const float *sc, int64_t ss, int64_t G, int64_t k0,
                                          int64_t n, void *y, mla_dtype yt, int64_t ys)
{
    span_body(codes, ct, cs, sc, ss, G, k0, n, y, yt, ys);
}
#endif

mla_status mla_cpu_fp8_group_dequant(mla_context *ctx, const mla_fp8_group_dequant_args *a)
{
    int64_t tiles = (a->K + TILE - 1) / TILE, tasks = a->M * tiles;
    span_fn run = MLA_CPU_PICK(mla_cpu_isa_of(ctx), span);
    int64_t ysz = (int64_t)mla_dtype_size(a->y.dtype);
    int nt = mla_cpu_threads(ctx, tasks, a->M * a->K);
    (void)nt;
#if defined(MLA_HAVE_OPENMP)
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
#endif
    for (int64_t t = 0; t < tasks; ++t) {
        int64_t m = t / tiles, k0 = (t % tiles) * TILE;
        int64_t n = a->K - k0 < TILE ? a->K - k0 : TILE;
        const uint8_t *codes = (const uint8_t *)a->codes.data + m * a->codes.stride[0] +
                               k0 * a->codes.stride[1];
        const float *sc = (const float *)a->scales.data + m * a->scales.stride[0];
        char *y = (char *)a->y.data + (m * a->y.stride[0] + k0 * a->y.stride[1]) * ysz;
        run(codes, a->codes.dtype, a->codes.stride[1], sc, a->scales.stride[1], a->group, k0, n,
            y, a->y.dtype, a->y.stride[1]);
    }
    return MLA_OK;
}
