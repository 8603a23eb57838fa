/* mla_rmsnorm and mla_fused_qk_rmsnorm: every float dtype in and out, strided
 * rows, odd row lengths, in place, NaN / Inf rows, a large eps; the fused
 * norm also with q_out quantized (fp8 e4m3fn / e4m3fnuz group 128, MXFP4).
 * Not bit-defined (free summation order, any rsqrt): float outputs are held
 * to the derived bound of conformance/bounds.c (conf_norm_rel), quantized
 * q_out and its scales to that of compare_quant.c. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "conformance/cover.h"

#define U32 0x1p-24

static const mla_dtype floats[] = {MLA_DTYPE_BF16, MLA_DTYPE_F32, MLA_DTYPE_F16};

static int is_quant(mla_dtype d)
{
    return d == MLA_DTYPE_FP8_E4M3FN || d == MLA_DTYPE_FP8_E4M3FNUZ || d == MLA_DTYPE_FP4X2;
}

static void short_name(mla_dtype d, char *buf, size_t len)
{
    const char *n = mla_dtype_name(d);
    snprintf(buf, len, "%s", strncmp(n, "fp8_", 4) ? n : n + 4);
}

static void label_pair(conf_case *c, mla_dtype in, mla_dtype out)
{
    char a[16], b[16];
    short_name(in, a, sizeof a);
    short_name(out, b, sizeof b);
    snprintf(c->label, sizeof c->label, "%s->%s", a, b);
}

/* The bound of a float output: conf_norm_rel times the exact value. */
mla_status conf_norm_tol(conf_problem *p, int ix, int iw, int iy, double eps)
{
    const int64_t n = conf_numel(&p->arg[ix]), D = p->arg[ix].t.shape[1];
    double *y = malloc((size_t)(n > 0 ? n : 1) * sizeof *y);
    double *tol = conf_tol_alloc(p, iy, 1.0);
    if (!y || !tol) {
        free(y);
        return MLA_ERR_OUT_OF_MEMORY;
    }
    conf_rmsnorm_exact(p, ix, iw, eps, y);
    const double rel = conf_norm_rel(D);
    for (int64_t k = 0; k < n; ++k)
        tol[k] = isfinite(y[k]) ? rel * fabs(y[k]) : 0.0;
    free(y);
    return MLA_OK;
}

/* ------------------------------------------------------------ rmsnorm */

static const conf_field rms_fields[] = {
    CONF_FIELD(rms, x, CONF_F_DTYPE),
    CONF_FIELD(rms, w, CONF_F_DTYPE),
    CONF_FIELD(rms, y, CONF_F_DTYPE),
    CONF_FIELD(rms, T, CONF_F_I64),
    CONF_FIELD(rms, D, CONF_F_I64),
    CONF_FIELD(rms, x_lay, CONF_F_LAY),
    CONF_FIELD(rms, w_lay, CONF_F_LAY),
    CONF_FIELD(rms, y_lay, CONF_F_LAY),
    CONF_FIELD(rms, in_place, CONF_F_I32),
    CONF_FIELD(rms, eps, CONF_F_REAL),
    CONF_ENUM(rms, dist, conf_name_dist, CONF_DIST_COUNT),
};

static void label_rms(conf_case *c) { label_pair(c, c->p.rms.x, c->p.rms.y); }

/* x and y of one layout, w = x's dtype unless changed */
static void rms_case(conf_case *c, mla_dtype x, mla_dtype y, int64_t T, int64_t D, unsigned lay,
                     int in_place, double eps, const char *note)
{
    memset(c, 0, sizeof *c);
    c->golden = -1;
    c->note = note;
    c->p.rms =
        (conf_p_rmsnorm){x, x, y, T, D, lay, CONF_L_CONTIG, lay, in_place, eps, CONF_DIST_ACT};
}

enum { R_X, R_W, R_Y, R_XV, R_WV, R_YV };

static const conf_axis rms_axes[] = {
    CONF_AX_DT("x.dtype", 0, CONF_FLOATS),  CONF_AX_DT("w.dtype", 1, CONF_FLOATS),
    CONF_AX_DT("y.dtype", 2, CONF_FLOATS),  CONF_AX_VW("x.view", 0, CONF_VIEWS),
    CONF_AX_VW("w.view", 1, CONF_VIEWS_1D), CONF_AX_VW("y.view", 2, CONF_VIEWS, MLA_ARG_IN_PLACE),
};

