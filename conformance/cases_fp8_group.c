/* mla_fp8_group_quant and mla_fp8_group_dequant: both fp8 flavours, the
 * three scale rules, groups 128 (production) and 32, row-major and
 * transposed scales, strided views; plus the golden vectors: aiter's
 * group-128 quant and the indexer K quant (one group per 128-dim token,
 * rule DIV = the vectors' "plain", UE8M0 = "ue8m0"). Bit-exact. */
#include <string.h>

#include "conformance/cover.h"

static const mla_dtype floats[] = {MLA_DTYPE_F32, MLA_DTYPE_BF16, MLA_DTYPE_F16};
static const mla_dtype fp8s[] = {MLA_DTYPE_FP8_E4M3FN, MLA_DTYPE_FP8_E4M3FNUZ};
static const int64_t groups[] = {128, 32};

/* [M, K], layouts of (matrix, codes, scales), and whether NaN/Inf are sprinkled. */
static const struct {
    int64_t M, K;
    unsigned lm, lc, ls;
    int specials;
} shapes[] = {
    {5, 256, CONF_L_CONTIG, CONF_L_CONTIG, CONF_L_CONTIG, 0},
    {17, 384, CONF_L_PAD | CONF_L_STEP2, CONF_L_PAD, CONF_L_COLMAJOR | CONF_L_PAD, 0},
    {9, 128, CONF_L_COLMAJOR, CONF_L_COLMAJOR | CONF_L_OFFSET, CONF_L_COLMAJOR, 0},
    {3, 256, CONF_L_CONTIG, CONF_L_CONTIG, CONF_L_CONTIG, 1},
    {0, 128, CONF_L_CONTIG, CONF_L_CONTIG, CONF_L_CONTIG, 0},
};
#define NSHAPES ((int)(sizeof shapes / sizeof shapes[0]))

typedef struct golden_fp8 {
    const char *in, *codes, *scales;
    mla_dtype fp8;
    mla_fp8_scale_rule rule;
    int64_t M, K, group;
    const char *what;
} golden_fp8;

static const golden_fp8 goldens[] = {
    {"fp8_group128_inputs_f32.npy", "fp8_group128_e4m3fn_codes_u8.npy",
     "fp8_group128_e4m3fn_scales_f32.npy", MLA_DTYPE_FP8_E4M3FN, MLA_FP8_SCALE_AITER, 16, 512, 128,
     "group128"},
    {"fp8_group128_inputs_f32.npy", "fp8_group128_e4m3fnuz_codes_u8.npy",
     "fp8_group128_e4m3fnuz_scales_f32.npy", MLA_DTYPE_FP8_E4M3FNUZ, MLA_FP8_SCALE_AITER, 16, 512,
     128, "group128"},
    {"indexer_k_inputs_f32.npy", "indexer_k_e4m3fn_plain_codes_u8.npy",
     "indexer_k_e4m3fn_plain_scales_f32.npy", MLA_DTYPE_FP8_E4M3FN, MLA_FP8_SCALE_DIV, 32, 128,
     128, "indexer_k"},
    {"indexer_k_inputs_f32.npy", "indexer_k_e4m3fn_ue8m0_codes_u8.npy",
     "indexer_k_e4m3fn_ue8m0_scales_f32.npy", MLA_DTYPE_FP8_E4M3FN, MLA_FP8_SCALE_UE8M0, 32, 128,
     128, "indexer_k"},
    {"indexer_k_inputs_f32.npy", "indexer_k_e4m3fnuz_plain_codes_u8.npy",
     "indexer_k_e4m3fnuz_plain_scales_f32.npy", MLA_DTYPE_FP8_E4M3FNUZ, MLA_FP8_SCALE_DIV, 32, 128,
     128, "indexer_k"},
    {"indexer_k_inputs_f32.npy", "indexer_k_e4m3fnuz_ue8m0_codes_u8.npy",
     "indexer_k_e4m3fnuz_ue8m0_scales_f32.npy", MLA_DTYPE_FP8_E4M3FNUZ, MLA_FP8_SCALE_UE8M0, 32,
     128, 128, "indexer_k"},
};
#define NGOLDEN ((int)(sizeof goldens / sizeof goldens[0]))

