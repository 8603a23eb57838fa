/* The DSA indexer's scoring (MLA.md section 6): paged MQA logits read from the
 * fp8 K cache in place, and the top-k of the logits.
 *
 * indexer_logits: next_n 1 and 2; context lengths equal to next_n, not a
 * multiple of the block size, and a multiple of it; block sizes 1, 16, 64
 * with the layout AUTO, forced NORMAL and forced SHUFFLE; Hi = 64 and odd
 * head counts (1, 3, 7); both fp8 flavours; strided q, w and logits; a
 * scattered block table. Positions at and beyond each row's causal bound
 * must be -inf on both sides (the class is compared exactly); the values are
 * held to the bound below.
 *
 * topk: many ties (a handful of values, +0 against -0), rows of -inf, NaN,
 * rows shorter than k (-1 padding), k = 1 and k = N, and k = 2048 over rows
 * of 4k to 8k values. The indices must be IDENTICAL across backends (ties
 * to the lower index, MLA.md section 6). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "conformance/cases_indexer.h"
#include "conformance/cover.h"

#define U32 0x1p-24 /* fp32 unit roundoff */
#define U64 0x1p-53

static double gamma_n(double n, double u) { return n * u / (1.0 - n * u); }

/* ------------------------------------------------------------- logits
 *
 * The bound. Row r (sequence b, query token j), key n, heads h < Hi, dims
 * i < 128, s = k_scale[n], and the exact value
 *
 *     L = s * sum_h w_h * relu(d_h),   d_h = sum_i q_hi k_i.
 *
 * An fp32 kernel computes it as follows, in any order and blocking:
 * - each product q_hi k_i of two fp8 values is EXACT in fp32: both have 4
 *   significant bits, so the product has at most 8, and it lies between
 *   2^-20 and 448^2 (no underflow, no overflow);
 * - the dot product is then a sum of 128 exact terms: |fl(d_h) - d_h| <=
 *   gamma_127 P_h with P_h = sum_i |q_hi k_i|, in any summation order (an FMA
 *   chain included);
 * - relu is 1-Lipschitz, so |relu(fl(d_h)) - relu(d_h)| <= gamma_127 P_h, and
 *   |relu(fl(d_h))| <= (1 + gamma_127) P_h;
 * - the weight product, the sum over Hi heads (Hi - 1 additions, any order)
 *   and the product by s add Hi + 1 roundings on each head's term.
 * Together (gamma_a + gamma_b + gamma_a gamma_b <= gamma_{a+b}):
 *
 *     |fl(L) - L| <= gamma_{128 + Hi + 1} * S,   S = s * sum_h |w_h| P_h.
 *
 * Two more roundings per term let a kernel scale a factor early (k by s
 * before the dot, s into w): gamma_{Hi + 131}. The reference sums in float64
 * (the dots exactly, the heads and s with Hi + 1 roundings): gamma64_{Hi+2} S.
 * Subnormal fp32 results are avoided by the inputs; (Hi + 131) 2^-149 covers
 * them anyway. The comparator adds an fp32 ulp for the two final roundings.
 * A kernel without relu, or with a head, a key, a scale or a layout wrong,
 * is off by about S itself, 10^5 times the bound. */

enum { LC = CONF_LG_CACHE, LQ, LW, LBT, LCTX, LOUT }; /* argument order */
#define LB CONF_LG_SEQS

/* next_n itself, a length that is not a multiple of the block size, and one
 * that is; the table's width and the blocks the sequences use (+2). */
static void logits_shape(const conf_case *c, int64_t *lens, int64_t *max_len, int64_t *mb,
                         int64_t *blocks)
{
    const int64_t bs = c->p.idx.block_size;
    lens[0] = c->p.idx.next_n;
    lens[1] = bs == 1 ? 21 : bs + 5;
    lens[2] = bs == 1 ? 30 : bs == 16 ? 32 : 64;
    int64_t top = 0, used = 0;
    for (int b = 0; b < LB; ++b) {
        top = lens[b] > top ? lens[b] : top;
        used += (lens[b] + bs - 1) / bs;
    }
    *max_len = top + 3; /* every row ends in -inf */
    *mb = (top + bs - 1) / bs;
    *blocks = used + 2;
}

static const conf_field logits_fields[] = {
    CONF_IDX_CACHE_FIELDS,
    CONF_FIELD(idx, next_n, CONF_F_I32),
    CONF_FIELD(idx, Hi, CONF_F_I64),
    CONF_FIELD(idx, q_lay, CONF_F_LAY),
    CONF_FIELD(idx, w_lay, CONF_F_LAY),
    CONF_FIELD(idx, logits_lay, CONF_F_LAY),
};

