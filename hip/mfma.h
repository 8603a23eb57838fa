/* Matrix-unit wrappers of the HIP backend, one small header per the vendor
 * rule of hip/vendor.h: each wrapper exists only in the device pass of a
 * target that has the instruction, announced by a macro, and the kernels
 * keep a plain-FMA path for every other case (other targets, the host pass,
 * the CPU emulation of hip/emu).
 *
 *   MLA_HAVE_MMA_BF16      NVIDIA sm_80+: mma.sync m16n8k16 bf16 -> f32
 *   MLA_HAVE_MFMA_BF16     gfx90a/gfx942/gfx950: v_mfma_f32_32x32x8_bf16
 *   MLA_HAVE_MFMA_SCALE_F4 gfx950: v_mfma_scale_f32_32x32x64_f8f6f4, both
 *                          operands fp4 (e2m1) with e8m0 scales
 *
 * Operand layouts (lane l of the wave; every layout below is what the kernels
 * rely on, and the emulation reproduces exactly that):
 *
 * mma m16n8k16 (wave32; g = l / 4, t = l % 4), bf16 pairs in 32-bit words,
 * the lower half holding the lower k:
 *   A 16x16: a[0] = A[g][2t, 2t+1], a[1] = A[g+8][2t, 2t+1],
 *            a[2] = A[g][2t+8, 2t+9], a[3] = A[g+8][2t+8, 2t+9]
 *   B 16x8:  b[0] = B[2t, 2t+1][g], b[1] = B[2t+8, 2t+9][g]
 *   D 16x8:  d[0], d[1] = D[g][2t, 2t+1]; d[2], d[3] = D[g+8][2t, 2t+1]
 *
 * MFMA 32x32x8 bf16 (wave64; i = l % 32, h = l / 32), 4 bf16 per lane in two
 * words (element 0 in the lower half of the first):
 *   A 32x8:  A[i][4h + e], e = 0..3      B 8x32: B[4h + e][i]
 *   D 32x32: acc[r] = D[8 (r / 4) + 4 h + r % 4][i], r = 0..15
 *
 * scaled MFMA 32x32x64, fp4 x fp4 (wave64): lane l holds 32 consecutive k of
 * row i of A (16 bytes, element 2q in the low nibble of byte q) for the k
 * half h, and one e8m0 scale byte for those 32 values; B likewise for column
 * i; D as above. A product is fp4 * 2^(sa - 127) * fp4 * 2^(sb - 127).
 *
 * ldmatrix m8n8 x4 (NVIDIA sm_75+, wave32; mla_ldsm_x4 / _x4_trans): lanes
 * 8j .. 8j + 7 give the 16-byte rows of 8x8 bf16 matrix j (row i at the
 * address of lane 8j + i); lane l receives r[j] = M_j[l / 4][2 (l % 4), +1]
 * (trans: M_j[2 (l % 4)][l / 4], M_j[2 (l % 4) + 1][l / 4]), the lower
 * element in the low half. With rows = A's rows (or B's columns) these are
 * the mma fragments above.
 *
 * In every case the kernels only need A's and B's k orders to agree, so a
 * k permutation inside a lane's (or a step's) share is free.
 *
 * CPU emulation (hip/emu): the same wrappers exist there, computed from the
 * layouts above with the lanes' operands exchanged through the wave's
 * scratch bytes (products and sums in double, rounded to fp32 per
 * instruction): MLA_EMU_MATRIX_NV in the wave32 build, MLA_EMU_MATRIX_AMD
 * and MLA_EMU_MATRIX_F4 in the wave64 one, with __shared__ as static storage
 * (the emulation runs a launch's blocks one after the other) and the block
 * barriers on the emulation's own. They check the kernels' staging, operand
 * assembly, k orders and output mapping against these layouts; whether the
 * layouts are the hardware's is for a GPU run to show. */
#ifndef MLA_HIP_MFMA_H
#define MLA_HIP_MFMA_H

#include <stdint.h>

#include "hip/vendor.h"

#if defined(MLA_HIP_EMU_HIP_COMPAT_H)
#include <cstring>

#include "core/format_bits.h"
#endif

#if defined(__CUDACC__) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define MLA_HAVE_MMA_BF16 1
#endif
#if defined(__HIP_DEVICE_COMPILE__) &&                                                             \
    (defined(__gfx90a__) || defined(__gfx942__) || defined(__gfx950__))
#define MLA_HAVE_MFMA_BF16 1
#endif
#if defined(__HIP_DEVICE_COMPILE__) && defined(__gfx950__)
#define MLA_HAVE_MFMA_SCALE_F4 1
#endif

/* ------------------------------------------------ byte permutes */

