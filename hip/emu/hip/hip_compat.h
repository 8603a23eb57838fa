/* CPU emulation of the HIP runtime subset of hip/hip_compat.h, for checking
 * the backend's kernels on a host without a GPU (hip/emu/run.sh). Put
 * hip/emu on the include path before the source root so that this file
 * shadows the real hip/hip_compat.h.
 *
 * Each block runs as blockDim.x host threads; the lanes of a wave meet at a
 * barrier for every shuffle and vote, so a shuffle that only part of a wave
 * executes hangs here instead of silently reading garbage. Memory is host
 * memory; "device" pointers are the ones hipMalloc returned. The wave size
 * follows vendor.h's macros: build with -D__CUDACC__ for 32, with
 * -D__HIP_DEVICE_COMPILE__ -D__GFX9__ for 64. */
#ifndef MLA_HIP_EMU_HIP_COMPAT_H
#define MLA_HIP_EMU_HIP_COMPAT_H

#include <math.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
/* Static shared memory (the prepare path's GEMM tiles): under mla_emu_launch
 * the blocks run one after the other, so a function-local static is exactly
 * one block's shared memory. (Not for mla_emu_launch_resident kernels.) */
#define __shared__ static

#if defined(__CUDACC__)
#define MLA_EMU_WAVE 32
#else
#define MLA_EMU_WAVE 64
#endif

struct dim3 {
    unsigned x = 1, y = 1, z = 1;
};
inline thread_local dim3 threadIdx, blockIdx;
inline dim3 blockDim, gridDim;

typedef int hipError_t;
enum { hipSuccess = 0, hipErrorOutOfMemory = 2, hipErrorNoDevice = 100, hipErrorInvalidDevice = 101 };
typedef struct mla_emu_stream *hipStream_t;
enum hipMemcpyKind {
    hipMemcpyHostToHost,
    hipMemcpyHostToDevice,
    hipMemcpyDeviceToHost,
    hipMemcpyDeviceToDevice
};
struct hipDeviceProp_t {
    char name[256];
    char gcnArchName[256];
    int major, minor, multiProcessorCount;
};

/* ------------------------------------------------------------ runtime */

struct mla_emu_state {
    std::mutex m;
    std::map<uintptr_t, size_t> allocations;
};
inline mla_emu_state mla_emu;

static inline const char *hipGetErrorName(hipError_t e) { return e ? "hipErrorEmulated" : "hipSuccess"; }
static inline const char *hipGetErrorString(hipError_t e) { return hipGetErrorName(e); }
static inline hipError_t hipGetLastError() { return hipSuccess; }
static inline hipError_t hipGetDeviceCount(int *n)
{
    *n = 1;
    return hipSuccess;
}
inline thread_local int mla_emu_current_device = 0;
static inline hipError_t hipSetDevice(int d)
{
    if (d != 0)
        return hipErrorInvalidDevice;
    mla_emu_current_device = d;
    return hipSuccess;
}
static inline hipError_t hipGetDevice(int *d)
{
    *d = mla_emu_current_device;
    return hipSuccess;
}
static inline hipError_t hipGetDeviceProperties(hipDeviceProp_t *p, int)
{
    std::memset(p, 0, sizeof *p);
    std::strcpy(p->name, "CPU emulation");
    std::strcpy(p->gcnArchName, MLA_EMU_WAVE == 64 ? "wave64:emulated" : "wave32");
    p->major = MLA_EMU_WAVE == 64 ? 9 : 3;
    p->minor = 0;
    p->multiProcessorCount = 1;
    return hipSuccess;
}
static inline hipError_t hipMalloc(void **p, size_t n)
{
    /* 256-byte aligned, as hipMalloc's (the attention workspace asks for it) */
    *p = std::aligned_alloc(256, n ? (n + 255) / 256 * 256 : 256);
    if (!*p)
        return hipErrorOutOfMemory;
    std::lock_guard<std::mutex> g(mla_emu.m);
    mla_emu.allocations[reinterpret_cast<uintptr_t>(*p)] = n;
    return hipSuccess;
}
static inline hipError_t hipFree(void *p)
{
    std::lock_guard<std::mutex> g(mla_emu.m);
    if (!mla_emu.allocations.erase(reinterpret_cast<uintptr_t>(p)))
        return 1;
    std::free(p);
    return hipSuccess;
}
/* Pinned host memory: plain host memory here (kernels run on the host). */
#define hipHostMallocDefault 0u
static inline hipError_t hipHostMalloc(void **p, size_t n, unsigned)
{
    *p = std::malloc(n ? n : 1);
    return *p ? hipSuccess : hipErrorOutOfMemory;
}
static inline hipError_t hipHostFree(void *p)
{
    std::free(p);
    return hipSuccess;
}
static inline hipError_t hipMemcpyAsync(void *d, const void *s, size_t n, hipMemcpyKind, hipStream_t)
{
    std::memmove(d, s, n);
    return hipSuccess;
}
static inline hipError_t hipMemsetAsync(void *d, int v, size_t n, hipStream_t)
{
    std::memset(d, v, n);
    return hipSuccess;
}
static inline hipError_t hipStreamCreate(hipStream_t *s)
{
    *s = reinterpret_cast<hipStream_t>(new char);
    return hipSuccess;
}
static inline hipError_t hipStreamDestroy(hipStream_t s)
{
    delete reinterpret_cast<char *>(s);
    return hipSuccess;
}
static inline hipError_t hipStreamSynchronize(hipStream_t) { return hipSuccess; }
/* Events: kernels complete at their launch here, so an event is always done. */
typedef struct mla_emu_event *hipEvent_t;
#define hipEventDisableTiming 2u
static inline hipError_t hipEventCreateWithFlags(hipEvent_t *e, unsigned)
{
    *e = reinterpret_cast<hipEvent_t>(new char);
    return hipSuccess;
}
static inline hipError_t hipEventDestroy(hipEvent_t e)
{
    delete reinterpret_cast<char *>(e);
    return hipSuccess;
}
static inline hipError_t hipEventRecord(hipEvent_t, hipStream_t) { return hipSuccess; }
static inline hipError_t hipEventSynchronize(hipEvent_t) { return hipSuccess; }
static inline hipError_t hipStreamWaitEvent(hipStream_t, hipEvent_t, unsigned)
{
    return hipSuccess;
}
/* Nothing is ever captured here. */
typedef enum hipStreamCaptureStatus { hipStreamCaptureStatusNone = 0 } hipStreamCaptureStatus;
static inline hipError_t hipStreamIsCapturing(hipStream_t, hipStreamCaptureStatus *status)
{
    *status = hipStreamCaptureStatusNone;
    return hipSuccess;
}

