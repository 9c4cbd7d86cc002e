"""The ``graph`` dialect: the macro graph of a transformer, with symbolic shapes.

A ``graph.model`` binds the model's size symbols (``E``, ``H``, ``D``, ``V``, ...),
declares every weight once (``graph.weight``, with its HuggingFace / GGUF source
and packing), and holds up to three sections: ``graph.header`` (runs once, e.g.
the embedding), ``graph.body`` (repeated ``L`` times, one transformer layer, with
per-layer weight names ``layers.{i}.*``) and ``graph.footer`` (final norm, LM head,
loss).  Values flow between sections only through ``graph.yield`` and the next
section's block arguments.  Compute ops are abstract (no kernels, no offsets, no
modes); an op may carry ``when = ["prefill", ...]`` to exist only in some modes.

Example::

    graph.model @tiny arch "llama" symbols {E = 64, L = 2, V = 256} {
      graph.weight @embed : [V, E] f32 hf "model.embed_tokens.weight"
      graph.header {
        %tok = graph.input "tokens" : !graph.tensor<[T], i32>
        %x = graph.embed %tok {weights = [@embed]}
            : (!graph.tensor<[T], i32>) -> !graph.tensor<[T, E], f32>
        graph.yield %x : !graph.tensor<[T, E], f32>
      }
      ...
    }

See docs/dialects/graph.md for the full reference.

Why one file of ~1.5k lines: it follows xDSL's layout, one module per dialect
(``xdsl.dialects.arith`` ...), whose ``Dialect`` object registers every op and
attribute, and the ops share private verifier helpers (the model's symbol-table
cache ``_info``, the weight lookups, the shape checks) that a split would have to
make public.  It holds, in order: the tensor type and ``#graph.schedule``
attribute; ``graph.model`` and ``graph.weight`` with the model's symbol-table
cache; the section ops (``graph.header``/``body``/``footer``, ``input``,
``yield``, ``output``); the compute ops (one class per kind of
``ckir.vocab.GRAPH_OPS``) and the ``compute_op`` builder; the ``Graph``
dialect.  The checkpoint-mapping language of ``graph.weight`` (``hf``/``gguf``/
``tied_to`` clauses) lives in ``dialects/weight_map.py``; the dim expressions in
``dialects/dims.py``.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Mapping, Sequence
from functools import lru_cache
from typing import ClassVar

from xdsl.dialects.builtin import (
    ArrayAttr,
    DenseArrayBase,
    DictionaryAttr,
    FloatAttr,
    IntAttr,
    IntegerAttr,
    NoneAttr,
    StringAttr,
    SymbolNameConstraint,
    SymbolRefAttr,
    UnitAttr,
    f64,
    i64,
)
from xdsl.ir import (
    Attribute,
    Block,
    Dialect,
    Operation,
    ParametrizedAttribute,
    Region,
    SSAValue,
    TypeAttribute,
)
from xdsl.irdl import (
    IRDLOperation,
    ParsePropInAttrDict,
    irdl_attr_definition,
    irdl_op_definition,
    opt_prop_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.parser import AttrParser, Parser
from xdsl.printer import Printer
from xdsl.traits import (
    HasParent,
    IsolatedFromAbove,
    IsTerminator,
    NoTerminator,
    SymbolOpInterface,
    SymbolTable,
)
from xdsl.utils.exceptions import VerifyException

from ckir.dialects.common import Shaped, SingleBody, int_entries, sym
from ckir.dialects.dims import (
    TOKENS,
    DimAttr,
    dim_symbols,
    dims_equal,
    dims_text,
    is_identifier,
    normalize_dim,
    parse_dim_expr,
    shapes_equal,
    try_evaluate_dim,
)
from ckir.dialects.syntax import DIRECTIVES, parse_schedule_fields
from ckir.dialects.weight_map import WeightMap, parse_weight_map, print_weight_map
from ckir.vocab import DTYPES, GRAPH_OPS, MODES, SCHEDULE_KEYS

__all__ = [
    "COMPUTE_OPS",
    "COMPUTE_OP_TYPES",
    "DTYPES",
    "MODES",
    "AddOp",
    "AttentionOp",
    "BodyOp",
    "ComputeOp",
    "CrossEntropyOp",
    "DimAttr",
    "EmbedOp",
    "FooterOp",
    "FusedMatmulReluOp",
    "GeluOp",
    "Graph",
    "HeaderOp",
    "InputOp",
    "LayerNormOp",
    "LinearOp",
    "LMHeadOp",
    "MatmulOp",
    "ModelOp",
    "OutputOp",
    "PosEmbedOp",
    "RMSNormOp",
    "ReluOp",
    "ROPE_SCALING_ATTRS",
    "ROPE_TYPE_ATTRS",
    "RopeOp",
    "rope_rotary_dim",
    "ScheduleAttr",
    "SoftmaxOp",
    "SwiGLUOp",
    "TensorType",
    "WeightOp",
    "YieldOp",
    "compute_op",
    "parse_dim_expr",
    "sym",
]

_DTYPE_SET = frozenset(DTYPES)
_MODE_SET = frozenset(MODES)


# --------------------------------------------------------------------------- dims


def _parse_dim_list(parser: AttrParser) -> list[str]:
    return parser.parse_comma_separated_list(
        parser.Delimiter.SQUARE, lambda: parse_dim_expr(parser), " in dim list"
    )


@lru_cache(maxsize=4096)
def _dims_attr(dims: tuple[str, ...]) -> ArrayAttr[DimAttr]:
    return ArrayAttr(tuple(DimAttr.get(d) for d in dims))


class _DimShaped(Shaped):
    """``Shaped`` whose ``shape`` is an array of :class:`DimAttr` (graph types and weights)."""

    @property
    def shape_values(self) -> tuple[str, ...]:
        """The dim expressions' canonical texts, e.g. ``("T", "H*D")``."""
        return tuple(d.text for d in self.shape.data)  # type: ignore[attr-defined]


@lru_cache(maxsize=64)
def _str_attr(text: str) -> StringAttr:
    return StringAttr(text)


def _normalize_dims(dims: Sequence[str | int]) -> tuple[str, ...]:
    return tuple(normalize_dim(d) for d in dims)


# --------------------------------------------------------------------------- types


@irdl_attr_definition
class TensorType(_DimShaped, ParametrizedAttribute, TypeAttribute):
    """A tensor with a symbolic shape: ``!graph.tensor<[T, E], f32>``.

    Each dim is a dim expression over the model's symbols (``E``, ``H*D``, ``3*E``,
    ``E/H``) or an integer; ``T`` is the runtime token count and is always allowed.
    The dtype is one of ``ckir.vocab.DTYPES`` (``f32, f32p, bf16, bf16p, ..., q8_0, q8_0p,
    q4_0, q4_0p, q4_1, q4_1p, q4_k``; the panel and block ones are weight storage only).

    Example: ``!graph.tensor<[T, 3*E], f32>``, ``!graph.tensor<[T], i32>``.
    """

    name = "graph.tensor"

    shape: ArrayAttr[DimAttr]
    dtype: StringAttr

    @staticmethod
    def make(shape: Sequence[str | int], dtype: str) -> TensorType:
        """Build a tensor type; dims are normalized (``"H * D"`` -> ``"H*D"``)."""
        return TensorType(_dims_attr(_normalize_dims(shape)), _str_attr(dtype))

    @property
    def dims(self) -> tuple[str, ...]:
        """The dim expressions, e.g. ``("T", "E")``."""
        return self.shape_values

    @property
    def rank(self) -> int:
        return len(self.shape.data)

    def verify(self) -> None:
        if self.dtype.data not in _DTYPE_SET:
            raise VerifyException(
                f"graph.tensor: unknown dtype '{self.dtype.data}' (expected one of "
                f"{', '.join(DTYPES)})"
            )

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            dims = _parse_dim_list(parser)
            parser.parse_punctuation(",", " between the shape and the dtype of graph.tensor")
            dtype = _parse_dtype(parser)
        return (_dims_attr(tuple(dims)), _str_attr(dtype))

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string("<[" + ", ".join(self.shape_values) + "], " + self.dtype.data + ">")


def _parse_dtype(parser: AttrParser) -> str:
    start = parser.pos
    dtype = parser.parse_optional_identifier()
    if dtype is None or dtype not in _DTYPE_SET:
        got = f"'{dtype}'" if dtype is not None else "nothing"
        parser.raise_error(
            f"unknown dtype {got} (expected one of {', '.join(DTYPES)})", start, parser.pos
        )
    return dtype


_VECTOR_WIDTHS = (1, 2, 4, 8, 16)


