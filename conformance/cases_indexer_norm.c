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
 * s_q (subnormal, huge, NaN and Inf among them), in place over w or s_q. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "conformance/cover.h"

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

static const conf_field ln_fields[] = {
    CONF_FIELD(ln, x, CONF_F_DTYPE),      CONF_FIELD(ln, y, CONF_F_DTYPE),
    CONF_FIELD(ln, T, CONF_F_I64),        CONF_FIELD(ln, D, CONF_F_I64),
    CONF_FIELD(ln, x_lay, CONF_F_LAY),    CONF_FIELD(ln, y_lay, CONF_F_LAY),
    CONF_FIELD(ln, w_lay, CONF_F_LAY),    CONF_FIELD(ln, b_lay, CONF_F_LAY),
    CONF_FIELD(ln, in_place, CONF_F_I32), CONF_FIELD(ln, shift, CONF_F_I32),
    CONF_FIELD(ln, eps, CONF_F_REAL),     CONF_ENUM(ln, dist, conf_name_dist, CONF_DIST_COUNT),
};

static void label_ln(conf_case *c)
{
    const conf_p_layernorm *q = &c->p.ln;
    snprintf(c->label, sizeof c->label, "%s->%s D %lld", short_name(q->x), short_name(q->y),
             (long long)q->D);
}

static void ln_case(conf_builder *b, mla_dtype in, mla_dtype out, int64_t T, int64_t D,
                    unsigned lay, int inplace, int shift, double eps, const char *note)
{
    conf_case c;
    memset(&c, 0, sizeof c);
    c.golden = -1;
    c.note = note;
    c.p.ln = (conf_p_layernorm){
        in, out, T, D, lay, lay, CONF_L_CONTIG, CONF_L_CONTIG, inplace, shift, eps, CONF_DIST_ACT};
    conf_push(b, &c);
}

static int same_size(int64_t a, int64_t b)
{
    return mla_dtype_size((mla_dtype)a) == mla_dtype_size((mla_dtype)b);
}

enum { N_X, N_Y, N_XV, N_WV, N_BV, N_YV };

static const conf_axis ln_axes[] = {
    CONF_AX_DT("x.dtype", 0, CONF_FLOATS),  CONF_AX_DT("y.dtype", 3, CONF_FLOATS),
    CONF_AX_VW("x.view", 0, CONF_VIEWS),    CONF_AX_VW("w.view", 1, CONF_VIEWS_1D),
    CONF_AX_VW("b.view", 2, CONF_VIEWS_1D), CONF_AX_VW("y.view", 3, CONF_VIEWS, MLA_ARG_IN_PLACE),
};

/* y in place over x: the same element size */
static int ln_legal(const conf_point *p)
{
    return !CONF_HAS(p, N_YV) || CONF_VAL(p, N_YV) != MLA_ARG_IN_PLACE ||
           CONF_RULE(p, N_X, N_Y, same_size(CONF_VAL(p, N_X), CONF_VAL(p, N_Y)));
}

static void ln_derive(mla_variant *v)
{
    v->in_dtype = v->arg_dtype[0];
    v->out_dtype = v->arg_dtype[3];
}

const conf_op_axes conf_axes_layernorm = {
    .op = MLA_OP_LAYERNORM,
    .axes = ln_axes,
    .naxes = (int)(sizeof ln_axes / sizeof ln_axes[0]),
    .base = {.rows = 5,
             .cols = 128,
             .nargs = 4,
             .arg_dtype = {[1] = MLA_DTYPE_F32, [2] = MLA_DTYPE_F32}},
    .derive = ln_derive,
    .legal = ln_legal,
    .full = 1u << N_X | 1u << N_Y};

