"""Prefill with ``logits=all`` vs ``logits=last``: tokens/s and state arena (run by hand).

    .venv/bin/python benchmarks/bench_logits_rows.py [smollm-135m] [--prompt-tokens 128]
                     [--rounds 15] [--threads 2] [--max-context N]

Compiles the model (a built-in shape of ``ckir bench`` or a HF folder) twice,
f32, with max-context = ``--prompt-tokens`` + 64 as ``ckir bench`` does (or
``--max-context``), loads
both builds into this process and alternates them (all, last, last, all, ...):
each run is one prefill of ``--prompt-tokens`` tokens from an empty cache.
Prints the median tokens/s of each, the median of the per-round ratios, and
the state arena bytes of both builds.
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import numpy as np

from ckir.compiler import CompileOptions, compile_model
from ckir.model import CompiledModel
from ckir.tools.bench import resolve_model


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("model", nargs="?", default="smollm-135m")
    p.add_argument("--prompt-tokens", type=int, default=128)
    p.add_argument("--rounds", type=int, default=15)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--max-context", type=int, default=None)
    p.add_argument("--build-dir", default="build/bench-logits")
    args = p.parse_args()
    model_dir, name = resolve_model(args.model)
    max_context = args.max_context or args.prompt_tokens + 64
    models: dict[str, CompiledModel] = {}
    for logits in ("all", "last"):
        out = Path(args.build_dir) / f"{name}-ctx{max_context}-{logits}"
        if not (out / "build.json").exists():
            compile_model(model_dir, out, CompileOptions(max_context=max_context, logits=logits))
        models[logits] = CompiledModel(out)
    lib = models["all"]._lib
    lib.ckir_set_num_threads(args.threads)
    tokens = np.random.default_rng(0).integers(0, models["all"].vocab_size, args.prompt_tokens)

    def run(m: CompiledModel) -> float:
        m.reset()
        t0 = time.perf_counter()
        m.prefill(tokens)
        return args.prompt_tokens / (time.perf_counter() - t0)

    for m in models.values():  # warm up: page in the weights
        run(m)
    rates: dict[str, list[float]] = {k: [] for k in models}
    ratios: list[float] = []
    for r in range(args.rounds):
        order = ("all", "last") if r % 2 == 0 else ("last", "all")
        got = {k: run(models[k]) for k in order}
        for k, v in got.items():
            rates[k].append(v)
        ratios.append(got["last"] / got["all"])
    for k, m in models.items():
        print(
            f"{name} prefill T={args.prompt_tokens} logits={k}: "
            f"{statistics.median(rates[k]):.1f} tok/s (min {min(rates[k]):.1f}, "
            f"max {max(rates[k]):.1f}); state arena {int(m.desc.state_bytes):,d} bytes"
        )
    print(f"last/all tok/s: median of {args.rounds} paired rounds {statistics.median(ratios):.3f}")


if __name__ == "__main__":
    main()
