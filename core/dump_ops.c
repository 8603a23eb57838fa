/* The dumps of the single-kernel ops (core/dump.h): each writes the call
 * as the `mla op` line that reruns it (the descriptors of apps/op_table*.c),
 * then makes the call. The entry points hand over here before validating,
 * so a refused call is captured too. */
#include <stdio.h>

#include "core/dump_ops.h"

static const char *scales_layout(const mla_tensor *s)
{
    return s && s->ndim == 2 && s->stride[0] == 1 && s->shape[1] > 1 ? "transposed" : "row_major";
}

mla_status mla_dump_convert(mla_context *ctx, const mla_tensor *x, mla_tensor *y,
                            mla_saturation mode)
{
    mla_dump *d = mla_dump_begin(ctx, MLA_OP_CONVERT);
    mla_dump_in(d, "x", x);
    if (y)
        mla_dump_param(d, "dtype", "%s", mla_dtype_name(y->dtype));
    mla_dump_param(d, "mode", "%s", mode == MLA_NON_SATURATE ? "nonsaturate" : "saturate");
    mla_dump_out(d, "y", y);
    return mla_dump_end(d, mla_convert(ctx, x, y, mode));
}

mla_status mla_dump_mxfp4_quant(mla_context *ctx, const mla_tensor *x, mla_tensor *codes,
                                mla_tensor *scales, mla_scale_layout layout, mla_mxfp4_rule rule)
{
    mla_dump *d = mla_dump_begin(ctx, MLA_OP_MXFP4_QUANT);
    mla_dump_in(d, "x", x);
    mla_dump_param(d, "rule", "%s", mla_mxfp4_rule_name(rule));
    mla_dump_param(d, "layout", "%s", mla_scale_layout_name(layout));
    mla_dump_out(d, "codes", codes);
    mla_dump_out(d, "scales", scales);
    return mla_dump_end(d, mla_mxfp4_quant(ctx, x, codes, scales, layout, rule));
}

mla_status mla_dump_mxfp4_dequant(mla_context *ctx, const mla_tensor *codes,
                                  const mla_tensor *scales, mla_scale_layout layout, mla_tensor *y)
{
    mla_dump *d = mla_dump_begin(ctx, MLA_OP_MXFP4_DEQUANT);
    mla_dump_in(d, "codes", codes);
    mla_dump_in(d, "scales", scales);
    mla_dump_param(d, "layout", "%s", mla_scale_layout_name(layout));
    if (y)
        mla_dump_param(d, "dtype", "%s", mla_dtype_name(y->dtype));
    mla_dump_out(d, "y", y);
    return mla_dump_end(d, mla_mxfp4_dequant(ctx, codes, scales, layout, y));
}

mla_status mla_dump_fp8_group_quant(mla_context *ctx, const mla_tensor *x, mla_tensor *codes,
                                    mla_tensor *scales, int64_t group, mla_fp8_scale_rule rule)
{
    mla_dump *d = mla_dump_begin(ctx, MLA_OP_FP8_GROUP_QUANT);
    mla_dump_in(d, "x", x);
    if (codes)
        mla_dump_param(d, "dtype", "%s", mla_dtype_name(codes->dtype));
    mla_dump_param(d, "rule", "%s", mla_fp8_scale_rule_name(rule));
    mla_dump_param(d, "group", "%lld", (long long)group);
    mla_dump_param(d, "scales_layout", "%s", scales_layout(scales));
    mla_dump_out(d, "codes", codes);
    mla_dump_out(d, "scales", scales);
    return mla_dump_end(d, mla_fp8_group_quant(ctx, x, codes, scales, group, rule));
}

