/* Shared helpers of the benchmarks (bench_util.h). */
#define _POSIX_C_SOURCE 200809L

#include "bench/bench_util.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

double bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

double bench_cpu_seconds(void)
{
    struct timespec ts;
    if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts) != 0)
        return 0.0;
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double bench_median(double *v, int n)
{
    if (n <= 0)
        return 0.0;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double bench_min(const double *v, int n)
{
    double m = n > 0 ? v[0] : 0.0;
    for (int i = 1; i < n; ++i)
        m = v[i] < m ? v[i] : m;
    return m;
}

double bench_max(const double *v, int n)
{
    double m = n > 0 ? v[0] : 0.0;
    for (int i = 1; i < n; ++i)
        m = v[i] > m ? v[i] : m;
    return m;
}

/* ------------------------------------------------------------------ rng */

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void bench_rng_seed(bench_rng *r, uint64_t seed)
{
    for (int i = 0; i < 4; ++i)
        r->s[i] = splitmix64(&seed);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t bench_rng_next(bench_rng *r)
{
    uint64_t *s = r->s;
    const uint64_t result = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

uint64_t bench_rng_below(bench_rng *r, uint64_t n) { return n ? bench_rng_next(r) % n : 0; }

/* Binary exponent range [lo, hi) and sign rule of each kind. */
static void kind_range(bench_fill kind, int *lo, int *hi, int *negative)
{
    switch (kind) {
    case BENCH_FILL_ACT: *lo = -3; *hi = 1; *negative = 1; break;
    case BENCH_FILL_WEIGHT: *lo = -8; *hi = -4; *negative = 1; break;
    case BENCH_FILL_NORM_W: *lo = -1; *hi = 1; *negative = 0; break;
    case BENCH_FILL_SCALE: *lo = -10; *hi = -6; *negative = 0; break;
    default: *lo = 0; *hi = 1; *negative = 0; break;
    }
}

/* Values 2^e * (1 + m) with e in [lo, hi), built from random bits directly:
 * 16 bits per bf16 value (sign, exponent pick, 7 mantissa bits). */
static uint16_t draw_bf16(unsigned bits, int lo, int hi, int neg)
{
    unsigned e = (unsigned)(127 + lo) + ((bits >> 7) & 0xFF) % (unsigned)(hi - lo);
    unsigned sign = neg ? (bits >> 15) & 1u : 0u;
    return (uint16_t)(sign << 15 | e << 7 | (bits & 0x7F));
}

static float draw_f32(uint64_t bits, int lo, int hi, int neg)
{
    uint32_t e = (uint32_t)(127 + lo) + (uint32_t)((bits >> 32) % (uint64_t)(hi - lo));
    uint32_t sign = neg ? (uint32_t)(bits >> 63) : 0u;
    uint32_t u = sign << 31 | e << 23 | (uint32_t)(bits & 0x7FFFFF);
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

void bench_fill_host(bench_rng *r, void *p, mla_dtype dtype, int64_t n, bench_fill kind)
{
    if (kind == BENCH_FILL_BYTES || dtype == MLA_DTYPE_U8 || dtype == MLA_DTYPE_I32 ||
        dtype == MLA_DTYPE_I64 || dtype == MLA_DTYPE_E8M0 || dtype == MLA_DTYPE_FP4X2) {
        const int64_t bytes = n * (int64_t)mla_dtype_size(dtype);
        uint8_t *b = p;
        int64_t i = 0;
        for (; i + 8 <= bytes; i += 8) {
            uint64_t v = bench_rng_next(r);
            memcpy(b + i, &v, 8);
        }
        if (i < bytes) {
            uint64_t v = bench_rng_next(r);
            memcpy(b + i, &v, (size_t)(bytes - i));
        }
        return;
    }
    int lo, hi, neg;
    kind_range(kind, &lo, &hi, &neg);
    switch (dtype) {
    case MLA_DTYPE_F32: {
        float *f = p;
        for (int64_t i = 0; i < n; ++i)
            f[i] = draw_f32(bench_rng_next(r), lo, hi, neg);
        break;
    }
    case MLA_DTYPE_F64: {
        double *f = p;
        for (int64_t i = 0; i < n; ++i)
            f[i] = draw_f32(bench_rng_next(r), lo, hi, neg);
        break;
    }
    case MLA_DTYPE_BF16: {
        uint16_t *h = p;
        int64_t i = 0;
        for (; i + 4 <= n; i += 4) {
            uint64_t v = bench_rng_next(r);
            for (int k = 0; k < 4; ++k)
                h[i + k] = draw_bf16((unsigned)(v >> (16 * k)) & 0xFFFFu, lo, hi, neg);
        }
        for (; i < n; ++i)
            h[i] = draw_bf16((unsigned)bench_rng_next(r) & 0xFFFFu, lo, hi, neg);
        break;
    }
    case MLA_DTYPE_F16: {
        uint16_t *h = p;
        for (int64_t i = 0; i < n; ++i)
            h[i] = mla_f32_to_f16(draw_f32(bench_rng_next(r), lo, hi, neg));
        break;
    }
    case MLA_DTYPE_FP8_E4M3FN:
    case MLA_DTYPE_FP8_E4M3FNUZ: {
        /* codes of magnitude [1, 16): the block scales carry the weight's size */
        uint8_t *c = p;
        const float max = mla_fp8_max(dtype);
        for (int64_t i = 0; i < n; ++i) {
            float v = draw_f32(bench_rng_next(r), 0, 4, 1);
            c[i] = mla_f32_to_fp8(v < max ? v : max, dtype, MLA_SATURATE);
        }
        break;
    }
    default: break;
    }
}

/* ------------------------------------------------------------ machine */

const char *bench_cpu_model(void)
{
    static char model[160];
    if (model[0])
        return model;
    snprintf(model, sizeof model, "unknown CPU");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return model;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (!strncmp(line, "model name", 10)) {
            const char *c = strchr(line, ':');
            if (c) {
                c += 1 + (c[1] == ' ');
                snprintf(model, sizeof model, "%s", c);
                model[strcspn(model, "\n")] = '\0';
            }
            break;
        }
    }
    fclose(f);
    return model;
}

int bench_cpu_count(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

int64_t bench_llc_bytes(void)
{
    int64_t best = 0;
    for (int i = 0; i < 8; ++i) {
        char path[96];
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        long long v = 0;
        char unit = 0;
        if (fscanf(f, "%lld%c", &v, &unit) >= 1) {
            int64_t b = (int64_t)v * (unit == 'K' ? 1024 : unit == 'M' ? 1024 * 1024 : 1);
            best = b > best ? b : best;
        }
        fclose(f);
    }
    return best > 0 ? best : (int64_t)32 << 20;
}

double bench_loadavg(void)
{
    double v = -1.0;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &v) != 1)
            v = -1.0;
        fclose(f);
    }
    return v;
}

void bench_print_error(FILE *out, const mla_context *ctx)
{
    const char *param = mla_context_error_param(ctx), *detail = mla_context_error_detail(ctx);
    if (param && *param)
        fprintf(out, " (%s)", param);
    if (detail && *detail)
        fprintf(out, ": %s", detail);
}

/* --------------------------------------------------------------- JSON */

static void json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; s && *s; ++s) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

