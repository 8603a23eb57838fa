/* Controls of the attention conformance (conformance/cases_attention.c).
 *
 * A test kernel written here the way a fast backend computes: the plan's
 * work list (split chunks, empty items), per item an online softmax in fp32
 * (fp32 dot products, expf, running-max rescales), P rounded to bf16 before
 * P @ V, partials in the plan's workspace and a combine by their lse, sinks
 * in the combine. Correct, it must PASS every case (the bound admits that
 * arithmetic). With one bug each it must FAIL, caught by the bound:
 * - the causal mask among the new rows ignored (every row sees c_s keys:
 *   next_n 2 and prefill cases);
 * - a SHUFFLED cache read as NORMAL;
 * - an empty split given the weight of lse 0 instead of -inf (forced splits
 *   beyond the keys);
 * - the sinks dropped.
 * The kernel runs on the reference table (host memory). */
#include <math.h>
#include <stdio.h>

#include "core/attention_plan.h"
#include "core/ref/ref_kernels.h"
#include "tests/conformance_negative.h"

enum { BUG_NONE, BUG_NO_CAUSAL, BUG_SHUFFLED_AS_NORMAL, BUG_EMPTY_SPLIT_WEIGHT, BUG_NO_SINKS };
static int bug;

static int64_t idx2(const mla_tensor *t, int64_t i, int64_t j)
{
    int32_t v;
    memcpy(&v, neg_at(t, i * t->stride[0] + j * t->stride[1]), 4);
    return v;
}

static int64_t idx1(const mla_tensor *t, int64_t i) { return neg_index(t, i); }

/* bf16 rounding of a probability (RNE), as FlashMLA feeds P to the MMA. */
static float to_bf16(float p) { return mla_bf16_to_f32(mla_f32_to_bf16(p)); }

/* One partial: the online softmax of row r, head h over items b..e-1. */
static void partial(const mla_attention_op_args *a, const mla_cache_desc *cd, int64_t s, int64_t r,
                    int64_t h, int64_t b, int64_t e, float *o, float *lse, float *q, float *key,
                    double *kd)
{
    const mla_attention_desc *d = &a->plan->desc;
    const int64_t L = cd->kv_lora, D = L + cd->rope, bs = cd->block_size;
    const int64_t c = idx1(&a->context_lens, s);
    const int64_t r0 = idx1(&a->cu_q_lens, s), n = idx1(&a->cu_q_lens, s + 1) - r0;
    const int64_t pos = bug == BUG_NO_CAUSAL ? c - 1 : c - n + (r - r0);
    const int fp8 = d->q_dtype == MLA_DTYPE_FP8_E4M3FN || d->q_dtype == MLA_DTYPE_FP8_E4M3FNUZ;
    for (int64_t i = 0; i < D; ++i)
        q[i] = neg_load(&a->q, r * a->q.stride[0] + h * a->q.stride[1] + i * a->q.stride[2]) *
               (fp8 ? d->q_scale : 1.0f);
    float m = -INFINITY, l = 0.0f;
    for (int64_t i = 0; i < L; ++i)
        o[i] = 0.0f;
    for (int64_t k = b; k < e; ++k) {
        const int64_t t = d->topk > 0 ? idx2(&a->topk_indices, r, k) : k;
        if (t < 0 || t > pos)
            continue;
        const int64_t blk = d->paged ? idx2(&a->block_table, s, t / bs) : s;
        mla_ref_cache_read_row(cd, &a->cache, blk, t % bs, kd);
        float dot = 0.0f;
        for (int64_t i = 0; i < D; ++i) {
            key[i] = (float)kd[i];
            dot += q[i] * key[i];
        }
        const float sc = dot * d->softmax_scale;
        if (sc > m) {
            const float f = expf(m - sc);
            l *= f;
            for (int64_t i = 0; i < L; ++i)
                o[i] *= f;
            m = sc;
        }
        const float pr = expf(sc - m), pb = to_bf16(pr);
        l += pr;
        for (int64_t i = 0; i < L; ++i)
            o[i] += pb * key[i];
    }
    for (int64_t i = 0; l > 0.0f && i < L; ++i)
        o[i] /= l;
    *lse = l > 0.0f ? m + logf(l) : (bug == BUG_EMPTY_SPLIT_WEIGHT && b == e ? 0.0f : -INFINITY);
}

