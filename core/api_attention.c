/* Entry points of the MLA attention core (include/mla/mla_attention.h):
 * the descriptor defaults, the plan (validation of every index value, the
 * split-KV schedule of core/attention_planner.c) and the run.
 *
 * Checks run in the order descriptor, cache, shapes and dtypes, strides and
 * aliasing, then (plan; run on host memory) index values, then supports():
 * a refused call writes nothing. The run on device memory reads no index
 * value and allocates nothing (a HIP/CUDA graph can capture it). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/attention_plan.h"
#include "core/attention_planner.h"
#include "core/cache_checks.h"
#include "core/indices.h"
#include "core/validate.h"

#define MAX_HEADS 128

mla_status mla_attention_desc_default(const mla_model_config *cfg, const mla_cache_desc *cache,
                                      mla_attention_desc *out)
{
    if (!cfg || !cache || !out)
        return MLA_ERR_NULL_POINTER;
    if (cache->kv_lora != cfg->kv_lora || cache->rope != cfg->rope)
        return MLA_ERR_SHAPE;
    memset(out, 0, sizeof *out);
    out->heads = cfg->heads;
    out->cache = *cache;
    out->paged = 1;
    out->q_dtype = MLA_DTYPE_BF16;
    out->q_scale = 1.0f;
    out->out_dtype = MLA_DTYPE_F32;
    out->softmax_scale = (float)mla_softmax_scale(cfg);
    out->topk = 0;
    out->next_n = 1;
    out->num_splits = 0;
    return MLA_OK;
}

/* ------------------------------------------------------------ shapes */

/* What the shapes say (filled by check_args). */
typedef struct attn_shape {
    int64_t S, T, max_blocks, Tk, block_bytes;
} attn_shape;

static int is_fp8(mla_dtype d) { return d == MLA_DTYPE_FP8_E4M3FN || d == MLA_DTYPE_FP8_E4M3FNUZ; }

static mla_status check_desc(mla_context *ctx, const mla_attention_desc *d)
{
    if (d->heads < 1 || d->heads > MAX_HEADS)
        return mla_fail(ctx, MLA_ERR_INVALID_ARGUMENT, "desc.heads",
                        "heads must be 1..128, got %lld", (long long)d->heads);
    const unsigned qok = MLA_DT(MLA_DTYPE_BF16) | MLA_DT(MLA_DTYPE_F32) | MLA_DT_FP8;
    if ((int)d->q_dtype < 0 || d->q_dtype >= MLA_DTYPE_COUNT || !(qok & MLA_DT(d->q_dtype)))
        return mla_fail(ctx, MLA_ERR_DTYPE, "desc.q_dtype", "q is bf16, f32 or an fp8 flavour");
    if (is_fp8(d->q_dtype) && (!(d->q_scale > 0.0f) || !isfinite(d->q_scale)))
        return mla_fail(ctx, MLA_ERR_INVALID_ARGUMENT, "desc.q_scale",
                        "an fp8 q needs a finite q_scale > 0");
    if (d->out_dtype != MLA_DTYPE_F32 && d->out_dtype != MLA_DTYPE_BF16)
        return mla_fail(ctx, MLA_ERR_DTYPE, "desc.out_dtype", "o is f32 or bf16");
    if (!(d->softmax_scale > 0.0f) || !isfinite(d->softmax_scale))
        return mla_fail(ctx, MLA_ERR_INVALID_ARGUMENT, "desc.softmax_scale",
                        "the softmax scale must be finite and > 0");
    if (d->paged != 0 && d->paged != 1)
        return mla_fail(ctx, MLA_ERR_INVALID_ARGUMENT, "desc.paged", "paged is 0 or 1");
    if (d->topk < 0 || d->topk > INT32_MAX)
        return mla_fail(ctx, MLA_ERR_INVALID_ARGUMENT, "desc.topk", "topk is 0 (dense) or > 0");
    if (d->num_splits < 0 || d->num_splits > MLA_ATTN_MAX_SPLITS)
        return mla_fail(ctx, MLA_ERR_INVALID_ARGUMENT, "desc.num_splits",
                        "num_splits is 0 (the plan decides), 1 (off) or at most %d",
                        MLA_ATTN_MAX_SPLITS);
    return MLA_OK;
}

/* An optional I32 index tensor of rank ndim. */
static mla_status check_i32(mla_context *ctx, const mla_tensor *t, const char *name, int32_t ndim)
{
    MLA_TRY(mla_check_tensor(ctx, t, name, ndim));
    return mla_check_dtype(ctx, t, name, MLA_DT(MLA_DTYPE_I32));
}

/* RoPE inside attention: the table, the new key rows, positions and slots
 * (shapes; the values are checked with the other indices). */
