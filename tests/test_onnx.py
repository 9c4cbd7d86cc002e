"""The ONNX frontend on real exports: random-weight tiny GPT-2 (odd sizes), Llama (GQA) and
Qwen2 (q/k/v biases, tied head) models exported by ``torch.onnx.export(dynamo=True)`` at
opsets 18 and 23 (which has native RMSNormalization and RotaryEmbedding ops), imported,
fused, compiled.

Oracles: onnxruntime on the same file and transformers on the same weights for prefill
logits (<= 1e-4 relative, fp32), transformers with its KV cache for decode, and the
prefill's own rows for decode from an empty cache.  Fusion counts are asserted per
layer (as ORT's transformer-optimizer tests do).  Bad inputs fail with one line.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from test_bad_inputs import ckir as ckir_cli  # noqa: E402
from test_bad_inputs import clean_error  # noqa: E402
from test_parity import assert_close, assert_decode_matches  # noqa: E402

import ckir  # noqa: E402
from ckir.errors import CkirError  # noqa: E402
from ckir.frontend.onnx import PIPELINE, import_onnx, load_onnx, run_pipeline  # noqa: E402
from ckir.passes.onnx_match import nodes  # noqa: E402
from ckir.tools.zoo import make_tiny_model  # noqa: E402

LAYERS = 3
MAX_CONTEXT = 40
#: ONNX op types that would mean a norm, GELU or attention was left decomposed
DECOMPOSED = {
    "LayerNormalization",
    "ReduceMean",
    "Sqrt",
    "Pow",
    "Tanh",
    "Erf",
    "Softmax",
    "MatMul",
    "Gemm",
    "Transpose",
    "Split",
    "RMSNormalization",
    "RotaryEmbedding",
}


class _Logits(torch.nn.Module):
    """input_ids -> logits, without a KV cache (the prefill graph)."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=ids, use_cache=False).logits


def export_dynamo(model: torch.nn.Module, path: Path, opset: int = 18) -> Path:
    """``torch.onnx.export(dynamo=True)`` with a dynamic sequence length."""
    ids = torch.zeros((1, 7), dtype=torch.long)
    seq = torch.export.Dim("T", min=2, max=MAX_CONTEXT)
    torch.onnx.export(
        _Logits(model).eval(),
        (ids,),
        str(path),
        dynamo=True,
        opset_version=opset,
        input_names=["input_ids"],
        output_names=["logits"],
        dynamic_shapes={"ids": {1: seq}},
        optimize=True,
    )
    return path


#: key -> (zoo arch, config overrides, expected matches per rule)
MODELS: dict[str, tuple[str, dict, dict[str, int]]] = {
    "gpt2": (
        "gpt2",
        {"n_embd": 36, "n_head": 3, "n_layer": LAYERS, "vocab_size": 97},
        {
            "attention": LAYERS,
            "gelu": LAYERS,
            "layernorm": 2 * LAYERS + 1,
            "split-linear": LAYERS,  # c_attn -> q, k, v
            "linear": 4 * LAYERS + 1,  # c_attn, attn c_proj, c_fc, mlp c_proj; the head
            "tied-lm-head": 1,
            "embed": 1,
            "pos-embed": 1,
        },
    ),
    "llama": (
        "llama",
        {"num_hidden_layers": LAYERS},
        {
            "attention": LAYERS,
            "rope": 2 * LAYERS,  # q and k
            "rmsnorm": 2 * LAYERS + 1,
            "swiglu": LAYERS,
            "linear": 7 * LAYERS + 1,
            "tied-lm-head": 0,
            "embed": 1,
        },
    ),
    "qwen2": (
        "qwen2",
        {"num_hidden_layers": LAYERS},
        {
            "attention": LAYERS,
            "rope": 2 * LAYERS,
            "rmsnorm": 2 * LAYERS + 1,
            "swiglu": LAYERS,
            "linear": 7 * LAYERS + 1,
            "tied-lm-head": 1,
            "embed": 1,
        },
    ),
}
#: what may be left of a fused graph before --onnx-to-graph
FUSED = {
    "ckir.Embed",
    "ckir.PosEmbed",
    "ckir.LayerNorm",
    "ckir.RMSNorm",
    "ckir.Linear",
    "ckir.Gelu",
    "ckir.SwiGLU",
    "ckir.Rope",
    "ckir.Attention",
    "Add",
}


#: the exports tested: "<model>-<opset>"
EXPORTS = [f"{key}-{opset}" for key in MODELS for opset in (18, 23)]


@pytest.fixture(scope="module")
def exports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path]]:
    """export key ("llama-23") -> (HF folder, .onnx file)."""
    root = tmp_path_factory.mktemp("onnx_exports")
    out = {}
    for key, (arch, overrides, _) in MODELS.items():
        hf = make_tiny_model(arch, root / key, seed=11, **overrides)
        model = transformers.AutoModelForCausalLM.from_pretrained(hf, attn_implementation="eager")
        for opset in (18, 23):
            path = export_dynamo(model.eval(), root / f"{key}-{opset}.onnx", opset)
            out[f"{key}-{opset}"] = (hf, path)
    return out


