"""Dim expressions: the symbolic sizes of graph tensors and weights.

A dim expression is an integer or an arithmetic expression over symbol names::

    dim    ::= sum
    sum    ::= prod (("+" | "-") prod)*
    prod   ::= atom (("*" | "/") atom)*
    atom   ::= integer | identifier | "(" sum ")"

Examples: ``64``, ``E``, ``H*D``, ``3*E``, ``E/H``, ``(E+1)*2``.  ``/`` is exact
integer division: ``evaluate_dim("E/H", {"E": 64, "H": 5})`` is an error.  The
canonical text of an expression is its tokens without spaces (``H * D`` -> ``H*D``);
the graph dialect stores and prints dims in that form, so text round-trips exactly.

Everything here is cached by expression text: a model with thousands of ops has a
handful of distinct dims.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache

__all__ = [
    "DimError",
    "dim_symbols",
    "evaluate_dim",
    "is_identifier",
    "normalize_dim",
    "parse_dim",
    "try_evaluate_dim",
]

_TOKEN = re.compile(r"\s*(?:(\d+)|([A-Za-z_][A-Za-z0-9_]*)|([-+*/()]))")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

# AST: int | str (symbol) | tuple[op, lhs, rhs]
DimAst = int | str | tuple[str, "DimAst", "DimAst"]


class DimError(ValueError):
    """A malformed dim expression; the message says what is wrong and where."""


def is_identifier(name: str) -> bool:
    """True when ``name`` can be a dim symbol (``[A-Za-z_][A-Za-z0-9_]*``)."""
    return _IDENT.fullmatch(name) is not None


def _tokenize(text: str) -> list[str]:
    tokens: list[str] = []
    pos = 0
    n = len(text)
    while pos < n:
        if text[pos:].isspace():
            break
        m = _TOKEN.match(text, pos)
        if m is None:
            bad = text[pos:].lstrip()[:1]
            raise DimError(f"bad dim expression '{text}': unexpected character '{bad}'")
        tokens.append(m.group(1) or m.group(2) or m.group(3))
        pos = m.end()
    return tokens


class _Parser:
    def __init__(self, text: str, tokens: list[str]):
        self.text = text
        self.tokens = tokens
        self.i = 0

    def error(self, msg: str) -> DimError:
        return DimError(f"bad dim expression '{self.text}': {msg}")

    def peek(self) -> str | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def sum(self) -> DimAst:
        lhs = self.prod()
        while self.peek() in ("+", "-"):
            op = self.tokens[self.i]
            self.i += 1
            lhs = (op, lhs, self.prod())
        return lhs

    def prod(self) -> DimAst:
        lhs = self.atom()
        while self.peek() in ("*", "/"):
            op = self.tokens[self.i]
            self.i += 1
            lhs = (op, lhs, self.atom())
        return lhs

    def atom(self) -> DimAst:
        tok = self.peek()
        if tok is None:
            raise self.error("unexpected end of expression")
        self.i += 1
        if tok.isdigit():
            return int(tok)
        if tok == "(":
            inner = self.sum()
            if self.peek() != ")":
                raise self.error("expected ')'")
            self.i += 1
            return inner
        if tok in "+-*/)":
            raise self.error(f"unexpected '{tok}'")
        return tok


@lru_cache(maxsize=4096)
def _parse(text: str) -> tuple[DimAst, str]:
    tokens = _tokenize(text)
    if not tokens:
        raise DimError("bad dim expression '': empty")
    p = _Parser(text, tokens)
    ast = p.sum()
    if p.i != len(tokens):
        raise p.error(f"unexpected '{tokens[p.i]}'")
    canonical = "".join(str(int(t)) if t.isdigit() else t for t in tokens)
    return ast, canonical


def parse_dim(text: str | int) -> DimAst:
    """The AST of a dim expression (int, symbol name, or ``(op, lhs, rhs)``)."""
    if isinstance(text, int):
        return text
    return _parse(text)[0]


def normalize_dim(text: str | int) -> str:
    """The canonical text of a dim expression (tokens without spaces).

    Raises :class:`DimError` when the expression is malformed.
    """
    if isinstance(text, bool):
        raise DimError(f"bad dim expression {text!r}: not an integer or expression")
    if isinstance(text, int):
        if text < 0:
            raise DimError(f"bad dim expression '{text}': negative size")
        return str(text)
    return _parse(text)[1]


def _symbols(ast: DimAst, out: set[str]) -> None:
    if isinstance(ast, str):
        out.add(ast)
    elif isinstance(ast, tuple):
        _symbols(ast[1], out)
        _symbols(ast[2], out)


@lru_cache(maxsize=4096)
def dim_symbols(text: str) -> frozenset[str]:
    """The symbol names a dim expression uses."""
    out: set[str] = set()
    _symbols(parse_dim(text), out)
    return frozenset(out)


def _eval(ast: DimAst, symbols: Mapping[str, int], text: str) -> int:
    if isinstance(ast, int):
        return ast
    if isinstance(ast, str):
        return symbols[ast]  # KeyError for an unbound symbol
    op, lhs_ast, rhs_ast = ast
    lhs = _eval(lhs_ast, symbols, text)
    rhs = _eval(rhs_ast, symbols, text)
    if op == "+":
        return lhs + rhs
    if op == "-":
        return lhs - rhs
    if op == "*":
        return lhs * rhs
    if rhs == 0:
        raise ZeroDivisionError(f"dim '{text}': division by zero")
    if lhs % rhs:
        raise ValueError(f"dim '{text}': {lhs}/{rhs} is not an integer")
    return lhs // rhs


def evaluate_dim(text: str | int, symbols: Mapping[str, int]) -> int:
    """The integer value of a dim expression.

    Raises ``KeyError`` for an unbound symbol, :class:`DimError` (a ``ValueError``)
    for a malformed expression, ``ValueError`` for an inexact division and
    ``ZeroDivisionError`` for a division by zero.
    """
    if isinstance(text, int):
        return text
    ast = parse_dim(text)
    if isinstance(ast, int):
        return ast
    if isinstance(ast, str):
        return symbols[ast]
    return _eval(ast, symbols, text)


def try_evaluate_dim(text: str | int, symbols: Mapping[str, int]) -> int | None:
    """Like :func:`evaluate_dim`, but ``None`` when it cannot be evaluated."""
    try:
        return evaluate_dim(text, symbols)
    except (KeyError, ValueError, ZeroDivisionError):
        return None
