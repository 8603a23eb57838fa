/* Running one problem on one context, through the public API only: buffers
 * from mla_malloc, data moved with mla_memcpy, the op called by the suite.
 *
 * Every output buffer is allocated with CONF_GUARD_BYTES on either side and
 * filled, guards, gaps and elements alike, with a position-dependent pattern
 * that also depends on a salt. Afterwards every byte that is not an element
 * of the view must still hold its pattern (ggml's sentinels, extended to the
 * gaps of strided views). Runs that are compared with each other use
 * different salts, so an element one of them never wrote cannot agree.
 * An in/out argument starts from its host contents instead; its bytes
 * outside the view must still hold them afterwards. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "conformance/conf.h"

#define GUARD CONF_GUARD_BYTES

static unsigned char pattern(size_t i, unsigned salt)
{
    return (unsigned char)((0xA5u + (unsigned)i * 0x3Bu + (unsigned)(i >> 8) * 0x11u) ^ salt);
}

/* Byte mask of the view's elements inside its buffer. */
static unsigned char *element_mask(const conf_arg *a)
{
    unsigned char *mask = calloc(a->bytes ? a->bytes : 1, 1);
    if (!mask)
        return NULL;
    size_t es = mla_dtype_size(a->t.dtype);
    conf_iter it;
    int64_t off;
    conf_iter_init(&it, &a->t);
    while (conf_iter_next(&it, &off))
        memset(mask + (size_t)(a->offset + off) * es, 1, es);
    return mask;
}

/* What byte i of an output's full buffer (GUARD + bytes + GUARD) held before the run. */
static unsigned char initial(const conf_arg *a, size_t i, unsigned salt)
{
    if (a->inout && i >= GUARD && i < GUARD + a->bytes)
        return a->host[i - GUARD];
    return pattern(i, salt);
}

/* Checks guards and gaps of an output copied back into full (GUARD + bytes + GUARD). */
static int check_guards(const conf_arg *a, const unsigned char *full, unsigned salt, char *detail,
                        size_t len)
{
    unsigned char *mask = element_mask(a);
    if (!mask) {
        snprintf(detail, len, "out of host memory checking %s", a->name);
        return 0;
    }
    size_t total = a->bytes + 2 * GUARD, changed = 0, first = 0;
    for (size_t i = 0; i < total; ++i) {
        int element = i >= GUARD && i < GUARD + a->bytes && mask[i - GUARD];
        if (!element && full[i] != initial(a, i, salt) && changed++ == 0)
            first = i;
    }
    free(mask);
    if (!changed)
        return 1;
    if (first < GUARD)
        snprintf(detail, len, "%s: %zu guard/gap bytes changed, first %zu bytes before the buffer",
                 a->name, changed, GUARD - first);
    else if (first >= GUARD + a->bytes)
        snprintf(detail, len, "%s: %zu guard/gap bytes changed, first %zu bytes past the buffer end",
                 a->name, changed, first - GUARD - a->bytes);
    else
        snprintf(detail, len, "%s: %zu guard/gap bytes changed, first in a gap at byte %zu of the view's buffer",
                 a->name, changed, first - GUARD);
    return 0;
}

mla_status conf_execute(mla_context *ctx, const conf_suite *s, const conf_case *c,
                        const conf_problem *p, unsigned salt, unsigned char **outs,
                        mla_conformance_failure *kind, char *detail, size_t len)
{
    void *dev[CONF_MAX_ARGS] = {0};
    unsigned char *scratch[CONF_MAX_ARGS] = {0};
    mla_tensor t[CONF_MAX_ARGS];
    mla_status st = MLA_OK;
    int guard_ok = 1;
    *kind = MLA_CONF_FAIL_SETUP;
    for (int i = 0; i < p->nargs; ++i)
        outs[i] = NULL;
    for (int i = 0; i < p->nargs; ++i) {
        const conf_arg *a = &p->arg[i];
        size_t total = a->bytes + 2 * GUARD;
        scratch[i] = malloc(total);
        if (!scratch[i]) {
            snprintf(detail, len, "out of host memory (%zu bytes)", total);
            st = MLA_ERR_OUT_OF_MEMORY;
            goto done;
        }
        if (a->output) {
            for (size_t k = 0; k < total; ++k)
                scratch[i][k] = initial(a, k, salt);
        } else {
            memset(scratch[i], 0xFF, total); /* NaN poison around inputs */
            memcpy(scratch[i] + GUARD, a->host, a->bytes);
        }
        if ((st = mla_malloc(ctx, total, &dev[i])) != MLA_OK ||
            (st = mla_memcpy(ctx, dev[i], scratch[i], total, MLA_COPY_HOST_TO_CONTEXT)) != MLA_OK) {
            snprintf(detail, len, "allocating %s (%zu bytes): %s", a->name, total,
                     mla_status_name(st));
            goto done;
        }
        t[i] = a->t;
        t[i].memory = mla_context_memory(ctx);
        t[i].data = (unsigned char *)dev[i] + GUARD + (size_t)a->offset * mla_dtype_size(a->t.dtype);
    }
    st = s->exec(ctx, c, t);
    /* read the error now: synchronize clears it */
    char param[64], why[256];
    snprintf(param, sizeof param, "%s", mla_context_error_param(ctx));
    snprintf(why, sizeof why, "%s", mla_context_error_detail(ctx));
    mla_status sync = mla_context_synchronize(ctx);
    if (st == MLA_OK && sync != MLA_OK) {
        st = sync;
        snprintf(param, sizeof param, "%s", mla_context_error_param(ctx));
        snprintf(why, sizeof why, "%s", mla_context_error_detail(ctx));
    }
    if (st != MLA_OK) {
        /* a NULL slot: the backend has no kernel for the op yet */
        int no_kernel = st == MLA_ERR_UNSUPPORTED && !strcmp(param, "op");
        *kind = no_kernel ? CONF_NO_KERNEL : MLA_CONF_FAIL_STATUS;
        snprintf(detail, len, "%s returned %s (%s: %s)", s->name, mla_status_name(st), param, why);
        goto done;
    }
    for (int i = 0; i < p->nargs; ++i) {
        const conf_arg *a = &p->arg[i];
        if (!a->output)
            continue;
        if ((st = mla_memcpy(ctx, scratch[i], dev[i], a->bytes + 2 * GUARD,
                             MLA_COPY_CONTEXT_TO_HOST)) != MLA_OK) {
            snprintf(detail, len, "copying %s back: %s", a->name, mla_status_name(st));
            goto done;
        }
        if (guard_ok && !check_guards(a, scratch[i], salt, detail, len))
            guard_ok = 0; /* reported, and the values are still compared */
        outs[i] = malloc(a->bytes ? a->bytes : 1);
        if (!outs[i]) {
            st = MLA_ERR_OUT_OF_MEMORY;
            snprintf(detail, len, "out of host memory");
            goto done;
        }
        memcpy(outs[i], scratch[i] + GUARD, a->bytes);
    }
    *kind = guard_ok ? MLA_CONF_FAIL_COUNT : MLA_CONF_FAIL_GUARD;
done:
    for (int i = 0; i < p->nargs; ++i) {
        if (dev[i])
            mla_free(ctx, dev[i]);
        free(scratch[i]);
        if (st != MLA_OK) {
            free(outs[i]);
            outs[i] = NULL;
        }
    }
    return st;
}
