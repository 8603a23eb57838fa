/* `mla bench mxfp4`: the MXFP4 GEMM path (include/mla/mla_mxfp4.h) on
 * DeepSeek-V3's absorbed-attention shapes, next to the bf16 batched GEMM of
 * the same shape in the same run:
 *
 *   W_kc  B = 128 heads, (K, N) = (128, 512): q_nope [T,128,128] -> [T,128,512]
 *   W_vc  B = 128 heads, (K, N) = (512, 128): o_lat [T,128,512] -> [T,128,128]
 *
 * x is a [B, M, K] view of a [M, B, K] buffer and y a [B, M, N] view of a
 * [M, B, N] buffer, as MLA passes them (M = T). Variants: mla_batched_gemm
 * (bf16 x, bf16 W [B, K, N]), mla_batched_gemm_a16wfp4 (bf16 x, prequant on,
 * MXFP4 W with ROW_MAJOR scales), mla_batched_gemm_a4w4 (x MXFP4 codes
 * [B, M, K/2] viewed from [M, B, K/2], W as before); y bf16. Then o_proj's
 * input: mla_fused_flatten_mxfp4_quant and mla_fused_flatten_fp8_group_quant
 * of [T, 128, 128] bf16. Bytes count each input once and each output once.
 * The shared helpers of bench_mxfp4.h live here too. */
#define _POSIX_C_SOURCE 200809L

#include "bench/bench_mxfp4.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>


/* ------------------------------------------------------------- shared */

static int parse_list(const char *s, int64_t *out, int *n)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", s);
    *n = 0;
    for (char *p = buf; p && *p;) {
        char *e = strchr(p, ',');
        if (e)
            *e = '\0';
        int64_t v;
        if (*n == BENCH_MX_MAX_LIST || bench_parse_int(p, 1, (int64_t)1 << 24, &v))
            return -1;
        out[(*n)++] = v;
        p = e ? e + 1 : NULL;
    }
    return *n > 0 ? 0 : -1;
}

static int parse_pos(const char *s, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (!*s || errno || *end || !isfinite(v) || v < 0)
        return -1;
    *out = v;
    return 0;
}

static int bad(const char *sub, const char *what, const char *v)
{
    fprintf(stderr, "mla bench %s: bad %s '%s' (see mla bench --help)\n", sub, what, v);
    return BENCH_EXIT_USAGE;
}

int bench_mx_parse(int argc, char **argv, const char *sub, const char *list0, const char *list1,
                   bench_mx_args *a)
{
    memset(a, 0, sizeof *a);
    a->sub = sub;
    a->backend = MLA_BACKEND_AUTO;
    a->seed = 0x6d6c61u;
    bench_ceiling_options_default(&a->c);
    for (int i = 2; i < argc; ++i) {
        const char *k = argv[i];
        if (!strcmp(k, "--no-ceilings")) {
            a->no_ceilings = 1;
            continue;
        }
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v)
            return bad(sub, "option (needs a value)", k);
        ++i;
        int64_t n;
        double d;
        if (!strcmp(k, "--backend")) {
            if (bench_parse_backend(v, &a->backend))
                return bad(sub, "--backend", v);
        } else if (!strcmp(k, list0)) {
            if (parse_list(v, a->list[0], &a->n_list[0]))
                return bad(sub, k, v);
        } else if (list1 && !strcmp(k, list1)) {
            if (parse_list(v, a->list[1], &a->n_list[1]))
                return bad(sub, k, v);
        } else if (!strcmp(k, "--reps")) {
            if (bench_parse_int(v, 1, 100000, &n))
                return bad(sub, k, v);
            a->reps = (int)n;
        } else if (!strcmp(k, "--warmup")) {
            if (bench_parse_int(v, 1, 100000, &n))
                return bad(sub, k, v);
            a->warmup = (int)n;
        } else if (!strcmp(k, "--threads")) {
            if (bench_parse_int(v, 0, 4096, &n))
                return bad(sub, k, v);
            a->threads = (int)n;
        } else if (!strcmp(k, "--max-call-s")) {
            if (parse_pos(v, &a->max_call_s))
                return bad(sub, k, v);
        } else if (!strcmp(k, "--row-budget-s")) {
            if (parse_pos(v, &a->row_budget_s))
                return bad(sub, k, v);
        } else if (!strcmp(k, "--rotate-mib")) {
            if (bench_parse_int(v, 0, ((int64_t)1 << 20), &n))
                return bad(sub, k, v);
            a->rotate_bytes = n << 20;
        } else if (!strcmp(k, "--copy-mib")) {
            if (bench_parse_int(v, 1, ((int64_t)1 << 20), &n))
                return bad(sub, k, v);
            a->c.copy_bytes = n << 20;
        } else if (!strcmp(k, "--matmul-gflops")) {
            if (parse_pos(v, &d))
                return bad(sub, k, v);
            a->c.given_gflops = d;
        } else if (!strcmp(k, "--matmul-source")) {
            a->c.given_how = v;
        } else if (!strcmp(k, "--seed")) {
            if (bench_parse_int(v, 0, INT64_MAX, &n))
                return bad(sub, k, v);
            a->seed = (uint64_t)n;
        } else if (!strcmp(k, "--json")) {
            a->json = v;
        } else {
            fprintf(stderr, "mla bench %s: unknown option '%s' (see mla bench --help)\n", sub, k);
            return BENCH_EXIT_USAGE;
        }
    }
    return BENCH_EXIT_OK;
}

