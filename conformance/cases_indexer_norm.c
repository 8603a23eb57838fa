/* The DSA indexer's elementwise building blocks (MLA.md section 6): the
 * LayerNorm of k, the Hadamard rotation of q and k, and the head weights.
 *
 * layernorm: f32 / bf16 / f16 in and out, D = 128 (the model), 64, 33 and
 * 1536, strided rows, in place, eps 1e-6 and 1e-2, tiny rows (where eps
 * matters) and rows whose mean is large against their spread. Held to the
 * bound derived below (fp32 mean and variance over D).
 * hadamard: D = 1 .. 1024, [T, D] rows and [T, H, D] heads, f32 / bf16, in
 * place, strided. Held to the bound of log2(D) levels of fp32 butterflies.
 * indexer_head_weights: bit-exact (MLA.md fixes the fp32 products and their
 * order), Hi = 64, 1, 3 and 128, bf16 / f32 w, power-of-two and arbitrary
 * s_q (subnormal, huge, NaN and Inf among them), in place over w or s_q.
 *
 * Case parameters: layernorm ip[0] in place, ip[1] row shift (mean / spread),
 * fp[0] eps; hadamard ip[0] in place, ip[1] H (0: [T, D] rows); head weights
 * ip[0] in place (1: over w, 2: over s_q), ip[1] s_q powers of two. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "conformance/conf.h"

#define U32 0x1p-24
#define U64 0x1p-53

static double gamma_n(double n, double u) { return n * u / (1.0 - n * u); }

static const char *short_name(mla_dtype d)
{
    const char *n = mla_dtype_name(d);
    return strncmp(n, "fp8_", 4) ? n : n + 4;
}

static mla_status laid_out(mla_status st, char *err, size_t errlen)
{
    if (st != MLA_OK)
        snprintf(err, errlen, "cannot lay out the case (%s)", mla_status_name(st));
    return st;
}

/* ---------------------------------------------------------- LayerNorm
 *
 * The bound, per row of D values x_d, with (exact, from the stored inputs)
 * mu = sum x / D, a = sum |x| / D, m2 = sum x^2 / D, v = var + eps (var the
 * population variance), r = v^-1/2, y_d = (x_d - mu) r w_d + b_d, and
 * g = gamma_{D+4}, u = 2^-24. An fp32 kernel, any summation order:
 * - mean: a sum of D terms and a division (or a product by fl(1/D)):
 *   |mu' - mu| <= E_mu = g a;
 * - variance plus eps, v': two-pass (sum (x - mu')^2 / D; note sum (x - mu')^2
 *   = sum (x - mu)^2 + D (mu' - mu)^2) or one-pass (sum x^2 / D - mu'^2, the
 *   cancellation of DeepSeek-style fused kernels), eps added: in both,
 *   |v' - v| <= E_v = g (3 m2 + eps) + E_mu (2 |mu| + E_mu);
 * - rsqrt: |r' - r| / r <= E_v / (2 (v - E_v)) (the derivative of v^-1/2,
 *   sqrt(1 / (1 - e)) - 1 <= e / (2 (1 - e))) plus 2 ulps of its own (4u) and
 *   u for the cross terms: rho;
 * - (x - mu') r' w + b, or the folded x (r' w) + (b - mu' r' w): at most four
 *   roundings on terms bounded by (|x_d| + |mu| + E_mu) r |w_d| and |b_d|:
 *
 *   tol_d = |w_d| r [E_mu (1 + 2 rho) + |x_d - mu| rho + 5u (|x_d| + |mu| + E_mu)]
 *           + 3u (|y_d| + |b_d|)
 *
 * with rho = E_v / (2 (v - E_v)) + 5u, and 1e-14 (|w_d| r (|x_d| + |mu|) +
 * |b_d|) for the float64 reference and this float64 y. The comparator adds
 * an ulp of y's dtype for the two final roundings. Rows whose variance is
 * lost to fp32 (E_v >= v / 2) would have no bound; the inputs keep the mean
 * within 16 spreads of zero, so none occurs. Without eps, or with the
 * unbiased variance (D - 1), a kernel is off by far more on rows where eps
 * or the factor D / (D - 1) matters. */

static const mla_dtype floats[] = {MLA_DTYPE_F32, MLA_DTYPE_BF16, MLA_DTYPE_F16};

