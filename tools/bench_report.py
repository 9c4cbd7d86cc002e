"""``ckir bench``'s report: the statistics of runs (tokens/s, paired ratios, ranges),
the bound of each run (bytes or FLOPs per token from the build's cost model against the
probe around it), the markdown tables (results, rooflines, compile time, peak RSS,
profiles) and the JSON written by ``--json``.  Part of :mod:`ckir.tools.bench`."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ckir import cost
from ckir.cost import ModelCost
from ckir.dialects import lowered as lw
from ckir.tools.bench_build import TRAIN_MODE, CompileTimes, build_module
from ckir.tools.bench_workers import System, paired_rounds
from ckir.vocab import INFERENCE_MODES


def rates(tokens: int, seconds: Sequence[float]) -> list[float]:
    """Tokens/s of each run."""
    return [tokens / s for s in seconds]


def paired_ratios(ckir_seconds: Sequence[float], other_seconds: Sequence[float]) -> list[float]:
    """Per-round speed ratio ckir / other (same tokens): other_time / ckir_time."""
    return [o / c for c, o in zip(ckir_seconds, other_seconds, strict=True)]


def spread(values: Sequence[float]) -> tuple[float, float, float]:
    """(median, min, max)."""
    return statistics.median(values), min(values), max(values)


def fmt_num(x: float) -> str:
    """3 significant digits, no exponent for the ranges seen here."""
    if x >= 100:
        return f"{x:.0f}"
    if x >= 10:
        return f"{x:.1f}"
    if x >= 1:
        return f"{x:.2f}"
    return f"{x:.3f}"


def fmt_range(values: Sequence[float]) -> str:
    _, lo, hi = spread(values)
    return f"{fmt_num(lo)}–{fmt_num(hi)}"


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


@dataclass
class Report:
    model: str
    args: dict[str, Any]
    costs: dict[str, ModelCost]
    compile: dict[str, CompileTimes]
    systems: list[System]
    bandwidth: list[float]
    fma: list[float]
    bandwidth_4k: list[float]
    notes: list[str]
    rss: dict[str, dict[str, float]]
    profiles: dict[str, dict[str, Any]]
    env: dict[str, str]
    builds: dict[str, Path] = field(default_factory=dict)
    #: the bf16 dot probes bracketing bf16 prefill runs (AVX512-BF16 CPUs only)
    bf16_dot: list[float] = field(default_factory=list)
    #: the instruction those probes time: vdpbf16ps, or tdpbf16ps on AMX tiles
    bf16_insn: str = ""
    #: the int8 dot probes bracketing q8_0 / q4_0 / q4_1 prefill runs (CPUs with AVX2 or VNNI)
    int8_dot: list[float] = field(default_factory=list)
    #: the instruction those probes time (bandwidth.int8_dot_insn, or tdpbssd on AMX)
    int8_insn: str = ""
    #: what a bench variant adds (--modes train: losses, layout totals, worker RSS)
    extra: dict[str, Any] = field(default_factory=dict)


def _tokens_per_run(args: dict[str, Any], mode: str) -> int:
    return int(args["decode_tokens"] if mode == "decode" else args["prompt_tokens"])


def _per_token(report: Report, dtype: str, mode: str) -> float | None:
    """Bytes (decode) or FLOPs (prefill, train) per token of a dtype, from its ckir build."""
    cost = report.costs.get(dtype)
    if cost is None:
        return None
    a = report.args
    if mode == "decode":
        return cost.decode_bytes(a["context"], a["decode_tokens"])
    if mode == TRAIN_MODE:
        return cost.train_flops(a["prompt_tokens"]) / a["prompt_tokens"]
    return cost.prefill_flops(a["prompt_tokens"]) / a["prompt_tokens"]


def _bounds(report: Report, s: System, mode: str) -> list[float]:
    """Per run: the bound tok/s from the probe taken around that run."""
    per_token = _per_token(report, s.dtype, mode)
    if per_token is None:
        return []
    return [p * 1e9 / per_token for p in s.probes.get(mode, [])]


def _fractions(report: Report, s: System, mode: str) -> list[float]:
    """Per run: tok/s / the bound from the probe taken around that run."""
    r = rates(_tokens_per_run(report.args, mode), s.seconds.get(mode, []))
    return [x / b for x, b in zip(r, _bounds(report, s, mode), strict=True)]


def render(report: Report) -> str:
    a = report.args
    out: list[str] = []
    out.append(
        f"# ckir bench {report.model}: threads {a['threads']}, {a['repeat']} rounds; "
        f"prefill {a['prompt_tokens']} tokens from empty; decode {a['decode_tokens']} tokens "
        f"after {a['context']}"
    )
    out.append("")
    out.append(results_table(report, INFERENCE_MODES))
    out.append("")
    out += _render_rooflines(report)
    out += _render_compile(report)
    out += _render_rss(report)
    out += render_tail(report, render_profile)
    return "\n".join(out)


def render_tail(
    report: Report, profile: Callable[[Report, str, dict[str, Any]], list[str]]
) -> list[str]:
    """The end of a report, inference or training alike: each dtype's kernel profile (as
    ``profile`` renders it), the environment and the notes."""
    out: list[str] = []
    for dt, prof in report.profiles.items():
        out += profile(report, dt, prof)
    if report.env:
        out.append("environment: " + "; ".join(f"{k}: {v}" for k, v in report.env.items()))
    out += [f"note: {n}" for n in report.notes]
    return out


def results_table(report: Report, modes: Sequence[str]) -> str:
    """The main table: tok/s per system and mode, the paired ratio ckir / system (median of
    per-round ratios, min–max) and the median fraction of the bound."""
    a = report.args
    rows = []
    ckir = {(s.dtype, m): s for s in report.systems if s.name == "ckir" for m in s.modes}
    for mode in modes:
        for s in report.systems:
            secs = s.seconds.get(mode)
            if not secs:
                continue
            r = rates(_tokens_per_run(a, mode), secs)
            ratio = "—"
            ref = ckir.get((s.dtype, mode))
            pairs = [] if s.name == "ckir" or ref is None else paired_rounds(ref, s, mode)
            if pairs:
                assert ref is not None
                pr = paired_ratios(
                    [ref.seconds[mode][i] for i, _ in pairs], [secs[j] for _, j in pairs]
                )
                ratio = f"{statistics.median(pr):.2f} ({fmt_range(pr)})"
            fr = _fractions(report, s, mode)
            frac = f"{statistics.median(fr):.2f}" if fr else "—"
            rows.append(
                [s.name, s.dtype, mode, fmt_num(statistics.median(r)), fmt_range(r), ratio, frac]
            )
    return markdown_table(
        ["system", "dtype", "mode", "tok/s median", "min–max", "ckir / this", "of bound"], rows
    )


def _roofline_rows(
    report: Report,
    phase: str,
    tokens: int,
    columns: Callable[[ModelCost, float], list[str]],
) -> list[list[str]]:
    """One roofline row per dtype ckir ran ``phase`` in: the dtype, ``columns(cost,
    per_token)`` (what the phase costs), then the probe, the bound, ckir's rate, its
    throughput (per-token cost x rate) and its fraction of the bound."""
    ck = {s.dtype: s for s in report.systems if s.name == "ckir"}
    rows = []
    for dt, c in report.costs.items():
        s = ck.get(dt)
        per_token = _per_token(report, dt, phase)
        if s is None or per_token is None or not s.seconds.get(phase):
            continue
        fr = _fractions(report, s, phase)
        r = rates(tokens, s.seconds[phase])
        rows.append(
            [
                dt,
                *columns(c, per_token),
                fmt_num(statistics.median(s.probes[phase])),
                fmt_num(statistics.median(_bounds(report, s, phase))),
                fmt_num(statistics.median(r)),
                fmt_num(statistics.median(r) * per_token / 1e9),
                f"{statistics.median(fr):.2f} ({fmt_range(fr)})",
            ]
        )
    return rows


def _render_rooflines(report: Report) -> list[str]:
    a = report.args
    out: list[str] = []
    mean_rows = a["context"] + (a["decode_tokens"] + 1) / 2
    if report.bandwidth:
        bw = report.bandwidth
        bw4k = f"{fmt_num(statistics.median(report.bandwidth_4k))}" if report.bandwidth_4k else "—"
        out.append(
            f"Decode roofline. Read bandwidth: C probe ({a['probe_mib']} MiB, huge pages, "
            f"{a['threads']} threads) right before and after every run, median "
            f"{fmt_num(statistics.median(bw))} GB/s over {len(bw)} probes ({fmt_range(bw)}; "
            f"4 KiB pages, once per round: {bw4k} GB/s). Bytes per token = weight matrices + "
            f"LM head + embedding row + KV rows at the mean position {mean_rows:.1f}, in the "
            f"stored dtype. Bound = probe around the run / bytes; fraction = tok/s / bound, "
            f"per run."
        )
        out.append("")
        rows = _roofline_rows(
            report,
            "decode",
            a["decode_tokens"],
            lambda c, per_token: [
                f"{per_token / 1e6:.1f}",
                f"{c.decode_weight_bytes / 1e6:.1f} + "
                f"{c.kv_bytes_per_position * mean_rows / 1e6:.2f}",
            ],
        )
        head = [
            "dtype",
            "MB/token",
            "weights + KV MB",
            "probe GB/s",
            "bound tok/s",
            "ckir tok/s",
            "ckir GB/s",
            "ckir fraction (min–max)",
        ]
        out += [markdown_table(head, rows), ""]
    if report.fma or report.bf16_dot or report.int8_dot:
        fma = report.fma
        peak = (
            f" fp32 FMA peak: C probe ({a['threads']} threads) right before and after every "
            f"run, median {fmt_num(statistics.median(fma))} GFLOP/s over {len(fma)} probes "
            f"({fmt_range(fma)})."
            if fma
            else ""
        )
        out.append(
            f"Prefill roofline.{peak} FLOPs = 2 x matrix params x T + causal attention "
            f"4 x H x D x T(T+1)/2 per layer (every dtype computes in fp32"
            + (")." if not (report.bf16_dot or report.int8_dot) else "; except below).")
        )
        if report.bf16_dot:
            dot = report.bf16_dot
            how = (
                "AMX, and ckir's bf16p GEMMs (M > 32) multiply bf16-rounded x on its tiles "
                "with tdpbf16ps"
                if report.bf16_insn == "tdpbf16ps"
                else "AVX512-BF16, and ckir's bf16 GEMMs (M > 32) multiply bf16-rounded x "
                "with vdpbf16ps"
            )
            insn = report.bf16_insn or "vdpbf16ps"
            out[-1] += (
                f" bf16: this CPU has {how}, as PyTorch's oneDNN does, so the bf16 bound is the "
                f"{insn} peak: a C probe right before and after every bf16 run, median "
                f"{fmt_num(statistics.median(dot))} GFLOP/s over {len(dot)} probes "
                f"({fmt_range(dot)})."
            )
        if report.int8_dot:
            i8 = report.int8_dot
            insn = report.int8_insn or "vpdpbusd"
            out[-1] += (
                " q8_0 / q4_0 / q4_1: ckir's q8_0p / q4_0p / q4_1p GEMMs multiply x quantized "
                f"to int8 per block of 32 ({insn} on this CPU; as decode does, and as llama.cpp's "
                f"quantized matmuls do), so their bound is the {insn} peak (a product and its sum "
                "counted as 2 ops): a C probe right before and after every such run, median "
                f"{fmt_num(statistics.median(i8))} G ops/s over {len(i8)} probes "
                f"({fmt_range(i8)})."
            )
        ckir_isa = [v for k, v in report.env.items() if k.startswith("ckir")]
        if any("emulated AMX tiles" in v for v in ckir_isa):
            out[-1] += (
                " ckir's prefill GEMMs ran on emulated AMX tiles (CKIR_AMX=emulate; its ISA "
                "line): its bf16 / q8_0 / q4_0 / q4_1 rows are no speed of this machine."
            )
        out.append("")
        T = a["prompt_tokens"]
        rows = _roofline_rows(
            report,
            "prefill",
            T,
            lambda c, _per_token: [
                f"{c.prefill_flops(T) / 1e9:.2f}",
                f"{c.prefill_params / 1e6:.1f}",
            ],
        )
        head = [
            "dtype",
            f"GFLOP / {T}-token prefill",
            "matrix params (M)",
            "probe GFLOP/s",
            "bound tok/s",
            "ckir tok/s",
            "ckir GFLOP/s",
            "ckir fraction (min–max)",
        ]
        out += [markdown_table(head, rows), ""]
    return out


def _render_compile(report: Report) -> list[str]:
    rows = []
    for dt, t in report.compile.items():
        st = t.steps
        rows.append(
            [
                dt,
                f"{st.get('import', 0):.2f}",
                f"{st.get('lower + plan', 0):.2f}",
                f"{st.get('emit C', 0):.2f}",
                f"{t.to_c:.2f}",
                f"{st.get('weights.bin', 0):.2f}",
                f"{st.get('cc', 0):.2f}",
                "—" if t.cold_cc is None else f"{t.cold_cc:.2f}",
            ]
        )
    out = [
        "Compile time (s): checkpoint -> C = import + lower/plan + emit C; cc = model.c + link "
        "with cached runtime objects; cold cc = runtime objects compiled too.",
        "",
        markdown_table(
            [
                "dtype",
                "import",
                "lower + plan",
                "emit C",
                "checkpoint -> C",
                "weights.bin",
                "cc",
                "cold cc",
            ],
            rows,
        ),
        "",
    ]
    return out


def _render_rss(report: Report) -> list[str]:
    if not report.rss:
        return []
    a = report.args
    rows = []
    for dt, r in report.rss.items():
        cost = report.costs[dt]
        if "hwm_kb" not in r:
            rows.append([dt, "driver failed", "", "", "", "", ""])
            continue
        hwm = r["hwm_kb"] * 1024
        expected = cost.weights_arena + cost.state_arena
        c_rate = a["decode_tokens"] / r["decode_s"] if r.get("decode_s") else 0.0
        rows.append(
            [
                dt,
                f"{hwm / 1e6:.1f}",
                f"{r['rss_loaded_kb'] * 1024 / 1e6:.1f}",
                f"{cost.weights_arena / 1e6:.1f}",
                f"{cost.kv_cache / 1e6:.2f}",
                f"{(cost.state_arena - cost.kv_cache) / 1e6:.2f}",
                f"{hwm / expected:.3f}",
                fmt_num(c_rate),
            ]
        )
    return [
        f"Peak RSS of a decode run (C driver: prefill {a['context']} + decode "
        f"{a['decode_tokens']}, no Python; VmHWM): against the weights arena + the state arena "
        "(KV cache + activations + io) of layout.json.",
        "",
        markdown_table(
            [
                "dtype",
                "peak RSS MB",
                "before open MB",
                "weights MB",
                "KV MB",
                "other state MB",
                "peak / (weights + state)",
                "driver decode tok/s",
            ],
            rows,
        ),
        "",
    ]


def slot_info(build: Path) -> dict[str, tuple[int, int]]:
    """Weight buffer name -> (bytes, matrix params or 0), from the build's lowered IR."""
    model = cost.lowered_model(build_module(build))
    out = {}
    for op in model.body_block.ops:
        if isinstance(op, lw.BufferOp) and op.role == "weight":
            btype = op.buffer_type
            params = btype.num_elements if len(btype.shape_ints) == 2 else 0
            out[op.buffer_name] = (btype.byte_size, params)
    return out


