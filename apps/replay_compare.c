/* The replay's verdict (apps/replay.h). Bounds between the dumped result and
 * the rerun, both from fp32 implementations: each is within the conformance
 * bound tol of the exact value (conformance/bounds.c: conf_gemm_tol for the
 * GEMMs from S = sum |x| |w| of the element, conf_norm_rel for RMSNorm), so
 * they are within 2 tol of each other, plus one ulp of the output dtype for
 * the two final roundings (half an ulp each). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps/cmd.h"
#include "apps/replay.h"
#include "conformance/npy.h"

/* conformance/bounds.c (linked from mla_conformance; its header conf.h is
 * the harness's internal one, which reaches into core/): the fp32 GEMM bound
 * for K terms of magnitude sum S, and RMSNorm's relative bound for rows of D. */
double conf_gemm_tol(int64_t K, double S);
double conf_norm_rel(int64_t D);

/* Ops whose results are defined to the bit (MLA.md): any difference fails. */
static const char *const exact_ops[] = {"convert",
                                        "mxfp4_quant",
                                        "mxfp4_dequant",
                                        "fp8_group_quant",
                                        "fp8_group_dequant",
                                        "rope",
                                        "cache_write",
                                        "cache_gather",
                                        "rope_cache",
                                        "flatten_mxfp4_quant",
                                        "flatten_fp8_quant",
                                        "indexer_k_cache_write",
                                        "indexer_k_gather",
                                        "topk",
                                        "indexer_head_weights",
                                        NULL};

typedef struct arr {
    mla_npy a;
    mla_dtype dt;
    double *v; /* values (NULL for raw byte codes without a value) */
} arr;

static void arr_free(arr *x)
{
    mla_npy_free(&x->a);
    free(x->v);
    memset(x, 0, sizeof *x);
}

static double value_at(const mla_npy *a, mla_dtype dt, int64_t i)
{
    const unsigned char *p = a->data;
    switch (dt) {
    case MLA_DTYPE_F32:
        return ((const float *)p)[i];
    case MLA_DTYPE_F64:
        return ((const double *)p)[i];
    case MLA_DTYPE_F16:
        return mla_f16_to_f32(((const uint16_t *)p)[i]);
    case MLA_DTYPE_BF16:
        return mla_bf16_to_f32(((const uint16_t *)p)[i]);
    case MLA_DTYPE_FP8_E4M3FN:
    case MLA_DTYPE_FP8_E4M3FNUZ:
        return mla_fp8_to_f32(p[i], dt);
    case MLA_DTYPE_E8M0:
        return mla_e8m0_to_f32(p[i]);
    case MLA_DTYPE_I32:
        return ((const int32_t *)p)[i];
    case MLA_DTYPE_I64:
        return (double)((const int64_t *)p)[i];
    default:
        return NAN;
    }
}

static mla_dtype dtype_of_file(mla_npy_type t)
{
    static const mla_dtype d[MLA_NPY_TYPE_COUNT] = {MLA_DTYPE_F32,  MLA_DTYPE_F64, MLA_DTYPE_F16,
                                                    MLA_DTYPE_BF16, MLA_DTYPE_U8,  MLA_DTYPE_U8,
                                                    MLA_DTYPE_I32,  MLA_DTYPE_I64};
    return d[t];
}

/* The value of `--opt NAME=...` in the replay's words, NULL when absent. */
static const char *word(char **args, int n, const char *opt, const char *name)
{
    const size_t k = strlen(name);
    for (int i = 0; i + 1 < n; ++i)
        if (!strcmp(args[i], opt) && !strncmp(args[i + 1], name, k) && args[i + 1][k] == '=')
            return args[i + 1] + k + 1;
    return NULL;
}

