"""ckir: compile HuggingFace transformer checkpoints to dependency-free C through xDSL dialects.

``ckir.compile(model_dir, out_dir, ...)`` compiles and loads a model;
``ckir.load(build_dir)`` loads an existing build.  Both return a
:class:`ckir.model.CompiledModel`.  Imports are lazy: ``import ckir`` is cheap.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

__all__ = ["__version__", "compile", "load"]


def __getattr__(name: str) -> Any:
    if name in ("compile", "load", "CompiledModel"):
        from ckir import model

        return getattr(model, name)
    raise AttributeError(f"module 'ckir' has no attribute {name!r}")
