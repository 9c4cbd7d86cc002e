"""Shared fixtures: tiny random-weight HF checkpoints, built once per test session.

``tiny_model(arch, tied=None)`` returns the folder of a checkpoint made by
:func:`ckir.tools.zoo.make_tiny_model` (cached per ``(arch, tied)``); the named
fixtures below are shortcuts.  Tests that modify a checkpoint must copy it
first (``copy_checkpoint``).

scripts/test.sh runs the suite on two pytest-xdist workers (``--dist loadfile``):
session fixtures are then made once per worker, module fixtures once per file.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from kernel_lib import ISAS, build_runtime, isa_supported

if os.environ.get("PYTEST_XDIST_WORKER"):
    # Under pytest-xdist (scripts/test.sh: two workers on a 2-vCPU machine) each worker's
    # OpenMP threads (ckir's kernels, torch) share the CPUs with the other worker's: idle
    # threads then sleep at barriers instead of spinning on a CPU the other needs.  Set
    # before any kernel library or torch is loaded; thread counts themselves are unchanged.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Path]:
    root = tmp_path_factory.mktemp("tiny_models")
    cache: dict[tuple[str, bool | None], Path] = {}

    def get(arch: str, tied: bool | None = None) -> Path:
        key = (arch, tied)
        if key not in cache:
            pytest.importorskip("torch")
            pytest.importorskip("transformers")
            from ckir.tools.zoo import make_tiny_model

            suffix = "" if tied is None else ("-tied" if tied else "-untied")
            cache[key] = make_tiny_model(arch, root / f"tiny-{arch}{suffix}", tied=tied)
        return cache[key]

    return get


@pytest.fixture(scope="session")
def llama_dir(tiny_model: Callable[..., Path]) -> Path:
    return tiny_model("llama")


@pytest.fixture(scope="session")
def mistral_dir(tiny_model: Callable[..., Path]) -> Path:
    return tiny_model("mistral")


@pytest.fixture(scope="session")
def qwen2_tied_dir(tiny_model: Callable[..., Path]) -> Path:
    return tiny_model("qwen2", tied=True)


@pytest.fixture(scope="session")
def qwen2_untied_dir(tiny_model: Callable[..., Path]) -> Path:
    return tiny_model("qwen2", tied=False)


@pytest.fixture(scope="session")
def gpt2_dir(tiny_model: Callable[..., Path]) -> Path:
    return tiny_model("gpt2")


@pytest.fixture
def copy_checkpoint(tmp_path: Path) -> Callable[[Path, str], Path]:
    """Copy a checkpoint folder into this test's tmp dir (to modify it safely)."""

    def copy(src: Path, name: str = "model") -> Path:
        dst = tmp_path / name
        shutil.copytree(src, dst)
        return dst

    return copy


# ------------------------------------------------------------------ runtime kernels


@pytest.fixture(scope="session", params=ISAS)
def lib(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    """The runtime built for one ISA (kernel_lib.RuntimeLib), shared by the kernel test files;
    skipped where the CPU lacks the ISA."""
    isa = request.param
    if not isa_supported(isa):
        pytest.skip(f"CPU lacks the {isa} ISA")
    rt = build_runtime(isa, tmp_path_factory.mktemp(f"rt_{isa}"))
    expected = {"scalar": {"scalar"}, "avx2": {"avx2"}, "native": {"avx512", "avx2", "scalar"}}
    assert rt.isa in expected[isa]
    return rt


@pytest.fixture(params=[1, 2], ids=lambda n: f"{n}thr")
def threads(request: pytest.FixtureRequest, lib):
    """Run the test with 1, then 2 OpenMP threads in ``lib``."""
    before = lib.get_num_threads()
    lib.set_num_threads(request.param)
    yield request.param
    lib.set_num_threads(before)
