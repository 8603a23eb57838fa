/* mla_fp8_group_quant and mla_fp8_group_dequant: both fp8 flavours, the
 * three scale rules, groups 128 (production) and 32, row-major and
 * transposed scales, strided views; plus the golden vectors: aiter's
 * group-128 quant and the indexer K quant (one group per 128-dim token,
 * rule DIV = the vectors' "plain", UE8M0 = "ue8m0"). Bit-exact. */
#include <string.h>

#include "conformance/conf.h"

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

static void init_case(conf_case *c, int64_t M, int64_t K, int64_t group, int golden)
{
    memset(c, 0, sizeof *c);
    c->golden = golden;
    c->ndim = 2;
    c->shape[0] = M;
    c->shape[1] = K;
    c->v.group = group;
    c->v.rows = M;
    c->v.cols = K;
}

static void set_layouts(conf_case *c, int k)
{
    c->lay[0] = shapes[k].lm;
    c->lay[1] = shapes[k].lc;
    c->lay[2] = shapes[k].ls;
}

/* ------------------------------------------------------------- quant */

static int build_quant(conf_case *cases, int cap)
{
    conf_builder b = {cases, cap, 0, MLA_OP_FP8_GROUP_QUANT};
    for (int g = 0; g < NGOLDEN; ++g) {
        const golden_fp8 *gd = &goldens[g];
        conf_case c;
        init_case(&c, gd->M, gd->K, gd->group, g);
        c.v.in_dtype = MLA_DTYPE_F32;
        c.v.out_dtype = gd->fp8;
        c.v.rule = gd->rule;
        snprintf(c.label, sizeof c.label, "golden %s f32->%s %s g%lld", gd->what,
                 mla_dtype_name(gd->fp8), mla_fp8_scale_rule_name(gd->rule), (long long)gd->group);
        conf_push(&b, &c);
    }
    for (int di = 0; di < 3; ++di)
        for (int fi = 0; fi < 2; ++fi)
            for (int rule = 0; rule < MLA_FP8_SCALE_RULE_COUNT; ++rule)
                for (int gi = 0; gi < 2; ++gi)
                    for (int k = 0; k < NSHAPES; ++k) {
                        conf_case c;
                        init_case(&c, shapes[k].M, shapes[k].K, groups[gi], -1);
                        c.v.in_dtype = floats[di];
                        c.v.out_dtype = fp8s[fi];
                        c.v.rule = rule;
                        set_layouts(&c, k);
                        c.dist = shapes[k].specials ? CONF_DIST_SPECIALS : CONF_DIST_BLOCKS;
                        snprintf(c.label, sizeof c.label, "%s->%s %s g%lld",
                                 mla_dtype_name(floats[di]), mla_dtype_name(fp8s[fi]),
                                 mla_fp8_scale_rule_name((mla_fp8_scale_rule)rule),
                                 (long long)groups[gi]);
                        conf_push(&b, &c);
                    }
    return b.n;
}

static mla_status add_args(const conf_case *c, conf_problem *p, int quant, char *err,
                           size_t errlen)
{
    int64_t M = c->v.rows, K = c->v.cols;
    int64_t ms[2] = {M, K}, ss[2] = {M, K / c->v.group};
    mla_dtype fp8 = quant ? c->v.out_dtype : c->v.in_dtype;
    mla_dtype fl = quant ? c->v.in_dtype : c->v.out_dtype;
    mla_status st = quant ? conf_add_arg(p, "x", 0, fl, 2, ms, c->lay[0])
                          : conf_add_arg(p, "codes", 0, fp8, 2, ms, c->lay[1]);
    if (st == MLA_OK)
        st = quant ? conf_add_arg(p, "codes", 1, fp8, 2, ms, c->lay[1])
                   : conf_add_arg(p, "scales", 0, MLA_DTYPE_F32, 2, ss, c->lay[2]);
    if (st == MLA_OK)
        st = quant ? conf_add_arg(p, "scales", 1, MLA_DTYPE_F32, 2, ss, c->lay[2])
                   : conf_add_arg(p, "y", 1, fl, 2, ms, c->lay[0]);
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
        conf_fill(p, 0, c->dist, c->seed, c->v.group);
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
    return mla_fp8_group_quant(ctx, &t[0], &t[1], &t[2], c->v.group,
                               (mla_fp8_scale_rule)c->v.rule);
}

const conf_suite conf_suite_fp8_group_quant = {"fp8_group_quant", MLA_OP_FP8_GROUP_QUANT,
                                               build_quant, setup_quant, exec_quant, NULL};

/* ----------------------------------------------------------- dequant */

static int build_dequant(conf_case *cases, int cap)
{
    conf_builder b = {cases, cap, 0, MLA_OP_FP8_GROUP_DEQUANT};
    for (int fi = 0; fi < 2; ++fi)
        for (int di = 0; di < 3; ++di)
            for (int gi = 0; gi < 2; ++gi)
                for (int k = 0; k < NSHAPES; ++k) {
                    conf_case c;
                    init_case(&c, shapes[k].M, shapes[k].K, groups[gi], -1);
                    c.v.in_dtype = fp8s[fi];
                    c.v.out_dtype = floats[di];
                    set_layouts(&c, k);
                    c.dist = shapes[k].specials ? CONF_DIST_SCALES_SPECIALS : CONF_DIST_SCALES;
                    snprintf(c.label, sizeof c.label, "%s->%s g%lld", mla_dtype_name(fp8s[fi]),
                             mla_dtype_name(floats[di]), (long long)groups[gi]);
                    conf_push(&b, &c);
                }
    return b.n;
}

static mla_status setup_dequant(const conf_case *c, const conf_env *env, conf_problem *p,
                                char *err, size_t errlen)
{
    (void)env;
    mla_status st = add_args(c, p, 0, err, errlen);
    if (st != MLA_OK)
        return st;
    conf_fill(p, 0, CONF_DIST_CODES, c->seed, c->v.group);
    conf_fill(p, 1, c->dist, c->seed, c->v.group);
    return MLA_OK;
}

static mla_status exec_dequant(mla_context *ctx, const conf_case *c, mla_tensor *t)
{
    return mla_fp8_group_dequant(ctx, &t[0], &t[1], c->v.group, &t[2]);
}

const conf_suite conf_suite_fp8_group_dequant = {"fp8_group_dequant", MLA_OP_FP8_GROUP_DEQUANT,
                                                 build_dequant, setup_dequant, exec_dequant, NULL};