mla_context *bench_mx_open(bench_mx_args *a, bench_ceilings *c)
{
    mla_context_options co = {a->threads, 0, NULL};
    mla_context *ctx = NULL;
    mla_status st = mla_context_create(a->backend, &co, &ctx);
    if (st != MLA_OK) {
        fprintf(stderr, "mla bench %s: cannot create a %s context: %s\n", a->sub,
                mla_backend_name(a->backend), mla_status_name(st));
        return NULL;
    }
    a->device = mla_context_memory(ctx) != MLA_MEMORY_HOST;
    if (!a->reps)
        a->reps = a->device ? 20 : 5;
    if (!a->warmup)
        a->warmup = a->device ? 5 : 2;
    if (a->max_call_s <= 0)
        a->max_call_s = a->device ? 2.0 : 1.5;
    if (a->row_budget_s <= 0)
        a->row_budget_s = a->device ? 1.0 : 0.6;
    if (!a->rotate_bytes)
        a->rotate_bytes = a->device ? ((int64_t)256 << 20) : 4 * bench_llc_bytes();
    a->c.threads = a->threads;
    a->c.max_call_s = a->max_call_s;

    const mla_build_info *bi = mla_build_info_get();
    char when[64] = "";
    time_t now = time(NULL);
    struct tm tmv;
    if (gmtime_r(&now, &tmv))
        strftime(when, sizeof when, "%Y-%m-%d %H:%M UTC", &tmv);
    printf("mla bench %s   libmla %s   %s\n", a->sub, bi->version, when);
    printf("backend   : %s (%s)\n", mla_backend_name(mla_context_backend(ctx)),
           mla_context_device_name(ctx));
    const char *why = mla_context_fallback_reason(ctx);
    if (why && *why)
        printf("fallback  : %s\n", why);
    printf("host CPU  : %s, %d logical CPUs, LLC %lld MiB; load average %.2f\n", bench_cpu_model(),
           bench_cpu_count(), (long long)(bench_llc_bytes() >> 20), bench_loadavg());
    printf("build     : %s; OpenMP %s, OpenBLAS %s; CPU kernels: %s\n", bi->compiler,
           bi->has_openmp ? "yes" : "no", bi->has_openblas ? "yes" : "no", bi->cpu_isa);
    printf("timing    : up to %d reps after %d warm-up, row budget %.2f s, max call %.2f s, "
           "input sets rotate over %lld MiB\n",
           a->reps, a->warmup, a->row_budget_s, a->max_call_s, (long long)(a->rotate_bytes >> 20));
    if (bench_loadavg() > bench_cpu_count())
        printf("WARNING   : the host is busy (load %.1f on %d CPUs)\n", bench_loadavg(),
               bench_cpu_count());
    printf("\n");
    fflush(stdout);

    memset(c, 0, sizeof *c);
    snprintf(c->copy_how, sizeof c->copy_how, "not measured (--no-ceilings)");
    snprintf(c->matmul_how, sizeof c->matmul_how, "not measured (--no-ceilings)");
    if (!a->no_ceilings)
        bench_measure_ceilings(ctx, &a->c, c, stderr);
    return ctx;
}

