"""``--fuse-add-rmsnorm``: residual add + the RMSNorm of its sum -> one kernel call."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import PatternRewriter

from ckir.dialects import lowered as lw
from ckir.passes.fusion import FusionPattern, rows_times, run_fusion


class FuseAddRmsnorm(FusionPattern):
    """Anchor: an rmsnorm call ``rmsnorm(s, gamma) -> h``.

    The last call writing ``s`` before it must be ``add(a, b) -> s`` (exactly
    ``s``, with ``n = T * E``); ``h`` must differ from a, b and s.  The fused
    call goes where the add was (the rmsnorm moves up) or, if that move is not
    allowed, where the rmsnorm was (the add moves down).  It writes both ``s``
    (still the residual) and ``h``.  Fused op kind ``fused_add_rmsnorm``,
    params ``T``, ``E``, ``eps``.
    """

    def fuse(self, call: lw.CallOp, rewriter: PatternRewriter) -> bool:
        view = self.view
        if (names := view.operands(call, "rmsnorm", 2, 1)) is None:
            return False
        (s, gamma), (h,) = names
        add = view.last_writer_before(call, view.root(s))
        if add is None or view.kind(add) != "add" or add.out_names != (s,):
            return False
        if len(add.in_names) != 2:
            return False
        a, b = add.in_names
        if view.root(h) in {view.root(a), view.root(b), view.root(s)}:
            return False
        for x in (a, b):  # the sum may overwrite an addend, but not part of one
            if view.root(x) == view.root(s) and x != s:
                return False
        params = call.param_values
        t, e, eps = params.get("T"), params.get("E"), params.get("eps")
        if not isinstance(e, int) or t is None or eps is None:
            return False
        if add.param_values.get("n") != rows_times(t, e):
            return False
        group = [add, call]
        if view.can_move(call, add, group):
            anchor = add
        elif view.can_move(add, call, group):
            anchor = call
        else:
            return False
        in_names, out_names = [a, b, gamma], [s, h]
        fparams = {"T": t, "E": e, "eps": eps}
        fused = self.fuse_into(
            rewriter, "fused_add_rmsnorm", in_names, out_names, fparams, group, anchor,
            "fuse-add-rmsnorm",
        )  # fmt: skip
        return fused is not None


@dataclass(frozen=True)
class FuseAddRmsnormPass(ModulePass):
    """Fuse ``add(a, b) -> s`` and the ``rmsnorm(s, gamma) -> h`` after it into one call.

    The fused kernel (op kind ``fused_add_rmsnorm``, e.g. ``add_rmsnorm_f32``)
    writes both the sum ``s`` (the residual stream, still read later) and the
    normalized ``h``, reading the sum from L1 instead of memory.  Fires only
    when the registry has the kernel for the mode and dtypes.  Records
    ``fused = {add_rmsnorm = N}`` on the program.

    Example: ``ckir-opt m.mlir --lower-decode --fuse-add-rmsnorm --plan-layout``
    """

    name = "fuse-add-rmsnorm"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        run_fusion(op, FuseAddRmsnorm, "add_rmsnorm")
