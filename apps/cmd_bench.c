/* mla bench: the benchmarks. `mla bench prepare` times the prepare path's
 * ops on a model's shapes; `mla bench ceilings` measures the copy bandwidth
 * and matmul rate every figure is divided by. The code is in bench/. */
#define _POSIX_C_SOURCE 200809L

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "apps/cmd.h"
#include "apps/suggest.h"
#include "bench/bench_attention.h"
#include "bench/bench_mxfp4.h"
#include "bench/bench_prepare.h"
#include "bench/ceilings.h"

_Static_assert(BENCH_EXIT_OK == MLA_EXIT_OK && BENCH_EXIT_FAIL == MLA_EXIT_FAIL &&
                   BENCH_EXIT_USAGE == MLA_EXIT_USAGE,
               "the bench commands' exit codes are the tool's");

void usage_bench(FILE *out)
{
    fprintf(out,
            "usage: mla bench prepare [OPTIONS]\n"
            "       mla bench ceilings [OPTIONS]\n"
            "       mla bench mxfp4 [--tokens 1,16,128,1024] [OPTIONS]\n"
            "       mla bench indexer [--contexts 4096,32768,131072] [--batch 1,16,64] [OPTIONS]\n"
            "       mla bench decode [--quick] [--sparse [--topk N]] [--batch LIST]\n"
            "                        [--contexts LIST] [--heads LIST] [--caches LIST] [OPTIONS]\n"
            "       mla bench prefill [--quick] [--tokens LIST] [--batch LIST] [--heads LIST]\n"
            "                         [OPTIONS]\n\n"
            "prepare: times each op of the MLA prepare path (q_a/kv_a/q_b projections in bf16\n"
            "and fp8 block-scaled weights, the W_kc absorb, the fused QK RMSNorm, RoPE on\n"
            "q_pe and k_pe, the latent cache write in bf16 and fp8, the fused RoPE + concat +\n"
            "cache write, and the whole mla_prepare) for each token count, and reports the\n"
            "median time, GB/s, GFLOP/s and the ratio to the ceilings measured in the same\n"
            "run. Rows a backend cannot run print \"unsupported\".\n"
            "ceilings: measures and prints only the two ceilings: copy bandwidth, and the\n"
            "matmul rate of OpenBLAS sgemm (host) or of the vendor BLAS, cuBLAS / rocBLAS\n"
            "bf16 loaded at run time ($MLA_BENCH_BLAS names the library), else the device's\n"
            "theoretical peak, labelled so (device).\n"
            "mxfp4: mla_batched_gemm_a16wfp4 / _a4w4 next to the bf16 mla_batched_gemm on\n"
            "DeepSeek-V3's W_kc / W_vc shapes (128 heads), and the fused flatten + MXFP4 /\n"
            "fp8 quant of [T,128,128]; ratios to the ceilings and to bf16 (bench_mxfp4.c).\n"
            "indexer: paged MQA logits (Hi 64, block 64, fp8) + top-k 2048 per context and\n"
            "batch, as fractions of the roofline; slow cases are skipped per --max-call-s\n"
            "(bench_indexer.c).\n"
            "decode: the attention core in decode (q bf16, block 64, L 512, R 64) on FlashMLA's\n"
            "shapes (batch 128, context 4096, heads 16 and 128; cache bf16, fp8, FP8_SCALED)\n"
            "and laptop shapes (batch 1 and 4, context 1024..8192, heads 16) as fractions of\n"
            "the roofline; --quick: batch 1 and 4, context 1024; a list option makes a cross\n"
            "product over the three caches; --caches bf16,fp8,fp8_scaled keeps those;\n"
            "--sparse: top-k (2048) positions per row drawn from the context (device 32768,\n"
            "host 8192), caches bf16 and FP8_SCALED, heads 16, 64, 128, batch 1..128, bytes of\n"
            "the selected rows only (bench_decode.c).\n"
            "prefill: T = 512..16384 new tokens per sequence attending causally, batch 1 and 4,\n"
            "heads 16 and 128, bf16 cache, through the absorbed attention; also reports the\n"
            "expanded form's FLOP rate for the PyTorch SDPA peer (bench_prefill.c).\n"
            "mxfp4, indexer, decode and prefill take the options below except --config and\n"
            "--ops (prefill takes --tokens).\n\n"
            "options:\n"
            "  --backend B         auto|reference|cpu|hip (default auto)\n"
            "  --config NAME       model preset (default DeepSeek-V3)\n"
            "  --tokens LIST       token counts, e.g. 1,16,128,1024 (the default)\n"
            "  --ops LIST          only these ops: %s\n"
            "  --reps N            timed samples per row, median reported (default host 7,\n"
            "                      device 20; slow rows take fewer to stay in budget)\n"
            "  --warmup N          untimed calls first (default host 2, device 5)\n"
            "  --threads N         CPU threads of the context, the copy and BLAS (0 = default)\n"
            "  --max-call-s S      skip rows predicted slower than S per call (host 1, device 2)\n"
            "  --row-budget-s S    time spent on one row's samples (host 0.8)\n"
            "  --time-budget-s S   the sweep's target wall time (host 45)\n"
            "  --rotate-mib N      rotate input sets over N MiB (host 4 x LLC, device 256)\n"
            "  --copy-mib N        copy-ceiling buffer size (host max(8 x LLC, 256), device 1024)\n"
            "  --matmul-gflops X   a matmul ceiling measured beside this run, used instead\n"
            "                      (e.g. the PyTorch peer's bf16 matmul in the same job)\n"
            "  --matmul-source S   how X was measured (printed with it)\n"
            "  --no-ceilings       skip the ceilings (ratios print n/a)\n"
            "  --seed N            seed of the random inputs\n"
            "  --json FILE         write everything as JSON too\n\n"
            "Speed is measured here, never by tests. docs/PERFORMANCE.md explains the method\n"
            "and records results.\n",
            bench_prepare_op_names());
}

