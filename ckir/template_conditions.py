"""The template's expression languages: dims (``ckir.dialects.dims``) and conditions.

* :func:`parse_dim` — a template dim (``64``, ``"H*D"``, ``"(E+1)/2"``) -> a
  :class:`~ckir.dialects.dims.Dim`;
* :func:`parse_condition` — an ``if`` / ``assert`` condition (``tied``,
  ``not tied``, ``act == silu``, ``a and (b or c)``, ``W >= C``) over the
  template's symbols and params -> a :class:`Condition` to evaluate against a
  bound config.

Both raise :class:`TemplateError` (a local problem without a location); the
loader adds the file and key (docs/templates.md).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ckir.dialects.dims import Dim, DimError


class TemplateError(ValueError):
    """A local problem (bad expression, bad value); the caller adds the location."""


# ---------------------------------------------------------------------------
# Dim expressions: the language of ckir.dialects.dims
# ---------------------------------------------------------------------------


def parse_dim(value: object) -> Dim:
    """Parse ``64``, ``"E"``, ``"H*D"``, ``"3*E"``, ``"(E+1)/2"`` into a :class:`Dim`."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise TemplateError(f"dim must be an integer or an expression string, got {value!r}")
    try:
        return Dim.parse(value)
    except DimError as e:
        raise TemplateError(str(e)) from None


# ---------------------------------------------------------------------------
# Conditions: `tied`, `not tied`, `act == silu`, `a and (b or c)`, `W >= C`
# ---------------------------------------------------------------------------

_COND_TOKEN = re.compile(
    r"\s*(?:(==|!=|<=|>=|<|>|\(|\))|'([^']*)'|\"([^\"]*)\"|"
    r"(-?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)(?![A-Za-z_])|([A-Za-z_][A-Za-z0-9_.\-]*))"
)
_KEYWORDS = {"not", "and", "or", "true", "false"}


@dataclass(frozen=True)
class Condition:
    """A parsed ``if``/``assert`` condition over params and symbols."""

    text: str
    node: tuple

    def names(self) -> set[str]:
        out: set[str] = set()

        def walk(n: tuple) -> None:
            if n[0] == "name":
                out.add(n[1])
            elif n[0] in ("and", "or"):
                for c in n[1]:
                    walk(c)
            elif n[0] == "not":
                walk(n[1])
            elif n[0] == "cmp":
                walk(n[2])
                walk(n[3])

        walk(self.node)
        return out

    def evaluate(self, env: Mapping[str, Any]) -> bool:
        def operand(n: tuple) -> Any:
            return env[n[1]] if n[0] == "name" else n[1]

        def ev(n: tuple) -> bool:
            kind = n[0]
            if kind == "or":
                return any(ev(c) for c in n[1])
            if kind == "and":
                return all(ev(c) for c in n[1])
            if kind == "not":
                return not ev(n[1])
            if kind == "name":
                return bool(env[n[1]])
            if kind == "lit":
                return bool(n[1])
            op, a, b = n[1], operand(n[2]), operand(n[3])
            if op == "==":
                return a == b
            if op == "!=":
                return a != b
            if op == "<":
                return a < b
            if op == "<=":
                return a <= b
            if op == ">":
                return a > b
            return a >= b

        return ev(self.node)


