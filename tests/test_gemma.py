"""Gemma-family templates (templates/gemma.yaml, templates/gemma2.yaml) against transformers.

Tiny random configs with odd sizes (head_dim not E/H, GQA / MQA / MHA, prime
vocabularies); every parameter, the norm weights included, is drawn at random
so that the (1 + w) norms, the sqrt(E) embedding scale and the GeGLU MLP are
all exercised.  Oracles (fp32, eager attention): prefill logits and decode logits
within 1e-4 of the largest |logit|, the gradient of every weight within 1e-4 of
the largest entry of PyTorch's, and a GGUF file written the way llama.cpp's
converter writes one (norm weights stored as w + 1) giving the same logits.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from gguf_fixtures import gguf_metadata_from_config, write_gguf  # noqa: E402
from test_parity import assert_close, assert_decode_matches, compiled  # noqa: E402
from test_training import assert_gradients_match, hf_loss  # noqa: E402

import ckir  # noqa: E402
from ckir.errors import CkirError  # noqa: E402

MAX_CONTEXT = 48

#: key -> (transformers config class, causal LM class, config kwargs)
CONFIGS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "gemma_mqa_tied": (
        "GemmaConfig",
        "GemmaForCausalLM",
        dict(
            hidden_size=48,
            num_attention_heads=3,
            num_key_value_heads=1,
            head_dim=20,
            intermediate_size=77,
            vocab_size=211,
        ),
    ),
    "gemma_mha_untied_bias": (
        "GemmaConfig",
        "GemmaForCausalLM",
        dict(
            hidden_size=36,
            num_attention_heads=2,
            num_key_value_heads=2,
            head_dim=14,
            intermediate_size=53,
            vocab_size=157,
            tie_word_embeddings=False,
            attention_bias=True,
            rms_norm_eps=1e-5,
        ),
    ),
    "gemma2_gqa_capped": (
        "Gemma2Config",
        "Gemma2ForCausalLM",
        dict(
            hidden_size=40,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=12,
            intermediate_size=67,
            vocab_size=193,
            num_hidden_layers=3,
            query_pre_attn_scalar=20,
            attn_logit_softcapping=5.0,
            final_logit_softcapping=3.0,
            sliding_window=4,
        ),
    ),
    "gemma2_mqa_uncapped_untied": (
        "Gemma2Config",
        "Gemma2ForCausalLM",
        dict(
            hidden_size=30,
            num_attention_heads=3,
            num_key_value_heads=1,
            head_dim=18,
            intermediate_size=41,
            vocab_size=151,
            num_hidden_layers=4,
            query_pre_attn_scalar=7,
            attn_logit_softcapping=None,
            final_logit_softcapping=None,
            sliding_window=6,
            tie_word_embeddings=False,
        ),
    ),
    # layer_types other than the default alternation: full attention every third layer
    "gemma2_layer_types_3": (
        "Gemma2Config",
        "Gemma2ForCausalLM",
        dict(
            hidden_size=24,
            num_attention_heads=2,
            num_key_value_heads=1,
            head_dim=10,
            intermediate_size=29,
            vocab_size=97,
            num_hidden_layers=3,
            query_pre_attn_scalar=10,
            sliding_window=3,
            layer_types=["sliding_attention", "sliding_attention", "full_attention"],
        ),
    ),
}


def random_checkpoint(
    cfg_cls: str, lm_cls: str, kwargs: dict[str, Any], out: Path, seed: int = 7
) -> Path:
    """A transformers ``lm_cls`` of ``cfg_cls(**kwargs)`` saved in ``out``, every parameter
    (norm weights included) drawn at random."""
    torch.manual_seed(seed)
    model = getattr(transformers, lm_cls)(getattr(transformers, cfg_cls)(**kwargs))
    with torch.no_grad():
        for _, p in model.named_parameters():
            p.normal_(0.0, 0.3 if p.dim() == 1 else 0.08)
    model.save_pretrained(out)
    return out


def make_tiny(key: str, out: Path, seed: int = 7) -> Path:
    """A random-weight checkpoint of ``CONFIGS[key]``."""
    cfg_cls, lm_cls, kwargs = CONFIGS[key]
    full = {"num_hidden_layers": 2, "max_position_embeddings": MAX_CONTEXT, **kwargs}
    return random_checkpoint(cfg_cls, lm_cls, full, out, seed)


def hf_model(path: Path, train: bool = False):
    model = transformers.AutoModelForCausalLM.from_pretrained(
        path, dtype=torch.float32, attn_implementation="eager"
    )
    return model.train() if train else model.eval()


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("gemma_models")
    return {key: make_tiny(key, root / key) for key in CONFIGS}


@pytest.fixture(scope="module")
def builds(checkpoints: dict[str, Path], tmp_path_factory: pytest.TempPathFactory):
    yield from compiled(checkpoints, tmp_path_factory.mktemp("gemma_builds"), MAX_CONTEXT)


def check_prefill(model: Any, hf_path: Path, what: str) -> None:
    """Prefill logits of a compiled model against transformers' on 23 random tokens."""
    tokens = np.random.default_rng(1).integers(0, model.vocab_size, size=23)
    model.reset()
    ours = model.prefill(tokens)
    with torch.no_grad():
        ref = hf_model(hf_path)(torch.tensor(tokens[None, :])).logits[0].numpy()
    assert ours.shape == ref.shape
    assert_close(ours, ref, f"{what} prefill")


