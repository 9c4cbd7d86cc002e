"""``ckir bench``: tokens/s of ckir against PyTorch, ONNX Runtime and llama.cpp, with rooflines.

    ckir bench MODEL [--modes prefill,decode | --modes train] [--dtype f32,bf16,q8_0,...]
                     [--against torch,onnxruntime,llama.cpp] [--prompt-tokens 128]
                     [--decode-tokens 64] [--context 128] [--repeat 5] [--threads 2]
                     [--isa native|avx2|scalar] [--profile] [--cold-build] [--json FILE]

MODEL is a HF checkpoint folder or a built-in shape (``smollm-135m``,
``qwen2-0.5b``, ``gpt2-small``): random weights, made once with
:func:`ckir.tools.zoo.make_tiny_model` under ``$CKIR_CACHE_DIR/bench-models/``.
Nothing is downloaded.

Method.  ckir is compiled (timed step by step) for every requested dtype.
Every system (ckir per dtype, each baseline per dtype it supports; for f32p /
bf16p / q8_0p / q4_1p / q4_0p, fp32 / bf16 values or Q8_0 / Q4_1 / Q4_0 blocks pre-packed
in ckir's GEMM panels, the baselines run f32 / bf16 / q8_0 / q4_1 / q4_0, once when that
dtype is benched too) runs in a
worker process of its own, loaded once and warmed up; the parent sends one
run at a time, so only one system computes at any moment.  A round runs every
system once per mode, in alternating order (ckir, torch, ckir, torch, ...;
reversed on odd rounds).  Every run is bracketed by the machine probes of
:mod:`ckir.tools.bandwidth` (read bandwidth for decode, FMA peak for prefill), so a
run and the bound it is compared with see the same machine (the host's
bandwidth changes by 2x from one second to the next here).  No system may
keep the CPU busy between runs: ONNX Runtime's thread pool runs without
spinning (its spinning threads halved the probe after its runs).  Printed:
tokens/s median and min-max over rounds, the ratio ckir / baseline (median of
per-round ratios of adjacent runs), and the fraction of the roofline.

* prefill: ``--prompt-tokens`` tokens from an empty cache; every system
  computes the logits of every position (ckir's prefill returns [T, V]).
* decode: ``--decode-tokens`` single-token steps after a ``--context``-token
  prefill; tokens/s over the decode steps only.
* decode bound: bytes read per token = every weight matrix the decode calls
  read (layer weights, LM head) + one row of each gathered table (token /
  position embedding) + the K and V cache rows read by attention at that
  position (mean over the steps), in the stored dtype (f32p / bf16p / q8_0p /
  q4_1p / q4_0p: 4 / 2 bytes per value, 34 / 20 / 18 per block of 32, the zero rows
  padding a matrix's last 32-row panel included, as the kernels stream them; a
  gathered panel row: the bytes of one row of the values' dtype); bound = read
  bandwidth / bytes.  Counted from the build's lowered IR and layout.
* prefill bound: 2 x (parameters of the matrices multiplied) x T + causal
  attention 4 x H x D x T(T+1)/2 per layer, against the FMA peak.

A baseline worker that dies (a signal, or any exit without a reply) while
starting or running is started again once on its fallback path, if it has one
(:class:`Fallback`: keys added to the worker spec).  llama.cpp's is
``"no_repack": true``: load with ``use_extra_bufts=False``, the weights not
repacked into llama.cpp's extra buffer types (on Sapphire Rapids the q8_0/q4_1
workers died with SIGSEGV in ``ggml_backend_amx_mul_mat``).  The restarted
worker is warmed up and the run that died is measured again between fresh
probes; its runs from before (the other path) are discarded, and ratios pair
runs by round, so the other systems' runs are neither lost nor counted twice.
A note says so; when the fallback fails too the row is dropped with a note
naming both failures.

The environment line names the machine kind: the CPU model and the ISA
flags that decide kernels (AVX2, AVX-512 and its VNNI/BF16/FP16, AVX-VNNI,
AMX), and the ISA each system ran with: ckir's runtime build, ATen's CPU
capability (PyTorch's GEMMs go to oneDNN/MKL, which pick their own path, AMX
included, and do not report it), ONNX Runtime's MLAS (dispatched at run time,
not reported), llama.cpp's system info and whether its weights were repacked
(an entry per dtype where the dtypes ran different paths).

Also printed: compile time (checkpoint -> C, weights.bin, C build), peak RSS
of a decode run (a C driver without Python) against weights + state arena
sizes of layout.json, and with ``--profile`` per-kernel time shares of a
decode step and a prefill (model.c rebuilt with a timer around every call).

``--modes train`` (alone) measures training steps instead, with the same
workers, rounds, probes and report: :mod:`ckir.tools.bench_train`.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import dataclasses
import functools
import importlib
import inspect
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from xdsl.dialects.builtin import ModuleOp

from ckir import __version__, cost
from ckir.backend.c_emitter import ProfiledCall, emit_c
from ckir.cost import ModelCost
from ckir.dialects import lowered as lw
from ckir.errors import CkirError
from ckir.resources import import_root, source_root
from ckir.runtime_build import ISAS
from ckir.vocab import (
    BLOCK_DTYPES,
    INFERENCE_MODES,
    PANEL_OF,
    PANEL_VALUES,
    WEIGHT_DTYPES,
    dtype_info,
)

BASELINES = ("torch", "onnxruntime", "llama.cpp")
#: what ``--modes`` takes: the inference modes, or ``train`` (alone: tools/bench_train.py)
TRAIN_MODE = "train"
BENCH_MODES = (*INFERENCE_MODES, TRAIN_MODE)

#: built-in shapes: (zoo architecture, HF config keys)
SHAPES: dict[str, tuple[str, dict[str, Any]]] = {
    "smollm-135m": (
        "llama",
        dict(
            hidden_size=576,
            num_hidden_layers=30,
            num_attention_heads=9,
            num_key_value_heads=3,
            intermediate_size=1536,
            vocab_size=49152,
            max_position_embeddings=2048,
            rope_theta=10000.0,
            rms_norm_eps=1e-5,
            tie_word_embeddings=True,
        ),
    ),
    "qwen2-0.5b": (
        "qwen2",
        dict(
            hidden_size=896,
            num_hidden_layers=24,
            num_attention_heads=14,
            num_key_value_heads=2,
            intermediate_size=4864,
            vocab_size=151936,
            max_position_embeddings=32768,
            rope_theta=1_000_000.0,
            rms_norm_eps=1e-6,
            tie_word_embeddings=True,
        ),
    ),
    "gpt2-small": (
        "gpt2",
        dict(n_embd=768, n_layer=12, n_head=12, vocab_size=50257, n_positions=1024),
    ),
}
#: weight init scale of the built-in shapes (HF's initializer_range)
SHAPE_STD = 0.02


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------
# statistics
# ---------------------------------------------------------------------------------------


def rates(tokens: int, seconds: Sequence[float]) -> list[float]:
    """Tokens/s of each run."""
    return [tokens / s for s in seconds]


def paired_ratios(ckir_seconds: Sequence[float], other_seconds: Sequence[float]) -> list[float]:
    """Per-round speed ratio ckir / other (same tokens): other_time / ckir_time."""
    return [o / c for c, o in zip(ckir_seconds, other_seconds, strict=True)]


def spread(values: Sequence[float]) -> tuple[float, float, float]:
    """(median, min, max)."""
    return statistics.median(values), min(values), max(values)


def fmt_num(x: float) -> str:
    """3 significant digits, no exponent for the ranges seen here."""
    if x >= 100:
        return f"{x:.0f}"
    if x >= 10:
        return f"{x:.1f}"
    if x >= 1:
        return f"{x:.2f}"
    return f"{x:.3f}"


def fmt_range(values: Sequence[float]) -> str:
    _, lo, hi = spread(values)
    return f"{fmt_num(lo)}–{fmt_num(hi)}"


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------
# the build's cost model: an analysis of its lowered IR (ckir.cost)
# ---------------------------------------------------------------------------------------


def build_module(build: Path) -> ModuleOp:
    """The build's IR (``layout.mlir``: graph, lowered and layout), parsed once per version."""
    path = build / "layout.mlir"
    return _parsed(path, path.stat().st_mtime_ns)


@functools.lru_cache(maxsize=4)
def _parsed(path: Path, mtime_ns: int) -> ModuleOp:
    return cost.load_module(path)


def model_cost(build: Path) -> ModelCost:
    """The build's cost model: an analysis of its lowered IR (:mod:`ckir.cost`)."""
    info = json.loads((build / "build.json").read_text())
    fallback = int(info.get("max_context") or 0)
    return cost.model_cost(build_module(build), max_context=fallback)


# ---------------------------------------------------------------------------------------
# models and builds
# ---------------------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------------------
# per-kernel profile: model.c with a timer around every kernel call
# ---------------------------------------------------------------------------------------


def build_profile_copy(build: Path, out: Path) -> list[ProfiledCall]:
    """A build folder at ``out`` sharing ``build``'s files but a profiling library.

    Its model.c is emitted again from the build's IR with ``profile`` on: every
    kernel call timed and labelled with its origin (``emit-c{profile=true}``).
    """
    from ckir.compiler import BUILD_INFO, LIBRARY_NAME, required_files
    from ckir.integrity import file_digests
    from ckir.runtime_build import build_library, support_sources

    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    sources = emit_c(build_module(build), profile=True)
    rebuilt = ("model.c", LIBRARY_NAME, BUILD_INFO)
    for name in required_files():
        if name not in rebuilt:
            (out / name).symlink_to((build / name).resolve())
    (out / "model.c").write_text(sources.source)
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
    return list(sources.profile)


# ---------------------------------------------------------------------------------------
# workers: one process per system, a JSON line protocol over a private pipe
# ---------------------------------------------------------------------------------------


class BaselineUnavailable(CkirError):
    """A baseline cannot run here; the message says why, in one line."""


class WorkerDied(BaselineUnavailable):
    """The worker process ended without a reply: killed by a signal or any exit, while
    starting or while running (an error the worker reports itself is not a death)."""

    def __init__(self, label: str, returncode: int | None, stderr_tail: str) -> None:
        self.cause = exit_cause(returncode)
        super().__init__(f"{label}: worker died ({self.cause}): {stderr_tail}")


def exit_cause(returncode: int | None) -> str:
    """``SIGSEGV`` for a process killed by a signal, else ``exit status N``."""
    if returncode is None:
        return "still running, output closed"
    if returncode < 0:
        try:
            return signal.Signals(-returncode).name
        except ValueError:
            return f"signal {-returncode}"
    return f"exit status {returncode}"


