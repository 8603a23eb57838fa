/* mla_batched_gemm_a16wfp4 and mla_batched_gemm_a4w4 (MLA.md section 7):
 * x bf16 / f32 and y bf16 / f32; prequant on and off, both MXFP4 rules;
 * every scale layout of w (and of x for a4w4, in all nine pairings); odd
 * M, N and K; strided, padded, misaligned and transposed operands (codes
 * with a last stride other than 1 included); and seed 003's views: q_nope
 * as a [H, T, nope] view of q and the output written as a [H, T, N] view of
 * a [T, H, N] buffer (the [M, B, N]-as-[B, M, N] case); NaN scales and
 * NaN / Inf activations. Every output sits between guard bytes.
 *
 * Not bit-defined (fp32 accumulation in any order): each y value is held to
 * conf_gemm_tol(K, S) plus the output roundings, S = sum_k |A_k| |W_k| from
 * the case's own inputs, A the activations as the op uses them (x, x's
 * MXFP4 round trip, or the a4w4 dequant) and W = fp4 * 2^(scale - 127). The
 * bound of bounds.c applies unchanged: W_k is exact in fp32 (two significant
 * bits times a power of two, scaled weights and scaled tables alike), A_k
 * too (bf16 / f32 inputs, or again fp4 times a power of two), so each term
 * meets only the product's rounding (none for bf16 or fp4 activations: at
 * most 8 + 2 significant bits) and the sums of an fp32 dot product in any
 * order and blocking, gamma_K S; a block scale applied to a partial sum
 * instead is one more exact-or-underflowing product, inside gamma_{K+3}. The
 * generated magnitudes keep fp32 far from overflow and underflow. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "conformance/cover.h"

#define BLOCK 32
#define NOPE 32 /* test-tiny's head dims, for the absorb views */
#define ROPE 16

enum { VIEW_PLAIN, VIEW_WKC, VIEW_WVC };

static int is_a4w4(const conf_case *c) { return c->suite->op == MLA_OP_GEMM_A4W4; }

/* Argument indices: a16wfp4 x, -, w.codes, w.scales, y; a4w4 x.codes,
 * x.scales, w.codes, w.scales, y. */
typedef struct gemm_idx {
    int x, xs, wc, ws, y;
} gemm_idx;

static gemm_idx idx_of(const conf_case *c)
{
    return is_a4w4(c) ? (gemm_idx){0, 1, 2, 3, 4} : (gemm_idx){0, -1, 1, 2, 3};
}

static const conf_field a16_fields[] = {
    CONF_FIELD(mg, B, CONF_F_I64),
    CONF_FIELD(mg, M, CONF_F_I64),
    CONF_FIELD(mg, K, CONF_F_I64),
    CONF_FIELD(mg, N, CONF_F_I64),
    CONF_FIELD(mg, x, CONF_F_DTYPE),
    CONF_FIELD(mg, y, CONF_F_DTYPE),
    CONF_FIELD(mg, codes, CONF_F_DTYPE),
    CONF_FIELD(mg, scales, CONF_F_DTYPE),
    CONF_FIELD(mg, prequant, CONF_F_I32),
    CONF_ENUM(mg, rule, conf_name_mxfp4_rule, MLA_MXFP4_RULE_COUNT),
    CONF_ENUM(mg, w_layout, conf_name_scale_layout, MLA_SCALE_LAYOUT_COUNT),
    CONF_FIELD(mg, view, CONF_F_I32),
    CONF_FIELD(mg, x_lay, CONF_F_LAY),
    CONF_FIELD(mg, codes_lay, CONF_F_LAY),
    CONF_FIELD(mg, scales_lay, CONF_F_LAY),
    CONF_FIELD(mg, y_lay, CONF_F_LAY),
    CONF_ENUM(mg, dist, conf_name_dist, CONF_DIST_COUNT),
};

