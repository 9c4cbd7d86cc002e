"""User-facing errors.

Every mistake a user can make (a bad template, a missing weight, malformed IR,
a shape that does not fit) raises :class:`CkirError` with one line that names
the file, the tensor or the op.  The CLI prints that line and exits with a
non-zero code; it never shows a Python traceback for a user mistake.
"""

from __future__ import annotations

import os
from pathlib import Path


class CkirError(Exception):
    """A user-facing error: ``str(err)`` is one line that says what is wrong and where."""

    exit_code: int = 1

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


def one_line(err: object) -> str:
    """``str(err)`` on one line (whitespace runs collapsed); the type name when empty.

    For quoting another library's exception inside a CkirError message.
    """
    return " ".join(str(err).split()) or type(err).__name__


def is_int(value: object) -> bool:
    """An int or NumPy integer, not a bool: for checking API arguments' kinds."""
    import numbers

    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def as_path(value: object, name: str) -> Path:
    """``Path(value)`` for a str or path-like ``value``, else a TypeError naming ``name``."""
    if isinstance(value, (str, os.PathLike)) and str(value):
        return Path(value)
    raise TypeError(f"{name} must be a non-empty path (str or Path), got {value!r}")
