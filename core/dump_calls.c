/* The dumps of the calls that plan or compose (core/dump.h): the fused RoPE
 * + cache write, the attention run (its plan's descriptor as parameters),
 * the planned indexer search, mla_prepare and the layer forward (their
 * weights as weights.safetensors; the layer's top-k selection as
 * sel.topk.npy), the indexer's prepare (its weights as inputs). */
#include <stdio.h>

#include "core/attention_plan.h"
#include "core/dump_ops.h"
#include "core/layer_internal.h"
#include "core/validate.h"

mla_status mla_dump_rope_cache(mla_context *ctx, const mla_rope_cache_args *a)
{
    mla_dump *d = mla_dump_begin(ctx, MLA_OP_ROPE_CACHE);
    if (a) {
        mla_dump_in(d, "q_nope", a->q_nope);
        mla_dump_in(d, "q_pe", a->q_pe);
        mla_dump_in(d, "q_pos", a->q_pos);
        mla_dump_in(d, "k_nope", a->k_nope);
        mla_dump_in(d, "k_pe", a->k_pe);
        mla_dump_in(d, "k_pos", a->k_pos);
        mla_dump_in(d, "slots", a->slots);
        mla_dump_in(d, "cache", a->cache);
        mla_dump_in(d, "cos", a->cos);
        mla_dump_in(d, "sin", a->sin);
        mla_dump_param(d, "style", "%s", mla_rope_style_name(a->style));
        if (a->cache_desc)
            mla_dump_cache_desc(d, a->cache_desc);
        if (a->q_cat)
            mla_dump_param(d, "q_dtype", "%s", mla_dtype_name(a->q_cat->dtype));
        mla_dump_param(d, "q_scale", "%.9g", (double)a->q_scale);
        mla_dump_out(d, "cache", a->cache);
        mla_dump_out(d, "q_cat", a->q_cat);
        mla_dump_out(d, "k_pe_out", a->k_pe_out);
    }
    return mla_dump_end(d, mla_fused_rope_concat_cache(ctx, a));
}

mla_status mla_dump_attention(mla_context *ctx, const mla_attention_plan *plan,
                              const mla_attention_args *a)
{
    mla_dump *d = mla_dump_begin(ctx, MLA_OP_ATTENTION);
    if (a && plan) {
        const mla_attention_desc *s = &plan->desc;
        mla_dump_in(d, "q", a->q);
        mla_dump_in(d, "cache", a->cache);
        mla_dump_in(d, "block_table", s->paged ? a->block_table : NULL);
        mla_dump_in(d, "context_lens", a->context_lens);
        mla_dump_in(d, "cu_q_lens", a->cu_q_lens);
        mla_dump_in(d, "topk_indices", s->topk > 0 ? a->topk_indices : NULL);
        mla_dump_in(d, "sinks", a->sinks);
        if (a->rope) {
            mla_dump_in(d, "cos", a->rope->cos);
            mla_dump_in(d, "sin", a->rope->sin);
            mla_dump_in(d, "q_pos", a->rope->q_pos);
            mla_dump_in(d, "k_nope", a->rope->k_nope);
            mla_dump_in(d, "k_pe", a->rope->k_pe);
            mla_dump_in(d, "k_pos", a->rope->k_pos);
            mla_dump_in(d, "slots", a->rope->slots);
            mla_dump_param(d, "style", "%s", mla_rope_style_name(a->rope->style));
        }
        mla_dump_cache_desc(d, &s->cache);
        mla_dump_param(d, "rope", "%lld", (long long)s->cache.rope);
        mla_dump_param(d, "softmax_scale", "%.9g", (double)s->softmax_scale);
        mla_dump_param(d, "q_scale", "%.9g", (double)s->q_scale);
        mla_dump_param(d, "out_dtype", "%s", mla_dtype_name(s->out_dtype));
        mla_dump_param(d, "next_n", "%d", (int)s->next_n);
        mla_dump_param(d, "num_splits", "%d", (int)s->num_splits);
        mla_dump_out(d, "o", a->o);
        mla_dump_out(d, "lse", a->lse);
        if (a->rope)
            mla_dump_out(d, "cache", a->cache);
    }
    return mla_dump_end(d, mla_attention_run(ctx, plan, a));
}