mla_status bench_mx_time(mla_context *ctx, const bench_mx_args *a, bench_mx_call fn, void *arg,
                         int n_inst, double budget_s, bench_mx_timing *t)
{
    memset(t, 0, sizeof *t);
    int next = 0;
    double t_call = 0.0;
    for (int w = 0; w < a->warmup; ++w) {
        double t0 = bench_now();
        mla_status st = fn(arg, next++ % n_inst);
        if (st == MLA_OK)
            st = mla_context_synchronize(ctx);
        if (st != MLA_OK)
            return st;
        t_call = bench_now() - t0;
        if (t_call * (w + 2) > 0.25 * budget_s)
            break; /* slow calls: one or two warm-ups are enough */
    }
    const double tc = t_call > 1e-7 ? t_call : 1e-7;
    int batch = (int)ceil((a->device ? 2e-3 : 2e-4) / tc);
    batch = batch < 1 ? 1 : batch > 200 ? 200 : batch;
    int reps = (int)(budget_s / (tc * batch));
    reps = reps < 1 ? 1 : reps > a->reps ? a->reps : reps;
    double ts[1024], cs[1024];
    reps = reps > 1024 ? 1024 : reps;
    for (int i = 0; i < reps; ++i) {
        mla_status st = mla_context_synchronize(ctx);
        const double t0 = bench_now(), c0 = bench_cpu_seconds();
        for (int b = 0; b < batch && st == MLA_OK; ++b)
            st = fn(arg, next++ % n_inst);
        if (st == MLA_OK)
            st = mla_context_synchronize(ctx);
        if (st != MLA_OK)
            return st;
        ts[i] = (bench_now() - t0) / batch;
        cs[i] = (bench_cpu_seconds() - c0) / batch;
    }
    t->cpu_s = bench_median(cs, reps);
    t->reps = reps;
    t->batch = batch;
    t->min_s = bench_min(ts, reps);
    t->max_s = bench_max(ts, reps);
    t->median_s = bench_median(ts, reps);
    return MLA_OK;
}

mla_status bench_mx_upload(mla_context *ctx, bench_rng *rng, mla_dtype dt, int32_t ndim,
                           const int64_t *shape, bench_fill kind, void **mem, mla_tensor *t)
{
    int64_t numel = 1;
    for (int32_t d = 0; d < ndim; ++d)
        numel *= shape[d];
    const size_t bytes = (size_t)numel * mla_dtype_size(dt);
    *mem = NULL;
    void *h = malloc(bytes ? bytes : 1);
    if (!h)
        return MLA_ERR_OUT_OF_MEMORY;
    bench_fill_host(rng, h, dt, numel, kind);
    mla_status st = mla_malloc(ctx, bytes ? bytes : 1, mem);
    if (st == MLA_OK)
        st = mla_memcpy(ctx, *mem, h, bytes, MLA_COPY_HOST_TO_CONTEXT);
    if (st == MLA_OK)
        st = mla_tensor_init(t, *mem, dt, mla_context_memory(ctx), ndim, shape);
    free(h);
    return st;
}

