"""Dim expressions and constraints: ckir's one language of symbolic sizes.

Templates (shapes, derived symbols), the graph dialect (tensor types and dim
attributes), the lowering (resolving dims to integers) and the kernel registry
(constraints such as ``E % 32 == 0``) all parse and evaluate through this module.

A dim expression is an integer or an arithmetic expression over symbol names::

    dim    ::= sum
    sum    ::= prod (("+" | "-") prod)*
    prod   ::= atom (("*" | "/") atom)*
    atom   ::= integer | identifier | "(" sum ")"

Examples: ``64``, ``E``, ``H*D``, ``3*E``, ``E/H``, ``(E+1)*2``.  A constraint
compares dim expressions, which may also use ``%`` (remainder) there::

    constraint ::= comparison ("and" comparison)*
    comparison ::= sum ("==" | "!=" | "<" | "<=" | ">" | ">=") sum

e.g. ``E % 32 == 0``, ``H % KV == 0``, ``T >= 1 and T <= 4096``.  ``/`` is exact
integer division: ``evaluate_dim("E/H", {"E": 64, "H": 5})`` is an error.  The
canonical text of an expression is its tokens without spaces (``H * D`` -> ``H*D``);
the graph dialect stores and prints dims in that form, so text round-trips exactly.

In IR, a dim is read by :func:`parse_dim_expr` (tensor and weight shapes, op
attributes) and an op attribute that holds one is a :class:`DimAttr`
(``#graph.dim<H*D>``, written bare inside an op: ``heads H``).

Everything here is cached by expression text: a model with thousands of ops has a
handful of distinct dims.

The module also owns the **run-time symbols**: the names that no model binds and
a program learns only when it runs (``T`` tokens of a call, ``P`` tokens already
in the KV cache, ``PT`` = P + T, and the optimizer's ``step`` and ``lr``).  Every
other module spells them through the constants below.
"""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

from xdsl.dialects.builtin import StringAttr
from xdsl.ir import Attribute, ParametrizedAttribute
from xdsl.irdl import irdl_attr_definition
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

__all__ = [
    "CONTEXT",
    "LR",
    "POSITION",
    "ROW_SYMBOLS",
    "RUNTIME_SYMBOLS",
    "RUNTIME_SYMBOL_TYPES",
    "STEP",
    "TOKENS",
    "Constraint",
    "Dim",
    "DimAttr",
    "DimError",
    "check_dims_text",
    "dim_symbols",
    "dims_equal",
    "dims_text",
    "evaluate_dim",
    "is_identifier",
    "normalize_dim",
    "parse_constraint",
    "parse_dim",
    "parse_dim_expr",
    "product_factors",
    "scaled",
    "shapes_equal",
    "try_evaluate_dim",
]

# --------------------------------------------------------------------------- run-time symbols

#: tokens of this call (rows of an activation); the one run-time symbol of graph IR
TOKENS = "T"
#: tokens already in the KV cache before this call
POSITION = "P"
#: ``P + T``: the cache length after this call
CONTEXT = "PT"
#: the optimizer step number (mode optimize)
STEP = "step"
#: the learning rate (mode optimize)
LR = "lr"
#: run-time scalars a kernel call parameter may name, and their scalar types
RUNTIME_SYMBOL_TYPES: dict[str, str] = {
    TOKENS: "i64",
    POSITION: "i64",
    CONTEXT: "i64",
    STEP: "i64",
    LR: "f32",
}
RUNTIME_SYMBOLS: tuple[str, ...] = tuple(RUNTIME_SYMBOL_TYPES)
#: the run-time symbols that count tokens: a call parameter may scale them (``T*64``)
ROW_SYMBOLS: tuple[str, ...] = (TOKENS, POSITION, CONTEXT)


def scaled(symbol: str, factor: int) -> str:
    """A row symbol times a constant as a call parameter: ``T`` for 1, else ``T*64``."""
    return symbol if factor == 1 else f"{symbol}*{factor}"


