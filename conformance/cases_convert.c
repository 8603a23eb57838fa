/* mla_convert: every source x target pair the API takes, both saturation
 * modes for fp8 targets, odd sizes and strided / transposed / misaligned
 * views; plus the golden encodes and all-code decodes. Bit-exact. */
#include <string.h>

#include "conformance/cover.h"

/* Golden cases. in == NULL: the input is every code of the source, in order. */
typedef struct golden_convert {
    const char *in, *out;
    mla_dtype src, dst;
    mla_saturation mode;
    int nan_any; /* e4m3fn non-saturating writes NaN as 0x7F or 0xFF: both count as NaN */
    int64_t n;   /* values */
} golden_convert;

static const golden_convert goldens[] = {
    {"fp8_inputs_f32.npy", "e4m3fn_encode_saturating_u8.npy", MLA_DTYPE_F32,
     MLA_DTYPE_FP8_E4M3FN, MLA_SATURATE, 0, 6051},
    {"fp8_inputs_f32.npy", "e4m3fn_encode_nonsaturating_u8.npy", MLA_DTYPE_F32,
     MLA_DTYPE_FP8_E4M3FN, MLA_NON_SATURATE, 1, 6051},
    {"fp8_inputs_f32.npy", "e4m3fnuz_encode_saturating_u8.npy", MLA_DTYPE_F32,
     MLA_DTYPE_FP8_E4M3FNUZ, MLA_SATURATE, 0, 6051},
    {"fp8_inputs_f32.npy", "e4m3fnuz_encode_nonsaturating_u8.npy", MLA_DTYPE_F32,
     MLA_DTYPE_FP8_E4M3FNUZ, MLA_NON_SATURATE, 0, 6051},
    {NULL, "e4m3fn_decode_all_codes_f32.npy", MLA_DTYPE_FP8_E4M3FN, MLA_DTYPE_F32, MLA_SATURATE,
     0, 256},
    {NULL, "e4m3fnuz_decode_all_codes_f32.npy", MLA_DTYPE_FP8_E4M3FNUZ, MLA_DTYPE_F32,
     MLA_SATURATE, 0, 256},
    {NULL, "e8m0_decode_all_codes_f32.npy", MLA_DTYPE_E8M0, MLA_DTYPE_F32, MLA_SATURATE, 0, 256},
    {NULL, "e2m1_decode_all_codes_f32.npy", MLA_DTYPE_FP4X2, MLA_DTYPE_F32, MLA_SATURATE, 0, 16},
    {"bf16_inputs_f32.npy", "bf16_encode_u16.npy", MLA_DTYPE_F32, MLA_DTYPE_BF16, MLA_SATURATE, 0,
     8051},
};
#define NGOLDEN ((int)(sizeof goldens / sizeof goldens[0]))

static int is_fp8(mla_dtype d) { return d == MLA_DTYPE_FP8_E4M3FN || d == MLA_DTYPE_FP8_E4M3FNUZ; }

static const conf_field fields[] = {
    CONF_FIELD(convert, x, CONF_F_DTYPE),
    CONF_FIELD(convert, y, CONF_F_DTYPE),
    CONF_ENUM(convert, mode, conf_name_saturation, MLA_SATURATION_COUNT),
    CONF_FIELD(convert, shape, CONF_F_SHAPE),
    CONF_FIELD(convert, x_lay, CONF_F_LAY),
    CONF_FIELD(convert, y_lay, CONF_F_LAY),
    CONF_FIELD(convert, in_place, CONF_F_I32),
    CONF_ENUM(convert, dist, conf_name_dist, CONF_DIST_COUNT),
};

static void label(conf_case *c)
{
    const conf_p_convert *p = &c->p.convert;
    snprintf(c->label, sizeof c->label, "%s%s->%s%s%s", c->golden >= 0 ? "golden " : "",
             mla_dtype_name(p->x), mla_dtype_name(p->y),
             is_fp8(p->y) ? (p->mode == MLA_SATURATE ? " sat" : " nonsat") : "",
             p->in_place ? " in place" : "");
}

/* ------------------------------------------------------------ axes */

enum { A_X, A_Y, A_MODE, A_XV, A_YV };

