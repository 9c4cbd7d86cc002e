"""GGUF file (llama.cpp's format) -> graph dialect module, and its weight source.

The file is read with the ``gguf`` package's ``GGUFReader`` (memory-mapped;
no hand-written parser).  Nothing here knows an architecture: the template
is chosen by ``general.architecture`` (its ``gguf.architectures``) and its
``gguf:`` block says which metadata keys give which config keys and which
GGUF tensor is which weight (docs/templates.md, "GGUF files").  The same
template engine and :func:`~ckir.frontend.build_graph.build_graph` as the HF
frontend build the graph, so both frontends produce the same ops; only the
``graph.weight`` declarations differ::

    graph.weight @"layers.{i}.attn.wq" : [H*D, E] q4_1 gguf "blk.{i}.attn_q.weight"
        attributes {gguf_unpermute = "H"}

Weight dtypes: F32 / F16 / BF16 tensors are declared ``f32`` (converted when
weights.bin is written); Q8_0 / Q4_0 / Q4_1 / Q5_0 / Q5_1 and Q4_K / Q5_K / Q6_K
matrices keep their block bytes and are declared ``q8_0`` / ``q4_0`` / ``q4_1`` /
``q5_0`` / ``q5_1`` / ``q4_k`` / ``q5_k`` / ``q6_k``.  A quantized tensor that is not a
matrix is declared ``f32`` (dequantized).  The layers of one weight may mix K-quants and
their fallbacks Q5_0 / Q8_0 (Q4_K_M files keep some layers of attn_v and ffn_down in
Q6_K, Q8_0 where K % 256 != 0): the declaration then carries the dtype of
every layer in ``layer_dtypes`` (:data:`ckir.dialects.graph.LAYER_DTYPES_ATTR`) and
each layer's buffer takes its own.

``gguf_unpermute = "<heads>"`` marks q/k rows that llama.cpp's converter
interleaved per head for GGML's adjacent-pair RoPE; :class:`GGUFSource`
restores HF's rotate-half row order (a row permutation, so it applies to
quantized rows as well: blocks run along K).

    module, warnings = import_gguf("SmolLM2-135M-Instruct.Q4_1.gguf")
    module, warnings, source = import_gguf_model(path)   # + the WeightSource

Every user mistake raises :class:`~ckir.errors.CkirError` with one line naming
the GGUF file and the tensor or metadata key.  See docs/gguf.md.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
from xdsl.dialects.builtin import ModuleOp, StringAttr

from ckir.dialects import graph as g
from ckir.dialects.dims import evaluate_dim
from ckir.errors import CkirError
from ckir.frontend.build_graph import ResolvedWeight, build_graph
from ckir.frontend.gguf_file import metadata, open_gguf
from ckir.frontend.hf import check_unmapped
from ckir.template import (
    GGUFMap,
    ModelSpec,
    Template,
    WeightSpec,
    select_gguf_template,
)
from ckir.vocab import PANEL_VALUES

#: GGUF tensor type -> graph dtype of the weight (float types are converted to f32)
GGUF_WEIGHT_DTYPES: dict[str, str] = {
    "F32": "f32",
    "F16": "f32",
    "BF16": "f32",
    "Q8_0": "q8_0",
    "Q4_0": "q4_0",
    "Q4_1": "q4_1",
    "Q4_K": "q4_k",
    "Q5_K": "q5_k",
    "Q6_K": "q6_k",
    "Q5_0": "q5_0",
    "Q5_1": "q5_1",
}
#: GGUF block formats whose bytes are kept as they are
QUANTIZED = ("Q8_0", "Q4_0", "Q4_1", "Q4_K", "Q5_K", "Q6_K", "Q5_0", "Q5_1")
#: graph dtypes that the layers of one weight may mix (K-quant files such as Q4_K_M store
#: some layers' attn_v / ffn_down in Q6_K, and llama-quantize falls back to Q5_0 for Q4_K
#: and to Q8_0 for Q6_K where K % 256 != 0): each layer keeps its own blocks.  At most one
#: dtype of a mix may have a panel twin (q8_0): the weight is declared in another one
MIXABLE = frozenset({"q4_k", "q5_k", "q6_k", "q5_0", "q5_1", "q8_0"})
#: the attribute on graph.weight naming the head count whose rotary rows to restore
UNPERMUTE_ATTR = "gguf_unpermute"


def _fmt(shape: tuple[int, ...] | list[int]) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


def numpy_shape(t: Any) -> tuple[int, ...]:
    """A GGUF tensor's shape in row-major order (GGUF lists ne0, the innermost dim, first)."""
    return tuple(int(d) for d in reversed(list(t.shape)))


