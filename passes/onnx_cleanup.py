"""``--onnx-cleanup``: remove nodes that do nothing at inference.

``Identity``, ``Dropout`` (its first output; the mask output must be unused)
and a ``Cast`` to the element type its input already has (an ``onnx.input``,
``onnx.const`` or another ``Cast`` of that type, an op that keeps its first
input's type, e.g. a ``Softmax`` or ``Cos`` of one, or an ``Add`` / ``Mul`` /
``Concat`` … with any input of that type) are replaced by their input;
unused nodes are erased::

    %y = "onnx.node"(%x) <{op_type = "Identity", ...}>
    %z = "onnx.node"(%y, %w) <{op_type = "MatMul", ...}>
  becomes
    %z = "onnx.node"(%x, %w) <{op_type = "MatMul", ...}>
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from ckir.dialects import onnx as ox
from ckir.passes.onnx_match import Record, nodes, producer, remove_dead

#: ONNX TensorProto element type number -> name (the ones a no-op Cast can keep)
_TO = {1: "float32", 6: "int32", 7: "int64", 9: "bool", 10: "float16", 11: "float64"}


#: op types whose result has the element type of their first input
_SAME_ELEM = {
    "Add",
    "Sub",
    "Mul",
    "Div",
    "Neg",
    "Pow",
    "Sqrt",
    "Reciprocal",
    "ReduceMean",
    "Softmax",
    "Tanh",
    "Erf",
    "Sigmoid",
    "Cos",
    "Sin",
    "MatMul",
    "Gemm",
    "Transpose",
    "Reshape",
    "Slice",
    "Concat",
    "Split",
    "Unsqueeze",
    "Squeeze",
    "Expand",
    "LayerNormalization",
    "Identity",
    "Relu",
}


#: op types whose inputs (all of them) and result have one element type
_ALL_SAME = {"Add", "Sub", "Mul", "Div", "Concat", "MatMul", "Gemm"}


def _value_elem(v: object, depth: int = 0) -> str | None:
    """The element type of a value: read off an input / constant / initializer / Cast, or
    carried through ops that keep their first input's type (TorchScript writes
    ``Cast(to=float)`` after float ops: a Softmax, a norm's sum)."""
    p = producer(v)  # type: ignore[arg-type]
    if isinstance(p, (ox.InputOp, ox.ConstOp, ox.InitOp)):
        return p.elem.data
    if isinstance(p, ox.NodeOp) and p.kind == "Cast":
        return _TO.get(int(p.attr("to", -1)))  # type: ignore[arg-type]
    if isinstance(p, ox.NodeOp) and p.kind == "Gather" and depth < 64:
        return _value_elem(p.args[0], depth + 1)  # the table's type
    if isinstance(p, ox.NodeOp) and p.kind in _ALL_SAME and depth < 64:
        # every input has the output's type: the first one whose type is known
        # (a rotary table's Mul(ckir.Positions, inv_freq) is known by its constant)
        elems = (_value_elem(a, depth + 1) for a in p.args)
        return next((e for e in elems if e is not None), None)
    if isinstance(p, ox.NodeOp) and p.kind in _SAME_ELEM and p.args and depth < 64:
        return _value_elem(p.args[0], depth + 1)
    return None


def _elem(op: ox.NodeOp) -> str | None:
    return _value_elem(op.args[0])


@dataclass(frozen=True)
class OnnxCleanupPass(ModulePass):
    """Remove Identity, Dropout and no-op Cast nodes (see the module docstring)."""

    name = "onnx-cleanup"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        rec = Record("cleanup")
        for n in nodes(op):
            kind = n.kind
            if kind == "Identity" or (
                kind == "Cast" and _elem(n) == _TO.get(int(n.attr("to", -1)))  # type: ignore[arg-type]
            ):
                n.results[0].replace_all_uses_with(n.args[0])
                rec.matched += 1
            elif kind == "Dropout":
                if len(n.results) > 1 and list(n.results[1].uses):
                    rec.miss(n, "its mask output is used")
                    continue
                n.results[0].replace_all_uses_with(n.args[0])
                rec.matched += 1
        remove_dead(op)
        rec.save(op)
