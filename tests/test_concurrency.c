/* Independent contexts on several threads at once: each thread creates its
 * own context (CPU with 1 or 2 OpenMP threads, or the reference backend) and
 * runs every STRIDE-th generated conformance case of every op (attention
 * included) and a layer forward (prefill + decode); each thread's output
 * digests must equal those of the same work run alone beforehand. Built
 * under ThreadSanitizer by the tsan preset (tests/tsan.supp). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "tests/op_digest.h"
#include "tests/test_util.h"

enum { STRIDE = 16, WORKERS = 4 };

typedef struct work {
    mla_backend backend;
    int32_t threads;
    uint64_t *digests, layer;
    int ran, failed;
} work;

static const lr_case layer_case = {-1, 0, MLA_DTYPE_BF16, MLA_DTYPE_F32, 2, {70, 3}, 1, 0,
                                   MLA_DTYPE_BF16};

static void *run_work(void *arg)
{
    work *w = arg;
    const mla_context_options opt = {w->threads, 0, NULL};
    mla_context *ctx = NULL;
    if (mla_context_create(w->backend, &opt, &ctx) != MLA_OK) {
        w->failed = 1;
        return NULL;
    }
    w->failed = suite_digests(ctx, STRIDE, w->digests, &w->ran) != 0;
    w->layer = layer_digest(ctx, "test-tiny", 0, &layer_case);
    mla_context_destroy(ctx);
    return NULL;
}

int main(void)
{
    const int n = digest_case_count(STRIDE);
    work alone[WORKERS], together[WORKERS];
    for (int k = 0; k < WORKERS; ++k) {
        const work w = {k == 2 ? MLA_BACKEND_REFERENCE : MLA_BACKEND_CPU, k == 1 ? 2 : 1, NULL, 0,
                        0, 0};
        alone[k] = together[k] = w;
        alone[k].digests = calloc((size_t)n, sizeof(uint64_t));
        together[k].digests = calloc((size_t)n, sizeof(uint64_t));
        CHECK(alone[k].digests && together[k].digests);
        if (!alone[k].digests || !together[k].digests)
            return TEST_SUMMARY();
    }
    for (int k = 0; k < WORKERS; ++k)
        run_work(&alone[k]);
    pthread_t th[WORKERS];
    for (int k = 0; k < WORKERS; ++k)
        CHECK(pthread_create(&th[k], NULL, run_work, &together[k]) == 0);
    for (int k = 0; k < WORKERS; ++k)
        pthread_join(th[k], NULL);
    for (int k = 0; k < WORKERS; ++k) {
        const work *a = &alone[k], *t = &together[k];
        CHECK(!a->failed && !t->failed && a->ran > 50 && t->ran == a->ran);
        CHECK(a->layer != 0 && t->layer == a->layer);
        CHECK(memcmp(a->digests, t->digests, sizeof(uint64_t) * (size_t)n) == 0);
        printf("worker %d (%s, %d thread%s): %d cases and the layer agree with the lone run\n", k,
               a->backend == MLA_BACKEND_CPU ? "cpu" : "reference", (int)a->threads,
               a->threads == 1 ? "" : "s", a->ran);
        free(alone[k].digests);
        free(together[k].digests);
    }
    return TEST_SUMMARY();
}
