/* The float64 reference of the V3.2 indexer's projections (MLA.md section
 * 6, mla_indexer_prepare) with a propagated error scale per output, the
 * model of conformance/layer_ref64.h: every product and sum in double from
 * the same weights and inputs, sd(v) the first-order root-sum-square of the
 * library's roundings, accepted at LAYER_REF64_LAMBDA sd.
 *
 *   q = q_lat W_qb^T (K = q_lora terms) and k_raw = x W_k^T: the linear
 *     stage of layer_ref64.h, rounded to the activations (u_act);
 *   k = LayerNorm(k_raw) (eps 1e-6): for y_d = (x_d - mu) r w_d + b_d, r =
 *     (var + eps)^-1/2, z = (x - mu) r, the first-order sensitivity
 *     dy_d / dx_j = w_d r (delta_dj - (1 + z_d z_j) / D), so
 *       var(y_d) = (w_d r)^2 sum_j (delta_dj - (1 + z_d z_j) / D)^2 var(x_j)
 *                  + tol_d^2 + (u_k y_d)^2
 *     with tol_d the fp32 LayerNorm's worst case (conf_layernorm_row_tol)
 *     taken as one sd (a worst case bounds the deviation: conservative);
 *   RoPE on the first R dims (the layer_ref64 stage, the indexer's pairing),
 *     rounded to q's or k's dtype;
 *   the Hadamard rotation (optional): y = H x / sqrt(D) is orthonormal, so
 *     var(y_j) = sum_i var(x_i) / D + tol^2 + (u y_j)^2, tol the fp32
 *     butterflies' worst case (conf_hadamard_sum_tol);
 *   w = x W_w^T rounded to bf16 (u = 2^-8).
 * q's fp8 quantization and w_out = w s_q 128^-0.5 Hi^-0.5 are the judge's
 * (apps/replay_layer.c): they depend on the scale s_q each side chose. */
#ifndef MLA_CONFORMANCE_INDEXER_REF64_H
#define MLA_CONFORMANCE_INDEXER_REF64_H

#include <stdint.h>

#include "mla/mla.h"

typedef struct ref64_indexer {
    int64_t Hi, D, R, q_lora, hidden;
    const double *wq_b, *wk, *wproj; /* [Hi * D, q_lora], [D, hidden], [Hi, hidden] */
    const double *ln_w, *ln_b;       /* [D] */
    const float *cos, *sin;          /* [positions, R / 2] */
    int neox, hadamard;
    double u_act, u_k; /* unit roundoff of the intermediates (q, k_raw) and of k */
} ref64_indexer;

/* k [T, D] and its sd from x [T, hidden] (exact) at positions pos. */
void ref64_indexer_k(const ref64_indexer *m, int64_t T, const double *x, const int64_t *pos,
                     double *k, double *sd);
/* q [T, Hi, D] before its quantization and w [T, Hi], with their sd, from
 * q_lat [T, q_lora] and x [T, hidden] (exact). */
void ref64_indexer_q(const ref64_indexer *m, int64_t T, const double *q_lat, const double *x,
                     const int64_t *pos, double *q, double *sd_q, double *w, double *sd_w);

#endif