@irdl_attr_definition
class ScheduleAttr(ParametrizedAttribute):
    """Schedule hints for matmul-like ops; every field is optional.

    ``#graph.schedule<tile_m = 8, tile_n = 8, tile_k = 8, vectorize = 8>``

    Tiles must be positive; ``vectorize`` is one of 1, 2, 4, 8, 16.
    """

    name = "graph.schedule"

    tile_m: IntAttr | NoneAttr
    tile_n: IntAttr | NoneAttr
    tile_k: IntAttr | NoneAttr
    vectorize: IntAttr | NoneAttr

    @staticmethod
    def make(
        tile_m: int | None = None,
        tile_n: int | None = None,
        tile_k: int | None = None,
        vectorize: int | None = None,
    ) -> ScheduleAttr:
        vals = (tile_m, tile_n, tile_k, vectorize)
        return ScheduleAttr(*(NoneAttr() if v is None else IntAttr(v) for v in vals))

    def values(self) -> dict[str, int]:
        """The fields that are set, e.g. ``{"tile_m": 8, "vectorize": 8}``."""
        out: dict[str, int] = {}
        for field, attr in zip(SCHEDULE_KEYS, self.parameters, strict=True):
            if isinstance(attr, IntAttr):
                out[field] = attr.data
        return out

    def verify(self) -> None:
        for field, value in self.values().items():
            if value <= 0:
                raise VerifyException(f"graph.schedule: {field} = {value} must be positive")
            if field == "vectorize" and value not in _VECTOR_WIDTHS:
                raise VerifyException(
                    f"graph.schedule: vectorize = {value} must be one of 1, 2, 4, 8, 16"
                )

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        def problem(key: str, value: int | str) -> str | None:
            assert isinstance(value, int)
            if value <= 0 or (key == "vectorize" and value not in _VECTOR_WIDTHS):
                return f"{key} = {value} must be " + (
                    "one of 1, 2, 4, 8, 16" if key == "vectorize" else "positive"
                )
            return None

        found = parse_schedule_fields(
            parser,
            "graph.schedule",
            SCHEDULE_KEYS,
            lambda _key: parser.parse_integer(allow_boolean=False),
            problem,
        )
        return tuple(IntAttr(found[f]) if f in found else NoneAttr() for f in SCHEDULE_KEYS)

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string("<" + ", ".join(f"{k} = {v}" for k, v in self.values().items()) + ">")


# --------------------------------------------------------------------------- helpers


class _ModelInfo:
    """Per-model caches used by verifiers: symbol values, weight table, checked types."""

    __slots__ = ("symbols_attr", "symbols", "weights", "checked")

    def __init__(self) -> None:
        self.symbols_attr: DictionaryAttr | None = None
        self.symbols: dict[str, int] = {}
        self.weights: dict[str, WeightOp] = {}
        self.checked: set[Attribute] = set()


_INFO: weakref.WeakKeyDictionary[ModelOp, _ModelInfo] = weakref.WeakKeyDictionary()


def _info(model: ModelOp) -> _ModelInfo:
    info = _INFO.get(model)
    if info is None:
        info = _ModelInfo()
        _INFO[model] = info
        info.weights = model.weights()
    symbols = model.properties.get("symbols")
    if info.symbols_attr is not symbols:
        info.symbols_attr = symbols if isinstance(symbols, DictionaryAttr) else None
        info.symbols = model.symbol_values()
        info.checked = set()
    return info


def _lookup_weight(model: ModelOp, name: str) -> WeightOp | None:
    """The graph.weight ``name`` of ``model`` (cached; rebuilt when stale)."""
    info = _info(model)
    w = info.weights.get(name)
    if w is not None and w.parent is model.body_block and w.sym_name.data == name:
        return w
    info.weights = model.weights()
    return info.weights.get(name)


def _enclosing_model(op: Operation) -> ModelOp | None:
    p = op.parent_op()
    while p is not None and not isinstance(p, ModelOp):
        p = p.parent_op()
    return p


def _model_ref(model: ModelOp) -> str:
    return f"graph.model {sym(model.sym_name.data)}"


def _check_type_symbols(
    where: str, what: str, ty: Attribute, model: ModelOp, *, allow_t: bool = True
) -> None:
    """Every symbol of ``ty``'s dims is bound on ``model`` (or is ``T``)."""
    if not isinstance(ty, TensorType):
        return
    info = _info(model)
    if ty in info.checked:
        return
    for d in ty.dims:
        for s in sorted(dim_symbols(d)):
            if s == TOKENS and allow_t:
                continue
            if s not in info.symbols:
                raise VerifyException(
                    f"{where}: {what} {ty} uses symbol {s}, which is not bound on "
                    f"{_model_ref(model)}"
                )
    info.checked.add(ty)


def _print_extra_attrs(printer: Printer, op: Operation) -> None:
    if op.attributes:
        printer.print_op_attributes(op.attributes, print_keyword=True)


def _parse_extra_attrs(parser: Parser) -> dict[str, Attribute]:
    attrs = parser.parse_optional_attr_dict_with_keyword()
    return dict(attrs.data) if attrs is not None else {}


# --------------------------------------------------------------------------- model


@irdl_op_definition
class ModelOp(SingleBody, IRDLOperation):
    """A transformer model: size symbols, weights, and header/body/footer sections.

    ``graph.model @tiny arch "llama" symbols {D = 16, E = 64, H = 4, L = 2, V = 256} { ... }``

    The body holds ``graph.weight`` declarations first, then at most one
    ``graph.header``, ``graph.body`` and ``graph.footer``, in that order.  Symbols are
    identifiers bound to positive integers; ``T`` is reserved for the runtime token
    count.  The model is a symbol table (its weights) and isolated from above.
    """

    name = "graph.model"

    sym_name = prop_def(SymbolNameConstraint())
    arch = prop_def(StringAttr)
    symbols = prop_def(DictionaryAttr)
    body = region_def("single_block")

    traits = traits_def(SymbolOpInterface(), SymbolTable(), IsolatedFromAbove(), NoTerminator())

    custom_directives = DIRECTIVES
    assembly_format = (
        "$sym_name `arch` $arch `symbols` custom<IntMap>($symbols) attr-dict-with-keyword "
        "custom<Body>($body)"
    )

    @staticmethod
    def make(name: str, arch: str, symbols: Mapping[str, int]) -> ModelOp:
        """An empty model; ``symbols`` are stored sorted by name."""
        syms = {k: IntegerAttr(int(symbols[k]), i64) for k in sorted(symbols)}
        return ModelOp.create(
            properties={
                "sym_name": StringAttr(name),
                "arch": StringAttr(arch),
                "symbols": DictionaryAttr(syms),
            },
            regions=[Region(Block())],
        )

    def symbol_values(self) -> dict[str, int]:
        """The bound symbols, e.g. ``{"E": 64, "H": 4}`` (``T`` is never bound)."""
        return int_entries(self.symbols)

    def weights(self) -> dict[str, WeightOp]:
        """The declared weights by name, in declaration order."""
        if not self.body.blocks:
            return {}
        return {op.sym_name.data: op for op in self.body.block.ops if isinstance(op, WeightOp)}

    def sections(self) -> tuple[HeaderOp | None, BodyOp | None, FooterOp | None]:
        header = body = footer = None
        for op in self.body.block.ops:
            if isinstance(op, HeaderOp):
                header = op
            elif isinstance(op, BodyOp):
                body = op
            elif isinstance(op, FooterOp):
                footer = op
        return header, body, footer

    def verify_(self) -> None:
        where = _model_ref(self)
        for k, v in self.symbols.data.items():
            if not is_identifier(k):
                raise VerifyException(f"{where}: symbol name '{k}' is not an identifier")
            if k == TOKENS:
                raise VerifyException(
                    f"{where}: symbol {TOKENS} is reserved for the runtime token count and "
                    "cannot be bound"
                )
            if not isinstance(v, IntegerAttr):
                raise VerifyException(f"{where}: symbol {k} must be bound to an integer")
            if v.value.data <= 0:
                raise VerifyException(f"{where}: symbol {k} = {v.value.data} must be positive")
        rank = {WeightOp: 0, HeaderOp: 1, BodyOp: 2, FooterOp: 3}
        last = 0
        seen: set[type] = set()
        inputs: set[str] = set()
        first_per_layer: WeightOp | None = None
        for op in self.body.block.ops:
            r = rank.get(type(op))
            if r is None:
                raise VerifyException(
                    f"{where}: '{op.name}' is not allowed at model level (only graph.weight, "
                    "graph.header, graph.body, graph.footer)"
                )
            if r < last:
                raise VerifyException(
                    f"{where}: '{op.name}' must come before the sections "
                    "(order: graph.weight*, graph.header, graph.body, graph.footer)"
                    if r == 0
                    else f"{where}: '{op.name}' is out of order "
                    "(order: graph.weight*, graph.header, graph.body, graph.footer)"
                )
            if r and type(op) in seen:
                raise VerifyException(f"{where}: more than one '{op.name}'")
            seen.add(type(op))
            last = r
            if r == 0 and first_per_layer is None and op.per_layer:
                first_per_layer = op
            if r:
                for inner in op.regions[0].block.ops:
                    if isinstance(inner, InputOp):
                        if inner.input_name.data in inputs:
                            raise VerifyException(
                                f'{where}: graph.input "{inner.input_name.data}" is declared twice'
                            )
                        inputs.add(inner.input_name.data)
        if first_per_layer is not None and BodyOp not in seen:
            raise VerifyException(
                f"graph.weight {sym(first_per_layer.weight_name)}: per-layer weight ({{i}} in "
                f"its name) but {where} has no graph.body"
            )


# --------------------------------------------------------------------------- weight


#: graph.weight attribute of a per-layer weight whose layers are stored in different dtypes
#: (a GGUF file mixing K-quants: ``layer_dtypes = "q6_k,q4_k,q4_k"``, one per layer)
LAYER_DTYPES_ATTR = "layer_dtypes"


