/* Model configurations (MLA.md section 1) and the softmax scale (section 2). */
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

const char *mla_model_config_preset_name(int i)
{
    return i >= 0 && i < PRESET_COUNT ? presets[i].name : NULL;
}

mla_status mla_model_config_preset(const char *name, mla_model_config *out)
{
    if (!name || !out)
        return MLA_ERR_NULL_POINTER;
    for (int i = 0; i < PRESET_COUNT; ++i) {
        if (strcmp(presets[i].name, name) == 0) {
            *out = presets[i];
            return MLA_OK;
        }
    }
    return MLA_ERR_INVALID_ARGUMENT;
}

double mla_softmax_scale(const mla_model_config *cfg)
{
    if (!cfg)
        return 0.0;
    double m = yarn_m(cfg->rope_cfg.factor, cfg->rope_cfg.mscale_all_dim);
    return m * m / sqrt((double)(cfg->nope + cfg->rope));
}
