/* The attention tests' fixture (tests/test_attention*.c): S = 3 sequences
 * over a bf16 NORMAL cache of NB blocks of 16 tokens on a host context,
 * random keys in every slot, a scattered block table, f32 q, o and lse. */
#ifndef MLA_TESTS_ATTENTION_FIXTURE_H
#define MLA_TESTS_ATTENTION_FIXTURE_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "mla/mla.h"
#include "tests/test_util.h"

enum { L = 128, R = 16, D = L + R, BS = 16, NB = 12, S = 3, MAXB = 4, TMAX = 16, HMAX = 4 };

static uint32_t rng_state = 0x2545F491u;

/* A value in [-scale, scale), from a 32-bit xorshift. */
static inline float rnd(float scale)
{
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 17, rng_state ^= rng_state << 5;
    return scale * ((float)(rng_state >> 8) / 8388608.0f - 1.0f);
}

static inline mla_tensor view(void *data, mla_dtype dt, int32_t ndim, const int64_t *shape)
{
    mla_tensor t;
    mla_tensor_init(&t, data, dt, MLA_MEMORY_HOST, ndim, shape);
    return t;
}

static inline int param_is(mla_context *ctx, const char *name)
{
    int ok = strcmp(mla_context_error_param(ctx), name) == 0;
    if (!ok)
        fprintf(stderr, "  error param '%s', expected '%s' (%s)\n", mla_context_error_param(ctx),
                name, mla_context_error_detail(ctx));
    return ok;
}

/* ------------------------------------------------------------ fixture */

/* S = 3 sequences over a bf16 NORMAL cache of NB blocks of 16 tokens. */
typedef struct fixture {
    mla_cache_desc cd;
    mla_attention_desc desc;
    int64_t T, H;
    uint8_t *cache;
    int32_t table[S * MAXB], lens[S], cu[S + 1], topk[TMAX * 8];
    float q[TMAX * HMAX * D], o[TMAX * HMAX * L], lse[TMAX * HMAX], sinks[HMAX];
    mla_tensor t_cache, t_q, t_table, t_lens, t_cu, t_topk, t_sinks, t_o, t_lse;
    mla_attention_args args;
} fixture;

/* Fills the cache (every slot of every block: random k rows), the block
 * table (scattered blocks), q, and the args for lens / cu rows. */
static inline void fx_init(fixture *f, mla_context *ctx, int64_t H, const int32_t *lens,
                           const int32_t *cu)
{
    memset(f, 0, sizeof *f);
    f->cd = (mla_cache_desc){MLA_CACHE_NORMAL, MLA_DTYPE_BF16, NB, BS, L, R, 1.0f};
    int64_t bb = 0;
    mla_cache_block_bytes(&f->cd, &bb);
    f->cache = calloc((size_t)(NB * bb), 1);
    f->t_cache = view(f->cache, MLA_DTYPE_U8, 2, (int64_t[]){NB, bb});
    static float kn[NB * BS * L], kp[NB * BS * R];
    static int32_t slots[NB * BS];
    for (int64_t i = 0; i < NB * BS; ++i) {
        slots[i] = (int32_t)i;
        for (int64_t d = 0; d < L; ++d)
            kn[i * L + d] = rnd(1.0f);
        for (int64_t d = 0; d < R; ++d)
            kp[i * R + d] = rnd(1.0f);
    }
    mla_tensor tkn = view(kn, MLA_DTYPE_F32, 2, (int64_t[]){NB * BS, L});
    mla_tensor tkp = view(kp, MLA_DTYPE_F32, 2, (int64_t[]){NB * BS, R});
    mla_tensor tsl = view(slots, MLA_DTYPE_I32, 1, (int64_t[]){NB * BS});
    CHECK_STATUS(mla_cache_write(ctx, &f->cd, &f->t_cache, &tkn, &tkp, &tsl), MLA_OK);
    for (int s = 0; s < S; ++s) {
        f->lens[s] = lens[s];
        f->cu[s] = cu[s];
        for (int b = 0; b < MAXB; ++b)
            f->table[s * MAXB + b] = (int32_t)((s * 5 + b * 7 + 3) % NB);
    }
    f->cu[S] = cu[S];
    f->T = cu[S];
    f->H = H;
    for (int64_t i = 0; i < f->T * H * D; ++i)
        f->q[i] = rnd(1.0f);
    for (int64_t h = 0; h < H; ++h)
        f->sinks[h] = rnd(2.0f);
    mla_model_config cfg;
    mla_model_config_preset("test-tiny", &cfg);
    cfg.heads = H;
    CHECK_STATUS(mla_attention_desc_default(&cfg, &f->cd, &f->desc), MLA_OK);
    f->desc.q_dtype = MLA_DTYPE_F32;
    f->t_q = view(f->q, MLA_DTYPE_F32, 3, (int64_t[]){f->T, H, D});
    f->t_table = view(f->table, MLA_DTYPE_I32, 2, (int64_t[]){S, MAXB});
    f->t_lens = view(f->lens, MLA_DTYPE_I32, 1, (int64_t[]){S});
    f->t_cu = view(f->cu, MLA_DTYPE_I32, 1, (int64_t[]){S + 1});
    f->t_sinks = view(f->sinks, MLA_DTYPE_F32, 1, (int64_t[]){H});
    f->t_o = view(f->o, MLA_DTYPE_F32, 3, (int64_t[]){f->T, H, L});
    f->t_lse = view(f->lse, MLA_DTYPE_F32, 2, (int64_t[]){f->T, H});
    f->args = (mla_attention_args){&f->t_q, &f->t_cache, &f->t_table, &f->t_lens, &f->t_cu, NULL,
                                   NULL,    NULL,        &f->t_o,     &f->t_lse,  NULL};
}

static inline void fx_free(fixture *f) { free(f->cache); }

/* Plans, runs with a workspace of the plan's size, destroys. */
static inline mla_status plan_and_run(mla_context *ctx, fixture *f)
{
    mla_attention_plan *plan = NULL;
    mla_status st = mla_attention_plan_create(ctx, &f->desc, &f->args, &plan);
    if (st != MLA_OK)
        return st;
    const int64_t wb = mla_attention_plan_workspace_bytes(plan);
    void *ws = NULL;
    mla_tensor tws;
    if (wb > 0) {
        mla_malloc(ctx, (size_t)wb, &ws);
        tws = view(ws, MLA_DTYPE_U8, 1, (int64_t[]){wb});
        f->args.workspace = &tws;
    }
    st = mla_attention_run(ctx, plan, &f->args);
    f->args.workspace = NULL;
    mla_free(ctx, ws);
    mla_attention_plan_destroy(plan);
    return st;
}

#endif
