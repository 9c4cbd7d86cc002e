"""Tiny random-weight HuggingFace checkpoints for tests and demos.

``make_tiny_model("llama", out_dir)`` builds a small model from a config
object with ``transformers`` (never a download), initializes every weight
from a seeded generator and saves ``config.json`` + ``model.safetensors``.
torch and transformers are imported inside the function only: the tests use
it as the transformers-exact reference.

``make_numpy_model("llama", out_dir)`` writes the same folder layout (tensor
names, shapes, config keys) with NumPy and safetensors alone, ckir's own
dependencies: ``ckir demo`` uses it, so an installed ckir needs no torch.

``write_byte_tokenizer(out_dir)`` adds a ``tokenizer.json`` whose 256 tokens
are the 256 byte values (id = byte, GPT-2's byte-level alphabet, no merges):
it fits the tiny models' vocabulary of 256, so ``ckir train`` and
``ckir generate`` can run on them with real text.

Architectures: ``llama`` (GQA, I not a multiple of 16), ``mistral`` (served by
the llama template), ``qwen2`` (q/k/v bias; tied or not), ``qwen3`` (per-head
q/k norms, head_dim 20 of its own), ``gpt2`` (fused c_attn, Conv1D, tied
lm_head).  The name is the transformers ``model_type``:
a new architecture is one row of defaults.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

ARCHES = ("llama", "mistral", "qwen2", "qwen3", "gpt2")

#: the config keys of the llama-like architectures (llama, mistral, qwen2) in the order
#: :func:`llama_config` takes their values
LLAMA_KEYS = (
    "hidden_size",
    "num_attention_heads",
    "num_key_value_heads",
    "intermediate_size",
    "num_hidden_layers",
    "vocab_size",
    "max_position_embeddings",
    "rope_theta",
    "rms_norm_eps",
    "tie_word_embeddings",
)


def llama_config(*values: Any, **extra: Any) -> dict[str, Any]:
    """A llama-like HF config from the values of :data:`LLAMA_KEYS` (all of them, in
    order) and ``extra`` keys."""
    return {**dict(zip(LLAMA_KEYS, values, strict=True)), **extra}


_TOKENS = dict(bos_token_id=1, eos_token_id=2)
_LLAMA = llama_config(64, 4, 2, 172, 2, 256, 128, 10000.0, 1e-5, False, **_TOKENS)

_DEFAULTS: dict[str, dict[str, Any]] = {
    "llama": _LLAMA,
    "mistral": {**_LLAMA, "sliding_window": None},
    "qwen2": llama_config(
        64, 4, 2, 172, 2, 256, 128, 1_000_000.0, 1e-6, True, use_sliding_window=False, **_TOKENS
    ),
    # head_dim 20 is not hidden / heads (16), nor a multiple of a vector width
    "qwen3": llama_config(
        48, 3, 1, 100, 2, 256, 128, 1_000_000.0, 1e-6, True, head_dim=20, **_TOKENS
    ),
    "gpt2": dict(
        n_embd=64,
        n_head=4,
        n_layer=2,
        vocab_size=256,
        n_positions=128,
        layer_norm_epsilon=1e-5,
        activation_function="gelu_new",
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        tie_word_embeddings=True,
        bos_token_id=0,
        eos_token_id=0,
    ),
}


def tiny_config(arch: str, *, tied: bool | None = None, **overrides: Any) -> dict[str, Any]:
    """The config keyword arguments ``make_tiny_model`` uses for ``arch``."""
    if arch not in _DEFAULTS:
        raise ValueError(f"unknown tiny architecture '{arch}' (known: {', '.join(ARCHES)})")
    kwargs = dict(_DEFAULTS[arch])
    if tied is not None:
        kwargs["tie_word_embeddings"] = tied
    kwargs.update(overrides)
    return kwargs


def make_tiny_model(
    arch: str,
    out_dir: Path,
    *,
    seed: int = 0,
    tied: bool | None = None,
    std: float = 0.08,
    **overrides: Any,
) -> Path:
    """Build and save a random-weight tiny ``arch`` model in ``out_dir``; returns ``out_dir``.

    ``tied`` overrides ``tie_word_embeddings``; ``overrides`` are passed to the
    config class (e.g. ``num_hidden_layers=3``).  Matrices and embeddings are
    drawn from N(0, std), biases from N(0, std/2), and norm gains from
    1 + N(0, 0.1) (norm biases N(0, 0.1)), so a wrong mapping changes outputs.
    """
    import torch
    import transformers

    kwargs = tiny_config(arch, tied=tied, **overrides)
    config = transformers.AutoConfig.for_model(arch, **kwargs)  # arch is the model_type
    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_config(config)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            offset, scale = _init_law(name, std)
            p.copy_(offset + scale * torch.randn(p.shape, generator=gen))
    model.eval()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir)
    return out_dir


def _init_law(name: str, std: float) -> tuple[float, float]:
    """``(offset, scale)``: the HF tensor ``name`` is drawn from offset + scale * N(0, 1)."""
    leaf = name.rsplit(".", 1)[-1]
    is_norm = "norm" in name or ".ln_" in name or name.startswith(("ln_f", "transformer.ln_f"))
    if is_norm:
        return (1.0, 0.1) if leaf == "weight" else (0.0, 0.1)
    return (0.0, 0.5 * std) if leaf == "bias" else (0.0, std)


#: the transformers class ``save_pretrained`` names in ``config.json`` ``architectures``
_HF_CLASSES = {
    "llama": "LlamaForCausalLM",
    "mistral": "MistralForCausalLM",
    "qwen2": "Qwen2ForCausalLM",
    "qwen3": "Qwen3ForCausalLM",
    "gpt2": "GPT2LMHeadModel",
}


def _hf_shapes(arch: str, cfg: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    """The tensors (HF names, shapes) a transformers ``arch`` model with config ``cfg`` saves."""
    if arch == "gpt2":
        shapes, e = _gpt2_shapes(cfg), cfg["n_embd"]
    else:
        shapes, e = _llama_shapes(arch, cfg), cfg["hidden_size"]
    if not cfg["tie_word_embeddings"]:
        shapes["lm_head.weight"] = (cfg["vocab_size"], e)
    return shapes


def _gpt2_shapes(cfg: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    """GPT-2's tensors but ``lm_head``: Conv1D weights are stored ``[in, out]``."""
    e = cfg["n_embd"]
    inner = cfg.get("n_inner") or 4 * e
    shapes = {
        "transformer.wte.weight": (cfg["vocab_size"], e),
        "transformer.wpe.weight": (cfg["n_positions"], e),
    }
    for i in range(cfg["n_layer"]):
        pre = f"transformer.h.{i}"
        for name, n_in, n_out in (
            ("attn.c_attn", e, 3 * e),
            ("attn.c_proj", e, e),
            ("mlp.c_fc", e, inner),
            ("mlp.c_proj", inner, e),
        ):
            shapes[f"{pre}.{name}.weight"] = (n_in, n_out)
            shapes[f"{pre}.{name}.bias"] = (n_out,)
        for norm in ("ln_1", "ln_2"):
            shapes[f"{pre}.{norm}.weight"] = shapes[f"{pre}.{norm}.bias"] = (e,)
    shapes["transformer.ln_f.weight"] = shapes["transformer.ln_f.bias"] = (e,)
    return shapes


