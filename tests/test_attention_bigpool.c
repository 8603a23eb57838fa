/* A KV pool above 4 GiB on the CPU backend and (when there is a device) the
 * HIP backend: the same keys written into blocks whose byte offsets lie
 * beyond 2^32 and into a small pool, attended with the same plan shape. The
 * two outputs must be identical bits (only the block ids differ, so any
 * 32-bit truncation of a cache offset reads other keys), and both must
 * agree with the reference backend within a loose sanity margin. The host
 * pool is an anonymous mapping without reserve, of which only the used
 * blocks are ever touched: a fraction of a second, under the sanitizers
 * too (they neither zero nor shadow-poison a mapping). */
#define _DEFAULT_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "mla/mla.h"
#include "tests/test_tensors.h"

enum { L = 128, R = 16, D = L + R, BS = 16, S = 2, MAXB = 3, C = 40, H = 16, T = S };

static uint32_t rng = 0x9E3779B9u;
static float rnd(void)
{
    rng ^= rng << 13, rng ^= rng >> 17, rng ^= rng << 5;
    return (float)(rng >> 8) / 8388608.0f - 1.0f;
}

/* Writes the keys of both sequences through table into a pool of
 * num_blocks blocks, attends, and returns o [T, H, L] on the host. */
static void run(mla_context *ctx, int64_t num_blocks, const int32_t *table, const float *kn,
                const float *kp, const float *q, float *o_host)
{
    const mla_memory mem = mla_context_memory(ctx);
    mla_cache_desc cd = {MLA_CACHE_NORMAL, MLA_DTYPE_BF16, num_blocks, BS, L, R, 1.0f};
    int64_t bb = 0;
    CHECK_STATUS(mla_cache_block_bytes(&cd, &bb), MLA_OK);
    const size_t pool = (size_t)(num_blocks * bb);
    void *cache = NULL;
    if (mem == MLA_MEMORY_HOST) {
        cache = mmap(NULL, pool, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        CHECK(cache != MAP_FAILED);
        if (cache == MAP_FAILED)
            return;
    } else {
        CHECK_STATUS(mla_malloc(ctx, pool, &cache), MLA_OK);
    }
    int32_t slots[S * C], lens[S] = {C, C};
    for (int s = 0; s < S; ++s)
        for (int t = 0; t < C; ++t)
            slots[s * C + t] = table[s * MAXB + t / BS] * BS + t % BS;
    void *d_kn = test_upload(ctx, kn, sizeof(float) * S * C * L);
    void *d_kp = test_upload(ctx, kp, sizeof(float) * S * C * R);
    void *d_sl = test_upload(ctx, slots, sizeof slots);
    mla_tensor t_cache = test_tensor(cache, MLA_DTYPE_U8, mem, 2, (int64_t[]){num_blocks, bb});
    mla_tensor t_kn = test_tensor(d_kn, MLA_DTYPE_F32, mem, 2, (int64_t[]){S * C, L});
    mla_tensor t_kp = test_tensor(d_kp, MLA_DTYPE_F32, mem, 2, (int64_t[]){S * C, R});
    mla_tensor t_sl = test_tensor(d_sl, MLA_DTYPE_I32, mem, 1, (int64_t[]){S * C});
    CHECK_STATUS(mla_cache_write(ctx, &cd, &t_cache, &t_kn, &t_kp, &t_sl), MLA_OK);

    mla_model_config cfg;
    CHECK_STATUS(mla_model_config_preset("test-tiny", &cfg), MLA_OK);
    cfg.heads = H;
    mla_attention_desc desc;
    CHECK_STATUS(mla_attention_desc_default(&cfg, &cd, &desc), MLA_OK);
    desc.q_dtype = MLA_DTYPE_F32;
    desc.out_dtype = MLA_DTYPE_F32;
    desc.num_splits = 2; /* the split combine reads partials of both halves */
    void *d_q = test_upload(ctx, q, sizeof(float) * T * H * D);
    void *d_tab = test_upload(ctx, table, sizeof(int32_t) * S * MAXB);
    void *d_len = test_upload(ctx, lens, sizeof lens);
    void *d_o = NULL;
    CHECK_STATUS(mla_malloc(ctx, sizeof(float) * T * H * L, &d_o), MLA_OK);
    mla_tensor t_q = test_tensor(d_q, MLA_DTYPE_F32, mem, 3, (int64_t[]){T, H, D});
    mla_tensor t_tab = test_tensor(d_tab, MLA_DTYPE_I32, mem, 2, (int64_t[]){S, MAXB});
    mla_tensor t_len = test_tensor(d_len, MLA_DTYPE_I32, mem, 1, (int64_t[]){S});
    mla_tensor t_o = test_tensor(d_o, MLA_DTYPE_F32, mem, 3, (int64_t[]){T, H, L});
    mla_attention_args args = {&t_q, &t_cache, &t_tab, &t_len, NULL, NULL,
                               NULL, NULL,     &t_o,   NULL,   NULL};
    mla_attention_plan *plan = NULL;
    CHECK_STATUS(mla_attention_plan_create(ctx, &desc, &args, &plan), MLA_OK);
    void *ws = NULL;
    const int64_t ws_bytes = mla_attention_plan_workspace_bytes(plan);
    CHECK_STATUS(mla_malloc(ctx, (size_t)(ws_bytes > 0 ? ws_bytes : 256), &ws), MLA_OK);
    mla_tensor t_ws =
        test_tensor(ws, MLA_DTYPE_U8, mem, 1, (int64_t[]){ws_bytes > 0 ? ws_bytes : 256});
    args.workspace = &t_ws;
    CHECK_STATUS(mla_attention_run(ctx, plan, &args), MLA_OK);
    CHECK_STATUS(mla_context_synchronize(ctx), MLA_OK);
    CHECK_STATUS(
        mla_memcpy(ctx, o_host, d_o, sizeof(float) * T * H * L,
                   mem == MLA_MEMORY_HOST ? MLA_COPY_HOST_TO_HOST : MLA_COPY_CONTEXT_TO_HOST),
        MLA_OK);
    mla_attention_plan_destroy(plan);
    mla_free(ctx, ws);
    mla_free(ctx, d_o);
    if (mem == MLA_MEMORY_HOST)
        munmap(cache, pool);
    else
        mla_free(ctx, cache);
    if (mem != MLA_MEMORY_HOST) {
        mla_free(ctx, d_kn), mla_free(ctx, d_kp), mla_free(ctx, d_sl);
        mla_free(ctx, d_q), mla_free(ctx, d_tab), mla_free(ctx, d_len);
    }
}

/* The big and the small pool on ctx: the same bits, near the reference. */
static void big_vs_small(mla_context *ctx, const char *name, const float *kn, const float *kp,
                         const float *q, const float *o_ref)
{
    static float o_big[T * H * L], o_small[T * H * L];
    /* 4.5 GiB of 4608-byte blocks; the used blocks sit above 2^32 bytes. */
    const int64_t block_bytes = (int64_t)BS * D * 2;
    const int64_t big_blocks = ((int64_t)9 << 29) / block_bytes;
    const int64_t hi = big_blocks - 1;
    const int32_t big_table[S * MAXB] = {(int32_t)hi,       (int32_t)(hi - 7), (int32_t)(hi - 3),
                                         (int32_t)(hi - 1), (int32_t)(hi - 5), (int32_t)(hi - 9)};
    CHECK((hi - 9) * block_bytes > ((int64_t)1 << 32));
    const int32_t small_table[S * MAXB] = {0, 1, 2, 3, 4, 5};
    run(ctx, big_blocks, big_table, kn, kp, q, o_big);
    run(ctx, 6, small_table, kn, kp, q, o_small);
    CHECK(memcmp(o_big, o_small, sizeof o_big) == 0);
    /* Sanity only (the conformance suite holds the derived bound): outputs
     * are convex combinations of values in [-1, 1]. */
    double worst = 0;
    for (int i = 0; i < T * H * L; ++i)
        worst = fmax(worst, fabs((double)o_big[i] - o_ref[i]));
    printf("test_attention_bigpool: %s, pool %.2f GiB, max |%s - reference| %.3g\n", name,
           (double)(big_blocks * block_bytes) / (1 << 30), name, worst);
    CHECK(worst < 1e-2);
}

int main(void)
{
    static float kn[S * C * L], kp[S * C * R], q[T * H * D], o_ref[T * H * L];
    for (size_t i = 0; i < sizeof kn / sizeof kn[0]; ++i)
        kn[i] = rnd();
    for (size_t i = 0; i < sizeof kp / sizeof kp[0]; ++i)
        kp[i] = rnd();
    for (size_t i = 0; i < sizeof q / sizeof q[0]; ++i)
        q[i] = rnd();
    mla_context *ref = NULL;
    CHECK_STATUS(mla_context_create(MLA_BACKEND_REFERENCE, NULL, &ref), MLA_OK);
    const int32_t small_table[S * MAXB] = {0, 1, 2, 3, 4, 5};
    run(ref, 6, small_table, kn, kp, q, o_ref);
    mla_context_destroy(ref);

    mla_context *cpu = NULL;
    CHECK_STATUS(mla_context_create(MLA_BACKEND_CPU, NULL, &cpu), MLA_OK);
    if (cpu)
        big_vs_small(cpu, "cpu", kn, kp, q, o_ref);
    mla_context_destroy(cpu);

    mla_context *gpu = NULL;
    if (mla_context_create(MLA_BACKEND_HIP, NULL, &gpu) == MLA_OK)
        big_vs_small(gpu, "hip", kn, kp, q, o_ref);
    else
        printf("test_attention_bigpool: no HIP device, the HIP half skipped\n");
    mla_context_destroy(gpu);
    return TEST_SUMMARY();
}
