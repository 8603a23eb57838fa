/* mla info: what this build contains and what it sees at run time. */
#include <string.h>

#include "apps/cmd.h"

void usage_info(FILE *out)
{
    fprintf(out, "usage: mla info [--json]\n\n"
                 "Prints the version, the build options (compiler, OpenMP, OpenBLAS, SLEEF,\n"
                 "HIP platform and GPU targets), the backends compiled in, the GPUs the HIP\n"
                 "backend sees, which backend AUTO picks (with the reason it fell back), and\n"
                 "what the dump switch (MLA_DUMP, docs/REPLAY.md) is set to. --json: the same\n"
                 "as one JSON object.\n");
}

static const char *yes_no(int v) { return v ? "yes" : "no"; }

static const char *or_none(const char *s) { return s && *s ? s : "(none)"; }

static void json_str(const char *key, const char *v, const char *sep)
{
    printf("\"%s\": ", key);
    mla_app_json_string(stdout, v);
    printf("%s", sep);
}

static int info_json(void)
{
    const mla_build_info *bi = mla_build_info_get();
    printf("{");
    json_str("version", mla_version_string(), ", ");
    json_str("compiler", bi->compiler, ", ");
    printf("\"openmp\": %s, \"openblas\": %s, \"sleef\": %s, \"hip\": %s, ",
           bi->has_openmp ? "true" : "false", bi->has_openblas ? "true" : "false",
           bi->has_sleef ? "true" : "false", bi->has_hip ? "true" : "false");
    json_str("hip_platform", bi->hip_platform, ", ");
    json_str("gpu_targets", bi->gpu_targets, ", ");
    json_str("cpu_isa", bi->cpu_isa, ", ");
    printf("\"backends\": {");
    for (int b = MLA_BACKEND_REFERENCE; b < MLA_BACKEND_COUNT; ++b)
        printf("%s\"%s\": %s", b > MLA_BACKEND_REFERENCE ? ", " : "",
               mla_backend_name((mla_backend)b),
               mla_backend_compiled((mla_backend)b) ? "true" : "false");
    printf("}, \"gpus\": [");
    for (int i = 0; i < mla_gpu_count(); ++i) {
        char name[256] = "";
        const mla_status st = mla_gpu_name(i, name, sizeof name);
        printf("%s", i ? ", " : "");
        mla_app_json_string(stdout, st == MLA_OK ? name : mla_status_name(st));
    }
    printf("], ");
    mla_context *ctx = NULL;
    const mla_status st = mla_context_create(MLA_BACKEND_AUTO, NULL, &ctx);
    if (st == MLA_OK) {
        json_str("auto", mla_backend_name(mla_context_backend(ctx)), ", ");
        json_str("auto_device", mla_context_device_name(ctx), ", ");
        json_str("fallback_reason", mla_context_fallback_reason(ctx), ", ");
        json_str("dump", mla_context_dump_status(ctx), "}\n");
        mla_context_destroy(ctx);
        return MLA_EXIT_OK;
    }
    json_str("auto", "", ", ");
    json_str("auto_error", mla_status_name(st), "}\n");
    return MLA_EXIT_FAIL;
}

int cmd_info(int argc, char **argv)
{
    if (argc == 2 && !strcmp(argv[1], "--json"))
        return info_json();
    if (argc > 1) {
        fprintf(stderr, "mla info: takes only --json\n");
        return MLA_EXIT_USAGE;
    }
    const mla_build_info *bi = mla_build_info_get();
    printf("libmla %s\n\nbuild\n", mla_version_string());
    printf("  compiler        : %s\n", or_none(bi->compiler));
    printf("  OpenMP          : %s\n", yes_no(bi->has_openmp));
    printf("  OpenBLAS        : %s\n", yes_no(bi->has_openblas));
    printf("  SLEEF           : %s\n", yes_no(bi->has_sleef));
    printf("  CPU kernels     : %s\n", or_none(bi->cpu_isa));
    printf("  HIP backend     : %s\n", bi->has_hip ? "compiled" : "not compiled");
    if (bi->has_hip) {
        printf("  HIP platform    : %s\n", or_none(bi->hip_platform));
        printf("  GPU targets     : %s\n", or_none(bi->gpu_targets));
    }

    printf("\nbackends\n");
    for (int b = MLA_BACKEND_REFERENCE; b < MLA_BACKEND_COUNT; ++b)
        printf("  %-15s : %s\n", mla_backend_name((mla_backend)b),
               mla_backend_compiled((mla_backend)b) ? "compiled" : "not compiled");

    int n = mla_gpu_count();
    printf("\nGPUs seen         : %d\n", n);
    for (int i = 0; i < n; ++i) {
        char name[256] = "";
        mla_status st = mla_gpu_name(i, name, sizeof name);
        printf("  %d: %s\n", i, st == MLA_OK ? name : mla_status_name(st));
    }

    mla_context *ctx = NULL;
    mla_status st = mla_context_create(MLA_BACKEND_AUTO, NULL, &ctx);
    if (st != MLA_OK) {
        printf("\nauto              : cannot create a context (%s)\n", mla_status_name(st));
        return MLA_EXIT_FAIL;
    }
    printf("\nauto picks        : %s (%s)\n", mla_backend_name(mla_context_backend(ctx)),
           mla_context_device_name(ctx));
    const char *why = mla_context_fallback_reason(ctx);
    if (why && *why)
        printf("fallback reason   : %s\n", why);
    const char *dump = mla_context_dump_status(ctx);
    printf("dump (MLA_DUMP)   : %s\n", *dump ? dump : "off");
    mla_context_destroy(ctx);
    return MLA_EXIT_OK;
}