static int parse_double(const char *s, double *out)
{
    if (!s || !*s)
        return -1;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || *end || !isfinite(v) || v < 0)
        return -1;
    *out = v;
    return 0;
}

static int parse_tokens(const char *s, bench_prepare_options *o)
{
    o->n_tokens = 0;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", s);
    for (char *p = buf; p && *p;) {
        char *e = strchr(p, ',');
        if (e)
            *e = '\0';
        int64_t v;
        if (o->n_tokens == BENCH_MAX_TOKENS || mla_app_parse_i64(p, &v) || v < 1 ||
            v > ((int64_t)1 << 24))
            return -1;
        o->tokens[o->n_tokens++] = v;
        p = e ? e + 1 : NULL;
    }
    return o->n_tokens > 0 ? 0 : -1;
}

typedef struct bench_args {
    mla_backend backend;
    int threads;
    const char *json;
    int no_ceilings;
    bench_prepare_options p;
    bench_ceiling_options c;
    int set_reps, set_warmup, set_max_call, set_row_budget, set_time_budget;
    double max_call, row_budget, time_budget;
    int reps, warmup;
} bench_args;

static int usage_error(const char *sub, const char *fmt, const char *arg)
{
    fprintf(stderr, "mla bench %s: ", sub);
    fprintf(stderr, fmt, arg);
    fprintf(stderr, " (see mla bench --help)\n");
    return MLA_EXIT_USAGE;
}

