/* Device pieces of the DSA indexer kernels (hip/layernorm.hip ...
 * hip/topk.hip): indexed shuffles, launches gated by the device index
 * check, block scans, and the two matrix instructions the paged logits use,
 * each with a CPU emulation for hip/emu (which runs these sources with one
 * host thread per lane):
 *
 *   NVIDIA  mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 (sm_80+)
 *   gfx9    v_mfma_f32_32x32x8_f16 (gfx908, gfx90a, gfx942, gfx950)
 *
 * It includes the pieces the indexer shares with other kernels: the device
 * pass, barriers and shared memory (hip/device_sync.h), fp8 -> f16
 * (hip/fp8_f16.h), asynchronous copies (hip/nv_copy.h) and wgmma
 * (hip/wgmma.h). */
#ifndef MLA_HIP_INDEXER_UTIL_H
#define MLA_HIP_INDEXER_UTIL_H

#include "hip/device_sync.h"
#include "hip/fp8_f16.h"
#include "hip/nv_copy.h"
#include "hip/wgmma.h"

/* v of lane src (every lane of the wave calls it). */
MLA_DEV uint32_t shfl_u32(uint32_t v, int src)
{
#if MLA_IDX_EMU
    return (uint32_t)mla_emu_exchange(v, src % MLA_EMU_WAVE);
#elif defined(__CUDACC__)
    return __shfl_sync(0xffffffffu, v, src);
#else
    return (uint32_t)__shfl((int)v, src);
#endif
}

#if defined(__CUDACC__) && !MLA_IDX_EMU
/* A kernel queued behind the device index check (paged_check.hip), gated by
 * its ticket: with pdl, a programmatic dependent launch, so its blocks are
 * placed and started while the check runs (the check lets them, and
 * mla_gate_closed waits for its end) instead of after it (a launch gap per
 * call). pdl: mla_hip_state::pdl and a ticket (or the search's top-k: its
 * logits before it). */
template <typename... P, typename... A>
static inline cudaError_t mla_cuda_launch_gated(void (*k)(P...), unsigned grid, unsigned block,
                                                size_t smem, cudaStream_t stream, bool pdl,
                                                A... args)
{
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = 1;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(grid);
    cfg.blockDim = dim3(block);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = stream;
    cfg.attrs = at;
    cfg.numAttrs = pdl ? 1 : 0;
    return cudaLaunchKernelEx(&cfg, k, args...);
}
#endif

/* -------------------------------------------------------- block scans */

/* Inclusive scan over the block of one value per thread (blockDim.x <= the
 * scratch's size), from the top (suffix: sum over threads >= this one) or
 * from the bottom. scratch: blockDim.x words of shared memory; the block
 * must call it together. */
template <bool SUFFIX> MLA_DEV uint32_t block_scan_u32(uint32_t v, uint32_t *scratch)
{
    const int n = (int)blockDim.x, t = (int)threadIdx.x;
    scratch[t] = v;
    idx_sync();
    for (int off = 1; off < n; off *= 2) {
        const int o = SUFFIX ? t + off : t - off;
        const uint32_t x = (SUFFIX ? o < n : o >= 0) ? scratch[o] : 0u;
        idx_sync();
        scratch[t] += x;
        idx_sync();
    }
    const uint32_t r = scratch[t];
    idx_sync();
    return r;
}

/* ----------------------------------------------- matrix instructions */

#if MLA_IDX_EMU
/* The f16 value of half `which` of a packed pair. */
static inline double emu_half(uint32_t pair, int which)
{
    return (double)mla_fb_f16_to_f32((uint16_t)(which ? pair >> 16 : pair & 0xFFFFu));
}
#endif

#if MLA_IDX_MMA_NV
/* d = a . b + d for one warp, PTX's m16n8k16 fragments (g = lane / 4, t =
 * lane % 4, pairs hold two f16, the lower k in the low half):
 *   a[0] = A[g][2t, 2t+1]   a[1] = A[g+8][2t, 2t+1]
 *   a[2] = A[g][2t+8, +9]   a[3] = A[g+8][2t+8, +9]
 *   b[0] = B[2t, 2t+1][g]   b[1] = B[2t+8, +9][g]
 *   d[0], d[1] = D[g][2t, 2t+1]   d[2], d[3] = D[g+8][2t, 2t+1] */
