"""The command-line tools as a user runs them: outputs, exit codes, one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

BIN = Path(sys.executable).parent


def run(tool: str, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / tool), *args], capture_output=True, text=True, cwd=cwd, timeout=600
    )


def one_line_error(proc: subprocess.CompletedProcess[str]) -> str:
    assert proc.returncode != 0, proc.stdout
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1, proc.stderr
    return lines[0]


@pytest.fixture(scope="module")
def build(llama_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("cli") / "build"
    proc = run("ckir", "compile", str(llama_dir), "-o", str(out), "--max-context", "32", "-q")
    assert proc.returncode == 0, proc.stderr
    return out


def test_compile_writes_every_artifact(build: Path) -> None:
    names = {p.name for p in build.iterdir()}
    assert names >= {
        "graph.mlir",
        "layout.mlir",
        "layout.json",
        "layout.map",
        "model.h",
        "model.c",
        "weights.bin",
        "libmodel.so",
        "build.json",
    }
    assert not [p for p in build.parent.iterdir() if p.name.startswith(".")]  # no temp dirs


def test_compile_logits_last_runs_the_same_tokens(
    build: Path, llama_dir: Path, tmp_path: Path
) -> None:
    """``--logits last``: prefill saves one row; greedy tokens are the "all" build's."""
    last = tmp_path / "last"
    proc = run(
        "ckir",
        "compile",
        str(llama_dir),
        "-o",
        str(last),
        "--max-context",
        "32",
        "-q",
        "--logits",
        "last",
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads((last / "build.json").read_text())["logits"] == "last"
    outs = []
    for b in (build, last):
        npy = tmp_path / f"{b.name}.npy"
        proc = run(
            "ckir", "run", str(b), "--tokens", "3,1,4,1,5", "--steps", "4", "--logits-out", str(npy)
        )
        assert proc.returncode == 0, proc.stderr
        outs.append((proc.stdout, np.load(npy)))
    (all_tokens, all_rows), (last_tokens, last_rows) = outs
    assert last_tokens == all_tokens
    assert (all_rows.shape[0], last_rows.shape[0]) == (5 + 3, 1 + 3)
    np.testing.assert_allclose(last_rows, all_rows[4:], rtol=1e-4, atol=1e-4)


def test_compile_isa_avx2_opens_here_and_agrees(
    build: Path, llama_dir: Path, tmp_path: Path
) -> None:
    """``--isa avx2``: the AVX2 kernels (a build for other x86-64 CPUs; both machine kinds
    run it), recorded in build.json; its prefill logits are the native build's."""
    avx2 = tmp_path / "avx2"
    proc = run(
        "ckir", "compile", str(llama_dir), "-o", str(avx2), "--max-context", "32", "-q",
        "--isa", "avx2",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert json.loads((avx2 / "build.json").read_text())["isa"] == "avx2"
    rows = []
    for b in (build, avx2):
        npy = tmp_path / f"{b.name}.npy"
        proc = run("ckir", "run", str(b), "--tokens", "3,1,4,1,5", "--steps", "0",
                   "--logits-out", str(npy))  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        rows.append(np.load(npy))
    assert rows[0].shape == rows[1].shape == (5, rows[0].shape[1])
    np.testing.assert_allclose(rows[1], rows[0], rtol=1e-4, atol=1e-5)


def test_compile_refuses_an_unknown_isa(llama_dir: Path, tmp_path: Path) -> None:
    proc = run("ckir", "compile", str(llama_dir), "-o", str(tmp_path / "o"), "--isa", "avx9")
    assert proc.returncode == 2 and "invalid choice: 'avx9'" in proc.stderr
    assert "Traceback" not in proc.stderr and not (tmp_path / "o").exists()


def test_every_stage_reprints_identically(build: Path) -> None:
    for name in ("graph.mlir", "layout.mlir"):
        proc = run("ckir-opt", str(build / name))
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout == (build / name).read_text(), name


def test_run_prints_greedy_tokens_and_saves_logits(build: Path, tmp_path: Path) -> None:
    out = tmp_path / "logits.npy"
    proc = run(
        "ckir", "run", str(build), "--tokens", "1,2,3", "--steps", "5", "--logits-out", str(out)
    )
    assert proc.returncode == 0, proc.stderr
    tokens = [int(t) for t in proc.stdout.split()]
    logits = np.load(out)
    assert len(tokens) == 5 and logits.shape[0] == 3 + 4
    assert tokens[0] == int(logits[2].argmax())  # first token from the last prompt row
    assert tokens[1] == int(logits[3].argmax())


def test_inspect_reports_totals_and_kernels(build: Path) -> None:
    proc = run("ckir", "inspect", str(build))
    assert proc.returncode == 0, proc.stderr
    assert "weight" in proc.stdout and "kv_cache" in proc.stdout
    assert "decode: " in proc.stdout and "gemv_f32p x" in proc.stdout  # f32p: the default
    assert "prefill: " in proc.stdout and "gemm_f32p x" in proc.stdout
    # the fusion passes run by default; the tiny llama has 2 layers
    assert "fusion patterns fired:" in proc.stdout
    assert "decode: add_rmsnorm = 4, gate_up = 2, qkv = 2" in proc.stdout


def test_compile_help_names_the_panel_dtypes() -> None:
    """--dtype offers bf16p, q8_0p, q4_1p, q4_0p, q4_kp, q5_kp, q6_kp, q5_0p and q5_1p;
    --no-panels says it keeps f32, bf16, q8_0, q4_1, q4_0, the K-quants, q5_0 and q5_1
    matrices row-major."""
    proc = run("ckir", "compile", "--help")
    assert proc.returncode == 0, proc.stderr
    text = " ".join(proc.stdout.split()).replace("row- major", "row-major")  # argparse wraps
    choices = text.split("--no-panels")[0]
    for dtype in ("bf16p", "q8_0p", "q4_1p", "q4_0p", "q4_kp", "q5_kp", "q6_kp", "q5_0p", "q5_1p"):
        assert dtype in choices, dtype
    keep = "keep f32, bf16, q8_0, q4_1, q4_0, q4_k, q5_k, q6_k, q5_0 and q5_1 weight matrices"
    assert f"{keep} row-major" in text
    for plain in ("bf16", "q8_0", "q4_1", "q4_0", "q4_k", "q5_k", "q6_k", "q5_0", "q5_1"):
        assert f"{plain} in {plain}p" in text, plain


def test_import_to_file(llama_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "g.mlir"
    proc = run("ckir", "import", str(llama_dir), "-o", str(out))
    assert proc.returncode == 0, proc.stderr
    assert out.read_text().startswith("builtin.module {\n  graph.model @")


def test_import_a_gguf_file(llama_dir: Path, tmp_path: Path) -> None:
    """``ckir import`` takes every source ``compile`` takes: a GGUF file's graph names
    its GGUF tensors; a file that is neither is one line."""
    from gguf_fixtures import gguf_from_hf

    path = gguf_from_hf(llama_dir, tmp_path / "m.gguf")
    proc = run("ckir", "import", str(path))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("builtin.module {\n  graph.model @")
    assert 'gguf "blk.{i}.attn_q.weight"' in proc.stdout
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"not a model")
    proc = run("ckir", "import", str(junk))
    assert proc.returncode == 1
    want = f"error: {junk}: not a HF checkpoint folder, a GGUF file or an .onnx file"
    assert proc.stderr.strip() == want


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "BUILD", "--tokens", "1,99999"], "outside the vocabulary"),
        (["run", "BUILD", "--tokens", "1,x"], "--tokens: expected comma-separated integers"),
        (["run", "BUILD", "--tokens", ",".join(["1"] * 33)], "does not fit"),
        (["run", "/nonexistent", "--tokens", "1"], "not a complete ckir build"),
        (["compile", "/nonexistent", "-o", "OUT"], "/nonexistent"),
        (["compile", "MODEL", "-o", "OUT", "--modes", "prefill,train"], "unknown mode"),
        (["compile", "MODEL", "-o", "OUT", "--max-context", "100000"], "exceeds the model"),
        (["compile", "MODEL", "-o", "OUT", "--debug", "--strategy", "liveness"], "--debug"),
        (["compile", "MODEL", "-o", "OUT", "--logits", "first"], "--logits"),
    ],
)
def test_user_mistakes_get_one_line(
    args: list[str], message: str, build: Path, llama_dir: Path, tmp_path: Path
) -> None:
    subst = {"BUILD": str(build), "MODEL": str(llama_dir), "OUT": str(tmp_path / "out")}
    proc = run("ckir", *[subst.get(a, a) for a in args])
    assert message in one_line_error(proc)
    assert not (tmp_path / "out").exists()  # nothing half-written
    assert not list(tmp_path.glob(".out*"))


