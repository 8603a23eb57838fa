/* The small layer configs the safetensors fuzzer loads and its seeds were
 * generated for (fuzz/fuzz_safetensors.c, fuzz/make_seeds.c). */
#ifndef MLA_FUZZ_FUZZ_CONFIG_H
#define MLA_FUZZ_FUZZ_CONFIG_H

#include <string.h>

#include "mla/mla.h"

/* k = 0: with q_lora; 1: without (V2-Lite's q_proj); 2: with a V3.2 indexer. */
static inline mla_model_config fz_layer_config(int k)
{
    mla_model_config c;
    mla_model_config_preset(k == 2 ? "test-tiny-indexer" : "test-tiny", &c);
    snprintf(c.name, sizeof c.name, "fuzz-%d", k);
    c.hidden = 32, c.heads = 1, c.q_lora = k == 1 ? 0 : 32, c.kv_lora = 32;
    c.nope = 16, c.rope = 16, c.v = 16, c.rope_cfg.dim = 16;
    if (k == 2)
        c.index_heads = 1, c.index_head_dim = 128, c.index_topk = 16;
    return c;
}

#endif
