/* The prepare-path benchmark (bench_prepare.h).
 *
 * Every row is one entry point on the model's shapes for T tokens:
 *   q_a_proj    mla_linear  x [T, hidden] @ q_a_proj^T [q_lora, hidden]           bf16 | fp8
 *   kv_a_proj   mla_linear  x [T, hidden] @ kv_a_proj_with_mqa^T [L + R, hidden]   bf16 | fp8
 *   q_b_proj    mla_linear  q_lat [T, q_lora] @ q_b_proj^T [H (nope + R), q_lora] bf16 | fp8
 *   absorb      mla_batched_gemm  x [H, T, nope] (view of q [T, H, nope + R]) @
 *               W_kc [H, nope, L] (view of kv_b_proj) -> y [H, T, L] (view of [T, H, L])
 *   qk_rmsnorm  mla_fused_qk_rmsnorm  q [T, q_lora], kv [T, L] (view of kv_lat [T, L + R])
 *   rope_q      mla_rope  q_pe [T, H, R] (view of q) -> the rope part of q_cat [T, H, L + R]
 *   rope_k      mla_rope  k_pe [T, R] (view of kv_lat) -> f32 [T, R] (what mla_prepare does)
 *   cache_write mla_cache_write NORMAL, bf16 | fp8 e4m3fn; k_nope, k_pe views of kv_lat
 *   rope_cache  mla_fused_rope_concat_cache NORMAL bf16 cache, bf16 q_cat
 *   prepare     mla_prepare, bf16 weights and activations, the plan's defaults
 * All activations are bf16. The fp8 weights are e4m3fn codes with one f32
 * scale per 128 x 128 block (DeepSeek's checkpoint format).
 *
 * Bytes moved are the fewest an implementation must move: each input read
 * once and each output written once (counts() has the exact formulas); the
 * ratios are to the ceilings measured in the same run (bench/ceilings.h).
 *
 * Method (/work/.library/device/METHOD.md): seeded random inputs, never
 * zeros; warm-up calls first; the median of the samples. A sample is a
 * batch of calls between two mla_context_synchronize, timed by
 * clock_gettime(MONOTONIC): on a device enough calls to last about 0.5 ms
 * (at most 64), on the host one call (a few for ops under 20 us).
 * Inputs rotate among several copies until the rotation touches more bytes
 * than the caches hold (the last-level cache on the host, L2 on a GPU), so
 * the weights come from memory as they would in a model. */
#define _POSIX_C_SOURCE 200809L

#include "bench/bench_prepare.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#if defined(MLA_HAVE_OPENMP)
#include <omp.h>
#endif

#define MIB ((int64_t)1 << 20)
#define MAX_INST 32
#define BLOCK_SIZE 64        /* cache block size (FlashMLA's) */
#define DEVICE_BATCH_S 5e-4  /* a device sample lasts at least about this long */
#define HOST_BATCH_S 2e-5    /* a host sample lasts at least about this long */
#define DEVICE_MAX_BATCH 64

/* ------------------------------------------------------------ the cases */

typedef enum kase {
    K_Q_A, K_Q_A_FP8, K_KV_A, K_KV_A_FP8, K_Q_B, K_Q_B_FP8, K_ABSORB, K_QK_NORM, K_ROPE_Q,
    K_ROPE_K, K_CACHE_BF16, K_CACHE_FP8, K_ROPE_CACHE, K_PREPARE, K_COUNT
} kase;

typedef struct case_info {
    const char *op, *api, *variant;
    int is_gemm, is_whole;
} case_info;

static const case_info cases[K_COUNT] = {
    [K_Q_A] = {"q_a_proj", "mla_linear", "bf16", 1, 0},
    [K_Q_A_FP8] = {"q_a_proj", "mla_linear", "fp8 block", 1, 0},
    [K_KV_A] = {"kv_a_proj", "mla_linear", "bf16", 1, 0},
    [K_KV_A_FP8] = {"kv_a_proj", "mla_linear", "fp8 block", 1, 0},
    [K_Q_B] = {"q_b_proj", "mla_linear", "bf16", 1, 0},
    [K_Q_B_FP8] = {"q_b_proj", "mla_linear", "fp8 block", 1, 0},
    [K_ABSORB] = {"absorb", "mla_batched_gemm", "bf16", 1, 0},
    [K_QK_NORM] = {"qk_rmsnorm", "mla_fused_qk_rmsnorm", "bf16", 0, 0},
    [K_ROPE_Q] = {"rope_q", "mla_rope", "bf16", 0, 0},
    [K_ROPE_K] = {"rope_k", "mla_rope", "bf16->f32", 0, 0},
    [K_CACHE_BF16] = {"cache_write", "mla_cache_write", "NORMAL bf16", 0, 0},
    [K_CACHE_FP8] = {"cache_write", "mla_cache_write", "NORMAL fp8", 0, 0},
    [K_ROPE_CACHE] = {"rope_cache", "mla_fused_rope_concat_cache", "NORMAL bf16", 0, 0},
    [K_PREPARE] = {"prepare", "mla_prepare", "bf16", 0, 1},
};

const char *bench_prepare_op_names(void)
{
    return "q_a_proj,kv_a_proj,q_b_proj,absorb,qk_rmsnorm,rope_q,rope_k,cache_write,rope_cache,"
           "prepare";
}

static int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

static int is_fp8_weight(kase k) { return k == K_Q_A_FP8 || k == K_KV_A_FP8 || k == K_Q_B_FP8; }

/* The linear rows' weight [N, K]. */
static void linear_shape(const mla_model_config *c, kase k, int64_t *N, int64_t *K)
{
    switch (k) {
    case K_Q_A: case K_Q_A_FP8: *N = c->q_lora; *K = c->hidden; break;
    case K_KV_A: case K_KV_A_FP8: *N = c->kv_lora + c->rope; *K = c->hidden; break;
    default: *N = c->heads * (c->nope + c->rope); *K = c->q_lora; break;
    }
}

