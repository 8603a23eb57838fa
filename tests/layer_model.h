/* Test support for the layer tests: a random layer of a config in context
 * memory (bf16 or fp8 128x128-block projections, kv_b_proj bf16, the V3.2
 * indexer when the config has one) with its dequantized host copy for the
 * float64 reference, the RoPE table, and paged batches of sequences. */
#ifndef MLA_TESTS_LAYER_MODEL_H
#define MLA_TESTS_LAYER_MODEL_H

#include "conformance/layer_ref64.h"
#include "mla/mla.h"

typedef struct lm_buf {
    void *p;
    size_t bytes;
} lm_buf;

typedef struct layer_model {
    mla_context *ctx;
    mla_model_config cfg;
    mla_layer_weights_ex w;                                  /* tensors in context memory */
    double *wq_a, *wq_b, *wkv_a, *wkv_b, *wo, *ln_q, *ln_kv; /* host, dequantized */
    double *w_kc; /* MXFP4: the re-quantized W_kc [H, nope, L]; else NULL */
    int fmt;      /* 0 bf16, 1 fp8 blocks, 2 MXFP4, 3 fp8 blocks + FP8_TENSOR kv_b_proj */
    float *hcos, *hsin;
    mla_tensor cos, sin;
    lm_buf bufs[24];
    int nbufs;
} layer_model;

/* cfg_name: a preset; fmt 1: q_a/q_b (q_proj), kv_a, o_proj in fp8 blocks;
 * fmt 2: those and kv_b_proj MXFP4 (with the loader's W_kc / W_vc operands);
 * fmt 3: as 1, with kv_b_proj fp8 with one scale per tensor (FP8_TENSOR).
 * max_pos of the config is cut to 4096 (the table's first rows do not
 * depend on it). Returns 0 on success. */
int layer_model_make(mla_context *ctx, const char *cfg_name, int fmt, uint32_t seed,
                     layer_model *m);
void layer_model_free(layer_model *m);
/* The reference's view of the model (cache dtype and roundoffs set by the
 * caller). */
void layer_model_ref(const layer_model *m, ref64_model *r);

/* A contiguous tensor in the context's memory, from host data or zeroed;
 * freed with lm_free_tensor. */
mla_tensor lm_tensor(mla_context *ctx, mla_dtype dt, int32_t ndim, const int64_t *shape,
                     const void *host);
void lm_free_tensor(mla_context *ctx, mla_tensor *t);
size_t lm_bytes(const mla_tensor *t);
/* Host copy (malloc) of a contiguous tensor. */
void *lm_download(mla_context *ctx, const mla_tensor *t);

/* Random bf16 activations [n] in [-scale, scale), and their values. */
void lm_random_bf16(uint32_t *state, int64_t n, float scale, uint16_t *bits, double *values);

#endif
