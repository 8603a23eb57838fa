/* Warpgroup matrix multiply-accumulate (wgmma, sm_90a): shared-memory
 * operand descriptors, the fences and group waits around the asynchronous
 * instruction, and the shapes the kernels use. */
#ifndef MLA_HIP_WGMMA_H
#define MLA_HIP_WGMMA_H

#include "hip/device_sync.h"

/* wgmma exists only in the sm_90a pass (nvcc -arch sm_90a / CUDA
 * architecture "90a"); a plain sm_90 build keeps the mma.sync bodies.
 * MLA_IDX_WGMMA: the device pass has it (the indexer's f16 logits);
 * MLA_WG_BF16: the bf16 forms below exist, in that pass and in the wave-32
 * emulation, which computes them from the layouts they document. */
#if !MLA_IDX_EMU && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define MLA_IDX_WGMMA 1
#else
#define MLA_IDX_WGMMA 0
#endif
#if MLA_IDX_WGMMA || (MLA_IDX_EMU && MLA_WAVE_SIZE == 32)
#define MLA_WG_BF16 1
#else
#define MLA_WG_BF16 0
#endif

#if MLA_WG_BF16
/* Before a wgmma reads registers (its A operand, the accumulators) that
 * ordinary instructions wrote; a group closes the wgmmas issued since the
 * last one; wait<N> returns once at most N of this warp's groups are
 * pending. The emulation completes each wgmma at its issue. */
MLA_DEV void wg_fence()
{
#if !MLA_IDX_EMU
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#endif
}
MLA_DEV void wg_commit()
{
#if !MLA_IDX_EMU
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
#endif
}
template <int N> MLA_DEV void wg_wait()
{
#if !MLA_IDX_EMU
    asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
#endif
}

/* Registers a wgmma writes (accumulators) or reads (an A operand) as the
 * compiler's values only after wg_wait: an empty asm that "writes" them
 * keeps the compiler from reading, moving or reusing them while the wgmma
 * is in flight. */
template <int N> MLA_DEV void wg_pin(float (&d)[N])
{
#if !MLA_IDX_EMU
#pragma unroll
    for (int i = 0; i < N; ++i)
        asm volatile("" : "+f"(d[i])::"memory");
#else
    (void)d;
#endif
}
template <int N> MLA_DEV void wg_pin(uint32_t (&r)[N])
{
#if !MLA_IDX_EMU
#pragma unroll
    for (int i = 0; i < N; ++i)
        asm volatile("" : "+r"(r[i])::"memory");
#else
    (void)r;
#endif
}

/* dst = src by real moves, ordered after the asm before them (a wg_wait):
 * a loop-carried wgmma operand refilled while its wgmma may be in flight
 * would otherwise be computed straight into the operand's registers, and
 * ptxas then serializes every wgmma of the loop. */
template <int N> MLA_DEV void wg_move(uint32_t (&dst)[N], const uint32_t (&src)[N])
{
#pragma unroll
    for (int i = 0; i < N; ++i) {
#if !MLA_IDX_EMU
        asm volatile("mov.b32 %0, %1;" : "=r"(dst[i]) : "r"(src[i]));
#else
        dst[i] = src[i];
#endif
    }
}

/* This warpgroup's register budget from here on (setmaxnreg, sm_90a): the
 * roles of a warp-specialized kernel trade registers within the block's
 * allocation. N: a multiple of 8 in 24 .. 256. */
template <int N> MLA_DEV void wg_regs_inc()
{
#if !MLA_IDX_EMU
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(N));
#endif
}
template <int N> MLA_DEV void wg_regs_dec()
{
#if !MLA_IDX_EMU
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(N));
#endif
}

/* A shared-memory address as the descriptors take it (the emulation: bytes
 * from the start of the block's dynamic shared memory). */
MLA_DEV uint32_t wg_addr(const void *p)
{
#if MLA_IDX_EMU
    return (uint32_t)(static_cast<const unsigned char *>(p) -
                      static_cast<const unsigned char *>(mla_emu_dynamic_shared()));
#else
    return (uint32_t)__cvta_generic_to_shared(p);
#endif
}

/* Descriptor of a bf16 operand in shared memory in the 128-byte swizzle
 * (PTX ISA, "matrix descriptor": address, leading and stride byte offsets
 * in 16-byte units, layout 1 in bits 62-63). The layouts, a the descriptor's
 * start (addr), bytes before the swizzle, which then XORs address bits 4-6
 * with bits 7-9 (so tiles start 1024-byte aligned):
 *   K-major (A, or B = K^T rows): element (row m, k) at a + (m / 8) sbo +
 *     (m % 8) 128 + 2 k, k < 16 the instruction's slice; lbo unused. A
 *     k-step further is a + 32 within a 64-element row, so a tile of rows
 *     x 64 values is rows x 128 bytes (sbo 1024) and the 16-value steps
 *     start at +0, +32, +64, +96.
 *   MN-major (B = V, transposed): element (k, n) at a + (n / 64) lbo +
 *     2 (n % 64) + (k / 8) sbo + (k % 8) 128: 64-value rows of 128 bytes
 *     per k, groups of 8 k rows sbo apart, 64-column blocks lbo apart. */
