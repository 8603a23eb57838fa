/* mla_layer_forward: MLA.md section 2 end to end for one planned step,
 * composed from the public ops on the caller's context. RoPE happens at the
 * plan's one site: prepare's fused kernel or separate RoPE, or inside the
 * attention call, which then gets q_pe and the new keys unrotated and
 * writes the cache itself. W_vc writes straight into the [T, H, v] buffer
 * through a [H, T, v] view, so the flatten to [T, H*v] for o_proj is a
 * view too: nothing is copied between the two GEMMs. */
#include <string.h>

#include "core/attention_plan.h"
#include "core/dump_ops.h"
#include "core/layer_internal.h"
#include "core/prepare_internal.h"
#include "core/validate.h"

/* --------------------------------------------------------------- views */

static mla_tensor ws_view(const mla_layer_plan *lp, int64_t off, mla_dtype dt, int32_t ndim,
                          const int64_t *shape, const int64_t *stride)
{
    return mla_view((uint8_t *)lp->workspace.data + off, dt, lp->workspace.memory, ndim, shape,
                    stride);
}

static const mla_model_config *cfg_of(const mla_layer_plan *lp)
{
    return mla_plan_config(lp->plan);
}

static mla_tensor q_cat_view(const mla_layer_plan *lp)
{
    const int64_t H = cfg_of(lp)->heads, D = cfg_of(lp)->kv_lora + cfg_of(lp)->rope;
    return ws_view(lp, lp->ws.q_cat, mla_plan_options_get(lp->plan)->q_dtype, 3,
                   (int64_t[]){lp->T, H, D}, (int64_t[]){H * D, D, 1});
}

static mla_tensor o_lat_view(const mla_layer_plan *lp)
{
    const int64_t H = cfg_of(lp)->heads, L = cfg_of(lp)->kv_lora;
    return ws_view(lp, lp->ws.o_lat, lp->opt.act, 3, (int64_t[]){lp->T, H, L},
                   (int64_t[]){H * L, L, 1});
}

/* The W_vc output [T, H, v]. */
static mla_tensor o_view(const mla_layer_plan *lp)
{
    const int64_t H = cfg_of(lp)->heads, v = cfg_of(lp)->v;
    return ws_view(lp, lp->ws.o, lp->opt.act, 3, (int64_t[]){lp->T, H, v},
                   (int64_t[]){H * v, v, 1});
}

/* The attention call's arguments, the same at planning and at the run
 * (the run checks its arguments against the plan's). */
typedef struct attn_call {
    mla_attention_args a;
    mla_attention_rope rope;
    mla_tensor q, o, work, k_nope, k_pe, topk;
} attn_call;

static void attention_call(mla_layer_plan *lp, int rope_inside, attn_call *k)
{
    memset(k, 0, sizeof *k);
    k->q = q_cat_view(lp);
    k->o = o_lat_view(lp);
    k->work =
        ws_view(lp, lp->ws.attn, MLA_DTYPE_U8, 1, (int64_t[]){lp->ws.attn_cap}, (int64_t[]){1});
    k->a.q = &k->q;
    k->a.cache = &lp->cache;
    k->a.block_table = &lp->block_table;
    k->a.context_lens = &lp->context_lens;
    k->a.cu_q_lens = lp->has_cu_q ? &lp->cu_q : NULL;
    k->a.o = &k->o;
    k->a.workspace = &k->work;
    if (lp->ws.sparse) {
        const int64_t K = cfg_of(lp)->index_topk;
        k->topk =
            ws_view(lp, lp->ws.topk, MLA_DTYPE_I32, 2, (int64_t[]){lp->T, K}, (int64_t[]){K, 1});
        k->a.topk_indices = &k->topk;
    }
    if (rope_inside) {
        mla_prepare_key_views(lp->plan, lp->T, lp->opt.act,
                              (uint8_t *)lp->workspace.data + lp->ws.prep, lp->workspace.memory,
                              &k->k_nope, &k->k_pe);
        k->rope = (mla_attention_rope){&lp->cos,   &lp->sin, MLA_ROPE_INTERLEAVED, &lp->positions,
                                       &k->k_nope, &k->k_pe, &lp->positions,       &lp->slots};
        k->a.rope = &k->rope;
    }
}

