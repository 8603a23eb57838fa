/* Device-side pieces shared by the format kernels: element access by dtype
 * (through core/format_bits.h, the bit logic the CPU backend uses too, NaN
 * rule of fp32 products included), lane-team reductions, vector access and
 * index arithmetic. */
#ifndef MLA_HIP_DEVICE_UTIL_H
#define MLA_HIP_DEVICE_UTIL_H

#include <stdint.h>

#include "hip/hip_internal.h" /* first: the runtime headers select MLA_HD's device form */

#include "core/format_bits.h"

#define MLA_DEV static __device__ __forceinline__

/* Threads per block of the format kernels: whole waves on every target. */
#define MLA_HIP_BLOCK 256
static_assert(MLA_HIP_BLOCK % MLA_WAVE_SIZE_MAX == 0, "blocks hold whole waves");

/* ------------------------------------------------------- element access */

/* Element off of a tensor of dtype DT as fp32 (exact for every dtype here).
 * F32 moves as bits, so NaN payloads survive as they do on the host. */
template <int DT> MLA_DEV float load_value(const void *base, int64_t off)
{
    if constexpr (DT == MLA_DTYPE_F32)
        return static_cast<const float *>(base)[off];
    else if constexpr (DT == MLA_DTYPE_F16)
        return mla_fb_f16_to_f32(static_cast<const uint16_t *>(base)[off]);
    else if constexpr (DT == MLA_DTYPE_BF16)
        return mla_fb_bf16_to_f32(static_cast<const uint16_t *>(base)[off]);
    else if constexpr (DT == MLA_DTYPE_FP8_E4M3FN)
        return mla_fb_e4m3fn_to_f32(static_cast<const uint8_t *>(base)[off]);
    else if constexpr (DT == MLA_DTYPE_FP8_E4M3FNUZ)
        return mla_fb_e4m3fnuz_to_f32(static_cast<const uint8_t *>(base)[off]);
    else {
        static_assert(DT == MLA_DTYPE_E8M0, "no scalar load for this dtype");
        return mla_fb_e8m0_to_f32(static_cast<const uint8_t *>(base)[off]);
    }
}

/* v rounded once to dtype DT and stored at element off; saturate applies to
 * fp8 (f16/bf16 overflow to inf). */
template <int DT> MLA_DEV void store_value(void *base, int64_t off, float v, int saturate)
{
    if constexpr (DT == MLA_DTYPE_F32)
        static_cast<float *>(base)[off] = v;
    else if constexpr (DT == MLA_DTYPE_F16)
        static_cast<uint16_t *>(base)[off] = mla_fb_f32_to_f16(v);
    else if constexpr (DT == MLA_DTYPE_BF16)
        static_cast<uint16_t *>(base)[off] = mla_fb_f32_to_bf16(v);
    else if constexpr (DT == MLA_DTYPE_FP8_E4M3FN)
        static_cast<uint8_t *>(base)[off] = mla_fb_f32_to_e4m3fn(v, saturate);
    else {
        static_assert(DT == MLA_DTYPE_FP8_E4M3FNUZ, "no scalar store for this dtype");
        static_cast<uint8_t *>(base)[off] = mla_fb_f32_to_e4m3fnuz(v, saturate);
    }
}

/* Programmatic dependent launch (sm_90 and later; no-ops elsewhere): a
 * kernel lets the next one, launched as its programmatic dependent
 * (mla_cuda_launch_gated), be placed on the device while it runs; the
 * dependent waits for it to end, its stores visible, before it reads what
 * it wrote. */
MLA_DEV void mla_let_dependents()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && !defined(MLA_HIP_EMU_HIP_COMPAT_H)
    asm volatile("griddepcontrol.launch_dependents;");
#endif
}

MLA_DEV void mla_wait_prior()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && !defined(MLA_HIP_EMU_HIP_COMPAT_H)
    asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

/* Closed when the index check with the gate's ticket found a bad entry: the
 * gated kernel then writes nothing (every thread of a block sees the same
 * word, written by a kernel that completed before this one started). */
MLA_DEV bool mla_gate_closed(const mla_gate &g)
{
    if (g.ticket == 0)
        return false;
    mla_wait_prior(); /* a programmatic dependent of the check may run before it ends */
    return *static_cast<const volatile uint32_t *>(g.word) == g.ticket;
}

/* --------------------------------------------------- team reductions */

