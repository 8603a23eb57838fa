/* Shared between npy.c and npy_header.c. */
#ifndef MLA_CONFORMANCE_NPY_INTERNAL_H
#define MLA_CONFORMANCE_NPY_INTERNAL_H

#include "conformance/npy.h"

void npy_set_err(char *err, size_t errlen, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
/* Parses the dict text (after the length field); fills type, shape, numel, nbytes. */
mla_status npy_parse_dict(const char *text, size_t len, mla_npy *a, char *err, size_t errlen);
/* numel and nbytes from type and shape, with overflow checks. */
mla_status npy_sizes(mla_npy *a, char *err, size_t errlen);

#endif
