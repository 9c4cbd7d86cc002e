"""HuggingFace checkpoint directory -> graph dialect module.

Reads ``config.json`` and only the safetensors header(s) (never tensor
data), picks a template by ``model_type`` (or the one given), instantiates
it, checks that every mapped weight exists with the expected shape and a
supported dtype, refuses unmapped tensors (a checkpoint tensor no weight uses
and no ``ignore:`` pattern of the template matches: building without it would
give a wrong model) unless ``allow_unused`` globs name them, and builds the
graph module.

    module, warnings = import_hf(Path("SmolLM-135M"))
    module, warnings = import_hf(path, allow_unused=("model.extra.*",))
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Mapping, Sequence
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


#: the command-line option that allows unused tensors (named in the error message)
ALLOW_UNUSED_FLAG = "--allow-unused"
#: at most this many unmapped tensors are named in the error, then "and N more"
_NAMED_UNMAPPED = 8


def _layer_glob(name: str) -> str:
    """A glob for every layer's copy of tensor ``name`` (``.3.`` -> ``.*.``)."""
    return re.sub(r"(?<=\.)\d+(?=\.)", "*", name)


def check_unmapped(
    names: Iterable[str],
    used: set[str],
    ignore: re.Pattern[str] | None,
    allow_unused: Sequence[str],
    where: Mapping[str, str] | str,
    template: str,
) -> list[str]:
    """Refuse the checkpoint tensors no weight of ``template`` uses: a CkirError naming
    them (and the ``--allow-unused`` globs that would allow them), unless an ``ignore``
    pattern of the template matches them (not reported) or an ``allow_unused`` glob
    (``fnmatch``, on the whole name) does (one warning each).  Returns the warnings,
    with one for every ``allow_unused`` glob that matched no unused tensor.
    ``where``: the file each tensor is in (tensor name -> file name) or one file name.
    """
    warnings: list[str] = []
    refused: list[str] = []
    matched: set[str] = set()
    for name in sorted(names):
        if name in used or (ignore is not None and ignore.fullmatch(name)):
            continue
        file = where if isinstance(where, str) else where.get(name, "checkpoint")
        globs = [g for g in allow_unused if fnmatch.fnmatchcase(name, g)]
        if globs:
            matched.update(globs)
            warnings.append(
                f"{file}: tensor '{name}' is not used by template {template}; left out as "
                f"{ALLOW_UNUSED_FLAG} '{globs[0]}' allows"
            )
        else:
            refused.append(name)
    for glob in allow_unused:
        if glob not in matched:
            warnings.append(f"{ALLOW_UNUSED_FLAG} '{glob}' matches no unused tensor")
    if refused:
        first = refused[0]
        file = where if isinstance(where, str) else where.get(first, "checkpoint")
        named = ", ".join(f"'{n}'" for n in refused[:_NAMED_UNMAPPED])
        if len(refused) > _NAMED_UNMAPPED:
            named += f" and {len(refused) - _NAMED_UNMAPPED} more"
        globs = sorted({_layer_glob(n) for n in refused})
        hint = " ".join(f"{ALLOW_UNUSED_FLAG} '{g}'" for g in globs[:_NAMED_UNMAPPED])
        raise CkirError(
            f"{file}: {len(refused)} tensor(s) not used by template {template}: {named}. "
            "A model built without them computes something else than the checkpoint "
            "(is it the right template?); if they are not needed, allow them with "
            f"{hint} (Python: allow_unused=[...])"
        )
    return warnings


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
    model_dir: str | Path,
    template: str | Path | None = None,
    allow_unused: Sequence[str] = (),
) -> tuple[ModuleOp, list[str]]:
    """Import a HF checkpoint folder: ``(graph module, warnings)``.

    ``template`` overrides selection by ``model_type``: a template name
    (``"llama"``) or a path to a YAML file.  ``allow_unused``: globs of checkpoint
    tensors the model may leave out (:func:`check_unmapped`; any other tensor the
    template does not use is an error).
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
        tpl,
        config,
        config_name,
        tensors,
        source,
        model_name(model_dir),
        warnings,
        allow_unused=allow_unused,
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
    allow_unused: Sequence[str] = (),
) -> ModuleOp:
    """The graph module of a config + tensor header (HF names); appends to ``warnings``.

    Shared by every frontend: a GGUF file is presented in HF terms (config
    keys, tensor names) by its template's ``gguf:`` block, then checked here.
    """
    spec = tpl.instantiate(dict(config), config_name=config_name)
    warnings.extend(spec.warnings)
    checker = _Checker(tpl, spec, tensors, source, dtypes)
    resolved = {w.name: checker.resolve(w) for w in spec.weights if w.tied_to is None}
    files = {n: info.file.name for n, info in tensors.items()}
    warnings.extend(
        check_unmapped(
            tensors, checker.used, _ignore_regex(spec.ignore), allow_unused, files, tpl.name
        )
    )
    return build_graph(spec, name, resolved)