MLA_DEV void mma_16816(float d[4], const uint32_t a[4], const uint32_t b[2])
{
#if MLA_IDX_EMU
    unsigned char(*s)[64] = mla_emu_my_wave->scratch;
    const int lane = (int)(threadIdx.x % MLA_EMU_WAVE);
    uint32_t *mine = reinterpret_cast<uint32_t *>(s[lane]);
    for (int i = 0; i < 4; ++i)
        mine[i] = a[i];
    mine[4] = b[0];
    mine[5] = b[1];
    mla_emu_my_wave->barrier();
    /* A[r][k]: lane (r % 8) * 4 + (k % 8) / 2, register (r / 8) + 2 (k / 8), half k % 2 */
    const int g = lane / 4, t = lane % 4;
    for (int q = 0; q < 4; ++q) {
        const int r = g + 8 * (q / 2), n = 2 * t + q % 2;
        double acc = d[q];
        for (int k = 0; k < 16; ++k) {
            const uint32_t *la = reinterpret_cast<const uint32_t *>(s[(r % 8) * 4 + (k % 8) / 2]);
            const uint32_t *lb = reinterpret_cast<const uint32_t *>(s[n * 4 + (k % 8) / 2]);
            acc += emu_half(la[(r / 8) + 2 * (k / 8)], k % 2) * emu_half(lb[4 + k / 8], k % 2);
        }
        d[q] = (float)acc;
    }
    mla_emu_my_wave->barrier();
#else
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#endif
}
#endif

#if MLA_IDX_MMA_AMD
/* d = A . B + d for one wave64, v_mfma_f32_32x32x8_f16: lane l, i = l % 32,
 * h = l / 32; a (2 pairs) = A[i][4h .. 4h+3], b = B[4h .. 4h+3][i] (k
 * ascending from the low half of the first pair); d[v] = D[8 (v / 4) + 4 h
 * + v % 4][i]. */
MLA_DEV void mfma_32x32x8(float d[16], const uint32_t a[2], const uint32_t b[2])
{
#if MLA_IDX_EMU
    unsigned char(*s)[64] = mla_emu_my_wave->scratch;
    const int lane = (int)(threadIdx.x % MLA_EMU_WAVE);
    uint32_t *mine = reinterpret_cast<uint32_t *>(s[lane]);
    mine[0] = a[0];
    mine[1] = a[1];
    mine[2] = b[0];
    mine[3] = b[1];
    mla_emu_my_wave->barrier();
    const int j = lane % 32, h = lane / 32;
    for (int v = 0; v < 16; ++v) {
        const int i = 8 * (v / 4) + 4 * h + v % 4;
        double acc = d[v];
        for (int k = 0; k < 8; ++k) {
            const uint32_t *la = reinterpret_cast<const uint32_t *>(s[i + 32 * (k / 4)]);
            const uint32_t *lb = reinterpret_cast<const uint32_t *>(s[j + 32 * (k / 4)]);
            acc += emu_half(la[(k % 4) / 2], k % 2) * emu_half(lb[2 + (k % 4) / 2], k % 2);
        }
        d[v] = (float)acc;
    }
    mla_emu_my_wave->barrier();
#else
    typedef _Float16 h4_t __attribute__((ext_vector_type(4)));
    typedef float f16v_t __attribute__((ext_vector_type(16)));
    h4_t av, bv;
    f16v_t c;
    __builtin_memcpy(&av, a, 8);
    __builtin_memcpy(&bv, b, 8);
#pragma unroll
    for (int v = 0; v < 16; ++v)
        c[v] = d[v];
    c = __builtin_amdgcn_mfma_f32_32x32x8f16(av, bv, c, 0, 0, 0);
#pragma unroll
    for (int v = 0; v < 16; ++v)
        d[v] = c[v];
#endif
}
#endif

#endif
