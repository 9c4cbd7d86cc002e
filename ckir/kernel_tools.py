"""Kernel IR files in, C / shared libraries / NumPy-checked results out.

What ``ckir kernel lower | build | validate`` do, as functions:

* :func:`load_kernels` — a kernel IR file (graph matmul/relu ops are lowered with
  ``--lower-kernel``, then ``--fuse-kernel-matmul-relu`` unless told not to) ->
  a verified module; bad input is a :class:`~ckir.errors.CkirError` naming the file;
* :func:`generate` — the C source for a build's ISA (:mod:`ckir.backend.kernel_c`);
* :func:`build` — the source compiled into ``lib<name>.so`` with the runtime's
  compiler flags (:func:`ckir.runtime_build.build_standalone_library`, ``-Wall -Werror``);
* :func:`parse_shape_set` / :func:`bind_shapes` — ``A=64x128,B=128x64`` -> sizes of
  the named inputs -> values of the dim symbols;
* :func:`run` and :func:`reference` — one call of the compiled kernel and its NumPy
  oracle (float64) on the same random inputs; :func:`validate` compares them.

Example::

    module = load_kernels(Path("mm.mlir"))
    lib = build(module, Path("out"), name="mm")
    for result in validate(module, lib, ["A=7x5,B=5x3"]):
        print(result.line())
"""

from __future__ import annotations

import ctypes
import math
import re
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, StringAttr
from xdsl.ir import SSAValue
from xdsl.utils.exceptions import DiagnosticException, ParseError, VerifyException

from ckir.backend.kernel_c import GeneratedC, KernelCodegenError, emit_module, func_signature
from ckir.dialects import kernel as k
from ckir.dialects.dims import DimError, evaluate_dim, is_identifier
from ckir.dialects.graph import TensorType
from ckir.errors import CkirError
from ckir.fileio import write_text_atomically
from ckir.ir_io import parse_module
from ckir.ir_json import looks_like_json, parse_json_module
from ckir.runtime_build import build_standalone_library, isa_vector_width

__all__ = [
    "ShapeResult",
    "bind_shapes",
    "best_of_batches",
    "best_seconds",
    "bound_call",
    "build",
    "calls_per_batch",
    "funcs",
    "generate",
    "func_flops",
    "load_kernels",
    "prepare_kernels",
    "parse_schedule",
    "parse_shape_set",
    "reference",
    "run",
    "schedule_variants",
    "set_schedule",
    "time_call",
    "validate",
    "with_schedule",
]

#: flags a kernel library is compiled with on top of the runtime's
WARNING_FLAGS = ("-Wall", "-Werror")


def load_kernels(path: Path, *, fuse: bool = True) -> ModuleOp:
    """Parse and verify a kernel IR file (text or IR JSON), lowering graph ops and fusing
    matmul + relu."""
    try:
        text = path.read_text()
    except OSError as err:
        raise CkirError(f"{path}: {err.strerror or err}") from None
    try:
        if looks_like_json(text):  # IR JSON (docs/ir-json.md); its errors name the JSON path
            module = parse_json_module(text, str(path))
        else:
            module = parse_module(text, str(path))
        module.verify()
    except ParseError as err:
        loc = err.span.get_location()
        raise CkirError(f"{path}:{loc.line}:{loc.col}: {err.msg}") from None
    except (VerifyException, DiagnosticException) as err:
        raise CkirError(f"{path}: {str(err).strip().splitlines()[0]}") from None
    return prepare_kernels(module, str(path), fuse=fuse)


def prepare_kernels(module: ModuleOp, path: str, *, fuse: bool = True) -> ModuleOp:
    """Lower graph ops to kernel ops (and fuse matmul + relu) in a verified module;
    errors name ``path``."""
    from ckir.passes.fuse_kernel_matmul_relu import FuseKernelMatmulReluPass
    from ckir.passes.lower_kernel import LowerKernelPass

    ctx = Context()
    try:
        LowerKernelPass().apply(ctx, module)
        if fuse:
            FuseKernelMatmulReluPass().apply(ctx, module)
        module.verify()
    except CkirError as err:
        raise CkirError(f"{path}: {err}") from None
    except (VerifyException, DiagnosticException) as err:
        raise CkirError(f"{path}: {str(err).strip().splitlines()[0]}") from None
    if not funcs(module):
        raise CkirError(f"{path}: no kernel.func in the file")
    return module


def funcs(module: ModuleOp) -> list[k.FuncOp]:
    """The module's kernel functions, in order."""
    return [op for op in module.walk() if isinstance(op, k.FuncOp)]


