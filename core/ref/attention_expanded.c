/* Reference expanded attention (MLA.md section 2, "The expanded form";
 * include/mla/mla_attention.h, mla_attention_expanded).
 *
 * For sequence s with c_s keys and n_s query rows, every key t < c_s is
 * decompressed per head from its cached latent row c_t (the first L values,
 * dequantized exactly by mla_ref_cache_read_row) through kv_b_proj
 * (W[n, d] = the bf16 value, or the fp8 code times its 128 x 128 block
 * scale):
 *
 *     K_nope[t, h, i] = sum_d W[h (nope + v) + i, d]        c_t[d]
 *     V[t, h, j]      = sum_d W[h (nope + v) + nope + j, d] c_t[d]
 *
 * and its rope part k_pe_t = row[L:] (rotated when it was written; never
 * again) serves every head. Row j (r = cu_q[s] + j) at position p = c_s -
 * n_s + j, head h:
 *
 *     score_t    = softmax_scale * (q_nope[r, h] . K_nope[t, h] + q_pe[r, h] . k_pe_t)
 *     m          = max_{t <= p} score_t,  w_t = e^(score_t - m),  Z = sum_{t <= p} w_t
 *     o[r, h, :] = sum_{t <= p} w_t V[t, h, :] / Z,  lse[r, h] = m + ln Z
 *
 * every product and sum in float64, o rounded once to its dtype and lse once
 * to fp32. A padding sequence (c_s == 0): o = 0, lse = -inf. */
#include <math.h>
#include <stdlib.h>

#include "core/attention_expanded.h"
#include "core/checked.h"
#include "core/ref/ref_kernels.h"
#include "core/ref/tensor_access.h"

#define WEIGHT_BLOCK 128 /* DeepSeek fp8 checkpoints: one scale per 128 x 128 block */

/* kv_b_proj[n, d], dequantized. */
static double weight(const mla_attention_expanded_op_args *a, int64_t n, int64_t d)
{
    const double w = mla_ref_load_f64(&a->kv_b, mla_ref_offset2(&a->kv_b, n, d));
    if (!a->kv_b_scale.data)
        return w;
    return w * mla_ref_load_f64(&a->kv_b_scale, mla_ref_offset2(&a->kv_b_scale, n / WEIGHT_BLOCK,
                                                                 d / WEIGHT_BLOCK));
}

/* Sequence s's keys: kv[t, n] = sum_d W[n, d] c_t[d] ([c, H (nope + v)]) and
 * pe[t, :] = k_pe_t ([c, R]); W [N, L] is kv_b_proj dequantized. */
static void decompress(const mla_attention_expanded_op_args *a, int64_t s, int64_t c,
                       const double *W, double *row, double *kv, double *pe)
{
    const mla_attention_expanded_desc *d = &a->desc;
    const int64_t L = d->cache.kv_lora, R = d->cache.rope, bs = d->cache.block_size;
    const int64_t N = d->heads * (d->nope + d->v);
    for (int64_t t = 0; t < c; ++t) {
        const int64_t block = mla_ref_load_index(&a->block_table,
                                                 mla_ref_offset2(&a->block_table, s, t / bs));
        mla_ref_cache_read_row(&d->cache, &a->cache, block, t % bs, row);
        for (int64_t n = 0; n < N; ++n) {
            double acc = 0.0;
            for (int64_t i = 0; i < L; ++i)
                acc += W[n * L + i] * row[i];
            kv[t * N + n] = acc;
        }
        for (int64_t i = 0; i < R; ++i)
            pe[t * R + i] = row[L + i];
    }
}

