/* RoPE-once (MLA.md section 3, seeds 000 and 001): on every backend this build
 * can run (reference, cpu; hip when a GPU answers), for test-tiny and
 * test-tiny-noq and for every RoPE site the plan allows (its default,
 * SEPARATE and FUSED_CACHE), mla_prepare must leave in the cache, for every
 * token written, k_pe rotated by its position exactly once, and in q_cat's
 * rope part q_pe rotated once. The unrotated k_pe and q_pe come from the
 * same backend's public ops (kv_a projection, the fused norm, q_b
 * projection, exactly as the prepare calls them); the rotation is computed
 * here, in fp32 with every product rounded on its own. The two sites must
 * give byte-identical caches and q_cat; the fused op must rotate keys that
 * have no query too. And the plan: the fused QK norm kernel on every target
 * (gfx950 included), a queryable site; every site plannable (the
 * ATTENTION site runs through the layer: tests/test_layer_rope_once.c). */
#include <stdlib.h>
#include <string.h>

#include "mla/mla.h"
#include "tests/test_rope_row.h"
#include "tests/test_util.h"

enum { T = 9, BS = 16, NB = 2 };

static uint32_t rng_state = 0x1234567u;

/* A value in [-scale, scale), from a 32-bit xorshift. */
static float rnd(float scale)
{
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 17, rng_state ^= rng_state << 5;
    return scale * ((float)(rng_state >> 8) / 8388608.0f - 1.0f);
}

/* ------------------------------------------------- context memory */

typedef struct buf {
    mla_tensor t;
    size_t bytes;
} buf;

/* A contiguous tensor in ctx's memory, filled from host (or zeroed). */
static buf upload(mla_context *ctx, mla_dtype dt, int32_t ndim, const int64_t *shape,
                  const void *host)
{
    buf b;
    int64_t n = 1;
    for (int32_t d = 0; d < ndim; ++d)
        n *= shape[d];
    b.bytes = (size_t)n * mla_dtype_size(dt);
    void *p = NULL;
    CHECK_STATUS(mla_malloc(ctx, b.bytes, &p), MLA_OK);
    if (host)
        mla_memcpy(ctx, p, host, b.bytes, MLA_COPY_HOST_TO_CONTEXT);
    else
        mla_memset(ctx, p, 0, b.bytes);
    mla_tensor_init(&b.t, p, dt, mla_context_memory(ctx), ndim, shape);
    return b;
}

static void *download(mla_context *ctx, const buf *b)
{
    void *h = malloc(b->bytes);
    mla_memcpy(ctx, h, b->t.data, b->bytes, MLA_COPY_CONTEXT_TO_HOST);
    return h;
}

/* Random bf16 host data of n values in [-scale, scale). */
static uint16_t *random_bf16(int64_t n, float scale)
{
    uint16_t *h = malloc((size_t)n * sizeof *h);
    for (int64_t i = 0; i < n; ++i)
        h[i] = mla_f32_to_bf16(rnd(scale));
    return h;
}

static buf random_weight(mla_context *ctx, int64_t rows, int64_t cols)
{
    uint16_t *h = random_bf16(rows * cols, 1.0f / (float)cols);
    buf b = upload(ctx, MLA_DTYPE_BF16, 2, (int64_t[]){rows, cols}, h);
    free(h);
    return b;
}

/* -------------------------------------------------------- a model */

typedef struct model {
    mla_model_config cfg;
    mla_layer_weights w;
    buf wq_a, wq_b, wkv_a, wkv_b, wo, ln_q, ln_kv;
    buf x, pos, slots, cos, sin;
    float *hcos, *hsin;
    int64_t hpos[T], hslot[T];
} model;

