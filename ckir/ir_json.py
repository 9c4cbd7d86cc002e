"""ckir's IR as JSON, for every dialect ckir registers: a module -> JSON and back.

The JSON is a plain tree an agent can read and write without an MLIR parser
(the full schema is ``docs/ir-json.md`` and ``docs/ir-json.schema.json``)::

    {"format": "ckir-ir-json", "version": 1,
     "ops": [{"op": "graph.linear",
              "operands": ["%h"],
              "results": [{"id": "%q", "type": {"type": "graph.tensor",
                                                "shape": ["T", "H*D"], "dtype": "f32"}}],
              "properties": {"weights": {"array": [{"symbol": "layers.{i}.attn.wq"}]}}}]}

* Values are named by ``id`` strings (``"%q"``, ``"%0"`` for an unnamed one),
  scoped by region the way the text printer scopes them; operands refer to them.
* Every attribute (property, attribute, result or block-argument type) is one
  tagged object: ``{"int": 5, "type": "i64"}``, ``{"float": 1e-05, "type": "f64"}``,
  ``{"string": ...}``, ``{"array": [...]}``, ``{"dict": {...}}``, ``{"symbol": ...}``,
  ``{"unit": true}``, ``{"none": true}``, ``{"int": 5}`` (``#builtin.int``),
  ``{"dim": "H*D"}``, shaped types ``{"type": NAME, "shape": [...], "dtype": ...}``,
  any other parametrized attribute of a registered dialect as
  ``{"attr": NAME, "params": [...]}``, and as a fallback the attribute's text,
  ``{"text": "f32"}``, read back with xDSL's parser.

The writer only picks a structured form when reading it back rebuilds an equal
attribute (checked once per distinct attribute); otherwise it writes the text.
So text -> JSON -> text prints byte-identically, for any dialect.

Errors in JSON input raise :class:`IRJSONError`: one line naming the file and
the JSON path (``model.json: ops[0].regions[0].blocks[0].ops[3].properties.eps:
...``).

Example::

    text = print_module(module)
    assert print_module(module_from_json(module_to_json(module))) == text
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import IO, Any, ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import (
    ArrayAttr,
    DictionaryAttr,
    FloatAttr,
    IntAttr,
    IntegerAttr,
    ModuleOp,
    NoneAttr,
    StringAttr,
    SymbolRefAttr,
    UnitAttr,
)
from xdsl.ir import Attribute, Block, Operation, ParametrizedAttribute, Region, SSAValue
from xdsl.parser import Parser
from xdsl.utils.exceptions import ParseError, VerifyException
from xdsl.utils.mlir_lexer import MLIRTokenKind
from xdsl.utils.target import Target

from ckir.errors import CkirError, one_line
from ckir.ir_io import ir_context

__all__ = [
    "FORMAT",
    "VERSION",
    "IRJSONError",
    "JSONTarget",
    "attribute_from_json",
    "attribute_to_json",
    "dumps",
    "looks_like_json",
    "module_from_json",
    "module_to_json",
    "parse_json_module",
]

FORMAT = "ckir-ir-json"
VERSION = 1

#: attribute names with a structured shorthand of their own
_DIM = "graph.dim"

JSON = Any


class IRJSONError(CkirError):
    """Malformed IR JSON: ``FILE: JSON.PATH: what is wrong`` on one line."""


class _Bad(Exception):
    """A problem at a JSON path, turned into an :class:`IRJSONError` at the top."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(message)
        self.path = path
        self.message = message


# --------------------------------------------------------------------------- writing


