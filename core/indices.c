#include "core/indices.h"

#include <stdlib.h>
#include <string.h>

#include "core/validate.h"

mla_status mla_read_indices(mla_context *ctx, const mla_tensor *t, const char *name, int64_t **out)
{
    *out = NULL;
    int64_t n = mla_tensor_numel(t);
    if (n == 0)
        return MLA_OK;
    int64_t span = mla_tensor_span_bytes(t);
    /* A contiguous I64 tensor (positions, slots) lands in vals directly: one
     * copy, no staging buffer and no per-element walk. */
    const int direct = t->dtype == MLA_DTYPE_I64 && mla_tensor_is_contiguous(t);
    /* n values (a broadcast view may hold more than fit in memory) */
    int64_t *vals;
    MLA_TRY(mla_alloc_array(ctx, (void **)&vals, n, 1, sizeof *vals, name));
    uint8_t *raw = direct ? NULL : malloc((size_t)span);
    if (!direct && !raw) {
        free(vals);
        return mla_fail(ctx, MLA_ERR_OUT_OF_MEMORY, name, "%s: cannot stage indices", name);
    }
    void *dst = direct ? (void *)vals : (void *)raw;
    mla_status st = MLA_OK;
    if (t->memory == MLA_MEMORY_HOST)
        memcpy(dst, t->data, (size_t)span);
    else
        st = ctx->ops->mem_copy(ctx, dst, t->data, (size_t)span, MLA_COPY_CONTEXT_TO_HOST);
    if (st != MLA_OK || direct) {
        free(raw);
        if (st != MLA_OK)
            free(vals);
        else
            *out = vals;
        return st;
    }
    int64_t idx[MLA_MAX_DIMS] = {0};
    for (int64_t k = 0; k < n; ++k) {
        int64_t off = 0;
        for (int32_t d = 0; d < t->ndim; ++d)
            off += idx[d] * t->stride[d];
        if (t->dtype == MLA_DTYPE_I32) {
            int32_t v;
            memcpy(&v, raw + off * 4, 4);
            vals[k] = v;
        } else {
            memcpy(&vals[k], raw + off * 8, 8);
        }
        for (int32_t d = t->ndim - 1; d >= 0 && ++idx[d] == t->shape[d]; --d)
            idx[d] = 0;
    }
    free(raw);
    *out = vals;
    return MLA_OK;
}

int64_t mla_find_duplicate(const int64_t *v, int64_t n)
{
    /* Open addressing over 2n..4n slots (a power of two), -1 = empty: O(n)
     * where the sort it replaces cost tens of microseconds per 1024 slots
     * on every cache write. */
    int64_t cap = 8; /* then doubled: at least 16 and 2 n */
    while (cap < n && cap <= INT64_MAX / 4)
        cap *= 2;
    cap *= 2;
    size_t bytes;
    int64_t *set = mla_ck_bytes(cap, 1, sizeof *set, &bytes) ? malloc(bytes) : NULL;
    if (!set)
        return -2;
    memset(set, 0xFF, bytes);
    int64_t dup = -1;
    for (int64_t i = 0; i < n && dup < 0; ++i) {
        if (v[i] < 0)
            continue;
        size_t h = (size_t)(((uint64_t)v[i] * 0x9E3779B97F4A7C15ull) >> 17) & (size_t)(cap - 1);
        while (set[h] >= 0 && set[h] != v[i])
            h = (h + 1) & (size_t)(cap - 1);
        if (set[h] == v[i])
            dup = v[i];
        set[h] = v[i];
    }
    free(set);
    return dup;
}

mla_status mla_check_slot_values(mla_context *ctx, const mla_tensor *slots, int64_t T,
                                 int64_t capacity, const char *name)
{
    if (!mla_check_values(ctx, MLA_TRUST_INDICES))
        return MLA_OK;
    int64_t *v = NULL;
    MLA_TRY(mla_read_indices(ctx, slots, name, &v));
    mla_status st = mla_check_index_range(ctx, v, T, 0, capacity, 1, name);
    if (st == MLA_OK && T > 1) {
        const int64_t dup = mla_find_duplicate(v, T);
        if (dup == -2)
            st = mla_fail(ctx, MLA_ERR_OUT_OF_MEMORY, name, "%s: cannot check duplicates", name);
        else if (dup >= 0)
            st = mla_fail(ctx, MLA_ERR_INVALID_ARGUMENT, name, "slot %lld is written twice",
                          (long long)dup);
    }
    free(v);
    return st;
}

mla_status mla_check_index_range(mla_context *ctx, const int64_t *v, int64_t n, int64_t lo,
                                 int64_t hi, int skip_negative, const char *name)
{
    for (int64_t i = 0; i < n; ++i) {
        if (skip_negative && v[i] < 0)
            continue;
        if (v[i] < lo || v[i] >= hi)
            return mla_fail(ctx, MLA_ERR_OUT_OF_RANGE, name,
                            "%s[%lld] = %lld is outside [%lld, %lld)", name, (long long)i,
                            (long long)v[i], (long long)lo, (long long)hi);
    }
    return MLA_OK;
}
