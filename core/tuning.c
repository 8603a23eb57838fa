/* The tuning knobs (include/mla/mla_tuning.h, docs/TUNING.md): one table
 * of key, environment variable and values, which the environment, the
 * parser, the formatter and the conformance runner's variant axis all read. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/backend.h"

/* An enum knob lists its names (index = value, canonical spelling first
 * where aliases follow with the same value); a range knob takes 0 ("auto")
 * or an integer in [lo, hi]. */
typedef struct knob_value {
    const char *name;
    int32_t value;
} knob_value;

typedef struct knob {
    const char *key, *env, *values; /* values: the documented list */
    size_t offset;
    const knob_value *names; /* NULL: a range knob */
    int32_t lo, hi;
} knob;

static const knob_value cpu_isa_names[] = {
    {"auto", MLA_TUNE_CPU_ISA_AUTO},
    {"generic", MLA_TUNE_CPU_ISA_GENERIC},
    {"avx2", MLA_TUNE_CPU_ISA_AVX2},
    {"avx512", MLA_TUNE_CPU_ISA_AVX512},
    {"avx512-nobf16", MLA_TUNE_CPU_ISA_AVX512_NOBF16},
    {"avx512-noamx", MLA_TUNE_CPU_ISA_AVX512_NOAMX},
    {NULL, 0}};
static const knob_value attention_names[] = {{"auto", MLA_TUNE_HIP_ATTENTION_AUTO},
                                             {"fma", MLA_TUNE_HIP_ATTENTION_FMA},
                                             {"mma", MLA_TUNE_HIP_ATTENTION_MMA},
                                             {"cpasync", MLA_TUNE_HIP_ATTENTION_CPASYNC},
                                             {"wgmma", MLA_TUNE_HIP_ATTENTION_WGMMA},
                                             {"mfma", MLA_TUNE_HIP_ATTENTION_MFMA},
                                             {"mfma942", MLA_TUNE_HIP_ATTENTION_MFMA942},
                                             {"mfma950", MLA_TUNE_HIP_ATTENTION_MFMA950},
                                             {NULL, 0}};
static const knob_value row_group_names[] = {{"auto", 0}, {"1", 1}, {"2", 2}, {"4", 4}, {NULL, 0}};
static const knob_value logits_names[] = {{"auto", MLA_TUNE_HIP_LOGITS_AUTO},
                                          {"mma", MLA_TUNE_HIP_LOGITS_MMA},
                                          {"generic", MLA_TUNE_HIP_LOGITS_GENERIC},
                                          {NULL, 0}};
static const knob_value stage_names[] = {{"auto", 0}, {"2", 2}, {"3", 3}, {"4", 4}, {NULL, 0}};
static const knob_value switch_names[] = {
    {"on", MLA_TUNE_ON}, {"off", MLA_TUNE_OFF}, {"1", MLA_TUNE_ON}, {"0", MLA_TUNE_OFF},
    {"auto", MLA_TUNE_ON}, {NULL, 0}};
static const knob_value gemm_names[] = {{"auto", MLA_TUNE_HIP_GEMM_AUTO},
                                        {"fma", MLA_TUNE_HIP_GEMM_FMA},
                                        {"tile", MLA_TUNE_HIP_GEMM_TILE},
                                        {"mma", MLA_TUNE_HIP_GEMM_MMA},
                                        {NULL, 0}};
static const knob_value mxfp4_names[] = {{"auto", MLA_TUNE_HIP_MXFP4_AUTO},
                                         {"fma", MLA_TUNE_HIP_MXFP4_FMA},
                                         {"f4", MLA_TUNE_HIP_MXFP4_F4},
                                         {NULL, 0}};

#define FIELD(f) offsetof(mla_tuning, f)
static const knob knobs[] = {
    {"cpu_isa", "MLA_CPU_ISA", "auto|generic|avx2|avx512|avx512-nobf16|avx512-noamx",
     FIELD(cpu_isa), cpu_isa_names, 0, 0},
    {"hip_attention", "MLA_HIP_ATTENTION", "auto|fma|mma|cpasync|wgmma|mfma|mfma942|mfma950", FIELD(hip_attention),
     attention_names, 0, 0},
    {"hip_att_row_groups", "MLA_HIP_ATT_RG", "auto|1|2|4", FIELD(hip_att_row_groups),
     row_group_names, 0, 0},
    {"hip_logits", "MLA_HIP_LOGITS", "auto|mma|generic", FIELD(hip_logits), logits_names, 0, 0},
    {"hip_logits_stages", "MLA_HIP_LOGITS_STAGES", "auto|2|3|4", FIELD(hip_logits_stages),
     stage_names, 0, 0},
    {"hip_topk_blocks", "MLA_HIP_TOPK_G", "auto|1..64", FIELD(hip_topk_blocks), NULL, 1, 64},
    {"hip_topk_pdl", "MLA_HIP_TOPK_PDL", "on|off", FIELD(hip_topk_pdl), switch_names, 0, 0},
    {"hip_gemm", "MLA_HIP_GEMM", "auto|fma|tile|mma", FIELD(hip_gemm), gemm_names, 0, 0},
    {"hip_gemm_splits", "MLA_HIP_GEMM_SPLITS", "auto|1..64", FIELD(hip_gemm_splits), NULL, 1, 64},
    {"hip_mxfp4", "MLA_HIP_MXFP4", "auto|fma|f4", FIELD(hip_mxfp4), mxfp4_names, 0, 0},
};
#undef FIELD
enum { NUM_KNOBS = (int)(sizeof knobs / sizeof knobs[0]) };

static int32_t *field_of(mla_tuning *t, const knob *k)
{
    return (int32_t *)((char *)t + k->offset);
}

