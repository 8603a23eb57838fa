/* libmla: the MLA prepare path (MLA.md sections 2-4): model configs, RMSNorm,
 * RoPE with DeepSeek YaRN, projections, the W_kc absorb, the latent cache,
 * the fused RoPE + concat + cache write, and the RoPE-once plan.
 * Included by mla/mla.h; conventions are those of mla.h. */
#ifndef MLA_MLA_PREPARE_H
#define MLA_MLA_PREPARE_H

#ifndef MLA_MLA_H
#error "include mla/mla.h"
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------- model configs */

typedef enum mla_rope_style {
    MLA_ROPE_INTERLEAVED = 0, /* GPT-J: pairs (x[2i], x[2i+1]); MLA's q_pe / k_pe */
    MLA_ROPE_NEOX = 1,        /* pairs (x[i], x[i + R/2]); the V3.2 indexer's default */
    MLA_ROPE_STYLE_COUNT
} mla_rope_style;

MLA_API const char *mla_rope_style_name(mla_rope_style style);

typedef struct mla_rope_config {
    int32_t dim;              /* R, even */
    double base;              /* theta, e.g. 10000 */
    double factor;            /* YaRN scaling factor; YaRN is off when factor <= 1 */
    double beta_fast;         /* YaRN ramp ends (DeepSeek-V3: 32 and 1) */
    double beta_slow;
    int64_t original_max_pos; /* YaRN original context, e.g. 4096 */
    double mscale;            /* YaRN m(factor, mscale) / m(factor, mscale_all_dim) scales cos/sin */
    double mscale_all_dim;    /* also enters the softmax scale */
} mla_rope_config;

typedef struct mla_model_config {
    char name[32];
    int64_t hidden;
    int64_t heads;   /* H, query heads (per tensor-parallel rank), 1..128 */
    int64_t q_lora;  /* 0: no q compression (V2-Lite's q_proj) */
    int64_t kv_lora; /* L */
    int64_t nope;    /* qk_nope_head_dim */
    int64_t rope;    /* R, qk_rope_head_dim */
    int64_t v;       /* v_head_dim */
    float rms_eps;
    int64_t max_pos; /* rows of the cos/sin table */
    mla_rope_config rope_cfg;
    int64_t index_heads;    /* 0: no indexer */
    int64_t index_head_dim; /* 128 */
    int64_t index_topk;     /* 2048 */
} mla_model_config;

/* Names: "DeepSeek-V2-Lite", "DeepSeek-V3", "DeepSeek-V3.2", "Kimi-K2", and the
 * small test configs "test-tiny" (H=4, L=128, R=16, nope=v=32) and
 * "test-tiny-noq" (the same without q_lora, like V2-Lite). */
MLA_API mla_status mla_model_config_preset(const char *name, mla_model_config *out);
/* The i-th preset name, NULL past the end. */
MLA_API const char *mla_model_config_preset_name(int i);
/* (nope + R)^-0.5 * m^2, m = 0.1 * mscale_all_dim * ln(factor) + 1 under YaRN. */
MLA_API double mla_softmax_scale(const mla_model_config *cfg);

/* ------------------------------------------------------------------ RoPE */

/* Builds the cos and sin tables, each [max_pos, R/2] fp32 row-major, on the
 * host: every entry the correctly rounded fp32 of the exact formula (MLA.md
 * section 3), the same bits on every host. Every backend uses these bits.
 * INVALID_ARGUMENT: dim odd or <= 0, base not finite or <= 1, factor not
 * finite, max_pos < 0; with YaRN (factor > 1) also original_max_pos <= 0,
 * beta_fast or beta_slow not finite and > 0, mscale(_all_dim) not finite. */
MLA_API mla_status mla_rope_table_build(const mla_rope_config *cfg, int64_t max_pos, float *cos_out,
                                        float *sin_out);

/* y = rotate(x) by positions, once. x and y [T, H, R] or [T, R] (F32, BF16,
 * F16), any strides (q_pe inside q); y may be x (in place, same bits).
 * cos, sin [P, R/2] F32 from mla_rope_table_build; positions [T] I32 or I64,
 * each in [0, P). Arithmetic: out_a = a*c - b*s, out_b = a*s + b*c in fp32,
 * each product and the sum rounded (no FMA), one rounding to y's dtype.
 * Only the first R = 2 * cos.shape[1] dims of each row are rotated; the
 * others are copied. */
