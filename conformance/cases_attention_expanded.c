/* The expanded attention (mla_attention_expanded; MLA.md section 2, "The
 * expanded form"): each backend against the float64 reference, and the
 * expanded form against the absorbed form on the same inputs.
 *
 * Listed cases: cache layout and element dtype (NORMAL bf16 / e4m3fn /
 * e4m3fnuz, SHUFFLED bf16 / e4m3fn, FP8_SCALED e4m3fn / e4m3fnuz), block
 * size (1, 16, 64; contiguous mode), heads (1, 3, 16, 128), the rows
 * (variable cu_q chunks after cached tokens with a padding sequence; next_n
 * rows each; a long chunk of several query blocks and key tiles; the HIP
 * matrix bodies' block and key-tile edges: 130 fresh rows, a chunk of 66
 * after 34 cached tokens, one row after 199), q dtype
 * (bf16, f32), o dtype (f32, bf16), kv_b_proj (bf16, e4m3fn with 128 x 128
 * block scales), lse NULL, strided q / o / lse / kv_b_proj views, and
 * DeepSeek's sizes (L 512, R 64, nope = v = 128). Then the pairwise designs
 * of the variant axes below (L 128, 3 heads).
 *
 * Bounds (per value, CONF_BOUND_TOL; MLA.md's derivation): the keys and
 * values are computed here in float64 from the cache (the reference's exact
 * reader) and kv_b_proj, each with its error bound e = gamma_{L+4} M (1 +
 * u_kv) + u_kv |x| (M = sum |w| |c|; u_kv = 2^-8 for a bf16 kv dtype, 2^-24
 * for f32); the scores' error scale * sum |q_nope| e^K and the values' e^V
 * then enter conf_attention_tol (conformance/bounds.c). The reference is
 * float64 throughout (its own error is in that bound's float64 term plus
 * gamma64_{L+1} of the decompression).
 *
 * Forms: exec also runs the absorbed chain on the same backend (q_lat =
 * q_nope W_kc by mla_batched_gemm into an f32 q_cat, the absorbed attention,
 * o = o_lat W_vc by mla_batched_gemm) into o_absorbed, judged against the
 * same backend's expanded o within B_expanded + B_absorbed (both against
 * the exact value; the absorbed chain's bound carries q_lat's fp32 GEMM
 * error into its scores and o_lat's into the W_vc GEMM) plus an ulp of o.
 * bf16 kv_b_proj only: the absorbed batched GEMM takes one scale per tensor. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "conformance/cover.h"
#include "core/ref/ref_kernels.h" /* mla_ref_cache_read_row: the exact reader */

enum { AQN, AQP, ACACHE, ABT, ACTX, ACU, AW, AWS, AO, ALSE, AOABS };
enum { G_CHUNKS = 0, G_NEXT_N = 1, G_LONG = 2, G_SHORT = 3, G_TILES = 4, G_COUNT };

#define NSEQ 4
#define CACHE_PAD 64 /* bytes between blocks of a padded cache */
#define U32 0x1p-24
#define U64 0x1p-53

static int64_t dim_l(const conf_case *c) { return c->p.attx.L; }
static int64_t dim_r(const conf_case *c) { return c->p.attx.R ? c->p.attx.R : c->p.attx.L / 8; }
static int64_t dim_nope(const conf_case *c)
{
    return c->p.attx.nope ? c->p.attx.nope : c->p.attx.L == 512 ? 128 : 32;
}
static int64_t dim_v(const conf_case *c)
{
    return c->p.attx.v ? c->p.attx.v : c->p.attx.L == 512 ? 128 : 32;
}
static int with_cu(const conf_case *c) { return c->p.attx.geo != G_NEXT_N; }
static int forms(const conf_case *c) { return c->p.attx.w == MLA_DTYPE_BF16; }
static float softmax_scale(const conf_case *c) { return c->p.attx.L == 512 ? 0.125f : 0.3f; }
static double gam(double n, double u) { return n * u / (1.0 - n * u); }
/* An fp8 NORMAL or SHUFFLED cache: its codes times desc.k_scale. */
static int k_scaled(int layout, mla_dtype cdt)
{
    return cdt != MLA_DTYPE_BF16 && layout != MLA_CACHE_FP8_SCALED;
}

typedef struct geom {
    int64_t S, T, n[NSEQ], ctx[NSEQ], cu[NSEQ + 1];
    int64_t bs, num_blocks, max_blocks, used[NSEQ], first_block[NSEQ];
} geom;

/* Chunks: a fresh prompt, a padding sequence without rows, a chunk after
 * cached tokens, a longer one. next_n: next_n rows each, one padding
 * sequence (whose rows get o = 0). Long: a chunk of 70 rows after 75 cached
 * tokens (several query blocks and key tiles on the fast backends). Short: a
 * few keys (the 128-head case). Tiles: the matrix bodies' block and tile
 * edges (64 / 128 query rows, 64 keys): a fresh prompt of 130 rows, one row
 * after 199 cached tokens, a chunk of 66 rows after 34. */
static void geometry(const conf_case *c, geom *g)
{
    memset(g, 0, sizeof *g);
    static const int64_t n[G_COUNT][NSEQ] = {
        {3, 0, 5, 9}, {2, 2, 2, 2}, {4, 0, 70, 1}, {2, 0, 1, 3}, {130, 0, 1, 66}};
    static const int64_t cx[G_COUNT][NSEQ] = {
        {3, 0, 40, 77}, {2, 0, 19, 66}, {4, 0, 145, 30}, {2, 0, 9, 5}, {130, 0, 200, 100}};
    const int geo = c->p.attx.geo;
    g->S = NSEQ;
    for (int s = 0; s < NSEQ; ++s) {
        g->n[s] = geo == G_NEXT_N ? c->p.attx.next_n : n[geo][s], g->ctx[s] = cx[geo][s];
        g->cu[s + 1] = g->cu[s] + g->n[s];
    }
    g->T = g->cu[NSEQ];
    g->bs = c->p.attx.block_size;
    if (c->p.attx.contiguous) {
        g->num_blocks = NSEQ, g->max_blocks = 1;
        for (int s = 0; s < NSEQ; ++s)
            g->used[s] = 1, g->first_block[s] = s;
        return;
    }
    int64_t total = 0;
    for (int s = 0; s < NSEQ; ++s) {
        g->used[s] = (g->ctx[s] + g->bs - 1) / g->bs;
        g->first_block[s] = total;
        total += g->used[s];
        g->max_blocks = g->used[s] + 1 > g->max_blocks ? g->used[s] + 1 : g->max_blocks;
    }
    g->num_blocks = total + 2;
}

