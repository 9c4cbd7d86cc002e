"""The ckir universe: dialects, passes and targets, registered through lazy factories.

Importing this module is cheap: every factory imports its dialect or pass only
when it is called, the way xDSL's own ``get_all_dialects`` works.  The
``xdsl.universe`` entry point in ``pyproject.toml`` points here, so plain
``xdsl-opt`` sees ckir's dialects and passes too.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from xdsl.universe import Universe

#: dialect name -> "module:attribute" of its ``Dialect`` object
DIALECTS: dict[str, str] = {
    "graph": "ckir.dialects.graph:Graph",
    "lowered": "ckir.dialects.lowered:Lowered",
    "layout": "ckir.dialects.layout:Layout",
    "kernel": "ckir.dialects.kernel:Kernel",
    "onnx": "ckir.dialects.onnx:Onnx",
}

#: pass flag -> "module:class"; one file per pass, named after its flag
PASSES: dict[str, str] = {
    "convert-weights": "ckir.passes.convert_weights:ConvertWeightsPass",
    "widen-weights": "ckir.passes.widen_weights:WidenWeightsPass",
    "lower-prefill": "ckir.passes.lower_prefill:LowerPrefillPass",
    "lower-backward": "ckir.passes.lower_backward:LowerBackwardPass",
    "lower-decode": "ckir.passes.lower_decode:LowerDecodePass",
    "plan-layout": "ckir.passes.plan_layout:PlanLayoutPass",
    "plan-views": "ckir.passes.plan_views:PlanViewsPass",
    "io-manifest": "ckir.passes.io_manifest:IoManifestPass",
    "fuse-qkv": "ckir.passes.fuse_qkv:FuseQkvPass",
    "fuse-gate-up": "ckir.passes.fuse_gate_up:FuseGateUpPass",
    "fuse-add-rmsnorm": "ckir.passes.fuse_add_rmsnorm:FuseAddRmsnormPass",
    "lower-kernel": "ckir.passes.lower_kernel:LowerKernelPass",
    "fuse-kernel-matmul-relu": "ckir.passes.fuse_kernel_matmul_relu:FuseKernelMatmulReluPass",
    "kv-cache-dtype": "ckir.passes.kv_cache_dtype:KvCacheDtypePass",
    "onnx-fold-constants": "ckir.passes.onnx_fold_constants:OnnxFoldConstantsPass",
    "onnx-cleanup": "ckir.passes.onnx_cleanup:OnnxCleanupPass",
    "onnx-drop-views": "ckir.passes.onnx_drop_views:OnnxDropViewsPass",
    "onnx-fuse-embedding": "ckir.passes.onnx_fuse_embedding:OnnxFuseEmbeddingPass",
    "onnx-fuse-linear": "ckir.passes.onnx_fuse_linear:OnnxFuseLinearPass",
    "onnx-fuse-layernorm": "ckir.passes.onnx_fuse_layernorm:OnnxFuseLayernormPass",
    "onnx-fuse-gelu": "ckir.passes.onnx_fuse_gelu:OnnxFuseGeluPass",
    "onnx-fuse-rmsnorm": "ckir.passes.onnx_fuse_rmsnorm:OnnxFuseRmsnormPass",
    "onnx-fuse-swiglu": "ckir.passes.onnx_fuse_swiglu:OnnxFuseSwigluPass",
    "onnx-fuse-rope": "ckir.passes.onnx_fuse_rope:OnnxFuseRopePass",
    "onnx-fuse-attention": "ckir.passes.onnx_fuse_attention:OnnxFuseAttentionPass",
    "onnx-to-graph": "ckir.passes.onnx_to_graph:OnnxToGraphPass",
    "annotate-tensors": "ckir.passes.annotate_tensors:AnnotateTensorsPass",
    "annotate-quant": "ckir.passes.annotate_quant:AnnotateQuantPass",
    "tag-phases": "ckir.passes.tag_phases:TagPhasesPass",
}

#: target name -> "module:class"
TARGETS: dict[str, str] = {
    "c": "ckir.backend.c_target:CTarget",
    "json": "ckir.ir_json:JSONTarget",
}


def _lazy(spec: str) -> Callable[[], Any]:
    module_name, attr = spec.split(":")

    def factory() -> Any:
        return getattr(importlib.import_module(module_name), attr)

    factory.__name__ = f"load_{attr}"
    return factory


def dialect_factories() -> dict[str, Callable[[], Any]]:
    return {name: _lazy(spec) for name, spec in DIALECTS.items()}


def pass_factories() -> dict[str, Callable[[], Any]]:
    return {name: _lazy(spec) for name, spec in PASSES.items()}


def target_factories() -> dict[str, Callable[[], Any]]:
    return {name: _lazy(spec) for name, spec in TARGETS.items()}


CKIR_UNIVERSE = Universe(
    all_dialects=dialect_factories(),
    all_passes=pass_factories(),
    all_targets=target_factories(),
)
