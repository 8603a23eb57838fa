/* The RoPE-once plan (MLA.md section 3): one function decides where rotation
 * happens, and every stage asks the plan instead of deciding for itself. The
 * plan also names the kernel each stage runs on its target, so that a wrong
 * path choice is visible (`mla plan`) and testable. */
#include <stdio.h>
#include <stdlib.h>

#include "core/checked.h"
#include "mla/mla.h"

struct mla_plan {
    mla_model_config cfg;
    mla_plan_options opt;
    mla_rope_site site;
    char kernel[MLA_STAGE_COUNT][96];
};

void mla_plan_options_default(mla_target target, mla_plan_options *out)
{
    if (!out)
        return;
    out->target = target;
    out->weight_dtype = MLA_DTYPE_BF16;
    out->q_dtype = MLA_DTYPE_BF16;
    out->cache_layout = MLA_CACHE_NORMAL;
    out->cache_dtype = MLA_DTYPE_BF16;
    out->force_rope_site = -1;
}

static int is_fp8(mla_dtype d) { return d == MLA_DTYPE_FP8_E4M3FN || d == MLA_DTYPE_FP8_E4M3FNUZ; }

static mla_status check_config(const mla_model_config *c)
{
    if (c->heads < 1 || c->heads > 128 || c->hidden < 1 || c->q_lora < 0 || c->kv_lora < 1 ||
        c->nope < 1 || c->rope < 2 || c->rope % 2 || c->v < 1 || c->max_pos < 1 ||
        c->rope_cfg.dim != c->rope)
        return MLA_ERR_INVALID_ARGUMENT;
    if (c->index_heads < 0 || c->index_topk < 0 || (c->index_heads > 0 && c->index_head_dim < 1))
        return MLA_ERR_INVALID_ARGUMENT;
    /* the widths the stages derive (weight rows, q_cat rows, per-token
     * bytes) fit in int64, so every later size is checked on T alone */
    const int64_t per_token_max = 8; /* the widest activation or cache element */
    if (mla_sz_mul3(c->heads, mla_sz_add(c->nope, mla_sz_add(c->rope, c->v)), per_token_max) < 0 ||
        mla_sz_mul3(c->heads, mla_sz_add(c->kv_lora, c->rope), per_token_max) < 0 ||
        mla_sz_mul(mla_sz_add(c->hidden, c->q_lora), per_token_max) < 0 ||
        mla_sz_mul3(c->index_heads, mla_sz_add(c->index_head_dim, 4), per_token_max) < 0 ||
        mla_sz_mul(c->index_topk, per_token_max) < 0)
        return MLA_ERR_OVERFLOW;
    return MLA_OK;
}

static mla_status check_options(const mla_model_config *c, const mla_plan_options *o)
{
    if ((int)o->target < 0 || o->target >= MLA_TARGET_COUNT ||
        (int)o->cache_layout < 0 || o->cache_layout >= MLA_CACHE_LAYOUT_COUNT ||
        o->force_rope_site < -1 || o->force_rope_site >= MLA_ROPE_SITE_COUNT)
        return MLA_ERR_INVALID_ARGUMENT;
    if (o->weight_dtype != MLA_DTYPE_BF16 && o->weight_dtype != MLA_DTYPE_FP8_E4M3FN &&
        o->weight_dtype != MLA_DTYPE_FP4X2)
        return MLA_ERR_DTYPE;
    if (o->q_dtype != MLA_DTYPE_BF16 && !is_fp8(o->q_dtype))
        return MLA_ERR_DTYPE;
    if (o->cache_dtype != MLA_DTYPE_BF16 && !is_fp8(o->cache_dtype))
        return MLA_ERR_DTYPE;
    if (o->cache_layout == MLA_CACHE_FP8_SCALED &&
        (!is_fp8(o->cache_dtype) || c->kv_lora % 128))
        return MLA_ERR_INVALID_ARGUMENT;
    if (o->cache_layout == MLA_CACHE_SHUFFLED) {
        const int64_t k = o->cache_dtype == MLA_DTYPE_BF16 ? 8 : 16;
        if (c->kv_lora % k || c->rope % k)
            return MLA_ERR_INVALID_ARGUMENT;
    }
    return MLA_OK;
}

/* The single decision. The fused kernel runs RoPE, the concat into q_cat and
 * the cache write in one pass over q_pe and k_pe, on every target, layout and
 * element type, so it is the default; a separate RoPE and RoPE inside the
 * attention call (which then also writes the new keys to the cache: only
 * the whole layer, mla_layer_forward, runs that site) are kept for callers
 * that force them. */
static mla_status choose_site(const mla_plan_options *o, mla_rope_site *site)
{
    mla_rope_site s = o->force_rope_site < 0 ? MLA_ROPE_SITE_FUSED_CACHE
                                             : (mla_rope_site)o->force_rope_site;
    /* The separate path writes q_cat's rope part straight from the RoPE op,
     * which rounds to bf16/f32 only; an fp8 q_cat needs the fused kernel.
     * The attention call rotates only bf16 / f32 q as well. */
    if (s != MLA_ROPE_SITE_FUSED_CACHE && is_fp8(o->q_dtype))
        return MLA_ERR_UNSUPPORTED;
    *site = s;
    return MLA_OK;
}

