/* Context creation over the registered backends, AUTO selection, tuning,
 * error recording. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/backend.h"
#include "core/dump.h"

static void copy_string(char *dst, size_t len, const char *src)
{
    snprintf(dst, len, "%s", src ? src : "");
}

mla_status mla_fail(mla_context *ctx, mla_status status, const char *param, const char *fmt, ...)
{
    if (!ctx)
        return status;
    copy_string(ctx->err_param, sizeof ctx->err_param, param);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(ctx->err_detail, sizeof ctx->err_detail, fmt, ap);
    va_end(ap);
    return status;
}

void mla_clear_error(mla_context *ctx)
{
    ctx->err_param[0] = '\0';
    ctx->err_detail[0] = '\0';
}

/* A context around ops: the options checked, the tuning from the
 * environment (read here only), then the backend's init, which may fail and
 * say why in reason. */
static mla_status create(const mla_backend_ops *ops, const mla_context_options *options,
                         mla_context **out, char *reason, size_t reason_len)
{
    if (!ops || !out)
        return MLA_ERR_NULL_POINTER;
    *out = NULL;
    reason[0] = '\0';
    static const mla_context_options defaults = {0, 0, NULL};
    if (!options)
        options = &defaults;
    if (options->num_threads < 0 || options->device < 0)
        return MLA_ERR_INVALID_ARGUMENT;
    mla_context *ctx = calloc(1, sizeof *ctx);
    if (!ctx)
        return MLA_ERR_OUT_OF_MEMORY;
    ctx->ops = ops;
    ctx->backend = ops->backend;
    ctx->target = ops->target;
    mla_tuning_init(&ctx->tuning);
    (void)mla_tuning_from_env(&ctx->tuning, NULL); /* a value it does not know stays auto */
    mla_status st = ops->init(ctx, options, reason, reason_len);
    if (st != MLA_OK) {
        free(ctx);
        return st;
    }
    mla_dump_init(ctx);
    *out = ctx;
    return MLA_OK;
}

mla_status mla_context_create_with_ops(const mla_backend_ops *ops,
                                       const mla_context_options *options, mla_context **out)
{
    char reason[sizeof((mla_context *)0)->fallback_reason];
    return create(ops, options, out, reason, sizeof reason);
}

const mla_backend_ops *mla_backend_find(mla_backend backend)
{
    for (int i = 0; mla_backend_registry[i]; ++i) {
        const mla_backend_ops *ops = mla_backend_registry[i]();
        if (ops && ops->backend == backend)
            return ops;
    }
    return NULL;
}

/* AUTO: the registered backends by descending auto_order, the first whose
 * init succeeds; the reasons of those that failed before it are kept. */
static mla_status create_auto(const mla_context_options *options, mla_context **out)
{
    char why[sizeof((mla_context *)0)->fallback_reason] = "";
    int32_t below = INT32_MAX;
    mla_status st = MLA_ERR_NOT_COMPILED;
    for (;;) {
        const mla_backend_ops *next = NULL;
        for (int i = 0; mla_backend_registry[i]; ++i) {
            const mla_backend_ops *ops = mla_backend_registry[i]();
            if (ops && ops->auto_order > 0 && ops->auto_order < below &&
                (!next || ops->auto_order > next->auto_order))
                next = ops;
        }
        if (!next)
            return st;
        below = next->auto_order;
        char reason[sizeof why] = "";
        st = create(next, options, out, reason, sizeof reason);
        if (st == MLA_OK) {
            if (next->memory != MLA_MEMORY_DEVICE && !why[0])
                copy_string(why, sizeof why, "no GPU backend is compiled into this build");
            copy_string((*out)->fallback_reason, sizeof (*out)->fallback_reason, why);
            return MLA_OK;
        }
        const size_t n = strlen(why);
        if (reason[0])
            snprintf(why + n, sizeof why - n, "%s%s", n ? "; " : "", reason);
        else
            snprintf(why + n, sizeof why - n, "%sthe %s backend: %s", n ? "; " : "", next->name,
                     mla_status_name(st));
    }
}

mla_status mla_context_create(mla_backend backend, const mla_context_options *options,
                              mla_context **out)
{
    if (!out)
        return MLA_ERR_NULL_POINTER;
    *out = NULL;
    if ((int)backend < 0 || backend >= MLA_BACKEND_COUNT ||
        (options && (options->num_threads < 0 || options->device < 0)))
        return MLA_ERR_INVALID_ARGUMENT;
    if (backend == MLA_BACKEND_AUTO)
        return create_auto(options, out);
    const mla_backend_ops *ops = mla_backend_find(backend);
    if (!ops)
        return MLA_ERR_NOT_COMPILED;
    char reason[sizeof((mla_context *)0)->fallback_reason];
    return create(ops, options, out, reason, sizeof reason);
}

void mla_context_destroy(mla_context *ctx)
{
    if (!ctx)
        return;
    ctx->ops->fini(ctx);
    mla_dump_fini(ctx);
    free(ctx);
}

mla_backend mla_context_backend(const mla_context *ctx)
{
    return ctx ? ctx->backend : MLA_BACKEND_COUNT;
}

