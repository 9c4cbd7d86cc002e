"""Writing files so that a reader never sees a partial one."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


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
