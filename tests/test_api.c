/* The public API's contract outside the numbers: contexts, memory, names,
 * and that bad input gets a specific status, names the parameter, and
 * writes nothing. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "mla/mla.h"
#include "tests/test_util.h"

enum { M = 4, K = 64, SENTINEL = 0xAB };

static float x_data[M * K];
static uint8_t codes_data[M * K];
static uint8_t scales_data[4096];
static float fscales_data[M * K];

static int untouched(const void *p, size_t n)
{
    const uint8_t *b = p;
    for (size_t i = 0; i < n; ++i)
        if (b[i] != SENTINEL)
            return 0;
    return 1;
}

static void poison(void)
{
    memset(codes_data, SENTINEL, sizeof codes_data);
    memset(scales_data, SENTINEL, sizeof scales_data);
    memset(fscales_data, SENTINEL, sizeof fscales_data);
}

static int outputs_untouched(void)
{
    return untouched(codes_data, sizeof codes_data) && untouched(scales_data, sizeof scales_data) &&
           untouched(fscales_data, sizeof fscales_data);
}

static mla_tensor tensor2(void *data, mla_dtype dtype, int64_t rows, int64_t cols)
{
    mla_tensor t;
    int64_t shape[2] = {rows, cols};
    mla_tensor_init(&t, data, dtype, MLA_MEMORY_HOST, 2, shape);
    return t;
}

static void test_names(void)
{
    for (int s = 0; s < MLA_STATUS_COUNT; ++s)
        CHECK(strcmp(mla_status_name((mla_status)s), "unknown") != 0);
    CHECK(strcmp(mla_status_name(MLA_STATUS_COUNT), "unknown") == 0);
    for (int d = 0; d < MLA_DTYPE_COUNT; ++d)
        CHECK(strcmp(mla_dtype_name((mla_dtype)d), "unknown") != 0 &&
              mla_dtype_size((mla_dtype)d) > 0);
    for (int o = 0; o < MLA_OP_COUNT; ++o)
        CHECK(strcmp(mla_op_name((mla_op)o), "unknown") != 0);
    for (int b = 0; b < MLA_BACKEND_COUNT; ++b)
        CHECK(strcmp(mla_backend_name((mla_backend)b), "unknown") != 0);
    int major = -1, minor = -1, patch = -1;
    mla_version(&major, &minor, &patch);
    CHECK(major == MLA_VERSION_MAJOR && minor == MLA_VERSION_MINOR && patch == MLA_VERSION_PATCH);
    CHECK(mla_version_string()[0] != '\0');
}

static void test_contexts(void)
{
    mla_context *ctx = (mla_context *)&ctx; /* must be reset on failure */
    CHECK_STATUS(mla_context_create(MLA_BACKEND_COUNT, NULL, &ctx), MLA_ERR_INVALID_ARGUMENT);
    CHECK(ctx == NULL);
    CHECK_STATUS(mla_context_create(MLA_BACKEND_CPU, NULL, NULL), MLA_ERR_NULL_POINTER);
    mla_context_options bad = {-1, 0, NULL};
    CHECK_STATUS(mla_context_create(MLA_BACKEND_CPU, &bad, &ctx), MLA_ERR_INVALID_ARGUMENT);

    mla_status hip = mla_context_create(MLA_BACKEND_HIP, NULL, &ctx);
    if (hip == MLA_OK) {
        CHECK(mla_context_memory(ctx) == MLA_MEMORY_DEVICE);
        mla_context_destroy(ctx);
    } else {
        CHECK(hip == MLA_ERR_NOT_COMPILED || hip == MLA_ERR_NO_DEVICE);
        CHECK(ctx == NULL);
        CHECK(mla_gpu_count() == 0);
    }

    CHECK_STATUS(mla_context_create(MLA_BACKEND_AUTO, NULL, &ctx), MLA_OK);
    if (hip == MLA_OK) {
        CHECK(mla_context_backend(ctx) == MLA_BACKEND_HIP);
        CHECK(mla_context_fallback_reason(ctx)[0] == '\0');
    } else {
        CHECK(mla_context_backend(ctx) == MLA_BACKEND_CPU);
        CHECK(mla_context_fallback_reason(ctx)[0] != '\0');
    }
    CHECK(mla_context_device_name(ctx)[0] != '\0');
    mla_context_destroy(ctx);
    mla_context_destroy(NULL);

    CHECK_STATUS(mla_context_create(MLA_BACKEND_REFERENCE, NULL, &ctx), MLA_OK);
    CHECK(mla_context_backend(ctx) == MLA_BACKEND_REFERENCE);
    CHECK(mla_context_memory(ctx) == MLA_MEMORY_HOST);
    void *p = NULL;
    CHECK_STATUS(mla_malloc(ctx, 1000, &p), MLA_OK);
    CHECK(p != NULL && ((uintptr_t)p % 256) == 0);
    CHECK_STATUS(mla_memset(ctx, p, 7, 1000), MLA_OK);
    uint8_t host[1000];
    CHECK_STATUS(mla_memcpy(ctx, host, p, sizeof host, MLA_COPY_CONTEXT_TO_HOST), MLA_OK);
    CHECK(host[0] == 7 && host[999] == 7);
    CHECK_STATUS(mla_memcpy(ctx, host, NULL, 4, MLA_COPY_CONTEXT_TO_HOST), MLA_ERR_NULL_POINTER);
    CHECK_STATUS(mla_memcpy(ctx, host, p, 4, MLA_COPY_KIND_COUNT), MLA_ERR_INVALID_ARGUMENT);
    CHECK(strcmp(mla_context_error_param(ctx), "kind") == 0);
    CHECK_STATUS(mla_free(ctx, p), MLA_OK);
    CHECK_STATUS(mla_malloc(ctx, SIZE_MAX, &p), MLA_ERR_OVERFLOW);
    CHECK_STATUS(mla_context_synchronize(ctx), MLA_OK);
    mla_context_destroy(ctx);
}

