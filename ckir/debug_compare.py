"""``ckir debug BUILD --compare``: the C build and the plan interpreter side by side.

The build's model.c is emitted again from its ``layout.mlir`` with a trace hook
(``emit_c(trace=True)``: ``ckir_set_trace_hook``) and compiled into a copy of the build
(:func:`trace_copy`).  The C run calls the hook after every kernel call; the hook runs
the same call in the interpreter (:class:`ckir.interp.PlanInterpreter`, one step of its
program) and compares every buffer the call wrote, C's arena against the interpreter's
at the same offsets.  The first call whose output differs beyond the tolerance stops
both runs and is named: its index in the program, kernel, the op it came from (its
origin) and the output slot.  ``--mode decode`` runs the tokens one decode step each;
``--mode backward`` runs one training backward (forward, loss and every gradient) of
the tokens against their targets (default: the tokens shifted by one), and compares
the loss at the end.
"""

from __future__ import annotations

import argparse
import ctypes
import shutil
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ckir.errors import CkirError
from ckir.vocab import INFERENCE_MODES

#: the modes ``--compare`` runs: the inference modes and the training backward
COMPARE_MODES = (*INFERENCE_MODES, "backward")

#: what the hook returns to stop the C run (CKIR_ERR_ARG: the run ended on request)
STOP = 10
DEFAULT_TOL = 1e-4
_HOOK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int64)


@dataclass(frozen=True)
class Mismatch:
    """The first call whose output differs: where, and by how much."""

    step: int
    index: int
    kernel: str
    origin: str
    slot: str
    error: float
    scale: float

    def __str__(self) -> str:
        return (
            f"call {self.index} (run {self.step}) @{self.kernel} from {self.origin}: "
            f"output @{self.slot} differs by {self.error:.3g} (max |value| {self.scale:.3g})"
        )


@dataclass
class Comparison:
    """What a compare run saw: calls compared, the largest relative difference, the
    first mismatch (None: all agree)."""

    mode: str
    calls: int = 0
    worst: float = 0.0
    mismatch: Mismatch | None = None
    logits: list[float] = field(default_factory=list)

    def summary(self) -> str:
        if self.mismatch is not None:
            return f"{self.mode}: first difference: {self.mismatch}"
        rel = max(self.logits, default=0.0)
        return (
            f"{self.mode}: {self.calls} calls agree (largest relative difference "
            f"{self.worst:.3g}; {'loss' if self.mode == 'backward' else 'logits'} {rel:.3g})"
        )


def trace_copy(build: Path, out: Path, edit: Callable[[str], str] | None = None) -> Path:
    """A copy of ``build`` at ``out`` whose library has the trace hook.  ``edit`` may
    change the emitted model.c first (a test breaks one kernel's call this way)."""
    from ckir.backend.c_emitter import emit_c
    from ckir.ir_io import load_module
    from ckir.tools.bench_build import build_emitted_copy

    source = emit_c(load_module(build / "layout.mlir"), trace=True).source
    build_emitted_copy(build, out, edit(source) if edit is not None else source, flag="--compare")
    return out