static mla_status check_rope_shapes(mla_context *ctx, const mla_attention_desc *d,
                                    const mla_attention_args *a, attn_shape *sh)
{
    const mla_attention_rope *r = a->rope;
    if (a->q->dtype != MLA_DTYPE_BF16 && a->q->dtype != MLA_DTYPE_F32)
        return mla_fail_field(ctx, MLA_ERR_DTYPE, "q", "dtype",
                              "RoPE inside attention needs a bf16 or f32 q");
    MLA_TRY(mla_check_rope_table(ctx, r->cos, r->sin));
    if (2 * r->cos->shape[1] != d->cache.rope)
        return mla_fail_field(ctx, MLA_ERR_SHAPE, "cos", "shape[1]",
                              "the table's rope dim %lld differs from the cache's %lld",
                              (long long)(2 * r->cos->shape[1]), (long long)d->cache.rope);
    if ((int)r->style < 0 || r->style >= MLA_ROPE_STYLE_COUNT)
        return mla_fail(ctx, MLA_ERR_INVALID_ARGUMENT, "style", "unknown rope style %d",
                        (int)r->style);
    MLA_TRY(mla_check_tensor(ctx, r->q_pos, "q_pos", 1));
    MLA_TRY(mla_check_cache_k(ctx, &d->cache, r->k_nope, r->k_pe));
    sh->Tk = r->k_nope->shape[0];
    MLA_TRY(mla_check_tensor(ctx, r->k_pos, "k_pos", 1));
    MLA_TRY(mla_check_tensor(ctx, r->slots, "slots", 1));
    return mla_check_output(ctx, a->cache, "cache");
}

/* Outputs (o, lse; the cache with rope; the workspace at run) apart from
 * each other and from every input. */
static mla_status check_aliasing(mla_context *ctx, const mla_attention_args *a, int run)
{
    const mla_attention_rope *r = a->rope;
    const mla_tensor *ins[13] = {
        a->q,     a->block_table,     a->context_lens, a->cu_q_lens, a->topk_indices,
        a->sinks, r ? NULL : a->cache};
    const char *inames[13] = {"q",      "block_table", "context_lens", "cu_q_lens", "topk_indices",
                              "sinks",  "cache",       "cos",          "sin",       "q_pos",
                              "k_nope", "k_pe",        "k_pos"};
    const mla_tensor *outs[4] = {a->o, a->lse, r ? a->cache : NULL, run ? a->workspace : NULL};
    const char *onames[4] = {"o", "lse", "cache", "workspace"};
    const mla_tensor *slots = r ? r->slots : NULL;
    if (r) {
        ins[7] = r->cos, ins[8] = r->sin, ins[9] = r->q_pos, ins[10] = r->k_nope;
        ins[11] = r->k_pe, ins[12] = r->k_pos;
    }
    for (int o = 0; o < 4; ++o) {
        if (!outs[o])
            continue;
        for (int i = 0; i < 13; ++i)
            if (ins[i])
                MLA_TRY(mla_check_disjoint(ctx, outs[o], onames[o], ins[i], inames[i]));
        if (slots)
            MLA_TRY(mla_check_disjoint(ctx, outs[o], onames[o], slots, "slots"));
        for (int p = o + 1; p < 4; ++p)
            if (outs[p])
                MLA_TRY(mla_check_disjoint(ctx, outs[o], onames[o], outs[p], onames[p]));
    }
    return MLA_OK;
}

/* Every descriptor, dtype, shape and stride; the workspace only at run
 * (the plan says how big it must be). */