static void test_tensor_helpers(void)
{
    mla_tensor t;
    int64_t shape[3] = {2, 3, 4};
    CHECK_STATUS(mla_tensor_init(&t, x_data, MLA_DTYPE_F32, MLA_MEMORY_HOST, 3, shape), MLA_OK);
    CHECK(t.stride[0] == 12 && t.stride[1] == 4 && t.stride[2] == 1);
    CHECK(mla_tensor_numel(&t) == 24 && mla_tensor_is_contiguous(&t));
    CHECK_STATUS(mla_tensor_transpose(&t, 0, 2), MLA_OK);
    CHECK(t.shape[0] == 4 && t.stride[0] == 1 && !mla_tensor_is_contiguous(&t));
    CHECK_STATUS(mla_tensor_transpose(&t, 0, 3), MLA_ERR_OUT_OF_RANGE);
    CHECK_STATUS(mla_tensor_init(&t, x_data, MLA_DTYPE_F32, MLA_MEMORY_HOST, 7, shape),
                 MLA_ERR_SHAPE);
    int64_t huge[2] = {INT64_MAX / 2, 4};
    CHECK_STATUS(mla_tensor_init(&t, x_data, MLA_DTYPE_F32, MLA_MEMORY_HOST, 2, huge),
                 MLA_ERR_OVERFLOW);
}

/* Runs one failing call and checks status, parameter and untouched outputs. */
#define EXPECT_REFUSED(ctx, call, status, param)                                                  \
    do {                                                                                          \
        poison();                                                                                 \
        CHECK_STATUS(call, status);                                                               \
        CHECK(outputs_untouched());                                                               \
        if (strcmp(mla_context_error_param(ctx), param) != 0) {                                   \
            ++test_failed_;                                                                       \
            fprintf(stderr, "%s:%d: param '%s', expected '%s'\n", __FILE__, __LINE__,             \
                    mla_context_error_param(ctx), param);                                         \
        } else {                                                                                  \
            ++test_passed_;                                                                       \
        }                                                                                         \
    } while (0)

