/* Tensor-parallel slices (mla_layer_load_options rank / world_size): every
 * rank of world sizes 2 and 8 run in one process, on the reference and the
 * CPU backend; the ranks' partial outputs summed against the whole layer's.
 *
 * The bound. The ranks' heads are computed by the same kernels on the same
 * inputs as in the whole layer (row-wise GEMMs, per-head attention with the
 * split count fixed at 1), so rank r's W_vc output o_r is the whole layer's
 * o restricted to its heads; the replicated parts (q_a, kv_a, the norms,
 * the cache) are the same bits, which the test checks on the cache. What
 * differs is o_proj's reduction: y = sum_k o_k W[i, k] over K = H v terms in
 * one fp32 dot product, against W dot products of K / W terms added in
 * float64 by the test. An fp32 dot product of n terms is within
 * gamma_{n+3} S_i of the exact sum in any summation order (three more
 * roundings for fp8 dequantization: conformance/bounds.c, conf_gemm_tol),
 * S_i = sum_k |o_k| |W[i, k]|; the float64 sum of W values adds W 2^-53 sum
 * |y_r|. So
 *   |sum_r y_r[i] - y[i]| <= (gamma_{K+3} + gamma_{K/W+3}) S_i + W 2^-52 sum_r |y_r[i]|.
 * S_i needs |o_k|, which the test does not see; it is bounded from what it
 * does: o_lat[h, l] is a softmax-weighted mean of the cached k_nope[t, l],
 * so |o_lat[h, l]| <= (1 + (2n + 8) u) max_t |k[t, l]| (n <= 16 visible
 * keys: the fp32 weights' and normalizer's roundings, exp within 2 ulp),
 * and o[h, j] = fl(sum_l o_lat[h, l] W_vc[h, l, j]) is at most (1 +
 * gamma_{L+3}) times sum_l max|o_lat[., l]| |W_vc[h, l, j]|. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mla/mla.h"
#include "tests/test_util.h"

#define U32 0x1p-24
enum { BS = 16, S = 2, PREFILL = 5, NB = 2 };

static double gamma_n(double n) { return n * U32 / (1.0 - n * U32); }

/* H 16 heads: 2 per rank at world size 8, where each fp8 slice is still whole
 * 128 x 128 blocks (2 (nope + R) = 2 (nope + v) = 256 rows, 2 v = 128 columns). */
static const char *const tp_config =
    "{\"model_type\": \"deepseek_v3\", \"hidden_size\": 256, \"num_attention_heads\": 16, "
    "\"num_hidden_layers\": 2, \"q_lora_rank\": 128, \"kv_lora_rank\": 128, "
    "\"qk_nope_head_dim\": 64, \"qk_rope_head_dim\": 64, \"v_head_dim\": 64, "
    "\"max_position_embeddings\": 64, \"rms_norm_eps\": 1e-06, \"rope_theta\": 10000, "
    "\"rope_scaling\": {\"type\": \"yarn\", \"factor\": 4, \"original_max_position_embeddings\": "
    "16, \"mscale\": 1.0, \"mscale_all_dim\": 1.0}}";

static const char *dir = "test_tp_slice.tmp";

typedef struct run_out {
    float *y[2];    /* prefill [S * PREFILL, hidden], decode [S, hidden] */
    uint8_t *cache; /* after both steps */
    size_t cache_bytes;
} run_out;

static void run_free(run_out *o)
{
    free(o->y[0]), free(o->y[1]), free(o->cache);
    memset(o, 0, sizeof *o);
}

static mla_tensor tensor(mla_context *ctx, mla_dtype dt, int32_t nd, const int64_t *shape,
                         const void *host)
{
    mla_tensor t;
    mla_tensor_init(&t, NULL, dt, mla_context_memory(ctx), nd, shape);
    const size_t b = (size_t)mla_tensor_numel(&t) * mla_dtype_size(dt);
    mla_malloc(ctx, b ? b : 1, &t.data);
    if (host)
        mla_memcpy(ctx, t.data, host, b, MLA_COPY_HOST_TO_CONTEXT);
    else
        mla_memset(ctx, t.data, 0, b ? b : 1);
    return t;
}

