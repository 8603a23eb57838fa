/* mla_fused_flatten_mxfp4_quant and mla_fused_flatten_fp8_group_quant (MLA.md
 * section 7): x [T, H, v] (f32, bf16, f16) contiguous, as the [H, T, v]
 * buffer of a transposed GEMM output seen as [T, H, v], strided and padded;
 * heads holding whole blocks, blocks spanning heads (v = 48), one head,
 * v = 1, DeepSeek's decode shape (H = 128, v = 128, T = 1); codes plain,
 * padded or misaligned; scales row-major, transposed or padded; both MXFP4
 * rules, both fp8 flavours; NaN / Inf blocks. Bit-exact: the op is the
 * format op of the flattened rows, so the reference and every backend must
 * agree bit for bit in codes and scales. */
#include <string.h>

#include "conformance/cover.h"

static const mla_dtype floats[] = {MLA_DTYPE_F32, MLA_DTYPE_BF16, MLA_DTYPE_F16};

typedef struct fshape {
    int64_t T, H, v;
    int view; /* 1: x is the [H, T, v] buffer seen as [T, H, v] */
    unsigned lx, lc, ls;
    int specials;
    const char *note;
} fshape;

#define C_ CONF_L_CONTIG
#define P_ CONF_L_PAD
#define T_ CONF_L_COLMAJOR

/* MXFP4: H * v % 32 == 0; fp8: H * v % 128 == 0. */
static const fshape mx_shapes[] = {
    {3, 4, 32, 0, C_, C_, C_, 0, " contiguous"},
    {5, 4, 64, 1, C_, C_, T_, 0, " [H,T,v] view"},
    {2, 3, 32, 0, P_ | CONF_L_STEP2, P_, P_, 0, " strided"},
    {3, 2, 48, 1, C_, CONF_L_OFFSET, T_, 0, " v 48 [H,T,v]"},
    {1, 128, 128, 1, C_, C_, C_, 0, " decode H 128"},
    {7, 1, 256, 0, P_, C_, T_ | P_, 0, " H 1"},
    {4, 64, 1, 0, CONF_L_STEP2, C_, C_, 0, " v 1"},
    {4, 4, 32, 1, C_, C_, C_, 1, " NaN/Inf [H,T,v]"},
    {0, 4, 32, 0, C_, C_, C_, 0, " T 0"},
};
static const fshape fp8_shapes[] = {
    {3, 4, 32, 0, C_, C_, C_, 0, " contiguous"},
    {5, 2, 64, 1, C_, C_, T_, 0, " v 64 [H,T,v]"},
    {2, 3, 128, 0, P_ | CONF_L_STEP2, P_, P_, 0, " strided"},
    {3, 8, 48, 1, C_, CONF_L_OFFSET, T_, 0, " v 48 [H,T,v]"},
    {1, 128, 128, 1, C_, C_, C_, 0, " decode H 128"},
    {4, 2, 128, 1, C_, C_, C_, 1, " NaN/Inf [H,T,v]"},
    {0, 4, 32, 0, C_, C_, C_, 0, " T 0"},
};

static const conf_field mx_fields[] = {
    CONF_FIELD(fl, T, CONF_F_I64),
    CONF_FIELD(fl, H, CONF_F_I64),
    CONF_FIELD(fl, v, CONF_F_I64),
    CONF_FIELD(fl, x_view, CONF_F_I32),
    CONF_FIELD(fl, x, CONF_F_DTYPE),
    CONF_FIELD(fl, codes, CONF_F_DTYPE),
    CONF_FIELD(fl, scales, CONF_F_DTYPE),
    CONF_ENUM(fl, rule, conf_name_mxfp4_rule, MLA_MXFP4_RULE_COUNT),
    CONF_FIELD(fl, x_lay, CONF_F_LAY),
    CONF_FIELD(fl, codes_lay, CONF_F_LAY),
    CONF_FIELD(fl, scales_lay, CONF_F_LAY),
    CONF_ENUM(fl, dist, conf_name_dist, CONF_DIST_COUNT),
};

static const conf_field fp8_fields[] = {
    CONF_FIELD(fl, T, CONF_F_I64),          CONF_FIELD(fl, H, CONF_F_I64),
    CONF_FIELD(fl, v, CONF_F_I64),          CONF_FIELD(fl, x_view, CONF_F_I32),
    CONF_FIELD(fl, x, CONF_F_DTYPE),        CONF_FIELD(fl, codes, CONF_F_DTYPE),
    CONF_FIELD(fl, x_lay, CONF_F_LAY),      CONF_FIELD(fl, codes_lay, CONF_F_LAY),
    CONF_FIELD(fl, scales_lay, CONF_F_LAY), CONF_ENUM(fl, dist, conf_name_dist, CONF_DIST_COUNT),
};

static int is_fp8_suite(const conf_case *c) { return c->suite->op == MLA_OP_FLATTEN_FP8_QUANT; }

