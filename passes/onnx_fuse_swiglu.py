"""``--onnx-fuse-swiglu``: ``SiLU(a) · b`` → ``ckir.SwiGLU(a, b)``.

SiLU is ``a · Sigmoid(a)`` (either order); the product with ``b`` either order::

    %s = "onnx.node"(%a) <{op_type = "Sigmoid", ...}>
    %silu = "onnx.node"(%a, %s) <{op_type = "Mul", ...}>
    %y = "onnx.node"(%silu, %b) <{op_type = "Mul", ...}>
  becomes
    %y = "onnx.node"(%a, %b) <{op_type = "SwiGLU", domain = "ckir", ...}>
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from ckir.dialects import onnx as ox
from ckir.passes.onnx_match import (
    Match,
    Record,
    fuse_each,
    need,
    remove_dead,
)


def match_swiglu(sig: ox.NodeOp) -> Match:
    """From ``Sigmoid(a)``: ``a · Sigmoid(a) · b``."""
    a = sig.args[0]
    users = [u.operation for u in sig.results[0].uses]
    need(len(users) == 1 and isinstance(users[0], ox.NodeOp), "Sigmoid has other users")
    silu = users[0]
    assert isinstance(silu, ox.NodeOp)
    need(silu.kind == "Mul" and a in silu.args, "not a * Sigmoid(a)")
    outs = [u.operation for u in silu.results[0].uses]
    need(len(outs) == 1 and isinstance(outs[0], ox.NodeOp), "SiLU has other users")
    mul = outs[0]
    assert isinstance(mul, ox.NodeOp)
    need(mul.kind == "Mul", "SiLU is not multiplied (no gate)")
    b = mul.args[1] if mul.args[0] == silu.results[0] else mul.args[0]
    return "SwiGLU", [a, b], mul, {}


@dataclass(frozen=True)
class OnnxFuseSwigluPass(ModulePass):
    """SiLU(a) · b → ckir.SwiGLU (see the module docstring)."""

    name = "onnx-fuse-swiglu"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        rec = Record("swiglu")
        fuse_each(op, "Sigmoid", rec, match_swiglu)
        remove_dead(op)
        rec.save(op)