@dataclass
class _Writer:
    """Turns a module into the JSON tree; one per module (it caches attributes)."""

    ctx: Context
    _attrs: dict[Attribute, JSON] = field(default_factory=dict)
    _scopes: list[dict[str, int]] = field(default_factory=lambda: [{}])
    _ids: dict[SSAValue, str] = field(default_factory=dict)
    _next_number: int = 0

    def module(self, module: ModuleOp) -> JSON:
        out: dict[str, JSON] = {"format": FORMAT, "version": VERSION}
        out.update(self._op_fields(module, with_body=False))
        out["ops"] = [self.op(op) for op in module.body.block.ops]
        return out

    def op(self, op: Operation) -> JSON:
        out: dict[str, JSON] = {"op": op.name}
        out.update(self._op_fields(op, with_body=True))
        return out

    def _op_fields(self, op: Operation, *, with_body: bool) -> dict[str, JSON]:
        out: dict[str, JSON] = {}
        if op.operands:
            out["operands"] = [self._use(v) for v in op.operands]
        if op.results:
            out["results"] = [self._define(r) for r in op.results]
        if op.properties:
            out["properties"] = {k: self.attr(v) for k, v in op.properties.items()}
        if op.attributes:
            out["attributes"] = {k: self.attr(v) for k, v in op.attributes.items()}
        if with_body and op.regions:
            out["regions"] = [self._region(r) for r in op.regions]
        if op.successors:
            parent = op.parent_region()
            blocks = list(parent.blocks) if parent is not None else []
            out["successors"] = [blocks.index(b) for b in op.successors]
        return out

    def _region(self, region: Region) -> JSON:
        self._scopes.append(dict(self._scopes[-1]))
        try:
            return {"blocks": [self._block(b) for b in region.blocks]}
        finally:
            self._scopes.pop()

    def _block(self, block: Block) -> JSON:
        out: dict[str, JSON] = {}
        if block.name_hint:
            out["name"] = block.name_hint
        if block.args:
            out["args"] = [self._define(a) for a in block.args]
        out["ops"] = [self.op(op) for op in block.ops]
        return out

    def _define(self, value: SSAValue) -> JSON:
        """A fresh id for a result or block argument, named like the text printer names it."""
        hint = value.name_hint
        if hint:
            n = self._scopes[-1].get(hint, 0)
            self._scopes[-1][hint] = n + 1
            ident = f"%{hint}_{n}" if n else f"%{hint}"
        else:
            ident = f"%{self._next_number}"
            self._next_number += 1
        self._ids[value] = ident
        return {"id": ident, "type": self.attr(value.type)}

    def _use(self, value: SSAValue) -> str:
        ident = self._ids.get(value)
        if ident is None:  # used before its definition is written (a graph region)
            raise _Bad("ops", f"operand {value} is used before it is defined")
        return ident

    def attr(self, attr: Attribute) -> JSON:
        try:
            return self._attrs[attr]
        except KeyError:
            pass
        except TypeError:  # an unhashable attribute: encode it every time
            return self._encode_checked(attr)
        out = self._attrs[attr] = self._encode_checked(attr)
        return out

    def _encode_checked(self, attr: Attribute) -> JSON:
        encoded = self._structured(attr)
        if encoded is not None:
            try:
                if _Reader(self.ctx).attr(encoded, "") == attr:
                    return encoded
            except (_Bad, VerifyException, ValueError, TypeError):
                pass
        return {"text": _attr_text(attr)}

    def _structured(self, attr: Attribute) -> JSON | None:
        """The structured form of ``attr``, or None when only the text can say it."""
        kind = type(attr)
        if kind is IntAttr:
            return {"int": attr.data}
        if kind is IntegerAttr:
            return {"int": attr.value.data, "type": _attr_text(attr.type)}
        if kind is FloatAttr:
            value = attr.value.data
            if not math.isfinite(value):
                return None
            return {"float": value, "type": _attr_text(attr.type)}
        if kind is StringAttr:
            return {"string": attr.data}
        if kind is ArrayAttr:
            return {"array": [self.attr(a) for a in attr.data]}
        if kind is DictionaryAttr:
            return {"dict": {k: self.attr(v) for k, v in attr.data.items()}}
        if kind is SymbolRefAttr:
            out: dict[str, JSON] = {"symbol": attr.root_reference.data}
            if attr.nested_references.data:
                out["nested"] = [s.data for s in attr.nested_references.data]
            return out
        if kind is UnitAttr:
            return {"unit": True}
        if kind is NoneAttr:
            return {"none": True}
        if not isinstance(attr, ParametrizedAttribute) or attr.name.startswith("builtin."):
            return None
        if attr.name == _DIM:
            (expr,) = attr.parameters
            return {"dim": expr.data} if isinstance(expr, StringAttr) else None
        shaped = _shaped_parts(attr)
        if shaped is not None:
            shape, dtype = shaped
            return {"type": attr.name, "shape": shape, "dtype": dtype}
        return {"attr": attr.name, "params": [self.attr(p) for p in attr.parameters]}


