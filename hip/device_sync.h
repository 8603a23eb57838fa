/* The device pass a HIP source is compiled for, and the synchronisation and
 * shared-memory pieces every kernel family uses (the DSA indexer's, the
 * attention's): which matrix instruction the pass has, the dynamic
 * shared-memory declaration, block and wave barriers, fences, a pause while
 * waiting on other blocks, and reads of words other blocks write. Each has a
 * CPU emulation for hip/emu (which runs these sources with one host thread
 * per lane). The names keep the indexer's idx_ / MLA_IDX_ prefix, where
 * they were first written. */
#ifndef MLA_HIP_DEVICE_SYNC_H
#define MLA_HIP_DEVICE_SYNC_H

#include "hip/device_util.h"

#if defined(MLA_HIP_EMU_HIP_COMPAT_H)
#define MLA_IDX_EMU 1
#include <chrono>
#include <thread>
#else
#define MLA_IDX_EMU 0
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

#if MLA_IDX_MMA_NV
/* Named barriers (NVIDIA bar.sync / bar.arrive, ids 1..15; 0 is
 * __syncthreads): sync waits until n threads (a multiple of 32) have
 * arrived, counting itself; arrive counts itself and goes on, so one group
 * of warps can hand a buffer to another (producer arrives, consumer syncs).
 * The emulation keeps a count and a generation per id (the emulated blocks
 * run one after another). */
#if MLA_IDX_EMU
struct mla_emu_named_bars {
    std::mutex m;
    std::condition_variable cv;
    unsigned arrived[16] = {}, generation[16] = {};
};
inline mla_emu_named_bars mla_emu_nbars;
#endif

MLA_DEV void named_bar_sync(int id, int n)
{
#if MLA_IDX_EMU
    std::unique_lock<std::mutex> lk(mla_emu_nbars.m);
    const unsigned g = mla_emu_nbars.generation[id];
    if (++mla_emu_nbars.arrived[id] == (unsigned)n) {
        mla_emu_nbars.arrived[id] = 0;
        ++mla_emu_nbars.generation[id];
        mla_emu_nbars.cv.notify_all();
    } else {
        mla_emu_nbars.cv.wait(lk, [&] { return mla_emu_nbars.generation[id] != g; });
    }
#else
    asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(n) : "memory");
#endif
}

MLA_DEV void named_bar_arrive(int id, int n)
{
#if MLA_IDX_EMU
    std::lock_guard<std::mutex> lk(mla_emu_nbars.m);
    if (++mla_emu_nbars.arrived[id] == (unsigned)n) {
        mla_emu_nbars.arrived[id] = 0;
        ++mla_emu_nbars.generation[id];
        mla_emu_nbars.cv.notify_all();
    }
#else
    asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(n) : "memory");
#endif
}
#endif

#endif
