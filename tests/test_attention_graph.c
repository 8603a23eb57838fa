/* mla_attention.h promises that mla_attention_run allocates nothing and never
 * waits for the device, so it can be captured in a HIP/CUDA graph, and that
 * mla_attention_plan_update rewrites the plan's buffers in place so that a
 * graph captured before the update stays valid after it. Serving engines
 * rely on both: they capture decode once and replay it for every step with
 * new lengths.
 *
 * The capture (tests/test_graph.h) fails on a run that allocates or
 * synchronizes. The problem is DeepSeek-sized (L 512, R 64, 16 heads, bf16
 * cache in 64-token blocks behind a shuffled block table) so that NVIDIA
 * takes its matrix body, and the plan splits sequences, so the combine
 * kernel is in the graph as well. Outputs are poisoned before every replay
 * and every eager run: a graph that recorded nothing (work sent to another
 * stream) or one that kept stale q would leave the poison or the old bits. Replays must match an eager run bit for bit;
 * the reference backend guards against both reading a stale schedule after
 * the update (the eager run uses the same plan, so only the reference sees
 * keys the old work list never covered). Skips (77) without a GPU. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "mla/mla.h"
#include "tests/test_graph.h"
#include "tests/test_tensors.h"

enum { L = 512, R = 64, D = L + R, BS = 64, H = 16, S = 4, T = S, MAXB = 24, NB = S * MAXB };

static const int32_t lens_first[S] = {300, 1000, 64, 777};
static const int32_t lens_updated[S] = {1500, 10, 640, 1}; /* within MAXB * BS = 1536 */

static uint32_t rng = 0x2545F491u;
static uint32_t next(void)
{
    rng ^= rng << 13, rng ^= rng >> 17, rng ^= rng << 5;
    return rng;
}
static float rnd(void) { return (float)(next() >> 8) / 8388608.0f - 1.0f; }

static void fill_bf16(uint16_t *x, size_t n)
{
    for (size_t i = 0; i < n; ++i)
        x[i] = mla_f32_to_bf16(rnd());
}

/* The run's tensors over these buffers (host or device), and args over them. */
typedef struct {
    mla_tensor cache, table, lens, q, o, lse;
    mla_attention_args args;
} att_io;

static void att_io_init(att_io *io, mla_memory mem, int64_t bb, void *cache, void *table,
                        void *lens, void *q, void *o, void *lse)
{
    io->cache = test_tensor(cache, MLA_DTYPE_U8, mem, 2, (int64_t[]){NB, bb});
    io->table = test_tensor(table, MLA_DTYPE_I32, mem, 2, (int64_t[]){S, MAXB});
    io->lens = test_tensor(lens, MLA_DTYPE_I32, mem, 1, (int64_t[]){S});
    io->q = test_tensor(q, MLA_DTYPE_BF16, mem, 3, (int64_t[]){T, H, D});
    io->o = test_tensor(o, MLA_DTYPE_BF16, mem, 3, (int64_t[]){T, H, L});
    io->lse = test_tensor(lse, MLA_DTYPE_F32, mem, 2, (int64_t[]){T, H});
    io->args = (mla_attention_args){&io->q, &io->cache, &io->table, &io->lens, NULL, NULL,
                                    NULL,   NULL,       &io->o,     &io->lse,  NULL};
}

static void poison(mla_context *ctx, const mla_attention_args *a)
{
    CHECK_STATUS(mla_memset(ctx, a->o->data, 0xFF, sizeof(uint16_t) * T * H * L), MLA_OK);
    CHECK_STATUS(mla_memset(ctx, a->lse->data, 0xFF, sizeof(float) * T * H), MLA_OK);
}

static void fetch(mla_context *ctx, const mla_attention_args *a, uint16_t *o, float *lse)
{
    CHECK_STATUS(
        mla_memcpy(ctx, o, a->o->data, sizeof(uint16_t) * T * H * L, MLA_COPY_CONTEXT_TO_HOST),
        MLA_OK);
    CHECK_STATUS(
        mla_memcpy(ctx, lse, a->lse->data, sizeof(float) * T * H, MLA_COPY_CONTEXT_TO_HOST),
        MLA_OK);
}

static void eager(mla_context *ctx, const mla_attention_plan *plan, const mla_attention_args *a,
                  uint16_t *o, float *lse)
{
    poison(ctx, a);
    CHECK_STATUS(mla_attention_run(ctx, plan, a), MLA_OK);
    CHECK_STATUS(mla_context_synchronize(ctx), MLA_OK);
    fetch(ctx, a, o, lse);
}

