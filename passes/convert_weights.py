"""``--convert-weights``: store linear-layer matrices in another dtype (bf16, q8_0p, ...)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
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
from ckir.vocab import BLOCK_DTYPES, PANEL_OF, PANEL_VALUES, WEIGHT_DTYPES, dtype_info

#: graph ops whose first weight is a [N, K] matrix (or an embedding table)
MATRIX_OPS = ("linear", "lm_head", "embed")
#: block length along K of the block-quantized formats, their panel dtypes included (f32p
#: panels take any K, bf16p panels an even K: ``DType.k_group``)
BLOCK = {name: elems for name, (_nbytes, elems) in BLOCK_DTYPES.items()}


def k_multiple(dtype: str) -> int:
    """What K (dim 1) of a matrix stored as ``dtype`` must be a multiple of: the block of
    a block format (its panel dtype too: 32), the k group of a panel dtype (bf16p: 2), else
    1."""
    return BLOCK.get(dtype) or dtype_info(dtype).k_group


def source_dtypes(dtype: str) -> frozenset[str]:
    """The declared dtypes that ``dtype`` converts: f32, and for a panel dtype also the
    dtype whose values it stores (bf16p packs bf16 matrices without rounding, q8_0p
    q8_0 ones and q4_1p q4_1 ones without requantizing)."""
    return frozenset({"f32", PANEL_VALUES.get(dtype, "f32")})


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


def matrix_weights(model: g.ModelOp) -> tuple[list[g.WeightOp], Callable[[str], str]]:
    """The declarations of the matrices of matrix ops (tied ones resolved to their
    target; each once, in use order), and the resolver of ties."""
    weights = model.weights()

    def root(name: str) -> str:
        while (tied := weights[name].tied_to_name) is not None:
            name = tied
        return name

    out: dict[str, g.WeightOp] = {}
    for op in model.walk():
        if isinstance(op, g.ComputeOp) and op.kind in MATRIX_OPS and op.weight_names:
            decl = weights[root(op.weight_names[0])]
            out.setdefault(decl.weight_name, decl)
    return list(out.values()), root


def _why_not(
    decl: g.WeightOp, dtype: str, sources: frozenset[str], symbols: Mapping[str, int]
) -> str | None:
    """Why matrix ``decl`` cannot be stored as ``dtype`` (None: it can)."""
    dims = decl.shape_dims
    if len(dims) != 2:
        return f"it is not a matrix (rank {len(dims)})"
    if decl.dtype_name not in sources:
        return (
            f"it is {decl.dtype_name} in the source and {dtype} converts only "
            f"{' and '.join(sorted(sources))} matrices"
        )
    k, multiple = evaluate_dim(dims[1], symbols), k_multiple(dtype)
    if k % multiple:
        return f"K = {dims[1]} = {k} is not a multiple of {multiple} ({dtype}'s block along K)"
    return None


def convertible(model: g.ModelOp, dtype: str, sources: frozenset[str] | None = None) -> set[str]:
    """Weights to convert: the matrices of matrix ops declared in one of ``sources``
    (default :func:`source_dtypes`) whose K fits ``dtype`` (:func:`k_multiple`), and
    their ties.

    Also what a build made with ``dtype`` stores in it."""
    symbols = model.symbol_values()
    sources = source_dtypes(dtype) if sources is None else sources
    matrices, root = matrix_weights(model)
    stored = {d.weight_name for d in matrices if _why_not(d, dtype, sources, symbols) is None}
    return stored | {name for name in model.weights() if root(name) in stored}


def not_convertible(model: g.ModelOp, dtype: str) -> dict[str, tuple[str, str]]:
    """The matrices a requested ``dtype`` (``--dtype``) leaves as they are: weight name
    -> (the dtype it keeps, why), for the matrices of matrix ops outside
    :func:`convertible` (a tied weight is reported under its target).  Call before
    the conversion."""
    symbols = model.symbol_values()
    sources = source_dtypes(dtype)
    out: dict[str, tuple[str, str]] = {}
    for decl in matrix_weights(model)[0]:
        why = _why_not(decl, dtype, sources, symbols)
        if why is not None:
            out[decl.weight_name] = (decl.dtype_name, why)
    return out


def set_weight_dtype(model: g.ModelOp, dtype: str, names: Iterable[str]) -> None:
    """Declare the named ``graph.weight``s of ``model`` as ``dtype`` (through the rewriter;
    the others are left alone)."""
    PatternRewriteWalker(
        GreedyRewritePatternApplier([_SetWeightDtype(dtype, frozenset(names))], dce_enabled=False),
        apply_recursively=False,
    ).rewrite_region(model.body)


@dataclass
class _PackLayerDtypes(RewritePattern):
    """Declare a weight whose layers differ in dtype (``layer_dtypes``, a GGUF file's
    mixed K-quants) with each layer's panel twin (:data:`ckir.vocab.PANEL_OF`: q4_k ->
    q4_kp, q8_0 -> q8_0p, q5_0 -> q5_0p; a dtype without one, e.g. q5_k, stays), the declared dtype
    too: each layer's blocks are packed as they are, never requantized."""

    def match_and_rewrite(self, op: g.WeightOp, rewriter: PatternRewriter) -> None:  # type: ignore[override]
        per = op.layer_dtypes if isinstance(op, g.WeightOp) else None
        if per is None or op.dtype_name not in per:
            return
        packed = tuple(PANEL_OF.get(d, d) if d in BLOCK_DTYPES else d for d in per)
        if packed == per:
            return
        op.attributes[g.LAYER_DTYPES_ATTR] = StringAttr(",".join(packed))
        op.properties["dtype"] = StringAttr(packed[per.index(op.dtype_name)])
        rewriter.notify_op_modified(op)


