"""Compile the ckir C runtime (plus optional extra sources) into a shared library.

The runtime kernels (``runtime/kernels/*.c``) are compiled once per
(compiler, ISA, flags, sources) into object files kept in a cache directory
(``$CKIR_CACHE_DIR/runtime/<hash>/`` or ``~/.cache/ckir/runtime/<hash>/``), so
linking a new model only compiles the model's own C files.  Object files and
the final library are written under a temporary name and renamed into place,
so a failed or interrupted build never leaves a partial file behind; a
temporary file a killed build left is deleted by a later build once it is an
hour old.  Each cached object has a ``.sha256`` file beside it: an object
whose bytes no longer match (truncated, emptied, flipped) is recompiled, not
linked.  The library is linked with ``-Wl,--no-undefined``, so a symbol
that no object defines fails the build instead of the first ``dlopen``.
"""

from __future__ import annotations

import functools
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ckir import resources
from ckir.fileio import write_text_atomically
from ckir.integrity import clean_leftovers, sha256_file

__all__ = [
    "RuntimeBuildError",
    "build_library",
    "cache_dir",
    "compile_runtime_objects",
    "isa_flags",
    "kernel_sources",
    "runtime_dir",
]

ISAS = ("native", "avx2", "scalar")
BASE_CFLAGS = ["-std=c11", "-O3", "-fPIC", "-fopenmp"]
DEBUG_CFLAGS = ["-g", "-DCKIR_DEBUG"]
LINK_LIBS = ["-lm"]
LINK_FLAGS = ["-shared", "-fopenmp", "-Wl,--no-undefined"]


class RuntimeBuildError(RuntimeError):
    """The C compiler failed; the message is one line naming the file and first error."""


def runtime_dir() -> Path:
    """ckir's ``runtime/`` directory (headers, kernels, registry; see ckir.resources)."""
    return resources.runtime_dir()


def kernel_sources() -> list[Path]:
    """The runtime's C sources, sorted."""
    return sorted((runtime_dir() / "kernels").glob("*.c"))


def isa_flags(isa: str) -> list[str]:
    """Compiler flags selecting the kernels' ISA path: native, avx2 or scalar."""
    if isa == "native":
        return ["-march=native"]
    if isa == "avx2":
        return ["-march=haswell"]
    if isa == "scalar":
        return ["-march=x86-64", "-DCKIR_FORCE_SCALAR"]
    raise ValueError(f"unknown ISA {isa!r}: expected one of {', '.join(ISAS)}")


def cache_dir() -> Path:
    """Root of the object cache: ``$CKIR_CACHE_DIR/runtime`` or ``~/.cache/ckir/runtime``."""
    env = os.environ.get("CKIR_CACHE_DIR")
    if env:
        return Path(env).expanduser() / "runtime"
    return Path.home() / ".cache" / "ckir" / "runtime"


def _cc() -> str:
    return os.environ.get("CC", "cc")


@functools.cache
def _compiler_identity(cc: str, flags: tuple[str, ...]) -> str:
    """Compiler version plus its predefined macros for these flags (captures -march=native)."""
    try:
        ver = subprocess.run([cc, "--version"], capture_output=True, text=True, check=True).stdout
        macros = subprocess.run(
            [cc, *flags, "-E", "-dM", "-x", "c", os.devnull],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError) as exc:
        raise RuntimeBuildError(f"cannot run the C compiler {cc!r}: {exc}") from None
    return ver + "\n" + "\n".join(sorted(macros.splitlines()))


_ERROR_LINE = re.compile(r"(?:^|[\s:])(?:fatal )?error:|undefined reference")


def _first_error(stderr: str) -> str:
    """The compiler's first error line (else its first line that is not mere context)."""
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip()]
    for ln in lines:
        if _ERROR_LINE.search(ln):
            return ln
    for ln in lines:
        if not ln.endswith(":"):
            return ln
    return lines[0] if lines else "(no compiler output)"


def _run_cc(cmd: list[str], what: Path | str) -> None:
    # a fixed working directory: debug info records it (DW_AT_comp_dir), and a build
    # must not depend on where the command was started
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=runtime_dir())
    if proc.returncode != 0:
        raise RuntimeBuildError(f"cc failed on {what}: {_first_error(proc.stderr + proc.stdout)}")


def _cflags(isa: str, debug: bool, include_dirs: Sequence[Path | str]) -> list[str]:
    flags = [*BASE_CFLAGS, *isa_flags(isa)]
    if debug:
        flags += DEBUG_CFLAGS
    flags += ["-I", str(runtime_dir() / "include")]
    for d in include_dirs:
        flags += ["-I", str(Path(d).resolve())]
    return flags


def support_sources() -> list[Path]:
    """Generic model support compiled into every model library (runtime/support/*.c)."""
    return sorted((runtime_dir() / "support").glob("*.c"))


def runtime_fingerprint(isa: str = "native", debug: bool = False) -> str:
    """SHA-256 of what a model library links from the runtime: compiler identity, flags,
    kernel and support sources, headers.  Keys the object cache and the compile cache."""
    cc = _cc()
    flags = _cflags(isa, debug, ())
    h = hashlib.sha256()
    h.update(_compiler_identity(cc, tuple(flags)).encode())
    h.update("\0".join(flags).encode())
    # headers and the X-macro prototype table they expand (*.def)
    headers = [
        p
        for folder in ("include", "kernels")
        for pattern in ("*.h", "*.def")
        for p in sorted((runtime_dir() / folder).glob(pattern))
    ]
    for path in [*kernel_sources(), *support_sources(), *headers]:
        h.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