@irdl_op_definition
class WeightOp(_DimShaped, IRDLOperation):
    """A weight declaration: internal name, shape, dtype and where it comes from.

    ``graph.weight @embed : [V, E] f32 hf "model.embed_tokens.weight"``

    ``graph.weight @"layers.{i}.wq" : [E, E] f32 hf "transformer.h.{i}.attn.c_attn.weight"
    [E, 3*E] slice(1, 0, E) transpose`` (GPT-2: rows 0..E of axis 1 of the fused
    Conv1D tensor, transposed).

    ``graph.weight @lm_head : [V, E] f32 tied_to @embed``

    ``graph.weight @"layers.{i}.wq" : [E, E] q8_0 gguf "blk.{i}.attn_q.weight"``

    Sources: ``hf`` (optionally with the HF tensor's shape, a ``slice(axis, start,
    stop)`` of it and a 2-D ``transpose``), ``gguf``, or ``tied_to`` another weight
    (exclusive with ``hf``/``gguf``).  ``{i}`` in a name makes the weight per layer:
    it needs a ``graph.body`` and may only be used inside it.
    """

    name = "graph.weight"

    sym_name = prop_def(SymbolNameConstraint())
    shape = prop_def(ArrayAttr[DimAttr])
    dtype = prop_def(StringAttr)
    hf = opt_prop_def(StringAttr)
    hf_shape = opt_prop_def(ArrayAttr[DimAttr])
    slice = opt_prop_def(ArrayAttr[StringAttr])
    transpose = opt_prop_def(UnitAttr)
    gguf = opt_prop_def(StringAttr)
    tied_to = opt_prop_def(SymbolRefAttr)

    traits = traits_def(SymbolOpInterface(), HasParent(ModelOp))

    @staticmethod
    def make(
        name: str,
        shape: Sequence[str | int],
        dtype: str,
        *,
        hf: str | None = None,
        hf_shape: Sequence[str | int] | None = None,
        slice: tuple[int, str | int, str | int] | None = None,
        transpose: bool = False,
        tied_to: str | None = None,
        gguf: str | None = None,
    ) -> WeightOp:
        mapping = WeightMap(
            hf=hf,
            hf_shape=_normalize_dims(hf_shape) if hf_shape is not None else None,
            slice=(
                (str(int(slice[0])), normalize_dim(slice[1]), normalize_dim(slice[2]))
                if slice is not None
                else None
            ),
            transpose=transpose,
            gguf=gguf,
            tied_to=tied_to,
        )
        props = _weight_props(name, _normalize_dims(shape), dtype, mapping)
        return WeightOp.create(properties=props)

    @property
    def mapping(self) -> WeightMap:
        """Its checkpoint clauses (``hf``, ``gguf``, ``tied_to`` ...) as plain values."""
        return WeightMap(
            hf=self.hf_name,
            hf_shape=self.hf_dims,
            slice=tuple(d.data for d in self.slice.data) if self.slice is not None else None,
            transpose=self.is_transposed,
            gguf=self.gguf_name,
            tied_to=self.tied_to_name,
        )

    @property
    def weight_name(self) -> str:
        return self.sym_name.data

    @property
    def shape_dims(self) -> tuple[str, ...]:
        return self.shape_values

    @property
    def hf_name(self) -> str | None:
        return self.hf.data if self.hf is not None else None

    @property
    def hf_dims(self) -> tuple[str, ...] | None:
        return tuple(d.text for d in self.hf_shape.data) if self.hf_shape is not None else None

    @property
    def slice_spec(self) -> tuple[int, str, str] | None:
        """``(axis, start, stop)``; start/stop are dim expressions (stop exclusive)."""
        return self.mapping.slice_spec

    @property
    def is_transposed(self) -> bool:
        return self.transpose is not None

    @property
    def tied_to_name(self) -> str | None:
        return self.tied_to.root_reference.data if self.tied_to is not None else None

    @property
    def gguf_name(self) -> str | None:
        return self.gguf.data if self.gguf is not None else None

    def source_tensor(self, source: str, layer: int | None) -> str:
        """Its tensor's name in an ``"hf"`` or ``"gguf"`` file, ``{i}`` replaced by ``layer``.

        ``CkirError`` naming the weight when it has no tensor in that kind of file
        (see :meth:`WeightMap.source_tensor`)."""
        return self.mapping.source_tensor(self.weight_name, source, layer)

    @property
    def per_layer(self) -> bool:
        return "{i}" in self.sym_name.data

    @property
    def layer_dtypes(self) -> tuple[str, ...] | None:
        """The dtype of each layer (attribute ``layer_dtypes``), or None when they share one."""
        attr = self.attributes.get(LAYER_DTYPES_ATTR)
        if not isinstance(attr, StringAttr):
            return None
        return tuple(attr.data.split(","))

    def layer_dtype(self, layer: int | None) -> str:
        """The dtype of layer ``layer``'s buffer: its entry of ``layer_dtypes`` while the
        declared dtype is one of them (each layer keeps its own blocks), else the declared
        dtype (the whole weight converted, ``--dtype``)."""
        per = self.layer_dtypes
        if per is None or layer is None or self.dtype.data not in per:
            return self.dtype.data
        if layer >= len(per):
            raise VerifyException(
                f"graph.weight {sym(self.weight_name)}: {LAYER_DTYPES_ATTR} names "
                f"{len(per)} layers, layer {layer} has none"
            )
        return per[layer]

    def verify_(self) -> None:
        where = f"graph.weight {sym(self.weight_name)}"
        if self.dtype.data not in _DTYPE_SET:
            raise VerifyException(
                f"{where}: unknown dtype '{self.dtype.data}' (expected one of {', '.join(DTYPES)})"
            )
        attr = self.attributes.get(LAYER_DTYPES_ATTR)
        if attr is not None:
            per = attr.data.split(",") if isinstance(attr, StringAttr) else []
            if not self.per_layer or not per or any(d not in _DTYPE_SET for d in per):
                raise VerifyException(
                    f"{where}: {LAYER_DTYPES_ATTR} must be a string of dtypes, one per layer, "
                    f"on a per-layer weight; got {attr}"
                )
        if self.tied_to is not None and self.tied_to.nested_references.data:
            raise VerifyException(f"{where}: tied_to must be a flat symbol reference")
        mapping = self.mapping
        mapping.verify_clauses(where, self.per_layer)
        model = _enclosing_model(self)
        if model is None:
            return
        info = _info(model)
        for label, dims in (("shape", self.shape_dims), ("hf shape", mapping.hf_shape or ())):
            for d in dims:
                for s in sorted(dim_symbols(d)):
                    if s not in info.symbols:
                        raise VerifyException(
                            f"{where}: {label} {dims_text(dims)} uses symbol {s}, which is "
                            f"not bound on {_model_ref(model)}"
                        )
        if mapping.tied_to is not None:
            target_name = mapping.tied_to
            target = _lookup_weight(model, target_name)
            if target is None:
                raise VerifyException(
                    f"{where}: tied_to {sym(target_name)} is not declared in {_model_ref(model)}"
                )
            if target.tied_to is not None:
                raise VerifyException(
                    f"{where}: tied_to {sym(target_name)}, which is itself tied to another weight"
                )
            if not shapes_equal(self.shape_dims, target.shape_dims, info.symbols):
                raise VerifyException(
                    f"{where}: shape {dims_text(self.shape_dims)} differs from the shape "
                    f"{dims_text(target.shape_dims)} of tied_to {sym(target_name)}"
                )
        mapping.verify_shape(where, self.shape_dims, info.symbols)

    # Hand-written parse/print (one of the three left in the dialects): the checkpoint
    # mapping is a small language of optional, ordered clauses with their own
    # arguments (``hf "name" [dims] slice(axis, start, stop) transpose``, ``gguf``,
    # ``tied_to``; parsed and printed in dialects/weight_map.py), whose dims the
    # declarative format could only spell as nested attributes: the text would no
    # longer read like the mapping it describes.
    @classmethod
    def parse(cls, parser: Parser) -> WeightOp:
        name = parser.parse_symbol_name().data
        parser.parse_punctuation(":")
        shape = tuple(_parse_dim_list(parser))
        dtype = _parse_dtype(parser)
        props = _weight_props(name, shape, dtype, parse_weight_map(parser))
        attrs = _parse_extra_attrs(parser)
        return cls.create(properties=props, attributes=attrs)

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_symbol_name(self.sym_name.data)
        printer.print_string(" : " + dims_text(self.shape_dims) + " " + self.dtype.data)
        print_weight_map(printer, self.mapping)
        _print_extra_attrs(printer, self)


def _weight_props(
    name: str, shape: tuple[str, ...], dtype: str, mapping: WeightMap
) -> dict[str, Attribute]:
    """``graph.weight``'s properties: its name, canonical shape and dtype, and its mapping."""
    props: dict[str, Attribute] = {
        "sym_name": StringAttr(name),
        "shape": _dims_attr(shape),
        "dtype": _str_attr(dtype),
    }
    if mapping.hf is not None:
        props["hf"] = StringAttr(mapping.hf)
    if mapping.hf_shape is not None:
        props["hf_shape"] = _dims_attr(mapping.hf_shape)
    if mapping.slice is not None:
        props["slice"] = ArrayAttr([StringAttr(t) for t in mapping.slice])
    if mapping.transpose:
        props["transpose"] = UnitAttr()
    if mapping.gguf is not None:
        props["gguf"] = StringAttr(mapping.gguf)
    if mapping.tied_to is not None:
        props["tied_to"] = SymbolRefAttr(mapping.tied_to)
    return props


# --------------------------------------------------------------------------- sections


