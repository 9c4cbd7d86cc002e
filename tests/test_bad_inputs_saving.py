"""The bad-input suite, part two: training and saving lose nothing (issue 30).

Each case runs as a new user would (the CLI in a subprocess, or the Python API) and
asserts the outcome: exit code, the one ``error:`` line, and every file outside the
requested output untouched (``bad.snapshot``).  docs/reliability.md, "The folder
rule" and "Replacing a folder", says what is checked where.

* a folder ckir replaces whole (a build, a saved model) never ends up holding what
  ckir did not write there: an output inside one is refused, and an earlier build or
  saved model holding a foreign entry is refused instead of replaced;
* ``--data`` that is a FIFO is refused before it is opened (no hang);
* a diverging run saves nothing unless the weights it would save are finite and give
  a finite loss on the batch trained last;
* a save killed at every step of the replacement (an injected pause,
  ``CKIR_TEST_PAUSE``) leaves the old or the new folder at its name, or the next
  command puts the old one back and says so;
* ``--debug`` builds are byte-identical.
"""

from __future__ import annotations

import hashlib
import os
import re
import select
import shutil
import subprocess
import sys
import time
from pathlib import Path

import bad_inputs as bad
import pytest
from bad_inputs import clean_error

from ckir.errors import CkirError

BIN = Path(sys.executable).parent


def run_ckir(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(BIN / "ckir"), *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **(env or {})},
    )


