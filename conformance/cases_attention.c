/* The MLA attention core (mla_attention_plan_create + mla_attention_run):
 * dense decode (next_n 1 and 2), sparse decode (top-k with -1, masked and
 * repeated indices, a row with no visible key), chunked prefill with
 * variable cu_q lengths (dense and sparse); cache layouts NORMAL / SHUFFLED /
 * FP8_SCALED in bf16, e4m3fn, e4m3fnuz (FP8_SCALED: both flavours); block
 * sizes 1, 16, 64 (SHUFFLED: 16, 64); split off (1), forced (4, 64: more
 * splits than keys, empty splits) and decided by the plan (0, with long
 * contexts); heads 1, 3, 16, 128; L = 128, R = 16 and L = 512, R = 64;
 * padding sequences (c_s = 0, with and without rows); sinks; contiguous
 * mode; fp8 q; q, o and lse as strided views; lse NULL (o alone, the
 * splits combined all the same); RoPE inside attention (the cache is then
 * an in/out argument compared byte for byte).
 *
 * o and lse are held to the bound of conformance/bounds.c, computed per
 * value from the reference's own probabilities and the score magnitudes
 * (the compare hook below: with RoPE inside attention the keys are those
 * the reference wrote). Padding rows and rows without a visible key must be
 * exactly 0 and -inf (their bound is 0, and -inf is a class).
 *
 * The cache bytes are filled here from MLA.md's layouts (section 4), not
 * by the library's writer, and read back by this file's own decoder. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "conformance/cover.h"

/* argument order; absent arguments are empty placeholders */
enum {
    AQ,
    ACACHE,
    ABT,
    ACTX,
    ACU,
    ATOPK,
    ASINKS,
    AO,
    ALSE,
    ACOS,
    ASIN,
    AQPOS,
    AKNOPE,
    AKPE,
    AKPOS,
    ASLOTS
};
_Static_assert((int)AQ == CONF_AT_Q && (int)ACACHE == CONF_AT_CACHE && (int)ABT == CONF_AT_TABLE &&
                   (int)ACTX == CONF_AT_CONTEXT && (int)ACU == CONF_AT_CU &&
                   (int)ATOPK == CONF_AT_TOPK && (int)ASINKS == CONF_AT_SINKS &&
                   (int)AO == CONF_AT_O && (int)ALSE == CONF_AT_LSE && (int)ACOS == CONF_AT_COS &&
                   (int)ASIN == CONF_AT_SIN && (int)AQPOS == CONF_AT_QPOS,
               "conf.h's CONF_AT_* name this order (the replay builds its problems in it)");

enum { K_DECODE = 0, K_SPARSE = 1, K_PREFILL = 2, K_PREFILL_SPARSE = 3 };
enum { F_SINKS = 1, F_CONTIG = 2, F_ROPE = 4, F_VIEWS = 8, F_LONG = 16, F_NO_LSE = 32 };

#define NSEQ 4
#define CACHE_PAD 64 /* bytes between blocks of a padded cache (odd cases) */

static int is_fp8(mla_dtype d) { return d == MLA_DTYPE_FP8_E4M3FN || d == MLA_DTYPE_FP8_E4M3FNUZ; }

static int64_t dim_l(const conf_case *c) { return c->p.attn.L; }
static int64_t dim_r(const conf_case *c) { return c->p.attn.L / 8; }
static int kind_of(const conf_case *c) { return c->p.attn.kind; }
static int sparse(const conf_case *c) { return kind_of(c) & 1; }

/* ---------------------------------------------------------- geometry */

typedef struct geom {
    int64_t S, T, n[NSEQ], ctx[NSEQ], cu[NSEQ + 1];
    int64_t bs, num_blocks, max_blocks, topk, P; /* P: rope table rows */
    int64_t used[NSEQ], first_block[NSEQ];       /* blocks per sequence, first in the order */
} geom;

/* Decode: a sequence with c_s = next_n, a padding one (with rows), one of a
 * block and a bit, a long one. Prefill: c_s = n_s (a fresh prompt), a
 * padding one without rows, a chunk after cached tokens, a long one. */
static void geometry(const conf_case *c, geom *g)
{
    memset(g, 0, sizeof *g);
    const int64_t bs = c->p.attn.block_size, nn = c->p.attn.next_n;
    const int64_t bs_len = c->p.attn.contiguous || bs == 1 ? 16 : bs; /* sets the lengths */
    const int64_t longc = c->p.attn.long_ctx ? 300 : 101;
    g->S = NSEQ;
    if (kind_of(c) < K_PREFILL) {
        const int64_t ctx[NSEQ] = {nn, 0, bs_len + 5, longc};
        for (int s = 0; s < NSEQ; ++s)
            g->n[s] = nn, g->ctx[s] = ctx[s];
    } else {
        const int64_t n[NSEQ] = {3, 0, 5, 2}, ctx[NSEQ] = {3, 0, 40, longc};
        for (int s = 0; s < NSEQ; ++s)
            g->n[s] = n[s], g->ctx[s] = ctx[s];
    }
    for (int s = 0; s < NSEQ; ++s)
        g->cu[s + 1] = g->cu[s] + g->n[s];
    g->T = g->cu[NSEQ];
    g->bs = bs;
    g->topk = sparse(c) ? (c->p.attn.long_ctx ? 160 : 40) : 0;
    g->P = longc + 1;
    if (c->p.attn.contiguous) { /* sequence s owns block s */
        g->num_blocks = NSEQ;
        g->max_blocks = 1;
        for (int s = 0; s < NSEQ; ++s)
            g->used[s] = 1, g->first_block[s] = s;
        return;
    }
    int64_t total = 0;
    for (int s = 0; s < NSEQ; ++s) {
        g->used[s] = (g->ctx[s] + bs - 1) / bs;
        g->first_block[s] = total;
        total += g->used[s];
        g->max_blocks = g->used[s] + 1 > g->max_blocks ? g->used[s] + 1 : g->max_blocks;
    }
    g->num_blocks = total + 2; /* two blocks nobody uses */
}

static mla_cache_desc cache_desc(const conf_case *c, const geom *g)
{
    mla_cache_desc d = {(mla_cache_layout)c->p.attn.layout,
                        (mla_dtype)c->p.attn.dtype,
                        g->num_blocks,
                        g->bs,
                        dim_l(c),
                        dim_r(c),
                        (float)c->p.attn.k_scale};
    return d;
}

/* Softmax scales that spread the scores over a few units (the keys and q
 * have |x| < 2): ~ 3 / sqrt(L + R). */
static float softmax_scale(const conf_case *c) { return dim_l(c) == 512 ? 0.125f : 0.25f; }

