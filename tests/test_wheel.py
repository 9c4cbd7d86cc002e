"""A built wheel works on its own; the demo model needs no torch.

The slow test builds the wheel from a copy of this checkout, installs it into
a fresh venv (``--no-deps``, offline), lends that venv this venv's
dependencies through a plain ``.pth`` path entry (which runs none of this
venv's own ``.pth`` files, so the editable ckir finder stays inactive), makes
the installed package read-only, and from a folder outside the repository
runs the installed ``ckir``: ``demo``, then ``compile`` + ``run`` of the demo
model, whose logits are checked against transformers.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import site
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
from safetensors import safe_open

from ckir import resources
from ckir.errors import CkirError
from ckir.tools.zoo import ARCHES, make_numpy_model

REPO = Path(__file__).resolve().parent.parent
#: what a build of the wheel does not need from the checkout
COPY_IGNORE = shutil.ignore_patterns(
    ".git", ".venv", "build", "out", "__pycache__", "*.egg-info", ".*_cache", "Output", "*.so"
)
#: a module the temp venv imports at start-up (from a .pth line): ckir's test-only
#: dependencies (torch, transformers, ...) are absent there as for a user who ran
#: ``pip install ckir``, although this venv's site-packages is on the path
ABSENT_MODULE = """\"\"\"Test-only packages are not installed in this venv.\"\"\"
import sys
from importlib.abc import MetaPathFinder

ABSENT = {absent!r}


