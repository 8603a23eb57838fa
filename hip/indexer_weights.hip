/* Head weights of the DSA indexer (MLA.md section 6), bits identical to the
 * reference (core/ref/indexer_weights.c):
 *
 *     w_out[t, h] = fl(fl(fl(w[t, h] * s_q[t, h]) * c_d) * c_h)
 *     c_d = fl(128^-0.5), c_h = fl(Hi^-0.5)
 *
 * each product one correctly rounded fp32 multiply (__fmul_rn on NVIDIA,
 * which no contraction can touch; a plain product on AMD, built without
 * contraction or flushing) with the NaN rule of core/format_bits.h, so a
 * GPU's canonical NaN does not change any bit. The constants are computed on
 * the host as the reference does (the double 1 / sqrt(n) rounded to fp32).
 * One thread per element; each reads its element before writing it, so
 * w_out may be w or s_q. */
#include <math.h>

#include "hip/indexer_util.h"

namespace {

constexpr int64_t kHeadDim = 128; /* the 128^-0.5 of MLA.md, fixed by the model */

struct hw_desc {
    int64_t T, Hi;
    int64_t ws0, ws1, ss0, ss1, os0, os1;
    float c_d, c_h;
};

MLA_DEV float mul_rn(float a, float b)
{
#if defined(__CUDA_ARCH__)
    return mla_fb_nan_rule(a, b, __fmul_rn(a, b));
#else
    return mla_fb_mul(a, b);
#endif
}

template <int DW>
__global__ __launch_bounds__(MLA_HIP_BLOCK) void head_weights_kernel(const void *w, const float *s,
                                                                      float *out, hw_desc d)
{
    const int64_t n = d.T * d.Hi;
    for (int64_t i = block_first_item() + threadIdx.x; i < n; i += grid_items()) {
        int64_t t, h;
        divmod64(i, d.Hi, t, h);
        const float wv = load_value<DW>(w, t * d.ws0 + h * d.ws1);
        const float sv = s[t * d.ss0 + h * d.ss1];
        out[t * d.os0 + h * d.os1] = mul_rn(mul_rn(mul_rn(wv, sv), d.c_d), d.c_h);
    }
}

template <int DW> mla_status launch(mla_context *ctx, const mla_head_weights_args *a, const hw_desc &d)
{
    const unsigned blocks = mla_hip_grid_blocks(ctx, d.T * d.Hi, MLA_HIP_BLOCK);
    head_weights_kernel<DW><<<blocks, MLA_HIP_BLOCK, 0, mla_hip_state_of(ctx)->stream>>>(
        a->w.data, static_cast<const float *>(a->s_q.data), static_cast<float *>(a->w_out.data), d);
    return mla_hip_check_launch(ctx, "indexer head weights kernel launch");
}

float inv_sqrt_f32(int64_t n) { return (float)(1.0 / sqrt((double)n)); }

} // namespace

mla_status mla_hip_indexer_head_weights(mla_context *ctx, const mla_head_weights_args *a)
{
    const mla_hip_device_scope scope(mla_hip_state_of(ctx)->device);
    if (scope.error() != hipSuccess)
        return mla_hip_fail(ctx, scope.error(), "selecting the context's GPU");
    const mla_tensor *ts[3] = {&a->w, &a->s_q, &a->w_out};
    const char *names[3] = {"w", "s_q", "w_out"};
    for (int i = 0; i < 3; ++i) {
        mla_status st = mla_hip_check_tensor_memory(ctx, ts[i], names[i]);
        if (st != MLA_OK)
            return st;
    }
    hw_desc d = {};
    d.T = a->w.shape[0];
    d.Hi = a->w.shape[1];
    d.ws0 = a->w.stride[0];
    d.ws1 = a->w.stride[1];
    d.ss0 = a->s_q.stride[0];
    d.ss1 = a->s_q.stride[1];
    d.os0 = a->w_out.stride[0];
    d.os1 = a->w_out.stride[1];
    d.c_d = inv_sqrt_f32(kHeadDim);
    d.c_h = inv_sqrt_f32(d.Hi);
    if (d.T == 0 || d.Hi == 0)
        return MLA_OK;
    if (a->w.dtype == MLA_DTYPE_BF16)
        return launch<MLA_DTYPE_BF16>(ctx, a, d);
    return launch<MLA_DTYPE_F32>(ctx, a, d);
}
