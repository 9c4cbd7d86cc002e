"""templates/gemma3.yaml (Gemma 3 text, transformers' Gemma3ForCausalLM) against transformers.

Tiny random configs with odd sizes (head_dim not E/H, GQA and MQA, prime
vocabularies), every parameter drawn at random (the (1 + w) norms and the
per-head q/k norms included).  Sliding windows shorter than the prompts, so the
local/global layer pattern matters, and local and global RoPE bases that differ
(global linear scaling on one config).  Oracles as tests/test_gemma.py: prefill and
decode logits within 1e-4 of the largest |logit|, every weight's gradient within
1e-4 of the largest entry of PyTorch's.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from test_gemma import (  # noqa: E402
    MAX_CONTEXT,
    assert_close,
    check_decode,
    check_gradients,
    check_prefill,
    gguf_like_llama_cpp,
    hf_model,
    random_checkpoint,
)
from test_parity import compiled  # noqa: E402

import ckir  # noqa: E402
from ckir.errors import CkirError  # noqa: E402

#: key -> Gemma3TextConfig kwargs
CONFIGS: dict[str, dict[str, Any]] = {
    # 4 layers, pattern 3: layers 0, 1, 3 slide (local base), layer 2 is global (scaled)
    "gemma3_gqa_scaled": dict(
        hidden_size=40,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=12,
        intermediate_size=67,
        vocab_size=193,
        num_hidden_layers=4,
        sliding_window_pattern=3,
        sliding_window=5,
        query_pre_attn_scalar=20,
        rope_theta=1000.0,
        rope_local_base_freq=37.0,
        rope_scaling={"rope_type": "linear", "factor": 8.0},
        attn_logit_softcapping=4.0,
        final_logit_softcapping=3.0,
    ),
    # 7 layers given as layer_types (pattern 2), MQA, untied, biased, no soft-capping
    "gemma3_mqa_untied_bias": dict(
        hidden_size=30,
        num_attention_heads=3,
        num_key_value_heads=1,
        head_dim=14,
        intermediate_size=41,
        vocab_size=151,
        num_hidden_layers=7,
        layer_types=["sliding_attention", "full_attention"] * 3 + ["sliding_attention"],
        sliding_window=6,
        query_pre_attn_scalar=7,
        rope_theta=500.0,
        rope_local_base_freq=50.0,
        tie_word_embeddings=False,
        attention_bias=True,
        rms_norm_eps=1e-5,
    ),
    # what a GGUF file can express (llama.cpp: sliding pattern 6, local base 10000,
    # attention scale head_dim^-1/2): 7 layers, layer 5 global
    "gemma3_gguf": dict(
        hidden_size=36,
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=18,
        intermediate_size=53,
        vocab_size=157,
        num_hidden_layers=7,
        sliding_window=4,
        query_pre_attn_scalar=18,
        rope_theta=1000.0,
        rope_scaling={"rope_type": "linear", "factor": 4.0},
        final_logit_softcapping=5.0,
    ),
}


def make_tiny(key: str, out: Path, seed: int = 7) -> Path:
    """A random-weight Gemma3ForCausalLM of ``CONFIGS[key]``, every parameter drawn at random."""
    kwargs = {"max_position_embeddings": MAX_CONTEXT, **CONFIGS[key]}
    return random_checkpoint("Gemma3TextConfig", "Gemma3ForCausalLM", kwargs, out, seed)


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("gemma3_models")
    return {key: make_tiny(key, root / key) for key in CONFIGS}


@pytest.fixture(scope="module")
def builds(checkpoints: dict[str, Path], tmp_path_factory: pytest.TempPathFactory):
    yield from compiled(checkpoints, tmp_path_factory.mktemp("gemma3_builds"), MAX_CONTEXT)


@pytest.mark.parametrize("key", list(CONFIGS))
def test_prefill_matches_hf(key: str, checkpoints, builds) -> None:
    check_prefill(builds[key], checkpoints[key], key)


@pytest.mark.parametrize("key", list(CONFIGS))
def test_decode_with_kv_cache_matches_hf(key: str, checkpoints, builds) -> None:
    check_decode(builds[key], checkpoints[key], key)


@pytest.mark.parametrize("key", list(CONFIGS))
def test_gradients_match_autograd(key: str, checkpoints, tmp_path: Path) -> None:
    check_gradients(checkpoints[key], tmp_path, key, MAX_CONTEXT)


# --------------------------------------------------------------------------- refusals


def _config(checkpoints: dict[str, Path], key: str) -> dict[str, Any]:
    return json.loads((checkpoints[key] / "config.json").read_text())


def test_layer_pattern_is_read_from_layer_types(checkpoints) -> None:
    """layer_types (7 layers, full_attention every 2nd) gives the pattern 2, ahead of
    sliding_window_pattern; without either, Gemma3TextConfig's default 6."""
    from ckir.resources import templates_dir
    from ckir.template import load_template

    tpl = load_template(templates_dir() / "gemma3.yaml")
    config = _config(checkpoints, "gemma3_mqa_untied_bias")
    assert tpl.bind(config)[1]["pattern"] == 2
    assert tpl.bind({**config, "sliding_window_pattern": 5})[1]["pattern"] == 2
    no_list = {k: v for k, v in config.items() if k != "layer_types"}
    assert tpl.bind({**no_list, "sliding_window_pattern": 5})[1]["pattern"] == 5
    assert tpl.bind(no_list)[1]["pattern"] == 6
    every_layer_slides = {**config, "layer_types": ["sliding_attention"] * 7}
    assert tpl.bind(every_layer_slides)[1]["pattern"] == 8