static void make_model(mla_context *ctx, const char *name, model *m)
{
    memset(m, 0, sizeof *m);
    CHECK_STATUS(mla_model_config_preset(name, &m->cfg), MLA_OK);
    const mla_model_config *c = &m->cfg;
    const int64_t H = c->heads, qk = c->nope + c->rope, in_q = c->q_lora ? c->q_lora : c->hidden;
    if (c->q_lora)
        m->wq_a = random_weight(ctx, c->q_lora, c->hidden);
    m->wq_b = random_weight(ctx, H * qk, in_q);
    m->wkv_a = random_weight(ctx, c->kv_lora + c->rope, c->hidden);
    m->wkv_b = random_weight(ctx, H * (c->nope + c->v), c->kv_lora);
    m->wo = random_weight(ctx, c->hidden, H * c->v);
    uint16_t *ln = random_bf16(in_q + c->kv_lora, 1.0f);
    for (int64_t i = 0; i < in_q + c->kv_lora; ++i) /* norm weights near 1 */
        ln[i] = mla_f32_to_bf16(1.0f + 0.5f * mla_bf16_to_f32(ln[i]));
    m->ln_q = upload(ctx, MLA_DTYPE_BF16, 1, &in_q, ln);
    m->ln_kv = upload(ctx, MLA_DTYPE_BF16, 1, &c->kv_lora, ln + in_q);
    free(ln);
    m->w.q_a_proj.w = m->wq_a.t;
    m->w.q_a_layernorm = m->ln_q.t;
    m->w.q_b_proj.w = m->wq_b.t;
    m->w.kv_a_proj_with_mqa.w = m->wkv_a.t;
    m->w.kv_a_layernorm = m->ln_kv.t;
    m->w.kv_b_proj.w = m->wkv_b.t;
    m->w.o_proj.w = m->wo.t;
    uint16_t *hx = random_bf16(T * c->hidden, 4.0f);
    m->x = upload(ctx, MLA_DTYPE_BF16, 2, (int64_t[]){T, c->hidden}, hx);
    free(hx);
    const int64_t P = c->max_pos, half = c->rope / 2;
    m->hcos = malloc((size_t)(P * half) * sizeof(float));
    m->hsin = malloc((size_t)(P * half) * sizeof(float));
    CHECK_STATUS(mla_rope_table_build(&c->rope_cfg, P, m->hcos, m->hsin), MLA_OK);
    m->cos = upload(ctx, MLA_DTYPE_F32, 2, (int64_t[]){P, half}, m->hcos);
    m->sin = upload(ctx, MLA_DTYPE_F32, 2, (int64_t[]){P, half}, m->hsin);
    for (int64_t t = 0; t < T; ++t) { /* positions across the table, slots scattered */
        m->hpos[t] = t == 0 ? 0 : t == 1 ? P - 1 : (int64_t)(rng_state % (uint32_t)P);
        rnd(1.0f);
        m->hslot[t] = (t * 7 + 3) % (NB * BS);
    }
    m->pos = upload(ctx, MLA_DTYPE_I64, 1, (int64_t[]){T}, m->hpos);
    m->slots = upload(ctx, MLA_DTYPE_I64, 1, (int64_t[]){T}, m->hslot);
}

static void free_bufs(mla_context *ctx, buf *b, int n)
{
    for (int i = 0; i < n; ++i)
        mla_free(ctx, b[i].t.data);
}

static void free_model(mla_context *ctx, model *m)
{
    buf all[] = {m->wq_a, m->wq_b, m->wkv_a, m->wkv_b, m->wo, m->ln_q, m->ln_kv,
                 m->x,    m->pos,  m->slots, m->cos,   m->sin};
    free_bufs(ctx, all, (int)(sizeof all / sizeof all[0]));
    free(m->hcos);
    free(m->hsin);
}

/* The unrotated q [T, H*(nope+R)] and kv [T, L+R] (k_nope normed) that the
 * prepare computes, through the same public ops on the same context. */