static int same_size(int64_t a, int64_t b)
{
    return mla_dtype_size((mla_dtype)a) == mla_dtype_size((mla_dtype)b);
}

/* y in place over x: the same element size */
static int rms_legal(const conf_point *p)
{
    return !CONF_HAS(p, R_YV) || CONF_VAL(p, R_YV) != MLA_ARG_IN_PLACE ||
           CONF_RULE(p, R_X, R_Y, same_size(CONF_VAL(p, R_X), CONF_VAL(p, R_Y)));
}

static void rms_derive(mla_variant *v)
{
    v->in_dtype = v->arg_dtype[0];
    v->out_dtype = v->arg_dtype[2];
}

const conf_op_axes conf_axes_rmsnorm = {.op = MLA_OP_RMSNORM,
                                        .axes = rms_axes,
                                        .naxes = (int)(sizeof rms_axes / sizeof rms_axes[0]),
                                        .base = {.rows = 6, .cols = 64, .nargs = 3},
                                        .derive = rms_derive,
                                        .legal = rms_legal,
                                        .full = 1u << R_X | 1u << R_W | 1u << R_Y};

static void rms_design(const conf_point *pt, int k, conf_case *c)
{
    const int in_place = CONF_VAL(pt, R_YV) == MLA_ARG_IN_PLACE;
    c->p.rms = (conf_p_rmsnorm){(mla_dtype)CONF_VAL(pt, R_X),
                                (mla_dtype)CONF_VAL(pt, R_W),
                                (mla_dtype)CONF_VAL(pt, R_Y),
                                5,
                                48,
                                conf_lay_of_view(CONF_VAL(pt, R_XV), 2, k),
                                conf_lay_of_view(CONF_VAL(pt, R_WV), 1, k),
                                in_place ? 0 : conf_lay_of_view(CONF_VAL(pt, R_YV), 2, k + 1),
                                in_place,
                                1e-6,
                                k % 7 == 6 ? CONF_DIST_ACT_SPECIALS : CONF_DIST_ACT};
    c->note = " (pairwise)";
}

static int build_rmsnorm(conf_case *cases, int cap)
{
    conf_builder b = {.cases = cases, .cap = cap, .suite = &conf_suite_rmsnorm};
    conf_case c;
    for (int xi = 0; xi < 3; ++xi)
        for (int yi = 0; yi < 3; ++yi) {
            rms_case(&c, floats[xi], floats[yi], 6, 64, CONF_L_CONTIG, 0, 1e-6, NULL);
            c.p.rms.w = floats[(xi + yi + 1) % 3];
            conf_push(&b, &c);
        }
    /* kv_lora rows inside a wider buffer (row stride > D), and q_lora */
    for (int xi = 0; xi < 3; ++xi) {
        rms_case(&c, floats[xi], floats[xi], 5, 512, CONF_L_PAD, 0, 1e-6, " strided rows");
        conf_push(&b, &c);
    }
    rms_case(&c, MLA_DTYPE_BF16, MLA_DTYPE_BF16, 2, 1536, CONF_L_CONTIG, 0, 1e-6, " q_lora");
    conf_push(&b, &c);
    rms_case(&c, MLA_DTYPE_F32, MLA_DTYPE_F32, 3, 33, CONF_L_OFFSET, 0, 1e-6, " odd D");
    conf_push(&b, &c);
    rms_case(&c, MLA_DTYPE_BF16, MLA_DTYPE_F32, 7, 128, CONF_L_CONTIG, 0, 1e-2, " eps 1e-2");
    conf_push(&b, &c);
    for (int xi = 0; xi < 3; ++xi) {
        rms_case(&c, floats[xi], floats[xi], 4, 128, CONF_L_PAD, 1, 1e-6, " in place");
        conf_push(&b, &c);
    }
    for (int xi = 0; xi < 2; ++xi) {
        rms_case(&c, floats[xi], floats[xi], 6, 64, CONF_L_CONTIG, 0, 1e-6, " nan/inf");
        c.p.rms.dist = CONF_DIST_ACT_SPECIALS;
        conf_push(&b, &c);
    }
    rms_case(&c, MLA_DTYPE_BF16, MLA_DTYPE_BF16, 0, 64, CONF_L_CONTIG, 0, 1e-6, " T=0");
    conf_push(&b, &c);
    conf_push_design(&b, &conf_axes_rmsnorm, rms_design);
    return b.n;
}

