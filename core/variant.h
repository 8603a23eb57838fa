/* The tensor half of an mla_variant: what each entry point tells supports()
 * about its tensor arguments (include/mla/mla.h lists their order per op). */
#ifndef MLA_CORE_VARIANT_H
#define MLA_CORE_VARIANT_H

#include "mla/mla.h"

/* The eight leading fields; the rest 0. */
mla_variant mla_variant_of(mla_op op, mla_dtype in_dtype, mla_dtype out_dtype, int32_t layout,
                           int32_t rule, int64_t group, int64_t rows, int64_t cols);

/* Sets v->nargs = n and each tensor's dtype and mla_arg_view; NULL entries
 * are absent optional tensors. n <= MLA_VARIANT_MAX_ARGS. */
void mla_variant_tensors(mla_variant *v, int n, const mla_tensor *const *t);

#endif
