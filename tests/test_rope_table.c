/* mla_rope_table_build against stored reference bits (tests/data/
 * rope_table_reference.txt, from tools/rope_table_oracle.py: mpmath at 400
 * bits, rounded once to fp32): every listed entry bit for bit, positions up to
 * 2^62 - 1 through the row-range builder; the whole 4096-row DeepSeek-V3 table
 * by its digest, and each of its entries against a float64 evaluation within
 * that evaluation's error; refusals. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/rope_table.h"
#include "mla/mla.h"
#include "tests/test_util.h"

enum { MAX_CONFIGS = 16, MAX_HALF = 64 };

typedef struct ref_config {
    char name[32];
    mla_rope_config cfg;
} ref_config;

static ref_config configs[MAX_CONFIGS];
static int n_configs;

static const ref_config *find_config(const char *name)
{
    for (int k = 0; k < n_configs; ++k)
        if (strcmp(configs[k].name, name) == 0)
            return &configs[k];
    return NULL;
}

static uint32_t bits_of(float v)
{
    uint32_t b;
    memcpy(&b, &v, sizeof b);
    return b;
}

static uint64_t fnv1a64(uint64_t h, const float *v, int64_t n)
{
    for (int64_t k = 0; k < n; ++k) {
        const uint32_t w = bits_of(v[k]);
        for (int b = 0; b < 4; ++b) {
            h ^= (w >> (8 * b)) & 0xff;
            h *= 0x100000001b3ull;
        }
    }
    return h;
}

/* A preset's rope config must be the one the reference was made from. */
static void check_preset(const ref_config *rc)
{
    mla_model_config m;
    if (mla_model_config_preset(rc->name, &m) != MLA_OK)
        return;
    CHECK(memcmp(&m.rope_cfg, &rc->cfg, sizeof m.rope_cfg) == 0);
}

/* f_i and ratio in float64 with the host's libm: a sanity bound, not bits. */
static double freq64(const mla_rope_config *c, int64_t i)
{
    double f = pow(c->base, -2.0 * (double)i / c->dim);
    if (c->factor <= 1.0)
        return f;
    const double ln_b2 = 2.0 * log(c->base), pi2 = 2.0 * 3.14159265358979323846;
    double low = floor(c->dim * log((double)c->original_max_pos / (pi2 * c->beta_fast)) / ln_b2);
    double high = ceil(c->dim * log((double)c->original_max_pos / (pi2 * c->beta_slow)) / ln_b2);
    low = fmax(low, 0.0);
    high = fmin(high, (double)(c->dim - 1));
    if (low == high)
        high += 0.001;
    const double ramp = fmin(fmax(((double)i - low) / (high - low), 0.0), 1.0);
    return f / c->factor * ramp + f * (1.0 - ramp);
}

static void check_whole(const ref_config *rc, int64_t rows, uint64_t digest)
{
    const int64_t half = rc->cfg.dim / 2;
    float *c = malloc((size_t)(rows * half) * sizeof(float));
    float *s = malloc((size_t)(rows * half) * sizeof(float));
    CHECK(c && s);
    if (!c || !s)
        return;
    CHECK_STATUS(mla_rope_table_build(&rc->cfg, rows, c, s), MLA_OK);
    const uint64_t h = fnv1a64(fnv1a64(0xcbf29ce484222325ull, c, rows * half), s, rows * half);
    if (h != digest)
        fprintf(stderr, "%s: digest %016llx, reference %016llx\n", rc->name,
                (unsigned long long)h, (unsigned long long)digest);
    CHECK(h == digest);
    /* Each entry within half an fp32 ulp of the float64 value, plus that
     * value's own error (the angle p f_i carries ~2^-50 relative). */
    int64_t far = 0;
    for (int64_t i = 0; i < half; ++i) {
        const double f = freq64(&rc->cfg, i);
        for (int64_t p = 0; p < rows; ++p) {
            const double ref[2] = {cos((double)p * f), sin((double)p * f)};
            const float got[2] = {c[p * half + i], s[p * half + i]};
            for (int j = 0; j < 2; ++j) {
                const double ulp = ldexp(1.0, ilogb(fabs(ref[j]) + 0x1p-149) - 23);
                if (fabs(got[j] - ref[j]) > 0.5 * ulp + (double)p * f * 0x1p-48 + 0x1p-60)
                    ++far;
            }
        }
    }
    CHECK(far == 0);
    /* A row range equals the same rows of the whole table. */
    float rc_cos[20 * MAX_HALF], rc_sin[20 * MAX_HALF];
    CHECK_STATUS(mla_rope_table_rows(&rc->cfg, rows - 20, 20, rc_cos, rc_sin), MLA_OK);
    CHECK(memcmp(rc_cos, c + (rows - 20) * half, sizeof(float) * (size_t)(20 * half)) == 0);
    CHECK(memcmp(rc_sin, s + (rows - 20) * half, sizeof(float) * (size_t)(20 * half)) == 0);
    free(c);
    free(s);
}

