"""Template parts: blocks of template YAML that several templates share.

A template names the parts it uses under ``include:``; each is a file
``parts/<name>.yaml`` beside the template, or else one of ckir's own
(``templates/parts/``), so a template copied elsewhere still finds them.  A part may hold

- ``params`` and ``checks``: added before the template's own (a name that
  both define is an error naming both files);
- ``gguf_config``: entries added to the template's ``gguf.config`` (the
  same key in both is an error);
- ``fragments``: named op lists with formal inputs and results, which a
  section's ``ops`` expands in place with ``- use: out1, out2 = name(in1, in2)``.
  Inside a fragment, the ``op:`` texts name the formals; every other value
  they define is local to the expansion (renamed ``<first result>__<name>``).

Example (``templates/parts/rope_scaling.yaml``, shortened)::

    params:
      rope_type: {key: rope_scaling.rope_type, type: str, default: default}
    fragments:
      rope:
        args: [q, k]
        results: [qr, kr]
        ops:
          - op: qr, kr = rope(q, k)
            if: rope_type == default
            attrs: {theta: $theta, heads: H, kv_heads: KV, head_dim: D}
            shapes: [[T, H*D], [T, KV*D]]

and in a template's body: ``- use: qr, kr = rope(qn, kn)``.

This module reads part files and renames fragment ops; the template loader
(:mod:`ckir.template_loader`) validates what they expand to, so a mistake in a
part is reported with the template's op position and the part's file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ckir.errors import CkirError
from ckir.template_schema import display_path, kind_of

__all__ = ["OP_TEXT", "Fragment", "Part", "load_part", "read_yaml_file"]

_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
#: ``out[, out] = kind(in, ...)``: an op's text, and a ``use:`` line's
OP_TEXT = re.compile(
    rf"^\s*({_IDENT}(?:\s*,\s*{_IDENT})*)\s*=\s*({_IDENT})\s*\(\s*"
    rf"((?:{_IDENT}(?:\s*,\s*{_IDENT})*)?)\s*\)\s*$"
)
_IDENT_RE = re.compile(rf"^{_IDENT}$")
_PART_KEYS = ("description", "params", "checks", "gguf_config", "fragments")
_FRAGMENT_KEYS = ("args", "results", "ops")


class _UniqueKeyLoader(yaml.SafeLoader):
    """A SafeLoader on which a duplicate mapping key is an error, not a silent overwrite."""


def _construct_mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode) -> dict:
    loader.flatten_mapping(node)  # resolves '<<' merge keys
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


def read_yaml_file(path: Path, what: str) -> Any:
    """Parse one YAML file (duplicate keys are an error); one-line errors name the file."""
    if path.exists() and not path.is_file():  # a folder, or a FIFO that would block a read
        raise CkirError(f"{display_path(path)}: {what} is not a regular file")
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CkirError(f"{display_path(path)}: {what} file not found") from None
    except (OSError, UnicodeDecodeError) as e:
        raise CkirError(f"{display_path(path)}: cannot read {what}: {e}") from None
    try:
        return yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else "YAML"
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise CkirError(f"{display_path(path)}: {where}: YAML error: {problem}") from None


@dataclass(frozen=True)
class Fragment:
    """A named op list of a part, expanded by ``use:`` in a template section."""

    name: str
    args: tuple[str, ...]
    results: tuple[str, ...]
    ops: tuple[dict[str, Any], ...]
    file: str  # the part file, for messages

    def expand(self, outs: tuple[str, ...], ins: tuple[str, ...]) -> list[dict[str, Any]]:
        """The fragment's ops with formals renamed to ``ins`` / ``outs`` and locals made unique."""
        rename = dict(zip(self.args, ins, strict=True))
        rename.update(zip(self.results, outs, strict=True))
        ops = []
        for raw in self.ops:
            m = OP_TEXT.match(raw["op"])
            assert m is not None  # checked by load_part
            names = [s.strip() for s in m.group(1).split(",")]
            args = [s.strip() for s in m.group(3).split(",")] if m.group(3) else []

            def new(v: str) -> str:
                return rename.get(v, f"{outs[0]}__{v}")

            text = f"{', '.join(map(new, names))} = {m.group(2)}({', '.join(map(new, args))})"
            ops.append({**raw, "op": text})
        return ops