static void *download(mla_context *ctx, const mla_tensor *t)
{
    const size_t b = (size_t)mla_tensor_numel(t) * mla_dtype_size(t->dtype);
    void *h = malloc(b + 1);
    mla_memcpy(ctx, h, t->data, b, MLA_COPY_CONTEXT_TO_HOST);
    return h;
}

/* x of both steps, f32 in [-1, 1), the same for every rank. */
static void fill_x(float *x, int64_t n, uint32_t seed)
{
    for (int64_t i = 0; i < n; ++i) {
        seed = seed * 1664525u + 1013904223u;
        x[i] = (float)((double)(seed >> 8) / 8388608.0 - 1.0);
    }
}

/* A prefill of PREFILL tokens for each of S sequences, then one decode step. */
static mla_status run(mla_context *ctx, const mla_layer_weights_ex *w, run_out *out)
{
    const mla_model_config *c = &w->config;
    const int64_t hid = c->hidden, P = c->max_pos, half = c->rope / 2;
    mla_status st = MLA_OK;
    float *hc = malloc((size_t)(P * half) * 4), *hs = malloc((size_t)(P * half) * 4);
    mla_rope_table_build(&c->rope_cfg, P, hc, hs);
    mla_tensor cos = tensor(ctx, MLA_DTYPE_F32, 2, (int64_t[]){P, half}, hc);
    mla_tensor sin = tensor(ctx, MLA_DTYPE_F32, 2, (int64_t[]){P, half}, hs);
    mla_cache_desc cd = {MLA_CACHE_NORMAL, MLA_DTYPE_BF16, NB, BS, c->kv_lora, c->rope, 1.0f};
    int64_t bb = 0;
    mla_cache_block_bytes(&cd, &bb);
    mla_tensor cache = tensor(ctx, MLA_DTYPE_U8, 2, (int64_t[]){NB, bb}, NULL);
    const int32_t bt[S] = {1, 0};
    mla_tensor bt_t = tensor(ctx, MLA_DTYPE_I32, 2, (int64_t[]){S, 1}, bt);
    mla_plan *plan = NULL;
    mla_plan_options po;
    mla_plan_options_default(mla_context_target(ctx), &po);
    po.weight_dtype = w->base.o_proj.w.dtype;
    st = mla_plan_create(c, &po, &plan);
    mla_layer_options opt;
    mla_layer_options_default(c, &cd, &opt);
    opt.act = MLA_DTYPE_F32;
    opt.num_splits = 1;
    int64_t wsb = 0;
    if (st == MLA_OK)
        st = mla_layer_workspace_bytes(ctx, plan, &opt, S * PREFILL, S, PREFILL + 1, &wsb);
    mla_tensor ws = tensor(ctx, MLA_DTYPE_U8, 1, &wsb, NULL);
    for (int step = 0; step < 2 && st == MLA_OK; ++step) {
        const int64_t T = step ? S : S * PREFILL;
        int64_t pos[S * PREFILL], slot[S * PREFILL];
        int32_t cu[S + 1] = {0}, lens[S];
        for (int64_t s = 0; s < S; ++s) {
            const int64_t n = step ? 1 : PREFILL;
            cu[s + 1] = (int32_t)((s + 1) * n);
            lens[s] = step ? PREFILL + 1 : PREFILL;
            for (int64_t j = 0; j < n; ++j) {
                const int64_t p = step ? PREFILL : j;
                pos[s * n + j] = p;
                slot[s * n + j] = bt[s] * BS + p;
            }
        }
        float *xh = malloc((size_t)(T * hid) * 4);
        fill_x(xh, T * hid, 11u + (uint32_t)step);
        mla_tensor x = tensor(ctx, MLA_DTYPE_F32, 2, (int64_t[]){T, hid}, xh);
        mla_tensor y = tensor(ctx, MLA_DTYPE_F32, 2, (int64_t[]){T, hid}, NULL);
        mla_tensor pt = tensor(ctx, MLA_DTYPE_I64, 1, &T, pos);
        mla_tensor sl = tensor(ctx, MLA_DTYPE_I64, 1, &T, slot);
        mla_tensor ln = tensor(ctx, MLA_DTYPE_I32, 1, (int64_t[]){S}, lens);
        mla_tensor cut = tensor(ctx, MLA_DTYPE_I32, 1, (int64_t[]){S + 1}, cu);
        mla_layer_batch b = {&pt, &sl, &bt_t, &ln, &cut, 1};
        mla_layer_buffers bufs = {&cos, &sin, &cache, NULL, &ws};
        mla_layer_plan *lp = NULL;
        st = mla_layer_plan_create(ctx, plan, &cd, &opt, &b, PREFILL + 1, &bufs, &lp);
        if (st == MLA_OK)
            st = mla_layer_forward(ctx, lp, w, &x, &y);
        if (st == MLA_OK)
            st = mla_context_synchronize(ctx);
        if (st == MLA_OK)
            out->y[step] = download(ctx, &y);
        else
            fprintf(stderr, "forward: %s (%s: %s)\n", mla_status_name(st),
                    mla_context_error_param(ctx), mla_context_error_detail(ctx));
        mla_layer_plan_destroy(lp);
        mla_tensor all[] = {x, y, pt, sl, ln, cut};
        for (int i = 0; i < 6; ++i)
            mla_free(ctx, all[i].data);
        free(xh);
    }
    if (st == MLA_OK) {
        out->cache = download(ctx, &cache);
        out->cache_bytes = (size_t)(NB * bb);
    }
    mla_tensor all[] = {cos, sin, cache, bt_t, ws};
    for (int i = 0; i < 5; ++i)
        mla_free(ctx, all[i].data);
    mla_plan_destroy(plan);
    free(hc), free(hs);
    return st;
}

