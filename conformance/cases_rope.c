/* mla_rope: interleaved and NeoX, rope dims 2, 6, 16, 64, int32 and int64
 * positions, [T, D] rows and [T, H, D] heads (dims past R copied), in place
 * and out of place, q_pe as a strided view inside a q buffer rotated into a
 * view of q_cat, tables from mla_rope_table_build with and without YaRN
 * (DeepSeek-V3, Kimi-K2, an mscale ratio != 1, test-tiny).
 * Bit-exact: MLA.md pins the arithmetic (fp32 products and sums rounded
 * separately, no FMA, one host-built table), so every backend's rotated
 * values equal the reference's bit for bit.
 */
#include <string.h>

#include "conformance/cover.h"

#define VIEW_NOPE 128 /* q = [T, H, nope + R]: q_pe starts at nope */
#define VIEW_L 128    /* q_cat = [T, H, L + R]: its rope part starts at L */

/* YaRN settings of the tables: {base, factor, beta_fast, beta_slow, orig, mscale, all_dim}. */
static const double tables[][7] = {
    {10000.0, 1.0, 32.0, 1.0, 4096.0, 1.0, 1.0},     /* no YaRN */
    {10000.0, 40.0, 32.0, 1.0, 4096.0, 1.0, 1.0},    /* DeepSeek-V3 */
    {50000.0, 32.0, 1.0, 1.0, 4096.0, 1.0, 1.0},     /* Kimi-K2: equal betas */
    {10000.0, 40.0, 32.0, 1.0, 4096.0, 1.0, 0.707},  /* cos/sin scaled by an mscale ratio */
    {10000.0, 4.0, 32.0, 1.0, 512.0, 1.0, 1.0},      /* test-tiny */
};
static const char *const table_names[] = {"plain", "yarn-v3", "yarn-kimi", "yarn-mscale",
                                          "yarn-tiny"};

static const char *table_name(int t) { return t >= 0 && t < 5 ? table_names[t] : "unknown"; }

static const conf_field fields[] = {
    CONF_ENUM(rope, style, conf_name_rope_style, MLA_ROPE_STYLE_COUNT),
    CONF_ENUM(rope, table, table_name, 5),
    CONF_FIELD(rope, R, CONF_F_I64),
    CONF_FIELD(rope, x, CONF_F_DTYPE),
    CONF_FIELD(rope, y, CONF_F_DTYPE),
    CONF_FIELD(rope, positions, CONF_F_DTYPE),
    CONF_FIELD(rope, T, CONF_F_I64),
    CONF_FIELD(rope, H, CONF_F_I64),
    CONF_FIELD(rope, D, CONF_F_I64),
    CONF_FIELD(rope, P, CONF_F_I64),
    CONF_FIELD(rope, in_place, CONF_F_I32),
    CONF_FIELD(rope, q_pe_view, CONF_F_I32),
    CONF_FIELD(rope, x_lay, CONF_F_LAY),
    CONF_FIELD(rope, y_lay, CONF_F_LAY),
    CONF_FIELD(rope, positions_lay, CONF_F_LAY),
    CONF_ENUM(rope, dist, conf_name_dist, CONF_DIST_COUNT),
};

static void label(conf_case *c)
{
    const conf_p_rope *q = &c->p.rope;
    snprintf(c->label, sizeof c->label, "%s R%lld %s->%s %s",
             mla_rope_style_name((mla_rope_style)q->style), (long long)q->R, mla_dtype_name(q->x),
             mla_dtype_name(q->y), table_name(q->table));
}

static void add(conf_builder *b, int style, int64_t R, mla_dtype in, mla_dtype out, int64_t T,
                int64_t H, int64_t D, int table, int inplace, int view, mla_dtype pos, int64_t P,
                unsigned lay, const char *note)
{
    conf_case c;
    memset(&c, 0, sizeof c);
    c.golden = -1;
    c.note = note;
    c.p.rope = (conf_p_rope){style,   table, R,   in,  out,           pos,          T, H, D, P,
                             inplace, view,  lay, lay, CONF_L_CONTIG, CONF_DIST_ACT};
    conf_push(b, &c);
}

enum { A_X, A_Y, A_POS, A_STYLE, A_XV, A_YV, A_POSV };

static const char *const style_names[] = {"interleaved", "neox"};

static const conf_axis axes[] = {
    CONF_AX_DT("x.dtype", 3, CONF_FLOATS),
    CONF_AX_DT("y.dtype", 4, CONF_FLOATS),
    CONF_AX_DT("positions.dtype", 2, CONF_INDEX),
    CONF_AX_FL("style", rule, style_names, MLA_ROPE_INTERLEAVED, MLA_ROPE_NEOX),
    CONF_AX_VW("x.view", 3, CONF_VIEWS),
    CONF_AX_VW("y.view", 4, CONF_VIEWS, MLA_ARG_IN_PLACE),
    CONF_AX_VW("positions.view", 2, CONF_VIEWS_1D),
};