mla_status mla_dump_fp8_group_dequant(mla_context *ctx, const mla_tensor *codes,
                                      const mla_tensor *scales, int64_t group, mla_tensor *y)
{
    mla_dump *d = mla_dump_begin(ctx, MLA_OP_FP8_GROUP_DEQUANT);
    mla_dump_in(d, "codes", codes);
    mla_dump_in(d, "scales", scales);
    if (codes)
        mla_dump_param(d, "in_dtype", "%s", mla_dtype_name(codes->dtype));
    if (y)
        mla_dump_param(d, "dtype", "%s", mla_dtype_name(y->dtype));
    mla_dump_param(d, "group", "%lld", (long long)group);
    mla_dump_param(d, "scales_layout", "%s", scales_layout(scales));
    mla_dump_out(d, "y", y);
    return mla_dump_end(d, mla_fp8_group_dequant(ctx, codes, scales, group, y));
}

mla_status mla_dump_rmsnorm(mla_context *ctx, const mla_tensor *x, const mla_tensor *w, float eps,
                            mla_tensor *y)
{
    mla_dump *d = mla_dump_begin(ctx, MLA_OP_RMSNORM);
    mla_dump_in(d, "x", x);
    mla_dump_in(d, "w", w);
    mla_dump_param(d, "eps", "%.9g", (double)eps);
    if (y)
        mla_dump_param(d, "dtype", "%s", mla_dtype_name(y->dtype));
    mla_dump_out(d, "y", y);
    return mla_dump_end(d, mla_rmsnorm(ctx, x, w, eps, y));
}

mla_status mla_dump_qk_rmsnorm(mla_context *ctx, const mla_tensor *q, const mla_tensor *q_w,
                               float q_eps, const mla_tensor *kv, const mla_tensor *kv_w,
                               float kv_eps, mla_tensor *q_out, mla_tensor *q_scales,
                               mla_tensor *kv_out)
{
    mla_dump *d = mla_dump_begin(ctx, MLA_OP_QK_RMSNORM);
    mla_dump_in(d, "q", q);
    mla_dump_in(d, "q_w", q_w);
    mla_dump_in(d, "kv", kv);
    mla_dump_in(d, "kv_w", kv_w);
    mla_dump_param(d, "q_eps", "%.9g", (double)q_eps);
    mla_dump_param(d, "kv_eps", "%.9g", (double)kv_eps);
    if (q_out)
        mla_dump_param(d, "dtype", "%s", mla_dtype_name(q_out->dtype));
    if (kv_out)
        mla_dump_param(d, "kv_dtype", "%s", mla_dtype_name(kv_out->dtype));
    mla_dump_out(d, "q_out", q_out);
    mla_dump_out(d, "kv_out", kv_out);
    mla_dump_out(d, "q_scales", q_scales);
    return mla_dump_end(
        d, mla_fused_qk_rmsnorm(ctx, q, q_w, q_eps, kv, kv_w, kv_eps, q_out, q_scales, kv_out));
}

mla_status mla_dump_rope(mla_context *ctx, const mla_tensor *cos, const mla_tensor *sin,
                         const mla_tensor *positions, const mla_tensor *x, mla_tensor *y,
                         mla_rope_style style)
{
    mla_dump *d = mla_dump_begin(ctx, MLA_OP_ROPE);
    mla_dump_in(d, "x", x);
    mla_dump_in(d, "positions", positions);
    mla_dump_in(d, "cos", cos);
    mla_dump_in(d, "sin", sin);
    mla_dump_param(d, "style", "%s", mla_rope_style_name(style));
    if (cos && cos->ndim == 2)
        mla_dump_param(d, "rope_dim", "%lld", (long long)(2 * cos->shape[1]));
    if (y)
        mla_dump_param(d, "dtype", "%s", mla_dtype_name(y->dtype));
    mla_dump_out(d, "y", y);
    return mla_dump_end(d, mla_rope(ctx, cos, sin, positions, x, y, style));
}

mla_status mla_dump_linear(mla_context *ctx, const mla_tensor *x, const mla_tensor *w,
                           const mla_tensor *w_scale, mla_tensor *y)
{
    mla_dump *d = mla_dump_begin(ctx, MLA_OP_LINEAR);
    mla_dump_in(d, "x", x);
    mla_dump_in(d, "w", w);
    mla_dump_in(d, "w_scale", w_scale);
    if (y)
        mla_dump_param(d, "dtype", "%s", mla_dtype_name(y->dtype));
    mla_dump_out(d, "y", y);
    return mla_dump_end(d, mla_linear(ctx, x, w, w_scale, y));
}

