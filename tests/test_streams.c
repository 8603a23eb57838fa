/* mla_context_set_stream on the HIP backend (include/mla/mla.h), as a
 * framework uses it: the same context and the same attention plan driven on
 * several streams. One step is the conversion of q (f32 -> bf16, on the
 * device) and the attention run over it (DeepSeek-V2-Lite sizes, split-KV,
 * long enough to overlap with the host).
 *   1. The step on stream A, on B, on the runtime's default stream and on
 *      the context's own: the same bits every time.
 *   2. The switch orders the context's earlier work: A is held by a host
 *      callback, the conversion of q queued behind it, then the stream
 *      switched to B and the attention (reading q) queued there. B must not
 *      finish while A is held, and after the release it must have read the
 *      converted q (no race on q).
 *   3. It waits for nothing else: A held by a callback queued after the
 *      switch, B's step must finish while A is still held.
 *   4. Switching onto a stream that is being captured adds no dependency
 *      (the capture stays legal) and the replay gives the same bits.
 * Skips (77) without a GPU. */
#define _POSIX_C_SOURCE 200809L
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "mla/mla.h"
#include "tests/test_graph.h"
#include "tests/test_tensors.h"

enum { L = 512, R = 64, D = L + R, BS = 64, H = 16, S = 4, T = S, MAXB = 24, NB = S * MAXB };

static const int32_t lens[S] = {1500, 1000, 640, 777};

static uint32_t rng = 0x9E3779B9u;
static uint32_t next(void)
{
    rng ^= rng << 13, rng ^= rng >> 17, rng ^= rng << 5;
    return rng;
}
static float rnd(void) { return (float)(next() >> 8) / 8388608.0f - 1.0f; }

