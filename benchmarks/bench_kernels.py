"""Quick timings of the runtime's hot kernels (not a test; run by hand).

    .venv/bin/python benchmarks/bench_kernels.py [--isa native] [--threads 1 2]

Prints GFLOP/s for gemm/matmul, GB/s of weights streamed for gemv, and the
time of attention calls.  The machine is shared: compare ratios within a run.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--isa", default="native")
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as d:
        lib = build_runtime(args.isa, Path(d))
        print(f"library ISA path: {lib.isa}")
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
