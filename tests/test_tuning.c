/* The tuning struct (include/mla/mla_tuning.h): defaults, the knob table's
 * parser and formatter, the environment read at context creation, set/get
 * on a context with their refusals, and the CPU backend following it. */
#define _POSIX_C_SOURCE 200112L
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "mla/mla.h"
#include "tests/test_util.h"

static void test_parse_and_format(void)
{
    mla_tuning t;
    mla_tuning_init(&t);
    CHECK(t.struct_size == sizeof t && t.version == MLA_TUNING_VERSION);
    char buf[512];
    CHECK(mla_tuning_format(&t, 0, buf, sizeof buf) == 0 && buf[0] == '\0');
    CHECK_STATUS(mla_tuning_set(&t, "hip_attention", "mma"), MLA_OK);
    CHECK(t.hip_attention == MLA_TUNE_HIP_ATTENTION_MMA);
    CHECK_STATUS(mla_tuning_set(&t, "hip_gemm_splits", "64"), MLA_OK);
    CHECK_STATUS(mla_tuning_set(&t, "hip_topk_pdl", "0"), MLA_OK);
    CHECK(t.hip_topk_pdl == MLA_TUNE_OFF);
    CHECK_STATUS(mla_tuning_set(&t, "hip_gemm_splits", "65"), MLA_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(mla_tuning_set(&t, "hip_att_row_groups", "3"), MLA_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(mla_tuning_set(&t, "no_such_knob", "auto"), MLA_ERR_INVALID_ARGUMENT);
    CHECK(t.hip_gemm_splits == 64 && t.hip_att_row_groups == 0);
    const int n = mla_tuning_format(&t, 0, buf, sizeof buf);
    CHECK(n == (int)strlen(buf));
    CHECK(!strcmp(buf, "hip_attention=mma hip_topk_pdl=off hip_gemm_splits=64"));
    /* snprintf's convention: the whole length, the text truncated */
    char small[8];
    CHECK(mla_tuning_format(&t, 0, small, sizeof small) == n && strlen(small) == 7);

    /* every knob: named, with an environment variable and values, and its
     * "all" text parses back to the same struct */
    int knobs = 0;
    const char *env, *values;
    for (const char *key; (key = mla_tuning_knob(knobs, &env, &values)); ++knobs)
        CHECK(env && !strncmp(env, "MLA_", 4) && values && values[0]);
    CHECK(knobs == 10);
    CHECK(mla_tuning_knob(knobs, &env, &values) == NULL && env == NULL);
    mla_tuning_format(&t, 1, buf, sizeof buf);
    mla_tuning back;
    mla_tuning_init(&back);
    for (char *kv = strtok(buf, " "); kv; kv = strtok(NULL, " ")) {
        char *eq = strchr(kv, '=');
        *eq = '\0';
        CHECK_STATUS(mla_tuning_set(&back, kv, eq + 1), MLA_OK);
    }
    CHECK(!memcmp(&back, &t, sizeof t));
}

static void test_environment(void)
{
    setenv("MLA_HIP_LOGITS", "generic", 1);
    setenv("MLA_HIP_TOPK_G", "2", 1);
    setenv("MLA_HIP_GEMM", "bogus", 1);
    mla_tuning t;
    mla_tuning_init(&t);
    const char *ignored = NULL;
    CHECK_STATUS(mla_tuning_from_env(&t, &ignored), MLA_ERR_INVALID_ARGUMENT);
    CHECK(ignored && !strcmp(ignored, "MLA_HIP_GEMM"));
    CHECK(t.hip_logits == MLA_TUNE_HIP_LOGITS_GENERIC && t.hip_topk_blocks == 2 &&
          t.hip_gemm == MLA_TUNE_HIP_GEMM_AUTO);

    /* read at creation, not afterwards */
    mla_context *ctx = NULL;
    CHECK_STATUS(mla_context_create(MLA_BACKEND_REFERENCE, NULL, &ctx), MLA_OK);
    unsetenv("MLA_HIP_LOGITS");
    unsetenv("MLA_HIP_TOPK_G");
    unsetenv("MLA_HIP_GEMM");
    mla_tuning got;
    mla_tuning_init(&got);
    CHECK_STATUS(mla_context_get_tuning(ctx, &got), MLA_OK);
    CHECK(!memcmp(&got, &t, sizeof t));
    mla_context_destroy(ctx);
}

static void test_context(void)
{
    mla_context *ctx = NULL;
    CHECK_STATUS(mla_context_create(MLA_BACKEND_CPU, NULL, &ctx), MLA_OK);
    if (!ctx)
        return;
    mla_tuning t;
    mla_tuning_init(&t);
    CHECK_STATUS(mla_context_get_tuning(ctx, &t), MLA_OK);
    char name[128];
    snprintf(name, sizeof name, "%s", mla_context_device_name(ctx));

    /* refusals name the field and change nothing */
    mla_tuning bad = t;
    bad.hip_logits_stages = 5;
    CHECK_STATUS(mla_context_set_tuning(ctx, &bad), MLA_ERR_INVALID_ARGUMENT);
    CHECK(!strcmp(mla_context_error_param(ctx), "hip_logits_stages"));
    bad = t;
    bad.version = MLA_TUNING_VERSION + 1;
    CHECK_STATUS(mla_context_set_tuning(ctx, &bad), MLA_ERR_INVALID_ARGUMENT);
    CHECK(!strcmp(mla_context_error_param(ctx), "tuning.version"));
    bad = t;
    bad.struct_size = sizeof bad + 4;
    CHECK_STATUS(mla_context_set_tuning(ctx, &bad), MLA_ERR_INVALID_ARGUMENT);
    CHECK(!strcmp(mla_context_error_param(ctx), "tuning.struct_size"));
    CHECK_STATUS(mla_context_set_tuning(ctx, NULL), MLA_ERR_NULL_POINTER);
    mla_tuning now;
    mla_tuning_init(&now);
    CHECK_STATUS(mla_context_get_tuning(ctx, &now), MLA_OK);
    CHECK(!memcmp(&now, &t, sizeof t));

    /* an older caller's struct: the fields it has, the rest auto */
    mla_tuning older = t;
    older.cpu_isa = MLA_TUNE_CPU_ISA_GENERIC;
    older.hip_mxfp4 = MLA_TUNE_HIP_MXFP4_FMA;
    older.struct_size = (uint32_t)offsetof(mla_tuning, hip_attention);
    CHECK_STATUS(mla_context_set_tuning(ctx, &older), MLA_OK);
    mla_tuning_init(&now);
    CHECK_STATUS(mla_context_get_tuning(ctx, &now), MLA_OK);
    CHECK(now.cpu_isa == MLA_TUNE_CPU_ISA_GENERIC && now.hip_mxfp4 == MLA_TUNE_HIP_MXFP4_AUTO);
    /* the CPU backend follows: its portable copies, as its name says */
    CHECK(strstr(mla_context_device_name(ctx), "portable C") != NULL);
    CHECK_STATUS(mla_context_set_tuning(ctx, &t), MLA_OK);
    CHECK(!strcmp(mla_context_device_name(ctx), name));
    mla_context_destroy(ctx);
}

int main(void)
{
    unsetenv("MLA_HIP_LOGITS");
    unsetenv("MLA_HIP_TOPK_G");
    unsetenv("MLA_HIP_GEMM");
    test_parse_and_format();
    test_environment();
    test_context();
    return TEST_SUMMARY();
}