static void replay(mla_context *ctx, GPU(Stream_t) stream, GPU(GraphExec_t) exec,
                   const mla_attention_args *a, uint16_t *o, float *lse)
{
    poison(ctx, a);
    CHECK(GPU(GraphLaunch)(exec, stream) == GPU(Success));
    CHECK(GPU(StreamSynchronize)(stream) == GPU(Success));
    fetch(ctx, a, o, lse);
}

/* The same attention on the reference backend, from the host copies. */
static void reference(const mla_attention_desc *desc, uint16_t *cache, int32_t *table,
                      const int32_t *lens, uint16_t *q, uint16_t *o, float *lse)
{
    mla_context *ref = NULL;
    CHECK_STATUS(mla_context_create(MLA_BACKEND_REFERENCE, NULL, &ref), MLA_OK);
    if (!ref)
        return;
    const mla_memory mem = MLA_MEMORY_HOST;
    int32_t lens_copy[S];
    memcpy(lens_copy, lens, sizeof lens_copy);
    int64_t bb = 0;
    CHECK_STATUS(mla_cache_block_bytes(&desc->cache, &bb), MLA_OK);
    att_io io;
    att_io_init(&io, mem, bb, cache, table, lens_copy, q, o, lse);
    mla_attention_args args = io.args;
    mla_attention_plan *plan = NULL;
    CHECK_STATUS(mla_attention_plan_create(ref, desc, &args, &plan), MLA_OK);
    const int64_t ws_bytes = plan ? mla_attention_plan_workspace_bytes(plan) : 0;
    void *ws = NULL;
    CHECK_STATUS(mla_malloc(ref, (size_t)(ws_bytes > 0 ? ws_bytes : 256), &ws), MLA_OK);
    mla_tensor t_ws =
        test_tensor(ws, MLA_DTYPE_U8, mem, 1, (int64_t[]){ws_bytes > 0 ? ws_bytes : 256});
    args.workspace = &t_ws;
    if (plan && ws)
        CHECK_STATUS(mla_attention_run(ref, plan, &args), MLA_OK);
    mla_attention_plan_destroy(plan);
    mla_free(ref, ws);
    mla_context_destroy(ref);
}

/* Sanity only (the conformance suite holds the derived bounds): a stale
 * schedule misses or adds hundreds of keys, which moves lse by far more. */
static void check_near(const char *what, const uint16_t *o, const float *lse, const uint16_t *o_ref,
                       const float *lse_ref)
{
    double worst_o = 0, worst_lse = 0;
    for (int i = 0; i < T * H * L; ++i) {
        const double e = fabs((double)mla_bf16_to_f32(o[i]) - mla_bf16_to_f32(o_ref[i]));
        worst_o = e > worst_o || e != e ? e : worst_o;
    }
    for (int i = 0; i < T * H; ++i) {
        const double e = fabs((double)lse[i] - lse_ref[i]);
        worst_lse = e > worst_lse || e != e ? e : worst_lse;
    }
    CHECK(worst_o < 1e-2);
    CHECK(worst_lse < 1e-2);
    if (!(worst_o < 1e-2) || !(worst_lse < 1e-2))
        fprintf(stderr, "%s: max |o - reference| %.3g, max |lse - reference| %.3g\n", what, worst_o,
                worst_lse);
}

/* Captures one run (the partial pass and the combine); *exec stays NULL
 * when the capture failed. */
static void capture(mla_context *ctx, GPU(Stream_t) stream, const mla_attention_plan *plan,
                    const mla_attention_args *a, GPU(Graph_t) * graph, GPU(GraphExec_t) * exec)
{
    *graph = NULL;
    *exec = NULL;
    if (!test_capture_begin(stream))
        return;
    CHECK_STATUS(mla_attention_run(ctx, plan, a), MLA_OK);
    test_capture_end(stream, 2, graph, exec);
}

