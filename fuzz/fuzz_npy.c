/* libFuzzer: the .npy reader of the conformance layer (conformance/npy.c)
 * on any bytes. A parse either fails with a status (and a zeroed result) or
 * yields a header whose sizes agree with the data it copied. */
#include <stdlib.h>
#include <string.h>

#include "conformance/npy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    mla_npy a;
    char err[200];
    const mla_status st = mla_npy_parse(data, size, &a, err, sizeof err);
    if (st != MLA_OK) {
        const mla_npy zero = {0};
        if (memcmp(&a, &zero, sizeof a) != 0)
            __builtin_trap(); /* a refusal leaves *out zeroed */
        return 0;
    }
    int64_t numel = 1;
    for (int32_t d = 0; d < a.ndim; ++d)
        numel *= a.shape[d];
    if (a.ndim < 0 || a.ndim > MLA_NPY_MAX_DIMS || numel != a.numel ||
        a.nbytes != (size_t)a.numel * mla_npy_type_size(a.type) || a.nbytes > size ||
        (a.nbytes && !a.data))
        __builtin_trap();
    volatile uint8_t sink = 0; /* every byte it claims is readable (ASan) */
    for (size_t k = 0; k < a.nbytes; ++k)
        sink ^= ((const uint8_t *)a.data)[k];
    (void)sink;
    mla_npy_free(&a);
    return 0;
}
