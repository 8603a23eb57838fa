/* Tensor set-up shared by the unit tests that run on a context's memory. */
#ifndef MLA_TEST_TENSORS_H
#define MLA_TEST_TENSORS_H

#include "mla/mla.h"
#include "tests/test_util.h"

static inline mla_tensor test_tensor(void *data, mla_dtype dt, mla_memory mem, int32_t ndim,
                                     const int64_t *shape)
{
    mla_tensor t;
    mla_tensor_init(&t, data, dt, mem, ndim, shape);
    return t;
}

/* Copies host bytes into new context memory (or returns the host pointer
 * for a host context). */
static inline void *test_upload(mla_context *ctx, const void *src, size_t bytes)
{
    if (mla_context_memory(ctx) == MLA_MEMORY_HOST)
        return (void *)src;
    void *p = NULL;
    CHECK_STATUS(mla_malloc(ctx, bytes, &p), MLA_OK);
    CHECK_STATUS(mla_memcpy(ctx, p, src, bytes, MLA_COPY_HOST_TO_CONTEXT), MLA_OK);
    return p;
}

/* table[0, n) = a random permutation of 0 .. n-1 (Fisher-Yates over next):
 * a block pool in the order a serving cache ends up in. */
static inline void test_shuffled_table(int32_t *table, int n, uint32_t (*next)(void))
{
    for (int i = 0; i < n; ++i)
        table[i] = i;
    for (int i = n - 1; i > 0; --i) {
        const int j = (int)(next() % (uint32_t)(i + 1));
        const int32_t tmp = table[i];
        table[i] = table[j], table[j] = tmp;
    }
}

#endif