/* Bytes each input read once + each output written once, and FLOPs.
 * Activations bf16 (2 bytes), positions and slots i64 (8), RoPE tables f32:
 * one cos row and one sin row of R/2 values per token (2 * T * R/2 * 4).
 * Hd hidden, H heads, Q q_lora, L kv_lora, R rope, n nope, qk = n + R.
 *   linear bf16  2TK + 2NK + 2TN                          FLOPs 2TNK
 *   linear fp8   2TK + NK + 4 ceil(N/128) ceil(K/128) + 2TN
 *   absorb       2HTn + 2HnL + 2HTL                        FLOPs 2HTnL
 *   qk_rmsnorm   2TQ + 2TL + 2(Q + L) + 2TQ + 2TL          FLOPs 4T(Q + L)
 *   rope_q       2THR + 8T + 4TR + 2THR                    FLOPs 6TH(R/2)
 *   rope_k       2TR + 8T + 4TR + 4TR (f32 out)            FLOPs 6T(R/2)
 *   cache bf16   2TL + 2TR + 8T + 2T(L + R)                FLOPs 0
 *   cache fp8    2TL + 2TR + 8T + T(L + R)                 FLOPs T(L + R) (one division)
 *   rope_cache   2THL + 2THR + 2TL + 2TR + 8T (positions, shared by q and k)
 *                + 8T (slots) + 4TR + 2TH(L + R) + 2T(L + R)   FLOPs 6T(H + 1)(R/2)
 *   prepare      2T Hd + 2Q Hd + 2(L + R) Hd + 2HqkQ + 2HnL + 2(Q + L) + 8T + 8T + 4TR
 *                + 2TH(L + R) + 2T(L + R)
 *                FLOPs 2T Hd (Q + L + R) + 2TQHqk + 2THnL + 4T(Q + L) + 6T(H + 1)(R/2)
 * (the whole prepare's intermediates are not counted: a fused implementation
 * keeps them on chip). */
static void counts(const mla_model_config *c, kase k, int64_t T, int64_t *bytes,
                   int64_t *wbytes, double *flops)
{
    const int64_t Hd = c->hidden, H = c->heads, Q = c->q_lora, L = c->kv_lora, R = c->rope,
                  n = c->nope, qk = n + R, table = 2 * T * (R / 2) * 4;
    int64_t b = 0, w = 0;
    double f = 0.0;
    switch (k) {
    case K_Q_A: case K_Q_A_FP8: case K_KV_A: case K_KV_A_FP8: case K_Q_B: case K_Q_B_FP8: {
        int64_t N, K;
        linear_shape(c, k, &N, &K);
        w = is_fp8_weight(k) ? N * K + 4 * cdiv(N, 128) * cdiv(K, 128) : 2 * N * K;
        b = 2 * T * K + w + 2 * T * N;
        f = 2.0 * (double)T * (double)N * (double)K;
        break;
    }
    case K_ABSORB:
        w = 2 * H * n * L;
        b = 2 * H * T * n + w + 2 * H * T * L;
        f = 2.0 * (double)H * (double)T * (double)n * (double)L;
        break;
    case K_QK_NORM:
        w = 2 * (Q + L);
        b = 2 * T * Q + 2 * T * L + w + 2 * T * Q + 2 * T * L;
        f = 4.0 * (double)T * (double)(Q + L);
        break;
    case K_ROPE_Q:
        b = 2 * T * H * R + 8 * T + table + 2 * T * H * R;
        f = 6.0 * (double)T * (double)H * (double)(R / 2);
        break;
    case K_ROPE_K:
        b = 2 * T * R + 8 * T + table + 4 * T * R;
        f = 6.0 * (double)T * (double)(R / 2);
        break;
    case K_CACHE_BF16:
        b = 2 * T * L + 2 * T * R + 8 * T + 2 * T * (L + R);
        break;
    case K_CACHE_FP8:
        b = 2 * T * L + 2 * T * R + 8 * T + T * (L + R);
        f = (double)T * (double)(L + R);
        break;
    case K_ROPE_CACHE:
        b = 2 * T * H * L + 2 * T * H * R + 2 * T * L + 2 * T * R + 8 * T + 8 * T + table +
            2 * T * H * (L + R) + 2 * T * (L + R);
        f = 6.0 * (double)T * (double)(H + 1) * (double)(R / 2);
        break;
    case K_PREPARE: {
        w = 2 * Q * Hd + 2 * (L + R) * Hd + 2 * H * qk * Q + 2 * H * n * L;
        b = 2 * T * Hd + w + 2 * (Q + L) + 8 * T + 8 * T + table + 2 * T * H * (L + R) +
            2 * T * (L + R);
        f = 2.0 * (double)T * (double)Hd * (double)(Q + L + R) +
            2.0 * (double)T * (double)Q * (double)(H * qk) +
            2.0 * (double)T * (double)H * (double)n * (double)L + 4.0 * (double)T * (double)(Q + L) +
            6.0 * (double)T * (double)(H + 1) * (double)(R / 2);
        break;
    }
    default: break;
    }
    *bytes = b;
    *wbytes = w;
    *flops = f;
}

static void row_shape(const mla_model_config *c, kase k, char *buf, size_t len)
{
    const long long H = c->heads, L = c->kv_lora, R = c->rope, n = c->nope;
    int64_t N, K;
    switch (k) {
    case K_Q_A: case K_Q_A_FP8: case K_KV_A: case K_KV_A_FP8: case K_Q_B: case K_Q_B_FP8:
        linear_shape(c, k, &N, &K);
        snprintf(buf, len, "W [%lld, %lld]", (long long)N, (long long)K);
        break;
    case K_ABSORB: snprintf(buf, len, "W_kc [%lld, %lld, %lld]", H, n, L); break;
    case K_QK_NORM:
        snprintf(buf, len, "[T, %lld] + [T, %lld]", (long long)c->q_lora, L);
        break;
    case K_ROPE_Q: snprintf(buf, len, "q_pe [T, %lld, %lld]", H, R); break;
    case K_ROPE_K: snprintf(buf, len, "k_pe [T, %lld]", R); break;
    case K_CACHE_BF16: case K_CACHE_FP8: snprintf(buf, len, "rows [T, %lld]", L + R); break;
    case K_ROPE_CACHE: snprintf(buf, len, "q_cat [T, %lld, %lld]", H, L + R); break;
    case K_PREPARE: snprintf(buf, len, "%s", c->name); break;
    default: buf[0] = '\0'; break;
    }
}

/* ------------------------------------------------------------- the run */

typedef struct pool_entry {
    mla_dtype dtype;
    bench_fill kind;
    void *p;
    int64_t bytes;
} pool_entry;

typedef struct bp_run {
    mla_context *ctx;
    const bench_prepare_options *o;
    mla_model_config cfg;
    mla_memory mem;
    int host;
    pool_entry pool[16];
    int npool;
    void *cos_mem, *sin_mem;
    mla_tensor cos, sin;
    int64_t P; /* table rows */
    int64_t rotate_bytes;
    int threads; /* host: the context's threads, for cpu% */
    bench_rng rng;
} bp_run;

/* Random host data of a dtype and kind, at least bytes long: generated once
 * per (dtype, kind) and reused by every row. */