static void ln_design(const conf_point *pt, int k, conf_case *c)
{
    const int in_place = CONF_VAL(pt, N_YV) == MLA_ARG_IN_PLACE;
    c->p.ln = (conf_p_layernorm){(mla_dtype)CONF_VAL(pt, N_X),
                                 (mla_dtype)CONF_VAL(pt, N_Y),
                                 5,
                                 128,
                                 conf_lay_of_view(CONF_VAL(pt, N_XV), 2, k),
                                 in_place ? 0 : conf_lay_of_view(CONF_VAL(pt, N_YV), 2, k + 1),
                                 conf_lay_of_view(CONF_VAL(pt, N_WV), 1, k),
                                 conf_lay_of_view(CONF_VAL(pt, N_BV), 1, k + 1),
                                 in_place,
                                 k % 3,
                                 1e-6,
                                 CONF_DIST_ACT};
    c->note = " (pairwise)";
}

static int build_ln(conf_case *cases, int cap)
{
    conf_builder b = {.cases = cases, .cap = cap, .suite = &conf_suite_layernorm};
    for (int xi = 0; xi < 3; ++xi)
        for (int yi = 0; yi < 3; ++yi)
            ln_case(&b, floats[xi], floats[yi], 8, 128, CONF_L_CONTIG, 0, 0, 1e-6, NULL);
    ln_case(&b, MLA_DTYPE_BF16, MLA_DTYPE_BF16, 6, 128, CONF_L_CONTIG, 0, 8, 1e-6,
            " mean 8x spread");
    ln_case(&b, MLA_DTYPE_F32, MLA_DTYPE_F32, 6, 128, CONF_L_PAD, 0, 16, 1e-6, " mean 16x spread");
    ln_case(&b, MLA_DTYPE_F32, MLA_DTYPE_BF16, 5, 64, CONF_L_PAD, 0, 0, 1e-6, " strided");
    ln_case(&b, MLA_DTYPE_F32, MLA_DTYPE_F32, 5, 33, CONF_L_OFFSET, 0, 2, 1e-6, " odd D");
    ln_case(&b, MLA_DTYPE_BF16, MLA_DTYPE_F32, 3, 1536, CONF_L_CONTIG, 0, 0, 1e-6, NULL);
    ln_case(&b, MLA_DTYPE_BF16, MLA_DTYPE_BF16, 7, 128, CONF_L_CONTIG, 0, 0, 1e-2, " eps 1e-2");
    for (int xi = 0; xi < 3; ++xi)
        ln_case(&b, floats[xi], floats[xi], 4, 128, CONF_L_PAD, 1, 1, 1e-6, " in place");
    ln_case(&b, MLA_DTYPE_BF16, MLA_DTYPE_BF16, 0, 128, CONF_L_CONTIG, 0, 0, 1e-6, " T=0");
    conf_push_design(&b, &conf_axes_layernorm, ln_design);
    return b.n;
}

void conf_layernorm_row_tol(const double *x, const double *w, const double *b, int64_t D,
                            double eps, double *tol)
{
    const double g = gamma_n((double)D + 4.0, U32);
    double s = 0.0, sa = 0.0, s2 = 0.0, dev = 0.0;
    for (int64_t d = 0; d < D; ++d)
        s += x[d], sa += fabs(x[d]), s2 += x[d] * x[d];
    const double mu = s / (double)D;
    for (int64_t d = 0; d < D; ++d)
        dev += (x[d] - mu) * (x[d] - mu);
    const double v = dev / (double)D + eps, r = 1.0 / sqrt(v);
    const double e_mu = g * sa / (double)D;
    const double e_v = g * (3.0 * s2 / (double)D + eps) + e_mu * (2.0 * fabs(mu) + e_mu);
    const double rho = e_v < v / 2 ? e_v / (2.0 * (v - e_v)) + 5.0 * U32 : INFINITY;
    for (int64_t d = 0; d < D; ++d) {
        const double wd = fabs(w[d]), bd = fabs(b[d]);
        const double y = fabs((x[d] - mu) * r * w[d] + b[d]);
        tol[d] = wd * r *
                     (e_mu * (1.0 + 2.0 * rho) + fabs(x[d] - mu) * rho +
                      5.0 * U32 * (fabs(x[d]) + fabs(mu) + e_mu)) +
                 3.0 * U32 * (y + bd) + 1e-14 * (wd * r * (fabs(x[d]) + fabs(mu)) + bd);
    }
}