static mla_status check_args(mla_context *ctx, const mla_attention_desc *d,
                             const mla_attention_args *a, attn_shape *sh, int run)
{
    if (!a)
        return mla_fail(ctx, MLA_ERR_NULL_POINTER, "args", "args is NULL");
    MLA_TRY(check_desc(ctx, d));
    memset(sh, 0, sizeof *sh);
    MLA_TRY(mla_check_cache(ctx, &d->cache, a->cache, &sh->block_bytes));
    const int64_t H = d->heads, L = d->cache.kv_lora, R = d->cache.rope;
    MLA_TRY(mla_check_tensor(ctx, a->q, "q", 3));
    if (a->q->dtype != d->q_dtype)
        return mla_fail_field(ctx, MLA_ERR_DTYPE, "q", "dtype", "q is %s, the descriptor says %s",
                              mla_dtype_name(a->q->dtype), mla_dtype_name(d->q_dtype));
    sh->T = a->q->shape[0];
    MLA_TRY(mla_check_extent(ctx, a->q, "q", 1, H));
    MLA_TRY(mla_check_extent(ctx, a->q, "q", 2, L + R));
    MLA_TRY(check_i32(ctx, a->context_lens, "context_lens", 1));
    sh->S = a->context_lens->shape[0];
    if (d->paged) {
        MLA_TRY(check_i32(ctx, a->block_table, "block_table", 2));
        MLA_TRY(mla_check_extent(ctx, a->block_table, "block_table", 0, sh->S));
        sh->max_blocks = a->block_table->shape[1];
    } else {
        if (a->block_table)
            return mla_fail(ctx, MLA_ERR_INVALID_ARGUMENT, "block_table",
                            "block_table must be NULL in contiguous mode (desc.paged = 0)");
        if (sh->S > d->cache.num_blocks)
            return mla_fail_field(ctx, MLA_ERR_SHAPE, "context_lens", "shape[0]",
                                  "%lld sequences, the contiguous cache holds %lld",
                                  (long long)sh->S, (long long)d->cache.num_blocks);
        sh->max_blocks = 1;
    }
    if (a->cu_q_lens) {
        MLA_TRY(check_i32(ctx, a->cu_q_lens, "cu_q_lens", 1));
        MLA_TRY(mla_check_extent(ctx, a->cu_q_lens, "cu_q_lens", 0, sh->S + 1));
    } else {
        if (d->next_n < 1)
            return mla_fail(ctx, MLA_ERR_INVALID_ARGUMENT, "desc.next_n",
                            "next_n must be >= 1 without cu_q_lens");
        MLA_TRY(mla_check_extent(ctx, a->q, "q", 0, sh->S * d->next_n));
    }
    if (d->topk > 0) {
        MLA_TRY(check_i32(ctx, a->topk_indices, "topk_indices", 2));
        MLA_TRY(mla_check_extent(ctx, a->topk_indices, "topk_indices", 0, sh->T));
        MLA_TRY(mla_check_extent(ctx, a->topk_indices, "topk_indices", 1, d->topk));
    } else if (a->topk_indices) {
        return mla_fail(ctx, MLA_ERR_INVALID_ARGUMENT, "topk_indices",
                        "topk_indices must be NULL for dense attention (desc.topk = 0)");
    }
    if (a->sinks) {
        MLA_TRY(mla_check_tensor(ctx, a->sinks, "sinks", 1));
        MLA_TRY(mla_check_dtype(ctx, a->sinks, "sinks", MLA_DT(MLA_DTYPE_F32)));
        MLA_TRY(mla_check_extent(ctx, a->sinks, "sinks", 0, H));
    }
    MLA_TRY(mla_check_tensor(ctx, a->o, "o", 3));
    if (a->o->dtype != d->out_dtype)
        return mla_fail_field(ctx, MLA_ERR_DTYPE, "o", "dtype", "o is %s, the descriptor says %s",
                              mla_dtype_name(a->o->dtype), mla_dtype_name(d->out_dtype));
    MLA_TRY(mla_check_extent(ctx, a->o, "o", 0, sh->T));
    MLA_TRY(mla_check_extent(ctx, a->o, "o", 1, H));
    MLA_TRY(mla_check_extent(ctx, a->o, "o", 2, L));
    MLA_TRY(mla_check_output(ctx, a->o, "o"));
    if (a->lse) {
        MLA_TRY(mla_check_tensor(ctx, a->lse, "lse", 2));
        MLA_TRY(mla_check_dtype(ctx, a->lse, "lse", MLA_DT(MLA_DTYPE_F32)));
        MLA_TRY(mla_check_extent(ctx, a->lse, "lse", 0, sh->T));
        MLA_TRY(mla_check_extent(ctx, a->lse, "lse", 1, H));
        MLA_TRY(mla_check_output(ctx, a->lse, "lse"));
    }
    if (a->rope)
        MLA_TRY(check_rope_shapes(ctx, d, a, sh));
    if (run && a->workspace) {
        MLA_TRY(mla_check_tensor(ctx, a->workspace, "workspace", 1));
        MLA_TRY(mla_check_dtype(ctx, a->workspace, "workspace", MLA_DT(MLA_DTYPE_U8)));
        if (a->workspace->shape[0] > 1 && a->workspace->stride[0] != 1)
            return mla_fail_field(ctx, MLA_ERR_STRIDE, "workspace", "stride",
                                  "the workspace bytes must be contiguous");
    }
    return check_aliasing(ctx, a, run);
}

/* ------------------------------------------------------ index values */

/* An index tensor's values: staged on the host (device memory, read once by
 * mla_read_indices) or read in place (host memory: no copy, no allocation). */
typedef struct ix {
    const mla_tensor *t;
    int64_t *staged; /* row-major, or NULL */
} ix;

static mla_status ix_open(mla_context *ctx, const mla_tensor *t, const char *name, ix *x)
{
    x->t = t;
    x->staged = NULL;
    if (!t || t->memory == MLA_MEMORY_HOST)
        return MLA_OK;
    return mla_read_indices(ctx, t, name, &x->staged);
}

/* Element (i, j) of a 1-D (j = 0) or 2-D I32 index tensor. */
static int64_t ix_at(const ix *x, int64_t i, int64_t j)
{
    const mla_tensor *t = x->t;
    if (x->staged)
        return x->staged[t->ndim == 2 ? i * t->shape[1] + j : i];
    const int64_t off = i * t->stride[0] + (t->ndim == 2 ? j * t->stride[1] : 0);
    return ((const int32_t *)t->data)[off];
}

static void ix_close(ix *x) { free(x->staged); }

/* The index tensors of a call, open together. */
typedef struct attn_ix {
    ix ctx_lens, cu_q, table, topk;
} attn_ix;