# ---------------------------------------------------------------------------
# metadata -> config
# ---------------------------------------------------------------------------


def _set_key(config: dict[str, Any], key: str, value: Any) -> None:
    """``a.b`` -> config["a"]["b"] (the template reads dotted keys as nested objects)."""
    parts = key.split(".")
    node = config
    for p in parts[:-1]:
        node = node.setdefault(p, {})
    node[parts[-1]] = value


def gguf_config(
    reader: Any, gmap: GGUFMap, arch: str, source: str
) -> tuple[dict[str, Any], dict[str, str]]:
    """The config dict the template binds, read from metadata as ``gguf.config`` says.

    Returns ``(config, provenance)``; provenance maps each config key that was
    found to the GGUF key (or ``@`` source) it came from.
    """
    tensor_names = {t.name for t in reader.tensors}
    config: dict[str, Any] = {"model_type": arch}
    provenance: dict[str, str] = {}
    for key, sources in gmap.config.items():
        for src in sources:
            if src == "@token_count":
                field = reader.fields.get("tokenizer.ggml.tokens")
                value = len(field.data) if field is not None else None
                label = "length of tokenizer.ggml.tokens"
            elif src.startswith("@tensor_absent:"):
                value = src.split(":", 1)[1] not in tensor_names
                label = src
            elif src.startswith("@tensor_present:"):
                value = src.split(":", 1)[1] in tensor_names
                label = src
            elif src.startswith("@expr:"):
                label = src.replace("{arch}", arch)
                value = _expr_value(reader, label.removeprefix("@expr:"), source)
            elif src.startswith("@wavelength_factors:"):
                value = _wavelength_scaling(reader, src.split(":", 1)[1], arch, source)
                label = src
            elif src.startswith("@longrope_factors:"):
                short, long = src.split(":", 1)[1].split(",")
                value = _longrope_scaling(reader, short, long, source)
                label = src
            else:
                label = src.replace("{arch}", arch)
                value = metadata(reader, label, source)
                if isinstance(value, list):
                    raise CkirError(
                        f"{source}: metadata '{label}' is an array; {key} needs a single value"
                    )
            if value is not None:
                _set_key(config, key, value)
                provenance[key] = label
                break
    return config, provenance


def _expr_value(reader: Any, text: str, source: str) -> float | None:
    """An ``@expr:`` source's value (:mod:`ckir.metadata_expr`); None when a key it
    names is absent."""
    from ckir import metadata_expr

    tree, keys = metadata_expr.parse(text)
    values = [metadata(reader, k, source) for k in keys]
    if any(v is None for v in values):
        return None
    for k, v in zip(keys, values, strict=True):
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise CkirError(f"{source}: metadata '{k}' is {v!r}, not a number ('@expr:{text}')")
    try:
        return metadata_expr.evaluate(tree, [float(v) for v in values])
    except ZeroDivisionError:
        raise CkirError(f"{source}: '@expr:{text}' divides by zero") from None


