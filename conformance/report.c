/* The results table and its JSON form. Rows aggregate the cases of one
 * (op, variant, backend); failures are kept individually with their REPRO. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "conformance/report.h"

typedef struct row {
    char op[32], variant[64], backend[48], note[96];
    int cases, passed, failed, unsupported, skipped, mistrusted;
    int64_t mismatches;
    double max_err;
    const char *unit;
} row;

typedef struct failure {
    char op[32], variant[64], backend[48], repro[1400], detail[400];
    int case_id;
    unsigned kinds;
} failure;

struct conf_report {
    row *rows;
    int nrows, caprows;
    failure *fails;
    int nfails, capfails;
    mla_conformance_summary sum;
    char uncovered[512]; /* ops of the API without conformance cases */
};

/* Truncating copy (snprintf "%s" draws -Wformat-truncation on purpose-short fields). */
static void copy(char *dst, size_t len, const char *src)
{
    size_t n = strlen(src);
    if (n >= len)
        n = len - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

conf_report *conf_report_new(void) { return calloc(1, sizeof(conf_report)); }

void conf_report_free(conf_report *r)
{
    if (!r)
        return;
    free(r->rows);
    free(r->fails);
    free(r);
}

static row *find_row(conf_report *r, const char *op, const char *variant, const char *backend)
{
    for (int i = r->nrows - 1; i >= 0; --i)
        if (!strcmp(r->rows[i].op, op) && !strcmp(r->rows[i].variant, variant) &&
            !strcmp(r->rows[i].backend, backend))
            return &r->rows[i];
    if (r->nrows == r->caprows) {
        int cap = r->caprows ? 2 * r->caprows : 64;
        row *n = realloc(r->rows, (size_t)cap * sizeof *n);
        if (!n)
            return NULL;
        r->rows = n;
        r->caprows = cap;
    }
    row *w = &r->rows[r->nrows++];
    memset(w, 0, sizeof *w);
    copy(w->op, sizeof w->op, op);
    copy(w->variant, sizeof w->variant, variant);
    copy(w->backend, sizeof w->backend, backend);
    w->unit = "ulp";
    return w;
}

static void kinds_str(unsigned kinds, char *buf, size_t len)
{
    size_t n = 0;
    buf[0] = '\0';
    for (int k = 0; k < MLA_CONF_FAIL_COUNT && n < len; ++k)
        if (kinds & (1u << k))
            n += (size_t)snprintf(buf + n, len - n, "%s%s", n ? "," : "",
                                  mla_conformance_failure_name((mla_conformance_failure)k));
}

static void add_failure(conf_report *r, const char *op, int case_id, const conf_case *c,
                        const char *backend, const char *repro, const conf_result *res)
{
    if (r->nfails == r->capfails) {
        int cap = r->capfails ? 2 * r->capfails : 16;
        failure *n = realloc(r->fails, (size_t)cap * sizeof *n);
        if (!n)
            return;
        r->fails = n;
        r->capfails = cap;
    }
    failure *f = &r->fails[r->nfails++];
    copy(f->op, sizeof f->op, op);
    copy(f->variant, sizeof f->variant, c->label);
    copy(f->backend, sizeof f->backend, backend);
    copy(f->repro, sizeof f->repro, repro);
    copy(f->detail, sizeof f->detail, res->detail);
    f->case_id = case_id;
    f->kinds = res->kinds;
}

void conf_report_case(conf_report *r, FILE *out, int verbose, const char *op, int case_id,
                      const conf_case *c, const char *desc, const char *backend,
                      const char *repro_args, const conf_result *res)
{
    static const char *const names[] = {"pass", "FAIL", "unsupported", "skipped"};
    row *w = find_row(r, op, c->label, backend);
    if (!w)
        return;
    w->cases++;
    r->sum.cases++;
    switch (res->outcome) {
    case CONF_PASS: w->passed++; r->sum.passed++; break;
    case CONF_FAIL: w->failed++; r->sum.failed++; break;
    case CONF_UNSUPPORTED: w->unsupported++; r->sum.unsupported++; break;
    default: w->skipped++; r->sum.skipped++; break;
    }
    if (res->mistrusted) {
        w->mistrusted++;
        r->sum.mistrusted++;
    }
    for (int k = 0; k < MLA_CONF_FAIL_COUNT; ++k)
        if (res->kinds & (1u << k))
            r->sum.by_kind[k]++;
    w->mismatches += res->mismatches;
    if (res->unit)
        w->unit = res->unit;
    if (res->max_err > w->max_err)
        w->max_err = res->max_err;
    if ((res->outcome == CONF_UNSUPPORTED || res->outcome == CONF_SKIPPED) && !w->note[0])
        copy(w->note, sizeof w->note, res->detail);
    char repro[1400], id[24] = "";
    snprintf(repro, sizeof repro, "mla conformance %s --repro '%s'", repro_args, desc);
    if (case_id >= 0)
        snprintf(id, sizeof id, " case %d", case_id);
    if (res->outcome == CONF_FAIL) {
        char kinds[96];
        kinds_str(res->kinds, kinds, sizeof kinds);
        fprintf(out, "FAIL %s%s [%s] on %s (%s): %s\n  REPRO: %s\n", op, id, c->label, backend,
                kinds, res->detail, repro);
        add_failure(r, op, case_id, c, backend, repro, res);
    } else if (verbose) {
        fprintf(out, "%-11s %s%s [%s] on %s%s%s%s\n", names[res->outcome], op, id, c->label,
                backend, res->mistrusted ? " MISTRUSTED (mostly zeros)" : "",
                res->detail[0] ? ": " : "", res->detail);
    }
}

void conf_report_backend_skipped(conf_report *r, const char *op, const char *backend,
                                 const char *reason, int ncases)
{
    row *w = find_row(r, op, "*", backend);
    if (!w)
        return;
    w->cases += ncases;
    w->skipped += ncases;
    r->sum.cases += ncases;
    r->sum.skipped += ncases;
    copy(w->note, sizeof w->note, reason);
}

static void row_result(const row *w, char *buf, size_t len)
{
    if (w->failed)
        snprintf(buf, len, "FAIL");
    else if (w->passed && w->mistrusted)
        snprintf(buf, len, "pass (%d mistrusted)", w->mistrusted);
    else if (w->passed)
        snprintf(buf, len, "pass");
    else if (w->unsupported)
        snprintf(buf, len, "unsupported (%s)", w->note);
    else
        snprintf(buf, len, "skipped (%s)", w->note);
}

void conf_report_print(const conf_report *r, FILE *out)
{
    fprintf(out, "%-18s %-46s %-12s %-24s %6s %6s %10s  %s\n", "op", "variant", "backend",
            "result", "cases", "failed", "mismatches", "max err");
    for (int i = 0; i < r->nrows; ++i) {
        const row *w = &r->rows[i];
        char res[160];
        row_result(w, res, sizeof res);
        fprintf(out, "%-18s %-46s %-12s %-24s %6d %6d %10lld  %g %s\n", w->op, w->variant,
                w->backend, res, w->cases, w->failed, (long long)w->mismatches, w->max_err,
                w->unit);
    }
    if (r->uncovered[0])
        fprintf(out, "no conformance cases yet for: %s\n", r->uncovered);
    const mla_conformance_summary *s = &r->sum;
    fprintf(out, "conformance: %d case runs: %d passed, %d failed, %d unsupported, %d skipped, "
                 "%d mistrusted\n",
            s->cases, s->passed, s->failed, s->unsupported, s->skipped, s->mistrusted);
}

void conf_report_summary(const conf_report *r, mla_conformance_summary *s) { *s = r->sum; }

void conf_report_uncovered(conf_report *r, const char *op)
{
    size_t n = strlen(r->uncovered);
    if (n + strlen(op) + 3 < sizeof r->uncovered)
        snprintf(r->uncovered + n, sizeof r->uncovered - n, "%s%s", n ? " " : "", op);
}

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; ++s) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            fprintf(f, "\\%c", ch);
        else if (ch < 0x20)
            fprintf(f, "\\u%04x", ch);
        else
            fputc(ch, f);
    }
    fputc('"', f);
}

