/* mla info: what this build contains and what it sees at run time. */
#include <stdlib.h>
#include <string.h>

#include "apps/cmd.h"

void usage_info(FILE *out)
{
    fprintf(out, "usage: mla info [--json]\n\n"
                 "Prints the version, the build options (compiler, OpenMP, OpenBLAS, SLEEF,\n"
                 "HIP platform and GPU targets), the backends compiled in, the GPUs the HIP\n"
                 "backend sees, which backend AUTO picks (with the reason it fell back), what\n"
                 "the dump switch (MLA_DUMP, docs/REPLAY.md) is set to, and the active tuning\n"
                 "knobs with their environment variables (docs/TUNING.md). --json: the same\n"
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

/* The context's tuning, every knob: "key=value key=value ..." */
static void tuning_text(const mla_context *ctx, char *buf, size_t len)
{
    mla_tuning t;
    mla_tuning_init(&t);
    if (mla_context_get_tuning(ctx, &t) != MLA_OK)
        mla_tuning_init(&t);
    mla_tuning_format(&t, 1, buf, len);
}

/* The value of knob key in a tuning_text ("" when absent). */
static const char *knob_value(const char *text, const char *key, char *buf, size_t len)
{
    const size_t n = strlen(key);
    buf[0] = '\0';
    for (const char *p = text; p && *p; p = strchr(p, ' ') ? strchr(p, ' ') + 1 : NULL)
        if (!strncmp(p, key, n) && p[n] == '=') {
            const char *v = p + n + 1;
            const size_t m = strcspn(v, " ");
            snprintf(buf, len, "%.*s", (int)m, v);
            break;
        }
    return buf;
}

static void print_tuning(const mla_context *ctx, int json)
{
    char text[1024], v[64];
    tuning_text(ctx, text, sizeof text);
    const char *env, *ignored = NULL;
    mla_tuning scratch;
    mla_tuning_init(&scratch);
    (void)mla_tuning_from_env(&scratch, &ignored);
    if (json) {
        printf("\"tuning\": {");
        for (int i = 0; mla_tuning_knob(i, &env, NULL); ++i) {
            const char *key = mla_tuning_knob(i, NULL, NULL);
            printf("%s\"%s\": ", i ? ", " : "", key);
            mla_app_json_string(stdout, knob_value(text, key, v, sizeof v));
        }
        printf("}, ");
        json_str("tuning_ignored", ignored ? ignored : "", ", ");
        return;
    }
    printf("\ntuning (docs/TUNING.md)\n");
    const char *values;
    for (int i = 0; mla_tuning_knob(i, &env, &values); ++i) {
        const char *key = mla_tuning_knob(i, NULL, NULL);
        const char *set = getenv(env);
        printf("  %-18s : %-13s %s%s%s\n", key, knob_value(text, key, v, sizeof v), env,
               set ? "=" : " unset; ", set ? set : values);
    }
    if (ignored)
        printf("  %s: not one of its values, ignored\n", ignored);
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
        print_tuning(ctx, 1);
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
    print_tuning(ctx, 0);
    mla_context_destroy(ctx);
    return MLA_EXIT_OK;
}
