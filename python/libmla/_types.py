"""ctypes mirrors of the public C structs and enums (include/mla/*.h).

Every struct here must match its C declaration field for field; the test
``test_struct_layout`` compares sizes and offsets with what the C compiler
reports (tests/package/struct_layout.c), so a change to a header that is not
mirrored here fails the suite instead of corrupting memory.
"""

import ctypes
import enum

c_i32 = ctypes.c_int32
c_i64 = ctypes.c_int64
c_enum = ctypes.c_int  # C enums are ints on every ABI libmla supports
c_vp = ctypes.c_void_p
c_str = ctypes.c_char_p

MAX_DIMS = 6
VARIANT_MAX_ARGS = 16  # MLA_VARIANT_MAX_ARGS


class Status(enum.IntEnum):
    OK = 0
    ERR_NULL_POINTER = 1
    ERR_INVALID_ARGUMENT = 2
    ERR_DTYPE = 3
    ERR_SHAPE = 4
    ERR_STRIDE = 5
    ERR_OVERFLOW = 6
    ERR_OUT_OF_RANGE = 7
    ERR_ALIAS = 8
    ERR_WRONG_DEVICE = 9
    ERR_UNSUPPORTED = 10
    ERR_OUT_OF_MEMORY = 11
    ERR_NO_DEVICE = 12
    ERR_DEVICE = 13
    ERR_IO = 14
    ERR_FORMAT = 15
    ERR_NOT_COMPILED = 16


class DType(enum.IntEnum):
    F32 = 0
    F16 = 1
    BF16 = 2
    FP8_E4M3FN = 3
    FP8_E4M3FNUZ = 4
    E8M0 = 5
    FP4X2 = 6
    U8 = 7
    I32 = 8
    I64 = 9
    F64 = 10


class Memory(enum.IntEnum):
    HOST = 0
    DEVICE = 1


class Backend(enum.IntEnum):
    AUTO = 0
    REFERENCE = 1
    CPU = 2
    HIP = 3


class CopyKind(enum.IntEnum):
    HOST_TO_HOST = 0
    HOST_TO_CONTEXT = 1
    CONTEXT_TO_HOST = 2
    CONTEXT_TO_CONTEXT = 3


class Saturation(enum.IntEnum):
    SATURATE = 0
    NON_SATURATE = 1


class MxFp4Rule(enum.IntEnum):
    PRODUCTION = 0
    OCP = 1


class ScaleLayout(enum.IntEnum):
    ROW_MAJOR = 0
    TRANSPOSED = 1
    PRESHUFFLED_GFX950 = 2


class Fp8ScaleRule(enum.IntEnum):
    AITER = 0
    UE8M0 = 1
    DIV = 2


class Op(enum.IntEnum):
    CONVERT = 0
    MXFP4_QUANT = 1
    MXFP4_DEQUANT = 2
    FP8_GROUP_QUANT = 3
    FP8_GROUP_DEQUANT = 4
    RMSNORM = 5
    QK_RMSNORM = 6
    ROPE = 7
    LINEAR = 8
    BATCHED_GEMM = 9
    CACHE_WRITE = 10
    CACHE_GATHER = 11
    ROPE_CACHE = 12
    GEMM_A16WFP4 = 13
    GEMM_A4W4 = 14
    FLATTEN_MXFP4_QUANT = 15
    FLATTEN_FP8_QUANT = 16
    LAYERNORM = 17
    HADAMARD = 18
    INDEXER_K_CACHE_WRITE = 19
    INDEXER_K_GATHER = 20
    INDEXER_LOGITS = 21
    TOPK = 22
    INDEXER_HEAD_WEIGHTS = 23
    ATTENTION = 24


class RopeStyle(enum.IntEnum):
    INTERLEAVED = 0
    NEOX = 1


class CacheLayout(enum.IntEnum):
    NORMAL = 0
    SHUFFLED = 1
    FP8_SCALED = 2


class RopeSite(enum.IntEnum):
    SEPARATE = 0
    FUSED_CACHE = 1
    ATTENTION = 2


class Target(enum.IntEnum):
    CPU = 0
    GFX942 = 1
    GFX950 = 2
    SM90 = 3
    REFERENCE = 4


class Stage(enum.IntEnum):
    QKV_A_PROJ = 0
    QK_NORM = 1
    Q_B_PROJ = 2
    ABSORB = 3
    ROPE = 4
    CACHE_WRITE = 5
    ATTENTION = 6


class IndexerLayout(enum.IntEnum):
    AUTO = 0
    NORMAL = 1
    SHUFFLE = 2


class WeightFormat(enum.IntEnum):
    BF16 = 0
    FP8_BLOCK = 1
    MXFP4 = 2
    FP8_TENSOR = 3


