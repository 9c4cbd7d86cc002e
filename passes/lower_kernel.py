"""``--lower-kernel``: graph matmul / relu / fused matmul+relu -> kernel ops, schedule kept.

Each ``graph.matmul``, ``graph.fused_matmul_relu`` and ``graph.relu`` becomes
``kernel.matmul``, ``kernel.matmul_relu`` and ``kernel.relu`` on the same
operands and types; its ``#graph.schedule<tile_m, tile_n, tile_k, vectorize>``
becomes a ``#kernel.schedule`` with the same fields (``unroll``, ``order`` and ``mr``
are kernel-only and left unset).  A hint that does not apply to the kernel op
(``tile_k`` on a relu) is an error naming the op.  Other ops are left alone.

Example: ``ckir-opt k.mlir --lower-kernel --fuse-kernel-matmul-relu``
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Operation
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
)

from ckir.dialects import graph as g
from ckir.dialects import kernel as k
from ckir.errors import CkirError

#: graph op class -> the kernel op class it lowers to
LOWERINGS: dict[type[g.ComputeOp], type[k.KernelComputeOp]] = {
    g.MatmulOp: k.MatmulOp,
    g.FusedMatmulReluOp: k.MatmulReluOp,
    g.ReluOp: k.ReluOp,
}


def kernel_schedule(op: g.ComputeOp, target: type[k.KernelComputeOp]) -> k.ScheduleAttr | None:
    """The ``#kernel.schedule`` of a graph op's ``#graph.schedule`` (None without one)."""
    schedule = op.properties.get("schedule")
    if not isinstance(schedule, g.ScheduleAttr):
        return None
    values = schedule.values()
    for field in values:
        if field not in target.SCHEDULE_APPLIES:
            name = op.results[0].name_hint
            where = f"{op.name} %{name}" if name else op.name
            raise CkirError(
                f"lower-kernel: {where}: schedule field {field} does not apply to "
                f"{target.name} (it takes {', '.join(target.SCHEDULE_APPLIES)})"
            )
    return k.ScheduleAttr.from_values(dict(values))


class _LowerToKernel(RewritePattern):
    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        target = LOWERINGS.get(type(op))
        if target is None:
            return
        assert isinstance(op, g.ComputeOp)
        props = {}
        schedule = kernel_schedule(op, target)
        if schedule is not None:
            props["schedule"] = schedule
        new = target.build(
            operands=list(op.inputs),
            result_types=[op.outputs[0].type],
            properties=props,
        )
        new.results[0].name_hint = op.outputs[0].name_hint
        rewriter.replace(op, new)


@dataclass(frozen=True)
class LowerKernelPass(ModulePass):
    """Lower graph.matmul / graph.fused_matmul_relu / graph.relu to kernel ops.

    No options.  The ``#graph.schedule`` of each op is carried into its
    ``#kernel.schedule``; a field that does not apply to the kernel op is an error.
    """

    name = "lower-kernel"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        PatternRewriteWalker(
            GreedyRewritePatternApplier([_LowerToKernel()], dce_enabled=False),
            apply_recursively=False,
        ).rewrite_module(op)
