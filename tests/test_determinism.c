/* Bitwise determinism: `test_determinism cpu` runs every generated
 * conformance case of every op (attention with the plan's own split count
 * included) and the layer forward on CPU contexts of 1 and of 2 threads and
 * again on the first, and requires the same output bytes each time (guards
 * included); `test_determinism hip` requires repeated runs on one HIP
 * context to agree (exit 77 without a GPU). */
#include <stdlib.h>
#include <string.h>

#include "tests/op_digest.h"
#include "tests/test_util.h"

enum { RUNS = 3 };

/* Every generated case of every op on ctx[0], ctx[1], ctx[0]. */
static void check_ops(mla_context *const *ctx)
{
    const int n = digest_case_count(1);
    uint64_t *d[RUNS];
    int ran[RUNS];
    for (int r = 0; r < RUNS; ++r) {
        d[r] = calloc((size_t)n, sizeof *d[r]);
        CHECK(d[r] != NULL && suite_digests(ctx[r == 1], 1, d[r], &ran[r]) == 0);
    }
    int differ = 0;
    for (int k = 0; k < n; ++k)
        if (d[1][k] != d[0][k] || d[2][k] != d[0][k]) {
            fprintf(stderr, "case %d of the suite list differs across the runs\n", k);
            ++differ;
        }
    CHECK(differ == 0 && ran[0] == ran[1] && ran[0] == ran[2] && ran[0] > 1000);
    printf("ops: %d cases agreed across the runs\n", ran[0]);
    for (int r = 0; r < RUNS; ++r)
        free(d[r]);
}

/* Attention on one decode sequence of 1000 keys (bf16 cache, f32 q / o / lse),
 * num_splits 0: the plan splits it (it must not ask the thread count how
 * much); o, lse and the split count agree across the runs. */
static void check_attention_auto(mla_context *const *ctx)
{
    enum { AL = 128, AR = 16, AD = AL + AR, ABS = 16, ANB = 64, AH = 8, CTX = 1000 };
    const mla_cache_desc cd = {MLA_CACHE_NORMAL, MLA_DTYPE_BF16, ANB, ABS, AL, AR, 1.0f};
    mla_model_config cfg;
    mla_model_config_preset("test-tiny", &cfg);
    cfg.heads = AH;
    mla_attention_desc desc;
    CHECK_STATUS(mla_attention_desc_default(&cfg, &cd, &desc), MLA_OK);
    desc.q_dtype = MLA_DTYPE_F32;
    desc.num_splits = 0;
    int64_t bb = 0;
    CHECK_STATUS(mla_cache_block_bytes(&cd, &bb), MLA_OK);
    float *kn = malloc(sizeof(float) * ANB * ABS * AL), *kp = malloc(sizeof(float) * ANB * ABS * AR);
    float *q = malloc(sizeof(float) * AH * AD), *o[RUNS], lse[RUNS][AH];
    int32_t *slots = malloc(sizeof(int32_t) * ANB * ABS), table[ANB], len = CTX, splits[RUNS];
    uint8_t *cache = malloc((size_t)(ANB * bb));
    uint32_t rng = 0x1234567u;
    for (int64_t i = 0; i < ANB * ABS * AL; ++i)
        kn[i] = (float)((rng = rng * 1664525u + 1013904223u) >> 8) * 0x1p-23f - 1.0f;
    for (int64_t i = 0; i < ANB * ABS * AR; ++i)
        kp[i] = (float)((rng = rng * 1664525u + 1013904223u) >> 8) * 0x1p-23f - 1.0f;
    for (int64_t i = 0; i < AH * AD; ++i)
        q[i] = (float)((rng = rng * 1664525u + 1013904223u) >> 8) * 0x1p-22f - 2.0f;
    for (int i = 0; i < ANB * ABS; ++i)
        slots[i] = i;
    for (int b = 0; b < ANB; ++b)
        table[b] = (b * 37 + 5) % ANB;
    mla_tensor t_cache, t_kn, t_kp, t_slots, t_q, t_table, t_len, t_o, t_lse, t_ws;
    mla_tensor_init(&t_cache, cache, MLA_DTYPE_U8, MLA_MEMORY_HOST, 2, (int64_t[]){ANB, bb});
    mla_tensor_init(&t_kn, kn, MLA_DTYPE_F32, MLA_MEMORY_HOST, 2, (int64_t[]){ANB * ABS, AL});
    mla_tensor_init(&t_kp, kp, MLA_DTYPE_F32, MLA_MEMORY_HOST, 2, (int64_t[]){ANB * ABS, AR});
    mla_tensor_init(&t_slots, slots, MLA_DTYPE_I32, MLA_MEMORY_HOST, 1, (int64_t[]){ANB * ABS});
    mla_tensor_init(&t_q, q, MLA_DTYPE_F32, MLA_MEMORY_HOST, 3, (int64_t[]){1, AH, AD});
    mla_tensor_init(&t_table, table, MLA_DTYPE_I32, MLA_MEMORY_HOST, 2, (int64_t[]){1, ANB});
    mla_tensor_init(&t_len, &len, MLA_DTYPE_I32, MLA_MEMORY_HOST, 1, (int64_t[]){1});
    CHECK_STATUS(mla_cache_write(ctx[0], &cd, &t_cache, &t_kn, &t_kp, &t_slots), MLA_OK);
    for (int r = 0; r < RUNS; ++r) {
        mla_context *c = ctx[r == 1];
        o[r] = calloc(AH * AL, sizeof(float));
        mla_tensor_init(&t_o, o[r], MLA_DTYPE_F32, MLA_MEMORY_HOST, 3, (int64_t[]){1, AH, AL});
        mla_tensor_init(&t_lse, lse[r], MLA_DTYPE_F32, MLA_MEMORY_HOST, 2, (int64_t[]){1, AH});
        mla_attention_args a = {&t_q, &t_cache, &t_table, &t_len, NULL, NULL,
                                NULL, NULL,     &t_o,     &t_lse, NULL};
        mla_attention_plan *plan = NULL;
        CHECK_STATUS(mla_attention_plan_create(c, &desc, &a, &plan), MLA_OK);
        splits[r] = plan ? mla_attention_plan_splits(plan) : -1;
        const int64_t wb = plan ? mla_attention_plan_workspace_bytes(plan) : 0;
        void *ws = NULL;
        if (wb > 0 && mla_malloc(c, (size_t)wb, &ws) == MLA_OK) {
            mla_tensor_init(&t_ws, ws, MLA_DTYPE_U8, MLA_MEMORY_HOST, 1, (int64_t[]){wb});
            a.workspace = &t_ws;
        }
        if (plan)
            CHECK_STATUS(mla_attention_run(c, plan, &a), MLA_OK);
        mla_free(c, ws);
        mla_attention_plan_destroy(plan);
    }
    CHECK(splits[0] > 1); /* the automatic choice did split */
    for (int r = 1; r < RUNS; ++r) {
        const int same = splits[r] == splits[0] &&
                         memcmp(o[r], o[0], sizeof(float) * AH * AL) == 0 &&
                         memcmp(lse[r], lse[0], sizeof lse[0]) == 0;
        if (!same)
            fprintf(stderr, "attention, automatic splits: run %d (%d splits) differs from run 0 "
                            "(%d splits)\n",
                    r, splits[r], splits[0]);
        CHECK(same);
    }
    for (int r = 0; r < RUNS; ++r)
        free(o[r]);
    free(kn), free(kp), free(q), free(slots), free(cache);
}

