/* LayerNorm of the DSA indexer's k (MLA.md section 6), fp32 math, one
 * rounding to y's dtype:
 *
 *     mean = fl(S1 / D),  S1 = sum_d x[t, d]
 *     var  = fl(S2 / D),  S2 = sum_d fl(x[t, d] - mean)^2     (population)
 *     sd   = sqrtf(var + eps)
 *     y[t, d] = fl(fl(fl(x - mean) / sd) * w[d]) + b[d]
 *
 * One wave per row: lane l takes d = l, l + W, l + 2W, ... (W the wave
 * size), its partial sums in that order, then the wave's butterfly (xor 1,
 * 2, ..., W/2) adds them in a fixed order. The first kCached values of each
 * lane stay in registers between the passes (D <= 8 W never reloads). The
 * reference sums in float64; the difference is inside the conformance bound.
 * In place is safe: every read of a row precedes the reductions, and each
 * lane then writes only the elements it read. */
#include <math.h>

#include "hip/indexer_util.h"

namespace {

constexpr int kCached = 8;

struct ln_desc {
    int64_t T, D;
    int64_t xs0, xs1, ys0, ys1, ws, bs;
    float eps;
};

MLA_DEV float wave_sum(float v)
{
    for (int o = 1; o < MLA_WAVE_SIZE; o *= 2)
        v += mla_shfl_xor(v, o);
    return v;
}

template <int DX, int DY>
__global__ __launch_bounds__(MLA_HIP_BLOCK) void layernorm_kernel(const void *x, const float *w,
                                                                   const float *b, void *y,
                                                                   ln_desc d)
{
    const int lane = (int)threadIdx.x % MLA_WAVE_SIZE;
    const int waves_per_block = MLA_HIP_BLOCK / MLA_WAVE_SIZE;
    const int64_t wave0 = (int64_t)blockIdx.x * waves_per_block;
    const int64_t stride = (int64_t)gridDim.x * waves_per_block;
    /* the bound is tested per block: whole waves run every iteration */
    for (int64_t t0 = wave0; t0 < d.T; t0 += stride) {
        const int64_t t = t0 + (int64_t)threadIdx.x / MLA_WAVE_SIZE;
        const int64_t n = t < d.T ? d.D : 0; /* an idle wave sums nothing */
        const int64_t xrow = (t < d.T ? t : 0) * d.xs0;
        float v[kCached];
        float s1 = 0.0f;
        int64_t k = lane;
#pragma unroll
        for (int j = 0; j < kCached; ++j, k += MLA_WAVE_SIZE) {
            v[j] = k < n ? load_value<DX>(x, xrow + k * d.xs1) : 0.0f;
            s1 += v[j];
        }
        for (; k < n; k += MLA_WAVE_SIZE)
            s1 += load_value<DX>(x, xrow + k * d.xs1);
        const float mean = wave_sum(s1) / (float)d.D;
        float s2 = 0.0f;
        k = lane;
#pragma unroll
        for (int j = 0; j < kCached; ++j, k += MLA_WAVE_SIZE)
            if (k < n) {
                const float e = v[j] - mean;
                s2 += e * e;
            }
        for (; k < n; k += MLA_WAVE_SIZE) {
            const float e = load_value<DX>(x, xrow + k * d.xs1) - mean;
            s2 += e * e;
        }
        const float var = wave_sum(s2) / (float)d.D;
        const float sd = sqrtf(var + d.eps);
        if (t >= d.T)
            continue;
        const int64_t yrow = t * d.ys0;
        k = lane;
#pragma unroll
        for (int j = 0; j < kCached; ++j, k += MLA_WAVE_SIZE)
            if (k < n) {
                const float s = (v[j] - mean) / sd * w[k * d.ws];
                store_value<DY>(y, yrow + k * d.ys1, s + b[k * d.bs], 1);
            }
        for (; k < n; k += MLA_WAVE_SIZE) {
            const float s = (load_value<DX>(x, xrow + k * d.xs1) - mean) / sd * w[k * d.ws];
            store_value<DY>(y, yrow + k * d.ys1, s + b[k * d.bs], 1);
        }
    }
}

template <int DX, int DY> mla_status launch(mla_context *ctx, const mla_layernorm_args *a, const ln_desc &d)
{
    const int64_t waves = (int64_t)(MLA_HIP_BLOCK / MLA_WAVE_SIZE_MAX);
    const unsigned blocks = mla_hip_grid_blocks(ctx, (d.T + waves - 1) / waves * MLA_HIP_BLOCK,
                                                MLA_HIP_BLOCK);
    layernorm_kernel<DX, DY><<<blocks, MLA_HIP_BLOCK, 0, mla_hip_state_of(ctx)->stream>>>(
        a->x.data, static_cast<const float *>(a->w.data), static_cast<const float *>(a->b.data),
        a->y.data, d);
    return mla_hip_check_launch(ctx, "layernorm kernel launch");
}

template <int DX> mla_status dispatch_y(mla_context *ctx, const mla_layernorm_args *a, const ln_desc &d)
{
    switch (a->y.dtype) {
    case MLA_DTYPE_F32:
        return launch<DX, MLA_DTYPE_F32>(ctx, a, d);
    case MLA_DTYPE_BF16:
        return launch<DX, MLA_DTYPE_BF16>(ctx, a, d);
    case MLA_DTYPE_F16:
        return launch<DX, MLA_DTYPE_F16>(ctx, a, d);
    default:
        return mla_fail(ctx, MLA_ERR_UNSUPPORTED, "y.dtype", "y.dtype %s: no HIP LayerNorm",
                        mla_dtype_name(a->y.dtype));
    }
}

} // namespace

mla_status mla_hip_layernorm(mla_context *ctx, const mla_layernorm_args *a)
{
    const mla_hip_device_scope scope(mla_hip_state_of(ctx)->device);
    if (scope.error() != hipSuccess)
        return mla_hip_fail(ctx, scope.error(), "selecting the context's GPU");
    const mla_tensor *ts[4] = {&a->x, &a->w, &a->b, &a->y};
    const char *names[4] = {"x", "w", "b", "y"};
    for (int i = 0; i < 4; ++i) {
        mla_status st = mla_hip_check_tensor_memory(ctx, ts[i], names[i]);
        if (st != MLA_OK)
            return st;
    }
    ln_desc d = {};
    d.T = a->x.shape[0];
    d.D = a->x.shape[1];
    d.xs0 = a->x.stride[0];
    d.xs1 = a->x.stride[1];
    d.ys0 = a->y.stride[0];
    d.ys1 = a->y.stride[1];
    d.ws = a->w.stride[0];
    d.bs = a->b.stride[0];
    d.eps = a->eps;
    if (d.T == 0 || d.D == 0)
        return MLA_OK;
    switch (a->x.dtype) {
    case MLA_DTYPE_F32:
        return dispatch_y<MLA_DTYPE_F32>(ctx, a, d);
    case MLA_DTYPE_BF16:
        return dispatch_y<MLA_DTYPE_BF16>(ctx, a, d);
    case MLA_DTYPE_F16:
        return dispatch_y<MLA_DTYPE_F16>(ctx, a, d);
    default:
        return mla_fail(ctx, MLA_ERR_UNSUPPORTED, "x.dtype", "x.dtype %s: no HIP LayerNorm",
                        mla_dtype_name(a->x.dtype));
    }
}
