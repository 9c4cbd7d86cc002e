"""What the three dialects share: symbol names as printed, shape/dtype accessors."""

from __future__ import annotations

import re
from typing import Any

__all__ = ["Shaped", "sym"]

_BARE_SYM = re.compile(r"[A-Za-z_][A-Za-z0-9_$.]*")


def sym(name: str) -> str:
    """A symbol reference as printed: ``@x``, or quoted when not bare: ``@"layers.{i}.wq"``."""
    if _BARE_SYM.fullmatch(name):
        return "@" + name
    return '@"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'


class Shaped:
    """Accessors of a ``shape`` array attribute and a ``dtype`` string attribute.

    A mixin of the dialects' tensor/buffer types and weight/argument ops (no IRDL
    fields of its own: the classes that mix it in define ``shape`` and ``dtype``)."""

    @property
    def shape_values(self) -> tuple[Any, ...]:
        """The shape's entries: dim expressions (graph) or integers (lowered)."""
        return tuple(d.data for d in self.shape.data)  # type: ignore[attr-defined]

    @property
    def dtype_name(self) -> str:
        """The dtype identifier, e.g. ``"f32"``."""
        return self.dtype.data  # type: ignore[attr-defined]