static int load(const char *path, const char *dtype, arr *x)
{
    memset(x, 0, sizeof *x);
    char err[300];
    if (mla_npy_load(path, &x->a, err, sizeof err) != MLA_OK) {
        fprintf(stderr, "mla op --replay: %s: %s\n", path, err);
        return -1;
    }
    x->dt = dtype_of_file(x->a.type);
    for (int d = 0; dtype && d < MLA_DTYPE_COUNT; ++d)
        if (!strcmp(dtype, mla_dtype_name((mla_dtype)d)))
            x->dt = (mla_dtype)d;
    x->v = malloc((size_t)x->a.numel * sizeof *x->v + 1);
    for (int64_t i = 0; x->v && i < x->a.numel; ++i)
        x->v[i] = value_at(&x->a, x->dt, i);
    return x->v ? 0 : -1;
}

/* An input of the replay by name (0 when absent: x->v NULL). */
static int input(char **args, int n, const char *name, arr *x)
{
    const char *p = word(args, n, "--in", name);
    memset(x, 0, sizeof *x);
    return p ? load(p, word(args, n, "--dtype", name), x) : 0;
}

static double param(char **args, int n, const char *key, double def)
{
    const char *v = word(args, n, "--param", key);
    return v ? strtod(v, NULL) : def;
}

/* One unit in the last place of v in dtype (its spacing at |v|). */
static double ulp(mla_dtype dt, double v)
{
    const int mant = dt == MLA_DTYPE_BF16 ? 7 : dt == MLA_DTYPE_F16 ? 10 : 23;
    const int emin = dt == MLA_DTYPE_F16 ? -14 : -126;
    int e;
    frexp(fabs(v), &e);
    --e;
    return ldexp(1.0, (e < emin ? emin : e) - mant);
}

/* Dequantized 2-D-per-batch MXFP4 operand [B, R, K] from codes [B, R, K/2]
 * and row-major e8m0 scales [B, R, K/32]. */
static double *mxfp4_values(const arr *c, const arr *s, int64_t *K)
{
    const int64_t rows = c->a.numel / c->a.shape[c->a.ndim - 1];
    *K = 2 * c->a.shape[c->a.ndim - 1];
    double *v = malloc((size_t)(rows * *K) * sizeof *v + 1);
    const uint8_t *cb = c->a.data;
    for (int64_t r = 0; v && r < rows; ++r)
        for (int64_t k = 0; k < *K; ++k) {
            const uint8_t b = cb[r * (*K / 2) + k / 2];
            v[r * *K + k] =
                mla_fp4_to_f32((uint8_t)(k & 1 ? b >> 4 : b & 0xF)) * s->v[r * (*K / 32) + k / 32];
        }
    return v;
}

