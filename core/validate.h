/* Argument validation, done once at the API entry (kernels trust their
 * inputs). Every check records the refused parameter on the context. */
#ifndef MLA_CORE_VALIDATE_H
#define MLA_CORE_VALIDATE_H

#include "core/backend.h"
#include "core/checked.h"

#define MLA_DT(d) (1u << (unsigned)(d))
#define MLA_DT_FLOAT (MLA_DT(MLA_DTYPE_F32) | MLA_DT(MLA_DTYPE_F16) | MLA_DT(MLA_DTYPE_BF16))
#define MLA_DT_FP8 (MLA_DT(MLA_DTYPE_FP8_E4M3FN) | MLA_DT(MLA_DTYPE_FP8_E4M3FNUZ))
#define MLA_DT_BYTE_SCALE (MLA_DT(MLA_DTYPE_E8M0) | MLA_DT(MLA_DTYPE_U8))

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
/* A plan argument: present (has) and made on this context (owner). */
mla_status mla_check_plan_of(mla_context *ctx, int has, const mla_context *owner);
/* The byte ranges of a and b do not overlap. */
mla_status mla_check_disjoint(mla_context *ctx, const mla_tensor *a, const char *aname,
                              const mla_tensor *b, const char *bname);

/* An elementwise output may be its input (the same elements, same width:
 * in place); any other overlap is refused. */
mla_status mla_check_inplace_or_disjoint(mla_context *ctx, const mla_tensor *out,
                                         const char *oname, const mla_tensor *in,
                                         const char *iname);

/* Clears the context's error; MLA_ERR_NULL_POINTER without a context. */
mla_status mla_begin(mla_context *ctx);

/* The slot of an op, or MLA_ERR_UNSUPPORTED when the table has none. */
#define MLA_SLOT(ctx, slot)                                                                       \
    do {                                                                                          \
        if (!(ctx)->ops->slot)                                                                    \
            return mla_fail((ctx), MLA_ERR_UNSUPPORTED, "op", "the %s backend has no %s",         \
                            (ctx)->ops->name, #slot);                                             \
    } while (0)

/* Bytes from data to one past the last element; -1 on overflow. */
int64_t mla_tensor_span_bytes(const mla_tensor *t);

/* Asks the backend whether it runs v; records the refusing parameter. */
mla_status mla_check_supported(mla_context *ctx, const mla_variant *v);

/* Prepare-path checks shared by several entry points (core/api_norm_rope.c). */
mla_status mla_check_rope_table(mla_context *ctx, const mla_tensor *cos, const mla_tensor *sin);
/* pos: [T] I32/I64 with every value in [0, table_rows). */
mla_status mla_check_positions(mla_context *ctx, const mla_tensor *pos, const char *name,
                               int64_t T, int64_t table_rows);

/* A descriptor over existing memory (a view: no data moves). */
mla_tensor mla_view(void *data, mla_dtype dtype, mla_memory mem, int32_t ndim,
                    const int64_t *shape, const int64_t *stride);
/* A 2-D [T, D] tensor seen as [T, 1, D]; 3-D tensors unchanged. */
mla_tensor mla_as_3d(const mla_tensor *t);

#endif