static void close_all(attn_ix *v)
{
    ix_close(&v->ctx_lens);
    ix_close(&v->cu_q);
    ix_close(&v->table);
    ix_close(&v->topk);
}

/* First query row of sequence s (cu_q_lens, or s * next_n). */
static int64_t cu_at(const attn_ix *v, const mla_attention_desc *d, int64_t s)
{
    return v->cu_q.t ? ix_at(&v->cu_q, s, 0) : s * d->next_n;
}

/* Every index value the kernels read (header of mla_attention_plan_create).
 * len (optional) receives the work length of each sequence, max_q the
 * largest n_s. */
static mla_status check_values(mla_context *ctx, const mla_attention_desc *d,
                               const mla_attention_args *a, const attn_shape *sh, const attn_ix *v,
                               int64_t *len, int64_t *max_q)
{
    const int64_t S = sh->S, T = sh->T, bs = d->cache.block_size;
    const int64_t cap = d->paged ? sh->max_blocks * bs : bs;
    *max_q = 0;
    if (v->cu_q.t) {
        if (ix_at(&v->cu_q, 0, 0) != 0 || ix_at(&v->cu_q, S, 0) != T)
            return mla_fail(ctx, MLA_ERR_OUT_OF_RANGE, "cu_q_lens",
                            "cu_q_lens must start at 0 and end at T = %lld", (long long)T);
        for (int64_t s = 0; s < S; ++s)
            if (ix_at(&v->cu_q, s + 1, 0) < ix_at(&v->cu_q, s, 0))
                return mla_fail(ctx, MLA_ERR_OUT_OF_RANGE, "cu_q_lens",
                                "cu_q_lens decreases at %lld", (long long)(s + 1));
    }
    for (int64_t s = 0; s < S; ++s) {
        const int64_t c = ix_at(&v->ctx_lens, s, 0);
        const int64_t n = cu_at(v, d, s + 1) - cu_at(v, d, s);
        if (c < 0 || c > cap)
            return mla_fail(ctx, MLA_ERR_OUT_OF_RANGE, "context_lens",
                            "context_lens[%lld] = %lld is outside [0, %lld] (the %s capacity)",
                            (long long)s, (long long)c, (long long)cap,
                            d->paged ? "block table's" : "block's");
        if (c > 0 && c < n)
            return mla_fail(ctx, MLA_ERR_OUT_OF_RANGE, "context_lens",
                            "context_lens[%lld] = %lld: next_n larger than the "
                            "context (%lld rows)",
                            (long long)s, (long long)c, (long long)n);
        *max_q = n > *max_q ? n : *max_q;
        if (d->paged)
            for (int64_t b = 0; b < (c + bs - 1) / bs; ++b) {
                const int64_t id = ix_at(&v->table, s, b);
                if (id < 0 || id >= d->cache.num_blocks)
                    return mla_fail(ctx, MLA_ERR_OUT_OF_RANGE, "block_table",
                                    "block_table[%lld, %lld] = %lld is outside [0, %lld)",
                                    (long long)s, (long long)b, (long long)id,
                                    (long long)d->cache.num_blocks);
            }
        for (int64_t r = cu_at(v, d, s); d->topk > 0 && r < cu_at(v, d, s + 1); ++r)
            for (int64_t i = 0; i < d->topk; ++i) {
                const int64_t k = ix_at(&v->topk, r, i);
                if (k < -1 || k >= c)
                    return mla_fail(ctx, MLA_ERR_OUT_OF_RANGE, "topk_indices",
                                    "topk_indices[%lld, %lld] = %lld is outside [-1, %lld)",
                                    (long long)r, (long long)i, (long long)k, (long long)c);
            }
        if (len)
            len[s] = c == 0 ? 0 : d->topk > 0 ? d->topk : c;
    }
    (void)a;
    return MLA_OK;
}

/* RoPE positions (< the table's rows) and slots (< the cache's capacity, no
 * slot twice). Reads the values (a copy for device memory). */
static mla_status check_rope_values(mla_context *ctx, const mla_attention_desc *d,
                                    const mla_attention_rope *r, const attn_shape *sh)
{
    MLA_TRY(mla_check_positions(ctx, r->q_pos, "q_pos", sh->T, r->cos->shape[0]));
    MLA_TRY(mla_check_positions(ctx, r->k_pos, "k_pos", sh->Tk, r->cos->shape[0]));
    return mla_check_cache_slots(ctx, &d->cache, r->slots, sh->Tk);
}

