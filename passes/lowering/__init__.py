"""Lowering of the graph dialect to the lowered dialect, one mode at a time.

:func:`lower_mode` is what ``--lower-prefill`` and ``--lower-decode`` run:
materialize the program (unroll, one buffer per value), then apply the
rewrite patterns that turn each graph op into kernel calls.
"""

from __future__ import annotations

from xdsl.dialects.builtin import ModuleOp

from ckir.passes.lowering.materialize import materialize
from ckir.passes.lowering.patterns import INPLACE, rewrite_program


def lower_mode(
    module: ModuleOp, mode: str, max_context: int | None, pass_name: str, logits: str = "all"
) -> None:
    """Add a ``lowered.program`` for ``mode`` to the module's ``lowered.model``.

    ``logits="last"`` runs the footer on the last token row only (see materialize).
    """
    ctx = materialize(module, mode, max_context, INPLACE, pass_name, logits)
    rewrite_program(ctx)
