/* mla_mxfp4_quant and mla_mxfp4_dequant: every input / output dtype, both
 * scale rules, the three scale layouts, odd row counts (including one that
 * crosses the pre-shuffled layout's 256-row padding), strided and
 * transposed views; plus the golden vectors (row-major scales). Bit-exact. */
#include <string.h>

#include "conformance/cover.h"

#define BLOCK 32

static const mla_dtype floats[] = {MLA_DTYPE_F32, MLA_DTYPE_BF16, MLA_DTYPE_F16};

/* [M, K] and layouts of (main matrix, codes, scales); dist of the matrix or codes. */
static const struct {
    int64_t M, K;
    unsigned lm, lc, ls;
    int specials;
} shapes[] = {
    {7, 96, CONF_L_CONTIG, CONF_L_CONTIG, CONF_L_CONTIG, 0},
    {33, 64, CONF_L_PAD | CONF_L_STEP2, CONF_L_PAD, CONF_L_PAD, 0},
    {260, 64, CONF_L_COLMAJOR, CONF_L_COLMAJOR, CONF_L_OFFSET, 0},
    {17, 128, CONF_L_CONTIG, CONF_L_CONTIG, CONF_L_CONTIG, 1},
    {1, 32, CONF_L_OFFSET, CONF_L_OFFSET, CONF_L_OFFSET, 0},
    {0, 64, CONF_L_CONTIG, CONF_L_CONTIG, CONF_L_CONTIG, 0},
};
#define NSHAPES ((int)(sizeof shapes / sizeof shapes[0]))

static const char *const golden_codes[] = {"mxfp4_production_codes_u8.npy",
                                           "mxfp4_ocp_codes_u8.npy"};
static const char *const golden_scales[] = {"mxfp4_production_scales_u8.npy",
                                            "mxfp4_ocp_scales_u8.npy"};

static const conf_field quant_fields[] = {
    CONF_FIELD(mxfp4, x, CONF_F_DTYPE),
    CONF_FIELD(mxfp4, codes, CONF_F_DTYPE),
    CONF_FIELD(mxfp4, scales, CONF_F_DTYPE),
    CONF_ENUM(mxfp4, layout, conf_name_scale_layout, MLA_SCALE_LAYOUT_COUNT),
    CONF_ENUM(mxfp4, rule, conf_name_mxfp4_rule, MLA_MXFP4_RULE_COUNT),
    CONF_FIELD(mxfp4, M, CONF_F_I64),
    CONF_FIELD(mxfp4, K, CONF_F_I64),
    CONF_FIELD(mxfp4, x_lay, CONF_F_LAY),
    CONF_FIELD(mxfp4, codes_lay, CONF_F_LAY),
    CONF_FIELD(mxfp4, scales_lay, CONF_F_LAY),
    CONF_ENUM(mxfp4, dist, conf_name_dist, CONF_DIST_COUNT),
};

/* dequant: the same without the rule; x names y there */
static const conf_field dequant_fields[] = {
    {"y", CONF_F_DTYPE, offsetof(conf_params, mxfp4.x), NULL, 0},
    CONF_FIELD(mxfp4, codes, CONF_F_DTYPE),
    CONF_FIELD(mxfp4, scales, CONF_F_DTYPE),
    CONF_ENUM(mxfp4, layout, conf_name_scale_layout, MLA_SCALE_LAYOUT_COUNT),
    CONF_FIELD(mxfp4, M, CONF_F_I64),
    CONF_FIELD(mxfp4, K, CONF_F_I64),
    {"y_lay", CONF_F_LAY, offsetof(conf_params, mxfp4.x_lay), NULL, 0},
    CONF_FIELD(mxfp4, codes_lay, CONF_F_LAY),
    CONF_FIELD(mxfp4, scales_lay, CONF_F_LAY),
    CONF_ENUM(mxfp4, dist, conf_name_dist, CONF_DIST_COUNT),
};

/* The scale tensor of a layout: [M, N] row-major or transposed (a padded
 * leading stride when asked), or the pre-shuffled byte array. */
static mla_status add_scales(conf_problem *p, int output, const conf_case *c, unsigned lay)
{
    const conf_p_mxfp4 *q = &c->p.mxfp4;
    int64_t M = q->M, N = q->K / BLOCK;
    int64_t shape[2] = {M, N};
    switch ((mla_scale_layout)q->layout) {
    case MLA_SCALE_ROW_MAJOR:
        return conf_add_arg(p, "scales", output, q->scales, 2, shape,
                            lay & ~(CONF_L_STEP2 | CONF_L_COLMAJOR));
    case MLA_SCALE_TRANSPOSED:
        return conf_add_arg(p, "scales", output, q->scales, 2, shape,
                            (lay & ~CONF_L_STEP2) | CONF_L_COLMAJOR);
    default: {
        int64_t bytes = mla_scale_preshuffled_bytes(M, N);
        return conf_add_arg(p, "scales", output, q->scales, 1, &bytes, lay & CONF_L_OFFSET);
    }
    }
}

