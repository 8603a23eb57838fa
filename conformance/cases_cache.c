/* mla_cache_write and mla_cache_gather: every layout x element type (NORMAL
 * and SHUFFLED in bf16, e4m3fn, e4m3fnuz; FP8_SCALED in both fp8 flavours),
 * block sizes 1, 16, 64 where the layout allows them, k_scale 1 and not 1,
 * skipped (negative) slots, int32 and int64 slots, k_nope and k_pe as views
 * of one [T, L + R] buffer, blocks with a padded stride.
 * Bit-exact: the written cache is compared byte for byte as a whole (it is
 * an in/out argument filled with random bytes first, so a byte written where
 * nothing should be shows, and so does a byte left unwritten); the gathered
 * rows are compared bit for bit (any NaN payload matches another: cache
 * bytes may encode NaN, and the payload a conversion keeps is not pinned).
 */
#include <string.h>

#include "conformance/cover.h"

#define BLOCK_PAD 64 /* bytes between blocks of a padded cache */

static const struct {
    mla_cache_layout layout;
    mla_dtype dtype;
    int64_t bs[3];
} combos[] = {
    {MLA_CACHE_NORMAL, MLA_DTYPE_BF16, {1, 16, 64}},
    {MLA_CACHE_NORMAL, MLA_DTYPE_FP8_E4M3FN, {1, 16, 64}},
    {MLA_CACHE_NORMAL, MLA_DTYPE_FP8_E4M3FNUZ, {1, 16, 64}},
    {MLA_CACHE_SHUFFLED, MLA_DTYPE_BF16, {16, 64, 0}},
    {MLA_CACHE_SHUFFLED, MLA_DTYPE_FP8_E4M3FN, {16, 64, 0}},
    {MLA_CACHE_SHUFFLED, MLA_DTYPE_FP8_E4M3FNUZ, {16, 64, 0}},
    {MLA_CACHE_FP8_SCALED, MLA_DTYPE_FP8_E4M3FN, {1, 16, 64}},
    {MLA_CACHE_FP8_SCALED, MLA_DTYPE_FP8_E4M3FNUZ, {1, 16, 64}},
};
#define NCOMBOS ((int)(sizeof combos / sizeof combos[0]))

static const mla_dtype kdts[] = {MLA_DTYPE_BF16, MLA_DTYPE_F32, MLA_DTYPE_F16};

static int is_fp8(mla_dtype d) { return d == MLA_DTYPE_FP8_E4M3FN || d == MLA_DTYPE_FP8_E4M3FNUZ; }

/* The descriptor's fields, shared by write and gather. */
#define DESC_FIELDS                                                                                \
    CONF_ENUM(cache, layout, conf_name_cache_layout, MLA_CACHE_LAYOUT_COUNT),                      \
        CONF_FIELD(cache, dtype, CONF_F_DTYPE), CONF_FIELD(cache, block_size, CONF_F_I64),         \
        CONF_FIELD(cache, blocks, CONF_F_I64), CONF_FIELD(cache, L, CONF_F_I64),                   \
        CONF_FIELD(cache, R, CONF_F_I64), CONF_FIELD(cache, k_scale, CONF_F_REAL)

static const conf_field write_fields[] = {
    DESC_FIELDS,
    CONF_FIELD(cache, T, CONF_F_I64),
    CONF_FIELD(cache, k_nope, CONF_F_DTYPE),
    CONF_FIELD(cache, k_pe, CONF_F_DTYPE),
    CONF_FIELD(cache, slots, CONF_F_DTYPE),
    CONF_FIELD(cache, kv_view, CONF_F_I32),
    CONF_FIELD(cache, cache_lay, CONF_F_LAY),
    CONF_FIELD(cache, k_nope_lay, CONF_F_LAY),
    CONF_FIELD(cache, k_pe_lay, CONF_F_LAY),
    CONF_FIELD(cache, slots_lay, CONF_F_LAY),
    CONF_ENUM(cache, dist, conf_name_dist, CONF_DIST_COUNT),
};

static const conf_field gather_fields[] = {
    DESC_FIELDS,
    CONF_FIELD(cache, out, CONF_F_DTYPE),
    CONF_FIELD(cache, cache_lay, CONF_F_LAY),
    CONF_FIELD(cache, out_lay, CONF_F_LAY),
};