/* Opens the index tensors (staging device memory) and checks their values. */
static mla_status read_and_check(mla_context *ctx, const mla_attention_desc *d,
                                 const mla_attention_args *a, const attn_shape *sh, int64_t *len,
                                 int64_t *max_q)
{
    attn_ix v;
    memset(&v, 0, sizeof v);
    mla_status st = ix_open(ctx, a->context_lens, "context_lens", &v.ctx_lens);
    if (st == MLA_OK)
        st = ix_open(ctx, a->cu_q_lens, "cu_q_lens", &v.cu_q);
    if (st == MLA_OK && d->paged)
        st = ix_open(ctx, a->block_table, "block_table", &v.table);
    if (st == MLA_OK && d->topk > 0)
        st = ix_open(ctx, a->topk_indices, "topk_indices", &v.topk);
    if (st == MLA_OK)
        st = check_values(ctx, d, a, sh, &v, len, max_q);
    close_all(&v);
    if (st == MLA_OK && a->rope)
        st = check_rope_values(ctx, d, a->rope, sh);
    return st;
}

/* ------------------------------------------------------------ variants */

/* The attention variant: in = q dtype, out = o dtype, layout = cache layout,
 * rule = cache element dtype, group = block_size, rows = T, cols = heads. */
static mla_variant attention_variant(const mla_attention_desc *d, int64_t T)
{
    mla_variant v = {MLA_OP_ATTENTION,
                     d->q_dtype,
                     d->out_dtype,
                     (int32_t)d->cache.layout,
                     (int32_t)d->cache.dtype,
                     d->cache.block_size,
                     T,
                     d->heads};
    return v;
}

/* supports() for the attention and, with rope inside attention, for the ops
 * the run composes (the copy of q, the two rotations, the cache write). */
static mla_status check_supported(mla_context *ctx, const mla_attention_desc *d,
                                  const mla_attention_args *a, const attn_shape *sh)
{
    mla_variant v = attention_variant(d, sh->T);
    MLA_TRY(mla_check_supported(ctx, &v));
    MLA_SLOT(ctx, attention);
    if (!a->rope)
        return MLA_OK;
    const mla_attention_rope *r = a->rope;
    const int64_t L = d->cache.kv_lora, R = d->cache.rope;
    const mla_dtype q = a->q->dtype;
    const mla_variant vs[4] = {
        {MLA_OP_CONVERT, q, q, 0, (int32_t)MLA_SATURATE, 0, sh->T * d->heads * L, L},
        {MLA_OP_ROPE, q, q, 0, (int32_t)r->style, 0, sh->T, R},
        {MLA_OP_ROPE, r->k_pe->dtype, MLA_DTYPE_F32, 0, (int32_t)r->style, 0, sh->Tk, R},
        {MLA_OP_CACHE_WRITE, d->cache.dtype, d->cache.dtype, (int32_t)d->cache.layout, 0,
         d->cache.block_size, sh->Tk, L + R}};
    for (int i = 0; i < 4; ++i)
        MLA_TRY(mla_check_supported(ctx, &vs[i]));
    MLA_SLOT(ctx, convert);
    MLA_SLOT(ctx, rope);
    MLA_SLOT(ctx, cache_write);
    return MLA_OK;
}

/* ---------------------------------------------------------------- plan */

static void free_plan_buffers(mla_attention_plan *p)
{
    if (p->work_dev && p->work_dev != p->work_host)
        p->ctx->ops->mem_free(p->ctx, p->work_dev);
    if (p->cu_q_dev && p->cu_q_dev != p->cu_q_host)
        p->ctx->ops->mem_free(p->ctx, p->cu_q_dev);
    if (p->splits_dev && p->splits_dev != p->splits_host)
        p->ctx->ops->mem_free(p->ctx, p->splits_dev);
    free(p->work_host);
    free(p->cu_q_host);
    free(p->splits_host);
}

void mla_attention_plan_destroy(mla_attention_plan *plan)
{
    if (!plan)
        return;
    free_plan_buffers(plan);
    free(plan);
}

/* A context-memory twin of a host array (the same pointer for host memory). */
static mla_status twin(mla_context *ctx, void *host, size_t bytes, void **dev)
{
    if (ctx->ops->memory == MLA_MEMORY_HOST) {
        *dev = host;
        return MLA_OK;
    }
    mla_status st = ctx->ops->mem_alloc(ctx, bytes, dev);
    if (st != MLA_OK)
        return mla_fail(ctx, st, "plan", "cannot allocate %zu bytes of plan data", bytes);
    return MLA_OK;
}