static conf_p_mxfp4 params(mla_dtype x, int layout, int rule, int k, int golden)
{
    conf_p_mxfp4 q = {x,
                      MLA_DTYPE_FP4X2,
                      MLA_DTYPE_E8M0,
                      layout,
                      rule,
                      golden >= 0 ? 64 : shapes[k].M,
                      golden >= 0 ? 256 : shapes[k].K,
                      CONF_L_CONTIG,
                      CONF_L_CONTIG,
                      CONF_L_CONTIG,
                      CONF_DIST_EDGE};
    if (golden < 0) {
        q.x_lay = shapes[k].lm;
        q.codes_lay = shapes[k].lc;
        q.scales_lay = shapes[k].ls;
    }
    return q;
}

static void init_case(conf_case *c, int golden)
{
    memset(c, 0, sizeof *c);
    c->golden = golden;
}

/* ------------------------------------------------------------ axes */

static const char *const layout_names[] = {"row_major", "transposed", "preshuffled"};
static const char *const rule_names[] = {"production", "ocp"};

/* The scales' view a layout allows: row-major [M, N] (unit last stride)
 * dense or padded, transposed [M, N] strided, pre-shuffled bytes dense. */
static int scales_view_ok(int64_t layout, int64_t view)
{
    if (layout == MLA_SCALE_ROW_MAJOR)
        return view == MLA_ARG_DENSE || view == MLA_ARG_ROWS;
    return view == (layout == MLA_SCALE_TRANSPOSED ? MLA_ARG_STRIDED : MLA_ARG_DENSE);
}

/* Design: M = 7 rows (pre-shuffled: one 256-row tile), K = 64 (two scale
 * columns); the float side, codes and scales laid out as their views say. */
static conf_p_mxfp4 design_params(const conf_point *pt, int k, int ix, int ic, int is, int il,
                                  int ixv, int icv, int isv)
{
    const int64_t layout = CONF_VAL(pt, il);
    unsigned sl = conf_lay_of_view(CONF_VAL(pt, isv), 2, k);
    if (layout != MLA_SCALE_ROW_MAJOR)
        sl &= CONF_L_OFFSET | CONF_L_PAD;
    return (conf_p_mxfp4){(mla_dtype)CONF_VAL(pt, ix),
                          (mla_dtype)CONF_VAL(pt, ic),
                          (mla_dtype)CONF_VAL(pt, is),
                          (int32_t)layout,
                          0,
                          7,
                          64,
                          conf_lay_of_view(CONF_VAL(pt, ixv), 2, k),
                          conf_lay_of_view(CONF_VAL(pt, icv), 2, k + 1),
                          sl,
                          k % 5 == 4 ? CONF_DIST_SPECIALS : CONF_DIST_BLOCKS};
}

enum { Q_X, Q_CODES, Q_SCALES, Q_LAYOUT, Q_RULE, Q_XV, Q_CODESV, Q_SCALESV };

static const conf_axis quant_axes[] = {
    CONF_AX_DT("x.dtype", 0, CONF_FLOATS),
    CONF_AX_DT("codes.dtype", 1, MLA_DTYPE_FP4X2, MLA_DTYPE_U8),
    CONF_AX_DT("scales.dtype", 2, MLA_DTYPE_E8M0, MLA_DTYPE_U8),
    CONF_AX_FL("layout", layout, layout_names, MLA_SCALE_ROW_MAJOR, MLA_SCALE_TRANSPOSED,
               MLA_SCALE_PRESHUFFLED_GFX950),
    CONF_AX_FL("rule", rule, rule_names, MLA_MXFP4_PRODUCTION, MLA_MXFP4_OCP),
    CONF_AX_VW("x.view", 0, CONF_VIEWS),
    CONF_AX_VW("codes.view", 1, CONF_VIEWS),
    CONF_AX_VW("scales.view", 2, CONF_VIEWS),
};

static int quant_legal(const conf_point *p)
{
    return CONF_RULE(p, Q_LAYOUT, Q_SCALESV,
                     scales_view_ok(CONF_VAL(p, Q_LAYOUT), CONF_VAL(p, Q_SCALESV)));
}

static void quant_derive(mla_variant *v) { v->in_dtype = v->arg_dtype[0]; }

