"""``--plan-layout``: assign every lowered buffer a byte offset (the layout dialect)."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from ckir.dialects import layout as ly
from ckir.dialects import lowered as lw
from ckir.errors import CkirError
from ckir.layout_planner import plan


@dataclass(frozen=True)
class PlanLayoutPass(ModulePass):
    """Plan the memory of the lowered model into a ``layout.plan`` (replacing any earlier plan).

    Two arenas: ``weights`` (the bytes of weights.bin) and ``state`` (KV
    cache, io, activations). Every offset is a multiple of ``align``; with
    canaries, a 64-byte guard follows every slot. The plan's verifier proves
    alignment and that no two slots that can be live together overlap.

    Options:
      strategy (str, default "bump"): "bump" gives every buffer its own bytes,
        in IR order; "liveness" lets activations whose lifetimes (call index
        ranges, per mode) do not intersect share bytes, and reports the bytes
        saved against bump in ``layout.totals``.
      align (int, default 64): alignment of every offset, a power of two >= 8.
      canaries (bool, default true): put a guard after every slot.

    Example: ``ckir-opt m.mlir --lower-decode --plan-layout{strategy=liveness align=128}``
    """

    name = "plan-layout"

    strategy: str = "bump"
    align: int = 64
    canaries: bool = True

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        models = [o for o in op.ops if isinstance(o, lw.LoweredModelOp)]
        if len(models) != 1:
            raise CkirError(
                f"plan-layout: expected one lowered.model (run --lower-prefill or "
                f"--lower-decode first), found {len(models)}"
            )
        new_plan = plan(models[0], self.strategy, self.align, self.canaries)
        for old in [o for o in op.ops if isinstance(o, ly.PlanOp)]:
            Rewriter.erase_op(old)
        Rewriter.insert_op(new_plan, InsertPoint.after(models[0]))