static mla_status setup_rmsnorm(const conf_case *c, const conf_env *env, conf_problem *p,
                                char *err, size_t errlen)
{
    (void)env;
    const conf_p_rmsnorm *q = &c->p.rms;
    const int64_t T = q->T, D = q->D;
    int64_t xs[2] = {T, D}, ws[1] = {D};
    mla_status st = conf_add_arg(p, "x", q->in_place ? CONF_INOUT : CONF_IN, q->x, 2, xs, q->x_lay);
    if (st == MLA_OK)
        st = conf_add_arg(p, "w", CONF_IN, q->w, 1, ws, q->w_lay);
    if (st == MLA_OK && !q->in_place)
        st = conf_add_arg(p, "y", CONF_OUT, q->y, 2, xs, q->y_lay);
    if (st != MLA_OK) {
        snprintf(err, errlen, "cannot lay out the case (%s)", mla_status_name(st));
        return st;
    }
    conf_fill(p, 0, q->dist, c->seed, D);
    conf_fill(p, 1, CONF_DIST_NORM_WEIGHT, c->seed ^ 1, D);
    st = conf_norm_tol(p, 0, 1, q->in_place ? 0 : 2, q->eps);
    p->arg[0].t.dtype = q->in_place ? q->y : q->x; /* in place: y's values come back */
    return st;
}

static mla_status exec_rmsnorm(mla_context *ctx, const conf_case *c, mla_tensor *t)
{
    const conf_p_rmsnorm *q = &c->p.rms;
    mla_tensor x = t[0];
    x.dtype = q->x;
    return mla_rmsnorm(ctx, &x, &t[1], (float)q->eps, q->in_place ? &t[0] : &t[2]);
}

const conf_suite conf_suite_rmsnorm = {.name = "rmsnorm",
                                       .op = MLA_OP_RMSNORM,
                                       .build = build_rmsnorm,
                                       .setup = setup_rmsnorm,
                                       .exec = exec_rmsnorm,
                                       .label = label_rms,
                                       .fields = rms_fields,
                                       .nfields = CONF_NFIELDS(rms_fields)};

/* ------------------------------------------------- fused QK RMSNorm */

enum { IQ, IQW, IKV, IKVW, IQO, IKVO, IQS }; /* argument order; in place: IQ..IKVW only */

static const conf_field qk_fields[] = {
    CONF_FIELD(qk, q, CONF_F_DTYPE),          CONF_FIELD(qk, q_w, CONF_F_DTYPE),
    CONF_FIELD(qk, kv, CONF_F_DTYPE),         CONF_FIELD(qk, kv_w, CONF_F_DTYPE),
    CONF_FIELD(qk, q_out, CONF_F_DTYPE),      CONF_FIELD(qk, q_scales, CONF_F_DTYPE),
    CONF_FIELD(qk, kv_out, CONF_F_DTYPE),     CONF_FIELD(qk, T, CONF_F_I64),
    CONF_FIELD(qk, Dq, CONF_F_I64),           CONF_FIELD(qk, Dkv, CONF_F_I64),
    CONF_FIELD(qk, q_lay, CONF_F_LAY),        CONF_FIELD(qk, kv_lay, CONF_F_LAY),
    CONF_FIELD(qk, q_out_lay, CONF_F_LAY),    CONF_FIELD(qk, kv_out_lay, CONF_F_LAY),
    CONF_FIELD(qk, q_scales_lay, CONF_F_LAY), CONF_FIELD(qk, q_in_place, CONF_F_I32),
    CONF_FIELD(qk, kv_in_place, CONF_F_I32),  CONF_FIELD(qk, q_eps, CONF_F_REAL),
    CONF_FIELD(qk, kv_eps, CONF_F_REAL),      CONF_ENUM(qk, dist, conf_name_dist, CONF_DIST_COUNT),
};

