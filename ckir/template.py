"""Architecture templates: load, validate, bind a config, instantiate.

A template (``templates/<arch>.yaml``) is the single source of an architecture:
which HF ``model_type`` values it serves, how ``config.json`` keys become
symbols (dims) and params (scalars and flags), the HF -> internal weight map,
and the header/body/footer op wiring.  This module knows the template *format*
and the graph op *signatures*; it knows no architecture, HF tensor name or
config key.  The format is documented in ``docs/templates.md``.

Pipeline::

    tpl = select_template(model_type, override)      # or load_template(path)
    spec = tpl.instantiate(config)                   # -> ModelSpec (plain data)

Every mistake in a template or a config raises :class:`~ckir.errors.CkirError`
with one line naming the file, the template, and the key or op.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ckir.dialects.dims import TOKENS, Dim, DimError
from ckir.errors import CkirError
from ckir.resources import templates_dir
from ckir.vocab import GRAPH_OPS, MODES, SCHEDULE_KEYS, VALUE_DTYPES, OpSignature

#: where ckir's templates live (package data: see ckir.resources)
TEMPLATES_DIR = templates_dir()

#: dim symbols bound at run time, never by the config (``T`` = tokens of a call)
RUNTIME_SYMBOLS = (TOKENS,)

#: the largest value a symbol may have (IR integers are i64)
MAX_SYMBOL = 2**40


_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
_IDENT_RE = re.compile(rf"^{_IDENT}$")


class TemplateError(ValueError):
    """A local problem (bad expression, bad value); the caller adds the location."""


def display_path(path: Path) -> str:
    """A short, stable way to show a path in an error message."""
    try:
        rel = os.path.relpath(path)
    except ValueError:  # different drive on Windows
        return str(path)
    return rel if not rel.startswith("..") else str(path)


# ---------------------------------------------------------------------------
# Dim expressions: the language of ckir.dialects.dims
# ---------------------------------------------------------------------------


def parse_dim(value: object) -> Dim:
    """Parse ``64``, ``"E"``, ``"H*D"``, ``"3*E"``, ``"(E+1)/2"`` into a :class:`Dim`."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise TemplateError(f"dim must be an integer or an expression string, got {value!r}")
    try:
        return Dim.parse(value)
    except DimError as e:
        raise TemplateError(str(e)) from None


# ---------------------------------------------------------------------------
# Conditions: `tied`, `not tied`, `act == silu`, `a and (b or c)`, `W >= C`
# ---------------------------------------------------------------------------

_COND_TOKEN = re.compile(
    r"\s*(?:(==|!=|<=|>=|<|>|\(|\))|'([^']*)'|\"([^\"]*)\"|"
    r"(-?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)(?![A-Za-z_])|([A-Za-z_][A-Za-z0-9_.\-]*))"
)
_KEYWORDS = {"not", "and", "or", "true", "false"}


@dataclass(frozen=True)
class Condition:
    """A parsed ``if``/``assert`` condition over params and symbols."""

    text: str
    node: tuple

    def names(self) -> set[str]:
        out: set[str] = set()

        def walk(n: tuple) -> None:
            if n[0] == "name":
                out.add(n[1])
            elif n[0] in ("and", "or"):
                for c in n[1]:
                    walk(c)
            elif n[0] == "not":
                walk(n[1])
            elif n[0] == "cmp":
                walk(n[2])
                walk(n[3])

        walk(self.node)
        return out

    def evaluate(self, env: Mapping[str, Any]) -> bool:
        def operand(n: tuple) -> Any:
            return env[n[1]] if n[0] == "name" else n[1]

        def ev(n: tuple) -> bool:
            kind = n[0]
            if kind == "or":
                return any(ev(c) for c in n[1])
            if kind == "and":
                return all(ev(c) for c in n[1])
            if kind == "not":
                return not ev(n[1])
            if kind == "name":
                return bool(env[n[1]])
            if kind == "lit":
                return bool(n[1])
            op, a, b = n[1], operand(n[2]), operand(n[3])
            if op == "==":
                return a == b
            if op == "!=":
                return a != b
            if op == "<":
                return a < b
            if op == "<=":
                return a <= b
            if op == ">":
                return a > b
            return a >= b

        return ev(self.node)


def parse_condition(value: object, names: Mapping[str, str]) -> Condition:
    """Parse a condition; ``names`` maps each known name to its type (int/float/bool/str).

    A bare word on the right of a comparison that is not a known name is a
    string literal (``act == silu``); anywhere else a bare word must be a name.
    """
    if isinstance(value, bool):
        return Condition(str(value).lower(), ("lit", value))
    if not isinstance(value, str) or not value.strip():
        raise TemplateError(f"condition must be a non-empty string, got {value!r}")
    text = value
    tokens: list[tuple[str, Any]] = []
    pos = 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = _COND_TOKEN.match(text, pos)
        if not m:
            raise TemplateError(f"bad condition '{text}': unexpected '{text[pos:].strip()[0]}'")
        if m.group(1):
            tokens.append(("op", m.group(1)))
        elif m.group(2) is not None or m.group(3) is not None:
            tokens.append(("str", m.group(2) if m.group(2) is not None else m.group(3)))
        elif m.group(4):
            num = m.group(4)
            tokens.append(("num", float(num) if any(c in num for c in ".eE") else int(num)))
        else:
            word = m.group(5)
            tokens.append(("kw", word) if word in _KEYWORDS else ("word", word))
        pos = m.end()
    i = 0

    def peek() -> tuple[str, Any] | None:
        return tokens[i] if i < len(tokens) else None

    def fail(msg: str) -> TemplateError:
        return TemplateError(f"bad condition '{text}': {msg}")

    def or_expr() -> tuple:
        nonlocal i
        parts = [and_expr()]
        while peek() == ("kw", "or"):
            i += 1
            parts.append(and_expr())
        return parts[0] if len(parts) == 1 else ("or", tuple(parts))

    def and_expr() -> tuple:
        nonlocal i
        parts = [not_expr()]
        while peek() == ("kw", "and"):
            i += 1
            parts.append(not_expr())
        return parts[0] if len(parts) == 1 else ("and", tuple(parts))

    def not_expr() -> tuple:
        nonlocal i
        if peek() == ("kw", "not"):
            i += 1
            return ("not", not_expr())
        return atom()

    def name_node(word: str) -> tuple:
        if word not in names:
            raise fail(f"unknown name '{word}' (known: {', '.join(sorted(names)) or 'none'})")
        return ("name", word)

    def atom() -> tuple:
        nonlocal i
        tok = peek()
        if tok is None:
            raise fail("unexpected end")
        if tok == ("op", "("):
            i += 1
            node = or_expr()
            if peek() != ("op", ")"):
                raise fail("expected ')'")
            i += 1
            return node
        if tok[0] == "kw" and tok[1] in ("true", "false"):
            i += 1
            return ("lit", tok[1] == "true")
        if tok[0] != "word":
            raise fail(f"expected a name, got '{tok[1]}'")
        i += 1
        lhs = name_node(tok[1])
        nxt = peek()
        if nxt is None or nxt[0] != "op" or nxt[1] in "()":
            if names[tok[1]] != "bool":
                raise fail(f"'{tok[1]}' is a {names[tok[1]]}, compare it with == or !=")
            return lhs
        i += 1
        op = nxt[1]
        rtok = peek()
        if rtok is None or rtok[0] == "op":
            raise fail(f"expected a value after '{op}'")
        i += 1
        lt = names[tok[1]]
        if rtok[0] == "word" and rtok[1] in names:
            rhs: tuple = ("name", rtok[1])
            rt = names[rtok[1]]
        elif rtok[0] == "kw" and rtok[1] in ("true", "false"):
            rhs, rt = ("lit", rtok[1] == "true"), "bool"
        elif rtok[0] == "num":
            rhs, rt = ("lit", rtok[1]), "float" if isinstance(rtok[1], float) else "int"
        elif rtok[0] in ("word", "str"):
            rhs, rt = ("lit", rtok[1]), "str"
        else:
            raise fail(f"unexpected '{rtok[1]}'")
        numeric = {"int", "float"}
        if not (lt == rt or (lt in numeric and rt in numeric)):
            raise fail(f"cannot compare {lt} '{tok[1]}' with {rt} '{rtok[1]}'")
        if op in ("<", "<=", ">", ">=") and lt not in numeric:
            raise fail(f"'{op}' needs numbers, '{tok[1]}' is a {lt}")
        return ("cmp", op, lhs, rhs)

    node = or_expr()
    if i != len(tokens):
        raise fail(f"unexpected '{tokens[i][1]}'")
    return Condition(text, node)