static mla_cache_desc cache_desc(const conf_case *c, const geom *g)
{
    const conf_p_attention_expanded *q = &c->p.attx;
    mla_cache_desc d = {(mla_cache_layout)q->layout,
                        q->dtype,
                        g->num_blocks,
                        g->bs,
                        dim_l(c),
                        dim_r(c),
                        (float)q->k_scale};
    return d;
}

/* ---------------------------------------------------------- the cases */

static const char *geo_name(int k)
{
    static const char *const geos[] = {"chunks", "next_n", "long", "short", "tiles"};
    return k >= 0 && k < G_COUNT ? geos[k] : "unknown";
}

static const conf_field fields[] = {
    CONF_ENUM(attx, layout, conf_name_cache_layout, MLA_CACHE_LAYOUT_COUNT),
    CONF_FIELD(attx, dtype, CONF_F_DTYPE),
    CONF_FIELD(attx, block_size, CONF_F_I64),
    CONF_FIELD(attx, L, CONF_F_I64),
    CONF_FIELD(attx, H, CONF_F_I64),
    CONF_ENUM(attx, geo, geo_name, G_COUNT),
    CONF_FIELD(attx, next_n, CONF_F_I32),
    CONF_FIELD(attx, w, CONF_F_DTYPE),
    CONF_FIELD(attx, contiguous, CONF_F_I32),
    CONF_FIELD(attx, no_lse, CONF_F_I32),
    CONF_FIELD(attx, q, CONF_F_DTYPE),
    CONF_FIELD(attx, o, CONF_F_DTYPE),
    CONF_FIELD(attx, k_scale, CONF_F_REAL),
    CONF_FIELD(attx, q_nope_lay, CONF_F_LAY),
    CONF_FIELD(attx, q_pe_lay, CONF_F_LAY),
    CONF_FIELD(attx, o_lay, CONF_F_LAY),
    CONF_FIELD(attx, lse_lay, CONF_F_LAY),
    CONF_FIELD(attx, w_lay, CONF_F_LAY),
    CONF_FIELD(attx, cache_lay, CONF_F_LAY),
    CONF_FIELD(attx, nope, CONF_F_I64),
    CONF_FIELD(attx, v, CONF_F_I64),
    CONF_FIELD(attx, R, CONF_F_I64),
    CONF_FIELD(attx, w_shift, CONF_F_I32),
};

static void label(conf_case *c)
{
    const conf_p_attention_expanded *q = &c->p.attx;
    const char *cn = mla_dtype_name(q->dtype), *wn = mla_dtype_name(q->w);
    const int views = q->q_nope_lay || q->q_pe_lay || q->o_lay || q->lse_lay || q->w_lay;
    char geo[16];
    snprintf(geo, sizeof geo, "%s%s", geo_name(q->geo),
             q->geo == G_NEXT_N ? (q->next_n > 1 ? "2" : "1") : "");
    char dims[48] = "";
    if (q->nope || q->v || q->R || q->L % 2)
        snprintf(dims, sizeof dims, " L%lld nope%lld v%lld R%lld", (long long)q->L,
                 (long long)dim_nope(c), (long long)dim_v(c), (long long)dim_r(c));
    if (q->w_shift)
        snprintf(dims + strlen(dims), sizeof dims - strlen(dims), " w2^-%d", (int)q->w_shift);
    snprintf(c->label, sizeof c->label, "%s %s bs%lld %s H%lld w%s q%s o%s%s%s%s%s",
             mla_cache_layout_name((mla_cache_layout)q->layout),
             strncmp(cn, "fp8_", 4) ? cn : cn + 4, (long long)q->block_size, geo, (long long)q->H,
             strncmp(wn, "fp8_", 4) ? wn : wn + 4, mla_dtype_name(q->q),
             q->o == MLA_DTYPE_BF16 ? "bf" : "f", q->contiguous ? " contig" : "",
             views ? " views" : "", q->no_lse ? " no-lse" : "", q->L == 512 ? " L512" : "");
    const size_t n = strlen(c->label);
    snprintf(c->label + n, sizeof c->label - n, "%s", dims);
}

/* Contiguous mode: the capacity, the longest context rounded up to 16 and
 * one tile more. */
static void contiguous_capacity(conf_case *c)
{
    geom g;
    geometry(c, &g);
    int64_t top = 0;
    for (int s = 0; s < NSEQ; ++s)
        top = g.ctx[s] > top ? g.ctx[s] : top;
    c->p.attx.block_size = (top + 15) / 16 * 16 + 16;
}

enum { F_CONTIG = 1, F_VIEWS = 2, F_NO_LSE = 4 };

/* An fp8 NORMAL / SHUFFLED cache's k_scale. The tiles cases take 0.3 (24
 * significant bits), so that code x scale is no bf16 value and the HIP
 * matrix bodies' three bf16 pieces of an fp32 rope key all count. */
static double k_scale_of(int n, int geo)
{
    return geo == G_TILES ? (double)0.3f : n % 2 ? 0.375 : 1.25;
}

static void make_case(conf_builder *b, mla_cache_layout layout, mla_dtype cdt, int64_t bs,
                      int64_t L, int64_t H, int geo, mla_dtype wdt, int flags, mla_dtype qdt,
                      mla_dtype odt, conf_case *out)
{
    conf_case c;
    memset(&c, 0, sizeof c);
    c.golden = -1;
    conf_p_attention_expanded *q = &c.p.attx;
    const int views = (flags & F_VIEWS) != 0;
    *q = (conf_p_attention_expanded){.layout = layout,
                                     .dtype = cdt,
                                     .block_size = bs,
                                     .L = L,
                                     .H = H,
                                     .geo = geo,
                                     .next_n = geo == G_NEXT_N ? 2 : 1,
                                     .w = wdt,
                                     .contiguous = (flags & F_CONTIG) != 0,
                                     .no_lse = (flags & F_NO_LSE) != 0,
                                     .q = qdt,
                                     .o = odt,
                                     .k_scale = k_scaled(layout, cdt) ? k_scale_of(b->n, geo) : 1.0,
                                     .q_nope_lay = views ? CONF_L_PAD : CONF_L_CONTIG,
                                     .q_pe_lay = views ? CONF_L_STEP2 : CONF_L_CONTIG,
                                     .o_lay = views ? CONF_L_COLMAJOR : CONF_L_CONTIG,
                                     .lse_lay = views ? CONF_L_PAD | CONF_L_OFFSET : CONF_L_CONTIG,
                                     .w_lay = views ? CONF_L_PAD : CONF_L_CONTIG,
                                     .cache_lay = CONF_L_CONTIG};
    if (q->contiguous)
        contiguous_capacity(&c);
    *out = c;
}