def _shaped_parts(attr: ParametrizedAttribute) -> tuple[list[JSON], str] | None:
    """``(shape, dtype)`` of an attribute whose parameters are exactly ``shape, dtype``.

    The shape is an array of integers (``#builtin.int``) or dims (``graph.dim``).
    """
    definition = getattr(type(attr), "get_irdl_definition", None)
    if definition is None or [n for n, _ in definition().parameters] != ["shape", "dtype"]:
        return None
    shape, dtype = attr.parameters
    if not isinstance(shape, ArrayAttr) or not isinstance(dtype, StringAttr):
        return None
    dims: list[JSON] = []
    for d in shape.data:
        if isinstance(d, IntAttr):
            dims.append(d.data)
        elif isinstance(d, ParametrizedAttribute) and d.name == _DIM:
            dims.append(d.parameters[0].data)  # type: ignore[attr-defined]
        else:
            return None
    return dims, dtype.data


def _attr_text(attr: Attribute) -> str:
    """The attribute as the text printer writes it (``f32``, ``#graph.schedule<...>``)."""
    import io

    from xdsl.printer import Printer

    out = io.StringIO()
    Printer(stream=out).print_attribute(attr)
    return out.getvalue()


# --------------------------------------------------------------------------- reading


_TAGS = (
    "int",
    "float",
    "string",
    "array",
    "dict",
    "symbol",
    "unit",
    "none",
    "dim",
    "type",
    "attr",
    "text",
)