enum { NX, NW, NB, NY };

static void ln_case(conf_builder *b, mla_dtype in, mla_dtype out, int64_t T, int64_t D,
                    unsigned lay, int inplace, int shift, double eps, const char *what)
{
    conf_case c;
    memset(&c, 0, sizeof c);
    c.golden = -1;
    c.v = (mla_variant){0, in, out, 0, 0, 0, T, D};
    c.ndim = 2;
    c.shape[0] = T;
    c.shape[1] = D;
    c.lay[NX] = c.lay[NY] = lay;
    c.dist = CONF_DIST_ACT;
    c.ip[0] = inplace;
    c.ip[1] = shift;
    c.fp[0] = eps;
    snprintf(c.label, sizeof c.label, "%s->%s D %lld%s%s", short_name(in), short_name(out),
             (long long)D, what[0] ? " " : "", what);
    conf_push(b, &c);
}

static int build_ln(conf_case *cases, int cap)
{
    conf_builder b = {cases, cap, 0, MLA_OP_LAYERNORM};
    for (int xi = 0; xi < 3; ++xi)
        for (int yi = 0; yi < 3; ++yi)
            ln_case(&b, floats[xi], floats[yi], 8, 128, CONF_L_CONTIG, 0, 0, 1e-6, "");
    ln_case(&b, MLA_DTYPE_BF16, MLA_DTYPE_BF16, 6, 128, CONF_L_CONTIG, 0, 8, 1e-6,
            "mean 8x spread");
    ln_case(&b, MLA_DTYPE_F32, MLA_DTYPE_F32, 6, 128, CONF_L_PAD, 0, 16, 1e-6,
            "mean 16x spread");
    ln_case(&b, MLA_DTYPE_F32, MLA_DTYPE_BF16, 5, 64, CONF_L_PAD, 0, 0, 1e-6, "strided");
    ln_case(&b, MLA_DTYPE_F32, MLA_DTYPE_F32, 5, 33, CONF_L_OFFSET, 0, 2, 1e-6, "odd D");
    ln_case(&b, MLA_DTYPE_BF16, MLA_DTYPE_F32, 3, 1536, CONF_L_CONTIG, 0, 0, 1e-6, "");
    ln_case(&b, MLA_DTYPE_BF16, MLA_DTYPE_BF16, 7, 128, CONF_L_CONTIG, 0, 0, 1e-2, "eps 1e-2");
    for (int xi = 0; xi < 3; ++xi)
        ln_case(&b, floats[xi], floats[xi], 4, 128, CONF_L_PAD, 1, 1, 1e-6, "in place");
    ln_case(&b, MLA_DTYPE_BF16, MLA_DTYPE_BF16, 0, 128, CONF_L_CONTIG, 0, 0, 1e-6, "T=0");
    return b.n;
}

static mla_status ln_tol(conf_problem *p, const conf_case *c, int iy)
{
    const conf_arg *x = &p->arg[NX], *w = &p->arg[NW], *bb = &p->arg[NB];
    const int64_t T = c->shape[0], D = c->shape[1];
    double *tol = conf_tol_alloc(p, iy, 1.0);
    if (!tol)
        return MLA_ERR_OUT_OF_MEMORY;
    const double g = gamma_n((double)D + 4.0, U32), eps = (double)(float)c->fp[0];
    for (int64_t t = 0; t < T; ++t) {
        double s = 0.0, sa = 0.0, s2 = 0.0, dev = 0.0;
        for (int64_t d = 0; d < D; ++d) {
            const double v = conf_in_value(x, t * D + d);
            s += v, sa += fabs(v), s2 += v * v;
        }
        const double mu = s / (double)D;
        for (int64_t d = 0; d < D; ++d)
            dev += (conf_in_value(x, t * D + d) - mu) * (conf_in_value(x, t * D + d) - mu);
        const double v = dev / (double)D + eps, r = 1.0 / sqrt(v);
        const double e_mu = g * sa / (double)D;
        const double e_v = g * (3.0 * s2 / (double)D + eps) + e_mu * (2.0 * fabs(mu) + e_mu);
        const double rho = e_v < v / 2 ? e_v / (2.0 * (v - e_v)) + 5.0 * U32 : INFINITY;
        for (int64_t d = 0; d < D; ++d) {
            const double xd = conf_in_value(x, t * D + d), wd = fabs(conf_in_value(w, d));
            const double bd = fabs(conf_in_value(bb, d));
            const double y = fabs((xd - mu) * r * conf_in_value(w, d) + conf_in_value(bb, d));
            tol[t * D + d] = wd * r *
                                 (e_mu * (1.0 + 2.0 * rho) + fabs(xd - mu) * rho +
                                  5.0 * U32 * (fabs(xd) + fabs(mu) + e_mu)) +
                             3.0 * U32 * (y + bd) + 1e-14 * (wd * r * (fabs(xd) + fabs(mu)) + bd);
        }
    }
    return MLA_OK;
}

