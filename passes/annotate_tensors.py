"""``--annotate-tensors``: the tensor table (role, layout, qbits) on every graph tensor."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from ckir.tensor_table import annotate_module


@dataclass(frozen=True)
class AnnotateTensorsPass(ModulePass):
    """Give every tensor of the graph models its table entry (``ckir.tensor_table``).

    A ``graph.weight`` gets ``tensor = {role, layout, qbits}`` in its ``attributes``;
    a ``graph.input`` and every compute op get the same dictionary for their result
    (an array of them for several results); a ``graph.attention`` also gets ``kv``,
    the entry of the KV cache it writes.  Roles: weight, embedding, activation, kv,
    io; layouts: ``[N, K]`` matrices, ``[V, E]`` tables, activations with their heads
    axis split out (``[T, H, D]``); qbits from the dtype (f32 32, bf16 16, q8_0 8,
    q4_* 4, ...).  The frontends run it after every import, so a frontend needs no
    code of its own for it.  Entries already present are kept unless ``overwrite``.

    Options:
      overwrite (bool, default false): recompute entries that exist (after the
      weights' dtypes were changed by hand, for example).

    Example: ``ckir-opt graph.mlir --annotate-tensors`` turns
    ``%q = graph.linear %h {weights = [@"layers.{i}.attn.wq"]} : ... -> !graph.tensor<[T,
    H*D], f32>`` (read by a rope with ``heads H ... head_dim D``) into ``%q = graph.linear
    %h {tensor = {role = "activation", layout = "[T, H, D]", qbits = 32 : i64}, weights =
    [...]} : ...``.
    """

    name = "annotate-tensors"

    overwrite: bool = False

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        annotate_module(op, overwrite=self.overwrite)
