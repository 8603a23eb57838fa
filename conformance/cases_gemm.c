/* mla_linear and mla_batched_gemm: bf16 weights, and fp8 e4m3fn weights with
 * DeepSeek's 128 x 128 block scales (linear; N and K not multiples of 128
 * included) or a per-tensor scale (batched); f32 and bf16 x and y; strided
 * x and y, a transposed weight buffer; and the absorb's views: q_nope as a
 * [H, T, nope] view of q, W_kc and W_vc as views of kv_b_proj, the output as
 * a [H, T, L] view of a [T, H, L] buffer (seed 003's layout).
 * Not bit-defined (fp32 accumulation in any order): each output value is held
 * to conf_gemm_tol(K, S) with S = |w_scale| sum_k |x_k| |w_k| from the case's
 * own inputs (derivation in conformance/bounds.c), plus the output roundings.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "conformance/cover.h"

#define BLOCK 128 /* fp8 checkpoint block scales */
#define NOPE 32   /* test-tiny's head dims, for the absorb views */
#define ROPE 16
#define VDIM 32

enum { IX, IW, IY, IS }; /* linear's w_scale (fp8 only) is the fourth argument */

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

static const conf_field linear_fields[] = {
    CONF_FIELD(gemm, x, CONF_F_DTYPE),
    CONF_FIELD(gemm, w, CONF_F_DTYPE),
    CONF_FIELD(gemm, y, CONF_F_DTYPE),
    {"T", CONF_F_I64, offsetof(conf_params, gemm.M), NULL, 0},
    CONF_FIELD(gemm, K, CONF_F_I64),
    CONF_FIELD(gemm, N, CONF_F_I64),
    CONF_FIELD(gemm, x_lay, CONF_F_LAY),
    CONF_FIELD(gemm, w_lay, CONF_F_LAY),
    CONF_FIELD(gemm, y_lay, CONF_F_LAY),
    CONF_FIELD(gemm, w_scale_lay, CONF_F_LAY),
    CONF_ENUM(gemm, dist, conf_name_dist, CONF_DIST_COUNT),
};

static const conf_field batched_fields[] = {
    CONF_FIELD(gemm, x, CONF_F_DTYPE),
    CONF_FIELD(gemm, w, CONF_F_DTYPE),
    CONF_FIELD(gemm, y, CONF_F_DTYPE),
    CONF_FIELD(gemm, B, CONF_F_I64),
    CONF_FIELD(gemm, M, CONF_F_I64),
    CONF_FIELD(gemm, K, CONF_F_I64),
    CONF_FIELD(gemm, N, CONF_F_I64),
    CONF_FIELD(gemm, x_lay, CONF_F_LAY),
    CONF_FIELD(gemm, w_lay, CONF_F_LAY),
    CONF_FIELD(gemm, y_lay, CONF_F_LAY),
    CONF_FIELD(gemm, view, CONF_F_I32),
    CONF_FIELD(gemm, w_scale, CONF_F_REAL),
    CONF_ENUM(gemm, dist, conf_name_dist, CONF_DIST_COUNT),
};

static void label(conf_case *c)
{
    const conf_p_gemm *q = &c->p.gemm;
    const char *wn = q->w == MLA_DTYPE_BF16 ? "bf16" : mla_dtype_name(q->w) + 4;
    snprintf(c->label, sizeof c->label, "x %s w %s -> %s", mla_dtype_name(q->x), wn,
             mla_dtype_name(q->y));
}

static void add(conf_builder *b, mla_dtype x, mla_dtype w, mla_dtype y, int64_t B, int64_t M,
                int64_t K, int64_t N, unsigned lx, unsigned lw, unsigned ly, int view,
                double w_scale, const char *note)
{
    conf_case c;
    memset(&c, 0, sizeof c);
    c.golden = -1;
    c.note = note;
    c.p.gemm =
        (conf_p_gemm){x, w, y, B, M, K, N, lx, lw, ly, CONF_L_CONTIG, view, w_scale, CONF_DIST_ACT};
    conf_push(b, &c);
}

static const mla_dtype xy[][2] = {{MLA_DTYPE_BF16, MLA_DTYPE_BF16},
                                  {MLA_DTYPE_F32, MLA_DTYPE_F32},
                                  {MLA_DTYPE_BF16, MLA_DTYPE_F32},
                                  {MLA_DTYPE_F32, MLA_DTYPE_BF16}};