MLA_API mla_status mla_rope(mla_context *ctx, const mla_tensor *cos, const mla_tensor *sin,
                            const mla_tensor *positions, const mla_tensor *x, mla_tensor *y,
                            mla_rope_style style);

/* --------------------------------------------------------------- RMSNorm */

/* y = x * rsqrt(mean(x^2) + eps) * w, fp32 math, one rounding to y's dtype.
 * x, y [T, D] (F32, BF16, F16, any row stride); w [D] (F32, BF16, F16). */
MLA_API mla_status mla_rmsnorm(mla_context *ctx, const mla_tensor *x, const mla_tensor *w,
                               float eps, mla_tensor *y);

/* Both MLA norms in one call (MLA.md section 2, step 2): q_out = RMSNorm(q),
 * kv_out = RMSNorm(kv). q_out may be quantized in the same pass, selected by
 * its dtype: FP8_E4M3FN / FP8_E4M3FNUZ (group 128, MLA_FP8_SCALE_AITER,
 * q_scales F32 [T, Dq/128]) or FP4X2 (MXFP4 production rule, q_scales e8m0
 * [T, Dq/32] row-major); q_scales is NULL otherwise. */
MLA_API mla_status mla_fused_qk_rmsnorm(mla_context *ctx, const mla_tensor *q,
                                        const mla_tensor *q_w, float q_eps, const mla_tensor *kv,
                                        const mla_tensor *kv_w, float kv_eps, mla_tensor *q_out,
                                        mla_tensor *q_scales, mla_tensor *kv_out);

/* ----------------------------------------------------------- projections */

/* y [T, N] = x [T, K] @ W^T, fp32 accumulation, one rounding to y's dtype.
 * W [N, K]: BF16, or FP8_E4M3FN with w_scale [ceil(N/128), ceil(K/128)] F32
 * (DeepSeek checkpoint block scales: weight = code * scale); w_scale is NULL
 * for BF16. x: F32 or BF16; y: F32 or BF16. */
MLA_API mla_status mla_linear(mla_context *ctx, const mla_tensor *x, const mla_tensor *w,
                              const mla_tensor *w_scale, mla_tensor *y);

/* y[b] = x[b] @ W[b] * w_scale for b < B: x [B, M, K] (F32, BF16), W [B, K, N]
 * (BF16 or FP8_E4M3FN with the per-tensor w_scale; 1 for BF16), y [B, M, N]
 * (F32, BF16). All three through their strides, so q_nope [T, H, nope] is
 * passed as a [H, T, nope] view, W_kc as a view of kv_b_proj, and y as a
 * [H, T, L] view of a [T, H, L] buffer. */
MLA_API mla_status mla_batched_gemm(mla_context *ctx, const mla_tensor *x, const mla_tensor *w,
                                    float w_scale, mla_tensor *y);

/* ---------------------------------------------------------- latent cache */

typedef enum mla_cache_layout {
    MLA_CACHE_NORMAL = 0,     /* [blocks, block_size, L + R] */
    MLA_CACHE_SHUFFLED = 1,   /* aiter: nope then rope, 16-token x K tiles; block_size % 16 == 0 */
    MLA_CACHE_FP8_SCALED = 2, /* FlashMLA sparse: per token L fp8, L/128 fp32 scales, R bf16 */
    MLA_CACHE_LAYOUT_COUNT
} mla_cache_layout;

MLA_API const char *mla_cache_layout_name(mla_cache_layout layout);

typedef struct mla_cache_desc {
    mla_cache_layout layout;
    mla_dtype dtype;     /* BF16, FP8_E4M3FN or FP8_E4M3FNUZ (element type; FP8_SCALED: the fp8 flavour) */
    int64_t num_blocks;
    int64_t block_size;  /* >= 1 */
    int64_t kv_lora;     /* L */
    int64_t rope;        /* R */
    float k_scale;       /* per-tensor scale of NORMAL / SHUFFLED fp8: stored sat(x / k_scale) */
} mla_cache_desc;

/* Validates a descriptor; on success *block_bytes is the size of one block. */
MLA_API mla_status mla_cache_block_bytes(const mla_cache_desc *desc, int64_t *block_bytes);

