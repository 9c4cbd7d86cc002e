"""State shared by the lowering of one mode: symbols, buffer names, scopes.

``materialize`` turns the graph model into a flat ``lowered.program`` that
still holds graph compute ops (header, then the body unrolled ``repeat``
times with ``{i}`` substituted, then the footer), and gives every SSA value a
buffer.  The rewrite patterns in :mod:`ckir.passes.lowering.patterns` then replace
each graph op with kernel calls, reading buffer names from this context (and
the op's kernel parameters from :mod:`ckir.passes.lowering.op_params`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Operation, SSAValue

from ckir.dialects import graph as g
from ckir.dialects import lowered as lw
from ckir.dialects.dims import POSITION, TOKENS, evaluate_dim, scaled
from ckir.errors import CkirError

#: What a lowering pass needs to know about in-place ops: result index -> operand index
#: whose buffer the result reuses.  Filled in by the patterns module.
InplaceTable = Mapping[str, Mapping[int, int]]

#: values of the ``logits`` option of ``--lower-prefill``: footer rows computed
LOGITS_CHOICES = ("all", "last")
FOOTER_SCOPE = "footer"


@dataclass
class LoweringContext:
    """Everything one mode's lowering shares between its patterns."""

    mode: str
    model: g.ModelOp
    lowered_model: lw.LoweredModelOp
    program: lw.ProgramOp
    max_context: int
    symbols: dict[str, int]
    #: SSA value -> buffer symbol
    names: dict[SSAValue, str] = field(default_factory=dict[SSAValue, str])
    #: graph op (clone) -> (scope label, layer index or None)
    scopes: dict[Operation, tuple[str, int | None]] = field(
        default_factory=dict[Operation, tuple[str, int | None]]
    )
    #: buffer symbol -> its type (program-local and global buffers)
    buffer_types: dict[str, lw.BufferType] = field(default_factory=dict[str, lw.BufferType])
    #: ``"all"``: the footer runs on every token row; ``"last"``: on the last one only
    logits: str = "all"
    #: set while a footer op of a ``logits="last"`` program is materialized or lowered:
    #: its token-indexed tensors then have one row
    one_row: bool = False

    def footer_one_row(self, scope: str) -> bool:
        """Whether ops of ``scope`` run on one token row (the footer under logits=last)."""
        return self.logits == "last" and scope == FOOTER_SCOPE

    @property
    def _rows_fixed(self) -> bool:
        return self.mode == "decode" or self.one_row

    @property
    def tokens_max(self) -> int:
        """Rows of a token-indexed buffer: max_context for prefill, 1 for decode
        (and for the footer of a prefill with logits=last)."""
        return 1 if self._rows_fixed else self.max_context

    @property
    def runtime_tokens(self) -> int | str:
        """The ``T`` a kernel sees: an integer in decode, the runtime symbol otherwise."""
        return 1 if self._rows_fixed else TOKENS

    @property
    def keeps_cache(self) -> bool:
        """Whether attention goes through the KV cache: inference modes do; backward
        runs one sequence from position 0 and attends over the layer's k and v."""
        return self.mode != "backward"

    @property
    def position(self) -> int | str:
        """The position of the first token (``P``): run time with a KV cache, else 0."""
        return POSITION if self.keeps_cache else 0

    def dim(self, expr: str, *, where: str) -> int:
        """Evaluate a dim expression with the model's symbols (T = the buffer's max rows)."""
        try:
            return evaluate_dim(expr, {**self.symbols, TOKENS: self.tokens_max})
        except (KeyError, ValueError, ZeroDivisionError) as err:
            raise CkirError(f"{where}: cannot evaluate dim '{expr}': {err}") from None

    def runtime_count(self, dims: Sequence[str], *, where: str) -> int | str:
        """Elements of a tensor as a kernel sees them: ``T*k`` at run time when ``T`` leads."""
        if dims and dims[0] == TOKENS and not self._rows_fixed:
            rest = 1
            for d in dims[1:]:
                rest *= self.dim(d, where=where)
            return scaled(TOKENS, rest)
        total = 1
        for d in dims:
            total *= self.dim(d, where=where)
        return total

    def leading(self, dims: Sequence[str], *, where: str) -> int | str:
        """The row count of a token-indexed tensor as a kernel sees it."""
        if dims and dims[0] == TOKENS:
            return self.runtime_tokens
        return self.dim(dims[0], where=where) if dims else 1

    def buffer(self, value: SSAValue) -> str:
        return self.names[value]

    def weight_buffer(self, op: Operation, index: int) -> str:
        """The global buffer of the op's ``index``-th weight, tied weights resolved."""
        assert isinstance(op, g.ComputeOp)
        name = op.weight_names[index]
        _, layer = self.scopes.get(op, ("", None))
        return weight_buffer_name(self.model, name, layer)

    def weight_type(self, op: Operation, index: int) -> lw.BufferType:
        return self.buffer_types[self.weight_buffer(op, index)]


def weight_buffer_name(model: g.ModelOp, name: str, layer: int | None) -> str:
    """``w.<name>`` with ``{i}`` substituted; a tied weight names its target's buffer."""
    weights = model.weights()
    decl = weights.get(name)
    if decl is None:
        raise CkirError(f"graph.model @{model.sym_name.data}: weight @{name} is not declared")
    if decl.tied_to_name is not None:
        return weight_buffer_name(model, decl.tied_to_name, layer)
    if "{i}" in name:
        if layer is None:
            raise CkirError(f"weight @{name} is per layer but used outside graph.body")
        name = name.replace("{i}", str(layer))
    return f"w.{name}"


def find_graph_model(module: ModuleOp, pass_name: str) -> g.ModelOp:
    models = [op for op in module.ops if isinstance(op, g.ModelOp)]
    if len(models) != 1:
        raise CkirError(
            f"{pass_name}: expected exactly one graph.model at the top of the module, "
            f"found {len(models)}"
        )
    return models[0]


def block_of(op: Operation | None) -> Block | None:
    if op is None:
        return None
    return op.regions[0].blocks.first if op.regions and op.regions[0].blocks else None