/* Element (r, c) of a loaded BF16 or FP8_BLOCK projection, from host copies. */
static double weight_at(const mla_tensor *w, const void *wh, const float *sh, int64_t r, int64_t c)
{
    const int64_t in = w->shape[1];
    if (w->dtype == MLA_DTYPE_BF16)
        return mla_bf16_to_f32(((const uint16_t *)wh)[r * in + c]);
    const int64_t sb = (in + 127) / 128;
    return (double)mla_fp8_to_f32(((const uint8_t *)wh)[r * in + c], w->dtype) *
           sh[(r / 128) * sb + c / 128];
}

/* S_i of the header for every output i (the whole layer's weights). */
static double *dot_magnitudes(mla_context *ctx, const mla_layer_weights_ex *w, const uint8_t *cache,
                              int64_t bb)
{
    const mla_model_config *c = &w->config;
    const int64_t H = c->heads, L = c->kv_lora, v = c->v, nope = c->nope, hid = c->hidden;
    /* max_t |k_nope[t, l]| over the written rows (NORMAL bf16 rows of L + R) */
    double *kmax = calloc((size_t)L, 8);
    const int32_t blocks[S] = {1, 0};
    for (int s = 0; s < S; ++s)
        for (int64_t t = 0; t <= PREFILL; ++t) {
            const uint16_t *row = (const uint16_t *)(cache + blocks[s] * bb) + t * (L + c->rope);
            for (int64_t l = 0; l < L; ++l)
                kmax[l] = fmax(kmax[l], fabs(mla_bf16_to_f32(row[l])));
        }
    const double att = 1.0 + (2.0 * (PREFILL + 1) + 8.0) * U32;
    uint16_t *kvb = download(ctx, &w->base.kv_b_proj.w); /* bf16 [H (nope + v), L] */
    void *wo = download(ctx, &w->base.o_proj.w);
    float *so = w->base.o_proj.scale.data ? download(ctx, &w->base.o_proj.scale) : NULL;
    double *omax = malloc((size_t)(H * v) * 8), *Si = calloc((size_t)hid, 8);
    for (int64_t h = 0; h < H; ++h)
        for (int64_t j = 0; j < v; ++j) {
            double m = 0;
            for (int64_t l = 0; l < L; ++l)
                m +=
                    att * kmax[l] * fabs(mla_bf16_to_f32(kvb[(h * (nope + v) + nope + j) * L + l]));
            omax[h * v + j] = (1.0 + gamma_n((double)L + 3.0)) * m;
        }
    for (int64_t i = 0; i < hid; ++i)
        for (int64_t k = 0; k < H * v; ++k)
            Si[i] += omax[k] * fabs(weight_at(&w->base.o_proj.w, wo, so, i, k));
    free(kmax), free(kvb), free(wo), free(so), free(omax);
    return Si;
}