/* Writes [k_nope | k_pe] of token t at slot slots[t] (slot = block *
 * block_size + offset; negative: skipped). cache: U8 [num_blocks,
 * block_bytes]. k_nope [T, L], k_pe [T, R] (F32, BF16, F16, any strides);
 * slots [T] I32 or I64, each < num_blocks * block_size. */
MLA_API mla_status mla_cache_write(mla_context *ctx, const mla_cache_desc *desc, mla_tensor *cache,
                                   const mla_tensor *k_nope, const mla_tensor *k_pe,
                                   const mla_tensor *slots);

/* Reads the rows of S sequences back as NORMAL rows: out [sum(seq_lens), L + R]
 * (F32 or BF16), sequence s's tokens in order after those of s - 1.
 * block_table [S, max_blocks] I32, seq_lens [S] I32 (each <= max_blocks *
 * block_size, block ids < num_blocks). fp8 values come back dequantized. */
MLA_API mla_status mla_cache_gather(mla_context *ctx, const mla_cache_desc *desc,
                                    const mla_tensor *cache, const mla_tensor *block_table,
                                    const mla_tensor *seq_lens, mla_tensor *out);

/* --------------------------------------- fused RoPE + concat + cache write */

typedef struct mla_rope_cache_args {
    const mla_tensor *cos, *sin; /* [P, R/2] F32 */
    mla_rope_style style;
    const mla_tensor *q_nope;    /* [T, H, L] absorbed q (F32, BF16) */
    const mla_tensor *q_pe;      /* [T, H, R] unrotated */
    const mla_tensor *q_pos;     /* [T] I32 / I64 */
    const mla_tensor *k_nope;    /* [Tk, L], Tk >= T: extra key tokens are rotated and written too */
    const mla_tensor *k_pe;      /* [Tk, R] unrotated */
    const mla_tensor *k_pos;     /* [Tk] */
    const mla_tensor *slots;     /* [Tk] */
    const mla_cache_desc *cache_desc;
    mla_tensor *cache;
    mla_tensor *q_cat;           /* [T, H, L + R]: BF16, or FP8 stored sat(x / q_scale) */
    float q_scale;
    mla_tensor *k_pe_out;        /* [Tk, R] rotated k_pe, or NULL */
} mla_rope_cache_args;

MLA_API mla_status mla_fused_rope_concat_cache(mla_context *ctx, const mla_rope_cache_args *args);

/* ---------------------------------------------------- the RoPE-once plan */

typedef enum mla_rope_site {
    MLA_ROPE_SITE_SEPARATE = 0,    /* mla_rope before the cache write */
    MLA_ROPE_SITE_FUSED_CACHE = 1, /* inside mla_fused_rope_concat_cache */
    MLA_ROPE_SITE_ATTENTION = 2,   /* inside the attention call */
    MLA_ROPE_SITE_COUNT
} mla_rope_site;

typedef enum mla_target {
    MLA_TARGET_CPU = 0,
    MLA_TARGET_GFX942 = 1,
    MLA_TARGET_GFX950 = 2,
    MLA_TARGET_SM90 = 3,
    MLA_TARGET_REFERENCE = 4,
    MLA_TARGET_COUNT
} mla_target;

typedef enum mla_stage {
    MLA_STAGE_QKV_A_PROJ = 0, /* x @ [W_qa; W_kva]^T (or W_q and W_kva) */
    MLA_STAGE_QK_NORM = 1,
    MLA_STAGE_Q_B_PROJ = 2,
    MLA_STAGE_ABSORB = 3, /* q_nope @ W_kc */
    MLA_STAGE_ROPE = 4,
    MLA_STAGE_CACHE_WRITE = 5,
    MLA_STAGE_ATTENTION = 6,
    MLA_STAGE_COUNT
} mla_stage;

MLA_API const char *mla_rope_site_name(mla_rope_site site);
MLA_API const char *mla_target_name(mla_target target);
MLA_API const char *mla_stage_name(mla_stage stage);
/* The target a context runs on (from its backend and device). */
MLA_API mla_target mla_context_target(const mla_context *ctx);

typedef struct mla_plan_options {
    mla_target target;
    mla_dtype weight_dtype;      /* BF16, FP8_E4M3FN, FP4X2 (MXFP4; the layer only) */
    mla_dtype q_dtype;           /* q_cat: BF16 or an fp8 flavour */
    mla_cache_layout cache_layout;
    mla_dtype cache_dtype;
    int32_t force_rope_site;     /* -1: the plan decides; else an mla_rope_site (tests) */
} mla_plan_options;

