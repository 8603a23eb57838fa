/* Variant axes (cover.h): classification of recorded variants, the search
 * for legal completions, the pairwise designs and the coverage check. */
#include <stdlib.h>
#include <string.h>

#include "conformance/cover.h"

extern const conf_op_axes conf_axes_convert, conf_axes_mxfp4_quant, conf_axes_mxfp4_dequant,
    conf_axes_fp8_group_quant, conf_axes_fp8_group_dequant, conf_axes_rmsnorm, conf_axes_qk_rmsnorm,
    conf_axes_rope, conf_axes_linear, conf_axes_batched_gemm, conf_axes_cache_write,
    conf_axes_cache_gather, conf_axes_rope_cache, conf_axes_gemm_a16wfp4, conf_axes_gemm_a4w4,
    conf_axes_flatten_mxfp4_quant, conf_axes_flatten_fp8_quant, conf_axes_layernorm,
    conf_axes_hadamard, conf_axes_indexer_k_cache_write, conf_axes_indexer_k_gather,
    conf_axes_indexer_logits, conf_axes_topk, conf_axes_indexer_head_weights, conf_axes_attention,
    conf_axes_attention_expanded;

const conf_op_axes *conf_axes_of(mla_op op)
{
    static const conf_op_axes *const table[MLA_OP_COUNT] = {
        [MLA_OP_CONVERT] = &conf_axes_convert,
        [MLA_OP_MXFP4_QUANT] = &conf_axes_mxfp4_quant,
        [MLA_OP_MXFP4_DEQUANT] = &conf_axes_mxfp4_dequant,
        [MLA_OP_FP8_GROUP_QUANT] = &conf_axes_fp8_group_quant,
        [MLA_OP_FP8_GROUP_DEQUANT] = &conf_axes_fp8_group_dequant,
        [MLA_OP_RMSNORM] = &conf_axes_rmsnorm,
        [MLA_OP_QK_RMSNORM] = &conf_axes_qk_rmsnorm,
        [MLA_OP_ROPE] = &conf_axes_rope,
        [MLA_OP_LINEAR] = &conf_axes_linear,
        [MLA_OP_BATCHED_GEMM] = &conf_axes_batched_gemm,
        [MLA_OP_CACHE_WRITE] = &conf_axes_cache_write,
        [MLA_OP_CACHE_GATHER] = &conf_axes_cache_gather,
        [MLA_OP_ROPE_CACHE] = &conf_axes_rope_cache,
        [MLA_OP_GEMM_A16WFP4] = &conf_axes_gemm_a16wfp4,
        [MLA_OP_GEMM_A4W4] = &conf_axes_gemm_a4w4,
        [MLA_OP_FLATTEN_MXFP4_QUANT] = &conf_axes_flatten_mxfp4_quant,
        [MLA_OP_FLATTEN_FP8_QUANT] = &conf_axes_flatten_fp8_quant,
        [MLA_OP_LAYERNORM] = &conf_axes_layernorm,
        [MLA_OP_HADAMARD] = &conf_axes_hadamard,
        [MLA_OP_INDEXER_K_CACHE_WRITE] = &conf_axes_indexer_k_cache_write,
        [MLA_OP_INDEXER_K_GATHER] = &conf_axes_indexer_k_gather,
        [MLA_OP_INDEXER_LOGITS] = &conf_axes_indexer_logits,
        [MLA_OP_TOPK] = &conf_axes_topk,
        [MLA_OP_INDEXER_HEAD_WEIGHTS] = &conf_axes_indexer_head_weights,
        [MLA_OP_ATTENTION] = &conf_axes_attention,
        [MLA_OP_ATTENTION_EXPANDED] = &conf_axes_attention_expanded,
    };
    return (int)op >= 0 && op < MLA_OP_COUNT ? table[op] : NULL;
}

/* ------------------------------------------------------------ points */

/* FIELD axes read the variant's enum fields (in_dtype, ...) as int32. */
_Static_assert(sizeof(mla_dtype) == sizeof(int32_t), "mla_dtype is 32 bits wide");

