/* Argument validation, done once at the API entry (kernels trust their
 * inputs). Every check records the refused parameter on the context. */
#ifndef MLA_CORE_VALIDATE_H
#define MLA_CORE_VALIDATE_H

#include "core/backend.h"

#define MLA_DT(d) (1u << (unsigned)(d))
#define MLA_DT_FLOAT (MLA_DT(MLA_DTYPE_F32) | MLA_DT(MLA_DTYPE_F16) | MLA_DT(MLA_DTYPE_BF16))
#define MLA_DT_FP8 (MLA_DT(MLA_DTYPE_FP8_E4M3FN) | MLA_DT(MLA_DTYPE_FP8_E4M3FNUZ))
#define MLA_DT_BYTE_SCALE (MLA_DT(MLA_DTYPE_E8M0) | MLA_DT(MLA_DTYPE_U8))

#define MLA_TRY(expr)                                                                             \
    do {                                                                                          \
        mla_status mla_try_status_ = (expr);                                                      \
        if (mla_try_status_ != MLA_OK)                                                            \
            return mla_try_status_;                                                               \
    } while (0)

/* Like mla_fail, with the parameter written as "<name>.<field>". */
mla_status mla_fail_field(mla_context *ctx, mla_status status, const char *name, const char *field,
                          const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 5, 6)))
#endif
    ;

/* A descriptor is well formed: not NULL, known dtype and memory, rank ndim
 * (any rank when ndim < 0), extents and strides >= 0, byte span within
 * int64, data not NULL unless empty, memory usable by the context. */
mla_status mla_check_tensor(mla_context *ctx, const mla_tensor *t, const char *name, int32_t ndim);
/* t->dtype is one of the mask's MLA_DT() bits. */
mla_status mla_check_dtype(mla_context *ctx, const mla_tensor *t, const char *name, unsigned mask);
/* t->shape[dim] == expected. */
mla_status mla_check_extent(mla_context *ctx, const mla_tensor *t, const char *name, int32_t dim,
                            int64_t expected);
/* An output: no two indices share an element (no broadcast, no overlap). */
mla_status mla_check_output(mla_context *ctx, const mla_tensor *t, const char *name);
/* The byte ranges of a and b do not overlap. */
mla_status mla_check_disjoint(mla_context *ctx, const mla_tensor *a, const char *aname,
                              const mla_tensor *b, const char *bname);

/* Bytes from data to one past the last element; -1 on overflow. */
int64_t mla_tensor_span_bytes(const mla_tensor *t);

/* Asks the backend whether it runs v; records the refusing parameter. */
mla_status mla_check_supported(mla_context *ctx, const mla_variant *v);

#endif
