"""``--onnx-fuse-rmsnorm``: RMSNorm forms → ``ckir.RMSNorm``.

* ``RMSNormalization(x, g)`` (opset 23) over the last axis;
* ``g · (x · Reciprocal(Sqrt(ReduceMean(x²) + eps)))``, ``g · (x · (1 / Sqrt(...)))``
  (TorchScript's ``torch.rsqrt``) and ``g · (x / Sqrt(...))``,
  with ``x²`` as ``Pow(x, 2)`` or ``x · x``, the products in either order,
  ``x`` possibly behind a ``Cast`` (fp16 ↔ fp32 exports);

``g`` a 1-D initializer::

    %s = "onnx.node"(%x, %two) <{op_type = "Pow", ...}>
    %m = "onnx.node"(%s, %ax) <{op_type = "ReduceMean", ...}>
    ... Add eps, Sqrt, Reciprocal, Mul x, Mul g ...
  becomes
    %y = "onnx.node"(%x, %g) <{op_type = "RMSNorm", domain = "ckir", attrs = {eps = 1.0e-05 : f64}}>
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
    Record,
    fuse_each,
    init,
    need,
    node_of,
    remove_dead,
    scalar,
)


def _uncast(v: SSAValue) -> SSAValue:
    p = v.owner
    return p.args[0] if isinstance(p, ox.NodeOp) and p.kind == "Cast" else v


def match_rms(mean: ox.NodeOp) -> tuple[SSAValue, SSAValue, float, ox.NodeOp]:
    """From the ``ReduceMean`` of ``x²``: (x, g, eps, the node the norm replaces)."""
    sq = node_of(mean.args[0], ("Pow", "Mul"))
    if sq.kind == "Pow":
        need(scalar(sq.args[1]) == 2.0, "Pow exponent is not 2")
    else:
        need(sq.args[0] == sq.args[1], "Mul is not a square")
    x = _uncast(sq.args[0])
    users = [u.operation for u in mean.results[0].uses]
    need(len(users) == 1 and isinstance(users[0], ox.NodeOp), "the mean has other users")
    add = users[0]
    assert isinstance(add, ox.NodeOp)
    need(add.kind == "Add", "no + eps after the mean")
    eps = scalar(add.args[1])
    need(eps is not None, "epsilon is not a constant")
    root = [u.operation for u in add.results[0].uses]
    need(len(root) == 1 and isinstance(root[0], ox.NodeOp), "eps sum has other users")
    sqrt = root[0]
    assert isinstance(sqrt, ox.NodeOp)
    need(sqrt.kind == "Sqrt", "no Sqrt of the mean")
    nxt = [u.operation for u in sqrt.results[0].uses]
    need(len(nxt) == 1 and isinstance(nxt[0], ox.NodeOp), "Sqrt has other users")
    n = nxt[0]
    assert isinstance(n, ox.NodeOp)
    inverse = n.kind == "Reciprocal"
    if n.kind == "Div" and n.args[1] == sqrt.results[0] and n.args[0] != sqrt.results[0]:
        one = scalar(n.args[0])  # TorchScript's 1 / Sqrt(...): the inverse rms
        if one is not None:
            need(one == 1.0, f"the inverse rms is {one:g} / Sqrt, not 1 / Sqrt")
            inverse = True
    if inverse:
        users = [u.operation for u in n.results[0].uses]
        need(len(users) == 1 and isinstance(users[0], ox.NodeOp), f"{n.kind} has other users")
        n = users[0]  # type: ignore[assignment]
        assert isinstance(n, ox.NodeOp)
        need(n.kind == "Mul", "the inverse rms does not multiply x")
    else:
        need(n.kind == "Div" and n.args[1] == sqrt.results[0], "x is not divided by the rms")
    need(any(_uncast(a) == x for a in n.args), "the normalised value is not x")
    scaled = [u.operation for u in n.results[0].uses]
    if len(scaled) == 1 and isinstance(scaled[0], ox.NodeOp) and scaled[0].kind == "Cast":
        scaled = [u.operation for u in scaled[0].results[0].uses]
    need(len(scaled) == 1 and isinstance(scaled[0], ox.NodeOp), "no single scale by g")
    mul = scaled[0]
    assert isinstance(mul, ox.NodeOp)
    need(mul.kind == "Mul", "not scaled by g")
    g = next((a for a in mul.args if init(a) is not None), None)
    need(g is not None, "the gain is not an initializer")
    assert g is not None and eps is not None
    return x, g, eps, mul


@dataclass(frozen=True)
class OnnxFuseRmsnormPass(ModulePass):
    """RMSNorm (native or decomposed) → ckir.RMSNorm (see the module docstring)."""

    name = "onnx-fuse-rmsnorm"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        rec = Record("rmsnorm")

        def native(n: ox.NodeOp) -> Match:
            need(n.attr("axis", -1) == -1, "axis is not -1")
            need(init(n.args[1]) is not None, "the gain is not an initializer")
            return "RMSNorm", list(n.args[:2]), n, {"eps": float(n.attr("epsilon", 1e-5))}  # type: ignore[arg-type]

        def decomposed(mean: ox.NodeOp) -> Match | None:
            sq = mean.args[0].owner
            if not (isinstance(sq, ox.NodeOp) and sq.kind in ("Pow", "Mul")):
                return None  # not a mean of squares (a LayerNorm's mean, say)
            x, g, eps, last = match_rms(mean)
            return "RMSNorm", [x, g], last, {"eps": eps}

        fuse_each(op, "RMSNormalization", rec, native)
        fuse_each(op, "ReduceMean", rec, decomposed)
        remove_dead(op)
        rec.save(op)