/* The layer forward (prefill + decode steps) on both contexts and again on
 * the first: y and the cache bit for bit. */
static void check_layer(mla_context *const *ctx)
{
    static const struct {
        const char *cfg;
        int fmt;
        lr_case c;
    } cases[] = {
        {"test-tiny", 0, {-1, 0, MLA_DTYPE_BF16, MLA_DTYPE_F32, 2, {300, 5}, 2, 0, MLA_DTYPE_BF16}},
        {"test-tiny", 1, {MLA_ROPE_SITE_ATTENTION, 0, MLA_DTYPE_FP8_E4M3FN, MLA_DTYPE_BF16, 2,
                          {7, 260}, 1, 0, MLA_DTYPE_F32}},
        {"test-tiny-indexer", 0, {-1, 0, MLA_DTYPE_BF16, MLA_DTYPE_F32, 2, {200, 4}, 2, 0,
                                  MLA_DTYPE_BF16}},
        /* one sequence; a step's tokens stay within layer_run.c's 512 */
        {"test-tiny", 0, {-1, 0, MLA_DTYPE_BF16, MLA_DTYPE_F32, 1, {480}, 2, 0, MLA_DTYPE_BF16}},
        {"test-tiny-indexer", 0, {-1, 1, MLA_DTYPE_BF16, MLA_DTYPE_F32, 1, {400}, 1, 0,
                                  MLA_DTYPE_BF16}},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; ++k) {
        uint64_t h[RUNS];
        for (int r = 0; r < RUNS; ++r)
            h[r] = layer_digest(ctx[r == 1], cases[k].cfg, cases[k].fmt, &cases[k].c);
        if (!(h[0] && h[1] == h[0] && h[2] == h[0]))
            fprintf(stderr, "layer %s case %zu: the runs differ (or failed)\n", cases[k].cfg, k);
        CHECK(h[0] && h[1] == h[0] && h[2] == h[0]);
    }
}

int main(int argc, char **argv)
{
    const int hip = argc > 1 && strcmp(argv[1], "hip") == 0;
    mla_context *ctx[2] = {NULL, NULL};
    const mla_context_options one = {1, 0, NULL}, two = {2, 0, NULL};
    if (hip) {
        if (mla_context_create(MLA_BACKEND_HIP, NULL, &ctx[0]) != MLA_OK) {
            printf("no HIP device: skipped\n");
            return 77;
        }
        ctx[1] = ctx[0]; /* repeated runs on one device */
    } else {
        CHECK_STATUS(mla_context_create(MLA_BACKEND_CPU, &one, &ctx[0]), MLA_OK);
        CHECK_STATUS(mla_context_create(MLA_BACKEND_CPU, &two, &ctx[1]), MLA_OK);
        if (!ctx[0] || !ctx[1])
            return TEST_SUMMARY();
    }
    check_ops(ctx);
    if (!hip) /* host tensors */
        check_attention_auto(ctx);
    check_layer(ctx);
    if (ctx[1] != ctx[0])
        mla_context_destroy(ctx[1]);
    mla_context_destroy(ctx[0]);
    return TEST_SUMMARY();
}