@dataclass
class _Reader:
    """Builds a module from the JSON tree; raises :class:`_Bad` with the JSON path."""

    ctx: Context
    _scopes: list[dict[str, SSAValue]] = field(default_factory=lambda: [{}])

    # ----------------------------------------------------------------- ops

    def module(self, data: JSON) -> ModuleOp:
        obj = self._object(data, "", "the top level")
        fmt = obj.get("format")
        if fmt != FORMAT:
            raise _Bad("format", f'expected "{FORMAT}", got {json.dumps(fmt)}')
        if obj.get("version") != VERSION:
            raise _Bad("version", f"expected {VERSION}, got {json.dumps(obj.get('version'))}")
        self._keys(obj, "", {"format", "version", "properties", "attributes", "ops"})
        ops = self._ops(obj.get("ops"), "ops")
        props = self._attr_dict(obj.get("properties", {}), "properties")
        attrs = self._attr_dict(obj.get("attributes", {}), "attributes")
        module = ModuleOp.create(properties=props, attributes=attrs, regions=[Region(Block(ops))])
        return module

    def _ops(self, data: JSON, path: str) -> list[Operation]:
        items = self._list(data, path)
        return [self.op(item, f"{path}[{i}]") for i, item in enumerate(items)]

    def op(self, data: JSON, path: str) -> Operation:
        obj = self._object(data, path, "an op")
        self._keys(
            obj,
            path,
            {"op", "operands", "results", "properties", "attributes", "regions", "successors"},
        )
        name = obj.get("op")
        if not isinstance(name, str):
            raise _Bad(_join(path, "op"), "expected the op name as a string")
        op_type = self.ctx.get_optional_op(name)
        if op_type is None:
            raise _Bad(_join(path, "op"), f"unknown op '{name}'")
        operands = [
            self._value(v, f"{path}.operands[{i}]")
            for i, v in enumerate(self._list(obj.get("operands", []), f"{path}.operands"))
        ]
        props = self._attr_dict(obj.get("properties", {}), _join(path, "properties"))
        attrs = self._attr_dict(obj.get("attributes", {}), _join(path, "attributes"))
        results = self._list(obj.get("results", []), _join(path, "results"))
        ids: list[tuple[str, str]] = []
        types: list[Attribute] = []
        for i, res in enumerate(results):
            rpath = f"{path}.results[{i}]"
            ident, rtype = self._value_def(res, rpath)
            ids.append((ident, rpath))
            types.append(rtype)
        regions = [
            self._region(r, f"{path}.regions[{i}]")
            for i, r in enumerate(self._list(obj.get("regions", []), _join(path, "regions")))
        ]
        successors = self._list(obj.get("successors", []), _join(path, "successors"))
        if successors:
            # blocks of the enclosing region are only known once it is built: resolved there
            for i, s in enumerate(successors):
                if not isinstance(s, int) or isinstance(s, bool) or s < 0:
                    raise _Bad(f"{path}.successors[{i}]", "expected a block index")
        try:
            op = op_type.create(
                operands=operands,
                result_types=types,
                properties=props,
                attributes=attrs,
                regions=regions,
            )
        except (VerifyException, ValueError, TypeError) as err:
            raise _Bad(path, f"cannot build '{name}': {one_line(err)}") from None
        if successors:
            op.__dict__["_ckir_json_successors"] = (list(successors), path)
        for (ident, rpath), result in zip(ids, op.results, strict=True):
            self._bind(ident, result, rpath)
        return op

    def _region(self, data: JSON, path: str) -> Region:
        obj = self._object(data, path, "a region")
        self._keys(obj, path, {"blocks"})
        blocks_data = self._list(obj.get("blocks", []), _join(path, "blocks"))
        self._scopes.append({})
        try:
            blocks = [self._block(b, f"{path}.blocks[{i}]") for i, b in enumerate(blocks_data)]
        finally:
            self._scopes.pop()
        for block in blocks:
            for op in block.ops:
                pending = op.__dict__.pop("_ckir_json_successors", None)
                if pending is None:
                    continue
                indices, opath = pending
                for k, index in enumerate(indices):
                    if index >= len(blocks):
                        raise _Bad(
                            f"{opath}.successors[{k}]",
                            f"block {index} does not exist (the region has {len(blocks)})",
                        )
                op.successors = [blocks[i] for i in indices]  # type: ignore[misc]
        return Region(blocks)

    def _block(self, data: JSON, path: str) -> Block:
        obj = self._object(data, path, "a block")
        self._keys(obj, path, {"name", "args", "ops"})
        args = self._list(obj.get("args", []), _join(path, "args"))
        defs = [self._value_def(a, f"{path}.args[{i}]") for i, a in enumerate(args)]
        block = Block(arg_types=[t for _, t in defs])
        name = obj.get("name")
        if name is not None:
            self._set_name(block, name, _join(path, "name"))
        for i, ((ident, _), arg) in enumerate(zip(defs, block.args, strict=True)):
            self._bind(ident, arg, f"{path}.args[{i}]")
        block.add_ops(self._ops(obj.get("ops", []), _join(path, "ops")))
        return block

    # ----------------------------------------------------------------- values

    def _value_def(self, data: JSON, path: str) -> tuple[str, Attribute]:
        obj = self._object(data, path, 'a value ({"id": ..., "type": ...})')
        self._keys(obj, path, {"id", "type"})
        ident = obj.get("id")
        if not isinstance(ident, str) or not ident.startswith("%") or len(ident) < 2:
            raise _Bad(_join(path, "id"), 'expected a value id such as "%x" or "%0"')
        if "type" not in obj:
            raise _Bad(path, 'missing "type"')
        return ident, self.attr(obj["type"], _join(path, "type"))

    def _bind(self, ident: str, value: SSAValue, path: str) -> None:
        scope = self._scopes[-1]
        if ident in scope:
            raise _Bad(_join(path, "id"), f"value {ident} is defined twice")
        scope[ident] = value
        name = ident[1:]
        if not name.isdigit():
            self._set_name(value, name, _join(path, "id"))

    def _set_name(self, holder: SSAValue | Block, name: object, path: str) -> None:
        if not isinstance(name, str):
            raise _Bad(path, "expected a name string")
        try:
            holder.name_hint = name
        except ValueError:
            raise _Bad(
                path, f"'{name}' is not a valid name ([A-Za-z_$.-][A-Za-z0-9_$.-]*)"
            ) from None

    def _value(self, data: JSON, path: str) -> SSAValue:
        if not isinstance(data, str):
            raise _Bad(path, 'expected a value id string such as "%x"')
        for scope in reversed(self._scopes):
            if data in scope:
                return scope[data]
        raise _Bad(path, f"unknown value {data} (not defined before this use)")

    # ----------------------------------------------------------------- attributes

    def _attr_dict(self, data: JSON, path: str) -> dict[str, Attribute]:
        obj = self._object(data, path, "an object of attributes")
        return {k: self.attr(v, _join(path, k)) for k, v in obj.items()}

    def attr(self, data: JSON, path: str) -> Attribute:
        obj = self._object(data, path, 'an attribute object such as {"int": 1, "type": "i64"}')
        tag = next((t for t in _TAGS if t in obj), None)
        if tag is None:
            raise _Bad(path, f"an attribute needs one of the keys {', '.join(_TAGS)}")
        try:
            return _ATTR_READERS[tag](self, obj, path)
        except VerifyException as err:
            raise _Bad(path, one_line(err)) from None

    def _read_int(self, obj: dict[str, JSON], path: str) -> Attribute:
        self._keys(obj, path, {"int", "type"})
        value = obj["int"]
        if not isinstance(value, int) or isinstance(value, bool):
            raise _Bad(_join(path, "int"), "expected an integer")
        if "type" not in obj:
            return IntAttr(value)
        return IntegerAttr(value, self._type_text(obj["type"], _join(path, "type")))

    def _read_float(self, obj: dict[str, JSON], path: str) -> Attribute:
        self._keys(obj, path, {"float", "type"})
        value = obj["float"]
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise _Bad(_join(path, "float"), "expected a number")
        return FloatAttr(float(value), self._type_text(obj.get("type", "f64"), _join(path, "type")))

    def _read_string(self, obj: dict[str, JSON], path: str) -> Attribute:
        self._keys(obj, path, {"string"})
        return StringAttr(self._str(obj["string"], _join(path, "string")))

    def _read_array(self, obj: dict[str, JSON], path: str) -> Attribute:
        self._keys(obj, path, {"array"})
        items = self._list(obj["array"], _join(path, "array"))
        return ArrayAttr([self.attr(a, f"{path}.array[{i}]") for i, a in enumerate(items)])

    def _read_dict(self, obj: dict[str, JSON], path: str) -> Attribute:
        self._keys(obj, path, {"dict"})
        return DictionaryAttr(self._attr_dict(obj["dict"], _join(path, "dict")))

    def _read_symbol(self, obj: dict[str, JSON], path: str) -> Attribute:
        self._keys(obj, path, {"symbol", "nested"})
        root = self._str(obj["symbol"], _join(path, "symbol"))
        nested = self._list(obj.get("nested", []), _join(path, "nested"))
        return SymbolRefAttr(
            root, [self._str(n, f"{path}.nested[{i}]") for i, n in enumerate(nested)]
        )

    def _read_unit(self, obj: dict[str, JSON], path: str) -> Attribute:
        self._keys(obj, path, {"unit"})
        if obj["unit"] is not True:
            raise _Bad(_join(path, "unit"), "expected true")
        return UnitAttr()

    def _read_none(self, obj: dict[str, JSON], path: str) -> Attribute:
        self._keys(obj, path, {"none"})
        if obj["none"] is not True:
            raise _Bad(_join(path, "none"), "expected true")
        return NoneAttr()

    def _read_dim(self, obj: dict[str, JSON], path: str) -> Attribute:
        self._keys(obj, path, {"dim"})
        return self._dim(obj["dim"], _join(path, "dim"))

    def _dim(self, data: JSON, path: str) -> Attribute:
        cls = self._attr_class(_DIM, path)
        return self._construct(cls, [StringAttr(self._str(data, path))], path)

    def _read_shaped(self, obj: dict[str, JSON], path: str) -> Attribute:
        self._keys(obj, path, {"type", "shape", "dtype"})
        cls = self._attr_class(self._str(obj["type"], _join(path, "type")), _join(path, "type"))
        spath = _join(path, "shape")
        dims: list[Attribute] = []
        for i, d in enumerate(self._list(obj.get("shape"), spath)):
            if isinstance(d, int) and not isinstance(d, bool):
                dims.append(IntAttr(d))
            elif isinstance(d, str):
                dims.append(self._dim(d, f"{spath}[{i}]"))
            else:
                raise _Bad(f"{spath}[{i}]", "expected an integer or a dim expression string")
        dtype = self._str(obj.get("dtype"), _join(path, "dtype"))
        return self._construct(cls, [ArrayAttr(dims), StringAttr(dtype)], path)

    def _read_generic(self, obj: dict[str, JSON], path: str) -> Attribute:
        self._keys(obj, path, {"attr", "params"})
        cls = self._attr_class(self._str(obj["attr"], _join(path, "attr")), _join(path, "attr"))
        ppath = _join(path, "params")
        params = [
            self.attr(p, f"{ppath}[{i}]")
            for i, p in enumerate(self._list(obj.get("params"), ppath))
        ]
        return self._construct(cls, params, path)

    def _read_text(self, obj: dict[str, JSON], path: str) -> Attribute:
        self._keys(obj, path, {"text"})
        return self._parse_text(self._str(obj["text"], _join(path, "text")), _join(path, "text"))

    def _type_text(self, data: JSON, path: str) -> Attribute:
        return self._parse_text(self._str(data, path), path)

    def _parse_text(self, text: str, path: str) -> Attribute:
        try:
            parser = Parser(self.ctx, text, "<json>")
            attr = parser.parse_attribute()
            if parser._current_token.kind != MLIRTokenKind.EOF:
                raise _Bad(path, f"unexpected text after the attribute in '{text}'")
        except ParseError as err:
            raise _Bad(path, f"cannot parse '{text}': {one_line(err.msg)}") from None
        return attr

    def _attr_class(self, name: str, path: str) -> type[Attribute]:
        cls = self.ctx.get_optional_attr(name) or self.ctx.get_optional_type(name)
        if cls is None:
            raise _Bad(path, f"unknown attribute or type '{name}'")
        return cls

    def _construct(self, cls: type[Attribute], params: Sequence[Attribute], path: str) -> Attribute:
        if not issubclass(cls, ParametrizedAttribute):
            raise _Bad(path, f"'{cls.name}' has no parameters to build it from")
        try:
            return cls(*params)
        except (VerifyException, TypeError, ValueError) as err:
            raise _Bad(path, f"bad '{cls.name}': {one_line(err)}") from None

    # ----------------------------------------------------------------- JSON shapes

    @staticmethod
    def _object(data: JSON, path: str, what: str) -> dict[str, JSON]:
        if not isinstance(data, dict):
            raise _Bad(path, f"expected {what}, got {_kind(data)}")
        return data

    @staticmethod
    def _list(data: JSON, path: str) -> list[JSON]:
        if not isinstance(data, list):
            raise _Bad(path, f"expected a list, got {_kind(data)}")
        return data

    @staticmethod
    def _str(data: JSON, path: str) -> str:
        if not isinstance(data, str):
            raise _Bad(path, f"expected a string, got {_kind(data)}")
        return data

    @staticmethod
    def _keys(obj: dict[str, JSON], path: str, allowed: Iterable[str]) -> None:
        extra = sorted(set(obj) - set(allowed))
        if extra:
            raise _Bad(_join(path, extra[0]), "unexpected key")