static void unrotated(mla_context *ctx, const model *m, uint16_t **q, uint16_t **kv)
{
    const mla_model_config *c = &m->cfg;
    const int64_t D = c->kv_lora + c->rope, Hqk = c->heads * (c->nope + c->rope);
    buf kvb = upload(ctx, MLA_DTYPE_BF16, 2, (int64_t[]){T, D}, NULL);
    buf qb = upload(ctx, MLA_DTYPE_BF16, 2, (int64_t[]){T, Hqk}, NULL);
    buf qa = c->q_lora ? upload(ctx, MLA_DTYPE_BF16, 2, (int64_t[]){T, c->q_lora}, NULL) : qb;
    mla_tensor k_nope = kvb.t;
    k_nope.shape[1] = c->kv_lora;
    CHECK_STATUS(mla_linear(ctx, &m->x.t, c->q_lora ? &m->wq_a.t : &m->wq_b.t, NULL, &qa.t),
                 MLA_OK);
    CHECK_STATUS(mla_linear(ctx, &m->x.t, &m->wkv_a.t, NULL, &kvb.t), MLA_OK);
    if (c->q_lora) {
        CHECK_STATUS(mla_fused_qk_rmsnorm(ctx, &qa.t, &m->ln_q.t, c->rms_eps, &k_nope,
                                          &m->ln_kv.t, c->rms_eps, &qa.t, NULL, &k_nope),
                     MLA_OK);
        CHECK_STATUS(mla_linear(ctx, &qa.t, &m->wq_b.t, NULL, &qb.t), MLA_OK);
    } else {
        CHECK_STATUS(mla_rmsnorm(ctx, &k_nope, &m->ln_kv.t, c->rms_eps, &k_nope), MLA_OK);
    }
    *q = download(ctx, &qb);
    *kv = download(ctx, &kvb);
    free_bufs(ctx, (buf[]){kvb, qb}, 2);
    if (c->q_lora)
        mla_free(ctx, qa.t.data);
}

/* Every slot of a NORMAL bf16 cache as rows [NB * BS, L + R] (f32): one
 * sequence over all blocks in order, so row i is slot i. */
static float *gather_all(mla_context *ctx, const mla_cache_desc *d, const buf *cache)
{
    int32_t table[NB], len = NB * BS;
    for (int i = 0; i < NB; ++i)
        table[i] = i;
    buf bt = upload(ctx, MLA_DTYPE_I32, 2, (int64_t[]){1, NB}, table);
    buf sl = upload(ctx, MLA_DTYPE_I32, 1, (int64_t[]){1}, &len);
    buf out = upload(ctx, MLA_DTYPE_F32, 2, (int64_t[]){NB * BS, d->kv_lora + d->rope}, NULL);
    CHECK_STATUS(mla_cache_gather(ctx, d, &cache->t, &bt.t, &sl.t, &out.t), MLA_OK);
    float *rows = download(ctx, &out);
    free_bufs(ctx, (buf[]){bt, sl, out}, 3);
    return rows;
}

/* k_pe of every token written, in the cache rows, is its k_pe rotated once. */
static int keys_rotated_once(const model *m, const float *rows, const uint16_t *kv,
                             const int64_t *pos, const int64_t *slot, int64_t n)
{
    const int64_t L = m->cfg.kv_lora, R = m->cfg.rope;
    uint16_t want[64];
    int bad = 0;
    for (int64_t t = 0; t < n; ++t) {
        test_rope_row(kv + t * (L + R) + L, R, m->hcos, m->hsin, pos[t], want);
        for (int64_t r = 0; r < R; ++r)
            bad += mla_f32_to_bf16(rows[slot[t] * (L + R) + L + r]) != want[r];
        for (int64_t i = 0; i < L; ++i) /* and k_nope, the normed latent, as it is */
            bad += mla_f32_to_bf16(rows[slot[t] * (L + R) + i]) != kv[t * (L + R) + i];
    }
    return bad == 0;
}

/* q_cat's rope part of every (token, head) is q_pe rotated once. */
static int queries_rotated_once(const model *m, const uint16_t *q_cat, const uint16_t *q)
{
    const mla_model_config *c = &m->cfg;
    const int64_t H = c->heads, L = c->kv_lora, R = c->rope, qk = c->nope + R;
    uint16_t want[64];
    int bad = 0;
    for (int64_t t = 0; t < T; ++t)
        for (int64_t h = 0; h < H; ++h) {
            test_rope_row(q + (t * H + h) * qk + c->nope, R, m->hcos, m->hsin, m->hpos[t], want);
            bad += memcmp(q_cat + (t * H + h) * (L + R) + L, want, (size_t)R * 2) != 0;
        }
    return bad == 0;
}

/* ------------------------------------------------------ the sites */

/* One mla_prepare at a site (-1: the plan's choice); returns the site used
 * and the downloaded cache bytes and q_cat. */
