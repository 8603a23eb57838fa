/* mla_fused_rope_concat_cache: every cache layout x element type, q_cat in
 * bf16, f32 and both fp8 flavours (q_scale != 1), more key tokens than query
 * tokens (Tk > T: those keys are rotated and written too, unlike aiter's
 * kernel), k_pe_out, both RoPE styles, q_pe as a view inside q, k_nope and
 * k_pe as views of one kv buffer, q_nope already in place in q_cat's first L
 * dims, a cache with a padded block stride, and DeepSeek's L = 512, R = 64.
 * The pairwise design (axes below) crosses layout x cache dtype x q_cat's,
 * q_pe's and k_pe's dtypes fully: f32 inputs with a bf16 or fp8 q_cat are
 * the combinations that once hid a wrong HIP kernel (issue 18), which cases
 * tying the inputs' dtype to q_cat's never ran.
 * Bit-exact on q_cat, the cache bytes and k_pe_out: the RoPE arithmetic and
 * every rounding after it are pinned by MLA.md. */
#include <string.h>

#include "conformance/cover.h"

enum { ICOS, ISIN, IQN, IQP, IQPOS, IKN, IKP, IKPOS, ISLOTS, ICACHE, IQCAT, IKPO };

enum {
    F_KPE_OUT = 1,  /* k_pe_out wanted */
    F_ALIAS = 2,    /* q_nope is q_cat's own first L dims */
    F_QVIEW = 4,    /* q_pe inside q [T, H, nope + R] */
    F_KVIEW = 8,    /* k_nope, k_pe inside kv [Tk, L + R] */
    F_BIG = 16,     /* L = 512, R = 64 (else 128, 16) */
    F_PADCACHE = 32 /* padded block stride */
};

#define NOPE 32

static int is_fp8(mla_dtype d) { return d == MLA_DTYPE_FP8_E4M3FN || d == MLA_DTYPE_FP8_E4M3FNUZ; }

static const conf_field fields[] = {
    CONF_ENUM(rc, layout, conf_name_cache_layout, MLA_CACHE_LAYOUT_COUNT),
    CONF_FIELD(rc, dtype, CONF_F_DTYPE),
    CONF_FIELD(rc, block_size, CONF_F_I64),
    CONF_FIELD(rc, blocks, CONF_F_I64),
    CONF_ENUM(rc, style, conf_name_rope_style, MLA_ROPE_STYLE_COUNT),
    CONF_FIELD(rc, T, CONF_F_I64),
    CONF_FIELD(rc, Tk, CONF_F_I64),
    CONF_FIELD(rc, H, CONF_F_I64),
    CONF_FIELD(rc, L, CONF_F_I64),
    CONF_FIELD(rc, R, CONF_F_I64),
    CONF_FIELD(rc, q_nope, CONF_F_DTYPE),
    CONF_FIELD(rc, q_pe, CONF_F_DTYPE),
    CONF_FIELD(rc, k_nope, CONF_F_DTYPE),
    CONF_FIELD(rc, k_pe, CONF_F_DTYPE),
    CONF_FIELD(rc, k_pe_out, CONF_F_DTYPE),
    CONF_FIELD(rc, q_cat, CONF_F_DTYPE),
    CONF_FIELD(rc, q_pos, CONF_F_DTYPE),
    CONF_FIELD(rc, k_pos, CONF_F_DTYPE),
    CONF_FIELD(rc, slots, CONF_F_DTYPE),
    CONF_FIELD(rc, k_scale, CONF_F_REAL),
    CONF_FIELD(rc, q_scale, CONF_F_REAL),
    CONF_FIELD(rc, q_nope_in_place, CONF_F_I32),
    CONF_FIELD(rc, q_pe_view, CONF_F_I32),
    CONF_FIELD(rc, kv_view, CONF_F_I32),
    CONF_FIELD(rc, q_nope_lay, CONF_F_LAY),
    CONF_FIELD(rc, q_pe_lay, CONF_F_LAY),
    CONF_FIELD(rc, k_nope_lay, CONF_F_LAY),
    CONF_FIELD(rc, k_pe_lay, CONF_F_LAY),
    CONF_FIELD(rc, q_cat_lay, CONF_F_LAY),
    CONF_FIELD(rc, k_pe_out_lay, CONF_F_LAY),
    CONF_FIELD(rc, cache_lay, CONF_F_LAY),
    CONF_FIELD(rc, q_pos_lay, CONF_F_LAY),
    CONF_FIELD(rc, k_pos_lay, CONF_F_LAY),
    CONF_FIELD(rc, slots_lay, CONF_F_LAY),
    CONF_ENUM(rc, dist, conf_name_dist, CONF_DIST_COUNT),
};