static void test_mxfp4_bad_input(mla_context *ctx)
{
    mla_tensor x = tensor2(x_data, MLA_DTYPE_F32, M, K);
    mla_tensor c = tensor2(codes_data, MLA_DTYPE_FP4X2, M, K / 2);
    mla_tensor s = tensor2(scales_data, MLA_DTYPE_E8M0, M, K / 32);
    const mla_scale_layout rm = MLA_SCALE_ROW_MAJOR;
    const mla_mxfp4_rule pr = MLA_MXFP4_PRODUCTION;

    EXPECT_REFUSED(ctx, mla_mxfp4_quant(ctx, NULL, &c, &s, rm, pr), MLA_ERR_NULL_POINTER, "x");
    mla_tensor bad = x;
    bad.data = NULL;
    EXPECT_REFUSED(ctx, mla_mxfp4_quant(ctx, &bad, &c, &s, rm, pr), MLA_ERR_NULL_POINTER,
                   "x.data");
    bad = x;
    bad.dtype = MLA_DTYPE_I32;
    EXPECT_REFUSED(ctx, mla_mxfp4_quant(ctx, &bad, &c, &s, rm, pr), MLA_ERR_DTYPE, "x.dtype");
    bad.dtype = (mla_dtype)99;
    EXPECT_REFUSED(ctx, mla_mxfp4_quant(ctx, &bad, &c, &s, rm, pr), MLA_ERR_DTYPE, "x.dtype");
    mla_tensor x30 = tensor2(x_data, MLA_DTYPE_F32, M, 48);
    mla_tensor c30 = tensor2(codes_data, MLA_DTYPE_FP4X2, M, 24);
    EXPECT_REFUSED(ctx, mla_mxfp4_quant(ctx, &x30, &c30, &s, rm, pr), MLA_ERR_SHAPE,
                   "x.shape[1]");
    bad = c;
    bad.shape[1] = K;
    EXPECT_REFUSED(ctx, mla_mxfp4_quant(ctx, &x, &bad, &s, rm, pr), MLA_ERR_SHAPE,
                   "codes.shape[1]");
    bad = x;
    bad.stride[1] = -1;
    EXPECT_REFUSED(ctx, mla_mxfp4_quant(ctx, &bad, &c, &s, rm, pr), MLA_ERR_STRIDE, "x.stride");
    bad = c;
    bad.stride[0] = 0; /* every row onto the same bytes */
    EXPECT_REFUSED(ctx, mla_mxfp4_quant(ctx, &x, &bad, &s, rm, pr), MLA_ERR_STRIDE,
                   "codes.stride");
    bad = x;
    bad.stride[0] = INT64_MAX / 2;
    EXPECT_REFUSED(ctx, mla_mxfp4_quant(ctx, &bad, &c, &s, rm, pr), MLA_ERR_OVERFLOW,
                   "x.stride");
    bad = x;
    bad.memory = MLA_MEMORY_DEVICE;
    EXPECT_REFUSED(ctx, mla_mxfp4_quant(ctx, &bad, &c, &s, rm, pr), MLA_ERR_WRONG_DEVICE,
                   "x.memory");
    EXPECT_REFUSED(ctx, mla_mxfp4_quant(ctx, &x, &c, &s, (mla_scale_layout)7, pr),
                   MLA_ERR_INVALID_ARGUMENT, "layout");
    EXPECT_REFUSED(ctx, mla_mxfp4_quant(ctx, &x, &c, &s, rm, (mla_mxfp4_rule)7),
                   MLA_ERR_INVALID_ARGUMENT, "rule");
    /* Row-major scales passed as transposed: stride[0] is not 1. */
    EXPECT_REFUSED(ctx, mla_mxfp4_quant(ctx, &x, &c, &s, MLA_SCALE_TRANSPOSED, pr),
                   MLA_ERR_STRIDE, "scales.stride");
    mla_tensor flat;
    int64_t n = 100;
    mla_tensor_init(&flat, scales_data, MLA_DTYPE_E8M0, MLA_MEMORY_HOST, 1, &n);
    EXPECT_REFUSED(ctx, mla_mxfp4_quant(ctx, &x, &c, &flat, MLA_SCALE_PRESHUFFLED_GFX950, pr),
                   MLA_ERR_SHAPE, "scales.shape[0]");
    mla_tensor alias = tensor2(x_data, MLA_DTYPE_FP4X2, M, K / 2);
    EXPECT_REFUSED(ctx, mla_mxfp4_quant(ctx, &x, &alias, &s, rm, pr), MLA_ERR_ALIAS, "codes");

    poison();
    CHECK_STATUS(mla_mxfp4_quant(ctx, &x, &c, &s, rm, pr), MLA_OK);
    CHECK(mla_context_error_param(ctx)[0] == '\0');
    n = mla_scale_preshuffled_bytes(M, K / 32);
    mla_tensor_init(&flat, scales_data, MLA_DTYPE_E8M0, MLA_MEMORY_HOST, 1, &n);
    CHECK(n == 256 * 8);
    CHECK_STATUS(mla_mxfp4_quant(ctx, &x, &c, &flat, MLA_SCALE_PRESHUFFLED_GFX950, pr), MLA_OK);
    mla_tensor y = tensor2(fscales_data, MLA_DTYPE_BF16, M, K);
    CHECK_STATUS(mla_mxfp4_dequant(ctx, &c, &s, rm, &y), MLA_OK);
    mla_tensor y30 = tensor2(fscales_data, MLA_DTYPE_BF16, M, 48);
    EXPECT_REFUSED(ctx, mla_mxfp4_dequant(ctx, &c, &s, rm, &y30), MLA_ERR_SHAPE, "y.shape[1]");
}

