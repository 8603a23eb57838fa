/* mla_rmsnorm and mla_fused_qk_rmsnorm: every float dtype in and out, strided
 * rows, odd row lengths, in place, NaN / Inf rows, a large eps; the fused
 * norm also with q_out quantized (fp8 e4m3fn / e4m3fnuz group 128, MXFP4).
 * Not bit-defined (free summation order, any rsqrt): float outputs are held
 * to the derived bound of conformance/bounds.c (conf_norm_rel), quantized
 * q_out and its scales to that of compare_quant.c.
 *
 * Case parameters: ip[0] in place, ip[1] w dtype, ip[2] Dkv (fused),
 * fp[0] eps (q_eps), fp[1] kv_eps. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "conformance/conf.h"

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

static void init_case(conf_case *c, mla_op op, mla_dtype in, mla_dtype out, int64_t T, int64_t D,
                      unsigned lay, int inplace, double eps, const char *what)
{
    memset(c, 0, sizeof *c);
    c->golden = -1;
    c->v = (mla_variant){op, in, out, 0, 0, 0, T, D};
    c->ndim = 2;
    c->shape[0] = T;
    c->shape[1] = D;
    c->lay[0] = c->lay[2] = lay;
    c->dist = CONF_DIST_ACT;
    c->ip[0] = inplace;
    c->ip[1] = in;
    c->fp[0] = c->fp[1] = eps;
    char a[16], b[16];
    short_name(in, a, sizeof a);
    short_name(out, b, sizeof b);
    snprintf(c->label, sizeof c->label, "%s->%s%s%s", a, b, what[0] ? " " : "", what);
}

/* The bound of a float output: conf_norm_rel times the exact value. */
static mla_status set_norm_tol(conf_problem *p, int ix, int iw, int iy, double eps)
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

static int build_rmsnorm(conf_case *cases, int cap)
{
    conf_builder b = {cases, cap, 0, MLA_OP_RMSNORM};
    conf_case c;
    for (int xi = 0; xi < 3; ++xi)
        for (int yi = 0; yi < 3; ++yi) {
            init_case(&c, MLA_OP_RMSNORM, floats[xi], floats[yi], 6, 64, CONF_L_CONTIG, 0, 1e-6,
                      "");
            c.ip[1] = floats[(xi + yi + 1) % 3];
            conf_push(&b, &c);
        }
    /* kv_lora rows inside a wider buffer (row stride > D), and q_lora */
    for (int xi = 0; xi < 3; ++xi) {
        init_case(&c, MLA_OP_RMSNORM, floats[xi], floats[xi], 5, 512, CONF_L_PAD, 0, 1e-6,
                  "strided rows");
        conf_push(&b, &c);
    }
    init_case(&c, MLA_OP_RMSNORM, MLA_DTYPE_BF16, MLA_DTYPE_BF16, 2, 1536, CONF_L_CONTIG, 0, 1e-6,
              "q_lora");
    conf_push(&b, &c);
    init_case(&c, MLA_OP_RMSNORM, MLA_DTYPE_F32, MLA_DTYPE_F32, 3, 33, CONF_L_OFFSET, 0, 1e-6,
              "odd D");
    conf_push(&b, &c);
    init_case(&c, MLA_OP_RMSNORM, MLA_DTYPE_BF16, MLA_DTYPE_F32, 7, 128, CONF_L_CONTIG, 0, 1e-2,
              "eps 1e-2");
    conf_push(&b, &c);
    for (int xi = 0; xi < 3; ++xi) {
        init_case(&c, MLA_OP_RMSNORM, floats[xi], floats[xi], 4, 128, CONF_L_PAD, 1, 1e-6,
                  "in place");
        conf_push(&b, &c);
    }
    for (int xi = 0; xi < 2; ++xi) {
        init_case(&c, MLA_OP_RMSNORM, floats[xi], floats[xi], 6, 64, CONF_L_CONTIG, 0, 1e-6,
                  "nan/inf");
        c.dist = CONF_DIST_ACT_SPECIALS;
        conf_push(&b, &c);
    }
    init_case(&c, MLA_OP_RMSNORM, MLA_DTYPE_BF16, MLA_DTYPE_BF16, 0, 64, CONF_L_CONTIG, 0, 1e-6,
              "T=0");
    conf_push(&b, &c);
    return b.n;
}