class Absent(MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in ABSENT:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None


sys.meta_path.insert(0, Absent())
"""
#: fp32 parity bound, as in test_parity: max |ckir - hf| <= REL_TOL * max |hf|
REL_TOL = 1e-4


def _tensor_meta(model_dir: Path) -> dict[str, tuple[list[int], str]]:
    with safe_open(str(model_dir / "model.safetensors"), "np") as f:
        return {k: (f.get_slice(k).get_shape(), f.get_slice(k).get_dtype()) for k in f.keys()}  # noqa: SIM118


# ------------------------------------------------------------------ fast checks


def test_resources_are_the_checkout_folders() -> None:
    """In the dev venv (editable install) the package data is the repo's own folders."""
    assert resources.templates_dir() == REPO / "templates"
    assert resources.runtime_dir() == REPO / "runtime"
    assert resources.source_root() == REPO


def test_resources_without_the_data_packages(monkeypatch: pytest.MonkeyPatch) -> None:
    """An editable install older than the data packages: the checkout's folder; an
    installed ckir without them: one line saying to reinstall."""

    def absent(package: str) -> None:
        raise ModuleNotFoundError(f"No module named {package!r}")

    monkeypatch.setattr(resources.importlib.resources, "files", absent)
    resources._data_dir.cache_clear()
    try:
        assert resources.runtime_dir() == REPO / "runtime"
        resources._data_dir.cache_clear()
        monkeypatch.setattr(resources, "source_root", lambda: None)
        with pytest.raises(CkirError, match=r"ckir's templates/ \(ckir.templates\) is missing"):
            resources.templates_dir()
    finally:
        resources._data_dir.cache_clear()


@pytest.mark.parametrize("tied", [None, True, False])
@pytest.mark.parametrize("arch", ARCHES)
def test_numpy_model_has_the_transformers_layout(
    arch: str, tied: bool | None, tmp_path: Path
) -> None:
    """Same tensor names, shapes, dtypes as transformers saves; transformers loads it whole."""
    pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    from ckir.tools.zoo import make_tiny_model

    ours = make_numpy_model(arch, tmp_path / "np", tied=tied)
    ref = make_tiny_model(arch, tmp_path / "torch", tied=tied)
    assert _tensor_meta(ours) == _tensor_meta(ref)
    config = json.loads((ours / "config.json").read_text())
    ref_config = json.loads((ref / "config.json").read_text())
    assert config["architectures"] == ref_config["architectures"]
    assert config["model_type"] == ref_config["model_type"]
    _, info = transformers.AutoModelForCausalLM.from_pretrained(ours, output_loading_info=True)
    assert not any(info.values()), info


def test_numpy_model_is_seeded(tmp_path: Path) -> None:
    a = make_numpy_model("llama", tmp_path / "a", seed=3)
    b = make_numpy_model("llama", tmp_path / "b", seed=3)
    c = make_numpy_model("llama", tmp_path / "c", seed=4)
    data = [(d / "model.safetensors").read_bytes() for d in (a, b, c)]
    assert data[0] == data[1]
    assert data[0] != data[2]
    assert (a / "config.json").read_text() == (c / "config.json").read_text()


# ------------------------------------------------------------------ the wheel


def _test_only_modules() -> list[str]:
    """Top-level modules of the distributions only ckir's ``test`` extra requires."""
    from importlib.metadata import packages_distributions, requires

    def canon(name: str) -> str:
        return re.sub(r"[-_.]+", "-", name).lower()

    extra = {
        canon(re.split(r"[\s;<>=!~\[]", r, maxsplit=1)[0])
        for r in requires("ckir") or []
        if re.search(r"extra\s*==\s*['\"]test['\"]", r)
    }
    mods = packages_distributions()
    return sorted(m for m, dists in mods.items() if any(canon(d) in extra for d in dists))


def _data_files(root: Path) -> set[str]:
    """Every file of templates/ and runtime/ as its path inside the wheel."""
    out = set()
    for folder in ("templates", "runtime"):
        for p in (root / folder).rglob("*"):
            if p.is_file() and "__pycache__" not in p.parts:
                out.add("ckir/" + p.relative_to(root).as_posix())
    return out


def _set_writable(tree: Path, writable: bool) -> None:
    bits = stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH
    for p in [tree, *tree.rglob("*")]:
        mode = p.stat().st_mode
        p.chmod((mode | stat.S_IWUSR) if writable else (mode & ~bits))


def _run(cmd: list[str | Path], cwd: Path, env: dict[str, str]) -> str:
    proc = subprocess.run(
        [str(c) for c in cmd], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, f"{cmd[0]} {cmd[1]} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel built from a copy of this checkout (the checkout gets no build/, egg-info)."""
    root = tmp_path_factory.mktemp("wheel")
    src = root / "src"
    shutil.copytree(REPO, src, ignore=COPY_IGNORE)
    cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation"]
    _run([*cmd, "--no-index", "-q", "-w", root / "dist", src], root, dict(os.environ))
    (whl,) = (root / "dist").glob("ckir-*.whl")
    return whl


@pytest.mark.slow
def test_wheel_ships_templates_and_runtime(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
    missing = (_data_files(REPO) | {"ckir/data/corpus.txt"}) - names
    assert not missing, f"not in the wheel: {sorted(missing)}"
    assert not [n for n in names if n.startswith(("templates/", "runtime/", "dialects/"))]


@pytest.mark.slow
def test_installed_wheel_compiles_and_runs_the_demo(wheel: Path, tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = venv / "bin" / "python"
    pip = [sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps", "--no-index"]
    subprocess.run([*pip, "-q", str(wheel)], check=True, capture_output=True, timeout=300)
    purelib = subprocess.run(
        [py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    absent = _test_only_modules()
    assert {"torch", "transformers"} <= set(absent)
    (Path(purelib) / "absent_test_deps.py").write_text(ABSENT_MODULE.format(absent=absent))
    # this venv's dependencies, as plain path entries after the wheel's own site-packages
    lines = ["import absent_test_deps", *site.getsitepackages()]
    (Path(purelib) / "dev_deps.pth").write_text("\n".join(lines) + "\n")

    work = tmp_path / "work"
    work.mkdir()
    assert not work.resolve().is_relative_to(REPO)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTHON")}
    env["CKIR_CACHE_DIR"] = str(tmp_path / "cache")  # the runtime is built from the wheel's C
    package = Path(purelib) / "ckir"
    _set_writable(package, False)  # nothing may be written next to the installed sources
    try:
        where = _run(
            [
                py,
                "-c",
                "import ckir, ckir.resources as r; "
                "print(ckir.__file__, r.templates_dir(), r.runtime_dir(), r.source_root())",
            ],
            work,
            env,
        ).split()
        assert all(Path(p).is_relative_to(package) for p in where[:3]), where
        assert where[3] == "None"
        torch_there = subprocess.run([py, "-c", "import torch"], env=env, capture_output=True)
        assert torch_there.returncode != 0, "torch is importable in the wheel's venv"

        ckir = venv / "bin" / "ckir"
        demo = _run([ckir, "demo", "--out", "demo"], work, env)
        demo_tokens = demo.rsplit("tokens:", 1)[1].split()
        model_dir = work / "demo" / "tiny-llama"
        _run([ckir, "compile", model_dir, "-o", "build", "--max-context", "32", "-q"], work, env)
        prompt = [5, 17, 99, 3, 250, 42]
        run = [ckir, "run", "build", "--tokens", ",".join(map(str, prompt)), "--steps", "3"]
        tokens = _run([*run, "--logits-out", "logits.npy"], work, env).split()
        # the demo's own run of the same model, greedy from [1, 2, 3, 4]
        again = _run([ckir, "run", work / "demo" / "build-llama", "--tokens", "1,2,3,4"], work, env)
        assert again.split() == demo_tokens
    finally:
        _set_writable(package, True)
    assert not list(package.rglob("*.o")) and not list(package.rglob("*.so"))

    logits = np.load(work / "logits.npy")  # prefill rows, then one row per decode step
    hf = transformers.AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    seq = prompt + [int(t) for t in tokens[:-1]]
    with torch.no_grad():
        ref = hf(torch.tensor([seq])).logits[0].numpy()
    assert logits.shape == ref.shape == (len(seq), 256)
    err = float(np.abs(logits - ref).max())
    assert err <= REL_TOL * float(np.abs(ref).max()), f"max abs error {err:.3g}"
    # greedy: each printed token is the argmax of the logits row before it
    assert [int(t) for t in tokens] == [int(r.argmax()) for r in logits[len(prompt) - 1 :]]