mla_target mla_context_target(const mla_context *ctx)
{
    return ctx ? ctx->target : MLA_TARGET_COUNT;
}

mla_memory mla_context_memory(const mla_context *ctx)
{
    return ctx ? ctx->ops->memory : MLA_MEMORY_COUNT;
}

const char *mla_context_fallback_reason(const mla_context *ctx)
{
    return ctx ? ctx->fallback_reason : "";
}

const char *mla_context_device_name(const mla_context *ctx)
{
    return ctx ? ctx->device_name : "";
}

const char *mla_context_error_param(const mla_context *ctx) { return ctx ? ctx->err_param : ""; }

const char *mla_context_error_detail(const mla_context *ctx)
{
    return ctx ? ctx->err_detail : "";
}

mla_status mla_context_synchronize(mla_context *ctx)
{
    if (!ctx)
        return MLA_ERR_NULL_POINTER;
    mla_clear_error(ctx);
    return ctx->ops->synchronize(ctx);
}

mla_status mla_context_set_stream(mla_context *ctx, void *stream)
{
    if (!ctx)
        return MLA_ERR_NULL_POINTER;
    mla_clear_error(ctx);
    if (ctx->ops->set_stream)
        return ctx->ops->set_stream(ctx, stream);
    if (stream)
        return mla_fail(ctx, MLA_ERR_UNSUPPORTED, "stream",
                        "the %s backend runs on the calling thread and has no stream; "
                        "only NULL is accepted",
                        ctx->ops->name);
    return MLA_OK;
}

void *mla_context_get_stream(const mla_context *ctx)
{
    return ctx && ctx->ops->get_stream ? ctx->ops->get_stream(ctx) : NULL;
}

mla_status mla_context_set_tuning(mla_context *ctx, const mla_tuning *t)
{
    if (!ctx)
        return MLA_ERR_NULL_POINTER;
    mla_clear_error(ctx);
    const mla_status st = mla_tuning_check(ctx, t, &ctx->tuning);
    if (st != MLA_OK)
        return st;
    if (ctx->ops->tuning_changed)
        ctx->ops->tuning_changed(ctx);
    return MLA_OK;
}

mla_status mla_context_get_tuning(const mla_context *ctx, mla_tuning *out)
{
    if (!ctx || !out)
        return MLA_ERR_NULL_POINTER;
    if (out->struct_size < offsetof(mla_tuning, cpu_isa) || out->struct_size > sizeof *out ||
        out->struct_size % sizeof(int32_t))
        return MLA_ERR_INVALID_ARGUMENT;
    const uint32_t size = out->struct_size, version = out->version;
    memcpy(out, &ctx->tuning, size);
    out->struct_size = size, out->version = version;
    return MLA_OK;
}

mla_status mla_supports(const mla_context *ctx, const mla_variant *variant, const char **param)
{
    if (param)
        *param = "";
    if (!ctx || !variant)
        return MLA_ERR_NULL_POINTER;
    if ((int)variant->op < 0 || variant->op >= MLA_OP_COUNT) {
        if (param)
            *param = "variant.op";
        return MLA_ERR_INVALID_ARGUMENT;
    }
    const char *why = ctx->ops->supports(ctx, variant);
    if (!why)
        return MLA_OK;
    if (param)
        *param = why;
    return MLA_ERR_UNSUPPORTED;
}

/* ------------------------------------------------------------------ memory */

mla_status mla_malloc(mla_context *ctx, size_t bytes, void **out)
{
    if (!ctx || !out)
        return mla_fail(ctx, MLA_ERR_NULL_POINTER, "out", "null argument");
    mla_clear_error(ctx);
    *out = NULL;
    return ctx->ops->mem_alloc(ctx, bytes, out);
}

mla_status mla_free(mla_context *ctx, void *ptr)
{
    if (!ctx)
        return MLA_ERR_NULL_POINTER;
    mla_clear_error(ctx);
    return ptr ? ctx->ops->mem_free(ctx, ptr) : MLA_OK;
}

mla_status mla_memcpy(mla_context *ctx, void *dst, const void *src, size_t bytes,
                      mla_copy_kind kind)
{
    if (!ctx)
        return MLA_ERR_NULL_POINTER;
    mla_clear_error(ctx);
    if ((int)kind < 0 || kind >= MLA_COPY_KIND_COUNT)
        return mla_fail(ctx, MLA_ERR_INVALID_ARGUMENT, "kind", "unknown copy kind %d", (int)kind);
    if (bytes == 0)
        return MLA_OK;
    if (!dst || !src)
        return mla_fail(ctx, MLA_ERR_NULL_POINTER, dst ? "src" : "dst", "null pointer");
    return ctx->ops->mem_copy(ctx, dst, src, bytes, kind);
}

mla_status mla_memset(mla_context *ctx, void *dst, int value, size_t bytes)
{
    if (!ctx)
        return MLA_ERR_NULL_POINTER;
    mla_clear_error(ctx);
    if (bytes == 0)
        return MLA_OK;
    if (!dst)
        return mla_fail(ctx, MLA_ERR_NULL_POINTER, "dst", "null pointer");
    return ctx->ops->mem_set(ctx, dst, value, bytes);
}