# ---------------------------------------------------------------------------
# Template data model (what the YAML says, validated)
# ---------------------------------------------------------------------------

_PARAM_TYPES = ("float", "int", "bool", "str")


@dataclass(frozen=True)
class SymbolDef:
    name: str
    keys: tuple[str, ...]  # config keys tried in order (dotted paths into nested dicts)
    default: Dim | None  # used when no key is present (or the value is null)
    expr: Dim | None  # derived symbol: always this expression, never from config


@dataclass(frozen=True)
class ParamDef:
    name: str
    type: str
    keys: tuple[str, ...]
    default: Any  # None means "required"
    value: Any  # a constant (no keys)
    choices: tuple[Any, ...] | None


@dataclass(frozen=True)
class WeightVariant:
    cond: Condition | None
    shape: tuple[Dim, ...]
    hf: tuple[str, ...]  # alternative HF names, tried in order (after hf_prefixes)
    hf_shape: tuple[Dim, ...] | None
    slice: tuple[int, Dim, Dim] | None  # (axis, start, stop), stop exclusive
    transpose: bool
    tied_to: str | None
    gguf: str | None


@dataclass(frozen=True)
class WeightDef:
    name: str  # internal name; per-layer names contain "{i}"
    key: str  # how the template refers to it (the short name for layer weights)
    per_layer: bool
    variants: tuple[WeightVariant, ...]
    where: str


@dataclass(frozen=True)
class ValueType:
    shape: tuple[Dim, ...]
    dtype: str

    def to_ir(self) -> tuple[tuple[int | str, ...], str]:
        return tuple(d.to_ir() for d in self.shape), self.dtype


@dataclass(frozen=True)
class OpDef:
    text: str
    kind: str
    ins: tuple[str, ...]
    outs: tuple[str, ...]
    types: tuple[ValueType | None, ...]  # None: same type as the input at that position
    weights: tuple[str, ...]  # as written (short names for layer weights in the body)
    attrs: Mapping[str, Any]  # validated raw values; "$name" = param reference
    when: tuple[str, ...] | None
    cond: Condition | None
    where: str


@dataclass(frozen=True)
class SectionDef:
    kind: str  # header, body, footer
    repeat: Dim | None
    args: tuple[str, ...]
    inputs: tuple[tuple[str, ValueType], ...]
    ops: tuple[OpDef, ...]
    results: tuple[str, ...]


@dataclass(frozen=True)
class BufferDef:
    name: str
    shape: tuple[Dim, ...]
    dtype: str
    role: str
    per_layer: bool
    when: tuple[str, ...] | None
    cond: Condition | None


@dataclass(frozen=True)
class CheckDef:
    cond: Condition
    message: str
    severity: str  # "error" or "warning"


# --- spec: the template instantiated for one config (plain data, no YAML) ---


@dataclass(frozen=True)
class WeightSpec:
    """One weight after binding: dims are still symbolic; ``*_values`` are evaluated."""

    name: str
    per_layer: bool
    shape: tuple[Dim, ...]
    shape_values: tuple[int, ...]
    hf: tuple[str, ...]  # candidate HF names (with "{i}" for per-layer weights)
    hf_shape: tuple[Dim, ...] | None  # only for packed weights (slice/transpose)
    hf_shape_values: tuple[int, ...] | None  # expected HF shape (always set unless tied)
    slice: tuple[int, Dim, Dim] | None  # (axis, start, stop), stop exclusive
    transpose: bool
    tied_to: str | None
    gguf: str | None


@dataclass(frozen=True)
class OpSpec:
    kind: str
    ins: tuple[str, ...]
    outs: tuple[str, ...]
    out_types: tuple[ValueType, ...]
    weights: tuple[str, ...]  # internal weight names
    attrs: Mapping[str, Any]  # python values: float, int, bool, str; dims as int|str
    when: tuple[str, ...] | None


@dataclass(frozen=True)
class SectionSpec:
    kind: str
    repeat: Dim | None
    args: tuple[tuple[str, ValueType], ...]
    inputs: tuple[tuple[str, ValueType], ...]
    ops: tuple[OpSpec, ...]
    results: tuple[tuple[str, ValueType], ...]


@dataclass(frozen=True)
class BufferSpec:
    name: str
    shape: tuple[Dim, ...]
    shape_values: tuple[int, ...]
    dtype: str
    role: str
    per_layer: bool
    when: tuple[str, ...] | None


@dataclass(frozen=True)
class ModelSpec:
    template: Template
    symbols: Mapping[str, int]
    params: Mapping[str, Any]
    weights: tuple[WeightSpec, ...]
    header: SectionSpec
    body: SectionSpec
    footer: SectionSpec
    buffers: tuple[BufferSpec, ...]
    ignore: tuple[str, ...]  # HF name patterns that are not weights ("{i}" and "*")
    warnings: tuple[str, ...] = ()  # failed checks of severity "warning"

    @property
    def layers(self) -> int:
        assert self.body.repeat is not None
        return self.body.repeat.evaluate(self.symbols)


