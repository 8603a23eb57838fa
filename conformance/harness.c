/* The conformance driver: selects cases, runs each on every backend under
 * test and on the reference (or reads its golden vectors), compares, and
 * reports. One case is judged in this order: supports() (unsupported is an
 * answer, not a failure), status, guards, then per output bits, class and
 * bound, then the bitwise repeat when asked. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "conformance/report.h"

#ifndef MLA_CONFORMANCE_DATA_DIR
#define MLA_CONFORMANCE_DATA_DIR "conformance/data/golden"
#endif

/* Salts of the output patterns: runs compared with each other differ. */
#define SALT_REFERENCE 0x00u
#define SALT_BACKEND 0x5Au
#define SALT_REPEAT 0xC3u

const conf_suite *const conf_suites[] = {
    &conf_suite_convert,
    &conf_suite_mxfp4_quant,
    &conf_suite_mxfp4_dequant,
    &conf_suite_fp8_group_quant,
    &conf_suite_fp8_group_dequant,
    &conf_suite_rmsnorm,
    &conf_suite_qk_rmsnorm,
    &conf_suite_rope,
    &conf_suite_linear,
    &conf_suite_batched_gemm,
    &conf_suite_cache_write,
    &conf_suite_cache_gather,
    &conf_suite_rope_cache,
    &conf_suite_gemm_a16wfp4,
    &conf_suite_gemm_a4w4,
    &conf_suite_flatten_mxfp4_quant,
    &conf_suite_flatten_fp8_quant,
    &conf_suite_layernorm,
    &conf_suite_hadamard,
    &conf_suite_indexer_k_cache_write,
    &conf_suite_indexer_k_gather,
    &conf_suite_indexer_k_roundtrip,
    &conf_suite_indexer_rope_k_cache,
    &conf_suite_indexer_logits,
    &conf_suite_indexer_search,
    &conf_suite_topk,
    &conf_suite_indexer_head_weights,
    &conf_suite_attention,
    &conf_suite_attention_expanded,
};
const int conf_nsuites = (int)(sizeof conf_suites / sizeof conf_suites[0]);

typedef struct target {
    char label[48];      /* the table's backend column */
    char repro[600];     /* options that select it again */
    mla_context *ctx;    /* NULL: skipped */
    char skip_reason[200];
    const conf_suite *swap; /* runs instead of the suite of its name (tests) */
} target;

const char *mla_conformance_failure_name(mla_conformance_failure kind)
{
    static const char *const names[MLA_CONF_FAIL_COUNT] = {"setup", "status", "guard", "class",
                                                           "bits",  "bound",  "repeat"};
    return ((int)kind >= 0 && kind < MLA_CONF_FAIL_COUNT) ? names[kind] : "?";
}

int conf_any_selected(const char *pattern)
{
    for (int si = 0; si < conf_nsuites; ++si)
        if (conf_op_selected(pattern, conf_suites[si]->name))
            return 1;
    return 0;
}

void mla_conformance_options_init(mla_conformance_options *opt)
{
    memset(opt, 0, sizeof *opt);
    opt->case_id = -1;
}

unsigned mla_conformance_backend_mask(const char *name)
{
    if (!name)
        return 0;
    if (!strcmp(name, "all"))
        return 1u << MLA_BACKEND_REFERENCE | 1u << MLA_BACKEND_CPU | 1u << MLA_BACKEND_HIP;
    for (int b = 0; b < MLA_BACKEND_COUNT; ++b)
        if (!strcmp(name, mla_backend_name((mla_backend)b)))
            return 1u << b;
    return 0;
}

static void fail(conf_result *res, mla_conformance_failure kind, const char *detail)
{
    res->outcome = CONF_FAIL;
    res->kinds |= 1u << kind;
    if (!res->detail[0])
        snprintf(res->detail, sizeof res->detail, "%s", detail);
}

