"""Frontends: checkpoints -> graph dialect.

``ckir.frontend.hf.import_hf`` reads a HuggingFace checkpoint folder
(``config.json`` + safetensors headers) through a template (``templates/``);
``ckir.frontend.gguf.import_gguf`` reads a GGUF file through the template's
``gguf:`` block; ``import_model`` picks one by the path and also returns the
weight source that ``weights.bin`` is written from.
``ckir.frontend.safetensors_header.read_safetensors_header`` reads one
safetensors header.  Everything is imported on first use so that reading a
header does not load xDSL.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from xdsl.dialects.builtin import ModuleOp

    from ckir.backend.weights import WeightSource

__all__ = [
    "TensorInfo",
    "import_gguf",
    "import_hf",
    "import_model",
    "read_safetensors_header",
]


def import_model(
    path: str | Path, template: str | Path | None = None, allow_unused: Sequence[str] = ()
) -> tuple[ModuleOp, list[str], WeightSource]:
    """``(graph module, warnings, weight source)`` of a HF folder or a GGUF file.

    ``allow_unused``: globs of checkpoint tensors the template may leave unused
    (any other unused tensor is an error naming it).

    A directory is a HF checkpoint folder (``import_hf`` + ``SafetensorsSource``);
    a file ending in ``.gguf`` (or starting with the GGUF magic) is a GGUF file
    (``import_gguf``'s module + ``GGUFSource``); a file ending in ``.onnx`` is an
    ONNX model (``import_onnx``'s module + ``OnnxSource``).
    """
    from ckir.integrity import restore_interrupted

    path = Path(path)
    restore_interrupted(path)  # a saved folder whose replacement was killed
    module, warnings, source = _import_source(path, template, allow_unused)
    annotate(module)
    return module, warnings, source


def annotate(module: ModuleOp) -> None:
    """The graph-level steps every frontend's module takes: the tensor table
    (``--annotate-tensors``, :mod:`ckir.tensor_table`)."""
    from ckir.tensor_table import annotate_module

    annotate_module(module)


def _import_source(
    path: Path, template: str | Path | None, allow_unused: Sequence[str]
) -> tuple[ModuleOp, list[str], WeightSource]:
    """``import_model`` before the graph-level steps: by the kind of ``path``."""
    from ckir.errors import CkirError

    if path.is_dir():
        from ckir.backend.weights import SafetensorsSource
        from ckir.frontend.hf import import_hf

        module, warnings = import_hf(path, template, allow_unused)
        return module, warnings, SafetensorsSource(path)
    from ckir.frontend.gguf import import_gguf_model
    from ckir.frontend.gguf_file import is_gguf_file

    if path.suffix.lower() == ".gguf" or is_gguf_file(path):
        return import_gguf_model(path, template, allow_unused)
    if path.suffix.lower() == ".onnx":
        from ckir.frontend.onnx import import_onnx_model

        return import_onnx_model(path, template)
    if not path.exists():
        raise CkirError(f"{path}: no such file or folder")
    raise CkirError(f"{path}: not a HF checkpoint folder, a GGUF file or an .onnx file")


def __getattr__(name: str) -> Any:
    if name == "import_hf":
        from ckir.frontend.hf import import_hf

        return import_hf
    if name == "import_gguf":
        from ckir.frontend.gguf import import_gguf

        return import_gguf
    if name in ("TensorInfo", "read_safetensors_header"):
        from ckir.frontend import safetensors_header

        return getattr(safetensors_header, name)
    raise AttributeError(f"module 'ckir.frontend' has no attribute '{name}'")
