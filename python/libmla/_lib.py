"""Finding and loading libmla.so, the C prototypes, and libmla.Error.

Where the library comes from, first match wins:

1. ``LIBMLA_LIBRARY``: a path to libmla.so (or .so.0), or a directory holding it;
2. a copy installed next to this package (``LIBMLA_LIBRARY=... pip install ./python``
   copies the library it names into the package);
3. the dynamic loader's search path (``libmla.so.0`` after ``cmake --install`` to
   a prefix the loader knows, or ``LD_LIBRARY_PATH``);
4. in a source checkout (``PYTHONPATH=python``), ``build/default/libmla.so.0``.

Every C function is declared once, in ``_PROTOTYPES``; a new entry point of the
C API needs one line there (``test_api_coverage`` fails until it has it).
"""

import ctypes
import os
import threading

from . import _types as T

_SONAME = "libmla.so.0"

c_int = ctypes.c_int
c_i32 = ctypes.c_int32
c_i64 = ctypes.c_int64
c_u8 = ctypes.c_uint8
c_u16 = ctypes.c_uint16
c_u64 = ctypes.c_uint64
c_f = ctypes.c_float
c_d = ctypes.c_double
c_sz = ctypes.c_size_t
c_vp = ctypes.c_void_p
c_str = ctypes.c_char_p
VOID = None
ST = c_int  # mla_status
EN = c_int  # any enum
CTX = c_vp  # mla_context *
PT = T.P_Tensor
P = ctypes.POINTER

FILL_FN = ctypes.CFUNCTYPE(c_int, c_vp, c_str, c_vp, c_sz)

