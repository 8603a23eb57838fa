/* mla demo internals: the float64 check of one step (apps/demo_check.c). */
#ifndef MLA_APPS_DEMO_H
#define MLA_APPS_DEMO_H

#include <stddef.h>

#include "conformance/layer_ref64.h"
#include "mla/mla.h"

/* The host float64 weights of layer 0 of a safetensors file and the
 * reference model over them (bf16 intermediates, f32 y, bf16 cache). */
typedef struct demo_ref {
    ref64_model m;
    double *wq_a, *wq_b, *wkv_a, *wkv_b, *wo, *ln_q, *ln_kv;
} demo_ref;

/* 0 on success; else -1 with a sentence in err. */
int demo_ref_load(const char *path, const mla_model_config *cfg, const float *cos, const float *sin,
                  demo_ref *r, char *err, size_t errlen);
void demo_ref_free(demo_ref *r);

#endif
