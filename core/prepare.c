/* mla_prepare: MLA.md section 2, steps 1-6, composed from the public ops on
 * the caller's context. RoPE happens where the plan says, once. */
#include <stdlib.h>
#include <string.h>

#include "core/cache_checks.h"
#include "core/dump_ops.h"
#include "core/indices.h"
#include "core/prepare_internal.h"
#include "core/validate.h"

#define WS_ALIGN 256

typedef struct ws_layout {
    int64_t qa, kv, q, q_abs, k_rot; /* byte offsets; -1 when unused */
    int64_t bytes;
} ws_layout;

static int is_fp8(mla_dtype d) { return d == MLA_DTYPE_FP8_E4M3FN || d == MLA_DTYPE_FP8_E4M3FNUZ; }

/* Places one region of elements * elsize bytes at the cursor, 256-byte
 * aligned; returns its offset, or -1 when elements == 0. A size past int64
 * (elements -1: an overflowed mla_sz_ product) leaves the cursor at -1. */
static int64_t place(int64_t *cursor, int64_t elements, int64_t elsize)
{
    if (elements == 0)
        return -1;
    int64_t at = *cursor;
    *cursor = mla_sz_add(*cursor, mla_sz_round_up(mla_sz_mul(elements, elsize), WS_ALIGN));
    return at;
}

/* MLA_ERR_SHAPE for T < 0, MLA_ERR_DTYPE for act, MLA_ERR_OVERFLOW when the
 * bytes do not fit (the config's widths do: mla_plan_create checked them). */
static mla_status layout_workspace(const mla_plan *plan, int64_t T, mla_dtype act, ws_layout *w)
{
    const mla_model_config *c = mla_plan_config(plan);
    const mla_plan_options *o = mla_plan_options_get(plan);
    if (T < 0)
        return MLA_ERR_SHAPE;
    if (T > ((int64_t)1 << 40))
        return MLA_ERR_OVERFLOW;
    if (act != MLA_DTYPE_F32 && act != MLA_DTYPE_BF16)
        return MLA_ERR_DTYPE;
    const int64_t es = (int64_t)mla_dtype_size(act), H = c->heads, qk = c->nope + c->rope;
    int64_t cur = 0;
    w->qa = place(&cur, mla_sz_mul(T, c->q_lora ? c->q_lora : H * qk), es);
    w->kv = place(&cur, mla_sz_mul(T, c->kv_lora + c->rope), es);
    w->q = c->q_lora ? place(&cur, mla_sz_mul3(T, H, qk), es) : w->qa;
    /* an fp8 q_cat cannot take the absorb's output in place */
    w->q_abs = is_fp8(o->q_dtype) ? place(&cur, mla_sz_mul3(T, H, c->kv_lora), 4) : -1;
    /* the separate site rotates k_pe into fp32, so that the cache bytes match
     * the fused kernel's (one rounding from fp32) */
    w->k_rot = mla_plan_rope_site(plan) == MLA_ROPE_SITE_SEPARATE
                   ? place(&cur, mla_sz_mul(T, c->rope), 4)
                   : -1;
    w->bytes = cur;
    return cur < 0 ? MLA_ERR_OVERFLOW : MLA_OK;
}

mla_status mla_prepare_workspace_bytes(const mla_plan *plan, int64_t T, mla_dtype act,
                                       int64_t *bytes)
{
    if (!plan || !bytes)
        return MLA_ERR_NULL_POINTER;
    ws_layout w;
    mla_status st = layout_workspace(plan, T, act, &w);
    if (st == MLA_OK)
        *bytes = w.bytes;
    return st;
}

static mla_status check_norm_weight(mla_context *ctx, const mla_tensor *w, const char *name,
                                    int64_t n)
{
    MLA_TRY(mla_check_tensor(ctx, w, name, 1));
    MLA_TRY(mla_check_dtype(ctx, w, name, MLA_DT_FLOAT));
    return mla_check_extent(ctx, w, name, 0, n);
}

/* A prepare call: its arguments and where its intermediates live. */
typedef struct prepare_call {
    const mla_plan *plan;
    const mla_layer_weights *wt;
    const mla_kv_b_form *kvb;
    const mla_tensor *x, *positions, *slots, *cos, *sin;
    const mla_cache_desc *cache_desc;
    mla_tensor *cache, *q_cat, *workspace;
    mla_prepare_views *views;
    ws_layout w;
} prepare_call;

