/* The layer plan: the workspace carve-up, the batch read once on the host,
 * and the attention plan over the layer's buffers. */
#include <stdlib.h>
#include <string.h>

#include "core/attention_expanded.h"
#include "core/attention_planner.h"
#include "core/indices.h"
#include "core/layer_internal.h"
#include "core/validate.h"

#define WS_ALIGN 256
#define DEFAULT_SPLITS 8

int64_t mla_layer_logits_cols(const mla_model_config *c, int64_t max_context)
{
    const int64_t n = max_context > c->index_topk ? max_context : c->index_topk;
    return n > 0 ? n : 1;
}

/* The region's offset; the cursor moves past it, 256-byte aligned (to -1,
 * for good, when a size is -1: an overflowed mla_sz_ product). */
static int64_t place(int64_t *cursor, int64_t bytes)
{
    int64_t at = *cursor;
    *cursor = mla_sz_add(*cursor, mla_sz_round_up(bytes, WS_ALIGN));
    return at;
}

static int32_t splits_of(const mla_layer_options *o)
{
    return o->num_splits > 0 ? o->num_splits : DEFAULT_SPLITS;
}

/* The attention call's scratch for T rows at the split cap, as the
 * attention plan itself lays it out on this context (its figure depends on
 * the backend: the CPU kernel's per-thread tiles), with room for RoPE
 * inside attention. The plan made at planning is checked against it. */
static int64_t attention_bytes(const mla_context *ctx, const mla_plan *plan, int64_t T,
                               int32_t splits)
{
    const mla_model_config *c = mla_plan_config(plan);
    mla_attention_plan p;
    memset(&p, 0, sizeof p);
    p.ctx = (mla_context *)ctx;
    p.desc.heads = c->heads;
    p.desc.cache.kv_lora = c->kv_lora;
    p.desc.cache.rope = c->rope;
    p.desc.q_dtype = mla_plan_options_get(plan)->q_dtype;
    p.T = T;
    p.Tk = T;
    p.max_splits = splits;
    p.has_rope = 1;
    if (mla_attention_layout_workspace(&p) != MLA_OK)
        return -1;
    return mla_sz_add(p.workspace_bytes, WS_ALIGN);
}

int64_t mla_layer_expanded_min_rows(const mla_model_config *cfg)
{
    if (!cfg)
        return -1;
    const int64_t L = cfg->kv_lora, nv = cfg->nope + cfg->v;
    return 2 * L > nv ? mla_sz_ceil_div(2 * L * nv, 2 * L - nv) : -1;
}

int mla_layer_expanded_desc(const mla_plan *plan, mla_dtype out_dtype,
                            mla_attention_expanded_desc *d)
{
    const mla_plan_options *po = mla_plan_options_get(plan);
    const mla_model_config *c = mla_plan_config(plan);
    const mla_cache_desc cache = {po->cache_layout, po->cache_dtype, 1, 1,
                                  c->kv_lora,       c->rope,         1.0f};
    if ((po->q_dtype != MLA_DTYPE_BF16 && po->q_dtype != MLA_DTYPE_F32) ||
        mla_attention_expanded_desc_default(c, &cache, d) != MLA_OK)
        return 0;
    d->q_dtype = po->q_dtype;
    d->out_dtype = out_dtype;
    return 1;
}

/* Whether the expanded form can run on the plan: dense, rotated before the
 * attention, q_cat bf16 or f32 (see mla_layer_plan_form). */
static int can_expand(const mla_plan *plan, const mla_layer_options *opt, int sparse)
{
    mla_attention_expanded_desc d;
    return opt->form != MLA_LAYER_FORM_ABSORBED && !sparse &&
           !mla_plan_rotates_at(plan, MLA_ROPE_SITE_ATTENTION) &&
           mla_layer_expanded_desc(plan, opt->act, &d);
}

static int is_sparse(const mla_model_config *c, const mla_layer_options *opt)
{
    return c->index_heads > 0 && c->q_lora > 0 && !opt->dense;
}