def compile_runtime_objects(*, isa: str = "native", debug: bool = False) -> list[Path]:
    """Compile (or reuse from the cache) one object file per runtime kernel source.

    The kernels only see ``runtime/include``: a model's include directories do
    not reach them, so every model built with the same ISA and flags shares
    one cache entry."""
    cc = _cc()
    flags = _cflags(isa, debug, ())
    sources = kernel_sources()
    if not sources:
        raise RuntimeBuildError(f"no kernel sources in {runtime_dir() / 'kernels'}")
    out_dir = cache_dir() / runtime_fingerprint(isa, debug)[:24]
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise RuntimeBuildError(
            f"cannot create the runtime object cache {out_dir}: {err.strerror or err} "
            "(set CKIR_CACHE_DIR to a writable folder)"
        ) from None
    clean_leftovers(out_dir, ["*.o.tmp", ".*.sha256.*.tmp"])

    def build_one(src: Path) -> Path:
        obj = out_dir / (src.stem + ".o")
        digest = obj.with_suffix(".o.sha256")
        if _object_is_intact(obj, digest):
            return obj
        fd, tmp = tempfile.mkstemp(prefix=src.stem + ".", suffix=".o.tmp", dir=out_dir)
        os.close(fd)
        try:
            _run_cc([cc, *flags, "-c", str(src), "-o", tmp], src)
            write_text_atomically(digest, sha256_file(Path(tmp)) + "\n")
            os.replace(tmp, obj)
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        return obj

    workers = max(1, min(len(sources), os.cpu_count() or 1))
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(build_one, sources))


def build_library(
    out_path: Path,
    *,
    isa: str = "native",
    extra_sources: Sequence[Path] = (),
    debug: bool = False,
    include_dirs: Sequence[Path | str] = (),
) -> Path:
    """Build a shared library with every runtime kernel plus ``extra_sources``.

    Runtime objects come from the cache; extra sources (e.g. a generated
    ``model.c``) are compiled with the same flags plus ``include_dirs``.  The folder of
    ``out_path`` (a build's random staging folder) is mapped to ``.`` in the debug info
    and ``__FILE__`` (``-ffile-prefix-map``), so debug builds are byte-identical.
    Raises RuntimeBuildError when the compiler fails; ``out_path`` is only ever
    replaced by a complete library.  Returns the resolved output path.
    """
    out_path = Path(out_path).resolve()
    extras = [Path(s).resolve() for s in extra_sources]
    for src in extras:
        if not src.is_file():
            raise RuntimeBuildError(f"extra source not found: {src}")
    objects = compile_runtime_objects(isa=isa, debug=debug)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    flags = [*_cflags(isa, debug, include_dirs), f"-ffile-prefix-map={out_path.parent}=."]
    fd, tmp = tempfile.mkstemp(prefix=out_path.name + ".", suffix=".tmp", dir=out_path.parent)
    os.close(fd)
    clean_leftovers(Path(tempfile.gettempdir()), ["ckir-build-*"])
    try:
        with tempfile.TemporaryDirectory(prefix="ckir-build-") as work:
            extra_objs = []
            for i, src in enumerate(extras):
                obj = Path(work) / f"{i}_{src.stem}.o"
                _run_cc([_cc(), *flags, "-c", str(src), "-o", str(obj)], src)
                extra_objs.append(str(obj))
            link = [_cc(), *LINK_FLAGS, *extra_objs, *map(str, objects)]
            _run_cc([*link, "-o", tmp, *LINK_LIBS], out_path.name)
        os.replace(tmp, out_path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return out_path


def _object_is_intact(obj: Path, digest: Path) -> bool:
    """The cached object exists and its bytes hash to what was recorded when it was built."""
    try:
        return digest.read_text().strip() == sha256_file(obj)
    except OSError:
        return False


def clear_cache() -> None:
    """Delete every cached runtime object (all ISAs and flag sets)."""
    shutil.rmtree(cache_dir(), ignore_errors=True)


def build_standalone_library(
    out_path: Path,
    sources: Sequence[Path],
    *,
    isa: str = "native",
    include_dirs: Sequence[Path | str] = (),
    extra_flags: Sequence[str] = (),
) -> Path:
    """Compile ``sources`` alone (no runtime objects) into a shared library, with the
    runtime's flags and ISA selection (e.g. generated kernels, ``ckir kernel build``).

    The runtime's ``include`` and ``kernels`` folders are on the include path, so a
    source may use the private vector layer (``ckir_internal.h``).  Written under a
    temporary name and renamed; raises RuntimeBuildError naming the first error.
    """
    out_path = Path(out_path).resolve()
    out_path.parent.mkdir(parents=True, exist_ok=True)
    dirs = [runtime_dir() / "kernels", *include_dirs]
    flags = [*_cflags(isa, False, dirs), *extra_flags]
    fd, tmp = tempfile.mkstemp(prefix=out_path.name + ".", suffix=".tmp", dir=out_path.parent)
    os.close(fd)
    try:
        cmd = [_cc(), *flags, *LINK_FLAGS, *map(str, sources), "-o", tmp, *LINK_LIBS]
        _run_cc(cmd, ", ".join(Path(s).name for s in sources))
        os.replace(tmp, out_path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return out_path


def isa_vector_width(isa: str = "native") -> int:
    """f32 lanes of the runtime's vector layer (``CKV_W``) in a build for ``isa``:
    16 when the compiler targets AVX-512F, else 8 (AVX2 and the scalar layer)."""
    if isa == "scalar":
        return 8
    cc = _cc()
    macros = _compiler_identity(cc, tuple(isa_flags(isa)))
    return 16 if re.search(r"^#define __AVX512F__ 1$", macros, re.M) else 8


def compiler_version() -> str:
    """The first line of ``cc --version`` (``$CC``), e.g. ``gcc (Debian 12.2.0-14) 12.2.0``."""
    return _compiler_identity(_cc(), ()).splitlines()[0].strip()
