"""The phi3, starcoder2 and phi templates against transformers, fp32, tiny random configs.

Each template was added as YAML alone.  Oracles (HF transformers, PyTorch CPU):
prefill logits, decode logits step by step with HF's KV cache, and the gradient
of every weight of one backward (mapped into ckir's layout by ckir's own weight
reader, so the fused ``qkv_proj`` / ``gate_up_proj`` rows of Phi-3 are compared
slice by slice), all within 1e-4 of the largest reference entry.
``save_pretrained`` must give back the checkpoint bit for bit (the fused
tensors put together again) and load in transformers.  Configs the ops cannot
serve yet (RoPE scaling other than phi3's LongRoPE, partial rotary for phi3) are
refused with a message; LongRoPE's parity is tests/test_longrope.py's.
phi rotates part of each head (``partial_rotary_factor``) and has an LM head
with a bias.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from test_hf_export import assert_same_tensors  # noqa: E402
from test_parity import (  # noqa: E402
    assert_close,
    assert_decode_matches,
    assert_prefill_matches,
    compiled,
)
from test_training import assert_gradients_match  # noqa: E402

import ckir  # noqa: E402
from ckir.dialects import graph as g  # noqa: E402
from ckir.errors import CkirError  # noqa: E402
from ckir.frontend import import_model  # noqa: E402
from ckir.frontend.hf import import_hf  # noqa: E402
from ckir.tools.zoo import _init_law  # noqa: E402

_TOKENS = dict(bos_token_id=1, eos_token_id=2, pad_token_id=0)
#: key -> (transformers config class, model class, config keywords): odd sizes,
#: GQA / MQA / MHA, tied and untied heads, with and without biases
CASES: dict[str, tuple[str, str, dict[str, object]]] = {
    "phi3_gqa": (
        "Phi3Config",
        "Phi3ForCausalLM",
        dict(
            hidden_size=36,
            num_attention_heads=6,
            num_key_value_heads=2,
            intermediate_size=61,
            num_hidden_layers=2,
            vocab_size=151,
            max_position_embeddings=64,
            **_TOKENS,
        ),
    ),
    "phi3_mha_tied": (
        "Phi3Config",
        "Phi3ForCausalLM",
        dict(
            hidden_size=40,
            num_attention_heads=5,
            intermediate_size=45,
            num_hidden_layers=3,
            vocab_size=131,
            max_position_embeddings=64,
            tie_word_embeddings=True,
            **_TOKENS,
        ),
    ),
    "starcoder2": (
        "Starcoder2Config",
        "Starcoder2ForCausalLM",
        dict(
            hidden_size=36,
            num_attention_heads=6,
            num_key_value_heads=2,
            intermediate_size=61,
            num_hidden_layers=2,
            vocab_size=157,
            max_position_embeddings=64,
            tie_word_embeddings=False,
            **_TOKENS,
        ),
    ),
    "starcoder2_nobias_mqa": (
        "Starcoder2Config",
        "Starcoder2ForCausalLM",
        dict(
            hidden_size=40,
            num_attention_heads=5,
            num_key_value_heads=1,
            intermediate_size=77,
            num_hidden_layers=2,
            vocab_size=139,
            max_position_embeddings=64,
            use_bias=False,
            **_TOKENS,
        ),
    ),
    # phi (phi-1 / 1.5 / 2): a parallel block, partial rotary, an LM head with a bias
    "phi_gqa": (
        "PhiConfig",
        "PhiForCausalLM",
        dict(
            hidden_size=48,
            num_attention_heads=4,
            num_key_value_heads=2,
            intermediate_size=61,
            num_hidden_layers=2,
            vocab_size=151,
            max_position_embeddings=64,
            rope_parameters={"rope_theta": 10000.0, "partial_rotary_factor": 0.4},
            **_TOKENS,
        ),
    ),
    "phi_mha": (  # head_dim 8, rotary dims int(8 * 0.5) = 4
        "PhiConfig",
        "PhiForCausalLM",
        dict(
            hidden_size=40,
            num_attention_heads=5,
            intermediate_size=52,
            num_hidden_layers=3,
            vocab_size=131,
            max_position_embeddings=64,
            layer_norm_eps=1e-6,
            **_TOKENS,
        ),
    ),
}
MAX_CONTEXT = 48


def make_model(key: str, out: Path, seed: int = 5) -> Path:
    """A random tiny transformers model of case ``key`` saved in ``out``."""
    config_cls, model_cls, kwargs = CASES[key]
    return save_random_model(getattr(transformers, config_cls)(**kwargs), model_cls, out, seed)


def save_random_model(config, model_cls: str, out: Path, seed: int = 5) -> Path:
    """A random transformers ``model_cls`` of ``config`` saved in ``out`` (the zoo's
    initialization law: norm gains around 1, biases and norm biases non-zero)."""
    torch.manual_seed(seed)
    model = getattr(transformers, model_cls)(config)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            offset, scale = _init_law(name, 0.08)
            p.copy_(offset + scale * torch.randn(p.shape, generator=gen))
    model.save_pretrained(out)
    return out


def hf_model(path: Path, train: bool = False):
    model = transformers.AutoModelForCausalLM.from_pretrained(
        path, dtype=torch.float32, attn_implementation="eager"
    )
    model.train() if train else model.eval()
    return model


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("phi3_sc2_models")
    return {key: make_model(key, root / key) for key in CASES}


@pytest.fixture(scope="module")
def builds(checkpoints: dict[str, Path], tmp_path_factory: pytest.TempPathFactory):
    yield from compiled(checkpoints, tmp_path_factory.mktemp("phi3_sc2_builds"), MAX_CONTEXT)


@pytest.mark.parametrize("key", list(CASES))
def test_template_is_selected_by_model_type(key: str, checkpoints) -> None:
    module, warnings = import_hf(checkpoints[key])
    assert warnings == []
    model = next(op for op in module.ops if op.name == "graph.model")
    # each of these templates is named after the model_type it serves
    assert model.arch.data == getattr(transformers, CASES[key][0]).model_type


@pytest.mark.parametrize("key", list(CASES))
def test_prefill_matches_hf(key: str, checkpoints, builds) -> None:
    model = builds[key]
    tokens = np.random.default_rng(1).integers(0, model.vocab_size, size=13)
    assert_prefill_matches(model, hf_model(checkpoints[key]), tokens, key)


@pytest.mark.parametrize("key", list(CASES))
def test_decode_matches_hf(key: str, checkpoints, builds) -> None:
    rng = np.random.default_rng(2)
    model = builds[key]
    prompt = rng.integers(0, model.vocab_size, size=5)
    steps = rng.integers(0, model.vocab_size, size=7)
    assert_decode_matches(model, hf_model(checkpoints[key]), prompt, steps, key)


@pytest.mark.parametrize("key", list(CASES))
def test_gradients_match_autograd(key: str, checkpoints, tmp_path: Path) -> None:
    model = ckir.compile(
        checkpoints[key], tmp_path / "build", modes=("prefill", "backward"), max_context=MAX_CONTEXT
    )
    # no dropout in the configs: train mode changes nothing but autograd's view
    assert_gradients_match(key, model, hf_model(checkpoints[key], train=True), tmp_path, size=11)
    model.close()


@pytest.mark.parametrize("key", list(CASES))
def test_save_pretrained_round_trips(key: str, checkpoints, builds, tmp_path: Path) -> None:
    """The fused Phi-3 tensors are written back whole; transformers loads the folder."""
    model = builds[key]
    out = model.save_pretrained(tmp_path / "saved")
    assert_same_tensors(out, checkpoints[key])
    tokens = np.random.default_rng(4).integers(0, model.vocab_size, size=9)
    model.reset()
    ours = model.prefill(tokens)
    with torch.no_grad():
        ref = hf_model(out)(torch.tensor(tokens[None, :])).logits[0].numpy()
    assert_close(ours, ref, f"{key} reloaded")


def _edited(src: Path, dst: Path, **changes: object) -> Path:
    shutil.copytree(src, dst)
    config = json.loads((dst / "config.json").read_text())
    config.update(changes)
    (dst / "config.json").write_text(json.dumps(config))
    return dst


@pytest.mark.parametrize(
    ("key", "changes", "message"),
    [
        (
            "phi3_gqa",
            {"rope_parameters": {"rope_type": "longrope", "rope_theta": 10000.0}},
            "ext_factors has 0 values",  # longrope without its short_factor
        ),
        (
            "phi3_gqa",
            {"rope_parameters": {"rope_type": "linear", "factor": 2.0}},
            "other than longrope is not supported yet",
        ),
        (
            "phi3_gqa",
            {"rope_parameters": {"rope_type": "default", "partial_rotary_factor": 0.5}},
            "partial_rotary_factor is not 1.0",
        ),
        (
            "starcoder2",
            {"rope_parameters": {"rope_type": "linear", "factor": 2.0}},
            "RoPE scaling .* is not supported yet",
        ),
        ("starcoder2", {"hidden_act": "relu"}, "supports only gelu_pytorch_tanh, gelu_new, gelu"),
        ("phi_mha", {"qk_layernorm": True}, "qk_layernorm is true"),
        ("phi_mha", {"tie_word_embeddings": True}, "lm_head has a bias of its own"),
        (
            "phi_mha",
            {"rope_parameters": {"rope_type": "linear", "factor": 2.0}},
            "RoPE scaling .* is not supported for phi",
        ),
    ],
)
def test_unserved_configs_are_refused(
    key: str, changes: dict[str, object], message: str, checkpoints, tmp_path: Path
) -> None:
    src = _edited(checkpoints[key], tmp_path / "m", **changes)
    with pytest.raises(CkirError, match=message):
        import_hf(src)


@pytest.mark.parametrize("key", ["phi3_gqa", "starcoder2"])
def test_short_sliding_window_warns(key: str, checkpoints, tmp_path: Path) -> None:
    src = _edited(checkpoints[key], tmp_path / "m", sliding_window=16)
    _, warnings = import_hf(src)
    assert any("sliding_window is smaller than max_position_embeddings" in w for w in warnings)


# -- no silent wrong model: unmapped checkpoint tensors -----------------------------
@pytest.fixture(scope="module")
def qwen3_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Qwen3 checkpoint: the llama block plus per-head q/k RMSNorm weights."""
    out = tmp_path_factory.mktemp("qwen3")
    config = transformers.Qwen3Config(
        hidden_size=32,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=8,
        intermediate_size=45,
        num_hidden_layers=2,
        vocab_size=97,
        max_position_embeddings=64,
        **_TOKENS,
    )
    torch.manual_seed(0)
    transformers.Qwen3ForCausalLM(config).save_pretrained(out)
    return out


