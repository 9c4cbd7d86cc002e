"""HuggingFace checkpoint directory -> graph dialect module.

Reads ``config.json`` and only the safetensors header(s) (never tensor
data), picks a template by ``model_type`` (or the one given), instantiates
it, checks that every mapped weight exists with the expected shape and a
supported dtype, reports unmapped tensors, and builds the graph module.

    module, warnings = import_hf(Path("SmolLM-135M"))
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from xdsl.dialects.builtin import ModuleOp

from ckir.errors import CkirError
from ckir.fileio import read_json_object
from ckir.frontend.build_graph import ResolvedWeight, build_graph
from ckir.frontend.safetensors_header import TensorInfo, read_checkpoint_header
from ckir.template import ModelSpec, Template, WeightSpec, display_path, select_template

#: safetensors dtype -> graph dtype, for weights
#: checkpoint dtype -> graph dtype.  F16 becomes f32 (converted when weights.bin is
#: written): the runtime has no f16 kernels.
WEIGHT_DTYPES: dict[str, str] = {"F32": "f32", "BF16": "bf16", "F16": "f32"}


def model_name(model_dir: Path) -> str:
    """A symbol-friendly identifier from a directory name (``SmolLM-135M`` -> ``SmolLM_135M``)."""
    base = re.sub(r"[^A-Za-z0-9_]+", "_", model_dir.resolve().name).strip("_")
    if not base:
        return "model"
    return base if not base[0].isdigit() else f"m_{base}"


def read_config(model_dir: Path) -> tuple[dict, Path]:
    path = model_dir / "config.json"
    if not path.is_file():
        raise CkirError(f"{display_path(path)}: not found (is {model_dir} a HF checkpoint folder?)")
    return read_json_object(path, display_path(path)), path


def _ignore_regex(patterns: tuple[str, ...]) -> re.Pattern[str] | None:
    if not patterns:
        return None
    parts = []
    for p in patterns:
        rx = re.escape(p).replace(r"\{i\}", r"\d+").replace(r"\*", r".*")
        parts.append(f"(?:{rx})")
    return re.compile("|".join(parts))


def _fmt(shape: tuple[int, ...]) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


class _Checker:
    def __init__(
        self,
        tpl: Template,
        spec: ModelSpec,
        tensors: Mapping[str, TensorInfo],
        source: Path,
        dtypes: Mapping[str, str] = WEIGHT_DTYPES,
    ) -> None:
        self.tpl = tpl
        self.dtypes = dtypes
        self.spec = spec
        self.tensors = tensors
        self.source = source
        self.used: set[str] = set()

    def where(self, info: TensorInfo | None = None) -> str:
        return info.file.name if info is not None else self.source.name

    def resolve(self, w: WeightSpec) -> ResolvedWeight:
        layers = range(self.spec.layers) if w.per_layer else [None]

        def inst(name: str, i: int | None) -> str:
            return name if i is None else name.replace("{i}", str(i))

        first = next(iter(layers))
        chosen = next((h for h in w.hf if inst(h, first) in self.tensors), None)
        if chosen is None:
            names = " or ".join(f"'{inst(h, first)}'" for h in w.hf)
            raise CkirError(
                f"{self.where()}: missing tensor {names} (weight {w.name} of template "
                f"{self.tpl.name}, {self.tpl.file})"
            )
        dtype: str | None = None
        for i in layers:
            name = inst(chosen, i)
            info = self.tensors.get(name)
            if info is None:
                raise CkirError(
                    f"{self.where()}: missing tensor '{name}' (weight {w.name} of template "
                    f"{self.tpl.name}; layer {first} has it, layer {i} does not)"
                )
            expected = w.hf_shape_values
            assert expected is not None
            if info.shape != expected:
                dims = w.hf_shape if w.hf_shape is not None else w.shape
                expr = ", ".join(str(d) for d in dims)
                raise CkirError(
                    f"{self.where(info)}: tensor '{name}' has shape {_fmt(info.shape)}, template "
                    f"{self.tpl.name} expects {_fmt(expected)} ({expr})"
                )
            got = self.dtypes.get(info.dtype)
            if got is None:
                raise CkirError(
                    f"{self.where(info)}: tensor '{name}' has dtype {info.dtype}; weights must be "
                    f"{', '.join(self.dtypes)} (weight {w.name} of template {self.tpl.name})"
                )
            if dtype is not None and got != dtype:
                raise CkirError(
                    f"{self.where(info)}: tensor '{name}' has dtype {info.dtype} but layer "
                    f"{first} of weight {w.name} has {dtype}; layers must agree"
                )
            dtype = got
            self.used.add(name)
        assert dtype is not None
        return ResolvedWeight(chosen, dtype)


def import_hf(
    model_dir: str | Path, template: str | Path | None = None
) -> tuple[ModuleOp, list[str]]:
    """Import a HF checkpoint folder: ``(graph module, warnings)``.

    ``template`` overrides selection by ``model_type``: a template name
    (``"llama"``) or a path to a YAML file.
    """
    model_dir = Path(model_dir)
    if not model_dir.is_dir():
        raise CkirError(f"{model_dir}: not a directory")
    config, config_path = read_config(model_dir)
    config_name = display_path(config_path)
    model_type = config.get("model_type")
    if model_type is not None and not isinstance(model_type, str):
        raise CkirError(f"{config_name}: 'model_type' must be a string")
    tpl = select_template(model_type, template, config_name=config_name)
    warnings: list[str] = []
    if template is not None and model_type is not None and model_type not in tpl.model_types:
        warnings.append(
            f"{config_name}: model_type '{model_type}' is not one of template {tpl.name}'s "
            f"model_types ({', '.join(tpl.model_types)}); using it because it was given"
        )
    tensors, source = read_checkpoint_header(model_dir)
    module = import_tensors(
        tpl, config, config_name, tensors, source, model_name(model_dir), warnings
    )
    return module, warnings


def import_tensors(
    tpl: Template,
    config: Mapping[str, object],
    config_name: str,
    tensors: Mapping[str, TensorInfo],
    source: Path,
    name: str,
    warnings: list[str],
    dtypes: Mapping[str, str] = WEIGHT_DTYPES,
) -> ModuleOp:
    """The graph module of a config + tensor header (HF names); appends to ``warnings``.

    Shared by every frontend: a GGUF file is presented in HF terms (config
    keys, tensor names) by its template's ``gguf:`` block, then checked here.
    """
    spec = tpl.instantiate(dict(config), config_name=config_name)
    warnings.extend(spec.warnings)
    checker = _Checker(tpl, spec, tensors, source, dtypes)
    resolved = {w.name: checker.resolve(w) for w in spec.weights if w.tied_to is None}
    ignore = _ignore_regex(spec.ignore)
    for tensor in sorted(tensors):
        if tensor in checker.used or (ignore is not None and ignore.fullmatch(tensor)):
            continue
        warnings.append(f"unmapped tensor '{tensor}' (template {tpl.name} does not use it)")
    return build_graph(spec, name, resolved)