_TOKEN = re.compile(r"\s*(?:(\d+)|([A-Za-z_][A-Za-z0-9_]*)|(==|!=|<=|>=|[-+*/%()<>]))")
_CMP: dict[str, Callable[[float, float], bool]] = {
    "==": operator.eq,
    "!=": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}
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
    def __init__(self, text: str, tokens: list[str], what: str = "dim expression"):
        self.text = text
        self.tokens = tokens
        self.i = 0
        self.what = what
        #: ``%`` is allowed in constraints only (it is an SSA sigil in IR text)
        self.products = ("*", "/", "%") if what == "constraint" else ("*", "/")

    def error(self, msg: str) -> DimError:
        return DimError(f"bad {self.what} '{self.text}': {msg}")

    def peek(self) -> str | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def sum(self) -> DimAst:
        return self._chain(("+", "-"), self.prod)

    def prod(self) -> DimAst:
        return self._chain(self.products, self.atom)

    def _chain(self, ops: tuple[str, ...], operand: Callable[[], DimAst]) -> DimAst:
        """``operand (op operand)*``, left-associative."""
        lhs = operand()
        while self.peek() in ops:
            op = self.tokens[self.i]
            self.i += 1
            lhs = (op, lhs, operand())
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
        if not is_identifier(tok):
            raise self.error(f"unexpected '{tok}'")
        return tok

    def conjunction(self) -> list[tuple[str, DimAst, DimAst]]:
        parts = [self.comparison()]
        while self.peek() == "and":
            self.i += 1
            parts.append(self.comparison())
        return parts

    def comparison(self) -> tuple[str, DimAst, DimAst]:
        lhs = self.sum()
        op = self.peek()
        if op not in _CMP:
            raise self.error("expected a comparison (==, !=, <, <=, >, >=)")
        self.i += 1
        return (op, lhs, self.sum())


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
    """Exact integer arithmetic (floats pass through + - * and comparisons)."""
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
    if op == "%":
        return lhs % rhs
    if lhs % rhs:
        raise ValueError(f"'{text}' = {lhs}/{rhs} is not an integer")
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


@lru_cache(maxsize=1024)
def product_factors(text: str) -> tuple[str, str] | None:
    """``(first, rest)`` of a dim expression that is a product ``first*rest``, else None.

    ``first`` is the first factor (an integer, a symbol or a parenthesised sum) and
    ``rest`` the product of the others, both canonical text: ``"N*K"`` ->
    ``("N", "K")``, ``"(A+B)*C*D"`` -> ``("(A+B)", "C*D")``; ``"N+K"``, ``"N"`` and
    ``"N/2*K"`` (a division at the top level) are not products.  Raises
    :class:`DimError` when the expression is malformed.
    """
    parse_dim(text)  # malformed: DimError
    tokens = _tokenize(text)
    depth = 0
    split: int | None = None
    for i, tok in enumerate(tokens):
        if tok == "(":
            depth += 1
        elif tok == ")":
            depth -= 1
        elif depth == 0 and tok in ("+", "-", "/"):
            return None
        elif depth == 0 and tok == "*" and split is None:
            split = i
    if split is None:
        return None
    return "".join(tokens[:split]), "".join(tokens[split + 1 :])


@dataclass(frozen=True)
class Dim:
    """A parsed dim expression: its canonical ``text`` and its AST.

    ``Dim.parse("H * D")`` -> ``Dim("H*D", ...)``; ``str(d)`` is the canonical text,
    which re-parses to the same ``Dim``.
    """

    text: str
    ast: DimAst

    @staticmethod
    def parse(value: str | int) -> Dim:
        """Parse an integer or expression text; :class:`DimError` when malformed."""
        return _dim(value if isinstance(value, str) else normalize_dim(value))

    def symbols(self) -> frozenset[str]:
        """The symbol names it uses."""
        out: set[str] = set()
        _symbols(self.ast, out)
        return frozenset(out)

    def evaluate(self, symbols: Mapping[str, int]) -> int:
        """Its value; :class:`DimError` for an unbound symbol or a bad division."""
        try:
            return _eval(self.ast, symbols, self.text)
        except KeyError as e:
            raise DimError(f"symbol '{e.args[0]}' has no value here") from None
        except ZeroDivisionError:
            raise DimError(f"division by zero in '{self.text}'") from None
        except ValueError as e:
            raise DimError(str(e)) from None

    def to_ir(self) -> int | str:
        """The form stored in graph IR: a plain int, or the canonical text."""
        return self.ast if isinstance(self.ast, int) else self.text

    def __str__(self) -> str:
        return self.text


@lru_cache(maxsize=4096)
def _dim(text: str) -> Dim:
    ast, canonical = _parse(text)
    return Dim(canonical, ast)


@dataclass(frozen=True)
class Constraint:
    """A parsed constraint over named integer or float values (kernel parameters)."""

    text: str
    parts: tuple[tuple[str, DimAst, DimAst], ...]

    def names(self) -> frozenset[str]:
        """The names it reads."""
        out: set[str] = set()
        for _, lhs, rhs in self.parts:
            _symbols(lhs, out)
            _symbols(rhs, out)
        return frozenset(out)

    def holds(self, values: Mapping[str, int | float]) -> bool:
        """Whether every comparison holds; ``KeyError`` for a name without a value."""
        env: Mapping[str, int] = values  # type: ignore[assignment]  # floats pass through
        return all(
            _CMP[op](_eval(a, env, self.text), _eval(b, env, self.text)) for op, a, b in self.parts
        )


