/* x86 instruction-set features from cpuid and xgetbv, the one detection every
 * CPU kernel asks (gcc's and clang's __builtin_cpu_supports do not accept the
 * same feature names: clang 14 rejects "amx-bf16"). A feature counts only when
 * the OS also saves its registers (XCR0), as the builtins require. */
#include "core/backend.h"
#include "cpu/cpu_kernels.h"

#if MLA_CPU_X86
#include <cpuid.h>

static uint64_t xcr0(void)
{
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((uint64_t)hi << 32) | lo;
}

static unsigned detect(void)
{
    unsigned a, b, c, d, max_leaf = __get_cpuid_max(0, NULL);
    if (max_leaf < 7 || !__get_cpuid(1, &a, &b, &c, &d) || !(c & bit_OSXSAVE))
        return 0;
    const uint64_t x = xcr0();
    const int ymm = (x & 0x6) == 0x6, zmm = ymm && (x & 0xe0) == 0xe0;
    const int tiles = (x & 0x60000) == 0x60000; /* XTILECFG, XTILEDATA */
    unsigned f = 0;
    if (ymm && (c & bit_FMA))
        f |= MLA_CPU_HAS_FMA;
    __cpuid_count(7, 0, a, b, c, d);
    const unsigned leaf7_max = a;
    if (ymm && (b & bit_AVX2))
        f |= MLA_CPU_HAS_AVX2;
    const unsigned avx512 = bit_AVX512F | bit_AVX512BW | bit_AVX512DQ | bit_AVX512VL | bit_AVX512CD;
    if (zmm && (b & avx512) == avx512)
        f |= MLA_CPU_HAS_AVX512;
    if (tiles && (d & (1u << 22)) && (d & (1u << 24))) /* AMX-BF16, AMX-TILE */
        f |= MLA_CPU_HAS_AMX_BF16;
    if (leaf7_max >= 1 && (f & MLA_CPU_HAS_AVX512)) {
        __cpuid_count(7, 1, a, b, c, d);
        if (a & (1u << 5)) /* AVX512_BF16 */
            f |= MLA_CPU_HAS_AVX512_BF16;
    }
    return f;
}
#else
static unsigned detect(void)
{
    return 0;
}
#endif

unsigned mla_cpu_features(void)
{
    /* cpuid answers the same on every call: racing first calls store the
     * same value, and the atomic makes that well defined. */
    static _Atomic unsigned cached = 0;
    unsigned f = cached;
    if (!f) {
        f = detect() | MLA_CPU_FEATURES_KNOWN;
        cached = f;
    }
    return f;
}

int mla_cpu_has_bf16(const mla_context *ctx)
{
    /* Cores with AMX-BF16 (Sapphire Rapids) run 512-bit FMAs on two ports and
     * vdpbf16ps on one: there the FMA kernels measured faster (one core,
     * q_a_proj T = 128: 76 vs 57 GFLOP/s; Zen 4, no AMX: 95 vs 135). */
    return (mla_cpu_features() & (MLA_CPU_HAS_AVX512_BF16 | MLA_CPU_HAS_AMX_BF16)) ==
               MLA_CPU_HAS_AVX512_BF16 &&
           ctx->tuning.cpu_isa != MLA_TUNE_CPU_ISA_AVX512_NOBF16;
}
