/* mla_fused_rope_concat_cache: every cache layout x element type, q_cat in
 * bf16, f32 and both fp8 flavours (q_scale != 1), more key tokens than query
 * tokens (Tk > T: those keys are rotated and written too, unlike aiter's
 * kernel), k_pe_out, both RoPE styles, q_pe as a view inside q, k_nope and
 * k_pe as views of one kv buffer, q_nope already in place in q_cat's first L
 * dims, a cache with a padded block stride, and DeepSeek's L = 512, R = 64.
 * Bit-exact on q_cat, the cache bytes and k_pe_out: the RoPE arithmetic and
 * every rounding after it are pinned by MLA.md.
 *
 * Case parameters: ip[0] layout, ip[1] cache dtype, ip[2] block size, ip[3]
 * blocks, ip[4] style, ip[5] flags (F_*), ip[6] T, ip[7] Tk; fp[0] k_scale,
 * fp[1] q_scale. H = 3. */
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

#define H 3
#define NOPE 32

static int is_fp8(mla_dtype d) { return d == MLA_DTYPE_FP8_E4M3FN || d == MLA_DTYPE_FP8_E4M3FNUZ; }

static int64_t dim_l(const conf_case *c) { return (c->ip[5] & F_BIG) ? 512 : 128; }
static int64_t dim_r(const conf_case *c) { return (c->ip[5] & F_BIG) ? 64 : 16; }

static mla_cache_desc desc_of(const conf_case *c)
{
    mla_cache_desc d = {(mla_cache_layout)c->ip[0], (mla_dtype)c->ip[1], c->ip[3], c->ip[2],
                        dim_l(c), dim_r(c), (float)c->fp[0]};
    return d;
}

static void add(conf_builder *b, mla_cache_layout layout, mla_dtype dt, int64_t bs, int style,
                int flags, mla_dtype q_cat, int64_t T, int64_t Tk, double k_scale,
                double q_scale)
{
    conf_case c;
    memset(&c, 0, sizeof c);
    c.golden = -1;
    c.ip[0] = layout;
    c.ip[1] = dt;
    c.ip[2] = bs;
    c.ip[3] = bs == 1 ? 24 : 3;
    c.ip[4] = style;
    c.ip[5] = flags;
    c.ip[6] = T;
    c.ip[7] = Tk;
    c.fp[0] = k_scale;
    c.fp[1] = q_scale;
    c.dist = CONF_DIST_ACT;
    c.v = (mla_variant){MLA_OP_ROPE_CACHE, dt, q_cat, layout, style, bs, T, dim_l(&c) + dim_r(&c)};
    c.ndim = 3;
    c.shape[0] = T;
    c.shape[1] = H;
    c.shape[2] = dim_l(&c) + dim_r(&c);
    const char *n8 = mla_dtype_name(dt), *q8 = mla_dtype_name(q_cat);
    snprintf(c.label, sizeof c.label, "%s %s bs%lld q_cat %s%s%s%s%s%s",
             mla_cache_layout_name(layout), strncmp(n8, "fp8_", 4) ? n8 : n8 + 4, (long long)bs,
             strncmp(q8, "fp8_", 4) ? q8 : q8 + 4, style ? " neox" : "",
             (flags & F_ALIAS) ? " nope in place" : "", (flags & F_QVIEW) ? " q_pe view" : "",
             (flags & F_BIG) ? " L512" : "", T ? "" : " keys only");
    conf_push(b, &c);
}

