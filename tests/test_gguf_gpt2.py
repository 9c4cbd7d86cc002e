"""GPT-2 GGUF files (llama.cpp's ``gpt2`` architecture).

llama.cpp's converter writes GPT-2's Conv1D weights transposed (``[out, in]``:
``attn_qkv`` holds the rows of q, k and v) and ``output.weight`` as a copy of
``token_embd``.  The file below is written that way by hand (not from the
template), transformers' own GGUF loader reads it back to the checkpoint's
logits (so the layout is llama.cpp's, not one ckir agrees with itself on), and
ckir's build of it matches transformers, F32 and with Q8_0 matrices whose
q/k/v slices keep their blocks.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from test_parity import assert_close, assert_decode_matches, hf_model

import ckir

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
gguf = pytest.importorskip("gguf")

#: HF (GPT2LMHeadModel) name -> GGUF name, as llama.cpp's converter maps them
_BLOCK = {
    "ln_1": "attn_norm",
    "attn.c_attn": "attn_qkv",
    "attn.c_proj": "attn_output",
    "ln_2": "ffn_norm",
    "mlp.c_fc": "ffn_up",
    "mlp.c_proj": "ffn_down",
}
_CONV1D = ("attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj")  # stored [in, out] by HF


def gpt2_gguf(hf_dir: Path, out: Path, matrices: str = "F32") -> Path:
    """A GGUF file of a tiny GPT-2 folder laid out as llama.cpp's converter writes it;
    2-D weights (not the embeddings) of type ``matrices``."""
    import json

    from gguf_fixtures import byte_alphabet, write_gguf
    from safetensors.numpy import load_file

    config = json.loads((hf_dir / "config.json").read_text())
    e = config["n_embd"]
    meta = {
        "gpt2.block_count": config["n_layer"],
        "gpt2.context_length": config["n_positions"],
        "gpt2.embedding_length": e,
        "gpt2.feed_forward_length": config.get("n_inner") or 4 * e,
        "gpt2.attention.head_count": config["n_head"],
        "gpt2.attention.layer_norm_epsilon": float(config["layer_norm_epsilon"]),
        "general.name": "tiny",
        # the vocabulary size comes from the tokens, as in real files: the 256 bytes
        "tokenizer.ggml.model": "gpt2",
        "tokenizer.ggml.tokens": byte_alphabet(),
        "tokenizer.ggml.merges": [],
    }
    assert config["vocab_size"] == 256
    tensors: dict[str, tuple[np.ndarray, str]] = {}
    for name, arr in load_file(str(hf_dir / "model.safetensors")).items():
        arr = arr.astype(np.float32)
        name = name.removeprefix("transformer.")
        if name in ("wte.weight", "wpe.weight"):
            gname = {"wte.weight": "token_embd.weight", "wpe.weight": "position_embd.weight"}[name]
            tensors[gname] = (arr, "F32")
            if name == "wte.weight":  # the converter's copy: GPT-2's head is tied to wte
                tensors["output.weight"] = (arr, "F32")
            continue
        if name.startswith("ln_f."):
            tensors["output_norm." + name.split(".")[-1]] = (arr, "F32")
            continue
        _, layer, rest = name.split(".", 2)
        module, leaf = rest.rsplit(".", 1)
        if module in _CONV1D and leaf == "weight":
            arr = arr.T
        kind = matrices if arr.ndim == 2 else "F32"
        tensors[f"blk.{layer}.{_BLOCK[module]}.{leaf}"] = (arr, kind)
    return write_gguf(out, "gpt2", meta, tensors)


def _tiny_gpt2(root: Path, e: int, heads: int) -> Path:
    from ckir.tools.zoo import make_tiny_model

    # transformers' GGUF loader takes n_ctx, not n_positions, from the file: 1024 as GPT-2's
    return make_tiny_model("gpt2", root / "m", n_embd=e, n_head=heads, n_positions=1024)


@pytest.fixture(scope="module")
def gpt2_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """3 heads of 16: E = 48 is not a multiple of the vector widths."""
    return _tiny_gpt2(tmp_path_factory.mktemp("gpt2"), 48, 3)


@pytest.fixture(scope="module")
def gpt2_q_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """E = 64 and I = 256: every matrix's K a multiple of Q8_0's 32."""
    return _tiny_gpt2(tmp_path_factory.mktemp("gpt2q"), 64, 2)


def _tokens(seed: int, n: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, size=n)


def test_transformers_reads_the_file_as_the_checkpoint(gpt2_dir: Path, tmp_path: Path) -> None:
    """The oracle for the layout: transformers' GGUF loader, which undoes llama.cpp's
    conversion, gives the checkpoint's logits from the file."""
    path = gpt2_gguf(gpt2_dir, tmp_path / "m.gguf")
    model = transformers.AutoModelForCausalLM.from_pretrained(
        path.parent, gguf_file=path.name, dtype=torch.float32
    ).eval()
    tokens = torch.tensor(_tokens(1, 9)[None, :])
    with torch.no_grad():
        got = model(tokens).logits[0].numpy()
        ref = hf_model(gpt2_dir)(tokens).logits[0].numpy()
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-5 * float(np.abs(ref).max()))