class KvBFp8(enum.IntEnum):
    KEEP = 0
    TO_BF16 = 1
    TO_TENSOR = 2


class Struct(ctypes.Structure):
    """A C struct mirror whose repr lists its fields."""

    def __repr__(self):
        parts = []
        for name, _ in self._fields_:
            v = getattr(self, name)
            if isinstance(v, bytes):
                v = v.decode(errors="replace")
            elif isinstance(v, ctypes.Array):
                v = list(v)
            parts.append("%s=%r" % (name, v))
        return "%s(%s)" % (type(self).__name__, ", ".join(parts))


class Tensor(Struct):
    _fields_ = [
        ("data", c_vp),
        ("dtype", c_enum),
        ("memory", c_enum),
        ("ndim", c_i32),
        ("shape", c_i64 * MAX_DIMS),
        ("stride", c_i64 * MAX_DIMS),
    ]


P_Tensor = ctypes.POINTER(Tensor)


class ContextOptions(Struct):
    _fields_ = [("num_threads", c_i32), ("device", c_i32), ("stream", c_vp)]


class Variant(Struct):
    _fields_ = [
        ("op", c_enum),
        ("in_dtype", c_enum),
        ("out_dtype", c_enum),
        ("layout", c_i32),
        ("rule", c_i32),
        ("group", c_i64),
        ("rows", c_i64),
        ("cols", c_i64),
        ("nargs", c_i32),
        ("arg_dtype", c_enum * VARIANT_MAX_ARGS),
        ("arg_view", ctypes.c_uint8 * VARIANT_MAX_ARGS),
        ("layout_x", c_i32),
        ("prequant", c_i32),
        ("splits", c_i32),
        ("next_n", c_i32),
    ]


class BuildInfo(Struct):
    _fields_ = [
        ("version", c_str),
        ("compiler", c_str),
        ("has_openmp", ctypes.c_int),
        ("has_openblas", ctypes.c_int),
        ("has_sleef", ctypes.c_int),
        ("has_hip", ctypes.c_int),
        ("hip_platform", c_str),
        ("gpu_targets", c_str),
        ("cpu_isa", c_str),
    ]


class RopeConfig(Struct):
    _fields_ = [
        ("dim", c_i32),
        ("base", ctypes.c_double),
        ("factor", ctypes.c_double),
        ("beta_fast", ctypes.c_double),
        ("beta_slow", ctypes.c_double),
        ("original_max_pos", c_i64),
        ("mscale", ctypes.c_double),
        ("mscale_all_dim", ctypes.c_double),
    ]


class ModelConfig(Struct):
    _fields_ = [
        ("name", ctypes.c_char * 32),
        ("hidden", c_i64),
        ("heads", c_i64),
        ("q_lora", c_i64),
        ("kv_lora", c_i64),
        ("nope", c_i64),
        ("rope", c_i64),
        ("v", c_i64),
        ("rms_eps", ctypes.c_float),
        ("max_pos", c_i64),
        ("rope_cfg", RopeConfig),
        ("index_heads", c_i64),
        ("index_head_dim", c_i64),
        ("index_topk", c_i64),
    ]

    @classmethod
    def from_hf(cls, source, *, ctx=None):
        """The attention config of a Hugging Face config.json (all heads):
        source is the file, its checkpoint directory, a dict or the JSON
        text (libmla.hf_config has the rest: num_layers, model_type, ...)."""
        from .checkpoint import hf_config
        return cls.from_buffer_copy(hf_config(source, ctx=ctx).model)

    @classmethod
    def preset(cls, name, **fields):
        """The built-in preset ``name`` (libmla.model_config)."""
        from .prepare import model_config
        return model_config(name, **fields)

    @staticmethod
    def preset_json(name):
        """The preset's config.json text (libmla.model_config_preset_json)."""
        from .checkpoint import model_config_preset_json
        return model_config_preset_json(name)


class CacheDesc(Struct):
    _fields_ = [
        ("layout", c_enum),
        ("dtype", c_enum),
        ("num_blocks", c_i64),
        ("block_size", c_i64),
        ("kv_lora", c_i64),
        ("rope", c_i64),
        ("k_scale", ctypes.c_float),
    ]


class RopeCacheArgs(Struct):
    _fields_ = [
        ("cos", P_Tensor),
        ("sin", P_Tensor),
        ("style", c_enum),
        ("q_nope", P_Tensor),
        ("q_pe", P_Tensor),
        ("q_pos", P_Tensor),
        ("k_nope", P_Tensor),
        ("k_pe", P_Tensor),
        ("k_pos", P_Tensor),
        ("slots", P_Tensor),
        ("cache_desc", ctypes.POINTER(CacheDesc)),
        ("cache", P_Tensor),
        ("q_cat", P_Tensor),
        ("q_scale", ctypes.c_float),
        ("k_pe_out", P_Tensor),
    ]