static inline int mla_hip_is_device_pointer(const void *ptr, int device)
{
    std::lock_guard<std::mutex> g(mla_emu.m);
    const uintptr_t p = reinterpret_cast<uintptr_t>(ptr);
    auto it = mla_emu.allocations.upper_bound(p);
    if (device != 0 || it == mla_emu.allocations.begin())
        return 0;
    --it;
    return p < it->first + (it->second ? it->second : 1);
}

/* fp32 operations rounded once each (hip/hip_compat.h): x86-64 SSE
 * arithmetic without FMA is that already. */
static inline float mla_fadd_rn(float a, float b) { return a + b; }
static inline float mla_fsub_rn(float a, float b) { return a - b; }
static inline float mla_fmul_rn(float a, float b) { return a * b; }

/* A value the caller knows to be wave-uniform (hip/hip_compat.h). */
static inline int mla_wave_uniform(int v) { return v; }

/* -------------------------------------------------------------- waves */

struct mla_emu_wave {
    std::mutex m;
    std::condition_variable cv;
    int arrived = 0;
    unsigned generation = 0;
    uint64_t slot[MLA_EMU_WAVE];
    alignas(16) unsigned char scratch[MLA_EMU_WAVE][64]; /* per-lane bytes for wave collectives */
    void barrier()
    {
        std::unique_lock<std::mutex> lk(m);
        const unsigned g = generation;
        if (++arrived == MLA_EMU_WAVE) {
            arrived = 0;
            ++generation;
            cv.notify_all();
        } else {
            cv.wait(lk, [&] { return generation != g; });
        }
    }
};
inline thread_local mla_emu_wave *mla_emu_my_wave;

static inline uint64_t mla_emu_exchange(uint64_t v, int src_lane)
{
    mla_emu_wave &w = *mla_emu_my_wave;
    const int lane = (int)(threadIdx.x % MLA_EMU_WAVE);
    w.slot[lane] = v;
    w.barrier();
    const uint64_t r = w.slot[src_lane];
    w.barrier();
    return r;
}

template <typename T> static inline T mla_shfl_xor(T v, int lane_mask)
{
    static_assert(sizeof(T) <= sizeof(uint64_t), "shuffles move up to 8 bytes");
    uint64_t u = 0;
    std::memcpy(&u, &v, sizeof v);
    u = mla_emu_exchange(u, (int)(threadIdx.x % MLA_EMU_WAVE) ^ lane_mask);
    std::memcpy(&v, &u, sizeof v);
    return v;
}

static inline int mla_wave_any(int pred)
{
    mla_emu_wave &w = *mla_emu_my_wave;
    const int lane = (int)(threadIdx.x % MLA_EMU_WAVE);
    w.slot[lane] = pred != 0;
    w.barrier();
    int any = 0;
    for (int i = 0; i < MLA_EMU_WAVE; ++i)
        any |= w.slot[i] != 0;
    w.barrier();
    return any;
}