def generate(module: ModuleOp, isa: str = "native", where: str = "") -> GeneratedC:
    """The C source of every kernel.func for a build with ``isa`` (native, avx2, scalar).

    ``where`` (the IR file) prefixes the message of a refused hint."""
    try:
        return emit_module(module, isa_vector_width(isa))
    except KernelCodegenError as err:
        raise KernelCodegenError(f"{where}: {err}" if where else str(err)) from None


def build(
    module: ModuleOp, out_dir: Path, *, name: str, isa: str = "native", where: str = ""
) -> Path:
    """Write ``out_dir/<name>.c`` and compile it into ``out_dir/lib<name>.so``."""
    gen = generate(module, isa, where)
    out_dir.mkdir(parents=True, exist_ok=True)
    src = out_dir / f"{name}.c"
    write_text_atomically(src, gen.source)
    return build_standalone_library(
        out_dir / f"lib{name}.so", [src], isa=isa, extra_flags=WARNING_FLAGS
    )


# --------------------------------------------------------------------------- shapes

_SHAPE_ITEM = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=(\d+(?:x\d+)*)")


def parse_shape_set(text: str) -> dict[str, tuple[int, ...]]:
    """``"A=64x128,B=128x64"`` -> ``{"A": (64, 128), "B": (128, 64)}``."""
    out: dict[str, tuple[int, ...]] = {}
    for item in text.split(","):
        m = _SHAPE_ITEM.fullmatch(item.strip())
        if m is None:
            raise CkirError(
                f"shape set '{text}': cannot read '{item.strip()}' (expected NAME=D0xD1..., "
                "e.g. A=64x128)"
            )
        name, dims = m.group(1), tuple(int(d) for d in m.group(2).split("x"))
        if name in out:
            raise CkirError(f"shape set '{text}': tensor {name} is given twice")
        if min(dims) < 1:
            raise CkirError(f"shape set '{text}': {name} has a size 0 (sizes are >= 1)")
        out[name] = dims
    return out


def bind_shapes(func: k.FuncOp, shapes: Mapping[str, tuple[int, ...]], text: str) -> dict[str, int]:
    """The dim symbols' values implied by the sizes of the func's inputs.

    Every input must be given, with its rank; dims that are symbols are bound by
    the first input that has them, and every dim (expressions too) must agree.
    """
    where = f"shape set '{text}' for kernel.func @{func.func_name}"
    inputs = {i.input_name.data: i for i in func.inputs()}
    for name in shapes:
        if name not in inputs:
            raise CkirError(f"{where}: no input {name} (inputs: {', '.join(inputs)})")
    symbols: dict[str, int] = {}
    for name, inp in inputs.items():
        if name not in shapes:
            raise CkirError(f"{where}: input {name} has no shape")
        dims = inp.result.type.dims
        given = shapes[name]
        if len(given) != len(dims):
            raise CkirError(
                f"{where}: input {name} is [{', '.join(dims)}] (rank {len(dims)}) but the set "
                f"gives {'x'.join(map(str, given))}"
            )
        for d, size in zip(dims, given, strict=True):
            if is_identifier(d) and d not in symbols:
                symbols[d] = size
    for name, inp in inputs.items():
        for axis, (d, size) in enumerate(zip(inp.result.type.dims, shapes[name], strict=True)):
            try:
                value = evaluate_dim(d, symbols)
            except DimError as err:
                raise CkirError(f"{where}: input {name} dim {axis} ({d}): {err}") from None
            if value != size:
                raise CkirError(
                    f"{where}: input {name} dim {axis} is {size} but {d} = {value} "
                    "from the other sizes"
                )
    _, _, needed = func_signature(func)
    missing = [s for s in needed if s not in symbols]
    if missing:
        raise CkirError(f"{where}: no input binds {', '.join(missing)}")
    return symbols


def _shape(value: SSAValue, symbols: Mapping[str, int]) -> tuple[int, ...]:
    t = value.type
    assert isinstance(t, TensorType)
    return tuple(evaluate_dim(d, symbols) for d in t.dims)


# --------------------------------------------------------------------------- running


def random_inputs(func: k.FuncOp, symbols: Mapping[str, int], seed: int) -> list[np.ndarray]:
    """Random f32 inputs (standard normal) of the func's input shapes."""
    rng = np.random.default_rng(seed)
    return [
        rng.standard_normal(_shape(i.result, symbols)).astype(np.float32) for i in func.inputs()
    ]


def run(
    lib: ctypes.CDLL, func: k.FuncOp, inputs: Sequence[np.ndarray], symbols: Mapping[str, int]
) -> list[np.ndarray]:
    """One call of the compiled ``func`` on ``inputs``; returns its outputs."""
    out_op = func.output()
    assert out_op is not None
    names, n_out, syms = func_signature(func)
    outs = [np.full(_shape(v, symbols), np.nan, dtype=np.float32) for v in out_op.values]
    args = [np.ascontiguousarray(a, dtype=np.float32) for a in inputs]
    fn = getattr(lib, func.func_name)
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.c_void_p] * (len(names) + n_out) + [ctypes.c_int64] * len(syms)
    status = fn(
        *(a.ctypes.data for a in args), *(o.ctypes.data for o in outs), *(symbols[s] for s in syms)
    )
    if status != 0:
        raise CkirError(f"kernel.func @{func.func_name}: out of memory for its temporaries")
    return outs