static mla_cache_desc desc_of(const conf_case *c)
{
    const conf_p_rope_cache *q = &c->p.rc;
    mla_cache_desc d = {(mla_cache_layout)q->layout,
                        q->dtype,
                        q->blocks,
                        q->block_size,
                        q->L,
                        q->R,
                        (float)q->k_scale};
    return d;
}

static void label(conf_case *c)
{
    const conf_p_rope_cache *q = &c->p.rc;
    const char *n8 = mla_dtype_name(q->dtype), *q8 = mla_dtype_name(q->q_cat);
    snprintf(c->label, sizeof c->label, "%s %s bs%lld q_cat %s%s%s%s%s%s",
             mla_cache_layout_name((mla_cache_layout)q->layout),
             strncmp(n8, "fp8_", 4) ? n8 : n8 + 4, (long long)q->block_size,
             strncmp(q8, "fp8_", 4) ? q8 : q8 + 4, q->style ? " neox" : "",
             q->q_nope_in_place ? " nope in place" : "", q->q_pe_view ? " q_pe view" : "",
             q->L == 512 ? " L512" : "", q->T ? "" : " keys only");
}

/* The inputs in one dtype (f32 with an f32 q_cat, else bf16), the index
 * tensors int64 at block size 16, else int32. */
static void add(conf_builder *b, mla_cache_layout layout, mla_dtype dt, int64_t bs, int style,
                int flags, mla_dtype q_cat, int64_t T, int64_t Tk, double k_scale,
                double q_scale)
{
    conf_case c;
    memset(&c, 0, sizeof c);
    c.golden = -1;
    const mla_dtype x = q_cat == MLA_DTYPE_F32 ? MLA_DTYPE_F32 : MLA_DTYPE_BF16;
    const mla_dtype pos = bs == 16 ? MLA_DTYPE_I64 : MLA_DTYPE_I32;
    const int alias = (flags & F_ALIAS) != 0;
    c.p.rc = (conf_p_rope_cache){layout,
                                 dt,
                                 bs,
                                 bs == 1 ? 24 : 3,
                                 style,
                                 T,
                                 Tk,
                                 3,
                                 (flags & F_BIG) ? 512 : 128,
                                 (flags & F_BIG) ? 64 : 16,
                                 x,
                                 x,
                                 x,
                                 x,
                                 (flags & F_KPE_OUT) ? x : MLA_DTYPE_COUNT,
                                 q_cat,
                                 pos,
                                 pos,
                                 pos,
                                 k_scale,
                                 q_scale,
                                 alias,
                                 (flags & F_QVIEW) != 0,
                                 (flags & F_KVIEW) != 0,
                                 CONF_L_PAD,
                                 CONF_L_CONTIG,
                                 CONF_L_CONTIG,
                                 CONF_L_PAD,
                                 alias ? CONF_L_CONTIG : CONF_L_PAD,
                                 CONF_L_OFFSET,
                                 (flags & F_PADCACHE) ? CONF_L_PAD : CONF_L_CONTIG,
                                 CONF_L_CONTIG,
                                 CONF_L_CONTIG,
                                 CONF_L_CONTIG,
                                 CONF_DIST_ACT};
    conf_push(b, &c);
}

/* ------------------------------------------------------------ axes */

