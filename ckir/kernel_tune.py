"""``ckir kernel tune``: search the schedule hints of each kernel for given shapes.

::

    ckir kernel tune mm.mlir --shape-set A=256x256,B=256x256 [--trials 50] [-o records.jsonl]
    ckir kernel tune --merge a.jsonl b.jsonl -o c.jsonl

The search space is read from the dialect (``ckir.dialects.kernel``): every field
of ``#kernel.schedule`` that some compute op of the func accepts
(``SCHEDULE_APPLIES``); an integer field takes the values of :data:`INT_LADDER`
that the dialect's ``field_problem`` accepts and the C generator does not refuse
for this build (e.g. ``vectorize`` wider than the build's vectors); tiles stop at
the next power of two above the largest size; ``order`` takes ``LOOP_ORDERS``.

The search (:func:`tune_func`), within ``--trials`` candidates per func and shape:

1. the incumbent starts as the schedule written in the IR, its unset fields
   filled with the C generator's defaults (``kernel_c.DEFAULTS``);
2. **coordinate descent**: for each field in turn, the neighbours of the
   incumbent's value (one and two steps along the field's values; every other
   loop order) are compiled into one library, each is run once against NumPy
   (a wrong result is rejected, never timed) and timed *paired* with the
   incumbent: ``--rounds`` alternating batches of each (which goes first
   alternates), the median of the per-round time ratios decides; a candidate
   at least 3 % faster replaces the incumbent;
3. when a whole sweep brings nothing, a small **evolutionary** step: batches of
   mutants of the incumbent (one to three fields set to random values of their
   ranges, none tried before), judged the same way; an improvement starts a new
   sweep.

The best schedule's GFLOP/s (the median of its batches) and the starting
schedule's, measured in the same run, go into a tuning record
(:mod:`ckir.kernel_records`), merged into ``-o FILE`` when given.
"""

from __future__ import annotations

import argparse
import ctypes
import math
import random
import statistics
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from xdsl.dialects.builtin import ModuleOp

from ckir import kernel_tools as kt
from ckir.backend import kernel_c
from ckir.backend.kernel_c import KernelCodegenError
from ckir.dialects import kernel as k
from ckir.dialects.dims import evaluate_dim
from ckir.errors import CkirError
from ckir.kernel_cache import KernelCache, kernel_cache_options
from ckir.kernel_records import (
    Machine,
    Record,
    func_key,
    merge_records,
    read_records,
    schedule_text,
    shape_bucket,
    write_records,
)
from ckir.runtime_build import ISAS, isa_vector_width

__all__ = ["INT_LADDER", "register_tune", "schedule_space", "tune_func", "tune_module", "work"]

#: the values an integer hint is searched over (those the dialect accepts)
INT_LADDER: tuple[int, ...] = (
    1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 1024, 2048, 4096,
)  # fmt: skip
#: the values of the string hints
STRING_CHOICES: dict[str, tuple[str, ...]] = {"order": k.LOOP_ORDERS}
#: a candidate must be at least this much faster (median time ratio) to be kept
ACCEPT_RATIO = 0.97
#: the default trial budget per func and shape set
DEFAULT_TRIALS = 50

Values = dict[str, int | str]
#: ``batch(n)``: n calls of a compiled kernel, returning the seconds they took
Call = Callable[[int], float]


def work(func: k.FuncOp, symbols: dict[str, int]) -> int:
    """What a GFLOP/s figure counts: 2·M·N·K per matmul-like op, or for a func without
    one (a relu) its output elements (G elements/s)."""
    flops = kt.func_flops(func, symbols)
    if flops:
        return flops
    out = func.output()
    assert out is not None
    return sum(
        math.prod(evaluate_dim(d, symbols) for d in v.type.dims)  # type: ignore[attr-defined]
        for v in out.values
    )


def _is_string_field(field: str) -> bool:
    return "StringAttr" in str(k.ScheduleAttr.__annotations__.get(field, ""))


def _applicable(func: k.FuncOp) -> list[str]:
    ops = [op for op in func.body_block.ops if isinstance(op, k.KernelComputeOp)]
    return [f for f in k.SCHEDULE_FIELDS if any(f in op.SCHEDULE_APPLIES for op in ops)]