def digests(folder: Path) -> dict[str, str]:
    """Every file of ``folder`` (recursively) -> the SHA-256 of its bytes."""
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def llama(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny Llama (context 128, vocabulary 256) with a byte-level tokenizer: trainable."""
    pytest.importorskip("torch")
    from ckir.tools.zoo import write_byte_tokenizer

    path = bad.tiny_llama(tmp_path_factory.mktemp("save_src") / "llama", seed=11)
    write_byte_tokenizer(path)
    return path


@pytest.fixture(scope="module")
def builds(llama: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """Two f32 builds whose saved folders differ: the model and a copy with other weights."""
    from ckir.compiler import CompileOptions, compile_model
    from ckir.tools.zoo import write_byte_tokenizer

    root = tmp_path_factory.mktemp("save_builds")
    other = bad.tiny_llama(root / "llama-b", seed=12)
    write_byte_tokenizer(other)
    options = CompileOptions(max_context=16)
    return (
        compile_model(llama, root / "build-a", options),
        compile_model(other, root / "build-b", options),
    )


@pytest.fixture(scope="module")
def saved(builds: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The two builds saved (``save_pretrained``) once each: the expected folders."""
    import ckir

    root = tmp_path_factory.mktemp("save_expected")
    out = []
    for build, name in zip(builds, ("a", "b"), strict=True):
        with ckir.load(build) as model:
            out.append(model.save_pretrained(root / name))
    return out[0], out[1]


# --------------------------------------------------------------------------- the folder rule


def test_train_out_inside_build_dir_is_refused(llama: Path, tmp_path: Path) -> None:
    """Case 1: a second ``ckir train --build-dir out/bt`` would replace out/bt whole."""
    (tmp_path / "keep.txt").write_text("the user's\n")
    before = bad.snapshot(tmp_path)
    bt = tmp_path / "out" / "bt"
    proc = run_ckir("train", str(llama), "--build-dir", str(bt), "--out", str(bt / "trained"))
    clean_error(proc, r"--out .*bt/trained: inside --build-dir .*bt, which ckir replaces whole")
    proc = run_ckir("train", str(llama), "--build-dir", str(bt / "b"), "--out", str(bt))
    clean_error(proc, r"--build-dir .*bt/b: inside --out .*bt, which ckir replaces whole")
    assert bad.snapshot(tmp_path) == before  # refused before the compile: nothing written


def test_save_inside_a_build_is_refused(builds: tuple[Path, Path], tmp_path: Path) -> None:
    """Case 2: ``save_pretrained("out/b/hf")`` would be deleted by the next compile of out/b."""
    import ckir

    build = tmp_path / "b"
    shutil.copytree(builds[0], build)
    before = bad.snapshot(tmp_path)
    with ckir.load(build) as model, pytest.raises(CkirError) as err:
        model.save_pretrained(build / "hf")
    assert re.search(
        r"hf: inside the ckir build folder .*/b, which ckir replaces whole", str(err.value)
    )
    proc = run_ckir("train", str(builds[0]), "--out", str(build / "deeper" / "hf"))
    clean_error(proc, r"inside the ckir build folder .*/b,")
    assert bad.snapshot(tmp_path) == before


def test_build_inside_a_saved_model_is_refused(
    llama: Path, saved: tuple[Path, Path], tmp_path: Path
) -> None:
    folder = tmp_path / "hf"
    shutil.copytree(saved[0], folder)
    before = bad.snapshot(tmp_path)
    proc = run_ckir("compile", str(llama), "-o", str(folder / "build"), "-q")
    clean_error(proc, r"-o .*hf/build: inside the ckir saved model folder .*hf, which ckir")
    assert bad.snapshot(tmp_path) == before


@pytest.mark.parametrize("kind", ["build", "saved"])
def test_earlier_folder_with_a_foreign_entry_is_refused(
    kind: str,
    llama: Path,
    builds: tuple[Path, Path],
    saved: tuple[Path, Path],
    tmp_path: Path,
) -> None:
    """A folder the user put into a build (or a saved model) by hand is not deleted with
    it: the replacement is refused, naming the entry; once it is moved out, it goes on."""
    import ckir

    folder = tmp_path / "target"
    shutil.copytree(builds[0] if kind == "build" else saved[0], folder)
    shutil.copytree(saved[1], folder / "hf")  # e.g. a saved model moved in by hand
    (folder / "notes.txt").write_text("mine\n")
    before = bad.snapshot(tmp_path)
    if kind == "build":
        proc = run_ckir("compile", str(llama), "-o", str(folder), "-q", "--max-context", "16")
        clean_error(proc, r"-o .*target: the earlier ckir build holds 'hf' \(and 1 more\), which")
    else:
        with ckir.load(builds[0]) as model, pytest.raises(CkirError) as err:
            model.save_pretrained(folder)
        assert "the earlier ckir saved model folder holds 'hf' (and 1 more)" in str(err.value)
    assert bad.snapshot(tmp_path) == before
    shutil.rmtree(folder / "hf")
    (folder / "notes.txt").unlink()
    if kind == "build":
        proc = run_ckir("compile", str(llama), "-o", str(folder), "-q", "--max-context", "16")
        assert proc.returncode == 0, proc.stderr
    else:
        with ckir.load(builds[1]) as model:
            model.save_pretrained(folder)
        assert digests(folder) == digests(saved[1])


# --------------------------------------------------------------------------- reading paths


def test_data_fifo_does_not_hang(llama: Path, tmp_path: Path) -> None:
    """Case 3: ``--data`` naming a FIFO is refused before ``open()`` (which would block)."""
    pipe = bad.fifo(tmp_path / "data.txt")
    (tmp_path / "folder").mkdir()
    before = bad.snapshot(tmp_path)
    t0 = time.monotonic()
    proc = run_ckir("train", str(llama), "--data", str(pipe), "--out", str(tmp_path / "out"))
    clean_error(proc, r"--data .*data\.txt: not a regular file \(a FIFO, socket or device\)")
    assert time.monotonic() - t0 < 60
    proc = run_ckir("train", str(llama), "--data", str(tmp_path / "folder"), "--out", "o")
    clean_error(proc, r"--data .*folder: is a folder, not a file")
    assert bad.snapshot(tmp_path) == before


# --------------------------------------------------------------------------- last good means good


@pytest.mark.parametrize(
    "steps,pattern",
    [
        # stops at step 2 (a non-finite gradient norm); the weights after step 1 are 1e30
        (
            "6",
            r"step 2/6: the (loss|gradient norm) .*; stopped\. Nothing was saved to .*trained: "
            r"the weights after step 1 are out of range \(\S+ reaches 1\.\d+e\+30; float16",
        ),
        # every step "succeeds" (the loss is computed before the update): still not good
        ("1", r"^error: Nothing was saved to .*trained: the weights after step 1 are out of range"),
    ],
    ids=["stopped", "last-step"],
)
def test_diverging_run_saves_nothing_bad(
    steps: str, pattern: str, llama: Path, saved: tuple[Path, Path], tmp_path: Path
) -> None:
    """Case 4: ``--lr 1e30`` blows the weights up at step 1 (to ~1e30, still finite
    floats); nothing is saved, and an earlier saved folder at ``--out`` stays as it was."""
    out = tmp_path / "trained"
    shutil.copytree(saved[0], out)
    before = bad.snapshot(tmp_path)
    proc = run_ckir(
        "train", str(llama), "--steps", steps, "--seq-len", "16", "--lr", "1e30", "--out", str(out)
    )
    clean_error(proc, pattern)
    assert bad.snapshot(tmp_path) == before
    assert digests(out) == digests(saved[0])


def test_unsaveable_names_the_reason(llama: Path, tmp_path: Path) -> None:
    """The check itself, in process: no step done, good weights, a non-finite weight
    (named), and weights that overflow the loss."""
    import numpy as np

    import ckir
    from ckir.compiler import CompileOptions, compile_model
    from ckir.train import TrainResult, unsaveable, windows
    from ckir.vocab import INFERENCE_MODES

    options = CompileOptions(
        modes=(*INFERENCE_MODES, "backward"), max_context=8, dtype="f32", logits="all"
    )
    data = windows(list(range(40, 80)), 8)
    with ckir.load(compile_model(llama, tmp_path / "train", options)) as model:
        assert "no step completed" in str(unsaveable(model, data, TrainResult(0, [], 0, 0.0)))
        model.train_step(data[0][:-1], data[0][1:], lr=1e-3)
        assert unsaveable(model, data, TrainResult(1, [1.0], 8, 0.0)) is None
        param = model._params()[0]
        name = param.name.decode().removeprefix("w.")
        view = model._f32(0, param.weight_offset, param.numel, (param.numel,))
        kept = view[0]
        view[0] = np.inf
        why = unsaveable(model, data, TrainResult(1, [1.0], 8, 0.0))
        assert why == f"the weights after step 1 are not finite ({name} holds NaN or Inf)"
        view[0] = np.float32(7e4)
        why = unsaveable(model, data, TrainResult(1, [1.0], 8, 0.0))
        assert why == (
            f"the weights after step 1 are out of range ({name} reaches 7e+04; float16, "
            "the type of the block formats' scales, holds up to 65504)"
        )
        view[0] = kept
        assert unsaveable(model, data, TrainResult(1, [1.0], 8, 0.0)) is None


# --------------------------------------------------------------------------- replacing a folder


PAUSES = [
    ("staging", True),
    ("replace", True),
    ("exchanged", True),
    ("old-moved", False),
    ("new-moved", False),
]


def _killed_at(point: str, exchange: bool, code: str) -> None:
    """Run ``code`` in a new Python, wait until it reaches the pause ``point``, kill -9."""
    env = {**os.environ, "CKIR_TEST_PAUSE": point}
    if not exchange:
        env["CKIR_TEST_NO_EXCHANGE"] = "1"
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stderr=subprocess.PIPE, text=True, env=env
    )
    assert proc.stderr is not None
    deadline = time.monotonic() + 120
    seen = ""
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([proc.stderr], [], [], 1.0)
            if ready:
                line = proc.stderr.readline()
                seen += line
                if line.strip() == f"ckir-test: paused at {point}":
                    break
                if not line and proc.poll() is not None:
                    break
        else:
            raise AssertionError(f"never paused at {point}: {seen}")
        assert proc.poll() is None, f"exited before {point}: {seen}"
    finally:
        proc.kill()
        proc.wait()