static void name_kernels(mla_plan *p)
{
    const mla_model_config *c = &p->cfg;
    const char *w = mla_dtype_name(p->opt.weight_dtype);
    const char *layout = mla_cache_layout_name(p->opt.cache_layout);
    const char *cdt = mla_dtype_name(p->opt.cache_dtype);
    const char *tgt = mla_target_name(p->opt.target);
#define KERNEL(stage, ...) snprintf(p->kernel[stage], sizeof p->kernel[stage], __VA_ARGS__)
    KERNEL(MLA_STAGE_QKV_A_PROJ, "linear/%s x2 (%s, kv_a_proj_with_mqa) @%s", w,
           c->q_lora ? "q_a_proj" : "q_proj", tgt);
    /* Every target takes the fused norm for bf16 activations: seed 001 is a
     * production stack that excluded gfx950 from it by a wrong condition. */
    if (c->q_lora)
        KERNEL(MLA_STAGE_QK_NORM, "fused_qk_rmsnorm/bf16 @%s", tgt);
    else
        KERNEL(MLA_STAGE_QK_NORM, "rmsnorm/bf16 (kv_a_layernorm only) @%s", tgt);
    if (c->q_lora)
        KERNEL(MLA_STAGE_Q_B_PROJ, "linear/%s (q_b_proj) @%s", w, tgt);
    else
        KERNEL(MLA_STAGE_Q_B_PROJ, "none (q_proj is in qkv_a_proj)");
    KERNEL(MLA_STAGE_ABSORB, "batched_gemm/bf16 (W_kc view of kv_b_proj) @%s", tgt);
    if (p->site == MLA_ROPE_SITE_ATTENTION) {
        KERNEL(MLA_STAGE_ROPE, "none (rotated once, inside attention)");
        KERNEL(MLA_STAGE_CACHE_WRITE, "none (the attention call writes %s/%s)", layout, cdt);
    } else if (p->site == MLA_ROPE_SITE_SEPARATE) {
        KERNEL(MLA_STAGE_ROPE, "rope/%s (q_pe, k_pe) @%s",
               mla_rope_style_name(MLA_ROPE_INTERLEAVED), tgt);
        KERNEL(MLA_STAGE_CACHE_WRITE, "cache_write/%s/%s @%s", layout, cdt, tgt);
    } else {
        KERNEL(MLA_STAGE_ROPE, "none (rotated once, at site %s)", mla_rope_site_name(p->site));
        KERNEL(MLA_STAGE_CACHE_WRITE, "fused_rope_concat_cache/%s/%s -> q_cat %s @%s", layout,
               cdt, mla_dtype_name(p->opt.q_dtype), tgt);
    }
    KERNEL(MLA_STAGE_ATTENTION, "attention/%s/%s%s (q %s) @%s", layout, cdt,
           p->site == MLA_ROPE_SITE_ATTENTION ? " + rope + cache_write" : "",
           mla_dtype_name(p->opt.q_dtype), tgt);
#undef KERNEL
}

mla_status mla_plan_create(const mla_model_config *cfg, const mla_plan_options *options,
                           mla_plan **out)
{
    if (!cfg || !out)
        return MLA_ERR_NULL_POINTER;
    *out = NULL;
    mla_plan_options defaults;
    mla_plan_options_default(MLA_TARGET_CPU, &defaults);
    if (!options)
        options = &defaults;
    mla_status st = check_config(cfg);
    if (st == MLA_OK)
        st = check_options(cfg, options);
    mla_rope_site site = MLA_ROPE_SITE_FUSED_CACHE;
    if (st == MLA_OK)
        st = choose_site(options, &site);
    if (st != MLA_OK)
        return st;
    mla_plan *p = calloc(1, sizeof *p);
    if (!p)
        return MLA_ERR_OUT_OF_MEMORY;
    p->cfg = *cfg;
    p->opt = *options;
    p->site = site;
    name_kernels(p);
    *out = p;
    return MLA_OK;
}

void mla_plan_destroy(mla_plan *plan) { free(plan); }

mla_rope_site mla_plan_rope_site(const mla_plan *plan)
{
    return plan ? plan->site : MLA_ROPE_SITE_COUNT;
}

int mla_plan_rotates_at(const mla_plan *plan, mla_rope_site site)
{
    return plan && plan->site == site;
}

const char *mla_plan_kernel(const mla_plan *plan, mla_stage stage)
{
    if (!plan || (int)stage < 0 || stage >= MLA_STAGE_COUNT)
        return "";
    return plan->kernel[stage];
}

const mla_model_config *mla_plan_config(const mla_plan *plan) { return plan ? &plan->cfg : NULL; }

const mla_plan_options *mla_plan_options_get(const mla_plan *plan)
{
    return plan ? &plan->opt : NULL;
}
