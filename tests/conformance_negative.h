/* Shared by the files of test_conformance_negative: the driver (in
 * test_conformance_negative.c), the wrong prepare-path kernels that must be
 * caught (conformance_negative_prepare.c) and the correct fp32 ones whose
 * legitimate rounding differences must pass (conformance_positive_prepare.c). */
#ifndef MLA_TESTS_CONFORMANCE_NEGATIVE_H
#define MLA_TESTS_CONFORMANCE_NEGATIVE_H

#include <stdlib.h>
#include <string.h>

#include "conformance/conf.h"
#include "core/backend.h"

/* The table the wrong slot was copied from; wrong kernels delegate to it. */
extern const mla_backend_ops *neg_base;
/* The one case of each selected op neg_run runs (-1, the default: all). */
extern int64_t neg_case;

/* Runs the conformance of op_pattern on ops (0: nothing failed). */
int neg_run(const mla_backend_ops *ops, const char *label, const char *op_pattern,
            mla_conformance_summary *sum);
/* Counts and prints one expectation. */
void neg_expect(int ok, const char *what, const mla_conformance_summary *s);
/* One wrong slot in t (copied from `from`) must fail, caught by `kind`. */
void neg_negative(const mla_backend_ops *from, mla_backend_ops *t, const char *label,
                  const char *op, mla_conformance_failure kind);
/* A correct but differently rounded slot in t must pass. */
void neg_positive(const mla_backend_ops *from, mla_backend_ops *t, const char *label,
                  const char *op);

/* The prepare-path controls (one file each). */
void neg_prepare_controls(const mla_backend_ops *from);
void neg_positive_controls(const mla_backend_ops *from);
/* The MXFP4 GEMM path's controls and direct checks (conformance_negative_mxfp4.c). */
void neg_mxfp4_controls(const mla_backend_ops *from);
/* The DSA indexer's controls (conformance_negative_indexer.c). */
void neg_indexer_controls(const mla_backend_ops *from);
/* The attention core's controls (conformance_negative_attention.c). */
void neg_attention_controls(const mla_backend_ops *from);
/* The expanded attention's controls, each on one case
 * (conformance_negative_attention_expanded.c). */
void neg_attention_expanded_controls(const mla_backend_ops *from);

/* ---- element access for the test kernels (host tables: ref and cpu) ---- */

static inline unsigned char *neg_at(const mla_tensor *t, int64_t off)
{
    return (unsigned char *)t->data + off * (int64_t)mla_dtype_size(t->dtype);
}

/* The float-like value (F32, BF16, F16, fp8) of dtype dt at p. */
static inline float neg_load_bytes(const unsigned char *p, mla_dtype dt)
{
    float f;
    uint16_t h;
    switch (dt) {
    case MLA_DTYPE_F32:
        memcpy(&f, p, 4);
        return f;
    case MLA_DTYPE_BF16:
        memcpy(&h, p, 2);
        return mla_bf16_to_f32(h);
    case MLA_DTYPE_F16:
        memcpy(&h, p, 2);
        return mla_f16_to_f32(h);
    default:
        return mla_fp8_to_f32(*p, dt);
    }
}

/* Float-like element off as float. */
static inline float neg_load(const mla_tensor *t, int64_t off)
{
    return neg_load_bytes(neg_at(t, off), t->dtype);
}

/* v rounded once to t's dtype (F32, BF16, F16) at element off. */
static inline void neg_store(const mla_tensor *t, int64_t off, float v)
{
    unsigned char *p = neg_at(t, off);
    uint16_t h;
    if (t->dtype == MLA_DTYPE_F32) {
        memcpy(p, &v, 4);
        return;
    }
    h = t->dtype == MLA_DTYPE_BF16 ? mla_f32_to_bf16(v) : mla_f32_to_f16(v);
    memcpy(p, &h, 2);
}

static inline int64_t neg_index(const mla_tensor *t, int64_t i)
{
    const unsigned char *p = neg_at(t, i * t->stride[0]);
    if (t->dtype == MLA_DTYPE_I32) {
        int32_t v;
        memcpy(&v, p, 4);
        return v;
    }
    int64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* A contiguous host tensor; data from malloc (the caller frees it). */
static inline mla_tensor neg_alloc(mla_dtype dt, int32_t ndim, const int64_t *shape)
{
    mla_tensor t;
    int64_t n = 1;
    for (int32_t d = 0; d < ndim; ++d)
        n *= shape[d];
    mla_tensor_init(&t, malloc((size_t)(n > 0 ? n : 1) * mla_dtype_size(dt)), dt,
                    MLA_MEMORY_HOST, ndim, shape);
    return t;
}

#endif