# ---------------------------------------------------------------------------
# Loading and validation
# ---------------------------------------------------------------------------


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that rejects duplicate mapping keys instead of keeping the last."""


def _construct_mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode) -> dict:
    loader.flatten_mapping(node)
    out: dict = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        if key in out:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key '{key}'", key_node.start_mark
            )
        out[key] = loader.construct_object(value_node, deep=True)
    return out


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)

_TOP_KEYS = (
    "name",
    "model_types",
    "description",
    "symbols",
    "params",
    "checks",
    "hf_prefixes",
    "ignore",
    "weights",
    "layer_weights",
    "buffers",
    "header",
    "body",
    "footer",
    "gguf",
)
_GGUF_KEYS = ("architectures", "config", "tensors", "unpermute", "ignore", "reject")
_GGUF_TENSOR_SOURCES = ("@tensor_absent:", "@tensor_present:")
_REQUIRED_TOP = ("name", "model_types", "symbols", "weights", "header", "body", "footer")
_OP_TEXT = re.compile(
    rf"^\s*({_IDENT}(?:\s*,\s*{_IDENT})*)\s*=\s*({_IDENT})\s*\(\s*"
    rf"((?:{_IDENT}(?:\s*,\s*{_IDENT})*)?)\s*\)\s*$"
)
_LAYER_PREFIX = "layers.{i}."


class _Loader:
    """Validates one parsed YAML document into a :class:`Template`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.file = display_path(path)
        self.names: dict[str, str] = {}  # symbol/param name -> type, for conditions

    def err(self, where: str, msg: str) -> CkirError:
        return CkirError(f"{self.file}: {where}: {msg}")

    # -- small typed getters ------------------------------------------------
    def mapping(self, value: Any, where: str) -> dict:
        if not isinstance(value, dict):
            raise self.err(where, f"expected a mapping, got {_kind(value)}")
        return value

    def seq(self, value: Any, where: str) -> list:
        if not isinstance(value, list):
            raise self.err(where, f"expected a list, got {_kind(value)}")
        return value

    def string(self, value: Any, where: str) -> str:
        if not isinstance(value, str) or not value:
            raise self.err(where, f"expected a non-empty string, got {_kind(value)}")
        return value

    def ident(self, value: Any, where: str) -> str:
        s = self.string(value, where)
        if not _IDENT_RE.match(s):
            raise self.err(where, f"'{s}' is not an identifier")
        return s

    def keys(self, d: dict, allowed: Sequence[str], where: str) -> None:
        for k in d:
            if k not in allowed:
                raise self.err(where, f"unknown key '{k}' (allowed: {', '.join(allowed)})")

    def strings(self, value: Any, where: str) -> tuple[str, ...]:
        if isinstance(value, str):
            return (self.string(value, where),)
        items = self.seq(value, where)
        if not items:
            raise self.err(where, "expected at least one name")
        return tuple(self.string(v, f"{where}[{n}]") for n, v in enumerate(items))

    def dim(self, value: Any, where: str, allowed: set[str]) -> Dim:
        try:
            d = parse_dim(value)
        except (TemplateError, DimError) as e:
            raise self.err(where, str(e)) from None
        unknown = d.symbols() - allowed
        if unknown:
            raise self.err(
                where,
                f"dim expression '{d}' uses unknown symbol '{sorted(unknown)[0]}' "
                f"(known: {', '.join(sorted(allowed))})",
            )
        return d

    def shape(self, value: Any, where: str, allowed: set[str]) -> tuple[Dim, ...]:
        items = self.seq(value, where)
        return tuple(self.dim(v, f"{where}[{n}]", allowed) for n, v in enumerate(items))

    def cond(self, value: Any, where: str) -> Condition:
        try:
            return parse_condition(value, self.names)
        except (TemplateError, DimError) as e:
            raise self.err(where, str(e)) from None

    def when(self, value: Any, where: str) -> tuple[str, ...]:
        modes = self.strings(value, where)
        for m in modes:
            if m not in MODES:
                raise self.err(where, f"unknown mode '{m}' (modes: {', '.join(MODES)})")
        return modes

    def dtype(self, value: Any, where: str) -> str:
        s = self.string(value, where)
        if s not in VALUE_DTYPES:
            raise self.err(where, f"unknown dtype '{s}' (dtypes: {', '.join(VALUE_DTYPES)})")
        return s

    # -- sections -----------------------------------------------------------
    def load(self, doc: Any) -> Template:
        doc = self.mapping(doc, "top level")
        self.keys(doc, _TOP_KEYS, "top level")
        for k in _REQUIRED_TOP:
            if k not in doc:
                raise self.err("top level", f"missing required key '{k}'")
        name = self.ident(doc["name"], "name")
        model_types = self.strings(doc["model_types"], "model_types")
        description = doc.get("description", "")
        if not isinstance(description, str):
            raise self.err("description", f"expected a string, got {_kind(description)}")
        symbols = self.symbols(doc["symbols"])
        params = self.params(doc.get("params", {}))
        checks = self.checks(doc.get("checks", []))
        prefixes = ("",)
        if "hf_prefixes" in doc:
            items = self.seq(doc["hf_prefixes"], "hf_prefixes")
            if not items or not all(isinstance(p, str) for p in items):
                raise self.err("hf_prefixes", "expected a non-empty list of strings")
            prefixes = tuple(items)
        ignore = ()
        if "ignore" in doc:
            ignore = self.strings(doc["ignore"], "ignore")
        dims = {s.name for s in symbols}
        weights = self.weights(doc["weights"], "weights", dims, per_layer=False)
        if "layer_weights" in doc:
            weights += self.weights(doc["layer_weights"], "layer_weights", dims, per_layer=True)
        by_name = {w.name: w for w in weights}
        for w in weights:
            for n, v in enumerate(w.variants):
                if v.tied_to is not None:
                    target = by_name.get(v.tied_to)
                    if target is None or target.per_layer != w.per_layer:
                        raise self.err(
                            f"{w.where}.tied_to" + (f"[{n}]" if len(w.variants) > 1 else ""),
                            f"unknown weight '{v.tied_to}'",
                        )
        buffers = self.buffers(doc.get("buffers", {}), dims)
        header = self.section(doc["header"], "header", (), by_name, dims)
        body = self.section(doc["body"], "body", header.results, by_name, dims)
        if len(body.args) != len(body.results):
            raise self.err(
                "body.yield",
                f"the body yields {len(body.results)} values but takes {len(body.args)} "
                "args; the body is repeated, so they must match",
            )
        footer = self.section(doc["footer"], "footer", body.results, by_name, dims)
        seen_inputs: set[str] = set()
        for sec in (header, body, footer):
            for input_name, _ in sec.inputs:
                if input_name in seen_inputs:
                    raise self.err(f"{sec.kind}.inputs.{input_name}", "input names must be unique")
                seen_inputs.add(input_name)
        return Template(
            name=name,
            path=self.path,
            model_types=model_types,
            description=description,
            symbols=symbols,
            params=params,
            checks=checks,
            hf_prefixes=prefixes,
            ignore=ignore,
            weights=weights,
            buffers=buffers,
            header=header,
            body=body,
            footer=footer,
            gguf=self.gguf(doc["gguf"], model_types, dims, weights) if "gguf" in doc else None,
        )

    def gguf(
        self,
        raw: Any,
        model_types: tuple[str, ...],
        dims: set[str],
        weights: tuple[WeightDef, ...],
    ) -> GGUFMap:
        """The ``gguf:`` block: how a GGUF file maps onto this template's HF view."""
        d = self.mapping(raw, "gguf")
        self.keys(d, _GGUF_KEYS, "gguf")
        arches = model_types
        if "architectures" in d:
            arches = self.strings(d["architectures"], "gguf.architectures")
        config: dict[str, tuple[str, ...]] = {}
        for key, value in self.mapping(d.get("config", {}), "gguf.config").items():
            where = f"gguf.config.{key}"
            sources = value if isinstance(value, list) else [value]
            if not sources or not all(isinstance(v, str) and v for v in sources):
                raise self.err(where, "expected a GGUF key or a list of them")
            for v in sources:
                special = v == "@token_count" or v.startswith(_GGUF_TENSOR_SOURCES)
                if v.startswith("@") and not special:
                    raise self.err(
                        where,
                        f"unknown source '{v}' (sources: a GGUF key, @token_count, "
                        "@tensor_absent:<name>, @tensor_present:<name>)",
                    )
                if v.startswith(_GGUF_TENSOR_SOURCES) and not v.split(":", 1)[1]:
                    raise self.err(where, f"'{v}' names no tensor")
            config[str(key)] = tuple(sources)
        hf_names: dict[str, bool] = {}  # every HF name a weight may use -> per layer
        for w in weights:
            for v in w.variants:
                for h in v.hf:
                    hf_names[h] = w.per_layer
        tensors: dict[str, str] = {}
        for k, v in self.mapping(d.get("tensors", {}), "gguf.tensors").items():
            where = f"gguf.tensors.{k}"
            gname = self.string(k, where)
            hf = self.string(v, where)
            if hf not in hf_names:
                raise self.err(where, f"'{hf}' is not the hf name of any weight")
            if ("{i}" in gname) != hf_names[hf]:
                raise self.err(
                    where,
                    "a per-layer weight's GGUF name needs '{i}', a global one must not have it",
                )
            if hf in tensors.values():
                raise self.err(where, f"'{hf}' is mapped twice")
            tensors[gname] = hf
        unpermute: dict[str, str] = {}
        for k, v in self.mapping(d.get("unpermute", {}), "gguf.unpermute").items():
            where = f"gguf.unpermute.{k}"
            if str(k) not in tensors.values():
                raise self.err(where, f"'{k}' is not an HF name in gguf.tensors")
            unpermute[str(k)] = str(self.dim(v, where, dims))
        ignore: tuple[str, ...] = ()
        if "ignore" in d:
            ignore = self.strings(d["ignore"], "gguf.ignore")
        reject: dict[str, str] = {}
        for k, v in self.mapping(d.get("reject", {}), "gguf.reject").items():
            reject[self.string(k, "gguf.reject")] = self.string(v, f"gguf.reject.{k}")
        return GGUFMap(arches, config, tensors, unpermute, ignore, reject)

    def config_keys(self, d: dict, where: str) -> tuple[str, ...]:
        if "key" not in d:
            return ()
        return self.strings(d["key"], f"{where}.key")

    def symbols(self, raw: Any) -> tuple[SymbolDef, ...]:
        raw = self.mapping(raw, "symbols")
        out: list[SymbolDef] = []
        defined: set[str] = set()
        for name, spec in raw.items():
            where = f"symbols.{name}"
            self.ident(name, where)
            if name in RUNTIME_SYMBOLS:
                raise self.err(where, f"'{name}' is a runtime symbol and cannot be bound")
            if isinstance(spec, str):
                spec = {"key": spec}
            spec = self.mapping(spec, where)
            self.keys(spec, ("key", "default", "expr", "value"), where)
            keys = self.config_keys(spec, where)
            default = expr = None
            if "value" in spec:
                spec = {**spec, "expr": spec["value"]}
            if "expr" in spec:
                if keys or "default" in spec:
                    raise self.err(where, "'expr'/'value' cannot be combined with 'key'/'default'")
                expr = self.dim(spec["expr"], f"{where}.expr", defined)
            elif not keys:
                raise self.err(where, "needs 'key' (a config key), 'expr' or 'value'")
            if "default" in spec:
                default = self.dim(spec["default"], f"{where}.default", defined)
            out.append(SymbolDef(name, keys, default, expr))
            defined.add(name)
            self.names[name] = "int"
        return tuple(out)

    def params(self, raw: Any) -> tuple[ParamDef, ...]:
        raw = self.mapping(raw, "params")
        out: list[ParamDef] = []
        for name, spec in raw.items():
            where = f"params.{name}"
            self.ident(name, where)
            if name in self.names or name in RUNTIME_SYMBOLS:
                raise self.err(where, f"'{name}' is already a symbol")
            if isinstance(spec, str):
                spec = {"key": spec}
            spec = self.mapping(spec, where)
            self.keys(spec, ("key", "type", "default", "value", "choices"), where)
            typ = spec.get("type", "float")
            if typ not in _PARAM_TYPES:
                raise self.err(
                    f"{where}.type", f"unknown type {typ!r} (types: {', '.join(_PARAM_TYPES)})"
                )
            keys = self.config_keys(spec, where)
            value = default = None
            if "value" in spec:
                if keys or "default" in spec:
                    raise self.err(where, "'value' cannot be combined with 'key'/'default'")
                value = self.typed(spec["value"], typ, f"{where}.value")
            elif not keys:
                raise self.err(where, "needs 'key' (a config key) or 'value'")
            if "default" in spec:
                default = self.typed(spec["default"], typ, f"{where}.default")
            choices = None
            if "choices" in spec:
                items = self.seq(spec["choices"], f"{where}.choices")
                choices = tuple(
                    self.typed(c, typ, f"{where}.choices[{n}]") for n, c in enumerate(items)
                )
                for v, k in ((default, "default"), (value, "value")):
                    if v is not None and v not in choices:
                        raise self.err(f"{where}.{k}", f"{v!r} is not one of the choices")
            out.append(ParamDef(name, typ, keys, default, value, choices))
            self.names[name] = typ
        return tuple(out)

    def typed(self, value: Any, typ: str, where: str) -> Any:
        try:
            return _coerce(value, typ)
        except (TemplateError, DimError) as e:
            raise self.err(where, str(e)) from None

    def checks(self, raw: Any) -> tuple[CheckDef, ...]:
        out = []
        for n, item in enumerate(self.seq(raw, "checks")):
            where = f"checks[{n}]"
            item = self.mapping(item, where)
            self.keys(item, ("assert", "message", "severity"), where)
            if "assert" not in item or "message" not in item:
                raise self.err(where, "needs 'assert' (a condition) and 'message'")
            severity = item.get("severity", "error")
            if severity not in ("error", "warning"):
                raise self.err(f"{where}.severity", f"expected error or warning, got {severity!r}")
            out.append(
                CheckDef(
                    self.cond(item["assert"], f"{where}.assert"),
                    self.string(item["message"], f"{where}.message"),
                    severity,
                )
            )
        return tuple(out)

    def weights(
        self, raw: Any, section: str, dims: set[str], *, per_layer: bool
    ) -> tuple[WeightDef, ...]:
        raw = self.mapping(raw, section)
        out = []
        for key, spec in raw.items():
            where = f"{section}.{key}"
            key = self.string(key, where)
            if "{" in key or "}" in key or " " in key:
                raise self.err(where, f"bad weight name '{key}'")
            name = _LAYER_PREFIX + key if per_layer else key
            variants_raw = spec if isinstance(spec, list) else [spec]
            if not variants_raw:
                raise self.err(where, "expected a mapping or a non-empty list of variants")
            variants = []
            for n, v in enumerate(variants_raw):
                vwhere = where if not isinstance(spec, list) else f"{where}[{n}]"
                variants.append(self.weight_variant(v, vwhere, dims, per_layer, len(variants_raw)))
            out.append(WeightDef(name, key, per_layer, tuple(variants), where))
        return tuple(out)

    def weight_variant(
        self, raw: Any, where: str, dims: set[str], per_layer: bool, count: int
    ) -> WeightVariant:
        raw = self.mapping(raw, where)
        allowed = ("if", "shape", "hf", "hf_shape", "slice", "transpose", "tied_to", "gguf")
        self.keys(raw, allowed, where)
        cond = self.cond(raw["if"], f"{where}.if") if "if" in raw else None
        if count > 1 and cond is None:
            raise self.err(where, "each variant of a weight with several variants needs 'if'")
        if "shape" not in raw:
            raise self.err(where, "missing 'shape'")
        shape = self.shape(raw["shape"], f"{where}.shape", dims)
        tied = raw.get("tied_to")
        if tied is not None:
            tied = self.string(tied, f"{where}.tied_to")
            extra = [k for k in ("hf", "hf_shape", "slice", "transpose") if k in raw]
            if extra:
                raise self.err(where, f"a tied weight has no '{extra[0]}' (it has no HF tensor)")
            hf: tuple[str, ...] = ()
        else:
            if "hf" not in raw:
                raise self.err(where, "needs 'hf' (the HF tensor name) or 'tied_to'")
            hf = self.strings(raw["hf"], f"{where}.hf")
            for h in hf:
                if per_layer and "{i}" not in h:
                    raise self.err(f"{where}.hf", f"per-layer HF name '{h}' has no '{{i}}'")
                if not per_layer and "{i}" in h:
                    raise self.err(
                        f"{where}.hf", f"'{h}' has '{{i}}'; put per-layer weights in layer_weights"
                    )
        transpose = raw.get("transpose", False)
        if not isinstance(transpose, bool):
            raise self.err(f"{where}.transpose", f"expected true/false, got {_kind(transpose)}")
        if transpose and len(shape) != 2:
            raise self.err(f"{where}.transpose", "only 2-d weights can be transposed")
        hf_shape = None
        if "hf_shape" in raw:
            hf_shape = self.shape(raw["hf_shape"], f"{where}.hf_shape", dims)
        sl = None
        if "slice" in raw:
            spec = self.mapping(raw["slice"], f"{where}.slice")
            self.keys(spec, ("axis", "start", "stop", "size"), f"{where}.slice")
            if "axis" not in spec or "start" not in spec or ("stop" in spec) == ("size" in spec):
                raise self.err(
                    f"{where}.slice", "expected {axis: n, start: dim, stop: dim} (or size: dim)"
                )
            axis = spec["axis"]
            if isinstance(axis, bool) or not isinstance(axis, int) or axis < 0:
                raise self.err(f"{where}.slice.axis", f"expected an integer >= 0, got {axis!r}")
            start = self.dim(spec["start"], f"{where}.slice.start", dims)
            if "stop" in spec:
                stop = self.dim(spec["stop"], f"{where}.slice.stop", dims)
            else:
                size = self.dim(spec["size"], f"{where}.slice.size", dims)
                stop = size if start.ast == 0 else Dim.parse(f"{start}+{size}")
            sl = (axis, start, stop)
            if hf_shape is None:
                raise self.err(where, "a sliced weight needs 'hf_shape' (the packed HF tensor)")
            if axis >= len(hf_shape):
                raise self.err(f"{where}.slice", f"axis {axis} is out of range for hf_shape")
        gguf = raw.get("gguf")
        if gguf is not None:
            gguf = self.string(gguf, f"{where}.gguf")
        return WeightVariant(cond, shape, hf, hf_shape, sl, transpose, tied, gguf)

    def buffers(self, raw: Any, dims: set[str]) -> tuple[BufferDef, ...]:
        raw = self.mapping(raw, "buffers")
        out = []
        for name, spec in raw.items():
            where = f"buffers.{name}"
            name = self.string(name, where)
            spec = self.mapping(spec, where)
            self.keys(spec, ("shape", "dtype", "role", "per_layer", "when", "if"), where)
            if "shape" not in spec or "role" not in spec:
                raise self.err(where, "needs 'shape' and 'role'")
            per_layer = spec.get("per_layer", False)
            if not isinstance(per_layer, bool):
                raise self.err(f"{where}.per_layer", "expected true/false")
            out.append(
                BufferDef(
                    name,
                    self.shape(spec["shape"], f"{where}.shape", dims),
                    self.dtype(spec.get("dtype", "f32"), f"{where}.dtype"),
                    self.ident(spec["role"], f"{where}.role"),
                    per_layer,
                    self.when(spec["when"], f"{where}.when") if "when" in spec else None,
                    self.cond(spec["if"], f"{where}.if") if "if" in spec else None,
                )
            )
        return tuple(out)

    def value_type(self, raw: Any, where: str, dims: set[str]) -> ValueType:
        if isinstance(raw, list):
            return ValueType(self.shape(raw, where, dims), "f32")
        raw = self.mapping(raw, where)
        self.keys(raw, ("shape", "dtype"), where)
        if "shape" not in raw:
            raise self.err(where, "missing 'shape'")
        return ValueType(
            self.shape(raw["shape"], f"{where}.shape", dims),
            self.dtype(raw.get("dtype", "f32"), f"{where}.dtype"),
        )

    def section(
        self,
        raw: Any,
        kind: str,
        incoming: tuple[str, ...],
        weights: Mapping[str, WeightDef],
        dims: set[str],
    ) -> SectionDef:
        raw = self.mapping(raw, kind)
        allowed = ["inputs", "ops"]
        allowed += ["repeat"] if kind == "body" else []
        allowed += ["args"] if kind != "header" else []
        allowed += ["output"] if kind == "footer" else ["yield"]
        self.keys(raw, allowed, kind)
        result_key = "output" if kind == "footer" else "yield"
        if result_key not in raw:
            raise self.err(kind, f"missing '{result_key}' (the values the section passes on)")
        act_dims = dims | set(RUNTIME_SYMBOLS)
        repeat = None
        if kind == "body":
            if "repeat" not in raw:
                raise self.err(kind, "missing 'repeat' (the layer count, e.g. L)")
            repeat = self.dim(raw["repeat"], "body.repeat", dims)
        args: tuple[str, ...] = ()
        if kind != "header":
            if "args" not in raw:
                raise self.err(kind, "missing 'args' (names for the previous section's values)")
            args = tuple(
                self.ident(a, f"{kind}.args[{n}]")
                for n, a in enumerate(self.seq(raw["args"], f"{kind}.args"))
            )
            if len(args) != len(incoming):
                raise self.err(
                    f"{kind}.args",
                    f"takes {len(args)} values but the previous section passes {len(incoming)}",
                )
        inputs: list[tuple[str, ValueType]] = []
        for name, t in self.mapping(raw.get("inputs", {}), f"{kind}.inputs").items():
            where = f"{kind}.inputs.{name}"
            inputs.append((self.ident(name, where), self.value_type(t, where, act_dims)))
        defined: dict[str, bool] = {}  # name -> defined only conditionally
        for name in (*args, *(n for n, _ in inputs)):
            if name in defined:
                raise self.err(kind, f"value '{name}' is defined twice")
            defined[name] = False
        ops = []
        for n, raw_op in enumerate(self.seq(raw.get("ops", []), f"{kind}.ops")):
            op = self.op(raw_op, f"{kind}.ops[{n}]", kind, weights, act_dims, defined)
            ops.append(op)
        results = tuple(
            self.ident(r, f"{kind}.{result_key}[{n}]")
            for n, r in enumerate(self.seq(raw[result_key], f"{kind}.{result_key}"))
        )
        if not results:
            raise self.err(f"{kind}.{result_key}", "expected at least one value")
        for r in results:
            if r not in defined:
                raise self.err(f"{kind}.{result_key}", f"undefined value '{r}'")
        return SectionDef(kind, repeat, args, tuple(inputs), tuple(ops), results)

    def op(
        self,
        raw: Any,
        where: str,
        section: str,
        weights: Mapping[str, WeightDef],
        dims: set[str],
        defined: dict[str, bool],
    ) -> OpDef:
        raw = self.mapping(raw, where)
        text = raw.get("op")
        if isinstance(text, str) and "(" in text and ")" not in text:
            raise self.err(
                where,
                f"op '{text}' is cut at a comma: inside {{...}} YAML splits on ', '; "
                "quote the op text or write the op in block style",
            )
        self.keys(raw, ("op", "weights", "attrs", "shape", "shapes", "dtype", "when", "if"), where)
        if "op" not in raw:
            raise self.err(where, "missing 'op' (e.g. 'x1 = add(x, o)')")
        text = self.string(raw["op"], f"{where}.op")
        m = _OP_TEXT.match(text)
        if not m:
            raise self.err(where, f"'{text}' is not of the form 'out[, out] = kind(in, ...)'")
        where = f"{where} '{text.strip()}'"
        outs = tuple(s.strip() for s in m.group(1).split(","))
        kind = m.group(2)
        ins = tuple(s.strip() for s in m.group(3).split(",")) if m.group(3) else ()
        sig = GRAPH_OPS.get(kind)
        if sig is None:
            raise self.err(
                where, f"unknown op kind '{kind}' (known: {', '.join(sorted(GRAPH_OPS))})"
            )
        if len(ins) != sig.ins:
            raise self.err(where, f"{kind} takes {sig.ins} inputs, got {len(ins)}")
        if len(outs) != sig.outs:
            raise self.err(where, f"{kind} has {sig.outs} results, got {len(outs)}")
        for v in ins:
            if v not in defined:
                raise self.err(where, f"undefined value '{v}'")
        cond = self.cond(raw["if"], f"{where}.if") if "if" in raw else None
        for v in outs:
            if v in defined and not (cond is not None and defined[v]):
                raise self.err(
                    where,
                    f"value '{v}' is already defined (only ops with exclusive 'if' "
                    "conditions may define the same name)",
                )
            if outs.count(v) > 1:
                raise self.err(where, f"value '{v}' is defined twice")
        # types
        if "shape" in raw and "shapes" in raw:
            raise self.err(where, "give 'shape' (one result) or 'shapes' (one per result)")
        dtype = self.dtype(raw["dtype"], f"{where}.dtype") if "dtype" in raw else None
        types: list[ValueType | None]
        if "shape" in raw:
            if len(outs) != 1:
                raise self.err(where, f"{len(outs)} results: use 'shapes' (one per result)")
            types = [ValueType(self.shape(raw["shape"], f"{where}.shape", dims), dtype or "f32")]
        elif "shapes" in raw:
            items = self.seq(raw["shapes"], f"{where}.shapes")
            if len(items) != len(outs):
                raise self.err(where, f"'shapes' has {len(items)} entries for {len(outs)} results")
            types = [
                ValueType(self.shape(s, f"{where}.shapes[{n}]", dims), dtype or "f32")
                for n, s in enumerate(items)
            ]
        else:
            if len(ins) < len(outs):
                raise self.err(where, "needs 'shape' (the result has no input to copy it from)")
            if dtype is not None:
                raise self.err(where, "'dtype' needs 'shape'")
            types = [None] * len(outs)
        # weights
        refs = []
        for n, w in enumerate(self.seq(raw.get("weights", []), f"{where}.weights")):
            name = self.string(w, f"{where}.weights[{n}]")
            if _resolve_weight(name, section, weights) is None:
                hint = (
                    " (layer weights are used only in the body)"
                    if section != "body" and _LAYER_PREFIX + name in weights
                    else ""
                )
                raise self.err(where, f"unknown weight '{name}'{hint}")
            refs.append(name)
        lo, hi = sig.weights
        if len(refs) > hi or (len(refs) < lo):
            expect = f"{lo}" if lo == hi else f"{lo} to {hi}"
            raise self.err(where, f"{kind} takes {expect} weights, got {len(refs)}")
        # attrs
        attrs = self.attrs(raw.get("attrs", {}), f"{where}.attrs", kind, sig, dims)
        when = self.when(raw["when"], f"{where}.when") if "when" in raw else None
        for v in outs:
            defined[v] = cond is not None
        return OpDef(
            text.strip(),
            kind,
            ins,
            outs,
            tuple(types),
            tuple(refs),
            attrs,
            when,
            cond,
            where,
        )

    def attrs(
        self, raw: Any, where: str, kind: str, sig: OpSignature, dims: set[str]
    ) -> dict[str, Any]:
        raw = self.mapping(raw, where)
        out: dict[str, Any] = {}
        for name, value in raw.items():
            if name not in sig.attrs:
                known = ", ".join(sig.attrs) or "none"
                raise self.err(where, f"{kind} has no attribute '{name}' (attributes: {known})")
            akind = sig.attrs[name][0]
            awhere = f"{where}.{name}"
            if isinstance(value, str) and value.startswith("$") and akind != "dim":
                pname = value[1:]
                ptype = self.names.get(pname)
                if ptype is None or pname in RUNTIME_SYMBOLS:
                    raise self.err(awhere, f"unknown param '{pname}'")
                ok = ptype == akind or (akind == "float" and ptype == "int")
                if not ok:
                    raise self.err(awhere, f"{kind}.{name} needs a {akind}, '{pname}' is a {ptype}")
                out[name] = value
            elif akind == "dim":
                out[name] = self.dim(value, awhere, dims)
            elif akind == "schedule":
                sched = self.mapping(value, awhere)
                self.keys(sched, SCHEDULE_KEYS, awhere)
                for k, v in sched.items():
                    if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                        raise self.err(f"{awhere}.{k}", f"expected a positive integer, got {v!r}")
                out[name] = dict(sched)
            else:
                out[name] = self.typed(value, akind, awhere)
                if kind == "attention" and name == "causal" and out[name] is not True:
                    raise self.err(
                        awhere, "causal: false is not supported (ckir's attention is causal)"
                    )
                choices = sig.choices.get(name)
                if choices is not None and out[name] not in choices:
                    raise self.err(awhere, f"{out[name]!r} is not one of {', '.join(choices)}")
        for name, (_, required) in sig.attrs.items():
            if required and name not in out:
                raise self.err(where, f"{kind} needs attribute '{name}'")
        return out