def test_other_architecture_under_a_template_is_refused(qwen3_dir: Path, tmp_path: Path) -> None:
    """A qwen3 checkpoint compiled with the llama template would lose its q/k norms:
    an error naming them (with the globs that would allow them), not a wrong model."""
    with pytest.raises(CkirError) as err:
        ckir.compile(qwen3_dir, tmp_path / "b", template="llama", max_context=16)
    msg = str(err.value)
    assert "\n" not in msg
    assert msg.startswith("model.safetensors: 4 tensor(s) not used by template llama: ")
    for name in ("q_norm", "k_norm"):
        assert f"'model.layers.0.self_attn.{name}.weight'" in msg
        assert f"--allow-unused 'model.layers.*.self_attn.{name}.weight'" in msg
    assert not (tmp_path / "b").exists()
    # allowed explicitly: the build proceeds (the user said the tensors are unused)
    model = ckir.compile(
        qwen3_dir,
        tmp_path / "b",
        template="llama",
        max_context=16,
        allow_unused=["model.layers.*.self_attn.q_norm.weight", "*.k_norm.weight"],
    )
    model.close()


def test_allow_unused_on_the_command_line(qwen3_dir: Path, tmp_path: Path, capsys) -> None:
    from ckir.cli import main

    argv = ["compile", str(qwen3_dir), "-o", str(tmp_path / "b"), "--template", "llama", "-q"]
    assert main([*argv, "--max-context", "16"]) != 0
    err = capsys.readouterr().err
    assert "not used by template llama" in err and "Traceback" not in err
    allow = ["--allow-unused", "*.q_norm.weight", "--allow-unused", "*.k_norm.weight"]
    assert main([*argv, "--max-context", "16", *allow]) == 0
    err = capsys.readouterr().err
    assert "warning: model.safetensors: tensor 'model.layers.1.k_norm.weight'" not in err
    assert (
        "warning: model.safetensors: tensor 'model.layers.1.self_attn.q_norm.weight' is not "
        "used by template llama; left out as --allow-unused '*.q_norm.weight' allows"
    ) in err


