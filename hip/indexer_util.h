/* Device pieces of the DSA indexer kernels (hip/layernorm.hip ...
 * hip/topk.hip): dynamic shared memory, block scans, spinning between
 * blocks, indexed shuffles, fp8 -> f16 pairs, and the two matrix
 * instructions the paged logits use, each with a CPU emulation for hip/emu
 * (which runs these sources with one host thread per lane):
 *
 *   NVIDIA  mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 (sm_80+)
 *   gfx9    v_mfma_f32_32x32x8_f16 (gfx908, gfx90a, gfx942, gfx950)
 *
 * fp8 e4m3 values (fn and fnuz) are exact f16 NORMAL numbers (4 significant
 * bits, magnitudes 2^-10 .. 448), and the product of two has at most 8
 * significant bits, exact in fp32: the matrix units then only round the
 * fp32 sums, which is the summation the logits bound allows. The fp8 -> f16
 * conversion is exact and uses no table: the 7 magnitude bits placed at f16
 * bits 7..13 are an f16 of value fp8 * 2^-(15 - bias) (fp8 subnormals land
 * on f16 subnormals by the same factor), then one packed f16 product by
 * 2^(15 - bias) gives the exact normal f16 (so no subnormal ever reaches a
 * matrix unit, whose subnormal handling differs between generations). The
 * fp8 NaN codes (0x7F/0xFF e4m3fn, 0x80 e4m3fnuz) come out finite there;
 * callers test for them separately (fp8_nan_bytes). */
#ifndef MLA_HIP_INDEXER_UTIL_H
#define MLA_HIP_INDEXER_UTIL_H

#include "hip/device_util.h"

#if defined(MLA_HIP_EMU_HIP_COMPAT_H)
#define MLA_IDX_EMU 1
#include <chrono>
#include <thread>
#else
#define MLA_IDX_EMU 0
#endif

#if defined(__CUDACC__) && !MLA_IDX_EMU
#include <cuda_fp16.h>
#endif

/* Which matrix instruction this device pass has (0: none, plain FMA). */
#if MLA_IDX_EMU
#define MLA_IDX_MMA_NV (MLA_WAVE_SIZE == 32)
#define MLA_IDX_MMA_AMD (MLA_WAVE_SIZE == 64)
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define MLA_IDX_MMA_NV 1
#define MLA_IDX_MMA_AMD 0
#elif defined(__gfx908__) || defined(__gfx90a__) || defined(__gfx940__) ||                        \
    defined(__gfx941__) || defined(__gfx942__) || defined(__gfx950__)
#define MLA_IDX_MMA_NV 0
#define MLA_IDX_MMA_AMD 1
#else
#define MLA_IDX_MMA_NV 0
#define MLA_IDX_MMA_AMD 0
#endif

/* The kernel's dynamic shared memory (extern __shared__) as T *name. One
 * array name for every kernel, so the declarations agree. */
#if MLA_IDX_EMU
#define MLA_IDX_SMEM(T, name) T *name = static_cast<T *>(mla_emu_dynamic_shared())
#else
#define MLA_IDX_SMEM(T, name)                                                                      \
    extern __shared__ __attribute__((aligned(16))) unsigned char mla_idx_smem_[];                   \
    T *name = reinterpret_cast<T *>(mla_idx_smem_)
#endif

/* __syncthreads and __threadfence. On AMD, ROCm 5.2's versions call an
 * OpenCL library function that clang 22 does not link: the builtins
 * (workgroup barrier between a release and an acquire fence; an agent-scope
 * fence) are what newer headers emit. */
MLA_DEV void idx_sync()
{
#if MLA_IDX_EMU || defined(__CUDACC__)
    __syncthreads();
#else
    __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
    __builtin_amdgcn_s_barrier();
    __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
#endif
}

MLA_DEV void idx_fence()
{
#if MLA_IDX_EMU || defined(__CUDACC__)
    __threadfence();
#else
    __builtin_amdgcn_fence(__ATOMIC_SEQ_CST, "agent");
#endif
}

/* The lanes of one wave see each other's shared-memory writes after it
 * (every lane calls it). */
MLA_DEV void idx_wave_sync()
{
#if MLA_IDX_EMU
    mla_emu_my_wave->barrier();
#elif defined(__CUDACC__)
    __syncwarp();
#else
    __builtin_amdgcn_fence(__ATOMIC_RELEASE, "wavefront");
    __builtin_amdgcn_wave_barrier();
    __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "wavefront");