def check_decode(model: Any, hf_path: Path, what: str) -> None:
    """Decode logits (5-token prompt, 9 steps) against transformers' with its KV cache."""
    rng = np.random.default_rng(2)
    prompt = rng.integers(0, model.vocab_size, size=5)
    steps = rng.integers(0, model.vocab_size, size=9)
    assert_decode_matches(model, hf_model(hf_path), prompt, steps, what)


def check_gradients(src: Path, tmp_path: Path, what: str, max_context: int = MAX_CONTEXT) -> None:
    """The loss and every weight's gradient of a training build against autograd's."""
    model = ckir.compile(
        src, tmp_path / "build", modes=("prefill", "backward"), max_context=max_context
    )
    assert_gradients_match(what, model, hf_model(src, train=True), tmp_path, size=17)
    model.close()


@pytest.mark.parametrize("key", list(CONFIGS))
def test_prefill_matches_hf(key: str, checkpoints, builds) -> None:
    check_prefill(builds[key], checkpoints[key], key)


@pytest.mark.parametrize("key", list(CONFIGS))
def test_decode_with_kv_cache_matches_hf(key: str, checkpoints, builds) -> None:
    check_decode(builds[key], checkpoints[key], key)


@pytest.mark.parametrize("key", list(CONFIGS))
def test_gradients_match_autograd(key: str, checkpoints, tmp_path: Path) -> None:
    check_gradients(checkpoints[key], tmp_path, key)


def test_adamw_steps_match_torch(checkpoints, tmp_path: Path) -> None:
    """The optimizer sees the stored w (not 1 + w): weight decay acts on the same numbers."""
    src = checkpoints["gemma_mqa_tied"]
    model = ckir.compile(
        src, tmp_path / "build", modes=("prefill", "backward"), max_context=MAX_CONTEXT
    )
    ref_model = hf_model(src, train=True)
    hyper: dict[str, Any] = dict(lr=3e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0.01)
    opt = torch.optim.AdamW(ref_model.parameters(), **hyper)
    rng = np.random.default_rng(5)
    batches = [rng.integers(0, model.vocab_size, size=MAX_CONTEXT + 1) for _ in range(3)]
    for step in range(12):
        seq = batches[step % len(batches)]
        ours = model.train_step(seq[:-1], seq[1:], lr=hyper["lr"])
        opt.zero_grad()
        ref = hf_loss(ref_model, seq[:-1], seq[1:])
        ref.backward()
        torch.nn.utils.clip_grad_norm_(ref_model.parameters(), 1.0)
        opt.step()
        assert abs(ours - ref.item()) <= 1e-3 * abs(ref.item()), (step, ours, ref.item())
    model.close()


# --------------------------------------------------------------------------- GGUF