@lru_cache(maxsize=1024)
def parse_constraint(text: str) -> Constraint:
    """Parse ``"E % 32 == 0"``; :class:`DimError` when malformed."""
    tokens = _tokenize(text)
    p = _Parser(text, tokens, "constraint")
    if not tokens:
        raise p.error("empty")
    parts = p.conjunction()
    if p.i != len(tokens):
        raise p.error(f"unexpected '{tokens[p.i]}'")
    return Constraint(text, tuple(parts))


# --------------------------------------------------------------------------- IR


def parse_dim_expr(parser: AttrParser) -> str:
    """Parse one dim expression (``E``, ``3*E``, ``(E+1)/2``, ``64``) from IR text.

    Takes the longest run of atoms (identifiers, integers, parentheses) and
    operators that can form an expression, then checks it with the grammar above;
    returns the canonical text.  Stops before a token that cannot continue the
    expression (``,``, ``]``, ``>``, ``)`` at depth 0, ``(`` after an atom, ...).
    Every dim in IR text (tensor shapes, weight shapes, ``#graph.dim``) is read here.
    """
    start = parser.pos
    parts: list[str] = []
    depth = 0
    expect_atom = True
    while True:
        if expect_atom:
            ident = parser.parse_optional_identifier()
            value = (
                None
                if ident is not None
                else parser.parse_optional_integer(allow_boolean=False, allow_negative=False)
            )
            if ident is not None or value is not None:
                parts.append(ident if ident is not None else str(value))
                expect_atom = False
            elif parser.parse_optional_punctuation("(") is not None:
                parts.append("(")
                depth += 1
            else:
                break
        elif depth and parser.parse_optional_punctuation(")") is not None:
            parts.append(")")
            depth -= 1
        else:
            op = next((o for o in "*+-/" if parser.parse_optional_punctuation(o)), None)
            if op is None:
                break
            parts.append(op)
            expect_atom = True
    try:
        return normalize_dim("".join(parts))  # atoms alternate with operators: never adjacent
    except DimError as e:
        parser.raise_error(str(e), start)


@irdl_attr_definition
class DimAttr(ParametrizedAttribute):
    """A dim expression as an IR attribute: ``#graph.dim<H*D>``.

    Holds the canonical text (``DimAttr.get("H * D").text == "H*D"``); ops print
    it bare through the ``custom<Dim>`` directive (``heads H``).  Registered by
    the graph dialect; built through :meth:`get`, which caches one attribute per
    expression.
    """

    name = "graph.dim"

    expr: StringAttr

    @staticmethod
    def get(value: str | int) -> DimAttr:
        """The attribute of an expression or integer; :class:`DimError` when malformed."""
        return _dim_attr(normalize_dim(value))

    @property
    def text(self) -> str:
        """The canonical expression text, e.g. ``"H*D"``."""
        return self.expr.data

    @property
    def dim(self) -> Dim:
        """The parsed expression."""
        return _dim(self.expr.data)

    def verify(self) -> None:
        try:
            canonical = normalize_dim(self.expr.data)
        except DimError as err:
            raise VerifyException(f"graph.dim: {err}") from None
        if canonical != self.expr.data:
            raise VerifyException(
                f"graph.dim: '{self.expr.data}' is not in canonical form (write '{canonical}')"
            )

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            return (StringAttr(parse_dim_expr(parser)),)

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string("<" + self.expr.data + ">")


@lru_cache(maxsize=4096)
def _dim_attr(canonical: str) -> DimAttr:
    return DimAttr(StringAttr(canonical))


# --------------------------------------------------------------------------- dim lists


def dims_text(dims: Sequence[str]) -> str:
    """A dim list as IR text: ``[T, H*D]``."""
    return "[" + ", ".join(dims) + "]"


@lru_cache(maxsize=8192)
def check_dims_text(dims: tuple[str, ...]) -> str | None:
    """None when every dim is a canonical, well-formed expression, else the problem."""
    for d in dims:
        try:
            if normalize_dim(d) != d:
                return f"dim '{d}' is not in canonical form (write '{normalize_dim(d)}')"
        except DimError as err:
            return str(err)
    return None


def dims_equal(a: str, b: str, symbols: Mapping[str, int]) -> bool:
    """Two dims are equal: same text, or same value when both evaluate."""
    if a == b:
        return True
    va = try_evaluate_dim(a, symbols)
    vb = try_evaluate_dim(b, symbols)
    return va is not None and va == vb


def shapes_equal(a: Sequence[str], b: Sequence[str], symbols: Mapping[str, int]) -> bool:
    """Same rank and every pair of dims equal (:func:`dims_equal`)."""
    return len(a) == len(b) and all(dims_equal(x, y, symbols) for x, y in zip(a, b, strict=True))