/* ------------------------------------------------------------ axes */

#define GEMM_X MLA_DTYPE_F32, MLA_DTYPE_BF16
#define GEMM_W MLA_DTYPE_BF16, CONF_FP8S

static const char *const rows_names[] = {"T<=16", "T>16"};

enum { L_X, L_W, L_Y, L_S, L_T, L_XV, L_WV, L_YV, L_SV };

static const conf_axis linear_axes[] = {
    CONF_AX_DT("x.dtype", 0, GEMM_X),
    CONF_AX_DT("w.dtype", 1, GEMM_W),
    CONF_AX_DT("y.dtype", 3, GEMM_X),
    CONF_AX_DT("w_scale.dtype", 2, MLA_DTYPE_COUNT, MLA_DTYPE_F32),
    /* HIP: up to 16 tokens one tile kernel, more the matrix-unit tiles */
    CONF_AX_CL("tokens", rows, 1, rows_names, 0, 17),
    CONF_AX_VW("x.view", 0, CONF_VIEWS),
    CONF_AX_VW("w.view", 1, CONF_VIEWS),
    CONF_AX_VW("y.view", 3, CONF_VIEWS),
    CONF_AX_VW("w_scale.view", 2, CONF_VIEWS, MLA_ARG_ABSENT),
};

/* fp8 weights come with block scales, bf16 ones without */
static int linear_legal(const conf_point *p)
{
    return CONF_RULE(p, L_W, L_S,
                     (CONF_VAL(p, L_W) == MLA_DTYPE_BF16) ==
                         (CONF_VAL(p, L_S) == MLA_DTYPE_COUNT)) &&
           CONF_RULE(p, L_S, L_SV,
                     (CONF_VAL(p, L_S) == MLA_DTYPE_COUNT) ==
                         (CONF_VAL(p, L_SV) == MLA_ARG_ABSENT));
}

static void linear_derive(mla_variant *v)
{
    v->in_dtype = v->arg_dtype[1];
    v->out_dtype = v->arg_dtype[3];
}

const conf_op_axes conf_axes_linear = {.op = MLA_OP_LINEAR,
                                       .axes = linear_axes,
                                       .naxes = (int)(sizeof linear_axes / sizeof linear_axes[0]),
                                       .base = {.group = 192, .cols = 256, .nargs = 4},
                                       .derive = linear_derive,
                                       .legal = linear_legal,
                                       .full = 1u << L_X | 1u << L_W | 1u << L_Y};

/* T 3 or 20 tokens, K 300 and N 130 (block scales over partial blocks) */
static void linear_design(const conf_point *pt, int k, conf_case *c)
{
    const int64_t sv = CONF_VAL(pt, L_SV);
    c->p.gemm = (conf_p_gemm){(mla_dtype)CONF_VAL(pt, L_X),
                              (mla_dtype)CONF_VAL(pt, L_W),
                              (mla_dtype)CONF_VAL(pt, L_Y),
                              1,
                              CONF_VAL(pt, L_T) ? 20 : 3,
                              300,
                              130,
                              conf_lay_of_view(CONF_VAL(pt, L_XV), 2, k),
                              conf_lay_of_view(CONF_VAL(pt, L_WV), 2, k + 1),
                              conf_lay_of_view(CONF_VAL(pt, L_YV), 2, k + 2),
                              sv == MLA_ARG_ABSENT ? 0 : conf_lay_of_view(sv, 2, k),
                              0,
                              1.0,
                              CONF_DIST_ACT};
    c->note = " (pairwise)";
}

enum { B_X, B_W, B_Y, B_XV, B_WV, B_YV };

static const conf_axis batched_axes[] = {
    CONF_AX_DT("x.dtype", 0, GEMM_X),    CONF_AX_DT("w.dtype", 1, GEMM_W),
    CONF_AX_DT("y.dtype", 2, GEMM_X),    CONF_AX_VW("x.view", 0, CONF_VIEWS),
    CONF_AX_VW("w.view", 1, CONF_VIEWS), CONF_AX_VW("y.view", 2, CONF_VIEWS),
};