static const conf_axis axes[] = {
    CONF_AX_DT("x.dtype", 0, CONF_FLOATS, CONF_FP8S, MLA_DTYPE_E8M0, MLA_DTYPE_FP4X2),
    CONF_AX_DT("y.dtype", 1, CONF_FLOATS, CONF_FP8S, MLA_DTYPE_FP4X2),
    CONF_AX_FL("mode", rule, NULL, MLA_SATURATE, MLA_NON_SATURATE),
    CONF_AX_VW("x.view", 0, CONF_VIEWS),
    CONF_AX_VW("y.view", 1, CONF_VIEWS, MLA_ARG_IN_PLACE),
};

/* y in place over x: the same elements, so the same element size, not fp4 */
static int legal(const conf_point *p)
{
    const int64_t x = CONF_VAL(p, A_X), y = CONF_VAL(p, A_Y);
    const int in_place = CONF_HAS(p, A_YV) && CONF_VAL(p, A_YV) == MLA_ARG_IN_PLACE;
    return !in_place ||
           ((!CONF_HAS(p, A_X) || x != MLA_DTYPE_FP4X2) &&
            (!CONF_HAS(p, A_Y) || y != MLA_DTYPE_FP4X2) &&
            CONF_RULE(p, A_X, A_Y, mla_dtype_size((mla_dtype)x) == mla_dtype_size((mla_dtype)y)));
}

static void derive(mla_variant *v)
{
    v->in_dtype = v->arg_dtype[0];
    v->out_dtype = v->arg_dtype[1];
}

const conf_op_axes conf_axes_convert = {.op = MLA_OP_CONVERT,
                                        .axes = axes,
                                        .naxes = (int)(sizeof axes / sizeof axes[0]),
                                        .base = {.nargs = 2, .rows = 60, .cols = 12},
                                        .derive = derive,
                                        .legal = legal,
                                        .full = 1u << A_X | 1u << A_Y | 1u << A_MODE};

static int is_float(mla_dtype d)
{
    return d == MLA_DTYPE_F32 || d == MLA_DTYPE_F16 || d == MLA_DTYPE_BF16;
}

/* [5, 12] values (x's dims transposed or stepped as its view says) */
static void design(const conf_point *pt, int k, conf_case *c)
{
    const mla_dtype x = (mla_dtype)CONF_VAL(pt, A_X);
    const int in_place = CONF_VAL(pt, A_YV) == MLA_ARG_IN_PLACE;
    c->p.convert = (conf_p_convert){x,
                                    (mla_dtype)CONF_VAL(pt, A_Y),
                                    (int32_t)CONF_VAL(pt, A_MODE),
                                    {2, {5, 12}},
                                    conf_lay_of_view(CONF_VAL(pt, A_XV), 2, k),
                                    in_place ? 0 : conf_lay_of_view(CONF_VAL(pt, A_YV), 2, k + 1),
                                    in_place,
                                    is_float(x) ? CONF_DIST_EDGE : CONF_DIST_CODES};
    c->note = " (pairwise)";
}

/* Value shapes (the unpacked side) and layouts of x and y. */
static const struct {
    conf_shape shape;
    unsigned lx, ly;
} shapes[] = {
    {{1, {1030}}, CONF_L_CONTIG, CONF_L_CONTIG},
    {{2, {7, 66}}, CONF_L_PAD | CONF_L_STEP2, CONF_L_PAD},
    {{2, {33, 18}}, CONF_L_COLMAJOR, CONF_L_CONTIG},
    {{3, {3, 5, 34}}, CONF_L_OFFSET, CONF_L_COLMAJOR | CONF_L_PAD},
    {{2, {0, 4}}, CONF_L_CONTIG, CONF_L_CONTIG},
};