def schedule_space(func: k.FuncOp, isa: str, sizes: Iterable[int]) -> dict[str, list[int | str]]:
    """The values each applicable hint of ``func`` is searched over (module docstring);
    ``sizes`` are the dims of the shapes tuned for (tiles stop above the largest)."""
    largest = 1 << max(max(sizes, default=1) - 1, 0).bit_length()
    space: dict[str, list[int | str]] = {}
    for field in _applicable(func):
        if _is_string_field(field):
            if field in STRING_CHOICES:
                space[field] = list(STRING_CHOICES[field])
            continue
        values: list[int | str] = []
        for v in INT_LADDER:
            if k.field_problem(field, v) is not None or (field.startswith("tile_") and v > largest):
                continue
            try:  # the generator refuses some valid hints on this build (vectorize > CKV_W)
                kt.generate(kt.with_schedule(ModuleOp([func.clone()]), {field: v}, ""), isa)
            except KernelCodegenError:
                continue
            values.append(v)
        if values:
            space[field] = values
    return space


def starting_schedule(func: k.FuncOp, isa: str, space: dict[str, list[int | str]]) -> Values:
    """The IR's schedule (first compute op) over the C generator's defaults."""
    ops = [op for op in func.body_block.ops if isinstance(op, k.KernelComputeOp)]
    kind = "relu" if all(isinstance(op, k.ReluOp) for op in ops) else "matmul"
    values: Values = {}
    for f, v in kernel_c.DEFAULTS[kind].items():
        if f in space:
            values[f] = isa_vector_width(isa) if v is None else v
    for op in ops[:1]:
        values.update({f: v for f, v in op.schedule_values().items() if f in space})
    return values


def _neighbours(values: Values, field: str, choices: list[int | str]) -> list[Values]:
    current = values.get(field)
    if isinstance(current, str) or _is_string_field(field):
        return [{**values, field: c} for c in choices if c != current]
    nums = [int(c) for c in choices]
    cur = int(current) if current is not None else nums[0]
    i = min(range(len(nums)), key=lambda j: (abs(nums[j] - cur), j))
    picks = [nums[j] for j in (i - 1, i + 1, i - 2, i + 2) if 0 <= j < len(nums)]
    if nums[i] != cur:
        picks.insert(0, nums[i])
    return [{**values, field: p} for p in picks]


def _key(values: Values) -> str:
    return schedule_text(values)


@dataclass
class TuneResult:
    """The outcome of tuning one func on one shape set."""

    func: str
    shape_set: str
    start: Values
    best: Values
    gflops: float
    start_gflops: float
    seconds: float  # the best schedule's median seconds per call
    trials: int
    rejected: int