/* Every argument, every index value and the aliasing between the call's
 * inputs and outputs, before the first stage runs; what the stages check
 * besides is checked by their dry pass (mla_run_composite). */
static mla_status check_inputs(mla_context *ctx, prepare_call *pc)
{
    const mla_model_config *c = mla_plan_config(pc->plan);
    const mla_plan_options *o = mla_plan_options_get(pc->plan);
    const mla_layer_weights *wt = pc->wt;
    const mla_kv_b_form *kvb = pc->kvb;
    const mla_tensor *x = pc->x, *q_cat = pc->q_cat;
    const mla_cache_desc *cd = pc->cache_desc;
    const int64_t H = c->heads, qk = c->nope + c->rope;
    MLA_TRY(mla_check_tensor(ctx, x, "x", 2));
    MLA_TRY(mla_check_extent(ctx, x, "x", 1, c->hidden));
    const int64_t T = x->shape[0];
    const mla_status lst = layout_workspace(pc->plan, T, x->dtype, &pc->w);
    if (lst == MLA_ERR_DTYPE)
        return mla_fail_field(ctx, MLA_ERR_DTYPE, "x", "dtype", "activations are f32 or bf16");
    if (lst != MLA_OK)
        return mla_fail_field(ctx, lst, "x", "shape[0]", "the workspace for %lld tokens overflows",
                              (long long)T);
    if (c->q_lora) {
        MLA_TRY(mla_check_projection(ctx, &wt->q_a_proj, "weights.q_a_proj", c->q_lora, c->hidden));
        MLA_TRY(check_norm_weight(ctx, &wt->q_a_layernorm, "weights.q_a_layernorm", c->q_lora));
        MLA_TRY(mla_check_projection(ctx, &wt->q_b_proj, "weights.q_b_proj", H * qk, c->q_lora));
    } else {
        MLA_TRY(mla_check_projection(ctx, &wt->q_b_proj, "weights.q_b_proj", H * qk, c->hidden));
    }
    MLA_TRY(mla_check_projection(ctx, &wt->kv_a_proj_with_mqa, "weights.kv_a_proj_with_mqa",
                                 c->kv_lora + c->rope, c->hidden));
    MLA_TRY(check_norm_weight(ctx, &wt->kv_a_layernorm, "weights.kv_a_layernorm", c->kv_lora));
    MLA_TRY(mla_check_projection(ctx, &wt->kv_b_proj, "weights.kv_b_proj", H * (c->nope + c->v),
                                 c->kv_lora));
    /* The absorb takes W_kc as a view of kv_b_proj: fp8 checkpoints are
     * dequantized to bf16 at load time (their 128x128 block scales do not
     * factor per head); MXFP4 ones come with the loader's W_kc re-quantized
     * along nope. */
    const mla_dtype kd = wt->kv_b_proj.w.dtype;
    if (kd != MLA_DTYPE_BF16 && !(kd == MLA_DTYPE_FP4X2 && kvb && kvb->w_kc_fp4) &&
        !(kd == MLA_DTYPE_FP8_E4M3FN && kvb && kvb->tensor_scale > 0))
        return mla_fail(ctx, MLA_ERR_UNSUPPORTED, "weights.kv_b_proj.w.dtype",
                        "the absorb needs kv_b_proj in bf16, MXFP4 with its W_kc operand, or fp8 "
                        "with one scale per tensor");
    if (!cd || cd->layout != o->cache_layout || cd->dtype != o->cache_dtype ||
        cd->kv_lora != c->kv_lora || cd->rope != c->rope)
        return mla_fail(ctx, MLA_ERR_INVALID_ARGUMENT, "cache_desc",
                        "the cache descriptor does not match the plan");
    int64_t block_bytes = 0;
    MLA_TRY(mla_check_cache(ctx, cd, pc->cache, &block_bytes));
    MLA_TRY(mla_check_output(ctx, pc->cache, "cache"));
    MLA_TRY(mla_check_tensor(ctx, q_cat, "q_cat", 3));
    if (q_cat->dtype != o->q_dtype)
        return mla_fail(ctx, MLA_ERR_DTYPE, "q_cat.dtype", "q_cat must be %s as planned",
                        mla_dtype_name(o->q_dtype));
    MLA_TRY(mla_check_extent(ctx, q_cat, "q_cat", 0, T));
    MLA_TRY(mla_check_extent(ctx, q_cat, "q_cat", 1, H));
    MLA_TRY(mla_check_extent(ctx, q_cat, "q_cat", 2, c->kv_lora + c->rope));
    MLA_TRY(mla_check_output(ctx, q_cat, "q_cat"));
    MLA_TRY(mla_check_rope_table(ctx, pc->cos, pc->sin));
    if (2 * pc->cos->shape[1] != c->rope)
        return mla_fail_field(ctx, MLA_ERR_SHAPE, "cos", "shape[1]", "the table is not for R = %lld",
                              (long long)c->rope);
    const mla_tensor *ws = pc->workspace;
    MLA_TRY(mla_check_workspace(ctx, ws, "workspace", pc->w.bytes));
    /* the index values: a bad position or slot (or one listed twice) is
     * refused before q_cat, the cache or the workspace is touched */
    MLA_TRY(mla_check_positions(ctx, pc->positions, "positions", T, pc->cos->shape[0]));
    MLA_TRY(mla_check_tensor(ctx, pc->slots, "slots", 1));
    MLA_TRY(
        mla_check_dtype(ctx, pc->slots, "slots", MLA_DT(MLA_DTYPE_I32) | MLA_DT(MLA_DTYPE_I64)));
    MLA_TRY(mla_check_extent(ctx, pc->slots, "slots", 0, T));
    MLA_TRY(mla_check_slot_values(ctx, pc->slots, T, cd->num_blocks * cd->block_size, "slots"));
    /* no output overlaps an input or another output (a later stage would
     * read what an earlier one wrote) */
    const mla_tensor *outs[3] = {pc->q_cat, pc->cache, ws};
    const char *onames[3] = {"q_cat", "cache", "workspace"};
    const mla_tensor *ins[7 + MLA_WEIGHT_TENSORS] = {x, pc->positions, pc->slots, pc->cos, pc->sin};
    const char *inames[7 + MLA_WEIGHT_TENSORS] = {"x", "positions", "slots", "cos", "sin"};
    int n = 5 + mla_weight_tensors(wt, c->q_lora != 0, 0, ins + 5, inames + 5);
    const mla_mxfp4_operand *kc = kvb ? kvb->w_kc_fp4 : NULL;
    if (kc) {
        ins[n] = &kc->codes, inames[n++] = "w_kc.codes";
        ins[n] = &kc->scales, inames[n++] = "w_kc.scales";
    }
    return mla_check_apart(ctx, outs, onames, 3, ins, inames, n);
}