/* ---------------------------------------------------------- the cases */

static const char *kind_name(int k)
{
    static const char *const kinds[] = {"decode", "sparse", "prefill", "prefill_sparse"};
    return k >= 0 && k < 4 ? kinds[k] : "unknown";
}

static const conf_field fields[] = {
    CONF_ENUM(attn, layout, conf_name_cache_layout, MLA_CACHE_LAYOUT_COUNT),
    CONF_FIELD(attn, dtype, CONF_F_DTYPE),
    CONF_FIELD(attn, block_size, CONF_F_I64),
    CONF_FIELD(attn, L, CONF_F_I64),
    CONF_FIELD(attn, H, CONF_F_I64),
    CONF_ENUM(attn, kind, kind_name, 4),
    CONF_FIELD(attn, next_n, CONF_F_I32),
    CONF_FIELD(attn, splits, CONF_F_I32),
    CONF_FIELD(attn, sinks, CONF_F_I32),
    CONF_FIELD(attn, contiguous, CONF_F_I32),
    CONF_FIELD(attn, rope, CONF_F_I32),
    CONF_FIELD(attn, no_lse, CONF_F_I32),
    CONF_FIELD(attn, long_ctx, CONF_F_I32),
    CONF_FIELD(attn, q, CONF_F_DTYPE),
    CONF_FIELD(attn, o, CONF_F_DTYPE),
    CONF_FIELD(attn, k_scale, CONF_F_REAL),
    CONF_FIELD(attn, q_scale, CONF_F_REAL),
    CONF_FIELD(attn, q_lay, CONF_F_LAY),
    CONF_FIELD(attn, o_lay, CONF_F_LAY),
    CONF_FIELD(attn, lse_lay, CONF_F_LAY),
    CONF_FIELD(attn, topk_lay, CONF_F_LAY),
    CONF_FIELD(attn, cache_lay, CONF_F_LAY),
    CONF_ENUM(attn, style, conf_name_rope_style, MLA_ROPE_STYLE_COUNT),
    CONF_FIELD(attn, k_nope, CONF_F_DTYPE),
    CONF_FIELD(attn, k_pe, CONF_F_DTYPE),
    CONF_FIELD(attn, q_pos, CONF_F_DTYPE),
    CONF_FIELD(attn, k_pos, CONF_F_DTYPE),
    CONF_FIELD(attn, slots, CONF_F_DTYPE),
};

static void label(conf_case *c)
{
    const conf_p_attention *q = &c->p.attn;
    static const char *const kinds[] = {"decode", "sparse", "prefill", "prefill sparse"};
    const char *cn = mla_dtype_name(q->dtype), *qn = mla_dtype_name(q->q);
    const int views = q->q_lay || q->o_lay || q->lse_lay || q->topk_lay;
    char sp[8];
    snprintf(sp, sizeof sp, "%d", (int)q->splits);
    snprintf(c->label, sizeof c->label, "%s %s bs%lld %s%s H%lld sp%s q%s o%s%s%s%s%s%s%s",
             mla_cache_layout_name((mla_cache_layout)q->layout),
             strncmp(cn, "fp8_", 4) ? cn : cn + 4, (long long)q->block_size, kinds[q->kind & 3],
             q->next_n > 1 ? "2" : "", (long long)q->H, q->splits ? sp : "auto",
             strncmp(qn, "fp8_", 4) ? qn : qn + 4, q->o == MLA_DTYPE_BF16 ? "bf" : "f",
             q->sinks ? " sink" : "", q->contiguous ? " contig" : "", q->rope ? " rope" : "",
             views ? " views" : "", q->L == 512 ? " L512" : "", q->no_lse ? " no-lse" : "");
}

static void make(conf_builder *b, mla_cache_layout layout, mla_dtype cdt, int64_t bs, int64_t L,
                 int64_t H, int kind, int next_n, int splits, int flags, mla_dtype qdt,
                 mla_dtype odt, int n)
{
    conf_case c;
    memset(&c, 0, sizeof c);
    c.golden = -1;
    conf_p_attention *q = &c.p.attn;
    const int views = (flags & F_VIEWS) != 0;
    *q = (conf_p_attention){layout,
                            cdt,
                            bs,
                            L,
                            H,
                            kind,
                            next_n,
                            splits,
                            (flags & F_SINKS) != 0,
                            (flags & F_CONTIG) != 0,
                            (flags & F_ROPE) != 0,
                            (flags & F_NO_LSE) != 0,
                            (flags & F_LONG) != 0,
                            qdt,
                            odt,
                            is_fp8(cdt) && layout != MLA_CACHE_FP8_SCALED ? (n % 2 ? 0.375 : 1.25)
                                                                          : 1.0,
                            is_fp8(qdt) ? 0.0625 : 1.0,
                            views ? CONF_L_PAD : CONF_L_CONTIG,
                            views ? CONF_L_COLMAJOR : CONF_L_CONTIG,
                            views ? CONF_L_PAD | CONF_L_OFFSET : CONF_L_CONTIG,
                            views ? CONF_L_PAD : CONF_L_CONTIG,
                            n % 3 == 1 ? CONF_L_PAD : CONF_L_CONTIG, /* padded block stride */
                            MLA_ROPE_INTERLEAVED,
                            MLA_DTYPE_BF16,
                            MLA_DTYPE_F32,
                            MLA_DTYPE_I32,
                            MLA_DTYPE_I64,
                            MLA_DTYPE_I32};
    if (q->contiguous) { /* the capacity: the longest context, a multiple of 16 */
        geom g;
        geometry(&c, &g);
        int64_t top = 0;
        for (int s = 0; s < NSEQ; ++s)
            top = g.ctx[s] > top ? g.ctx[s] : top;
        q->block_size = (top + 15) / 16 * 16 + 16;
    }
    conf_push(b, &c);
}

/* ------------------------------------------------------------ axes */

static const char *const layout_names[] = {"normal", "shuffled", "fp8_scaled"};
static const char *const block_names[] = {"<16", "16..63", ">=64"};
static const char *const splits_names[] = {"auto", "off", "forced"};
static const char *const next_n_names[] = {"1", ">=2"};

enum {
    X_Q,
    X_LAYOUT,
    X_CDT,
    X_BLOCK,
    X_O,
    X_BT,
    X_CU,
    X_TOPK,
    X_SINKS,
    X_LSE,
    X_ROPE,
    X_KN,
    X_KP,
    X_QPOS,
    X_KPOS,
    X_SLOTS,
    X_SPLITS,
    X_NEXT,
    X_QV,
    X_OV,
    X_LSEV,
    X_CACHEV,
    X_TOPKV
};

