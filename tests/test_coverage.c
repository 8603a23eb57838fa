/* Accepted == covered: for every op and every backend compiled in (the
 * reference, the CPU and, in a HIP build, the HIP table's supports(), asked
 * on a context without a device), every pair of values of every two variant
 * axes (conformance/cover.h) that the backend's supports() accepts in some
 * legal combination, and every accepted combination of the axes crossed
 * fully, must be exercised on that backend by a conformance case. A case's
 * axis values are those of the variants its entry points built in a
 * reference run (recorded), so a case file that ties two axes together
 * (inputs in q_cat's dtype) shows as pairs no case has.
 *
 *   test_coverage [golden data dir]
 *
 * It also checks that every recorded variant falls inside its op's axis
 * table, that every op has a table, and (a control) that the check catches
 * the coupling that once hid a wrong HIP kernel: fused RoPE + cache cases
 * whose q_pe is f32 exactly when q_cat is. */
#include <stdlib.h>
#include <string.h>

#include "conformance/cover.h"

typedef struct recorded {
    const conf_suite *s;
    char desc[1024];
    mla_variant v[CONF_MAX_VARIANTS];
    int nv;
} recorded;

typedef struct backend {
    char name[32];
    mla_context ctx; /* no device: only ops and target are set */
} backend;

static int accept(void *ctx, const mla_variant *v)
{
    const mla_context *c = ctx;
    return c->ops->supports(c, v) == NULL;
}

static int runs_on(const recorded *r, backend *b)
{
    for (int i = 0; i < r->nv; ++i)
        if (!accept(&b->ctx, &r->v[i]))
            return 0;
    return 1;
}

/* Every case of every suite through a recording reference context. */
static recorded *record_all(const char *data_dir, int *n, int *errors)
{
    int total = 0;
    for (int si = 0; si < conf_nsuites; ++si)
        total += conf_suites[si]->build(NULL, 0);
    recorded *r = calloc((size_t)total + 1, sizeof *r);
    conf_recorder rec;
    conf_recorder_init(&rec);
    mla_context *ref = NULL;
    if (!r || mla_context_create_with_ops(&rec.ops, NULL, &ref) != MLA_OK) {
        printf("FAIL cannot set up the recording context\n");
        free(r);
        ++*errors;
        return NULL;
    }
    const conf_env env = {data_dir, 0};
    *n = 0;
    for (int si = 0; si < conf_nsuites; ++si) {
        const conf_suite *s = conf_suites[si];
        const int nc = s->build(NULL, 0);
        conf_case *cases = calloc((size_t)nc + 1, sizeof *cases);
        if (!cases)
            continue;
        s->build(cases, nc);
        for (int i = 0; i < nc; ++i) {
            conf_problem p;
            memset(&p, 0, sizeof p);
            char err[300] = "", detail[300] = "";
            recorded *x = &r[*n];
            x->s = s;
            conf_describe(s, &cases[i], x->desc, sizeof x->desc);
            mla_status st = s->setup(&cases[i], &env, &p, err, sizeof err);
            if (st == MLA_OK) {
                unsigned char *outs[CONF_MAX_ARGS] = {0};
                mla_conformance_failure kind;
                st = conf_record(ref, s, &cases[i], &p, outs, &kind, detail, sizeof detail);
                for (int a = 0; a < p.nargs; ++a)
                    free(outs[a]);
                x->nv = rec.n < CONF_MAX_VARIANTS ? rec.n : CONF_MAX_VARIANTS;
                memcpy(x->v, rec.v, (size_t)x->nv * sizeof x->v[0]);
            }
            conf_problem_free(&p);
            if (st == MLA_OK) {
                ++*n;
            } else if (st != MLA_ERR_IO || !cases[i].golden) {
                printf("FAIL %s: %s%s\n", x->desc, err, detail);
                ++*errors;
            }
        }
        free(cases);
    }
    mla_context_destroy(ref);
    return r;
}

/* The points of op's variants among the cases that run on b. */
static int points_of(const conf_op_axes *a, const recorded *r, int n, backend *b, conf_point *pts,
                     int *errors)
{
    int np = 0;
    for (int c = 0; c < n; ++c) {
        if (!runs_on(&r[c], b))
            continue;
        for (int i = 0; i < r[c].nv; ++i) {
            const mla_variant *v = &r[c].v[i];
            if (v->op != a->op || v->nargs == 0)
                continue;
            conf_point p;
            const int bad = conf_axes_classify(a, v, &p);
            if (bad >= 0) {
                printf("FAIL %s: its %s variant's %s is outside the axis table\n", r[c].desc,
                       mla_op_name(a->op), a->axes[bad].name);
                ++*errors;
                continue;
            }
            pts[np++] = p;
        }
    }
    return np;
}