def _wavelength_scaling(reader: Any, name: str, arch: str, source: str) -> dict[str, Any] | None:
    """``rope_scaling`` from the per-pair RoPE frequency divisors in tensor ``name``.

    llama.cpp's converter stores transformers' wavelength-band scaling (graph.rope's
    ``wavelength`` type) as these divisors; they are turned back into the band's
    attributes (:func:`ckir.passes.lowering.rope_scaling.wavelength_from_factors`).
    None when the file has no such tensor or every divisor is 1.
    """
    from ckir.passes.lowering.rope_scaling import wavelength_from_factors

    tensor = next((t for t in reader.tensors if t.name == name), None)
    if tensor is None:
        return None
    theta = metadata(reader, f"{arch}.rope.freq_base", source)
    factors = np.asarray(tensor.data, dtype=np.float32).reshape(-1)
    attrs = wavelength_from_factors(factors, float(theta) if theta is not None else 10000.0)
    if attrs is None:
        raise CkirError(
            f"{source}: tensor '{name}': its {factors.size} RoPE frequency factors are no "
            "wavelength-band scaling (a factor, a low and a high frequency band) that "
            "graph.rope can express"
        )
    if not attrs:
        return None
    return {
        "rope_type": "wavelength",
        "factor": attrs["factor"],
        "low_freq_factor": attrs["low_freq_factor"],
        "high_freq_factor": attrs["high_freq_factor"],
        "original_max_position_embeddings": attrs["original_context"],
    }


def _longrope_scaling(reader: Any, short: str, long: str, source: str) -> dict[str, Any] | None:
    """``rope_scaling`` of a LongRoPE file: the per-pair frequency divisors that
    llama.cpp's converter stores as two F32 tensors (``short`` for sequences up to the
    original context, ``long`` past it), as transformers' config has them. None when
    the file has neither tensor; one without the other is refused."""
    tensors = {t.name: t for t in reader.tensors if t.name in (short, long)}
    if not tensors:
        return None
    if len(tensors) == 1:
        have, missing = (short, long) if short in tensors else (long, short)
        raise CkirError(
            f"{source}: tensor '{have}' has no partner '{missing}': a LongRoPE file "
            "carries both the short and the long frequency factors"
        )
    factors: dict[str, list[float]] = {}
    for key, name in (("short_factor", short), ("long_factor", long)):
        values = np.asarray(tensors[name].data, dtype=np.float64).reshape(-1)
        if not np.all(np.isfinite(values)) or np.any(values <= 0):
            raise CkirError(
                f"{source}: tensor '{name}': LongRoPE frequency factors must be finite "
                "and positive"
            )
        factors[key] = [float(v) for v in values]
    return {"rope_type": "longrope", **factors}


def _check_required(tpl: Template, config: Mapping[str, Any], arch: str, source: str) -> None:
    """Name the GGUF key when a symbol or param without default has no value."""
    from ckir.template_instantiate import config_lookup  # the engine's own key lookup

    assert tpl.gguf is not None
    required = [
        (f"symbol {s.name}", s.keys) for s in tpl.symbols if s.expr is None and s.default is None
    ]
    required += [
        (f"param {p.name}", p.keys) for p in tpl.params if p.value is None and p.default is None
    ]
    for what, keys in required:
        if any(config_lookup(config, k) is not None for k in keys):
            continue
        gguf_keys = [
            src.replace("{arch}", arch) for k in keys for src in tpl.gguf.config.get(k, ())
        ]
        if gguf_keys:
            raise CkirError(
                f"{source}: missing metadata {' or '.join(repr(k) for k in gguf_keys)} "
                f"(template {tpl.name} needs it for {what}, {tpl.file})"
            )
        raise CkirError(
            f"{source}: template {tpl.name}'s gguf: block maps no GGUF key to "
            f"{' or '.join(repr(k) for k in keys)}, needed for {what} ({tpl.file})"
        )


def _instantiate(
    tpl: Template, config: dict[str, Any], provenance: Mapping[str, str], source: str
) -> ModelSpec:
    try:
        return tpl.instantiate(config, config_name=source)
    except CkirError as err:
        msg = str(err)
        for key, label in provenance.items():  # say which GGUF key a config key came from
            msg = msg.replace(f"key '{key}'", f"key '{key}' (GGUF '{label}')", 1)
        raise CkirError(msg) from None


