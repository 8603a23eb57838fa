/* mla_mxfp4_quant and mla_mxfp4_dequant: every input / output dtype, both
 * scale rules, the three scale layouts, odd row counts (including one that
 * crosses the pre-shuffled layout's 256-row padding), strided and
 * transposed views; plus the golden vectors (row-major scales). Bit-exact. */
#include <string.h>

#include "conformance/conf.h"

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

/* The scale tensor of a layout: [M, N] row-major or transposed (a padded
 * leading stride when asked), or the pre-shuffled byte array. */
static mla_status add_scales(conf_problem *p, int output, const conf_case *c, unsigned lay)
{
    int64_t M = c->v.rows, N = c->v.cols / BLOCK;
    int64_t shape[2] = {M, N};
    switch ((mla_scale_layout)c->v.layout) {
    case MLA_SCALE_ROW_MAJOR:
        return conf_add_arg(p, "scales", output, MLA_DTYPE_E8M0, 2, shape,
                            lay & ~(CONF_L_STEP2 | CONF_L_COLMAJOR));
    case MLA_SCALE_TRANSPOSED:
        return conf_add_arg(p, "scales", output, MLA_DTYPE_E8M0, 2, shape,
                            (lay & ~CONF_L_STEP2) | CONF_L_COLMAJOR);
    default: {
        int64_t bytes = mla_scale_preshuffled_bytes(M, N);
        return conf_add_arg(p, "scales", output, MLA_DTYPE_E8M0, 1, &bytes, lay & CONF_L_OFFSET);
    }
    }
}

static void init_case(conf_case *c, int k, int golden)
{
    memset(c, 0, sizeof *c);
    c->golden = golden;
    c->ndim = 2;
    c->shape[0] = golden >= 0 ? 64 : shapes[k].M;
    c->shape[1] = golden >= 0 ? 256 : shapes[k].K;
    c->v.group = BLOCK;
    c->v.rows = c->shape[0];
    c->v.cols = c->shape[1];
}

/* ------------------------------------------------------------- quant */

static int build_quant(conf_case *cases, int cap)
{
    conf_builder b = {cases, cap, 0, MLA_OP_MXFP4_QUANT};
    for (int rule = 0; rule < MLA_MXFP4_RULE_COUNT; ++rule) {
        conf_case c;
        init_case(&c, 0, rule);
        c.v.in_dtype = MLA_DTYPE_F32;
        c.v.out_dtype = MLA_DTYPE_FP4X2;
        c.v.layout = MLA_SCALE_ROW_MAJOR;
        c.v.rule = rule;
        snprintf(c.label, sizeof c.label, "golden f32 %s row_major",
                 mla_mxfp4_rule_name((mla_mxfp4_rule)rule));
        conf_push(&b, &c);
    }
    for (int di = 0; di < 3; ++di)
        for (int rule = 0; rule < MLA_MXFP4_RULE_COUNT; ++rule)
            for (int layout = 0; layout < MLA_SCALE_LAYOUT_COUNT; ++layout)
                for (int k = 0; k < NSHAPES; ++k) {
                    conf_case c;
                    init_case(&c, k, -1);
                    c.v.in_dtype = floats[di];
                    c.v.out_dtype = MLA_DTYPE_FP4X2;
                    c.v.layout = layout;
                    c.v.rule = rule;
                    c.lay[0] = shapes[k].lm;
                    c.lay[1] = shapes[k].lc;
                    c.lay[2] = shapes[k].ls;
                    c.dist = shapes[k].specials ? CONF_DIST_SPECIALS : CONF_DIST_BLOCKS;
                    snprintf(c.label, sizeof c.label, "%s %s %s", mla_dtype_name(floats[di]),
                             mla_mxfp4_rule_name((mla_mxfp4_rule)rule),
                             mla_scale_layout_name((mla_scale_layout)layout));
                    conf_push(&b, &c);
                }
    return b.n;
}