static mla_status load(mla_context *ctx, int32_t rank, int32_t world, mla_layer_weights_ex *w)
{
    mla_checkpoint *ck = NULL;
    mla_status st = mla_checkpoint_open(ctx, dir, &ck);
    mla_layer_load_options lo;
    mla_layer_load_options_default(&lo);
    lo.rank = rank;
    lo.world_size = world;
    lo.kv_b_fp8 = MLA_KV_B_FP8_TO_BF16;
    if (st == MLA_OK)
        st = mla_layer_weights_load_checkpoint(ctx, ck, 1, &lo, w);
    mla_checkpoint_close(ck);
    return st;
}

static void check_world(mla_context *ctx, const mla_layer_weights_ex *whole, const run_out *ref,
                        const double *Si, int32_t W)
{
    const mla_model_config *c = &whole->config;
    const int64_t hid = c->hidden, K = c->heads * c->v;
    const int64_t T[2] = {S * PREFILL, S};
    double *sum[2], *mag[2];
    for (int k = 0; k < 2; ++k) {
        sum[k] = calloc((size_t)(T[k] * hid), 8);
        mag[k] = calloc((size_t)(T[k] * hid), 8);
    }
    float *r0 = calloc((size_t)hid, sizeof *r0);
    int ok = 1;
    for (int32_t r = 0; r < W && ok; ++r) {
        mla_layer_weights_ex w;
        run_out o = {0};
        ok = load(ctx, r, W, &w) == MLA_OK;
        CHECK(ok);
        if (!ok)
            break;
        CHECK(w.config.heads == c->heads / W && w.tp_rank == r && w.tp_world_size == W);
        CHECK(w.base.o_proj.w.shape[1] == K / W &&
              w.base.kv_b_proj.w.shape[0] == c->heads / W * (c->nope + c->v));
        ok = run(ctx, &w, &o) == MLA_OK;
        CHECK(ok);
        /* the replicated latent path: the same cache bits on every rank */
        CHECK(ok && o.cache_bytes == ref->cache_bytes &&
              !memcmp(o.cache, ref->cache, o.cache_bytes));
        if (ok && r == 0) /* rank 0's prefill row 0, for the negative control */
            memcpy(r0, o.y[0], (size_t)hid * sizeof *r0);
        for (int k = 0; ok && k < 2; ++k)
            for (int64_t i = 0; i < T[k] * hid; ++i) {
                sum[k][i] += o.y[k][i];
                mag[k][i] += fabs(o.y[k][i]);
            }
        run_free(&o);
        mla_layer_weights_free(ctx, &w);
    }
    const double g = gamma_n((double)K + 3.0) + gamma_n((double)(K / W) + 3.0);
    double worst = 0, worst_err = 0, dropped = 0;
    for (int k = 0; ok && k < 2; ++k)
        for (int64_t t = 0; t < T[k]; ++t)
            for (int64_t i = 0; i < hid; ++i) {
                const int64_t e = t * hid + i;
                const double bound = g * Si[i] + (double)W * 0x1p-52 * mag[k][e];
                const double err = fabs(sum[k][e] - ref->y[k][e]);
                if (err / bound > worst)
                    worst = err / bound, worst_err = err;
                if (k == 0 && t == 0) /* negative control: the sum without rank 0 */
                    dropped = fmax(dropped, fabs(sum[k][e] - r0[e] - ref->y[k][e]) / bound);
            }
    printf("%s, world size %d: worst element at %.3g of its bound (|err| %.3g); without rank 0 "
           "at %.3g\n",
           mla_backend_name(mla_context_backend(ctx)), (int)W, worst, worst_err, dropped);
    CHECK(ok && worst <= 1.0);
    CHECK(!ok || dropped > 1.0);
    free(r0);
    for (int k = 0; k < 2; ++k)
        free(sum[k]), free(mag[k]);
}