static mla_cache_desc desc_of(const conf_case *c)
{
    const conf_p_cache *q = &c->p.cache;
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
    const conf_p_cache *q = &c->p.cache;
    const char *n8 = mla_dtype_name(q->dtype);
    snprintf(c->label, sizeof c->label, "%s %s bs%lld%s%s",
             mla_cache_layout_name((mla_cache_layout)q->layout),
             strncmp(n8, "fp8_", 4) ? n8 : n8 + 4, (long long)q->block_size,
             q->k_scale != 1.0 ? " k_scale!=1" : "", q->L != 128 ? " L512 R64" : "");
}

/* One case of combo k, block size bs: n is the running index that varies
 * the secondary choices (k dtype, slot dtype, k_scale, padding). */
static void make(conf_case *c, int k, int64_t bs, int n, int64_t L, int64_t R)
{
    memset(c, 0, sizeof *c);
    c->golden = -1;
    const mla_dtype dt = combos[k].dtype, kd = kdts[n % 3];
    const int scaled = combos[k].layout != MLA_CACHE_FP8_SCALED && is_fp8(dt);
    const unsigned kl = n % 5 == 3 ? CONF_L_PAD : CONF_L_CONTIG;
    c->p.cache =
        (conf_p_cache){combos[k].layout,
                       dt,
                       bs,
                       bs == 1    ? 40
                       : bs == 16 ? 5
                                  : 3,
                       L,
                       R,
                       scaled && n % 2        ? 0.37
                       : scaled && n % 3 == 2 ? 2.5
                                              : 1.0,
                       24,
                       kd,
                       kd,
                       n % 2 ? MLA_DTYPE_I64 : MLA_DTYPE_I32,
                       MLA_DTYPE_F32,
                       n % 4 == 1,                              /* k_nope, k_pe views of kv */
                       n % 3 == 1 ? CONF_L_PAD : CONF_L_CONTIG, /* a padded block stride */
                       kl,
                       kl,
                       CONF_L_CONTIG,
                       kl,
                       (dt == MLA_DTYPE_BF16 && n % 2) ? CONF_DIST_ACT_SPECIALS : CONF_DIST_ACT};
}

/* ------------------------------------------------------------ axes */

static const char *const layout_names[] = {"normal", "shuffled", "fp8_scaled"};
static const char *const block_names[] = {"<16", "16..63", ">=64"};

#define CACHE_LAYOUTS MLA_CACHE_NORMAL, MLA_CACHE_SHUFFLED, MLA_CACHE_FP8_SCALED
#define CACHE_DTYPES MLA_DTYPE_BF16, CONF_FP8S

/* The cache's own rules: FP8_SCALED stores fp8, SHUFFLED 16-token tiles. */
int conf_cache_legal(const conf_point *p, int layout, int dtype, int block)
{
    return CONF_RULE(p, layout, dtype,
                     CONF_VAL(p, layout) != MLA_CACHE_FP8_SCALED ||
                         CONF_VAL(p, dtype) != MLA_DTYPE_BF16) &&
           CONF_RULE(p, layout, block,
                     CONF_VAL(p, layout) != MLA_CACHE_SHUFFLED || CONF_VAL(p, block) >= 16);
}

enum { W_LAYOUT, W_DTYPE, W_BLOCK, W_KN, W_KP, W_SLOTS, W_CACHEV, W_KNV, W_KPV, W_SLOTSV };

static const conf_axis write_axes[] = {
    CONF_AX_FL("cache.layout", layout, layout_names, CACHE_LAYOUTS),
    CONF_AX_FL("cache.dtype", in_dtype, NULL, CACHE_DTYPES),
    CONF_AX_CL("block_size", group, 1, block_names, 1, 16, 64),
    CONF_AX_DT("k_nope.dtype", 1, CONF_FLOATS),
    CONF_AX_DT("k_pe.dtype", 2, CONF_FLOATS),
    CONF_AX_DT("slots.dtype", 3, CONF_INDEX),
    CONF_AX_VW("cache.view", 0, MLA_ARG_DENSE, MLA_ARG_ROWS),
    CONF_AX_VW("k_nope.view", 1, CONF_VIEWS),
    CONF_AX_VW("k_pe.view", 2, CONF_VIEWS),
    CONF_AX_VW("slots.view", 3, CONF_VIEWS_1D),
};

static int write_legal(const conf_point *p)
{
    return conf_cache_legal(p, W_LAYOUT, W_DTYPE, W_BLOCK);
}

static void cache_derive(mla_variant *v)
{
    v->out_dtype = v->op == MLA_OP_CACHE_WRITE ? v->in_dtype : v->arg_dtype[3];
}

