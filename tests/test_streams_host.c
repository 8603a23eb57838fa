/* mla_context_set_stream / _get_stream on the host backends (include/mla/mla.h):
 * they have no stream, so NULL is accepted and changes nothing, any other
 * value is MLA_ERR_UNSUPPORTED naming "stream", and the query answers NULL.
 * tests/test_streams.c covers the HIP backend. */
#include <string.h>

#include "mla/mla.h"
#include "tests/test_util.h"

static void host_backend(mla_backend backend)
{
    mla_context *ctx = NULL;
    CHECK_STATUS(mla_context_create(backend, NULL, &ctx), MLA_OK);
    if (!ctx)
        return;
    CHECK(mla_context_get_stream(ctx) == NULL);
    CHECK_STATUS(mla_context_set_stream(ctx, NULL), MLA_OK);
    CHECK(strcmp(mla_context_error_param(ctx), "") == 0);

    static int not_a_stream;
    CHECK_STATUS(mla_context_set_stream(ctx, &not_a_stream), MLA_ERR_UNSUPPORTED);
    CHECK(strcmp(mla_context_error_param(ctx), "stream") == 0);
    CHECK(strlen(mla_context_error_detail(ctx)) > 0);
    CHECK(mla_context_get_stream(ctx) == NULL);

    /* the refused call changed nothing: the context still runs */
    float x[2] = {1.5f, -3.0f};
    uint16_t y[2] = {0, 0};
    const int64_t shape[1] = {2};
    mla_tensor tx, ty;
    mla_tensor_init(&tx, x, MLA_DTYPE_F32, MLA_MEMORY_HOST, 1, shape);
    mla_tensor_init(&ty, y, MLA_DTYPE_BF16, MLA_MEMORY_HOST, 1, shape);
    CHECK_STATUS(mla_convert(ctx, &tx, &ty, MLA_SATURATE), MLA_OK);
    CHECK(y[0] == 0x3FC0 && y[1] == 0xC040);
    CHECK(strcmp(mla_context_error_param(ctx), "") == 0);
    mla_context_destroy(ctx);
}

int main(void)
{
    CHECK_STATUS(mla_context_set_stream(NULL, NULL), MLA_ERR_NULL_POINTER);
    CHECK(mla_context_get_stream(NULL) == NULL);
    host_backend(MLA_BACKEND_REFERENCE);
    host_backend(MLA_BACKEND_CPU);
    return TEST_SUMMARY();
}
