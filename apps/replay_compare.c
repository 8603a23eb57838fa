/* The replay's verdict (apps/replay.h, docs/REPLAY.md). On the backend the
 * call was dumped on, every output must come back with the same bits (the
 * library is deterministic there). On another backend: the ops MLA.md
 * defines to the bit, the same bits; the caches, the rule of
 * apps/replay_cache.c; every other output against an oracle computed from
 * the dumped inputs, within the bound the conformance runner holds every
 * backend to: the dumped values and the rerun's values each, so that a
 * wrong dump is caught as surely as a wrong rerun. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps/cmd.h"
#include "apps/replay.h"

/* Ops whose results are defined to the bit (MLA.md): any difference fails. */
static const char *const exact_ops[] = {"convert",
                                        "mxfp4_quant",
                                        "mxfp4_dequant",
                                        "fp8_group_quant",
                                        "fp8_group_dequant",
                                        "rope",
                                        "cache_write",
                                        "cache_gather",
                                        "rope_cache",
                                        "flatten_mxfp4_quant",
                                        "flatten_fp8_quant",
                                        "indexer_k_cache_write",
                                        "indexer_k_gather",
                                        "topk",
                                        "indexer_head_weights",
                                        NULL};

static int in_list(const char *const *l, const char *s)
{
    for (; *l; ++l)
        if (!strcmp(*l, s))
            return 1;
    return 0;
}

int replay_wants_reference(const char *op)
{
    static const char *const composites[] = {"prepare", "indexer_prepare", "layer", NULL};
    return !in_list(exact_ops, op) && !in_list(composites, op);
}

const char *replay_word(const replay *r, const char *opt, const char *name)
{
    const size_t k = strlen(name);
    for (int i = 0; i + 1 < r->n; ++i)
        if (!strcmp(r->args[i], opt) && !strncmp(r->args[i + 1], name, k) &&
            r->args[i + 1][k] == '=')
            return r->args[i + 1] + k + 1;
    return NULL;
}

double replay_param(const replay *r, const char *key, double def)
{
    const char *v = replay_word(r, "--param", key);
    return v ? strtod(v, NULL) : def;
}

replay_out *replay_find(replay *r, const char *name)
{
    for (int i = 0; i < r->nout; ++i)
        if (!strcmp(r->out[i].name, name))
            return &r->out[i];
    return NULL;
}

int replay_say(replay_out *o, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    printf("  %-12s ", o->name);
    vprintf(fmt, ap);
    printf("\n");
    va_end(ap);
    o->judged = 1;
    return rc;
}

static mla_dtype dtype_named(const char *name, mla_dtype def)
{
    for (int d = 0; name && d < MLA_DTYPE_COUNT; ++d)
        if (!strcmp(name, mla_dtype_name((mla_dtype)d)))
            return (mla_dtype)d;
    return def;
}

mla_dtype replay_dtype(const replay *r, const char *name, mla_npy_type file)
{
    static const mla_dtype d[MLA_NPY_TYPE_COUNT] = {MLA_DTYPE_F32,  MLA_DTYPE_F64, MLA_DTYPE_F16,
                                                    MLA_DTYPE_BF16, MLA_DTYPE_U8,  MLA_DTYPE_U8,
                                                    MLA_DTYPE_I32,  MLA_DTYPE_I64};
    return dtype_named(replay_word(r, "--dtype", name), d[file]);
}

mla_dtype replay_dtype_param(const replay *r, const char *key, mla_dtype def)
{
    return dtype_named(replay_word(r, "--param", key), def);
}

int replay_load(const char *path, mla_npy *a)
{
    char err[300];
    if (mla_npy_load(path, a, err, sizeof err) == MLA_OK)
        return 0;
    fprintf(stderr, "mla op --replay: %s: %s\n", path, err);
    return -1;
}

/* A contiguous argument of p holding a's data as dtype dt (NULL data: an output). */
static int add_arg(conf_problem *p, const char *name, int role, mla_dtype dt, const mla_npy *a)
{
    int64_t shape[MLA_MAX_DIMS];
    const int32_t nd = a ? a->ndim : 1;
    for (int32_t d = 0; d < nd && d < MLA_MAX_DIMS; ++d)
        shape[d] = a ? a->shape[d] : 0;
    const size_t es = mla_dtype_size(dt);
    if (nd > MLA_MAX_DIMS || (a && a->nbytes != (size_t)a->numel * es) ||
        conf_add_arg(p, name, role, dt, nd, shape, CONF_L_CONTIG) != MLA_OK) {
        fprintf(stderr, "mla op --replay: %s: not a %s array the judge can take\n", name,
                mla_dtype_name(dt));
        return -1;
    }
    conf_arg *g = &p->arg[p->nargs - 1];
    if (role == CONF_IN && a && a->nbytes)
        memcpy(conf_arg_elem0(g), a->data, a->nbytes);
    return p->nargs - 1;
}