static void batched_derive(mla_variant *v)
{
    v->in_dtype = v->arg_dtype[1];
    v->out_dtype = v->arg_dtype[2];
}

const conf_op_axes conf_axes_batched_gemm = {
    .op = MLA_OP_BATCHED_GEMM,
    .axes = batched_axes,
    .naxes = (int)(sizeof batched_axes / sizeof batched_axes[0]),
    .base = {.group = 48, .rows = 4, .cols = 64, .nargs = 3},
    .derive = batched_derive,
    .full = 1u << B_X | 1u << B_W | 1u << B_Y};

/* [3, 4, 64] @ [3, 64, 40] */
static void batched_design(const conf_point *pt, int k, conf_case *c)
{
    c->p.gemm = (conf_p_gemm){(mla_dtype)CONF_VAL(pt, B_X),
                              (mla_dtype)CONF_VAL(pt, B_W),
                              (mla_dtype)CONF_VAL(pt, B_Y),
                              3,
                              4,
                              64,
                              40,
                              conf_lay_of_view(CONF_VAL(pt, B_XV), 3, k),
                              conf_lay_of_view(CONF_VAL(pt, B_WV), 3, k + 1),
                              conf_lay_of_view(CONF_VAL(pt, B_YV), 3, k + 2),
                              0,
                              0,
                              CONF_VAL(pt, B_W) == MLA_DTYPE_BF16 ? 1.0 : 0.0173,
                              CONF_DIST_ACT};
    c->note = " (pairwise)";
}

static int build_linear(conf_case *cases, int cap)
{
    conf_builder b = {.cases = cases, .cap = cap, .suite = &conf_suite_linear};
    const mla_dtype bf16 = MLA_DTYPE_BF16, f32 = MLA_DTYPE_F32, fp8 = MLA_DTYPE_FP8_E4M3FN;
    const unsigned C = CONF_L_CONTIG, P = CONF_L_PAD, T = CONF_L_COLMAJOR;
    for (int wi = 0; wi < 2; ++wi)
        for (int k = 0; k < 4; ++k)
            add(&b, xy[k][0], wi ? fp8 : bf16, xy[k][1], 1, 3, 256, 192, C, C, C, 0, 1.0, NULL);
    add(&b, bf16, fp8, bf16, 1, 5, 200, 130, P, C, P, 0, 1.0, " N, K % 128 != 0");
    add(&b, f32, fp8, f32, 1, 1, 576, 257, C, T, C, 0, 1.0, " w transposed");
    add(&b, bf16, fp8, f32, 1, 2, 2048, 40, C, C, P, 0, 1.0, " deep K");
    add(&b, bf16, bf16, bf16, 1, 4, 130, 70, P | CONF_L_OFFSET, T, P, 0, 1.0, " strided");
    add(&b, f32, bf16, f32, 1, 2, 1, 9, C, C, C, 0, 1.0, " K=1");
    add(&b, bf16, fp8, bf16, 1, 0, 256, 64, C, C, C, 0, 1.0, " T=0");
    /* T > 16: the HIP matrix tiles (MLA_HIP_GEMM_SPLITS=n splits their K). */
    add(&b, bf16, fp8, bf16, 1, 40, 1000, 200, C, C, C, 0, 1.0, " T=40, N, K % 128 != 0");
    add(&b, bf16, bf16, f32, 1, 130, 600, 136, C, C, P, 0, 1.0, " T=130");
    /* bf16 W read in place by the CPU's AVX2 kernel up to 4 tokens (token pairs,
     * a last odd token; K past a multiple of 16, N past a multiple of 3,
     * padded rows), and 5 tokens over its decoded rows */
    add(&b, bf16, bf16, f32, 1, 1, 300, 131, C, P, C, 0, 1.0, " T=1, K % 16 != 0");
    add(&b, f32, bf16, bf16, 1, 2, 17, 50, P, P, P, 0, 1.0, " T=2, K=17");
    add(&b, bf16, bf16, bf16, 1, 3, 48, 7, C, C, C, 0, 1.0, " T=3, K % 16 == 0");
    add(&b, f32, bf16, f32, 1, 4, 2048, 97, C, C, C, 0, 1.0, " T=4, deep K");
    add(&b, bf16, bf16, f32, 1, 5, 300, 130, C, P, C, 0, 1.0, " T=5");
    conf_push_design(&b, &conf_axes_linear, linear_design);
    return b.n;
}