mla_status mla_layer_plan_attention(mla_context *ctx, mla_layer_plan *lp, int update,
                                    int rope_inside)
{
    attn_call k;
    attention_call(lp, update ? lp->attn->has_rope : rope_inside, &k);
    if (update)
        return mla_attention_plan_update(ctx, lp->attn, &k.a);
    const mla_model_config *c = cfg_of(lp);
    mla_attention_desc d;
    MLA_TRY(mla_attention_desc_default(c, &lp->cache_desc, &d));
    d.q_dtype = mla_plan_options_get(lp->plan)->q_dtype;
    d.out_dtype = lp->opt.act;
    d.topk = lp->ws.sparse ? c->index_topk : 0;
    d.next_n = lp->has_cu_q ? 1 : lp->next_n;
    d.num_splits = lp->opt.num_splits > 0 ? lp->opt.num_splits : 8;
    MLA_TRY(mla_attention_plan_create(ctx, &d, &k.a, &lp->attn));
    if (mla_attention_plan_workspace_bytes(lp->attn) > lp->ws.attn_cap)
        return mla_fail(ctx, MLA_ERR_SHAPE, "buffers.workspace",
                        "the attention needs %lld bytes of scratch, the layer reserved %lld",
                        (long long)mla_attention_plan_workspace_bytes(lp->attn),
                        (long long)lp->ws.attn_cap);
    return MLA_OK;
}

/* -------------------------------------------------------------- checks */

/* What the stages after the prepare read, checked before the prepare
 * writes anything (the prepare checks its own inputs first). */