#define NONE MLA_DTYPE_COUNT

static const conf_axis axes[] = {
    CONF_AX_DT("q.dtype", 0, MLA_DTYPE_BF16, MLA_DTYPE_F32, CONF_FP8S),
    CONF_AX_FL("cache.layout", layout, layout_names, MLA_CACHE_NORMAL, MLA_CACHE_SHUFFLED,
               MLA_CACHE_FP8_SCALED),
    CONF_AX_FL("cache.dtype", rule, NULL, MLA_DTYPE_BF16, CONF_FP8S),
    CONF_AX_CL("block_size", group, 1, block_names, 1, 16, 64),
    CONF_AX_DT("o.dtype", 14, MLA_DTYPE_F32, MLA_DTYPE_BF16),
    /* the optional tensors: paged, prefill (cu_q_lens), sparse, sinks, lse */
    CONF_AX_DT("block_table.dtype", 2, NONE, MLA_DTYPE_I32),
    CONF_AX_DT("cu_q_lens.dtype", 4, NONE, MLA_DTYPE_I32),
    CONF_AX_DT("topk_indices.dtype", 5, NONE, MLA_DTYPE_I32),
    CONF_AX_DT("sinks.dtype", 6, NONE, MLA_DTYPE_F32),
    CONF_AX_DT("lse.dtype", 15, NONE, MLA_DTYPE_F32),
    /* the RoPE site: inside attention when the rope's tensors are given */
    CONF_AX_DT("rope.cos.dtype", 7, NONE, MLA_DTYPE_F32),
    CONF_AX_DT("rope.k_nope.dtype", 10, NONE, CONF_FLOATS),
    CONF_AX_DT("rope.k_pe.dtype", 11, NONE, CONF_FLOATS),
    CONF_AX_DT("rope.q_pos.dtype", 9, NONE, CONF_INDEX),
    CONF_AX_DT("rope.k_pos.dtype", 12, NONE, CONF_INDEX),
    CONF_AX_DT("rope.slots.dtype", 13, NONE, CONF_INDEX),
    /* kernel paths: split-KV with a combine or not */
    CONF_AX_CL("splits", splits, 0, splits_names, 0, 1, 2),
    CONF_AX_CL("next_n", next_n, 0, next_n_names, 1, 2),
    CONF_AX_VW("q.view", 0, CONF_VIEWS),
    CONF_AX_VW("o.view", 14, CONF_VIEWS),
    CONF_AX_VW("lse.view", 15, CONF_VIEWS, MLA_ARG_ABSENT),
    CONF_AX_VW("cache.view", 1, MLA_ARG_DENSE, MLA_ARG_ROWS),
    CONF_AX_VW("topk_indices.view", 5, CONF_VIEWS, MLA_ARG_ABSENT),
};

/* The cache's rules; the rope's tensors all or none, and then q bf16 or
 * f32; lse and topk_indices absent exactly when not given. Contiguous mode
 * (no block table) holds a sequence in one block, so the designs' block is
 * the longest context (>= 64): smaller ones are not among its combinations. */
static int legal(const conf_point *p)
{
    if (!conf_cache_legal(p, X_LAYOUT, X_CDT, X_BLOCK) ||
        !CONF_RULE(p, X_BT, X_BLOCK, CONF_VAL(p, X_BT) != NONE || CONF_VAL(p, X_BLOCK) >= 64))
        return 0;
    for (int a = X_KN; a <= X_SLOTS; ++a)
        if (!CONF_RULE(p, X_ROPE, a, (CONF_VAL(p, X_ROPE) == NONE) == (CONF_VAL(p, a) == NONE)))
            return 0;
    if (!CONF_RULE(p, X_ROPE, X_Q,
                   CONF_VAL(p, X_ROPE) == NONE || CONF_VAL(p, X_Q) == MLA_DTYPE_BF16 ||
                       CONF_VAL(p, X_Q) == MLA_DTYPE_F32))
        return 0;
    return CONF_RULE(p, X_LSE, X_LSEV,
                     (CONF_VAL(p, X_LSE) == NONE) == (CONF_VAL(p, X_LSEV) == MLA_ARG_ABSENT)) &&
           CONF_RULE(p, X_TOPK, X_TOPKV,
                     (CONF_VAL(p, X_TOPK) == NONE) == (CONF_VAL(p, X_TOPKV) == MLA_ARG_ABSENT));
}

static void derive(mla_variant *v)
{
    v->in_dtype = v->arg_dtype[0];
    v->out_dtype = v->arg_dtype[14];
    v->arg_dtype[8] = v->arg_dtype[7]; /* sin with cos */
}

const conf_op_axes conf_axes_attention = {
    .op = MLA_OP_ATTENTION,
    .axes = axes,
    .naxes = (int)(sizeof axes / sizeof axes[0]),
    .base = {.rows = 4,
             .cols = 3,
             .nargs = 16,
             .arg_dtype = {[1] = MLA_DTYPE_U8, [3] = MLA_DTYPE_I32}},
    .derive = derive,
    .legal = legal,
    .full = 1u << X_Q | 1u << X_LAYOUT | 1u << X_CDT};

static mla_dtype dt_at(const conf_point *pt, int a, mla_dtype none)
{
    return CONF_VAL(pt, a) == NONE ? none : (mla_dtype)CONF_VAL(pt, a);
}