mla_status mla_dump_batched_gemm(mla_context *ctx, const mla_tensor *x, const mla_tensor *w,
                                 float w_scale, mla_tensor *y)
{
    mla_dump *d = mla_dump_begin(ctx, MLA_OP_BATCHED_GEMM);
    mla_dump_in(d, "x", x);
    mla_dump_in(d, "w", w);
    mla_dump_param(d, "w_scale", "%.9g", (double)w_scale);
    if (y)
        mla_dump_param(d, "dtype", "%s", mla_dtype_name(y->dtype));
    mla_dump_out(d, "y", y);
    return mla_dump_end(d, mla_batched_gemm(ctx, x, w, w_scale, y));
}

mla_status mla_dump_cache_write(mla_context *ctx, const mla_cache_desc *desc, mla_tensor *cache,
                                const mla_tensor *k_nope, const mla_tensor *k_pe,
                                const mla_tensor *slots)
{
    mla_dump *d = mla_dump_begin(ctx, MLA_OP_CACHE_WRITE);
    mla_dump_in(d, "k_nope", k_nope);
    mla_dump_in(d, "k_pe", k_pe);
    mla_dump_in(d, "slots", slots);
    mla_dump_in(d, "cache", cache);
    if (desc)
        mla_dump_cache_desc(d, desc);
    mla_dump_out(d, "cache", cache);
    return mla_dump_end(d, mla_cache_write(ctx, desc, cache, k_nope, k_pe, slots));
}

mla_status mla_dump_cache_gather(mla_context *ctx, const mla_cache_desc *desc,
                                 const mla_tensor *cache, const mla_tensor *block_table,
                                 const mla_tensor *seq_lens, mla_tensor *out)
{
    mla_dump *d = mla_dump_begin(ctx, MLA_OP_CACHE_GATHER);
    mla_dump_in(d, "cache", cache);
    mla_dump_in(d, "block_table", block_table);
    mla_dump_in(d, "seq_lens", seq_lens);
    if (desc) {
        mla_dump_cache_desc(d, desc);
        mla_dump_param(d, "kv_lora", "%lld", (long long)desc->kv_lora);
        mla_dump_param(d, "rope", "%lld", (long long)desc->rope);
    }
    if (out)
        mla_dump_param(d, "out_dtype", "%s", mla_dtype_name(out->dtype));
    mla_dump_out(d, "out", out);
    return mla_dump_end(d, mla_cache_gather(ctx, desc, cache, block_table, seq_lens, out));
}

static const char *operand_layout(mla_scale_layout l)
{
    return l == MLA_SCALE_PRESHUFFLED_GFX950 ? "preshuffled_gfx950"
           : l == MLA_SCALE_TRANSPOSED       ? "transposed"
                                             : "row_major";
}

static void dump_operand(mla_dump *d, const char *name, const mla_mxfp4_operand *o)
{
    char c[32], s[32], l[32];
    snprintf(c, sizeof c, "%s_codes", name);
    snprintf(s, sizeof s, "%s_scales", name);
    snprintf(l, sizeof l, "%s_layout", name);
    if (!o)
        return;
    mla_dump_in(d, c, &o->codes);
    mla_dump_in(d, s, &o->scales);
    mla_dump_param(d, l, "%s", operand_layout(o->layout));
}

mla_status mla_dump_gemm_a16wfp4(mla_context *ctx, const mla_tensor *x, const mla_mxfp4_operand *w,
                                 int32_t prequant, mla_mxfp4_rule rule, mla_tensor *y)
{
    mla_dump *d = mla_dump_begin(ctx, MLA_OP_GEMM_A16WFP4);
    mla_dump_in(d, "x", x);
    dump_operand(d, "w", w);
    mla_dump_param(d, "prequant", "%d", (int)(prequant != 0));
    mla_dump_param(d, "rule", "%s", mla_mxfp4_rule_name(rule));
    if (y)
        mla_dump_param(d, "dtype", "%s", mla_dtype_name(y->dtype));
    mla_dump_out(d, "y", y);
    return mla_dump_end(d, mla_batched_gemm_a16wfp4(ctx, x, w, prequant, rule, y));
}

