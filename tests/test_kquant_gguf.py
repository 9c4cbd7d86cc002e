"""A Q4_K_M-style GGUF file end to end: compiled by ckir against transformers' GGUF loader.

The file is written from a random-weight tiny Llama (tests/gguf_fixtures.py) the way
llama.cpp lays out a Q4_K_M file: Q4_K matrices, with attn_v and ffn_down of the first
and last layers in Q6_K (so one weight mixes K-quants across layers), the output
matrix in Q6_K; the gate matrices are Q5_K here so that all three K-quants run in one
model.  The K-quant bytes come from ckir's quantizer.  transformers dequantizes the
same file (``gguf.quants.dequantize``) and runs PyTorch fp32: ckir's prefill (fp32 on
the dequantized blocks) must match it to fp32 accuracy, and its decode (activations
quantized per super-block of 256 to int8, Q8_K) within the measured quantization
error documented in docs/quantization.md ("K-quants").
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from gguf_fixtures import gguf_from_hf, tokenizer_metadata
from test_interp import assert_prefill_follows_int8

import ckir
from ckir.frontend.gguf import import_gguf

gguf = pytest.importorskip("gguf")
torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

LAYERS = 3
#: attn_v / ffn_down of the first and last layers in Q6_K, as llama.cpp's Q4_K_M does
QTYPES = {
    "token_embd.weight": "Q4_K",
    "output.weight": "Q6_K",
    **{f"blk.{i}.attn_v.weight": "Q6_K" for i in (0, LAYERS - 1)},
    **{f"blk.{i}.ffn_down.weight": "Q6_K" for i in (0, LAYERS - 1)},
    **{f"blk.{i}.ffn_gate.weight": "Q5_K" for i in range(LAYERS)},
}


def tiny_llama(out: Path, seed: int, layers: int, **overrides: int) -> Path:
    """A random tiny Llama whose matrices have K = 256 or 512 (whole super-blocks)."""
    from ckir.tools.zoo import make_tiny_model

    kwargs = {"hidden_size": 256, "intermediate_size": 512, "num_attention_heads": 4}
    kwargs.update(num_key_value_heads=2, num_hidden_layers=layers, **overrides)
    return make_tiny_model("llama", out, seed=seed, tied=False, **kwargs)


@pytest.fixture(scope="module")
def q4_k_m(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("kq_gguf")
    tok = tokenizer_metadata()
    hf = tiny_llama(root / "hf", 11, LAYERS, vocab_size=len(tok["tokenizer.ggml.tokens"]))
    meta = {**tok, "general.file_type": 15}  # LLAMA_FTYPE_MOSTLY_Q4_K_M
    return gguf_from_hf(hf, root / "tiny-Q4_K_M.gguf", qtype="Q4_K", qtypes=QTYPES, metadata=meta)


def reference_logits(path: Path, tokens: list[int]) -> np.ndarray:
    ref = transformers.AutoModelForCausalLM.from_pretrained(
        path.parent, gguf_file=path.name, dtype=torch.float32
    ).eval()
    with torch.no_grad():
        return ref(torch.tensor([tokens])).logits[0].numpy()


def fp32_prefill_and_decode(
    model: ckir.CompiledModel, path: Path
) -> tuple[list[int], np.ndarray, np.ndarray]:
    """``(tokens, reference logits, decode logits)`` of 12 random tokens: prefill on fp32
    x (int8 prefill off) is asserted within 1e-4 of transformers on the file's
    dequantized weights (summation order only); decode (x quantized as the GEMVs do) is
    returned for the caller's bound."""
    tokens = [int(t) for t in np.random.default_rng(3).integers(0, model.vocab_size, size=12)]
    ref = reference_logits(path, tokens)
    model.int8_prefill = False
    ours = model.prefill(tokens)
    assert float(np.abs(ours - ref).max()) <= 1e-4 * float(np.abs(ref).max())
    model.reset()
    steps = np.stack([model.decode(t) for t in tokens])
    return tokens, ref, steps


def test_q4_k_m_imports_with_layer_dtypes(q4_k_m: Path) -> None:
    module, _ = import_gguf(q4_k_m)
    text = str(module)
    assert '[I, E] q5_k gguf "blk.{i}.ffn_gate.weight"' in text
    assert 'layer_dtypes = "q6_k,q4_k,q6_k"' in text  # attn_v and ffn_down