def _section_types(block: Block) -> tuple[Attribute, ...]:
    return tuple(a.type for a in block.args)


def _yield_types(section: Operation | None) -> tuple[Attribute, ...] | None:
    if section is None or not section.regions[0].blocks:
        return None
    last = section.regions[0].block.last_op
    if isinstance(last, YieldOp):
        return tuple(v.type for v in last.operands)
    return None


def _types_text(types: Sequence[Attribute]) -> str:
    return "(" + ", ".join(str(t) for t in types) + ")"


def _verify_terminator(op: Operation, term: type[Operation]) -> None:
    block = op.regions[0].block
    if not isinstance(block.last_op, term):
        raise VerifyException(f"{op.name}: must end with {term.name}")


def _verify_args(op: Operation, prev: tuple[Attribute, ...] | None, prev_name: str) -> None:
    args = _section_types(op.regions[0].block)
    model = _enclosing_model(op)
    if model is not None:
        for i, t in enumerate(args):
            _check_type_symbols(op.name, f"argument #{i} type", t, model)
    expected = prev if prev is not None else ()
    if args != expected:
        raise VerifyException(
            f"{op.name}: block argument types {_types_text(args)} do not match the types "
            f"{_types_text(expected)} yielded by {prev_name}"
        )


@irdl_op_definition
class HeaderOp(IRDLOperation):
    """The section that runs once before the layers (e.g. inputs and the embedding).

    ``graph.header { %tok = graph.input "tokens" : ... ; graph.yield %x : ... }``

    No block arguments; ends with ``graph.yield`` (the values the body receives).
    """

    name = "graph.header"

    body = region_def("single_block")
    traits = traits_def(HasParent(ModelOp), IsolatedFromAbove(), NoTerminator())

    custom_directives = DIRECTIVES
    assembly_format = "attr-dict-with-keyword custom<Body>($body)"

    @staticmethod
    def make() -> HeaderOp:
        return HeaderOp.create(regions=[Region(Block())])

    @property
    def block(self) -> Block:
        return self.body.block

    def verify_(self) -> None:
        if self.body.block.args:
            raise VerifyException("graph.header: takes no block arguments")
        _verify_terminator(self, YieldOp)


@irdl_op_definition
class BodyOp(IRDLOperation):
    """One transformer layer, repeated ``repeat`` times (a dim expression, e.g. ``L``).

    ``graph.body repeat L (%x : !graph.tensor<[T, E], f32>) { ... graph.yield %y : ... }``

    The block arguments are loop-carried: their types equal the header's yield types
    and the body's own ``graph.yield`` types.  Per-layer weights (``layers.{i}.*``)
    are used here, ``{i}`` being the layer index.
    """

    name = "graph.body"

    repeat = prop_def(DimAttr)
    body = region_def("single_block")
    traits = traits_def(HasParent(ModelOp), IsolatedFromAbove(), NoTerminator())

    custom_directives = DIRECTIVES
    assembly_format = "`repeat` custom<Dim>($repeat) attr-dict-with-keyword custom<Section>($body)"

    @staticmethod
    def make(repeat: str, arg_types: Sequence[TensorType]) -> BodyOp:
        return BodyOp.create(
            properties={"repeat": DimAttr.get(repeat)},
            regions=[Region(Block(arg_types=arg_types))],
        )

    @property
    def block(self) -> Block:
        return self.body.block

    def verify_(self) -> None:
        _verify_terminator(self, YieldOp)
        rep = self.repeat.text
        model = _enclosing_model(self)
        if model is not None:
            info = _info(model)
            unbound = sorted(s for s in dim_symbols(rep) if s not in info.symbols)
            if unbound:
                raise VerifyException(
                    f"graph.body: repeat {rep} uses symbol {unbound[0]}, which is not bound on "
                    f"{_model_ref(model)}"
                )
            n = try_evaluate_dim(rep, info.symbols)
            if n is None or n <= 0:
                raise VerifyException(f"graph.body: repeat {rep} must evaluate to a positive count")
            header = model.sections()[0]
            _verify_args(self, _yield_types(header), "graph.header")
        args = _section_types(self.body.block)
        yielded = _yield_types(self) or ()
        if args != yielded:
            raise VerifyException(
                f"graph.body: loop-carried block argument types {_types_text(args)} differ "
                f"from its graph.yield types {_types_text(yielded)}"
            )


@irdl_op_definition
class FooterOp(IRDLOperation):
    """The section after the layers (final norm, LM head, loss); ends with ``graph.output``.

    ``graph.footer (%x : !graph.tensor<[T, E], f32>) { ... graph.output %logits : ... }``

    Its block argument types equal the body's yield types (the header's if there is
    no body).
    """

    name = "graph.footer"

    body = region_def("single_block")
    traits = traits_def(HasParent(ModelOp), IsolatedFromAbove(), NoTerminator())

    custom_directives = DIRECTIVES
    assembly_format = "attr-dict-with-keyword custom<Section>($body)"

    @staticmethod
    def make(arg_types: Sequence[TensorType]) -> FooterOp:
        return FooterOp.create(regions=[Region(Block(arg_types=arg_types))])

    @property
    def block(self) -> Block:
        return self.body.block

    def verify_(self) -> None:
        _verify_terminator(self, OutputOp)
        model = _enclosing_model(self)
        if model is not None:
            header, body, _ = model.sections()
            if body is not None:
                _verify_args(self, _yield_types(body), "graph.body")
            else:
                _verify_args(self, _yield_types(header), "graph.header")


# --------------------------------------------------------------------------- io / terminators


@irdl_op_definition
class InputOp(IRDLOperation):
    """A named runtime input: ``%tok = graph.input "tokens" : !graph.tensor<[T], i32>``.

    Input names are unique within a model.
    """

    name = "graph.input"

    input_name = prop_def(StringAttr)
    result = result_def(TensorType)
    traits = traits_def(HasParent(HeaderOp, BodyOp, FooterOp))

    assembly_format = "$input_name attr-dict `:` type($result)"

    @staticmethod
    def make(name: str, type: TensorType) -> InputOp:
        return InputOp.create(properties={"input_name": StringAttr(name)}, result_types=[type])

    def verify_(self) -> None:
        name = self.input_name.data
        if not name:
            raise VerifyException("graph.input: the input name is empty")
        model = _enclosing_model(self)
        if model is not None:
            _check_type_symbols(f'graph.input "{name}"', "type", self.result.type, model)


@irdl_op_definition
class YieldOp(IRDLOperation):
    """Terminator of ``graph.header`` / ``graph.body``: the values passed on.

    ``graph.yield %x : !graph.tensor<[T, E], f32>``
    """

    name = "graph.yield"

    values = var_operand_def(TensorType)
    traits = traits_def(IsTerminator(), HasParent(HeaderOp, BodyOp))

    assembly_format = "attr-dict ($values^ `:` type($values))?"

    @staticmethod
    def make(values: Sequence[SSAValue]) -> YieldOp:
        return YieldOp.create(operands=list(values))


@irdl_op_definition
class OutputOp(IRDLOperation):
    """Terminator of ``graph.footer``: the model's outputs (logits, loss).

    ``graph.output %logits : !graph.tensor<[T, V], f32>``
    """

    name = "graph.output"

    values = var_operand_def(TensorType)
    traits = traits_def(IsTerminator(), HasParent(FooterOp))

    assembly_format = "attr-dict ($values^ `:` type($values))?"

    @staticmethod
    def make(values: Sequence[SSAValue]) -> OutputOp:
        return OutputOp.create(operands=list(values))

    def verify_(self) -> None:
        if not self.values:
            raise VerifyException("graph.output: needs at least one value")


# --------------------------------------------------------------------------- compute ops


_EMPTY_ARRAY: ArrayAttr[SymbolRefAttr] = ArrayAttr(())


def _compute_format(dim_props: Sequence[str] = ()) -> str:
    """The assembly format of a compute op whose dim attributes are ``dim_props``."""
    dims = "".join(f" `{p}` custom<Dim>(${p})" for p in dim_props)
    return f"$inputs{dims} attr-dict `:` functional-type($inputs, $outputs)"