/* Compares every output of got with want (golden bytes or another run). */
static void judge(const conf_suite *s, const conf_case *c, const conf_problem *p,
                  unsigned char **got, unsigned char **want, conf_result *res, int repeat)
{
    int first_output = 1;
    for (int i = 0; i < p->nargs; ++i) {
        const conf_arg *a = &p->arg[i];
        if (!a->output)
            continue;
        size_t skip = (size_t)a->offset * mla_dtype_size(a->t.dtype);
        int golden = !repeat && a->golden;
        conf_arg exact = *a;
        if (repeat) /* a backend must agree with itself bit for bit, whatever its bound */
            exact.bound = (conf_bound){.kind = CONF_BOUND_EXACT, .raw = a->bound.raw};
        conf_cmp r;
        if (repeat || golden || !s->compare || !s->compare(c, p, i, got, want, &r))
            conf_compare(&exact, got[i] + skip, golden ? a->golden : want[i] + skip, golden, &r);
        if (!repeat) {
            res->compared += r.count;
            res->mismatches += r.mismatches;
            if (r.max_err > res->max_err)
                res->max_err = r.max_err;
            res->unit = r.unit;
            /* benchdnn's MISTRUSTED: a mostly-zero main output proves little */
            if (first_output && r.count && 2 * r.zeros > r.count)
                res->mistrusted = 1;
        }
        first_output = 0;
        if (repeat && r.mismatches)
            fail(res, MLA_CONF_FAIL_REPEAT, r.first);
        else if (r.class_bad)
            fail(res, MLA_CONF_FAIL_CLASS, r.first);
        if (!repeat && r.mismatches > r.class_bad)
            fail(res, a->bound.kind == CONF_BOUND_EXACT ? MLA_CONF_FAIL_BITS : MLA_CONF_FAIL_BOUND,
                 r.first);
    }
}

static void free_outs(unsigned char **outs, int n)
{
    for (int i = 0; i < n; ++i)
        free(outs[i]);
}

/* The recorder whose ops a context runs on. */
static conf_recorder *recorder_of(const mla_context *ctx)
{
    return (conf_recorder *)(void *)((char *)(uintptr_t)ctx->ops - offsetof(conf_recorder, ops));
}

/* The recording table: the reference's, with a supports() that notes each
 * variant an entry point asks about (and answers as the reference does). */
static const char *record_supports(const mla_context *ctx, const mla_variant *v)
{
    conf_recorder *r = recorder_of(ctx);
    if (r->n < CONF_MAX_VARIANTS)
        r->v[r->n] = *v;
    r->n++;
    return mla_reference_ops.supports(ctx, v);
}

void conf_recorder_init(conf_recorder *r)
{
    memset(r, 0, sizeof *r);
    r->ops = mla_reference_ops;
    r->ops.name = "reference";
    r->ops.supports = record_supports;
}

mla_status conf_record(mla_context *ref, const conf_suite *s, const conf_case *c,
                       const conf_problem *p, unsigned char **outs, mla_conformance_failure *kind,
                       char *detail, size_t len)
{
    conf_recorder *r = recorder_of(ref);
    r->n = 0;
    mla_status st = conf_execute(ref, s, c, p, SALT_REFERENCE, outs, kind, detail, len);
    if (st == MLA_OK && r->n > CONF_MAX_VARIANTS) {
        snprintf(detail, len, "%s asked supports() %d times, more than recorded", s->name, r->n);
        *kind = MLA_CONF_FAIL_SETUP;
        st = MLA_ERR_INVALID_ARGUMENT;
    }
    return st;
}

