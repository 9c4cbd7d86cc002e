"""Gradient accumulation over micro-batches, and the I/O manifest the training API reads
its buffers through.

* ``train_step`` over two micro-batches of different lengths equals, after every one
  of 3 AdamW steps, PyTorch autograd + ``torch.optim.AdamW`` (clipping as compiled) on
  the same weights with the loss of one batch holding both: the mean cross-entropy
  over every target (each weight within 1e-5 of its tensor's largest entry).  AdamW's
  ``eps`` is 1e-3 in that build (compiled in) and in torch's: with 1e-8 the first
  update of an entry whose gradient is ~1e-8 (there is one, 8e-9, in ``layers.0.attn.wq``)
  is ``lr * g / (|g| + eps)``, which the gradients' rounding (~1e-6 of the largest
  entry, on both sides) moves by up to ``lr``: that tests Adam's conditioning, not the
  accumulation;
* the gradients ``gradients()`` reads through the manifest's ``grad.`` handles are the
  bytes the runtime's description (``ckir_param_desc.grad_offset``) points at;
* a manifest that lies (offset, shape, dtype, outside its arena, a missing gradient
  handle) is refused naming the handle.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from test_training import (  # noqa: E402
    ARCHS,
    HYPER,
    MAX_CONTEXT,
    MAX_GRAD_NORM,
    hf_model,
    to_ckir_layout,
)

import ckir  # noqa: E402
from ckir.compiler import CompileOptions, compile_model  # noqa: E402
from ckir.errors import CkirError  # noqa: E402
from ckir.model.io_check import check_manifest, span  # noqa: E402
from ckir.passes.lowering.optimizer import AdamWOptions  # noqa: E402
from ckir.tools.zoo import make_tiny_model  # noqa: E402

#: weights after each step: max |ours - torch's| <= this x max |torch's| per tensor
WEIGHT_TOL = 1e-5
#: AdamW's eps in the accumulation test (the module docstring says why not 1e-8)
EPS = 1e-3


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("accumulate")
    spec = dict(ARCHS["llama_gqa"])
    arch = str(spec.pop("arch"))
    src = make_tiny_model(arch, root / "src", seed=11, **spec)  # type: ignore[arg-type]
    options = CompileOptions(
        modes=("prefill", "backward"),
        max_context=MAX_CONTEXT,
        adamw=AdamWOptions(eps=EPS, weight_decay=HYPER["weight_decay"]),
    )
    compile_model(src, root / "build", options, quiet=True)
    model = ckir.load(root / "build")
    yield src, root / "build", model
    model.close()


def torch_sum_loss(ref, seqs: list[np.ndarray]):
    """Sum over every target of every sequence of the cross-entropy, and the count."""
    total, count = 0.0, 0
    for seq in seqs:
        logits = ref(torch.tensor(seq[None, :-1].astype(np.int64))).logits[0]
        target = torch.tensor(seq[1:].astype(np.int64))
        total = total + torch.nn.functional.cross_entropy(logits, target, reduction="sum")
        count += len(seq) - 1
    return total, count


def test_accumulated_steps_match_torch_adamw(trained, tmp_path: Path) -> None:
    src, build, model = trained
    ref = hf_model(src)
    hyper = {**HYPER, "eps": EPS}
    opt = torch.optim.AdamW(ref.parameters(), **hyper)  # type: ignore[arg-type]
    rng = np.random.default_rng(8)
    base = model.steps
    for step in range(3):
        # two micro-batches of different (odd) lengths: the mean is over all 22 targets
        seqs = [rng.integers(0, model.vocab_size, size=n + 1) for n in (13, 9)]
        ours = model.train_step([s[:-1] for s in seqs], [s[1:] for s in seqs], lr=HYPER["lr"])
        opt.zero_grad()
        total, count = torch_sum_loss(ref, seqs)
        loss = total / count
        loss.backward()
        torch.nn.utils.clip_grad_norm_(ref.parameters(), MAX_GRAD_NORM)
        opt.step()
        assert abs(ours - loss.item()) <= 1e-5 * abs(loss.item()), (step, ours, loss.item())
        hf = {n: p.detach().numpy().copy() for n, p in ref.named_parameters()}
        expect = to_ckir_layout(build, hf, tmp_path / f"w{step}")
        got = model.weights()
        assert set(got) == set(expect)
        for name, e in expect.items():
            err = float(np.abs(got[name] - e).max())
            assert err <= WEIGHT_TOL * float(np.abs(e).max()), (step, name, err)
    assert model.steps == base + 3


def test_one_micro_batch_is_a_plain_step(trained) -> None:
    """A list of one micro-batch (or rows of a 2-D array) trains like the sequence itself,
    and two equal micro-batches give the loss of one."""
    _, _, model = trained
    rng = np.random.default_rng(2)
    seq = rng.integers(0, model.vocab_size, size=12)
    loss = model.backward(seq[:-1], seq[1:])
    grads = model.gradients()
    two = np.stack([seq, seq])
    loss_sum, count = model.accumulate([(two[0, :-1], two[0, 1:]), (two[1, :-1], two[1, 1:])])
    assert count == 22 and abs(loss_sum / count - loss) <= 1e-6 * loss
    model.scale_gradients(count)
    for name, g in model.gradients().items():
        np.testing.assert_allclose(g, grads[name], rtol=0, atol=1e-6 * np.abs(grads[name]).max())
    with pytest.raises(CkirError, match="as many target sequences as token sequences"):
        model.train_step(two[:, :-1], [seq[1:]], lr=1e-3)


def test_gradients_are_read_through_the_manifest(trained) -> None:
    _, _, model = trained
    rng = np.random.default_rng(4)
    seq = rng.integers(0, model.vocab_size, size=10)
    model.backward(seq[:-1], seq[1:])
    grads = model.gradients()
    params = model._params()
    assert len(grads) == len(params) == len(model.trained())
    for w, p in zip(model.trained(), params, strict=True):
        assert w.grad.name == "grad." + w.name and w.grad.offset == p.grad_offset
        raw = model._f32(1, p.grad_offset, p.numel, tuple(p.shape[: p.ndim]))
        np.testing.assert_array_equal(grads[w.name], raw)
    # one region from the first gradient to the end of the last; the gaps are not gradients
    arena, offset, size, gaps = span(w.grad for w in model.trained())
    assert arena == 1 and size == sum(w.grad.bytes for w in model.trained()) + sum(
        n for _, n in gaps
    )


def test_a_lying_manifest_is_refused(trained) -> None:
    _, _, model = trained
    name = model.build_dir.name
    good = dict(model.manifest)
    check_manifest(name, model.desc, good)

    def lie(handle: str, **changes: object) -> dict:
        out = dict(good)
        out[handle] = dataclasses.replace(good[handle], **changes)
        return out

    grad = good["grad.layers.0.attn.wq"]
    state = int(model.desc.state_bytes)
    cases = [
        (lie("grad.layers.0.attn.wq", offset=grad.offset + 64), "'grad.layers.0.attn.wq'"),
        (lie("backward.loss", offset=good["backward.loss"].offset + 4), "'backward.loss'.*loss"),
        (lie("prefill.logits", offset=0), "'prefill.logits'.*prefill logits"),
        (
            lie("grad.final_norm", dtype="bf16", bytes=good["grad.final_norm"].bytes // 2),
            "'grad.final_norm': bf16",
        ),
        (lie("adam.m.embed", shape=(7, 3), bytes=84), r"'adam.m.embed'.*\[7, 3\]"),
        (lie("kv.layers.1.v", offset=state - 8), r"'kv.layers.1.v'.*state arena"),
        (lie("embed", bytes=4), r"'embed': 4 bytes for shape"),
    ]
    for manifest, pattern in cases:
        with pytest.raises(CkirError, match="manifest lies about handle " + pattern):
            check_manifest(name, model.desc, manifest)
    missing = {k: v for k, v in good.items() if k != "adam.v.lm_head"}
    with pytest.raises(CkirError, match="no handle 'adam.v.lm_head'"):
        check_manifest(name, model.desc, missing)


def test_max_context_fits_micro_batches(trained) -> None:
    """Each micro-batch is a sequence of its own: each may be as long as the context."""
    _, _, model = trained
    rng = np.random.default_rng(6)
    seqs = [rng.integers(0, model.vocab_size, size=MAX_CONTEXT + 1) for _ in range(3)]
    loss = model.train_step(np.stack(seqs)[:, :-1], np.stack(seqs)[:, 1:], lr=1e-4)
    assert np.isfinite(loss)