mla_layer_form mla_layer_form_for(const mla_plan *plan, const mla_layer_options *opt, int64_t T,
                                  int64_t active)
{
    if (!plan || !opt || !can_expand(plan, opt, is_sparse(mla_plan_config(plan), opt)))
        return MLA_LAYER_FORM_ABSORBED;
    const int64_t n = mla_layer_expanded_min_rows(mla_plan_config(plan));
    if (opt->form == MLA_LAYER_FORM_EXPANDED || (n > 0 && active > 0 && T >= n * active))
        return MLA_LAYER_FORM_EXPANDED;
    return MLA_LAYER_FORM_ABSORBED;
}

mla_status mla_layer_layout(mla_context *ctx, const mla_plan *plan, const mla_layer_options *opt,
                            int64_t T, int64_t S, int64_t max_context, const char *tname,
                            mla_layer_ws *w)
{
    const mla_model_config *c = mla_plan_config(plan);
    const mla_plan_options *po = mla_plan_options_get(plan);
    if (T < 0 || S < 0 || max_context < 0)
        return mla_fail(ctx, MLA_ERR_SHAPE,
                        T < 0   ? tname
                        : S < 0 ? "S"
                                : "max_context",
                        "T, S and max_context are counts (>= 0)");
    if (T > ((int64_t)1 << 24) || max_context > ((int64_t)1 << 31))
        return mla_fail(ctx, MLA_ERR_OVERFLOW, T > ((int64_t)1 << 24) ? tname : "max_context",
                        "a step holds at most 2^24 tokens, a context at most 2^31");
    if (opt->act != MLA_DTYPE_BF16 && opt->act != MLA_DTYPE_F32)
        return mla_fail(ctx, MLA_ERR_DTYPE, "opt.act", "activations are bf16 or f32");
    if ((int)opt->form < MLA_LAYER_FORM_AUTO || (int)opt->form > MLA_LAYER_FORM_EXPANDED)
        return mla_fail(ctx, MLA_ERR_INVALID_ARGUMENT, "opt.form", "AUTO, ABSORBED or EXPANDED");
    if (opt->expanded_keys < 0)
        return mla_fail(ctx, MLA_ERR_INVALID_ARGUMENT, "opt.expanded_keys", "a count (>= 0)");
    /* the config's widths fit (mla_plan_create); the T-scaled sizes are checked */
    const int64_t es = (int64_t)mla_dtype_size(opt->act), H = c->heads, L = c->kv_lora;
    const int64_t THv = mla_sz_mul3(T, H, c->v);
    int64_t prep = 0, cur = 0;
    mla_status st = mla_prepare_workspace_bytes(plan, T, opt->act, &prep);
    memset(w, 0, sizeof *w);
    w->prep = place(&cur, prep);
    w->q_cat = place(&cur, mla_sz_mul4(T, H, L + c->rope, (int64_t)mla_dtype_size(po->q_dtype)));
    w->o_lat = place(&cur, mla_sz_mul4(T, H, L, es));
    w->o = place(&cur, mla_sz_mul(THv, es));
    w->oq = place(&cur, THv < 0 ? -1 : THv / 2);
    w->oq_scales = place(&cur, THv < 0 ? -1 : THv / 32 + 1);
    w->sparse = is_sparse(c, opt);
    if (w->sparse) {
        const int64_t Hi = c->index_heads, D = c->index_head_dim;
        int64_t iws = 0;
        if (st == MLA_OK)
            st = mla_indexer_workspace_bytes(c, T, &iws);
        w->idx_ws = place(&cur, iws);
        w->idx_q = place(&cur, mla_sz_mul3(T, Hi, D));
        w->idx_w = place(&cur, mla_sz_mul3(T, Hi, 4));
        w->idx_k = place(&cur, mla_sz_mul3(T, D, es));
        w->logits = place(&cur, mla_sz_mul3(T, mla_layer_logits_cols(c, max_context), 4));
        w->topk = place(&cur, mla_sz_mul3(T, c->index_topk, 4));
        w->topk_len = place(&cur, mla_sz_mul(T, 4));
    }
    w->attn_cap = attention_bytes(ctx, plan, T, splits_of(opt));
    w->attn = place(&cur, w->attn_cap);
    w->exp = -1;
    mla_attention_expanded_desc ed;
    /* reserved when the plan may choose the form for some step of up to T rows */
    if (mla_layer_form_for(plan, opt, T, 1) == MLA_LAYER_FORM_EXPANDED &&
        mla_layer_expanded_desc(plan, opt->act, &ed)) {
        const int64_t all = mla_sz_mul(S, max_context);
        w->exp_keys = opt->expanded_keys > 0 ? opt->expanded_keys : T;
        w->exp_keys = all >= 0 && w->exp_keys > all ? all : w->exp_keys;
        mla_expanded_layout el;
        if (mla_expanded_layout_of(ctx, &ed, S, w->exp_keys, &el) != MLA_OK)
            el.bytes = -1;
        w->exp_cap = el.bytes;
        w->exp = place(&cur, w->exp_cap);
    }
    w->bytes = cur;
    if (st == MLA_OK && cur < 0)
        st = MLA_ERR_OVERFLOW;
    if (st != MLA_OK) /* T and act are in range: the config's sizes times T do not fit */
        return mla_fail(ctx, st, tname, "the workspace for %lld tokens overflows", (long long)T);
    return MLA_OK;
}