def test_irregular_layer_types_are_refused(checkpoints, tmp_path: Path, copy_checkpoint) -> None:
    """A layer_types list that no (i + 1) % n pattern describes fails the import."""
    src = copy_checkpoint(checkpoints["gemma3_mqa_untied_bias"])
    cfg = json.loads((src / "config.json").read_text())
    cfg["layer_types"] = ["full_attention"] + ["sliding_attention"] * 6
    (src / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CkirError, match="key 'layer_types' does not have 'full_attention' exactly"):
        ckir.compile(src, tmp_path / "build", max_context=MAX_CONTEXT)


def test_scaled_local_rope_is_refused(checkpoints, tmp_path: Path, copy_checkpoint) -> None:
    """Local layers rotate unscaled: a scaled sliding_attention RoPE fails the import."""
    src = copy_checkpoint(checkpoints["gemma3_gqa_scaled"])
    cfg = json.loads((src / "config.json").read_text())
    cfg["rope_parameters"]["sliding_attention"].update(rope_type="linear", factor=2.0)
    (src / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CkirError, match="is 'linear'; template gemma3 supports only default"):
        ckir.compile(src, tmp_path / "build", max_context=MAX_CONTEXT)


def test_attention_softcapping_only_warns(checkpoints) -> None:
    """transformers' Gemma 3 attention ignores attn_logit_softcapping (the gqa_scaled
    config sets it and matches transformers above); the import says so."""
    from ckir.resources import templates_dir
    from ckir.template import load_template

    tpl = load_template(templates_dir() / "gemma3.yaml")
    warnings: list[str] = []
    tpl.bind(_config(checkpoints, "gemma3_gqa_scaled"), warnings=warnings)
    assert any("attn_logit_softcapping is set" in w for w in warnings), warnings
    warnings.clear()
    tpl.bind(_config(checkpoints, "gemma3_mqa_untied_bias"), warnings=warnings)
    assert warnings == []


# --------------------------------------------------------------------------- GGUF


def test_gguf_file_matches_hf(checkpoints, tmp_path: Path) -> None:
    """A GGUF file written as llama.cpp's converter does (norms, q/k norms included,
    stored as w + 1; the global RoPE base and its linear scaling; no pattern, no local
    base) builds the same model as the checkpoint: prefill and decode."""
    import numpy as np

    src = checkpoints["gemma3_gguf"]
    config = _config(checkpoints, "gemma3_gguf")
    extra = {
        "gemma3.rope.freq_base": 1000.0,
        "gemma3.rope.scaling.type": "linear",
        "gemma3.rope.scaling.factor": 4.0,
        "gemma3.attention.sliding_window": config["sliding_window"],
        "gemma3.final_logit_softcapping": 5.0,
    }
    path = gguf_like_llama_cpp(src, tmp_path / "m.gguf", extra, arch="gemma3")
    model = ckir.compile(path, tmp_path / "build", max_context=MAX_CONTEXT)
    hf = hf_model(src)
    tokens = np.random.default_rng(4).integers(0, model.vocab_size, size=19)
    model.reset()
    ours = model.prefill(tokens)
    with torch.no_grad():
        ref = hf(torch.tensor(tokens[None, :])).logits[0].numpy()
    assert_close(ours, ref, "gemma3 gguf prefill")
    step = model.decode(7)
    with torch.no_grad():
        ref_step = hf(torch.tensor([[*tokens.tolist(), 7]])).logits[0, -1].numpy()
    assert_close(step, ref_step, "gemma3 gguf decode")
    model.close()