class PlanOptions(Struct):
    _fields_ = [
        ("target", c_enum),
        ("weight_dtype", c_enum),
        ("q_dtype", c_enum),
        ("cache_layout", c_enum),
        ("cache_dtype", c_enum),
        ("force_rope_site", c_i32),
    ]


class Weight(Struct):
    _fields_ = [("w", Tensor), ("scale", Tensor)]


class LayerWeights(Struct):
    _fields_ = [
        ("q_a_proj", Weight),
        ("q_a_layernorm", Tensor),
        ("q_b_proj", Weight),
        ("kv_a_proj_with_mqa", Weight),
        ("kv_a_layernorm", Tensor),
        ("kv_b_proj", Weight),
        ("o_proj", Weight),
    ]


class MxFp4Operand(Struct):
    _fields_ = [("codes", Tensor), ("scales", Tensor), ("layout", c_enum)]


class IndexerCacheDesc(Struct):
    _fields_ = [
        ("num_blocks", c_i64),
        ("block_size", c_i64),
        ("head_dim", c_i64),
        ("dtype", c_enum),
        ("layout", c_enum),
        ("ue8m0", c_i32),
    ]


class IndexerWeights(Struct):
    _fields_ = [
        ("wq_b", Weight),
        ("wk", Weight),
        ("k_norm_weight", Tensor),
        ("k_norm_bias", Tensor),
        ("weights_proj", Weight),
    ]


class IndexerOptions(Struct):
    _fields_ = [("style", c_enum), ("hadamard", c_i32), ("fp8", c_enum)]


class AttentionDesc(Struct):
    _fields_ = [
        ("heads", c_i64),
        ("cache", CacheDesc),
        ("paged", c_i32),
        ("q_dtype", c_enum),
        ("q_scale", ctypes.c_float),
        ("out_dtype", c_enum),
        ("softmax_scale", ctypes.c_float),
        ("topk", c_i64),
        ("next_n", c_i32),
        ("num_splits", c_i32),
    ]


class AttentionRope(Struct):
    _fields_ = [
        ("cos", P_Tensor),
        ("sin", P_Tensor),
        ("style", c_enum),
        ("q_pos", P_Tensor),
        ("k_nope", P_Tensor),
        ("k_pe", P_Tensor),
        ("k_pos", P_Tensor),
        ("slots", P_Tensor),
    ]


class AttentionArgs(Struct):
    _fields_ = [
        ("q", P_Tensor),
        ("cache", P_Tensor),
        ("block_table", P_Tensor),
        ("context_lens", P_Tensor),
        ("cu_q_lens", P_Tensor),
        ("topk_indices", P_Tensor),
        ("sinks", P_Tensor),
        ("rope", ctypes.POINTER(AttentionRope)),
        ("o", P_Tensor),
        ("lse", P_Tensor),
        ("workspace", P_Tensor),
    ]


class AttentionExpandedDesc(Struct):
    _fields_ = [
        ("heads", c_i64),
        ("nope", c_i64),
        ("v", c_i64),
        ("cache", CacheDesc),
        ("paged", c_i32),
        ("q_dtype", c_enum),
        ("out_dtype", c_enum),
        ("softmax_scale", ctypes.c_float),
        ("next_n", c_i32),
    ]


class AttentionExpandedArgs(Struct):
    _fields_ = [
        ("q_nope", P_Tensor),
        ("q_pe", P_Tensor),
        ("cache", P_Tensor),
        ("block_table", P_Tensor),
        ("context_lens", P_Tensor),
        ("cu_q_lens", P_Tensor),
        ("kv_b_proj", ctypes.POINTER(Weight)),
        ("o", P_Tensor),
        ("lse", P_Tensor),
        ("workspace", P_Tensor),
    ]


class SafetensorsInfo(Struct):
    _fields_ = [
        ("name", c_str),
        ("file_dtype", ctypes.c_char * 12),
        ("dtype", c_enum),
        ("ndim", c_i32),
        ("shape", c_i64 * MAX_DIMS),
        ("offset", c_i64),
        ("bytes", c_i64),
    ]


class LayerWeightFormats(Struct):
    _fields_ = [
        ("q_a_proj", c_enum),
        ("q_b_proj", c_enum),
        ("kv_a_proj_with_mqa", c_enum),
        ("kv_b_proj", c_enum),
        ("o_proj", c_enum),
        ("idx_wq_b", c_enum),
        ("idx_wk", c_enum),
        ("idx_weights_proj", c_enum),
    ]