static void label(conf_case *c)
{
    const conf_p_flatten *q = &c->p.fl;
    const char *rn =
        is_fp8_suite(c) ? mla_dtype_name(q->codes) : mla_mxfp4_rule_name((mla_mxfp4_rule)q->rule);
    snprintf(c->label, sizeof c->label, "%s %s", mla_dtype_name(q->x), rn);
}

static void push(conf_builder *b, const fshape *s, mla_dtype x, mla_dtype codes, int rule)
{
    conf_case c;
    memset(&c, 0, sizeof c);
    c.golden = -1;
    c.note = s->note;
    const int fp8 = b->suite->op == MLA_OP_FLATTEN_FP8_QUANT;
    c.p.fl = (conf_p_flatten){s->T,
                              s->H,
                              s->v,
                              s->view,
                              x,
                              codes,
                              fp8 ? MLA_DTYPE_F32 : MLA_DTYPE_E8M0,
                              rule,
                              s->lx,
                              s->lc,
                              s->ls,
                              s->specials ? CONF_DIST_SPECIALS : CONF_DIST_BLOCKS};
    conf_push(b, &c);
}

/* ------------------------------------------------------------ axes */

static const char *const rule_names[] = {"production", "ocp"};

enum { M_X, M_RULE, M_CODES, M_SCALES, M_XV, M_CODESV, M_SCALESV };

static const conf_axis mx_axes[] = {
    CONF_AX_DT("x.dtype", 0, CONF_FLOATS),
    CONF_AX_FL("rule", rule, rule_names, MLA_MXFP4_PRODUCTION, MLA_MXFP4_OCP),
    CONF_AX_DT("codes.dtype", 1, MLA_DTYPE_FP4X2, MLA_DTYPE_U8),
    CONF_AX_DT("scales.dtype", 2, MLA_DTYPE_E8M0, MLA_DTYPE_U8),
    CONF_AX_VW("x.view", 0, CONF_VIEWS),
    CONF_AX_VW("codes.view", 1, CONF_VIEWS),
    CONF_AX_VW("scales.view", 2, CONF_VIEWS),
};

static void derive(mla_variant *v)
{
    v->in_dtype = v->arg_dtype[0];
    if (v->op == MLA_OP_FLATTEN_FP8_QUANT)
        v->out_dtype = v->arg_dtype[1];
}

const conf_op_axes conf_axes_flatten_mxfp4_quant = {
    .op = MLA_OP_FLATTEN_MXFP4_QUANT,
    .axes = mx_axes,
    .naxes = (int)(sizeof mx_axes / sizeof mx_axes[0]),
    .base = {.out_dtype = MLA_DTYPE_FP4X2, .group = 32, .rows = 3, .cols = 256, .nargs = 3},
    .derive = derive,
    .full = 1u << M_X | 1u << M_RULE};

/* x [3, 4, 64] (the [H, T, v] buffer seen as [T, H, v] for one design in
 * three of the rows view), codes and scales as their views say */
static void design_params(conf_case *c, const conf_point *pt, int k, int ix, int icodes,
                          int iscales, int ixv, int icv, int isv)
{
    const int64_t xv = CONF_VAL(pt, ixv);
    c->p.fl = (conf_p_flatten){3,
                               4,
                               64,
                               xv == MLA_ARG_ROWS && k % 3 == 0,
                               (mla_dtype)CONF_VAL(pt, ix),
                               (mla_dtype)CONF_VAL(pt, icodes),
                               iscales >= 0 ? (mla_dtype)CONF_VAL(pt, iscales) : MLA_DTYPE_F32,
                               0,
                               conf_lay_of_view(xv, 3, k),
                               conf_lay_of_view(CONF_VAL(pt, icv), 2, k + 1),
                               conf_lay_of_view(CONF_VAL(pt, isv), 2, k + 2),
                               k % 5 == 4 ? CONF_DIST_SPECIALS : CONF_DIST_BLOCKS};
    c->note = " (pairwise)";
}

static void design_mx(const conf_point *pt, int k, conf_case *c)
{
    design_params(c, pt, k, M_X, M_CODES, M_SCALES, M_XV, M_CODESV, M_SCALESV);
    c->p.fl.rule = (int32_t)CONF_VAL(pt, M_RULE);
}

enum { P_X, P_CODES, P_XV, P_CODESV, P_SCALESV };

static const conf_axis fp8_axes[] = {
    CONF_AX_DT("x.dtype", 0, CONF_FLOATS),    CONF_AX_DT("codes.dtype", 1, CONF_FP8S),
    CONF_AX_VW("x.view", 0, CONF_VIEWS),      CONF_AX_VW("codes.view", 1, CONF_VIEWS),
    CONF_AX_VW("scales.view", 2, CONF_VIEWS),
};

