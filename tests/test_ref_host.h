/* Helpers of the reference tests that build their cases in host memory and
 * compute the answers themselves (test_prepare_ref, test_indexer_ref). */
#ifndef MLA_TEST_REF_HOST_H
#define MLA_TEST_REF_HOST_H

#include <stdint.h>
#include <string.h>

#include "mla/mla.h"

/* A host tensor of up to 3 dims (the trailing sizes past ndim unused). */
static inline mla_tensor tensor(void *data, mla_dtype dtype, int32_t ndim, int64_t d0, int64_t d1,
                                int64_t d2)
{
    mla_tensor t;
    const int64_t shape[3] = {d0, d1, d2};
    mla_tensor_init(&t, data, dtype, MLA_MEMORY_HOST, ndim, shape);
    return t;
}

static inline uint32_t bits_of(float v)
{
    uint32_t u;
    memcpy(&u, &v, sizeof u);
    return u;
}

/* A deterministic value in [-2, 2), a multiple of 2^-6 (exact in bf16). */
static inline float val(int i)
{
    uint32_t h = (uint32_t)i * 2654435761u;
    return (float)((int32_t)((h >> 8) & 0xFFu) - 128) / 64.0f;
}

#endif
