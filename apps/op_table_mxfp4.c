/* The MXFP4 GEMM path's ops for `mla op` (include/mla/mla_mxfp4.h): one
 * descriptor and one short run function each. Operand scales are read
 * row-major [B, R, K/32] or as the pre-shuffled bytes [B, bytes]; the
 * transposed layout, an in-memory arrangement, takes the logical [B, R,
 * K/32] file and its view's strides from --stride (as a dump writes it). */
#include "apps/cmd.h"
#include "apps/op.h"

#define DT(d) (1u << (unsigned)(d))
#define FP8S (DT(MLA_DTYPE_FP8_E4M3FN) | DT(MLA_DTYPE_FP8_E4M3FNUZ))

static const char *const mx_rules[] = {"production", "ocp"};
static const char *const file_layouts[] = {"row_major", "transposed", "preshuffled_gfx950"};
static const char *const scale_layouts[] = {"row_major", "transposed"};

/* An operand from --in <name>_codes and <name>_scales, its layout from
 * --param <name>_layout. */
static int operand(op_run *r, const char *codes, const char *scales, const char *layout_key,
                   mla_mxfp4_operand *op)
{
    int layout;
    OP_TRY(op_param_choice(r, layout_key, file_layouts, 3, &layout));
    op->layout = (mla_scale_layout)layout; /* the names in mla_scale_layout's order */
    OP_TRY(op_input(r, codes, MLA_DTYPE_FP4X2, NULL, 0, &op->codes));
    OP_TRY(op_input(r, scales, MLA_DTYPE_E8M0, NULL, 0, &op->scales));
    if (op->codes.ndim != 3)
        return op_usage_error(r, "%s must be 3-D [B, R, K/2]", codes);
    return MLA_EXIT_OK;
}

/* y [B, M, N] of dtype --param dtype (default def). */
static int gemm_output(op_run *r, int64_t B, int64_t M, int64_t N, mla_dtype def, mla_tensor *y)
{
    mla_dtype yd = def;
    if (op_param(r, "dtype"))
        OP_TRY(op_param_dtype(r, "dtype", DT(MLA_DTYPE_F32) | DT(MLA_DTYPE_BF16), &yd));
    const int64_t ys[3] = {B, M, N};
    return op_output(r, "y", yd, 3, ys, 0, y);
}

static int run_a16wfp4(op_run *r)
{
    mla_tensor x, y;
    mla_mxfp4_operand w;
    int rule;
    int64_t prequant;
    OP_TRY(op_param_choice(r, "rule", mx_rules, 2, &rule));
    OP_TRY(op_param_i64(r, "prequant", &prequant));
    OP_TRY(op_input(r, "x", MLA_DTYPE_COUNT, "in_dtype", 0, &x));
    OP_TRY(operand(r, "w_codes", "w_scales", "w_layout", &w));
    if (x.ndim != 3)
        return op_usage_error(r, "x must be 3-D [B, M, K]");
    OP_TRY(gemm_output(r, x.shape[0], x.shape[1], w.codes.shape[1], x.dtype, &y));
    return op_check(r, mla_batched_gemm_a16wfp4(op_ctx(r), &x, &w, (int32_t)prequant,
                                                (mla_mxfp4_rule)rule, &y));
}

static int run_a4w4(op_run *r)
{
    mla_tensor y;
    mla_mxfp4_operand x, w;
    OP_TRY(operand(r, "x_codes", "x_scales", "x_layout", &x));
    OP_TRY(operand(r, "w_codes", "w_scales", "w_layout", &w));
    OP_TRY(gemm_output(r, x.codes.shape[0], x.codes.shape[1], w.codes.shape[1], MLA_DTYPE_F32,
                    &y));
    return op_check(r, mla_batched_gemm_a4w4(op_ctx(r), &x, &w, &y));
}

/* x [T, H, v] and the flattened row length H * v (checked by the op). */
static int flatten_input(op_run *r, mla_tensor *x, int64_t *HV)
{
    OP_TRY(op_input(r, "x", MLA_DTYPE_COUNT, "in_dtype", 0, x));
    if (x->ndim != 3)
        return op_usage_error(r, "x must be 3-D [T, H, v]");
    *HV = x->shape[1] * x->shape[2];
    return MLA_EXIT_OK;
}