/* L 128, R 16, H 3 heads; the geometry's four sequences */
static void design(const conf_point *pt, int k, conf_case *c)
{
    conf_p_attention *q = &c->p.attn;
    const mla_cache_layout layout = (mla_cache_layout)CONF_VAL(pt, X_LAYOUT);
    const mla_dtype cdt = (mla_dtype)CONF_VAL(pt, X_CDT), qdt = (mla_dtype)CONF_VAL(pt, X_Q);
    const int64_t cls = CONF_VAL(pt, X_BLOCK), sp = CONF_VAL(pt, X_SPLITS);
    const int64_t lsev = CONF_VAL(pt, X_LSEV), topkv = CONF_VAL(pt, X_TOPKV);
    memset(q, 0, sizeof *q);
    q->layout = layout;
    q->dtype = cdt;
    q->block_size = cls >= 64 ? 64 : cls >= 16 ? 16 : 1;
    q->L = 128;
    q->H = 3;
    q->kind = (CONF_VAL(pt, X_CU) != NONE ? K_PREFILL : K_DECODE) + (CONF_VAL(pt, X_TOPK) != NONE);
    q->next_n = (int32_t)CONF_VAL(pt, X_NEXT);
    q->splits = sp == 0 ? 0 : sp == 1 ? 1 : k % 2 ? 4 : 64;
    q->sinks = CONF_VAL(pt, X_SINKS) != NONE;
    q->contiguous = CONF_VAL(pt, X_BT) == NONE;
    q->rope = CONF_VAL(pt, X_ROPE) != NONE;
    q->no_lse = CONF_VAL(pt, X_LSE) == NONE;
    q->q = qdt;
    q->o = (mla_dtype)CONF_VAL(pt, X_O);
    q->k_scale = is_fp8(cdt) && layout != MLA_CACHE_FP8_SCALED ? (k % 2 ? 0.375 : 1.25) : 1.0;
    q->q_scale = is_fp8(qdt) ? 0.0625 : 1.0;
    q->q_lay = conf_lay_of_view(CONF_VAL(pt, X_QV), 3, k);
    q->o_lay = conf_lay_of_view(CONF_VAL(pt, X_OV), 3, k + 1);
    q->lse_lay = lsev == MLA_ARG_ABSENT ? 0 : conf_lay_of_view(lsev, 2, k);
    q->topk_lay = topkv == MLA_ARG_ABSENT ? 0 : conf_lay_of_view(topkv, 2, k + 1);
    q->cache_lay = CONF_VAL(pt, X_CACHEV) == MLA_ARG_ROWS ? CONF_L_PAD : CONF_L_CONTIG;
    q->style = k % 2;
    q->k_nope = dt_at(pt, X_KN, MLA_DTYPE_BF16);
    q->k_pe = dt_at(pt, X_KP, MLA_DTYPE_F32);
    q->q_pos = dt_at(pt, X_QPOS, MLA_DTYPE_I32);
    q->k_pos = dt_at(pt, X_KPOS, MLA_DTYPE_I64);
    q->slots = dt_at(pt, X_SLOTS, MLA_DTYPE_I32);
    if (q->contiguous) { /* the capacity: the longest context, a multiple of 16 */
        geom g;
        geometry(c, &g);
        int64_t top = 0;
        for (int s = 0; s < NSEQ; ++s)
            top = g.ctx[s] > top ? g.ctx[s] : top;
        q->block_size = (top + 15) / 16 * 16 + 16;
    }
    c->note = " (pairwise)";
}

static int build(conf_case *cases, int cap)
{
    conf_builder b = {.cases = cases, .cap = cap, .suite = &conf_suite_attention};
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
        {MLA_CACHE_FP8_SCALED, MLA_DTYPE_FP8_E4M3FNUZ, {16, 0, 0}},
    };
    static const int64_t heads[4] = {1, 3, 16, 128};
    static const int splits[4] = {1, 4, 0, 64};
    const mla_dtype bf = MLA_DTYPE_BF16, f32 = MLA_DTYPE_F32;
    int n = 0;
    for (size_t k = 0; k < sizeof combos / sizeof combos[0]; ++k)
        for (int i = 0; i < 3 && combos[k].bs[i]; ++i, ++n) {
            const int kind = n % 3 == 2 ? K_PREFILL : n % 3, nn = kind < K_PREFILL ? 1 + n % 2 : 1;
            const int flags = (n % 3 == 1 ? F_SINKS : 0) | (n % 4 == 2 ? F_VIEWS : 0);
            make(&b, combos[k].layout, combos[k].dtype, combos[k].bs[i], 128, heads[n % 4], kind,
                 nn, splits[(n / 2) % 4], flags, n % 5 == 3 ? f32 : bf, n % 2 ? bf : f32, n);
        }
    /* DeepSeek's row, L = 512, R = 64 */
    make(&b, MLA_CACHE_NORMAL, bf, 64, 512, 16, K_DECODE, 2, 0, F_SINKS, bf, bf, n++);
    make(&b, MLA_CACHE_FP8_SCALED, MLA_DTYPE_FP8_E4M3FN, 64, 512, 16, K_SPARSE, 1, 4, 0, bf, bf,
         n++);
    make(&b, MLA_CACHE_SHUFFLED, MLA_DTYPE_FP8_E4M3FNUZ, 16, 512, 3, K_PREFILL, 1, 1, F_VIEWS, bf,
         f32, n++);
    /* ... in fp8 with the rows the sm_90a body takes (its DeepSeek row copies) */
    make(&b, MLA_CACHE_NORMAL, MLA_DTYPE_FP8_E4M3FN, 64, 512, 128, K_DECODE, 1, 0, 0, bf, bf, n++);
    make(&b, MLA_CACHE_FP8_SCALED, MLA_DTYPE_FP8_E4M3FNUZ, 16, 512, 64, K_DECODE, 2, 4, F_SINKS, bf,
         f32, n++);
    /* fp8 q */
    make(&b, MLA_CACHE_NORMAL, MLA_DTYPE_FP8_E4M3FN, 16, 128, 16, K_DECODE, 2, 4, 0,
         MLA_DTYPE_FP8_E4M3FN, bf, n++);
    make(&b, MLA_CACHE_NORMAL, bf, 64, 128, 3, K_PREFILL, 1, 1, F_SINKS, MLA_DTYPE_FP8_E4M3FNUZ,
         f32, n++);
    make(&b, MLA_CACHE_FP8_SCALED, MLA_DTYPE_FP8_E4M3FN, 16, 128, 128, K_SPARSE, 2, 0, 0,
         MLA_DTYPE_FP8_E4M3FN, bf, n++);
    /* sparse prefill */
    make(&b, MLA_CACHE_NORMAL, bf, 16, 128, 3, K_PREFILL_SPARSE, 1, 4, F_SINKS, bf, f32, n++);
    make(&b, MLA_CACHE_SHUFFLED, MLA_DTYPE_FP8_E4M3FN, 64, 128, 16, K_PREFILL_SPARSE, 1, 64,
         F_VIEWS, bf, bf, n++);
    /* contiguous mode */
    make(&b, MLA_CACHE_NORMAL, bf, 0, 128, 3, K_DECODE, 2, 4, F_CONTIG | F_SINKS, bf, f32, n++);
    make(&b, MLA_CACHE_SHUFFLED, MLA_DTYPE_FP8_E4M3FNUZ, 0, 128, 16, K_PREFILL, 1, 0, F_CONTIG, bf,
         bf, n++);
    make(&b, MLA_CACHE_FP8_SCALED, MLA_DTYPE_FP8_E4M3FN, 0, 128, 1, K_SPARSE, 1, 1, F_CONTIG, bf,
         f32, n++);
    /* long contexts: the plan's own split choice, and forced splits of top-k
     * columns */
    make(&b, MLA_CACHE_NORMAL, bf, 64, 128, 3, K_DECODE, 1, 0, F_LONG | F_NO_LSE, bf, f32, n++);
    make(&b, MLA_CACHE_NORMAL, MLA_DTYPE_FP8_E4M3FN, 16, 128, 16, K_SPARSE, 2, 4, F_LONG | F_NO_LSE,
         bf, bf, n++);
    make(&b, MLA_CACHE_NORMAL, bf, 16, 128, 1, K_DECODE, 1, 256, F_LONG | F_SINKS, f32, f32, n++);
    /* RoPE inside attention: the new tokens rotated and written, then attended */
    make(&b, MLA_CACHE_NORMAL, bf, 16, 128, 3, K_DECODE, 2, 4, F_ROPE, bf, f32, n++);
    make(&b, MLA_CACHE_FP8_SCALED, MLA_DTYPE_FP8_E4M3FN, 64, 128, 16, K_PREFILL, 1, 0,
         F_ROPE | F_SINKS, bf, bf, n++);
    make(&b, MLA_CACHE_SHUFFLED, MLA_DTYPE_FP8_E4M3FN, 16, 128, 1, K_PREFILL, 1, 1,
         F_ROPE | F_VIEWS, f32, f32, n++);
    make(&b, MLA_CACHE_NORMAL, MLA_DTYPE_FP8_E4M3FNUZ, 0, 512, 3, K_DECODE, 1, 1, F_ROPE | F_CONTIG,
         bf, bf, n++);
    conf_push_design(&b, &conf_axes_attention, design);
    return b.n;
}