static int parse_args(int argc, char **argv, const char *sub, bench_args *a)
{
    memset(a, 0, sizeof *a);
    a->backend = MLA_BACKEND_AUTO;
    bench_ceiling_options_default(&a->c);
    for (int i = 2; i < argc; ++i) {
        const char *k = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int64_t n;
        double d;
        if (!strcmp(k, "--no-ceilings")) {
            a->no_ceilings = 1;
            continue;
        }
        if (!v)
            return usage_error(sub, "%s needs a value", k);
        ++i;
        if (!strcmp(k, "--backend")) {
            if (mla_app_parse_backend(v, &a->backend))
                return usage_error(sub, "unknown backend '%s'", v);
        } else if (!strcmp(k, "--config")) {
            a->p.config = v;
        } else if (!strcmp(k, "--tokens")) {
            if (parse_tokens(v, &a->p))
                return usage_error(sub, "bad --tokens '%s'", v);
        } else if (!strcmp(k, "--ops")) {
            a->p.ops = v;
        } else if (!strcmp(k, "--reps")) {
            if (mla_app_parse_i64(v, &n) || n < 1 || n > 100000)
                return usage_error(sub, "bad --reps '%s'", v);
            a->reps = (int)n;
            a->set_reps = 1;
        } else if (!strcmp(k, "--warmup")) {
            if (mla_app_parse_i64(v, &n) || n < 1 || n > 100000)
                return usage_error(sub, "bad --warmup '%s' (at least 1)", v);
            a->warmup = (int)n;
            a->set_warmup = 1;
        } else if (!strcmp(k, "--threads")) {
            if (mla_app_parse_i64(v, &n) || n > 4096)
                return usage_error(sub, "bad --threads '%s'", v);
            a->threads = (int)n;
        } else if (!strcmp(k, "--max-call-s")) {
            if (parse_double(v, &a->max_call))
                return usage_error(sub, "bad --max-call-s '%s'", v);
            a->set_max_call = 1;
        } else if (!strcmp(k, "--row-budget-s")) {
            if (parse_double(v, &a->row_budget))
                return usage_error(sub, "bad --row-budget-s '%s'", v);
            a->set_row_budget = 1;
        } else if (!strcmp(k, "--time-budget-s")) {
            if (parse_double(v, &a->time_budget))
                return usage_error(sub, "bad --time-budget-s '%s'", v);
            a->set_time_budget = 1;
        } else if (!strcmp(k, "--rotate-mib")) {
            if (mla_app_parse_i64(v, &n) || n > ((int64_t)1 << 20))
                return usage_error(sub, "bad --rotate-mib '%s'", v);
            a->p.rotate_bytes = n << 20;
        } else if (!strcmp(k, "--copy-mib")) {
            if (mla_app_parse_i64(v, &n) || n < 1 || n > ((int64_t)1 << 20))
                return usage_error(sub, "bad --copy-mib '%s'", v);
            a->c.copy_bytes = n << 20;
        } else if (!strcmp(k, "--matmul-gflops")) {
            if (parse_double(v, &d))
                return usage_error(sub, "bad --matmul-gflops '%s'", v);
            a->c.given_gflops = d;
        } else if (!strcmp(k, "--matmul-source")) {
            a->c.given_how = v;
        } else if (!strcmp(k, "--seed")) {
            if (mla_app_parse_i64(v, &n))
                return usage_error(sub, "bad --seed '%s'", v);
            a->p.seed = (uint64_t)n;
        } else if (!strcmp(k, "--json")) {
            a->json = v;
        } else {
            return usage_error(sub, "unknown option '%s'", k);
        }
    }
    return MLA_EXIT_OK;
}

/* Fills the defaults that depend on where the context's memory is. */
static void apply_defaults(bench_args *a, int device)
{
    bench_prepare_options d;
    bench_prepare_options_default(&d, device);
    bench_prepare_options *p = &a->p;
    if (!p->config)
        p->config = d.config;
    if (!p->n_tokens) {
        memcpy(p->tokens, d.tokens, sizeof d.tokens);
        p->n_tokens = d.n_tokens;
    }
    p->reps = a->set_reps ? a->reps : d.reps;
    p->warmup = a->set_warmup ? a->warmup : d.warmup;
    p->max_call_s = a->set_max_call ? a->max_call : d.max_call_s;
    p->row_budget_s = a->set_row_budget ? a->row_budget : d.row_budget_s;
    p->time_budget_s = a->set_time_budget ? a->time_budget : d.time_budget_s;
    if (!p->seed)
        p->seed = d.seed;
    a->c.threads = a->threads;
    p->threads = a->threads;
    a->c.max_call_s = p->max_call_s;
    if (a->set_reps)
        a->c.reps = a->reps;
}