static mla_status check_forward(mla_context *ctx, const mla_layer_plan *lp,
                                const mla_layer_weights_ex *p, const mla_tensor *x,
                                const mla_tensor *y)
{
    const mla_model_config *c = cfg_of(lp);
    if (!p)
        return mla_fail(ctx, MLA_ERR_NULL_POINTER, "weights", "NULL argument");
    MLA_TRY(mla_check_tensor(ctx, x, "x", 2));
    if (x->dtype != lp->opt.act)
        return mla_fail_field(ctx, MLA_ERR_DTYPE, "x", "dtype", "x must be %s as planned",
                              mla_dtype_name(lp->opt.act));
    MLA_TRY(mla_check_extent(ctx, x, "x", 0, lp->T));
    if (lp->opt.form == MLA_LAYER_FORM_EXPANDED && p->base.kv_b_proj.w.dtype != MLA_DTYPE_BF16)
        return mla_fail(ctx, MLA_ERR_UNSUPPORTED, "weights.kv_b_proj",
                        "the forced expanded form decompresses through a bf16 kv_b_proj (the "
                        "layer's fp8 and MXFP4 forms are the absorbed GEMMs')");
    MLA_TRY(mla_check_tensor(ctx, y, "y", 2));
    MLA_TRY(mla_check_dtype(ctx, y, "y", MLA_DT(MLA_DTYPE_BF16) | MLA_DT(MLA_DTYPE_F32)));
    MLA_TRY(mla_check_extent(ctx, y, "y", 0, lp->T));
    MLA_TRY(mla_check_extent(ctx, y, "y", 1, c->hidden));
    MLA_TRY(mla_check_output(ctx, y, "y"));
    MLA_TRY(
        mla_check_projection(ctx, &p->base.o_proj, "weights.o_proj", c->hidden, c->heads * c->v));
    if (p->base.o_proj.w.dtype == MLA_DTYPE_FP4X2 && (c->heads * c->v) % 32)
        return mla_fail(ctx, MLA_ERR_UNSUPPORTED, "weights.o_proj",
                        "MXFP4 o_proj needs H * v to be a multiple of 32");
    const mla_indexer_weights *iw = &p->indexer;
    if (lp->ws.sparse) {
        if (!p->has_indexer)
            return mla_fail(ctx, MLA_ERR_INVALID_ARGUMENT, "weights.has_indexer",
                            "the layer is sparse: it needs the indexer weights");
        const int64_t Hi = c->index_heads, D = c->index_head_dim;
        MLA_TRY(mla_check_linear_weight(ctx, &iw->wq_b, "indexer.wq_b", Hi * D, c->q_lora));
        MLA_TRY(mla_check_linear_weight(ctx, &iw->wk, "indexer.wk", D, c->hidden));
        MLA_TRY(
            mla_check_linear_weight(ctx, &iw->weights_proj, "indexer.weights_proj", Hi, c->hidden));
        const mla_tensor *nb[2] = {&iw->k_norm_weight, &iw->k_norm_bias};
        const char *nbn[2] = {"indexer.k_norm_weight", "indexer.k_norm_bias"};
        for (int i = 0; i < 2; ++i) {
            MLA_TRY(mla_check_tensor(ctx, nb[i], nbn[i], 1));
            MLA_TRY(mla_check_dtype(ctx, nb[i], nbn[i], MLA_DT(MLA_DTYPE_F32)));
            MLA_TRY(mla_check_extent(ctx, nb[i], nbn[i], 0, D));
        }
    }
    /* y apart from x (like every op's output from its input), and every
     * buffer the layer writes apart from everything it reads */
    MLA_TRY(mla_check_disjoint(ctx, y, "y", x, "x"));
    const mla_tensor *outs[4] = {y, &lp->workspace, &lp->cache,
                                 lp->ws.sparse ? &lp->index_cache : NULL};
    const char *onames[4] = {"y", "workspace", "cache", "index_cache"};
    const mla_tensor *ins[8 + MLA_WEIGHT_TENSORS + 12] = {x,
                                                          &lp->positions,
                                                          &lp->slots,
                                                          &lp->block_table,
                                                          &lp->context_lens,
                                                          lp->has_cu_q ? &lp->cu_q : NULL,
                                                          &lp->cos,
                                                          &lp->sin};
    const char *inames[8 + MLA_WEIGHT_TENSORS + 12] = {"x",
                                                       "batch.positions",
                                                       "batch.slots",
                                                       "batch.block_table",
                                                       "batch.context_lens",
                                                       "batch.cu_q_lens",
                                                       "cos",
                                                       "sin"};
    int n = 8 + mla_weight_tensors(&p->base, c->q_lora != 0, 1, ins + 8, inames + 8);
    if (p->base.kv_b_proj.w.dtype == MLA_DTYPE_FP4X2) {
        const mla_tensor *mx[4] = {&p->w_kc_fp4.codes, &p->w_kc_fp4.scales, &p->w_vc_fp4.codes,
                                   &p->w_vc_fp4.scales};
        const char *mxn[4] = {"w_kc_fp4.codes", "w_kc_fp4.scales", "w_vc_fp4.codes",
                              "w_vc_fp4.scales"};
        for (int i = 0; i < 4; ++i)
            ins[n] = mx[i], inames[n++] = mxn[i];
    }
    if (lp->ws.sparse) {
        const mla_weight *iws[3] = {&iw->wq_b, &iw->wk, &iw->weights_proj};
        const char *iwn[3][2] = {{"indexer.wq_b.w", "indexer.wq_b.scale"},
                                 {"indexer.wk.w", "indexer.wk.scale"},
                                 {"indexer.weights_proj.w", "indexer.weights_proj.scale"}};
        for (int i = 0; i < 3; ++i) {
            ins[n] = &iws[i]->w, inames[n++] = iwn[i][0];
            if (iws[i]->w.dtype != MLA_DTYPE_BF16)
                ins[n] = &iws[i]->scale, inames[n++] = iwn[i][1];
        }
        ins[n] = &iw->k_norm_weight, inames[n++] = "indexer.k_norm_weight";
        ins[n] = &iw->k_norm_bias, inames[n++] = "indexer.k_norm_bias";
    }
    return mla_check_apart(ctx, outs, onames, 4, ins, inames, n);
}

