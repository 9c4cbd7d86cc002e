"""ONNX file -> ``onnx`` import dialect -> (passes) -> graph dialect, and its weight source.

The file is read with the ``onnx`` package (``onnx.load``, external data
included); model-local functions are inlined (``onnx.inliner``) and the main
graph is spelled in the ``onnx`` dialect (``dialects/onnx.py``) by
:func:`load_onnx`.  :func:`import_onnx` then runs the normalisation and
fusion passes of :data:`PIPELINE` and ``--onnx-to-graph``; the weights of the
resulting ``graph.weight`` declarations are the ONNX initializers they name
(``hf "<initializer>"``), read by :class:`OnnxSource`.  See docs/onnx.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from xdsl.dialects.builtin import ArrayAttr, IntegerAttr, ModuleOp, StringAttr
from xdsl.ir import SSAValue

from ckir.dialects import graph as g
from ckir.dialects import onnx as ox
from ckir.errors import CkirError
from ckir.passes.onnx_to_graph import NAMES_ATTR

#: the passes ``ckir import model.onnx`` runs, in order (each a ``--<flag>`` of ckir-opt)
PIPELINE: tuple[str, ...] = (
    "onnx-fold-constants",
    "onnx-cleanup",
    "onnx-drop-views",
    "onnx-fuse-embedding",
    "onnx-fuse-linear",
    "onnx-fuse-layernorm",
    "onnx-fuse-rmsnorm",
    "onnx-fuse-gelu",
    "onnx-fuse-swiglu",
    "onnx-fuse-rope",
    "onnx-fuse-attention",
    "onnx-to-graph",
)
#: opsets (default domain) the frontend was tested with
MIN_OPSET = 13

_ELEM = {
    1: "float32",
    2: "uint8",
    3: "int8",
    5: "int16",
    6: "int32",
    7: "int64",
    9: "bool",
    10: "float16",
    11: "float64",
    16: "bfloat16",
}


def is_weight(t: Any) -> bool:
    """An initializer kept by reference: a float tensor of more than one element, or a
    large one (an ``onnx.const`` otherwise)."""
    size = int(np.prod(t.dims))
    return size > ox.CONST_MAX or (size > 1 and t.data_type in (1, 10, 11, 16))


def _read_model(path: Path, load_data: bool) -> Any:
    import onnx

    if not path.is_file():
        raise CkirError(f"{path}: no such file")
    try:
        model = onnx.load(str(path), load_external_data=load_data)
    except Exception as e:  # the onnx package raises DecodeError, OSError, ValueError ...
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise CkirError(f"{path}: not a readable ONNX model ({first})") from None
    if not model.graph.node:
        raise CkirError(f"{path}: not a readable ONNX model (its graph has no nodes)")
    return model


def opset_of(model: Any) -> int:
    """The default-domain opset of ``model``."""
    for imp in model.opset_import:
        if imp.domain in ("", "ai.onnx"):
            return int(imp.version)
    return 1


def _dims(vi: Any) -> list[str]:
    dims = []
    for d in vi.type.tensor_type.shape.dim:
        dims.append(d.dim_param if d.dim_param else str(d.dim_value))
    return dims


def _attr_value(a: Any) -> object:
    from onnx import helper, numpy_helper

    v = helper.get_attribute_value(a)
    if a.type == a.TENSOR:
        arr = numpy_helper.to_array(v)
        return {
            "elem": _ELEM.get(v.data_type, str(v.data_type)),
            "shape": [int(d) for d in arr.shape],
            "value": [float(x) for x in arr.astype(np.float64).ravel()],
        }
    if isinstance(v, bytes):
        return v.decode()
    if isinstance(v, (list, tuple)):
        return [x.decode() if isinstance(x, bytes) else x for x in v]
    if isinstance(v, (int, float, str)):
        return v
    raise CkirError(
        f"node '{a.name}': attribute of type {a.type} is not supported by the ONNX frontend"
    )


def load_onnx(path: str | Path) -> ModuleOp:
    """The ``onnx``-dialect module of an ONNX file (functions inlined, nothing fused)."""
    path = Path(path)
    return module_of_model(_read_model(path, load_data=True), path)


def module_of_model(model: Any, path: Path) -> ModuleOp:
    """The ``onnx``-dialect module of a loaded ``ModelProto`` (``path`` names it in errors)."""
    from onnx import numpy_helper

    if len(model.functions):
        from onnx import inliner

        model = inliner.inline_local_functions(model)
    opset = opset_of(model)
    if opset < MIN_OPSET:
        raise CkirError(f"{path}: opset {opset}: the ONNX frontend needs opset >= {MIN_OPSET}")
    graph = model.graph
    values: dict[str, SSAValue] = {}
    ops: list[Any] = []
    inits = {t.name: t for t in graph.initializer}
    # large initializers that are copies (or 2-D transposes) of another one
    digests: dict[tuple[bytes, tuple[int, ...]], str] = {}
    arrays: dict[str, np.ndarray] = {}
    for name, t in inits.items():
        if is_weight(t):
            arrays[name] = numpy_helper.to_array(t)
    for name, arr in arrays.items():
        digests.setdefault((arr.tobytes(), arr.shape), name)
    for t in graph.input:
        if t.name in inits:
            continue
        elem = _ELEM.get(t.type.tensor_type.elem_type, "?")
        op = ox.InputOp.make(t.name, _dims(t), elem)
        ops.append(op)
        values[t.name] = op.result
    for name, t in inits.items():
        elem = _ELEM.get(t.data_type, str(t.data_type))
        if name in arrays:
            arr = arrays[name]
            same, tr = None, False
            first = digests[(arr.tobytes(), arr.shape)]
            if first != name:
                same = first
            elif arr.ndim == 2:
                key = (np.ascontiguousarray(arr.T).tobytes(), arr.T.shape)
                if key in digests and digests[key] != name:
                    same, tr = digests[key], True
            small = arr.ndim == 1 and arr.size <= ox.CONST_MAX
            value = arr.astype(np.float64).ravel() if small else None
            op = ox.InitOp.make(name, list(t.dims), elem, same, tr, value)
        else:
            arr = numpy_helper.to_array(t)
            op = ox.ConstOp.make(name, list(t.dims), elem, arr.astype(np.float64).ravel())
        ops.append(op)
        values[name] = op.result
    for n in graph.node:
        if n.op_type == "Constant" and n.domain in ("", "ai.onnx"):
            v = _attr_value(n.attribute[0]) if n.attribute else None
            if isinstance(v, dict):
                op = ox.ConstOp.make(n.output[0], v["shape"], v["elem"], v["value"])
                ops.append(op)
                values[n.output[0]] = op.result
                continue
        args, absent = [], []
        for k, name in enumerate(n.input):
            if not name:
                absent.append(k)
                continue
            if name not in values:
                raise CkirError(
                    f"{path}: node '{n.name}' ({n.op_type}) reads '{name}', which no earlier "
                    "node, input or initializer defines (nodes must be in topological order)"
                )
            args.append(values[name])
        attrs = {a.name: ox.to_attr(_attr_value(a)) for a in n.attribute}
        op = ox.NodeOp.make(
            n.op_type, args, len(n.output), domain=n.domain, node=n.name, attrs=attrs, absent=absent
        )
        for name, r in zip(n.output, op.results, strict=True):
            if name:
                values[name] = r
        ops.append(op)
    outs = [o.name for o in graph.output]
    ops.append(ox.OutputOp.make([values[o] for o in outs], outs))
    module = ModuleOp(ops)
    module.attributes["onnx.opset"] = IntegerAttr(opset, 64)
    module.attributes["onnx.file"] = StringAttr(path.name)
    return module


def run_pipeline(module: ModuleOp, passes: tuple[str, ...] = PIPELINE) -> None:
    """Run the named ONNX passes over ``module`` in place."""
    from ckir.ir_io import ir_context
    from ckir.universe import PASSES

    ctx = ir_context()
    import importlib

    for name in passes:
        mod, cls = PASSES[name].split(":")
        getattr(importlib.import_module(mod), cls)().apply(ctx, module)


def import_onnx(path: str | Path) -> tuple[ModuleOp, dict[str, int], list[str]]:
    """``(graph module, matches per rule, misses)`` of an ONNX file.

    A miss is one line ``rule: node (op_type): the check that failed``."""
    from ckir.passes.onnx_match import MATCHED, MISSED, matched_counts, missed

    module = load_onnx(path)
    run_pipeline(module)
    counts, misses = matched_counts(module), missed(module)
    for key in (MATCHED, MISSED):
        module.attributes.pop(key, None)
    return module, counts, misses


def import_onnx_model(
    path: Path, template: str | Path | None = None
) -> tuple[ModuleOp, list[str], OnnxSource]:
    """``(graph module, warnings, weight source)``; ``template`` must be None (the graph
    comes from the file)."""
    if template is not None:
        raise CkirError(f"{path}: an ONNX model takes no --template (its graph is in the file)")
    module, _, _ = import_onnx(path)
    return module, [], OnnxSource(path)


class OnnxSource:
    """Weights of an ONNX file: the initializers named by ``graph.weight ... hf``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._arrays: dict[str, np.ndarray] | None = None

    def array(self, name: str) -> np.ndarray:
        if self._arrays is None:
            from onnx import numpy_helper

            model = _read_model(self.path, load_data=True)
            self._arrays = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
        arr = self._arrays.get(name)
        if arr is None:
            raise CkirError(f"{self.path}: has no initializer '{name}'")
        return arr

    def bytes_for(
        self, decl: g.WeightOp, layer: int | None, symbols: Mapping[str, int], dtype: str
    ) -> np.ndarray:
        from ckir.backend.weights import encode, pack_tensor

        names = decl.attributes.get(NAMES_ATTR)
        if isinstance(names, ArrayAttr) and layer is not None:
            name = names.data[layer].data  # type: ignore[attr-defined]
        else:
            name = decl.source_tensor("hf", layer)
        arr = pack_tensor(
            self.array(name).astype(np.float32), decl, symbols, f"initializer '{name}'"
        )
        return encode(np.ascontiguousarray(arr), dtype, name)