def test_ckir_opt_errors_leave_no_output(tmp_path: Path) -> None:
    bad = tmp_path / "bad.mlir"
    bad.write_text('builtin.module {\n  %x = "graph.nonsense"() : () -> i32\n}\n')
    out = tmp_path / "out.mlir"
    proc = run("ckir-opt", str(bad), "-o", str(out))
    line = proc.stderr.splitlines()[0]
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert line.startswith(f"{bad}:2:") and "graph.nonsense" in line
    assert not out.exists()


def test_ckir_opt_verifier_error(tmp_path: Path) -> None:
    text = (Path(__file__).parent / "filecheck/inputs/tiny_llama.mlir").read_text()
    bad = tmp_path / "bad.mlir"
    bad.write_text(text.replace('{weights = [@"layers.{i}.attn.wq"]}', "{weights = [@nope]}"))
    proc = run("ckir-opt", str(bad))
    err = one_line_error(proc)
    assert "@nope" in err


def test_ckir_opt_help_lists_every_pass() -> None:
    from ckir.universe import PASSES

    proc = run("ckir-opt", "--help")
    assert proc.returncode == 0
    for name in PASSES:
        assert f"--{name}" in proc.stdout
    assert "(unavailable" not in proc.stdout


def test_xdsl_opt_sees_ckir() -> None:
    text = (Path(__file__).parent / "filecheck/inputs/tiny_llama.mlir").read_text()
    proc = subprocess.run(
        [str(BIN / "xdsl-opt"), "-p", "lower-decode{max-context=8}"],
        input=text,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert "lowered.program @decode" in proc.stdout
