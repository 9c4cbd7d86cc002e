"""Arithmetic over GGUF metadata values: the ``@expr:`` source of a template's
``gguf.config`` (docs/templates.md, "GGUF files").

Some config values a template reads are ratios of what a GGUF file stores:
llama.cpp's converters write the number of rotary dimensions per head
(``{arch}.rope.dimension_count``) where transformers' config has a fraction of
the head (``partial_rotary_factor``)::

    partial_rotary_factor: >-
      @expr:{arch}.rope.dimension_count * {arch}.attention.head_count
      / {arch}.embedding_length

An expression is numbers, metadata keys (dotted names; ``{arch}`` is replaced by
``general.architecture`` first), ``+ - * /`` and parentheses.  ``/`` is true
division (the result is a float).  The value is absent (the next source or the
template's default applies) when any key it names is absent from the file.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable

_KEY = re.compile(r"[A-Za-z_{][A-Za-z0-9_.{}]*")
_OPS: dict[type, Callable[[float, float], float]] = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.Div: lambda a, b: a / b,
}


class MetadataExprError(ValueError):
    """An ``@expr:`` source that is not an arithmetic expression over keys."""


def parse(text: str) -> tuple[ast.expr, tuple[str, ...]]:
    """The expression tree (keys renamed ``k0, k1, ...``) and the keys it names,
    in order; :class:`MetadataExprError` names what is wrong."""
    keys: list[str] = []

    def rename(m: re.Match[str]) -> str:
        keys.append(m.group(0))
        return f"k{len(keys) - 1}"

    body = _KEY.sub(rename, text)
    try:
        tree = ast.parse(body, mode="eval").body
    except SyntaxError as e:
        raise MetadataExprError(f"'{text}' is not an arithmetic expression ({e.msg})") from e
    for node in ast.walk(tree):
        ok = isinstance(node, ast.BinOp | ast.Name | ast.Load | ast.USub) or type(node) in _OPS
        ok = ok or (isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub))
        ok = ok or (isinstance(node, ast.Constant) and type(node.value) in (int, float))
        if not ok:
            raise MetadataExprError(
                f"'{text}': only numbers, metadata keys, + - * / and parentheses are allowed"
            )
    if not keys:
        raise MetadataExprError(f"'{text}' names no metadata key")
    return tree, tuple(keys)


def evaluate(tree: ast.expr, values: list[float]) -> float:
    """The value of a :func:`parse` tree with key ``k<i>`` bound to ``values[i]``;
    ZeroDivisionError propagates (the caller names the source)."""
    if isinstance(tree, ast.Constant):
        return float(tree.value)
    if isinstance(tree, ast.Name):
        return float(values[int(tree.id[1:])])
    if isinstance(tree, ast.UnaryOp):
        return -evaluate(tree.operand, values)
    assert isinstance(tree, ast.BinOp)
    return _OPS[type(tree.op)](evaluate(tree.left, values), evaluate(tree.right, values))
