/* The planned search of the DSA indexer (MLA.md section 6):
 * mla_indexer_plan_create over the block table and context lengths, then
 * mla_indexer_search (paged logits, then the top-k of each row's causal
 * bound). The problems are indexer_logits' (cases_indexer.h) plus the
 * indices [B * next_n, k_top]; k_top is below some rows' lengths and above
 * others' (-1 padding).
 *
 * The logits are held to the indexer_logits bound against the reference.
 * The indices cannot be compared with the reference's: two backends'
 * logits differ within that bound, and a near tie may then rank the other
 * way. They must be EXACTLY the top-k of the backend's own logits, by the
 * library's rule (the min(k, len) largest, ties to the lower index, +0 and
 * -0 tie, NaN below every number; in ascending index order), computed
 * here: a search that ranked stale logits, the wrong row or the wrong
 * length fails. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "conformance/cases_indexer.h"

#define SEARCH_IDX (CONF_LG_LOGITS + 1)

static const conf_field search_fields[] = {
    CONF_IDX_CACHE_FIELDS,
    CONF_FIELD(idx, next_n, CONF_F_I32),
    CONF_FIELD(idx, Hi, CONF_F_I64),
    CONF_FIELD(idx, k_top, CONF_F_I64),
    CONF_FIELD(idx, q_lay, CONF_F_LAY),
    CONF_FIELD(idx, w_lay, CONF_F_LAY),
    CONF_FIELD(idx, logits_lay, CONF_F_LAY),
    CONF_FIELD(idx, indices_lay, CONF_F_LAY),
};

static void label_search(conf_case *c)
{
    conf_idx_logits_label(c);
    const size_t n = strlen(c->label);
    snprintf(c->label + n, sizeof c->label - n, " k %lld", (long long)c->p.idx.k_top);
}

static int build_search(conf_case *cases, int cap)
{
    conf_builder b = {.cases = cases, .cap = cap, .suite = &conf_suite_indexer_search};
    static const struct {
        int64_t bs;
        int layout, next_n;
        int64_t Hi, k;
        mla_dtype fp8;
    } g[] = {{1, MLA_INDEXER_LAYOUT_AUTO, 1, 64, 16, MLA_DTYPE_FP8_E4M3FN},
             {16, MLA_INDEXER_LAYOUT_AUTO, 2, 3, 24, MLA_DTYPE_FP8_E4M3FNUZ},
             {64, MLA_INDEXER_LAYOUT_AUTO, 1, 64, 40, MLA_DTYPE_FP8_E4M3FN},
             {64, MLA_INDEXER_NORMAL, 2, 5, 1, MLA_DTYPE_FP8_E4M3FN},
             {16, MLA_INDEXER_SHUFFLE, 1, 64, 35, MLA_DTYPE_FP8_E4M3FNUZ}};
    for (int i = 0; i < (int)(sizeof g / sizeof g[0]); ++i) {
        conf_case c;
        conf_idx_logits_case(&c, g[i].bs, g[i].layout, g[i].next_n, g[i].Hi, g[i].fp8, i);
        c.p.idx.k_top = g[i].k;
        conf_push(&b, &c);
    }
    return b.n;
}

static mla_status setup_search(const conf_case *c, const conf_env *env, conf_problem *p,
                               char *err, size_t errlen)
{
    mla_status st = conf_idx_setup_logits(c, env, p, err, errlen);
    const int64_t shape[2] = {conf_idx_logits_rows(c), c->p.idx.k_top};
    if (st == MLA_OK)
        st = conf_add_arg(p, "indices", CONF_OUT, MLA_DTYPE_I32, 2, shape, c->p.idx.indices_lay);
    if (st != MLA_OK && !err[0])
        snprintf(err, errlen, "cannot lay out the case (%s)", mla_status_name(st));
    return st;
}

static mla_status exec_search(mla_context *ctx, const conf_case *c, mla_tensor *t)
{
    mla_indexer_cache_desc d = conf_idx_desc(c);
    mla_indexer_plan *plan = NULL;
    mla_status st = mla_indexer_plan_create(ctx, &d, &t[CONF_LG_TABLE], &t[CONF_LG_LENS],
                                            c->p.idx.next_n, &plan);
    if (st == MLA_OK)
        st = mla_indexer_search(ctx, plan, &t[CONF_LG_CACHE], &t[CONF_LG_Q], &t[CONF_LG_W],
                                &t[CONF_LG_LOGITS], c->p.idx.k_top, &t[SEARCH_IDX]);
    mla_indexer_plan_destroy(plan);
    return st;
}

/* a ranks before b: the larger value, NaN last, ties to the lower index */
static int ranks_before(double a, int64_t ia, double b, int64_t ib)
{
    if (isnan(a) || isnan(b))
        return isnan(a) == isnan(b) ? ia < ib : isnan(b);
    return a != b ? a > b : ia < ib;
}

