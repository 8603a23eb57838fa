#include "core/validate.h"

#include "core/checked.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

mla_status mla_fail_field(mla_context *ctx, mla_status status, const char *name, const char *field,
                          const char *fmt, ...)
{
    char param[64], detail[256];
    snprintf(param, sizeof param, "%s%s%s", name, field[0] ? "." : "", field);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(detail, sizeof detail, fmt, ap);
    va_end(ap);
    return mla_fail(ctx, status, param, "%s: %s", param, detail);
}

int64_t mla_tensor_span_bytes(const mla_tensor *t)
{
    int64_t bytes;
    return mla_ck_span(t, &bytes) ? bytes : -1;
}

mla_status mla_check_tensor(mla_context *ctx, const mla_tensor *t, const char *name, int32_t ndim)
{
    if (!t)
        return mla_fail(ctx, MLA_ERR_NULL_POINTER, name, "%s: tensor descriptor is NULL", name);
    if ((int)t->dtype < 0 || t->dtype >= MLA_DTYPE_COUNT)
        return mla_fail_field(ctx, MLA_ERR_DTYPE, name, "dtype", "unknown dtype %d", (int)t->dtype);
    if ((int)t->memory < 0 || t->memory >= MLA_MEMORY_COUNT)
        return mla_fail_field(ctx, MLA_ERR_INVALID_ARGUMENT, name, "memory", "unknown memory %d",
                              (int)t->memory);
    if (t->ndim < 0 || t->ndim > MLA_MAX_DIMS)
        return mla_fail_field(ctx, MLA_ERR_SHAPE, name, "ndim", "rank %d outside [0, %d]",
                              (int)t->ndim, MLA_MAX_DIMS);
    if (ndim >= 0 && t->ndim != ndim)
        return mla_fail_field(ctx, MLA_ERR_SHAPE, name, "ndim", "rank %d, expected %d",
                              (int)t->ndim, (int)ndim);
    int64_t numel = 1;
    for (int32_t i = 0; i < t->ndim; ++i) {
        if (t->shape[i] < 0)
            return mla_fail_field(ctx, MLA_ERR_SHAPE, name, "shape", "extent %d is negative",
                                  (int)i);
        if (t->stride[i] < 0)
            return mla_fail_field(ctx, MLA_ERR_STRIDE, name, "stride", "stride %d is negative",
                                  (int)i);
        if (!mla_ck_mul(numel, t->shape[i], &numel))
            return mla_fail_field(ctx, MLA_ERR_OVERFLOW, name, "shape",
                                  "element count overflows 64 bits");
    }
    int64_t span = mla_tensor_span_bytes(t);
    if (span < 0 || (uint64_t)span > (uint64_t)PTRDIFF_MAX ||
        (t->data && (uintptr_t)t->data > UINTPTR_MAX - (uint64_t)span))
        return mla_fail_field(ctx, MLA_ERR_OVERFLOW, name, "stride",
                              "byte span overflows the address space");
    if (numel > 0 && !t->data)
        return mla_fail_field(ctx, MLA_ERR_NULL_POINTER, name, "data", "data is NULL");
    if (t->memory != ctx->ops->memory)
        return mla_fail_field(ctx, MLA_ERR_WRONG_DEVICE, name, "memory",
                              "tensor is in %s memory, the %s backend needs %s memory",
                              mla_memory_name(t->memory), ctx->ops->name,
                              mla_memory_name(ctx->ops->memory));
    return MLA_OK;
}

mla_status mla_check_dtype(mla_context *ctx, const mla_tensor *t, const char *name, unsigned mask)
{
    if (mask & MLA_DT(t->dtype))
        return MLA_OK;
    return mla_fail_field(ctx, MLA_ERR_DTYPE, name, "dtype", "dtype %s is not accepted here",
                          mla_dtype_name(t->dtype));
}

mla_status mla_check_extent(mla_context *ctx, const mla_tensor *t, const char *name, int32_t dim,
                            int64_t expected)
{
    if (t->shape[dim] == expected)
        return MLA_OK;
    char field[16];
    snprintf(field, sizeof field, "shape[%d]", (int)dim);
    return mla_fail_field(ctx, MLA_ERR_SHAPE, name, field, "is %lld, expected %lld",
                          (long long)t->shape[dim], (long long)expected);
}

typedef struct dim_pair {
    int64_t shape, stride;
} dim_pair;

static int by_stride(const void *a, const void *b)
{
    const dim_pair *x = a, *y = b;
    return (x->stride > y->stride) - (x->stride < y->stride);
}

mla_status mla_check_workspace(mla_context *ctx, const mla_tensor *t, const char *name,
                               int64_t bytes)
{
    MLA_TRY(mla_check_tensor(ctx, t, name, 1));
    if (t->shape[0] < bytes || mla_dtype_size(t->dtype) != 1)
        return mla_fail(ctx, MLA_ERR_SHAPE, name, "%s needs %lld bytes", name, (long long)bytes);
    if (t->shape[0] > 1 && t->stride[0] != 1)
        return mla_fail_field(ctx, MLA_ERR_STRIDE, name, "stride", "the bytes must be contiguous");
    return MLA_OK;
}

mla_status mla_check_plan_of(mla_context *ctx, int has, const mla_context *owner)
{
    if (!has)
        return mla_fail(ctx, MLA_ERR_NULL_POINTER, "plan", "plan is NULL");
    if (owner != ctx)
        return mla_fail(ctx, MLA_ERR_INVALID_ARGUMENT, "plan",
                        "the plan belongs to another context");
    return MLA_OK;
}