static int build_batched(conf_case *cases, int cap)
{
    conf_builder b = {.cases = cases, .cap = cap, .suite = &conf_suite_batched_gemm};
    const mla_dtype bf16 = MLA_DTYPE_BF16, f32 = MLA_DTYPE_F32, fp8 = MLA_DTYPE_FP8_E4M3FN;
    const unsigned C = CONF_L_CONTIG, P = CONF_L_PAD;
    for (int wi = 0; wi < 2; ++wi)
        for (int k = 0; k < 4; ++k)
            add(&b, xy[k][0], wi ? fp8 : bf16, xy[k][1], 3, 4, 64, 48, k == 2 ? P : C, C,
                k == 3 ? P : C, 0, wi ? 0.0173 : 1.0, NULL);
    add(&b, bf16, bf16, bf16, 4, 3, NOPE, 128, C, C, C, 1, 1.0, " absorb W_kc, y [T,H,L]");
    add(&b, bf16, bf16, f32, 4, 5, NOPE, 128, C, C, C, 1, 1.0, " absorb W_kc, y [T,H,L]");
    add(&b, f32, fp8, bf16, 4, 3, NOPE, 128, C, C, C, 1, 0.021, " absorb W_kc, y [T,H,L]");
    add(&b, bf16, bf16, bf16, 4, 3, 128, VDIM, C, C, C, 2, 1.0, " W_vc, y [T,H,v]");
    /* W_vc's k-contiguous columns at decode (the CPU's dot-product path up to
     * 16 rows, in token groups of 8; 17 rows take the tiled path): each
     * dtype varied on its own, K past a multiple of 16 */
    add(&b, f32, bf16, bf16, 3, 1, 128, VDIM, C, C, C, 2, 1.0, " W_vc, T=1");
    add(&b, bf16, fp8, bf16, 3, 1, 130, VDIM, C, C, C, 2, 0.0173, " W_vc, T=1, K % 16 != 0");
    add(&b, bf16, bf16, f32, 2, 9, 64, VDIM, C, C, C, 2, 1.0, " W_vc, T=9");
    add(&b, bf16, fp8, f32, 2, 16, 96, VDIM, C, C, C, 2, 0.021, " W_vc, T=16");
    add(&b, f32, fp8, bf16, 2, 17, 64, VDIM, C, C, C, 2, 0.021, " W_vc, T=17");
    /* bf16 W read in place by the CPU's AVX2 kernel (16 columns x up to 6 rows,
     * scalar columns past a multiple of 16, padded W rows) */
    add(&b, bf16, bf16, f32, 2, 1, 33, 100, C, P, C, 0, 1.0, " M=1, N % 16 != 0");
    add(&b, f32, bf16, bf16, 2, 6, 64, 40, C, C, P, 0, 0.37, " M=6");
    add(&b, bf16, bf16, bf16, 2, 7, 16, 5, C, P, C, 0, 1.0, " M=7, N=5");
    add(&b, bf16, bf16, f32, 4, 1, NOPE, 128, C, C, C, 1, 1.0, " absorb W_kc, T=1");
    add(&b, bf16, bf16, bf16, 2, 0, 64, 16, C, C, C, 0, 1.0, " M=0");
    conf_push_design(&b, &conf_axes_batched_gemm, batched_design);
    return b.n;
}

/* Every value of an input arg, decoded, in logical order. */
static double *values(const conf_arg *a)
{
    int64_t n = conf_numel(a);
    double *v = malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
    for (int64_t k = 0; v && k < n; ++k)
        v[k] = conf_in_value(a, k);
    return v;
}

/* fp8 weights: finite codes; scales positive, 2^-10 .. 2^-5; bf16: activations. */
static void fill_weight(conf_problem *p, int iw, int is, uint64_t seed, int64_t row)
{
    if (p->arg[iw].t.dtype == MLA_DTYPE_BF16) {
        conf_fill(p, iw, CONF_DIST_ACT, seed, row);
        return;
    }
    conf_fill(p, iw, CONF_DIST_CODES_FINITE, seed, row);
    for (int64_t k = 0; is >= 0 && k < conf_numel(&p->arg[is]); ++k) {
        uint64_t r = conf_rng(seed, 11, (uint64_t)k, 0);
        conf_set_value(p, is, k, ldexp(1.0 + (double)(r & 0xFFFF) / 65536.0, -10 + (int)(r % 6)));
    }
}

