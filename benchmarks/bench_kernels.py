"""Quick timings of the runtime's hot kernels (not a test; run by hand).

    .venv/bin/python benchmarks/bench_kernels.py [--isa native] [--threads 1 2]
    .venv/bin/python benchmarks/bench_kernels.py --cold

Prints GFLOP/s for gemm/matmul, GB/s of weights streamed for gemv, and the
time of attention calls.  The machine is shared: compare ratios within a run.

``--cold`` measures the prefill GEMM shapes with the weights cold, as in a
model's prefill (no model here fits in cache): each call takes the next of
several weight copies (>= 96 MB in all).  It also runs two independent
single-thread GEMMs at once (two Python threads; ctypes releases the GIL) to
show how far the machine itself scales from one thread to two.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from kernel_lib import build_runtime  # noqa: E402


def best_time(lib, name: str, args: list, reps: int) -> float:
    lib.call(name, *args)
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        lib.call(name, *args)
        best = min(best, time.perf_counter() - t0)
    return best


COLD_BYTES = 96e6
PREFILL_SHAPES = [(128, 576, 576), (128, 1536, 576), (128, 4864, 896), (128, 896, 4864)]


def gemm_copies(rng, M: int, N: int, K: int):
    """x, y and enough copies of w[N, K] that cycling through them misses every cache."""
    copies = max(2, int(COLD_BYTES // (N * K * 4)))
    ws = [rng.standard_normal((N, K), dtype=np.float32) for _ in range(copies)]
    return rng.standard_normal((M, K), dtype=np.float32), ws, np.empty((M, N), np.float32)


def cold_gflops(lib, x, ws, y, reps: int) -> float:
    M, K = x.shape
    N = y.shape[1]
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        for w in ws:
            lib.call("gemm_f32", x, w, y, M, N, K)
        best = min(best, (time.perf_counter() - t0) / len(ws))
    return 2 * M * N * K / best / 1e9


def cold_gemms(lib, rng, reps: int) -> None:
    for M, N, K in PREFILL_SHAPES:
        x, ws, y = gemm_copies(rng, M, N, K)
        per = []
        for nt in (1, 2):
            lib.set_num_threads(nt)
            per.append(cold_gflops(lib, x, ws, y, reps))
        print(f"gemm cold {M}x{N}x{K}: 1 thread {per[0]:6.1f}, 2 threads {per[1]:6.1f} GFLOP/s")
    # two independent single-thread GEMMs at once vs one alone
    M, N, K = 128, 2432, 896
    probs = [gemm_copies(rng, M, N, K) for _ in range(2)]
    lib.set_num_threads(1)
    alone = cold_gflops(lib, *probs[0], reps)
    rates: list[float] = [0.0, 0.0]

    def run(i: int) -> None:
        lib.set_num_threads(1)  # OpenMP settings are per thread
        rates[i] = cold_gflops(lib, *probs[i], reps)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(
        f"gemm cold {M}x{N}x{K}, 1 thread: alone {alone:6.1f}; two independent at once "
        f"{rates[0]:6.1f} + {rates[1]:6.1f} = {sum(rates):6.1f} GFLOP/s"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--isa", default="native")
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--cold", action="store_true", help="prefill GEMMs with cold weights")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as d:
        lib = build_runtime(args.isa, Path(d))
        print(f"library ISA path: {lib.isa}")
        if args.cold:
            cold_gemms(lib, rng, args.reps)
            return
        for nt in args.threads:
            lib.set_num_threads(nt)
            print(f"--- {nt} thread(s)")
            for M, N, K in [(512, 2048, 2048), (128, 576, 576), (128, 1536, 576), (128, 4864, 896)]:
                x = rng.standard_normal((M, K), dtype=np.float32)
                w = rng.standard_normal((N, K), dtype=np.float32)
                y = np.empty((M, N), np.float32)
                t = best_time(lib, "gemm_f32", [x, w, y, M, N, K], args.reps)
                print(f"gemm   {M}x{N}x{K}: {2 * M * N * K / t / 1e9:7.1f} GFLOP/s")
            M, N, K = 512, 2048, 2048
            a = rng.standard_normal((M, K), dtype=np.float32)
            b = rng.standard_normal((K, N), dtype=np.float32)
            c = np.empty((M, N), np.float32)
            t = best_time(lib, "matmul_f32", [a, b, c, M, N, K], args.reps)
            print(f"matmul {M}x{N}x{K}: {2 * M * N * K / t / 1e9:7.1f} GFLOP/s")
            for N, K in [(4864, 896), (49152, 576), (2048, 2048)]:
                x = rng.standard_normal(K, dtype=np.float32)
                w = rng.standard_normal((N, K), dtype=np.float32)
                y = np.empty(N, np.float32)
                t = best_time(lib, "gemv_f32", [x, w, y, N, K], args.reps * 4)
                print(f"gemv   {N}x{K}: {N * K * 4 / t / 1e9:7.1f} GB/s  ({t * 1e6:.0f} us)")
            for T, P, H, KV, D in [(1, 511, 9, 3, 64), (128, 0, 9, 3, 64), (1, 1023, 14, 2, 64)]:
                q = rng.standard_normal((T, H * D), dtype=np.float32)
                kc = rng.standard_normal((P + T, KV * D), dtype=np.float32)
                vc = rng.standard_normal((P + T, KV * D), dtype=np.float32)
                out = np.empty_like(q)
                attn = [q, kc, vc, out, T, P, H, KV, D]
                t = best_time(lib, "attention_f32", attn, args.reps * 4)
                print(f"attention T={T} P={P} H={H} KV={KV} D={D}: {t * 1e6:8.1f} us")


if __name__ == "__main__":
    main()
