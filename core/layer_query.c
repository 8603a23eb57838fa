/* What a layer plan can tell its caller after a forward (include/mla/mla_layer.h). */
#include "core/layer_internal.h"
#include "core/validate.h"

mla_status mla_layer_plan_topk(const mla_layer_plan *lp, mla_tensor *out)
{
    if (!lp || !out)
        return MLA_ERR_NULL_POINTER;
    if (!mla_layer_plan_sparse(lp))
        return MLA_ERR_INVALID_ARGUMENT;
    const int64_t shape[2] = {lp->T, mla_plan_config(lp->plan)->index_topk};
    return mla_tensor_init(out, (uint8_t *)lp->workspace.data + lp->ws.topk, MLA_DTYPE_I32,
                           lp->workspace.memory, 2, shape);
}
