"""What the three dialects share: symbol names as printed, shape/dtype accessors."""

from __future__ import annotations

import re
from typing import Any

from xdsl.dialects.builtin import DictionaryAttr, IntegerAttr
from xdsl.ir import Block

__all__ = ["Placed", "Shaped", "SingleBody", "Sized", "ViewOf", "int_entries", "sym"]

_BARE_SYM = re.compile(r"[A-Za-z_][A-Za-z0-9_$.]*")


def sym(name: str) -> str:
    """A symbol reference as printed: ``@x``, or quoted when not bare: ``@"layers.{i}.wq"``."""
    if _BARE_SYM.fullmatch(name):
        return "@" + name
    return '@"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'


def int_entries(attr: DictionaryAttr) -> dict[str, int]:
    """The integer entries of a dictionary attribute by name (symbols, totals)."""
    return {k: v.value.data for k, v in attr.data.items() if isinstance(v, IntegerAttr)}


class SingleBody:
    """Accessor of the one block of an op's ``body`` region (models, programs, plans,
    arenas: the classes that mix it in define ``body``)."""

    @property
    def body_block(self) -> Block:
        return self.body.block  # type: ignore[attr-defined]


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


class Placed:
    """Accessor of an op's ``offset`` (in its arena, or in its root for a view)."""

    @property
    def offset_bytes(self) -> int:
        """Byte offset."""
        return self.offset.value.data  # type: ignore[attr-defined]


class Sized(Placed):
    """Accessors of an op's ``offset`` and ``size`` (a layout slot or view)."""

    @property
    def size_bytes(self) -> int:
        """Byte size."""
        return self.size.value.data  # type: ignore[attr-defined]


class ViewOf:
    """Accessors of a view op: its ``sym_name``, its ``root`` symbol and ``offset``."""

    @property
    def view_name(self) -> str:
        return self.sym_name.data  # type: ignore[attr-defined]

    @property
    def root_name(self) -> str:
        return self.root.root_reference.data  # type: ignore[attr-defined]
