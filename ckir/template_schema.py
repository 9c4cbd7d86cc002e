"""The template data model: what a template file says (``*Def``), validated, and what
it gives for one config (``*Spec``), as frozen dataclasses; the :class:`Template`.

The loader (:mod:`ckir.template_loader`) builds a :class:`Template` from YAML;
:meth:`Template.instantiate` (:mod:`ckir.template_instantiate`) binds a HF
config and gives a :class:`ModelSpec`, which the frontends turn into graph IR.
Also here: how values are checked against a param type (:func:`coerce`) and
how a section names its weights (:func:`resolve_weight`), shared by both.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ckir.dialects.dims import Dim
from ckir.errors import CkirError
from ckir.template_conditions import Condition, TemplateError

#: how a per-layer weight's name starts (the template's body refers to it without)
LAYER_PREFIX = "layers.{i}."


def display_path(path: Path) -> str:
    """A short, stable way to show a path in an error message."""
    try:
        rel = os.path.relpath(path)
    except ValueError:  # different drive on Windows
        return str(path)
    return rel if not rel.startswith("..") else str(path)


# ---------------------------------------------------------------------------
# Template data model (what the YAML says, validated)
# ---------------------------------------------------------------------------

#: the types a param may have (``params: {x: {type: ...}}``)
PARAM_TYPES = ("float", "int", "bool", "str", "floats")


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
    #: an int param read from a list of strings: the period n of this entry (it must
    #: sit exactly at the positions i with (i + 1) % n == 0); None: a plain scalar
    period_of: str | None = None


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


def kind_of(value: Any) -> str:
    """How a YAML / JSON value reads in an error message ("a list", "int 3")."""
    if value is None:
        return "nothing"
    if isinstance(value, bool):
        return f"boolean {value}"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return f"{type(value).__name__} {value!r}"


def coerce(value: Any, typ: str) -> Any:
    """Check/convert a YAML or JSON scalar to a param type (``floats``: a list of numbers,
    as a tuple of floats)."""
    if typ == "floats":
        if not isinstance(value, list | tuple):
            raise TemplateError(f"expected a list of numbers, got {kind_of(value)}")
        out = []
        for n, v in enumerate(value):
            try:
                out.append(coerce(v, "float"))
            except TemplateError as e:
                raise TemplateError(f"item {n}: {e}") from None
        return tuple(out)
    if typ == "bool":
        if not isinstance(value, bool):
            raise TemplateError(f"expected true/false, got {kind_of(value)}")
        return value
    if typ == "int":
        if isinstance(value, bool) or not isinstance(value, int):
            raise TemplateError(f"expected an integer, got {kind_of(value)}")
        return value
    if typ == "float":
        if isinstance(value, bool):
            raise TemplateError(f"expected a number, got {kind_of(value)}")
        if isinstance(value, int | float):
            f = float(value)
        elif isinstance(value, str):  # YAML 1.1 reads 1e-5 as a string
            try:
                f = float(value)
            except ValueError:
                raise TemplateError(f"expected a number, got {kind_of(value)}") from None
        else:
            raise TemplateError(f"expected a number, got {kind_of(value)}")
        if not math.isfinite(f):
            raise TemplateError(f"expected a finite number, got {value!r}")
        return f
    if not isinstance(value, str):
        raise TemplateError(f"expected a string, got {kind_of(value)}")
    return value


def resolve_weight(name: str, section: str, weights: Mapping[str, WeightDef]) -> WeightDef | None:
    """Body ops see layer weights by short name first, then global weights."""
    if section == "body" and LAYER_PREFIX + name in weights:
        return weights[LAYER_PREFIX + name]
    w = weights.get(name)
    if w is not None and w.per_layer and section != "body":
        return None
    return w


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
    embeddings), ``@token_count`` (length of ``tokenizer.ggml.tokens``) and
    ``@wavelength_factors:<gguf tensor>`` (the wavelength-band RoPE scaling whose
    per-pair frequency divisors the tensor holds, as a ``rope_scaling`` object),
    ``@longrope_factors:<short tensor>,<long tensor>`` (LongRoPE's two tables of
    per-pair divisors as a ``rope_scaling`` object) and
    ``@expr:<arithmetic over metadata keys>`` (:mod:`ckir.metadata_expr`).
    ``tensors``: GGUF tensor name -> HF tensor name (``{i}`` per layer).
    ``unpermute``: HF tensor name -> the head count (a dim expression) whose
    rotary row interleave the GGUF converter applied and the writer undoes.
    ``ignore``: GGUF tensor name patterns (``{i}``, ``*``) that are not weights.
    ``reject``: GGUF tensor name pattern -> why a file with such a tensor is
    not supported.
    ``tokenizer``: how these files' SentencePiece vocabulary is read (option ->
    value, :data:`ckir.tokenizer_gguf.TOKENIZER_OPTIONS`; empty: the defaults).
    """

    architectures: tuple[str, ...]
    config: Mapping[str, tuple[str, ...]]
    tensors: Mapping[str, str]
    unpermute: Mapping[str, str]
    ignore: tuple[str, ...] = ()
    reject: Mapping[str, str] = field(default_factory=dict)
    tokenizer: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Template:
    """One template file, validated (:func:`ckir.template_loader.load_template`)."""

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

    def error(self, where: str, msg: str) -> CkirError:
        """A one-line error naming this template's file and ``where`` in it."""
        return CkirError(f"{self.file}: {where}: {msg}")

    def bind(
        self,
        config: Mapping[str, Any],
        config_name: str = "config.json",
        warnings: list[str] | None = None,
    ) -> tuple[dict[str, int], dict[str, Any]]:
        """Evaluate symbols and params from a HF config: ``(symbols, params)``.

        Failed checks of severity ``warning`` are appended to ``warnings``
        (:func:`ckir.template_instantiate.bind`).
        """
        from ckir.template_instantiate import bind

        return bind(self, config, config_name, warnings)

    def instantiate(self, config: Mapping[str, Any], config_name: str = "config.json") -> ModelSpec:
        """Bind ``config`` and select weights/ops: the template for one model
        (:func:`ckir.template_instantiate.instantiate`)."""
        from ckir.template_instantiate import instantiate

        return instantiate(self, config, config_name)
