"""The ``kernel`` dialect: single compute kernels whose schedule hints shape the generated C.

A ``kernel.func`` is one callable kernel: named inputs (``kernel.input``), a few
kernel ops over them and the results it returns (``kernel.output``).  Shapes are
the graph dialect's symbolic tensor type (``!graph.tensor<[M, K], f32>``, dims from
``dialects/dims.py``); the symbols (``M``, ``N``, ``K``) are bound when the kernel is
validated or called.  Every compute op may carry a ``#kernel.schedule`` whose
hints (tiles, vector width, unroll, loop order) the C generator of
``ckir/backend/kernel_c.py`` follows; they change the code, never the numbers.

Example::

    kernel.func @mm {
      %a = kernel.input "A" : !graph.tensor<[M, K], f32>
      %b = kernel.input "B" : !graph.tensor<[K, N], f32>
      %c = kernel.matmul_relu %a, %b {schedule = #kernel.schedule<tile_m = 32,
          tile_n = 64, vectorize = 16, unroll = 2, order = nmk>}
          : (!graph.tensor<[M, K], f32>, !graph.tensor<[K, N], f32>) -> !graph.tensor<[M, N], f32>
      kernel.output %c : !graph.tensor<[M, N], f32>
    }

Reached from graph IR by ``--lower-kernel`` (``graph.matmul`` / ``graph.relu`` /
``graph.fused_matmul_relu``); ``--fuse-kernel-matmul-relu`` fuses a matmul whose
only use is a relu.  See docs/kernel-ir.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import IntAttr, NoneAttr, StringAttr, SymbolNameConstraint
from xdsl.ir import Attribute, Block, Dialect, ParametrizedAttribute, Region
from xdsl.irdl import (
    IRDLOperation,
    ParsePropInAttrDict,
    irdl_attr_definition,
    irdl_op_definition,
    operand_def,
    opt_operand_def,
    opt_prop_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
)
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.traits import (
    HasParent,
    IsolatedFromAbove,
    IsTerminator,
    NoTerminator,
    SymbolOpInterface,
)
from xdsl.utils.exceptions import VerifyException

from ckir.dialects.common import sym
from ckir.dialects.dims import dims_equal, dims_text, is_identifier
from ckir.dialects.graph import TensorType
from ckir.dialects.syntax import DIRECTIVES, parse_schedule_fields

__all__ = [
    "ACTIVATIONS",
    "KERNEL_OPS",
    "LOOP_ORDERS",
    "SCHEDULE_FIELDS",
    "FuncOp",
    "InputOp",
    "Kernel",
    "KernelComputeOp",
    "LinearOp",
    "MatmulOp",
    "MatmulReluOp",
    "OutputOp",
    "ReluOp",
    "ScheduleAttr",
]

#: the fields of ``#kernel.schedule``, in printing order
SCHEDULE_FIELDS: tuple[str, ...] = (
    "tile_m", "tile_n", "tile_k", "vectorize", "unroll", "order", "mr",
)  # fmt: skip
#: the vector widths ``vectorize`` may ask for (lanes of f32)
VECTOR_WIDTHS: tuple[int, ...] = (1, 2, 4, 8, 16)
#: the largest ``unroll`` (vector accumulators per row of a tile)
MAX_UNROLL = 16
#: the most rows ``mr`` a matmul's register block may have
MAX_MR = 16
#: the loop orders of the three tile loops (outermost first)
LOOP_ORDERS: tuple[str, ...] = ("mnk", "mkn", "nmk", "nkm", "kmn", "knm")
#: the epilogues of ``kernel.linear``
ACTIVATIONS: tuple[str, ...] = ("none", "relu", "silu", "gelu")


def _int_or_none(value: int | None) -> IntAttr | NoneAttr:
    return NoneAttr() if value is None else IntAttr(value)


@irdl_attr_definition
class ScheduleAttr(ParametrizedAttribute):
    """Schedule hints of a kernel op; every field is optional.

    ``#kernel.schedule<tile_m = 32, tile_n = 64, tile_k = 128, vectorize = 16,
    unroll = 2, order = mnk, mr = 6>``

    ``tile_*`` are positive, ``vectorize`` is one of 1, 2, 4, 8, 16 lanes,
    ``unroll`` is 1..16 vector accumulators, ``order`` a permutation of ``m``,
    ``n``, ``k`` (the tile loops, outermost first), ``mr`` 1..16 rows of a
    matmul's register block (``mr x (vectorize * unroll)`` accumulators).
    """

    name = "kernel.schedule"

    tile_m: IntAttr | NoneAttr
    tile_n: IntAttr | NoneAttr
    tile_k: IntAttr | NoneAttr
    vectorize: IntAttr | NoneAttr
    unroll: IntAttr | NoneAttr
    order: StringAttr | NoneAttr
    mr: IntAttr | NoneAttr

    @staticmethod
    def make(
        tile_m: int | None = None,
        tile_n: int | None = None,
        tile_k: int | None = None,
        vectorize: int | None = None,
        unroll: int | None = None,
        order: str | None = None,
        mr: int | None = None,
    ) -> ScheduleAttr:
        """Build a schedule from the fields that are set."""
        ints = (tile_m, tile_n, tile_k, vectorize, unroll)
        o: StringAttr | NoneAttr = NoneAttr() if order is None else StringAttr(order)
        return ScheduleAttr(*(_int_or_none(v) for v in ints), o, _int_or_none(mr))

    @staticmethod
    def from_values(values: dict[str, int | str]) -> ScheduleAttr:
        """Build a schedule from ``values()``-style fields."""
        ints = {k: v for k, v in values.items() if k != "order"}
        order = values.get("order")
        return ScheduleAttr.make(**ints, order=None if order is None else str(order))  # type: ignore[arg-type]

    def values(self) -> dict[str, int | str]:
        """The fields that are set, e.g. ``{"tile_m": 32, "order": "mnk"}``."""
        out: dict[str, int | str] = {}
        for field, attr in zip(SCHEDULE_FIELDS, self.parameters, strict=True):
            if isinstance(attr, IntAttr | StringAttr):
                out[field] = attr.data
        return out

    def verify(self) -> None:
        for field, value in self.values().items():
            problem = field_problem(field, value)
            if problem:
                raise VerifyException(f"kernel.schedule: {problem}")

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        def read(key: str) -> int | str:
            if key == "order":
                return parser.parse_identifier(" (a loop order such as mnk)")
            return parser.parse_integer(allow_boolean=False)

        found = parse_schedule_fields(
            parser, "kernel.schedule", SCHEDULE_FIELDS, read, field_problem
        )
        return tuple(ScheduleAttr.from_values(found).parameters)

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string("<" + ", ".join(f"{k} = {v}" for k, v in self.values().items()) + ">")


def field_problem(field: str, value: int | str) -> str | None:
    """Why ``field = value`` is not a valid schedule hint, or None when it is."""
    if field == "order":
        if value not in LOOP_ORDERS:
            return f"order = {value} must be a permutation of m, n, k ({', '.join(LOOP_ORDERS)})"
        return None
    if not isinstance(value, int) or value <= 0:
        return f"{field} = {value} must be positive"
    if field == "vectorize" and value not in VECTOR_WIDTHS:
        return f"vectorize = {value} must be one of {', '.join(map(str, VECTOR_WIDTHS))}"
    if field == "unroll" and value > MAX_UNROLL:
        return f"unroll = {value} must be at most {MAX_UNROLL}"
    if field == "mr" and value > MAX_MR:
        return f"mr = {value} must be at most {MAX_MR}"
    return None


# --------------------------------------------------------------------------- container ops


@irdl_op_definition
class FuncOp(IRDLOperation):
    """One kernel: named inputs, kernel ops, ``kernel.output`` (its C function's name).

    ``kernel.func @mm { %a = kernel.input "A" : ... ; ... kernel.output %c : ... }``

    The name must be a C identifier; input names are unique C identifiers too
    (they name the generated function's parameters and the tensors of a shape set).
    """

    name = "kernel.func"

    sym_name = prop_def(SymbolNameConstraint())
    body = region_def("single_block")
    traits = traits_def(SymbolOpInterface(), IsolatedFromAbove(), NoTerminator())

    custom_directives = DIRECTIVES
    assembly_format = "$sym_name attr-dict-with-keyword custom<Body>($body)"

    @staticmethod
    def make(name: str) -> FuncOp:
        return FuncOp.create(properties={"sym_name": StringAttr(name)}, regions=[Region(Block())])

    @property
    def func_name(self) -> str:
        return self.sym_name.data

    @property
    def body_block(self) -> Block:
        return self.body.block

    def inputs(self) -> list[InputOp]:
        """The ``kernel.input`` ops, in order."""
        return [op for op in self.body_block.ops if isinstance(op, InputOp)]

    def output(self) -> OutputOp | None:
        last = self.body_block.last_op
        return last if isinstance(last, OutputOp) else None

    def verify_(self) -> None:
        where = f"kernel.func {sym(self.func_name)}"
        if not is_identifier(self.func_name):
            raise VerifyException(f"{where}: the name must be a C identifier")
        if self.output() is None:
            raise VerifyException(f"{where}: must end with kernel.output")
        seen: set[str] = set()
        for inp in self.inputs():
            name = inp.input_name.data
            if name in seen:
                raise VerifyException(f'{where}: duplicate input "{name}"')
            seen.add(name)


@irdl_op_definition
class InputOp(IRDLOperation):
    """A named input tensor of a kernel: ``%a = kernel.input "A" : !graph.tensor<[M, K], f32>``.

    The name is a C identifier (the generated parameter's name).
    """

    name = "kernel.input"

    input_name = prop_def(StringAttr)
    result = result_def(TensorType)
    traits = traits_def(HasParent(FuncOp))

    assembly_format = "$input_name attr-dict `:` type($result)"

    @staticmethod
    def make(name: str, type: TensorType) -> InputOp:
        return InputOp.create(properties={"input_name": StringAttr(name)}, result_types=[type])

    def verify_(self) -> None:
        name = self.input_name.data
        if not is_identifier(name):
            raise VerifyException(f'kernel.input "{name}": the name must be a C identifier')
        if self.result.type.dtype_name != "f32":
            raise VerifyException(
                f'kernel.input "{name}": dtype {self.result.type.dtype_name} '
                "is not supported (kernels are f32)"
            )


@irdl_op_definition
class OutputOp(IRDLOperation):
    """Terminator of ``kernel.func``: the tensors it returns.

    ``kernel.output %c : !graph.tensor<[M, N], f32>``
    """

    name = "kernel.output"

    values = var_operand_def(TensorType)
    traits = traits_def(IsTerminator(), HasParent(FuncOp))

    assembly_format = "attr-dict ($values^ `:` type($values))?"

    def verify_(self) -> None:
        if not self.values:
            raise VerifyException("kernel.output: returns nothing (give at least one tensor)")


# --------------------------------------------------------------------------- compute ops


class KernelComputeOp(IRDLOperation):
    """Base of the kernel compute ops (not an op itself): a result and a schedule."""

    #: the schedule fields that apply to this op (others are refused by the verifier)
    SCHEDULE_APPLIES: ClassVar[tuple[str, ...]] = SCHEDULE_FIELDS

    out = result_def(TensorType)
    schedule = opt_prop_def(ScheduleAttr)

    irdl_options = (ParsePropInAttrDict(),)

    def schedule_values(self) -> dict[str, int | str]:
        """The schedule's set fields (empty without a schedule)."""
        return {} if self.schedule is None else self.schedule.values()

    def _check_schedule(self) -> None:
        for field in self.schedule_values():
            if field not in self.SCHEDULE_APPLIES:
                raise VerifyException(
                    f"{self.name}: schedule field {field} does not apply "
                    f"(this op takes {', '.join(self.SCHEDULE_APPLIES)})"
                )

    def _check_f32(self, *types: Attribute) -> None:
        for t in types:
            assert isinstance(t, TensorType)
            if t.dtype_name != "f32":
                raise VerifyException(
                    f"{self.name}: dtype {t.dtype_name} is not supported (f32 only)"
                )


class _MatmulLike(KernelComputeOp):
    a = operand_def(TensorType)
    b = operand_def(TensorType)

    @property
    def epilogue(self) -> str:
        """The activation applied to the product: ``none`` here, ``relu`` for
        ``kernel.matmul_relu``, the ``activation`` of ``kernel.linear``."""
        return "none"

    def verify_(self) -> None:
        a, b, c = self.a.type, self.b.type, self.out.type
        assert isinstance(a, TensorType) and isinstance(b, TensorType)
        assert isinstance(c, TensorType)
        self._check_f32(a, b, c)
        if a.rank != 2 or b.rank != 2 or c.rank != 2:
            raise VerifyException(
                f"{self.name}: expects a [M, K] x b [K, N] -> [M, N], got {a}, {b} -> {c}"
            )
        if not dims_equal(a.dims[1], b.dims[0], {}):
            raise VerifyException(
                f"{self.name}: inner dims differ: {a.dims[1]} (a) vs {b.dims[0]} (b)"
            )
        expected = (a.dims[0], b.dims[1])
        if not (dims_equal(c.dims[0], expected[0], {}) and dims_equal(c.dims[1], expected[1], {})):
            raise VerifyException(
                f"{self.name}: result shape {dims_text(c.dims)}, expected {dims_text(expected)}"
            )
        self._check_schedule()


@irdl_op_definition
class MatmulOp(_MatmulLike):
    """``c = a @ b`` for a ``[M, K]`` and b ``[K, N]`` (row-major), with schedule hints.

    ``%c = kernel.matmul %a, %b {schedule = #kernel.schedule<tile_m = 32, vectorize = 16>}
    : (!graph.tensor<[M, K], f32>, !graph.tensor<[K, N], f32>) -> !graph.tensor<[M, N], f32>``
    """

    name = "kernel.matmul"

    assembly_format = "$a `,` $b attr-dict `:` `(` type($a) `,` type($b) `)` `->` type($out)"


@irdl_op_definition
class MatmulReluOp(_MatmulLike):
    """``c = max(a @ b, 0)`` in one kernel (the relu is the matmul's epilogue).

    ``%c = kernel.matmul_relu %a, %b : (!graph.tensor<[M, K], f32>,
    !graph.tensor<[K, N], f32>) -> !graph.tensor<[M, N], f32>``
    """

    name = "kernel.matmul_relu"

    @property
    def epilogue(self) -> str:
        return "relu"

    assembly_format = "$a `,` $b attr-dict `:` `(` type($a) `,` type($b) `)` `->` type($out)"


@irdl_op_definition
class LinearOp(_MatmulLike):
    """``c = act(a @ b + bias)``: a matmul, an optional bias ``[N]`` and an activation.

    ``activation`` is one of none (the default), relu, silu, gelu (erf form).

    ``%y = kernel.linear %x, %w, %bias {activation = "relu"} : (!graph.tensor<[M, K], f32>,
    !graph.tensor<[K, N], f32>, !graph.tensor<[N], f32>) -> !graph.tensor<[M, N], f32>``
    """

    name = "kernel.linear"

    bias = opt_operand_def(TensorType)
    activation = opt_prop_def(StringAttr)

    assembly_format = (
        "$a `,` $b (`,` $bias^)? attr-dict `:` `(` type($a) `,` type($b) (`,` type($bias)^)? `)`"
        " `->` type($out)"
    )

    @property
    def activation_name(self) -> str:
        return "none" if self.activation is None else self.activation.data

    @property
    def epilogue(self) -> str:
        return self.activation_name

    def verify_(self) -> None:
        super().verify_()
        if self.activation_name not in ACTIVATIONS:
            raise VerifyException(
                f'kernel.linear: activation = "{self.activation_name}" must be one of '
                f"{', '.join(ACTIVATIONS)}"
            )
        if self.bias is not None:
            bias, c = self.bias.type, self.out.type
            assert isinstance(bias, TensorType) and isinstance(c, TensorType)
            self._check_f32(bias)
            if bias.rank != 1 or not dims_equal(bias.dims[0], c.dims[1], {}):
                raise VerifyException(
                    f"kernel.linear: bias shape {dims_text(bias.dims)}, expected [{c.dims[1]}]"
                )


@irdl_op_definition
class ReluOp(KernelComputeOp):
    """``y = max(x, 0)`` element-wise; the last dim is the row, the others are rows.

    Takes ``tile_m`` (rows per tile), ``tile_n`` (columns per tile), ``vectorize``
    and ``unroll``; ``tile_k``, ``order`` and ``mr`` do not apply.

    ``%y = kernel.relu %x {schedule = #kernel.schedule<vectorize = 8, unroll = 4>}
    : (!graph.tensor<[M, N], f32>) -> !graph.tensor<[M, N], f32>``
    """

    name = "kernel.relu"

    SCHEDULE_APPLIES: ClassVar[tuple[str, ...]] = ("tile_m", "tile_n", "vectorize", "unroll")

    x = operand_def(TensorType)

    assembly_format = "$x attr-dict `:` `(` type($x) `)` `->` type($out)"

    def verify_(self) -> None:
        x, y = self.x.type, self.out.type
        assert isinstance(x, TensorType) and isinstance(y, TensorType)
        self._check_f32(x, y)
        if (
            x.rank < 1
            or x.rank != y.rank
            or not all(dims_equal(p, q, {}) for p, q in zip(x.dims, y.dims, strict=True))
        ):
            raise VerifyException(
                f"kernel.relu: result shape {dims_text(y.dims)} differs from the operand's "
                f"{dims_text(x.dims)}"
            )
        self._check_schedule()


#: op name (without the dialect prefix) -> class
KERNEL_OPS: dict[str, type[KernelComputeOp]] = {
    "matmul": MatmulOp,
    "matmul_relu": MatmulReluOp,
    "linear": LinearOp,
    "relu": ReluOp,
}


Kernel = Dialect(
    "kernel",
    [FuncOp, InputOp, OutputOp, MatmulOp, MatmulReluOp, LinearOp, ReluOp],
    [ScheduleAttr],
)
