"""``--onnx-drop-views``: remove the batch-of-one views around token-major tensors.

ckir's graph holds activations as ``[T, N]``; an exported graph reshapes
between ``[1, T, N]`` and ``[T, N]`` (``Reshape`` to ``[1, -1, N]``,
``[-1, N]`` or ``[1, -1]``).  Such a ``Reshape`` (a constant shape with one
``-1``, every other entry 1 except the last) is replaced by its input.  A
reshape of a ``Transpose`` (the merge of attention heads) is left to
``--onnx-fuse-attention``::

    %v = "onnx.node"(%x, %s) <{op_type = "Reshape", ...}>   // %s = [-1, 24]
  becomes %x.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from ckir.dialects import onnx as ox
from ckir.passes.onnx_match import Record, const, nodes, producer, remove_dead


def is_token_view(shape: list[int]) -> bool:
    """A target shape that keeps a token-major tensor's rows and last dim."""
    if shape.count(-1) != 1 or len(shape) < 2:
        return False
    return all(d in (1, -1) for d in shape[:-1])


@dataclass(frozen=True)
class OnnxDropViewsPass(ModulePass):
    """Remove batch-of-one Reshape views (see the module docstring)."""

    name = "onnx-drop-views"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        rec = Record("drop-views")
        for n in nodes(op, "Reshape"):
            shape = const(n.args[1])
            if shape is None:
                rec.miss(n, "its shape is not a constant")
                continue
            p = producer(n.args[0])
            if isinstance(p, ox.NodeOp) and p.kind == "Transpose":
                continue
            if not is_token_view([int(d) for d in shape.ravel()]):
                continue
            n.results[0].replace_all_uses_with(n.args[0])
            rec.matched += 1
        remove_dead(op)
        rec.save(op)