mla_status conf_layernorm_tol(conf_problem *p, int ix, int iw, int ib, int iy, float eps)
{
    const conf_arg *x = &p->arg[ix];
    const int64_t D = x->t.shape[1], T = D ? conf_numel(x) / D : 0;
    double *tol = conf_tol_alloc(p, iy, 1.0);
    double *row = malloc((size_t)(3 * D + 1) * sizeof *row);
    if (!tol || !row) {
        free(row);
        return MLA_ERR_OUT_OF_MEMORY;
    }
    double *w = row + D, *b = w + D;
    for (int64_t d = 0; d < D; ++d)
        w[d] = conf_in_value(&p->arg[iw], d), b[d] = conf_in_value(&p->arg[ib], d);
    for (int64_t t = 0; t < T; ++t) {
        for (int64_t d = 0; d < D; ++d)
            row[d] = conf_in_value(x, t * D + d);
        conf_layernorm_row_tol(row, w, b, D, (double)eps, tol + t * D);
    }
    free(row);
    return MLA_OK;
}

static mla_status setup_ln(const conf_case *c, const conf_env *env, conf_problem *p, char *err,
                           size_t errlen)
{
    (void)env;
    const conf_p_layernorm *q = &c->p.ln;
    const int64_t T = q->T, D = q->D, xs[2] = {T, D}, ws[1] = {D};
    mla_status st = conf_add_arg(p, "x", q->in_place ? CONF_INOUT : CONF_IN, q->x, 2, xs, q->x_lay);
    if (st == MLA_OK)
        st = conf_add_arg(p, "w", CONF_IN, MLA_DTYPE_F32, 1, ws, q->w_lay);
    if (st == MLA_OK)
        st = conf_add_arg(p, "b", CONF_IN, MLA_DTYPE_F32, 1, ws, q->b_lay);
    if (st == MLA_OK && !q->in_place)
        st = conf_add_arg(p, "y", CONF_OUT, q->y, 2, xs, q->y_lay);
    if (laid_out(st, err, errlen) != MLA_OK)
        return st;
    conf_fill(p, NX, q->dist, c->seed, D);
    conf_fill(p, NW, CONF_DIST_NORM_WEIGHT, c->seed ^ 1, D);
    conf_fill(p, NB, CONF_DIST_NORM_WEIGHT, c->seed ^ 2, D);
    for (int64_t t = 0; q->shift && t < T; ++t) { /* shift the row: mean = shift x its rms */
        double s2 = 0.0;
        for (int64_t d = 0; d < D; ++d)
            s2 += conf_in_value(&p->arg[NX], t * D + d) * conf_in_value(&p->arg[NX], t * D + d);
        const double shift = (t % 2 ? -1.0 : 1.0) * (double)q->shift * sqrt(s2 / (double)D);
        for (int64_t d = 0; d < D; ++d)
            conf_set_value(p, NX, t * D + d, conf_in_value(&p->arg[NX], t * D + d) + shift);
    }
    st = laid_out(conf_layernorm_tol(p, NX, NW, NB, q->in_place ? NX : NY, (float)q->eps), err,
                  errlen);
    p->arg[NX].t.dtype = q->in_place ? q->y : q->x; /* in place: y's values come back */
    return st;
}

static mla_status exec_ln(mla_context *ctx, const conf_case *c, mla_tensor *t)
{
    const conf_p_layernorm *q = &c->p.ln;
    mla_tensor x = t[NX];
    x.dtype = q->x;
    return mla_layernorm(ctx, &x, &t[NW], &t[NB], (float)q->eps, q->in_place ? &t[NX] : &t[NY]);
}

