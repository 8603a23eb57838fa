/* The DSA indexer's K cache (MLA.md section 6): mla_indexer_k_cache_write and
 * mla_indexer_k_gather, bit-exact, and the helpers every cache-based case
 * file shares (cases_indexer.h). The two together, golden vectors through
 * the cache and RoPE before the write, are in cases_indexer_composite.c.
 *
 * - indexer_k_cache_write: {e4m3fn, e4m3fnuz} x {plain, ue8m0} x block sizes
 *   {1, 16, 64} x layouts {AUTO, forced NORMAL, forced SHUFFLE where legal};
 *   k in f32 / bf16 / f16 through strided, column-major and misaligned views;
 *   int32 and int64 slots, every sixth one negative (skipped); rows whose
 *   maximum sits exactly on, just above and just below a power-of-two scale
 *   (where ue8m0 rounds up or not), tiny rows (the 1e-4 floor) and zero rows.
 *   The cache is in/out, filled with random bytes first, and compared BYTE
 *   FOR BYTE as a whole (fp8 values and fp32 scales), so a value written to
 *   the wrong place, a stray write and a missed write all show; bytes between
 *   the blocks of a padded cache must keep their contents.
 * - indexer_k_gather: several sequences through cu_seq_lens (a partial
 *   block, an empty one, a full block table, one token) and a scattered
 *   block table; every code byte value, NaN codes included, must come back
 *   unchanged (codes and scales compared as raw bits). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "conformance/cases_indexer.h"
#include "conformance/cover.h"
static const mla_dtype fp8s[] = {MLA_DTYPE_FP8_E4M3FN, MLA_DTYPE_FP8_E4M3FNUZ};
static const mla_dtype kdts[] = {MLA_DTYPE_F32, MLA_DTYPE_BF16, MLA_DTYPE_F16};
static const unsigned klays[] = {CONF_L_CONTIG, CONF_L_PAD, CONF_L_STEP2 | CONF_L_OFFSET,
                                 CONF_L_COLMAJOR};

/* ---------------------------------------------------- shared helpers */

void conf_idx_layout_label(const conf_case *c, char *buf, size_t len)
{
    const char *name = conf_idx_layout(c) == MLA_INDEXER_SHUFFLE ? "SHUFFLE" : "NORMAL";
    snprintf(buf, len, "%s%s", c->p.idx.layout == MLA_INDEXER_LAYOUT_AUTO ? "auto=" : "", name);
}

mla_status conf_idx_add_cache(conf_problem *p, const conf_case *c, int role)
{
    mla_indexer_cache_desc d = conf_idx_desc(c);
    int64_t bb = 0;
    mla_status st = mla_indexer_cache_block_bytes(&d, &bb);
    if (st != MLA_OK)
        return st;
    int64_t shape[2] = {d.num_blocks, bb};
    int64_t stride[2] = {bb + ((c->p.idx.cache_lay & CONF_L_PAD) ? CONF_IDX_BLOCK_PAD : 0), 1};
    return conf_add_view(p, "cache", role, MLA_DTYPE_U8, 2, shape, stride, 0);
}

unsigned char *conf_idx_block_byte(conf_problem *p, int i, int64_t blk, int64_t off)
{
    const conf_arg *a = &p->arg[i];
    return conf_arg_elem0(a) + blk * a->t.stride[0] + off;
}

static int fp8_nan(mla_dtype dt, unsigned c)
{
    return dt == MLA_DTYPE_FP8_E4M3FNUZ ? c == 0x80 : (c & 0x7F) == 0x7F;
}

void conf_idx_fill_cache(conf_problem *p, int i, const conf_case *c, int codes_any)
{
    const conf_p_indexer *q = &c->p.idx;
    const int64_t bs = q->block_size, D = CONF_IDX_D, blocks = q->blocks;
    const mla_dtype dt = q->fp8;
    for (int64_t blk = 0; blk < blocks; ++blk) {
        for (int64_t k = 0; k < bs * D; ++k) {
            uint64_t r = conf_rng(c->seed, 21, (uint64_t)(blk * bs * D + k), 0);
            unsigned code = (unsigned)(r & 0xFF);
            if (!codes_any && fp8_nan(dt, code))
                code = (unsigned)((r >> 8) & 0x7E); /* a finite code */
            *conf_idx_block_byte(p, i, blk, k) = (unsigned char)code;
        }
        for (int64_t t = 0; t < bs; ++t) {
            uint64_t r = conf_rng(c->seed, 22, (uint64_t)(blk * bs + t), 0);
            int e = -22 + (int)(r % 26); /* 2^-22 .. 2^3: 1e-4 / 448 up to large rows */
            float s = ldexpf(q->ue8m0 ? 1.0f : 1.0f + (float)((r >> 8) & 0x7FFFFF) * 0x1p-23f, e);
            memcpy(conf_idx_block_byte(p, i, blk, conf_idx_scale_byte(t, bs, D)), &s, 4);
        }
    }
}

