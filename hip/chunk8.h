/* Chunks of 8 consecutive values along a row, the unit of work of the
 * prepare-path element-wise kernels (RMSNorm, RoPE, the latent cache).
 *
 * Eight values are 16 bytes of a 16-bit type (one 128-bit access), 32 of
 * f32 (two) and 8 of fp8 (one 64-bit access). Whether a chunk may take the
 * wide access is decided here, per chunk and at run time: the row must be
 * contiguous (step 1), the chunk complete (n == 8) and the address aligned.
 * That is uniform across a wave in every common layout and needs no host-side
 * case analysis; odd strides, offsets and row lengths fall back to one access
 * per value with the same results.
 *
 * Kernels take their main dtypes as template parameters (a run-time switch
 * inlined at every access multiplies code and registers); with_float /
 * with_dtype turn the run-time dtype into that parameter on the host. */
#ifndef MLA_HIP_CHUNK8_H
#define MLA_HIP_CHUNK8_H

#include <type_traits>

#include "hip/device_util.h"

constexpr int kChunk = 8;

/* How load8 / store8 / store_bytes reach memory. kAuto decides per chunk
 * at run time; kernels whose argument footprint is tight instead take the
 * decision on the host, for the whole launch (wide_ok), and are
 * instantiated for kWide (every chunk full, contiguous and aligned: one
 * wide access each, nothing else compiled) or kNarrow (one access per
 * value). The run-time tests of kAuto keep a few registers busy. */
enum access_mode : int { kAuto = 0, kWide = 1, kNarrow = 2 };

MLA_DEV bool is_aligned(const void *p, uintptr_t bytes)
{
    return (reinterpret_cast<uintptr_t>(p) & (bytes - 1)) == 0;
}

MLA_DEV int chunk_len(int64_t remaining)
{
    return remaining >= kChunk ? kChunk : (remaining > 0 ? (int)remaining : 0);
}

/* chunk_len in a MODE launch. A kWide launch has whole chunks (the host
 * checked), so its counts are constants, and must be: nvcc 13.0's ptxas
 * compiled a clamp of this kind compared with its upper bound
 * (`clamp(left, 0, 4) == 4`, rope_piece's full-piece test) into a VIMNMX
 * whose predicate held only for left <= 4, so every piece whose left was 8
 * skipped its loads and stored zeros (the fused RoPE + cache write with f32
 * inputs on the H200). The counts a kWide access tests are never computed
 * by a clamp. */
template <int MODE> MLA_DEV int mode_chunk_len(int64_t remaining)
{
    if constexpr (MODE == kWide)
        return remaining > 0 ? kChunk : 0;
    else
        return chunk_len(remaining);
}

/* ------------------------------------------------------------ bytes */

/* nbytes (<= 16) bytes packed little-endian in w, stored at p: one 16- or
 * 8-byte store when p allows it, else byte by byte. */
template <int MODE = kAuto> MLA_DEV void store_bytes(uint8_t *p, const uint32_t w[4], int nbytes)
{
    if constexpr (MODE == kWide) { /* the host checked: full runs, aligned */
        if (nbytes == 16) {
            mla_u32x4 q;
#pragma unroll
            for (int j = 0; j < 4; ++j)
                q.v[j] = w[j];
            *reinterpret_cast<mla_u32x4 *>(p) = q;
        } else if (nbytes == 8) {
            *reinterpret_cast<uint64_t *>(p) = (uint64_t)w[0] | ((uint64_t)w[1] << 32);
        } else if (nbytes == 4) {
            *reinterpret_cast<uint32_t *>(p) = w[0];
        }
        return;
    }
    if (MODE == kAuto && nbytes == 16 && is_aligned(p, 16)) {
        mla_u32x4 q;
#pragma unroll
        for (int j = 0; j < 4; ++j)
            q.v[j] = w[j];
        *reinterpret_cast<mla_u32x4 *>(p) = q;
    } else if (MODE == kAuto && nbytes == 8 && is_aligned(p, 8)) {
        *reinterpret_cast<uint64_t *>(p) = (uint64_t)w[0] | ((uint64_t)w[1] << 32);
    } else if (MODE == kAuto && nbytes == 4 && is_aligned(p, 4)) {
        *reinterpret_cast<uint32_t *>(p) = w[0];
    } else {
#pragma unroll
        for (int j = 0; j < 16; ++j) /* constant word indices: no stack array */
            if (j < nbytes)
                p[j] = (uint8_t)(w[j / 4] >> (8 * (j % 4)));
    }
}

