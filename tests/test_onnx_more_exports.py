"""The ONNX frontend on two more exports of the tiny GPT-2 / Llama / Qwen2 models of
tests/test_onnx.py:

- ``sdpa-23``: ``torch.onnx.export(dynamo=True)`` at opset 23 of the models loaded with
  ``attn_implementation="sdpa"``: the exporter writes the native ``Attention`` op (with
  the HF causal mask as ``attn_mask``), which ``--onnx-fuse-attention`` recognises;
- ``torchscript``: the TorchScript exporter (``dynamo=False``, opset 18), through an
  export wrapper that hands the model a plain causal 4-D mask (the harness, not ckir:
  without it transformers' mask code calls ``torch.diff``, which that exporter cannot
  export).  Its spellings differ from dynamo's: the RMSNorm's ``x · Div(1, Sqrt(...))``
  with ``Cast``s, rotary cos/sin tables computed from ``x.size()`` (a ``Range`` through
  ``Unsqueeze`` / ``Cast`` / ``Mul(1)``), repeat_kv's ``Expand`` to a shape of ``Shape``
  values, and ``view(x.size(0), x.size(1), H, D)`` head views.

Asserted as for the dynamo exports: every pattern matched once per layer, nothing
decomposed left, prefill logits within 1e-4 relative of onnxruntime on the same file and
of transformers on the same weights, decode through ckir's KV cache equal to the prefill
rows.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from test_onnx import (  # noqa: E402
    DECOMPOSED,
    FUSED,
    LAYERS,
    MAX_CONTEXT,
    MODELS,
    assert_same_graph_ops,
    check_decode_rows,
    check_prefill,
    export_dynamo,
)

import ckir  # noqa: E402
from ckir.frontend.onnx import PIPELINE, import_onnx, load_onnx, run_pipeline  # noqa: E402
from ckir.passes.onnx_match import nodes  # noqa: E402
from ckir.tools.zoo import make_tiny_model  # noqa: E402

#: the exports imported end to end
EXPORTS = [f"{key}-sdpa-23" for key in MODELS] + [f"{key}-torchscript" for key in MODELS]


class _CausalMaskLogits(torch.nn.Module):
    """input_ids -> logits, the model given a plain causal 4-D additive mask."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        t = ids.shape[1]
        mask = torch.full((t, t), torch.finfo(torch.float32).min).triu(1)[None, None]
        return self.model(input_ids=ids, attention_mask=mask, use_cache=False).logits


def export_torchscript(model: torch.nn.Module, path: Path) -> Path:
    """``torch.onnx.export(dynamo=False)`` at opset 18 with a dynamic sequence length."""
    torch.onnx.export(
        _CausalMaskLogits(model).eval(),
        (torch.zeros((1, 7), dtype=torch.long),),
        str(path),
        dynamo=False,
        opset_version=18,
        input_names=["input_ids"],
        output_names=["logits"],
        dynamic_axes={"input_ids": {1: "T"}},
    )
    return path


@pytest.fixture(scope="module")
def exports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path]]:
    """export key ("llama-sdpa-23") -> (HF folder, .onnx file)."""
    root = tmp_path_factory.mktemp("onnx_more_exports")
    out = {}
    for key, (arch, overrides, _) in MODELS.items():
        hf = make_tiny_model(arch, root / key, seed=11, **overrides)
        load = transformers.AutoModelForCausalLM.from_pretrained
        sdpa = load(hf, attn_implementation="sdpa").eval()
        path = export_dynamo(sdpa, root / f"{key}-sdpa-23.onnx", 23)
        out[f"{key}-sdpa-23"] = (hf, path)
        eager = load(hf, attn_implementation="eager").eval()
        out[f"{key}-torchscript"] = (hf, export_torchscript(eager, root / f"{key}-ts.onnx"))
    return out


@pytest.fixture(scope="module")
def builds(exports: dict[str, tuple[Path, Path]], tmp_path_factory: pytest.TempPathFactory):
    """export key -> its compiled model (compiled on first use)."""
    root = tmp_path_factory.mktemp("onnx_more_builds")
    models: dict[str, Any] = {}

    def get(key: str) -> Any:
        if key not in models:
            models[key] = ckir.compile(exports[key][1], root / key, max_context=MAX_CONTEXT)
        return models[key]

    yield get
    for m in models.values():
        m.close()


def test_sdpa_export_has_native_attention(exports) -> None:
    for key in MODELS:
        model = onnx.load(str(exports[f"{key}-sdpa-23"][1]))
        kinds = [n.op_type for n in model.graph.node]
        assert kinds.count("Attention") == LAYERS, key
        assert "Softmax" not in kinds, key


@pytest.mark.parametrize("key", EXPORTS)
def test_every_pattern_matches_once_per_layer(key: str, exports) -> None:
    _, counts, misses = import_onnx(exports[key][1])
    arch = key.split("-")[0]
    for rule, n in MODELS[arch][2].items():
        assert counts[rule] == n, (rule, counts)
    # eager attention: the two activation MatMuls of each are no linear; sdpa: no MatMul
    expected = 2 * LAYERS if key.endswith("torchscript") else 0
    assert len(misses) == expected, misses
    assert all("the weight is not an initializer" in m for m in misses), misses


@pytest.mark.parametrize("key", EXPORTS)
def test_no_decomposed_op_left(key: str, exports) -> None:
    module = load_onnx(exports[key][1])
    run_pipeline(module, PIPELINE[:-1])
    left = {n.kind for n in nodes(module)}
    assert not left & (DECOMPOSED | {"Attention"}), left
    assert left <= FUSED, left


@pytest.mark.parametrize("key", EXPORTS)
def test_graph_matches_the_template_import(key: str, exports) -> None:
    assert_same_graph_ops(*exports[key])


@pytest.mark.parametrize("key", EXPORTS)
def test_prefill_matches_onnxruntime_and_transformers(key: str, exports, builds) -> None:
    check_prefill(builds(key), *exports[key], key)


@pytest.mark.parametrize("key", EXPORTS)
def test_decode_equals_prefill_rows(key: str, builds) -> None:
    check_decode_rows(builds(key), key)
