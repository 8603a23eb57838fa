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
/* A workspace: 1-D, of a byte-sized dtype, at least bytes, contiguous. */
mla_status mla_check_workspace(mla_context *ctx, const mla_tensor *t, const char *name,
                               int64_t bytes);
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

/* Every output apart from every input and from the other outputs (NULL
 * entries are skipped): the cross-step aliasing of a composite op, which no
 * single step sees. */
mla_status mla_check_apart(mla_context *ctx, const mla_tensor *const *outs,
                           const char *const *onames, int nout, const mla_tensor *const *ins,
                           const char *const *inames, int nin);

/* Clears the context's error; MLA_ERR_NULL_POINTER without a context. */
mla_status mla_begin(mla_context *ctx);

/* -------------------------------------------------------- composite ops
 *
 * An entry point that runs several others (mla_prepare, the indexer
 * prepare, the layer forward) must refuse before its first step writes.
 * mla_run_composite runs steps(ctx, args), which makes every step through
 * the public entry points, twice: a dry pass (ctx->dry_run: each entry point
 * checks everything, reads the index values it checks, and returns at its
 * dispatch, MLA_DISPATCH), then, when every step passed, the real pass with
 * the index values trusted (they were checked and no step writes them: the
 * composite checks its inputs apart from its outputs). Inside another
 * composite's pass it runs once, in that pass. dry_trust: what the dry
 * pass may trust (the composite checked the values itself, or they are
 * produced by an earlier step and are garbage until the real pass). */
#define MLA_TRUST_INDICES 1u   /* index values (positions, slots, lengths, tables) */
#define MLA_TRUST_TOPK 2u      /* top-k indices written by an earlier step */
#define MLA_TRUST_VALIDATED 4u /* the real pass: a dry pass checked every step */
typedef mla_status (*mla_steps_fn)(mla_context *ctx, void *args);
mla_status mla_run_composite(mla_context *ctx, mla_steps_fn steps, void *args, uint32_t dry_trust);

/* Whether the values named by bit (MLA_TRUST_*) need checking in this call. */
static inline int mla_check_values(const mla_context *ctx, uint32_t bit)
{
    return !(ctx->trusted & (bit | MLA_TRUST_VALIDATED));
}

/* An entry point's last step: its backend slot call, skipped in a dry pass. */
#define MLA_DISPATCH(ctx, call) ((ctx)->dry_run ? MLA_OK : (call))

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
