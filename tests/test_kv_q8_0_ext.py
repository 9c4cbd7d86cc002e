"""The Q8_0 KV cache (``--kv-dtype q8_0``) on attention_ext templates and head_dims with a tail.

Three tiny random-weight models (odd sizes), each compiled twice (f32 KV and Q8_0 KV):

* a gemma2 with head_dim 40 (each head's 40 values: two Q8_0 blocks, the second
  zero-padded), ``query_pre_attn_scalar`` (scale_dim), attention and final logit
  soft-capping and a sliding window of 6 on every other layer: attention_ext_q8_0;
* a gemma3 with head_dim 72 (three blocks), sliding window 5 on two layers of three;
* a llama with head_dim 80 (plain attention_q8_0 over padded heads).

A prompt of 20 tokens (longer than the windows) and 12 teacher-forced decode steps,
against transformers (eager attention) on the whole sequence:

* the f32-KV build: the usual parity (<= 1e-4 of max |logit|);
* the Q8_0-KV build against transformers with its keys and values rounded through
  ckir.quant's Q8_0 (each head's head_dim values zero-padded to whole blocks, as
  kv_store_q8_0 stores them): what is left is summation order and values on the
  other side of a rounding boundary; measured <= 3.1e-5 of max |logit| (gemma3),
  asserted <= 5e-4;
* the Q8_0-KV build against plain transformers and against the f32-KV build: the
  quantization error itself, measured 0.005-0.025, asserted between 1e-3 (it really
  is quantized) and 0.08.  docs/quantization.md has the numbers.

Also: ``layout.totals`` counts the padded blocks (``KV * ceil(D/32) * 34`` bytes a row).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from test_gemma import random_checkpoint  # noqa: E402
from test_kv_q8_0_model import _q8_round, _reference, _rel, _run  # noqa: E402
from test_parity import assert_close  # noqa: E402

import ckir  # noqa: E402

MAX_CONTEXT = 40
PROMPT, STEPS = 20, 12
ORACLE_REL = 5e-4
QUANT_REL_MIN, QUANT_REL_MAX = 1e-3, 0.08

#: key -> (config class, causal LM class, config kwargs)
CONFIGS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "gemma2_d40_capped_window": (
        "Gemma2Config",
        "Gemma2ForCausalLM",
        dict(
            hidden_size=56,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=40,
            intermediate_size=67,
            vocab_size=193,
            num_hidden_layers=3,
            query_pre_attn_scalar=20,
            attn_logit_softcapping=5.0,
            final_logit_softcapping=3.0,
            sliding_window=6,
        ),
    ),
    "gemma3_d72_window": (
        "Gemma3TextConfig",
        "Gemma3ForCausalLM",
        dict(
            hidden_size=40,
            num_attention_heads=2,
            num_key_value_heads=1,
            head_dim=72,
            intermediate_size=53,
            vocab_size=157,
            num_hidden_layers=3,
            sliding_window_pattern=3,
            sliding_window=5,
            query_pre_attn_scalar=30,
            rope_theta=1000.0,
            rope_local_base_freq=37.0,
        ),
    ),
    "llama_d80": (
        "LlamaConfig",
        "LlamaForCausalLM",
        dict(
            hidden_size=48,
            num_attention_heads=3,
            num_key_value_heads=1,
            head_dim=80,
            intermediate_size=61,
            vocab_size=149,
            num_hidden_layers=2,
        ),
    ),
}


def _register_q8_eager() -> str:
    """An attention implementation: the model's own eager attention (scale, soft-cap,
    sliding-window mask) over Q8_0-rounded keys and values."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, eager_mask

    def q8_eager(module, query, key, value, *args, **kwargs):  # type: ignore[no-untyped-def]
        eager = sys.modules[type(module).__module__].eager_attention_forward
        return eager(module, query, _q8_round(key), _q8_round(value), *args, **kwargs)

    AttentionInterface.register("ckir_q8_kv_eager", q8_eager)
    AttentionMaskInterface.register("ckir_q8_kv_eager", eager_mask)
    return "ckir_q8_kv_eager"


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("kvq8_ext")
    return {
        key: random_checkpoint(cfg, lm, {"max_position_embeddings": 64, **kw}, root / key, seed=11)
        for key, (cfg, lm, kw) in CONFIGS.items()
    }


