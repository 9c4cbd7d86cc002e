"""GGUF frontend: a llama.cpp GGUF file -> graph IR + a weight source.

The file is read with the ``gguf`` package (memory-mapped; no hand-written
parser).  Nothing here knows an architecture: the template's ``gguf:`` block
says which metadata keys give which HF config keys and which GGUF tensor
names are which HF tensor names.  The file is then presented to the HF
import core (:func:`ckir.frontend.hf.import_tensors`) as a config dict and a
tensor header in HF terms, so the same checks and messages apply.

Quantized tensors (Q8_0, Q4_0, Q4_1) keep their GGUF block bytes: the graph
declares them with that dtype and lowering selects the kernels for it.
F32 / F16 / BF16 tensors are declared f32 (bf16 kept as bf16).  Rows that
the GGUF converter permuted for GGML's interleaved RoPE are put back in
HF's rotate-half order when weights.bin is written (``unpermute:``).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
from xdsl.dialects.builtin import ModuleOp, StringAttr

from ckir.backend.weights import encode
from ckir.dialects import graph as g
from ckir.dialects.dims import evaluate_dim
from ckir.errors import CkirError
from ckir.frontend.hf import import_tensors
from ckir.frontend.safetensors_header import TensorInfo
from ckir.template import GGUFMap, Template, list_templates, load_template

#: GGUF tensor type name -> (header dtype shown to the HF core, graph dtype)
GGUF_TYPES: dict[str, str] = {
    "F32": "f32",
    "F16": "f32",
    "BF16": "bf16",
    "Q8_0": "q8_0",
    "Q4_0": "q4_0",
    "Q4_1": "q4_1",
}


def _reader(path: Path) -> Any:
    import gguf

    if not path.is_file():
        raise CkirError(f"{path}: no such GGUF file")
    try:
        return gguf.GGUFReader(path, "r")
    except Exception as err:  # the gguf package raises plain errors on bad files
        raise CkirError(f"{path}: not a readable GGUF file ({err})") from None


def _field(reader: Any, key: str) -> Any:
    f = reader.fields.get(key)
    if f is None:
        return None
    try:
        return f.contents()
    except Exception:
        return None


def select_gguf_template(reader: Any, path: Path, template: str | Path | None) -> Template:
    arch = _field(reader, "general.architecture")
    if template is not None:
        tpl = (
            load_template(template)
            if str(template).endswith((".yaml", ".yml")) or Path(template).exists()
            else next((t for t in list_templates() if t.name == str(template)), None)
        )
        if tpl is None:
            raise CkirError(f"unknown template '{template}'")
    else:
        tpl = next(
            (t for t in list_templates() if t.gguf and arch in t.gguf.architectures), None
        )
        if tpl is None:
            known = sorted({a for t in list_templates() if t.gguf for a in t.gguf.architectures})
            raise CkirError(
                f"{path.name}: GGUF architecture '{arch}' has no template "
                f"(templates with a gguf: block serve {', '.join(known) or 'none'})"
            )
    if tpl.gguf is None:
        raise CkirError(f"{path.name}: template {tpl.name} has no gguf: block ({tpl.file})")
    return tpl


def gguf_config(reader: Any, gmap: GGUFMap, path: Path) -> dict[str, Any]:
    """HF config keys read from GGUF metadata as the template's ``gguf.config`` says."""
    arch = str(_field(reader, "general.architecture"))
    names = {t.name for t in reader.tensors}
    config: dict[str, Any] = {"model_type": arch}
    for key, sources in gmap.config.items():
        for src in sources:
            if src == "@token_count":
                tokens = reader.fields.get("tokenizer.ggml.tokens")
                value = len(tokens.data) if tokens is not None else None
            elif src.startswith("@tensor_absent:"):
                value = src.split(":", 1)[1] not in names
            else:
                value = _field(reader, src.replace("{arch}", arch))
            if value is not None:
                config[key] = value.item() if isinstance(value, np.generic) else value
                break
    return config


def _instances(pattern: str) -> re.Pattern[str]:
    return re.compile(re.escape(pattern).replace(r"\{i\}", r"(\d+)"))


