/* The W_vc -> o_proj hand-off of mla_layer_forward (MLA.md section 7, seed
 * 003): W_vc writes the [T, H, v] buffer through a [H, T, v] view and o_proj
 * reads that very buffer (flattened by a view for bf16 / fp8 weights,
 * quantized in place by the fused flatten for MXFP4), with no allocation
 * and no copy in between. The reference backend's table is wrapped so that
 * every slot call is seen: the W_vc GEMM's output pointer and strides, the
 * pointer the o_proj stage reads, and the memory calls between the two. */
#include <string.h>

#include "core/backend.h"
#include "tests/layer_run.h"
#include "tests/test_util.h"

static mla_backend_ops ops;
static struct {
    int allocs, copies;   /* memory calls so far */
    const void *vc_out;   /* y of the latest batched GEMM (W_vc is the last) */
    int64_t vc_stride[3]; /* its strides, [H, T, v] view of [T, H, v] */
    int allocs_at_vc, copies_at_vc;
    const void *oproj_in; /* what the o_proj stage read (linear x or flatten x) */
    int allocs_at_o, copies_at_o;
    const void *flat_codes, *a4w4_codes;
} seen;

static mla_status count_alloc(mla_context *ctx, size_t bytes, void **out)
{
    ++seen.allocs;
    return mla_reference_ops.mem_alloc(ctx, bytes, out);
}

static mla_status count_copy(mla_context *ctx, void *dst, const void *src, size_t bytes,
                             mla_copy_kind kind)
{
    ++seen.copies;
    return mla_reference_ops.mem_copy(ctx, dst, src, bytes, kind);
}

static void at_vc(const mla_tensor *y)
{
    seen.vc_out = y->data;
    memcpy(seen.vc_stride, y->stride, sizeof seen.vc_stride);
    seen.allocs_at_vc = seen.allocs, seen.copies_at_vc = seen.copies;
}

static void at_o(const void *x)
{
    seen.oproj_in = x;
    seen.allocs_at_o = seen.allocs, seen.copies_at_o = seen.copies;
}

static mla_status see_batched(mla_context *ctx, const mla_batched_gemm_args *a)
{
    at_vc(&a->y);
    return mla_reference_ops.batched_gemm(ctx, a);
}

static mla_status see_a16wfp4(mla_context *ctx, const mla_mxfp4_gemm_args *a)
{
    if (a->B > 1) /* the per-head GEMMs (absorb, W_vc), not the B = 1 projections */
        at_vc(&a->y);
    return mla_reference_ops.gemm_a16wfp4(ctx, a);
}

static mla_status see_linear(mla_context *ctx, const mla_linear_args *a)
{
    at_o(a->x.data);
    return mla_reference_ops.linear(ctx, a);
}

static mla_status see_flatten(mla_context *ctx, const mla_flatten_quant_args *a)
{
    at_o(a->x.data);
    seen.flat_codes = a->codes.data;
    return mla_reference_ops.flatten_mxfp4_quant(ctx, a);
}

static mla_status see_a4w4(mla_context *ctx, const mla_mxfp4_gemm_args *a)
{
    seen.a4w4_codes = a->xq.codes.data;
    return mla_reference_ops.gemm_a4w4(ctx, a);
}

static void run(mla_context *ctx, const char *cfg, int fmt)
{
    layer_model m;
    if (layer_model_make(ctx, cfg, fmt, 0x5EEDu, &m) != 0) {
        CHECK(!"model");
        return;
    }
    /* one decode step of one sequence after a prefill: the o_proj of the
     * last step is the last one seen */
    lr_case c = {-1, 1, MLA_DTYPE_BF16, MLA_DTYPE_F32, 1, {6}, 1, 0, MLA_DTYPE_BF16};
    memset(&seen, 0, sizeof seen);
    lr_result r;
    CHECK_STATUS(lr_run(ctx, &m, &c, 0, &r), MLA_OK);
    const int64_t H = m.cfg.heads, v = m.cfg.v;
    const int same = seen.vc_out && seen.vc_out == seen.oproj_in;
    CHECK(same);
    CHECK(seen.vc_stride[0] == v && seen.vc_stride[1] == H * v && seen.vc_stride[2] == 1);
    CHECK(seen.allocs_at_o == seen.allocs_at_vc);
    CHECK(seen.copies_at_o == seen.copies_at_vc);
    if (fmt == 2)
        CHECK(seen.flat_codes && seen.flat_codes == seen.a4w4_codes);
    printf(
        "%s %s: o_proj reads the W_vc output in place: %s; allocations / copies between: %d / %d\n",
        cfg,
        fmt == 2 ? "mxfp4 (fused flatten quant + a4w4)"
        : fmt    ? "fp8"
                 : "bf16",
        same ? "yes" : "NO", seen.allocs_at_o - seen.allocs_at_vc,
        seen.copies_at_o - seen.copies_at_vc);
    lr_free(&r);
    layer_model_free(&m);
}

int main(void)
{
    ops = mla_reference_ops;
    ops.mem_alloc = count_alloc;
    ops.mem_copy = count_copy;
    ops.batched_gemm = see_batched;
    ops.gemm_a16wfp4 = see_a16wfp4;
    ops.linear = see_linear;
    ops.flatten_mxfp4_quant = see_flatten;
    ops.gemm_a4w4 = see_a4w4;
    mla_context *ctx = NULL;
    CHECK_STATUS(mla_context_create_with_ops(&ops, NULL, &ctx), MLA_OK);
    if (!ctx)
        return TEST_SUMMARY();
    run(ctx, "test-tiny", 0);
    run(ctx, "test-tiny", 1);
    run(ctx, "test-tiny", 2);
    run(ctx, "test-tiny-noq", 2);
    mla_context_destroy(ctx);
    return TEST_SUMMARY();
}
