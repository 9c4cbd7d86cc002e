"""Rewrite patterns: one per graph op kind, each replacing the op with kernel calls.

Each pattern knows which buffers are an op's inputs and outputs (and which
results update an operand in place); the integers and floats that describe
the op come from :func:`ckir.passes.lowering.op_params.op_params`, the one
place that reads them, shared with the gradient rules.  The pattern asks
:func:`ckir.passes.lowering.kernels.select_kernel` for the kernel that fits
the mode and dtypes: the kind's own, or those of the kind its signature's
``kernel`` names (``lm_head`` is a ``linear``).  Most kinds need nothing but
the default pattern (one call); the classes below are the kinds that update
in place or emit more than one call.  No pattern knows an
architecture: those live in templates.

The walker visits the program in reverse, so when a graph op is replaced its
results are already unused (their consumers were lowered first), and the
calls come out in program order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from xdsl.ir import Operation
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
)

from ckir.dialects import graph as g
from ckir.dialects import lowered as lw
from ckir.errors import CkirError
from ckir.passes.lowering.context import LoweringContext
from ckir.passes.lowering.kernels import ParamValue, kernel_call
from ckir.passes.lowering.op_params import (
    PARAMS,
    attention_is_plain,
    gelu_kind,
    norm_offset,
    op_params,
)
from ckir.vocab import GRAPH_OPS


class GraphOpLowering(RewritePattern):
    """Base pattern: operands (minus in-place ones) + weights -> ins, results -> outs."""

    kind: ClassVar[str]
    #: registry ``op`` of the kernels that implement it (None: ``kind``); from the
    #: signature's ``kernel`` for the generated patterns
    kernel_op: ClassVar[str | None] = None
    #: result index -> operand index whose buffer the result updates in place
    inplace: ClassVar[dict[int, int]] = {}

    def __init__(self, ctx: LoweringContext) -> None:
        self.ctx = ctx

    def match_and_rewrite(self, op: Operation, rewriter: PatternRewriter) -> None:
        if op.name != f"graph.{self.kind}" or op not in self.ctx.scopes:
            return
        scope, _ = self.ctx.scopes[op]
        self.ctx.one_row = self.ctx.footer_one_row(scope)
        try:
            calls = self.lower(op)
        finally:
            self.ctx.one_row = False
        rewriter.replace(op, calls, new_results=[None] * len(op.results))

    # -- helpers -----------------------------------------------------------------
    def where(self, op: Operation) -> str:
        scope, _ = self.ctx.scopes[op]
        return f"{self.ctx.mode} {scope} {op.name}"

    def call(
        self,
        op: Operation,
        kind: str,
        ins: Sequence[str],
        outs: Sequence[str],
        params: dict[str, ParamValue],
    ) -> lw.CallOp:
        scope, _ = self.ctx.scopes[op]
        return kernel_call(
            self.ctx.lowered_model,
            self.ctx.mode,
            self.ctx.buffer_types,
            kind,
            ins,
            outs,
            params,
            origin=lw.OriginAttr.make(scope, op.name),
            where=self.where(op),
        )

    # -- the default lowering: one call ------------------------------------------
    def lower(self, op: Operation) -> list[Operation]:
        assert isinstance(op, g.ComputeOp)
        ctx = self.ctx
        updated = set(self.inplace.values())
        ins = [ctx.buffer(v) for k, v in enumerate(op.operands) if k not in updated]
        ins += [ctx.weight_buffer(op, w) for w in range(len(op.weight_names))]
        outs = [ctx.buffer(r) for r in op.results]
        return [self.call(op, self.kernel_op or self.kind, ins, outs, self.params(op))]

    def params(self, op: Operation) -> dict[str, ParamValue]:
        """The op's kernel parameters, as :mod:`ckir.passes.lowering.op_params` defines them."""
        assert isinstance(op, g.ComputeOp)
        return op_params(self.ctx, op, self.where(op))


class LowerPosEmbed(GraphOpLowering):
    """pos_embed adds the position rows into its input's buffer (in place)."""

    kind = "pos_embed"
    inplace = {0: 0}


class LowerRope(GraphOpLowering):
    """rope rotates q and k in their own buffers (in place); with a per-pair divisor
    table (longrope) through the ``rope_ext`` kernels."""

    kind = "rope"
    inplace = {0: 0, 1: 1}

    def lower(self, op: Operation) -> list[Operation]:
        assert isinstance(op, g.ComputeOp)
        params = self.params(op)
        kind = "rope_ext" if "ext" in params else "rope"
        bufs = [self.ctx.buffer(r) for r in op.results]
        return [self.call(op, kind, [], bufs, params)]


class LowerRMSNorm(GraphOpLowering):
    """rmsnorm calls an ``rmsnorm_offset`` kernel when it has a nonzero gamma ``offset``
    (those kernels take it as a param; ``--fuse-add-rmsnorm`` fuses only ``rmsnorm``)."""

    kind = "rmsnorm"

    def lower(self, op: Operation) -> list[Operation]:
        assert isinstance(op, g.ComputeOp)
        ctx = self.ctx
        ins = [ctx.buffer(op.operands[0]), ctx.weight_buffer(op, 0)]
        outs = [ctx.buffer(op.results[0])]
        kind = "rmsnorm_offset" if norm_offset(op) else "rmsnorm"
        return [self.call(op, kind, ins, outs, self.params(op))]


