/* Case selection (--op globs, --case, --suite) and --list. */
#include <stdlib.h>
#include <string.h>

#include "conformance/conf.h"

/* Glob with '*' and '?'; a comma separates alternatives. */
static int glob1(const char *p, const char *pend, const char *s)
{
    if (p == pend)
        return *s == '\0';
    if (*p == '*')
        return glob1(p + 1, pend, s) || (*s && glob1(p, pend, s + 1));
    return *s && (*p == '?' || *p == *s) && glob1(p + 1, pend, s + 1);
}

int conf_op_selected(const char *pattern, const char *name)
{
    if (!pattern || !*pattern)
        return 1;
    for (const char *p = pattern;;) {
        const char *end = strchr(p, ',');
        if (!end)
            end = p + strlen(p);
        if (glob1(p, end, name))
            return 1;
        if (!*end)
            return 0;
        p = end + 1;
    }
}

int conf_case_selected(const mla_conformance_options *opt, const conf_case *c, int id)
{
    if (opt->case_id >= 0 && opt->case_id != id)
        return 0;
    if (opt->suite == MLA_CONF_SUITE_GOLDEN)
        return c->golden >= 0;
    if (opt->suite == MLA_CONF_SUITE_GENERATED)
        return c->golden < 0;
    if (opt->suite == MLA_CONF_SUITE_LISTED)
        return !c->designed;
    return 1;
}

void conf_list_cases(const mla_conformance_options *opt, const conf_suite *const *suites,
                     int nsuites, FILE *out)
{
    for (int si = 0; si < nsuites; ++si) {
        const conf_suite *s = suites[si];
        if (!conf_op_selected(opt->op_pattern, s->name))
            continue;
        int n = s->build(NULL, 0);
        conf_case *cases = calloc((size_t)n + 1, sizeof *cases);
        if (!cases)
            return;
        s->build(cases, n);
        for (int i = 0; i < n; ++i) {
            const conf_case *c = &cases[i];
            if (!conf_case_selected(opt, c, i))
                continue;
            char desc[1024];
            conf_describe(s, c, desc, sizeof desc);
            fprintf(out, "%-21s %4d  %-46s  %s\n", s->name, i, c->label,
                    desc + strlen(s->name) + 1);
        }
        free(cases);
    }
}
