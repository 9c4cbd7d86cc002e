"""``ckir bench --modes train``: training-step tokens/s of ckir against PyTorch eager.

    ckir bench MODEL --modes train [--prompt-tokens 128] [--repeat 5] [--threads 2]
                     [--warmup 3] [--lr 1e-4] [--rss-steps 3] [--profile] [--json FILE]

One training step = forward over T tokens (``--prompt-tokens``) from position 0, the
mean cross-entropy against the next tokens, the gradients, clipping of the global
gradient norm at 1.0 and one AdamW step (betas 0.9/0.999, eps 1e-8, weight decay 0.01,
``--lr``).  tokens/s = T / seconds of one step.

* ckir: the checkpoint compiled in f32 with ``modes=("backward",)`` and
  ``max_context = T``; a run is one ``CompiledModel.train_step``.
* torch: ``transformers.AutoModelForCausalLM`` of the same checkpoint in fp32, eager,
  ``torch.set_num_threads(--threads)``, ``model.train()``; a run is ``zero_grad`` +
  forward (no labels) + ``F.cross_entropy(logits[0], targets)`` + ``backward`` +
  ``clip_grad_norm_(1.0)`` + ``AdamW.step()`` with the same hyper-parameters (AdamW's
  defaults otherwise: on CPU the per-tensor loop).

The machinery is :mod:`ckir.tools.bench`'s: a worker process per system, loaded once,
``--warmup`` steps each before timing (ckir's first step faults in the state arena
and copies the weights it updates out of the weights.bin mapping), paired rounds in
alternating order, every run bracketed by the FMA probe.  Both systems step through
the same fixed random windows of T + 1 tokens (tokens = w[:-1], targets = w[1:]):
run k of either system uses window k, so from the same initial weights their losses
must agree step by step (printed: a check that both train the same model).

* bound: FLOPs per step = ``TRAIN_FLOPS_FACTOR`` (3) x the forward's FLOPs, the forward
  counted from the build's backward program like a prefill (``ckir.cost``: 2 x matrix
  parameters x T + causal attention 4 x H x D x T(T+1)/2 per layer): the backward of a
  matrix product is two products of its size, and attention's likewise.  Fraction of
  the bound = tok/s x FLOPs per token / the FMA probe around the run.
* layout totals of the training build per role (layout.json), and the peak RSS of
  ``--rss-steps`` training steps in the C driver (runtime/bench/rss_run.c ``--train``,
  no Python) against weights arena + state arena; the workers' own peak RSS too.
* ``--profile``: per-kernel and per-phase (forward, loss, gradients, optimizer) time
  of one step, from a copy of the build emitted with ``emit-c{profile=true}``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

from ckir import cost
from ckir.errors import CkirError
from ckir.tools import bench
from ckir.tools.bench import (
    TRAIN_MODE,
    BaselineUnavailable,
    Report,
    System,
    Worker,
    fmt_num,
    fmt_range,
    markdown_table,
    rates,
)
from ckir.tools.bench_report import render_tail

#: the training build's modes: the backward program (and with it the optimize program)
TRAIN_BUILD_MODES = ("backward",)
#: AdamW and clipping: the defaults of --lower-backward, the same for the torch baseline
BETAS = (0.9, 0.999)
EPS = 1e-8
WEIGHT_DECAY = 0.01
MAX_GRAD_NORM = 1.0
#: kinds whose calls are matrix products of M x N x K (2 MNK FLOPs)
GEMM_KINDS = cost.MATRIX_KINDS | {"linear_bwd_input", "linear_bwd_weight"}
#: kernels listed in the profile table (the rest are summed in one row)
PROFILE_TOP = 15


def add_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group(f"training (--modes {TRAIN_MODE})")
    g.add_argument("--warmup", type=int, default=3, help="untimed steps per system first")
    g.add_argument("--lr", type=float, default=1e-4, help="AdamW learning rate")
    g.add_argument(
        "--rss-steps", type=int, default=3, help="training steps of the peak-RSS C driver"
    )


# ---------------------------------------------------------------------------------------
# workers
# ---------------------------------------------------------------------------------------


class CkirTrainRunner(bench.CkirRunner):
    """A training build: ``train`` is one ``train_step``."""

    def __init__(self, build: str, threads: int, lr: float) -> None:
        super().__init__(build, threads)
        if not self.m.trainable:
            raise BaselineUnavailable(f"{build}: not compiled for training")
        self.lr = lr

    def train(self, tokens: list[int], targets: list[int]) -> dict[str, float]:
        import numpy as np

        tok = np.asarray(tokens, dtype=np.int32)
        tgt = np.asarray(targets, dtype=np.int32)
        t0 = time.perf_counter()
        loss = self.m.train_step(tok, tgt, lr=self.lr)
        return {"s": time.perf_counter() - t0, "loss": loss}

    def loss(self, tokens: list[int], targets: list[int]) -> float:
        return self.m.backward(tokens, targets)


class TorchTrainRunner(bench.Runner):
    """PyTorch eager fp32: forward, cross-entropy, backward, clip, AdamW."""

    def __init__(self, model_dir: str, threads: int, lr: float) -> None:
        import torch
        import transformers

        torch.set_num_threads(threads)
        self.torch = torch
        model = transformers.AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
        model.train()
        self.model = model
        self.opt = torch.optim.AdamW(
            model.parameters(), lr=lr, betas=BETAS, eps=EPS, weight_decay=WEIGHT_DECAY
        )
        self.info = {
            "threads": torch.get_num_threads(),
            "attn": getattr(model.config, "_attn_implementation", "?"),
            "version": torch.__version__,
        }

    def _loss(self, tokens: list[int], targets: list[int]) -> Any:
        torch = self.torch
        ids = torch.tensor([tokens], dtype=torch.long)
        tgt = torch.tensor(targets, dtype=torch.long)
        logits = self.model(input_ids=ids, use_cache=False).logits
        return torch.nn.functional.cross_entropy(logits[0], tgt)

    def train(self, tokens: list[int], targets: list[int]) -> dict[str, float]:
        t0 = time.perf_counter()
        self.opt.zero_grad()
        loss = self._loss(tokens, targets)
        loss.backward()
        self.torch.nn.utils.clip_grad_norm_(self.model.parameters(), MAX_GRAD_NORM)
        self.opt.step()
        seconds = time.perf_counter() - t0
        return {"s": seconds, "loss": float(loss.detach())}

    def loss(self, tokens: list[int], targets: list[int]) -> float:
        with self.torch.no_grad():
            return float(self._loss(tokens, targets))


def make_runner(spec: dict[str, Any]) -> bench.Runner:
    """The runner of a ``*-train`` worker spec (called in the worker process)."""
    if spec["kind"] == "ckir-train":
        return CkirTrainRunner(spec["build"], spec["threads"], spec["lr"])
    if spec["kind"] == "torch-train":
        return TorchTrainRunner(spec["model"], spec["threads"], spec["lr"])
    raise ValueError(f"unknown worker kind {spec['kind']!r}")


# ---------------------------------------------------------------------------------------
# the benchmark
# ---------------------------------------------------------------------------------------


def windows(count: int, T: int, vocab: int) -> list[list[int]]:
    """``count`` fixed random windows of T + 1 token ids (the same in every run)."""
    flat = bench._tokens(count * (T + 1), vocab, 5)
    return [flat[i * (T + 1) : (i + 1) * (T + 1)] for i in range(count)]


def layout_totals(build: Path) -> dict[str, Any]:
    """Per-role byte totals and arena sizes of the build's layout.json."""
    layout = json.loads((build / "layout.json").read_text())
    return {
        "totals": dict(layout["totals"]),
        "arenas": {a["name"]: a["size"] for a in layout["arenas"]},
        "strategy": layout.get("strategy", ""),
    }