void mla_prepare_key_views(const mla_plan *plan, int64_t T, mla_dtype act, void *workspace,
                           mla_memory mem, mla_tensor *k_nope, mla_tensor *k_pe)
{
    const mla_model_config *c = mla_plan_config(plan);
    const int64_t L = c->kv_lora, R = c->rope, D = L + R;
    ws_layout w;
    layout_workspace(plan, T, act, &w);
    uint8_t *kv = (uint8_t *)workspace + w.kv;
    *k_nope = mla_view(kv, act, mem, 2, (int64_t[]){T, L}, (int64_t[]){D, 1});
    *k_pe = mla_view(kv + L * (int64_t)mla_dtype_size(act), act, mem, 2, (int64_t[]){T, R},
                     (int64_t[]){D, 1});
}

mla_status mla_prepare(mla_context *ctx, const mla_plan *plan, const mla_layer_weights *wt,
                       const mla_tensor *x, const mla_tensor *positions, const mla_tensor *slots,
                       const mla_tensor *cos, const mla_tensor *sin,
                       const mla_cache_desc *cache_desc, mla_tensor *cache, mla_tensor *q_cat,
                       mla_tensor *workspace)
{
    MLA_DUMP_HOOK(ctx, MLA_DUMP_PREPARE,
                  mla_dump_prepare(ctx, plan, wt, x, positions, slots, cos, sin, cache_desc, cache,
                                   q_cat, workspace));
    MLA_TRY(mla_begin(ctx));
    /* At the ATTENTION site the new keys go to the attention call, which
     * rotates and caches them: only the layer (mla_layer_forward) can hand
     * them over, so a lone prepare there would leave the cache unwritten. */
    if (plan && mla_plan_rotates_at(plan, MLA_ROPE_SITE_ATTENTION))
        return mla_fail(ctx, MLA_ERR_UNSUPPORTED, "plan",
                        "RoPE inside attention: run the layer (mla_layer_forward)");
    return mla_prepare_run(ctx, plan, wt, NULL, x, positions, slots, cos, sin, cache_desc, cache,
                           q_cat, workspace, NULL);
}