static const conf_field a4w4_fields[] = {
    CONF_FIELD(mg, B, CONF_F_I64),
    CONF_FIELD(mg, M, CONF_F_I64),
    CONF_FIELD(mg, K, CONF_F_I64),
    CONF_FIELD(mg, N, CONF_F_I64),
    {"x_codes", CONF_F_DTYPE, offsetof(conf_params, mg.x), NULL, 0},
    CONF_FIELD(mg, x_scales, CONF_F_DTYPE),
    CONF_FIELD(mg, y, CONF_F_DTYPE),
    CONF_FIELD(mg, codes, CONF_F_DTYPE),
    CONF_FIELD(mg, scales, CONF_F_DTYPE),
    CONF_ENUM(mg, x_layout, conf_name_scale_layout, MLA_SCALE_LAYOUT_COUNT),
    CONF_ENUM(mg, w_layout, conf_name_scale_layout, MLA_SCALE_LAYOUT_COUNT),
    CONF_FIELD(mg, view, CONF_F_I32),
    CONF_FIELD(mg, x_lay, CONF_F_LAY),
    CONF_FIELD(mg, x_scales_lay, CONF_F_LAY),
    CONF_FIELD(mg, codes_lay, CONF_F_LAY),
    CONF_FIELD(mg, scales_lay, CONF_F_LAY),
    CONF_FIELD(mg, y_lay, CONF_F_LAY),
    CONF_ENUM(mg, dist, conf_name_dist, CONF_DIST_COUNT),
};

typedef struct gspec {
    int64_t B, M, K, N;
    mla_dtype x, y;
    int prequant, rule, wl, xl, view;
    unsigned lx, lc, ls, ly; /* x (or x codes and scales), w codes, w scales, y */
    int dist;
    const char *note;
} gspec;

static const char *const layout_short[] = {"rm", "tr", "ps"};

static void label_a16(conf_case *c)
{
    const conf_p_mxfp4_gemm *q = &c->p.mg;
    snprintf(c->label, sizeof c->label, "%s -> %s %s%s %s", mla_dtype_name(q->x),
             mla_dtype_name(q->y), q->prequant ? "pq " : "",
             q->prequant ? mla_mxfp4_rule_name((mla_mxfp4_rule)q->rule) : "as-is",
             layout_short[q->w_layout]);
}

static void label_a4w4(conf_case *c)
{
    const conf_p_mxfp4_gemm *q = &c->p.mg;
    snprintf(c->label, sizeof c->label, "x %s w %s -> %s", layout_short[q->x_layout],
             layout_short[q->w_layout], mla_dtype_name(q->y));
}

static void push(conf_builder *b, const gspec *s)
{
    conf_case c;
    memset(&c, 0, sizeof c);
    c.golden = -1;
    c.note = s->note;
    const int a4w4 = b->suite->op == MLA_OP_GEMM_A4W4;
    c.p.mg = (conf_p_mxfp4_gemm){s->B,
                                 s->M,
                                 s->K,
                                 s->N,
                                 s->x,
                                 s->y,
                                 MLA_DTYPE_E8M0,
                                 MLA_DTYPE_FP4X2,
                                 MLA_DTYPE_E8M0,
                                 s->prequant,
                                 a4w4 ? 0 : s->rule,
                                 s->wl,
                                 a4w4 ? s->xl : 0,
                                 s->view,
                                 s->lx,
                                 s->lx & CONF_L_PAD,
                                 s->lc,
                                 s->ls,
                                 s->ly,
                                 s->dist};
    conf_push(b, &c);
}

static const mla_dtype xy[][2] = {{MLA_DTYPE_BF16, MLA_DTYPE_BF16},
                                  {MLA_DTYPE_F32, MLA_DTYPE_F32},
                                  {MLA_DTYPE_BF16, MLA_DTYPE_F32},
                                  {MLA_DTYPE_F32, MLA_DTYPE_BF16}};

#define C_ CONF_L_CONTIG
#define P_ CONF_L_PAD
#define S_ CONF_L_STEP2
#define T_ CONF_L_COLMAJOR
#define O_ CONF_L_OFFSET

/* ------------------------------------------------------------ axes */

static const char *const layout_names[] = {"row_major", "transposed", "preshuffled"};
static const char *const rule_names[] = {"production", "ocp"};
static const char *const prequant_names[] = {"as-is", "prequant"};

#define SCALE_LAYOUTS MLA_SCALE_ROW_MAJOR, MLA_SCALE_TRANSPOSED, MLA_SCALE_PRESHUFFLED_GFX950
#define CODES MLA_DTYPE_FP4X2, MLA_DTYPE_U8
#define BYTE_SCALES MLA_DTYPE_E8M0, MLA_DTYPE_U8

/* An operand's scales [B, R, K/32]: row-major (unit last stride) dense or
 * padded, transposed strided, pre-shuffled bytes per batch dense or padded. */
static int scales_view_ok(int64_t layout, int64_t view)
{
    if (layout == MLA_SCALE_TRANSPOSED)
        return view == MLA_ARG_STRIDED;
    return view == MLA_ARG_DENSE || view == MLA_ARG_ROWS;
}

