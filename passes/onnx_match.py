"""What the ONNX passes share: walking ``onnx`` dialect values, constants, and the
per-rule record of matches and misses that ``ckir import --explain`` prints.

A rule records on the module, so the record survives printing the IR::

    builtin.module attributes {onnx.matched = {layernorm = 5 : i64},
                               onnx.missed = ["attention: node_softmax: scale is not 1/sqrt(D)"]}

A miss is "``rule``: ``node``: ``check that failed``".
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
from xdsl.dialects.builtin import ArrayAttr, DictionaryAttr, IntegerAttr, ModuleOp, StringAttr
from xdsl.ir import Operation, SSAValue

from ckir.dialects import onnx as ox

MATCHED = "onnx.matched"
MISSED = "onnx.missed"


class Miss(Exception):
    """A candidate subgraph failed one check (the message names the check)."""


def need(ok: bool, check: str) -> None:
    """Raise :class:`Miss` with ``check`` unless ``ok``."""
    if not ok:
        raise Miss(check)


class Record:
    """Counts matches and collects misses of one rule; :meth:`save` writes them."""

    def __init__(self, rule: str) -> None:
        self.rule = rule
        self.matched = 0
        self.missed: list[str] = []

    def miss(self, node: ox.NodeOp, why: str) -> None:
        self.missed.append(f"{self.rule}: {node.label} ({node.kind}): {why}")

    def save(self, module: ModuleOp) -> None:
        old = module.attributes.get(MATCHED)
        counts = dict(old.data) if isinstance(old, DictionaryAttr) else {}
        prev = counts.get(self.rule)
        n = self.matched + (prev.value.data if isinstance(prev, IntegerAttr) else 0)
        counts[self.rule] = IntegerAttr(n, 64)
        module.attributes[MATCHED] = DictionaryAttr(counts)
        if self.missed:
            olds = module.attributes.get(MISSED)
            items = list(olds.data) if isinstance(olds, ArrayAttr) else []
            items += [StringAttr(m) for m in self.missed]
            module.attributes[MISSED] = ArrayAttr(items)


def matched_counts(module: ModuleOp) -> dict[str, int]:
    """Rule -> number of subgraphs it matched (from the module's record)."""
    old = module.attributes.get(MATCHED)
    if not isinstance(old, DictionaryAttr):
        return {}
    return {k: v.value.data for k, v in old.data.items() if isinstance(v, IntegerAttr)}


def missed(module: ModuleOp) -> list[str]:
    """The recorded misses, in order."""
    olds = module.attributes.get(MISSED)
    return [s.data for s in olds.data] if isinstance(olds, ArrayAttr) else []


def nodes(module: ModuleOp, kind: str | None = None) -> Iterator[ox.NodeOp]:
    """The ``onnx.node`` ops of ``module`` (of ``kind`` only, e.g. ``"Softmax"``), a snapshot."""
    for op in list(module.ops):
        if op.parent is None:  # erased by an earlier rewrite of this walk
            continue
        if isinstance(op, ox.NodeOp) and (kind is None or op.kind == kind):
            yield op


def producer(v: SSAValue) -> Operation | None:
    """The op defining ``v``."""
    return v.owner if isinstance(v.owner, Operation) else None


def node_of(v: SSAValue, kind: str | tuple[str, ...]) -> ox.NodeOp:
    """The ``onnx.node`` of ``kind`` defining ``v`` (``Miss`` naming what was found)."""
    p = producer(v)
    kinds = (kind,) if isinstance(kind, str) else kind
    if isinstance(p, ox.NodeOp) and p.kind in kinds:
        return p
    found = p.kind if isinstance(p, ox.NodeOp) else (p.name if p is not None else "argument")
    raise Miss(f"expected {' or '.join(kinds)}, found {found}")


def const(v: SSAValue) -> np.ndarray | None:
    """The value of an ``onnx.const``, else None."""
    p = producer(v)
    if isinstance(p, ox.ConstOp):
        return np.array(p.values, dtype=np.float64).reshape(p.dims)
    return None


def init_value(v: SSAValue) -> np.ndarray | None:
    """The data an ``onnx.init`` carries (small 1-D ones), else None."""
    p = producer(v)
    if isinstance(p, ox.InitOp) and p.value is not None:
        return np.array([x.value.data for x in p.value.data], dtype=np.float64)
    return None


def scalar(v: SSAValue) -> float | None:
    """A constant holding one value (any shape of size 1), else None."""
    c = const(v)
    if c is None or c.size != 1:
        return None
    return float(c.ravel()[0])


def init(v: SSAValue) -> ox.InitOp | None:
    """The ``onnx.init`` defining ``v``, else None."""
    p = producer(v)
    return p if isinstance(p, ox.InitOp) else None


def single_use(v: SSAValue) -> bool:
    return len(list(v.uses)) == 1


def is_close(a: float | None, b: float, rel: float = 1e-4) -> bool:
    return a is not None and abs(a - b) <= rel * abs(b)


def replace(old: ox.NodeOp, new: list[Operation], results: list[SSAValue]) -> None:
    """Insert ``new`` before ``old``, redirect ``old``'s results to ``results``, erase ``old``
    (the nodes it read stay until :func:`remove_dead`)."""
    block = old.parent_block()
    assert block is not None
    for op in new:
        block.insert_op_before(op, old)
    for r, n in zip(old.results, results, strict=False):
        r.replace_all_uses_with(n)
    assert all(not list(r.uses) for r in old.results[len(results) :]), "unused results only"
    old.detach()
    old.erase(safe_erase=False)


def remove_dead(module: ModuleOp) -> None:
    """Erase ``onnx.node`` / ``onnx.const`` / ``onnx.init`` ops whose results nobody uses."""
    changed = True
    while changed:
        changed = False
        for op in reversed(list(module.ops)):
            if isinstance(op, (ox.NodeOp, ox.ConstOp, ox.InitOp)) and all(
                not list(r.uses) for r in op.results
            ):
                op.detach()
                op.erase()
                changed = True


def fused(
    op_type: str, inputs: list[SSAValue], at: ox.NodeOp, attrs: dict[str, object] | None = None
) -> ox.NodeOp:
    """A ``ckir``-domain node named after the node ``at`` it replaces."""
    return ox.NodeOp.make(
        op_type,
        inputs,
        1,
        domain=ox.CKIR_DOMAIN,
        node=at.label,
        attrs={k: ox.to_attr(v) for k, v in (attrs or {}).items()},
    )


#: what a rule's matcher returns: (fused op_type, its inputs, the node it replaces, attributes)
Match = tuple[str, list[SSAValue], ox.NodeOp, dict[str, object]]


def fuse_each(
    module: ModuleOp, kind: str, rec: Record, match: Callable[[ox.NodeOp], Match | None]
) -> None:
    """For each node of ``kind``: ``match`` it (``None``: not a candidate; :class:`Miss`:
    recorded with its check) and replace the node it names by the fused node."""
    for n in nodes(module, kind):
        try:
            found = match(n)
        except Miss as m:
            rec.miss(n, str(m))
            continue
        if found is None:
            continue
        op_type, ins, at, attrs = found
        new = fused(op_type, ins, at, attrs)
        replace(at, [new], [new.results[0]])
        rec.matched += 1