static void test_forward(mla_backend b, const mla_layer_weight_formats *fm, const char *what)
{
    mla_context *ctx = NULL;
    if (mla_context_create(b, NULL, &ctx) != MLA_OK)
        return;
    mla_hf_config hc;
    CHECK_STATUS(mla_hf_config_parse(ctx, tp_config, strlen(tp_config), &hc), MLA_OK);
    mla_generate_options go;
    mla_generate_options_default(&go);
    go.count = 2;
    go.seed = 3;
    go.formats = fm;
    go.shards = 2;
    CHECK_STATUS(mla_checkpoint_generate(ctx, dir, &hc.model, &go), MLA_OK);
    mla_layer_weights_ex whole;
    run_out ref = {0};
    CHECK_STATUS(load(ctx, 0, 1, &whole), MLA_OK);
    CHECK_STATUS(run(ctx, &whole, &ref), MLA_OK);
    printf("%s weights: ", what);
    if (ref.cache) {
        int64_t bb = 0;
        mla_cache_desc cd = {MLA_CACHE_NORMAL, MLA_DTYPE_BF16, NB,  BS,
                             hc.model.kv_lora, hc.model.rope,  1.0f};
        mla_cache_block_bytes(&cd, &bb);
        double *Si = dot_magnitudes(ctx, &whole, ref.cache, bb);
        check_world(ctx, &whole, &ref, Si, 2);
        check_world(ctx, &whole, &ref, Si, 8);
        free(Si);
    }
    run_free(&ref);
    mla_layer_weights_free(ctx, &whole);
    mla_context_destroy(ctx);
}

/* Bytes of rows [r0, r0 + nr) and byte columns [c0, c0 + nc) of a host copy
 * of a contiguous 2-D tensor equal another tensor's whole bytes. */
static int is_slice(mla_context *ctx, const mla_tensor *whole, const mla_tensor *part, int64_t r0,
                    int64_t c0_bytes)
{
    const size_t es = mla_dtype_size(whole->dtype);
    const int64_t rb = whole->shape[1] * (int64_t)es, pb = part->shape[1] * (int64_t)es;
    uint8_t *a = download(ctx, whole), *b = download(ctx, part);
    int same = whole->dtype == part->dtype;
    for (int64_t r = 0; same && r < part->shape[0]; ++r)
        same = !memcmp(a + (r0 + r) * rb + c0_bytes, b + r * pb, (size_t)pb);
    free(a), free(b);
    return same;
}

/* Each rank's tensors are exactly its rows / columns of the whole layer's,
 * the fp8 block scales and MXFP4 scales with them; replicated ones equal. */
