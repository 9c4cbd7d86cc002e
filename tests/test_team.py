"""Team calls: a decode step run as one OpenMP region (docs/runtime.md, "Team calls").

A decode program whose linear and attention calls are all team kernels runs as
one parallel region: those kernels are called by every thread of it and split
their work exactly as they split it in a region of their own, so the logits of
a team build and of a build compiled with ``team=False`` must be bitwise equal,
with any number of threads: 1 (a team of one), 2, and 3 (uneven shares, and
attention's positions split three ways past 192 cached positions).  Row-major
builds (``panels=False``) keep a region per call.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

import ckir  # noqa: E402
from ckir.tools.zoo import make_tiny_model  # noqa: E402

CONTEXT = 224


@pytest.fixture(scope="module")
def qwen2_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # GQA 4/2 heads of D = 64, qkv biases: the fused bias gemv, and decode attention
    # with enough work (4 heads x 200 positions x 64) to split the positions
    root = tmp_path_factory.mktemp("team")
    return make_tiny_model(
        "qwen2",
        root / "qwen2",
        seed=11,
        max_position_embeddings=CONTEXT,
        hidden_size=256,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=512,
    )


def decode_steps(model: ckir.CompiledModel, threads: int, prompt: np.ndarray) -> np.ndarray:
    model._lib.ckir_set_num_threads(threads)
    model.reset()
    model.prefill(prompt)
    steps = [model.decode(int(t)) for t in (3, 1, 4, 1, 5, 9, 2, 6)]
    return np.stack(steps)


@pytest.mark.parametrize("dtype", ["f32", "bf16", "q8_0", "q4_1"])
def test_team_decode_equals_a_region_per_call(qwen2_dir: Path, tmp_path: Path, dtype: str) -> None:
    team = ckir.compile(qwen2_dir, tmp_path / "team", dtype=dtype, max_context=CONTEXT)
    plain = ckir.compile(qwen2_dir, tmp_path / "plain", dtype=dtype, max_context=CONTEXT, team=False)
    assert "#pragma omp parallel" in (tmp_path / "team" / "model.c").read_text()
    assert "#pragma omp parallel" not in (tmp_path / "plain" / "model.c").read_text()
    prompt = np.random.default_rng(0).integers(0, team.vocab_size, 200)
    for threads in (1, 2, 3):
        got, want = decode_steps(team, threads, prompt), decode_steps(plain, threads, prompt)
        assert np.isfinite(got).all()
        np.testing.assert_array_equal(got, want, err_msg=f"{dtype}, {threads} threads")
    team.close()
    plain.close()


def test_row_major_and_debug_builds_keep_a_region_per_call(qwen2_dir: Path, tmp_path: Path) -> None:
    """gemv_f32 (row-major) is no team kernel; debug builds check canaries between
    scopes, which a team region does not."""
    ckir.compile(qwen2_dir, tmp_path / "rm", max_context=32, panels=False).close()
    ckir.compile(qwen2_dir, tmp_path / "dbg", max_context=32, debug=True).close()
    for build in ("rm", "dbg"):
        source = (tmp_path / build / "model.c").read_text()
        assert "#pragma omp parallel" not in source and "ckir_team_enter" not in source, build
