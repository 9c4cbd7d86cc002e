"""Generated-C SGEMM (kernel IR -> C, no BLAS) against NumPy's OpenBLAS, one thread.

    python benchmarks/bench_kernel_sgemm.py [--trials 20] [--reps 9] [--isa native]
                                            [--shapes 256x256x256,97x301x53 ...]

For each shape (M x K x N: square, tall, skinny, wide, odd and prime sizes) it
starts from ``ckir.backend.kernel_c.default_schedule`` (a heuristic from the shape
and the ISA's vector width) and searches at most ``--trials`` schedules (≤ 50):
first the register blocks (``mr`` x ``unroll``) at the heuristic's tiles, then the
tiles (``tile_m``, ``tile_k``, ``tile_n``) around the best block.  Each candidate
is one ``kernel.func``; the register blocks of every shape are built into one
library up front, the tile variants of a block the first time a shape needs
them (shared by the later shapes).  Each is checked against NumPy before it is
timed.

The best schedule and ``numpy.matmul(out=)`` are then timed in pairs, interleaved
(the host is shared and noisy): ``--reps`` rounds, each one batch of each (order
flipped every round), the median batch of each side reported.  Prints per shape
GFLOP/s of both, the ratio ckir / OpenBLAS and the chosen schedule, then the
median ratio and the median fraction of the one-thread FMA peak (measured in the
same run by the FMA probe of ``ckir bench``, timed by the same clock: by default
the thread's CPU time, since on a host shared by many jobs the wall clock mostly
measures the wait for a core; ``--clock wall`` times by the wall clock).

The benchmark re-executes itself without ``OPENBLAS_CORETYPE`` and
``OPENBLAS_L2_SIZE`` (they may be set on these machines and change OpenBLAS's
kernel choice) and with ``OPENBLAS_NUM_THREADS=1``; it prints the OpenBLAS build
and the core type it ran as (threadpoolctl).
"""

from __future__ import annotations

import argparse
import ctypes
import itertools
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

_STRIP = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
_MARK = "CKIR_SGEMM_BENCH_CHILD"

#: (M, K, N): square, odd / prime, tall (M >> N), skinny (small M), wide, model-like
SHAPES: list[tuple[int, int, int]] = [
    (64, 64, 64), (128, 128, 128), (256, 256, 256), (384, 384, 384), (512, 512, 512),
    (768, 768, 768), (1024, 1024, 1024),
    (97, 97, 97), (127, 127, 127), (251, 251, 251), (331, 331, 331), (509, 509, 509),
    (513, 513, 513), (97, 301, 53), (123, 457, 89), (200, 300, 400), (33, 65, 129),
    (17, 1031, 251),
    (2048, 256, 64), (4096, 128, 32), (1024, 512, 48), (3001, 97, 61), (2000, 64, 16),
    (1, 1024, 1024), (8, 1024, 1024), (16, 512, 2048), (4, 2048, 512), (32, 4096, 128),
    (64, 256, 4096), (1000, 17, 1000),
    (128, 576, 1536), (128, 1536, 576), (64, 896, 896),
]  # fmt: skip

#: the register blocks the search tries (mr, unroll), per vector width
BLOCKS: dict[int, list[tuple[int, int]]] = {
    16: [(12, 2), (6, 4), (14, 2), (8, 3), (6, 2), (4, 4), (14, 1), (8, 1)],
    8: [(6, 2), (4, 3), (8, 1), (3, 4), (4, 2), (12, 1)],
}
TILE_M_FACTORS = (4, 8, 16)  # tile_m = mr * factor
TILE_KS = (128, 256, 512)
TILE_NS = (256, 512, 1024)


def _reexec() -> None:
    """Run again with the OpenBLAS variables removed and one BLAS thread."""
    if os.environ.get(_MARK):
        return
    env = {k: v for k, v in os.environ.items() if k not in _STRIP}
    env.update({_MARK: "1", "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"})
    os.execve(sys.executable, [sys.executable, *sys.argv], env)


def _key(s: dict[str, int | str]) -> tuple[int | str, ...]:
    return tuple(s[f] for f in ("mr", "unroll", "tile_m", "tile_n", "tile_k", "order"))


def block_candidates(shape: tuple[int, int, int], width: int) -> list[dict[str, int | str]]:
    """The heuristic's schedule, then the other register blocks at its tiles."""
    from ckir.backend.kernel_c import default_schedule

    m, kk, n = shape
    start = default_schedule(m, n, kk, width)
    out = [start]
    for mr, unroll in BLOCKS[16 if width >= 16 else 8]:
        s = {**start, "mr": mr, "unroll": unroll, "tile_m": mr * 8}
        if _key(s) != _key(start):
            out.append(s)
    return out


def tile_candidates(best: dict[str, int | str]) -> list[dict[str, int | str]]:
    """Tile variants of a schedule's register block (``tile_m`` a multiple of ``mr``)."""
    mr = int(best["mr"])
    return [
        {**best, "tile_m": mr * f, "tile_k": tk, "tile_n": tn}
        for f, tk, tn in itertools.product(TILE_M_FACTORS, TILE_KS, TILE_NS)
        if (mr * f, tk, tn) != (best["tile_m"], best["tile_k"], best["tile_n"])
    ]