const conf_op_axes conf_axes_flatten_fp8_quant = {.op = MLA_OP_FLATTEN_FP8_QUANT,
                                                  .axes = fp8_axes,
                                                  .naxes =
                                                      (int)(sizeof fp8_axes / sizeof fp8_axes[0]),
                                                  .base = {.rule = MLA_FP8_SCALE_AITER,
                                                           .group = 128,
                                                           .rows = 3,
                                                           .cols = 256,
                                                           .nargs = 3,
                                                           .arg_dtype = {[2] = MLA_DTYPE_F32}},
                                                  .derive = derive,
                                                  .full = 1u << P_X | 1u << P_CODES};

static void design_fp8(const conf_point *pt, int k, conf_case *c)
{
    design_params(c, pt, k, P_X, P_CODES, -1, P_XV, P_CODESV, P_SCALESV);
}

static int build_mxfp4(conf_case *cases, int cap)
{
    conf_builder b = {.cases = cases, .cap = cap, .suite = &conf_suite_flatten_mxfp4_quant};
    for (int di = 0; di < 3; ++di)
        for (int rule = 0; rule < MLA_MXFP4_RULE_COUNT; ++rule)
            for (size_t k = 0; k < sizeof mx_shapes / sizeof mx_shapes[0]; ++k)
                push(&b, &mx_shapes[k], floats[di], MLA_DTYPE_FP4X2, rule);
    conf_push_design(&b, &conf_axes_flatten_mxfp4_quant, design_mx);
    return b.n;
}

static int build_fp8(conf_case *cases, int cap)
{
    static const mla_dtype fp8s[] = {MLA_DTYPE_FP8_E4M3FN, MLA_DTYPE_FP8_E4M3FNUZ};
    conf_builder b = {.cases = cases, .cap = cap, .suite = &conf_suite_flatten_fp8_quant};
    for (int di = 0; di < 3; ++di)
        for (int fi = 0; fi < 2; ++fi)
            for (size_t k = 0; k < sizeof fp8_shapes / sizeof fp8_shapes[0]; ++k)
                push(&b, &fp8_shapes[k], floats[di], fp8s[fi], 0);
    conf_push_design(&b, &conf_axes_flatten_fp8_quant, design_fp8);
    return b.n;
}

static mla_status setup(const conf_case *c, const conf_env *env, conf_problem *p, char *err,
                        size_t errlen)
{
    (void)env;
    const conf_p_flatten *q = &c->p.fl;
    const int fp8 = is_fp8_suite(c);
    const int64_t T = q->T, H = q->H, v = q->v, HV = H * v, G = fp8 ? 128 : 32;
    const int64_t xs[3] = {T, H, v}, cs[2] = {T, fp8 ? HV : HV / 2}, ss[2] = {T, HV / G};
    mla_status st = q->x_view
                        ? conf_add_view(p, "x", CONF_IN, q->x, 3, xs, (int64_t[]){v, T * v, 1}, 0)
                        : conf_add_arg(p, "x", CONF_IN, q->x, 3, xs, q->x_lay);
    if (st == MLA_OK)
        st = conf_add_arg(p, "codes", CONF_OUT, q->codes, 2, cs, q->codes_lay);
    if (st == MLA_OK)
        st = conf_add_arg(p, "scales", CONF_OUT, q->scales, 2, ss, q->scales_lay);
    if (st != MLA_OK) {
        snprintf(err, errlen, "cannot lay out the case (%s)", mla_status_name(st));
        return st;
    }
    conf_fill(p, 0, q->dist, c->seed, G); /* logical order: blocks of the flattened rows */
    return MLA_OK;
}

static mla_status exec_mxfp4(mla_context *ctx, const conf_case *c, mla_tensor *t)
{
    return mla_fused_flatten_mxfp4_quant(ctx, &t[0], &t[1], &t[2], (mla_mxfp4_rule)c->p.fl.rule);
}

static mla_status exec_fp8(mla_context *ctx, const conf_case *c, mla_tensor *t)
{
    (void)c;
    return mla_fused_flatten_fp8_group_quant(ctx, &t[0], &t[1], &t[2]);
}

const conf_suite conf_suite_flatten_mxfp4_quant = {.name = "flatten_mxfp4_quant",
                                                   .op = MLA_OP_FLATTEN_MXFP4_QUANT,
                                                   .build = build_mxfp4,
                                                   .setup = setup,
                                                   .exec = exec_mxfp4,
                                                   .label = label,
                                                   .fields = mx_fields,
                                                   .nfields = CONF_NFIELDS(mx_fields)};
const conf_suite conf_suite_flatten_fp8_quant = {.name = "flatten_fp8_quant",
                                                 .op = MLA_OP_FLATTEN_FP8_QUANT,
                                                 .build = build_fp8,
                                                 .setup = setup,
                                                 .exec = exec_fp8,
                                                 .label = label,
                                                 .fields = fp8_fields,
                                                 .nfields = CONF_NFIELDS(fp8_fields)};