static const void *pool_get(bp_run *r, mla_dtype dt, bench_fill kind, int64_t bytes)
{
    pool_entry *e = NULL;
    for (int i = 0; i < r->npool; ++i)
        if (r->pool[i].dtype == dt && r->pool[i].kind == kind)
            e = &r->pool[i];
    if (!e) {
        if (r->npool == (int)(sizeof r->pool / sizeof r->pool[0]))
            return NULL;
        e = &r->pool[r->npool++];
        e->dtype = dt;
        e->kind = kind;
        e->p = NULL;
        e->bytes = 0;
    }
    if (e->bytes < bytes) {
        const int64_t es = (int64_t)mla_dtype_size(dt);
        int64_t want = bytes + 4096; /* whole elements */
        void *p = realloc(e->p, (size_t)want);
        if (!p)
            return NULL;
        e->p = p;
        e->bytes = want;
        bench_rng g;
        bench_rng_seed(&g, r->o->seed ^ ((uint64_t)dt << 8 | (uint64_t)kind) * 0x9E3779B97F4A7C15ull);
        bench_fill_host(&g, e->p, dt, want / es, kind);
    }
    return e->p;
}

/* Tensor slots of a case. Each holds one tensor per instance. */
enum {
    S_X, S_W, S_WSCALE, S_Y, S_Q, S_KV, S_ABS, S_QCAT, S_CACHE, S_POS, S_SLOTS, S_QW, S_KVW,
    S_QOUT, S_KVOUT, S_KROT, S_WQA, S_WKVA, S_WQB, S_WKVB, S_WORK,
    /* views */
    S_V_QNOPE, S_V_WKC, S_V_ABS, S_V_KNOPE, S_V_KPE, S_V_QPE, S_V_QCAT_PE, S_V_Q2D,
    S_COUNT
};

typedef struct bp_set {
    int n;
    mla_tensor t[S_COUNT][MAX_INST];
    void *own[S_COUNT][MAX_INST];
    void *shared[4];
    int nshared;
    mla_cache_desc cd;
    mla_plan *plan;
    mla_layer_weights lw[MAX_INST];
} bp_set;

static mla_status slot_alloc(bp_run *r, bp_set *s, int slot, mla_dtype dt, int32_t ndim,
                             const int64_t *shape, bench_fill kind)
{
    int64_t numel = 1;
    for (int32_t d = 0; d < ndim; ++d)
        numel *= shape[d];
    const int64_t bytes = numel * (int64_t)mla_dtype_size(dt);
    const void *h = pool_get(r, dt, kind, bytes);
    if (!h)
        return MLA_ERR_OUT_OF_MEMORY;
    for (int i = 0; i < s->n; ++i) {
        void *p = NULL;
        MLA_BENCH_TRY(mla_malloc(r->ctx, (size_t)bytes, &p));
        s->own[slot][i] = p;
        MLA_BENCH_TRY(mla_memcpy(r->ctx, p, h, (size_t)bytes, MLA_COPY_HOST_TO_CONTEXT));
        MLA_BENCH_TRY(mla_tensor_init(&s->t[slot][i], p, dt, r->mem, ndim, shape));
    }
    return MLA_OK;
}

/* One allocation shared by every instance, filled from host data. */
static mla_status slot_shared(bp_run *r, bp_set *s, int slot, mla_dtype dt, int32_t ndim,
                              const int64_t *shape, const void *host)
{
    int64_t numel = 1;
    for (int32_t d = 0; d < ndim; ++d)
        numel *= shape[d];
    const int64_t bytes = numel * (int64_t)mla_dtype_size(dt);
    void *p = NULL;
    MLA_BENCH_TRY(mla_malloc(r->ctx, (size_t)bytes, &p));
    s->shared[s->nshared++] = p;
    MLA_BENCH_TRY(mla_memcpy(r->ctx, p, host, (size_t)bytes, MLA_COPY_HOST_TO_CONTEXT));
    for (int i = 0; i < s->n; ++i)
        MLA_BENCH_TRY(mla_tensor_init(&s->t[slot][i], p, dt, r->mem, ndim, shape));
    return MLA_OK;
}

/* A strided view into another slot, element offset in units of dt. */
static void slot_view(bp_run *r, bp_set *s, int slot, int base, int64_t elem_off, mla_dtype dt,
                      int32_t ndim, const int64_t *shape, const int64_t *stride)
{
    for (int i = 0; i < s->n; ++i) {
        mla_tensor *t = &s->t[slot][i];
        memset(t, 0, sizeof *t);
        t->data = (uint8_t *)s->t[base][i].data + elem_off * (int64_t)mla_dtype_size(dt);
        t->dtype = dt;
        t->memory = r->mem;
        t->ndim = ndim;
        for (int32_t d = 0; d < ndim; ++d) {
            t->shape[d] = shape[d];
            t->stride[d] = stride[d];
        }
    }
}

static void set_free(bp_run *r, bp_set *s)
{
    for (int k = 0; k < S_COUNT; ++k)
        for (int i = 0; i < MAX_INST; ++i)
            if (s->own[k][i])
                mla_free(r->ctx, s->own[k][i]);
    for (int i = 0; i < s->nshared; ++i)
        mla_free(r->ctx, s->shared[i]);
    mla_plan_destroy(s->plan);
    free(s);
}

/* positions p0 .. p0 + T - 1 and slots spread over random distinct blocks
 * of a cache with twice the blocks the T tokens need. */
static mla_status alloc_positions_slots(bp_run *r, bp_set *s, int64_t T, int need_slots)
{
    int64_t *pos = malloc((size_t)(T > 0 ? T : 1) * sizeof *pos);
    if (!pos)
        return MLA_ERR_OUT_OF_MEMORY;
    const int64_t p0 = r->P > T ? (int64_t)bench_rng_below(&r->rng, (uint64_t)(r->P - T)) : 0;
    for (int64_t t = 0; t < T; ++t)
        pos[t] = (p0 + t) % r->P;
    mla_status st = slot_shared(r, s, S_POS, MLA_DTYPE_I64, 1, (int64_t[]){T}, pos);
    free(pos);
    if (st != MLA_OK || !need_slots)
        return st;
    const int64_t used = cdiv(T, BLOCK_SIZE), nb = 2 * used;
    int64_t *perm = malloc((size_t)nb * sizeof *perm), *slots = malloc((size_t)T * sizeof *slots);
    if (!perm || !slots) {
        free(perm);
        free(slots);
        return MLA_ERR_OUT_OF_MEMORY;
    }
    for (int64_t b = 0; b < nb; ++b)
        perm[b] = b;
    for (int64_t b = nb - 1; b > 0; --b) {
        int64_t j = (int64_t)bench_rng_below(&r->rng, (uint64_t)(b + 1)), tmp = perm[b];
        perm[b] = perm[j];
        perm[j] = tmp;
    }
    for (int64_t t = 0; t < T; ++t)
        slots[t] = perm[t / BLOCK_SIZE] * BLOCK_SIZE + t % BLOCK_SIZE;
    s->cd.num_blocks = nb;
    st = slot_shared(r, s, S_SLOTS, MLA_DTYPE_I64, 1, (int64_t[]){T}, slots);
    free(perm);
    free(slots);
    return st;
}

