"""``ckir run --profile`` and ``ckir generate --profile``: time per phase, per layer and
per kernel kind.

The build is emitted again with ``emit-c{profile=true}`` into a copy beside it
(``BUILD-profile``, sharing its weights): every kernel call of that library adds
its wall time to a timer of its own (nothing is timed in an ordinary build).
After the run, the timers are summed by the phase of each call (its
``#lowered.phase``: prologue, layer i, epilogue; a backward program's gradient
phases separately), by layer and by op kind, for every mode that ran.
"""

from __future__ import annotations

import ctypes
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ckir.backend.c_emitter import ProfiledCall

_LAYER = re.compile(r"layer (\d+)")


def profiling_build(build: Path) -> tuple[Path, list[ProfiledCall]]:
    """A profiling copy of ``build`` (``BUILD-profile``, replaced if it exists) and its
    timed calls, in timer order."""
    from ckir.tools.bench_build import build_profile_copy

    out = build.with_name(build.name + "-profile")
    return out, build_profile_copy(build, out)


def read_timers(model: Any) -> tuple[list[float], list[int]]:
    """Seconds and counts of every timed call of a loaded profiling build."""
    lib = model._lib
    lib.ckir_profile_n.restype = ctypes.c_longlong
    lib.ckir_profile_times.restype = ctypes.POINTER(ctypes.c_double)
    lib.ckir_profile_counts.restype = ctypes.POINTER(ctypes.c_longlong)
    n = int(lib.ckir_profile_n())
    t, c = lib.ckir_profile_times(), lib.ckir_profile_counts()
    return [float(t[i]) for i in range(n)], [int(c[i]) for i in range(n)]


def _column(call: ProfiledCall) -> str:
    return call.mode + (" grad" if call.phase.endswith("(grad)") else "")


def _phase_group(phase: str) -> str:
    """``layer 3`` -> ``layers``; the rest as they are (without `` (grad)``)."""
    base = phase.removesuffix(" (grad)")
    return "layers" if _LAYER.fullmatch(base) else base


def _table(
    title: str, rows: list[str], cols: list[str], cell: dict[tuple[str, str], float]
) -> list[str]:
    width = max([len(title), *(len(r) for r in rows)])
    lines = [f"{title:<{width}}" + "".join(f"  {c:>12}" for c in cols)]
    for r in rows:
        values = (cell.get((r, c)) for c in cols)
        text = "".join(f"  {'-':>12}" if v is None else f"  {v * 1e3:>12.3f}" for v in values)
        lines.append(f"{r:<{width}}{text}")
    return lines


def report(calls: Sequence[ProfiledCall], times: Sequence[float], counts: Sequence[int]) -> str:
    """The three tables (milliseconds summed over the run; one column per mode that ran)."""
    ran = [c for c in calls if counts[c.index] > 0]
    if not ran:
        return "profile: no kernel call ran"
    cols = list(dict.fromkeys(_column(c) for c in ran))
    total = {col: sum(times[c.index] for c in ran if _column(c) == col) for col in cols}
    steps = {col: max(counts[c.index] for c in ran if _column(c) == col) for col in cols}
    phase: dict[tuple[str, str], float] = {}
    layer: dict[tuple[str, str], float] = {}
    kind: dict[tuple[str, str], float] = {}
    for c in ran:
        col, t = _column(c), times[c.index]
        key = (_phase_group(c.phase), col)
        phase[key] = phase.get(key, 0.0) + t
        m = _LAYER.fullmatch(c.phase.removesuffix(" (grad)"))
        if m:
            key = (m.group(1), col)
            layer[key] = layer.get(key, 0.0) + t
        kind[(c.kind, col)] = kind.get((c.kind, col), 0.0) + t
    for col in cols:
        phase[("total", col)] = total[col]
    phase_rows = [p for p in ("prologue", "layers", "epilogue") if any(k[0] == p for k in phase)]
    layer_rows = sorted({k[0] for k in layer}, key=int)
    kind_rows = sorted(
        {k[0] for k in kind}, key=lambda k: -sum(kind.get((k, c), 0.0) for c in cols)
    )
    runs = ", ".join(f"{col} {steps[col]}x" for col in cols)
    out = [f"profile: kernel time in ms, summed over the run ({runs}; calls timed one by one)"]
    out += _table("phase", [*phase_rows, "total"], cols, phase)
    if layer_rows:
        out += ["", *_table("layer", layer_rows, cols, layer)]
    out += ["", *_table("kernel kind", kind_rows, cols, kind)]
    return "\n".join(out)
