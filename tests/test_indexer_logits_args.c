/* The index checks of mla_indexer_logits and mla_topk on every backend built here
 * (reference, CPU, and HIP when a GPU answers): a context length outside
 * [next_n, min(logits.shape[1], the table's capacity)] or a block id outside
 * [0, num_blocks) in a block the context uses is refused with
 * MLA_ERR_OUT_OF_RANGE naming the tensor, and the logits keep their bytes;
 * a bad id past the used blocks is not read and is accepted. On the HIP
 * backend the valid calls take the on-device check (hip/paged_check.hip)
 * and the refused ones the host check it falls back to: both must agree
 * with the host backends. Top-k: a row length outside [0, logits.shape[1]]
 * is refused naming "lengths", the indices keep their bytes (the same
 * on-device check, without a table). The planned search: the plan refuses
 * what the calls refuse (nothing is made, a refused update changes
 * nothing), and a search gives the bits of the two checked calls over the
 * data planned, whatever the caller's tensors hold later. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mla/mla.h"
#include "tests/test_util.h"

enum { B = 3, HI = 4, D = 128, BS = 16, MAXB = 4, NB = 8, N = MAXB * BS };

typedef struct {
    mla_context *ctx;
    mla_indexer_cache_desc desc;
    mla_tensor cache, q, w, table, lens, logits;
    void *mem[6];
} fixture;

static void *place(mla_context *ctx, const void *src, size_t bytes, void **slot)
{
    CHECK_STATUS(mla_malloc(ctx, bytes, slot), MLA_OK);
    CHECK_STATUS(mla_memcpy(ctx, *slot, src, bytes, MLA_COPY_HOST_TO_CONTEXT), MLA_OK);
    return *slot;
}

static void setup(fixture *f, mla_context *ctx)
{
    memset(f, 0, sizeof *f);
    f->ctx = ctx;
    const mla_memory mem = mla_context_memory(ctx);
    f->desc = (mla_indexer_cache_desc){NB, BS, D, MLA_DTYPE_FP8_E4M3FN, MLA_INDEXER_LAYOUT_AUTO, 0};
    int64_t bb = 0;
    CHECK_STATUS(mla_indexer_cache_block_bytes(&f->desc, &bb), MLA_OK);
    uint8_t *cache = calloc((size_t)(NB * bb), 1), q[B * HI * D];
    for (int64_t i = 0; i < NB * bb; ++i)
        cache[i] = (uint8_t)(i % 0x70); /* finite e4m3fn codes; scales below */
    for (int64_t blk = 0; blk < NB; ++blk)
        for (int t = 0; t < BS; ++t) {
            const float one = 1.0f;
            memcpy(cache + blk * bb + BS * D + 4 * t, &one, 4);
        }
    for (int i = 0; i < B * HI * D; ++i)
        q[i] = (uint8_t)((i * 7) % 0x60);
    float w[B * HI];
    for (int i = 0; i < B * HI; ++i)
        w[i] = 0.25f;
    const int64_t cs[2] = {NB, bb}, qs[3] = {B, HI, D}, ws[2] = {B, HI}, ts[2] = {B, MAXB},
                  ls[1] = {B}, os[2] = {B, N};
    mla_tensor_init(&f->cache, place(ctx, cache, (size_t)(NB * bb), &f->mem[0]), MLA_DTYPE_U8, mem,
                    2, cs);
    mla_tensor_init(&f->q, place(ctx, q, sizeof q, &f->mem[1]), MLA_DTYPE_FP8_E4M3FN, mem, 3, qs);
    mla_tensor_init(&f->w, place(ctx, w, sizeof w, &f->mem[2]), MLA_DTYPE_F32, mem, 2, ws);
    CHECK_STATUS(mla_malloc(ctx, sizeof(int32_t) * B * MAXB, &f->mem[3]), MLA_OK);
    mla_tensor_init(&f->table, f->mem[3], MLA_DTYPE_I32, mem, 2, ts);
    CHECK_STATUS(mla_malloc(ctx, sizeof(int32_t) * B, &f->mem[4]), MLA_OK);
    mla_tensor_init(&f->lens, f->mem[4], MLA_DTYPE_I32, mem, 1, ls);
    CHECK_STATUS(mla_malloc(ctx, sizeof(float) * B * N, &f->mem[5]), MLA_OK);
    mla_tensor_init(&f->logits, f->mem[5], MLA_DTYPE_F32, mem, 2, os);
    free(cache);
}

static void teardown(fixture *f)
{
    for (int i = 0; i < 6; ++i)
        mla_free(f->ctx, f->mem[i]);
}

static char param_[64]; /* the refused parameter's name, read before the next call clears it */

