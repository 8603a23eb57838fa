/* Controls of the MXFP4 GEMM path (MLA.md section 7, seed 003):
 *
 * - negative: wrong kernels that must be caught: the split-K bug pattern of
 *   aiter (the output written with the batch and row strides swapped),
 *   prequant ignored, the fp4 nibbles swapped, pre-shuffled scales read as
 *   row-major, a flatten that ignores x's strides (the copy the fused op
 *   exists to avoid, done wrong) or the scales' strides;
 * - positive: a correct fp32 GEMM with another summation order and the
 *   block scale applied to block partial sums must pass the bound;
 * - direct checks: refused arguments (K % 32, N of the scales, unknown
 *   layout, overlapping outputs) with nothing written; a16wfp4 with prequant
 *   equal, bit for bit, to a4w4 on the quantized x; the flatten equal to
 *   mla_mxfp4_quant / mla_fp8_group_quant of a contiguous copy; CPU results
 *   independent of the thread count. */
#include <math.h>
#include <stdio.h>

#include "tests/conformance_negative.h"

static int64_t off3(const mla_tensor *t, int64_t i, int64_t j, int64_t k)
{
    return i * t->stride[0] + j * t->stride[1] + k * t->stride[2];
}

/* Largest element offset of t (strides >= 0). */
static int64_t last_offset(const mla_tensor *t)
{
    int64_t o = 0;
    for (int32_t d = 0; d < t->ndim; ++d)
        o += (t->shape[d] - 1) * t->stride[d];
    return o;
}

/* ------------------------------------------------------ wrong kernels */

/* y with its batch and row strides swapped, where that stays inside the
 * view's span (elsewhere the kernel runs correctly, so nothing is written
 * outside the buffers). */
static mla_tensor swap_batch_row(const mla_tensor *y)
{
    mla_tensor s = *y;
    s.stride[0] = y->stride[1];
    s.stride[1] = y->stride[0];
    return last_offset(&s) <= last_offset(y) ? s : *y;
}

/* bound: aiter's split-K reduction writes y with the batch and row output
 * strides swapped relative to its main kernel. */
static mla_status a16wfp4_strides_swapped(mla_context *ctx, const mla_mxfp4_gemm_args *a)
{
    mla_mxfp4_gemm_args b = *a;
    b.y = swap_batch_row(&a->y);
    return neg_base->gemm_a16wfp4(ctx, &b);
}

static mla_status a4w4_strides_swapped(mla_context *ctx, const mla_mxfp4_gemm_args *a)
{
    mla_mxfp4_gemm_args b = *a;
    b.y = swap_batch_row(&a->y);
    return neg_base->gemm_a4w4(ctx, &b);
}

/* bound: prequant ignored, x used as is. */
static mla_status a16wfp4_no_prequant(mla_context *ctx, const mla_mxfp4_gemm_args *a)
{
    mla_mxfp4_gemm_args b = *a;
    b.prequant = 0;
    return neg_base->gemm_a16wfp4(ctx, &b);
}

/* bound: w's codes with element 2i read from the high nibble. */
static mla_status a16wfp4_nibbles_swapped(mla_context *ctx, const mla_mxfp4_gemm_args *a)
{
    mla_mxfp4_gemm_args b = *a;
    const mla_tensor *c = &a->w.codes;
    b.w.codes = neg_alloc(MLA_DTYPE_FP4X2, 3, c->shape);
    if (!b.w.codes.data)
        return MLA_ERR_OUT_OF_MEMORY;
    for (int64_t i = 0; i < c->shape[0]; ++i)
        for (int64_t j = 0; j < c->shape[1]; ++j)
            for (int64_t k = 0; k < c->shape[2]; ++k) {
                const uint8_t v = *neg_at(c, off3(c, i, j, k));
                *neg_at(&b.w.codes, off3(&b.w.codes, i, j, k)) = (uint8_t)((v >> 4) | (v << 4));
            }
    mla_status st = neg_base->gemm_a16wfp4(ctx, &b);
    free(b.w.codes.data);
    return st;
}

/* bound: pre-shuffled weight scales read as a row-major [B, N, K/32]
 * (which lies inside each batch's bytes). */
static mla_status a16wfp4_preshuffle_as_rows(mla_context *ctx, const mla_mxfp4_gemm_args *a)
{
    mla_mxfp4_gemm_args b = *a;
    if (a->w.layout == MLA_SCALE_PRESHUFFLED_GFX950) {
        const int64_t nblk = a->K / 32;
        b.w.layout = MLA_SCALE_ROW_MAJOR;
        b.w.scales.ndim = 3;
        b.w.scales.shape[1] = a->N, b.w.scales.shape[2] = nblk;
        b.w.scales.stride[1] = nblk, b.w.scales.stride[2] = 1;
    }
    return neg_base->gemm_a16wfp4(ctx, &b);
}

