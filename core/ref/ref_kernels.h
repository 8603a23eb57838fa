/* Reference kernels of the number-format ops. They take validated argument
 * records (core/backend.h) and never fail; the CPU backend starts from the
 * reference table and may call them directly for variants it does not
 * specialise. Semantics: mla.h and spec section 5. */
#ifndef MLA_CORE_REF_REF_KERNELS_H
#define MLA_CORE_REF_REF_KERNELS_H

#include "core/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

mla_status mla_ref_convert(mla_context *ctx, const mla_convert_args *a);
mla_status mla_ref_mxfp4_quant(mla_context *ctx, const mla_mxfp4_quant_args *a);
mla_status mla_ref_mxfp4_dequant(mla_context *ctx, const mla_mxfp4_dequant_args *a);
mla_status mla_ref_fp8_group_quant(mla_context *ctx, const mla_fp8_group_quant_args *a);
mla_status mla_ref_fp8_group_dequant(mla_context *ctx, const mla_fp8_group_dequant_args *a);

#ifdef __cplusplus
}
#endif

#endif
