/* CPU backend internals: the op kernels, instruction-set dispatch, threads.
 *
 * Multiversioning. Each op keeps its hot loop in one always-inlined "body"
 * function written in plain C (the bit logic of core/format_bits.h, no
 * intrinsics) and wraps it three times: with MLA_TARGET_AVX512, with
 * MLA_TARGET_AVX2 and without a target attribute. The compiler vectorizes each
 * copy for its ISA; mla_cpu_isa_of() picks one per call (mla_cpu_features,
 * capped by the context's tuning). This is target_clones by hand: gcc 12 does not give its
 * target_clones copies 512-bit vectors, an explicit target attribute with
 * prefer-vector-width=512 does. Non-x86 builds get the portable copy only. */
#ifndef MLA_CPU_CPU_KERNELS_H
#define MLA_CPU_CPU_KERNELS_H

#include "core/backend.h"

#include <stdint.h>

/* MLA_CPU_PORTABLE_ONLY (the fuzz and tsan presets) keeps only the portable
 * copy: the same C bodies, a third of the code to instrument (sanitizers make
 * clang's compile of the x86 copies and intrinsic kernels ~10x slower). */
#if (defined(__x86_64__) || defined(__i386__)) && defined(__GNUC__) &&                             \
    !defined(MLA_CPU_PORTABLE_ONLY)
#define MLA_CPU_X86 1
#define MLA_AVX512_ISAS "avx512f,avx512bw,avx512dq,avx512vl,avx512cd"
#if defined(__clang__) /* clang already uses 512-bit vectors for these */
#define MLA_TARGET_AVX512 __attribute__((target(MLA_AVX512_ISAS)))
#else
#define MLA_TARGET_AVX512 __attribute__((target(MLA_AVX512_ISAS ",prefer-vector-width=512")))
#endif
#define MLA_TARGET_AVX2 __attribute__((target("avx2")))
#else
#define MLA_CPU_X86 0
#endif

#if defined(__GNUC__)
#define MLA_CPU_INLINE static inline __attribute__((always_inline))
#else
#define MLA_CPU_INLINE static inline
#endif

/* `#pragma omp simd` where OpenMP (or its simd subset, -fopenmp-simd) is on:
 * the loops it marks have no loop-carried dependences. */
#if defined(MLA_HAVE_OPENMP) || defined(MLA_HAVE_OPENMP_SIMD)
#define MLA_PRAGMA(text) _Pragma(#text)
#define MLA_SIMD _Pragma("omp simd")
#define MLA_SIMD_MAX(var) MLA_PRAGMA(omp simd reduction(max : var))
#else
#define MLA_SIMD
#define MLA_SIMD_MAX(var)
#endif

/* Values a kernel converts through its on-stack fp32 buffer at a time. */
#define MLA_CPU_CHUNK 512

typedef enum mla_cpu_isa {
    MLA_CPU_ISA_GENERIC = 0, /* whatever the baseline compiler flags give */
    MLA_CPU_ISA_AVX2 = 1,
    MLA_CPU_ISA_AVX512 = 2, /* AVX-512 F/BW/DQ/VL/CD (x86-64-v4) */
    MLA_CPU_ISA_COUNT
} mla_cpu_isa;

/* The copy of kernel `name` for isa: name##_avx512, name##_avx2 or
 * name##_generic (the x86 copies exist only where MLA_CPU_X86). */
