/* mla conformance: the command-line front end of the conformance harness. */
#include <string.h>

#include "apps/cmd.h"
#include "conformance/conformance.h"

void usage_conformance(FILE *out)
{
    fprintf(out,
            "usage: mla conformance [--backend auto|reference|cpu|hip|all]... [--op PATTERN]\n"
            "                       [--case N] [--suite all|golden|generated|listed]\n"
            "                       [--json FILE]\n"
            "                       [--repro 'DESCRIPTION'] [--list] [--data DIR] [--threads N]\n"
            "                       [--repeat] [--require-device] [--verbose]\n"
            "                       [--tuning KEY=VALUE[,...]]... [--tuning-paths]\n\n"
            "Runs every selected case on each backend and compares it with the reference\n"
            "backend (generated cases) or the golden vectors, bit for bit for the format ops.\n"
            "  --backend B       backend to check (repeatable; default cpu). AUTO checks\n"
            "                    whatever AUTO picks; all = reference, cpu and hip.\n"
            "  --op PATTERN      ops to run: glob with * and ?, comma-separated alternatives;\n"
            "                    one that matches no op is an error\n"
            "  --case N          only case N of each selected op (as --list numbers them)\n"
            "  --repro 'D'       only the case D describes: a REPRO line's description, the op\n"
            "                    and every parameter by name, then the seed (--list prints them)\n"
            "  --suite S         golden: only the golden vectors; generated: only seeded cases;\n"
            "                    listed: all but the pairwise designs of the coverage tables\n"
            "  --json FILE       also write the results table and the failures as JSON\n"
            "  --list            list the selected cases and exit\n"
            "  --data DIR        golden vectors (default: $MLA_CONFORMANCE_DATA, else the\n"
            "                    source tree's conformance/data/golden)\n"
            "  --threads N       threads of the host contexts (0 = library default)\n"
            "  --repeat          run every case twice and require identical bits\n"
            "  --require-device  exit 77 (CTest SKIPPED) when a requested GPU backend is not\n"
            "                    compiled or has no device; without it that backend is\n"
            "                    reported as skipped and does not change the exit code\n"
            "  --verbose         one line per case\n"
            "  --tuning K=V,...  the kernel paths of the tested contexts (docs/TUNING.md;\n"
            "                    repeatable; over the environment's MLA_* knobs)\n"
            "  --tuning-paths    run once as tuned, then once per other value of each knob\n"
            "                    the tested backends read (the kernel paths as an axis)\n"
            "Exit: 0 nothing failed, 1 a case failed, 2 usage or setup error, 77 see above.\n");
}

/* "key=value,key=value" into t; 0, or -1 after printing why. */
static int parse_tuning(const char *text, mla_tuning *t)
{
    char buf[512];
    snprintf(buf, sizeof buf, "%s", text);
    for (char *kv = strtok(buf, ","); kv; kv = strtok(NULL, ",")) {
        char *eq = strchr(kv, '=');
        if (eq)
            *eq = '\0';
        if (!eq || mla_tuning_set(t, kv, eq + 1) != MLA_OK) {
            fprintf(stderr,
                    "mla conformance: --tuning wants KEY=VALUE with a knob of mla info, got '%s'\n",
                    kv);
            return -1;
        }
    }
    return 0;
}

/* Whether a knob is read by one of the backends the run tests (its key
 * starts with the backend's name; AUTO may be either). */
static int knob_tested(const char *key, unsigned backends)
{
    if (!backends)
        backends = 1u << MLA_BACKEND_CPU;
    for (int b = 0; b < MLA_BACKEND_COUNT; ++b) {
        if (!(backends & (1u << b)))
            continue;
        if (b == MLA_BACKEND_AUTO)
            return 1;
        const char *name = mla_backend_name((mla_backend)b);
        const size_t n = strlen(name);
        if (!strncmp(key, name, n) && key[n] == '_')
            return 1;
    }
    return 0;
}

/* The worse of two exit codes: a failure, then a setup error, then a skip. */
static int worse(int a, int b)
{
    const int ra = a == 1 ? 3 : a == MLA_EXIT_USAGE ? 2 : a == MLA_CONFORMANCE_EXIT_SKIP;
    const int rb = b == 1 ? 3 : b == MLA_EXIT_USAGE ? 2 : b == MLA_CONFORMANCE_EXIT_SKIP;
    return ra >= rb ? a : b;
}

/* The values --tuning-paths takes for a knob besides its default: the
 * others of its list, or for a range "lo..hi" its two smallest forced
 * values. Returns how many (at most 8, each up to 15 characters). */
static int other_values(const char *values, char out[8][16])
{
    char list[128];
    snprintf(list, sizeof list, "%s", values);
    int n = 0;
    strtok(list, "|"); /* the default */
    for (char *v = strtok(NULL, "|"); v && n < 8; v = strtok(NULL, "|")) {
        long lo, hi;
        if (sscanf(v, "%ld..%ld", &lo, &hi) == 2) {
            for (long x = lo; x <= hi && x < lo + 2 && n < 8; ++x)
                snprintf(out[n++], 16, "%ld", x);
        } else {
            snprintf(out[n++], 16, "%s", v);
        }
    }
    return n;
}

/* --tuning-paths: the run as tuned, then each other value of every knob the
 * tested backends read, one knob at a time, each with its own table; a
 * summary line per run at the end. */