def _kind(value: Any) -> str:
    if value is None:
        return "nothing"
    if isinstance(value, bool):
        return f"boolean {value}"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return f"{type(value).__name__} {value!r}"


def _coerce(value: Any, typ: str) -> Any:
    """Check/convert a YAML or JSON scalar to a param type."""
    if typ == "bool":
        if not isinstance(value, bool):
            raise TemplateError(f"expected true/false, got {_kind(value)}")
        return value
    if typ == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            raise TemplateError(f"expected an integer, got {_kind(value)}")
        return value
    if typ == "float":
        if isinstance(value, bool):
            raise TemplateError(f"expected a number, got {_kind(value)}")
        if isinstance(value, int | float):
            f = float(value)
        elif isinstance(value, str):  # YAML 1.1 reads 1e-5 as a string
            try:
                f = float(value)
            except ValueError:
                raise TemplateError(f"expected a number, got {_kind(value)}") from None
        else:
            raise TemplateError(f"expected a number, got {_kind(value)}")
        if not math.isfinite(f):
            raise TemplateError(f"expected a finite number, got {value!r}")
        return f
    if not isinstance(value, str):
        raise TemplateError(f"expected a string, got {_kind(value)}")
    return value


def _resolve_weight(name: str, section: str, weights: Mapping[str, WeightDef]) -> WeightDef | None:
    """Body ops see layer weights by short name first, then global weights."""
    if section == "body" and _LAYER_PREFIX + name in weights:
        return weights[_LAYER_PREFIX + name]
    w = weights.get(name)
    if w is not None and w.per_layer and section != "body":
        return None
    return w