/* NVIDIA prmt.b32 (default mode): byte n of the result is byte (s >> 4n) & 7
 * of the 8 bytes {b:a} (a = bytes 0-3), or, when bit 3 of that nibble is set,
 * that byte's sign bit replicated (0x00 / 0xFF). */
static __device__ __forceinline__ uint32_t mla_prmt(uint32_t a, uint32_t b, uint32_t s)
{
#if defined(__CUDA_ARCH__)
    uint32_t d;
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(s));
    return d;
#else
    const uint64_t v = ((uint64_t)b << 32) | a;
    uint32_t d = 0;
    for (int n = 0; n < 4; ++n) {
        const uint32_t sel = (s >> (4 * n)) & 0xFu;
        uint32_t byte = (uint32_t)(v >> (8 * (sel & 7u))) & 0xFFu;
        if (sel & 8u)
            byte = (byte & 0x80u) ? 0xFFu : 0u;
        d |= byte << (8 * n);
    }
    return d;
#endif
}

/* AMD v_perm_b32 for selector bytes 0-7: byte n of the result is byte
 * (s >> 8n) & 0xFF of the 8 bytes {a:b} (b = bytes 0-3). */
static __device__ __forceinline__ uint32_t mla_perm(uint32_t a, uint32_t b, uint32_t s)
{
#if defined(__HIP_DEVICE_COMPILE__) && defined(__GFX9__) && !defined(MLA_HIP_EMU_HIP_COMPAT_H)
    return __builtin_amdgcn_perm(a, b, s);
#else
    const uint64_t v = ((uint64_t)a << 32) | b;
    uint32_t d = 0;
    for (int n = 0; n < 4; ++n)
        d |= (uint32_t)((v >> (8 * ((s >> (8 * n)) & 7u))) & 0xFFu) << (8 * n);
    return d;
#endif
}

/* ------------------------------------------------ block barriers */

/* __syncthreads() and __syncthreads_or() without library calls: ROCm 5.2's
 * versions call the device library (__atomic_work_item_fence,
 * __ockl_wgred_or_i32), and a call makes the AMD compiler assume the worst
 * register use for the whole kernel (scratch and SGPR spills). Only the
 * matrix paths use them (the CPU emulation has none of its own). */
#if !defined(MLA_HIP_EMU_HIP_COMPAT_H)
static __device__ __forceinline__ void mla_block_sync()
{
#if defined(__HIP_DEVICE_COMPILE__)
    __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
    __builtin_amdgcn_s_barrier();
    __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
#else
    __syncthreads();
#endif
}

/* 1 when pred holds on any thread of the block; every thread must call it. */
static __device__ __forceinline__ int mla_block_any(int pred)
{
#if defined(__HIP_DEVICE_COMPILE__)
    __shared__ int any;
    mla_block_sync(); /* earlier readers of `any` are done */
    if (threadIdx.x == 0)
        any = 0;
    mla_block_sync();
    if (pred)
        __hip_atomic_fetch_or(&any, 1, __ATOMIC_RELAXED, __HIP_MEMORY_SCOPE_WORKGROUP);
    mla_block_sync();
    return any;
#else
    return __syncthreads_or(pred);
#endif
}
#endif

#if defined(MLA_HIP_EMU_HIP_COMPAT_H)
#define __shared__ static
#if MLA_EMU_WAVE == 32
#define MLA_EMU_MATRIX_NV 1
#else
#define MLA_EMU_MATRIX_AMD 1
#define MLA_EMU_MATRIX_F4 1
#endif

static inline void mla_block_sync() { __syncthreads(); }

static inline int mla_block_any(int pred)
{
    static int any;
    __syncthreads(); /* earlier readers of `any` are done */
    if (threadIdx.x == 0)
        __atomic_store_n(&any, 0, __ATOMIC_SEQ_CST);
    __syncthreads();
    if (pred)
        __atomic_fetch_or(&any, 1, __ATOMIC_SEQ_CST);
    __syncthreads();
    return __atomic_load_n(&any, __ATOMIC_SEQ_CST);
}

/* This lane's operand bytes into the wave's scratch, then the wave's. */
static inline const unsigned char (*mla_emu_operands(const void *mine, size_t bytes))[64]
{
    std::memcpy(mla_emu_my_wave->scratch[threadIdx.x % MLA_EMU_WAVE], mine, bytes);
    mla_emu_my_wave->barrier();
    return mla_emu_my_wave->scratch;
}

static inline double mla_emu_bf16(uint32_t pair, int high)
{
    return (double)mla_fb_bf16_to_f32((uint16_t)(high ? pair >> 16 : pair & 0xFFFFu));
}