static void label_qk(conf_case *c) { label_pair(c, c->p.qk.q, c->p.qk.q_out); }

/* q, q_w and kv in q's dtype, kv_w f32, kv_out q_out's (bf16 when q_out is
 * quantized); in place: both outputs over their inputs. */
static void qk_case(conf_case *c, mla_dtype in, mla_dtype out, int64_t T, int64_t D, unsigned lay,
                    int in_place, const char *note)
{
    memset(c, 0, sizeof *c);
    c->golden = -1;
    c->note = note;
    const int quant = is_quant(out), fp4 = out == MLA_DTYPE_FP4X2;
    c->p.qk = (conf_p_qk_rmsnorm){in,
                                  in,
                                  in,
                                  MLA_DTYPE_F32,
                                  out,
                                  !quant ? MLA_DTYPE_COUNT
                                  : fp4  ? MLA_DTYPE_E8M0
                                         : MLA_DTYPE_F32,
                                  quant ? MLA_DTYPE_BF16 : out,
                                  T,
                                  D,
                                  128,
                                  lay,
                                  lay,
                                  lay,
                                  lay,
                                  lay & CONF_L_PAD,
                                  in_place,
                                  in_place,
                                  1e-6,
                                  1e-6,
                                  CONF_DIST_ACT};
}

enum { K_Q, K_QW, K_KV, K_KVW, K_QO, K_QS, K_KVO, K_QV, K_KVV, K_QOV, K_KVOV, K_QSV };

static const conf_axis qk_axes[] = {
    CONF_AX_DT("q.dtype", 0, CONF_FLOATS),
    CONF_AX_DT("q_w.dtype", 1, CONF_FLOATS),
    CONF_AX_DT("kv.dtype", 2, CONF_FLOATS),
    CONF_AX_DT("kv_w.dtype", 3, CONF_FLOATS),
    CONF_AX_DT("q_out.dtype", 4, CONF_FLOATS, CONF_FP8S, MLA_DTYPE_FP4X2),
    CONF_AX_DT("q_scales.dtype", 5, MLA_DTYPE_COUNT, MLA_DTYPE_F32, MLA_DTYPE_E8M0, MLA_DTYPE_U8),
    CONF_AX_DT("kv_out.dtype", 6, CONF_FLOATS),
    CONF_AX_VW("q.view", 0, CONF_VIEWS),
    CONF_AX_VW("kv.view", 2, CONF_VIEWS),
    CONF_AX_VW("q_out.view", 4, CONF_VIEWS, MLA_ARG_IN_PLACE),
    CONF_AX_VW("kv_out.view", 6, CONF_VIEWS, MLA_ARG_IN_PLACE),
    CONF_AX_VW("q_scales.view", 5, CONF_VIEWS, MLA_ARG_ABSENT),
};

/* q_scales go with a quantized q_out (f32 with fp8, e8m0 or u8 bytes with
 * MXFP4); an output in place over its input: a float one of the same size. */
static int qk_legal(const conf_point *p)
{
    const int64_t qo = CONF_VAL(p, K_QO), qs = CONF_VAL(p, K_QS);
    const int quant = qo != MLA_DTYPE_F32 && qo != MLA_DTYPE_BF16 && qo != MLA_DTYPE_F16;
    if (!CONF_RULE(p, K_QO, K_QS,
                   !quant                  ? qs == MLA_DTYPE_COUNT
                   : qo == MLA_DTYPE_FP4X2 ? qs == MLA_DTYPE_E8M0 || qs == MLA_DTYPE_U8
                                           : qs == MLA_DTYPE_F32))
        return 0;
    if (!CONF_RULE(p, K_QS, K_QSV,
                   (qs == MLA_DTYPE_COUNT) == (CONF_VAL(p, K_QSV) == MLA_ARG_ABSENT)))
        return 0;
    if (CONF_HAS(p, K_QOV) && CONF_VAL(p, K_QOV) == MLA_ARG_IN_PLACE &&
        !(CONF_RULE(p, K_Q, K_QO, same_size(CONF_VAL(p, K_Q), qo)) &&
          (!CONF_HAS(p, K_QO) || !quant)))
        return 0;
    return !CONF_HAS(p, K_KVOV) || CONF_VAL(p, K_KVOV) != MLA_ARG_IN_PLACE ||
           CONF_RULE(p, K_KV, K_KVO, same_size(CONF_VAL(p, K_KV), CONF_VAL(p, K_KVO)));
}