static unsigned scales_lay(int64_t view, int k)
{
    return view == MLA_ARG_ROWS ? CONF_L_PAD : k % 2 ? CONF_L_OFFSET : CONF_L_CONTIG;
}

enum { F_X, F_Y, F_WL, F_PQ, F_RULE, F_WC, F_WS, F_XV, F_WCV, F_WSV, F_YV };

static const conf_axis a16_axes[] = {
    CONF_AX_DT("x.dtype", 0, MLA_DTYPE_F32, MLA_DTYPE_BF16),
    CONF_AX_DT("y.dtype", 3, MLA_DTYPE_F32, MLA_DTYPE_BF16),
    CONF_AX_FL("w.layout", layout, layout_names, SCALE_LAYOUTS),
    CONF_AX_FL("prequant", prequant, prequant_names, 0, 1),
    CONF_AX_FL("rule", rule, rule_names, MLA_MXFP4_PRODUCTION, MLA_MXFP4_OCP),
    CONF_AX_DT("w.codes.dtype", 1, CODES),
    CONF_AX_DT("w.scales.dtype", 2, BYTE_SCALES),
    CONF_AX_VW("x.view", 0, CONF_VIEWS),
    CONF_AX_VW("w.codes.view", 1, CONF_VIEWS),
    CONF_AX_VW("w.scales.view", 2, CONF_VIEWS),
    CONF_AX_VW("y.view", 3, CONF_VIEWS),
};

static int a16_legal(const conf_point *p)
{
    return CONF_RULE(p, F_WL, F_WSV, scales_view_ok(CONF_VAL(p, F_WL), CONF_VAL(p, F_WSV)));
}

static void a16_derive(mla_variant *v)
{
    v->in_dtype = v->arg_dtype[0];
    v->out_dtype = v->arg_dtype[3];
}

const conf_op_axes conf_axes_gemm_a16wfp4 = {
    .op = MLA_OP_GEMM_A16WFP4,
    .axes = a16_axes,
    .naxes = (int)(sizeof a16_axes / sizeof a16_axes[0]),
    .base = {.group = 20, .rows = 5, .cols = 64, .nargs = 4},
    .derive = a16_derive,
    .legal = a16_legal,
    .full = 1u << F_X | 1u << F_Y | 1u << F_WL | 1u << F_PQ | 1u << F_RULE};

/* [2, 5, 64] activations against [2, 20, 64] weights */
static void a16_design(const conf_point *pt, int k, conf_case *c)
{
    const int pq = (int)CONF_VAL(pt, F_PQ);
    c->p.mg = (conf_p_mxfp4_gemm){2,
                                  5,
                                  64,
                                  20,
                                  (mla_dtype)CONF_VAL(pt, F_X),
                                  (mla_dtype)CONF_VAL(pt, F_Y),
                                  MLA_DTYPE_E8M0,
                                  (mla_dtype)CONF_VAL(pt, F_WC),
                                  (mla_dtype)CONF_VAL(pt, F_WS),
                                  pq,
                                  (int32_t)CONF_VAL(pt, F_RULE),
                                  (int32_t)CONF_VAL(pt, F_WL),
                                  0,
                                  VIEW_PLAIN,
                                  conf_lay_of_view(CONF_VAL(pt, F_XV), 3, k),
                                  0,
                                  conf_lay_of_view(CONF_VAL(pt, F_WCV), 3, k + 1),
                                  scales_lay(CONF_VAL(pt, F_WSV), k),
                                  conf_lay_of_view(CONF_VAL(pt, F_YV), 3, k + 2),
                                  pq ? CONF_DIST_ACT_NARROW : CONF_DIST_ACT};
    c->note = " (pairwise)";
}

enum { G_Y, G_XL, G_WL, G_XC, G_XS, G_WC, G_WS, G_XCV, G_XSV, G_WCV, G_WSV, G_YV };

static const conf_axis a4w4_axes[] = {
    CONF_AX_DT("y.dtype", 4, MLA_DTYPE_F32, MLA_DTYPE_BF16),
    CONF_AX_FL("x.layout", layout_x, layout_names, SCALE_LAYOUTS),
    CONF_AX_FL("w.layout", layout, layout_names, SCALE_LAYOUTS),
    CONF_AX_DT("x.codes.dtype", 0, CODES),
    CONF_AX_DT("x.scales.dtype", 1, BYTE_SCALES),
    CONF_AX_DT("w.codes.dtype", 2, CODES),
    CONF_AX_DT("w.scales.dtype", 3, BYTE_SCALES),
    CONF_AX_VW("x.codes.view", 0, CONF_VIEWS),
    CONF_AX_VW("x.scales.view", 1, CONF_VIEWS),
    CONF_AX_VW("w.codes.view", 2, CONF_VIEWS),
    CONF_AX_VW("w.scales.view", 3, CONF_VIEWS),
    CONF_AX_VW("y.view", 4, CONF_VIEWS),
};

