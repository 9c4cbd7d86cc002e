"""``--annotate-quant``: finalise the qbits of the tensor table from defaults or a QConfig.

A QConfig (YAML) says how many bits the weights, the activations and the KV cache
take, with per-layer and per-tensor overrides (docs/quantization.md, "QConfig"):

```yaml
weights: 8              # every weight matrix (linear, lm_head, embed tables)
activations: 32         # every activation
kv: 32                  # every layer's KV cache
formats: {4: q4_1}      # the block format of a bit width (default: 32 f32, 16 bf16,
                        # 8 q8_0, 6 q6_k, 5 q5_k, 4 q4_0)
layers:
  0: {weights: 8}       # one layer, or a range "2-5"
tensors:                # globs on table names (``layers.{i}.mlp.down`` and ``layers.3.mlp.down``)
  "layers.*.mlp.down": 8
  lm_head: {weights: 16}
  "layers.*.h": {activations: 8}
```

Precedence: the top-level defaults, then ``layers`` entries, then ``tensors`` entries
(later ones win).  The result is the ``qbits`` of each entry of the table
(``ckir.tensor_table``) and the storage of each weight, from which lowering picks its
kernels: a weight's qbits choose its format (``formats``; a weight whose layers differ
gets ``layer_dtypes``), ``activations: 8`` on the input of a linear whose weight is in
Q8_0 / Q4_0 / Q4_1 is the int8 path (the decode GEMVs and the int8 prefill GEMMs),
``kv: 8`` a Q8_0 KV cache where the registry has a kernel that stores one.  A qbits no
kernel serves keeps the bits that are used, records ``requested`` and is named in one
line per tensor plus a summary (an error with ``strict``).
"""

from __future__ import annotations

import fnmatch
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from xdsl.context import Context
from xdsl.dialects.builtin import ArrayAttr, ModuleOp, StringAttr
from xdsl.ir import Operation, SSAValue
from xdsl.passes import ModulePass

from ckir.dialects import graph as g
from ckir.errors import CkirError
from ckir.passes.convert_weights import _why_not, matrix_weights, set_weight_dtype, source_dtypes
from ckir.tensor_table import (
    INT8_X_FORMATS,
    KV_ATTR,
    KV_NAME,
    QBITS,
    TENSOR_ATTR,
    annotate_model,
    entry,
    read_entry,
    section_prefix,
    sync_weight_qbits,
    used_activation_bits,
    value_name,
)

if TYPE_CHECKING:
    from ckir.compiler import CompileOptions
from ckir.vocab import PANEL_OF, PANEL_VALUES, WEIGHT_DTYPES

#: the QConfig keys of the three kinds of tensor, and the table roles each covers
KINDS: Mapping[str, tuple[str, ...]] = {
    "weights": ("weight", "embedding"),
    "activations": ("activation", "io"),
    "kv": ("kv",),
}
#: the storage format of a weight's qbits unless a QConfig's ``formats`` says otherwise
DEFAULT_FORMATS: Mapping[int, str] = {
    32: "f32",
    16: "bf16",
    8: "q8_0",
    6: "q6_k",
    5: "q5_k",
    4: "q4_0",
}
#: what a KV cache of each qbits is stored as
KV_FORMATS: Mapping[int, str] = {32: "f32", 8: "q8_0"}
TOP_KEYS = ("weights", "activations", "kv", "formats", "layers", "tensors")


# ------------------------------------------------------------------------ QConfig