def collect(args: argparse.Namespace, dtypes: list[str], against: list[str]) -> Report:
    if dtypes != ["f32"]:
        raise CkirError(f"--modes {TRAIN_MODE}: --dtype f32 only (training keeps f32 weights)")
    for name in ("warmup", "rss_steps"):
        if getattr(args, name) < (0 if name == "warmup" else 1):
            raise CkirError(f"--{name.replace('_', '-')} must be positive")
    if not args.lr > 0:
        raise CkirError(f"--lr must be > 0, got {args.lr}")
    model_dir, name = bench.resolve_model(args.model)
    cfg = bench.model_config(model_dir)
    vocab = int(cfg["vocab_size"])
    T = args.prompt_tokens
    positions = cfg.get("max_position_embeddings") or cfg.get("n_positions")
    if positions and positions < T:
        raise CkirError(f"{name}: T = {T} but the model has {positions} positions")
    build_root = Path(args.build_dir) if args.build_dir else bench.cache_root() / "bench-builds"
    out = build_root / f"{name}-f32-train-T{T}{bench.isa_suffix(args.isa)}"
    bench._log(f"compiling {name} (f32, training) -> {out}")
    compile_times = bench.compile_build(
        model_dir, out, "f32", T, args.cold_build, modes=TRAIN_BUILD_MODES, isa=args.isa
    )
    report = Report(
        model=name,
        args={k: v for k, v in vars(args).items() if k != "func"},
        costs={"f32": bench.model_cost(out)},
        compile={"f32": compile_times},
        systems=[],
        bandwidth=[],
        fma=[],
        bandwidth_4k=[],
        notes=[],
        rss={},
        profiles={},
        env={},
        builds={"f32": out},
    )
    report.env["ckir"] = bench.source_info()
    report.env["cpu"] = bench.cpu_info()
    report.env["load average at start"] = f"{os.getloadavg()[0]:.2f}"
    report.extra["layout"] = layout_totals(out)
    wins = windows(args.warmup + args.repeat, T, vocab)

    mode = (TRAIN_MODE,)
    base = {"threads": args.threads, "lr": args.lr}
    specs: list[tuple[System, dict[str, Any]]] = [
        (System("ckir", "f32", mode), {**base, "kind": "ckir-train", "build": str(out)})
    ]
    for b in against:
        if b == "torch":
            spec = {**base, "kind": "torch-train", "model": str(model_dir)}
            specs.append((System("torch", "f32", mode), spec))
        else:
            report.notes.append(f"{b}: no training; skipped")

    losses: dict[str, list[float]] = {}
    report.extra["losses"] = losses

    def step(s: System, window: list[int]) -> float | None:
        got = bench.guarded_call(s, op="train", tokens=window[:-1], targets=window[1:])
        if got is None:
            return None
        losses.setdefault(s.label, []).append(float(got["loss"]))
        return float(got["s"])

    with bench._workers([s for s, _ in specs]):
        systems = report.systems = bench.start_workers(specs, args, report)
        _loss_check(systems, wins[0], report)
        for s in systems:  # warm-up: windows 0 .. warmup-1
            for k in range(args.warmup):
                step(s, wins[k])
            s.seconds[TRAIN_MODE] = []
        bench.fma_probe(args.threads)

        def machine(_mode: str, _dtype: str) -> float:
            value = bench.fma_probe(args.threads)
            report.fma.append(value)
            return value

        bench.alternate_rounds(
            systems,
            mode,
            args.repeat,
            lambda s, _mode, r: step(s, wins[args.warmup + r]),
            machine,
        )
        report.notes += bench.system_notes(systems)
        report.env["load average after the rounds"] = f"{os.getloadavg()[0]:.2f}"
        _loss_agreement(systems, losses, report)
        report.extra["worker_rss_kb"] = {
            s.label: got
            for s in systems
            if s.dead is None and (got := bench.guarded_call(s, op="rss")) is not None
        }
    bench._log(f"peak RSS: C driver, {args.rss_steps} training steps")
    report.rss["f32"] = bench.run_rss_driver(
        out, args.threads, T, args.rss_steps, vocab, train=True
    )
    if args.profile:
        report.profiles["f32"] = _profile(out, args, wins)
    return report