_ERF = np.vectorize(math.erf)


def _activate(x: np.ndarray, act: str) -> np.ndarray:
    if act == "relu":
        return np.maximum(x, 0.0)
    if act == "silu":
        return x / (1.0 + np.exp(-x))
    if act == "gelu":
        return 0.5 * x * (1.0 + _ERF(x / math.sqrt(2.0)))
    return x


def reference(func: k.FuncOp, inputs: Sequence[np.ndarray]) -> list[np.ndarray]:
    """NumPy's answer for ``func`` on ``inputs`` (computed in float64)."""
    values: dict[SSAValue, np.ndarray] = {
        i.result: np.asarray(x, dtype=np.float64)
        for i, x in zip(func.inputs(), inputs, strict=True)
    }
    for op in func.body_block.ops:
        if isinstance(op, k.ReluOp):
            values[op.out] = np.maximum(values[op.x], 0.0)
        elif isinstance(op, k.MatmulOp | k.MatmulReluOp | k.LinearOp):
            y = values[op.a] @ values[op.b]
            if isinstance(op, k.LinearOp):
                if op.bias is not None:
                    y = y + values[op.bias]
                y = _activate(y, op.activation_name)
            elif isinstance(op, k.MatmulReluOp):
                y = _activate(y, "relu")
            values[op.out] = y
    out_op = func.output()
    assert out_op is not None
    return [values[v] for v in out_op.values]


@dataclass(frozen=True)
class ShapeResult:
    """The outcome of one shape set: the worst relative error over the outputs."""

    func: str
    shape_set: str
    error: float
    tol: float

    @property
    def passed(self) -> bool:
        return self.error <= self.tol

    def line(self) -> str:
        verdict = "pass" if self.passed else "FAIL"
        return (
            f"{verdict}  @{self.func}  {self.shape_set}  max rel err {self.error:.2e} "
            f"(tol {self.tol:.0e})"
        )


def relative_error(got: np.ndarray, want: np.ndarray) -> float:
    """max |got - want| / max(max |want|, 1e-30); inf when shapes or finiteness differ."""
    if got.shape != want.shape or not np.all(np.isfinite(got)):
        return math.inf
    scale = max(float(np.max(np.abs(want))) if want.size else 0.0, 1e-30)
    return float(np.max(np.abs(got - want))) / scale if got.size else 0.0


def validate(
    module: ModuleOp,
    lib_path: Path,
    shape_sets: Sequence[str],
    *,
    tol: float = 1e-4,
    seed: int = 0,
) -> list[ShapeResult]:
    """Run every kernel.func on random inputs for each shape set, against NumPy."""
    lib = ctypes.CDLL(str(lib_path))
    results: list[ShapeResult] = []
    for func in funcs(module):
        for text in shape_sets:
            symbols = bind_shapes(func, parse_shape_set(text), text)
            inputs = random_inputs(func, symbols, seed)
            got = run(lib, func, inputs, symbols)
            want = reference(func, inputs)
            err = max(relative_error(g, w) for g, w in zip(got, want, strict=True))
            results.append(ShapeResult(func.func_name, text, err, tol))
    return results


# --------------------------------------------------------------------------- bench


def parse_schedule(text: str) -> dict[str, int | str]:
    """``"tile_m=32,tile_n=64,order=nmk"`` -> schedule fields (checked like the verifier)."""
    out: dict[str, int | str] = {}
    for item in filter(None, (p.strip() for p in text.split(","))):
        key, sep, raw = item.partition("=")
        key, raw = key.strip(), raw.strip()
        if not sep or key not in k.SCHEDULE_FIELDS:
            raise CkirError(
                f"schedule '{text}': cannot read '{item}' (expected FIELD=VALUE with FIELD one of "
                f"{', '.join(k.SCHEDULE_FIELDS)})"
            )
        value: int | str = raw
        if key != "order":
            if not raw.isdigit():
                raise CkirError(f"schedule '{text}': {key} = {raw} is not a positive integer")
            value = int(raw)
        problem = k.field_problem(key, value)
        if problem:
            raise CkirError(f"schedule '{text}': {problem}")
        out[key] = value
    return out


