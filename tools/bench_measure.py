"""``ckir bench``'s measurement loop: start the systems' workers, warm them up, run
alternating rounds with a machine probe around every run, restart a worker that dies on
its fallback, check the baselines' logits against ckir's, and the C driver runs (peak
RSS, per-kernel profile); also the environment lines (source, CPU and ISA).  Part of
:mod:`ckir.tools.bench`."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import statistics
import subprocess
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from ckir import __version__
from ckir.errors import CkirError
from ckir.resources import source_root
from ckir.tools.bench_build import _log, build_profile_copy
from ckir.tools.bench_report import Report
from ckir.tools.bench_runners import BaselineUnavailable
from ckir.tools.bench_workers import System, Worker, WorkerDied
from ckir.vocab import BLOCK_DTYPES, INFERENCE_MODES, PANEL_VALUES


def source_info() -> str:
    """Which ckir is measured: a clean export's COMMIT file, git HEAD (+ dirty files), or
    the installed version."""
    root = source_root()
    if root is None:
        return f"installed ckir {__version__}"
    if (root / "COMMIT").exists():
        return f"commit {(root / 'COMMIT').read_text().strip()} (clean export)"
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short=12", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "status", "--porcelain", "--", "ckir", "runtime", "passes"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.splitlines()
    except (OSError, subprocess.CalledProcessError):
        return "not a git checkout"
    if dirty:
        return f"git {head} + {len(dirty)} uncommitted file(s) in ckir/, runtime/, passes/"
    return f"git {head}"


#: the /proc/cpuinfo flags that decide which kernels a system can run, in report order
ISA_FLAGS: tuple[str, ...] = (
    "avx2",
    "fma",
    "f16c",
    "avx512f",
    "avx512bw",
    "avx512vl",
    "avx512_vnni",
    "avx512_bf16",
    "avx512_fp16",
    "avx_vnni",
    "amx_tile",
    "amx_bf16",
    "amx_int8",
)


def cpu_info() -> str:
    """``<model name>, <n> CPUs; ISA: <the flags of ISA_FLAGS this CPU has>``: the machine
    kind (AMD EPYC AVX2, Intel Xeon AVX-512 with or without BF16/AMX) in one line."""
    name, flags = "unknown CPU", set[str]()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and name == "unknown CPU":
                name = value.strip()
            elif key.strip() == "flags" and not flags:
                flags = set(value.split())
    isa = " ".join(f for f in ISA_FLAGS if f in flags) or "unknown"
    return f"{name}, {os.cpu_count()} CPUs; ISA: {isa}"


def _tokens(n: int, vocab: int, seed: int) -> list[int]:
    import numpy as np

    return [int(t) for t in np.random.default_rng(seed).integers(0, vocab, size=n)]


@contextlib.contextmanager
def _workers(systems: list[System]) -> Iterator[None]:
    try:
        yield
    finally:
        for s in systems:
            if s.worker is not None:
                s.worker.close()


def start_workers(
    specs: list[tuple[System, dict[str, Any]]], args: argparse.Namespace, report: Report
) -> list[System]:
    """Start a worker per system (in order); the systems whose worker started.  A ckir
    worker that fails is an error; a baseline that fails is skipped with a note."""
    systems: list[System] = []
    for s, spec in specs:
        _log(f"starting {s.label} ...")
        try:
            start_system(s, spec, args.threads, args.timeout)
        except BaselineUnavailable as exc:
            if s.name == "ckir":
                raise CkirError(str(exc)) from None
            report.notes.append(f"{s.label}: skipped: {str(exc).removeprefix(s.label + ': ')}")
            continue
        assert s.worker is not None
        if s.name != "ckir":
            report.env[s.name] = str(s.worker.info.get("version", ""))
            if s.name == "torch":
                report.env["torch attention"] = str(s.worker.info.get("attn", ""))
        systems.append(s)
    set_isa_env(report.env, systems)
    return systems


def set_isa_env(env: dict[str, str], systems: list[System]) -> None:
    """The ISA each system ran with, in ``env`` where its ISA entries were: ``<name> ISA``,
    or ``<name> <dtype> ISA`` each where the systems of a name ran different paths (one
    restarted with its fallback).  A system dropped without runs has none."""
    by_name: dict[str, dict[str, str]] = {}
    for s in systems:
        ran = s.dead is None or any(s.seconds.values())
        isa = s.worker.info.get("isa") if s.worker is not None and ran else None
        if isa:
            by_name.setdefault(s.name, {})[s.label] = str(isa)
    new: dict[str, str] = {}
    for name, isas in by_name.items():
        if len(set(isas.values())) == 1:
            new[f"{name} ISA"] = next(iter(isas.values()))
        else:
            new.update({f"{label} ISA": isa for label, isa in isas.items()})
    out: dict[str, str] = {}
    for key, value in env.items():
        if key.endswith(" ISA"):
            out |= new
            new = {}
        else:
            out[key] = value
    env.clear()
    env.update(out | new)


def start_system(s: System, spec: dict[str, Any], threads: int, timeout: float) -> None:
    """``s.worker``: a worker of ``spec``; one that dies while starting is started again
    with ``s.fallback``.  :class:`BaselineUnavailable` when no worker runs."""
    s.spec = spec
    try:
        s.worker = Worker(s.label, spec, threads, timeout)
    except WorkerDied as exc:
        if s.fallback is None:
            raise
        _fall_back(s, exc, "while starting", threads, timeout)


def call_with_fallback(s: System, **msg: Any) -> dict[str, Any]:
    """``s.worker.call(**msg)``.  When the worker dies and ``s`` has a fallback not yet
    taken: restart it with the fallback (its runs so far discarded, its warm-up replayed)
    and send ``msg`` again.  :class:`BaselineUnavailable` when the call fails; when the
    fallback fails too, ``s.dead`` names both failures and ``s`` keeps no runs."""
    assert s.worker is not None
    try:
        return s.worker.call(**msg)
    except WorkerDied as exc:
        if s.fallback is None:
            raise
        when = f"while running ({msg.get('op')})"
        if s.first_failure is not None:
            raise _drop(s, f"died too ({exc.cause}) {when}") from None
        _fall_back(s, exc, when, s.worker.threads, s.worker.timeout)
    return call_with_fallback(s, **msg)


def _fall_back(s: System, died: WorkerDied, when: str, threads: int, timeout: float) -> None:
    fb = s.fallback
    assert fb is not None and s.first_failure is None
    if s.worker is not None:
        s.worker.close()
        s.worker = None
    s.first_failure = f"the worker died ({died.cause}) {fb.path} {when}"
    s.discarded_runs = s.discard_runs()
    _log(f"{s.label}: {s.first_failure}; starting it again with {fb.instead} ...")
    try:
        s.worker = Worker(s.label, {**s.spec, **fb.spec}, threads, timeout)
    except BaselineUnavailable as exc:
        if isinstance(exc, WorkerDied):
            again = f"died too ({exc.cause})"
        else:
            again = f"failed ({str(exc).removeprefix(s.label + ': ')})"
        raise _drop(s, f"{again} while starting") from None
    for warm in s.warmup:
        call_with_fallback(s, **warm)


def _drop(s: System, second: str) -> BaselineUnavailable:
    """The fallback failed too: ``s`` is dead and keeps no runs (its row is dropped)."""
    assert s.fallback is not None
    s.dead = f"{s.first_failure}; with {s.fallback.instead} it {second}; no runs reported"
    s.discard_runs()
    return BaselineUnavailable(f"{s.label}: {s.dead}")


def system_notes(systems: Sequence[System]) -> list[str]:
    """A note per system that stopped, and per system measured on its fallback path."""
    out = []
    for s in systems:
        if s.dead is not None:
            out.append(f"{s.label}: stopped: {s.dead}")
        elif s.first_failure is not None and s.fallback is not None:
            note = f"{s.label}: {s.first_failure}; measured again with {s.fallback.instead}"
            if s.discarded_runs:
                note += (
                    f" (the {s.discarded_runs} run(s) measured before the restart were "
                    "discarded: this system has fewer rounds)"
                )
            out.append(note)
    return out


#: weight dtypes whose prefill runs int8 dot products (ckir's block panel GEMMs on any
#: AVX2 or AVX-512 CPU; llama.cpp's quantized matmuls): their prefill bound is the peak
#: of the int8 product instruction (vpdpbusd with VNNI, else vpmaddubsw).  The block
#: formats with a panel dtype: q8_0, q4_0, q4_1
INT8_DOT_DTYPES = frozenset(PANEL_VALUES[p] for p in PANEL_VALUES if p in BLOCK_DTYPES)


def fma_probe(threads: int, kind: str = "fp32") -> float:
    """The fp32 FMA peak (GFLOP/s) right now, or with ``kind`` "bf16" the vdpbf16ps peak
    (AVX512-BF16 CPUs), "int8" the int8 dot peak (vpdpbusd, or vpmaddubsw without VNNI;
    G ops/s), "amx_bf16" / "amx_int8" the AMX tiles' tdpbf16ps / tdpbssd peak: median of
    three probes."""
    from ckir.tools import bandwidth

    if kind in ("amx_bf16", "amx_int8"):
        peaks = bandwidth.amx_peak(threads, 3, iters=100_000, int8=kind == "amx_int8")
        return statistics.median(peaks)
    peak = {
        "fp32": bandwidth.fma_peak,
        "bf16": bandwidth.bf16_dot_peak,
        "int8": bandwidth.int8_dot_peak,
    }[kind]
    return statistics.median(peak(threads, 3, iters=4_000_000))


def alternate_rounds(
    systems: list[System],
    modes: Sequence[str],
    repeat: int,
    run_one: Callable[[System, str, int], float | None],
    machine: Callable[[str, str], float],
    before_round: Callable[[int], None] | None = None,
) -> None:
    """``repeat`` rounds; in each, every live system runs each mode once, in alternating
    order (reversed on odd rounds), every run bracketed by ``machine(mode, dtype)``.  A run's
    seconds go to ``s.seconds[mode]``, the mean of its two probes to ``s.probes[mode]``,
    its round to ``s.rounds[mode]``; ``run_one(system, mode, round)`` returns None when
    a baseline died (``s.dead``).  A worker restarted with its fallback inside a run
    (``call_with_fallback``: the system's runs so far discarded) runs that run again
    between fresh probes; the other systems' runs are untouched."""
    for s in systems:
        s.probes = {m: [] for m in s.modes}
        s.rounds = {m: [] for m in s.modes}
    for r in range(repeat):
        if before_round is not None:
            before_round(r)
        for mode in modes:
            order = systems if r % 2 == 0 else systems[::-1]
            for s in order:
                if mode in s.modes and s.dead is None:
                    restarted = s.first_failure is not None
                    before = machine(mode, s.dtype)
                    t = run_one(s, mode, r)
                    if t is not None and not restarted and s.first_failure is not None:
                        before = machine(mode, s.dtype)
                        t = run_one(s, mode, r)
                    after = machine(mode, s.dtype)
                    if t is not None:
                        s.seconds[mode].append(t)
                        s.probes[mode].append((before + after) / 2)
                        s.rounds[mode].append(r)
        _log(f"round {r + 1}/{repeat} done")


def guarded_call(s: System, **msg: Any) -> dict[str, Any] | None:
    """``call_with_fallback(s, **msg)``; when the worker fails: a CkirError for ckir, for
    a baseline None with ``s.dead`` set (it runs no more)."""
    try:
        return call_with_fallback(s, **msg)
    except BaselineUnavailable as exc:
        if s.name == "ckir":
            raise CkirError(str(exc)) from None
        if s.dead is None:
            s.dead = str(exc).removeprefix(s.label + ": ")
        return None


def _request(mode: str, prompt: list[int], context: list[int], steps: list[int]) -> dict[str, Any]:
    if mode == "prefill":
        return {"op": "prefill", "tokens": prompt}
    return {"op": "decode", "context": context, "tokens": steps}


def warm_up(systems: list[System], prompt: list[int], context: list[int], steps: list[int]) -> None:
    """Every system runs every mode once (pages in the weights): a prefill (or its first
    mode), a decode.  The same requests (``s.warmup``) warm up a worker restarted later."""
    for s in systems:
        modes = ["prefill" if "prefill" in s.modes else s.modes[0]]
        if "decode" in s.modes:
            modes.append("decode")
        s.warmup = [_request(m, prompt, context, steps) for m in modes]
        for msg in s.warmup:
            if s.dead is None:
                guarded_call(s, **msg)
        s.seconds = {m: [] for m in s.modes}


def _run_one(
    s: System, mode: str, prompt: list[int], context: list[int], steps: list[int]
) -> float | None:
    got = guarded_call(s, **_request(mode, prompt, context, steps))
    return None if got is None else float(got["s"])


def _agreement(systems: list[System], prompt: list[int], vocab: int, notes: list[str]) -> None:
    """Compare last-row logits of every baseline with ckir at the same dtype (sanity)."""
    stride = max(1, vocab // 512)
    ref: dict[str, list[float]] = {}
    for s in systems:
        if s.dead is not None:
            continue
        try:
            values = call_with_fallback(s, op="sample", tokens=prompt, stride=stride)["values"]
        except BaselineUnavailable as exc:
            notes.append(f"{s.label}: logits check failed: {exc}")
            continue
        if s.name == "ckir":
            ref[s.dtype] = values
        elif s.dtype in ref:
            r = ref[s.dtype]
            diff = max(abs(a - b) for a, b in zip(r, values, strict=True))
            scale = max(abs(a) for a in r) or 1.0
            notes.append(
                f"logits check {s.label} vs ckir {s.dtype}: max |diff| / max |logit| = "
                f"{diff / scale:.1e} over {len(r)} entries of the last prefill row"
            )


def _peak_rss(build: Path, args: argparse.Namespace, vocab: int) -> dict[str, float]:
    return run_rss_driver(build, args.threads, args.context, args.decode_tokens, vocab)


def run_rss_driver(
    build: Path, threads: int, tokens: int, steps: int, vocab: int, *, train: bool = False
) -> dict[str, float]:
    """The C driver's measurements (runtime/bench/rss_run.c): a prefill of ``tokens`` and
    ``steps`` decode steps, or with ``train`` ``steps`` training steps of ``tokens`` tokens;
    ``{"error": 1.0}`` when it fails."""
    from ckir.tools import bandwidth

    cmd = [
        str(bandwidth.rss_driver()),
        *(["--train"] if train else []),
        str((build / "libmodel.so").resolve()),
        str(build / "weights.bin"),
        str(threads),
        str(tokens),
        str(steps),
        str(vocab),
    ]
    env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        _log(f"rss driver failed: {proc.stderr.strip()[-300:]}")
        return {"error": 1.0}
    return {k: float(v) for k, v in json.loads(proc.stdout).items()}


def _profile(
    build: Path, args: argparse.Namespace, prompt: list[int], context: list[int], steps: list[int]
) -> dict[str, Any]:
    from ckir.tools import bandwidth

    prof_dir = build.with_name(build.name + "-profile")
    _log(f"profile: instrumented build {prof_dir}")
    calls = build_profile_copy(build, prof_dir)
    spec = {"kind": "ckir", "build": str(prof_dir), "threads": args.threads}
    w = Worker("ckir profile", spec, args.threads, args.timeout)
    out: dict[str, Any] = {"calls": [dataclasses.asdict(c) for c in calls]}
    try:
        w.call(op="prefill", tokens=prompt)
        w.call(op="decode", context=context, tokens=steps)
        modes = [m for m in INFERENCE_MODES if m in args.modes]
        with bandwidth.ReadProbe(args.probe_mib) as probe:
            for mode in modes:
                walls, probes = [], []
                w.call(op="prof_reset")
                for _ in range(args.repeat):
                    probes.append(statistics.median(probe.measure(args.threads, 3)))
                    if mode == "prefill":
                        walls.append(w.call(op="prefill", tokens=prompt)["s"])
                    else:
                        # the context prefill runs too: its calls are counted under "prefill"
                        walls.append(w.call(op="decode", context=context, tokens=steps)["s"])
                    probes.append(statistics.median(probe.measure(args.threads, 3)))
                got = w.call(op="prof_get")
                out[mode] = {
                    "wall": walls,
                    "times": got["times"],
                    "counts": got["counts"],
                    "bandwidth": probes,
                }
    finally:
        w.close()
    return out