/* -------------------------------------------------------------- stages */

/* Whether every sequence brings the same n > 0 new tokens and has at least
 * n keys (a decode step; a prefill of equal chunks): then rows s * n + j are
 * the batch's, and one logits call with next_n = n covers them. */
static int64_t uniform_new_tokens(const mla_layer_plan *lp)
{
    const int64_t n = lp->S > 0 ? lp->cu_host[1] - lp->cu_host[0] : 0;
    for (int64_t s = 0; s < lp->S; ++s)
        if (lp->cu_host[s] != s * n || lp->cu_host[s + 1] - lp->cu_host[s] != n ||
            lp->ctx_host[s] < n)
            return 0;
    return n;
}

/* The V3.2 indexer for the step's tokens: its K into the indexer cache,
 * logits (each sequence with its own next_n = its new tokens, causal among
 * them: one call for the batch when that is the same for all, else one a
 * sequence), top-k per row over its p + 1 causal keys. */
static mla_status run_indexer(mla_context *ctx, mla_layer_plan *lp, const mla_indexer_weights *iw,
                              const mla_tensor *q_lat, const mla_tensor *x)
{
    const mla_model_config *c = cfg_of(lp);
    const int64_t T = lp->T, Hi = c->index_heads, D = c->index_head_dim, K = c->index_topk;
    const int64_t M = mla_layer_logits_cols(c, lp->max_context);
    mla_tensor q = ws_view(lp, lp->ws.idx_q, lp->opt.indexer.fp8, 3, (int64_t[]){T, Hi, D},
                           (int64_t[]){Hi * D, D, 1});
    mla_tensor w =
        ws_view(lp, lp->ws.idx_w, MLA_DTYPE_F32, 2, (int64_t[]){T, Hi}, (int64_t[]){Hi, 1});
    mla_tensor k = ws_view(lp, lp->ws.idx_k, lp->opt.act, 2, (int64_t[]){T, D}, (int64_t[]){D, 1});
    int64_t iws = 0;
    mla_indexer_workspace_bytes(c, T, &iws);
    mla_tensor work = ws_view(lp, lp->ws.idx_ws, MLA_DTYPE_U8, 1, (int64_t[]){iws}, (int64_t[]){1});
    MLA_TRY(mla_indexer_prepare(ctx, c, iw, &lp->opt.indexer, q_lat, x, &lp->positions, &lp->cos,
                                &lp->sin, &q, &w, &k, &work));
    MLA_TRY(mla_indexer_k_cache_write(ctx, &lp->opt.index_cache, &lp->index_cache, &k, &lp->slots));
    mla_tensor logits =
        ws_view(lp, lp->ws.logits, MLA_DTYPE_F32, 2, (int64_t[]){T, M}, (int64_t[]){M, 1});
    const int64_t un = uniform_new_tokens(lp);
    if (un > 0) { /* one launch and one index check instead of S */
        mla_tensor qs = q, ws = w, ls = logits, bt = lp->block_table, cl = lp->context_lens;
        qs.shape[0] = ws.shape[0] = ls.shape[0] = lp->S * un;
        bt.shape[0] = cl.shape[0] = lp->S;
        MLA_TRY(mla_indexer_logits(ctx, &lp->opt.index_cache, &lp->index_cache, &qs, &ws, &bt, &cl,
                                   (int32_t)un, &ls));
    }
    for (int64_t s = 0; un == 0 && s < lp->S; ++s) {
        const int64_t r0 = lp->cu_host[s], n = lp->cu_host[s + 1] - r0;
        if (n == 0 || lp->ctx_host[s] == 0)
            continue; /* padding rows: top-k length 0, all -1 */
        mla_tensor qs = q, ws = w, ls = logits, bt = lp->block_table, cl = lp->context_lens;
        qs.data = (uint8_t *)q.data + r0 * Hi * D, qs.shape[0] = n;
        ws.data = (float *)w.data + r0 * Hi, ws.shape[0] = n;
        ls.data = (float *)logits.data + r0 * M, ls.shape[0] = n;
        bt.data = (int32_t *)bt.data + s * bt.stride[0], bt.shape[0] = 1;
        cl.data = (int32_t *)cl.data + s * cl.stride[0], cl.shape[0] = 1;
        MLA_TRY(mla_indexer_logits(ctx, &lp->opt.index_cache, &lp->index_cache, &qs, &ws, &bt, &cl,
                                   (int32_t)n, &ls));
    }
    mla_tensor len = ws_view(lp, lp->ws.topk_len, MLA_DTYPE_I32, 1, (int64_t[]){T}, (int64_t[]){1});
    mla_tensor idx =
        ws_view(lp, lp->ws.topk, MLA_DTYPE_I32, 2, (int64_t[]){T, K}, (int64_t[]){K, 1});
    MLA_TRY(mla_topk(ctx, &logits, &len, K, &idx));
    /* the attention plan validated the indices it was built with; these are
     * new (in range by construction), so it re-plans over them */
    return mla_layer_plan_attention(ctx, lp, 1, lp->attn->has_rope);
}