def _llama_shapes(arch: str, cfg: dict[str, Any]) -> dict[str, tuple[int, ...]]:
    """The tensors of a llama, mistral, qwen2 or qwen3 model but ``lm_head``."""
    e, inter = cfg["hidden_size"], cfg["intermediate_size"]
    heads = cfg["num_attention_heads"]
    kv = cfg.get("num_key_value_heads") or heads
    d = cfg.get("head_dim") or e // heads
    qkv_bias = arch == "qwen2" or bool(cfg.get("attention_bias"))
    shapes = {"model.embed_tokens.weight": (cfg["vocab_size"], e)}
    for i in range(cfg["num_hidden_layers"]):
        pre = f"model.layers.{i}"
        shapes[f"{pre}.input_layernorm.weight"] = (e,)
        for proj, rows in (("q_proj", heads * d), ("k_proj", kv * d), ("v_proj", kv * d)):
            shapes[f"{pre}.self_attn.{proj}.weight"] = (rows, e)
            if qkv_bias:
                shapes[f"{pre}.self_attn.{proj}.bias"] = (rows,)
        if arch == "qwen3":  # an RMSNorm of each q and k head
            for norm in ("q_norm", "k_norm"):
                shapes[f"{pre}.self_attn.{norm}.weight"] = (d,)
        shapes[f"{pre}.self_attn.o_proj.weight"] = (e, heads * d)
        shapes[f"{pre}.post_attention_layernorm.weight"] = (e,)
        shapes[f"{pre}.mlp.gate_proj.weight"] = (inter, e)
        shapes[f"{pre}.mlp.up_proj.weight"] = (inter, e)
        shapes[f"{pre}.mlp.down_proj.weight"] = (e, inter)
    shapes["model.norm.weight"] = (e,)
    return shapes