static int64_t field_get(const conf_axis *ax, const mla_variant *v)
{
    const char *at = (const char *)v + ax->field;
    if (ax->wide) {
        int64_t x;
        memcpy(&x, at, sizeof x);
        return x;
    }
    int32_t x;
    memcpy(&x, at, sizeof x);
    return x;
}

static void field_set(const conf_axis *ax, mla_variant *v, int64_t x)
{
    char *at = (char *)v + ax->field;
    if (ax->wide) {
        memcpy(at, &x, sizeof x);
        return;
    }
    const int32_t y = (int32_t)x;
    memcpy(at, &y, sizeof y);
}

static void assign(conf_point *p, const conf_axis *axes, int i, int k)
{
    p->k[i] = k;
    p->v[i] = axes[i].values[k];
    p->set |= 1u << i;
}

static void unassign(conf_point *p, int i) { p->set &= ~(1u << i); }

int conf_axes_classify(const conf_op_axes *a, const mla_variant *v, conf_point *p)
{
    memset(p, 0, sizeof *p);
    for (int i = 0; i < a->naxes; ++i) {
        const conf_axis *ax = &a->axes[i];
        int64_t x;
        switch (ax->kind) {
        case CONF_AX_DTYPE:
            x = ax->arg < v->nargs ? (int64_t)v->arg_dtype[ax->arg] : -1;
            break;
        case CONF_AX_VIEW:
            x = ax->arg < v->nargs ? v->arg_view[ax->arg] : -1;
            break;
        default:
            x = field_get(ax, v);
            break;
        }
        int k = -1;
        for (int j = 0; j < ax->n; ++j)
            if (ax->kind == CONF_AX_CLASS ? x >= ax->values[j] : x == ax->values[j])
                k = j;
        if (k < 0)
            return i;
        assign(p, a->axes, i, k);
    }
    return -1;
}

void conf_axes_variant(const conf_op_axes *a, const conf_point *p, mla_variant *v)
{
    *v = a->base;
    v->op = a->op;
    for (int i = 0; i < a->naxes; ++i) {
        const conf_axis *ax = &a->axes[i];
        switch (ax->kind) {
        case CONF_AX_DTYPE:
            v->arg_dtype[ax->arg] = (mla_dtype)p->v[i];
            break;
        case CONF_AX_VIEW:
            v->arg_view[ax->arg] = (uint8_t)p->v[i];
            break;
        default:
            field_set(ax, v, p->v[i]);
            break;
        }
    }
    if (a->derive)
        a->derive(v);
}

void conf_axes_value_str(const conf_op_axes *a, const conf_point *p, int i, char *buf, size_t len)
{
    static const char *const views[MLA_ARG_VIEW_COUNT] = {"dense", "rows", "strided", "in_place",
                                                          "absent"};
    const conf_axis *ax = &a->axes[i];
    const int64_t x = p->v[i];
    if (ax->kind == CONF_AX_DTYPE)
        snprintf(buf, len, "%s=%s", ax->name,
                 x == MLA_DTYPE_COUNT ? "none" : mla_dtype_name((mla_dtype)x));
    else if (ax->kind == CONF_AX_VIEW)
        snprintf(buf, len, "%s=%s", ax->name, x >= 0 && x < MLA_ARG_VIEW_COUNT ? views[x] : "?");
    else if (ax->names)
        snprintf(buf, len, "%s=%s", ax->name, ax->names[p->k[i]]);
    else
        snprintf(buf, len, "%s=%lld", ax->name, (long long)x);
}

/* ------------------------------------------------------------ search */

static int is_legal(const conf_op_axes *a, const conf_point *p) { return !a->legal || a->legal(p); }

/* The next combination of the full axes' values in k (an odometer); 0 after the last. */
static int next_full(const conf_op_axes *a, int *k)
{
    for (int i = 0; i < a->naxes; ++i) {
        if (!(a->full >> i & 1u))
            continue;
        if (++k[i] < a->axes[i].n)
            return 1;
        k[i] = 0;
    }
    return 0;
}