/* One call with this table and these lengths; the logits start as 0xAB
 * bytes. Returns the status; *kept = 1 when the logits still hold them. */
static mla_status call(fixture *f, const int32_t table[B * MAXB], const int32_t lens[B], int *kept)
{
    static uint8_t before[sizeof(float) * B * N], after[sizeof(float) * B * N];
    memset(before, 0xAB, sizeof before);
    CHECK_STATUS(
        mla_memcpy(f->ctx, f->mem[3], table, sizeof(int32_t) * B * MAXB, MLA_COPY_HOST_TO_CONTEXT),
        MLA_OK);
    CHECK_STATUS(mla_memcpy(f->ctx, f->mem[4], lens, sizeof(int32_t) * B, MLA_COPY_HOST_TO_CONTEXT),
                 MLA_OK);
    CHECK_STATUS(mla_memcpy(f->ctx, f->mem[5], before, sizeof before, MLA_COPY_HOST_TO_CONTEXT),
                 MLA_OK);
    const mla_status st = mla_indexer_logits(f->ctx, &f->desc, &f->cache, &f->q, &f->w, &f->table,
                                             &f->lens, 1, &f->logits);
    snprintf(param_, sizeof param_, "%s", mla_context_error_param(f->ctx));
    CHECK_STATUS(mla_context_synchronize(f->ctx), MLA_OK);
    CHECK_STATUS(mla_memcpy(f->ctx, after, f->mem[5], sizeof after, MLA_COPY_CONTEXT_TO_HOST),
                 MLA_OK);
    *kept = memcmp(before, after, sizeof before) == 0;
    return st;
}

static void refused(fixture *f, const int32_t table[B * MAXB], const int32_t lens[B],
                    const char *param)
{
    int kept = 0;
    CHECK_STATUS(call(f, table, lens, &kept), MLA_ERR_OUT_OF_RANGE);
    CHECK(kept);
    CHECK(strcmp(param_, param) == 0);
}

/* mla_topk over the fixture's logits (its last call left them written)
 * with these row lengths; *kept = 1 when the indices kept their bytes. */
static mla_status topk_call(fixture *f, const int32_t lens[B], int *kept)
{
    enum { K = 4 };
    static int32_t before[B * K], after[B * K];
    memset(before, 0xCD, sizeof before);
    void *mem = NULL;
    CHECK_STATUS(mla_malloc(f->ctx, sizeof before, &mem), MLA_OK);
    CHECK_STATUS(mla_memcpy(f->ctx, mem, before, sizeof before, MLA_COPY_HOST_TO_CONTEXT), MLA_OK);
    CHECK_STATUS(mla_memcpy(f->ctx, f->mem[4], lens, sizeof(int32_t) * B, MLA_COPY_HOST_TO_CONTEXT),
                 MLA_OK);
    const int64_t is[2] = {B, K};
    mla_tensor idx;
    mla_tensor_init(&idx, mem, MLA_DTYPE_I32, mla_context_memory(f->ctx), 2, is);
    const mla_status st = mla_topk(f->ctx, &f->logits, &f->lens, K, &idx);
    snprintf(param_, sizeof param_, "%s", mla_context_error_param(f->ctx));
    CHECK_STATUS(mla_context_synchronize(f->ctx), MLA_OK);
    CHECK_STATUS(mla_memcpy(f->ctx, after, mem, sizeof after, MLA_COPY_CONTEXT_TO_HOST), MLA_OK);
    *kept = memcmp(before, after, sizeof before) == 0;
    mla_free(f->ctx, mem);
    return st;
}

static void topk_checks(fixture *f)
{
    int kept = 1;
    int32_t l[B] = {N, 0, 5};
    CHECK_STATUS(topk_call(f, l, &kept), MLA_OK);
    CHECK(!kept);
    const int32_t bad[2] = {-1, N + 1};
    for (int i = 0; i < 2; ++i) {
        l[1] = bad[i];
        CHECK_STATUS(topk_call(f, l, &kept), MLA_ERR_OUT_OF_RANGE);
        CHECK(kept);
        CHECK(strcmp(param_, "lengths") == 0);
    }
}

/* ------------------------------------------------- the planned search */

enum { PK = 4 };

static void upload(fixture *f, const int32_t table[B * MAXB], const int32_t lens[B])
{
    CHECK_STATUS(
        mla_memcpy(f->ctx, f->mem[3], table, sizeof(int32_t) * B * MAXB, MLA_COPY_HOST_TO_CONTEXT),
        MLA_OK);
    CHECK_STATUS(mla_memcpy(f->ctx, f->mem[4], lens, sizeof(int32_t) * B, MLA_COPY_HOST_TO_CONTEXT),
                 MLA_OK);
}

