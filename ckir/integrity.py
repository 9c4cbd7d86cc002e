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
* The folder rule: ckir replaces a folder only when everything in it is ckir's.
  An output folder may not lie inside another folder ckir replaces whole (a
  build, a saved model: :func:`enclosing_ckir_folder`), and an earlier build or
  saved model that holds an entry ckir did not write there is refused, naming
  the entry (:func:`foreign_entries`).
* A finished folder replaces the earlier one atomically
  (:func:`replace_dir`: ``renameat2(RENAME_EXCHANGE)``); on a filesystem
  without it, through ``.NAME.old``, which the next command that names the
  folder puts back if a kill left the name empty (:func:`restore_interrupted`).
"""

from __future__ import annotations

import ctypes
import errno
import functools
import hashlib
import json
import os
import shutil
import sys
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from ckir.errors import CkirError, one_line

BUILD_MARKER = ".ckir-build"
MARKER_TEXT = "a ckir build folder: `ckir compile -o` may replace it\n"
#: the marker file of a folder written by ``save_pretrained`` (such a folder may be replaced)
PRETRAINED_MARKER = ".ckir-pretrained"
#: marker file -> the kind of folder it marks (in messages); ckir replaces these folders whole
OWNED_MARKERS = {BUILD_MARKER: "build", PRETRAINED_MARKER: "saved model"}
#: the file of a build that lists (``files``) every other file ckir wrote into it
BUILD_INFO = "build.json"
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


def _read_build_info(folder: Path) -> dict[str, object] | None:
    try:
        info = json.loads((folder / BUILD_INFO).read_text())
    except (OSError, ValueError):
        return None
    return info if isinstance(info, dict) else None


def is_ckir_build(folder: Path, build_files: Iterable[str], marker: str = BUILD_MARKER) -> bool:
    """A folder ckir wrote: it holds the marker, or (a build older than the marker) only
    build files and temporary files, with a ``build.json`` that names a ckir version."""
    if (folder / marker).is_file():
        return True
    info = _read_build_info(folder)
    return (
        info is not None
        and "ckir_version" in info
        and not foreign_entries(folder, build_files, marker)
    )


def foreign_entries(folder: Path, build_files: Iterable[str], marker: str) -> list[str]:
    """The entries of ``folder`` (a build or a saved model) that ckir did not write there.

    Owned are ``build_files`` (the names ckir writes into such a folder), the marker,
    a build's ``build.json`` and every file it lists under ``files``, and ckir's
    temporary ``*.tmp`` files, as files or symlinks (a profiling copy links to its
    build's files).  A folder is never owned: ckir writes none inside these."""
    owned = set(build_files) | {marker}
    info = _read_build_info(folder)
    if info is not None:
        owned.add(BUILD_INFO)
        files = info.get("files")
        if isinstance(files, dict):
            owned.update(str(name) for name in files)
    out: list[str] = []
    for entry in os.scandir(folder):
        is_dir = entry.is_dir(follow_symlinks=False)
        if is_dir or not (entry.name in owned or entry.name.endswith(".tmp")):
            out.append(entry.name)
    return sorted(out)


def enclosing_ckir_folder(path: Path) -> tuple[Path, str] | None:
    """``(folder, kind)`` of the nearest folder above ``path`` that ckir replaces whole
    (it holds a marker of :data:`OWNED_MARKERS`), or None."""
    for parent in path.parents:
        for marker, kind in OWNED_MARKERS.items():
            if (parent / marker).is_file():
                return parent, kind
    return None


def contains(outer: Path, inner: Path) -> bool:
    """Whether ``inner`` is ``outer`` or lies inside it (both resolved by the caller)."""
    return inner == outer or outer in inner.parents


def check_not_nested(out: Path, out_flag: str, other: Path, other_flag: str) -> None:
    """One-line CkirError when ``out`` and ``other`` (two folders one command writes
    whole, e.g. ``--out`` and ``--build-dir``) are the same or one lies inside the other:
    the later replacement of the outer one would delete the inner one."""
    a = Path(os.path.abspath(out.expanduser())).resolve()
    b = Path(os.path.abspath(other.expanduser())).resolve()
    if contains(b, a):
        raise CkirError(
            f"{out_flag} {out}: inside {other_flag} {other}, which ckir replaces whole; "
            "choose a folder outside it"
        )
    if contains(a, b):
        raise CkirError(
            f"{other_flag} {other}: inside {out_flag} {out}, which ckir replaces whole; "
            "choose a folder outside it"
        )


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
    build that holds only what ckir wrote there.  Refused: a file, a folder with
    other contents, an earlier build holding an entry ckir did not write (named in
    the message), a path inside another build or saved model, the filesystem root,
    and any path that is or holds the source checkpoint.  An earlier folder that a
    killed replacement left at ``.NAME.old`` is put back first (:func:`restore_interrupted`).

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
    restore_interrupted(target)
    resolved = target.resolve()
    if source is not None and contains(resolved, Path(os.path.abspath(source)).resolve()):
        raise CkirError(
            f"{flag} {shown}: the output is or holds the source {source}; choose another folder"
        )
    if target.is_symlink() or (target.exists() and not target.is_dir()):
        raise CkirError(
            f"{flag} {shown}: is a file or a symlink, not a folder; refusing to replace it"
        )
    enclosing = enclosing_ckir_folder(resolved)
    if enclosing is not None:
        folder, kind = enclosing
        raise CkirError(
            f"{flag} {shown}: inside the ckir {kind} folder {folder}, which ckir replaces "
            "whole; choose a folder outside it"
        )
    if target.is_dir() and any(target.iterdir()):
        if not is_ckir_build(target, build_files, marker):
            raise CkirError(
                f"{flag} {shown}: the folder is not empty and is not an earlier ckir {what} "
                f"(no {marker}); refusing to replace it"
            )
        foreign = foreign_entries(target, build_files, marker)
        if foreign:
            more = f" (and {len(foreign) - 1} more)" if len(foreign) > 1 else ""
            raise CkirError(
                f"{flag} {shown}: the earlier ckir {what} holds {foreign[0]!r}{more}, which "
                "ckir did not write there; move it out or choose another folder (refusing "
                "to replace it)"
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
    restore_interrupted(target)
    if target.is_dir():  # never clean away the only copy of the old folder
        # the name holds a folder: an .old beside it is what a kill after the second
        # rename left (garbage, whatever its age)
        shutil.rmtree(_old_name(target), ignore_errors=True)
    clean_leftovers(target.parent, [f".{name}.tmp-*"])
    return work


# ---------------------------------------------------------------------------
# replacing a folder
# ---------------------------------------------------------------------------

_AT_FDCWD = -100
_RENAME_EXCHANGE = 2


@functools.cache
def _renameat2() -> Callable[[int, bytes, int, bytes, int], int] | None:
    try:
        fn = ctypes.CDLL(None, use_errno=True).renameat2
    except (AttributeError, OSError):  # a libc without it (glibc < 2.28, musl)
        return None
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    fn.restype = ctypes.c_int
    return fn


def exchange_paths(a: Path, b: Path) -> bool:
    """Swap two existing paths in one atomic step (``renameat2(RENAME_EXCHANGE)``).

    False where the libc, the kernel or the filesystem cannot (or
    ``CKIR_TEST_NO_EXCHANGE`` is set, to test the fallback); OSError otherwise."""
    fn = _renameat2()
    if fn is None or os.environ.get("CKIR_TEST_NO_EXCHANGE"):
        return False
    if fn(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.EXDEV):
        return False
    raise OSError(err, os.strerror(err), str(b))


def pause_point(name: str) -> None:
    """Fault injection for the kill tests: when ``CKIR_TEST_PAUSE`` is ``name``, say so on
    stderr and sleep, so that a test can kill the process exactly here."""
    if os.environ.get("CKIR_TEST_PAUSE") == name:
        print(f"ckir-test: paused at {name}", file=sys.stderr, flush=True)
        time.sleep(3600)


def _old_name(target: Path) -> Path:
    return target.with_name(f".{target.name}.old")


def replace_dir(src: Path, dst: Path) -> None:
    """Move the finished folder ``src`` to ``dst``, replacing an earlier one.

    The swap is atomic where the filesystem has ``RENAME_EXCHANGE``: a kill at any
    point leaves the old or the new folder at ``dst``.  Elsewhere the old folder is
    first renamed to ``.NAME.old``; a kill before the new one is in place leaves the
    name empty, and :func:`restore_interrupted` (run by the next command that names
    the folder) puts the old one back."""
    pause_point("replace")
    if not dst.exists() and not dst.is_symlink():
        src.rename(dst)
        return
    if exchange_paths(src, dst):
        pause_point("exchanged")
        shutil.rmtree(src, ignore_errors=True)  # now holds the earlier folder
        return
    old = _old_name(dst)
    shutil.rmtree(old, ignore_errors=True)  # dst exists: an .old beside it is stale
    dst.rename(old)
    pause_point("old-moved")
    src.rename(dst)
    pause_point("new-moved")
    shutil.rmtree(old, ignore_errors=True)


def restore_interrupted(target: Path) -> bool:
    """Put back the folder a killed :func:`replace_dir` left at ``.NAME.old`` when
    nothing is at ``target``; says so on stderr.  True when it restored one."""
    target = Path(os.path.abspath(target))
    old = _old_name(target)
    if target.exists() or target.is_symlink() or not old.is_dir() or old.is_symlink():
        return False
    try:
        old.rename(target)
    except OSError:
        return False
    print(
        f"warning: {target}: restored the earlier folder from {old.name} (a replacement "
        "of it was interrupted)",
        file=sys.stderr,
        flush=True,
    )
    return True


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
