/* Fused flatten + quant (MLA.md section 7): x [T, H, v] with any strides is
 * read as the rows [T, H*v] (value j of row t is x[t, j / v, j % v]) and
 * each row is quantized exactly as the format kernels quantize a contiguous
 * row, straight from x (no gathered copy):
 *
 *  - MXFP4 (blocks of 32, either rule): the team structure of
 *    hip/mxfp4_quant.hip, 8 lanes x 4 values per block, amax as fp32 bits,
 *    scale byte and codes from core/format_bits.h;
 *  - fp8 AITER groups of 128: the team structure of hip/fp8_group_quant.hip
 *    (32 lanes x 4 values, NaN groups take their last NaN as amax, as the
 *    host reference does), scale and codes from core/format_bits.h.
 *
 * Both write codes and scales through their strides (row-major, transposed,
 * padded, misaligned). When a block (group) lies inside one head, which is
 * every block when v is a multiple of 32 (128), its values are a strided run
 * of x and need no index division; otherwise each value finds its head. */
#include "hip/device_util.h"

namespace {

constexpr int kMxLanes = 8;   /* lanes per 32-value MXFP4 block */
constexpr int kMxPerLane = 4; /* values per lane */
static_assert(kMxLanes * kMxPerLane == 32, "an MXFP4 block is 32 values");
static_assert(MLA_WAVE_SIZE % kMxLanes == 0, "teams must not straddle waves");

constexpr int kFp8Group = 128;
constexpr int kFp8Team = 32; /* fits a wave on both vendors */
constexpr int kFp8PerLane = kFp8Group / kFp8Team;
static_assert(MLA_WAVE_SIZE % kFp8Team == 0, "teams must not straddle waves");

struct flat_desc {
    int64_t T, v, blocks; /* blocks (groups) per flattened row */
    int64_t xs0, xs1, xs2;
    int64_t cs0, cs1; /* codes strides (bytes) */
    int64_t ss0, ss1; /* scale strides */
    int32_t production;
};

/* Element offset in x of value j of flattened row t. */
MLA_DEV int64_t flat_offset(const flat_desc &d, int64_t t, int64_t j)
{
    int64_t h, i;
    divmod64(j, d.v, h, i);
    return t * d.xs0 + h * d.xs1 + i * d.xs2;
}

/* ------------------------------------------------------------- MXFP4 */

/* IN_HEAD: v % 32 == 0 (a block is a strided run inside one head).
 * VEC: additionally that run is contiguous and 4-value aligned, and the code
 * bytes of a row are contiguous and 2-byte aligned (the host checks). */
template <int DT, bool IN_HEAD, bool VEC>
__global__ __launch_bounds__(MLA_HIP_BLOCK) void flatten_mxfp4_kernel(const void *x,
                                                                       uint8_t *codes,
                                                                       uint8_t *scales,
                                                                       flat_desc d)
{
    const int64_t total = d.T * d.blocks * kMxLanes;
    const int lane = threadIdx.x % kMxLanes;
    for (int64_t t0 = block_first_item(); t0 < total; t0 += grid_items()) {
        const int64_t item = t0 + threadIdx.x;
        const bool active = item < total;
        int64_t t, n;
        divmod64(active ? item / kMxLanes : 0, d.blocks, t, n);
        const int64_t j0 = n * 32 + lane * kMxPerLane; /* first value of this lane */

        float v[kMxPerLane];
        if (!active) {
#pragma unroll
            for (int i = 0; i < kMxPerLane; ++i)
                v[i] = 0.0f;
        } else if (IN_HEAD) {
            const int64_t o = flat_offset(d, t, j0); /* j0 .. j0 + 3 share the head */
            if (VEC) {
                load4_contig<DT>(x, o, v);
            } else {
#pragma unroll
                for (int i = 0; i < kMxPerLane; ++i)
                    v[i] = load_value<DT>(x, o + i * d.xs2);
            }
        } else {
#pragma unroll
            for (int i = 0; i < kMxPerLane; ++i)
                v[i] = load_value<DT>(x, flat_offset(d, t, j0 + i));
        }
        uint32_t amax = 0;
#pragma unroll
        for (int i = 0; i < kMxPerLane; ++i) {
            const uint32_t a = mla_fb_bits(v[i]) & 0x7FFFFFFFu;
            amax = a > amax ? a : amax;
        }
        amax = team_max_u32(amax, kMxLanes); /* every lane of the wave takes part */
        if (!active)
            continue;

        const uint8_t scale = mla_fb_mxfp4_scale_byte(amax, d.production);
        const uint32_t mask = mla_fb_mxfp4_code_mask(amax);
        uint8_t b[kMxPerLane / 2];
#pragma unroll
        for (int i = 0; i < kMxPerLane / 2; ++i)
            b[i] = (uint8_t)(mla_fb_mxfp4_code(v[2 * i], scale, mask) |
                             (mla_fb_mxfp4_code(v[2 * i + 1], scale, mask) << 4));
        const int64_t c = t * d.cs0 + (j0 / 2) * d.cs1;
        if (VEC) {
            *reinterpret_cast<uint16_t *>(codes + c) = (uint16_t)(b[0] | (b[1] << 8));
        } else {
            codes[c] = b[0];
            codes[c + d.cs1] = b[1];
        }
        if (lane == 0)
            scales[t * d.ss0 + n * d.ss1] = scale;
    }
}

/* 1 when x's blocks are contiguous 4-aligned runs and the code rows are
 * contiguous 2-aligned bytes. */
bool mx_vec_ok(const mla_flatten_quant_args *a)
{
    const int64_t el = (int64_t)mla_dtype_size(a->x.dtype);
    const mla_tensor &x = a->x, &c = a->codes;
    return x.stride[2] == 1 && x.stride[0] % 4 == 0 && x.stride[1] % 4 == 0 &&
           reinterpret_cast<uintptr_t>(x.data) % (uintptr_t)(4 * el) == 0 && c.stride[1] == 1 &&
           c.stride[0] % 2 == 0 && reinterpret_cast<uintptr_t>(c.data) % 2 == 0;
}

template <int DT>
mla_status launch_mx(mla_context *ctx, const mla_flatten_quant_args *a, const flat_desc &d)
{
    const unsigned blocks = mla_hip_grid_blocks(ctx, d.T * d.blocks * kMxLanes, MLA_HIP_BLOCK);
    hipStream_t stream = mla_hip_state_of(ctx)->stream;
    const void *x = a->x.data;
    uint8_t *codes = static_cast<uint8_t *>(a->codes.data);
    uint8_t *scales = static_cast<uint8_t *>(a->scales.data);
    if (d.v % 32 != 0)
        flatten_mxfp4_kernel<DT, false, false><<<blocks, MLA_HIP_BLOCK, 0, stream>>>(x, codes,
                                                                                   scales, d);
    else if (mx_vec_ok(a))
        flatten_mxfp4_kernel<DT, true, true><<<blocks, MLA_HIP_BLOCK, 0, stream>>>(x, codes,
                                                                                 scales, d);
    else
        flatten_mxfp4_kernel<DT, true, false><<<blocks, MLA_HIP_BLOCK, 0, stream>>>(x, codes,
                                                                                  scales, d);
    return mla_hip_check_launch(ctx, "flatten_mxfp4_quant kernel launch");
}

/* --------------------------------------------------------------- fp8 */

/* AITER rule, group 128, 32 lanes x 4 values: lane l takes values l, l + 32,
 * l + 64, l + 96 of its group (a team's loads are contiguous runs). IN_HEAD:
 * v % 128 == 0. */
template <int DT, int FP8, bool IN_HEAD>
__global__ __launch_bounds__(MLA_HIP_BLOCK) void flatten_fp8_kernel(const void *x,
                                                                     uint8_t *codes,
                                                                     float *scales, flat_desc d)
{
    constexpr int fnuz = FP8 == MLA_DTYPE_FP8_E4M3FNUZ;
    constexpr int rule = MLA_FB_FP8_RULE_AITER;
    const int lane = (int)threadIdx.x & (kFp8Team - 1);
    const int64_t total = d.T * d.blocks * kFp8Team;
    for (int64_t t0 = block_first_item(); t0 < total; t0 += grid_items()) {
        const int64_t item = t0 + threadIdx.x;
        const bool active = item < total;
        int64_t t, g;
        divmod64(active ? item / kFp8Team : 0, d.blocks, t, g);
        const int64_t j0 = g * kFp8Group + lane;
        int64_t xo[kFp8PerLane];
        if (IN_HEAD) {
            const int64_t o = flat_offset(d, t, j0);
#pragma unroll
            for (int i = 0; i < kFp8PerLane; ++i)
                xo[i] = o + (int64_t)(i * kFp8Team) * d.xs2;
        } else {
#pragma unroll
            for (int i = 0; i < kFp8PerLane; ++i)
                xo[i] = flat_offset(d, t, j0 + i * kFp8Team);
        }

        float v[kFp8PerLane];
        uint32_t amax = 0;
#pragma unroll
        for (int i = 0; i < kFp8PerLane; ++i) {
            v[i] = active ? load_value<DT>(x, xo[i]) : 0.0f;
            const uint32_t a = mla_fb_bits(v[i]) & 0x7FFFFFFFu;
            amax = a > amax ? a : amax;
        }
        amax = team_max_u32(amax, kFp8Team);

        /* A NaN group's amax is its last NaN (by position in the flattened
         * row), |x|: the host reference keeps taking NaNs. The search
         * shuffles, so the whole wave enters it or none. */
        const bool nan_group = amax > 0x7F800000u;
        if (mla_wave_any(nan_group)) {
            long long last = -1;
#pragma unroll
            for (int i = 0; i < kFp8PerLane; ++i)
                if (nan_group && v[i] != v[i])
                    last = lane + i * kFp8Team;
            last = team_max_i64(last, kFp8Team);
            if (nan_group) {
                /* the value at position `last` of the group, reloaded */
                const int64_t o = IN_HEAD ? flat_offset(d, t, g * kFp8Group) + last * d.xs2
                                          : flat_offset(d, t, g * kFp8Group + last);
                amax = mla_fb_bits(load_value<DT>(x, o)) & 0x7FFFFFFFu;
            }
        }
        if (!active)
            continue;
        const float s = mla_fb_fp8_group_scale(mla_fb_float(amax), rule, fnuz);
        const float inv = mla_fb_div(1.0f, s); /* AITER: the reciprocal in fp32 first */
        if (lane == 0)
            scales[t * d.ss0 + g * d.ss1] = s;
#pragma unroll
        for (int i = 0; i < kFp8PerLane; ++i)
            codes[t * d.cs0 + (j0 + i * kFp8Team) * d.cs1] =
                mla_fb_fp8_group_code(v[i], s, inv, rule, fnuz);
    }
}

template <int DT, int FP8>
mla_status launch_fp8(mla_context *ctx, const mla_flatten_quant_args *a, const flat_desc &d)
{
    const unsigned blocks = mla_hip_grid_blocks(ctx, d.T * d.blocks * kFp8Team, MLA_HIP_BLOCK);
    hipStream_t stream = mla_hip_state_of(ctx)->stream;
    const void *x = a->x.data;
    uint8_t *codes = static_cast<uint8_t *>(a->codes.data);
    float *scales = static_cast<float *>(a->scales.data);
    if (d.v % kFp8Group == 0)
        flatten_fp8_kernel<DT, FP8, true><<<blocks, MLA_HIP_BLOCK, 0, stream>>>(x, codes, scales,
                                                                               d);
    else
        flatten_fp8_kernel<DT, FP8, false><<<blocks, MLA_HIP_BLOCK, 0, stream>>>(x, codes,
                                                                                scales, d);
    return mla_hip_check_launch(ctx, "flatten_fp8_quant kernel launch");
}

template <int DT>
mla_status dispatch_fp8(mla_context *ctx, const mla_flatten_quant_args *a, const flat_desc &d)
{
    if (a->codes.dtype == MLA_DTYPE_FP8_E4M3FNUZ)
        return launch_fp8<DT, MLA_DTYPE_FP8_E4M3FNUZ>(ctx, a, d);
    return launch_fp8<DT, MLA_DTYPE_FP8_E4M3FN>(ctx, a, d);
}

/* --------------------------------------------------------------- host */

mla_status check_memory(mla_context *ctx, const mla_flatten_quant_args *a)
{
    mla_status st = mla_hip_check_tensor_memory(ctx, &a->x, "x");
    if (st == MLA_OK)
        st = mla_hip_check_tensor_memory(ctx, &a->codes, "codes");
    if (st == MLA_OK)
        st = mla_hip_check_tensor_memory(ctx, &a->scales, "scales");
    return st;
}

flat_desc describe(const mla_flatten_quant_args *a, int64_t group)
{
    flat_desc d = {};
    d.T = a->x.shape[0];
    d.v = a->x.shape[2];
    d.blocks = a->x.shape[1] * a->x.shape[2] / group;
    d.xs0 = a->x.stride[0];
    d.xs1 = a->x.stride[1];
    d.xs2 = a->x.stride[2];
    d.cs0 = a->codes.stride[0];
    d.cs1 = a->codes.stride[1];
    d.ss0 = a->scales.stride[0];
    d.ss1 = a->scales.stride[1];
    d.production = a->rule == MLA_MXFP4_PRODUCTION;
    return d;
}

} // namespace