void mla_layer_options_default(const mla_model_config *cfg, const mla_cache_desc *cache,
                               mla_layer_options *out)
{
    if (!out)
        return;
    memset(out, 0, sizeof *out);
    out->act = MLA_DTYPE_BF16;
    out->indexer.style = MLA_ROPE_NEOX;
    out->indexer.fp8 = MLA_DTYPE_FP8_E4M3FN;
    out->index_cache.dtype = MLA_DTYPE_FP8_E4M3FN;
    out->index_cache.layout = MLA_INDEXER_LAYOUT_AUTO;
    out->index_cache.ue8m0 = 1;
    out->index_cache.head_dim = cfg && cfg->index_head_dim ? cfg->index_head_dim : 128;
    if (cache) {
        out->index_cache.num_blocks = cache->num_blocks;
        out->index_cache.block_size = cache->block_size;
    }
}

mla_status mla_layer_workspace_bytes(mla_context *ctx, const mla_plan *plan,
                                     const mla_layer_options *opt, int64_t T, int64_t S,
                                     int64_t max_context, int64_t *bytes)
{
    MLA_TRY(mla_begin(ctx));
    if (!plan || !opt || !bytes)
        return mla_fail(ctx, MLA_ERR_NULL_POINTER,
                        !plan  ? "plan"
                        : !opt ? "opt"
                               : "bytes",
                        "NULL argument");
    mla_layer_ws w;
    MLA_TRY(mla_layer_layout(ctx, plan, opt, T, S, max_context, "T", &w));
    *bytes = w.bytes;
    return MLA_OK;
}

int mla_layer_plan_sparse(const mla_layer_plan *lp) { return lp && lp->ws.sparse; }

mla_layer_form mla_layer_plan_form(const mla_layer_plan *lp)
{
    return lp ? lp->form : MLA_LAYER_FORM_ABSORBED;
}

/* The form for the batch just read (mla_layer_plan_form's rule); a forced
 * EXPANDED that cannot run is refused. */