# ---------------------------------------------------------------------------
# tensors -> weights
# ---------------------------------------------------------------------------


def _patterns(patterns: tuple[str, ...] | list[str]) -> re.Pattern[str] | None:
    if not patterns:
        return None
    parts = [re.escape(p).replace(r"\{i\}", r"\d+").replace(r"\*", r".*") for p in patterns]
    return re.compile("|".join(f"(?:{p})" for p in parts))


class _Checker:
    """Finds each template weight's GGUF tensor(s) and checks shape and type."""

    def __init__(self, tpl: Template, spec: ModelSpec, reader: Any, source: str) -> None:
        assert tpl.gguf is not None
        self.tpl = tpl
        self.gmap = tpl.gguf
        self.spec = spec
        self.source = source
        self.tensors = {t.name: t for t in reader.tensors}
        self.by_hf = {hf: name for name, hf in self.gmap.tensors.items()}
        self.used: set[str] = set()

    def gguf_name(self, w: WeightSpec) -> tuple[str, str | None]:
        """(GGUF name pattern, HF name it was found by, if any)."""
        if w.gguf is not None:
            return w.gguf, None
        candidates = list(w.hf)
        for c in w.hf:
            for p in self.tpl.hf_prefixes:
                if p and c.startswith(p):
                    candidates.append(c[len(p) :])
        for c in candidates:
            if c in self.by_hf:
                return self.by_hf[c], c
        hf = f" (hf '{w.hf[0]}')" if w.hf else ""
        raise CkirError(
            f"{self.source}: template {self.tpl.name}'s gguf: block maps no GGUF tensor to "
            f"weight {w.name}{hf} ({self.tpl.file})"
        )

    def resolve(self, w: WeightSpec) -> tuple[str, str, str | None, list[str] | None]:
        """(GGUF name pattern, graph dtype, unpermute heads expression or None, the dtype
        of each layer when they differ (K-quants, :data:`MIXABLE`) or None)."""
        pattern, hf = self.gguf_name(w)
        heads = self.gmap.unpermute.get(hf) if hf is not None else None
        if heads is not None and w.slice is not None:
            raise CkirError(
                f"{self.source}: weight {w.name} of template {self.tpl.name} is a slice of "
                f"'{hf}', whose rows the gguf: block unpermutes; unpermute whole tensors only"
            )
        layers: list[int | None] = list(range(self.spec.layers)) if w.per_layer else [None]
        # a sliced weight: the GGUF tensor is the packed one (its rows hold several weights)
        expected = w.hf_shape_values or w.shape_values
        dims = ", ".join(str(d) for d in (w.hf_shape or w.shape))
        dtype: str | None = None
        first: tuple[str, str] | None = None
        per_layer: list[str] = []
        for i in layers:
            name = pattern if i is None else pattern.replace("{i}", str(i))
            t = self.tensors.get(name)
            if t is None:
                raise CkirError(
                    f"{self.source}: missing tensor '{name}' (weight {w.name} of template "
                    f"{self.tpl.name}, {self.tpl.file})"
                )
            shape = numpy_shape(t)
            if shape != expected:
                raise CkirError(
                    f"{self.source}: tensor '{name}' has shape {_fmt(shape)} (GGUF ne "
                    f"{_fmt(list(t.shape))}), template {self.tpl.name} expects {_fmt(expected)} "
                    f"({dims}) for weight {w.name}"
                )
            kind = t.tensor_type.name
            got = GGUF_WEIGHT_DTYPES.get(kind)
            if got is None:
                raise CkirError(
                    f"{self.source}: tensor '{name}' has type {kind}; ckir reads "
                    f"{', '.join(GGUF_WEIGHT_DTYPES)} (weight {w.name})"
                )
            if kind in QUANTIZED and (len(w.shape_values) != 2 or (w.slice or (0,))[0] != 0):
                # only matrices have quantized kernels, and a slice keeps whole blocks only
                # when it takes rows: dequantize the rest
                got = "f32"
            if first is None:
                first = (name, kind)
            elif got != dtype and not {got, dtype} <= MIXABLE:
                raise CkirError(
                    f"{self.source}: tensor '{name}' is {kind} but '{first[0]}' is {first[1]}; "
                    f"all layers of weight {w.name} must share one storage type "
                    "(only Q4_K / Q5_K / Q6_K / Q5_0 / Q5_1 / Q8_0 may mix across layers)"
                )
            dtype = got
            per_layer.append(got)
            self.used.add(name)
        assert dtype is not None
        if len(set(per_layer)) > 1:  # declared as the most common one, each layer its own
            # (packing into panels maps each layer's dtype: ckir.compiler.pack_panels)
            common = max(sorted(set(per_layer)), key=per_layer.count)
            return pattern, common, heads, per_layer
        return pattern, dtype, heads, None