static mla_status setup_linear(const conf_case *c, const conf_env *env, conf_problem *p,
                               char *err, size_t errlen)
{
    (void)env;
    const conf_p_gemm *q = &c->p.gemm;
    const int64_t T = q->M, K = q->K, N = q->N;
    const int fp8 = q->w != MLA_DTYPE_BF16;
    int64_t xs[2] = {T, K}, ws[2] = {N, K}, ys[2] = {T, N};
    int64_t ss[2] = {ceil_div(N, BLOCK), ceil_div(K, BLOCK)};
    mla_status st = conf_add_arg(p, "x", CONF_IN, q->x, 2, xs, q->x_lay);
    if (st == MLA_OK)
        st = conf_add_arg(p, "w", CONF_IN, q->w, 2, ws, q->w_lay);
    if (st == MLA_OK)
        st = conf_add_arg(p, "y", CONF_OUT, q->y, 2, ys, q->y_lay);
    if (st == MLA_OK && fp8)
        st = conf_add_arg(p, "w_scale", CONF_IN, MLA_DTYPE_F32, 2, ss, q->w_scale_lay);
    if (st != MLA_OK) {
        snprintf(err, errlen, "cannot lay out the case (%s)", mla_status_name(st));
        return st;
    }
    conf_fill(p, IX, q->dist, c->seed, K);
    fill_weight(p, IW, fp8 ? IS : -1, c->seed ^ 5, K);
    return conf_linear_tol(p, IX, IW, fp8 ? IS : -1, IY);
}

mla_status conf_linear_tol(conf_problem *p, int ix, int iw, int is, int iy)
{
    const int64_t T = p->arg[ix].t.shape[0], K = p->arg[ix].t.shape[1], N = p->arg[iw].t.shape[0];
    double *tol = conf_tol_alloc(p, iy, 1.0);
    double *x = values(&p->arg[ix]), *w = values(&p->arg[iw]);
    double *s = is >= 0 ? values(&p->arg[is]) : NULL;
    if (!tol || !x || !w || (is >= 0 && !s)) {
        free(x), free(w), free(s);
        return MLA_ERR_OUT_OF_MEMORY;
    }
    /* the dequantized weight, exact in double: block scales, or one for the tensor */
    const int64_t sc = is >= 0 ? p->arg[is].t.shape[1] : 0;
    const int one = is >= 0 && conf_numel(&p->arg[is]) == 1;
    for (int64_t n = 0; n < N; ++n)
        for (int64_t k = 0; is >= 0 && k < K; ++k)
            w[n * K + k] *= s[one ? 0 : (n / BLOCK) * sc + k / BLOCK];
    for (int64_t t = 0; t < T; ++t)
        for (int64_t n = 0; n < N; ++n) {
            double S = 0.0;
            for (int64_t k = 0; k < K; ++k)
                S += fabs(x[t * K + k] * w[n * K + k]);
            tol[t * N + n] = conf_gemm_tol(K, S);
        }
    free(x), free(w), free(s);
    return MLA_OK;
}

static mla_status exec_linear(mla_context *ctx, const conf_case *c, mla_tensor *t)
{
    return mla_linear(ctx, &t[IX], &t[IW], c->p.gemm.w != MLA_DTYPE_BF16 ? &t[IS] : NULL, &t[IY]);
}

/* x, w and y of a batched case: plain ([B, M, K] etc. in the case's
 * layouts) or the absorb's views (B = H heads, M = T tokens). */