#: HF tensor name (``{i}`` per layer) -> GGUF tensor name, as llama.cpp's converter maps
#: them for its ``gemma`` / ``gemma2`` architectures (gguf package: MODEL_TENSORS)
GGUF_NAMES: dict[str, dict[str, str]] = {
    "gemma": {
        "model.embed_tokens.weight": "token_embd.weight",
        "model.norm.weight": "output_norm.weight",
        "lm_head.weight": "output.weight",
        "model.layers.{i}.input_layernorm.weight": "blk.{i}.attn_norm.weight",
        "model.layers.{i}.self_attn.q_proj.weight": "blk.{i}.attn_q.weight",
        "model.layers.{i}.self_attn.k_proj.weight": "blk.{i}.attn_k.weight",
        "model.layers.{i}.self_attn.v_proj.weight": "blk.{i}.attn_v.weight",
        "model.layers.{i}.self_attn.o_proj.weight": "blk.{i}.attn_output.weight",
        "model.layers.{i}.self_attn.q_proj.bias": "blk.{i}.attn_q.bias",
        "model.layers.{i}.self_attn.k_proj.bias": "blk.{i}.attn_k.bias",
        "model.layers.{i}.self_attn.v_proj.bias": "blk.{i}.attn_v.bias",
        "model.layers.{i}.self_attn.o_proj.bias": "blk.{i}.attn_output.bias",
        "model.layers.{i}.post_attention_layernorm.weight": "blk.{i}.ffn_norm.weight",
        "model.layers.{i}.mlp.gate_proj.weight": "blk.{i}.ffn_gate.weight",
        "model.layers.{i}.mlp.up_proj.weight": "blk.{i}.ffn_up.weight",
        "model.layers.{i}.mlp.down_proj.weight": "blk.{i}.ffn_down.weight",
    },
}
GGUF_NAMES["gemma2"] = {
    **{k: v for k, v in GGUF_NAMES["gemma"].items() if "post_attention_layernorm" not in k},
    "model.layers.{i}.post_attention_layernorm.weight": "blk.{i}.post_attention_norm.weight",
    "model.layers.{i}.pre_feedforward_layernorm.weight": "blk.{i}.ffn_norm.weight",
    "model.layers.{i}.post_feedforward_layernorm.weight": "blk.{i}.post_ffw_norm.weight",
}
GGUF_NAMES["gemma3"] = {
    **GGUF_NAMES["gemma2"],
    "model.layers.{i}.self_attn.q_norm.weight": "blk.{i}.attn_q_norm.weight",
    "model.layers.{i}.self_attn.k_norm.weight": "blk.{i}.attn_k_norm.weight",
}


def gemma2_metadata(config: dict[str, Any]) -> dict[str, Any]:
    """The Gemma 2 keys llama.cpp's converter writes (absent soft-capping: no key)."""
    kv: dict[str, Any] = {"gemma2.attention.sliding_window": config["sliding_window"]}
    for key in ("attn_logit_softcapping", "final_logit_softcapping"):
        if config.get(key) is not None:
            kv[f"gemma2.{key}"] = float(config[key])
    return kv


def gguf_like_llama_cpp(
    hf_dir: Path, path: Path, metadata: dict[str, Any], arch: str | None = None
) -> Path:
    """Write ``hf_dir`` as llama.cpp's converter would: its tensor names, every norm
    weight stored as ``w + 1``, no ``output.weight`` when tied, q/k rows unchanged.
    ``arch``: the GGUF architecture (default: the config's model_type)."""
    import json

    from safetensors.numpy import load_file

    config = json.loads((hf_dir / "config.json").read_text())
    arch = arch or config["model_type"]
    names = GGUF_NAMES[arch]
    kv = gguf_metadata_from_config(config, arch)
    kv[f"{arch}.attention.key_length"] = config["head_dim"]
    kv[f"{arch}.attention.value_length"] = config["head_dim"]
    kv.update(metadata)
    tensors: dict[str, tuple[np.ndarray, str]] = {}
    for hf_name, arr in load_file(str(hf_dir / "model.safetensors")).items():
        arr = arr.astype(np.float32)
        for pat, gpat in names.items():
            for i in range(config["num_hidden_layers"]) if "{i}" in pat else [None]:
                if (pat if i is None else pat.replace("{i}", str(i))) == hf_name:
                    gname = gpat if i is None else gpat.replace("{i}", str(i))
                    if hf_name.endswith("norm.weight"):
                        arr = arr + np.float32(1.0)
                    tensors[gname] = (arr, "F32")
    if config.get("tie_word_embeddings"):
        tensors.pop("output.weight", None)
    return write_gguf(path, arch, kv, tensors)


