/* Checked 64-bit size arithmetic: the one helper set for every size the
 * library derives from an extent, a stride, a count or a parameter (API
 * entry checks, workspace layouts, kernel scratch). No builtin and no
 * signed overflow: each helper tests before it computes, so it is plain C
 * and C++ (hip/ host code includes it too).
 *
 * Two forms:
 * - mla_ck_add / mla_ck_mul / mla_ck_span: *out = the exact result and 1,
 *   or 0 (and *out = 0) when it does not fit in int64;
 * - mla_sz_*: sizes (operands >= 0): the result, or -1 when an operand is
 *   negative or the result exceeds INT64_MAX. -1 propagates through the
 *   chain, so mla_sz_mul(mla_sz_mul(T, H), D) is checked once, at its end. */
#ifndef MLA_CORE_CHECKED_H
#define MLA_CORE_CHECKED_H

#include <stddef.h>
#include <stdint.h>

#include "mla/mla.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Returns expr's status unless it is MLA_OK. */
#define MLA_TRY(expr)                                                                              \
    do {                                                                                           \
        mla_status mla_try_status_ = (expr);                                                       \
        if (mla_try_status_ != MLA_OK)                                                             \
            return mla_try_status_;                                                                \
    } while (0)

static inline int mla_ck_add(int64_t a, int64_t b, int64_t *out)
{
    if ((b > 0 && a > INT64_MAX - b) || (b < 0 && a < INT64_MIN - b)) {
        *out = 0;
        return 0;
    }
    *out = a + b;
    return 1;
}

static inline int mla_ck_mul(int64_t a, int64_t b, int64_t *out)
{
    if (a != 0 && b != 0) {
        /* |a * b| <= INT64_MAX in unsigned magnitudes; INT64_MIN as an operand
         * counts as an overflow (no size is negative) */
        const uint64_t ma = a < 0 ? 0 - (uint64_t)a : (uint64_t)a;
        const uint64_t mb = b < 0 ? 0 - (uint64_t)b : (uint64_t)b;
        if (a == INT64_MIN || b == INT64_MIN || ma > (uint64_t)INT64_MAX / mb) {
            *out = 0;
            return 0;
        }
    }
    *out = a * b;
    return 1;
}

static inline int64_t mla_sz_add(int64_t a, int64_t b)
{
    return a < 0 || b < 0 || a > INT64_MAX - b ? -1 : a + b;
}

static inline int64_t mla_sz_mul(int64_t a, int64_t b)
{
    return a < 0 || b < 0 || (b != 0 && a > INT64_MAX / b) ? -1 : a * b;
}

static inline int64_t mla_sz_mul3(int64_t a, int64_t b, int64_t c)
{
    return mla_sz_mul(mla_sz_mul(a, b), c);
}

static inline int64_t mla_sz_mul4(int64_t a, int64_t b, int64_t c, int64_t d)
{
    return mla_sz_mul(mla_sz_mul3(a, b, c), d);
}

/* A size of the mla_sz_ form saturated: INT64_MAX for -1 (a work estimate
 * where "more than int64" means "large"). */
static inline int64_t mla_sz_sat(int64_t v) { return v < 0 ? INT64_MAX : v; }

/* The exclusive bound of the values <= max: max + 1, or INT64_MAX when max
 * is INT64_MAX or -1 (a capacity past int64 bounds no int64 value). */
static inline int64_t mla_sz_past(int64_t max)
{
    return max < 0 || max == INT64_MAX ? INT64_MAX : max + 1;
}

/* ceil(a / m) for a >= 0, m >= 1, without forming a + m - 1. */
static inline int64_t mla_sz_ceil_div(int64_t a, int64_t m)
{
    return a < 0 || m < 1 ? -1 : a / m + (a % m != 0);
}

/* a rounded up to a multiple of m >= 1. */
static inline int64_t mla_sz_round_up(int64_t a, int64_t m)
{
    return mla_sz_mul(mla_sz_ceil_div(a, m), m);
}

/* Bytes from t->data to one past its last element (0 when empty): 1, or 0
 * when that does not fit in int64. Extents and strides must be >= 0. */
static inline int mla_ck_span(const mla_tensor *t, int64_t *out)
{
    int64_t last = 0; /* offset of the last element, in elements */
    for (int32_t i = 0; i < t->ndim; ++i) {
        if (t->shape[i] == 0) {
            *out = 0;
            return 1;
        }
    }
    *out = 0;
    for (int32_t i = 0; i < t->ndim; ++i) {
        int64_t step;
        if (!mla_ck_mul(t->stride[i], t->shape[i] - 1, &step) || !mla_ck_add(last, step, &last))
            return 0;
    }
    return mla_ck_add(last, 1, &last) && mla_ck_mul(last, (int64_t)mla_dtype_size(t->dtype), out);
}

/* n * m elements of es bytes as a size_t allocation size (at least 1 byte,
 * so that malloc's answer for 0 is never mistaken for a failure): 1, or 0
 * (*out = 0) when an operand is negative or the product exceeds PTRDIFF_MAX. */
static inline int mla_ck_bytes(int64_t n, int64_t m, size_t es, size_t *out)
{
    const int64_t b = mla_sz_mul3(n, m, (int64_t)es);
    *out = 0;
    if (b < 0 || (uint64_t)b > (uint64_t)PTRDIFF_MAX)
        return 0;
    *out = b > 0 ? (size_t)b : 1;
    return 1;
}

/* malloc of n * m elements of es bytes. MLA_ERR_OVERFLOW when the bytes do
 * not fit, MLA_ERR_OUT_OF_MEMORY when malloc fails; either is recorded on
 * ctx naming param, and *out is NULL. free() the result. */
mla_status mla_alloc_array(mla_context *ctx, void **out, int64_t n, int64_t m, size_t es,
                           const char *param);

#ifdef __cplusplus
}
#endif

#endif
