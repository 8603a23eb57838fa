/* mla_indexer_prepare: the indexer's projections of MLA.md section 6 for T
 * tokens, composed from the public ops on the caller's context. */
#include <string.h>

#include "core/dump_ops.h"
#include "core/prepare_internal.h"
#include "core/validate.h"

#define WS_ALIGN 256
#define INDEXER_LN_EPS 1e-6f

typedef struct idx_ws {
    int64_t q, k_raw, w, s_q, bytes;
} idx_ws;

/* The region's offset; the cursor moves past it, 256-byte aligned (to -1,
 * for good, when a size is -1: an overflowed mla_sz_ product). */
static int64_t place(int64_t *cursor, int64_t bytes)
{
    int64_t at = *cursor;
    *cursor = mla_sz_add(*cursor, mla_sz_round_up(bytes, WS_ALIGN));
    return at;
}

static mla_status layout(const mla_model_config *c, int64_t T, int64_t es, idx_ws *w)
{
    if (c->index_heads < 1 || c->index_head_dim < 1)
        return MLA_ERR_INVALID_ARGUMENT;
    if (T < 0)
        return MLA_ERR_SHAPE;
    if (T > ((int64_t)1 << 40))
        return MLA_ERR_OVERFLOW;
    const int64_t Hi = c->index_heads, D = c->index_head_dim;
    int64_t cur = 0;
    w->q = place(&cur, mla_sz_mul4(T, Hi, D, es));
    w->k_raw = place(&cur, mla_sz_mul3(T, D, es));
    w->w = place(&cur, mla_sz_mul3(T, Hi, 2));
    w->s_q = place(&cur, mla_sz_mul3(T, Hi, 4));
    w->bytes = cur;
    return cur < 0 ? MLA_ERR_OVERFLOW : MLA_OK;
}

mla_status mla_indexer_workspace_bytes(const mla_model_config *cfg, int64_t T, int64_t *bytes)
{
    if (!cfg || !bytes)
        return MLA_ERR_NULL_POINTER;
    idx_ws w;
    /* f32 activations: the larger of the two */
    mla_status st = layout(cfg, T, 4, &w);
    if (st == MLA_OK)
        *bytes = w.bytes;
    return st;
}

static const mla_tensor *scale_of(const mla_weight *w)
{
    return w->w.dtype == MLA_DTYPE_BF16 ? NULL : &w->scale;
}

/* An indexer prepare call: its arguments and its workspace carve-up. */
typedef struct idx_call {
    const mla_model_config *c;
    const mla_indexer_weights *wt;
    const mla_indexer_options *o;
    const mla_tensor *q_lat, *x, *positions, *cos, *sin;
    mla_tensor *q_fp8, *w_out, *k, *workspace;
    idx_ws w;
} idx_call;

/* Every argument, the index values and the aliasing of the call's inputs
 * and outputs, before the first step; what the steps check besides is
 * checked by their dry pass (mla_run_composite). */