@pytest.mark.parametrize(
    "point,exchange", PAUSES, ids=[f"{p}-{'exchange' if e else 'renames'}" for p, e in PAUSES]
)
def test_save_killed_at_each_step(
    point: str, exchange: bool, builds: tuple[Path, Path], saved: tuple[Path, Path], tmp_path: Path
) -> None:
    """Case 5: a save of B over A killed at each step of the replacement: A or B (whole)
    is at the name; where a kill left the name empty, the next command restores A and
    says so."""
    out = tmp_path / "hf"
    shutil.copytree(saved[0], out)
    a, b = digests(saved[0]), digests(saved[1])
    code = f"import ckir; ckir.load({str(builds[1])!r}).save_pretrained({str(out)!r})"
    _killed_at(point, exchange, code)
    if point == "old-moved":
        assert not out.exists()  # the window the fallback has: the next command closes it
    else:
        assert digests(out) == (b if point in ("exchanged", "new-moved") else a)
    expected = digests(out) if out.exists() else a
    proc = run_ckir("import", str(out))  # the next command naming the folder
    assert proc.returncode == 0, proc.stderr
    assert ("restored the earlier folder" in proc.stderr) == (point == "old-moved")
    assert digests(out) == expected
    # a new save over it works, and leaves no .old beside it
    with __import__("ckir").load(builds[1]) as model:
        model.save_pretrained(out)
    assert digests(out) == b
    assert not (tmp_path / ".hf.old").exists()