/* tol per element of y for the GEMM ops; NULL when this op has no bound here. */
static double *gemm_tol(const char *op, char **args, int n, int64_t count)
{
    arr x = {0}, w = {0}, s = {0}, xc = {0}, xs = {0};
    double *tol = NULL, *wv = NULL, *xv = NULL;
    int64_t B = 1, M = 0, K = 0, N = 0, wt = 0; /* wt: w is [K, N] (batched) */
    double scale = 1.0;
    if (!strcmp(op, "linear") && !input(args, n, "x", &x) && !input(args, n, "w", &w) &&
        !input(args, n, "w_scale", &s) && x.v && w.v) {
        M = x.a.shape[0], K = x.a.shape[1], N = w.a.shape[0];
        for (int64_t i = 0; s.v && i < N * K; ++i) /* code * block scale */
            w.v[i] *= s.v[(i / K / 128) * ((K + 127) / 128) + (i % K) / 128];
        xv = x.v, wv = w.v;
    } else if (!strcmp(op, "batched_gemm") && !input(args, n, "x", &x) &&
               !input(args, n, "w", &w) && x.v && w.v) {
        B = x.a.shape[0], M = x.a.shape[1], K = x.a.shape[2], N = w.a.shape[2], wt = 1;
        scale = fabs(param(args, n, "w_scale", 1.0));
        xv = x.v, wv = w.v;
    } else if ((!strcmp(op, "gemm_a16wfp4") || !strcmp(op, "gemm_a4w4")) &&
               !input(args, n, "w_codes", &w) && !input(args, n, "w_scales", &s) && w.v && s.v &&
               w.a.ndim == 3 && s.a.ndim == 3 && !word(args, n, "--stride", "w_scales")) {
        B = w.a.shape[0], N = w.a.shape[1];
        wv = mxfp4_values(&w, &s, &K);
        if (!strcmp(op, "gemm_a4w4")) {
            if (!input(args, n, "x_codes", &xc) && !input(args, n, "x_scales", &xs) && xc.v &&
                xs.v && xs.a.ndim == 3 && !word(args, n, "--stride", "x_scales")) {
                M = xc.a.shape[1];
                xv = mxfp4_values(&xc, &xs, &K);
            }
        } else if (!input(args, n, "x", &x) && x.v) {
            M = x.a.shape[1];
            xv = malloc((size_t)(B * M * K) * sizeof *xv + 1);
            const int quant = param(args, n, "prequant", 1) != 0;
            const char *rule = word(args, n, "--param", "rule");
            for (int64_t i = 0; xv && i < B * M * K; i += 32) { /* A = x's MXFP4 round trip */
                float blk[32];
                uint8_t codes[16], e;
                for (int k = 0; k < 32; ++k)
                    blk[k] = (float)x.v[i + k];
                mla_mxfp4_quantize_block(
                    blk, rule && !strcmp(rule, "ocp") ? MLA_MXFP4_OCP : MLA_MXFP4_PRODUCTION, codes,
                    &e);
                for (int k = 0; k < 32; ++k)
                    xv[i + k] = quant ? mla_fp4_to_f32((uint8_t)(k & 1 ? codes[k / 2] >> 4
                                                                       : codes[k / 2] & 0xF)) *
                                            mla_e8m0_to_f32(e)
                                      : x.v[i + k];
            }
        }
    }
    if (xv && wv && B * M * N == count && (tol = malloc((size_t)count * sizeof *tol + 1)))
        for (int64_t b = 0; b < B; ++b)
            for (int64_t m = 0; m < M; ++m)
                for (int64_t j = 0; j < N; ++j) {
                    double S = 0;
                    for (int64_t k = 0; k < K; ++k)
                        S += fabs(xv[(b * M + m) * K + k]) *
                             fabs(wt ? wv[(b * K + k) * N + j] : wv[(b * N + j) * K + k]);
                    tol[(b * M + m) * N + j] = 2.0 * conf_gemm_tol(K, scale * S);
                }
    if (xv != x.v)
        free(xv);
    if (wv != w.v)
        free(wv);
    arr_free(&x), arr_free(&w), arr_free(&s), arr_free(&xc), arr_free(&xs);
    return tol;
}

/* tol of an RMSNorm output (rmsnorm y; qk_rmsnorm's float q_out and kv_out). */
static double *norm_tol(const char *op, const char *out, char **args, int n, int64_t count)
{
    const int q = !strcmp(out, "q_out");
    const char *xn = !strcmp(op, "rmsnorm") ? "x" : q ? "q" : !strcmp(out, "kv_out") ? "kv" : NULL;
    const char *wn = !strcmp(op, "rmsnorm") ? "w" : q ? "q_w" : "kv_w";
    if (!xn || (strcmp(op, "rmsnorm") && strcmp(op, "qk_rmsnorm")))
        return NULL;
    const double eps = param(args, n,
                             !strcmp(op, "rmsnorm") ? "eps"
                             : q                    ? "q_eps"
                                                    : "kv_eps",
                             1e-6);
    arr x, w;
    double *tol = NULL;
    if (!input(args, n, xn, &x) && !input(args, n, wn, &w) && x.v && w.v && x.a.numel == count &&
        (tol = malloc((size_t)count * sizeof *tol + 1))) {
        const int64_t D = x.a.shape[x.a.ndim - 1];
        for (int64_t t = 0; t < count / D; ++t) {
            double ss = 0;
            for (int64_t d = 0; d < D; ++d)
                ss += x.v[t * D + d] * x.v[t * D + d];
            const double r = 1.0 / sqrt(ss / (double)D + eps);
            for (int64_t d = 0; d < D; ++d)
                tol[t * D + d] = 2.0 * conf_norm_rel(D) * fabs(x.v[t * D + d] * r * w.v[d]);
        }
    }
    arr_free(&x), arr_free(&w);
    return tol;
}