mla_status mla_check_output(mla_context *ctx, const mla_tensor *t, const char *name)
{
    /* Sorted by stride, each stride must step past everything the smaller
     * dims reach: stride_k > sum_{j<k} stride_j * (shape_j - 1). This admits
     * every permuted or padded layout and refuses broadcasts and overlaps. */
    dim_pair dims[MLA_MAX_DIMS];
    int n = 0;
    for (int32_t i = 0; i < t->ndim; ++i) {
        if (t->shape[i] == 0)
            return MLA_OK; /* empty: nothing is written */
        if (t->shape[i] > 1)
            dims[n++] = (dim_pair){t->shape[i], t->stride[i]};
    }
    qsort(dims, (size_t)n, sizeof dims[0], by_stride);
    int64_t reach = 0; /* largest offset reachable by the dims so far */
    for (int k = 0; k < n; ++k) {
        if (dims[k].stride <= reach)
            return mla_fail_field(ctx, MLA_ERR_STRIDE, name, "stride",
                                  "strides make distinct elements overlap");
        reach += dims[k].stride * (dims[k].shape - 1); /* bounded by the checked span */
    }
    return MLA_OK;
}

mla_status mla_check_disjoint(mla_context *ctx, const mla_tensor *a, const char *aname,
                              const mla_tensor *b, const char *bname)
{
    int64_t sa = mla_tensor_span_bytes(a), sb = mla_tensor_span_bytes(b);
    if (sa <= 0 || sb <= 0)
        return MLA_OK;
    uintptr_t a0 = (uintptr_t)a->data, b0 = (uintptr_t)b->data;
    if (a0 < b0 + (uint64_t)sb && b0 < a0 + (uint64_t)sa)
        return mla_fail(ctx, MLA_ERR_ALIAS, aname, "%s overlaps %s in memory", aname, bname);
    return MLA_OK;
}

mla_status mla_check_supported(mla_context *ctx, const mla_variant *v)
{
    const char *why = ctx->ops->supports(ctx, v);
    if (!why)
        return MLA_OK;
    return mla_fail(ctx, MLA_ERR_UNSUPPORTED, why, "the %s backend cannot run %s with this %s",
                    ctx->ops->name, mla_op_name(v->op), why);
}

static int same_elements(const mla_tensor *a, const mla_tensor *b)
{
    if (a->data != b->data || mla_dtype_size(a->dtype) != mla_dtype_size(b->dtype) ||
        a->dtype == MLA_DTYPE_FP4X2 || b->dtype == MLA_DTYPE_FP4X2 || a->ndim != b->ndim)
        return 0;
    for (int32_t i = 0; i < a->ndim; ++i)
        if (a->shape[i] != b->shape[i] || (a->shape[i] > 1 && a->stride[i] != b->stride[i]))
            return 0;
    return 1;
}

mla_status mla_check_inplace_or_disjoint(mla_context *ctx, const mla_tensor *out,
                                         const char *oname, const mla_tensor *in,
                                         const char *iname)
{
    return same_elements(out, in) ? MLA_OK : mla_check_disjoint(ctx, out, oname, in, iname);
}

mla_status mla_check_apart(mla_context *ctx, const mla_tensor *const *outs,
                           const char *const *onames, int nout, const mla_tensor *const *ins,
                           const char *const *inames, int nin)
{
    for (int o = 0; o < nout; ++o) {
        if (!outs[o])
            continue;
        for (int i = 0; i < nin; ++i)
            if (ins[i])
                MLA_TRY(mla_check_disjoint(ctx, outs[o], onames[o], ins[i], inames[i]));
        for (int p = o + 1; p < nout; ++p)
            if (outs[p])
                MLA_TRY(mla_check_disjoint(ctx, outs[o], onames[o], outs[p], onames[p]));
    }
    return MLA_OK;
}

mla_status mla_run_composite(mla_context *ctx, mla_steps_fn steps, void *args, uint32_t dry_trust)
{
    const int32_t dry = ctx->dry_run;
    const uint32_t trusted = ctx->trusted;
    mla_status st;
    if (dry || (trusted & MLA_TRUST_VALIDATED)) { /* within an outer composite's pass */
        ctx->trusted = trusted | (dry ? dry_trust : 0);
        st = steps(ctx, args);
    } else {
        ctx->dry_run = 1;
        ctx->trusted = trusted | dry_trust;
        st = steps(ctx, args);
        ctx->dry_run = 0;
        ctx->trusted = trusted | MLA_TRUST_VALIDATED;
        if (st == MLA_OK)
            st = steps(ctx, args);
    }
    ctx->trusted = trusted;
    return st;
}

mla_status mla_begin(mla_context *ctx)
{
    if (!ctx)
        return MLA_ERR_NULL_POINTER;
    mla_clear_error(ctx);
    return MLA_OK;
}

mla_tensor mla_view(void *data, mla_dtype dtype, mla_memory mem, int32_t ndim,
                    const int64_t *shape, const int64_t *stride)
{
    mla_tensor t;
    memset(&t, 0, sizeof t);
    t.data = data;
    t.dtype = dtype;
    t.memory = mem;
    t.ndim = ndim;
    for (int32_t i = 0; i < ndim; ++i) {
        t.shape[i] = shape[i];
        t.stride[i] = stride[i];
    }
    return t;
}

mla_tensor mla_as_3d(const mla_tensor *t)
{
    mla_tensor r = *t;
    if (t->ndim == 2) {
        r.ndim = 3;
        r.shape[2] = t->shape[1];
        r.stride[2] = t->stride[1];
        r.shape[1] = 1; /* its stride is never stepped; any value past int64 will do */
        r.stride[1] = mla_sz_sat(mla_sz_mul(t->shape[1], t->stride[1]));
    }
    return r;
}