_ATTR_READERS: dict[str, Callable[[_Reader, dict[str, JSON], str], Attribute]] = {
    "int": _Reader._read_int,
    "float": _Reader._read_float,
    "string": _Reader._read_string,
    "array": _Reader._read_array,
    "dict": _Reader._read_dict,
    "symbol": _Reader._read_symbol,
    "unit": _Reader._read_unit,
    "none": _Reader._read_none,
    "dim": _Reader._read_dim,
    "type": _Reader._read_shaped,
    "attr": _Reader._read_generic,
    "text": _Reader._read_text,
}


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def _kind(data: JSON) -> str:
    if data is None:
        return "null"
    return {
        bool: "a boolean",
        int: "a number",
        float: "a number",
        str: "a string",
        list: "a list",
        dict: "an object",
    }.get(type(data), type(data).__name__)


# --------------------------------------------------------------------------- API


def module_to_json(module: ModuleOp, ctx: Context | None = None) -> JSON:
    """The JSON tree of ``module`` (``ctx`` must know its dialects; default ckir's)."""
    try:
        return _Writer(ctx or ir_context()).module(module)
    except _Bad as err:
        raise IRJSONError(f"cannot write the module as JSON: {err.message}") from None


def attribute_to_json(attr: Attribute, ctx: Context | None = None) -> JSON:
    """One attribute (or type) in the JSON attribute form, e.g. ``{"int": 5, "type": "i64"}``."""
    return _Writer(ctx or ir_context()).attr(attr)