static int a4w4_legal(const conf_point *p)
{
    return CONF_RULE(p, G_XL, G_XSV, scales_view_ok(CONF_VAL(p, G_XL), CONF_VAL(p, G_XSV))) &&
           CONF_RULE(p, G_WL, G_WSV, scales_view_ok(CONF_VAL(p, G_WL), CONF_VAL(p, G_WSV)));
}

static void a4w4_derive(mla_variant *v) { v->out_dtype = v->arg_dtype[4]; }

const conf_op_axes conf_axes_gemm_a4w4 = {
    .op = MLA_OP_GEMM_A4W4,
    .axes = a4w4_axes,
    .naxes = (int)(sizeof a4w4_axes / sizeof a4w4_axes[0]),
    .base = {.in_dtype = MLA_DTYPE_FP4X2, .group = 20, .rows = 5, .cols = 64, .nargs = 5},
    .derive = a4w4_derive,
    .legal = a4w4_legal,
    .full = 1u << G_Y | 1u << G_XL | 1u << G_WL};

static void a4w4_design(const conf_point *pt, int k, conf_case *c)
{
    c->p.mg = (conf_p_mxfp4_gemm){2,
                                  5,
                                  64,
                                  20,
                                  (mla_dtype)CONF_VAL(pt, G_XC),
                                  (mla_dtype)CONF_VAL(pt, G_Y),
                                  (mla_dtype)CONF_VAL(pt, G_XS),
                                  (mla_dtype)CONF_VAL(pt, G_WC),
                                  (mla_dtype)CONF_VAL(pt, G_WS),
                                  0,
                                  0,
                                  (int32_t)CONF_VAL(pt, G_WL),
                                  (int32_t)CONF_VAL(pt, G_XL),
                                  VIEW_PLAIN,
                                  conf_lay_of_view(CONF_VAL(pt, G_XCV), 3, k),
                                  scales_lay(CONF_VAL(pt, G_XSV), k),
                                  conf_lay_of_view(CONF_VAL(pt, G_WCV), 3, k + 1),
                                  scales_lay(CONF_VAL(pt, G_WSV), k + 1),
                                  conf_lay_of_view(CONF_VAL(pt, G_YV), 3, k + 2),
                                  k % 5 == 4 ? CONF_DIST_SCALES_SPECIALS : CONF_DIST_CODES};
    c->note = " (pairwise)";
}

