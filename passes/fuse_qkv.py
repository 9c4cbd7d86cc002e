"""``--fuse-qkv``: three linear layers on the same input -> one multi-output kernel call."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import PatternRewriter

from ckir.dialects import lowered as lw
from ckir.passes.fusion import FusionPattern, Linear, run_fusion


class FuseQkv(FusionPattern):
    """Anchor: a linear call; partners: the next two linear calls with the same input.

    The three must have the same x, rows M and depth K, all or none a bias,
    write three different buffers none of which any of them reads, and the
    later two must be movable up to the anchor.  The fused op kind is
    ``fused_qkv``; params ``M`` (prefill), ``Nq``, ``Nk``, ``Nv``, ``K``.
    """

    def fuse(self, call: lw.CallOp, rewriter: PatternRewriter) -> bool:
        view = self.view
        first = view.linear(call)
        if first is None:
            return False
        group: list[Linear] = [first]
        for later in view.calls[view.position(call) + 1 :]:
            lin = view.linear(later)
            if (
                lin is not None
                and lin.x == first.x
                and lin.K == first.K
                and lin.M == first.M
                and (lin.b is None) == (first.b is None)
            ):
                group.append(lin)
                if len(group) == 3:
                    break
        if len(group) < 3:
            return False
        calls = [g.call for g in group]
        outs = [view.root(g.y) for g in group]
        ins = {view.root(n) for g in group for n in g.call.in_names}
        if len(set(outs)) != 3 or ins & set(outs):
            return False
        if not all(view.can_move(c, call, calls) for c in calls[1:]):
            return False
        q, k, v = group
        in_names = [first.x, q.w, k.w, v.w]
        if first.b is not None:
            in_names += [q.b, k.b, v.b]  # type: ignore[list-item]
        out_names = [q.y, k.y, v.y]
        params = {"M": first.M, "Nq": q.N, "Nk": k.N, "Nv": v.N, "K": first.K}
        fused = self.fuse_into(
            rewriter, "fused_qkv", in_names, out_names, params, calls, call, "fuse-qkv"
        )
        return fused is not None


@dataclass(frozen=True)
class FuseQkvPass(ModulePass):
    """Fuse three linear calls that read the same input (q/k/v) into one kernel call.

    Matches, in every lowered.program, a linear call (gemm_* in prefill,
    gemv_* in decode) and the next two linear calls reading the same input
    buffer with the same M and K (all with or all without bias), when they are
    consecutive or independent of the calls in between, and the registry has a
    ``fused_qkv`` kernel for the mode and dtypes (e.g. ``gemv_qkv_f32``,
    ``gemm_qkv_bias_f32``).  The three weights and outputs stay separate
    buffers.  Records ``fused = {qkv = N}`` on the program.

    Example: ``ckir-opt m.mlir --lower-decode --fuse-qkv --plan-layout``
    """

    name = "fuse-qkv"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        run_fusion(op, FuseQkv, "qkv")
