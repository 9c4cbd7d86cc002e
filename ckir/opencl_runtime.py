"""Run the generated OpenCL kernels (:mod:`ckir.backend.kernel_opencl`) through pyopencl.

The device is the first one of the first OpenCL platform that has one (PoCL's CPU
device on the project's machines: Debian's ``pocl-opencl-icd``).  Without pyopencl,
an ICD or a device, :func:`unavailable_reason` says why in one line and
:func:`open_device` raises :class:`OpenCLUnavailable` with it.

Example::

    gen = kernel_opencl.emit_module(module)
    prog = OpenCLProgram(gen, "mm.mlir")
    outs = prog.run("mm", inputs, {"M": 7, "K": 5, "N": 3})
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ckir.backend.kernel_opencl import GeneratedOpenCL, Launch, OpenCLFunc
from ckir.dialects.dims import evaluate_dim
from ckir.errors import CkirError, one_line

__all__ = ["OpenCLProgram", "OpenCLUnavailable", "open_device", "unavailable_reason"]

PYOPENCL_PIN = "pyopencl==2026.1.4"


class OpenCLUnavailable(CkirError):
    """No OpenCL here: pyopencl missing, no platform (ICD) or no device."""


@dataclass
class Device:
    """An OpenCL context and in-order queue on one device."""

    ctx: Any
    queue: Any
    device: Any

    @property
    def name(self) -> str:
        return " ".join(str(self.device.name).split())


_DEVICE: Device | None = None


def open_device() -> Device:
    """The OpenCL device (opened once per process), or OpenCLUnavailable."""
    global _DEVICE
    if _DEVICE is not None:
        return _DEVICE
    try:
        import pyopencl as cl
    except ImportError:
        raise OpenCLUnavailable(
            f"no OpenCL: pyopencl is not installed (pip install {PYOPENCL_PIN})"
        ) from None
    try:
        platforms = cl.get_platforms()
    except (cl.Error, RuntimeError) as err:
        raise OpenCLUnavailable(
            f"no OpenCL platform ({one_line(err)}): install an ICD such as pocl-opencl-icd"
        ) from None
    for platform in platforms:
        try:
            devices = platform.get_devices()
        except cl.Error:
            continue
        if devices:
            ctx = cl.Context([devices[0]])
            _DEVICE = Device(ctx, cl.CommandQueue(ctx), devices[0])
            return _DEVICE
    raise OpenCLUnavailable("no OpenCL device: the OpenCL platforms list no device")


def unavailable_reason() -> str | None:
    """Why OpenCL cannot run here (one line), or None when a device is there."""
    try:
        open_device()
    except OpenCLUnavailable as err:
        return str(err)
    return None


def _eval(dim: str, symbols: Mapping[str, int]) -> int:
    return evaluate_dim(dim, dict(symbols))


def _ceil(a: int, b: int) -> int:
    return -(-a // b)


class OpenCLProgram:
    """A built OpenCL program of generated kernels, with their launch plans.

    ``where`` (the IR file) prefixes messages.  The schedule of every launch is
    checked against the device's limits (work-items per group, local memory)."""

    def __init__(self, gen: GeneratedOpenCL, where: str = "") -> None:
        import pyopencl as cl

        self.dev = open_device()
        self.gen = gen
        self.funcs: dict[str, OpenCLFunc] = {f.name: f for f in gen.funcs}
        pre = f"{where}: " if where else ""
        d = self.dev.device
        for f in gen.funcs:
            for la in f.launches:
                self._check_limits(la, pre)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # pyopencl warns with the compiler's log
            try:
                self.program = cl.Program(self.dev.ctx, gen.source).build()
            except cl.Error as err:
                log = " ".join(str(err).split())[:400]
                raise CkirError(
                    f"{pre}the OpenCL compiler of {self.dev.name} failed: {log}"
                ) from None
        self.kernels: dict[str, Any] = {}
        for f in gen.funcs:
            for la in f.launches:
                kern = cl.Kernel(self.program, la.kernel)
                limit = kern.get_work_group_info(cl.kernel_work_group_info.WORK_GROUP_SIZE, d)
                if la.work_group_size > limit:
                    raise CkirError(
                        f"{pre}{la.where}: {la.local[0]} x {la.local[1]} work-items per "
                        f"work-group but the compiled kernel allows {limit} on {self.dev.name}"
                    )
                self.kernels[la.kernel] = kern
                if la.epilogue is not None:
                    self.kernels[la.epilogue] = cl.Kernel(self.program, la.epilogue)

    def _check_limits(self, la: Launch, pre: str) -> None:
        d = self.dev.device
        s = la.schedule
        if la.work_group_size > d.max_work_group_size or any(
            n > m for n, m in zip(la.local, d.max_work_item_sizes, strict=False)
        ):
            how = (
                "tile_m rows"
                if la.kind == "relu"
                else "ceil(tile_n / (vectorize x unroll)) x ceil(tile_m / mr)"
            )
            raise CkirError(
                f"{pre}{la.where}: {la.local[0]} x {la.local[1]} = {la.work_group_size} "
                f"work-items per work-group ({how}) but {self.dev.name} allows "
                f"{d.max_work_group_size} (at most {list(d.max_work_item_sizes)[:2]} per dim): "
                "use smaller tiles"
            )
        if la.local_bytes > d.local_mem_size:
            raise CkirError(
                f"{pre}{la.where}: the tiles need {la.local_bytes} bytes of local memory "
                f"(tile_m = {s.tile_m}, tile_n = {s.tile_n}, tile_k = {s.tile_k}) but "
                f"{self.dev.name} has {d.local_mem_size}: use smaller tiles"
            )

    # ------------------------------------------------------------------ calls

    def prepare(
        self, func: str, inputs: Sequence[np.ndarray], symbols: Mapping[str, int]
    ) -> tuple[Callable[[], None], Callable[[], list[np.ndarray]]]:
        """Buffers for one call of ``func``: (enqueue all launches and wait, read outputs)."""
        import pyopencl as cl

        f = self.funcs[func]
        ctx, queue = self.dev.ctx, self.dev.queue
        mf = cl.mem_flags
        bufs: dict[str, Any] = {}
        for name, x in zip(f.inputs, inputs, strict=True):
            host = np.ascontiguousarray(x, dtype=np.float32)
            bufs[name] = cl.Buffer(ctx, mf.READ_ONLY | mf.COPY_HOST_PTR, hostbuf=host)
        for name, t in f.temps.items():
            numel = int(np.prod([_eval(d, symbols) for d in t.dims], dtype=np.int64))
            bufs[name] = cl.Buffer(ctx, mf.READ_WRITE, size=4 * max(numel, 1))
        steps: list[tuple[Any, tuple[int, ...], tuple[int, ...] | None, list[Any]]] = []
        for la in f.launches:
            steps += self._steps(la, bufs, symbols)

        def call() -> None:
            for kern, glob, loc, args in steps:
                kern.set_args(*args)
                cl.enqueue_nd_range_kernel(queue, kern, glob, loc)
            queue.finish()

        def read() -> list[np.ndarray]:
            outs = []
            for name, t in zip(f.outputs, f.output_types, strict=True):
                out = np.empty(tuple(_eval(d, symbols) for d in t.dims), dtype=np.float32)
                cl.enqueue_copy(queue, out, bufs[name])
                outs.append(out)
            queue.finish()
            return outs

        return call, read

    def _steps(
        self, la: Launch, bufs: Mapping[str, Any], symbols: Mapping[str, int]
    ) -> list[tuple[Any, tuple[int, ...], tuple[int, ...] | None, list[Any]]]:
        i64 = np.int64
        kern = self.kernels[la.kernel]
        args = [bufs[a] for a in la.args] + [bufs[la.out]]
        s = la.schedule
        if la.kind == "relu":
            rows, cols = _eval(la.dims[0], symbols), _eval(la.dims[1], symbols)
            glob = (_ceil(cols, s.tile_n), _ceil(rows, s.tile_m) * s.tile_m)
            return [(kern, glob, la.local, [*args, i64(rows), i64(cols)])]
        m, n, kk = (_eval(d, symbols) for d in la.dims)
        tiles = {"m": _ceil(m, s.tile_m), "n": _ceil(n, s.tile_n), "k": _ceil(kk, s.tile_k)}
        steps = []
        loops = la.host_loops
        for idx in itertools.product(*(range(tiles[a]) for a in loops)):
            at = dict(zip(loops, idx, strict=True))
            groups_m = 1 if "m" in at else tiles["m"]
            groups_n = 1 if "n" in at else tiles["n"]
            k_lo = at["k"] * s.tile_k if "k" in at else 0
            k_hi = min(k_lo + s.tile_k, kk) if "k" in at else kk
            groups = (groups_n, groups_m) if la.m_dim == 1 else (groups_m, groups_n)
            glob = (groups[0] * la.local[0], groups[1] * la.local[1])
            extra = [i64(m), i64(n), i64(kk), i64(at.get("m", 0) * s.tile_m)]
            extra += [i64(at.get("n", 0) * s.tile_n), i64(k_lo), i64(k_hi)]
            steps.append((kern, glob, la.local, [*args, *extra]))
        if la.epilogue is not None:
            size = _ceil(m * n, 64) * 64
            steps.append((self.kernels[la.epilogue], (size,), None, [bufs[la.out], i64(m * n)]))
        return steps

    def run(
        self, func: str, inputs: Sequence[np.ndarray], symbols: Mapping[str, int]
    ) -> list[np.ndarray]:
        """One call of ``func`` on ``inputs``; returns its outputs."""
        call, read = self.prepare(func, inputs, symbols)
        call()
        return read()

    def time_call(
        self, func: str, inputs: Sequence[np.ndarray], symbols: Mapping[str, int],
        *, min_seconds: float = 0.2, reps: int = 5,
    ) -> float:  # fmt: skip
        """Best seconds per call over ``reps`` batches (each batch runs ≥ ``min_seconds``)."""
        from ckir.kernel_tools import best_seconds

        call, _ = self.prepare(func, inputs, symbols)
        return best_seconds(call, min_seconds=min_seconds, reps=reps, max_calls=1 << 16)