void bench_mx_note(mla_context *ctx, mla_status st, char *buf, size_t len)
{
    const char *param = mla_context_error_param(ctx), *detail = mla_context_error_detail(ctx);
    if (st == MLA_ERR_UNSUPPORTED)
        snprintf(buf, len, "unsupported%s%s%s", *param ? " (" : "", param, *param ? ")" : "");
    else
        snprintf(buf, len, "error: %s%s%s%s%s%s", mla_status_name(st), *param ? " (" : "", param,
                 *param ? ")" : "", *detail ? ": " : "", detail);
}

/* -------------------------------------------------------------- mxfp4 */

enum { V_BF16, V_A16WFP4, V_A4W4, V_FLAT_MXFP4, V_FLAT_FP8, V_COUNT };
static const char *const v_name[V_COUNT] = {"bf16", "a16wfp4", "a4w4", "mxfp4", "fp8 g128"};
static const char *const v_api[V_COUNT] = {"mla_batched_gemm", "mla_batched_gemm_a16wfp4",
                                           "mla_batched_gemm_a4w4", "mla_fused_flatten_mxfp4_quant",
                                           "mla_fused_flatten_fp8_group_quant"};

#define MX_HEADS 128
#define MX_INST 8

typedef struct mx_set {
    mla_context *ctx;
    int v;
    int n;
    void *mem[MX_INST][6];
    mla_tensor x[MX_INST], w[MX_INST], y[MX_INST], c[MX_INST], s[MX_INST];
    mla_mxfp4_operand wq[MX_INST], xq[MX_INST];
} mx_set;

typedef struct mx_row {
    const char *shape, *variant, *api;
    int64_t T, B, M, N, K;
    int is_gemm;
    int ok;
    char note[200];
    bench_mx_timing t;
    int64_t bytes;
    double flops;
    double gbs, gflops, r_copy, r_mm, vs_bf16;
    int inst;
} mx_row;

static mla_status mx_call(void *arg, int i)
{
    mx_set *s = arg;
    switch (s->v) {
    case V_BF16:
        return mla_batched_gemm(s->ctx, &s->x[i], &s->w[i], 1.0f, &s->y[i]);
    case V_A16WFP4:
        return mla_batched_gemm_a16wfp4(s->ctx, &s->x[i], &s->wq[i], 1, MLA_MXFP4_PRODUCTION,
                                        &s->y[i]);
    case V_A4W4:
        return mla_batched_gemm_a4w4(s->ctx, &s->xq[i], &s->wq[i], &s->y[i]);
    case V_FLAT_MXFP4:
        return mla_fused_flatten_mxfp4_quant(s->ctx, &s->x[i], &s->c[i], &s->s[i],
                                             MLA_MXFP4_PRODUCTION);
    default:
        return mla_fused_flatten_fp8_group_quant(s->ctx, &s->x[i], &s->c[i], &s->s[i]);
    }
}

static void mx_free(mx_set *s)
{
    for (int i = 0; i < MX_INST; ++i)
        for (int k = 0; k < 6; ++k)
            if (s->mem[i][k])
                mla_free(s->ctx, s->mem[i][k]);
    memset(s->mem, 0, sizeof s->mem);
}

/* An MXFP4 operand [B, R, K] quantized on the context from a bf16 tensor
 * (ROW_MAJOR scales, contiguous [B*R, K] rows). */
static mla_status mx_quant(mla_context *ctx, const mla_tensor *src2d, int64_t B, int64_t R,
                           int64_t K, void **mc, void **ms, mla_mxfp4_operand *op)
{
    const int64_t cs[2] = {B * R, K / 2}, ss[2] = {B * R, K / 32};
    mla_tensor c2, s2;
    MLA_BENCH_TRY(mla_malloc(ctx, (size_t)(B * R * K / 2), mc));
    MLA_BENCH_TRY(mla_malloc(ctx, (size_t)(B * R * K / 32), ms));
    const mla_memory mem = mla_context_memory(ctx);
    MLA_BENCH_TRY(mla_tensor_init(&c2, *mc, MLA_DTYPE_FP4X2, mem, 2, cs));
    MLA_BENCH_TRY(mla_tensor_init(&s2, *ms, MLA_DTYPE_E8M0, mem, 2, ss));
    MLA_BENCH_TRY(mla_mxfp4_quant(ctx, src2d, &c2, &s2, MLA_SCALE_ROW_MAJOR, MLA_MXFP4_PRODUCTION));
    MLA_BENCH_TRY(mla_context_synchronize(ctx));
    const int64_t c3[3] = {B, R, K / 2}, s3[3] = {B, R, K / 32};
    MLA_BENCH_TRY(mla_tensor_init(&op->codes, *mc, MLA_DTYPE_FP4X2, mem, 3, c3));
    MLA_BENCH_TRY(mla_tensor_init(&op->scales, *ms, MLA_DTYPE_E8M0, mem, 3, s3));
    op->layout = MLA_SCALE_ROW_MAJOR;
    return MLA_OK;
}