const conf_op_axes conf_axes_cache_write = {
    .op = MLA_OP_CACHE_WRITE,
    .axes = write_axes,
    .naxes = (int)(sizeof write_axes / sizeof write_axes[0]),
    .base = {.rows = 24, .cols = 144, .nargs = 4, .arg_dtype = {MLA_DTYPE_U8}},
    .derive = cache_derive,
    .legal = write_legal,
    .full = 1u << W_LAYOUT | 1u << W_DTYPE | 1u << W_BLOCK};

static int64_t block_of(int64_t cls, int k)
{
    return cls >= 64 ? 64 : cls >= 16 ? 16 : k % 2 ? 5 : 1;
}

static const unsigned view_lays[] = {CONF_L_CONTIG, CONF_L_PAD};

/* 12 tokens of L 128, R 16 over 3 blocks of 16, 64 or 5, or 40 of 1 */
static void design_cache(conf_p_cache *q, const conf_point *pt, int k, int ilayout, int idtype,
                         int iblock, int icachev)
{
    const mla_cache_layout layout = (mla_cache_layout)CONF_VAL(pt, ilayout);
    const mla_dtype dt = (mla_dtype)CONF_VAL(pt, idtype);
    const int64_t bs = block_of(CONF_VAL(pt, iblock), k);
    const int scaled = layout != MLA_CACHE_FP8_SCALED && is_fp8(dt);
    memset(q, 0, sizeof *q);
    q->layout = layout;
    q->dtype = dt;
    q->block_size = bs;
    q->blocks = bs == 1 ? 40 : bs == 5 ? 8 : 3;
    q->L = 128;
    q->R = 16;
    q->k_scale = scaled && k % 2 ? 0.37 : 1.0;
    q->T = 12;
    q->cache_lay = view_lays[CONF_VAL(pt, icachev) == MLA_ARG_ROWS];
    q->dist = k % 4 == 3 && dt == MLA_DTYPE_BF16 ? CONF_DIST_ACT_SPECIALS : CONF_DIST_ACT;
}

static void design_write(const conf_point *pt, int k, conf_case *c)
{
    conf_p_cache *q = &c->p.cache;
    design_cache(q, pt, k, W_LAYOUT, W_DTYPE, W_BLOCK, W_CACHEV);
    q->k_nope = (mla_dtype)CONF_VAL(pt, W_KN);
    q->k_pe = (mla_dtype)CONF_VAL(pt, W_KP);
    q->slots = (mla_dtype)CONF_VAL(pt, W_SLOTS);
    q->k_nope_lay = conf_lay_of_view(CONF_VAL(pt, W_KNV), 2, k);
    q->k_pe_lay = conf_lay_of_view(CONF_VAL(pt, W_KPV), 2, k + 1);
    q->slots_lay = conf_lay_of_view(CONF_VAL(pt, W_SLOTSV), 1, k);
    c->note = " (pairwise)";
}

enum { G_LAYOUT, G_DTYPE, G_BLOCK, G_OUT, G_CACHEV, G_OUTV };

static const conf_axis gather_axes[] = {
    CONF_AX_FL("cache.layout", layout, layout_names, CACHE_LAYOUTS),
    CONF_AX_FL("cache.dtype", in_dtype, NULL, CACHE_DTYPES),
    CONF_AX_CL("block_size", group, 1, block_names, 1, 16, 64),
    CONF_AX_DT("out.dtype", 3, MLA_DTYPE_F32, MLA_DTYPE_BF16),
    CONF_AX_VW("cache.view", 0, MLA_ARG_DENSE, MLA_ARG_ROWS),
    CONF_AX_VW("out.view", 3, CONF_VIEWS),
};

static int gather_legal(const conf_point *p)
{
    return conf_cache_legal(p, G_LAYOUT, G_DTYPE, G_BLOCK);
}

const conf_op_axes conf_axes_cache_gather = {
    .op = MLA_OP_CACHE_GATHER,
    .axes = gather_axes,
    .naxes = (int)(sizeof gather_axes / sizeof gather_axes[0]),
    .base = {.rows = 24,
             .cols = 144,
             .nargs = 4,
             .arg_dtype = {MLA_DTYPE_U8, MLA_DTYPE_I32, MLA_DTYPE_I32}},
    .derive = cache_derive,
    .legal = gather_legal,
    .full = 1u << G_LAYOUT | 1u << G_DTYPE | 1u << G_BLOCK | 1u << G_OUT};

static void design_gather(const conf_point *pt, int k, conf_case *c)
{
    conf_p_cache *q = &c->p.cache;
    design_cache(q, pt, k, G_LAYOUT, G_DTYPE, G_BLOCK, G_CACHEV);
    q->out = (mla_dtype)CONF_VAL(pt, G_OUT);
    q->out_lay = conf_lay_of_view(CONF_VAL(pt, G_OUTV), 2, k);
    c->note = " (pairwise)";
}