static mla_status setup_ln(const conf_case *c, const conf_env *env, conf_problem *p, char *err,
                           size_t errlen)
{
    (void)env;
    const int64_t T = c->shape[0], D = c->shape[1], xs[2] = {T, D}, ws[1] = {D};
    mla_status st = conf_add_arg(p, "x", c->ip[0] ? CONF_INOUT : CONF_IN, c->v.in_dtype, 2, xs,
                                 c->lay[NX]);
    if (st == MLA_OK)
        st = conf_add_arg(p, "w", CONF_IN, MLA_DTYPE_F32, 1, ws, CONF_L_CONTIG);
    if (st == MLA_OK)
        st = conf_add_arg(p, "b", CONF_IN, MLA_DTYPE_F32, 1, ws, CONF_L_CONTIG);
    if (st == MLA_OK && !c->ip[0])
        st = conf_add_arg(p, "y", CONF_OUT, c->v.out_dtype, 2, xs, c->lay[NY]);
    if (laid_out(st, err, errlen) != MLA_OK)
        return st;
    conf_fill(p, NX, c->dist, c->seed, D);
    conf_fill(p, NW, CONF_DIST_NORM_WEIGHT, c->seed ^ 1, D);
    conf_fill(p, NB, CONF_DIST_NORM_WEIGHT, c->seed ^ 2, D);
    for (int64_t t = 0; c->ip[1] && t < T; ++t) { /* shift the row: mean = ip[1] x its rms */
        double s2 = 0.0;
        for (int64_t d = 0; d < D; ++d)
            s2 += conf_in_value(&p->arg[NX], t * D + d) * conf_in_value(&p->arg[NX], t * D + d);
        const double shift = (t % 2 ? -1.0 : 1.0) * (double)c->ip[1] * sqrt(s2 / (double)D);
        for (int64_t d = 0; d < D; ++d)
            conf_set_value(p, NX, t * D + d, conf_in_value(&p->arg[NX], t * D + d) + shift);
    }
    return laid_out(ln_tol(p, c, c->ip[0] ? NX : NY), err, errlen);
}

static mla_status exec_ln(mla_context *ctx, const conf_case *c, mla_tensor *t)
{
    return mla_layernorm(ctx, &t[NX], &t[NW], &t[NB], (float)c->fp[0], c->ip[0] ? &t[NX] : &t[NY]);
}

const conf_suite conf_suite_layernorm = {"layernorm", MLA_OP_LAYERNORM, build_ln,
                                         setup_ln,    exec_ln,          NULL};

/* ------------------------------------------------------------ Hadamard
 *
 * The bound. y_j = sum_i (+-1) x_i / sqrt(D), the signs of Sylvester's H_D.
 * A fast Walsh-Hadamard transform computes every y_j through L = log2(D)
 * levels of butterflies (a + b, a - b): each x_i reaches y_j through exactly
 * one path of L additions, so |fl(sum) - sum| <= gamma_L sum_i |x_i| whatever
 * the order of the levels and of the pairs inside them (Higham, sums in a
 * tree of depth L). The normalisation adds two roundings (fl(1/sqrt(D)),
 * exact only when D is a power of 4, and the product; or fl(sqrt(D)) and a
 * division; before, between or after the levels: the same count):
 *
 *     tol_j = gamma_{L+2} sum_i |x_i| / sqrt(D)  +  gamma64_{D+2} sum_i |x_i| / sqrt(D)
 *
 * the second term for the float64 reference (a direct signed sum). The
 * comparator adds an ulp of y's dtype. A level skipped, a sign wrong or the
 * normalisation missing is off by about |y_j| itself. */

