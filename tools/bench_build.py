"""``ckir bench``'s models and builds: the built-in random-weight shapes, the cache, ckir
compiled per dtype (timed step by step), the build's cost model (an analysis of its
lowered IR, :mod:`ckir.cost`), and the profiling copy of a build (model.c with a timer
around every kernel call).  Part of :mod:`ckir.tools.bench`."""

from __future__ import annotations

import functools
import json
import os
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from xdsl.dialects.builtin import ModuleOp

from ckir import cost
from ckir.backend.c_emitter import ProfiledCall, emit_c
from ckir.cost import ModelCost
from ckir.errors import CkirError
from ckir.ir_io import load_module
from ckir.tools.zoo import llama_config
from ckir.vocab import INFERENCE_MODES, PANEL_VALUES

#: what ``--modes`` takes: the inference modes, or ``train`` (alone: tools/bench_train.py)
TRAIN_MODE = "train"

#: built-in shapes: (zoo architecture, HF config keys)
SHAPES: dict[str, tuple[str, dict[str, Any]]] = {
    # llama-like: the values of zoo.LLAMA_KEYS, in order
    "smollm-135m": ("llama", llama_config(576, 9, 3, 1536, 30, 49152, 2048, 1e4, 1e-5, True)),
    "qwen2-0.5b": ("qwen2", llama_config(896, 14, 2, 4864, 24, 151936, 32768, 1e6, 1e-6, True)),
    "gpt2-small": (
        "gpt2",
        dict(n_embd=768, n_layer=12, n_head=12, vocab_size=50257, n_positions=1024),
    ),
}
#: weight init scale of the built-in shapes (HF's initializer_range)
SHAPE_STD = 0.02


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def build_module(build: Path) -> ModuleOp:
    """The build's IR (``layout.mlir``: graph, lowered and layout), parsed once per version."""
    path = build / "layout.mlir"
    return _parsed(path, path.stat().st_mtime_ns)


@functools.lru_cache(maxsize=4)
def _parsed(path: Path, mtime_ns: int) -> ModuleOp:
    return load_module(path)


def model_cost(build: Path) -> ModelCost:
    """The build's cost model: an analysis of its lowered IR (:mod:`ckir.cost`)."""
    info = json.loads((build / "build.json").read_text())
    fallback = int(info.get("max_context") or 0)
    return cost.model_cost(build_module(build), max_context=fallback)


def cache_root() -> Path:
    env = os.environ.get("CKIR_CACHE_DIR")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "ckir"


def resolve_model(spec: str) -> tuple[Path, str]:
    """(checkpoint folder, short name) of a folder or a built-in shape name."""
    path = Path(spec)
    if path.is_dir():
        if not (path / "config.json").exists():
            raise CkirError(f"{path}: no config.json (not a HF checkpoint folder)")
        return path, path.resolve().name
    if spec not in SHAPES:
        raise CkirError(
            f"{spec}: not a folder and not a built-in shape ({', '.join(sorted(SHAPES))})"
        )
    out = cache_root() / "bench-models" / spec
    done = out / ".complete"
    if not done.exists():
        from ckir.tools.zoo import make_tiny_model

        arch, config = SHAPES[spec]
        _log(f"making the random-weight {spec} checkpoint in {out} (once)")
        shutil.rmtree(out, ignore_errors=True)
        make_tiny_model(arch, out, seed=0, std=SHAPE_STD, **config)
        done.write_text("ok\n")
    return out, spec


def model_config(model_dir: Path) -> dict[str, Any]:
    return json.loads((model_dir / "config.json").read_text())


@dataclass
class CompileTimes:
    steps: dict[str, float]
    cold_cc: float | None = None

    @property
    def to_c(self) -> float:
        return sum(self.steps.get(k, 0.0) for k in ("import", "lower + plan", "emit C"))


def baseline_dtype(dtype: str) -> str:
    """The weights a baseline runs for ckir's ``dtype``: f32 for f32p, bf16 for bf16p,
    q8_0 for q8_0p, q4_1 for q4_1p, q4_0 for q4_0p (the same values, only stored in
    ckir's GEMM panels), else ``dtype`` itself."""
    return PANEL_VALUES.get(dtype, dtype)