#endif
}

/* Lets other blocks run while this one waits for them. */
MLA_DEV void idx_pause()
{
#if MLA_IDX_EMU
    std::this_thread::sleep_for(std::chrono::microseconds(20));
#elif defined(__CUDA_ARCH__)
    __nanosleep(64);
#elif defined(__HIP_DEVICE_COMPILE__)
    __builtin_amdgcn_s_sleep(2);
#endif
}

/* A word other blocks write: read past this CU's caches. */
MLA_DEV uint32_t ld_shared_u32(const uint32_t *p) { return *static_cast<const volatile uint32_t *>(p); }
MLA_DEV uint64_t ld_shared_u64(const uint64_t *p) { return *static_cast<const volatile uint64_t *>(p); }

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

/* ------------------------------------------------------- fp8 -> f16 */

/* Bytes of x (4 fp8 codes) that are NaN codes: 0x80 in their byte. */
template <int FNUZ> MLA_DEV uint32_t fp8_nan_bytes(uint32_t x)
{
    if (FNUZ) {
        const uint32_t v = x ^ 0x80808080u; /* zero byte <=> 0x80 */
        return (v - 0x01010101u) & ~v & 0x80808080u;
    }
    return ((x & 0x7F7F7F7Fu) + 0x01010101u) & 0x80808080u; /* low 7 bits all ones */
}

/* Codes byte0 (low half) and byte1 (high half) of x as f16 bit patterns of
 * value * 2^-(15 - bias): magnitude << 7, sign to bit 15. */
MLA_DEV uint32_t fp8x2_f16_scaled(uint32_t x)
{
#if defined(__CUDA_ARCH__) && !MLA_IDX_EMU
    uint32_t u;
    /* [sign(b1) b1 sign(b0) b0]: the selector's msb replicates a byte's sign */
    asm("prmt.b32 %0, %1, 0, 0x9180;" : "=r"(u) : "r"(x));
    return (u << 7) & 0xBF80BF80u;
#else
    const uint32_t t = ((x & 0xFFu) | ((x & 0xFF00u) << 8)) << 7;
    return (t & 0x3F803F80u) | ((t << 1) & 0x80008000u);
#endif
}

/* Two f16 (bit patterns, low and high half) times 2^e (e = 7 or 8), exact:
 * the results are fp8 values, normal f16 numbers. */
MLA_DEV uint32_t f16x2_mul_pow2(uint32_t h, int e)
{
#if MLA_IDX_EMU
    const float s = e == 8 ? 256.0f : 128.0f;
    const uint32_t lo = mla_fb_f32_to_f16(mla_fb_f16_to_f32((uint16_t)(h & 0xFFFFu)) * s);
    const uint32_t hi = mla_fb_f32_to_f16(mla_fb_f16_to_f32((uint16_t)(h >> 16)) * s);
    return lo | (hi << 16);
#elif defined(__CUDACC__)
    __half2 v;
    __builtin_memcpy(&v, &h, 4);
    const __half s = __float2half_rn(e == 8 ? 256.0f : 128.0f);
    v = __hmul2(v, __halves2half2(s, s));
    uint32_t r;
    __builtin_memcpy(&r, &v, 4);
    return r;
#else
    typedef _Float16 h2_t __attribute__((ext_vector_type(2)));
    h2_t v;
    __builtin_memcpy(&v, &h, 4);
    const _Float16 s = e == 8 ? (_Float16)256.0f : (_Float16)128.0f;
    v = v * (h2_t){s, s};
    uint32_t r;
    __builtin_memcpy(&r, &v, 4);
    return r;
#endif
}

/* 4 fp8 codes (x's bytes 0..3) -> exact f16 pairs: lo = bytes 0, 1; hi =
 * bytes 2, 3 (each pair: the lower byte in the low half). */
template <int FNUZ> MLA_DEV void fp8x4_to_f16(uint32_t x, uint32_t &lo, uint32_t &hi)
{
    constexpr int e = FNUZ ? 7 : 8; /* 15 - bias */
    lo = f16x2_mul_pow2(fp8x2_f16_scaled(x), e);
    hi = f16x2_mul_pow2(fp8x2_f16_scaled(x >> 16), e);
}

