"""Training (``--lower-backward``) against PyTorch autograd on the transformers model.

Oracles, fp32, on random tiny configs with odd sizes for every template:

* one backward: the loss within 1e-5 and the gradient of every weight within
  1e-4 of the largest entry of PyTorch's (per tensor; for a tensor whose
  gradient is zero in exact arithmetic, of 1e-4 x the model's largest
  gradient entry), on the same tokens and targets.  PyTorch's gradients are
  mapped into ckir's layout by the compiler's own weight reader (slices,
  transposes of packed GPT-2 tensors), so tied and packed weights are
  compared as ckir stores them;
* 20 AdamW steps (global-norm clipping at 1.0, weight decay 0.01) on the same
  batches: the loss of every step within 1e-3 relative of ``torch.optim.AdamW``'s.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import ckir  # noqa: E402
from ckir.backend.weights import SafetensorsSource, weight_instances  # noqa: E402
from ckir.dialects import graph as g  # noqa: E402
from ckir.dialects.dims import evaluate_dim  # noqa: E402
from ckir.errors import CkirError  # noqa: E402
from ckir.ir_io import load_module  # noqa: E402
from ckir.tools.zoo import make_tiny_model  # noqa: E402

#: odd sizes: GQA, MQA, head dims that are not powers of two, vocabularies of primes
ARCHS: dict[str, dict[str, object]] = {
    "llama_gqa": dict(
        arch="llama",
        hidden_size=48,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=100,
        vocab_size=257,
    ),
    "mistral": dict(
        arch="mistral",
        hidden_size=36,
        num_attention_heads=6,
        num_key_value_heads=3,
        intermediate_size=61,
        vocab_size=151,
    ),
    "qwen2_tied_mqa": dict(
        arch="qwen2",
        tied=True,
        hidden_size=40,
        num_attention_heads=5,
        num_key_value_heads=1,
        intermediate_size=77,
        vocab_size=211,
    ),
    "qwen2_untied": dict(
        arch="qwen2",
        tied=False,
        hidden_size=32,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=45,
        vocab_size=199,
    ),
    "gpt2": dict(arch="gpt2", n_embd=40, n_head=5, vocab_size=263),
    # per-head q/k norms; head_dim 14 of its own (hidden / heads is 12)
    "qwen3_gqa": dict(
        arch="qwen3",
        tied=False,
        hidden_size=36,
        num_attention_heads=3,
        num_key_value_heads=1,
        head_dim=14,
        intermediate_size=53,
        vocab_size=181,
    ),
}
MAX_CONTEXT = 32
GRAD_TOL = 1e-4
#: absolute error floor, in fp32 ulps of the model's largest gradient: a gradient that is
#: zero in exact arithmetic is a sum of rounding errors of terms of that size on both sides
NOISE_ULPS = 8
LOSS_TOL = 1e-5
STEPS_TOL = 1e-3
HYPER = dict(lr=3e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
MAX_GRAD_NORM = 1.0


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("train_models")
    out: dict[str, Path] = {}
    for key, spec in ARCHS.items():
        spec = dict(spec)
        arch = str(spec.pop("arch"))
        out[key] = make_tiny_model(arch, root / key, seed=11, **spec)  # type: ignore[arg-type]
    return out


def compile_trainable(src: Path, out: Path) -> ckir.CompiledModel:
    return ckir.compile(src, out, modes=("prefill", "backward"), max_context=MAX_CONTEXT)


def hf_model(path: Path):
    model = transformers.AutoModelForCausalLM.from_pretrained(
        path, dtype=torch.float32, attn_implementation="eager"
    )
    model.train()  # no dropout in the tiny configs; train() keeps autograd's view honest
    return model


def hf_loss(model, tokens: np.ndarray, targets: np.ndarray):
    logits = model(torch.tensor(tokens[None, :].astype(np.int64))).logits[0]
    return torch.nn.functional.cross_entropy(logits, torch.tensor(targets.astype(np.int64)))


def to_ckir_layout(
    build: Path, hf_grads: dict[str, np.ndarray], tmp: Path
) -> dict[str, np.ndarray]:
    """PyTorch's gradients (HF names and shapes) in ckir's weights, read by ckir's own
    weight reader from a checkpoint that holds them."""
    from safetensors.numpy import save_file

    tmp.mkdir(parents=True, exist_ok=True)
    save_file(hf_grads, str(tmp / "model.safetensors"))
    module = load_module(build / "graph.mlir")
    model = next(op for op in module.ops if isinstance(op, g.ModelOp))
    symbols = model.symbol_values()
    source = SafetensorsSource(tmp)
    out: dict[str, np.ndarray] = {}
    for name, (decl, layer) in weight_instances(model).items():
        if decl.tied_to_name is not None:
            continue
        shape = [evaluate_dim(d, symbols) for d in decl.shape_dims]
        raw = source.bytes_for(decl, layer, symbols, "f32")
        out[name] = raw.view("<f4").reshape(shape)
    return out


@pytest.mark.parametrize("key", list(ARCHS))
def test_gradients_match_autograd(key: str, checkpoints, tmp_path: Path) -> None:
    src = checkpoints[key]
    model = compile_trainable(src, tmp_path / "build")
    assert_gradients_match(key, model, hf_model(src), tmp_path, size=13)
    model.close()


def assert_gradients_match(
    key: str,
    model: ckir.CompiledModel,
    ref_model,
    tmp_path: Path,
    size: int,
    build: Path | None = None,
) -> None:
    """One backward of ``model`` (built in ``build``, default ``tmp_path / "build"``)
    against PyTorch autograd on ``ref_model`` (transformers, train mode): the loss, and
    the gradient of every weight in ckir's layout (the module docstring's tolerances)."""
    rng = np.random.default_rng(3)
    tokens = rng.integers(0, model.vocab_size, size=size)
    targets = rng.integers(0, model.vocab_size, size=size)
    loss = model.backward(tokens, targets)
    ours = model.gradients()
    ref_loss = hf_loss(ref_model, tokens, targets)
    ref_loss.backward()
    assert abs(loss - ref_loss.item()) <= LOSS_TOL * abs(ref_loss.item()), (loss, ref_loss.item())
    hf_grads = {
        n: p.grad.detach().numpy().copy()
        for n, p in ref_model.named_parameters()
        if p.grad is not None
    }
    ref = to_ckir_layout(build or tmp_path / "build", hf_grads, tmp_path / "grads")
    assert set(ours) == set(ref), sorted(set(ours) ^ set(ref))
    # A gradient that is zero in exact arithmetic (the key bias: softmax ignores a shift
    # of all scores) is rounding noise on both sides: held to the noise floor instead
    # (measured on a Zen 4 host: 3.5e-9 against a largest gradient of 0.30, 0.1 ulp).
    gmax = max(float(np.abs(r).max()) for r in ref.values())
    floor = NOISE_ULPS * float(np.finfo(np.float32).eps) * gmax
    for name, r in ref.items():
        tol = max(GRAD_TOL * float(np.abs(r).max()), floor)
        err = float(np.abs(ours[name] - r).max())
        assert err <= tol, f"{key}: d{name}: max error {err:.3g} > {tol:.3g}"


@pytest.mark.parametrize("key", ["llama_gqa", "qwen2_tied_mqa", "gpt2"])
def test_adamw_steps_match_torch(key: str, checkpoints, tmp_path: Path) -> None:
    src = checkpoints[key]
    model = compile_trainable(src, tmp_path / "build")
    ref_model = hf_model(src)
    opt = torch.optim.AdamW(ref_model.parameters(), **HYPER)  # type: ignore[arg-type]
    rng = np.random.default_rng(5)
    batches = [rng.integers(0, model.vocab_size, size=MAX_CONTEXT + 1) for _ in range(4)]
    for step in range(20):
        seq = batches[step % len(batches)]
        tokens, targets = seq[:-1], seq[1:]
        ours = model.train_step(tokens, targets, lr=HYPER["lr"])
        opt.zero_grad()
        ref = hf_loss(ref_model, tokens, targets)
        ref.backward()
        torch.nn.utils.clip_grad_norm_(ref_model.parameters(), MAX_GRAD_NORM)
        opt.step()
        assert math.isfinite(ours)
        assert abs(ours - ref.item()) <= STEPS_TOL * abs(ref.item()), (step, ours, ref.item())
    assert model.steps == 20
    model.close()


def test_training_bad_input(checkpoints, tmp_path: Path) -> None:
    model = compile_trainable(checkpoints["llama_gqa"], tmp_path / "build")
    v = model.vocab_size
    ok = np.arange(8)
    cases = [
        (lambda: model.backward(ok, ok + v), f"id {v + 7} is outside the vocabulary"),
        (lambda: model.backward(ok, -ok - 1), "id -8 is outside the vocabulary"),
        (lambda: model.backward(ok, ok[:5]), "8 tokens but 5 targets"),
        (
            lambda: model.backward(np.arange(MAX_CONTEXT + 1), np.arange(MAX_CONTEXT + 1)),
            "does not fit",
        ),
        (lambda: model.train_step(ok, ok, lr=0.0), "lr must be a finite number > 0"),
        (lambda: model.train_step(ok, ok, lr=float("nan")), "lr must be a finite number > 0"),
        (lambda: model.optimizer_step(-1.0), "lr must be a finite number > 0"),
    ]
    for call, message in cases:
        with pytest.raises(CkirError, match=message):
            call()
    assert model.steps == 0
    model.close()
    inference = ckir.compile(checkpoints["llama_gqa"], tmp_path / "inf", max_context=MAX_CONTEXT)
    with pytest.raises(CkirError, match="not compiled for training"):
        inference.backward(ok, ok)
    inference.close()
