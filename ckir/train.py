"""``ckir train``: fine-tune a model on a text file with the compiled training step.

    ckir train MODEL --data FILE --steps N --seq-len T --lr X --out DIR

MODEL (a HF folder or a GGUF file) is compiled with the modes prefill, decode
and backward, every weight f32 (a quantized GGUF file is dequantized) and
``max_context = T``.  The text is tokenized with the model's tokenizer
(no BOS/EOS added) and cut into windows of ``T + 1`` tokens that start every
``T`` tokens (consecutive windows share one token, so every token but the
first is a target exactly once per pass); step ``k`` trains on window
``k mod windows`` (tokens ``w[:-1]``, targets ``w[1:]``).  The trained
weights are saved with :meth:`ckir.model.CompiledModel.save_pretrained`.

Everything that can be checked before the (slow) compile is: the numbers,
``--out``, the data file (readable, not empty, UTF-8, at least ``T + 1``
tokens, ids inside the vocabulary) and ``T`` against the model's context.
A step whose loss or gradient norm is not finite stops the run; that step
left the weights alone, so the weights after the last good step are saved
and the error says so (docs/training.md, "Bad input").
"""

from __future__ import annotations

import io
import math
import re
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO, TypeVar

import numpy as np

from ckir.distributed import AllReduce
from ckir.errors import CkirError

T = TypeVar("T")


@dataclass(frozen=True)
class TrainArgs:
    """What ``ckir train`` was asked to do (already parsed, not yet checked)."""

    model: Path
    data: Path
    out: Path
    steps: int
    seq_len: int
    lr: float
    build_dir: Path | None = None


def check_numbers(steps: int, seq_len: int, lr: float) -> None:
    """One-line errors for a step count, sequence length or learning rate out of range."""
    if steps < 1:
        raise CkirError(f"--steps must be >= 1, got {steps}")
    if seq_len < 1:
        raise CkirError(f"--seq-len must be >= 1, got {seq_len}")
    if not (math.isfinite(lr) and lr > 0):
        raise CkirError(f"--lr must be a finite number > 0, got {lr}")


def read_text(path: Path) -> str:
    """The data file as text: CkirError when it is not a regular file (a FIFO would block
    the read for ever), is empty (or only whitespace) or is not UTF-8."""
    from ckir.fileio import regular_file

    raw = regular_file(path, "--data").read_bytes()  # OSError: the CLI prints one line
    if not raw.strip():
        raise CkirError(f"--data {path}: the file is empty (no text to train on)")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise CkirError(
            f"--data {path}: not UTF-8 text (byte 0x{raw[err.start]:02x} at offset {err.start})"
        ) from None


def windows(ids: Sequence[int], seq_len: int) -> np.ndarray:
    """``[count, seq_len + 1]`` windows of ``ids`` starting every ``seq_len`` tokens."""
    arr = np.asarray(ids, dtype=np.int64)
    starts = range(0, len(arr) - seq_len, seq_len)
    if not starts:
        return np.empty((0, seq_len + 1), dtype=np.int64)
    return np.stack([arr[s : s + seq_len + 1] for s in starts])


def model_limits(source: Path, allow_unused: tuple[str, ...] = ()) -> tuple[int | None, int | None]:
    """``(context, vocabulary)`` of a model (its symbols ``C`` and ``V``), from an import
    of its headers only (``allow_unused``: as ``CompileOptions.allow_unused``)."""
    from ckir.dialects import graph as g
    from ckir.frontend import import_model

    module, _, _ = import_model(source, allow_unused=allow_unused)
    model = next(op for op in module.ops if isinstance(op, g.ModelOp))
    symbols = model.symbol_values()
    return symbols.get("C"), symbols.get("V")


@dataclass
class StepPrinter:
    """One progress line per step: ``step k/N  loss L  R tok/s``; on a terminal, one line
    that is rewritten in place, with a bar."""

    total: int
    stream: TextIO = field(default_factory=lambda: sys.stdout)
    tty: bool | None = None
    _width: int = 0

    def __post_init__(self) -> None:
        if self.tty is None:
            isatty = getattr(self.stream, "isatty", None)
            self.tty = bool(isatty and isatty())

    def line(self, step: int, loss: float, tok_s: float, reduce: str = "") -> str:
        digits = len(str(self.total))
        text = f"step {step:>{digits}}/{self.total}  loss {loss:.4f}  {tok_s:,.0f} tok/s"
        return f"{text}  {reduce}" if reduce else text

    def step(self, step: int, loss: float, tok_s: float, reduce: str = "") -> None:
        """Print one step's line (``reduce``: its all-reduce's times, when data-parallel)."""
        text = self.line(step, loss, tok_s, reduce)
        if not self.tty:
            print(text, file=self.stream, flush=True)
            return
        done = round(24 * step / self.total)
        text = f"[{'#' * done}{'.' * (24 - done)}] {text}"
        pad = " " * max(0, self._width - len(text))
        self._width = len(text)
        print(f"\r{text}{pad}", end="", file=self.stream, flush=True)

    def close(self) -> None:
        if self.tty and self._width:
            print(file=self.stream, flush=True)
            self._width = 0