/* e4m3fn codes -> f16 pairs by the conversion sm_89 and later have
 * (cvt.rn.f16x2.e4m3x2, the lower byte to the low half; the emulation
 * builds the same bits): the values are those of fp8x4_to_f16<0>, in 2
 * instructions instead of 8, and the NaN codes become f16 NaNs, which the
 * matrix unit carries into every sum they enter (no separate test). */
#if MLA_IDX_EMU || (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890)
#define MLA_IDX_CVT_E4M3 1
MLA_DEV void e4m3fn_x4_to_f16_cvt(uint32_t x, uint32_t &lo, uint32_t &hi)
{
#if MLA_IDX_EMU
    uint32_t h[2];
    fp8x4_to_f16<0>(x, h[0], h[1]);
    for (int i = 0; i < 4; ++i) /* NaN codes: an f16 NaN of the code's sign */
        if (((x >> (8 * i)) & 0x7Fu) == 0x7Fu)
            h[i / 2] = (h[i / 2] & ~(0xFFFFu << (16 * (i % 2)))) |
                       ((((x >> (8 * i)) & 0x80u) << 8 | 0x7FFFu) << (16 * (i % 2)));
    lo = h[0];
    hi = h[1];
#else
    asm("{.reg .b16 l, h;\n\t"
        "mov.b32 {l, h}, %2;\n\t"
        "cvt.rn.f16x2.e4m3x2 %0, l;\n\t"
        "cvt.rn.f16x2.e4m3x2 %1, h;}"
        : "=r"(lo), "=r"(hi)
        : "r"(x));
#endif
}
#else
#define MLA_IDX_CVT_E4M3 0
#endif

/* --------------------------------------- asynchronous copies (NVIDIA) */

/* cp.async (sm_80+): BYTES (4, 8 or 16) from global src to shared dst without
 * registers, zero-filled when !valid; commit closes a group, wait<N> returns
 * once at most N of this thread's groups are still in flight. Only the
 * issuing thread reads what it copied. The emulation copies at once. */
#if MLA_IDX_MMA_NV
template <int BYTES> MLA_DEV void cp_async(void *dst, const void *src, bool valid)
{
#if MLA_IDX_EMU
    if (valid)
        memcpy(dst, src, BYTES);
    else
        memset(dst, 0, BYTES);
#else
    const uint32_t d = (uint32_t)__cvta_generic_to_shared(dst);
    const int n = valid ? BYTES : 0;
    if constexpr (BYTES == 16)
        asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(d), "l"(src), "r"(n) : "memory");
    else if constexpr (BYTES == 8)
        asm volatile("cp.async.ca.shared.global [%0], [%1], 8, %2;" ::"r"(d), "l"(src), "r"(n) : "memory");
    else
        asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(d), "l"(src), "r"(n) : "memory");
#endif
}

/* The 16-byte copy with an L2 policy of evict-first: the key cache streams
 * through once per call (far more bytes than the L2 holds), and the logits
 * the call writes should outlive it there, for the top-k that reads them
 * next. */
MLA_DEV void cp_async16_stream(void *dst, const void *src, bool valid)
{
#if MLA_IDX_EMU
    cp_async<16>(dst, src, valid);
#else
    uint64_t pol;
    asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
    const uint32_t d = (uint32_t)__cvta_generic_to_shared(dst);
    asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2, %3;" ::"r"(d),
                 "l"(src), "r"(valid ? 16 : 0), "l"(pol)
                 : "memory");
#endif
}

MLA_DEV void cp_async_commit()
{
#if !MLA_IDX_EMU
    asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}

template <int N> MLA_DEV void cp_async_wait()
{
#if !MLA_IDX_EMU
    asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
#endif
}

/* Bulk copies (sm_90+): one thread moves BYTES (a multiple of 16, both
 * addresses 16-byte aligned) from global to shared memory, completing as
 * transaction bytes on an mbarrier. A phase of the mbarrier ends when its
 * `count` arrivals (init) have come and every byte announced by
 * arrive_expect_tx has landed; waiters test the phase's parity. The
 * emulation copies at once and never waits (its lanes meet at idx_sync). */
#if MLA_IDX_EMU || (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900)
#define MLA_IDX_BULK 1
MLA_DEV void mbar_init(uint64_t *bar, uint32_t count)
{
#if MLA_IDX_EMU
    (void)bar, (void)count;
#else
    asm volatile(
        "mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"((uint32_t)__cvta_generic_to_shared(bar)),
        "r"(count)
        : "memory");
#endif
}

