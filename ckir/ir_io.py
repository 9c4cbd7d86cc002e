"""Reading and writing ckir's IR text: the one place that builds a parsing context.

* :func:`ir_context` — a :class:`~xdsl.context.Context` with builtin and ckir's
  dialects (graph, lowered, layout; registered lazily from :mod:`ckir.universe`,
  the same set ``ckir-opt`` parses).
* :func:`parse_module` / :func:`load_module` — IR text / an IR file (a build's
  ``graph.mlir`` or ``layout.mlir``) -> a module.
* :func:`print_module` — a module -> its text, exactly as ``ckir-opt`` prints it,
  so a written file re-prints identically.

Example::

    module = load_module(Path("build/layout.mlir"))
    assert print_module(module) == Path("build/layout.mlir").read_text()
"""

from __future__ import annotations

import io
from pathlib import Path

from xdsl.context import Context
from xdsl.dialects.builtin import Builtin, ModuleOp
from xdsl.parser import Parser
from xdsl.targets.mlir import MLIRTarget

from ckir.universe import dialect_factories

__all__ = ["ir_context", "load_module", "parse_module", "print_module", "register_dialects"]


def register_dialects(ctx: Context) -> None:
    """Make builtin and ckir's dialects known to ``ctx`` (ckir's loaded on first use)."""
    ctx.load_dialect(Builtin)
    for name, factory in dialect_factories().items():
        ctx.register_dialect(name, factory)


def ir_context() -> Context:
    """A fresh context that parses every dialect of ckir's IR."""
    ctx = Context()
    register_dialects(ctx)
    return ctx


def parse_module(text: str, name: str = "<string>") -> ModuleOp:
    """Parse IR text (``name`` locates parse errors) into a module."""
    return Parser(ir_context(), text, name).parse_module()


def load_module(path: Path) -> ModuleOp:
    """Parse an IR file (graph, lowered and layout dialects) into a module."""
    return parse_module(path.read_text(), str(path))


def print_module(module: ModuleOp) -> str:
    """The module's text exactly as ``ckir-opt`` prints it (so files re-print identically)."""
    out = io.StringIO()
    MLIRTarget().emit(Context(), module, out)
    return out.getvalue()
