"""Parity of generated C with HF transformers (PyTorch CPU) on tiny random checkpoints.

Oracles: HF forward for prefill logits; HF with its KV cache for decode steps.
Tolerance (fp32): max |ckir - hf| <= 1e-4 * max |hf logit|.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import ckir  # noqa: E402
from ckir.errors import CkirError  # noqa: E402
from ckir.tools.zoo import make_tiny_model  # noqa: E402

ARCHS = {
    "llama": {"arch": "llama"},
    "mistral": {"arch": "mistral"},
    "qwen2_tied": {"arch": "qwen2", "tied": True},
    "qwen2_untied": {"arch": "qwen2", "tied": False},
    "gpt2": {"arch": "gpt2"},
    "qwen3_tied": {"arch": "qwen3", "tied": True},
    "qwen3_bias_untied": {"arch": "qwen3", "tied": False, "attention_bias": True},
}
MAX_CONTEXT = 64
REL_TOL = 1e-4


@pytest.fixture(scope="session")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("parity_models")
    out: dict[str, Path] = {}
    for key, spec in ARCHS.items():
        spec = dict(spec)
        arch = spec.pop("arch")
        out[key] = make_tiny_model(arch, root / key, seed=7, **spec)
    return out


def compiled(
    checkpoints: dict[str, Path], root: Path, max_context: int, **options: Any
) -> Iterator[dict[str, ckir.CompiledModel]]:
    """A fixture body: every checkpoint compiled under ``root`` (``ckir.compile`` options),
    by key, each closed when the fixture ends."""
    models = {
        key: ckir.compile(path, root / key, max_context=max_context, **options)
        for key, path in checkpoints.items()
    }
    yield models
    for m in models.values():
        m.close()


@pytest.fixture(scope="session")
def builds(checkpoints: dict[str, Path], tmp_path_factory: pytest.TempPathFactory):
    yield from compiled(checkpoints, tmp_path_factory.mktemp("parity_builds"), MAX_CONTEXT)


def hf_model(path: Path):
    model = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    model.eval()
    return model


def assert_close(ours: np.ndarray, ref: np.ndarray, what: str) -> None:
    scale = float(np.abs(ref).max())
    err = float(np.abs(ours - ref).max())
    assert err <= REL_TOL * scale, f"{what}: max abs error {err:.3g} > {REL_TOL} * {scale:.3g}"


def assert_prefill_matches(
    model: ckir.CompiledModel, hf, tokens: np.ndarray, what: str
) -> None:
    """Prefill ``tokens`` from an empty cache; its logits (every row) against ``hf``'s
    (a transformers model) on the same tokens."""
    model.reset()
    ours = model.prefill(tokens)
    with torch.no_grad():
        ref = hf(torch.tensor(tokens[None, :])).logits[0].numpy()
    assert ours.shape == ref.shape
    assert_close(ours, ref, f"{what} prefill")


@pytest.mark.parametrize("key", list(ARCHS))
def test_prefill_matches_hf(key: str, checkpoints, builds) -> None:
    model = builds[key]
    tokens = np.random.default_rng(1).integers(0, model.vocab_size, size=11)
    assert_prefill_matches(model, hf_model(checkpoints[key]), tokens, key)


def assert_decode_matches(
    model: ckir.CompiledModel, hf, prompt: np.ndarray, steps: np.ndarray, what: str
) -> None:
    """Prefill ``prompt``, then decode ``steps`` one token at a time, each step's logits
    against ``hf``'s (a transformers model) with its KV cache."""
    model.reset()
    model.prefill(prompt)
    with torch.no_grad():
        out = hf(torch.tensor(prompt[None, :]), use_cache=True)
        cache = out.past_key_values
        for i, tok in enumerate(steps):
            ours = model.decode(int(tok))
            out = hf(torch.tensor([[int(tok)]]), past_key_values=cache, use_cache=True)
            cache = out.past_key_values
            assert_close(ours, out.logits[0, -1].numpy(), f"{what} decode step {i}")
    assert model.position == len(prompt) + len(steps)