# -- no silent no-op dtype: matrices a requested --dtype cannot take -----------------
def test_dtype_fallback_is_named_recorded_and_strict(tiny_model, tmp_path: Path) -> None:
    """llama's tiny model: E = 64 fits q8_0's 32-block, mlp.down's K = I = 172 does not.
    Each matrix left in f32 is a warning naming its tensor, then one summary line;
    build.json records every weight's dtype; --strict makes it an error."""
    import json

    from ckir.compiler import CompileOptions, compile_model

    src = tiny_model("llama")
    warnings: list[str] = []
    options = CompileOptions(dtype="q8_0", max_context=16)
    out = compile_model(src, tmp_path / "b", options, on_warning=warnings.append)
    down = (
        "--dtype q8_0: weight layers.{i}.mlp.down (tensor 'model.layers.{i}.mlp.down_proj."
        "weight') stays f32: K = I = 172 is not a multiple of 32 (q8_0's block along K)"
    )
    assert warnings[0] == down
    assert warnings[1].startswith(
        "--dtype q8_0: 1 of 9 weight matrices (declarations; each covers all layers) stay f32 "
        "(--strict makes this an error"
    )
    assert len(warnings) == 2
    info = json.loads((out / "build.json").read_text())
    dtypes = info["weight_dtypes"]
    assert dtypes["layers.{i}.mlp.up"] == "q8_0p"  # q8_0 values, in panels (the default)
    assert dtypes["layers.{i}.mlp.down"] == "f32p"  # stayed f32
    assert dtypes["layers.{i}.attn_norm"] == "f32"  # norms are not matrices: never asked
    assert info["dtype_fallbacks"] == {
        "layers.{i}.mlp.down": ["f32", "K = I = 172 is not a multiple of 32 (q8_0's block along K)"]
    }
    # no --dtype: nothing requested, nothing reported
    warnings.clear()
    out = compile_model(
        src, tmp_path / "f", CompileOptions(max_context=16), on_warning=warnings.append
    )
    assert warnings == []
    assert json.loads((out / "build.json").read_text())["dtype_fallbacks"] == {}
    # --strict: an error naming the matrix, no build folder
    with pytest.raises(CkirError) as err:
        compile_model(
            src, tmp_path / "s", CompileOptions(dtype="q8_0", max_context=16, strict=True)
        )
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith("--strict: --dtype q8_0: 1 of 9 weight matrices")
    assert "weight layers.{i}.mlp.down (tensor 'model.layers.{i}.mlp.down_proj.weight')" in msg
    assert not (tmp_path / "s").exists()
    # a dtype every matrix takes passes --strict
    compile_model(src, tmp_path / "ok", CompileOptions(dtype="bf16", max_context=16, strict=True))


