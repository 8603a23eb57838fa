/* MXFP4 quant: x [M, K] -> codes [M, K/2] (element 2i in the low nibble)
 * and one e8m0 scale per block of 32 along K, in the requested layout.
 *
 * A team of 8 lanes owns a block, 4 consecutive values per lane (one 16-byte
 * load for f32 rows), so a wave covers 8 (wave64) or 4 (wave32) neighbouring
 * blocks and its loads are contiguous. amax is a max over |x| as fp32 bits:
 * for non-negative floats the bit order is the value order, and inf/NaN
 * compare above every finite value, which is what the scale rule needs. */
#include "hip/device_util.h"

namespace {

constexpr int kLanes = 8;      /* lanes per 32-value block */
constexpr int kPerLane = 4;    /* values per lane */
static_assert(kLanes * kPerLane == 32, "an MXFP4 block is 32 values");
static_assert(MLA_WAVE_SIZE % kLanes == 0, "teams must not straddle waves");

struct mxq_desc {
    int64_t M, N;             /* N = K / 32 blocks per row */
    int64_t xs0, xs1;         /* x strides */
    int64_t cs0, cs1;         /* codes strides (bytes) */
    int64_t ss0, ss1;         /* scale strides, row-major / transposed layouts */
    int32_t preshuffled;      /* MLA_SCALE_PRESHUFFLED_GFX950 */
    int32_t production;       /* MLA_MXFP4_PRODUCTION */
};

/* VEC: x rows and code rows contiguous and aligned for 4-value loads and
 * 2-byte stores (the host checks). */
template <int DT, bool VEC>
__global__ __launch_bounds__(MLA_HIP_BLOCK) void mxfp4_quant_kernel(const void *x, uint8_t *codes,
                                                                     uint8_t *scales, mxq_desc d)
{
    const int64_t total = d.M * d.N * kLanes;
    const int lane = threadIdx.x % kLanes;
    for (int64_t t0 = block_first_item(); t0 < total; t0 += grid_items()) {
        const int64_t t = t0 + threadIdx.x;
        const bool active = t < total;
        int64_t m, n;
        divmod64(active ? t / kLanes : 0, d.N, m, n);
        const int64_t k = n * 32 + lane * kPerLane;

        float v[kPerLane];
        if (VEC && active) {
            load4_contig<DT>(x, m * d.xs0 + k, v);
        } else {
#pragma unroll
            for (int j = 0; j < kPerLane; ++j)
                v[j] = active ? load_value<DT>(x, m * d.xs0 + (k + j) * d.xs1) : 0.0f;
        }
        uint32_t amax = 0;
#pragma unroll
        for (int j = 0; j < kPerLane; ++j) {
            const uint32_t a = mla_fb_bits(v[j]) & 0x7FFFFFFFu;
            amax = a > amax ? a : amax;
        }
        amax = team_max_u32(amax, kLanes); /* every lane of the wave takes part */
        if (!active)
            continue;

        const uint8_t scale = mla_fb_mxfp4_scale_byte(amax, d.production);
        const uint32_t mask = mla_fb_mxfp4_code_mask(amax);
        uint8_t b[kPerLane / 2];
#pragma unroll
        for (int j = 0; j < kPerLane / 2; ++j)
            b[j] = (uint8_t)(mla_fb_mxfp4_code(v[2 * j], scale, mask) |
                             (mla_fb_mxfp4_code(v[2 * j + 1], scale, mask) << 4));
        const int64_t c = m * d.cs0 + (k / 2) * d.cs1;
        if (VEC) {
            *reinterpret_cast<uint16_t *>(codes + c) = (uint16_t)(b[0] | (b[1] << 8));
        } else {
            codes[c] = b[0];
            codes[c + d.cs1] = b[1];
        }
        if (lane == 0) {
            const int64_t s =
                d.preshuffled ? mla_fb_preshuffled_offset(m, n, d.N) : m * d.ss0 + n * d.ss1;
            scales[s] = scale;
        }
    }
}

template <int DT>
mla_status launch(mla_context *ctx, const mla_mxfp4_quant_args *a, const mxq_desc &d)
{
    const bool vec = chunks_aligned(a->x, mla_dtype_size(a->x.dtype)) && a->codes.stride[1] == 1 &&
                     a->codes.stride[0] % 2 == 0 &&
                     reinterpret_cast<uintptr_t>(a->codes.data) % 2 == 0;
    const unsigned blocks = mla_hip_grid_blocks(ctx, d.M * d.N * kLanes, MLA_HIP_BLOCK);
    hipStream_t stream = mla_hip_state_of(ctx)->stream;
    const void *x = a->x.data;
    uint8_t *codes = static_cast<uint8_t *>(a->codes.data);
    uint8_t *scales = static_cast<uint8_t *>(a->scales.data);
    if (vec)
        mxfp4_quant_kernel<DT, true><<<blocks, MLA_HIP_BLOCK, 0, stream>>>(x, codes, scales, d);
    else
        mxfp4_quant_kernel<DT, false><<<blocks, MLA_HIP_BLOCK, 0, stream>>>(x, codes, scales, d);
    return mla_hip_check_launch(ctx, "mxfp4_quant kernel launch");
}

} // namespace

mla_status mla_hip_mxfp4_quant(mla_context *ctx, const mla_mxfp4_quant_args *a)
{
    const mla_hip_device_scope scope(mla_hip_state_of(ctx)->device);
    if (scope.error() != hipSuccess)
        return mla_hip_fail(ctx, scope.error(), "selecting the context's GPU");
    mla_status st = mla_hip_check_tensor_memory(ctx, &a->x, "x");
    if (st == MLA_OK)
        st = mla_hip_check_tensor_memory(ctx, &a->codes, "codes");
    if (st == MLA_OK)
        st = mla_hip_check_tensor_memory(ctx, &a->scales, "scales");
    if (st != MLA_OK)
        return st;
    mxq_desc d = {};
    d.M = a->M;
    d.N = a->K / 32;
    d.xs0 = a->x.stride[0];
    d.xs1 = a->x.stride[1];
    d.cs0 = a->codes.stride[0];
    d.cs1 = a->codes.stride[1];
    d.preshuffled = a->layout == MLA_SCALE_PRESHUFFLED_GFX950;
    d.production = a->rule == MLA_MXFP4_PRODUCTION;
    if (!d.preshuffled) {
        d.ss0 = a->scales.stride[0];
        d.ss1 = a->scales.stride[1];
    } else {
        /* The kernel writes every real scale; the padding must read 0. */
        hipError_t err = hipMemsetAsync(a->scales.data, 0, (size_t)a->scales.shape[0],
                                        mla_hip_state_of(ctx)->stream);
        if (err != hipSuccess)
            return mla_hip_fail(ctx, err, "hipMemsetAsync of the scale padding");
    }
    if (d.M == 0 || d.N == 0)
        return MLA_OK;
    switch (a->x.dtype) {
    case MLA_DTYPE_F32:
        return launch<MLA_DTYPE_F32>(ctx, a, d);
    case MLA_DTYPE_F16:
        return launch<MLA_DTYPE_F16>(ctx, a, d);
    case MLA_DTYPE_BF16:
        return launch<MLA_DTYPE_BF16>(ctx, a, d);
    default:
        return mla_fail(ctx, MLA_ERR_UNSUPPORTED, "x.dtype", "x.dtype %s: no HIP MXFP4 kernel",
                        mla_dtype_name(a->x.dtype));
    }
}
