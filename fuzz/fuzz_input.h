/* Reading a libFuzzer input as a stream of choices (the fuzz targets in fuzz/).
 * Past the end every read gives 0, so any input is a complete program. */
#ifndef MLA_FUZZ_FUZZ_INPUT_H
#define MLA_FUZZ_FUZZ_INPUT_H

#include <stddef.h>
#include <stdint.h>

typedef struct fz_input {
    const uint8_t *p;
    size_t n;
} fz_input;

static inline uint64_t fz_bytes(fz_input *in, int bytes)
{
    uint64_t v = 0;
    for (int k = 0; k < bytes; ++k) {
        v = v << 8 | (in->n ? *in->p : 0);
        if (in->n)
            ++in->p, --in->n;
    }
    return v;
}

static inline uint32_t fz_below(fz_input *in, uint32_t n)
{
    return n ? (uint32_t)(fz_bytes(in, 1) % n) : 0;
}

/* An extent or count: mostly small, sometimes one of the values that broke
 * size arithmetic (2^61 + 1, 2^62, INT64_MAX - 5, ...), sometimes negative. */
static inline int64_t fz_extent(fz_input *in)
{
    static const int64_t huge[] = {(1ll << 61) + 1, 1ll << 62, INT64_MAX - 5, INT64_MAX,
                                   (1ll << 31) + 7, (1ll << 32),  INT64_MAX / 2 + 1, -1};
    const uint32_t kind = fz_below(in, 16);
    if (kind < 10)
        return fz_below(in, 9);
    if (kind < 13)
        return fz_below(in, 200);
    if (kind < 15)
        return huge[fz_below(in, 8)];
    return -(int64_t)fz_below(in, 3) - 1;
}

static inline float fz_float(fz_input *in)
{
    static const float v[] = {0.0f, 1e-6f, 1.0f, -1.0f, 0.5f, 448.0f, 1e30f, 1e-30f};
    const uint32_t k = fz_below(in, 10);
    if (k < 8)
        return v[k];
    return k == 8 ? __builtin_nanf("") : __builtin_inff();
}

#endif