/* The point of the full axes at their values k. */
static conf_point full_point(const conf_op_axes *a, const int *k)
{
    conf_point p = {.set = 0};
    for (int i = 0; i < a->naxes; ++i)
        if (a->full >> i & 1u)
            assign(&p, a->axes, i, k[i]);
    return p;
}

typedef struct search {
    const conf_op_axes *a;
    int allow_rare;
    conf_accept accept;
    void *actx;
} search;

static int dfs(const search *s, conf_point *p, int i)
{
    const conf_op_axes *a = s->a;
    while (i < a->naxes && CONF_HAS(p, i))
        ++i;
    if (i == a->naxes) {
        if (!s->accept)
            return 1;
        mla_variant v;
        conf_axes_variant(a, p, &v);
        return s->accept(s->actx, &v);
    }
    const conf_axis *ax = &a->axes[i];
    for (int k = 0; k < ax->n; ++k) {
        if (!s->allow_rare && (ax->rare >> k & 1u))
            continue;
        assign(p, a->axes, i, k);
        if (is_legal(a, p)) {
            if (dfs(s, p, i + 1))
                return 1;
            if (ax->kind == CONF_AX_VIEW) /* views: the first legal value only */
                break;
        }
        unassign(p, i);
    }
    unassign(p, i);
    return 0;
}

int conf_axes_complete(const conf_op_axes *a, conf_point *p, int allow_rare, conf_accept accept,
                       void *actx)
{
    if (!is_legal(a, p))
        return 0;
    const search s = {a, allow_rare, accept, actx};
    conf_point q = *p;
    if (!dfs(&s, &q, 0))
        return 0;
    *p = q;
    return 1;
}

/* ------------------------------------------------------------ pairs */

typedef struct pairs {
    unsigned char m[CONF_MAX_AXES][CONF_AXIS_VALUES][CONF_MAX_AXES][CONF_AXIS_VALUES];
} pairs;

static void pairs_add(pairs *m, const conf_point *p, int naxes)
{
    for (int i = 0; i < naxes; ++i)
        for (int j = i + 1; j < naxes; ++j)
            m->m[i][p->k[i]][j][p->k[j]] = 1;
}

/* Pairs of the set axes that p would newly cover with axis i at value k. */
static int gain(const pairs *m, const conf_op_axes *a, const conf_point *p, int i)
{
    int g = 0;
    for (int j = 0; j < a->naxes; ++j)
        if (j != i && CONF_HAS(p, j))
            g += j < i ? !m->m[j][p->k[j]][i][p->k[i]] : !m->m[i][p->k[i]][j][p->k[j]];
    return g;
}

/* Fills p's unset axes greedily: each takes the completable value that
 * covers the most new pairs (ties: the value used least so far). */
static void fill(const conf_op_axes *a, const pairs *m, conf_point *p, int allow_rare,
                 const int (*used)[CONF_AXIS_VALUES])
{
    for (int i = 0; i < a->naxes; ++i) {
        if (CONF_HAS(p, i))
            continue;
        int best = -1, best_gain = -1, best_used = 0;
        for (int k = 0; k < a->axes[i].n; ++k) {
            conf_point q = *p;
            assign(&q, a->axes, i, k);
            if ((!allow_rare && (a->axes[i].rare >> k & 1u)) ||
                !conf_axes_complete(a, &q, allow_rare, NULL, NULL))
                continue;
            q = *p;
            assign(&q, a->axes, i, k);
            const int g = gain(m, a, &q, i);
            if (g > best_gain || (g == best_gain && used[i][k] < best_used))
                best = k, best_gain = g, best_used = used[i][k];
        }
        if (best < 0) { /* no value completes (cannot happen for a completable p) */
            conf_axes_complete(a, p, 1, NULL, NULL);
            return;
        }
        assign(p, a->axes, i, best);
    }
}