static int build_a16wfp4(conf_case *cases, int cap)
{
    conf_builder b = {.cases = cases, .cap = cap, .suite = &conf_suite_gemm_a16wfp4};
    const mla_dtype bf = MLA_DTYPE_BF16, f32 = MLA_DTYPE_F32;
    const int N_ = CONF_DIST_ACT_NARROW, A_ = CONF_DIST_ACT;
    for (int k = 0; k < 4; ++k) /* dtypes x (as-is, production, OCP) x scale layouts */
        for (int pq = 0; pq < 3; ++pq)
            for (int wl = 0; wl < MLA_SCALE_LAYOUT_COUNT; ++wl) {
                gspec s = {3, 5,          96, 40, xy[k][0], xy[k][1], pq > 0,       pq == 2, wl,
                           0, VIEW_PLAIN, C_, C_, C_,       C_,       pq ? N_ : A_, NULL};
                push(&b, &s);
            }
    const gspec more[] = {
        {2, 17, 160, 37, bf, bf, 1, 0, 0, 0, VIEW_PLAIN, C_, C_, C_, C_, N_, " odd M, N"},
        {1, 33, 544, 70, bf, f32, 1, 0, 1, 0, VIEW_PLAIN, C_, C_, C_, C_, N_, " M 33, K 544"},
        {2, 3, 64, 260, f32, f32, 0, 0, 2, 0, VIEW_PLAIN, C_, C_, C_, C_, A_, " N 260 (pad)"},
        {2, 6, 128, 24, bf, bf, 1, 0, 1, 0, VIEW_PLAIN, P_ | S_, P_, P_, P_, N_, " strided"},
        {3, 4, 64, 19, f32, bf, 0, 0, 0, 0, VIEW_PLAIN, O_, O_, O_, S_, A_, " misaligned"},
        {2, 9, 96, 21, bf, f32, 1, 1, 2, 0, VIEW_PLAIN, T_, T_, P_, T_, N_, " transposed"},
        {8, 1, 128, 64, bf, bf, 1, 0, 0, 0, VIEW_PLAIN, C_, C_, C_, C_, N_, " decode M 1"},
        {1, 4, 64, 100, bf, bf, 0, 0, 1, 0, VIEW_PLAIN, C_, C_, C_, C_, A_, " B 1 (n split)"},
        {4, 3, NOPE, 128, bf, bf, 1, 0, 0, 0, VIEW_WKC, C_, C_, C_, C_, N_, " W_kc y [T,H,L]"},
        {4, 3, NOPE, 128, bf, f32, 0, 0, 1, 0, VIEW_WKC, C_, C_, C_, C_, A_, " W_kc y [T,H,L]"},
        {4, 5, 128, 32, bf, bf, 1, 0, 0, 0, VIEW_WVC, C_, C_, C_, C_, N_, " W_vc y [T,H,v]"},
        {4, 5, 128, 32, bf, bf, 1, 1, 1, 0, VIEW_WVC, C_, C_, C_, C_, N_, " W_vc y [T,H,v]"},
        {4, 5, 128, 32, f32, f32, 0, 0, 2, 0, VIEW_WVC, C_, C_, C_, C_, A_, " W_vc y [T,H,v]"},
        {3, 18, 128, 33, bf, f32, 0, 0, 0, 0, VIEW_WVC, C_, C_, C_, C_, A_, " W_vc y [T,H,v]"},
        {2, 5, 96, 20, f32, f32, 0, 0, 0, 0, VIEW_PLAIN, C_, C_, C_, C_, CONF_DIST_ACT_SPECIALS,
         " NaN/Inf"},
        {2, 5, 96, 20, bf, bf, 1, 0, 2, 0, VIEW_PLAIN, C_, C_, C_, C_, CONF_DIST_ACT_SPECIALS,
         " NaN/Inf"},
        {2, 70, 96, 33, bf, bf, 1, 0, 1, 0, VIEW_PLAIN, C_, C_, C_, P_, N_, " M 70"},
        {1, 66, 64, 20, f32, f32, 0, 0, 0, 0, VIEW_PLAIN, P_, T_, C_, C_, A_, " M 66 strided"},
        {4, 64, 128, 32, bf, bf, 1, 0, 2, 0, VIEW_WVC, C_, C_, C_, C_, N_, " W_vc T 64"},
        {1, 64, 2048, 100, bf, f32, 1, 0, 0, 0, VIEW_PLAIN, C_, C_, C_, C_, N_, " K 2048"},
        {2, 0, 64, 16, bf, bf, 1, 0, 0, 0, VIEW_PLAIN, C_, C_, C_, C_, A_, " M 0"},
    };
    for (size_t i = 0; i < sizeof more / sizeof more[0]; ++i)
        push(&b, &more[i]);
    conf_push_design(&b, &conf_axes_gemm_a16wfp4, a16_design);
    return b.n;
}

static int build_a4w4(conf_case *cases, int cap)
{
    conf_builder b = {.cases = cases, .cap = cap, .suite = &conf_suite_gemm_a4w4};
    const mla_dtype bf = MLA_DTYPE_BF16, f32 = MLA_DTYPE_F32, fp4 = MLA_DTYPE_FP4X2;
    const int D = CONF_DIST_CODES;
    for (int xl = 0; xl < MLA_SCALE_LAYOUT_COUNT; ++xl)
        for (int wl = 0; wl < MLA_SCALE_LAYOUT_COUNT; ++wl) {
            gspec s = {3,  7,  96, 36, fp4, (xl + wl) % 2 ? f32 : bf, 0, 0, wl, xl, VIEW_PLAIN, C_,
                       C_, C_, C_, D,  NULL};
            push(&b, &s);
        }
    const gspec more[] = {
        {1, 33, 544, 70, fp4, f32, 0, 0, 0, 1, VIEW_PLAIN, C_, C_, C_, C_, D, " M 33, K 544"},
        {2, 6, 128, 24, fp4, bf, 0, 0, 1, 0, VIEW_PLAIN, P_, P_, P_, P_, D, " strided"},
        {2, 9, 64, 21, fp4, f32, 0, 0, 2, 2, VIEW_PLAIN, O_ | T_, T_, O_, S_ | T_, D,
         " transposed"},
        {8, 1, 128, 64, fp4, bf, 0, 0, 0, 0, VIEW_PLAIN, C_, C_, C_, C_, D, " decode M 1"},
        {4, 5, 128, 32, fp4, bf, 0, 0, 0, 1, VIEW_WVC, C_, C_, C_, C_, D, " W_vc y [T,H,v]"},
        {2, 65, 64, 40, fp4, f32, 0, 0, 2, 1, VIEW_PLAIN, P_, T_, C_, P_, D, " M 65 strided"},
        {2, 5, 96, 20, fp4, f32, 0, 0, 1, 2, VIEW_PLAIN, C_, C_, C_, C_, CONF_DIST_SCALES_SPECIALS,
         " NaN scales"},
    };
    for (size_t i = 0; i < sizeof more / sizeof more[0]; ++i)
        push(&b, &more[i]);
    conf_push_design(&b, &conf_axes_gemm_a4w4, a4w4_design);
    return b.n;
}