static int build(conf_case *cases, int cap)
{
    conf_builder b = {.cases = cases, .cap = cap, .suite = &conf_suite_convert};
    for (int g = 0; g < NGOLDEN; ++g) {
        conf_case c;
        memset(&c, 0, sizeof c);
        c.golden = g;
        c.p.convert = (conf_p_convert){goldens[g].src,
                                       goldens[g].dst,
                                       goldens[g].mode,
                                       {1, {goldens[g].n}},
                                       CONF_L_CONTIG,
                                       CONF_L_CONTIG,
                                       0,
                                       CONF_DIST_EDGE};
        conf_push(&b, &c);
    }
    static const mla_dtype srcs[] = {MLA_DTYPE_F32,          MLA_DTYPE_F16,  MLA_DTYPE_BF16,
                                     MLA_DTYPE_FP8_E4M3FN,   MLA_DTYPE_FP8_E4M3FNUZ,
                                     MLA_DTYPE_E8M0,         MLA_DTYPE_FP4X2};
    static const mla_dtype dsts[] = {MLA_DTYPE_F32,        MLA_DTYPE_F16,
                                     MLA_DTYPE_BF16,       MLA_DTYPE_FP8_E4M3FN,
                                     MLA_DTYPE_FP8_E4M3FNUZ, MLA_DTYPE_FP4X2};
    for (size_t si = 0; si < sizeof srcs / sizeof srcs[0]; ++si)
        for (size_t di = 0; di < sizeof dsts / sizeof dsts[0]; ++di)
            for (int mode = 0; mode < (is_fp8(dsts[di]) ? 2 : 1); ++mode)
                for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; ++k) {
                    conf_case c;
                    memset(&c, 0, sizeof c);
                    c.golden = -1;
                    const int codes = srcs[si] != MLA_DTYPE_F32 && srcs[si] != MLA_DTYPE_F16 &&
                                      srcs[si] != MLA_DTYPE_BF16;
                    c.p.convert = (conf_p_convert){
                        srcs[si],     dsts[di],     mode, shapes[k].shape,
                        shapes[k].lx, shapes[k].ly, 0,    codes ? CONF_DIST_CODES : CONF_DIST_EDGE};
                    conf_push(&b, &c);
                }
    conf_push_design(&b, &conf_axes_convert, design);
    return b.n;
}

/* x: every code of the source, in order (fp4x2: byte j holds codes 2j, 2j+1). */
static void fill_all_codes(conf_problem *p)
{
    conf_arg *a = &p->arg[0];
    if (a->t.dtype != MLA_DTYPE_FP4X2) {
        conf_fill_iota(p, 0);
        return;
    }
    for (int64_t j = 0; j < a->t.shape[0]; ++j)
        conf_arg_elem0(a)[j * a->t.stride[0]] =
            (unsigned char)(((2 * j) & 0xF) | ((2 * j + 1) & 0xF) << 4);
}

static mla_status setup(const conf_case *c, const conf_env *env, conf_problem *p, char *err,
                        size_t errlen)
{
    const conf_p_convert *q = &c->p.convert;
    const mla_dtype src = q->x, dst = q->y;
    const int32_t nd = q->shape.ndim;
    int64_t xs[3], ys[3];
    memcpy(xs, q->shape.d, sizeof xs);
    memcpy(ys, q->shape.d, sizeof ys);
    if (src == MLA_DTYPE_FP4X2 && dst != MLA_DTYPE_FP4X2)
        xs[nd - 1] /= 2;
    if (dst == MLA_DTYPE_FP4X2 && src != MLA_DTYPE_FP4X2)
        ys[nd - 1] /= 2;
    mla_status st = conf_add_arg(p, "x", q->in_place ? CONF_INOUT : CONF_IN, src, nd, xs, q->x_lay);
    if (st == MLA_OK && !q->in_place)
        st = conf_add_arg(p, "y", CONF_OUT, dst, nd, ys, q->y_lay);
    if (st != MLA_OK) {
        snprintf(err, errlen, "cannot lay out the case (%s)", mla_status_name(st));
        return st;
    }
    if (c->golden < 0) {
        conf_fill(p, 0, q->dist, c->seed, 32);
        p->arg[0].t.dtype = q->in_place ? dst : src; /* in place: y's values come back */
        return MLA_OK;
    }
    const golden_convert *g = &goldens[c->golden];
    if (g->in)
        st = conf_golden_input(p, 0, env, g->in, err, errlen);
    else
        fill_all_codes(p);
    if (st == MLA_OK)
        st = conf_golden_output(p, 1, env, g->out, err, errlen);
    p->arg[1].bound.nan_any = g->nan_any;
    return st;
}

static mla_status exec(mla_context *ctx, const conf_case *c, mla_tensor *t)
{
    const conf_p_convert *q = &c->p.convert;
    mla_tensor x = t[0];
    x.dtype = q->x;
    return mla_convert(ctx, &x, q->in_place ? &t[0] : &t[1], (mla_saturation)q->mode);
}

const conf_suite conf_suite_convert = {.name = "convert",
                                       .op = MLA_OP_CONVERT,
                                       .build = build,
                                       .setup = setup,
                                       .exec = exec,
                                       .label = label,
                                       .fields = fields,
                                       .nfields = CONF_NFIELDS(fields)};