/* o[h] = o_lat[:, h] @ W_vc[h] into [T, H, v] through a [H, T, v] view;
 * W_vc[h] = kv_b_proj.view(H, nope + v, L)[h, nope:]^T, a [H, L, v] view
 * (MXFP4: the loader's [H, v, L/2] view, the a16wfp4 GEMM). */
static mla_status w_vc(mla_context *ctx, const mla_layer_plan *lp, const mla_layer_weights_ex *wt)
{
    const mla_model_config *c = cfg_of(lp);
    const int64_t H = c->heads, L = c->kv_lora, nv = c->nope + c->v;
    mla_tensor x = o_lat_view(lp), y = o_view(lp);
    mla_tensor_transpose(&x, 0, 1);
    mla_tensor_transpose(&y, 0, 1);
    if (wt->base.kv_b_proj.w.dtype == MLA_DTYPE_FP4X2)
        return mla_batched_gemm_a16wfp4(ctx, &x, &wt->w_vc_fp4, 1, MLA_MXFP4_PRODUCTION, &y);
    const mla_tensor *kvb = &wt->base.kv_b_proj.w;
    const int64_t s0 = kvb->stride[0], s1 = kvb->stride[1];
    /* bf16, or fp8 with one scale for the tensor (checked by the prepare) */
    const float scale = kvb->dtype == MLA_DTYPE_BF16 ? 1.0f : wt->kv_b_tensor_scale;
    mla_tensor wvc =
        mla_view((uint8_t *)kvb->data + c->nope * s0 * (int64_t)mla_dtype_size(kvb->dtype),
                 kvb->dtype, kvb->memory, 3, (int64_t[]){H, L, c->v}, (int64_t[]){nv * s0, s1, s0});
    return mla_batched_gemm(ctx, &x, &wvc, scale, &y);
}

/* y = o @ W_o^T with o the [T, H, v] buffer read in place: flattened by a
 * view (bf16 / fp8 weights), or quantized to MXFP4 straight from [T, H, v]
 * by the fused flatten (aiter's hand-off, seed 003) and multiplied by the
 * a4w4 GEMM. */
