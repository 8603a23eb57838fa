/* mla op NAME: the generic runner. Parses the command line against the op's
 * descriptor, moves .npy data into context memory and back (through any
 * strides --stride gives), and writes the outputs. The ops themselves are in
 * op_table.c (number formats), op_table_prepare.c (the prepare path),
 * op_table_mxfp4.c (the MXFP4 GEMM path), op_table_indexer.c (the DSA
 * indexer), op_table_attention.c (fused RoPE + cache, attention) and
 * op_table_layer.c (prepare, the indexer's prepare, the layer); --replay is
 * op_replay.c. */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "apps/cmd.h"
#include "apps/op.h"
#include "apps/suggest.h"
#include "conformance/npy.h"

typedef struct slot {
    const char *name, *path;
    const char *stride_arg, *dtype_arg; /* --stride NAME=..., --dtype NAME=... */
    const char *shape_arg;              /* --shape NAME=... (outputs) */
    void *mem;                          /* context memory */
    size_t span;                        /* its bytes */
    mla_tensor t;
    int used;
} slot;

enum { OP_MAX_SCRATCH = 64 };

struct op_run {
    const op_desc *d;
    mla_context *ctx;
    const char *pkey[OP_MAX_PARAMS], *pval[OP_MAX_PARAMS];
    int nparams, nin, nout, nscratch;
    slot in[OP_MAX_ARGS], out[OP_MAX_ARGS];
    void *scratch[OP_MAX_SCRATCH];
};

static const struct {
    const op_desc *table;
    const int *size;
} tables[] = {
    {mla_op_table, &mla_op_table_size},
    {mla_op_table_prepare, &mla_op_table_prepare_size},
    {mla_op_table_mxfp4, &mla_op_table_mxfp4_size},
    {mla_op_table_indexer, &mla_op_table_indexer_size},
    {mla_op_table_attention, &mla_op_table_attention_size},
    {mla_op_table_layer, &mla_op_table_layer_size},
};
enum { NTABLES = sizeof tables / sizeof tables[0] };

const op_desc *op_at(int i)
{
    for (int k = 0; k < NTABLES; i -= *tables[k++].size)
        if (i < *tables[k].size)
            return &tables[k].table[i];
    return NULL;
}

int op_count(void)
{
    int n = 0;
    for (int k = 0; k < NTABLES; ++k)
        n += *tables[k].size;
    return n;
}

const op_desc *op_find(const char *name)
{
    for (int i = 0; i < op_count(); ++i)
        if (!strcmp(op_at(i)->name, name))
            return op_at(i);
    return NULL;
}

void usage_op(FILE *out)
{
    fprintf(out,
            "usage: mla op NAME --in ARG=FILE.npy ... --out ARG=FILE.npy ... "
            "[--param KEY=VALUE ...]\n"
            "              [--stride ARG=S0,S1,...] [--dtype ARG=DTYPE] [--shape OUT=D0,D1,...]\n"
            "              [--backend auto|reference|cpu|hip] [--threads N]\n"
            "       mla op --replay DIR [--backend B] [--threads N]\n\n"
            "Files: f32 <f4, f16 <f2, bf16 <u2, fp8 / e8m0 / fp4x2 |u1 raw codes (an fp4x2\n"
            "byte holds elements 2i (low nibble) and 2i+1), i32 <i4, i64 <i8. Where a file's\n"
            "dtype is ambiguous, --dtype ARG=... (or the op's in_dtype parameter) names it.\n"
            "--stride lays an input or output out with those element strides (the file is\n"
            "always the logical C-order array), as a strided view of the API; --shape and\n"
            "--dtype give an output the extents and dtype the op would otherwise derive (as\n"
            "an API caller may pass any, refused ones included). --replay reruns\n"
            "a call captured by MLA_DUMP (docs/REPLAY.md) and compares. Default backend:\n"
            "auto.\n\nops:\n");
    for (int i = 0; i < op_count(); ++i) {
        const op_desc *d = op_at(i);
        fprintf(out, "  %s: %s\n    in:", d->name, d->summary);
        for (int k = 0; d->inputs[k]; ++k)
            fprintf(out, " %s", d->inputs[k]);
        fprintf(out, "   out:");
        for (int k = 0; d->outputs[k]; ++k)
            fprintf(out, " %s", d->outputs[k]);
        fprintf(out, "\n");
        for (int k = 0; d->params[k].key; ++k)
            fprintf(out, "    --param %-14s %s%s%s%s\n", d->params[k].key, d->params[k].help,
                    d->params[k].def ? " (default " : "", d->params[k].def ? d->params[k].def : "",
                    d->params[k].def ? ")" : "");
    }
}