class LowerHeadRMSNorm(LowerRMSNorm):
    """head_rmsnorm: the row norm's kernels over T*heads rows, ``rmsnorm_offset`` ones
    when it has a nonzero gamma ``offset``."""

    kind = "head_rmsnorm"


class LowerGelu(GraphOpLowering):
    """gelu calls the ``gelu_erf`` kernels when ``approximate = "none"``, else the tanh ones."""

    kind = "gelu"

    def lower(self, op: Operation) -> list[Operation]:
        assert isinstance(op, g.ComputeOp)
        ins, outs = [self.ctx.buffer(op.operands[0])], [self.ctx.buffer(op.results[0])]
        return [self.call(op, gelu_kind(op), ins, outs, self.params(op))]


class LowerAttention(GraphOpLowering):
    """attention(q, k, v) -> kv_store into the layer's KV cache, then attention over it.

    An attention with ``scale_dim``, ``softcap`` or ``window`` calls the
    ``attention_ext`` kernels (scale, softcap and this layer's window as params).

    Without a KV cache (mode backward: one sequence from position 0) the attention
    call reads k and v themselves (``P = 0``)."""

    kind = "attention"

    def __init__(self, ctx: LoweringContext) -> None:
        super().__init__(ctx)
        self.created: set[str] = set()

    def lower(self, op: Operation) -> list[Operation]:
        assert isinstance(op, g.ComputeOp)
        ctx = self.ctx
        q, k, v = (ctx.buffer(x) for x in op.operands)
        scope, _ = ctx.scopes[op]
        params = self.params(op)
        kind = "attention" if attention_is_plain(op) else "attention_ext"
        if not ctx.keeps_cache:
            return [self.call(op, kind, [q, k, v], [ctx.buffer(op.results[0])], params)]
        # v before k: each new cache goes in front of the ones made before it
        vc = self._cache(f"kv.{scope}.v", op, 2)
        kc = self._cache(f"kv.{scope}.k", op, 1)
        store = self.call(op, "kv_store", [k, v], [kc, vc], params)
        attend = self.call(op, kind, [q, kc, vc], [ctx.buffer(op.results[0])], params)
        return [store, attend]

    def _cache(self, name: str, op: Operation, operand: int) -> str:
        """The global KV-cache buffer ``name`` ([max_context, KV*D]), created on first use."""
        ctx = self.ctx
        src = ctx.buffer_types[ctx.buffer(op.operands[operand])]
        width = src.shape_ints[-1]
        btype = lw.BufferType.make([ctx.max_context, width], src.dtype_name)
        existing = ctx.buffer_types.get(name)
        if existing is not None:
            if existing != btype:
                raise CkirError(
                    f"{self.where(op)}: KV cache @{name} already has shape "
                    f"{list(existing.shape_ints)} from another mode; this mode needs "
                    f"{list(btype.shape_ints)} (use the same max-context for every mode)"
                )
            return name
        buf = lw.BufferOp.make(name, "kv_cache", btype)
        # The walk runs backwards: put each new cache before the caches created so
        # far (or before the first program), so the caches come out in layer order.
        block = ctx.lowered_model.body_block
        anchor = next(
            (
                o
                for o in block.ops
                if (isinstance(o, lw.BufferOp) and o.buffer_name in self.created)
                or isinstance(o, lw.ProgramOp)
            ),
            None,
        )
        if anchor is None:
            block.add_op(buf)
        else:
            block.insert_op_before(buf, anchor)
        self.created.add(name)
        ctx.buffer_types[name] = btype
        return name


_HAND_WRITTEN: tuple[type[GraphOpLowering], ...] = (
    LowerPosEmbed,
    LowerRope,
    LowerAttention,
    LowerRMSNorm,
    LowerHeadRMSNorm,
    LowerGelu,
)
#: one pattern per graph op kind that has kernel parameters (:mod:`op_params`): the
#: hand-written ones above, and the default one-call pattern for every other kind
PATTERNS: tuple[type[GraphOpLowering], ...] = _HAND_WRITTEN + tuple(
    type(f"Lower_{kind}", (GraphOpLowering,), {"kind": kind, "kernel_op": sig.kernel or None})
    for kind, sig in GRAPH_OPS.items()
    if (sig.elementwise or kind in PARAMS) and kind not in {p.kind for p in _HAND_WRITTEN}
)

INPLACE: dict[str, dict[int, int]] = {p.kind: p.inplace for p in PATTERNS if p.inplace}


def rewrite_program(ctx: LoweringContext) -> None:
    """Apply every lowering pattern to the program's graph ops (reverse walk)."""
    patterns = [p(ctx) for p in PATTERNS]
    walker = PatternRewriteWalker(
        GreedyRewritePatternApplier(patterns, dce_enabled=False),  # type: ignore[arg-type]
        walk_reverse=True,
        apply_recursively=False,
    )
    walker.rewrite_region(ctx.program.body)
    leftover = [op.name for op in ctx.program.body_block.ops if op.name.startswith("graph.")]
    if leftover:
        raise CkirError(f"lowering {ctx.mode}: no pattern lowers {sorted(set(leftover))}")