def _lookup(config: Mapping[str, Any], key: str) -> Any:
    node: Any = config
    for part in key.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return None
        node = node[part]
    return node


# ---------------------------------------------------------------------------
# The template
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class GGUFMap:
    """A template's ``gguf:`` block (docs/templates.md, "GGUF files").

    ``architectures``: the ``general.architecture`` values served (default:
    the template's ``model_types``).
    ``config``: HF config key -> GGUF metadata keys to read it from (first
    present wins; ``{arch}`` is ``general.architecture``), or the sources
    ``@tensor_absent:<gguf tensor>`` / ``@tensor_present:<gguf tensor>`` (a
    bool: whether the file has that tensor, e.g. no ``output.weight`` means tied
    embeddings) and ``@token_count`` (length of ``tokenizer.ggml.tokens``).
    ``tensors``: GGUF tensor name -> HF tensor name (``{i}`` per layer).
    ``unpermute``: HF tensor name -> the head count (a dim expression) whose
    rotary row interleave the GGUF converter applied and the writer undoes.
    ``ignore``: GGUF tensor name patterns (``{i}``, ``*``) that are not weights.
    ``reject``: GGUF tensor name pattern -> why a file with such a tensor is
    not supported (e.g. ``rope_freqs.weight``: Llama 3 RoPE scaling).
    """

    architectures: tuple[str, ...]
    config: Mapping[str, tuple[str, ...]]
    tensors: Mapping[str, str]
    unpermute: Mapping[str, str]
    ignore: tuple[str, ...] = ()
    reject: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Template:
    name: str
    path: Path
    model_types: tuple[str, ...]
    description: str
    symbols: tuple[SymbolDef, ...]
    params: tuple[ParamDef, ...]
    checks: tuple[CheckDef, ...]
    hf_prefixes: tuple[str, ...]
    ignore: tuple[str, ...]
    weights: tuple[WeightDef, ...]
    buffers: tuple[BufferDef, ...]
    header: SectionDef
    body: SectionDef
    footer: SectionDef
    gguf: GGUFMap | None = None

    @property
    def file(self) -> str:
        return display_path(self.path)

    def _err(self, where: str, msg: str) -> CkirError:
        return CkirError(f"{self.file}: {where}: {msg}")

    # -- binding ------------------------------------------------------------
    def bind(
        self,
        config: Mapping[str, Any],
        config_name: str = "config.json",
        warnings: list[str] | None = None,
    ) -> tuple[dict[str, int], dict[str, Any]]:
        """Evaluate symbols and params from a HF config: ``(symbols, params)``.

        Failed checks of severity ``warning`` are appended to ``warnings``.
        """
        tpl = f"template {self.name}"
        symbols: dict[str, int] = {}
        for s in self.symbols:
            if s.expr is not None:
                try:
                    v = s.expr.evaluate(symbols)
                except (TemplateError, DimError) as e:
                    raise CkirError(f"{config_name}: symbol {s.name} ({tpl}): {e}") from None
            else:
                found = [(k, _lookup(config, k)) for k in s.keys]
                found = [(k, v) for k, v in found if v is not None]
                if found:
                    key, v = found[0]
                    if isinstance(v, bool) or not isinstance(v, int):
                        raise CkirError(
                            f"{config_name}: key '{key}' must be an integer, got {_kind(v)} "
                            f"({tpl}, symbol {s.name})"
                        )
                elif s.default is not None:
                    try:
                        v = s.default.evaluate(symbols)
                    except (TemplateError, DimError) as e:
                        raise CkirError(
                            f"{config_name}: default of symbol {s.name} ({tpl}): {e}"
                        ) from None
                else:
                    raise CkirError(
                        f"{config_name}: missing key '{' or '.join(s.keys)}' "
                        f"({tpl} needs it for symbol {s.name}, {self.file})"
                    )
            if v <= 0:
                raise CkirError(f"{config_name}: symbol {s.name} ({tpl}) must be positive, got {v}")
            if v > MAX_SYMBOL:
                raise CkirError(f"{config_name}: symbol {s.name} ({tpl}) = {v} is too large")
            symbols[s.name] = v
        params: dict[str, Any] = {}
        for p in self.params:
            if p.value is not None:
                params[p.name] = p.value
                continue
            found = [(k, _lookup(config, k)) for k in p.keys]
            found = [(k, v) for k, v in found if v is not None]
            if found:
                key, raw = found[0]
                try:
                    v = _coerce(raw, p.type)
                except (TemplateError, DimError) as e:
                    raise CkirError(
                        f"{config_name}: key '{key}': {e} ({tpl}, param {p.name})"
                    ) from None
                if p.choices is not None and v not in p.choices:
                    allowed = ", ".join(str(c) for c in p.choices)
                    raise CkirError(
                        f"{config_name}: key '{key}' is {v!r}; {tpl} supports only {allowed}"
                    )
            elif p.default is not None:
                v = p.default
            else:
                raise CkirError(
                    f"{config_name}: missing key '{' or '.join(p.keys)}' "
                    f"({tpl} needs it for param {p.name}, {self.file})"
                )
            params[p.name] = v
        env = {**symbols, **params}
        for c in self.checks:
            if not c.cond.evaluate(env):
                msg = f"{config_name}: {c.message} ({tpl} checks: {c.cond.text})"
                if c.severity == "error":
                    raise CkirError(msg)
                if warnings is not None:
                    warnings.append(msg)
        return symbols, params

    # -- instantiation ------------------------------------------------------
    def instantiate(self, config: Mapping[str, Any], config_name: str = "config.json") -> ModelSpec:
        """Bind ``config`` and select weights/ops: the template for one model."""
        warnings: list[str] = []
        symbols, params = self.bind(config, config_name, warnings)
        env = {**symbols, **params}
        weights: dict[str, WeightSpec] = {}
        for w in self.weights:
            variant = next((v for v in w.variants if v.cond is None or v.cond.evaluate(env)), None)
            if variant is not None:
                weights[w.name] = self._weight_spec(w, variant, symbols)
        for w in weights.values():
            if w.tied_to is not None and w.tied_to not in weights:
                raise self._err(w.name, f"tied to '{w.tied_to}', which this config leaves out")
            if w.tied_to is not None and weights[w.tied_to].tied_to is not None:
                raise self._err(w.name, f"tied to '{w.tied_to}', which is itself tied")
        by_name = {w.name: w for w in self.weights}
        header = self._section(self.header, (), env, weights, by_name)
        body = self._section(self.body, header.results, env, weights, by_name)
        for (a, at), (r, rt) in zip(body.args, body.results, strict=True):
            if at != rt:
                raise self._err(
                    "body.yield",
                    f"value '{r}' has type {_fmt_type(rt)} but arg '{a}' has {_fmt_type(at)}; "
                    "the body is repeated, so they must match",
                )
        footer = self._section(self.footer, body.results, env, weights, by_name)
        assert body.repeat is not None
        try:
            layers = body.repeat.evaluate(symbols)
        except (TemplateError, DimError) as e:
            raise self._err("body.repeat", str(e)) from None
        if layers <= 0:
            raise self._err("body.repeat", f"'{body.repeat}' = {layers} is not positive")
        buffers = []
        for b in self.buffers:
            if b.cond is not None and not b.cond.evaluate(env):
                continue
            vals = self._eval_shape(b.shape, symbols, f"buffers.{b.name}.shape")
            buffers.append(BufferSpec(b.name, b.shape, vals, b.dtype, b.role, b.per_layer, b.when))
        ignore = tuple(p + pat for pat in self.ignore for p in self.hf_prefixes)
        return ModelSpec(
            template=self,
            symbols=symbols,
            params=params,
            weights=tuple(weights.values()),
            header=header,
            body=body,
            footer=footer,
            buffers=tuple(buffers),
            ignore=ignore,
            warnings=tuple(warnings),
        )

    def _eval_shape(
        self, shape: Sequence[Dim], symbols: Mapping[str, int], where: str
    ) -> tuple[int, ...]:
        try:
            vals = tuple(d.evaluate(symbols) for d in shape)
        except (TemplateError, DimError) as e:
            raise self._err(where, str(e)) from None
        for d, v in zip(shape, vals, strict=True):
            if v < 0:
                raise self._err(where, f"'{d}' = {v} is negative")
        return vals

    def _weight_spec(
        self, w: WeightDef, v: WeightVariant, symbols: Mapping[str, int]
    ) -> WeightSpec:
        shape_vals = self._eval_shape(v.shape, symbols, f"{w.where}.shape")
        hf_shape_vals: tuple[int, ...] | None = None
        if v.tied_to is None:
            if v.hf_shape is not None:
                hf_shape_vals = self._eval_shape(v.hf_shape, symbols, f"{w.where}.hf_shape")
                got = list(hf_shape_vals)
                if v.slice is not None:
                    axis, start, stop = v.slice
                    a, b = self._eval_shape((start, stop), symbols, f"{w.where}.slice")
                    if not a < b <= got[axis]:
                        raise self._err(
                            f"{w.where}.slice",
                            f"[{a}, {b}) is empty or outside axis {axis} of size {got[axis]}",
                        )
                    got[axis] = b - a
                if v.transpose:
                    got = got[::-1]
                if tuple(got) != shape_vals:
                    raise self._err(
                        w.where,
                        f"hf_shape {_fmt_dims(v.hf_shape)} after slice/transpose gives "
                        f"{list(got)}, but shape {_fmt_dims(v.shape)} is {list(shape_vals)}",
                    )
            else:
                hf_shape_vals = shape_vals[::-1] if v.transpose else shape_vals
        hf_shape = v.hf_shape
        if hf_shape is None and v.transpose:
            hf_shape = v.shape[::-1]
        hf = tuple(p + h for h in v.hf for p in self.hf_prefixes)
        return WeightSpec(
            name=w.name,
            per_layer=w.per_layer,
            shape=v.shape,
            shape_values=shape_vals,
            hf=hf,
            hf_shape=hf_shape,
            hf_shape_values=hf_shape_vals,
            slice=v.slice,
            transpose=v.transpose,
            tied_to=v.tied_to,
            gguf=v.gguf,
        )

    def _section(
        self,
        sec: SectionDef,
        incoming: tuple[tuple[str, ValueType], ...],
        env: Mapping[str, Any],
        weights: Mapping[str, WeightSpec],
        by_name: Mapping[str, WeightDef],
    ) -> SectionSpec:
        values: dict[str, ValueType] = {}
        disabled: dict[str, OpDef] = {}
        args = tuple((a, t) for a, (_, t) in zip(sec.args, incoming, strict=True))
        for name, t in (*args, *sec.inputs):
            values[name] = t
        ops = []
        for op in sec.ops:
            if op.cond is not None and not op.cond.evaluate(env):
                for v in op.outs:
                    disabled.setdefault(v, op)
                continue
            in_types = []
            for v in op.ins:
                if v not in values:
                    off = disabled[v]
                    raise self._err(
                        op.where,
                        f"value '{v}' is not produced: {off.where} is disabled "
                        f"(if {off.cond.text if off.cond else ''})",
                    )
                in_types.append(values[v])
            out_types = tuple(t if t is not None else in_types[n] for n, t in enumerate(op.types))
            for v, t in zip(op.outs, out_types, strict=True):
                if v in values:
                    raise self._err(op.where, f"value '{v}' is defined by two enabled ops")
                values[v] = t
            names = []
            for ref in op.weights:
                # a weight whose `if` is false for this config is absent: drop the reference
                wdef = _resolve_weight(ref, sec.kind, by_name)
                assert wdef is not None
                if wdef.name in weights:
                    names.append(wdef.name)
            lo, hi = GRAPH_OPS[op.kind].weights
            if not lo <= len(names) <= hi:
                missing = [
                    r
                    for r in op.weights
                    if _resolve_weight(r, sec.kind, by_name).name not in weights
                ]
                raise self._err(
                    op.where,
                    f"{op.kind} needs {lo} to {hi} weights, but this config leaves out "
                    f"{', '.join(repr(m) for m in missing)} (their 'if' is false)",
                )
            attrs: dict[str, Any] = {}
            for k, a in op.attrs.items():
                if isinstance(a, Dim):
                    attrs[k] = a.to_ir()
                elif isinstance(a, str) and a.startswith("$"):
                    akind = GRAPH_OPS[op.kind].attrs[k][0]
                    attrs[k] = float(env[a[1:]]) if akind == "float" else env[a[1:]]
                else:
                    attrs[k] = a
            ops.append(OpSpec(op.kind, op.ins, op.outs, out_types, tuple(names), attrs, op.when))
        results = []
        for r in sec.results:
            if r not in values:
                off = disabled[r]
                raise self._err(
                    f"{sec.kind}", f"value '{r}' is not produced: {off.where} is disabled"
                )
            results.append((r, values[r]))
        return SectionSpec(sec.kind, sec.repeat, args, sec.inputs, tuple(ops), tuple(results))