static void run_case(const conf_suite *s, const conf_case *c, const target *t, mla_context *ref,
                     const conf_env *env, const mla_conformance_options *opt, conf_result *res)
{
    memset(res, 0, sizeof *res);
    res->unit = "ulp";
    conf_problem p;
    memset(&p, 0, sizeof p);
    char err[300] = "";
    mla_status st = s->setup(c, env, &p, err, sizeof err);
    if (st != MLA_OK) {
        if (st == MLA_ERR_IO && !env->golden_required) {
            res->outcome = CONF_SKIPPED;
            snprintf(res->detail, sizeof res->detail, "no golden data in %s", env->data_dir);
        } else {
            fail(res, MLA_CONF_FAIL_SETUP, err);
        }
        conf_problem_free(&p);
        return;
    }
    unsigned char *want[CONF_MAX_ARGS] = {0}, *got[CONF_MAX_ARGS] = {0};
    mla_conformance_failure kind;
    char detail[300], msg[400];
    /* the reference run: the expected outputs (generated cases), and the
     * variants the entry points ask supports() about, which the backend
     * under test is asked in turn */
    st = conf_record(ref, s, c, &p, want, &kind, detail, sizeof detail);
    if (kind == CONF_NO_KERNEL) { /* nothing to compare with yet */
        res->outcome = CONF_UNSUPPORTED;
        snprintf(res->detail, sizeof res->detail, "op, on the reference");
        goto done;
    }
    if (st != MLA_OK || kind == MLA_CONF_FAIL_GUARD) {
        snprintf(msg, sizeof msg, "the reference run failed: %s", detail);
        fail(res, st != MLA_OK ? kind : MLA_CONF_FAIL_GUARD, msg);
        goto done;
    }
    const conf_recorder *rec = recorder_of(ref);
    for (int i = 0; i < rec->n; ++i) {
        const char *param = "";
        if (mla_supports(t->ctx, &rec->v[i], &param) != MLA_OK) {
            res->outcome = CONF_UNSUPPORTED;
            snprintf(res->detail, sizeof res->detail, "%s", param && *param ? param : "?");
            goto done;
        }
    }
    const conf_suite *ts = t->swap && !strcmp(t->swap->name, s->name) ? t->swap : s;
    st = conf_execute(t->ctx, ts, c, &p, SALT_BACKEND, got, &kind, detail, sizeof detail);
    if (kind == CONF_NO_KERNEL) { /* the backend's slot is empty: not a failure */
        res->outcome = CONF_UNSUPPORTED;
        snprintf(res->detail, sizeof res->detail, "op");
        goto done;
    }
    if (st != MLA_OK) {
        fail(res, kind, detail);
        goto done;
    }
    if (kind == MLA_CONF_FAIL_GUARD)
        fail(res, MLA_CONF_FAIL_GUARD, detail);
    judge(s, c, &p, got, want, res, 0);
    if (opt->repeat) {
        unsigned char *again[CONF_MAX_ARGS] = {0};
        st = conf_execute(t->ctx, ts, c, &p, SALT_REPEAT, again, &kind, detail, sizeof detail);
        if (st != MLA_OK)
            fail(res, kind, detail);
        else
            judge(s, c, &p, again, got, res, 1);
        free_outs(again, p.nargs);
    }
done:
    free_outs(want, p.nargs);
    free_outs(got, p.nargs);
    conf_problem_free(&p);
}

/* The selected cases of suite s (all of them, or the one --repro names):
 * a malloc'd array, its count in *n; NULL on no memory. */
static conf_case *select_cases(const conf_suite *s, const conf_suite *repro_suite,
                               const conf_case *repro, int *n)
{
    if (repro_suite) {
        *n = repro_suite == s;
        conf_case *one = malloc(sizeof *one);
        if (one)
            *one = *repro;
        return one;
    }
    *n = s->build(NULL, 0);
    conf_case *cases = calloc((size_t)*n + 1, sizeof *cases);
    if (cases)
        s->build(cases, *n);
    return cases;
}