def relative(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """(max |a - b|, max |b|); inf when a value is not finite on one side only."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    if not np.array_equal(np.isfinite(a64), np.isfinite(b64)):
        return float("inf"), float(np.abs(b64[np.isfinite(b64)]).max(initial=0.0))
    ok = np.isfinite(b64)
    err = float(np.abs(a64[ok] - b64[ok]).max(initial=0.0))
    return err, float(np.abs(b64[ok]).max(initial=0.0))


def compare(
    build: str | Path,
    tokens: Sequence[int],
    *,
    mode: str = "prefill",
    tol: float = DEFAULT_TOL,
    edit: Callable[[str], str] | None = None,
    work: Path | None = None,
    targets: Sequence[int] | None = None,
) -> Comparison:
    """Run ``tokens`` through the C build and the interpreter call by call (``mode``
    "prefill": one prefill; "decode": one decode step per token; "backward": one
    backward against ``targets``, default ``tokens[1:]`` with ``tokens[:-1]`` as the
    input) and stop at the first call whose written output differs by more than ``tol``
    times its largest value."""
    from ckir.interp import PlanInterpreter
    from ckir.model import load

    build = Path(build)
    if mode not in COMPARE_MODES:
        raise CkirError(f"--mode: {' or '.join(COMPARE_MODES)}, not {mode!r}")
    if not tokens:
        raise CkirError("--tokens: give at least one token id")
    if mode != "backward" and targets is not None:
        raise CkirError("--targets: only --mode backward takes targets")
    if mode == "backward" and targets is None:
        if len(tokens) < 2:
            raise CkirError("--tokens: backward without --targets needs at least two tokens")
        tokens, targets = tokens[:-1], tokens[1:]
    interp = PlanInterpreter(build)
    interp.program(mode)  # a CkirError naming the mode when the build lacks it
    tmp = Path(tempfile.mkdtemp(prefix="ckir-compare-")) if work is None else None
    out = work if work is not None else tmp / "trace"
    assert out is not None
    try:
        trace_copy(build, out, edit)
        result = Comparison(mode)
        with load(out) as model:
            interp.int8_prefill = model.int8_prefill
            # decode runs one step per token; prefill and backward take them all at once
            runs = [[t] for t in tokens] if mode == "decode" else [list(tokens)]
            for step, run in enumerate(runs):
                if _compare_run(model, interp, mode, run, step, tol, result, targets):
                    break
        return result
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def _compare_run(
    model: object,
    interp: object,
    mode: str,
    tokens: list[int],
    step: int,
    tol: float,
    result: Comparison,
    targets: Sequence[int] | None = None,
) -> bool:
    """One C run beside one interpreter run; True when it stopped at a mismatch."""
    from ckir.interp import PlanInterpreter
    from ckir.model import CompiledModel

    assert isinstance(model, CompiledModel) and isinstance(interp, PlanInterpreter)
    steps: Iterator = (
        interp.backward_steps(tokens, targets or ())
        if mode == "backward"
        else interp.steps(mode, tokens)
    )
    state = ctypes.addressof(model.arena(1).contents)
    failure: list[BaseException] = []

    def hook(index: int) -> int:
        try:
            info = next(steps)
            if info.index != index:
                raise CkirError(f"C call {index} met interpreter call {info.index}")
            result.calls += 1
            for name, n in info.outputs:
                mine = interp.memory.values(name, n)
                arena, offset = interp.memory.address(name)
                if arena != "state":
                    raise CkirError(f"@{info.kernel} writes @{name} in the {arena} arena")
                theirs = np.ctypeslib.as_array((ctypes.c_float * n).from_address(state + offset))
                err, scale = relative(theirs, mine)
                rel = err / scale if scale > 0 else err
                result.worst = max(result.worst, rel)
                if not rel <= tol:
                    result.mismatch = Mismatch(
                        step, index, info.kernel, info.origin, name, err, scale
                    )
                    return STOP
            return 0
        except BaseException as err:  # noqa: BLE001 - a callback must not raise into C
            failure.append(err)
            return STOP

    callback = _HOOK(hook)
    set_hook = model._lib.ckir_set_trace_hook
    set_hook.argtypes = [ctypes.c_void_p]
    set_hook(ctypes.cast(callback, ctypes.c_void_p))
    try:
        if mode == "backward":
            logits = np.array([[model.backward(tokens, targets or ())]], dtype=np.float32)
        elif mode == "prefill":
            logits = model.prefill(tokens)
        else:
            logits = model.decode(tokens[0])[None]
    except CkirError:
        if failure:
            raise failure[0] from None
        if result.mismatch is not None:
            return True
        raise
    finally:
        set_hook(None)
    if failure:
        raise failure[0]
    for _ in steps:  # the interpreter's position advances past the run
        pass
    if mode == "backward":
        mine = np.array([[interp.loss()]], dtype=np.float32)
    else:
        mine = interp.logits(mode, len(tokens))
    err, scale = relative(logits, mine)
    result.logits.append(err / scale if scale > 0 else err)
    return False


def cmd_debug(args: argparse.Namespace) -> int:
    """``ckir debug BUILD --compare --tokens 1,2,3 [--mode M] [--targets 2,3,4] [--tol X]``."""
    if not args.compare:
        raise CkirError("ckir debug: give --compare (the one check it runs so far)")
    try:
        tokens = [int(t) for t in args.tokens.split(",") if t.strip()]
    except ValueError:
        raise CkirError(f"--tokens: comma-separated token ids, got {args.tokens!r}") from None
    targets = None
    if args.targets is not None:
        try:
            targets = [int(t) for t in args.targets.split(",") if t.strip()]
        except ValueError:
            raise CkirError(f"--targets: comma-separated token ids, got {args.targets!r}") from None
    if args.tol <= 0:
        raise CkirError(f"--tol must be > 0, got {args.tol}")
    result = compare(Path(args.build), tokens, mode=args.mode, tol=args.tol, targets=targets)
    print(result.summary())
    return 1 if result.mismatch is not None else 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``ckir debug`` to the CLI's subcommands."""
    s = sub.add_parser("debug", help="run a build's C and the NumPy plan interpreter side by side")
    s.add_argument("build", help="a build folder (ckir compile)")
    s.add_argument(
        "--compare",
        action="store_true",
        help="name the first kernel call whose output differs beyond --tol",
    )
    s.add_argument("--tokens", required=True, help="comma-separated token ids, e.g. 1,2,3")
    s.add_argument("--mode", default="prefill", choices=list(COMPARE_MODES))
    s.add_argument(
        "--targets",
        help="backward: comma-separated target ids, one per token "
        "(default: --tokens shifted by one)",
    )
    s.add_argument(
        "--tol",
        type=float,
        default=DEFAULT_TOL,
        help=f"relative tolerance per call output (default {DEFAULT_TOL})",
    )
    s.set_defaults(func=cmd_debug)
