"""``--widen-weights``: declare every weight f32 (what training and ``--dtype f32`` need)."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from ckir.dialects import graph as g
from ckir.passes.convert_weights import set_weight_dtype

#: the dtype every weight is declared in afterwards
WIDE_DTYPE = "f32"


def widen_weights(op: ModuleOp) -> list[str]:
    """Declare every ``graph.weight`` of every graph model of ``op`` f32; the names it
    changed, in declaration order."""
    changed: list[str] = []
    for model in op.ops:
        if not isinstance(model, g.ModelOp):
            continue
        names = [name for name, w in model.weights().items() if w.dtype_name != WIDE_DTYPE]
        set_weight_dtype(model, WIDE_DTYPE, names)
        changed += names
    return changed


@dataclass(frozen=True)
class WidenWeightsPass(ModulePass):
    """Declare every weight f32, whatever its dtype (bf16, a block format, a panel dtype).

    Only the declarations change (``graph.weight @w : [N, K] q8_0 gguf "..."``
    becomes ``graph.weight @w : [N, K] f32 gguf "..."``): the weights.bin writer
    then dequantizes (or widens) the checkpoint's values to f32, and lowering
    picks the f32 kernels. Tied weights, norms and biases are weights like the
    others. ``--convert-weights{dtype=f32}`` is not the same: it only rewrites
    f32 matrices (a no-op). ``ckir compile --dtype f32`` runs this pass, and so
    does ``ckir train``, which compiles with it (training updates f32 weights).

    Options: none.

    Example: ``ckir-opt graph.mlir --widen-weights --lower-backward --plan-layout``
    """

    name = "widen-weights"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        widen_weights(op)