static int run_targets(const mla_conformance_options *opt, target *targets, int ntargets,
                       FILE *out, mla_conformance_summary *summary)
{
    const conf_suite *repro_suite = NULL;
    conf_case repro;
    if (opt->repro) {
        char err[200];
        if (conf_parse(opt->repro, conf_suites, conf_nsuites, &repro_suite, &repro, err,
                       sizeof err) != MLA_OK) {
            fprintf(out, "conformance: --repro: %s\n", err);
            return 2;
        }
    }
    mla_context_options copt = {opt->num_threads, 0, NULL};
    conf_recorder rec;
    conf_recorder_init(&rec);
    mla_context *ref = NULL;
    mla_status st = mla_context_create_with_ops(&rec.ops, &copt, &ref);
    if (st != MLA_OK) {
        fprintf(out, "conformance: cannot create the reference context: %s\n", mla_status_name(st));
        return 2;
    }
    conf_env env = {opt->data_dir, opt->suite == MLA_CONF_SUITE_GOLDEN};
    if (!env.data_dir)
        env.data_dir = getenv("MLA_CONFORMANCE_DATA");
    if (!env.data_dir || !*env.data_dir)
        env.data_dir = MLA_CONFORMANCE_DATA_DIR;
    conf_report *rep = conf_report_new();
    int rc = rep ? 0 : 2;
    for (int si = 0; rep && si < conf_nsuites; ++si) {
        const conf_suite *s = conf_suites[si];
        if (repro_suite ? s != repro_suite : !conf_op_selected(opt->op_pattern, s->name))
            continue;
        int n, selected = 0;
        conf_case *cases = select_cases(s, repro_suite, &repro, &n);
        if (!cases) {
            rc = 2;
            break;
        }
        for (int i = 0; i < n; ++i)
            selected += repro_suite || conf_case_selected(opt, &cases[i], i);
        for (int ti = 0; ti < ntargets; ++ti)
            if (!targets[ti].ctx && selected)
                conf_report_backend_skipped(rep, s->name, targets[ti].label,
                                            targets[ti].skip_reason, selected);
        for (int i = 0; i < n; ++i) {
            if (!repro_suite && !conf_case_selected(opt, &cases[i], i))
                continue;
            char desc[1024];
            conf_describe(s, &cases[i], desc, sizeof desc);
            for (int ti = 0; ti < ntargets; ++ti) {
                if (!targets[ti].ctx)
                    continue;
                conf_result res;
                run_case(s, &cases[i], &targets[ti], ref, &env, opt, &res);
                conf_report_case(rep, out, opt->verbose, s->name, repro_suite ? -1 : i, &cases[i],
                                 desc, targets[ti].label, targets[ti].repro, &res);
            }
        }
        free(cases);
    }
    mla_context_destroy(ref);
    if (!rep)
        return 2;
    for (int op = 0; op < MLA_OP_COUNT; ++op) {
        int covered = 0;
        for (int si = 0; si < conf_nsuites; ++si)
            covered |= conf_suites[si]->op == (mla_op)op;
        if (!covered && !opt->repro && conf_op_selected(opt->op_pattern, mla_op_name((mla_op)op)))
            conf_report_uncovered(rep, mla_op_name((mla_op)op));
    }
    conf_report_print(rep, out);
    mla_conformance_summary sum;
    conf_report_summary(rep, &sum);
    for (int ti = 0; ti < ntargets; ++ti)
        sum.backends_skipped += !targets[ti].ctx;
    if (opt->json_path && conf_report_json(rep, opt->json_path) != MLA_OK) {
        fprintf(out, "conformance: cannot write %s\n", opt->json_path);
        rc = 2;
    }
    conf_report_free(rep);
    if (summary)
        *summary = sum;
    if (rc)
        return rc;
    if (sum.failed)
        return 1;
    return (opt->require_device && sum.backends_skipped) ? MLA_CONFORMANCE_EXIT_SKIP : 0;
}

/* The options that select this backend and this data again, for REPRO lines. */
static void repro_args(target *t, const char *backend, const mla_conformance_options *opt)
{
    size_t n = (size_t)snprintf(t->repro, sizeof t->repro, "--backend %s", backend);
    if (opt->num_threads && n < sizeof t->repro)
        n += (size_t)snprintf(t->repro + n, sizeof t->repro - n, " --threads %d",
                              (int)opt->num_threads);
    if (opt->data_dir && n < sizeof t->repro)
        snprintf(t->repro + n, sizeof t->repro - n, " --data %s", opt->data_dir);
}

/* opt->tuning on a target's new context, and every knob it has off its
 * default in the REPRO options, so that a failure reruns on the same kernel
 * paths whether --tuning or the environment chose them. */
static void apply_tuning(target *t, const mla_conformance_options *opt)
{
    if (opt->tuning && mla_context_set_tuning(t->ctx, opt->tuning) != MLA_OK) {
        snprintf(t->skip_reason, sizeof t->skip_reason, "tuning: %s",
                 mla_context_error_detail(t->ctx));
        mla_context_destroy(t->ctx);
        t->ctx = NULL;
        return;
    }
    mla_tuning tu;
    mla_tuning_init(&tu);
    char knobs[256];
    if (mla_context_get_tuning(t->ctx, &tu) != MLA_OK ||
        mla_tuning_format(&tu, 0, knobs, sizeof knobs) == 0)
        return;
    for (char *c = knobs; *c; ++c)
        *c = *c == ' ' ? ',' : *c;
    const size_t n = strlen(t->repro);
    snprintf(t->repro + n, sizeof t->repro - n, " --tuning %s", knobs);
}

