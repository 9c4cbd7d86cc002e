"""``--onnx-fuse-gelu``: GELU (native, erf or tanh form) → ``ckir.Gelu``.

* ``Gelu`` (opset 20; ``approximate = "none" | "tanh"``);
* erf form ``0.5 · x · (1 + Erf(x / √2))`` (``Div`` by √2 or ``Mul`` by 1/√2);
* tanh form ``0.5 · x · (1 + Tanh(√(2/π) · (x + 0.044715 · x³)))`` (``Pow(x, 3)``
  or ``x · x · x``);

the products in any association (the matcher flattens the ``Mul`` tree)::

    %h = "onnx.node"(%x, %half) <{op_type = "Mul", ...}>
    ... Pow, Mul, Add, Mul, Tanh, Add ...
    %y = "onnx.node"(%h, %t1) <{op_type = "Mul", ...}>
  becomes
    %y = "onnx.node"(%x) <{op_type = "Gelu", domain = "ckir", attrs = {approximate = "tanh"}, ...}>
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import SSAValue
from xdsl.passes import ModulePass

from ckir.dialects import onnx as ox
from ckir.passes.onnx_match import (
    Miss,
    Record,
    fused,
    is_close,
    need,
    node_of,
    nodes,
    remove_dead,
    replace,
    scalar,
)


def factors(v: SSAValue, root: bool = True) -> list[SSAValue]:
    """The factors of a product tree of ``Mul`` nodes (inner nodes used once)."""
    p = v.owner
    if isinstance(p, ox.NodeOp) and p.kind == "Mul" and (root or len(list(v.uses)) == 1):
        return factors(p.args[0], False) + factors(p.args[1], False)
    return [v]


def _split(vals: list[SSAValue]) -> tuple[float, list[SSAValue]]:
    k, rest = 1.0, []
    for f in vals:
        s = scalar(f)
        if s is None:
            rest.append(f)
        else:
            k *= s
    return k, rest


def _inner(t: ox.NodeOp, x: SSAValue) -> None:
    """Check the argument of Tanh / Erf against x."""
    k, rest = _split(factors(t.args[0]))
    if t.kind == "Erf":
        if len(rest) == 1 and rest[0] == x:
            need(is_close(k, 1 / math.sqrt(2)), "Erf argument is not x/sqrt(2)")
            return
        div = node_of(t.args[0], "Div")
        need(div.args[0] == x and is_close(scalar(div.args[1]), math.sqrt(2)), "not Erf(x/sqrt(2))")
        return
    need(is_close(k, math.sqrt(2 / math.pi)), "Tanh scale is not sqrt(2/pi)")
    need(len(rest) == 1, "Tanh argument is not a scaled sum")
    add = node_of(rest[0], "Add")
    for a, b in ((0, 1), (1, 0)):
        if add.args[a] == x:
            c, cube = _split(factors(add.args[b]))
            need(is_close(c, 0.044715), "cubic coefficient is not 0.044715")
            if len(cube) == 1:
                pw = node_of(cube[0], "Pow")
                need(pw.args[0] == x and scalar(pw.args[1]) == 3.0, "not Pow(x, 3)")
            else:
                need(cube == [x, x, x], "not x*x*x")
            return
    raise Miss("Tanh argument does not add x")


def match_gelu(root: ox.NodeOp) -> tuple[SSAValue, str]:
    """(x, approximate) of a GELU product rooted at the Mul ``root``."""
    k, rest = _split(factors(root.results[0]))
    need(is_close(k, 0.5), "no factor 0.5")
    need(len(rest) == 2, "not x * (1 + f(x))")
    for a, b in ((0, 1), (1, 0)):
        p = rest[b].owner
        if not (isinstance(p, ox.NodeOp) and p.kind == "Add"):
            continue
        for c, d in ((0, 1), (1, 0)):
            if scalar(p.args[d]) == 1.0:
                t = node_of(p.args[c], ("Tanh", "Erf"))
                _inner(t, rest[a])
                return rest[a], "tanh" if t.kind == "Tanh" else "none"
    raise Miss("no 1 + Tanh/Erf factor")


@dataclass(frozen=True)
class OnnxFuseGeluPass(ModulePass):
    """GELU (native, erf, tanh) → ckir.Gelu (see the module docstring)."""

    name = "onnx-fuse-gelu"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        rec = Record("gelu")
        for n in nodes(op, "Gelu"):
            new = fused("Gelu", [n.args[0]], n, {"approximate": n.attr("approximate", "none")})
            replace(n, [new], [new.results[0]])
            rec.matched += 1
        for t in nodes(op):
            if t.kind not in ("Tanh", "Erf"):
                continue
            # the root: the Mul the (1 + f) term flows into, through its Add
            try:
                add = [u.operation for u in t.results[0].uses]
                need(len(add) == 1 and isinstance(add[0], ox.NodeOp), "not (1 + f(x))")
                muls = [u.operation for u in add[0].results[0].uses]
                need(len(muls) == 1 and isinstance(muls[0], ox.NodeOp), "(1 + f) has other users")
                root = muls[0]
                assert isinstance(root, ox.NodeOp)
                need(root.kind == "Mul", "(1 + f) is not multiplied")
                # climb to the top of the product tree
                while True:
                    up = [u.operation for u in root.results[0].uses]
                    if len(up) == 1 and isinstance(up[0], ox.NodeOp) and up[0].kind == "Mul":
                        try:
                            match_gelu(up[0])
                            root = up[0]
                            continue
                        except Miss:
                            pass
                    break
                x, approx = match_gelu(root)
            except Miss as m:
                rec.miss(t, str(m))
                continue
            new = fused("Gelu", [x], root, {"approximate": approx})
            replace(root, [new], [new.results[0]])
            rec.matched += 1
        remove_dead(op)
        rec.save(op)
