"""HF export: ``CompiledModel.save_pretrained`` writes the checkpoint the build was made from.

For every template (tiny random models: llama, mistral, qwen2 tied and untied
with q/k/v biases, gpt2 with its packed c_attn): compile, save, reload with
transformers; every tensor equals the original checkpoint's bit for bit and
the reloaded model's logits equal ckir's within the parity tolerance of
test_parity (max |ckir - hf| <= 1e-4 * max |hf|).  GGUF sources are named
through their template.  Also: the exactly-once coverage check of packed
tensors, the output-folder policy, quantized builds refused, a trained build
saves its trained weights, and the files a build keeps (config.json, tokenizer).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
from safetensors.numpy import load_file  # noqa: E402
from xdsl.dialects.builtin import ArrayAttr, StringAttr  # noqa: E402

import ckir  # noqa: E402
from ckir.backend.hf_export import (  # noqa: E402
    PRETRAINED_MARKER,
    load_graph_model,
    to_hf_state_dict,
)
from ckir.errors import CkirError  # noqa: E402
from ckir.tools.zoo import make_tiny_model, write_byte_tokenizer  # noqa: E402

ARCHS = {
    "llama": {"arch": "llama"},
    "mistral": {"arch": "mistral"},
    "qwen2_tied": {"arch": "qwen2", "tied": True},
    "qwen2_untied": {"arch": "qwen2", "tied": False},
    "gpt2": {"arch": "gpt2"},
}
MAX_CONTEXT = 32
REL_TOL = 1e-4  # as tests/test_parity.py


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("export_models")
    out: dict[str, Path] = {}
    for key, spec in ARCHS.items():
        spec = dict(spec)
        arch = spec.pop("arch")
        out[key] = make_tiny_model(arch, root / key, seed=5, **spec)
    write_byte_tokenizer(out["llama"])
    return out


@pytest.fixture(scope="module")
def builds(checkpoints: dict[str, Path], tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("export_builds")
    models = {
        key: ckir.compile(path, root / key, max_context=MAX_CONTEXT)
        for key, path in checkpoints.items()
    }
    yield models
    for m in models.values():
        m.close()


def hf_logits(path: Path, tokens: np.ndarray) -> np.ndarray:
    model = transformers.AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    model.eval()
    with torch.no_grad():
        return model(torch.tensor(tokens[None, :])).logits[0].numpy()


def assert_close(ours: np.ndarray, ref: np.ndarray, what: str) -> None:
    scale = float(np.abs(ref).max())
    err = float(np.abs(ours - ref).max())
    assert err <= REL_TOL * scale, f"{what}: max abs error {err:.3g} > {REL_TOL} * {scale:.3g}"


def assert_same_tensors(saved: Path, original: Path) -> None:
    ours = load_file(str(saved / "model.safetensors"))
    ref = load_file(str(original / "model.safetensors"))
    assert sorted(ours) == sorted(ref)
    for name, arr in ref.items():
        assert ours[name].dtype == np.float32 and ours[name].shape == arr.shape, name
        assert np.array_equal(ours[name].view(np.uint32), arr.view(np.uint32)), name


@pytest.mark.parametrize("key", list(ARCHS))
def test_save_pretrained_round_trips(key: str, checkpoints, builds, tmp_path: Path) -> None:
    model = builds[key]
    out = model.save_pretrained(tmp_path / "saved")
    assert out == (tmp_path / "saved").resolve()
    assert_same_tensors(out, checkpoints[key])
    assert (out / "config.json").read_bytes() == (checkpoints[key] / "config.json").read_bytes()
    assert (out / PRETRAINED_MARKER).is_file()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp folder left
    tokens = np.random.default_rng(3).integers(0, model.vocab_size, size=9)
    model.reset()
    ours = model.prefill(tokens)
    assert_close(ours, hf_logits(out, tokens), f"{key} reloaded")


def test_build_keeps_config_and_tokenizer(checkpoints, builds) -> None:
    build = builds["llama"].build_dir
    src = checkpoints["llama"]
    for name in ("config.json", "tokenizer.json", "generation_config.json"):
        assert (build / name).read_bytes() == (src / name).read_bytes(), name
    info = json.loads((build / "build.json").read_text())
    assert info["hf_files"] == ["config.json", "generation_config.json", "tokenizer.json"]
    assert {"config.json", "tokenizer.json"} <= set(info["files"])  # digested like the rest


def test_saved_folder_has_the_tokenizer(builds, tmp_path: Path) -> None:
    from ckir.tokenizer import Tokenizer

    out = builds["llama"].save_pretrained(tmp_path / "saved")
    tok = Tokenizer.from_hf_dir(out)
    assert tok.encode("Hi!", add_special_tokens=False) == [72, 105, 33]


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_gguf_build_saves_hf_names(arch: str, tmp_path: Path) -> None:
    """A GGUF graph names GGUF tensors: the saved folder has the HF names again (llama's
    interleaved q/k rows restored), bit-exact for an F32 file; the config is the one
    the GGUF frontend synthesized, and transformers loads it."""
    pytest.importorskip("gguf")
    from gguf_fixtures import gguf_from_hf

    src = make_tiny_model(arch, tmp_path / "hf", seed=9, tied=arch == "qwen2")
    gguf = gguf_from_hf(src, tmp_path / "m.gguf", qtype="F32")
    with ckir.compile(gguf, tmp_path / "build", max_context=MAX_CONTEXT) as model:
        out = model.save_pretrained(tmp_path / "saved")
        tokens = np.arange(3, 12)
        ours = model.prefill(tokens)
    assert_same_tensors(out, src)
    config = json.loads((out / "config.json").read_text())
    assert config["model_type"] == arch
    assert config["tie_word_embeddings"] is (arch == "qwen2")
    assert_close(ours, hf_logits(out, tokens), f"{arch} from GGUF")


def test_quantized_gguf_saves_after_dtype_f32(tmp_path: Path) -> None:
    """dtype='f32' dequantizes a Q8_0 file's weights; the saved tensors are the dequantized
    values (close to the original checkpoint, not equal)."""
    pytest.importorskip("gguf")
    from gguf_fixtures import gguf_from_hf

    src = make_tiny_model("llama", tmp_path / "hf", seed=2, intermediate_size=128)
    gguf = gguf_from_hf(src, tmp_path / "m.gguf", qtype="Q8_0")
    with (
        ckir.compile(gguf, tmp_path / "b8", max_context=16) as q8,
        pytest.raises(CkirError, match=r"stored as q8_0p; only f32 and bf16 builds"),
    ):
        q8.save_pretrained(tmp_path / "no")
    assert not (tmp_path / "no").exists()
    with ckir.compile(gguf, tmp_path / "b32", max_context=16, dtype="f32") as f32:
        out = f32.save_pretrained(tmp_path / "saved")
    ours, ref = load_file(str(out / "model.safetensors")), load_file(str(src / "model.safetensors"))
    name = "model.layers.0.self_attn.q_proj.weight"
    assert np.abs(ours[name] - ref[name]).max() < 0.01 * np.abs(ref[name]).max()


@pytest.mark.parametrize(
    ("dtype", "panels", "stored"),
    [
        ("q8_0", False, "q8_0"),
        ("q8_0", None, "q8_0p"),
        ("q4_1", False, "q4_1"),
        ("q4_1", None, "q4_1p"),
        ("q4_0", None, "q4_0p"),
    ],
)
def test_quantized_build_is_refused(
    dtype: str, panels: bool | None, stored: str, tmp_path: Path
) -> None:
    """Block formats are refused, in panels (q8_0p / q4_1p, the default of a q8_0 /
    q4_1 build) or not (bf16 builds save their bf16 values: tests/test_panel_weights.py)."""
    src = make_tiny_model("llama", tmp_path / "hf", seed=1, intermediate_size=128)
    pattern = rf"stored as {stored}; only f32 and bf16 builds can be saved"
    with (
        ckir.compile(src, tmp_path / "b", max_context=16, dtype=dtype, panels=panels) as model,
        pytest.raises(CkirError, match=pattern),
    ):
        model.save_pretrained(tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_output_folder_policy(builds, tmp_path: Path) -> None:
    model = builds["gpt2"]
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    with pytest.raises(CkirError, match=r"not empty and is not an earlier ckir saved model"):
        model.save_pretrained(other)
    assert [p.name for p in other.iterdir()] == ["notes.txt"]
    with pytest.raises(CkirError, match=r"is or holds the source"):
        model.save_pretrained(model.build_dir)
    with pytest.raises(CkirError, match=r"is or holds the source"):
        model.save_pretrained(model.build_dir.parent)
    afile = tmp_path / "file"
    afile.write_text("x")
    with pytest.raises(CkirError, match=r"is a file or a symlink"):
        model.save_pretrained(afile)
    empty = tmp_path / "empty"
    empty.mkdir()
    model.save_pretrained(empty)
    model.save_pretrained(empty)  # an earlier saved folder: replaced whole
    stale = empty / "stale.bin"
    stale.write_text("mine")  # not ckir's: the folder is no longer replaced
    with pytest.raises(CkirError, match=r"saved model folder holds 'stale.bin', which ckir did"):
        model.save_pretrained(empty)
    assert stale.read_text() == "mine" and (empty / "model.safetensors").is_file()
    with pytest.raises(TypeError, match="out_dir"):
        model.save_pretrained(3)  # type: ignore[arg-type]


def test_trained_weights_are_saved(checkpoints, tmp_path: Path) -> None:
    """After two train steps the saved folder holds the trained weights: transformers'
    logits of it equal the build's own prefill (which runs the updated weights)."""
    src = checkpoints["gpt2"]
    with ckir.compile(
        src, tmp_path / "b", max_context=16, modes=("prefill", "decode", "backward")
    ) as model:
        rng = np.random.default_rng(0)
        for _ in range(2):
            seq = rng.integers(0, model.vocab_size, size=17)
            model.train_step(seq[:-1], seq[1:], lr=1e-2)
        out = model.save_pretrained(tmp_path / "saved")
        trained = model.weights()
        tokens = np.arange(1, 10)
        model.reset()
        ours = model.prefill(tokens)
    saved = load_file(str(out / "model.safetensors"))
    ref = load_file(str(src / "model.safetensors"))
    changed = [k for k in ref if not np.array_equal(saved[k], ref[k])]
    assert len(changed) == len(ref)  # AdamW moved every tensor
    # packed: c_attn's q columns are the transposed trained wq
    wq = trained["layers.0.attn.wq"]
    np.testing.assert_array_equal(saved["transformer.h.0.attn.c_attn.weight"][:, :64], wq.T)
    assert_close(ours, hf_logits(out, tokens), "trained gpt2")


