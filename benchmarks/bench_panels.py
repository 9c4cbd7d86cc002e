"""Paired f32 vs f32p (weights pre-packed in GEMM panels) in one runtime library,
over model-like sequences of distinct weight matrices (SmolLM2-135M shapes: 30
layers of q, k, v, o, gate, up, down, then the LM head; more bytes than the
L3), so the weights stream from DRAM as in a real prefill or decode step.

    python benchmarks/bench_panels.py --mode prefill --threads 2 --rounds 15
    python benchmarks/bench_panels.py --mode decode --threads 2 --rounds 31

prefill: gemm_f32 / gemm_f32p with M = --tokens rows; decode: gemv_f32 /
gemv_f32p.  Each round runs one pass of each dtype (order flipped every round);
prints the median pass time of each as GFLOP/s (prefill) or GB/s of weights read
(decode), and the median and quartiles of the per-round f32p/f32 time ratios.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_kernels as bk  # noqa: E402

from ckir import quant  # noqa: E402

LAYER = [(576, 576), (192, 576), (192, 576), (576, 576), (1536, 576), (1536, 576), (576, 1536)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mode", choices=("prefill", "decode"), default="prefill")
    ap.add_argument("--tokens", type=int, default=128, help="prefill rows M")
    ap.add_argument("--layers", type=int, default=30)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--isa", default="native")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    shapes = LAYER * args.layers + [(49152, 576)]
    M = args.tokens if args.mode == "prefill" else 1
    mats = []
    for N, K in shapes:
        w = rng.standard_normal((N, K), dtype=np.float32)
        x = rng.standard_normal((M, K), dtype=np.float32)
        mats.append((N, K, w, quant.quantize(w, "f32p"), x, np.empty((M, N), np.float32)))
    flops = sum(2.0 * M * N * K for N, K, *_ in mats)
    nbytes = sum(w.nbytes for _, _, w, *_ in mats)
    with tempfile.TemporaryDirectory() as d:
        lib = bk.build_runtime(args.isa, Path(d))
        lib.set_num_threads(args.threads)
        calls = {}
        for dt in ("f32", "f32p"):
            if args.mode == "prefill":
                calls[dt] = [
                    bk.bound_call(lib, f"gemm_{dt}", [x, w if dt == "f32" else wp, y, M, N, K])
                    for N, K, w, wp, x, y in mats
                ]
            else:
                calls[dt] = [
                    bk.bound_call(lib, f"gemv_{dt}", [x[0], w if dt == "f32" else wp, y[0], N, K])
                    for N, K, w, wp, x, y in mats
                ]

        def one_pass(dt: str) -> float:
            t0 = time.perf_counter()
            for c in calls[dt]:
                c()
            return time.perf_counter() - t0

        one_pass("f32"), one_pass("f32p")
        t: dict[str, list[float]] = {"f32": [], "f32p": []}
        for r in range(args.rounds):
            for dt in ("f32", "f32p") if r % 2 == 0 else ("f32p", "f32"):
                t[dt].append(one_pass(dt))
    ratios = sorted(b / a for a, b in zip(t["f32"], t["f32p"], strict=True))
    q = len(ratios) // 4

    def rate(s: float) -> str:
        if args.mode == "prefill":
            return f"{flops / s / 1e9:.1f} GFLOP/s"
        return f"{nbytes / s / 1e9:.1f} GB/s"

    m32, mp = statistics.median(t["f32"]), statistics.median(t["f32p"])
    print(
        f"{args.mode} (M={M}) {args.threads} thread(s), {len(mats)} matrices, "
        f"{nbytes / 1e6:.0f} MB, {args.rounds} rounds: f32 {m32 * 1e3:.2f} ms ({rate(m32)}), "
        f"f32p {mp * 1e3:.2f} ms ({rate(mp)}); f32p/f32 paired median "
        f"{statistics.median(ratios):.3f} (quartiles {ratios[q]:.3f}-{ratios[-1 - q]:.3f})"
    )


if __name__ == "__main__":
    main()