void conf_idx_fill_table(conf_problem *p, int i, const int64_t *lens, int64_t S, int64_t mb,
                         int64_t bs, int64_t blocks, uint64_t seed)
{
    int64_t *perm = malloc((size_t)(blocks > 0 ? blocks : 1) * sizeof *perm), next = 0;
    if (!perm)
        return;
    for (int64_t k = 0; k < blocks; ++k)
        perm[k] = k;
    for (int64_t k = blocks - 1; k > 0; --k) { /* Fisher-Yates */
        int64_t j = (int64_t)(conf_rng(seed, 23, (uint64_t)k, 0) % (uint64_t)(k + 1));
        int64_t tmp = perm[k];
        perm[k] = perm[j];
        perm[j] = tmp;
    }
    for (int64_t s = 0; s < S; ++s) {
        const int64_t used = (lens[s] + bs - 1) / bs;
        for (int64_t j = 0; j < mb; ++j)
            conf_set_value(p, i, s * mb + j,
                           j < used && next < blocks ? (double)perm[next++] : -1.0);
    }
    free(perm);
}

/* The label's common part: "e4m3fn ue8m0 bs16 auto=SHUFFLE". */
void conf_idx_label(conf_case *c, const char *extra)
{
    char lay[24];
    conf_idx_layout_label(c, lay, sizeof lay);
    const conf_p_indexer *q = &c->p.idx;
    snprintf(c->label, sizeof c->label, "%s %s bs%lld %s%s%s", mla_dtype_name(q->fp8) + 4,
             q->ue8m0 ? "ue8m0" : "plain", (long long)q->block_size, lay, extra[0] ? " " : "",
             extra);
}

void conf_idx_case(conf_case *c, mla_dtype fp8, int ue8m0, int64_t bs, int layout,
                   int64_t blocks)
{
    memset(c, 0, sizeof *c);
    c->golden = -1;
    conf_p_indexer *q = &c->p.idx;
    q->layout = layout;
    q->fp8 = fp8;
    q->block_size = bs;
    q->blocks = blocks;
    q->ue8m0 = ue8m0;
    q->dist = CONF_DIST_ACT;
}

/* The block sizes and layouts every cache op runs: AUTO, NORMAL and, where
 * the block size allows it, SHUFFLE. */
static const struct {
    int64_t bs;
    int layout;
} bl[] = {
    {1, MLA_INDEXER_LAYOUT_AUTO},   {1, MLA_INDEXER_NORMAL},       {16, MLA_INDEXER_LAYOUT_AUTO},
    {16, MLA_INDEXER_NORMAL},       {16, MLA_INDEXER_SHUFFLE},     {64, MLA_INDEXER_LAYOUT_AUTO},
    {64, MLA_INDEXER_NORMAL},       {64, MLA_INDEXER_SHUFFLE},
};
#define NBL ((int)(sizeof bl / sizeof bl[0]))

/* ------------------------------------------------------------ axes */

static const char *const layout_names[] = {"auto", "normal", "shuffle"};
static const char *const block_names[] = {"<16", "16..63", ">=64"};

#define IDX_LAYOUTS MLA_INDEXER_NORMAL, MLA_INDEXER_SHUFFLE

/* The resolved layout SHUFFLE needs whole 16-token tiles. */
int conf_idx_legal(const conf_point *p, int layout, int block)
{
    return CONF_RULE(p, layout, block,
                     CONF_VAL(p, layout) != MLA_INDEXER_SHUFFLE || CONF_VAL(p, block) >= 16);
}

/* A design's block size for a class (below 16: 1 or 3), and the layout to
 * ask for: AUTO in every other design where it resolves to the one wanted. */