/* ------------------------------------------- the cache, from MLA.md */

/* Element (t, d) of a NORMAL or SHUFFLED block (MLA.md section 4). */
static int64_t elem_of(mla_cache_layout layout, int64_t t, int64_t d, int64_t L, int64_t R,
                       int64_t bs, int64_t K)
{
    if (layout == MLA_CACHE_NORMAL)
        return t * (L + R) + d;
    if (d < L)
        return (t / 16) * 16 * L + (d / K) * 16 * K + (t % 16) * K + d % K;
    const int64_t r = d - L;
    return bs * L + (t / 16) * 16 * R + (r / K) * 16 * K + (t % 16) * K + r % K;
}

static int64_t fp8s_token_bytes(int64_t L, int64_t R) { return L + 4 * (L / 128) + 2 * R; }

int64_t conf_cache_elem(const conf_attn_geom *g, int64_t t, int64_t d, mla_dtype *dt)
{
    const int64_t L = g->L, R = g->R;
    if (g->layout == MLA_CACHE_FP8_SCALED) {
        const int64_t tok = t * fp8s_token_bytes(L, R);
        *dt = d < L ? g->cache_dtype : d < L + R ? MLA_DTYPE_BF16 : MLA_DTYPE_F32;
        return d < L       ? tok + d
               : d < L + R ? tok + L + 4 * (L / 128) + 2 * (d - L)
                           : tok + L + 4 * (d - L - R);
    }
    const int64_t es = g->cache_dtype == MLA_DTYPE_BF16 ? 2 : 1;
    *dt = g->cache_dtype;
    return elem_of(g->layout, t, d, L, R, g->block_size, 16 / es) * es;
}

int64_t conf_cache_elems(const conf_attn_geom *g)
{
    return g->L + g->R + (g->layout == MLA_CACHE_FP8_SCALED ? g->L / 128 : 0);
}

double conf_cache_value(const conf_attn_geom *g, const unsigned char *blk, int64_t t, int64_t d)
{
    mla_dtype dt;
    const int64_t at = conf_cache_elem(g, t, d, &dt);
    const double v = conf_decode_value(dt, conf_load_bits(blk + at, mla_dtype_size(dt)));
    if (g->layout == MLA_CACHE_FP8_SCALED) {
        if (d >= g->L)
            return v;
        const int64_t s = conf_cache_elem(g, t, g->L + g->R + d / 128, &dt);
        return v * conf_decode_value(MLA_DTYPE_F32, conf_load_bits(blk + s, 4));
    }
    return dt == MLA_DTYPE_BF16 ? v : v * g->k_scale;
}

/* ------------------------------------------------------------- setup */

static mla_status add_args(conf_problem *p, const conf_case *c, const geom *g)
{
    const int64_t H = c->p.attn.H, L = dim_l(c), R = dim_r(c), D = L + R, T = g->T;
    const int rope = c->p.attn.rope != 0;
    const int64_t empty[1] = {0};
    int64_t bb = 0;
    mla_cache_desc cd = cache_desc(c, g);
    mla_status st = mla_cache_block_bytes(&cd, &bb);
    const int64_t cs[2] = {g->num_blocks, bb},
                  cst[2] = {bb + ((c->p.attn.cache_lay & CONF_L_PAD) ? CACHE_PAD : 0), 1};
#define ADD(expr) st = st == MLA_OK ? (expr) : st
    ADD(conf_add_arg(p, "q", CONF_IN, c->p.attn.q, 3, (int64_t[]){T, H, D}, c->p.attn.q_lay));
    ADD(conf_add_view(p, "cache", rope ? CONF_INOUT : CONF_IN, MLA_DTYPE_U8, 2, cs, cst, 0));
    if (c->p.attn.contiguous)
        ADD(conf_add_arg(p, "block_table", CONF_IN, MLA_DTYPE_I32, 1, empty, CONF_L_CONTIG));
    else
        ADD(conf_add_arg(p, "block_table", CONF_IN, MLA_DTYPE_I32, 2,
                         (int64_t[]){g->S, g->max_blocks}, CONF_L_CONTIG));
    ADD(conf_add_arg(p, "context_lens", CONF_IN, MLA_DTYPE_I32, 1, (int64_t[]){g->S}, 0));
    ADD(conf_add_arg(p, "cu_q_lens", CONF_IN, MLA_DTYPE_I32, 1,
                     kind_of(c) >= K_PREFILL ? (int64_t[]){g->S + 1} : empty, 0));
    if (g->topk)
        ADD(conf_add_arg(p, "topk_indices", CONF_IN, MLA_DTYPE_I32, 2, (int64_t[]){T, g->topk},
                         c->p.attn.topk_lay));
    else
        ADD(conf_add_arg(p, "topk_indices", CONF_IN, MLA_DTYPE_I32, 1, empty, 0));
    ADD(conf_add_arg(p, "sinks", CONF_IN, MLA_DTYPE_F32, 1,
                     c->p.attn.sinks ? (int64_t[]){H} : empty, 0));
    ADD(conf_add_arg(p, "o", CONF_OUT, c->p.attn.o, 3, (int64_t[]){T, H, L}, c->p.attn.o_lay));
    if (c->p.attn.no_lse) /* lse NULL: no output */
        ADD(conf_add_arg(p, "lse", CONF_OUT, MLA_DTYPE_F32, 1, empty, 0));
    else
        ADD(conf_add_arg(p, "lse", CONF_OUT, MLA_DTYPE_F32, 2, (int64_t[]){T, H},
                         c->p.attn.lse_lay));
    const int64_t P = rope ? g->P : 0, Tk = rope ? T : 0;
    ADD(conf_add_arg(p, "cos", CONF_IN, MLA_DTYPE_F32, 2, (int64_t[]){P, R / 2}, 0));
    ADD(conf_add_arg(p, "sin", CONF_IN, MLA_DTYPE_F32, 2, (int64_t[]){P, R / 2}, 0));
    const conf_p_attention *q = &c->p.attn;
    ADD(conf_add_arg(p, "q_pos", CONF_IN, q->q_pos, 1, (int64_t[]){Tk}, 0));
    ADD(conf_add_arg(p, "k_nope", CONF_IN, q->k_nope, 2, (int64_t[]){Tk, L}, CONF_L_PAD));
    ADD(conf_add_arg(p, "k_pe", CONF_IN, q->k_pe, 2, (int64_t[]){Tk, R}, 0));
    ADD(conf_add_arg(p, "k_pos", CONF_IN, q->k_pos, 1, (int64_t[]){Tk}, 0));
    ADD(conf_add_arg(p, "slots", CONF_IN, q->slots, 1, (int64_t[]){Tk}, 0));
#undef ADD
    return st;
}