const conf_suite conf_suite_layernorm = {.name = "layernorm",
                                         .op = MLA_OP_LAYERNORM,
                                         .build = build_ln,
                                         .setup = setup_ln,
                                         .exec = exec_ln,
                                         .label = label_ln,
                                         .fields = ln_fields,
                                         .nfields = CONF_NFIELDS(ln_fields)};

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

static const conf_field had_fields[] = {
    CONF_FIELD(had, x, CONF_F_DTYPE),
    CONF_FIELD(had, y, CONF_F_DTYPE),
    CONF_FIELD(had, shape, CONF_F_SHAPE),
    CONF_FIELD(had, x_lay, CONF_F_LAY),
    CONF_FIELD(had, y_lay, CONF_F_LAY),
    CONF_FIELD(had, in_place, CONF_F_I32),
    CONF_ENUM(had, dist, conf_name_dist, CONF_DIST_COUNT),
};

static void label_had(conf_case *c)
{
    const conf_p_hadamard *q = &c->p.had;
    snprintf(c->label, sizeof c->label, "%s->%s D %lld%s", short_name(q->x), short_name(q->y),
             (long long)q->shape.d[q->shape.ndim - 1], q->shape.ndim == 3 ? " heads" : "");
}

static void had_case(conf_builder *b, mla_dtype in, mla_dtype out, int64_t T, int64_t H, int64_t D,
                     unsigned lay, int inplace, const char *note)
{
    conf_case c;
    memset(&c, 0, sizeof c);
    c.golden = -1;
    c.note = note;
    const conf_shape sh = H ? (conf_shape){3, {T, H, D}} : (conf_shape){2, {T, D, 0}};
    c.p.had = (conf_p_hadamard){in, out, sh, lay, lay, inplace, CONF_DIST_ACT};
    conf_push(b, &c);
}

#define HAD_DTYPES MLA_DTYPE_F32, MLA_DTYPE_BF16

enum { H_X, H_Y, H_XV, H_YV };

static const conf_axis had_axes[] = {
    CONF_AX_DT("x.dtype", 0, HAD_DTYPES),
    CONF_AX_DT("y.dtype", 1, HAD_DTYPES),
    CONF_AX_VW("x.view", 0, CONF_VIEWS),
    CONF_AX_VW("y.view", 1, CONF_VIEWS, MLA_ARG_IN_PLACE),
};

static int had_legal(const conf_point *p)
{
    return !CONF_HAS(p, H_YV) || CONF_VAL(p, H_YV) != MLA_ARG_IN_PLACE ||
           CONF_RULE(p, H_X, H_Y, same_size(CONF_VAL(p, H_X), CONF_VAL(p, H_Y)));
}

static void had_derive(mla_variant *v)
{
    v->in_dtype = v->arg_dtype[0];
    v->out_dtype = v->arg_dtype[1];
}

const conf_op_axes conf_axes_hadamard = {.op = MLA_OP_HADAMARD,
                                         .axes = had_axes,
                                         .naxes = (int)(sizeof had_axes / sizeof had_axes[0]),
                                         .base = {.rows = 12, .cols = 64, .nargs = 2},
                                         .derive = had_derive,
                                         .legal = had_legal,
                                         .full = 1u << H_X | 1u << H_Y};

/* [4, 3, 64] heads */
static void had_design(const conf_point *pt, int k, conf_case *c)
{
    const int in_place = CONF_VAL(pt, H_YV) == MLA_ARG_IN_PLACE;
    c->p.had = (conf_p_hadamard){(mla_dtype)CONF_VAL(pt, H_X),
                                 (mla_dtype)CONF_VAL(pt, H_Y),
                                 {3, {4, 3, 64}},
                                 conf_lay_of_view(CONF_VAL(pt, H_XV), 3, k),
                                 in_place ? 0 : conf_lay_of_view(CONF_VAL(pt, H_YV), 3, k + 1),
                                 in_place,
                                 CONF_DIST_ACT};
    c->note = " (pairwise)";
}

