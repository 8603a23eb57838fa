/* convert: y = x elementwise, any shape and strides, through fp32 (every
 * source value is exact in fp32) with one rounding at the target, as the
 * reference does. When one side is FP4X2 the work item is one of its bytes,
 * i.e. a pair of values (2j, 2j + 1) of the other side's last dim.
 *
 * The host collapses dims that are contiguous in both tensors, so the common
 * contiguous or simply strided case runs with no index division at all. */
#include "hip/device_util.h"

namespace {

/* Item space after collapsing, innermost dim first (static indexing in the
 * kernel keeps the arrays in registers/kernel arguments). */
struct conv_desc {
    int32_t ndim;
    int32_t saturate;
    int64_t items;
    int64_t shape[MLA_MAX_DIMS];
    int64_t xs[MLA_MAX_DIMS], ys[MLA_MAX_DIMS]; /* item strides, in elements */
    int64_t x_pair, y_pair; /* step to the second value of a pair on an unpacked side */
};

MLA_DEV void item_offsets(const conv_desc &d, int64_t i, int64_t &xo, int64_t &yo)
{
    if (d.ndim == 1) {
        xo = i * d.xs[0];
        yo = i * d.ys[0];
        return;
    }
    xo = 0;
    yo = 0;
#pragma unroll
    for (int k = 0; k < MLA_MAX_DIMS; ++k) {
        if (k < d.ndim) {
            int64_t q, c;
            divmod64(i, d.shape[k], q, c);
            xo += c * d.xs[k];
            yo += c * d.ys[k];
            i = q;
        }
    }
}

template <int SRC, int DST>
__global__ __launch_bounds__(MLA_HIP_BLOCK) void convert_kernel(const void *x, void *y,
                                                                 conv_desc d)
{
    for (int64_t i = block_first_item() + threadIdx.x; i < d.items; i += grid_items()) {
        int64_t xo, yo;
        item_offsets(d, i, xo, yo);
        if constexpr (SRC == MLA_DTYPE_FP4X2 && DST == MLA_DTYPE_FP4X2) {
            /* fp4 -> fp32 -> fp4 is the identity on all 16 codes. */
            static_cast<uint8_t *>(y)[yo] = static_cast<const uint8_t *>(x)[xo];
        } else if constexpr (SRC == MLA_DTYPE_FP4X2) {
            uint8_t b = static_cast<const uint8_t *>(x)[xo];
            store_value<DST>(y, yo, mla_fb_e2m1_to_f32(b & 0xFu), d.saturate);
            store_value<DST>(y, yo + d.y_pair, mla_fb_e2m1_to_f32(b >> 4), d.saturate);
        } else if constexpr (DST == MLA_DTYPE_FP4X2) {
            uint8_t lo = mla_fb_f32_to_e2m1(load_value<SRC>(x, xo));
            uint8_t hi = mla_fb_f32_to_e2m1(load_value<SRC>(x, xo + d.x_pair));
            static_cast<uint8_t *>(y)[yo] = (uint8_t)(lo | (hi << 4));
        } else {
            store_value<DST>(y, yo, load_value<SRC>(x, xo), d.saturate);
        }
    }
}

/* Item shape and strides of the validated pair (x, y), collapsed. */
conv_desc describe(const mla_convert_args *a)
{
    const mla_tensor &x = a->x, &y = a->y;
    const bool xp = x.dtype == MLA_DTYPE_FP4X2, yp = y.dtype == MLA_DTYPE_FP4X2;
    const int32_t nd = x.ndim, last = nd - 1;
    conv_desc d = {};
    d.saturate = a->mode == MLA_SATURATE;
    if (xp != yp) { /* the unpacked side steps two values per item along its last dim */
        d.x_pair = xp ? 0 : x.stride[last];
        d.y_pair = yp ? 0 : y.stride[last];
    }
    /* Outermost first while collecting; extent-1 dims carry nothing. */
    int64_t shape[MLA_MAX_DIMS], xs[MLA_MAX_DIMS], ys[MLA_MAX_DIMS];
    int n = 0;
    d.items = 1;
    for (int32_t i = 0; i < nd; ++i) {
        const int64_t extent = (xp || !yp) ? x.shape[i] : y.shape[i];
        const int64_t sx = (i == last && yp && !xp) ? 2 * x.stride[i] : x.stride[i];
        const int64_t sy = (i == last && xp && !yp) ? 2 * y.stride[i] : y.stride[i];
        d.items *= extent;
        if (extent == 1)
            continue;
        if (n > 0 && xs[n - 1] == sx * extent && ys[n - 1] == sy * extent) {
            shape[n - 1] *= extent; /* the outer dim steps exactly over this one */
            xs[n - 1] = sx;
            ys[n - 1] = sy;
            continue;
        }
        shape[n] = extent;
        xs[n] = sx;
        ys[n] = sy;
        ++n;
    }
    if (n == 0) {
        shape[0] = 1;
        xs[0] = ys[0] = 0;
        n = 1;
    }
    d.ndim = n;
    for (int k = 0; k < n; ++k) {
        d.shape[k] = shape[n - 1 - k];
        d.xs[k] = xs[n - 1 - k];
        d.ys[k] = ys[n - 1 - k];
    }
    return d;
}

template <int SRC, int DST>
mla_status launch(mla_context *ctx, const mla_convert_args *a, const conv_desc &d)
{
    const unsigned blocks = mla_hip_grid_blocks(ctx, d.items, MLA_HIP_BLOCK);
    convert_kernel<SRC, DST><<<blocks, MLA_HIP_BLOCK, 0, mla_hip_state_of(ctx)->stream>>>(
        a->x.data, a->y.data, d);
    return mla_hip_check_launch(ctx, "convert kernel launch");
}

template <int SRC>
mla_status dispatch_dst(mla_context *ctx, const mla_convert_args *a, const conv_desc &d)
{
    switch (a->y.dtype) {
    case MLA_DTYPE_F32:
        return launch<SRC, MLA_DTYPE_F32>(ctx, a, d);
    case MLA_DTYPE_F16:
        return launch<SRC, MLA_DTYPE_F16>(ctx, a, d);
    case MLA_DTYPE_BF16:
        return launch<SRC, MLA_DTYPE_BF16>(ctx, a, d);
    case MLA_DTYPE_FP8_E4M3FN:
        return launch<SRC, MLA_DTYPE_FP8_E4M3FN>(ctx, a, d);
    case MLA_DTYPE_FP8_E4M3FNUZ:
        return launch<SRC, MLA_DTYPE_FP8_E4M3FNUZ>(ctx, a, d);
    case MLA_DTYPE_FP4X2:
        return launch<SRC, MLA_DTYPE_FP4X2>(ctx, a, d);
    default:
        return mla_fail(ctx, MLA_ERR_UNSUPPORTED, "y.dtype", "y.dtype %s: no HIP convert kernel",
                        mla_dtype_name(a->y.dtype));
    }
}

} // namespace

