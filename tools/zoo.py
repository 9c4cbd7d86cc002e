"""Tiny random-weight HuggingFace checkpoints for tests and demos.

``make_tiny_model("llama", out_dir)`` builds a small model from a config
object with ``transformers`` (never a download), initializes every weight
from a seeded generator and saves ``config.json`` + ``model.safetensors``.
torch and transformers are imported inside the function only.

Architectures: ``llama`` (GQA, I not a multiple of 16), ``mistral`` (served by
the llama template), ``qwen2`` (q/k/v bias; tied or not), ``gpt2`` (fused
c_attn, Conv1D, tied lm_head).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

ARCHES = ("llama", "mistral", "qwen2", "gpt2")

_DEFAULTS: dict[str, dict[str, Any]] = {
    "llama": dict(
        hidden_size=64,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=172,
        num_hidden_layers=2,
        vocab_size=256,
        max_position_embeddings=128,
        rope_theta=10000.0,
        rms_norm_eps=1e-5,
        tie_word_embeddings=False,
        bos_token_id=1,
        eos_token_id=2,
    ),
    "mistral": dict(
        hidden_size=64,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=172,
        num_hidden_layers=2,
        vocab_size=256,
        max_position_embeddings=128,
        rope_theta=10000.0,
        rms_norm_eps=1e-5,
        sliding_window=None,
        tie_word_embeddings=False,
        bos_token_id=1,
        eos_token_id=2,
    ),
    "qwen2": dict(
        hidden_size=64,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=172,
        num_hidden_layers=2,
        vocab_size=256,
        max_position_embeddings=128,
        rope_theta=1_000_000.0,
        rms_norm_eps=1e-6,
        tie_word_embeddings=True,
        use_sliding_window=False,
        bos_token_id=1,
        eos_token_id=2,
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
    if arch == "gpt2":
        config = transformers.GPT2Config(**kwargs)
        model_cls = transformers.GPT2LMHeadModel
    elif arch == "qwen2":
        config = transformers.Qwen2Config(**kwargs)
        model_cls = transformers.Qwen2ForCausalLM
    elif arch == "mistral":
        config = transformers.MistralConfig(**kwargs)
        model_cls = transformers.MistralForCausalLM
    else:
        config = transformers.LlamaConfig(**kwargs)
        model_cls = transformers.LlamaForCausalLM

    torch.manual_seed(seed)
    model = model_cls(config)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            leaf = name.rsplit(".", 1)[-1]
            is_norm = (
                "norm" in name or ".ln_" in name or name.startswith(("ln_f", "transformer.ln_f"))
            )
            if is_norm and leaf == "weight":
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=gen))
            elif is_norm:
                p.copy_(0.1 * torch.randn(p.shape, generator=gen))
            elif leaf == "bias":
                p.copy_(0.5 * std * torch.randn(p.shape, generator=gen))
            else:
                p.copy_(std * torch.randn(p.shape, generator=gen))
    model.eval()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir)
    return out_dir