static inline void mla_mma_bf16_16x8x16(float d[4], const uint32_t a[4], const uint32_t b[2])
{
    const uint32_t mine[6] = {a[0], a[1], a[2], a[3], b[0], b[1]};
    const unsigned char(*s)[64] = mla_emu_operands(mine, sizeof mine);
    const int lane = (int)(threadIdx.x % 32), g = lane / 4, t = lane % 4;
    double r[4];
    for (int q = 0; q < 4; ++q) {
        const int row = g + 8 * (q / 2), col = 2 * t + q % 2;
        r[q] = d[q];
        for (int k = 0; k < 16; ++k) {
            /* A[row][k]: lane 4 (row % 8) + (k % 8) / 2, word row / 8 + 2 (k / 8);
             * B[k][col]: lane 4 col + (k % 8) / 2, word 4 + k / 8; half k % 2 */
            uint32_t wa, wb;
            std::memcpy(&wa, s[4 * (row % 8) + (k % 8) / 2] + 4 * (row / 8 + 2 * (k / 8)), 4);
            std::memcpy(&wb, s[4 * col + (k % 8) / 2] + 4 * (4 + k / 8), 4);
            r[q] += mla_emu_bf16(wa, k % 2) * mla_emu_bf16(wb, k % 2);
        }
    }
    mla_emu_my_wave->barrier();
    for (int q = 0; q < 4; ++q)
        d[q] = (float)r[q];
}

/* ldmatrix: every lane's row address through the scratch, then the rows. */
static inline void mla_emu_ldsm_x4(uint32_t r[4], const void *row, bool trans)
{
    const unsigned char(*s)[64] = mla_emu_operands(&row, sizeof row);
    const int lane = (int)(threadIdx.x % 32);
    for (int j = 0; j < 4; ++j) {
        uint16_t e[2];
        for (int h = 0; h < 2; ++h) {
            /* plain: row lane / 4, column 2 (lane % 4) + h; trans: the transpose */
            const int i = trans ? 2 * (lane % 4) + h : lane / 4;
            const int c = trans ? lane / 4 : 2 * (lane % 4) + h;
            const uint16_t *p;
            std::memcpy(&p, s[8 * j + i], sizeof p);
            e[h] = p[c];
        }
        r[j] = (uint32_t)e[0] | ((uint32_t)e[1] << 16);
    }
    mla_emu_my_wave->barrier();
}

/* a shared-memory address (the device's 32-bit window; here the pointer) */
typedef uintptr_t mla_saddr;
static inline mla_saddr mla_smem_addr(const void *p) { return (uintptr_t)p; }
static inline void mla_ldsm_x4_at(uint32_t r[4], mla_saddr a)
{
    mla_emu_ldsm_x4(r, (const void *)a, false);
}
static inline void mla_ldsm_x4_trans_at(uint32_t r[4], mla_saddr a)
{
    mla_emu_ldsm_x4(r, (const void *)a, true);
}
static inline void mla_ldsm_x4(uint32_t r[4], const void *row) { mla_emu_ldsm_x4(r, row, false); }

struct mla_f32x16 {
    float v[16];
    float &operator[](int i) { return v[i]; }
    const float &operator[](int i) const { return v[i]; }
};

static inline mla_f32x16 mla_mfma_bf16_32x32x8(uint32_t a0, uint32_t a1, uint32_t b0, uint32_t b1,
                                               mla_f32x16 acc)
{
    const uint32_t mine[4] = {a0, a1, b0, b1};
    const unsigned char(*s)[64] = mla_emu_operands(mine, sizeof mine);
    const int lane = (int)(threadIdx.x % 64), j = lane % 32, h = lane / 32;
    mla_f32x16 out;
    for (int r = 0; r < 16; ++r) {
        const int i = 8 * (r / 4) + 4 * h + r % 4;
        double v = acc[r];
        for (int k = 0; k < 8; ++k) {
            /* A[i][k]: lane i + 32 (k / 4), element k % 4; B[k][j]: lane j + 32 (k / 4) */
            uint32_t wa, wb;
            std::memcpy(&wa, s[i + 32 * (k / 4)] + 4 * ((k % 4) / 2), 4);
            std::memcpy(&wb, s[j + 32 * (k / 4)] + 4 * (2 + (k % 4) / 2), 4);
            v += mla_emu_bf16(wa, k % 2) * mla_emu_bf16(wb, k % 2);
        }
        out[r] = (float)v;
    }
    mla_emu_my_wave->barrier();
    return out;
}