def _fmt_dims(shape: Sequence[Dim]) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


def _fmt_type(t: ValueType) -> str:
    return f"{_fmt_dims(t.shape)} {t.dtype}"


# ---------------------------------------------------------------------------
# Loading and selection
# ---------------------------------------------------------------------------


def load_template(path: str | Path) -> Template:
    """Load and validate one template file."""
    path = Path(path)
    if path.exists() and not path.is_file():  # a folder, or a FIFO that would block a read
        raise CkirError(f"{display_path(path)}: template is not a regular file")
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CkirError(f"{display_path(path)}: template file not found") from None
    except (OSError, UnicodeDecodeError) as e:
        raise CkirError(f"{display_path(path)}: cannot read template: {e}") from None
    try:
        doc = yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else "YAML"
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise CkirError(f"{display_path(path)}: {where}: YAML error: {problem}") from None
    return _Loader(path).load(doc)


def list_templates(templates_dir: str | Path | None = None) -> list[Template]:
    """All templates in a directory (default: ckir's ``templates/``), by file name."""
    d = Path(templates_dir) if templates_dir is not None else TEMPLATES_DIR
    return [load_template(p) for p in sorted(d.glob("*.yaml"))]


def _looks_like_path(s: str) -> bool:
    return s.endswith((".yaml", ".yml")) or "/" in s or os.sep in s