static int run_flatten_mxfp4(op_run *r)
{
    mla_tensor x, codes, scales;
    int rule, sl;
    int64_t HV = 0;
    OP_TRY(op_param_choice(r, "rule", mx_rules, 2, &rule));
    OP_TRY(op_param_choice(r, "scales_layout", scale_layouts, 2, &sl));
    OP_TRY(flatten_input(r, &x, &HV));
    const int64_t cs[2] = {x.shape[0], HV / 2}, ss[2] = {x.shape[0], HV / 32};
    OP_TRY(op_output(r, "codes", MLA_DTYPE_FP4X2, 2, cs, 0, &codes));
    OP_TRY(op_output(r, "scales", MLA_DTYPE_E8M0, 2, ss, sl, &scales));
    return op_check(r, mla_fused_flatten_mxfp4_quant(op_ctx(r), &x, &codes, &scales,
                                                     (mla_mxfp4_rule)rule));
}

static int run_flatten_fp8(op_run *r)
{
    mla_tensor x, codes, scales;
    mla_dtype fp8;
    int sl;
    int64_t HV = 0;
    OP_TRY(op_param_dtype(r, "dtype", FP8S, &fp8));
    OP_TRY(op_param_choice(r, "scales_layout", scale_layouts, 2, &sl));
    OP_TRY(flatten_input(r, &x, &HV));
    const int64_t cs[2] = {x.shape[0], HV}, ss[2] = {x.shape[0], HV / 128};
    OP_TRY(op_output(r, "codes", fp8, 2, cs, 0, &codes));
    OP_TRY(op_output(r, "scales", MLA_DTYPE_F32, 2, ss, sl, &scales));
    return op_check(r, mla_fused_flatten_fp8_group_quant(op_ctx(r), &x, &codes, &scales));
}

#define LAYOUT_HELP                                                                                \
    "scales: row_major [B, R, K/32] | transposed (the same file, --stride) | preshuffled_gfx950 "  \
    "[B, bytes]"

const op_desc mla_op_table_mxfp4[] = {
    {"gemm_a16wfp4", "y[b] = A(x[b]) [M, K] @ deq(w[b])^T, w fp4x2 codes [B, N, K/2] + e8m0 scales",
     {"x", "w_codes", "w_scales", NULL}, {"y", NULL},
     {{"prequant", "1", "1: A = x's MXFP4 round trip (aiter), 0: A = x"},
      {"rule", "production", "prequant rule: production | ocp"},
      {"w_layout", "row_major", LAYOUT_HELP},
      {"dtype", NULL, "y: f32 | bf16 (default x's)"},
      {"in_dtype", NULL, "x's dtype when its file is ambiguous"}, {NULL, NULL, NULL}},
     run_a16wfp4},
    {"gemm_a4w4", "y[b] = deq(x[b]) @ deq(w[b])^T, both fp4x2 codes + e8m0 scales",
     {"x_codes", "x_scales", "w_codes", "w_scales", NULL}, {"y", NULL},
     {{"x_layout", "row_major", LAYOUT_HELP},
      {"w_layout", "row_major", LAYOUT_HELP},
      {"dtype", "f32", "y: f32 | bf16"}, {NULL, NULL, NULL}},
     run_a4w4},
    {"flatten_mxfp4_quant", "x [T, H, v] -> MXFP4 of the rows [T, H*v]: codes + e8m0 scales",
     {"x", NULL}, {"codes", "scales", NULL},
     {{"rule", "production", "production | ocp"},
      {"scales_layout", "row_major", "row_major | transposed (the file is always [T, H*v/32])"},
      {"in_dtype", NULL, "x's dtype when its file is ambiguous"}, {NULL, NULL, NULL}},
     run_flatten_mxfp4},
    {"flatten_fp8_quant", "x [T, H, v] -> fp8 of the rows [T, H*v], groups of 128 (aiter rule)",
     {"x", NULL}, {"codes", "scales", NULL},
     {{"dtype", "e4m3fn", "codes: e4m3fn | e4m3fnuz"},
      {"scales_layout", "row_major", "row_major | transposed (the file is always [T, H*v/128])"},
      {"in_dtype", NULL, "x's dtype when its file is ambiguous"}, {NULL, NULL, NULL}},
     run_flatten_fp8},
};

const int mla_op_table_mxfp4_size = (int)(sizeof mla_op_table_mxfp4 / sizeof mla_op_table_mxfp4[0]);