/* Row r of sequence s: its position p = c_s - n_s + j. */
static int64_t row_pos(const geom *g, int64_t s, int64_t r)
{
    return g->ctx[s] - g->n[s] + (r - g->cu[s]);
}

/* The sequences' blocks: a seeded permutation of the cache's blocks. */
static void fill_table(conf_problem *p, const conf_case *c, const geom *g, int64_t *phys)
{
    const int contig = c->p.attn.contiguous;
    conf_fill_block_table(p, contig ? -1 : ABT, c->seed, g->num_blocks, NSEQ, g->max_blocks,
                          g->used, g->first_block, phys);
    for (int64_t s = 0; contig && s < NSEQ; ++s)
        phys[s] = s;
}

/* Top-k rows: indices in [0, p] with -1 (none), masked ones (> p, < c_s)
 * and repeats; the first row of the third sequence lists nothing visible. */
static void fill_topk(conf_problem *p, const conf_case *c, const geom *g)
{
    for (int64_t s = 0; s < NSEQ; ++s)
        for (int64_t r = g->cu[s]; r < g->cu[s + 1]; ++r) {
            const int64_t pos = row_pos(g, s, r), cs = g->ctx[s];
            for (int64_t i = 0; i < g->topk; ++i) {
                const uint64_t x = conf_rng(c->seed, 43, (uint64_t)(r * g->topk + i), 0);
                int64_t v =
                    pos >= 0 ? (int64_t)(x % (uint64_t)(pos + 1)) : -1; /* padding: pos < 0 */
                if (x % 10 == 0 || cs == 0 || (s == 2 && r == g->cu[s]))
                    v = pos + 1 < cs && x % 20 == 10 ? pos + 1 : -1;
                else if (x % 10 == 1 && pos + 1 < cs)
                    v = pos + 1 + (int64_t)((x >> 20) % (uint64_t)(cs - pos - 1)); /* masked */
                else if (x % 10 == 2 && i > 0)
                    v = (int64_t)conf_in_value(&p->arg[ATOPK], r * g->topk + i - 1); /* repeat */
                conf_set_value(p, ATOPK, r * g->topk + i, (double)v);
            }
        }
}

/* q of moderate magnitude: bf16 / f32 values with |q| in [2^-3, 2), fp8 codes.
 */
static void fill_q(conf_problem *p, const conf_case *c)
{
    const conf_arg *a = &p->arg[AQ];
    const mla_dtype dt = a->t.dtype;
    for (int64_t k = 0; k < conf_numel(a); ++k) {
        const uint64_t r = conf_rng(c->seed, 44, (uint64_t)k, 0);
        unsigned char *dst = conf_elem_at(a, conf_arg_elem0(a), k);
        if (dt == MLA_DTYPE_F32) {
            const float v =
                (float)conf_decode_value(MLA_DTYPE_BF16, conf_moderate_code(MLA_DTYPE_BF16, r)) *
                (1.0f + (float)((r >> 48) & 0xFF) / 4096.0f);
            memcpy(dst, &v, 4);
        } else {
            conf_put_bits(dst, conf_moderate_code(dt, r), (int)mla_dtype_size(dt));
        }
    }
}

/* RoPE inside attention: the rows' own tokens, at their positions and
 * slots (padding rows: position 0, not written). */
static mla_status fill_rope(conf_problem *p, const conf_case *c, const geom *g, const int64_t *phys)
{
    const int64_t R = dim_r(c), bs = g->bs;
    mla_rope_config rc = R == 64 ? (mla_rope_config){64, 1e4, 40, 32, 1, 4096, 1, 1}
                                 : (mla_rope_config){16, 1e4, 4, 32, 1, 512, 1, 1};
    mla_status st = mla_rope_table_build(&rc, g->P, (float *)conf_arg_elem0(&p->arg[ACOS]),
                                         (float *)conf_arg_elem0(&p->arg[ASIN]));
    if (st != MLA_OK)
        return st;
    conf_fill(p, AKNOPE, CONF_DIST_ACT, c->seed ^ 7, dim_l(c));
    conf_fill(p, AKPE, CONF_DIST_ACT, c->seed ^ 8, R);
    for (int64_t s = 0; s < NSEQ; ++s)
        for (int64_t r = g->cu[s]; r < g->cu[s + 1]; ++r) {
            const int64_t pos = g->ctx[s] ? row_pos(g, s, r) : 0;
            const int64_t blk = c->p.attn.contiguous ? s : phys[g->first_block[s] + pos / bs];
            const int64_t slot = g->ctx[s] ? blk * bs + pos % bs : -1;
            conf_set_value(p, AQPOS, r, (double)pos);
            conf_set_value(p, AKPOS, r, (double)pos);
            conf_set_value(p, ASLOTS, r, (double)slot);
        }
    return MLA_OK;
}

