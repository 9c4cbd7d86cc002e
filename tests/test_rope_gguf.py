"""RoPE scaling read from GGUF metadata, as llama.cpp's converter writes it.

``{arch}.rope.scaling.type`` / ``.factor`` / ``.original_context_length`` and
YaRN's ``.yarn_attn_factor`` / ``.yarn_beta_fast`` / ``.yarn_beta_slow`` feed the
templates' rope params (templates/llama.yaml, qwen2.yaml ``gguf.config``).  A
GGUF file written with the ``gguf`` package from a tiny random HF model with
rope scaling (F32 tensors) must give transformers' logits for that HF model;
the file without the scaling keys must not (the keys are read, not ignored).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("gguf")

from gguf_fixtures import gguf_from_hf  # noqa: E402

import ckir  # noqa: E402
from ckir.errors import CkirError  # noqa: E402
from ckir.tools.zoo import make_tiny_model  # noqa: E402

_SIZES = dict(hidden_size=48, num_attention_heads=4, num_key_value_heads=2, intermediate_size=61)

#: name -> (architecture, HF rope_parameters, the GGUF metadata llama.cpp writes for it)
CASES = {
    "llama_linear": (
        "llama",
        {"rope_type": "linear", "factor": 3.0},
        {"rope.scaling.type": "linear", "rope.scaling.factor": 3.0},
    ),
    "qwen2_yarn": (
        "qwen2",
        {
            "rope_type": "yarn",
            "factor": 4.0,
            "original_max_position_embeddings": 16,
            "beta_fast": 8.0,
            "attention_factor": 1.25,
        },
        {
            "rope.scaling.type": "yarn",
            "rope.scaling.factor": 4.0,
            "rope.scaling.original_context_length": 16,
            "rope.scaling.yarn_beta_fast": 8.0,
            "rope.scaling.yarn_attn_factor": 1.25,
        },
    ),
}


def _logits(model: ckir.CompiledModel, tokens: np.ndarray) -> np.ndarray:
    model.reset()
    return model.prefill(tokens)


def _gguf_against_hf(hf_dir: Path, path: Path, build: Path, tokens: np.ndarray):
    """Compile the GGUF file ``path``; its prefill logits must be within 1e-4 of the
    transformers model of ``hf_dir``.  Returns (HF logits, largest |logit|, graph.mlir)."""
    hf = transformers.AutoModelForCausalLM.from_pretrained(hf_dir, dtype=torch.float32)
    with torch.no_grad():
        ref = hf(torch.tensor(tokens[None, :])).logits[0].numpy()
    model = ckir.compile(path, build, max_context=48)
    ours = _logits(model, tokens)
    model.close()
    scale = float(np.abs(ref).max())
    assert float(np.abs(ours - ref).max()) <= 1e-4 * scale
    return ref, scale, (build / "graph.mlir").read_text()


@pytest.mark.parametrize("key", list(CASES))
def test_gguf_rope_scaling_matches_transformers(key: str, tmp_path: Path) -> None:
    arch, rope, meta = CASES[key]
    hf_dir = make_tiny_model(
        arch, tmp_path / "hf", seed=3, vocab_size=131, rope_parameters=rope, **_SIZES
    )
    path = gguf_from_hf(
        hf_dir, tmp_path / "m.gguf", metadata={f"{arch}.{k}": v for k, v in meta.items()}
    )
    tokens = np.random.default_rng(4).integers(0, 131, size=40)
    ref, scale, graph = _gguf_against_hf(hf_dir, path, tmp_path / "b", tokens)
    assert f'rope_type = "{rope["rope_type"]}"' in graph

    # the same file without the scaling keys is plain RoPE: different logits
    plain = gguf_from_hf(hf_dir, tmp_path / "p.gguf")
    model = ckir.compile(plain, tmp_path / "bp", max_context=48)
    other = _logits(model, tokens)
    model.close()
    assert float(np.abs(other - ref).max()) > 1e-3 * scale


def test_gguf_unsupported_scaling_type_is_refused(tmp_path: Path) -> None:
    hf_dir = make_tiny_model("llama", tmp_path / "hf", seed=3, vocab_size=131, **_SIZES)
    path = gguf_from_hf(
        hf_dir,
        tmp_path / "m.gguf",
        metadata={"llama.rope.scaling.type": "longrope", "llama.rope.scaling.factor": 2.0},
    )
    with pytest.raises(CkirError) as err:
        ckir.compile(path, tmp_path / "b", max_context=16)
    msg = str(err.value)
    assert "m.gguf" in msg and "GGUF 'llama.rope.scaling.type'" in msg and "'longrope'" in msg


def test_gguf_none_scaling_type_is_plain_rope(tmp_path: Path) -> None:
    hf_dir = make_tiny_model("llama", tmp_path / "hf", seed=3, vocab_size=131, **_SIZES)
    path = gguf_from_hf(hf_dir, tmp_path / "m.gguf", metadata={"llama.rope.scaling.type": "none"})
    model = ckir.compile(path, tmp_path / "b", max_context=16)
    model.close()
    assert "rope_type" not in (tmp_path / "b" / "graph.mlir").read_text()


def _converter_factors(theta: float, dim: int, factor: float, low: float, high: float, ctx: int):
    """The rope_freqs.weight llama.cpp's converter writes for a llama3 rope config: per
    pair, 1 below the band, factor above it, the smoothed divisor inside."""
    inv = 1.0 / (theta ** (np.arange(0, dim, 2, dtype=np.float32) / dim))
    out = []
    for f in inv:
        wavelen = 2 * np.pi / f
        if wavelen < ctx / high:
            out.append(1.0)
        elif wavelen > ctx / low:
            out.append(factor)
        else:
            smooth = (ctx / wavelen - low) / (high - low)
            out.append(1 / ((1 - smooth) / factor + smooth))
    return np.array(out, np.float32)


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_gguf_rope_freqs_band_matches_transformers(arch: str, tmp_path: Path) -> None:
    """llama3 scaling stored as rope_freqs.weight (no scaling metadata): the band is
    recovered (low_freq_factor 1 and the equivalent high / original context) and the
    logits are transformers' for the HF model the file came from."""
    theta, factor, low, high, ctx = 10000.0, 5.0, 2.0, 9.0, 1000
    sizes = dict(hidden_size=48, num_attention_heads=2, num_key_value_heads=1, intermediate_size=61)
    rope = {
        "rope_type": "llama3",
        "rope_theta": theta,
        "factor": factor,
        "low_freq_factor": low,
        "high_freq_factor": high,
        "original_max_position_embeddings": ctx,
    }
    hf_dir = make_tiny_model(
        arch, tmp_path / "hf", seed=3, vocab_size=131, rope_parameters=rope, **sizes
    )
    factors = _converter_factors(theta, 24, factor, low, high, ctx)
    assert ((factors > 1) & (factors < factor)).sum() >= 2  # pairs inside the band
    path = gguf_from_hf(hf_dir, tmp_path / "m.gguf", extra={"rope_freqs.weight": (factors, "F32")})
    tokens = np.random.default_rng(4).integers(0, 131, size=40)
    ref, scale, graph = _gguf_against_hf(hf_dir, path, tmp_path / "b", tokens)
    assert 'rope_type = "wavelength", factor = 5.000000e+00 : f64, low_freq_factor = 1.0' in graph
    assert "original_context = 500 : i64" in graph


def test_gguf_rope_freqs_of_ones_is_plain_rope(tmp_path: Path) -> None:
    hf_dir = make_tiny_model("llama", tmp_path / "hf", seed=3, vocab_size=131, **_SIZES)
    extra = {"rope_freqs.weight": (np.ones(6, np.float32), "F32")}
    path = gguf_from_hf(hf_dir, tmp_path / "m.gguf", extra=extra)
    model = ckir.compile(path, tmp_path / "b", max_context=16)
    model.close()
    assert "rope_type" not in (tmp_path / "b" / "graph.mlir").read_text()