static void make(conf_builder *b, mla_cache_layout layout, mla_dtype cdt, int64_t bs, int64_t L,
                 int64_t H, int geo, mla_dtype wdt, int flags, mla_dtype qdt, mla_dtype odt)
{
    conf_case c;
    make_case(b, layout, cdt, bs, L, H, geo, wdt, flags, qdt, odt, &c);
    conf_push(b, &c);
}

/* A tiles case (several query blocks, key tiles and their tails; 3 heads,
 * bf16 kv_b_proj) with head dims nope, v, R (0: the default) and kv_b_proj
 * 2^-w_shift smaller. */
static void dims(conf_builder *b, mla_cache_layout layout, mla_dtype cdt, int64_t L, int64_t nope,
                 int64_t v, int64_t R, int w_shift, mla_dtype qdt, mla_dtype odt)
{
    conf_case c;
    make_case(b, layout, cdt, 16, L, 3, G_TILES, MLA_DTYPE_BF16, 0, qdt, odt, &c);
    c.p.attx.nope = nope, c.p.attx.v = v, c.p.attx.R = R, c.p.attx.w_shift = w_shift;
    conf_push(b, &c);
}

/* ------------------------------------------------------------ axes */

static const char *const layout_names[] = {"normal", "shuffled", "fp8_scaled"};
static const char *const block_names[] = {"<16", "16..63", ">=64"};
static const char *const next_n_names[] = {"1", ">=2"};

enum {
    X_Q,
    X_LAYOUT,
    X_CDT,
    X_BLOCK,
    X_O,
    X_W,
    X_BT,
    X_CU,
    X_LSE,
    X_NEXT,
    X_QNV,
    X_QPV,
    X_WV,
    X_OV,
    X_LSEV,
    X_CACHEV
};

#define NONE MLA_DTYPE_COUNT

/* The variant's tensors: q_nope, q_pe, cache, block_table, context_lens,
 * cu_q_lens, kv_b_proj.w, kv_b_proj.scale (fp8 only), o, lse. */
static const conf_axis axes[] = {
    CONF_AX_DT("q.dtype", 0, MLA_DTYPE_BF16, MLA_DTYPE_F32),
    CONF_AX_FL("cache.layout", layout, layout_names, MLA_CACHE_NORMAL, MLA_CACHE_SHUFFLED,
               MLA_CACHE_FP8_SCALED),
    CONF_AX_FL("cache.dtype", rule, NULL, MLA_DTYPE_BF16, CONF_FP8S),
    CONF_AX_CL("block_size", group, 1, block_names, 1, 16, 64),
    CONF_AX_DT("o.dtype", 8, MLA_DTYPE_F32, MLA_DTYPE_BF16),
    CONF_AX_DT("kv_b_proj.dtype", 6, MLA_DTYPE_BF16, MLA_DTYPE_FP8_E4M3FN),
    /* the optional tensors: paged, chunked rows (cu_q_lens), lse */
    CONF_AX_DT("block_table.dtype", 3, NONE, MLA_DTYPE_I32),
    CONF_AX_DT("cu_q_lens.dtype", 5, NONE, MLA_DTYPE_I32),
    CONF_AX_DT("lse.dtype", 9, NONE, MLA_DTYPE_F32),
    CONF_AX_CL("next_n", next_n, 0, next_n_names, 1, 2),
    CONF_AX_VW("q_nope.view", 0, CONF_VIEWS),
    CONF_AX_VW("q_pe.view", 1, CONF_VIEWS),
    CONF_AX_VW("kv_b_proj.view", 6, CONF_VIEWS),
    CONF_AX_VW("o.view", 8, CONF_VIEWS),
    CONF_AX_VW("lse.view", 9, CONF_VIEWS, MLA_ARG_ABSENT),
    CONF_AX_VW("cache.view", 2, MLA_ARG_DENSE, MLA_ARG_ROWS),
};

/* The cache's rules; contiguous mode holds a sequence in one block (the
 * designs' block is the longest context, >= 64); next_n counts the rows
 * only without cu_q_lens (the designs then pass 1); lse absent exactly when
 * not given. */
static int legal(const conf_point *p)
{
    return conf_cache_legal(p, X_LAYOUT, X_CDT, X_BLOCK) &&
           CONF_RULE(p, X_BT, X_BLOCK, CONF_VAL(p, X_BT) != NONE || CONF_VAL(p, X_BLOCK) >= 64) &&
           CONF_RULE(p, X_CU, X_NEXT, CONF_VAL(p, X_CU) == NONE || CONF_VAL(p, X_NEXT) == 1) &&
           CONF_RULE(p, X_LSE, X_LSEV,
                     (CONF_VAL(p, X_LSE) == NONE) == (CONF_VAL(p, X_LSEV) == MLA_ARG_ABSENT));
}

static void derive(mla_variant *v)
{
    v->in_dtype = v->arg_dtype[0];
    v->out_dtype = v->arg_dtype[8];
    v->arg_dtype[1] = v->arg_dtype[0]; /* q_pe in q_nope's dtype */
    v->arg_dtype[7] = v->arg_dtype[6] == MLA_DTYPE_BF16 ? NONE : MLA_DTYPE_F32;
    v->arg_view[7] = v->arg_dtype[6] == MLA_DTYPE_BF16 ? MLA_ARG_ABSENT : MLA_ARG_DENSE;
}

const conf_op_axes conf_axes_attention_expanded = {
    .op = MLA_OP_ATTENTION_EXPANDED,
    .axes = axes,
    .naxes = (int)(sizeof axes / sizeof axes[0]),
    .base = {.rows = 4,
             .cols = 3,
             .nargs = 10,
             .arg_dtype = {[2] = MLA_DTYPE_U8, [4] = MLA_DTYPE_I32}},
    .derive = derive,
    .legal = legal,
    .full = 1u << X_LAYOUT | 1u << X_CDT};

/* L 128, R 16, 3 heads: the chunks (or next_n rows each without cu_q_lens),
 * every third one the short context. */
