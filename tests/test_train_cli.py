"""``ckir train``: bad input ends in one line and leaves no output; a short real run on
the shipped corpus gives finite losses and a folder transformers loads.

The CLI runs in a subprocess (as in tests/test_bad_inputs.py): exit code 1, one
``error:`` line matching, no traceback, and no ``--out`` folder (nor a temporary
one beside it) left behind.  The tiny models get a byte-level ``tokenizer.json``
(``zoo.write_byte_tokenizer``: 256 tokens, the tiny vocabulary).
"""

from __future__ import annotations

import io
import json
import math
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from bad_inputs import clean_error

from ckir.errors import CkirError
from ckir.train import StepPrinter, check_numbers, windows

BIN = Path(sys.executable).parent
STEP_LINE = re.compile(r"^step (\d+)/(\d+)  loss (\S+)  [\d,]+ tok/s$")


def ckir(*args: str, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "ckir"), *args], capture_output=True, text=True, timeout=timeout, env=os.environ
    )


def step_losses(stdout: str) -> list[tuple[int, float]]:
    out = []
    for line in stdout.splitlines():
        m = STEP_LINE.match(line)
        assert m, line
        out.append((int(m.group(1)), float(m.group(3))))
    return out


@pytest.fixture(scope="module")
def llama(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny Llama (context 128, vocabulary 256) with a byte-level tokenizer."""
    pytest.importorskip("torch")
    from ckir.tools.zoo import make_tiny_model, write_byte_tokenizer

    path = make_tiny_model("llama", tmp_path_factory.mktemp("train_src") / "llama", seed=4)
    write_byte_tokenizer(path)
    return path


# --------------------------------------------------------------------------- in-process pieces


def test_windows_cover_every_target_once() -> None:
    ids = list(range(23))
    w = windows(ids, 5)
    assert w.shape == (4, 6)  # starts 0, 5, 10, 15; 20 + 6 > 23
    targets = np.concatenate([x[1:] for x in w])
    assert targets.tolist() == list(range(1, 21))
    assert windows(ids[:5], 5).shape == (0, 6)
    assert windows(ids[:6], 5).shape == (1, 6)


@pytest.mark.parametrize(
    "steps, seq_len, lr, pattern",
    [
        (0, 16, 1e-3, r"--steps must be >= 1"),
        (1, 0, 1e-3, r"--seq-len must be >= 1"),
        (1, 16, 0.0, r"--lr must be a finite number > 0"),
        (1, 16, -1.0, r"--lr must be"),
        (1, 16, math.nan, r"--lr must be"),
        (1, 16, math.inf, r"--lr must be"),
    ],
)
def test_check_numbers(steps: int, seq_len: int, lr: float, pattern: str) -> None:
    with pytest.raises(CkirError, match=pattern):
        check_numbers(steps, seq_len, lr)


def test_progress_lines_and_bar() -> None:
    plain = io.StringIO()
    p = StepPrinter(3, plain, tty=False)
    p.step(1, 5.5, 1234.0)
    p.step(2, 5.25, 99.0)
    p.close()
    assert plain.getvalue() == (
        "step 1/3  loss 5.5000  1,234 tok/s\nstep 2/3  loss 5.2500  99 tok/s\n"
    )
    term = io.StringIO()
    p = StepPrinter(2, term, tty=True)
    p.step(1, 5.5, 10.0)
    p.step(2, 5.0, 10.0)
    p.close()
    text = term.getvalue()
    assert text.startswith("\r[############............] step 1/2") and text.endswith("\n")
    assert text.count("\n") == 1 and text.count("\r") == 2
    assert "[########################] step 2/2  loss 5.0000" in text


# --------------------------------------------------------------------------- bad input (CLI)


def _write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


BAD_CASES = {
    "steps-zero": (["--steps", "0"], None, r"--steps must be >= 1, got 0"),
    "lr-zero": (["--lr", "0"], None, r"--lr must be a finite number > 0"),
    "lr-negative": (["--lr", "-0.1"], None, r"--lr must be a finite number > 0"),
    "lr-nan": (["--lr", "nan"], None, r"--lr must be a finite number > 0, got nan"),
    "weight-decay": (["--weight-decay", "-1"], None, r"weight-decay must be >= 0, got -1.0"),
    "max-grad-norm": (["--max-grad-norm", "inf"], None, r"max-grad-norm must be >= 0"),
    "seq-len-zero": (["--seq-len", "0"], None, r"--seq-len must be >= 1"),
    "seq-len-over-context": (
        ["--seq-len", "129"],
        None,
        r"--seq-len 129: longer than the model's context \(128 positions\)",
    ),
    "empty-data": ([], b"", r"the file is empty"),
    "blank-data": ([], b" \n\t\n", r"the file is empty"),
    "not-utf8": (
        [],
        "caf\u00e9 ".encode("latin-1") * 40,
        r"not UTF-8 text \(byte 0xe9 at offset 3\)",
    ),
    "too-short": (["--seq-len", "32"], b"only twenty tokens.", r"19 tokens; --seq-len 32 needs"),
    "accumulate-zero": (["--accumulate", "0"], None, r"--accumulate must be >= 1, got 0"),
    "distributed-without-torchrun": (
        ["--distributed"],
        None,
        r"--distributed: RANK is not set; start the processes with torchrun",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_CASES))
def test_bad_input_one_line_no_output(case: str, llama: Path, tmp_path: Path) -> None:
    args, data, pattern = BAD_CASES[case]
    extra = []
    if data is not None:
        extra = ["--data", str(_write(tmp_path / "data.txt", data))]
    out = tmp_path / "out"
    proc = ckir("train", str(llama), "--out", str(out), "--steps", "2", *extra, *args)
    clean_error(proc, pattern)
    assert not out.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


def test_missing_data_file_and_tokenizer(llama: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    proc = ckir("train", str(llama), "--out", str(out), "--data", str(tmp_path / "nope.txt"))
    clean_error(proc, r"--data .*nope.txt: no such file")
    no_tok = tmp_path / "no-tok"
    no_tok.mkdir()
    for f in ("config.json", "model.safetensors"):
        (no_tok / f).symlink_to(llama / f)
    proc = ckir("train", str(no_tok), "--out", str(out))
    clean_error(proc, r"tokenizer.json: not found")
    assert not out.exists()


def test_out_folder_policy(llama: Path, tmp_path: Path) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "keep.txt").write_text("keep")
    proc = ckir("train", str(llama), "--out", str(mine))
    clean_error(proc, r"--out .*mine: the folder is not empty and is not an earlier ckir saved")
    assert [p.name for p in mine.iterdir()] == ["keep.txt"]
    clean_error(ckir("train", str(llama), "--out", str(llama.parent)), r"is or holds the source")
    proc = ckir(
        "train", str(llama), "--out", str(tmp_path / "b"), "--build-dir", str(tmp_path / "b")
    )
    clean_error(proc, r"--out .*b: inside --build-dir .*b, which ckir replaces whole")


# --------------------------------------------------------------------------- real runs


def test_short_run_on_the_shipped_corpus(llama: Path, tmp_path: Path) -> None:
    transformers = pytest.importorskip("transformers")
    from safetensors.numpy import load_file

    out = tmp_path / "trained"
    build = tmp_path / "build"
    proc = ckir(
        "train",
        str(llama),
        "--steps",
        "3",
        "--seq-len",
        "16",
        "--out",
        str(out),
        "--build-dir",
        str(build),
        "-q",
    )
    assert proc.returncode == 0, proc.stderr
    losses = step_losses(proc.stdout)
    assert [k for k, _ in losses] == [1, 2, 3]
    assert all(math.isfinite(v) for _, v in losses)
    assert "corpus.txt" in proc.stderr and f"saved to {out.resolve()}" in proc.stderr
    assert (out / "tokenizer.json").is_file() and (out / "config.json").is_file()
    model, info = transformers.AutoModelForCausalLM.from_pretrained(out, output_loading_info=True)
    assert not any(info.values()), info
    saved = load_file(str(out / "model.safetensors"))
    original = load_file(str(llama / "model.safetensors"))
    assert sorted(saved) == sorted(original)
    assert all(np.isfinite(a).all() for a in saved.values())
    assert not np.array_equal(
        saved["model.embed_tokens.weight"], original["model.embed_tokens.weight"]
    )
    # the same run again replaces the saved folder (it holds the marker)
    proc = ckir("train", str(llama), "--steps", "1", "--seq-len", "16", "--out", str(out), "-q")
    assert proc.returncode == 0, proc.stderr


def test_diverging_run_saves_nothing_out_of_range(llama: Path, tmp_path: Path) -> None:
    """lr 1e30: the first step blows the weights up to ~1e30, a later step's loss or
    gradient norm is not finite; the run stops there, and the weights of the step before,
    finite but out of float16's range, are not saved (tests/test_bad_inputs_saving.py has
    the other cases)."""
    out = tmp_path / "trained"
    proc = ckir(
        "train",
        str(llama),
        "--steps",
        "4",
        "--seq-len",
        "16",
        "--lr",
        "1e30",
        "--out",
        str(out),
        "-q",
    )
    line = clean_error(
        proc,
        r"step (\d)/4: the (loss|gradient norm) .*; stopped\. Nothing was saved to .*: the "
        r"weights after step (\d) are out of range",
    )
    m = re.search(r"step (\d)/4: .* after step (\d)", line)
    assert m and int(m.group(2)) == int(m.group(1)) - 1
    assert len(step_losses(proc.stdout)) == int(m.group(2))
    assert not out.exists()


def test_gguf_source(tmp_path: Path) -> None:
    """A Q8_0 GGUF file trains (its weights dequantized to f32); the saved folder gets the
    HF names, the synthesized config and a tokenizer written from the GGUF vocabulary."""
    pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("gguf")
    from gguf_fixtures import gguf_from_hf, tokenizer_metadata

    from ckir.tokenizer import Tokenizer
    from ckir.tools.zoo import make_tiny_model

    # the fixture vocabulary: 3 specials + 256 bytes + 5 merges = 264 tokens
    src = make_tiny_model("llama", tmp_path / "hf", vocab_size=264, intermediate_size=128)
    gguf = gguf_from_hf(src, tmp_path / "m.gguf", qtype="Q8_0", metadata=tokenizer_metadata())
    out = tmp_path / "trained"
    proc = ckir("train", str(gguf), "--steps", "2", "--seq-len", "16", "--out", str(out), "-q")
    assert proc.returncode == 0, proc.stderr
    assert all(math.isfinite(v) for _, v in step_losses(proc.stdout))
    config = json.loads((out / "config.json").read_text())
    assert config["model_type"] == "llama" and config["vocab_size"] == 264
    _, info = transformers.AutoModelForCausalLM.from_pretrained(out, output_loading_info=True)
    assert not any(info.values()), info
    ours = Tokenizer.from_hf_dir(out)
    assert ours.encode("the cat", add_special_tokens=False) == Tokenizer.from_gguf(gguf).encode(
        "the cat", add_special_tokens=False
    )
    assert ours.eos_id == 2