static const conf_field quant_fields[] = {
    CONF_FIELD(fp8g, x, CONF_F_DTYPE),
    CONF_FIELD(fp8g, fp8, CONF_F_DTYPE),
    CONF_ENUM(fp8g, rule, conf_name_fp8_rule, MLA_FP8_SCALE_RULE_COUNT),
    CONF_FIELD(fp8g, M, CONF_F_I64),
    CONF_FIELD(fp8g, K, CONF_F_I64),
    CONF_FIELD(fp8g, group, CONF_F_I64),
    CONF_FIELD(fp8g, x_lay, CONF_F_LAY),
    CONF_FIELD(fp8g, codes_lay, CONF_F_LAY),
    CONF_FIELD(fp8g, scales_lay, CONF_F_LAY),
    CONF_ENUM(fp8g, dist, conf_name_dist, CONF_DIST_COUNT),
};

/* dequant: x names y there, no rule */
static const conf_field dequant_fields[] = {
    {"y", CONF_F_DTYPE, offsetof(conf_params, fp8g.x), NULL, 0},
    CONF_FIELD(fp8g, fp8, CONF_F_DTYPE),
    CONF_FIELD(fp8g, M, CONF_F_I64),
    CONF_FIELD(fp8g, K, CONF_F_I64),
    CONF_FIELD(fp8g, group, CONF_F_I64),
    {"y_lay", CONF_F_LAY, offsetof(conf_params, fp8g.x_lay), NULL, 0},
    CONF_FIELD(fp8g, codes_lay, CONF_F_LAY),
    CONF_FIELD(fp8g, scales_lay, CONF_F_LAY),
    CONF_ENUM(fp8g, dist, conf_name_dist, CONF_DIST_COUNT),
};

static void init_case(conf_case *c, mla_dtype x, mla_dtype fp8, int rule, int64_t M, int64_t K,
                      int64_t group, int golden)
{
    memset(c, 0, sizeof *c);
    c->golden = golden;
    c->p.fp8g = (conf_p_fp8_group){
        x, fp8, rule, M, K, group, CONF_L_CONTIG, CONF_L_CONTIG, CONF_L_CONTIG, CONF_DIST_EDGE};
}

static void set_layouts(conf_case *c, int k)
{
    c->p.fp8g.x_lay = shapes[k].lm;
    c->p.fp8g.codes_lay = shapes[k].lc;
    c->p.fp8g.scales_lay = shapes[k].ls;
}

/* ------------------------------------------------------------ axes */

static const char *const rule_names[] = {"aiter", "ue8m0", "div"};
static const char *const group_names[] = {"<128", ">=128"};

/* Design: [6, 256] values, groups of 32 or 128, every tensor laid out as
 * its view says. */
static void design_params(conf_case *c, const conf_point *pt, int k, int ix, int ifp8, int igroup,
                          int ixv, int icv, int isv)
{
    const int64_t group = CONF_VAL(pt, igroup) >= 128 ? 128 : 32;
    init_case(c, (mla_dtype)CONF_VAL(pt, ix), (mla_dtype)CONF_VAL(pt, ifp8), 0, 6, 256, group, -1);
    c->p.fp8g.x_lay = conf_lay_of_view(CONF_VAL(pt, ixv), 2, k);
    c->p.fp8g.codes_lay = conf_lay_of_view(CONF_VAL(pt, icv), 2, k + 1);
    c->p.fp8g.scales_lay = conf_lay_of_view(CONF_VAL(pt, isv), 2, k + 2);
    c->note = " (pairwise)";
}

enum { Q_X, Q_FP8, Q_RULE, Q_GROUP, Q_XV, Q_CODESV, Q_SCALESV };

static const conf_axis quant_axes[] = {
    CONF_AX_DT("x.dtype", 0, CONF_FLOATS),
    CONF_AX_DT("codes.dtype", 1, CONF_FP8S),
    CONF_AX_FL("rule", rule, rule_names, MLA_FP8_SCALE_AITER, MLA_FP8_SCALE_UE8M0,
               MLA_FP8_SCALE_DIV),
    CONF_AX_CL("group", group, 1, group_names, 1, 128),
    CONF_AX_VW("x.view", 0, CONF_VIEWS),
    CONF_AX_VW("codes.view", 1, CONF_VIEWS),
    CONF_AX_VW("scales.view", 2, CONF_VIEWS),
};

static void quant_derive(mla_variant *v)
{
    v->in_dtype = v->arg_dtype[0];
    v->out_dtype = v->arg_dtype[1];
}

const conf_op_axes conf_axes_fp8_group_quant = {
    .op = MLA_OP_FP8_GROUP_QUANT,
    .axes = quant_axes,
    .naxes = (int)(sizeof quant_axes / sizeof quant_axes[0]),
    .base = {.rows = 6, .cols = 256, .nargs = 3, .arg_dtype = {[2] = MLA_DTYPE_F32}},
    .derive = quant_derive,
    .full = 1u << Q_X | 1u << Q_FP8 | 1u << Q_RULE | 1u << Q_GROUP};