typedef struct {
    float logits[B * N];
    int32_t idx[B * PK];
} search_out;

/* The two checked calls on the caller's tensors (next_n 1: the top-k
 * lengths are the context lengths). */
static void checked_calls(fixture *f, mla_tensor *idx, search_out *o)
{
    CHECK_STATUS(mla_indexer_logits(f->ctx, &f->desc, &f->cache, &f->q, &f->w, &f->table, &f->lens,
                                    1, &f->logits),
                 MLA_OK);
    CHECK_STATUS(mla_topk(f->ctx, &f->logits, &f->lens, PK, idx), MLA_OK);
    CHECK_STATUS(mla_memcpy(f->ctx, o->logits, f->mem[5], sizeof o->logits,
                            MLA_COPY_CONTEXT_TO_HOST),
                 MLA_OK);
    CHECK_STATUS(mla_memcpy(f->ctx, o->idx, idx->data, sizeof o->idx, MLA_COPY_CONTEXT_TO_HOST),
                 MLA_OK);
}

/* A search into poisoned outputs; returns its status, *o what they hold. */
static mla_status search(fixture *f, const mla_indexer_plan *plan, mla_tensor *logits,
                         mla_tensor *idx, search_out *o)
{
    memset(o, 0xEE, sizeof *o);
    CHECK_STATUS(mla_memcpy(f->ctx, f->mem[5], o->logits, sizeof o->logits,
                            MLA_COPY_HOST_TO_CONTEXT),
                 MLA_OK);
    CHECK_STATUS(mla_memcpy(f->ctx, idx->data, o->idx, sizeof o->idx, MLA_COPY_HOST_TO_CONTEXT),
                 MLA_OK);
    const mla_status st = mla_indexer_search(f->ctx, plan, &f->cache, &f->q, &f->w, logits, PK, idx);
    snprintf(param_, sizeof param_, "%s", mla_context_error_param(f->ctx));
    CHECK_STATUS(mla_context_synchronize(f->ctx), MLA_OK);
    CHECK_STATUS(mla_memcpy(f->ctx, o->logits, f->mem[5], sizeof o->logits,
                            MLA_COPY_CONTEXT_TO_HOST),
                 MLA_OK);
    CHECK_STATUS(mla_memcpy(f->ctx, o->idx, idx->data, sizeof o->idx, MLA_COPY_CONTEXT_TO_HOST),
                 MLA_OK);
    return st;
}

static void refused_plan(fixture *f, const int32_t table[B * MAXB], const int32_t lens[B],
                         int32_t next_n, mla_status want, const char *param)
{
    upload(f, table, lens);
    mla_indexer_plan *plan = (mla_indexer_plan *)&plan;
    CHECK_STATUS(mla_indexer_plan_create(f->ctx, &f->desc, &f->table, &f->lens, next_n, &plan),
                 want);
    CHECK(plan == NULL);
    CHECK(strcmp(mla_context_error_param(f->ctx), param) == 0);
}