mla_status mla_dump_gemm_a4w4(mla_context *ctx, const mla_mxfp4_operand *x,
                              const mla_mxfp4_operand *w, mla_tensor *y)
{
    mla_dump *d = mla_dump_begin(ctx, MLA_OP_GEMM_A4W4);
    dump_operand(d, "x", x);
    dump_operand(d, "w", w);
    if (y)
        mla_dump_param(d, "dtype", "%s", mla_dtype_name(y->dtype));
    mla_dump_out(d, "y", y);
    return mla_dump_end(d, mla_batched_gemm_a4w4(ctx, x, w, y));
}

mla_status mla_dump_flatten_mxfp4_quant(mla_context *ctx, const mla_tensor *x, mla_tensor *codes,
                                        mla_tensor *scales, mla_mxfp4_rule rule)
{
    mla_dump *d = mla_dump_begin(ctx, MLA_OP_FLATTEN_MXFP4_QUANT);
    mla_dump_in(d, "x", x);
    mla_dump_param(d, "rule", "%s", mla_mxfp4_rule_name(rule));
    mla_dump_param(d, "scales_layout", "%s", scales_layout(scales));
    mla_dump_out(d, "codes", codes);
    mla_dump_out(d, "scales", scales);
    return mla_dump_end(d, mla_fused_flatten_mxfp4_quant(ctx, x, codes, scales, rule));
}

mla_status mla_dump_flatten_fp8_quant(mla_context *ctx, const mla_tensor *x, mla_tensor *codes,
                                      mla_tensor *scales)
{
    mla_dump *d = mla_dump_begin(ctx, MLA_OP_FLATTEN_FP8_QUANT);
    mla_dump_in(d, "x", x);
    if (codes)
        mla_dump_param(d, "dtype", "%s", mla_dtype_name(codes->dtype));
    mla_dump_param(d, "scales_layout", "%s", scales_layout(scales));
    mla_dump_out(d, "codes", codes);
    mla_dump_out(d, "scales", scales);
    return mla_dump_end(d, mla_fused_flatten_fp8_group_quant(ctx, x, codes, scales));
}

mla_status mla_dump_layernorm(mla_context *ctx, const mla_tensor *x, const mla_tensor *w,
                              const mla_tensor *b, float eps, mla_tensor *y)
{
    mla_dump *d = mla_dump_begin(ctx, MLA_OP_LAYERNORM);
    mla_dump_in(d, "x", x);
    mla_dump_in(d, "w", w);
    mla_dump_in(d, "b", b);
    mla_dump_param(d, "eps", "%.9g", (double)eps);
    if (y)
        mla_dump_param(d, "dtype", "%s", mla_dtype_name(y->dtype));
    mla_dump_out(d, "y", y);
    return mla_dump_end(d, mla_layernorm(ctx, x, w, b, eps, y));
}

mla_status mla_dump_hadamard(mla_context *ctx, const mla_tensor *x, mla_tensor *y)
{
    mla_dump *d = mla_dump_begin(ctx, MLA_OP_HADAMARD);
    mla_dump_in(d, "x", x);
    if (y)
        mla_dump_param(d, "dtype", "%s", mla_dtype_name(y->dtype));
    mla_dump_out(d, "y", y);
    return mla_dump_end(d, mla_hadamard(ctx, x, y));
}

void mla_dump_index_desc(mla_dump *d, const mla_indexer_cache_desc *c)
{
    if (!c)
        return;
    mla_dump_param(d, "dtype", "%s", mla_dtype_name(c->dtype));
    mla_dump_param(d, "block_size", "%lld", (long long)c->block_size);
    mla_dump_param(d, "layout", "%s", mla_indexer_layout_name(c->layout));
    mla_dump_param(d, "head_dim", "%lld", (long long)c->head_dim);
    mla_dump_param(d, "ue8m0", "%d", (int)(c->ue8m0 != 0));
}