static int in_list(const char *const *l, const char *s)
{
    for (; *l; ++l)
        if (!strcmp(*l, s))
            return 1;
    return 0;
}

static int compare_one(const char *dir, const char *op, const char *name, const char *got_path,
                       int same_backend, char **args, int n)
{
    char want_path[4200];
    snprintf(want_path, sizeof want_path, "%s/out.%s.npy", dir, name);
    arr got, want;
    if (load(got_path, NULL, &got) || load(want_path, NULL, &want)) {
        arr_free(&got);
        return MLA_EXIT_FAIL;
    }
    int same_shape = got.a.type == want.a.type && got.a.ndim == want.a.ndim;
    for (int32_t d = 0; same_shape && d < got.a.ndim; ++d)
        same_shape = got.a.shape[d] == want.a.shape[d];
    int rc = MLA_EXIT_OK;
    if (!same_shape) {
        printf("  %-12s DIFFERENT shape or dtype from the dump\n", name);
        rc = MLA_EXIT_FAIL;
    } else if (!memcmp(got.a.data, want.a.data, got.a.nbytes)) {
        printf("  %-12s bit-identical (%lld values)\n", name, (long long)got.a.numel);
    } else {
        int64_t first = 0, ndiff = 0;
        double max_abs = 0, worst = 0;
        const size_t es = mla_npy_type_size(got.a.type);
        for (int64_t i = got.a.numel - 1; i >= 0; --i)
            if (memcmp((char *)got.a.data + i * es, (char *)want.a.data + i * es, es))
                first = i, ++ndiff;
        const int exact = same_backend || in_list(exact_ops, op);
        double *tol = exact ? NULL : gemm_tol(op, args, n, got.a.numel);
        if (!exact && !tol)
            tol = norm_tol(op, name, args, n, got.a.numel);
        for (int64_t i = 0; i < got.a.numel; ++i) {
            const double e = fabs(got.v[i] - want.v[i]);
            max_abs = e > max_abs || isnan(e) ? e : max_abs;
            if (tol) {
                const double b = tol[i] + ulp(got.dt, fmax(fabs(got.v[i]), fabs(want.v[i])));
                worst = !(e <= b) ? INFINITY : fmax(worst, e / b);
            }
        }
        printf("  %-12s %lld of %lld values differ (first at %lld: %.9g, dumped %.9g); max |diff| "
               "%.3g",
               name, (long long)ndiff, (long long)got.a.numel, (long long)first, got.v[first],
               want.v[first], max_abs);
        if (exact) {
            printf(": DIFFERENT (%s)\n", same_backend ? "the same backend must give the same bits"
                                                      : "the op is bit-defined");
            rc = MLA_EXIT_FAIL;
        } else if (tol) {
            printf("; worst at %.3g of the bound (2x the conformance bound + 1 ulp): %s\n", worst,
                   worst <= 1.0 ? "within" : "OUTSIDE");
            rc = worst <= 1.0 ? MLA_EXIT_OK : MLA_EXIT_FAIL;
        } else {
            printf("; not judged: no per-element bound for %s across backends (docs/REPLAY.md)\n",
                   op);
        }
        free(tol);
    }
    arr_free(&got), arr_free(&want);
    return rc;
}

int replay_compare(const char *dir, const char *tmp, const char *op, int same_backend, char **args,
                   int n)
{
    (void)tmp;
    int rc = MLA_EXIT_OK;
    for (int i = 0; i + 1 < n; ++i) {
        if (strcmp(args[i], "--out") != 0)
            continue;
        char name[64];
        const char *eq = strchr(args[i + 1], '=');
        snprintf(name, sizeof name, "%.*s", (int)(eq ? eq - args[i + 1] : 0), args[i + 1]);
        const int r = compare_one(dir, op, name, eq ? eq + 1 : "", same_backend, args, n);
        rc = r != MLA_EXIT_OK ? r : rc;
    }
    printf("replay: %s\n",
           rc == MLA_EXIT_OK ? "consistent with the dump" : "DIFFERS from the dump");
    return rc;
}
