/* The CPU expanded attention's internal interface: cpu/attention_expanded.c
 * (the attention) calls the decompression of cpu/attention_expanded_kv.c,
 * both on the absorbed attention's tile kernels (cpu/attention_internal.h). */
#ifndef MLA_CPU_ATTENTION_EXPANDED_INTERNAL_H
#define MLA_CPU_ATTENTION_EXPANDED_INTERNAL_H

#include "core/attention_expanded.h"
#include "cpu/attention_internal.h"

/* One thread's tiles of the decompression, in bytes, for latent rows of L. */
int64_t mla_cpu_expanded_kv_tile_bytes(int64_t L);

/* [K_nope | V] = c @ kv_b_proj^T into kv->kv from the gathered rows kv->rows
 * (mla_expanded_gather), on the tiles region (tile_bytes per thread) with
 * the kernels k and, where the CPU has it, dk (vdpbf16ps). */
mla_status mla_cpu_expanded_decompress(mla_context *ctx, const mla_attention_expanded_op_args *a,
                                       const mla_expanded_kv *kv, const attn_kernels *k,
                                       const attn_dp *dk, uint8_t *tiles, int64_t tile_bytes);

#endif