class ComputeOp(IRDLOperation):
    """Base of the abstract compute ops (not an op itself).

    Syntax: ``%y = graph.<kind> %a, %b <dim attributes> {weights = [@w, ...], <props>,
    when = [...]} : (<operand types>) -> <result type(s)>``.  ``weights`` is omitted
    when empty; dim attributes are written bare after the operands (``heads H``).
    """

    # set for every kind from its ckir.vocab.GRAPH_OPS signature (below COMPUTE_OPS)
    NUM_INPUTS: ClassVar[int] = 1
    NUM_OUTPUTS: ClassVar[int] = 1
    WEIGHT_COUNTS: ClassVar[tuple[int, ...]] = (0,)
    PROP_ORDER: ClassVar[tuple[str, ...]] = ()
    DIM_PROPS: ClassVar[tuple[str, ...]] = ()

    inputs = var_operand_def(TensorType)
    outputs = var_result_def(TensorType)
    weights = prop_def(ArrayAttr[SymbolRefAttr], default_value=_EMPTY_ARRAY)
    when = opt_prop_def(ArrayAttr[StringAttr])

    irdl_options = (ParsePropInAttrDict(),)
    custom_directives = DIRECTIVES
    assembly_format = _compute_format()

    @property
    def weight_names(self) -> tuple[str, ...]:
        """The referenced weights' names, in order (e.g. ``("layers.{i}.wq",)``)."""
        return tuple(w.root_reference.data for w in self.weights.data)

    @property
    def modes(self) -> tuple[str, ...] | None:
        """The modes of the ``when`` guard, or None: all modes."""
        if self.when is None:
            return None
        return tuple(m.data for m in self.when.data)

    # -- verification -------------------------------------------------------

    def verify_(self) -> None:
        where = self.name
        n_in, n_out = len(self.inputs), len(self.outputs)
        if n_in != self.NUM_INPUTS:
            raise VerifyException(f"{where}: expects {self.NUM_INPUTS} operand(s), got {n_in}")
        if n_out != self.NUM_OUTPUTS:
            raise VerifyException(f"{where}: expects {self.NUM_OUTPUTS} result(s), got {n_out}")
        n_w = len(self.weights.data)
        if n_w not in self.WEIGHT_COUNTS:
            counts = " or ".join(str(c) for c in self.WEIGHT_COUNTS)
            raise VerifyException(f"{where}: expects {counts} weight(s), got {n_w}")
        if self.when is not None:
            modes = [m.data for m in self.when.data]
            if not modes:
                raise VerifyException(f"{where}: when = [] guards the op out of every mode")
            for m in modes:
                if m not in _MODE_SET:
                    raise VerifyException(
                        f"{where}: unknown mode '{m}' in when (expected {', '.join(MODES)})"
                    )
            if len(set(modes)) != len(modes):
                raise VerifyException(f"{where}: duplicate mode in when")
        model = _enclosing_model(self)
        if model is None:
            # detached or in transit through a lowering pass: only local checks
            self._verify_kind([None] * n_w, {})
            return
        info = _info(model)
        in_body = isinstance(self.parent_op(), BodyOp)
        weights: list[WeightOp | None] = []
        for ref in self.weights.data:
            name = ref.root_reference.data
            if ref.nested_references.data:
                raise VerifyException(f"{where}: weight {ref} must be a flat symbol reference")
            w = _lookup_weight(model, name)
            if w is None:
                raise VerifyException(
                    f"{where}: weight {sym(name)} is not declared in {_model_ref(model)}"
                )
            if w.per_layer and not in_body:
                raise VerifyException(
                    f"{where}: per-layer weight {sym(name)} is used outside graph.body"
                )
            weights.append(w)
        for i, r in enumerate(self.outputs):
            _check_type_symbols(where, f"result #{i} type", r.type, model)
        for p in self.DIM_PROPS:
            attr = self.properties.get(p)
            if isinstance(attr, DimAttr):
                for s in sorted(dim_symbols(attr.text)):
                    if s not in info.symbols:
                        raise VerifyException(
                            f"{where}: {p} = {attr.text} uses symbol {s}, which is not bound on "
                            f"{_model_ref(model)}"
                        )
        self._verify_kind(weights, info.symbols)

    def _verify_kind(self, weights: list[WeightOp | None], symbols: Mapping[str, int]) -> None:
        """Op-specific checks; ``weights`` entries are None outside a model."""

    # helpers for _verify_kind
    def _in_type(self, i: int) -> TensorType:
        t = self.inputs[i].type
        assert isinstance(t, TensorType)
        return t

    def _out_type(self, i: int) -> TensorType:
        t = self.outputs[i].type
        assert isinstance(t, TensorType)
        return t

    def _same_type(self, what: str, a: Attribute, b: Attribute) -> None:
        if a != b:
            raise VerifyException(f"{self.name}: {what} have different types: {a} vs {b}")

    def _weight_dim(
        self,
        w: WeightOp | None,
        axis: int,
        dim: str,
        what: str,
        symbols: Mapping[str, int],
    ) -> None:
        if w is None:
            return
        dims = w.shape_dims
        wref = f"weight {sym(w.weight_name)} {dims_text(dims)}"
        if axis >= len(dims):
            raise VerifyException(f"{self.name}: {wref} has no dim {axis}")
        if not dims_equal(dims[axis], dim, symbols):
            raise VerifyException(
                f"{self.name}: {what} is {dim} but dim {axis} of {wref} is {dims[axis]}"
            )

    def _vector_weight(
        self, w: WeightOp | None, dim: str, symbols: Mapping[str, int], role: str
    ) -> None:
        if w is None:
            return
        if not shapes_equal(w.shape_dims, (dim,), symbols):
            raise VerifyException(
                f"{self.name}: {role} {sym(w.weight_name)} has shape {dims_text(w.shape_dims)}, "
                f"expected [{dim}]"
            )

    def _last(self, t: TensorType, what: str) -> str:
        if not t.dims:
            raise VerifyException(f"{self.name}: {what} {t} must have rank >= 1")
        return t.dims[-1]


def _check_eps(op: ComputeOp) -> None:
    eps = op.properties.get("eps")
    if isinstance(eps, FloatAttr) and not eps.value.data > 0:
        raise VerifyException(f"{op.name}: eps = {eps.value.data} must be positive")


def _check_heads(
    op: ComputeOp, symbols: Mapping[str, int], q: TensorType, kv: Sequence[TensorType]
) -> None:
    """heads / kv_heads / head_dim against each other and against the operand widths.

    ``q`` (and the result) must be ``heads*head_dim`` wide, every k / v operand
    ``kv_heads*head_dim``: a kernel sized by the attributes would otherwise read
    or write past its buffers.
    """
    attrs = {k: op.properties.get(k) for k in ("heads", "kv_heads", "head_dim")}
    if not all(isinstance(a, DimAttr) for a in attrs.values()):
        return
    texts = {k: a.text for k, a in attrs.items() if isinstance(a, DimAttr)}
    h, k, d = (try_evaluate_dim(texts[n], symbols) for n in ("heads", "kv_heads", "head_dim"))
    if h is not None and k is not None and (k <= 0 or h % k):
        raise VerifyException(
            f"{op.name}: heads = {texts['heads']} ({h}) is not a multiple of "
            f"kv_heads = {texts['kv_heads']} ({k})"
        )
    if d is None:
        return
    for what, t, n, heads in [("q", q, h, "heads"), *(("k/v", t, k, "kv_heads") for t in kv)]:
        width = try_evaluate_dim(op._last(t, what), symbols)
        if n is not None and width is not None and width != n * d:
            raise VerifyException(
                f"{op.name}: {what} {t} is {width} wide but {heads}*head_dim = "
                f"{texts[heads]}*{texts['head_dim']} = {n * d}"
            )


@irdl_op_definition
class EmbedOp(ComputeOp):
    """Token embedding lookup: ``tokens [T] i32 -> x [T, E]``; weights ``[table [V, E]]``.

    ``%x = graph.embed %tok {weights = [@embed]} : (!graph.tensor<[T], i32>)
    -> !graph.tensor<[T, E], f32>``
    """

    name = "graph.embed"

    def _verify_kind(self, weights: list[WeightOp | None], symbols: Mapping[str, int]) -> None:
        t = self._in_type(0)
        if t.dtype_name != "i32":
            raise VerifyException(f"graph.embed: token ids must be i32, got {t}")
        out = self._last(self._out_type(0), "result")
        self._weight_dim(weights[0], 1, out, "the result's last dim", symbols)


@irdl_op_definition
class PosEmbedOp(ComputeOp):
    """Learned positions added to x: ``x + wpe[pos]``; weights ``[wpe [C, E]]``.

    ``%x1 = graph.pos_embed %x {weights = [@wpe]} : (!graph.tensor<[T, E], f32>)
    -> !graph.tensor<[T, E], f32>``
    """

    name = "graph.pos_embed"

    def _verify_kind(self, weights: list[WeightOp | None], symbols: Mapping[str, int]) -> None:
        self._same_type("operand and result", self._in_type(0), self._out_type(0))
        last = self._last(self._in_type(0), "operand")
        self._weight_dim(weights[0], 1, last, "the operand's last dim", symbols)


def _check_offset(op: ComputeOp) -> None:
    """A norm's optional gamma ``offset`` must be finite."""
    offset = op.properties.get("offset")
    if isinstance(offset, FloatAttr) and not math.isfinite(offset.value.data):
        raise VerifyException(f"{op.name}: offset = {offset.value.data} must be finite")


@irdl_op_definition
class RMSNormOp(ComputeOp):
    """RMS normalization over the last dim; weights ``[gamma [E]]``; ``eps`` (f64).

    ``y = x * rsqrt(mean(x^2) + eps) * (gamma + offset)``: the optional ``offset``
    (f64, default 0) is added to every gamma element, in f32, before the product
    (norms whose checkpoints store ``gamma - 1`` use ``offset = 1.0``).

    ``%h = graph.rmsnorm %x {weights = [@"layers.{i}.attn_norm"], eps = 1.0e-05 : f64}
    : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>``
    """

    name = "graph.rmsnorm"

    eps = prop_def(FloatAttr)
    offset = opt_prop_def(FloatAttr)

    def _verify_kind(self, weights: list[WeightOp | None], symbols: Mapping[str, int]) -> None:
        _check_eps(self)
        _check_offset(self)
        self._same_type("operand and result", self._in_type(0), self._out_type(0))
        last = self._last(self._in_type(0), "operand")
        self._vector_weight(weights[0], last, symbols, "gamma")