/* bits: the flatten reads x as if it were contiguous [T, H, v] (for the
 * [H, T, v] buffer seen as [T, H, v]: heads and tokens mixed up). */
static mla_status flatten_ignores_x_strides(mla_context *ctx, const mla_flatten_quant_args *a)
{
    mla_flatten_quant_args b = *a;
    mla_tensor_init(&b.x, a->x.data, a->x.dtype, a->x.memory, 3, a->x.shape);
    return neg_base->flatten_mxfp4_quant(ctx, &b);
}

/* bits (or guard): the fp8 flatten writes its scales row-major, whatever
 * their strides (transposed scales land in the wrong places). */
static mla_status flatten_fp8_ignores_scale_strides(mla_context *ctx,
                                                    const mla_flatten_quant_args *a)
{
    mla_flatten_quant_args b = *a;
    if (last_offset(&a->scales) + 1 >= mla_tensor_numel(&a->scales))
        mla_tensor_init(&b.scales, a->scales.data, a->scales.dtype, a->scales.memory, 2,
                        a->scales.shape);
    return neg_base->flatten_fp8_quant(ctx, &b);
}

/* ---------------------------------------------------- positive control */

/* The fp4 value of k of row r of batch b of an MXFP4 operand, and the
 * scale of its block (row-major or transposed scales; pre-shuffled through
 * the public offset). */
static float fp4_at(const mla_mxfp4_operand *op, int64_t b, int64_t r, int64_t k)
{
    const uint8_t c = *neg_at(&op->codes, off3(&op->codes, b, r, k / 2));
    return mla_fp4_to_f32((uint8_t)((k % 2) ? c >> 4 : c & 0xF));
}

static float scale_at(const mla_mxfp4_operand *op, int64_t b, int64_t r, int64_t j, int64_t nblk)
{
    const mla_tensor *s = &op->scales;
    const int64_t o = op->layout == MLA_SCALE_PRESHUFFLED_GFX950
                          ? b * s->stride[0] + mla_scale_preshuffled_offset(r, j, nblk)
                          : off3(s, b, r, j);
    return mla_e8m0_to_f32(*neg_at(s, o));
}

/* a16wfp4 in fp32: per 32-block, A times the unscaled fp4 values summed
 * with FMAs, k descending; then the block's partial sum times its scale
 * added to the total (the scale applied to a partial sum, as a kernel may). */
static mla_status a16wfp4_fp32_blocks(mla_context *ctx, const mla_mxfp4_gemm_args *g)
{
    (void)ctx;
    float *a = malloc((size_t)g->K * sizeof *a);
    for (int64_t b = 0; a && b < g->B; ++b)
        for (int64_t m = 0; m < g->M; ++m) {
            for (int64_t k = 0; k < g->K; ++k)
                a[k] = neg_load(&g->x, off3(&g->x, b, m, k));
            for (int64_t k0 = 0; g->prequant && k0 < g->K; k0 += 32) {
                uint8_t codes[16], sc;
                mla_mxfp4_quantize_block(a + k0, g->rule, codes, &sc);
                for (int i = 0; i < 32; ++i)
                    a[k0 + i] = mla_fp4_to_f32((uint8_t)(codes[i / 2] >> (4 * (i % 2)))) *
                                mla_e8m0_to_f32(sc);
            }
            for (int64_t n = 0; n < g->N; ++n) {
                float total = 0.0f;
                for (int64_t k0 = g->K - 32; k0 >= 0; k0 -= 32) {
                    float part = 0.0f;
                    for (int64_t k = k0 + 31; k >= k0; --k)
                        part = fmaf(a[k], fp4_at(&g->w, b, n, k), part);
                    total += part * scale_at(&g->w, b, n, k0 / 32, g->K / 32);
                }
                neg_store(&g->y, off3(&g->y, b, m, n), total);
            }
        }
    free(a);
    return a ? MLA_OK : MLA_ERR_OUT_OF_MEMORY;
}

/* -------------------------------------------------------- direct checks */

static int bytes_all(const void *p, size_t n, unsigned char v)
{
    for (size_t i = 0; i < n; ++i)
        if (((const unsigned char *)p)[i] != v)
            return 0;
    return 1;
}

/* A small a16wfp4 problem on the host: x [B, M, K] bf16, w [B, N, K/2] +
 * row-major scales, y [B, M, N] f32. */