def pack_layer_dtypes(op: ModuleOp) -> None:
    """Store the layers of every weight with ``layer_dtypes`` in their panel twins
    (:class:`_PackLayerDtypes`); the other weights are left to :func:`convert_weights`
    (which leaves these alone: their declared dtype is a panel dtype then)."""
    for model in op.ops:
        if isinstance(model, g.ModelOp):
            PatternRewriteWalker(
                GreedyRewritePatternApplier([_PackLayerDtypes()], dce_enabled=False),
                apply_recursively=False,
            ).rewrite_region(model.body)


def convert_weights(op: ModuleOp, dtype: str, sources: frozenset[str] | None = None) -> None:
    """Set ``dtype`` on the :func:`convertible` weights of every graph model of ``op``
    (``sources``: the declared dtypes to convert; default :func:`source_dtypes`)."""
    for model in op.ops:
        if isinstance(model, g.ModelOp):
            set_weight_dtype(model, dtype, convertible(model, dtype, sources))


@dataclass(frozen=True)
class ConvertWeightsPass(ModulePass):
    """Change the dtype of every f32 weight matrix used by linear, lm_head and embed ops.

    Only the declaration changes (``graph.weight @w : [N, K] q8_0 hf "..."``):
    the weights.bin writer encodes the checkpoint's values in the new format,
    and lowering then picks the kernels registered for that weight dtype.
    Norm gammas, biases and positional tables stay f32. Block formats need K
    to be a multiple of 32; matrices where it is not stay f32. ``f32p`` keeps
    the fp32 values exactly, pre-packed in the 32-row panels the GEMM kernels
    read (any N and K). ``bf16p`` stores bf16 values (f32 ones rounded to
    nearest even) in the same panels, as pairs of k: it converts f32 **and
    bf16** matrices whose K is even; the others stay as they were. ``q8_0p``
    stores Q8_0 blocks (f32 matrices quantized as ``q8_0`` would be) in 32-row
    panels: it converts f32 **and q8_0** matrices (a GGUF file's Q8_0 blocks are
    repacked bit for bit) whose K is a multiple of 32; the others stay as they
    were. ``q4_1p`` is the same for Q4_1 blocks (f32 **and q4_1** matrices;
    docs/quantization.md). A tied weight takes its target's dtype.

    Options:
      dtype (str, default "bf16"): one of f32, f32p, bf16, bf16p, q8_0, q8_0p, q4_0,
      q4_0p, q4_1, q4_1p, q4_k, q5_k, q6_k, q4_kp, q5_kp, q6_kp, q5_0, q5_1, q5_0p,
      q5_1p (the K-quants and their panel forms take matrices whose K is a multiple of
      256; q4_kp converts f32 and q4_k matrices, q5_kp f32 and q5_k ones, q6_kp f32 and
      q6_k ones; q5_0p / q5_1p f32 and q5_0 / q5_1 ones whose K is a multiple of 32).

    Example: ``ckir-opt graph.mlir --convert-weights{dtype=q8_0} --lower-decode``
    turns ``graph.weight @"layers.{i}.attn.wq" : [H*D, E] f32 hf "..."`` into
    ``graph.weight @"layers.{i}.attn.wq" : [H*D, E] q8_0 hf "..."``; with
    ``dtype=bf16p``, ``[E, I] bf16 hf "..."`` becomes ``[E, I] bf16p hf "..."`` when
    I is even and stays bf16 when it is odd; with ``dtype=q8_0p``, ``[E, I] q8_0 gguf
    "..."`` becomes ``[E, I] q8_0p gguf "..."`` (``dtype=q4_1p``: a q4_1 one becomes
    q4_1p).
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
        convert_weights(op, self.dtype)