/* ------------------------------------------------------------ setup */

/* Scales of an operand [B, R, K/32] in `layout` (a padded leading stride
 * when lay has CONF_L_PAD), or per batch the pre-shuffled bytes. */
static mla_status add_scales(conf_problem *p, const char *name, mla_dtype dt, int layout, int64_t B,
                             int64_t R, int64_t nblk, unsigned lay)
{
    const int64_t pad = (lay & CONF_L_PAD) ? 3 : 0;
    lay &= CONF_L_PAD | CONF_L_OFFSET;
    if (layout == MLA_SCALE_PRESHUFFLED_GFX950) {
        const int64_t bytes = mla_scale_preshuffled_bytes(R, nblk);
        return conf_add_arg_strided(p, name, CONF_IN, dt, 2, (int64_t[]){B, bytes},
                                    (int64_t[]){bytes + pad, 1}, lay);
    }
    const int64_t shape[3] = {B, R, nblk};
    if (layout == MLA_SCALE_ROW_MAJOR)
        return conf_add_arg_strided(p, name, CONF_IN, dt, 3, shape,
                                    (int64_t[]){R * (nblk + pad), nblk + pad, 1}, lay);
    return conf_add_arg_strided(p, name, CONF_IN, dt, 3, shape,
                                (int64_t[]){nblk * (R + pad), 1, R + pad}, lay);
}

/* Logical index of scale (b, r, j) in the scales argument. */
static int64_t scale_index(int layout, int64_t b, int64_t r, int64_t j, int64_t R, int64_t nblk)
{
    if (layout == MLA_SCALE_PRESHUFFLED_GFX950)
        return b * mla_scale_preshuffled_bytes(R, nblk) + mla_scale_preshuffled_offset(r, j, nblk);
    return (b * R + r) * nblk + j;
}

/* Scale bytes 2^-6 .. 2^2 as a function of (b, r, j), so the data does not
 * depend on the layout; one in 40 is NaN (0xFF) with specials. The
 * pre-shuffled padding keeps its poison (NaN): a kernel reading it shows. */
static void fill_scales(conf_problem *p, int i, int layout, int64_t B, int64_t R, int64_t nblk,
                        uint64_t seed, int specials)
{
    for (int64_t b = 0; b < B; ++b)
        for (int64_t r = 0; r < R; ++r)
            for (int64_t j = 0; j < nblk; ++j) {
                uint64_t v = conf_rng(seed, 21, (uint64_t)((b * R + r) * nblk + j), 0);
                int byte = specials && v % 40 == 0 ? 0xFF : 121 + (int)(v % 9);
                conf_set_value(p, i, scale_index(layout, b, r, j, R, nblk), byte);
            }
}