typedef struct mla_plan mla_plan;

/* Defaults for a target: bf16 weights and q, NORMAL bf16 cache, plan decides. */
MLA_API void mla_plan_options_default(mla_target target, mla_plan_options *out);
/* MLA_ERR_INVALID_ARGUMENT for a config out of its ranges; MLA_ERR_OVERFLOW
 * when the widths the stages derive from it (H (nope + R + v), H (L + R),
 * hidden + q_lora, Hi (head_dim + 4), each in 8-byte elements) pass int64. */
MLA_API mla_status mla_plan_create(const mla_model_config *cfg, const mla_plan_options *options,
                                   mla_plan **out);
MLA_API void mla_plan_destroy(mla_plan *plan);
/* The one place RoPE happens. */
MLA_API mla_rope_site mla_plan_rope_site(const mla_plan *plan);
/* What every stage asks: does RoPE happen at this site? */
MLA_API int mla_plan_rotates_at(const mla_plan *plan, mla_rope_site site);
/* The kernel variant a stage uses on the plan's target, e.g.
 * "fused_qk_rmsnorm/bf16". */
MLA_API const char *mla_plan_kernel(const mla_plan *plan, mla_stage stage);
MLA_API const mla_model_config *mla_plan_config(const mla_plan *plan);
MLA_API const mla_plan_options *mla_plan_options_get(const mla_plan *plan);

/* ------------------------------------------------------------ the prepare */

typedef struct mla_weight {
    mla_tensor w;     /* [out, in] */
    mla_tensor scale; /* fp8: [ceil(out/128), ceil(in/128)] F32; data NULL otherwise */
} mla_weight;

typedef struct mla_layer_weights {
    mla_weight q_a_proj;           /* [q_lora, hidden]; unused without q_lora */
    mla_tensor q_a_layernorm;      /* [q_lora] */
    mla_weight q_b_proj;           /* [H*(nope+R), q_lora], or q_proj [H*(nope+R), hidden] */
    mla_weight kv_a_proj_with_mqa; /* [L+R, hidden] */
    mla_tensor kv_a_layernorm;     /* [L] */
    mla_weight kv_b_proj;          /* [H*(nope+v), L] */
    mla_weight o_proj;             /* [hidden, H*v] */
} mla_layer_weights;

/* Bytes of scratch mla_prepare needs for T tokens whose activations (x) have
 * dtype act (F32 or BF16): the intermediates are kept in that dtype.
 * MLA_ERR_SHAPE for T < 0, MLA_ERR_DTYPE for another act, MLA_ERR_OVERFLOW
 * for T > 2^40 or bytes past int64. */
MLA_API mla_status mla_prepare_workspace_bytes(const mla_plan *plan, int64_t T, mla_dtype act,
                                               int64_t *bytes);

/* MLA.md section 2, steps 1-6: x [T, hidden] -> q_cat [T, H, L + R] and the
 * rows [k_nope | k_pe] of every token written to the cache at slots[t], with
 * RoPE applied exactly once at the plan's site (when the site is ATTENTION,
 * q_cat's rope part and the cached k_pe are left unrotated for the attention
 * call to rotate). workspace: U8 [>= mla_prepare_workspace_bytes] in context
 * memory, its bytes contiguous. Everything is checked before the first
 * stage writes, so a refused call leaves q_cat, the cache and the workspace
 * as they were: the arguments, every stage's own checks, the index values
 * (positions < cos rows, slots < the cache's capacity and none listed twice:
 * MLA_ERR_INVALID_ARGUMENT "slots"), and that no output (q_cat, cache,
 * workspace) overlaps an input (x, positions, slots, cos, sin, a weight) or
 * another output (MLA_ERR_ALIAS). */
MLA_API mla_status mla_prepare(mla_context *ctx, const mla_plan *plan,
                               const mla_layer_weights *weights, const mla_tensor *x,
                               const mla_tensor *positions, const mla_tensor *slots,
                               const mla_tensor *cos, const mla_tensor *sin,
                               const mla_cache_desc *cache_desc, mla_tensor *cache,
                               mla_tensor *q_cat, mla_tensor *workspace);

#ifdef __cplusplus
}
#endif

#endif /* MLA_MLA_PREPARE_H */