def test_build_killed_between_the_renames_is_restored_on_load(
    llama: Path, builds: tuple[Path, Path], tmp_path: Path
) -> None:
    """The same for ``ckir compile -o`` over an earlier build: loading the name restores it."""
    import ckir

    out = tmp_path / "build"
    shutil.copytree(builds[0], out)
    a = digests(out)
    code = (
        "from ckir.compiler import CompileOptions, compile_model; "
        f"compile_model({str(llama)!r}, {str(out)!r}, CompileOptions(max_context=8))"
    )
    _killed_at("old-moved", False, code)
    assert not out.exists()
    with ckir.load(out) as model:
        assert model.max_context == 16
    assert digests(out) == a


# --------------------------------------------------------------------------- debug builds


def test_debug_builds_are_byte_identical(llama: Path, tmp_path: Path) -> None:
    """Case 6: the debug info names no random staging folder (``-ffile-prefix-map``)."""
    from ckir.compiler import CompileOptions, compile_model

    options = CompileOptions(max_context=16, debug=True)
    first = digests(compile_model(llama, tmp_path / "one", options))
    second = digests(compile_model(llama, tmp_path / "two", options))
    assert first == second


def test_demo_replaces_only_its_own_folders(tmp_path: Path) -> None:
    """``ckir demo`` writes its checkpoint as a saved model: an earlier demo is replaced,
    a folder of the user's at the same name is refused before anything is written."""
    for _ in range(2):
        proc = run_ckir("demo", "--out", str(tmp_path / "d"))
        assert proc.returncode == 0, proc.stderr
    mine = tmp_path / "e" / "tiny-llama"
    mine.mkdir(parents=True)
    (mine / "config.json").write_text("{}\n")
    before = bad.snapshot(tmp_path / "e")
    proc = run_ckir("demo", "--out", str(tmp_path / "e"))
    clean_error(proc, r"--out .*tiny-llama: the folder is not empty and is not an earlier ckir")
    assert bad.snapshot(tmp_path / "e") == before


def test_bench_profile_copy_replaces_only_its_own(
    builds: tuple[Path, Path], tmp_path: Path
) -> None:
    """``ckir bench --profile`` writes a profiling copy beside each build: an earlier copy
    is replaced, a folder of the user's at its name is refused, not deleted."""
    from ckir.tools.bench_build import build_profile_copy

    build = tmp_path / "b"
    shutil.copytree(builds[0], build)
    copy = tmp_path / "b-profile"
    for _ in range(2):
        assert build_profile_copy(build, copy)
    shutil.rmtree(copy)
    copy.mkdir()
    (copy / "results.csv").write_text("mine\n")
    with pytest.raises(CkirError, match=r"--profile .*b-profile: the folder is not empty"):
        build_profile_copy(build, copy)
    assert (copy / "results.csv").read_text() == "mine\n"