mla_status mla_hip_convert(mla_context *ctx, const mla_convert_args *a)
{
    const mla_hip_device_scope scope(mla_hip_state_of(ctx)->device);
    if (scope.error() != hipSuccess)
        return mla_hip_fail(ctx, scope.error(), "selecting the context's GPU");
    mla_status st = mla_hip_check_tensor_memory(ctx, &a->x, "x");
    if (st == MLA_OK)
        st = mla_hip_check_tensor_memory(ctx, &a->y, "y");
    if (st != MLA_OK)
        return st;
    const conv_desc d = describe(a);
    if (d.items == 0)
        return MLA_OK;
    switch (a->x.dtype) {
    case MLA_DTYPE_F32:
        return dispatch_dst<MLA_DTYPE_F32>(ctx, a, d);
    case MLA_DTYPE_F16:
        return dispatch_dst<MLA_DTYPE_F16>(ctx, a, d);
    case MLA_DTYPE_BF16:
        return dispatch_dst<MLA_DTYPE_BF16>(ctx, a, d);
    case MLA_DTYPE_FP8_E4M3FN:
        return dispatch_dst<MLA_DTYPE_FP8_E4M3FN>(ctx, a, d);
    case MLA_DTYPE_FP8_E4M3FNUZ:
        return dispatch_dst<MLA_DTYPE_FP8_E4M3FNUZ>(ctx, a, d);
    case MLA_DTYPE_E8M0:
        return dispatch_dst<MLA_DTYPE_E8M0>(ctx, a, d);
    case MLA_DTYPE_FP4X2:
        return dispatch_dst<MLA_DTYPE_FP4X2>(ctx, a, d);
    default:
        return mla_fail(ctx, MLA_ERR_UNSUPPORTED, "x.dtype", "x.dtype %s: no HIP convert kernel",
                        mla_dtype_name(a->x.dtype));
    }
}
