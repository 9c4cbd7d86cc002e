"""``--convert-weights``: store linear-layer matrices in another dtype (bf16, f32p, Q8_0, ...)."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.passes import ModulePass
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
)

from ckir.dialects import graph as g
from ckir.dialects.dims import evaluate_dim
from ckir.errors import CkirError
from ckir.vocab import WEIGHT_DTYPES

#: graph ops whose first weight is a [N, K] matrix (or an embedding table)
MATRIX_OPS = ("linear", "lm_head", "embed")
#: block length along K of the block-quantized formats (f32p panels take any K)
BLOCK = {"q8_0": 32, "q4_0": 32, "q4_1": 32}


@dataclass
class _SetWeightDtype(RewritePattern):
    """Set the dtype of the named graph.weight declarations."""

    dtype: str
    names: frozenset[str]

    def match_and_rewrite(self, op: g.WeightOp, rewriter: PatternRewriter) -> None:  # type: ignore[override]
        if not isinstance(op, g.WeightOp) or op.weight_name not in self.names:
            return
        if op.dtype_name == self.dtype:
            return
        op.properties["dtype"] = StringAttr(self.dtype)
        rewriter.notify_op_modified(op)


def convertible(model: g.ModelOp, dtype: str) -> set[str]:
    """Weights to convert: f32 matrices of matrix ops (K fitting the block), and their ties.

    Also what a build made with ``dtype`` stores in it (``CompiledModel.weight_arrays``
    asks which weights an f32p build packed)."""
    weights = model.weights()
    symbols = model.symbol_values()

    def root(name: str) -> str:
        while (tied := weights[name].tied_to_name) is not None:
            name = tied
        return name

    stored: set[str] = set()
    for op in model.walk():
        if isinstance(op, g.ComputeOp) and op.kind in MATRIX_OPS and op.weight_names:
            decl = weights[root(op.weight_names[0])]
            dims = decl.shape_dims
            block = BLOCK.get(dtype)
            if decl.dtype_name != "f32" or len(dims) != 2:
                continue
            if block and evaluate_dim(dims[1], symbols) % block:
                continue
            stored.add(decl.weight_name)
    return stored | {name for name in weights if root(name) in stored}


@dataclass(frozen=True)
class ConvertWeightsPass(ModulePass):
    """Change the dtype of every f32 weight matrix used by linear, lm_head and embed ops.

    Only the declaration changes (``graph.weight @w : [N, K] q8_0 hf "..."``):
    the weights.bin writer encodes the checkpoint's values in the new format,
    and lowering then picks the kernels registered for that weight dtype.
    Norm gammas, biases and positional tables stay f32. Block formats need K
    to be a multiple of 32; matrices where it is not stay f32. ``f32p`` keeps
    the fp32 values exactly, pre-packed in the 32-row panels the GEMM kernels
    read (any N and K; docs/quantization.md). A tied weight takes its target's
    dtype.

    Options:
      dtype (str, default "bf16"): one of f32, f32p, bf16, q8_0, q4_0, q4_1.

    Example: ``ckir-opt graph.mlir --convert-weights{dtype=q8_0} --lower-decode``
    turns ``graph.weight @"layers.{i}.attn.wq" : [H*D, E] f32 hf "..."`` into
    ``graph.weight @"layers.{i}.attn.wq" : [H*D, E] q8_0 hf "..."``.
    """

    name = "convert-weights"

    dtype: str = "bf16"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.dtype not in WEIGHT_DTYPES:
            choices = ", ".join(WEIGHT_DTYPES)
            raise CkirError(
                f"convert-weights: unknown dtype '{self.dtype}' (choose from {choices})"
            )
        if self.dtype == "f32":
            return
        for model in op.ops:
            if not isinstance(model, g.ModelOp):
                continue
            pattern = _SetWeightDtype(self.dtype, frozenset(convertible(model, self.dtype)))
            PatternRewriteWalker(
                GreedyRewritePatternApplier([pattern], dce_enabled=False),
                apply_recursively=False,
            ).rewrite_region(model.body)