/* y in place over x: the same element size */
static int legal(const conf_point *p)
{
    return !CONF_HAS(p, A_YV) || CONF_VAL(p, A_YV) != MLA_ARG_IN_PLACE ||
           CONF_RULE(p, A_X, A_Y,
                     mla_dtype_size((mla_dtype)CONF_VAL(p, A_X)) ==
                         mla_dtype_size((mla_dtype)CONF_VAL(p, A_Y)));
}

static void derive(mla_variant *v)
{
    v->in_dtype = v->arg_dtype[3];
    v->out_dtype = v->arg_dtype[4];
}

const conf_op_axes conf_axes_rope = {
    .op = MLA_OP_ROPE,
    .axes = axes,
    .naxes = (int)(sizeof axes / sizeof axes[0]),
    .base = {.rows = 4, .cols = 16, .nargs = 5, .arg_dtype = {MLA_DTYPE_F32, MLA_DTYPE_F32}},
    .derive = derive,
    .legal = legal,
    .full = 1u << A_X | 1u << A_Y | 1u << A_STYLE};

/* [4, 3, 24] rows with R = 16 (dims past R copied), test-tiny's table */
static void design(const conf_point *pt, int k, conf_case *c)
{
    const int in_place = CONF_VAL(pt, A_YV) == MLA_ARG_IN_PLACE;
    c->p.rope = (conf_p_rope){(int32_t)CONF_VAL(pt, A_STYLE),
                              4,
                              16,
                              (mla_dtype)CONF_VAL(pt, A_X),
                              (mla_dtype)CONF_VAL(pt, A_Y),
                              (mla_dtype)CONF_VAL(pt, A_POS),
                              4,
                              3,
                              24,
                              512,
                              in_place,
                              0,
                              conf_lay_of_view(CONF_VAL(pt, A_XV), 3, k),
                              in_place ? 0 : conf_lay_of_view(CONF_VAL(pt, A_YV), 3, k + 1),
                              conf_lay_of_view(CONF_VAL(pt, A_POSV), 1, k),
                              CONF_DIST_ACT};
    c->note = " (pairwise)";
}

static int build(conf_case *cases, int cap)
{
    conf_builder b = {.cases = cases, .cap = cap, .suite = &conf_suite_rope};
    const mla_dtype f32 = MLA_DTYPE_F32, bf16 = MLA_DTYPE_BF16, f16 = MLA_DTYPE_F16;
    const mla_dtype i32 = MLA_DTYPE_I32, i64 = MLA_DTYPE_I64;
    static const int64_t dims[] = {2, 6, 16, 64};
    static const mla_dtype pairs[][2] = {{MLA_DTYPE_BF16, MLA_DTYPE_BF16},
                                         {MLA_DTYPE_F16, MLA_DTYPE_F16},
                                         {MLA_DTYPE_BF16, MLA_DTYPE_F32},
                                         {MLA_DTYPE_F32, MLA_DTYPE_BF16}};
    for (int s = 0; s < MLA_ROPE_STYLE_COUNT; ++s) {
        for (int r = 0; r < 4; ++r)
            add(&b, s, dims[r], f32, f32, 5, 3, dims[r], r == 3 ? 1 : 0, 0, 0, r % 2 ? i64 : i32,
                300, CONF_L_CONTIG, NULL);
        for (int k = 0; k < 4; ++k)
            add(&b, s, 64, pairs[k][0], pairs[k][1], 4, 4, 64, 1, 0, 0, i64, 4096, CONF_L_PAD,
                NULL);
        add(&b, s, 64, f32, f32, 4, 2, 64, 2, 0, 0, i32, 4096, CONF_L_CONTIG, NULL);
        add(&b, s, 64, f32, f32, 4, 2, 64, 3, 0, 0, i32, 4096, CONF_L_CONTIG, NULL);
        add(&b, s, 16, f32, f32, 6, 0, 24, 4, 0, 0, i32, 512, CONF_L_PAD, " rows, D 24");
        add(&b, s, 2, bf16, bf16, 7, 0, 2, 0, 0, 0, i64, 65536, CONF_L_CONTIG, " rows");
        add(&b, s, 64, bf16, bf16, 3, 4, 64, 1, 0, 1, i64, 4096, CONF_L_CONTIG, " q_pe view");
        add(&b, s, 64, bf16, bf16, 3, 4, 64, 1, 1, 1, i32, 4096, CONF_L_CONTIG, " q_pe in place");
        add(&b, s, 16, f32, f32, 5, 3, 16, 4, 1, 0, i32, 512, CONF_L_OFFSET, " in place");
        add(&b, s, 6, f16, f16, 5, 2, 10, 0, 1, 0, i64, 300, CONF_L_PAD, " in place, D 10");
    }
    add(&b, 0, 16, bf16, bf16, 0, 3, 16, 4, 0, 0, i32, 512, CONF_L_CONTIG, " T=0");
    /* more heads than a HIP thread takes (4): head groups */
    add(&b, 0, 64, bf16, bf16, 3, 9, 64, 1, 0, 1, i64, 4096, CONF_L_CONTIG, " q_pe view, 9 heads");
    add(&b, 1, 16, f32, f32, 3, 6, 24, 4, 1, 0, i32, 512, CONF_L_PAD, " in place, 6 heads, D 24");
    conf_push_design(&b, &conf_axes_rope, design);
    return b.n;
}