void conf_idx_logits_label(conf_case *c)
{
    const conf_p_indexer *q = &c->p.idx;
    char lay[24];
    conf_idx_layout_label(c, lay, sizeof lay);
    snprintf(c->label, sizeof c->label, "%s bs%lld %s next_n %d Hi %lld",
             mla_dtype_name(q->fp8) + 4, (long long)q->block_size, lay, (int)q->next_n,
             (long long)q->Hi);
}

void conf_idx_logits_case(conf_case *cp, int64_t bs, int layout, int next_n, int64_t Hi,
                          mla_dtype fp8, int n)
{
    static const unsigned qlay[] = {CONF_L_CONTIG, CONF_L_PAD, CONF_L_CONTIG, CONF_L_OFFSET};
    static const unsigned wlay[] = {CONF_L_CONTIG, CONF_L_COLMAJOR, CONF_L_PAD, CONF_L_CONTIG};
    conf_case c;
    memset(&c, 0, sizeof c);
    c.golden = -1;
    conf_p_indexer *q = &c.p.idx;
    q->layout = layout;
    q->fp8 = fp8;
    q->block_size = bs;
    q->next_n = next_n;
    q->Hi = Hi;
    int64_t lens[LB], max_len, mb, blocks;
    logits_shape(&c, lens, &max_len, &mb, &blocks);
    q->blocks = blocks;
    q->cache_lay = n % 3 == 1 ? CONF_L_PAD : CONF_L_CONTIG;
    q->q_lay = qlay[n % 4];
    q->w_lay = wlay[n % 4];
    q->logits_lay = n % 2 ? CONF_L_PAD : CONF_L_CONTIG;
    q->dist = CONF_DIST_CODES_FINITE;
    *cp = c;
}

static void logits_case(conf_builder *b, int64_t bs, int layout, int next_n, int64_t Hi,
                        mla_dtype fp8, int n)
{
    conf_case c;
    conf_idx_logits_case(&c, bs, layout, next_n, Hi, fp8, n);
    conf_push(b, &c);
}

static const char *const layout_names[] = {"auto", "normal", "shuffle"};
static const char *const block_names[] = {"<16", "16..63", ">=64"};
static const char *const next_n_names[] = {"1", ">=2"};

enum { G_DTYPE, G_LAYOUT, G_BLOCK, G_NEXT, G_CACHEV, G_QV, G_WV, G_LV };

static const conf_axis logits_axes[] = {
    CONF_AX_FL("cache.dtype", in_dtype, NULL, CONF_FP8S),
    CONF_AX_FL("layout", layout, layout_names, MLA_INDEXER_NORMAL, MLA_INDEXER_SHUFFLE),
    CONF_AX_CL("block_size", group, 1, block_names, 1, 16, 64),
    CONF_AX_CL("next_n", next_n, 0, next_n_names, 1, 2),
    CONF_AX_VW("cache.view", 0, MLA_ARG_DENSE, MLA_ARG_ROWS),
    CONF_AX_VW("q.view", 1, CONF_VIEWS),
    CONF_AX_VW("w.view", 2, CONF_VIEWS),
    CONF_AX_VW("logits.view", 5, CONF_VIEWS),
};

static int logits_legal(const conf_point *p) { return conf_idx_legal(p, G_LAYOUT, G_BLOCK); }

static void logits_derive(mla_variant *v)
{
    v->arg_dtype[1] = v->in_dtype; /* q: the cache's fp8 */
    v->rule = v->next_n;
}

const conf_op_axes conf_axes_indexer_logits = {
    .op = MLA_OP_INDEXER_LOGITS,
    .axes = logits_axes,
    .naxes = (int)(sizeof logits_axes / sizeof logits_axes[0]),
    .base = {.out_dtype = MLA_DTYPE_F32,
             .rows = 3,
             .cols = CONF_IDX_D,
             .nargs = 6,
             .arg_dtype = {MLA_DTYPE_U8, MLA_DTYPE_COUNT, MLA_DTYPE_F32, MLA_DTYPE_I32,
                           MLA_DTYPE_I32, MLA_DTYPE_F32}},
    .derive = logits_derive,
    .legal = logits_legal,
    .full = 1u << G_DTYPE | 1u << G_LAYOUT | 1u << G_BLOCK | 1u << G_NEXT};