static int axis_named(const conf_op_axes *a, const char *name)
{
    for (int i = 0; i < a->naxes; ++i)
        if (!strcmp(a->axes[i].name, name))
            return i;
    return -1;
}

/* The control: rope_cache's points on the reference reduced to those whose
 * q_pe is f32 exactly when q_cat is must fail the check. */
static int coupling_is_caught(const conf_point *pts, int np, backend *ref)
{
    const conf_op_axes *a = conf_axes_of(MLA_OP_ROPE_CACHE);
    const int qpe = axis_named(a, "q_pe.dtype"), qcat = axis_named(a, "q_cat.dtype");
    conf_point *kept = malloc((size_t)(np > 0 ? np : 1) * sizeof *kept);
    if (!kept || qpe < 0 || qcat < 0) {
        free(kept);
        return 0;
    }
    int nk = 0;
    for (int i = 0; i < np; ++i)
        if ((pts[i].v[qpe] == MLA_DTYPE_F32) == (pts[i].v[qcat] == MLA_DTYPE_F32))
            kept[nk++] = pts[i];
    FILE *sink = tmpfile();
    const int missing =
        conf_axes_check(a, kept, nk, accept, &ref->ctx, ref->name, sink ? sink : stdout, 1000);
    int named = 0;
    if (sink) { /* the report names the coupling */
        char line[1024];
        rewind(sink);
        while (fgets(line, sizeof line, sink))
            named |= strstr(line, "q_pe.dtype=f32 only with q_cat.dtype=f32") != NULL;
        fclose(sink);
    }
    free(kept);
    return missing > 0 && named;
}

int main(int argc, char **argv)
{
    const char *data_dir = argc > 1 ? argv[1] : "conformance/data/golden";
    int errors = 0, n = 0;
    recorded *r = record_all(data_dir, &n, &errors);
    if (!r)
        return 1;
    backend bs[8];
    int nb = 0;
    const mla_backend_ops *tables[] = {&mla_reference_ops, mla_cpu_ops()};
    for (int t = 0; t < 2; ++t) {
        memset(&bs[nb], 0, sizeof bs[nb]);
        snprintf(bs[nb].name, sizeof bs[nb].name, "%s", tables[t]->name);
        bs[nb].ctx.ops = tables[t];
        bs[nb].ctx.backend = tables[t]->backend;
        bs[nb].ctx.target = t ? MLA_TARGET_CPU : MLA_TARGET_REFERENCE;
        ++nb;
    }
    if (mla_hip_ops()) { /* the table only: supports() needs no device */
        static const mla_target targets[] = {MLA_TARGET_GFX942, MLA_TARGET_GFX950, MLA_TARGET_SM90};
        for (int t = 0; t < 3; ++t) {
            memset(&bs[nb], 0, sizeof bs[nb]);
            snprintf(bs[nb].name, sizeof bs[nb].name, "hip (%s)", mla_target_name(targets[t]));
            bs[nb].ctx.ops = mla_hip_ops();
            bs[nb].ctx.backend = MLA_BACKEND_HIP;
            bs[nb].ctx.target = targets[t];
            ++nb;
        }
    }
    int total_variants = 0;
    for (int c = 0; c < n; ++c)
        total_variants += r[c].nv;
    conf_point *pts = malloc((size_t)(total_variants + 1) * sizeof *pts);
    if (!pts)
        return 1;
    for (int op = 0; op < MLA_OP_COUNT; ++op) {
        const conf_op_axes *a = conf_axes_of((mla_op)op);
        if (!a) {
            printf("FAIL %s has no variant axes (conformance/cover.c)\n", mla_op_name((mla_op)op));
            ++errors;
            continue;
        }
        for (int b = 0; b < nb; ++b) {
            const int np = points_of(a, r, n, &bs[b], pts, &errors);
            const int missing =
                conf_axes_check(a, pts, np, accept, &bs[b].ctx, bs[b].name, stdout, 12);
            printf("%s %-22s on %-14s %4d variants run, %d axes, %d missing\n",
                   missing ? "FAIL" : "ok  ", mla_op_name((mla_op)op), bs[b].name, np, a->naxes,
                   missing);
            errors += missing > 0;
            if (op == MLA_OP_ROPE_CACHE && b == 0 && !coupling_is_caught(pts, np, &bs[b])) {
                printf("FAIL the control: rope_cache cases coupling q_pe's dtype to q_cat's "
                       "were not reported\n");
                ++errors;
            }
        }
    }
    free(pts);
    free(r);
    printf("%d cases recorded; %s\n", n, errors ? "FAILED" : "every accepted pair is covered");
    return errors ? 1 : 0;
}
