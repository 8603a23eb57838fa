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