static void design(const conf_point *pt, int k, conf_case *c)
{
    conf_p_attention_expanded *q = &c->p.attx;
    const mla_cache_layout layout = (mla_cache_layout)CONF_VAL(pt, X_LAYOUT);
    const mla_dtype cdt = (mla_dtype)CONF_VAL(pt, X_CDT);
    const int64_t cls = CONF_VAL(pt, X_BLOCK), lsev = CONF_VAL(pt, X_LSEV);
    const int rows = CONF_VAL(pt, X_CU) == NONE;
    memset(q, 0, sizeof *q);
    q->layout = layout;
    q->dtype = cdt;
    q->block_size = cls >= 64 ? 64 : cls >= 16 ? 16 : 1;
    q->L = 128;
    q->H = 3;
    q->contiguous = CONF_VAL(pt, X_BT) == NONE;
    q->geo = rows ? G_NEXT_N : !q->contiguous && k % 3 == 2 ? G_SHORT : G_CHUNKS;
    q->next_n = (int32_t)CONF_VAL(pt, X_NEXT);
    q->w = (mla_dtype)CONF_VAL(pt, X_W);
    q->no_lse = CONF_VAL(pt, X_LSE) == NONE;
    q->q = (mla_dtype)CONF_VAL(pt, X_Q);
    q->o = (mla_dtype)CONF_VAL(pt, X_O);
    q->k_scale = k_scaled(layout, cdt) ? (k % 2 ? 0.375 : 1.25) : 1.0;
    q->q_nope_lay = conf_lay_of_view(CONF_VAL(pt, X_QNV), 3, k);
    q->q_pe_lay = conf_lay_of_view(CONF_VAL(pt, X_QPV), 3, k + 1);
    q->w_lay = conf_lay_of_view(CONF_VAL(pt, X_WV), 2, k);
    q->o_lay = conf_lay_of_view(CONF_VAL(pt, X_OV), 3, k + 1);
    q->lse_lay = lsev == MLA_ARG_ABSENT ? 0 : conf_lay_of_view(lsev, 2, k);
    q->cache_lay = CONF_VAL(pt, X_CACHEV) == MLA_ARG_ROWS ? CONF_L_PAD : CONF_L_CONTIG;
    if (q->contiguous)
        contiguous_capacity(c);
    c->note = " (pairwise)";
}

static int build(conf_case *cases, int cap)
{
    conf_builder b = {.cases = cases, .cap = cap, .suite = &conf_suite_attention_expanded};
    const mla_dtype bf = MLA_DTYPE_BF16, f32 = MLA_DTYPE_F32, fn = MLA_DTYPE_FP8_E4M3FN,
                    fnuz = MLA_DTYPE_FP8_E4M3FNUZ;
    const mla_cache_layout N = MLA_CACHE_NORMAL, SH = MLA_CACHE_SHUFFLED, F8 = MLA_CACHE_FP8_SCALED;
    /* caches x block sizes, the other axes rotating */
    make(&b, N, bf, 1, 128, 3, G_CHUNKS, bf, 0, bf, f32);
    make(&b, N, bf, 16, 128, 16, G_NEXT_N, bf, F_VIEWS, f32, bf);
    make(&b, N, bf, 64, 128, 1, G_LONG, fn, 0, bf, bf);
    make(&b, N, fn, 1, 128, 16, G_LONG, bf, F_NO_LSE, f32, f32);
    make(&b, N, fn, 16, 128, 3, G_CHUNKS, fn, F_VIEWS, bf, f32);
    make(&b, N, fnuz, 64, 128, 3, G_NEXT_N, bf, 0, bf, bf);
    make(&b, SH, bf, 16, 128, 3, G_LONG, bf, 0, bf, f32);
    make(&b, SH, bf, 64, 128, 16, G_CHUNKS, fn, F_NO_LSE, f32, bf);
    make(&b, SH, fn, 16, 128, 1, G_NEXT_N, bf, F_VIEWS, bf, f32);
    make(&b, SH, fnuz, 64, 128, 3, G_CHUNKS, bf, 0, f32, f32);
    make(&b, F8, fn, 1, 128, 3, G_NEXT_N, fn, 0, bf, f32);
    make(&b, F8, fn, 64, 128, 16, G_LONG, bf, F_VIEWS, bf, bf);
    make(&b, F8, fnuz, 16, 128, 3, G_CHUNKS, bf, 0, f32, f32);
    /* 128 heads; contiguous mode; DeepSeek's sizes */
    make(&b, N, bf, 16, 128, 128, G_SHORT, bf, 0, bf, f32);
    make(&b, N, bf, 0, 128, 3, G_CHUNKS, bf, F_CONTIG, bf, f32);
    make(&b, F8, fn, 0, 128, 16, G_NEXT_N, fn, F_CONTIG | F_NO_LSE, f32, bf);
    make(&b, N, bf, 64, 512, 2, G_CHUNKS, bf, 0, bf, bf);
    make(&b, F8, fn, 64, 512, 1, G_NEXT_N, fn, F_VIEWS, bf, f32);
    /* the matrix bodies' block and tile edges: bf16 keys, fp32 rope keys
     * (fp8 caches: three bf16 pieces), heads 1 to 16, both head shapes */
    make(&b, N, bf, 16, 512, 2, G_TILES, bf, 0, bf, bf);
    make(&b, N, fn, 64, 512, 1, G_TILES, fn, F_VIEWS, bf, f32);
    make(&b, F8, fn, 16, 128, 16, G_TILES, bf, F_NO_LSE, bf, bf);
    make(&b, N, fnuz, 1, 128, 3, G_TILES, fn, F_VIEWS, bf, f32);
    make(&b, SH, fn, 64, 128, 3, G_TILES, bf, 0, bf, f32);
    make(&b, N, bf, 0, 128, 1, G_TILES, bf, F_CONTIG, bf, f32);
    make(&b, N, bf, 64, 128, 3, G_TILES, bf, 0, f32, f32);
    /* the CPU kernels' edges: head dims whose score row (nope + R) is odd or
     * no multiple of 16 and v no multiple of 16 (vdpbf16ps pairs across the
     * nope / rope seam, padded key and value rows), on the bf16 pairs (bf16
     * q and o) and the FMA tiles (f32), an fp8 cache (fp32 rope rows); an
     * odd L (latent rows the decompression cannot read as bf16 pairs); tiny
     * kv_b_proj values (keys and values below the vdpbf16ps tests' limits:
     * P @ V, then the scores too, on the FMA tiles) */
    dims(&b, N, bf, 128, 21, 24, 16, 0, bf, bf);
    dims(&b, N, bf, 128, 40, 20, 10, 0, f32, f32);
    dims(&b, N, fn, 128, 21, 24, 16, 0, bf, bf);
    dims(&b, N, bf, 129, 32, 32, 16, 0, bf, bf);
    dims(&b, N, bf, 128, 0, 0, 0, 66, bf, bf);
    dims(&b, N, bf, 128, 0, 0, 0, 112, bf, bf);
    conf_push_design(&b, &conf_axes_attention_expanded, design);
    return b.n;
}
/* q: |q| in [2^-3, 2); kv_b_proj: bf16 values in [2^-7, 2^-3), or fp8 codes
 * of [2^-3, 2) times block scales 2^-4 (1 + k/8): keys and values of a few
 * tenths, scores of a few units. */
