/* Problems: the arguments of one case, their views and host buffers, and
 * golden data loaded into them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conformance/conf.h"
#include "conformance/npy.h"

/* Poison for input gaps and guards: 0xFF bytes are NaN in f32, f16, bf16,
 * e4m3fn and e8m0, so a kernel that reads outside its view shows it. */
#define CONF_POISON 0xFF

void conf_iter_init(conf_iter *it, const mla_tensor *t)
{
    memset(it, 0, sizeof *it);
    it->ndim = t->ndim;
    it->left = 1;
    for (int32_t d = 0; d < t->ndim; ++d) {
        it->shape[d] = t->shape[d];
        it->stride[d] = t->stride[d];
        it->left *= t->shape[d];
    }
}

int conf_iter_next(conf_iter *it, int64_t *off)
{
    if (it->left <= 0)
        return 0;
    *off = it->off;
    if (--it->left == 0)
        return 1;
    for (int32_t d = it->ndim - 1; d >= 0; --d) {
        it->off += it->stride[d];
        if (++it->idx[d] < it->shape[d])
            break;
        it->off -= it->stride[d] * it->shape[d];
        it->idx[d] = 0;
    }
    return 1;
}

void conf_index_str(const mla_tensor *t, int64_t i, char *buf, size_t len)
{
    int64_t idx[MLA_MAX_DIMS];
    for (int32_t d = t->ndim - 1; d >= 0; --d) {
        idx[d] = t->shape[d] ? i % t->shape[d] : 0;
        i = t->shape[d] ? i / t->shape[d] : 0;
    }
    size_t n = (size_t)snprintf(buf, len, "[");
    for (int32_t d = 0; d < t->ndim && n < len; ++d)
        n += (size_t)snprintf(buf + n, len - n, "%s%lld", d ? ", " : "", (long long)idx[d]);
    if (n < len)
        snprintf(buf + n, len - n, "]");
}

static const char *const lay_names[] = {"pad", "step2", "colmajor", "offset"};
#define NLAY ((int)(sizeof lay_names / sizeof lay_names[0]))

void conf_layout_str(unsigned lay, char *buf, size_t len)
{
    size_t n = 0;
    buf[0] = '\0';
    for (int i = 0; i < NLAY; ++i)
        if (lay & (1u << i) && n < len)
            n += (size_t)snprintf(buf + n, len - n, "%s%s", n ? "+" : "", lay_names[i]);
    if (!n)
        snprintf(buf, len, "contig");
}

int conf_layout_parse(const char *s, unsigned *lay)
{
    *lay = 0;
    if (!strcmp(s, "contig"))
        return 1;
    while (*s) {
        const size_t n = strcspn(s, "+");
        int i = 0;
        while (i < NLAY && (strlen(lay_names[i]) != n || strncmp(s, lay_names[i], n)))
            ++i;
        if (i == NLAY || (s[n] == '+' && !s[n + 1]))
            return 0;
        *lay |= 1u << i;
        s += n + (s[n] == '+');
    }
    return 1;
}

/* Strides of a layout: the fastest dim first (the last, or the first when
 * column-major), a gap after the innermost run when padded. */
static void layout_strides(int32_t ndim, const int64_t *shape, unsigned lay, int64_t *stride)
{
    int64_t s = (lay & CONF_L_STEP2) ? 2 : 1;
    for (int32_t k = 0; k < ndim; ++k) {
        int32_t d = (lay & CONF_L_COLMAJOR) ? k : ndim - 1 - k;
        stride[d] = s;
        s *= shape[d] > 0 ? shape[d] : 1;
        if (k == 0 && (lay & CONF_L_PAD))
            s += 3;
    }
}

/* The common part: a view of ndim dims at element offset `offset`, its
 * buffer extended by `tail` elements past the last one. */
static mla_status add_arg(conf_problem *p, const char *name, int role, mla_dtype dtype,
                          int32_t ndim, const int64_t *shape, const int64_t *stride,
                          int64_t offset, int64_t tail)
{
    if (p->nargs >= CONF_MAX_ARGS || ndim > MLA_MAX_DIMS || offset < 0)
        return MLA_ERR_INVALID_ARGUMENT;
    conf_arg *a = &p->arg[p->nargs];
    memset(a, 0, sizeof *a);
    a->name = name;
    a->output = role != CONF_IN;
    a->inout = role == CONF_INOUT;
    a->t.dtype = dtype;
    a->t.ndim = ndim;
    int64_t last = 0, numel = 1;
    for (int32_t d = 0; d < ndim; ++d) {
        a->t.shape[d] = shape[d];
        a->t.stride[d] = stride[d];
        last += (shape[d] - 1) * stride[d];
        numel *= shape[d];
    }
    a->offset = offset;
    int64_t elems = numel ? offset + last + 1 + tail : 0;
    a->bytes = (size_t)elems * mla_dtype_size(dtype);
    a->bound.kind = CONF_BOUND_EXACT;
    if (!a->output || a->inout) {
        a->host = malloc(a->bytes ? a->bytes : 1);
        if (!a->host)
            return MLA_ERR_OUT_OF_MEMORY;
        memset(a->host, CONF_POISON, a->bytes);
    }
    p->nargs++;
    return MLA_OK;
}

mla_status conf_add_arg_strided(conf_problem *p, const char *name, int output, mla_dtype dtype,
                                int32_t ndim, const int64_t *shape, const int64_t *stride,
                                unsigned lay)
{
    /* Gaps of padded layouts also follow the last row, so a write one past
     * the last element lands in checked bytes, not only in the guard. */
    return add_arg(p, name, output, dtype, ndim, shape, stride, (lay & CONF_L_OFFSET) ? 1 : 0,
                   (lay & CONF_L_PAD) ? 3 : 0);
}