/* x (q_pe view or plain) and y (q_cat view or plain), as role. */
static mla_status add_x(conf_problem *p, const conf_case *c, const char *name, int role,
                        mla_dtype dt, unsigned lay, int64_t row)
{
    const conf_p_rope *q = &c->p.rope;
    const int64_t T = q->T, H = q->H, D = q->D;
    if (q->q_pe_view) { /* q_pe [T, H, R] at `row - R` of rows of `row` values */
        int64_t shape[3] = {T, H, D}, stride[3] = {H * row, row, 1};
        return conf_add_view(p, name, role, dt, 3, shape, stride, row - D);
    }
    const int64_t shape[3] = {T, H ? H : D, D};
    return conf_add_arg(p, name, role, dt, H ? 3 : 2, shape, lay);
}

static mla_status setup(const conf_case *c, const conf_env *env, conf_problem *p, char *err,
                        size_t errlen)
{
    (void)env;
    const conf_p_rope *q = &c->p.rope;
    const int64_t T = q->T, R = q->R, P = q->P, D = q->D;
    const double *cfg = tables[q->table];
    int64_t ts[2] = {P, R / 2}, ps[1] = {T};
    mla_status st = conf_add_arg(p, "cos", CONF_IN, MLA_DTYPE_F32, 2, ts, CONF_L_CONTIG);
    if (st == MLA_OK)
        st = conf_add_arg(p, "sin", CONF_IN, MLA_DTYPE_F32, 2, ts, CONF_L_CONTIG);
    if (st == MLA_OK)
        st = conf_add_arg(p, "positions", CONF_IN, q->positions, 1, ps, q->positions_lay);
    if (st == MLA_OK)
        st = add_x(p, c, "x", q->in_place ? CONF_INOUT : CONF_IN, q->x, q->x_lay, VIEW_NOPE + D);
    if (st == MLA_OK && !q->in_place)
        st = add_x(p, c, "y", CONF_OUT, q->y, q->y_lay, VIEW_L + D);
    if (st != MLA_OK) {
        snprintf(err, errlen, "cannot lay out the case (%s)", mla_status_name(st));
        return st;
    }
    mla_rope_config rc = {(int32_t)R, cfg[0], cfg[1], cfg[2], cfg[3], (int64_t)cfg[4], cfg[5],
                          cfg[6]};
    st = mla_rope_table_build(&rc, P, (float *)conf_arg_elem0(&p->arg[0]),
                              (float *)conf_arg_elem0(&p->arg[1]));
    if (st != MLA_OK) {
        snprintf(err, errlen, "mla_rope_table_build: %s", mla_status_name(st));
        return st;
    }
    /* positions: the table's ends, then spread over all of it */
    for (int64_t t = 0; t < T; ++t) {
        int64_t pos = t == 0 ? 0 : t == 1 ? P - 1 : (int64_t)(conf_rng(c->seed, 9, (uint64_t)t, 0) %
                                                            (uint64_t)P);
        conf_set_value(p, 2, t, (double)pos);
    }
    conf_fill(p, 3, q->dist, c->seed, R);
    p->arg[3].t.dtype = q->in_place ? q->y : q->x; /* in place: y's values come back */
    return MLA_OK;
}

static mla_status exec(mla_context *ctx, const conf_case *c, mla_tensor *t)
{
    const conf_p_rope *q = &c->p.rope;
    mla_tensor x = t[3];
    x.dtype = q->x;
    return mla_rope(ctx, &t[0], &t[1], &t[2], &x, q->in_place ? &t[3] : &t[4],
                    (mla_rope_style)q->style);
}

const conf_suite conf_suite_rope = {.name = "rope",
                                    .op = MLA_OP_ROPE,
                                    .build = build,
                                    .setup = setup,
                                    .exec = exec,
                                    .label = label,
                                    .fields = fields,
                                    .nfields = CONF_NFIELDS(fields)};