@irdl_op_definition
class LayerNormOp(ComputeOp):
    """Layer normalization over the last dim; weights ``[gamma [E], beta [E]]``; ``eps``.

    ``%h = graph.layernorm %x {weights = [@"layers.{i}.ln1.g", @"layers.{i}.ln1.b"],
    eps = 1.0e-05 : f64} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>``
    """

    name = "graph.layernorm"

    eps = prop_def(FloatAttr)

    def _verify_kind(self, weights: list[WeightOp | None], symbols: Mapping[str, int]) -> None:
        _check_eps(self)
        self._same_type("operand and result", self._in_type(0), self._out_type(0))
        last = self._last(self._in_type(0), "operand")
        self._vector_weight(weights[0], last, symbols, "gamma")
        self._vector_weight(weights[1], last, symbols, "beta")


@irdl_op_definition
class HeadRMSNormOp(ComputeOp):
    """RMS normalization of each head: every ``head_dim`` values of a row are normalized
    on their own and scaled by one shared ``gamma [head_dim]``; ``eps`` (f64).  The
    optional ``offset`` (f64, default 0) is added to gamma in f32, as rmsnorm's
    (``(1 + w)`` norms: ``offset = 1.0``).

    ``%qn = graph.head_rmsnorm %q head_dim D {weights = [@"layers.{i}.attn.q_norm"],
    eps = 1.0e-06 : f64} : (!graph.tensor<[T, H*D], f32>) -> !graph.tensor<[T, H*D], f32>``
    """

    name = "graph.head_rmsnorm"

    head_dim = prop_def(DimAttr)
    eps = prop_def(FloatAttr)
    offset = opt_prop_def(FloatAttr)

    assembly_format = _compute_format(GRAPH_OPS["head_rmsnorm"].dim_attrs)

    def _verify_kind(self, weights: list[WeightOp | None], symbols: Mapping[str, int]) -> None:
        _check_eps(self)
        _check_offset(self)
        self._same_type("operand and result", self._in_type(0), self._out_type(0))
        last = self._last(self._in_type(0), "operand")
        d_text = self.head_dim.text
        width, d = try_evaluate_dim(last, symbols), try_evaluate_dim(d_text, symbols)
        if d is not None and (d <= 0 or (width is not None and width % d)):
            raise VerifyException(
                f"graph.head_rmsnorm: the operand's last dim {last} ({width}) is not a "
                f"multiple of head_dim = {d_text} ({d})"
            )
        self._vector_weight(weights[0], d_text, symbols, "gamma")


@irdl_op_definition
class LinearOp(ComputeOp):
    """``y = x @ W^T (+ b)``; weights ``[w [N, K]]`` or ``[w [N, K], b [N]]``.

    ``%q = graph.linear %h {weights = [@"layers.{i}.wq"]} : (!graph.tensor<[T, E], f32>)
    -> !graph.tensor<[T, E], f32>``
    """

    name = "graph.linear"

    def _verify_kind(self, weights: list[WeightOp | None], symbols: Mapping[str, int]) -> None:
        tin, tout = self._in_type(0), self._out_type(0)
        k = self._last(tin, "operand")
        n = self._last(tout, "result")
        if not shapes_equal(tin.dims[:-1], tout.dims[:-1], symbols):
            raise VerifyException(
                f"graph.linear: leading dims of operand {tin} and result {tout} differ"
            )
        self._weight_dim(weights[0], 0, n, "the result's last dim", symbols)
        self._weight_dim(weights[0], 1, k, "the operand's last dim", symbols)
        if len(weights) == 2:
            self._vector_weight(weights[1], n, symbols, "bias")


#: graph.rope: the scaling attributes each ``rope_type`` requires and allows
#: (``partial_rotary_factor`` goes with every type)
ROPE_TYPE_ATTRS: Mapping[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "default": ((), ()),
    "linear": (("factor",), ()),
    "wavelength": (("factor", "low_freq_factor", "high_freq_factor", "original_context"), ()),
    "yarn": (
        ("factor", "original_context"),
        ("beta_fast", "beta_slow", "attention_factor", "mscale", "mscale_all_dim", "truncate"),
    ),
    # the short factors: exact for every sequence up to original_context, which the
    # lowering requires of max_context (the long ones are never used)
    "longrope": (
        ("ext_factors", "original_context"),
        ("factor", "attention_factor", "scaled_context"),
    ),
}
#: graph.rope's optional attributes that belong to a scaling type
ROPE_SCALING_ATTRS: tuple[str, ...] = tuple(
    a
    for a in GRAPH_OPS["rope"].attrs
    if a not in ("theta", "heads", "kv_heads", "head_dim")
    and a not in ("rope_type", "partial_rotary_factor", "local_theta", "local_pattern")
)


def rope_rotary_dim(head_dim: int, partial_rotary_factor: float | None) -> int:
    """The dims of a head that graph.rope rotates: ``int(head_dim * partial_rotary_factor)``."""
    if partial_rotary_factor is None:
        return head_dim
    return int(head_dim * partial_rotary_factor)


@irdl_op_definition
class RopeOp(ComputeOp):
    """Rotary position embedding of q and k: ``q, k -> q', k'`` (HF's rotate_half pairs).

    ``%q2, %k2 = graph.rope %q, %k heads H kv_heads KV head_dim D {theta = 1.0e+04 : f64}
    : (!graph.tensor<[T, H*D], f32>, !graph.tensor<[T, KV*D], f32>)
    -> (!graph.tensor<[T, H*D], f32>, !graph.tensor<[T, KV*D], f32>)``

    Frequency scaling (``rope_type``, absent for plain RoPE) and its parameters,
    as transformers names them (docs/dialects/graph.md, "graph.rope")::

      {theta = 5.0e+05 : f64, rope_type = "wavelength", factor = 8.0 : f64,
       low_freq_factor = 1.0 : f64, high_freq_factor = 4.0 : f64, original_context = 8192 : i64}

    ``linear`` takes ``factor``; ``wavelength`` (a band over the wavelengths)
    ``factor``, ``low_freq_factor``, ``high_freq_factor``, ``original_context``;
    ``yarn`` ``factor``, ``original_context`` and optionally ``beta_fast``
    (default 32), ``beta_slow`` (1), ``attention_factor``, ``mscale``,
    ``mscale_all_dim`` and ``truncate``; ``longrope`` ``ext_factors`` (one divisor of
    the frequency per rotated pair, ``array<f64: ...>``) and ``original_context``, and
    optionally ``factor`` (for the default attention factor; absent: ``scaled_context /
    original_context``, ``scaled_context`` being the context the model was scaled to)
    and ``attention_factor`` (the scale of cos and sin)::

      {rope_type = "longrope", ext_factors = array<f64: 1.0, 1.5, 3.0>,
       original_context = 32 : i64, factor = 2.0 : f64}

    ``partial_rotary_factor`` (0 < f <= 1)
    rotates only the first ``int(head_dim * f)`` dims of each head.

    Local layers: with ``local_theta`` (f64) and ``local_pattern`` (i64 n >= 1), the
    layers i with ``(i + 1) % n != 0`` (attention's ``window_pattern`` layers) rotate by
    ``local_theta`` with no frequency scaling; the others by ``theta`` as scaled.
    """

    name = "graph.rope"

    theta = prop_def(FloatAttr)
    heads = prop_def(DimAttr)
    kv_heads = prop_def(DimAttr)
    head_dim = prop_def(DimAttr)
    rope_type = opt_prop_def(StringAttr)
    factor = opt_prop_def(FloatAttr)
    low_freq_factor = opt_prop_def(FloatAttr)
    high_freq_factor = opt_prop_def(FloatAttr)
    original_context = opt_prop_def(IntegerAttr)
    beta_fast = opt_prop_def(FloatAttr)
    beta_slow = opt_prop_def(FloatAttr)
    attention_factor = opt_prop_def(FloatAttr)
    mscale = opt_prop_def(FloatAttr)
    mscale_all_dim = opt_prop_def(FloatAttr)
    truncate = opt_prop_def(UnitAttr)
    ext_factors = opt_prop_def(DenseArrayBase)
    scaled_context = opt_prop_def(IntegerAttr)
    partial_rotary_factor = opt_prop_def(FloatAttr)
    local_theta = opt_prop_def(FloatAttr)
    local_pattern = opt_prop_def(IntegerAttr)

    assembly_format = _compute_format(GRAPH_OPS["rope"].dim_attrs)

    def _float(self, name: str) -> float | None:
        attr = self.properties.get(name)
        return float(attr.value.data) if isinstance(attr, FloatAttr) else None

    def _verify_kind(self, weights: list[WeightOp | None], symbols: Mapping[str, int]) -> None:
        theta = self.theta.value.data
        if not theta > 0:
            raise VerifyException(f"graph.rope: theta = {theta} must be positive")
        self._same_type("q and its result", self._in_type(0), self._out_type(0))
        self._same_type("k and its result", self._in_type(1), self._out_type(1))
        _check_heads(self, symbols, self._in_type(0), [self._in_type(1)])
        self._verify_scaling(symbols)
        self._verify_local()

    def _verify_local(self) -> None:
        if (self.local_theta is None) != (self.local_pattern is None):
            raise VerifyException("graph.rope: local_theta and local_pattern go together")
        local = self._float("local_theta")
        if local is not None and not (math.isfinite(local) and local > 0):
            raise VerifyException(f"graph.rope: local_theta = {local} must be positive")
        if self.local_pattern is not None and self.local_pattern.value.data < 1:
            raise VerifyException(
                f"graph.rope: local_pattern = {self.local_pattern.value.data} must be at least 1"
            )

    def _verify_scaling(self, symbols: Mapping[str, int]) -> None:
        kind = self.rope_type.data if self.rope_type is not None else "default"
        if kind not in ROPE_TYPE_ATTRS:
            raise VerifyException(
                f'graph.rope: rope_type = "{kind}" is not one of {", ".join(ROPE_TYPE_ATTRS)}'
            )
        required, optional = ROPE_TYPE_ATTRS[kind]
        present = [a for a in ROPE_SCALING_ATTRS if self.properties.get(a) is not None]
        for a in required:
            if a not in present:
                raise VerifyException(f'graph.rope: rope_type = "{kind}" needs {a}')
        for a in present:
            if a not in required and a not in optional:
                raise VerifyException(f'graph.rope: {a} does not apply to rope_type = "{kind}"')
        for a in ("factor", "low_freq_factor", "beta_fast", "beta_slow", "attention_factor"):
            v = self._float(a)
            if v is not None and not (math.isfinite(v) and v > 0):
                raise VerifyException(f"graph.rope: {a} = {v} must be positive")
        for a in ("mscale", "mscale_all_dim"):
            v = self._float(a)
            if v is not None and not (math.isfinite(v) and v >= 0):
                raise VerifyException(f"graph.rope: {a} = {v} must not be negative")
        low, high = self._float("low_freq_factor"), self._float("high_freq_factor")
        if low is not None and high is not None and not high > low:
            raise VerifyException(
                f"graph.rope: high_freq_factor = {high} must be greater than "
                f"low_freq_factor = {low}"
            )
        fast, slow = self._float("beta_fast"), self._float("beta_slow")
        if (fast or 32.0) < (slow or 1.0):
            raise VerifyException(
                f"graph.rope: beta_fast = {fast or 32.0} must not be smaller than "
                f"beta_slow = {slow or 1.0}"
            )
        if self.scaled_context is not None and self.scaled_context.value.data <= 0:
            raise VerifyException(
                f"graph.rope: scaled_context = {self.scaled_context.value.data} must be positive"
            )
        if self.original_context is not None and self.original_context.value.data <= 0:
            raise VerifyException(
                f"graph.rope: original_context = {self.original_context.value.data} "
                "must be positive"
            )
        frac = self._float("partial_rotary_factor")
        if frac is not None and not 0 < frac <= 1:
            raise VerifyException(f"graph.rope: partial_rotary_factor = {frac} must be in (0, 1]")
        ext = self.ext_factors
        if ext is not None:
            if ext.elt_type != f64:
                raise VerifyException("graph.rope: ext_factors must be an array<f64: ...>")
            for v in ext.get_values():
                if not (math.isfinite(float(v)) and float(v) > 0):
                    raise VerifyException(f"graph.rope: ext_factors has {v}; each must be positive")
        d = try_evaluate_dim(self.head_dim.text, symbols)
        if d is not None and ext is not None:
            r = rope_rotary_dim(d, frac)
            if len(ext.get_values()) != r // 2:
                raise VerifyException(
                    f"graph.rope: ext_factors has {len(ext.get_values())} values; the "
                    f"{r} rotated dims of head_dim = {self.head_dim.text} ({d}) need {r // 2}"
                )
        if d is not None:
            r = rope_rotary_dim(d, frac)
            if r < 2 or r % 2:
                raise VerifyException(
                    f"graph.rope: rotates {r} dims of head_dim = {self.head_dim.text} ({d}); "
                    "that must be even and at least 2"
                )