static int has_rare(const conf_op_axes *a, const conf_point *p)
{
    for (int i = 0; i < a->naxes; ++i)
        if (CONF_HAS(p, i) && (a->axes[i].rare >> p->k[i] & 1u))
            return 1;
    return 0;
}

/* Pairs covered by points without rare values (plain) and by any point:
 * a backend that refuses the rare values still runs the plain ones, so
 * every pair is covered among them first. */
typedef struct design {
    const conf_op_axes *a;
    pairs *plain, *any;
    int used[CONF_MAX_AXES][CONF_AXIS_VALUES];
    conf_point *out;
    int cap, n;
} design;

static void emit(design *d, conf_point *p, int allow_rare)
{
    const int rare = allow_rare || has_rare(d->a, p);
    fill(d->a, rare ? d->any : d->plain, p, allow_rare, (const int(*)[CONF_AXIS_VALUES])d->used);
    pairs_add(d->any, p, d->a->naxes);
    if (!has_rare(d->a, p))
        pairs_add(d->plain, p, d->a->naxes);
    for (int i = 0; i < d->a->naxes; ++i)
        d->used[i][p->k[i]]++;
    if (d->n < d->cap)
        d->out[d->n] = *p;
    d->n++;
}

/* The full axes' combinations, in order, each completed. */
static void design_full(design *d)
{
    const conf_op_axes *a = d->a;
    int k[CONF_MAX_AXES] = {0};
    do {
        conf_point p = full_point(a, k), q = p;
        const int plain = !has_rare(a, &p) && conf_axes_complete(a, &q, 0, NULL, NULL);
        q = p;
        if (plain || conf_axes_complete(a, &q, 1, NULL, NULL))
            emit(d, &p, !plain);
    } while (next_full(a, k));
}

/* Every uncovered legal pair seeds a point: without rare values first,
 * then the pairs only rare values complete. */
static void design_pairs(design *d, int allow_rare)
{
    const conf_op_axes *a = d->a;
    const pairs *m = allow_rare ? d->any : d->plain;
    for (int i = 0; i < a->naxes; ++i)
        for (int j = i + 1; j < a->naxes; ++j)
            for (int ki = 0; ki < a->axes[i].n; ++ki)
                for (int kj = 0; kj < a->axes[j].n; ++kj) {
                    if (m->m[i][ki][j][kj])
                        continue;
                    conf_point p = {.set = 0};
                    assign(&p, a->axes, i, ki);
                    assign(&p, a->axes, j, kj);
                    if (!allow_rare && has_rare(a, &p))
                        continue;
                    conf_point q = p;
                    if (conf_axes_complete(a, &q, allow_rare, NULL, NULL))
                        emit(d, &p, allow_rare);
                }
}

int conf_axes_design(const conf_op_axes *a, conf_point *out, int cap)
{
    design d = {.a = a,
                .plain = calloc(1, sizeof(pairs)),
                .any = calloc(1, sizeof(pairs)),
                .out = out,
                .cap = cap};
    if (d.plain && d.any) {
        if (a->full)
            design_full(&d);
        design_pairs(&d, 0);
        design_pairs(&d, 1);
    }
    free(d.plain);
    free(d.any);
    return d.n;
}

void conf_push_design(conf_builder *b, const conf_op_axes *a,
                      void (*design_case)(const conf_point *p, int k, conf_case *c))
{
    const int n = conf_axes_design(a, NULL, 0);
    conf_point *pts = malloc((size_t)(n > 0 ? n : 1) * sizeof *pts);
    if (!pts)
        return;
    conf_axes_design(a, pts, n);
    for (int k = 0; k < n; ++k) {
        conf_case c;
        memset(&c, 0, sizeof c);
        c.golden = -1;
        c.designed = 1;
        design_case(&pts[k], k, &c);
        conf_push(b, &c);
    }
    free(pts);
}