/* o and lse of a row and head from its np partials (o_i, lse_i), the sink in the sum. */
static void combine(const mla_attention_op_args *a, int64_t r, int64_t h, const float *po,
                    const float *plse, int64_t np, int64_t pstride)
{
    const int64_t L = a->plan->desc.cache.kv_lora;
    const int sink = a->sinks.data && bug != BUG_NO_SINKS;
    float M = -INFINITY;
    for (int64_t i = 0; i < np; ++i)
        M = fmaxf(M, plse[i]);
    const int64_t oo = r * a->o.stride[0] + h * a->o.stride[1];
    if (M == -INFINITY) { /* no visible key */
        for (int64_t k = 0; k < L; ++k)
            neg_store(&a->o, oo + k * a->o.stride[2], 0.0f);
        if (a->lse.data)
            neg_store(&a->lse, r * a->lse.stride[0] + h * a->lse.stride[1], -INFINITY);
        return;
    }
    const float sv = sink ? neg_load(&a->sinks, h * a->sinks.stride[0]) : -INFINITY;
    const float top = fmaxf(M, sv);
    float Z = sink ? expf(sv - top) : 0.0f;
    for (int64_t i = 0; i < np; ++i)
        Z += expf(plse[i] - top);
    for (int64_t k = 0; k < L; ++k) {
        float acc = 0.0f;
        for (int64_t i = 0; i < np; ++i)
            if (plse[i] > -INFINITY)
                acc += expf(plse[i] - top) * po[i * pstride + k];
        neg_store(&a->o, oo + k * a->o.stride[2], acc / Z);
    }
    if (a->lse.data)
        neg_store(&a->lse, r * a->lse.stride[0] + h * a->lse.stride[1], top + logf(Z));
}

static mla_status fp32_attention(mla_context *ctx, const mla_attention_op_args *a)
{
    const mla_attention_plan *p = a->plan;
    const int64_t H = p->desc.heads, L = p->desc.cache.kv_lora, D = L + p->desc.cache.rope;
    const int64_t P = p->max_splits;
    mla_cache_desc cd = p->desc.cache;
    if (bug == BUG_SHUFFLED_AS_NORMAL && cd.layout == MLA_CACHE_SHUFFLED)
        cd.layout = MLA_CACHE_NORMAL;
    float *q = malloc((size_t)D * 4), *key = malloc((size_t)D * 4), *o = malloc((size_t)L * 4);
    double *kd = malloc((size_t)D * 8);
    if (!q || !key || !o || !kd) {
        free(q), free(key), free(o), free(kd);
        return mla_fail(ctx, MLA_ERR_OUT_OF_MEMORY, "o", "test kernel scratch");
    }
    float *part_o = P > 1 ? (float *)((char *)a->workspace + p->part_o_offset) : NULL;
    float *part_lse = P > 1 ? (float *)((char *)a->workspace + p->part_lse_offset) : NULL;
    for (int64_t w = 0; w < p->num_work; ++w) {
        const mla_attention_work *it = &p->work_host[w];
        const int64_t r0 = idx1(&a->cu_q_lens, it->seq), r1 = idx1(&a->cu_q_lens, it->seq + 1);
        for (int64_t r = r0; r < r1; ++r)
            for (int64_t h = 0; h < H; ++h) {
                float lse;
                partial(a, &cd, it->seq, r, h, it->kv_begin, it->kv_end, o, &lse, q, key, kd);
                if (p->splits_host[it->seq] == 1) {
                    combine(a, r, h, o, &lse, 1, L);
                    continue;
                }
                const int64_t slot = (r * H + h) * P + it->split;
                memcpy(part_o + slot * L, o, (size_t)L * 4);
                part_lse[slot] = lse;
            }
    }
    for (int64_t s = 0; s < p->S; ++s) {
        const int64_t r0 = idx1(&a->cu_q_lens, s), r1 = idx1(&a->cu_q_lens, s + 1);
        const int64_t np = p->splits_host[s];
        for (int64_t r = r0; np != 1 && r < r1; ++r)
            for (int64_t h = 0; h < H; ++h) /* np == 0: a padding sequence */
                combine(a, r, h, np ? part_o + (r * H + h) * P * L : o,
                        np ? part_lse + (r * H + h) * P : &(float){-INFINITY}, np ? np : 1, L);
    }
    free(q), free(key), free(o), free(kd);
    return MLA_OK;
}

void neg_attention_controls(const mla_backend_ops *from)
{
    if (from != &mla_reference_ops)
        return; /* host kernels written here: once is enough */
    mla_backend_ops t = *from;
    t.attention = fp32_attention;
    bug = BUG_NONE;
    neg_positive(from, &t, "fp32 online-softmax attention with bf16 P and the plan's splits",
                 "attention");
    bug = BUG_NO_CAUSAL;
    neg_negative(from, &t, "attention ignoring the causal mask among the new rows", "attention",
                 MLA_CONF_FAIL_BOUND);
    bug = BUG_SHUFFLED_AS_NORMAL;
    neg_negative(from, &t, "attention reading a SHUFFLED cache as NORMAL", "attention",
                 MLA_CONF_FAIL_BOUND);
    bug = BUG_EMPTY_SPLIT_WEIGHT;
    neg_negative(from, &t, "attention giving an empty split the weight of lse 0", "attention",
                 MLA_CONF_FAIL_BOUND);
    bug = BUG_NO_SINKS;
    neg_negative(from, &t, "attention dropping the sinks", "attention", MLA_CONF_FAIL_BOUND);
    bug = BUG_NONE;
}