@dataclass(frozen=True)
class QConfig:
    """A parsed QConfig: default bits per kind, formats, per-layer and per-tensor overrides."""

    defaults: Mapping[str, int] = field(default_factory=dict[str, int])
    formats: Mapping[int, str] = field(default_factory=lambda: dict(DEFAULT_FORMATS))
    #: (layers, {kind: bits}) in file order
    layers: tuple[tuple[frozenset[int], Mapping[str, int]], ...] = ()
    #: (glob, {kind: bits}; kind "" = whatever the tensor is) in file order
    tensors: tuple[tuple[str, Mapping[str, int]], ...] = ()
    source: str = "QConfig"

    def with_defaults(self, **bits: int | None) -> QConfig:
        """This config with the defaults of the kinds given (not None) set where it has none."""
        defaults = dict(self.defaults)
        for kind, value in bits.items():
            if value is not None:
                defaults.setdefault(kind, value)
        return QConfig(defaults, self.formats, self.layers, self.tensors, self.source)

    def with_format(self, dtype: str) -> QConfig:
        """``--dtype`` as a shorthand: weights default to ``dtype``'s bits, stored as ``dtype``
        (unless the config names another format for them)."""
        bits = QBITS[PANEL_VALUES.get(dtype, dtype)]
        formats = dict(self.formats)
        if bits not in self.formats or self.formats[bits] == DEFAULT_FORMATS.get(bits):
            formats[bits] = dtype
        out = QConfig(self.defaults, formats, self.layers, self.tensors, self.source)
        return out.with_defaults(weights=bits)

    def requested(
        self, kind: str, name: str, instance: str, layer: int | None, defaults: bool = True
    ) -> int | None:
        """The bits asked for one tensor (``instance``: its name in layer ``layer``).
        Without ``defaults`` only ``tensors`` entries apply (the defaults and ``layers``
        entries cover the weight matrices and the activations linear layers read)."""
        bits = self.defaults.get(kind) if defaults else None
        for layers, over in self.layers if defaults else ():
            if layer is not None and layer in layers and kind in over:
                bits = over[kind]
        for glob, over in self.tensors:
            if fnmatch.fnmatchcase(name, glob) or fnmatch.fnmatchcase(instance, glob):
                bits = over.get(kind, over.get("", bits))
        return bits


