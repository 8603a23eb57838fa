/* MXFP4 dequant: codes [M, K/2] + e8m0 scales -> y [M, K] (F32, F16, BF16),
 * y = fp4 * 2^(scale - 127) computed exactly from the bits (a NaN scale gives
 * +NaN, as on the host), then one rounding to y's dtype.
 *
 * One thread per 2 code bytes = 4 outputs of one block: 8 threads per block
 * share its scale byte, and contiguous rows take 2-byte loads and 16-byte
 * (f32) or 8-byte (f16/bf16) stores. */
#include "hip/device_util.h"

namespace {

constexpr int kPerThread = 4; /* values per thread */
constexpr int kThreadsPerBlock32 = 32 / kPerThread;

struct mxd_desc {
    int64_t M, N; /* N = K / 32 */
    int64_t cs0, cs1;
    int64_t ss0, ss1;
    int64_t ys0, ys1;
    int32_t preshuffled;
};

/* VEC: code rows and y rows contiguous and aligned (the host checks). */
template <int DT, bool VEC>
__global__ __launch_bounds__(MLA_HIP_BLOCK) void mxfp4_dequant_kernel(const uint8_t *codes,
                                                                       const uint8_t *scales,
                                                                       void *y, mxd_desc d)
{
    const int64_t total = d.M * d.N * kThreadsPerBlock32;
    for (int64_t t = block_first_item() + threadIdx.x; t < total; t += grid_items()) {
        int64_t m, n;
        divmod64(t / kThreadsPerBlock32, d.N, m, n);
        const int part = (int)(t % kThreadsPerBlock32);
        const int64_t k = n * 32 + part * kPerThread;
        const uint8_t scale =
            scales[d.preshuffled ? mla_fb_preshuffled_offset(m, n, d.N) : m * d.ss0 + n * d.ss1];
        const int64_t c = m * d.cs0 + (k / 2) * d.cs1;
        uint32_t pair; /* two code bytes, the first in the low byte */
        if (VEC)
            pair = *reinterpret_cast<const uint16_t *>(codes + c);
        else
            pair = (uint32_t)codes[c] | ((uint32_t)codes[c + d.cs1] << 8);
        float v[kPerThread];
#pragma unroll
        for (int j = 0; j < kPerThread; ++j)
            v[j] = mla_fb_e2m1_scaled_to_f32((uint8_t)((pair >> (4 * j)) & 0xFu), scale);
        if (VEC) {
            store4_contig<DT>(y, m * d.ys0 + k, v);
        } else {
#pragma unroll
            for (int j = 0; j < kPerThread; ++j)
                store_value<DT>(y, m * d.ys0 + (k + j) * d.ys1, v[j], 1);
        }
    }
}

template <int DT>
mla_status launch(mla_context *ctx, const mla_mxfp4_dequant_args *a, const mxd_desc &d)
{
    const bool vec = chunks_aligned(a->y, mla_dtype_size(a->y.dtype)) &&
                     a->codes.stride[1] == 1 && a->codes.stride[0] % 2 == 0 &&
                     reinterpret_cast<uintptr_t>(a->codes.data) % 2 == 0;
    const unsigned blocks = mla_hip_grid_blocks(ctx, d.M * d.N * kThreadsPerBlock32, MLA_HIP_BLOCK);
    hipStream_t stream = mla_hip_state_of(ctx)->stream;
    const uint8_t *codes = static_cast<const uint8_t *>(a->codes.data);
    const uint8_t *scales = static_cast<const uint8_t *>(a->scales.data);
    if (vec)
        mxfp4_dequant_kernel<DT, true><<<blocks, MLA_HIP_BLOCK, 0, stream>>>(codes, scales,
                                                                             a->y.data, d);
    else
        mxfp4_dequant_kernel<DT, false><<<blocks, MLA_HIP_BLOCK, 0, stream>>>(codes, scales,
                                                                              a->y.data, d);
    return mla_hip_check_launch(ctx, "mxfp4_dequant kernel launch");
}

} // namespace

mla_status mla_hip_mxfp4_dequant(mla_context *ctx, const mla_mxfp4_dequant_args *a)
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
    mxd_desc d = {};
    d.M = a->M;
    d.N = a->K / 32;
    d.cs0 = a->codes.stride[0];
    d.cs1 = a->codes.stride[1];
    d.ys0 = a->y.stride[0];
    d.ys1 = a->y.stride[1];
    d.preshuffled = a->layout == MLA_SCALE_PRESHUFFLED_GFX950;
    if (!d.preshuffled) {
        d.ss0 = a->scales.stride[0];
        d.ss1 = a->scales.stride[1];
    }
    if (d.M == 0 || d.N == 0)
        return MLA_OK;
    switch (a->y.dtype) {
    case MLA_DTYPE_F32:
        return launch<MLA_DTYPE_F32>(ctx, a, d);
    case MLA_DTYPE_F16:
        return launch<MLA_DTYPE_F16>(ctx, a, d);
    case MLA_DTYPE_BF16:
        return launch<MLA_DTYPE_BF16>(ctx, a, d);
    default:
        return mla_fail(ctx, MLA_ERR_UNSUPPORTED, "y.dtype", "y.dtype %s: no HIP MXFP4 kernel",
                        mla_dtype_name(a->y.dtype));
    }
}