def test_strict_on_the_command_line(tiny_model, tmp_path: Path, capsys) -> None:
    from ckir.cli import main

    argv = ["compile", str(tiny_model("llama")), "-o", str(tmp_path / "b"), "-q"]
    assert main([*argv, "--dtype", "q4_0", "--max-context", "16", "--strict"]) != 0
    err = capsys.readouterr().err
    assert "error: --strict: --dtype q4_0: 1 of 9 weight matrices" in err
    assert "Traceback" not in err


# -- GGUF files (llama.cpp's phi3 and starcoder2 architectures) ----------------------
#: HF tensor name -> GGUF name, as llama.cpp's converter names them (gguf-py's
#: MODEL_TENSORS); phi3's fused tensors keep HF's rows (attn_qkv = q|k|v, ffn_up = gate|up)
PHI3_GGUF = {
    "model.embed_tokens.weight": "token_embd.weight",
    "model.norm.weight": "output_norm.weight",
    "lm_head.weight": "output.weight",
    "model.layers.{i}.input_layernorm.weight": "blk.{i}.attn_norm.weight",
    "model.layers.{i}.self_attn.qkv_proj.weight": "blk.{i}.attn_qkv.weight",
    "model.layers.{i}.self_attn.o_proj.weight": "blk.{i}.attn_output.weight",
    "model.layers.{i}.post_attention_layernorm.weight": "blk.{i}.ffn_norm.weight",
    "model.layers.{i}.mlp.gate_up_proj.weight": "blk.{i}.ffn_up.weight",
    "model.layers.{i}.mlp.down_proj.weight": "blk.{i}.ffn_down.weight",
}
STARCODER2_GGUF = {
    "model.embed_tokens.weight": "token_embd.weight",
    "model.norm.weight": "output_norm.weight",
    "model.norm.bias": "output_norm.bias",
    "lm_head.weight": "output.weight",
    **{
        f"model.layers.{{i}}.{hf}.{part}": f"blk.{{i}}.{gg}.{part}"
        for hf, gg in (
            ("input_layernorm", "attn_norm"),
            ("self_attn.q_proj", "attn_q"),
            ("self_attn.k_proj", "attn_k"),
            ("self_attn.v_proj", "attn_v"),
            ("self_attn.o_proj", "attn_output"),
            ("post_attention_layernorm", "ffn_norm"),
            ("mlp.c_fc", "ffn_up"),
            ("mlp.c_proj", "ffn_down"),
        )
        for part in ("weight", "bias")
    },
}
CASES["phi3_gguf"] = (
    "Phi3Config",
    "Phi3ForCausalLM",
    dict(
        hidden_size=64,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=96,
        num_hidden_layers=2,
        vocab_size=131,
        max_position_embeddings=64,
        **_TOKENS,
    ),
)


