/* Hadamard rotation of the DSA indexer's q and k (MLA.md section 6):
 *
 *     y[t, h, :] = x[t, h, :] @ H_D / sqrt(D)     (Sylvester H_D, D = 2^m <= 1024)
 *
 * as the fast Walsh-Hadamard transform in fp32: for each level `half`, every
 * pair (i, i + half) of a block of 2 half becomes (a + b, a - b) (H_2n =
 * [[H_n, H_n], [H_n, -H_n]]), then each value times c = fl(D^-0.5) (the
 * double 1 / sqrt(D) rounded once) and one rounding to y's dtype. A row
 * belongs to a team of M = min(D, 32) lanes (a power of two dividing both
 * vendors' waves), lane l holding
 * the C = D / M values l, l + M, l + 2M, ...: the levels half < M pair lanes
 * (a shuffle; the lane without the bit keeps a + b, the other a - b), the
 * levels half >= M pair registers of one lane. Every fp32 add and subtract is
 * one rounding; the levels run in a different order than the CPU backend's
 * (same exact result, different roundings, inside the conformance bound).
 * A team reads its whole row before the first shuffle and writes after the
 * last level, so y may be x. */
#include <math.h>

#include "hip/indexer_util.h"

namespace {

constexpr int kMaxTeam = 32; /* lanes per row, at most: a wave of either vendor holds whole teams */
static_assert(MLA_WAVE_SIZE % kMaxTeam == 0, "teams must not straddle waves");

struct had_desc {
    int64_t rows, H, D; /* rows = T * H */
    int64_t xs0, xs1, xs2, ys0, ys1, ys2;
    float c;
};

template <int DX, int DY, int C>
__global__ __launch_bounds__(MLA_HIP_BLOCK) void hadamard_kernel(const void *x, void *y, had_desc d)
{
    const int M = (int)(d.D / C); /* team size: min(D, wave) */
    const int lane = (int)threadIdx.x & (M - 1);
    const int64_t teams_per_block = MLA_HIP_BLOCK / M;
    const int64_t first = (int64_t)blockIdx.x * teams_per_block;
    const int64_t stride = (int64_t)gridDim.x * teams_per_block;
    for (int64_t r0 = first; r0 < d.rows; r0 += stride) {
        const int64_t r = r0 + (int64_t)threadIdx.x / M;
        const bool active = r < d.rows;
        const int64_t t = active ? r / d.H : 0, h = active ? r % d.H : 0;
        const int64_t xb = t * d.xs0 + h * d.xs1;
        float v[C];
#pragma unroll
        for (int j = 0; j < C; ++j)
            v[j] = active ? load_value<DX>(x, xb + (int64_t)(lane + M * j) * d.xs2) : 0.0f;
        /* levels across lanes: the whole wave shuffles, idle teams too */
        for (int half = 1; half < M; half *= 2) {
            const bool upper = (lane & half) != 0;
#pragma unroll
            for (int j = 0; j < C; ++j) {
                const float p = mla_shfl_xor(v[j], half);
                v[j] = upper ? p - v[j] : v[j] + p;
            }
        }
        /* levels inside a lane: element lane + M j pairs with lane + M (j + hj) */
#pragma unroll
        for (int hj = 1; hj < C; hj *= 2)
#pragma unroll
            for (int j = 0; j < C; ++j)
                if ((j & hj) == 0) {
                    const float a = v[j], bb = v[j + hj];
                    v[j] = a + bb;
                    v[j + hj] = a - bb;
                }
        if (!active)
            continue;
        const int64_t yb = t * d.ys0 + h * d.ys1;
#pragma unroll
        for (int j = 0; j < C; ++j)
            store_value<DY>(y, yb + (int64_t)(lane + M * j) * d.ys2, v[j] * d.c, 1);
    }
}

template <int DX, int DY, int C>
mla_status launch(mla_context *ctx, const mla_hadamard_args *a, const had_desc &d)
{
    const unsigned blocks = mla_hip_grid_blocks(ctx, d.rows * (d.D / C), MLA_HIP_BLOCK);
    hadamard_kernel<DX, DY, C><<<blocks, MLA_HIP_BLOCK, 0, mla_hip_state_of(ctx)->stream>>>(
        a->x.data, a->y.data, d);
    return mla_hip_check_launch(ctx, "hadamard kernel launch");
}

/* C = D / min(D, 32): teams of at most 32 lanes fit a wave of either
 * vendor, so the host needs no wave size. */
template <int DX, int DY>
mla_status dispatch_c(mla_context *ctx, const mla_hadamard_args *a, const had_desc &d)
{
    const int64_t C = d.D <= kMaxTeam ? 1 : d.D / kMaxTeam;
    switch (C) {
    case 1:
        return launch<DX, DY, 1>(ctx, a, d);
    case 2:
        return launch<DX, DY, 2>(ctx, a, d);
    case 4:
        return launch<DX, DY, 4>(ctx, a, d);
    case 8:
        return launch<DX, DY, 8>(ctx, a, d);
    case 16:
        return launch<DX, DY, 16>(ctx, a, d);
    case 32:
        return launch<DX, DY, 32>(ctx, a, d);
    default:
        return mla_fail(ctx, MLA_ERR_UNSUPPORTED, "x.shape", "Hadamard of %lld values: no HIP kernel",
                        (long long)d.D);
    }
}

template <int DX>
mla_status dispatch_y(mla_context *ctx, const mla_hadamard_args *a, const had_desc &d)
{
    if (a->y.dtype == MLA_DTYPE_BF16)
        return dispatch_c<DX, MLA_DTYPE_BF16>(ctx, a, d);
    return dispatch_c<DX, MLA_DTYPE_F32>(ctx, a, d);
}

} // namespace

mla_status mla_hip_hadamard(mla_context *ctx, const mla_hadamard_args *a)
{
    const mla_hip_device_scope scope(mla_hip_state_of(ctx)->device);
    if (scope.error() != hipSuccess)
        return mla_hip_fail(ctx, scope.error(), "selecting the context's GPU");
    mla_status st = mla_hip_check_tensor_memory(ctx, &a->x, "x");
    if (st == MLA_OK)
        st = mla_hip_check_tensor_memory(ctx, &a->y, "y");
    if (st != MLA_OK)
        return st;
    had_desc d = {};
    d.rows = a->x.shape[0] * a->x.shape[1];
    d.H = a->x.shape[1];
    d.D = a->x.shape[2];
    d.xs0 = a->x.stride[0];
    d.xs1 = a->x.stride[1];
    d.xs2 = a->x.stride[2];
    d.ys0 = a->y.stride[0];
    d.ys1 = a->y.stride[1];
    d.ys2 = a->y.stride[2];
    d.c = (float)(1.0 / sqrt((double)d.D));
    if (d.rows == 0)
        return MLA_OK;
    if (a->x.dtype == MLA_DTYPE_BF16)
        return dispatch_y<MLA_DTYPE_BF16>(ctx, a, d);
    return dispatch_y<MLA_DTYPE_F32>(ctx, a, d);
}
