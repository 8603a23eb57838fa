/* Reference MLA attention (MLA.md section 2, step 7; include/mla/mla_attention.h).
 *
 * This is the absorbed attention: q is q_cat = [q_nope @ W_kc | RoPE(q_pe)]
 * ([T, H, L + R]), whose first L dims were absorbed into the latent space
 * before this call (step 4: mla_ref_batched_gemm in core/ref/gemm.c, called
 * by core/prepare.c), so every head scores directly against the cached
 * latent rows and no per-head key or value is ever formed. The output stays
 * latent ([T, H, L]); W_vc (step 8) takes it back to v dims afterwards.
 *
 * For sequence s with c_s keys and n_s query rows, row j (r = cu_q[s] + j)
 * sits at position p = c_s - n_s + j and sees the keys
 *
 *     dense:  t = 0 .. p
 *     sparse: t = topk[r, i] for every i with 0 <= topk[r, i] <= p
 *             (an index listed twice is counted twice)
 *
 * Key t is the cached row k_t = [k_nope | k_pe] (L + R values, dequantized
 * exactly by mla_ref_cache_read_row), and its value is v_t = k_t[:L], the
 * same latent row (MQA: one KV head shared by all H). For head h:
 *
 *     score_t    = softmax_scale * sum_d q[r, h, d] k_t[d]     (fp8 q: code * q_scale)
 *     m          = max(max_t score_t, sink_h)
 *     w_t        = e^(score_t - m)
 *     Z          = sum_t w_t   (+ e^(sink_h - m) with sinks)
 *     o[r, h, :] = sum_t w_t v_t / Z
 *     lse[r, h]  = m + ln Z
 *
 * every product and sum in float64, the output rounded once to o's dtype
 * and lse once to fp32. No visible key (a padding sequence, c_s == 0, or a
 * sparse row whose indices are all -1 or masked): o = 0, lse = -inf. It
 * ignores the split plan: it is the oracle for split on and off. */
#include <math.h>
#include <stdlib.h>

#include "core/attention_plan.h"
#include "core/checked.h"
#include "core/ref/ref_kernels.h"
#include "core/ref/tensor_access.h"

/* Scratch of one sequence: its keys and one row's visible keys. */
typedef struct seq_scratch {
    double *keys;  /* dense: [c, L + R] by position; sparse: a row's listed keys in order */
    int64_t *vis;  /* a row's visible keys: rows of keys */
    double *score; /* their scores, then their weights e^(score - m) */
    double *q;     /* [L + R]: the row's q for one head */
} seq_scratch;

/* Key t of sequence s into row (L + R values). */
static void read_key(const mla_attention_op_args *a, int64_t s, int64_t t, double *row)
{
    const mla_attention_desc *d = &a->plan->desc;
    const int64_t bs = d->cache.block_size;
    const int64_t block =
        d->paged ? mla_ref_load_index(&a->block_table, mla_ref_offset2(&a->block_table, s, t / bs))
                 : s;
    mla_ref_cache_read_row(&d->cache, &a->cache, block, t % bs, row);
}

/* The positions row r (at position p) sees; returns their count. */
static int64_t visible(const mla_attention_op_args *a, int64_t r, int64_t p, int64_t *vis)
{
    const int64_t topk = a->plan->desc.topk;
    int64_t n = 0;
    if (topk == 0) {
        for (int64_t t = 0; t <= p; ++t)
            vis[n++] = t;
        return n;
    }
    for (int64_t i = 0; i < topk; ++i) {
        const int64_t t =
            mla_ref_load_index(&a->topk_indices, mla_ref_offset2(&a->topk_indices, r, i));
        if (t >= 0 && t <= p)
            vis[n++] = t;
    }
    return n;
}