static void test_fp8_bad_input(mla_context *ctx)
{
    mla_tensor x = tensor2(x_data, MLA_DTYPE_F32, M, K);
    mla_tensor c = tensor2(codes_data, MLA_DTYPE_FP8_E4M3FN, M, K);
    mla_tensor s = tensor2(fscales_data, MLA_DTYPE_F32, M, 2);
    const mla_fp8_scale_rule ai = MLA_FP8_SCALE_AITER;

    EXPECT_REFUSED(ctx, mla_fp8_group_quant(ctx, &x, &c, &s, 0, ai), MLA_ERR_INVALID_ARGUMENT,
                   "group");
    EXPECT_REFUSED(ctx, mla_fp8_group_quant(ctx, &x, &c, &s, 48, ai), MLA_ERR_SHAPE,
                   "x.shape[1]");
    EXPECT_REFUSED(ctx, mla_fp8_group_quant(ctx, &x, &c, &s, 16, ai), MLA_ERR_SHAPE,
                   "scales.shape[1]");
    mla_tensor bad = c;
    bad.dtype = MLA_DTYPE_BF16;
    EXPECT_REFUSED(ctx, mla_fp8_group_quant(ctx, &x, &bad, &s, 32, ai), MLA_ERR_DTYPE,
                   "codes.dtype");
    EXPECT_REFUSED(ctx, mla_fp8_group_quant(ctx, &x, &c, &s, 32, (mla_fp8_scale_rule)9),
                   MLA_ERR_INVALID_ARGUMENT, "rule");
    mla_tensor overlap = tensor2(codes_data + 8, MLA_DTYPE_F32, M, 2);
    EXPECT_REFUSED(ctx, mla_fp8_group_quant(ctx, &x, &c, &overlap, 32, ai), MLA_ERR_ALIAS,
                   "scales");
    /* Transposed scales are a legal view. */
    mla_tensor st = tensor2(fscales_data, MLA_DTYPE_F32, 2, M);
    mla_tensor_transpose(&st, 0, 1);
    poison();
    CHECK_STATUS(mla_fp8_group_quant(ctx, &x, &c, &st, 32, ai), MLA_OK);
}