int op_usage_error(op_run *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "mla op %s: ", r->d ? r->d->name : "");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, " (see mla op --help)\n");
    va_end(ap);
    return MLA_EXIT_USAGE;
}

mla_context *op_ctx(op_run *r) { return r->ctx; }

int op_check(op_run *r, mla_status st)
{
    if (st == MLA_OK)
        return MLA_EXIT_OK;
    fprintf(stderr, "mla op %s: %s", r->d->name, mla_status_name(st));
    const char *param = mla_context_error_param(r->ctx), *detail = mla_context_error_detail(r->ctx);
    if (param && *param)
        fprintf(stderr, " (%s)", param);
    if (detail && *detail)
        fprintf(stderr, ": %s", detail);
    fprintf(stderr, "\n");
    return MLA_EXIT_FAIL;
}

const char *op_param(op_run *r, const char *key)
{
    for (int i = 0; i < r->nparams; ++i)
        if (!strcmp(r->pkey[i], key))
            return r->pval[i];
    for (int k = 0; r->d->params[k].key; ++k)
        if (!strcmp(r->d->params[k].key, key))
            return r->d->params[k].def;
    return NULL;
}

int op_param_known(op_run *r, const char *key)
{
    for (int k = 0; r->d->params[k].key; ++k)
        if (!strcmp(r->d->params[k].key, key))
            return 1;
    return 0;
}

/* Accepts "fp8_e4m3fn" and the short "e4m3fn". */
static int dtype_from_name(const char *s, mla_dtype *out)
{
    for (int d = 0; d < MLA_DTYPE_COUNT; ++d) {
        const char *n = mla_dtype_name((mla_dtype)d);
        if (!strcmp(s, n) || (!strncmp(n, "fp8_", 4) && !strcmp(s, n + 4))) {
            *out = (mla_dtype)d;
            return 0;
        }
    }
    return -1;
}

int op_param_dtype(op_run *r, const char *key, unsigned allowed, mla_dtype *out)
{
    const char *v = op_param(r, key);
    if (!v)
        return op_usage_error(r, "needs --param %s=DTYPE", key);
    if (dtype_from_name(v, out) || !(allowed & (1u << *out)))
        return op_usage_error(r, "--param %s=%s is not a dtype this op takes there", key, v);
    return MLA_EXIT_OK;
}

int op_param_choice(op_run *r, const char *key, const char *const *names, int n, int *out)
{
    const char *v = op_param(r, key);
    for (int i = 0; v && i < n; ++i)
        if (!strcmp(v, names[i])) {
            *out = i;
            return MLA_EXIT_OK;
        }
    return op_usage_error(r, "--param %s=%s: not one of the choices", key, v ? v : "(missing)");
}

int op_param_i64(op_run *r, const char *key, int64_t *out)
{
    const char *v = op_param(r, key);
    if (!v || mla_app_parse_i64(v, out))
        return op_usage_error(r, "--param %s wants a non-negative integer", key);
    return MLA_EXIT_OK;
}

int op_param_f64(op_run *r, const char *key, double *out)
{
    const char *v = op_param(r, key);
    char *end = NULL;
    if (v && *v)
        *out = strtod(v, &end);
    if (!v || !*v || *end || !isfinite(*out))
        return op_usage_error(r, "--param %s wants a finite number", key);
    return MLA_EXIT_OK;
}

int op_mul(op_run *r, int64_t n, int64_t m, const char *what, int64_t *out)
{
    if (n < 0 || m < 0 || __builtin_mul_overflow(n, m, out))
        return op_usage_error(r, "%s: %lld x %lld does not fit in 64 bits", what, (long long)n,
                              (long long)m);
    return MLA_EXIT_OK;
}

