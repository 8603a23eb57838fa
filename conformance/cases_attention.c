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
 * by the library's writer, and read back by this file's own decoder.
 *
 * Case parameters: ip[0] cache layout, ip[1] cache element dtype, ip[2]
 * block size (contiguous: the per-sequence capacity), ip[3] L (R = L / 8),
 * ip[4] heads, ip[5] kind | next_n << 4, ip[6] num_splits, ip[7] flags;
 * fp[0] k_scale, fp[1] q_scale; v.in_dtype q's dtype, v.out_dtype o's. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "conformance/conf.h"

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

enum { K_DECODE = 0, K_SPARSE = 1, K_PREFILL = 2, K_PREFILL_SPARSE = 3 };
enum { F_SINKS = 1, F_CONTIG = 2, F_ROPE = 4, F_VIEWS = 8, F_LONG = 16, F_NO_LSE = 32 };

#define NSEQ 4
#define CACHE_PAD 64 /* bytes between blocks of a padded cache (odd cases) */

static int is_fp8(mla_dtype d) { return d == MLA_DTYPE_FP8_E4M3FN || d == MLA_DTYPE_FP8_E4M3FNUZ; }

static int64_t dim_l(const conf_case *c) { return c->ip[3]; }
static int64_t dim_r(const conf_case *c) { return c->ip[3] / 8; }
static int kind_of(const conf_case *c) { return (int)(c->ip[5] & 0xF); }
static int next_n_of(const conf_case *c) { return (int)(c->ip[5] >> 4); }
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
    const int64_t bs = c->ip[2], nn = next_n_of(c);
    const int64_t bs_len = (c->ip[7] & F_CONTIG) || bs == 1 ? 16 : bs; /* sets the lengths */
    const int64_t longc = (c->ip[7] & F_LONG) ? 300 : 101;
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
    g->topk = sparse(c) ? ((c->ip[7] & F_LONG) ? 160 : 40) : 0;
    g->P = longc + 1;
    if (c->ip[7] & F_CONTIG) { /* sequence s owns block s */
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
    mla_cache_desc d = {(mla_cache_layout)c->ip[0],
                        (mla_dtype)c->ip[1],
                        g->num_blocks,
                        g->bs,
                        dim_l(c),
                        dim_r(c),
                        (float)c->fp[0]};
    return d;
}

/* Softmax scales that spread the scores over a few units (the keys and q
 * have |x| < 2): ~ 3 / sqrt(L + R). */
static float softmax_scale(const conf_case *c) { return dim_l(c) == 512 ? 0.125f : 0.25f; }

/* ---------------------------------------------------------- the cases */

static void make(conf_builder *b, mla_cache_layout layout, mla_dtype cdt, int64_t bs, int64_t L,
                 int64_t H, int kind, int next_n, int splits, int flags, mla_dtype qdt,
                 mla_dtype odt, int n)
{
    conf_case c;
    memset(&c, 0, sizeof c);
    c.golden = -1;
    c.ip[0] = layout;
    c.ip[1] = cdt;
    c.ip[3] = L;
    c.ip[4] = H;
    c.ip[5] = kind | next_n << 4;
    c.ip[6] = splits;
    c.ip[7] = flags;
    c.ip[2] = bs;
    if (flags & F_CONTIG) { /* the capacity: the longest context, a multiple of 16 */
        geom g;
        geometry(&c, &g);
        int64_t top = 0;
        for (int s = 0; s < NSEQ; ++s)
            top = g.ctx[s] > top ? g.ctx[s] : top;
        c.ip[2] = (top + 15) / 16 * 16 + 16;
    }
    c.fp[0] = is_fp8(cdt) && layout != MLA_CACHE_FP8_SCALED ? (n % 2 ? 0.375 : 1.25) : 1.0;
    c.fp[1] = is_fp8(qdt) ? 0.0625 : 1.0;
    c.lay[AQ] = (flags & F_VIEWS) ? CONF_L_PAD : CONF_L_CONTIG;
    c.lay[AO] = (flags & F_VIEWS) ? CONF_L_COLMAJOR : CONF_L_CONTIG;
    c.lay[ALSE] = (flags & F_VIEWS) ? CONF_L_PAD | CONF_L_OFFSET : CONF_L_CONTIG;
    c.lay[ACACHE] = n % 3 == 1 ? CONF_L_PAD : CONF_L_CONTIG; /* padded block stride */
    c.dist = CONF_DIST_ACT;
    geom g;
    geometry(&c, &g);
    c.v = (mla_variant){MLA_OP_ATTENTION, qdt, odt, layout, cdt, c.ip[2], g.T, H};
    c.ndim = 3;
    c.shape[0] = g.T;
    c.shape[1] = H;
    c.shape[2] = L + L / 8;
    static const char *const kinds[] = {"decode", "sparse", "prefill", "prefill sparse"};
    const char *cn = mla_dtype_name(cdt), *qn = mla_dtype_name(qdt);
    char sp[8];
    snprintf(sp, sizeof sp, "%d", splits);
    snprintf(c.label, sizeof c.label, "%s %s bs%lld %s%s H%lld sp%s q%s o%s%s%s%s%s%s%s",
             mla_cache_layout_name(layout), strncmp(cn, "fp8_", 4) ? cn : cn + 4,
             (long long)c.ip[2], kinds[kind], next_n > 1 ? "2" : "", (long long)H,
             splits ? sp : "auto", strncmp(qn, "fp8_", 4) ? qn : qn + 4,
             odt == MLA_DTYPE_BF16 ? "bf" : "f", (flags & F_SINKS) ? " sink" : "",
             (flags & F_CONTIG) ? " contig" : "", (flags & F_ROPE) ? " rope" : "",
             (flags & F_VIEWS) ? " views" : "", L == 512 ? " L512" : "",
             (flags & F_NO_LSE) ? " no-lse" : "");
    conf_push(b, &c);
}