/* One (row, head): the formulas of the header. */
static void attend(const mla_attention_op_args *a, int64_t r, int64_t h, const seq_scratch *w,
                   int64_t nvis)
{
    const mla_attention_desc *d = &a->plan->desc;
    const int64_t L = d->cache.kv_lora, D = L + d->cache.rope;
    const int fp8 = d->q_dtype == MLA_DTYPE_FP8_E4M3FN || d->q_dtype == MLA_DTYPE_FP8_E4M3FNUZ;
    const double qs = fp8 ? (double)d->q_scale : 1.0;
    if (nvis == 0) {
        for (int64_t i = 0; i < L; ++i)
            mla_ref_store_f64(&a->o, mla_ref_offset3(&a->o, r, h, i), 0.0, MLA_SATURATE);
        if (a->lse.data)
            mla_ref_store_f64(&a->lse, mla_ref_offset2(&a->lse, r, h), -INFINITY, MLA_SATURATE);
        return;
    }
    for (int64_t i = 0; i < D; ++i)
        w->q[i] = mla_ref_load_f64(&a->q, mla_ref_offset3(&a->q, r, h, i)) * qs; /* exact */
    double m = -INFINITY;
    for (int64_t k = 0; k < nvis; ++k) {
        const double *key = w->keys + w->vis[k] * D;
        double dot = 0.0;
        for (int64_t i = 0; i < D; ++i)
            dot += w->q[i] * key[i];
        w->score[k] = (double)d->softmax_scale * dot;
        m = w->score[k] > m ? w->score[k] : m;
    }
    const double sink =
        a->sinks.data ? mla_ref_load_f64(&a->sinks, h * a->sinks.stride[0]) : -INFINITY;
    m = sink > m ? sink : m;
    double Z = a->sinks.data ? exp(sink - m) : 0.0;
    for (int64_t k = 0; k < nvis; ++k) {
        w->score[k] = exp(w->score[k] - m);
        Z += w->score[k];
    }
    for (int64_t i = 0; i < L; ++i) {
        double acc = 0.0;
        for (int64_t k = 0; k < nvis; ++k)
            acc += w->score[k] * w->keys[w->vis[k] * D + i];
        mla_ref_store_f64(&a->o, mla_ref_offset3(&a->o, r, h, i), acc / Z, MLA_SATURATE);
    }
    if (a->lse.data)
        mla_ref_store_f64(&a->lse, mla_ref_offset2(&a->lse, r, h), m + log(Z), MLA_SATURATE);
}

mla_status mla_ref_attention(mla_context *ctx, const mla_attention_op_args *a)
{
    const mla_attention_desc *d = &a->plan->desc;
    const int64_t S = a->context_lens.shape[0], H = d->heads;
    const int64_t D = d->cache.kv_lora + d->cache.rope;
    for (int64_t s = 0; s < S; ++s) {
        const int64_t c = mla_ref_load_index(&a->context_lens, s * a->context_lens.stride[0]);
        const int64_t r0 = mla_ref_load_index(&a->cu_q_lens, s * a->cu_q_lens.stride[0]);
        const int64_t r1 = mla_ref_load_index(&a->cu_q_lens, (s + 1) * a->cu_q_lens.stride[0]);
        const int64_t nmax = d->topk > 0 ? d->topk : c; /* visible keys of a row, at most */
        seq_scratch w = {NULL, NULL, NULL, NULL};
        mla_status st =
            mla_alloc_array(ctx, (void **)&w.keys, nmax, D, sizeof(double), "context_lens");
        if (st == MLA_OK)
            st = mla_alloc_array(ctx, (void **)&w.vis, nmax, 1, sizeof(int64_t), "context_lens");
        if (st == MLA_OK)
            st = mla_alloc_array(ctx, (void **)&w.score, nmax, 1, sizeof(double), "context_lens");
        if (st == MLA_OK)
            st = mla_alloc_array(ctx, (void **)&w.q, D, 1, sizeof(double), "q");
        if (st != MLA_OK) {
            free(w.keys);
            free(w.vis);
            free(w.score);
            free(w.q);
            return st;
        }
        for (int64_t t = 0; d->topk == 0 && t < c; ++t) /* dense: every key, once */
            read_key(a, s, t, w.keys + t * D);
        for (int64_t r = r0; r < r1; ++r) {
            const int64_t nvis = c == 0 ? 0 : visible(a, r, c - (r1 - r0) + (r - r0), w.vis);
            for (int64_t k = 0; d->topk > 0 && k < nvis; ++k) { /* sparse: the listed keys */
                read_key(a, s, w.vis[k], w.keys + k * D);
                w.vis[k] = k;
            }
            for (int64_t h = 0; h < H; ++h)
                attend(a, r, h, &w, nvis);
        }
        free(w.keys);
        free(w.vis);
        free(w.score);
        free(w.q);
    }
    return MLA_OK;
}
