"""``--onnx-fuse-embedding``: token and learned position embeddings.

* ``Gather(table, ids)`` (axis 0, ``table`` an initializer, ``ids`` the graph
  input) → ``ckir.Embed(table, ids)``;
* ``Add(e, Gather(pos, ckir.Positions))`` with ``e`` an embedding →
  ``ckir.PosEmbed(e, pos)``::

    %e = "onnx.node"(%wte, %ids) <{op_type = "Gather", ...}>
    %p = "onnx.node"(%wpe, %pos) <{op_type = "Gather", ...}>     // %pos = ckir.Positions
    %x = "onnx.node"(%e, %p) <{op_type = "Add", ...}>
  becomes
    %e = "onnx.node"(%wte, %ids) <{op_type = "Embed", domain = "ckir", ...}>
    %x = "onnx.node"(%e, %wpe) <{op_type = "PosEmbed", domain = "ckir", ...}>
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from ckir.dialects import onnx as ox
from ckir.passes.onnx_match import (
    Miss,
    Record,
    fused,
    init,
    need,
    node_of,
    nodes,
    producer,
    remove_dead,
    replace,
)


@dataclass(frozen=True)
class OnnxFuseEmbeddingPass(ModulePass):
    """Gather of an initializer table → ckir.Embed / ckir.PosEmbed (see the module docstring)."""

    name = "onnx-fuse-embedding"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        emb, pos = Record("embed"), Record("pos-embed")
        for n in nodes(op, "Gather"):
            if not isinstance(producer(n.args[1]), ox.InputOp):
                continue
            try:
                need(n.attr("axis", 0) == 0, "axis is not 0")
                need(init(n.args[0]) is not None, "the table is not an initializer")
            except Miss as m:
                emb.miss(n, str(m))
                continue
            new = fused("Embed", [n.args[0], n.args[1]], n)
            replace(n, [new], [new.results[0]])
            emb.matched += 1
        for n in nodes(op, "Add"):
            for a, b in ((0, 1), (1, 0)):
                e = producer(n.args[a])
                if not (isinstance(e, ox.NodeOp) and e.kind == "ckir.Embed"):
                    continue
                g = n.args[b].owner
                if not (isinstance(g, ox.NodeOp) and g.kind == "Gather"):
                    break  # a residual add, not a position embedding
                try:
                    gather = node_of(n.args[b], "Gather")
                    need(
                        init(gather.args[0]) is not None, "the position table is not an initializer"
                    )
                    node_of(gather.args[1], "ckir.Positions")
                except Miss as m:
                    pos.miss(n, str(m))
                    break
                new = fused("PosEmbed", [n.args[a], gather.args[0]], n)
                replace(n, [new], [new.results[0]])
                pos.matched += 1
                break
        remove_dead(op)
        emb.save(op)
        pos.save(op)