/* x, y (and their views) of a case; the operands' codes and scales. */
static mla_status add_args(const conf_case *c, conf_problem *p)
{
    const gemm_idx ix = idx_of(c);
    const conf_p_mxfp4_gemm *q = &c->p.mg;
    const int64_t B = q->B, M = q->M, K = q->K, N = q->N;
    const int64_t nblk = K / BLOCK, view = q->view;
    const int a4w4 = ix.xs >= 0;
    const mla_dtype xd = q->x;
    const int64_t xs[3] = {B, M, a4w4 ? K / 2 : K}, ws[3] = {B, N, K / 2}, ys[3] = {B, M, N};
    mla_status st;
    if (view == VIEW_WKC) /* q_nope [H, T, nope] in q [T, H, nope + R] */
        st = conf_add_view(p, "q_nope", CONF_IN, xd, 3, xs,
                           (int64_t[]){NOPE + ROPE, B * (NOPE + ROPE), 1}, 0);
    else if (view == VIEW_WVC && !a4w4) /* o_lat [H, T, L] over a [T, H, L] buffer */
        st = conf_add_view(p, "o_lat", CONF_IN, xd, 3, xs, (int64_t[]){K, B * K, 1}, 0);
    else
        st = conf_add_arg(p, a4w4 ? "x.codes" : "x", CONF_IN, xd, 3, xs, q->x_lay);
    if (st == MLA_OK && a4w4)
        st = add_scales(p, "x.scales", q->x_scales, q->x_layout, B, M, nblk, q->x_scales_lay);
    if (st == MLA_OK)
        st = conf_add_arg(p, "w.codes", CONF_IN, q->codes, 3, ws, q->codes_lay);
    if (st == MLA_OK)
        st = add_scales(p, "w.scales", q->scales, q->w_layout, B, N, nblk, q->scales_lay);
    if (st != MLA_OK)
        return st;
    if (view != VIEW_PLAIN) /* y [H, T, N] over a [T, H, N] buffer: seed 003's layout */
        return conf_add_view(p, "y", CONF_OUT, q->y, 3, ys, (int64_t[]){N, B * N, 1}, 0);
    return conf_add_arg(p, "y", CONF_OUT, q->y, 3, ys, q->y_lay);
}

/* Byte k (logical) of a one-byte argument. */
static unsigned byte_at(const conf_arg *a, int64_t k)
{
    return (unsigned)conf_load_bits(conf_elem_at(a, conf_arg_elem0(a), k), 1);
}

/* deq(code, scale) of value k of row r of batch b of an operand, in double,
 * by the harness's own decoders. */
static double mx_value(const conf_problem *p, int ic, int is, int layout, int64_t b, int64_t r,
                       int64_t k, int64_t R, int64_t K)
{
    const conf_arg *c = &p->arg[ic], *s = &p->arg[is];
    unsigned byte = byte_at(c, (b * R + r) * (K / 2) + k / 2);
    unsigned sb = byte_at(s, scale_index(layout, b, r, k / BLOCK, R, K / BLOCK));
    return conf_decode_value(MLA_DTYPE_FP4X2, (k % 2) ? byte >> 4 : byte & 0xF) *
           conf_decode_value(MLA_DTYPE_E8M0, sb);
}

/* Activation row (b, m) as the op uses it, into a[0..K). The prequant round
 * trip uses the library's block quantizer (bit-exactness of the MXFP4 quant
 * is the mxfp4_quant suite's business; here it only sizes the bound). */
static void act_row(const conf_p_mxfp4_gemm *q, gemm_idx ix, const conf_problem *p, int64_t b,
                    int64_t m, double *a)
{
    const int64_t M = q->M, K = q->K;
    for (int64_t k = 0; k < K; ++k)
        a[k] = ix.xs >= 0 ? mx_value(p, ix.x, ix.xs, q->x_layout, b, m, k, M, K)
                          : conf_in_value(&p->arg[ix.x], (b * M + m) * K + k);
    for (int64_t k0 = 0; q->prequant && k0 < K; k0 += BLOCK) {
        float blk[BLOCK];
        uint8_t codes[BLOCK / 2], scale;
        for (int i = 0; i < BLOCK; ++i)
            blk[i] = (float)a[k0 + i];
        mla_mxfp4_quantize_block(blk, (mla_mxfp4_rule)q->rule, codes, &scale);
        for (int i = 0; i < BLOCK; ++i)
            a[k0 + i] = conf_decode_value(MLA_DTYPE_FP4X2, (codes[i / 2] >> (4 * (i % 2))) & 0xF) *
                        conf_decode_value(MLA_DTYPE_E8M0, scale);
    }
}

