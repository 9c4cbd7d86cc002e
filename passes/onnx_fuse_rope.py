"""``--onnx-fuse-rope``: rotate-half rotary embedding → ``ckir.Rope``.

Matched from each ``Neg``, on a head view ``x4 = Transpose[0,2,1,3](Reshape(x, [1, -1, N, D]))``::

    x4 · cos + Concat(-Slice(x4, D/2:), Slice(x4, :D/2)) · sin
    cos, sin = [Unsqueeze] [1 ·] Cos / Sin (Concat(f, f)),  f = ckir.Positions · inv_freq

with ``inv_freq = theta^(-2i/D)`` (the default rope; scaled tables are not
recognised); and the native ``RotaryEmbedding(x4, Cos(f), Sin(f))`` (opset 23,
not interleaved, full rotary dim).  The rotation is rewritten on the token-major value, and the
head view re-made after it, so that ``--onnx-fuse-attention`` sees its
usual pattern::

    %r = "onnx.node"(%x) <{op_type = "Rope", domain = "ckir",
                           attrs = {heads = N, head_dim = D, theta = 1.0e+04 : f64}}>
    %r4 = Transpose[0,2,1,3](Reshape(%r, [1, -1, N, D]))
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import SSAValue
from xdsl.passes import ModulePass

from ckir.dialects import onnx as ox
from ckir.passes.onnx_match import (
    Miss,
    Record,
    const,
    fused,
    init_value,
    need,
    node_of,
    nodes,
    remove_dead,
    replace,
    scalar,
)


def _half(s: ox.NodeOp, d: int) -> str:
    """Which half of the last axis ``Slice`` ``s`` takes: ``"low"`` / ``"high"``."""
    vals = [const(a) for a in s.args[1:]]
    need(all(v is not None for v in vals), "slice bounds are not constants")
    starts, ends = int(vals[0].ravel()[0]), int(vals[1].ravel()[0])  # type: ignore[union-attr]
    if len(vals) > 2:
        axis = int(vals[2].ravel()[0])  # type: ignore[union-attr]
        need(axis in (-1, 3), "slice is not of the last axis")
    if len(vals) > 3:
        need(int(vals[3].ravel()[0]) == 1, "slice step is not 1")  # type: ignore[union-attr]
    if starts == 0 and ends == d // 2:
        return "low"
    if starts == d // 2 and ends >= d:
        return "high"
    raise Miss(f"slice [{starts}:{ends}] is not a half of {d}")


def _table(v: SSAValue, fn: str, doubled: bool = True) -> np.ndarray:
    """``[Unsqueeze] fn(Concat(f, f))`` (or ``fn(f)``), ``f = Positions · inv_freq`` ->
    inv_freq."""
    p = v.owner
    if isinstance(p, ox.NodeOp) and p.kind == "Unsqueeze":
        v = p.args[0]
    p = v.owner
    if isinstance(p, ox.NodeOp) and p.kind == "Mul":  # HF's attention_scaling (1 by default)
        k = next((scalar(a) for a in p.args if scalar(a) is not None), None)
        need(k is not None, f"{fn} table multiplied by a non-constant")
        need(k == 1.0, f"{fn} table scaled by {k:g} (a scaled rope's attention factor)")
        v = next(a for a in p.args if scalar(a) is None)
    arg = node_of(v, fn).args[0]
    if doubled:
        c = node_of(arg, "Concat")
        need(len(c.args) == 2 and c.args[0] == c.args[1], f"{fn} argument is not Concat(f, f)")
        arg = c.args[0]
    f = node_of(arg, "Mul")
    for a, b in ((0, 1), (1, 0)):
        pos = f.args[a].owner
        if isinstance(pos, ox.NodeOp) and pos.kind == "ckir.Positions":
            inv = init_value(f.args[b])
            if inv is None:
                inv = const(f.args[b])
            need(inv is not None, "inv_freq is not a constant")
            assert inv is not None
            return inv.ravel()
    raise Miss("the angles are not positions * inv_freq")


def match_rope(neg: ox.NodeOp) -> tuple[SSAValue, ox.NodeOp, ox.NodeOp, int, int, float]:
    """(x, head reshape, the Add replaced, heads, head_dim, theta)."""
    hi = node_of(neg.args[0], "Slice")
    x4 = hi.args[0]
    tr = node_of(x4, "Transpose")
    need([int(i) for i in tr.attr("perm")] == [0, 2, 1, 3], "not a head view")  # type: ignore[union-attr]
    rs = node_of(tr.args[0], "Reshape")
    shape = const(rs.args[1])
    need(shape is not None and shape.size == 4, "head reshape is not constant")
    assert shape is not None
    heads, d = int(shape.ravel()[2]), int(shape.ravel()[3])
    need(_half(hi, d) == "high", "negated slice is not the high half")
    users = [u.operation for u in neg.results[0].uses]
    need(len(users) == 1 and isinstance(users[0], ox.NodeOp), "Neg has other users")
    cat = users[0]
    assert isinstance(cat, ox.NodeOp)
    need(cat.kind == "Concat" and cat.args[0] == neg.results[0], "not Concat(-x2, x1)")
    lo = node_of(cat.args[1], "Slice")
    need(lo.args[0] == x4 and _half(lo, d) == "low", "second half is not x4[..., :D/2]")
    users = [u.operation for u in cat.results[0].uses]
    need(len(users) == 1 and isinstance(users[0], ox.NodeOp), "rotate-half has other users")
    ms = users[0]
    assert isinstance(ms, ox.NodeOp)
    need(ms.kind == "Mul", "rotate-half is not multiplied by sin")
    sin = ms.args[1] if ms.args[0] == cat.results[0] else ms.args[0]
    inv_s = _table(sin, "Sin")
    users = [u.operation for u in ms.results[0].uses]
    need(len(users) == 1 and isinstance(users[0], ox.NodeOp), "sin term has other users")
    add = users[0]
    assert isinstance(add, ox.NodeOp)
    need(add.kind == "Add", "no cos + sin sum")
    mc = node_of(add.args[0] if add.args[1] == ms.results[0] else add.args[1], "Mul")
    need(x4 in mc.args, "cos term is not of x4")
    cos = mc.args[1] if mc.args[0] == x4 else mc.args[0]
    inv_c = _table(cos, "Cos")
    return rs.args[0], rs, add, heads, d, _theta(inv_c, inv_s, d)


def _theta(inv_c: np.ndarray, inv_s: np.ndarray, d: int) -> float:
    """theta of a default rope table ``inv_freq = theta^(-2i/D)`` (``Miss`` otherwise)."""
    need(np.array_equal(inv_c, inv_s), "cos and sin use different frequencies")
    need(inv_c.size == d // 2 and inv_c.size > 1, "inv_freq does not have D/2 entries")
    i = np.arange(1, d // 2)
    theta = float(np.exp(np.mean(-np.log(inv_c[1:]) * d / (2 * i))))
    if abs(theta - round(theta)) <= 1e-4 * theta:
        theta = float(round(theta))
    want = theta ** (-np.arange(0, d, 2) / d)
    need(bool(np.allclose(inv_c, want, rtol=1e-5)), "inv_freq is not theta^(-2i/D) (scaled rope)")
    return theta


def match_native(n: ox.NodeOp) -> tuple[SSAValue, ox.NodeOp, int, int, float]:
    """``RotaryEmbedding(x4, Cos(f), Sin(f))`` (opset 23): (x, head reshape, N, D, theta)."""
    need(n.attr("interleaved", 0) == 0, "interleaved (GPT-J) rotation")
    need(len(n.args) == 3, "explicit position_ids")
    tr = node_of(n.args[0], "Transpose")
    need([int(i) for i in tr.attr("perm")] == [0, 2, 1, 3], "not a head view")  # type: ignore[union-attr]
    rs = node_of(tr.args[0], "Reshape")
    shape = const(rs.args[1])
    need(shape is not None and shape.size == 4, "head reshape is not constant")
    assert shape is not None
    heads, d = int(shape.ravel()[2]), int(shape.ravel()[3])
    need(n.attr("rotary_embedding_dim", 0) in (0, d), "partial rotary dim")
    inv_c = _table(n.args[1], "Cos", doubled=False)
    inv_s = _table(n.args[2], "Sin", doubled=False)
    return rs.args[0], rs, heads, d, _theta(inv_c, inv_s, d)


def _rewrite(x: SSAValue, rs: ox.NodeOp, at: ox.NodeOp, heads: int, d: int, theta: float) -> None:
    """``at`` (a [1, N, T, D] rotation of x's head view) -> ckir.Rope(x) + the head view."""
    r = fused("Rope", [x], at, {"heads": heads, "head_dim": d, "theta": theta})
    r3 = ox.NodeOp.make("Reshape", [r.results[0], rs.args[1]], 1, node=at.label + ".view")
    r4 = ox.NodeOp.make(
        "Transpose",
        [r3.results[0]],
        1,
        node=at.label + ".heads",
        attrs={"perm": ox.to_attr([0, 2, 1, 3])},
    )
    replace(at, [r, r3, r4], [r4.results[0]])


@dataclass(frozen=True)
class OnnxFuseRopePass(ModulePass):
    """Rotate-half rotary embedding → ckir.Rope (see the module docstring)."""

    name = "onnx-fuse-rope"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        rec = Record("rope")
        for neg in nodes(op, "Neg"):
            try:
                x, rs, add, heads, d, theta = match_rope(neg)
            except Miss as m:
                rec.miss(neg, str(m))
                continue
            _rewrite(x, rs, add, heads, d, theta)
            rec.matched += 1
        for n in nodes(op, "RotaryEmbedding"):
            try:
                x, rs, heads, d, theta = match_native(n)
            except Miss as m:
                rec.miss(n, str(m))
                continue
            _rewrite(x, rs, n, heads, d, theta)
            rec.matched += 1
        remove_dead(op)
        rec.save(op)