def profile_rows(
    calls: list[dict[str, Any]],
    times: Sequence[float],
    counts: Sequence[float],
    mode: str | Sequence[str],
    per: float,
    slots: dict[str, tuple[int, int]] | None = None,
) -> list[tuple[str, float, float, float, float]]:
    """Per kernel, slowest first: (kernel, calls, seconds, weight bytes, matrix params),
    each per unit; ``per`` is the number of units (decode steps or prefills) counted.
    ``mode``: the program counted, or several (a training step: backward and optimize)."""
    modes = (mode,) if isinstance(mode, str) else tuple(mode)
    agg: dict[str, list[float]] = {}
    for c in calls:
        if c["mode"] not in modes:
            continue
        i = c["index"]
        e = agg.setdefault(c["kernel"], [0.0, 0.0, 0.0, 0.0])
        e[0] += counts[i] / per
        e[1] += times[i] / per
        if slots is not None and c["kind"] in cost.MATRIX_KINDS:
            for w in c["weights"]:
                nbytes, params = slots.get(w, (0, 0))
                e[2] += nbytes * counts[i] / per
                e[3] += params * counts[i] / per
    rows = [(k, v[0], v[1], v[2], v[3]) for k, v in agg.items()]
    return sorted(rows, key=lambda r: -r[2])