/* Hi 3 or 5 heads; next_n 1 or 2 */
static void logits_design(const conf_point *pt, int k, conf_case *c)
{
    conf_idx_design_cache(c, (mla_dtype)CONF_VAL(pt, G_DTYPE), 0, CONF_VAL(pt, G_BLOCK),
                          CONF_VAL(pt, G_LAYOUT), k);
    const conf_p_indexer keep = c->p.idx;
    const char *note = c->note;
    conf_idx_logits_case(c, keep.block_size, keep.layout, (int)CONF_VAL(pt, G_NEXT), k % 2 ? 3 : 5,
                         keep.fp8, k);
    c->note = note;
    conf_p_indexer *q = &c->p.idx;
    q->cache_lay = CONF_VAL(pt, G_CACHEV) == MLA_ARG_ROWS ? CONF_L_PAD : CONF_L_CONTIG;
    q->q_lay = conf_lay_of_view(CONF_VAL(pt, G_QV), 3, k);
    q->w_lay = conf_lay_of_view(CONF_VAL(pt, G_WV), 2, k + 1);
    q->logits_lay = conf_lay_of_view(CONF_VAL(pt, G_LV), 2, k + 2);
}

static int build_logits(conf_case *cases, int cap)
{
    conf_builder b = {.cases = cases, .cap = cap, .suite = &conf_suite_indexer_logits};
    static const struct {
        int64_t bs;
        int layout;
    } g[] = {{1, MLA_INDEXER_LAYOUT_AUTO},  {16, MLA_INDEXER_LAYOUT_AUTO},
             {64, MLA_INDEXER_LAYOUT_AUTO}, {16, MLA_INDEXER_NORMAL},
             {64, MLA_INDEXER_NORMAL},      {64, MLA_INDEXER_SHUFFLE}};
    static const mla_dtype fp8s[] = {MLA_DTYPE_FP8_E4M3FN, MLA_DTYPE_FP8_E4M3FNUZ};
    int n = 0;
    /* Hi 64 and 3 in turn (odd counts at block size 64, where rows are long), each
     * flavour with each; the reference's float64 loop sets the sizes */
    for (int k = 0; k < 6; ++k)
        for (int nn = 1; nn <= 2; ++nn, ++n) {
            const int64_t Hi = g[k].bs == 64 ? 2 * nn + 1 : (k + nn) % 2 ? 3 : 64;
            logits_case(&b, g[k].bs, g[k].layout, nn, Hi, fp8s[(k / 2 + nn) % 2], n);
        }
    logits_case(&b, 64, MLA_INDEXER_LAYOUT_AUTO, 1, 64, MLA_DTYPE_FP8_E4M3FN, n++);
    logits_case(&b, 64, MLA_INDEXER_NORMAL, 1, 64, MLA_DTYPE_FP8_E4M3FNUZ, n++);
    logits_case(&b, 16, MLA_INDEXER_LAYOUT_AUTO, 1, 1, MLA_DTYPE_FP8_E4M3FN, n++);
    logits_case(&b, 1, MLA_INDEXER_LAYOUT_AUTO, 2, 7, MLA_DTYPE_FP8_E4M3FNUZ, n++);
    conf_push_design(&b, &conf_axes_indexer_logits, logits_design);
    return b.n;
}

/* The 256 values of the fp8 codes (the comparators' own decoder). */
static void fp8_table(mla_dtype dt, double *v)
{
    for (int k = 0; k < 256; ++k)
        v[k] = conf_decode_value(dt, (uint64_t)k);
}

