/* CPU MXFP4 dequant: codes [M, K/2] + e8m0 scales (any layout) -> y [M, K]
 * (F32, BF16, F16): y = fp4 * 2^(scale - 127), formed exactly from the bits
 * (two significant bits: no rounding, inf past the fp32 range, NaN for the
 * NaN scale 0xFF), then rounded once to y's dtype. Tasks are runs of up to
 * TASK_BLOCKS blocks of 32 values of one row. */
#include "cpu/cpu_kernels.h"
#include "cpu/cpu_rows.h"

#include <string.h>

#define BLOCK 32
#define TASK_BLOCKS 128
#define CHUNK_BLOCKS (MLA_CPU_CHUNK / BLOCK)

/* Values buf[0..2*nbytes) of the code bytes c[0..nbytes): byte j takes the
 * scale byte sb[j] of its block, spread out per byte so that one long loop
 * covers a whole chunk (see mxfp4_quant.c); the NaN scale selects +NaN. */
MLA_CPU_INLINE void decode_chunk(const uint8_t *c, int64_t cs, const uint8_t *restrict sb,
                                 int64_t nbytes, float *restrict buf)
{
    if (cs == 1) {
        MLA_SIMD for (int64_t j = 0; j < nbytes; ++j) {
            uint32_t s = sb[j], b = c[j];
            uint32_t lo = mla_fb_e2m1_scaled_bits(b & 0xFu, s);
            uint32_t hi = mla_fb_e2m1_scaled_bits(b >> 4, s);
            buf[2 * j] = mla_fb_float(s == 255u ? MLA_FB_F32_QNAN : lo);
            buf[2 * j + 1] = mla_fb_float(s == 255u ? MLA_FB_F32_QNAN : hi);
        }
    } else {
        MLA_SIMD for (int64_t j = 0; j < nbytes; ++j) {
            uint32_t s = sb[j], b = c[j * cs];
            uint32_t lo = mla_fb_e2m1_scaled_bits(b & 0xFu, s);
            uint32_t hi = mla_fb_e2m1_scaled_bits(b >> 4, s);
            buf[2 * j] = mla_fb_float(s == 255u ? MLA_FB_F32_QNAN : lo);
            buf[2 * j + 1] = mla_fb_float(s == 255u ? MLA_FB_F32_QNAN : hi);
        }
    }
}

/* nb blocks of one row: code bytes from codes (stride cs), scale bytes
 * sc[0..nb), values to y (dtype yt, element stride ys). */
MLA_CPU_INLINE void blocks_body(const uint8_t *codes, int64_t cs, const uint8_t *sc, int64_t nb,
                                void *y, mla_dtype yt, int64_t ys)
{
    float buf[MLA_CPU_CHUNK];
    uint8_t sb[MLA_CPU_CHUNK / 2];
    for (int64_t b0 = 0; b0 < nb; b0 += CHUNK_BLOCKS) {
        int64_t cb = nb - b0 < CHUNK_BLOCKS ? nb - b0 : CHUNK_BLOCKS;
        for (int64_t b = 0; b < cb; ++b)
            memset(sb + b * (BLOCK / 2), sc[b0 + b], BLOCK / 2);
        decode_chunk(codes + b0 * (BLOCK / 2) * cs, cs, sb, cb * (BLOCK / 2), buf);
        mla_cpu_store_float(buf, (void *)mla_cpu_row_at(y, yt, ys, b0 * BLOCK), yt, ys, cb * BLOCK);
    }
}

typedef void (*blocks_fn)(const uint8_t *, int64_t, const uint8_t *, int64_t, void *, mla_dtype,
                          int64_t);

static void blocks_generic(const uint8_t *codes, int64_t cs, const uint8_t *sc, int64_t nb,
                           void *y, mla_dtype yt, int64_t ys)
{
    blocks_body(codes, cs, sc, nb, y, yt, ys);
}

#if MLA_CPU_X86
MLA_TARGET_AVX2 static void blocks_avx2(const uint8_t *codes, int64_t cs, const uint8_t *sc,
                                        int64_t nb, void *y, mla_dtype yt, int64_t ys)
{
    blocks_body(codes, cs, sc, nb, y, yt, ys);
}

MLA_TARGET_AVX512 static void blocks_avx512(const uint8_t *codes, int64_t cs, const uint8_t *sc,
                                            int64_t nb, void *y, mla_dtype yt, int64_t ys)
{
    blocks_body(codes, cs, sc, nb, y, yt, ys);
}
#endif

/* Byte offset of scale[m, n] in the scale tensor's layout. */
static int64_t scale_offset(const mla_mxfp4_dequant_args *a, int64_t m, int64_t n, int64_t N)
{
    if (a->layout == MLA_SCALE_PRESHUFFLED_GFX950)
        return mla_fb_preshuffled_offset(m, n, N);
    return m * a->scales.stride[0] + n * a->scales.stride[1];
}

mla_status mla_cpu_mxfp4_dequant(mla_context *ctx, const mla_mxfp4_dequant_args *a)
{
    int64_t N = a->K / BLOCK, tiles = (N + TASK_BLOCKS - 1) / TASK_BLOCKS, tasks = a->M * tiles;
    blocks_fn run = MLA_CPU_PICK(mla_cpu_isa_of(ctx), blocks);
    int64_t ysz = (int64_t)mla_dtype_size(a->y.dtype);
    const uint8_t *scales = (const uint8_t *)a->scales.data;
    int nt = mla_cpu_threads(ctx, tasks, a->M * a->K);
    (void)nt;
#if defined(MLA_HAVE_OPENMP)
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
#endif
    for (int64_t t = 0; t < tasks; ++t) {
        int64_t m = t / tiles, n0 = (t % tiles) * TASK_BLOCKS;
        int64_t nb = N - n0 < TASK_BLOCKS ? N - n0 : TASK_BLOCKS;
        uint8_t sc[TASK_BLOCKS];
        for (int64_t i = 0; i < nb; ++i)
            sc[i] = scales[scale_offset(a, m, n0 + i, N)];
        const uint8_t *codes = (const uint8_t *)a->codes.data + m * a->codes.stride[0] +
                               n0 * (BLOCK / 2) * a->codes.stride[1];
        char *y = (char *)a->y.data + (m * a->y.stride[0] + n0 * BLOCK * a->y.stride[1]) * ysz;
        run(codes, a->codes.stride[1], sc, nb, y, a->y.dtype, a->y.stride[1]);
    }
    return MLA_OK;
}