mla_status mla_dump_indexer_search(mla_context *ctx, const mla_indexer_plan *plan,
                                   const mla_tensor *cache, const mla_tensor *q,
                                   const mla_tensor *w, mla_tensor *logits, int64_t k,
                                   mla_tensor *indices)
{
    mla_dump *d = mla_dump_begin(ctx, MLA_DUMP_INDEXER_SEARCH);
    if (plan) {
        mla_indexer_cache_desc desc;
        int32_t next_n;
        mla_tensor table, lens;
        mla_indexer_plan_index_views(plan, &desc, &next_n, &table, &lens);
        mla_dump_in(d, "cache", cache);
        mla_dump_in(d, "q", q);
        mla_dump_in(d, "w", w);
        mla_dump_in(d, "block_table", &table);
        mla_dump_in(d, "context_lens", &lens);
        mla_dump_index_desc(d, &desc);
        mla_dump_param(d, "next_n", "%d", (int)next_n);
        mla_dump_param(d, "k", "%lld", (long long)k);
        if (logits && logits->ndim == 2)
            mla_dump_param(d, "max_len", "%lld", (long long)logits->shape[1]);
        mla_dump_out(d, "logits", logits);
        mla_dump_out(d, "indices", indices);
    }
    return mla_dump_end(d, mla_indexer_search(ctx, plan, cache, q, w, logits, k, indices));
}

/* The plan's choices as the `mla op` parameters that remake it. */
static void dump_plan(mla_dump *d, const mla_plan *plan)
{
    const mla_plan_options *o = mla_plan_options_get(plan);
    mla_dump_param(d, "q_dtype", "%s", mla_dtype_name(o->q_dtype));
    mla_dump_param(d, "site", "%s", mla_rope_site_name(mla_plan_rope_site(plan)));
}

mla_status mla_dump_prepare(mla_context *ctx, const mla_plan *plan,
                            const mla_layer_weights *weights, const mla_tensor *x,
                            const mla_tensor *positions, const mla_tensor *slots,
                            const mla_tensor *cos, const mla_tensor *sin,
                            const mla_cache_desc *cache_desc, mla_tensor *cache, mla_tensor *q_cat,
                            mla_tensor *workspace)
{
    mla_dump *d = mla_dump_begin(ctx, MLA_DUMP_PREPARE);
    if (plan && weights && cache_desc) {
        mla_dump_weights(d, weights, NULL, mla_plan_config(plan), MLA_MXFP4_PRODUCTION);
        mla_dump_in(d, "x", x);
        mla_dump_in(d, "positions", positions);
        mla_dump_in(d, "slots", slots);
        mla_dump_in(d, "cos", cos);
        mla_dump_in(d, "sin", sin);
        mla_dump_in(d, "cache", cache);
        mla_dump_cache_desc(d, cache_desc);
        dump_plan(d, plan);
        mla_dump_out(d, "q_cat", q_cat);
        mla_dump_out(d, "cache", cache);
    }
    return mla_dump_end(d, mla_prepare(ctx, plan, weights, x, positions, slots, cos, sin,
                                       cache_desc, cache, q_cat, workspace));
}