@dataclass
class TrainResult:
    steps_done: int
    losses: list[float]
    tokens: int
    seconds: float
    #: the error of the step that stopped the run (a non-finite loss or gradient), if any
    failure: str | None = None
    #: windows each step trains on, over every process (micro-batches x processes)
    windows_per_step: int = 1
    #: wall time of each step's all-reduce (data-parallel runs)
    reduce_seconds: list[float] = field(default_factory=list)
    #: of each step's wait for the slowest process before it
    reduce_waits: list[float] = field(default_factory=list)


#: the largest weight magnitude a saved model may hold (float16's largest finite value)
F16_MAX = float(np.finfo(np.float16).max)


def _reason(err: CkirError) -> str:
    """A runtime error without the build folder's name and the runtime's step count (the
    run's own step is shown instead)."""
    return re.sub(r" at step \d+", "", str(err).split(": ", 1)[-1])


def unsaveable(model: object, data: np.ndarray, result: TrainResult) -> str | None:
    """Why the weights now in ``model`` must not be saved as the result of ``result``'s
    run, or None when they are good:

    * every weight finite and within float16's range (|w| <= 65504): the block
      formats a saved folder is built in store float16 scales and minimums, and a HF
      folder is often loaded in half precision;
    * a finite loss on the batch that was trained last (one more forward + backward,
      which changes no weight), and finite logits from the inference forward
      (prefill) of that batch.

    A step whose loss and gradient were finite can still move the weights somewhere
    they overflow (``--lr 1e30``): "the last good weights" are checked, not assumed.
    The range is checked, not only the loss: weights of 1e30 overflow RMSNorm's sum of
    squares to a zero scale, so an f32 forward gives all-zero logits and the finite
    loss ln(V), while a Q8_0 build of the same folder gives NaN."""
    from ckir.model import CompiledModel

    assert isinstance(model, CompiledModel)
    done = result.steps_done
    if done == 0:
        return "no step completed, so no trained weights exist"
    name, amax = model.largest_weight()
    if not math.isfinite(amax):
        return f"the weights after step {done} are not finite ({name} holds NaN or Inf)"
    if amax > F16_MAX:
        return (
            f"the weights after step {done} are out of range ({name} reaches {amax:.3g}; "
            f"float16, the type of the block formats' scales, holds up to {F16_MAX:g})"
        )
    w = data[((done - 1) * result.windows_per_step) % len(data)]  # the step's first window
    try:
        loss = model.backward(w[:-1], w[1:])
    except CkirError as err:
        return f"the weights after step {done} give no finite loss on its batch ({_reason(err)})"
    if not math.isfinite(loss):
        return f"the weights after step {done} give a loss of {loss} on its batch"
    try:
        model.prefill(w[:-1])
    except CkirError as err:
        return f"the weights after step {done} give no finite logits on its batch ({_reason(err)})"
    finally:
        model.reset()
    return None


@dataclass(frozen=True)
class Shard:
    """Which windows a process trains on: step ``k`` takes the ``accumulate``
    consecutive windows from ``(k * world + rank) * accumulate`` (mod the count), so
    one process with ``accumulate = A * W`` sees the same windows per step as ``W``
    processes with ``A`` each."""

    accumulate: int = 1
    rank: int = 0
    world: int = 1

    def windows(self, step: int, count: int) -> list[int]:
        first = (step * self.world + self.rank) * self.accumulate
        return [(first + i) % count for i in range(self.accumulate)]