static void fill_inputs(conf_problem *p, const conf_case *c)
{
    const int qs[2] = {AQN, AQP};
    for (int i = 0; i < 2; ++i) {
        const conf_arg *a = &p->arg[qs[i]];
        for (int64_t k = 0; k < conf_numel(a); ++k) {
            const uint64_t r = conf_rng(c->seed, 44 + (uint64_t)i, (uint64_t)k, 0);
            conf_set_value(p, qs[i], k,
                           conf_decode_value(MLA_DTYPE_BF16, conf_moderate_code(MLA_DTYPE_BF16, r)) *
                               (a->t.dtype == MLA_DTYPE_F32
                                    ? 1.0 + (double)((r >> 48) & 0xFF) / 4096.0
                                    : 1.0));
        }
    }
    const conf_arg *w = &p->arg[AW];
    const mla_dtype wdt = w->t.dtype;
    for (int64_t k = 0; k < conf_numel(w); ++k) {
        const uint64_t r = conf_rng(c->seed, 46, (uint64_t)k, 0);
        const uint64_t code = conf_moderate_code(wdt, r);
        if (wdt == MLA_DTYPE_BF16)
            conf_set_value(p, AW, k,
                           ldexp(conf_decode_value(MLA_DTYPE_BF16, code), -4 - c->p.attx.w_shift));
        else
            conf_put_bits(conf_elem_at(w, conf_arg_elem0(w), k), code, 1);
    }
    for (int64_t k = 0; wdt != MLA_DTYPE_BF16 && k < conf_numel(&p->arg[AWS]); ++k)
        conf_set_value(p, AWS, k, 0.0625 * (1.0 + (double)(k % 8) / 8.0));
}

static mla_status add_args(conf_problem *p, const conf_case *c, const geom *g)
{
    const int64_t H = c->p.attx.H, L = dim_l(c), R = dim_r(c), T = g->T;
    const int64_t nope = dim_nope(c), v = dim_v(c), N = H * (nope + v);
    const int64_t empty[1] = {0};
    const mla_dtype wdt = (mla_dtype)c->p.attx.w, qdt = c->p.attx.q;
    int64_t bb = 0;
    mla_cache_desc cd = cache_desc(c, g);
    mla_status st = mla_cache_block_bytes(&cd, &bb);
#define ADD(expr) st = st == MLA_OK ? (expr) : st
    ADD(conf_add_arg(p, "q_nope", CONF_IN, qdt, 3, (int64_t[]){T, H, nope}, c->p.attx.q_nope_lay));
    ADD(conf_add_arg(p, "q_pe", CONF_IN, qdt, 3, (int64_t[]){T, H, R}, c->p.attx.q_pe_lay));
    const int64_t cst[2] = {bb + ((c->p.attx.cache_lay & CONF_L_PAD) ? CACHE_PAD : 0), 1};
    ADD(conf_add_view(p, "cache", CONF_IN, MLA_DTYPE_U8, 2, (int64_t[]){g->num_blocks, bb}, cst,
                      0));
    if (c->p.attx.contiguous)
        ADD(conf_add_arg(p, "block_table", CONF_IN, MLA_DTYPE_I32, 1, empty, 0));
    else
        ADD(conf_add_arg(p, "block_table", CONF_IN, MLA_DTYPE_I32, 2,
                         (int64_t[]){g->S, g->max_blocks}, 0));
    ADD(conf_add_arg(p, "context_lens", CONF_IN, MLA_DTYPE_I32, 1, (int64_t[]){g->S}, 0));
    ADD(conf_add_arg(p, "cu_q_lens", CONF_IN, MLA_DTYPE_I32, 1,
                     with_cu(c) ? (int64_t[]){g->S + 1} : empty, 0));
    ADD(conf_add_arg(p, "kv_b_proj", CONF_IN, wdt, 2, (int64_t[]){N, L}, c->p.attx.w_lay));
    ADD(conf_add_arg(p, "kv_b_scale", CONF_IN, MLA_DTYPE_F32, 2,
                     wdt == MLA_DTYPE_BF16 ? (int64_t[]){0, 0}
                                           : (int64_t[]){(N + 127) / 128, (L + 127) / 128},
                     0));
    ADD(conf_add_arg(p, "o", CONF_OUT, c->p.attx.o, 3, (int64_t[]){T, H, v}, c->p.attx.o_lay));
    if (c->p.attx.no_lse)
        ADD(conf_add_arg(p, "lse", CONF_OUT, MLA_DTYPE_F32, 1, empty, 0));
    else
        ADD(conf_add_arg(p, "lse", CONF_OUT, MLA_DTYPE_F32, 2, (int64_t[]){T, H},
                         c->p.attx.lse_lay));
    ADD(conf_add_arg(p, "o_absorbed", CONF_OUT, MLA_DTYPE_F32, 3,
                     forms(c) ? (int64_t[]){T, H, v} : (int64_t[]){0, 0, 0}, 0));
#undef ADD
    return st;
}

static mla_status forms_tol(const conf_case *c, const conf_problem *p, double *tol_o,
                            double *tol_lse, double *tol_abs, double *exact);

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
    conf_fill_cache_written(p, ACACHE, c->seed, (mla_cache_layout)c->p.attx.layout,
                            (mla_dtype)c->p.attx.dtype, g.bs, dim_l(c), dim_r(c));
    conf_fill_block_table(p, c->p.attx.contiguous ? -1 : ABT, c->seed, g.num_blocks, NSEQ,
                          g.max_blocks, g.used, g.first_block, phys);
    free(phys);
    for (int64_t s = 0; s < NSEQ; ++s)
        conf_set_value(p, ACTX, s, (double)g.ctx[s]);
    for (int64_t s = 0; with_cu(c) && s <= NSEQ; ++s)
        conf_set_value(p, ACU, s, (double)g.cu[s]);
    fill_inputs(p, c);
    /* the bounds, from the inputs alone (owned by the problem) */
    const int no_lse = c->p.attx.no_lse != 0; /* the lse bound is still computed */
    double *tol_o = conf_tol_alloc(p, AO, 1.0);
    double *tol_lse = no_lse ? calloc((size_t)(g.T * c->p.attx.H), sizeof *tol_lse)
                             : conf_tol_alloc(p, ALSE, 1.0);
    const int both = forms(c);
    double *tol_abs = both ? conf_tol_alloc(p, AOABS, 1.0) : NULL;
    double *exact = both ? calloc((size_t)conf_numel(&p->arg[AOABS]) + 1, sizeof *exact) : NULL;
    p->arg[AO].bound.zero_sign_free = p->arg[ALSE].bound.zero_sign_free = 1;
    st = !tol_o || !tol_lse || (both && (!tol_abs || !exact))
             ? MLA_ERR_OUT_OF_MEMORY
             : forms_tol(c, p, tol_o, tol_lse, tol_abs, exact);
    free(exact);
    if (no_lse)
        free(tol_lse);
    if (st != MLA_OK)
        snprintf(err, errlen, "cannot compute the bounds (%s)", mla_status_name(st));
    return st;
}

