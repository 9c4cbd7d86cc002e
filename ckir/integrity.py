"""Protecting builds and the cache: the build marker, content digests, leftover cleanup.

* Every build folder holds :data:`BUILD_MARKER`.  ``ckir compile -o DIR``
  replaces ``DIR`` only when it is a recognisable earlier build (the marker,
  or an older build's ``build.json`` among build files only) or an empty
  folder; anything else, and any folder that holds or is the source, is refused
  (:func:`check_output_dir`).
* ``build.json`` records the size and SHA-256 of every other file of the build
  (:func:`file_digests`); the compile cache serves a build only when they
  still match (:func:`verify_digests`).
* A killed compile leaves its temporary folder or ``*.tmp`` files behind;
  :func:`clean_leftovers` deletes ckir's own, recognisably named ones once
  they are older than :data:`LEFTOVER_GRACE_S` (so a concurrent compile's
  files are left alone).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from collections.abc import Iterable, Mapping
from pathlib import Path

from ckir.errors import CkirError, one_line

BUILD_MARKER = ".ckir-build"
MARKER_TEXT = "a ckir build folder: `ckir compile -o` may replace it\n"
#: leftovers younger than this may belong to a compile still running
LEFTOVER_GRACE_S = 3600.0
_CHUNK = 1 << 20


def sha256_file(path: Path) -> str:
    """SHA-256 of a file's bytes, read in 1 MiB chunks."""
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


def file_digests(folder: Path, names: Iterable[str]) -> dict[str, dict[str, object]]:
    """``{name: {"size": bytes, "sha256": hex}}`` of the named files of ``folder``."""
    out: dict[str, dict[str, object]] = {}
    for name in sorted(names):
        path = folder / name
        out[name] = {"size": path.stat().st_size, "sha256": sha256_file(path)}
    return out


def verify_digests(folder: Path, recorded: object) -> str | None:
    """None when every recorded file has its recorded size and hash, else what differs."""
    if not isinstance(recorded, Mapping) or not recorded:
        return "no file digests recorded"
    for name, entry in recorded.items():
        path = folder / str(name)
        if not isinstance(entry, Mapping):
            return f"{name}: bad digest entry"
        try:
            size = path.stat().st_size
        except OSError:
            return f"{name}: missing"
        if size != entry.get("size"):  # cheap test first: a truncated file stops here
            return f"{name}: {size} bytes, recorded {entry.get('size')}"
        if sha256_file(path) != entry.get("sha256"):
            return f"{name}: content differs from the recorded SHA-256"
    return None


def is_ckir_build(folder: Path, build_files: Iterable[str], marker: str = BUILD_MARKER) -> bool:
    """A folder ckir wrote: it holds the marker, or (a build older than the marker) only
    build files and temporary files, with a ``build.json`` that names a ckir version."""
    if (folder / marker).is_file():
        return True
    allowed = set(build_files) | {marker}
    try:
        names = {p.name for p in folder.iterdir()}
        info = json.loads((folder / "build.json").read_text())
    except (OSError, ValueError):
        return False
    return (
        isinstance(info, dict)
        and "ckir_version" in info
        and all(n in allowed or n.endswith(".tmp") for n in names)
    )


def _contains(outer: Path, inner: Path) -> bool:
    return inner == outer or outer in inner.parents


def check_output_dir(
    out_dir: Path,
    source: Path | None,
    build_files: Iterable[str],
    *,
    marker: str = BUILD_MARKER,
    flag: str = "-o",
    what: str = "build",
) -> Path:
    """The resolved ``out_dir`` if a build may be written there, else a one-line CkirError.

    Allowed: a path that does not exist yet, an empty folder, or an earlier ckir
    build.  Refused: a file, a folder with other contents, the filesystem root,
    and any path that is or holds the source checkpoint.

    The same policy serves other folders ckir writes whole (``save_pretrained``):
    ``marker`` is their marker file, ``flag`` the option (or function) named in
    messages and ``what`` the kind of folder.
    """
    if str(out_dir) == "":
        raise CkirError(f"{flag}: empty output path")
    target = Path(os.path.abspath(out_dir.expanduser()))
    shown = str(out_dir)
    if target.parent == target:
        raise CkirError(f"{flag} {shown}: refusing to write a {what} over the filesystem root")
    resolved = target.resolve()
    if source is not None and _contains(resolved, Path(os.path.abspath(source)).resolve()):
        raise CkirError(
            f"{flag} {shown}: the output is or holds the source {source}; choose another folder"
        )
    if target.is_symlink() or (target.exists() and not target.is_dir()):
        raise CkirError(
            f"{flag} {shown}: is a file or a symlink, not a folder; refusing to replace it"
        )
    if target.is_dir() and any(target.iterdir()) and not is_ckir_build(target, build_files, marker):
        raise CkirError(
            f"{flag} {shown}: the folder is not empty and is not an earlier ckir {what} "
            f"(no {marker}); refusing to replace it"
        )
    return target


def staging_dir(target: Path, where: str) -> Path:
    """A fresh temporary folder beside ``target`` (``.NAME.tmp-*``) to write a folder
    whole before renaming it into place; leftovers of interrupted runs are cleared.

    ``where`` prefixes the one-line error when the folder cannot be made
    (``"out: cannot write the build folder"``)."""
    import glob
    import tempfile

    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{target.name}.tmp-"))
    except OSError as err:
        reason = err.strerror or one_line(err)
        raise CkirError(f"{where}: {reason}") from None
    name = glob.escape(target.name)
    clean_leftovers(target.parent, [f".{name}.tmp-*", f".{name}.old"])
    return work


def clean_leftovers(
    folder: Path, patterns: Iterable[str], grace_s: float = LEFTOVER_GRACE_S
) -> list[Path]:
    """Delete entries of ``folder`` matching ``patterns`` that are older than ``grace_s``.

    For ckir's own temporary names only (``.NAME.tmp-*``, ``*.o.tmp``, ...).
    Errors are ignored: cleaning is best effort and must not fail a compile.
    Returns what was deleted.
    """
    removed: list[Path] = []
    if not folder.is_dir():
        return removed
    cutoff = time.time() - grace_s
    for pattern in patterns:
        for path in folder.glob(pattern):
            try:
                if path.lstat().st_mtime > cutoff:
                    continue
                if path.is_dir() and not path.is_symlink():
                    shutil.rmtree(path)
                else:
                    path.unlink()
                removed.append(path)
            except OSError:
                continue
    return removed