static mla_status add_batched(const conf_case *c, conf_problem *p)
{
    const conf_p_gemm *q = &c->p.gemm;
    const int64_t B = q->B, M = q->M, K = q->K, N = q->N;
    const mla_dtype xd = q->x, wd = q->w, yd = q->y;
    int64_t xs[3] = {B, M, K}, ws[3] = {B, K, N}, ys[3] = {B, M, N};
    mla_status st;
    switch (q->view) {
    case 1: { /* q_nope [H, T, nope] in q [T, H, nope + R]; W_kc [H, nope, L] in kv_b_proj
               * [H * (nope + v), L]; y [H, T, L] over a [T, H, L] buffer */
        int64_t qk = NOPE + ROPE;
        st = conf_add_view(p, "q_nope", CONF_IN, xd, 3, xs, (int64_t[]){qk, B * qk, 1}, 0);
        if (st == MLA_OK)
            st = conf_add_view(p, "w_kc", CONF_IN, wd, 3, ws,
                               (int64_t[]){(NOPE + VDIM) * N, N, 1}, 0);
        break;
    }
    case 2: /* o_lat [H, T, L] over [T, H, L]; W_vc [H, L, v] = kv_b_proj rows nope.. transposed */
        st = conf_add_view(p, "o_lat", CONF_IN, xd, 3, xs, (int64_t[]){K, B * K, 1}, 0);
        if (st == MLA_OK)
            st = conf_add_view(p, "w_vc", CONF_IN, wd, 3, ws,
                               (int64_t[]){(NOPE + VDIM) * K, 1, K}, NOPE * K);
        break;
    default:
        st = conf_add_arg(p, "x", CONF_IN, xd, 3, xs, q->x_lay);
        if (st == MLA_OK)
            st = conf_add_arg(p, "w", CONF_IN, wd, 3, ws, q->w_lay);
        if (st == MLA_OK)
            st = conf_add_arg(p, "y", CONF_OUT, yd, 3, ys, q->y_lay);
        return st;
    }
    if (st == MLA_OK) /* the transposed output view */
        st = conf_add_view(p, "y", CONF_OUT, yd, 3, ys, (int64_t[]){N, B * N, 1}, 0);
    return st;
}

static mla_status setup_batched(const conf_case *c, const conf_env *env, conf_problem *p,
                                char *err, size_t errlen)
{
    (void)env;
    const conf_p_gemm *q = &c->p.gemm;
    mla_status st = add_batched(c, p);
    if (st != MLA_OK) {
        snprintf(err, errlen, "cannot lay out the case (%s)", mla_status_name(st));
        return st;
    }
    conf_fill(p, IX, q->dist, c->seed, q->K);
    fill_weight(p, IW, -1, c->seed ^ 5, q->N);
    return conf_batched_tol(p, IX, IW, IY, (float)q->w_scale);
}

mla_status conf_batched_tol(conf_problem *p, int ix, int iw, int iy, float w_scale)
{
    const conf_arg *xa = &p->arg[ix];
    const int64_t B = xa->t.shape[0], M = xa->t.shape[1], K = xa->t.shape[2];
    const int64_t N = p->arg[iw].t.shape[2];
    double *tol = conf_tol_alloc(p, iy, 1.0);
    double *x = values(xa), *w = values(&p->arg[iw]);
    if (!tol || !x || !w) {
        free(x), free(w);
        return MLA_ERR_OUT_OF_MEMORY;
    }
    for (int64_t b = 0; b < B; ++b)
        for (int64_t m = 0; m < M; ++m)
            for (int64_t n = 0; n < N; ++n) {
                double S = 0.0;
                for (int64_t k = 0; k < K; ++k)
                    S += fabs(x[(b * M + m) * K + k] * w[(b * K + k) * N + n]);
                tol[(b * M + m) * N + n] = conf_gemm_tol(K, fabsf(w_scale) * S);
            }
    free(x), free(w);
    return MLA_OK;
}

static mla_status exec_batched(mla_context *ctx, const conf_case *c, mla_tensor *t)
{
    return mla_batched_gemm(ctx, &t[IX], &t[IW], (float)c->p.gemm.w_scale, &t[IY]);
}

const conf_suite conf_suite_linear = {.name = "linear",
                                      .op = MLA_OP_LINEAR,
                                      .build = build_linear,
                                      .setup = setup_linear,
                                      .exec = exec_linear,
                                      .label = label,
                                      .fields = linear_fields,
                                      .nfields = CONF_NFIELDS(linear_fields)};
const conf_suite conf_suite_batched_gemm = {.name = "batched_gemm",
                                            .op = MLA_OP_BATCHED_GEMM,
                                            .build = build_batched,
                                            .setup = setup_batched,
                                            .exec = exec_batched,
                                            .label = label,
                                            .fields = batched_fields,
                                            .nfields = CONF_NFIELDS(batched_fields)};