static mla_status alloc_cache(bp_run *r, bp_set *s, mla_dtype dt)
{
    s->cd.layout = MLA_CACHE_NORMAL;
    s->cd.dtype = dt;
    s->cd.block_size = BLOCK_SIZE;
    s->cd.kv_lora = r->cfg.kv_lora;
    s->cd.rope = r->cfg.rope;
    s->cd.k_scale = dt == MLA_DTYPE_BF16 ? 1.0f : 0.0625f;
    int64_t bb = 0;
    MLA_BENCH_TRY(mla_cache_block_bytes(&s->cd, &bb));
    return slot_alloc(r, s, S_CACHE, MLA_DTYPE_U8, 2, (int64_t[]){s->cd.num_blocks, bb},
                      BENCH_FILL_BYTES);
}

/* kv_lat [T, L + R] and its k_nope / k_pe views. */
static mla_status alloc_kv(bp_run *r, bp_set *s, int64_t T)
{
    const int64_t L = r->cfg.kv_lora, R = r->cfg.rope, D = L + R;
    MLA_BENCH_TRY(slot_alloc(r, s, S_KV, MLA_DTYPE_BF16, 2, (int64_t[]){T, D}, BENCH_FILL_ACT));
    slot_view(r, s, S_V_KNOPE, S_KV, 0, MLA_DTYPE_BF16, 2, (int64_t[]){T, L}, (int64_t[]){D, 1});
    slot_view(r, s, S_V_KPE, S_KV, L, MLA_DTYPE_BF16, 2, (int64_t[]){T, R}, (int64_t[]){D, 1});
    return MLA_OK;
}

/* q [T, H, nope + R] and its q_nope [H, T, nope] / q_pe [T, H, R] views. */
static mla_status alloc_q(bp_run *r, bp_set *s, int64_t T)
{
    const int64_t H = r->cfg.heads, n = r->cfg.nope, R = r->cfg.rope, qk = n + R;
    MLA_BENCH_TRY(slot_alloc(r, s, S_Q, MLA_DTYPE_BF16, 3, (int64_t[]){T, H, qk}, BENCH_FILL_ACT));
    slot_view(r, s, S_V_QNOPE, S_Q, 0, MLA_DTYPE_BF16, 3, (int64_t[]){H, T, n},
              (int64_t[]){qk, H * qk, 1});
    slot_view(r, s, S_V_QPE, S_Q, n, MLA_DTYPE_BF16, 3, (int64_t[]){T, H, R},
              (int64_t[]){H * qk, qk, 1});
    return MLA_OK;
}

static mla_status alloc_qcat(bp_run *r, bp_set *s, int64_t T)
{
    const int64_t H = r->cfg.heads, L = r->cfg.kv_lora, R = r->cfg.rope, D = L + R;
    MLA_BENCH_TRY(
        slot_alloc(r, s, S_QCAT, MLA_DTYPE_BF16, 3, (int64_t[]){T, H, D}, BENCH_FILL_BYTES));
    slot_view(r, s, S_V_QCAT_PE, S_QCAT, L, MLA_DTYPE_BF16, 3, (int64_t[]){T, H, R},
              (int64_t[]){H * D, D, 1});
    return MLA_OK;
}

/* kv_b_proj [H (nope + v), L] and its W_kc [H, nope, L] view. */
static mla_status alloc_kv_b(bp_run *r, bp_set *s)
{
    const int64_t H = r->cfg.heads, n = r->cfg.nope, v = r->cfg.v, L = r->cfg.kv_lora;
    MLA_BENCH_TRY(slot_alloc(r, s, S_WKVB, MLA_DTYPE_BF16, 2, (int64_t[]){H * (n + v), L},
                             BENCH_FILL_WEIGHT));
    slot_view(r, s, S_V_WKC, S_WKVB, 0, MLA_DTYPE_BF16, 3, (int64_t[]){H, n, L},
              (int64_t[]){(n + v) * L, L, 1});
    return MLA_OK;
}

