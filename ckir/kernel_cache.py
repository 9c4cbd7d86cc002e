"""The kernel cache: compiled kernel libraries kept under ``$CKIR_CACHE_DIR/kernels/<key>``.

``ckir kernel build | validate | bench | tune`` and ``ckir kernel serve`` compile
kernel IR through this cache.  An entry is a folder named by its key holding

* ``kernel.c`` — the generated source, as first built;
* ``libkernel.so`` — the compiled library;
* ``entry.json`` — the header: format and version, the key, every part of the key
  (:func:`key_parts`) and the size and SHA-256 of both files.

The key is a SHA-256 over these parts:

==================  ===========================================================
``ir``              the structural IR key (:func:`ckir.ir_key.ir_key`): blind to
                    SSA names, the names of ``kernel.input`` tensors, key order
                    and whitespace; every op, type, dim and schedule hint counts
``entry_points``    the ``kernel.func`` names (the library's exported symbols)
``dtype``           the element types of the kernels' tensors (``f32``)
``shape_bucket``    ``any``: a kernel is compiled once for every size (its dims
                    are run-time arguments); tuning records carry real buckets
``target``          ``c`` (the generated C); ``device``: ``cpu``
``isa``             the build's ISA (``native``, ``avx2``, ``scalar``) and its
                    vector width (``vector_width``: 16 or 8 lanes)
``compiler``        the first line of ``cc --version``
``runtime``         the runtime fingerprint (compiler identity with its
                    ``-march`` macros, flags, headers the kernel includes)
``source``          SHA-256 of the C generated with the inputs renamed
                    ``in0, in1, ...``: a change of the C generator is a miss
==================  ===========================================================

An entry is used only if its header reads, names the same key and the same parts,
and both files still have their recorded size and hash; anything else (a
truncated library, a flipped byte, an edited header) is noted on stderr and
rebuilt, never loaded.  Entries are built in a temporary folder and renamed into
place, so an interrupted build leaves no half entry.

Example::

    with KernelCache.open(None) as cache:
        built = cache.build(module, isa="native", where="mm.mlir")
        lib = ctypes.CDLL(str(built.library))   # built.hit: found in the cache
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from xdsl.dialects.builtin import ModuleOp, StringAttr

import ckir
from ckir import kernel_tools as kt
from ckir.dialects.graph import TensorType
from ckir.errors import CkirError
from ckir.fileio import write_text_atomically
from ckir.integrity import clean_leftovers, file_digests, verify_digests
from ckir.ir_key import ir_key
from ckir.runtime_build import compiler_version, isa_vector_width, runtime_fingerprint

__all__ = [
    "ENTRY_FORMAT",
    "BuiltKernel",
    "KernelCache",
    "default_root",
    "entry_problem",
    "export",
    "kernel_cache_options",
    "key_parts",
    "open_cache",
]

ENTRY_FORMAT = "ckir-kernel-cache"
ENTRY_VERSION = 1
SOURCE = "kernel.c"
LIBRARY = "libkernel.so"
HEADER = "entry.json"
#: an entry's files, whose digests the header records
FILES = (SOURCE, LIBRARY)
TARGET = "c"
DEVICE = "cpu"


def default_root() -> Path:
    """``$CKIR_CACHE_DIR/kernels``, else ``~/.cache/ckir/kernels`` (next to the compile cache)."""
    from ckir.cache import cache_root

    return cache_root() / "kernels"


def canonical_names(module: ModuleOp) -> ModuleOp:
    """A copy of ``module`` whose kernel inputs are named ``in0, in1, ...`` per func and
    whose SSA values have no names (the C quotes them in comments)."""
    copy = module.clone()
    for func in kt.funcs(copy):
        for i, inp in enumerate(func.inputs()):
            inp.properties["input_name"] = StringAttr(f"in{i}")
    for op in copy.walk():
        for value in op.results:
            value.name_hint = None
    return copy


def _dtypes(module: ModuleOp) -> str:
    found = {
        str(r.type.dtype.data)
        for op in module.walk()
        for r in op.results
        if isinstance(r.type, TensorType)
    }
    return ",".join(sorted(found))


def key_parts(module: ModuleOp, isa: str, *, where: str = "") -> dict[str, str]:
    """The parts of a kernel library's cache key and the key itself (``key``)."""
    canonical = kt.generate(canonical_names(module), isa, where).source
    parts = {
        "ir": ir_key(module),
        "entry_points": ",".join(f.func_name for f in kt.funcs(module)),
        "dtype": _dtypes(module),
        "shape_bucket": "any",
        "target": TARGET,
        "device": DEVICE,
        "isa": isa,
        "vector_width": str(isa_vector_width(isa)),
        "compiler": compiler_version(),
        "runtime": runtime_fingerprint(isa),
        "source": hashlib.sha256(canonical.encode()).hexdigest(),
        "ckir_version": ckir.__version__,
    }
    blob = "\n".join(f"{name}={value}" for name, value in sorted(parts.items()))
    parts["key"] = hashlib.sha256(blob.encode()).hexdigest()
    return parts


def entry_problem(entry: Path, parts: dict[str, str]) -> str | None:
    """None when ``entry`` is a complete, intact entry for ``parts``; else why not."""
    try:
        header = json.loads((entry / HEADER).read_text())
    except OSError as err:
        return f"{HEADER}: {err.strerror or err}"
    except ValueError as err:
        return f"{HEADER}: not JSON ({err})"
    if not isinstance(header, dict) or header.get("format") != ENTRY_FORMAT:
        return f"{HEADER}: not a {ENTRY_FORMAT} header"
    if header.get("version") != ENTRY_VERSION:
        return f"{HEADER}: version {header.get('version')!r}, expected {ENTRY_VERSION}"
    recorded = header.get("parts")
    if not isinstance(recorded, dict):
        return f"{HEADER}: no key parts"
    differing = sorted(n for n in set(parts) | set(recorded) if recorded.get(n) != parts.get(n))
    if differing:
        return f"{HEADER}: key parts differ ({', '.join(differing)})"
    return verify_digests(entry, header.get("files"))


