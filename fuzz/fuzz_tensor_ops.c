/* libFuzzer: random tensor descriptors through every public op family on the
 * reference and CPU backends (docs/ROBUSTNESS.md).
 *
 * The input chooses a backend, an op, a pool of tensors (dtype, ndim, shape,
 * strides, memory kind; enum values past their _COUNT included; extents
 * shared between tensors so that shapes often agree; huge extents such as
 * 2^61 + 1 over stride 0) and the op's scalars and descriptors. Each tensor
 * views its own heap buffer of BUF bytes behind GUARD guard bytes on either
 * side; a view whose elements would leave the buffer is narrowed (strides
 * set to 0) before the call, so every call is one the API documents as
 * legal. Checked: no crash, no ASan/UBSan report, no guard byte changed,
 * and when the status is not MLA_OK no byte of any buffer changed. Logical
 * sizes between 2^20 elements and an int64 byte overflow are cut down: they
 * are legal but only slow. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz/fuzz_input.h"
#include "mla/mla.h"

enum { NT = 12, GUARD = 64, BUF = 16384, NDIMS = 4 };

typedef struct pool {
    mla_tensor t[NT];
    uint8_t *mem[NT];  /* GUARD + BUF + GUARD bytes */
    uint8_t *snap[NT]; /* their bytes before the call */
} pool;

static size_t elem_bytes(mla_dtype dt)
{
    switch (dt) {
    case MLA_DTYPE_F32:
    case MLA_DTYPE_I32:
        return 4;
    case MLA_DTYPE_F16:
    case MLA_DTYPE_BF16:
        return 2;
    case MLA_DTYPE_I64:
    case MLA_DTYPE_F64:
        return 8;
    default:
        return 1;
    }
}

/* Bytes from the first to one past the last element addressed, or -1 when
 * that overflows; 0 for an empty view. */
static int64_t span_bytes(const mla_tensor *t)
{
    int64_t last = 0;
    for (int d = 0; d < t->ndim && d < MLA_MAX_DIMS; ++d) {
        if (t->shape[d] == 0)
            return 0;
        int64_t step;
        if (t->shape[d] < 0 || t->stride[d] < 0 ||
            __builtin_mul_overflow(t->shape[d] - 1, t->stride[d], &step) ||
            __builtin_add_overflow(last, step, &last))
            return -1;
    }
    int64_t bytes;
    if (__builtin_add_overflow(last, 1, &last) ||
        __builtin_mul_overflow(last, (int64_t)elem_bytes(t->dtype), &bytes))
        return -1;
    return bytes;
}

/* Elements times element bytes, or -1 when that overflows int64. */
static int64_t logical_bytes(const mla_tensor *t)
{
    int64_t n = (int64_t)elem_bytes(t->dtype);
    for (int d = 0; d < t->ndim && d < MLA_MAX_DIMS; ++d)
        if (t->shape[d] < 0 || __builtin_mul_overflow(n, t->shape[d], &n))
            return -1;
    return n;
}

static void make_tensor(fz_input *in, const int64_t *dims, mla_tensor *t, uint8_t *mem)
{
    memset(t, 0, sizeof *t);
    t->data = mem + GUARD;
    t->dtype = (mla_dtype)fz_below(in, MLA_DTYPE_COUNT + 1);
    t->memory = fz_below(in, 32) ? MLA_MEMORY_HOST : (mla_memory)fz_below(in, MLA_MEMORY_COUNT + 1);
    const uint32_t nd = fz_below(in, 16);
    t->ndim = nd < 14 ? (int32_t)(nd % (NDIMS + 1)) : nd == 14 ? MLA_MAX_DIMS + 1 : -1;
    const int dims_used = t->ndim > 0 && t->ndim <= MLA_MAX_DIMS ? t->ndim : 0;
    for (int d = 0; d < dims_used; ++d) {
        const uint32_t pick = fz_below(in, 8);
        t->shape[d] = pick < 6 ? dims[pick % 4] : fz_extent(in);
    }
    int64_t contiguous = 1;
    for (int d = dims_used - 1; d >= 0; --d) {
        const uint32_t kind = fz_below(in, 8);
        t->stride[d] = kind < 5   ? contiguous
                       : kind < 6 ? 0
                       : kind < 7 ? (int64_t)fz_below(in, 70)
                                  : fz_extent(in);
        if (t->shape[d] > 0 && !__builtin_mul_overflow(contiguous, t->shape[d], &contiguous))
            continue;
        contiguous = 1;
    }
    /* legal but slow: a large logical size whose bytes fit */
    const int64_t lb = logical_bytes(t);
    if (lb > (1ll << 22))
        for (int d = 0; d < dims_used; ++d)
            if (t->shape[d] > 64)
                t->shape[d] %= 9;
    /* elements beyond the buffer: a view of memory that does not exist */
    for (int d = 0; d < dims_used; ++d) {
        const int64_t sb = span_bytes(t);
        if (sb >= 0 && sb <= BUF)
            break;
        if (t->shape[d] > 1)
            t->stride[d] = 0;
    }
    const int64_t sb = span_bytes(t);
    if (sb < 0 || sb > BUF)
        for (int d = 0; d < dims_used; ++d)
            t->stride[d] = 0;
}