static void sleep_ms(int ms)
{
    const struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* A host callback that holds its stream until released. */
typedef struct {
    atomic_int released;
    atomic_int entered;
} holder;

static void hold(GPU(Stream_t) stream, GPU(Error_t) status, void *user)
{
    (void)stream, (void)status;
    holder *h = user;
    atomic_store(&h->entered, 1);
    for (int i = 0; i < 60000 && !atomic_load(&h->released); ++i)
        sleep_ms(1); /* bounded: a failed test still ends */
}

static void hold_stream(GPU(Stream_t) stream, holder *h)
{
    atomic_store(&h->released, 0);
    atomic_store(&h->entered, 0);
    CHECK(GPU(StreamAddCallback)(stream, hold, h, 0) == GPU(Success));
}

/* 1 when the stream finished within ms milliseconds (0: still busy). */
static int finishes_within(GPU(Stream_t) stream, int ms)
{
    for (int t = 0; t <= ms; t += 5) {
        const GPU(Error_t) q = GPU(StreamQuery)(stream);
        (void)GPU(GetLastError)(); /* NotReady must not reach the library's launch checks */
        if (q == GPU(Success))
            return 1;
        CHECK(q == GPU(ErrorNotReady));
        sleep_ms(5);
    }
    return 0;
}

typedef struct {
    mla_tensor cache, table, lens, qf, q, o, lse, ws;
    mla_attention_args args;
    void *d_qf, *d_q, *d_o, *d_lse;
} step_io;

/* q = bf16(qf), then the attention; queued on the context's stream. */
static void step(mla_context *ctx, const mla_attention_plan *plan, step_io *io)
{
    CHECK_STATUS(mla_convert(ctx, &io->qf, &io->q, MLA_SATURATE), MLA_OK);
    CHECK_STATUS(mla_attention_run(ctx, plan, &io->args), MLA_OK);
}

static void poison(mla_context *ctx, step_io *io)
{
    CHECK_STATUS(mla_memset(ctx, io->d_o, 0xFF, sizeof(uint16_t) * T * H * L), MLA_OK);
    CHECK_STATUS(mla_memset(ctx, io->d_lse, 0xFF, sizeof(float) * T * H), MLA_OK);
}

static void fetch(mla_context *ctx, step_io *io, uint16_t *o, float *lse)
{
    CHECK_STATUS(mla_context_synchronize(ctx), MLA_OK);
    CHECK_STATUS(
        mla_memcpy(ctx, o, io->d_o, sizeof(uint16_t) * T * H * L, MLA_COPY_CONTEXT_TO_HOST),
        MLA_OK);
    CHECK_STATUS(mla_memcpy(ctx, lse, io->d_lse, sizeof(float) * T * H, MLA_COPY_CONTEXT_TO_HOST),
                 MLA_OK);
}

/* The step on the given stream from poisoned outputs; 1 when the bits equal
 * the first run's. */
static int same_on(mla_context *ctx, void *stream, const mla_attention_plan *plan, step_io *io,
                   const uint16_t *o_want, const float *lse_want)
{
    static uint16_t o[T * H * L];
    static float lse[T * H];
    CHECK_STATUS(mla_context_set_stream(ctx, stream), MLA_OK);
    CHECK(mla_context_get_stream(ctx) == stream);
    poison(ctx, io);
    step(ctx, plan, io);
    fetch(ctx, io, o, lse);
    return memcmp(o, o_want, sizeof o) == 0 && memcmp(lse, lse_want, sizeof lse) == 0;
}

int main(void)
{
    mla_context *probe = NULL;
    if (mla_context_create(MLA_BACKEND_HIP, NULL, &probe) != MLA_OK) {
        printf("test_streams: no HIP device, skipped\n");
        return 77;
    }
    mla_context_destroy(probe);

    GPU(Stream_t) a = NULL, b = NULL, c = NULL;
    CHECK(GPU(StreamCreateWithFlags)(&a, GPU(StreamNonBlocking)) == GPU(Success));
    CHECK(GPU(StreamCreateWithFlags)(&b, GPU(StreamNonBlocking)) == GPU(Success));
    CHECK(GPU(StreamCreateWithFlags)(&c, GPU(StreamNonBlocking)) == GPU(Success));
    mla_context *ctx = NULL;
    CHECK_STATUS(mla_context_create(MLA_BACKEND_HIP, NULL, &ctx), MLA_OK);
    if (!ctx || !a || !b || !c)
        return TEST_SUMMARY();
    void *own = mla_context_get_stream(ctx);
    CHECK(own != NULL);
    CHECK_STATUS(mla_context_set_stream(ctx, a), MLA_OK);
    const mla_memory mem = mla_context_memory(ctx);

    mla_model_config cfg;
    CHECK_STATUS(mla_model_config_preset("DeepSeek-V2-Lite", &cfg), MLA_OK);
    const mla_cache_desc cd = {MLA_CACHE_NORMAL, MLA_DTYPE_BF16, NB, BS, L, R, 1.0f};
    mla_attention_desc desc;
    CHECK_STATUS(mla_attention_desc_default(&cfg, &cd, &desc), MLA_OK);
    desc.heads = H;
    desc.out_dtype = MLA_DTYPE_BF16;
    int64_t bb = 0;
    CHECK_STATUS(mla_cache_block_bytes(&cd, &bb), MLA_OK);

    static uint16_t cache[(size_t)NB * BS * D], garbage[T * H * D];
    static float qf[T * H * D], lse_a[T * H], lse[T * H];
    static uint16_t o_a[T * H * L], o[T * H * L];
    static int32_t table[S * MAXB];
    for (size_t i = 0; i < sizeof cache / sizeof cache[0]; ++i)
        cache[i] = mla_f32_to_bf16(rnd());
    for (size_t i = 0; i < sizeof qf / sizeof qf[0]; ++i)
        qf[i] = rnd(), garbage[i] = 0x7FC0; /* NaN where q belongs */
    test_shuffled_table(table, NB, next);

    step_io io;
    void *d_cache = test_upload(ctx, cache, sizeof cache);
    void *d_tab = test_upload(ctx, table, sizeof table);
    void *d_len = test_upload(ctx, lens, sizeof lens);
    io.d_qf = test_upload(ctx, qf, sizeof qf);
    io.d_q = test_upload(ctx, garbage, sizeof garbage);
    io.d_o = io.d_lse = NULL;
    CHECK_STATUS(mla_malloc(ctx, sizeof o, &io.d_o), MLA_OK);
    CHECK_STATUS(mla_malloc(ctx, sizeof lse, &io.d_lse), MLA_OK);
    io.cache = test_tensor(d_cache, MLA_DTYPE_U8, mem, 2, (int64_t[]){NB, bb});
    io.table = test_tensor(d_tab, MLA_DTYPE_I32, mem, 2, (int64_t[]){S, MAXB});
    io.lens = test_tensor(d_len, MLA_DTYPE_I32, mem, 1, (int64_t[]){S});
    io.qf = test_tensor(io.d_qf, MLA_DTYPE_F32, mem, 3, (int64_t[]){T, H, D});
    io.q = test_tensor(io.d_q, MLA_DTYPE_BF16, mem, 3, (int64_t[]){T, H, D});
    io.o = test_tensor(io.d_o, MLA_DTYPE_BF16, mem, 3, (int64_t[]){T, H, L});
    io.lse = test_tensor(io.d_lse, MLA_DTYPE_F32, mem, 2, (int64_t[]){T, H});
    io.args = (mla_attention_args){&io.q, &io.cache, &io.table, &io.lens, NULL, NULL,
                                   NULL,  NULL,      &io.o,     &io.lse,  NULL};
    mla_attention_plan *plan = NULL;
    void *ws = NULL;
    GPU(Graph_t) graph = NULL;
    GPU(GraphExec_t) exec = NULL;
    holder h1, h2;
    atomic_store(&h1.released, 1);
    atomic_store(&h2.released, 1);
    CHECK_STATUS(mla_attention_plan_create(ctx, &desc, &io.args, &plan), MLA_OK);
    if (!plan)
        goto done;
    CHECK(mla_attention_plan_splits(plan) > 1);
    const int64_t ws_bytes = mla_attention_plan_workspace_bytes(plan);
    CHECK_STATUS(mla_malloc(ctx, (size_t)(ws_bytes > 0 ? ws_bytes : 256), &ws), MLA_OK);
    io.ws = test_tensor(ws, MLA_DTYPE_U8, mem, 1, (int64_t[]){ws_bytes > 0 ? ws_bytes : 256});
    io.args.workspace = &io.ws;

    /* 1. the same step on every stream */
    poison(ctx, &io);
    step(ctx, plan, &io);
    fetch(ctx, &io, o_a, lse_a);
    int finite = 1;
    for (size_t i = 0; i < sizeof o_a / sizeof o_a[0]; ++i)
        finite &= (o_a[i] & 0x7F80) != 0x7F80;
    for (size_t i = 0; i < sizeof lse_a / sizeof lse_a[0]; ++i)
        finite &= lse_a[i] == lse_a[i] && lse_a[i] > -1e30f && lse_a[i] < 1e30f;
    CHECK(finite);
    CHECK(same_on(ctx, b, plan, &io, o_a, lse_a));
    CHECK(same_on(ctx, NULL, plan, &io, o_a, lse_a));
    CHECK(same_on(ctx, own, plan, &io, o_a, lse_a));
    CHECK(same_on(ctx, a, plan, &io, o_a, lse_a));
    CHECK_STATUS(mla_context_set_stream(ctx, a), MLA_OK); /* the stream in use: no call */

    /* 2. B waits for the context's work queued on A before the switch */
    CHECK_STATUS(mla_memcpy(ctx, io.d_q, garbage, sizeof garbage, MLA_COPY_HOST_TO_CONTEXT),
                 MLA_OK);
    poison(ctx, &io);
    hold_stream(a, &h1);
    CHECK_STATUS(mla_convert(ctx, &io.qf, &io.q, MLA_SATURATE), MLA_OK); /* behind the hold */
    CHECK_STATUS(mla_context_set_stream(ctx, b), MLA_OK);
    CHECK_STATUS(mla_attention_run(ctx, plan, &io.args), MLA_OK);
    CHECK(!finishes_within(b, 200)); /* held by A's callback through the switch's event */
    atomic_store(&h1.released, 1);
    fetch(ctx, &io, o, lse);
    CHECK(memcmp(o, o_a, sizeof o) == 0 && memcmp(lse, lse_a, sizeof lse) == 0);
    CHECK(GPU(StreamSynchronize)(a) == GPU(Success));

    /* 3. and for nothing A gets after the switch */
    CHECK_STATUS(mla_context_set_stream(ctx, a), MLA_OK);
    poison(ctx, &io);
    CHECK_STATUS(mla_convert(ctx, &io.qf, &io.q, MLA_SATURATE), MLA_OK);
    CHECK_STATUS(mla_context_set_stream(ctx, b), MLA_OK);
    hold_stream(a, &h2);
    CHECK_STATUS(mla_attention_run(ctx, plan, &io.args), MLA_OK);
    CHECK(finishes_within(b, 20000));
    CHECK(!atomic_load(&h2.released)); /* A was still held when B finished */
    atomic_store(&h2.released, 1);
    fetch(ctx, &io, o, lse);
    CHECK(memcmp(o, o_a, sizeof o) == 0 && memcmp(lse, lse_a, sizeof lse) == 0);
    CHECK(GPU(StreamSynchronize)(a) == GPU(Success));

    /* 4. onto a stream being captured, and off it again */
    CHECK_STATUS(mla_context_set_stream(ctx, a), MLA_OK);
    CHECK(GPU(StreamSynchronize)(a) == GPU(Success));
    if (test_capture_begin(c)) {
        CHECK_STATUS(mla_context_set_stream(ctx, c), MLA_OK);
        step(ctx, plan, &io);
        test_capture_end(c, 3, &graph, &exec);
        CHECK_STATUS(mla_context_set_stream(ctx, a), MLA_OK);
    }
    if (exec) {
        poison(ctx, &io);
        CHECK(GPU(GraphLaunch)(exec, c) == GPU(Success));
        CHECK(GPU(StreamSynchronize)(c) == GPU(Success));
        fetch(ctx, &io, o, lse);
        CHECK(memcmp(o, o_a, sizeof o) == 0 && memcmp(lse, lse_a, sizeof lse) == 0);
    }

done:
    atomic_store(&h1.released, 1);
    atomic_store(&h2.released, 1);
    test_graph_destroy(graph, exec);
    mla_attention_plan_destroy(plan);
    mla_free(ctx, ws);
    mla_free(ctx, io.d_lse);
    mla_free(ctx, io.d_o);
    mla_free(ctx, io.d_q);
    mla_free(ctx, io.d_qf);
    mla_free(ctx, d_len);
    mla_free(ctx, d_tab);
    mla_free(ctx, d_cache);
    CHECK_STATUS(mla_context_set_stream(ctx, own), MLA_OK);
    mla_context_destroy(ctx);
    CHECK(GPU(StreamDestroy)(a) == GPU(Success));
    CHECK(GPU(StreamDestroy)(b) == GPU(Success));
    CHECK(GPU(StreamDestroy)(c) == GPU(Success));
    return TEST_SUMMARY();
}
