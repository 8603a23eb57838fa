/* The CPU attention kernel (cpu/attention.c) against a float64 evaluation of
 * the formula of include/mla/mla_attention.h, on plans built by hand (every
 * split shape the planner can produce, including empty and forced splits),
 * every cache layout and element type, dense and sparse, causal next_n > 1,
 * prefill chunks wider than one task, sinks, strided q and o views, and
 * padding sequences. The keys the formula reads come back through
 * mla_cache_gather, so the test checks the attention, not the layouts. */
#define _POSIX_C_SOURCE 200112L
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/attention_plan.h"
#include "cpu/cpu_kernels.h"
#include "mla/mla.h"
#include "test_util.h"

static uint64_t rng = 0x9E3779B97F4A7C15ull;

static double urand(void) /* [0, 1) */
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

static float bf16_round(float x) { return mla_bf16_to_f32(mla_f32_to_bf16(x)); }

typedef struct tcase {
    const char *name;
    int64_t H, L, R, bs;
    mla_cache_layout layout;
    mla_dtype kdt, qdt, odt;
    int paged;
    int S;
    int32_t ctx[4], nq[4]; /* context and query rows per sequence */
    int32_t splits;        /* split count per non-padding sequence (1: none) */
    int32_t chunk;         /* keys (dense) or columns (sparse) per split, multiple of 64 */
    int64_t topk;
    int sinks;
    int strided; /* q and o as views of wider buffers */
    int raw;     /* fp8 caches: every value byte a random code (all but the NaN codes) */
    int tiny;    /* every third run of 64 slots scaled by 2^-100 (FP8_SCALED: every third
                  * block's first scale times 1.5): those vdpbf16ps tiles fall back */
} tcase;