static void fill(fz_input *in, uint8_t *mem)
{
    memset(mem, 0xA5, GUARD);
    memset(mem + GUARD + BUF, 0x5A, GUARD);
    uint32_t x = (uint32_t)fz_bytes(in, 4) | 1u;
    const uint32_t mode = fz_below(in, 4);
    uint8_t *p = mem + GUARD;
    for (int64_t k = 0; k < BUF; k += 4) {
        x ^= x << 13, x ^= x >> 17, x ^= x << 5;
        /* small ints (valid indices, slots, lengths), random bits, floats near 1, zeros */
        const uint32_t v = mode == 0   ? x % 8
                           : mode == 1 ? x
                           : mode == 2 ? 0x3f800000u ^ (x & 0x807fffffu)
                                       : 0;
        memcpy(p + k, &v, 4);
    }
}

static mla_cache_desc cache_desc(fz_input *in, const int64_t *dims)
{
    mla_cache_desc d;
    d.layout = (mla_cache_layout)fz_below(in, MLA_CACHE_LAYOUT_COUNT + 1);
    d.dtype = (mla_dtype)fz_below(in, MLA_DTYPE_COUNT + 1);
    d.num_blocks = fz_below(in, 2) ? dims[fz_below(in, 4)] : fz_extent(in);
    d.block_size = fz_below(in, 2) ? (int64_t)fz_below(in, 17) : fz_extent(in);
    d.kv_lora = fz_below(in, 2) ? dims[fz_below(in, 4)] : 16 * (int64_t)fz_below(in, 9);
    d.rope = fz_below(in, 2) ? dims[fz_below(in, 4)] : 2 * (int64_t)fz_below(in, 9);
    d.k_scale = fz_float(in);
    return d;
}

static mla_indexer_cache_desc indexer_desc(fz_input *in, const int64_t *dims)
{
    mla_indexer_cache_desc d;
    d.num_blocks = fz_below(in, 2) ? dims[fz_below(in, 4)] : fz_extent(in);
    d.block_size = fz_below(in, 2) ? 16 * (int64_t)fz_below(in, 3) + (fz_below(in, 4) == 0)
                                   : fz_extent(in);
    d.head_dim = fz_below(in, 2) ? 128 : fz_extent(in);
    d.dtype = (mla_dtype)fz_below(in, MLA_DTYPE_COUNT + 1);
    d.layout = (mla_indexer_layout)fz_below(in, MLA_INDEXER_LAYOUT_COUNT + 1);
    d.ue8m0 = (int32_t)fz_below(in, 3);
    return d;
}

/* A tensor of the pool, or (rarely) NULL. */
static mla_tensor *pick(fz_input *in, pool *P)
{
    const uint32_t k = fz_below(in, NT + 1);
    return k < NT ? &P->t[k] : NULL;
}

/* An operand struct's tensor: a picked one, or an all-zero descriptor. */
static mla_tensor value_of(const mla_tensor *t)
{
    mla_tensor z;
    memset(&z, 0, sizeof z);
    return t ? *t : z;
}

