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
            "                       [--repeat] [--require-device] [--verbose]\n\n"
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
            "Exit: 0 nothing failed, 1 a case failed, 2 usage or setup error, 77 see above.\n");
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
        } else {
            fprintf(stderr, "mla conformance: unknown option '%s' (see --help)\n", a);
            return MLA_EXIT_USAGE;
        }
    }
    return mla_conformance_run(&opt, stdout, NULL);
}
