/* mla_fused_rope_concat_cache: every cache layout x element type, q_cat in
 * bf16, f32 and both fp8 flavours (q_scale != 1), more key tokens than query
 * tokens (Tk > T: those keys are rotated and written too, unlike aiter's
 * kernel), k_pe_out, both RoPE styles, q_pe as a view inside q, k_nope and
 * k_pe as views of one kv buffer, q_nope already in place in q_cat's first L
 * dims, a cache with a padded block stride, and DeepSeek's L = 512, R = 64.
 * Bit-exact on q_cat, the cache bytes and k_pe_out: the RoPE arithmetic and
 * every rounding after it are pinned by MLA.md. */
#include <string.h>

#include "conformance/conf.h"

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
    CONF_FIELD(rc, pos_lay, CONF_F_LAY),
    CONF_ENUM(rc, dist, conf_name_dist, CONF_DIST_COUNT),
};

static mla_cache_desc desc_of(const conf_case *c)
{
    const conf_p_rope_cache *q = &c->p.rc;
    mla_cache_desc d = {(mla_cache_layout)q->layout, q->dtype, q->blocks, q->block_size,
                        q->L,                        q->R,     (float)q->k_scale};
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
                                 CONF_DIST_ACT};
    conf_push(b, &c);
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
        st = conf_add_arg(p, "q_pos", CONF_IN, q->q_pos, 1, qps, q->pos_lay);
    if (st == MLA_OK)
        st = q->kv_view ? conf_add_view(p, "k_nope", CONF_IN, q->k_nope, 2, kn, kv, 0)
                        : conf_add_arg(p, "k_nope", CONF_IN, q->k_nope, 2, kn, q->k_nope_lay);
    if (st == MLA_OK)
        st = q->kv_view ? conf_add_view(p, "k_pe", CONF_IN, q->k_pe, 2, kp, kv, L)
                        : conf_add_arg(p, "k_pe", CONF_IN, q->k_pe, 2, kp, q->k_pe_lay);
    if (st == MLA_OK)
        st = conf_add_arg(p, "k_pos", CONF_IN, q->k_pos, 1, kps, q->pos_lay);
    if (st == MLA_OK)
        st = conf_add_arg(p, "slots", CONF_IN, q->slots, 1, kps, q->pos_lay);
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
    mla_rope_cache_args a = {&t[ICOS],   &t[ISIN],        (mla_rope_style)q->style,
                             &q_nope,    &t[IQP],         &t[IQPOS],
                             &t[IKN],    &t[IKP],         &t[IKPOS],
                             &t[ISLOTS], &d,              &t[ICACHE],
                             &t[IQCAT],  (float)q->q_scale,
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