# name: (restype, argtypes), in the order of the headers.
_PROTOTYPES = {
    # mla.h
    "mla_status_name": (c_str, [EN]),
    "mla_version": (VOID, [P(c_int), P(c_int), P(c_int)]),
    "mla_version_string": (c_str, []),
    "mla_dtype_name": (c_str, [EN]),
    "mla_dtype_size": (c_sz, [EN]),
    "mla_memory_name": (c_str, [EN]),
    "mla_tensor_init": (ST, [PT, c_vp, EN, EN, c_i32, P(c_i64)]),
    "mla_tensor_numel": (c_i64, [PT]),
    "mla_tensor_is_contiguous": (c_int, [PT]),
    "mla_tensor_transpose": (ST, [PT, c_i32, c_i32]),
    "mla_backend_name": (c_str, [EN]),
    "mla_backend_compiled": (c_int, [EN]),
    "mla_context_create": (ST, [EN, P(T.ContextOptions), P(CTX)]),
    "mla_context_destroy": (VOID, [CTX]),
    "mla_context_backend": (EN, [CTX]),
    "mla_context_memory": (EN, [CTX]),
    "mla_context_fallback_reason": (c_str, [CTX]),
    "mla_context_device_name": (c_str, [CTX]),
    "mla_context_error_param": (c_str, [CTX]),
    "mla_context_error_detail": (c_str, [CTX]),
    "mla_context_set_dump": (ST, [CTX, c_str, c_str, c_i32]),
    "mla_context_dump_status": (c_str, [CTX]),
    "mla_context_synchronize": (ST, [CTX]),
    "mla_context_set_stream": (ST, [CTX, c_vp]),
    "mla_context_get_stream": (c_vp, [CTX]),
    "mla_malloc": (ST, [CTX, c_sz, P(c_vp)]),
    "mla_free": (ST, [CTX, c_vp]),
    "mla_memcpy": (ST, [CTX, c_vp, c_vp, c_sz, EN]),
    "mla_memset": (ST, [CTX, c_vp, c_int, c_sz]),
    "mla_f32_to_bf16": (c_u16, [c_f]),
    "mla_bf16_to_f32": (c_f, [c_u16]),
    "mla_f32_to_f16": (c_u16, [c_f]),
    "mla_f16_to_f32": (c_f, [c_u16]),
    "mla_f32_to_fp8": (c_u8, [c_f, EN, EN]),
    "mla_fp8_to_f32": (c_f, [c_u8, EN]),
    "mla_fp8_max": (c_f, [EN]),
    "mla_e8m0_to_f32": (c_f, [c_u8]),
    "mla_f32_to_fp4": (c_u8, [c_f]),
    "mla_fp4_to_f32": (c_f, [c_u8]),
    "mla_mxfp4_quantize_block": (VOID, [P(c_f), EN, P(c_u8), P(c_u8)]),
    "mla_scale_layout_name": (c_str, [EN]),
    "mla_scale_preshuffled_bytes": (c_i64, [c_i64, c_i64]),
    "mla_scale_preshuffled_offset": (c_i64, [c_i64, c_i64, c_i64]),
    "mla_mxfp4_rule_name": (c_str, [EN]),
    "mla_fp8_scale_rule_name": (c_str, [EN]),
    "mla_op_name": (c_str, [EN]),
    "mla_supports": (ST, [CTX, P(T.Variant), P(c_str)]),
    "mla_convert": (ST, [CTX, PT, PT, EN]),
    "mla_mxfp4_quant": (ST, [CTX, PT, PT, PT, EN, EN]),
    "mla_mxfp4_dequant": (ST, [CTX, PT, PT, EN, PT]),
    "mla_fp8_group_quant": (ST, [CTX, PT, PT, PT, c_i64, EN]),
    "mla_fp8_group_dequant": (ST, [CTX, PT, PT, c_i64, PT]),
    "mla_build_info_get": (P(T.BuildInfo), []),
    "mla_gpu_count": (c_int, []),
    "mla_gpu_name": (ST, [c_int, c_str, c_sz]),
    # mla_prepare.h
    "mla_rope_style_name": (c_str, [EN]),
    "mla_model_config_preset": (ST, [c_str, P(T.ModelConfig)]),
    "mla_model_config_preset_name": (c_str, [c_int]),
    "mla_softmax_scale": (c_d, [P(T.ModelConfig)]),
    "mla_rope_table_build": (ST, [P(T.RopeConfig), c_i64, P(c_f), P(c_f)]),
    "mla_rope": (ST, [CTX, PT, PT, PT, PT, PT, EN]),
    "mla_rmsnorm": (ST, [CTX, PT, PT, c_f, PT]),
    "mla_fused_qk_rmsnorm": (ST, [CTX, PT, PT, c_f, PT, PT, c_f, PT, PT, PT]),
    "mla_linear": (ST, [CTX, PT, PT, PT, PT]),
    "mla_batched_gemm": (ST, [CTX, PT, PT, c_f, PT]),
    "mla_cache_layout_name": (c_str, [EN]),
    "mla_cache_block_bytes": (ST, [P(T.CacheDesc), P(c_i64)]),
    "mla_cache_write": (ST, [CTX, P(T.CacheDesc), PT, PT, PT, PT]),
    "mla_cache_gather": (ST, [CTX, P(T.CacheDesc), PT, PT, PT, PT]),
    "mla_fused_rope_concat_cache": (ST, [CTX, P(T.RopeCacheArgs)]),
    "mla_rope_site_name": (c_str, [EN]),
    "mla_target_name": (c_str, [EN]),
    "mla_stage_name": (c_str, [EN]),
    "mla_context_target": (EN, [CTX]),
    "mla_plan_options_default": (VOID, [EN, P(T.PlanOptions)]),
    "mla_plan_create": (ST, [P(T.ModelConfig), P(T.PlanOptions), P(c_vp)]),
    "mla_plan_destroy": (VOID, [c_vp]),
    "mla_plan_rope_site": (EN, [c_vp]),
    "mla_plan_rotates_at": (c_int, [c_vp, EN]),
    "mla_plan_kernel": (c_str, [c_vp, EN]),
    "mla_plan_config": (P(T.ModelConfig), [c_vp]),
    "mla_plan_options_get": (P(T.PlanOptions), [c_vp]),
    "mla_prepare_workspace_bytes": (ST, [c_vp, c_i64, EN, P(c_i64)]),
    "mla_prepare": (
        ST,
        [CTX, c_vp, P(T.LayerWeights), PT, PT, PT, PT, PT, P(T.CacheDesc), PT, PT, PT],
    ),
    # mla_mxfp4.h
    "mla_batched_gemm_a16wfp4": (ST, [CTX, PT, P(T.MxFp4Operand), c_i32, EN, PT]),
    "mla_batched_gemm_a4w4": (ST, [CTX, P(T.MxFp4Operand), P(T.MxFp4Operand), PT]),
    "mla_fused_flatten_mxfp4_quant": (ST, [CTX, PT, PT, PT, EN]),
    "mla_fused_flatten_fp8_group_quant": (ST, [CTX, PT, PT, PT]),
    # mla_indexer.h
    "mla_layernorm": (ST, [CTX, PT, PT, PT, c_f, PT]),
    "mla_hadamard": (ST, [CTX, PT, PT]),
    "mla_indexer_layout_name": (c_str, [EN]),
    "mla_indexer_layout_for": (EN, [c_i64]),
    "mla_indexer_cache_block_bytes": (ST, [P(T.IndexerCacheDesc), P(c_i64)]),
    "mla_indexer_k_cache_write": (ST, [CTX, P(T.IndexerCacheDesc), PT, PT, PT]),
    "mla_indexer_k_gather": (ST, [CTX, P(T.IndexerCacheDesc), PT, PT, PT, PT, PT]),
    "mla_indexer_logits": (ST, [CTX, P(T.IndexerCacheDesc), PT, PT, PT, PT, PT, c_i32, PT]),
    "mla_topk": (ST, [CTX, PT, PT, c_i64, PT]),
    "mla_indexer_plan_create": (ST, [CTX, P(T.IndexerCacheDesc), PT, PT, c_i32, P(c_vp)]),
    "mla_indexer_plan_update": (ST, [CTX, c_vp, PT, PT]),
    "mla_indexer_plan_destroy": (VOID, [c_vp]),
    "mla_indexer_plan_max_len": (c_i64, [c_vp]),
    "mla_indexer_search": (ST, [CTX, c_vp, PT, PT, PT, PT, c_i64, PT]),
    "mla_indexer_head_weights": (ST, [CTX, PT, PT, PT]),
    "mla_indexer_workspace_bytes": (ST, [P(T.ModelConfig), c_i64, P(c_i64)]),
    "mla_indexer_prepare": (
        ST,
        [CTX, P(T.ModelConfig), P(T.IndexerWeights), P(T.IndexerOptions), PT, PT, PT, PT, PT,
         PT, PT, PT, PT],
    ),
    # mla_attention.h
    "mla_attention_desc_default": (ST, [P(T.ModelConfig), P(T.CacheDesc), P(T.AttentionDesc)]),
    "mla_attention_plan_create": (ST, [CTX, P(T.AttentionDesc), P(T.AttentionArgs), P(c_vp)]),
    "mla_attention_plan_update": (ST, [CTX, c_vp, P(T.AttentionArgs)]),
    "mla_attention_plan_destroy": (VOID, [c_vp]),
    "mla_attention_plan_workspace_bytes": (c_i64, [c_vp]),
    "mla_attention_plan_splits": (c_i32, [c_vp]),
    "mla_attention_run": (ST, [CTX, c_vp, P(T.AttentionArgs)]),
    # the expanded form (its descriptor and arguments are passed as pointers)
    "mla_attention_expanded_desc_default": (ST, [c_vp, c_vp, c_vp]),
    "mla_attention_expanded_workspace_bytes": (ST, [CTX, c_vp, c_i64, c_i64, P(c_i64)]),
    "mla_attention_expanded": (ST, [CTX, c_vp, c_vp]),
    # mla_weights.h
    "mla_safetensors_open": (ST, [CTX, c_str, P(c_vp)]),
    "mla_safetensors_close": (VOID, [c_vp]),
    "mla_safetensors_count": (c_i64, [c_vp]),
    "mla_safetensors_info_at": (ST, [c_vp, c_i64, P(T.SafetensorsInfo)]),
    "mla_safetensors_has": (c_int, [c_vp, c_str]),
    "mla_safetensors_find": (ST, [CTX, c_vp, c_str, P(T.SafetensorsInfo)]),
    "mla_safetensors_metadata": (c_str, [c_vp, c_str]),
    "mla_safetensors_bytes_read": (c_i64, [c_vp]),
    "mla_safetensors_read": (ST, [CTX, c_vp, c_str, PT]),
    "mla_safetensors_writer_create": (ST, [CTX, P(c_vp)]),
    "mla_safetensors_writer_destroy": (VOID, [c_vp]),
    "mla_safetensors_writer_add": (ST, [CTX, c_vp, c_str, EN, c_i32, P(c_i64), c_vp]),
    "mla_safetensors_writer_add_fill": (ST, [CTX, c_vp, c_str, EN, c_i32, P(c_i64), FILL_FN, c_vp]),
    "mla_safetensors_writer_metadata": (ST, [CTX, c_vp, c_str, c_str]),
    "mla_safetensors_writer_save": (ST, [CTX, c_vp, c_str]),
    "mla_weight_format_name": (c_str, [EN]),
    "mla_layer_load_options_default": (VOID, [P(T.LayerLoadOptions)]),
    "mla_layer_weights_load": (
        ST,
        [CTX, c_vp, P(T.ModelConfig), c_i64, P(T.LayerLoadOptions), P(T.LayerWeightsEx)],
    ),
    "mla_layer_weights_load_shards": (
        ST,
        [CTX, P(c_vp), c_i32, P(T.ModelConfig), c_i64, P(T.LayerLoadOptions),
         P(T.LayerWeightsEx)],
    ),
    "mla_layer_weights_free": (VOID, [CTX, P(T.LayerWeightsEx)]),
    "mla_hf_config_parse": (ST, [CTX, c_str, c_sz, P(T.HfConfig)]),
    "mla_hf_config_load": (ST, [CTX, c_str, P(T.HfConfig)]),
    "mla_model_config_preset_json": (c_str, [c_str]),
    "mla_checkpoint_open": (ST, [CTX, c_str, P(c_vp)]),
    "mla_checkpoint_close": (VOID, [c_vp]),
    "mla_checkpoint_config": (P(T.HfConfig), [c_vp]),
    "mla_checkpoint_tensor_count": (c_i64, [c_vp]),
    "mla_checkpoint_tensor_at": (ST, [c_vp, c_i64, P(c_str), P(c_str)]),
    "mla_checkpoint_find": (ST, [CTX, c_vp, c_str, P(c_vp), P(T.SafetensorsInfo)]),
    "mla_checkpoint_bytes_read": (c_i64, [c_vp]),
    "mla_layer_weights_load_checkpoint": (
        ST, [CTX, c_vp, c_i64, P(T.LayerLoadOptions), P(T.LayerWeightsEx)]),
    "mla_weights_generate": (
        ST,
        [CTX, c_str, P(T.ModelConfig), c_i64, c_i64, c_u64, P(T.LayerWeightFormats)],
    ),
    "mla_generate_options_default": (VOID, [P(T.GenerateOptions)]),
    "mla_checkpoint_generate": (ST, [CTX, c_str, P(T.ModelConfig), P(T.GenerateOptions)]),
    # mla_layer.h
    "mla_layer_options_default": (VOID, [P(T.ModelConfig), P(T.CacheDesc), P(T.LayerOptions)]),
    "mla_layer_expanded_min_rows": (c_i64, [c_vp]),
    "mla_layer_plan_form": (c_int, [c_vp]),
    "mla_layer_form_for": (c_int, [c_vp, P(T.LayerOptions), c_i64, c_i64]),
    "mla_layer_workspace_bytes": (
        ST, [CTX, c_vp, P(T.LayerOptions), c_i64, c_i64, c_i64, P(c_i64)]),
    "mla_layer_plan_create": (
        ST,
        [CTX, c_vp, P(T.CacheDesc), P(T.LayerOptions), P(T.LayerBatch), c_i64,
         P(T.LayerBuffers), P(c_vp)],
    ),
    "mla_layer_plan_update": (ST, [CTX, c_vp, P(T.LayerBatch)]),
    "mla_layer_plan_destroy": (VOID, [c_vp]),
    "mla_layer_plan_sparse": (c_int, [c_vp]),
    "mla_layer_plan_topk": (ST, [c_vp, PT]),
    "mla_layer_forward": (ST, [CTX, c_vp, P(T.LayerWeightsEx), PT, PT]),
    # mla_tuning.h
    "mla_tuning_init": (VOID, [P(T.Tuning)]),
    "mla_tuning_from_env": (ST, [P(T.Tuning), P(c_str)]),
    "mla_tuning_set": (ST, [P(T.Tuning), c_str, c_str]),
    "mla_tuning_format": (c_int, [P(T.Tuning), c_int, c_str, c_sz]),
    "mla_tuning_knob": (c_str, [c_int, P(c_str), P(c_str)]),
    "mla_context_set_tuning": (ST, [CTX, P(T.Tuning)]),
    "mla_context_get_tuning": (ST, [CTX, P(T.Tuning)]),
}