mla_status conf_idx_logits_tol(conf_problem *p, const mla_indexer_cache_desc *d, int64_t nn)
{
    const int64_t Hi = p->arg[LQ].t.shape[1], D = CONF_IDX_D, bs = d->block_size;
    const int64_t rows = p->arg[LOUT].t.shape[0], N = p->arg[LOUT].t.shape[1];
    const int64_t B = conf_numel(&p->arg[LCTX]), mb = p->arg[LBT].t.shape[1];
    const int32_t layout = d->layout;
    double *tol = conf_tol_alloc(p, LOUT, 1.0), val[256];
    double *qa = malloc((size_t)(rows * Hi * D) * sizeof *qa), ka[CONF_IDX_D];
    if (!tol || !qa) {
        free(qa);
        return MLA_ERR_OUT_OF_MEMORY;
    }
    fp8_table(d->dtype, val);
    for (int64_t k = 0; k < rows * Hi * D; ++k)
        qa[k] = fabs(conf_in_value(&p->arg[LQ], k));
    const double g = gamma_n((double)(Hi + 131), U32) + gamma_n((double)(Hi + 2), U64);
    for (int64_t b = 0; b < B; ++b) {
        const int64_t len = (int64_t)conf_in_value(&p->arg[LCTX], b);
        for (int64_t n = 0; n < len; ++n) {
            const int64_t blk = (int64_t)conf_in_value(&p->arg[LBT], b * mb + n / bs);
            for (int64_t i = 0; i < D; ++i)
                ka[i] = fabs(val[*conf_idx_block_byte(p, LC, blk,
                                                      conf_idx_value_byte(layout, n % bs, i, D))]);
            float s;
            memcpy(&s, conf_idx_block_byte(p, LC, blk, conf_idx_scale_byte(n % bs, bs, D)), 4);
            for (int64_t j = 0; j < nn; ++j) {
                const int64_t r = b * nn + j;
                if (n >= len - nn + j + 1 || n >= N)
                    continue; /* -inf: exact */
                double S = 0.0;
                for (int64_t h = 0; h < Hi; ++h) {
                    double P = 0.0;
                    const double *q = qa + (r * Hi + h) * D;
                    for (int64_t i = 0; i < D; ++i)
                        P += q[i] * ka[i];
                    S += fabs(conf_in_value(&p->arg[LW], r * Hi + h)) * P;
                }
                tol[r * N + n] = g * fabs((double)s) * S + (double)(Hi + 131) * 0x1p-149;
            }
        }
    }
    free(qa);
    return MLA_OK;
}

mla_status conf_idx_setup_logits(const conf_case *c, const conf_env *env, conf_problem *p,
                                 char *err, size_t errlen)
{
    (void)env;
    int64_t lens[LB], max_len, mb, blocks;
    logits_shape(c, lens, &max_len, &mb, &blocks);
    const conf_p_indexer *q = &c->p.idx;
    const int64_t rows = conf_idx_logits_rows(c), Hi = q->Hi;
    const int64_t qs[3] = {rows, Hi, CONF_IDX_D}, ws[2] = {rows, Hi}, bt[2] = {LB, mb},
                  cl[1] = {LB}, ls[2] = {rows, max_len};
    mla_status st = conf_idx_add_cache(p, c, CONF_IN);
    if (st == MLA_OK)
        st = conf_add_arg(p, "q", CONF_IN, q->fp8, 3, qs, q->q_lay);
    if (st == MLA_OK)
        st = conf_add_arg(p, "w", CONF_IN, MLA_DTYPE_F32, 2, ws, q->w_lay);
    if (st == MLA_OK)
        st = conf_add_arg(p, "block_table", CONF_IN, MLA_DTYPE_I32, 2, bt, CONF_L_CONTIG);
    if (st == MLA_OK)
        st = conf_add_arg(p, "context_lens", CONF_IN, MLA_DTYPE_I32, 1, cl, CONF_L_CONTIG);
    if (st == MLA_OK)
        st = conf_add_arg(p, "logits", CONF_OUT, MLA_DTYPE_F32, 2, ls, q->logits_lay);
    if (st != MLA_OK) {
        snprintf(err, errlen, "cannot lay out the case (%s)", mla_status_name(st));
        return st;
    }
    conf_idx_fill_cache(p, LC, c, 0);
    conf_fill(p, LQ, CONF_DIST_CODES_FINITE, c->seed ^ 1, 0);
    conf_fill(p, LW, CONF_DIST_ACT, c->seed ^ 2, Hi);
    conf_idx_fill_table(p, LBT, lens, LB, mb, q->block_size, blocks, c->seed);
    for (int b = 0; b < LB; ++b)
        conf_set_value(p, LCTX, b, (double)lens[b]);
    mla_indexer_cache_desc d = conf_idx_desc(c);
    d.layout = (mla_indexer_layout)conf_idx_layout(c);
    st = conf_idx_logits_tol(p, &d, q->next_n);
    if (st != MLA_OK)
        snprintf(err, errlen, "out of memory");
    return st;
}

static mla_status exec_logits(mla_context *ctx, const conf_case *c, mla_tensor *t)
{
    mla_indexer_cache_desc d = conf_idx_desc(c);
    return mla_indexer_logits(ctx, &d, &t[LC], &t[LQ], &t[LW], &t[LBT], &t[LCTX], c->p.idx.next_n,
                              &t[LOUT]);
}

