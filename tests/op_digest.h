/* Output digests for the determinism and concurrency tests: a generated
 * conformance case run on a context, or a layer forward run, reduced to a
 * 64-bit hash of every output byte (guard bytes included). */
#ifndef MLA_TESTS_OP_DIGEST_H
#define MLA_TESTS_OP_DIGEST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conformance/conf.h"
#include "tests/layer_run.h"

/* Every suite of conformance/harness.c. */
static const conf_suite *const digest_suites[] = {
    &conf_suite_convert,         &conf_suite_mxfp4_quant,      &conf_suite_mxfp4_dequant,
    &conf_suite_fp8_group_quant, &conf_suite_fp8_group_dequant, &conf_suite_rmsnorm,
    &conf_suite_qk_rmsnorm,      &conf_suite_rope,             &conf_suite_linear,
    &conf_suite_batched_gemm,    &conf_suite_cache_write,      &conf_suite_cache_gather,
    &conf_suite_rope_cache,      &conf_suite_gemm_a16wfp4,     &conf_suite_gemm_a4w4,
    &conf_suite_flatten_mxfp4_quant, &conf_suite_flatten_fp8_quant, &conf_suite_layernorm,
    &conf_suite_hadamard,        &conf_suite_indexer_k_cache_write, &conf_suite_indexer_k_gather,
    &conf_suite_indexer_k_roundtrip, &conf_suite_indexer_rope_k_cache, &conf_suite_indexer_logits,
    &conf_suite_indexer_search,  &conf_suite_topk,             &conf_suite_indexer_head_weights,
    &conf_suite_attention,
};
enum { DIGEST_SUITES = sizeof digest_suites / sizeof digest_suites[0] };

static inline uint64_t digest_bytes(uint64_t h, const void *p, size_t n)
{
    for (size_t k = 0; k < n; ++k) {
        h ^= ((const unsigned char *)p)[k];
        h *= 0x100000001b3ull; /* FNV-1a */
    }
    return h;
}

/* The case's outputs on ctx into *digest: 1 when it ran, 0 when the case
 * does not apply (golden, refused by supports(), no kernel), -1 on a failure (printed). */
static inline int case_digest(mla_context *ctx, const conf_suite *s, const conf_case *c,
                              uint64_t *digest)
{
    if (c->golden >= 0)
        return 0;
    conf_problem p;
    memset(&p, 0, sizeof p);
    char err[300] = "";
    const conf_env env = {NULL, 0};
    unsigned char *outs[CONF_MAX_ARGS] = {0};
    int rc = -1;
    if (s->setup(c, &env, &p, err, sizeof err) == MLA_OK) {
        mla_conformance_failure kind;
        const mla_status st = conf_execute(ctx, s, c, &p, 0x5Au, outs, &kind, err, sizeof err);
        if (kind == CONF_NO_KERNEL || st == MLA_ERR_UNSUPPORTED) { /* refused by supports() */
            rc = 0;
        } else if (st == MLA_OK && kind == MLA_CONF_FAIL_COUNT) {
            *digest = 0xcbf29ce484222325ull;
            for (int i = 0; i < p.nargs; ++i)
                if (p.arg[i].output)
                    *digest = digest_bytes(*digest, outs[i], p.arg[i].bytes);
            rc = 1;
        } else if (st != MLA_OK) {
            snprintf(err, sizeof err, "%s", mla_status_name(st));
        }
    }
    if (rc < 0)
        fprintf(stderr, "%s %s: %s\n", s->name, c->label, err);
    for (int i = 0; i < p.nargs; ++i)
        free(outs[i]);
    conf_problem_free(&p);
    return rc;
}

/* Every `stride`-th case of every suite on ctx: digests[] in order (room for
 * digest_case_count(stride)), *ran the cases that ran; 0 when none failed. */
static inline int suite_digests(mla_context *ctx, int stride, uint64_t *digests, int *ran)
{
    int bad = 0, k = 0;
    *ran = 0;
    for (int si = 0; si < DIGEST_SUITES; ++si) {
        const conf_suite *s = digest_suites[si];
        const int n = s->build(NULL, 0);
        conf_case *cases = calloc((size_t)n + 1, sizeof *cases);
        if (!cases)
            return 1;
        s->build(cases, n);
        for (int i = 0; i < n; i += stride, ++k) {
            digests[k] = 0;
            const int rc = case_digest(ctx, s, &cases[i], &digests[k]);
            bad += rc < 0;
            *ran += rc > 0;
        }
        free(cases);
    }
    return bad;
}

static inline int digest_case_count(int stride)
{
    int k = 0;
    for (int si = 0; si < DIGEST_SUITES; ++si)
        k += (digest_suites[si]->build(NULL, 0) + stride - 1) / stride;
    return k;
}

/* A layer forward (prefill and decode steps) on ctx: y of every step and
 * the cache afterwards; 0 on a failure. */
static inline uint64_t layer_digest(mla_context *ctx, const char *cfg_name, int fmt,
                                    const lr_case *c)
{
    layer_model m;
    if (layer_model_make(ctx, cfg_name, fmt, 7, &m) != 0)
        return 0;
    lr_result r;
    memset(&r, 0, sizeof r);
    uint64_t h = 0;
    if (lr_run(ctx, &m, c, 0, &r) == MLA_OK && r.steps > 0) {
        h = digest_bytes(0xcbf29ce484222325ull, r.cache, r.cache_bytes);
        for (int st = 0; st < r.steps; ++st)
            h = digest_bytes(h, r.y[st], sizeof(double) * (size_t)(r.T[st] * m.cfg.hidden));
    }
    lr_free(&r);
    layer_model_free(&m);
    return h;
}

#endif
