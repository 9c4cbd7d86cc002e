"""Architecture templates: select, load, validate, bind a config, instantiate.

A template (``templates/<arch>.yaml``) is the single source of an architecture:
which HF ``model_type`` values it serves, how ``config.json`` keys become
symbols (dims) and params (scalars and flags), the HF -> internal weight map,
and the header/body/footer op wiring.  The engine knows the template *format*
and the graph op *signatures*; it knows no architecture, HF tensor name or
config key.  The format is documented in ``docs/templates.md``.

Pipeline::

    tpl = select_template(model_type, override)      # or load_template(path)
    spec = tpl.instantiate(config)                   # -> ModelSpec (plain data)

One module per job; this one selects a template (by ``model_type``, GGUF
architecture, name or path) and re-exports the others' public names:

* :mod:`ckir.template_conditions` — the expression languages (dims, conditions);
* :mod:`ckir.template_schema` — the data model (``*Def``, ``*Spec``, ``Template``);
* :mod:`ckir.template_loader` — YAML file -> validated ``Template``;
* :mod:`ckir.template_instantiate` — ``Template`` + HF config -> ``ModelSpec``.

Every mistake in a template or a config raises :class:`~ckir.errors.CkirError`
with one line naming the file, the template, and the key or op.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path

from ckir.errors import CkirError
from ckir.resources import templates_dir
from ckir.template_conditions import Condition, TemplateError, parse_condition, parse_dim
from ckir.template_instantiate import MAX_SYMBOL
from ckir.template_loader import RUNTIME_SYMBOLS, load_template
from ckir.template_schema import (
    BufferDef,
    BufferSpec,
    CheckDef,
    GGUFMap,
    ModelSpec,
    OpDef,
    OpSpec,
    ParamDef,
    SectionDef,
    SectionSpec,
    SymbolDef,
    Template,
    ValueType,
    WeightDef,
    WeightSpec,
    WeightVariant,
    display_path,
)

__all__ = [
    "MAX_SYMBOL",
    "RUNTIME_SYMBOLS",
    "TEMPLATES_DIR",
    "BufferDef",
    "BufferSpec",
    "CheckDef",
    "Condition",
    "GGUFMap",
    "ModelSpec",
    "OpDef",
    "OpSpec",
    "ParamDef",
    "SectionDef",
    "SectionSpec",
    "SymbolDef",
    "Template",
    "TemplateError",
    "ValueType",
    "WeightDef",
    "WeightSpec",
    "WeightVariant",
    "display_path",
    "list_templates",
    "load_template",
    "parse_condition",
    "parse_dim",
    "select_gguf_template",
    "select_template",
]

#: where ckir's templates live (package data: see ckir.resources)
TEMPLATES_DIR = templates_dir()


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
    return _the_server(
        list_templates(d), lambda t: t.model_types, "model_type", model_type, config_name, d
    )


def _the_server(
    templates: list[Template],
    serves: Callable[[Template], Iterable[str]],
    kind: str,
    key: str,
    source: str,
    d: Path,
) -> Template:
    """The one template of ``templates`` (found in ``d``) whose ``serves(t)`` holds ``key``
    (a ``kind``: model_type, GGUF architecture), else a CkirError naming ``source``."""
    what = f"{kind} '{key}'"
    matches = [t for t in templates if key in serves(t)]
    if not matches:
        served = ", ".join(sorted({k for t in templates for k in serves(t)})) or "none"
        raise CkirError(
            f"{source}: {what} is not served by any template in {display_path(d)} "
            f"(served: {served}); pass a template explicitly"
        )
    if len(matches) > 1:
        raise CkirError(f"{source}: {what} is served by {', '.join(t.file for t in matches)}")
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
        tpl = _the_server(
            list_templates(d),
            lambda t: t.gguf.architectures if t.gguf is not None else (),
            "GGUF architecture",
            architecture,
            source_name,
            d,
        )
    if tpl.gguf is None:
        raise CkirError(
            f"{source_name}: template {tpl.name} has no gguf: block ({tpl.file}); "
            "it cannot import GGUF files"
        )
    return tpl