/* nbytes (16, 8 or 4) bytes at p, aligned to nbytes (the host checked it:
 * a kWide launch), into w (the rest 0): one access, no run-time test. */
MLA_DEV void load_bytes_wide(const uint8_t *p, uint32_t w[4], int nbytes)
{
    if (nbytes == 16) {
        const mla_u32x4 q = *reinterpret_cast<const mla_u32x4 *>(p);
#pragma unroll
        for (int j = 0; j < 4; ++j)
            w[j] = q.v[j];
        return;
    }
    const uint64_t q = nbytes == 8 ? *reinterpret_cast<const uint64_t *>(p)
                                   : (uint64_t)*reinterpret_cast<const uint32_t *>(p);
    w[0] = (uint32_t)q;
    w[1] = (uint32_t)(q >> 32);
    w[2] = w[3] = 0;
}

/* The load counterpart: nbytes (<= 16) bytes at p into w (the rest 0). */
MLA_DEV void load_bytes(const uint8_t *p, uint32_t w[4], int nbytes)
{
    if (nbytes == 16 && is_aligned(p, 16)) {
        const mla_u32x4 q = *reinterpret_cast<const mla_u32x4 *>(p);
#pragma unroll
        for (int j = 0; j < 4; ++j)
            w[j] = q.v[j];
        return;
    }
#pragma unroll
    for (int j = 0; j < 4; ++j)
        w[j] = 0;
    if (nbytes == 8 && is_aligned(p, 8)) {
        const uint64_t q = *reinterpret_cast<const uint64_t *>(p);
        w[0] = (uint32_t)q;
        w[1] = (uint32_t)(q >> 32);
    } else {
#pragma unroll
        for (int j = 0; j < 16; ++j)
            if (j < nbytes)
                w[j / 4] |= (uint32_t)p[j] << (8 * (j % 4));
    }
}

/* ------------------------------------------------------------ values */

/* Value j of a packed chunk of dtype DT (16-bit: two per word; fp8: four). */
template <int DT> MLA_DEV float unpack_value(const uint32_t *w, int j)
{
    if constexpr (DT == MLA_DTYPE_F32)
        return mla_fb_float(w[j]);
    else if constexpr (DT == MLA_DTYPE_F16)
        return mla_fb_f16_to_f32((uint16_t)(w[j / 2] >> (16 * (j % 2))));
    else if constexpr (DT == MLA_DTYPE_BF16)
        return mla_fb_bf16_to_f32((uint16_t)(w[j / 2] >> (16 * (j % 2))));
    else if constexpr (DT == MLA_DTYPE_FP8_E4M3FN)
        return mla_fb_e4m3fn_to_f32((uint8_t)(w[j / 4] >> (8 * (j % 4))));
    else
        return mla_fb_e4m3fnuz_to_f32((uint8_t)(w[j / 4] >> (8 * (j % 4))));
}

/* v rounded once to DT (F32, F16, BF16, or an fp8, saturating), as bits. */
template <int DT> MLA_DEV uint32_t encode_value(float v)
{
    if constexpr (DT == MLA_DTYPE_F32)
        return mla_fb_bits(v);
    else if constexpr (DT == MLA_DTYPE_F16)
        return mla_fb_f32_to_f16(v);
    else if constexpr (DT == MLA_DTYPE_BF16)
        return mla_fb_f32_to_bf16(v);
    else if constexpr (DT == MLA_DTYPE_FP8_E4M3FN)
        return mla_fb_f32_to_e4m3fn(v, 1);
    else
        return mla_fb_f32_to_e4m3fnuz(v, 1);
}