typedef struct gemm_case {
    mla_tensor x, y;
    mla_mxfp4_operand w;
} gemm_case;

static void gemm_case_init(gemm_case *c, int64_t B, int64_t M, int64_t K, int64_t N)
{
    const int64_t xs[3] = {B, M, K}, ys[3] = {B, M, N}, cs[3] = {B, N, K / 2},
                  ss[3] = {B, N, K / 32};
    c->x = neg_alloc(MLA_DTYPE_BF16, 3, xs);
    c->y = neg_alloc(MLA_DTYPE_F32, 3, ys);
    c->w.codes = neg_alloc(MLA_DTYPE_FP4X2, 3, cs);
    c->w.scales = neg_alloc(MLA_DTYPE_E8M0, 3, ss);
    c->w.layout = MLA_SCALE_ROW_MAJOR;
    for (int64_t i = 0; i < B * M * K; ++i)
        ((uint16_t *)c->x.data)[i] = mla_f32_to_bf16((float)((i * 37) % 41 - 20) / 8.0f);
    for (int64_t i = 0; i < B * N * K / 2; ++i)
        ((uint8_t *)c->w.codes.data)[i] = (uint8_t)(i * 73 + 5);
    for (int64_t i = 0; i < B * N * K / 32; ++i)
        ((uint8_t *)c->w.scales.data)[i] = (uint8_t)(124 + i % 5);
    memset(c->y.data, 0xAB, (size_t)(B * M * N) * 4);
}

static void gemm_case_free(gemm_case *c)
{
    free(c->x.data), free(c->y.data), free(c->w.codes.data), free(c->w.scales.data);
}

/* One refused call: the status expected, and y untouched. */
static void refused(const char *what, mla_status got, mla_status want, const gemm_case *c,
                    const char *backend)
{
    mla_conformance_summary none;
    memset(&none, 0, sizeof none);
    char line[200];
    const int untouched = bytes_all(c->y.data, (size_t)mla_tensor_numel(&c->y) * 4, 0xAB);
    snprintf(line, sizeof line, "%s: %s -> %s (want %s), y %s", backend, what,
             mla_status_name(got), mla_status_name(want), untouched ? "untouched" : "WRITTEN");
    neg_expect(got == want && untouched, line, &none);
}

static void bad_inputs(mla_context *ctx, const char *backend)
{
    gemm_case c;
    gemm_case_init(&c, 2, 3, 64, 16);
    mla_tensor x = c.x;
    mla_mxfp4_operand w = c.w;
    x.shape[2] = 48, w.codes.shape[2] = 24, w.scales.shape[2] = 1; /* K = 48 */
    refused("K not a multiple of 32", mla_batched_gemm_a16wfp4(ctx, &x, &w, 1, 0, &c.y),
            MLA_ERR_SHAPE, &c, backend);
    w = c.w;
    w.scales.shape[1] = 15;
    refused("scales with 15 rows for N = 16", mla_batched_gemm_a16wfp4(ctx, &c.x, &w, 1, 0, &c.y),
            MLA_ERR_SHAPE, &c, backend);
    w = c.w;
    w.layout = (mla_scale_layout)7;
    refused("scale layout 7", mla_batched_gemm_a16wfp4(ctx, &c.x, &w, 1, 0, &c.y),
            MLA_ERR_INVALID_ARGUMENT, &c, backend);
    mla_tensor y = c.y;
    y.stride[0] = 16; /* batch b + 1 starts on row 1 of batch b */
    refused("y with overlapping strides", mla_batched_gemm_a16wfp4(ctx, &c.x, &c.w, 1, 0, &y),
            MLA_ERR_STRIDE, &c, backend);
    mla_mxfp4_operand xq = c.w; /* [2, 16, 32] codes as activations: M = 16, N = 16 */
    y = c.y;
    y.shape[1] = 16, y.shape[2] = 3, y.stride[1] = 1, y.stride[2] = 16; /* unrelated shape */
    refused("a4w4 y of the wrong shape", mla_batched_gemm_a4w4(ctx, &xq, &c.w, &y), MLA_ERR_SHAPE,
            &c, backend);
    gemm_case_free(&c);
}