class Worker:
    """A system loaded in its own process; ``call`` sends one request, returns the reply.
    A worker that dies raises :class:`WorkerDied`, one that reports an error
    :class:`BaselineUnavailable`."""

    def __init__(self, label: str, spec: dict[str, Any], threads: int, timeout: float) -> None:
        self.label = label
        self.threads = threads
        env = dict(os.environ)
        for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
            env[var] = str(threads)
        env["TOKENIZERS_PARALLELISM"] = "false"
        search = [str(import_root()), env.get("PYTHONPATH", "")]
        env["PYTHONPATH"] = os.pathsep.join(search).rstrip(os.pathsep)
        self._err = tempfile.TemporaryFile(mode="w+")  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "ckir.tools.bench", "--worker", json.dumps(spec)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._err,
            text=True,
            env=env,
        )
        self.timeout = timeout
        try:
            self.info: dict[str, Any] = self._read()
        except BaselineUnavailable:
            self.close()
            raise

    def _stderr_tail(self) -> str:
        self._err.seek(0)
        lines = [ln.strip() for ln in self._err.read().splitlines() if ln.strip()]
        return lines[-1] if lines else "(no output)"

    def _died(self) -> WorkerDied:
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)
        return WorkerDied(self.label, self.proc.poll(), self._stderr_tail())

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise self._died()
        reply = json.loads(line)
        if "error" in reply:
            raise BaselineUnavailable(f"{self.label}: {reply['error']}")
        return reply

    def call(self, **msg: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps(msg) + "\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            raise self._died() from None
        return self._read()

    def close(self) -> None:
        with contextlib.suppress(Exception):
            if self.proc.poll() is None and self.proc.stdin is not None:
                self.proc.stdin.write(json.dumps({"op": "quit"}) + "\n")
                self.proc.stdin.flush()
                self.proc.wait(timeout=20)
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._err.close()


class Runner:
    """Worker-side interface: time a prefill, time decode steps after a context."""

    info: dict[str, Any]

    def prefill(self, tokens: list[int]) -> float:
        raise NotImplementedError

    def decode(self, context: list[int], tokens: list[int]) -> float:
        raise NotImplementedError

    def sample(self, tokens: list[int], stride: int) -> list[float]:
        """Every ``stride``-th logit of the last row after prefilling ``tokens``."""
        raise NotImplementedError

    def train(self, tokens: list[int], targets: list[int]) -> dict[str, float]:
        """One timed training step: ``{"s": seconds, "loss": loss before the update}``."""
        raise NotImplementedError

    def loss(self, tokens: list[int], targets: list[int]) -> float:
        """The mean cross-entropy of ``tokens`` against ``targets``, weights unchanged."""
        raise NotImplementedError


class CkirRunner(Runner):
    def __init__(self, build: str, threads: int) -> None:
        from ckir.model import load

        self.m = load(build)
        lib = self.m._lib
        lib.ckir_set_num_threads.argtypes = [ctypes.c_int]
        lib.ckir_set_num_threads(threads)
        lib.ckir_runtime_isa.restype = ctypes.c_char_p
        isa = f"runtime {lib.ckir_runtime_isa().decode()}"
        # the AMX mode (ckir_set_amx; a build older than the AMX path has none)
        amx_fn = getattr(lib, "ckir_runtime_amx", None)
        amx = int(amx_fn()) if amx_fn is not None else 0
        if amx:
            tiles = "AMX tiles" if amx == 1 else "emulated AMX tiles (CKIR_AMX=emulate: no speed)"
            isa += f", bf16p GEMMs (M > 32) on {tiles} (tdpbf16ps), other bf16 by vdpbf16ps"
            if self.m.int8_prefill_dot:
                isa += f", q8_0p/q4_0p/q4_1p GEMMs on int8 x on {tiles} (tdpbssd/tdpbsud)"
        else:
            if lib.ckir_runtime_bf16_dot():
                isa += ", bf16 GEMMs (M > 32) by vdpbf16ps"
            if self.m.int8_prefill_dot:
                isa += f", q8_0p/q4_0p/q4_1p GEMMs on int8 x by {self.m.int8_prefill_dot}"
        self.info = {"threads": threads, "isa": isa}
        self._prof = hasattr(lib, "ckir_profile_n")
        if self._prof:
            lib.ckir_profile_n.restype = ctypes.c_longlong
            lib.ckir_profile_times.restype = ctypes.POINTER(ctypes.c_double)
            lib.ckir_profile_counts.restype = ctypes.POINTER(ctypes.c_longlong)

    def prefill(self, tokens: list[int]) -> float:
        self.m.reset()
        t0 = time.perf_counter()
        self.m.prefill(tokens)
        return time.perf_counter() - t0

    def decode(self, context: list[int], tokens: list[int]) -> float:
        self.m.reset()
        self.m.prefill(context)
        t0 = time.perf_counter()
        for tok in tokens:
            self.m.decode(tok)
        return time.perf_counter() - t0

    def sample(self, tokens: list[int], stride: int) -> list[float]:
        self.m.reset()
        return [float(x) for x in self.m.prefill(tokens)[-1, ::stride]]

    def prof_reset(self) -> None:
        self.m._lib.ckir_profile_reset()

    def prof_get(self) -> dict[str, list[float]]:
        lib = self.m._lib
        n = int(lib.ckir_profile_n())
        t, c = lib.ckir_profile_times(), lib.ckir_profile_counts()
        return {"times": [t[i] for i in range(n)], "counts": [float(c[i]) for i in range(n)]}


class TorchRunner(Runner):
    def __init__(self, model_dir: str, dtype: str, threads: int) -> None:
        import torch
        import transformers

        torch.set_num_threads(threads)
        self.torch = torch
        tdtype = {"f32": torch.float32, "bf16": torch.bfloat16}[dtype]
        self.model = transformers.AutoModelForCausalLM.from_pretrained(model_dir, dtype=tdtype)
        self.model.eval()
        self.info = {
            "threads": torch.get_num_threads(),
            "attn": getattr(self.model.config, "_attn_implementation", "?"),
            "version": torch.__version__,
            # ATen's vector kernels; GEMMs go to oneDNN/MKL, which dispatch (AMX included)
            # on their own and do not say which path they take
            "isa": f"ATen {torch.backends.cpu.get_cpu_capability()}, GEMMs by oneDNN/MKL",
        }

    def _ids(self, tokens: list[int]) -> Any:
        return self.torch.tensor([tokens], dtype=self.torch.long)

    def prefill(self, tokens: list[int]) -> float:
        ids = self._ids(tokens)
        with self.torch.inference_mode():
            t0 = time.perf_counter()
            self.model(input_ids=ids, use_cache=True)
            return time.perf_counter() - t0

    def decode(self, context: list[int], tokens: list[int]) -> float:
        with self.torch.inference_mode():
            out = self.model(input_ids=self._ids(context), use_cache=True)
            cache = out.past_key_values
            steps = [self._ids([t]) for t in tokens]
            t0 = time.perf_counter()
            for ids in steps:
                out = self.model(input_ids=ids, past_key_values=cache, use_cache=True)
                cache = out.past_key_values
            return time.perf_counter() - t0

    def sample(self, tokens: list[int], stride: int) -> list[float]:
        with self.torch.inference_mode():
            logits = self.model(input_ids=self._ids(tokens), use_cache=False).logits
        return [float(x) for x in logits[0, -1, ::stride].float()]


def export_onnx(model_dir: str, path: Path, tokens: int) -> None:
    """``torch.onnx.export`` (dynamo) of the model's logits for a fixed [1, tokens] input."""
    import torch
    import transformers

    model = transformers.AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    model.eval()

    class Logits(torch.nn.Module):
        def __init__(self, inner: torch.nn.Module) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
            return self.inner(input_ids=input_ids, use_cache=False).logits

    ids = torch.zeros((1, tokens), dtype=torch.long)
    tmp = path.parent / (path.name + ".tmp")
    errors = []
    for dynamo in (True, False):
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        try:
            with torch.no_grad():
                torch.onnx.export(
                    Logits(model),
                    (ids,),
                    str(tmp / "model.onnx"),
                    dynamo=dynamo,
                    input_names=["input_ids"],
                    output_names=["logits"],
                    external_data=True,
                )
            break
        except Exception as exc:  # report every exporter's reason
            text = [ln for ln in str(exc).strip().splitlines() if ln.strip()]
            reason = f"{type(exc).__name__}: {text[-1] if text else ''}"[:200]
            errors.append(f"dynamo={dynamo}: {reason}")
    else:
        shutil.rmtree(tmp, ignore_errors=True)
        raise BaselineUnavailable("torch.onnx.export failed (" + "; ".join(errors) + ")")
    shutil.rmtree(path, ignore_errors=True)
    tmp.rename(path)


class OrtRunner(Runner):
    def __init__(self, model_dir: str, onnx_dir: str, tokens: int, threads: int) -> None:
        import onnxruntime as ort

        path = Path(onnx_dir)
        if not (path / "model.onnx").exists():
            export_onnx(model_dir, path, tokens)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        # ORT's pool threads spin for up to ~0.3 s after a run: measured, the
        # FMA probe right after an ORT prefill read half the machine (96 vs 190
        # GFLOP/s), which inflated ORT's fraction of bound and slowed whichever
        # system ran next.  Without spinning the probes agree (198 vs 196).
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.sess = ort.InferenceSession(
            str(path / "model.onnx"), opts, providers=["CPUExecutionProvider"]
        )
        self.tokens = tokens
        self.info = {
            "threads": threads,
            "version": ort.__version__,
            "isa": "MLAS, dispatched at run time (no API names the path)",
        }

    def prefill(self, tokens: list[int]) -> float:
        import numpy as np

        ids = np.asarray([tokens], dtype=np.int64)
        t0 = time.perf_counter()
        self.sess.run(None, {"input_ids": ids})
        return time.perf_counter() - t0

    def sample(self, tokens: list[int], stride: int) -> list[float]:
        import numpy as np

        out = self.sess.run(None, {"input_ids": np.asarray([tokens], dtype=np.int64)})[0]
        return [float(x) for x in out[0, -1, ::stride]]


#: the keyword (llama.cpp's model parameter) that keeps the weights in llama.cpp's plain CPU
#: buffers: no repacking into the extra buffer types (AMX, the CPU repack layouts)
NO_REPACK_PARAM = "use_extra_bufts"


class LlamaCppRunner(Runner):
    """llama.cpp through llama-cpp-python.  ``no_repack``: load with ``use_extra_bufts=False``
    (the worker spec key ``"no_repack": true``, the fallback of a worker that died with the
    repacked weights)."""

    def __init__(
        self, gguf_path: str, threads: int, n_ctx: int, n_batch: int, no_repack: bool = False
    ) -> None:
        import llama_cpp

        params: dict[str, Any] = dict(
            model_path=gguf_path,
            n_ctx=n_ctx,
            n_batch=n_batch,
            n_ubatch=n_batch,
            n_threads=threads,
            n_threads_batch=threads,
            logits_all=True,  # ckir's prefill returns every row: same work
            type_k=llama_cpp.GGML_TYPE_F32,  # ckir's KV cache is fp32
            type_v=llama_cpp.GGML_TYPE_F32,
            verbose=False,
        )
        with contextlib.ExitStack() as stack:
            if no_repack:
                params |= stack.enter_context(_without_repacking(llama_cpp))
            self.llm = llama_cpp.Llama(**params)
        model_params = getattr(self.llm, "model_params", None)
        if no_repack and getattr(model_params, NO_REPACK_PARAM, False):
            raise BaselineUnavailable(
                f"llama-cpp-python {llama_cpp.__version__}: {NO_REPACK_PARAM}=False did not "
                "reach the model parameters (weights still repacked)"
            )
        system = llama_cpp.llama_print_system_info()
        text = system.decode() if isinstance(system, bytes) else str(system)
        # "CPU : SSE3 = 1 | AVX2 = 1 | ... | REPACK = 1 |": the names set to 1
        on = [p.split("=")[0] for p in text.split("|") if p.strip().endswith("= 1")]
        features = [name.split(":")[-1].strip() for name in on]
        repack = (
            f"weight repacking off ({NO_REPACK_PARAM}=False)"
            if no_repack
            else "weight repacking on (extra buffer types, AMX where built)"
        )
        self.info = {
            "threads": threads,
            "version": llama_cpp.__version__,
            "isa": f"{' '.join(features) or text.strip()}; {repack}",
            "repack": not no_repack,
        }

    def prefill(self, tokens: list[int]) -> float:
        self.llm.reset()
        t0 = time.perf_counter()
        self.llm.eval(tokens)
        return time.perf_counter() - t0

    def decode(self, context: list[int], tokens: list[int]) -> float:
        self.llm.reset()
        self.llm.eval(context)
        t0 = time.perf_counter()
        for tok in tokens:
            self.llm.eval([tok])
        return time.perf_counter() - t0

    def sample(self, tokens: list[int], stride: int) -> list[float]:
        self.llm.reset()
        self.llm.eval(tokens)
        return [float(x) for x in self.llm.scores[len(tokens) - 1, ::stride]]


@contextlib.contextmanager
def _without_repacking(llama_cpp: Any) -> Iterator[dict[str, Any]]:
    """Inside: ``llama_cpp.Llama`` loads the model with ``use_extra_bufts=False``; yields
    the keywords to add to the ``Llama(...)`` call.

    A ``Llama`` that names the parameter gets the keyword.  llama-cpp-python 0.3.x does not
    (read in 0.3.36's source: ``Llama.__init__`` takes unknown keywords in ``**kwargs`` and
    drops them, so the keyword alone would change nothing) but its ctypes
    ``llama_model_params`` has the field (llama.cpp's model parameter; older llama.cpp
    lacks it), and ``Llama`` starts from ``llama_model_default_params()``: inside this
    context that function returns defaults with the field off.  A version with neither
    raises :class:`BaselineUnavailable`; the caller checks ``Llama.model_params`` after
    loading."""
    version = getattr(llama_cpp, "__version__", "?")
    if NO_REPACK_PARAM in inspect.signature(llama_cpp.Llama).parameters:
        yield {NO_REPACK_PARAM: False}
        return
    try:  # the ctypes bindings: llama.py calls its llama_model_default_params()
        bindings = importlib.import_module(f"{llama_cpp.__name__}.llama_cpp")
    except ImportError:
        bindings = None
    struct = getattr(bindings, "llama_model_params", None)
    fields = {f[0] for f in getattr(struct, "_fields_", ())}
    defaults = getattr(bindings, "llama_model_default_params", None)
    if bindings is None or defaults is None or NO_REPACK_PARAM not in fields:
        raise BaselineUnavailable(
            f"llama-cpp-python {version} cannot load without weight repacking: neither "
            f"Llama() nor llama_model_params has {NO_REPACK_PARAM} (built on an older llama.cpp)"
        )

    def no_repack_defaults() -> Any:
        p = defaults()
        setattr(p, NO_REPACK_PARAM, False)
        return p

    bindings.llama_model_default_params = no_repack_defaults
    try:
        yield {}
    finally:
        bindings.llama_model_default_params = defaults


def _make_runner(spec: dict[str, Any]) -> Runner:
    kind = spec["kind"]
    if kind == "ckir":
        return CkirRunner(spec["build"], spec["threads"])
    if kind == "torch":
        return TorchRunner(spec["model"], spec["dtype"], spec["threads"])
    if kind == "onnxruntime":
        return OrtRunner(spec["model"], spec["onnx"], spec["tokens"], spec["threads"])
    if kind == "llama.cpp":
        return LlamaCppRunner(
            spec["gguf"],
            spec["threads"],
            spec["n_ctx"],
            spec["n_batch"],
            no_repack=bool(spec.get("no_repack", False)),
        )
    if kind.endswith("-train"):
        from ckir.tools import bench_train

        return bench_train.make_runner(spec)
    raise ValueError(f"unknown worker kind {kind!r}")


def process_rss_kb() -> dict[str, float]:
    """This process's resident set now and its high-water mark (``/proc/self/status``, kB)."""
    out: dict[str, float] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile"):
                out[key] = float(value.split()[0])
    return out


def worker_main(spec_text: str) -> int:
    """The worker process: replies go to a private copy of stdout; fd 1 becomes stderr."""
    reply_fd = os.dup(1)
    os.dup2(2, 1)
    out = os.fdopen(reply_fd, "w")

    def reply(obj: dict[str, Any]) -> None:
        out.write(json.dumps(obj) + "\n")
        out.flush()

    try:
        runner = _make_runner(json.loads(spec_text))
    except BaselineUnavailable as exc:
        reply({"error": str(exc)})
        return 1
    except Exception as exc:
        text = str(exc).strip().splitlines()
        reply({"error": f"{type(exc).__name__}: {text[0] if text else ''}"})
        return 1
    reply({"ok": True, **runner.info})
    for line in sys.stdin:
        msg = json.loads(line)
        op = msg["op"]
        try:
            if op == "quit":
                break
            if op == "prefill":
                reply({"s": runner.prefill(msg["tokens"])})
            elif op == "decode":
                reply({"s": runner.decode(msg["context"], msg["tokens"])})
            elif op == "sample":
                reply({"values": runner.sample(msg["tokens"], msg["stride"])})
            elif op == "train":
                reply(runner.train(msg["tokens"], msg["targets"]))
            elif op == "loss":
                reply({"loss": runner.loss(msg["tokens"], msg["targets"])})
            elif op == "rss":
                reply(process_rss_kb())
            elif op == "prof_reset" and isinstance(runner, CkirRunner):
                runner.prof_reset()
                reply({"ok": True})
            elif op == "prof_get" and isinstance(runner, CkirRunner):
                reply(runner.prof_get())
            else:
                reply({"error": f"unsupported request {op!r}"})
        except Exception as exc:
            reply({"error": f"{type(exc).__name__}: {exc}"})
    return 0


# ---------------------------------------------------------------------------------------
# llama.cpp: install on first use, write a GGUF from the HF checkpoint
# ---------------------------------------------------------------------------------------


def ensure_llama_cpp(log: Callable[[str], None] = _log) -> None:
    """Import llama_cpp in a child process; pip-install llama-cpp-python if that fails."""
    probe = [sys.executable, "-c", "import llama_cpp"]
    if subprocess.run(probe, capture_output=True).returncode == 0:
        return
    log("llama.cpp: installing llama-cpp-python from PyPI (source build, about 5 minutes) ...")
    env = dict(os.environ)
    env.setdefault("CMAKE_ARGS", "-DGGML_NATIVE=ON")
    cmd = [sys.executable, "-m", "pip", "install", "--no-binary", "llama-cpp-python"]
    proc = subprocess.run([*cmd, "llama-cpp-python"], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        lines = [ln for ln in (proc.stderr + proc.stdout).splitlines() if ln.strip()]
        err = next((ln for ln in lines if "error" in ln.lower()), lines[-1] if lines else "")
        raise BaselineUnavailable(f"llama.cpp: pip install llama-cpp-python failed: {err.strip()}")
    if subprocess.run(probe, capture_output=True).returncode != 0:
        raise BaselineUnavailable("llama.cpp: llama_cpp does not import after installing it")


def _permute_rope(w: Any, heads: int) -> Any:
    """HF rotate-half q/k rows -> llama.cpp's interleaved (GPT-J) rope order."""
    n = w.shape[0]
    return w.reshape(heads, 2, n // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def write_gguf(model_dir: Path, dtype: str, out: Path) -> Path:
    """A GGUF file of the HF checkpoint for llama.cpp, matrices stored as ``dtype``.

    Like ckir's ``--dtype``: 2-D matrices (embeddings, projections, LM head)
    are converted (block formats only where K is a multiple of 32), GPT-2's
    position table, norms and biases stay f32.  No tokenizer: the vocabulary
    is declared as ``none`` with ``vocab_size`` dummy tokens (token ids only).
    """
    import gguf
    import numpy as np
    from safetensors.numpy import load_file

    from ckir import quant

    cfg = model_config(model_dir)
    mtype = cfg["model_type"]
    tensors: dict[str, np.ndarray] = {}
    for f in sorted(model_dir.glob("*.safetensors")):
        tensors.update(load_file(str(f)))
    gq = gguf.GGMLQuantizationType
    raw = {"bf16": gq.BF16, "q8_0": gq.Q8_0, "q4_0": gq.Q4_0, "q4_1": gq.Q4_1}

    tmp = out.with_name(out.name + ".tmp")
    if mtype in ("llama", "mistral"):
        arch = "llama"
    elif mtype in ("qwen2", "gpt2"):
        arch = mtype
    else:
        raise BaselineUnavailable(f"llama.cpp: no GGUF writer for model_type {mtype!r}")
    w = gguf.GGUFWriter(str(tmp), arch)

    def add(name: str, arr: np.ndarray, convert: bool = True) -> None:
        arr = np.ascontiguousarray(arr, dtype=np.float32)
        blocky = dtype.startswith("q")
        if convert and dtype != "f32" and arr.ndim == 2 and not (blocky and arr.shape[1] % 32):
            data = quant.quantize(arr, dtype)
            if dtype == "bf16":
                data = data.view(np.uint8)
            w.add_tensor(name, data, raw_dtype=raw[dtype])
        else:
            w.add_tensor(name, arr)

    if arch == "gpt2":
        E, L, H = cfg["n_embd"], cfg["n_layer"], cfg["n_head"]
        p = "transformer." if "transformer.wte.weight" in tensors else ""
        w.add_context_length(cfg["n_positions"])
        w.add_embedding_length(E)
        w.add_block_count(L)
        w.add_feed_forward_length(cfg.get("n_inner") or 4 * E)
        w.add_head_count(H)
        w.add_layer_norm_eps(cfg.get("layer_norm_epsilon", 1e-5))
        add("token_embd.weight", tensors[f"{p}wte.weight"])
        add("position_embd.weight", tensors[f"{p}wpe.weight"], convert=False)
        for i in range(L):
            h = f"{p}h.{i}."
            for src, dst in (("ln_1", "attn_norm"), ("ln_2", "ffn_norm")):
                add(f"blk.{i}.{dst}.weight", tensors[h + src + ".weight"])
                add(f"blk.{i}.{dst}.bias", tensors[h + src + ".bias"])
            for src, dst in (
                ("attn.c_attn", "attn_qkv"),
                ("attn.c_proj", "attn_output"),
                ("mlp.c_fc", "ffn_up"),
                ("mlp.c_proj", "ffn_down"),
            ):
                add(f"blk.{i}.{dst}.weight", tensors[h + src + ".weight"].T)  # Conv1D
                add(f"blk.{i}.{dst}.bias", tensors[h + src + ".bias"])
        add("output_norm.weight", tensors[f"{p}ln_f.weight"])
        add("output_norm.bias", tensors[f"{p}ln_f.bias"])
        if "lm_head.weight" in tensors and not cfg.get("tie_word_embeddings", True):
            add("output.weight", tensors["lm_head.weight"])
    else:
        E, L = cfg["hidden_size"], cfg["num_hidden_layers"]
        H = cfg["num_attention_heads"]
        KV = cfg.get("num_key_value_heads") or H
        w.add_context_length(cfg.get("max_position_embeddings", 2048))
        w.add_embedding_length(E)
        w.add_block_count(L)
        w.add_feed_forward_length(cfg["intermediate_size"])
        w.add_head_count(H)
        w.add_head_count_kv(KV)
        rope = cfg.get("rope_parameters") or {}  # transformers 5 nests rope_theta here
        w.add_rope_freq_base(float(rope.get("rope_theta", cfg.get("rope_theta", 10000.0))))
        w.add_layer_norm_rms_eps(float(cfg.get("rms_norm_eps", 1e-6)))
        add("token_embd.weight", tensors["model.embed_tokens.weight"])
        for i in range(L):
            h = f"model.layers.{i}."
            q = tensors[h + "self_attn.q_proj.weight"]
            k = tensors[h + "self_attn.k_proj.weight"]
            if arch == "llama":
                q, k = _permute_rope(q, H), _permute_rope(k, KV)
            add(f"blk.{i}.attn_norm.weight", tensors[h + "input_layernorm.weight"])
            add(f"blk.{i}.attn_q.weight", q)
            add(f"blk.{i}.attn_k.weight", k)
            add(f"blk.{i}.attn_v.weight", tensors[h + "self_attn.v_proj.weight"])
            if arch == "qwen2":
                for part in ("q", "k", "v"):
                    add(f"blk.{i}.attn_{part}.bias", tensors[h + f"self_attn.{part}_proj.bias"])
            add(f"blk.{i}.attn_output.weight", tensors[h + "self_attn.o_proj.weight"])
            add(f"blk.{i}.ffn_norm.weight", tensors[h + "post_attention_layernorm.weight"])
            add(f"blk.{i}.ffn_gate.weight", tensors[h + "mlp.gate_proj.weight"])
            add(f"blk.{i}.ffn_up.weight", tensors[h + "mlp.up_proj.weight"])
            add(f"blk.{i}.ffn_down.weight", tensors[h + "mlp.down_proj.weight"])
        add("output_norm.weight", tensors["model.norm.weight"])
        if "lm_head.weight" in tensors and not cfg.get("tie_word_embeddings", False):
            add("output.weight", tensors["lm_head.weight"])
    w.add_vocab_size(int(cfg["vocab_size"]))
    w.add_tokenizer_model("none")
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    tmp.replace(out)
    return out


# ---------------------------------------------------------------------------------------
# the benchmark
# ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Fallback:
    """How a system runs again, once, when its worker dies (a signal or any exit without a
    reply) while starting or running: the worker spec updated with ``spec``."""

    #: worker spec keys of the other path, e.g. ``{"no_repack": True}``
    spec: dict[str, Any]
    #: the path that died, for the note: "with llama.cpp's weight repacking (...)"
    path: str
    #: the path run instead, for the note: "use_extra_bufts=False"
    instead: str


#: llama.cpp's fallback: on Sapphire Rapids its q8_0/q4_1 workers died (SIGSEGV in
#: ggml_backend_amx_mul_mat) with the weights repacked for AMX; without repacking they run
LLAMA_CPP_NO_REPACK = Fallback(
    spec={"no_repack": True},
    path="with llama.cpp's weight repacking (AMX/extra buffer types)",
    instead=f"{NO_REPACK_PARAM}=False",
)


@dataclass
class System:
    """One column of runs: a system at a dtype, with its worker and its timings."""

    name: str
    dtype: str
    modes: tuple[str, ...]
    worker: Worker | None = None
    seconds: dict[str, list[float]] = field(default_factory=dict)
    #: per run: the machine probe (GB/s decode, GFLOP/s prefill), mean of right before and after
    probes: dict[str, list[float]] = field(default_factory=dict)
    #: per run: its round (0-based); the runs of two systems pair by round
    rounds: dict[str, list[int]] = field(default_factory=dict)
    dead: str | None = None
    #: the worker spec it was started with (start_system)
    spec: dict[str, Any] = field(default_factory=dict)
    #: the other path to restart on when the worker dies (once), or None
    fallback: Fallback | None = None
    #: requests replayed on a restarted worker before it measures (the warm-up)
    warmup: list[dict[str, Any]] = field(default_factory=list)
    #: set when the worker died and was restarted with the fallback: how it died
    first_failure: str | None = None
    #: runs measured before that restart (another path): discarded
    discarded_runs: int = 0

    @property
    def label(self) -> str:
        return f"{self.name} {self.dtype}"

    def run_rounds(self, mode: str) -> list[int]:
        """The round of each run of ``mode`` (0, 1, ... where not recorded)."""
        got = self.rounds.get(mode)
        return list(got) if got is not None else list(range(len(self.seconds.get(mode, []))))

    def discard_runs(self) -> int:
        """Forget every measured run (they ran another path); how many there were."""
        n = sum(len(v) for v in self.seconds.values())
        for runs in (self.seconds, self.probes, self.rounds):
            for m in runs:
                runs[m] = []
        return n


def paired_rounds(a: System, b: System, mode: str) -> list[tuple[int, int]]:
    """(index of a's run, index of b's run) for each round in which both ran ``mode``."""
    mine = {r: i for i, r in enumerate(a.run_rounds(mode))}
    return [(mine[r], j) for j, r in enumerate(b.run_rounds(mode)) if r in mine]


@dataclass
class Report:
    model: str
    args: dict[str, Any]
    costs: dict[str, ModelCost]
    compile: dict[str, CompileTimes]
    systems: list[System]
    bandwidth: list[float]
    fma: list[float]
    bandwidth_4k: list[float]
    notes: list[str]
    rss: dict[str, dict[str, float]]
    profiles: dict[str, dict[str, Any]]
    env: dict[str, str]
    builds: dict[str, Path] = field(default_factory=dict)
    #: the bf16 dot probes bracketing bf16 prefill runs (AVX512-BF16 CPUs only)
    bf16_dot: list[float] = field(default_factory=list)
    #: the instruction those probes time: vdpbf16ps, or tdpbf16ps on AMX tiles
    bf16_insn: str = ""
    #: the int8 dot probes bracketing q8_0 / q4_0 / q4_1 prefill runs (CPUs with AVX2 or VNNI)
    int8_dot: list[float] = field(default_factory=list)
    #: the instruction those probes time (bandwidth.int8_dot_insn, or tdpbssd on AMX)
    int8_insn: str = ""
    #: what a bench variant adds (--modes train: losses, layout totals, worker RSS)
    extra: dict[str, Any] = field(default_factory=dict)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="HF checkpoint folder, or " + ", ".join(SHAPES))
    p.add_argument(
        "--modes",
        "--mode",
        default=",".join(INFERENCE_MODES),
        help=f"{','.join(INFERENCE_MODES)} (default both), or {TRAIN_MODE} (training steps)",
    )
    p.add_argument("--dtype", default="f32", help=f"comma list of {', '.join(WEIGHT_DTYPES)}")
    p.add_argument(
        "--against",
        default=None,
        help=f"comma list of {', '.join(BASELINES)} (default none; {TRAIN_MODE}: torch)",
    )
    p.add_argument(
        "--prompt-tokens", type=int, default=128, help=f"prefill length ({TRAIN_MODE}: T)"
    )
    p.add_argument("--decode-tokens", type=int, default=64, help="timed decode steps")
    p.add_argument("--context", type=int, default=128, help="tokens cached before decoding")
    p.add_argument("--repeat", type=int, default=5, help="rounds (every system once per round)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument(
        "--isa",
        default="native",
        choices=ISAS,
        help="ckir's kernels: native (default), or avx2 / scalar as built for other CPUs",
    )
    p.add_argument("--profile", action="store_true", help="per-kernel time shares of ckir")
    p.add_argument(
        "--cold-build", action="store_true", help="also time the C build with no cached objects"
    )
    p.add_argument("--probe-mib", type=int, default=256, help="read-bandwidth probe buffer")
    p.add_argument("--build-dir", help="where ckir builds go (default: the cache dir)")
    p.add_argument("--json", help="also write every measurement to this JSON file")
    p.add_argument("--timeout", type=float, default=1800, help="seconds a worker may take to start")
    from ckir.tools import bench_train

    bench_train.add_arguments(p)


def _split(text: str, allowed: Sequence[str], what: str) -> list[str]:
    items = [t.strip() for t in text.split(",") if t.strip()]
    bad = [t for t in items if t not in allowed]
    if bad:
        raise CkirError(f"--{what}: unknown {bad[0]!r} (choose from {', '.join(allowed)})")
    return list(dict.fromkeys(items))


def _split_against(text: str | None, mode: str) -> list[str]:
    """``--against``: the baselines named, or the mode's default when the option is absent
    (none for inference, torch for training)."""
    if text is None:
        return ["torch"] if mode == TRAIN_MODE else []
    return _split(text, BASELINES, "against")


def source_info() -> str:
    """Which ckir is measured: a clean export's COMMIT file, git HEAD (+ dirty files), or
    the installed version."""
    root = source_root()
    if root is None:
        return f"installed ckir {__version__}"
    if (root / "COMMIT").exists():
        return f"commit {(root / 'COMMIT').read_text().strip()} (clean export)"
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--", "ckir", "runtime", "passes"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.splitlines()
    except (OSError, subprocess.CalledProcessError):
        return "not a git checkout"
    if dirty:
        return f"git {head} + {len(dirty)} uncommitted file(s) in ckir/, runtime/, passes/"
    return f"git {head}"


#: the /proc/cpuinfo flags that decide which kernels a system can run, in report order
ISA_FLAGS: tuple[str, ...] = (
    "avx2",
    "fma",
    "f16c",
    "avx512f",
    "avx512bw",
    "avx512vl",
    "avx512_vnni",
    "avx512_bf16",
    "avx512_fp16",
    "avx_vnni",
    "amx_tile",
    "amx_bf16",
    "amx_int8",
)


def cpu_info() -> str:
    """``<model name>, <n> CPUs; ISA: <the flags of ISA_FLAGS this CPU has>``: the machine
    kind (AMD EPYC AVX2, Intel Xeon AVX-512 with or without BF16/AMX) in one line."""
    name, flags = "unknown CPU", set[str]()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and name == "unknown CPU":
                name = value.strip()
            elif key.strip() == "flags" and not flags:
                flags = set(value.split())
    isa = " ".join(f for f in ISA_FLAGS if f in flags) or "unknown"
    return f"{name}, {os.cpu_count()} CPUs; ISA: {isa}"


def _tokens(n: int, vocab: int, seed: int) -> list[int]:
    import numpy as np

    return [int(t) for t in np.random.default_rng(seed).integers(0, vocab, size=n)]


@contextlib.contextmanager
def _workers(systems: list[System]) -> Iterator[None]:
    try:
        yield
    finally:
        for s in systems:
            if s.worker is not None:
                s.worker.close()


def run(args: argparse.Namespace) -> int:
    modes = tuple(_split(args.modes, BENCH_MODES, "modes"))
    dtypes = _split(args.dtype, WEIGHT_DTYPES, "dtype")
    if not modes or not dtypes:
        raise CkirError("--modes and --dtype need at least one entry")
    for name in ("prompt_tokens", "decode_tokens", "context", "repeat", "threads"):
        if getattr(args, name) < (0 if name == "context" else 1):
            raise CkirError(f"--{name.replace('_', '-')} must be positive")
    if TRAIN_MODE in modes:
        from ckir.tools import bench_train

        if len(modes) > 1:
            raise CkirError(f"--modes {TRAIN_MODE} runs alone (no inference modes with it)")
        report = bench_train.collect(args, dtypes, _split_against(args.against, TRAIN_MODE))
        text = bench_train.render(report)
    else:
        report = collect(args, modes, dtypes, _split_against(args.against, ""))
        text = render(report)
    print(text)
    if args.json:
        Path(args.json).write_text(json.dumps(report_json(report), indent=1) + "\n")
    return 0


def collect(
    args: argparse.Namespace, modes: tuple[str, ...], dtypes: list[str], against: list[str]
) -> Report:
    from ckir.compiler import CompileOptions
    from ckir.passes.convert_weights import k_multiple
    from ckir.tools import bandwidth

    model_dir, name = resolve_model(args.model)
    cfg = model_config(model_dir)
    vocab = int(cfg["vocab_size"])
    max_ctx = max(args.prompt_tokens, args.context + args.decode_tokens)
    positions = cfg.get("max_position_embeddings") or cfg.get("n_positions")
    if positions and max_ctx > positions:
        raise CkirError(f"{name}: {max_ctx} tokens needed but the model has {positions} positions")
    build_root = Path(args.build_dir) if args.build_dir else cache_root() / "bench-builds"
    notes: list[str] = []
    if args.isa != "native":
        notes.append(
            f"ckir: compiled with --isa {args.isa} (the kernels other CPUs run); every bound "
            "is still this CPU's fastest instruction of its kind"
        )

    # -- compile ckir, one build per dtype --------------------------------------------
    builds: dict[str, Path] = {}
    compile_times: dict[str, CompileTimes] = {}
    costs: dict[str, ModelCost] = {}
    for dt in dtypes:
        out = build_root / f"{name}-{dt}-ctx{max_ctx}{isa_suffix(args.isa)}"
        _log(f"compiling {name} ({dt}) -> {out}")
        compile_times[dt] = compile_build(
            model_dir, out, dt, max_ctx, args.cold_build, isa=args.isa
        )
        builds[dt] = out
        costs[dt] = model_cost(out)

    # -- systems ---------------------------------------------------------------------
    prompt = _tokens(args.prompt_tokens, vocab, 1)
    context = _tokens(args.context, vocab, 2)
    steps = _tokens(args.decode_tokens, vocab, 3)
    specs: list[tuple[System, dict[str, Any]]] = []
    base = {"threads": args.threads}
    gguf_dir = cache_root() / "bench-gguf"
    if "llama.cpp" in against:
        try:
            ensure_llama_cpp()
        except BaselineUnavailable as exc:
            notes.append(str(exc))
            against = [a for a in against if a != "llama.cpp"]
    for dt in dtypes:
        s = System("ckir", dt, modes)
        specs.append((s, {**base, "kind": "ckir", "build": str(builds[dt])}))
        if dt in PANEL_OF and CompileOptions(dtype=None if dt == "f32" else dt).uses_panels:
            # a K the panels cannot hold stays row-major, unless dt cannot hold it either
            group = dtype_info(PANEL_OF[dt]).k_group
            stays = group > k_multiple(dt)
            notes.append(
                f"ckir {dt}: the weight matrices are stored as {PANEL_OF[dt]} ({dt} in GEMM "
                "panels, the default of inference builds"
                + (f"; those whose K is no multiple of {group} stay {dt})" if stays else ")")
            )
        # the panel dtypes hold the values of f32 / bf16 / q8_0 / q4_1 / q4_0: the
        # baselines run those (once, when that dtype is benched too)
        bdt = baseline_dtype(dt)
        if bdt != dt and bdt in dtypes:
            if against:
                notes.append(f"baselines at {dt}: see their {bdt} rows (the same weights)")
            continue
        for b in against:
            if b == "torch":
                if bdt not in ("f32", "bf16"):
                    notes.append(f"torch: no {dt} weights in PyTorch eager; skipped")
                    continue
                spec = {**base, "kind": "torch", "model": str(model_dir), "dtype": bdt}
                specs.append((System("torch", dt, modes), spec))
            elif b == "onnxruntime":
                if "prefill" not in modes or bdt != "f32":
                    if bdt == "f32":
                        notes.append("onnxruntime: prefill only (no decode run)")
                    continue
                onnx = cache_root() / "bench-onnx" / f"{name}-T{args.prompt_tokens}"
                spec = {
                    **base,
                    "kind": "onnxruntime",
                    "model": str(model_dir),
                    "onnx": str(onnx),
                    "tokens": args.prompt_tokens,
                }
                specs.append((System("onnxruntime", dt, ("prefill",)), spec))
            elif b == "llama.cpp":
                path = gguf_dir / f"{name}-{bdt}.gguf"
                src_mtime = max(f.stat().st_mtime for f in model_dir.glob("*.safetensors"))
                try:
                    if not path.exists() or path.stat().st_mtime < src_mtime:
                        _log(f"llama.cpp: writing {path}")
                        path.parent.mkdir(parents=True, exist_ok=True)
                        write_gguf(model_dir, bdt, path)
                except (BaselineUnavailable, KeyError, ImportError) as exc:
                    notes.append(f"llama.cpp {dt}: cannot write the GGUF file: {exc}")
                    continue
                spec = {
                    **base,
                    "kind": "llama.cpp",
                    "gguf": str(path),
                    "n_ctx": max_ctx,
                    "n_batch": max(args.prompt_tokens, args.context),
                }
                system = System("llama.cpp", dt, modes, fallback=LLAMA_CPP_NO_REPACK)
                specs.append((system, spec))

    report = Report(
        model=name,
        args={k: v for k, v in vars(args).items() if k != "func"},
        costs=costs,
        compile=compile_times,
        systems=[],
        bandwidth=[],
        fma=[],
        bandwidth_4k=[],
        notes=notes,
        rss={},
        profiles={},
        env={},
        builds=builds,
    )
    report.env["ckir"] = source_info()
    report.env["cpu"] = cpu_info()
    report.env["load average at start"] = f"{os.getloadavg()[0]:.2f}"
    with _workers([s for s, _ in specs]):
        systems = report.systems = start_workers(specs, args, report)
        _agreement(systems, prompt, vocab, notes)
        warm_up(systems, prompt, context, steps)
        with (
            bandwidth.ReadProbe(args.probe_mib, huge=True) as probe,
            bandwidth.ReadProbe(args.probe_mib, huge=False) as probe_4k,
        ):
            # the fastest instruction of each kind on this CPU bounds its dtypes: AMX
            # tiles where the CPU has them (ckir's and oneDNN's GEMMs use them there)
            amx_bf16 = bool(bandwidth.amx_peak(args.threads, 1, iters=1000))
            amx_int8 = bool(bandwidth.amx_peak(args.threads, 1, iters=1000, int8=True))
            bf16_dot = amx_bf16 or bool(bandwidth.bf16_dot_peak(args.threads, 1, iters=1000))
            int8_dot = amx_int8 or bool(bandwidth.int8_dot_peak(args.threads, 1, iters=1000))
            report.bf16_insn = "tdpbf16ps" if amx_bf16 else "vdpbf16ps" if bf16_dot else ""
            report.int8_insn = (
                "tdpbssd" if amx_int8 else bandwidth.int8_dot_insn() if int8_dot else ""
            )

            def machine(mode: str, dtype: str) -> float:
                if mode == "decode":
                    value = statistics.median(probe.measure(args.threads, 3))
                    report.bandwidth.append(value)
                elif baseline_dtype(dtype) == "bf16" and bf16_dot:
                    value = fma_probe(args.threads, kind="amx_bf16" if amx_bf16 else "bf16")
                    report.bf16_dot.append(value)
                elif baseline_dtype(dtype) in INT8_DOT_DTYPES and int8_dot:
                    value = fma_probe(args.threads, kind="amx_int8" if amx_int8 else "int8")
                    report.int8_dot.append(value)
                else:
                    value = fma_probe(args.threads)
                    report.fma.append(value)
                return value

            def before_round(r: int) -> None:
                if "decode" in modes:
                    report.bandwidth_4k.append(statistics.median(probe_4k.measure(args.threads, 3)))

            probe.measure(args.threads, 1)
            probe_4k.measure(args.threads, 1)
            bandwidth.fma_peak(args.threads, 1)
            alternate_rounds(
                systems,
                modes,
                args.repeat,
                lambda s, mode, r: _run_one(s, mode, prompt, context, steps),
                machine,
                before_round,
            )
        notes += system_notes(systems)
        set_isa_env(report.env, systems)
        report.env["load average after the rounds"] = f"{os.getloadavg()[0]:.2f}"
        report.rss = {dt: _peak_rss(builds[dt], args, vocab) for dt in dtypes if "decode" in modes}
        if args.profile:
            for dt in dtypes:
                report.profiles[dt] = _profile(builds[dt], args, prompt, context, steps)
    return report


def start_workers(
    specs: list[tuple[System, dict[str, Any]]], args: argparse.Namespace, report: Report
) -> list[System]:
    """Start a worker per system (in order); the systems whose worker started.  A ckir
    worker that fails is an error; a baseline that fails is skipped with a note."""
    systems: list[System] = []
    for s, spec in specs:
        _log(f"starting {s.label} ...")
        try:
            start_system(s, spec, args.threads, args.timeout)
        except BaselineUnavailable as exc:
            if s.name == "ckir":
                raise CkirError(str(exc)) from None
            report.notes.append(f"{s.label}: skipped: {str(exc).removeprefix(s.label + ': ')}")
            continue
        assert s.worker is not None
        if s.name != "ckir":
            report.env[s.name] = str(s.worker.info.get("version", ""))
            if s.name == "torch":
                report.env["torch attention"] = str(s.worker.info.get("attn", ""))
        systems.append(s)
    set_isa_env(report.env, systems)
    return systems


def set_isa_env(env: dict[str, str], systems: list[System]) -> None:
    """The ISA each system ran with, in ``env`` where its ISA entries were: ``<name> ISA``,
    or ``<name> <dtype> ISA`` each where the systems of a name ran different paths (one
    restarted with its fallback).  A system dropped without runs has none."""
    by_name: dict[str, dict[str, str]] = {}
    for s in systems:
        ran = s.dead is None or any(s.seconds.values())
        isa = s.worker.info.get("isa") if s.worker is not None and ran else None
        if isa:
            by_name.setdefault(s.name, {})[s.label] = str(isa)
    new: dict[str, str] = {}
    for name, isas in by_name.items():
        if len(set(isas.values())) == 1:
            new[f"{name} ISA"] = next(iter(isas.values()))
        else:
            new.update({f"{label} ISA": isa for label, isa in isas.items()})
    out: dict[str, str] = {}
    for key, value in env.items():
        if key.endswith(" ISA"):
            out |= new
            new = {}
        else:
            out[key] = value
    env.clear()
    env.update(out | new)


# ---------------------------------------------------------------------------------------
# a worker that dies: restarted once with the system's fallback
# ---------------------------------------------------------------------------------------


def start_system(s: System, spec: dict[str, Any], threads: int, timeout: float) -> None:
    """``s.worker``: a worker of ``spec``; one that dies while starting is started again
    with ``s.fallback``.  :class:`BaselineUnavailable` when no worker runs."""
    s.spec = spec
    try:
        s.worker = Worker(s.label, spec, threads, timeout)
    except WorkerDied as exc:
        if s.fallback is None:
            raise
        _fall_back(s, exc, "while starting", threads, timeout)


def call_with_fallback(s: System, **msg: Any) -> dict[str, Any]:
    """``s.worker.call(**msg)``.  When the worker dies and ``s`` has a fallback not yet
    taken: restart it with the fallback (its runs so far discarded, its warm-up replayed)
    and send ``msg`` again.  :class:`BaselineUnavailable` when the call fails; when the
    fallback fails too, ``s.dead`` names both failures and ``s`` keeps no runs."""
    assert s.worker is not None
    try:
        return s.worker.call(**msg)
    except WorkerDied as exc:
        if s.fallback is None:
            raise
        when = f"while running ({msg.get('op')})"
        if s.first_failure is not None:
            raise _drop(s, f"died too ({exc.cause}) {when}") from None
        _fall_back(s, exc, when, s.worker.threads, s.worker.timeout)
    return call_with_fallback(s, **msg)


def _fall_back(s: System, died: WorkerDied, when: str, threads: int, timeout: float) -> None:
    fb = s.fallback
    assert fb is not None and s.first_failure is None
    if s.worker is not None:
        s.worker.close()
        s.worker = None
    s.first_failure = f"the worker died ({died.cause}) {fb.path} {when}"
    s.discarded_runs = s.discard_runs()
    _log(f"{s.label}: {s.first_failure}; starting it again with {fb.instead} ...")
    try:
        s.worker = Worker(s.label, {**s.spec, **fb.spec}, threads, timeout)
    except BaselineUnavailable as exc:
        if isinstance(exc, WorkerDied):
            again = f"died too ({exc.cause})"
        else:
            again = f"failed ({str(exc).removeprefix(s.label + ': ')})"
        raise _drop(s, f"{again} while starting") from None
    for warm in s.warmup:
        call_with_fallback(s, **warm)


def _drop(s: System, second: str) -> BaselineUnavailable:
    """The fallback failed too: ``s`` is dead and keeps no runs (its row is dropped)."""
    assert s.fallback is not None
    s.dead = f"{s.first_failure}; with {s.fallback.instead} it {second}; no runs reported"
    s.discard_runs()
    return BaselineUnavailable(f"{s.label}: {s.dead}")


def system_notes(systems: Sequence[System]) -> list[str]:
    """A note per system that stopped, and per system measured on its fallback path."""
    out = []
    for s in systems:
        if s.dead is not None:
            out.append(f"{s.label}: stopped: {s.dead}")
        elif s.first_failure is not None and s.fallback is not None:
            note = f"{s.label}: {s.first_failure}; measured again with {s.fallback.instead}"
            if s.discarded_runs:
                note += (
                    f" (the {s.discarded_runs} run(s) measured before the restart were "
                    "discarded: this system has fewer rounds)"
                )
            out.append(note)
    return out


#: weight dtypes whose prefill runs int8 dot products (ckir's block panel GEMMs on any
#: AVX2 or AVX-512 CPU; llama.cpp's quantized matmuls): their prefill bound is the peak
#: of the int8 product instruction (vpdpbusd with VNNI, else vpmaddubsw).  The block
#: formats with a panel dtype: q8_0, q4_0, q4_1
INT8_DOT_DTYPES = frozenset(PANEL_VALUES[p] for p in PANEL_VALUES if p in BLOCK_DTYPES)


def fma_probe(threads: int, kind: str = "fp32") -> float:
    """The fp32 FMA peak (GFLOP/s) right now, or with ``kind`` "bf16" the vdpbf16ps peak
    (AVX512-BF16 CPUs), "int8" the int8 dot peak (vpdpbusd, or vpmaddubsw without VNNI;
    G ops/s), "amx_bf16" / "amx_int8" the AMX tiles' tdpbf16ps / tdpbssd peak: median of
    three probes."""
    from ckir.tools import bandwidth

    if kind in ("amx_bf16", "amx_int8"):
        peaks = bandwidth.amx_peak(threads, 3, iters=100_000, int8=kind == "amx_int8")
        return statistics.median(peaks)
    peak = {
        "fp32": bandwidth.fma_peak,
        "bf16": bandwidth.bf16_dot_peak,
        "int8": bandwidth.int8_dot_peak,
    }[kind]
    return statistics.median(peak(threads, 3, iters=4_000_000))


def alternate_rounds(
    systems: list[System],
    modes: Sequence[str],
    repeat: int,
    run_one: Callable[[System, str, int], float | None],
    machine: Callable[[str, str], float],
    before_round: Callable[[int], None] | None = None,
) -> None:
    """``repeat`` rounds; in each, every live system runs each mode once, in alternating
    order (reversed on odd rounds), every run bracketed by ``machine(mode, dtype)``.  A run's
    seconds go to ``s.seconds[mode]``, the mean of its two probes to ``s.probes[mode]``,
    its round to ``s.rounds[mode]``; ``run_one(system, mode, round)`` returns None when
    a baseline died (``s.dead``).  A worker restarted with its fallback inside a run
    (``call_with_fallback``: the system's runs so far discarded) runs that run again
    between fresh probes; the other systems' runs are untouched."""
    for s in systems:
        s.probes = {m: [] for m in s.modes}
        s.rounds = {m: [] for m in s.modes}
    for r in range(repeat):
        if before_round is not None:
            before_round(r)
        for mode in modes:
            order = systems if r % 2 == 0 else systems[::-1]
            for s in order:
                if mode in s.modes and s.dead is None:
                    restarted = s.first_failure is not None
                    before = machine(mode, s.dtype)
                    t = run_one(s, mode, r)
                    if t is not None and not restarted and s.first_failure is not None:
                        before = machine(mode, s.dtype)
                        t = run_one(s, mode, r)
                    after = machine(mode, s.dtype)
                    if t is not None:
                        s.seconds[mode].append(t)
                        s.probes[mode].append((before + after) / 2)
                        s.rounds[mode].append(r)
        _log(f"round {r + 1}/{repeat} done")


def guarded_call(s: System, **msg: Any) -> dict[str, Any] | None:
    """``call_with_fallback(s, **msg)``; when the worker fails: a CkirError for ckir, for
    a baseline None with ``s.dead`` set (it runs no more)."""
    try:
        return call_with_fallback(s, **msg)
    except BaselineUnavailable as exc:
        if s.name == "ckir":
            raise CkirError(str(exc)) from None
        if s.dead is None:
            s.dead = str(exc).removeprefix(s.label + ": ")
        return None


def _request(mode: str, prompt: list[int], context: list[int], steps: list[int]) -> dict[str, Any]:
    if mode == "prefill":
        return {"op": "prefill", "tokens": prompt}
    return {"op": "decode", "context": context, "tokens": steps}


def warm_up(systems: list[System], prompt: list[int], context: list[int], steps: list[int]) -> None:
    """Every system runs every mode once (pages in the weights): a prefill (or its first
    mode), a decode.  The same requests (``s.warmup``) warm up a worker restarted later."""
    for s in systems:
        modes = ["prefill" if "prefill" in s.modes else s.modes[0]]
        if "decode" in s.modes:
            modes.append("decode")
        s.warmup = [_request(m, prompt, context, steps) for m in modes]
        for msg in s.warmup:
            if s.dead is None:
                guarded_call(s, **msg)
        s.seconds = {m: [] for m in s.modes}


def _run_one(
    s: System, mode: str, prompt: list[int], context: list[int], steps: list[int]
) -> float | None:
    got = guarded_call(s, **_request(mode, prompt, context, steps))
    return None if got is None else float(got["s"])


def _agreement(systems: list[System], prompt: list[int], vocab: int, notes: list[str]) -> None:
    """Compare last-row logits of every baseline with ckir at the same dtype (sanity)."""
    stride = max(1, vocab // 512)
    ref: dict[str, list[float]] = {}
    for s in systems:
        if s.dead is not None:
            continue
        try:
            values = call_with_fallback(s, op="sample", tokens=prompt, stride=stride)["values"]
        except BaselineUnavailable as exc:
            notes.append(f"{s.label}: logits check failed: {exc}")
            continue
        if s.name == "ckir":
            ref[s.dtype] = values
        elif s.dtype in ref:
            r = ref[s.dtype]
            diff = max(abs(a - b) for a, b in zip(r, values, strict=True))
            scale = max(abs(a) for a in r) or 1.0
            notes.append(
                f"logits check {s.label} vs ckir {s.dtype}: max |diff| / max |logit| = "
                f"{diff / scale:.1e} over {len(r)} entries of the last prefill row"
            )


def _peak_rss(build: Path, args: argparse.Namespace, vocab: int) -> dict[str, float]:
    return run_rss_driver(build, args.threads, args.context, args.decode_tokens, vocab)


def run_rss_driver(
    build: Path, threads: int, tokens: int, steps: int, vocab: int, *, train: bool = False
) -> dict[str, float]:
    """The C driver's measurements (runtime/bench/rss_run.c): a prefill of ``tokens`` and
    ``steps`` decode steps, or with ``train`` ``steps`` training steps of ``tokens`` tokens;
    ``{"error": 1.0}`` when it fails."""
    from ckir.tools import bandwidth

    cmd = [
        str(bandwidth.rss_driver()),
        *(["--train"] if train else []),
        str((build / "libmodel.so").resolve()),
        str(build / "weights.bin"),
        str(threads),
        str(tokens),
        str(steps),
        str(vocab),
    ]
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        _log(f"rss driver failed: {proc.stderr.strip()[-300:]}")
        return {"error": 1.0}
    return {k: float(v) for k, v in json.loads(proc.stdout).items()}


def _profile(
    build: Path, args: argparse.Namespace, prompt: list[int], context: list[int], steps: list[int]
) -> dict[str, Any]:
    from ckir.tools import bandwidth

    prof_dir = build.with_name(build.name + "-profile")
    _log(f"profile: instrumented build {prof_dir}")
    calls = build_profile_copy(build, prof_dir)
    spec = {"kind": "ckir", "build": str(prof_dir), "threads": args.threads}
    w = Worker("ckir profile", spec, args.threads, args.timeout)
    out: dict[str, Any] = {"calls": [dataclasses.asdict(c) for c in calls]}
    try:
        w.call(op="prefill", tokens=prompt)
        w.call(op="decode", context=context, tokens=steps)
        modes = [m for m in INFERENCE_MODES if m in args.modes]
        with bandwidth.ReadProbe(args.probe_mib) as probe:
            for mode in modes:
                walls, probes = [], []
                w.call(op="prof_reset")
                for _ in range(args.repeat):
                    probes.append(statistics.median(probe.measure(args.threads, 3)))
                    if mode == "prefill":
                        walls.append(w.call(op="prefill", tokens=prompt)["s"])
                    else:
                        # the context prefill runs too: its calls are counted under "prefill"
                        walls.append(w.call(op="decode", context=context, tokens=steps)["s"])
                    probes.append(statistics.median(probe.measure(args.threads, 3)))
                got = w.call(op="prof_get")
                out[mode] = {
                    "wall": walls,
                    "times": got["times"],
                    "counts": got["counts"],
                    "bandwidth": probes,
                }
    finally:
        w.close()
    return out


# ---------------------------------------------------------------------------------------
# the report
# ---------------------------------------------------------------------------------------


def _tokens_per_run(args: dict[str, Any], mode: str) -> int:
    return int(args["decode_tokens"] if mode == "decode" else args["prompt_tokens"])


def _per_token(report: Report, dtype: str, mode: str) -> float | None:
    """Bytes (decode) or FLOPs (prefill, train) per token of a dtype, from its ckir build."""
    cost = report.costs.get(dtype)
    if cost is None:
        return None
    a = report.args
    if mode == "decode":
        return cost.decode_bytes(a["context"], a["decode_tokens"])
    if mode == TRAIN_MODE:
        return cost.train_flops(a["prompt_tokens"]) / a["prompt_tokens"]
    return cost.prefill_flops(a["prompt_tokens"]) / a["prompt_tokens"]


def _bounds(report: Report, s: System, mode: str) -> list[float]:
    """Per run: the bound tok/s from the probe taken around that run."""
    per_token = _per_token(report, s.dtype, mode)
    if per_token is None:
        return []
    return [p * 1e9 / per_token for p in s.probes.get(mode, [])]


def _fractions(report: Report, s: System, mode: str) -> list[float]:
    """Per run: tok/s / the bound from the probe taken around that run."""
    r = rates(_tokens_per_run(report.args, mode), s.seconds.get(mode, []))
    return [x / b for x, b in zip(r, _bounds(report, s, mode), strict=True)]


def render(report: Report) -> str:
    a = report.args
    out: list[str] = []
    out.append(
        f"# ckir bench {report.model}: threads {a['threads']}, {a['repeat']} rounds; "
        f"prefill {a['prompt_tokens']} tokens from empty; decode {a['decode_tokens']} tokens "
        f"after {a['context']}"
    )
    out.append("")
    out.append(results_table(report, INFERENCE_MODES))
    out.append("")
    out += _render_rooflines(report)
    out += _render_compile(report)
    out += _render_rss(report)
    for dt, prof in report.profiles.items():
        out += render_profile(report, dt, prof)
    if report.env:
        out.append("environment: " + "; ".join(f"{k}: {v}" for k, v in report.env.items()))
    for n in report.notes:
        out.append(f"note: {n}")
    return "\n".join(out)


def results_table(report: Report, modes: Sequence[str]) -> str:
    """The main table: tok/s per system and mode, the paired ratio ckir / system (median of
    per-round ratios, min–max) and the median fraction of the bound."""
    a = report.args
    rows = []
    ckir = {(s.dtype, m): s for s in report.systems if s.name == "ckir" for m in s.modes}
    for mode in modes:
        for s in report.systems:
            secs = s.seconds.get(mode)
            if not secs:
                continue
            r = rates(_tokens_per_run(a, mode), secs)
            ratio = "—"
            ref = ckir.get((s.dtype, mode))
            pairs = [] if s.name == "ckir" or ref is None else paired_rounds(ref, s, mode)
            if pairs:
                assert ref is not None
                pr = paired_ratios(
                    [ref.seconds[mode][i] for i, _ in pairs], [secs[j] for _, j in pairs]
                )
                ratio = f"{statistics.median(pr):.2f} ({fmt_range(pr)})"
            fr = _fractions(report, s, mode)
            frac = f"{statistics.median(fr):.2f}" if fr else "—"
            rows.append(
                [s.name, s.dtype, mode, fmt_num(statistics.median(r)), fmt_range(r), ratio, frac]
            )
    return markdown_table(
        ["system", "dtype", "mode", "tok/s median", "min–max", "ckir / this", "of bound"], rows
    )


def _render_rooflines(report: Report) -> list[str]:
    a = report.args
    out: list[str] = []
    ck = {s.dtype: s for s in report.systems if s.name == "ckir"}
    mean_rows = a["context"] + (a["decode_tokens"] + 1) / 2
    if report.bandwidth:
        bw = report.bandwidth
        bw4k = f"{fmt_num(statistics.median(report.bandwidth_4k))}" if report.bandwidth_4k else "—"
        out.append(
            f"Decode roofline. Read bandwidth: C probe ({a['probe_mib']} MiB, huge pages, "
            f"{a['threads']} threads) right before and after every run, median "
            f"{fmt_num(statistics.median(bw))} GB/s over {len(bw)} probes ({fmt_range(bw)}; "
            f"4 KiB pages, once per round: {bw4k} GB/s). Bytes per token = weight matrices + "
            f"LM head + embedding row + KV rows at the mean position {mean_rows:.1f}, in the "
            f"stored dtype. Bound = probe around the run / bytes; fraction = tok/s / bound, "
            f"per run."
        )
        out.append("")
        rows = []
        for dt, cost in report.costs.items():
            s = ck.get(dt)
            per_token = _per_token(report, dt, "decode")
            if s is None or per_token is None or not s.seconds.get("decode"):
                continue
            fr = _fractions(report, s, "decode")
            kv = cost.kv_bytes_per_position * mean_rows
            r = rates(a["decode_tokens"], s.seconds["decode"])
            rows.append(
                [
                    dt,
                    f"{per_token / 1e6:.1f}",
                    f"{cost.decode_weight_bytes / 1e6:.1f} + {kv / 1e6:.2f}",
                    fmt_num(statistics.median(s.probes["decode"])),
                    fmt_num(statistics.median(_bounds(report, s, "decode"))),
                    fmt_num(statistics.median(r)),
                    fmt_num(statistics.median(r) * per_token / 1e9),
                    f"{statistics.median(fr):.2f} ({fmt_range(fr)})",
                ]
            )
        head = [
            "dtype",
            "MB/token",
            "weights + KV MB",
            "probe GB/s",
            "bound tok/s",
            "ckir tok/s",
            "ckir GB/s",
            "ckir fraction (min–max)",
        ]
        out += [markdown_table(head, rows), ""]
    if report.fma or report.bf16_dot or report.int8_dot:
        fma = report.fma
        peak = (
            f" fp32 FMA peak: C probe ({a['threads']} threads) right before and after every "
            f"run, median {fmt_num(statistics.median(fma))} GFLOP/s over {len(fma)} probes "
            f"({fmt_range(fma)})."
            if fma
            else ""
        )
        out.append(
            f"Prefill roofline.{peak} FLOPs = 2 x matrix params x T + causal attention "
            f"4 x H x D x T(T+1)/2 per layer (every dtype computes in fp32"
            + (")." if not (report.bf16_dot or report.int8_dot) else "; except below).")
        )
        if report.bf16_dot:
            dot = report.bf16_dot
            how = (
                "AMX, and ckir's bf16p GEMMs (M > 32) multiply bf16-rounded x on its tiles "
                "with tdpbf16ps"
                if report.bf16_insn == "tdpbf16ps"
                else "AVX512-BF16, and ckir's bf16 GEMMs (M > 32) multiply bf16-rounded x "
                "with vdpbf16ps"
            )
            insn = report.bf16_insn or "vdpbf16ps"
            out[-1] += (
                f" bf16: this CPU has {how}, as PyTorch's oneDNN does, so the bf16 bound is the "
                f"{insn} peak: a C probe right before and after every bf16 run, median "
                f"{fmt_num(statistics.median(dot))} GFLOP/s over {len(dot)} probes "
                f"({fmt_range(dot)})."
            )
        if report.int8_dot:
            i8 = report.int8_dot
            insn = report.int8_insn or "vpdpbusd"
            out[-1] += (
                " q8_0 / q4_0 / q4_1: ckir's q8_0p / q4_0p / q4_1p GEMMs multiply x quantized "
                f"to int8 per block of 32 ({insn} on this CPU; as decode does, and as llama.cpp's "
                f"quantized matmuls do), so their bound is the {insn} peak (a product and its sum "
                "counted as 2 ops): a C probe right before and after every such run, median "
                f"{fmt_num(statistics.median(i8))} G ops/s over {len(i8)} probes "
                f"({fmt_range(i8)})."
            )
        ckir_isa = [v for k, v in report.env.items() if k.startswith("ckir")]
        if any("emulated AMX tiles" in v for v in ckir_isa):
            out[-1] += (
                " ckir's prefill GEMMs ran on emulated AMX tiles (CKIR_AMX=emulate; its ISA "
                "line): its bf16 / q8_0 / q4_0 / q4_1 rows are no speed of this machine."
            )
        out.append("")
        rows = []
        T = a["prompt_tokens"]
        for dt, cost in report.costs.items():
            s = ck.get(dt)
            per_token = _per_token(report, dt, "prefill")
            if s is None or per_token is None or not s.seconds.get("prefill"):
                continue
            fr = _fractions(report, s, "prefill")
            r = rates(T, s.seconds["prefill"])
            rows.append(
                [
                    dt,
                    f"{cost.prefill_flops(T) / 1e9:.2f}",
                    f"{cost.prefill_params / 1e6:.1f}",
                    fmt_num(statistics.median(s.probes["prefill"])),
                    fmt_num(statistics.median(_bounds(report, s, "prefill"))),
                    fmt_num(statistics.median(r)),
                    fmt_num(statistics.median(r) * per_token / 1e9),
                    f"{statistics.median(fr):.2f} ({fmt_range(fr)})",
                ]
            )
        head = [
            "dtype",
            f"GFLOP / {T}-token prefill",
            "matrix params (M)",
            "probe GFLOP/s",
            "bound tok/s",
            "ckir tok/s",
            "ckir GFLOP/s",
            "ckir fraction (min–max)",
        ]
        out += [markdown_table(head, rows), ""]
    return out


def _render_compile(report: Report) -> list[str]:
    rows = []
    for dt, t in report.compile.items():
        st = t.steps
        rows.append(
            [
                dt,
                f"{st.get('import', 0):.2f}",
                f"{st.get('lower + plan', 0):.2f}",
                f"{st.get('emit C', 0):.2f}",
                f"{t.to_c:.2f}",
                f"{st.get('weights.bin', 0):.2f}",
                f"{st.get('cc', 0):.2f}",
                "—" if t.cold_cc is None else f"{t.cold_cc:.2f}",
            ]
        )
    out = [
        "Compile time (s): checkpoint -> C = import + lower/plan + emit C; cc = model.c + link "
        "with cached runtime objects; cold cc = runtime objects compiled too.",
        "",
        markdown_table(
            [
                "dtype",
                "import",
                "lower + plan",
                "emit C",
                "checkpoint -> C",
                "weights.bin",
                "cc",
                "cold cc",
            ],
            rows,
        ),
        "",
    ]
    return out


def _render_rss(report: Report) -> list[str]:
    if not report.rss:
        return []
    a = report.args
    rows = []
    for dt, r in report.rss.items():
        cost = report.costs[dt]
        if "hwm_kb" not in r:
            rows.append([dt, "driver failed", "", "", "", "", ""])
            continue
        hwm = r["hwm_kb"] * 1024
        expected = cost.weights_arena + cost.state_arena
        c_rate = a["decode_tokens"] / r["decode_s"] if r.get("decode_s") else 0.0
        rows.append(
            [
                dt,
                f"{hwm / 1e6:.1f}",
                f"{r['rss_loaded_kb'] * 1024 / 1e6:.1f}",
                f"{cost.weights_arena / 1e6:.1f}",
                f"{cost.kv_cache / 1e6:.2f}",
                f"{(cost.state_arena - cost.kv_cache) / 1e6:.2f}",
                f"{hwm / expected:.3f}",
                fmt_num(c_rate),
            ]
        )
    return [
        f"Peak RSS of a decode run (C driver: prefill {a['context']} + decode "
        f"{a['decode_tokens']}, no Python; VmHWM): against the weights arena + the state arena "
        "(KV cache + activations + io) of layout.json.",
        "",
        markdown_table(
            [
                "dtype",
                "peak RSS MB",
                "before open MB",
                "weights MB",
                "KV MB",
                "other state MB",
                "peak / (weights + state)",
                "driver decode tok/s",
            ],
            rows,
        ),
        "",
    ]


def slot_info(build: Path) -> dict[str, tuple[int, int]]:
    """Weight buffer name -> (bytes, matrix params or 0), from the build's lowered IR."""
    model = cost.lowered_model(build_module(build))
    out = {}
    for op in model.body_block.ops:
        if isinstance(op, lw.BufferOp) and op.role == "weight":
            btype = op.buffer_type
            params = btype.num_elements if len(btype.shape_ints) == 2 else 0
            out[op.buffer_name] = (btype.byte_size, params)
    return out


def profile_rows(
    calls: list[dict[str, Any]],
    times: Sequence[float],
    counts: Sequence[float],
    mode: str | Sequence[str],
    per: float,
    slots: dict[str, tuple[int, int]] | None = None,
) -> list[tuple[str, float, float, float, float]]:
    """Per kernel, slowest first: (kernel, calls, seconds, weight bytes, matrix params),
    each per unit; ``per`` is the number of units (decode steps or prefills) counted.
    ``mode``: the program counted, or several (a training step: backward and optimize)."""
    modes = (mode,) if isinstance(mode, str) else tuple(mode)
    agg: dict[str, list[float]] = {}
    for c in calls:
        if c["mode"] not in modes:
            continue
        i = c["index"]
        e = agg.setdefault(c["kernel"], [0.0, 0.0, 0.0, 0.0])
        e[0] += counts[i] / per
        e[1] += times[i] / per
        if slots is not None and c["kind"] in cost.MATRIX_KINDS:
            for w in c["weights"]:
                nbytes, params = slots.get(w, (0, 0))
                e[2] += nbytes * counts[i] / per
                e[3] += params * counts[i] / per
    rows = [(k, v[0], v[1], v[2], v[3]) for k, v in agg.items()]
    return sorted(rows, key=lambda r: -r[2])


def render_profile(report: Report, dtype: str, prof: dict[str, Any]) -> list[str]:
    a = report.args
    out: list[str] = []
    build = report.builds.get(dtype)
    slots = slot_info(build) if build is not None else None
    for mode in reversed(INFERENCE_MODES):  # decode first
        if mode not in prof:
            continue
        p = prof[mode]
        runs = len(p["wall"])
        if mode == "decode":
            per = runs * a["decode_tokens"]
            unit = "decode step"
        else:
            per = runs
            unit = f"{a['prompt_tokens']}-token prefill"
        wall_per = sum(p["wall"]) / per
        rows = profile_rows(prof["calls"], p["times"], p["counts"], mode, per, slots)
        total = sum(r[2] for r in rows)
        table = []
        for k, n, sec, nbytes, params in rows:
            rate = "—"
            if mode == "decode" and nbytes and sec > 0:
                rate = f"{nbytes / sec / 1e9:.1f} GB/s"
            elif mode == "prefill" and params and sec > 0:
                rate = f"{2 * params * a['prompt_tokens'] / sec / 1e9:.0f} GFLOP/s"
            table.append([k, f"{n:g}", f"{sec * 1e3:.3f}", f"{sec / wall_per:.1%}", rate])
        table.append(
            [
                "(outside kernels: Python, ctypes, logits copy)",
                "",
                f"{(wall_per - total) * 1e3:.3f}",
                f"{(wall_per - total) / wall_per:.1%}",
                "",
            ]
        )
        bw = p.get("bandwidth") or [0.0]
        out.append(
            f"Per-kernel time, ckir {dtype}, per {unit} (mean of {per:g}; "
            f"wall {wall_per * 1e3:.2f} ms; read-bandwidth probe around the runs "
            f"{fmt_num(statistics.median(bw))} GB/s, {fmt_range(bw)}):"
        )
        out.append("")
        head = ["kernel", "calls", "ms", "share of wall", "rate (weights read / matrix FLOPs)"]
        out.append(markdown_table(head, table))
        out.append("")
    return out


def report_json(report: Report) -> dict[str, Any]:
    return {
        "model": report.model,
        "args": {k: v for k, v in report.args.items() if not k.startswith("_")},
        "costs": {k: v.__dict__ for k, v in report.costs.items()},
        "compile": {k: {"steps": v.steps, "cold_cc": v.cold_cc} for k, v in report.compile.items()},
        "systems": [
            {
                "name": s.name,
                "dtype": s.dtype,
                "seconds": s.seconds,
                "probes": s.probes,
                "rounds": {m: s.run_rounds(m) for m in s.seconds},
                "dead": s.dead,
                "first_failure": s.first_failure,
                "fallback": s.fallback.instead if s.fallback and s.first_failure else None,
            }
            for s in report.systems
        ],
        "bandwidth_gbps": report.bandwidth,
        "bandwidth_4k_gbps": report.bandwidth_4k,
        "fma_gflops": report.fma,
        "bf16_dot_gflops": report.bf16_dot,
        "int8_dot_gops": report.int8_dot,
        "int8_dot_insn": report.int8_insn,
        "bf16_dot_insn": report.bf16_insn,
        "rss": report.rss,
        "profiles": report.profiles,
        "notes": report.notes,
        "env": report.env,
        "extra": report.extra,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="ckir bench", description=__doc__.split("\n")[0] if __doc__ else None
    )
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return run(args)
    except CkirError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        # run the imported module's copy: the runners of ckir.tools.bench_train derive from
        # its classes, not from this __main__ module's
        from ckir.tools import bench as _imported

        sys.exit(_imported.worker_main(sys.argv[2]))
    sys.exit(main())
