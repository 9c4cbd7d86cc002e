"""Files: writing them so that a reader never sees a partial one, checking that a path is
a regular file, reading a JSON object with one-line errors."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any


def write_text_atomically(path: Path, text: str) -> None:
    """Write ``text`` to a temporary file beside ``path``, then rename it into place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def regular_file(path: Path, what: str) -> Path:
    """``path`` when it is a regular file (or a symlink to one), else a one-line CkirError
    prefixed by ``what`` (the option or kind of file: ``"--data"``).

    Checked before a file is opened: a FIFO nobody writes would block ``open()`` for
    ever, a device would never end, a folder gives a confusing OSError."""
    import stat

    from ckir.errors import CkirError

    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise CkirError(f"{what} {path}: no such file") from None
    except OSError as err:
        raise CkirError(f"{what} {path}: {err.strerror or err}") from None
    if stat.S_ISDIR(mode):
        raise CkirError(f"{what} {path}: is a folder, not a file")
    if not stat.S_ISREG(mode):
        raise CkirError(
            f"{what} {path}: not a regular file (a FIFO, socket or device); refusing to read it"
        )
    return path


def read_json_object(path: Path, shown: str | None = None) -> dict[str, Any]:
    """The JSON object in ``path``, or a one-line CkirError naming it as ``shown`` (the
    path itself by default) when it cannot be read, is not JSON or is not an object."""
    import json

    from ckir.errors import CkirError, one_line

    name = str(path) if shown is None else shown
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise CkirError(f"{name}: not valid JSON ({one_line(err)})") from None
    if not isinstance(data, dict):
        raise CkirError(f"{name}: expected a JSON object")
    return data