static void design_quant(const conf_point *pt, int k, conf_case *c)
{
    design_params(c, pt, k, Q_X, Q_FP8, Q_GROUP, Q_XV, Q_CODESV, Q_SCALESV);
    c->p.fp8g.rule = (int32_t)CONF_VAL(pt, Q_RULE);
    c->p.fp8g.dist = k % 5 == 4 ? CONF_DIST_SPECIALS : CONF_DIST_BLOCKS;
}

enum { D_FP8, D_Y, D_GROUP, D_CODESV, D_SCALESV, D_YV };

static const conf_axis dequant_axes[] = {
    CONF_AX_DT("codes.dtype", 0, CONF_FP8S),
    CONF_AX_DT("y.dtype", 2, CONF_FLOATS),
    CONF_AX_CL("group", group, 1, group_names, 1, 128),
    CONF_AX_VW("codes.view", 0, CONF_VIEWS),
    CONF_AX_VW("scales.view", 1, CONF_VIEWS),
    CONF_AX_VW("y.view", 2, CONF_VIEWS),
};

static void dequant_derive(mla_variant *v)
{
    v->in_dtype = v->arg_dtype[0];
    v->out_dtype = v->arg_dtype[2];
}

const conf_op_axes conf_axes_fp8_group_dequant = {
    .op = MLA_OP_FP8_GROUP_DEQUANT,
    .axes = dequant_axes,
    .naxes = (int)(sizeof dequant_axes / sizeof dequant_axes[0]),
    .base = {.rows = 6, .cols = 256, .nargs = 3, .arg_dtype = {[1] = MLA_DTYPE_F32}},
    .derive = dequant_derive,
    .full = 1u << D_FP8 | 1u << D_Y | 1u << D_GROUP};

static void design_dequant(const conf_point *pt, int k, conf_case *c)
{
    design_params(c, pt, k, D_Y, D_FP8, D_GROUP, D_YV, D_CODESV, D_SCALESV);
    c->p.fp8g.dist = k % 5 == 4 ? CONF_DIST_SCALES_SPECIALS : CONF_DIST_SCALES;
}

/* ------------------------------------------------------------- quant */

static void label_quant(conf_case *c)
{
    const conf_p_fp8_group *q = &c->p.fp8g;
    if (c->golden >= 0)
        snprintf(c->label, sizeof c->label, "golden %s f32->%s %s g%lld", goldens[c->golden].what,
                 mla_dtype_name(q->fp8), mla_fp8_scale_rule_name((mla_fp8_scale_rule)q->rule),
                 (long long)q->group);
    else
        snprintf(c->label, sizeof c->label, "%s->%s %s g%lld", mla_dtype_name(q->x),
                 mla_dtype_name(q->fp8), mla_fp8_scale_rule_name((mla_fp8_scale_rule)q->rule),
                 (long long)q->group);
}

static int build_quant(conf_case *cases, int cap)
{
    conf_builder b = {.cases = cases, .cap = cap, .suite = &conf_suite_fp8_group_quant};
    for (int g = 0; g < NGOLDEN; ++g) {
        const golden_fp8 *gd = &goldens[g];
        conf_case c;
        init_case(&c, MLA_DTYPE_F32, gd->fp8, gd->rule, gd->M, gd->K, gd->group, g);
        conf_push(&b, &c);
    }
    for (int di = 0; di < 3; ++di)
        for (int fi = 0; fi < 2; ++fi)
            for (int rule = 0; rule < MLA_FP8_SCALE_RULE_COUNT; ++rule)
                for (int gi = 0; gi < 2; ++gi)
                    for (int k = 0; k < NSHAPES; ++k) {
                        conf_case c;
                        init_case(&c, floats[di], fp8s[fi], rule, shapes[k].M, shapes[k].K,
                                  groups[gi], -1);
                        set_layouts(&c, k);
                        c.p.fp8g.dist = shapes[k].specials ? CONF_DIST_SPECIALS : CONF_DIST_BLOCKS;
                        conf_push(&b, &c);
                    }
    conf_push_design(&b, &conf_axes_fp8_group_quant, design_quant);
    return b.n;
}

