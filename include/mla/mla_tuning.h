/* libmla: tuning, the kernel-path choices of the backends (docs/TUNING.md).
 *
 * Each field picks between kernel paths that compute the same op: a path
 * changes speed, and the bits only within the op's documented bound (the
 * conformance runner checks every path: mla conformance --tuning). Zero is
 * "auto" in every field: the path the backend picks for the call's shapes
 * and device. A backend ignores the fields of the others.
 *
 * A context starts with the defaults overridden by the environment
 * variables named below (mla_tuning_from_env), read once, when it is
 * created; mla_context_set_tuning replaces them for the calls that follow.
 * No kernel reads the environment.
 *
 * Versioned: a caller sets struct_size and version (mla_tuning_init does),
 * and a library newer than the caller's header reads only the fields that
 * header had (the rest stay auto). Fields are only added at the end. */
#ifndef MLA_MLA_TUNING_H
#define MLA_MLA_TUNING_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MLA_TUNING_VERSION 1

/* cpu_isa (MLA_CPU_ISA): the highest instruction set the CPU kernels use;
 * never above what the CPU has. */
typedef enum mla_tune_cpu_isa {
    MLA_TUNE_CPU_ISA_AUTO = 0,          /* the best the CPU runs */
    MLA_TUNE_CPU_ISA_GENERIC = 1,       /* "generic": portable C */
    MLA_TUNE_CPU_ISA_AVX2 = 2,          /* "avx2" */
    MLA_TUNE_CPU_ISA_AVX512 = 3,        /* "avx512": AVX-512 with its bf16 paths, as auto */
    MLA_TUNE_CPU_ISA_AVX512_NOBF16 = 4, /* "avx512-nobf16": no vdpbf16ps and no AMX anywhere */
    MLA_TUNE_CPU_ISA_AVX512_NOAMX = 5,  /* "avx512-noamx": attention on vdpbf16ps, not AMX */
    MLA_TUNE_CPU_ISA_COUNT
} mla_tune_cpu_isa;

/* hip_attention (MLA_HIP_ATTENTION): the attention body. */
typedef enum mla_tune_hip_attention {
    MLA_TUNE_HIP_ATTENTION_AUTO = 0,
    MLA_TUNE_HIP_ATTENTION_FMA = 1,     /* "fma": the portable FMA body on every device */
    MLA_TUNE_HIP_ATTENTION_MMA = 2,     /* "mma": NVIDIA: mma.sync where sm_90a's wgmma would run */
    MLA_TUNE_HIP_ATTENTION_CPASYNC = 3, /* "cpasync": mma.sync, keys by per-chunk cp.async */
    MLA_TUNE_HIP_ATTENTION_WGMMA = 4,   /* "wgmma": NVIDIA: sm_90a's wgmma body wherever it can
                                           run (auto: only where a sequence has >= 64 rows) */
    MLA_TUNE_HIP_ATTENTION_MFMA = 5,    /* "mfma": gfx9: the synchronous MFMA body where the
                                           pipelined one would run */
    MLA_TUNE_HIP_ATTENTION_MFMA942 = 6, /* "mfma942": gfx9: the pipelined body's gfx942
                                           geometry (also on gfx950) */
    MLA_TUNE_HIP_ATTENTION_MFMA950 = 7, /* "mfma950": its gfx950 geometry (a gfx950 device or
                                           the CPU emulation) */
    MLA_TUNE_HIP_ATTENTION_COUNT
} mla_tune_hip_attention;

/* hip_logits (MLA_HIP_LOGITS): the indexer logits body. */
typedef enum mla_tune_hip_logits {
    MLA_TUNE_HIP_LOGITS_AUTO = 0,
    MLA_TUNE_HIP_LOGITS_MMA = 1,     /* "mma": NVIDIA: mma.sync where sm_90a's wgmma would run */
    MLA_TUNE_HIP_LOGITS_GENERIC = 2, /* "generic": the plain body, no matrix instructions */
    MLA_TUNE_HIP_LOGITS_COUNT
} mla_tune_hip_logits;

/* hip_topk_pdl (MLA_HIP_TOPK_PDL): whether the search's top-k starts as a
 * programmatic dependent launch of its logits (sm_90). */
typedef enum mla_tune_switch {
    MLA_TUNE_ON = 0,  /* "on" (MLA_HIP_TOPK_PDL=1): where the device has it */
    MLA_TUNE_OFF = 1, /* "off" (MLA_HIP_TOPK_PDL=0) */
    MLA_TUNE_SWITCH_COUNT
} mla_tune_switch;

