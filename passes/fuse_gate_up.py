"""``--fuse-gate-up``: gate linear + up linear + swiglu -> one SwiGLU kernel call."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import PatternRewriter

from ckir.dialects import lowered as lw
from ckir.passes.fusion import (
    FusionPattern,
    erase_unused,
    rows_times,
    run_fusion,
)


class FuseGateUp(FusionPattern):
    """Anchor: a swiglu call ``swiglu(g, u) -> o``.

    ``g`` and ``u`` must be written by linear calls on the same input (same
    M, N, K, no bias), be named by no other call, and be program-local
    activation buffers; the two linear calls move down to the swiglu.  The
    fused op kind is ``fused_gate_up`` (params ``M`` in prefill, ``N``, ``K``);
    the gate and up buffers are erased.
    """

    def fuse(self, call: lw.CallOp, rewriter: PatternRewriter) -> bool:
        view = self.view
        if (names := view.operands(call, "swiglu", 2, 1)) is None:
            return False
        (g_name, u_name), (out,) = names
        g_root, u_root = view.root(g_name), view.root(u_name)
        if g_root == u_root or view.root(out) in (g_root, u_root):
            return False
        producers = []
        for name, root in ((g_name, g_root), (u_name, u_root)):
            writer = view.last_writer_before(call, root)
            lin = view.linear(writer) if writer is not None else None
            if lin is None or lin.y != name or lin.b is not None:
                return False
            # only the producer and the swiglu may touch the buffer
            if {id(c) for c in view.uses(root)} != {id(writer), id(call)}:
                return False
            buf = view.local.get(root)
            if not isinstance(buf, lw.BufferOp) or buf.role != "activation":
                return False
            producers.append(lin)
        gate, up = producers
        if (gate.x, gate.M, gate.N, gate.K) != (up.x, up.M, up.N, up.K):
            return False
        if call.param_values.get("n") != rows_times(gate.M, gate.N):
            return False
        group = [gate.call, up.call, call]
        if not all(view.can_move(lin.call, call, group) for lin in producers):
            return False
        in_names, out_names = [gate.x, gate.w, up.w], [out]
        params = {"M": gate.M, "N": gate.N, "K": gate.K}
        fused = self.fuse_into(
            rewriter, "fused_gate_up", in_names, out_names, params, group, call, "fuse-gate-up"
        )
        if fused is None:
            return False
        erase_unused(rewriter, view, [g_name, u_name], group, [fused])
        return True


@dataclass(frozen=True)
class FuseGateUpPass(ModulePass):
    """Fuse gate and up linear calls and their swiglu into one kernel call (no gate/up buffers).

    Matches ``swiglu(gate, up) -> out`` where gate and up are written by
    linear calls on the same input (same M, N, K, no bias) and used by nothing
    else, when the registry has a ``fused_gate_up`` kernel for the mode and
    dtypes (``gemv_gate_up_f32`` in decode, ``gemm_gate_up_f32`` in prefill).
    The fused call computes ``silu(x·Wgᵀ) * (x·Wuᵀ)`` straight into ``out``;
    the gate and up buffers are removed.  Records ``fused = {gate_up = N}``.

    Example: ``ckir-opt m.mlir --lower-decode --fuse-gate-up --plan-layout``
    """

    name = "fuse-gate-up"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        run_fusion(op, FuseGateUp, "gate_up")
