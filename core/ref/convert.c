/* Reference convert: y = x elementwise over any shape and strides.
 *
 * Every source value (F32, F16, BF16, fp8, e8m0, fp4) is exact in fp32, so a
 * conversion loads the value as fp32 and rounds once, at the target. When one
 * side is FP4X2 the loop runs over that side's bytes: byte j of the last dim
 * holds elements 2j (low nibble) and 2j + 1 (high nibble) of the other side. */
#include "core/ref/ref_kernels.h"
#include "core/ref/tensor_access.h"

/* Offset in t of the index idx whose last component is replaced by `last`. */
static int64_t offset_with_last(const mla_tensor *t, const int64_t *idx, int64_t last)
{
    int32_t l = t->ndim - 1;
    return mla_ref_offset(t, idx) + (last - idx[l]) * t->stride[l];
}

mla_status mla_ref_convert(mla_context *ctx, const mla_convert_args *a)
{
    (void)ctx;
    const mla_tensor *x = &a->x, *y = &a->y;
    int xp = x->dtype == MLA_DTYPE_FP4X2, yp = y->dtype == MLA_DTYPE_FP4X2;
    const int64_t *shape = xp ? x->shape : y->shape; /* pair space if a side is packed */
    int32_t nd = x->ndim, l = nd - 1;
    for (int32_t i = 0; i < nd; ++i)
        if (shape[i] == 0)
            return MLA_OK;
    int64_t idx[MLA_MAX_DIMS] = {0};
    do {
        if (!xp && !yp) {
            float v = mla_ref_load_f32(x, mla_ref_offset(x, idx));
            mla_ref_store_f32(y, mla_ref_offset(y, idx), v, a->mode);
            continue;
        }
        float v[2];
        for (int h = 0; h < 2; ++h)
            v[h] = xp ? mla_ref_load_fp4(x, mla_ref_offset(x, idx), h)
                      : mla_ref_load_f32(x, offset_with_last(x, idx, 2 * idx[l] + h));
        if (yp) {
            mla_ref_store_fp4_pair(y, mla_ref_offset(y, idx), v[0], v[1]);
        } else {
            for (int h = 0; h < 2; ++h)
                mla_ref_store_f32(y, offset_with_last(y, idx, 2 * idx[l] + h), v[h], a->mode);
        }
    } while (mla_ref_next_index(idx, shape, nd));
    return MLA_OK;
}