static mla_status add_args(const conf_case *c, conf_problem *p, int quant, char *err,
                           size_t errlen)
{
    const conf_p_fp8_group *q = &c->p.fp8g;
    int64_t M = q->M, K = q->K;
    int64_t ms[2] = {M, K}, ss[2] = {M, K / q->group};
    mla_status st = quant ? conf_add_arg(p, "x", 0, q->x, 2, ms, q->x_lay)
                          : conf_add_arg(p, "codes", 0, q->fp8, 2, ms, q->codes_lay);
    if (st == MLA_OK)
        st = quant ? conf_add_arg(p, "codes", 1, q->fp8, 2, ms, q->codes_lay)
                   : conf_add_arg(p, "scales", 0, MLA_DTYPE_F32, 2, ss, q->scales_lay);
    if (st == MLA_OK)
        st = quant ? conf_add_arg(p, "scales", 1, MLA_DTYPE_F32, 2, ss, q->scales_lay)
                   : conf_add_arg(p, "y", 1, q->x, 2, ms, q->x_lay);
    if (st != MLA_OK)
        snprintf(err, errlen, "cannot lay out the case (%s)", mla_status_name(st));
    return st;
}

static mla_status setup_quant(const conf_case *c, const conf_env *env, conf_problem *p,
                              char *err, size_t errlen)
{
    mla_status st = add_args(c, p, 1, err, errlen);
    if (st != MLA_OK)
        return st;
    if (c->golden < 0) {
        conf_fill(p, 0, c->p.fp8g.dist, c->seed, c->p.fp8g.group);
        return MLA_OK;
    }
    const golden_fp8 *g = &goldens[c->golden];
    st = conf_golden_input(p, 0, env, g->in, err, errlen);
    if (st == MLA_OK)
        st = conf_golden_output(p, 1, env, g->codes, err, errlen);
    if (st == MLA_OK) /* the indexer's scales file is [T]; the op writes [T, 1] */
        st = conf_golden_output(p, 2, env, g->scales, err, errlen);
    return st;
}

static mla_status exec_quant(mla_context *ctx, const conf_case *c, mla_tensor *t)
{
    return mla_fp8_group_quant(ctx, &t[0], &t[1], &t[2], c->p.fp8g.group,
                               (mla_fp8_scale_rule)c->p.fp8g.rule);
}

const conf_suite conf_suite_fp8_group_quant = {.name = "fp8_group_quant",
                                               .op = MLA_OP_FP8_GROUP_QUANT,
                                               .build = build_quant,
                                               .setup = setup_quant,
                                               .exec = exec_quant,
                                               .label = label_quant,
                                               .fields = quant_fields,
                                               .nfields = CONF_NFIELDS(quant_fields)};

/* ----------------------------------------------------------- dequant */

static void label_dequant(conf_case *c)
{
    const conf_p_fp8_group *q = &c->p.fp8g;
    snprintf(c->label, sizeof c->label, "%s->%s g%lld", mla_dtype_name(q->fp8),
             mla_dtype_name(q->x), (long long)q->group);
}

static int build_dequant(conf_case *cases, int cap)
{
    conf_builder b = {.cases = cases, .cap = cap, .suite = &conf_suite_fp8_group_dequant};
    for (int fi = 0; fi < 2; ++fi)
        for (int di = 0; di < 3; ++di)
            for (int gi = 0; gi < 2; ++gi)
                for (int k = 0; k < NSHAPES; ++k) {
                    conf_case c;
                    init_case(&c, floats[di], fp8s[fi], 0, shapes[k].M, shapes[k].K, groups[gi],
                              -1);
                    set_layouts(&c, k);
                    c.p.fp8g.dist =
                        shapes[k].specials ? CONF_DIST_SCALES_SPECIALS : CONF_DIST_SCALES;
                    conf_push(&b, &c);
                }
    conf_push_design(&b, &conf_axes_fp8_group_dequant, design_dequant);
    return b.n;
}

static mla_status setup_dequant(const conf_case *c, const conf_env *env, conf_problem *p,
                                char *err, size_t errlen)
{
    (void)env;
    mla_status st = add_args(c, p, 0, err, errlen);
    if (st != MLA_OK)
        return st;
    conf_fill(p, 0, CONF_DIST_CODES, c->seed, c->p.fp8g.group);
    conf_fill(p, 1, c->p.fp8g.dist, c->seed, c->p.fp8g.group);
    return MLA_OK;
}

static mla_status exec_dequant(mla_context *ctx, const conf_case *c, mla_tensor *t)
{
    return mla_fp8_group_dequant(ctx, &t[0], &t[1], c->p.fp8g.group, &t[2]);
}

const conf_suite conf_suite_fp8_group_dequant = {.name = "fp8_group_dequant",
                                                 .op = MLA_OP_FP8_GROUP_DEQUANT,
                                                 .build = build_dequant,
                                                 .setup = setup_dequant,
                                                 .exec = exec_dequant,
                                                 .label = label_dequant,
                                                 .fields = dequant_fields,
                                                 .nfields = CONF_NFIELDS(dequant_fields)};