@dataclass
class BuiltKernel:
    """A compiled kernel library: where it is, its key, whether the cache had it."""

    library: Path
    source_path: Path
    source: str  # the C generated for the module as given (its tensor names)
    key: str
    hit: bool
    notes: list[str] = field(default_factory=list)


class KernelCache:
    """Compiled kernel libraries by key (module docstring); ``root`` None: no cache
    (every build goes to a temporary folder removed by :meth:`close`)."""

    def __init__(
        self, root: Path | None, on_note: Callable[[str], None] | None = None,
        *, report: bool = False,
    ) -> None:  # fmt: skip
        self.root = root
        self.report = report  # a line on stderr per build: hit or compiled
        self._tmp: tempfile.TemporaryDirectory[str] | None = None
        self._count = 0
        self.on_note = on_note or (lambda note: print(f"note: {note}", file=sys.stderr))

    @classmethod
    @contextlib.contextmanager
    def open(
        cls, root: Path | None, *, disabled: bool = False,
        on_note: Callable[[str], None] | None = None, report: bool = False,
    ) -> Iterator[KernelCache]:  # fmt: skip
        """A cache at ``root`` (None: :func:`default_root`), or none when ``disabled``."""
        cache = cls(None if disabled else (root or default_root()), on_note, report=report)
        try:
            yield cache
        finally:
            cache.close()

    def close(self) -> None:
        """Remove the temporary folder of an uncached build."""
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def build(self, module: ModuleOp, *, isa: str = "native", where: str = "") -> BuiltKernel:
        """The library of ``module`` for ``isa``: from the cache, else compiled into it."""
        source = kt.generate(module, isa, where).source
        if self.root is None:
            if self._tmp is None:
                self._tmp = tempfile.TemporaryDirectory(prefix="ckir-kernel-")
            self._count += 1
            folder = Path(self._tmp.name) / str(self._count)
            lib = kt.build(module, folder, name="kernel", isa=isa, where=where)
            return BuiltKernel(lib, folder / SOURCE, source, "", hit=False)
        try:
            built = self._cached(module, isa, where, source)
        except OSError as err:
            raise CkirError(
                f"kernel cache {self.root}: cannot use {err.filename or self.root}: "
                f"{err.strerror or err} (set CKIR_CACHE_DIR or --cache-dir to a writable folder)"
            ) from None
        if self.report:
            what = "hit" if built.hit else "miss, compiled"
            print(f"kernel cache: {what} {built.key[:16]} ({self.root})", file=sys.stderr)
        return built

    def _cached(self, module: ModuleOp, isa: str, where: str, source: str) -> BuiltKernel:
        assert self.root is not None
        parts = key_parts(module, isa, where=where)
        key = parts["key"]
        entry = self.root / key
        if entry.exists():
            problem = entry_problem(entry, parts)
            if problem is None:
                return BuiltKernel(entry / LIBRARY, entry / SOURCE, source, key, hit=True)
            self.on_note(f"kernel cache: entry {key[:16]} is unusable ({problem}): rebuilding")
            shutil.rmtree(entry)
        self.root.mkdir(parents=True, exist_ok=True)
        clean_leftovers(self.root, [".*.tmp-*"])
        staging = Path(tempfile.mkdtemp(prefix=f".{key[:16]}.tmp-", dir=self.root))
        try:
            kt.build(module, staging, name="kernel", isa=isa, where=where)
            header = {
                "format": ENTRY_FORMAT,
                "version": ENTRY_VERSION,
                "key": key,
                "parts": parts,
                "files": file_digests(staging, FILES),
            }
            write_text_atomically(staging / HEADER, json.dumps(header, indent=2) + "\n")
            try:
                os.rename(staging, entry)
            except OSError:  # another process put the entry in place first
                if entry_problem(entry, parts) is not None:
                    raise
        finally:
            if staging.exists():
                shutil.rmtree(staging, ignore_errors=True)
        return BuiltKernel(entry / LIBRARY, entry / SOURCE, source, key, hit=False)


def export(built: BuiltKernel, out_dir: Path, stem: str) -> Path:
    """Copy a built library to ``out_dir/lib<stem>.so`` with its source as ``<stem>.c``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    write_text_atomically(out_dir / f"{stem}.c", built.source)
    lib = out_dir / f"lib{stem}.so"
    tmp = out_dir / f".lib{stem}.so.tmp-{os.getpid()}"
    shutil.copyfile(built.library, tmp)
    os.replace(tmp, lib)
    return lib


def kernel_cache_options(s: argparse.ArgumentParser) -> None:
    """``--cache-dir DIR`` and ``--no-cache`` for a command that compiles kernels."""
    s.add_argument(
        "--cache-dir", type=Path, help="kernel cache folder (default $CKIR_CACHE_DIR/kernels)"
    )
    s.add_argument("--no-cache", action="store_true", help="compile into a temporary folder")


def open_cache(args: argparse.Namespace) -> contextlib.AbstractContextManager[KernelCache]:
    """The kernel cache the options of :func:`kernel_cache_options` ask for."""
    return KernelCache.open(args.cache_dir, disabled=args.no_cache, report=True)
