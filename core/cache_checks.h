/* Internal: the latent cache checks of core/api_cache.c, shared with the
 * attention entry points (core/api_attention.c), which validate the same
 * cache tensor and, with RoPE inside attention, the same key rows and slots. */
#ifndef MLA_CORE_CACHE_CHECKS_H
#define MLA_CORE_CACHE_CHECKS_H

#include "core/backend.h"

/* desc is valid and cache is U8 [num_blocks, block_bytes] with contiguous
 * block bytes; *block_bytes receives the size of one block. */
mla_status mla_check_cache(mla_context *ctx, const mla_cache_desc *desc, const mla_tensor *cache,
                           int64_t *block_bytes);
/* k_nope [T, L] and k_pe [T, R] of a float dtype, for desc's L and R. */
mla_status mla_check_cache_k(mla_context *ctx, const mla_cache_desc *desc, const mla_tensor *k_nope,
                             const mla_tensor *k_pe);
/* slots [T] I32 / I64: each < num_blocks * block_size (negative: skipped),
 * no slot twice. Reads the values (a synchronous copy for device memory). */
mla_status mla_check_cache_slots(mla_context *ctx, const mla_cache_desc *desc,
                                 const mla_tensor *slots, int64_t T);

#endif