def gguf_orientation(w: WeightSpec) -> WeightSpec:
    """``w`` as a GGUF file holds it.  GGUF stores every matrix ``[out, in]``, the
    weight's own orientation: llama.cpp's converter transposes HF's ``[in, out]``
    tensors (GPT-2's Conv1D), so a weight the template transposes from HF is read
    as it is, and a slice of it (q, k and v of a fused ``[in, 3*out]`` tensor) takes
    the other axis (rows of the fused ``[3*out, in]`` GGUF tensor)."""
    if not w.transpose:
        return w
    sl = w.slice
    return replace(
        w,
        transpose=False,
        slice=None if sl is None else (1 - sl[0], sl[1], sl[2]),
        hf_shape=None if w.hf_shape is None else w.hf_shape[::-1],
        hf_shape_values=None if w.hf_shape_values is None else w.hf_shape_values[::-1],
    )


def _model_name(path: Path) -> str:
    base = re.sub(r"[^A-Za-z0-9_]+", "_", path.name.removesuffix(".gguf")).strip("_")
    if not base:
        return "model"
    return base if not base[0].isdigit() else f"m_{base}"


def import_gguf_model(
    path: str | Path, template: str | Path | None = None, allow_unused: Sequence[str] = ()
) -> tuple[ModuleOp, list[str], GGUFSource]:
    """Import a GGUF file: ``(graph module, warnings, weight source)``.

    ``template`` overrides selection by ``general.architecture``: a template
    name (``"llama"``) or a YAML path; the template needs a ``gguf:`` block.
    ``allow_unused``: globs of tensors the model may leave out (any other tensor
    the template does not use is an error: :func:`ckir.frontend.hf.check_unmapped`).
    """
    path = Path(path)
    reader = open_gguf(path)
    source = path.name
    arch = metadata(reader, "general.architecture", source)
    if arch is not None and not isinstance(arch, str):
        raise CkirError(f"{source}: 'general.architecture' must be a string")
    tpl = select_gguf_template(arch, template, source_name=source)
    gmap = tpl.gguf
    assert gmap is not None
    warnings: list[str] = []
    if template is not None and arch is not None and arch not in gmap.architectures:
        warnings.append(
            f"{source}: architecture '{arch}' is not one of template {tpl.name}'s GGUF "
            f"architectures ({', '.join(gmap.architectures)}); using it because it was given"
        )
    for pat, why in gmap.reject.items():
        rx = _patterns([pat])
        assert rx is not None
        hit = next((t.name for t in reader.tensors if rx.fullmatch(t.name)), None)
        if hit is not None:
            raise CkirError(f"{source}: tensor '{hit}': {why} (template {tpl.name})")
    arch_name = arch or tpl.name
    config, provenance = gguf_config(reader, gmap, arch_name, source)
    _check_required(tpl, config, arch_name, source)
    spec = _instantiate(tpl, config, provenance, source)
    warnings.extend(spec.warnings)

    checker = _Checker(tpl, spec, reader, source)
    resolved: dict[str, ResolvedWeight] = {}
    weights: list[WeightSpec] = []
    unpermute: dict[str, str] = {}
    mixed: dict[str, list[str]] = {}
    for w in spec.weights:
        if w.tied_to is not None:
            weights.append(replace(w, hf=(), gguf=None))
            continue
        w = gguf_orientation(w)
        pattern, dtype, heads, per_layer = checker.resolve(w)
        resolved[w.name] = ResolvedWeight(None, dtype)
        weights.append(replace(w, hf=(), gguf=pattern))
        if heads is not None:
            unpermute[w.name] = heads
        if per_layer is not None:
            mixed[w.name] = per_layer
    ignore = _patterns(list(gmap.ignore))
    warnings.extend(
        check_unmapped(checker.tensors, checker.used, ignore, allow_unused, source, tpl.name)
    )

    module = build_graph(replace(spec, weights=tuple(weights)), _model_name(path), resolved)
    for op in module.walk():
        if isinstance(op, g.WeightOp) and op.weight_name in unpermute:
            op.attributes[UNPERMUTE_ATTR] = StringAttr(unpermute[op.weight_name])
        if isinstance(op, g.WeightOp) and op.weight_name in mixed:
            op.attributes[g.LAYER_DTYPES_ATTR] = StringAttr(",".join(mixed[op.weight_name]))
    return module, warnings, GGUFSource(path, reader, config)