static mla_rope_site prepare_at(mla_context *ctx, const model *m, int site, uint8_t **cache_bytes,
                                uint16_t **q_cat)
{
    const mla_model_config *c = &m->cfg;
    mla_plan_options o;
    mla_plan_options_default(mla_context_target(ctx), &o);
    o.force_rope_site = site;
    mla_plan *plan = NULL;
    CHECK_STATUS(mla_plan_create(c, &o, &plan), MLA_OK);
    if (!plan)
        return MLA_ROPE_SITE_COUNT;
    const mla_rope_site used = mla_plan_rope_site(plan);
    CHECK(site < 0 || used == (mla_rope_site)site);
    CHECK(mla_plan_rotates_at(plan, used));
    for (int s = 0; s < MLA_ROPE_SITE_COUNT; ++s) /* exactly one site rotates */
        CHECK(mla_plan_rotates_at(plan, (mla_rope_site)s) == (s == (int)used));
    mla_cache_desc d = {MLA_CACHE_NORMAL, MLA_DTYPE_BF16, NB, BS, c->kv_lora, c->rope, 1.0f};
    int64_t bb = 0, ws = 0;
    mla_cache_block_bytes(&d, &bb);
    CHECK_STATUS(mla_prepare_workspace_bytes(plan, T, MLA_DTYPE_BF16, &ws), MLA_OK);
    buf cache = upload(ctx, MLA_DTYPE_U8, 2, (int64_t[]){NB, bb}, NULL);
    buf q = upload(ctx, MLA_DTYPE_BF16, 3, (int64_t[]){T, c->heads, c->kv_lora + c->rope}, NULL);
    buf work = upload(ctx, MLA_DTYPE_U8, 1, (int64_t[]){ws}, NULL);
    CHECK_STATUS(mla_prepare(ctx, plan, &m->w, &m->x.t, &m->pos.t, &m->slots.t, &m->cos.t,
                             &m->sin.t, &d, &cache.t, &q.t, &work.t),
                 MLA_OK);
    *cache_bytes = download(ctx, &cache);
    *q_cat = download(ctx, &q);
    float *rows = gather_all(ctx, &d, &cache);
    uint16_t *uq = NULL, *ukv = NULL;
    unrotated(ctx, m, &uq, &ukv);
    CHECK(keys_rotated_once(m, rows, ukv, m->hpos, m->hslot, T));
    CHECK(queries_rotated_once(m, *q_cat, uq));
    free(rows), free(uq), free(ukv);
    free_bufs(ctx, (buf[]){cache, q, work}, 3);
    mla_plan_destroy(plan);
    return used;
}

/* Bad input to mla_prepare is refused before any stage runs: q_cat and the
 * cache stay as they were. */
static void prepare_refuses_bad_input(mla_context *ctx, const model *m)
{
    const mla_model_config *c = &m->cfg;
    mla_plan_options o;
    mla_plan_options_default(mla_context_target(ctx), &o);
    mla_plan *plan = NULL;
    CHECK_STATUS(mla_plan_create(c, &o, &plan), MLA_OK);
    if (!plan)
        return;
    mla_cache_desc d = {MLA_CACHE_NORMAL, MLA_DTYPE_BF16, NB, BS, c->kv_lora, c->rope, 1.0f};
    int64_t bb = 0, ws = 0;
    mla_cache_block_bytes(&d, &bb);
    mla_prepare_workspace_bytes(plan, T, MLA_DTYPE_BF16, &ws);
    buf cache = upload(ctx, MLA_DTYPE_U8, 2, (int64_t[]){NB, bb}, NULL);
    buf q = upload(ctx, MLA_DTYPE_BF16, 3, (int64_t[]){T, c->heads, c->kv_lora + c->rope}, NULL);
    buf work = upload(ctx, MLA_DTYPE_U8, 1, (int64_t[]){ws}, NULL);
    mla_memset(ctx, cache.t.data, 0x5A, cache.bytes);
    mla_memset(ctx, q.t.data, 0x5A, q.bytes);
    int64_t bad_pos[T], bad_slot[T];
    memcpy(bad_pos, m->hpos, sizeof bad_pos);
    memcpy(bad_slot, m->hslot, sizeof bad_slot);
    bad_pos[T - 1] = c->max_pos; /* one past the table */
    bad_slot[T - 1] = NB * BS;   /* one past the cache */
    buf bp = upload(ctx, MLA_DTYPE_I64, 1, (int64_t[]){T}, bad_pos);
    buf bsl = upload(ctx, MLA_DTYPE_I64, 1, (int64_t[]){T}, bad_slot);
    CHECK_STATUS(mla_prepare(ctx, plan, &m->w, &m->x.t, &bp.t, &m->slots.t, &m->cos.t, &m->sin.t,
                             &d, &cache.t, &q.t, &work.t),
                 MLA_ERR_OUT_OF_RANGE);
    CHECK(strcmp(mla_context_error_param(ctx), "positions") == 0);
    CHECK_STATUS(mla_prepare(ctx, plan, &m->w, &m->x.t, &m->pos.t, &bsl.t, &m->cos.t, &m->sin.t,
                             &d, &cache.t, &q.t, &work.t),
                 MLA_ERR_OUT_OF_RANGE);
    CHECK(strcmp(mla_context_error_param(ctx), "slots") == 0);
    mla_layer_weights wrong = m->w;
    wrong.kv_a_proj_with_mqa.w.shape[0] -= 1;
    CHECK_STATUS(mla_prepare(ctx, plan, &wrong, &m->x.t, &m->pos.t, &m->slots.t, &m->cos.t,
                             &m->sin.t, &d, &cache.t, &q.t, &work.t),
                 MLA_ERR_SHAPE);
    CHECK(strcmp(mla_context_error_param(ctx), "weights.kv_a_proj_with_mqa") == 0);
    uint8_t *hc = download(ctx, &cache), *hq = download(ctx, &q);
    int untouched = 1;
    for (size_t i = 0; i < cache.bytes; ++i)
        untouched &= hc[i] == 0x5A;
    for (size_t i = 0; i < q.bytes; ++i)
        untouched &= hq[i] == 0x5A;
    CHECK(untouched);
    free(hc), free(hq);
    free_bufs(ctx, (buf[]){cache, q, work, bp, bsl}, 5);
    mla_plan_destroy(plan);
}