/* Validates the values, schedules, and copies the arrays to context memory. */
static mla_status plan_fill(mla_context *ctx, mla_attention_plan *p, const mla_attention_args *a,
                            const attn_shape *sh)
{
    const int64_t S = p->S;
    int64_t *len = malloc((size_t)(S + 1) * sizeof *len), max_q = 0;
    if (!len)
        return mla_fail(ctx, MLA_ERR_OUT_OF_MEMORY, "plan", "no memory for %lld lengths",
                        (long long)S);
    mla_status st = read_and_check(ctx, &p->desc, a, sh, len, &max_q);
    if (st == MLA_OK) {
        attn_ix v;
        memset(&v, 0, sizeof v);
        st = ix_open(ctx, a->cu_q_lens, "cu_q_lens", &v.cu_q);
        for (int64_t s = 0; st == MLA_OK && s <= S; ++s)
            p->cu_q_host[s] = (int32_t)cu_at(&v, &p->desc, s);
        close_all(&v);
    }
    if (st == MLA_OK) {
        p->max_q_len = max_q;
        mla_attention_schedule(p, len, ctx->compute_units);
    }
    free(len);
    if (st != MLA_OK || ctx->ops->memory == MLA_MEMORY_HOST)
        return st;
    const mla_copy_kind k = MLA_COPY_HOST_TO_CONTEXT;
    st = ctx->ops->mem_copy(ctx, p->work_dev, p->work_host,
                            (size_t)p->work_capacity * sizeof *p->work_host, k);
    if (st == MLA_OK)
        st = ctx->ops->mem_copy(ctx, p->cu_q_dev, p->cu_q_host, (size_t)(S + 1) * 4, k);
    if (st == MLA_OK)
        st = ctx->ops->mem_copy(ctx, p->splits_dev, p->splits_host, (size_t)(S ? S : 1) * 4, k);
    return st == MLA_OK ? MLA_OK : mla_fail(ctx, st, "plan", "cannot copy the plan to the device");
}

mla_status mla_attention_plan_create(mla_context *ctx, const mla_attention_desc *desc,
                                     const mla_attention_args *args, mla_attention_plan **out)
{
    MLA_TRY(mla_begin(ctx));
    if (!desc || !out)
        return mla_fail(ctx, MLA_ERR_NULL_POINTER, desc ? "out" : "desc", "NULL argument");
    *out = NULL;
    attn_shape sh;
    MLA_TRY(check_args(ctx, desc, args, &sh, 0));
    mla_variant v = attention_variant(desc, sh.T);
    MLA_TRY(mla_check_supported(ctx, &v));
    mla_attention_plan *p = calloc(1, sizeof *p);
    if (!p)
        return mla_fail(ctx, MLA_ERR_OUT_OF_MEMORY, "plan", "no memory for the plan");
    p->ctx = ctx;
    p->desc = *desc;
    p->block_bytes = sh.block_bytes;
    p->S = sh.S;
    p->T = sh.T;
    p->max_blocks = sh.max_blocks;
    p->Tk = args->rope ? sh.Tk : 0;
    p->has_rope = args->rope != NULL;
    p->has_cu_q = args->cu_q_lens != NULL;
    /* capacity: every split count stays within max_splits (fixed here) */
    const int64_t cap = desc->num_splits >= 1 ? desc->num_splits : MLA_ATTN_AUTO_SPLITS;
    p->work_capacity = sh.S * cap > 0 ? sh.S * cap : 1;
    p->work_host = calloc((size_t)p->work_capacity, sizeof *p->work_host);
    p->cu_q_host = calloc((size_t)sh.S + 1, sizeof *p->cu_q_host);
    p->splits_host = calloc((size_t)sh.S + 1, sizeof *p->splits_host);
    mla_status st = MLA_OK;
    if (!p->work_host || !p->cu_q_host || !p->splits_host)
        st = mla_fail(ctx, MLA_ERR_OUT_OF_MEMORY, "plan", "no memory for the work list");
    if (st == MLA_OK)
        st = twin(ctx, p->work_host, (size_t)p->work_capacity * sizeof *p->work_host,
                  (void **)&p->work_dev);
    if (st == MLA_OK)
        st = twin(ctx, p->cu_q_host, ((size_t)sh.S + 1) * 4, (void **)&p->cu_q_dev);
    if (st == MLA_OK)
        st = twin(ctx, p->splits_host, ((size_t)sh.S + 1) * 4, (void **)&p->splits_dev);
    if (st == MLA_OK)
        st = plan_fill(ctx, p, args, &sh);
    if (st == MLA_OK && mla_attention_layout_workspace(p) != MLA_OK)
        st = mla_fail(ctx, MLA_ERR_OVERFLOW, "q", "the workspace size overflows 64 bits");
    if (st != MLA_OK) {
        mla_attention_plan_destroy(p);
        return st;
    }
    *out = p;
    return MLA_OK;
}

/* The shapes of a call against those the plan was made for. */
static mla_status same_shapes(mla_context *ctx, const mla_attention_plan *p,
                              const mla_attention_args *a, const attn_shape *sh)
{
    if (sh->T != p->T)
        return mla_fail_field(ctx, MLA_ERR_SHAPE, "q", "shape[0]", "%lld rows, the plan has %lld",
                              (long long)sh->T, (long long)p->T);
    if (sh->S != p->S)
        return mla_fail_field(ctx, MLA_ERR_SHAPE, "context_lens", "shape[0]",
                              "%lld sequences, the plan has %lld", (long long)sh->S,
                              (long long)p->S);
    if (sh->max_blocks != p->max_blocks)
        return mla_fail_field(ctx, MLA_ERR_SHAPE, "block_table", "shape[1]",
                              "%lld blocks per sequence, the plan has %lld",
                              (long long)sh->max_blocks, (long long)p->max_blocks);
    if ((a->cu_q_lens != NULL) != p->has_cu_q)
        return mla_fail(ctx, MLA_ERR_INVALID_ARGUMENT, "cu_q_lens",
                        "the plan was made %s cu_q_lens", p->has_cu_q ? "with" : "without");
    if ((a->rope != NULL) != p->has_rope)
        return mla_fail(ctx, MLA_ERR_INVALID_ARGUMENT, "rope", "the plan was made %s rope",
                        p->has_rope ? "with" : "without");
    if (a->rope && sh->Tk != p->Tk)
        return mla_fail_field(ctx, MLA_ERR_SHAPE, "k_nope", "shape[0]",
                              "%lld key tokens, the plan has %lld", (long long)sh->Tk,
                              (long long)p->Tk);
    return MLA_OK;
}