static slot *find_slot(slot *s, int n, const char *name)
{
    for (int i = 0; i < n; ++i)
        if (!strcmp(s[i].name, name))
            return &s[i];
    return NULL;
}

static mla_npy_type npy_type_of(mla_dtype d)
{
    switch (d) {
    case MLA_DTYPE_F32: return MLA_NPY_F4;
    case MLA_DTYPE_F64: return MLA_NPY_F8;
    case MLA_DTYPE_F16: return MLA_NPY_F2;
    case MLA_DTYPE_BF16: return MLA_NPY_U2;
    case MLA_DTYPE_I32: return MLA_NPY_I4;
    case MLA_DTYPE_I64: return MLA_NPY_I8;
    default: return MLA_NPY_U1; /* fp8, e8m0, fp4x2, u8: raw codes */
    }
}

/* Strides for t: row-major, (1, M) when transposed (2-D), or --stride's. */
static int set_strides(op_run *r, slot *s, mla_tensor *t, int transposed)
{
    int64_t st = 1;
    for (int32_t d = t->ndim - 1; d >= 0; --d) {
        t->stride[d] = st;
        st *= t->shape[d] ? t->shape[d] : 1;
    }
    if (transposed && t->ndim == 2) {
        t->stride[0] = 1;
        t->stride[1] = t->shape[0];
    }
    if (s->stride_arg) {
        const char *p = s->stride_arg;
        for (int32_t d = 0; d < t->ndim; ++d) {
            char *end;
            if (mla_app_parse_i64_prefix(p, &t->stride[d], &end) ||
                (*end != (d + 1 < t->ndim ? ',' : '\0')))
                return op_usage_error(r, "--stride %s=%s: want %d non-negative integers", s->name,
                                      s->stride_arg, (int)t->ndim);
            p = end + 1;
        }
        if (t->ndim == 0 && *p)
            return op_usage_error(r, "--stride %s: a 0-d tensor has no strides", s->name);
    }
    /* the span: 1 + sum (extent - 1) stride elements, checked */
    int64_t span = 1, es = (int64_t)mla_dtype_size(t->dtype), term;
    for (int32_t d = 0; d < t->ndim; ++d) {
        if (t->shape[d] == 0) {
            span = 0;
            break;
        }
        if (__builtin_mul_overflow(t->shape[d] - 1, t->stride[d], &term) ||
            __builtin_add_overflow(span, term, &span))
            return op_usage_error(r, "%s: its strides span more than 64 bits", s->name);
    }
    if (__builtin_mul_overflow(span, es, &span) || (uint64_t)span > (uint64_t)SIZE_MAX / 2)
        return op_usage_error(r, "%s: its strides span more than 64 bits", s->name);
    s->span = (size_t)span;
    return MLA_EXIT_OK;
}

/* Logical C-order bytes <-> the strided buffer (to_view: scatter). */
static void restride(const mla_tensor *t, unsigned char *view, unsigned char *flat, int to_view)
{
    const size_t es = mla_dtype_size(t->dtype);
    const int64_t n = mla_tensor_numel(t);
    int64_t idx[MLA_MAX_DIMS] = {0};
    for (int64_t i = 0; i < n; ++i) {
        int64_t off = 0;
        for (int32_t d = 0; d < t->ndim; ++d)
            off += idx[d] * t->stride[d];
        unsigned char *v = view + (size_t)off * es, *f = flat + (size_t)i * es;
        memcpy(to_view ? v : f, to_view ? f : v, es);
        for (int32_t d = t->ndim - 1; d >= 0 && ++idx[d] == t->shape[d]; --d)
            idx[d] = 0;
    }
}

int op_has_input(op_run *r, const char *name)
{
    return find_slot(r->in, r->nin, name) != NULL;
}

int op_has_output(op_run *r, const char *name)
{
    return find_slot(r->out, r->nout, name) != NULL;
}

int op_scratch(op_run *r, size_t bytes, void **out)
{
    if (r->nscratch == OP_MAX_SCRATCH)
        return op_check(r, MLA_ERR_OUT_OF_MEMORY);
    *out = NULL;
    OP_TRY(op_check(r, mla_malloc(r->ctx, bytes ? bytes : 1, out)));
    r->scratch[r->nscratch++] = *out;
    return MLA_EXIT_OK;
}

