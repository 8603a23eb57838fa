/* CPU MXFP4 quant (MLA.md section 5): x [M, K] -> codes [M, K/2] (two e2m1 per
 * byte, element 2i in the low nibble) and one e8m0 scale per 32 values.
 *
 * Per block: amax = max of |x| as fp32 bit patterns (integer order is value
 * order for non-negative floats; NaN and inf sort above every finite value),
 * scale byte and code mask from core/format_bits.h (production or OCP rule,
 * NaN/inf block -> 0xFF and codes 0, zero block -> 0 and codes 0), then each
 * code is the e2m1 rounding of x * 2^-e done exactly on x's bits.
 * Tasks are runs of up to TASK_BLOCKS blocks of one row. */
#include "cpu/cpu_kernels.h"
#include "cpu/cpu_rows.h"

#include <string.h>

#define BLOCK 32
#define TASK_BLOCKS 128
#define CHUNK_BLOCKS (MLA_CPU_CHUNK / BLOCK)

/* Code bytes c[0..nbytes) of the values buf[0..2*nbytes): byte j takes the
 * scale byte sb[j] and byte mask mk[j] (0xFF, or 0 for a zero or NaN/inf
 * block) of its block, spread out per byte so that one long loop covers a
 * whole chunk: gcc sizes its vectors by the byte-wide data, and a 16-byte
 * loop per block would get 128-bit ones. */
MLA_CPU_INLINE void encode_chunk(const float *restrict buf, const uint8_t *restrict sb,
                                 const uint8_t *restrict mk, int64_t nbytes, uint8_t *c,
                                 int64_t cs)
{
    if (cs == 1) {
        MLA_SIMD for (int64_t j = 0; j < nbytes; ++j) c[j] =
            (uint8_t)((mla_fb_mxfp4_code(buf[2 * j], sb[j], 0xFu) |
                       (mla_fb_mxfp4_code(buf[2 * j + 1], sb[j], 0xFu) << 4)) &
                      mk[j]);
    } else {
        MLA_SIMD for (int64_t j = 0; j < nbytes; ++j) c[j * cs] =
            (uint8_t)((mla_fb_mxfp4_code(buf[2 * j], sb[j], 0xFu) |
                       (mla_fb_mxfp4_code(buf[2 * j + 1], sb[j], 0xFu) << 4)) &
                      mk[j]);
    }
}

/* nb blocks of one row: values from x (dtype xt, element stride xs), code
 * bytes to codes (byte stride cs), scale bytes to sc[0..nb). */
MLA_CPU_INLINE void blocks_body(const void *x, mla_dtype xt, int64_t xs, int64_t nb,
                                uint8_t *codes, int64_t cs, uint8_t *sc, int production)
{
    float buf[MLA_CPU_CHUNK];
    uint8_t sb[MLA_CPU_CHUNK / 2], mk[MLA_CPU_CHUNK / 2];
    for (int64_t b0 = 0; b0 < nb; b0 += CHUNK_BLOCKS) {
        int64_t cb = nb - b0 < CHUNK_BLOCKS ? nb - b0 : CHUNK_BLOCKS;
        mla_cpu_load_float(mla_cpu_row_at(x, xt, xs, b0 * BLOCK), xt, xs, cb * BLOCK, buf);
        for (int64_t b = 0; b < cb; ++b) {
            uint32_t amax = 0;
            MLA_SIMD_MAX(amax) for (int i = 0; i < BLOCK; ++i) {
                uint32_t m = mla_fb_bits(buf[b * BLOCK + i]) & 0x7FFFFFFFu;
                amax = m > amax ? m : amax;
            }
            uint8_t scale = mla_fb_mxfp4_scale_byte(amax, production);
            memset(sb + b * (BLOCK / 2), scale, BLOCK / 2);
            memset(mk + b * (BLOCK / 2), mla_fb_mxfp4_code_mask(amax) ? 0xFF : 0, BLOCK / 2);
            sc[b0 + b] = scale;
        }
        encode_chunk(buf, sb, mk, cb * (BLOCK / 2), codes + b0 * (BLOCK / 2) * cs, cs);
    }
}