static int build(conf_case *cases, int cap)
{
    conf_builder b = {cases, cap, 0, MLA_OP_ATTENTION};
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

/* Value of dim d of token t in the block at blk, dequantized (float64, exact).
 */
static double key_value(const conf_case *c, const unsigned char *blk, int64_t t, int64_t d)
{
    const int64_t L = dim_l(c), R = dim_r(c), bs = c->ip[2];
    const mla_cache_layout layout = (mla_cache_layout)c->ip[0];
    const mla_dtype dt = (mla_dtype)c->ip[1];
    if (layout == MLA_CACHE_FP8_SCALED) {
        const unsigned char *tok = blk + t * fp8s_token_bytes(L, R);
        if (d >= L)
            return conf_decode_value(MLA_DTYPE_BF16,
                                     conf_load_bits(tok + L + 4 * (L / 128) + 2 * (d - L), 2));
        const double s =
            conf_decode_value(MLA_DTYPE_F32, conf_load_bits(tok + L + 4 * (d / 128), 4));
        return conf_decode_value(dt, tok[d]) * s;
    }
    const int64_t es = dt == MLA_DTYPE_BF16 ? 2 : 1;
    const int64_t e = elem_of(layout, t, d, L, R, bs, 16 / es);
    const double v = conf_decode_value(dt, conf_load_bits(blk + e * es, (size_t)es));
    return es == 2 ? v : v * c->fp[0];
}

/* A code of moderate magnitude: bf16 with |v| in [2^-3, 2), fp8 in
 * [2^-3, 2) too (e4m3fn exponent field 4..7, e4m3fnuz 5..8), random sign. */
static uint64_t moderate_code(mla_dtype dt, uint64_t r)
{
    const uint64_t sign = (r >> 40) & 1;
    if (dt == MLA_DTYPE_BF16)
        return sign << 15 | (uint64_t)(124 + r % 4) << 7 | ((r >> 8) & 0x7F);
    const uint64_t e = (dt == MLA_DTYPE_FP8_E4M3FNUZ ? 5 : 4) + r % 4;
    return sign << 7 | e << 3 | ((r >> 8) & 7);
}

static void put_bits(unsigned char *p, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; ++i)
        p[i] = (unsigned char)(v >> (8 * i));
}

/* Every block as a writer leaves it: values of moderate magnitude, and for
 * FP8_SCALED per-group scales 2^-2 .. 2^0 and bf16 rope values. */