def import_gguf(
    path: str | Path, template: str | Path | None = None, allow_unused: Sequence[str] = ()
) -> tuple[ModuleOp, list[str]]:
    """Import a GGUF file: ``(graph module, warnings)`` (see :func:`import_gguf_model`)."""
    module, warnings, _ = import_gguf_model(path, template, allow_unused)
    return module, warnings


# ---------------------------------------------------------------------------
# weights
# ---------------------------------------------------------------------------


def unpermute_rows(rows: np.ndarray, heads: int, what: str = "tensor") -> np.ndarray:
    """Undo the GGUF converter's per-head interleave of the two rotary halves.

    The converter reorders the rows of each head ``[h0 .. h(D/2-1), g0 .. g(D/2-1)]``
    (HF's rotate-half layout) into pairs ``[h0, g0, h1, g1, ...]``, i.e.
    ``reshape(heads, 2, D/2, ...).swapaxes(1, 2)``; the inverse is
    ``reshape(heads, D/2, 2, ...).swapaxes(1, 2)``.  ``rows`` is ``[N, ...]`` with
    any row payload (float values or a row of quantized blocks).
    """
    n = rows.shape[0]
    if heads <= 0 or n % (2 * heads):
        raise CkirError(f"{what}: cannot unpermute {n} rows for {heads} heads")
    rest = rows.shape[1:]
    half = n // heads // 2
    return rows.reshape(heads, half, 2, *rest).swapaxes(1, 2).reshape(n, *rest)


def tensor_values(t: Any, what: str) -> np.ndarray:
    """A GGUF tensor as float32 in its row-major shape (dequantized if needed)."""
    kind = t.tensor_type.name
    shape = numpy_shape(t)
    raw = np.asarray(t.data)
    if kind == "F32":
        return np.ascontiguousarray(raw, dtype="<f4").reshape(shape)
    if kind == "F16":
        return raw.view("<f2").astype(np.float32).reshape(shape)
    if kind == "BF16":
        bits = raw.view(np.uint8).view("<u2").astype(np.uint32) << np.uint32(16)
        return bits.view(np.float32).reshape(shape)
    if kind in QUANTIZED:
        from ckir import quant

        blocks = raw.view(np.uint8).reshape(*shape[:-1], -1)
        return quant.dequantize(blocks, kind.lower()).reshape(shape)
    raise CkirError(f"{what}: GGUF type {kind} is not supported")


