/* The named parameters of every op's conformance cases: one struct per op
 * family, the union of them in conf_case. Each suite lists its struct's
 * fields (conf_field, in its cases_*.c) so that a case prints as a
 * self-contained description (REPRO, --list) and parses back (--repro).
 *
 * Conventions: dtypes are mla_dtype (MLA_DTYPE_COUNT = the optional tensor
 * is absent); *_lay are CONF_L_* layout flags of that argument; enum-valued
 * parameters are int32_t; in_place and other switches are 0 / 1; dist is
 * the CONF_DIST_* of the main input. */
#ifndef MLA_CONFORMANCE_CASE_PARAMS_H
#define MLA_CONFORMANCE_CASE_PARAMS_H

#include <stdint.h>

#include "mla/mla.h"

/* A logical shape of rank 1..3 (printed "7x66"). */
typedef struct conf_shape {
    int32_t ndim;
    int64_t d[3];
} conf_shape;

typedef struct conf_p_convert {
    mla_dtype x, y;
    int32_t mode;     /* mla_saturation */
    conf_shape shape; /* the value shape (the unpacked side of fp4) */
    unsigned x_lay, y_lay;
    int32_t in_place; /* y is x's memory (same element size) */
    int32_t dist;
} conf_p_convert;

/* mxfp4_quant (x -> codes, scales) and mxfp4_dequant (codes, scales -> y). */
typedef struct conf_p_mxfp4 {
    mla_dtype x; /* the float side: quant's x, dequant's y */
    mla_dtype codes, scales;
    int32_t layout; /* mla_scale_layout */
    int32_t rule;   /* mla_mxfp4_rule (quant) */
    int64_t M, K;
    unsigned x_lay, codes_lay, scales_lay;
    int32_t dist;
} conf_p_mxfp4;

/* fp8_group_quant (x -> codes, scales) and fp8_group_dequant. */
typedef struct conf_p_fp8_group {
    mla_dtype x;   /* the float side */
    mla_dtype fp8; /* the codes' flavour */
    int32_t rule;  /* mla_fp8_scale_rule (quant) */
    int64_t M, K, group;
    unsigned x_lay, codes_lay, scales_lay;
    int32_t dist;
} conf_p_fp8_group;

typedef struct conf_p_rmsnorm {
    mla_dtype x, w, y;
    int64_t T, D;
    unsigned x_lay, w_lay, y_lay;
    int32_t in_place; /* y is x's memory */
    double eps;
    int32_t dist;
} conf_p_rmsnorm;

typedef struct conf_p_qk_rmsnorm {
    mla_dtype q, q_w, kv, kv_w, q_out, q_scales, kv_out; /* q_scales: none unless q_out quantized */
    int64_t T, Dq, Dkv;
    unsigned q_lay, kv_lay, q_out_lay, kv_out_lay, q_scales_lay;
    int32_t q_in_place, kv_in_place; /* q_out over q, kv_out over kv */
    double q_eps, kv_eps;
    int32_t dist;
} conf_p_qk_rmsnorm;

typedef struct conf_p_rope {
    int32_t style; /* mla_rope_style */
    int32_t table; /* cases_rope.c's YaRN settings */
    int64_t R;     /* rope dims */
    mla_dtype x, y, positions;
    int64_t T, H, D;   /* H 0: [T, D] rows, else [T, H, D] */
    int64_t P;         /* table rows */
    int32_t in_place;  /* y is x's memory */
    int32_t q_pe_view; /* x a q_pe view inside q, y inside q_cat */
    unsigned x_lay, y_lay, positions_lay;
    int32_t dist;
} conf_p_rope;

/* linear (x [T, K] @ w [N, K]^T) and batched_gemm (x [B, M, K] @ w [B, K, N]). */
typedef struct conf_p_gemm {
    mla_dtype x, w, y;
    int64_t B, M, K, N;
    unsigned x_lay, w_lay, y_lay, w_scale_lay;
    int32_t view;   /* batched: 0 plain, 1 the W_kc absorb's views, 2 W_vc's */
    double w_scale; /* batched: the per-tensor scale */
    int32_t dist;
} conf_p_gemm;