/* [B, M, X] view of a contiguous [M, B, X] tensor. */
static mla_status mx_swap01(mla_tensor *t) { return mla_tensor_transpose(t, 0, 1); }

static mla_status mx_setup(mx_set *s, bench_rng *rng, const mx_row *w)
{
    mla_context *ctx = s->ctx;
    const int64_t B = w->B, M = w->M, N = w->N, K = w->K;
    for (int i = 0; i < s->n; ++i) {
        void **m = s->mem[i];
        if (!w->is_gemm) {
            const int64_t xs[3] = {M, B, K};
            MLA_BENCH_TRY(
                bench_mx_upload(ctx, rng, MLA_DTYPE_BF16, 3, xs, BENCH_FILL_ACT, &m[0], &s->x[i]));
            const int fp8 = s->v == V_FLAT_FP8;
            const int64_t cs[2] = {M, fp8 ? B * K : B * K / 2},
                          ss[2] = {M, fp8 ? B * K / 128 : B * K / 32};
            const mla_dtype cd = fp8 ? MLA_DTYPE_FP8_E4M3FN : MLA_DTYPE_FP4X2,
                            sd = fp8 ? MLA_DTYPE_F32 : MLA_DTYPE_E8M0;
            MLA_BENCH_TRY(bench_mx_upload(ctx, rng, cd, 2, cs, BENCH_FILL_BYTES, &m[1], &s->c[i]));
            MLA_BENCH_TRY(bench_mx_upload(ctx, rng, sd, 2, ss, BENCH_FILL_BYTES, &m[2], &s->s[i]));
            continue;
        }
        /* x [M, B, K] bf16 (also the source of a4w4's codes), y [M, B, N] poison */
        const int64_t xs[3] = {M, B, K}, ys[3] = {M, B, N};
        MLA_BENCH_TRY(
            bench_mx_upload(ctx, rng, MLA_DTYPE_BF16, 3, xs, BENCH_FILL_ACT, &m[0], &s->x[i]));
        MLA_BENCH_TRY(
            bench_mx_upload(ctx, rng, MLA_DTYPE_BF16, 3, ys, BENCH_FILL_BYTES, &m[1], &s->y[i]));
        if (s->v == V_BF16) {
            const int64_t ws[3] = {B, K, N};
            MLA_BENCH_TRY(bench_mx_upload(ctx, rng, MLA_DTYPE_BF16, 3, ws, BENCH_FILL_WEIGHT, &m[2],
                                          &s->w[i]));
        } else {
            const int64_t ws[2] = {B * N, K};
            mla_tensor wb;
            MLA_BENCH_TRY(
                bench_mx_upload(ctx, rng, MLA_DTYPE_BF16, 2, ws, BENCH_FILL_WEIGHT, &m[2], &wb));
            MLA_BENCH_TRY(mx_quant(ctx, &wb, B, N, K, &m[3], &m[4], &s->wq[i]));
            mla_free(ctx, m[2]);
            m[2] = NULL;
        }
        if (s->v == V_A4W4) {
            const int64_t x2[2] = {M * B, K};
            mla_tensor xb;
            MLA_BENCH_TRY(
                mla_tensor_init(&xb, m[0], MLA_DTYPE_BF16, mla_context_memory(ctx), 2, x2));
            /* codes [M, B, K/2] as MLA would quantize q_nope / o_lat, viewed [B, M, K/2] */
            MLA_BENCH_TRY(mx_quant(ctx, &xb, M, B, K, &m[2], &m[5], &s->xq[i]));
            MLA_BENCH_TRY(mx_swap01(&s->xq[i].codes));
            MLA_BENCH_TRY(mx_swap01(&s->xq[i].scales));
        }
        MLA_BENCH_TRY(mx_swap01(&s->x[i]));
        MLA_BENCH_TRY(mx_swap01(&s->y[i]));
    }
    return MLA_OK;
}

