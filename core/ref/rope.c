/* Reference RoPE (MLA.md section 3), bit-defined. For token t, head h and pair
 * i < R/2, with c = cos[pos[t], i] and s = sin[pos[t], i] (fp32):
 *
 *     interleaved: (a, b) = (x[2i], x[2i+1]);   NeoX: (a, b) = (x[i], x[i + R/2])
 *     out_a = fl(fl(a * c) - fl(b * s)),   out_b = fl(fl(a * s) + fl(b * c))
 *
 * in fp32, every product rounded on its own (no FMA), then one rounding to
 * y's dtype. Dims R .. D-1 of a row are copied (converted). In place gives
 * the same bits as out of place: a row is read whole before it is written. */
#include <stdlib.h>

#include "core/checked.h"
#include "core/ref/ref_kernels.h"
#include "core/ref/tensor_access.h"

/* One rotation. Each product is its own float variable: C rounds a value
 * assigned to a float to fp32, so no product is fused into the sum even where
 * the compiler could contract (the build passes -ffp-contract=off too). */
static void rope_pair(float a, float b, float c, float s, float *out_a, float *out_b)
{
    const float ac = a * c;
    const float bs = b * s;
    const float as = a * s;
    const float bc = b * c;
    *out_a = ac - bs;
    *out_b = as + bc;
}

void mla_ref_rope_row(const mla_tensor *x, int64_t base, int64_t step, const mla_tensor *cos,
                      const mla_tensor *sin, int64_t pos, mla_rope_style style, int64_t R,
                      float *out)
{
    const int64_t half = R / 2;
    for (int64_t i = 0; i < half; ++i) {
        const int64_t ia = style == MLA_ROPE_NEOX ? i : 2 * i;
        const int64_t ib = style == MLA_ROPE_NEOX ? i + half : 2 * i + 1;
        const float c = mla_ref_load_f32(cos, mla_ref_offset2(cos, pos, i));
        const float s = mla_ref_load_f32(sin, mla_ref_offset2(sin, pos, i));
        const float a = mla_ref_load_f32(x, base + ia * step);
        const float b = mla_ref_load_f32(x, base + ib * step);
        rope_pair(a, b, c, s, &out[ia], &out[ib]);
    }
}

mla_status mla_ref_rope(mla_context *ctx, const mla_rope_args *a)
{
    const mla_tensor *x = &a->x, *y = &a->y;
    const int64_t T = x->shape[0], H = x->shape[1], D = x->shape[2], R = a->rope_dim;
    float *rot;
    MLA_TRY(mla_alloc_array(ctx, (void **)&rot, R, 1, sizeof *rot, "cos"));
    for (int64_t t = 0; t < T; ++t) {
        const int64_t pos = mla_ref_load_index(&a->positions, t * a->positions.stride[0]);
        for (int64_t h = 0; h < H; ++h) {
            const int64_t xb = mla_ref_offset3(x, t, h, 0), yb = mla_ref_offset3(y, t, h, 0);
            mla_ref_rope_row(x, xb, x->stride[2], &a->cos, &a->sin, pos, a->style, R, rot);
            for (int64_t d = 0; d < R; ++d)
                mla_ref_store_f32(y, yb + d * y->stride[2], rot[d], MLA_SATURATE);
            for (int64_t d = R; d < D; ++d)
                mla_ref_store_f32(y, yb + d * y->stride[2],
                                  mla_ref_load_f32(x, xb + d * x->stride[2]), MLA_SATURATE);
        }
    }
    free(rot);
    return MLA_OK;
}