MLA_DEV uint64_t wg_desc_sw128(uint32_t addr, uint32_t lbo, uint32_t sbo)
{
    return (uint64_t)((addr >> 4) & 0x3FFFu) | (uint64_t)((lbo >> 4) & 0x3FFFu) << 16 |
           (uint64_t)((sbo >> 4) & 0x3FFFu) << 32 | (uint64_t)1 << 62;
}

#if MLA_IDX_EMU
/* The element a descriptor's layout puts at (mn, k) (layouts above). */
static inline float wg_emu_elem(uint64_t desc, int mn, int k, bool mn_major)
{
    const uint32_t start = (uint32_t)(desc & 0x3FFFu) << 4;
    const uint32_t lbo = (uint32_t)((desc >> 16) & 0x3FFFu) << 4;
    const uint32_t sbo = (uint32_t)((desc >> 32) & 0x3FFFu) << 4;
    uint32_t a = mn_major ? start + (uint32_t)(mn / 64) * lbo + 2u * (uint32_t)(mn % 64) +
                                (uint32_t)(k / 8) * sbo + (uint32_t)(k % 8) * 128u
                          : start + (uint32_t)(mn / 8) * sbo + (uint32_t)(mn % 8) * 128u +
                                2u * (uint32_t)k;
    a ^= ((a >> 7) & 7u) << 4;
    uint16_t v;
    std::memcpy(&v, static_cast<const unsigned char *>(mla_emu_dynamic_shared()) + a, 2);
    return mla_fb_bf16_to_f32(v);
}

/* D (64 x N) = A (64 x 16) B (16 x N) + (acc ? D : 0) for this thread's
 * accumulators (layout of wg_ss_64x64), A from shared memory (adesc,
 * K-major) or from the warp's registers (a: mma.m16n8k16's A fragment of
 * the warp's 16 rows), B from shared memory (bdesc, K-major or MN-major);
 * products and sums in double, rounded to fp32 once. */
template <int N>
static inline void wg_emu_mma(float *d, const uint32_t *a, uint64_t adesc, uint64_t bdesc,
                              bool b_mn, int acc)
{
    const int lane = (int)(threadIdx.x % 32), w = (int)(threadIdx.x % 128) / 32;
    const int g = lane / 4, t = lane % 4;
    mla_emu_wave &wave = *mla_emu_my_wave;
    if (a) {
        std::memcpy(wave.scratch[lane], a, 16);
        wave.barrier();
    }
    for (int i = 0; i < N / 2; ++i) {
        const int row = 16 * w + g + 8 * ((i % 4) / 2), col = 8 * (i / 4) + 2 * t + i % 2;
        double s = acc ? (double)d[i] : 0.0;
        for (int k = 0; k < 16; ++k) {
            double av;
            if (a) { /* A[r][k]: lane 4 (r % 8) + (k % 8) / 2, word r / 8 + 2 (k / 8) */
                const int r = row % 16;
                uint32_t word;
                std::memcpy(&word, wave.scratch[4 * (r % 8) + (k % 8) / 2] + 4 * (r / 8 + 2 * (k / 8)),
                            4);
                av = (double)mla_fb_bf16_to_f32((uint16_t)(k % 2 ? word >> 16 : word & 0xFFFFu));
            } else {
                av = (double)wg_emu_elem(adesc, row, k, false);
            }
            s += av * (double)wg_emu_elem(bdesc, col, k, b_mn);
        }
        d[i] = (float)s;
    }
    if (a)
        wave.barrier();
}
#endif

/* The A fragments (a[4] of wg_rs_*) of the four 16-key steps of P from its
 * bf16 pairs pw[j][h] = keys 8 j + 2 t, + 1 of row half h: a 64-key S's
 * accumulator layout is the A layout, so this only renames registers. */
MLA_DEV void wg_p_frags(const uint32_t (&pw)[8][2], uint32_t (&pa)[4][4])
{
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
        pa[kk][0] = pw[2 * kk][0];
        pa[kk][1] = pw[2 * kk][1];
        pa[kk][2] = pw[2 * kk + 1][0];
        pa[kk][3] = pw[2 * kk + 1][1];
    }
}

/* Accumulator layout of every form (PTX's wgmma D fragment): warp w of the
 * warpgroup holds rows 16 w .. 16 w + 15; with g = lane / 4, t = lane % 4,
 * d[4 j + 2 h + e] = D[16 w + g + 8 h][8 j + 2 t + e]. Asynchronous: D is
 * written once wg_wait says the group is done. */

/* S (64 x 64 f32) = A (64 x 16 bf16, K-major at da) x B (16 x 64 bf16, B^T
 * K-major at db) + (acc ? S : 0). */