@pytest.mark.parametrize("key", list(ARCHS))
def test_decode_with_kv_cache_matches_hf(key: str, checkpoints, builds) -> None:
    rng = np.random.default_rng(2)
    model = builds[key]
    prompt = rng.integers(0, model.vocab_size, size=5)
    steps = rng.integers(0, model.vocab_size, size=8)
    assert_decode_matches(model, hf_model(checkpoints[key]), prompt, steps, key)


@pytest.mark.parametrize("key", ["llama", "gpt2"])
def test_decode_from_empty_equals_prefill_rows(key: str, builds) -> None:
    rng = np.random.default_rng(3)
    model = builds[key]
    tokens = rng.integers(0, model.vocab_size, size=9)
    model.reset()
    full = model.prefill(tokens)
    model.reset()
    rows = np.stack([model.decode(int(t)) for t in tokens])
    assert_close(rows, full, f"{key} decode-vs-prefill")


@pytest.mark.parametrize("key", list(ARCHS))
def test_greedy_32_tokens_match_hf(key: str, checkpoints, builds) -> None:
    model = builds[key]
    prompt = [3, 1, 4, 1, 5]
    model.reset()
    logits = model.prefill(prompt)
    ours = [int(logits[-1].argmax())]
    for _ in range(31):
        ours.append(int(model.decode(ours[-1]).argmax()))
    hf = hf_model(checkpoints[key])
    with torch.no_grad():
        gen = hf.generate(
            torch.tensor([prompt]),
            max_new_tokens=32,
            do_sample=False,
            pad_token_id=0,
            eos_token_id=None,
        )
    assert ours == gen[0, len(prompt) :].tolist()


def test_prefill_after_prefill_continues_the_cache(builds) -> None:
    model = builds["llama"]
    tokens = np.arange(1, 13)
    model.reset()
    whole = model.prefill(tokens)
    model.reset()
    model.prefill(tokens[:5])
    rest = model.prefill(tokens[5:])
    assert_close(rest, whole[5:], "chunked prefill")


def test_logits_arrays_are_reused_only_when_let_go(builds, monkeypatch) -> None:
    """A prefill's [T, V] array is reused by the next call only when nothing refers to
    it any more; an array (or a view of it) still held keeps its values."""
    model = builds["llama"]
    # arrays of 4 rows and more are reused; decode's single row is not
    monkeypatch.setattr(ckir.model.inference, "REUSE_MIN_BYTES", 4 * 4 * model.vocab_size)
    a, b = np.arange(1, 9), np.arange(20, 28)
    model.reset()
    first = model.prefill(a)
    want = first.copy()
    model.reset()
    second = model.prefill(b)  # `first` is held: a new array
    assert not np.shares_memory(first, second)
    np.testing.assert_array_equal(first, want)
    view, addr = second[3:], second.ctypes.data
    want_b = second.copy()
    del second
    model.reset()
    third = model.prefill(a)  # a view of `second` is held: a new array again
    assert third.ctypes.data != addr and not np.shares_memory(third, view)
    np.testing.assert_array_equal(view, want_b[3:])
    np.testing.assert_array_equal(third, want)
    kept = weakref.ref(third)  # (an address alone could come back from malloc)
    del third, view
    model.reset()
    fourth = model.prefill(b)  # nothing refers to `third`: the model reuses it
    if ckir.model.inference.REUSE:
        assert fourth is kept()
    np.testing.assert_array_equal(fourth, want_b)
    model.reset()
    short = model.prefill(a[:5])  # another shape: a new array
    assert short.shape == (5, model.vocab_size) and not np.shares_memory(short, fourth)
    assert_close(short, want[:5], "a shorter prefill")  # M differs: another GEMM path
    step = model.decode(3)  # decode's row: a view of a [1, V] array, never `short`'s
    assert step.shape == (model.vocab_size,) and not np.shares_memory(step, short)
    kept = weakref.ref(short)
    del short, step
    model.reset()
    again = model.prefill(a[:5])  # the decode step left the spare in place: reused
    if ckir.model.inference.REUSE:
        assert again is kept()
    assert_close(again, want[:5], "a shorter prefill")