static mla_status setup_rmsnorm(const conf_case *c, const conf_env *env, conf_problem *p,
                                char *err, size_t errlen)
{
    (void)env;
    const int64_t T = c->shape[0], D = c->shape[1];
    int64_t xs[2] = {T, D}, ws[1] = {D};
    mla_status st = conf_add_arg(p, "x", c->ip[0] ? CONF_INOUT : CONF_IN, c->v.in_dtype, 2, xs,
                                 c->lay[0]);
    if (st == MLA_OK)
        st = conf_add_arg(p, "w", CONF_IN, (mla_dtype)c->ip[1], 1, ws, CONF_L_CONTIG);
    if (st == MLA_OK && !c->ip[0])
        st = conf_add_arg(p, "y", CONF_OUT, c->v.out_dtype, 2, xs, c->lay[2]);
    if (st != MLA_OK) {
        snprintf(err, errlen, "cannot lay out the case (%s)", mla_status_name(st));
        return st;
    }
    conf_fill(p, 0, c->dist, c->seed, D);
    conf_fill(p, 1, CONF_DIST_NORM_WEIGHT, c->seed ^ 1, D);
    return set_norm_tol(p, 0, 1, c->ip[0] ? 0 : 2, c->fp[0]);
}

static mla_status exec_rmsnorm(mla_context *ctx, const conf_case *c, mla_tensor *t)
{
    return mla_rmsnorm(ctx, &t[0], &t[1], (float)c->fp[0], c->ip[0] ? &t[0] : &t[2]);
}

const conf_suite conf_suite_rmsnorm = {"rmsnorm",     MLA_OP_RMSNORM, build_rmsnorm,
                                       setup_rmsnorm, exec_rmsnorm,   NULL};

/* ------------------------------------------------- fused QK RMSNorm */

enum { IQ, IQW, IKV, IKVW, IQO, IKVO, IQS }; /* argument order; in place: IQ..IKVW only */

static int build_qk(conf_case *cases, int cap)
{
    conf_builder b = {cases, cap, 0, MLA_OP_QK_RMSNORM};
    static const mla_dtype pairs[][2] = {{MLA_DTYPE_BF16, MLA_DTYPE_BF16},
                                         {MLA_DTYPE_F32, MLA_DTYPE_F32},
                                         {MLA_DTYPE_F16, MLA_DTYPE_F16},
                                         {MLA_DTYPE_BF16, MLA_DTYPE_F32},
                                         {MLA_DTYPE_F32, MLA_DTYPE_BF16}};
    conf_case c;
    for (int i = 0; i < 5; ++i) { /* test-tiny's q_lora 96 and kv_lora 128 */
        init_case(&c, MLA_OP_QK_RMSNORM, pairs[i][0], pairs[i][1], 4, 96, CONF_L_CONTIG, 0, 1e-6,
                  "");
        c.ip[2] = 128;
        c.fp[1] = 1e-5;
        conf_push(&b, &c);
    }
    init_case(&c, MLA_OP_QK_RMSNORM, MLA_DTYPE_BF16, MLA_DTYPE_BF16, 3, 1536, CONF_L_PAD, 0, 1e-6,
              "V3 dims, strided rows");
    c.ip[2] = 512;
    conf_push(&b, &c);
    static const mla_dtype quants[] = {MLA_DTYPE_FP8_E4M3FN, MLA_DTYPE_FP8_E4M3FNUZ,
                                       MLA_DTYPE_FP4X2};
    for (int qi = 0; qi < 3; ++qi)
        for (int xi = 0; xi < 2; ++xi)
            for (int k = 0; k < 2; ++k) {
                init_case(&c, MLA_OP_QK_RMSNORM, floats[xi], quants[qi], k ? 3 : 6, k ? 384 : 256,
                          k ? CONF_L_PAD : CONF_L_CONTIG, 0, 1e-6, k ? "strided" : "");
                c.ip[2] = 128;
                if (quants[qi] == MLA_DTYPE_FP4X2)
                    c.dist = CONF_DIST_ACT_NARROW;
                conf_push(&b, &c);
            }
    for (int xi = 0; xi < 2; ++xi) {
        init_case(&c, MLA_OP_QK_RMSNORM, floats[xi], floats[xi], 4, 96, CONF_L_PAD, 1, 1e-6,
                  "in place");
        c.ip[2] = 128;
        conf_push(&b, &c);
    }
    return b.n;
}

/* Quantized q_out: the value bound (norm bound + the quantizer's fp32
 * product, 7u more) and the scale bound, see compare_quant.c. */
