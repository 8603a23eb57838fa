/* mla_indexer.h promises that mla_indexer_search, once a first search of its
 * shape has run, allocates nothing and never waits for the device, so that
 * it can be captured in a HIP/CUDA graph, and that mla_indexer_plan_update
 * rewrites the plan's buffers in place, so that a graph captured before an
 * update stays valid after it: a serving engine captures the decode step
 * once and replays it with new lengths.
 *
 * The capture (tests/test_graph.h) fails on a search that allocates or
 * synchronizes. The problem is the model's (64 heads, head_dim 128, e4m3fn,
 * blocks of 64 in the SHUFFLE layout behind a shuffled block table, k =
 * 2048, next_n 2) so that NVIDIA takes its warpgroup logits body, and rows
 * of up to 20000 keys, so that several top-k blocks cooperate on a row.
 * Outputs are poisoned before every replay and every eager search. A replay
 * must match an eager search bit for bit, with new q in the same buffer and
 * after the update; and every row must hold -inf from its causal bound on
 * and, as indices, exactly min(k, bound) ascending positions below the
 * bound whose logits are the row's largest: a graph reading stale lengths
 * or a stale table breaks these. Skips (77) without a GPU. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "mla/mla.h"
#include "tests/test_graph.h"
#include "tests/test_tensors.h"

enum {
    B = 2,
    NEXT_N = 2,
    R = B * NEXT_N,
    HI = 64,
    D = 128,
    BS = 64,
    MAXB = 320,
    NB = B * MAXB,
    N = MAXB * BS,
    K = 2048,
    BB = BS * D + BS * 4 /* block bytes: the fp8 values, then the fp32 scales */
};

static const int32_t lens_first[B] = {20000, 3000};
static const int32_t lens_updated[B] = {700, 19001};

static uint32_t rng = 0x9E3779B9u;
static uint32_t next(void)
{
    rng ^= rng << 13, rng ^= rng >> 17, rng ^= rng << 5;
    return rng;
}

/* Finite e4m3fn codes (0x7F and 0xFF are its NaNs). */
static void fill_fp8(uint8_t *x, size_t n)
{
    for (size_t i = 0; i < n; ++i) {
        const uint8_t c = (uint8_t)next();
        x[i] = (c & 0x7F) == 0x7F ? (uint8_t)(c ^ 1) : c;
    }
}

typedef struct {
    mla_context *ctx;
    mla_tensor cache, q, w, table, lens, logits, indices;
    void *d_q, *d_lens;
} io;

static void poison(const io *s)
{
    CHECK_STATUS(mla_memset(s->ctx, s->logits.data, 0x7B, sizeof(float) * R * N), MLA_OK);
    CHECK_STATUS(mla_memset(s->ctx, s->indices.data, 0x7B, sizeof(int32_t) * R * K), MLA_OK);
}

static void fetch(const io *s, float *logits, int32_t *indices)
{
    CHECK_STATUS(
        mla_memcpy(s->ctx, logits, s->logits.data, sizeof(float) * R * N, MLA_COPY_CONTEXT_TO_HOST),
        MLA_OK);
    CHECK_STATUS(mla_memcpy(s->ctx, indices, s->indices.data, sizeof(int32_t) * R * K,
                            MLA_COPY_CONTEXT_TO_HOST),
                 MLA_OK);
}

static mla_status search(io *s, const mla_indexer_plan *plan)
{
    return mla_indexer_search(s->ctx, plan, &s->cache, &s->q, &s->w, &s->logits, K, &s->indices);
}

static void eager(io *s, const mla_indexer_plan *plan, float *logits, int32_t *indices)
{
    poison(s);
    CHECK_STATUS(search(s, plan), MLA_OK);
    CHECK_STATUS(mla_context_synchronize(s->ctx), MLA_OK);
    fetch(s, logits, indices);
}

static void replay(const io *s, GPU(Stream_t) stream, GPU(GraphExec_t) exec, float *logits,
                   int32_t *indices)
{
    poison(s);
    CHECK(GPU(GraphLaunch)(exec, stream) == GPU(Success));
    CHECK(GPU(StreamSynchronize)(stream) == GPU(Success));
    fetch(s, logits, indices);
}

