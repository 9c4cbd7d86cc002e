"""``--onnx-fold-constants``: fold constant and shape-only subgraphs of an ``onnx`` module.

Two rules:

* **constant**: a node whose inputs are all ``onnx.const`` is evaluated (by
  ``onnx.reference``) and replaced by an ``onnx.const`` (results of at most
  ``CONST_MAX`` elements).
* **shape subgraph**: a value that depends on the graph inputs only through
  ``Shape`` nodes (Shape → Gather → Concat → Reshape shapes, Range positions,
  ConstantOfShape / Trilu / Where masks …) is evaluated at two sequence
  lengths and classified: the same at both → a constant; ``arange(T)`` →
  ``ckir.Positions``; 0 on and below the diagonal and ≤ -1e4 above (or a
  boolean lower triangle) → ``ckir.CausalMask``; a shape vector holding ``T``
  stays for the rule that reads it (repeat_kv's ``Expand``).  Anything else
  stays, is recorded as a miss, and ``--onnx-to-graph`` names it if it is
  still used.

Example::

    %s = "onnx.node"(%ids) <{op_type = "Shape", ...}>       // [1, T]
    %t = "onnx.node"(%s, %c1) <{op_type = "Gather", ...}>    // T
    %r = "onnx.node"(%c0, %t, %c1) <{op_type = "Range", ...}>
  becomes
    %r = "onnx.node"(%ids) <{op_type = "Positions", domain = "ckir", ...}>
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass

from ckir.dialects import onnx as ox
from ckir.passes.onnx_match import Record, fused, nodes, remove_dead, replace

#: sequence lengths a shape subgraph is evaluated at
PROBE_T = (3, 5)
_NP = {
    "float32": np.float32,
    "float64": np.float64,
    "float16": np.float16,
    "int64": np.int64,
    "int32": np.int32,
    "int8": np.int8,
    "uint8": np.uint8,
    "bool": np.bool_,
}


def _proto_attr(key: str, v: object) -> Any:
    from onnx import helper, numpy_helper

    if isinstance(v, dict) and "elem" in v:
        arr = np.array(v["value"], dtype=_NP[str(v["elem"])]).reshape(v["shape"])
        return helper.make_attribute(key, numpy_helper.from_array(arr))
    return helper.make_attribute(key, v)


class _Model:
    """Builds a small ONNX model out of ``onnx`` dialect ops, to evaluate it."""

    def __init__(self) -> None:
        self.names: dict[SSAValue, str] = {}
        self.nodes: list[Any] = []
        self.inits: list[Any] = []
        self.inputs: list[Any] = []

    def name(self, v: SSAValue) -> str:
        return self.names.setdefault(v, f"v{len(self.names)}")

    def add_const(self, op: ox.ConstOp) -> None:
        from onnx import numpy_helper

        arr = np.array(op.values, dtype=_NP.get(op.elem.data, np.float32)).reshape(op.dims)
        self.inits.append(numpy_helper.from_array(arr, self.name(op.result)))

    def add_input(self, op: ox.InputOp) -> None:
        from onnx import TensorProto, helper

        elem = {"int64": TensorProto.INT64, "int32": TensorProto.INT32}.get(
            op.elem.data, TensorProto.FLOAT
        )
        self.inputs.append(helper.make_tensor_value_info(self.name(op.result), elem, None))

    def add_node(self, op: ox.NodeOp) -> None:
        from onnx import helper

        ins = [self.name(a) for a in op.args]
        absent = [a.value.data for a in op.absent.data] if op.absent is not None else []
        for k in sorted(absent):
            ins.insert(k, "")
        node = helper.make_node(
            op.op_type.data,
            ins,
            [self.name(r) for r in op.results],
            domain=op.domain.data,
        )
        node.attribute.extend(_proto_attr(k, op.attr(k)) for k in op.attrs.data)
        self.nodes.append(node)

    def run(self, opset: int, outputs: list[SSAValue], feeds: dict[str, np.ndarray]) -> list:
        from onnx import helper
        from onnx.reference import ReferenceEvaluator

        outs = [helper.make_tensor_value_info(self.name(v), 0, None) for v in outputs]
        graph = helper.make_graph(self.nodes, "fold", self.inputs, outs, self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        return ReferenceEvaluator(model).run(None, feeds)


def _opset(module: ModuleOp) -> int:
    a = module.attributes.get("onnx.opset")
    return a.value.data if a is not None else 18  # type: ignore[attr-defined]


def _to_const(arr: np.ndarray, name: str) -> ox.ConstOp:
    elem = {
        np.dtype(np.float32): "float32",
        np.dtype(np.int64): "int64",
        np.dtype(np.bool_): "bool",
        np.dtype(np.int32): "int32",
        np.dtype(np.float64): "float64",
    }.get(arr.dtype, "float32")
    return ox.ConstOp.make(name, list(arr.shape), elem, arr.astype(np.float64).ravel())


def fold_constant_nodes(module: ModuleOp, rec: Record) -> None:
    """Evaluate nodes whose inputs are all constants."""
    opset = _opset(module)
    for op in nodes(module):
        if op.domain.data not in ("", "ai.onnx") or op.kind == "Shape":
            continue
        if not all(isinstance(a.owner, ox.ConstOp) for a in op.args):
            continue
        m = _Model()
        for a in op.args:
            assert isinstance(a.owner, ox.ConstOp)
            m.add_const(a.owner)
        m.add_node(op)
        try:
            vals = m.run(opset, list(op.results), {})
        except Exception as e:  # an op the reference evaluator does not know: left as is
            rec.miss(op, f"not evaluated ({type(e).__name__})")
            continue
        if any(np.asarray(v).size > ox.CONST_MAX for v in vals):
            continue
        consts = [_to_const(np.asarray(v), f"{op.label}.{k}") for k, v in enumerate(vals)]
        replace(op, list(consts), [c.result for c in consts])
        rec.matched += 1


def _classify(samples: list[np.ndarray]) -> str | None:
    """``constant`` / ``shape`` / ``positions`` / ``causal`` / ``causal_bool`` or None."""
    if all(s.shape == samples[0].shape and np.array_equal(s, samples[0]) for s in samples):
        return "constant"
    kinds = set()
    for t, s in zip(PROBE_T, samples, strict=True):
        sq = np.squeeze(s)
        if s.ndim == 1 and s.dtype == np.int64 and s.shape == samples[0].shape:
            same = s == samples[0]
            if (
                np.all(same | (s == t))
                and np.any(s == t)
                and np.all(samples[0][~same] == PROBE_T[0])
            ):
                kinds.add("shape")  # a shape vector with T in it (an Expand's target)
                continue
        if sq.shape == (t,) and np.array_equal(sq, np.arange(t)):
            kinds.add("positions")
        elif sq.shape == (t, t):
            low = np.tril(np.ones((t, t), dtype=bool))
            if sq.dtype == np.bool_:
                kinds.add("causal_bool" if np.array_equal(sq, low) else "?")
            elif np.all(sq[low] == 0) and np.all(sq[~low] <= -1e4):
                kinds.add("causal")
            else:
                kinds.add("?")
        else:
            kinds.add("?")
    return kinds.pop() if len(kinds) == 1 and "?" not in kinds else None


def fold_shape_subgraphs(module: ModuleOp, rec: Record) -> None:
    """Classify the values that depend on the inputs only through their shapes."""
    inputs = [op for op in module.ops if isinstance(op, ox.InputOp)]
    if len(inputs) != 1:
        return
    tokens = inputs[0]
    derived: set[SSAValue] = set()
    sub: list[ox.NodeOp] = []
    for op in module.ops:
        if not isinstance(op, ox.NodeOp):
            continue
        if op.kind == "Shape" and op.args[0] == tokens.result:
            ok = True
        else:
            args = [a for a in op.args if not isinstance(a.owner, ox.ConstOp)]
            ok = bool(args) and all(a in derived for a in args)
        if ok:
            derived.update(op.results)
            sub.append(op)
    if not sub:
        return
    frontier: list[SSAValue] = []
    for v in (r for op in sub for r in op.results):
        if any(u.operation not in sub for u in v.uses):
            frontier.append(v)
    if not frontier:
        return
    m = _Model()
    m.add_input(tokens)
    seen: set[ox.ConstOp] = set()
    for op in sub:
        for a in op.args:
            if isinstance(a.owner, ox.ConstOp) and a.owner not in seen:
                seen.add(a.owner)
                m.add_const(a.owner)
        m.add_node(op)
    try:
        runs = [
            m.run(_opset(module), frontier, {m.name(tokens.result): np.zeros((1, t), np.int64)})
            for t in PROBE_T
        ]
    except Exception as e:
        rec.miss(sub[0], f"shape subgraph not evaluated ({type(e).__name__}: {e})")
        return
    for k, v in enumerate(frontier):
        owner = v.owner
        assert isinstance(owner, ox.NodeOp)
        samples = [np.asarray(r[k]) for r in runs]
        kind = _classify(samples)
        new: Operation
        if kind == "constant" and samples[0].size <= ox.CONST_MAX:
            new = _to_const(samples[0], f"{owner.label}.folded")
        elif kind == "positions":
            new = fused("Positions", [tokens.result], owner)
        elif kind in ("causal", "causal_bool"):
            new = fused("CausalMask", [tokens.result], owner, {"boolean": kind == "causal_bool"})
        elif kind == "shape":
            continue  # the rule that reads it checks it structurally (repeat_kv's Expand)
        else:
            rec.miss(owner, f"shape-only value not recognised (classified {kind})")
            continue
        block = owner.parent_block()
        assert block is not None
        block.insert_op_after(new, owner)
        v.replace_all_uses_with(new.results[0])
        rec.matched += 1


@dataclass(frozen=True)
class OnnxFoldConstantsPass(ModulePass):
    """Fold constant nodes and shape-only subgraphs (see the module docstring)."""

    name = "onnx-fold-constants"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        rec = Record("fold-constants")
        fold_constant_nodes(op, rec)
        fold_shape_subgraphs(op, rec)
        fold_constant_nodes(op, rec)
        remove_dead(op)
        rec.save(op)
