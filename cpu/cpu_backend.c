/* The CPU backend: the reference table with its op slots replaced by
 * OpenMP-parallel, vectorized kernels (one file per op), host memory. */
#include <stdatomic.h>
#include <stdio.h>

#include "core/ref/ref_kernels.h"
#include "cpu/cpu_kernels.h"

const char *mla_cpu_isa_name(mla_cpu_isa isa)
{
    switch (isa) {
    case MLA_CPU_ISA_AVX512:
        return "AVX-512";
    case MLA_CPU_ISA_AVX2:
        return "AVX2";
    default:
        return "portable C";
    }
}

/* The best kernel copy this CPU can run. */
static mla_cpu_isa detect_isa(void)
{
#if MLA_CPU_X86
    const unsigned f = mla_cpu_features();
    if (f & MLA_CPU_HAS_AVX512)
        return MLA_CPU_ISA_AVX512;
    if (f & MLA_CPU_HAS_AVX2)
        return MLA_CPU_ISA_AVX2;
#endif
    return MLA_CPU_ISA_GENERIC;
}

/* tuning.cpu_isa generic or avx2 lowers the level (never raises it). */
mla_cpu_isa mla_cpu_isa_of(const mla_context *ctx)
{
    const mla_cpu_isa isa = detect_isa();
    const mla_cpu_isa cap = ctx->tuning.cpu_isa == MLA_TUNE_CPU_ISA_GENERIC ? MLA_CPU_ISA_GENERIC
                            : ctx->tuning.cpu_isa == MLA_TUNE_CPU_ISA_AVX2  ? MLA_CPU_ISA_AVX2
                                                                            : MLA_CPU_ISA_AVX512;
    return isa < cap ? isa : cap;
}

int mla_cpu_threads(const mla_context *ctx, int64_t tasks, int64_t values)
{
    int64_t nt = ctx->num_threads;
    int64_t by_size = values / 32768 + 1;
    if (nt > tasks)
        nt = tasks;
    if (nt > by_size)
        nt = by_size;
    return nt < 1 ? 1 : (int)nt;
}

/* The device name says which kernel copies the tuning leaves. */
static void name_device(mla_context *ctx)
{
    snprintf(ctx->device_name, sizeof ctx->device_name, "host CPU, %d thread%s, %s",
             ctx->num_threads, ctx->num_threads == 1 ? "" : "s",
             mla_cpu_isa_name(mla_cpu_isa_of(ctx)));
}

static mla_status cpu_init(mla_context *ctx, const mla_context_options *opt, char *reason,
                           size_t reason_len)
{
    mla_status st = mla_host_init(ctx, opt, reason, reason_len);
    if (st != MLA_OK)
        return st;
    name_device(ctx);
    return MLA_OK;
}

/* The table is built once, on first use, from the reference table, so a slot
 * added there is inherited, and so is supports(): every op runs here for
 * every variant the API accepts (any dtype and view of each tensor argument,
 * at every ISA level), as on the reference. The first caller builds it;
 * concurrent first callers wait for it: contexts may be created from several
 * threads. */
const mla_backend_ops *mla_cpu_ops(void)
{
    static mla_backend_ops ops;
    static atomic_int state; /* 0 empty, 1 being built, 2 ready */
    if (atomic_load_explicit(&state, memory_order_acquire) == 2)
        return &ops;
    int expected = 0;
    if (atomic_compare_exchange_strong(&state, &expected, 1)) {
        ops = mla_reference_ops;
        ops.name = "cpu";
        ops.backend = MLA_BACKEND_CPU;
        ops.target = MLA_TARGET_CPU;
        ops.auto_order = 1;
        ops.init = cpu_init;
        ops.attention_scratch = mla_cpu_attention_scratch;
        ops.tuning_changed = name_device;
        ops.convert = mla_cpu_convert;
        ops.mxfp4_quant = mla_cpu_mxfp4_quant;
        ops.mxfp4_dequant = mla_cpu_mxfp4_dequant;
        ops.fp8_group_quant = mla_cpu_fp8_group_quant;
        ops.fp8_group_dequant = mla_cpu_fp8_group_dequant;
        ops.rmsnorm = mla_cpu_rmsnorm;
        ops.qk_rmsnorm = mla_cpu_qk_rmsnorm;
        ops.rope = mla_cpu_rope;
        ops.linear = mla_cpu_linear;
        ops.batched_gemm = mla_cpu_batched_gemm;
        ops.cache_write = mla_cpu_cache_write;
        ops.cache_gather = mla_cpu_cache_gather;
        ops.rope_cache = mla_cpu_rope_cache;
        ops.gemm_a16wfp4 = mla_cpu_gemm_a16wfp4;
        ops.gemm_a4w4 = mla_cpu_gemm_a4w4;
        ops.flatten_mxfp4_quant = mla_cpu_flatten_mxfp4_quant;
        ops.flatten_fp8_quant = mla_cpu_flatten_fp8_quant;
        ops.layernorm = mla_cpu_layernorm;
        ops.hadamard = mla_cpu_hadamard;
        ops.indexer_k_cache_write = mla_cpu_indexer_k_cache_write;
        ops.indexer_k_gather = mla_cpu_indexer_k_gather;
        ops.indexer_logits = mla_cpu_indexer_logits;
        ops.topk = mla_cpu_topk;
        ops.indexer_head_weights = mla_cpu_indexer_head_weights;
        ops.attention = mla_cpu_attention;
        ops.attention_expanded = mla_cpu_attention_expanded;
        atomic_store_explicit(&state, 2, memory_order_release);
    }
    while (atomic_load_explicit(&state, memory_order_acquire) != 2)
        ; /* another thread is copying a few pointers */
    return &ops;
}