const conf_suite conf_suite_indexer_logits = {.name = "indexer_logits",
                                              .op = MLA_OP_INDEXER_LOGITS,
                                              .build = build_logits,
                                              .setup = conf_idx_setup_logits,
                                              .exec = exec_logits,
                                              .label = conf_idx_logits_label,
                                              .fields = logits_fields,
                                              .nfields = CONF_NFIELDS(logits_fields)};

/* --------------------------------------------------------------- top-k */

enum { V_ACT, V_TIES, V_NEGINF, V_GRID, V_NAN, V_COUNT };
static const char *const value_names[V_COUNT] = {"act", "ties +-0", "mostly -inf", "coarse grid",
                                                 "nan +inf"};

static const char *value_name(int v) { return v >= 0 && v < V_COUNT ? value_names[v] : "unknown"; }

static const conf_field topk_fields[] = {
    CONF_FIELD(topk, R, CONF_F_I64),           CONF_FIELD(topk, N, CONF_F_I64),
    CONF_FIELD(topk, k, CONF_F_I64),           CONF_ENUM(topk, values, value_name, V_COUNT),
    CONF_FIELD(topk, logits_lay, CONF_F_LAY),  CONF_FIELD(topk, lengths_lay, CONF_F_LAY),
    CONF_FIELD(topk, indices_lay, CONF_F_LAY),
};

static void label_topk(conf_case *c)
{
    const conf_p_topk *q = &c->p.topk;
    snprintf(c->label, sizeof c->label, "k %lld of %lld, %s", (long long)q->k, (long long)q->N,
             value_name(q->values));
}

static void topk_case(conf_builder *b, int64_t R, int64_t N, int64_t k, int values, unsigned lay,
                      const char *note)
{
    conf_case c;
    memset(&c, 0, sizeof c);
    c.golden = -1;
    c.note = note;
    c.p.topk = (conf_p_topk){R, N, k, values, lay, CONF_L_CONTIG, lay};
    conf_push(b, &c);
}

static const char *const k_names[] = {"<=2048", ">2048"};

enum { T_K, T_LV, T_NV, T_IV };

static const conf_axis topk_axes[] = {
    /* HIP's top-k takes k up to the model's 2048 (hip/topk.hip) */
    {.name = "k",
     .kind = CONF_AX_CLASS,
     .field = offsetof(mla_variant, group),
     .wide = 1,
     .n = 2,
     .values = {1, 2049},
     .names = k_names,
     .rare = 1u << 1},
    CONF_AX_VW("logits.view", 0, CONF_VIEWS),
    CONF_AX_VW("lengths.view", 1, CONF_VIEWS_1D),
    CONF_AX_VW("indices.view", 2, CONF_VIEWS),
};

const conf_op_axes conf_axes_topk = {
    .op = MLA_OP_TOPK,
    .axes = topk_axes,
    .naxes = (int)(sizeof topk_axes / sizeof topk_axes[0]),
    .base = {.in_dtype = MLA_DTYPE_F32,
             .out_dtype = MLA_DTYPE_I32,
             .rows = 4,
             .cols = 4096,
             .nargs = 3,
             .arg_dtype = {MLA_DTYPE_F32, MLA_DTYPE_I32, MLA_DTYPE_I32}},
    .full = 1u << T_K};

/* k 16 of 64, or 2100 of 2200 */
static void topk_design(const conf_point *pt, int k, conf_case *c)
{
    const int big = CONF_VAL(pt, T_K) > 2048;
    c->p.topk = (conf_p_topk){big ? 2 : 4,
                              big ? 2200 : 64,
                              big ? 2100 : 16,
                              k % 2 ? V_GRID : V_TIES,
                              conf_lay_of_view(CONF_VAL(pt, T_LV), 2, k),
                              conf_lay_of_view(CONF_VAL(pt, T_NV), 1, k),
                              conf_lay_of_view(CONF_VAL(pt, T_IV), 2, k + 1)};
    c->note = ", pairwise";
}