/* cache_write and cache_gather. */
typedef struct conf_p_cache {
    int32_t layout;  /* mla_cache_layout */
    mla_dtype dtype; /* the cache's elements */
    int64_t block_size, blocks, L, R;
    double k_scale;
    int64_t T;                     /* write: tokens */
    mla_dtype k_nope, k_pe, slots; /* write */
    mla_dtype out;                 /* gather */
    int32_t kv_view;               /* write: k_nope and k_pe views of one [T, L + R] buffer */
    unsigned cache_lay, k_nope_lay, k_pe_lay, slots_lay, out_lay;
    int32_t dist;
} conf_p_cache;

typedef struct conf_p_rope_cache {
    int32_t layout;  /* mla_cache_layout */
    mla_dtype dtype; /* the cache's elements */
    int64_t block_size, blocks;
    int32_t style;
    int64_t T, Tk, H, L, R;
    mla_dtype q_nope, q_pe, k_nope, k_pe, k_pe_out, q_cat; /* k_pe_out none: not asked */
    mla_dtype q_pos, k_pos, slots;
    double k_scale, q_scale;
    int32_t q_nope_in_place; /* q_nope is q_cat's own first L dims */
    int32_t q_pe_view;       /* q_pe inside q [T, H, nope + R] */
    int32_t kv_view;         /* k_nope, k_pe inside kv [Tk, L + R] */
    unsigned q_nope_lay, q_pe_lay, k_nope_lay, k_pe_lay, q_cat_lay, k_pe_out_lay;
    unsigned cache_lay; /* CONF_L_PAD: a padded block stride */
    unsigned q_pos_lay, k_pos_lay, slots_lay;
    int32_t dist;
} conf_p_rope_cache;

/* gemm_a16wfp4 and gemm_a4w4. */
typedef struct conf_p_mxfp4_gemm {
    int64_t B, M, K, N;
    mla_dtype x, y;             /* a16wfp4's activations (a4w4: x.codes'); y */
    mla_dtype x_scales;         /* a4w4 */
    mla_dtype codes, scales;    /* w's */
    int32_t prequant, rule;     /* a16wfp4 */
    int32_t w_layout, x_layout; /* mla_scale_layout of w's scales, a4w4: x's */
    int32_t view;               /* 0 plain, 1 the W_kc absorb's views, 2 W_vc's */
    unsigned x_lay, x_scales_lay, codes_lay, scales_lay, y_lay;
    int32_t dist;
} conf_p_mxfp4_gemm;

/* flatten_mxfp4_quant and flatten_fp8_quant: x [T, H, v]. */
typedef struct conf_p_flatten {
    int64_t T, H, v;
    int32_t x_view; /* x is the [H, T, v] buffer seen as [T, H, v] */
    mla_dtype x, codes, scales;
    int32_t rule; /* mxfp4 rule */
    unsigned x_lay, codes_lay, scales_lay;
    int32_t dist;
} conf_p_flatten;

typedef struct conf_p_layernorm {
    mla_dtype x, y;
    int64_t T, D;
    unsigned x_lay, y_lay, w_lay, b_lay;
    int32_t in_place;
    int32_t shift; /* rows' mean = shift x their rms */
    double eps;
    int32_t dist;
} conf_p_layernorm;

typedef struct conf_p_hadamard {
    mla_dtype x, y;
    conf_shape shape; /* [T, D] or [T, H, D] */
    unsigned x_lay, y_lay;
    int32_t in_place;
    int32_t dist;
} conf_p_hadamard;