/* a16wfp4 (prequant) == a4w4 of mla_mxfp4_quant(x), bit for bit. */
static void prequant_is_a4w4(mla_context *ctx, const char *backend)
{
    enum { B = 3, M = 5, K = 96, N = 20 };
    gemm_case c;
    gemm_case_init(&c, B, M, K, N);
    const int64_t xs2[2] = {B * M, K}, cs[3] = {B, M, K / 2}, ss[3] = {B, M, K / 32},
                  ys[3] = {B, M, N};
    mla_mxfp4_operand xq = {neg_alloc(MLA_DTYPE_FP4X2, 3, cs), neg_alloc(MLA_DTYPE_E8M0, 3, ss),
                            MLA_SCALE_ROW_MAJOR};
    mla_tensor x2 = c.x, q2 = xq.codes, s2 = xq.scales, y2 = neg_alloc(MLA_DTYPE_F32, 3, ys);
    mla_tensor_init(&x2, c.x.data, MLA_DTYPE_BF16, MLA_MEMORY_HOST, 2, xs2);
    mla_tensor_init(&q2, xq.codes.data, MLA_DTYPE_FP4X2, MLA_MEMORY_HOST, 2,
                    (int64_t[]){B * M, K / 2});
    mla_tensor_init(&s2, xq.scales.data, MLA_DTYPE_E8M0, MLA_MEMORY_HOST, 2,
                    (int64_t[]){B * M, K / 32});
    mla_status st = mla_batched_gemm_a16wfp4(ctx, &c.x, &c.w, 1, MLA_MXFP4_OCP, &c.y);
    if (st == MLA_OK)
        st = mla_mxfp4_quant(ctx, &x2, &q2, &s2, MLA_SCALE_ROW_MAJOR, MLA_MXFP4_OCP);
    if (st == MLA_OK)
        st = mla_batched_gemm_a4w4(ctx, &xq, &c.w, &y2);
    char line[160];
    snprintf(line, sizeof line, "%s: a16wfp4 with prequant (OCP) equals a4w4 of the quantized x",
             backend);
    mla_conformance_summary none;
    memset(&none, 0, sizeof none);
    neg_expect(st == MLA_OK && !memcmp(c.y.data, y2.data, (size_t)(B * M * N) * 4), line, &none);
    free(xq.codes.data), free(xq.scales.data), free(y2.data);
    gemm_case_free(&c);
}

/* The flattens equal the format ops on a contiguous copy of the rows, for
 * x the [H, T, v] buffer seen as [T, H, v] with a block spanning heads. */
static void flatten_is_quant(mla_context *ctx, const char *backend)
{
    enum { T = 3, H = 8, V = 48 };
    const int64_t hs[3] = {H, T, V}, rows[2] = {T, H * V};
    mla_tensor buf = neg_alloc(MLA_DTYPE_F32, 3, hs), x = buf, flat = neg_alloc(MLA_DTYPE_F32, 2, rows);
    mla_tensor_transpose(&x, 0, 1); /* [T, H, v] view */
    for (int64_t i = 0; i < H * T * V; ++i)
        ((float *)buf.data)[i] = ldexpf((float)((i * 7919) % 997) - 498.0f, (int)(i / 32 % 9) - 6);
    for (int64_t t = 0; t < T; ++t)
        for (int64_t j = 0; j < H * V; ++j)
            ((float *)flat.data)[t * H * V + j] = ((float *)buf.data)[off3(&x, t, j / V, j % V)];
    const int64_t c4[2] = {T, H * V / 2}, s4[2] = {T, H * V / 32}, c8[2] = {T, H * V},
                  s8[2] = {T, H * V / 128};
    mla_tensor ca = neg_alloc(MLA_DTYPE_FP4X2, 2, c4), cb = neg_alloc(MLA_DTYPE_FP4X2, 2, c4);
    mla_tensor sa = neg_alloc(MLA_DTYPE_E8M0, 2, s4), sb = neg_alloc(MLA_DTYPE_E8M0, 2, s4);
    mla_tensor fa = neg_alloc(MLA_DTYPE_FP8_E4M3FN, 2, c8), fb = neg_alloc(MLA_DTYPE_FP8_E4M3FN, 2, c8);
    mla_tensor ga = neg_alloc(MLA_DTYPE_F32, 2, s8), gb = neg_alloc(MLA_DTYPE_F32, 2, s8);
    mla_status st = mla_fused_flatten_mxfp4_quant(ctx, &x, &ca, &sa, MLA_MXFP4_PRODUCTION);
    if (st == MLA_OK)
        st = mla_mxfp4_quant(ctx, &flat, &cb, &sb, MLA_SCALE_ROW_MAJOR, MLA_MXFP4_PRODUCTION);
    if (st == MLA_OK)
        st = mla_fused_flatten_fp8_group_quant(ctx, &x, &fa, &ga);
    if (st == MLA_OK)
        st = mla_fp8_group_quant(ctx, &flat, &fb, &gb, 128, MLA_FP8_SCALE_AITER);
    const int same = st == MLA_OK && !memcmp(ca.data, cb.data, T * H * V / 2) &&
                     !memcmp(sa.data, sb.data, T * H * V / 32) &&
                     !memcmp(fa.data, fb.data, T * H * V) &&
                     !memcmp(ga.data, gb.data, T * H * V / 128 * 4);
    char line[160];
    snprintf(line, sizeof line, "%s: flatten quants (v = 48, [H,T,v] view) equal the format ops "
             "on the flattened rows", backend);
    mla_conformance_summary none;
    memset(&none, 0, sizeof none);
    neg_expect(same, line, &none);
    free(buf.data), free(flat.data), free(ca.data), free(cb.data), free(sa.data), free(sb.data);
    free(fa.data), free(fb.data), free(ga.data), free(gb.data);
}