def render_profile(report: Report, dtype: str, prof: dict[str, Any]) -> list[str]:
    a = report.args
    out: list[str] = []
    build = report.builds.get(dtype)
    slots = slot_info(build) if build is not None else None
    for mode in reversed(INFERENCE_MODES):  # decode first
        if mode not in prof:
            continue
        p = prof[mode]
        runs = len(p["wall"])
        if mode == "decode":
            per = runs * a["decode_tokens"]
            unit = "decode step"
        else:
            per = runs
            unit = f"{a['prompt_tokens']}-token prefill"
        wall_per = sum(p["wall"]) / per
        rows = profile_rows(prof["calls"], p["times"], p["counts"], mode, per, slots)
        total = sum(r[2] for r in rows)
        table = []
        for k, n, sec, nbytes, params in rows:
            rate = "—"
            if mode == "decode" and nbytes and sec > 0:
                rate = f"{nbytes / sec / 1e9:.1f} GB/s"
            elif mode == "prefill" and params and sec > 0:
                rate = f"{2 * params * a['prompt_tokens'] / sec / 1e9:.0f} GFLOP/s"
            table.append([k, f"{n:g}", f"{sec * 1e3:.3f}", f"{sec / wall_per:.1%}", rate])
        table.append(
            [
                "(outside kernels: Python, ctypes, logits copy)",
                "",
                f"{(wall_per - total) * 1e3:.3f}",
                f"{(wall_per - total) / wall_per:.1%}",
                "",
            ]
        )
        bw = p.get("bandwidth") or [0.0]
        out.append(
            f"Per-kernel time, ckir {dtype}, per {unit} (mean of {per:g}; "
            f"wall {wall_per * 1e3:.2f} ms; read-bandwidth probe around the runs "
            f"{fmt_num(statistics.median(bw))} GB/s, {fmt_range(bw)}):"
        )
        out.append("")
        head = ["kernel", "calls", "ms", "share of wall", "rate (weights read / matrix FLOPs)"]
        out.append(markdown_table(head, table))
        out.append("")
    return out


def report_json(report: Report) -> dict[str, Any]:
    return {
        "model": report.model,
        "args": {k: v for k, v in report.args.items() if not k.startswith("_")},
        "costs": {k: v.__dict__ for k, v in report.costs.items()},
        "compile": {k: {"steps": v.steps, "cold_cc": v.cold_cc} for k, v in report.compile.items()},
        "systems": [
            {
                "name": s.name,
                "dtype": s.dtype,
                "seconds": s.seconds,
                "probes": s.probes,
                "rounds": {m: s.run_rounds(m) for m in s.seconds},
                "dead": s.dead,
                "first_failure": s.first_failure,
                "fallback": s.fallback.instead if s.fallback and s.first_failure else None,
            }
            for s in report.systems
        ],
        "bandwidth_gbps": report.bandwidth,
        "bandwidth_4k_gbps": report.bandwidth_4k,
        "fma_gflops": report.fma,
        "bf16_dot_gflops": report.bf16_dot,
        "int8_dot_gops": report.int8_dot,
        "int8_dot_insn": report.int8_insn,
        "bf16_dot_insn": report.bf16_insn,
        "rss": report.rss,
        "profiles": report.profiles,
        "notes": report.notes,
        "env": report.env,
        "extra": report.extra,
    }