static mla_status setup(bp_run *r, bp_set *s, kase k, int64_t T)
{
    const mla_model_config *c = &r->cfg;
    const int64_t H = c->heads, L = c->kv_lora, R = c->rope, Q = c->q_lora;
    switch (k) {
    case K_Q_A: case K_Q_A_FP8: case K_KV_A: case K_KV_A_FP8: case K_Q_B: case K_Q_B_FP8: {
        int64_t N, K;
        linear_shape(c, k, &N, &K);
        MLA_BENCH_TRY(slot_alloc(r, s, S_X, MLA_DTYPE_BF16, 2, (int64_t[]){T, K}, BENCH_FILL_ACT));
        if (is_fp8_weight(k)) {
            MLA_BENCH_TRY(slot_alloc(r, s, S_W, MLA_DTYPE_FP8_E4M3FN, 2, (int64_t[]){N, K},
                                     BENCH_FILL_WEIGHT));
            MLA_BENCH_TRY(slot_alloc(r, s, S_WSCALE, MLA_DTYPE_F32, 2,
                                     (int64_t[]){cdiv(N, 128), cdiv(K, 128)}, BENCH_FILL_SCALE));
        } else {
            MLA_BENCH_TRY(
                slot_alloc(r, s, S_W, MLA_DTYPE_BF16, 2, (int64_t[]){N, K}, BENCH_FILL_WEIGHT));
        }
        return slot_alloc(r, s, S_Y, MLA_DTYPE_BF16, 2, (int64_t[]){T, N}, BENCH_FILL_BYTES);
    }
    case K_ABSORB:
        MLA_BENCH_TRY(alloc_q(r, s, T));
        MLA_BENCH_TRY(alloc_kv_b(r, s));
        MLA_BENCH_TRY(
            slot_alloc(r, s, S_ABS, MLA_DTYPE_BF16, 3, (int64_t[]){T, H, L}, BENCH_FILL_BYTES));
        slot_view(r, s, S_V_ABS, S_ABS, 0, MLA_DTYPE_BF16, 3, (int64_t[]){H, T, L},
                  (int64_t[]){L, H * L, 1});
        return MLA_OK;
    case K_QK_NORM:
        MLA_BENCH_TRY(
            slot_alloc(r, s, S_X, MLA_DTYPE_BF16, 2, (int64_t[]){T, Q}, BENCH_FILL_ACT));
        MLA_BENCH_TRY(alloc_kv(r, s, T));
        MLA_BENCH_TRY(slot_alloc(r, s, S_QW, MLA_DTYPE_BF16, 1, (int64_t[]){Q}, BENCH_FILL_NORM_W));
        MLA_BENCH_TRY(
            slot_alloc(r, s, S_KVW, MLA_DTYPE_BF16, 1, (int64_t[]){L}, BENCH_FILL_NORM_W));
        MLA_BENCH_TRY(
            slot_alloc(r, s, S_QOUT, MLA_DTYPE_BF16, 2, (int64_t[]){T, Q}, BENCH_FILL_BYTES));
        return slot_alloc(r, s, S_KVOUT, MLA_DTYPE_BF16, 2, (int64_t[]){T, L}, BENCH_FILL_BYTES);
    case K_ROPE_Q:
        MLA_BENCH_TRY(alloc_q(r, s, T));
        MLA_BENCH_TRY(alloc_qcat(r, s, T));
        return alloc_positions_slots(r, s, T, 0);
    case K_ROPE_K:
        MLA_BENCH_TRY(alloc_kv(r, s, T));
        MLA_BENCH_TRY(
            slot_alloc(r, s, S_KROT, MLA_DTYPE_F32, 2, (int64_t[]){T, R}, BENCH_FILL_BYTES));
        return alloc_positions_slots(r, s, T, 0);
    case K_CACHE_BF16:
    case K_CACHE_FP8:
        MLA_BENCH_TRY(alloc_kv(r, s, T));
        MLA_BENCH_TRY(alloc_positions_slots(r, s, T, 1));
        return alloc_cache(r, s, k == K_CACHE_BF16 ? MLA_DTYPE_BF16 : MLA_DTYPE_FP8_E4M3FN);
    case K_ROPE_CACHE:
        MLA_BENCH_TRY(alloc_q(r, s, T));
        MLA_BENCH_TRY(alloc_kv(r, s, T));
        MLA_BENCH_TRY(
            slot_alloc(r, s, S_ABS, MLA_DTYPE_BF16, 3, (int64_t[]){T, H, L}, BENCH_FILL_ACT));
        MLA_BENCH_TRY(alloc_qcat(r, s, T));
        MLA_BENCH_TRY(alloc_positions_slots(r, s, T, 1));
        return alloc_cache(r, s, MLA_DTYPE_BF16);
    case K_PREPARE: {
        mla_plan_options po;
        mla_plan_options_default(mla_context_target(r->ctx), &po);
        MLA_BENCH_TRY(mla_plan_create(c, &po, &s->plan));
        const int64_t Hd = c->hidden, qk = c->nope + R;
        MLA_BENCH_TRY(slot_alloc(r, s, S_X, MLA_DTYPE_BF16, 2, (int64_t[]){T, Hd}, BENCH_FILL_ACT));
        if (Q) {
            MLA_BENCH_TRY(slot_alloc(r, s, S_WQA, MLA_DTYPE_BF16, 2, (int64_t[]){Q, Hd},
                                     BENCH_FILL_WEIGHT));
            MLA_BENCH_TRY(
                slot_alloc(r, s, S_QW, MLA_DTYPE_BF16, 1, (int64_t[]){Q}, BENCH_FILL_NORM_W));
        }
        MLA_BENCH_TRY(slot_alloc(r, s, S_WQB, MLA_DTYPE_BF16, 2,
                                 (int64_t[]){H * qk, Q ? Q : Hd}, BENCH_FILL_WEIGHT));
        MLA_BENCH_TRY(slot_alloc(r, s, S_WKVA, MLA_DTYPE_BF16, 2, (int64_t[]){L + R, Hd},
                                 BENCH_FILL_WEIGHT));
        MLA_BENCH_TRY(
            slot_alloc(r, s, S_KVW, MLA_DTYPE_BF16, 1, (int64_t[]){L}, BENCH_FILL_NORM_W));
        MLA_BENCH_TRY(alloc_kv_b(r, s));
        MLA_BENCH_TRY(alloc_qcat(r, s, T));
        MLA_BENCH_TRY(alloc_positions_slots(r, s, T, 1));
        const mla_plan_options *pl = mla_plan_options_get(s->plan);
        MLA_BENCH_TRY(alloc_cache(r, s, pl->cache_dtype));
        int64_t wsb = 0;
        MLA_BENCH_TRY(mla_prepare_workspace_bytes(s->plan, T, MLA_DTYPE_BF16, &wsb));
        MLA_BENCH_TRY(slot_alloc(r, s, S_WORK, MLA_DTYPE_U8, 1, (int64_t[]){wsb > 0 ? wsb : 1},
                                 BENCH_FILL_BYTES));
        for (int i = 0; i < s->n; ++i) {
            mla_layer_weights *w = &s->lw[i];
            memset(w, 0, sizeof *w);
            if (Q) {
                w->q_a_proj.w = s->t[S_WQA][i];
                w->q_a_layernorm = s->t[S_QW][i];
            }
            w->q_b_proj.w = s->t[S_WQB][i];
            w->kv_a_proj_with_mqa.w = s->t[S_WKVA][i];
            w->kv_a_layernorm = s->t[S_KVW][i];
            w->kv_b_proj.w = s->t[S_WKVB][i];
        }
        return MLA_OK;
    }
    default: return MLA_ERR_INVALID_ARGUMENT;
    }
}

static mla_status run_case(bp_run *r, bp_set *s, kase k, int i)
{
    mla_context *ctx = r->ctx;
    mla_tensor(*t)[MAX_INST] = s->t;
    const float eps = r->cfg.rms_eps;
    switch (k) {
    case K_Q_A: case K_KV_A: case K_Q_B:
        return mla_linear(ctx, &t[S_X][i], &t[S_W][i], NULL, &t[S_Y][i]);
    case K_Q_A_FP8: case K_KV_A_FP8: case K_Q_B_FP8:
        return mla_linear(ctx, &t[S_X][i], &t[S_W][i], &t[S_WSCALE][i], &t[S_Y][i]);
    case K_ABSORB:
        return mla_batched_gemm(ctx, &t[S_V_QNOPE][i], &t[S_V_WKC][i], 1.0f, &t[S_V_ABS][i]);
    case K_QK_NORM:
        return mla_fused_qk_rmsnorm(ctx, &t[S_X][i], &t[S_QW][i], eps, &t[S_V_KNOPE][i],
                                    &t[S_KVW][i], eps, &t[S_QOUT][i], NULL, &t[S_KVOUT][i]);
    case K_ROPE_Q:
        return mla_rope(ctx, &r->cos, &r->sin, &t[S_POS][i], &t[S_V_QPE][i], &t[S_V_QCAT_PE][i],
                        MLA_ROPE_INTERLEAVED);
    case K_ROPE_K:
        return mla_rope(ctx, &r->cos, &r->sin, &t[S_POS][i], &t[S_V_KPE][i], &t[S_KROT][i],
                        MLA_ROPE_INTERLEAVED);
    case K_CACHE_BF16: case K_CACHE_FP8:
        return mla_cache_write(ctx, &s->cd, &t[S_CACHE][i], &t[S_V_KNOPE][i], &t[S_V_KPE][i],
                               &t[S_SLOTS][i]);
    case K_ROPE_CACHE: {
        mla_rope_cache_args a = {&r->cos, &r->sin, MLA_ROPE_INTERLEAVED, &t[S_ABS][i],
                                 &t[S_V_QPE][i], &t[S_POS][i], &t[S_V_KNOPE][i], &t[S_V_KPE][i],
                                 &t[S_POS][i], &t[S_SLOTS][i], &s->cd, &t[S_CACHE][i],
                                 &t[S_QCAT][i], 1.0f, NULL};
        return mla_fused_rope_concat_cache(ctx, &a);
    }
    case K_PREPARE:
        return mla_prepare(ctx, s->plan, &s->lw[i], &t[S_X][i], &t[S_POS][i], &t[S_SLOTS][i],
                           &r->cos, &r->sin, &s->cd, &t[S_CACHE][i], &t[S_QCAT][i],
                           &t[S_WORK][i]);
    default: return MLA_ERR_INVALID_ARGUMENT;
    }
}