def hf_to_gguf(
    hf_dir: Path, out: Path, names: dict[str, str], kinds: dict[str, str] | None = None
) -> Path:
    """A GGUF file of a tiny HF folder: llama.cpp's metadata keys and tensor names,
    every tensor F32 unless ``kinds`` (a GGUF name suffix -> type) says otherwise."""
    from gguf_fixtures import gguf_metadata_from_config, write_gguf
    from safetensors.numpy import load_file

    config = json.loads((hf_dir / "config.json").read_text())
    arch = config["model_type"]
    metadata = gguf_metadata_from_config(config, arch)
    tensors = {}
    for hf_name, arr in load_file(str(hf_dir / "model.safetensors")).items():
        pattern = re.sub(r"\.\d+\.", ".{i}.", hf_name, count=1)
        gname = (
            names[pattern].replace("{i}", hf_name.split(".")[2])
            if "{i}" in pattern
            else names[pattern]
        )
        kind = next((k for suffix, k in (kinds or {}).items() if gname.endswith(suffix)), "F32")
        tensors[gname] = (arr.astype(np.float32), kind)
    return write_gguf(out, arch, metadata, tensors)


@pytest.mark.parametrize(
    ("key", "names"), [("phi3_gguf", PHI3_GGUF), ("starcoder2", STARCODER2_GGUF)]
)
def test_gguf_file_matches_hf(key: str, names, checkpoints, tmp_path: Path) -> None:
    """An F32 GGUF file of the checkpoint: the same logits as transformers, and
    save_pretrained writes the HF checkpoint back (phi3: the fused tensors whole)."""
    path = hf_to_gguf(checkpoints[key], tmp_path / f"{key}.gguf", names)
    model = ckir.compile(path, tmp_path / "b", max_context=MAX_CONTEXT)
    tokens = np.random.default_rng(6).integers(0, model.vocab_size, size=10)
    ours = model.prefill(tokens)
    with torch.no_grad():
        ref = hf_model(checkpoints[key])(torch.tensor(tokens[None, :])).logits[0].numpy()
    assert_close(ours, ref, f"{key} GGUF prefill")
    out = model.save_pretrained(tmp_path / "saved")
    model.close()
    from safetensors.numpy import load_file

    saved = load_file(str(out / "model.safetensors"))
    original = load_file(str(checkpoints[key] / "model.safetensors"))
    for name, arr in original.items():
        if name == "lm_head.weight" and name not in saved:
            continue  # tied: transformers ties it again
        np.testing.assert_array_equal(saved[name], arr, err_msg=name)