/* CPU: the same bits with 1 and 3 threads, for B = 1 (weight rows split)
 * and B = 5, in the tile (M = 7) and OpenBLAS (M = 70) ranges. */
static void thread_independent(void)
{
    static const int64_t shapes[][4] = {{1, 7, 128, 100}, {5, 7, 64, 40}, {1, 70, 96, 70},
                                        {5, 70, 64, 33}};
    int ok = 1;
    for (int s = 0; s < 4; ++s) {
        gemm_case c[2];
        for (int i = 0; i < 2; ++i) {
            mla_context_options o = {i ? 3 : 1, 0, NULL};
            mla_context *ctx = NULL;
            gemm_case_init(&c[i], shapes[s][0], shapes[s][1], shapes[s][2], shapes[s][3]);
            ok &= mla_context_create(MLA_BACKEND_CPU, &o, &ctx) == MLA_OK &&
                  mla_batched_gemm_a16wfp4(ctx, &c[i].x, &c[i].w, 1, 0, &c[i].y) == MLA_OK;
            mla_context_destroy(ctx);
        }
        ok &= !memcmp(c[0].y.data, c[1].y.data, (size_t)mla_tensor_numel(&c[0].y) * 4);
        gemm_case_free(&c[0]), gemm_case_free(&c[1]);
    }
    mla_conformance_summary none;
    memset(&none, 0, sizeof none);
    neg_expect(ok, "cpu: a16wfp4 gives the same bits with 1 and 3 threads", &none);
}

/* ------------------------------------------------------------ driver */

void neg_mxfp4_controls(const mla_backend_ops *from)
{
    const mla_conformance_failure BITS = MLA_CONF_FAIL_BITS, BOUND = MLA_CONF_FAIL_BOUND;
    mla_backend_ops t = *from;
    t.gemm_a16wfp4 = a16wfp4_strides_swapped;
    neg_negative(from, &t, "a16wfp4 with y's batch and row strides swapped (split-K)",
                 "gemm_a16wfp4", BOUND);
    t = *from, t.gemm_a4w4 = a4w4_strides_swapped;
    neg_negative(from, &t, "a4w4 with y's batch and row strides swapped (split-K)", "gemm_a4w4",
                 BOUND);
    t = *from, t.gemm_a16wfp4 = a16wfp4_no_prequant;
    neg_negative(from, &t, "a16wfp4 ignoring prequant", "gemm_a16wfp4", BOUND);
    t = *from, t.gemm_a16wfp4 = a16wfp4_nibbles_swapped;
    neg_negative(from, &t, "a16wfp4 with the fp4 nibbles swapped", "gemm_a16wfp4", BOUND);
    t = *from, t.gemm_a16wfp4 = a16wfp4_preshuffle_as_rows;
    neg_negative(from, &t, "a16wfp4 reading pre-shuffled scales as row-major", "gemm_a16wfp4",
                 BOUND);
    t = *from, t.flatten_mxfp4_quant = flatten_ignores_x_strides;
    neg_negative(from, &t, "flatten MXFP4 quant ignoring x's strides", "flatten_mxfp4_quant",
                 BITS);
    t = *from, t.flatten_fp8_quant = flatten_fp8_ignores_scale_strides;
    neg_negative(from, &t, "flatten fp8 quant ignoring the scales' strides", "flatten_fp8_quant",
                 BITS);
    t = *from, t.gemm_a16wfp4 = a16wfp4_fp32_blocks;
    neg_positive(from, &t, "a16wfp4 in fp32, k descending, block scales on partial sums",
                 "gemm_a16wfp4");

    mla_context *ctx = NULL;
    if (mla_context_create_with_ops(from, NULL, &ctx) == MLA_OK) {
        bad_inputs(ctx, from->name);
        prequant_is_a4w4(ctx, from->name);
        flatten_is_quant(ctx, from->name);
    }
    mla_context_destroy(ctx);
    if (from->backend == MLA_BACKEND_CPU)
        thread_independent();
}