static mla_status run_attention(fz_input *in, mla_context *ctx, pool *P, const int64_t *dims)
{
    mla_attention_desc d;
    memset(&d, 0, sizeof d);
    d.heads = fz_below(in, 2) ? dims[fz_below(in, 4)] : fz_extent(in);
    d.cache = cache_desc(in, dims);
    d.paged = (int32_t)fz_below(in, 3);
    d.q_dtype = (mla_dtype)fz_below(in, MLA_DTYPE_COUNT + 1);
    d.q_scale = fz_float(in);
    d.out_dtype = (mla_dtype)fz_below(in, MLA_DTYPE_COUNT + 1);
    d.softmax_scale = fz_float(in);
    d.topk = fz_below(in, 2) ? 0 : fz_extent(in);
    d.next_n = (int32_t)fz_below(in, 4);
    d.num_splits = (int32_t)fz_below(in, 6);
    mla_attention_args a = {pick(in, P), pick(in, P), pick(in, P), pick(in, P), pick(in, P), pick(in, P),
                            pick(in, P), NULL,        pick(in, P), pick(in, P), NULL};
    mla_attention_plan *plan = NULL;
    mla_status st = mla_attention_plan_create(ctx, &d, &a, &plan);
    if (st != MLA_OK)
        return st;
    const int64_t wb = mla_attention_plan_workspace_bytes(plan);
    void *ws = NULL;
    mla_tensor tws;
    if (wb >= 0 && wb <= (64ll << 20) && mla_malloc(ctx, (size_t)(wb ? wb : 1), &ws) == MLA_OK) {
        const int64_t shape[1] = {wb};
        mla_tensor_init(&tws, ws, MLA_DTYPE_U8, MLA_MEMORY_HOST, 1, shape);
        a.workspace = &tws;
        st = mla_attention_run(ctx, plan, &a);
        mla_free(ctx, ws);
    }
    mla_attention_plan_destroy(plan);
    return st;
}

enum { N_OPS = 27 };