/* One call, synchronized, timed. */
static mla_status timed_call(bp_run *r, bp_set *s, kase k, int i, double *seconds)
{
    double t0 = bench_now();
    mla_status st = run_case(r, s, k, i);
    if (st == MLA_OK)
        st = mla_context_synchronize(r->ctx);
    *seconds = bench_now() - t0;
    return st;
}

static void row_error(bp_run *r, bench_row *row, const char *what, mla_status st)
{
    const char *param = mla_context_error_param(r->ctx),
               *detail = mla_context_error_detail(r->ctx);
    if (st == MLA_ERR_UNSUPPORTED) {
        row->status = BENCH_ROW_UNSUPPORTED;
        snprintf(row->note, sizeof row->note, "unsupported%s%s%s", *param ? " (" : "", param,
                 *param ? ")" : "");
        return;
    }
    row->status = BENCH_ROW_ERROR;
    snprintf(row->note, sizeof row->note, "error in %s: %s%s%s%s%s%s", what, mla_status_name(st),
             *param ? " (" : "", param, *param ? ")" : "", *detail ? ": " : "", detail);
}

static bp_set *new_set(int n)
{
    bp_set *s = calloc(1, sizeof *s);
    if (s)
        s->n = n;
    return s;
}

/* Setup failures that are the backend's refusal (a plan it cannot make)
 * report unsupported; others are errors. */
static mla_status build_set(bp_run *r, kase k, int64_t T, int n, bp_set **out)
{
    bp_set *s = new_set(n);
    if (!s)
        return MLA_ERR_OUT_OF_MEMORY;
    mla_status st = setup(r, s, k, T);
    if (st != MLA_OK) {
        set_free(r, s);
        return st;
    }
    *out = s;
    return MLA_OK;
}

/* The time of one call at T = 1 (a probe for predicting larger T); < 0 when
 * the call fails. */
static double probe(bp_run *r, kase k)
{
    bp_set *s = NULL;
    if (build_set(r, k, 1, 1, &s) != MLA_OK)
        return -1.0;
    double t = -1.0;
    if (timed_call(r, s, k, 0, &t) != MLA_OK)
        t = -1.0;
    set_free(r, s);
    return t;
}

static void measure(bp_run *r, kase k, int64_t T, double row_budget, bench_row *row)
{
    const bench_prepare_options *o = r->o;
    int n = (int)cdiv(r->rotate_bytes, row->bytes > 0 ? row->bytes : 1);
    n = n < 1 ? 1 : n > MAX_INST ? MAX_INST : n;
    bp_set *s = NULL;
    mla_status st = build_set(r, k, T, n, &s);
    if (st != MLA_OK) {
        row_error(r, row, "setup", st);
        return;
    }
    row->instances = n;
    int next = 0;
    double t_call = 0.0;
    st = timed_call(r, s, k, next++ % n, &t_call);
    /* more warm-up while it is cheap */
    for (int w = 1; w < o->warmup && st == MLA_OK && t_call * (w + 1) < 0.25 * row_budget; ++w)
        st = timed_call(r, s, k, next++ % n, &t_call);
    if (st != MLA_OK) {
        row_error(r, row, row->api, st);
        set_free(r, s);
        return;
    }
    /* calls per sample: a device sample spans enough calls to hide the
     * synchronization; a host sample of a very short op a few calls */
    int batch = (int)ceil((r->host ? HOST_BATCH_S : DEVICE_BATCH_S) /
                          (t_call > 1e-8 ? t_call : 1e-8));
    batch = batch < 1 ? 1 : batch > DEVICE_MAX_BATCH ? DEVICE_MAX_BATCH : batch;
    int reps = (int)(row_budget / (t_call * batch > 1e-9 ? t_call * batch : 1e-9));
    reps = reps < 1 ? 1 : reps > o->reps ? o->reps : reps;
    double *ts = calloc((size_t)reps, sizeof *ts);
    if (!ts) {
        row_error(r, row, "setup", MLA_ERR_OUT_OF_MEMORY);
        set_free(r, s);
        return;
    }
    const double cpu0 = bench_cpu_seconds(), wall0 = bench_now();
    for (int i = 0; i < reps && st == MLA_OK; ++i) {
        st = mla_context_synchronize(r->ctx);
        double t0 = bench_now();
        for (int b = 0; b < batch && st == MLA_OK; ++b)
            st = run_case(r, s, k, next++ % n);
        if (st == MLA_OK)
            st = mla_context_synchronize(r->ctx);
        ts[i] = (bench_now() - t0) / batch;
    }
    const double wall = bench_now() - wall0, cpu = bench_cpu_seconds() - cpu0;
    row->cpu_util = r->host && wall > 0 ? cpu / (wall * r->threads) : -1.0;
    row->threads = r->host ? r->threads : 0;
    if (st != MLA_OK) {
        row_error(r, row, row->api, st);
    } else {
        row->status = BENCH_ROW_OK;
        row->reps = reps;
        row->batch = batch;
        row->min_s = bench_min(ts, reps);
        row->max_s = bench_max(ts, reps);
        row->median_s = bench_median(ts, reps);
    }
    free(ts);
    set_free(r, s);
}

static int op_selected(const char *list, const char *op)
{
    if (!list || !*list)
        return 1;
    const size_t n = strlen(op);
    for (const char *p = list; *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && !strncmp(p, op, n))
            return 1;
        if (!e)
            break;
        p = e + 1;
    }
    return 0;
}