int replay_add_input(const replay *r, conf_problem *p, const char *name, mla_dtype implied)
{
    const char *path = replay_word(r, "--in", name);
    if (!path)
        return add_arg(p, name, CONF_IN, implied == MLA_DTYPE_COUNT ? MLA_DTYPE_U8 : implied, NULL);
    mla_npy a;
    if (replay_load(path, &a))
        return -1;
    /* --dtype names it, else the op implies it, else the file's type does */
    const int named = replay_word(r, "--dtype", name) != NULL;
    const mla_dtype dt =
        !named && implied != MLA_DTYPE_COUNT ? implied : replay_dtype(r, name, a.type);
    const int i = add_arg(p, name, CONF_IN, dt, &a);
    mla_npy_free(&a);
    return i;
}

int replay_add_output(replay *r, conf_problem *p, const char *name, replay_out **out)
{
    replay_out *o = replay_find(r, name);
    if (out)
        *out = o;
    if (!o) {
        fprintf(stderr, "mla op --replay: the replay line has no output %s\n", name);
        return -1;
    }
    return add_arg(p, name, CONF_OUT, o->dt, &o->dumped);
}

/* One side against the oracle under a's bound: 0 when within. */
static int side(const conf_arg *a, const mla_npy *x, const unsigned char *oracle, conf_cmp *c)
{
    conf_compare(a, x->data, oracle, 1, c);
    return c->mismatches == 0;
}

static void say_side(const char *who, const conf_cmp *c)
{
    if (!c->mismatches)
        printf("%s within (worst %.3g of it)", who, c->max_err);
    else
        printf("%s OUTSIDE: %lld of %lld values, first %s", who, (long long)c->mismatches,
               (long long)c->count, c->first);
}

int replay_judge(replay *r, const conf_problem *p, int i)
{
    const conf_arg *a = &p->arg[i];
    replay_out *o = replay_find(r, a->name);
    if (!o->has_ref)
        return replay_say(o, MLA_EXIT_FAIL, "DIFFERENT: no reference rerun to judge it against");
    conf_cmp cd, cg;
    const int ok = side(a, &o->dumped, o->ref.data, &cd) & side(a, &o->got, o->ref.data, &cg);
    printf("  %-12s against the reference backend's rerun, within the conformance bound: ",
           o->name);
    say_side("dumped", &cd);
    say_side("; rerun", &cg);
    printf("\n");
    o->judged = 1;
    return ok ? MLA_EXIT_OK : MLA_EXIT_FAIL;
}

static int first_diff(const mla_npy *a, const mla_npy *b, int64_t *ndiff)
{
    const size_t es = mla_npy_type_size(a->type);
    int64_t first = -1;
    *ndiff = 0;
    for (int64_t i = a->numel - 1; i >= 0; --i)
        if (memcmp((char *)a->data + i * es, (char *)b->data + i * es, es))
            first = i, ++*ndiff;
    return (int)first;
}
/* On the dumping backend: the same bits. */
static int same_bits(replay_out *o)
{
    int64_t ndiff;
    const int first = first_diff(&o->got, &o->dumped, &ndiff);
    if (first < 0)
        return replay_say(o, MLA_EXIT_OK, "bit-identical (%lld values)", (long long)o->got.numel);
    return replay_say(o, MLA_EXIT_FAIL,
                      "DIFFERENT: %lld of %lld values differ, first at %d (the same backend must "
                      "give the same bits)",
                      (long long)ndiff, (long long)o->got.numel, first);
}

/* Bit-defined outputs: the same bits, except that a NaN matches any NaN
 * where the conformance runner lets it (the head weights' products of a
 * NaN; elsewhere MLA.md pins the NaN a conversion writes). */