static mla_status choose_form(mla_context *ctx, mla_layer_plan *lp)
{
    const mla_layer_form f = lp->opt.form;
    lp->form = MLA_LAYER_FORM_ABSORBED;
    if (f == MLA_LAYER_FORM_ABSORBED)
        return MLA_OK;
    int64_t keys = 0, active = 0;
    for (int64_t s = 0; s < lp->S; ++s) {
        keys += lp->ctx_host[s];
        active += lp->cu_host[s + 1] > lp->cu_host[s];
    }
    if (f == MLA_LAYER_FORM_AUTO) {
        if (lp->ws.exp >= 0 && keys <= lp->ws.exp_keys &&
            mla_layer_form_for(lp->plan, &lp->opt, lp->T, active) == MLA_LAYER_FORM_EXPANDED)
            lp->form = MLA_LAYER_FORM_EXPANDED;
        return MLA_OK;
    }
    if (lp->ws.sparse)
        return mla_fail(ctx, MLA_ERR_UNSUPPORTED, "opt.form",
                        "a sparse layer attends to each row's own top-k keys: nothing shared to "
                        "decompress (the expanded form is dense)");
    if (mla_plan_rotates_at(lp->plan, MLA_ROPE_SITE_ATTENTION))
        return mla_fail(ctx, MLA_ERR_UNSUPPORTED, "opt.form",
                        "the expanded form reads q_pe and the cache rotated; this plan rotates "
                        "inside the absorbed attention call (RoPE site ATTENTION)");
    if (lp->ws.exp < 0)
        return mla_fail(ctx, MLA_ERR_UNSUPPORTED, "opt.form",
                        "the expanded form's q is bf16 or f32; the plan's q_cat is %s",
                        mla_dtype_name(mla_plan_options_get(lp->plan)->q_dtype));
    if (keys > lp->ws.exp_keys)
        return mla_fail(ctx, MLA_ERR_SHAPE, "buffers.workspace",
                        "the step has %lld keys to decompress, the workspace holds %lld "
                        "(opt.expanded_keys)",
                        (long long)keys, (long long)lp->ws.exp_keys);
    lp->form = MLA_LAYER_FORM_EXPANDED;
    return MLA_OK;
}

void mla_layer_plan_destroy(mla_layer_plan *lp)
{
    if (!lp)
        return;
    mla_attention_plan_destroy(lp->attn);
    free(lp->cu_host);
    free(lp);
}

/* ------------------------------------------------------------ the batch */

static mla_status take_tensor(mla_context *ctx, const mla_tensor *t, const char *name, int32_t ndim,
                              mla_tensor *out)
{
    if (!t)
        return mla_fail(ctx, MLA_ERR_NULL_POINTER, name, "NULL argument");
    MLA_TRY(mla_check_tensor(ctx, t, name, ndim));
    *out = *t;
    return MLA_OK;
}

/* Reads cu_q (or next_n) and the context lengths to the host: the sparse
 * path runs the indexer logits per sequence and needs each row's causal
 * length for the top-k. The attention plan validates them again. */
static mla_status read_batch(mla_context *ctx, mla_layer_plan *lp)
{
    const int64_t S = lp->S;
    int64_t *cl = NULL, *cu = NULL;
    MLA_TRY(mla_read_indices(ctx, &lp->context_lens, "batch.context_lens", &cl));
    mla_status st = MLA_OK;
    if (lp->has_cu_q)
        st = mla_read_indices(ctx, &lp->cu_q, "batch.cu_q_lens", &cu);
    for (int64_t s = 0; st == MLA_OK && s <= S; ++s) {
        const int64_t q0 = lp->has_cu_q ? cu[s] : s * lp->next_n;
        if (q0 < 0 || q0 > lp->T || (s > 0 && q0 < lp->cu_host[s - 1]))
            st = mla_fail(ctx, MLA_ERR_OUT_OF_RANGE, "batch.cu_q_lens",
                          "entry %lld is not a split of the %lld tokens", (long long)s,
                          (long long)lp->T);
        else
            lp->cu_host[s] = (int32_t)q0;
    }
    if (st == MLA_OK && lp->cu_host[S] != lp->T)
        st = mla_fail(ctx, MLA_ERR_SHAPE, lp->has_cu_q ? "batch.cu_q_lens" : "batch.next_n",
                      "the rows add up to %lld, not T = %lld", (long long)lp->cu_host[S],
                      (long long)lp->T);
    for (int64_t s = 0; st == MLA_OK && s < S; ++s) {
        const int64_t n = lp->cu_host[s + 1] - lp->cu_host[s];
        if (cl[s] < 0 || cl[s] > lp->max_context || (cl[s] > 0 && cl[s] < n))
            st = mla_fail(ctx, MLA_ERR_OUT_OF_RANGE, "batch.context_lens",
                          "sequence %lld: length %lld with %lld new tokens (max_context %lld)",
                          (long long)s, (long long)cl[s], (long long)n, (long long)lp->max_context);
        else
            lp->ctx_host[s] = (int32_t)cl[s];
    }
    free(cl);
    free(cu);
    return st;
}

/* Each row's top-k length, its causal key count p + 1 (0 for padding), and
 * all-absent indices for the attention plan to validate before the first
 * top-k has run. */