static const char *const layout_names[] = {"normal", "shuffled", "fp8_scaled"};
static const char *const block_names[] = {"<16", "16..63", ">=64"};
static const char *const style_names[] = {"interleaved", "neox"};

enum {
    A_LAYOUT,
    A_DTYPE,
    A_BLOCK,
    A_STYLE,
    A_QCAT,
    A_QN,
    A_QP,
    A_KN,
    A_KP,
    A_KPO,
    A_QPOS,
    A_KPOS,
    A_SLOTS,
    A_QNV,
    A_QPV,
    A_KNV,
    A_KPV,
    A_CACHEV,
    A_QCATV,
    A_KPOV,
    A_QPOSV,
    A_KPOSV,
    A_SLOTSV
};

static const conf_axis axes[] = {
    CONF_AX_FL("cache.layout", layout, layout_names, MLA_CACHE_NORMAL, MLA_CACHE_SHUFFLED,
               MLA_CACHE_FP8_SCALED),
    CONF_AX_FL("cache.dtype", in_dtype, NULL, MLA_DTYPE_BF16, CONF_FP8S),
    CONF_AX_CL("block_size", group, 1, block_names, 1, 16, 64),
    CONF_AX_FL("style", rule, style_names, MLA_ROPE_INTERLEAVED, MLA_ROPE_NEOX),
    CONF_AX_DT("q_cat.dtype", 10, MLA_DTYPE_F32, MLA_DTYPE_BF16, CONF_FP8S),
    CONF_AX_DT("q_nope.dtype", 2, CONF_FLOATS),
    CONF_AX_DT("q_pe.dtype", 3, CONF_FLOATS),
    CONF_AX_DT("k_nope.dtype", 5, CONF_FLOATS),
    CONF_AX_DT("k_pe.dtype", 6, CONF_FLOATS),
    CONF_AX_DT("k_pe_out.dtype", 11, MLA_DTYPE_COUNT, CONF_FLOATS),
    CONF_AX_DT("q_pos.dtype", 4, CONF_INDEX),
    CONF_AX_DT("k_pos.dtype", 7, CONF_INDEX),
    CONF_AX_DT("slots.dtype", 8, CONF_INDEX),
    CONF_AX_VW("q_nope.view", 2, CONF_VIEWS),
    CONF_AX_VW("q_pe.view", 3, CONF_VIEWS),
    CONF_AX_VW("k_nope.view", 5, CONF_VIEWS),
    CONF_AX_VW("k_pe.view", 6, CONF_VIEWS),
    CONF_AX_VW("cache.view", 9, MLA_ARG_DENSE, MLA_ARG_ROWS),
    CONF_AX_VW("q_cat.view", 10, CONF_VIEWS, MLA_ARG_IN_PLACE),
    CONF_AX_VW("k_pe_out.view", 11, CONF_VIEWS, MLA_ARG_ABSENT),
    CONF_AX_VW("q_pos.view", 4, CONF_VIEWS_1D),
    CONF_AX_VW("k_pos.view", 7, CONF_VIEWS_1D),
    CONF_AX_VW("slots.view", 8, CONF_VIEWS_1D),
};

/* The cache's rules; k_pe_out absent exactly when not asked for; q_nope in
 * place in q_cat (q_cat then shares its data): q_cat's dtype and strides,
 * so a slice with gaps (rows). */
static int legal(const conf_point *p)
{
    if (!conf_cache_legal(p, A_LAYOUT, A_DTYPE, A_BLOCK))
        return 0;
    if (!CONF_RULE(p, A_KPO, A_KPOV,
                   (CONF_VAL(p, A_KPO) == MLA_DTYPE_COUNT) ==
                       (CONF_VAL(p, A_KPOV) == MLA_ARG_ABSENT)))
        return 0;
    if (!CONF_HAS(p, A_QCATV) || CONF_VAL(p, A_QCATV) != MLA_ARG_IN_PLACE)
        return 1;
    return CONF_RULE(p, A_QN, A_QCAT, CONF_VAL(p, A_QN) == CONF_VAL(p, A_QCAT)) &&
           (!CONF_HAS(p, A_QNV) || CONF_VAL(p, A_QNV) == MLA_ARG_ROWS);
}