static mla_status set_quant_tol(const conf_case *c, conf_problem *p)
{
    const int64_t T = c->shape[0], D = c->shape[1];
    const int fp4 = c->v.out_dtype == MLA_DTYPE_FP4X2;
    const int64_t group = fp4 ? 32 : 128, G = D / group;
    double *y = malloc((size_t)(T * D > 0 ? T * D : 1) * sizeof *y);
    double *tq = conf_tol_alloc(p, IQO, 0.0), *ts = conf_tol_alloc(p, IQS, 0.0);
    if (!y || !tq || !ts) {
        free(y);
        return MLA_ERR_OUT_OF_MEMORY;
    }
    conf_rmsnorm_exact(p, IQ, IQW, c->fp[0], y);
    const double rel = conf_norm_rel(D) + 7.0 * U32, fp8_max =
        c->v.out_dtype == MLA_DTYPE_FP8_E4M3FNUZ ? 240.0 : 448.0;
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
    const int64_t T = c->shape[0], Dq = c->shape[1], Dkv = c->ip[2];
    const mla_dtype in = c->v.in_dtype, out = c->v.out_dtype;
    const int inplace = (int)c->ip[0], role = inplace ? CONF_INOUT : CONF_IN;
    const int fp4 = out == MLA_DTYPE_FP4X2;
    int64_t qs[2] = {T, Dq}, qws[1] = {Dq}, kvs[2] = {T, Dkv}, kvws[1] = {Dkv};
    int64_t qos[2] = {T, fp4 ? Dq / 2 : Dq}, ss[2] = {T, Dq / (fp4 ? 32 : 128)};
    mla_dtype kv_out = is_quant(out) ? MLA_DTYPE_BF16 : out;
    mla_status st = conf_add_arg(p, "q", role, in, 2, qs, c->lay[0]);
    if (st == MLA_OK)
        st = conf_add_arg(p, "q_w", CONF_IN, in, 1, qws, CONF_L_CONTIG);
    if (st == MLA_OK)
        st = conf_add_arg(p, "kv", role, in, 2, kvs, c->lay[0]);
    if (st == MLA_OK)
        st = conf_add_arg(p, "kv_w", CONF_IN, MLA_DTYPE_F32, 1, kvws, CONF_L_CONTIG);
    if (st == MLA_OK && !inplace)
        st = conf_add_arg(p, "q_out", CONF_OUT, out, 2, qos, c->lay[2]);
    if (st == MLA_OK && !inplace)
        st = conf_add_arg(p, "kv_out", CONF_OUT, kv_out, 2, kvs, c->lay[2]);
    if (st == MLA_OK && is_quant(out))
        st = conf_add_arg(p, "q_scales", CONF_OUT, fp4 ? MLA_DTYPE_E8M0 : MLA_DTYPE_F32, 2, ss,
                          c->lay[2] & CONF_L_PAD);
    if (st != MLA_OK) {
        snprintf(err, errlen, "cannot lay out the case (%s)", mla_status_name(st));
        return st;
    }
    conf_fill(p, IQ, c->dist, c->seed, Dq);
    conf_fill(p, IQW, CONF_DIST_NORM_WEIGHT, c->seed ^ 1, Dq);
    conf_fill(p, IKV, c->dist, c->seed ^ 2, Dkv);
    conf_fill(p, IKVW, CONF_DIST_NORM_WEIGHT, c->seed ^ 3, Dkv);
    st = set_norm_tol(p, IKV, IKVW, inplace ? IKV : IKVO, c->fp[1]);
    if (st == MLA_OK)
        st = is_quant(out) ? set_quant_tol(c, p) : set_norm_tol(p, IQ, IQW, inplace ? IQ : IQO,
                                                                c->fp[0]);
    return st;
}

static mla_status exec_qk(mla_context *ctx, const conf_case *c, mla_tensor *t)
{
    const int inplace = (int)c->ip[0];
    return mla_fused_qk_rmsnorm(ctx, &t[IQ], &t[IQW], (float)c->fp[0], &t[IKV], &t[IKVW],
                                (float)c->fp[1], inplace ? &t[IQ] : &t[IQO],
                                is_quant(c->v.out_dtype) ? &t[IQS] : NULL,
                                inplace ? &t[IKV] : &t[IKVO]);
}

/* Quantized q_out and q_scales are judged together (compare_quant.c). */
static int compare_qk(const conf_case *c, const conf_problem *p, int i, unsigned char *const *got,
                      unsigned char *const *want, conf_cmp *r)
{
    if (!is_quant(c->v.out_dtype) || (i != IQO && i != IQS))
        return 0;
    conf_compare_quant(p, IQO, IQS, i, got, want, r);
    return 1;
}

const conf_suite conf_suite_qk_rmsnorm = {"qk_rmsnorm", MLA_OP_QK_RMSNORM, build_qk,
                                          setup_qk,     exec_qk,           compare_qk};