def with_schedule(
    module: ModuleOp, values: Mapping[str, int | str] | None, suffix: str
) -> ModuleOp:
    """A copy of ``module`` whose compute ops all take ``values`` (the fields each op
    accepts; None: keep the IR's schedules) as their schedule, and whose funcs are
    renamed ``<name><suffix>``."""
    copy = module.clone()
    for func in funcs(copy):
        func.properties["sym_name"] = StringAttr(func.func_name + suffix)
        if values is not None:
            set_schedule(func, values)
    return copy


def set_schedule(func: k.FuncOp, values: Mapping[str, int | str]) -> None:
    """Give every compute op of ``func`` the fields of ``values`` it accepts (in place)."""
    for op in func.body_block.ops:
        if isinstance(op, k.KernelComputeOp):
            fields = {f: v for f, v in values.items() if f in op.SCHEDULE_APPLIES}
            if fields:
                op.properties["schedule"] = k.ScheduleAttr.from_values(fields)
            else:
                op.properties.pop("schedule", None)


def schedule_variants(module: ModuleOp, texts: Sequence[str]) -> ModuleOp:
    """One module with every func of ``module`` once per schedule text (``ir``: as
    written, else :func:`parse_schedule`'s fields), the i-th renamed ``<name>_s<i>``."""
    combined = ModuleOp([])
    for i, text in enumerate(texts):
        values = None if text == "ir" else parse_schedule(text)
        for func in funcs(with_schedule(module, values, f"_s{i}")):
            combined.body.block.add_op(func.clone())
    return combined


def func_flops(func: k.FuncOp, symbols: Mapping[str, int]) -> int:
    """Multiply-add flops (2·M·N·K) of the func's matmul-like ops for these sizes."""
    total = 0
    for op in func.body_block.ops:
        if isinstance(op, k.MatmulOp | k.MatmulReluOp | k.LinearOp):
            m, kk = _shape(op.a, symbols)
            total += 2 * m * kk * _shape(op.b, symbols)[1]
    return total


def time_call(
    lib: ctypes.CDLL, func: k.FuncOp, inputs: Sequence[np.ndarray], symbols: Mapping[str, int],
    *, min_seconds: float = 0.2, reps: int = 5,
) -> float:  # fmt: skip
    """Best seconds per call over ``reps`` batches (each batch runs ≥ ``min_seconds``)."""
    batch = bound_call(lib, func, inputs, symbols)
    return best_of_batches(batch, min_seconds=min_seconds, reps=reps)


def bound_call(
    lib: ctypes.CDLL, func: k.FuncOp, inputs: Sequence[np.ndarray], symbols: Mapping[str, int]
) -> Callable[[int], float]:
    """``batch(n)``: call the compiled ``func`` n times on ``inputs`` (output buffers
    allocated once), returning the seconds the n calls took."""
    out_op = func.output()
    assert out_op is not None
    names, n_out, syms = func_signature(func)
    outs = [np.empty(_shape(v, symbols), dtype=np.float32) for v in out_op.values]
    fn = getattr(lib, func.func_name)
    fn.restype = ctypes.c_int
    fn.argtypes = [ctypes.c_void_p] * (len(names) + n_out) + [ctypes.c_int64] * len(syms)
    args = [a.ctypes.data for a in inputs] + [o.ctypes.data for o in outs]
    args += [symbols[s] for s in syms]

    def batch(n: int, _keep: object = (inputs, outs)) -> float:  # the buffers outlive batch
        t0 = time.perf_counter()
        for _ in range(n):
            fn(*args)
        return time.perf_counter() - t0

    return batch


def calls_per_batch(
    batch: Callable[[int], float], min_seconds: float, max_calls: int = 1 << 20
) -> int:
    """The number of calls (a power of two) for which one batch lasts ``min_seconds``
    (at most ``max_calls``)."""
    calls = 1
    while batch(calls) < min_seconds and calls < max_calls:
        calls *= 2
    return calls


def best_of_batches(
    batch: Callable[[int], float], *, min_seconds: float, reps: int, max_calls: int = 1 << 20
) -> float:
    """Best seconds per call over ``reps`` batches of ``batch`` (seconds of n calls),
    after one warm-up call; the calls per batch double until a batch lasts
    ``min_seconds`` (or ``max_calls``)."""
    batch(1)
    calls = calls_per_batch(batch, min_seconds, max_calls)
    return min(batch(calls) / calls for _ in range(reps))


def best_seconds(
    call: Callable[[], object], *, min_seconds: float = 0.2, reps: int = 5, max_calls: int = 1 << 20
) -> float:
    """:func:`best_of_batches` of a plain ``call()``."""

    def batch(n: int) -> float:
        t0 = time.perf_counter()
        for _ in range(n):
            call()
        return time.perf_counter() - t0

    return best_of_batches(batch, min_seconds=min_seconds, reps=reps, max_calls=max_calls)