@irdl_op_definition
class AttentionOp(ComputeOp):
    """Scaled dot-product attention (MHA or GQA) with the KV cache: ``q, k, v -> o``.

    Optional properties: ``scale_dim`` (f64; scores are ``q.k / sqrt(scale_dim)``,
    default ``head_dim``), ``softcap`` (f64; scores become ``softcap * tanh(s /
    softcap)`` before the softmax; 0: none), ``window`` (i64; a query at position p
    sees the keys ``p - window + 1 .. p`` only; 0: every key) and ``window_pattern``
    (i64 n; the window applies to the layers i with ``(i + 1) % n != 0``, the others
    see every key).

    ``%o = graph.attention %q, %k, %v heads H kv_heads KV head_dim D {causal}
    : (...) -> !graph.tensor<[T, H*D], f32>``
    """

    name = "graph.attention"

    heads = prop_def(DimAttr)
    kv_heads = prop_def(DimAttr)
    head_dim = prop_def(DimAttr)
    causal = opt_prop_def(UnitAttr)
    scale_dim = opt_prop_def(FloatAttr)
    softcap = opt_prop_def(FloatAttr)
    window = opt_prop_def(IntegerAttr)
    window_pattern = opt_prop_def(IntegerAttr)

    assembly_format = _compute_format(GRAPH_OPS["attention"].dim_attrs)

    def _verify_kind(self, weights: list[WeightOp | None], symbols: Mapping[str, int]) -> None:
        for name, least in (("scale_dim", "positive"), ("softcap", "0 (none) or positive")):
            attr = self.properties.get(name)
            if isinstance(attr, FloatAttr) and not (
                math.isfinite(attr.value.data)
                and (attr.value.data > 0 or (name == "softcap" and attr.value.data == 0))
            ):
                raise VerifyException(
                    f"graph.attention: {name} = {attr.value.data} must be {least} and finite"
                )
        for name in ("window", "window_pattern"):
            attr = self.properties.get(name)
            if isinstance(attr, IntegerAttr) and attr.value.data < 0:
                raise VerifyException(f"graph.attention: {name} = {attr.value.data} is negative")
        if self.window_pattern is not None and self.window is None:
            raise VerifyException("graph.attention: window_pattern without a window")
        self._same_type("q and the result", self._in_type(0), self._out_type(0))
        self._same_type("k and v", self._in_type(1), self._in_type(2))
        _check_heads(self, symbols, self._in_type(0), [self._in_type(1)])


class _BinarySameType(ComputeOp):
    def _verify_kind(self, weights: list[WeightOp | None], symbols: Mapping[str, int]) -> None:
        self._same_type("operands", self._in_type(0), self._in_type(1))
        self._same_type("operand and result", self._in_type(0), self._out_type(0))


class _Unary(ComputeOp):
    def _verify_kind(self, weights: list[WeightOp | None], symbols: Mapping[str, int]) -> None:
        self._same_type("operand and result", self._in_type(0), self._out_type(0))


@irdl_op_definition
class GeluOp(_Unary):
    """GELU activation; ``approximate`` is ``"tanh"`` or ``"none"`` (erf).

    ``%a = graph.gelu %h {approximate = "tanh"} : (!graph.tensor<[T, I], f32>)
    -> !graph.tensor<[T, I], f32>``
    """

    name = "graph.gelu"

    approximate = prop_def(StringAttr)

    def _verify_kind(self, weights: list[WeightOp | None], symbols: Mapping[str, int]) -> None:
        if self.approximate.data not in GRAPH_OPS["gelu"].choices["approximate"]:
            raise VerifyException(
                f'graph.gelu: approximate = "{self.approximate.data}" must be "tanh" or "none"'
            )
        super()._verify_kind(weights, symbols)


@irdl_op_definition
class ReluOp(_Unary):
    """ReLU activation, with optional schedule hints.

    ``%r = graph.relu %h : (!graph.tensor<[T, I], f32>) -> !graph.tensor<[T, I], f32>``
    """

    name = "graph.relu"

    schedule = opt_prop_def(ScheduleAttr)


@irdl_op_definition
class MulScalarOp(_Unary):
    """Product with a constant: ``y = x * value ** exponent`` (``exponent`` defaults to 1).

    The constant is computed in f64 and rounded to the tensor's dtype once
    (``value = E, exponent = 0.5`` multiplies by ``sqrt(E)``).

    ``%y = graph.mul_scalar %x {value = 6.4e+01 : f64, exponent = 5.0e-01 : f64}
    : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>``
    """

    name = "graph.mul_scalar"

    value = prop_def(FloatAttr)
    exponent = opt_prop_def(FloatAttr)

    def _verify_kind(self, weights: list[WeightOp | None], symbols: Mapping[str, int]) -> None:
        if mul_scalar_factor(self) is None:
            ex = "" if self.exponent is None else f" ** {self.exponent.value.data}"
            raise VerifyException(
                f"graph.mul_scalar: value = {self.value.value.data}{ex} is not a finite number"
            )
        super()._verify_kind(weights, symbols)


@irdl_op_definition
class SoftcapOp(_Unary):
    """Soft-capping: ``y = cap * tanh(x / cap)``, element-wise (e.g. final logits).

    ``%y = graph.softcap %x {cap = 3.0e+01 : f64} : (!graph.tensor<[T, V], f32>)
    -> !graph.tensor<[T, V], f32>``
    """

    name = "graph.softcap"

    cap = prop_def(FloatAttr)

    def _verify_kind(self, weights: list[WeightOp | None], symbols: Mapping[str, int]) -> None:
        cap = self.cap.value.data
        if not (math.isfinite(cap) and cap > 0):
            raise VerifyException(f"graph.softcap: cap = {cap} must be positive and finite")
        super()._verify_kind(weights, symbols)


def mul_scalar_factor(op: MulScalarOp) -> float | None:
    """``value ** exponent`` of a ``graph.mul_scalar``, or None when it is not finite/real."""
    value = float(op.value.value.data)
    exponent = 1.0 if op.exponent is None else float(op.exponent.value.data)
    try:
        factor = value**exponent
    except (OverflowError, ZeroDivisionError):
        return None
    if isinstance(factor, complex) or not math.isfinite(factor):
        return None
    return float(factor)


