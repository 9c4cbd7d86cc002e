"""The ``optimize`` program: one AdamW step of every trained weight (``--lower-backward``).

Made from the weight gradients the backward program writes:

* the global gradient norm: ``zero(sumsq)``, then ``grad_sumsq(grad.X) -> sumsq``
  for every gradient, then ``clip_coef(sumsq) -> coef`` (1 when clipping is off);
* per weight, ``adamw(grad.X, coef) -> (w.X, adam.m.X, adam.v.X)`` with the
  learning rate and the step number read at run time (``#lowered.rt<lr>``,
  ``#lowered.rt<step>``) and the other hyper-parameters fixed at compile time.

The AdamW moments are global ``optimizer_state`` buffers (``adam.m.<weight>``,
``adam.v.<weight>``), zero when the model is opened.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ckir.dialects import lowered as lw
from ckir.dialects.dims import LR, STEP
from ckir.errors import CkirError
from ckir.passes.lowering.kernels import ParamValue, kernel_call

MODE = "optimize"
SCOPE = "optimizer"


@dataclass(frozen=True)
class AdamWOptions:
    """The compile-time hyper-parameters of the optimizer step (torch.optim.AdamW's names)."""

    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8
    weight_decay: float = 0.01
    #: clip the global gradient norm to this (torch.nn.utils.clip_grad_norm_); 0: no clipping
    max_grad_norm: float = 1.0

    def check(self, where: str) -> None:
        problems = []
        for name in ("beta1", "beta2", "eps", "weight_decay", "max_grad_norm"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, float | int):
                raise CkirError(f"{where}: {name} must be a number, got {value!r}")
        for name in ("beta1", "beta2"):
            value = getattr(self, name)
            if not 0.0 <= value < 1.0:
                problems.append(f"{name} must be in [0, 1), got {value}")
        if not (self.eps > 0.0 and math.isfinite(self.eps)):
            problems.append(f"eps must be > 0, got {self.eps}")
        if not (self.weight_decay >= 0.0 and math.isfinite(self.weight_decay)):
            problems.append(f"weight-decay must be >= 0, got {self.weight_decay}")
        if not (self.max_grad_norm >= 0.0 and math.isfinite(self.max_grad_norm)):
            problems.append(
                f"max-grad-norm must be >= 0 (0: no clipping), got {self.max_grad_norm}"
            )
        if problems:
            raise CkirError(f"{where}: {'; '.join(problems)}")


def build_optimizer(
    model: lw.LoweredModelOp,
    weight_grads: Mapping[str, str],
    max_context: int,
    options: AdamWOptions,
) -> lw.ProgramOp:
    """Add the ``optimize`` program (and the moment buffers) to ``model``."""
    types = {
        op.buffer_name: op.buffer_type for op in model.body_block.ops if isinstance(op, lw.BufferOp)
    }
    # weights in declaration order (the order of their buffers), not in gradient order
    order = [name for name in types if name in weight_grads]
    program = lw.ProgramOp.make(MODE, MODE, max_context)
    model.body_block.add_op(program)
    block = program.body_block
    sumsq, coef = f"{MODE}.sumsq", f"{MODE}.coef"
    one = lw.BufferType.make([1], "f32")
    for name in (sumsq, coef):
        block.add_op(lw.BufferOp.make(name, "scratch", one))
    first_program = next(op for op in model.body_block.ops if isinstance(op, lw.ProgramOp))
    moments: dict[str, tuple[str, str]] = {}
    for weight in order:
        base = weight.removeprefix("w.")
        pair = (f"adam.m.{base}", f"adam.v.{base}")
        for moment in pair:
            model.body_block.insert_op_before(
                lw.BufferOp.make(moment, "optimizer_state", types[weight], source=weight),
                first_program,
            )
            types[moment] = types[weight]
        moments[weight] = pair
    types.update({sumsq: one, coef: one})
    for weight in order:
        types[weight_grads[weight]] = types[weight]

    def call(
        kind: str, ins: Sequence[str], outs: Sequence[str], params: dict[str, ParamValue]
    ) -> None:
        where = f"lower-backward: the optimizer step ({kind})"
        origin = lw.OriginAttr.make(SCOPE, kind)
        block.add_op(
            kernel_call(model, MODE, types, kind, ins, outs, params, origin=origin, where=where)
        )

    call("zero", [], [sumsq], {"n": 1})
    for weight in order:
        call("grad_sumsq", [weight_grads[weight]], [sumsq], {"n": types[weight].num_elements})
    call("clip_coef", [sumsq], [coef], {"max_norm": options.max_grad_norm})
    hyper: dict[str, ParamValue] = {
        "lr": LR,
        "beta1": options.beta1,
        "beta2": options.beta2,
        "eps": options.eps,
        "weight_decay": options.weight_decay,
        "step": STEP,
    }
    for weight in order:
        m, v = moments[weight]
        params = {"n": types[weight].num_elements, **hyper}
        call("adamw", [weight_grads[weight], coef], [weight, m, v], params)
    return program