static void derive(mla_variant *v) { v->out_dtype = v->arg_dtype[10]; }

const conf_op_axes conf_axes_rope_cache = {
    .op = MLA_OP_ROPE_CACHE,
    .axes = axes,
    .naxes = (int)(sizeof axes / sizeof axes[0]),
    .base = {.rows = 3,
             .cols = 144,
             .nargs = 12,
             .arg_dtype = {MLA_DTYPE_F32, MLA_DTYPE_F32, [9] = MLA_DTYPE_U8}},
    .derive = derive,
    .legal = legal,
    .full = 1u << A_LAYOUT | 1u << A_DTYPE | 1u << A_QCAT | 1u << A_QP | 1u << A_KP};

/* 3 query tokens, 5 keys, H 2, L 128, R 16 */
static void design(const conf_point *pt, int k, conf_case *c)
{
    conf_p_rope_cache *q = &c->p.rc;
    const int64_t cls = CONF_VAL(pt, A_BLOCK);
    const int64_t bs = cls >= 64 ? 64 : cls >= 16 ? 16 : k % 2 ? 3 : 1;
    const mla_dtype dt = (mla_dtype)CONF_VAL(pt, A_DTYPE), qcat = (mla_dtype)CONF_VAL(pt, A_QCAT);
    const int fp8_q = qcat == MLA_DTYPE_FP8_E4M3FN || qcat == MLA_DTYPE_FP8_E4M3FNUZ;
    const int in_place = CONF_VAL(pt, A_QCATV) == MLA_ARG_IN_PLACE;
    const int64_t kpov = CONF_VAL(pt, A_KPOV);
    memset(q, 0, sizeof *q);
    q->layout = (int32_t)CONF_VAL(pt, A_LAYOUT);
    q->dtype = dt;
    q->block_size = bs;
    q->blocks = bs == 1 ? 8 : 2 + (bs == 3);
    q->style = (int32_t)CONF_VAL(pt, A_STYLE);
    q->T = 3;
    q->Tk = 5;
    q->H = 2;
    q->L = 128;
    q->R = 16;
    q->q_nope = (mla_dtype)CONF_VAL(pt, A_QN);
    q->q_pe = (mla_dtype)CONF_VAL(pt, A_QP);
    q->k_nope = (mla_dtype)CONF_VAL(pt, A_KN);
    q->k_pe = (mla_dtype)CONF_VAL(pt, A_KP);
    q->k_pe_out = (mla_dtype)CONF_VAL(pt, A_KPO);
    q->q_cat = qcat;
    q->q_pos = (mla_dtype)CONF_VAL(pt, A_QPOS);
    q->k_pos = (mla_dtype)CONF_VAL(pt, A_KPOS);
    q->slots = (mla_dtype)CONF_VAL(pt, A_SLOTS);
    q->k_scale = is_fp8(dt) && q->layout != MLA_CACHE_FP8_SCALED && k % 2 ? 0.37 : 1.0;
    q->q_scale = fp8_q ? (k % 2 ? 0.5 : 1.7) : 1.0;
    q->q_nope_in_place = in_place;
    q->q_nope_lay = conf_lay_of_view(CONF_VAL(pt, A_QNV), 3, k);
    q->q_pe_lay = conf_lay_of_view(CONF_VAL(pt, A_QPV), 3, k + 1);
    q->k_nope_lay = conf_lay_of_view(CONF_VAL(pt, A_KNV), 2, k + 2);
    q->k_pe_lay = conf_lay_of_view(CONF_VAL(pt, A_KPV), 2, k + 3);
    q->q_cat_lay = in_place ? CONF_L_CONTIG : conf_lay_of_view(CONF_VAL(pt, A_QCATV), 3, k);
    q->k_pe_out_lay = kpov == MLA_ARG_ABSENT ? 0 : conf_lay_of_view(kpov, 2, k + 1);
    q->cache_lay = CONF_VAL(pt, A_CACHEV) == MLA_ARG_ROWS ? CONF_L_PAD : CONF_L_CONTIG;
    q->q_pos_lay = conf_lay_of_view(CONF_VAL(pt, A_QPOSV), 1, k);
    q->k_pos_lay = conf_lay_of_view(CONF_VAL(pt, A_KPOSV), 1, k + 1);
    q->slots_lay = conf_lay_of_view(CONF_VAL(pt, A_SLOTSV), 1, k + 2);
    q->dist = k % 6 == 5 ? CONF_DIST_ACT_SPECIALS : CONF_DIST_ACT;
    c->note = " (pairwise)";
}