static void json_key(bench_json *j, const char *key)
{
    if (!j->first[j->depth])
        fputc(',', j->f);
    j->first[j->depth] = 0;
    fprintf(j->f, "\n%*s", 2 * j->depth, "");
    if (key) {
        json_string(j->f, key);
        fputs(": ", j->f);
    }
}

void bench_json_begin(bench_json *j, FILE *f)
{
    memset(j, 0, sizeof *j);
    j->f = f;
    j->depth = 1;
    j->first[1] = 1;
    fputc('{', f);
}

void bench_json_end(bench_json *j) { fputs("\n}\n", j->f); }

static void json_open(bench_json *j, const char *key, char bracket)
{
    json_key(j, key);
    fputc(bracket, j->f);
    if (j->depth < 15)
        ++j->depth;
    j->first[j->depth] = 1;
}

void bench_json_object(bench_json *j, const char *key) { json_open(j, key, '{'); }

void bench_json_array(bench_json *j, const char *key) { json_open(j, key, '['); }

void bench_json_close(bench_json *j, char bracket)
{
    int empty = j->first[j->depth];
    if (j->depth > 1)
        --j->depth;
    if (!empty)
        fprintf(j->f, "\n%*s", 2 * j->depth, "");
    fputc(bracket, j->f);
}

void bench_json_str(bench_json *j, const char *key, const char *value)
{
    json_key(j, key);
    json_string(j->f, value);
}

void bench_json_num(bench_json *j, const char *key, double value)
{
    json_key(j, key);
    if (isfinite(value) && value == floor(value) && fabs(value) < 9e15)
        fprintf(j->f, "%.0f", value);
    else if (isfinite(value))
        fprintf(j->f, "%.9g", value);
    else
        fputs("null", j->f);
}

void bench_json_int(bench_json *j, const char *key, int64_t value)
{
    json_key(j, key);
    fprintf(j->f, "%lld", (long long)value);
}

int bench_parse_int(const char *s, int64_t lo, int64_t hi, int64_t *out)
{
    if (!s || *s < '0' || *s > '9')
        return -1;
    char *end;
    errno = 0;
    const long long v = strtoll(s, &end, 10);
    if (errno || *end || v < lo || v > hi)
        return -1;
    *out = (int64_t)v;
    return 0;
}

int bench_parse_backend(const char *s, mla_backend *out)
{
    for (int b = 0; b < MLA_BACKEND_COUNT; ++b)
        if (!strcmp(s, mla_backend_name((mla_backend)b))) {
            *out = (mla_backend)b;
            return 0;
        }
    return -1;
}
