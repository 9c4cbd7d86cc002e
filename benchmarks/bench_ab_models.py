"""Paired A/B of whole-model prefill and decode: a commit against this checkout.

    .venv/bin/python benchmarks/bench_ab_models.py --rev HEAD smollm-135m --dtype q4_1

Exports ``--rev`` (``git archive``, as ``bench_at_commit.py`` does), then
starts one worker process per tree.  Each worker compiles the model
(``build/cache/bench-models/<name>``, made by ``ckir bench``) with its own
compiler and runtime into its own build folder, opens it, and then times
rounds on request: a prefill of ``--prompt`` random tokens from an empty
cache, then ``--steps`` greedy decode steps (``--reps N``: N of those back to
back, the round taking their medians: less noise from the host, which flips
between fast and slow states within seconds).  The two workers alternate,
the order flipped every round, and never run at the same time, so both see
the same state of this shared machine.  Printed: the median tok/s of each
side and the median of the per-round new/old ratios with its quartiles.
Inference builds with ``logits=last`` (what ``generate`` uses; ``--logits all``:
every prompt row, as ``ckir bench`` times prefill).  ``--isa avx2`` builds both
runtimes for AVX2 + FMA (the Zen 3 kind's kernels, run on this CPU).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from bench_at_commit import export  # noqa: E402


def worker(
    name: str,
    dtype: str | None,
    out: str,
    prompt: int,
    steps: int,
    logits: str,
    isa: str,
    reps: int,
) -> None:
    """Serve rounds on stdin/stdout (runs inside the tree under test)."""
    import numpy as np

    from ckir.compiler import CompileOptions, compile_model
    from ckir.model import CompiledModel

    cache = Path(os.environ.get("CKIR_CACHE_DIR", ROOT / "build" / "cache"))
    compile_model(
        cache / "bench-models" / name,
        out,
        CompileOptions(dtype=dtype, max_context=prompt + steps + 1, logits=logits, isa=isa),
    )
    model = CompiledModel(out)
    tokens = np.random.default_rng(0).integers(0, model.vocab_size, prompt)
    print("ready", flush=True)
    for _ in sys.stdin:
        rates: dict[str, list[float]] = {"prefill": [], "decode": []}
        for _ in range(reps):
            model.reset()
            t0 = time.perf_counter()
            tok = int(np.argmax(model.prefill(tokens)[-1]))
            t1 = time.perf_counter()
            for _ in range(steps):
                tok = int(np.argmax(model.decode(tok)[-1]))
            t2 = time.perf_counter()
            rates["prefill"].append(prompt / (t1 - t0))
            rates["decode"].append(steps / (t2 - t1) if steps else 0.0)
        print(json.dumps({k: statistics.median(v) for k, v in rates.items()}), flush=True)


def start(tree: Path, args: argparse.Namespace, out: Path) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=str(tree))
    env.setdefault("CKIR_CACHE_DIR", str(ROOT / "build" / "cache"))
    cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", args.model]
    cmd += ["--out", str(out), "--prompt", str(args.prompt), "--steps", str(args.steps)]
    cmd += ["--logits", args.logits, "--isa", args.isa, "--reps", str(args.reps)]
    if args.dtype:
        cmd += ["--dtype", args.dtype]
    proc = subprocess.Popen(
        cmd, cwd=tree, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    if proc.stdout.readline().strip() != "ready":
        raise SystemExit(f"worker for {tree} failed to start")
    return proc


def one_round(proc: subprocess.Popen[str]) -> dict[str, float]:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write("go\n")
    proc.stdin.flush()
    line = proc.stdout.readline()
    if not line:
        raise SystemExit("worker died")
    return json.loads(line)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "model", help="a model of build/cache/bench-models (smollm-135m, gpt2-small, qwen2-0.5b)"
    )
    ap.add_argument("--rev", default="HEAD", help="the old side (default HEAD)")
    ap.add_argument("--dtype", default=None)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--prompt", type=int, default=128)
    ap.add_argument("--steps", type=int, default=32)
    ap.add_argument("--logits", choices=("last", "all"), default="last", help="prefill rows")
    ap.add_argument(
        "--isa", default="native", help="the runtime build of both sides: native, avx2, scalar"
    )
    ap.add_argument(
        "--reps",
        type=int,
        default=1,
        help="runs per side and round, back to back; the round takes their median",
    )
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--out", default=None, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.worker:
        worker(
            args.model,
            args.dtype,
            args.out,
            args.prompt,
            args.steps,
            args.logits,
            args.isa,
            args.reps,
        )
        return 0
    old_tree = export(args.rev, "ckir-ab-")
    builds = Path(tempfile.mkdtemp(prefix="ckir-ab-builds-"))
    procs: dict[str, subprocess.Popen[str]] = {}
    try:
        procs["old"] = start(old_tree, args, builds / "old")
        procs["new"] = start(ROOT, args, builds / "new")
        runs: dict[str, list[dict[str, float]]] = {"old": [], "new": []}
        for r in range(args.rounds):
            for side in ("old", "new") if r % 2 == 0 else ("new", "old"):
                runs[side].append(one_round(procs[side]))
        print(
            f"# {args.model} {args.dtype or 'as stored'}, {args.isa} runtime: {args.rev} (old)"
            f" against the working tree (new), {args.rounds} rounds"
        )
        for mode in ("prefill", "decode") if args.steps > 0 else ("prefill",):
            old = [x[mode] for x in runs["old"]]
            new = [x[mode] for x in runs["new"]]
            ratios = sorted(n / o for n, o in zip(new, old, strict=True))
            q = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else [ratios[0]] * 3
            print(
                f"{mode:8s} old {statistics.median(old):8.1f} tok/s"
                f"  new {statistics.median(new):8.1f} tok/s"
                f"  new/old {statistics.median(ratios):.3f} (quartiles {q[0]:.3f}-{q[2]:.3f})"
            )
    finally:
        for proc in procs.values():
            proc.kill()
        subprocess.run(["rm", "-rf", str(old_tree), str(builds)], check=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
