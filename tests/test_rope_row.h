/* The RoPE oracle of the rope-once tests: a row rotated here, independently
 * of every backend, is what a correct path must have written once. */
#ifndef MLA_TEST_ROPE_ROW_H
#define MLA_TEST_ROPE_ROW_H

#include <stdint.h>

#include "mla/mla.h"

/* Interleaved RoPE of one bf16 row of R values by position pos, in fp32 with
 * each product rounded on its own (MLA.md section 3), rounded to bf16; cos and
 * sin are the [positions, R / 2] tables. */
static inline void test_rope_row(const uint16_t *x, int64_t R, const float *cos, const float *sin,
                                 int64_t pos, uint16_t *out)
{
    for (int64_t i = 0; i < R / 2; ++i) {
        const float a = mla_bf16_to_f32(x[2 * i]), b = mla_bf16_to_f32(x[2 * i + 1]);
        const float c = cos[pos * (R / 2) + i], s = sin[pos * (R / 2) + i];
        const float ac = a * c, bs = b * s, as = a * s, bc = b * c;
        out[2 * i] = mla_f32_to_bf16(ac - bs);
        out[2 * i + 1] = mla_f32_to_bf16(as + bc);
    }
}

#endif