def _loss_check(systems: list[System], window: list[int], report: Report) -> None:
    """The loss of window 0 before any step: every system against ckir (same weights)."""
    got: dict[str, float] = {}
    for s in systems:
        reply = bench.guarded_call(s, op="loss", tokens=window[:-1], targets=window[1:])
        if reply is not None:
            got[s.name] = float(reply["loss"])
    ref = got.get("ckir")
    for n, value in got.items():
        if n != "ckir" and ref is not None:
            report.notes.append(
                f"loss check {n} vs ckir before training: {value:.6f} vs {ref:.6f} "
                f"(relative difference {abs(value - ref) / abs(ref):.1e})"
            )


def _loss_agreement(systems: list[System], losses: dict[str, list[float]], report: Report) -> None:
    """After the same steps on the same windows, the systems' losses must still agree."""
    ref = losses.get("ckir f32", [])
    for s in systems:
        mine = losses.get(s.label, [])
        if s.name == "ckir" or not ref or len(mine) != len(ref):
            continue
        worst = max(abs(a - b) / abs(a) for a, b in zip(ref, mine, strict=True))
        report.notes.append(
            f"losses {s.label} vs ckir f32 over {len(ref)} steps on the same windows: "
            f"last {mine[-1]:.6f} vs {ref[-1]:.6f}, largest relative difference {worst:.1e}"
        )