/* A variable, not a function: nvcc lets device code read constexpr
 * variables, not call constexpr host functions. */
template <int DT>
constexpr int dtype_bytes = DT == MLA_DTYPE_F32 ? 4 : (DT == MLA_DTYPE_F16 || DT == MLA_DTYPE_BF16) ? 2 : 1;

/* One scalar element of DT at p, as bits. */
template <int DT> MLA_DEV uint32_t load_bits(const uint8_t *p)
{
    constexpr int eb = dtype_bytes<DT>;
    if constexpr (eb == 4)
        return *reinterpret_cast<const uint32_t *>(p);
    else if constexpr (eb == 2)
        return *reinterpret_cast<const uint16_t *>(p);
    else
        return *p;
}

template <int DT, int MODE>
MLA_DEV void load8_narrow(const uint8_t *p, int64_t step, int n, float v[kChunk]);

/* n <= 8 values of dtype DT at element off, off + step, ... of base, as
 * fp32 (exact); values past n are 0. */
template <int DT, int MODE = kAuto>
MLA_DEV void load8(const void *base, int64_t off, int64_t step, int n, float v[kChunk])
{
    constexpr int eb = dtype_bytes<DT>;
    const uint8_t *p = static_cast<const uint8_t *>(base) + off * eb;
    if constexpr (MODE == kWide) { /* n is 8, 4 (f32: a cos/sin half) or 0 */
        uint32_t w[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        if (n == kChunk) {
            load_bytes_wide(p, w, 8 * eb < 16 ? 8 * eb : 16);
            if constexpr (eb == 4)
                load_bytes_wide(p + 16, w + 4, 16);
        } else if (eb == 4 && n == kChunk / 2) {
            load_bytes_wide(p, w, 16);
        }
#pragma unroll
        for (int j = 0; j < kChunk; ++j)
            v[j] = unpack_value<DT>(w, j);
    } else {
        load8_narrow<DT, MODE>(p, step, n, v);
    }
}

template <int DT, int MODE>
MLA_DEV void load8_narrow(const uint8_t *p, int64_t step, int n, float v[kChunk])
{
    constexpr int eb = dtype_bytes<DT>;
    uint32_t w[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    if (MODE == kAuto && step == 1 && n == kChunk && is_aligned(p, eb == 4 ? 16 : 8 * eb)) {
        load_bytes(p, w, 8 * eb < 16 ? 8 * eb : 16);
        if constexpr (eb == 4)
            load_bytes(p + 16, w + 4, 16);
#pragma unroll
        for (int j = 0; j < kChunk; ++j)
            v[j] = unpack_value<DT>(w, j);
        return;
    }
    if (MODE == kAuto && eb == 4 && step == 1 && n == kChunk / 2 && is_aligned(p, 16)) {
        load_bytes(p, w, 16);
#pragma unroll
        for (int j = 0; j < kChunk; ++j)
            v[j] = j < kChunk / 2 ? unpack_value<DT>(w, j) : 0.0f;
        return;
    }
    /* One value at a time, shifted in at the top: a rolled loop (an unrolled
     * one would keep all 8 offsets j * step live in scalar registers) with
     * constant register indices. */
#pragma unroll 1
    for (int j = 0; j < kChunk; ++j, p += step * eb) {
        w[0] = j < n ? load_bits<DT>(p) : 0u;
#pragma unroll
        for (int k = 0; k + 1 < kChunk; ++k)
            v[k] = v[k + 1];
        v[kChunk - 1] = unpack_value<DT>(w, 0);
    }
}

/* The store counterpart: v[0..n) rounded once to DT (fp8 saturating) and
 * stored at element off, off + step, ... of base. */
template <int DT, int MODE = kAuto>
MLA_DEV void store8(void *base, int64_t off, int64_t step, int n, const float v[kChunk])
{
    constexpr int eb = dtype_bytes<DT>;
    uint8_t *p = static_cast<uint8_t *>(base) + off * eb;
    if (MODE == kWide || (MODE == kAuto && step == 1 && n == kChunk &&
                          is_aligned(p, eb == 4 ? 16 : 8 * eb))) {
        if (MODE == kWide && n != kChunk) /* kWide: n is 8 or 0 */
            return;
        uint32_t w[8] = {0, 0, 0, 0, 0, 0, 0, 0};
#pragma unroll
        for (int j = 0; j < kChunk; ++j)
            w[j * eb / 4] |= encode_value<DT>(v[j]) << (8 * ((j * eb) % 4));
        store_bytes<MODE>(p, w, 8 * eb < 16 ? 8 * eb : 16);
        if constexpr (eb == 4)
            store_bytes<MODE>(p + 16, w + 4, 16);
        return;
    }
    if constexpr (MODE != kWide) { /* as in load8: a rolled loop over a shift register */
        float t[kChunk];
#pragma unroll
        for (int k = 0; k < kChunk; ++k)
            t[k] = v[k];
#pragma unroll 1
        for (int j = 0; j < n; ++j, p += step * eb) {
            const uint32_t b = encode_value<DT>(t[0]);
            if constexpr (eb == 4)
                *reinterpret_cast<uint32_t *>(p) = b;
            else if constexpr (eb == 2)
                *reinterpret_cast<uint16_t *>(p) = (uint16_t)b;
            else
                *p = (uint8_t)b;
#pragma unroll
            for (int k = 0; k + 1 < kChunk; ++k)
                t[k] = t[k + 1];
        }
    }
}

/* The run-time dtype form, for a side tensor (a norm weight) whose dtype
 * would multiply the kernels' instantiations; float dtypes only. */
template <int MODE = kAuto>
MLA_DEV void load8_any(int dt, const void *base, int64_t off, int64_t step, int n,
                       float v[kChunk])
{
    if (dt == MLA_DTYPE_F32)
        load8<MLA_DTYPE_F32, MODE>(base, off, step, n, v);
    else if (dt == MLA_DTYPE_BF16)
        load8<MLA_DTYPE_BF16, MODE>(base, off, step, n, v);
    else
        load8<MLA_DTYPE_F16, MODE>(base, off, step, n, v);
}

/* ------------------------------------------------------- item windows */

/* A launch's share of an item space of rows x per_row items (row-major):
 * count items from item row0 * per_row + c0, c0 < per_row. The host cuts
 * the space into windows of at most kWindow items, so that a thread's item
 * and its division by per_row are 32-bit while rows stay 64-bit (a 64-bit
 * division by a run-time divisor costs dozens of registers). */
constexpr uint32_t kWindow = 1u << 30;

struct item_window {
    int64_t row0;
    uint32_t c0, per_row, count;
};

MLA_DEV void window_item(const item_window &w, uint32_t i, int64_t &row, uint32_t &c)
{
    const uint32_t k = w.c0 + i;
    row = w.row0 + k / w.per_row;
    c = k % w.per_row;
}

/* Sizes the kernels hold in 32 bits (row lengths, block sizes, items per
 * row): refused above 2^31 - 1, far beyond any model's. */
static inline mla_status check_dim32(mla_context *ctx, int64_t v, const char *name)
{
    if (v <= INT32_MAX)
        return MLA_OK;
    return mla_fail(ctx, MLA_ERR_UNSUPPORTED, name,
                    "%s: %lld is more than the hip kernels take (2^31 - 1)", name, (long long)v);
}

/* Calls launch(window) for each window of rows x per_row items, in order. */
template <typename F>
static inline mla_status for_windows(mla_context *ctx, int64_t rows, int64_t per_row, F &&launch)
{
    const mla_status st = check_dim32(ctx, per_row, "items per row");
    if (st != MLA_OK)
        return st;
    const int64_t items = rows * per_row;
    for (int64_t first = 0; first < items; first += kWindow) {
        const int64_t n = items - first < (int64_t)kWindow ? items - first : (int64_t)kWindow;
        const item_window w = {first / per_row, (uint32_t)(first % per_row), (uint32_t)per_row,
                               (uint32_t)n};
        const mla_status err = launch(w);
        if (err != MLA_OK)
            return err;
    }
    return MLA_OK;
}

/* The grid-stride loop of a window: blocks own runs of MLA_HIP_BLOCK items,
 * and the loop bound is tested per block (whole waves iterate together, so
 * their shuffles see every lane). */
MLA_DEV uint32_t window_first() { return blockIdx.x * blockDim.x; }
MLA_DEV uint32_t window_stride() { return gridDim.x * blockDim.x; }

/* ------------------------------------------------- host: access mode */

/* Every 8-value chunk of t whose first index along dim `inner` is a
 * multiple of 8 is contiguous and aligned for the wide access: unit inner
 * stride, base and other strides aligned to the chunk's bytes (16 at most). */
static inline bool wide_ok(const mla_tensor &t, int inner)
{
    const int64_t eb = (int64_t)mla_dtype_size(t.dtype), align = 8 * eb < 16 ? 8 * eb : 16;
    if (reinterpret_cast<uintptr_t>(t.data) % (uintptr_t)align)
        return false;
    for (int32_t d = 0; d < t.ndim; ++d) {
        if (t.shape[d] <= 1)
            continue;
        if (d == inner ? t.stride[d] != 1 : (t.stride[d] * eb) % align != 0)
            return false;
    }
    return true;
}

/* f(integral_constant<int, kWide or kNarrow>). */
template <typename F> static inline mla_status with_access(bool wide, F &&f)
{
    if (wide)
        return f(std::integral_constant<int, kWide>{});
    return f(std::integral_constant<int, kNarrow>{});
}

/* ---------------------------------------------------- host dispatch */

template <int DT> using dtype_tag = std::integral_constant<int, DT>;

/* f(dtype_tag<dt>{}) for a float dtype dt (F32, BF16, F16). */
template <typename F> static inline mla_status with_float(int dt, F &&f)
{
    if (dt == MLA_DTYPE_F32)
        return f(dtype_tag<MLA_DTYPE_F32>{});
    if (dt == MLA_DTYPE_BF16)
        return f(dtype_tag<MLA_DTYPE_BF16>{});
    return f(dtype_tag<MLA_DTYPE_F16>{});
}

/* The same for the element types of the cache and of fp8 outputs: BF16,
 * FP8_E4M3FN, FP8_E4M3FNUZ. */
template <typename F> static inline mla_status with_cache_dtype(int dt, F &&f)
{
    if (dt == MLA_DTYPE_BF16)
        return f(dtype_tag<MLA_DTYPE_BF16>{});
    if (dt == MLA_DTYPE_FP8_E4M3FN)
        return f(dtype_tag<MLA_DTYPE_FP8_E4M3FN>{});
    return f(dtype_tag<MLA_DTYPE_FP8_E4M3FNUZ>{});
}

/* Element i of an index tensor (I32 or I64) as int64. */
MLA_DEV int64_t load_index(const void *base, int is64, int64_t i)
{
    return is64 ? static_cast<const int64_t *>(base)[i] : static_cast<const int32_t *>(base)[i];
}

/* ------------------------------------------------------------ reductions */

/* Sum over the whole wave; every lane gets the same value (a + b == b + a
 * exactly, so the butterfly's partners agree at every step). */
MLA_DEV float wave_sum(float v)
{
    for (int o = MLA_WAVE_SIZE / 2; o > 0; o /= 2)
        v += mla_shfl_xor(v, o);
    return v;
}

#endif