int op_tensor(op_run *r, mla_dtype dtype, int32_t ndim, const int64_t *shape, const void *host,
              mla_tensor *t)
{
    if (mla_tensor_init(t, NULL, dtype, mla_context_memory(r->ctx), ndim, shape) != MLA_OK)
        return op_usage_error(r, "a bad internal tensor shape");
    const int64_t n = mla_tensor_numel(t);
    int64_t bytes = 0;
    if (n < 0)
        return op_usage_error(r, "an internal tensor's size overflows");
    OP_TRY(op_mul(r, n, (int64_t)mla_dtype_size(dtype), "an internal tensor", &bytes));
    OP_TRY(op_scratch(r, (size_t)bytes, &t->data));
    return op_check(r, host ? mla_memcpy(r->ctx, t->data, host, (size_t)bytes,
                                         MLA_COPY_HOST_TO_CONTEXT)
                            : mla_memset(r->ctx, t->data, 0, (size_t)bytes));
}

/* The slot's buffer in context memory holding host bytes (logical C order)
 * through the slot's strides. */
static int upload(op_run *r, slot *s, const unsigned char *flat)
{
    unsigned char *view = (unsigned char *)flat;
    const int scatter = flat && s->span && !mla_tensor_is_contiguous(&s->t);
    if (scatter && !(view = calloc(s->span, 1)))
        return op_check(r, MLA_ERR_OUT_OF_MEMORY);
    if (scatter)
        restride(&s->t, view, (unsigned char *)flat, 1);
    mla_status st = mla_malloc(r->ctx, s->span ? s->span : 1, &s->mem);
    if (st == MLA_OK && flat)
        st = mla_memcpy(r->ctx, s->mem, view, s->span, MLA_COPY_HOST_TO_CONTEXT);
    else if (st == MLA_OK) /* outputs: defined bytes in the gaps */
        st = mla_memset(r->ctx, s->mem, 0, s->span ? s->span : 1);
    if (view != flat)
        free(view);
    s->t.data = s->mem;
    s->t.memory = mla_context_memory(r->ctx);
    s->used = 1;
    return op_check(r, st);
}

int op_input(op_run *r, const char *name, mla_dtype implied, const char *dtype_key,
             int transposed, mla_tensor *t)
{
    slot *s = find_slot(r->in, r->nin, name);
    if (!s)
        return op_usage_error(r, "missing --in %s=FILE.npy", name);
    char err[300] = "";
    mla_npy a;
    mla_status st = mla_npy_load(s->path, &a, err, sizeof err);
    if (st != MLA_OK) {
        fprintf(stderr, "mla op %s: %s: %s (%s)\n", r->d->name, s->path, err, mla_status_name(st));
        return MLA_EXIT_FAIL;
    }
    static const mla_dtype from_file[MLA_NPY_TYPE_COUNT] = {
        MLA_DTYPE_F32, MLA_DTYPE_F64, MLA_DTYPE_F16, MLA_DTYPE_BF16, MLA_DTYPE_COUNT,
        MLA_DTYPE_COUNT, MLA_DTYPE_I32, MLA_DTYPE_I64};
    mla_dtype dt = implied;
    const char *named = s->dtype_arg ? s->dtype_arg : dtype_key ? op_param(r, dtype_key) : NULL;
    int rc = MLA_EXIT_OK;
    if ((dt == MLA_DTYPE_COUNT || s->dtype_arg) && named) {
        mla_dtype nd = MLA_DTYPE_COUNT;
        if (dtype_from_name(named, &nd))
            rc = op_usage_error(r, "%s: '%s' is not a dtype", name, named);
        else if (dt != MLA_DTYPE_COUNT && nd != dt &&
                 !(nd == MLA_DTYPE_U8 && (dt == MLA_DTYPE_FP4X2 || dt == MLA_DTYPE_E8M0)))
            rc = op_usage_error(r, "%s is %s for this op, not %s", name, mla_dtype_name(dt),
                                named); /* the API takes fp4x2 codes and e8m0 scales as U8 too */
        dt = nd;
    }
    if (rc == MLA_EXIT_OK && dt == MLA_DTYPE_COUNT)
        dt = from_file[a.type];
    if (rc != MLA_EXIT_OK)
        ;
    else if (dt == MLA_DTYPE_COUNT)
        rc = op_usage_error(r, "%s: a %s file is ambiguous; name its dtype with --dtype %s=...",
                            name, mla_npy_type_descr(a.type), name);
    else if (mla_dtype_size(dt) != mla_npy_type_size(a.type))
        rc = op_usage_error(r, "%s: file dtype %s does not hold %s", name,
                            mla_npy_type_descr(a.type), mla_dtype_name(dt));
    else if (a.ndim > MLA_MAX_DIMS)
        rc = op_usage_error(r, "%s: %d dims, at most %d", name, (int)a.ndim, MLA_MAX_DIMS);
    memset(&s->t, 0, sizeof s->t);
    s->t.dtype = dt;
    s->t.ndim = a.ndim;
    if (rc == MLA_EXIT_OK)
        memcpy(s->t.shape, a.shape, sizeof(int64_t) * (size_t)a.ndim);
    if (rc == MLA_EXIT_OK)
        rc = set_strides(r, s, &s->t, transposed);
    if (rc == MLA_EXIT_OK)
        rc = upload(r, s, a.nbytes ? a.data : (const unsigned char *)"");
    mla_npy_free(&a);
    *t = s->t;
    return rc;
}

