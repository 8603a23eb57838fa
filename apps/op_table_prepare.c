/* The prepare-path ops `mla op` runs (include/mla/mla_prepare.h): one
 * descriptor and one short run function each. */
#include <stdlib.h>
#include <string.h>

#include "apps/cmd.h"
#include "apps/op.h"

#define DT(d) (1u << (unsigned)(d))
#define FLOATS (DT(MLA_DTYPE_F32) | DT(MLA_DTYPE_F16) | DT(MLA_DTYPE_BF16))
#define FP8S (DT(MLA_DTYPE_FP8_E4M3FN) | DT(MLA_DTYPE_FP8_E4M3FNUZ))

static const char *const styles[] = {"interleaved", "neox"};

static int run_rmsnorm(op_run *r)
{
    mla_tensor x, w, y;
    double eps;
    mla_dtype yd;
    OP_TRY(op_param_f64(r, "eps", &eps));
    OP_TRY(op_input(r, "x", MLA_DTYPE_COUNT, "in_dtype", 0, &x));
    OP_TRY(op_input(r, "w", MLA_DTYPE_COUNT, NULL, 0, &w));
    OP_TRY(op_param_dtype_or(r, "dtype", FLOATS, x.dtype, &yd));
    OP_TRY(op_output(r, "y", yd, x.ndim, x.shape, 0, &y));
    return op_check(r, mla_rmsnorm(op_ctx(r), &x, &w, (float)eps, &y));
}

static int run_qk_rmsnorm(op_run *r)
{
    mla_tensor q, qw, kv, kvw, qo, kvo, qs;
    double qe, kve;
    mla_dtype qd, kvd;
    OP_TRY(op_param_f64(r, "q_eps", &qe));
    OP_TRY(op_param_f64(r, "kv_eps", &kve));
    OP_TRY(op_input(r, "q", MLA_DTYPE_COUNT, "in_dtype", 0, &q));
    OP_TRY(op_input(r, "q_w", MLA_DTYPE_COUNT, NULL, 0, &qw));
    OP_TRY(op_input(r, "kv", MLA_DTYPE_COUNT, "in_dtype", 0, &kv));
    OP_TRY(op_input(r, "kv_w", MLA_DTYPE_COUNT, NULL, 0, &kvw));
    OP_TRY(op_param_dtype_or(r, "dtype", FLOATS | FP8S | DT(MLA_DTYPE_FP4X2), q.dtype, &qd));
    OP_TRY(op_param_dtype_or(r, "kv_dtype", FLOATS, kv.dtype, &kvd));
    if (q.ndim != 2 || kv.ndim != 2)
        return op_usage_error(r, "q and kv must be 2-D [T, D]");
    const int fp4 = qd == MLA_DTYPE_FP4X2, quant = fp4 || (DT(qd) & FP8S);
    int64_t qos[2] = {q.shape[0], fp4 ? q.shape[1] / 2 : q.shape[1]};
    int64_t ss[2] = {q.shape[0], q.shape[1] / (fp4 ? 32 : 128)};
    OP_TRY(op_output(r, "q_out", qd, 2, qos, 0, &qo));
    OP_TRY(op_output(r, "kv_out", kvd, 2, kv.shape, 0, &kvo));
    if (quant)
        OP_TRY(op_output(r, "q_scales", fp4 ? MLA_DTYPE_E8M0 : MLA_DTYPE_F32, 2, ss, 0, &qs));
    return op_check(r, mla_fused_qk_rmsnorm(op_ctx(r), &q, &qw, (float)qe, &kv, &kvw, (float)kve,
                                            &qo, quant ? &qs : NULL, &kvo));
}

static int run_rope(op_run *r)
{
    mla_tensor x, pos, cos = {0}, sin = {0}, y;
    int style;
    mla_dtype yd;
    OP_TRY(op_param_choice(r, "style", styles, 2, &style));
    OP_TRY(op_input(r, "x", MLA_DTYPE_COUNT, "in_dtype", 0, &x));
    OP_TRY(op_input(r, "positions", MLA_DTYPE_COUNT, NULL, 0, &pos));
    if (x.ndim != 2 && x.ndim != 3)
        return op_usage_error(r, "x must be [T, D] or [T, H, D]");
    int64_t R = x.shape[x.ndim - 1];
    if (op_param(r, "rope_dim"))
        OP_TRY(op_param_i64(r, "rope_dim", &R));
    OP_TRY(op_rope_table(r, R, &cos, &sin));
    OP_TRY(op_param_dtype_or(r, "dtype", FLOATS, x.dtype, &yd));
    OP_TRY(op_output(r, "y", yd, x.ndim, x.shape, 0, &y));
    return op_check(r, mla_rope(op_ctx(r), &cos, &sin, &pos, &x, &y, (mla_rope_style)style));
}