static void had_case(conf_builder *b, mla_dtype in, mla_dtype out, int64_t T, int64_t H,
                     int64_t D, unsigned lay, int inplace, const char *what)
{
    conf_case c;
    memset(&c, 0, sizeof c);
    c.golden = -1;
    c.v = (mla_variant){0, in, out, 0, 0, 0, T * (H ? H : 1), D};
    c.ndim = H ? 3 : 2;
    c.shape[0] = T;
    c.shape[1] = H ? H : D;
    c.shape[2] = D;
    c.lay[0] = c.lay[1] = lay;
    c.dist = CONF_DIST_ACT;
    c.ip[0] = inplace;
    c.ip[1] = H;
    snprintf(c.label, sizeof c.label, "%s->%s D %lld%s%s%s", short_name(in), short_name(out),
             (long long)D, H ? " heads" : "", what[0] ? " " : "", what);
    conf_push(b, &c);
}

static int build_had(conf_case *cases, int cap)
{
    conf_builder b = {cases, cap, 0, MLA_OP_HADAMARD};
    const mla_dtype f32 = MLA_DTYPE_F32, bf16 = MLA_DTYPE_BF16;
    static const int64_t dims[] = {1, 2, 16, 64, 128, 1024};
    for (int k = 0; k < 6; ++k)
        had_case(&b, k % 2 ? bf16 : f32, k % 3 ? f32 : bf16, dims[k] == 1024 ? 3 : 6, 0, dims[k],
                 CONF_L_CONTIG, 0, "");
    had_case(&b, bf16, bf16, 3, 64, 128, CONF_L_CONTIG, 0, "q"); /* q [T, Hi, 128] */
    had_case(&b, f32, f32, 4, 3, 128, CONF_L_PAD, 0, "strided");
    had_case(&b, bf16, f32, 5, 0, 128, CONF_L_COLMAJOR, 0, "column-major");
    had_case(&b, f32, f32, 4, 2, 128, CONF_L_PAD, 1, "in place");
    had_case(&b, bf16, bf16, 4, 0, 256, CONF_L_OFFSET, 1, "in place");
    had_case(&b, f32, f32, 0, 0, 128, CONF_L_CONTIG, 0, "T=0");
    return b.n;
}

static mla_status setup_had(const conf_case *c, const conf_env *env, conf_problem *p, char *err,
                            size_t errlen)
{
    (void)env;
    const int64_t D = c->shape[c->ndim - 1];
    mla_status st = conf_add_arg(p, "x", c->ip[0] ? CONF_INOUT : CONF_IN, c->v.in_dtype, c->ndim,
                                 c->shape, c->lay[0]);
    if (st == MLA_OK && !c->ip[0])
        st = conf_add_arg(p, "y", CONF_OUT, c->v.out_dtype, c->ndim, c->shape, c->lay[1]);
    if (laid_out(st, err, errlen) != MLA_OK)
        return st;
    conf_fill(p, 0, c->dist, c->seed, D);
    const int iy = c->ip[0] ? 0 : 1;
    const int64_t rows = conf_numel(&p->arg[0]) / (D ? D : 1);
    double *tol = conf_tol_alloc(p, iy, 1.0);
    if (!tol)
        return laid_out(MLA_ERR_OUT_OF_MEMORY, err, errlen);
    const double L = log2((double)D);
    const double g = gamma_n(L + 2.0, U32) + gamma_n((double)D + 2.0, U64);
    for (int64_t r = 0; r < rows; ++r) {
        double sa = 0.0;
        for (int64_t i = 0; i < D; ++i)
            sa += fabs(conf_in_value(&p->arg[0], r * D + i));
        for (int64_t j = 0; j < D; ++j)
            tol[r * D + j] = g * sa / sqrt((double)D);
    }
    return MLA_OK;
}

static mla_status exec_had(mla_context *ctx, const conf_case *c, mla_tensor *t)
{
    return mla_hadamard(ctx, &t[0], c->ip[0] ? &t[0] : &t[1]);
}

const conf_suite conf_suite_hadamard = {"hadamard", MLA_OP_HADAMARD, build_had,
                                        setup_had,  exec_had,        NULL};

/* -------------------------------------------------------- head weights */