def test_f32_file_matches_transformers(gpt2_dir: Path, tmp_path: Path) -> None:
    path = gpt2_gguf(gpt2_dir, tmp_path / "m.gguf")
    model = ckir.compile(path, tmp_path / "b", max_context=32)
    try:
        hf = hf_model(gpt2_dir)
        tokens = _tokens(2, 11)
        model.reset()
        ours = model.prefill(tokens)
        with torch.no_grad():
            ref = hf(torch.tensor(tokens[None, :])).logits[0].numpy()
        assert_close(ours, ref, "gpt2 GGUF prefill")
        assert_decode_matches(model, hf, _tokens(3, 5), _tokens(4, 6), "gpt2 GGUF")
    finally:
        model.close()


def test_q8_0_qkv_rows_keep_their_blocks(gpt2_q_dir: Path, tmp_path: Path) -> None:
    """Q8_0 matrices: q, k and v are row slices of attn_qkv, kept as Q8_0 blocks; the
    prefill logits match transformers on the file's dequantized values to fp32."""
    from ckir.dialects import graph as g
    from ckir.frontend import import_model

    path = gpt2_gguf(gpt2_q_dir, tmp_path / "q8.gguf", "Q8_0")
    module, warnings, _ = import_model(path)
    assert warnings == []
    model_op = next(op for op in module.ops if isinstance(op, g.ModelOp))
    weights = model_op.weights()
    for name in ("layers.{i}.attn.wq", "layers.{i}.attn.wk", "layers.{i}.attn.wv"):
        w = weights[name]
        assert w.dtype_name == "q8_0" and w.gguf_name == "blk.{i}.attn_qkv.weight", name
        assert w.slice_spec is not None and w.slice_spec[0] == 0  # rows of [3E, E]
        assert not w.is_transposed
    assert weights["layers.{i}.mlp.fc"].dtype_name == "q8_0"
    # the oracle: transformers' loader dequantizes the same file
    ref_model = transformers.AutoModelForCausalLM.from_pretrained(
        path.parent, gguf_file=path.name, dtype=torch.float32
    ).eval()
    # row-major Q8_0 (no panels): prefill dequantizes into the fp32 GEMM, so exact to fp32
    model = ckir.compile(path, tmp_path / "b", max_context=32, panels=False)
    try:
        tokens = _tokens(5, 10)
        model.reset()
        ours = model.prefill(tokens)
        with torch.no_grad():
            ref = ref_model(torch.tensor(tokens[None, :])).logits[0].numpy()
        assert_close(ours, ref, "gpt2 Q8_0 GGUF prefill")
    finally:
        model.close()