def _profile(build: Path, args: argparse.Namespace, wins: list[list[int]]) -> dict[str, Any]:
    """Per-call times of each of ``--repeat`` training steps in a profiling copy of the
    build (one step at a time: on a shared machine a burst of load spoils a step, not the
    profile), each with the FMA probe around it."""
    prof_dir = build.with_name(build.name + "-profile")
    bench._log(f"profile: instrumented build {prof_dir}")
    calls = bench.build_profile_copy(build, prof_dir)
    spec = {"kind": "ckir-train", "build": str(prof_dir), "threads": args.threads, "lr": args.lr}
    w = Worker("ckir profile", spec, args.threads, args.timeout)
    steps: list[dict[str, Any]] = []
    try:
        for k in range(args.warmup):
            w.call(op="train", tokens=wins[k][:-1], targets=wins[k][1:])
        for r in range(args.repeat):
            win = wins[args.warmup + r]
            before = bench.fma_probe(args.threads)
            w.call(op="prof_reset")
            wall = w.call(op="train", tokens=win[:-1], targets=win[1:])["s"]
            got = w.call(op="prof_get")
            after = bench.fma_probe(args.threads)
            steps.append({"wall": wall, **got, "fma": (before + after) / 2})
    finally:
        w.close()
    return {"calls": [dataclasses.asdict(c) for c in calls], TRAIN_MODE: steps}


# ---------------------------------------------------------------------------------------
# per-call FLOPs and phases, from the build's IR
# ---------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class CallInfo:
    mode: str
    kernel: str
    kind: str
    #: forward, loss, gradients (backward program) or optimizer
    phase: str
    #: matrix-product FLOPs of the call at T tokens (0: not a matrix product)
    flops: float


def call_infos(build: Path, tokens: int) -> list[CallInfo]:
    """One per call of the training programs, in program order (the profiler's order)."""
    out: list[CallInfo] = []
    model = cost.lowered_model(bench.build_module(build))
    for program in model.programs().values():
        mode = program.mode_name
        phase = "forward" if mode == "backward" else "optimizer"
        for call in program.calls():
            decl = call.declaration()
            kind = decl.kind_name if decl is not None else ""
            if kind == "cross_entropy_bwd":
                phase = "loss"
            p = call.param_values
            flops = 0.0
            if kind in GEMM_KINDS:
                dims = [tokens if p.get(k) == "T" else p.get(k) for k in ("M", "N", "K")]
                ints = [d for d in dims if isinstance(d, int)]
                if len(ints) == 3:
                    flops = 2.0 * ints[0] * ints[1] * ints[2]
            elif kind in ("attention", "attention_bwd"):
                h, d = p.get("H"), p.get("D")
                if isinstance(h, int) and isinstance(d, int):
                    # forward: q k^T and p v over the causal pairs; backward: q k^T again,
                    # then dP, dq, dk and dv (2.5x)
                    flops = 4.0 * h * d * tokens * (tokens + 1) / 2
                    flops *= 2.5 if kind == "attention_bwd" else 1.0
            out.append(CallInfo(mode, call.kernel_name, kind, phase, flops))
            if phase == "loss":
                phase = "gradients"
    return out