static int build_had(conf_case *cases, int cap)
{
    conf_builder b = {.cases = cases, .cap = cap, .suite = &conf_suite_hadamard};
    const mla_dtype f32 = MLA_DTYPE_F32, bf16 = MLA_DTYPE_BF16;
    static const int64_t dims[] = {1, 2, 16, 64, 128, 1024};
    for (int k = 0; k < 6; ++k)
        had_case(&b, k % 2 ? bf16 : f32, k % 3 ? f32 : bf16, dims[k] == 1024 ? 3 : 6, 0, dims[k],
                 CONF_L_CONTIG, 0, NULL);
    had_case(&b, bf16, bf16, 3, 64, 128, CONF_L_CONTIG, 0, " q"); /* q [T, Hi, 128] */
    had_case(&b, f32, f32, 4, 3, 128, CONF_L_PAD, 0, " strided");
    had_case(&b, bf16, f32, 5, 0, 128, CONF_L_COLMAJOR, 0, " column-major");
    had_case(&b, f32, f32, 4, 2, 128, CONF_L_PAD, 1, " in place");
    had_case(&b, bf16, bf16, 4, 0, 256, CONF_L_OFFSET, 1, " in place");
    had_case(&b, f32, f32, 0, 0, 128, CONF_L_CONTIG, 0, " T=0");
    conf_push_design(&b, &conf_axes_hadamard, had_design);
    return b.n;
}

double conf_hadamard_sum_tol(double sa, int64_t D)
{
    const double g = gamma_n(log2((double)D) + 2.0, U32) + gamma_n((double)D + 2.0, U64);
    return g * sa / sqrt((double)D);
}

mla_status conf_hadamard_tol(conf_problem *p, int ix, int iy)
{
    const conf_arg *x = &p->arg[ix];
    const int64_t D = x->t.shape[x->t.ndim - 1];
    const int64_t rows = conf_numel(x) / (D ? D : 1);
    double *tol = conf_tol_alloc(p, iy, 1.0);
    if (!tol)
        return MLA_ERR_OUT_OF_MEMORY;
    for (int64_t r = 0; r < rows; ++r) {
        double sa = 0.0;
        for (int64_t i = 0; i < D; ++i)
            sa += fabs(conf_in_value(x, r * D + i));
        for (int64_t j = 0; j < D; ++j)
            tol[r * D + j] = conf_hadamard_sum_tol(sa, D);
    }
    return MLA_OK;
}

static mla_status setup_had(const conf_case *c, const conf_env *env, conf_problem *p, char *err,
                            size_t errlen)
{
    (void)env;
    const conf_p_hadamard *q = &c->p.had;
    const int32_t nd = q->shape.ndim;
    const int64_t D = q->shape.d[nd - 1];
    mla_status st =
        conf_add_arg(p, "x", q->in_place ? CONF_INOUT : CONF_IN, q->x, nd, q->shape.d, q->x_lay);
    if (st == MLA_OK && !q->in_place)
        st = conf_add_arg(p, "y", CONF_OUT, q->y, nd, q->shape.d, q->y_lay);
    if (laid_out(st, err, errlen) != MLA_OK)
        return st;
    conf_fill(p, 0, q->dist, c->seed, D);
    if (conf_hadamard_tol(p, 0, q->in_place ? 0 : 1) != MLA_OK)
        return laid_out(MLA_ERR_OUT_OF_MEMORY, err, errlen);
    p->arg[0].t.dtype = q->in_place ? q->y : q->x; /* in place: y's values come back */
    return MLA_OK;
}

static mla_status exec_had(mla_context *ctx, const conf_case *c, mla_tensor *t)
{
    const conf_p_hadamard *q = &c->p.had;
    mla_tensor x = t[0];
    x.dtype = q->x;
    return mla_hadamard(ctx, &x, q->in_place ? &t[0] : &t[1]);
}

