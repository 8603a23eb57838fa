/* Validation of the attention entry points (core/api_attention.c): the
 * descriptor, every tensor's dtype, shape and strides, aliasing, the index
 * values the kernels will read, and the variants asked of supports().
 * Order: descriptor, cache, shapes and dtypes, strides and aliasing, then
 * (plan; run on host memory) values, then supports(): a refused call writes
 * nothing. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/attention_check.h"
#include "core/attention_planner.h"
#include "core/cache_checks.h"
#include "core/indices.h"
#include "core/validate.h"
#include "core/variant.h"

#define MAX_HEADS 128

/* ------------------------------------------------------------ shapes */

/* What the shapes say (filled by check_args). */

static int is_fp8(mla_dtype d) { return d == MLA_DTYPE_FP8_E4M3FN || d == MLA_DTYPE_FP8_E4M3FNUZ; }

mla_status mla_attn_check_common_desc(mla_context *ctx, mla_dtype out_dtype, float softmax_scale,
                                      int32_t paged)
{
    if (out_dtype != MLA_DTYPE_F32 && out_dtype != MLA_DTYPE_BF16)
        return mla_fail(ctx, MLA_ERR_DTYPE, "desc.out_dtype", "o is f32 or bf16");
    if (!(softmax_scale > 0.0f) || !isfinite(softmax_scale))
        return mla_fail(ctx, MLA_ERR_INVALID_ARGUMENT, "desc.softmax_scale",
                        "the softmax scale must be finite and > 0");
    if (paged != 0 && paged != 1)
        return mla_fail(ctx, MLA_ERR_INVALID_ARGUMENT, "desc.paged", "paged is 0 or 1");
    return MLA_OK;
}

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
    MLA_TRY(mla_attn_check_common_desc(ctx, d->out_dtype, d->softmax_scale, d->paged));
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
                                    const mla_attention_args *a, mla_attn_shape *sh)
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
    MLA_TRY(mla_check_cache_k(ctx, &d->cache, r->k_nope, r->k_pe));
    sh->Tk = r->k_nope->shape[0];
    const mla_tensor *idx[3] = {r->q_pos, r->k_pos, r->slots};
    const char *names[3] = {"q_pos", "k_pos", "slots"};
    for (int i = 0; i < 3; ++i) {
        MLA_TRY(mla_check_tensor(ctx, idx[i], names[i], 1));
        MLA_TRY(
            mla_check_dtype(ctx, idx[i], names[i], MLA_DT(MLA_DTYPE_I32) | MLA_DT(MLA_DTYPE_I64)));
        MLA_TRY(mla_check_extent(ctx, idx[i], names[i], 0, i ? sh->Tk : sh->T));
    }
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

mla_status mla_attn_check_batch(mla_context *ctx, const mla_cache_desc *cache, int32_t paged,
                                int32_t next_n, const mla_tensor *q, const char *qname,
                                const mla_tensor *block_table, const mla_tensor *context_lens,
                                const mla_tensor *cu_q_lens, int64_t max_seqs, mla_attn_shape *sh)
{
    MLA_TRY(check_i32(ctx, context_lens, "context_lens", 1));
    sh->S = context_lens->shape[0];
    if (sh->S > max_seqs) /* S + 1 row starts, and the kernels' index widths */
        return mla_fail_field(ctx, MLA_ERR_OVERFLOW, "context_lens", "shape[0]",
                              "%lld sequences, at most %lld", (long long)sh->S,
                              (long long)max_seqs);
    if (paged) {
        MLA_TRY(check_i32(ctx, block_table, "block_table", 2));
        MLA_TRY(mla_check_extent(ctx, block_table, "block_table", 0, sh->S));
        sh->max_blocks = block_table->shape[1];
    } else {
        if (block_table)
            return mla_fail(ctx, MLA_ERR_INVALID_ARGUMENT, "block_table",
                            "block_table must be NULL in contiguous mode (desc.paged = 0)");
        if (sh->S > cache->num_blocks)
            return mla_fail_field(ctx, MLA_ERR_SHAPE, "context_lens", "shape[0]",
                                  "%lld sequences, the contiguous cache holds %lld",
                                  (long long)sh->S, (long long)cache->num_blocks);
        sh->max_blocks = 1;
    }
    if (cu_q_lens) {
        MLA_TRY(check_i32(ctx, cu_q_lens, "cu_q_lens", 1));
        return mla_check_extent(ctx, cu_q_lens, "cu_q_lens", 0, sh->S + 1);
    }
    if (next_n < 1)
        return mla_fail(ctx, MLA_ERR_INVALID_ARGUMENT, "desc.next_n",
                        "next_n must be >= 1 without cu_q_lens");
    const int64_t rows = mla_sz_mul(sh->S, next_n);
    if (rows < 0)
        return mla_fail_field(ctx, MLA_ERR_OVERFLOW, "context_lens", "shape[0]",
                              "%lld sequences of next_n = %d rows overflow", (long long)sh->S,
                              (int)next_n);
    return mla_check_extent(ctx, q, qname, 0, rows);
}