static mla_status setup(const conf_case *c, const conf_env *env, conf_problem *p, char *err,
                        size_t errlen)
{
    (void)env;
    geom g;
    geometry(c, &g);
    mla_status st = add_args(p, c, &g);
    int64_t *phys = malloc((size_t)g.num_blocks * sizeof *phys);
    if (st != MLA_OK || !phys) {
        free(phys);
        snprintf(err, errlen, "cannot lay out the case (%s)", mla_status_name(st));
        return st != MLA_OK ? st : MLA_ERR_OUT_OF_MEMORY;
    }
    conf_fill_cache_written(p, ACACHE, c->seed, (mla_cache_layout)c->p.attn.layout,
                            (mla_dtype)c->p.attn.dtype, c->p.attn.block_size, dim_l(c), dim_r(c));
    p->arg[ACACHE].bound.raw = 1; /* with rope: the written bytes, exactly */
    /* o and lse: judged by compare() with per-value tolerances */
    p->arg[AO].bound = (conf_bound){.kind = CONF_BOUND_TOL, .limit = 1.0, .zero_sign_free = 1};
    p->arg[ALSE].bound = p->arg[AO].bound;
    fill_table(p, c, &g, phys);
    for (int64_t s = 0; s < NSEQ; ++s) {
        conf_set_value(p, ACTX, s, (double)g.ctx[s]);
        if (kind_of(c) >= K_PREFILL)
            conf_set_value(p, ACU, s, (double)g.cu[s]);
    }
    if (kind_of(c) >= K_PREFILL)
        conf_set_value(p, ACU, NSEQ, (double)g.cu[NSEQ]);
    if (g.topk)
        fill_topk(p, c, &g);
    for (int64_t h = 0; c->p.attn.sinks && h < c->p.attn.H; ++h)
        conf_set_value(p, ASINKS, h,
                       ldexp((double)(conf_rng(c->seed, 45, (uint64_t)h, 0) % 64) - 16.0, -3));
    fill_q(p, c);
    if (c->p.attn.rope)
        st = fill_rope(p, c, &g, phys);
    free(phys);
    if (st != MLA_OK)
        snprintf(err, errlen, "mla_rope_table_build: %s", mla_status_name(st));
    return st;
}

/* -------------------------------------------------------------- exec */

static mla_status exec(mla_context *ctx, const conf_case *c, mla_tensor *t)
{
    geom g;
    geometry(c, &g);
    const conf_p_attention *q = &c->p.attn;
    mla_attention_desc d;
    memset(&d, 0, sizeof d);
    d.heads = c->p.attn.H;
    d.cache = cache_desc(c, &g);
    d.paged = !q->contiguous;
    d.q_dtype = c->p.attn.q;
    d.q_scale = (float)c->p.attn.q_scale;
    d.out_dtype = c->p.attn.o;
    d.softmax_scale = softmax_scale(c);
    d.topk = g.topk;
    d.next_n = q->next_n ? q->next_n : 1;
    d.num_splits = (int32_t)c->p.attn.splits;
    mla_attention_rope rope = {&t[ACOS],  &t[ASIN],   (mla_rope_style)q->style,
                               &t[AQPOS], &t[AKNOPE], &t[AKPE],
                               &t[AKPOS], &t[ASLOTS]};
    mla_attention_args a = {&t[AQ],
                            &t[ACACHE],
                            d.paged ? &t[ABT] : NULL,
                            &t[ACTX],
                            kind_of(c) >= K_PREFILL ? &t[ACU] : NULL,
                            g.topk ? &t[ATOPK] : NULL,
                            q->sinks ? &t[ASINKS] : NULL,
                            q->rope ? &rope : NULL,
                            &t[AO],
                            q->no_lse ? NULL : &t[ALSE],
                            NULL};
    mla_attention_plan *plan = NULL;
    mla_status st = mla_attention_plan_create(ctx, &d, &a, &plan);
    if (st != MLA_OK)
        return st;
    const int64_t wb = mla_attention_plan_workspace_bytes(plan);
    void *ws = NULL;
    mla_tensor tws;
    if (wb > 0 && (st = mla_malloc(ctx, (size_t)wb, &ws)) == MLA_OK) {
        mla_tensor_init(&tws, ws, MLA_DTYPE_U8, mla_context_memory(ctx), 1, (int64_t[]){wb});
        a.workspace = &tws;
    }
    if (st == MLA_OK)
        st = mla_attention_run(ctx, plan, &a);
    /* the error, if any, is read before the frees clear it */
    char param[64], why[256];
    snprintf(param, sizeof param, "%s", mla_context_error_param(ctx));
    snprintf(why, sizeof why, "%s", mla_context_error_detail(ctx));
    mla_context_synchronize(ctx);
    mla_free(ctx, ws);
    mla_attention_plan_destroy(plan);
    if (st != MLA_OK)
        mla_fail(ctx, st, param, "%s", why);
    return st;
}

/* ------------------------------------------------------------ bounds */

/* The q value a backend attends with: fp8 code * q_scale; with RoPE inside
 * attention the rope part rotated by MLA.md's fp32 arithmetic (each
 * product rounded, then the sum; pairs (2i, 2i + 1) interleaved, (i, i +
 * R/2) NeoX) and rounded once to q's dtype. */
static void q_row(const conf_attn_geom *g, const conf_problem *p, int64_t r, int64_t h, double *q)
{
    const conf_arg *a = &p->arg[AQ];
    const int64_t H = g->H, L = g->L, R = g->R, D = L + R;
    for (int64_t d = 0; d < D; ++d)
        q[d] = conf_in_value(a, (r * H + h) * D + d) * (is_fp8(a->t.dtype) ? g->q_scale : 1.0);
    if (!g->rope)
        return;
    const int64_t pos = (int64_t)conf_in_value(&p->arg[AQPOS], r);
    for (int64_t i = 0; i < R / 2; ++i) {
        const float cs = (float)conf_in_value(&p->arg[ACOS], pos * (R / 2) + i);
        const float sn = (float)conf_in_value(&p->arg[ASIN], pos * (R / 2) + i);
        const int64_t i0 = L + (g->style == MLA_ROPE_NEOX ? i : 2 * i);
        const int64_t i1 = g->style == MLA_ROPE_NEOX ? i0 + R / 2 : i0 + 1;
        const float x0 = (float)q[i0], x1 = (float)q[i1];
        const float ac = x0 * cs, bs = x1 * sn, as = x0 * sn, bc = x1 * cs;
        const float o0 = ac - bs, o1 = as + bc;
        if (a->t.dtype == MLA_DTYPE_BF16) { /* RNE to bf16 through the bits */
            q[i0] = conf_decode_value(MLA_DTYPE_BF16, (uint64_t)mla_f32_to_bf16(o0));
            q[i1] = conf_decode_value(MLA_DTYPE_BF16, (uint64_t)mla_f32_to_bf16(o1));
        } else {
            q[i0] = o0, q[i1] = o1;
        }
    }
}

