/* CPU fused flatten + quant (MLA.md section 7): x [T, H, v] -> the MXFP4
 * (blocks of 32) or fp8 AITER (groups of 128) quant of the rows [T, H*v],
 * bit-exact with the format ops on the flattened rows because it is those
 * ops' CPU kernels (cpu/mxfp4_quant.c, cpu/fp8_group_quant.c) run on views:
 *
 *  - a flattened row that is one strided run (H == 1, v == 1, or heads
 *    packed back to back: stride[1] == v * stride[2]) is a [T, H*v] view;
 *  - heads that hold whole blocks (v % block == 0) are quantized one head
 *    at a time, as [T, v] views with their slices of codes and scales (the
 *    [H, T, v] buffer seen as [T, H, v] takes this path, still no copy);
 *  - otherwise (a block spans two heads that are not adjacent in memory)
 *    chunks of tokens are gathered into an fp32 buffer first (exact).
 * Scales of any strides: the quant kernels address them through both. */
#include <stdlib.h>

#include "core/checked.h"
#include "cpu/cpu_kernels.h"
#include "cpu/cpu_rows.h"

#define MX_BLOCK 32
#define FP8_GROUP 128
#define GATHER_VALUES 65536 /* fp32 values per gathered chunk */

typedef struct quant_call {
    mla_context *ctx;
    int fp8;
    mla_mxfp4_rule rule;
} quant_call;

/* Runs the format op on x [M, K] with codes [M, K/2 | K] and scales [M, K/block]. */
static mla_status quantize(const quant_call *q, const mla_tensor *x, const mla_tensor *codes,
                           const mla_tensor *scales)
{
    const int64_t M = x->shape[0], K = x->shape[1];
    if (q->fp8) {
        mla_fp8_group_quant_args a = {*x, *codes, *scales, FP8_GROUP, MLA_FP8_SCALE_AITER, M, K};
        return mla_cpu_fp8_group_quant(q->ctx, &a);
    }
    mla_mxfp4_quant_args a = {*x, *codes, *scales, MLA_SCALE_ROW_MAJOR, q->rule, M, K};
    return mla_cpu_mxfp4_quant(q->ctx, &a);
}

/* A 2-D view of t: rows r0 .. r0 + rows, columns c0 .. c0 + cols. */
static mla_tensor sub2(const mla_tensor *t, int64_t r0, int64_t rows, int64_t c0, int64_t cols)
{
    mla_tensor v = *t;
    v.data = (char *)t->data +
             (r0 * t->stride[0] + c0 * t->stride[1]) * (int64_t)mla_dtype_size(t->dtype);
    v.shape[0] = rows;
    v.shape[1] = cols;
    return v;
}

/* x as a 2-D [T, n] view with element stride s along the row. */
static mla_tensor rows_view(const mla_tensor *x, int64_t n, int64_t s)
{
    mla_tensor v = *x;
    v.ndim = 2;
    v.shape[1] = n;
    v.stride[1] = s;
    return v;
}

/* Tokens in chunks: the flattened rows gathered into fp32, then quantized. */
static mla_status gathered(const quant_call *q, const mla_flatten_quant_args *a)
{
    const int64_t T = a->x.shape[0], H = a->x.shape[1], v = a->x.shape[2], HV = H * v;
    const int64_t tc = GATHER_VALUES / HV > 1 ? GATHER_VALUES / HV : 1;
    const int64_t xsz = (int64_t)mla_dtype_size(a->x.dtype);
    const int64_t ndiv = q->fp8 ? 1 : 2, block = q->fp8 ? FP8_GROUP : MX_BLOCK;
    float *buf;
    MLA_TRY(mla_alloc_array(q->ctx, (void **)&buf, tc, HV, sizeof *buf, "x"));
    mla_status st = MLA_OK;
    for (int64_t t0 = 0; st == MLA_OK && t0 < T; t0 += tc) {
        const int64_t n = T - t0 < tc ? T - t0 : tc;
        for (int64_t t = 0; t < n; ++t)
            for (int64_t h = 0; h < H; ++h)
                mla_cpu_load_float((const char *)a->x.data +
                                       ((t0 + t) * a->x.stride[0] + h * a->x.stride[1]) * xsz,
                                   a->x.dtype, a->x.stride[2], v, buf + t * HV + h * v);
        mla_tensor xb;
        const int64_t shape[2] = {n, HV};
        mla_tensor_init(&xb, buf, MLA_DTYPE_F32, MLA_MEMORY_HOST, 2, shape);
        mla_tensor c = sub2(&a->codes, t0, n, 0, HV / ndiv);
        mla_tensor s = sub2(&a->scales, t0, n, 0, HV / block);
        st = quantize(q, &xb, &c, &s);
    }
    free(buf);
    return st;
}

static mla_status flatten(const quant_call *q, const mla_flatten_quant_args *a)
{
    const int64_t T = a->x.shape[0], H = a->x.shape[1], v = a->x.shape[2];
    const int64_t ndiv = q->fp8 ? 1 : 2, block = q->fp8 ? FP8_GROUP : MX_BLOCK;
    if (H == 1 || v == 1 || a->x.stride[1] == v * a->x.stride[2]) {
        mla_tensor x = rows_view(&a->x, H * v, v == 1 ? a->x.stride[1] : a->x.stride[2]);
        return quantize(q, &x, &a->codes, &a->scales);
    }
    if (v % block)
        return gathered(q, a);
    mla_status st = MLA_OK;
    for (int64_t h = 0; st == MLA_OK && h < H; ++h) {
        mla_tensor x = rows_view(&a->x, v, a->x.stride[2]);
        x.data = (char *)a->x.data + h * a->x.stride[1] * (int64_t)mla_dtype_size(a->x.dtype);
        mla_tensor c = sub2(&a->codes, 0, T, h * v / ndiv, v / ndiv);
        mla_tensor s = sub2(&a->scales, 0, T, h * v / block, v / block);
        st = quantize(q, &x, &c, &s);
    }
    return st;
}

mla_status mla_cpu_flatten_mxfp4_quant(mla_context *ctx, const mla_flatten_quant_args *a)
{
    const quant_call q = {ctx, 0, a->rule};
    return flatten(&q, a);
}

mla_status mla_cpu_flatten_fp8_quant(mla_context *ctx, const mla_flatten_quant_args *a)
{
    const quant_call q = {ctx, 1, a->rule};
    return flatten(&q, a);
}