static void fill_cache(conf_problem *p, const conf_case *c)
{
    const conf_arg *a = &p->arg[ACACHE];
    const int64_t nb = a->t.shape[0], bb = a->t.shape[1], L = dim_l(c), R = dim_r(c);
    const mla_dtype dt = (mla_dtype)c->ip[1];
    for (int64_t b = 0; b < nb; ++b) {
        unsigned char *blk = conf_arg_elem0(a) + b * a->t.stride[0];
        if (c->ip[0] != MLA_CACHE_FP8_SCALED) {
            const int es = dt == MLA_DTYPE_BF16 ? 2 : 1;
            for (int64_t e = 0; e < bb / es; ++e)
                put_bits(blk + e * es,
                         moderate_code(dt, conf_rng(c->seed, 40, (uint64_t)(b * bb + e), 0)), es);
            continue;
        }
        const int64_t tb = fp8s_token_bytes(L, R);
        for (int64_t t = 0; t < c->ip[2]; ++t) {
            unsigned char *tok = blk + t * tb;
            for (int64_t i = 0; i < tb; ++i) {
                const uint64_t r =
                    conf_rng(c->seed, 41, (uint64_t)((b * c->ip[2] + t) * tb + i), 0);
                if (i < L)
                    tok[i] = (unsigned char)moderate_code(dt, r);
                else if (i < L + 4 * (L / 128) && (i - L) % 4 == 0)
                    put_bits(tok + i, (uint64_t)(125 + r % 3) << 23, 4); /* 2^-2 .. 2^0 */
                else if (i >= L + 4 * (L / 128) && (i - L) % 2 == 0)
                    put_bits(tok + i, moderate_code(MLA_DTYPE_BF16, r), 2);
            }
        }
    }
}

/* ------------------------------------------------------------- setup */

