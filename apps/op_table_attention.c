/* `mla op` for the fused RoPE + concat + cache write and the attention core
 * (include/mla/mla_prepare.h, mla_attention.h). The cache travels as its raw
 * bytes, U8 [num_blocks, block_bytes]; index tensors as i32 / i64 files. */
#include <stdlib.h>
#include <string.h>

#include "apps/cmd.h"
#include "apps/op.h"

#define DT(d) (1u << (unsigned)(d))
#define FP8S (DT(MLA_DTYPE_FP8_E4M3FN) | DT(MLA_DTYPE_FP8_E4M3FNUZ))

static const char *const styles[] = {"interleaved", "neox"};

static int run_rope_cache(op_run *r)
{
    mla_tensor qn, qp, qpos, kn, kp, kpos, slots, cin, cache, cos, sin, qcat, kpo;
    mla_cache_desc d;
    int style;
    double qs;
    mla_dtype qd;
    OP_TRY(op_param_choice(r, "style", styles, 2, &style));
    OP_TRY(op_param_f64(r, "q_scale", &qs));
    OP_TRY(op_input(r, "q_nope", MLA_DTYPE_COUNT, "in_dtype", 0, &qn));
    OP_TRY(op_input(r, "q_pe", MLA_DTYPE_COUNT, "in_dtype", 0, &qp));
    OP_TRY(op_input(r, "q_pos", MLA_DTYPE_COUNT, NULL, 0, &qpos));
    OP_TRY(op_input(r, "k_nope", MLA_DTYPE_COUNT, "in_dtype", 0, &kn));
    OP_TRY(op_input(r, "k_pe", MLA_DTYPE_COUNT, "in_dtype", 0, &kp));
    OP_TRY(op_input(r, "k_pos", MLA_DTYPE_COUNT, NULL, 0, &kpos));
    OP_TRY(op_input(r, "slots", MLA_DTYPE_COUNT, NULL, 0, &slots));
    if (qn.ndim != 3 || qp.ndim != 3 || kn.ndim != 2 || kp.ndim != 2)
        return op_usage_error(r, "q_nope [T, H, L], q_pe [T, H, R], k_nope [Tk, L], k_pe [Tk, R]");
    const int64_t L = kn.shape[1], R = kp.shape[1];
    OP_TRY(op_param_dtype_or(r, "q_dtype", DT(MLA_DTYPE_BF16) | DT(MLA_DTYPE_F32) | FP8S,
                             MLA_DTYPE_BF16, &qd));
    OP_TRY(op_rope_table(r, R, &cos, &sin));
    OP_TRY(op_cache_desc(r, L, R, &d));
    OP_TRY(op_latent_cache(r, &slots, &d, &cin, &cache));
    if (L > INT64_MAX - R)
        return op_usage_error(r, "L + R overflows 64 bits");
    const int64_t qs3[3] = {qn.shape[0], qn.shape[1], L + R};
    OP_TRY(op_output(r, "q_cat", qd, 3, qs3, 0, &qcat));
    const int want_kpe = op_has_output(r, "k_pe_out");
    if (want_kpe)
        OP_TRY(op_output(r, "k_pe_out", kp.dtype, 2, kp.shape, 0, &kpo));
    mla_rope_cache_args a = {&cos,   &sin,      (mla_rope_style)style,
                             &qn,    &qp,       &qpos,
                             &kn,    &kp,       &kpos,
                             &slots, &d,        &cache,
                             &qcat,  (float)qs, want_kpe ? &kpo : NULL};
    return op_check(r, mla_fused_rope_concat_cache(op_ctx(r), &a));
}