/* One (row r at position p, head h): the formulas of the header. */
static void attend(const mla_attention_expanded_op_args *a, int64_t r, int64_t h, int64_t p,
                   const double *kv, const double *pe, double *q, double *score)
{
    const mla_attention_expanded_desc *d = &a->desc;
    const int64_t nope = d->nope, v = d->v, R = d->cache.rope, N = d->heads * (nope + v);
    for (int64_t i = 0; i < nope; ++i)
        q[i] = mla_ref_load_f64(&a->q_nope, mla_ref_offset3(&a->q_nope, r, h, i));
    for (int64_t i = 0; i < R; ++i)
        q[nope + i] = mla_ref_load_f64(&a->q_pe, mla_ref_offset3(&a->q_pe, r, h, i));
    double m = -INFINITY;
    for (int64_t t = 0; t <= p; ++t) {
        const double *k = kv + t * N + h * (nope + v);
        double dot = 0.0;
        for (int64_t i = 0; i < nope; ++i)
            dot += q[i] * k[i];
        for (int64_t i = 0; i < R; ++i)
            dot += q[nope + i] * pe[t * R + i];
        score[t] = (double)d->softmax_scale * dot;
        m = score[t] > m ? score[t] : m;
    }
    double Z = 0.0;
    for (int64_t t = 0; t <= p; ++t) {
        score[t] = exp(score[t] - m);
        Z += score[t];
    }
    for (int64_t j = 0; j < v; ++j) {
        double acc = 0.0;
        for (int64_t t = 0; t <= p; ++t)
            acc += score[t] * kv[t * N + h * (nope + v) + nope + j];
        mla_ref_store_f64(&a->o, mla_ref_offset3(&a->o, r, h, j), acc / Z, MLA_SATURATE);
    }
    if (a->lse.data)
        mla_ref_store_f64(&a->lse, mla_ref_offset2(&a->lse, r, h), m + log(Z), MLA_SATURATE);
}

/* A padding sequence's rows: o = 0, lse = -inf. */
static void padding_row(const mla_attention_expanded_op_args *a, int64_t r)
{
    for (int64_t h = 0; h < a->desc.heads; ++h) {
        for (int64_t j = 0; j < a->desc.v; ++j)
            mla_ref_store_f64(&a->o, mla_ref_offset3(&a->o, r, h, j), 0.0, MLA_SATURATE);
        if (a->lse.data)
            mla_ref_store_f64(&a->lse, mla_ref_offset2(&a->lse, r, h), -INFINITY, MLA_SATURATE);
    }
}

mla_status mla_ref_attention_expanded(mla_context *ctx, const mla_attention_expanded_op_args *a)
{
    const mla_attention_expanded_desc *d = &a->desc;
    const int64_t L = d->cache.kv_lora, R = d->cache.rope;
    const int64_t N = d->heads * (d->nope + d->v), cmax = a->Nk > 0 ? a->Nk : 1;
    double *W = NULL, *row = NULL, *kv = NULL, *pe = NULL, *score = NULL, *q = NULL;
    mla_status st = mla_alloc_array(ctx, (void **)&W, N, L, sizeof(double), "kv_b_proj");
    if (st == MLA_OK)
        st = mla_alloc_array(ctx, (void **)&row, L + R, 1, sizeof(double), "cache");
    if (st == MLA_OK) /* a sequence's keys: at most all of them */
        st = mla_alloc_array(ctx, (void **)&kv, cmax, N, sizeof(double), "context_lens");
    if (st == MLA_OK)
        st = mla_alloc_array(ctx, (void **)&pe, cmax, R, sizeof(double), "context_lens");
    if (st == MLA_OK)
        st = mla_alloc_array(ctx, (void **)&score, cmax, 1, sizeof(double), "context_lens");
    if (st == MLA_OK)
        st = mla_alloc_array(ctx, (void **)&q, d->nope + R, 1, sizeof(double), "q_nope");
    for (int64_t n = 0; st == MLA_OK && n < N; ++n)
        for (int64_t i = 0; i < L; ++i)
            W[n * L + i] = weight(a, n, i);
    for (int64_t s = 0; st == MLA_OK && s < a->S; ++s) {
        const int64_t c = a->ctx_host[s], r0 = a->cu_host[s], r1 = a->cu_host[s + 1];
        if (c == 0) {
            for (int64_t r = r0; r < r1; ++r)
                padding_row(a, r);
            continue;
        }
        if (r1 == r0)
            continue; /* no rows: nothing to decompress */
        decompress(a, s, c, W, row, kv, pe);
        for (int64_t r = r0; r < r1; ++r)
            for (int64_t h = 0; h < d->heads; ++h)
                attend(a, r, h, c - (r1 - r0) + (r - r0), kv, pe, q, score);
    }
    free(W);
    free(row);
    free(kv);
    free(pe);
    free(score);
    free(q);
    return st;
}
