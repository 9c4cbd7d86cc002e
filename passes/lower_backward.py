"""``--lower-backward``: add the training programs (``backward`` and ``optimize``)."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from ckir.passes.lowering.gradients import differentiate
from ckir.passes.lowering.materialize import materialize
from ckir.passes.lowering.optimizer import AdamWOptions, build_optimizer
from ckir.passes.lowering.patterns import INPLACE, rewrite_program


@dataclass(frozen=True)
class LowerBackwardPass(ModulePass):
    """Lower the graph model to a training step: a ``backward`` and an ``optimize`` program.

    ``lowered.program @backward mode "backward"`` runs the forward over ``T``
    tokens from position 0 (no KV cache: attention reads each layer's k and v),
    keeping every activation the gradients read (each value has its own buffer;
    nothing is recomputed, and ``--plan-layout{strategy=liveness}`` folds the
    buffers whose lives do not overlap), then the mean cross-entropy of the
    logits against the ``targets`` input (the ``loss`` output), then the
    gradient of every op in reverse order (rules: docs/passes/lower-backward.md),
    into one global ``grad`` buffer per weight (tied weights share one).

    ``lowered.program @optimize mode "optimize"`` clips the global gradient norm
    and applies one AdamW step (torch.optim.AdamW) to every weight, with two
    ``optimizer_state`` buffers (the moments) per weight; the learning rate and
    the 1-based step number are run-time values (``#lowered.rt<lr>``,
    ``#lowered.rt<step>``).  Weights must be f32.

    Options:
      max-context (int, default min(C, 256)): the longest training sequence.
      beta1, beta2, eps, weight-decay (float, default 0.9, 0.999, 1e-8, 0.01): AdamW's.
      max-grad-norm (float, default 1.0): clip the global gradient norm to this
        (torch.nn.utils.clip_grad_norm_); 0 turns clipping off.

    Example: ``ckir-opt graph.mlir -p 'lower-backward{max-context=64 weight-decay=0.0}'``
    """

    name = "lower-backward"

    max_context: int | None = None
    beta1: float = 0.9
    beta2: float = 0.999
    eps: float = 1e-8
    weight_decay: float = 0.01
    max_grad_norm: float = 1.0

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        options = AdamWOptions(
            self.beta1, self.beta2, self.eps, self.weight_decay, self.max_grad_norm
        )
        options.check(self.name)
        lctx = materialize(op, "backward", self.max_context, INPLACE, self.name)
        grads = differentiate(lctx)
        rewrite_program(lctx)
        build_optimizer(lctx.lowered_model, grads.weight_grads, lctx.max_context, options)