def test_gguf_fused_quantized_rows_stay_blocks(checkpoints, tmp_path: Path) -> None:
    """Q8_0 attn_qkv / ffn_up: each weight takes its rows of the fused tensor as Q8_0
    blocks, bit for bit (no requantization); the logits match transformers on the
    dequantized file's values."""
    import gguf
    from safetensors.numpy import load_file, save_file

    src = checkpoints["phi3_gguf"]
    kinds = {"attn_qkv.weight": "Q8_0", "ffn_up.weight": "Q8_0", "ffn_down.weight": "Q8_0"}
    path = hf_to_gguf(src, tmp_path / "q8.gguf", PHI3_GGUF, kinds)
    module, warnings, source = import_model(path)
    assert warnings == []
    model_op = next(op for op in module.ops if isinstance(op, g.ModelOp))
    symbols = model_op.symbol_values()
    wk = model_op.weights()["layers.{i}.attn.wk"]
    assert wk.dtype_name == "q8_0" and wk.gguf_name == "blk.{i}.attn_qkv.weight"
    assert wk.mapping.packs_gguf and wk.hf_dims == ("(H+2*KV)*D", "E")
    # its bytes: rows [H*D, (H+KV)*D) of layer 1's fused tensor, the file's blocks as they are
    h, kv, d = symbols["H"], symbols["KV"], symbols["D"]
    fused = next(t for t in gguf.GGUFReader(path).tensors if t.name == "blk.1.attn_qkv.weight")
    rows = np.asarray(fused.data).view(np.uint8).reshape((h + 2 * kv) * d, -1)
    got = source.bytes_for(wk, 1, symbols, "q8_0")
    np.testing.assert_array_equal(got, rows[h * d : (h + kv) * d].reshape(-1))
    model = ckir.compile(path, tmp_path / "b", max_context=MAX_CONTEXT, panels=False)
    # the oracle: transformers on the file's values (Q8_0 dequantized by gguf)
    reader = gguf.GGUFReader(path)
    deq = {
        t.name: gguf.quants.dequantize(t.data, t.tensor_type).reshape(
            [int(d) for d in reversed(list(t.shape))]
        )
        for t in reader.tensors
    }
    back = {v: k for k, v in PHI3_GGUF.items()}
    state = {}
    for gname, arr in deq.items():
        pattern = re.sub(r"\.\d+\.", ".{i}.", gname, count=1)
        hf = back[pattern]
        state[hf.replace("{i}", gname.split(".")[1])] = np.ascontiguousarray(arr, np.float32)
    ref_dir = tmp_path / "deq"
    shutil.copytree(src, ref_dir)
    save_file(state, str(ref_dir / "model.safetensors"), metadata={"format": "pt"})
    assert set(state) == set(load_file(str(src / "model.safetensors")))
    tokens = np.random.default_rng(7).integers(0, model.vocab_size, size=10)
    ours = model.prefill(tokens)
    with torch.no_grad():
        ref = hf_model(ref_dir)(torch.tensor(tokens[None, :])).logits[0].numpy()
    assert_close(ours, ref, "phi3 Q8_0 GGUF prefill")
    model.close()


