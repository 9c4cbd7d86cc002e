"""Prefill compiled with ``logits="last"`` (issue 14): the footer runs on the last row.

Oracles: the last row of the same checkpoint compiled with ``logits="all"``, and
HF transformers; decode after such a prefill must still match (the KV cache of
every prompt row is written by the body, which still runs on all rows).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import ckir  # noqa: E402
from ckir.compiler import CompileOptions  # noqa: E402
from ckir.errors import CkirError  # noqa: E402

MAX_CONTEXT = 32
REL_TOL = 1e-4


@pytest.fixture(scope="module", params=["llama", "gpt2"])
def pair(request, tiny_model: Callable[..., Path], tmp_path_factory: pytest.TempPathFactory):
    """(checkpoint, the "all" build, the "last" build) of one architecture."""
    src = tiny_model(request.param)
    root = tmp_path_factory.mktemp(f"logits_{request.param}")
    full = ckir.compile(src, root / "all", max_context=MAX_CONTEXT)
    last = ckir.compile(src, root / "last", max_context=MAX_CONTEXT, logits="last")
    yield src, full, last
    full.close()
    last.close()


def assert_close(ours: np.ndarray, ref: np.ndarray, what: str) -> None:
    scale = float(np.abs(ref).max())
    err = float(np.abs(ours - ref).max())
    assert err <= REL_TOL * scale, f"{what}: max abs error {err:.3g} > {REL_TOL} * {scale:.3g}"


def hf_logits(src: Path, tokens: np.ndarray) -> np.ndarray:
    model = transformers.AutoModelForCausalLM.from_pretrained(src, dtype=torch.float32)
    model.eval()
    with torch.no_grad():
        return model(torch.tensor(tokens[None, :])).logits[0].numpy()


def test_prefill_last_row_matches_all_and_hf(pair) -> None:
    src, full, last = pair
    assert (full.logits_rows, last.logits_rows) == ("all", "last")
    tokens = np.random.default_rng(5).integers(0, full.vocab_size, size=13)
    full.reset()
    last.reset()
    rows = full.prefill(tokens)
    one = last.prefill(tokens)
    assert rows.shape == (13, full.vocab_size)
    assert one.shape == (1, last.vocab_size)
    assert_close(one, rows[-1:], "last vs all")
    assert_close(one[0], hf_logits(src, tokens)[-1], "last vs hf")


def test_decode_after_last_prefill_matches_all(pair) -> None:
    _, full, last = pair
    rng = np.random.default_rng(6)
    prompt = rng.integers(0, full.vocab_size, size=7)
    steps = rng.integers(0, full.vocab_size, size=5)
    full.reset()
    last.reset()
    full.prefill(prompt)
    last.prefill(prompt)
    for i, tok in enumerate(steps):
        assert_close(last.decode(int(tok)), full.decode(int(tok)), f"decode step {i}")
    assert last.position == len(prompt) + len(steps)


def test_chunked_and_single_token_prefill(pair) -> None:
    _, full, last = pair
    tokens = np.arange(1, 12)
    full.reset()
    whole = full.prefill(tokens)
    last.reset()
    assert last.prefill(tokens[:4]).shape == (1, last.vocab_size)
    assert_close(last.prefill(tokens[4:]), whole[-1:], "second chunk")
    last.reset()
    assert_close(last.prefill(tokens[:1]), whole[:1], "one-token prefill")


def test_state_arena_is_smaller(pair) -> None:
    """The prefill logits buffer shrinks from MAX_CONTEXT rows to one."""
    _, full, last = pair
    saved = int(full.desc.state_bytes) - int(last.desc.state_bytes)
    assert saved >= (MAX_CONTEXT - 1) * full.vocab_size * 4


def test_bad_logits_option() -> None:
    with pytest.raises(CkirError, match="--logits: unknown choice 'first'; use all or last"):
        CompileOptions(logits="first")
    with pytest.raises(TypeError, match="logits must be a str"):
        CompileOptions(logits=1)  # type: ignore[arg-type]
