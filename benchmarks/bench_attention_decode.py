"""Paired A/B of decode attention with the KV cache cold, as in a real decode step.

In decode, between two uses of one layer's KV cache the whole model's weights
stream through the caches, so every attention call reads its K and V rows from
DRAM.  This runs, for each of ``--layers`` layers (distinct K/V caches), a
gemv_f32 over a distinct 4 MiB matrix (the stand-in for that layer's weights,
which evicts the previous layers' KV rows) and then one decode attention call
(T = 1 at position P), timing the attention calls only.

    python benchmarks/bench_attention_decode.py /tmp/base/runtime --rounds 21

Shape defaults: SmolLM2-135M (H = 9, KV = 3, D = 64) at P = 160.  Prints the
median time per attention call of the old runtime (the tree given) and the new
one (this checkout), and the median of the per-round new/old ratios (old and
new alternate, order flipped each round).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_kernels as bk  # noqa: E402

#: per key, the (eviction, attention) call pairs of one pass over the layers
Calls = dict[str, list[tuple[Callable[[], object], Callable[[], object]]]]


def paired_rounds(
    calls: Calls, rounds: int, check: Callable[[], None] | None = None
) -> tuple[dict[str, list[float]], list[float]]:
    """Time two keys' passes alternately, the order flipped each round, after one
    warm-up pass each (then ``check()``): per key the mean seconds of an attention call
    in each round (its eviction untimed), and per round the second key's time over the
    first's."""

    def one_pass(key: str) -> float:
        total = 0.0
        for evict, attend in calls[key]:
            evict()
            t0 = time.perf_counter()
            attend()
            total += time.perf_counter() - t0
        return total / len(calls[key])

    first, second = calls
    for key in calls:  # warm-up
        one_pass(key)
    if check is not None:
        check()
    times: dict[str, list[float]] = {key: [] for key in calls}
    ratios: list[float] = []
    for r in range(rounds):
        order = [first, second] if r % 2 == 0 else [second, first]
        got = {key: one_pass(key) for key in order}
        for key, t in got.items():
            times[key].append(t)
        ratios.append(got[second] / got[first])
    return times, ratios


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tree", type=Path, help="the old runtime/ directory")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=21)
    ap.add_argument("--layers", type=int, default=30)
    ap.add_argument("--pos", type=int, default=160, help="P: cached positions before the query")
    ap.add_argument("--heads", type=int, nargs=3, default=[9, 3, 64], metavar=("H", "KV", "D"))
    ap.add_argument("--isa", default="native")
    ap.add_argument("--no-check", action="store_true", help="timing experiments: skip old == new")
    args = ap.parse_args()
    H, KV, D = args.heads
    P, C = args.pos, args.pos + 1
    rng = np.random.default_rng(0)
    f32 = np.float32
    kvs = [
        (rng.standard_normal((C, KV * D)).astype(f32), rng.standard_normal((C, KV * D)).astype(f32))
        for _ in range(args.layers)
    ]
    q = rng.standard_normal((1, H * D)).astype(f32)
    N, K = 1024, 1024
    ws = [rng.standard_normal((N, K)).astype(f32) for _ in range(args.layers)]
    x, y = rng.standard_normal(K).astype(f32), np.zeros(N, f32)
    with tempfile.TemporaryDirectory() as d:
        libs = {
            "old": bk.build_tree(args.tree, args.isa, Path(d) / "libold.so"),
            "new": bk.build_runtime(args.isa, Path(d)),
        }
        outs = {key: np.zeros((1, H * D), f32) for key in libs}
        calls = {}
        for key, lib in libs.items():
            lib.set_num_threads(args.threads)
            calls[key] = [
                (
                    bk.bound_call(lib, "gemv_f32", [x, w, y, N, K]),
                    bk.bound_call(lib, "attention_f32", [q, kc, vc, outs[key], 1, P, H, KV, D]),
                )
                for (kc, vc), w in zip(kvs, ws, strict=True)
            ]

        check = None
        if not args.no_check:

            def check() -> None:
                np.testing.assert_allclose(outs["new"], outs["old"], rtol=1e-5, atol=1e-6)

        times, ratios = paired_rounds(calls, args.rounds, check)
    old, new = statistics.median(times["old"]), statistics.median(times["new"])
    q1, _, q3 = statistics.quantiles(ratios, n=4)
    print(
        f"attention decode T=1 P={P} H={H} KV={KV} D={D}, KV cold, {args.threads} thread(s), "
        f"{args.rounds} rounds: old {old * 1e6:.1f} us, new {new * 1e6:.1f} us a call; "
        f"paired ratio median {statistics.median(ratios):.3f} (quartiles {q1:.3f}-{q3:.3f})"
    )


if __name__ == "__main__":
    main()
