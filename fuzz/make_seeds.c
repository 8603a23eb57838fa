/* Writes the seed corpora of fuzz/corpus/ (run once; the outputs are
 * committed): safetensors layers of the fuzz configs in each weight format,
 * small .npy files of every element type, and one input per op and backend
 * for the tensor fuzzer. Usage: make_seeds <fuzz/corpus directory>. */
#include <stdio.h>
#include <string.h>

#include "conformance/npy.h"
#include "fuzz/fuzz_config.h"

static int write_bytes(const char *path, const uint8_t *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return 1;
    const int bad = fwrite(p, 1, n, f) != n;
    return fclose(f) != 0 || bad;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: make_seeds <corpus dir>\n");
        return 2;
    }
    char path[4096];
    int bad = 0;
    mla_context *ctx = NULL;
    if (mla_context_create(MLA_BACKEND_REFERENCE, NULL, &ctx) != MLA_OK)
        return 1;
    const mla_weight_format B = MLA_WEIGHT_BF16, F8 = MLA_WEIGHT_FP8_BLOCK, F4 = MLA_WEIGHT_MXFP4;
    const struct {
        int cfg;
        const char *name;
        mla_layer_weight_formats f;
    } layers[] = {
        {0, "q_bf16", {B, B, B, B, B, B, B, B}},
        {0, "q_fp8", {F8, F8, F8, F8, F8, B, B, B}},
        {1, "noq_mxfp4", {B, F4, F4, B, B, B, B, B}},
        {2, "indexer_bf16", {B, B, B, B, B, B, B, B}},
    };
    for (size_t k = 0; k < sizeof layers / sizeof layers[0]; ++k) {
        const mla_model_config cfg = fz_layer_config(layers[k].cfg);
        snprintf(path, sizeof path, "%s/safetensors/%s.safetensors", argv[1], layers[k].name);
        if (mla_weights_generate(ctx, path, &cfg, 0, 1, 7, &layers[k].f) != MLA_OK) {
            fprintf(stderr, "%s: %s\n", path, mla_context_error_detail(ctx));
            ++bad;
        }
    }
    mla_context_destroy(ctx);
    uint8_t data[64];
    for (int k = 0; k < 64; ++k)
        data[k] = (uint8_t)(k * 37 + 11);
    for (int t = 0; t < MLA_NPY_TYPE_COUNT; ++t) {
        const int64_t shape[2] = {2, 3}, empty[2] = {0, 4};
        snprintf(path, sizeof path, "%s/npy/type%d.npy", argv[1], t);
        bad += mla_npy_save(path, (mla_npy_type)t, 2, shape, data, NULL, 0) != MLA_OK;
        snprintf(path, sizeof path, "%s/npy/empty%d.npy", argv[1], t);
        bad += mla_npy_save(path, (mla_npy_type)t, 2, empty, data, NULL, 0) != MLA_OK;
    }
    snprintf(path, sizeof path, "%s/npy/scalar.npy", argv[1]);
    bad += mla_npy_save(path, MLA_NPY_F8, 0, NULL, data, NULL, 0) != MLA_OK;
    /* tensor ops: backend, op, then choices from a fixed generator */
    uint32_t x = 0x9E3779B9u;
    for (int op = 0; op < 27; ++op) {
        for (int backend = 0; backend < 2; ++backend) {
            uint8_t in[512] = {(uint8_t)backend, (uint8_t)op};
            for (size_t k = 2; k < sizeof in; ++k) {
                x ^= x << 13, x ^= x >> 17, x ^= x << 5;
                in[k] = (uint8_t)x;
            }
            snprintf(path, sizeof path, "%s/tensor_ops/op%02d_%s", argv[1], op,
                     backend ? "cpu" : "ref");
            bad += write_bytes(path, in, sizeof in);
        }
    }
    return bad != 0;
}
