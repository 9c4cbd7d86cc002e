"""The ``lowered`` dialect: one program of concrete kernel calls per mode.

A ``lowered.model`` holds the global buffers (weights, KV cache, gradients,
optimizer state) and one ``lowered.program`` per mode (prefill, decode,
backward).  A program holds its own buffers and views (activations, io,
scratch) and the kernel calls in execution order.  Buffers are symbols and calls
are destination-passing: ``lowered.call @kernel(@ins) -> (@outs) {params}``.
Every dim is an integer, except the run-time scalars ``#lowered.rt<T>`` (tokens
in this call), ``#lowered.rt<P>`` (tokens already cached) and ``#lowered.rt<PT>``
(P + T), optionally scaled: ``#lowered.rt<T*64>``.

The module describes its kernels: one ``lowered.kernel`` declaration per kernel
called (op kind, C name, modes, operands with access and dtype, parameters,
constraints), and every call carries its origin (``#lowered.origin<...>``).

Example::

    lowered.model @tiny {
      lowered.kernel @embed_f32 op "embed" c "ckir_embed_f32" modes ["decode"]
          (tokens: read i32, table: read f32, out: write f32) params (T: i64, E: i64)
      lowered.buffer @"w.embed" weight : !lowered.buf<[256, 64], f32> {source = "embed"}
      lowered.program @decode mode "decode" max_context 128 {
        lowered.buffer @"decode.tokens" io : !lowered.buf<[1], i32>
        lowered.buffer @"decode.x" activation : !lowered.buf<[1, 64], f32>
        lowered.call @embed_f32(@"decode.tokens", @"w.embed") -> (@"decode.x")
            {T = 1 : i64, E = 64 : i64, origin = #lowered.origin<scope "header", op "graph.embed">}
      }
    }

Calls are checked against the declaration they name, never against the global
kernel registry (``ckir.registry`` only provides the spec type and constraint
language).  See docs/dialects/lowered.md.

Why one file of ~1.5k lines: it follows xDSL's layout, one module per dialect
(``xdsl.dialects.arith`` ...), whose ``Lowered`` dialect object registers every
op and attribute, and the ops share the module's private symbol-table cache
(``_table``: the buffers, views, kernels and programs of a model or program, by
name) that a split would have to make public.  It holds, in order: the
attributes (``!lowered.buf``, ``#lowered.rt``, the kernel-operand attribute,
``#lowered.origin``); the symbol tables; ``lowered.model`` and
``lowered.program``; ``lowered.buffer`` and ``lowered.view``; ``lowered.kernel``
declarations; ``lowered.call``; the ``Lowered`` dialect.
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Mapping, Sequence
from functools import lru_cache

from xdsl.dialects.builtin import (
    I64,
    ArrayAttr,
    DenseArrayBase,
    DictionaryAttr,
    FloatAttr,
    IntAttr,
    IntegerAttr,
    StringAttr,
    SymbolNameConstraint,
    SymbolRefAttr,
    UnrankedTensorType,
    f32,
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
    traits_def,
)
from xdsl.parser import AttrParser, Parser
from xdsl.printer import Printer
from xdsl.traits import HasParent, NoTerminator, SymbolOpInterface, SymbolTable
from xdsl.utils.exceptions import VerifyException

from ckir.dialects.common import Placed, Shaped, SingleBody, ViewOf, sym
from ckir.dialects.dims import (
    CONTEXT,
    POSITION,
    ROW_SYMBOLS,
    RUNTIME_SYMBOL_TYPES,
    RUNTIME_SYMBOLS,
    TOKENS,
    dim_symbols,
)
from ckir.dialects.phase import PhaseAttr
from ckir.dialects.row_offset import RowOffset, make_rows, row_offset, rows_problem
from ckir.dialects.syntax import DIRECTIVES, parse_keyed_entries
from ckir.registry import (
    ACCESSES,
    PARAM_TYPES,
    KernelSpec,
    OperandSpec,
    ParamSpec,
    constraint_problem,
    extent_values,
    panel_extent_problem,
)
from ckir.vocab import (
    BLOCK_DTYPES,
    DTYPES,
    ELEMENT_BYTES,
    GLOBAL_ROLES,
    LOCAL_ROLES,
    MODES,
    PANEL_DTYPES,
    ROLES,
    dtype_info,
    storage_bytes,
)

__all__ = [
    "BLOCK_DTYPES",
    "DTYPES",
    "ELEMENT_BYTES",
    "GLOBAL_ROLES",
    "LOCAL_ROLES",
    "MODES",
    "ROLES",
    "BufferOp",
    "BufferType",
    "CallOp",
    "KernelArgAttr",
    "KernelOp",
    "Lowered",
    "LoweredModelOp",
    "OriginAttr",
    "ProgramOp",
    "RuntimeSymAttr",
    "ViewOp",
    "sym",
]


#: a run-time call parameter: a row symbol, optionally times a positive integer, or a
#: scalar of the optimizer step
_RT_RE = re.compile(
    "|".join(
        [f"(?:{'|'.join(ROW_SYMBOLS)})(?:\\*[1-9][0-9]*)?"]
        + [s for s in RUNTIME_SYMBOLS if s not in ROW_SYMBOLS]
    )
)
_RT_EXPECTED = f"{', '.join(ROW_SYMBOLS)} (optionally '*<int>'), " + ", ".join(
    s for s in RUNTIME_SYMBOLS if s not in ROW_SYMBOLS
)


# --------------------------------------------------------------------------- attributes


@lru_cache(maxsize=4096)
def _shape_attr(shape: tuple[int, ...]) -> ArrayAttr[IntAttr]:
    return ArrayAttr(tuple(IntAttr(d) for d in shape))


@lru_cache(maxsize=64)
def _str_attr(text: str) -> StringAttr:
    return StringAttr(text)


@lru_cache(maxsize=65536)
def _i64(value: int) -> IntegerAttr:
    return IntegerAttr(value, i64)


@lru_cache(maxsize=65536)
def _ref_cached(name: str) -> SymbolRefAttr:
    return SymbolRefAttr(name)


def _ref(name: str | StringAttr) -> SymbolRefAttr:
    return _ref_cached(name.data if isinstance(name, StringAttr) else name)


@irdl_attr_definition
class BufferType(Shaped, ParametrizedAttribute, TypeAttribute):
    """A concrete buffer: integer shape and dtype, ``!lowered.buf<[1, 64], f32>``.

    Plain dtypes ``f32, i32`` (4 bytes), ``bf16, f16`` (2), ``i64`` (8); block
    quantized ``q8_0`` (34 bytes / 32 elements), ``q4_0`` (18 / 32), ``q4_1``
    (20 / 32), ``q4_k`` (144 / 256), whose rows (last dim) hold whole blocks;
    panel dtypes, an ``[N, K]`` matrix stored in 32-row panels (k-major, the
    last panel zero-padded: ``ceil(N/32)*32*K`` values), always 2-D: ``f32p``
    (fp32; ``!lowered.buf<[100, 64], f32p>`` is 128*64*4 bytes), ``bf16p``
    (bf16 pairs of k, K even; ``!lowered.buf<[100, 64], bf16p>`` is 128*64*2 bytes),
    ``q8_0p`` (Q8_0 blocks, K % 32 == 0; ``!lowered.buf<[100, 64], q8_0p>`` is
    128*2*34 bytes) and ``q4_1p`` (Q4_1 blocks, K % 32 == 0;
    ``!lowered.buf<[100, 64], q4_1p>`` is 128*2*20 bytes).
    """

    name = "lowered.buf"

    shape: ArrayAttr[IntAttr]
    dtype: StringAttr

    @staticmethod
    def make(shape: Sequence[int], dtype: str) -> BufferType:
        return BufferType(_shape_attr(tuple(int(d) for d in shape)), _str_attr(dtype))

    @property
    def shape_ints(self) -> tuple[int, ...]:
        return self.shape_values

    @property
    def num_elements(self) -> int:
        n = 1
        for d in self.shape.data:
            n *= d.data
        return n

    @property
    def byte_size(self) -> int:
        """Bytes the buffer occupies (quantized: whole blocks per row; panel dtypes: whole
        panels)."""
        return storage_bytes(self.dtype.data, self.shape_ints)

    @property
    def stored_values(self) -> int:
        """Values the buffer stores: its elements, with the padding rows of a panel dtype
        (``ceil(N/32)*32*K`` for an ``[N, K]`` one)."""
        panel = PANEL_DTYPES.get(self.dtype.data)
        if panel is not None:
            n, k = self.shape_ints
            return -(-n // panel) * panel * k
        return self.num_elements

    def verify(self) -> None:
        problem = _check_buffer(self.shape_ints, self.dtype.data)
        if problem is not None:
            raise VerifyException(f"lowered.buf: {problem}")

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            shape = parser.parse_comma_separated_list(
                parser.Delimiter.SQUARE,
                lambda: parser.parse_integer(allow_boolean=False, allow_negative=False),
                " in lowered.buf shape",
            )
            parser.parse_punctuation(",")
            start = parser.pos
            dtype = parser.parse_optional_identifier()
            if dtype not in ELEMENT_BYTES and dtype not in BLOCK_DTYPES:
                got = f"'{dtype}'" if dtype is not None else "nothing"
                parser.raise_error(
                    f"unknown dtype {got} (expected one of {', '.join(DTYPES)})",
                    start,
                    parser.pos,
                )
        problem = _check_buffer(tuple(shape), dtype)
        if problem is not None:
            parser.raise_error(f"lowered.buf: {problem}", start)
        return (_shape_attr(tuple(shape)), _str_attr(dtype))

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string(
            "<[" + ", ".join(str(d.data) for d in self.shape.data) + "], " + self.dtype.data + ">"
        )


@lru_cache(maxsize=4096)
def _check_buffer(shape: tuple[int, ...], dtype: str) -> str | None:
    if dtype not in ELEMENT_BYTES and dtype not in BLOCK_DTYPES:
        return f"unknown dtype '{dtype}' (expected one of {', '.join(DTYPES)})"
    if not shape:
        return "a buffer needs at least one dim"
    if any(d <= 0 for d in shape):
        return f"dims must be positive, got [{', '.join(map(str, shape))}]"
    if dtype in BLOCK_DTYPES and shape[-1] % BLOCK_DTYPES[dtype][1]:
        return (
            f"{dtype} rows must be a multiple of {BLOCK_DTYPES[dtype][1]} elements, got {shape[-1]}"
        )
    if dtype in PANEL_DTYPES and len(shape) != 2:
        return f"{dtype} buffers are [N, K] matrices, got {len(shape)} dims"
    group = dtype_info(dtype).k_group
    if shape[-1] % group:
        return f"{dtype} buffers hold K in groups of {group} (pairs of k), got K = {shape[-1]}"
    return None


@irdl_attr_definition
class RuntimeSymAttr(ParametrizedAttribute):
    """A scalar known only at run time: ``#lowered.rt<T>``, ``<P>``, ``<PT>``, ``<step>``, ``<lr>``.

    ``T`` is the number of tokens in this call, ``P`` the number already in the KV
    cache, ``PT`` = P + T.  A positive integer factor may follow the token symbols:
    ``#lowered.rt<T*64>`` (64 values per token).  ``step`` (i64, 1-based) and ``lr``
    (f32) are the optimizer step's number and learning rate (mode optimize).
    """

    name = "lowered.rt"

    symbol: StringAttr

    @staticmethod
    def make(symbol: str) -> RuntimeSymAttr:
        return RuntimeSymAttr(_str_attr(symbol))

    @property
    def symbol_name(self) -> str:
        return self.symbol.data

    def verify(self) -> None:
        if _RT_RE.fullmatch(self.symbol.data) is None:
            raise VerifyException(
                f"lowered.rt: unknown run-time symbol '{self.symbol.data}' (expected "
                f"{_RT_EXPECTED})"
            )

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            start = parser.pos
            name = parser.parse_optional_identifier()
            if name not in RUNTIME_SYMBOLS:
                parser.raise_error(
                    f"unknown run-time symbol '{name}' (expected {', '.join(RUNTIME_SYMBOLS)})",
                    start,
                    parser.pos,
                )
            if name in ROW_SYMBOLS and parser.parse_optional_punctuation("*") is not None:
                factor = parser.parse_integer(allow_boolean=False, allow_negative=False)
                if factor <= 0:
                    parser.raise_error("a run-time symbol factor must be positive")
                name = f"{name}*{factor}"
        return (_str_attr(name),)

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string("<" + self.symbol.data + ">")


#: ``f32s``: a table of f32 fixed at compile time (a call's value is an ``array<f32: ...>``)
_BUILTIN_SCALARS: dict[str, Attribute] = {"i64": i64, "f32": f32, "f32s": UnrankedTensorType(f32)}
#: the builtin types that spell the registry's scalar parameter types in the IR
IR_PARAM_TYPES: dict[str, Attribute] = {name: _BUILTIN_SCALARS[name] for name in PARAM_TYPES}
_BARE_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@irdl_attr_definition
class KernelArgAttr(Shaped, ParametrizedAttribute):
    """One buffer operand of a kernel declaration: ``#lowered.arg<x: read f32 extent "T*E">``.

    ``access`` is ``read``, ``write`` or ``readwrite``; ``dtype`` one of the buffer
    dtypes; the optional ``extent`` is how many elements the kernel may touch, a
    dim expression over the kernel's parameters (``"(P+T)*KVD"``).  A panel dtype
    (``f32p``, ``bf16p``, ``q8_0p``, ``q4_1p``) states it as ``rows*cols`` in logical elements
    (``"N*K"``); the kernel then touches ``ceil(rows/32)*32*cols`` values, padding
    included.  Inside a ``lowered.kernel`` the operands print without the prefix:
    ``(x: read f32 extent "T*E", y: write f32)``.
    """

    name = "lowered.arg"

    arg_name: StringAttr
    access: StringAttr
    dtype: StringAttr
    extent: StringAttr

    @staticmethod
    def make(name: str, access: str, dtype: str, extent: str = "") -> KernelArgAttr:
        return KernelArgAttr(
            _str_attr(name), _str_attr(access), _str_attr(dtype), _str_attr(extent)
        )

    @property
    def extent_text(self) -> str | None:
        """The extent expression, None when the declaration states none."""
        return self.extent.data or None

    @property
    def name_text(self) -> str:
        return self.arg_name.data

    @property
    def access_text(self) -> str:
        return self.access.data

    @property
    def writes(self) -> bool:
        return self.access.data != "read"

    def verify(self) -> None:
        if _BARE_IDENT.fullmatch(self.arg_name.data) is None:
            raise VerifyException(f"lowered.arg: '{self.arg_name.data}' is not an identifier")
        if self.access.data not in ACCESSES:
            raise VerifyException(
                f"lowered.arg {self.arg_name.data}: unknown access '{self.access.data}' "
                f"(expected one of {', '.join(ACCESSES)})"
            )
        if self.dtype.data not in DTYPES:
            raise VerifyException(
                f"lowered.arg {self.arg_name.data}: unknown dtype '{self.dtype.data}' "
                f"(expected one of {', '.join(DTYPES)})"
            )
        if self.extent.data:
            try:
                dim_symbols(self.extent.data)
            except ValueError as err:
                raise VerifyException(
                    f"lowered.arg {self.arg_name.data}: bad extent '{self.extent.data}': {err}"
                ) from None
            problem = panel_extent_problem(self.dtype.data, self.extent.data)
            if problem is not None:
                raise VerifyException(f"lowered.arg {self.arg_name.data}: {problem}")

    @staticmethod
    def parse_body(parser: AttrParser) -> KernelArgAttr:
        """``x: read f32`` (the text inside the angle brackets)."""
        name = parser.parse_identifier(" (an operand name)")
        parser.parse_punctuation(":")
        start = parser.pos
        access = parser.parse_identifier(" (read, write or readwrite)")
        if access not in ACCESSES:
            parser.raise_error(
                f"unknown access '{access}' (expected one of {', '.join(ACCESSES)})",
                start,
                parser.pos,
            )
        start = parser.pos
        dtype = parser.parse_identifier(" (a dtype)")
        if dtype not in DTYPES:
            parser.raise_error(
                f"unknown dtype '{dtype}' (expected one of {', '.join(DTYPES)})", start, parser.pos
            )
        extent = ""
        if parser.parse_optional_keyword("extent") is not None:
            extent = parser.parse_str_literal(" (an extent: a dim expression over the params)")
        return KernelArgAttr.make(name, access, dtype, extent)

    def body_text(self) -> str:
        text = f"{self.arg_name.data}: {self.access.data} {self.dtype.data}"
        if self.extent.data:
            text += f' extent "{self.extent.data}"'
        return text

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            arg = cls.parse_body(parser)
        return (arg.arg_name, arg.access, arg.dtype, arg.extent)

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string("<" + self.body_text() + ">")


@irdl_attr_definition
class OriginAttr(ParametrizedAttribute):
    """Where a call comes from: its scope, the graph op, and for fused calls the fusion.

    ``#lowered.origin<scope "layers.0", op "graph.linear">`` for a call a lowering
    made; a fusion keeps the origins of the calls it replaced, in their order:
    ``#lowered.origin<scope "layers.0", fusion "fuse-qkv", of [#lowered.origin<...>,
    ...]>`` (the scope is that of the first replaced call).  The C emitter groups
    canary checks by ``scope`` and prints :attr:`label` as the call's comment.
    """

    name = "lowered.origin"

    scope: StringAttr
    graph_op: StringAttr
    fusion: StringAttr
    parts: ArrayAttr[Attribute]

    @staticmethod
    def make(scope: str, graph_op: str) -> OriginAttr:
        return OriginAttr(_str_attr(scope), _str_attr(graph_op), _str_attr(""), ArrayAttr(()))

    @staticmethod
    def fused(fusion: str, parts: Sequence[OriginAttr]) -> OriginAttr:
        """The origin of a call that replaces calls of origins ``parts`` (first one's scope)."""
        scope = parts[0].scope.data if parts else ""
        return OriginAttr(_str_attr(scope), _str_attr(""), _str_attr(fusion), ArrayAttr(parts))

    @property
    def scope_name(self) -> str:
        return self.scope.data

    @property
    def op_name(self) -> str:
        return self.graph_op.data

    @property
    def fusion_name(self) -> str | None:
        return self.fusion.data or None

    @property
    def replaced(self) -> tuple[OriginAttr, ...]:
        return tuple(p for p in self.parts.data if isinstance(p, OriginAttr))

    @property
    def label(self) -> str:
        """One line for humans: ``layers.0: graph.linear``; fused calls list their parts,
        the scope once per run of equal scopes, and the fusion in brackets:
        ``layers.0: graph.add + layers.1: graph.rmsnorm [fuse-add-rmsnorm]``."""
        if not self.fusion.data:
            return f"{self.scope.data}: {self.graph_op.data}"
        pieces: list[str] = []
        scope: str | None = None
        for part in self.replaced:
            text = part.label
            if part.fusion.data or part.scope.data != scope:
                pieces.append(text)
            else:
                pieces.append(part.graph_op.data)
            scope = part.scope.data
        return " + ".join(pieces) + f" [{self.fusion.data}]"

    def verify(self) -> None:
        if not self.scope.data:
            raise VerifyException("lowered.origin: the scope must not be empty")
        if bool(self.fusion.data) == bool(self.graph_op.data):
            raise VerifyException(
                "lowered.origin: give either an op (a lowered graph op) or a fusion, not "
                f"{'both' if self.fusion.data else 'neither'}"
            )
        if self.fusion.data and not self.replaced:
            raise VerifyException(
                f'lowered.origin: fusion "{self.fusion.data}" lists no replaced origins'
            )
        if len(self.replaced) != len(self.parts.data):
            raise VerifyException("lowered.origin: 'of' holds only #lowered.origin attributes")
        if not self.fusion.data and self.parts.data:
            raise VerifyException("lowered.origin: only a fusion lists replaced origins")

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            parser.parse_keyword("scope")
            scope = parser.parse_str_literal(" (the origin's scope)")
            parser.parse_punctuation(",")
            if parser.parse_optional_keyword("op") is not None:
                graph_op = parser.parse_str_literal(" (the graph op)")
                return (_str_attr(scope), _str_attr(graph_op), _str_attr(""), ArrayAttr(()))
            parser.parse_keyword("fusion", " (expected 'op' or 'fusion')")
            fusion = parser.parse_str_literal(" (the fusion pass)")
            parser.parse_punctuation(",")
            parser.parse_keyword("of")
            parts = parser.parse_comma_separated_list(
                parser.Delimiter.SQUARE, parser.parse_attribute, " (replaced origins)"
            )
        return (_str_attr(scope), _str_attr(""), _str_attr(fusion), ArrayAttr(parts))

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string("<scope ")
        printer.print_string_literal(self.scope.data)
        if not self.fusion.data:
            printer.print_string(", op ")
            printer.print_string_literal(self.graph_op.data)
        else:
            printer.print_string(", fusion ")
            printer.print_string_literal(self.fusion.data)
            printer.print_string(", of [")
            printer.print_list(self.parts.data, printer.print_attribute)
            printer.print_string("]")
        printer.print_string(">")


# --------------------------------------------------------------------------- symbol tables


class _Table:
    __slots__ = ("syms",)

    def __init__(self) -> None:
        self.syms: dict[str, Operation] = {}


_TABLES: weakref.WeakKeyDictionary[Operation, _Table] = weakref.WeakKeyDictionary()


def _symbols_of(block: Block) -> dict[str, Operation]:
    out: dict[str, Operation] = {}
    for op in block.ops:
        name = op.properties.get("sym_name")
        if isinstance(name, StringAttr):
            out.setdefault(name.data, op)
    return out


def _table(container: Operation) -> _Table:
    table = _TABLES.get(container)
    if table is None:
        table = _Table()
        table.syms = _symbols_of(container.regions[0].block)
        _TABLES[container] = table
    return table


def _cached(container: Operation, name: str) -> Operation | None:
    """Symbol ``name`` of ``container`` from the cache, None on a miss (no rebuild)."""
    table = _table(container)
    op = table.syms.get(name)
    if op is None:
        return None
    sym_name = op.properties.get("sym_name")
    if (
        op.parent is container.regions[0].block
        and isinstance(sym_name, StringAttr)
        and sym_name.data == name
    ):
        return op
    # stale entry (op moved, erased or renamed): rebuild this table
    table.syms = _symbols_of(container.regions[0].block)
    return table.syms.get(name)


def _lookup(container: Operation, name: str) -> Operation | None:
    """Symbol ``name`` directly inside ``container`` (cached; rebuilt on a miss)."""
    found = _cached(container, name)
    if found is None:
        _table(container).syms = _symbols_of(container.regions[0].block)
        found = _table(container).syms.get(name)
    return found


def _resolve(op: Operation, name: str) -> Operation | None:
    """A buffer or view named ``name``: in the enclosing program first, then the model.

    Cached per container; tables are rebuilt only when an entry is stale or the name
    is found nowhere (so the common case costs two dict lookups).
    """
    containers: list[Operation] = []
    parent = op.parent_op()
    while parent is not None:
        if isinstance(parent, ProgramOp | LoweredModelOp):
            containers.append(parent)
        parent = parent.parent_op()
    for c in containers:
        found = _cached(c, name)
        if found is not None:
            return found
    for c in containers:
        found = _lookup(c, name)
        if found is not None:
            return found
    return None


def _container_ref(op: Operation | None) -> str:
    if isinstance(op, ProgramOp):
        return f"lowered.program {sym(op.sym_name.data)}"
    if isinstance(op, LoweredModelOp):
        return f"lowered.model {sym(op.model_name.data)}"
    return "its parent"


def _print_attr_dict_items(printer: Printer, items: Mapping[str, Attribute]) -> None:
    if items:
        printer.print_string(" ")
        printer.print_attr_dict(items)


# --------------------------------------------------------------------------- model / program


@irdl_op_definition
class LoweredModelOp(SingleBody, IRDLOperation):
    """The lowered model: global buffers and one ``lowered.program`` per mode.

    ``lowered.model @tiny { lowered.buffer @"w.embed" weight : ... ; lowered.program ... }``

    It is a symbol table (buffers, programs) but deliberately not a symbol itself,
    so that it can sit next to the ``graph.model @tiny`` it was lowered from;
    ``.sym_name`` still returns its name.  Model-level buffers have roles
    weight, kv_cache, grad or optimizer_state; at most one program per mode.
    """

    name = "lowered.model"

    model_name = prop_def(SymbolNameConstraint())
    body = region_def("single_block")

    traits = traits_def(SymbolTable(), NoTerminator())

    custom_directives = DIRECTIVES
    assembly_format = "$model_name attr-dict-with-keyword custom<Body>($body)"

    @staticmethod
    def make(name: str) -> LoweredModelOp:
        return LoweredModelOp.create(
            properties={"model_name": StringAttr(name)}, regions=[Region(Block())]
        )

    @property
    def sym_name(self) -> StringAttr:
        """The model's name (same as the graph.model it came from)."""
        return self.model_name

    def programs(self) -> dict[str, ProgramOp]:
        """Programs by mode."""
        return {op.mode_name: op for op in self.body.block.ops if isinstance(op, ProgramOp)}

    def buffers(self) -> dict[str, BufferOp]:
        """Model-level buffers by name."""
        return {op.buffer_name: op for op in self.body.block.ops if isinstance(op, BufferOp)}

    def verify_(self) -> None:
        where = f"lowered.model {sym(self.model_name.data)}"
        modes: dict[str, str] = {}
        for op in self.body.block.ops:
            if isinstance(op, ProgramOp):
                mode = op.mode.data
                if mode in modes:
                    raise VerifyException(
                        f"{where}: programs {sym(modes[mode])} and {sym(op.sym_name.data)} "
                        f'both have mode "{mode}" (at most one program per mode)'
                    )
                modes[mode] = op.sym_name.data
            elif not isinstance(op, BufferOp | ViewOp | KernelOp):
                raise VerifyException(
                    f"{where}: '{op.name}' is not allowed at model level (only lowered.kernel, "
                    "lowered.buffer, lowered.view, lowered.program)"
                )


@irdl_op_definition
class ProgramOp(SingleBody, IRDLOperation):
    """The kernel calls of one mode, in execution order, with their local buffers.

    ``lowered.program @decode mode "decode" max_context 128 { ... }``

    ``max_context`` bounds ``P + T``.  Local buffers have roles activation, io,
    scratch or grad; local symbols must not shadow model-level ones.
    """

    name = "lowered.program"

    sym_name = prop_def(SymbolNameConstraint())
    mode = prop_def(StringAttr)
    max_context = prop_def(IntegerAttr[I64])
    body = region_def("single_block")

    traits = traits_def(
        SymbolOpInterface(), SymbolTable(), HasParent(LoweredModelOp), NoTerminator()
    )

    custom_directives = DIRECTIVES
    assembly_format = (
        "$sym_name `mode` $mode `max_context` $max_context attr-dict-with-keyword "
        "custom<Body>($body)"
    )

    @staticmethod
    def make(name: str, mode: str, max_context: int) -> ProgramOp:
        return ProgramOp.create(
            properties={
                "sym_name": StringAttr(name),
                "mode": StringAttr(mode),
                "max_context": _i64(max_context),
            },
            regions=[Region(Block())],
        )

    @property
    def mode_name(self) -> str:
        return self.mode.data

    @property
    def max_ctx(self) -> int:
        return self.max_context.value.data

    def calls(self) -> list[CallOp]:
        return [op for op in self.body.block.ops if isinstance(op, CallOp)]

    def verify_(self) -> None:
        where = f"lowered.program {sym(self.sym_name.data)}"
        if self.mode.data not in MODES:
            raise VerifyException(
                f'{where}: unknown mode "{self.mode.data}" (expected {", ".join(MODES)})'
            )
        if self.max_ctx <= 0:
            raise VerifyException(f"{where}: max_context {self.max_ctx} must be positive")
        model = self.parent_op()
        model_syms = _symbols_of(model.body.block) if isinstance(model, LoweredModelOp) else {}
        for op in self.body.block.ops:
            if not isinstance(op, BufferOp | ViewOp | CallOp):
                raise VerifyException(
                    f"{where}: '{op.name}' is not allowed in a program (only lowered.buffer, "
                    "lowered.view, lowered.call)"
                )
            if model_syms and not isinstance(op, CallOp):
                name = op.sym_name.data
                if name in model_syms:
                    raise VerifyException(
                        f"{where}: local {op.name} {sym(name)} shadows a symbol of "
                        f"{_container_ref(model)}"
                    )


# --------------------------------------------------------------------------- buffers / views


@irdl_op_definition
class BufferOp(IRDLOperation):
    """A materialized buffer with a role.

    ``lowered.buffer @"w.layers.0.wq" weight : !lowered.buf<[64, 64], f32>
    {source = "layers.0.wq"}``

    ``source`` names where the contents come from: for weights (required) the
    graph weight with ``{i}`` substituted; other roles may use it freely (e.g.
    ``"input"`` / ``"output"`` on io buffers).  Roles weight, kv_cache and
    optimizer_state live at model level; activation, io and scratch in a program;
    grad in either.
    """

    name = "lowered.buffer"

    sym_name = prop_def(SymbolNameConstraint())
    buffer_role = prop_def(StringAttr)
    buffer_type = prop_def(BufferType)
    source = opt_prop_def(StringAttr)

    traits = traits_def(SymbolOpInterface(), HasParent(LoweredModelOp, ProgramOp))

    irdl_options = (ParsePropInAttrDict(),)
    custom_directives = DIRECTIVES
    assembly_format = (
        "$sym_name custom<BufferRole>($buffer_role) `:` qualified($buffer_type) attr-dict"
    )

    @staticmethod
    def make(name: str, role: str, type: BufferType, *, source: str | None = None) -> BufferOp:
        props: dict[str, Attribute] = {
            "sym_name": StringAttr(name),
            "buffer_role": _str_attr(role),
            "buffer_type": type,
        }
        if source is not None:
            props["source"] = StringAttr(source)
        return BufferOp.create(properties=props)

    @property
    def buffer_name(self) -> str:
        return self.sym_name.data

    @property
    def role(self) -> str:
        return self.buffer_role.data

    @property
    def source_name(self) -> str | None:
        return self.source.data if self.source is not None else None

    def verify_(self) -> None:
        where = f"lowered.buffer {sym(self.buffer_name)}"
        role = self.role
        if role not in ROLES:
            raise VerifyException(
                f"{where}: unknown role '{role}' (expected one of {', '.join(ROLES)})"
            )
        parent = self.parent_op()
        if isinstance(parent, LoweredModelOp) and role not in GLOBAL_ROLES:
            raise VerifyException(
                f"{where}: role {role} belongs inside a lowered.program, not at model level"
            )
        if isinstance(parent, ProgramOp) and role not in LOCAL_ROLES:
            raise VerifyException(
                f"{where}: role {role} belongs at lowered.model level, not inside a program"
            )
        if role == "weight" and self.source is None:
            raise VerifyException(f"{where}: a weight buffer needs a source")


@irdl_op_definition
class ViewOp(ViewOf, Placed, IRDLOperation):
    """A typed alias of part of a root buffer, at a byte offset.

    ``lowered.view @"prefill.0.k" of @"prefill.0.qkv" offset 1024 : !lowered.buf<[4, 32], f32>``

    The root is a ``lowered.buffer`` (not a view) of the program or the model;
    ``0 <= offset`` and ``offset + view bytes <= root bytes``.

    A view of a program may add a row offset known only at run time
    (``ckir.dialects.row_offset``): ``offset 0 + P * 128`` starts at root row ``P``
    (rows of 128 bytes, the root's row), where ``--plan-views`` puts the k / v rows an
    attention layer appends to its KV cache:

    ``lowered.view @"decode.layers.0.k" of @"kv.layers.0.k" offset 0 + P * 128 :
    !lowered.buf<[1, 32], f32>``

    The row size must be the root's (its bytes over its first dim), the view whole
    rows, and it must fit in the root at ``P = 0``; at run time the calls touch rows
    ``P .. P+T-1``, which the entry points keep inside the root (``P + T <=
    max_context``).
    """

    name = "lowered.view"

    sym_name = prop_def(SymbolNameConstraint())
    root = prop_def(SymbolRefAttr)
    offset = prop_def(IntegerAttr[I64])
    rows = opt_prop_def(ArrayAttr)
    view_type = prop_def(BufferType)

    traits = traits_def(SymbolOpInterface(), HasParent(LoweredModelOp, ProgramOp))

    custom_directives = (RowOffset,)
    assembly_format = (
        "$sym_name `of` $root `offset` $offset custom<RowOffset>($rows) attr-dict `:` "
        "qualified($view_type)"
    )

    @staticmethod
    def make(
        name: str,
        root: str,
        offset_bytes: int,
        type: BufferType,
        rows: tuple[str, int] | None = None,
    ) -> ViewOp:
        props: dict[str, Attribute] = {
            "sym_name": StringAttr(name),
            "root": _ref(root),
            "offset": _i64(offset_bytes),
            "view_type": type,
        }
        if rows is not None:
            props["rows"] = make_rows(*rows)
        return ViewOp.create(properties=props)

    @property
    def buffer_type(self) -> BufferType:
        return self.view_type

    @property
    def row_offset(self) -> tuple[str, int] | None:
        """``(run-time symbol, bytes per row)`` of a run-time row offset, or None."""
        return row_offset(self.rows)

    def verify_(self) -> None:
        where = f"lowered.view {sym(self.view_name)}"
        if self.offset_bytes < 0:
            raise VerifyException(f"{where}: offset {self.offset_bytes} is negative")
        problem = rows_problem(self.rows)
        if problem is not None:
            raise VerifyException(f"{where}: {problem}")
        if self.rows is not None and not isinstance(self.parent_op(), ProgramOp | None):
            raise VerifyException(
                f"{where}: a run-time row offset belongs to a view of a lowered.program "
                "(the position is the program call's)"
            )
        root = _resolve(self, self.root_name)
        if root is None:
            if self.parent_op() is None:
                return
            raise VerifyException(f"{where}: root {sym(self.root_name)} is not declared")
        if isinstance(root, ViewOp):
            raise VerifyException(
                f"{where}: root {sym(self.root_name)} is a view; views alias a buffer"
            )
        if not isinstance(root, BufferOp):
            raise VerifyException(
                f"{where}: root {sym(self.root_name)} is a {root.name}, not a lowered.buffer"
            )
        end = self.offset_bytes + self.view_type.byte_size
        if end > root.buffer_type.byte_size:
            raise VerifyException(
                f"{where}: bytes [{self.offset_bytes}, {end}) exceed root "
                f"{sym(self.root_name)} of {root.buffer_type.byte_size} bytes"
            )
        rows = self.row_offset
        if rows is not None:
            _verify_rows(where, self, root, rows[1])


def _verify_rows(where: str, view: ViewOp, root: BufferOp, row_bytes: int) -> None:
    """A run-time row offset counts rows of ``root`` and ``view`` holds whole rows."""
    rtype = root.buffer_type
    first = rtype.shape_ints[0] if rtype.shape_ints else 0
    root_row = rtype.byte_size // first if first and rtype.byte_size % first == 0 else 0
    if row_bytes != root_row:
        raise VerifyException(
            f"{where}: row offset counts rows of {row_bytes} bytes but a row of root "
            f"{sym(view.root_name)} ({_describe_type(rtype)}) has {root_row}"
        )
    if view.view_type.byte_size % row_bytes or view.offset_bytes % row_bytes:
        raise VerifyException(
            f"{where}: a view at a run-time row holds whole rows of {row_bytes} bytes "
            f"(offset {view.offset_bytes}, {view.view_type.byte_size} bytes)"
        )


def _describe_type(ty: BufferType) -> str:
    return f"[{', '.join(str(d) for d in ty.shape_ints)}] {ty.dtype_name}"


# --------------------------------------------------------------------------- kernel declarations

_SPECS: weakref.WeakKeyDictionary[Operation, tuple[tuple[Attribute, ...], KernelSpec]] = (
    weakref.WeakKeyDictionary()
)


def _param_type_name(attr: Attribute) -> str | None:
    return next((k for k, v in IR_PARAM_TYPES.items() if v == attr), None)


@irdl_op_definition
class KernelOp(IRDLOperation):
    """The declaration of a C kernel that calls of this model name.

    ``lowered.kernel @gemv_f32 op "linear" c "ckir_gemv_f32" modes ["decode"]
    (x: read f32, w: read f32, y: write f32) params (N: i64, K: i64)
    constraints ["N >= 1", "K >= 1"]``

    Everything a pass needs to know about a kernel: the op kind it implements,
    its C name, the modes it runs in, its buffer operands in C argument order
    with their access and dtype, its scalar parameters (``i64`` or ``f32``) and
    the constraints over them.  Lowering copies it from the kernel registry when
    it selects the kernel; verifiers, fusion, the cost model and the C emitter
    read it from here.  A call binds its inputs then its outputs to the operands
    in order, so read operands come first.
    """

    name = "lowered.kernel"

    sym_name = prop_def(SymbolNameConstraint())
    kind = prop_def(StringAttr)
    c_name = prop_def(StringAttr)
    modes = prop_def(ArrayAttr[StringAttr])
    args = prop_def(ArrayAttr[KernelArgAttr])
    params = prop_def(DictionaryAttr)
    constraints = prop_def(ArrayAttr[StringAttr])

    traits = traits_def(SymbolOpInterface(), HasParent(LoweredModelOp))

    @staticmethod
    def from_spec(spec: KernelSpec) -> KernelOp:
        """The declaration of a registry kernel."""
        return KernelOp.create(
            properties={
                "sym_name": StringAttr(spec.name),
                "kind": _str_attr(spec.op),
                "c_name": StringAttr(spec.c_name),
                "modes": ArrayAttr(tuple(_str_attr(m) for m in spec.modes)),
                "args": ArrayAttr(
                    tuple(
                        KernelArgAttr.make(o.name, o.access, o.dtype, o.extent)
                        for o in spec.operands
                    )
                ),
                "params": DictionaryAttr({p.name: IR_PARAM_TYPES[p.type] for p in spec.params}),
                "constraints": ArrayAttr(tuple(StringAttr(c) for c in spec.constraints)),
            }
        )

    @property
    def kernel_name(self) -> str:
        return self.sym_name.data

    @property
    def kind_name(self) -> str:
        """The op kind the kernel implements (``linear``, ``add``, ``fused_qkv``, ...)."""
        return self.kind.data

    @property
    def arg_list(self) -> tuple[KernelArgAttr, ...]:
        return self.args.data

    def inputs(self) -> tuple[KernelArgAttr, ...]:
        """The operands a call passes as inputs (access ``read``)."""
        return tuple(a for a in self.args.data if not a.writes)

    def outputs(self) -> tuple[KernelArgAttr, ...]:
        """The operands a call passes as outputs (access ``write`` or ``readwrite``)."""
        return tuple(a for a in self.args.data if a.writes)

    def param_types(self) -> list[tuple[str, str]]:
        """(name, ``"i64"`` or ``"f32"``) of every scalar parameter, in C argument order."""
        return [(k, _param_type_name(v) or "?") for k, v in self.params.data.items()]

    def spec(self) -> KernelSpec:
        """The declaration as a registry spec (cached): constraint checks, C signature."""
        key = tuple(self.properties.values())
        cached = _SPECS.get(self)
        if (
            cached is not None
            and len(cached[0]) == len(key)
            and all(a is b for a, b in zip(cached[0], key, strict=True))
        ):
            return cached[1]
        spec = KernelSpec(
            name=self.kernel_name,
            c_name=self.c_name.data,
            op=self.kind.data,
            modes=tuple(m.data for m in self.modes.data),
            operands=tuple(
                OperandSpec(a.name_text, a.dtype_name, a.access_text, a.extent.data)
                for a in self.args.data
            ),
            params=tuple(ParamSpec(k, t) for k, t in self.param_types()),
            constraints=tuple(c.data for c in self.constraints.data),
            doc="",
        )
        _SPECS[self] = (key, spec)
        return spec

    def verify_(self) -> None:
        where = f"lowered.kernel {sym(self.kernel_name)}"
        if _BARE_IDENT.fullmatch(self.c_name.data) is None:
            raise VerifyException(f"{where}: c name '{self.c_name.data}' is not a C identifier")
        if not self.kind.data:
            raise VerifyException(f"{where}: the op kind must not be empty")
        modes = [m.data for m in self.modes.data]
        if not modes or len(set(modes)) != len(modes) or any(m not in MODES for m in modes):
            raise VerifyException(
                f"{where}: modes must be distinct and drawn from {', '.join(MODES)}, "
                f"got [{', '.join(modes)}]"
            )
        if not self.args.data:
            raise VerifyException(f"{where}: a kernel needs at least one buffer operand")
        names = [a.name_text for a in self.args.data]
        for k, v in self.params.data.items():
            if _BARE_IDENT.fullmatch(k) is None:
                raise VerifyException(f"{where}: parameter '{k}' is not an identifier")
            if _param_type_name(v) is None:
                raise VerifyException(
                    f"{where}: parameter {k} has type {v}, expected one of {', '.join(PARAM_TYPES)}"
                )
            names.append(k)
        integers = {k for k, v in self.params.data.items() if v == i64}
        for a in self.args.data:
            if a.extent.data and not dim_symbols(a.extent.data) <= integers:
                bad = sorted(dim_symbols(a.extent.data) - integers)[0]
                raise VerifyException(
                    f"{where}: operand {a.name_text}: extent '{a.extent.data}' names {bad}, "
                    "which is not an i64 parameter"
                )
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise VerifyException(
                f"{where}: duplicate operand/parameter name(s) {', '.join(dupes)}"
            )
        params = frozenset(self.params.data)
        for c in self.constraints.data:
            problem = constraint_problem(c.data, params)
            if problem is not None:
                raise VerifyException(f"{where}: bad constraint: {problem}")

    # Hand-written parse/print (one of the three left in the dialects): the C
    # signature reads as one, ``(x: read f32 extent "T*E", ...) params (K: i64, ...)``,
    # a list of #lowered.arg bodies and a name -> scalar type map that a declarative
    # format would print as nested qualified attributes and type dictionaries.
    @classmethod
    def parse(cls, parser: Parser) -> KernelOp:
        name = parser.parse_symbol_name()
        parser.parse_keyword("op")
        kind = parser.parse_str_literal(" (the op kind)")
        parser.parse_keyword("c")
        c_name = parser.parse_str_literal(" (the C function name)")
        parser.parse_keyword("modes")
        modes = parser.parse_comma_separated_list(
            parser.Delimiter.SQUARE, parser.parse_str_literal, " (modes)"
        )
        args = parser.parse_comma_separated_list(
            parser.Delimiter.PAREN, lambda: KernelArgAttr.parse_body(parser), " (operands)"
        )
        parser.parse_keyword("params")

        def param() -> tuple[str, Attribute]:
            pname = parser.parse_identifier(" (a parameter name)")
            parser.parse_punctuation(":")
            start = parser.pos
            ptype = parser.parse_identifier(" (i64 or f32)")
            if ptype not in IR_PARAM_TYPES:
                parser.raise_error(
                    f"unknown parameter type '{ptype}' (expected i64 or f32)", start, parser.pos
                )
            return pname, IR_PARAM_TYPES[ptype]

        params = parser.parse_comma_separated_list(parser.Delimiter.PAREN, param, " (parameters)")
        constraints: list[str] = []
        if parser.parse_optional_keyword("constraints") is not None:
            constraints = parser.parse_comma_separated_list(
                parser.Delimiter.SQUARE, parser.parse_str_literal, " (constraints)"
            )
        attrs = parser.parse_optional_attr_dict_with_keyword()
        return cls.create(
            properties={
                "sym_name": name,
                "kind": _str_attr(kind),
                "c_name": StringAttr(c_name),
                "modes": ArrayAttr(tuple(_str_attr(m) for m in modes)),
                "args": ArrayAttr(tuple(args)),
                "params": DictionaryAttr(dict(params)),
                "constraints": ArrayAttr(tuple(StringAttr(c) for c in constraints)),
            },
            attributes=dict(attrs.data) if attrs else {},
        )

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_symbol_name(self.kernel_name)
        printer.print_string(" op ")
        printer.print_string_literal(self.kind.data)
        printer.print_string(" c ")
        printer.print_string_literal(self.c_name.data)
        printer.print_string(" modes [")
        printer.print_list(self.modes.data, lambda m: printer.print_string_literal(m.data))
        printer.print_string("] (")
        printer.print_string(", ".join(a.body_text() for a in self.args.data))
        printer.print_string(") params (")
        printer.print_string(
            ", ".join(f"{k}: {_param_type_name(v) or v}" for k, v in self.params.data.items())
        )
        printer.print_string(")")
        if self.constraints.data:
            printer.print_string(" constraints [")
            printer.print_list(
                self.constraints.data, lambda c: printer.print_string_literal(c.data)
            )
            printer.print_string("]")
        if self.attributes:
            printer.print_op_attributes(self.attributes, print_keyword=True)


# --------------------------------------------------------------------------- calls


def _param_attr(value: int | float | str | tuple[float, ...] | Attribute) -> Attribute:
    if isinstance(value, Attribute):
        return value
    if isinstance(value, tuple):
        return DenseArrayBase.from_list(f32, [float(v) for v in value])
    if isinstance(value, bool):
        return _i64(int(value))
    if isinstance(value, int):
        return _i64(value)
    if isinstance(value, float):
        return FloatAttr(value, f64)
    if isinstance(value, str):
        return RuntimeSymAttr.make(value)
    raise ValueError(f"lowered.call: cannot make a parameter from {value!r}")


def _param_value(attr: Attribute) -> int | float | str | tuple[float, ...]:
    if isinstance(attr, IntegerAttr):
        return attr.value.data
    if isinstance(attr, FloatAttr):
        return attr.value.data
    if isinstance(attr, RuntimeSymAttr):
        return attr.symbol.data
    if isinstance(attr, DenseArrayBase) and attr.elt_type == f32:
        return tuple(float(v) for v in attr.get_values())
    raise VerifyException(f"lowered.call: unsupported parameter value {attr}")


def _parse_param_value(parser: Parser) -> Attribute:
    """``64 : i64`` / ``-5.0e-01 : f64`` with cached attributes; anything else generically."""
    value = parser.parse_optional_number()  # either sign, integer or float
    if isinstance(value, int):
        parser.parse_punctuation(":")
        ty = parser.parse_type()
        return _i64(value) if ty == i64 else IntegerAttr(value, ty)
    if value is not None:
        parser.parse_punctuation(":")
        return FloatAttr(value, parser.parse_type())
    return parser.parse_attribute()


def _parse_params(parser: Parser) -> dict[str, Attribute]:
    """The ``{K = 64 : i64, M = #lowered.rt<T>, ...}`` dictionary of a call (optional)."""
    entries = parse_keyed_entries(
        parser,
        lambda: parser.parse_identifier_or_str_literal(" (a parameter name)"),
        lambda: _parse_param_value(parser),
        lambda key: f"duplicate parameter '{key}'",
        " (call parameters)",
    )
    return entries or {}


@irdl_op_definition
class CallOp(IRDLOperation):
    """A call of a declared kernel, destination-passing, with resolved parameters.

    ``lowered.call @gemm_bias_f32(@x, @w, @b) -> (@y) {M = #lowered.rt<T>, N = 64 : i64,
    K = 64 : i64, origin = #lowered.origin<scope "layers.0", op "graph.linear">}``

    ``@gemm_bias_f32`` is a ``lowered.kernel`` of the enclosing model.  The inputs
    then the outputs bind, in order, to the declaration's operands: inputs to
    ``read`` operands, outputs to ``write``/``readwrite`` ones, with equal dtypes.
    Parameters are ``i64`` integers, floats, or run-time scalars
    (``#lowered.rt<..>``), exactly the declaration's, and its constraints hold.
    The optional ``origin`` (where the call comes from) prints in the same
    dictionary, so ``origin`` cannot be a parameter name.
    """

    name = "lowered.call"

    kernel = prop_def(SymbolRefAttr)
    ins = prop_def(ArrayAttr[SymbolRefAttr])
    outs = prop_def(ArrayAttr[SymbolRefAttr])
    params = prop_def(DictionaryAttr)
    origin = opt_prop_def(OriginAttr)

    traits = traits_def(HasParent(ProgramOp))

    @staticmethod
    def make(
        kernel: str,
        ins: Sequence[str],
        outs: Sequence[str],
        params: Mapping[str, int | float | str | tuple[float, ...]],
        *,
        origin: OriginAttr | None = None,
    ) -> CallOp:
        props: dict[str, Attribute] = {
            "kernel": _ref(kernel),
            "ins": ArrayAttr(tuple(_ref(n) for n in ins)),
            "outs": ArrayAttr(tuple(_ref(n) for n in outs)),
            "params": DictionaryAttr({k: _param_attr(v) for k, v in params.items()}),
        }
        if origin is not None:
            props["origin"] = origin
        return CallOp.create(properties=props)

    @property
    def kernel_name(self) -> str:
        return self.kernel.root_reference.data

    @property
    def in_names(self) -> tuple[str, ...]:
        return tuple(r.root_reference.data for r in self.ins.data)

    @property
    def out_names(self) -> tuple[str, ...]:
        return tuple(r.root_reference.data for r in self.outs.data)

    @property
    def param_values(self) -> dict[str, int | float | str | tuple[float, ...]]:
        """Parameters as Python values; a ``str`` is a run-time symbol (``"T"``, ``"T*64"``),
        a tuple an ``f32s`` table."""
        return {k: _param_value(v) for k, v in self.params.data.items()}

    @property
    def scope_name(self) -> str:
        """The scope of the call's origin (``"layers.3"``), ``""`` without one."""
        return self.origin.scope_name if self.origin is not None else ""

    def declaration(self) -> KernelOp | None:
        """The ``lowered.kernel`` this call names, from the enclosing model (None if absent)."""
        program = self.parent_op()
        model = program.parent_op() if program is not None else None
        if not isinstance(model, LoweredModelOp):
            return None
        found = _lookup(model, self.kernel_name)
        return found if isinstance(found, KernelOp) else None

    def bindings(self, decl: KernelOp) -> list[tuple[KernelArgAttr, str]]:
        """(operand, buffer symbol) pairs: the inputs then the outputs, in operand order."""
        return list(zip(decl.arg_list, (*self.in_names, *self.out_names), strict=True))

    def verify_(self) -> None:
        kernel = self.kernel_name
        where = f"lowered.call {sym(kernel)}"
        for k, v in self.params.data.items():
            if k == "origin":
                raise VerifyException(
                    f"{where}: 'origin' is reserved for the call's origin, not a parameter"
                )
            f32_table = isinstance(v, DenseArrayBase) and v.elt_type == f32
            if not (isinstance(v, IntegerAttr | FloatAttr | RuntimeSymAttr) or f32_table):
                raise VerifyException(
                    f"{where}: parameter {k} = {v} must be an integer, a float, an "
                    "array<f32: ...> or a #lowered.rt<..> run-time symbol"
                )
        program = self.parent_op()
        if program is None:
            return
        types: dict[str, BufferType] = {}
        for label, names in (("input", self.in_names), ("output", self.out_names)):
            for name in names:
                target = _resolve(self, name)
                if target is None:
                    raise VerifyException(
                        f"{where}: {label} {sym(name)} is not a buffer or view of "
                        f"{_container_ref(program)} or its model"
                    )
                if not isinstance(target, BufferOp | ViewOp):
                    raise VerifyException(
                        f"{where}: {label} {sym(name)} is a {target.name}, not a buffer or view"
                    )
                types[name] = target.buffer_type
        model = program.parent_op()
        if not isinstance(model, LoweredModelOp):
            return
        decl = _lookup(model, kernel)
        if not isinstance(decl, KernelOp):
            what = "is not declared" if decl is None else f"names a {decl.name}"
            raise VerifyException(
                f"{where}: the kernel {what} in {_container_ref(model)} "
                "(expected a lowered.kernel declaration)"
            )
        self._verify_against(decl, types, program, where)

    def _verify_against(
        self, decl: KernelOp, types: Mapping[str, BufferType], program: Operation, where: str
    ) -> None:
        spec_ins, spec_outs = decl.inputs(), decl.outputs()
        if len(self.in_names) + len(self.out_names) != len(decl.arg_list):
            raise VerifyException(
                f"{where}: takes {len(spec_ins)} input(s) and {len(spec_outs)} output(s) "
                f"({', '.join(a.name_text for a in spec_ins)} -> "
                f"{', '.join(a.name_text for a in spec_outs)}), got {len(self.in_names)} and "
                f"{len(self.out_names)}"
            )
        for k, (arg, name) in enumerate(self.bindings(decl)):
            is_out = k >= len(self.in_names)
            if is_out and not arg.writes:
                raise VerifyException(
                    f"{where}: output {sym(name)} is bound to operand {arg.name_text}, "
                    "which the kernel only reads"
                )
            if not is_out and arg.writes:
                raise VerifyException(
                    f"{where}: input {sym(name)} is bound to operand {arg.name_text}, "
                    f"which the kernel writes ({arg.access_text}); pass it as an output"
                )
            dtype = types[name].dtype_name
            if dtype != arg.dtype_name:
                raise VerifyException(
                    f"{where}: operand {arg.name_text} = {sym(name)} has dtype "
                    f"{dtype}, the kernel expects {arg.dtype_name}"
                )
        expected = list(decl.params.data)
        got = list(self.params.data)
        if sorted(expected) != sorted(got):
            missing = sorted(set(expected) - set(got))
            extra = sorted(set(got) - set(expected))
            parts = []
            if missing:
                parts.append(f"missing {', '.join(missing)}")
            if extra:
                parts.append(f"unknown {', '.join(extra)}")
            raise VerifyException(
                f"{where}: parameters do not match the declaration ({'; '.join(parts)}); "
                f"expected {', '.join(expected)}"
            )
        values = self.param_values
        for pname, ptype in decl.params.data.items():
            value = values[pname]
            if isinstance(value, str):
                rt_type = RUNTIME_SYMBOL_TYPES[value.partition("*")[0]]
                if _param_type_name(ptype) != rt_type:
                    raise VerifyException(
                        f"{where}: parameter {pname} is {_param_type_name(ptype)}, the run-time "
                        f"symbol {value} is {rt_type}"
                    )
            elif ptype == i64 and not isinstance(self.params.data[pname], IntegerAttr):
                raise VerifyException(f"{where}: parameter {pname} must be an i64 integer")
            elif (ptype == IR_PARAM_TYPES["f32s"]) != isinstance(value, tuple):
                raise VerifyException(
                    f"{where}: parameter {pname} is {_param_type_name(ptype)}; "
                    f"{'an array<f32: ...>' if isinstance(value, tuple) else 'a scalar'} "
                    "does not fit it"
                )
        concrete = {
            k: v for k, v in values.items() if not isinstance(v, str) and not isinstance(v, tuple)
        }
        # partial: constraints over run-time symbols are checked at run time
        for problem in decl.spec().check(concrete, partial=True):
            prefix = f"{decl.kernel_name}: "
            text = problem[len(prefix) :] if problem.startswith(prefix) else problem
            raise VerifyException(f"{where}: {text}")
        if isinstance(program, ProgramOp):
            self._verify_extents(decl, types, program, where)
        modes = [m.data for m in decl.modes.data]
        if isinstance(program, ProgramOp) and program.mode_name not in modes:
            raise VerifyException(
                f'{where}: kernel is not available in mode "{program.mode_name}" '
                f"(modes: {', '.join(modes)})"
            )

    def largest_params(self, program: ProgramOp) -> dict[str, int]:
        """The integer parameters, run-time ones at their largest in ``program``.

        ``T`` (tokens in this call) is at most ``max_context`` in prefill and 1 in
        decode; ``P + T`` is at most ``max_context``, so ``P`` is taken as
        ``max_context - T``.  Float parameters are left out.
        """
        most = program.max_ctx
        tokens = 1 if program.mode_name == "decode" else most
        runtime = {TOKENS: tokens, POSITION: most - tokens, CONTEXT: most}
        out: dict[str, int] = {}
        for k, v in self.param_values.items():
            if isinstance(v, str):
                if v not in runtime and "*" not in v:
                    continue  # step, lr: no extent depends on them
                base, _, factor = v.partition("*")
                out[k] = runtime[base] * (int(factor) if factor else 1)
            elif isinstance(self.params.data[k], IntegerAttr):
                out[k] = int(v)
        return out

    def _verify_extents(
        self, decl: KernelOp, types: Mapping[str, BufferType], program: ProgramOp, where: str
    ) -> None:
        """Every buffer holds the elements its operand's declared extent may touch.

        Panel dtypes (``f32p``, ``bf16p``, ``q8_0p``, ``q4_1p``) count stored values, padding rows
        included: the extent ``rows*cols`` touches ``ceil(rows/32)*32*cols`` of them.
        """
        env: dict[str, int] | None = None
        for arg, name in self.bindings(decl):
            extent = arg.extent_text
            if extent is None:
                continue
            env = env if env is not None else self.largest_params(program)
            try:
                need = extent_values(arg.dtype_name, extent, env)
            except (KeyError, ValueError, ZeroDivisionError) as err:
                raise VerifyException(
                    f'{where}: operand {arg.name_text}: cannot evaluate extent "{extent}": {err}'
                ) from None
            have = types[name].stored_values
            if need > have:
                used = ", ".join(f"{s}={env[s]}" for s in sorted(dim_symbols(extent)))
                what = "values (whole panels)" if arg.dtype_name in PANEL_DTYPES else "elements"
                raise VerifyException(
                    f"{where}: operand {arg.name_text} = {sym(name)} holds {have} {what}, "
                    f'but the kernel may access {need} (extent "{extent}" at {used}; '
                    "run-time values at their largest)"
                )

    # Hand-written parse/print (one of the three left in the dialects): the most
    # numerous op (thousands per model, parsed on every build), written as a call,
    # ``@kernel(@in, ...) -> (@out, ...) {K = 64 : i64, origin = ...}``, whose one
    # dictionary mixes the call's parameters (properties keyed by name) with its
    # origin; the C emitter also prints it without the origin (``with_origin``).
    @classmethod
    def parse(cls, parser: Parser) -> CallOp:
        kernel = parser.parse_symbol_name()

        def sym_list() -> ArrayAttr[SymbolRefAttr]:
            names = parser.parse_comma_separated_list(
                parser.Delimiter.PAREN, parser.parse_symbol_name, " (buffer symbols)"
            )
            return ArrayAttr(tuple(_ref(n) for n in names))

        ins = sym_list()
        parser.parse_punctuation("->")
        outs = sym_list()
        entries = _parse_params(parser)
        origin = entries.pop("origin", None)
        attrs = parser.parse_optional_attr_dict_with_keyword()
        props: dict[str, Attribute] = {
            "kernel": _ref(kernel),
            "ins": ins,
            "outs": outs,
            "params": DictionaryAttr(entries),
        }
        if origin is not None:
            props["origin"] = origin
        return cls.create(properties=props, attributes=dict(attrs.data) if attrs else {})

    def print(self, printer: Printer, *, with_origin: bool = True) -> None:
        printer.print_string(" ")
        printer.print_symbol_name(self.kernel_name)
        printer.print_string("(")
        printer.print_list(self.in_names, printer.print_symbol_name)
        printer.print_string(") -> (")
        printer.print_list(self.out_names, printer.print_symbol_name)
        printer.print_string(")")
        items: dict[str, Attribute] = dict(self.params.data)
        if self.origin is not None and with_origin:
            items["origin"] = self.origin
        _print_attr_dict_items(printer, items)
        if self.attributes:
            printer.print_op_attributes(self.attributes, print_keyword=True)


Lowered = Dialect(
    "lowered",
    [LoweredModelOp, ProgramOp, BufferOp, ViewOp, KernelOp, CallOp],
    [BufferType, RuntimeSymAttr, KernelArgAttr, OriginAttr, PhaseAttr],
)