typedef struct conf_p_head_weights {
    mla_dtype w;
    int64_t T, Hi;
    unsigned w_lay, s_q_lay, w_out_lay;
    int32_t in_place; /* 1: w_out over w, 2: over s_q */
    int32_t pow2;     /* s_q powers of two (q's ue8m0 scales) */
    int32_t dist;
} conf_p_head_weights;

/* The DSA indexer's cache-based suites (cases_indexer*.c): the cache and
 * what each op adds (unused fields stay 0 and are not listed). */
typedef struct conf_p_indexer {
    int32_t layout; /* the mla_indexer_layout the caller asks for */
    mla_dtype fp8;
    int64_t block_size, blocks;
    int32_t ue8m0;
    unsigned cache_lay; /* CONF_L_PAD: a padded block stride */
    int64_t T;          /* rows written */
    mla_dtype k, slots, positions;
    int32_t style;                                  /* rope_k_cache */
    int32_t next_n;                                 /* logits */
    int64_t Hi;                                     /* logits */
    int64_t k_top;                                  /* search: k */
    unsigned k_lay, slots_lay, out_lay, scale_lay;  /* write: k; gather: k_fp8, k_scale */
    unsigned q_lay, w_lay, logits_lay, indices_lay; /* logits, search */
    int32_t dist;
} conf_p_indexer;

typedef struct conf_p_topk {
    int64_t R, N, k;
    int32_t values; /* cases_indexer_logits.c's value kinds */
    unsigned logits_lay, lengths_lay, indices_lay;
} conf_p_topk;

typedef struct conf_p_attention {
    int32_t layout;     /* mla_cache_layout */
    mla_dtype dtype;    /* the cache's elements */
    int64_t block_size; /* contiguous: the per-sequence capacity */
    int64_t L, H;       /* R = L / 8 */
    int32_t kind;       /* decode, sparse, prefill, prefill sparse */
    int32_t next_n, splits;
    int32_t sinks, contiguous, rope, no_lse, long_ctx;
    mla_dtype q, o;
    double k_scale, q_scale;
    unsigned q_lay, o_lay, lse_lay, topk_lay, cache_lay;
    int32_t style;                               /* rope inside attention */
    mla_dtype k_nope, k_pe, q_pos, k_pos, slots; /* rope inside attention */
} conf_p_attention;

/* The expanded attention (cases_attention_expanded.c); R = L / 8, nope = v
 * = 128 for L 512, else 32, unless set. */
typedef struct conf_p_attention_expanded {
    int32_t layout;     /* mla_cache_layout */
    mla_dtype dtype;    /* the cache's elements */
    int64_t block_size; /* contiguous: the per-sequence capacity */
    int64_t L, H;
    int32_t geo;    /* the rows: chunks, next_n rows each, a long chunk, a short context */
    int32_t next_n; /* rows per sequence without cu_q_lens */
    mla_dtype w;    /* kv_b_proj; bf16 cases also run the absorbed form */
    int32_t contiguous, no_lse;
    mla_dtype q, o;
    double k_scale;
    unsigned q_nope_lay, q_pe_lay, o_lay, lse_lay, w_lay, cache_lay;
    int64_t nope, v, R; /* head dims other than the defaults (0: the default) */
    int32_t w_shift;    /* bf16 kv_b_proj values 2^-w_shift smaller (tiny keys and values) */
} conf_p_attention_expanded;

typedef union conf_params {
    conf_p_convert convert;
    conf_p_mxfp4 mxfp4;
    conf_p_fp8_group fp8g;
    conf_p_rmsnorm rms;
    conf_p_qk_rmsnorm qk;
    conf_p_rope rope;
    conf_p_gemm gemm;
    conf_p_cache cache;
    conf_p_rope_cache rc;
    conf_p_mxfp4_gemm mg;
    conf_p_flatten fl;
    conf_p_layernorm ln;
    conf_p_hadamard had;
    conf_p_head_weights hw;
    conf_p_indexer idx;
    conf_p_topk topk;
    conf_p_attention attn;
    conf_p_attention_expanded attx;
} conf_params;

#endif