/* Row r = b * NEXT_N + j of the search for these lengths: -inf from the
 * causal bound on, finite before it (the codes are finite), and the indices
 * the ascending positions of the min(K, bound) largest, then -1. */
static void check_rows(const char *what, const int32_t lens[B], const float *logits,
                       const int32_t *indices)
{
    static uint8_t chosen[N];
    int bad = 0;
    for (int r = 0; r < R; ++r) {
        const int32_t bound = lens[r / NEXT_N] - NEXT_N + r % NEXT_N + 1, m = bound < K ? bound : K;
        const float *row = logits + (size_t)r * N;
        const int32_t *ix = indices + (size_t)r * K;
        for (int32_t n = 0; n < N; ++n)
            bad += n < bound ? !isfinite(row[n]) : !(isinf(row[n]) && row[n] < 0);
        memset(chosen, 0, sizeof chosen);
        float least_in = INFINITY, most_out = -INFINITY;
        for (int32_t c = 0; c < K; ++c) {
            const int32_t n = ix[c];
            if (c >= m) {
                bad += n != -1;
                continue;
            }
            if (n < 0 || n >= bound || (c > 0 && n <= ix[c - 1])) {
                ++bad;
                continue;
            }
            chosen[n] = 1;
            least_in = row[n] < least_in ? row[n] : least_in;
        }
        for (int32_t n = 0; n < bound; ++n)
            most_out = !chosen[n] && row[n] > most_out ? row[n] : most_out;
        bad += most_out > least_in;
    }
    CHECK(bad == 0);
    if (bad)
        fprintf(stderr, "%s: %d wrong logits or indices\n", what, bad);
}

static void capture(io *s, GPU(Stream_t) stream, const mla_indexer_plan *plan, GPU(Graph_t) * graph,
                    GPU(GraphExec_t) * exec)
{
    *graph = NULL;
    *exec = NULL;
    if (!test_capture_begin(stream))
        return;
    CHECK_STATUS(search(s, plan), MLA_OK);
    test_capture_end(stream, 2, graph, exec); /* the logits and the top-k */
}