# ---------------------------------------------------------------------------------------
# the report
# ---------------------------------------------------------------------------------------


def render(report: Report) -> str:
    a = report.args
    T = a["prompt_tokens"]
    out = [
        f"# ckir bench {report.model} --modes {TRAIN_MODE}: threads {a['threads']}, "
        f"{a['repeat']} rounds after {a['warmup']} warm-up step(s); one step = forward + "
        f"cross-entropy + backward + clip {MAX_GRAD_NORM} + AdamW (lr {a['lr']:g}) on "
        f"T = {T} tokens",
        "",
        bench.results_table(report, (TRAIN_MODE,)),
        "",
    ]
    out += _render_quiet(report)
    out += _render_bound(report)
    out += _render_layout(report)
    out += _render_rss(report)
    out += bench._render_compile(report)
    out += render_tail(report, render_profile)
    return "\n".join(out)


#: a run counts as undisturbed when its FMA probe (the mean of the probes before and after
#: it) reads at least this share of the best run's
QUIET_SHARE = 0.75


def quiet_ratios(report: Report) -> dict[str, tuple[int, list[float]]]:
    """Per baseline: (rounds, paired ratios ckir / baseline of the rounds in which both runs
    saw an undisturbed machine: FMA probes >= ``QUIET_SHARE`` x the best run's)."""
    ck = next((s for s in report.systems if s.name == "ckir"), None)
    best = max((p for s in report.systems for p in s.probes.get(TRAIN_MODE, [])), default=0.0)
    if ck is None or not best:
        return {}
    floor = QUIET_SHARE * best
    out: dict[str, tuple[int, list[float]]] = {}
    for s in report.systems:
        if s is ck or not s.seconds.get(TRAIN_MODE):
            continue
        pairs = bench.paired_rounds(ck, s, TRAIN_MODE)
        keep = [
            s.seconds[TRAIN_MODE][j] / ck.seconds[TRAIN_MODE][i]
            for i, j in pairs
            if min(ck.probes[TRAIN_MODE][i], s.probes[TRAIN_MODE][j]) >= floor
        ]
        out[s.label] = (len(pairs), keep)
    return out


def _render_quiet(report: Report) -> list[str]:
    """The ratio over the undisturbed rounds: a training step lasts seconds, and on a shared
    host another process's burst can slow a system many times over for some rounds."""
    out = []
    for label, (n, keep) in quiet_ratios(report).items():
        ratio = (
            f"ckir / {label} {statistics.median(keep):.2f} ({fmt_range(keep)})" if keep else "none"
        )
        best = max(p for s in report.systems for p in s.probes[TRAIN_MODE])
        out.append(
            f"Undisturbed rounds (the FMA probes around both runs >= {QUIET_SHARE} x the best "
            f"run's, {fmt_num(best)} GFLOP/s): {len(keep)} of {n}; {ratio}."
        )
    return [*out, ""] if out else []


def _render_bound(report: Report) -> list[str]:
    a = report.args
    T = a["prompt_tokens"]
    c = report.costs["f32"]
    if not report.fma:
        return []
    fwd = c.train_flops(T) / cost.TRAIN_FLOPS_FACTOR
    out = [
        f"Training roofline. fp32 FMA peak: C probe ({a['threads']} threads) right before "
        f"and after every run, median {fmt_num(statistics.median(report.fma))} GFLOP/s over "
        f"{len(report.fma)} probes ({fmt_range(report.fma)}). FLOPs per step = "
        f"{cost.TRAIN_FLOPS_FACTOR} x forward (backward = 2 x forward: a matrix product's "
        f"backward is two products of its size, attention's likewise; the optimizer, norms "
        f"and attention_bwd's recomputed q k^T are not counted); forward = 2 x "
        f"{c.train_params / 1e6:.1f} M matrix params x T + causal attention "
        f"4 x H x D x T(T+1)/2 per layer = {fmt_num(fwd / 1e9)} GFLOP, counted from the build's "
        f"backward program.",
        "",
    ]
    rows = []
    for s in report.systems:
        secs = s.seconds.get(TRAIN_MODE)
        if not secs:
            continue
        fr = bench._fractions(report, s, TRAIN_MODE)
        r = rates(T, secs)
        rows.append(
            [
                s.label,
                fmt_num(c.train_flops(T) / 1e9),
                fmt_num(statistics.median(s.probes[TRAIN_MODE])),
                fmt_num(statistics.median(bench._bounds(report, s, TRAIN_MODE))),
                fmt_num(statistics.median(r)),
                fmt_num(c.train_flops(T) / statistics.median(secs) / 1e9),
                f"{statistics.median(fr):.3f} ({fmt_range(fr)})",
            ]
        )
    head = [
        "system",
        "GFLOP / step",
        "probe GFLOP/s",
        "bound tok/s",
        "tok/s",
        "GFLOP/s",
        "fraction of bound (min–max)",
    ]
    return [*out, markdown_table(head, rows), ""]


