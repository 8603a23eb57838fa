/* RoPE: y[t, h, :R] = rotate(x[t, h, :R]) by positions[t], y[t, h, R:] =
 * x[t, h, R:] converted; bit-exact with the reference (the rotation and its
 * roundings are hip/rope_util.h's), one rounding to y's dtype.
 *
 * Work items per token t: for each of ceil(R/16) rotation units of 8 pairs
 * and ceil((D - R)/8) copy chunks of a row, ceil(H / kRopeHeads) head
 * groups; the item's thread does its unit or chunk in the group's heads h =
 * g, g + groups, ... (kRopeHeads<MODE> of them): position and cos/sin loaded once
 * for all of them, all their loads in flight before the first store. 32-bit
 * item arithmetic inside a window (hip/chunk8.h). A V3 q_pe row [64] is 4
 * units, each two 16-byte bf16 loads and stores; the 64 bytes of table
 * serve 4 heads. y may be x (in place): each item reads exactly the values
 * it writes. */
#include "hip/rope_util.h"

namespace
{

/* Heads per item: 4 with the wide accesses, 2 with the run-time access
 * tests of kAuto (4 spilled scalar registers on gfx9). */
template <int MODE> constexpr int kRopeHeads = MODE == kWide ? 4 : 2;

struct rope_desc {
    rope_table tb;
    const void *x, *pos;
    void *y;
    int64_t H, R, D;
    int64_t xs0, xs1, xs2, ys0, ys1, ys2, ps;
    uint32_t units, per_head, groups; /* rotation units and items of a row; head groups */
    int32_t pos64;
};

template <int XT, int YT, int MODE>
__global__ __launch_bounds__(MLA_HIP_BLOCK) void rope_kernel(rope_desc d, item_window w)
{
    for (uint32_t i = window_first() + threadIdx.x; i < w.count; i += window_stride()) {
        int64_t t;
        uint32_t k;
        window_item(w, i, t, k); /* token t, item k of its rows */
        const uint32_t g = k / d.per_head, c = k % d.per_head;
        int64_t xb[kRopeHeads<MODE>], yb[kRopeHeads<MODE>];
        bool live[kRopeHeads<MODE>];
#pragma unroll
        for (int j = 0; j < kRopeHeads<MODE>; ++j) {
            const int64_t h = (int64_t)g + (int64_t)j * d.groups;
            live[j] = h < d.H;
            xb[j] = t * d.xs0 + h * d.xs1;
            yb[j] = t * d.ys0 + h * d.ys1;
        }
        if (c < d.units) {
            const int64_t pos = load_index(d.pos, d.pos64, t * d.ps);
            const int64_t i0 = (int64_t)c * kPairs;
            const int np = mode_pairs<MODE>(d.tb, i0);
            const rope_pieces p = pieces_of(d.tb, i0, np);
            float cs[kChunk], sn[kChunk], v[kRopeHeads<MODE>][2][kChunk];
            rope_table_unit<MODE>(d.tb, pos, i0, np, cs, sn);
#pragma unroll
            for (int j = 0; j < kRopeHeads<MODE>; ++j)
#pragma unroll
                for (int q = 0; q < 2; ++q)
                    load8<XT, MODE>(d.x, xb[j] + p.d[q] * d.xs2, d.xs2, live[j] ? p.n[q] : 0,
                                    v[j][q]);
#pragma unroll
            for (int j = 0; j < kRopeHeads<MODE>; ++j) {
                if (!live[j])
                    continue;
                float out[2][kChunk];
                rope_rotate_unit(d.tb, v[j], cs, sn, out);
#pragma unroll
                for (int q = 0; q < 2; ++q)
                    store8<YT, MODE>(d.y, yb[j] + p.d[q] * d.ys2, d.ys2, p.n[q], out[q]);
            }
        } else {
            const int64_t d0 = d.R + (int64_t)(c - d.units) * kChunk;
            const int n = mode_chunk_len<MODE>(d.D - d0);
            float v[kRopeHeads<MODE>][kChunk];
#pragma unroll
            for (int j = 0; j < kRopeHeads<MODE>; ++j)
                load8<XT, MODE>(d.x, xb[j] + d0 * d.xs2, d.xs2, live[j] ? n : 0, v[j]);
#pragma unroll
            for (int j = 0; j < kRopeHeads<MODE>; ++j)
                if (live[j])
                    store8<YT, MODE>(d.y, yb[j] + d0 * d.ys2, d.ys2, n, v[j]);
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
    /* wide: whole units and chunks, rows contiguous and aligned everywhere
     * (one 16-byte access per 8 values, nothing else compiled). units,
     * per_head, groups: below 2^31 (x.shape[2], H checked). */
    const int64_t per_head = (d.tb.half + kPairs - 1) / kPairs + (d.D - d.R + kChunk - 1) / kChunk;
    const bool wide = wide_ok(x, 2) && wide_ok(y, 2) && wide_ok(a->cos, 1) && wide_ok(a->sin, 1) &&
                      d.tb.half % kPairs == 0 && (d.D - d.R) % kChunk == 0;
    const int64_t heads = wide ? kRopeHeads<kWide> : kRopeHeads<kAuto>;
    const int64_t groups = (d.H + heads - 1) / heads;
    if ((st = check_dim32(ctx, d.D, "x.shape[2]")) != MLA_OK ||
        (st = check_dim32(ctx, d.H, "x.shape[1]")) != MLA_OK)
        return st;
    d.units = (uint32_t)((d.tb.half + kPairs - 1) / kPairs);
    d.per_head = (uint32_t)per_head;
    d.groups = (uint32_t)groups;
    d.pos64 = a->positions.dtype == MLA_DTYPE_I64;
    hipStream_t stream = mla_hip_state_of(ctx)->stream;
    return for_windows(ctx, x.shape[0], groups * per_head, [&](const item_window &w) {
        const unsigned blocks = mla_hip_grid_blocks(ctx, w.count, MLA_HIP_BLOCK);
        return with_float(x.dtype, [&](auto xt) {
            return with_float(y.dtype, [&](auto yt) {
                if (wide)
                    rope_kernel<decltype(xt)::value, decltype(yt)::value, kWide>
                        <<<blocks, MLA_HIP_BLOCK, 0, stream>>>(d, w);
                else
                    rope_kernel<decltype(xt)::value, decltype(yt)::value, kAuto>
                        <<<blocks, MLA_HIP_BLOCK, 0, stream>>>(d, w);
                return mla_hip_check_launch(ctx, "rope kernel launch");
            });
        });
    });
}