static int run_paths(mla_conformance_options *opt, const mla_tuning *base)
{
    mla_conformance_summary sum;
    int rc = mla_conformance_run(opt, stdout, &sum);
    char lines[64][160];
    int n = 0;
    snprintf(lines[n++], sizeof lines[0], "as tuned: %d case runs, %d failed, %d unsupported",
             sum.cases, sum.failed, sum.unsupported);
    const char *values;
    for (int k = 0; mla_tuning_knob(k, NULL, &values); ++k) {
        const char *key = mla_tuning_knob(k, NULL, NULL);
        char vals[8][16];
        const int nv = knob_tested(key, opt->backends) ? other_values(values, vals) : 0;
        for (int i = 0; i < nv; ++i) {
            mla_tuning t = *base;
            if (mla_tuning_set(&t, key, vals[i]) != MLA_OK)
                continue;
            printf("\nconformance --tuning %s=%s\n", key, vals[i]);
            opt->tuning = &t;
            rc = worse(rc, mla_conformance_run(opt, stdout, &sum));
            if (n < 64)
                snprintf(lines[n++], sizeof lines[0],
                         "%.40s=%.15s: %d case runs, %d failed, %d unsupported", key, vals[i],
                         sum.cases, sum.failed, sum.unsupported);
        }
    }
    opt->tuning = base;
    printf("\n");
    for (int i = 0; i < n; ++i)
        printf("tuning-paths: %s\n", lines[i]);
    return rc;
}

/* The value of an option that takes one, or NULL after printing why. */
static const char *value(int argc, char **argv, int *i)
{
    if (*i + 1 >= argc) {
        fprintf(stderr, "mla conformance: %s needs a value\n", argv[*i]);
        return NULL;
    }
    return argv[++*i];
}

int cmd_conformance(int argc, char **argv)
{
    mla_conformance_options opt;
    mla_conformance_options_init(&opt);
    /* --tuning starts from the environment's knobs, as the contexts would */
    mla_tuning tuning;
    mla_tuning_init(&tuning);
    (void)mla_tuning_from_env(&tuning, NULL);
    int paths = 0;
    for (int i = 1; i < argc; ++i) {
        const char *a = argv[i], *v = NULL;
        int64_t n;
        if (!strcmp(a, "--list")) {
            opt.list = 1;
        } else if (!strcmp(a, "--require-device")) {
            opt.require_device = 1;
        } else if (!strcmp(a, "--repeat")) {
            opt.repeat = 1;
        } else if (!strcmp(a, "--verbose") || !strcmp(a, "-v")) {
            opt.verbose = 1;
        } else if (!strcmp(a, "--backend")) {
            if (!(v = value(argc, argv, &i)))
                return MLA_EXIT_USAGE;
            unsigned m = mla_conformance_backend_mask(v);
            if (!m) {
                fprintf(stderr, "mla conformance: unknown backend '%s'\n", v);
                return MLA_EXIT_USAGE;
            }
            opt.backends |= m;
        } else if (!strcmp(a, "--op")) {
            if (!(opt.op_pattern = value(argc, argv, &i)))
                return MLA_EXIT_USAGE;
        } else if (!strcmp(a, "--case")) {
            if (!(v = value(argc, argv, &i)))
                return MLA_EXIT_USAGE;
            if (mla_app_parse_i64(v, &n)) {
                fprintf(stderr, "mla conformance: --case wants a case number, got '%s'\n", v);
                return MLA_EXIT_USAGE;
            }
            opt.case_id = n;
        } else if (!strcmp(a, "--suite")) {
            if (!(v = value(argc, argv, &i)))
                return MLA_EXIT_USAGE;
            if (!strcmp(v, "all"))
                opt.suite = MLA_CONF_SUITE_ALL;
            else if (!strcmp(v, "golden"))
                opt.suite = MLA_CONF_SUITE_GOLDEN;
            else if (!strcmp(v, "generated"))
                opt.suite = MLA_CONF_SUITE_GENERATED;
            else if (!strcmp(v, "listed"))
                opt.suite = MLA_CONF_SUITE_LISTED;
            else {
                fprintf(stderr, "mla conformance: --suite is all, golden, generated or listed\n");
                return MLA_EXIT_USAGE;
            }
        } else if (!strcmp(a, "--repro")) {
            if (!(opt.repro = value(argc, argv, &i)))
                return MLA_EXIT_USAGE;
        } else if (!strcmp(a, "--json")) {
            if (!(opt.json_path = value(argc, argv, &i)))
                return MLA_EXIT_USAGE;
        } else if (!strcmp(a, "--data")) {
            if (!(opt.data_dir = value(argc, argv, &i)))
                return MLA_EXIT_USAGE;
        } else if (!strcmp(a, "--threads")) {
            if (!(v = value(argc, argv, &i)))
                return MLA_EXIT_USAGE;
            if (mla_app_parse_i64(v, &n) || n > 4096) {
                fprintf(stderr, "mla conformance: --threads wants 0..4096, got '%s'\n", v);
                return MLA_EXIT_USAGE;
            }
            opt.num_threads = (int32_t)n;
        } else if (!strcmp(a, "--tuning")) {
            if (!(v = value(argc, argv, &i)) || parse_tuning(v, &tuning))
                return MLA_EXIT_USAGE;
            opt.tuning = &tuning;
        } else if (!strcmp(a, "--tuning-paths")) {
            paths = 1;
        } else {
            fprintf(stderr, "mla conformance: unknown option '%s' (see --help)\n", a);
            return MLA_EXIT_USAGE;
        }
    }
    if (paths && (opt.json_path || opt.list)) {
        fprintf(stderr, "mla conformance: --tuning-paths runs several tables; it takes no "
                        "--json or --list\n");
        return MLA_EXIT_USAGE;
    }
    if (paths)
        return run_paths(&opt, &tuning);
    return mla_conformance_run(&opt, stdout, NULL);
}