static mla_status o_proj(mla_context *ctx, const mla_layer_plan *lp, const mla_weight *wo,
                         mla_tensor *y)
{
    const int64_t T = lp->T, Hv = cfg_of(lp)->heads * cfg_of(lp)->v, hid = cfg_of(lp)->hidden;
    if (wo->w.dtype != MLA_DTYPE_FP4X2) {
        mla_tensor o2 =
            ws_view(lp, lp->ws.o, lp->opt.act, 2, (int64_t[]){T, Hv}, (int64_t[]){Hv, 1});
        return mla_project(ctx, &o2, wo, y);
    }
    mla_tensor o = o_view(lp);
    mla_tensor codes = ws_view(lp, lp->ws.oq, MLA_DTYPE_FP4X2, 3, (int64_t[]){1, T, Hv / 2},
                               (int64_t[]){T * Hv / 2, Hv / 2, 1});
    mla_tensor scales = ws_view(lp, lp->ws.oq_scales, MLA_DTYPE_E8M0, 3, (int64_t[]){1, T, Hv / 32},
                                (int64_t[]){T * Hv / 32, Hv / 32, 1});
    mla_tensor c2 = codes, s2 = scales;
    c2.ndim = s2.ndim = 2;
    c2.shape[0] = s2.shape[0] = T, c2.shape[1] = Hv / 2, s2.shape[1] = Hv / 32;
    c2.stride[0] = Hv / 2, c2.stride[1] = 1, s2.stride[0] = Hv / 32, s2.stride[1] = 1;
    MLA_TRY(mla_fused_flatten_mxfp4_quant(ctx, &o, &c2, &s2, MLA_MXFP4_PRODUCTION));
    mla_mxfp4_operand xq = {codes, scales, MLA_SCALE_ROW_MAJOR};
    mla_mxfp4_operand w = {
        mla_view(wo->w.data, MLA_DTYPE_FP4X2, wo->w.memory, 3, (int64_t[]){1, hid, Hv / 2},
                 (int64_t[]){hid * wo->w.stride[0], wo->w.stride[0], wo->w.stride[1]}),
        mla_view(wo->scale.data, wo->scale.dtype, wo->scale.memory, 3, (int64_t[]){1, hid, Hv / 32},
                 (int64_t[]){hid * wo->scale.stride[0], wo->scale.stride[0], wo->scale.stride[1]}),
        MLA_SCALE_ROW_MAJOR};
    mla_tensor y3 = mla_view(y->data, y->dtype, y->memory, 3, (int64_t[]){1, T, hid},
                             (int64_t[]){T * y->stride[0], y->stride[0], y->stride[1]});
    return mla_batched_gemm_a4w4(ctx, &xq, &w, &y3);
}

/* The expanded form (MLA.md section 2, "The expanded form"): q_nope as the
 * prepare computed it, before the absorb (converted into q_cat's first
 * nope columns when q_cat's dtype is not the activations'), q_pe rotated in
 * q_cat, the keys decompressed from the cache; o [T, H, v] goes straight to
 * o_proj (no W_vc). */
static mla_status expanded(mla_context *ctx, const mla_layer_plan *lp, const mla_weight *kv_b,
                           const mla_prepare_views *v)
{
    const mla_model_config *c = cfg_of(lp);
    const int64_t L = c->kv_lora;
    mla_attention_expanded_desc d;
    mla_layer_expanded_desc(lp->plan, lp->opt.act, &d);
    d.cache = lp->cache_desc;
    d.next_n = lp->has_cu_q ? 1 : lp->next_n;
    mla_tensor q_cat = q_cat_view(lp), q_nope = v->q, q_pe = q_cat;
    q_nope.shape[2] = c->nope;
    const size_t qs = mla_dtype_size(q_cat.dtype);
    q_pe.data = (uint8_t *)q_cat.data + L * qs;
    q_pe.shape[2] = c->rope;
    if (q_nope.dtype != d.q_dtype) {
        mla_tensor dst = q_cat;
        dst.shape[2] = c->nope;
        MLA_TRY(mla_convert(ctx, &q_nope, &dst, MLA_SATURATE));
        q_nope = dst;
    }
    mla_tensor o = o_view(lp);
    mla_tensor work =
        ws_view(lp, lp->ws.exp, MLA_DTYPE_U8, 1, (int64_t[]){lp->ws.exp_cap}, (int64_t[]){1});
    const mla_attention_expanded_args a = {&q_nope,
                                           &q_pe,
                                           &lp->cache,
                                           &lp->block_table,
                                           &lp->context_lens,
                                           lp->has_cu_q ? &lp->cu_q : NULL,
                                           kv_b,
                                           &o,
                                           NULL,
                                           &work};
    return mla_attention_expanded(ctx, &d, &a);
}