static int run_attention(op_run *r)
{
    mla_tensor q, cin, cache, bt, lens, cu, topk, sinks, o, lse, cos, sin, qpos, kn, kp, kpos,
        slots, ws;
    mla_cache_desc cd;
    mla_attention_desc desc;
    memset(&desc, 0, sizeof desc);
    int64_t R, next_n, splits;
    double qs, scale;
    int style;
    OP_TRY(op_param_i64(r, "rope", &R));
    OP_TRY(op_param_i64(r, "next_n", &next_n));
    OP_TRY(op_param_i64(r, "num_splits", &splits));
    OP_TRY(op_param_f64(r, "q_scale", &qs));
    OP_TRY(op_param_choice(r, "style", styles, 2, &style));
    OP_TRY(op_param_dtype_or(r, "out_dtype", DT(MLA_DTYPE_F32) | DT(MLA_DTYPE_BF16), MLA_DTYPE_F32,
                             &desc.out_dtype));
    OP_TRY(op_input(r, "q", MLA_DTYPE_COUNT, "q_dtype", 0, &q));
    if (q.ndim != 3 || q.shape[2] <= R)
        return op_usage_error(r, "q must be [T, H, L + R] with L + R above --param rope");
    if (next_n < 1 || next_n > INT32_MAX || splits > 256)
        return op_usage_error(r, "next_n in [1, 2^31), num_splits in [0, 256]");
    if (op_param(r, "softmax_scale")) {
        OP_TRY(op_param_f64(r, "softmax_scale", &scale));
    } else { /* the config's: (nope + R)^-0.5 m^2 */
        mla_model_config cfg;
        OP_TRY(op_model_config(r, &cfg));
        scale = mla_softmax_scale(&cfg);
    }
    const int rope = op_has_input(r, "k_nope"), paged = op_has_input(r, "block_table");
    mla_attention_rope ar = {0};
    if (rope) {
        OP_TRY(op_rope_table(r, R, &cos, &sin));
        OP_TRY(op_input(r, "q_pos", MLA_DTYPE_COUNT, NULL, 0, &qpos));
        OP_TRY(op_input(r, "k_nope", MLA_DTYPE_COUNT, "in_dtype", 0, &kn));
        OP_TRY(op_input(r, "k_pe", MLA_DTYPE_COUNT, "in_dtype", 0, &kp));
        OP_TRY(op_input(r, "k_pos", MLA_DTYPE_COUNT, NULL, 0, &kpos));
        OP_TRY(op_input(r, "slots", MLA_DTYPE_COUNT, NULL, 0, &slots));
        ar =
            (mla_attention_rope){&cos, &sin, (mla_rope_style)style, &qpos, &kn, &kp, &kpos, &slots};
    }
    OP_TRY(op_cache_desc(r, q.shape[2] - R, R, &cd));
    OP_TRY(op_latent_cache(r, NULL, &cd, &cin, rope ? &cache : NULL));
    if (paged)
        OP_TRY(op_input(r, "block_table", MLA_DTYPE_I32, NULL, 0, &bt));
    OP_TRY(op_input(r, "context_lens", MLA_DTYPE_I32, NULL, 0, &lens));
    if (op_has_input(r, "cu_q_lens"))
        OP_TRY(op_input(r, "cu_q_lens", MLA_DTYPE_I32, NULL, 0, &cu));
    if (op_has_input(r, "topk_indices"))
        OP_TRY(op_input(r, "topk_indices", MLA_DTYPE_I32, NULL, 0, &topk));
    if (op_has_input(r, "sinks"))
        OP_TRY(op_input(r, "sinks", MLA_DTYPE_F32, NULL, 0, &sinks));
    const int64_t T = q.shape[0], H = q.shape[1], L = q.shape[2] - R;
    desc.heads = H;
    desc.cache = cd;
    desc.paged = paged;
    desc.q_dtype = q.dtype;
    desc.q_scale = (float)qs;
    desc.softmax_scale = (float)scale;
    desc.topk = op_has_input(r, "topk_indices") && topk.ndim == 2 ? topk.shape[1] : 0;
    desc.next_n = (int32_t)next_n;
    desc.num_splits = (int32_t)splits;
    const int64_t os[3] = {T, H, L}, ls[2] = {T, H};
    OP_TRY(op_output(r, "o", desc.out_dtype, 3, os, 0, &o));
    const int want_lse = op_has_output(r, "lse");
    if (want_lse)
        OP_TRY(op_output(r, "lse", MLA_DTYPE_F32, 2, ls, 0, &lse));
    mla_attention_args a = {&q,
                            rope ? &cache : &cin,
                            paged ? &bt : NULL,
                            &lens,
                            op_has_input(r, "cu_q_lens") ? &cu : NULL,
                            desc.topk ? &topk : NULL,
                            op_has_input(r, "sinks") ? &sinks : NULL,
                            rope ? &ar : NULL,
                            &o,
                            want_lse ? &lse : NULL,
                            NULL};
    mla_attention_plan *plan = NULL;
    OP_TRY(op_check(r, mla_attention_plan_create(op_ctx(r), &desc, &a, &plan)));
    const int64_t wb = mla_attention_plan_workspace_bytes(plan);
    int rc = op_tensor(r, MLA_DTYPE_U8, 1, &wb, NULL, &ws);
    a.workspace = &ws;
    if (rc == MLA_EXIT_OK)
        rc = op_check(r, mla_attention_run(op_ctx(r), plan, &a));
    mla_context_synchronize(op_ctx(r));
    mla_attention_plan_destroy(plan);
    return rc;
}