def attribute_from_json(data: JSON, ctx: Context | None = None, path: str = "") -> Attribute:
    """The attribute an attribute JSON object describes; :class:`IRJSONError` when malformed."""
    try:
        return _Reader(ctx or ir_context()).attr(data, path)
    except _Bad as err:
        raise IRJSONError(f"{err.path or '<attribute>'}: {err.message}") from None


def dumps(module: ModuleOp, ctx: Context | None = None) -> str:
    """The module as JSON text: two-space indented, keys in schema order, a final newline."""
    return json.dumps(module_to_json(module, ctx), indent=2, allow_nan=False) + "\n"


def module_from_json(
    data: JSON, name: str = "<json>", ctx: Context | None = None, *, verify: bool = True
) -> ModuleOp:
    """Build (and, unless ``verify=False``, verify) a module from its JSON tree;
    :class:`IRJSONError` names ``name`` and the JSON path of the first problem."""
    reader = _Reader(ctx or ir_context())
    try:
        module = reader.module(data)
    except _Bad as err:
        raise IRJSONError(f"{name}: {err.path or '<top>'}: {err.message}") from None
    except RecursionError:
        raise IRJSONError(f"{name}: regions nest too deeply") from None
    if verify:
        _verify(module, name)
    return module


def parse_json_module(
    text: str | bytes, name: str = "<json>", ctx: Context | None = None
) -> ModuleOp:
    """Parse IR JSON text; malformed JSON is an :class:`IRJSONError` with its line/column."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise IRJSONError(f"{name}:{err.lineno}:{err.colno}: malformed JSON: {err.msg}") from None
    except (UnicodeDecodeError, RecursionError) as err:
        raise IRJSONError(f"{name}: malformed JSON: {one_line(err)}") from None
    return module_from_json(data, name, ctx)


def looks_like_json(text: str | bytes) -> bool:
    """True when the first non-space character is ``{`` (IR text never starts so)."""
    stripped = text.lstrip()
    return stripped[:1] in ("{", b"{")


def _verify(module: ModuleOp, name: str) -> None:
    """Verify the module; a failure names the JSON path of the innermost failing op."""
    try:
        module.verify()
        return
    except VerifyException as err:
        message = one_line(str(err).splitlines()[0] if str(err) else err)
    path = _failing_path(module, "") or "<top>"
    raise IRJSONError(f"{name}: {path}: {message}")


def _failing_path(op: Operation, path: str) -> str | None:
    """The JSON path of the innermost op under ``op`` whose own verifier fails."""
    regions = op.regions
    if isinstance(op, ModuleOp):
        blocks_paths = [(op.body.block, "ops")]
    else:
        blocks_paths = [
            (b, f"{_join(path, f'regions[{i}]')}.blocks[{j}].ops")
            for i, r in enumerate(regions)
            for j, b in enumerate(r.blocks)
        ]
    for block, bpath in blocks_paths:
        for k, child in enumerate(block.ops):
            found = _failing_path(child, f"{bpath}[{k}]")
            if found is not None:
                return found
    try:
        op.verify_()
    except VerifyException:
        return path or None
    return None


@dataclass(frozen=True)
class JSONTarget(Target):
    """``ckir-opt -t json`` / ``--emit-json``: the module as IR JSON (docs/ir-json.md)."""

    name: ClassVar[str] = "json"

    def emit(self, ctx: Context, module: ModuleOp, output: IO[str]) -> None:
        output.write(dumps(module, ctx))