void conf_idx_design_cache(conf_case *c, mla_dtype fp8, int ue8m0, int64_t block_class,
                           int64_t layout, int k)
{
    const int64_t bs = block_class >= 64 ? 64 : block_class >= 16 ? 16 : k % 2 ? 3 : 1;
    const int ask = k % 2 && layout == (int64_t)mla_indexer_layout_for(bs) ? MLA_INDEXER_LAYOUT_AUTO
                                                                           : (int)layout;
    conf_idx_case(c, fp8, ue8m0, bs, ask, bs == 1 ? 40 : bs == 3 ? 12 : bs == 16 ? 3 : 1);
    c->note = " (pairwise)";
}

enum { W_DTYPE, W_UE8M0, W_LAYOUT, W_BLOCK, W_K, W_SLOTS, W_CACHEV, W_KV, W_SLOTSV };

static const conf_axis write_axes[] = {
    CONF_AX_FL("cache.dtype", out_dtype, NULL, CONF_FP8S),
    CONF_AX_FL("ue8m0", rule, NULL, 0, 1),
    CONF_AX_FL("layout", layout, layout_names, IDX_LAYOUTS),
    CONF_AX_CL("block_size", group, 1, block_names, 1, 16, 64),
    CONF_AX_DT("k.dtype", 1, CONF_FLOATS),
    CONF_AX_DT("slots.dtype", 2, CONF_INDEX),
    CONF_AX_VW("cache.view", 0, MLA_ARG_DENSE, MLA_ARG_ROWS),
    CONF_AX_VW("k.view", 1, CONF_VIEWS),
    CONF_AX_VW("slots.view", 2, CONF_VIEWS_1D),
};

static int write_legal(const conf_point *p) { return conf_idx_legal(p, W_LAYOUT, W_BLOCK); }

static void write_derive(mla_variant *v) { v->in_dtype = v->arg_dtype[1]; }

const conf_op_axes conf_axes_indexer_k_cache_write = {
    .op = MLA_OP_INDEXER_K_CACHE_WRITE,
    .axes = write_axes,
    .naxes = (int)(sizeof write_axes / sizeof write_axes[0]),
    .base = {.rows = 24, .cols = CONF_IDX_D, .nargs = 3, .arg_dtype = {MLA_DTYPE_U8}},
    .derive = write_derive,
    .legal = write_legal,
    .full = 1u << W_DTYPE | 1u << W_UE8M0 | 1u << W_LAYOUT | 1u << W_BLOCK};

static void write_design(const conf_point *pt, int k, conf_case *c)
{
    conf_idx_design_cache(c, (mla_dtype)CONF_VAL(pt, W_DTYPE), (int)CONF_VAL(pt, W_UE8M0),
                          CONF_VAL(pt, W_BLOCK), CONF_VAL(pt, W_LAYOUT), k);
    conf_p_indexer *q = &c->p.idx;
    q->cache_lay = CONF_VAL(pt, W_CACHEV) == MLA_ARG_ROWS ? CONF_L_PAD : CONF_L_CONTIG;
    q->T = 24;
    q->k = (mla_dtype)CONF_VAL(pt, W_K);
    q->slots = (mla_dtype)CONF_VAL(pt, W_SLOTS);
    q->k_lay = conf_lay_of_view(CONF_VAL(pt, W_KV), 2, k);
    q->slots_lay = conf_lay_of_view(CONF_VAL(pt, W_SLOTSV), 1, k);
}

enum { G_DTYPE, G_LAYOUT, G_BLOCK, G_CACHEV, G_FP8V, G_SCALEV };

static const conf_axis gather_axes[] = {
    CONF_AX_FL("cache.dtype", in_dtype, NULL, CONF_FP8S),
    CONF_AX_FL("layout", layout, layout_names, IDX_LAYOUTS),
    CONF_AX_CL("block_size", group, 1, block_names, 1, 16, 64),
    CONF_AX_VW("cache.view", 0, MLA_ARG_DENSE, MLA_ARG_ROWS),
    CONF_AX_VW("k_fp8.view", 3, CONF_VIEWS),
    CONF_AX_VW("k_scale.view", 4, CONF_VIEWS_1D),
};

