/* Tensor descriptor helpers. */
#include <string.h>

#include "core/checked.h"
#include "mla/mla.h"

mla_status mla_tensor_init(mla_tensor *t, void *data, mla_dtype dtype, mla_memory memory,
                           int32_t ndim, const int64_t *shape)
{
    if (!t || (ndim > 0 && !shape))
        return MLA_ERR_NULL_POINTER;
    if (ndim < 0 || ndim > MLA_MAX_DIMS)
        return MLA_ERR_SHAPE;
    for (int32_t i = 0; i < ndim; ++i)
        if (shape[i] < 0)
            return MLA_ERR_SHAPE;
    memset(t, 0, sizeof *t);
    t->data = data;
    t->dtype = dtype;
    t->memory = memory;
    t->ndim = ndim;
    int64_t stride = 1;
    for (int32_t i = ndim - 1; i >= 0; --i) {
        t->shape[i] = shape[i];
        t->stride[i] = stride;
        /* An overflowing product leaves a wrong stride that validation
         * refuses as an overflowing span; no wrap in the arithmetic here. */
        if (!mla_ck_mul(stride, shape[i] > 0 ? shape[i] : 1, &stride))
            return MLA_ERR_OVERFLOW;
    }
    return MLA_OK;
}

int64_t mla_tensor_numel(const mla_tensor *t)
{
    if (!t || t->ndim < 0 || t->ndim > MLA_MAX_DIMS)
        return -1;
    int64_t n = 1;
    for (int32_t i = 0; i < t->ndim; ++i)
        if (t->shape[i] < 0 || !mla_ck_mul(n, t->shape[i], &n))
            return -1;
    return n;
}

int mla_tensor_is_contiguous(const mla_tensor *t)
{
    if (!t || t->ndim < 0 || t->ndim > MLA_MAX_DIMS)
        return 0;
    int64_t expected = 1;
    for (int32_t i = t->ndim - 1; i >= 0; --i) {
        if (t->shape[i] == 0)
            return 1; /* empty: no element is out of place */
        if ((t->shape[i] != 1 && t->stride[i] != expected) ||
            !mla_ck_mul(expected, t->shape[i], &expected))
            return 0;
    }
    return 1;
}

mla_status mla_tensor_transpose(mla_tensor *t, int32_t a, int32_t b)
{
    if (!t)
        return MLA_ERR_NULL_POINTER;
    if (a < 0 || b < 0 || a >= t->ndim || b >= t->ndim)
        return MLA_ERR_OUT_OF_RANGE;
    int64_t s = t->shape[a], d = t->stride[a];
    t->shape[a] = t->shape[b];
    t->stride[a] = t->stride[b];
    t->shape[b] = s;
    t->stride[b] = d;
    return MLA_OK;
}