mla_status conf_attention_tols(const conf_problem *p, const conf_attn_geom *g,
                               const unsigned char *cache, double *tol_o, double *tol_lse)
{
    const int64_t H = g->H, L = g->L, R = g->R, D = L + R, bs = g->block_size;
    const conf_arg *ca = &p->arg[ACACHE];
    int64_t cmax = 1; /* > every context */
    for (int64_t s = 0; s < g->S; ++s)
        cmax = g->ctx[s] + 1 > cmax ? g->ctx[s] + 1 : cmax;
    double *keys = malloc((size_t)(cmax * D) * sizeof *keys);
    double *q = malloc((size_t)D * sizeof *q);
    int64_t *vis = malloc((size_t)(cmax + g->topk + 1) * sizeof *vis);
    conf_attn_row row = {0};
    row.score = malloc((size_t)(cmax + g->topk + 1) * sizeof(double));
    row.mag = malloc((size_t)(cmax + g->topk + 1) * sizeof(double));
    row.v = malloc((size_t)(cmax + g->topk + 1) * sizeof(const double *));
    mla_status st = MLA_OK;
    if (!keys || !q || !vis || !row.score || !row.mag || !row.v)
        st = MLA_ERR_OUT_OF_MEMORY;
    for (int64_t s = 0; st == MLA_OK && s < g->S; ++s) {
        for (int64_t t = 0; t < g->ctx[s]; ++t) {
            const int64_t blk =
                g->contiguous ? s
                              : (int64_t)conf_in_value(&p->arg[ABT], s * g->max_blocks + t / bs);
            for (int64_t d = 0; d < D; ++d)
                keys[t * D + d] = conf_cache_value(g, cache + blk * ca->t.stride[0], t % bs, d);
        }
        for (int64_t r = g->cu[s]; r < g->cu[s + 1]; ++r) {
            const int64_t pos = g->ctx[s] - (g->cu[s + 1] - g->cu[s]) + (r - g->cu[s]);
            int64_t nv = 0;
            for (int64_t t = 0; g->ctx[s] && !g->topk && t <= pos; ++t)
                vis[nv++] = t;
            for (int64_t i = 0; g->ctx[s] && i < g->topk; ++i) {
                const int64_t t = (int64_t)conf_in_value(&p->arg[ATOPK], r * g->topk + i);
                if (t >= 0 && t <= pos)
                    vis[nv++] = t;
            }
            for (int64_t h = 0; h < H; ++h) {
                q_row(g, p, r, h, q);
                row.n = nv;
                row.D = D;
                row.L = L;
                row.has_sink = g->sinks != 0;
                row.sink = row.has_sink ? conf_in_value(&p->arg[ASINKS], h) : 0.0;
                for (int64_t k = 0; k < nv; ++k) {
                    double dot = 0.0, mag = 0.0;
                    for (int64_t d = 0; d < D; ++d) {
                        dot += q[d] * keys[vis[k] * D + d];
                        mag += fabs(q[d] * keys[vis[k] * D + d]);
                    }
                    row.score[k] = g->softmax_scale * dot;
                    row.mag[k] = g->softmax_scale * mag;
                    row.v[k] = keys + vis[k] * D;
                }
                conf_attention_tol(&row, tol_o + (r * H + h) * L, tol_lse + r * H + h);
            }
        }
    }
    free(keys);
    free(q);
    free(vis);
    free(row.score);
    free(row.mag);
    free((void *)row.v);
    return st;
}

/* The case's geometry as conf_attention_tols reads it (ctx, cu: [NSEQ], [NSEQ + 1]). */
static conf_attn_geom attn_geom(const conf_case *c, const geom *g, int64_t *ctx, int64_t *cu)
{
    const conf_p_attention *q = &c->p.attn;
    for (int s = 0; s <= NSEQ; ++s) {
        cu[s] = g->cu[s];
        if (s < NSEQ)
            ctx[s] = g->ctx[s];
    }
    return (conf_attn_geom){.S = NSEQ,
                            .H = q->H,
                            .L = dim_l(c),
                            .R = dim_r(c),
                            .block_size = g->bs,
                            .max_blocks = g->max_blocks,
                            .topk = g->topk,
                            .ctx = ctx,
                            .cu = cu,
                            .layout = (mla_cache_layout)q->layout,
                            .cache_dtype = q->dtype,
                            .k_scale = q->k_scale,
                            .q_scale = q->q_scale,
                            .softmax_scale = softmax_scale(c),
                            .contiguous = q->contiguous,
                            .rope = q->rope,
                            .sinks = q->sinks,
                            .style = (mla_rope_style)q->style};
}

/* o and lse against the reference under the bound; the cache (rope) by
 * the generic exact comparison. */
static int compare(const conf_case *c, const conf_problem *p, int i, unsigned char *const *got,
                   unsigned char *const *want, conf_cmp *r)
{
    if (i != AO && i != ALSE)
        return 0;
    const int64_t T = p->arg[AO].t.shape[0], H = c->p.attn.H, L = dim_l(c);
    double *tol_o = calloc((size_t)(T * H * L + 1), sizeof *tol_o);
    double *tol_lse = calloc((size_t)(T * H + 1), sizeof *tol_lse);
    const unsigned char *cache = c->p.attn.rope ? want[ACACHE] : p->arg[ACACHE].host;
    conf_arg a = p->arg[i];
    geom g;
    geometry(c, &g);
    int64_t ctx[NSEQ], cu[NSEQ + 1];
    const conf_attn_geom ag = attn_geom(c, &g, ctx, cu);
    if (!tol_o || !tol_lse || conf_attention_tols(p, &ag, cache, tol_o, tol_lse) != MLA_OK) {
        free(tol_o);
        free(tol_lse);
        return 0; /* out of memory: the exact comparison, which fails loudly */
    }
    a.bound = (conf_bound){.kind = CONF_BOUND_TOL,
                           .limit = 1.0,
                           .zero_sign_free = 1,
                           .tol = i == AO ? tol_o : tol_lse};
    const size_t skip = (size_t)a.offset * mla_dtype_size(a.t.dtype);
    conf_compare(&a, got[i] + skip, want[i] + skip, 0, r);
    free(tol_o);
    free(tol_lse);
    return 1;
}

const conf_suite conf_suite_attention = {.name = "attention",
                                         .op = MLA_OP_ATTENTION,
                                         .build = build,
                                         .setup = setup,
                                         .exec = exec,
                                         .compare = compare,
                                         .label = label,
                                         .fields = fields,
                                         .nfields = CONF_NFIELDS(fields)};
