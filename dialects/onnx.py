"""The ``onnx`` import dialect: an ONNX graph as generic nodes, printable between passes.

The ONNX frontend (``ckir.frontend.onnx``) loads a ``.onnx`` file with the
``onnx`` package and spells its main graph in four ops, in the generic xDSL
syntax::

    builtin.module attributes {onnx.opset = 18 : i64, onnx.file = "m.onnx"} {
      %ids = "onnx.input"() <{name = "input_ids", shape = ["1", "T"], elem = "int64"}>
          : () -> !onnx.value
      %w = "onnx.init"() <{name = "m.wte", shape = ["101", "24"], elem = "float32"}>
          : () -> !onnx.value
      %c = "onnx.const"() <{name = "val_8", shape = [], elem = "int64", value = [1.0]}>
          : () -> !onnx.value
      %e = "onnx.node"(%w, %ids) <{op_type = "Gather", domain = "", node = "node_embedding",
          attrs = {axis = 0 : i64}}> : (!onnx.value, !onnx.value) -> !onnx.value
      "onnx.output"(%logits) <{names = ["logits"]}> : (!onnx.value) -> ()
    }

``onnx.init`` references an initializer by name (its data stays in the file);
``onnx.const`` carries a small one by value (a float scalar, or an integer
tensor of at most :data:`CONST_MAX` elements),
so that the folding passes run on the text alone.  ``onnx.node`` is any ONNX
node: ``op_type``, ``domain``, the node's name and its attributes (ints,
floats, strings and their lists; a tensor attribute becomes a dictionary
``{elem, shape, value}``).  The fusion passes replace subgraphs by nodes of
the ``ckir`` domain (``LayerNorm``, ``Linear``, ``Attention`` ...), whose
weights are ``onnx.init`` operands; ``--onnx-to-graph`` turns those into a
``graph.model``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from xdsl.dialects.builtin import (
    ArrayAttr,
    DictionaryAttr,
    FloatAttr,
    IntegerAttr,
    StringAttr,
)
from xdsl.ir import Attribute, Dialect, ParametrizedAttribute, SSAValue, TypeAttribute
from xdsl.irdl import (
    IRDLOperation,
    irdl_attr_definition,
    irdl_op_definition,
    opt_prop_def,
    prop_def,
    result_def,
    var_operand_def,
    var_result_def,
)
from xdsl.utils.exceptions import VerifyException

__all__ = [
    "CKIR_DOMAIN",
    "CONST_MAX",
    "ConstOp",
    "InitOp",
    "InputOp",
    "NodeOp",
    "Onnx",
    "OutputOp",
    "ValueType",
]

#: the domain of the fused nodes the passes create
CKIR_DOMAIN = "ckir"
#: initializers with at most this many elements are carried by value (``onnx.const``)
CONST_MAX = 64


@irdl_attr_definition
class ValueType(ParametrizedAttribute, TypeAttribute):
    """``!onnx.value``: any ONNX value (shapes are not tracked in the type)."""

    name = "onnx.value"


def _strs(items: Sequence[str]) -> ArrayAttr[StringAttr]:
    return ArrayAttr(tuple(StringAttr(s) for s in items))


@irdl_op_definition
class InputOp(IRDLOperation):
    """A graph input: ``name``, ``shape`` (dims as text: ``"1"``, ``"T"``) and ``elem``.

    ``%ids = "onnx.input"() <{name = "input_ids", shape = ["1", "T"], elem = "int64"}>
    : () -> !onnx.value``
    """

    name = "onnx.input"
    sym = prop_def(StringAttr, prop_name="name")
    shape = prop_def(ArrayAttr[StringAttr])
    elem = prop_def(StringAttr)
    result = result_def(ValueType)

    @staticmethod
    def make(name: str, shape: Sequence[str], elem: str) -> InputOp:
        return InputOp.create(
            properties={"name": StringAttr(name), "shape": _strs(shape), "elem": StringAttr(elem)},
            result_types=[ValueType()],
        )

    @property
    def tensor(self) -> str:
        return self.sym.data

    @property
    def dims(self) -> tuple[str, ...]:
        return tuple(s.data for s in self.shape.data)


@irdl_op_definition
class InitOp(IRDLOperation):
    """An initializer by reference (its data stays in the ONNX file).

    ``same_as``/``transposed``: the loader found its data equal to another
    initializer's (transposed, for 2-D), e.g. an exporter's transposed copy of
    a tied embedding.  ``value``: the data too, for a 1-D one of at most
    ``CONST_MAX`` elements (a rotary ``inv_freq`` the rope rule reads).

    ``%w = "onnx.init"() <{name = "wte", shape = ["101", "24"], elem = "float32"}>
    : () -> !onnx.value``
    """

    name = "onnx.init"
    sym = prop_def(StringAttr, prop_name="name")
    shape = prop_def(ArrayAttr[StringAttr])
    elem = prop_def(StringAttr)
    same_as = opt_prop_def(StringAttr)
    transposed = opt_prop_def(IntegerAttr)
    value = opt_prop_def(ArrayAttr[FloatAttr])
    result = result_def(ValueType)

    @staticmethod
    def make(
        name: str,
        shape: Sequence[int],
        elem: str,
        same_as: str | None = None,
        transposed: bool = False,
        value: Sequence[float] | None = None,
    ) -> InitOp:
        props: dict[str, Attribute] = {
            "name": StringAttr(name),
            "shape": _strs([str(d) for d in shape]),
            "elem": StringAttr(elem),
        }
        if same_as is not None:
            props["same_as"] = StringAttr(same_as)
            props["transposed"] = IntegerAttr(int(transposed), 64)
        if value is not None:
            props["value"] = ArrayAttr(tuple(FloatAttr(float(v), 64) for v in value))
        return InitOp.create(properties=props, result_types=[ValueType()])

    @property
    def tensor(self) -> str:
        return self.sym.data

    @property
    def dims(self) -> tuple[int, ...]:
        return tuple(int(s.data) for s in self.shape.data)


@irdl_op_definition
class ConstOp(IRDLOperation):
    """A small constant by value (row-major ``value``; ``elem`` is the ONNX element type).

    ``%c = "onnx.const"() <{name = "val_8", shape = [], elem = "int64", value = [1.0]}>
    : () -> !onnx.value``
    """

    name = "onnx.const"
    sym = prop_def(StringAttr, prop_name="name")
    shape = prop_def(ArrayAttr[StringAttr])
    elem = prop_def(StringAttr)
    value = prop_def(ArrayAttr[FloatAttr])
    result = result_def(ValueType)

    @staticmethod
    def make(name: str, shape: Sequence[int], elem: str, value: Sequence[float]) -> ConstOp:
        return ConstOp.create(
            properties={
                "name": StringAttr(name),
                "shape": _strs([str(d) for d in shape]),
                "elem": StringAttr(elem),
                "value": ArrayAttr(tuple(FloatAttr(float(v), 64) for v in value)),
            },
            result_types=[ValueType()],
        )

    @property
    def tensor(self) -> str:
        return self.sym.data

    @property
    def dims(self) -> tuple[int, ...]:
        return tuple(int(s.data) for s in self.shape.data)

    @property
    def values(self) -> list[float]:
        return [v.value.data for v in self.value.data]

    def verify_(self) -> None:
        n = 1
        for d in self.dims:
            n *= d
        if n != len(self.value.data):
            raise VerifyException(
                f"onnx.const {self.tensor}: shape {list(self.dims)} holds {n} values, "
                f"value has {len(self.value.data)}"
            )


@irdl_op_definition
class NodeOp(IRDLOperation):
    """One ONNX node (or a fused ``ckir``-domain node).

    ``%y = "onnx.node"(%x, %w) <{op_type = "MatMul", domain = "", node = "n1", attrs = {}}>
    : (!onnx.value, !onnx.value) -> !onnx.value``

    An omitted optional input is an empty name in ONNX; here the node carries
    ``absent`` (the indices of the omitted inputs) and no operand for them.
    """

    name = "onnx.node"
    op_type = prop_def(StringAttr)
    domain = prop_def(StringAttr)
    node = prop_def(StringAttr)
    attrs = prop_def(DictionaryAttr)
    absent = opt_prop_def(ArrayAttr[IntegerAttr])
    args = var_operand_def(ValueType)
    outs = var_result_def(ValueType)

    @staticmethod
    def make(
        op_type: str,
        inputs: Sequence[SSAValue],
        n_results: int,
        *,
        domain: str = "",
        node: str = "",
        attrs: Mapping[str, Attribute] | None = None,
        absent: Sequence[int] = (),
    ) -> NodeOp:
        props: dict[str, Attribute] = {
            "op_type": StringAttr(op_type),
            "domain": StringAttr(domain),
            "node": StringAttr(node),
            "attrs": DictionaryAttr(dict(attrs or {})),
        }
        if absent:
            props["absent"] = ArrayAttr(tuple(IntegerAttr(i, 64) for i in absent))
        return NodeOp.create(
            operands=list(inputs), result_types=[ValueType()] * n_results, properties=props
        )

    @property
    def kind(self) -> str:
        """``op_type``, prefixed by the domain when not the default: ``ckir.Linear``."""
        d = self.domain.data
        return self.op_type.data if d in ("", "ai.onnx") else f"{d}.{self.op_type.data}"

    @property
    def label(self) -> str:
        return self.node.data or self.op_type.data

    def attr(self, key: str, default: object = None) -> object:
        """An attribute as a Python value (int, float, str, list), or ``default``."""
        a = self.attrs.data.get(key)
        return default if a is None else attr_value(a)


def attr_value(a: Attribute) -> object:
    """An attribute of ``onnx.node.attrs`` as a Python value."""
    if isinstance(a, IntegerAttr):
        return a.value.data
    if isinstance(a, FloatAttr):
        return a.value.data
    if isinstance(a, StringAttr):
        return a.data
    if isinstance(a, ArrayAttr):
        return [attr_value(x) for x in a.data]
    if isinstance(a, DictionaryAttr):
        return {k: attr_value(v) for k, v in a.data.items()}
    return a


def to_attr(v: object) -> Attribute:
    """A Python attribute value (int, float, str, list, dict) as an xDSL attribute."""
    if isinstance(v, bool):
        return IntegerAttr(int(v), 64)
    if isinstance(v, int):
        return IntegerAttr(v, 64)
    if isinstance(v, float):
        return FloatAttr(v, 64)
    if isinstance(v, str):
        return StringAttr(v)
    if isinstance(v, (list, tuple)):
        return ArrayAttr(tuple(to_attr(x) for x in v))
    if isinstance(v, dict):
        return DictionaryAttr({str(k): to_attr(x) for k, x in v.items()})
    raise TypeError(f"no onnx attribute for {type(v).__name__}")


@irdl_op_definition
class OutputOp(IRDLOperation):
    """The graph outputs, by name.

    ``"onnx.output"(%logits) <{names = ["logits"]}> : (!onnx.value) -> ()``
    """

    name = "onnx.output"
    names = prop_def(ArrayAttr[StringAttr])
    args = var_operand_def(ValueType)

    @staticmethod
    def make(values: Sequence[SSAValue], names: Sequence[str]) -> OutputOp:
        return OutputOp.create(operands=list(values), properties={"names": _strs(names)})


Onnx = Dialect("onnx", [InputOp, InitOp, ConstOp, NodeOp, OutputOp], [ValueType])
