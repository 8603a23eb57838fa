/* Warpgroup matrix multiply-accumulate (wgmma, sm_90a): shared-memory
 * operand descriptors, the fences and group waits around the asynchronous
 * instruction, and the shapes the kernels use. */
#ifndef MLA_HIP_WGMMA_H
#define MLA_HIP_WGMMA_H

#include "hip/device_sync.h"

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

#endif
