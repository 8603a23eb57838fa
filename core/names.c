/* String forms of every public enum. */
#include "mla/mla.h"

#define NAME_OF(table, value, count) \
    (((int)(value) >= 0 && (int)(value) < (count)) ? (table)[(value)] : "unknown")

const char *mla_status_name(mla_status status)
{
    static const char *const names[MLA_STATUS_COUNT] = {
        "ok",           "null pointer",  "invalid argument", "wrong dtype",   "wrong shape",
        "wrong stride", "size overflow", "out of range",     "aliased output", "wrong device",
        "unsupported",  "out of memory", "no device",        "device error",  "i/o error",
        "malformed file", "backend not compiled",
    };
    return NAME_OF(names, status, MLA_STATUS_COUNT);
}

const char *mla_dtype_name(mla_dtype dtype)
{
    static const char *const names[MLA_DTYPE_COUNT] = {
        "f32", "f16", "bf16", "fp8_e4m3fn", "fp8_e4m3fnuz", "e8m0", "fp4x2", "u8", "i32", "i64", "f64",
    };
    return NAME_OF(names, dtype, MLA_DTYPE_COUNT);
}

size_t mla_dtype_size(mla_dtype dtype)
{
    static const unsigned char sizes[MLA_DTYPE_COUNT] = {4, 2, 2, 1, 1, 1, 1, 1, 4, 8, 8};
    return ((int)dtype >= 0 && dtype < MLA_DTYPE_COUNT) ? sizes[dtype] : 0;
}

const char *mla_memory_name(mla_memory memory)
{
    static const char *const names[MLA_MEMORY_COUNT] = {"host", "device"};
    return NAME_OF(names, memory, MLA_MEMORY_COUNT);
}

const char *mla_backend_name(mla_backend backend)
{
    static const char *const names[MLA_BACKEND_COUNT] = {"auto", "reference", "cpu", "hip"};
    return NAME_OF(names, backend, MLA_BACKEND_COUNT);
}

const char *mla_scale_layout_name(mla_scale_layout layout)
{
    static const char *const names[MLA_SCALE_LAYOUT_COUNT] = {"row_major", "transposed",
                                                              "preshuffled_gfx950"};
    return NAME_OF(names, layout, MLA_SCALE_LAYOUT_COUNT);
}

const char *mla_mxfp4_rule_name(mla_mxfp4_rule rule)
{
    static const char *const names[MLA_MXFP4_RULE_COUNT] = {"production", "ocp"};
    return NAME_OF(names, rule, MLA_MXFP4_RULE_COUNT);
}

const char *mla_fp8_scale_rule_name(mla_fp8_scale_rule rule)
{
    static const char *const names[MLA_FP8_SCALE_RULE_COUNT] = {"aiter", "ue8m0", "div"};
    return NAME_OF(names, rule, MLA_FP8_SCALE_RULE_COUNT);
}

const char *mla_op_name(mla_op op)
{
    static const char *const names[MLA_OP_COUNT] = {
        "convert",      "mxfp4_quant",  "mxfp4_dequant", "fp8_group_quant", "fp8_group_dequant",
        "rmsnorm",      "qk_rmsnorm",   "rope",          "linear",          "batched_gemm",
        "cache_write",  "cache_gather", "rope_cache",    "gemm_a16wfp4",    "gemm_a4w4",
        "flatten_mxfp4_quant", "flatten_fp8_quant", "layernorm", "hadamard",
        "indexer_k_cache_write", "indexer_k_gather", "indexer_logits", "topk",
        "indexer_head_weights", "attention", "attention_expanded",
    };
    return NAME_OF(names, op, MLA_OP_COUNT);
}

const char *mla_rope_style_name(mla_rope_style style)
{
    static const char *const names[MLA_ROPE_STYLE_COUNT] = {"interleaved", "neox"};
    return NAME_OF(names, style, MLA_ROPE_STYLE_COUNT);
}

const char *mla_cache_layout_name(mla_cache_layout layout)
{
    static const char *const names[MLA_CACHE_LAYOUT_COUNT] = {"normal", "shuffled", "fp8_scaled"};
    return NAME_OF(names, layout, MLA_CACHE_LAYOUT_COUNT);
}

const char *mla_rope_site_name(mla_rope_site site)
{
    static const char *const names[MLA_ROPE_SITE_COUNT] = {"separate", "fused_cache",
                                                           "attention"};
    return NAME_OF(names, site, MLA_ROPE_SITE_COUNT);
}

const char *mla_target_name(mla_target target)
{
    static const char *const names[MLA_TARGET_COUNT] = {"cpu", "gfx942", "gfx950", "sm_90",
                                                        "reference"};
    return NAME_OF(names, target, MLA_TARGET_COUNT);
}

const char *mla_stage_name(mla_stage stage)
{
    static const char *const names[MLA_STAGE_COUNT] = {
        "qkv_a_proj", "qk_norm", "q_b_proj", "absorb", "rope", "cache_write", "attention",
    };
    return NAME_OF(names, stage, MLA_STAGE_COUNT);
}

const char *mla_indexer_layout_name(mla_indexer_layout layout)
{
    static const char *const names[MLA_INDEXER_LAYOUT_COUNT] = {"auto", "normal", "shuffle"};
    return NAME_OF(names, layout, MLA_INDEXER_LAYOUT_COUNT);
}
