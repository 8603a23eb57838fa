/* fp8 group dequant: y [M, K] (F32, F16, BF16) = fp8(code) * scale of its
 * group, one fp32 product (with format_bits' NaN rule, the x86 hosts') rounded
 * once to y's dtype.
 *
 * A thread takes C consecutive values of one group (C = 4 when G allows, so
 * the scale is read once per 4 values and contiguous rows move 4 codes in one
 * 4-byte load and 4 outputs in one store). */
#include "hip/device_util.h"

namespace {

struct fd_desc {
    int64_t M, K, G;
    int64_t cs0, cs1, ss0, ss1, ys0, ys1;
};

template <int FP8> MLA_DEV float fp8_value(uint8_t c)
{
    return FP8 == MLA_DTYPE_FP8_E4M3FNUZ ? mla_fb_e4m3fnuz_to_f32(c) : mla_fb_e4m3fn_to_f32(c);
}

/* C: values per thread (1 or 4, C divides G). VEC (C == 4 only): code and y
 * rows contiguous and aligned (the host checks). */
template <int FP8, int DT, int C, bool VEC>
__global__ __launch_bounds__(MLA_HIP_BLOCK) void fp8_group_dequant_kernel(const uint8_t *codes,
                                                                           const float *scales,
                                                                           void *y, fd_desc d)
{
    const int64_t chunks_per_row = d.K / C;
    const int64_t total = d.M * chunks_per_row;
    for (int64_t t = block_first_item() + threadIdx.x; t < total; t += grid_items()) {
        int64_t m, kc, g, unused;
        divmod64(t, chunks_per_row, m, kc);
        const int64_t k = kc * C;
        divmod64(k, d.G, g, unused);
        const float s = scales[m * d.ss0 + g * d.ss1];
        float v[C];
        if constexpr (VEC) {
            const uint32_t q = *reinterpret_cast<const uint32_t *>(codes + m * d.cs0 + k);
#pragma unroll
            for (int j = 0; j < C; ++j)
                v[j] = mla_fb_mul(fp8_value<FP8>((uint8_t)(q >> (8 * j))), s);
            store4_contig<DT>(y, m * d.ys0 + k, v);
        } else {
#pragma unroll
            for (int j = 0; j < C; ++j) {
                v[j] = mla_fb_mul(fp8_value<FP8>(codes[m * d.cs0 + (k + j) * d.cs1]), s);
                store_value<DT>(y, m * d.ys0 + (k + j) * d.ys1, v[j], 1);
            }
        }
    }
}

template <int FP8, int DT, int C, bool VEC>
mla_status launch(mla_context *ctx, const mla_fp8_group_dequant_args *a, const fd_desc &d)
{
    const unsigned blocks = mla_hip_grid_blocks(ctx, d.M * (d.K / C), MLA_HIP_BLOCK);
    fp8_group_dequant_kernel<FP8, DT, C, VEC>
        <<<blocks, MLA_HIP_BLOCK, 0, mla_hip_state_of(ctx)->stream>>>(
            static_cast<const uint8_t *>(a->codes.data), static_cast<const float *>(a->scales.data),
            a->y.data, d);
    return mla_hip_check_launch(ctx, "fp8_group_dequant kernel launch");
}

template <int FP8, int DT>
mla_status dispatch_shape(mla_context *ctx, const mla_fp8_group_dequant_args *a, const fd_desc &d)
{
    if (d.G % 4 != 0)
        return launch<FP8, DT, 1, false>(ctx, a, d);
    const bool vec = chunks_aligned(a->y, mla_dtype_size(a->y.dtype)) &&
                     a->codes.stride[1] == 1 && a->codes.stride[0] % 4 == 0 &&
                     reinterpret_cast<uintptr_t>(a->codes.data) % 4 == 0;
    return vec ? launch<FP8, DT, 4, true>(ctx, a, d) : launch<FP8, DT, 4, false>(ctx, a, d);
}

template <int FP8>
mla_status dispatch_dtype(mla_context *ctx, const mla_fp8_group_dequant_args *a, const fd_desc &d)
{
    switch (a->y.dtype) {
    case MLA_DTYPE_F32:
        return dispatch_shape<FP8, MLA_DTYPE_F32>(ctx, a, d);
    case MLA_DTYPE_F16:
        return dispatch_shape<FP8, MLA_DTYPE_F16>(ctx, a, d);
    case MLA_DTYPE_BF16:
        return dispatch_shape<FP8, MLA_DTYPE_BF16>(ctx, a, d);
    default:
        return mla_fail(ctx, MLA_ERR_UNSUPPORTED, "y.dtype", "y.dtype %s: no HIP fp8 kernel",
                        mla_dtype_name(a->y.dtype));
    }
}

} // namespace

mla_status mla_hip_fp8_group_dequant(mla_context *ctx, const mla_fp8_group_dequant_args *a)
{
    const mla_hip_device_scope scope(mla_hip_state_of(ctx)->device);
    if (scope.error() != hipSuccess)
        return mla_hip_fail(ctx, scope.error(), "selecting the context's GPU");
    mla_status st = mla_hip_check_tensor_memory(ctx, &a->codes, "codes");
    if (st == MLA_OK)
        st = mla_hip_check_tensor_memory(ctx, &a->scales, "scales");
    if (st == MLA_OK)
        st = mla_hip_check_tensor_memory(ctx, &a->y, "y");
    if (st != MLA_OK)
        return st;
    fd_desc d = {};
    d.M = a->M;
    d.K = a->K;
    d.G = a->group;
    d.cs0 = a->codes.stride[0];
    d.cs1 = a->codes.stride[1];
    d.ss0 = a->scales.stride[0];
    d.ss1 = a->scales.stride[1];
    d.ys0 = a->y.stride[0];
    d.ys1 = a->y.stride[1];
    if (d.M == 0 || d.K == 0)
        return MLA_OK;
    if (a->codes.dtype == MLA_DTYPE_FP8_E4M3FNUZ)
        return dispatch_dtype<MLA_DTYPE_FP8_E4M3FNUZ>(ctx, a, d);
    return dispatch_dtype<MLA_DTYPE_FP8_E4M3FN>(ctx, a, d);
}
