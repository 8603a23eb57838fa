/* Reference MXFP4 batched GEMMs (MLA.md section 7), in float64, one rounding
 * to y's dtype, every tensor through its strides:
 *
 *     a16wfp4: y[b, m, n] = sum_k A[b, m, k] * W[b, n, k]
 *              A = x (prequant 0), or deq(Q(x)) with Q the MXFP4 quant of
 *              each 32-block of x's row by `rule` (prequant 1)
 *     a4w4:    y[b, m, n] = sum_k deq(xq)[b, m, k] * W[b, n, k]
 *
 * deq(c, s) = fp4(c) * 2^(s - 127) in fp32, what mla_mxfp4_dequant writes to
 * an F32 tensor: exact, inf beyond the fp32 range, NaN for the scale 0xFF.
 * A and W are fp32 values, so every product is exact in double; only the
 * sums (k ascending) round, in double, then the result once to y.
 *
 * In MLA these are the absorb (step 4, y[h] = q_nope[:, h] @ W_kc[h], W_kc
 * re-quantized along nope at load, core/layer_weights.c) and W_vc (step 8)
 * when kv_b_proj is an MXFP4 checkpoint; core/ref/gemm.c has the bf16 and
 * fp8 form of the same two products. */
#include <stdlib.h>

#include "core/checked.h"
#include "core/ref/ref_kernels.h"
#include "core/ref/tensor_access.h"

#define BLOCK 32

/* Byte offset of scale (r, j) of batch b of an operand (K/32 = nblk scales
 * per row): strided [B, R, K/32], or per batch the pre-shuffled bytes. */
static int64_t scale_offset(const mla_mxfp4_operand *op, int64_t b, int64_t r, int64_t j,
                            int64_t nblk)
{
    const mla_tensor *s = &op->scales;
    if (op->layout == MLA_SCALE_PRESHUFFLED_GFX950)
        return b * s->stride[0] + mla_scale_preshuffled_offset(r, j, nblk) * s->stride[1];
    return mla_ref_offset3(s, b, r, j);
}

/* deq of value k of row r of batch b of an MXFP4 operand [B, R, K/2]. */
static float mxfp4_value(const mla_mxfp4_operand *op, int64_t b, int64_t r, int64_t k,
                         int64_t K)
{
    uint8_t sb = mla_ref_load_u8(&op->scales, scale_offset(op, b, r, k / BLOCK, K / BLOCK));
    float v = mla_ref_load_fp4(&op->codes, mla_ref_offset3(&op->codes, b, r, k / 2), (int)(k % 2));
    return v * mla_e8m0_to_f32(sb);
}

/* A[b, m, 0..K) of a16wfp4 into a: x's row, or its MXFP4 round trip. */
static void activation_row(const mla_mxfp4_gemm_args *g, int64_t b, int64_t m, float *a)
{
    for (int64_t k = 0; k < g->K; ++k)
        a[k] = mla_ref_load_f32(&g->x, mla_ref_offset3(&g->x, b, m, k));
    if (!g->prequant)
        return;
    for (int64_t k0 = 0; k0 < g->K; k0 += BLOCK) {
        uint8_t codes[BLOCK / 2], scale;
        mla_mxfp4_quantize_block(a + k0, g->rule, codes, &scale);
        float s = mla_e8m0_to_f32(scale);
        for (int i = 0; i < BLOCK; ++i)
            a[k0 + i] = mla_fp4_to_f32((uint8_t)(codes[i / 2] >> (4 * (i % 2)))) * s;
    }
}

/* y[b, m, :] = a @ W[b]^T for one activation row a. */
static void row_times_weights(const mla_mxfp4_gemm_args *g, int64_t b, int64_t m, const float *a)
{
    for (int64_t n = 0; n < g->N; ++n) {
        double acc = 0.0;
        for (int64_t k = 0; k < g->K; ++k)
            acc += (double)a[k] * (double)mxfp4_value(&g->w, b, n, k, g->K);
        mla_ref_store_f64(&g->y, mla_ref_offset3(&g->y, b, m, n), acc, MLA_SATURATE);
    }
}

mla_status mla_ref_gemm_a16wfp4(mla_context *ctx, const mla_mxfp4_gemm_args *g)
{
    float *a;
    MLA_TRY(mla_alloc_array(ctx, (void **)&a, g->K, 1, sizeof *a, "x"));
    for (int64_t b = 0; b < g->B; ++b)
        for (int64_t m = 0; m < g->M; ++m) {
            activation_row(g, b, m, a);
            row_times_weights(g, b, m, a);
        }
    free(a);
    return MLA_OK;
}

mla_status mla_ref_gemm_a4w4(mla_context *ctx, const mla_mxfp4_gemm_args *g)
{
    float *a;
    MLA_TRY(mla_alloc_array(ctx, (void **)&a, g->K, 1, sizeof *a, "x.codes"));
    for (int64_t b = 0; b < g->B; ++b)
        for (int64_t m = 0; m < g->M; ++m) {
            for (int64_t k = 0; k < g->K; ++k)
                a[k] = mxfp4_value(&g->xq, b, m, k, g->K);
            row_times_weights(g, b, m, a);
        }
    free(a);
    return MLA_OK;
}