static void plan_checks(fixture *f, const int32_t good[B * MAXB], const int32_t lens[B])
{
    int32_t t[B * MAXB], l[B];
    memcpy(t, good, sizeof t);
    memcpy(l, lens, sizeof l);
    t[1 * MAXB + 1] = NB;
    refused_plan(f, t, l, 1, MLA_ERR_OUT_OF_RANGE, "block_table");
    memcpy(t, good, sizeof t);
    l[2] = 0;
    refused_plan(f, t, l, 1, MLA_ERR_OUT_OF_RANGE, "context_lens");
    l[2] = N + 1; /* past the table's capacity */
    refused_plan(f, t, l, 1, MLA_ERR_OUT_OF_RANGE, "context_lens");
    refused_plan(f, good, lens, 0, MLA_ERR_INVALID_ARGUMENT, "next_n");

    void *mem = NULL;
    CHECK_STATUS(mla_malloc(f->ctx, sizeof(int32_t) * B * PK, &mem), MLA_OK);
    mla_tensor idx;
    mla_tensor_init(&idx, mem, MLA_DTYPE_I32, mla_context_memory(f->ctx), 2,
                    (const int64_t[]){B, PK});
    static search_out want, got;
    upload(f, good, lens);
    checked_calls(f, &idx, &want);
    mla_indexer_plan *plan = NULL;
    CHECK_STATUS(mla_indexer_plan_create(f->ctx, &f->desc, &f->table, &f->lens, 1, &plan), MLA_OK);
    CHECK(mla_indexer_plan_max_len(plan) == N);
    CHECK_STATUS(search(f, plan, &f->logits, &idx, &got), MLA_OK);
    CHECK(!memcmp(&got, &want, sizeof got));

    /* the caller's tensors change: the plan searches what it checked */
    const int32_t other[B * MAXB] = {7, 6, 5, 4, 3, 2, 1, 0, 1, 2, 3, 4};
    const int32_t other_lens[B] = {3 * BS + 2, N, 9};
    upload(f, other, other_lens);
    CHECK_STATUS(search(f, plan, &f->logits, &idx, &got), MLA_OK);
    CHECK(!memcmp(&got, &want, sizeof got));

    /* a refused update keeps the plan; an accepted one is the new data */
    memcpy(t, other, sizeof t);
    t[2 * MAXB] = -1;
    upload(f, t, other_lens);
    CHECK_STATUS(mla_indexer_plan_update(f->ctx, plan, &f->table, &f->lens), MLA_ERR_OUT_OF_RANGE);
    CHECK(strcmp(mla_context_error_param(f->ctx), "block_table") == 0);
    CHECK_STATUS(search(f, plan, &f->logits, &idx, &got), MLA_OK);
    CHECK(!memcmp(&got, &want, sizeof got));
    upload(f, other, other_lens);
    CHECK_STATUS(mla_indexer_plan_update(f->ctx, plan, &f->table, &f->lens), MLA_OK);
    checked_calls(f, &idx, &want);
    CHECK_STATUS(search(f, plan, &f->logits, &idx, &got), MLA_OK);
    CHECK(!memcmp(&got, &want, sizeof got));

    /* refusals of the search itself touch neither output */
    mla_tensor narrow = f->logits;
    narrow.shape[1] = N - 1;
    search_out before;
    memset(&before, 0xEE, sizeof before);
    CHECK_STATUS(search(f, plan, &narrow, &idx, &got), MLA_ERR_SHAPE);
    CHECK(strcmp(param_, "logits.shape[1]") == 0);
    CHECK(!memcmp(&got, &before, sizeof got));
    CHECK_STATUS(search(f, NULL, &f->logits, &idx, &got), MLA_ERR_NULL_POINTER);
    CHECK(!memcmp(&got, &before, sizeof got));
    mla_tensor on_q = idx;
    on_q.data = f->q.data;
    CHECK_STATUS(mla_indexer_search(f->ctx, plan, &f->cache, &f->q, &f->w, &f->logits, PK, &on_q),
                 MLA_ERR_ALIAS);
    mla_indexer_plan_destroy(plan);
    mla_free(f->ctx, mem);
}

static void run_backend(mla_backend backend)
{
    mla_context *ctx = NULL;
    if (mla_context_create(backend, NULL, &ctx) != MLA_OK) {
        printf("%s: not available here, skipped\n", mla_backend_name(backend));
        return;
    }
    fixture f;
    setup(&f, ctx);
    const int32_t good[B * MAXB] = {0, 1, 2, 3, 4, 5, -7, 99, 6, 7, 0, 1};
    const int32_t lens[B] = {N, 2 * BS, 1};
    int kept = 1;
    /* rows 1 and 2 use 2 and 1 blocks: the ids after them are never read */
    CHECK_STATUS(call(&f, good, lens, &kept), MLA_OK);
    CHECK(!kept);
    int32_t t[B * MAXB], l[B];
    memcpy(l, lens, sizeof l);
    memcpy(t, good, sizeof t);
    t[1 * MAXB + 1] = NB; /* a used block of row 1 past the pool */
    refused(&f, t, l, "block_table");
    t[1 * MAXB + 1] = -1;
    refused(&f, t, l, "block_table");
    memcpy(t, good, sizeof t);
    l[2] = 0; /* below next_n */
    refused(&f, t, l, "context_lens");
    l[2] = N + 1; /* past logits.shape[1] */
    refused(&f, t, l, "context_lens");
    l[2] = 2 * BS + 1; /* row 2 now uses block id 1 of its row: fine */
    CHECK_STATUS(call(&f, t, l, &kept), MLA_OK);
    l[1] = 2 * BS + 1; /* row 1 now reaches its id -7 */
    refused(&f, t, l, "block_table");
    topk_checks(&f);
    plan_checks(&f, good, lens);
    teardown(&f);
    mla_context_destroy(ctx);
}

int main(void)
{
    const mla_backend backends[] = {MLA_BACKEND_REFERENCE, MLA_BACKEND_CPU, MLA_BACKEND_HIP};
    for (size_t i = 0; i < sizeof backends / sizeof backends[0]; ++i)
        if (mla_backend_compiled(backends[i]))
            run_backend(backends[i]);
    return TEST_SUMMARY();
}
