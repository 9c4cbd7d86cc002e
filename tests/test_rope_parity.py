"""RoPE scaling through the templates: parity with transformers on tiny random models.

For each kind of rope scaling the llama and qwen2 templates map (dynamic, linear, llama3,
yarn with and without an explicit attention factor), a random-weight model with
odd sizes whose scaling matters at the positions used (small original contexts,
factors > 1): prefill logits, decode logits with the KV cache, and the training
gradients of one backward, against transformers in fp32 (<= 1e-4 relative, the
bounds of tests/test_parity.py and tests/test_training.py).

Partial rotation: no template architecture that transformers implements with
today's graph ops rotates part of a head (LlamaAttention and Qwen2Attention
rotate whole heads), so the templates refuse ``partial_rotary_factor`` and
partial rotation is tested at the kernel (tests/test_rope_kernels.py), IR
(tests/filecheck/dialects/graph/rope*.mlir) and coefficient
(tests/test_rope_scaling.py) levels.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from test_parity import (  # noqa: E402
    assert_decode_matches,
    assert_prefill_matches,
    compiled,
)

import ckir  # noqa: E402
from ckir.errors import CkirError  # noqa: E402
from ckir.tools.zoo import make_tiny_model  # noqa: E402

MAX_CONTEXT = 48
_SIZES = dict(hidden_size=48, num_attention_heads=4, num_key_value_heads=2, intermediate_size=61)

#: name -> (architecture, config overrides)
CONFIGS: dict[str, tuple[str, dict]] = {
    "llama_linear": (
        "llama",
        dict(_SIZES, vocab_size=157, rope_parameters={"rope_type": "linear", "factor": 3.0}),
    ),
    # dynamic NTK: plain RoPE up to max_position_embeddings (48 = MAX_CONTEXT here), the
    # longest context ckir compiles, so the decode steps reach the last position
    "llama_dynamic": (
        "llama",
        dict(
            _SIZES,
            vocab_size=143,
            max_position_embeddings=MAX_CONTEXT,
            rope_parameters={"rope_type": "dynamic", "factor": 2.0},
        ),
    ),
    "llama_llama3": (
        "llama",
        dict(
            _SIZES,
            vocab_size=151,
            rope_parameters={
                "rope_type": "llama3",
                "rope_theta": 500000.0,
                "factor": 8.0,
                "low_freq_factor": 1.0,
                "high_freq_factor": 4.0,
                "original_max_position_embeddings": 32,
            },
        ),
    ),
    "llama_yarn": (
        "llama",
        dict(
            hidden_size=40,
            num_attention_heads=5,
            num_key_value_heads=1,
            intermediate_size=53,
            vocab_size=163,
            rope_parameters={
                "rope_type": "yarn",
                "factor": 4.0,
                "original_max_position_embeddings": 32,
                "beta_fast": 8.0,
            },
        ),
    ),
    "qwen2_yarn_attn": (
        "qwen2",
        dict(
            _SIZES,
            vocab_size=149,
            rope_parameters={
                "rope_type": "yarn",
                "rope_theta": 1000000.0,
                "factor": 2.0,
                "original_max_position_embeddings": 16,
                "attention_factor": 1.2,
                "truncate": False,
            },
        ),
    ),
    "qwen3_yarn": (  # per-head q/k norms before the scaled rotation
        "qwen3",
        dict(
            hidden_size=36,
            num_attention_heads=3,
            num_key_value_heads=1,
            head_dim=14,
            intermediate_size=47,
            vocab_size=131,
            rope_parameters={
                "rope_type": "yarn",
                "rope_theta": 1000000.0,
                "factor": 4.0,
                "original_max_position_embeddings": 16,
            },
        ),
    ),
    "qwen2_llama3": (
        "qwen2",
        dict(
            _SIZES,
            tied=False,
            vocab_size=139,
            rope_parameters={
                "rope_type": "llama3",
                "rope_theta": 10000.0,
                "factor": 4.0,
                "low_freq_factor": 2.0,
                "high_freq_factor": 6.0,
                "original_max_position_embeddings": 24,
            },
        ),
    ),
}


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("rope_models")
    out = {}
    for key, (arch, overrides) in CONFIGS.items():
        overrides = dict(overrides)
        tied = overrides.pop("tied", None)
        out[key] = make_tiny_model(arch, root / key, seed=5, tied=tied, **overrides)
    return out


@pytest.fixture(scope="module")
def builds(checkpoints, tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("rope_builds")
    modes = ("prefill", "decode", "backward")
    yield from compiled(checkpoints, root, MAX_CONTEXT, modes=modes)


def _hf(path: Path):
    model = transformers.AutoModelForCausalLM.from_pretrained(
        path, dtype=torch.float32, attn_implementation="eager"
    )
    model.eval()
    return model


def test_scaling_reaches_the_ir(builds) -> None:
    """Each build's graph carries its rope_type (a template that ignored the config
    would build plain RoPE and might still pass at small positions)."""
    want = {"linear": "linear", "llama3": "wavelength", "yarn": "yarn", "yarn_attn": "yarn"}
    for key, model in builds.items():
        kind = key.split("_", 1)[1]
        text = (Path(model.build_dir) / "graph.mlir").read_text()
        if kind == "dynamic":  # plain RoPE
            assert "graph.rope" in text and "rope_type" not in text, key
            continue
        assert f'rope_type = "{want[kind]}"' in text, key


@pytest.mark.parametrize("key", list(CONFIGS))
def test_prefill_matches_hf(key: str, checkpoints, builds) -> None:
    model = builds[key]
    tokens = np.random.default_rng(1).integers(0, model.vocab_size, size=41)
    assert_prefill_matches(model, _hf(checkpoints[key]), tokens, key)


@pytest.mark.parametrize("key", list(CONFIGS))
def test_decode_matches_hf(key: str, checkpoints, builds) -> None:
    rng = np.random.default_rng(2)
    model = builds[key]
    prompt = rng.integers(0, model.vocab_size, size=23)
    steps = rng.integers(0, model.vocab_size, size=9)
    assert_decode_matches(model, _hf(checkpoints[key]), prompt, steps, key)


@pytest.mark.parametrize("key", list(CONFIGS))
def test_gradients_match_autograd(key: str, checkpoints, builds, tmp_path: Path) -> None:
    """The gradients of one backward, with test_training's oracle and bounds."""
    from test_training import assert_gradients_match, hf_model

    model = builds[key]
    ref = hf_model(checkpoints[key])
    assert_gradients_match(key, model, ref, tmp_path, size=37, build=Path(model.build_dir))


@pytest.mark.parametrize(
    "rope,match",
    [
        (
            {"rope_type": "longrope", "factor": 2.0},
            "key 'rope_parameters.rope_type' is 'longrope'",
        ),
        ({"rope_type": "dynamic"}, "rope scaling needs its factor"),
        ({"rope_type": "linear"}, "rope scaling needs its factor"),
        (
            {"rope_type": "llama3", "factor": 8.0, "original_max_position_embeddings": 32},
            "rope_type llama3 needs low_freq_factor",
        ),
        ({"rope_type": "default", "partial_rotary_factor": 0.5}, "partial_rotary_factor is set"),
    ],
)
def test_unsupported_rope_configs_are_refused(rope: dict, match: str, tmp_path: Path) -> None:
    import json

    src = make_tiny_model("llama", tmp_path / "m", seed=1, **_SIZES, vocab_size=101)
    cfg_path = src / "config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["rope_parameters"] = {"rope_theta": 10000.0, **rope}
    cfg_path.write_text(json.dumps(cfg))
    with pytest.raises(CkirError, match=match):
        ckir.compile(src, tmp_path / "b", max_context=16)
