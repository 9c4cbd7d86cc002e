"""The compile cache: builds kept under ``$CKIR_CACHE_DIR/builds/<key>``.

The key of a build is a SHA-256 over

* the canonical lowered + layout IR (what ``ckir-opt`` prints after
  lowering and planning: it determines model.c and the weights layout),
* the compiler version and the generated-model ABI version,
* the runtime fingerprint: compiler identity, C flags (ISA), kernel and
  support sources, headers (``ckir.runtime_build.runtime_fingerprint``),
* the target ISA,
* the weights' content: SHA-256 of every input file's bytes (the IR names
  tensors, not their values).

Computing that key needs an import and a lowering (about a second for a
large model), so a small index maps a cheap fingerprint of the request
(input files' stats: size, mtime, ctime, inode; + options) to the key.  An
edit in place that restores the mtime still changes the ctime, so it misses
the index, and the content hash then gives a new key.  A build found through
the index is used only if its ``build.json`` holds the same key, the runtime
fingerprint, ABI and version recomputed now still match, and every file still
has the size and SHA-256 recorded when it was built (a flipped bit or a
truncated library is rebuilt, never served); otherwise the model is
recompiled.  Builds are written to a temporary folder and renamed, so an
interrupted compile never leaves a half build in the cache; what a killed
compile leaves behind is deleted by a later run (``clean_cache_leftovers``).

Tokenizers are cached too (``tokenizers/<source identity>.json``, see
``cached_tokenizer``): reading a GGUF vocabulary through the ``gguf`` package
takes seconds (SmolLM2: ~4 s for 49k tokens and merges), the cached JSON
loads in milliseconds.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import ckir
from ckir.backend.abi import MODEL_ABI_VERSION
from ckir.compiler import (
    BUILD_INFO,
    HF_EXTRA_FILES,
    CompileOptions,
    Progress,
    build,
    prepare,
    required_files,
)
from ckir.errors import CkirError
from ckir.fileio import write_text_atomically
from ckir.integrity import clean_leftovers, restore_interrupted, sha256_file, verify_digests
from ckir.runtime_build import runtime_fingerprint
from ckir.tokenizer import Tokenizer


def cache_root() -> Path:
    env = os.environ.get("CKIR_CACHE_DIR")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "ckir"


def input_files(source: Path) -> list[Path]:
    """The files a build reads: a GGUF file, or a HF folder's config, weights and the
    tokenizer files a build keeps a copy of (``HF_EXTRA_FILES``)."""
    if source.is_file():
        return [source]
    return sorted(
        p
        for p in source.iterdir()
        if p.is_file()
        and (
            p.suffix in (".json", ".safetensors")
            or p.name.endswith(".yaml")
            or p.name in HF_EXTRA_FILES
        )
    )


def source_fingerprint(source: Path) -> str:
    """A cheap fingerprint of the input files' stats (size, mtime, ctime, inode).

    Writing a file or restoring its mtime (``touch -d``, ``os.utime``) sets its
    ctime to now, so an edit in place changes this fingerprint too."""
    h = hashlib.sha256()
    for path in input_files(source):
        st = path.stat()
        stats = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino)
        h.update(f"{path.name}\0{stats}\n".encode())
    return h.hexdigest()


def source_content_hash(source: Path) -> str:
    """SHA-256 over the names and bytes of the input files (what the build key uses)."""
    h = hashlib.sha256()
    for path in input_files(source):
        h.update(f"{path.name}\0{sha256_file(path)}\n".encode())
    return h.hexdigest()


def _options_text(options: CompileOptions) -> str:
    # panels resolved: a new PANELS_DEFAULT must not find the builds of the old one
    fields = {**dataclasses.asdict(options), "panels": options.uses_panels}
    return json.dumps(fields, sort_keys=True)


def source_identity(source: Path) -> str:
    """A cheap key for "this input, as it is now": its path, its files' stats, ckir's version."""
    h = hashlib.sha256()
    h.update(str(source.resolve()).encode() + b"\0")
    h.update(source_fingerprint(source).encode() + b"\0")
    h.update(ckir.__version__.encode())
    return h.hexdigest()


def request_fingerprint(source: Path, options: CompileOptions) -> str:
    h = hashlib.sha256()
    h.update(source_identity(source).encode() + b"\0")
    h.update(_options_text(options).encode())
    return h.hexdigest()


def build_key(ir_text: str, source: Path, options: CompileOptions) -> dict[str, str]:
    """The components of a build's key and the key itself (``key``)."""
    parts = {
        "ir": hashlib.sha256(ir_text.encode()).hexdigest(),
        "ckir_version": ckir.__version__,
        "model_abi": str(MODEL_ABI_VERSION),
        "runtime": runtime_fingerprint(options.isa, options.debug),
        "isa": options.isa,
        "debug": str(options.debug),
        "weights_source": source_content_hash(source),
    }
    blob = "\n".join(f"{k}={v}" for k, v in sorted(parts.items()))
    parts["key"] = hashlib.sha256(blob.encode()).hexdigest()
    return parts