def _mb(n: float) -> str:
    return f"{n / 1e6:.1f}"


def _render_layout(report: Report) -> list[str]:
    lay = report.extra.get("layout")
    if not lay:
        return []
    t, arenas = lay["totals"], lay["arenas"]
    weights = t.get("weight", 0)
    act, saved = t.get("activation", 0) + t.get("scratch", 0), t.get("saved", 0)
    rows = [
        ["weights", _mb(weights), "weights", "1.00"],
        ["KV cache", _mb(t.get("kv_cache", 0)), "state", ""],
        ["activations (every buffer)", _mb(act), "state", f"{act / weights:.2f}"],
        [
            f"activations after {lay['strategy']} reuse",
            _mb(act - saved),
            "state",
            f"{(act - saved) / weights:.2f}",
        ],
        ["gradients", _mb(t.get("grad", 0)), "state", f"{t.get('grad', 0) / weights:.2f}"],
        [
            "optimizer state (AdamW m, v)",
            _mb(t.get("optimizer_state", 0)),
            "state",
            f"{t.get('optimizer_state', 0) / weights:.2f}",
        ],
        ["io (tokens, targets, loss)", _mb(t.get("io", 0)), "state", ""],
        ["weights arena", _mb(arenas.get("weights", 0)), "", ""],
        ["state arena", _mb(arenas.get("state", 0)), "", ""],
    ]
    return [
        "Layout totals of the training build (layout.json, MB; activations are the buffers "
        "of the backward program, reused across lifetimes by the planner; arenas include "
        "alignment and canaries):",
        "",
        markdown_table(["role", "MB", "arena", "/ weights"], rows),
        "",
    ]


def _render_rss(report: Report) -> list[str]:
    a = report.args
    r = report.rss.get("f32")
    lay = report.extra.get("layout")
    if not r or not lay:
        return []
    if "hwm_kb" not in r:
        return ["Peak RSS: the C driver failed (see stderr).", ""]
    arenas = lay["arenas"]
    expected = arenas.get("weights", 0) + arenas.get("state", 0)
    hwm = r["hwm_kb"] * 1024
    row = [
        _mb(hwm),
        _mb(r["rss_loaded_kb"] * 1024),
        _mb(r["rss_open_kb"] * 1024),
        _mb(arenas.get("weights", 0)),
        _mb(arenas.get("state", 0)),
        f"{hwm / expected:.3f}",
        f"{_mb(r['rss_anon_kb'] * 1024)} / {_mb(r['rss_file_kb'] * 1024)}",
        f"{r['first_step_s']:.2f} / {r['step_s']:.2f}",
    ]
    out = [
        f"Peak RSS of {a['rss_steps']} training steps (C driver runtime/bench/rss_run.c "
        "--train, no Python; VmHWM) against the weights arena + the state arena of "
        "layout.json. The weights are a private mapping of weights.bin: each page the "
        "optimizer writes becomes an anonymous copy (RssAnon) and leaves the file's page, "
        "so trained weights are counted once.",
        "",
        markdown_table(
            [
                "peak RSS MB",
                "before open MB",
                "after open MB",
                "weights MB",
                "state MB",
                "peak / (weights + state)",
                "anon / file MB at the end",
                "first / later step s",
            ],
            [row],
        ),
        "",
    ]
    workers = report.extra.get("worker_rss_kb") or {}
    if workers:
        parts = [
            f"{label} {_mb(v.get('VmHWM', 0) * 1024)} MB"
            for label, v in workers.items()
            if v.get("VmHWM")
        ]
        out += [
            "Peak RSS of the benchmark workers (Python processes, after warm-up and the "
            "rounds; includes the interpreter and libraries): " + ", ".join(parts) + ".",
            "",
        ]
    return out


