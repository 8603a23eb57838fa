/* The float64 reference of the whole MLA layer (MLA.md section 2) for the
 * layer conformance tests, with a propagated error scale per output.
 *
 * Values: every product and sum in double from the same weights as the
 * library (bf16 exactly, fp8 as code * block scale), RoPE from the same fp32
 * cos/sin table, nothing rounded between stages, except the latent cache:
 * its rows are kept as the cache's element type stores them (bf16, or
 * sat_fp8(x / k_scale) * k_scale), so the cache quantization is part of the
 * reference, not of the measured error.
 *
 * Error scale (sigma) of the library's result, propagated alongside the
 * values. The library rounds every intermediate to the activation dtype
 * (unit roundoff u_act: 2^-8 for bf16), accumulates in fp32 (u = 2^-24) and
 * rounds the output once to y's dtype (u_out). Each rounding of a value v
 * contributes an error of size up to u|v|; errors are propagated to first
 * order through every stage and composed as independent (root-sum-square),
 * the probabilistic model of rounding error (Higham and Mary, SIAM J. Sci.
 * Comput. 41(5), 2019: dot products of length n lose sqrt(n) u, not n u,
 * with overwhelming probability). Per stage, sd(x) = sqrt(var(x)):
 *
 *   linear y = W x (K terms):
 *       var(y_j) = sum_i (w_ji sd(x_i))^2 + (2^-24 sqrt(K) sum_i |w_ji x_i|)^2
 *                  + (u_out y_j)^2
 *   RMSNorm, r = rsqrt(mean x^2 + eps) over n values:
 *       var(r) / r^2 = sum_i (x_i sd(x_i))^2 / (sum_i x_i^2 + n eps)^2
 *       var(y_i)     = (w_i r)^2 (var(x_i) + x_i^2 var(r) / r^2)
 *                      + (4u y_i)^2 + (u_out y_i)^2
 *   RoPE, a' = a c - b s (and b' alike):
 *       var(a') = (c sd(a))^2 + (s sd(b))^2 + (2^-24 (|ac| + |bs|))^2 + (u_out a')^2
 *   cache rows, the stored value Q(k) against the reference's Q(k64):
 *       var += 2 ulp_Q(k) sd(k)
 *       (a rounding boundary between the two flips one ulp with probability
 *       about sd(k) / ulp)
 *   q_cat (the absorbed q_nope and the rotated q_pe) rounds with u_q, the
 *   plan's q dtype, also under f32 activations.
 *   attention, score s_t over D = L + R dims, p_t its probability:
 *       var(s_t) = scale^2 (sum_d ((q_d sd(k_td))^2 + (k_td sd(q_d))^2)
 *                  + (2^-24 sqrt(D) sum_d |q_d k_td|)^2) + (4u s_t)^2
 *       o_l = sum_t p_t k_tl:
 *       var(o_l) = sum_t p_t^2 (var(s_t) (k_tl - o_l)^2 + var(k_tl))
 *                  + sum_t (u_p p_t k_tl)^2   (P rounded; row sums of the unrounded P)
 *                  + (2^-22 o_l)^2            (fp32 exp and normalization)
 *                  + (u_act o_l)^2            (o_lat rounded to the activation dtype)
 *   the expanded form (MLA.md section 2, "The expanded form"; `expanded`):
 *   K_nope and V decompressed per head from the cache rows (L terms), each
 *   rounded with u_q (the kv dtype is q's); q_nope unabsorbed, rounded with
 *   u_q; the attention as above over nope + R dims with V in place of the
 *   latent values; its o [v] rounded with u_act goes to o_proj (no W_vc).
 *       var(K_i) = sum_d (w_id sd(c_d))^2 + (2^-24 sqrt(L) sum_d |w_id c_d|)^2
 *                  + (u_q K_i)^2   (V alike)
 *
 * The tests accept |y_lib - y_ref| <= LAYER_REF64_LAMBDA * sd(y) per element
 * (6 standard deviations: a Gaussian tail of 2e-9 per element). */
#ifndef MLA_CONFORMANCE_LAYER_REF64_H
#define MLA_CONFORMANCE_LAYER_REF64_H

#include <stdint.h>

#include "mla/mla.h"

#define LAYER_REF64_LAMBDA 6.0

typedef enum ref64_gemm { REF64_Q_A, REF64_Q_B, REF64_KV_A, REF64_KV_B, REF64_O } ref64_gemm;

