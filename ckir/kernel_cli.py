"""``ckir kernel lower | build | validate | bench | tune | serve``: kernel IR from the command line.

::

    ckir kernel lower mm.mlir [--target c|opencl] [--isa native|avx2|scalar]
    ckir kernel build mm.mlir -o out/ [--isa ...]
    ckir kernel validate mm.mlir --shape-set A=64x128,B=128x64 [--shape-set ...] [--tol 1e-4]
    ckir kernel bench mm.mlir --shape-set A=256x256,B=256x256 --schedule tile_m=8,unroll=4 ...

``lower`` prints the generated C, ``build`` writes ``out/<stem>.c`` and
``out/lib<stem>.so``, ``validate`` compiles into a temporary folder, runs every
kernel.func on random inputs of each shape set against NumPy, prints one line per
shape and exits 1 when any fails; ``bench`` times every schedule on every shape
set in one library and prints GFLOP/s and the fraction of the one-thread fp32 FMA
peak measured in the same run (``ckir.tools.bandwidth.fma_peak``).  Notes about
normalised schedule hints go to stderr; bad input is one ``error:`` line naming the
file, op or tensor.  ``build``, ``validate`` and ``bench`` compile through the kernel
cache (:mod:`ckir.kernel_cache`); ``tune`` is :mod:`ckir.kernel_tune`, ``serve``
:mod:`ckir.kernel_serve`.  ``--target opencl`` (lower, validate, bench) is
``ckir.kernel_opencl_cli``'s.
"""

from __future__ import annotations

import argparse
import ctypes
import sys
from pathlib import Path

from ckir import kernel_opencl_cli
from ckir import kernel_tools as kt
from ckir.kernel_cache import export, kernel_cache_options, open_cache
from ckir.kernel_records import apply_records, schedule_text, tuned_schedules
from ckir.kernel_serve import register_serve
from ckir.kernel_tune import register_tune
from ckir.runtime_build import ISAS

__all__ = ["register"]

TARGETS = ("c", "opencl")  # opencl: ckir.kernel_opencl_cli


