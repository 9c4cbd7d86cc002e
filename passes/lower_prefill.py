"""``--lower-prefill``: add the prefill program (T tokens at once) to the module."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from ckir.passes.lowering import lower_mode


@dataclass(frozen=True)
class LowerPrefillPass(ModulePass):
    """Lower the graph model to a prefill program: GEMM kernels, T = run-time tokens.

    Adds ``lowered.program @prefill mode "prefill"`` to the module's
    ``lowered.model`` (created, with one global buffer per weight, if absent).
    Token-indexed buffers have ``max-context`` rows; kernels see the run-time
    token count ``#lowered.rt<T>`` and start position ``#lowered.rt<P>``.
    Attention writes K/V into a global KV cache of ``max-context`` rows.

    Options:
      max-context (int, default min(C, 256), C the model's maximum positions): the largest
        prompt and the KV-cache length.
      logits ("all" or "last", default "all"): the token rows the footer (final norm,
        lm_head, ...) runs on. "all": every row, the output is [T, V] (scoring,
        training). "last": a ``copy_last_row`` call copies row T-1 of the body's
        output into a one-row buffer and the footer runs on it, so the output is
        [1, V] and the lm_head GEMM has M = 1 (generation).

    Example: ``ckir-opt graph.mlir -p 'lower-prefill{max-context=128}'``
    """

    name = "lower-prefill"

    max_context: int | None = None
    logits: str = "all"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        lower_mode(op, "prefill", self.max_context, self.name, self.logits)