static mla_status add_args(conf_problem *p, const conf_case *c, const geom *g)
{
    const int64_t H = c->ip[4], L = dim_l(c), R = dim_r(c), D = L + R, T = g->T;
    const int rope = (c->ip[7] & F_ROPE) != 0;
    const int64_t empty[1] = {0};
    int64_t bb = 0;
    mla_cache_desc cd = cache_desc(c, g);
    mla_status st = mla_cache_block_bytes(&cd, &bb);
    const int64_t cs[2] = {g->num_blocks, bb},
                  cst[2] = {bb + ((c->lay[ACACHE] & CONF_L_PAD) ? CACHE_PAD : 0), 1};
#define ADD(expr) st = st == MLA_OK ? (expr) : st
    ADD(conf_add_arg(p, "q", CONF_IN, c->v.in_dtype, 3, (int64_t[]){T, H, D}, c->lay[AQ]));
    ADD(conf_add_view(p, "cache", rope ? CONF_INOUT : CONF_IN, MLA_DTYPE_U8, 2, cs, cst, 0));
    if (c->ip[7] & F_CONTIG)
        ADD(conf_add_arg(p, "block_table", CONF_IN, MLA_DTYPE_I32, 1, empty, CONF_L_CONTIG));
    else
        ADD(conf_add_arg(p, "block_table", CONF_IN, MLA_DTYPE_I32, 2,
                         (int64_t[]){g->S, g->max_blocks}, CONF_L_CONTIG));
    ADD(conf_add_arg(p, "context_lens", CONF_IN, MLA_DTYPE_I32, 1, (int64_t[]){g->S}, 0));
    ADD(conf_add_arg(p, "cu_q_lens", CONF_IN, MLA_DTYPE_I32, 1,
                     kind_of(c) >= K_PREFILL ? (int64_t[]){g->S + 1} : empty, 0));
    if (g->topk)
        ADD(conf_add_arg(p, "topk_indices", CONF_IN, MLA_DTYPE_I32, 2, (int64_t[]){T, g->topk},
                         (c->ip[7] & F_VIEWS) ? CONF_L_PAD : CONF_L_CONTIG));
    else
        ADD(conf_add_arg(p, "topk_indices", CONF_IN, MLA_DTYPE_I32, 1, empty, 0));
    ADD(conf_add_arg(p, "sinks", CONF_IN, MLA_DTYPE_F32, 1,
                     (c->ip[7] & F_SINKS) ? (int64_t[]){H} : empty, 0));
    ADD(conf_add_arg(p, "o", CONF_OUT, c->v.out_dtype, 3, (int64_t[]){T, H, L}, c->lay[AO]));
    if (c->ip[7] & F_NO_LSE) /* lse NULL: no output */
        ADD(conf_add_arg(p, "lse", CONF_OUT, MLA_DTYPE_F32, 1, empty, 0));
    else
        ADD(conf_add_arg(p, "lse", CONF_OUT, MLA_DTYPE_F32, 2, (int64_t[]){T, H}, c->lay[ALSE]));
    const int64_t P = rope ? g->P : 0, Tk = rope ? T : 0;
    ADD(conf_add_arg(p, "cos", CONF_IN, MLA_DTYPE_F32, 2, (int64_t[]){P, R / 2}, 0));
    ADD(conf_add_arg(p, "sin", CONF_IN, MLA_DTYPE_F32, 2, (int64_t[]){P, R / 2}, 0));
    ADD(conf_add_arg(p, "q_pos", CONF_IN, MLA_DTYPE_I32, 1, (int64_t[]){Tk}, 0));
    ADD(conf_add_arg(p, "k_nope", CONF_IN, MLA_DTYPE_BF16, 2, (int64_t[]){Tk, L}, CONF_L_PAD));
    ADD(conf_add_arg(p, "k_pe", CONF_IN, MLA_DTYPE_F32, 2, (int64_t[]){Tk, R}, 0));
    ADD(conf_add_arg(p, "k_pos", CONF_IN, MLA_DTYPE_I64, 1, (int64_t[]){Tk}, 0));
    ADD(conf_add_arg(p, "slots", CONF_IN, MLA_DTYPE_I32, 1, (int64_t[]){Tk}, 0));
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
    const int contig = (c->ip[7] & F_CONTIG) != 0;
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
                (float)conf_decode_value(MLA_DTYPE_BF16, moderate_code(MLA_DTYPE_BF16, r)) *
                (1.0f + (float)((r >> 48) & 0xFF) / 4096.0f);
            memcpy(dst, &v, 4);
        } else {
            put_bits(dst, moderate_code(dt, r), (int)mla_dtype_size(dt));
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
            const int64_t blk = (c->ip[7] & F_CONTIG) ? s : phys[g->first_block[s] + pos / bs];
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
    fill_cache(p, c);
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
    for (int64_t h = 0; (c->ip[7] & F_SINKS) && h < c->ip[4]; ++h)
        conf_set_value(p, ASINKS, h,
                       ldexp((double)(conf_rng(c->seed, 45, (uint64_t)h, 0) % 64) - 16.0, -3));
    fill_q(p, c);
    if (c->ip[7] & F_ROPE)
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
    const int fl = (int)c->ip[7];
    mla_attention_desc d;
    memset(&d, 0, sizeof d);
    d.heads = c->ip[4];
    d.cache = cache_desc(c, &g);
    d.paged = !(fl & F_CONTIG);
    d.q_dtype = c->v.in_dtype;
    d.q_scale = (float)c->fp[1];
    d.out_dtype = c->v.out_dtype;
    d.softmax_scale = softmax_scale(c);
    d.topk = g.topk;
    d.next_n = next_n_of(c) ? next_n_of(c) : 1;
    d.num_splits = (int32_t)c->ip[6];
    mla_attention_rope rope = {&t[ACOS],  &t[ASIN],   MLA_ROPE_INTERLEAVED,
                               &t[AQPOS], &t[AKNOPE], &t[AKPE],
                               &t[AKPOS], &t[ASLOTS]};
    mla_attention_args a = {&t[AQ],
                            &t[ACACHE],
                            d.paged ? &t[ABT] : NULL,
                            &t[ACTX],
                            kind_of(c) >= K_PREFILL ? &t[ACU] : NULL,
                            g.topk ? &t[ATOPK] : NULL,
                            (fl & F_SINKS) ? &t[ASINKS] : NULL,
                            (fl & F_ROPE) ? &rope : NULL,
                            &t[AO],
                            (fl & F_NO_LSE) ? NULL : &t[ALSE],
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
 * product rounded, then the sum) and rounded once to q's dtype. */
static void q_row(const conf_case *c, const conf_problem *p, int64_t r, int64_t h, double *q)
{
    const conf_arg *a = &p->arg[AQ];
    const int64_t H = c->ip[4], L = dim_l(c), R = dim_r(c), D = L + R;
    for (int64_t d = 0; d < D; ++d)
        q[d] = conf_in_value(a, (r * H + h) * D + d) * (is_fp8(a->t.dtype) ? c->fp[1] : 1.0);
    if (!(c->ip[7] & F_ROPE))
        return;
    const int64_t pos = (int64_t)conf_in_value(&p->arg[AQPOS], r);
    for (int64_t i = 0; i < R / 2; ++i) {
        const float cs = (float)conf_in_value(&p->arg[ACOS], pos * (R / 2) + i);
        const float sn = (float)conf_in_value(&p->arg[ASIN], pos * (R / 2) + i);
        const float x0 = (float)q[L + 2 * i], x1 = (float)q[L + 2 * i + 1];
        const float ac = x0 * cs, bs = x1 * sn, as = x0 * sn, bc = x1 * cs;
        const float o0 = ac - bs, o1 = as + bc;
        if (a->t.dtype == MLA_DTYPE_BF16) { /* RNE to bf16 through the bits */
            q[L + 2 * i] = conf_decode_value(MLA_DTYPE_BF16, (uint64_t)mla_f32_to_bf16(o0));
            q[L + 2 * i + 1] = conf_decode_value(MLA_DTYPE_BF16, (uint64_t)mla_f32_to_bf16(o1));
        } else {
            q[L + 2 * i] = o0, q[L + 2 * i + 1] = o1;
        }
    }
}

/* Per-value tolerances of o [T, H, L] and lse [T, H] (conf_attention_tol
 * of bounds.c), from the keys in the cache buffer `cache` (element 0). */
static mla_status attn_tol(const conf_case *c, const conf_problem *p, const unsigned char *cache,
                           double *tol_o, double *tol_lse)
{
    geom g;
    geometry(c, &g);
    const int64_t H = c->ip[4], L = dim_l(c), R = dim_r(c), D = L + R, bs = g.bs;
    const conf_arg *ca = &p->arg[ACACHE];
    const int64_t cmax = g.P; /* > every context */
    double *keys = malloc((size_t)(cmax * D) * sizeof *keys);
    double *q = malloc((size_t)D * sizeof *q);
    int64_t *vis = malloc((size_t)(cmax + g.topk + 1) * sizeof *vis);
    conf_attn_row row = {0};
    row.score = malloc((size_t)(cmax + g.topk + 1) * sizeof(double));
    row.mag = malloc((size_t)(cmax + g.topk + 1) * sizeof(double));
    row.v = malloc((size_t)(cmax + g.topk + 1) * sizeof(const double *));
    mla_status st = MLA_OK;
    if (!keys || !q || !vis || !row.score || !row.mag || !row.v)
        st = MLA_ERR_OUT_OF_MEMORY;
    for (int64_t s = 0; st == MLA_OK && s < NSEQ; ++s) {
        for (int64_t t = 0; t < g.ctx[s]; ++t) {
            const int64_t blk =
                (c->ip[7] & F_CONTIG)
                    ? s
                    : (int64_t)conf_in_value(&p->arg[ABT], s * g.max_blocks + t / bs);
            for (int64_t d = 0; d < D; ++d)
                keys[t * D + d] = key_value(c, cache + blk * ca->t.stride[0], t % bs, d);
        }
        for (int64_t r = g.cu[s]; r < g.cu[s + 1]; ++r) {
            const int64_t pos = row_pos(&g, s, r);
            int64_t nv = 0;
            for (int64_t t = 0; g.ctx[s] && !g.topk && t <= pos; ++t)
                vis[nv++] = t;
            for (int64_t i = 0; g.ctx[s] && i < g.topk; ++i) {
                const int64_t t = (int64_t)conf_in_value(&p->arg[ATOPK], r * g.topk + i);
                if (t >= 0 && t <= pos)
                    vis[nv++] = t;
            }
            for (int64_t h = 0; h < H; ++h) {
                q_row(c, p, r, h, q);
                row.n = nv;
                row.D = D;
                row.L = L;
                row.has_sink = (c->ip[7] & F_SINKS) != 0;
                row.sink = row.has_sink ? conf_in_value(&p->arg[ASINKS], h) : 0.0;
                for (int64_t k = 0; k < nv; ++k) {
                    double dot = 0.0, mag = 0.0;
                    for (int64_t d = 0; d < D; ++d) {
                        dot += q[d] * keys[vis[k] * D + d];
                        mag += fabs(q[d] * keys[vis[k] * D + d]);
                    }
                    row.score[k] = softmax_scale(c) * dot;
                    row.mag[k] = softmax_scale(c) * mag;
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

/* o and lse against the reference under the bound; the cache (rope) by
 * the generic exact comparison. */
static int compare(const conf_case *c, const conf_problem *p, int i, unsigned char *const *got,
                   unsigned char *const *want, conf_cmp *r)
{
    if (i != AO && i != ALSE)
        return 0;
    const int64_t T = p->arg[AO].t.shape[0], H = c->ip[4], L = dim_l(c);
    double *tol_o = calloc((size_t)(T * H * L + 1), sizeof *tol_o);
    double *tol_lse = calloc((size_t)(T * H + 1), sizeof *tol_lse);
    const unsigned char *cache = (c->ip[7] & F_ROPE) ? want[ACACHE] : p->arg[ACACHE].host;
    conf_arg a = p->arg[i];
    if (!tol_o || !tol_lse || attn_tol(c, p, cache, tol_o, tol_lse) != MLA_OK) {
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

const conf_suite conf_suite_attention = {"attention", MLA_OP_ATTENTION, build, setup,
                                         exec,        compare};
