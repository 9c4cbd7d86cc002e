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
  boolean lower triangle) → ``ckir.CausalMask``; any other shape vector holding
  ``T`` → ``ckir.Shape`` with its ``dims`` (-1 for T), for the rule that reads it
  (repeat_kv's ``Expand`` target, checked by ``--onnx-fuse-attention``); a value computed
  from one that equals ``arange(T)`` (TorchScript's rotary cos/sin tables:
  ``Cos(Concat(f, f))``, ``f = Cast(Unsqueeze(Range(0, T))) · inv_freq``)
  stays, reading a ``ckir.Positions`` in place of that ``arange(T)``.  Anything
  else stays, is recorded as a miss, and ``--onnx-to-graph`` names it if it is
  still used.  A ``Shape`` of an activation (TorchScript exports take
  ``x.size()``) is probed by running the graph up to it with every
  initializer as zeros; a shape vector that only ``Reshape`` nodes read as
  their target becomes a constant with -1 for T (the Reshape's output shape at
  the two lengths, so a -1 already in it is resolved).

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

        if op.result in self.names:
            return
        dt = np.dtype(_NP.get(op.elem.data, np.float32))
        vals = np.array(op.values, dtype=np.float64)
        if dt.kind in "iu":  # INT64_MAX (Slice ends) is not exact in float64
            info = np.iinfo(dt)
            vals = np.clip(vals, float(info.min), float(info.max) - 1024.0)
        arr = vals.astype(dt).reshape(op.dims)
        self.inits.append(numpy_helper.from_array(arr, self.name(op.result)))

    def add_init(self, op: ox.InitOp) -> None:
        """An initializer as zeros of its shape (a shape probe does not read weights)."""
        from onnx import numpy_helper

        arr = np.zeros(op.dims, dtype=_NP.get(op.elem.data, np.float32))
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


def _reshape_target(runs: list[list], probes: list[SSAValue], out: SSAValue) -> np.ndarray | None:
    """The target of a Reshape whose output shape differs between the probes in exactly one
    dim (T): that shape with -1 for T; else None."""
    shapes = [np.array(np.asarray(r[probes.index(out)]).shape, dtype=np.int64) for r in runs]
    varies = shapes[0] != shapes[1]
    if len(shapes[0]) != len(shapes[1]) or int(varies.sum()) != 1:
        return None
    target = shapes[0].copy()
    target[varies] = -1
    return target


def _upstream(starts: list[Operation | None], tokens: ox.InputOp, inside: set) -> set[Operation]:
    """``starts`` and every op they read, up to the input and the ops ``inside``."""
    need: set[Operation] = set()
    todo = list(starts)
    while todo:
        op = todo.pop()
        if not isinstance(op, Operation) or op in need or op is tokens or op in inside:
            continue
        need.add(op)
        todo.extend(a.owner for a in op.operands)  # type: ignore[misc]
    return need


def _reshapes(v: SSAValue) -> list[ox.NodeOp]:
    """The ``Reshape`` nodes reading ``v`` as their target shape, if only they read it."""
    users = [u.operation for u in v.uses]
    ok = all(
        isinstance(u.operation, ox.NodeOp) and u.operation.kind == "Reshape" and u.index == 1
        for u in v.uses
    )
    return users if users and ok else []  # type: ignore[return-value]


def _cut_positions(
    v: SSAValue, runs: list[list], probes: list[SSAValue], inside: set, tokens: SSAValue
) -> bool:
    """For an unclassified shape-only value ``v`` (TorchScript's rotary cos/sin table, computed
    from ``x.size()`` through ``Range`` with the ``inv_freq`` constant): find the values it
    is computed from that equal ``arange(T)`` and feed an op that does not; those uses read
    a ``ckir.Positions`` instead, and ``v`` stays a computation on it.  False if none."""

    def is_positions(u: SSAValue) -> bool:
        return _classify([np.asarray(r[probes.index(u)]) for r in runs]) == "positions"

    seen: set[Operation] = set()
    todo = [v.owner]
    cuts: list[tuple[ox.NodeOp, int]] = []
    found = False  # reads a ckir.Positions made for another table (cos, then sin)
    while todo:
        op = todo.pop()
        if not isinstance(op, ox.NodeOp) or op in seen or op not in inside:
            continue
        seen.add(op)
        for i, a in enumerate(op.args):
            if a.owner in inside and a in probes and is_positions(a):
                cuts.append((op, i))
            elif isinstance(a.owner, ox.NodeOp) and a.owner.kind == "ckir.Positions":
                found = True
            else:
                todo.append(a.owner)
    if not cuts:
        return found
    for op, i in cuts:
        src = op.args[i].owner
        assert isinstance(src, ox.NodeOp)
        pos = fused("Positions", [tokens], src)
        block = src.parent_block()
        assert block is not None
        block.insert_op_after(pos, src)
        op.operands[i] = pos.results[0]
    return True


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
        if op.kind == "Shape":  # of the input, or of an activation (TorchScript's x.size())
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
    inside = set(sub)
    # TorchScript exports take x.size() of activations and view(x.size(0), x.size(1), H, D):
    # the probe runs the activations' upstream graph (weights as zeros) and those Reshapes
    reshapes = {v: _reshapes(v)[0] for v in frontier if _reshapes(v)}
    starts = [op.args[0].owner for op in sub if op.kind == "Shape" and op.args[0] != tokens.result]
    starts += [r.args[0].owner for r in reshapes.values()]
    need = _upstream(starts, tokens, inside) | set(reshapes.values())
    probes = frontier + [r.results[0] for r in reshapes.values()]
    interior = [r for op in sub for r in op.results if r not in frontier]
    probes += interior  # probed too: the positions inside a rotary table's subgraph
    for op in module.ops:  # in order; initializers a shape probe reads are zeros
        reads = isinstance(op, ox.ConstOp) and any(u.operation in inside for u in op.result.uses)
        if isinstance(op, ox.ConstOp) and (op in need or reads):
            m.add_const(op)
        elif isinstance(op, ox.InitOp) and op in need:
            m.add_init(op)
        elif isinstance(op, ox.NodeOp) and (op in need or op in inside):
            m.add_node(op)
    try:
        runs = [
            m.run(_opset(module), probes, {m.name(tokens.result): np.zeros((1, t), np.int64)})
            for t in PROBE_T
        ]
    except Exception as e:
        rec.miss(sub[0], f"shape subgraph not evaluated ({type(e).__name__}: {e})")
        return
    targets = {v: _reshape_target(runs, probes, r.results[0]) for v, r in reshapes.items()}
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
        elif kind == "shape" and v in reshapes and targets.get(v) is not None:
            new = _to_const(targets[v], f"{owner.label}.folded")  # type: ignore[arg-type]
        elif kind == "shape":
            # a shape vector holding T (repeat_kv's Expand target): its dims, -1 for T
            dims = np.where(samples[0] == samples[1], samples[0], -1)
            new = fused("Shape", [tokens.result], owner, {"dims": [int(d) for d in dims]})
        elif _cut_positions(v, runs, probes, inside, tokens.result):
            rec.matched += 1  # v stays, computed from ckir.Positions (a rotary cos/sin table)
            continue
        else:
            why = f"classified {kind}; no arange(T) inside it"
            rec.miss(owner, f"shape-only value not recognised ({why})")
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