static int build_cases(conf_case *cases, int cap, const conf_suite *s)
{
    conf_builder b = {.cases = cases, .cap = cap, .suite = s};
    const int gather = s->op == MLA_OP_CACHE_GATHER;
    conf_case c;
    int n = 0;
    for (int k = 0; k < NCOMBOS; ++k)
        for (int i = 0; i < 3 && combos[k].bs[i]; ++i) {
            make(&c, k, combos[k].bs[i], n++, 128, 16);
            if (gather) /* out: f32 or bf16 */
                c.p.cache.out = n % 2 ? MLA_DTYPE_BF16 : MLA_DTYPE_F32;
            conf_push(&b, &c);
        }
    /* DeepSeek's row: L = 512, R = 64 (656-byte FP8_SCALED tokens) */
    static const int big[] = {0, 4, 6};
    for (int i = 0; i < 3; ++i) {
        make(&c, big[i], 16, n++, 512, 64);
        if (gather)
            c.p.cache.out = MLA_DTYPE_BF16;
        conf_push(&b, &c);
    }
    if (gather)
        conf_push_design(&b, &conf_axes_cache_gather, design_gather);
    else
        conf_push_design(&b, &conf_axes_cache_write, design_write);
    return b.n;
}

static int build_write(conf_case *cases, int cap)
{
    return build_cases(cases, cap, &conf_suite_cache_write);
}

/* cache: U8 [blocks, block_bytes], role; a padded block stride on PAD. */
static mla_status add_cache(conf_problem *p, const conf_case *c, int role, int64_t *bytes)
{
    mla_cache_desc d = desc_of(c);
    mla_status st = mla_cache_block_bytes(&d, bytes);
    if (st != MLA_OK)
        return st;
    int64_t shape[2] = {d.num_blocks, *bytes};
    int64_t stride[2] = {*bytes + ((c->p.cache.cache_lay & CONF_L_PAD) ? BLOCK_PAD : 0), 1};
    return conf_add_view(p, "cache", role, MLA_DTYPE_U8, 2, shape, stride, 0);
}

static mla_status setup_write(const conf_case *c, const conf_env *env, conf_problem *p,
                              char *err, size_t errlen)
{
    (void)env;
    const conf_p_cache *q = &c->p.cache;
    const int64_t T = q->T, L = q->L, R = q->R;
    int64_t bytes, ns[2] = {T, L}, ps[2] = {T, R}, ss[1] = {T}, kv[2] = {L + R, 1};
    mla_status st = add_cache(p, c, CONF_INOUT, &bytes);
    if (st == MLA_OK && q->kv_view) { /* k_nope and k_pe inside kv [T, L + R] */
        st = conf_add_view(p, "k_nope", CONF_IN, q->k_nope, 2, ns, kv, 0);
        if (st == MLA_OK)
            st = conf_add_view(p, "k_pe", CONF_IN, q->k_pe, 2, ps, kv, L);
    } else if (st == MLA_OK) {
        st = conf_add_arg(p, "k_nope", CONF_IN, q->k_nope, 2, ns, q->k_nope_lay);
        if (st == MLA_OK)
            st = conf_add_arg(p, "k_pe", CONF_IN, q->k_pe, 2, ps, q->k_pe_lay);
    }
    if (st == MLA_OK)
        st = conf_add_arg(p, "slots", CONF_IN, q->slots, 1, ss, q->slots_lay);
    if (st != MLA_OK) {
        snprintf(err, errlen, "cannot lay out the case (%s)", mla_status_name(st));
        return st;
    }
    p->arg[0].bound.raw = 1;
    conf_fill(p, 0, CONF_DIST_CODES, c->seed, 0); /* the old contents: random bytes */
    conf_fill(p, 1, q->dist, c->seed ^ 1, L);
    conf_fill(p, 2, q->dist, c->seed ^ 2, R);
    conf_fill_slots(p, 3, q->blocks * q->block_size, c->seed ^ 3, 1);
    return MLA_OK;
}

static mla_status exec_write(mla_context *ctx, const conf_case *c, mla_tensor *t)
{
    mla_cache_desc d = desc_of(c);
    return mla_cache_write(ctx, &d, &t[0], &t[1], &t[2], &t[3]);
}