static int gather_legal(const conf_point *p) { return conf_idx_legal(p, G_LAYOUT, G_BLOCK); }

static void gather_derive(mla_variant *v)
{
    v->out_dtype = v->in_dtype;
    v->arg_dtype[3] = v->in_dtype;
}

const conf_op_axes conf_axes_indexer_k_gather = {
    .op = MLA_OP_INDEXER_K_GATHER,
    .axes = gather_axes,
    .naxes = (int)(sizeof gather_axes / sizeof gather_axes[0]),
    .base = {.rows = 40,
             .cols = CONF_IDX_D,
             .nargs = 5,
             .arg_dtype = {MLA_DTYPE_U8, MLA_DTYPE_I32, MLA_DTYPE_I32, MLA_DTYPE_COUNT,
                           MLA_DTYPE_F32}},
    .derive = gather_derive,
    .legal = gather_legal,
    .full = 1u << G_DTYPE | 1u << G_LAYOUT | 1u << G_BLOCK};

/* -------------------------------------------------------- cache write */

/* Rows whose maximum decides the scale's rounding: |k| max set to exactly
 * div * 2^e (the scale a power of two: ue8m0 must not round it up), and for
 * f32 rows to the fp32 neighbours above and below it. */
static void boundary_rows(conf_problem *p, int ik, const conf_case *c)
{
    const conf_arg *k = &p->arg[ik];
    const int64_t T = k->t.shape[0], D = CONF_IDX_D;
    const double div = c->p.idx.fp8 == MLA_DTYPE_FP8_E4M3FNUZ ? 224.0 : 448.0;
    for (int64_t t = 0; t < T; ++t) {
        const int kind = (int)(t % 5);
        if (kind < 2 || (kind > 2 && k->t.dtype != MLA_DTYPE_F32))
            continue;
        double amax = 0.0;
        for (int64_t d = 0; d < D; ++d)
            amax = fmax(amax, fabs(conf_in_value(k, t * D + d)));
        int e = amax > 0.0 ? (int)ceil(log2(amax / div)) : -20;
        float v = (float)ldexp(div, e);
        if (kind == 3)
            v = nextafterf(v, INFINITY);
        else if (kind == 4)
            v = nextafterf(v, 0.0f);
        conf_set_value(p, ik, t * D + (t * 37) % D, (t & 8) ? -v : v);
    }
}

static const conf_field write_fields[] = {
    CONF_IDX_CACHE_FIELDS,
    CONF_FIELD(idx, T, CONF_F_I64),
    CONF_FIELD(idx, k, CONF_F_DTYPE),
    CONF_FIELD(idx, slots, CONF_F_DTYPE),
    CONF_FIELD(idx, k_lay, CONF_F_LAY),
    CONF_FIELD(idx, slots_lay, CONF_F_LAY),
    CONF_ENUM(idx, dist, conf_name_dist, CONF_DIST_COUNT),
};

static void label_write(conf_case *c)
{
    conf_idx_label(c, c->p.idx.T ? mla_dtype_name(c->p.idx.k) : "T=0");
}

static int build_write(conf_case *cases, int cap)
{
    conf_builder b = {.cases = cases, .cap = cap, .suite = &conf_suite_indexer_k_cache_write};
    conf_case c;
    int n = 0;
    for (int fi = 0; fi < 2; ++fi)
        for (int ue = 0; ue < 2; ++ue)
            for (int k = 0; k < NBL; ++k, ++n) {
                const int64_t bs = bl[k].bs, T = bs == 1 ? 24 : 40;
                conf_idx_case(&c, fp8s[fi], ue, bs, bl[k].layout, bs == 1 ? 40 : bs == 16 ? 4 : 2);
                c.p.idx.k = kdts[n % 3];
                c.p.idx.slots = n % 2 ? MLA_DTYPE_I64 : MLA_DTYPE_I32;
                c.p.idx.cache_lay = n % 3 == 1 ? CONF_L_PAD : CONF_L_CONTIG;
                c.p.idx.k_lay = klays[n % 4];
                c.p.idx.T = T;
                conf_push(&b, &c);
            }
    conf_idx_case(&c, MLA_DTYPE_FP8_E4M3FN, 1, 16, MLA_INDEXER_LAYOUT_AUTO, 2);
    c.p.idx.k = MLA_DTYPE_BF16;
    c.p.idx.slots = MLA_DTYPE_I32;
    conf_push(&b, &c);
    conf_push_design(&b, &conf_axes_indexer_k_cache_write, write_design);
    return b.n;
}

