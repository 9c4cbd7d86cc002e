"""Frontends: checkpoints -> graph dialect.

``ckir.frontend.hf.import_hf`` reads a HuggingFace checkpoint folder
(``config.json`` + safetensors headers) through a template (``templates/``);
``ckir.frontend.safetensors_header.read_safetensors_header`` reads one
safetensors header.  Both are re-exported here, imported on first use so that
reading a header does not load xDSL.
"""

from __future__ import annotations

from typing import Any

__all__ = ["TensorInfo", "import_hf", "read_safetensors_header"]


def __getattr__(name: str) -> Any:
    if name == "import_hf":
        from ckir.frontend.hf import import_hf

        return import_hf
    if name in ("TensorInfo", "read_safetensors_header"):
        from ckir.frontend import safetensors_header

        return getattr(safetensors_header, name)
    raise AttributeError(f"module 'ckir.frontend' has no attribute '{name}'")
