/* Reference MXFP4 quant and dequant (MLA.md section 5): blocks of 32 values
 * along K share one e8m0 scale; codes [M, K/2] bytes, element 2i in the low
 * nibble; scales [M, K/32] row-major, transposed, or pre-shuffled (gfx950). */
#include "core/ref/ref_kernels.h"
#include "core/ref/tensor_access.h"

#define BLOCK 32

/* Where scale[m, n] lives: the strided [M, N] tensor, or the pre-shuffled
 * offset in the contiguous 1-D byte array. */
static int64_t scale_offset(const mla_tensor *s, mla_scale_layout layout, int64_t m, int64_t n,
                            int64_t N)
{
    if (layout == MLA_SCALE_PRESHUFFLED_GFX950)
        return mla_scale_preshuffled_offset(m, n, N);
    return mla_ref_offset2(s, m, n);
}

/* Each block through mla_mxfp4_quantize_block; pre-shuffled padding bytes 0. */
mla_status mla_ref_mxfp4_quant(mla_context *ctx, const mla_mxfp4_quant_args *a)
{
    (void)ctx;
    int64_t N = a->K / BLOCK;
    if (a->layout == MLA_SCALE_PRESHUFFLED_GFX950) {
        int64_t bytes = mla_scale_preshuffled_bytes(a->M, N);
        for (int64_t i = 0; i < bytes; ++i)
            mla_ref_store_u8(&a->scales, i, 0);
    }
    for (int64_t m = 0; m < a->M; ++m) {
        for (int64_t n = 0; n < N; ++n) {
            float blk[BLOCK];
            uint8_t codes[BLOCK / 2], scale;
            for (int i = 0; i < BLOCK; ++i)
                blk[i] = mla_ref_load_f32(&a->x, mla_ref_offset2(&a->x, m, n * BLOCK + i));
            mla_mxfp4_quantize_block(blk, a->rule, codes, &scale);
            for (int j = 0; j < BLOCK / 2; ++j)
                mla_ref_store_u8(&a->codes, mla_ref_offset2(&a->codes, m, n * (BLOCK / 2) + j),
                                 codes[j]);
            mla_ref_store_u8(&a->scales, scale_offset(&a->scales, a->layout, m, n, N), scale);
        }
    }
    return MLA_OK;
}

/* y[m, k] = fp4(code) * 2^(scale - 127) in fp32 (exact, or inf beyond the fp32
 * range; a NaN scale gives NaN), then one rounding to y's dtype. */
mla_status mla_ref_mxfp4_dequant(mla_context *ctx, const mla_mxfp4_dequant_args *a)
{
    (void)ctx;
    int64_t N = a->K / BLOCK;
    for (int64_t m = 0; m < a->M; ++m) {
        for (int64_t j = 0; j < a->K / 2; ++j) {
            int64_t k = 2 * j;
            uint8_t sb = mla_ref_load_u8(&a->scales,
                                         scale_offset(&a->scales, a->layout, m, k / BLOCK, N));
            float s = mla_e8m0_to_f32(sb);
            int64_t cj = mla_ref_offset2(&a->codes, m, j);
            for (int h = 0; h < 2; ++h) {
                float v = mla_ref_load_fp4(&a->codes, cj, h) * s;
                mla_ref_store_f32(&a->y, mla_ref_offset2(&a->y, m, k + h), v, MLA_SATURATE);
            }
        }
    }
    return MLA_OK;
}