class GGUFTensors:
    """The file's tensors under their HF names (per the template), with GGUF types."""

    def __init__(self, reader: Any, gmap: GGUFMap, path: Path) -> None:
        self.path = path
        self.by_gguf = {t.name: t for t in reader.tensors}
        self.hf_to_gguf: dict[str, str] = {}
        matchers = [(_instances(k), v) for k, v in gmap.tensors.items()]
        for name in self.by_gguf:
            for rx, hf in matchers:
                m = rx.fullmatch(name)
                if m:
                    self.hf_to_gguf[hf.replace("{i}", m.group(1)) if m.groups() else hf] = name
                    break

    def header(self) -> dict[str, TensorInfo]:
        """A safetensors-like header: HF name -> dtype (GGUF type name) and HF shape."""
        out: dict[str, TensorInfo] = {}
        for hf, name in self.hf_to_gguf.items():
            t = self.by_gguf[name]
            shape = tuple(int(d) for d in reversed(t.shape))  # GGUF lists ne0 (innermost) first
            out[hf] = TensorInfo(t.tensor_type.name, shape, (0, int(t.n_bytes)), self.path)
        for name, t in self.by_gguf.items():  # unmapped tensors, reported by the core
            if name not in self.hf_to_gguf.values():
                shape = tuple(int(d) for d in reversed(t.shape))
                out[name] = TensorInfo(t.tensor_type.name, shape, (0, int(t.n_bytes)), self.path)
        return out


def import_gguf(
    path: str | Path, template: str | Path | None = None
) -> tuple[ModuleOp, list[str], GGUFSource]:
    """Import a GGUF file: ``(graph module, warnings, weight source)``."""
    path = Path(path)
    reader = _reader(path)
    tpl = select_gguf_template(reader, path, template)
    assert tpl.gguf is not None
    config = gguf_config(reader, tpl.gguf, path)
    tensors = GGUFTensors(reader, tpl.gguf, path)
    warnings: list[str] = []
    name = re.sub(r"[^A-Za-z0-9_]", "_", path.stem.split(".")[0]) or "model"
    if name[0].isdigit():
        name = f"m_{name}"
    module = import_tensors(
        tpl, config, path.name, tensors.header(), path, name, warnings, GGUF_TYPES
    )
    # record each weight's GGUF tensor name pattern (the HF name stays as documentation)
    gguf_of = {hf: gname for gname, hf in tpl.gguf.tensors.items()}
    for op in module.walk():
        if isinstance(op, g.WeightOp) and op.hf_name in gguf_of:
            op.properties["gguf"] = StringAttr(gguf_of[op.hf_name])
    return module, warnings, GGUFSource(path, reader, tpl.gguf)


class GGUFSource:
    """Weight bytes of a GGUF file: raw blocks for quantized tensors, rows unpermuted."""

    def __init__(self, path: Path, reader: Any, gmap: GGUFMap) -> None:
        self.path = path
        self.reader = reader
        self.by_gguf = {t.name: t for t in reader.tensors}
        self.unpermute = {hf: sym for hf, sym in gmap.unpermute.items()}

    def bytes_for(
        self, decl: g.WeightOp, layer: int | None, symbols: Mapping[str, int], dtype: str
    ) -> np.ndarray:
        pattern = decl.gguf_name
        if pattern is None:
            raise CkirError(f"graph.weight @{decl.weight_name}: has no GGUF tensor")
        name = pattern.replace("{i}", str(layer)) if layer is not None else pattern
        t = self.by_gguf.get(name)
        if t is None:
            raise CkirError(f"{self.path.name}: no tensor '{name}' (@{decl.weight_name})")
        kind = t.tensor_type.name
        shape = tuple(int(d) for d in reversed(t.shape))
        data = np.asarray(t.data)
        if kind in ("F32", "F16"):
            rows = data.astype(np.float32).reshape(shape)
        elif kind == "BF16":
            raw = data.view(np.uint16).reshape(shape)
            rows = (raw.astype(np.uint32) << 16).view(np.float32)
        else:
            rows = data.reshape(shape[0], -1)  # quantized: one row of blocks per output row
        heads_sym = self.unpermute.get(decl.hf_name or "")
        if heads_sym is not None:
            rows = unpermute_rows(rows, evaluate_dim(heads_sym, symbols))
        if kind in ("F32", "F16", "BF16"):
            return encode(np.ascontiguousarray(rows), dtype, name)
        if GGUF_TYPES.get(kind) != dtype:
            raise CkirError(
                f"{self.path.name}: tensor '{name}' is {kind}; the graph declares {dtype} "
                "(requantizing GGUF blocks is not supported)"
            )
        return np.ascontiguousarray(rows).view(np.uint8).reshape(-1)


def unpermute_rows(rows: np.ndarray, heads: int) -> np.ndarray:
    """Undo the converter's per-head interleave of the two rotary halves.

    The converter maps HF row order to ``reshape(heads, 2, d/2, ...).swapaxes(1, 2)``;
    the inverse is ``reshape(heads, d/2, 2, ...).swapaxes(1, 2)``.  Works on any
    row payload (floats or quantized blocks).
    """
    n = rows.shape[0]
    if heads <= 0 or n % (2 * heads):
        raise CkirError(f"cannot unpermute {n} rows for {heads} heads")
    half = n // heads // 2
    rest = rows.shape[1:]
    return rows.reshape(heads, half, 2, *rest).swapaxes(1, 2).reshape(n, *rest)
