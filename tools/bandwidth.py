"""Machine probes for ``ckir bench``: memory read bandwidth, fp32 FMA peak, peak-RSS driver.

The C sources live in ``runtime/bench/`` and are compiled with the system C
compiler (``$CC`` or ``cc``, ``-O2 -march=native -fopenmp``) into
``$CKIR_CACHE_DIR/bench/<hash>/`` (default ``~/.cache/ckir/bench/``), keyed by
the sources, the flags and the compiler version; the model libraries never
link them.

* :class:`ReadProbe` reads a large buffer (default 256 MiB, far beyond the
  L3) with ``threads`` OpenMP threads and wide vector loads: GB/s per pass.
  It is the "how fast can this machine stream weights" mark that decode is
  measured against.
* :func:`fma_peak` runs independent vector FMA chains in registers on every
  thread: GFLOP/s, the mark prefill is measured against.
* :func:`rss_driver` is a small C program that opens a build through the
  generated-model ABI, prefills and decodes, and prints its peak RSS (no
  Python in the process).

``python -m ckir.tools.bandwidth [--threads 1 2] [--mib 256]`` prints both probes.
"""

from __future__ import annotations

import argparse
import ctypes
import functools
import hashlib
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ckir.resources import runtime_dir

CFLAGS = ["-O2", "-march=native", "-fopenmp", "-Wall"]


class ProbeBuildError(RuntimeError):
    """The C compiler failed on a probe source."""


def bench_source_dir() -> Path:
    """The probes' C sources (``runtime/bench``, package data: see ckir.resources)."""
    return runtime_dir() / "bench"


def _cache_root() -> Path:
    env = os.environ.get("CKIR_CACHE_DIR")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "ckir"


def _cc() -> str:
    return os.environ.get("CC", "cc")


@functools.cache
def _build_dir() -> Path:
    h = hashlib.sha256()
    try:
        ver = subprocess.run([_cc(), "--version"], capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError) as exc:
        raise ProbeBuildError(f"cannot run the C compiler {_cc()!r}: {exc}") from None
    h.update(ver.stdout.encode() + "\0".join(CFLAGS).encode())
    for src in sorted(bench_source_dir().glob("*.c")):
        h.update(src.name.encode() + b"\0" + src.read_bytes())
    d = _cache_root() / "bench" / h.hexdigest()[:20]
    d.mkdir(parents=True, exist_ok=True)
    return d


def _compile(out_name: str, args: list[str]) -> Path:
    out = _build_dir() / out_name
    if out.exists():
        return out
    fd, tmp = tempfile.mkstemp(prefix=out_name + ".", suffix=".tmp", dir=out.parent)
    os.close(fd)
    try:
        proc = subprocess.run([_cc(), *args, "-o", tmp], capture_output=True, text=True)
        if proc.returncode != 0:
            first = next((ln for ln in proc.stderr.splitlines() if "error" in ln), proc.stderr)
            raise ProbeBuildError(f"cc failed on {out_name}: {first.strip()}")
        os.replace(tmp, out)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return out


_I, _I64, _D = ctypes.c_int, ctypes.c_int64, ctypes.c_double
#: the probes' C functions (probes.c): name -> (return type, argument types)
_PROBE_SIGNATURES: dict[str, tuple[Any, list[Any]]] = {
    "ckb_buffer_new": (ctypes.c_void_p, [_I64, _I]),
    "ckb_buffer_free": (None, [ctypes.c_void_p]),
    "ckb_read": (_D, [ctypes.c_void_p, _I64, _I, _I]),
    "ckb_fma": (_D, [_I, _I64]),
    "ckb_fma_flops": (_D, [_I, _I64]),
    "ckb_bf16dot": (_D, [_I, _I64]),
    "ckb_bf16dot_flops": (_D, [_I, _I64]),
    "ckb_int8dot": (_D, [_I, _I64]),
    "ckb_int8dot_ops": (_D, [_I, _I64]),
    "ckb_int8dot_insn": (ctypes.c_char_p, []),
    "ckb_amx": (_D, [_I, _I64, _I]),
    "ckb_amx_ops": (_D, [_I, _I64, _I]),
}


@functools.cache
def probe_library() -> ctypes.CDLL:
    """The probes' shared library (built on first use)."""
    src = bench_source_dir() / "probes.c"
    path = _compile("libckir_probes.so", [*CFLAGS, "-shared", "-fPIC", str(src)])
    lib = ctypes.CDLL(str(path))
    for name, (restype, argtypes) in _PROBE_SIGNATURES.items():
        fn = getattr(lib, name)
        fn.restype = restype
        fn.argtypes = argtypes
    return lib


def rss_driver() -> Path:
    """Path of the peak-RSS driver executable (built on first use)."""
    src = bench_source_dir() / "rss_run.c"
    return _compile("rss_run", ["-O2", "-Wall", str(src), "-ldl"])