/* Every descriptor, dtype, shape and stride; the workspace only at run
 * (the plan says how big it must be). */
mla_status mla_attn_check_args(mla_context *ctx, const mla_attention_desc *d,
                               const mla_attention_args *a, mla_attn_shape *sh, int run)
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
    MLA_TRY(mla_attn_check_batch(ctx, &d->cache, d->paged, d->next_n, a->q, "q", a->block_table,
                                 a->context_lens, a->cu_q_lens, INT64_MAX - 1, sh));
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
                               const mla_attn_shape *sh, const attn_ix *v, int64_t *len,
                               int64_t *max_q)
{
    const int64_t S = sh->S, T = sh->T, bs = d->cache.block_size;
    const int check_topk = d->topk > 0 && mla_check_values(ctx, MLA_TRUST_TOPK);
    /* a sequence's capacity; past int64 it bounds nothing (lengths are I32) */
    const int64_t cap = mla_sz_sat(d->paged ? mla_sz_mul(sh->max_blocks, bs) : bs);
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
            for (int64_t b = 0; b < mla_sz_ceil_div(c, bs); ++b) {
                const int64_t id = ix_at(&v->table, s, b);
                if (id < 0 || id >= d->cache.num_blocks)
                    return mla_fail(ctx, MLA_ERR_OUT_OF_RANGE, "block_table",
                                    "block_table[%lld, %lld] = %lld is outside [0, %lld)",
                                    (long long)s, (long long)b, (long long)id,
                                    (long long)d->cache.num_blocks);
            }
        for (int64_t r = cu_at(v, d, s); check_topk && r < cu_at(v, d, s + 1); ++r)
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
    return MLA_OK;
}

/* RoPE positions (< the table's rows) and slots (< the cache's capacity, no
 * slot twice). Reads the values (a copy for device memory). */
static mla_status check_rope_values(mla_context *ctx, const mla_attention_desc *d,
                                    const mla_attention_rope *r, const mla_attn_shape *sh)
{
    MLA_TRY(mla_check_positions(ctx, r->q_pos, "q_pos", sh->T, r->cos->shape[0]));
    MLA_TRY(mla_check_positions(ctx, r->k_pos, "k_pos", sh->Tk, r->cos->shape[0]));
    return mla_check_cache_slots(ctx, &d->cache, r->slots, sh->Tk);
}

/* Opens the index tensors (staging device memory only) and checks their
 * values; len, max_q and cu (S + 1 row starts) are filled when not NULL. */
static mla_status read_and_check(mla_context *ctx, const mla_attention_desc *d,
                                 const mla_attention_args *a, const mla_attn_shape *sh,
                                 int64_t *len, int64_t *max_q, int32_t *cu)
{
    attn_ix v;
    memset(&v, 0, sizeof v);
    mla_status st = ix_open(ctx, a->context_lens, "context_lens", &v.ctx_lens);
    if (st == MLA_OK)
        st = ix_open(ctx, a->cu_q_lens, "cu_q_lens", &v.cu_q);
    if (st == MLA_OK && d->paged)
        st = ix_open(ctx, a->block_table, "block_table", &v.table);
    if (st == MLA_OK && d->topk > 0 && mla_check_values(ctx, MLA_TRUST_TOPK))
        st = ix_open(ctx, a->topk_indices, "topk_indices", &v.topk);
    if (st == MLA_OK)
        st = check_values(ctx, d, sh, &v, len, max_q);
    for (int64_t s = 0; st == MLA_OK && cu && s <= sh->S; ++s)
        cu[s] = (int32_t)cu_at(&v, d, s);
    close_all(&v);
    return st;
}

mla_status mla_attn_check_values(mla_context *ctx, const mla_attention_desc *d,
                                 const mla_attention_args *a, const mla_attn_shape *sh,
                                 int64_t *len, int64_t *max_q, int32_t *cu)
{
    MLA_TRY(read_and_check(ctx, d, a, sh, len, max_q, cu));
    return a->rope ? check_rope_values(ctx, d, a->rope, sh) : MLA_OK;
}