typedef struct ref64_model {
    mla_model_config cfg;
    /* dequantized weights, row-major [out, in] */
    const double *wq_a, *wq_b, *wkv_a, *wkv_b, *wo;
    const double *ln_q, *ln_kv; /* [q_lora], [L] */
    /* W_kc [H, nope, L] when it is not kv_b_proj's (MXFP4: re-quantized
     * along nope at load), else NULL */
    const double *w_kc;
    /* MXFP4 weights: the GEMM quantizes its activations to MXFP4 first
     * (production rule); the reference quantizes its own, exactly (like the
     * cache), and counts a flip of one fp4 step where the library's input
     * differs: var += 2 step sd. Indexed by ref64_gemm. */
    int mx[5];
    const float *cos, *sin; /* [max_pos, R/2] */
    mla_dtype cache_dtype;  /* BF16, FP8_E4M3FN, FP8_E4M3FNUZ (NORMAL layout
                               semantics) */
    float k_scale;
    double u_act; /* unit roundoff of the intermediates (2^-8 bf16, 2^-24 f32) */
    double u_q;   /* of q_cat, the plan's q dtype (2^-8 bf16), whatever the activations */
    double u_p;   /* of the attention's probabilities (2^-8: bf16 for the matrix units) */
    double u_out; /* of y */
    int expanded; /* 1: the expanded form's arithmetic (the layer's opt.form EXPANDED) */
    /* 1: the FP8_SCALED layout's rows, L fp8 values in groups of 128 with a
     * power-of-two scale each, the rope part bf16 (k_scale unused) */
    int fp8_scaled;
} ref64_model;

/* The reference cache: rows [num_slots, L + R] as stored, and their
 * error variances against the library's rows; optionally (pre, vpre not
 * NULL, the caller's arrays of the same size) each written row's values
 * before the cache's rounding and their variances. */
typedef struct ref64_cache {
    int64_t num_slots;
    double *row, *var;
    double *pre, *vpre;
} ref64_cache;

void ref64_cache_init(ref64_cache *c, const mla_model_config *cfg, int64_t num_slots);
void ref64_cache_free(ref64_cache *c); /* pre and vpre too */
/* Sets every row from a NORMAL cache's bytes (bf16, or fp8 codes times
 * k_scale) with variance 0: a checked step then starts from the library's
 * own cache, and only that step's arithmetic is measured. */
void ref64_cache_from_normal(ref64_cache *c, const mla_model_config *cfg, const void *bytes,
                             mla_dtype dtype, float k_scale);

/* One step: T tokens x [T, hidden] of S sequences (cu [S + 1], ctx [S] after
 * the step, block_table [S, max_blocks] with block size bs); token t at
 * pos[t], written to slot[t]. topk: NULL for dense, else [T, K] logical
 * positions (-1 none) that each row attends to. y, sd [T, hidden]. */
void ref64_step(const ref64_model *m, ref64_cache *cache, int64_t T, const double *x,
                const int64_t *pos, const int64_t *slot, int64_t S, const int32_t *cu,
                const int32_t *ctx, const int32_t *block_table, int64_t max_blocks, int64_t bs,
                const int32_t *topk, int64_t K, double *y, double *sd);

/* 1 when a row's top-k (K entries, at position p) is a valid causal
 * selection: distinct positions <= p, min(K, p + 1) of them, -1 after. */
int ref64_selection_valid(const int32_t *idx, int64_t K, int64_t p);

/* Steps 1-6 alone (mla_prepare): q_cat [T, H, L + R] and its sd, every
 * token's row written to the cache at slot[t] (< 0: none). */
void ref64_prepare(const ref64_model *m, ref64_cache *cache, int64_t T, const double *x,
                   const int64_t *pos, const int64_t *slot, double *q_cat, double *sd);

/* The building blocks, for the indexer's reference (indexer_ref64.h): the
 * linear stage (y [T, N] = x [T, K] W^T with variances, rounded with u_out)
 * and RoPE of one row by pos (pairs (2i, 2i + 1), or (i, i + R/2) NeoX). */
void ref64_linear(int64_t T, int64_t N, int64_t K, const double *x, const double *vx,
                  const double *w, double u_out, double *y, double *vy);
void ref64_rope_row(double *x, double *vx, int64_t R, const float *cos, const float *sin,
                    int64_t pos, int neox, double u_out);

#endif