# --------------------------------------------------------------------------- to_hf_state_dict


@pytest.fixture(scope="module")
def gpt2_graph(builds):
    return load_graph_model(builds["gpt2"].build_dir / "graph.mlir")


@pytest.fixture(scope="module")
def gpt2_arrays(builds) -> dict[str, np.ndarray]:
    return builds["gpt2"].weight_arrays()


def _set_slice(model, name: str, start: str, stop: str) -> None:
    decl = model.weights()[name]
    axis = decl.slice_spec[0]
    decl.properties["slice"] = ArrayAttr(
        [StringAttr(str(axis)), StringAttr(start), StringAttr(stop)]
    )


def test_packed_tensor_coverage_is_checked(gpt2_graph, gpt2_arrays) -> None:
    model = gpt2_graph.clone()
    state = to_hf_state_dict(model, gpt2_arrays)
    assert state["transformer.h.1.attn.c_attn.weight"].shape == (64, 192)
    assert "lm_head.weight" not in state  # tied: transformers re-ties it
    _set_slice(model, "layers.{i}.attn.wk", "0", "E")  # k overlaps q, the k columns are empty
    with pytest.raises(
        CkirError,
        match=r"HF tensor 'transformer.h.0.attn.c_attn.weight': 4096 of 12288 elements covered "
        r"by no slice, 4096 covered more than once",
    ):
        to_hf_state_dict(model, gpt2_arrays)


def test_export_errors_name_the_weight(gpt2_graph, gpt2_arrays) -> None:
    arrays = dict(gpt2_arrays)
    del arrays["layers.1.mlp.fc"]
    with pytest.raises(CkirError, match=r"no values for weight 'layers.1.mlp.fc'"):
        to_hf_state_dict(gpt2_graph, arrays)
    arrays = dict(gpt2_arrays, **{"layers.0.attn.bq": np.zeros(3, np.float32)})
    with pytest.raises(CkirError, match=r"'layers.0.attn.bq' has shape \[3\].*declares \[64\]"):
        to_hf_state_dict(gpt2_graph, arrays)