static mla_status check_args(mla_context *ctx, idx_call *a)
{
    const mla_model_config *c = a->c;
    const mla_indexer_options *o = a->o;
    const mla_tensor *q_lat = a->q_lat, *x = a->x, *cos = a->cos, *q_fp8 = a->q_fp8;
    const int64_t Hi = c->index_heads, D = c->index_head_dim;
    if (Hi < 1 || D < 1 || c->q_lora < 1)
        return mla_fail(ctx, MLA_ERR_INVALID_ARGUMENT, "cfg",
                        "the config has no indexer (or no q_lora)");
    if ((int)o->style < 0 || o->style >= MLA_ROPE_STYLE_COUNT || (o->hadamard != 0 && o->hadamard != 1))
        return mla_fail(ctx, MLA_ERR_INVALID_ARGUMENT, "options", "unknown rope style or flag");
    if (o->fp8 != MLA_DTYPE_FP8_E4M3FN && o->fp8 != MLA_DTYPE_FP8_E4M3FNUZ)
        return mla_fail(ctx, MLA_ERR_DTYPE, "options.fp8", "q is quantized to an fp8 flavour");
    MLA_TRY(mla_check_tensor(ctx, q_lat, "q_lat_normed", 2));
    MLA_TRY(mla_check_dtype(ctx, q_lat, "q_lat_normed", MLA_DT(MLA_DTYPE_F32) | MLA_DT(MLA_DTYPE_BF16)));
    MLA_TRY(mla_check_extent(ctx, q_lat, "q_lat_normed", 1, c->q_lora));
    const int64_t T = q_lat->shape[0];
    MLA_TRY(mla_check_tensor(ctx, x, "x", 2));
    MLA_TRY(mla_check_extent(ctx, x, "x", 0, T));
    MLA_TRY(mla_check_extent(ctx, x, "x", 1, c->hidden));
    if (x->dtype != q_lat->dtype)
        return mla_fail_field(ctx, MLA_ERR_DTYPE, "x", "dtype", "x and q_lat_normed share a dtype");
    MLA_TRY(mla_check_linear_weight(ctx, &a->wt->wq_b, "weights.wq_b", Hi * D, c->q_lora));
    MLA_TRY(mla_check_linear_weight(ctx, &a->wt->wk, "weights.wk", D, c->hidden));
    MLA_TRY(
        mla_check_linear_weight(ctx, &a->wt->weights_proj, "weights.weights_proj", Hi, c->hidden));
    const mla_tensor *nb[2] = {&a->wt->k_norm_weight, &a->wt->k_norm_bias};
    const char *nbn[2] = {"weights.k_norm_weight", "weights.k_norm_bias"};
    for (int i = 0; i < 2; ++i) {
        MLA_TRY(mla_check_tensor(ctx, nb[i], nbn[i], 1));
        MLA_TRY(mla_check_dtype(ctx, nb[i], nbn[i], MLA_DT(MLA_DTYPE_F32)));
        MLA_TRY(mla_check_extent(ctx, nb[i], nbn[i], 0, D));
    }
    MLA_TRY(mla_check_rope_table(ctx, cos, a->sin));
    if (2 * cos->shape[1] > D)
        return mla_fail_field(ctx, MLA_ERR_SHAPE, "cos", "shape[1]",
                              "the rope dim is larger than the indexer head");
    if (o->hadamard && (D > 1024 || (D & (D - 1))))
        return mla_fail(ctx, MLA_ERR_SHAPE, "cfg",
                        "the Hadamard rotation needs a power-of-two head dim <= 1024");
    MLA_TRY(mla_check_tensor(ctx, q_fp8, "q_fp8", 3));
    if (q_fp8->dtype != o->fp8)
        return mla_fail_field(ctx, MLA_ERR_DTYPE, "q_fp8", "dtype", "q_fp8 must be options.fp8");
    MLA_TRY(mla_check_extent(ctx, q_fp8, "q_fp8", 0, T));
    MLA_TRY(mla_check_extent(ctx, q_fp8, "q_fp8", 1, Hi));
    MLA_TRY(mla_check_extent(ctx, q_fp8, "q_fp8", 2, D));
    if ((Hi > 1 && q_fp8->stride[1] != mla_sz_mul(D, q_fp8->stride[2])) ||
        (T > 1 && q_fp8->stride[0] != mla_sz_mul(Hi, q_fp8->stride[1])) || q_fp8->stride[2] != 1)
        return mla_fail_field(ctx, MLA_ERR_STRIDE, "q_fp8", "stride",
                              "q_fp8 rows of (token, head) must be contiguous");
    MLA_TRY(mla_check_tensor(ctx, a->w_out, "w_out", 2));
    MLA_TRY(mla_check_dtype(ctx, a->w_out, "w_out", MLA_DT(MLA_DTYPE_F32)));
    MLA_TRY(mla_check_extent(ctx, a->w_out, "w_out", 0, T));
    MLA_TRY(mla_check_extent(ctx, a->w_out, "w_out", 1, Hi));
    MLA_TRY(mla_check_output(ctx, a->w_out, "w_out"));
    MLA_TRY(mla_check_tensor(ctx, a->k, "k", 2));
    MLA_TRY(mla_check_dtype(ctx, a->k, "k", MLA_DT_FLOAT));
    MLA_TRY(mla_check_extent(ctx, a->k, "k", 0, T));
    MLA_TRY(mla_check_extent(ctx, a->k, "k", 1, D));
    MLA_TRY(mla_check_output(ctx, a->k, "k"));
    if (layout(c, T, (int64_t)mla_dtype_size(q_lat->dtype), &a->w) != MLA_OK)
        return mla_fail(ctx, MLA_ERR_OVERFLOW, "q_lat_normed", "too many tokens");
    const mla_tensor *ws = a->workspace;
    MLA_TRY(mla_check_workspace(ctx, ws, "workspace", a->w.bytes));
    /* the positions, before any output is written */
    MLA_TRY(mla_check_positions(ctx, a->positions, "positions", T, cos->shape[0]));
    const mla_tensor *outs[4] = {q_fp8, a->w_out, a->k, ws};
    const char *onames[4] = {"q_fp8", "w_out", "k", "workspace"};
    const mla_indexer_weights *wt = a->wt;
    const mla_tensor *ins[13] = {q_lat,
                                 x,
                                 a->positions,
                                 cos,
                                 a->sin,
                                 &wt->wq_b.w,
                                 scale_of(&wt->wq_b),
                                 &wt->wk.w,
                                 scale_of(&wt->wk),
                                 &wt->weights_proj.w,
                                 scale_of(&wt->weights_proj),
                                 &wt->k_norm_weight,
                                 &wt->k_norm_bias};
    const char *inames[13] = {"q_lat_normed",
                              "x",
                              "positions",
                              "cos",
                              "sin",
                              "weights.wq_b.w",
                              "weights.wq_b.scale",
                              "weights.wk.w",
                              "weights.wk.scale",
                              "weights.weights_proj.w",
                              "weights.weights_proj.scale",
                              "weights.k_norm_weight",
                              "weights.k_norm_bias"};
    return mla_check_apart(ctx, outs, onames, 4, ins, inames, 13);
}