/* -------------------------------------------------------------- exec */

/* The absorbed chain on ctx: q_cat = [q_nope W_kc | q_pe] (f32), the
 * absorbed attention into o_lat (f32), o = o_lat W_vc. */
static mla_status absorbed(mla_context *ctx, const conf_case *c, const mla_attention_desc *d,
                           const mla_tensor *t, const mla_attention_args *base)
{
    const int64_t T = t[AQN].shape[0], H = c->p.attx.H, L = dim_l(c), R = dim_r(c);
    const int64_t nope = dim_nope(c), v = dim_v(c), D = L + R;
    const mla_memory mem = mla_context_memory(ctx);
    void *qbuf = NULL, *obuf = NULL, *ws = NULL;
    mla_attention_plan *plan = NULL;
    mla_status st = mla_malloc(ctx, (size_t)(T * H * D * 4), &qbuf);
    if (st == MLA_OK)
        st = mla_malloc(ctx, (size_t)(T * H * L * 4), &obuf);
    const mla_tensor *w = &t[AW];
    const size_t wes = mla_dtype_size(w->dtype);
    mla_tensor x, y, wkc, wvc, qpe_dst, q_cat, o_lat;
    x = t[AQN];
    mla_tensor_transpose(&x, 0, 1); /* [H, T, nope] */
    mla_tensor_init(&wkc, w->data, w->dtype, mem, 3, (int64_t[]){H, nope, L});
    wkc.stride[0] = (nope + v) * w->stride[0], wkc.stride[1] = w->stride[0];
    wkc.stride[2] = w->stride[1];
    mla_tensor_init(&q_cat, qbuf, MLA_DTYPE_F32, mem, 3, (int64_t[]){T, H, D});
    y = q_cat;
    y.shape[2] = L;
    mla_tensor_transpose(&y, 0, 1);
    if (st == MLA_OK)
        st = mla_batched_gemm(ctx, &x, &wkc, 1.0f, &y);
    qpe_dst = q_cat;
    qpe_dst.data = (float *)qbuf + L;
    qpe_dst.shape[2] = R;
    if (st == MLA_OK)
        st = mla_convert(ctx, &t[AQP], &qpe_dst, MLA_SATURATE);
    mla_tensor_init(&o_lat, obuf, MLA_DTYPE_F32, mem, 3, (int64_t[]){T, H, L});
    mla_attention_args a = *base;
    a.q = &q_cat;
    a.o = &o_lat;
    a.lse = NULL;
    if (st == MLA_OK)
        st = mla_attention_plan_create(ctx, d, &a, &plan);
    const int64_t wb = st == MLA_OK ? mla_attention_plan_workspace_bytes(plan) : 0;
    mla_tensor tws;
    if (st == MLA_OK && wb > 0 && (st = mla_malloc(ctx, (size_t)wb, &ws)) == MLA_OK) {
        mla_tensor_init(&tws, ws, MLA_DTYPE_U8, mem, 1, (int64_t[]){wb});
        a.workspace = &tws;
    }
    if (st == MLA_OK)
        st = mla_attention_run(ctx, plan, &a);
    x = o_lat;
    mla_tensor_transpose(&x, 0, 1); /* [H, T, L] */
    wvc = wkc;
    wvc.data = (uint8_t *)w->data + (size_t)(nope * w->stride[0]) * wes;
    wvc.shape[1] = L, wvc.shape[2] = v;
    wvc.stride[1] = w->stride[1], wvc.stride[2] = w->stride[0];
    y = t[AOABS];
    mla_tensor_transpose(&y, 0, 1);
    if (st == MLA_OK)
        st = mla_batched_gemm(ctx, &x, &wvc, 1.0f, &y);
    mla_context_synchronize(ctx);
    mla_attention_plan_destroy(plan);
    mla_free(ctx, ws);
    mla_free(ctx, qbuf);
    mla_free(ctx, obuf);
    return st;
}

static mla_status exec(mla_context *ctx, const conf_case *c, mla_tensor *t)
{
    geom g;
    geometry(c, &g);
    mla_attention_expanded_desc d;
    memset(&d, 0, sizeof d);
    d.heads = c->p.attx.H;
    d.nope = dim_nope(c);
    d.v = dim_v(c);
    d.cache = cache_desc(c, &g);
    d.paged = !c->p.attx.contiguous;
    d.q_dtype = c->p.attx.q;
    d.out_dtype = c->p.attx.o;
    d.softmax_scale = softmax_scale(c);
    d.next_n = c->p.attx.next_n;
    const mla_weight w = {t[AW], t[AWS]};
    int64_t total = 0, wb = 0;
    for (int s = 0; s < NSEQ; ++s)
        total += g.ctx[s];
    mla_status st = mla_attention_expanded_workspace_bytes(ctx, &d, g.S, total, &wb);
    void *ws = NULL;
    if (st == MLA_OK)
        st = mla_malloc(ctx, (size_t)(wb > 0 ? wb : 1), &ws);
    mla_tensor tws;
    mla_tensor_init(&tws, ws, MLA_DTYPE_U8, mla_context_memory(ctx), 1, (int64_t[]){wb});
    const mla_attention_expanded_args a = {&t[AQN],
                                           &t[AQP],
                                           &t[ACACHE],
                                           d.paged ? &t[ABT] : NULL,
                                           &t[ACTX],
                                           with_cu(c) ? &t[ACU] : NULL,
                                           &w,
                                           &t[AO],
                                           c->p.attx.no_lse ? NULL : &t[ALSE],
                                           &tws};
    if (st == MLA_OK)
        st = mla_attention_expanded(ctx, &d, &a);
    char param[64], why[256];
    snprintf(param, sizeof param, "%s", mla_context_error_param(ctx));
    snprintf(why, sizeof why, "%s", mla_context_error_detail(ctx));
    mla_context_synchronize(ctx);
    mla_free(ctx, ws);
    if (st == MLA_OK && forms(c)) {
        mla_attention_desc ad;
        memset(&ad, 0, sizeof ad);
        ad.heads = d.heads, ad.cache = d.cache, ad.paged = d.paged;
        ad.q_dtype = MLA_DTYPE_F32, ad.q_scale = 1.0f, ad.out_dtype = MLA_DTYPE_F32;
        ad.softmax_scale = d.softmax_scale, ad.next_n = d.next_n, ad.num_splits = 1;
        mla_attention_args base;
        memset(&base, 0, sizeof base);
        base.cache = &t[ACACHE];
        base.block_table = a.block_table;
        base.context_lens = a.context_lens;
        base.cu_q_lens = a.cu_q_lens;
        st = absorbed(ctx, c, &ad, t, &base);
        snprintf(param, sizeof param, "%s", mla_context_error_param(ctx));
        snprintf(why, sizeof why, "absorbed chain: %s", mla_context_error_detail(ctx));
    }
    if (st != MLA_OK)
        mla_fail(ctx, st, param, "%s", why);
    return st;
}