@dataclass(frozen=True)
class Part:
    """One ``templates/parts/<name>.yaml`` file, its sections still raw YAML."""

    name: str
    path: Path
    params: dict[str, Any]
    checks: list[Any]
    gguf_config: dict[str, Any]
    fragments: dict[str, Fragment]


def load_part(template_path: Path, name: str, where: str) -> Part:
    """Read the part ``name`` that the template at ``template_path`` includes."""
    tfile = display_path(template_path)
    if not isinstance(name, str) or not _IDENT_RE.match(name):
        raise CkirError(f"{tfile}: {where}: expected a part name, got {name!r}")
    from ckir.resources import templates_dir

    candidates = [template_path.parent / "parts" / f"{name}.yaml"]
    candidates.append(templates_dir() / "parts" / f"{name}.yaml")
    path = next((p for p in candidates if p.is_file()), None)
    if path is None:
        looked = " or ".join(dict.fromkeys(display_path(p) for p in candidates))
        raise CkirError(f"{tfile}: {where}: no part '{name}' ({looked} not found)")
    doc = read_yaml_file(path, "template part")
    file = display_path(path)

    def err(key: str, msg: str) -> CkirError:
        return CkirError(f"{file}: {key}: {msg}")

    def mapping(value: Any, key: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise err(key, f"expected a mapping, got {kind_of(value)}")
        return value

    def names(value: Any, key: str) -> tuple[str, ...]:
        if not isinstance(value, list) or not all(
            isinstance(v, str) and _IDENT_RE.match(v) for v in value
        ):
            raise err(key, "expected a list of value names")
        if len(set(value)) != len(value):
            raise err(key, "a value name appears twice")
        return tuple(value)

    doc = mapping(doc, "top level")
    for key in doc:
        if key not in _PART_KEYS:
            raise err("top level", f"unknown key '{key}' (allowed: {', '.join(_PART_KEYS)})")
    checks = doc.get("checks", [])
    if not isinstance(checks, list):
        raise err("checks", f"expected a list, got {kind_of(checks)}")
    fragments: dict[str, Fragment] = {}
    for fname, raw in mapping(doc.get("fragments", {}), "fragments").items():
        key = f"fragments.{fname}"
        if not isinstance(fname, str) or not _IDENT_RE.match(fname):
            raise err(key, "a fragment name must be an identifier")
        raw = mapping(raw, key)
        for k in _FRAGMENT_KEYS:
            if k not in raw:
                raise err(key, f"missing '{k}'")
        for k in raw:
            if k not in _FRAGMENT_KEYS:
                raise err(key, f"unknown key '{k}' (allowed: {', '.join(_FRAGMENT_KEYS)})")
        args, results = names(raw["args"], f"{key}.args"), names(raw["results"], f"{key}.results")
        if not results:
            raise err(f"{key}.results", "a fragment defines at least one value")
        ops = raw["ops"]
        if not isinstance(ops, list) or not ops:
            raise err(f"{key}.ops", "expected a non-empty list of ops")
        for n, op in enumerate(ops):
            op = mapping(op, f"{key}.ops[{n}]")
            if "use" in op:
                raise err(f"{key}.ops[{n}]", "a fragment cannot 'use' another fragment")
            if not isinstance(op.get("op"), str) or not OP_TEXT.match(op["op"]):
                raise err(f"{key}.ops[{n}]", "needs 'op: out[, out] = kind(in, ...)'")
        fragments[fname] = Fragment(fname, args, results, tuple(ops), file)
    return Part(
        name,
        path,
        mapping(doc.get("params", {}), "params"),
        checks,
        mapping(doc.get("gguf_config", {}), "gguf_config"),
        fragments,
    )