class _Tuner:
    def __init__(
        self, func: k.FuncOp, shape_set: str, *, isa: str, cache: KernelCache, trials: int,
        rounds: int, seed: int, tol: float, where: str, log: Callable[[str], None],
        min_seconds: float,
    ) -> None:  # fmt: skip
        self.func, self.shape_set, self.isa, self.cache = func, shape_set, isa, cache
        self.budget, self.rounds, self.tol, self.where, self.log = trials, rounds, tol, where, log
        self.rng = random.Random(seed)
        self.symbols = kt.bind_shapes(func, kt.parse_shape_set(shape_set), shape_set)
        self.inputs = kt.random_inputs(func, self.symbols, seed)
        self.want = kt.reference(func, self.inputs)
        self.flops = work(func, self.symbols)
        sizes = [d for dims in kt.parse_shape_set(shape_set).values() for d in dims]
        self.space = schedule_space(func, isa, sizes)
        self.seen: set[str] = set()
        self.trials = 0
        self.rejected = 0
        self.min_seconds = min_seconds
        self._libs: list[ctypes.CDLL] = []  # kept loaded while their functions are timed

    def compile(self, candidates: list[Values]) -> list[Call]:
        """One library for the candidates; each checked against NumPy (None: wrong)."""
        module = ModuleOp([])
        for i, values in enumerate(candidates):
            for f in kt.funcs(kt.with_schedule(ModuleOp([self.func.clone()]), values, f"_c{i}")):
                module.body.block.add_op(f.clone())
        built = self.cache.build(module, isa=self.isa, where=self.where)
        lib = ctypes.CDLL(str(built.library))
        self._libs.append(lib)
        out = []
        for variant in kt.funcs(module):
            got = kt.run(lib, variant, self.inputs, self.symbols)
            err = max(kt.relative_error(g, w) for g, w in zip(got, self.want, strict=True))
            if not err <= self.tol:
                out.append(None)
                self.log(f"  {variant.func_name}: WRONG (rel err {err:.1e}), rejected")
                continue
            out.append(kt.bound_call(lib, variant, self.inputs, self.symbols))
        return out  # type: ignore[return-value]

    def paired(self, inc: Call, cand: Call, calls: int) -> tuple[float, float, float]:
        """The candidate/incumbent time ratio over interleaved rounds — the larger of the
        median of the per-round ratios and the ratio of the best rounds (both must say
        faster: the host's noise only slows runs down) — and the candidate's and the
        incumbent's median seconds per call."""
        ratios, times, inc_times = [], [], []
        cand(1)
        for r in range(self.rounds):
            if r % 2:
                tc, ti = cand(calls), inc(calls)
            else:
                ti, tc = inc(calls), cand(calls)
            ratios.append(tc / ti)
            times.append(tc / calls)
            inc_times.append(ti / calls)
            if r >= 2 and statistics.median(ratios) > 1.5:  # clearly slower: stop early
                break
        ratio = max(statistics.median(ratios), min(times) / min(inc_times))
        return ratio, statistics.median(times), statistics.median(inc_times)

    def compare(
        self, inc_values: Values, inc: Call, values: Values, call: Call, calls: int
    ) -> tuple[float, float]:
        """A candidate's time over the incumbent's (:meth:`paired`) and its seconds per call."""
        ratio, secs, _ = self.paired(inc, call, calls)
        return ratio, secs

    def try_batch(
        self, inc_values: Values, inc: Call, candidates: list[Values], calls: int
    ) -> tuple[Values, Call] | None:
        candidates = [c for c in candidates if _key(c) not in self.seen]
        candidates = candidates[: self.budget - self.trials]
        if not candidates:
            return None
        for c in candidates:
            self.seen.add(_key(c))
        self.trials += len(candidates)
        best: tuple[float, Values, Call] | None = None
        for values, call in zip(candidates, self.compile(candidates), strict=True):
            if call is None:
                self.rejected += 1
                continue
            ratio, secs = self.compare(inc_values, inc, values, call, calls)
            verdict = ""
            if ratio < ACCEPT_RATIO and (best is None or ratio < best[0]):
                best, verdict = (ratio, values, call), "  (best of batch)"
            self.log(
                f"  {_key(values)}: {ratio:.3f}x the incumbent's time, "
                f"{self.flops / secs / 1e9:.2f} GFLOP/s{verdict}"
            )
        return None if best is None else (best[1], best[2])

    def mutants(self, values: Values, n: int) -> list[Values]:
        fields = list(self.space)
        out: list[Values] = []
        for _ in range(n * 20):
            if len(out) >= n or not fields:
                break
            m = dict(values)
            for f in self.rng.sample(fields, self.rng.randint(1, min(3, len(fields)))):
                m[f] = self.rng.choice(self.space[f])
            if _key(m) not in self.seen and all(_key(m) != _key(o) for o in out):
                out.append(m)
        return out

    def run(self) -> TuneResult:
        start = starting_schedule(self.func, self.isa, self.space)
        self.seen.add(_key(start))
        [start_call] = self.compile([start])
        if start_call is None:
            raise CkirError(
                f"{self.where}: kernel.func @{self.func.func_name}: the starting schedule "
                f"gives wrong results on {self.shape_set}"
            )
        start_call(1)
        calls = kt.calls_per_batch(start_call, self.min_seconds)
        inc_values, inc = start, start_call
        self.log(f"@{self.func.func_name} {self.shape_set}: start {_key(start)}")
        while self.trials < self.budget:
            improved = False
            for field in self.space:  # coordinate descent: one sweep over the fields
                if self.trials >= self.budget:
                    break
                cands = _neighbours(inc_values, field, self.space[field])
                found = self.try_batch(inc_values, inc, cands, calls)
                if found:
                    inc_values, inc = found
                    improved = True
                    self.log(f" incumbent: {_key(inc_values)}")
            while not improved and self.trials < self.budget:  # evolutionary step
                cands = self.mutants(inc_values, 4)
                if not cands:
                    break
                found = self.try_batch(inc_values, inc, cands, calls)
                if found:
                    inc_values, inc = found
                    improved = True
                    self.log(f" incumbent: {_key(inc_values)}")
            if not improved:
                break  # the space is exhausted
        if inc is not start_call:  # confirm against the start with twice the rounds
            self.rounds *= 2
            ratio, _ = self.compare(start, start_call, inc_values, inc, calls)
            if ratio >= 1.0:
                self.log(f" {_key(inc_values)} is not faster than the start: keeping the start")
                inc_values, inc = start, start_call
        _, best_secs, start_secs = self.paired(start_call, inc, calls)  # in one run
        return TuneResult(
            func=self.func.func_name,
            shape_set=self.shape_set,
            start=start,
            best=inc_values,
            gflops=self.flops / best_secs / 1e9,
            start_gflops=self.flops / start_secs / 1e9,
            seconds=best_secs,
            trials=self.trials,
            rejected=self.rejected,
        )


def tune_func(func: k.FuncOp, shape_set: str, **options: object) -> TuneResult:
    """Tune one func on one shape set (options as :class:`_Tuner` takes them)."""
    return _Tuner(func, shape_set, **options).run()  # type: ignore[arg-type]


