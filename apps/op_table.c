/* The ops `mla op` runs: one descriptor and one short run function each. */
#include "apps/cmd.h"
#include "apps/op.h"

#define DT(d) (1u << (unsigned)(d))
#define FLOATS (DT(MLA_DTYPE_F32) | DT(MLA_DTYPE_F16) | DT(MLA_DTYPE_BF16))
#define FP8S (DT(MLA_DTYPE_FP8_E4M3FN) | DT(MLA_DTYPE_FP8_E4M3FNUZ))

static const char *const modes[] = {"saturate", "nonsaturate"};
static const char *const mx_rules[] = {"production", "ocp"};
static const char *const mx_layouts[] = {"row_major", "transposed", "preshuffled_gfx950"};
static const char *const fp8_rules[] = {"aiter", "ue8m0", "div"};
static const char *const scale_layouts[] = {"row_major", "transposed"};

static int need_matrix(op_run *r, const char *name, const mla_tensor *t)
{
    if (t->ndim != 2)
        return op_usage_error(r, "%s must be 2-D [M, K], it has %d dims", name, (int)t->ndim);
    return MLA_EXIT_OK;
}

static int run_convert(op_run *r)
{
    mla_tensor x, y;
    mla_dtype dst;
    int mode;
    OP_TRY(op_param_dtype(r, "dtype", FLOATS | FP8S | DT(MLA_DTYPE_FP4X2), &dst));
    OP_TRY(op_param_choice(r, "mode", modes, 2, &mode));
    OP_TRY(op_input(r, "x", MLA_DTYPE_COUNT, "in_dtype", 0, &x));
    int64_t shape[MLA_MAX_DIMS];
    for (int32_t d = 0; d < x.ndim; ++d)
        shape[d] = x.shape[d];
    if (x.ndim > 0 && (x.dtype == MLA_DTYPE_FP4X2) != (dst == MLA_DTYPE_FP4X2)) {
        if (dst == MLA_DTYPE_FP4X2 && shape[x.ndim - 1] % 2)
            return op_usage_error(r, "x's last extent is odd: fp4x2 packs pairs");
        shape[x.ndim - 1] = dst == MLA_DTYPE_FP4X2 ? shape[x.ndim - 1] / 2 : 2 * shape[x.ndim - 1];
    }
    OP_TRY(op_output(r, "y", dst, x.ndim, shape, 0, &y));
    return op_check(r, mla_convert(op_ctx(r), &x, &y, (mla_saturation)mode));
}

static int run_mxfp4_quant(op_run *r)
{
    mla_tensor x, codes, scales;
    int rule, layout;
    OP_TRY(op_param_choice(r, "rule", mx_rules, 2, &rule));
    OP_TRY(op_param_choice(r, "layout", mx_layouts, 3, &layout));
    OP_TRY(op_input(r, "x", MLA_DTYPE_COUNT, "in_dtype", 0, &x));
    OP_TRY(need_matrix(r, "x", &x));
    int64_t M = x.shape[0], K = x.shape[1], N = K / 32;
    int64_t cs[2] = {M, K / 2}, ss[2] = {M, N};
    OP_TRY(op_output(r, "codes", MLA_DTYPE_FP4X2, 2, cs, 0, &codes));
    if (layout == MLA_SCALE_PRESHUFFLED_GFX950) {
        int64_t bytes = mla_scale_preshuffled_bytes(M, N);
        OP_TRY(op_output(r, "scales", MLA_DTYPE_E8M0, 1, &bytes, 0, &scales));
    } else {
        OP_TRY(op_output(r, "scales", MLA_DTYPE_E8M0, 2, ss, layout == MLA_SCALE_TRANSPOSED, &scales));
    }
    return op_check(r, mla_mxfp4_quant(op_ctx(r), &x, &codes, &scales, (mla_scale_layout)layout,
                                       (mla_mxfp4_rule)rule));
}

static int run_mxfp4_dequant(op_run *r)
{
    mla_tensor codes, scales, y;
    int layout;
    mla_dtype dt;
    OP_TRY(op_param_choice(r, "layout", mx_layouts, 3, &layout));
    OP_TRY(op_param_dtype(r, "dtype", FLOATS, &dt));
    OP_TRY(op_input(r, "codes", MLA_DTYPE_FP4X2, NULL, 0, &codes));
    OP_TRY(need_matrix(r, "codes", &codes));
    OP_TRY(op_input(r, "scales", MLA_DTYPE_E8M0, NULL, layout == MLA_SCALE_TRANSPOSED, &scales));
    int64_t ys[2] = {codes.shape[0], 2 * codes.shape[1]};
    OP_TRY(op_output(r, "y", dt, 2, ys, 0, &y));
    return op_check(r, mla_mxfp4_dequant(op_ctx(r), &codes, &scales, (mla_scale_layout)layout, &y));
}