/* ------------------------------------------------------------ bounds */

/* The exact decompression of sequence s, from the reference's exact cache
 * reader: kv [c][N] and its magnitudes M [c][N] (sum |w| |c|), pe [c][R],
 * and the latent rows lat [c][L]. */
typedef struct seq_keys {
    double *kv, *M, *pe, *lat;
} seq_keys;

static double weight(const conf_problem *p, int64_t n, int64_t d)
{
    const double w = conf_in_value(&p->arg[AW], n * p->arg[AW].t.shape[1] + d);
    if (p->arg[AW].t.dtype == MLA_DTYPE_BF16)
        return w;
    const int64_t sc = p->arg[AWS].t.shape[1];
    return w * conf_in_value(&p->arg[AWS], (n / 128) * sc + d / 128);
}

static void decompress(const conf_case *c, const conf_problem *p, const geom *g, int64_t s,
                       const double *W, seq_keys *k)
{
    const int64_t L = dim_l(c), R = dim_r(c), N = c->p.attx.H * (dim_nope(c) + dim_v(c));
    const mla_cache_desc cd = cache_desc(c, g);
    mla_tensor cache;
    mla_tensor_init(&cache, conf_arg_elem0(&p->arg[ACACHE]), MLA_DTYPE_U8, MLA_MEMORY_HOST, 2,
                    p->arg[ACACHE].t.shape);
    cache.stride[0] = p->arg[ACACHE].t.stride[0];
    double *row = malloc((size_t)(L + R) * sizeof *row);
    for (int64_t t = 0; row && t < g->ctx[s]; ++t) {
        const int64_t blk =
            c->p.attx.contiguous
                ? s
                : (int64_t)conf_in_value(&p->arg[ABT], s * g->max_blocks + t / g->bs);
        mla_ref_cache_read_row(&cd, &cache, blk, t % g->bs, row);
        for (int64_t n = 0; n < N; ++n) {
            double acc = 0.0, mag = 0.0;
            for (int64_t d = 0; d < L; ++d) {
                acc += W[n * L + d] * row[d];
                mag += fabs(W[n * L + d] * row[d]);
            }
            k->kv[t * N + n] = acc, k->M[t * N + n] = mag;
        }
        memcpy(k->pe + t * R, row + L, (size_t)R * sizeof *row);
        memcpy(k->lat + t * L, row, (size_t)L * sizeof *row);
    }
    free(row);
}

/* Per-value bounds of the expanded o and lse against the exact value
 * (tol_o, tol_lse), and of the absorbed chain's o (tol_abs) when asked. */
