"""``ckir kernel lower | validate | bench --target opencl``: the OpenCL side of ``ckir kernel``.

``ckir.kernel_cli`` hands the parsed arguments here when ``--target opencl``:

- ``lower`` prints the OpenCL C (:mod:`ckir.backend.kernel_opencl`); no device needed;
- ``validate`` builds the program on the OpenCL device (:mod:`ckir.opencl_runtime`)
  and checks every kernel.func on every shape set against NumPy, like the C target;
- ``bench`` times every schedule on every shape set on the device and prints
  GFLOP/s next to NumPy's (OpenBLAS, one thread, measured in the same run by
  :mod:`ckir.blas_baseline`) and their ratio.

Without an OpenCL device, validate and bench print one ``error: no OpenCL ...`` line.
"""

from __future__ import annotations

import argparse
import sys

from xdsl.dialects.builtin import ModuleOp

from ckir import kernel_tools as kt
from ckir.backend.kernel_c import KernelCodegenError
from ckir.backend.kernel_opencl import GeneratedOpenCL, emit_module

__all__ = ["cmd_bench", "cmd_lower", "cmd_validate", "generate"]


def generate(module: ModuleOp, where: str = "") -> GeneratedOpenCL:
    """The OpenCL C of every kernel.func; ``where`` (the IR file) prefixes a refusal."""
    try:
        return emit_module(module)
    except KernelCodegenError as err:
        raise KernelCodegenError(f"{where}: {err}" if where else str(err)) from None


def _notes(gen: GeneratedOpenCL) -> None:
    for note in gen.notes:
        print(f"note: {note}", file=sys.stderr)


def cmd_lower(args: argparse.Namespace) -> int:
    gen = generate(kt.load_kernels(args.file, fuse=not args.no_fuse), str(args.file))
    _notes(gen)
    sys.stdout.write(gen.source)
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    from ckir.opencl_runtime import OpenCLProgram, open_device

    module = kt.load_kernels(args.file, fuse=not args.no_fuse)
    for func in kt.funcs(module):  # shape errors before the device is touched
        for text in args.shape_set:
            kt.bind_shapes(func, kt.parse_shape_set(text), text)
    gen = generate(module, str(args.file))
    _notes(gen)
    open_device()
    prog = OpenCLProgram(gen, str(args.file))
    failed = 0
    total = 0
    for func in kt.funcs(module):
        for text in args.shape_set:
            symbols = kt.bind_shapes(func, kt.parse_shape_set(text), text)
            inputs = kt.random_inputs(func, symbols, args.seed)
            got = prog.run(func.func_name, inputs, symbols)
            want = kt.reference(func, inputs)
            err = max(kt.relative_error(g, w) for g, w in zip(got, want, strict=True))
            result = kt.ShapeResult(func.func_name, text, err, args.tol)
            print(result.line())
            failed += not result.passed
            total += 1
    print(f"{total - failed}/{total} passed")
    return 1 if failed else 0


def _matmul_shapes(func: object, symbols: dict[str, int]) -> list[tuple[int, int, int]]:
    from ckir.dialects import kernel as k
    from ckir.dialects.dims import evaluate_dim

    assert isinstance(func, k.FuncOp)
    out = []
    for op in func.body_block.ops:
        if isinstance(op, k.MatmulOp | k.MatmulReluOp | k.LinearOp):
            m, kk = (evaluate_dim(d, symbols) for d in op.a.type.dims)  # type: ignore[attr-defined]
            out.append((m, kk, evaluate_dim(op.b.type.dims[1], symbols)))  # type: ignore[attr-defined]
    return out


def cmd_bench(args: argparse.Namespace) -> int:
    from ckir.blas_baseline import numpy_sgemm_seconds
    from ckir.opencl_runtime import OpenCLProgram, open_device

    module = kt.load_kernels(args.file, fuse=not args.no_fuse)
    texts = args.schedule or ["ir"]
    combined = kt.schedule_variants(module, texts)
    cases = [  # shape errors before the device is touched
        (f, t, kt.bind_shapes(f, kt.parse_shape_set(t), t))
        for f in kt.funcs(module)
        for t in args.shape_set
    ]
    gen = generate(combined, str(args.file))
    _notes(gen)
    dev = open_device()
    prog = OpenCLProgram(gen, str(args.file))
    gemms = sorted({g for f, _, sy in cases for g in _matmul_shapes(f, sy)})
    secs, blas = numpy_sgemm_seconds(gemms, reps=args.reps)
    numpy_time = dict(zip(gemms, secs, strict=True))
    platform = " ".join(str(dev.device.platform.name).split())
    print(f"OpenCL device: {dev.name} ({platform}, {dev.device.max_compute_units} compute units)")
    print(f"baseline: NumPy matmul, 1 thread: {blas}")
    sw = max(len("schedule"), *map(len, texts))
    print(
        f"{'func':12s} {'shape set':28s} {'schedule':{sw}s} {'ms/call':>9s} {'GFLOP/s':>8s} "
        f"{'numpy':>8s} ratio"
    )
    for func, text, symbols in cases:
        inputs = kt.random_inputs(func, symbols, 0)
        want = kt.reference(func, inputs)
        flops = kt.func_flops(func, symbols)
        ref_secs = sum(numpy_time[g] for g in _matmul_shapes(func, symbols))
        ref = flops / ref_secs / 1e9 if ref_secs else 0.0
        for i, sched in enumerate(texts):
            name = f"{func.func_name}_s{i}"
            got = prog.run(name, inputs, symbols)
            err = max(kt.relative_error(g, w) for g, w in zip(got, want, strict=True))
            t = prog.time_call(name, inputs, symbols, reps=args.reps)
            gflops = flops / t / 1e9
            ok = "" if err <= 1e-4 else f"  WRONG (rel err {err:.1e})"
            ratio = f"{gflops / ref:5.3f}" if ref else "    -"
            print(
                f"{func.func_name:12s} {text:28s} {sched:{sw}s} {t * 1e3:9.3f} {gflops:8.2f} "
                f"{ref:8.2f} {ratio}{ok}"
            )
    return 0