mla_status conf_add_view(conf_problem *p, const char *name, int role, mla_dtype dtype,
                         int32_t ndim, const int64_t *shape, const int64_t *stride,
                         int64_t offset)
{
    return add_arg(p, name, role, dtype, ndim, shape, stride, offset, 0);
}

mla_status conf_add_arg(conf_problem *p, const char *name, int output, mla_dtype dtype,
                        int32_t ndim, const int64_t *shape, unsigned lay)
{
    int64_t stride[MLA_MAX_DIMS];
    if (ndim > MLA_MAX_DIMS)
        return MLA_ERR_INVALID_ARGUMENT;
    layout_strides(ndim, shape, lay, stride);
    return conf_add_arg_strided(p, name, output, dtype, ndim, shape, stride, lay);
}

unsigned char *conf_arg_elem0(const conf_arg *a)
{
    return a->host + a->offset * (int64_t)mla_dtype_size(a->t.dtype);
}

int64_t conf_numel(const conf_arg *a)
{
    int64_t n = 1;
    for (int32_t d = 0; d < a->t.ndim; ++d)
        n *= a->t.shape[d];
    return n;
}

/* Loads a golden file and checks it has the argument's element count and width. */
static mla_status load_golden(conf_problem *p, int i, const conf_env *env, const char *file,
                              mla_npy *arr, char *err, size_t errlen)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", env->data_dir ? env->data_dir : ".", file);
    char why[256] = "";
    mla_status st = mla_npy_load(path, arr, why, sizeof why);
    if (st != MLA_OK) {
        snprintf(err, errlen, "golden %s: %s (%s)", path, why, mla_status_name(st));
        return st;
    }
    const conf_arg *a = &p->arg[i];
    if (arr->numel != conf_numel(a) ||
        mla_npy_type_size(arr->type) != mla_dtype_size(a->t.dtype)) {
        snprintf(err, errlen, "golden %s: %lld x %s does not fit %s (%lld x %s)", file,
                 (long long)arr->numel, mla_npy_type_descr(arr->type), a->name,
                 (long long)conf_numel(a), mla_dtype_name(a->t.dtype));
        mla_npy_free(arr);
        return MLA_ERR_FORMAT;
    }
    return MLA_OK;
}

mla_status conf_golden_output(conf_problem *p, int i, const conf_env *env, const char *file,
                              char *err, size_t errlen)
{
    mla_npy arr;
    mla_status st = load_golden(p, i, env, file, &arr, err, errlen);
    if (st != MLA_OK)
        return st;
    p->owned[p->nowned++] = arr.data;
    p->arg[i].golden = arr.data;
    return MLA_OK;
}

mla_status conf_golden_input(conf_problem *p, int i, const conf_env *env, const char *file,
                             char *err, size_t errlen)
{
    mla_npy arr;
    mla_status st = load_golden(p, i, env, file, &arr, err, errlen);
    if (st != MLA_OK)
        return st;
    conf_arg *a = &p->arg[i];
    size_t es = mla_dtype_size(a->t.dtype);
    conf_iter it;
    int64_t off, k = 0;
    conf_iter_init(&it, &a->t);
    while (conf_iter_next(&it, &off))
        memcpy(conf_arg_elem0(a) + off * (int64_t)es, (const unsigned char *)arr.data + k++ * es,
               es);
    mla_npy_free(&arr);
    return MLA_OK;
}

void conf_push(conf_builder *b, conf_case *c)
{
    c->suite = b->suite;
    c->seed = conf_case_seed(b->suite, c);
    b->suite->label(c);
    const size_t n = strlen(c->label);
    if (c->note)
        snprintf(c->label + n, sizeof c->label - n, "%s", c->note);
    if (b->cases && b->n < b->cap)
        b->cases[b->n] = *c;
    b->n++;
}

void conf_problem_free(conf_problem *p)
{
    for (int i = 0; i < p->nargs; ++i)
        free(p->arg[i].host);
    for (int i = 0; i < p->nowned; ++i)
        free(p->owned[i]);
    memset(p, 0, sizeof *p);
}

double *conf_tol_alloc(conf_problem *p, int i, double ulps)
{
    conf_arg *a = &p->arg[i];
    int64_t n = conf_numel(a) * (a->t.dtype == MLA_DTYPE_FP4X2 ? 2 : 1);
    if (p->nowned >= (int)(sizeof p->owned / sizeof p->owned[0]))
        return NULL;
    double *tol = calloc((size_t)(n > 0 ? n : 1), sizeof *tol);
    if (!tol)
        return NULL;
    p->owned[p->nowned++] = tol;
    a->bound.kind = CONF_BOUND_TOL;
    a->bound.limit = ulps;
    a->bound.zero_sign_free = 1;
    a->bound.tol = tol;
    return tol;
}

unsigned char *conf_elem_at(const conf_arg *a, unsigned char *elem0, int64_t k)
{
    int64_t off = 0;
    for (int32_t d = a->t.ndim - 1; d >= 0; --d) {
        off += (k % a->t.shape[d]) * a->t.stride[d];
        k /= a->t.shape[d];
    }
    return elem0 + off * (int64_t)mla_dtype_size(a->t.dtype);
}

double conf_in_value(const conf_arg *a, int64_t k)
{
    size_t es = mla_dtype_size(a->t.dtype);
    return conf_decode_value(a->t.dtype, conf_load_bits(conf_elem_at(a, conf_arg_elem0(a), k), es));
}
