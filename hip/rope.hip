/* RoPE: y[t, h, :R] = rotate(x[t, h, :R]) by positions[t], y[t, h, R:] =
 * x[t, h, R:] converted; bit-exact with the reference (the rotation and its
 * roundings are hip/rope_util.h's), one rounding to y's dtype.
 *
 * Work items per row (t, h): ceil(R/16) rotation units of 8 pairs, then
 * ceil((D - R)/8) copy chunks; a thread per item, 32-bit item arithmetic
 * inside a window (hip/chunk8.h). A V3 q_pe row [64] is 4
 * units, each two 16-byte bf16 loads and stores plus 32 bytes of table.
 * y may be x (in place): each item reads exactly the values it writes. */
#include "hip/rope_util.h"

namespace {

struct rope_desc {
    rope_table tb;
    const void *x, *pos;
    void *y;
    int64_t H, R, D;
    int64_t xs0, xs1, xs2, ys0, ys1, ys2, ps;
    int64_t units, per_row; /* rotation units of a row, items of a row */
    int32_t pos64;
};

template <int XT, int YT>
__global__ __launch_bounds__(MLA_HIP_BLOCK) void rope_kernel(rope_desc d, item_window w)
{
    for (uint32_t i = window_first() + threadIdx.x; i < w.count; i += window_stride()) {
        int64_t t;
        uint32_t hc;
        window_item(w, i, t, hc); /* token t, item hc of its H rows */
        const int64_t h = hc / (uint32_t)d.per_row, c = hc % (uint32_t)d.per_row;
        const int64_t xb = t * d.xs0 + h * d.xs1, yb = t * d.ys0 + h * d.ys1;
        if (c < d.units) {
            const int64_t pos = load_index(d.pos, d.pos64, t * d.ps);
            const int64_t i0 = c * kPairs;
            float out[2][kChunk];
            rope_unit<XT>(d.x, xb, d.xs2, d.tb, pos, i0, out);
            const rope_pieces p = pieces_of(d.tb, i0, unit_pairs(d.tb, i0));
            store8<YT>(d.y, yb + p.d[0] * d.ys2, d.ys2, p.n[0], out[0]);
            store8<YT>(d.y, yb + p.d[1] * d.ys2, d.ys2, p.n[1], out[1]);
        } else {
            const int64_t d0 = d.R + (c - d.units) * kChunk;
            const int n = chunk_len(d.D - d0);
            float v[kChunk];
            load8<XT>(d.x, xb + d0 * d.xs2, d.xs2, n, v);
            store8<YT>(d.y, yb + d0 * d.ys2, d.ys2, n, v);
        }
    }
}

} // namespace

mla_status mla_hip_rope(mla_context *ctx, const mla_rope_args *a)
{
    const mla_hip_device_scope scope(mla_hip_state_of(ctx)->device);
    if (scope.error() != hipSuccess)
        return mla_hip_fail(ctx, scope.error(), "selecting the context's GPU");
    const mla_tensor *t[] = {&a->cos, &a->sin, &a->positions, &a->x, &a->y};
    const char *names[] = {"cos", "sin", "positions", "x", "y"};
    for (int k = 0; k < 5; ++k) {
        mla_status st = mla_hip_check_tensor_memory(ctx, t[k], names[k]);
        if (st != MLA_OK)
            return st;
    }
    const mla_tensor &x = a->x, &y = a->y;
    rope_desc d = {};
    mla_status st = make_rope_table(ctx, a->cos, a->sin, a->style, d.tb);
    if (st != MLA_OK)
        return st;
    d.x = x.data;
    d.pos = a->positions.data;
    d.y = y.data;
    d.H = x.shape[1];
    d.R = a->rope_dim;
    d.D = x.shape[2];
    d.xs0 = x.stride[0];
    d.xs1 = x.stride[1];
    d.xs2 = x.stride[2];
    d.ys0 = y.stride[0];
    d.ys1 = y.stride[1];
    d.ys2 = y.stride[2];
    d.ps = a->positions.stride[0];
    d.units = (d.tb.half + kPairs - 1) / kPairs;
    d.per_row = d.units + (d.D - d.R + kChunk - 1) / kChunk;
    d.pos64 = a->positions.dtype == MLA_DTYPE_I64;
    hipStream_t stream = mla_hip_state_of(ctx)->stream;
    return for_windows(ctx, x.shape[0], d.H * d.per_row, [&](const item_window &w) {
        const unsigned blocks = mla_hip_grid_blocks(ctx, w.count, MLA_HIP_BLOCK);
        return with_float(x.dtype, [&](auto xt) {
            return with_float(y.dtype, [&](auto yt) {
                rope_kernel<decltype(xt)::value, decltype(yt)::value>
                    <<<blocks, MLA_HIP_BLOCK, 0, stream>>>(d, w);
                return mla_hip_check_launch(ctx, "rope kernel launch");
            });
        });
    });
}