@pytest.fixture(scope="module")
def builds(exports: dict[str, tuple[Path, Path]], tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("onnx_builds")
    models = {
        key: ckir.compile(onnx_path, root / key, max_context=MAX_CONTEXT)
        for key, (_, onnx_path) in exports.items()
    }
    yield models
    for m in models.values():
        m.close()


@pytest.mark.parametrize("key", EXPORTS)
def test_every_pattern_matches_once_per_layer(key: str, exports) -> None:
    _, counts, misses = import_onnx(exports[key][1])
    for rule, n in MODELS[key.split("-")[0]][2].items():
        assert counts[rule] == n, (rule, counts)
    # what did not match: only the two activation MatMuls of each attention
    assert len(misses) == 2 * LAYERS, misses
    assert all("the weight is not an initializer" in m for m in misses), misses


@pytest.mark.parametrize("key", EXPORTS)
def test_no_decomposed_op_left(key: str, exports) -> None:
    module = load_onnx(exports[key][1])
    before = {n.kind for n in nodes(module)}
    assert {"Softmax", "MatMul"} <= before
    run_pipeline(module, PIPELINE[:-1])
    left = {n.kind for n in nodes(module)}
    assert not left & DECOMPOSED, left
    assert left <= FUSED, left


def assert_same_graph_ops(hf_dir: Path, onnx_path: Path) -> None:
    """The ONNX graph has the ops of the template's graph of the same checkpoint, in order."""
    from ckir.dialects import graph as g
    from ckir.frontend import import_model

    def kinds(module) -> list[str]:
        return [op.name for op in module.walk() if isinstance(op, g.ComputeOp)]

    onnx_graph, _, _ = import_model(onnx_path)
    hf_graph, _, _ = import_model(hf_dir)
    assert kinds(onnx_graph) == kinds(hf_graph)


@pytest.mark.parametrize("key", EXPORTS)
def test_graph_matches_the_template_import(key: str, exports) -> None:
    assert_same_graph_ops(*exports[key])


def check_prefill(model, hf_dir: Path, onnx_path: Path, key: str) -> None:
    """Prefill logits of a compiled export vs onnxruntime on the file and transformers."""
    rng = np.random.default_rng(1)
    tokens = rng.integers(0, model.vocab_size, size=13)
    model.reset()
    ours = model.prefill(tokens)
    sess = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    ref = sess.run(None, {"input_ids": tokens[None].astype(np.int64)})[0][0]
    assert_close(ours, ref, f"{key} prefill vs onnxruntime")
    hf = transformers.AutoModelForCausalLM.from_pretrained(hf_dir).eval()
    with torch.no_grad():
        ref_hf = hf(torch.tensor(tokens[None])).logits[0].numpy()
    assert_close(ours, ref_hf, f"{key} prefill vs transformers")


def check_decode_rows(model, key: str) -> np.ndarray:
    """Decode from an empty ckir KV cache equals the prefill's rows; returns the tokens."""
    rng = np.random.default_rng(2)
    tokens = rng.integers(0, model.vocab_size, size=9)
    model.reset()
    full = model.prefill(tokens)
    model.reset()
    rows = np.stack([model.decode(int(t)) for t in tokens])
    assert_close(rows, full, f"{key} decode from empty vs prefill rows")
    return tokens


@pytest.mark.parametrize("key", EXPORTS)
def test_prefill_matches_onnxruntime_and_transformers(key: str, exports, builds) -> None:
    check_prefill(builds[key], *exports[key], key)


@pytest.mark.parametrize("key", EXPORTS)
def test_decode_with_ckir_kv_cache(key: str, exports, builds) -> None:
    model = builds[key]
    tokens = check_decode_rows(model, key)
    hf = transformers.AutoModelForCausalLM.from_pretrained(exports[key][0]).eval()
    assert_decode_matches(model, hf, tokens[:4], tokens[4:], f"onnx {key}")


def test_explain_cli(exports) -> None:
    proc = ckir_cli("import", str(exports["llama-18"][1]), "--explain")
    assert proc.returncode == 0, proc.stderr
    assert f"attention: {LAYERS} matched" in proc.stdout
    assert f"rope: {2 * LAYERS} matched" in proc.stdout
    assert "miss: linear: " in proc.stdout and "the weight is not an initializer" in proc.stdout


# --------------------------------------------------------------------------- bad inputs


def _tiny_onnx(path: Path, op_type: str) -> Path:
    """ids -> Gather(table) -> ``op_type`` -> output: an op after the embedding."""
    from onnx import TensorProto, helper, numpy_helper

    table = numpy_helper.from_array(np.ones((10, 4), np.float32), "table")
    graph = helper.make_graph(
        [
            helper.make_node("Gather", ["table", "ids"], ["e"], name="emb"),
            helper.make_node(op_type, ["e"], ["y"], name="the_node"),
        ],
        "g",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, [1, "T"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [table],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]), str(path))
    return path


def test_unsupported_op_is_one_line(tmp_path: Path) -> None:
    path = _tiny_onnx(tmp_path / "sin.onnx", "Sin")
    with pytest.raises(CkirError, match=r"ONNX node 'the_node': op_type Sin \(opset 18\)"):
        import_onnx(path)
    clean_error(ckir_cli("import", str(path)), r"ONNX node 'the_node': op_type Sin \(opset 18\)")


def test_truncated_file_is_one_line(exports, tmp_path: Path) -> None:
    bad = tmp_path / "cut.onnx"
    data = exports["gpt2-18"][1].read_bytes()
    bad.write_bytes(data[: len(data) // 2])
    clean_error(ckir_cli("import", str(bad)), r"cut\.onnx: not a readable ONNX model")
    clean_error(
        ckir_cli("compile", str(bad), "-o", str(tmp_path / "b")),
        r"cut\.onnx: not a readable ONNX model",
    )


def test_onnx_takes_no_template(exports) -> None:
    clean_error(
        ckir_cli("import", str(exports["gpt2-18"][1]), "--template", "gpt2"), r"takes no --template"
    )