void bench_prepare_options_default(bench_prepare_options *o, int device)
{
    memset(o, 0, sizeof *o);
    o->config = "DeepSeek-V3";
    const int64_t t[] = {1, 16, 128, 1024};
    for (int i = 0; i < 4; ++i)
        o->tokens[i] = t[i];
    o->n_tokens = 4;
    o->reps = device ? 20 : 7;
    o->warmup = device ? 5 : 2;
    o->max_call_s = device ? 2.0 : 1.0;
    o->row_budget_s = device ? 1.0 : 0.8;
    o->time_budget_s = device ? 120.0 : 45.0;
    o->seed = 0x6d6c61u; /* "mla" */
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

int bench_prepare_run(mla_context *ctx, const bench_prepare_options *o,
                      bench_prepare_result *res, FILE *log)
{
    memset(res, 0, sizeof *res);
    const double start = bench_now();
    bp_run *r = calloc(1, sizeof *r);
    if (!r)
        return -1;
    r->ctx = ctx;
    r->o = o;
    r->mem = mla_context_memory(ctx);
    r->host = r->mem == MLA_MEMORY_HOST;
    r->threads = o->threads > 0 ? o->threads : 1;
#if defined(MLA_HAVE_OPENMP)
    if (o->threads <= 0)
        r->threads = omp_get_max_threads();
#endif
    bench_rng_seed(&r->rng, o->seed);
    int rc = -1;
    if (mla_model_config_preset(o->config, &r->cfg) != MLA_OK) {
        if (log)
            fprintf(log, "bench prepare: unknown config '%s'\n", o->config);
        goto out;
    }
    r->rotate_bytes = o->rotate_bytes > 0 ? o->rotate_bytes
                      : r->host          ? 4 * bench_llc_bytes()
                                         : 256 * MIB;

    /* the RoPE tables, built once on the host, shared by every row */
    const int64_t half = r->cfg.rope / 2;
    r->P = r->cfg.max_pos;
    float *hc = malloc((size_t)(r->P * half) * sizeof *hc),
          *hs = malloc((size_t)(r->P * half) * sizeof *hs);
    mla_status st = hc && hs ? mla_rope_table_build(&r->cfg.rope_cfg, r->P, hc, hs)
                             : MLA_ERR_OUT_OF_MEMORY;
    const size_t tb = (size_t)(r->P * half) * sizeof(float);
    if (st == MLA_OK)
        st = mla_malloc(ctx, tb, &r->cos_mem);
    if (st == MLA_OK)
        st = mla_malloc(ctx, tb, &r->sin_mem);
    if (st == MLA_OK)
        st = mla_memcpy(ctx, r->cos_mem, hc, tb, MLA_COPY_HOST_TO_CONTEXT);
    if (st == MLA_OK)
        st = mla_memcpy(ctx, r->sin_mem, hs, tb, MLA_COPY_HOST_TO_CONTEXT);
    free(hc);
    free(hs);
    if (st != MLA_OK) {
        if (log)
            fprintf(log, "bench prepare: RoPE tables: %s\n", mla_status_name(st));
        goto out;
    }
    mla_tensor_init(&r->cos, r->cos_mem, MLA_DTYPE_F32, r->mem, 2, (int64_t[]){r->P, half});
    mla_tensor_init(&r->sin, r->sin_mem, MLA_DTYPE_F32, r->mem, 2, (int64_t[]){r->P, half});

    int64_t tokens[BENCH_MAX_TOKENS];
    const int nt = o->n_tokens;
    memcpy(tokens, o->tokens, (size_t)nt * sizeof *tokens);
    qsort(tokens, (size_t)nt, sizeof *tokens, cmp_i64); /* ascending: predictions */

    int total = 0;
    for (int k = 0; k < K_COUNT; ++k)
        total += op_selected(o->ops, cases[k].op) ? nt : 0;
    res->rows = calloc((size_t)(total > 0 ? total : 1), sizeof *res->rows);
    if (!res->rows)
        goto out;

    /* per (case, token index): the measured median, or the prediction a
     * skipped row was skipped by; 0 when unknown */
    double est[K_COUNT][BENCH_MAX_TOKENS];
    memset(est, 0, sizeof est);
    static const kase parts[] = {K_Q_A, K_KV_A, K_QK_NORM, K_Q_B, K_ABSORB, K_ROPE_CACHE};

    for (int k = 0; k < K_COUNT; ++k) {
        if (!op_selected(o->ops, cases[k].op))
            continue;
        double last_t = -1.0;
        int64_t last_T = 0;
        for (int it = 0; it < nt; ++it) {
            const int64_t T = tokens[it];
            bench_row *row = &res->rows[res->n_rows++];
            row->op = cases[k].op;
            row->api = cases[k].api;
            row->variant = cases[k].variant;
            row->is_gemm = cases[k].is_gemm;
            row->is_whole = cases[k].is_whole;
            row->T = T;
            row_shape(&r->cfg, (kase)k, row->shape, sizeof row->shape);
            counts(&r->cfg, (kase)k, T, &row->bytes, &row->weight_bytes, &row->flops);

            /* predicted time of one call: linear in T from the last row;
             * for the whole prepare, the sum of its parts at this T; else
             * from a T = 1 probe */
            double parts_sum = 0.0;
            if (k == K_PREPARE)
                for (size_t q = 0; q < sizeof parts / sizeof parts[0]; ++q)
                    parts_sum = parts_sum >= 0 && est[parts[q]][it] > 0
                                    ? parts_sum + est[parts[q]][it]
                                    : -1.0;
            if (last_T == 0 && parts_sum > 0) {
                last_t = parts_sum;
                last_T = T;
            }
            if (last_T == 0 && T > 16) {
                double p = probe(r, (kase)k);
                if (p > 0) {
                    last_t = p;
                    last_T = 1;
                }
            }
            double predicted = last_T > 0 ? last_t * (double)T / (double)last_T : 0.0;
            const double spent = bench_now() - start;
            if (predicted > o->max_call_s) {
                row->status = BENCH_ROW_SKIPPED;
                snprintf(row->note, sizeof row->note,
                         "skipped: predicted %.2f s per call > --max-call-s %.2f", predicted,
                         o->max_call_s);
                est[k][it] = predicted;
            } else if (spent > o->time_budget_s && predicted > 0.05 * o->max_call_s) {
                row->status = BENCH_ROW_SKIPPED;
                snprintf(row->note, sizeof row->note,
                         "skipped: --time-budget-s %.0f spent, predicted %.3f s per call",
                         o->time_budget_s, predicted);
                est[k][it] = predicted;
            } else {
                const int left = total - res->n_rows + 1;
                const double remaining = o->time_budget_s - (bench_now() - start);
                double budget = remaining / left;
                budget = budget > o->row_budget_s ? o->row_budget_s : budget;
                budget = budget < 0.02 ? 0.02 : budget;
                measure(r, (kase)k, T, budget, row);
                if (row->status == BENCH_ROW_OK) {
                    last_t = row->median_s;
                    last_T = T;
                    est[k][it] = row->median_s;
                }
            }
            if (row->status == BENCH_ROW_ERROR)
                ++res->n_errors;
            if (log) {
                if (row->status == BENCH_ROW_OK)
                    fprintf(log, "  %-11s %-10s T=%-5lld %12.1f us  (%d x %d, %d sets)\n",
                            row->op, row->variant, (long long)T, 1e6 * row->median_s, row->reps,
                            row->batch, row->instances);
                else
                    fprintf(log, "  %-11s %-10s T=%-5lld %s\n", row->op, row->variant,
                            (long long)T, row->note);
                fflush(log);
            }
        }
    }
    rc = 0;
out:
    if (r->cos_mem)
        mla_free(ctx, r->cos_mem);
    if (r->sin_mem)
        mla_free(ctx, r->sin_mem);
    for (int i = 0; i < r->npool; ++i)
        free(r->pool[i].p);
    free(r);
    res->seconds = bench_now() - start;
    return rc;
}

/* ---------------------------------------------------------- reporting */

void bench_prepare_judge(bench_prepare_result *res, const bench_ceilings *c)
{
    const double bw = c->copy_gbs * 1e9, mm = c->matmul_gflops * 1e9;
    for (int i = 0; i < res->n_rows; ++i) {
        bench_row *w = &res->rows[i];
        w->ratio = NAN;
        w->basis = "";
        if (w->status != BENCH_ROW_OK || w->median_s <= 0)
            continue;
        const double t = w->median_s;
        w->gbs = (double)w->bytes / t / 1e9;
        w->gflops = w->flops / t / 1e9;
        if (w->is_whole || (w->is_gemm && w->T > 16 && w->T < 128)) {
            double floor_t = 0.0;
            if (bw > 0)
                floor_t = (double)w->bytes / bw;
            if (mm > 0 && w->flops / mm > floor_t)
                floor_t = w->flops / mm;
            w->basis = "roofline";
            w->ratio = floor_t > 0 ? floor_t / t : NAN;
        } else if (w->is_gemm && w->T >= 128) {
            w->basis = "matmul";
            w->ratio = mm > 0 ? w->flops / t / mm : NAN;
        } else if (w->is_gemm) {
            w->basis = "weight BW";
            w->ratio = bw > 0 ? (double)w->weight_bytes / t / bw : NAN;
        } else {
            w->basis = "copy BW";
            w->ratio = bw > 0 ? (double)w->bytes / t / bw : NAN;
        }
    }
}

void bench_prepare_print(FILE *out, const bench_prepare_result *res)
{
    fprintf(out, "%-11s %-20s %-11s %5s %12s %12s %9s %9s %5s %5s  %s\n", "op", "shape",
            "variant", "T", "median_us", "min_us", "GB/s", "GFLOP/s", "reps", "cpu%",
            "vs ceiling");
    /* a row whose CPU share is under 80% of one thread's was preempted */
    int preempted = 0;
    double thr = 1.0;
    for (int i = 0; i < res->n_rows; ++i)
        if (res->rows[i].threads > 0)
            thr = 0.8 / res->rows[i].threads;
    thr = thr > 0.5 ? 0.5 : thr;
    const char *prev = NULL;
    for (int i = 0; i < res->n_rows; ++i) {
        const bench_row *w = &res->rows[i];
        if (prev && strcmp(prev, w->op))
            fputc('\n', out);
        prev = w->op;
        fprintf(out, "%-11s %-20s %-11s %5lld ", w->op, w->shape, w->variant, (long long)w->T);
        if (w->status != BENCH_ROW_OK) {
            fprintf(out, "%s\n", w->note);
            continue;
        }
        fprintf(out, "%12.1f %12.1f %9.2f %9.1f %5d ", 1e6 * w->median_s, 1e6 * w->min_s,
                w->gbs, w->gflops, w->reps);
        if (w->cpu_util >= 0)
            fprintf(out, "%4.0f%%%s ", 100.0 * w->cpu_util, w->cpu_util < thr ? "!" : " ");
        else
            fprintf(out, "    -  ");
        preempted += w->cpu_util >= 0 && w->cpu_util < thr;
        if (isfinite(w->ratio))
            fprintf(out, "%5.1f%% %s\n", 100.0 * w->ratio, w->basis);
        else
            fprintf(out, "  n/a %s\n", w->basis);
    }
    if (preempted)
        fprintf(out, "\n%d row%s marked '!': the process got under 80%% of one thread's CPU "
                     "time while timing (other processes had the cores); those times are not "
                     "the library's. Re-run on an idle host.\n",
                preempted, preempted == 1 ? "" : "s");
}

static const char *status_name(bench_row_status s)
{
    switch (s) {
    case BENCH_ROW_OK: return "ok";
    case BENCH_ROW_UNSUPPORTED: return "unsupported";
    case BENCH_ROW_SKIPPED: return "skipped";
    default: return "error";
    }
}

void bench_prepare_json_rows(bench_json *j, const bench_prepare_result *res)
{
    bench_json_array(j, "rows");
    for (int i = 0; i < res->n_rows; ++i) {
        const bench_row *w = &res->rows[i];
        bench_json_object(j, NULL);
        bench_json_str(j, "op", w->op);
        bench_json_str(j, "api", w->api);
        bench_json_str(j, "variant", w->variant);
        bench_json_str(j, "shape", w->shape);
        bench_json_int(j, "T", w->T);
        bench_json_str(j, "status", status_name(w->status));
        bench_json_str(j, "note", w->note);
        bench_json_num(j, "median_s", w->status == BENCH_ROW_OK ? w->median_s : NAN);
        bench_json_num(j, "min_s", w->status == BENCH_ROW_OK ? w->min_s : NAN);
        bench_json_num(j, "max_s", w->status == BENCH_ROW_OK ? w->max_s : NAN);
        bench_json_int(j, "reps", w->reps);
        bench_json_int(j, "batch", w->batch);
        bench_json_int(j, "input_sets", w->instances);
        bench_json_num(j, "cpu_util", w->cpu_util >= 0 ? w->cpu_util : NAN);
        bench_json_int(j, "bytes", w->bytes);
        bench_json_int(j, "weight_bytes", w->weight_bytes);
        bench_json_num(j, "flops", w->flops);
        bench_json_num(j, "gbs", w->status == BENCH_ROW_OK ? w->gbs : NAN);
        bench_json_num(j, "gflops", w->status == BENCH_ROW_OK ? w->gflops : NAN);
        bench_json_str(j, "basis", w->basis ? w->basis : "");
        bench_json_num(j, "ratio", w->ratio);
        bench_json_close(j, '}');
    }
    bench_json_close(j, ']');
}

void bench_prepare_free(bench_prepare_result *res)
{
    free(res->rows);
    memset(res, 0, sizeof *res);
}