/* --shape NAME=D0,D1,... (at most MLA_MAX_DIMS; "" for a 0-d tensor). */
static int parse_shape(op_run *r, const slot *s, int32_t *ndim, int64_t *shape)
{
    const char *p = s->shape_arg;
    *ndim = 0;
    while (*p) {
        char *end;
        if (*ndim == MLA_MAX_DIMS || mla_app_parse_i64_prefix(p, &shape[*ndim], &end) ||
            (*end && *end != ','))
            return op_usage_error(r, "--shape %s=%s: want up to %d extents", s->name, s->shape_arg,
                                  MLA_MAX_DIMS);
        ++*ndim;
        p = *end ? end + 1 : end;
    }
    return MLA_EXIT_OK;
}

int op_output(op_run *r, const char *name, mla_dtype dtype, int32_t ndim, const int64_t *shape,
              int transposed, mla_tensor *t)
{
    slot *s = find_slot(r->out, r->nout, name);
    if (!s)
        return op_usage_error(r, "missing --out %s=FILE.npy", name);
    int64_t given[MLA_MAX_DIMS];
    if (s->shape_arg) { /* the caller's shape, as the API may be given any */
        OP_TRY(parse_shape(r, s, &ndim, given));
        shape = given;
    }
    if (s->dtype_arg && dtype_from_name(s->dtype_arg, &dtype))
        return op_usage_error(r, "%s: '%s' is not a dtype", name, s->dtype_arg);
    memset(&s->t, 0, sizeof s->t);
    s->t.dtype = dtype;
    s->t.ndim = ndim;
    int64_t n = 1;
    for (int32_t d = 0; d < ndim; ++d) {
        if (shape[d] < 0 || __builtin_mul_overflow(n, shape[d], &n))
            return op_usage_error(r, "%s: bad output shape", name);
        s->t.shape[d] = shape[d];
    }
    OP_TRY(set_strides(r, s, &s->t, transposed));
    OP_TRY(upload(r, s, NULL));
    *t = s->t;
    return MLA_EXIT_OK;
}

/* Copies an output back, in logical order, and writes its file. */
static int write_output(op_run *r, slot *s)
{
    const size_t es = mla_dtype_size(s->t.dtype), n = (size_t)mla_tensor_numel(&s->t);
    unsigned char *host = malloc(s->span + 1), *flat = host;
    if (!host)
        return op_check(r, MLA_ERR_OUT_OF_MEMORY);
    mla_status st = mla_memcpy(r->ctx, host, s->mem, s->span, MLA_COPY_CONTEXT_TO_HOST);
    if (st == MLA_OK && !mla_tensor_is_contiguous(&s->t) && (flat = malloc(n * es + 1)))
        restride(&s->t, host, flat, 0);
    if (st == MLA_OK && !flat)
        st = MLA_ERR_OUT_OF_MEMORY;
    char err[300] = "";
    if (st == MLA_OK)
        st = mla_npy_save(s->path, npy_type_of(s->t.dtype), s->t.ndim, s->t.shape, flat, err,
                          sizeof err);
    if (flat != host)
        free(flat);
    free(host);
    if (st != MLA_OK && err[0]) {
        fprintf(stderr, "mla op %s: %s\n", r->d->name, err);
        return MLA_EXIT_FAIL;
    }
    return op_check(r, st);
}