int main(void)
{
    GPU(Stream_t) stream = NULL;
    io s = {0};
    const int made = test_graph_context("test_indexer_graph", &stream, &s.ctx);
    if (made)
        return made == 77 ? 77 : TEST_SUMMARY();
    const mla_memory mem = mla_context_memory(s.ctx);
    const mla_indexer_cache_desc desc = {NB, BS, D, MLA_DTYPE_FP8_E4M3FN, MLA_INDEXER_LAYOUT_AUTO,
                                         0};
    int64_t bb = 0;
    CHECK_STATUS(mla_indexer_cache_block_bytes(&desc, &bb), MLA_OK);
    CHECK(bb == BB);

    static uint8_t cache[(size_t)NB * BB], q1[R * HI * D], q2[R * HI * D];
    static float w[R * HI], lg_eager[R * N], lg_graph[R * N], lg_check[R * N];
    static int32_t table[B * MAXB], ix_eager[R * K], ix_graph[R * K], ix_check[R * K];
    fill_fp8(cache, sizeof cache);
    for (int blk = 0; blk < NB; ++blk)
        for (int t = 0; t < BS; ++t) { /* scales in [2^-8, 2^-7) */
            const float sc = (1.0f + (float)(next() >> 8) / 16777216.0f) / 256.0f;
            memcpy(cache + (size_t)blk * BB + BS * D + 4 * t, &sc, 4);
        }
    fill_fp8(q1, sizeof q1);
    fill_fp8(q2, sizeof q2);
    for (int i = 0; i < R * HI; ++i)
        w[i] = (float)(next() >> 8) / 8388608.0f - 1.0f;
    test_shuffled_table(table, NB, next);

    void *d_cache = test_upload(s.ctx, cache, sizeof cache);
    void *d_table = test_upload(s.ctx, table, sizeof table);
    void *d_w = test_upload(s.ctx, w, sizeof w);
    s.d_q = test_upload(s.ctx, q1, sizeof q1);
    s.d_lens = test_upload(s.ctx, lens_first, sizeof lens_first);
    void *d_logits = NULL, *d_indices = NULL;
    CHECK_STATUS(mla_malloc(s.ctx, sizeof lg_eager, &d_logits), MLA_OK);
    CHECK_STATUS(mla_malloc(s.ctx, sizeof ix_eager, &d_indices), MLA_OK);
    s.cache = test_tensor(d_cache, MLA_DTYPE_U8, mem, 2, (int64_t[]){NB, BB});
    s.table = test_tensor(d_table, MLA_DTYPE_I32, mem, 2, (int64_t[]){B, MAXB});
    s.lens = test_tensor(s.d_lens, MLA_DTYPE_I32, mem, 1, (int64_t[]){B});
    s.q = test_tensor(s.d_q, MLA_DTYPE_FP8_E4M3FN, mem, 3, (int64_t[]){R, HI, D});
    s.w = test_tensor(d_w, MLA_DTYPE_F32, mem, 2, (int64_t[]){R, HI});
    s.logits = test_tensor(d_logits, MLA_DTYPE_F32, mem, 2, (int64_t[]){R, N});
    s.indices = test_tensor(d_indices, MLA_DTYPE_I32, mem, 2, (int64_t[]){R, K});

    mla_indexer_plan *plan = NULL;
    GPU(Graph_t) graph = NULL;
    GPU(GraphExec_t) exec = NULL;
    CHECK_STATUS(mla_indexer_plan_create(s.ctx, &desc, &s.table, &s.lens, NEXT_N, &plan), MLA_OK);
    if (!plan || !d_logits || !d_indices)
        goto done;

    eager(&s, plan, lg_eager, ix_eager); /* the first search sizes the top-k's scratch */
    check_rows("eager", lens_first, lg_eager, ix_eager);
    capture(&s, stream, plan, &graph, &exec);
    if (!exec)
        goto done;

    /* the replay reads q through the captured pointer: new values, same buffer */
    CHECK_STATUS(mla_memcpy(s.ctx, s.d_q, q2, sizeof q2, MLA_COPY_HOST_TO_CONTEXT), MLA_OK);
    replay(&s, stream, exec, lg_graph, ix_graph);
    eager(&s, plan, lg_check, ix_check);
    CHECK(memcmp(lg_graph, lg_check, sizeof lg_graph) == 0);
    CHECK(memcmp(ix_graph, ix_check, sizeof ix_graph) == 0);
    CHECK(memcmp(lg_graph, lg_eager, sizeof lg_graph) != 0);
    check_rows("replay", lens_first, lg_graph, ix_graph);

    /* new lengths in the caller's buffer, the plan updated, the same executable */
    CHECK_STATUS(
        mla_memcpy(s.ctx, s.d_lens, lens_updated, sizeof lens_updated, MLA_COPY_HOST_TO_CONTEXT),
        MLA_OK);
    CHECK_STATUS(mla_indexer_plan_update(s.ctx, plan, &s.table, &s.lens), MLA_OK);
    replay(&s, stream, exec, lg_graph, ix_graph);
    eager(&s, plan, lg_check, ix_check);
    CHECK(memcmp(lg_graph, lg_check, sizeof lg_graph) == 0);
    CHECK(memcmp(ix_graph, ix_check, sizeof ix_graph) == 0);
    check_rows("replay after the update", lens_updated, lg_graph, ix_graph);

done:
    test_graph_destroy(graph, exec);
    mla_indexer_plan_destroy(plan);
    void *bufs[] = {d_indices, d_logits, s.d_lens, s.d_q, d_w, d_table, d_cache};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; ++i)
        mla_free(s.ctx, bufs[i]);
    mla_context_destroy(s.ctx);
    CHECK(GPU(StreamDestroy)(stream) == GPU(Success));
    return TEST_SUMMARY();
}
