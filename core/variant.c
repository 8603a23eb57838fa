/* The tensor half of an mla_variant (core/variant.h). */
#include "core/variant.h"

mla_variant mla_variant_of(mla_op op, mla_dtype in_dtype, mla_dtype out_dtype, int32_t layout,
                           int32_t rule, int64_t group, int64_t rows, int64_t cols)
{
    mla_variant v = {.op = op,
                     .in_dtype = in_dtype,
                     .out_dtype = out_dtype,
                     .layout = layout,
                     .rule = rule,
                     .group = group,
                     .rows = rows,
                     .cols = cols};
    return v;
}

static mla_arg_view view_of(const mla_tensor *t)
{
    if (mla_tensor_numel(t) == 0 || mla_tensor_is_contiguous(t))
        return MLA_ARG_DENSE;
    const int32_t last = t->ndim - 1;
    return t->shape[last] <= 1 || t->stride[last] == 1 ? MLA_ARG_ROWS : MLA_ARG_STRIDED;
}

void mla_variant_tensors(mla_variant *v, int n, const mla_tensor *const *t)
{
    v->nargs = n;
    for (int i = 0; i < n; ++i) {
        if (!t[i]) {
            v->arg_dtype[i] = MLA_DTYPE_COUNT;
            v->arg_view[i] = MLA_ARG_ABSENT;
            continue;
        }
        v->arg_dtype[i] = t[i]->dtype;
        v->arg_view[i] = (uint8_t)view_of(t[i]);
        /* in place: element 0 is that of an earlier argument (empty tensors never are) */
        for (int j = 0; j < i && t[i]->data && mla_tensor_numel(t[i]) > 0; ++j)
            if (t[j] && t[j]->data == t[i]->data && mla_tensor_numel(t[j]) > 0)
                v->arg_view[i] = MLA_ARG_IN_PLACE;
    }
}
