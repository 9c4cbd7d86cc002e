"""``--lower-decode``: add the decode program (one token, KV cache) to the module."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from ckir.passes.lowering import lower_mode


@dataclass(frozen=True)
class LowerDecodePass(ModulePass):
    """Lower the graph model to a decode program: T = 1, GEMV kernels, persistent KV cache.

    Adds ``lowered.program @decode mode "decode"`` to the module's
    ``lowered.model`` (created, with one global buffer per weight, if absent).
    Every token-indexed buffer has one row; the position of the new token is
    the run-time value ``#lowered.rt<P>``; attention appends to and reads the
    global KV cache of ``max-context`` rows shared with the prefill program.

    Options:
      max-context (int, default min(C, 256), C the model's maximum positions): the
        KV-cache length (must equal the prefill program's when both are lowered).

    Example: ``ckir-opt graph.mlir --lower-decode{max-context=128} --plan-layout``
    """

    name = "lower-decode"

    max_context: int | None = None

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        lower_mode(op, "decode", self.max_context, self.name)