static mla_status run_op(fz_input *in, mla_context *ctx, int op, pool *P, const int64_t *dims)
{
    mla_tensor *a = pick(in, P), *b = pick(in, P), *c = pick(in, P), *d = pick(in, P),
               *e = pick(in, P), *f = pick(in, P);
    const uint32_t e1 = fz_below(in, 8), e2 = fz_below(in, 8);
    const int64_t n = fz_below(in, 2) ? dims[fz_below(in, 4)] : fz_extent(in);
    const float s1 = fz_float(in), s2 = fz_float(in);
    switch (op) {
    case 0:
        return mla_convert(ctx, a, b, (mla_saturation)e1);
    case 1:
        return mla_mxfp4_quant(ctx, a, b, c, (mla_scale_layout)e1, (mla_mxfp4_rule)e2);
    case 2:
        return mla_mxfp4_dequant(ctx, a, b, (mla_scale_layout)e1, c);
    case 3:
        return mla_fp8_group_quant(ctx, a, b, c, n, (mla_fp8_scale_rule)e1);
    case 4:
        return mla_fp8_group_dequant(ctx, a, b, n, c);
    case 5:
        return mla_rmsnorm(ctx, a, b, s1, c);
    case 6:
        return mla_fused_qk_rmsnorm(ctx, a, b, s1, c, d, s2, e, fz_below(in, 2) ? f : NULL,
                                    pick(in, P));
    case 7:
        return mla_rope(ctx, a, b, c, d, fz_below(in, 3) ? e : d, (mla_rope_style)e1);
    case 8:
        return mla_linear(ctx, a, b, fz_below(in, 2) ? c : NULL, d);
    case 9:
        return mla_batched_gemm(ctx, a, b, s1, c);
    case 10: {
        const mla_cache_desc cd = cache_desc(in, dims);
        return mla_cache_write(ctx, &cd, a, b, c, d);
    }
    case 11: {
        const mla_cache_desc cd = cache_desc(in, dims);
        return mla_cache_gather(ctx, &cd, a, b, c, d);
    }
    case 12: {
        const mla_cache_desc cd = cache_desc(in, dims);
        const mla_rope_cache_args r = {a, b, (mla_rope_style)e1, c, d, e, f, pick(in, P),
                                       pick(in, P), pick(in, P), &cd, pick(in, P), pick(in, P),
                                       s1, fz_below(in, 2) ? pick(in, P) : NULL};
        return mla_fused_rope_concat_cache(ctx, &r);
    }
    case 13: {
        const mla_mxfp4_operand w = {value_of(b), value_of(c), (mla_scale_layout)e1};
        return mla_batched_gemm_a16wfp4(ctx, a, &w, (int32_t)fz_below(in, 3), (mla_mxfp4_rule)e2, d);
    }
    case 14: {
        const mla_mxfp4_operand x = {value_of(a), value_of(b), (mla_scale_layout)e1},
                                w = {value_of(c), value_of(d), (mla_scale_layout)e2};
        return mla_batched_gemm_a4w4(ctx, &x, &w, e);
    }
    case 15:
        return mla_fused_flatten_mxfp4_quant(ctx, a, b, c, (mla_mxfp4_rule)e1);
    case 16:
        return mla_fused_flatten_fp8_group_quant(ctx, a, b, c);
    case 17:
        return mla_layernorm(ctx, a, b, fz_below(in, 2) ? c : NULL, s1, d);
    case 18:
        return mla_hadamard(ctx, a, fz_below(in, 3) ? b : a);
    case 19: {
        const mla_indexer_cache_desc id = indexer_desc(in, dims);
        return mla_indexer_k_cache_write(ctx, &id, a, b, c);
    }
    case 20: {
        const mla_indexer_cache_desc id = indexer_desc(in, dims);
        return mla_indexer_k_gather(ctx, &id, a, b, c, d, e);
    }
    case 21: {
        const mla_indexer_cache_desc id = indexer_desc(in, dims);
        return mla_indexer_logits(ctx, &id, a, b, c, d, e, (int32_t)fz_below(in, 4), f);
    }
    case 22:
        return mla_topk(ctx, a, fz_below(in, 2) ? b : NULL, n, c);
    case 23:
        return mla_indexer_head_weights(ctx, a, b, c);
    default:
        return run_attention(in, ctx, P, dims);
    }
}

static void fail(const char *what, int op, int t, int64_t at)
{
    fprintf(stderr, "fuzz_tensor_ops: op %d: %s, tensor %d, byte %lld\n", op, what, t,
            (long long)at);
    __builtin_trap();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static mla_context *ctx[2];
    if (!ctx[0]) {
        const mla_context_options one = {1, 0, NULL};
        if (mla_context_create(MLA_BACKEND_REFERENCE, &one, &ctx[0]) != MLA_OK ||
            mla_context_create(MLA_BACKEND_CPU, &one, &ctx[1]) != MLA_OK)
            abort();
    }
    fz_input in = {data, size};
    mla_context *c = ctx[fz_below(&in, 2)];
    const int op = (int)fz_below(&in, N_OPS);
    int64_t dims[4];
    for (int k = 0; k < 4; ++k)
        dims[k] = fz_extent(&in);
    static pool P;
    for (int k = 0; k < NT; ++k) {
        P.mem[k] = malloc(2 * GUARD + BUF);
        P.snap[k] = malloc(2 * GUARD + BUF);
        if (!P.mem[k] || !P.snap[k])
            abort();
        make_tensor(&in, dims, &P.t[k], P.mem[k]);
        fill(&in, P.mem[k]);
        memcpy(P.snap[k], P.mem[k], 2 * GUARD + BUF);
    }
    const mla_status st = run_op(&in, c, op, &P, dims);
    for (int k = 0; k < NT; ++k) {
        for (int64_t i = 0; i < 2 * GUARD + BUF; ++i) {
            if (P.mem[k][i] == P.snap[k][i])
                continue;
            if (i < GUARD || i >= GUARD + BUF)
                fail("guard byte changed", op, k, i - GUARD);
            if (st != MLA_OK)
                fail("buffer written although the call was refused", op, k, i - GUARD);
        }
        free(P.mem[k]);
        free(P.snap[k]);
    }
    return 0;
}