mla_status mla_dump_indexer_k_cache_write(mla_context *ctx, const mla_indexer_cache_desc *desc,
                                          mla_tensor *cache, const mla_tensor *k,
                                          const mla_tensor *slots)
{
    mla_dump *d = mla_dump_begin(ctx, MLA_OP_INDEXER_K_CACHE_WRITE);
    mla_dump_in(d, "k", k);
    mla_dump_in(d, "slots", slots);
    mla_dump_in(d, "cache", cache);
    mla_dump_index_desc(d, desc);
    mla_dump_out(d, "cache", cache);
    return mla_dump_end(d, mla_indexer_k_cache_write(ctx, desc, cache, k, slots));
}

mla_status mla_dump_indexer_k_gather(mla_context *ctx, const mla_indexer_cache_desc *desc,
                                     const mla_tensor *cache, const mla_tensor *block_table,
                                     const mla_tensor *cu_seq_lens, mla_tensor *k_fp8,
                                     mla_tensor *k_scale)
{
    mla_dump *d = mla_dump_begin(ctx, MLA_OP_INDEXER_K_GATHER);
    mla_dump_in(d, "cache", cache);
    mla_dump_in(d, "block_table", block_table);
    mla_dump_in(d, "cu_seq_lens", cu_seq_lens);
    mla_dump_index_desc(d, desc);
    mla_dump_out(d, "k_fp8", k_fp8);
    mla_dump_out(d, "k_scale", k_scale);
    return mla_dump_end(
        d, mla_indexer_k_gather(ctx, desc, cache, block_table, cu_seq_lens, k_fp8, k_scale));
}

mla_status mla_dump_indexer_logits(mla_context *ctx, const mla_indexer_cache_desc *desc,
                                   const mla_tensor *cache, const mla_tensor *q,
                                   const mla_tensor *w, const mla_tensor *block_table,
                                   const mla_tensor *context_lens, int32_t next_n,
                                   mla_tensor *logits)
{
    mla_dump *d = mla_dump_begin(ctx, MLA_OP_INDEXER_LOGITS);
    mla_dump_in(d, "cache", cache);
    mla_dump_in(d, "q", q);
    mla_dump_in(d, "w", w);
    mla_dump_in(d, "block_table", block_table);
    mla_dump_in(d, "context_lens", context_lens);
    mla_dump_index_desc(d, desc);
    mla_dump_param(d, "next_n", "%d", (int)next_n);
    if (logits && logits->ndim == 2)
        mla_dump_param(d, "max_len", "%lld", (long long)logits->shape[1]);
    mla_dump_out(d, "logits", logits);
    return mla_dump_end(
        d, mla_indexer_logits(ctx, desc, cache, q, w, block_table, context_lens, next_n, logits));
}

mla_status mla_dump_topk(mla_context *ctx, const mla_tensor *logits, const mla_tensor *lengths,
                         int64_t k, mla_tensor *indices)
{
    mla_dump *d = mla_dump_begin(ctx, MLA_OP_TOPK);
    mla_dump_in(d, "logits", logits);
    mla_dump_in(d, "lengths", lengths);
    mla_dump_param(d, "k", "%lld", (long long)k);
    mla_dump_out(d, "indices", indices);
    return mla_dump_end(d, mla_topk(ctx, logits, lengths, k, indices));
}

mla_status mla_dump_indexer_head_weights(mla_context *ctx, const mla_tensor *w,
                                         const mla_tensor *s_q, mla_tensor *w_out)
{
    mla_dump *d = mla_dump_begin(ctx, MLA_OP_INDEXER_HEAD_WEIGHTS);
    mla_dump_in(d, "w", w);
    mla_dump_in(d, "s_q", s_q);
    mla_dump_out(d, "w_out", w_out);
    return mla_dump_end(d, mla_indexer_head_weights(ctx, w, s_q, w_out));
}
