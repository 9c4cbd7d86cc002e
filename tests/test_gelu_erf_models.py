"""Templates whose MLP is transformers' exact (erf) GELU, ``hidden_act: gelu``.

GPT-2 (``activation_function: gelu``) and phi (``hidden_act: gelu``) import with
``graph.gelu {approximate = "none"}``, lower to the ``gelu_erf_f32`` kernels
(prefill, decode) and ``gelu_erf_bwd_f32`` (backward), and match transformers
on random tiny models of odd sizes: prefill logits, decode logits with the KV
cache, and (GPT-2) every training gradient, within the parity suites' 1e-4.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from test_parity import assert_close, assert_decode_matches  # noqa: E402
from test_templates_phi3_starcoder2 import CASES, hf_model, save_random_model  # noqa: E402
from test_training import assert_gradients_match, compile_trainable  # noqa: E402
from test_training import hf_model as hf_train_model  # noqa: E402

import ckir  # noqa: E402
from ckir.tools.zoo import make_tiny_model  # noqa: E402

GPT2 = dict(n_embd=40, n_head=5, n_inner=57, vocab_size=263, activation_function="gelu")


@pytest.fixture(scope="module")
def gpt2_erf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_model("gpt2", tmp_path_factory.mktemp("gelu_erf") / "gpt2", seed=13, **GPT2)


@pytest.fixture(scope="module")
def phi_erf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    config_cls, model_cls, kwargs = CASES["phi_gqa"]
    config = getattr(transformers, config_cls)(**{**kwargs, "hidden_act": "gelu"})
    return save_random_model(config, model_cls, tmp_path_factory.mktemp("gelu_erf") / "phi", 9)


def kernel_calls(build: Path) -> str:
    """The generated C (it names every kernel it calls)."""
    return (build / "model.c").read_text()


@pytest.mark.parametrize("which", ["gpt2", "phi"])
def test_erf_gelu_prefill_and_decode_match_hf(which: str, gpt2_erf, phi_erf, tmp_path) -> None:
    src = gpt2_erf if which == "gpt2" else phi_erf
    model = ckir.compile(src, tmp_path / "build", max_context=32)
    try:
        text = (tmp_path / "build" / "graph.mlir").read_text()
        assert 'approximate = "none"' in text and 'approximate = "tanh"' not in text
        lowered = kernel_calls(tmp_path / "build")
        assert "gelu_erf_f32" in lowered and "gelu_tanh_f32" not in lowered
        rng = np.random.default_rng(4)
        tokens = rng.integers(0, model.vocab_size, size=11)
        model.reset()
        ours = model.prefill(tokens)
        hf = hf_model(src)
        with torch.no_grad():
            ref = hf(torch.tensor(tokens[None, :])).logits[0].numpy()
        assert_close(ours, ref, f"{which} (erf GELU) prefill")
        prompt, steps = tokens[:5], rng.integers(0, model.vocab_size, size=6)
        assert_decode_matches(model, hf, prompt, steps, f"{which} (erf GELU)")
    finally:
        model.close()


def test_erf_gelu_gradients_match_autograd(gpt2_erf, tmp_path: Path) -> None:
    model = compile_trainable(gpt2_erf, tmp_path / "build")
    try:
        lowered = kernel_calls(tmp_path / "build")
        assert "gelu_erf_bwd_f32" in lowered and "gelu_tanh_bwd_f32" not in lowered
        assert_gradients_match("gpt2 (erf GELU)", model, hf_train_model(gpt2_erf), tmp_path, 13)
    finally:
        model.close()