static mla_status write_topk_rows(mla_context *ctx, mla_layer_plan *lp)
{
    if (!lp->ws.sparse || lp->T == 0)
        return MLA_OK;
    int32_t *len = malloc((size_t)lp->T * sizeof *len);
    if (!len)
        return mla_fail(ctx, MLA_ERR_OUT_OF_MEMORY, "batch", "no host memory");
    for (int64_t s = 0; s < lp->S; ++s)
        for (int32_t r = lp->cu_host[s]; r < lp->cu_host[s + 1]; ++r)
            len[r] = lp->ctx_host[s] == 0 ? 0 : lp->ctx_host[s] - (lp->cu_host[s + 1] - r) + 1;
    uint8_t *ws = lp->workspace.data;
    mla_status st =
        mla_memcpy(ctx, ws + lp->ws.topk_len, len, (size_t)lp->T * 4, MLA_COPY_HOST_TO_CONTEXT);
    if (st == MLA_OK)
        st = mla_memset(ctx, ws + lp->ws.topk, 0xFF,
                        (size_t)(lp->T * mla_plan_config(lp->plan)->index_topk * 4));
    free(len);
    return st;
}

/* The batch's index values, before anything is written: positions within
 * the RoPE table, slots within the cache (and the index cache) and none
 * twice, and on a sparse layer the block table's ids in use within the
 * index cache. (The attention plan checks the lengths, cu_q_lens and the
 * ids against the latent cache.) */
static mla_status check_batch_values(mla_context *ctx, const mla_layer_plan *lp)
{
    MLA_TRY(mla_check_positions(ctx, &lp->positions, "batch.positions", lp->T, lp->cos.shape[0]));
    MLA_TRY(mla_check_dtype(ctx, &lp->slots, "batch.slots",
                            MLA_DT(MLA_DTYPE_I32) | MLA_DT(MLA_DTYPE_I64)));
    /* capacities fit: the caches' bytes do (take_buffers) */
    const mla_indexer_cache_desc *id = &lp->opt.index_cache;
    int64_t cap = lp->cache_desc.num_blocks * lp->cache_desc.block_size;
    if (lp->ws.sparse && id->num_blocks * id->block_size < cap)
        cap = id->num_blocks * id->block_size;
    MLA_TRY(mla_check_slot_values(ctx, &lp->slots, lp->T, cap, "batch.slots"));
    if (!lp->ws.sparse)
        return MLA_OK;
    MLA_TRY(mla_check_dtype(ctx, &lp->block_table, "batch.block_table", MLA_DT(MLA_DTYPE_I32)));
    int64_t *ids = NULL;
    MLA_TRY(mla_read_indices(ctx, &lp->block_table, "batch.block_table", &ids));
    const int64_t mb = lp->block_table.shape[1];
    mla_status st = MLA_OK;
    for (int64_t s = 0; st == MLA_OK && s < lp->S; ++s) {
        const int64_t used = mla_sz_ceil_div(lp->ctx_host[s], id->block_size);
        if (used > mb)
            st = mla_fail(ctx, MLA_ERR_OUT_OF_RANGE, "batch.context_lens",
                          "context_lens[%lld] = %d needs %lld index-cache blocks, the table "
                          "has %lld",
                          (long long)s, (int)lp->ctx_host[s], (long long)used, (long long)mb);
        else
            st = mla_check_index_range(ctx, ids + s * mb, used, 0, id->num_blocks, 0,
                                       "batch.block_table");
    }
    free(ids);
    return st;
}

/* Takes the batch: checks every index value, then (re)plans the attention
 * over it, and only then writes (the top-k rows of the workspace): a
 * refused call leaves the plan and the workspace as they were. */
