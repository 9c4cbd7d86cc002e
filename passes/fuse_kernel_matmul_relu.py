"""``--fuse-kernel-matmul-relu``: a kernel.matmul whose only use is a kernel.relu -> one op.

``%c = kernel.matmul %a, %b`` followed by ``%r = kernel.relu %c`` (the relu being
the matmul's single use) becomes ``%r = kernel.matmul_relu %a, %b`` with the
matmul's schedule: the relu runs as the epilogue of the matmul's tiles instead
of a second pass over memory.  Like the runtime fusions (passes/fusion.py) it
fires only where the fused kernel is supported: the C generator
(``ckir.backend.kernel_c.supports``) must have ``matmul_relu`` for the dtype.
What fired is recorded on the ``kernel.func`` as ``fused = {matmul_relu = N}``.

Example: ``ckir-opt k.mlir --lower-kernel --fuse-kernel-matmul-relu``
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import DictionaryAttr, IntegerAttr, ModuleOp
from xdsl.passes import ModulePass

from ckir.backend.kernel_c import supports
from ckir.dialects import kernel as k
from ckir.dialects.graph import TensorType
from ckir.passes.fusion import FUSED_ATTR

PATTERN = "matmul_relu"


def fuse_func(func: k.FuncOp) -> int:
    """Fuse every matmul -> relu pair of ``func``; returns how many fired."""
    fired = 0
    for op in list(func.body_block.ops):
        if not isinstance(op, k.MatmulOp):
            continue
        uses = list(op.out.uses)
        if len(uses) != 1 or not isinstance(relu := uses[0].operation, k.ReluOp):
            continue
        out_type = op.out.type
        assert isinstance(out_type, TensorType)
        if not supports(PATTERN, out_type.dtype_name):
            continue
        props = {} if op.schedule is None else {"schedule": op.schedule}
        fused = k.MatmulReluOp.build(
            operands=[op.a, op.b], result_types=[relu.out.type], properties=props
        )
        fused.out.name_hint = relu.out.name_hint
        func.body_block.insert_op_before(fused, relu)
        relu.out.replace_all_uses_with(fused.out)
        func.body_block.erase_op(relu)
        func.body_block.erase_op(op)
        fired += 1
    if fired:
        counts = {}
        old = func.attributes.get(FUSED_ATTR)
        if isinstance(old, DictionaryAttr):
            counts = dict(old.data)
        prev = counts.get(PATTERN)
        total = fired + (prev.value.data if isinstance(prev, IntegerAttr) else 0)
        counts[PATTERN] = IntegerAttr(total, 64)
        func.attributes[FUSED_ATTR] = DictionaryAttr(counts)
    return fired


@dataclass(frozen=True)
class FuseKernelMatmulReluPass(ModulePass):
    """Fuse kernel.matmul + its single-use kernel.relu into kernel.matmul_relu.

    No options.  Fires only when the C generator supports the fused kernel for
    the dtype; records ``fused = {matmul_relu = N}`` on each kernel.func.
    """

    name = "fuse-kernel-matmul-relu"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for func in list(op.walk()):
            if isinstance(func, k.FuncOp):
                fuse_func(func)