def _ir(name: str, schedule: dict[str, int | str]) -> str:
    mk, kn, mn = (f"!graph.tensor<[{d}], f32>" for d in ("M, K", "K, N", "M, N"))
    body = ", ".join(f"{k} = {v}" for k, v in schedule.items())
    return (
        f'kernel.func @{name} {{\n  %a = kernel.input "A" : {mk}\n'
        f'  %b = kernel.input "B" : {kn}\n'
        f"  %c = kernel.matmul %a, %b {{schedule = #kernel.schedule<{body}>}} : ({mk}, {kn})"
        f" -> {mn}\n  kernel.output %c : {mn}\n}}\n"
    )


#: the clock a batch is timed with: the thread's CPU time (``--clock cpu``, the
#: default: on a host shared by many jobs the wall clock mostly measures the wait
#: for a core) or the wall clock
CLOCKS: dict[str, Callable[[], float]] = {"cpu": time.thread_time, "wall": time.perf_counter}
_clock = CLOCKS["cpu"]


def _batch(fn: Callable[[], object], calls: int) -> float:
    t0 = _clock()
    for _ in range(calls):
        fn()
    return (_clock() - t0) / calls


def _calls_for(fn: Callable[[], object], seconds: float) -> int:
    fn()
    calls = 1
    while _batch(fn, calls) * calls < seconds and calls < 1 << 16:
        calls *= 2
    return calls


def fma_peak(clock: str, iters: int = 2_000_000) -> float:
    """One thread's fp32 FMA GFLOP/s (the FMA probe of ``ckir bench``), timed by ``clock``:
    the median of 3 runs."""
    from ckir.tools.bandwidth import probe_library

    lib = probe_library()
    flops = lib.ckb_fma_flops(1, iters)
    runs = []
    for _ in range(3):
        t0 = CLOCKS[clock]()
        lib.ckb_fma(1, iters)
        runs.append(flops / (CLOCKS[clock]() - t0) / 1e9)
    return statistics.median(runs)


class _Shape:
    """One shape's inputs, the schedules tried on it (checked, then timed) and the
    paired timing of the best one against ``numpy.matmul``."""

    def __init__(self, a: Any, b: Any, fns: dict[Any, Any], trials: int, seconds: float) -> None:
        import numpy as np

        self.a, self.b = a, b
        self.c = np.empty((a.shape[0], b.shape[1]), np.float32)
        self.want = a.astype(np.float64) @ b.astype(np.float64)
        self.scale = max(float(np.abs(self.want).max()), 1e-30)
        self.fns, self.trials, self.seconds = fns, trials, seconds
        self.tried: dict[tuple[int | str, ...], float] = {}
        self.tried_schedules: list[dict[str, int | str]] = []
        self.calls = 0

    def call(self, key: tuple[int | str, ...]) -> Callable[[], object]:
        f = self.fns[key]
        ptrs = (self.a.ctypes.data, self.b.ctypes.data, self.c.ctypes.data,
                self.a.shape[1], self.a.shape[0], self.b.shape[1])  # fmt: skip
        return lambda: f(*ptrs)

    def blas(self) -> object:
        import numpy as np

        return np.matmul(self.a, self.b, out=self.c)

    def trial(self, cands: Sequence[dict[str, int | str]]) -> None:
        """Check and time each schedule not tried yet, up to the trial budget."""
        import numpy as np

        for cand in cands:
            key = _key(cand)
            if key in self.tried or len(self.tried) >= self.trials:
                continue
            fn = self.call(key)
            self.c.fill(np.nan)
            fn()
            err = float(np.abs(self.c - self.want).max()) / self.scale
            if not err <= 1e-4:
                raise SystemExit(f"{self.a.shape} @ {self.b.shape}: schedule {cand} is WRONG "
                                 f"(rel err {err:.2e})")  # fmt: skip
            if not self.calls:
                self.calls = _calls_for(fn, self.seconds)
            self.tried[key] = min(_batch(fn, self.calls) for _ in range(2))
            self.tried_schedules.append(cand)

    def paired(self, key: tuple[int | str, ...], reps: int, seconds: float) -> tuple[float, float]:
        """Median seconds per call of (ckir, OpenBLAS) over ``reps`` interleaved rounds."""
        ck = self.call(key)
        calls = max(_calls_for(ck, seconds), _calls_for(self.blas, seconds))
        t_ck: list[float] = []
        t_np: list[float] = []
        for r in range(reps):
            pair = [(ck, t_ck), (self.blas, t_np)]
            for fn, out in pair if r % 2 == 0 else pair[::-1]:
                out.append(_batch(fn, calls))
        return statistics.median(t_ck), statistics.median(t_np)