static void print_header(FILE *out, const char *sub, mla_context *ctx, const bench_args *a)
{
    const mla_build_info *bi = mla_build_info_get();
    char when[64] = "";
    time_t now = time(NULL);
    struct tm tmv;
    if (gmtime_r(&now, &tmv))
        strftime(when, sizeof when, "%Y-%m-%d %H:%M UTC", &tmv);
    fprintf(out, "mla bench %s   libmla %s   %s\n", sub, bi->version, when);
    fprintf(out, "backend   : %s (%s)\n", mla_backend_name(mla_context_backend(ctx)),
            mla_context_device_name(ctx));
    const char *why = mla_context_fallback_reason(ctx);
    if (why && *why)
        fprintf(out, "fallback  : %s\n", why);
    fprintf(out, "host CPU  : %s, %d logical CPUs, LLC %lld MiB; load average %.2f\n",
            bench_cpu_model(), bench_cpu_count(), (long long)(bench_llc_bytes() >> 20),
            bench_loadavg());
    fprintf(out, "build     : %s; OpenMP %s, OpenBLAS %s; CPU kernels: %s\n", bi->compiler,
            bi->has_openmp ? "yes" : "no", bi->has_openblas ? "yes" : "no", bi->cpu_isa);
    if (!strcmp(sub, "prepare")) {
        fprintf(out, "config    : %s; tokens", a->p.config);
        for (int i = 0; i < a->p.n_tokens; ++i)
            fprintf(out, "%s%lld", i ? "," : " ", (long long)a->p.tokens[i]);
        fprintf(out, "; reps %d, warm-up %d, max call %.2f s, row budget %.2f s\n", a->p.reps,
                a->p.warmup, a->p.max_call_s, a->p.row_budget_s);
    }
    if (bench_loadavg() > bench_cpu_count())
        fprintf(out, "WARNING   : the host is busy (load %.1f on %d CPUs): host times and host "
                     "ceilings are both depressed\n",
                bench_loadavg(), bench_cpu_count());
    fprintf(out, "\n");
}

static void json_header(bench_json *j, const char *sub, mla_context *ctx, const bench_args *a)
{
    const mla_build_info *bi = mla_build_info_get();
    bench_json_str(j, "bench", sub);
    bench_json_str(j, "version", bi->version);
    bench_json_int(j, "unix_time", (int64_t)time(NULL));
    bench_json_str(j, "backend", mla_backend_name(mla_context_backend(ctx)));
    bench_json_str(j, "device", mla_context_device_name(ctx));
    bench_json_str(j, "cpu_model", bench_cpu_model());
    bench_json_int(j, "cpu_count", bench_cpu_count());
    bench_json_int(j, "llc_bytes", bench_llc_bytes());
    bench_json_num(j, "loadavg_start", bench_loadavg());
    bench_json_str(j, "compiler", bi->compiler);
    bench_json_int(j, "openmp", bi->has_openmp);
    bench_json_int(j, "openblas", bi->has_openblas);
    bench_json_int(j, "threads", a->threads);
    if (!strcmp(sub, "prepare")) {
        bench_json_str(j, "config", a->p.config);
        bench_json_array(j, "tokens");
        for (int i = 0; i < a->p.n_tokens; ++i)
            bench_json_int(j, NULL, a->p.tokens[i]);
        bench_json_close(j, ']');
        bench_json_int(j, "reps", a->p.reps);
        bench_json_int(j, "warmup", a->p.warmup);
        bench_json_num(j, "max_call_s", a->p.max_call_s);
    }
}

static const char *bench_at(int i, void *user)
{
    return ((const char *const *)user)[i];
}

