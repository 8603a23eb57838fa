/* The float64 indexer reference with propagated error variances; the model
 * and its formulas are in conformance/indexer_ref64.h. */
#include "conformance/indexer_ref64.h"

#include <math.h>
#include <stdlib.h>

#include "conformance/conf.h"
#include "conformance/layer_ref64.h"

static double sq(double v) { return v * v; }

/* LayerNorm (eps 1e-6) of one row of D values in place, with variances. */
static void layernorm(const ref64_indexer *m, double *x, double *vx, double *tol)
{
    const int64_t D = m->D;
    double mu = 0, dev = 0;
    for (int64_t d = 0; d < D; ++d)
        mu += x[d];
    mu /= (double)D;
    for (int64_t d = 0; d < D; ++d)
        dev += sq(x[d] - mu);
    const double eps = (double)1e-6f, r = 1.0 / sqrt(dev / (double)D + eps);
    conf_layernorm_row_tol(x, m->ln_w, m->ln_b, D, eps, tol);
    double *y = malloc((size_t)(2 * D) * sizeof *y), *vy = y + D;
    for (int64_t d = 0; y && d < D; ++d) {
        const double zd = (x[d] - mu) * r;
        double v = 0;
        for (int64_t j = 0; j < D; ++j)
            v += sq((j == d) - (1.0 + zd * (x[j] - mu) * r) / (double)D) * vx[j];
        y[d] = zd * m->ln_w[d] + m->ln_b[d];
        vy[d] = sq(m->ln_w[d] * r) * v + sq(tol[d]) + sq(m->u_k * y[d]);
    }
    for (int64_t d = 0; y && d < D; ++d)
        x[d] = y[d], vx[d] = vy[d];
    free(y);
}

/* y = H_D x / sqrt(D) of one row in place (Sylvester's signs), with variances. */
static void hadamard(int64_t D, double *x, double *vx, double u_out, double *scratch)
{
    double sa = 0, v = 0;
    for (int64_t i = 0; i < D; ++i)
        sa += fabs(x[i]), v += vx[i];
    const double tol = conf_hadamard_sum_tol(sa, D);
    for (int64_t j = 0; j < D; ++j) {
        double y = 0;
        for (int64_t i = 0; i < D; ++i)
            y += (__builtin_popcountll((unsigned long long)(i & j)) & 1) ? -x[i] : x[i];
        scratch[j] = y / sqrt((double)D);
    }
    for (int64_t j = 0; j < D; ++j)
        x[j] = scratch[j], vx[j] = v / (double)D + sq(tol) + sq(u_out * scratch[j]);
}

/* RoPE on the first R dims, then the optional rotation, of rows of D values. */
static void rotate(const ref64_indexer *m, double *x, double *vx, int64_t rows, int64_t per_pos,
                   const int64_t *pos, double u_out)
{
    double *scratch = malloc((size_t)m->D * sizeof *scratch);
    for (int64_t i = 0; scratch && i < rows; ++i) {
        double *row = x + i * m->D, *vrow = vx + i * m->D;
        ref64_rope_row(row, vrow, m->R, m->cos, m->sin, pos[i / per_pos], m->neox, u_out);
        if (m->hadamard)
            hadamard(m->D, row, vrow, u_out, scratch);
    }
    free(scratch);
}

void ref64_indexer_k(const ref64_indexer *m, int64_t T, const double *x, const int64_t *pos,
                     double *k, double *sd)
{
    const int64_t D = m->D;
    double *vx = calloc((size_t)(T * m->hidden + 1), sizeof *vx); /* x is exact */
    double *tol = malloc((size_t)D * sizeof *tol);
    if (!vx || !tol) {
        free(vx), free(tol);
        return;
    }
    ref64_linear(T, D, m->hidden, x, vx, m->wk, m->u_act, k, sd);
    for (int64_t t = 0; t < T; ++t)
        layernorm(m, k + t * D, sd + t * D, tol);
    rotate(m, k, sd, T, 1, pos, m->u_k);
    for (int64_t i = 0; i < T * D; ++i)
        sd[i] = sqrt(sd[i]);
    free(vx), free(tol);
}

void ref64_indexer_q(const ref64_indexer *m, int64_t T, const double *q_lat, const double *x,
                     const int64_t *pos, double *q, double *sd_q, double *w, double *sd_w)
{
    const int64_t n = T * (m->q_lora > m->hidden ? m->q_lora : m->hidden);
    double *zero = calloc((size_t)(n + 1), sizeof *zero); /* the inputs are exact */
    if (!zero)
        return;
    ref64_linear(T, m->Hi * m->D, m->q_lora, q_lat, zero, m->wq_b, m->u_act, q, sd_q);
    rotate(m, q, sd_q, T * m->Hi, m->Hi, pos, m->u_act);
    ref64_linear(T, m->Hi, m->hidden, x, zero, m->wproj, 1.0 / 256.0, w, sd_w);
    for (int64_t i = 0; i < T * m->Hi * m->D; ++i)
        sd_q[i] = sqrt(sd_q[i]);
    for (int64_t i = 0; i < T * m->Hi; ++i)
        sd_w[i] = sqrt(sd_w[i]);
    free(zero);
}
