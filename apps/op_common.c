/* What several `mla op` descriptors share: the model config of a preset or a
 * checkpoint, and the RoPE table built from it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apps/cmd.h"
#include "apps/op.h"
#include "apps/suggest.h"

int op_model_config(op_run *r, mla_model_config *cfg)
{
    const char *dir = op_param_known(r, "model") ? op_param(r, "model") : NULL;
    if (dir && *dir) {
        char path[4200];
        snprintf(path, sizeof path, "%s/config.json", dir);
        mla_hf_config hc;
        OP_TRY(op_check(r, mla_hf_config_load(op_ctx(r), path, &hc)));
        *cfg = hc.model;
        return MLA_EXIT_OK;
    }
    const char *name = op_param(r, "config");
    if (!name || mla_model_config_preset(name, cfg) != MLA_OK) {
        fprintf(stderr, "mla op: --param config=%s is not a preset", name ? name : "");
        mla_suggest_preset(stderr, name);
        fprintf(stderr, " (mla plan --list)\n");
        return MLA_EXIT_USAGE;
    }
    return MLA_EXIT_OK;
}

int op_rope_table(op_run *r, int64_t R, mla_tensor *cos, mla_tensor *sin)
{
    if (op_has_input(r, "cos")) {
        OP_TRY(op_input(r, "cos", MLA_DTYPE_F32, NULL, 0, cos));
        return op_input(r, "sin", MLA_DTYPE_F32, NULL, 0, sin);
    }
    mla_model_config cfg;
    OP_TRY(op_model_config(r, &cfg));
    int64_t P = cfg.max_pos, n, bytes;
    if (op_param(r, "max_pos"))
        OP_TRY(op_param_i64(r, "max_pos", &P));
    if (R < 2 || R % 2 || R > INT32_MAX)
        return op_usage_error(r, "the RoPE dim %lld is not a positive even int32", (long long)R);
    OP_TRY(op_mul(r, P, R / 2, "the RoPE table (max_pos x rope_dim / 2)", &n));
    OP_TRY(op_mul(r, n, 8, "the RoPE table's bytes", &bytes));
    if ((uint64_t)bytes > (uint64_t)SIZE_MAX / 2)
        return op_usage_error(r, "the RoPE table of %lld entries does not fit in memory",
                              (long long)n);
    cfg.rope_cfg.dim = (int32_t)R;
    float *h = malloc((size_t)bytes + 1);
    if (!h)
        return op_check(r, MLA_ERR_OUT_OF_MEMORY);
    const int64_t shape[2] = {P, R / 2};
    int rc = op_check(r, mla_rope_table_build(&cfg.rope_cfg, P, h, h + n));
    if (rc == MLA_EXIT_OK)
        rc = op_tensor(r, MLA_DTYPE_F32, 2, shape, h, cos);
    if (rc == MLA_EXIT_OK)
        rc = op_tensor(r, MLA_DTYPE_F32, 2, shape, h + n, sin);
    free(h);
    return rc;
}

#define DT(d) (1u << (unsigned)(d))

int op_cache_desc(op_run *r, int64_t L, int64_t R, mla_cache_desc *d)
{
    static const char *const layouts[] = {"normal", "shuffled", "fp8_scaled"};
    int layout;
    double ks;
    memset(d, 0, sizeof *d);
    OP_TRY(op_param_choice(r, "layout", layouts, 3, &layout));
    OP_TRY(op_param_dtype(
        r, "dtype", DT(MLA_DTYPE_BF16) | DT(MLA_DTYPE_FP8_E4M3FN) | DT(MLA_DTYPE_FP8_E4M3FNUZ),
        &d->dtype));
    OP_TRY(op_param_i64(r, "block_size", &d->block_size));
    OP_TRY(op_param_f64(r, "k_scale", &ks));
    d->layout = (mla_cache_layout)layout;
    d->kv_lora = L;
    d->rope = R;
    d->k_scale = (float)ks;
    return MLA_EXIT_OK;
}

int op_latent_cache(op_run *r, const mla_tensor *slots, mla_cache_desc *d, mla_tensor *in,
                    mla_tensor *out)
{
    const int has_in = op_has_input(r, "cache");
    if (has_in) {
        OP_TRY(op_input(r, "cache", MLA_DTYPE_U8, NULL, 0, in));
        if (in->ndim != 2)
            return op_usage_error(r, "cache must be 2-D [blocks, block_bytes]");
        d->num_blocks = in->shape[0];
    } else if (slots) {
        OP_TRY(op_blocks_for_slots(r, slots, d->block_size, &d->num_blocks));
    } else {
        return op_usage_error(r, "missing --in cache=FILE.npy");
    }
    int64_t bb = 0, bytes;
    OP_TRY(op_check(r, mla_cache_block_bytes(d, &bb)));
    if (has_in && in->shape[1] != bb)
        return op_usage_error(r, "cache must be [blocks, %lld] bytes for these parameters",
                              (long long)bb);
    OP_TRY(op_mul(r, d->num_blocks, bb, "the cache", &bytes));
    if (!out)
        return MLA_EXIT_OK;
    const int64_t cs[2] = {d->num_blocks, bb};
    OP_TRY(op_output(r, "cache", MLA_DTYPE_U8, 2, cs, 0, out));
    return has_in ? op_copy_rows(r, out, in) : op_zero_rows(r, out);
}

int op_zero_rows(op_run *r, mla_tensor *out)
{
    /* the view's whole span: a --stride'd cache has gaps between its blocks */
    const int64_t n = out->shape[0], span = n ? (n - 1) * out->stride[0] + out->shape[1] : 0;
    return op_check(r, mla_memset(op_ctx(r), out->data, 0, (size_t)span));
}

int op_copy_rows(op_run *r, mla_tensor *out, const mla_tensor *in)
{
    /* row by row: a --stride'd cache has gaps between its blocks */
    mla_status st = MLA_OK;
    for (int64_t b = 0; st == MLA_OK && b < in->shape[0]; ++b)
        st = mla_memcpy(op_ctx(r), (uint8_t *)out->data + b * out->stride[0],
                        (const uint8_t *)in->data + b * in->stride[0], (size_t)in->shape[1],
                        MLA_COPY_CONTEXT_TO_CONTEXT);
    return op_check(r, st);
}