typedef void (*blocks_fn)(const void *, mla_dtype, int64_t, int64_t, uint8_t *, int64_t,
                          uint8_t *, int);

static void blocks_generic(const void *x, mla_dtype xt, int64_t xs, int64_t nb, uint8_t *codes,
                           int64_t cs, uint8_t *sc, int production)
{
    blocks_body(x, xt, xs, nb, codes, cs, sc, production);
}

#if MLA_CPU_X86
MLA_TARGET_AVX2 static void blocks_avx2(const void *x, mla_dtype xt, int64_t xs, int64_t nb,
                                        uint8_t *codes, int64_t cs, uint8_t *sc, int production)
{
    blocks_body(x, xt, xs, nb, codes, cs, sc, production);
}

MLA_TARGET_AVX512 static void blocks_avx512(const void *x, mla_dtype xt, int64_t xs, int64_t nb,
                                            uint8_t *codes, int64_t cs, uint8_t *sc,
                                            int production)
{
    blocks_body(x, xt, xs, nb, codes, cs, sc, production);
}
#endif

/* Byte offset of scale[m, n] in the scale tensor's layout. */
static int64_t scale_offset(const mla_mxfp4_quant_args *a, int64_t m, int64_t n, int64_t N)
{
    if (a->layout == MLA_SCALE_PRESHUFFLED_GFX950)
        return mla_fb_preshuffled_offset(m, n, N);
    return m * a->scales.stride[0] + n * a->scales.stride[1];
}

/* The pre-shuffled layout pads to [ceil(M/256)*256, ceil(N/8)*8]: those
 * padding entries are written as 0. */
static void zero_padding(uint8_t *s, int64_t M, int64_t N)
{
    int64_t mp = (M + 255) / 256 * 256, np = (N + 7) / 8 * 8;
    for (int64_t m = 0; m < mp; ++m)
        for (int64_t n = m < M ? N : 0; n < np; ++n)
            s[mla_fb_preshuffled_offset(m, n, N)] = 0;
}

mla_status mla_cpu_mxfp4_quant(mla_context *ctx, const mla_mxfp4_quant_args *a)
{
    int64_t N = a->K / BLOCK, tiles = (N + TASK_BLOCKS - 1) / TASK_BLOCKS, tasks = a->M * tiles;
    blocks_fn run = MLA_CPU_PICK(mla_cpu_isa_of(ctx), blocks);
    int64_t xsz = (int64_t)mla_dtype_size(a->x.dtype);
    int production = a->rule == MLA_MXFP4_PRODUCTION;
    uint8_t *scales = (uint8_t *)a->scales.data;
    int nt = mla_cpu_threads(ctx, tasks, a->M * a->K);
    (void)nt;
#if defined(MLA_HAVE_OPENMP)
#pragma omp parallel for num_threads(nt) schedule(static) if (nt > 1)
#endif
    for (int64_t t = 0; t < tasks; ++t) {
        int64_t m = t / tiles, n0 = (t % tiles) * TASK_BLOCKS;
        int64_t nb = N - n0 < TASK_BLOCKS ? N - n0 : TASK_BLOCKS;
        uint8_t sc[TASK_BLOCKS];
        const char *x = (const char *)a->x.data +
                        (m * a->x.stride[0] + n0 * BLOCK * a->x.stride[1]) * xsz;
        uint8_t *codes = (uint8_t *)a->codes.data + m * a->codes.stride[0] +
                         n0 * (BLOCK / 2) * a->codes.stride[1];
        run(x, a->x.dtype, a->x.stride[1], nb, codes, a->codes.stride[1], sc, production);
        for (int64_t i = 0; i < nb; ++i)
            scales[scale_offset(a, m, n0 + i, N)] = sc[i];
    }
    if (a->layout == MLA_SCALE_PRESHUFFLED_GFX950)
        zero_padding(scales, a->M, N);
    return MLA_OK;
}