mla_status mla_hip_flatten_mxfp4_quant(mla_context *ctx, const mla_flatten_quant_args *a)
{
    const mla_hip_device_scope scope(mla_hip_state_of(ctx)->device);
    if (scope.error() != hipSuccess)
        return mla_hip_fail(ctx, scope.error(), "selecting the context's GPU");
    const mla_status st = check_memory(ctx, a);
    if (st != MLA_OK)
        return st;
    const flat_desc d = describe(a, 32);
    if (d.T == 0 || d.blocks == 0)
        return MLA_OK;
    switch (a->x.dtype) {
    case MLA_DTYPE_F32:
        return launch_mx<MLA_DTYPE_F32>(ctx, a, d);
    case MLA_DTYPE_F16:
        return launch_mx<MLA_DTYPE_F16>(ctx, a, d);
    case MLA_DTYPE_BF16:
        return launch_mx<MLA_DTYPE_BF16>(ctx, a, d);
    default:
        return mla_fail(ctx, MLA_ERR_UNSUPPORTED, "x.dtype",
                        "x.dtype %s: no HIP flatten MXFP4 kernel", mla_dtype_name(a->x.dtype));
    }
}

mla_status mla_hip_flatten_fp8_quant(mla_context *ctx, const mla_flatten_quant_args *a)
{
    const mla_hip_device_scope scope(mla_hip_state_of(ctx)->device);
    if (scope.error() != hipSuccess)
        return mla_hip_fail(ctx, scope.error(), "selecting the context's GPU");
    const mla_status st = check_memory(ctx, a);
    if (st != MLA_OK)
        return st;
    const flat_desc d = describe(a, kFp8Group);
    if (d.T == 0 || d.blocks == 0)
        return MLA_OK;
    switch (a->x.dtype) {
    case MLA_DTYPE_F32:
        return dispatch_fp8<MLA_DTYPE_F32>(ctx, a, d);
    case MLA_DTYPE_F16:
        return dispatch_fp8<MLA_DTYPE_F16>(ctx, a, d);
    case MLA_DTYPE_BF16:
        return dispatch_fp8<MLA_DTYPE_BF16>(ctx, a, d);
    default:
        return mla_fail(ctx, MLA_ERR_UNSUPPORTED, "x.dtype",
                        "x.dtype %s: no HIP flatten fp8 kernel", mla_dtype_name(a->x.dtype));
    }
}
