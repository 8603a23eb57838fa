/* mla op NAME: the generic runner. Parses the command line against the op's
 * descriptor, moves .npy data into context memory and back, and writes
 * the outputs. The ops themselves are in op_table.c (number formats),
 * op_table_prepare.c (the prepare path), op_table_mxfp4.c (the MXFP4 GEMM path)
 * and op_table_indexer.c (the DSA indexer). */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "apps/cmd.h"
#include "apps/op.h"
#include "conformance/npy.h"

typedef struct slot {
    const char *name, *path;
    void *mem; /* context memory */
    mla_tensor t;
    int transposed, used;
} slot;

struct op_run {
    const op_desc *d;
    mla_context *ctx;
    const char *pkey[OP_MAX_PARAMS], *pval[OP_MAX_PARAMS];
    int nparams, nin, nout;
    slot in[OP_MAX_ARGS], out[OP_MAX_ARGS];
};

/* Op i of the tables (number formats, the prepare path, the MXFP4 GEMM path,
 * the DSA indexer). */
static const op_desc *op_at(int i)
{
    if (i < mla_op_table_size)
        return &mla_op_table[i];
    i -= mla_op_table_size;
    if (i < mla_op_table_prepare_size)
        return &mla_op_table_prepare[i];
    i -= mla_op_table_prepare_size;
    return i < mla_op_table_mxfp4_size ? &mla_op_table_mxfp4[i]
                                       : &mla_op_table_indexer[i - mla_op_table_mxfp4_size];
}

static int op_count(void)
{
    return mla_op_table_size + mla_op_table_prepare_size + mla_op_table_mxfp4_size +
           mla_op_table_indexer_size;
}

void usage_op(FILE *out)
{
    fprintf(out, "usage: mla op NAME --in ARG=FILE.npy ... --out ARG=FILE.npy ... "
                 "[--param KEY=VALUE ...]\n"
                 "              [--backend auto|reference|cpu|hip] [--threads N]\n\n"
                 "Files: f32 <f4, f16 <f2, bf16 <u2, fp8 / e8m0 / fp4x2 |u1 raw codes (an fp4x2\n"
                 "byte holds elements 2i (low nibble) and 2i+1). Where a file's dtype is\n"
                 "ambiguous, --param in_dtype=... names it. Default backend: auto.\n\nops:\n");
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

/* Row-major <-> strides (1, M) for a 2-D array of es-byte elements. */
static void transpose_bytes(unsigned char *dst, const unsigned char *src, int64_t M, int64_t N,
                            size_t es, int to_colmajor)
{
    for (int64_t i = 0; i < M; ++i)
        for (int64_t j = 0; j < N; ++j) {
            size_t rm = (size_t)(i * N + j) * es, cm = (size_t)(j * M + i) * es;
            memcpy(dst + (to_colmajor ? cm : rm), src + (to_colmajor ? rm : cm), es);
        }
}

static void set_strides(mla_tensor *t, int transposed)
{
    int64_t s = 1;
    for (int32_t d = t->ndim - 1; d >= 0; --d) {
        t->stride[d] = s;
        s *= t->shape[d];
    }
    if (transposed && t->ndim == 2) {
        t->stride[0] = 1;
        t->stride[1] = t->shape[0];
    }
}

int op_has_input(op_run *r, const char *name)
{
    return find_slot(r->in, r->nin, name) != NULL;
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
    const char *named = dtype_key ? op_param(r, dtype_key) : NULL;
    if (dt == MLA_DTYPE_COUNT && named && dtype_from_name(named, &dt)) {
        mla_npy_free(&a);
        return op_usage_error(r, "--param %s=%s is not a dtype", dtype_key, named);
    }
    if (dt == MLA_DTYPE_COUNT)
        dt = from_file[a.type];
    int rc = MLA_EXIT_OK;
    if (dt == MLA_DTYPE_COUNT)
        rc = op_usage_error(r, "%s: a %s file is ambiguous; name its dtype with --param %s=...",
                            name, mla_npy_type_descr(a.type), dtype_key ? dtype_key : "in_dtype");
    else if (mla_dtype_size(dt) != mla_npy_type_size(a.type))
        rc = op_usage_error(r, "%s: file dtype %s does not hold %s", name,
                            mla_npy_type_descr(a.type), mla_dtype_name(dt));
    else if (a.ndim > MLA_MAX_DIMS)
        rc = op_usage_error(r, "%s: %d dims, at most %d", name, (int)a.ndim, MLA_MAX_DIMS);
    if (rc != MLA_EXIT_OK) {
        mla_npy_free(&a);
        return rc;
    }
    memset(t, 0, sizeof *t);
    t->dtype = dt;
    t->ndim = a.ndim;
    memcpy(t->shape, a.shape, sizeof(int64_t) * (size_t)a.ndim);
    s->transposed = transposed && a.ndim == 2;
    set_strides(t, s->transposed);
    unsigned char *host = a.data;
    if (s->transposed && a.nbytes && (host = malloc(a.nbytes)))
        transpose_bytes(host, a.data, a.shape[0], a.shape[1], mla_dtype_size(dt), 1);
    st = host || !a.nbytes ? mla_malloc(r->ctx, a.nbytes, &s->mem) : MLA_ERR_OUT_OF_MEMORY;
    if (st == MLA_OK)
        st = mla_memcpy(r->ctx, s->mem, host, a.nbytes, MLA_COPY_HOST_TO_CONTEXT);
    if (host != a.data)
        free(host);
    mla_npy_free(&a);
    t->data = s->mem;
    t->memory = mla_context_memory(r->ctx);
    s->t = *t;
    s->used = 1;
    return op_check(r, st);
}

int op_output(op_run *r, const char *name, mla_dtype dtype, int32_t ndim, const int64_t *shape,
              int transposed, mla_tensor *t)
{
    slot *s = find_slot(r->out, r->nout, name);
    if (!s)
        return op_usage_error(r, "missing --out %s=FILE.npy", name);
    memset(t, 0, sizeof *t);
    t->dtype = dtype;
    t->ndim = ndim;
    int64_t n = 1;
    for (int32_t d = 0; d < ndim; ++d) {
        if (shape[d] < 0 || (shape[d] && n > INT64_MAX / shape[d] / 8))
            return op_usage_error(r, "%s: bad output shape", name);
        t->shape[d] = shape[d];
        n *= shape[d];
    }
    s->transposed = transposed && ndim == 2;
    set_strides(t, s->transposed);
    mla_status st = mla_malloc(r->ctx, (size_t)n * mla_dtype_size(dtype), &s->mem);
    t->data = s->mem;
    t->memory = mla_context_memory(r->ctx);
    s->t = *t;
    s->used = 1;
    return op_check(r, st);
}

/* Copies an output back, row-major, and writes its file. */
static int write_output(op_run *r, slot *s)
{
    size_t es = mla_dtype_size(s->t.dtype), n = 1;
    for (int32_t d = 0; d < s->t.ndim; ++d)
        n *= (size_t)s->t.shape[d];
    unsigned char *host = malloc(n * es + 1), *rm = host;
    if (!host)
        return op_check(r, MLA_ERR_OUT_OF_MEMORY);
    mla_status st = mla_memcpy(r->ctx, host, s->mem, n * es, MLA_COPY_CONTEXT_TO_HOST);
    if (st == MLA_OK && s->transposed && n && (rm = malloc(n * es)))
        transpose_bytes(rm, host, s->t.shape[0], s->t.shape[1], es, 0);
    if (st == MLA_OK && !rm)
        st = MLA_ERR_OUT_OF_MEMORY;
    char err[300] = "";
    if (st == MLA_OK)
        st = mla_npy_save(s->path, npy_type_of(s->t.dtype), s->t.ndim, s->t.shape, rm, err,
                          sizeof err);
    if (rm != host)
        free(rm);
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
        } else if (!strcmp(o, "--in") || !strcmp(o, "--out") || !strcmp(o, "--param")) {
            if (split(r, o, arg, &k, &v))
                return MLA_EXIT_USAGE;
            if (o[2] == 'p') {
                int known = 0;
                for (int p = 0; r->d->params[p].key; ++p)
                    known |= !strcmp(r->d->params[p].key, k);
                if (!known || r->nparams == OP_MAX_PARAMS)
                    return op_usage_error(r, "unknown parameter '%s'", k);
                r->pkey[r->nparams] = k;
                r->pval[r->nparams++] = v;
                continue;
            }
            int is_in = o[2] == 'i';
            slot *list = is_in ? r->in : r->out;
            int *cnt = is_in ? &r->nin : &r->nout;
            if (!in_list(is_in ? r->d->inputs : r->d->outputs, k) || find_slot(list, *cnt, k))
                return op_usage_error(r, "unknown or repeated %s '%s'", is_in ? "input" : "output", k);
            list[*cnt].name = k;
            list[(*cnt)++].path = v;
        } else {
            return op_usage_error(r, "unknown option '%s'", o);
        }
    }
    return MLA_EXIT_OK;
}