def numpy_model(
    arch: str,
    *,
    seed: int = 0,
    tied: bool | None = None,
    std: float = 0.08,
    **overrides: Any,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """``(config, tensors)`` of a tiny random ``arch`` checkpoint made with NumPy: the
    tensor names and shapes transformers would save, each drawn with
    ``np.random.default_rng(seed)`` by ``make_tiny_model``'s law (different numbers:
    another generator).  ``overrides`` are config keys."""
    import numpy as np

    cfg = tiny_config(arch, tied=tied, **overrides)
    rng = np.random.default_rng(seed)
    tensors = {}
    for name, shape in _hf_shapes(arch, cfg).items():
        offset, scale = _init_law(name, std)
        tensors[name] = (offset + scale * rng.standard_normal(shape)).astype(np.float32)
    config = {"architectures": [_HF_CLASSES[arch]], "model_type": arch, **cfg}
    config["torch_dtype"] = "float32"
    return config, tensors


def make_numpy_model(
    arch: str,
    out_dir: Path,
    *,
    seed: int = 0,
    tied: bool | None = None,
    std: float = 0.08,
    **overrides: Any,
) -> Path:
    """``make_tiny_model`` without torch: :func:`numpy_model`'s ``config.json`` and
    ``model.safetensors`` (f32) written in ``out_dir``.  Returns ``out_dir``."""
    from safetensors.numpy import save_file

    config, tensors = numpy_model(arch, seed=seed, tied=tied, std=std, **overrides)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")
    save_file(tensors, str(out_dir / "model.safetensors"), metadata={"format": "pt"})
    return out_dir


def _byte_symbols() -> list[str]:
    """The printable character byte-level BPE uses for each byte value 0..255: the
    byte's own character when it is printable Latin-1 (not a space), otherwise one of
    the characters from U+0100 on, handed out in byte order."""
    printable = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    table = {b: chr(b) for b in printable}
    extra = 0x100
    for b in range(256):
        if b not in table:
            table[b] = chr(extra)
            extra += 1
    return [table[b] for b in range(256)]


def write_byte_tokenizer(out_dir: Path) -> Path:
    """Write ``tokenizer.json`` into ``out_dir``: byte-level BPE with the 256 byte tokens
    only (token id = byte value) and no special tokens.  Returns the file."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    vocab = {sym: i for i, sym in enumerate(_byte_symbols())}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    out = Path(out_dir) / "tokenizer.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    tok.save(str(out))
    return out