@pytest.mark.parametrize("panels", [True, False], ids=["panels", "rows"])
def test_q4_k_m_matches_transformers(q4_k_m: Path, tmp_path: Path, panels: bool) -> None:
    """Q4_K, Q5_K and Q6_K in panels (q4_kp / q5_kp / q6_kp, the default; each layer of a
    mixed weight in its own twin) or in rows."""
    model = ckir.compile(q4_k_m, tmp_path / "build", max_context=32, panels=panels)
    layout = (tmp_path / "build" / "layout.mlir").read_text()
    p = "p" if panels else ""
    kernels = (f"gemv_q4_k{p}", f"gemv_q6_k{p}", f"gemv_q5_k{p}", f"gemm_q4_k{p}", f"gemm_q6_k{p}")
    # the layers whose attn_v is Q6_K: q, k and v in one call where their panels mix
    mixed = ("gemv_qkv_q4_kp_v_q6_kp", "gemm_qkv_q4_kp_v_q6_kp") if panels else ()
    for kernel in (*kernels, *mixed, f"embed_q4_k{p}"):
        assert f"@{kernel}" in layout, kernel
    assert f"q6_k{p}>" in layout and f"q4_k{p}>" in layout
    assert panels == ("q4_k>" not in layout and "q5_k>" not in layout and "q6_k>" not in layout)
    tokens, ref, steps = fp32_prefill_and_decode(model, q4_k_m)
    scale = float(np.abs(ref).max())
    rel = float(np.abs(steps - ref).max()) / scale
    model.reset()
    model.int8_prefill = True
    if model.int8_prefill:  # a SIMD runtime: the int8 GEMM computes each row as decode
        int8 = model.prefill(tokens)
        assert float(np.abs(int8 - steps).max()) <= 1e-4 * scale
        assert float(np.abs(int8 - ref).max()) <= 0.08 * scale
    # x quantized to int8 per super-block of 256 (Q8_K, as llama.cpp's K-quant dot
    # products): measured 0.036-0.047 on this model and seed 12 (Q4_0 / Q8_0 files,
    # whose x is quantized per block of 32: 0.024-0.031); docs/quantization.md
    assert rel <= 0.08, rel
    top2 = np.sort(ref, axis=-1)[:, -2:]
    clear = top2[:, 1] - top2[:, 0] > 2 * rel * scale  # no near-tie within the error
    assert np.array_equal(steps.argmax(-1)[clear], ref.argmax(-1)[clear])
    model.close()


def test_q4_k_m_generates(q4_k_m: Path, tmp_path: Path) -> None:
    """``ckir generate`` on the file: compiles, tokenizes and streams text."""
    cmd = [sys.executable, "-m", "ckir.cli", "generate", str(q4_k_m), "--prompt", "the the"]
    out = subprocess.run(
        [*cmd, "--max-tokens", "8", "--max-context", "32", "-q"],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "CKIR_CACHE_DIR": str(tmp_path / "cache")},
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip()


def test_k_not_multiple_of_256_stays_f32(tmp_path: Path) -> None:
    """A --dtype q4_k build of an HF folder stores the matrices whose K is a multiple of 256
    as q4_k and leaves the others f32 (convert-weights); the quantizer refuses such K."""
    hf = tiny_llama(tmp_path / "hf", 1, 1, intermediate_size=320)
    model = ckir.compile(hf, tmp_path / "b", max_context=16, dtype="q4_k")
    layout = (tmp_path / "b" / "layout.mlir").read_text()
    assert "@gemv_q4_k" in layout  # K = 256: q/k/v/o, gate, up
    assert "@gemv_f32" in layout or "@gemv_f32p" in layout  # down: K = 320 stays fp32
    model.close()
    with pytest.raises(ValueError, match="multiple of 256"):
        ckir.quant.quantize(np.zeros((2, 320), np.float32), "q4_k")


@pytest.mark.parametrize("dtype", ["q4_k", "q6_k"])
def test_hf_dtype_kquant_matches_dequantized_transformers(tmp_path: Path, dtype: str) -> None:
    """``--dtype q4_k`` / ``q6_k`` on an HF folder: ckir's quantizer, its kernels; prefill
    on fp32 x equals PyTorch fp32 on the same dequantized matrices (those with K % 256 ==
    0), on int8 x (the default of SIMD runtimes) within decode's tolerance; the plan
    interpreter follows the C build on both x."""
    from ckir import quant
    from ckir.interp import PlanInterpreter

    hf = tiny_llama(tmp_path / "hf", 4, 2)
    model = ckir.compile(hf, tmp_path / "b", max_context=16, dtype=dtype)
    assert f"@gemm_{dtype}" in (tmp_path / "b" / "layout.mlir").read_text()
    ref_model = transformers.AutoModelForCausalLM.from_pretrained(hf, dtype=torch.float32).eval()
    with torch.no_grad():
        for mod in ref_model.modules():
            if isinstance(mod, torch.nn.Linear | torch.nn.Embedding):
                w = mod.weight.detach().numpy()
                if w.shape[1] % 256 == 0:
                    stored = quant.dequantize(quant.quantize(w, dtype), dtype)
                    mod.weight.copy_(torch.from_numpy(stored))
        tokens = [5, 17, 3, 200, 9, 41, 77]
        ref = ref_model(torch.tensor([tokens])).logits[0].numpy()
    scale = float(np.abs(ref).max())
    model.int8_prefill = False  # fp32 x: summation order only
    ours = model.prefill(tokens)
    assert float(np.abs(ours - ref).max()) <= 1e-4 * scale
    model.reset()
    model.int8_prefill = True
    if model.int8_prefill:  # SIMD runtimes: x as Q8_K, decode's tolerance (test above)
        ours = model.prefill(tokens)
        assert float(np.abs(ours - ref).max()) <= 0.08 * scale
    # the interpreter rounds x where the C GEMMs do (int8 prefill on and off)
    interp = PlanInterpreter(model.build_dir)
    assert_prefill_follows_int8(model, interp, tokens, "Q4_K_M", rel_tol=1e-4)
    model.close()