int cmd_op(int argc, char **argv)
{
    op_run r;
    memset(&r, 0, sizeof r);
    if (argc < 2) {
        usage_op(stderr);
        return MLA_EXIT_USAGE;
    }
    for (int i = 0; i < op_count(); ++i)
        if (!strcmp(op_at(i)->name, argv[1]))
            r.d = op_at(i);
    if (!r.d) {
        fprintf(stderr, "mla op: unknown op '%s' (see mla op --help)\n", argv[1]);
        return MLA_EXIT_USAGE;
    }
    mla_context_options copt = {0, 0, NULL};
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
    for (int i = 0; i < r.nin; ++i)
        mla_free(r.ctx, r.in[i].mem);
    for (int i = 0; i < r.nout; ++i)
        mla_free(r.ctx, r.out[i].mem);
    mla_context_destroy(r.ctx);
    return rc;
}

/* An output dtype parameter that defaults to a given dtype. */
int op_param_dtype_or(op_run *r, const char *key, unsigned allowed, mla_dtype def, mla_dtype *out)
{
    *out = def;
    return op_param(r, key) ? op_param_dtype(r, key, allowed, out) : MLA_EXIT_OK;
}

/* The values of an I32 / I64 tensor in context memory, on the host. */
int op_host_indices(op_run *r, const mla_tensor *t, int64_t **out)
{
    const int64_t n = mla_tensor_numel(t);
    const size_t es = mla_dtype_size(t->dtype);
    unsigned char *raw = malloc((size_t)n * es + 1);
    *out = malloc((size_t)n * sizeof **out + 1);
    mla_status st = raw && *out ? mla_memcpy(op_ctx(r), raw, t->data, (size_t)n * es,
                                             MLA_COPY_CONTEXT_TO_HOST)
                                : MLA_ERR_OUT_OF_MEMORY;
    for (int64_t i = 0; st == MLA_OK && i < n; ++i) {
        if (es == 4) {
            int32_t v;
            memcpy(&v, raw + 4 * i, 4);
            (*out)[i] = v;
        } else {
            memcpy(&(*out)[i], raw + 8 * i, 8);
        }
    }
    free(raw);
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