static int build(conf_case *cases, int cap)
{
    conf_builder b = {.cases = cases, .cap = cap, .suite = &conf_suite_rope_cache};
    static const struct {
        mla_cache_layout layout;
        mla_dtype dtype;
        int64_t bs[2];
    } combos[] = {
        {MLA_CACHE_NORMAL, MLA_DTYPE_BF16, {1, 16}},
        {MLA_CACHE_NORMAL, MLA_DTYPE_FP8_E4M3FN, {16, 64}},
        {MLA_CACHE_NORMAL, MLA_DTYPE_FP8_E4M3FNUZ, {1, 64}},
        {MLA_CACHE_SHUFFLED, MLA_DTYPE_BF16, {16, 64}},
        {MLA_CACHE_SHUFFLED, MLA_DTYPE_FP8_E4M3FN, {16, 64}},
        {MLA_CACHE_SHUFFLED, MLA_DTYPE_FP8_E4M3FNUZ, {64, 16}},
        {MLA_CACHE_FP8_SCALED, MLA_DTYPE_FP8_E4M3FN, {1, 16}},
        {MLA_CACHE_FP8_SCALED, MLA_DTYPE_FP8_E4M3FNUZ, {64, 1}},
    };
    int n = 0;
    for (int k = 0; k < 8; ++k)
        for (int i = 0; i < 2; ++i, ++n) {
            const int fp8 = is_fp8(combos[k].dtype) && combos[k].layout != MLA_CACHE_FP8_SCALED;
            const int flags = (n % 2 ? F_KPE_OUT : 0) | (n % 3 == 1 ? F_KVIEW : 0) |
                              (n % 4 == 2 ? F_QVIEW : 0) | (n % 5 == 3 ? F_PADCACHE : 0);
            add(&b, combos[k].layout, combos[k].dtype, combos[k].bs[i], n % 7 == 4, flags,
                MLA_DTYPE_BF16, 4, i ? 7 : 4, fp8 && n % 2 ? 0.37 : 1.0, 1.0);
        }
    const mla_dtype bf16 = MLA_DTYPE_BF16, fn = MLA_DTYPE_FP8_E4M3FN, fnuz = MLA_DTYPE_FP8_E4M3FNUZ;
    add(&b, MLA_CACHE_NORMAL, bf16, 16, 0, F_KPE_OUT, fn, 4, 6, 1.0, 0.5);
    add(&b, MLA_CACHE_SHUFFLED, fnuz, 16, 0, F_KPE_OUT, fnuz, 4, 6, 0.37, 1.7);
    add(&b, MLA_CACHE_FP8_SCALED, fn, 16, 1, F_QVIEW, fn, 3, 5, 1.0, 0.02);
    add(&b, MLA_CACHE_NORMAL, fn, 16, 0, F_KPE_OUT | F_KVIEW, MLA_DTYPE_F32, 4, 8, 2.5, 1.0);
    add(&b, MLA_CACHE_NORMAL, bf16, 16, 0, F_ALIAS | F_QVIEW, bf16, 4, 7, 1.0, 1.0);
    add(&b, MLA_CACHE_SHUFFLED, fn, 16, 0, F_ALIAS | F_KPE_OUT, MLA_DTYPE_F32, 3, 3, 1.0, 1.0);
    add(&b, MLA_CACHE_FP8_SCALED, fn, 16, 0, F_BIG | F_KPE_OUT | F_KVIEW, bf16, 3, 5, 1.0, 1.0);
    add(&b, MLA_CACHE_NORMAL, bf16, 16, 0, F_BIG | F_QVIEW, fn, 2, 4, 1.0, 0.25);
    add(&b, MLA_CACHE_NORMAL, bf16, 16, 0, F_KPE_OUT, bf16, 0, 5, 1.0, 1.0); /* keys only */
    conf_push_design(&b, &conf_axes_rope_cache, design);
    return b.n;
}