def _common(s: argparse.ArgumentParser, *, compiles: bool = True) -> None:
    s.add_argument("file", type=Path, help="kernel IR (.mlir or IR JSON): kernel.func ops")
    s.add_argument("--isa", choices=ISAS, default="native", help="vector ISA of the build")
    s.add_argument("--no-fuse", action="store_true", help="do not fuse matmul + relu")
    if compiles:
        kernel_cache_options(s)


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``ckir kernel ...`` to the top-level subcommands."""
    p = sub.add_parser("kernel", help="kernel IR: generated C, libraries, NumPy validation")
    ksub = p.add_subparsers(dest="kernel_command", required=True)

    s = ksub.add_parser("lower", help="print the generated source of a kernel IR file")
    _common(s, compiles=False)
    s.add_argument("--target", choices=TARGETS, default="c", help="source language")
    s.set_defaults(func=cmd_lower)

    s = ksub.add_parser("build", help="compile a kernel IR file into a shared library")
    _common(s)
    s.add_argument("-o", "--out", type=Path, required=True, help="output folder")
    s.add_argument("--records", type=Path, help="apply the schedules of a tuning-records file")
    s.add_argument("--shape-set", action="append", help="the shape bucket of --records")
    s.set_defaults(func=cmd_build)

    s = ksub.add_parser("validate", help="run on random inputs per shape set against NumPy")
    _common(s)
    s.add_argument(
        "--shape-set",
        action="append",
        required=True,
        metavar="A=64x128,B=128x64",
        help="sizes of every input (repeat for more shapes)",
    )
    s.add_argument("--tol", type=float, default=1e-4, help="max relative error (default 1e-4)")
    s.add_argument("--seed", type=int, default=0, help="random inputs' seed")
    s.add_argument("--target", choices=TARGETS, default="c", help="run the C or the OpenCL")
    s.set_defaults(func=cmd_validate)

    s = ksub.add_parser("bench", help="GFLOP/s per schedule and shape, vs this CPU's FMA peak")
    _common(s)
    s.add_argument("--shape-set", action="append", required=True, metavar="A=64x128,B=128x64")
    s.add_argument(
        "--schedule",
        action="append",
        metavar="tile_m=32,tile_n=64,...",
        help="a schedule for every op (repeat to compare; 'ir' = as written; default: ir)",
    )
    s.add_argument("--reps", type=int, default=5, help="timed batches per case (best is kept)")
    s.add_argument("--records", type=Path, help="add each shape's tuned schedule ('tuned')")
    s.add_argument("--target", choices=TARGETS, default="c", help="time the C or the OpenCL")
    s.set_defaults(func=cmd_bench)
    register_tune(ksub)
    register_serve(ksub)


def _notes(notes: list[str]) -> None:
    for note in notes:
        print(f"note: {note}", file=sys.stderr)


def cmd_lower(args: argparse.Namespace) -> int:
    if args.target == "opencl":
        return kernel_opencl_cli.cmd_lower(args)
    module = kt.load_kernels(args.file, fuse=not args.no_fuse)
    gen = kt.generate(module, args.isa, str(args.file))
    _notes(gen.notes)
    sys.stdout.write(gen.source)
    return 0


def cmd_build(args: argparse.Namespace) -> int:
    module = kt.load_kernels(args.file, fuse=not args.no_fuse)
    if args.records:
        module = apply_records(module, args.records, args.shape_set, args.isa, str(args.file))
    _notes(kt.generate(module, args.isa, str(args.file)).notes)
    with open_cache(args) as cache:
        lib = export(
            cache.build(module, isa=args.isa, where=str(args.file)), args.out, args.file.stem
        )
    print(lib)
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    if args.target == "opencl":
        return kernel_opencl_cli.cmd_validate(args)
    module = kt.load_kernels(args.file, fuse=not args.no_fuse)
    for func in kt.funcs(module):  # shape errors before the compiler runs
        for text in args.shape_set:
            kt.bind_shapes(func, kt.parse_shape_set(text), text)
    _notes(kt.generate(module, args.isa, str(args.file)).notes)
    with open_cache(args) as cache:
        lib = cache.build(module, isa=args.isa, where=str(args.file)).library
        results = kt.validate(module, lib, args.shape_set, tol=args.tol, seed=args.seed)
    for r in results:
        print(r.line())
    failed = sum(not r.passed for r in results)
    print(f"{len(results) - failed}/{len(results)} passed")
    return 1 if failed else 0


def cmd_bench(args: argparse.Namespace) -> int:
    if args.target == "opencl":
        return kernel_opencl_cli.cmd_bench(args)
    from ckir.tools.bandwidth import fma_peak

    module = kt.load_kernels(args.file, fuse=not args.no_fuse)
    texts = args.schedule or ["ir"]
    combined = kt.schedule_variants(module, texts)
    shape_sets = [(t, kt.parse_shape_set(t)) for t in args.shape_set]
    base = kt.funcs(module)
    for func in base:
        for text, shapes in shape_sets:
            kt.bind_shapes(func, shapes, text)
    tuned: dict[tuple[str, str], str] = {}  # (func, shape set) -> schedule of its record
    for j, (text, _) in enumerate(shape_sets if args.records else []):
        found = tuned_schedules(module, args.records, [text], args.isa, str(args.file))
        for func in kt.funcs(kt.with_schedule(module, None, f"_t{j}")):
            name = func.func_name[: -len(f"_t{j}")]
            if name in found:
                kt.set_schedule(func, found[name])
                combined.body.block.add_op(func.clone())
                tuned[name, text] = f"tuned:{schedule_text(found[name])}"
    _notes(kt.generate(combined, args.isa, str(args.file)).notes)
    peak = sorted(fma_peak(1))[1]
    print(f"fp32 FMA peak, 1 thread, measured now: {peak:.1f} GFLOP/s")
    print(f"{'func':12s} {'shape set':28s} {'schedule':48s} {'ms/call':>9s} {'GFLOP/s':>8s} peak")
    with open_cache(args) as cache:
        lib_path = cache.build(combined, isa=args.isa, where=str(args.file)).library
        lib = ctypes.CDLL(str(lib_path))
        funcs = {f.func_name: f for f in kt.funcs(combined)}
        for func in base:
            for text, shapes in shape_sets:
                symbols = kt.bind_shapes(func, shapes, text)
                inputs = kt.random_inputs(func, symbols, 0)
                want = kt.reference(func, inputs)
                flops = kt.func_flops(func, symbols)
                cases = [(sched, f"{func.func_name}_s{i}") for i, sched in enumerate(texts)]
                if (func.func_name, text) in tuned:
                    j = args.shape_set.index(text)
                    cases.append((tuned[func.func_name, text], f"{func.func_name}_t{j}"))
                for sched, variant_name in cases:
                    variant = funcs[variant_name]
                    got = kt.run(lib, variant, inputs, symbols)
                    err = max(kt.relative_error(g, w) for g, w in zip(got, want, strict=True))
                    secs = kt.time_call(lib, variant, inputs, symbols, reps=args.reps)
                    gflops = flops / secs / 1e9
                    ok = "" if err <= 1e-4 else f"  WRONG (rel err {err:.1e})"
                    print(
                        f"{func.func_name:12s} {text:28s} {sched:48s} {secs * 1e3:9.3f} "
                        f"{gflops:8.2f} {gflops / peak:5.3f}{ok}"
                    )
    return 0