static void test_slices(mla_context *ctx, const mla_layer_weight_formats *fm)
{
    mla_hf_config hc;
    mla_hf_config_parse(ctx, tp_config, strlen(tp_config), &hc);
    mla_generate_options go;
    mla_generate_options_default(&go);
    go.count = 2;
    go.formats = fm;
    CHECK_STATUS(mla_checkpoint_generate(ctx, dir, &hc.model, &go), MLA_OK);
    mla_layer_weights_ex whole;
    CHECK_STATUS(load(ctx, 0, 1, &whole), MLA_OK);
    const mla_model_config *c = &hc.model;
    const int32_t W = 8;
    const int64_t Hl = c->heads / W, qk = c->nope + c->rope, dv = c->nope + c->v;
    for (int32_t r = 0; r < W; ++r) {
        mla_layer_weights_ex w;
        if (load(ctx, r, W, &w) != MLA_OK) {
            CHECK(0);
            continue;
        }
        const mla_layer_weights *a = &whole.base, *b = &w.base;
        const int mx_o = w.formats.o_proj == MLA_WEIGHT_MXFP4;
        const int64_t cb = w.base.o_proj.w.dtype == MLA_DTYPE_FP4X2
                               ? r * Hl * c->v / 2
                               : (int64_t)mla_dtype_size(w.base.o_proj.w.dtype) * r * Hl * c->v;
        CHECK(is_slice(ctx, &a->q_b_proj.w, &b->q_b_proj.w, r * Hl * qk, 0));
        CHECK(is_slice(ctx, &a->kv_b_proj.w, &b->kv_b_proj.w, r * Hl * dv, 0));
        CHECK(is_slice(ctx, &a->o_proj.w, &b->o_proj.w, 0, cb));
        CHECK(is_slice(ctx, &a->q_a_proj.w, &b->q_a_proj.w, 0, 0));
        CHECK(is_slice(ctx, &a->kv_a_proj_with_mqa.w, &b->kv_a_proj_with_mqa.w, 0, 0));
        if (w.formats.q_b_proj == MLA_WEIGHT_FP8_BLOCK)
            CHECK(is_slice(ctx, &a->q_b_proj.scale, &b->q_b_proj.scale, r * Hl * qk / 128, 0));
        if (w.formats.o_proj == MLA_WEIGHT_FP8_BLOCK)
            CHECK(is_slice(ctx, &a->o_proj.scale, &b->o_proj.scale, 0, r * Hl * c->v / 128 * 4));
        if (mx_o)
            CHECK(is_slice(ctx, &a->o_proj.scale, &b->o_proj.scale, 0, r * Hl * c->v / 32));
        if (w.formats.kv_b_proj == MLA_WEIGHT_MXFP4) {
            CHECK(is_slice(ctx, &a->kv_b_proj.scale, &b->kv_b_proj.scale, r * Hl * dv, 0));
            /* W_kc, made at load from the rank's rows: the whole one's heads */
            mla_tensor wc = whole.w_kc_fp4.codes, pc = w.w_kc_fp4.codes;
            wc.ndim = pc.ndim = 2;
            wc.shape[0] *= wc.shape[1], pc.shape[0] *= pc.shape[1];
            wc.shape[1] = pc.shape[1] = pc.shape[2];
            CHECK(is_slice(ctx, &wc, &pc, r * Hl * c->kv_lora, 0));
        }
        mla_layer_weights_free(ctx, &w);
    }
    mla_layer_weights_free(ctx, &whole);
}

static void expect_load(mla_context *ctx, const char *ckdir, int32_t rank, int32_t world,
                        mla_status want, const char *param)
{
    mla_checkpoint *ck = NULL;
    mla_layer_weights_ex w, probe;
    memset(&w, 0x5A, sizeof w);
    memset(&probe, 0x5A, sizeof probe);
    mla_layer_load_options lo;
    mla_layer_load_options_default(&lo);
    lo.rank = rank;
    lo.world_size = world;
    mla_status st = mla_checkpoint_open(ctx, ckdir, &ck);
    if (st == MLA_OK)
        st = mla_layer_weights_load_checkpoint(ctx, ck, 0, &lo, &w);
    mla_checkpoint_close(ck);
    const int ok = st == want && !strcmp(mla_context_error_param(ctx), param);
    if (!ok)
        fprintf(stderr, "rank %d of %d: %s (%s: %s), expected %s (%s)\n", (int)rank, (int)world,
                mla_status_name(st), mla_context_error_param(ctx), mla_context_error_detail(ctx),
                mla_status_name(want), param);
    CHECK(ok);
    if (st == MLA_OK)
        mla_layer_weights_free(ctx, &w);
    else
        CHECK(!memcmp(&w, &probe, sizeof w)); /* nothing written */
}