static mla_status check_plan(mla_context *ctx, const mla_attention_plan *plan)
{
    if (!plan)
        return mla_fail(ctx, MLA_ERR_NULL_POINTER, "plan", "plan is NULL");
    if (plan->ctx != ctx)
        return mla_fail(ctx, MLA_ERR_INVALID_ARGUMENT, "plan",
                        "the plan belongs to another context");
    return MLA_OK;
}

mla_status mla_attention_plan_update(mla_context *ctx, mla_attention_plan *plan,
                                     const mla_attention_args *args)
{
    MLA_TRY(mla_begin(ctx));
    MLA_TRY(check_plan(ctx, plan));
    attn_shape sh;
    MLA_TRY(check_args(ctx, &plan->desc, args, &sh, 0));
    MLA_TRY(same_shapes(ctx, plan, args, &sh));
    /* validated into a copy: a refused update leaves the plan as it was */
    mla_attention_plan next = *plan;
    const size_t wb = (size_t)plan->work_capacity * sizeof *plan->work_host;
    const size_t sb = ((size_t)plan->S + 1) * 4;
    next.work_host = malloc(wb);
    next.cu_q_host = malloc(sb);
    next.splits_host = malloc(sb);
    mla_status st = MLA_OK;
    if (!next.work_host || !next.cu_q_host || !next.splits_host)
        st = mla_fail(ctx, MLA_ERR_OUT_OF_MEMORY, "plan", "no memory for the work list");
    if (st == MLA_OK) {
        memset(next.work_host, 0, wb);
        if (ctx->ops->memory == MLA_MEMORY_HOST) /* host: the plan's arrays are the twins */
            next.work_dev = next.work_host, next.cu_q_dev = next.cu_q_host,
            next.splits_dev = next.splits_host;
        st = plan_fill(ctx, &next, args, &sh);
    }
    if (st != MLA_OK) {
        free(next.work_host);
        free(next.cu_q_host);
        free(next.splits_host);
        return st;
    }
    if (ctx->ops->memory == MLA_MEMORY_HOST) {
        /* the same buffers (a captured run keeps its pointers) */
        memcpy(plan->work_host, next.work_host, wb);
        memcpy(plan->cu_q_host, next.cu_q_host, sb);
        memcpy(plan->splits_host, next.splits_host, sb);
    } else {
        free(plan->work_host);
        free(plan->cu_q_host);
        free(plan->splits_host);
        plan->work_host = next.work_host;
        plan->cu_q_host = next.cu_q_host;
        plan->splits_host = next.splits_host;
        next.work_host = NULL;
    }
    plan->num_work = next.num_work;
    plan->max_q_len = next.max_q_len;
    if (ctx->ops->memory == MLA_MEMORY_HOST) {
        free(next.work_host);
        free(next.cu_q_host);
        free(next.splits_host);
    }
    return MLA_OK;
}

int64_t mla_attention_plan_workspace_bytes(const mla_attention_plan *plan)
{
    return plan ? plan->workspace_bytes : 0;
}

int32_t mla_attention_plan_splits(const mla_attention_plan *plan)
{
    if (!plan)
        return 0;
    int32_t m = 1;
    for (int64_t s = 0; s < plan->S; ++s)
        m = plan->splits_host[s] > m ? plan->splits_host[s] : m;
    return m;
}

/* ----------------------------------------------------------------- run */

/* RoPE inside attention (spec section 3, the ATTENTION site): q copied into
 * the workspace with its rope part rotated (one rounding to q's dtype, as
 * mla_rope into q_cat), k_pe rotated into fp32 and [k_nope | k_rot] written
 * to the cache, exactly the SEPARATE site's sequence (core/prepare.c), whose
 * bytes equal the fused kernel's. */
