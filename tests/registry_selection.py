"""The kernel selection of the builds the test suite makes, recorded and replayed.

A guard for changes to the kernel registry's format: the same registry must
give the same entries and make lowering choose the same kernels.  Two records,
checked in under ``tests/registry_expected/`` and compared by
``tests/test_registry_selection.py``:

- ``entries.json``: every expanded registry entry (:class:`ckir.registry.KernelSpec`),
  field by field, operand extents included.
- ``selection.json``: for every build of :func:`builds` (template x weight dtype x
  panels x fusion x logits x modes, HF folders and GGUF files), the kernel each
  ``lowered.call`` of each program names, in program order; and every question
  lowering and fusion asked :func:`ckir.passes.lowering.kernels.select_kernel`
  while making them (op kind, mode, buffer dtypes, params) with its answer (a
  kernel, or none: fusion then leaves the calls alone).  Replaying the questions
  is fast; re-lowering the builds is the end-to-end check.

Regenerate (only when a selection change is intended, and say so in the commit)::

    python tests/registry_selection.py --write
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from ckir.compiler import CompileOptions, import_source, lower
from ckir.dialects import lowered as lw
from ckir.errors import CkirError
from ckir.passes.lowering import kernels
from ckir.registry import KernelSpec, load_registry
from ckir.tools.zoo import make_numpy_model
from ckir.vocab import PANEL_DTYPES

EXPECTED_DIR = Path(__file__).parent / "registry_expected"
ENTRIES_FILE = EXPECTED_DIR / "entries.json"
SELECTION_FILE = EXPECTED_DIR / "selection.json"
MAX_CONTEXT = 32

#: checkpoint name -> (zoo architecture, config overrides); the shapes the suite uses:
#: the zoo defaults (llama's I = 172 is no multiple of 32), I = 128, a vocabulary of
#: 250 (no multiple of the 32-row panels), tied and untied qwen2
SOURCES: dict[str, tuple[str, dict[str, Any]]] = {
    "llama": ("llama", {}),
    "llama_i128": ("llama", {"intermediate_size": 128}),
    "llama_v250": ("llama", {"vocab_size": 250}),
    "mistral": ("mistral", {}),
    "qwen2_tied": ("qwen2", {"tie_word_embeddings": True}),
    "qwen2_untied": ("qwen2", {"tie_word_embeddings": False}),
    "qwen2_untied_v250": ("qwen2", {"tie_word_embeddings": False, "vocab_size": 250}),
    "gpt2": ("gpt2", {}),
}
#: GGUF file name -> (zoo architecture, config overrides, GGUF type of its matrices);
#: block types need every K a multiple of 32, hence I = 128
GGUF_SOURCES: dict[str, tuple[str, dict[str, Any], str]] = {
    "llama_i128.q8_0.gguf": ("llama", {"intermediate_size": 128}, "Q8_0"),
    "llama_i128.q4_0.gguf": ("llama", {"intermediate_size": 128}, "Q4_0"),
    "llama_i128.q4_1.gguf": ("llama", {"intermediate_size": 128}, "Q4_1"),
    "qwen2_tied_i128.q8_0.gguf": ("qwen2", {"intermediate_size": 128}, "Q8_0"),
}
#: weight storage choices: (--dtype, panels); None panels = the default (on for inference)
_CONVERTIBLE = ("f32", "bf16", "q8_0", "q4_0", "q4_1")
WEIGHT_CHOICES: tuple[tuple[str | None, bool | None], ...] = (
    (None, None),
    (None, False),
    *((d, p) for d in _CONVERTIBLE for p in (None, False)),
    *((d, None) for d in PANEL_DTYPES),
)


@dataclass(frozen=True)
class Build:
    """One build of the matrix: a source and the options that change kernel choice."""

    source: str
    modes: tuple[str, ...]
    dtype: str | None
    panels: bool | None
    fuse: bool
    logits: str

    @property
    def key(self) -> str:
        """A stable name: ``llama/prefill+decode/dtype=q8_0/panels=off/fuse/logits=last``."""
        panels = {None: "default", True: "on", False: "off"}[self.panels]
        return "/".join(
            (
                self.source,
                "+".join(self.modes),
                f"dtype={self.dtype or 'source'}",
                f"panels={panels}",
                "fuse" if self.fuse else "nofuse",
                f"logits={self.logits}",
            )
        )

    def options(self) -> CompileOptions:
        return CompileOptions(
            modes=self.modes,
            max_context=MAX_CONTEXT,
            dtype=self.dtype,
            panels=self.panels,
            fuse=self.fuse,
            logits=self.logits,
        )


def builds() -> list[Build]:
    """Every build of the matrix, in a fixed order."""
    inference = ("prefill", "decode")
    out: list[Build] = []
    for source in SOURCES:
        for dtype, panels in WEIGHT_CHOICES:
            for fuse in (True, False):
                out.append(Build(source, inference, dtype, panels, fuse, "all"))
            out.append(Build(source, inference, dtype, panels, True, "last"))
        for dtype in (None, "f32"):
            for fuse in (True, False):
                out.append(Build(source, (*inference, "backward"), dtype, None, fuse, "all"))
    for source in GGUF_SOURCES:
        for dtype, panels in ((None, None), (None, False), ("f32", None)):
            for fuse in (True, False):
                out.append(Build(source, inference, dtype, panels, fuse, "all"))
            out.append(Build(source, inference, dtype, panels, True, "last"))
    return out


# ------------------------------------------------------------------ making the sources


def make_source(name: str, root: Path) -> Path:
    """Write the source ``name`` of :data:`SOURCES` or :data:`GGUF_SOURCES` under ``root``."""
    if name in SOURCES:
        arch, overrides = SOURCES[name]
        return make_numpy_model(arch, root / name, seed=0, **overrides)
    sys.path.insert(0, str(Path(__file__).parent))
    from gguf_fixtures import gguf_from_hf

    arch, overrides, qtype = GGUF_SOURCES[name]
    hf = make_numpy_model(arch, root / f"{name}.hf", seed=0, **overrides)
    return gguf_from_hf(hf, root / name, qtype=qtype)


# ------------------------------------------------------------------- recording choices

Query = dict[str, Any]


@contextmanager
def recording_queries() -> Iterator[list[Query]]:
    """Every ``select_kernel`` question asked inside the block, with its answer.

    The lowering and fusion modules import ``select_kernel`` by name, so each
    module's binding is replaced for the duration.
    """
    original = kernels.select_kernel
    log: list[Query] = []

    def recorded(
        kind: str,
        mode: str,
        in_dtypes: Any,
        out_dtypes: Any,
        params: Any,
        *,
        where: str,
    ) -> KernelSpec:
        query: Query = {
            "kind": kind,
            "mode": mode,
            "ins": list(in_dtypes),
            "outs": list(out_dtypes),
            "params": {k: params[k] for k in sorted(params)},
        }
        try:
            spec = original(kind, mode, in_dtypes, out_dtypes, params, where=where)
        except CkirError:
            log.append({**query, "kernel": None})
            raise
        log.append({**query, "kernel": spec.name})
        return spec

    patched = [
        m
        for m in list(sys.modules.values())
        if m is not None
        and getattr(m, "__name__", "").startswith("ckir")
        and getattr(m, "select_kernel", None) is original
    ]
    for m in patched:
        m.select_kernel = recorded  # type: ignore[attr-defined]
    try:
        yield log
    finally:
        for m in patched:
            m.select_kernel = original  # type: ignore[attr-defined]


def lowered_calls(build: Build, path: Path) -> dict[str, list[str]] | str:
    """``{mode: [kernel of each call, in order]}`` of ``build``, or its CkirError text."""
    try:
        module, _, _ = import_source(path, None)
        lower(module, build.options())
    except CkirError as exc:
        return f"error: {exc}"
    out: dict[str, list[str]] = {}
    for op in module.walk():
        if isinstance(op, lw.ProgramOp):
            calls = [c.kernel_name for c in op.walk() if isinstance(c, lw.CallOp)]
            out[op.mode_name] = calls
    return out


def select(query: Query) -> str | None:
    """The kernel ``select_kernel`` answers ``query`` with now (None: no kernel fits)."""
    try:
        spec = kernels.select_kernel(
            query["kind"],
            query["mode"],
            query["ins"],
            query["outs"],
            query["params"],
            where="replay",
        )
    except CkirError:
        return None
    return spec.name


def record_selection(root: Path) -> dict[str, Any]:
    """Lower every build and return what selection.json holds.

    ``programs`` numbers each distinct call list once; ``builds`` maps a build's key
    to ``{mode: program number}`` (or an error text); ``queries`` lists each distinct
    ``select_kernel`` question with its answer.
    """
    paths = {name: make_source(name, root) for name in (*SOURCES, *GGUF_SOURCES)}
    programs: list[list[str]] = []
    index: dict[tuple[str, ...], int] = {}
    table: dict[str, dict[str, int] | str] = {}
    queries: dict[str, Query] = {}
    with recording_queries() as log:
        for build in builds():
            calls = lowered_calls(build, paths[build.source])
            if isinstance(calls, str):
                table[build.key] = calls
                continue
            row: dict[str, int] = {}
            for mode, names in calls.items():
                key = tuple(names)
                if key not in index:
                    index[key] = len(programs)
                    programs.append(names)
                row[mode] = index[key]
            table[build.key] = row
    for q in log:
        queries.setdefault(json.dumps(q, sort_keys=True), q)
    return {
        "programs": programs,
        "builds": table,
        "queries": [queries[k] for k in sorted(queries)],
    }


def expanded_entries() -> dict[str, dict[str, Any]]:
    """Every registry entry as plain data: what entries.json holds."""
    out: dict[str, dict[str, Any]] = {}
    for name in sorted(load_registry()):
        spec = load_registry()[name]
        data = asdict(spec)
        data["operands"] = [asdict(o) for o in spec.operands]  # extent included
        data["params"] = [asdict(p) for p in spec.params]
        data["modes"] = list(spec.modes)
        data["constraints"] = list(spec.constraints)
        out[name] = data
    return out


def program_calls(selection: dict[str, Any], key: str) -> dict[str, list[str]] | str:
    """The recorded calls of build ``key``: ``{mode: [kernel, ...]}`` or its error text."""
    row = selection["builds"][key]
    if isinstance(row, str):
        return row
    return {mode: selection["programs"][i] for mode, i in row.items()}


def dump(data: Any) -> str:
    """Sorted-key JSON, one line per list or mapping of scalars (a program, an operand)
    and per query, so that a change shows as a short diff."""

    def one_line(v: Any) -> bool:
        if isinstance(v, dict) and "kernel" in v and "kind" in v:  # a query
            return True
        items = v.values() if isinstance(v, dict) else v
        return not any(isinstance(x, (dict, list)) for x in items)

    def fmt(v: Any, depth: int) -> str:
        if not isinstance(v, (dict, list)) or one_line(v):
            return json.dumps(v, sort_keys=True)
        pad, inner = " " * depth, " " * (depth + 1)
        if isinstance(v, dict):
            body = [f"{inner}{json.dumps(k)}: {fmt(v[k], depth + 1)}" for k in sorted(v)]
            return "{\n" + ",\n".join(body) + f"\n{pad}}}"
        body = [f"{inner}{fmt(x, depth + 1)}" for x in v]
        return "[\n" + ",\n".join(body) + f"\n{pad}]"

    return fmt(data, 0) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="rewrite the expected files")
    args = parser.parse_args(argv)
    if not args.write:
        parser.error("nothing to do: pass --write to rewrite tests/registry_expected/")
    EXPECTED_DIR.mkdir(exist_ok=True)
    ENTRIES_FILE.write_text(dump(expanded_entries()))
    with tempfile.TemporaryDirectory() as tmp:
        SELECTION_FILE.write_text(dump(record_selection(Path(tmp))))
    print(f"wrote {ENTRIES_FILE} and {SELECTION_FILE}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
