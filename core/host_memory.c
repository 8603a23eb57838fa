/* Memory and lifecycle for the host backends (reference and CPU). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/attention_planner.h"
#include "core/backend.h"

#if defined(MLA_HAVE_OPENMP)
#include <omp.h>
#endif

mla_status mla_host_init(mla_context *ctx, const mla_context_options *opt, char *reason,
                         size_t reason_len)
{
    (void)reason;
    (void)reason_len;
    int threads = opt->num_threads;
#if defined(MLA_HAVE_OPENMP)
    if (threads == 0)
        threads = omp_get_max_threads();
#endif
    ctx->num_threads = threads > 0 ? threads : 1;
    ctx->compute_units = MLA_HOST_COMPUTE_UNITS; /* not the threads: same splits, same bits */
    ctx->min_split_keys = MLA_HOST_MIN_CHUNK;
    snprintf(ctx->device_name, sizeof ctx->device_name, "host CPU, %d thread%s", ctx->num_threads,
             ctx->num_threads == 1 ? "" : "s");
    return MLA_OK;
}

void mla_host_fini(mla_context *ctx) { (void)ctx; }

mla_status mla_host_alloc(mla_context *ctx, size_t bytes, void **out)
{
    /* aligned_alloc wants a multiple of the alignment; 0 bytes still gets a
     * distinct pointer so that free() pairs with it. */
    size_t rounded = (bytes + 255) & ~(size_t)255;
    if (rounded < bytes)
        return mla_fail(ctx, MLA_ERR_OVERFLOW, "bytes", "%zu bytes cannot be rounded up", bytes);
    void *p = aligned_alloc(256, rounded ? rounded : 256);
    if (!p)
        return mla_fail(ctx, MLA_ERR_OUT_OF_MEMORY, "bytes", "cannot allocate %zu bytes", bytes);
    *out = p;
    return MLA_OK;
}

mla_status mla_host_free(mla_context *ctx, void *ptr)
{
    (void)ctx;
    free(ptr);
    return MLA_OK;
}

mla_status mla_host_copy(mla_context *ctx, void *dst, const void *src, size_t bytes,
                         mla_copy_kind kind)
{
    (void)ctx;
    (void)kind; /* host and context memory are the same thing here */
    memmove(dst, src, bytes);
    return MLA_OK;
}

mla_status mla_host_set(mla_context *ctx, void *dst, int value, size_t bytes)
{
    (void)ctx;
    memset(dst, value, bytes);
    return MLA_OK;
}

mla_status mla_host_synchronize(mla_context *ctx)
{
    (void)ctx;
    return MLA_OK;
}