static int run_fp8_group_quant(op_run *r)
{
    mla_tensor x, codes, scales;
    mla_dtype fp8;
    int rule, sl;
    int64_t group;
    OP_TRY(op_param_dtype(r, "dtype", FP8S, &fp8));
    OP_TRY(op_param_choice(r, "rule", fp8_rules, 3, &rule));
    OP_TRY(op_param_choice(r, "scales_layout", scale_layouts, 2, &sl));
    OP_TRY(op_param_i64(r, "group", &group));
    OP_TRY(op_input(r, "x", MLA_DTYPE_COUNT, "in_dtype", 0, &x));
    OP_TRY(need_matrix(r, "x", &x));
    if (group <= 0 || x.shape[1] % group)
        return op_usage_error(r, "group %lld does not divide K = %lld", (long long)group,
                              (long long)x.shape[1]);
    int64_t ss[2] = {x.shape[0], x.shape[1] / group};
    OP_TRY(op_output(r, "codes", fp8, 2, x.shape, 0, &codes));
    OP_TRY(op_output(r, "scales", MLA_DTYPE_F32, 2, ss, sl, &scales));
    return op_check(r, mla_fp8_group_quant(op_ctx(r), &x, &codes, &scales, group,
                                           (mla_fp8_scale_rule)rule));
}

static int run_fp8_group_dequant(op_run *r)
{
    mla_tensor codes, scales, y;
    mla_dtype fp8, dt;
    int sl;
    int64_t group;
    OP_TRY(op_param_dtype(r, "in_dtype", FP8S, &fp8));
    OP_TRY(op_param_dtype(r, "dtype", FLOATS, &dt));
    OP_TRY(op_param_choice(r, "scales_layout", scale_layouts, 2, &sl));
    OP_TRY(op_param_i64(r, "group", &group));
    OP_TRY(op_input(r, "codes", fp8, NULL, 0, &codes));
    OP_TRY(need_matrix(r, "codes", &codes));
    OP_TRY(op_input(r, "scales", MLA_DTYPE_F32, NULL, sl, &scales));
    OP_TRY(op_output(r, "y", dt, 2, codes.shape, 0, &y));
    return op_check(r, mla_fp8_group_dequant(op_ctx(r), &codes, &scales, group, &y));
}

#define IN_DTYPE_HELP "dtype of x when its file is ambiguous (<u2 defaults to bf16)"

const op_desc mla_op_table[] = {
    {"convert",
     "y = x converted elementwise",
     {"x", NULL},
     {"y", NULL},
     {{"dtype", NULL, "target: f32 f16 bf16 e4m3fn e4m3fnuz fp4x2"},
      {"in_dtype", NULL, "source when the file is |u1 or <u2: e4m3fn e4m3fnuz e8m0 fp4x2 bf16 f16"},
      {"mode", "saturate", "fp8 targets: saturate | nonsaturate"},
      {NULL, NULL, NULL}},
     run_convert},
    {"mxfp4_quant",
     "x [M, K] -> fp4x2 codes [M, K/2] + e8m0 scales",
     {"x", NULL},
     {"codes", "scales", NULL},
     {{"rule", "production", "production | ocp"},
      {"layout", "row_major", "scales: row_major | transposed | preshuffled_gfx950 (1-D bytes)"},
      {"in_dtype", NULL, IN_DTYPE_HELP},
      {NULL, NULL, NULL}},
     run_mxfp4_quant},
    {"mxfp4_dequant",
     "codes [M, K/2] + scales -> y [M, K]",
     {"codes", "scales", NULL},
     {"y", NULL},
     {{"layout", "row_major", "scales: row_major | transposed | preshuffled_gfx950"},
      {"dtype", "f32", "y: f32 | f16 | bf16"},
      {NULL, NULL, NULL}},
     run_mxfp4_dequant},
    {"fp8_group_quant",
     "x [M, K] -> fp8 codes [M, K] + f32 scales [M, K/group]",
     {"x", NULL},
     {"codes", "scales", NULL},
     {{"dtype", "e4m3fn", "codes: e4m3fn | e4m3fnuz"},
      {"rule", "aiter", "aiter | ue8m0 | div"},
      {"group", "128", "group size along K"},
      {"scales_layout", "row_major", "row_major | transposed (the file is always [M, K/group])"},
      {"in_dtype", NULL, IN_DTYPE_HELP},
      {NULL, NULL, NULL}},
     run_fp8_group_quant},
    {"fp8_group_dequant",
     "fp8 codes [M, K] + f32 scales [M, K/group] -> y [M, K]",
     {"codes", "scales", NULL},
     {"y", NULL},
     {{"in_dtype", NULL, "codes: e4m3fn | e4m3fnuz (required)"},
      {"dtype", "f32", "y: f32 | f16 | bf16"},
      {"group", "128", "group size along K"},
      {"scales_layout", "row_major", "row_major | transposed (the file is always [M, K/group])"},
      {NULL, NULL, NULL}},
     run_fp8_group_dequant},
};

const int mla_op_table_size = (int)(sizeof mla_op_table / sizeof mla_op_table[0]);
