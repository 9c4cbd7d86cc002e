"""The tensor table (``--annotate-tensors``) and the quantization annotator
(``--annotate-quant``, ``ckir compile --qconfig``) on real tiny checkpoints."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import pytest

import ckir
from ckir.compiler import CompileOptions, compile_model
from ckir.errors import CkirError
from ckir.frontend import import_model
from ckir.ir_io import load_module, parse_module, print_module
from ckir.tensor_table import ROLES, tensor_table

TOKENS = [3, 1, 4, 1, 5, 9, 2]


def _rows(module):  # -> dict[str, TensorRow]
    return {r.name: r for r in tensor_table(module)}


@pytest.mark.parametrize("arch", ["llama", "gpt2", "qwen2"])
def test_every_hf_import_has_the_table(tiny_model, arch: str) -> None:
    module, _, _ = import_model(tiny_model(arch))
    rows = _rows(module)
    assert {r.role for r in rows.values()} == set(ROLES)
    assert rows["tokens"].role == "io" and rows["footer.logits"].role == "io"
    assert rows["embed"].role == "embedding" and rows["embed"].layout == "[V, E]"
    assert rows["layers.{i}.attn.wq"].layout == "[N, K]"
    assert rows["layers.{i}.q"].layout == "[T, H, D]"
    assert rows["layers.{i}.kv"].role == "kv" and rows["layers.{i}.kv"].layout.startswith("[PT, ")
    assert all(r.qbits == 32 for r in rows.values())
    # the table is IR: it round-trips through the text
    text = print_module(module)
    again = parse_module(text, "graph.mlir")
    assert print_module(again) == text
    assert _rows(again) == rows


def test_gguf_import_table_has_the_blocks_bits(tmp_path: Path) -> None:
    pytest.importorskip("gguf")
    from gguf_fixtures import gguf_from_hf

    from ckir.tools.zoo import make_tiny_model

    hf = make_tiny_model("llama", tmp_path / "hf", intermediate_size=128)  # K % 32 == 0
    path = gguf_from_hf(hf, tmp_path / "tiny.gguf", qtype="Q4_1")
    module, _, _ = import_model(path)
    rows = _rows(module)
    q = rows["layers.{i}.attn.wq"]
    assert (q.dtype, q.qbits, q.role) == ("q4_1", 4, "weight")
    assert rows["layers.{i}.attn_norm"].qbits == 32
    # q4_1 linear layers quantize their input to int8: what feeds them is 8 bits
    assert rows["layers.{i}.h"].qbits == 8
    assert rows["layers.{i}.q"].qbits == 32  # read by rope


def test_inspect_tensors_prints_and_writes_json(llama_dir: Path, tmp_path: Path) -> None:
    graph = tmp_path / "graph.mlir"
    subprocess.run(["ckir", "import", str(llama_dir), "-o", str(graph)], check=True)
    out = tmp_path / "t.json"
    proc = subprocess.run(
        ["ckir", "inspect", str(graph), "--tensors", "--json", str(out)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].split() == ["name", "role", "layout", "shape", "dtype", "qbits", "op"]
    assert any(ln.split()[:3] == ["layers.{i}.kv", "kv", "[PT,"] for ln in lines)
    data = json.loads(out.read_text())["tensors"]
    assert [d["name"] for d in data] == [r.name for r in tensor_table(load_module(graph))]
    assert lines[-1].startswith(f"{len(data)} tensors: ")
    bad = subprocess.run(
        ["ckir", "inspect", str(tmp_path / "none"), "--tensors"], capture_output=True, text=True
    )
    assert bad.returncode == 1 and "no such file" in bad.stderr and "Traceback" not in bad.stderr


def _logits(build: Path) -> tuple[np.ndarray, np.ndarray]:
    with ckir.load(build) as m:
        return m.prefill(TOKENS).copy(), m.decode(7).copy()


def test_qconfig_weights_8_is_dtype_q8_0(llama_dir: Path, tmp_path: Path) -> None:
    """The qbits are the source of the storage: ``weights: 8`` builds what ``--dtype q8_0``
    builds, bit for bit, and says so in the table."""
    cfg = tmp_path / "q.yaml"
    cfg.write_text("weights: 8\n")
    a = compile_model(llama_dir, tmp_path / "a", CompileOptions(max_context=32, qconfig=str(cfg)))
    b = compile_model(llama_dir, tmp_path / "b", CompileOptions(max_context=32, dtype="q8_0"))
    info = [json.loads((x / "build.json").read_text()) for x in (a, b)]
    assert info[0]["weight_dtypes"] == info[1]["weight_dtypes"]
    assert info[0]["dtype_fallbacks"] == info[1]["dtype_fallbacks"] != {}
    for x, y in zip(_logits(a), _logits(b), strict=True):
        np.testing.assert_array_equal(x, y)
    for build in (a, b):
        rows = _rows(load_module(build / "layout.mlir"))
        assert rows["layers.{i}.attn.wq"].qbits == 8 and rows["layers.{i}.attn.wq"].dtype == "q8_0p"
        assert rows["layers.{i}.mlp.down"].qbits == 32  # K = 172: no block format
        assert rows["layers.{i}.h"].qbits == 8  # the q8_0 GEMVs read it as int8
    asked = _rows(load_module(a / "layout.mlir"))["layers.{i}.mlp.down"]
    assert asked.requested == 8


def test_qconfig_per_layer_and_globs(llama_dir: Path, tmp_path: Path) -> None:
    cfg = tmp_path / "q.yaml"
    cfg.write_text(
        "weights: 8\nlayers:\n  1: {weights: 4}\ntensors:\n  'layers.*.mlp.down': 16\n"
        "  lm_head: {weights: 3}\nkv: 8\n"
    )
    warnings: list[str] = []
    build = compile_model(
        llama_dir,
        tmp_path / "mixed",
        CompileOptions(max_context=32, qconfig=str(cfg)),
        on_warning=warnings.append,
    )
    layout = (build / "layout.mlir").read_text()
    assert "@w.layers.0.attn.wq weight : !lowered.buf<[64, 64], q8_0p>" in layout
    assert "@w.layers.1.attn.wq weight : !lowered.buf<[64, 64], q4_0p>" in layout
    assert "@w.layers.1.mlp.down weight : !lowered.buf<[64, 172], bf16p>" in layout
    # kv: 8 is the Q8_0 cache, head_dim 16 padded to one block: [ctx, KV*32]
    assert "@kv.layers.0.k kv_cache : !lowered.buf<[32, 64], q8_0>" in layout
    # one line per unserved tensor + the summary
    assert [w.split(":")[0] for w in warnings] == [
        "graph.weight lm_head (tensor 'lm_head.weight')",
        "--annotate-quant",
    ]
    rows = _rows(load_module(build / "layout.mlir"))
    assert rows["layers.{i}.attn.wq"].layer_qbits == (8, 4)
    assert rows["lm_head"].qbits == 32 and rows["lm_head"].requested == 3
    assert rows["layers.{i}.kv"].qbits == 8 and rows["layers.{i}.kv"].requested is None
    # numerics: between the all-q8_0 and the all-q4_0 builds' errors against f32
    ref = _logits(compile_model(llama_dir, tmp_path / "f", CompileOptions(max_context=32)))[0]
    errs = {}
    for name, opts in {
        "q8": CompileOptions(max_context=32, dtype="q8_0"),
        "q4": CompileOptions(max_context=32, dtype="q4_0"),
    }.items():
        errs[name] = np.abs(_logits(compile_model(llama_dir, tmp_path / name, opts))[0] - ref).max()
    mixed = np.abs(_logits(build)[0] - ref).max()
    assert errs["q8"] < mixed < 1.5 * errs["q4"], (errs, mixed)


def test_qconfig_strict_and_bad_files(llama_dir: Path, tmp_path: Path) -> None:
    cfg = tmp_path / "q.yaml"
    cfg.write_text("weights: 4\n")
    with pytest.raises(CkirError, match=r"--strict: .*graph.weight layers.\{i\}.mlp.down"):
        compile_model(llama_dir, tmp_path / "s", CompileOptions(qconfig=str(cfg), strict=True))
    assert not (tmp_path / "s").exists()
    for text, needle in [
        ("weights: 8\ntensors:\n  lm_head: {weigths: 4}\n", "key 'tensors.lm_head.weigths'"),
        ("layers:\n  x-1: {weights: 4}\n", "key 'layers.x-1'"),
        ("formats: {4: q8_0}\n", "key 'formats.4': 'q8_0' is not a 4-bit weight dtype"),
        ("kv: 0\n", "key 'kv': expected a number of bits"),
        ("bits: 8\n", "key 'bits': unknown"),
        ("weights: [8\n", "not valid YAML"),
    ]:
        cfg.write_text(text)
        with pytest.raises(CkirError, match=r"^" + str(cfg).replace(".", r"\.") + ": ") as err:
            CompileOptions(qconfig=str(cfg))
        assert needle in str(err.value)
    ok = _write(tmp_path / "ok.yaml", "weights: 8\n")
    with pytest.raises(CkirError, match="training builds need f32 weights"):
        CompileOptions(qconfig=str(ok), modes=("prefill", "backward"))
    proc = subprocess.run(
        ["ckir", "compile", str(llama_dir), "-o", str(tmp_path / "c"), "--qconfig", str(cfg)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 1 and "not valid YAML" in proc.stderr
    assert "Traceback" not in proc.stderr


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_qconfig_activations_8_is_the_int8_prefill(llama_dir: Path, tmp_path: Path) -> None:
    """``activations: 8`` is served by the int8 path: the table says 8 where Q8_0 linear
    layers read, build.json asks for int8 prefill and ``ckir run`` runs it (as
    ``--int8-prefill``); without it ``ckir run`` keeps fp32 x."""
    cfg = _write(tmp_path / "q.yaml", "weights: 8\nactivations: 8\n")
    plain = _write(tmp_path / "p.yaml", "weights: 8\n")
    builds = {}
    for name, c in (("int8", cfg), ("plain", plain)):
        opts = CompileOptions(max_context=32, qconfig=str(c))
        builds[name] = compile_model(llama_dir, tmp_path / name, opts)
    infos = {k: json.loads((b / "build.json").read_text()) for k, b in builds.items()}
    assert infos["int8"]["qconfig_int8_prefill"] is True
    assert infos["plain"]["qconfig_int8_prefill"] is False
    with ckir.load(builds["int8"]) as m:
        if not m.int8_prefill_dot:
            pytest.skip("this runtime has no int8 prefill GEMM")
        m.int8_prefill = True
        int8 = m.prefill(TOKENS).copy()
        m.reset()
        m.int8_prefill = False
        fp32 = m.prefill(TOKENS).copy()
    assert not np.array_equal(int8, fp32)
    for name, want in (("int8", int8), ("plain", fp32)):
        npy = tmp_path / f"{name}.npy"
        tokens = ",".join(map(str, TOKENS))
        subprocess.run(
            ["ckir", "run", str(builds[name]), "--tokens", tokens, "--steps", "0",
             "--logits-out", str(npy)],
            check=True,
        )  # fmt: skip
        np.testing.assert_array_equal(np.load(npy)[: len(TOKENS)], want)
    rows = _rows(load_module(builds["int8"] / "layout.mlir"))
    assert rows["layers.{i}.h"].qbits == 8 and rows["layers.{i}.h"].requested is None
    assert rows["footer.h"].qbits == 8  # the q8_0 LM head reads it
    assert rows["layers.{i}.m"].requested == 8  # mlp.down stays f32 (K = 172)