/* Every value v of a 1-D I32 / I64 tensor of host memory satisfies lo <= v
 * < hi (negative values skipped when skip_negative), read in place. */
static mla_status range_in_place(mla_context *ctx, const mla_tensor *t, int64_t lo, int64_t hi,
                                 int skip_negative, const char *name)
{
    for (int64_t i = 0; i < t->shape[0]; ++i) {
        const int64_t off = i * t->stride[0];
        const int64_t v = t->dtype == MLA_DTYPE_I32 ? ((const int32_t *)t->data)[off]
                                                    : ((const int64_t *)t->data)[off];
        if ((v < 0 && skip_negative) || (v >= lo && v < hi))
            continue;
        return mla_fail(ctx, MLA_ERR_OUT_OF_RANGE, name, "%s[%lld] = %lld is outside [%lld, %lld)",
                        name, (long long)i, (long long)v, (long long)lo, (long long)hi);
    }
    return MLA_OK;
}

mla_status mla_attn_recheck_host(mla_context *ctx, const mla_attention_desc *d,
                                 const mla_attention_args *a, const mla_attn_shape *sh)
{
    int64_t max_q;
    MLA_TRY(read_and_check(ctx, d, a, sh, NULL, &max_q, NULL));
    if (!a->rope)
        return MLA_OK;
    const int64_t P = a->rope->cos->shape[0];
    MLA_TRY(range_in_place(ctx, a->rope->q_pos, 0, P, 0, "q_pos"));
    MLA_TRY(range_in_place(ctx, a->rope->k_pos, 0, P, 0, "k_pos"));
    return range_in_place(ctx, a->rope->slots, 0, d->cache.num_blocks * d->cache.block_size, 1,
                          "slots");
}

/* ------------------------------------------------------------ variants */

/* The attention variant: in = q dtype, out = o dtype, layout = cache layout,
 * rule = cache element dtype, group = block_size, rows = T, cols = heads. */
mla_variant mla_attn_variant(const mla_attention_desc *d, const mla_attention_args *a, int64_t T)
{
    mla_variant v =
        mla_variant_of(MLA_OP_ATTENTION, d->q_dtype, d->out_dtype, (int32_t)d->cache.layout,
                       (int32_t)d->cache.dtype, d->cache.block_size, T, d->heads);
    const mla_attention_rope *r = a->rope;
    mla_variant_tensors(
        &v, 16,
        (const mla_tensor *[]){a->q, a->cache, a->block_table, a->context_lens, a->cu_q_lens,
                               a->topk_indices, a->sinks, r ? r->cos : NULL, r ? r->sin : NULL,
                               r ? r->q_pos : NULL, r ? r->k_nope : NULL, r ? r->k_pe : NULL,
                               r ? r->k_pos : NULL, r ? r->slots : NULL, a->o, a->lse});
    v.splits = d->num_splits;
    v.next_n = d->next_n;
    return v;
}

/* supports() for the attention and, with rope inside attention, for the ops
 * the run composes (the copy of q, the two rotations, the cache write). */
mla_status mla_attn_check_supported(mla_context *ctx, const mla_attention_desc *d,
                                    const mla_attention_args *a, const mla_attn_shape *sh)
{
    mla_variant v = mla_attn_variant(d, a, sh->T);
    MLA_TRY(mla_check_supported(ctx, &v));
    MLA_SLOT(ctx, attention);
    if (!a->rope)
        return MLA_OK;
    const mla_attention_rope *r = a->rope;
    const int64_t L = d->cache.kv_lora, R = d->cache.rope;
    const mla_dtype q = a->q->dtype;
    const mla_variant vs[4] = {
        mla_variant_of(MLA_OP_CONVERT, q, q, 0, (int32_t)MLA_SATURATE, 0, sh->T * d->heads * L, L),
        mla_variant_of(MLA_OP_ROPE, q, q, 0, (int32_t)r->style, 0, sh->T, R),
        mla_variant_of(MLA_OP_ROPE, r->k_pe->dtype, MLA_DTYPE_F32, 0, (int32_t)r->style, 0, sh->Tk,
                       R),
        mla_variant_of(MLA_OP_CACHE_WRITE, d->cache.dtype, d->cache.dtype, (int32_t)d->cache.layout,
                       0, d->cache.block_size, sh->Tk, L + R)};
    for (int i = 0; i < 4; ++i)
        MLA_TRY(mla_check_supported(ctx, &vs[i]));
    MLA_SLOT(ctx, convert);
    MLA_SLOT(ctx, rope);
    MLA_SLOT(ctx, cache_write);
    return MLA_OK;
}
