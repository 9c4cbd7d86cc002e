"""Paired timing of the K-quant prefill GEMMs on int8 x (Q8_K rows, the SIMD runtimes'
default) against fp32 x (rows of w dequantized, gemm.c's driver; the path
``ckir_runtime_qp_fp32_x`` / ``model.int8_prefill = False`` selects), in one library
and one process.

    python benchmarks/bench_kquant_gemm.py [--isa native] [--threads 2] [--rounds 15]
        [--dtypes q4_k,q6_k] [--m 128] [--cpu]

Shapes: a 135M-class layer (hidden 768, intermediate 2048, 12 / 4 heads of 64): q, o
(768 x 768), k / v (256 x 768), gate / up (2048 x 768) and down (768 x 2048), each a
distinct matrix, at M prompt rows.  Every round times one pass over all the shapes on
int8 x and one on fp32 x, the order flipped each round; prints the median time of a
pass for each, GFLOP/s, the median of the per-round int8 / fp32 ratios with its
quartiles, and the load average (the host is shared: compare the ratio, not the
absolute figures).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_kernels as bk  # noqa: E402

from ckir import quant  # noqa: E402

#: (N, K) of one layer's matrices, 135M-class
SHAPES = [(768, 768), (256, 768), (256, 768), (768, 768), (2048, 768), (2048, 768), (768, 2048)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--isa", default="native")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--dtypes", default="q4_k,q6_k")
    ap.add_argument("--m", type=int, default=128, help="prompt rows (M)")
    bk.add_cpu_option(ap)
    args = ap.parse_args()
    clock = bk.clock_of(args)
    lib = bk.build_runtime(args.isa, Path(tempfile.mkdtemp(prefix="kq_gemm_")))
    if not lib.qp_int8:
        sys.exit(f"the {args.isa} runtime has no int8 GEMM (scalar build?)")
    lib.set_num_threads(args.threads)
    rng = np.random.default_rng(0)
    m = args.m
    x = {k: rng.standard_normal((m, k)).astype(np.float32) for k in {k for _, k in SHAPES}}
    flops = sum(2 * m * n * k for n, k in SHAPES)
    what = "CPU time" if args.cpu else "wall clock"
    gflop = flops / 1e9
    print(f"isa {args.isa}, {args.threads} threads, M = {m}, {gflop:.2f} GFLOP a pass, {what}")
    for dtype in args.dtypes.split(","):
        ws = [
            quant.quantize(rng.standard_normal((n, k)).astype(np.float32), dtype) for n, k in SHAPES
        ]
        ys = [np.zeros((m, n), np.float32) for n, _ in SHAPES]

        def one_pass(fp32: bool, ws=ws, ys=ys, dtype=dtype) -> float:
            lib.qp_fp32_x(fp32)
            t0 = clock()
            for (n, k), w, y in zip(SHAPES, ws, ys, strict=True):
                lib.call(f"gemm_{dtype}", x[k], w, y, m, n, k)
            dt = clock() - t0
            lib.qp_fp32_x(False)
            return dt

        one_pass(True), one_pass(False)  # warm up
        t8, t32, ratios = [], [], []
        for r in range(args.rounds):
            order = (False, True) if r % 2 == 0 else (True, False)
            got = {fp32: one_pass(fp32) for fp32 in order}
            t8.append(got[False])
            t32.append(got[True])
            ratios.append(got[False] / got[True])
        q = np.quantile(ratios, [0.25, 0.75])
        m8, m32 = statistics.median(t8), statistics.median(t32)
        print(
            f"{dtype}: int8 x {m8 * 1e3:.2f} ms ({flops / m8 / 1e9:.1f} GFLOP/s), fp32 x "
            f"{m32 * 1e3:.2f} ms ({flops / m32 / 1e9:.1f} GFLOP/s); int8 / fp32 per round "
            f"median {statistics.median(ratios):.3f} (quartiles {q[0]:.3f}-{q[1]:.3f})"
        )
    print("load average", " ".join(f"{v:.1f}" for v in os.getloadavg()))


if __name__ == "__main__":
    main()