static void mx_counts(mx_row *w, int v)
{
    const int64_t B = w->B, M = w->M, N = w->N, K = w->K;
    switch (v) {
    case V_BF16:
        w->bytes = 2 * (B * M * K + B * K * N + B * M * N);
        break;
    case V_A16WFP4:
        w->bytes = 2 * B * M * K + B * N * K / 2 + B * N * K / 32 + 2 * B * M * N;
        break;
    case V_A4W4:
        w->bytes = B * M * K / 2 + B * M * K / 32 + B * N * K / 2 + B * N * K / 32 + 2 * B * M * N;
        break;
    case V_FLAT_MXFP4:
        w->bytes = 2 * M * B * K + M * B * K / 2 + M * B * K / 32;
        break;
    default:
        w->bytes = 2 * M * B * K + M * B * K + 4 * (M * B * K / 128);
        break;
    }
    w->flops = w->is_gemm ? 2.0 * (double)B * (double)M * (double)N * (double)K : 0.0;
}

static void mx_print(FILE *out, const void *rp, int n)
{
    const mx_row *rows = rp;
    fprintf(out, "%-18s %-9s %5s %11s %11s %9s %9s %5s %8s %8s %9s  %s\n", "shape", "variant", "T",
            "median_us", "min_us", "GB/s", "GFLOP/s", "reps", "%copyBW", "%matmul", "vs bf16",
            "api");
    const char *prev = NULL;
    for (int i = 0; i < n; ++i) {
        const mx_row *w = &rows[i];
        if (prev && (strcmp(prev, w->shape) || !strcmp(w->variant, "bf16")))
            fputc('\n', out);
        prev = w->shape;
        fprintf(out, "%-18s %-9s %5lld ", w->shape, w->variant, (long long)w->T);
        if (!w->ok) {
            fprintf(out, "%s\n", w->note);
            continue;
        }
        char rc[16] = "n/a", rm[16] = "-", vb[16] = "-";
        if (isfinite(w->r_copy))
            snprintf(rc, sizeof rc, "%.1f%%", 100.0 * w->r_copy);
        if (w->is_gemm)
            snprintf(rm, sizeof rm, isfinite(w->r_mm) ? "%.1f%%" : "n/a", 100.0 * w->r_mm);
        if (isfinite(w->vs_bf16))
            snprintf(vb, sizeof vb, "%.2fx", w->vs_bf16);
        fprintf(out, "%11.1f %11.1f %9.2f %9.1f %5d %8s %8s %9s  %s\n", 1e6 * w->t.median_s,
                1e6 * w->t.min_s, w->gbs, w->gflops, w->t.reps, rc, rm, vb, w->api);
    }
}