static int build_topk(conf_case *cases, int cap)
{
    conf_builder b = {.cases = cases, .cap = cap, .suite = &conf_suite_topk};
    topk_case(&b, 8, 64, 16, V_ACT, CONF_L_CONTIG, NULL);
    topk_case(&b, 8, 64, 16, V_TIES, CONF_L_CONTIG, NULL);
    topk_case(&b, 8, 96, 32, V_NEGINF, CONF_L_PAD, NULL);
    topk_case(&b, 4, 40, 40, V_TIES, CONF_L_CONTIG, ", k = N");
    topk_case(&b, 6, 33, 1, V_TIES, CONF_L_OFFSET, NULL);
    topk_case(&b, 5, 300, 64, V_GRID, CONF_L_PAD, NULL);
    topk_case(&b, 4, 50, 8, V_GRID, CONF_L_COLMAJOR, ", column-major");
    topk_case(&b, 6, 64, 16, V_NAN, CONF_L_CONTIG, NULL);
    topk_case(&b, 3, 8192, 2048, V_GRID, CONF_L_CONTIG, ", rows 8192, 4100, 2047");
    /* long rows that several HIP blocks share (an even row count: the
     * emulation then cooperates too), and k past one batch of 2048 */
    topk_case(&b, 2, 40000, 2048, V_ACT, CONF_L_CONTIG, ", rows 40000, 20001");
    topk_case(&b, 2, 40000, 3000, V_GRID, CONF_L_CONTIG, ", rows 40000, 20001");
    conf_push_design(&b, &conf_axes_topk, topk_design);
    return b.n;
}

/* Row lengths: the whole row, none, one, around k, half (the large cases:
 * 8192, 4100 and 2047 = k - 1; 40000 and 20001). */
static int64_t topk_len(const conf_case *c, int64_t r)
{
    const int64_t N = c->p.topk.N, k = c->p.topk.k;
    if (N == 8192)
        return r == 0 ? 8192 : r == 1 ? 4100 : k - 1;
    if (N == 40000)
        return r == 0 ? N : N / 2 + 1;
    const int64_t pick[8] = {N, 0, 1, k - 1, k, k + 1, N / 2, N - 1};
    const int64_t len = pick[r % 8];
    return len < 0 ? 0 : len > N ? N : len;
}

static double topk_value(const conf_case *c, int64_t r, int64_t n, double act)
{
    const uint64_t x = conf_rng(c->seed, 25, (uint64_t)(r * c->p.topk.N + n), 0);
    static const double small[] = {-2.0, -1.0, -0.0, 0.0, 1.0, 2.0, 3.0};
    switch (c->p.topk.values) {
    case V_TIES:
        return small[x % 7];
    case V_NEGINF:
        return x % 10 < 7 ? -INFINITY : small[x % 7];
    case V_GRID: /* logits on a coarse grid: thousands of ties, some -inf */
        return x % 50 == 0 ? -INFINITY : ldexp((double)((int64_t)(x >> 8) % 256 - 64), -3);
    case V_NAN:
        return x % 9 == 0 ? NAN : x % 9 == 1 ? INFINITY : x % 9 == 2 ? -INFINITY : small[x % 7];
    default:
        return act;
    }
}

static mla_status setup_topk(const conf_case *c, const conf_env *env, conf_problem *p, char *err,
                             size_t errlen)
{
    (void)env;
    const conf_p_topk *q = &c->p.topk;
    const int64_t R = q->R, N = q->N, k = q->k;
    const int64_t ls[2] = {R, N}, rs[1] = {R}, is[2] = {R, k};
    mla_status st = conf_add_arg(p, "logits", CONF_IN, MLA_DTYPE_F32, 2, ls, q->logits_lay);
    if (st == MLA_OK)
        st = conf_add_arg(p, "lengths", CONF_IN, MLA_DTYPE_I32, 1, rs, q->lengths_lay);
    if (st == MLA_OK)
        st = conf_add_arg(p, "indices", CONF_OUT, MLA_DTYPE_I32, 2, is, q->indices_lay);
    if (st != MLA_OK) {
        snprintf(err, errlen, "cannot lay out the case (%s)", mla_status_name(st));
        return st;
    }
    conf_fill(p, 0, CONF_DIST_ACT, c->seed, N);
    for (int64_t r = 0; r < R; ++r) {
        for (int64_t n = 0; q->values != V_ACT && n < N; ++n)
            conf_set_value(p, 0, r * N + n, topk_value(c, r, n, 0.0));
        conf_set_value(p, 1, r, (double)topk_len(c, r));
    }
    return MLA_OK;
}

static mla_status exec_topk(mla_context *ctx, const conf_case *c, mla_tensor *t)
{
    return mla_topk(ctx, &t[0], &t[1], c->p.topk.k, &t[2]);
}

const conf_suite conf_suite_topk = {.name = "topk",
                                    .op = MLA_OP_TOPK,
                                    .build = build_topk,
                                    .setup = setup_topk,
                                    .exec = exec_topk,
                                    .label = label_topk,
                                    .fields = topk_fields,
                                    .nfields = CONF_NFIELDS(topk_fields)};