static void test_refusals(mla_context *ctx)
{
    mla_model_config tiny; /* H 4, nope 32, R 16, v 32 */
    mla_model_config_preset("test-tiny", &tiny);
    const mla_layer_weight_formats fp8 = {MLA_WEIGHT_FP8_BLOCK,
                                          MLA_WEIGHT_FP8_BLOCK,
                                          MLA_WEIGHT_FP8_BLOCK,
                                          MLA_WEIGHT_BF16,
                                          MLA_WEIGHT_BF16,
                                          0,
                                          0,
                                          0};
    mla_generate_options go;
    mla_generate_options_default(&go);
    go.formats = &fp8;
    CHECK_STATUS(mla_checkpoint_generate(ctx, dir, &tiny, &go), MLA_OK);
    expect_load(ctx, dir, 0, 8, MLA_ERR_INVALID_ARGUMENT, "options.world_size");
    expect_load(ctx, dir, 0, 3, MLA_ERR_INVALID_ARGUMENT, "options.world_size");
    expect_load(ctx, dir, 0, -2, MLA_ERR_INVALID_ARGUMENT, "options.world_size");
    expect_load(ctx, dir, 2, 2, MLA_ERR_OUT_OF_RANGE, "options.rank");
    expect_load(ctx, dir, -1, 2, MLA_ERR_OUT_OF_RANGE, "options.rank");
    /* 2 heads of 48 q rows: 96, not whole 128-row blocks */
    expect_load(ctx, dir, 1, 2, MLA_ERR_SHAPE, "model.layers.0.self_attn.q_b_proj.weight");
    mla_layer_weight_formats o8 = {0};
    o8.o_proj = MLA_WEIGHT_FP8_BLOCK; /* 2 heads of v 32: 64 of o_proj's 128-column blocks */
    go.formats = &o8;
    CHECK_STATUS(mla_checkpoint_generate(ctx, dir, &tiny, &go), MLA_OK);
    expect_load(ctx, dir, 0, 2, MLA_ERR_SHAPE, "model.layers.0.self_attn.o_proj.weight");
    expect_load(ctx, dir, 0, 4, MLA_ERR_SHAPE, "model.layers.0.self_attn.o_proj.weight");
    o8.o_proj = MLA_WEIGHT_MXFP4; /* 1 head of v 32: whole 32-value blocks */
    CHECK_STATUS(mla_checkpoint_generate(ctx, dir, &tiny, &go), MLA_OK);
    expect_load(ctx, dir, 3, 4, MLA_OK, "");
}

int main(void)
{
    const mla_layer_weight_formats bf16 = {0};
    const mla_layer_weight_formats fp8 = {MLA_WEIGHT_FP8_BLOCK,
                                          MLA_WEIGHT_FP8_BLOCK,
                                          MLA_WEIGHT_FP8_BLOCK,
                                          MLA_WEIGHT_FP8_BLOCK,
                                          MLA_WEIGHT_FP8_BLOCK,
                                          0,
                                          0,
                                          0};
    const mla_layer_weight_formats mx = {MLA_WEIGHT_BF16,
                                         MLA_WEIGHT_MXFP4,
                                         MLA_WEIGHT_BF16,
                                         MLA_WEIGHT_MXFP4,
                                         MLA_WEIGHT_MXFP4,
                                         0,
                                         0,
                                         0};
    test_forward(MLA_BACKEND_REFERENCE, &bf16, "bf16");
    test_forward(MLA_BACKEND_CPU, &bf16, "bf16");
    test_forward(MLA_BACKEND_REFERENCE, &fp8, "fp8 (kv_b_proj to bf16)");
    test_forward(MLA_BACKEND_CPU, &fp8, "fp8 (kv_b_proj to bf16)");
    mla_context *ctx = NULL;
    if (mla_context_create(MLA_BACKEND_REFERENCE, NULL, &ctx) != MLA_OK)
        return 1;
    test_slices(ctx, &fp8);
    test_slices(ctx, &mx);
    test_refusals(ctx);
    mla_context_destroy(ctx);
    return TEST_SUMMARY();
}