/* A context for backend b, or a skip reason. */
static void open_target(mla_backend b, const mla_conformance_options *opt, target *t)
{
    memset(t, 0, sizeof *t);
    mla_context_options copt = {opt->num_threads, 0, NULL};
    snprintf(t->label, sizeof t->label, "%s", mla_backend_name(b));
    repro_args(t, mla_backend_name(b), opt);
    if (!mla_backend_compiled(b) && b != MLA_BACKEND_AUTO) {
        snprintf(t->skip_reason, sizeof t->skip_reason, "not compiled");
        return;
    }
    mla_status st = mla_context_create(b, &copt, &t->ctx);
    if (st != MLA_OK) {
        t->ctx = NULL;
        snprintf(t->skip_reason, sizeof t->skip_reason, "%s",
                 st == MLA_ERR_NO_DEVICE ? "no device" : mla_status_name(st));
        return;
    }
    if (b == MLA_BACKEND_AUTO)
        snprintf(t->label, sizeof t->label, "auto=%s",
                 mla_backend_name(mla_context_backend(t->ctx)));
    apply_tuning(t, opt);
}

int mla_conformance_run(const mla_conformance_options *opt, FILE *out,
                        mla_conformance_summary *summary)
{
    if (!opt || !out)
        return 2;
    if (summary)
        memset(summary, 0, sizeof *summary);
    if (!opt->repro && !conf_any_selected(opt->op_pattern)) {
        fprintf(out, "conformance: --op '%s' matches no op; the ops:", opt->op_pattern);
        for (int si = 0; si < conf_nsuites; ++si)
            fprintf(out, " %s", conf_suites[si]->name);
        fprintf(out, "\n");
        return 2;
    }
    if (opt->list) {
        conf_list_cases(opt, conf_suites, conf_nsuites, out);
        return 0;
    }
    static const mla_backend order[] = {MLA_BACKEND_AUTO, MLA_BACKEND_REFERENCE, MLA_BACKEND_CPU,
                                        MLA_BACKEND_HIP};
    unsigned mask = opt->backends ? opt->backends : 1u << MLA_BACKEND_CPU;
    target targets[4];
    int n = 0;
    for (int i = 0; i < 4; ++i)
        if (mask & (1u << order[i]))
            open_target(order[i], opt, &targets[n++]);
    int rc = run_targets(opt, targets, n, out, summary);
    for (int i = 0; i < n; ++i)
        mla_context_destroy(targets[i].ctx);
    return rc;
}

int mla_conformance_run_ops(const mla_conformance_options *opt, const mla_backend_ops *ops,
                            const char *label, FILE *out, mla_conformance_summary *summary)
{
    return mla_conformance_run_ops_swap(opt, ops, label, NULL, out, summary);
}

int mla_conformance_run_ops_swap(const mla_conformance_options *opt, const mla_backend_ops *ops,
                                 const char *label, const conf_suite *swap, FILE *out,
                                 mla_conformance_summary *summary)
{
    if (!opt || !ops || !out)
        return 2;
    if (summary)
        memset(summary, 0, sizeof *summary);
    if (!opt->repro && !conf_any_selected(opt->op_pattern)) {
        fprintf(out, "conformance: --op '%s' matches no op\n", opt->op_pattern);
        return 2;
    }
    mla_context_options copt = {opt->num_threads, 0, NULL};
    target t;
    memset(&t, 0, sizeof t);
    snprintf(t.label, sizeof t.label, "%s", label ? label : ops->name);
    repro_args(&t, t.label, opt);
    t.swap = swap;
    mla_status st = mla_context_create_with_ops(ops, &copt, &t.ctx);
    if (st != MLA_OK) {
        t.ctx = NULL;
        snprintf(t.skip_reason, sizeof t.skip_reason, "%s", mla_status_name(st));
    } else {
        apply_tuning(&t, opt);
    }
    int rc = run_targets(opt, &t, 1, out, summary);
    mla_context_destroy(t.ctx);
    return rc;
}