static void hw_case(conf_builder *b, mla_dtype w, int64_t T, int64_t Hi, unsigned lay,
                    int inplace, int pow2, int dist, const char *what)
{
    conf_case c;
    memset(&c, 0, sizeof c);
    c.golden = -1;
    c.v = (mla_variant){0, w, MLA_DTYPE_F32, 0, 0, 0, T, Hi};
    c.ndim = 2;
    c.shape[0] = T;
    c.shape[1] = Hi;
    c.lay[0] = c.lay[1] = c.lay[2] = lay;
    c.dist = dist;
    c.ip[0] = inplace;
    c.ip[1] = pow2;
    snprintf(c.label, sizeof c.label, "%s Hi %lld s_q %s%s%s", short_name(w), (long long)Hi,
             pow2 ? "2^k" : "any", what[0] ? " " : "", what);
    conf_push(b, &c);
}

static int build_hw(conf_case *cases, int cap)
{
    conf_builder b = {cases, cap, 0, MLA_OP_INDEXER_HEAD_WEIGHTS};
    const mla_dtype f32 = MLA_DTYPE_F32, bf16 = MLA_DTYPE_BF16;
    const int act = CONF_DIST_ACT;
    hw_case(&b, bf16, 9, 64, CONF_L_CONTIG, 0, 1, act, "");
    hw_case(&b, f32, 9, 64, CONF_L_CONTIG, 0, 0, act, "");
    hw_case(&b, bf16, 7, 3, CONF_L_PAD, 0, 0, act, "");
    hw_case(&b, f32, 5, 1, CONF_L_CONTIG, 0, 1, act, "");
    hw_case(&b, f32, 4, 128, CONF_L_COLMAJOR, 0, 0, act, "");
    hw_case(&b, f32, 6, 32, CONF_L_CONTIG, 0, 0, CONF_DIST_ACT_SPECIALS, "nan/inf/subnormal");
    hw_case(&b, f32, 5, 64, CONF_L_PAD, 1, 1, act, "in place (w)");
    hw_case(&b, bf16, 5, 64, CONF_L_CONTIG, 2, 0, act, "in place (s_q)");
    hw_case(&b, bf16, 0, 64, CONF_L_CONTIG, 0, 1, act, "T=0");
    return b.n;
}

static mla_status setup_hw(const conf_case *c, const conf_env *env, conf_problem *p, char *err,
                           size_t errlen)
{
    (void)env;
    const int64_t T = c->shape[0], Hi = c->shape[1];
    mla_status st = conf_add_arg(p, "w", c->ip[0] == 1 ? CONF_INOUT : CONF_IN, c->v.in_dtype, 2,
                                 c->shape, c->lay[0]);
    if (st == MLA_OK)
        st = conf_add_arg(p, "s_q", c->ip[0] == 2 ? CONF_INOUT : CONF_IN, MLA_DTYPE_F32, 2,
                          c->shape, c->lay[1]);
    if (st == MLA_OK && !c->ip[0])
        st = conf_add_arg(p, "w_out", CONF_OUT, MLA_DTYPE_F32, 2, c->shape, c->lay[2]);
    if (laid_out(st, err, errlen) != MLA_OK)
        return st;
    p->arg[c->ip[0] == 1 ? 0 : c->ip[0] == 2 ? 1 : 2].bound.nan_any = 1;
    conf_fill(p, 0, c->dist, c->seed, Hi);
    const int specials = c->dist == CONF_DIST_ACT_SPECIALS;
    conf_fill(p, 1, specials ? CONF_DIST_SCALES_SPECIALS : CONF_DIST_SCALES, c->seed ^ 1, 0);
    for (int64_t k = 0; c->ip[1] && k < T * Hi; ++k) { /* q's ue8m0 scales: 2^-20 .. 2^1 */
        const uint64_t r = conf_rng(c->seed, 26, (uint64_t)k, 0);
        conf_set_value(p, 1, k, ldexp(1.0, -20 + (int)(r % 22)));
    }
    return MLA_OK;
}

static mla_status exec_hw(mla_context *ctx, const conf_case *c, mla_tensor *t)
{
    mla_tensor *out = c->ip[0] == 1 ? &t[0] : c->ip[0] == 2 ? &t[1] : &t[2];
    return mla_indexer_head_weights(ctx, &t[0], &t[1], out);
}

const conf_suite conf_suite_indexer_head_weights = {
    "indexer_head_weights", MLA_OP_INDEXER_HEAD_WEIGHTS, build_hw, setup_hw, exec_hw, NULL};