static void qk_derive(mla_variant *v)
{
    v->in_dtype = v->arg_dtype[0];
    v->out_dtype = v->arg_dtype[4];
}

const conf_op_axes conf_axes_qk_rmsnorm = {.op = MLA_OP_QK_RMSNORM,
                                           .axes = qk_axes,
                                           .naxes = (int)(sizeof qk_axes / sizeof qk_axes[0]),
                                           .base = {.rows = 4, .cols = 256, .nargs = 7},
                                           .derive = qk_derive,
                                           .legal = qk_legal,
                                           .full = 1u << K_Q | 1u << K_QO};

/* q [4, 256], kv [4, 128]: whole fp8 groups of 128 and MXFP4 blocks of 32 */
static void qk_design(const conf_point *pt, int k, conf_case *c)
{
    const int q_in = CONF_VAL(pt, K_QOV) == MLA_ARG_IN_PLACE;
    const int kv_in = CONF_VAL(pt, K_KVOV) == MLA_ARG_IN_PLACE;
    const mla_dtype qo = (mla_dtype)CONF_VAL(pt, K_QO);
    const int64_t qsv = CONF_VAL(pt, K_QSV);
    c->p.qk = (conf_p_qk_rmsnorm){(mla_dtype)CONF_VAL(pt, K_Q),
                                  (mla_dtype)CONF_VAL(pt, K_QW),
                                  (mla_dtype)CONF_VAL(pt, K_KV),
                                  (mla_dtype)CONF_VAL(pt, K_KVW),
                                  qo,
                                  (mla_dtype)CONF_VAL(pt, K_QS),
                                  (mla_dtype)CONF_VAL(pt, K_KVO),
                                  4,
                                  256,
                                  128,
                                  conf_lay_of_view(CONF_VAL(pt, K_QV), 2, k),
                                  conf_lay_of_view(CONF_VAL(pt, K_KVV), 2, k + 1),
                                  q_in ? 0 : conf_lay_of_view(CONF_VAL(pt, K_QOV), 2, k + 2),
                                  kv_in ? 0 : conf_lay_of_view(CONF_VAL(pt, K_KVOV), 2, k + 3),
                                  qsv == MLA_ARG_ABSENT ? 0 : conf_lay_of_view(qsv, 2, k),
                                  q_in,
                                  kv_in,
                                  1e-6,
                                  1e-5,
                                  qo == MLA_DTYPE_FP4X2 ? CONF_DIST_ACT_NARROW : CONF_DIST_ACT};
    c->note = " (pairwise)";
}

static int build_qk(conf_case *cases, int cap)
{
    conf_builder b = {.cases = cases, .cap = cap, .suite = &conf_suite_qk_rmsnorm};
    static const mla_dtype pairs[][2] = {{MLA_DTYPE_BF16, MLA_DTYPE_BF16},
                                         {MLA_DTYPE_F32, MLA_DTYPE_F32},
                                         {MLA_DTYPE_F16, MLA_DTYPE_F16},
                                         {MLA_DTYPE_BF16, MLA_DTYPE_F32},
                                         {MLA_DTYPE_F32, MLA_DTYPE_BF16}};
    conf_case c;
    for (int i = 0; i < 5; ++i) { /* test-tiny's q_lora 96 and kv_lora 128 */
        qk_case(&c, pairs[i][0], pairs[i][1], 4, 96, CONF_L_CONTIG, 0, NULL);
        c.p.qk.kv_eps = 1e-5;
        conf_push(&b, &c);
    }
    qk_case(&c, MLA_DTYPE_BF16, MLA_DTYPE_BF16, 3, 1536, CONF_L_PAD, 0, " V3 dims, strided rows");
    c.p.qk.Dkv = 512;
    conf_push(&b, &c);
    static const mla_dtype quants[] = {MLA_DTYPE_FP8_E4M3FN, MLA_DTYPE_FP8_E4M3FNUZ,
                                       MLA_DTYPE_FP4X2};
    for (int qi = 0; qi < 3; ++qi)
        for (int xi = 0; xi < 2; ++xi)
            for (int k = 0; k < 2; ++k) {
                qk_case(&c, floats[xi], quants[qi], k ? 3 : 6, k ? 384 : 256,
                        k ? CONF_L_PAD : CONF_L_CONTIG, 0, k ? " strided" : NULL);
                if (quants[qi] == MLA_DTYPE_FP4X2)
                    c.p.qk.dist = CONF_DIST_ACT_NARROW;
                conf_push(&b, &c);
            }
    for (int xi = 0; xi < 2; ++xi) {
        qk_case(&c, floats[xi], floats[xi], 4, 96, CONF_L_PAD, 1, " in place");
        conf_push(&b, &c);
    }
    conf_push_design(&b, &conf_axes_qk_rmsnorm, qk_design);
    return b.n;
}