unsigned conf_lay_of_view(int64_t view, int32_t ndim, int k)
{
    switch (view) {
    case MLA_ARG_ROWS:
        return CONF_L_PAD | (k % 3 == 2 ? CONF_L_OFFSET : 0);
    case MLA_ARG_STRIDED:
        return ndim > 1 && k % 2 ? CONF_L_COLMAJOR | (k % 4 == 1 ? CONF_L_PAD : 0) : CONF_L_STEP2;
    default:
        return k % 2 ? CONF_L_OFFSET : CONF_L_CONTIG;
    }
}

/* ------------------------------------------------------------ check */

/* The value of axis j that every exercised point with axis i at ki has, or
 * -1 when they differ (or there is none). */
static int tied_value(const conf_point *ex, int n, int i, int ki, int j)
{
    int tie = -1;
    for (int e = 0; e < n; ++e) {
        if (ex[e].k[i] != ki)
            continue;
        if (tie >= 0 && ex[e].k[j] != tie)
            return -1;
        tie = ex[e].k[j];
    }
    return tie;
}

static void report_missing(const conf_op_axes *a, const conf_point *ex, int n,
                           const conf_point *want, int i, int j, const char *backend, FILE *out)
{
    char vi[64], vj[64], tie[64];
    conf_axes_value_str(a, want, i, vi, sizeof vi);
    conf_axes_value_str(a, want, j, vj, sizeof vj);
    fprintf(out, "  %s on %s: no case with %s and %s, which %s accepts", mla_op_name(a->op),
            backend, vi, vj, backend);
    for (int s = 0; s < 2; ++s) {
        const int x = s ? j : i, y = s ? i : j, t = tied_value(ex, n, x, want->k[x], y);
        if (t < 0)
            continue;
        conf_point q = *want;
        q.k[y] = t;
        q.v[y] = a->axes[y].values[t];
        conf_axes_value_str(a, &q, y, tie, sizeof tie);
        fprintf(out, "; the cases couple them: %s only with %s", s ? vj : vi, tie);
        break;
    }
    fprintf(out, "\n");
}

int conf_axes_check(const conf_op_axes *a, const conf_point *ex, int n, conf_accept accept,
                    void *actx, const char *backend, FILE *out, int max_msgs)
{
    pairs *m = calloc(1, sizeof *m);
    if (!m) {
        fprintf(out, "  out of memory\n");
        return 1;
    }
    for (int e = 0; e < n; ++e)
        pairs_add(m, &ex[e], a->naxes);
    int missing = 0;
    for (int i = 0; i < a->naxes; ++i)
        for (int j = i + 1; j < a->naxes; ++j)
            for (int ki = 0; ki < a->axes[i].n; ++ki)
                for (int kj = 0; kj < a->axes[j].n; ++kj) {
                    if (m->m[i][ki][j][kj])
                        continue;
                    conf_point p = {.set = 0};
                    assign(&p, a->axes, i, ki);
                    assign(&p, a->axes, j, kj);
                    if (!conf_axes_complete(a, &p, 1, accept, actx))
                        continue;
                    if (missing++ < max_msgs)
                        report_missing(a, ex, n, &p, i, j, backend, out);
                }
    /* the full axes' combinations */
    int k[CONF_MAX_AXES] = {0};
    do {
        conf_point p = full_point(a, k);
        int seen = 0;
        for (int e = 0; e < n && !seen; ++e) {
            seen = 1;
            for (int i = 0; i < a->naxes; ++i)
                if ((a->full >> i & 1u) && ex[e].k[i] != k[i])
                    seen = 0;
        }
        if (seen || !conf_axes_complete(a, &p, 1, accept, actx) || missing++ >= max_msgs)
            continue;
        fprintf(out, "  %s on %s: no case with", mla_op_name(a->op), backend);
        for (int i = 0; i < a->naxes; ++i)
            if (a->full >> i & 1u) {
                char s[64];
                conf_axes_value_str(a, &p, i, s, sizeof s);
                fprintf(out, " %s", s);
            }
        fprintf(out, " (a combination of the axes crossed fully), which %s accepts\n", backend);
    } while (a->full && next_full(a, k));
    free(m);
    return missing;
}