def parse_condition(value: object, names: Mapping[str, str]) -> Condition:
    """Parse a condition; ``names`` maps each known name to its type (int/float/bool/str).

    A bare word on the right of a comparison that is not a known name is a
    string literal (``act == silu``); anywhere else a bare word must be a name.
    """
    if isinstance(value, bool):
        return Condition(str(value).lower(), ("lit", value))
    if not isinstance(value, str) or not value.strip():
        raise TemplateError(f"condition must be a non-empty string, got {value!r}")
    text = value
    tokens: list[tuple[str, Any]] = []
    pos = 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = _COND_TOKEN.match(text, pos)
        if not m:
            raise TemplateError(f"bad condition '{text}': unexpected '{text[pos:].strip()[0]}'")
        if m.group(1):
            tokens.append(("op", m.group(1)))
        elif m.group(2) is not None or m.group(3) is not None:
            tokens.append(("str", m.group(2) if m.group(2) is not None else m.group(3)))
        elif m.group(4):
            num = m.group(4)
            tokens.append(("num", float(num) if any(c in num for c in ".eE") else int(num)))
        else:
            word = m.group(5)
            tokens.append(("kw", word) if word in _KEYWORDS else ("word", word))
        pos = m.end()
    i = 0

    def peek() -> tuple[str, Any] | None:
        return tokens[i] if i < len(tokens) else None

    def fail(msg: str) -> TemplateError:
        return TemplateError(f"bad condition '{text}': {msg}")

    def chain(kw: str, operand: Callable[[], tuple]) -> tuple:
        """``operand (kw operand)*``: the lone operand, or ``(kw, operands)``."""
        nonlocal i
        parts = [operand()]
        while peek() == ("kw", kw):
            i += 1
            parts.append(operand())
        return parts[0] if len(parts) == 1 else (kw, tuple(parts))

    def or_expr() -> tuple:
        return chain("or", and_expr)

    def and_expr() -> tuple:
        return chain("and", not_expr)

    def not_expr() -> tuple:
        nonlocal i
        if peek() == ("kw", "not"):
            i += 1
            return ("not", not_expr())
        return atom()

    def name_node(word: str) -> tuple:
        if word not in names:
            raise fail(f"unknown name '{word}' (known: {', '.join(sorted(names)) or 'none'})")
        return ("name", word)

    def atom() -> tuple:
        nonlocal i
        tok = peek()
        if tok is None:
            raise fail("unexpected end")
        if tok == ("op", "("):
            i += 1
            node = or_expr()
            if peek() != ("op", ")"):
                raise fail("expected ')'")
            i += 1
            return node
        if tok[0] == "kw" and tok[1] in ("true", "false"):
            i += 1
            return ("lit", tok[1] == "true")
        if tok[0] != "word":
            raise fail(f"expected a name, got '{tok[1]}'")
        i += 1
        lhs = name_node(tok[1])
        nxt = peek()
        if nxt is None or nxt[0] != "op" or nxt[1] in "()":
            if names[tok[1]] != "bool":
                raise fail(f"'{tok[1]}' is a {names[tok[1]]}, compare it with == or !=")
            return lhs
        i += 1
        op = nxt[1]
        rtok = peek()
        if rtok is None or rtok[0] == "op":
            raise fail(f"expected a value after '{op}'")
        i += 1
        lt = names[tok[1]]
        if rtok[0] == "word" and rtok[1] in names:
            rhs: tuple = ("name", rtok[1])
            rt = names[rtok[1]]
        elif rtok[0] == "kw" and rtok[1] in ("true", "false"):
            rhs, rt = ("lit", rtok[1] == "true"), "bool"
        elif rtok[0] == "num":
            rhs, rt = ("lit", rtok[1]), "float" if isinstance(rtok[1], float) else "int"
        elif rtok[0] in ("word", "str"):
            rhs, rt = ("lit", rtok[1]), "str"
        else:
            raise fail(f"unexpected '{rtok[1]}'")
        numeric = {"int", "float"}
        if not (lt == rt or (lt in numeric and rt in numeric)):
            raise fail(f"cannot compare {lt} '{tok[1]}' with {rt} '{rtok[1]}'")
        if op in ("<", "<=", ">", ">=") and lt not in numeric:
            raise fail(f"'{op}' needs numbers, '{tok[1]}' is a {lt}")
        return ("cmp", op, lhs, rhs)

    node = or_expr()
    if i != len(tokens):
        raise fail(f"unexpected '{tokens[i][1]}'")
    return Condition(text, node)
