/* Reading index tensors (positions, slots, block tables) on the host, so
 * that the entry points can refuse out-of-range indices before any write.
 * For device memory this is a synchronous copy of the (small) index data. */
#ifndef MLA_CORE_INDICES_H
#define MLA_CORE_INDICES_H

#include "core/backend.h"

/* t: a validated I32 or I64 tensor of any rank. *out (free() it) holds its
 * elements in row-major order as int64; NULL when t is empty. */
mla_status mla_read_indices(mla_context *ctx, const mla_tensor *t, const char *name, int64_t **out);

/* Every value v of the n indices satisfies lo <= v < hi (values < 0 are
 * allowed as "skip" when skip_negative). Records the first offender. */
mla_status mla_check_index_range(mla_context *ctx, const int64_t *v, int64_t n, int64_t lo,
                                 int64_t hi, int skip_negative, const char *name);

/* The first value (in index order) among the non-negative ones of v that
 * repeats an earlier one; -1 when none does, -2 when out of memory. */
int64_t mla_find_duplicate(const int64_t *v, int64_t n);

/* Cache slots: slots (a validated [T] I32 / I64 tensor) each < capacity
 * (negative: "do not write"), no slot twice (two writers of one slot would
 * race on a GPU). Reads the values (a synchronous copy for device memory),
 * unless a composite's pass trusts them (MLA_TRUST_INDICES). */
mla_status mla_check_slot_values(mla_context *ctx, const mla_tensor *slots, int64_t T,
                                 int64_t capacity, const char *name);

#endif
