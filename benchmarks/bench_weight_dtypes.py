"""Decode GEMV bandwidth per weight dtype, against a measured read bandwidth (run by hand).

    .venv/bin/python benchmarks/bench_weight_dtypes.py [--n 4096] [--k 4096] [--threads 2]

For each dtype (f32 when the runtime has gemv_f32, bf16, q8_0, q4_0, q4_1) the
weights of an N x K layer are copied into enough distinct buffers to fill
--set-mib of memory (far beyond the L3), and gemv cycles through them, so every
call streams its weights from DRAM, as decode does.  Printed: GB/s of weight
bytes streamed (median over calls) and the ratio to the read bandwidth measured
in the same run by ckir_quant_read_probe (wide loads, same threads, 512 MiB),
and, for reference, a NumPy sum over the same buffer.  Rounds interleave the
dtypes so load from other jobs on the shared machine hits all of them alike.
With --gemm it also prints GFLOP/s of gemm_<dtype> (prefill, M = 128).
"""

from __future__ import annotations

import argparse
import ctypes
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from ckir import quant  # noqa: E402
from ckir.runtime_build import build_library  # noqa: E402

DTYPES = ("f32", "bf16", "q8_0", "q4_0", "q4_1")
NP_STORE = {"f32": np.float32, "bf16": np.uint16}


class Lib:
    def __init__(self, path: Path):
        self.dll = ctypes.CDLL(str(path))
        self.dll.ckir_set_num_threads.argtypes = [ctypes.c_int]

    def has(self, name: str) -> bool:
        return hasattr(self.dll, name)

    def fn(self, name: str, nbuf: int, nint: int):
        f = getattr(self.dll, name)
        f.restype = None
        f.argtypes = [ctypes.c_void_p] * nbuf + [ctypes.c_int64] * nint
        return f


def store(w: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "f32":
        return np.ascontiguousarray(w, dtype=np.float32)
    return quant.quantize(w, dtype)


def read_probe(lib: Lib, buf: np.ndarray, reps: int) -> float:
    fn = lib.fn("ckir_quant_read_probe", 2, 1)
    out = np.zeros(1, np.float32)
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn(buf.ctypes.data, out.ctypes.data, buf.size)
        times.append(time.perf_counter() - t0)
    return buf.nbytes / statistics.median(times) / 1e9


def numpy_probe(buf: np.ndarray, reps: int) -> float:
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        buf.sum()
        times.append(time.perf_counter() - t0)
    return buf.nbytes / statistics.median(times) / 1e9


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--k", type=int, default=4096)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--set-mib", type=int, default=320, help="weight bytes cycled per dtype")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--calls", type=int, default=12, help="gemv calls per dtype per round")
    ap.add_argument("--isa", default="native")
    ap.add_argument("--gemm", action="store_true", help="also time gemm_<dtype>, M = 128")
    args = ap.parse_args()
    N, K = args.n, args.k
    rng = np.random.default_rng(0)

    with tempfile.TemporaryDirectory() as d:
        lib = Lib(build_library(Path(d) / "libckir_bench.so", isa=args.isa))
    lib.dll.ckir_set_num_threads(args.threads)
    dtypes = [dt for dt in DTYPES if lib.has(f"ckir_gemv_{dt}")]

    w = rng.standard_normal((N, K), dtype=np.float32)
    x = rng.standard_normal(K, dtype=np.float32)
    y = np.empty(N, np.float32)
    sets: dict[str, list[np.ndarray]] = {}
    for dt in dtypes:
        one = store(w, dt)
        copies = max(2, (args.set_mib << 20) // one.nbytes)
        sets[dt] = [one.copy() for _ in range(copies)]
    fns = {dt: lib.fn(f"ckir_gemv_{dt}", 3, 2) for dt in dtypes}

    probe_buf = np.ones(512 << 18, np.float32)  # 512 MiB
    probe, nprobe = [], []
    gbps: dict[str, list[float]] = {dt: [] for dt in dtypes}
    for _ in range(args.rounds):
        probe.append(read_probe(lib, probe_buf, 3))
        nprobe.append(numpy_probe(probe_buf, 1))
        for dt in dtypes:
            bufs = sets[dt]
            fn = fns[dt]
            for i in range(len(bufs)):  # warm: touch every copy once
                fn(x.ctypes.data, bufs[i].ctypes.data, y.ctypes.data, N, K)
            times = []
            for i in range(args.calls):
                b = bufs[i % len(bufs)]
                t0 = time.perf_counter()
                fn(x.ctypes.data, b.ctypes.data, y.ctypes.data, N, K)
                times.append(time.perf_counter() - t0)
            gbps[dt].append(bufs[0].nbytes / statistics.median(times) / 1e9)

    bw = statistics.median(probe)
    print(f"N={N} K={K} threads={args.threads} isa={args.isa}")
    npb = statistics.median(nprobe)
    print(f"read probe (C, 512 MiB): {bw:.1f} GB/s   numpy sum: {npb:.1f} GB/s")
    print("| dtype | bytes/weight | weight MB | GB/s streamed | ratio to probe | us/call |")
    print("|---|---|---|---|---|---|")
    for dt in dtypes:
        nbytes = sets[dt][0].nbytes
        g = statistics.median(gbps[dt])
        print(
            f"| {dt} | {nbytes / (N * K):.4f} | {nbytes / 1e6:.1f} | {g:.1f} | {g / bw:.2f} "
            f"| {nbytes / g / 1e3:.0f} |"
        )

    if args.gemm:
        M = 128
        xm = rng.standard_normal((M, K), dtype=np.float32)
        ym = np.empty((M, N), np.float32)
        print(f"\ngemm M={M} N={N} K={K}")
        for dt in dtypes:
            if not lib.has(f"ckir_gemm_{dt}"):
                continue
            fn = lib.fn(f"ckir_gemm_{dt}", 3, 3)
            wb = sets[dt][0]
            fn(xm.ctypes.data, wb.ctypes.data, ym.ctypes.data, M, N, K)
            times = []
            for _ in range(5):
                t0 = time.perf_counter()
                fn(xm.ctypes.data, wb.ctypes.data, ym.ctypes.data, M, N, K)
                times.append(time.perf_counter() - t0)
            print(f"gemm_{dt}: {2 * M * N * K / min(times) / 1e9:.1f} GFLOP/s")


if __name__ == "__main__":
    main()
