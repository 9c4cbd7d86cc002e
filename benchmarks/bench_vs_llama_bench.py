"""ckir against llama.cpp's own ``llama-bench`` on the same K-quant GGUF file, paired.

``ckir bench --against llama.cpp`` drives llama.cpp through llama-cpp-python; where
that package cannot be installed (no wheel, no network), this script uses a
llama.cpp build folder instead: its ``llama-quantize`` makes the file (llama.cpp's
own Q4_K_M mixture: Q4_K matrices with Q6_K for half of the down projections, the
value matrices and the LM head) and its ``llama-bench`` times it.

    python benchmarks/bench_vs_llama_bench.py --llama-cpp ~/llama.cpp/build \\
        [--shape tinyllama-1.1b] [--ftype Q4_K_M] [--prompt 128] [--gen 64] \\
        [--threads 2] [--rounds 5]

Each round runs ckir (in this process) and ``llama-bench -r 1`` (a child process)
back to back, in alternating order, on the same file and thread count:

* prefill: a ``--prompt``-token prompt from an empty cache (llama-bench ``pp``; both
  compute the last row's logits only: ckir's build is compiled with ``logits="last"``);
* decode: ``--gen`` tokens one at a time from an empty cache (llama-bench ``tg``).

It prints each system's median tokens/s, the per-round ratio ckir / llama.cpp
(median, min, max) and ckir's decode against the read roofline of this machine
(the bytes one decode step reads, from the build's cost model, over the read probe
of :mod:`ckir.tools.bandwidth`, the faster of the probes just before and just after
ckir's run of that round: on a host whose bus changes state within seconds, a probe
taken after llama-bench's run read a slower bus than ckir's decode had seen, and the
fraction came out above 1).  The host is shared: the load average is printed with the
numbers, and only the paired ratios mean much.
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

import numpy as np

#: shapes whose every matrix has K % 256 == 0, so llama-quantize's K-quant mixtures keep
#: K-quants throughout (elsewhere it falls back to Q5_0 / Q8_0 per matrix): TinyLlama 1.1B
EXTRA_SHAPES = {
    "tinyllama-1.1b": dict(
        hidden_size=2048,
        num_attention_heads=32,
        num_key_value_heads=4,
        intermediate_size=5632,
        num_hidden_layers=22,
        vocab_size=32000,
        max_position_embeddings=2048,
        rope_theta=10000.0,
        rms_norm_eps=1e-5,
        tie_word_embeddings=False,
        bos_token_id=1,
        eos_token_id=2,
    )
}


def _model(shape: str, work: Path) -> tuple[Path, str]:
    """(checkpoint folder, name) of an EXTRA_SHAPES name (made once in ``work``), a
    ``ckir bench`` built-in shape or a folder."""
    if shape not in EXTRA_SHAPES:
        from ckir.tools.bench_build import resolve_model

        return resolve_model(shape)
    out = work / f"{shape}-hf"
    if not (out / ".complete").exists():
        from ckir.tools.bench_build import SHAPE_STD
        from ckir.tools.zoo import make_tiny_model

        _log(f"making the random-weight {shape} checkpoint in {out}")
        make_tiny_model("llama", out, seed=0, std=SHAPE_STD, **EXTRA_SHAPES[shape])
        (out / ".complete").write_text("ok\n")
    return out, shape


def _log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def _tool(build: Path, name: str) -> Path:
    for candidate in (build / "bin" / name, build / name):
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return candidate
    raise SystemExit(f"error: {build}: no {name} (build it: cmake --build {build} --target {name})")


def llama_bench(bench: Path, gguf: Path, threads: int, prompt: int, gen: int) -> dict[str, float]:
    """tokens/s of one ``llama-bench -r 1`` run: ``{"prefill": pp, "decode": tg}``."""
    cmd = [str(bench), "-m", str(gguf), "-t", str(threads), "-r", "1", "-o", "json"]
    cmd += ["-p", str(prompt), "-n", str(gen)]
    out = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(
            f"error: llama-bench failed ({out.returncode}): {out.stderr.strip()[-400:]}"
        )
    rows = json.loads(out.stdout)
    got: dict[str, float] = {}
    for row in rows:
        mode = "prefill" if int(row.get("n_prompt", 0)) > 0 else "decode"
        got[mode] = float(row["avg_ts"])
    return got


def ckir_run(runner, prompt: int, gen: int, seed: int) -> dict[str, float]:
    """tokens/s of ckir's prefill of ``prompt`` tokens (``ckir bench``'s CkirRunner timing)
    and of ``gen`` decode steps from an empty cache (as llama-bench's tg)."""
    model = runner.m
    rng = np.random.default_rng(seed)
    tokens = [int(t) for t in rng.integers(0, model.vocab_size, size=max(prompt, gen))]
    pp = prompt / runner.prefill(tokens[:prompt])
    model.reset()
    step = model.decode
    t0 = time.perf_counter()
    for tok in tokens[:gen]:
        step(tok)
    tg = gen / (time.perf_counter() - t0)
    return {"prefill": pp, "decode": tg}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--llama-cpp", type=Path, required=True, help="a llama.cpp build folder")
    p.add_argument(
        "--shape",
        default="tinyllama-1.1b",
        help="tinyllama-1.1b, a built-in shape of ckir bench, or a HF folder",
    )
    p.add_argument("--ftype", default="Q4_K_M", help="llama-quantize's file type")
    p.add_argument("--prompt", type=int, default=128)
    p.add_argument("--gen", type=int, default=64)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument(
        "--work", type=Path, default=None, help="where the files go (default: a temp dir)"
    )
    args = p.parse_args(argv)

    import ckir
    from ckir.tools.bandwidth import ReadProbe
    from ckir.tools.bench_build import model_cost
    from ckir.tools.bench_runners import CkirRunner, write_gguf

    bench = _tool(args.llama_cpp, "llama-bench")
    quantize = _tool(args.llama_cpp, "llama-quantize")
    work = args.work or Path(tempfile.mkdtemp(prefix="ckir-vs-llama-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    model_dir, name = _model(args.shape, work)
    f32 = work / f"{name}-f32.gguf"
    qfile = work / f"{name}-{args.ftype}.gguf"
    if not qfile.exists():
        _log(f"writing {f32}")
        write_gguf(model_dir, "f32", f32)
        _log(f"llama-quantize {args.ftype} -> {qfile}")
        q = subprocess.run(
            [str(quantize), str(f32), str(qfile), args.ftype], capture_output=True, text=True
        )
        if q.returncode != 0:
            raise SystemExit(f"error: llama-quantize failed: {q.stderr.strip()[-400:]}")
        f32.unlink()
    context = max(args.prompt, args.gen) + 1
    build = work / f"build-{args.ftype}-{context}"
    _log(f"ckir compile {qfile.name} -> {build}")
    # logits of the last prompt row only, as llama-bench's pp asks of llama.cpp
    ckir.compile(
        qfile, build, max_context=context, modes=("prefill", "decode"), logits="last"
    ).close()
    runner = CkirRunner(str(build), args.threads)  # loads the build, sets its threads
    cost = model_cost(build)
    step_bytes = cost.decode_bytes(0, args.gen)

    results: dict[str, dict[str, list[float]]] = {
        s: {"prefill": [], "decode": []} for s in ("ckir", "llama.cpp")
    }
    roofline: list[float] = []
    with ReadProbe() as probe:
        ckir_run(runner, args.prompt, args.gen, 0)  # warm-up
        llama_bench(bench, qfile, args.threads, args.prompt, args.gen)
        for r in range(args.rounds):
            order = ["ckir", "llama.cpp"] if r % 2 == 0 else ["llama.cpp", "ckir"]
            for system in order:
                if system == "ckir":
                    before = max(probe.measure(args.threads, reps=2))
                    got = ckir_run(runner, args.prompt, args.gen, r + 1)
                    after = max(probe.measure(args.threads, reps=2))
                    roofline.append(max(before, after) * 1e9 / step_bytes)
                else:
                    got = llama_bench(bench, qfile, args.threads, args.prompt, args.gen)
                for mode, tps in got.items():
                    results[system][mode].append(tps)
            _log(
                f"round {r + 1}/{args.rounds}: "
                + ", ".join(f"{s} {m} {results[s][m][-1]:.1f}" for s in results for m in results[s])
                + f", ckir decode / roofline {results['ckir']['decode'][-1] / roofline[-1]:.2f}"
            )
    runner.m.close()

    load = os.getloadavg()
    print(
        f"# {args.shape}, {args.ftype} (llama-quantize), {args.threads} threads, "
        f"{args.rounds} paired rounds; load average {load[0]:.1f} {load[1]:.1f} {load[2]:.1f}"
    )
    print(f"# decode step reads {step_bytes / 1e6:.1f} MB (weights + mean KV rows)")
    print("| mode | ckir tok/s | llama.cpp tok/s | ckir / llama.cpp (median, min-max) |")
    print("|---|---|---|---|")
    for mode in ("prefill", "decode"):
        a, b = results["ckir"][mode], results["llama.cpp"][mode]
        ratios = [x / y for x, y in zip(a, b, strict=True)]
        print(
            f"| {mode} | {statistics.median(a):.1f} | {statistics.median(b):.1f} | "
            f"{statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f}) |"
        )
    roof = [x / y for x, y in zip(results["ckir"]["decode"], roofline, strict=True)]
    print(
        f"ckir decode / read roofline: median {statistics.median(roof):.2f} "
        f"({min(roof):.2f}-{max(roof):.2f}; roofline {statistics.median(roofline):.1f} tok/s)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