const conf_op_axes conf_axes_mxfp4_quant = {
    .op = MLA_OP_MXFP4_QUANT,
    .axes = quant_axes,
    .naxes = (int)(sizeof quant_axes / sizeof quant_axes[0]),
    .base = {.out_dtype = MLA_DTYPE_FP4X2, .group = BLOCK, .rows = 7, .cols = 64, .nargs = 3},
    .derive = quant_derive,
    .legal = quant_legal,
    .full = 1u << Q_X | 1u << Q_LAYOUT | 1u << Q_RULE};

static void design_quant(const conf_point *pt, int k, conf_case *c)
{
    c->p.mxfp4 = design_params(pt, k, Q_X, Q_CODES, Q_SCALES, Q_LAYOUT, Q_XV, Q_CODESV, Q_SCALESV);
    c->p.mxfp4.rule = (int32_t)CONF_VAL(pt, Q_RULE);
    c->note = " (pairwise)";
}

enum { D_CODES, D_SCALES, D_Y, D_LAYOUT, D_CODESV, D_SCALESV, D_YV };

static const conf_axis dequant_axes[] = {
    CONF_AX_DT("codes.dtype", 0, MLA_DTYPE_FP4X2, MLA_DTYPE_U8),
    CONF_AX_DT("scales.dtype", 1, MLA_DTYPE_E8M0, MLA_DTYPE_U8),
    CONF_AX_DT("y.dtype", 2, CONF_FLOATS),
    CONF_AX_FL("layout", layout, layout_names, MLA_SCALE_ROW_MAJOR, MLA_SCALE_TRANSPOSED,
               MLA_SCALE_PRESHUFFLED_GFX950),
    CONF_AX_VW("codes.view", 0, CONF_VIEWS),
    CONF_AX_VW("scales.view", 1, CONF_VIEWS),
    CONF_AX_VW("y.view", 2, CONF_VIEWS),
};

static int dequant_legal(const conf_point *p)
{
    return CONF_RULE(p, D_LAYOUT, D_SCALESV,
                     scales_view_ok(CONF_VAL(p, D_LAYOUT), CONF_VAL(p, D_SCALESV)));
}

static void dequant_derive(mla_variant *v) { v->out_dtype = v->arg_dtype[2]; }

const conf_op_axes conf_axes_mxfp4_dequant = {
    .op = MLA_OP_MXFP4_DEQUANT,
    .axes = dequant_axes,
    .naxes = (int)(sizeof dequant_axes / sizeof dequant_axes[0]),
    .base = {.in_dtype = MLA_DTYPE_FP4X2, .group = BLOCK, .rows = 7, .cols = 64, .nargs = 3},
    .derive = dequant_derive,
    .legal = dequant_legal,
    .full = 1u << D_Y | 1u << D_LAYOUT};

static void design_dequant(const conf_point *pt, int k, conf_case *c)
{
    c->p.mxfp4 = design_params(pt, k, D_Y, D_CODES, D_SCALES, D_LAYOUT, D_YV, D_CODESV, D_SCALESV);
    c->p.mxfp4.dist = k % 5 == 4 ? CONF_DIST_SCALES_SPECIALS : CONF_DIST_SCALES;
    c->note = " (pairwise)";
}

/* ------------------------------------------------------------- quant */

static void label_quant(conf_case *c)
{
    const conf_p_mxfp4 *q = &c->p.mxfp4;
    snprintf(c->label, sizeof c->label, "%s%s %s %s", c->golden >= 0 ? "golden " : "",
             mla_dtype_name(q->x), mla_mxfp4_rule_name((mla_mxfp4_rule)q->rule),
             mla_scale_layout_name((mla_scale_layout)q->layout));
}

static int build_quant(conf_case *cases, int cap)
{
    conf_builder b = {.cases = cases, .cap = cap, .suite = &conf_suite_mxfp4_quant};
    for (int rule = 0; rule < MLA_MXFP4_RULE_COUNT; ++rule) {
        conf_case c;
        init_case(&c, rule);
        c.p.mxfp4 = params(MLA_DTYPE_F32, MLA_SCALE_ROW_MAJOR, rule, 0, rule);
        conf_push(&b, &c);
    }
    for (int di = 0; di < 3; ++di)
        for (int rule = 0; rule < MLA_MXFP4_RULE_COUNT; ++rule)
            for (int layout = 0; layout < MLA_SCALE_LAYOUT_COUNT; ++layout)
                for (int k = 0; k < NSHAPES; ++k) {
                    conf_case c;
                    init_case(&c, -1);
                    c.p.mxfp4 = params(floats[di], layout, rule, k, -1);
                    c.p.mxfp4.dist = shapes[k].specials ? CONF_DIST_SPECIALS : CONF_DIST_BLOCKS;
                    conf_push(&b, &c);
                }
    conf_push_design(&b, &conf_axes_mxfp4_quant, design_quant);
    return b.n;
}