static int build(conf_case *cases, int cap)
{
    conf_builder b = {cases, cap, 0, MLA_OP_ROPE_CACHE};
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

/* The inputs' dtype: f32 with an f32 q_cat, else bf16. */
static mla_dtype in_dtype(const conf_case *c)
{
    return c->v.out_dtype == MLA_DTYPE_F32 ? MLA_DTYPE_F32 : MLA_DTYPE_BF16;
}

static mla_status add_args(const conf_case *c, conf_problem *p)
{
    const int64_t T = c->ip[6], Tk = c->ip[7], L = dim_l(c), R = dim_r(c), fl = c->ip[5];
    const mla_dtype x = in_dtype(c), pos = c->ip[2] == 16 ? MLA_DTYPE_I64 : MLA_DTYPE_I32;
    int64_t ts[2] = {R == 64 ? 4096 : 512, R / 2}, qn[3] = {T, H, L}, qp[3] = {T, H, R};
    int64_t qps[1] = {T}, kn[2] = {Tk, L}, kp[2] = {Tk, R}, kps[1] = {Tk}, qc[3] = {T, H, L + R};
    int64_t bytes, kv[2] = {L + R, 1};
    mla_cache_desc d = desc_of(c);
    mla_status st = mla_cache_block_bytes(&d, &bytes);
    int64_t cs[2] = {d.num_blocks, bytes}, cst[2] = {bytes + ((fl & F_PADCACHE) ? 48 : 0), 1};
    if (st == MLA_OK)
        st = conf_add_arg(p, "cos", CONF_IN, MLA_DTYPE_F32, 2, ts, CONF_L_CONTIG);
    if (st == MLA_OK)
        st = conf_add_arg(p, "sin", CONF_IN, MLA_DTYPE_F32, 2, ts, CONF_L_CONTIG);
    if (st == MLA_OK)
        st = conf_add_arg(p, "q_nope", CONF_IN, x, 3, qn, CONF_L_PAD);
    if (st == MLA_OK)
        st = (fl & F_QVIEW) ? conf_add_view(p, "q_pe", CONF_IN, x, 3, qp,
                                            (int64_t[]){H * (NOPE + R), NOPE + R, 1}, NOPE)
                            : conf_add_arg(p, "q_pe", CONF_IN, x, 3, qp, CONF_L_CONTIG);
    if (st == MLA_OK)
        st = conf_add_arg(p, "q_pos", CONF_IN, pos, 1, qps, CONF_L_CONTIG);
    if (st == MLA_OK)
        st = (fl & F_KVIEW) ? conf_add_view(p, "k_nope", CONF_IN, x, 2, kn, kv, 0)
                            : conf_add_arg(p, "k_nope", CONF_IN, x, 2, kn, CONF_L_CONTIG);
    if (st == MLA_OK)
        st = (fl & F_KVIEW) ? conf_add_view(p, "k_pe", CONF_IN, x, 2, kp, kv, L)
                            : conf_add_arg(p, "k_pe", CONF_IN, x, 2, kp, CONF_L_PAD);
    if (st == MLA_OK)
        st = conf_add_arg(p, "k_pos", CONF_IN, pos, 1, kps, CONF_L_CONTIG);
    if (st == MLA_OK)
        st = conf_add_arg(p, "slots", CONF_IN, pos, 1, kps, CONF_L_CONTIG);
    if (st == MLA_OK)
        st = conf_add_view(p, "cache", CONF_INOUT, MLA_DTYPE_U8, 2, cs, cst, 0);
    if (st == MLA_OK)
        st = conf_add_arg(p, "q_cat", (fl & F_ALIAS) ? CONF_INOUT : CONF_OUT, c->v.out_dtype, 3,
                          qc, (fl & F_ALIAS) ? CONF_L_CONTIG : CONF_L_PAD);
    if (st == MLA_OK && (fl & F_KPE_OUT))
        st = conf_add_arg(p, "k_pe_out", CONF_OUT, x, 2, kp, CONF_L_OFFSET);
    return st;
}

static mla_status setup(const conf_case *c, const conf_env *env, conf_problem *p, char *err,
                        size_t errlen)
{
    (void)env;
    const int64_t T = c->ip[6], Tk = c->ip[7], L = dim_l(c), R = dim_r(c);
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
    conf_fill(p, IQN, c->dist, c->seed, L);
    conf_fill(p, IQP, c->dist, c->seed ^ 1, R);
    conf_fill(p, IKN, c->dist, c->seed ^ 2, L);
    conf_fill(p, IKP, c->dist, c->seed ^ 3, R);
    conf_fill(p, ICACHE, CONF_DIST_CODES, c->seed ^ 4, 0); /* old contents: random bytes */
    p->arg[ICACHE].bound.raw = 1;
    if (c->ip[5] & F_ALIAS) /* q_nope's values already in q_cat */
        conf_fill(p, IQCAT, c->dist, c->seed ^ 5, L + R);
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
    conf_fill_slots(p, ISLOTS, c->ip[3] * c->ip[2], c->seed ^ 6, 1);
    return MLA_OK;
}

static mla_status exec(mla_context *ctx, const conf_case *c, mla_tensor *t)
{
    mla_cache_desc d = desc_of(c);
    mla_tensor q_nope = t[IQN];
    if (c->ip[5] & F_ALIAS) { /* the same elements as q_cat's first L dims */
        q_nope = t[IQCAT];
        q_nope.shape[2] = d.kv_lora;
    }
    mla_rope_cache_args a = {&t[ICOS],  &t[ISIN],   (mla_rope_style)c->ip[4],
                             &q_nope,   &t[IQP],    &t[IQPOS],
                             &t[IKN],   &t[IKP],    &t[IKPOS],
                             &t[ISLOTS], &d,        &t[ICACHE],
                             &t[IQCAT], (float)c->fp[1], (c->ip[5] & F_KPE_OUT) ? &t[IKPO] : NULL};
    return mla_fused_rope_concat_cache(ctx, &a);
}

const conf_suite conf_suite_rope_cache = {"rope_cache", MLA_OP_ROPE_CACHE, build, setup, exec,
                                          NULL};
