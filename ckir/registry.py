"""The kernel registry: ``runtime/registry*.yaml`` loaded into typed, validated specs.

Lowering picks kernels from it and copies each choice into the IR as a
``lowered.kernel`` declaration (which the ``lowered.call`` verifier and the C
emitter read); the C emitter checks the declarations against it once (the
runtime ABI check).

A row of the files is one kernel, or a *family*: a row with ``dtypes`` (dtype
names and the sets of :func:`dtype_sets`) is expanded into one kernel per dtype,
``{dtype}`` in its name, operand dtypes and doc standing for the dtype, and its
``where`` clauses adding constraints (or setting modes or the doc) for some of
them.  Every expanded kernel is then validated like a plain row; an error names
the file, the row and the expansion.  See docs/runtime.md for the file format.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

import yaml

from ckir.dialects.dims import (
    DimError,
    dim_symbols,
    evaluate_dim,
    parse_constraint,
    product_factors,
)
from ckir.errors import CkirError, one_line
from ckir.resources import runtime_dir
from ckir.vocab import (
    BLOCK_DTYPES,
    DTYPES,
    KERNEL_OPS,
    MODES,
    PANEL_DTYPES,
    WEIGHT_DTYPES,
    dtype_info,
)

__all__ = [
    "ACCESSES",
    "PARAM_TYPES",
    "KernelSpec",
    "OperandSpec",
    "ParamSpec",
    "RegistryError",
    "constraint_problem",
    "dtype_sets",
    "extent_values",
    "load_registry",
    "panel_extent_problem",
    "parse_registry",
    "registry_path",
]

ACCESSES = ("read", "write", "readwrite")
PARAM_TYPES = {"i64": "int64_t", "f32": "float", "f32s": "const float *"}
_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class RegistryError(CkirError, ValueError):
    """A malformed registry entry: one line naming the file and the kernel row (the CLIs
    print it as they print any :class:`~ckir.errors.CkirError`)."""


# ---------------------------------------------------------------------- specs


def constraint_problem(expr: str, params: frozenset[str]) -> str | None:
    """Why ``expr`` is no constraint over ``params`` (the dims language), or None."""
    try:
        names = parse_constraint(expr).names()
    except DimError as exc:
        return str(exc)
    unknown = sorted(names - params)
    if unknown:
        return f"unknown name {unknown[0]!r} (params: {', '.join(sorted(params))})"
    return None


def panel_extent_problem(dtype: str, extent: str) -> str | None:
    """Why ``extent`` cannot bound an operand of ``dtype``, or None.

    An operand of a panel dtype (``f32p``, ``bf16p``, ``q8_0p``, ``q4_1p``: a [rows, cols] matrix
    stored in padded panels) states its extent in logical elements as a product ``rows*cols``
    (``"N*K"``), so that :func:`extent_values` can count the padding rows the
    kernel touches.  Other dtypes take any dim expression.
    """
    if dtype not in PANEL_DTYPES or not extent:
        return None
    if product_factors(extent) is None:
        return (
            f'{dtype} operands state their extent as a product rows*cols (like "N*K"), '
            f"got {extent!r}"
        )
    return None


def extent_values(dtype: str, extent: str, env: Mapping[str, int]) -> int:
    """Stored values an operand of ``dtype`` with ``extent`` may touch at the params ``env``.

    The extent evaluated, for most dtypes (block dtypes count logical elements,
    whole blocks being implied).  Panel dtypes: ``rows*cols`` touches whole panels,
    ``ceil(rows / panel) * panel * cols`` values.  Raises what
    :func:`~ckir.dialects.dims.evaluate_dim` raises.
    """
    panel = PANEL_DTYPES.get(dtype)
    factors = product_factors(extent) if panel is not None else None
    if panel is None or factors is None:
        return evaluate_dim(extent, env)
    rows, cols = (evaluate_dim(f, env) for f in factors)
    return -(-rows // panel) * panel * cols


@dataclass(frozen=True)
class OperandSpec:
    """A buffer argument: name, element dtype and access (read | write | readwrite)."""

    name: str
    dtype: str
    access: str
    #: elements the kernel may touch, a dim expression over the params ("T*E"); "" = unstated.
    #: Checked by the lowered.call verifier; not part of the C signature, so not compared.
    extent: str = field(default="", compare=False)

    def c_decl(self) -> str:
        ctype = dtype_info(self.dtype).c_type
        const = "const " if self.access == "read" else ""
        return f"{const}{ctype} *{self.name}"


@dataclass(frozen=True)
class ParamSpec:
    """A scalar argument: name and type ("i64" → int64_t, "f32" → float; "f32s" → const
    float *, a small table of floats fixed at compile time)."""

    name: str
    type: str

    def c_decl(self) -> str:
        return f"{PARAM_TYPES[self.type]} {self.name}"


@dataclass(frozen=True)
class KernelSpec:
    """One registry entry: a C kernel, the op it implements and its calling convention."""

    name: str
    c_name: str
    op: str
    modes: tuple[str, ...]
    operands: tuple[OperandSpec, ...]
    params: tuple[ParamSpec, ...]
    constraints: tuple[str, ...]
    doc: str

    def inputs(self) -> tuple[OperandSpec, ...]:
        """Operands the kernel only reads."""
        return tuple(o for o in self.operands if o.access == "read")

    def outputs(self) -> tuple[OperandSpec, ...]:
        """Operands the kernel writes (access write or readwrite)."""
        return tuple(o for o in self.operands if o.access in ("write", "readwrite"))

    def param_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.params)

    def check(self, params: Mapping[str, int | float], *, partial: bool = False) -> list[str]:
        """Messages for every constraint the given param values violate (empty: all hold).

        With ``partial``, constraints over params not given (values known only
        at run time) are skipped instead of reported.
        """
        problems = []
        for expr in self.constraints:
            constraint = parse_constraint(expr)
            used = sorted(constraint.names())
            missing = [n for n in used if n not in params]
            if missing:
                if partial:
                    continue
                problems.append(f"{self.name}: constraint '{expr}' needs {', '.join(missing)}")
                continue
            try:
                ok = constraint.holds(params)
            except (ValueError, ZeroDivisionError):  # an inexact or zero division
                ok = False
            if not ok:
                shown = ", ".join(f"{n}={params[n]}" for n in used)
                problems.append(f"{self.name}: constraint '{expr}' violated ({shown})")
        return problems

    def c_signature(self) -> str:
        """The C prototype (without the trailing semicolon) this entry describes."""
        args = [o.c_decl() for o in self.operands] + [p.c_decl() for p in self.params]
        return f"void {self.c_name}({', '.join(args)})"


# --------------------------------------------------------------------- loading


def registry_path() -> Path:
    """``runtime/registry.yaml`` of this ckir (package data: see ckir.resources)."""
    return runtime_dir() / "registry.yaml"


def _fail(where: str, msg: str) -> RegistryError:
    return RegistryError(f"{where}: {msg}")


def _get(entry: Mapping[str, Any], key: str, where: str, kind: type | tuple[type, ...]) -> Any:
    if key not in entry:
        raise _fail(where, f"missing field '{key}'")
    value = entry[key]
    if not isinstance(value, kind):
        kname = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
        raise _fail(where, f"field '{key}' must be a {kname}, got {value!r}")
    return value


#: the version of the format this loader reads (docs/runtime.md)
VERSION = 2
#: placeholder of a family row: the dtype of one expansion
DTYPE_PLACEHOLDER = "{dtype}"
#: fields of a kernel row, and those a ``where`` clause may set
_ROW_FIELDS = frozenset(
    {"op", "modes", "dtypes", "operands", "params", "constraints", "doc", "where"}
)
_WHERE_FIELDS = frozenset({"modes", "constraints", "doc"})


def dtype_sets() -> Mapping[str, tuple[str, ...]]:
    """The named dtype sets a family row's ``dtypes`` and ``where`` may use, from
    :mod:`ckir.vocab`: ``weights`` (every ``--dtype``), ``blocks`` (weight dtypes
    stored in quantized blocks, panel forms included), ``panels`` (the panel dtypes),
    ``kquants`` (the block dtypes of 256-element super-blocks: q4_k, q5_k, q6_k)."""
    return MappingProxyType(
        {
            "weights": WEIGHT_DTYPES,
            "blocks": tuple(d for d in WEIGHT_DTYPES if d in BLOCK_DTYPES),
            "panels": tuple(PANEL_DTYPES),
            "kquants": tuple(
                d for d in WEIGHT_DTYPES if d in BLOCK_DTYPES and BLOCK_DTYPES[d][1] == 256
            ),
        }
    )


def _dtype_names(item: Any, where: str, what: str) -> tuple[str, ...]:
    """The dtypes a set name or dtype name stands for."""
    sets = dtype_sets()
    if isinstance(item, str) and item in sets:
        return sets[item]
    if isinstance(item, str) and item in DTYPES:
        return (item,)
    known = ", ".join([*sets, *DTYPES])
    raise _fail(where, f"{what}: {item!r} is no dtype or dtype set (known: {known})")


def _row_dtypes(row: Mapping[str, Any], where: str) -> tuple[str, ...]:
    """The dtypes a family row expands over, in the order written (``-name`` removes)."""
    items = row["dtypes"]
    if not isinstance(items, list) or not items:
        raise _fail(where, f"dtypes must be a non-empty list of dtypes or sets, got {items!r}")
    out: list[str] = []
    for item in items:
        if isinstance(item, str) and item.startswith("-"):
            drop = _dtype_names(item[1:], where, "dtypes")
            out = [d for d in out if d not in drop]
        else:
            out += [d for d in _dtype_names(item, where, "dtypes") if d not in out]
    if not out:
        raise _fail(where, f"dtypes {items} leave no dtype")
    return tuple(out)


def _substitute(value: Any, dtype: str) -> Any:
    """``value`` with every ``{dtype}`` in its strings replaced by ``dtype``."""
    if isinstance(value, str):
        return value.replace(DTYPE_PLACEHOLDER, dtype)
    if isinstance(value, list):
        return [_substitute(v, dtype) for v in value]
    if isinstance(value, Mapping):
        return {k: _substitute(v, dtype) for k, v in value.items()}
    return value


def _mentions_placeholder(value: Any) -> bool:
    if isinstance(value, str):
        return DTYPE_PLACEHOLDER in value
    if isinstance(value, list):
        return any(_mentions_placeholder(v) for v in value)
    if isinstance(value, Mapping):
        return any(_mentions_placeholder(v) for v in value.values())
    return False


def _expand_row(name: str, row: Any, source: str) -> dict[str, dict[str, Any]]:
    """The kernel entries of one row: itself, or one per dtype of a family row."""
    where = f"{source}: kernel '{name}'"
    if not isinstance(row, Mapping):
        raise _fail(where, "entry must be a mapping")
    extra = sorted(map(str, set(row) - _ROW_FIELDS))
    if extra:
        raise _fail(where, f"unknown field(s) {', '.join(extra)}")
    if "dtypes" not in row:
        if "where" in row:
            raise _fail(where, "'where' needs a family row (a 'dtypes' list)")
        if _mentions_placeholder(dict(row)) or DTYPE_PLACEHOLDER in name:
            raise _fail(where, f"{DTYPE_PLACEHOLDER} needs a family row (a 'dtypes' list)")
        return {name: dict(row)}
    if DTYPE_PLACEHOLDER not in name:
        raise _fail(where, f"a family row's name must contain {DTYPE_PLACEHOLDER}")
    dtypes = _row_dtypes(row, where)
    if not isinstance(row.get("constraints", []), list):
        raise _fail(where, "constraints must be a list of strings")
    clauses = row.get("where", {})
    if not isinstance(clauses, Mapping):
        raise _fail(where, f"where must map dtypes or sets to fields, got {clauses!r}")
    resolved: list[tuple[tuple[str, ...], Mapping[str, Any]]] = []
    for key, fields in clauses.items():
        w = f"{where} where {key}"
        covered = _dtype_names(key, where, "where")
        if not set(covered) & set(dtypes):
            raise _fail(w, f"names none of the row's dtypes ({', '.join(dtypes)})")
        if not isinstance(fields, Mapping) or not fields:
            raise _fail(w, f"must map some of {sorted(_WHERE_FIELDS)} to values, got {fields!r}")
        bad = sorted(map(str, set(fields) - _WHERE_FIELDS))
        if bad:
            raise _fail(
                w, f"unknown field(s) {', '.join(bad)} (a where sets {sorted(_WHERE_FIELDS)})"
            )
        if "constraints" in fields and not isinstance(fields["constraints"], list):
            raise _fail(w, "constraints must be a list of strings (added to the row's)")
        resolved.append((covered, fields))
    out: dict[str, dict[str, Any]] = {}
    for dtype in dtypes:
        entry = {k: v for k, v in row.items() if k not in ("dtypes", "where")}
        entry["constraints"] = list(entry.get("constraints", []))
        for covered, fields in resolved:
            if dtype not in covered:
                continue
            for key, value in fields.items():
                if key == "constraints":
                    entry["constraints"] = entry["constraints"] + list(value)
                else:
                    entry[key] = value
        out[name.replace(DTYPE_PLACEHOLDER, dtype)] = _substitute(entry, dtype)
    return out


def _parse_kernel(name: str, entry: Mapping[str, Any], where: str) -> KernelSpec:
    """The spec of one expanded entry (its fields already checked by :func:`_expand_row`)."""
    if not _IDENT.match(str(name)):
        raise _fail(where, "kernel name must be a C identifier")
    c_name = f"ckir_{name}"
    op = _get(entry, "op", where, str)
    if op not in KERNEL_OPS:
        raise _fail(where, f"unknown op {op!r} (known: {', '.join(sorted(KERNEL_OPS))})")
    modes = _get(entry, "modes", where, list)
    if not modes or any(m not in MODES for m in modes) or len(set(modes)) != len(modes):
        raise _fail(where, f"modes must be a non-empty list drawn from {list(MODES)}, got {modes}")

    operands = []
    for i, o in enumerate(_get(entry, "operands", where, list)):
        w = f"{where} operand {i}"
        if not isinstance(o, Mapping) or not (
            {"name", "dtype", "access"} <= set(o) <= {"name", "dtype", "access", "extent"}
        ):
            raise _fail(w, f"must be {{name, dtype, access[, extent]}}, got {o!r}")
        if not _IDENT.match(str(o["name"])):
            raise _fail(w, f"name {o['name']!r} is not an identifier")
        if o["dtype"] not in DTYPES:
            raise _fail(w, f"unknown dtype {o['dtype']!r} (known: {', '.join(DTYPES)})")
        if o["access"] not in ACCESSES:
            raise _fail(w, f"access must be one of {list(ACCESSES)}, got {o['access']!r}")
        extent = o.get("extent", "")
        if not isinstance(extent, str):
            raise _fail(w, f"extent must be a string (a dim expression), got {extent!r}")
        operands.append(
            OperandSpec(str(o["name"]), str(o["dtype"]), str(o["access"]), extent.replace(" ", ""))
        )
    if not operands:
        raise _fail(where, "a kernel needs at least one buffer operand")
    # calls bind inputs then outputs in operand order: read operands must come first
    written = [o.name for o in operands if o.access != "read"]
    late = [o.name for o in operands[len(operands) - len(written) :] if o.access == "read"]
    if late:
        raise _fail(
            where,
            f"read operand {late[0]!r} follows a written one ({written[0]!r}); list the read "
            "operands first (a call binds its inputs, then its outputs, in operand order)",
        )

    raw_params = entry.get("params", {})
    if not isinstance(raw_params, Mapping):
        raise _fail(where, f"params must map each name to a type ({{n: i64}}), got {raw_params!r}")
    params = []
    for pname, ptype in raw_params.items():
        w = f"{where} param {pname!r}"
        if not isinstance(pname, str) or not _IDENT.match(pname):
            raise _fail(w, "name is not an identifier (quote names YAML reads as booleans)")
        if ptype not in PARAM_TYPES:
            raise _fail(w, f"type must be one of {list(PARAM_TYPES)}, got {ptype!r}")
        params.append(ParamSpec(pname, str(ptype)))

    pnames = frozenset(p.name for p in params)
    for o in operands:
        if o.extent:
            try:
                unknown = sorted(dim_symbols(o.extent) - pnames)
            except ValueError as exc:
                raise _fail(where, f"operand {o.name}: bad extent {o.extent!r}: {exc}") from None
            if unknown:
                raise _fail(
                    where, f"operand {o.name}: extent {o.extent!r} names no param {unknown[0]}"
                )
            problem = panel_extent_problem(o.dtype, o.extent)
            if problem is not None:
                raise _fail(where, f"operand {o.name}: {problem}")

    all_names = [o.name for o in operands] + [p.name for p in params]
    dupes = sorted({n for n in all_names if all_names.count(n) > 1})
    if dupes:
        raise _fail(where, f"duplicate argument name(s) {', '.join(dupes)}")

    constraints = entry.get("constraints", [])
    if not isinstance(constraints, list) or not all(isinstance(c, str) for c in constraints):
        raise _fail(where, "constraints must be a list of strings")
    for c in constraints:
        problem = constraint_problem(c, pnames)
        if problem is not None:
            raise _fail(where, f"bad constraint {c!r}: {problem}")
    doc = entry.get("doc", "")
    if not isinstance(doc, str):
        raise _fail(where, "doc must be a string")
    return KernelSpec(
        name=str(name),
        c_name=c_name,
        op=op,
        modes=tuple(modes),
        operands=tuple(operands),
        params=tuple(params),
        constraints=tuple(constraints),
        doc=doc,
    )


def parse_registry(data: Any, source: str = "registry.yaml") -> Mapping[str, KernelSpec]:
    """Validate already-loaded YAML data and expand its family rows.

    Raises RegistryError naming the file and the row (and, for a family row, the
    dtype of the expansion) on any malformed entry.
    """
    if not isinstance(data, Mapping):
        raise RegistryError(f"{source}: top level must be a mapping")
    if data.get("version") != VERSION:
        raise RegistryError(
            f"{source}: unsupported version {data.get('version')!r} (expected {VERSION}; "
            "the format is in docs/runtime.md)"
        )
    extra = sorted(map(str, set(data) - {"version", "kernels"}))
    if extra:
        raise RegistryError(f"{source}: unknown top-level field(s) {', '.join(extra)}")
    kernels = data.get("kernels")
    if not isinstance(kernels, Mapping) or not kernels:
        raise RegistryError(f"{source}: 'kernels' must be a non-empty mapping")
    specs: dict[str, KernelSpec] = {}
    row_of: dict[str, str] = {}
    for row_name, row in kernels.items():
        for name, entry in _expand_row(str(row_name), row, source).items():
            if name in specs:
                raise RegistryError(
                    f"{source}: kernel '{row_name}' gives '{name}', "
                    f"which kernel '{row_of[name]}' gives too"
                )
            where = f"{source}: kernel '{row_name}'"
            if name != row_name:
                where += f" ({name})"
            specs[name] = _parse_kernel(name, entry, where)
            row_of[name] = str(row_name)
    return MappingProxyType(specs)


@functools.lru_cache(maxsize=8)
def _load(path: str) -> Mapping[str, KernelSpec]:
    p = Path(path)
    try:
        data = yaml.safe_load(p.read_text())
    except OSError as exc:
        raise RegistryError(f"cannot read kernel registry {p}: {exc}") from None
    except yaml.YAMLError as exc:
        raise RegistryError(f"{p.name}: invalid YAML: {one_line(exc)}") from None
    return parse_registry(data, p.name)


def registry_paths() -> list[Path]:
    """``runtime/registry.yaml`` then every ``runtime/registry_*.yaml`` (by name)."""
    main = registry_path()
    return [main, *sorted(main.parent.glob("registry_*.yaml"))]


@functools.lru_cache(maxsize=1)
def _load_all(paths: tuple[str, ...]) -> Mapping[str, KernelSpec]:
    merged: dict[str, KernelSpec] = {}
    owner: dict[str, str] = {}
    for path in paths:
        name = Path(path).name
        for kname, spec in _load(path).items():
            clash = kname if kname in merged else None
            clash = clash or next((k for k, s in merged.items() if s.c_name == spec.c_name), None)
            if clash is not None:
                raise RegistryError(
                    f"{name}: kernel '{kname}' clashes with '{clash}' of {owner[clash]}"
                )
            merged[kname] = spec
            owner[kname] = name
    return MappingProxyType(merged)


def load_registry(path: Path | str | None = None) -> Mapping[str, KernelSpec]:
    """Load and validate a registry file, or by default every runtime registry file merged.

    The default is ``runtime/registry.yaml`` plus ``runtime/registry_*.yaml``
    (one file per kernel family); a kernel name or C name defined twice is an
    error naming both files.  Cached.
    """
    if path is not None:
        return _load(str(Path(path).resolve()))
    return _load_all(tuple(str(p) for p in registry_paths()))