class ReadProbe:
    """A buffer of ``mib`` MiB, allocated and written once; ``measure`` reads it.

    ``huge``: ask for transparent huge pages (``madvise(MADV_HUGEPAGE)``; fewer
    TLB misses, the machine's best case) or forbid them (4 KiB pages, as a
    file mapping such as ckir's ``weights.bin`` gets)."""

    def __init__(self, mib: int = 256, streams: int = 2, huge: bool = True) -> None:
        self.lib = probe_library()
        self.nbytes = int(mib) << 20
        self.streams = streams
        self.huge = huge
        self._buf = self.lib.ckb_buffer_new(self.nbytes, int(huge))
        if not self._buf:
            raise MemoryError(f"read probe: cannot allocate {mib} MiB")

    def measure(self, threads: int, reps: int = 3) -> list[float]:
        """GB/s (1e9 bytes/s) of ``reps`` passes over the buffer."""
        out = []
        for _ in range(reps):
            dt = self.lib.ckb_read(self._buf, self.nbytes, threads, self.streams)
            out.append(self.nbytes / dt / 1e9)
        return out

    def close(self) -> None:
        if self._buf:
            self.lib.ckb_buffer_free(self._buf)
            self._buf = None

    def __enter__(self) -> ReadProbe:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def fma_peak(threads: int, reps: int = 3, iters: int = 1_000_000) -> list[float]:
    """GFLOP/s of ``reps`` runs of ``iters`` x 16 independent vector FMAs per thread."""
    lib = probe_library()
    flops = lib.ckb_fma_flops(threads, iters)
    return [flops / lib.ckb_fma(threads, iters) / 1e9 for _ in range(reps)]


def _dot_peak(run: str, count: str, threads: int, reps: int, iters: int) -> list[float]:
    lib = probe_library()
    ops = getattr(lib, count)(threads, iters)
    out = []
    for _ in range(reps):
        seconds = getattr(lib, run)(threads, iters)
        if seconds < 0:
            return []
        out.append(ops / seconds / 1e9)
    return out


def bf16_dot_peak(threads: int, reps: int = 3, iters: int = 1_000_000) -> list[float]:
    """GFLOP/s of ``reps`` runs of vdpbf16ps chains as ``fma_peak`` runs FMAs (64 flops
    per zmm instruction); empty where the CPU (or this build) lacks AVX512-BF16."""
    return _dot_peak("ckb_bf16dot", "ckb_bf16dot_flops", threads, reps, iters)


def int8_dot_peak(threads: int, reps: int = 3, iters: int = 1_000_000) -> list[float]:
    """G int8 ops/s (a product and its sum: 2 ops, as FLOPs count) of ``reps`` runs of
    vpdpbusd chains (128 ops per zmm instruction), or where the CPU lacks AVX512-VNNI of
    vpmaddubsw chains (2 ops per byte of the vector; AVX2 or AVX512BW):
    :func:`int8_dot_insn`.  Empty where this build has neither."""
    return _dot_peak("ckb_int8dot", "ckb_int8dot_ops", threads, reps, iters)


def amx_peak(threads: int, reps: int = 3, iters: int = 100_000, int8: bool = False) -> list[float]:
    """G ops/s (a product and its sum: 2 ops) of ``reps`` runs of 4 independent
    tdpbf16ps (``int8``: tdpbssd) chains on AMX tiles per thread: the tile peak the
    runtime's AMX GEMMs run against.  Empty where the CPU or the OS lacks AMX."""
    lib = probe_library()
    ops = lib.ckb_amx_ops(threads, iters, int(int8))
    out = []
    for _ in range(reps):
        seconds = lib.ckb_amx(threads, iters, int(int8))
        if seconds < 0:
            return []
        out.append(ops / seconds / 1e9)
    return out


def int8_dot_insn() -> str:
    """The instruction :func:`int8_dot_peak` times: "vpdpbusd", "vpmaddubsw" or ""."""
    return str(probe_library().ckb_int8dot_insn().decode())


def _fmt(values: Sequence[float]) -> str:
    return (
        f"median {statistics.median(values):.1f} "
        f"(min {min(values):.1f}, max {max(values):.1f}, n={len(values)})"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m ckir.tools.bandwidth", description=__doc__.split("\n")[0]
    )
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--mib", type=int, default=256, help="read-probe buffer size")
    ap.add_argument("--streams", type=int, default=2, choices=[1, 2], help="streams per thread")
    ap.add_argument("--reps", type=int, default=9)
    args = ap.parse_args(argv)
    for huge in (True, False):
        pages = "huge pages" if huge else "4 KiB pages"
        with ReadProbe(args.mib, args.streams, huge) as probe:
            for t in args.threads:
                probe.measure(t, 1)  # warm-up
                gbps = probe.measure(t, args.reps)
                print(f"read bandwidth, {args.mib} MiB, {pages}, {t} thread(s): {_fmt(gbps)} GB/s")
    for t in args.threads:
        print(f"fp32 FMA peak, {t} thread(s): {_fmt(fma_peak(t, args.reps))} GFLOP/s")
        dot = bf16_dot_peak(t, args.reps)
        if dot:
            print(f"bf16 vdpbf16ps peak, {t} thread(s): {_fmt(dot)} GFLOP/s")
        i8 = int8_dot_peak(t, args.reps)
        if i8:
            print(f"int8 {int8_dot_insn()} peak, {t} thread(s): {_fmt(i8)} G ops/s")
        for insn, int8 in (("tdpbf16ps", False), ("tdpbssd", True)):
            amx = amx_peak(t, args.reps, int8=int8)
            if amx:
                print(f"AMX {insn} peak, {t} thread(s): {_fmt(amx)} G ops/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