mla_status mla_dump_layer(mla_context *ctx, const mla_layer_plan *lp, const mla_layer_weights_ex *w,
                          const mla_tensor *x, mla_tensor *y)
{
    mla_dump *d = mla_dump_begin(ctx, MLA_DUMP_LAYER);
    if (lp && w) {
        const mla_layer_options *o = &lp->opt;
        const int sparse = mla_layer_plan_sparse(lp);
        mla_dump_weights(d, &w->base, w->has_indexer ? &w->indexer : NULL,
                         mla_plan_config(lp->plan), w->kc_rule);
        mla_dump_in(d, "x", x);
        mla_dump_in(d, "positions", &lp->positions);
        mla_dump_in(d, "slots", &lp->slots);
        mla_dump_in(d, "block_table", &lp->block_table);
        mla_dump_in(d, "context_lens", &lp->context_lens);
        mla_dump_in(d, "cu_q_lens", lp->has_cu_q ? &lp->cu_q : NULL);
        mla_dump_in(d, "cache", &lp->cache);
        mla_dump_in(d, "index_cache", sparse ? &lp->index_cache : NULL);
        mla_dump_in(d, "cos", &lp->cos);
        mla_dump_in(d, "sin", &lp->sin);
        mla_dump_cache_desc(d, &lp->cache_desc);
        dump_plan(d, lp->plan);
        if (y)
            mla_dump_param(d, "y_dtype", "%s", mla_dtype_name(y->dtype));
        mla_dump_param(d, "dense", "%d", (int)(o->dense != 0));
        mla_dump_param(d, "num_splits", "%d", (int)o->num_splits);
        mla_dump_param(d, "next_n", "%d", (int)lp->next_n);
        mla_dump_param(d, "max_context", "%lld", (long long)lp->max_context);
        /* the form this step uses, so that the rerun takes the same path */
        mla_dump_param(d, "form", "%s",
                       lp->form == MLA_LAYER_FORM_EXPANDED ? "expanded" : "absorbed");
        mla_dump_param(d, "expanded_keys", "%lld", (long long)o->expanded_keys);
        if (sparse) {
            mla_dump_param(d, "idx_dtype", "%s", mla_dtype_name(o->index_cache.dtype));
            mla_dump_param(d, "idx_layout", "%s", mla_indexer_layout_name(o->index_cache.layout));
            mla_dump_param(d, "idx_ue8m0", "%d", (int)(o->index_cache.ue8m0 != 0));
            mla_dump_param(d, "idx_style", "%s", mla_rope_style_name(o->indexer.style));
            mla_dump_param(d, "idx_hadamard", "%d", (int)(o->indexer.hadamard != 0));
        }
        mla_dump_out(d, "y", y);
        mla_dump_out(d, "cache", &lp->cache);
        if (sparse) {
            mla_dump_out(d, "index_cache", &lp->index_cache);
            const mla_model_config *c = mla_plan_config(lp->plan);
            const mla_tensor sel = mla_view(
                (uint8_t *)lp->workspace.data + lp->ws.topk, MLA_DTYPE_I32, lp->workspace.memory, 2,
                (int64_t[]){lp->T, c->index_topk}, (int64_t[]){c->index_topk, 1});
            mla_dump_side(d, "sel.topk.npy", &sel);
        }
    }
    return mla_dump_end(d, mla_layer_forward(ctx, lp, w, x, y));
}

static void dump_proj(mla_dump *d, const char *name, const mla_weight *w)
{
    char nm[48];
    mla_dump_in(d, name, &w->w);
    snprintf(nm, sizeof nm, "%s_scale", name);
    if (w->w.dtype != MLA_DTYPE_BF16)
        mla_dump_in(d, nm, &w->scale);
}

mla_status mla_dump_indexer_prepare(mla_context *ctx, const mla_model_config *cfg,
                                    const mla_indexer_weights *wt, const mla_indexer_options *opt,
                                    const mla_tensor *q_lat, const mla_tensor *x,
                                    const mla_tensor *positions, const mla_tensor *cos,
                                    const mla_tensor *sin, mla_tensor *q_fp8, mla_tensor *w_out,
                                    mla_tensor *k, mla_tensor *workspace)
{
    mla_dump *d = mla_dump_begin(ctx, MLA_DUMP_INDEXER_PREPARE);
    if (cfg && wt && opt) {
        mla_dump_config(d, cfg);
        dump_proj(d, "wq_b", &wt->wq_b);
        dump_proj(d, "wk", &wt->wk);
        mla_dump_in(d, "k_norm_weight", &wt->k_norm_weight);
        mla_dump_in(d, "k_norm_bias", &wt->k_norm_bias);
        dump_proj(d, "weights_proj", &wt->weights_proj);
        mla_dump_in(d, "q_lat_normed", q_lat);
        mla_dump_in(d, "x", x);
        mla_dump_in(d, "positions", positions);
        mla_dump_in(d, "cos", cos);
        mla_dump_in(d, "sin", sin);
        mla_dump_param(d, "style", "%s", mla_rope_style_name(opt->style));
        mla_dump_param(d, "hadamard", "%d", (int)(opt->hadamard != 0));
        mla_dump_param(d, "fp8", "%s", mla_dtype_name(opt->fp8));
        if (k)
            mla_dump_param(d, "k_dtype", "%s", mla_dtype_name(k->dtype));
        mla_dump_out(d, "q_fp8", q_fp8);
        mla_dump_out(d, "w_out", w_out);
        mla_dump_out(d, "k", k);
    }
    return mla_dump_end(d, mla_indexer_prepare(ctx, cfg, wt, opt, q_lat, x, positions, cos, sin,
                                               q_fp8, w_out, k, workspace));
}