static int exact(replay *r, replay_out *o)
{
    const int nan_any = !strcmp(r->op, "indexer_head_weights");
    conf_problem p;
    memset(&p, 0, sizeof p);
    const int i = add_arg(&p, o->name, CONF_OUT, o->dt, &o->dumped);
    int rc = MLA_EXIT_FAIL;
    if (i >= 0) {
        p.arg[i].bound.nan_any = nan_any;
        conf_cmp c;
        conf_compare(&p.arg[i], o->got.data, o->dumped.data, 1, &c);
        rc = c.mismatches ? MLA_EXIT_FAIL : MLA_EXIT_OK;
        int64_t ndiff;
        if (first_diff(&o->got, &o->dumped, &ndiff) < 0)
            replay_say(o, rc, "bit-identical (%lld values)", (long long)o->got.numel);
        else if (rc)
            replay_say(o, rc, "DIFFERENT (the op is bit-defined): %lld of %lld values, first %s",
                       (long long)c.mismatches, (long long)c.count, c.first);
        else
            replay_say(o, rc, "the same values (NaN payloads aside: the format leaves them free)");
    }
    conf_problem_free(&p);
    return rc;
}

static int load_out(replay *r, replay_out *o, const char *got_path)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/out.%s.npy", r->dir, o->name);
    if (replay_load(got_path, &o->got) || replay_load(path, &o->dumped))
        return -1;
    const char *slash = strrchr(got_path, '/');
    snprintf(path, sizeof path, "%.*s/ref.%s.npy", (int)(slash ? slash - got_path : 0), got_path,
             o->name);
    FILE *fp = fopen(path, "rb");
    if (fp) {
        fclose(fp);
        if (replay_load(path, &o->ref))
            return -1;
        o->has_ref = 1;
    } else if (r->on_reference && replay_wants_reference(r->op)) {
        o->ref = o->got;
        o->ref.data = malloc(o->got.nbytes + 1);
        if (!o->ref.data)
            return -1;
        memcpy(o->ref.data, o->got.data, o->got.nbytes);
        o->has_ref = 1;
    }
    o->dt = replay_dtype(r, o->name, o->dumped.type);
    return 0;
}

static int same_shape(const mla_npy *a, const mla_npy *b)
{
    int same = a->type == b->type && a->ndim == b->ndim;
    for (int32_t d = 0; same && d < a->ndim; ++d)
        same = a->shape[d] == b->shape[d];
    return same;
}

int replay_compare(replay *r)
{
    int rc = MLA_EXIT_OK;
    r->nout = 0;
    for (int i = 0; i + 1 < r->n && rc == MLA_EXIT_OK; ++i) {
        const char *eq = strchr(r->args[i + 1], '=');
        if (strcmp(r->args[i], "--out") != 0 || !eq)
            continue;
        if (r->nout == REPLAY_MAX_OUT)
            return MLA_EXIT_FAIL;
        replay_out *o = &r->out[r->nout++];
        memset(o, 0, sizeof *o);
        snprintf(o->name, sizeof o->name, "%.*s", (int)(eq - r->args[i + 1]), r->args[i + 1]);
        if (load_out(r, o, eq + 1))
            rc = MLA_EXIT_FAIL;
        else if (!same_shape(&o->got, &o->dumped) || (o->has_ref && !same_shape(&o->ref, &o->got)))
            rc = replay_say(o, MLA_EXIT_FAIL, "DIFFERENT shape or dtype from the dump");
    }
    for (int i = 0; rc == MLA_EXIT_OK && r->same_backend && i < r->nout; ++i)
        rc |= same_bits(&r->out[i]);
    if (rc == MLA_EXIT_OK && !r->same_backend) {
        const int by[3] = {replay_bounds(r), replay_layer(r), replay_bit_caches(r)};
        for (int k = 0; k < 3; ++k)
            rc = by[k] > 0 ? by[k] : rc;
        for (int i = 0; i < r->nout && rc == MLA_EXIT_OK; ++i) {
            replay_out *o = &r->out[i];
            if (!o->judged)
                rc = in_list(exact_ops, r->op)
                         ? exact(r, o)
                         : replay_say(o, MLA_EXIT_FAIL, "DIFFERENT: no rule judges it");
        }
    }
    for (int i = 0; i < r->nout; ++i)
        mla_npy_free(&r->out[i].got), mla_npy_free(&r->out[i].dumped), mla_npy_free(&r->out[i].ref);
    printf("replay: %s\n",
           rc == MLA_EXIT_OK ? "consistent with the dump" : "DIFFERS from the dump");
    return rc;
}