/* Argument i of a problem where the in-place outputs are not arguments of
 * their own: q_out is q, kv_out is kv. */
static int qk_arg(const conf_p_qk_rmsnorm *q, int i)
{
    if (i == IQO && q->q_in_place)
        return IQ;
    if (i == IKVO && q->kv_in_place)
        return IKV;
    return i - (i > IQO && q->q_in_place) - (i > IKVO && q->kv_in_place);
}

/* Quantized q_out: the value bound (norm bound + the quantizer's fp32
 * product, 7u more) and the scale bound, see compare_quant.c. */
mla_status conf_qk_quant_tol(conf_problem *p, int iq, int iqw, double eps, int iqo, int iqs)
{
    const int64_t T = p->arg[iq].t.shape[0], D = p->arg[iq].t.shape[1];
    const mla_dtype q_out = p->arg[iqo].t.dtype;
    const int fp4 = q_out == MLA_DTYPE_FP4X2;
    const int64_t group = fp4 ? 32 : 128, G = D / group;
    double *y = malloc((size_t)(T * D > 0 ? T * D : 1) * sizeof *y);
    double *tq = conf_tol_alloc(p, iqo, 0.0), *ts = conf_tol_alloc(p, iqs, 0.0);
    if (!y || !tq || !ts) {
        free(y);
        return MLA_ERR_OUT_OF_MEMORY;
    }
    conf_rmsnorm_exact(p, iq, iqw, eps, y);
    const double rel = conf_norm_rel(D) + 7.0 * U32,
                 fp8_max = q_out == MLA_DTYPE_FP8_E4M3FNUZ ? 240.0 : 448.0;
    for (int64_t t = 0; t < T; ++t)
        for (int64_t g = 0; g < G; ++g) {
            double amax = 0.0;
            for (int64_t i = 0; i < group; ++i) {
                const int64_t k = t * D + g * group + i;
                tq[k] = rel * fabs(y[k]);
                amax = fmax(amax, fabs(y[k]));
            }
            /* the two group maxima differ by at most (rel + u) amax */
            const double da = (rel + U32) * amax;
            if (!fp4) {
                ts[t * G + g] = da / fp8_max;
                continue;
            }
            const float lo = nextafterf((float)(amax - da), 0.0f);
            const float hi = nextafterf((float)(amax + da), INFINITY);
            ts[t * G + g] = conf_mxfp4_scale_byte(hi) - conf_mxfp4_scale_byte(lo > 0 ? lo : 0);
        }
    free(y);
    return MLA_OK;
}