/* This thread's arrival, announcing BYTES still to land in the phase. */
MLA_DEV void mbar_arrive_expect_tx(uint64_t *bar, uint32_t bytes)
{
#if MLA_IDX_EMU
    (void)bar, (void)bytes;
#else
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(
                     (uint32_t)__cvta_generic_to_shared(bar)),
                 "r"(bytes)
                 : "memory");
#endif
}

MLA_DEV void mbar_wait(uint64_t *bar, uint32_t parity)
{
#if !MLA_IDX_EMU
    const uint32_t a = (uint32_t)__cvta_generic_to_shared(bar);
    uint32_t done = 0;
    while (!done)
        asm volatile("{\n\t.reg .pred p;\n\t"
                     "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
                     "selp.b32 %0, 1, 0, p;\n\t}"
                     : "=r"(done)
                     : "r"(a), "r"(parity)
                     : "memory");
#else
    (void)bar, (void)parity;
#endif
}

/* Orders this thread's generic shared-memory accesses before its (and,
 * after a barrier, any thread's) later bulk copies into the same bytes. */
MLA_DEV void fence_proxy_async()
{
#if !MLA_IDX_EMU
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
}

MLA_DEV void bulk_copy(void *dst, const void *src, uint32_t bytes, uint64_t *bar)
{
#if MLA_IDX_EMU
    (void)bar;
    memcpy(dst, src, bytes);
#else
    asm volatile(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, "
        "[%3];" ::"r"((uint32_t)__cvta_generic_to_shared(dst)),
        "l"(src), "r"(bytes), "r"((uint32_t)__cvta_generic_to_shared(bar))
        : "memory");
#endif
}
#else
#define MLA_IDX_BULK 0
#endif
#endif

/* ------------------------------------- warpgroup matrix ops (sm_90a) */

/* wgmma exists only in the sm_90a pass (nvcc -arch sm_90a / CUDA
 * architecture "90a"); a plain sm_90 build keeps the mma.sync bodies. */
#if !MLA_IDX_EMU && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define MLA_IDX_WGMMA 1
/* Descriptor of a K-major f16 operand in shared memory without swizzle:
 * core matrices of 8 rows x 16 bytes (8 rows of 8 elements along K, row i
 * at 16 i), `lbo` bytes apart along K and `sbo` bytes apart along M / N
 * (PTX ISA, "matrix descriptor"; addresses and offsets in 16-byte units). */
MLA_DEV uint64_t wg_desc(const void *smem, uint32_t lbo, uint32_t sbo)
{
    const uint32_t a = (uint32_t)__cvta_generic_to_shared(smem);
    return (uint64_t)((a >> 4) & 0x3FFFu) | (uint64_t)((lbo >> 4) & 0x3FFFu) << 16 |
           (uint64_t)((sbo >> 4) & 0x3FFFu) << 32;
}

/* Before a wgmma reads registers (its A operand, the accumulators) that
 * ordinary instructions wrote. */
MLA_DEV void wg_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
MLA_DEV void wg_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N> MLA_DEV void wg_wait()
{
    asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}

/* The accumulators as the compiler's values only after wg_wait: an empty
 * asm that "writes" them keeps the compiler from reading or moving them
 * while the wgmma that writes them is in flight. */
MLA_DEV void wg_pin(float (&d)[32])
{
#pragma unroll
    for (int i = 0; i < 32; ++i)
        asm volatile("" : "+f"(d[i])::"memory");
}

/* D (64 x 64 f32, 32 per thread) = A (64 x 16 f16, registers: warp w of
 * the warpgroup holds rows 16 w .. 16 w + 15 in mma.m16n8k16's A fragment)
 * x B (16 x 64 f16, shared memory at `desc`, K-major) + (acc ? D : 0).
 * Asynchronous: D is written once wg_wait says this group is done. */
MLA_DEV void wgmma_m64n64k16(float (&d)[32], const uint32_t a[4], uint64_t desc, int acc)
{
    asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %37, 0;\n\t"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, "
                 "{%32, %33, %34, %35}, %36, p, 1, 1, 0;\n\t}"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
                   "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]),
                   "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]),
                   "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]),
                   "+f"(d[30]), "+f"(d[31])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc), "r"(acc)
                 : "memory");
}
#else
#define MLA_IDX_WGMMA 0
#endif

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