#: GGUF gemma2 files record no layer pattern (llama.cpp alternates): the other configs
GGUF_CONFIGS = [k for k, (_, _, kw) in CONFIGS.items() if "layer_types" not in kw]


@pytest.mark.parametrize("key", GGUF_CONFIGS)
def test_gguf_file_matches_hf(key: str, checkpoints, tmp_path: Path, copy_checkpoint) -> None:
    """A GGUF file (norms stored as w + 1) builds the same model: prefill and decode.

    Gemma 2 files have no query_pre_attn_scalar: llama.cpp scales by head_dim^-1/2, so
    the reference is the checkpoint with query_pre_attn_scalar = head_dim."""
    import json

    src = checkpoints[key]
    config = json.loads((src / "config.json").read_text())
    extra = {}
    if config["model_type"] == "gemma2":
        extra = gemma2_metadata(config)
        src = copy_checkpoint(src)
        config["query_pre_attn_scalar"] = config["head_dim"]
        (src / "config.json").write_text(json.dumps(config))
    path = gguf_like_llama_cpp(src, tmp_path / "m.gguf", extra)
    model = ckir.compile(path, tmp_path / "build", max_context=MAX_CONTEXT)
    hf = hf_model(src)
    tokens = np.random.default_rng(4).integers(0, model.vocab_size, size=13)
    ours = model.prefill(tokens)
    with torch.no_grad():
        ref = hf(torch.tensor(tokens[None, :])).logits[0].numpy()
    assert_close(ours, ref, f"{key} gguf prefill")
    step = model.decode(7)
    with torch.no_grad():
        ref_step = hf(torch.tensor([[*tokens.tolist(), 7]])).logits[0, -1].numpy()
    assert_close(step, ref_step, f"{key} gguf decode")
    model.close()


def test_unsupported_config_is_refused(checkpoints, tmp_path: Path, copy_checkpoint) -> None:
    """Configs the wiring does not implement fail at import, naming the key."""
    import json

    src = copy_checkpoint(checkpoints["gemma_mqa_tied"])
    cfg = json.loads((src / "config.json").read_text())
    cfg["hidden_act"] = "gelu"
    (src / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CkirError, match="key 'hidden_act' is 'gelu'; template gemma supports"):
        ckir.compile(src, tmp_path / "build", max_context=MAX_CONTEXT)


@pytest.mark.parametrize(
    "template,layers,message",
    [("gemma2", 46, "46-layer Gemma 2 GGUF file"), ("gemma3", 62, "62-layer Gemma 3 GGUF file")],
)
def test_gguf_of_the_27b_size_is_refused(template: str, layers: int, message: str) -> None:
    """llama.cpp scales a 27B Gemma 2 (46 layers) or Gemma 3 (62 layers) by (E/H)^-1/2,
    which its GGUF file does not record: refused, not built with the head_dim scale."""
    from ckir.resources import templates_dir
    from ckir.template import load_template

    tpl = load_template(templates_dir() / f"{template}.yaml")
    config = {
        "hidden_size": 64,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": 16,
        "intermediate_size": 96,
        "num_hidden_layers": layers,
        "vocab_size": 101,
        "max_position_embeddings": 32,
        "gguf_norm_weights_plus_one": True,
    }
    with pytest.raises(CkirError, match=message):
        tpl.bind(config)
    config["gguf_norm_weights_plus_one"] = False  # a HF folder records query_pre_attn_scalar
    symbols, params = tpl.bind(config)
    assert symbols["L"] == layers and params["qk_scale_dim"] == 256.0
