/* Guarded host buffers for the bad-input tests: every byte of a buffer and
 * of the 64 guard bytes on each side starts as a canary pattern, so a test
 * can tell "nothing outside the output changed" (guard_intact) and "nothing
 * changed at all" (guard_untouched: a refused call). */
#ifndef MLA_TEST_GUARD_H
#define MLA_TEST_GUARD_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define GUARD_BYTES 64

typedef struct guarded {
    uint8_t *base; /* GUARD_BYTES, then bytes of data, then GUARD_BYTES */
    size_t bytes;
} guarded;

static inline uint8_t guard_canary(size_t i) { return (uint8_t)(0xA5u ^ (i * 29u)); }

/* The data pointer (256-byte aligned) of bytes canary-filled bytes. */
static inline void *guard_alloc(guarded *g, size_t bytes)
{
    g->bytes = bytes;
    g->base = aligned_alloc(256, (2 * 256 + bytes + 255) / 256 * 256);
    for (size_t i = 0; g->base && i < 2 * 256 + bytes; ++i)
        g->base[i] = guard_canary(i);
    return g->base ? g->base + 256 : NULL;
}

static inline void *guard_data(const guarded *g) { return g->base + 256; }

/* The canary again over data and guards (before the next call). */
static inline void guard_reset(guarded *g)
{
    for (size_t i = 0; i < 2 * 256 + g->bytes; ++i)
        g->base[i] = guard_canary(i);
}

static inline int guard_range_is_canary(const guarded *g, size_t from, size_t to)
{
    for (size_t i = from; i < to; ++i)
        if (g->base[i] != guard_canary(i))
            return 0;
    return 1;
}

/* The guard bytes on both sides are unchanged. */
static inline int guard_intact(const guarded *g)
{
    return guard_range_is_canary(g, 256 - GUARD_BYTES, 256) &&
           guard_range_is_canary(g, 256 + g->bytes, 256 + g->bytes + GUARD_BYTES);
}

/* Data and guards are unchanged. */
static inline int guard_untouched(const guarded *g)
{
    return guard_range_is_canary(g, 256 - GUARD_BYTES, 256 + g->bytes + GUARD_BYTES);
}

static inline void guard_free(guarded *g)
{
    free(g->base);
    g->base = NULL;
}

/* A view with explicit strides (broadcasts: stride 0). */
static inline mla_tensor guard_view(void *data, mla_dtype dt, int32_t ndim, const int64_t *shape,
                                    const int64_t *stride)
{
    mla_tensor t;
    memset(&t, 0, sizeof t);
    t.data = data;
    t.dtype = dt;
    t.memory = MLA_MEMORY_HOST;
    t.ndim = ndim;
    for (int32_t i = 0; i < ndim; ++i)
        t.shape[i] = shape[i], t.stride[i] = stride[i];
    return t;
}

#endif