MLA_DEV void wg_ss_64x64(float (&d)[32], uint64_t da, uint64_t db, int acc)
{
#if MLA_IDX_EMU
    wg_emu_mma<64>(d, nullptr, da, db, false, acc);
#else
    asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %34, 0;\n\t"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, "
                 "%12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, "
                 "%24, %25, %26, %27, %28, %29, %30, %31}, "
                 "%32, %33, p, 1, 1, 0, 0;\n\t}"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
                   "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]),
                   "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]),
                   "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]),
                   "+f"(d[30]), "+f"(d[31])
                 : "l"(da), "l"(db), "r"(acc)
                 : "memory");
#endif
}

/* O (64 x 256 f32) = A (64 x 16 bf16 from registers: warp w's rows 16 w
 * .. 16 w + 15 as mma.m16n8k16's A fragment) x B (16 x 256 bf16, MN-major
 * at db) + (acc ? O : 0). */
MLA_DEV void wg_rs_64x256(float (&d)[128], const uint32_t (&a)[4], uint64_t db, int acc)
{
#if MLA_IDX_EMU
    wg_emu_mma<256>(d, a, 0, db, true, acc);
#else
    asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %133, 0;\n\t"
                 "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, "
                 "%12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, "
                 "%24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, "
                 "%36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
                 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, "
                 "%60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, "
                 "%72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, "
                 "%84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
                 "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, "
                 "%108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, "
                 "%120, %121, %122, %123, %124, %125, %126, %127}, "
                 "{%128, %129, %130, %131}, %132, p, 1, 1, 1;\n\t}"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
                   "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]),
                   "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]),
                   "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]),
                   "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]),
                   "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),
                   "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
                   "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]),
                   "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]),
                   "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]),
                   "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
                   "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]),
                   "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]),
                   "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]),
                   "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
                   "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]),
                   "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]),
                   "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
                   "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]),
                   "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]),
                   "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]),
                   "+f"(d[127])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(acc)
                 : "memory");
#endif
}

/* O (64 x 128 f32) = A (64 x 16 bf16 from registers, as wg_rs_64x256) x B
 * (16 x 128 bf16, MN-major at db) + (acc ? O : 0). */
MLA_DEV void wg_rs_64x128(float (&d)[64], const uint32_t (&a)[4], uint64_t db, int acc)
{
#if MLA_IDX_EMU
    wg_emu_mma<128>(d, a, 0, db, true, acc);
#else
    asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %69, 0;\n\t"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
                 "{"
                 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, "
                 "%12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, "
                 "%24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, "
                 "%36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
                 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, "
                 "%60, %61, %62, %63"
                 "}, "
                 "{%64, %65, %66, %67}, %68, p, 1, 1, 1;\n\t}"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
                   "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]),
                   "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]),
                   "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]),
                   "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]),
                   "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),
                   "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
                   "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]),
                   "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]),
                   "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(acc)
                 : "memory");
#endif
}

/* C (64 x 128 f32) = A (64 x 16 bf16, K-major at da) x B (16 x 128 bf16,
 * B^T K-major at db: rows of n, k along the row) + (acc ? C : 0). */
MLA_DEV void wg_ss_64x128(float (&d)[64], uint64_t da, uint64_t db, int acc)
{
#if MLA_IDX_EMU
    wg_emu_mma<128>(d, nullptr, da, db, false, acc);
#else
    asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %66, 0;\n\t"
                 "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 "
                 "{"
                 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, "
                 "%12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, "
                 "%24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, "
                 "%36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
                 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, "
                 "%60, %61, %62, %63"
                 "}, "
                 "%64, %65, p, 1, 1, 0, 0;\n\t}"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
                   "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]),
                   "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]),
                   "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]),
                   "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]),
                   "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),
                   "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
                   "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]),
                   "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]),
                   "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
                 : "l"(da), "l"(db), "r"(acc)
                 : "memory");
#endif
}

/* O (64 x 256 f32) = A (64 x 16 bf16, K-major at da) x B (16 x 256 bf16,
 * MN-major at db) + (acc ? O : 0). */
MLA_DEV void wg_ss_64x256(float (&d)[128], uint64_t da, uint64_t db, int acc)
{
#if MLA_IDX_EMU
    wg_emu_mma<256>(d, nullptr, da, db, true, acc);
#else
    asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %130, 0;\n\t"
                 "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, "
                 "%12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, "
                 "%24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, "
                 "%36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "
                 "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, "
                 "%60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, "
                 "%72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, "
                 "%84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "
                 "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, "
                 "%108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, "
                 "%120, %121, %122, %123, %124, %125, %126, %127}, "
                 "%128, %129, p, 1, 1, 0, 1;\n\t}"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]),
                   "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]),
                   "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]),
                   "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
                   "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]),
                   "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]),
                   "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]),
                   "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
                   "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]),
                   "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]),
                   "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]),
                   "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
                   "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]),
                   "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]),
                   "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]),
                   "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
                   "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]),
                   "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]),
                   "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
                   "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]),
                   "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]),
                   "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]),
                   "+f"(d[127])
                 : "l"(da), "l"(db), "r"(acc)
                 : "memory");
#endif
}
#endif

#if MLA_IDX_WGMMA
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
#endif

#endif