static int32_t field_value(const mla_tuning *t, const knob *k)
{
    return *(const int32_t *)((const char *)t + k->offset);
}

/* 1 with *out when text is one of the knob's values. */
static int parse_value(const knob *k, const char *text, int32_t *out)
{
    if (!text)
        return 0;
    if (k->names) {
        for (const knob_value *n = k->names; n->name; ++n)
            if (!strcmp(text, n->name)) {
                *out = n->value;
                return 1;
            }
        return 0;
    }
    if (!strcmp(text, "auto")) {
        *out = 0;
        return 1;
    }
    char *end = NULL;
    const long v = strtol(text, &end, 10);
    if (end == text || *end || v < k->lo || v > k->hi)
        return 0;
    *out = (int32_t)v;
    return 1;
}

static int value_valid(const knob *k, int32_t v)
{
    if (!k->names)
        return v == 0 || (v >= k->lo && v <= k->hi);
    for (const knob_value *n = k->names; n->name; ++n)
        if (n->value == v)
            return 1;
    return 0;
}

void mla_tuning_init(mla_tuning *t)
{
    if (!t)
        return;
    memset(t, 0, sizeof *t);
    t->struct_size = (uint32_t)sizeof *t;
    t->version = MLA_TUNING_VERSION;
}

mla_status mla_tuning_from_env(mla_tuning *t, const char **ignored)
{
    if (ignored)
        *ignored = NULL;
    if (!t)
        return MLA_ERR_NULL_POINTER;
    mla_status st = MLA_OK;
    for (int i = 0; i < NUM_KNOBS; ++i) {
        const char *text = getenv(knobs[i].env);
        int32_t v;
        if (!text)
            continue;
        if (parse_value(&knobs[i], text, &v)) {
            *field_of(t, &knobs[i]) = v;
        } else if (st == MLA_OK) {
            st = MLA_ERR_INVALID_ARGUMENT;
            if (ignored)
                *ignored = knobs[i].env;
        }
    }
    return st;
}

mla_status mla_tuning_set(mla_tuning *t, const char *key, const char *value)
{
    if (!t || !key || !value)
        return MLA_ERR_NULL_POINTER;
    for (int i = 0; i < NUM_KNOBS; ++i)
        if (!strcmp(key, knobs[i].key)) {
            int32_t v;
            if (!parse_value(&knobs[i], value, &v))
                return MLA_ERR_INVALID_ARGUMENT;
            *field_of(t, &knobs[i]) = v;
            return MLA_OK;
        }
    return MLA_ERR_INVALID_ARGUMENT;
}

static const char *value_name(const knob *k, int32_t v, char *buf, size_t len)
{
    if (v == 0 && !k->names)
        return "auto";
    if (k->names)
        for (const knob_value *n = k->names; n->name; ++n)
            if (n->value == v)
                return n->name;
    snprintf(buf, len, "%d", (int)v);
    return buf;
}

int mla_tuning_format(const mla_tuning *t, int all, char *buf, size_t len)
{
    if (buf && len)
        buf[0] = '\0';
    if (!t)
        return 0;
    size_t n = 0;
    for (int i = 0; i < NUM_KNOBS; ++i) {
        const int32_t v = field_value(t, &knobs[i]);
        if (!all && v == 0)
            continue;
        char num[16];
        const int w = snprintf(buf && n < len ? buf + n : NULL, buf && n < len ? len - n : 0,
                               "%s%s=%s", n ? " " : "", knobs[i].key,
                               value_name(&knobs[i], v, num, sizeof num));
        n += (size_t)(w > 0 ? w : 0);
    }
    return (int)n;
}

const char *mla_tuning_knob(int i, const char **env, const char **values)
{
    if (env)
        *env = NULL;
    if (values)
        *values = NULL;
    if (i < 0 || i >= NUM_KNOBS)
        return NULL;
    if (env)
        *env = knobs[i].env;
    if (values)
        *values = knobs[i].values;
    return knobs[i].key;
}

/* The fields of a caller's struct (its struct_size) over the defaults, each
 * in range; refused (nothing written) otherwise. */
mla_status mla_tuning_check(mla_context *ctx, const mla_tuning *in, mla_tuning *out)
{
    if (!in)
        return mla_fail(ctx, MLA_ERR_NULL_POINTER, "tuning", "NULL argument");
    if (in->version < 1 || in->version > MLA_TUNING_VERSION)
        return mla_fail(ctx, MLA_ERR_INVALID_ARGUMENT, "tuning.version",
                        "version %u: this library knows 1 to %d", in->version,
                        MLA_TUNING_VERSION);
    if (in->struct_size < offsetof(mla_tuning, cpu_isa) || in->struct_size > sizeof *out ||
        in->struct_size % sizeof(int32_t))
        return mla_fail(ctx, MLA_ERR_INVALID_ARGUMENT, "tuning.struct_size",
                        "struct_size %u: this library's mla_tuning has %zu bytes", in->struct_size,
                        sizeof *out);
    mla_tuning t;
    mla_tuning_init(&t);
    const size_t head = offsetof(mla_tuning, cpu_isa);
    memcpy((char *)&t + head, (const char *)in + head, in->struct_size - head);
    for (int i = 0; i < NUM_KNOBS; ++i)
        if (!value_valid(&knobs[i], field_value(&t, &knobs[i])))
            return mla_fail(ctx, MLA_ERR_INVALID_ARGUMENT, knobs[i].key,
                            "tuning.%s = %d is not one of %s", knobs[i].key,
                            (int)field_value(&t, &knobs[i]), knobs[i].values);
    *out = t;
    return MLA_OK;
}