int main(void)
{
    GPU(Stream_t) stream = NULL;
    mla_context *ctx = NULL;
    const int made = test_graph_context("test_attention_graph", &stream, &ctx);
    if (made)
        return made == 77 ? 77 : TEST_SUMMARY();
    const mla_memory mem = mla_context_memory(ctx);

    mla_model_config cfg;
    CHECK_STATUS(mla_model_config_preset("DeepSeek-V2-Lite", &cfg), MLA_OK);
    const mla_cache_desc cd = {MLA_CACHE_NORMAL, MLA_DTYPE_BF16, NB, BS, L, R, 1.0f};
    mla_attention_desc desc;
    CHECK_STATUS(mla_attention_desc_default(&cfg, &cd, &desc), MLA_OK);
    desc.heads = H;
    desc.out_dtype = MLA_DTYPE_BF16;
    desc.num_splits = 0;
    int64_t bb = 0;
    CHECK_STATUS(mla_cache_block_bytes(&cd, &bb), MLA_OK);
    CHECK(bb == (int64_t)BS * D * 2); /* the host bytes below are the NORMAL bf16 layout */

    static uint16_t cache[(size_t)NB * BS * D], q1[T * H * D], q2[T * H * D];
    static uint16_t o_eager[T * H * L], o_graph[T * H * L], o_check[T * H * L], o_ref[T * H * L];
    static float lse_eager[T * H], lse_graph[T * H], lse_check[T * H], lse_ref[T * H];
    static int32_t table[S * MAXB];
    fill_bf16(cache, sizeof cache / sizeof cache[0]);
    fill_bf16(q1, sizeof q1 / sizeof q1[0]);
    fill_bf16(q2, sizeof q2 / sizeof q2[0]);
    test_shuffled_table(table, NB, next);

    void *d_cache = test_upload(ctx, cache, sizeof cache);
    void *d_tab = test_upload(ctx, table, sizeof table);
    void *d_len = test_upload(ctx, lens_first, sizeof lens_first);
    void *d_q = test_upload(ctx, q1, sizeof q1);
    void *d_o = NULL, *d_lse = NULL, *ws = NULL;
    CHECK_STATUS(mla_malloc(ctx, sizeof o_eager, &d_o), MLA_OK);
    CHECK_STATUS(mla_malloc(ctx, sizeof lse_eager, &d_lse), MLA_OK);
    att_io io;
    att_io_init(&io, mem, bb, d_cache, d_tab, d_len, d_q, d_o, d_lse);
    mla_attention_args args = io.args;
    mla_attention_plan *plan = NULL;
    GPU(Graph_t) graph = NULL;
    GPU(GraphExec_t) exec = NULL;
    CHECK_STATUS(mla_attention_plan_create(ctx, &desc, &args, &plan), MLA_OK);
    if (!plan)
        goto done;
    CHECK(mla_attention_plan_splits(plan) > 1);
    const int64_t ws_bytes = mla_attention_plan_workspace_bytes(plan);
    CHECK_STATUS(mla_malloc(ctx, (size_t)(ws_bytes > 0 ? ws_bytes : 256), &ws), MLA_OK);
    mla_tensor t_ws =
        test_tensor(ws, MLA_DTYPE_U8, mem, 1, (int64_t[]){ws_bytes > 0 ? ws_bytes : 256});
    args.workspace = &t_ws;

    eager(ctx, plan, &args, o_eager, lse_eager);
    capture(ctx, stream, plan, &args, &graph, &exec);
    if (!exec)
        goto done;

    /* the replay reads q through the captured pointer: new values, same buffer */
    CHECK_STATUS(mla_memcpy(ctx, d_q, q2, sizeof q2, MLA_COPY_HOST_TO_CONTEXT), MLA_OK);
    replay(ctx, stream, exec, &args, o_graph, lse_graph);
    eager(ctx, plan, &args, o_check, lse_check);
    CHECK(memcmp(o_graph, o_check, sizeof o_graph) == 0);
    CHECK(memcmp(lse_graph, lse_check, sizeof lse_graph) == 0);
    CHECK(memcmp(o_graph, o_eager, sizeof o_graph) != 0);
    reference(&desc, cache, table, lens_first, q2, o_ref, lse_ref);
    check_near("replay", o_graph, lse_graph, o_ref, lse_ref);

    /* new lengths in the same device buffer, then the same executable */
    CHECK_STATUS(
        mla_memcpy(ctx, d_len, lens_updated, sizeof lens_updated, MLA_COPY_HOST_TO_CONTEXT),
        MLA_OK);
    CHECK_STATUS(mla_attention_plan_update(ctx, plan, &args), MLA_OK);
    CHECK(mla_attention_plan_splits(plan) > 1);
    replay(ctx, stream, exec, &args, o_graph, lse_graph);
    eager(ctx, plan, &args, o_check, lse_check);
    CHECK(memcmp(o_graph, o_check, sizeof o_graph) == 0);
    CHECK(memcmp(lse_graph, lse_check, sizeof lse_graph) == 0);
    reference(&desc, cache, table, lens_updated, q2, o_ref, lse_ref);
    check_near("replay after the update", o_graph, lse_graph, o_ref, lse_ref);

done:
    test_graph_destroy(graph, exec);
    mla_attention_plan_destroy(plan);
    mla_free(ctx, ws);
    mla_free(ctx, d_lse);
    mla_free(ctx, d_o);
    mla_free(ctx, d_q);
    mla_free(ctx, d_len);
    mla_free(ctx, d_tab);
    mla_free(ctx, d_cache);
    mla_context_destroy(ctx);
    CHECK(GPU(StreamDestroy)(stream) == GPU(Success));
    return TEST_SUMMARY();
}