/* --name=FILE / --param key=value: split at the first '='. */
static int split(op_run *r, const char *opt, char *arg, const char **key, const char **val)
{
    char *eq = arg ? strchr(arg, '=') : NULL;
    if (!eq || eq == arg)
        return op_usage_error(r, "%s wants NAME=VALUE, got '%s'", opt, arg ? arg : "");
    *eq = '\0';
    *key = arg;
    *val = eq + 1;
    return MLA_EXIT_OK;
}

static int in_list(const char *const *names, const char *s)
{
    for (int i = 0; names[i]; ++i)
        if (!strcmp(names[i], s))
            return 1;
    return 0;
}

/* --stride / --dtype NAME=...: recorded on the input or output NAME. */
static int slot_option(op_run *r, const char *o, const char *k, const char *v)
{
    slot *s = find_slot(r->in, r->nin, k);
    slot *t = find_slot(r->out, r->nout, k);
    if (!s && !t)
        return op_usage_error(r, "%s %s: no --in or --out %s before it", o, k, k);
    slot *both[2] = {s, t};
    for (int i = 0; i < 2; ++i)
        if (both[i])
            *(!strcmp(o, "--stride") ? &both[i]->stride_arg
              : !strcmp(o, "--shape")  ? &both[i]->shape_arg
                                       : &both[i]->dtype_arg) = v;
    return MLA_EXIT_OK;
}

static int parse(op_run *r, int argc, char **argv, mla_context_options *copt, mla_backend *b)
{
    for (int i = 2; i < argc; ++i) {
        const char *o = argv[i], *k = NULL, *v = NULL;
        char *arg = i + 1 < argc ? argv[++i] : NULL;
        int64_t n;
        if (!strcmp(o, "--backend")) {
            if (!arg || mla_app_parse_backend(arg, b))
                return op_usage_error(r, "unknown backend '%s'", arg ? arg : "");
        } else if (!strcmp(o, "--threads")) {
            if (!arg || mla_app_parse_i64(arg, &n) || n > 4096)
                return op_usage_error(r, "--threads wants 0..4096");
            copt->num_threads = (int32_t)n;
        } else if (!strcmp(o, "--stride") || !strcmp(o, "--dtype") || !strcmp(o, "--shape")) {
            OP_TRY(split(r, o, arg, &k, &v));
            OP_TRY(slot_option(r, o, k, v));
        } else if (!strcmp(o, "--in") || !strcmp(o, "--out") || !strcmp(o, "--param")) {
            if (split(r, o, arg, &k, &v))
                return MLA_EXIT_USAGE;
            if (o[2] == 'p') {
                if (!op_param_known(r, k) || r->nparams == OP_MAX_PARAMS)
                    return op_usage_error(r, "unknown parameter '%s'", k);
                r->pkey[r->nparams] = k;
                r->pval[r->nparams++] = v;
                continue;
            }
            int is_in = o[2] == 'i';
            slot *list = is_in ? r->in : r->out;
            int *cnt = is_in ? &r->nin : &r->nout;
            if (!in_list(is_in ? r->d->inputs : r->d->outputs, k) || find_slot(list, *cnt, k))
                return op_usage_error(r, "unknown or repeated %s '%s'", is_in ? "input" : "output",
                                      k);
            list[*cnt].name = k;
            list[(*cnt)++].path = v;
        } else {
            return op_usage_error(r, "unknown option '%s'", o);
        }
    }
    return MLA_EXIT_OK;
}

static const char *op_name_at(int i, void *user)
{
    (void)user;
    const op_desc *d = op_at(i);
    return d ? d->name : NULL;
}