@pytest.fixture(scope="module")
def builds(checkpoints: dict[str, Path], tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("kvq8_ext_builds")
    models = {
        (key, kv): ckir.compile(path, root / f"{key}_{kv}", max_context=MAX_CONTEXT, kv_dtype=kv)
        for key, path in checkpoints.items()
        for kv in ("f32", "q8_0")
    }
    yield models
    for m in models.values():
        m.close()


def _tokens(key: str) -> np.ndarray:
    vocab = CONFIGS[key][2]["vocab_size"]
    return np.random.default_rng(4).integers(0, vocab, PROMPT + STEPS)


@pytest.mark.parametrize("key", list(CONFIGS))
def test_kv_bytes_count_the_padding(key: str, builds) -> None:
    kw = CONFIGS[key][2]
    kv, d, layers = kw["num_key_value_heads"], kw["head_dim"], kw["num_hidden_layers"]
    totals = {
        dt: json.loads((Path(builds[key, dt].build_dir) / "layout.json").read_text())["totals"]
        for dt in ("f32", "q8_0")
    }
    rows = layers * 2 * MAX_CONTEXT
    assert totals["f32"]["kv_cache"] == rows * kv * d * 4
    assert totals["q8_0"]["kv_cache"] == rows * kv * -(-d // 32) * 34
    assert totals["q8_0"]["kv_cache"] * 2 < totals["f32"]["kv_cache"]
    for role in ("weight", "io"):
        assert totals["q8_0"][role] == totals["f32"][role], role
    # the f32 build's k / v rows are views of its cache (--plan-views' KV append); a
    # Q8_0 cache is written by a quantizing kv_store, so those slots stay activations
    assert totals["q8_0"]["saved.views"] == 0
    assert (
        totals["q8_0"]["activation"] == totals["f32"]["activation"] + totals["f32"]["saved.views"]
    )


@pytest.mark.parametrize("key", list(CONFIGS))
def test_selected_kernels(key: str, builds) -> None:
    text = (Path(builds[key, "q8_0"].build_dir) / "layout.mlir").read_text()
    plain = key.startswith("llama")
    assert ("@attention_q8_0(" in text) == plain
    assert ("@attention_ext_q8_0(" in text) != plain
    assert "@attention_f32(" not in text and "@attention_ext_f32(" not in text
    assert "@kv_store_q8_0(" in text and "@kv_store_f32(" not in text


@pytest.mark.parametrize("key", list(CONFIGS))
def test_f32_kv_matches_transformers(key: str, checkpoints, builds) -> None:
    tokens = _tokens(key)
    ref = _reference(checkpoints[key], tokens, "eager")
    pre, dec = _run(builds[key, "f32"], tokens, PROMPT)
    assert_close(pre, ref[:PROMPT], f"{key} f32 KV prefill")
    assert_close(dec, ref[PROMPT:], f"{key} f32 KV decode")


@pytest.mark.parametrize("key", list(CONFIGS))
def test_q8_kv_matches_transformers_with_q8_keys_and_values(key: str, checkpoints, builds):
    tokens = _tokens(key)
    ref = _reference(checkpoints[key], tokens, _register_q8_eager())
    pre, dec = _run(builds[key, "q8_0"], tokens, PROMPT)
    assert _rel(pre, ref[:PROMPT]) <= ORACLE_REL, _rel(pre, ref[:PROMPT])
    assert _rel(dec, ref[PROMPT:]) <= ORACLE_REL, _rel(dec, ref[PROMPT:])


@pytest.mark.parametrize("key", list(CONFIGS))
def test_q8_kv_error_against_fp32(key: str, checkpoints, builds) -> None:
    tokens = _tokens(key)
    ref = _reference(checkpoints[key], tokens, "eager")
    pre, dec = _run(builds[key, "q8_0"], tokens, PROMPT)
    _, dec_f32 = _run(builds[key, "f32"], tokens, PROMPT)
    for what, err in (
        ("prefill vs transformers", _rel(pre, ref[:PROMPT])),
        ("decode vs transformers", _rel(dec, ref[PROMPT:])),
        ("decode vs the f32-KV build", _rel(dec, dec_f32)),
    ):
        assert QUANT_REL_MIN < err <= QUANT_REL_MAX, f"{what}: {err:.3g}"