#define CACHE_PARAMS                                                                               \
    {"layout", "normal", "normal | shuffled | fp8_scaled"},                                        \
        {"dtype", "bf16", "cache elements: bf16 | e4m3fn | e4m3fnuz"},                             \
        {"block_size", "16", "tokens per block (shuffled: a multiple of 16)"},                     \
    {                                                                                              \
        "k_scale", "1", "per-tensor fp8 scale (normal, shuffled)"                                  \
    }
#define TABLE_PARAMS                                                                               \
    {"config", "DeepSeek-V3", "preset whose YaRN settings build cos/sin (without --in cos)"},      \
    {                                                                                              \
        "max_pos", NULL, "table rows (default the preset's max_pos)"                               \
    }

const op_desc mla_op_table_attention[] = {
    {"rope_cache",
     "fused RoPE + concat + cache write: q_cat [T, H, L + R] = [q_nope | rot(q_pe)], and\n"
     "    [k_nope | rot(k_pe)] of Tk tokens into the cache at slots (--in cache optional)",
     {"q_nope", "q_pe", "q_pos", "k_nope", "k_pe", "k_pos", "slots", "cache", "cos", "sin", NULL},
     {"cache", "q_cat", "k_pe_out", NULL},
     {CACHE_PARAMS,
      TABLE_PARAMS,
      {"style", "interleaved", "interleaved | neox"},
      {"q_dtype", "bf16", "q_cat: bf16 | f32 | e4m3fn | e4m3fnuz (stored sat(x / q_scale))"},
      {"q_scale", "1", "fp8 q_cat's scale"},
      {"in_dtype", NULL, "the q and k inputs' dtype when their files are ambiguous"},
      {NULL, NULL, NULL}},
     run_rope_cache},
    {"attention",
     "MLA attention of q [T, H, L + R] over the paged latent cache: decode (next_n >= 1),\n"
     "    chunked prefill (--in cu_q_lens), sparse (--in topk_indices [T, k]), sinks; o [T, H,\n"
     "    L], lse [T, H]; with --in k_nope (and q_pos, k_pe, k_pos, slots) RoPE inside it,\n"
     "    writing the new keys: --out cache",
     {"q", "cache", "block_table", "context_lens", "cu_q_lens", "topk_indices", "sinks", "cos",
      "sin", "q_pos", "k_nope", "k_pe", "k_pos", "slots", NULL},
     {"o", "lse", "cache", NULL},
     {CACHE_PARAMS,
      TABLE_PARAMS,
      {"rope", "64", "R: q's last R dims are the rope part"},
      {"softmax_scale", NULL, "default the config's, mla_softmax_scale"},
      {"q_dtype", NULL, "q's dtype when its file is ambiguous (bf16, e4m3fn, e4m3fnuz)"},
      {"q_scale", "1", "fp8 q: value = code * q_scale"},
      {"out_dtype", "f32", "o: f32 | bf16"},
      {"next_n", "1", "query rows per sequence without cu_q_lens"},
      {"num_splits", "0", "split-KV cap: 0 the plan decides, 1 off, n <= 256"},
      {"style", "interleaved", "RoPE inside attention: interleaved | neox"},
      {"in_dtype", NULL, "k_nope's and k_pe's dtype when ambiguous"},
      {NULL, NULL, NULL}},
     run_attention},
};

const int mla_op_table_attention_size =
    (int)(sizeof mla_op_table_attention / sizeof mla_op_table_attention[0]);