def _bits(value: Any, source: str, key: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 32:
        raise CkirError(
            f"{source}: key '{key}': expected a number of bits from 1 to 32, got {value!r}"
        )
    return value


def _kinds(value: Any, source: str, key: str, *, bare: bool) -> dict[str, int]:
    """``{weights: 8, kv: 8}`` (or, with ``bare``, a plain number of bits: key "")."""
    if bare and not isinstance(value, dict):
        return {"": _bits(value, source, key)}
    if not isinstance(value, dict):
        raise CkirError(
            f"{source}: key '{key}': expected a mapping of weights / activations / kv to bits"
        )
    out = {}
    for kind, bits in value.items():
        if kind not in KINDS:
            raise CkirError(
                f"{source}: key '{key}.{kind}': unknown (expected weights, activations or kv)"
            )
        out[str(kind)] = _bits(bits, source, f"{key}.{kind}")
    return out


def _layer_set(key: Any, source: str) -> frozenset[int]:
    text = str(key).strip()
    m = re.fullmatch(r"(\d+)(?:\s*-\s*(\d+))?", text)
    if m is None or (m.group(2) is not None and int(m.group(2)) < int(m.group(1))):
        raise CkirError(
            f"{source}: key 'layers.{key}': a layer is a number or a range 'a-b' (a <= b)"
        )
    first = int(m.group(1))
    last = int(m.group(2)) if m.group(2) is not None else first
    return frozenset(range(first, last + 1))


def _mapping(data: Any, source: str, key: str, what: str) -> dict[Any, Any]:
    value = data.get(key, {})
    if not isinstance(value, dict):
        raise CkirError(f"{source}: key '{key}': expected a mapping of {what}")
    return value


def parse_qconfig(data: Any, source: str = "QConfig") -> QConfig:
    """A QConfig from its YAML data; :class:`CkirError` naming ``source`` and the key."""
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise CkirError(f"{source}: a QConfig is a mapping ({', '.join(TOP_KEYS)})")
    for key in data:
        if key not in TOP_KEYS:
            raise CkirError(
                f"{source}: key '{key}': unknown (expected one of {', '.join(TOP_KEYS)})"
            )
    defaults = {k: _bits(data[k], source, k) for k in KINDS if k in data}
    formats = dict(DEFAULT_FORMATS)
    for bits, dtype in _mapping(data, source, "formats", "bits to a weight dtype").items():
        b = _bits(bits, source, f"formats.{bits}")
        if dtype not in WEIGHT_DTYPES or QBITS[dtype] != b:
            fitting = [d for d in WEIGHT_DTYPES if QBITS[d] == b]
            raise CkirError(
                f"{source}: key 'formats.{bits}': {dtype!r} is not a {b}-bit weight dtype "
                f"(choose from {', '.join(fitting) or 'none'})"
            )
        formats[b] = dtype
    layers = [
        (_layer_set(key, source), _kinds(value, source, f"layers.{key}", bare=False))
        for key, value in _mapping(data, source, "layers", "layer (or 'a-b') to bits").items()
    ]
    tensors = [
        (str(glob), _kinds(value, source, f"tensors.{glob}", bare=True))
        for glob, value in _mapping(data, source, "tensors", "name globs to bits").items()
    ]
    return QConfig(defaults, formats, tuple(layers), tuple(tensors), source)


def read_qconfig_text(path: str | Path) -> str:
    """The text of a QConfig file, checked (:func:`parse_qconfig_text`)."""
    path = Path(path)
    try:
        text = path.read_text()
    except OSError as err:
        raise CkirError(f"{path}: cannot read the QConfig ({err.strerror or err})") from None
    parse_qconfig_text(text, str(path))
    return text


def parse_qconfig_text(text: str, source: str) -> QConfig:
    """A QConfig from YAML text (errors name ``source`` and the key, or the line)."""
    import yaml

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        at = f" (line {mark.line + 1})" if mark is not None else ""
        raise CkirError(f"{source}: not valid YAML{at}") from None
    return parse_qconfig(data, source)


def load_qconfig(path: str | Path) -> QConfig:
    """Read a QConfig YAML file (errors name the file and the key)."""
    return parse_qconfig_text(read_qconfig_text(path), str(path))


# -------------------------------------------------------------------- finalising


@dataclass
class QuantReport:
    """What :func:`annotate_quant` decided: the tensors whose asked qbits no kernel serves
    (one line each) and the weights it stored in another dtype."""

    unserved: list[str] = field(default_factory=list[str])
    tensors: int = 0
    #: weight name -> the dtype of each layer (one entry for a weight that is not per layer)
    weight_dtypes: dict[str, tuple[str, ...]] = field(default_factory=dict[str, tuple[str, ...]])
    #: weights that keep another storage than their qbits ask: name -> (dtype kept, why)
    weight_fallbacks: dict[str, tuple[str, str]] = field(default_factory=dict[str, tuple[str, str]])

    @property
    def summary(self) -> str:
        return (
            f"--annotate-quant: {len(self.unserved)} of {self.tensors} tensors keep other qbits "
            "than asked (no kernel serves them)"
        )


def kv_store_formats() -> frozenset[str]:
    """The KV-cache dtypes the registry has a ``kv_store`` kernel for."""
    from ckir.registry import load_registry

    return frozenset(
        spec.operands[2].dtype
        for spec in load_registry().values()
        if spec.op == "kv_store" and len(spec.operands) > 2
    )


def _layers(model: g.ModelOp) -> int:
    _, body, _ = model.sections()
    if body is None:
        return 0
    from ckir.dialects.dims import evaluate_dim

    return evaluate_dim(body.repeat.text, model.symbol_values())


def _instances(name: str, layers: int) -> list[tuple[str, int | None]]:
    if "{i}" not in name:
        return [(name, None)]
    return [(name.replace("{i}", str(i)), i) for i in range(layers)]


def _panel(dtype: str) -> str:
    return PANEL_OF.get(dtype, dtype)


def _weight_decisions(
    model: g.ModelOp, config: QConfig, report: QuantReport, panels: bool
) -> dict[str, tuple[str, ...]]:
    """Each weight's dtype per layer from its asked qbits (and the unserved lines)."""
    symbols = model.symbol_values()
    layers = _layers(model)
    weights = model.weights()
    matrix_names = {d.weight_name for d in matrix_weights(model)[0]}
    out: dict[str, tuple[str, ...]] = {}
    for name, decl in weights.items():
        if decl.tied_to_name is not None:
            report.tensors += 1
            continue  # takes its target's storage
        info = read_entry(decl.attributes[TENSOR_ATTR])
        cur_dtypes = [decl.layer_dtype(layer) for _, layer in _instances(name, layers)]
        chosen: list[str] = []
        asked_any: int | None = None
        for (inst, layer), cur in zip(_instances(name, layers), cur_dtypes, strict=True):
            asked = config.requested("weights", name, inst, layer, name in matrix_names)
            if asked is None or asked == QBITS[cur]:
                chosen.append(cur)
                continue
            why = _weight_why_not(decl, asked, config, name in matrix_names, symbols)
            if why is None:
                chosen.append(config.formats[asked])
                continue
            chosen.append(cur)
            if asked_any is None:
                asked_any = asked
                report.weight_fallbacks[name] = (cur, why)
                source = decl.hf_name or decl.gguf_name
                tensor = f" (tensor '{source}')" if source else ""
                report.unserved.append(
                    f"graph.weight {name}{tensor}: weights: {asked} asked, stays "
                    f"{QBITS[cur]} ({cur}): {why}"
                )
        report.tensors += 1
        if asked_any is not None:
            decl.attributes[TENSOR_ATTR] = entry(
                str(info["role"]), str(info["layout"]), QBITS[chosen[0]], requested=asked_any
            )
        if chosen != cur_dtypes:
            out[name] = tuple(chosen)
    _apply_weights(model, out, panels)
    sync_weight_qbits(model)
    return out


def _weight_why_not(
    decl: g.WeightOp, bits: int, config: QConfig, is_matrix: bool, symbols: Mapping[str, int]
) -> str | None:
    """Why weight ``decl`` cannot be stored at ``bits`` (None: it can)."""
    if bits not in config.formats:
        have = ", ".join(f"{b} ({d})" for b, d in sorted(config.formats.items(), reverse=True))
        return f"no weight format has {bits} bits (formats: {have})"
    if not is_matrix:
        return "only the matrices of linear, lm_head and embed ops change their storage"
    fmt = config.formats[bits]
    if fmt == "f32":
        return None  # every dtype widens to f32 (--widen-weights)
    return _why_not(decl, fmt, source_dtypes(fmt), symbols)


def _apply_weights(model: g.ModelOp, decided: Mapping[str, tuple[str, ...]], panels: bool) -> None:
    """Declare each decided weight in its dtype (``layer_dtypes`` where the layers differ;
    with ``panels``, those in the panel dtype of each layer's values, since ``ckir
    compile``'s packing converts only whole declarations)."""
    weights = model.weights()
    groups: dict[str, list[str]] = {}
    for name, dtypes in decided.items():
        decl = weights[name]
        if len(set(dtypes)) == 1:
            groups.setdefault(dtypes[0], []).append(name)
            if g.LAYER_DTYPES_ATTR in decl.attributes:
                del decl.attributes[g.LAYER_DTYPES_ATTR]
            continue
        per = [_panel(d) if panels else d for d in dtypes]
        decl.attributes[g.LAYER_DTYPES_ATTR] = StringAttr(",".join(per))
        groups.setdefault(per[0], []).append(name)
    for dtype, names in groups.items():
        set_weight_dtype(model, dtype, names)


def _read_by_linear(value: SSAValue) -> bool:
    """Whether a linear layer (or the LM head) multiplies ``value``."""
    return any(
        isinstance(u.operation, g.ComputeOp)
        and u.operation.kind in ("linear", "lm_head")
        and u.index == 0
        for u in value.uses
    )


def _consumers(value: SSAValue) -> list[Operation]:
    return [use.operation for use in value.uses]


def _activation_why_not(
    model: g.ModelOp, value: SSAValue, bits: int, layer: int | None
) -> str | None:
    """Why activation ``value`` cannot be held at ``bits`` (None: a kernel serves it)."""
    if bits == 32:
        if used_activation_bits(value, layer) == 8:
            return (
                "the linear layers reading it take int8 activations with their Q8_0 / Q4 "
                "weights (decode's GEMV quantizes x; prefill can keep fp32 x at run time: "
                "int8_prefill = False)"
            )
        return None
    if bits != 8:
        return "the runtime computes activations in fp32, and in int8 only as a linear's input"
    weights = model.weights()
    users = _consumers(value)
    if not users:
        return "nothing reads it"
    for op in users:
        if not isinstance(op, g.ComputeOp) or op.kind not in ("linear", "lm_head"):
            kind = op.name
            return f"{kind} reads it, and only linear layers read int8 activations"
        decl = weights[op.weight_names[0]]
        while decl.tied_to_name is not None:
            decl = weights[decl.tied_to_name]
        dtype = decl.layer_dtype(layer)
        if dtype not in INT8_X_FORMATS:
            return (
                f"{op.name} reads it with weight {decl.weight_name} in {dtype}; int8 "
                f"activations go with q8_0 / q4_0 / q4_1 weights only"
            )
    return None


def _input_why_not(i: int, bits: int, layer: int | None) -> str | None:
    return None if bits == 32 else "an input is given as i32 token ids"


def _kv_why_not(
    kv_formats: frozenset[str],
    symbols: Mapping[str, int],
    op: Operation,
    i: int,
    bits: int,
    layer: int | None,
) -> str | None:
    fmt = KV_FORMATS.get(bits)
    if fmt is None:
        return f"no KV cache format has {bits} bits (32: f32, 8: q8_0)"
    if fmt not in kv_formats:
        return f"no kernel stores a {fmt} KV cache (the registry has no kv_store_{fmt})"
    return None


def _annotate_values(
    model: g.ModelOp, config: QConfig, report: QuantReport, kv_formats: frozenset[str]
) -> None:
    """The qbits of ``model``'s inputs, activations and KV caches."""
    layers = _layers(model)
    counter: dict[str, int] = {}
    for op in model.walk():
        if isinstance(op, g.InputOp):
            report.tensors += 1
            names = [op.input_name.data]
            _finish(op, TENSOR_ATTR, names, config, "activations", layers, report, _input_why_not)
        elif isinstance(op, g.ComputeOp):
            names = [value_name(op, i, counter) for i in range(len(op.results))]
            report.tensors += len(names)
            act = partial(_result_why_not, model, op)
            _finish(op, TENSOR_ATTR, names, config, "activations", layers, report, act)
            if op.kind == "attention":
                report.tensors += 1
                kv_names = [f"{section_prefix(op)}.{KV_NAME}"]
                kv = partial(_kv_why_not, kv_formats, model.symbol_values(), op)
                _finish(op, KV_ATTR, kv_names, config, "kv", layers, report, kv)


def _result_why_not(
    model: g.ModelOp, op: g.ComputeOp, i: int, bits: int, layer: int | None
) -> str | None:
    return _activation_why_not(model, op.results[i], bits, layer)


def annotate_quant(
    module: ModuleOp, config: QConfig, *, panels: bool = False, strict: bool = False
) -> QuantReport:
    """Finalise the qbits of every table entry of ``module`` from ``config`` and store each
    weight in the format of its qbits (module changed in place).  With ``strict``, a
    qbits no kernel serves is a :class:`CkirError` listing them all."""
    report = QuantReport()
    kv_formats = kv_store_formats()
    for model in module.ops:
        if not isinstance(model, g.ModelOp):
            continue
        annotate_model(model)  # entries that are missing
        decided = _weight_decisions(model, config, report, panels)
        report.weight_dtypes.update(decided)
        _annotate_values(model, config, report, kv_formats)
    if report.unserved and strict:
        raise CkirError(f"--strict: {report.summary}: " + "; ".join(report.unserved))
    return report


def _finish(
    op: Operation,
    attr: str,
    names: Sequence[str],
    config: QConfig,
    kind: str,
    layers: int,
    report: QuantReport,
    why_not: Any,
) -> None:
    """Set the qbits of each entry of ``op``'s ``attr`` (one per name) from ``config``."""
    old = op.attributes[attr]
    items = list(old.data) if isinstance(old, ArrayAttr) else [old]
    new = []
    for i, (name, item) in enumerate(zip(names, items, strict=True)):
        info = read_entry(item)
        cur = int(info["qbits"])  # type: ignore[arg-type]
        if str(info["role"]) not in KINDS[kind]:
            new.append(item)
            continue
        per: list[int] = []
        asked_unserved: int | None = None
        defaults = kind != "activations" or _read_by_linear(op.results[i])
        for inst, layer in _instances(name, layers):
            if kind == "activations" and isinstance(op, g.ComputeOp):
                cur = used_activation_bits(op.results[i], layer)  # after the weights' change
            asked = config.requested(kind, name, inst, layer, defaults)
            if asked is None or asked == cur:
                per.append(cur)
                continue
            why = why_not(i, asked, layer)
            if why is None:
                per.append(asked)
            else:
                per.append(cur)
                if asked_unserved is None:
                    asked_unserved = asked
                    what = "kv" if kind == "kv" else kind
                    report.unserved.append(
                        f"{op.name} {name}: {what}: {asked} asked, stays {cur}: {why}"
                    )
        extra: dict[str, int | Sequence[int]] = {}
        if len(set(per)) > 1:
            extra["layer_qbits"] = per
        if asked_unserved is not None:
            extra["requested"] = asked_unserved
        elif isinstance(info.get("requested"), int) and info["requested"] not in per:
            extra["requested"] = int(info["requested"])  # type: ignore[arg-type]
        new.append(entry(str(info["role"]), str(info["layout"]), per[0] if per else cur, **extra))
    op.attributes[attr] = new[0] if not isinstance(old, ArrayAttr) else ArrayAttr(new)


def apply_qconfig(
    module: ModuleOp, options: CompileOptions, warn: Callable[[str], None]
) -> dict[str, tuple[str, str]]:
    """``ckir compile --qconfig``: :func:`annotate_quant` with the options' QConfig
    (``--dtype`` as its weights' shorthand, ``--strict``), each unserved qbits passed to
    ``warn``; returns the weights that keep another storage: name -> (dtype, why)."""
    assert options.qconfig is not None and options.qconfig_text is not None
    config = parse_qconfig_text(options.qconfig_text, str(options.qconfig))
    if options.dtype is not None:
        config = config.with_format(options.dtype)
    report = annotate_quant(module, config, panels=options.uses_panels, strict=options.strict)
    for line in report.unserved:
        warn(line)
    if report.unserved:
        warn(f"{report.summary} (--strict makes this an error)")
    return report.weight_fallbacks


def asks_int8_activations(options: CompileOptions) -> bool:
    """Whether the options' QConfig asks for 8-bit activations anywhere (its defaults,
    a layer or a tensor): the build then prefers the int8 prefill path."""
    if options.qconfig is None or options.qconfig_text is None:
        return False
    config = parse_qconfig_text(options.qconfig_text, str(options.qconfig))
    asked = [config.defaults.get("activations")]
    asked += [over.get("activations") for _, over in config.layers]
    asked += [over.get("activations") for _, over in config.tensors]
    return 8 in asked


def kv_cache_dtype(module: ModuleOp) -> str:
    """The KV-cache dtype the tensor table of ``module`` asks for (``kv`` qbits of every
    ``graph.attention``, every layer): ``"q8_0"`` when all are 8, else ``"f32"``.  A
    table whose layers differ is an error: the cache has one format for the whole model."""
    bits: set[int] = set()
    for op in module.walk():
        if isinstance(op, g.ComputeOp) and op.kind == "attention" and KV_ATTR in op.attributes:
            info = read_entry(op.attributes[KV_ATTR])
            per = info.get("layer_qbits") or (info["qbits"],)
            bits.update(int(b) for b in per)  # type: ignore[union-attr, arg-type]
    if len(bits) > 1:
        raise CkirError(
            f"--qconfig: the KV cache is asked for {' and '.join(map(str, sorted(bits)))} bits "
            "on different layers; it takes one format for the whole model"
        )
    return KV_FORMATS.get(next(iter(bits)), "f32") if bits else "f32"


def sync_table(module: ModuleOp) -> None:
    """Bring the tensor table in line with what the module stores after its weights
    were converted or packed (``ckir compile``): weights' and activations' qbits,
    earlier ``requested`` entries kept."""
    annotate_quant(module, QConfig())


@dataclass(frozen=True)
class AnnotateQuantPass(ModulePass):
    """Finalise the tensor table's qbits from defaults or a QConfig and store the weights
    in the formats of their qbits (module docstring: the QConfig format).

    Lowering then picks its kernels from the weights' storage; an ``activations: 8``
    entry is served where a Q8_0 / Q4 linear reads the tensor, ``kv: 8`` where the
    registry has a Q8_0 ``kv_store``.  A qbits no kernel serves is named, one warning
    line per tensor on stderr plus a summary (``strict``: an error), and keeps the bits
    that are used (``requested`` records the asked ones).  Runs ``--annotate-tensors``
    first where entries are missing.

    Options:
      config (str, default ""): a QConfig YAML file.
      weights, activations, kv (int, default 0 = keep): the defaults where the config
      gives none.
      dtype (str, default ""): ``--dtype`` as a shorthand: weights default to its bits,
      stored as it.
      panels (bool, default false): a weight whose layers differ gets the panel dtypes
      of its layers' values (what ``ckir compile`` stores).
      strict (bool, default false): a qbits no kernel serves is an error.

    Example: ``ckir-opt graph.mlir --annotate-quant{weights=8} --lower-decode``:
    ``graph.weight @"layers.{i}.attn.wq" : [H*D, E] f32 ... {tensor = {role = "weight",
    layout = "[N, K]", qbits = 32 : i64}}`` becomes ``... : [H*D, E] q8_0 ... {tensor =
    {..., qbits = 8 : i64}}`` and decode calls ``gemv_q8_0``.
    """

    name = "annotate-quant"

    config: str = ""
    weights: int = 0
    activations: int = 0
    kv: int = 0
    dtype: str = ""
    panels: bool = False
    strict: bool = False

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        config = load_qconfig(self.config) if self.config else QConfig()
        if self.dtype:
            if self.dtype not in WEIGHT_DTYPES:
                raise CkirError(f"annotate-quant: unknown dtype {self.dtype!r}")
            config = config.with_format(self.dtype)
        config = config.with_defaults(
            weights=self.weights or None, activations=self.activations or None, kv=self.kv or None
        )
        report = annotate_quant(op, config, panels=self.panels, strict=self.strict)
        for line in report.unserved:
            print(f"warning: {line}", file=sys.stderr)
        if report.unserved:
            print(f"warning: {report.summary}", file=sys.stderr)


__all__ = [
    "AnnotateQuantPass",
    "QConfig",
    "QuantReport",
    "annotate_quant",
    "load_qconfig",
    "parse_qconfig",
]