def test_gguf_half_a_longrope_and_partial_rotary_are_refused(checkpoints, tmp_path: Path) -> None:
    from gguf_fixtures import read_f32_gguf, write_gguf

    meta, tensors = read_f32_gguf(
        hf_to_gguf(checkpoints["phi3_gguf"], tmp_path / "f.gguf", PHI3_GGUF), "phi3"
    )
    long = dict(tensors, **{"rope_factors_long.weight": (np.ones(8, np.float32), "F32")})
    with pytest.raises(CkirError, match="'rope_factors_long.weight' has no partner"):
        import_model(write_gguf(tmp_path / "long.gguf", "phi3", meta, long))
    partial = dict(meta, **{"phi3.rope.dimension_count": 8})
    with pytest.raises(CkirError, match="partial rotary embeddings are not supported yet"):
        import_model(write_gguf(tmp_path / "partial.gguf", "phi3", partial, tensors))


def test_docs_list_every_template() -> None:
    """docs/templates.md, "Supported architectures": one row per template in
    templates/, with its model types, exactly the ops its wiring uses and the GGUF
    architectures it reads."""
    from ckir.template import list_templates

    text = (Path(__file__).resolve().parent.parent / "docs" / "templates.md").read_text()
    section = text.split("## Supported architectures", 1)[1].split("\n## ", 1)[0]
    rows: dict[str, tuple[set[str], set[str], set[str]]] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 5 or not cells[0].startswith("`"):
            continue

        def words(cell: str) -> set[str]:
            return {w.strip(" `") for w in cell.split(",")} - {"-", ""}

        rows[cells[0].strip("`")] = (words(cells[1]), words(cells[2]), words(cells[3]))
    templates = {t.name: t for t in list_templates()}
    assert set(rows) == set(templates), sorted(set(rows) ^ set(templates))
    for name, tpl in templates.items():
        ops = {o.kind for sec in (tpl.header, tpl.body, tpl.footer) for o in sec.ops}
        archs = set(tpl.gguf.architectures) if tpl.gguf else set()
        assert rows[name] == (set(tpl.model_types), ops, archs), name


def test_dtype_fallback_names_a_source_format(tiny_model, tmp_path: Path) -> None:
    """A GGUF file's Q4_1 matrices under --dtype q8_0 keep their blocks (converting
    would requantize): each is named with the reason; f32 matrices whose K fits convert."""
    from gguf_fixtures import gguf_from_hf

    from ckir.compiler import dtype_fallbacks

    path = gguf_from_hf(
        tiny_model("llama"),
        tmp_path / "q.gguf",
        qtypes={"blk.0.attn_q.weight": "Q4_1", "blk.1.attn_q.weight": "Q4_1"},
    )
    module, _, _ = import_model(path)
    got = dtype_fallbacks(module, "q8_0")
    assert got["layers.{i}.attn.wq"] == (
        "q4_1",
        "it is q4_1 in the source and q8_0 converts only f32 matrices",
    )
    assert got["layers.{i}.mlp.down"][0] == "f32"  # K = 172
    assert set(got) == {"layers.{i}.attn.wq", "layers.{i}.mlp.down"}
    assert dtype_fallbacks(module, None) == {} and dtype_fallbacks(module, "f32") == {}