/* The fused op with more keys than queries (a chunk's tail written without
 * a query): every key is rotated once, not only the first T. */
static void fused_extra_keys(mla_context *ctx, const model *m)
{
    const mla_model_config *c = &m->cfg;
    const int64_t H = c->heads, L = c->kv_lora, R = c->rope, Tq = 2;
    uint16_t *hkv = random_bf16(T * (L + R), 2.0f), *hq = random_bf16(Tq * H * (L + R), 2.0f);
    buf kv = upload(ctx, MLA_DTYPE_BF16, 2, (int64_t[]){T, L + R}, hkv);
    buf qin = upload(ctx, MLA_DTYPE_BF16, 3, (int64_t[]){Tq, H, L + R}, hq);
    buf qpos = upload(ctx, MLA_DTYPE_I64, 1, (int64_t[]){Tq}, m->hpos);
    mla_cache_desc d = {MLA_CACHE_NORMAL, MLA_DTYPE_BF16, NB, BS, L, R, 1.0f};
    int64_t bb = 0;
    mla_cache_block_bytes(&d, &bb);
    buf cache = upload(ctx, MLA_DTYPE_U8, 2, (int64_t[]){NB, bb}, NULL);
    buf q_cat = upload(ctx, MLA_DTYPE_BF16, 3, (int64_t[]){Tq, H, L + R}, NULL);
    mla_tensor k_nope = kv.t, k_pe = kv.t, q_nope = qin.t, q_pe = qin.t;
    k_nope.shape[1] = L, k_pe.shape[1] = R;
    k_pe.data = (uint16_t *)kv.t.data + L;
    q_nope.shape[2] = L, q_pe.shape[2] = R;
    q_pe.data = (uint16_t *)qin.t.data + L;
    mla_rope_cache_args a = {&m->cos.t, &m->sin.t, MLA_ROPE_INTERLEAVED, &q_nope, &q_pe, &qpos.t,
                             &k_nope,   &k_pe,     &m->pos.t, &m->slots.t, &d, &cache.t,
                             &q_cat.t,  1.0f,      NULL};
    CHECK_STATUS(mla_fused_rope_concat_cache(ctx, &a), MLA_OK);
    float *rows = gather_all(ctx, &d, &cache);
    CHECK(keys_rotated_once(m, rows, hkv, m->hpos, m->hslot, T));
    free(rows), free(hkv), free(hq);
    free_bufs(ctx, (buf[]){kv, qin, qpos, cache, q_cat}, 5);
}