class Error(Exception):
    """A call libmla refused, or an argument the Python layer refused before
    calling it. Nothing was written to any output.

    Attributes:
        status: the status name, e.g. ``"MLA_ERR_DTYPE"``.
        code: the ``mla_status`` value (``libmla.Status``).
        status_text: the library's words for it, e.g. ``"wrong dtype"``.
        param: the refused parameter, e.g. ``"x.dtype"`` (``""`` when none).
        detail: a sentence saying why.
    """

    def __init__(self, code, param="", detail=""):
        try:
            self.code = T.Status(code)
            self.status = "MLA_" + self.code.name
        except ValueError:  # a status newer than this package
            self.code, self.status = int(code), "MLA_STATUS_%d" % int(code)
        self.status_text = _STATUS_TEXT.get(int(code), self.status)
        self.param = param or ""
        self.detail = detail or ""
        text = self.status
        if self.param:
            text += " (%s)" % self.param
        if self.detail:
            text += ": " + self.detail
        super().__init__(text)


# mla_status_name's words, so an Error can be made without the library.
_STATUS_TEXT = {}


class _Unloaded:
    """Stands in for the library after unload(): every attribute raises."""

    def __getattr__(self, name):
        raise Error(T.Status.ERR_INVALID_ARGUMENT, "library",
                    "libmla was unloaded (libmla.unload()); libmla.load() loads it again")