static mla_status setup_write(const conf_case *c, const conf_env *env, conf_problem *p,
                              char *err, size_t errlen)
{
    (void)env;
    const conf_p_indexer *q = &c->p.idx;
    const int64_t T = q->T, ks[2] = {T, CONF_IDX_D}, ss[1] = {T};
    mla_status st = conf_idx_add_cache(p, c, CONF_INOUT);
    if (st == MLA_OK)
        st = conf_add_arg(p, "k", CONF_IN, q->k, 2, ks, q->k_lay);
    if (st == MLA_OK)
        st = conf_add_arg(p, "slots", CONF_IN, q->slots, 1, ss, q->slots_lay);
    if (st != MLA_OK) {
        snprintf(err, errlen, "cannot lay out the case (%s)", mla_status_name(st));
        return st;
    }
    p->arg[0].bound.raw = 1;
    conf_fill(p, 0, CONF_DIST_CODES, c->seed, 0); /* the old contents: random bytes */
    conf_fill(p, 1, q->dist, c->seed ^ 1, CONF_IDX_D);
    boundary_rows(p, 1, c);
    conf_fill_slots(p, 2, q->blocks * q->block_size, c->seed ^ 2, 1);
    return MLA_OK;
}

static mla_status exec_write(mla_context *ctx, const conf_case *c, mla_tensor *t)
{
    mla_indexer_cache_desc d = conf_idx_desc(c);
    return mla_indexer_k_cache_write(ctx, &d, &t[0], &t[1], &t[2]);
}

const conf_suite conf_suite_indexer_k_cache_write = {.name = "indexer_k_cache_write",
                                                     .op = MLA_OP_INDEXER_K_CACHE_WRITE,
                                                     .build = build_write,
                                                     .setup = setup_write,
                                                     .exec = exec_write,
                                                     .label = label_write,
                                                     .fields = write_fields,
                                                     .nfields = CONF_NFIELDS(write_fields)};

/* ------------------------------------------------------------- gather */

#define SEQS 4

/* A partial block, an empty sequence, a full block table, one token; the
 * blocks they use (all distinct) and the table's width. */
static void gather_shape(int64_t bs, int64_t *lens, int64_t *rows, int64_t *mb, int64_t *blocks)
{
    *mb = bs == 1 ? 24 : bs == 16 ? 4 : 3;
    lens[0] = 2 * bs + 3 < *mb * bs ? 2 * bs + 3 : *mb * bs - 1;
    lens[1] = 0;
    lens[2] = *mb * bs;
    lens[3] = 1;
    *rows = lens[0] + lens[1] + lens[2] + lens[3];
    int64_t used = 0;
    for (int s = 0; s < SEQS; ++s)
        used += (lens[s] + bs - 1) / bs;
    *blocks = used + 3; /* a few blocks no sequence uses */
}

static const conf_field gather_fields[] = {
    CONF_IDX_CACHE_FIELDS,
    {"k_fp8_lay", CONF_F_LAY, offsetof(conf_params, idx.out_lay), NULL, 0},
    {"k_scale_lay", CONF_F_LAY, offsetof(conf_params, idx.scale_lay), NULL, 0},
};

static void label_gather(conf_case *c) { conf_idx_label(c, ""); }

/* The blocks gather_shape's sequences use, scattered over a cache of them. */
static void gather_design(const conf_point *pt, int k, conf_case *c)
{
    const int64_t cls = CONF_VAL(pt, G_BLOCK);
    const int64_t bs = cls >= 64 ? 64 : cls >= 16 ? 16 : k % 2 ? 3 : 1;
    int64_t lens[SEQS], rows, mb, blocks;
    gather_shape(bs, lens, &rows, &mb, &blocks);
    conf_idx_design_cache(c, (mla_dtype)CONF_VAL(pt, G_DTYPE), k % 2, cls, CONF_VAL(pt, G_LAYOUT),
                          k);
    conf_p_indexer *q = &c->p.idx;
    q->blocks = blocks;
    q->cache_lay = CONF_VAL(pt, G_CACHEV) == MLA_ARG_ROWS ? CONF_L_PAD : CONF_L_CONTIG;
    q->out_lay = conf_lay_of_view(CONF_VAL(pt, G_FP8V), 2, k);
    q->scale_lay = conf_lay_of_view(CONF_VAL(pt, G_SCALEV), 1, k + 1);
    q->dist = CONF_DIST_CODES;
}