static mla_status forms_tol(const conf_case *c, const conf_problem *p, double *tol_o,
                            double *tol_lse, double *tol_abs, double *exact)
{
    geom g;
    geometry(c, &g);
    const int64_t H = c->p.attx.H, L = dim_l(c), R = dim_r(c), nope = dim_nope(c), v = dim_v(c);
    const int64_t N = H * (nope + v);
    int64_t cmax = 1; /* the longest context */
    for (int s = 0; s < NSEQ; ++s)
        cmax = g.ctx[s] > cmax ? g.ctx[s] : cmax;
    const double sc = softmax_scale(c);
    const double ukv = c->p.attx.q == MLA_DTYPE_BF16 ? 0x1p-8 : U32;
    const double gk = gam((double)L + 4.0, U32), g64 = gam((double)L + 1.0, U64);
    seq_keys k = {
        malloc((size_t)(cmax * N) * sizeof(double)), malloc((size_t)(cmax * N) * sizeof(double)),
        malloc((size_t)(cmax * R) * sizeof(double)), malloc((size_t)(cmax * L) * sizeof(double))};
    double *W = malloc((size_t)(N * L) * sizeof *W);
    double *qn = malloc((size_t)nope * sizeof *qn), *qp = malloc((size_t)R * sizeof *qp);
    double *ql = malloc((size_t)L * sizeof *ql), *eq = malloc((size_t)L * sizeof *eq);
    double *score = malloc(cmax * sizeof *score), *mag = malloc(cmax * sizeof *mag);
    double *serr = malloc(cmax * sizeof *serr), *verr = malloc((size_t)(cmax * v) * sizeof *verr);
    double *vx = malloc((size_t)(cmax * v) * sizeof *vx);
    const double **vrow = malloc(cmax * sizeof *vrow), **erow = malloc(cmax * sizeof *erow);
    double *tlat = malloc((size_t)L * sizeof *tlat), *olat = malloc((size_t)L * sizeof *olat);
    mla_status st = MLA_OK;
    if (!k.kv || !k.M || !k.pe || !k.lat || !W || !qn || !qp || !ql || !eq || !score || !mag ||
        !serr || !verr || !vx || !vrow || !erow || !tlat || !olat)
        st = MLA_ERR_OUT_OF_MEMORY;
    for (int64_t n = 0; st == MLA_OK && n < N; ++n)
        for (int64_t d = 0; d < L; ++d)
            W[n * L + d] = weight(p, n, d);
    for (int64_t s = 0; st == MLA_OK && s < NSEQ; ++s) {
        if (g.n[s] == 0)
            continue;
        decompress(c, p, &g, s, W, &k);
        for (int64_t r = g.cu[s]; r < g.cu[s + 1]; ++r) {
            const int64_t pos = g.ctx[s] - g.n[s] + (r - g.cu[s]), nv = g.ctx[s] ? pos + 1 : 0;
            for (int64_t h = 0; h < H; ++h) {
                const int64_t base = h * (nope + v);
                for (int64_t i = 0; i < nope; ++i)
                    qn[i] = conf_in_value(&p->arg[AQN], (r * H + h) * nope + i);
                for (int64_t i = 0; i < R; ++i)
                    qp[i] = conf_in_value(&p->arg[AQP], (r * H + h) * R + i);
                for (int64_t t = 0; t < nv; ++t) {
                    const double *kn = k.kv + t * N + base, *mk = k.M + t * N + base;
                    double dot = 0.0, m = 0.0, e = 0.0;
                    for (int64_t i = 0; i < nope; ++i) {
                        const double ek = gk * mk[i] * (1.0 + ukv) + ukv * fabs(kn[i]);
                        dot += qn[i] * kn[i];
                        m += fabs(qn[i]) * (fabs(kn[i]) + ek);
                        e += fabs(qn[i]) * (ek + g64 * mk[i]);
                    }
                    for (int64_t i = 0; i < R; ++i) {
                        dot += qp[i] * k.pe[t * R + i];
                        m += fabs(qp[i] * k.pe[t * R + i]);
                    }
                    score[t] = sc * dot, mag[t] = sc * m, serr[t] = sc * e;
                    for (int64_t j = 0; j < v; ++j) {
                        const double x = k.kv[t * N + base + nope + j];
                        const double mv = k.M[t * N + base + nope + j];
                        vx[t * v + j] = x;
                        verr[t * v + j] = gk * mv * (1.0 + ukv) + ukv * fabs(x) + g64 * mv;
                    }
                    vrow[t] = vx + t * v, erow[t] = verr + t * v;
                }
                conf_attn_row row = {nv, nope + R, v, score, mag, vrow, 0, 0.0, serr, erow};
                conf_attention_tol(&row, tol_o + (r * H + h) * v, tol_lse + r * H + h);
                if (!tol_abs)
                    continue;
                /* exact o, for the forms' ulp; then the absorbed chain */
                double mx = -INFINITY, Z = 0.0;
                for (int64_t t = 0; t < nv; ++t)
                    mx = fmax(mx, score[t]);
                for (int64_t t = 0; t < nv; ++t)
                    Z += exp(score[t] - mx);
                for (int64_t j = 0; j < v; ++j) {
                    double o = 0.0;
                    for (int64_t t = 0; t < nv; ++t)
                        o += exp(score[t] - mx) / Z * vx[t * v + j];
                    exact[(r * H + h) * v + j] = o;
                }
                for (int64_t d = 0; d < L; ++d) { /* q_lat and its f32 GEMM error */
                    double acc = 0.0, mq = 0.0;
                    for (int64_t i = 0; i < nope; ++i) {
                        acc += qn[i] * W[(base + i) * L + d];
                        mq += fabs(qn[i] * W[(base + i) * L + d]);
                    }
                    ql[d] = acc;
                    eq[d] = conf_gemm_tol(nope, mq) + U32 * (fabs(acc) + conf_gemm_tol(nope, mq));
                }
                for (int64_t t = 0; t < nv; ++t) {
                    double m = 0.0, e = 0.0;
                    for (int64_t d = 0; d < L; ++d) {
                        m += (fabs(ql[d]) + eq[d]) * fabs(k.lat[t * L + d]);
                        e += eq[d] * fabs(k.lat[t * L + d]);
                    }
                    for (int64_t i = 0; i < R; ++i)
                        m += fabs(qp[i] * k.pe[t * R + i]);
                    mag[t] = sc * m, serr[t] = sc * e, vrow[t] = k.lat + t * L;
                }
                conf_attn_row arow = {nv, L + R, L, score, mag, vrow, 0, 0.0, serr, NULL};
                double lse_unused;
                conf_attention_tol(&arow, tlat, &lse_unused);
                for (int64_t d = 0; d < L; ++d) { /* exact o_lat */
                    double o = 0.0;
                    for (int64_t t = 0; t < nv; ++t)
                        o += exp(score[t] - mx) / Z * k.lat[t * L + d];
                    olat[d] = o;
                }
                for (int64_t j = 0; j < v; ++j) { /* o = o_lat W_vc in f32, from an f32 o_lat */
                    double prop = 0.0, mo = 0.0;
                    for (int64_t d = 0; d < L; ++d) {
                        const double wv = fabs(W[(base + nope + j) * L + d]);
                        const double e = tlat[d] + U32 * (fabs(olat[d]) + tlat[d]);
                        prop += e * wv;
                        mo += (fabs(olat[d]) + e) * wv;
                    }
                    tol_abs[(r * H + h) * v + j] = prop + conf_gemm_tol(L, mo) +
                                                   U32 * (fabs(exact[(r * H + h) * v + j]) + prop);
                }
            }
        }
    }
    free(k.kv), free(k.M), free(k.pe), free(k.lat), free(W), free(qn), free(qp), free(ql);
    free(eq), free(score), free(mag), free(serr), free(verr), free(vx), free((void *)vrow);
    free((void *)erow), free(tlat), free(olat);
    return st;
}

/* The forms against each other on the tested backend: |o_absorbed - o| <=
 * tol_abs + tol_o + one ulp of o's dtype (its rounding) at max(|o_abs|, |o|). */
static void compare_forms(const conf_problem *p, const unsigned char *got_o,
                          const unsigned char *got_abs, const double *tol_o, const double *tol_abs,
                          conf_cmp *r)
{
    const conf_arg *ao = &p->arg[AO], *aa = &p->arg[AOABS];
    const int64_t n = conf_numel(aa);
    memset(r, 0, sizeof *r);
    r->unit = "x bound";
    const size_t es = mla_dtype_size(ao->t.dtype);
    for (int64_t k = 0; k < n; ++k) {
        const double x = conf_decode_value(
            ao->t.dtype,
            conf_load_bits(conf_elem_at(ao, (unsigned char *)got_o + ao->offset * es, k), es));
        const double y = conf_decode_value(
            MLA_DTYPE_F32,
            conf_load_bits(conf_elem_at(aa, (unsigned char *)got_abs + aa->offset * 4, k), 4));
        const double lim = tol_o[k] + tol_abs[k] + conf_ulp(ao->t.dtype, fmax(fabs(x), fabs(y)));
        ++r->count;
        r->max_err = fmax(r->max_err, fabs(x - y) / lim);
        if (fabs(x - y) <= lim)
            continue;
        if (r->mismatches++ == 0)
            snprintf(r->first, sizeof r->first,
                     "o_absorbed[%lld] = %.9g, expanded o = %.9g, |diff| %.3g > bound %.3g",
                     (long long)k, y, x, fabs(x - y), lim);
    }
}

/* o and lse: the generic comparison under the setup's bounds; o_absorbed
 * against the same backend's expanded o. */
static int compare(const conf_case *c, const conf_problem *p, int i, unsigned char *const *got,
                   unsigned char *const *want, conf_cmp *r)
{
    (void)want;
    if (i != AOABS)
        return 0;
    memset(r, 0, sizeof *r);
    if (forms(c))
        compare_forms(p, got[AO], got[AOABS], p->arg[AO].bound.tol, p->arg[AOABS].bound.tol, r);
    return 1;
}

const conf_suite conf_suite_attention_expanded = {.name = "attention_expanded",
                                                  .op = MLA_OP_ATTENTION_EXPANDED,
                                                  .build = build,
                                                  .setup = setup,
                                                  .exec = exec,
                                                  .compare = compare,
                                                  .label = label,
                                                  .fields = fields,
                                                  .nfields = CONF_NFIELDS(fields)};
