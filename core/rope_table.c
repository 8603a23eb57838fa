/* The cos/sin table of MLA.md section 3: built once on the host in float64,
 * each entry rounded once to fp32; every backend reads these bits. */
#include <math.h>

#include "mla/mla.h"

static double yarn_m(double factor, double k)
{
    return factor <= 1.0 ? 1.0 : 0.1 * k * log(factor) + 1.0;
}

/* corr(r) = R * ln(orig / (2 pi r)) / (2 ln base): the dim index whose
 * wavelength completes r rotations over the original context. */
static double yarn_correction_dim(double rotations, const mla_rope_config *c)
{
    const double pi = 3.14159265358979323846;
    return c->dim * log((double)c->original_max_pos / (2.0 * pi * rotations)) /
           (2.0 * log(c->base));
}

/* f_i = base^(-2i/R), blended towards f_i / factor by YaRN's ramp. */
static double rope_frequency(const mla_rope_config *c, int64_t i)
{
    double f = pow(c->base, -2.0 * (double)i / c->dim);
    if (c->factor <= 1.0)
        return f;
    double low = fmax(floor(yarn_correction_dim(c->beta_fast, c)), 0.0);
    double high = fmin(ceil(yarn_correction_dim(c->beta_slow, c)), (double)(c->dim - 1));
    if (low == high)
        high += 0.001;
    double ramp = fmin(fmax(((double)i - low) / (high - low), 0.0), 1.0);
    return f / c->factor * ramp + f * (1.0 - ramp);
}

mla_status mla_rope_table_build(const mla_rope_config *cfg, int64_t max_pos, float *cos_out,
                                float *sin_out)
{
    if (!cfg || ((!cos_out || !sin_out) && max_pos > 0))
        return MLA_ERR_NULL_POINTER;
    if (cfg->dim <= 0 || cfg->dim % 2 || !(cfg->base > 1.0) || max_pos < 0 ||
        (cfg->factor > 1.0 && cfg->original_max_pos <= 0))
        return MLA_ERR_INVALID_ARGUMENT;
    const int64_t half = cfg->dim / 2;
    int64_t entries;
    if (__builtin_mul_overflow(max_pos, half, &entries))
        return MLA_ERR_OVERFLOW;
    const double ratio =
        yarn_m(cfg->factor, cfg->mscale) / yarn_m(cfg->factor, cfg->mscale_all_dim);
    for (int64_t i = 0; i < half; ++i) {
        const double f = rope_frequency(cfg, i);
        for (int64_t p = 0; p < max_pos; ++p) {
            const double angle = (double)p * f;
            cos_out[p * half + i] = (float)(cos(angle) * ratio);
            sin_out[p * half + i] = (float)(sin(angle) * ratio);
        }
    }
    return MLA_OK;
}