_lock = threading.RLock()
_state = {"lib": None, "path": None, "generation": 0}
_unload_hooks = []


def _package_dir():
    return os.path.dirname(os.path.abspath(__file__))


def _candidates():
    env = os.environ.get("LIBMLA_LIBRARY")
    if env:
        if os.path.isdir(env):
            return [os.path.join(env, _SONAME), os.path.join(env, "libmla.so")]
        return [env]
    out = [os.path.join(_package_dir(), _SONAME)]
    out.append(_SONAME)  # the dynamic loader's search path
    root = os.path.dirname(os.path.dirname(_package_dir()))
    if os.path.exists(os.path.join(root, "include", "mla", "mla.h")):
        out.append(os.path.join(root, "build", "default", _SONAME))
    return out


def _bind(lib):
    for name, (res, args) in _PROTOTYPES.items():
        fn = getattr(lib, name)
        fn.restype = res
        fn.argtypes = args


def load(path=None):
    """Loads libmla.so (see the module docstring for where it is looked for)
    and returns its path. A no-op when it is loaded already."""
    with _lock:
        if _state["lib"] is not None and path is None:
            return _state["path"]
        if _state["lib"] is not None:
            unload()
        tried = []
        for cand in [path] if path else _candidates():
            if cand != _SONAME and not os.path.exists(cand):
                tried.append("%s (absent)" % cand)
                continue
            try:
                lib = ctypes.CDLL(cand)
            except OSError as e:
                tried.append("%s (%s)" % (cand, e))
                continue
            try:
                _bind(lib)
            except AttributeError as e:
                raise Error(T.Status.ERR_NOT_COMPILED, "library",
                            "%s lacks a function this package calls (%s): an older libmla?"
                            % (cand, e)) from None
            _state["lib"] = lib
            _state["path"] = getattr(lib, "_name", cand)
            for s in T.Status:
                _STATUS_TEXT[int(s)] = lib.mla_status_name(int(s)).decode()
            _state["generation"] += 1
            return _state["path"]
        raise Error(T.Status.ERR_NOT_COMPILED, "library",
                    "libmla.so not found; tried: " + "; ".join(tried) +
                    ". Set LIBMLA_LIBRARY to the library (or its directory).")


