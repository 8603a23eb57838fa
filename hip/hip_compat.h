/* The HIP runtime subset the backend uses, on AMD (HIP's own headers) and on
 * NVIDIA (mapped onto the CUDA runtime when nvcc compiles the .hip sources).
 * ROCm's NVIDIA headers are not available everywhere we build, and the subset
 * is small, so the mapping lives here rather than in a dependency. Kernels are
 * launched with the triple-chevron syntax, which both compilers accept. */
#ifndef MLA_HIP_HIP_COMPAT_H
#define MLA_HIP_HIP_COMPAT_H

#if defined(__CUDACC__)

#include <cuda_runtime.h>

typedef cudaError_t hipError_t;
typedef cudaStream_t hipStream_t;
typedef cudaEvent_t hipEvent_t;
typedef cudaDeviceProp hipDeviceProp_t;
typedef cudaMemcpyKind hipMemcpyKind;

#define hipSuccess cudaSuccess
#define hipErrorNoDevice cudaErrorNoDevice
#define hipErrorInvalidDevice cudaErrorInvalidDevice
#define hipErrorInsufficientDriver cudaErrorInsufficientDriver
#define hipErrorOutOfMemory cudaErrorMemoryAllocation

#define hipGetErrorName cudaGetErrorName
#define hipGetErrorString cudaGetErrorString
#define hipGetLastError cudaGetLastError

#define hipGetDeviceCount cudaGetDeviceCount
#define hipGetDevice cudaGetDevice
#define hipSetDevice cudaSetDevice
#define hipGetDeviceProperties cudaGetDeviceProperties

#define hipMalloc cudaMalloc
#define hipFree cudaFree
#define hipHostMalloc(p, n, flags) cudaHostAlloc(p, n, flags)
#define hipHostMallocDefault cudaHostAllocDefault
#define hipHostFree cudaFreeHost
#define hipMemcpyAsync cudaMemcpyAsync
#define hipMemsetAsync cudaMemsetAsync
#define hipMemcpyHostToHost cudaMemcpyHostToHost
#define hipMemcpyHostToDevice cudaMemcpyHostToDevice
#define hipMemcpyDeviceToHost cudaMemcpyDeviceToHost
#define hipMemcpyDeviceToDevice cudaMemcpyDeviceToDevice

#define hipStreamCreate cudaStreamCreate
#define hipStreamDestroy cudaStreamDestroy
#define hipStreamSynchronize cudaStreamSynchronize

#define hipEventCreate cudaEventCreate
#define hipEventCreateWithFlags cudaEventCreateWithFlags
#define hipEventDisableTiming cudaEventDisableTiming
#define hipEventDestroy cudaEventDestroy
#define hipEventRecord cudaEventRecord
#define hipEventSynchronize cudaEventSynchronize
#define hipEventElapsedTime cudaEventElapsedTime

#define hipStreamWaitEvent cudaStreamWaitEvent
#define hipStreamIsCapturing cudaStreamIsCapturing
typedef cudaStreamCaptureStatus hipStreamCaptureStatus;
#define hipStreamCaptureStatusNone cudaStreamCaptureStatusNone

#define hipPointerGetAttributes cudaPointerGetAttributes
typedef cudaPointerAttributes hipPointerAttribute_t;

/* Every lane of a warp takes part in the backend's shuffles. */
template <typename T> static __device__ __forceinline__ T mla_shfl_xor(T v, int lane_mask)
{
    return __shfl_xor_sync(0xffffffffu, v, lane_mask);
}

/* 1 when pred holds on any lane of the wave; every lane must call it. */
static __device__ __forceinline__ int mla_wave_any(int pred) { return __any_sync(0xffffffffu, pred); }

/* v, which the caller knows to be the same on every lane of the wave (a
 * wave index): NVIDIA needs no hint. */
static __device__ __forceinline__ int mla_wave_uniform(int v) { return v; }

#else /* AMD */

#include <hip/hip_runtime.h>

template <typename T> static __device__ __forceinline__ T mla_shfl_xor(T v, int lane_mask)
{
    return __shfl_xor(v, lane_mask);
}

static __device__ __forceinline__ int mla_wave_any(int pred) { return __any(pred); }

/* v, which the caller knows to be the same on every lane of the wave (a
 * wave index), moved to a scalar register: the compiler cannot prove that
 * threadIdx.x / wave size is uniform, and would otherwise keep everything
 * derived from it in vector registers. */
static __device__ __forceinline__ int mla_wave_uniform(int v)
{
    return __builtin_amdgcn_readfirstlane(v);
}

#endif

/* fp32 add, subtract and multiply, each rounded once to nearest even and
 * never fused with a neighbour into an FMA, whatever -ffp-contract says:
 * the bit-defined ops (RoPE) spell their arithmetic with these. CUDA has the
 * intrinsics; on AMD the pragma keeps the `contract` flag off these
 * operations (HIP's own __fmul_rn is a plain `x * y`, contractible under
 * -ffp-contract=fast). */
#if defined(__CUDACC__)
static __device__ __forceinline__ float mla_fadd_rn(float a, float b) { return __fadd_rn(a, b); }
static __device__ __forceinline__ float mla_fsub_rn(float a, float b) { return __fsub_rn(a, b); }
static __device__ __forceinline__ float mla_fmul_rn(float a, float b) { return __fmul_rn(a, b); }
#else
static __device__ __forceinline__ float mla_fadd_rn(float a, float b)
{
#pragma clang fp contract(off)
    return a + b;
}
static __device__ __forceinline__ float mla_fsub_rn(float a, float b)
{
#pragma clang fp contract(off)
    return a - b;
}
static __device__ __forceinline__ float mla_fmul_rn(float a, float b)
{
#pragma clang fp contract(off)
    return a * b;
}
#endif

/* 1 when ptr is device (or managed) memory of the given device. The pointer
 * attribute record differs between CUDA, ROCm 5 and ROCm 6; a pointer the
 * runtime does not know (plain host memory) is "no", and the error a failed
 * query leaves behind is cleared so that it cannot surface later as a launch
 * failure. */
static inline int mla_hip_is_device_pointer(const void *ptr, int device)
{
    hipPointerAttribute_t attr;
    if (hipPointerGetAttributes(&attr, ptr) != hipSuccess) {
        (void)hipGetLastError();
        return 0;
    }
#if defined(__CUDACC__)
    if (attr.type == cudaMemoryTypeManaged)
        return 1;
    return attr.type == cudaMemoryTypeDevice && attr.device == device;
#elif HIP_VERSION_MAJOR >= 6
    if (attr.isManaged || attr.type == hipMemoryTypeManaged)
        return 1;
    return attr.type == hipMemoryTypeDevice && attr.device == device;
#else
    if (attr.isManaged)
        return 1;
    return attr.memoryType == hipMemoryTypeDevice && attr.device == device;
#endif
}

#endif