/* ------------------------------------------------------------- blocks */

/* A block: its barrier (__syncthreads) and its dynamic shared memory
 * (extern __shared__, reached through mla_emu_dynamic_shared()). */
struct mla_emu_block {
    std::mutex m;
    std::condition_variable cv;
    unsigned arrived = 0, generation = 0, size = 0;
    std::unique_ptr<unsigned char, void (*)(void *)> smem{nullptr, std::free};
    void barrier()
    {
        std::unique_lock<std::mutex> lk(m);
        const unsigned g = generation;
        if (++arrived == size) {
            arrived = 0;
            ++generation;
            cv.notify_all();
        } else {
            cv.wait(lk, [&] { return generation != g; });
        }
    }
};
inline thread_local mla_emu_block *mla_emu_my_block;

static inline void __syncthreads() { mla_emu_my_block->barrier(); }
static inline void *mla_emu_dynamic_shared() { return mla_emu_my_block->smem.get(); }

/* Device-scope atomics and fences on host memory. */
template <typename T> static inline T atomicAdd(T *p, T v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
template <typename T> static inline T atomicOr(T *p, T v) { return __atomic_fetch_or(p, v, __ATOMIC_SEQ_CST); }
static inline int __popc(unsigned v) { return __builtin_popcount(v); }
static inline int __ffs(int v) { return __builtin_ffs(v); }
template <typename T> static inline T atomicMax(T *p, T v)
{
    T cur = __atomic_load_n(p, __ATOMIC_SEQ_CST);
    while (cur < v && !__atomic_compare_exchange_n(p, &cur, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
    }
    return cur;
}
template <typename T> static inline T atomicExch(T *p, T v) { return __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST); }
template <typename T> static inline T atomicCAS(T *p, T cmp, T v)
{
    __atomic_compare_exchange_n(p, &cmp, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    return cmp;
}
static inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }

/* The threads of block b (one host thread per lane), joined before return. */
template <typename... P, typename... A>
static inline void mla_emu_run_block(unsigned b, unsigned block, size_t shmem, void (*kernel)(P...),
                                     A... args)
{
    std::vector<std::unique_ptr<mla_emu_wave>> waves((block + MLA_EMU_WAVE - 1) / MLA_EMU_WAVE);
    for (auto &w : waves)
        w = std::make_unique<mla_emu_wave>();
    mla_emu_block blk;
    blk.size = block;
    blk.smem.reset(static_cast<unsigned char *>(std::aligned_alloc(64, (shmem + 63) / 64 * 64 + 64)));
    std::vector<std::thread> threads;
    for (unsigned t = 0; t < block; ++t)
        threads.emplace_back([&, b, t] {
            threadIdx = dim3{t, 0, 0};
            blockIdx = dim3{b, 0, 0};
            mla_emu_my_wave = waves[t / MLA_EMU_WAVE].get();
            mla_emu_my_block = &blk;
            kernel(args...);
        });
    for (auto &th : threads)
        th.join();
}

/* kernel<<<grid, block, shmem, stream>>>(args) is rewritten by hip/emu/run.sh
 * into mla_emu_launch(grid, block, shmem, stream, kernel, args): the blocks
 * one after the other. */
template <typename... P, typename... A>
static inline void mla_emu_launch(unsigned grid, unsigned block, size_t shmem, hipStream_t,
                                  void (*kernel)(P...), A... args)
{
    gridDim = dim3{grid, 1, 1};
    blockDim = dim3{block, 1, 1};
    for (unsigned b = 0; b < grid; ++b)
        mla_emu_run_block(b, block, shmem, kernel, args...);
}

/* For kernels whose blocks wait on each other (they must then be resident
 * together, as on a GPU): up to `resident` blocks run at the same time, a new
 * one starting in grid order as soon as one ends. Kernels call it directly,
 * under #ifdef MLA_HIP_EMU_HIP_COMPAT_H. */
template <typename... P, typename... A>
static inline void mla_emu_launch_resident(unsigned grid, unsigned block, size_t shmem, unsigned resident,
                                           void (*kernel)(P...), A... args)
{
    gridDim = dim3{grid, 1, 1};
    blockDim = dim3{block, 1, 1};
    std::mutex m;
    std::condition_variable cv;
    unsigned running = 0;
    std::vector<std::thread> blocks;
    for (unsigned b = 0; b < grid; ++b) {
        {
            std::unique_lock<std::mutex> lk(m);
            cv.wait(lk, [&] { return running < (resident ? resident : 1); });
            ++running;
        }
        blocks.emplace_back([&, b] {
            mla_emu_run_block(b, block, shmem, kernel, args...);
            std::lock_guard<std::mutex> g(m);
            --running;
            cv.notify_all();
        });
    }
    for (auto &th : blocks)
        th.join();
}

#endif