const conf_suite conf_suite_hadamard = {.name = "hadamard",
                                        .op = MLA_OP_HADAMARD,
                                        .build = build_had,
                                        .setup = setup_had,
                                        .exec = exec_had,
                                        .label = label_had,
                                        .fields = had_fields,
                                        .nfields = CONF_NFIELDS(had_fields)};

/* -------------------------------------------------------- head weights */

static const conf_field hw_fields[] = {
    CONF_FIELD(hw, w, CONF_F_DTYPE),
    CONF_FIELD(hw, T, CONF_F_I64),
    CONF_FIELD(hw, Hi, CONF_F_I64),
    CONF_FIELD(hw, w_lay, CONF_F_LAY),
    CONF_FIELD(hw, s_q_lay, CONF_F_LAY),
    CONF_FIELD(hw, w_out_lay, CONF_F_LAY),
    CONF_FIELD(hw, in_place, CONF_F_I32),
    CONF_FIELD(hw, pow2, CONF_F_I32),
    CONF_ENUM(hw, dist, conf_name_dist, CONF_DIST_COUNT),
};

static void label_hw(conf_case *c)
{
    const conf_p_head_weights *q = &c->p.hw;
    snprintf(c->label, sizeof c->label, "%s Hi %lld s_q %s", short_name(q->w), (long long)q->Hi,
             q->pow2 ? "2^k" : "any");
}

static void hw_case(conf_builder *b, mla_dtype w, int64_t T, int64_t Hi, unsigned lay, int inplace,
                    int pow2, int dist, const char *note)
{
    conf_case c;
    memset(&c, 0, sizeof c);
    c.golden = -1;
    c.note = note;
    c.p.hw = (conf_p_head_weights){w, T, Hi, lay, lay, lay, inplace, pow2, dist};
    conf_push(b, &c);
}

enum { W_W, W_WV, W_SV, W_OV };

static const conf_axis hw_axes[] = {
    CONF_AX_DT("w.dtype", 0, MLA_DTYPE_F32, MLA_DTYPE_BF16),
    CONF_AX_VW("w.view", 0, CONF_VIEWS),
    CONF_AX_VW("s_q.view", 1, CONF_VIEWS),
    CONF_AX_VW("w_out.view", 2, CONF_VIEWS, MLA_ARG_IN_PLACE),
};

const conf_op_axes conf_axes_indexer_head_weights = {
    .op = MLA_OP_INDEXER_HEAD_WEIGHTS,
    .axes = hw_axes,
    .naxes = (int)(sizeof hw_axes / sizeof hw_axes[0]),
    .base = {.out_dtype = MLA_DTYPE_F32,
             .rows = 5,
             .cols = 64,
             .nargs = 3,
             .arg_dtype = {[1] = MLA_DTYPE_F32, [2] = MLA_DTYPE_F32}},
    .derive = had_derive,
    .full = 1u << W_W};

/* [5, 64]; in place over w when w is f32 (every other design), else over s_q */
static void hw_design(const conf_point *pt, int k, conf_case *c)
{
    const mla_dtype w = (mla_dtype)CONF_VAL(pt, W_W);
    const int in_place = CONF_VAL(pt, W_OV) != MLA_ARG_IN_PLACE ? 0
                         : w == MLA_DTYPE_F32 && k % 2          ? 1
                                                                : 2;
    c->p.hw = (conf_p_head_weights){w,
                                    5,
                                    64,
                                    conf_lay_of_view(CONF_VAL(pt, W_WV), 2, k),
                                    conf_lay_of_view(CONF_VAL(pt, W_SV), 2, k + 1),
                                    in_place ? 0 : conf_lay_of_view(CONF_VAL(pt, W_OV), 2, k + 2),
                                    in_place,
                                    k % 2,
                                    k % 4 == 3 ? CONF_DIST_ACT_SPECIALS : CONF_DIST_ACT};
    c->note = " (pairwise)";
}