/* hip_gemm (MLA_HIP_GEMM): the dense GEMM path (linear, batched GEMM). */
typedef enum mla_tune_hip_gemm {
    MLA_TUNE_HIP_GEMM_AUTO = 0,
    MLA_TUNE_HIP_GEMM_FMA = 1,  /* "fma": the FMA kernel for every GEMM */
    MLA_TUNE_HIP_GEMM_TILE = 2, /* "tile": the matrix tiles for every M (no small-M path) */
    MLA_TUNE_HIP_GEMM_MMA = 3,  /* "mma": the mma.sync tiles where the sm_90a wgmma body would run */
    MLA_TUNE_HIP_GEMM_COUNT
} mla_tune_hip_gemm;

/* hip_mxfp4 (MLA_HIP_MXFP4): the MXFP4 GEMM path. */
typedef enum mla_tune_hip_mxfp4 {
    MLA_TUNE_HIP_MXFP4_AUTO = 0, /* the target's matrix path */
    MLA_TUNE_HIP_MXFP4_FMA = 1,  /* "fma": FMA on decoded values */
    MLA_TUNE_HIP_MXFP4_F4 = 2,   /* "f4": the wave64 CPU emulation (hip/emu) runs gfx950's
                                  * scaled fp4 bodies, not gfx942's */
    MLA_TUNE_HIP_MXFP4_COUNT
} mla_tune_hip_mxfp4;

typedef struct mla_tuning {
    uint32_t struct_size;       /* sizeof(mla_tuning) of the caller's header */
    uint32_t version;           /* MLA_TUNING_VERSION of the caller's header */
    int32_t cpu_isa;            /* mla_tune_cpu_isa */
    int32_t hip_attention;      /* mla_tune_hip_attention */
    int32_t hip_att_row_groups; /* MLA_HIP_ATT_RG: NVIDIA attention's row groups, 1, 2 or 4 (bf16
                                 * and fp8 q; 0 auto) */
    int32_t hip_logits;         /* mla_tune_hip_logits */
    int32_t hip_logits_stages;  /* MLA_HIP_LOGITS_STAGES: NVIDIA logits' key stages, 2, 3 or 4
                                 * (as many as fit; 0 auto) */
    int32_t hip_topk_blocks;    /* MLA_HIP_TOPK_G: at most this many blocks per top-k row (0: no
                                 * cap) */
    int32_t hip_topk_pdl;       /* mla_tune_switch */
    int32_t hip_gemm;           /* mla_tune_hip_gemm */
    int32_t hip_gemm_splits;    /* MLA_HIP_GEMM_SPLITS: the tile path's K splits of every launch,
                                 * 1 to 64 (0: the rule of hip/gemm.hip) */
    int32_t hip_mxfp4;          /* mla_tune_hip_mxfp4 */
} mla_tuning;

/* Every field auto, struct_size and version of this header. */
MLA_API void mla_tuning_init(mla_tuning *t);
/* Sets the fields whose environment variable is set. A value that is not
 * one of the knob's leaves its field as it was: the call then returns
 * MLA_ERR_INVALID_ARGUMENT and, when ignored is not NULL, sets *ignored to
 * the first such variable's name (NULL when none). */
MLA_API mla_status mla_tuning_from_env(mla_tuning *t, const char **ignored);
/* Sets one field by its key (the field's name, e.g. "hip_attention") to a
 * value as the environment variable spells it ("mma", "4", "auto"). */
MLA_API mla_status mla_tuning_set(mla_tuning *t, const char *key, const char *value);
/* "key=value" pairs separated by spaces: every knob (all != 0) or only those
 * not at their default. Returns the length of the whole text (snprintf's
 * convention; written truncated to len). */
MLA_API int mla_tuning_format(const mla_tuning *t, int all, char *buf, size_t len);
/* Knob i (0, 1, ...): its key, and (each may be NULL) its environment
 * variable and its values ('|'-separated, the default first; "auto|1..64"
 * for a range). NULL past the last knob. A key starts with the name of the
 * backend that reads it ("cpu_", "hip_"). */
MLA_API const char *mla_tuning_knob(int i, const char **env, const char **values);
/* Replaces the context's tuning (every field: start from
 * mla_context_get_tuning or mla_tuning_init) for the calls that follow; an
 * attention plan made before keeps its workspace. A field out of range, or
 * a struct_size / version this library does not know, is refused
 * (MLA_ERR_INVALID_ARGUMENT, the field named) and changes nothing. */
MLA_API mla_status mla_context_set_tuning(mla_context *ctx, const mla_tuning *t);
/* The context's tuning, as far as out->struct_size reaches (set it, e.g.
 * with mla_tuning_init, before the call). */
MLA_API mla_status mla_context_get_tuning(const mla_context *ctx, mla_tuning *out);

#ifdef __cplusplus
}
#endif

#endif