mla_status conf_mxfp4_gemm_tol(conf_problem *p, const conf_p_mxfp4_gemm *q, int a4w4)
{
    const gemm_idx ix = a4w4 ? (gemm_idx){0, 1, 2, 3, 4} : (gemm_idx){0, -1, 1, 2, 3};
    const int64_t B = q->B, M = q->M, K = q->K, N = q->N;
    double *tol = conf_tol_alloc(p, ix.y, 1.0);
    double *a = malloc((size_t)K * sizeof *a + 1), *w = malloc((size_t)(N * K) * sizeof *w + 1);
    if (!tol || !a || !w) {
        free(a), free(w);
        return MLA_ERR_OUT_OF_MEMORY;
    }
    for (int64_t b = 0; b < B; ++b) {
        for (int64_t n = 0; n < N; ++n)
            for (int64_t k = 0; k < K; ++k)
                w[n * K + k] = mx_value(p, ix.wc, ix.ws, q->w_layout, b, n, k, N, K);
        for (int64_t m = 0; m < M; ++m) {
            act_row(q, ix, p, b, m, a);
            for (int64_t n = 0; n < N; ++n) {
                double S = 0.0;
                for (int64_t k = 0; k < K; ++k)
                    S += fabs(a[k] * w[n * K + k]);
                /* a NaN or Inf term makes y NaN or Inf: the class decides */
                tol[(b * M + m) * N + n] = isfinite(S) ? conf_gemm_tol(K, S) : 0.0;
            }
        }
    }
    free(a), free(w);
    return MLA_OK;
}

static mla_status setup_gemm(const conf_case *c, const conf_env *env, conf_problem *p, char *err,
                             size_t errlen)
{
    (void)env;
    const gemm_idx ix = idx_of(c);
    const conf_p_mxfp4_gemm *q = &c->p.mg;
    const int64_t B = q->B, M = q->M, K = q->K, N = q->N;
    const int specials = q->dist == CONF_DIST_ACT_SPECIALS || q->dist == CONF_DIST_SCALES_SPECIALS;
    mla_status st = add_args(c, p);
    if (st != MLA_OK) {
        snprintf(err, errlen, "cannot lay out the case (%s)", mla_status_name(st));
        return st;
    }
    if (ix.xs >= 0) {
        conf_fill(p, ix.x, CONF_DIST_CODES, c->seed, BLOCK);
        fill_scales(p, ix.xs, q->x_layout, B, M, K / BLOCK, c->seed ^ 3, specials);
    } else {
        conf_fill(p, ix.x, q->dist, c->seed, K);
    }
    conf_fill(p, ix.wc, CONF_DIST_CODES, c->seed ^ 5, BLOCK);
    fill_scales(p, ix.ws, q->w_layout, B, N, K / BLOCK, c->seed ^ 7, specials);
    st = conf_mxfp4_gemm_tol(p, q, is_a4w4(c));
    if (st != MLA_OK)
        snprintf(err, errlen, "out of memory");
    return st;
}

static mla_mxfp4_operand operand(mla_tensor *t, int ic, int is, int layout)
{
    return (mla_mxfp4_operand){t[ic], t[is], (mla_scale_layout)layout};
}

static mla_status exec_a16wfp4(mla_context *ctx, const conf_case *c, mla_tensor *t)
{
    const gemm_idx ix = idx_of(c);
    mla_mxfp4_operand w = operand(t, ix.wc, ix.ws, c->p.mg.w_layout);
    return mla_batched_gemm_a16wfp4(ctx, &t[ix.x], &w, c->p.mg.prequant,
                                    (mla_mxfp4_rule)c->p.mg.rule, &t[ix.y]);
}

static mla_status exec_a4w4(mla_context *ctx, const conf_case *c, mla_tensor *t)
{
    const gemm_idx ix = idx_of(c);
    mla_mxfp4_operand x = operand(t, ix.x, ix.xs, c->p.mg.x_layout);
    mla_mxfp4_operand w = operand(t, ix.wc, ix.ws, c->p.mg.w_layout);
    return mla_batched_gemm_a4w4(ctx, &x, &w, &t[ix.y]);
}

const conf_suite conf_suite_gemm_a16wfp4 = {.name = "gemm_a16wfp4",
                                            .op = MLA_OP_GEMM_A16WFP4,
                                            .build = build_a16wfp4,
                                            .setup = setup_gemm,
                                            .exec = exec_a16wfp4,
                                            .label = label_a16,
                                            .fields = a16_fields,
                                            .nfields = CONF_NFIELDS(a16_fields)};
const conf_suite conf_suite_gemm_a4w4 = {.name = "gemm_a4w4",
                                         .op = MLA_OP_GEMM_A4W4,
                                         .build = build_a4w4,
                                         .setup = setup_gemm,
                                         .exec = exec_a4w4,
                                         .label = label_a4w4,
                                         .fields = a4w4_fields,
                                         .nfields = CONF_NFIELDS(a4w4_fields)};