/* Reductions over a team of `width` consecutive lanes (a power of two that
 * divides the wave). Every lane of the wave must call them with the same
 * width: the shuffles are wave-wide. */
MLA_DEV uint32_t team_max_u32(uint32_t v, int width)
{
    for (int o = width / 2; o > 0; o /= 2) {
        uint32_t w = mla_shfl_xor(v, o);
        v = w > v ? w : v;
    }
    return v;
}

MLA_DEV long long team_max_i64(long long v, int width)
{
    for (int o = width / 2; o > 0; o /= 2) {
        long long w = mla_shfl_xor(v, o);
        v = w > v ? w : v;
    }
    return v;
}

/* ------------------------------------------------------- vector access */

/* 4 consecutive values at element off of a contiguous row whose address is
 * aligned to 4 elements: one 16-byte (f32) or 8-byte (f16/bf16) load. */
struct alignas(16) mla_u32x4 {
    uint32_t v[4];
};
struct alignas(8) mla_u16x4 {
    uint16_t v[4];
};
struct alignas(8) mla_f32x2 {
    float v[2];
};

template <int DT> MLA_DEV void load4_contig(const void *base, int64_t off, float out[4])
{
    if constexpr (DT == MLA_DTYPE_F32) {
        const mla_u32x4 q = *reinterpret_cast<const mla_u32x4 *>(static_cast<const float *>(base) + off);
#pragma unroll
        for (int j = 0; j < 4; ++j)
            out[j] = mla_fb_float(q.v[j]);
    } else {
        static_assert(DT == MLA_DTYPE_F16 || DT == MLA_DTYPE_BF16, "16-bit floats only");
        const mla_u16x4 q =
            *reinterpret_cast<const mla_u16x4 *>(static_cast<const uint16_t *>(base) + off);
#pragma unroll
        for (int j = 0; j < 4; ++j)
            out[j] = DT == MLA_DTYPE_F16 ? mla_fb_f16_to_f32(q.v[j]) : mla_fb_bf16_to_f32(q.v[j]);
    }
}

/* The store counterpart: 4 values rounded to DT, one aligned store. */
template <int DT> MLA_DEV void store4_contig(void *base, int64_t off, const float in[4])
{
    if constexpr (DT == MLA_DTYPE_F32) {
        mla_u32x4 q;
#pragma unroll
        for (int j = 0; j < 4; ++j)
            q.v[j] = mla_fb_bits(in[j]);
        *reinterpret_cast<mla_u32x4 *>(static_cast<float *>(base) + off) = q;
    } else {
        static_assert(DT == MLA_DTYPE_F16 || DT == MLA_DTYPE_BF16, "16-bit floats only");
        mla_u16x4 q;
#pragma unroll
        for (int j = 0; j < 4; ++j)
            q.v[j] = DT == MLA_DTYPE_F16 ? mla_fb_f32_to_f16(in[j]) : mla_fb_f32_to_bf16(in[j]);
        *reinterpret_cast<mla_u16x4 *>(static_cast<uint16_t *>(base) + off) = q;
    }
}

/* 1 when the 4-value chunks of a [rows, cols] tensor (strides s0, s1) are
 * contiguous and aligned for load4_contig/store4_contig at every row. */
static inline bool chunks_aligned(const mla_tensor &t, size_t elem_bytes)
{
    return t.stride[1] == 1 && t.stride[0] % 4 == 0 &&
           reinterpret_cast<uintptr_t>(t.data) % (4 * elem_bytes) == 0;
}

/* ------------------------------------------------------------- indices */

/* q = n / d, r = n % d for n, d >= 0; 32-bit division when both fit, which
 * is the common case and several times cheaper on both vendors. */
MLA_DEV void divmod64(int64_t n, int64_t d, int64_t &q, int64_t &r)
{
    if (((uint64_t)n | (uint64_t)d) <= 0xFFFFFFFFull) {
        uint32_t q32 = (uint32_t)n / (uint32_t)d;
        q = q32;
        r = (int64_t)((uint32_t)n - q32 * (uint32_t)d);
    } else {
        q = n / d;
        r = n - q * d;
    }
}

/* The first work item of this block in a grid-stride loop, and the stride.
 * The loop bound is tested per block, not per thread, so that every lane of
 * a wave runs the same iterations and its shuffles see the whole wave. */
MLA_DEV int64_t block_first_item() { return (int64_t)blockIdx.x * blockDim.x; }
MLA_DEV int64_t grid_items() { return (int64_t)gridDim.x * blockDim.x; }

#endif