/* MLA.md section 2, steps 1-6, through the public entry points. */
static mla_status prepare_steps(mla_context *ctx, void *args)
{
    const prepare_call *pc = args;
    const mla_plan *plan = pc->plan;
    const mla_layer_weights *wt = pc->wt;
    const mla_kv_b_form *kvb = pc->kvb;
    const mla_tensor *x = pc->x, *positions = pc->positions, *slots = pc->slots;
    const mla_tensor *cos = pc->cos, *sin = pc->sin, *q_cat = pc->q_cat;
    const ws_layout *w = &pc->w;
    const mla_model_config *c = mla_plan_config(plan);
    const int64_t T = x->shape[0], H = c->heads, L = c->kv_lora, R = c->rope;
    const int64_t qk = c->nope + R, D = L + R, Hqk = H * qk;
    uint8_t *ws = pc->workspace->data;
    const mla_memory mem = mla_context_memory(ctx);
    const mla_dtype act = x->dtype;
    const float eps = c->rms_eps;

    /* 1. latent = x @ [W_qa ; W_kva]^T (V2-Lite: q = x @ W_q^T) */
    const int64_t qa_cols = c->q_lora ? c->q_lora : Hqk;
    mla_tensor qa =
        mla_view(ws + w->qa, act, mem, 2, (int64_t[]){T, qa_cols}, (int64_t[]){qa_cols, 1});
    mla_tensor kv = mla_view(ws + w->kv, act, mem, 2, (int64_t[]){T, D}, (int64_t[]){D, 1});
    const mla_weight *wq = c->q_lora ? &wt->q_a_proj : &wt->q_b_proj;
    MLA_TRY(mla_project(ctx, x, wq, &qa));
    MLA_TRY(mla_project(ctx, x, &wt->kv_a_proj_with_mqa, &kv));

    /* 2. q_lat = RMSNorm(q_lat), k_nope = RMSNorm(k_nope), in place */
    mla_tensor k_nope = mla_view(ws + w->kv, act, mem, 2, (int64_t[]){T, L}, (int64_t[]){D, 1});
    if (c->q_lora)
        MLA_TRY(mla_fused_qk_rmsnorm(ctx, &qa, &wt->q_a_layernorm, eps, &k_nope,
                                     &wt->kv_a_layernorm, eps, &qa, NULL, &k_nope));
    else
        MLA_TRY(mla_rmsnorm(ctx, &k_nope, &wt->kv_a_layernorm, eps, &k_nope));

    /* 3. q = q_lat @ W_qb^T, seen as [T, H, nope + R] */
    mla_tensor q = mla_view(ws + w->q, act, mem, 2, (int64_t[]){T, Hqk}, (int64_t[]){Hqk, 1});
    if (c->q_lora)
        MLA_TRY(mla_project(ctx, &qa, &wt->q_b_proj, &q));

    /* 4. q_lat_nope[h] = q_nope[:, h] @ W_kc[h], W_kc[h] = kv_b_proj.mla_view(H, nope+v, L)[h, :nope] */
    const int64_t nv = c->nope + c->v;
    mla_tensor q_nope =
        mla_view(ws + w->q, act, mem, 3, (int64_t[]){H, T, c->nope}, (int64_t[]){qk, Hqk, 1});
    mla_tensor w_kc = mla_view(wt->kv_b_proj.w.data, wt->kv_b_proj.w.dtype,
                               wt->kv_b_proj.w.memory, 3,
                           (int64_t[]){H, c->nope, L},
                           (int64_t[]){nv * wt->kv_b_proj.w.stride[0],
                                       wt->kv_b_proj.w.stride[0], wt->kv_b_proj.w.stride[1]});
    const int64_t *qs = q_cat->stride;
    mla_tensor absorbed; /* [T, H, L] */
    if (w->q_abs >= 0)
        absorbed = mla_view(ws + w->q_abs, MLA_DTYPE_F32, mem, 3, (int64_t[]){T, H, L},
                            (int64_t[]){H * L, L, 1});
    else
        absorbed = mla_view(q_cat->data, q_cat->dtype, mem, 3, (int64_t[]){T, H, L},
                        (int64_t[]){qs[0], qs[1], qs[2]});
    mla_tensor absorbed_hm = absorbed; /* the same elements seen as [H, T, L] */
    mla_tensor_transpose(&absorbed_hm, 0, 1);
    if (wt->kv_b_proj.w.dtype == MLA_DTYPE_FP4X2)
        MLA_TRY(mla_batched_gemm_a16wfp4(ctx, &q_nope, kvb->w_kc_fp4, 1, MLA_MXFP4_PRODUCTION,
                                         &absorbed_hm));
    else
        MLA_TRY(mla_batched_gemm(ctx, &q_nope, &w_kc, kvb ? kvb->tensor_scale : 1.0f,
                                 &absorbed_hm));

    /* 5-6. RoPE once, at the plan's site, and the cache write */
    mla_tensor q_pe = mla_view((uint8_t *)ws + w->q + c->nope * mla_dtype_size(act), act, mem, 3,
                               (int64_t[]){T, H, R}, (int64_t[]){Hqk, qk, 1});
    mla_tensor k_pe = mla_view(ws + w->kv + L * mla_dtype_size(act), act, mem, 2, (int64_t[]){T, R},
                               (int64_t[]){D, 1});
    if (pc->views) {
        pc->views->q_lat = qa;
        pc->views->k_nope = k_nope;
        pc->views->k_pe = k_pe;
        pc->views->q = mla_view(ws + w->q, act, mem, 3, (int64_t[]){T, H, qk},
                                (int64_t[]){Hqk, qk, 1});
    }
    mla_tensor q_cat_pe = mla_view((uint8_t *)q_cat->data + L * qs[2] * mla_dtype_size(q_cat->dtype),
                               q_cat->dtype, mem, 3, (int64_t[]){T, H, R},
                               (int64_t[]){qs[0], qs[1], qs[2]});
    /* ATTENTION site: q_pe goes into q_cat unrotated and the keys stay in the
     * workspace for the attention call, which rotates both and writes the
     * cache (the layer passes them on) */
    if (mla_plan_rotates_at(plan, MLA_ROPE_SITE_ATTENTION))
        return mla_convert(ctx, &q_pe, &q_cat_pe, MLA_SATURATE);
    if (mla_plan_rotates_at(plan, MLA_ROPE_SITE_FUSED_CACHE)) {
        mla_rope_cache_args f = {
            cos,       sin,   MLA_ROPE_INTERLEAVED, &absorbed, &q_pe,     positions, &k_nope, &k_pe,
            positions, slots, pc->cache_desc,       pc->cache, pc->q_cat, 1.0f,      NULL};
        return mla_fused_rope_concat_cache(ctx, &f);
    }
    /* separate site: q_pe rotated straight into q_cat, k_pe into fp32 */
    mla_tensor k_rot =
        mla_view(ws + w->k_rot, MLA_DTYPE_F32, mem, 2, (int64_t[]){T, R}, (int64_t[]){R, 1});
    MLA_TRY(mla_rope(ctx, cos, sin, positions, &q_pe, &q_cat_pe, MLA_ROPE_INTERLEAVED));
    MLA_TRY(mla_rope(ctx, cos, sin, positions, &k_pe, &k_rot, MLA_ROPE_INTERLEAVED));
    return mla_cache_write(ctx, pc->cache_desc, pc->cache, &k_nope, &k_rot, slots);
}

mla_status mla_prepare_run(mla_context *ctx, const mla_plan *plan, const mla_layer_weights *wt,
                           const mla_kv_b_form *kvb, const mla_tensor *x,
                           const mla_tensor *positions, const mla_tensor *slots,
                           const mla_tensor *cos, const mla_tensor *sin,
                           const mla_cache_desc *cache_desc, mla_tensor *cache, mla_tensor *q_cat,
                           mla_tensor *workspace, mla_prepare_views *views)
{
    if (!plan || !wt)
        return mla_fail(ctx, MLA_ERR_NULL_POINTER, plan ? "weights" : "plan", "NULL argument");
    prepare_call pc = {plan, wt,         kvb,   x,     positions, slots, cos,
                       sin,  cache_desc, cache, q_cat, workspace, views, {0}};
    MLA_TRY(check_inputs(ctx, &pc));
    if (x->shape[0] == 0)
        return MLA_OK;
    /* the stages' own checks, then the stages; positions and slots are checked */
    return mla_run_composite(ctx, prepare_steps, &pc, MLA_TRUST_INDICES);
}
