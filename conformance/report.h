/* Results: per case, aggregated into a table of op x variant x backend,
 * printed as text and optionally written as JSON. */
#ifndef MLA_CONFORMANCE_REPORT_H
#define MLA_CONFORMANCE_REPORT_H

#include <stdio.h>

#include "conformance/conf.h"

typedef enum conf_outcome {
    CONF_PASS = 0,
    CONF_FAIL = 1,
    CONF_UNSUPPORTED = 2,
    CONF_SKIPPED = 3,
} conf_outcome;

typedef struct conf_result {
    conf_outcome outcome;
    unsigned kinds; /* 1u << mla_conformance_failure for each comparator that failed */
    int mistrusted; /* most expected values of the main output are zero */
    int64_t compared, mismatches;
    double max_err;
    const char *unit;
    char detail[400]; /* first failure, or the unsupported parameter, or why skipped */
} conf_result;

typedef struct conf_report conf_report;

conf_report *conf_report_new(void);
void conf_report_free(conf_report *r);
/* Records one case run; prints failing cases (and every case when verbose)
 * with their REPRO line: repro_args (the command-line options that select
 * the backend, e.g. "--backend cpu") and --repro with desc, the case's
 * description (conf_describe). case_id -1: a case run from its description. */
void conf_report_case(conf_report *r, FILE *out, int verbose, const char *op, int case_id,
                      const conf_case *c, const char *desc, const char *backend,
                      const char *repro_args, const conf_result *res);
/* A backend that could not run: one row per op. */
void conf_report_backend_skipped(conf_report *r, const char *op, const char *backend,
                                 const char *reason, int ncases);
/* An op of the API that no suite covers: listed, so gaps are visible. */
void conf_report_uncovered(conf_report *r, const char *op);
void conf_report_print(const conf_report *r, FILE *out);
void conf_report_summary(const conf_report *r, mla_conformance_summary *s);
/* MLA_ERR_IO when the file cannot be written. */
mla_status conf_report_json(const conf_report *r, const char *path);

#endif