int cmd_bench(int argc, char **argv)
{
    if (argc < 2) {
        usage_bench(stderr);
        return MLA_EXIT_USAGE;
    }
    const char *sub = argv[1];
    if (!strcmp(sub, "mxfp4"))
        return bench_mxfp4_cmd(argc, argv);
    if (!strcmp(sub, "indexer"))
        return bench_indexer_cmd(argc, argv);
    if (!strcmp(sub, "decode"))
        return bench_decode_cmd(argc, argv);
    if (!strcmp(sub, "prefill"))
        return bench_prefill_cmd(argc, argv);
    if (strcmp(sub, "prepare") && strcmp(sub, "ceilings")) {
        static const char *const subs[] = {"prepare", "ceilings", "mxfp4", "indexer", "decode",
                                           "prefill", NULL};
        fprintf(stderr, "mla bench: unknown benchmark '%s'", sub);
        mla_suggest(stderr, sub, bench_at, (void *)subs);
        fprintf(stderr, " (prepare, ceilings, mxfp4, indexer, decode, prefill)\n");
        return MLA_EXIT_USAGE;
    }
    bench_args a;
    int rc = parse_args(argc, argv, sub, &a);
    if (rc != MLA_EXIT_OK)
        return rc;

    mla_context_options co = {a.threads, 0, NULL};
    mla_context *ctx = NULL;
    mla_status st = mla_context_create(a.backend, &co, &ctx);
    if (st != MLA_OK) {
        fprintf(stderr, "mla bench %s: cannot create a %s context: %s\n", sub,
                mla_backend_name(a.backend), mla_status_name(st));
        return MLA_EXIT_FAIL;
    }
    const int device = mla_context_memory(ctx) != MLA_MEMORY_HOST;
    apply_defaults(&a, device);
    print_header(stdout, sub, ctx, &a);
    fflush(stdout);

    bench_ceilings c;
    memset(&c, 0, sizeof c);
    snprintf(c.copy_how, sizeof c.copy_how, "not measured (--no-ceilings)");
    snprintf(c.matmul_how, sizeof c.matmul_how, "not measured (--no-ceilings)");
    /* progress of the measurements on a terminal only (a pipe gets the results) */
    FILE *progress = isatty(fileno(stderr)) ? stderr : NULL;
    if (!a.no_ceilings)
        bench_measure_ceilings(ctx, &a.c, &c, progress);

    bench_prepare_result res;
    memset(&res, 0, sizeof res);
    rc = MLA_EXIT_OK;
    if (!strcmp(sub, "prepare")) {
        if (progress)
            fprintf(progress, "rows:\n");
        if (bench_prepare_run(ctx, &a.p, &res, progress) != 0) {
            fprintf(stderr, "mla bench prepare: the sweep failed (run on a terminal for its log)\n");
            rc = MLA_EXIT_FAIL;
        } else {
            bench_prepare_judge(&res, &c);
            if (res.n_errors)
                rc = MLA_EXIT_FAIL;
        }
    }

    bench_print_ceilings(stdout, &c);
    if (!strcmp(sub, "prepare") && res.rows) {
        printf("\n");
        bench_prepare_print(stdout, &res);
        printf("\nsweep: %.1f s, load average at the end %.2f; median of the reps after "
               "warm-up; ratios to the ceilings above (docs/PERFORMANCE.md)\n",
               res.seconds, bench_loadavg());
    }

    if (a.json) {
        FILE *f = fopen(a.json, "w");
        if (!f) {
            fprintf(stderr, "mla bench %s: cannot write %s\n", sub, a.json);
            rc = MLA_EXIT_FAIL;
        } else {
            bench_json j;
            bench_json_begin(&j, f);
            json_header(&j, sub, ctx, &a);
            bench_json_ceilings(&j, &c);
            if (res.rows) {
                bench_prepare_json_rows(&j, &res);
                bench_json_num(&j, "sweep_seconds", res.seconds);
            }
            bench_json_num(&j, "loadavg_end", bench_loadavg());
            bench_json_end(&j);
            if (fclose(f) != 0)
                rc = MLA_EXIT_FAIL;
        }
    }
    bench_prepare_free(&res);
    mla_context_destroy(ctx);
    return rc;
}