def select_template(
    model_type: str | None,
    override: str | Path | None = None,
    *,
    templates_dir: str | Path | None = None,
    config_name: str = "config.json",
) -> Template:
    """The template for ``model_type``, or ``override`` (a template name or a YAML path)."""
    d = Path(templates_dir) if templates_dir is not None else TEMPLATES_DIR
    if override is not None:
        if isinstance(override, Path) or _looks_like_path(str(override)):
            return load_template(override)
        name = str(override)
        candidate = d / f"{name}.yaml"
        if candidate.is_file():
            tpl = load_template(candidate)
            if tpl.name == name:
                return tpl
        for tpl in list_templates(d):
            if tpl.name == name:
                return tpl
        known = ", ".join(t.name for t in list_templates(d)) or "none"
        raise CkirError(f"template '{name}' not found in {display_path(d)} (templates: {known})")
    if not model_type:
        raise CkirError(f"{config_name}: no 'model_type'; pass a template explicitly")
    templates = list_templates(d)
    matches = [t for t in templates if model_type in t.model_types]
    if not matches:
        served = ", ".join(sorted({m for t in templates for m in t.model_types})) or "none"
        raise CkirError(
            f"{config_name}: model_type '{model_type}' is not served by any template in "
            f"{display_path(d)} (served: {served}); pass a template explicitly"
        )
    if len(matches) > 1:
        names = ", ".join(t.file for t in matches)
        raise CkirError(f"{config_name}: model_type '{model_type}' is served by {names}")
    return matches[0]