def compile_build(
    model_dir: Path,
    out: Path,
    dtype: str,
    max_context: int,
    cold: bool,
    modes: tuple[str, ...] = INFERENCE_MODES,
    panels: bool | None = None,
    isa: str = "native",
) -> CompileTimes:
    """Compile ``model_dir`` into ``out`` (fresh) for ``modes``, timing every step
    (``panels``: as CompileOptions.panels; None: the default, inference builds of a dtype
    with a panel twin pack; ``isa``: the kernels' build, CompileOptions.isa)."""
    from ckir.compiler import CompileOptions, Progress, build, prepare

    progress = Progress(quiet=True)
    options = CompileOptions(
        modes=modes,
        max_context=max_context,
        dtype=None if dtype == "f32" else dtype,
        panels=panels,
        isa=isa,
    )
    prepared = prepare(model_dir, options, progress)
    build(prepared, out, progress)
    times = CompileTimes(dict(progress.steps))
    if cold:
        times.cold_cc = cold_c_build(out, isa)
    return times


def isa_suffix(isa: str) -> str:
    """What a bench build folder's name adds for ``isa`` (nothing for native)."""
    return "" if isa == "native" else f"-{isa}"


def cold_c_build(build_dir: Path, isa: str = "native") -> float:
    """Seconds to build ``build_dir``'s library (kernels for ``isa``) with an empty
    runtime object cache."""
    from ckir.runtime_build import build_library, support_sources

    old = os.environ.get("CKIR_CACHE_DIR")
    with tempfile.TemporaryDirectory(prefix="ckir-cold-") as tmp:
        os.environ["CKIR_CACHE_DIR"] = tmp
        try:
            t0 = time.perf_counter()
            build_library(
                Path(tmp) / "libmodel.so",
                isa=isa,
                extra_sources=[build_dir / "model.c", *support_sources()],
                include_dirs=[build_dir],
            )
            return time.perf_counter() - t0
        finally:
            if old is None:
                os.environ.pop("CKIR_CACHE_DIR", None)
            else:
                os.environ["CKIR_CACHE_DIR"] = old


def build_profile_copy(build: Path, out: Path) -> list[ProfiledCall]:
    """A build folder at ``out`` sharing ``build``'s files but a profiling library.

    Its model.c is emitted again from the build's IR with ``profile`` on: every
    kernel call timed and labelled with its origin (``emit-c{profile=true}``).
    """
    sources = emit_c(build_module(build), profile=True)
    build_emitted_copy(build, out, sources.source, flag="--profile")
    return list(sources.profile)


def build_emitted_copy(build: Path, out: Path, source: str, *, flag: str) -> None:
    """A build folder at ``out`` sharing ``build``'s files but whose library is compiled
    from ``source`` (a model.c emitted again from the build's IR, with options ``flag``
    names in errors: ``--profile``, ``--compare``)."""
    from ckir.compiler import BUILD_INFO, LIBRARY_NAME, required_files
    from ckir.integrity import BUILD_MARKER, MARKER_TEXT, check_output_dir, file_digests
    from ckir.runtime_build import build_library, support_sources

    # an earlier copy is replaced; anything else at its name is refused
    check_output_dir(out, build, required_files(), flag=flag)
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    (out / BUILD_MARKER).write_text(MARKER_TEXT)
    rebuilt = ("model.c", LIBRARY_NAME, BUILD_INFO)
    for name in required_files():
        if name not in rebuilt:
            (out / name).symlink_to((build / name).resolve())
    (out / "model.c").write_text(source)
    # the copy's own record: the loader verifies the library against it
    record = json.loads((build / BUILD_INFO).read_text())
    build_library(
        out / LIBRARY_NAME,
        isa=str(record.get("isa", "native")),
        extra_sources=[out / "model.c", *support_sources()],
        include_dirs=[out],
    )
    record["files"] = {**record.get("files", {}), **file_digests(out, rebuilt[:2])}
    (out / BUILD_INFO).write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