static mla_status rope_inside(mla_context *ctx, const mla_attention_plan *p,
                              const mla_attention_args *a, uint8_t *ws, mla_tensor *q_rot)
{
    const mla_attention_rope *r = a->rope;
    const mla_attention_desc *d = &p->desc;
    const int64_t T = p->T, H = d->heads, L = d->cache.kv_lora, R = d->cache.rope, D = L + R;
    const mla_memory mem = ctx->ops->memory;
    const size_t es = mla_dtype_size(a->q->dtype);
    const int64_t *qs = a->q->stride;
    *q_rot = mla_view(ws + p->q_rot_offset, a->q->dtype, mem, 3, (int64_t[]){T, H, D},
                      (int64_t[]){H * D, D, 1});
    if (T > 0) {
        mla_convert_args cp = {
            mla_view(a->q->data, a->q->dtype, mem, 3, (int64_t[]){T, H, L}, qs),
            mla_view(q_rot->data, a->q->dtype, mem, 3, (int64_t[]){T, H, L}, q_rot->stride),
            MLA_SATURATE};
        MLA_TRY(ctx->ops->convert(ctx, &cp));
        mla_rope_args qr = {*r->cos,
                            *r->sin,
                            *r->q_pos,
                            mla_view((uint8_t *)a->q->data + (size_t)(L * qs[2]) * es, a->q->dtype,
                                     mem, 3, (int64_t[]){T, H, R}, qs),
                            mla_view((uint8_t *)q_rot->data + (size_t)L * es, a->q->dtype, mem, 3,
                                     (int64_t[]){T, H, R}, q_rot->stride),
                            r->style,
                            R};
        MLA_TRY(ctx->ops->rope(ctx, &qr));
    }
    if (p->Tk == 0)
        return MLA_OK;
    mla_tensor k_rot = mla_view(ws + p->k_rot_offset, MLA_DTYPE_F32, mem, 2, (int64_t[]){p->Tk, R},
                                (int64_t[]){R, 1});
    mla_rope_args kr = {*r->cos,           *r->sin,  *r->k_pos, mla_as_3d(r->k_pe),
                        mla_as_3d(&k_rot), r->style, R};
    MLA_TRY(ctx->ops->rope(ctx, &kr));
    mla_cache_write_args cw = {d->cache, p->block_bytes, *a->cache, *r->k_nope, k_rot, *r->slots};
    return ctx->ops->cache_write(ctx, &cw);
}

mla_status mla_attention_run(mla_context *ctx, const mla_attention_plan *plan,
                             const mla_attention_args *args)
{
    MLA_TRY(mla_begin(ctx));
    MLA_TRY(check_plan(ctx, plan));
    attn_shape sh;
    MLA_TRY(check_args(ctx, &plan->desc, args, &sh, 1));
    MLA_TRY(same_shapes(ctx, plan, args, &sh));
    if (plan->workspace_bytes > 0) {
        if (!args->workspace)
            return mla_fail(ctx, MLA_ERR_NULL_POINTER, "workspace",
                            "the plan needs %lld bytes of workspace",
                            (long long)plan->workspace_bytes);
        if (args->workspace->shape[0] < plan->workspace_bytes)
            return mla_fail_field(
                ctx, MLA_ERR_SHAPE, "workspace", "shape[0]", "%lld bytes, the plan needs %lld",
                (long long)args->workspace->shape[0], (long long)plan->workspace_bytes);
        if ((uintptr_t)args->workspace->data % MLA_ATTN_WS_ALIGN)
            return mla_fail_field(ctx, MLA_ERR_INVALID_ARGUMENT, "workspace", "data",
                                  "the workspace must be %d-byte aligned (mla_malloc is)",
                                  MLA_ATTN_WS_ALIGN);
    }
    /* Host memory: the values are re-checked in place (no copy, no
     * allocation), so a kernel never follows an index changed since the plan
     * outside the tensors. Device memory: the plan's validation stands. */
    if (ctx->ops->memory == MLA_MEMORY_HOST) {
        int64_t max_q;
        MLA_TRY(read_and_check(ctx, &plan->desc, args, &sh, NULL, &max_q));
    }
    MLA_TRY(check_supported(ctx, &plan->desc, args, &sh));
    uint8_t *ws = args->workspace ? (uint8_t *)args->workspace->data : NULL;
    mla_attention_op_args op;
    memset(&op, 0, sizeof op);
    op.plan = plan;
    op.q = *args->q;
    if (args->rope)
        MLA_TRY(rope_inside(ctx, plan, args, ws, &op.q));
    if (plan->T == 0)
        return MLA_OK;
    const mla_memory mem = ctx->ops->memory;
    op.cache = *args->cache;
    if (args->block_table)
        op.block_table = *args->block_table;
    else
        op.block_table =
            mla_view(NULL, MLA_DTYPE_I32, mem, 2, (int64_t[]){plan->S, 1}, (int64_t[]){1, 1});
    op.context_lens = *args->context_lens;
    if (args->cu_q_lens)
        op.cu_q_lens = *args->cu_q_lens;
    else
        op.cu_q_lens = mla_view(plan->cu_q_dev, MLA_DTYPE_I32, mem, 1, (int64_t[]){plan->S + 1},
                                (int64_t[]){1});
    if (args->topk_indices)
        op.topk_indices = *args->topk_indices;
    if (args->sinks)
        op.sinks = *args->sinks;
    op.o = *args->o;
    if (args->lse)
        op.lse = *args->lse;
    op.workspace = ws;
    return ctx->ops->attention(ctx, &op);
}