static void mx_json(bench_json *j, const mx_row *rows, int n)
{
    bench_json_array(j, "rows");
    for (int i = 0; i < n; ++i) {
        const mx_row *w = &rows[i];
        bench_json_object(j, NULL);
        bench_json_str(j, "shape", w->shape);
        bench_json_str(j, "variant", w->variant);
        bench_json_str(j, "api", w->api);
        bench_json_int(j, "T", w->T);
        bench_json_int(j, "B", w->B);
        bench_json_int(j, "M", w->M);
        bench_json_int(j, "N", w->N);
        bench_json_int(j, "K", w->K);
        bench_json_str(j, "status", w->ok ? "ok" : "failed");
        bench_json_str(j, "note", w->note);
        bench_json_num(j, "median_s", w->ok ? w->t.median_s : NAN);
        bench_json_num(j, "min_s", w->ok ? w->t.min_s : NAN);
        bench_json_num(j, "max_s", w->ok ? w->t.max_s : NAN);
        bench_json_int(j, "reps", w->t.reps);
        bench_json_int(j, "batch", w->t.batch);
        bench_json_int(j, "input_sets", w->inst);
        bench_json_int(j, "bytes", w->bytes);
        bench_json_num(j, "flops", w->flops);
        bench_json_num(j, "gbs", w->ok ? w->gbs : NAN);
        bench_json_num(j, "gflops", w->ok && w->is_gemm ? w->gflops : NAN);
        bench_json_num(j, "ratio_copy_bw", w->ok ? w->r_copy : NAN);
        bench_json_num(j, "ratio_matmul", w->ok && w->is_gemm ? w->r_mm : NAN);
        bench_json_num(j, "time_vs_bf16", w->vs_bf16);
        bench_json_close(j, '}');
    }
    bench_json_close(j, ']');
}

int bench_mx_write_json(const bench_mx_args *a, mla_context *ctx, const bench_ceilings *c,
                        void (*rows_json)(bench_json *, const void *, int), const void *rows, int n,
                        double seconds)
{
    int rc = BENCH_EXIT_OK;
    if (!a->json)
        return rc;
    FILE *f = fopen(a->json, "w");
    if (!f) {
        fprintf(stderr, "mla bench %s: cannot write %s\n", a->sub, a->json);
        return BENCH_EXIT_FAIL;
    }
    const mla_build_info *bi = mla_build_info_get();
    bench_json j;
    bench_json_begin(&j, f);
    bench_json_str(&j, "bench", a->sub);
    bench_json_str(&j, "version", bi->version);
    bench_json_int(&j, "unix_time", (int64_t)time(NULL));
    bench_json_str(&j, "backend", mla_backend_name(mla_context_backend(ctx)));
    bench_json_str(&j, "device", mla_context_device_name(ctx));
    bench_json_str(&j, "cpu_model", bench_cpu_model());
    bench_json_int(&j, "cpu_count", bench_cpu_count());
    bench_json_str(&j, "compiler", bi->compiler);
    bench_json_int(&j, "threads", a->threads);
    bench_json_ceilings(&j, c);
    rows_json(&j, rows, n);
    bench_json_num(&j, "sweep_seconds", seconds);
    bench_json_num(&j, "loadavg_end", bench_loadavg());
    bench_json_end(&j);
    if (fclose(f) != 0)
        rc = BENCH_EXIT_FAIL;
    return rc;
}

int bench_mx_finish(const bench_mx_args *a, mla_context *ctx, const bench_ceilings *c,
                    void (*print)(FILE *, const void *, int),
                    void (*rows_json)(bench_json *, const void *, int), const void *rows, int n,
                    double start, const char *note, int errors)
{
    const double seconds = bench_now() - start;
    bench_print_ceilings(stdout, c);
    printf("\n");
    print(stdout, rows, n);
    printf("\nsweep: %.1f s; %s\n", seconds, note);
    const int rc = bench_mx_write_json(a, ctx, c, rows_json, rows, n, seconds);
    return errors ? BENCH_EXIT_FAIL : rc;
}

static void mx_json_cb(bench_json *j, const void *rows, int n) { mx_json(j, rows, n); }