static int build_hw(conf_case *cases, int cap)
{
    conf_builder b = {.cases = cases, .cap = cap, .suite = &conf_suite_indexer_head_weights};
    const mla_dtype f32 = MLA_DTYPE_F32, bf16 = MLA_DTYPE_BF16;
    const int act = CONF_DIST_ACT;
    hw_case(&b, bf16, 9, 64, CONF_L_CONTIG, 0, 1, act, NULL);
    hw_case(&b, f32, 9, 64, CONF_L_CONTIG, 0, 0, act, NULL);
    hw_case(&b, bf16, 7, 3, CONF_L_PAD, 0, 0, act, NULL);
    hw_case(&b, f32, 5, 1, CONF_L_CONTIG, 0, 1, act, NULL);
    hw_case(&b, f32, 4, 128, CONF_L_COLMAJOR, 0, 0, act, NULL);
    hw_case(&b, f32, 6, 32, CONF_L_CONTIG, 0, 0, CONF_DIST_ACT_SPECIALS, " nan/inf/subnormal");
    hw_case(&b, f32, 5, 64, CONF_L_PAD, 1, 1, act, " in place (w)");
    hw_case(&b, bf16, 5, 64, CONF_L_CONTIG, 2, 0, act, " in place (s_q)");
    hw_case(&b, bf16, 0, 64, CONF_L_CONTIG, 0, 1, act, " T=0");
    conf_push_design(&b, &conf_axes_indexer_head_weights, hw_design);
    return b.n;
}

static mla_status setup_hw(const conf_case *c, const conf_env *env, conf_problem *p, char *err,
                           size_t errlen)
{
    (void)env;
    const conf_p_head_weights *q = &c->p.hw;
    const int64_t T = q->T, Hi = q->Hi, shape[2] = {T, Hi};
    mla_status st =
        conf_add_arg(p, "w", q->in_place == 1 ? CONF_INOUT : CONF_IN, q->w, 2, shape, q->w_lay);
    if (st == MLA_OK)
        st = conf_add_arg(p, "s_q", q->in_place == 2 ? CONF_INOUT : CONF_IN, MLA_DTYPE_F32, 2,
                          shape, q->s_q_lay);
    if (st == MLA_OK && !q->in_place)
        st = conf_add_arg(p, "w_out", CONF_OUT, MLA_DTYPE_F32, 2, shape, q->w_out_lay);
    if (laid_out(st, err, errlen) != MLA_OK)
        return st;
    p->arg[q->in_place == 1 ? 0 : q->in_place == 2 ? 1 : 2].bound.nan_any = 1;
    conf_fill(p, 0, q->dist, c->seed, Hi);
    const int specials = q->dist == CONF_DIST_ACT_SPECIALS;
    conf_fill(p, 1, specials ? CONF_DIST_SCALES_SPECIALS : CONF_DIST_SCALES, c->seed ^ 1, 0);
    for (int64_t k = 0; q->pow2 && k < T * Hi; ++k) { /* q's ue8m0 scales: 2^-20 .. 2^1 */
        const uint64_t r = conf_rng(c->seed, 26, (uint64_t)k, 0);
        conf_set_value(p, 1, k, ldexp(1.0, -20 + (int)(r % 22)));
    }
    return MLA_OK;
}

static mla_status exec_hw(mla_context *ctx, const conf_case *c, mla_tensor *t)
{
    const int in_place = c->p.hw.in_place;
    mla_tensor *out = in_place == 1 ? &t[0] : in_place == 2 ? &t[1] : &t[2];
    return mla_indexer_head_weights(ctx, &t[0], &t[1], out);
}

const conf_suite conf_suite_indexer_head_weights = {.name = "indexer_head_weights",
                                                    .op = MLA_OP_INDEXER_HEAD_WEIGHTS,
                                                    .build = build_hw,
                                                    .setup = setup_hw,
                                                    .exec = exec_hw,
                                                    .label = label_hw,
                                                    .fields = hw_fields,
                                                    .nfields = CONF_NFIELDS(hw_fields)};