static int run_linear(op_run *r)
{
    mla_tensor x, w, s, y;
    mla_dtype yd;
    OP_TRY(op_input(r, "x", MLA_DTYPE_COUNT, "in_dtype", 0, &x));
    OP_TRY(op_input(r, "w", MLA_DTYPE_COUNT, "w_dtype", 0, &w));
    const int fp8 = w.dtype != MLA_DTYPE_BF16;
    if (fp8)
        OP_TRY(op_input(r, "w_scale", MLA_DTYPE_F32, NULL, 0, &s));
    OP_TRY(op_param_dtype_or(r, "dtype", DT(MLA_DTYPE_F32) | DT(MLA_DTYPE_BF16), x.dtype, &yd));
    if (x.ndim != 2 || w.ndim != 2)
        return op_usage_error(r, "x [T, K] and w [N, K] must be 2-D");
    int64_t ys[2] = {x.shape[0], w.shape[0]};
    OP_TRY(op_output(r, "y", yd, 2, ys, 0, &y));
    return op_check(r, mla_linear(op_ctx(r), &x, &w, fp8 ? &s : NULL, &y));
}

static int run_batched_gemm(op_run *r)
{
    mla_tensor x, w, y;
    mla_dtype yd;
    double ws;
    OP_TRY(op_param_f64(r, "w_scale", &ws));
    OP_TRY(op_input(r, "x", MLA_DTYPE_COUNT, "in_dtype", 0, &x));
    OP_TRY(op_input(r, "w", MLA_DTYPE_COUNT, "w_dtype", 0, &w));
    OP_TRY(op_param_dtype_or(r, "dtype", DT(MLA_DTYPE_F32) | DT(MLA_DTYPE_BF16), x.dtype, &yd));
    if (x.ndim != 3 || w.ndim != 3)
        return op_usage_error(r, "x [B, M, K] and w [B, K, N] must be 3-D");
    int64_t ys[3] = {x.shape[0], x.shape[1], w.shape[2]};
    OP_TRY(op_output(r, "y", yd, 3, ys, 0, &y));
    return op_check(r, mla_batched_gemm(op_ctx(r), &x, &w, (float)ws, &y));
}

static int run_cache_write(op_run *r)
{
    mla_tensor kn, kp, slots, old, cache;
    mla_cache_desc d;
    OP_TRY(op_input(r, "k_nope", MLA_DTYPE_COUNT, "in_dtype", 0, &kn));
    OP_TRY(op_input(r, "k_pe", MLA_DTYPE_COUNT, "in_dtype", 0, &kp));
    OP_TRY(op_input(r, "slots", MLA_DTYPE_COUNT, NULL, 0, &slots));
    if (kn.ndim != 2 || kp.ndim != 2 || slots.ndim != 1)
        return op_usage_error(r, "k_nope [T, L], k_pe [T, R] and slots [T]");
    OP_TRY(op_cache_desc(r, kn.shape[1], kp.shape[1], &d));
    OP_TRY(op_latent_cache(r, &slots, &d, &old, &cache));
    return op_check(r, mla_cache_write(op_ctx(r), &d, &cache, &kn, &kp, &slots));
}

static int run_cache_gather(op_run *r)
{
    mla_tensor cache, bt, lens, out;
    mla_cache_desc d;
    int64_t L, R, *n = NULL, rows = 0;
    mla_dtype od;
    OP_TRY(op_param_i64(r, "kv_lora", &L));
    OP_TRY(op_param_i64(r, "rope", &R));
    if (L > INT64_MAX - R)
        return op_usage_error(r, "kv_lora + rope overflows 64 bits");
    OP_TRY(op_cache_desc(r, L, R, &d));
    OP_TRY(op_param_dtype(r, "out_dtype", DT(MLA_DTYPE_F32) | DT(MLA_DTYPE_BF16), &od));
    OP_TRY(op_latent_cache(r, NULL, &d, &cache, NULL));
    OP_TRY(op_input(r, "block_table", MLA_DTYPE_I32, NULL, 0, &bt));
    OP_TRY(op_input(r, "seq_lens", MLA_DTYPE_I32, NULL, 0, &lens));
    if (lens.ndim != 1)
        return op_usage_error(r, "seq_lens [S]");
    int rc = op_host_indices(r, &lens, &n);
    for (int64_t s = 0; rc == MLA_EXIT_OK && s < lens.shape[0]; ++s)
        rows += n[s] > 0 ? n[s] : 0;
    free(n);
    OP_TRY(rc);
    int64_t os[2] = {rows, L + R};
    OP_TRY(op_output(r, "out", od, 2, os, 0, &out));
    return op_check(r, mla_cache_gather(op_ctx(r), &d, &cache, &bt, &lens, &out));
}

