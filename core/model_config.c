/* Model configurations (MLA.md section 1) and the softmax scale (section 2).
 * Each preset is kept twice: as the struct, and as the fields of its
 * config.json (the published file's values for the real models), so that
 * tests/test_hf_config.c holds the one against the other through the
 * config.json parser (core/hf_config.c). */
#include <math.h>
#include <string.h>

#include "mla/mla.h"

/* YaRN's attention-magnitude factor m(s, k) = 0.1 * k * ln(s) + 1, 1 without scaling. */
static double yarn_m(double factor, double k)
{
    return factor <= 1.0 ? 1.0 : 0.1 * k * log(factor) + 1.0;
}

static const mla_model_config presets[] = {
    /* name, hidden, H, q_lora, L, nope, R, v, eps, max_pos,
     * rope {R, base, factor, beta_fast, beta_slow, orig, mscale, mscale_all_dim},
     * indexer heads, head dim, top-k */
    {"DeepSeek-V2-Lite", 2048, 16, 0, 512, 128, 64, 128, 1e-6f, 163840,
     {64, 10000.0, 40.0, 32.0, 1.0, 4096, 0.707, 0.707}, 0, 0, 0},
    {"DeepSeek-V3", 7168, 128, 1536, 512, 128, 64, 128, 1e-6f, 163840,
     {64, 10000.0, 40.0, 32.0, 1.0, 4096, 1.0, 1.0}, 0, 0, 0},
    {"DeepSeek-V3.2", 7168, 128, 1536, 512, 128, 64, 128, 1e-6f, 163840,
     {64, 10000.0, 40.0, 32.0, 1.0, 4096, 1.0, 1.0}, 64, 128, 2048},
    {"Kimi-K2", 7168, 64, 1536, 512, 128, 64, 128, 1e-6f, 131072,
     {64, 50000.0, 32.0, 1.0, 1.0, 4096, 1.0, 1.0}, 0, 0, 0},
    /* Small configs of the same structure for tests; YaRN on, so that the
     * ramp and mscale paths are exercised. */
    {"test-tiny", 256, 4, 96, 128, 32, 16, 32, 1e-6f, 4096,
     {16, 10000.0, 4.0, 32.0, 1.0, 512, 1.0, 1.0}, 0, 0, 0},
    {"test-tiny-noq", 256, 4, 0, 128, 32, 16, 32, 1e-6f, 4096,
     {16, 10000.0, 4.0, 32.0, 1.0, 512, 0.707, 0.707}, 0, 0, 0},
    {"test-tiny-indexer", 256, 4, 96, 128, 32, 16, 32, 1e-6f, 4096,
     {16, 10000.0, 4.0, 32.0, 1.0, 512, 1.0, 1.0}, 8, 128, 64},
};

enum { PRESET_COUNT = sizeof presets / sizeof presets[0] };

/* The attention fields of each preset's config.json, in the presets' order.
 * deepseek-ai/DeepSeek-V2-Lite, DeepSeek-V3, DeepSeek-V3.2-Exp and
 * moonshotai/Kimi-K2-Instruct as published (num_hidden_layers included;
 * the MoE fields are left out: the attention does not read them). */
#define YARN(beta_fast, factor, mscale, omax)                                                     \
    "\"rope_scaling\": {\"beta_fast\": " #beta_fast ", \"beta_slow\": 1, \"factor\": " #factor \
    ", \"mscale\": " #mscale ", \"mscale_all_dim\": " #mscale                                   \
    ", \"original_max_position_embeddings\": " #omax ", \"type\": \"yarn\"}"
#define FP8_QUANT                                                                                 \
    ", \"quantization_config\": {\"activation_scheme\": \"dynamic\", \"fmt\": \"e4m3\", "         \
    "\"quant_method\": \"fp8\", \"weight_block_size\": [128, 128]}"