@irdl_op_definition
class LMHeadOp(ComputeOp):
    """Projection to vocabulary logits: ``x [T, E] -> logits [T, V]``; weights ``[w [V, E]]``
    or ``[w [V, E], b [V]]`` (a head with a bias).

    ``%logits = graph.lm_head %h {weights = [@lm_head]} : (!graph.tensor<[T, E], f32>)
    -> !graph.tensor<[T, V], f32>``
    """

    name = "graph.lm_head"

    def _verify_kind(self, weights: list[WeightOp | None], symbols: Mapping[str, int]) -> None:
        k = self._last(self._in_type(0), "operand")
        n = self._last(self._out_type(0), "result")
        self._weight_dim(weights[0], 0, n, "the result's last dim", symbols)
        self._weight_dim(weights[0], 1, k, "the operand's last dim", symbols)
        if len(weights) == 2:
            self._vector_weight(weights[1], n, symbols, "bias")


@irdl_op_definition
class CrossEntropyOp(ComputeOp):
    """Mean cross-entropy loss of logits against integer targets: ``logits, targets -> loss``.

    ``%loss = graph.cross_entropy %logits, %tgt : (!graph.tensor<[T, V], f32>,
    !graph.tensor<[T], i32>) -> !graph.tensor<[1], f32>``
    """

    name = "graph.cross_entropy"

    def _verify_kind(self, weights: list[WeightOp | None], symbols: Mapping[str, int]) -> None:
        t = self._in_type(1)
        if t.dtype_name != "i32":
            raise VerifyException(f"graph.cross_entropy: targets must be i32, got {t}")


class _MatmulLike(ComputeOp):
    schedule = opt_prop_def(ScheduleAttr)

    def _verify_kind(self, weights: list[WeightOp | None], symbols: Mapping[str, int]) -> None:
        a, b, c = self._in_type(0), self._in_type(1), self._out_type(0)
        if len(b.dims) != 2 or not a.dims or not c.dims:
            raise VerifyException(
                f"{self.name}: expects a [.., K] x b [K, N] -> c [.., N], got {a}, {b} -> {c}"
            )
        if not dims_equal(a.dims[-1], b.dims[0], symbols):
            raise VerifyException(
                f"{self.name}: inner dims differ: {a.dims[-1]} (a) vs {b.dims[0]} (b)"
            )
        expected = (*a.dims[:-1], b.dims[1])
        if not shapes_equal(c.dims, expected, symbols):
            raise VerifyException(
                f"{self.name}: result shape {dims_text(c.dims)}, expected {dims_text(expected)}"
            )


@irdl_op_definition
class MatmulOp(_MatmulLike):
    """Matrix product of two activations, with optional schedule hints.

    ``%c = graph.matmul %a, %b {schedule = #graph.schedule<tile_m = 8, vectorize = 8>}
    : (!graph.tensor<[M, K], f32>, !graph.tensor<[K, N], f32>) -> !graph.tensor<[M, N], f32>``
    """

    name = "graph.matmul"


@irdl_op_definition
class FusedMatmulReluOp(_MatmulLike):
    """``relu(a @ b)`` as one op (what a fusion pass produces), with optional schedule.

    ``%c = graph.fused_matmul_relu %a, %b : (!graph.tensor<[M, K], f32>,
    !graph.tensor<[K, N], f32>) -> !graph.tensor<[M, N], f32>``
    """

    name = "graph.fused_matmul_relu"


#: compute op kind -> op class
COMPUTE_OPS: dict[str, type[ComputeOp]] = {
    "embed": EmbedOp,
    "pos_embed": PosEmbedOp,
    "rmsnorm": RMSNormOp,
    "layernorm": LayerNormOp,
    "head_rmsnorm": HeadRMSNormOp,
    "linear": LinearOp,
    "rope": RopeOp,
    "attention": AttentionOp,
    "gelu": GeluOp,
    "relu": ReluOp,
    "mul_scalar": MulScalarOp,
    "softcap": SoftcapOp,
    "lm_head": LMHeadOp,
    "cross_entropy": CrossEntropyOp,
    "matmul": MatmulOp,
    "fused_matmul_relu": FusedMatmulReluOp,
}
#: the hand-written op classes; the elementwise kinds without one are made below


def _elementwise_op(kind: str) -> type[ComputeOp]:
    """The op class of an elementwise kind (``ckir.vocab.OpSignature.elementwise``).

    Operands and result share one tensor type; the docstring comes from the
    vocabulary, with an IR example.
    """
    sig = GRAPH_OPS[kind]
    t = "!graph.tensor<[T, E], f32>"
    args = ", ".join(f"%{chr(ord('a') + i)}" for i in range(sig.ins))
    example = f"``%y = graph.{kind} {args} : ({', '.join([t] * sig.ins)}) -> {t}``"
    body = {
        "name": f"graph.{kind}",
        "__doc__": f"{sig.doc} Element-wise, one type throughout.\n\n    {example}\n    ",
        "__module__": __name__,
        "__qualname__": "".join(p.title() for p in kind.split("_")) + "Op",
    }
    base = _BinarySameType if sig.ins == 2 else _Unary
    return irdl_op_definition(type(body["__qualname__"], (base,), body))


COMPUTE_OPS.update(
    {k: _elementwise_op(k) for k, s in GRAPH_OPS.items() if s.elementwise and k not in COMPUTE_OPS}
)
#: all compute op classes, for ``isinstance`` checks
COMPUTE_OP_TYPES: tuple[type[ComputeOp], ...] = tuple(COMPUTE_OPS.values())
AddOp = COMPUTE_OPS["add"]
SwiGLUOp = COMPUTE_OPS["swiglu"]
SoftmaxOp = COMPUTE_OPS["softmax"]

if set(COMPUTE_OPS) != set(GRAPH_OPS):  # the op classes follow the vocabulary, never drift
    raise ImportError(
        "graph dialect and ckir.vocab.GRAPH_OPS disagree: "
        f"{sorted(set(COMPUTE_OPS) ^ set(GRAPH_OPS))}"
    )
for _kind, _cls in COMPUTE_OPS.items():
    # set after irdl_op_definition: IRDL only accepts upper-case class constants
    _sig = GRAPH_OPS[_kind]
    _cls.kind = _kind  # type: ignore[attr-defined]
    _cls.NUM_INPUTS = _sig.ins
    _cls.NUM_OUTPUTS = _sig.outs
    _cls.WEIGHT_COUNTS = _sig.weight_counts
    _cls.PROP_ORDER = tuple(_sig.attrs)
    _cls.DIM_PROPS = _sig.dim_attrs
ComputeOp.kind = ""  # type: ignore[attr-defined]


def _to_prop(
    cls: type[ComputeOp],
    key: str,
    value: Attribute | float | int | str | bool | list[float] | tuple[float, ...],
) -> Attribute:
    if isinstance(value, Attribute):
        return value
    if isinstance(value, bool):
        if not value:
            raise ValueError(f"{cls.name}: pass a false flag by omitting '{key}'")
        return UnitAttr()
    if key in cls.DIM_PROPS:
        return DimAttr.get(value)
    kind = GRAPH_OPS[cls.kind].attrs.get(key, ("",))[0] if cls.kind in GRAPH_OPS else ""
    if kind == "floats" and isinstance(value, list | tuple):
        return DenseArrayBase.from_list(f64, [float(v) for v in value])
    if isinstance(value, float) or kind == "float":
        return FloatAttr(float(value), f64)
    if isinstance(value, int) and kind == "int":
        return IntegerAttr(value, i64)
    if isinstance(value, str):
        return StringAttr(value)
    raise ValueError(f"{cls.name}: cannot make property '{key}' from {value!r}")


def compute_op(
    kind: str,
    inputs: Sequence[SSAValue],
    result_types: Sequence[TensorType],
    *,
    weights: Sequence[str] = (),
    attrs: Mapping[str, Attribute] | None = None,
    when: Sequence[str] | None = None,
) -> ComputeOp:
    """Build a compute op of ``kind`` (a key of :data:`COMPUTE_OPS`).

    ``attrs`` are the op-specific properties (``eps``, ``theta``, ``heads``, ...);
    Attributes are used as given, Python values are converted (float -> f64
    ``FloatAttr``, dim props -> ``DimAttr``, ``True`` -> ``UnitAttr``).
    """
    cls = COMPUTE_OPS.get(kind)
    if cls is None:
        raise ValueError(f"unknown graph compute op '{kind}'")
    props: dict[str, Attribute] = {
        "weights": ArrayAttr(tuple(SymbolRefAttr(w) for w in weights)) if weights else _EMPTY_ARRAY
    }
    for k, v in (attrs or {}).items():
        props[k] = _to_prop(cls, k, v)
    if when is not None:
        props["when"] = ArrayAttr(tuple(StringAttr(m) for m in when))
    return cls.create(operands=list(inputs), result_types=list(result_types), properties=props)


Graph = Dialect(
    "graph",
    [
        ModelOp,
        WeightOp,
        HeaderOp,
        BodyOp,
        FooterOp,
        InputOp,
        YieldOp,
        OutputOp,
        *COMPUTE_OPS.values(),
    ],
    [TensorType, ScheduleAttr, DimAttr],
)