static mla_status setup_qk(const conf_case *c, const conf_env *env, conf_problem *p, char *err,
                           size_t errlen)
{
    (void)env;
    const conf_p_qk_rmsnorm *q = &c->p.qk;
    const int64_t T = q->T, Dq = q->Dq, Dkv = q->Dkv;
    const int fp4 = q->q_out == MLA_DTYPE_FP4X2, quant = is_quant(q->q_out);
    int64_t qs[2] = {T, Dq}, qws[1] = {Dq}, kvs[2] = {T, Dkv}, kvws[1] = {Dkv};
    int64_t qos[2] = {T, fp4 ? Dq / 2 : Dq}, ss[2] = {T, Dq / (fp4 ? 32 : 128)};
    mla_status st =
        conf_add_arg(p, "q", q->q_in_place ? CONF_INOUT : CONF_IN, q->q, 2, qs, q->q_lay);
    if (st == MLA_OK)
        st = conf_add_arg(p, "q_w", CONF_IN, q->q_w, 1, qws, CONF_L_CONTIG);
    if (st == MLA_OK)
        st = conf_add_arg(p, "kv", q->kv_in_place ? CONF_INOUT : CONF_IN, q->kv, 2, kvs, q->kv_lay);
    if (st == MLA_OK)
        st = conf_add_arg(p, "kv_w", CONF_IN, q->kv_w, 1, kvws, CONF_L_CONTIG);
    if (st == MLA_OK && !q->q_in_place)
        st = conf_add_arg(p, "q_out", CONF_OUT, q->q_out, 2, qos, q->q_out_lay);
    if (st == MLA_OK && !q->kv_in_place)
        st = conf_add_arg(p, "kv_out", CONF_OUT, q->kv_out, 2, kvs, q->kv_out_lay);
    if (st == MLA_OK && quant)
        st = conf_add_arg(p, "q_scales", CONF_OUT, q->q_scales, 2, ss, q->q_scales_lay);
    if (st != MLA_OK) {
        snprintf(err, errlen, "cannot lay out the case (%s)", mla_status_name(st));
        return st;
    }
    conf_fill(p, IQ, q->dist, c->seed, Dq);
    conf_fill(p, IQW, CONF_DIST_NORM_WEIGHT, c->seed ^ 1, Dq);
    conf_fill(p, IKV, q->dist, c->seed ^ 2, Dkv);
    conf_fill(p, IKVW, CONF_DIST_NORM_WEIGHT, c->seed ^ 3, Dkv);
    st = conf_norm_tol(p, IKV, IKVW, qk_arg(q, IKVO), q->kv_eps);
    if (st == MLA_OK)
        st = quant ? conf_qk_quant_tol(p, IQ, IQW, q->q_eps, IQO, qk_arg(q, IQS))
                   : conf_norm_tol(p, IQ, IQW, qk_arg(q, IQO), q->q_eps);
    p->arg[IQ].t.dtype = q->q_in_place ? q->q_out : q->q; /* in place: the outputs come back */
    p->arg[IKV].t.dtype = q->kv_in_place ? q->kv_out : q->kv;
    return st;
}

static mla_status exec_qk(mla_context *ctx, const conf_case *c, mla_tensor *t)
{
    const conf_p_qk_rmsnorm *q = &c->p.qk;
    mla_tensor qi = t[IQ], kvi = t[IKV];
    qi.dtype = q->q;
    kvi.dtype = q->kv;
    return mla_fused_qk_rmsnorm(
        ctx, &qi, &t[IQW], (float)q->q_eps, &kvi, &t[IKVW], (float)q->kv_eps, &t[qk_arg(q, IQO)],
        is_quant(q->q_out) ? &t[qk_arg(q, IQS)] : NULL, &t[qk_arg(q, IKVO)]);
}

/* Quantized q_out and q_scales are judged together (compare_quant.c). */
static int compare_qk(const conf_case *c, const conf_problem *p, int i, unsigned char *const *got,
                      unsigned char *const *want, conf_cmp *r)
{
    const conf_p_qk_rmsnorm *q = &c->p.qk;
    if (!is_quant(q->q_out) || (i != IQO && i != qk_arg(q, IQS)))
        return 0;
    conf_compare_quant(p, IQO, qk_arg(q, IQS), i, got, want, r);
    return 1;
}

const conf_suite conf_suite_qk_rmsnorm = {.name = "qk_rmsnorm",
                                          .op = MLA_OP_QK_RMSNORM,
                                          .build = build_qk,
                                          .setup = setup_qk,
                                          .exec = exec_qk,
                                          .compare = compare_qk,
                                          .label = label_qk,
                                          .fields = qk_fields,
                                          .nfields = CONF_NFIELDS(qk_fields)};