class LayerWeightsEx(Struct):
    _fields_ = [
        ("base", LayerWeights),
        ("formats", LayerWeightFormats),
        ("w_kc", Tensor),
        ("w_vc", Tensor),
        ("w_kc_fp4", MxFp4Operand),
        ("w_vc_fp4", MxFp4Operand),
        ("has_indexer", c_i32),
        ("indexer", IndexerWeights),
        ("storage", c_vp),
        ("storage_bytes", c_i64),
        ("kv_b_tensor_scale", ctypes.c_float),
        ("config", ModelConfig),
        ("tp_rank", c_i32),
        ("tp_world_size", c_i32),
        ("kc_rule", c_enum),
    ]


class LayerLoadOptions(Struct):
    _fields_ = [
        ("kc_rule", c_enum),
        ("prefix", c_str),
        ("kv_b_fp8", c_enum),
        ("rank", c_i32),
        ("world_size", c_i32),
        ("check_only", c_i32),
    ]


class HfConfig(Struct):
    _fields_ = [
        ("model", ModelConfig),
        ("num_layers", c_i64),
        ("model_type", ctypes.c_char * 32),
        ("quant_method", ctypes.c_char * 16),
        ("fp8_block", c_i64 * 2),
    ]


# void (*)(void *user, int64_t done, int64_t total)
PROGRESS_FN = ctypes.CFUNCTYPE(None, c_vp, c_i64, c_i64)


class GenerateOptions(Struct):
    _fields_ = [
        ("first", c_i64),
        ("count", c_i64),
        ("seed", ctypes.c_uint64),
        ("formats", ctypes.POINTER(LayerWeightFormats)),
        ("shards", c_i32),
        ("num_layers", c_i64),
        ("progress", PROGRESS_FN),
        ("progress_user", c_vp),
    ]


class LayerBatch(Struct):
    _fields_ = [
        ("positions", P_Tensor),
        ("slots", P_Tensor),
        ("block_table", P_Tensor),
        ("context_lens", P_Tensor),
        ("cu_q_lens", P_Tensor),
        ("next_n", c_i32),
    ]


class LayerOptions(Struct):
    _fields_ = [
        ("dense", c_i32),
        ("num_splits", c_i32),
        ("act", c_enum),
        ("indexer", IndexerOptions),
        ("index_cache", IndexerCacheDesc),
        ("form", c_enum),
        ("expanded_keys", c_i64),
    ]


class LayerBuffers(Struct):
    _fields_ = [
        ("cos", P_Tensor),
        ("sin", P_Tensor),
        ("cache", P_Tensor),
        ("index_cache", P_Tensor),
        ("workspace", P_Tensor),
    ]


class Tuning(Struct):
    """mla_tuning (include/mla/mla_tuning.h, docs/TUNING.md): the kernel-path
    knobs; 0 is auto in every field."""
    _fields_ = [
        ("struct_size", ctypes.c_uint32),
        ("version", ctypes.c_uint32),
        ("cpu_isa", c_i32),
        ("hip_attention", c_i32),
        ("hip_att_row_groups", c_i32),
        ("hip_logits", c_i32),
        ("hip_logits_stages", c_i32),
        ("hip_topk_blocks", c_i32),
        ("hip_topk_pdl", c_i32),
        ("hip_gemm", c_i32),
        ("hip_gemm_splits", c_i32),
        ("hip_mxfp4", c_i32),
    ]


# Every struct the C headers declare, by its C name (test_struct_layout).
C_STRUCTS = {
    "mla_tensor": Tensor,
    "mla_context_options": ContextOptions,
    "mla_variant": Variant,
    "mla_build_info": BuildInfo,
    "mla_rope_config": RopeConfig,
    "mla_model_config": ModelConfig,
    "mla_cache_desc": CacheDesc,
    "mla_rope_cache_args": RopeCacheArgs,
    "mla_plan_options": PlanOptions,
    "mla_weight": Weight,
    "mla_layer_weights": LayerWeights,
    "mla_mxfp4_operand": MxFp4Operand,
    "mla_indexer_cache_desc": IndexerCacheDesc,
    "mla_indexer_weights": IndexerWeights,
    "mla_indexer_options": IndexerOptions,
    "mla_attention_desc": AttentionDesc,
    "mla_attention_rope": AttentionRope,
    "mla_attention_args": AttentionArgs,
    "mla_attention_expanded_desc": AttentionExpandedDesc,
    "mla_attention_expanded_args": AttentionExpandedArgs,
    "mla_safetensors_info": SafetensorsInfo,
    "mla_layer_weight_formats": LayerWeightFormats,
    "mla_layer_weights_ex": LayerWeightsEx,
    "mla_layer_load_options": LayerLoadOptions,
    "mla_hf_config": HfConfig,
    "mla_generate_options": GenerateOptions,
    "mla_layer_batch": LayerBatch,
    "mla_layer_options": LayerOptions,
    "mla_layer_buffers": LayerBuffers,
    "mla_tuning": Tuning,
}
