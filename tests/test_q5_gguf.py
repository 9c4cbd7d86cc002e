"""Q5_0 / Q5_1 GGUF files end to end: compiled by ckir against transformers' GGUF loader.

llama.cpp's ``llama-quantize ... Q4_K_M`` stores a matrix whose K (columns) is no multiple
of 256 in Q5_0 instead of Q4_K and in Q8_0 instead of Q6_K.  The Q4_K_M-style file here
is written that way from a random-weight tiny Llama with hidden size 160 (K % 256 != 0)
and intermediate size 256: the embedding, q/k/o, gate and up in Q5_0, attn_v in Q8_0 in
its first and last layers and Q5_0 in the middle one (one weight mixing Q8_0 and Q5_0
across layers), ffn_down (K = 256) in Q6_K / Q4_K, the output matrix in Q8_0.  A second
file stores every matrix in Q5_1.  transformers dequantizes the same file
(``gguf.quants.dequantize``) and runs PyTorch fp32: ckir's prefill on fp32 x must match it
to fp32 accuracy, its decode (x quantized to int8 per block of 32, or of 256 for the
K-quants) within the quantization error documented in docs/quantization.md, and the plan
interpreter follows the C build.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from gguf_fixtures import gguf_from_hf, tokenizer_metadata
from test_interp import assert_prefill_follows_int8
from test_kquant_gguf import fp32_prefill_and_decode

import ckir
from ckir.frontend.gguf import import_gguf

gguf = pytest.importorskip("gguf")
torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

LAYERS = 3
#: llama-quantize's Q4_K_M with its fallbacks for K = 160: Q4_K -> Q5_0, Q6_K -> Q8_0
Q4_K_M_FALLBACK = {
    "output.weight": "Q8_0",
    **{f"blk.{i}.attn_v.weight": "Q8_0" for i in (0, LAYERS - 1)},
    **{f"blk.{i}.ffn_down.weight": "Q6_K" for i in (0, LAYERS - 1)},
    **{f"blk.{i}.ffn_down.weight": "Q4_K" for i in range(1, LAYERS - 1)},
}


def tiny_llama(out: Path) -> Path:
    """A random tiny Llama with K = 160 (hidden) and 256 (intermediate)."""
    from ckir.tools.zoo import make_tiny_model

    vocab = len(tokenizer_metadata()["tokenizer.ggml.tokens"])
    return make_tiny_model(
        "llama",
        out,
        seed=7,
        tied=False,
        hidden_size=160,
        intermediate_size=256,
        num_attention_heads=5,
        num_key_value_heads=1,
        num_hidden_layers=LAYERS,
        vocab_size=vocab,
    )


@pytest.fixture(scope="module")
def hf_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_llama(tmp_path_factory.mktemp("q5_hf") / "hf")


@pytest.fixture(scope="module")
def q4_k_m(hf_dir: Path) -> Path:
    meta = {**tokenizer_metadata(), "general.file_type": 15}  # LLAMA_FTYPE_MOSTLY_Q4_K_M
    path = hf_dir.parent / "tiny-Q4_K_M.gguf"
    return gguf_from_hf(hf_dir, path, qtype="Q5_0", qtypes=Q4_K_M_FALLBACK, metadata=meta)


@pytest.fixture(scope="module")
def q5_1(hf_dir: Path) -> Path:
    meta = {**tokenizer_metadata(), "general.file_type": 9}  # LLAMA_FTYPE_MOSTLY_Q5_1
    return gguf_from_hf(hf_dir, hf_dir.parent / "tiny-Q5_1.gguf", qtype="Q5_1", metadata=meta)


def test_q4_k_m_fallbacks_import_with_layer_dtypes(q4_k_m: Path) -> None:
    module, _ = import_gguf(q4_k_m)
    text = str(module)
    assert '[H*D, E] q5_0 gguf "blk.{i}.attn_q.weight"' in text
    # attn_v mixes Q8_0 and Q5_0: declared in the most common one (a panel build then
    # stores each layer in its own twin: q8_0p, q5_0p, q8_0p)
    assert 'q8_0 gguf "blk.{i}.attn_v.weight"' in text
    assert 'layer_dtypes = "q8_0,q5_0,q8_0"' in text
    assert 'layer_dtypes = "q6_k,q4_k,q6_k"' in text  # ffn_down


def check_against_transformers(
    path: Path, build: Path, kernels: tuple[str, ...], panels: bool = True
) -> None:
    """Prefill (fp32 x) within 1e-4, decode within the documented quantization error, the
    plan interpreter within 1e-4 of the C build (int8 prefill on and off); ``panels``:
    the block matrices in their panel twins (the default) or in rows."""
    from ckir.interp import PlanInterpreter

    model = ckir.compile(path, build, max_context=32, panels=panels)
    layout = (build / "layout.mlir").read_text()
    for kernel in kernels:
        assert f"@{kernel}" in layout, kernel
    tokens, ref, steps = fp32_prefill_and_decode(model, path)
    scale = float(np.abs(ref).max())
    rel = float(np.abs(steps - ref).max()) / scale
    # x quantized to int8 per block (docs/quantization.md, "Q5_0 and Q5_1")
    assert rel <= 0.08, rel
    top2 = np.sort(ref, axis=-1)[:, -2:]
    clear = top2[:, 1] - top2[:, 0] > 2 * rel * scale  # no near-tie within the error
    assert np.array_equal(steps.argmax(-1)[clear], ref.argmax(-1)[clear])
    interp = PlanInterpreter(model.build_dir)
    # int8 x (decode, and prefill of q5_0p / q5_1p, q8_0p, the K-quants): a value of x
    # within a few ulp of a rounding tie (the interpreter's fp32 differs from C's in the
    # last bits) may round to the other int8 level, which moves that row's outputs by
    # |w| dx and the layers after it (token 214 of this file's fixture does, in layer 0's
    # gate_up): bounded by the quantization error of x; fp32 x within 1e-4
    model.reset()
    model.int8_prefill = True
    if model.int8_prefill:
        assert float(np.abs(model.prefill(tokens) - ref).max()) <= 0.08 * scale
    assert_prefill_follows_int8(
        model, interp, np.asarray(tokens), "GGUF", rel_tol=1e-4, int8_rel_tol=0.08
    )
    model.reset()
    interp.reset()
    for t in tokens[:4]:
        got, want = interp.decode(t), model.decode(t)
        assert float(np.abs(got - want).max()) <= 0.08 * float(np.abs(want).max())
    model.close()


@pytest.mark.parametrize("panels", [True, False], ids=["panels", "rows"])
def test_q4_k_m_fallbacks_match_transformers(q4_k_m: Path, tmp_path: Path, panels: bool) -> None:
    """Q5_0 in q5_0p panels (the default; attn_v's Q5_0 layer too) or in rows."""
    p = "p" if panels else ""
    kernels = (f"gemv_q5_0{p}", f"gemm_q5_0{p}", f"embed_q5_0{p}", f"gemv_q8_0{p}")
    check_against_transformers(q4_k_m, tmp_path / "build", (*kernels, f"gemm_q4_k{p}"), panels)
    layout = (tmp_path / "build" / "layout.mlir").read_text()
    assert panels == ("q5_0>" not in layout and "q8_0>" not in layout)


@pytest.mark.parametrize("panels", [True, False], ids=["panels", "rows"])
def test_q5_1_file_matches_transformers(q5_1: Path, tmp_path: Path, panels: bool) -> None:
    p = "p" if panels else ""
    kernels = (f"gemv_q5_1{p}", f"gemm_q5_1{p}", f"embed_q5_1{p}")
    check_against_transformers(q5_1, tmp_path / "build", kernels, panels)


@pytest.mark.parametrize("dtype", ["q5_0", "q5_1"])
def test_hf_dtype_q5_matches_dequantized_transformers(hf_dir: Path, tmp_path: Path, dtype: str):
    """``--dtype q5_0`` / ``q5_1`` on an HF folder: ckir's quantizer, its kernels; prefill
    equals PyTorch fp32 on the same dequantized matrices, decode within the quantization
    error of x."""
    from ckir import quant

    model = ckir.compile(hf_dir, tmp_path / "b", max_context=16, dtype=dtype)
    layout = (tmp_path / "b" / "layout.mlir").read_text()
    assert f"@gemm_{dtype}" in layout and f"@gemv_{dtype}" in layout
    ref_model = transformers.AutoModelForCausalLM.from_pretrained(hf_dir, dtype=torch.float32)
    with torch.no_grad():
        for mod in ref_model.eval().modules():
            if isinstance(mod, torch.nn.Linear | torch.nn.Embedding):
                w = mod.weight.detach().numpy()
                stored = quant.dequantize(quant.quantize(w, dtype), dtype)
                mod.weight.copy_(torch.from_numpy(stored))
        tokens = [5, 17, 3, 200, 9, 41, 77]
        ref = ref_model(torch.tensor([tokens])).logits[0].numpy()
    scale = float(np.abs(ref).max())
    model.int8_prefill = False
    assert float(np.abs(model.prefill(tokens) - ref).max()) <= 1e-4 * scale
    model.reset()
    steps = np.stack([model.decode(t) for t in tokens])
    assert float(np.abs(steps - ref).max()) <= 0.08 * scale
    model.close()