static mla_status add_args(const conf_case *c, conf_problem *p)
{
    const conf_p_rope_cache *q = &c->p.rc;
    const int64_t T = q->T, Tk = q->Tk, H = q->H, L = q->L, R = q->R;
    int64_t ts[2] = {R == 64 ? 4096 : 512, R / 2}, qn[3] = {T, H, L}, qp[3] = {T, H, R};
    int64_t qps[1] = {T}, kn[2] = {Tk, L}, kp[2] = {Tk, R}, kps[1] = {Tk}, qc[3] = {T, H, L + R};
    int64_t bytes, kv[2] = {L + R, 1};
    mla_cache_desc d = desc_of(c);
    mla_status st = mla_cache_block_bytes(&d, &bytes);
    int64_t cs[2] = {d.num_blocks, bytes};
    int64_t cst[2] = {bytes + ((q->cache_lay & CONF_L_PAD) ? 48 : 0), 1};
    if (st == MLA_OK)
        st = conf_add_arg(p, "cos", CONF_IN, MLA_DTYPE_F32, 2, ts, CONF_L_CONTIG);
    if (st == MLA_OK)
        st = conf_add_arg(p, "sin", CONF_IN, MLA_DTYPE_F32, 2, ts, CONF_L_CONTIG);
    if (st == MLA_OK)
        st = conf_add_arg(p, "q_nope", CONF_IN, q->q_nope, 3, qn, q->q_nope_lay);
    if (st == MLA_OK)
        st = q->q_pe_view ? conf_add_view(p, "q_pe", CONF_IN, q->q_pe, 3, qp,
                                          (int64_t[]){H * (NOPE + R), NOPE + R, 1}, NOPE)
                          : conf_add_arg(p, "q_pe", CONF_IN, q->q_pe, 3, qp, q->q_pe_lay);
    if (st == MLA_OK)
        st = conf_add_arg(p, "q_pos", CONF_IN, q->q_pos, 1, qps, q->q_pos_lay);
    if (st == MLA_OK)
        st = q->kv_view ? conf_add_view(p, "k_nope", CONF_IN, q->k_nope, 2, kn, kv, 0)
                        : conf_add_arg(p, "k_nope", CONF_IN, q->k_nope, 2, kn, q->k_nope_lay);
    if (st == MLA_OK)
        st = q->kv_view ? conf_add_view(p, "k_pe", CONF_IN, q->k_pe, 2, kp, kv, L)
                        : conf_add_arg(p, "k_pe", CONF_IN, q->k_pe, 2, kp, q->k_pe_lay);
    if (st == MLA_OK)
        st = conf_add_arg(p, "k_pos", CONF_IN, q->k_pos, 1, kps, q->k_pos_lay);
    if (st == MLA_OK)
        st = conf_add_arg(p, "slots", CONF_IN, q->slots, 1, kps, q->slots_lay);
    if (st == MLA_OK)
        st = conf_add_view(p, "cache", CONF_INOUT, MLA_DTYPE_U8, 2, cs, cst, 0);
    if (st == MLA_OK)
        st = conf_add_arg(p, "q_cat", q->q_nope_in_place ? CONF_INOUT : CONF_OUT, q->q_cat, 3, qc,
                          q->q_cat_lay);
    if (st == MLA_OK && q->k_pe_out != MLA_DTYPE_COUNT)
        st = conf_add_arg(p, "k_pe_out", CONF_OUT, q->k_pe_out, 2, kp, q->k_pe_out_lay);
    return st;
}