static void run_backend(mla_backend b)
{
    mla_context *ctx = NULL;
    mla_status st = mla_context_create(b, NULL, &ctx);
    if (st != MLA_OK) {
        printf("%s: not run (%s)\n", mla_backend_name(b), mla_status_name(st));
        return;
    }
    const char *why = NULL;
    mla_variant v = {.op = MLA_OP_ROPE_CACHE,
                     .in_dtype = MLA_DTYPE_BF16,
                     .out_dtype = MLA_DTYPE_BF16,
                     .group = BS,
                     .rows = T};
    if (mla_supports(ctx, &v, &why) != MLA_OK) {
        printf("%s: not run (the backend has no %s: %s)\n", mla_backend_name(b),
               mla_op_name(v.op), why);
        mla_context_destroy(ctx);
        return;
    }
    static const char *const configs[] = {"test-tiny", "test-tiny-noq"};
    for (int ci = 0; ci < 2; ++ci) {
        model m;
        make_model(ctx, configs[ci], &m);
        uint8_t *cache[3];
        uint16_t *q[3];
        const int sites[3] = {-1, MLA_ROPE_SITE_SEPARATE, MLA_ROPE_SITE_FUSED_CACHE};
        mla_rope_site used[3];
        for (int s = 0; s < 3; ++s)
            used[s] = prepare_at(ctx, &m, sites[s], &cache[s], &q[s]);
        const int64_t cb = (int64_t)NB * BS * (m.cfg.kv_lora + m.cfg.rope) * 2;
        const int64_t qb = (int64_t)T * m.cfg.heads * (m.cfg.kv_lora + m.cfg.rope) * 2;
        int same = 1;
        for (int s = 1; s < 3; ++s) /* every site: the same bytes */
            same &= !memcmp(cache[s], cache[0], (size_t)cb) && !memcmp(q[s], q[0], (size_t)qb);
        CHECK(same);
        printf("%s %s: default site %s; the sites' caches and q_cat are %s\n",
               mla_backend_name(b), configs[ci], mla_rope_site_name(used[0]),
               same ? "identical" : "DIFFERENT");
        fused_extra_keys(ctx, &m);
        prepare_refuses_bad_input(ctx, &m);
        for (int s = 0; s < 3; ++s)
            free(cache[s]), free(q[s]);
        free_model(ctx, &m);
    }
    mla_context_destroy(ctx);
}

/* ------------------------------------------------------- the plan */

static void plan_choices(void)
{
    static const char *const configs[] = {"test-tiny", "DeepSeek-V3", "DeepSeek-V3.2", "Kimi-K2"};
    static const mla_target targets[] = {MLA_TARGET_GFX942, MLA_TARGET_GFX950, MLA_TARGET_CPU,
                                         MLA_TARGET_SM90, MLA_TARGET_REFERENCE};
    for (int ci = 0; ci < 4; ++ci)
        for (int ti = 0; ti < 5; ++ti) {
            mla_model_config c;
            mla_plan_options o;
            mla_plan *p = NULL;
            mla_model_config_preset(configs[ci], &c);
            mla_plan_options_default(targets[ti], &o);
            CHECK_STATUS(mla_plan_create(&c, &o, &p), MLA_OK);
            const char *k = p ? mla_plan_kernel(p, MLA_STAGE_QK_NORM) : "";
            if (!strstr(k, "fused_qk_rmsnorm/bf16"))
                fprintf(stderr, "%s on %s: qk_norm is '%s'\n", configs[ci],
                        mla_target_name(targets[ti]), k);
            CHECK(strstr(k, "fused_qk_rmsnorm/bf16") != NULL); /* seed 001: gfx950 too */
            CHECK(mla_plan_rope_site(p) < MLA_ROPE_SITE_COUNT);
            mla_plan_destroy(p);
            for (int s = 0; s < MLA_ROPE_SITE_COUNT; ++s) {
                o.force_rope_site = s;
                mla_status st = mla_plan_create(&c, &o, &p);
                CHECK_STATUS(st, MLA_OK);
                if (st == MLA_OK)
                    CHECK(mla_plan_rope_site(p) == (mla_rope_site)s);
                mla_plan_destroy(st == MLA_OK ? p : NULL);
            }
        }
}

int main(void)
{
    plan_choices();
    run_backend(MLA_BACKEND_REFERENCE);
    run_backend(MLA_BACKEND_CPU);
    run_backend(MLA_BACKEND_HIP);
    return TEST_SUMMARY();
}