def build_is_valid(build_dir: Path, expected: dict[str, str] | None = None) -> bool:
    """Complete, its recorded key parts still match the current compiler and runtime, and
    every file still has the size and SHA-256 recorded at build time."""
    if not all((build_dir / f).exists() for f in required_files()):
        return False
    try:
        info = json.loads((build_dir / BUILD_INFO).read_text())
    except (OSError, ValueError):
        return False
    recorded = info.get("cache_key")
    if not isinstance(recorded, dict) or build_dir.name != recorded.get("key"):
        return False
    if expected is not None and recorded != expected:
        return False
    return (
        recorded.get("ckir_version") == ckir.__version__
        and recorded.get("model_abi") == str(MODEL_ABI_VERSION)
        and recorded.get("runtime")
        == runtime_fingerprint(str(recorded.get("isa")), recorded.get("debug") == "True")
        and verify_digests(build_dir, info.get("files")) is None
    )


def clean_cache_leftovers(root: Path) -> None:
    """Delete what killed runs left in the cache (temporary folders and files)."""
    clean_leftovers(root / "builds", [".*.tmp-*", ".*.old"])
    for sub in ("index", "tokenizers"):
        clean_leftovers(root / sub, [".*.tmp"])


def cached_build(
    source: str | Path,
    options: CompileOptions | None = None,
    *,
    quiet: bool = True,
    on_warning: Callable[[str], None] | None = None,
    root: Path | None = None,
) -> tuple[Path, bool]:
    """The build folder for ``source`` compiled with ``options``; ``(path, was_cached)``."""
    options = options or CompileOptions()
    source = Path(source)
    restore_interrupted(source)
    if not source.exists():
        raise CkirError(f"{source}: no such file or folder")
    root = root or cache_root()
    try:
        return _cached_build(source, options, quiet, on_warning, root)
    except OSError as err:
        where = err.filename or root
        raise CkirError(
            f"compile cache {root}: cannot use {where}: {err.strerror or err} "
            "(set CKIR_CACHE_DIR to a writable folder)"
        ) from None


def _cached_build(
    source: Path,
    options: CompileOptions,
    quiet: bool,
    on_warning: Callable[[str], None] | None,
    root: Path,
) -> tuple[Path, bool]:
    clean_cache_leftovers(root)
    index = root / "index" / request_fingerprint(source, options)
    if index.exists():
        key = index.read_text().strip()
        build_dir = root / "builds" / key
        if build_is_valid(build_dir):
            return build_dir, True
    progress = Progress(quiet=quiet)
    prepared = prepare(source, options, progress, on_warning)
    parts = build_key(prepared.layout_text, source, options)
    build_dir = root / "builds" / parts["key"]
    if not build_is_valid(build_dir, parts):
        if build_dir.exists():  # damaged or stale: the cache's own folder, rebuilt from scratch
            shutil.rmtree(build_dir)
        build(prepared, build_dir, progress, extra_info={"cache_key": parts})
    write_text_atomically(index, parts["key"] + "\n")
    return build_dir, False


def cached_tokenizer(source: str | Path, *, root: Path | None = None) -> Tokenizer:
    """``Tokenizer.from_path(source)``; a GGUF file's is kept under the cache folder.

    Keyed by ``source_identity`` (path, size, mtime, ctime, inode, ckir
    version); an entry that does not load is rebuilt from the file.  A HF
    folder's ``tokenizer.json`` loads fast and is read every time (its chat
    template may also live in files the source fingerprint does not cover).
    """
    source = Path(source)
    if not source.is_file():
        return Tokenizer.from_path(source)
    root = root or cache_root()
    entry = root / "tokenizers" / f"{source_identity(source)}.json"
    if entry.is_file():
        try:
            return Tokenizer.from_json(entry.read_text(), str(entry))
        except (OSError, CkirError):
            pass  # rebuilt below
    tokenizer = Tokenizer.from_path(source)
    with contextlib.suppress(OSError):  # an unwritable cache only costs the next run time
        write_text_atomically(entry, tokenizer.to_json())
    return tokenizer