static const char *const preset_json[PRESET_COUNT] = {
    "{\"architectures\": [\"DeepseekV2ForCausalLM\"], \"model_type\": \"deepseek_v2\", "
    "\"hidden_size\": 2048, \"num_attention_heads\": 16, \"num_key_value_heads\": 16, "
    "\"num_hidden_layers\": 27, \"q_lora_rank\": null, \"kv_lora_rank\": 512, "
    "\"qk_nope_head_dim\": 128, \"qk_rope_head_dim\": 64, \"v_head_dim\": 128, "
    "\"max_position_embeddings\": 163840, \"rms_norm_eps\": 1e-06, \"rope_theta\": 10000, " YARN(
        32, 40, 0.707, 4096) "}",
    "{\"architectures\": [\"DeepseekV3ForCausalLM\"], \"model_type\": \"deepseek_v3\", "
    "\"hidden_size\": 7168, \"num_attention_heads\": 128, \"num_key_value_heads\": 128, "
    "\"num_hidden_layers\": 61, \"num_nextn_predict_layers\": 1, \"q_lora_rank\": 1536, "
    "\"kv_lora_rank\": 512, \"qk_nope_head_dim\": 128, \"qk_rope_head_dim\": 64, "
    "\"v_head_dim\": 128, \"max_position_embeddings\": 163840, \"rms_norm_eps\": 1e-06, "
    "\"rope_theta\": 10000, " YARN(32, 40, 1.0, 4096) FP8_QUANT "}",
    "{\"architectures\": [\"DeepseekV32ForCausalLM\"], \"model_type\": \"deepseek_v32\", "
    "\"hidden_size\": 7168, \"num_attention_heads\": 128, \"num_key_value_heads\": 128, "
    "\"num_hidden_layers\": 61, \"q_lora_rank\": 1536, \"kv_lora_rank\": 512, "
    "\"qk_nope_head_dim\": 128, \"qk_rope_head_dim\": 64, \"v_head_dim\": 128, "
    "\"index_head_dim\": 128, \"index_n_heads\": 64, \"index_topk\": 2048, "
    "\"max_position_embeddings\": 163840, \"rms_norm_eps\": 1e-06, \"rope_theta\": 10000, " YARN(
        32, 40, 1.0, 4096) FP8_QUANT "}",
    "{\"architectures\": [\"DeepseekV3ForCausalLM\"], \"model_type\": \"kimi_k2\", "
    "\"hidden_size\": 7168, \"num_attention_heads\": 64, \"num_key_value_heads\": 64, "
    "\"num_hidden_layers\": 61, \"q_lora_rank\": 1536, \"kv_lora_rank\": 512, "
    "\"qk_nope_head_dim\": 128, \"qk_rope_head_dim\": 64, \"v_head_dim\": 128, "
    "\"max_position_embeddings\": 131072, \"rms_norm_eps\": 1e-06, \"rope_theta\": 50000.0, " YARN(
        1.0, 32.0, 1.0, 4096) FP8_QUANT "}",
    "{\"model_type\": \"deepseek_v3\", \"hidden_size\": 256, \"num_attention_heads\": 4, "
    "\"num_hidden_layers\": 2, \"q_lora_rank\": 96, \"kv_lora_rank\": 128, "
    "\"qk_nope_head_dim\": 32, \"qk_rope_head_dim\": 16, \"v_head_dim\": 32, "
    "\"max_position_embeddings\": 4096, \"rms_norm_eps\": 1e-06, \"rope_theta\": 10000, " YARN(
        32, 4.0, 1.0, 512) "}",
    "{\"model_type\": \"deepseek_v2\", \"hidden_size\": 256, \"num_attention_heads\": 4, "
    "\"num_hidden_layers\": 2, \"q_lora_rank\": null, \"kv_lora_rank\": 128, "
    "\"qk_nope_head_dim\": 32, \"qk_rope_head_dim\": 16, \"v_head_dim\": 32, "
    "\"max_position_embeddings\": 4096, \"rms_norm_eps\": 1e-06, \"rope_theta\": 10000, " YARN(
        32, 4.0, 0.707, 512) "}",
    "{\"model_type\": \"deepseek_v32\", \"hidden_size\": 256, \"num_attention_heads\": 4, "
    "\"num_hidden_layers\": 2, \"q_lora_rank\": 96, \"kv_lora_rank\": 128, "
    "\"qk_nope_head_dim\": 32, \"qk_rope_head_dim\": 16, \"v_head_dim\": 32, "
    "\"index_head_dim\": 128, \"index_n_heads\": 8, \"index_topk\": 64, "
    "\"max_position_embeddings\": 4096, \"rms_norm_eps\": 1e-06, \"rope_theta\": 10000, " YARN(
        32, 4.0, 1.0, 512) "}",
};
#undef YARN
#undef FP8_QUANT

static char ascii_lower(char c)
{
    return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
}

/* Preset names are matched without regard to ASCII case ("deepseek-v3"). */
static int preset_index(const char *name)
{
    for (int i = 0; name && i < PRESET_COUNT; ++i) {
        const char *a = presets[i].name, *b = name;
        while (*a && ascii_lower(*a) == ascii_lower(*b))
            ++a, ++b;
        if (!*a && !*b)
            return i;
    }
    return -1;
}

const char *mla_model_config_preset_json(const char *name)
{
    const int i = preset_index(name);
    return i < 0 ? NULL : preset_json[i];
}

const char *mla_model_config_preset_name(int i)
{
    return i >= 0 && i < PRESET_COUNT ? presets[i].name : NULL;
}

mla_status mla_model_config_preset(const char *name, mla_model_config *out)
{
    if (!name || !out)
        return MLA_ERR_NULL_POINTER;
    const int i = preset_index(name);
    if (i < 0)
        return MLA_ERR_INVALID_ARGUMENT;
    *out = presets[i];
    return MLA_OK;
}

double mla_softmax_scale(const mla_model_config *cfg)
{
    if (!cfg)
        return 0.0;
    double m = yarn_m(cfg->rope_cfg.factor, cfg->rope_cfg.mscale_all_dim);
    return m * m / sqrt((double)(cfg->nope + cfg->rope));
}