static const double *sort_vals;

static int by_index(const void *x, const void *y)
{
    const int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return (a > b) - (a < b);
}

static int by_rank(const void *x, const void *y)
{
    const int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    if (a == b)
        return 0;
    return ranks_before(sort_vals[a], a, sort_vals[b], b) ? -1 : 1;
}

static double value_at(const conf_arg *a, unsigned char *buf, int64_t k)
{
    const size_t es = mla_dtype_size(a->t.dtype);
    unsigned char *e0 = buf + a->offset * (int64_t)es;
    return conf_decode_value(a->t.dtype, conf_load_bits(conf_elem_at(a, e0, k), es));
}

void conf_idx_search_check(const conf_problem *p, int ixa, int64_t nn, unsigned char *const *got,
                           conf_cmp *r)
{
    const conf_arg *lg = &p->arg[CONF_LG_LOGITS], *ix = &p->arg[ixa];
    const int64_t R = lg->t.shape[0], N = lg->t.shape[1], K = ix->t.shape[1];
    double *vals = malloc((size_t)N * sizeof *vals + 1);
    int64_t *order = malloc((size_t)N * sizeof *order + 1);
    memset(r, 0, sizeof *r);
    r->unit = "index";
    if (!vals || !order) {
        r->mismatches = 1;
        snprintf(r->first, sizeof r->first, "out of memory");
    }
    for (int64_t row = 0; vals && order && row < R; ++row) {
        int64_t len = (int64_t)conf_in_value(&p->arg[CONF_LG_LENS], row / nn) - nn + row % nn + 1;
        len = len < N ? len : N;
        for (int64_t n = 0; n < len; ++n) {
            vals[n] = value_at(lg, got[CONF_LG_LOGITS], row * N + n);
            vals[n] = vals[n] == 0.0 ? 0.0 : vals[n]; /* -0 ties +0 */
            order[n] = n;
        }
        sort_vals = vals;
        qsort(order, (size_t)(len > 0 ? len : 0), sizeof *order, by_rank);
        const int64_t m = K < len ? K : len;
        qsort(order, (size_t)(m > 0 ? m : 0), sizeof *order, by_index);
        for (int64_t j = 0; j < K; ++j) {
            const int64_t w = j < m ? order[j] : -1;
            const int64_t g = (int64_t)value_at(ix, got[ixa], row * K + j);
            r->count++;
            if (g == w)
                continue;
            if (!r->mismatches++)
                snprintf(r->first, sizeof r->first,
                         "indices[%lld, %lld]: got %lld, the top-k of its own logits has %lld",
                         (long long)row, (long long)j, (long long)g, (long long)w);
        }
    }
    free(vals);
    free(order);
}

/* The indices against the top-k of the backend's own logits. */
static int compare_search(const conf_case *c, const conf_problem *p, int i,
                          unsigned char *const *got, unsigned char *const *want, conf_cmp *r)
{
    (void)want;
    if (i != SEARCH_IDX)
        return 0;
    conf_idx_search_check(p, SEARCH_IDX, c->p.idx.next_n, got, r);
    return 1;
}

const conf_suite conf_suite_indexer_search = {.name = "indexer_search",
                                              .op = MLA_OP_INDEXER_LOGITS,
                                              .build = build_search,
                                              .setup = setup_search,
                                              .exec = exec_search,
                                              .compare = compare_search,
                                              .label = label_search,
                                              .fields = search_fields,
                                              .nfields = CONF_NFIELDS(search_fields)};