def run_steps(
    model: object,
    data: np.ndarray,
    steps: int,
    lr: float,
    printer: StepPrinter,
    shard: Shard = Shard(),
    reduce: AllReduce | None = None,
) -> TrainResult:
    """Train ``steps`` steps cycling over the windows ``data`` (each step the windows of
    ``shard``: micro-batches whose gradients are accumulated; with ``reduce``, summed
    over the processes of a data-parallel run); stops at the first step whose loss or
    gradient norm is not finite (that step changed no weight)."""
    from ckir.model import CompiledModel, NonFiniteError

    assert isinstance(model, CompiledModel)
    losses: list[float] = []
    start = time.perf_counter()
    failure = None
    per_step = shard.accumulate * shard.world
    try:
        for k in range(steps):
            ws = data[shard.windows(k, len(data))]
            t0 = time.perf_counter()
            try:
                if len(ws) == 1 and reduce is None:
                    loss = model.train_step(ws[0, :-1], ws[0, 1:], lr=lr)
                else:
                    loss = model.train_step(ws[:, :-1], ws[:, 1:], lr=lr, reduce=reduce)
            except NonFiniteError as err:
                failure = _reason(err)
                break
            dt = time.perf_counter() - t0
            losses.append(loss)
            tokens = per_step * (data.shape[1] - 1)
            times = ""
            if reduce is not None:
                times = f"all-reduce {reduce.seconds[-1] * 1e3:.2f} ms"
                times += f" (waited {reduce.waits[-1] * 1e3:.2f} ms)"
            printer.step(k + 1, loss, tokens / dt if dt > 0 else float("inf"), times)
    finally:
        printer.close()
    done = len(losses)
    return TrainResult(
        done,
        losses,
        done * per_step * (data.shape[1] - 1),
        time.perf_counter() - start,
        failure,
        per_step,
        list(reduce.seconds) if reduce is not None else [],
        list(reduce.waits) if reduce is not None else [],
    )


@dataclass
class TrainGroup:
    """The processes of one ``ckir train`` run: this one alone, or one rank of a
    data-parallel run over ``torch.distributed`` (gloo; :mod:`ckir.distributed`).  Rank
    0 compiles, prints and saves; every rank trains on its shard (:class:`Shard`)."""

    rank: int = 0
    world: int = 1
    #: the all-reduce before each update (a data-parallel run), else None
    reduce: AllReduce | None = None

    @classmethod
    def start(cls, distributed: bool) -> TrainGroup:
        """Join torchrun's process group when asked (``--distributed``) or started by
        torchrun with more than one process; else this process alone."""
        from ckir import distributed as dp

        if not (distributed or dp.under_torchrun()):
            return cls()
        rank, world = dp.init_group()
        return cls(rank, world, AllReduce())

    def __enter__(self) -> TrainGroup:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.reduce is not None:
            from ckir.distributed import close_group

            close_group()

    @property
    def out(self) -> TextIO:
        """Where progress lines go: stdout on rank 0, nowhere on the others."""
        return sys.stdout if self.rank == 0 else io.StringIO()

    @property
    def err(self) -> TextIO:
        """Where notes go: stderr on rank 0, nowhere on the others."""
        return sys.stderr if self.rank == 0 else io.StringIO()

    def on_rank0(self, make: Callable[[], T]) -> T:
        """``make()`` on rank 0, its result sent to every rank (the others wait for it);
        when rank 0 fails, the others stop with one line instead of waiting for ever."""
        if self.reduce is None:
            return make()
        from ckir.distributed import broadcast

        if self.rank == 0:
            try:
                value = make()
            except BaseException:
                broadcast(None)
                raise
            broadcast(value)
            return value
        value = broadcast(None)
        if value is None:
            raise CkirError(
                "--distributed: rank 0 could not compile the model (its error says why)"
            )
        return value  # type: ignore[return-value]

    def check_same_build(self, model: object) -> None:
        """Every rank loaded a build of the same fingerprint."""
        if self.reduce is not None:
            from ckir.backend.abi import fingerprint_hex
            from ckir.distributed import check_same_build

            check_same_build(fingerprint_hex(int(model.desc.fingerprint)))  # type: ignore[attr-defined]

    def describe(self, accumulate: int) -> str:
        """What a step trains on, for the run's first line ("" for one window, alone)."""
        if self.reduce is None:
            return f"; {accumulate} windows per step" if accumulate > 1 else ""
        return (
            f"; {self.world} processes (torch.distributed, gloo) x {accumulate} "
            f"window{'s' if accumulate > 1 else ''} per step"
        )

    def summary(self, result: TrainResult) -> str:
        """The all-reduce's median time per step, for the run's last line."""
        if not result.reduce_seconds:
            return ""
        reduce, wait = np.median(result.reduce_seconds), np.median(result.reduce_waits)
        return (
            f"; all-reduce {reduce * 1e3:.2f} ms/step (median) over {self.world} processes, "
            f"waited {wait * 1e3:.2f} ms/step for the slowest"
        )
