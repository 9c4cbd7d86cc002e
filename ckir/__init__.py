"""ckir: compile HuggingFace transformer checkpoints to dependency-free C through xDSL dialects."""

from __future__ import annotations

__version__ = "0.1.0"