static mla_status take_batch(mla_context *ctx, mla_layer_plan *lp, const mla_layer_batch *b,
                             int update)
{
    if (!b)
        return mla_fail(ctx, MLA_ERR_NULL_POINTER, "batch", "NULL argument");
    mla_layer_plan next = *lp; /* a refused update leaves the plan as it was */
    MLA_TRY(take_tensor(ctx, b->positions, "batch.positions", 1, &next.positions));
    MLA_TRY(take_tensor(ctx, b->slots, "batch.slots", 1, &next.slots));
    MLA_TRY(take_tensor(ctx, b->block_table, "batch.block_table", 2, &next.block_table));
    MLA_TRY(take_tensor(ctx, b->context_lens, "batch.context_lens", 1, &next.context_lens));
    next.has_cu_q = b->cu_q_lens != NULL;
    if (next.has_cu_q)
        MLA_TRY(take_tensor(ctx, b->cu_q_lens, "batch.cu_q_lens", 1, &next.cu_q));
    else if (b->next_n < 1)
        return mla_fail(ctx, MLA_ERR_INVALID_ARGUMENT, "batch.next_n", "next_n must be >= 1");
    next.next_n = b->next_n;
    if (next.positions.shape[0] != lp->T || next.context_lens.shape[0] != lp->S)
        return mla_fail(ctx, MLA_ERR_SHAPE, "batch", "the plan is for T = %lld, S = %lld",
                        (long long)lp->T, (long long)lp->S);
    MLA_TRY(mla_check_extent(ctx, &next.slots, "batch.slots", 0, lp->T));
    if (next.has_cu_q)
        MLA_TRY(mla_check_extent(ctx, &next.cu_q, "batch.cu_q_lens", 0, lp->S + 1));
    if (!(next.cu_host = calloc((size_t)(2 * lp->S + 2), sizeof(int32_t))))
        return mla_fail(ctx, MLA_ERR_OUT_OF_MEMORY, "batch", "no host memory");
    next.ctx_host = next.cu_host + lp->S + 1;
    mla_status st = read_batch(ctx, &next);
    if (st == MLA_OK)
        st = check_batch_values(ctx, &next);
    if (st == MLA_OK)
        st = choose_form(ctx, &next);
    if (st == MLA_OK) {
        /* the top-k rows are written below (all absent until the first
         * forward's top-k): no value the plan could check is there yet */
        const uint32_t trusted = ctx->trusted;
        ctx->trusted |= MLA_TRUST_TOPK;
        st = mla_layer_plan_attention(ctx, &next, update,
                                      mla_plan_rotates_at(next.plan, MLA_ROPE_SITE_ATTENTION));
        ctx->trusted = trusted;
    }
    if (st != MLA_OK) {
        if (next.attn != lp->attn)
            mla_attention_plan_destroy(next.attn);
        free(next.cu_host);
        return st;
    }
    free(lp->cu_host);
    *lp = next;
    return write_topk_rows(ctx, lp);
}

/* ------------------------------------------------------------ creation */

static mla_status take_buffers(mla_context *ctx, mla_layer_plan *lp, const mla_layer_buffers *b)
{
    if (!b || !b->cos || !b->sin || !b->cache || !b->workspace)
        return mla_fail(ctx, MLA_ERR_NULL_POINTER, "buffers", "cos, sin, cache and workspace");
    lp->cos = *b->cos, lp->sin = *b->sin;
    MLA_TRY(mla_check_rope_table(ctx, &lp->cos, &lp->sin));
    int64_t bb = 0;
    if (mla_cache_block_bytes(&lp->cache_desc, &bb) != MLA_OK)
        return mla_fail(ctx, MLA_ERR_INVALID_ARGUMENT, "cache", "a bad cache descriptor");
    MLA_TRY(take_tensor(ctx, b->cache, "buffers.cache", 2, &lp->cache));
    MLA_TRY(mla_check_extent(ctx, &lp->cache, "buffers.cache", 0, lp->cache_desc.num_blocks));
    MLA_TRY(mla_check_extent(ctx, &lp->cache, "buffers.cache", 1, bb));
    if (lp->ws.sparse) {
        if (mla_indexer_cache_block_bytes(&lp->opt.index_cache, &bb) != MLA_OK)
            return mla_fail(ctx, MLA_ERR_INVALID_ARGUMENT, "opt.index_cache", "a bad descriptor");
        if (!b->index_cache)
            return mla_fail(ctx, MLA_ERR_NULL_POINTER, "buffers.index_cache",
                            "the layer is sparse: it needs the indexer K cache");
        MLA_TRY(take_tensor(ctx, b->index_cache, "buffers.index_cache", 2, &lp->index_cache));
        MLA_TRY(mla_check_extent(ctx, &lp->index_cache, "buffers.index_cache", 0,
                                 lp->opt.index_cache.num_blocks));
        MLA_TRY(mla_check_extent(ctx, &lp->index_cache, "buffers.index_cache", 1, bb));
    }
    MLA_TRY(take_tensor(ctx, b->workspace, "buffers.workspace", 1, &lp->workspace));
    if (lp->workspace.shape[0] < lp->ws.bytes || mla_dtype_size(lp->workspace.dtype) != 1 ||
        lp->workspace.stride[0] != 1)
        return mla_fail(ctx, MLA_ERR_SHAPE, "buffers.workspace", "needs %lld contiguous bytes",
                        (long long)lp->ws.bytes);
    return MLA_OK;
}