static mla_status setup(const conf_case *c, const conf_env *env, conf_problem *p, char *err,
                        size_t errlen)
{
    (void)env;
    const conf_p_rope_cache *q = &c->p.rc;
    const int64_t T = q->T, Tk = q->Tk, L = q->L, R = q->R;
    mla_status st = add_args(c, p);
    if (st != MLA_OK) {
        snprintf(err, errlen, "cannot lay out the case (%s)", mla_status_name(st));
        return st;
    }
    /* test-tiny's YaRN table for R = 16, DeepSeek-V3's for R = 64 */
    mla_rope_config rc = R == 64 ? (mla_rope_config){64, 1e4, 40, 32, 1, 4096, 1, 1}
                                 : (mla_rope_config){16, 1e4, 4, 32, 1, 512, 1, 1};
    const int64_t P = p->arg[ICOS].t.shape[0];
    st = mla_rope_table_build(&rc, P, (float *)conf_arg_elem0(&p->arg[ICOS]),
                              (float *)conf_arg_elem0(&p->arg[ISIN]));
    if (st != MLA_OK) {
        snprintf(err, errlen, "mla_rope_table_build: %s", mla_status_name(st));
        return st;
    }
    conf_fill(p, IQN, q->dist, c->seed, L);
    conf_fill(p, IQP, q->dist, c->seed ^ 1, R);
    conf_fill(p, IKN, q->dist, c->seed ^ 2, L);
    conf_fill(p, IKP, q->dist, c->seed ^ 3, R);
    conf_fill(p, ICACHE, CONF_DIST_CODES, c->seed ^ 4, 0); /* old contents: random bytes */
    p->arg[ICACHE].bound.raw = 1;
    if (q->q_nope_in_place) /* q_nope's values already in q_cat */
        conf_fill(p, IQCAT, q->dist, c->seed ^ 5, L + R);
    /* key positions: a prefill's (the query tokens are the first keys), then
     * tokens without a query, anywhere in the table */
    for (int64_t j = 0; j < Tk; ++j) {
        int64_t pos = (int64_t)(conf_rng(c->seed, 17, (uint64_t)j, 0) % (uint64_t)P);
        if (j == 0)
            pos = P - 1;
        conf_set_value(p, IKPOS, j, (double)pos);
        if (j < T)
            conf_set_value(p, IQPOS, j, (double)pos);
    }
    conf_fill_slots(p, ISLOTS, q->blocks * q->block_size, c->seed ^ 6, 1);
    return MLA_OK;
}

static mla_status exec(mla_context *ctx, const conf_case *c, mla_tensor *t)
{
    const conf_p_rope_cache *q = &c->p.rc;
    mla_cache_desc d = desc_of(c);
    mla_tensor q_nope = t[IQN];
    if (q->q_nope_in_place) { /* the same elements as q_cat's first L dims */
        q_nope = t[IQCAT];
        q_nope.dtype = q->q_nope;
        q_nope.shape[2] = d.kv_lora;
    }
    mla_rope_cache_args a = {&t[ICOS],
                             &t[ISIN],
                             (mla_rope_style)q->style,
                             &q_nope,
                             &t[IQP],
                             &t[IQPOS],
                             &t[IKN],
                             &t[IKP],
                             &t[IKPOS],
                             &t[ISLOTS],
                             &d,
                             &t[ICACHE],
                             &t[IQCAT],
                             (float)q->q_scale,
                             q->k_pe_out != MLA_DTYPE_COUNT ? &t[IKPO] : NULL};
    return mla_fused_rope_concat_cache(ctx, &a);
}

const conf_suite conf_suite_rope_cache = {.name = "rope_cache",
                                          .op = MLA_OP_ROPE_CACHE,
                                          .build = build,
                                          .setup = setup,
                                          .exec = exec,
                                          .label = label,
                                          .fields = fields,
                                          .nfields = CONF_NFIELDS(fields)};