class GGUFSource:
    """Weight bytes of a GGUF file (``WeightSource``), one tensor at a time, memory-mapped.

    Quantized matrices declared in their own format are copied as raw block
    bytes (rows unpermuted where the graph says ``gguf_unpermute``), and those
    declared in its panel dtype (Q8_0 as ``q8_0p``, Q4_1 as ``q4_1p``) have the same
    bytes permuted
    into panels (:func:`ckir.backend.weights.encode_blocks`: exact); float
    tensors are converted to f32, and anything declared in another dtype
    (``--dtype``) is dequantized and re-encoded with
    :func:`ckir.backend.weights.encode`.

    ``config`` is the HF config the file's metadata gave (:func:`gguf_config`):
    a build writes it as its ``config.json``.
    """

    def __init__(
        self, path: str | Path, reader: Any | None = None, config: Mapping[str, Any] | None = None
    ) -> None:
        self.path = Path(path)
        self._reader = reader
        self._tensors: dict[str, Any] | None = None
        self.config: dict[str, Any] | None = dict(config) if config is not None else None

    @property
    def reader(self) -> Any:
        if self._reader is None:
            self._reader = open_gguf(self.path)
        return self._reader

    def tensor(self, name: str) -> Any:
        """The reader's tensor ``name`` (None when absent)."""
        if self._tensors is None:
            self._tensors = {t.name: t for t in self.reader.tensors}
        return self._tensors.get(name)

    def bytes_for(
        self, decl: g.WeightOp, layer: int | None, symbols: Mapping[str, int], dtype: str
    ) -> np.ndarray:
        from ckir.backend.weights import check_finite, encode, encode_blocks

        name = decl.source_tensor("gguf", layer)
        what = f"{self.path.name}: tensor '{name}'"
        t = self.tensor(name)
        if t is None:
            raise CkirError(
                f"{self.path.name}: no tensor '{name}' (graph.weight @{decl.weight_name})"
            )
        shape = numpy_shape(t)
        packed = decl.hf_dims if decl.mapping.packs_gguf else None  # a fused tensor's shape
        want = tuple(evaluate_dim(d, symbols) for d in (packed or decl.shape_dims))
        if shape != want:
            raise CkirError(
                f"{what} has shape {_fmt(shape)}, graph.weight @{decl.weight_name} needs "
                f"{_fmt(want)}"
            )
        part = decl.slice_spec if packed else None  # (axis, start, stop) of the tensor
        index: tuple[slice, ...] = ()
        if part is not None:
            axis, start, stop = part
            index = (slice(None),) * axis + (
                slice(evaluate_dim(start, symbols), evaluate_dim(stop, symbols)),
            )
        heads_attr = decl.attributes.get(UNPERMUTE_ATTR)
        heads = None
        if heads_attr is not None:
            if not isinstance(heads_attr, StringAttr):
                raise CkirError(
                    f"graph.weight @{decl.weight_name}: {UNPERMUTE_ATTR} must be a string "
                    "(a dim expression)"
                )
            heads = evaluate_dim(heads_attr.data, symbols)
        kind = t.tensor_type.name
        own = GGUF_WEIGHT_DTYPES.get(kind)
        if kind in QUANTIZED and own in (dtype, PANEL_VALUES.get(dtype)):
            rows = np.asarray(t.data).view(np.uint8).reshape(shape[0], -1)
            if index:  # rows of a fused tensor (the import keeps blocks for row slices only)
                if len(index) != 1:
                    raise CkirError(f"{what}: a quantized tensor is sliced along rows only")
                rows = rows[index]
            check_finite(rows, own, name)
            if heads is not None:
                rows = unpermute_rows(rows, heads, what)
            return encode_blocks(rows, dtype, what)
        arr = tensor_values(t, what)
        if index:
            arr = arr[index]
        if heads is not None:
            arr = unpermute_rows(arr, heads, what)
        return encode(np.ascontiguousarray(arr), dtype, name)
