/* mla_convert: every source x target pair the API takes, both saturation
 * modes for fp8 targets, odd sizes and strided / transposed / misaligned
 * views; plus the golden encodes and all-code decodes. Bit-exact. */
#include <string.h>

#include "conformance/conf.h"

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

static void set_variant(conf_case *c, mla_dtype src, mla_dtype dst, mla_saturation mode)
{
    /* As mla_convert builds it: rows = numel(x), cols = x's last extent. */
    int64_t numel = 1, last = c->ndim ? c->shape[c->ndim - 1] : 1;
    for (int32_t d = 0; d < c->ndim; ++d)
        numel *= c->shape[d];
    if (src == MLA_DTYPE_FP4X2 && dst != MLA_DTYPE_FP4X2) {
        numel /= 2;
        last /= 2;
    }
    mla_variant v = {MLA_OP_CONVERT, src, dst, 0, (int32_t)mode, 0, numel, last};
    c->v = v;
    snprintf(c->label, sizeof c->label, "%s%s->%s%s", c->golden >= 0 ? "golden " : "",
             mla_dtype_name(src), mla_dtype_name(dst),
             is_fp8(dst) ? (mode == MLA_SATURATE ? " sat" : " nonsat") : "");
}

/* Value shapes (the unpacked side) and layouts of x and y. */
static const struct {
    int32_t ndim;
    int64_t shape[3];
    unsigned lx, ly;
} shapes[] = {
    {1, {1030}, CONF_L_CONTIG, CONF_L_CONTIG},
    {2, {7, 66}, CONF_L_PAD | CONF_L_STEP2, CONF_L_PAD},
    {2, {33, 18}, CONF_L_COLMAJOR, CONF_L_CONTIG},
    {3, {3, 5, 34}, CONF_L_OFFSET, CONF_L_COLMAJOR | CONF_L_PAD},
    {2, {0, 4}, CONF_L_CONTIG, CONF_L_CONTIG},
};

static int build(conf_case *cases, int cap)
{
    conf_builder b = {cases, cap, 0, MLA_OP_CONVERT};
    for (int g = 0; g < NGOLDEN; ++g) {
        conf_case c;
        memset(&c, 0, sizeof c);
        c.golden = g;
        c.ndim = 1;
        c.shape[0] = goldens[g].n;
        set_variant(&c, goldens[g].src, goldens[g].dst, goldens[g].mode);
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
                    c.ndim = shapes[k].ndim;
                    memcpy(c.shape, shapes[k].shape, sizeof shapes[k].shape);
                    c.lay[0] = shapes[k].lx;
                    c.lay[1] = shapes[k].ly;
                    c.dist = srcs[si] == MLA_DTYPE_F32 || srcs[si] == MLA_DTYPE_F16 ||
                                     srcs[si] == MLA_DTYPE_BF16
                                 ? CONF_DIST_EDGE
                                 : CONF_DIST_CODES;
                    set_variant(&c, srcs[si], dsts[di], (mla_saturation)mode);
                    conf_push(&b, &c);
                }
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
    mla_dtype src = c->v.in_dtype, dst = c->v.out_dtype;
    int64_t xs[MLA_MAX_DIMS], ys[MLA_MAX_DIMS];
    memcpy(xs, c->shape, sizeof xs);
    memcpy(ys, c->shape, sizeof ys);
    if (src == MLA_DTYPE_FP4X2 && dst != MLA_DTYPE_FP4X2)
        xs[c->ndim - 1] /= 2;
    if (dst == MLA_DTYPE_FP4X2 && src != MLA_DTYPE_FP4X2)
        ys[c->ndim - 1] /= 2;
    mla_status st = conf_add_arg(p, "x", 0, src, c->ndim, xs, c->lay[0]);
    if (st == MLA_OK)
        st = conf_add_arg(p, "y", 1, dst, c->ndim, ys, c->lay[1]);
    if (st != MLA_OK) {
        snprintf(err, errlen, "cannot lay out the case (%s)", mla_status_name(st));
        return st;
    }
    if (c->golden < 0) {
        conf_fill(p, 0, c->dist, c->seed, 32);
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
    return mla_convert(ctx, &t[0], &t[1], (mla_saturation)c->v.rule);
}

const conf_suite conf_suite_convert = {"convert", MLA_OP_CONVERT, build, setup, exec, NULL};