static void check_refusals(void)
{
    const mla_rope_config good = {16, 1e4, 4, 32, 1, 512, 1, 1};
    float c[8], s[8];
    mla_rope_config bad = good;
    CHECK_STATUS(mla_rope_table_build(NULL, 1, c, s), MLA_ERR_NULL_POINTER);
    CHECK_STATUS(mla_rope_table_build(&good, 1, NULL, s), MLA_ERR_NULL_POINTER);
    CHECK_STATUS(mla_rope_table_build(&good, 0, NULL, NULL), MLA_OK);
    CHECK_STATUS(mla_rope_table_build(&good, -1, c, s), MLA_ERR_INVALID_ARGUMENT);
    CHECK_STATUS(mla_rope_table_build(&good, INT64_MAX, c, s), MLA_ERR_OVERFLOW);
    bad.dim = 15;
    CHECK_STATUS(mla_rope_table_build(&bad, 1, c, s), MLA_ERR_INVALID_ARGUMENT);
    bad = good;
    bad.base = 1.0;
    CHECK_STATUS(mla_rope_table_build(&bad, 1, c, s), MLA_ERR_INVALID_ARGUMENT);
    bad.base = INFINITY;
    CHECK_STATUS(mla_rope_table_build(&bad, 1, c, s), MLA_ERR_INVALID_ARGUMENT);
    bad = good;
    bad.factor = NAN;
    CHECK_STATUS(mla_rope_table_build(&bad, 1, c, s), MLA_ERR_INVALID_ARGUMENT);
    bad = good;
    bad.beta_fast = 0;
    CHECK_STATUS(mla_rope_table_build(&bad, 1, c, s), MLA_ERR_INVALID_ARGUMENT);
    bad = good;
    bad.beta_slow = -1;
    CHECK_STATUS(mla_rope_table_build(&bad, 1, c, s), MLA_ERR_INVALID_ARGUMENT);
    bad = good;
    bad.original_max_pos = 0;
    CHECK_STATUS(mla_rope_table_build(&bad, 1, c, s), MLA_ERR_INVALID_ARGUMENT);
    bad = good;
    bad.mscale = INFINITY;
    CHECK_STATUS(mla_rope_table_build(&bad, 1, c, s), MLA_ERR_INVALID_ARGUMENT);
    bad = good;
    bad.factor = 1.0; /* YaRN off: its parameters are not read */
    bad.beta_fast = NAN;
    CHECK_STATUS(mla_rope_table_build(&bad, 1, c, s), MLA_OK);
    CHECK_STATUS(mla_rope_table_rows(&good, INT64_MAX, 2, c, s), MLA_ERR_INVALID_ARGUMENT);
}

int main(void)
{
    const char *path = MLA_TEST_DATA_DIR "/rope_table_reference.txt";
    FILE *in = fopen(path, "r");
    if (!in) {
        fprintf(stderr, "cannot open %s\n", path);
        return 1;
    }
    char line[512], name[32], cur_name[32] = "";
    int64_t cur_p = -1, entries = 0;
    float c[MAX_HALF], s[MAX_HALF];
    while (fgets(line, sizeof line, in)) {
        char a[6][40];
        long long p, orig;
        int i, dim;
        unsigned cb, sb;
        unsigned long long digest;
        if (sscanf(line, "config %31s %d %39s %39s %39s %39s %lld %39s %39s", name, &dim, a[0], a[1],
                   a[2], a[3], &orig, a[4], a[5]) == 9 &&
            n_configs < MAX_CONFIGS) {
            ref_config *rc = &configs[n_configs++];
            snprintf(rc->name, sizeof rc->name, "%s", name);
            rc->cfg = (mla_rope_config){dim,         strtod(a[0], NULL), strtod(a[1], NULL),
                                        strtod(a[2], NULL), strtod(a[3], NULL), orig,
                                        strtod(a[4], NULL), strtod(a[5], NULL)};
            check_preset(rc);
        } else if (sscanf(line, "entry %31s %lld %d %x %x", name, &p, &i, &cb, &sb) == 5) {
            const ref_config *rc = find_config(name);
            CHECK(rc && i < rc->cfg.dim / 2 && rc->cfg.dim / 2 <= MAX_HALF);
            if (!rc || i >= rc->cfg.dim / 2 || rc->cfg.dim / 2 > MAX_HALF)
                continue;
            if (p != cur_p || strcmp(name, cur_name) != 0) {
                CHECK_STATUS(mla_rope_table_rows(&rc->cfg, p, 1, c, s), MLA_OK);
                cur_p = p;
                snprintf(cur_name, sizeof cur_name, "%s", name);
            }
            if (bits_of(c[i]) != cb || bits_of(s[i]) != sb)
                fprintf(stderr, "%s p=%lld i=%d: cos %08x sin %08x, reference %08x %08x\n", name,
                        p, i, bits_of(c[i]), bits_of(s[i]), cb, sb);
            CHECK(bits_of(c[i]) == cb && bits_of(s[i]) == sb);
            ++entries;
        } else if (sscanf(line, "digest %31s %lld %llx", name, &p, &digest) == 3) {
            const ref_config *rc = find_config(name);
            CHECK(rc != NULL);
            if (rc)
                check_whole(rc, p, digest);
        }
    }
    fclose(in);
    CHECK(n_configs >= 4 && entries > 1000);
    check_refusals();
    printf("rope table: %d configs, %lld reference entries\n", n_configs, (long long)entries);
    return TEST_SUMMARY();
}
