"""``--onnx-fuse-layernorm``: LayerNormalization and its decomposed form → ``ckir.LayerNorm``.

* ``LayerNormalization(x, scale, bias)`` over the last axis;
* the decomposed form ``(x - ReduceMean(x)) / Sqrt(ReduceMean((x - m)^2) + eps) * scale + bias``
  (``Pow(·, 2)`` or ``d * d``; ``Div`` or ``Mul`` by ``Reciprocal``);

with ``scale`` and ``bias`` 1-D initializers::

    %y = "onnx.node"(%x, %g, %b) <{op_type = "LayerNormalization",
                                   attrs = {axis = -1 : i64, epsilon = 1.0e-05 : f64}, ...}>
  becomes
    %y = "onnx.node"(%x, %g, %b) <{op_type = "LayerNorm", domain = "ckir",
                                   attrs = {eps = 1.0e-05 : f64}, ...}>
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import SSAValue
from xdsl.passes import ModulePass

from ckir.dialects import onnx as ox
from ckir.passes.onnx_match import (
    Match,
    Miss,
    Record,
    fuse_each,
    fused,
    init,
    is_close,
    need,
    node_of,
    nodes,
    remove_dead,
    replace,
    scalar,
)


def _affine(v: SSAValue) -> tuple[ox.NodeOp, SSAValue, SSAValue, SSAValue]:
    """``Add(Mul(n, scale), bias)`` -> (Add node, n, scale, bias)."""
    add = node_of(v, "Add")
    for a, b in ((0, 1), (1, 0)):
        if init(add.args[b]) is None:
            continue
        mul = add.args[a].owner
        if isinstance(mul, ox.NodeOp) and mul.kind == "Mul":
            for c, d in ((0, 1), (1, 0)):
                if init(mul.args[d]) is not None:
                    return add, mul.args[c], mul.args[d], add.args[b]
    raise Miss("no Mul(n, scale) + bias initializers")


def _decomposed(norm: SSAValue) -> tuple[SSAValue, float]:
    """``(x - mean) / sqrt(var + eps)`` -> (x, eps)."""
    div = node_of(norm, ("Div", "Mul"))
    sub = node_of(div.args[0], "Sub")
    mean = node_of(sub.args[1], "ReduceMean")
    x = sub.args[0]
    need(mean.args[0] == x, "the mean is not of the normalised input")
    if div.kind == "Div":
        root = node_of(div.args[1], "Sqrt")
    else:
        root = node_of(node_of(div.args[1], "Reciprocal").args[0], "Sqrt")
    add = node_of(root.args[0], "Add")
    eps = scalar(add.args[1])
    need(eps is not None, "epsilon is not a constant")
    var = node_of(add.args[0], "ReduceMean")
    sq = node_of(var.args[0], ("Pow", "Mul"))
    if sq.kind == "Pow":
        need(scalar(sq.args[1]) == 2.0, "Pow exponent is not 2")
    else:
        need(sq.args[0] == sq.args[1], "Mul is not a square")
    need(sq.args[0] == sub.results[0], "the variance is not of x - mean")
    assert eps is not None
    return x, eps


@dataclass(frozen=True)
class OnnxFuseLayernormPass(ModulePass):
    """LayerNormalization (native or decomposed) → ckir.LayerNorm (see the module docstring)."""

    name = "onnx-fuse-layernorm"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        rec = Record("layernorm")

        def native(n: ox.NodeOp) -> Match:
            need(n.attr("axis", -1) == -1, "axis is not -1")
            need(len(n.args) == 3, "no bias")
            need(all(init(a) is not None for a in n.args[1:]), "scale/bias not initializers")
            need(all(not list(r.uses) for r in n.results[1:]), "mean/inv-std output is used")
            return "LayerNorm", list(n.args), n, {"eps": float(n.attr("epsilon", 1e-5))}  # type: ignore[arg-type]

        fuse_each(op, "LayerNormalization", rec, native)
        for n in nodes(op, "ReduceMean"):
            # candidates: the mean whose Sub feeds a normalisation
            subs = [u.operation for u in n.results[0].uses]
            sub = next((s for s in subs if isinstance(s, ox.NodeOp) and s.kind == "Sub"), None)
            if sub is None:
                continue
            divs = [u.operation for u in sub.results[0].uses]
            div = next(
                (d for d in divs if isinstance(d, ox.NodeOp) and d.kind in ("Div", "Mul")), None
            )
            if div is None:
                continue
            try:
                x, eps = _decomposed(div.results[0])
                users = [u.operation for u in div.results[0].uses]
                need(len(users) == 1, "the normalised value has other users")
                mul = users[0]
                need(isinstance(mul, ox.NodeOp), "no scale")
                assert isinstance(mul, ox.NodeOp)
                add_users = [u.operation for u in mul.results[0].uses]
                need(len(add_users) == 1, "the scaled value has other users")
                add, _, scale, bias = _affine(add_users[0].results[0])
                need(is_close(eps, eps), "eps")
            except Miss as m:
                rec.miss(n, str(m))
                continue
            new = fused("LayerNorm", [x, scale, bias], add, {"eps": eps})
            replace(add, [new], [new.results[0]])
            rec.matched += 1
        remove_dead(op)
        rec.save(op)
