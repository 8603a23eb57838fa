"""libmla: DeepSeek-style Multi-head Latent Attention from Python.

A thin ctypes layer over the C library libmla.so (no compiled extension).
Tensors are NumPy arrays, PyTorch tensors (CPU or GPU) and any object with
``__dlpack__`` / ``__cuda_array_interface__``; they are passed to the C
library as they are, strides included: nothing is ever copied, outputs given
by the caller are written in place, outputs not given are allocated like the
call's first input and returned.

Quick start::

    import numpy as np, libmla
    x = np.random.randn(4, 64).astype(np.float32)
    codes, scales = libmla.mxfp4_quant(x)            # CPU backend by default
    y = libmla.mxfp4_dequant(codes, scales)

Contexts: every op takes ``ctx=``; without it, the calling thread's default
context for the tensors' device is used (the CPU backend for host memory,
the HIP backend for a GPU; libmla.default_context). With torch GPU tensors
the context follows ``torch.cuda.current_stream()``.

Errors raise libmla.Error (``.status``, ``.param``, ``.detail``); a refused
call writes nothing. See help(libmla.Context), help(libmla.AttentionPlan),
help(libmla.LayerPlan), and ``python -m libmla info``. Where libmla.so is
looked for: help(libmla._lib).
"""

from ._lib import Error, load, unload
from ._tensor import View, bf16, dtype_of, view
from ._types import (Backend, CacheLayout, DType, Fp8ScaleRule, IndexerLayout, KvBFp8, Memory,
                     MxFp4Rule, Op, RopeSite, RopeStyle, Saturation, ScaleLayout, Stage, Status,
                     Target, WeightFormat)
from .attention import AttentionDesc, AttentionPlan, attention_desc
from .checkpoint import (Checkpoint, HfConfig, checkpoint_generate, hf_config, load_checkpoint,
                         model_config_preset_json)
from .context import Context, DeviceArray, default_context, set_default_context
from .formats import (bf16_to_f32, convert, e8m0_to_f32, f16_to_f32, f32_to_bf16, f32_to_f16,
                      f32_to_fp4, f32_to_fp8, fp4_to_f32, fp8_group_dequant, fp8_group_quant,
                      fp8_max, fp8_to_f32, mxfp4_dequant, mxfp4_quant, mxfp4_quantize_block,
                      scale_preshuffled_bytes, scale_preshuffled_offset)
from .indexer import (IndexerCacheDesc, IndexerPlan, hadamard, indexer_cache_block_bytes,
                      indexer_cache_desc, indexer_head_weights, indexer_k_cache_write,
                      indexer_k_gather, indexer_layout_for, indexer_logits, indexer_prepare,
                      indexer_workspace_bytes, layernorm, topk)
from .info import build_info, gpu_count, gpu_name, info, version, version_info
from .layer import LayerOptions, LayerPlan, layer_options, layer_workspace_bytes
from .mxfp4 import (batched_gemm_a4w4, batched_gemm_a16wfp4, fused_flatten_fp8_group_quant,
                    fused_flatten_mxfp4_quant)
from .prepare import (CacheDesc, ModelConfig, Plan, batched_gemm, cache_block_bytes, cache_desc,
                      cache_gather, cache_write, empty_cache, fused_qk_rmsnorm,
                      fused_rope_concat_cache, linear, model_config, model_config_presets,
                      prepare, rmsnorm, rope, rope_table, softmax_scale)
from .weights import LayerWeights, SafetensorsFile, SafetensorsWriter, weights_generate


def empty(shape, dtype, like=None, ctx=None):
    """An uninitialised tensor: like ``like`` (a torch tensor: same device),
    else NumPy for host contexts / torch (or a DeviceArray) for GPU ones."""
    from . import _tensor
    return _tensor.empty(like, shape, dtype_of(dtype), ctx or default_context())


__version__ = "0.1.0"

__all__ = [
    "__version__",
    "attention_desc",
    "AttentionDesc",
    "AttentionPlan",
    "Backend",
    "batched_gemm",
    "batched_gemm_a16wfp4",
    "batched_gemm_a4w4",
    "bf16",
    "bf16_to_f32",
    "build_info",
    "cache_block_bytes",
    "cache_desc",
    "cache_gather",
    "cache_write",
    "CacheDesc",
    "CacheLayout",
    "Checkpoint",
    "checkpoint_generate",
    "Context",
    "convert",
    "default_context",
    "DeviceArray",
    "DType",
    "dtype_of",
    "e8m0_to_f32",
    "empty",
    "empty_cache",
    "Error",
    "f16_to_f32",
    "f32_to_bf16",
    "f32_to_f16",
    "f32_to_fp4",
    "f32_to_fp8",
    "fp4_to_f32",
    "fp8_group_dequant",
    "fp8_group_quant",
    "fp8_max",
    "fp8_to_f32",
    "Fp8ScaleRule",
    "fused_flatten_fp8_group_quant",
    "fused_flatten_mxfp4_quant",
    "fused_qk_rmsnorm",
    "fused_rope_concat_cache",
    "gpu_count",
    "gpu_name",
    "hadamard",
    "hf_config",
    "HfConfig",
    "indexer_cache_block_bytes",
    "indexer_cache_desc",
    "indexer_head_weights",
    "indexer_k_cache_write",
    "indexer_k_gather",
    "indexer_layout_for",
    "indexer_logits",
    "indexer_prepare",
    "indexer_workspace_bytes",
    "IndexerCacheDesc",
    "IndexerLayout",
    "IndexerPlan",
    "info",
    "KvBFp8",
    "layer_options",
    "layer_workspace_bytes",
    "layernorm",
    "LayerOptions",
    "LayerPlan",
    "LayerWeights",
    "linear",
    "load",
    "load_checkpoint",
    "Memory",
    "model_config",
    "model_config_preset_json",
    "model_config_presets",
    "ModelConfig",
    "mxfp4_dequant",
    "mxfp4_quant",
    "mxfp4_quantize_block",
    "MxFp4Rule",
    "Op",
    "Plan",
    "prepare",
    "rmsnorm",
    "rope",
    "rope_table",
    "RopeSite",
    "RopeStyle",
    "SafetensorsFile",
    "SafetensorsWriter",
    "Saturation",
    "scale_preshuffled_bytes",
    "scale_preshuffled_offset",
    "ScaleLayout",
    "set_default_context",
    "softmax_scale",
    "Stage",
    "Status",
    "Target",
    "topk",
    "unload",
    "version",
    "version_info",
    "View",
    "view",
    "WeightFormat",
    "weights_generate",
]