/* MLA.md section 6's projections, through the public entry points. */
static mla_status idx_steps(mla_context *ctx, void *args)
{
    const idx_call *a = args;
    const mla_model_config *cfg = a->c;
    const mla_indexer_weights *wt = a->wt;
    const mla_indexer_options *opt = a->o;
    const mla_tensor *q_lat = a->q_lat, *x = a->x, *positions = a->positions, *cos = a->cos,
                     *sin = a->sin;
    mla_tensor *k = a->k;
    const idx_ws *w = &a->w;
    const int64_t T = q_lat->shape[0], Hi = cfg->index_heads, D = cfg->index_head_dim;
    uint8_t *ws = a->workspace->data;
    const mla_memory mem = mla_context_memory(ctx);
    const mla_dtype act = q_lat->dtype;

    /* q = q_lat_normed @ W_qb_idx^T, seen as [T, Hi, D] */
    mla_tensor q2 =
        mla_view(ws + w->q, act, mem, 2, (int64_t[]){T, Hi * D}, (int64_t[]){Hi * D, 1});
    mla_tensor q3 =
        mla_view(ws + w->q, act, mem, 3, (int64_t[]){T, Hi, D}, (int64_t[]){Hi * D, D, 1});
    MLA_TRY(mla_linear(ctx, q_lat, &wt->wq_b.w, scale_of(&wt->wq_b), &q2));
    /* k = LayerNorm(x @ W_k^T); w = x @ W_w^T in bf16 */
    mla_tensor k_raw = mla_view(ws + w->k_raw, act, mem, 2, (int64_t[]){T, D}, (int64_t[]){D, 1});
    MLA_TRY(mla_linear(ctx, x, &wt->wk.w, scale_of(&wt->wk), &k_raw));
    MLA_TRY(mla_layernorm(ctx, &k_raw, &wt->k_norm_weight, &wt->k_norm_bias, INDEXER_LN_EPS, k));
    mla_tensor wb =
        mla_view(ws + w->w, MLA_DTYPE_BF16, mem, 2, (int64_t[]){T, Hi}, (int64_t[]){Hi, 1});
    MLA_TRY(mla_linear(ctx, x, &wt->weights_proj.w, scale_of(&wt->weights_proj), &wb));
    /* RoPE on the first R dims of q and k, in place (the op does not care) */
    MLA_TRY(mla_rope(ctx, cos, sin, positions, &q3, &q3, opt->style));
    MLA_TRY(mla_rope(ctx, cos, sin, positions, k, k, opt->style));
    if (opt->hadamard) {
        MLA_TRY(mla_hadamard(ctx, &q3, &q3));
        MLA_TRY(mla_hadamard(ctx, k, k));
    }
    /* q to fp8 per (token, head) with a power-of-two scale, then the head weights */
    mla_tensor q_rows = mla_view(ws + w->q, act, mem, 2, (int64_t[]){T * Hi, D}, (int64_t[]){D, 1});
    mla_tensor codes = mla_view(a->q_fp8->data, a->q_fp8->dtype, mem, 2, (int64_t[]){T * Hi, D},
                                (int64_t[]){D, 1});
    mla_tensor s_q =
        mla_view(ws + w->s_q, MLA_DTYPE_F32, mem, 2, (int64_t[]){T * Hi, 1}, (int64_t[]){1, 1});
    MLA_TRY(mla_fp8_group_quant(ctx, &q_rows, &codes, &s_q, D, MLA_FP8_SCALE_UE8M0));
    mla_tensor s_q2 =
        mla_view(ws + w->s_q, MLA_DTYPE_F32, mem, 2, (int64_t[]){T, Hi}, (int64_t[]){Hi, 1});
    return mla_indexer_head_weights(ctx, &wb, &s_q2, a->w_out);
}

mla_status mla_indexer_prepare(mla_context *ctx, const mla_model_config *cfg,
                               const mla_indexer_weights *wt, const mla_indexer_options *opt,
                               const mla_tensor *q_lat, const mla_tensor *x,
                               const mla_tensor *positions, const mla_tensor *cos,
                               const mla_tensor *sin, mla_tensor *q_fp8, mla_tensor *w_out,
                               mla_tensor *k, mla_tensor *workspace)
{
    MLA_DUMP_HOOK(ctx, MLA_DUMP_INDEXER_PREPARE,
                  mla_dump_indexer_prepare(ctx, cfg, wt, opt, q_lat, x, positions, cos, sin, q_fp8,
                                           w_out, k, workspace));
    MLA_TRY(mla_begin(ctx));
    if (!cfg || !wt || !opt)
        return mla_fail(ctx, MLA_ERR_NULL_POINTER,
                        !cfg  ? "cfg"
                        : !wt ? "weights"
                              : "options",
                        "NULL argument");
    idx_call a = {cfg, wt, opt, q_lat, x, positions, cos, sin, q_fp8, w_out, k, workspace, {0}};
    MLA_TRY(check_args(ctx, &a));
    if (q_lat->shape[0] == 0)
        return MLA_OK;
    /* the steps' own checks, then the steps; the positions are checked */
    return mla_run_composite(ctx, idx_steps, &a, MLA_TRUST_INDICES);
}