static void run_case(mla_context *ctx, const tcase *tc)
{
    const int64_t H = tc->H, L = tc->L, R = tc->R, D = L + R, S = tc->S;
    int64_t T = 0, max_q = 0, max_blocks = 1, bs = tc->bs;
    int32_t cu[5];
    cu[0] = 0;
    if (!tc->paged) { /* contiguous: a block holds a whole sequence */
        int64_t most = 1;
        for (int s = 0; s < S; ++s)
            most = tc->ctx[s] > most ? tc->ctx[s] : most;
        bs = (most + 15) / 16 * 16;
    }
    for (int s = 0; s < S; ++s) {
        cu[s + 1] = cu[s] + tc->nq[s];
        max_q = tc->nq[s] > max_q ? tc->nq[s] : max_q;
        const int64_t nb = (tc->ctx[s] + bs - 1) / bs;
        max_blocks = nb > max_blocks ? nb : max_blocks;
    }
    T = cu[S];
    if (!tc->paged)
        max_blocks = 1;
    mla_cache_desc cd = {tc->layout, tc->kdt, 0, bs, L, R, 0.0625f};
    cd.num_blocks = tc->paged ? S * max_blocks + 3 : S;
    int64_t block_bytes = 0;
    CHECK_STATUS(mla_cache_block_bytes(&cd, &block_bytes), MLA_OK);

    /* The cache: every slot written with random values. */
    const int64_t nslots = cd.num_blocks * cd.block_size;
    uint8_t *cache = calloc((size_t)(cd.num_blocks * block_bytes), 1);
    float *kn = malloc((size_t)(nslots * L) * sizeof(float));
    float *kp = malloc((size_t)(nslots * R) * sizeof(float));
    int64_t *slots = malloc((size_t)nslots * sizeof(int64_t));
    for (int64_t i = 0; i < nslots * L; ++i)
        kn[i] = (float)(urand() * 2.0 - 1.0);
    for (int64_t i = 0; i < nslots * R; ++i)
        kp[i] = (float)(urand() * 2.0 - 1.0);
    for (int64_t i = 0; i < nslots; ++i)
        slots[i] = i;
    for (int64_t i = 0; tc->tiny && i < nslots; ++i) {
        if ((i / 64) % 3 != 0)
            continue; /* whole runs of 64 slots: some tiles fall back, some do not */
        for (int64_t d = 0; d < L; ++d)
            kn[i * L + d] *= 0x1p-100f;
        for (int64_t d = 0; d < R; ++d)
            kp[i * R + d] *= 0x1p-100f;
    }
    mla_tensor tcache, tkn, tkp, tslots;
    mla_tensor_init(&tcache, cache, MLA_DTYPE_U8, MLA_MEMORY_HOST, 2,
                    (int64_t[]){cd.num_blocks, block_bytes});
    mla_tensor_init(&tkn, kn, MLA_DTYPE_F32, MLA_MEMORY_HOST, 2, (int64_t[]){nslots, L});
    mla_tensor_init(&tkp, kp, MLA_DTYPE_F32, MLA_MEMORY_HOST, 2, (int64_t[]){nslots, R});
    mla_tensor_init(&tslots, slots, MLA_DTYPE_I64, MLA_MEMORY_HOST, 1, (int64_t[]){nslots});
    CHECK_STATUS(mla_cache_write(ctx, &cd, &tcache, &tkn, &tkp, &tslots), MLA_OK);
    if (tc->raw) { /* subnormal codes and both signs of zero too */
        const int fnuz = tc->kdt == MLA_DTYPE_FP8_E4M3FNUZ;
        for (int64_t b = 0; b < cd.num_blocks; ++b)
            for (int64_t t = 0; t < cd.block_size; ++t)
                for (int64_t d = 0; d < (tc->layout == MLA_CACHE_FP8_SCALED ? L : D); ++d) {
                    uint8_t c;
                    do
                        c = (uint8_t)(urand() * 256.0);
                    while (fnuz ? c == 0x80 : (c & 0x7F) == 0x7F);
                    const int64_t tb = tc->layout == MLA_CACHE_FP8_SCALED ? L + L / 32 + 2 * R : D;
                    cache[b * block_bytes + t * tb + d] = c; /* NORMAL / FP8_SCALED order */
                }
    }
    if (tc->tiny && tc->layout == MLA_CACHE_FP8_SCALED) /* scales not powers of two */
        for (int64_t b = 0; b < cd.num_blocks; b += 3)
            for (int64_t t = 0; t < cd.block_size; ++t) {
                float sc;
                uint8_t *at = cache + b * block_bytes + t * (L + L / 32 + 2 * R) + L;
                memcpy(&sc, at, sizeof sc);
                sc *= 1.5f;
                memcpy(at, &sc, sizeof sc);
            }

    /* Block table: distinct random blocks per sequence. */
    int32_t *bt = malloc((size_t)(S * max_blocks) * sizeof(int32_t));
    int32_t *perm = malloc((size_t)cd.num_blocks * sizeof(int32_t));
    for (int64_t i = 0; i < cd.num_blocks; ++i)
        perm[i] = (int32_t)i;
    for (int64_t i = cd.num_blocks - 1; i > 0; --i) {
        const int64_t j = (int64_t)(urand() * (double)(i + 1));
        const int32_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    for (int64_t i = 0; i < S * max_blocks; ++i)
        bt[i] = perm[i];
    int32_t ctxl[4], cuq[5];
    for (int s = 0; s < S; ++s)
        ctxl[s] = tc->ctx[s];
    memcpy(cuq, cu, sizeof cu);

    /* Keys as the formula reads them (gather of each sequence). */
    int64_t total = 0;
    for (int s = 0; s < S; ++s)
        total += ctxl[s];
    float *keys = malloc((size_t)((total > 0 ? total : 1) * D) * sizeof(float));
    {
        mla_tensor tbt, tsl, tout;
        int32_t *bt_c = malloc((size_t)(S * max_blocks) * sizeof(int32_t));
        for (int s = 0; s < S; ++s)
            for (int64_t j = 0; j < max_blocks; ++j)
                bt_c[s * max_blocks + j] = tc->paged ? bt[s * max_blocks + j] : (int32_t)s;
        mla_tensor_init(&tbt, bt_c, MLA_DTYPE_I32, MLA_MEMORY_HOST, 2, (int64_t[]){S, max_blocks});
        mla_tensor_init(&tsl, ctxl, MLA_DTYPE_I32, MLA_MEMORY_HOST, 1, (int64_t[]){S});
        mla_tensor_init(&tout, keys, MLA_DTYPE_F32, MLA_MEMORY_HOST, 2, (int64_t[]){total, D});
        if (total > 0)
            CHECK_STATUS(mla_cache_gather(ctx, &cd, &tcache, &tbt, &tsl, &tout), MLA_OK);
        free(bt_c);
    }

    /* q [T, H, D] (a view of [T, H, D + 8] when strided), its values. */
    const int64_t qpad = tc->strided ? 8 : 0, qes = (int64_t)mla_dtype_size(tc->qdt);
    void *qbuf = malloc((size_t)(T * H * (D + qpad) * qes) + 1);
    float *qv = malloc((size_t)(T * H * D + 1) * sizeof(float));
    const float q_scale = (tc->qdt == MLA_DTYPE_FP8_E4M3FN) ? 0.125f : 1.0f;
    for (int64_t i = 0; i < T * H; ++i)
        for (int64_t d = 0; d < D; ++d) {
            /* raw codes reach +-28 (448 k_scale): smaller q keeps the scores near 100 */
            const float x = (float)(urand() * 4.0 - 2.0) * (tc->raw ? 0.0625f : 1.0f);
            const int64_t off = i * (D + qpad) + d;
            if (tc->qdt == MLA_DTYPE_F32) {
                ((float *)qbuf)[off] = x;
                qv[i * D + d] = x;
            } else if (tc->qdt == MLA_DTYPE_BF16) {
                ((uint16_t *)qbuf)[off] = mla_f32_to_bf16(x);
                qv[i * D + d] = bf16_round(x);
            } else {
                const uint8_t c = mla_f32_to_fp8(x / q_scale, tc->qdt, MLA_SATURATE);
                ((uint8_t *)qbuf)[off] = c;
                qv[i * D + d] = mla_fp8_to_f32(c, tc->qdt) * q_scale;
            }
        }
    mla_tensor tq;
    mla_tensor_init(&tq, qbuf, tc->qdt, MLA_MEMORY_HOST, 3, (int64_t[]){T, H, D});
    tq.stride[0] = H * (D + qpad);
    tq.stride[1] = D + qpad;

    /* Sparse indices: positions below, at and above the row's limit, -1, duplicates. */
    int32_t *topk = NULL;
    if (tc->topk > 0) {
        topk = malloc((size_t)(T * tc->topk) * sizeof(int32_t));
        for (int s = 0; s < S; ++s)
            for (int32_t j = 0; j < tc->nq[s]; ++j)
                for (int64_t i = 0; i < tc->topk; ++i) {
                    const double u = urand();
                    int32_t v = ctxl[s] > 0 ? (int32_t)(urand() * ctxl[s]) : -1;
                    if (u < 0.15)
                        v = -1;
                    else if (u < 0.2 && i > 0)
                        v = topk[(cu[s] + j) * tc->topk + i - 1];
                    topk[(cu[s] + j) * tc->topk + i] = v;
                }
    }
    float sinks[128];
    for (int64_t h = 0; h < H; ++h)
        sinks[h] = (float)(urand() * 6.0 - 1.0);

    /* o [T, H, L] (a view of [T, H + 1, L] when strided), lse [T, H]. */
    const int64_t opad = tc->strided ? 1 : 0, oes = (int64_t)mla_dtype_size(tc->odt);
    void *obuf = malloc((size_t)(T * (H + opad) * L * oes) + 1);
    float *lse = malloc((size_t)(T * H + 1) * sizeof(float));
    memset(obuf, 0x7F, (size_t)(T * (H + opad) * L * oes)); /* poison */
    for (int64_t i = 0; i < T * H; ++i)
        lse[i] = 12345.0f;
    mla_tensor to, tl;
    mla_tensor_init(&to, obuf, tc->odt, MLA_MEMORY_HOST, 3, (int64_t[]){T, H, L});
    to.stride[0] = (H + opad) * L;
    mla_tensor_init(&tl, lse, MLA_DTYPE_F32, MLA_MEMORY_HOST, 2, (int64_t[]){T, H});

    /* The plan, by hand. */
    mla_attention_plan plan;
    memset(&plan, 0, sizeof plan);
    plan.ctx = ctx;
    plan.desc.heads = H;
    plan.desc.cache = cd;
    plan.desc.paged = tc->paged;
    plan.desc.q_dtype = tc->qdt;
    plan.desc.q_scale = q_scale;
    plan.desc.out_dtype = tc->odt;
    plan.desc.softmax_scale = 1.0f / sqrtf((float)D) * 1.5f;
    plan.desc.topk = tc->topk;
    plan.block_bytes = block_bytes;
    plan.S = S;
    plan.T = T;
    plan.max_blocks = max_blocks;
    plan.max_q_len = max_q;
    plan.max_splits = tc->splits;
    mla_attention_work work[64];
    int32_t splits[4];
    int64_t nw = 0;
    for (int s = 0; s < S; ++s) {
        const int64_t len = tc->topk > 0 ? (ctxl[s] > 0 ? tc->topk : 0) : ctxl[s];
        if (len == 0) {
            splits[s] = 0;
            continue;
        }
        splits[s] = tc->splits;
        for (int i = 0; i < tc->splits; ++i) {
            int64_t b = (int64_t)i * tc->chunk, e = b + tc->chunk;
            if (tc->splits == 1)
                b = 0, e = len;
            b = b > len ? len : b;
            e = e > len ? len : e;
            work[nw].seq = s;
            work[nw].split = i;
            work[nw].kv_begin = (int32_t)b;
            work[nw].kv_end = (int32_t)e;
            ++nw;
        }
    }
    plan.num_work = plan.work_capacity = nw;
    plan.work_host = plan.work_dev = work;
    plan.cu_q_host = plan.cu_q_dev = cuq;
    plan.splits_host = plan.splits_dev = splits;
    const int64_t po_bytes = T * H * tc->splits * L * 4, pl_bytes = T * H * tc->splits * 4;
    plan.part_o_offset = 0;
    plan.part_lse_offset = (po_bytes + 255) / 256 * 256;
    plan.workspace_bytes = plan.part_lse_offset + pl_bytes + 256;
    void *ws = malloc((size_t)plan.workspace_bytes);
    const int64_t per = mla_cpu_attention_scratch_bytes(L, R);
    void *scratch = malloc((size_t)(per * ctx->num_threads));

    mla_attention_op_args a;
    memset(&a, 0, sizeof a);
    a.plan = &plan;
    a.q = tq;
    a.cache = tcache;
    mla_tensor_init(&a.block_table, bt, MLA_DTYPE_I32, MLA_MEMORY_HOST, 2,
                    (int64_t[]){S, max_blocks});
    if (!tc->paged)
        a.block_table.data = NULL;
    mla_tensor_init(&a.context_lens, ctxl, MLA_DTYPE_I32, MLA_MEMORY_HOST, 1, (int64_t[]){S});
    mla_tensor_init(&a.cu_q_lens, cuq, MLA_DTYPE_I32, MLA_MEMORY_HOST, 1, (int64_t[]){S + 1});
    if (topk)
        mla_tensor_init(&a.topk_indices, topk, MLA_DTYPE_I32, MLA_MEMORY_HOST, 2,
                        (int64_t[]){T, tc->topk});
    if (tc->sinks)
        mla_tensor_init(&a.sinks, sinks, MLA_DTYPE_F32, MLA_MEMORY_HOST, 1, (int64_t[]){H});
    a.o = to;
    a.lse = tl;
    a.workspace = ws;
    for (int pass = 0; pass < 2; ++pass) {
        if (pass == 0) {
            CHECK_STATUS(mla_cpu_attention_with_scratch(ctx, &a, scratch), MLA_OK);
        } else { /* the public entry points: the planner's own schedule, forced splits */
            memset(obuf, 0x7F, (size_t)(T * (H + opad) * L * oes));
            for (int64_t i = 0; i < T * H; ++i)
                lse[i] = 12345.0f;
            mla_attention_desc desc = plan.desc;
            desc.next_n = 1;
            desc.num_splits = tc->splits;
            mla_attention_args args;
            memset(&args, 0, sizeof args);
            args.q = &tq;
            args.cache = &tcache;
            args.block_table = tc->paged ? &a.block_table : NULL;
            args.context_lens = &a.context_lens;
            args.cu_q_lens = &a.cu_q_lens;
            args.topk_indices = topk ? &a.topk_indices : NULL;
            args.sinks = tc->sinks ? &a.sinks : NULL;
            args.o = &to;
            args.lse = &tl;
            mla_attention_plan *pl = NULL;
            CHECK_STATUS(mla_attention_plan_create(ctx, &desc, &args, &pl), MLA_OK);
            if (!pl) {
                printf("  plan: %s: %s\n", mla_context_error_param(ctx),
                       mla_context_error_detail(ctx));
                break;
            }
            const int64_t wsb = mla_attention_plan_workspace_bytes(pl);
            void *wsm = NULL;
            CHECK_STATUS(mla_malloc(ctx, (size_t)(wsb > 0 ? wsb : 1), &wsm), MLA_OK);
            mla_tensor tws;
            mla_tensor_init(&tws, wsm, MLA_DTYPE_U8, MLA_MEMORY_HOST, 1, (int64_t[]){wsb});
            args.workspace = &tws;
            CHECK_STATUS(mla_attention_run(ctx, pl, &args), MLA_OK);
            mla_free(ctx, wsm);
            mla_attention_plan_destroy(pl);
        }

        /* The formula in float64. */
        double max_err = 0.0, max_lse_err = 0.0;
        int bad_special = 0;
        double *p =
            malloc((size_t)((tc->topk > 0 ? tc->topk : 1) + max_blocks * bs + 1) * sizeof(double));
        int64_t kbase = 0;
        for (int s = 0; s < S; ++s) {
            const int64_t c = ctxl[s], n = tc->nq[s];
            for (int64_t j = 0; j < n; ++j) {
                const int64_t r = cu[s] + j, pos = c - n + j;
                for (int64_t h = 0; h < H; ++h) {
                    const float *qrow = qv + (r * H + h) * D;
                    int64_t nkeys = 0;
                    double mx = -INFINITY;
                    int64_t list[4096];
                    if (tc->topk > 0) {
                        for (int64_t i = 0; i < tc->topk; ++i) {
                            const int32_t t = topk[r * tc->topk + i];
                            if (t >= 0 && t <= pos)
                                list[nkeys++] = t;
                        }
                    } else if (c > 0) {
                        for (int64_t t = 0; t <= pos; ++t)
                            list[nkeys++] = t;
                    }
                    for (int64_t i = 0; i < nkeys; ++i) {
                        const float *k = keys + (kbase + list[i]) * D;
                        double dot = 0.0;
                        for (int64_t d = 0; d < D; ++d)
                            dot += (double)qrow[d] * k[d];
                        p[i] = dot * plan.desc.softmax_scale;
                        mx = p[i] > mx ? p[i] : mx;
                    }
                    double z = 0.0;
                    if (nkeys > 0 && tc->sinks)
                        mx = sinks[h] > mx ? sinks[h] : mx;
                    for (int64_t i = 0; i < nkeys; ++i) {
                        p[i] = exp(p[i] - mx);
                        z += p[i];
                    }
                    if (nkeys > 0 && tc->sinks)
                        z += exp(sinks[h] - mx);
                    const double ref_lse = nkeys > 0 ? mx + log(z) : -INFINITY;
                    const float got_lse = lse[r * H + h];
                    if (nkeys == 0) {
                        if (!(isinf(got_lse) && got_lse < 0))
                            ++bad_special;
                    } else {
                        const double e = fabs(got_lse - ref_lse);
                        max_lse_err = e > max_lse_err ? e : max_lse_err;
                    }
                    for (int64_t v = 0; v < L; ++v) {
                        double ref = 0.0, spv = 0.0;
                        for (int64_t i = 0; i < nkeys; ++i) {
                            ref += p[i] * keys[(kbase + list[i]) * D + v];
                            spv += p[i] * fabs(keys[(kbase + list[i]) * D + v]);
                        }
                        ref = nkeys > 0 ? ref / z : 0.0;
                        spv = nkeys > 0 ? spv / z : 0.0;
                        const int64_t off = r * to.stride[0] + h * to.stride[1] + v;
                        const float got = tc->odt == MLA_DTYPE_F32
                                              ? ((float *)obuf)[off]
                                              : mla_bf16_to_f32(((uint16_t *)obuf)[off]);
                        if (nkeys == 0 && got != 0.0f)
                            ++bad_special;
                        /* bf16 o: the kernel may round P to bf16 before P @ V (as
                         * FlashMLA; cpu/attention.c), 2^-9 of sum p |v| at most,
                         * scaled here to the tolerance's units */
                        const double pv = tc->odt == MLA_DTYPE_BF16 ? spv / 256.0 / 8e-3 : 0.0;
                        const double e = fabs(got - ref) / (fabs(ref) + 0.05 + pv);
                        if (!(e <= 1e30))
                            max_err = INFINITY;
                        max_err = e > max_err ? e : max_err;
                    }
                }
            }
            kbase += c;
        }
        const double tol = tc->odt == MLA_DTYPE_BF16 ? 8e-3 : 2e-4;
        const int ok = max_err <= tol && max_lse_err <= 1e-4 && bad_special == 0;
        printf("%-40s %s max rel err %.3g (tol %.1g), lse err %.3g, special %d: %s\n", tc->name,
               pass ? "api   " : "direct", max_err, tol, max_lse_err, bad_special,
               ok ? "ok" : "FAIL");
        CHECK(ok);
        free(p);
    }
    free(scratch);
    free(ws);
    free(obuf);
    free(lse);
    free(topk);
    free(qv);
    free(qbuf);
    free(keys);
    free(perm);
    free(bt);
    free(slots);
    free(kp);
    free(kn);
    free(cache);
}

int main(void)
{
    const mla_dtype BF = MLA_DTYPE_BF16, F32 = MLA_DTYPE_F32, E4 = MLA_DTYPE_FP8_E4M3FN,
                    UZ = MLA_DTYPE_FP8_E4M3FNUZ;
    const tcase cases[] = {
        {"dense bf16 decode H16",
         16,
         512,
         64,
         64,
         MLA_CACHE_NORMAL,
         BF,
         BF,
         F32,
         1,
         3,
         {100, 1, 0, 0},
         {1, 1, 1, 0},
         1,
         0,
         0,
         0,
         0,
         0,
         0},
        {"dense bf16 split 3 (one empty)",
         16,
         512,
         64,
         16,
         MLA_CACHE_NORMAL,
         BF,
         BF,
         F32,
         1,
         2,
         {130, 70, 0},
         {1, 1, 0},
         3,
         64,
         0,
         0,
         0,
         0,
         0},
        {"dense next_n 3 H5 f32 q, bf16 o strided",
         5,
         64,
         16,
         16,
         MLA_CACHE_NORMAL,
         BF,
         F32,
         BF,
         1,
         3,
         {40, 3, 0, 0},
         {3, 3, 3, 0},
         1,
         0,
         0,
         0,
         1,
         0,
         0},
        {"dense next_n 2 H5 split 2 sinks",
         5,
         64,
         16,
         16,
         MLA_CACHE_NORMAL,
         BF,
         BF,
         F32,
         1,
         2,
         {150, 66, 0},
         {2, 2, 0},
         2,
         128,
         0,
         1,
         1,
         0,
         0},
        {"prefill 20 rows H16 (3 tasks) split 2",
         16,
         128,
         32,
         32,
         MLA_CACHE_NORMAL,
         BF,
         BF,
         F32,
         1,
         2,
         {90, 20, 0},
         {20, 20, 0},
         2,
         64,
         0,
         0,
         0,
         0,
         0},
        {"H128 next_n 2 sinks",
         128,
         128,
         64,
         64,
         MLA_CACHE_NORMAL,
         BF,
         BF,
         F32,
         1,
         2,
         {77, 200, 0},
         {2, 2, 0},
         1,
         0,
         0,
         1,
         0,
         0,
         0},
        {"fp8 NORMAL e4m3fn",
         16,
         512,
         64,
         64,
         MLA_CACHE_NORMAL,
         E4,
         BF,
         F32,
         1,
         2,
         {100, 65, 0},
         {1, 1, 0},
         1,
         0,
         0,
         0,
         0,
         0,
         0},
        {"fp8 NORMAL e4m3fnuz fp8 q",
         16,
         64,
         32,
         16,
         MLA_CACHE_NORMAL,
         UZ,
         E4,
         F32,
         1,
         2,
         {100, 65, 0},
         {1, 1, 0},
         1,
         0,
         0,
         0,
         0,
         0,
         0},
        {"SHUFFLED bf16",
         16,
         512,
         64,
         32,
         MLA_CACHE_SHUFFLED,
         BF,
         BF,
         F32,
         1,
         2,
         {100, 40, 0},
         {1, 2, 0},
         1,
         0,
         0,
         0,
         0,
         0,
         0},
        {"SHUFFLED fp8",
         24,
         128,
         64,
         16,
         MLA_CACHE_SHUFFLED,
         E4,
         BF,
         F32,
         1,
         2,
         {100, 40, 0},
         {1, 2, 0},
         2,
         64,
         0,
         0,
         0,
         0,
         0},
        {"FP8_SCALED",
         16,
         512,
         64,
         64,
         MLA_CACHE_FP8_SCALED,
         E4,
         BF,
         F32,
         1,
         2,
         {100, 40, 0},
         {1, 1, 0},
         1,
         0,
         0,
         0,
         0,
         0,
         0},
        {"contiguous",
         16,
         128,
         64,
         0,
         MLA_CACHE_NORMAL,
         BF,
         BF,
         F32,
         0,
         3,
         {100, 40, 0, 0},
         {1, 2, 1, 0},
         1,
         0,
         0,
         0,
         0,
         0,
         0},
        {"sparse topk 40 H20 next_n 2",
         20,
         512,
         64,
         64,
         MLA_CACHE_NORMAL,
         BF,
         BF,
         F32,
         1,
         3,
         {300, 10, 0, 0},
         {2, 2, 2, 0},
         1,
         0,
         40,
         0,
         0,
         0,
         0},
        {"sparse topk 150 split 3 sinks",
         16,
         128,
         64,
         16,
         MLA_CACHE_FP8_SCALED,
         E4,
         BF,
         BF,
         1,
         2,
         {300, 70, 0},
         {1, 2, 0},
         3,
         64,
         150,
         1,
         1,
         0,
         0},
        {"sparse topk 64 H128",
         128,
         64,
         64,
         16,
         MLA_CACHE_NORMAL,
         BF,
         BF,
         F32,
         1,
         1,
         {90, 0},
         {1, 0},
         1,
         0,
         64,
         0,
         0,
         0,
         0},
    };
    /* bf16 q, bf16 cache, bf16 o: vdpbf16ps for both products where the CPU has it */
    const tcase bf16_cases[] = {
        {"bf16 o decode H16 split 3",
         16,
         512,
         64,
         64,
         MLA_CACHE_NORMAL,
         BF,
         BF,
         BF,
         1,
         3,
         {300, 77, 0},
         {1, 1, 1},
         3,
         128,
         0,
         0,
         0,
         0,
         0},
        {"bf16 o next_n 2 H128 sinks",
         128,
         512,
         64,
         64,
         MLA_CACHE_NORMAL,
         BF,
         BF,
         BF,
         1,
         2,
         {150, 66},
         {2, 2},
         1,
         0,
         0,
         1,
         0,
         0,
         0},
        {"bf16 o SHUFFLED prefill H20",
         20,
         128,
         64,
         32,
         MLA_CACHE_SHUFFLED,
         BF,
         BF,
         BF,
         1,
         2,
         {90, 17},
         {9, 17},
         2,
         64,
         0,
         0,
         1,
         0,
         0},
        {"bf16 o sparse topk 100 H32",
         32,
         512,
         64,
         64,
         MLA_CACHE_NORMAL,
         BF,
         BF,
         BF,
         1,
         2,
         {300, 50},
         {2, 1},
         1,
         0,
         100,
         0,
         0,
         0,
         0},
        {"tiny keys bf16 o (fallback tiles)",
         16,
         512,
         64,
         64,
         MLA_CACHE_NORMAL,
         BF,
         BF,
         BF,
         1,
         2,
         {200, 70},
         {1, 2},
         1,
         0,
         0,
         0,
         0,
         0,
         1},
        {"tiny keys f32 o (fallback tiles)",
         32,
         128,
         64,
         16,
         MLA_CACHE_NORMAL,
         BF,
         BF,
         F32,
         1,
         1,
         {130},
         {1},
         2,
         128,
         0,
         0,
         0,
         0,
         1},
        {"bf16 o fp8 NORMAL H16",
         16,
         512,
         64,
         64,
         MLA_CACHE_NORMAL,
         E4,
         BF,
         BF,
         1,
         2,
         {200, 70},
         {1, 2},
         2,
         128,
         0,
         1,
         0,
         0,
         0},
        {"bf16 o fp8 SHUFFLED fnuz H40",
         40,
         128,
         64,
         16,
         MLA_CACHE_SHUFFLED,
         UZ,
         BF,
         BF,
         1,
         2,
         {100, 40},
         {1, 2},
         1,
         0,
         0,
         0,
         0,
         0,
         0},
        {"bf16 o FP8_SCALED H16",
         16,
         512,
         64,
         64,
         MLA_CACHE_FP8_SCALED,
         E4,
         BF,
         BF,
         1,
         2,
         {200, 70},
         {1, 2},
         2,
         128,
         0,
         1,
         0,
         0,
         0},
        {"bf16 o FP8_SCALED odd scales (fallback)",
         32,
         256,
         64,
         16,
         MLA_CACHE_FP8_SCALED,
         E4,
         BF,
         BF,
         1,
         2,
         {100, 40},
         {1, 2},
         1,
         0,
         0,
         0,
         0,
         0,
         1},
    };
    const tcase raw_cases[] = {
        {"raw fp8 codes e4m3fn NORMAL H32",
         32,
         128,
         64,
         16,
         MLA_CACHE_NORMAL,
         E4,
         BF,
         F32,
         1,
         2,
         {100, 65},
         {1, 1},
         1,
         0,
         0,
         0,
         0,
         1,
         0},
        {"raw fp8 codes e4m3fnuz NORMAL",
         16,
         128,
         64,
         16,
         MLA_CACHE_NORMAL,
         UZ,
         BF,
         F32,
         1,
         2,
         {100, 65},
         {1, 1},
         1,
         0,
         0,
         0,
         0,
         1,
         0},
        {"raw fp8 codes FP8_SCALED",
         16,
         256,
         64,
         16,
         MLA_CACHE_FP8_SCALED,
         E4,
         BF,
         F32,
         1,
         2,
         {100, 65},
         {1, 1},
         1,
         0,
         0,
         0,
         0,
         1,
         0},
    };
    /* avx512: the AMX tiles where the CPU has AMX-BF16, else the vdpbf16ps
     * scores where it has AVX512-BF16 (bf16 q and cache); avx512-noamx: the
     * vdpbf16ps scores on AMX CPUs too; avx512-nobf16: the FMA scores everywhere */
    static const char *isas[] = {"avx512", "avx512-noamx", "avx512-nobf16", "avx2", "generic"};
    for (int k = 0; k < 5; ++k) {
        setenv("MLA_CPU_ISA", isas[k], 1);
        mla_context *ctx = NULL;
        CHECK_STATUS(mla_context_create(MLA_BACKEND_CPU, NULL, &ctx), MLA_OK);
        if (!ctx)
            break;
        printf("-- %s\n", mla_context_device_name(ctx));
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i)
            run_case(ctx, &cases[i]);
        for (size_t i = 0; i < sizeof raw_cases / sizeof raw_cases[0]; ++i)
            run_case(ctx, &raw_cases[i]);
        for (size_t i = 0; i < sizeof bf16_cases / sizeof bf16_cases[0]; ++i)
            run_case(ctx, &bf16_cases[i]);
        mla_context_destroy(ctx);
    }
    return TEST_SUMMARY();
}