static mla_status create(mla_context *ctx, mla_layer_plan *lp, const mla_layer_batch *batch,
                         const mla_layer_buffers *buffers)
{
    if (!batch || !batch->positions || !batch->context_lens)
        return mla_fail(ctx, MLA_ERR_NULL_POINTER, "batch", "positions and context_lens");
    MLA_TRY(mla_check_tensor(ctx, batch->positions, "batch.positions", 1));
    MLA_TRY(mla_check_tensor(ctx, batch->context_lens, "batch.context_lens", 1));
    lp->T = batch->positions->shape[0];
    lp->S = batch->context_lens->shape[0];
    MLA_TRY(mla_layer_layout(ctx, lp->plan, &lp->opt, lp->T, lp->S, lp->max_context,
                             "batch.positions", &lp->ws));
    MLA_TRY(take_buffers(ctx, lp, buffers));
    return take_batch(ctx, lp, batch, 0);
}

mla_status mla_layer_plan_create(mla_context *ctx, const mla_plan *plan,
                                 const mla_cache_desc *cache, const mla_layer_options *opt,
                                 const mla_layer_batch *batch, int64_t max_context,
                                 const mla_layer_buffers *buffers, mla_layer_plan **out)
{
    MLA_TRY(mla_begin(ctx));
    if (!plan || !cache || !opt || !out)
        return mla_fail(ctx, MLA_ERR_NULL_POINTER,
                        !plan    ? "plan"
                        : !cache ? "cache"
                        : !opt   ? "opt"
                                 : "out",
                        "NULL argument");
    *out = NULL;
    const mla_plan_options *po = mla_plan_options_get(plan);
    const mla_model_config *c = mla_plan_config(plan);
    if (cache->layout != po->cache_layout || cache->dtype != po->cache_dtype ||
        cache->kv_lora != c->kv_lora || cache->rope != c->rope)
        return mla_fail(ctx, MLA_ERR_INVALID_ARGUMENT, "cache",
                        "the cache descriptor does not match the plan");
    if (opt->act != MLA_DTYPE_BF16 && opt->act != MLA_DTYPE_F32)
        return mla_fail(ctx, MLA_ERR_DTYPE, "opt.act", "activations are bf16 or f32");
    if (max_context < 1)
        return mla_fail(ctx, MLA_ERR_INVALID_ARGUMENT, "max_context", "must be >= 1");
    mla_layer_plan *lp = calloc(1, sizeof *lp);
    if (!lp)
        return mla_fail(ctx, MLA_ERR_OUT_OF_MEMORY, "out", "no host memory");
    lp->plan = plan;
    lp->cache_desc = *cache;
    lp->opt = *opt;
    lp->max_context = max_context;
    mla_status st = create(ctx, lp, batch, buffers);
    if (st != MLA_OK) {
        mla_layer_plan_destroy(lp);
        return st;
    }
    *out = lp;
    return MLA_OK;
}

mla_status mla_layer_plan_update(mla_context *ctx, mla_layer_plan *lp, const mla_layer_batch *batch)
{
    MLA_TRY(mla_begin(ctx));
    if (!lp)
        return mla_fail(ctx, MLA_ERR_NULL_POINTER, "lp", "NULL argument");
    return take_batch(ctx, lp, batch, 1);
}

