/* The reference backend: host memory, scalar kernels that follow MLA.md's
 * formulas one value at a time. It runs every variant the API accepts. */
#include "core/backend.h"
#include "core/ref/ref_kernels.h"

/* The reference refuses nothing that passed validation: every dtype and
 * view of every tensor argument, every layout, rule and size of mla_variant
 * (tests/test_coverage.c then asks for a conformance case of each pair). */
static const char *ref_supports(const mla_context *ctx, const mla_variant *v)
{
    (void)ctx;
    (void)v;
    return NULL;
}

const mla_backend_ops mla_reference_ops = {
    .name = "reference",
    .backend = MLA_BACKEND_REFERENCE,
    .memory = MLA_MEMORY_HOST,
    .target = MLA_TARGET_REFERENCE,
    .auto_order = 0, /* the oracle, asked for by name only */
    .init = mla_host_init,
    .fini = mla_host_fini,
    .mem_alloc = mla_host_alloc,
    .mem_free = mla_host_free,
    .mem_copy = mla_host_copy,
    .mem_set = mla_host_set,
    .synchronize = mla_host_synchronize,
    .supports = ref_supports,
    .convert = mla_ref_convert,
    .mxfp4_quant = mla_ref_mxfp4_quant,
    .mxfp4_dequant = mla_ref_mxfp4_dequant,
    .fp8_group_quant = mla_ref_fp8_group_quant,
    .fp8_group_dequant = mla_ref_fp8_group_dequant,
    .rmsnorm = mla_ref_rmsnorm,
    .qk_rmsnorm = mla_ref_qk_rmsnorm,
    .rope = mla_ref_rope,
    .linear = mla_ref_linear,
    .batched_gemm = mla_ref_batched_gemm,
    .cache_write = mla_ref_cache_write,
    .cache_gather = mla_ref_cache_gather,
    .rope_cache = mla_ref_rope_cache,
    .gemm_a16wfp4 = mla_ref_gemm_a16wfp4,
    .gemm_a4w4 = mla_ref_gemm_a4w4,
    .flatten_mxfp4_quant = mla_ref_flatten_mxfp4_quant,
    .flatten_fp8_quant = mla_ref_flatten_fp8_quant,
    .layernorm = mla_ref_layernorm,
    .hadamard = mla_ref_hadamard,
    .indexer_k_cache_write = mla_ref_indexer_k_cache_write,
    .indexer_k_gather = mla_ref_indexer_k_gather,
    .indexer_logits = mla_ref_indexer_logits,
    .topk = mla_ref_topk,
    .indexer_head_weights = mla_ref_indexer_head_weights,
    .attention = mla_ref_attention,
    .attention_expanded = mla_ref_attention_expanded,
};

const mla_backend_ops *mla_reference_backend(void);
const mla_backend_ops *mla_reference_backend(void) { return &mla_reference_ops; }