const conf_suite conf_suite_cache_write = {.name = "cache_write",
                                           .op = MLA_OP_CACHE_WRITE,
                                           .build = build_write,
                                           .setup = setup_write,
                                           .exec = exec_write,
                                           .label = label,
                                           .fields = write_fields,
                                           .nfields = CONF_NFIELDS(write_fields)};

/* ------------------------------------------------------------ gather */

#define SEQS 4

static int build_gather(conf_case *cases, int cap)
{
    return build_cases(cases, cap, &conf_suite_cache_gather);
}

/* Sequence lengths: partial blocks, an empty sequence, a full table, one token. */
static void seq_lens(const conf_case *c, int64_t max_blocks, int64_t *lens, int64_t *rows)
{
    const int64_t bs = c->p.cache.block_size, full = max_blocks * bs;
    lens[0] = 2 * bs + 3 < full ? 2 * bs + 3 : full - 1;
    lens[1] = 0;
    lens[2] = full;
    lens[3] = 1;
    *rows = lens[0] + lens[1] + lens[2] + lens[3];
}

static int64_t max_blocks_of(const conf_case *c) { return c->p.cache.block_size == 1 ? 20 : 4; }

static mla_status setup_gather(const conf_case *c, const conf_env *env, conf_problem *p,
                               char *err, size_t errlen)
{
    (void)env;
    const conf_p_cache *q = &c->p.cache;
    const int64_t mb = max_blocks_of(c), D = q->L + q->R;
    int64_t bytes, lens[SEQS], rows, bt[2] = {SEQS, mb}, sl[1] = {SEQS};
    seq_lens(c, mb, lens, &rows);
    int64_t os[2] = {rows, D};
    mla_status st = add_cache(p, c, CONF_IN, &bytes);
    if (st == MLA_OK)
        st = conf_add_arg(p, "block_table", CONF_IN, MLA_DTYPE_I32, 2, bt, CONF_L_CONTIG);
    if (st == MLA_OK)
        st = conf_add_arg(p, "seq_lens", CONF_IN, MLA_DTYPE_I32, 1, sl, CONF_L_CONTIG);
    if (st == MLA_OK)
        st = conf_add_arg(p, "out", CONF_OUT, q->out, 2, os, q->out_lay);
    if (st != MLA_OK) {
        snprintf(err, errlen, "cannot lay out the case (%s)", mla_status_name(st));
        return st;
    }
    p->arg[3].bound.nan_any = 1;
    /* random bytes encode every element value; FP8_SCALED scales are made
     * the powers of two a writer stores (2^-14 .. 2^3) */
    conf_fill(p, 0, CONF_DIST_CODES, c->seed, 0);
    const int64_t L = q->L, R = q->R, bs = q->block_size, tb = L + 4 * (L / 128) + 2 * R;
    for (int64_t blk = 0; q->layout == MLA_CACHE_FP8_SCALED && blk < q->blocks; ++blk)
        for (int64_t t = 0; t < bs; ++t)
            for (int64_t g = 0; g < L / 128; ++g) {
                const int64_t at = blk * p->arg[0].t.stride[0] + t * tb + L + 4 * g;
                uint64_t r = conf_rng(c->seed, 15, (uint64_t)at, 0);
                uint32_t bits = (uint32_t)(127 - 14 + (int)(r % 18)) << 23;
                memcpy(conf_arg_elem0(&p->arg[0]) + at, &bits, 4); /* little-endian host */
            }
    for (int64_t s = 0; s < SEQS; ++s)
        for (int64_t j = 0; j < mb; ++j) { /* blocks past a sequence's length: -1, unread */
            const int64_t used = (lens[s] + bs - 1) / bs;
            uint64_t r = conf_rng(c->seed, 16, (uint64_t)(s * mb + j), 0);
            conf_set_value(p, 1, s * mb + j, j < used ? (double)(r % (uint64_t)q->blocks) : -1.0);
        }
    for (int64_t s = 0; s < SEQS; ++s)
        conf_set_value(p, 2, s, (double)lens[s]);
    return MLA_OK;
}

static mla_status exec_gather(mla_context *ctx, const conf_case *c, mla_tensor *t)
{
    mla_cache_desc d = desc_of(c);
    return mla_cache_gather(ctx, &d, &t[0], &t[1], &t[2], &t[3]);
}

const conf_suite conf_suite_cache_gather = {.name = "cache_gather",
                                            .op = MLA_OP_CACHE_GATHER,
                                            .build = build_gather,
                                            .setup = setup_gather,
                                            .exec = exec_gather,
                                            .label = label,
                                            .fields = gather_fields,
                                            .nfields = CONF_NFIELDS(gather_fields)};
