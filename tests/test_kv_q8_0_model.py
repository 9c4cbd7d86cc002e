"""A Q8_0 KV cache (``--kv-dtype q8_0``) on a SmolLM2-shaped random model, end to end.

The model has SmolLM2-135M's layer shape (hidden 576, 9 query / 3 KV heads of
head_dim 64, intermediate 1536, tied embeddings) with 4 layers and a vocabulary
of 1031, random weights (tools/zoo.py).  Two builds of it, f32 KV and Q8_0 KV,
against transformers on the same weights, prompt of 40 tokens then 24 decode
steps (teacher-forced):

* the f32-KV build is the usual parity (<= 1e-4 of max |logit|);
* the Q8_0-KV build against transformers with its K and V rounded through
  ckir.quant's Q8_0 (an attention function registered with transformers that
  quantizes the keys and values after rope): what is left is summation order and
  the values that land on the other side of a rounding boundary; measured
  4.5e-4 (prefill) and 5.1e-4 (decode) of max |logit|, asserted <= 2e-3;
* the Q8_0-KV build against plain transformers (and the f32-KV build): the
  quantization error itself, measured 2.0 % (prefill) and 2.5 % (decode) of max
  |logit|, top-1 equal at 21 of 24 decode steps; asserted between 1e-3 (it
  really is quantized) and 0.08.  docs/quantization.md has the numbers.

Also: the KV bytes of ``layout.totals`` (34 / 128 of f32), and the one-line
refusals (training builds, an unknown dtype).  head_dims with a tail and the
attention_ext templates: tests/test_kv_q8_0_ext.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

import ckir  # noqa: E402
from ckir import quant  # noqa: E402
from ckir.compiler import CompileOptions  # noqa: E402
from ckir.errors import CkirError  # noqa: E402
from ckir.tools.zoo import make_tiny_model  # noqa: E402

SHAPE = dict(
    hidden_size=576,
    num_attention_heads=9,
    num_key_value_heads=3,
    intermediate_size=1536,
    num_hidden_layers=4,
    vocab_size=1031,
    max_position_embeddings=256,
    tie_word_embeddings=True,
)
MAX_CONTEXT = 96
PROMPT, STEPS = 40, 24
F32_REL = 1e-4
ORACLE_REL = 2e-3
QUANT_REL_MIN, QUANT_REL_MAX = 1e-3, 0.08


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_model(
        "llama", tmp_path_factory.mktemp("kvq8") / "m", seed=3, std=0.05, **SHAPE
    )


@pytest.fixture(scope="module")
def builds(checkpoint: Path, tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("kvq8_builds")
    models = {
        kv: ckir.compile(checkpoint, root / kv, max_context=MAX_CONTEXT, kv_dtype=kv)
        for kv in ("f32", "q8_0")
    }
    yield models
    for m in models.values():
        m.close()


def _q8_round(x: torch.Tensor) -> torch.Tensor:
    """x with its last dim (head_dim) zero-padded to whole blocks of 32, rounded through
    Q8_0 and cut back: what kv_store_q8_0 stores and attention_q8_0 reads."""
    a = x.detach().float().numpy()
    d = a.shape[-1]
    dp = -(-d // 32) * 32
    flat = np.zeros((a.size // d, dp), np.float32)
    flat[:, :d] = a.reshape(-1, d)
    back = quant.dequantize(quant.quantize_q8_0(flat), "q8_0").reshape(-1, dp)[:, :d]
    return torch.from_numpy(np.ascontiguousarray(back.reshape(a.shape)))


def _register_q8_attention() -> str:
    from transformers import AttentionInterface
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    def q8_kv_attention(module, query, key, value, *args, **kwargs):  # type: ignore[no-untyped-def]
        return sdpa_attention_forward(
            module, query, _q8_round(key), _q8_round(value), *args, **kwargs
        )

    AttentionInterface.register("ckir_q8_kv", q8_kv_attention)
    return "ckir_q8_kv"


def _reference(checkpoint: Path, tokens: np.ndarray, attn: str | None = None) -> np.ndarray:
    kw = {"attn_implementation": attn} if attn else {}
    hf = transformers.AutoModelForCausalLM.from_pretrained(checkpoint, dtype=torch.float32, **kw)
    hf.eval()
    with torch.no_grad():
        return hf(torch.tensor(tokens[None, :])).logits[0].numpy()


def _run(
    model: ckir.CompiledModel, tokens: np.ndarray, prompt: int = PROMPT
) -> tuple[np.ndarray, np.ndarray]:
    """(prefill logits of the first ``prompt`` tokens, decode logits of each following one)."""
    model.reset()
    pre = model.prefill(tokens[:prompt])
    dec = np.stack([model.decode(int(t)) for t in tokens[prompt:]])
    return pre, dec


def _rel(ours: np.ndarray, ref: np.ndarray) -> float:
    return float(np.abs(ours - ref).max() / np.abs(ref).max())


@pytest.fixture(scope="module")
def tokens() -> np.ndarray:
    return np.random.default_rng(0).integers(0, SHAPE["vocab_size"], PROMPT + STEPS)


def test_kv_bytes_in_layout_totals(builds) -> None:
    totals = {
        kv: json.loads((Path(m.build_dir) / "layout.json").read_text())["totals"]
        for kv, m in builds.items()
    }
    # L layers x (k, v) x max_context rows x KV*D values
    values = SHAPE["num_hidden_layers"] * 2 * MAX_CONTEXT * 3 * 64
    assert totals["f32"]["kv_cache"] == values * 4
    assert totals["q8_0"]["kv_cache"] == values // 32 * 34
    assert totals["q8_0"]["kv_cache"] * 2 < totals["f32"]["kv_cache"]
    for role in ("weight", "io"):
        assert totals["q8_0"][role] == totals["f32"][role], role
    # the f32 build's k / v rows are views of its cache (--plan-views' KV append); a
    # Q8_0 cache is written by a quantizing kv_store, so those slots stay activations
    assert totals["q8_0"]["saved.views"] == 0
    assert (
        totals["q8_0"]["activation"] == totals["f32"]["activation"] + totals["f32"]["saved.views"]
    )


def test_f32_kv_matches_transformers(checkpoint, builds, tokens) -> None:
    ref = _reference(checkpoint, tokens)
    pre, dec = _run(builds["f32"], tokens)
    assert _rel(pre, ref[:PROMPT]) <= F32_REL
    assert _rel(dec, ref[PROMPT:]) <= F32_REL


def test_q8_kv_matches_transformers_with_q8_keys_and_values(checkpoint, builds, tokens) -> None:
    ref = _reference(checkpoint, tokens, _register_q8_attention())
    pre, dec = _run(builds["q8_0"], tokens)
    assert _rel(pre, ref[:PROMPT]) <= ORACLE_REL
    assert _rel(dec, ref[PROMPT:]) <= ORACLE_REL


def test_q8_kv_error_against_fp32(checkpoint, builds, tokens) -> None:
    ref = _reference(checkpoint, tokens)
    pre, dec = _run(builds["q8_0"], tokens)
    _, dec_f32 = _run(builds["f32"], tokens)
    for what, err in (
        ("prefill vs transformers", _rel(pre, ref[:PROMPT])),
        ("decode vs transformers", _rel(dec, ref[PROMPT:])),
        ("decode vs the f32-KV build", _rel(dec, dec_f32)),
    ):
        assert QUANT_REL_MIN < err <= QUANT_REL_MAX, f"{what}: {err:.3g}"
    assert (dec.argmax(1) == ref[PROMPT:].argmax(1)).mean() >= 0.7


def test_refusals() -> None:
    with pytest.raises(CkirError, match="training .* has no KV cache"):
        CompileOptions(modes=("prefill", "backward"), kv_dtype="q8_0")
    with pytest.raises(CkirError, match="--kv-dtype: unknown dtype 'q4_0'"):
        CompileOptions(kv_dtype="q4_0")
    with pytest.raises(TypeError, match="kv_dtype"):
        CompileOptions(kv_dtype=8)  # type: ignore[arg-type]


def test_qconfig_kv_8_builds_the_q8_0_cache(checkpoint, builds, tokens, tmp_path: Path) -> None:
    """A QConfig's ``kv: 8`` (the tensor table's kv qbits) is the Q8_0 cache: the same
    KV bytes and logits as ``kv_dtype="q8_0"``; kv: 8 on one layer only is refused."""
    qconfig = tmp_path / "q.yaml"
    qconfig.write_text("kv: 8\n")
    model = ckir.compile(checkpoint, tmp_path / "b", max_context=MAX_CONTEXT, qconfig=qconfig)
    try:
        totals = json.loads((Path(model.build_dir) / "layout.json").read_text())["totals"]
        want = json.loads((Path(builds["q8_0"].build_dir) / "layout.json").read_text())["totals"]
        assert totals["kv_cache"] == want["kv_cache"]
        for ours, ref in zip(_run(model, tokens), _run(builds["q8_0"], tokens), strict=True):
            np.testing.assert_array_equal(ours, ref)
    finally:
        model.close()
    qconfig.write_text("layers:\n  0: {kv: 8}\n")
    with pytest.raises(CkirError, match="KV cache is asked for 8 and 32 bits on different"):
        ckir.compile(checkpoint, tmp_path / "c", max_context=MAX_CONTEXT, qconfig=qconfig)