def main(argv: Sequence[str] | None = None) -> int:
    _reexec()
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=20, help="schedules tried per shape (<= 50)")
    ap.add_argument("--reps", type=int, default=9, help="interleaved paired rounds per shape")
    ap.add_argument("--isa", default="native", choices=("native", "avx2", "scalar"))
    ap.add_argument("--shapes", default="", help="MxKxN,... instead of the built-in set")
    ap.add_argument("--batch-ms", type=float, default=30.0, help="length of one timed batch")
    ap.add_argument(
        "--clock",
        default="cpu",
        choices=tuple(CLOCKS),
        help="time batches by the thread's CPU time (default) or the wall clock",
    )
    args = ap.parse_args(argv)
    global _clock
    _clock = CLOCKS[args.clock]
    if not 1 <= args.trials <= 50:
        ap.error("--trials must be 1..50")

    import numpy as np

    try:
        from threadpoolctl import threadpool_info, threadpool_limits
    except ImportError:
        raise SystemExit(
            "error: bench_kernel_sgemm.py needs threadpoolctl to pin and report OpenBLAS "
            "(pip install threadpoolctl)"
        ) from None

    from ckir import kernel_tools as kt
    from ckir.ir_io import parse_module
    from ckir.runtime_build import isa_vector_width

    shapes = SHAPES
    if args.shapes:
        shapes = [tuple(int(x) for x in s.split("x")) for s in args.shapes.split(",")]  # type: ignore[misc]
    width = isa_vector_width(args.isa)
    threadpool_limits(1)
    for info in threadpool_info():
        if info.get("user_api") == "blas":
            print(
                f"BLAS: {info.get('internal_api')} {info.get('version')}, core "
                f"{info.get('architecture')}, {info.get('num_threads')} thread(s) "
                f"({Path(info.get('filepath', '')).name})"
            )
    print("env: " + ", ".join(f"{v}={os.environ.get(v, 'unset')}" for v in _STRIP))
    cpu = next(
        (ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
         if ln.startswith("model name")), "unknown CPU",
    )  # fmt: skip
    print(f"CPU: {cpu}; ckir build: --isa {args.isa} ({width} f32 lanes); clock: {args.clock}")
    print(f"load average: {' '.join(Path('/proc/loadavg').read_text().split()[:3])}")
    peak = fma_peak(args.clock)
    print(f"fp32 FMA peak, 1 thread, measured now ({args.clock} clock): {peak:.1f} GFLOP/s")

    tmp = tempfile.TemporaryDirectory()
    libs: dict[tuple[int | str, ...], Any] = {}

    def build(cands: Sequence[dict[str, int | str]], tag: str) -> None:
        """Compile the schedules not built yet into one library (one func each)."""
        new = {}
        for c in cands:
            if _key(c) not in libs:
                new.setdefault(_key(c), c)
        if not new:
            return
        names = {key: f"mm_{tag}{i}" for i, key in enumerate(new)}
        t0 = time.perf_counter()
        module = parse_module("".join(_ir(names[key], c) for key, c in new.items()))
        lib = ctypes.CDLL(str(kt.build(module, Path(tmp.name), name=tag, isa=args.isa)))
        print(f"built {len(new)} schedules in {time.perf_counter() - t0:.1f} s", flush=True)
        for key, name in names.items():
            fn = getattr(lib, name)
            fn.restype = ctypes.c_int
            fn.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_int64] * 3
            libs[key] = fn

    first = {sh: block_candidates(sh, width)[: args.trials] for sh in shapes}
    build([c for cands in first.values() for c in cands], "blocks")

    rng = np.random.default_rng(0)
    print(f"{'M x K x N':>18s} {'OpenBLAS':>9s} {'ckir':>9s} {'ratio':>6s} {'peak':>5s}  schedule")
    ratios: list[float] = []
    fractions: list[float] = []
    for shape in shapes:
        m, kk, n = shape
        a = rng.standard_normal((m, kk)).astype(np.float32)
        b = rng.standard_normal((kk, n)).astype(np.float32)
        bench = _Shape(a, b, libs, args.trials, args.batch_ms / 3e3)
        bench.trial(first[shape])
        best = min(first[shape], key=lambda cand: bench.tried[_key(cand)])
        more = tile_candidates(best)[: args.trials - len(bench.tried)]
        build(more, f"tiles{len(libs)}_")
        bench.trial(more)
        best = min(bench.tried_schedules, key=lambda cand: bench.tried[_key(cand)])
        t_ck, t_np = bench.paired(_key(best), args.reps, args.batch_ms / 1e3)
        flops = 2.0 * m * n * kk
        g_ck, g_np = flops / t_ck / 1e9, flops / t_np / 1e9
        ratios.append(g_ck / g_np)
        fractions.append(g_ck / peak)
        sched = ",".join(f"{k}={v}" for k, v in best.items())
        shape_text = f"{m}x{kk}x{n}"
        print(
            f"{shape_text:>18s} {g_np:9.2f} {g_ck:9.2f} {g_ck / g_np:6.3f} {g_ck / peak:5.3f}  "
            f"{sched}",
            flush=True,
        )
    tmp.cleanup()
    print(
        f"median ratio ckir / OpenBLAS over {len(shapes)} shapes: {statistics.median(ratios):.3f} "
        f"(min {min(ratios):.3f}, max {max(ratios):.3f}); median fraction of the FMA peak: "
        f"{statistics.median(fractions):.3f}; trials per shape <= {args.trials}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