#define CACHE_PARAMS                                                                              \
    {"layout", "normal", "normal | shuffled | fp8_scaled"},                                       \
        {"dtype", "bf16", "cache elements: bf16 | e4m3fn | e4m3fnuz"},                            \
        {"block_size", "16", "tokens per block (shuffled: a multiple of 16)"},                    \
        {"k_scale", "1", "per-tensor fp8 scale (normal, shuffled)"}

const op_desc mla_op_table_prepare[] = {
    {"rmsnorm", "y = x * rsqrt(mean(x^2) + eps) * w, rows of x [T, D]",
     {"x", "w", NULL}, {"y", NULL},
     {{"eps", "1e-6", "added to the mean square"},
      {"dtype", NULL, "y: f32 | f16 | bf16 (default x's)"},
      {"in_dtype", NULL, "x's dtype when its file is ambiguous"}, {NULL, NULL, NULL}},
     run_rmsnorm},
    {"qk_rmsnorm", "fused q and kv RMSNorm; q_out f32/f16/bf16, or quantized (fp8 g128, fp4x2)",
     {"q", "q_w", "kv", "kv_w", NULL}, {"q_out", "kv_out", "q_scales", NULL},
     {{"q_eps", "1e-6", "q's eps"}, {"kv_eps", "1e-6", "kv's eps"},
      {"dtype", NULL, "q_out: f32 f16 bf16 e4m3fn e4m3fnuz fp4x2 (default q's); quantized "
                      "needs --out q_scales"},
      {"kv_dtype", NULL, "kv_out: f32 | f16 | bf16 (default kv's)"},
      {"in_dtype", NULL, "q's and kv's dtype when their files are ambiguous"}, {NULL, NULL, NULL}},
     run_qk_rmsnorm},
    {"rope",
     "y = x [T, D] or [T, H, D] rotated by positions [T] (dims past R copied); cos and sin\n"
     "    are optional: without them the table is built from --param config",
     {"x", "positions", "cos", "sin", NULL}, {"y", NULL},
     {{"style", "interleaved", "interleaved | neox"},
      {"config", "DeepSeek-V3", "preset whose YaRN settings build cos/sin (without --in cos)"},
      {"rope_dim", NULL, "R (default x's last dim)"},
      {"max_pos", NULL, "table rows (default the preset's max_pos)"},
      {"dtype", NULL, "y: f32 | f16 | bf16 (default x's)"},
      {"in_dtype", NULL, "x's dtype when its file is ambiguous"}, {NULL, NULL, NULL}},
     run_rope},
    {"linear", "y [T, N] = x [T, K] @ w [N, K]^T; fp8 w also takes --in w_scale (128x128 blocks)",
     {"x", "w", "w_scale", NULL}, {"y", NULL},
     {{"w_dtype", NULL, "w: bf16 | e4m3fn (an |u1 file needs e4m3fn)"},
      {"dtype", NULL, "y: f32 | bf16 (default x's)"},
      {"in_dtype", NULL, "x's dtype when its file is ambiguous"}, {NULL, NULL, NULL}},
     run_linear},
    {"batched_gemm", "y[b] = x[b] [M, K] @ w[b] [K, N] * w_scale",
     {"x", "w", NULL}, {"y", NULL},
     {{"w_scale", "1", "per-tensor scale (fp8 w)"},
      {"w_dtype", NULL, "w: bf16 | e4m3fn (an |u1 file needs e4m3fn)"},
      {"dtype", NULL, "y: f32 | bf16 (default x's)"},
      {"in_dtype", NULL, "x's dtype when its file is ambiguous"}, {NULL, NULL, NULL}},
     run_batched_gemm},
    {"cache_write",
     "[k_nope | k_pe] of token t into the latent cache at slots[t] (< 0: skip); --in cache\n"
     "    is optional (the cache to write into; default a zeroed one just big enough)",
     {"k_nope", "k_pe", "slots", "cache", NULL}, {"cache", NULL},
     {CACHE_PARAMS, {"in_dtype", NULL, "k_nope's and k_pe's dtype when ambiguous"},
      {NULL, NULL, NULL}},
     run_cache_write},
    {"cache_gather", "the rows of S sequences as NORMAL rows [sum(seq_lens), L + R]",
     {"cache", "block_table", "seq_lens", NULL}, {"out", NULL},
     {CACHE_PARAMS, {"kv_lora", NULL, "L (required)"}, {"rope", NULL, "R (required)"},
      {"out_dtype", "f32", "out: f32 | bf16"}, {NULL, NULL, NULL}},
     run_cache_gather},
};

const int mla_op_table_prepare_size =
    (int)(sizeof mla_op_table_prepare / sizeof mla_op_table_prepare[0]);
