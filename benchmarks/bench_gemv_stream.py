"""Paired A/B of one gemv_<dtype> kernel over a decode-like sequence of distinct
weight matrices (SmolLM2-135M shapes: 30 layers of qkv, o, gate, up, down, then
the LM head; more bytes than the L3), so the weights stream from DRAM as in a
decode step, unlike ``bench_kernels.py --ab`` whose repeated calls on one
matrix read it from cache.

    python benchmarks/bench_gemv_stream.py /tmp/base/runtime q4_1p --threads 2 --rounds 41

The K-quants (q4_k, q5_k, q6_k: K a multiple of 256) run a 135M-class shape instead
(hidden 768, intermediate 2048, 12 layers, 12 / 4 heads of 64, a 32000-row LM head),
each layer as a decode step calls its kernels: gemv_qkv_<dtype>, gemv_<dtype> (o),
gemv_gate_up_<dtype> (gate and up, SiLU product), gemv_<dtype> (down); so the
activation quantization each call repeats is timed with the weights.

    python benchmarks/bench_gemv_stream.py /tmp/base/runtime q4_k --threads 2 --rounds 21

``--cpu`` (with ``--threads 1``) times the calling thread's CPU time instead of the wall
clock: on a host whose other jobs take the core away, the kernel's own time (stalls on
memory included).

Prints the median time of a pass over all matrices for the old runtime (the
tree given) and the new one (this checkout), as GB/s of weights read, and the
median of the per-round new/old ratios (old and new alternate, order flipped
each round).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_kernels as bk  # noqa: E402

from ckir import quant  # noqa: E402
from ckir.vocab import PANEL_DTYPES  # noqa: E402

SHAPES = [(960, 576), (576, 576), (1536, 576), (1536, 576), (576, 1536)] * 30 + [(49152, 576)]
#: the K-quants' decode step: per layer (kernel, output rows per matrix, K); then the LM head
KQ_E, KQ_I, KQ_KV, KQ_LAYERS, KQ_VOCAB = 768, 2048, 256, 12, 32000
KQ_STEP = [
    ("gemv_qkv", (KQ_E, KQ_KV, KQ_KV), KQ_E),
    ("gemv", (KQ_E,), KQ_E),
    ("gemv_gate_up", (KQ_I, KQ_I), KQ_E),
    ("gemv", (KQ_E,), KQ_I),
] * KQ_LAYERS + [("gemv", (KQ_VOCAB,), KQ_E)]
KQUANTS = ("q4_k", "q5_k", "q6_k")


def weights(rng, dtype: str, N: int, K: int) -> np.ndarray:
    if dtype in PANEL_DTYPES:  # the layouts inference builds store by default
        return quant.pack_panels(rng.standard_normal((N, K), dtype=np.float32) * 0.05, dtype)
    if dtype == "bf16":
        return bk.bf16(rng.standard_normal((N, K), dtype=np.float32))
    if dtype == "q8_0":
        return bk.q8_0_blocks(rng, N, K)
    if dtype == "q4_1":
        return bk.q4_1_blocks(rng, N, K)
    if dtype in KQUANTS:
        return quant.quantize(rng.standard_normal((N, K), dtype=np.float32) * 0.05, dtype)
    raise SystemExit(f"unknown dtype {dtype}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tree", type=Path, help="the old runtime/ directory")
    ap.add_argument(
        "dtype", help="bf16, q8_0, q4_1, q4_k, q5_k, q6_k, or a panel dtype (f32p, bf16p, ...)"
    )
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=41)
    ap.add_argument("--isa", default="native")
    bk.add_cpu_option(ap)
    args = ap.parse_args()
    clock = bk.clock_of(args)
    rng = np.random.default_rng(0)
    if args.dtype in KQUANTS:
        # (kernel, operand arrays, int parameters); arrays kept here: bound_call holds pointers
        steps = []
        for kernel, ns, K in KQ_STEP:
            ws = [weights(rng, args.dtype, N, K) for N in ns]
            x = rng.standard_normal(K, dtype=np.float32)
            if kernel == "gemv_gate_up":
                ys = [np.empty(ns[0], np.float32)]
            else:
                ys = [np.empty(N, np.float32) for N in ns]
            params = [ns[0], K] if kernel == "gemv_gate_up" else [*ns, K]
            steps.append((kernel, [x, *ws, *ys], params, sum(w.nbytes for w in ws)))
        nbytes = sum(st[3] for st in steps)
    else:
        mats = [  # y kept here: bound_call holds raw pointers
            (
                N,
                K,
                weights(rng, args.dtype, N, K),
                rng.standard_normal(K, dtype=np.float32),
                np.empty(N, np.float32),
            )
            for N, K in SHAPES
        ]
        nbytes = sum(m[2].nbytes for m in mats)
    with tempfile.TemporaryDirectory() as d:
        libs = {
            "old": bk.build_tree(args.tree, args.isa, Path(d) / "libold.so"),
            "new": bk.build_runtime(args.isa, Path(d)),
        }
        calls = {}
        for key, lib in libs.items():
            lib.set_num_threads(args.threads)
            if args.dtype in KQUANTS:
                calls[key] = [
                    bk.bound_call(lib, f"{kernel}_{args.dtype}", [*arrays, *params])
                    for kernel, arrays, params, _ in steps
                ]
            else:
                calls[key] = [
                    bk.bound_call(lib, f"gemv_{args.dtype}", [x, w, y, N, K])
                    for N, K, w, x, y in mats
                ]

        def one_pass(key: str) -> float:
            t0 = clock()
            for c in calls[key]:
                c()
            return clock() - t0

        one_pass("old"), one_pass("new")
        t: dict[str, list[float]] = {"old": [], "new": []}
        for r in range(args.rounds):
            for key in ("old", "new") if r % 2 == 0 else ("new", "old"):
                t[key].append(one_pass(key))
    mo, mn = statistics.median(t["old"]), statistics.median(t["new"])
    ratios = sorted(b / a for a, b in zip(t["old"], t["new"], strict=True))
    q = len(ratios) // 4
    print(
        f"gemv_{args.dtype} {args.threads} thread(s), {nbytes / 1e6:.1f} MB a pass, "
        f"{args.rounds} rounds: old {mo * 1e3:.3f} ms ({nbytes / mo / 1e9:.1f} GB/s), "
        f"new {mn * 1e3:.3f} ms ({nbytes / mn / 1e9:.1f} GB/s), new/old {mn / mo:.3f}; "
        f"paired ratio median {statistics.median(ratios):.3f} "
        f"(quartiles {ratios[q]:.3f}-{ratios[-1 - q]:.3f})"
    )


if __name__ == "__main__":
    main()