static void json_num(FILE *f, double v)
{
    if (isfinite(v))
        fprintf(f, "%.17g", v);
    else
        fprintf(f, "null");
}

mla_status conf_report_json(const conf_report *r, const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return MLA_ERR_IO;
    fprintf(f, "{\n  \"version\": ");
    json_str(f, mla_version_string());
    fprintf(f, ",\n  \"rows\": [");
    for (int i = 0; i < r->nrows; ++i) {
        const row *w = &r->rows[i];
        char res[160];
        row_result(w, res, sizeof res);
        fprintf(f, "%s\n    {\"op\": ", i ? "," : "");
        json_str(f, w->op);
        fprintf(f, ", \"variant\": ");
        json_str(f, w->variant);
        fprintf(f, ", \"backend\": ");
        json_str(f, w->backend);
        fprintf(f, ", \"result\": ");
        json_str(f, res);
        fprintf(f, ", \"cases\": %d, \"passed\": %d, \"failed\": %d, \"unsupported\": %d, "
                   "\"skipped\": %d, \"mistrusted\": %d, \"mismatches\": %lld, \"max_err\": ",
                w->cases, w->passed, w->failed, w->unsupported, w->skipped, w->mistrusted,
                (long long)w->mismatches);
        json_num(f, w->max_err);
        fprintf(f, ", \"unit\": ");
        json_str(f, w->unit);
        fprintf(f, "}");
    }
    fprintf(f, "\n  ],\n  \"uncovered\": ");
    json_str(f, r->uncovered);
    fprintf(f, ",\n  \"failures\": [");
    for (int i = 0; i < r->nfails; ++i) {
        const failure *x = &r->fails[i];
        fprintf(f, "%s\n    {\"op\": ", i ? "," : "");
        json_str(f, x->op);
        fprintf(f, ", \"case\": %d, \"variant\": ", x->case_id);
        json_str(f, x->variant);
        fprintf(f, ", \"backend\": ");
        json_str(f, x->backend);
        fprintf(f, ", \"kinds\": [");
        for (int k = 0, n = 0; k < MLA_CONF_FAIL_COUNT; ++k)
            if (x->kinds & (1u << k)) {
                fprintf(f, "%s", n++ ? ", " : "");
                json_str(f, mla_conformance_failure_name((mla_conformance_failure)k));
            }
        fprintf(f, "]");
        fprintf(f, ", \"detail\": ");
        json_str(f, x->detail);
        fprintf(f, ", \"repro\": ");
        json_str(f, x->repro);
        fprintf(f, "}");
    }
    const mla_conformance_summary *s = &r->sum;
    fprintf(f, "\n  ],\n  \"summary\": {\"cases\": %d, \"passed\": %d, \"failed\": %d, "
               "\"unsupported\": %d, \"skipped\": %d, \"mistrusted\": %d, \"failed_by_kind\": {",
            s->cases, s->passed, s->failed, s->unsupported, s->skipped, s->mistrusted);
    for (int k = 0; k < MLA_CONF_FAIL_COUNT; ++k)
        fprintf(f, "%s\"%s\": %d", k ? ", " : "",
                mla_conformance_failure_name((mla_conformance_failure)k), s->by_kind[k]);
    fprintf(f, "}}\n}\n");
    return fclose(f) == 0 ? MLA_OK : MLA_ERR_IO;
}