int op_main(int argc, char **argv)
{
    op_run r;
    memset(&r, 0, sizeof r);
    r.d = op_find(argv[1]);
    if (!r.d) {
        fprintf(stderr, "mla op: unknown op '%s'", argv[1]);
        mla_suggest(stderr, argv[1], op_name_at, NULL);
        fprintf(stderr, " (see mla op --help)\n");
        return MLA_EXIT_USAGE;
    }
    mla_context_options copt;
    memset(&copt, 0, sizeof copt);
    mla_backend b = MLA_BACKEND_AUTO;
    int rc = parse(&r, argc, argv, &copt, &b);
    if (rc != MLA_EXIT_OK)
        return rc;
    mla_status st = mla_context_create(b, &copt, &r.ctx);
    if (st != MLA_OK) {
        fprintf(stderr, "mla op %s: cannot create a %s context: %s\n", r.d->name,
                mla_backend_name(b), mla_status_name(st));
        return MLA_EXIT_FAIL;
    }
    rc = r.d->run(&r);
    if (rc == MLA_EXIT_OK)
        rc = op_check(&r, mla_context_synchronize(r.ctx));
    for (int i = 0; rc == MLA_EXIT_OK && i < r.nout; ++i)
        rc = r.out[i].used ? write_output(&r, &r.out[i]) : MLA_EXIT_OK;
    mla_context_synchronize(r.ctx);
    for (int i = 0; i < r.nin; ++i)
        mla_free(r.ctx, r.in[i].mem);
    for (int i = 0; i < r.nout; ++i)
        mla_free(r.ctx, r.out[i].mem);
    for (int i = 0; i < r.nscratch; ++i)
        mla_free(r.ctx, r.scratch[i]);
    mla_context_destroy(r.ctx);
    return rc;
}

int cmd_op(int argc, char **argv)
{
    if (argc < 2) {
        usage_op(stderr);
        return MLA_EXIT_USAGE;
    }
    if (!strcmp(argv[1], "--replay"))
        return op_replay(argc, argv);
    return op_main(argc, argv);
}

/* An output dtype parameter that defaults to a given dtype. */
int op_param_dtype_or(op_run *r, const char *key, unsigned allowed, mla_dtype def, mla_dtype *out)
{
    *out = def;
    return op_param(r, key) ? op_param_dtype(r, key, allowed, out) : MLA_EXIT_OK;
}

/* The values of an I32 / I64 tensor in context memory, on the host (any strides). */
int op_host_indices(op_run *r, const mla_tensor *t, int64_t **out)
{
    const int64_t n = mla_tensor_numel(t);
    const size_t es = mla_dtype_size(t->dtype);
    int64_t span = 0;
    for (int32_t d = 0; d < t->ndim; ++d)
        span += t->shape[d] ? (t->shape[d] - 1) * t->stride[d] : 0;
    span = n ? span + 1 : 0;
    unsigned char *raw = malloc((size_t)span * es + 1), *flat = malloc((size_t)n * es + 1);
    *out = malloc((size_t)n * sizeof **out + 1);
    mla_status st = raw && flat && *out ? mla_memcpy(op_ctx(r), raw, t->data, (size_t)span * es,
                                                     MLA_COPY_CONTEXT_TO_HOST)
                                        : MLA_ERR_OUT_OF_MEMORY;
    if (st == MLA_OK)
        restride(t, raw, flat, 0);
    for (int64_t i = 0; st == MLA_OK && i < n; ++i) {
        if (es == 4) {
            int32_t v;
            memcpy(&v, flat + 4 * i, 4);
            (*out)[i] = v;
        } else {
            memcpy(&(*out)[i], flat + 8 * i, 8);
        }
    }
    free(raw);
    free(flat);
    return op_check(r, st);
}

int op_blocks_for_slots(op_run *r, const mla_tensor *slots, int64_t block_size,
                        int64_t *num_blocks)
{
    int64_t *s = NULL, top = -1;
    const int rc = op_host_indices(r, slots, &s);
    for (int64_t i = 0; rc == MLA_EXIT_OK && i < slots->shape[0]; ++i)
        top = s[i] > top ? s[i] : top;
    free(s);
    *num_blocks = rc == MLA_EXIT_OK && block_size > 0 ? top / block_size + 1 : 0;
    return rc;
}
