/* libmla conformance: runs every op's cases on a backend and compares the
 * outputs with the reference backend (generated cases) or with independent
 * golden vectors, bit for bit where the op is bit-defined.
 * Used by the `mla conformance` command and by the tests. */
#ifndef MLA_CONFORMANCE_H
#define MLA_CONFORMANCE_H

#include <stdint.h>
#include <stdio.h>

#include "mla/mla.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The exit code CTest's SKIP_RETURN_CODE is set to (the automake convention). */
#define MLA_CONFORMANCE_EXIT_SKIP 77

/* What a failing case got wrong, in the order the comparators run. */
typedef enum mla_conformance_failure {
    MLA_CONF_FAIL_SETUP = 0,  /* the case could not be prepared (data file, memory) */
    MLA_CONF_FAIL_STATUS = 1, /* the op returned an error although supports() said yes */
    MLA_CONF_FAIL_GUARD = 2,  /* bytes outside the output's elements changed */
    MLA_CONF_FAIL_CLASS = 3,  /* NaN / Inf / signed zero class differs */
    MLA_CONF_FAIL_BITS = 4,   /* same class, bits differ where the op is bit-exact */
    MLA_CONF_FAIL_BOUND = 5,  /* error above the op's declared bound */
    MLA_CONF_FAIL_REPEAT = 6, /* two runs on the same backend differ */
    MLA_CONF_FAIL_COUNT
} mla_conformance_failure;

const char *mla_conformance_failure_name(mla_conformance_failure kind);

typedef enum mla_conformance_suite {
    MLA_CONF_SUITE_ALL = 0,
    MLA_CONF_SUITE_GOLDEN = 1,    /* only the golden-vector cases */
    MLA_CONF_SUITE_GENERATED = 2, /* only the seeded, reference-compared cases */
    MLA_CONF_SUITE_LISTED = 3,    /* golden and listed cases, not the pairwise designs */
    MLA_CONF_SUITE_COUNT
} mla_conformance_suite;

typedef struct mla_conformance_options {
    /* Backends to run: bit (1u << b) for each mla_backend b. The AUTO bit runs
     * whatever AUTO picks. 0 means the CPU backend. */
    unsigned backends;
    const char *op_pattern;        /* glob on op names ('*', '?'); NULL or "" = every op; one
                                      that matches no op is an error (exit code 2) */
    int64_t case_id;               /* run only case N of each selected op; -1 = all */
    mla_conformance_suite suite;
    const char *json_path;         /* also write the results as JSON there; NULL = no */
    const char *data_dir;          /* golden vectors; NULL = $MLA_CONFORMANCE_DATA or built-in */
    int list;                      /* print the selected cases, run nothing */
    int require_device;            /* a requested HIP backend that cannot run -> exit code 77 */
    int verbose;                   /* one line per case */
    int repeat;                    /* run every case twice, require identical bits */
    int32_t num_threads;           /* host contexts' threads, 0 = library default */
    const char *repro;             /* run only the case this description names (a REPRO
                                      line's); op_pattern, case_id and suite are ignored */
} mla_conformance_options;

typedef struct mla_conformance_summary {
    int cases; /* case x backend runs */
    int passed, failed, unsupported, skipped, mistrusted;
    int by_kind[MLA_CONF_FAIL_COUNT]; /* failing cases per kind (a case may count twice) */
    int backends_skipped;             /* requested backends that could not run */
} mla_conformance_summary;

void mla_conformance_options_init(mla_conformance_options *opt);

/* Runs the selected cases and prints the results table (and failures with
 * a REPRO line each) to out. Returns 0 when nothing failed, 1 when a case
 * failed, 2 on a usage or setup error, MLA_CONFORMANCE_EXIT_SKIP when
 * require_device is set and a requested GPU backend could not run (and
 * nothing failed). summary may be NULL. */
int mla_conformance_run(const mla_conformance_options *opt, FILE *out,
                        mla_conformance_summary *summary);

/* Parses "auto", "reference", "cpu", "hip" or "all" into a backends mask;
 * 0 when the name is unknown. */
unsigned mla_conformance_backend_mask(const char *name);

#ifdef __cplusplus
}
#endif

#endif