int bench_mxfp4_cmd(int argc, char **argv)
{
    bench_mx_args a;
    int rc = bench_mx_parse(argc, argv, "mxfp4", "--tokens", NULL, &a);
    if (rc != BENCH_EXIT_OK)
        return rc;
    if (!a.n_list[0]) {
        const int64_t t[4] = {1, 16, 128, 1024};
        memcpy(a.list[0], t, sizeof t);
        a.n_list[0] = 4;
    }
    bench_ceilings c;
    mla_context *ctx = bench_mx_open(&a, &c);
    if (!ctx)
        return BENCH_EXIT_FAIL;
    const double start = bench_now();

    struct {
        const char *name;
        int64_t K, N;
    } shapes[2] = {{"W_kc 128x128->512", 128, 512}, {"W_vc 128x512->128", 512, 128}};
    const int nrows = a.n_list[0] * (2 * 3 + 2);
    mx_row *rows = calloc((size_t)nrows, sizeof *rows);
    if (!rows) {
        mla_context_destroy(ctx);
        return BENCH_EXIT_FAIL;
    }
    int n = 0, errors = 0;
    bench_rng rng;
    bench_rng_seed(&rng, a.seed);
    fprintf(stderr, "rows:\n");
    for (int si = 0; si < 3; ++si) {
        for (int ti = 0; ti < a.n_list[0]; ++ti) {
            const int64_t T = a.list[0][ti];
            const int v0 = si < 2 ? V_BF16 : V_FLAT_MXFP4, v1 = si < 2 ? V_A4W4 : V_FLAT_FP8;
            double t_bf16 = NAN;
            for (int v = v0; v <= v1; ++v) {
                mx_row *w = &rows[n++];
                w->shape = si < 2 ? shapes[si].name : "flatten [T,128,128]";
                w->variant = v_name[v];
                w->api = v_api[v];
                w->T = T;
                w->B = MX_HEADS;
                w->M = T;
                w->K = si < 2 ? shapes[si].K : 128;
                w->N = si < 2 ? shapes[si].N : 0;
                w->is_gemm = si < 2;
                w->vs_bf16 = NAN;
                mx_counts(w, v);
                mx_set s;
                memset(&s, 0, sizeof s);
                s.ctx = ctx;
                s.v = v;
                int64_t ni = (a.rotate_bytes + w->bytes - 1) / (w->bytes > 0 ? w->bytes : 1);
                s.n = ni < 1 ? 1 : ni > MX_INST ? MX_INST : (int)ni;
                w->inst = s.n;
                mla_status st = mx_setup(&s, &rng, w);
                if (st == MLA_OK)
                    st = bench_mx_time(ctx, &a, mx_call, &s, s.n, a.row_budget_s, &w->t);
                mx_free(&s);
                if (st != MLA_OK) {
                    bench_mx_note(ctx, st, w->note, sizeof w->note);
                    errors += st != MLA_ERR_UNSUPPORTED;
                } else {
                    w->ok = 1;
                    const double t = w->t.median_s;
                    w->gbs = (double)w->bytes / t / 1e9;
                    w->gflops = w->flops / t / 1e9;
                    w->r_copy = c.copy_gbs > 0 ? w->gbs / c.copy_gbs : NAN;
                    w->r_mm = c.matmul_gflops > 0 ? w->gflops / c.matmul_gflops : NAN;
                    if (v == V_BF16)
                        t_bf16 = t;
                    else if (w->is_gemm)
                        w->vs_bf16 = t / t_bf16;
                }
                fprintf(stderr, "  %-18s %-9s T=%-5lld %s %.1f us\n", w->shape, w->variant,
                        (long long)T, w->ok ? "ok" : w->note, w->ok ? 1e6 * w->t.median_s : 0.0);
            }
        }
    }
    if (bench_mx_finish(
            &a, ctx, &c, mx_print, mx_json_cb, rows, n, start,
            "median of the reps after warm-up; x and y are [B,M,*] views of [M,B,*] buffers (B = "
            "128 heads, M = T); GB/s counts each input once and each output once; %copyBW and "
            "%matmul are achieved over the ceilings above; vs bf16 = time / bf16 time of the "
            "same shape and T (docs/PERFORMANCE.md)",
            errors) != BENCH_EXIT_OK)
        rc = BENCH_EXIT_FAIL;
    free(rows);
    mla_context_destroy(ctx);
    return rc;
}
