/* The allocation helper of core/checked.h. */
#include "core/checked.h"

#include <stdlib.h>

#include "core/backend.h"

mla_status mla_alloc_array(mla_context *ctx, void **out, int64_t n, int64_t m, size_t es,
                           const char *param)
{
    *out = NULL;
    size_t bytes;
    if (!mla_ck_bytes(n, m, es, &bytes))
        return mla_fail(ctx, MLA_ERR_OVERFLOW, param,
                        "%s: scratch of %lld x %lld elements of %zu bytes overflows", param,
                        (long long)n, (long long)m, es);
    *out = malloc(bytes);
    if (!*out)
        return mla_fail(ctx, MLA_ERR_OUT_OF_MEMORY, param, "%s: cannot allocate %zu bytes", param,
                        bytes);
    return MLA_OK;
}