def unload():
    """Destroys every live context (and the plans and weights made on them)
    and drops the library: later calls raise libmla.Error until load().

    The shared object itself stays mapped: its OpenMP runtime and the GPU
    runtime keep threads of their own, which must not see their code
    unmapped (dlclose would be a crash waiting for them to wake up)."""
    with _lock:
        if _state["lib"] is None:
            return
        for hook in list(_unload_hooks):
            hook()
        _state["lib"] = None
        _state["generation"] += 1


def lib():
    """The loaded library (loading it on first use), or a stand-in that
    raises libmla.Error after unload()."""
    l = _state["lib"]
    if l is not None:
        return l
    if _state["generation"] > 0:
        return _Unloaded()
    load()
    return _state["lib"]


def generation():
    """Changes at every load and unload: handles made under another
    generation are dead."""
    return _state["generation"]


def status_name(code):
    return lib().mla_status_name(int(code)).decode()


def check(status, ctx_handle=None):
    """Raises libmla.Error for a failed status, with the context's record of
    the refused parameter and the reason."""
    if status == 0:
        return
    param = detail = ""
    if ctx_handle:
        l = lib()
        param = (l.mla_context_error_param(ctx_handle) or b"").decode()
        detail = (l.mla_context_error_detail(ctx_handle) or b"").decode()
    raise Error(status, param, detail)


def cstr(b):
    return b.decode() if b else ""
