"""Symbol names as the three dialects print them."""

from __future__ import annotations

import re

__all__ = ["sym"]

_BARE_SYM = re.compile(r"[A-Za-z_][A-Za-z0-9_$.]*")


def sym(name: str) -> str:
    """A symbol reference as printed: ``@x``, or quoted when not bare: ``@"layers.{i}.wq"``."""
    if _BARE_SYM.fullmatch(name):
        return "@" + name
    return '@"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'