static mla_status setup_quant(const conf_case *c, const conf_env *env, conf_problem *p,
                              char *err, size_t errlen)
{
    int64_t M = c->v.rows, K = c->v.cols;
    int64_t xs[2] = {M, K}, cs[2] = {M, K / 2};
    mla_status st = conf_add_arg(p, "x", 0, c->v.in_dtype, 2, xs, c->lay[0]);
    if (st == MLA_OK)
        st = conf_add_arg(p, "codes", 1, MLA_DTYPE_FP4X2, 2, cs, c->lay[1]);
    if (st == MLA_OK)
        st = add_scales(p, 1, c, c->lay[2]);
    if (st != MLA_OK) {
        snprintf(err, errlen, "cannot lay out the case (%s)", mla_status_name(st));
        return st;
    }
    if (c->golden < 0) {
        conf_fill(p, 0, c->dist, c->seed, BLOCK);
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
    return mla_mxfp4_quant(ctx, &t[0], &t[1], &t[2], (mla_scale_layout)c->v.layout,
                           (mla_mxfp4_rule)c->v.rule);
}

const conf_suite conf_suite_mxfp4_quant = {"mxfp4_quant", MLA_OP_MXFP4_QUANT, build_quant,
                                           setup_quant, exec_quant, NULL};

/* ----------------------------------------------------------- dequant */

static int build_dequant(conf_case *cases, int cap)
{
    conf_builder b = {cases, cap, 0, MLA_OP_MXFP4_DEQUANT};
    for (int di = 0; di < 3; ++di)
        for (int layout = 0; layout < MLA_SCALE_LAYOUT_COUNT; ++layout)
            for (int k = 0; k < NSHAPES; ++k) {
                conf_case c;
                init_case(&c, k, -1);
                c.v.in_dtype = MLA_DTYPE_FP4X2;
                c.v.out_dtype = floats[di];
                c.v.layout = layout;
                c.lay[0] = shapes[k].lc;
                c.lay[1] = shapes[k].ls;
                c.lay[2] = shapes[k].lm;
                c.dist = shapes[k].specials ? CONF_DIST_SCALES_SPECIALS : CONF_DIST_SCALES;
                snprintf(c.label, sizeof c.label, "->%s %s", mla_dtype_name(floats[di]),
                         mla_scale_layout_name((mla_scale_layout)layout));
                conf_push(&b, &c);
            }
    return b.n;
}

static mla_status setup_dequant(const conf_case *c, const conf_env *env, conf_problem *p,
                                char *err, size_t errlen)
{
    (void)env;
    int64_t M = c->v.rows, K = c->v.cols;
    int64_t ys[2] = {M, K}, cs[2] = {M, K / 2};
    mla_status st = conf_add_arg(p, "codes", 0, MLA_DTYPE_FP4X2, 2, cs, c->lay[0]);
    if (st == MLA_OK)
        st = add_scales(p, 0, c, c->lay[1]);
    if (st == MLA_OK)
        st = conf_add_arg(p, "y", 1, c->v.out_dtype, 2, ys, c->lay[2]);
    if (st != MLA_OK) {
        snprintf(err, errlen, "cannot lay out the case (%s)", mla_status_name(st));
        return st;
    }
    conf_fill(p, 0, CONF_DIST_CODES, c->seed, BLOCK);
    conf_fill(p, 1, c->dist, c->seed, BLOCK);
    return MLA_OK;
}

static mla_status exec_dequant(mla_context *ctx, const conf_case *c, mla_tensor *t)
{
    return mla_mxfp4_dequant(ctx, &t[0], &t[1], (mla_scale_layout)c->v.layout, &t[2]);
}

const conf_suite conf_suite_mxfp4_dequant = {"mxfp4_dequant", MLA_OP_MXFP4_DEQUANT,
                                             build_dequant, setup_dequant, exec_dequant, NULL};
