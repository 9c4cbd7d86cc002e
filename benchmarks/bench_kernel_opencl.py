"""PoCL GFLOP/s of the generated OpenCL SGEMM (kernel IR, ``--target opencl``) vs NumPy's
OpenBLAS on one thread, on this machine.

    python benchmarks/bench_kernel_opencl.py
    python benchmarks/bench_kernel_opencl.py --shapes 256x256x256,97x301x53 --reps 3

For every shape (M x K x N) every schedule of ``--schedules`` is built into one
OpenCL program, checked against NumPy and timed (best of ``--reps`` batches of at
least 0.2 s); the table gives the best schedule's GFLOP/s with PoCL on all its
compute units and on one (``POCL_MAX_PTHREAD_COUNT=1``, in a child process; a second
table gives every schedule's one-thread figure), and
NumPy's one-thread GFLOP/s measured in the same run by ``ckir.blas_baseline``
(``OPENBLAS_CORETYPE`` / ``OPENBLAS_L2_SIZE`` removed from its environment; the
OpenBLAS kernel named through threadpoolctl).  Prints a markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

SHAPES = "128x128x128,256x256x256,512x512x512,1024x1024x1024,128x1024x1024,1024x1024x64,97x301x53"
SCHEDULES = [
    "tile_m=32,tile_n=128,tile_k=128,vectorize=16,unroll=2",
    "tile_m=32,tile_n=256,tile_k=128,vectorize=16,unroll=4",
    "tile_m=16,tile_n=128,tile_k=128,vectorize=16,unroll=2",
    "tile_m=32,tile_n=64,tile_k=128,vectorize=16,unroll=4",
    "tile_m=32,tile_n=128,tile_k=256,vectorize=8,unroll=4",
    "tile_m=32,tile_n=64,tile_k=128,vectorize=16,unroll=4,mr=1",  # one row per work-item
    "tile_m=32,tile_n=128,tile_k=128,vectorize=16,unroll=2,mr=8",
]
MK, KN, MN = (
    "!graph.tensor<[M, K], f32>",
    "!graph.tensor<[K, N], f32>",
    "!graph.tensor<[M, N], f32>",
)


def _shapes(text: str) -> list[tuple[int, int, int]]:
    out = []
    for item in text.split(","):
        m, k, n = (int(x) for x in item.split("x"))
        out.append((m, k, n))
    return out


def _module_text(schedules: list[str]) -> str:
    from ckir import kernel_tools as kt

    text = ""
    for i, sched in enumerate(schedules):
        body = ", ".join(f"{k} = {v}" for k, v in kt.parse_schedule(sched).items())
        text += (
            f'kernel.func @s{i} {{\n  %a = kernel.input "A" : {MK}\n'
            f'  %b = kernel.input "B" : {KN}\n'
            f"  %c = kernel.matmul %a, %b {{schedule = #kernel.schedule<{body}>}}"
            f" : ({MK}, {KN}) -> {MN}\n  kernel.output %c : {MN}\n}}\n"
        )
    return text


def child(shapes: list[tuple[int, int, int]], schedules: list[str], reps: int) -> None:
    """Time every schedule on every shape on the OpenCL device; print JSON."""
    from ckir import kernel_tools as kt
    from ckir.backend.kernel_opencl import emit_module
    from ckir.ir_io import parse_module
    from ckir.opencl_runtime import OpenCLProgram, open_device

    module = parse_module(_module_text(schedules))
    prog = OpenCLProgram(emit_module(module))
    dev = open_device()
    funcs = kt.funcs(module)
    rows = []
    for m, k, n in shapes:
        symbols = {"M": m, "K": k, "N": n}
        inputs = kt.random_inputs(funcs[0], symbols, 0)
        want = kt.reference(funcs[0], inputs)[0]
        gflops = []
        for f in funcs:
            err = kt.relative_error(prog.run(f.func_name, inputs, symbols)[0], want)
            if err > 1e-4:
                raise SystemExit(f"@{f.func_name} {m}x{k}x{n}: wrong result (rel err {err:.1e})")
            secs = prog.time_call(f.func_name, inputs, symbols, reps=reps)
            gflops.append(2 * m * k * n / secs / 1e9)
        rows.append(gflops)
    info = {"device": dev.name, "units": int(dev.device.max_compute_units), "gflops": rows}
    print(json.dumps(info))


def _run_child(args: argparse.Namespace, threads: int | None) -> dict:
    env = dict(os.environ)
    if threads is not None:
        env["POCL_MAX_PTHREAD_COUNT"] = str(threads)
    cmd = [sys.executable, __file__, "--child", "--shapes", args.shapes, "--reps", str(args.reps)]
    cmd += [a for s in args.schedules for a in ("--schedule", s)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"the OpenCL run failed: {proc.stderr.strip()[-500:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _cpu_name() -> str:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return "unknown CPU"
    fields = dict(
        line.split(":", 1) for line in text.splitlines()[:30] if ":" in line
    )  # the first processor
    get = {k.strip(): v.strip() for k, v in fields.items()}.get
    return f"{get('model name', '?')} (family {get('cpu family', '?')} model {get('model', '?')})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shapes", default=SHAPES, help="MxKxN,... (default: %(default)s)")
    ap.add_argument("--schedule", dest="schedules", action="append", help="repeatable")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    args.schedules = args.schedules or SCHEDULES
    shapes = _shapes(args.shapes)
    if args.child:
        child(shapes, args.schedules, args.reps)
        return
    from ckir.blas_baseline import numpy_sgemm_seconds
    from ckir.opencl_runtime import unavailable_reason

    reason = unavailable_reason()
    if reason is not None:
        raise SystemExit(f"error: {reason}")
    all_units = _run_child(args, None)
    one_unit = _run_child(args, 1)
    secs, blas = numpy_sgemm_seconds(shapes, reps=args.reps)
    print(f"CPU: {_cpu_name()}, {os.cpu_count()} logical CPUs; load average "
          f"{os.getloadavg()[0]:.1f}")  # fmt: skip
    print(f"OpenCL: {all_units['device']}, {all_units['units']} compute units")
    print(f"NumPy baseline: {blas}")
    print("schedules:")
    for i, s in enumerate(args.schedules):
        print(f"  s{i}: {s}")
    print()
    print(
        f"| M x K x N | PoCL {all_units['units']} threads GFLOP/s (best schedule) | "
        "PoCL 1 thread GFLOP/s (best schedule) | OpenBLAS 1 thread GFLOP/s | "
        "PoCL 1 thread / OpenBLAS |"
    )
    print("|---|---|---|---|---|")
    for (m, k, n), many, one, t in zip(
        shapes, all_units["gflops"], one_unit["gflops"], secs, strict=True
    ):
        blas_gf = 2 * m * k * n / t / 1e9
        bm, bo = (
            max(range(len(many)), key=many.__getitem__),
            max(range(len(one)), key=one.__getitem__),
        )
        print(
            f"| {m} x {k} x {n} | {many[bm]:.1f} (s{bm}) | {one[bo]:.1f} (s{bo}) | "
            f"{blas_gf:.1f} | {one[bo] / blas_gf:.2f} |"
        )
    print()
    print("PoCL 1 thread, GFLOP/s per schedule:")
    print()
    print("| M x K x N | " + " | ".join(f"s{i}" for i in range(len(args.schedules))) + " |")
    print("|---|" + "---|" * len(args.schedules))
    for (m, k, n), one in zip(shapes, one_unit["gflops"], strict=True):
        print(f"| {m} x {k} x {n} | " + " | ".join(f"{g:.1f}" for g in one) + " |")


if __name__ == "__main__":
    main()
