"""The linear-layer backward GEMMs against the forward gemm, in one process (not a test).

    .venv/bin/python benchmarks/bench_linear_bwd.py [--isa native] [--threads 1 2] [--torch]

For y[M,N] = x[M,K] W[N,K]^T at the SmolLM-135M training shapes (M = 128 tokens;
q/o, gate/up, down and lm_head projections), times

    forward      gemm_f32              y  = x W^T       (the reference speed)
    bwd_input    linear_bwd_input_f32  dx = dy W
    bwd_weight   linear_bwd_weight_f32 dw = dy^T x

(the same 2 M N K flops each) and prints GFLOP/s and each backward's ratio to
the forward; bias_bwd's GB/s of dy read is printed too.  Every case runs in
alternating rounds and reports the median, so the shared machine's drift hits
all three alike.  ``--torch`` also times the same products with torch.mm
(torch's own thread pool, set to the same thread count): its rows print
torch's GFLOP/s and, in parentheses, ckir's speed relative to torch's (above 1:
ckir is faster).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

import numpy as np
from bench_kernels import bound_call, one_time
from kernel_lib import build_runtime

M = 128
SHAPES = [(576, 576), (1536, 576), (576, 1536), (49152, 576)]  # (N, K)
KINDS = ("forward", "bwd_input", "bwd_weight")


def cases(rng, N: int, K: int) -> dict[str, tuple[str, list]]:
    f = lambda *shape: rng.standard_normal(shape, dtype=np.float32)  # noqa: E731
    x, w, dy = f(M, K), f(N, K), f(M, N)
    return {
        "forward": ("gemm_f32", [x, w, np.empty((M, N), np.float32), M, N, K]),
        "bwd_input": ("linear_bwd_input_f32", [dy, w, np.empty((M, K), np.float32), M, N, K]),
        "bwd_weight": ("linear_bwd_weight_f32", [dy, x, np.empty((N, K), np.float32), M, N, K]),
    }


def torch_calls(args_by_kind: dict[str, list]) -> dict:
    import torch

    x, w = (torch.from_numpy(a) for a in args_by_kind["forward"][:2])
    dy = torch.from_numpy(args_by_kind["bwd_input"][0])
    return {
        "forward": lambda: torch.mm(x, w.t()),
        "bwd_input": lambda: torch.mm(dy, w),
        "bwd_weight": lambda: torch.mm(dy.t(), x),
    }


def median_times(calls: dict, rounds: int) -> dict[str, float]:
    inner = {k: max(1, int(5e-3 / max(one_time(c, 2), 1e-7))) for k, c in calls.items()}
    times: dict[str, list[float]] = {k: [] for k in calls}
    keys = list(calls)
    for r in range(rounds):
        for k in keys if r % 2 == 0 else keys[::-1]:
            times[k].append(one_time(calls[k], inner[k]))
    return {k: statistics.median(v) for k, v in times.items()}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--isa", default="native")
    ap.add_argument("--threads", type=int, nargs="+", default=[2, 1])
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--torch", action="store_true", help="also time torch.mm on the same shapes")
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as d:
        lib = build_runtime(args.isa, Path(d))
        print(f"library ISA path: {lib.isa}; M = {M}; GFLOP/s (ratio to forward gemm)")
        for nt in args.threads:
            lib.set_num_threads(nt)
            if args.torch:
                import torch

                torch.set_num_threads(nt)
            print(f"--- {nt} thread(s)")
            head = "".join(f"{k:>20s}" for k in KINDS)
            print(f"{'N x K':14s}{head}{'bias_bwd GB/s':>16s}")
            for N, K in SHAPES:
                cs = cases(rng, N, K)
                calls = {k: bound_call(lib, name, a) for k, (name, a) in cs.items()}
                # bound_call keeps raw pointers: the arrays must outlive the calls
                db = np.empty(N, np.float32)
                calls["bias"] = bound_call(lib, "bias_bwd_f32", [cs["bwd_input"][1][0], db, M, N])
                t = median_times(calls, args.rounds)
                gf = {k: 2 * M * N * K / t[k] / 1e9 for k in KINDS}
                row = "".join(
                    f"{gf[k]:9.1f} ({gf[k] / gf['forward']:4.2f}x)".rjust(20) for k in KINDS
                )
                print(f"{N:>6d} x {K:<5d}{row}{M * N * 4 / t['bias'] / 1e9:16.1f}")
                if args.torch:
                    tt = median_times(torch_calls({k: a for k, (_, a) in cs.items()}), args.rounds)
                    row = "".join(
                        f"{2 * M * N * K / tt[k] / 1e9:9.1f} ({tt[k] / t[k]:4.2f}x)".rjust(20)
                        for k in KINDS
                    )
                    print(f"{'  torch.mm':14s}{row}")


if __name__ == "__main__":
    main()