# -- bad input ----------------------------------------------------------------------
def test_token_out_of_vocab(builds) -> None:
    model = builds["llama"]
    model.reset()
    with pytest.raises(CkirError, match="outside the vocabulary"):
        model.prefill([1, model.vocab_size])
    with pytest.raises(CkirError, match="outside the vocabulary"):
        model.decode(-1)


def test_context_overflow(builds) -> None:
    model = builds["llama"]
    model.reset()
    with pytest.raises(CkirError, match="does not fit"):
        model.prefill(np.ones(MAX_CONTEXT + 1, dtype=np.int64))
    model.reset()
    model.prefill(np.ones(MAX_CONTEXT, dtype=np.int64))
    with pytest.raises(CkirError, match="does not fit"):
        model.decode(1)
    model.reset()
    model.decode(1)  # usable again after reset


def test_weights_from_another_layout_are_refused(checkpoints, builds, tmp_path) -> None:
    from ckir.compiler import CompileOptions, compile_model

    other = tmp_path / "other"
    # no canaries: the weights arena has other offsets (max-context alone would not change it)
    compile_model(checkpoints["llama"], other, CompileOptions(max_context=32, canaries=False))
    build = builds["llama"].build_dir
    import shutil

    mixed = tmp_path / "mixed"
    shutil.copytree(build, mixed)
    shutil.copy(other / "weights.bin", mixed / "weights.bin")
    # refused by the build fingerprint (program, plan, weights layout), naming both
    with pytest.raises(CkirError, match="written for build fingerprint 0x[0-9a-f]{16}, but"):
        ckir.load(mixed)


def test_arenas_start_on_a_huge_page(builds) -> None:
    """ckir_open puts both arenas on 2 MiB boundaries (architecture decision 22)."""
    import ctypes

    model = builds["llama"]
    for index in (0, 1):
        address = ctypes.cast(model.arena(index), ctypes.c_void_p).value
        assert address is not None and address % (2 << 20) == 0, index


def test_truncated_weights_are_refused(builds, tmp_path) -> None:
    import shutil

    short = tmp_path / "short"
    shutil.copytree(builds["llama"].build_dir, short)
    data = (short / "weights.bin").read_bytes()
    (short / "weights.bin").write_bytes(data[:-4])
    with pytest.raises(CkirError, match="weights.bin"):
        ckir.load(short)


def test_incomplete_build_folder(builds, tmp_path) -> None:
    import shutil

    broken = tmp_path / "broken"
    shutil.copytree(builds["gpt2"].build_dir, broken)
    (broken / "weights.bin").unlink()
    with pytest.raises(CkirError, match="missing weights.bin"):
        ckir.load(broken)


def test_compile_is_deterministic(checkpoints, tmp_path) -> None:
    a = tmp_path / "a"
    b = tmp_path / "b"
    from ckir.compiler import CompileOptions, compile_model

    for out in (a, b):
        compile_model(checkpoints["qwen2_tied"], out, CompileOptions(max_context=32))
    names = sorted(p.name for p in a.iterdir())
    assert names == sorted(p.name for p in b.iterdir())
    for name in names:
        if name in ("libmodel.so",):
            continue
        assert (a / name).read_bytes() == (b / name).read_bytes(), name


def test_debug_build_names_the_violated_slot(checkpoints, tmp_path) -> None:
    model = ckir.compile(checkpoints["llama"], tmp_path / "dbg", max_context=16, debug=True)
    model.prefill([1, 2, 3])
    assert model.check_canaries() is None
    slots = model.slots()
    # pick a state-arena activation slot and scribble over the canary right after it
    name, (arena, offset, size, canary) = next(
        (n, s) for n, s in slots.items() if s[0] == 1 and s[3] >= 0 and ".layers.0." in n
    )
    base = model.arena(1)
    base[canary] = base[canary] ^ 0xFF
    assert model.check_canaries() == name
    with pytest.raises(CkirError, match=name.replace(".", r"\.")):
        model.reset()
        model.prefill([1, 2])
    model.close()