typedef struct layer_call {
    mla_layer_plan *lp;
    const mla_layer_weights_ex *p;
    const mla_tensor *x;
    mla_tensor *y;
} layer_call;

/* MLA.md section 2 for the planned step, through the public entry points. */
static mla_status layer_steps(mla_context *ctx, void *args)
{
    const layer_call *lc = args;
    mla_layer_plan *lp = lc->lp;
    const mla_layer_weights_ex *p = lc->p;
    const mla_tensor *x = lc->x;
    mla_tensor q_cat = q_cat_view(lp);
    mla_tensor prep = ws_view(lp, lp->ws.prep, MLA_DTYPE_U8, 1,
                              (int64_t[]){lp->ws.q_cat - lp->ws.prep}, (int64_t[]){1});
    mla_prepare_views v;
    const mla_dtype kd = p->base.kv_b_proj.w.dtype;
    const mla_kv_b_form kvb = {kd == MLA_DTYPE_FP4X2 ? &p->w_kc_fp4 : NULL,
                               kd == MLA_DTYPE_FP8_E4M3FN &&
                                       p->formats.kv_b_proj == MLA_WEIGHT_FP8_TENSOR
                                   ? p->kv_b_tensor_scale
                                   : 0.0f};
    MLA_TRY(mla_prepare_run(ctx, lp->plan, &p->base, kd == MLA_DTYPE_BF16 ? NULL : &kvb, x,
                            &lp->positions, &lp->slots, &lp->cos, &lp->sin, &lp->cache_desc,
                            &lp->cache, &q_cat, &prep, &v));
    if (lp->ws.sparse)
        MLA_TRY(run_indexer(ctx, lp, &p->indexer, &v.q_lat, x));
    if (lp->form == MLA_LAYER_FORM_EXPANDED && kd == MLA_DTYPE_BF16) {
        MLA_TRY(expanded(ctx, lp, &p->base.kv_b_proj, &v));
        return o_proj(ctx, lp, &p->base.o_proj, lc->y);
    }
    attn_call k;
    attention_call(lp, lp->attn->has_rope, &k);
    MLA_TRY(mla_attention_run(ctx, lp->attn, &k.a));
    MLA_TRY(w_vc(ctx, lp, p));
    return o_proj(ctx, lp, &p->base.o_proj, lc->y);
}

mla_status mla_layer_forward(mla_context *ctx, const mla_layer_plan *lpc,
                             const mla_layer_weights_ex *p, const mla_tensor *x, mla_tensor *y)
{
    MLA_DUMP_HOOK(ctx, MLA_DUMP_LAYER, mla_dump_layer(ctx, lpc, p, x, y));
    MLA_TRY(mla_begin(ctx));
    if (!lpc)
        return mla_fail(ctx, MLA_ERR_NULL_POINTER, "lp", "NULL argument");
    /* the plan is the caller's const object; only the sparse re-plan of the
     * attention (its own buffers) changes through it */
    mla_layer_plan *lp = (mla_layer_plan *)lpc;
    MLA_TRY(check_forward(ctx, lp, p, x, y));
    if (lp->T == 0)
        return MLA_OK;
    /* Every stage's checks first (the dry pass), then the stages. The top-k
     * indices the attention reads are the indexer's, written in the real
     * pass. Index values in device memory stand as the plan validated them
     * (mla_layer_plan_create; as mla_attention_run); on the host they are
     * checked again, in place or by a copy, before anything is written. */
    layer_call lc = {lp, p, x, y};
    const uint32_t trust =
        MLA_TRUST_TOPK | (mla_context_memory(ctx) == MLA_MEMORY_HOST ? 0u : MLA_TRUST_INDICES);
    return mla_run_composite(ctx, layer_steps, &lc, trust);
}