static void test_convert_bad_input(mla_context *ctx)
{
    mla_tensor x = tensor2(x_data, MLA_DTYPE_F32, M, K);
    mla_tensor y = tensor2(codes_data, MLA_DTYPE_FP8_E4M3FNUZ, M, K);
    EXPECT_REFUSED(ctx, mla_convert(ctx, &x, &y, (mla_saturation)5), MLA_ERR_INVALID_ARGUMENT,
                   "mode");
    mla_tensor e = tensor2(codes_data, MLA_DTYPE_E8M0, M, K);
    EXPECT_REFUSED(ctx, mla_convert(ctx, &x, &e, MLA_SATURATE), MLA_ERR_DTYPE, "y.dtype");
    mla_tensor p = tensor2(codes_data, MLA_DTYPE_FP4X2, M, K);
    EXPECT_REFUSED(ctx, mla_convert(ctx, &x, &p, MLA_SATURATE), MLA_ERR_SHAPE, "y.shape[1]");
    mla_tensor y3 = y;
    y3.ndim = 1;
    EXPECT_REFUSED(ctx, mla_convert(ctx, &x, &y3, MLA_SATURATE), MLA_ERR_SHAPE, "y.ndim");
    poison();
    p.shape[1] = K / 2;
    p.stride[0] = K / 2;
    CHECK_STATUS(mla_convert(ctx, &x, &p, MLA_SATURATE), MLA_OK);
    /* In place, same width: allowed. */
    mla_tensor xi = x;
    CHECK_STATUS(mla_convert(ctx, &x, &xi, MLA_SATURATE), MLA_OK);
}

typedef struct thread_job {
    mla_backend backend;
    float *in;
    uint8_t *out;
    int64_t n;
    mla_status status;
} thread_job;

static void *run_job(void *arg)
{
    thread_job *job = arg;
    mla_context *ctx = NULL;
    job->status = mla_context_create(job->backend, NULL, &ctx);
    if (job->status != MLA_OK)
        return NULL;
    mla_tensor x = tensor2(job->in, MLA_DTYPE_F32, job->n / 256, 256);
    mla_tensor y = tensor2(job->out, MLA_DTYPE_FP8_E4M3FN, job->n / 256, 256);
    for (int rep = 0; rep < 4 && job->status == MLA_OK; ++rep)
        job->status = mla_convert(ctx, &x, &y, MLA_SATURATE);
    mla_context_destroy(ctx);
    return NULL;
}

static void test_threads(void)
{
    enum { N = 1 << 18 };
    float *in = malloc(N * sizeof *in);
    uint8_t *out[3] = {malloc(N), malloc(N), malloc(N)};
    for (int i = 0; i < N; ++i)
        in[i] = (float)((i * 2654435761u) % 100003) / 97.0f - 500.0f;
    thread_job jobs[3] = {{MLA_BACKEND_CPU, in, out[0], N, MLA_OK},
                          {MLA_BACKEND_REFERENCE, in, out[1], N, MLA_OK},
                          {MLA_BACKEND_CPU, in, out[2], N, MLA_OK}};
    pthread_t th[3];
    for (int i = 0; i < 3; ++i)
        pthread_create(&th[i], NULL, run_job, &jobs[i]);
    for (int i = 0; i < 3; ++i)
        pthread_join(th[i], NULL);
    for (int i = 0; i < 3; ++i)
        CHECK_STATUS(jobs[i].status, MLA_OK);
    CHECK(memcmp(out[0], out[1], N) == 0 && memcmp(out[2], out[1], N) == 0);
    free(in);
    for (int i = 0; i < 3; ++i)
        free(out[i]);
}

int main(void)
{
    for (int i = 0; i < M * K; ++i)
        x_data[i] = (float)(i % 37) * 0.37f - 5.0f;
    test_names();
    test_contexts();
    test_tensor_helpers();
    const mla_backend backends[2] = {MLA_BACKEND_REFERENCE, MLA_BACKEND_CPU};
    for (int b = 0; b < 2; ++b) {
        mla_context *ctx = NULL;
        CHECK_STATUS(mla_context_create(backends[b], NULL, &ctx), MLA_OK);
        if (!ctx)
            continue;
        test_mxfp4_bad_input(ctx);
        test_fp8_bad_input(ctx);
        test_convert_bad_input(ctx);
        mla_context_destroy(ctx);
    }
    test_threads();
    return TEST_SUMMARY();
}