static inline mla_f32x16 mla_mfma_scale_f4_32x32x64(const uint32_t a[4], const uint32_t b[4],
                                                    uint32_t sa, uint32_t sb, mla_f32x16 acc)
{
    const uint32_t mine[10] = {a[0], a[1], a[2], a[3],       b[0],
                               b[1], b[2], b[3], sa & 0xFFu, sb & 0xFFu};
    const unsigned char(*s)[64] = mla_emu_operands(mine, sizeof mine);
    const int lane = (int)(threadIdx.x % 64), j = lane % 32, h = lane / 32;
    mla_f32x16 out;
    for (int r = 0; r < 16; ++r) {
        const int i = 8 * (r / 4) + 4 * h + r % 4;
        double v = acc[r];
        for (int k = 0; k < 64; ++k) {
            /* A[i][k]: lane i + 32 (k / 32), byte (k % 32) / 2, nibble k % 2 */
            const unsigned char *la = s[i + 32 * (k / 32)], *lb = s[j + 32 * (k / 32)];
            const int q = (k % 32) / 2, sh = 4 * (k % 2);
            const double va =
                (double)mla_fb_e2m1_scaled_to_f32((uint8_t)((la[q] >> sh) & 0xFu), la[32]);
            const double vb =
                (double)mla_fb_e2m1_scaled_to_f32((uint8_t)((lb[16 + q] >> sh) & 0xFu), lb[36]);
            v += va * vb;
        }
        out[r] = (float)v;
    }
    mla_emu_my_wave->barrier();
    return out;
}
#endif

/* ------------------------------------------------ matrix operations */

#if defined(MLA_HAVE_MMA_BF16)
/* d += A B, one warp (layout above). */
static __device__ __forceinline__ void mla_mma_bf16_16x8x16(float d[4], const uint32_t a[4],
                                                            const uint32_t b[2])
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
/* r = four 8x8 bf16 matrices from shared memory, this lane's row at
 * shared address a (layout above); the _at forms take the 32-bit address
 * (mla_smem_addr once, then plain offsets: no conversion per load). */
typedef uint32_t mla_saddr;
static __device__ __forceinline__ mla_saddr mla_smem_addr(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}

static __device__ __forceinline__ void mla_ldsm_x4_at(uint32_t r[4], mla_saddr a)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}

static __device__ __forceinline__ void mla_ldsm_x4_trans_at(uint32_t r[4], mla_saddr a)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
}

static __device__ __forceinline__ void mla_ldsm_x4(uint32_t r[4], const void *row)
{
    mla_ldsm_x4_at(r, mla_smem_addr(row));
}
#endif

#if defined(MLA_HAVE_MFMA_BF16) || defined(MLA_HAVE_MFMA_SCALE_F4)
typedef float mla_f32x16 __attribute__((ext_vector_type(16)));
#endif

#if defined(MLA_HAVE_MFMA_BF16)
typedef short mla_i16x4 __attribute__((ext_vector_type(4)));

/* acc += A B: a0, a1 = this lane's 4 bf16 of A, b0, b1 of B (layout above). */
static __device__ __forceinline__ mla_f32x16 mla_mfma_bf16_32x32x8(uint32_t a0, uint32_t a1,
                                                                   uint32_t b0, uint32_t b1,
                                                                   mla_f32x16 acc)
{
    mla_i16x4 a, b;
    a[0] = (short)(a0 & 0xFFFFu), a[1] = (short)(a0 >> 16);
    a[2] = (short)(a1 & 0xFFFFu), a[3] = (short)(a1 >> 16);
    b[0] = (short)(b0 & 0xFFFFu), b[1] = (short)(b0 >> 16);
    b[2] = (short)(b1 & 0xFFFFu), b[3] = (short)(b1 >> 16);
    return __builtin_amdgcn_mfma_f32_32x32x8bf16_1k(a, b, acc, 0, 0, 0);
}
#endif

#if defined(MLA_HAVE_MFMA_SCALE_F4)
typedef int mla_i32x8 __attribute__((ext_vector_type(8)));

/* acc += (A * 2^(sa - 127)) (B * 2^(sb - 127)): a, b = this lane's 16 code
 * bytes (32 fp4), sa, sb its scale bytes (format 4 = e2m1 for both). */
static __device__ __forceinline__ mla_f32x16 mla_mfma_scale_f4_32x32x64(const uint32_t a[4],
                                                                        const uint32_t b[4],
                                                                        uint32_t sa, uint32_t sb,
                                                                        mla_f32x16 acc)
{
    const mla_i32x8 av = {(int)a[0], (int)a[1], (int)a[2], (int)a[3], 0, 0, 0, 0};
    const mla_i32x8 bv = {(int)b[0], (int)b[1], (int)b[2], (int)b[3], 0, 0, 0, 0};
    return __builtin_amdgcn_mfma_scale_f32_32x32x64_f8f6f4(av, bv, acc, 4, 4, 0, (int)sa, 0,
                                                           (int)sb);
}
#endif

#endif