static mla_status setup_quant(const conf_case *c, const conf_env *env, conf_problem *p,
                              char *err, size_t errlen)
{
    const conf_p_mxfp4 *q = &c->p.mxfp4;
    int64_t M = q->M, K = q->K;
    int64_t xs[2] = {M, K}, cs[2] = {M, K / 2};
    mla_status st = conf_add_arg(p, "x", 0, q->x, 2, xs, q->x_lay);
    if (st == MLA_OK)
        st = conf_add_arg(p, "codes", 1, q->codes, 2, cs, q->codes_lay);
    if (st == MLA_OK)
        st = add_scales(p, 1, c, q->scales_lay);
    if (st != MLA_OK) {
        snprintf(err, errlen, "cannot lay out the case (%s)", mla_status_name(st));
        return st;
    }
    if (c->golden < 0) {
        conf_fill(p, 0, q->dist, c->seed, BLOCK);
        return MLA_OK;
    }
    st = conf_golden_input(p, 0, env, "mxfp4_inputs_f32.npy", err, errlen);
    if (st == MLA_OK)
        st = conf_golden_output(p, 1, env, golden_codes[c->golden], err, errlen);
    if (st == MLA_OK)
        st = conf_golden_output(p, 2, env, golden_scales[c->golden], err, errlen);
    return st;
}

static mla_status exec_quant(mla_context *ctx, const conf_case *c, mla_tensor *t)
{
    return mla_mxfp4_quant(ctx, &t[0], &t[1], &t[2], (mla_scale_layout)c->p.mxfp4.layout,
                           (mla_mxfp4_rule)c->p.mxfp4.rule);
}

const conf_suite conf_suite_mxfp4_quant = {.name = "mxfp4_quant",
                                           .op = MLA_OP_MXFP4_QUANT,
                                           .build = build_quant,
                                           .setup = setup_quant,
                                           .exec = exec_quant,
                                           .label = label_quant,
                                           .fields = quant_fields,
                                           .nfields = CONF_NFIELDS(quant_fields)};

/* ----------------------------------------------------------- dequant */

static void label_dequant(conf_case *c)
{
    snprintf(c->label, sizeof c->label, "->%s %s", mla_dtype_name(c->p.mxfp4.x),
             mla_scale_layout_name((mla_scale_layout)c->p.mxfp4.layout));
}

static int build_dequant(conf_case *cases, int cap)
{
    conf_builder b = {.cases = cases, .cap = cap, .suite = &conf_suite_mxfp4_dequant};
    for (int di = 0; di < 3; ++di)
        for (int layout = 0; layout < MLA_SCALE_LAYOUT_COUNT; ++layout)
            for (int k = 0; k < NSHAPES; ++k) {
                conf_case c;
                init_case(&c, -1);
                c.p.mxfp4 = params(floats[di], layout, 0, k, -1);
                c.p.mxfp4.dist = shapes[k].specials ? CONF_DIST_SCALES_SPECIALS : CONF_DIST_SCALES;
                conf_push(&b, &c);
            }
    conf_push_design(&b, &conf_axes_mxfp4_dequant, design_dequant);
    return b.n;
}

static mla_status setup_dequant(const conf_case *c, const conf_env *env, conf_problem *p,
                                char *err, size_t errlen)
{
    (void)env;
    const conf_p_mxfp4 *q = &c->p.mxfp4;
    int64_t M = q->M, K = q->K;
    int64_t ys[2] = {M, K}, cs[2] = {M, K / 2};
    mla_status st = conf_add_arg(p, "codes", 0, q->codes, 2, cs, q->codes_lay);
    if (st == MLA_OK)
        st = add_scales(p, 0, c, q->scales_lay);
    if (st == MLA_OK)
        st = conf_add_arg(p, "y", 1, q->x, 2, ys, q->x_lay);
    if (st != MLA_OK) {
        snprintf(err, errlen, "cannot lay out the case (%s)", mla_status_name(st));
        return st;
    }
    conf_fill(p, 0, CONF_DIST_CODES, c->seed, BLOCK);
    conf_fill(p, 1, q->dist, c->seed, BLOCK);
    return MLA_OK;
}

static mla_status exec_dequant(mla_context *ctx, const conf_case *c, mla_tensor *t)
{
    return mla_mxfp4_dequant(ctx, &t[0], &t[1], (mla_scale_layout)c->p.mxfp4.layout, &t[2]);
}

const conf_suite conf_suite_mxfp4_dequant = {.name = "mxfp4_dequant",
                                             .op = MLA_OP_MXFP4_DEQUANT,
                                             .build = build_dequant,
                                             .setup = setup_dequant,
                                             .exec = exec_dequant,
                                             .label = label_dequant,
                                             .fields = dequant_fields,
                                             .nfields = CONF_NFIELDS(dequant_fields)};