def select_gguf_template(
    architecture: str | None,
    override: str | Path | None = None,
    *,
    templates_dir: str | Path | None = None,
    source_name: str = "model.gguf",
) -> Template:
    """The template whose ``gguf:`` block serves ``architecture`` (``general.architecture``),
    or ``override`` (a template name or a YAML path), which must have a ``gguf:`` block."""
    d = Path(templates_dir) if templates_dir is not None else TEMPLATES_DIR
    if override is not None:
        tpl = select_template(None, override, templates_dir=d, config_name=source_name)
    else:
        if not architecture:
            raise CkirError(f"{source_name}: no 'general.architecture'; pass a template explicitly")
        templates = [t for t in list_templates(d) if t.gguf is not None]
        matches = [t for t in templates if architecture in t.gguf.architectures]  # type: ignore[union-attr]
        if not matches:
            served = sorted({a for t in templates for a in t.gguf.architectures})  # type: ignore[union-attr]
            raise CkirError(
                f"{source_name}: GGUF architecture '{architecture}' is not served by any template "
                f"in {display_path(d)} (served: {', '.join(served) or 'none'}); "
                "pass a template explicitly"
            )
        if len(matches) > 1:
            names = ", ".join(t.file for t in matches)
            raise CkirError(
                f"{source_name}: GGUF architecture '{architecture}' is served by {names}"
            )
        tpl = matches[0]
    if tpl.gguf is None:
        raise CkirError(
            f"{source_name}: template {tpl.name} has no gguf: block ({tpl.file}); "
            "it cannot import GGUF files"
        )
    return tpl