def render_profile(report: Report, dtype: str, prof: dict[str, Any]) -> list[str]:
    a = report.args
    T = a["prompt_tokens"]
    steps = prof[TRAIN_MODE]
    walls = [st["wall"] for st in steps]
    # the step with the median wall time (the lower median of an even count)
    p = sorted(steps, key=lambda st: st["wall"])[(len(steps) - 1) // 2]
    wall = p["wall"]
    calls = prof["calls"]
    build = report.builds.get(dtype)
    infos = call_infos(build, T) if build is not None else []
    if len(infos) != len(calls):
        infos = []
    times, counts = p["times"], p["counts"]
    # phases: forward / loss / gradients / optimizer
    phase_s: dict[str, float] = {}
    phase_f: dict[str, float] = {}
    kernel_f: dict[str, float] = {}
    for c, info in zip(calls, infos, strict=False):
        i = c["index"]
        phase_s[info.phase] = phase_s.get(info.phase, 0.0) + times[i]
        phase_f[info.phase] = phase_f.get(info.phase, 0.0) + info.flops * counts[i]
        kernel_f[c["kernel"]] = kernel_f.get(c["kernel"], 0.0) + info.flops * counts[i]
    fma = [st["fma"] for st in steps]
    out = [
        f"Per-phase and per-kernel time, ckir {dtype}, of the training step with the median "
        f"wall time of {len(steps)} ({fmt_num(wall * 1e3)} ms; all: "
        f"{fmt_range([x * 1e3 for x in walls])} ms) in a profiling build; FMA probe around "
        f"that step {fmt_num(p['fma'])} GFLOP/s (all steps {fmt_range(fma)}). GFLOP/s: matrix "
        f"products (2 x M x N x K) and attention (backward: 2.5 x its forward) only.",
        "",
    ]
    if phase_s:
        rows = []
        for ph in ("forward", "loss", "gradients", "optimizer"):
            sec = phase_s.get(ph, 0.0)
            fl = phase_f.get(ph, 0.0)
            rate = f"{fl / sec / 1e9:.0f}" if fl and sec > 0 else "—"
            rows.append([ph, fmt_num(sec * 1e3), f"{sec / wall:.1%}", fmt_num(fl / 1e9), rate])
        out += [markdown_table(["phase", "ms", "share of wall", "GFLOP", "GFLOP/s"], rows), ""]
    rows_k = bench.profile_rows(calls, times, counts, ("backward", "optimize"), 1.0)
    total = sum(r[2] for r in rows_k)
    table = []
    for k, n, sec, _bytes, _params in rows_k[:PROFILE_TOP]:
        fl = kernel_f.get(k, 0.0)
        rate = f"{fl / sec / 1e9:.0f}" if fl and sec > 0 else "—"
        table.append([k, f"{n:g}", fmt_num(sec * 1e3), f"{sec / wall:.1%}", rate])
    rest = rows_k[PROFILE_TOP:]
    if rest:
        sec = sum(r[2] for r in rest)
        other = f"({len(rest)} other kernels)"
        table.append([other, "", fmt_num(sec * 1e3), f"{sec / wall:.1%}", ""])
    table.append(
        [
            "(outside kernels: Python, ctypes, entry point)",
            "",
            fmt_num((wall - total) * 1e3),
            f"{(wall - total) / wall:.1%}",
            "",
        ]
    )
    out += [markdown_table(["kernel", "calls", "ms", "share of wall", "GFLOP/s"], table), ""]
    return out