def tune_module(
    module: ModuleOp, shape_sets: Sequence[str], *, isa: str, cache: KernelCache,
    trials: int = DEFAULT_TRIALS, rounds: int = 7, seed: int = 0, tol: float = 1e-4,
    where: str = "", log: Callable[[str], None] = lambda line: None, min_seconds: float = 0.02,
) -> list[Record]:  # fmt: skip
    """Tune every func of ``module`` on every shape set; one record each."""
    if trials < 1:
        raise CkirError(f"--trials must be >= 1, got {trials}")
    for func in kt.funcs(module):  # shape errors before any compile
        for text in shape_sets:
            kt.bind_shapes(func, kt.parse_shape_set(text), text)
    machine = Machine(isa)
    records: list[Record] = []
    for func in kt.funcs(module):
        for text in shape_sets:
            result = tune_func(
                func, text, isa=isa, cache=cache, trials=trials, rounds=rounds, seed=seed,
                tol=tol, where=where, log=log, min_seconds=min_seconds,
            )  # fmt: skip
            symbols = kt.bind_shapes(func, kt.parse_shape_set(text), text)
            records.append(
                machine.record(
                    key=func_key(func),
                    bucket=shape_bucket(symbols),
                    func=func.func_name,
                    shape_set=text,
                    schedule=result.best,
                    gflops=round(result.gflops, 3),
                    baseline_gflops=round(result.start_gflops, 3),
                    ms=round(result.seconds * 1e3, 4),
                    trials=result.trials,
                )
            )
    return records


# --------------------------------------------------------------------------- CLI


def register_tune(ksub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``ckir kernel tune``."""
    s = ksub.add_parser("tune", help="search schedules per shape; record the best (JSON lines)")
    s.add_argument("file", type=Path, nargs="?", help="kernel IR (.mlir or IR JSON)")
    s.add_argument("--shape-set", action="append", metavar="A=64x128,B=128x64")
    s.add_argument("--trials", type=int, default=DEFAULT_TRIALS, help="candidates per shape")
    s.add_argument("--rounds", type=int, default=7, help="paired timing rounds per candidate")
    s.add_argument("--seed", type=int, default=0, help="inputs' and search's seed")
    s.add_argument("--tol", type=float, default=1e-4, help="max relative error vs NumPy")
    s.add_argument("--isa", choices=ISAS, default="native", help="vector ISA of the build")
    s.add_argument("--no-fuse", action="store_true", help="do not fuse matmul + relu")
    s.add_argument("-o", "--records", type=Path, help="tuning-records file to merge into")
    s.add_argument("--merge", type=Path, nargs="+", metavar="FILE", help="merge records files")
    s.add_argument("-q", "--quiet", action="store_true", help="no per-candidate lines on stderr")
    kernel_cache_options(s)
    s.set_defaults(func=cmd_tune)


def cmd_tune(args: argparse.Namespace) -> int:
    if args.merge:
        if args.file is not None or args.records is None:
            raise CkirError("tune --merge A.jsonl B.jsonl ... -o OUT.jsonl (no IR file)")
        merged = merge_records(r for path in args.merge for r in read_records(path))
        write_records(args.records, merged)
        print(f"{len(merged)} records -> {args.records}")
        return 0
    if args.file is None or not args.shape_set:
        raise CkirError("tune FILE --shape-set A=...,B=... [...]: give the IR file and a shape")
    module = kt.load_kernels(args.file, fuse=not args.no_fuse)
    for note in kt.generate(module, args.isa, str(args.file)).notes:
        print(f"note: {note}", file=sys.stderr)
    old = read_records(args.records) if args.records and args.records.exists() else []

    def log(line: str) -> None:
        if not args.quiet:
            print(line, file=sys.stderr, flush=True)

    with KernelCache.open(args.cache_dir, disabled=args.no_cache) as cache:
        records = tune_module(
            module, args.shape_set, isa=args.isa, cache=cache, trials=args.trials,
            rounds=args.rounds, seed=args.seed, tol=args.tol, where=str(args.file), log=log,
        )  # fmt: skip
    for r in records:
        speedup = r["gflops"] / r["baseline_gflops"] if r["baseline_gflops"] else float("nan")
        print(
            f"@{r['func']}  {r['shape_set']}  best {schedule_text(r['schedule'])}  "
            f"{r['gflops']:.2f} GFLOP/s (start {r['baseline_gflops']:.2f}, {speedup:.2f}x) "
            f"after {r['trials']} trials"
        )
    if args.records:
        write_records(args.records, merge_records([*old, *records]))
        print(f"records -> {args.records}")
    return 0
