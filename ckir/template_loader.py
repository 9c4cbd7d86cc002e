"""The template loader: a template file (YAML) -> a validated
:class:`~ckir.template_schema.Template`.

:func:`load_template` reads the file (duplicate keys are an error) and
:class:`_Loader` checks every key against the format of docs/templates.md:
symbols and params, checks, weights and their variants, buffers, the
header/body/footer op wiring against the graph op signatures
(:data:`ckir.vocab.GRAPH_OPS`) and the ``gguf:`` block.  Every mistake raises
:class:`~ckir.errors.CkirError` with one line naming the file and the key or op.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ckir import metadata_expr
from ckir.dialects.dims import TOKENS, Dim, DimError
from ckir.errors import CkirError
from ckir.template_conditions import Condition, TemplateError, parse_condition, parse_dim
from ckir.template_parts import OP_TEXT, Fragment, Part, load_part, read_yaml_file
from ckir.template_schema import (
    LAYER_PREFIX,
    PARAM_TYPES,
    BufferDef,
    CheckDef,
    GGUFMap,
    OpDef,
    ParamDef,
    SectionDef,
    SymbolDef,
    Template,
    ValueType,
    WeightDef,
    WeightVariant,
    coerce,
    display_path,
    kind_of,
    resolve_weight,
)
from ckir.vocab import GRAPH_OPS, MODES, SCHEDULE_KEYS, VALUE_DTYPES, OpSignature

#: dim symbols bound at run time, never by the config (``T`` = tokens of a call)
RUNTIME_SYMBOLS = (TOKENS,)


_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
_IDENT_RE = re.compile(rf"^{_IDENT}$")


# ---------------------------------------------------------------------------
# Loading and validation
# ---------------------------------------------------------------------------



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
    "include",
)
_GGUF_KEYS = ("architectures", "config", "tensors", "unpermute", "ignore", "reject", "tokenizer")
_GGUF_TENSOR_SOURCES = (
    "@tensor_absent:",
    "@tensor_present:",
    "@wavelength_factors:",
    "@longrope_factors:",
)
_REQUIRED_TOP = ("name", "model_types", "symbols", "weights", "header", "body", "footer")


class _Loader:
    """Validates one parsed YAML document into a :class:`Template`."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.file = display_path(path)
        self.names: dict[str, str] = {}  # symbol/param name -> type, for conditions
        self.defined_in: dict[str, str] = {}  # param name -> the file that defines it
        self.fragments: dict[str, Fragment] = {}  # from the included parts

    def err(self, where: str, msg: str) -> CkirError:
        return CkirError(f"{self.file}: {where}: {msg}")

    # -- small typed getters ------------------------------------------------
    def mapping(self, value: Any, where: str) -> dict:
        if not isinstance(value, dict):
            raise self.err(where, f"expected a mapping, got {kind_of(value)}")
        return value

    def seq(self, value: Any, where: str) -> list:
        if not isinstance(value, list):
            raise self.err(where, f"expected a list, got {kind_of(value)}")
        return value

    def string(self, value: Any, where: str) -> str:
        if not isinstance(value, str) or not value:
            raise self.err(where, f"expected a non-empty string, got {kind_of(value)}")
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
            raise self.err("description", f"expected a string, got {kind_of(description)}")
        parts = self.includes(doc.get("include", []))
        symbols = self.symbols(doc["symbols"])
        params: tuple[ParamDef, ...] = ()
        checks: tuple[CheckDef, ...] = ()
        for part in parts:
            sub = _Loader(part.path)
            sub.names, sub.defined_in = self.names, self.defined_in  # one name space
            params += sub.params(part.params)
            checks += sub.checks(part.checks)
        params += self.params(doc.get("params", {}))
        checks += self.checks(doc.get("checks", []))
        if "gguf" in doc:
            doc = {**doc, "gguf": self.with_part_gguf(doc["gguf"], parts)}
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
                if v.startswith("@expr:"):
                    try:
                        metadata_expr.parse(v.removeprefix("@expr:"))
                    except metadata_expr.MetadataExprError as e:
                        raise self.err(where, str(e)) from None
                    special = True
                if v.startswith("@") and not special:
                    raise self.err(
                        where,
                        f"unknown source '{v}' (sources: a GGUF key, @token_count, "
                        "@tensor_absent:<name>, @tensor_present:<name>, "
                        "@wavelength_factors:<name>, @longrope_factors:<short>,<long>, "
                        "@expr:<arithmetic over GGUF keys>)",
                    )
                if v.startswith(_GGUF_TENSOR_SOURCES) and not v.split(":", 1)[1]:
                    raise self.err(where, f"'{v}' names no tensor")
                if v.startswith("@longrope_factors:") and len(
                    [n for n in v.split(":", 1)[1].split(",") if n]
                ) != 2:
                    raise self.err(
                        where, f"'{v}' must name two tensors: <short factors>,<long factors>"
                    )
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
        return GGUFMap(arches, config, tensors, unpermute, ignore, reject, self.gguf_tokenizer(d))

    def gguf_tokenizer(self, d: dict) -> dict[str, str]:
        """``gguf.tokenizer``: how a SentencePiece vocabulary of these files is read
        (option -> value, :data:`ckir.tokenizer_gguf.TOKENIZER_OPTIONS`)."""
        from ckir.tokenizer_gguf import TOKENIZER_OPTIONS

        out: dict[str, str] = {}
        raw = self.mapping(d.get("tokenizer", {}), "gguf.tokenizer")
        self.keys(raw, tuple(TOKENIZER_OPTIONS), "gguf.tokenizer")
        for key, value in raw.items():
            allowed = TOKENIZER_OPTIONS[key]
            if value not in allowed:
                raise self.err(
                    f"gguf.tokenizer.{key}",
                    f"'{value}' is not one of {', '.join(allowed)}",
                )
            out[key] = value
        return out

    def config_keys(self, d: dict, where: str) -> tuple[str, ...]:
        if "key" not in d:
            return ()
        return self.strings(d["key"], f"{where}.key")

    def includes(self, raw: Any) -> tuple[Part, ...]:
        parts: list[Part] = []
        for n, name in enumerate(self.seq(raw, "include")):
            part = load_part(self.path, name, f"include[{n}]")
            if any(p.name == part.name for p in parts):
                raise self.err(f"include[{n}]", f"part '{part.name}' is included twice")
            for fname, fragment in part.fragments.items():
                if fname in self.fragments:
                    raise self.err(
                        f"include[{n}]",
                        f"fragment '{fname}' is defined by {self.fragments[fname].file} "
                        f"and {fragment.file}",
                    )
                self.fragments[fname] = fragment
            parts.append(part)
        return tuple(parts)

    def with_part_gguf(self, raw: Any, parts: tuple[Part, ...]) -> Any:
        """The ``gguf:`` block with the parts' ``gguf_config`` entries added to its config."""
        extra = [(p, k, v) for p in parts for k, v in p.gguf_config.items()]
        if not extra or not isinstance(raw, dict):
            return raw  # nothing to add, or a malformed block that gguf() reports
        config = dict(self.mapping(raw.get("config", {}), "gguf.config"))
        for part, key, value in extra:
            if key in config:
                raise self.err(
                    "gguf.config", f"'{key}' is also given by {display_path(part.path)}"
                )
            config[key] = value
        return {**raw, "config": config}

    def expand_use(
        self, raw: dict[str, Any], where: str
    ) -> tuple[tuple[str, ...], list[tuple[dict[str, Any], str]]]:
        """A section's ``- use: outs = fragment(ins)``: its outs, and the fragment's ops
        with their positions."""
        self.keys(raw, ("use",), where)
        text = self.string(raw["use"], f"{where}.use")
        m = OP_TEXT.match(text)
        if not m:
            raise self.err(where, f"use '{text}' is not 'out[, out] = fragment(in, ...)'")
        outs = tuple(v.strip() for v in m.group(1).split(","))
        ins = tuple(v.strip() for v in m.group(3).split(",")) if m.group(3) else ()
        fragment = self.fragments.get(m.group(2))
        if fragment is None:
            known = ", ".join(sorted(self.fragments)) or "none: the template includes no part"
            raise self.err(where, f"unknown fragment '{m.group(2)}' (known: {known})")
        if len(ins) != len(fragment.args) or len(outs) != len(fragment.results):
            raise self.err(
                where,
                f"fragment '{fragment.name}' of {fragment.file} takes {len(fragment.args)} "
                f"inputs and defines {len(fragment.results)} values; "
                f"got {len(ins)} and {len(outs)}",
            )
        return outs, [
            (op, f"{where} (use {fragment.name}: {fragment.file} ops[{j}])")
            for j, op in enumerate(fragment.expand(outs, ins))
        ]

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
            if name in self.defined_in:
                raise self.err(where, f"'{name}' is already a param of {self.defined_in[name]}")
            if name in self.names or name in RUNTIME_SYMBOLS:
                raise self.err(where, f"'{name}' is already a symbol")
            if isinstance(spec, str):
                spec = {"key": spec}
            spec = self.mapping(spec, where)
            self.keys(spec, ("key", "type", "default", "value", "choices", "period_of"), where)
            typ = spec.get("type", "float")
            if typ not in PARAM_TYPES:
                raise self.err(
                    f"{where}.type", f"unknown type {typ!r} (types: {', '.join(PARAM_TYPES)})"
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
            period_of = spec.get("period_of")
            if period_of is not None and (typ != "int" or not isinstance(period_of, str)):
                raise self.err(
                    f"{where}.period_of", "needs type int and a string (the list entry)"
                )
            out.append(ParamDef(name, typ, keys, default, value, choices, period_of))
            self.names[name] = typ
            self.defined_in[name] = self.file
        return tuple(out)

    def typed(self, value: Any, typ: str, where: str) -> Any:
        try:
            return coerce(value, typ)
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
            name = LAYER_PREFIX + key if per_layer else key
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
            raise self.err(f"{where}.transpose", f"expected true/false, got {kind_of(transpose)}")
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
            where = f"{kind}.ops[{n}]"
            if isinstance(raw_op, dict) and "use" in raw_op:
                outs, expanded = self.expand_use(raw_op, where)
                for op_raw, op_where in expanded:
                    ops.append(self.op(op_raw, op_where, kind, weights, act_dims, defined))
                for v in outs:
                    if v not in defined:
                        raise self.err(where, f"the fragment does not define '{v}'")
                continue
            ops.append(self.op(raw_op, where, kind, weights, act_dims, defined))
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
        m = OP_TEXT.match(text)
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
            if resolve_weight(name, section, weights) is None:
                hint = (
                    " (layer weights are used only in the body)"
                    if section != "body" and LAYER_PREFIX + name in weights
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


def load_template(path: str | Path) -> Template:
    """Load and validate one template file (and the parts it includes)."""
    path = Path(path)
    return _Loader(path).load(read_yaml_file(path, "template"))