#if MLA_CPU_X86
#define MLA_CPU_PICK(isa, name)                                                                    \
    ((isa) == MLA_CPU_ISA_AVX512 ? name##_avx512                                                   \
     : (isa) == MLA_CPU_ISA_AVX2 ? name##_avx2                                                     \
                                 : name##_generic)
#else
#define MLA_CPU_PICK(isa, name) ((void)(isa), name##_generic)
#endif

/* The CPU's x86 features (cpu/cpu_features.c: cpuid + xgetbv, so that gcc
 * and clang build the same detection); 0 apart from KNOWN off x86. */
enum {
    MLA_CPU_HAS_AVX2 = 1u << 0,
    MLA_CPU_HAS_AVX512 = 1u << 1, /* F, BW, DQ, VL, CD */
    MLA_CPU_HAS_AVX512_BF16 = 1u << 2,
    MLA_CPU_HAS_AMX_BF16 = 1u << 3, /* AMX-BF16 and AMX-TILE */
    MLA_CPU_HAS_FMA = 1u << 4,
    MLA_CPU_FEATURES_KNOWN = 1u << 31
};
unsigned mla_cpu_features(void);
/* The AVX512-BF16 (vdpbf16ps) copies of the GEMM-like kernels: where the CPU
 * has AVX512_BF16 and no AMX-BF16, unless the context's tuning.cpu_isa is
 * avx512-nobf16 (so tests can run both paths on one machine). */
int mla_cpu_has_bf16(const mla_context *ctx);

/* The ISA the context's kernels use: the best this CPU has, capped by the
 * context's tuning.cpu_isa (MLA_CPU_ISA; docs/TUNING.md), so that tests can
 * run every copy on one machine. */
mla_cpu_isa mla_cpu_isa_of(const mla_context *ctx);
const char *mla_cpu_isa_name(mla_cpu_isa isa);

/* OpenMP threads for `tasks` independent tasks covering `values` values:
 * at most ctx->num_threads, one per task, and about one per 32K values so
 * that small calls do not pay for a thread team. Results never depend on it. */
int mla_cpu_threads(const mla_context *ctx, int64_t tasks, int64_t values);

/* task(arg, k, buf) for every k < tasks on nt threads (dynamic schedule),
 * buf the calling thread's `per` floats of scratch (allocated here: what
 * names it in the error). */
mla_status mla_cpu_run_tasks(mla_context *ctx, int nt, int64_t tasks, int64_t per,
                             const char *what, void (*task)(const void *arg, int64_t k, float *buf),
                             const void *arg);

/* Memory-bound ops moving fewer bytes than this (read + written) run on one
 * thread: a thread team costs more than it saves there, and on a busy host a
 * descheduled second thread holds the barrier for a scheduler tick (ms). */
#define MLA_CPU_ONE_THREAD_BYTES (1ll << 20)

mla_status mla_cpu_convert(mla_context *ctx, const mla_convert_args *a);
mla_status mla_cpu_mxfp4_quant(mla_context *ctx, const mla_mxfp4_quant_args *a);
mla_status mla_cpu_mxfp4_dequant(mla_context *ctx, const mla_mxfp4_dequant_args *a);
mla_status mla_cpu_fp8_group_quant(mla_context *ctx, const mla_fp8_group_quant_args *a);
mla_status mla_cpu_fp8_group_dequant(mla_context *ctx, const mla_fp8_group_dequant_args *a);

/* Prepare path (one file each: rmsnorm.c holds both norms). */
mla_status mla_cpu_rmsnorm(mla_context *ctx, const mla_rmsnorm_args *a);
mla_status mla_cpu_qk_rmsnorm(mla_context *ctx, const mla_qk_rmsnorm_args *a);
mla_status mla_cpu_rope(mla_context *ctx, const mla_rope_args *a);
mla_status mla_cpu_linear(mla_context *ctx, const mla_linear_args *a);
mla_status mla_cpu_batched_gemm(mla_context *ctx, const mla_batched_gemm_args *a);
mla_status mla_cpu_cache_write(mla_context *ctx, const mla_cache_write_args *a);
mla_status mla_cpu_cache_gather(mla_context *ctx, const mla_cache_gather_args *a);
mla_status mla_cpu_rope_cache(mla_context *ctx, const mla_rope_cache_op_args *a);

/* The rotation of rope.c, for the fused rope_cache: out[0, 2*half) = the
 * pairs of in[0, 2*half) rotated by (cos[i], sin[i]) (fp32, no FMA; MLA.md
 * section 3). in and out do not overlap. */
typedef void (*mla_cpu_rotate_fn)(const float *in, const float *cos, const float *sin,
                                  int64_t half, mla_rope_style style, float *out);
mla_cpu_rotate_fn mla_cpu_pick_rotate(mla_cpu_isa isa);

/* The cache writer of cache_write.c, for the fused rope_cache: stores the
 * fp32 row [k_nope (L) | k_pe (R)] at slot >= 0 in desc's layout. scratch
 * holds at least 2 * (L + R) bytes. */
typedef void (*mla_cpu_cache_row_fn)(const mla_cache_desc *desc, const mla_tensor *cache,
                                     int64_t slot, const float *row, uint8_t *scratch);
mla_cpu_cache_row_fn mla_cpu_pick_cache_row(mla_cpu_isa isa);

/* MXFP4 GEMM path: mxfp4_gemm.c (both GEMMs), flatten_quant.c (both flattens). */
mla_status mla_cpu_gemm_a16wfp4(mla_context *ctx, const mla_mxfp4_gemm_args *a);
mla_status mla_cpu_gemm_a4w4(mla_context *ctx, const mla_mxfp4_gemm_args *a);
mla_status mla_cpu_flatten_mxfp4_quant(mla_context *ctx, const mla_flatten_quant_args *a);
mla_status mla_cpu_flatten_fp8_quant(mla_context *ctx, const mla_flatten_quant_args *a);

/* DSA indexer (one file each; indexer_cache.c holds the writer and the gather). */
mla_status mla_cpu_layernorm(mla_context *ctx, const mla_layernorm_args *a);
mla_status mla_cpu_hadamard(mla_context *ctx, const mla_hadamard_args *a);
mla_status mla_cpu_indexer_k_cache_write(mla_context *ctx, const mla_indexer_cache_args *a);
mla_status mla_cpu_indexer_k_gather(mla_context *ctx, const mla_indexer_cache_args *a);
mla_status mla_cpu_indexer_logits(mla_context *ctx, const mla_indexer_logits_args *a);
mla_status mla_cpu_topk(mla_context *ctx, const mla_topk_args *a);
mla_status mla_cpu_indexer_head_weights(mla_context *ctx, const mla_head_weights_args *a);

/* Attention core (cpu/attention.c): the slot (scratch from the plan's
 * kernel_scratch region), and the kernel with each thread's scratch at
 * scratch + thread * mla_cpu_attention_scratch_bytes(L, R). */
struct mla_attention_op_args;
mla_status mla_cpu_attention(mla_context *ctx, const struct mla_attention_op_args *a);
mla_status mla_cpu_attention_with_scratch(mla_context *ctx, const struct mla_attention_op_args *a,
                                          void *scratch);
int64_t mla_cpu_attention_scratch_bytes(int64_t L, int64_t R);
/* The backend's attention_scratch slot: ctx->num_threads of those. */
int64_t mla_cpu_attention_scratch(const mla_context *ctx, const mla_attention_desc *d);

/* Expanded attention (cpu/attention_expanded.c): the slot, and each thread's
 * tiles (the workspace's tiles region holds ctx->num_threads of them). */
struct mla_attention_expanded_op_args;
mla_status mla_cpu_attention_expanded(mla_context *ctx,
                                      const struct mla_attention_expanded_op_args *a);
int64_t mla_cpu_expanded_tile_bytes(int64_t nope, int64_t R, int64_t v, int64_t L);

#endif