static int build_gather(conf_case *cases, int cap)
{
    conf_builder b = {.cases = cases, .cap = cap, .suite = &conf_suite_indexer_k_gather};
    static const unsigned klay[] = {CONF_L_CONTIG, CONF_L_PAD, CONF_L_COLMAJOR, CONF_L_OFFSET};
    static const unsigned slay[] = {CONF_L_CONTIG, CONF_L_STEP2, CONF_L_CONTIG, CONF_L_OFFSET};
    conf_case c;
    int n = 0;
    for (int fi = 0; fi < 2; ++fi)
        for (int k = 0; k < NBL; ++k, ++n) {
            int64_t lens[SEQS], rows, mb, blocks;
            gather_shape(bl[k].bs, lens, &rows, &mb, &blocks);
            conf_idx_case(&c, fp8s[fi], n % 2, bl[k].bs, bl[k].layout, blocks);
            c.p.idx.cache_lay = n % 3 == 2 ? CONF_L_PAD : CONF_L_CONTIG;
            c.p.idx.out_lay = klay[n % 4];
            c.p.idx.scale_lay = slay[n % 4];
            c.p.idx.dist = CONF_DIST_CODES;
            conf_push(&b, &c);
        }
    conf_push_design(&b, &conf_axes_indexer_k_gather, gather_design);
    return b.n;
}

static mla_status setup_gather(const conf_case *c, const conf_env *env, conf_problem *p,
                               char *err, size_t errlen)
{
    (void)env;
    const conf_p_indexer *q = &c->p.idx;
    int64_t lens[SEQS], rows, mb, blocks;
    gather_shape(q->block_size, lens, &rows, &mb, &blocks);
    const int64_t bt[2] = {SEQS, mb}, cs[1] = {SEQS + 1}, ks[2] = {rows, CONF_IDX_D},
                  ss[1] = {rows};
    mla_status st = conf_idx_add_cache(p, c, CONF_IN);
    if (st == MLA_OK)
        st = conf_add_arg(p, "block_table", CONF_IN, MLA_DTYPE_I32, 2, bt, CONF_L_CONTIG);
    if (st == MLA_OK)
        st = conf_add_arg(p, "cu_seq_lens", CONF_IN, MLA_DTYPE_I32, 1, cs, CONF_L_CONTIG);
    if (st == MLA_OK)
        st = conf_add_arg(p, "k_fp8", CONF_OUT, q->fp8, 2, ks, q->out_lay);
    if (st == MLA_OK)
        st = conf_add_arg(p, "k_scale", CONF_OUT, MLA_DTYPE_F32, 1, ss, q->scale_lay);
    if (st != MLA_OK) {
        snprintf(err, errlen, "cannot lay out the case (%s)", mla_status_name(st));
        return st;
    }
    p->arg[3].bound.raw = p->arg[4].bound.raw = 1; /* a copy: every byte comes back */
    conf_idx_fill_cache(p, 0, c, 1);
    conf_idx_fill_table(p, 1, lens, SEQS, mb, q->block_size, blocks, c->seed);
    int64_t cu = 0;
    for (int s = 0; s <= SEQS; ++s) {
        conf_set_value(p, 2, s, (double)cu);
        cu += s < SEQS ? lens[s] : 0;
    }
    return MLA_OK;
}

static mla_status exec_gather(mla_context *ctx, const conf_case *c, mla_tensor *t)
{
    mla_indexer_cache_desc d = conf_idx_desc(c);
    return mla_indexer_k_gather(ctx, &d, &t[0], &t[1], &t[2], &t[3], &t[4]);
}

const conf_suite conf_suite_indexer_k_gather = {.name = "indexer_k_gather",
                                                .op = MLA_OP_INDEXER_K_GATHER,
                                                .build = build_gather,
                                                .setup = setup_gather,
                                                .exec = exec_gather,
                                                .label = label_gather,
                                                .fields = gather_fields,
                                                .nfields = CONF_NFIELDS(gather_fields)};
