"""Paired decode tok/s at a long context: f32 KV cache vs Q8_0 KV cache (--kv-dtype).

Builds one random-weight SmolLM2-135M-shaped model (hidden 576, 30 layers,
9 / 3 heads of head_dim 64, intermediate 1536, vocab 49152, tied; tools/zoo.py),
compiles it twice in one process (``kv_dtype`` f32 and q8_0, the same weight
dtype), prefills the same ``--context`` random tokens into both, then runs
``--rounds`` rounds of ``--steps`` teacher-forced decode steps in each build,
alternating (the order flipped every round), so both builds decode at the same
positions under the same host load.  Each round is timed in wall time and in the
process's CPU time (all threads: what the build itself spent, less sensitive to
other jobs on a shared host than wall time).  Prints each build's median ms per
token and tok/s (wall and CPU), the median and quartiles of the per-round q8_0 /
f32 ratios of both, the host's load average before and after, and the decode
logits' error of the Q8_0 build against the f32 one and against transformers
(one forward over the whole sequence; ``--no-reference`` skips it).

    python benchmarks/bench_kv_dtype.py --context 1024 --rounds 9 --steps 8
    python benchmarks/bench_kv_dtype.py --layers 4 --vocab 1031 --context 200   # quick
    python benchmarks/bench_kv_dtype.py --kernel --context 1024 --rounds 41

``--kernel`` times the decode attention calls alone (attention_f32 against
attention_q8_0 on the same values, SmolLM2 heads 9 / 3 / 64 at position
``--context``), one library, ``--layers`` distinct caches each evicted by a
gemv over a distinct 4 MiB matrix before its call (as a decode step's weights
do), the two alternating per round: the cache-read part of the step, with far
less noise than whole decode steps on a busy host.

``--kernel-cpu`` times the same calls on one thread in that thread's CPU time
(``time.thread_time``: what the call itself computed, not the time other jobs
held the core), warm (the call's cache just read by a first call) and cold (a
32 MiB array written in between), the two kernels alternating per round.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

import ckir
from ckir import quant
from ckir.tools.zoo import make_tiny_model

SMOLLM2 = dict(
    hidden_size=576,
    num_attention_heads=9,
    num_key_value_heads=3,
    intermediate_size=1536,
    tie_word_embeddings=True,
)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--context", type=int, default=1024, help="prompt tokens before decoding")
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--steps", type=int, default=8, help="decode steps per build per round")
    ap.add_argument("--layers", type=int, default=30)
    ap.add_argument("--vocab", type=int, default=49152)
    ap.add_argument("--dtype", default=None, help="weight dtype of both builds (default f32)")
    ap.add_argument("--no-reference", action="store_true", help="skip transformers")
    ap.add_argument("--dir", type=Path, default=None, help="work folder (default: a temp one)")
    ap.add_argument("--kernel", action="store_true", help="time the attention kernels alone")
    ap.add_argument(
        "--kernel-cpu", action="store_true", help="the kernels alone, one thread, CPU time"
    )
    args = ap.parse_args()
    if args.kernel or args.kernel_cpu:
        kernel_bench(args)
        return

    work = args.dir or Path(tempfile.mkdtemp(prefix="bench_kv_dtype_"))
    total = args.context + args.rounds * args.steps
    ckpt = work / "model"
    if not (ckpt / "config.json").is_file():
        make_tiny_model(
            "llama",
            ckpt,
            seed=3,
            std=0.05,
            num_hidden_layers=args.layers,
            vocab_size=args.vocab,
            max_position_embeddings=max(2048, total),
            **SMOLLM2,
        )
    models = {}
    for kv in ("f32", "q8_0"):
        t0 = time.perf_counter()
        models[kv] = ckir.compile(
            ckpt, work / f"build_{kv}", max_context=total, dtype=args.dtype, kv_dtype=kv
        )
        totals = json.loads((work / f"build_{kv}" / "layout.json").read_text())["totals"]
        print(
            f"{kv:5} KV: compiled in {time.perf_counter() - t0:.1f}s; "
            f"kv_cache {totals['kv_cache'] / 2**20:.2f} MiB, "
            f"weight {totals['weight'] / 2**20:.1f} MiB"
        )
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, args.vocab, total)
    for kv, m in models.items():
        t0 = time.perf_counter()
        m.reset()
        m.prefill(tokens[: args.context])
        print(f"{kv:5} KV: prefill {args.context} tokens {time.perf_counter() - t0:.2f}s")

    clocks = {"wall": time.perf_counter, "cpu": time.process_time}
    times = {c: {kv: [] for kv in models} for c in clocks}  # seconds per token, per round
    logits: dict[str, list[np.ndarray]] = {kv: [] for kv in models}
    pos = args.context
    load0 = os.getloadavg()
    for r in range(args.rounds):
        order = list(models) if r % 2 == 0 else list(reversed(models))
        for kv in order:
            m = models[kv]
            t0 = {c: f() for c, f in clocks.items()}
            for i in range(args.steps):
                logits[kv].append(m.decode(int(tokens[pos + i])))
            for c, f in clocks.items():
                times[c][kv].append((f() - t0[c]) / args.steps)
        pos += args.steps
    load1 = os.getloadavg()
    print(
        f"decode at positions {args.context}..{pos - 1} ({args.rounds} rounds x {args.steps} "
        f"steps per build, alternating); host load average (1 min) {load0[0]:.1f} before, "
        f"{load1[0]:.1f} after"
    )
    for c in clocks:
        for kv, ts in times[c].items():
            med = statistics.median(ts)
            print(
                f"{kv:5} KV, {c:4} time: median {med * 1e3:.2f} ms/token = {1 / med:.1f} tok/s "
                f"(rounds {min(ts) * 1e3:.2f}..{max(ts) * 1e3:.2f} ms)"
            )
    for c in clocks:
        ratios = [q / f for q, f in zip(times[c]["q8_0"], times[c]["f32"], strict=True)]
        q1, _, q3 = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else ratios * 3
        print(
            f"q8_0 / f32 {c} time per token (paired rounds): median "
            f"{statistics.median(ratios):.3f} (quartiles {q1:.3f}-{q3:.3f}, "
            f"range {min(ratios):.3f}-{max(ratios):.3f})"
        )

    dec = {kv: np.stack(v) for kv, v in logits.items()}

    def rel(a: np.ndarray, b: np.ndarray) -> float:
        return float(np.abs(a - b).max() / np.abs(b).max())

    print(
        "decode logits, q8_0 KV vs f32 KV: max |diff| / max |logit| "
        f"{rel(dec['q8_0'], dec['f32']):.4g}"
    )
    if not args.no_reference:
        import torch
        import transformers

        hf = transformers.AutoModelForCausalLM.from_pretrained(ckpt, dtype=torch.float32).eval()
        with torch.no_grad():  # decode of the token at position p: the logits row p
            ref = hf(torch.tensor(tokens[None, :pos])).logits[0, args.context : pos].numpy()
        for kv, d in dec.items():
            top1 = float((d.argmax(1) == ref.argmax(1)).mean())
            print(
                f"{kv:5} KV vs transformers: max |diff| / max |logit| {rel(d, ref):.4g}, "
                f"top-1 agree {top1:.3f}"
            )
    for m in models.values():
        m.close()


def kernel_bench(args: argparse.Namespace) -> None:
    """Decode attention over cold f32 and Q8_0 caches, paired (see the module doc)."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import bench_attention_decode as bad
    import bench_kernels as bk

    H, KV, D, P = 9, 3, 64, args.context
    rng = np.random.default_rng(0)
    f32 = np.float32
    caches = [rng.standard_normal((2, P + 1, KV * D)).astype(f32) for _ in range(args.layers)]
    qcaches = [(quant.quantize_q8_0(k), quant.quantize_q8_0(v)) for k, v in caches]
    q = rng.standard_normal((1, H * D)).astype(f32)
    N = K = 1024
    ws = [rng.standard_normal((N, K)).astype(f32) for _ in range(args.layers)]
    x, y = rng.standard_normal(K).astype(f32), np.zeros(N, f32)
    out = np.zeros((1, H * D), f32)
    with tempfile.TemporaryDirectory() as d:
        lib = bk.build_runtime("native", Path(d))
        lib.set_num_threads(2)
        calls = {
            kv: [
                (
                    bk.bound_call(lib, "gemv_f32", [x, w, y, N, K]),
                    bk.bound_call(lib, f"attention_{kv}", [q, *c, out, 1, P, H, KV, D, *db]),
                )
                for c, w in zip(cs, ws, strict=True)
            ]
            for kv, cs, db in (
                ("f32", [tuple(c) for c in caches], []),
                ("q8_0", qcaches, [D // 32]),
            )
        }

        if args.kernel_cpu:
            lib.set_num_threads(1)
            kernel_cpu_rounds({kv: [a for _, a in cs] for kv, cs in calls.items()}, args)
            return
        times, ratios = bad.paired_rounds(calls, args.rounds)
    q1, _, q3 = statistics.quantiles(ratios, n=4)
    print(
        f"decode attention T=1 P={P} H={H} KV={KV} D={D}, cache cold, 2 threads, "
        f"{args.rounds} rounds: f32 {statistics.median(times['f32']) * 1e6:.1f} us, "
        f"q8_0 {statistics.median(times['q8_0']) * 1e6:.1f} us a call; q8_0 / f32 "
        f"median {statistics.median(ratios):.3f} (quartiles {q1:.3f}-{q3:.3f}, "
        f"range {min(ratios):.3f}-{max(ratios):.3f}); best round f32 "
        f"{min(times['f32']) * 1e6:.1f} us, q8_0 {min(times['q8_0']) * 1e6:.1f} us"
    )


def kernel_cpu_rounds(calls: dict[str, list], args: argparse.Namespace) -> None:
    """One thread's CPU time of each kernel's calls (one per cache), warm and cold,
    the kernels alternating per round; prints medians and the paired ratio."""
    flush = np.zeros(8 << 20, np.float32)
    for mode in ("warm", "cold"):
        times: dict[str, list[float]] = {kv: [] for kv in calls}
        for r in range(args.rounds):
            for kv in list(calls) if r % 2 == 0 else list(reversed(calls)):
                total = 0.0
                for call in calls[kv]:
                    if mode == "cold":
                        flush += 1.0
                    else:
                        call()
                    t0 = time.thread_time()
                    call()
                    total += time.thread_time() - t0
                times[kv].append(total / len(calls[kv]))
        ratios = [q / f for q, f in zip(times["q8_0"], times["f32"], strict=True)]
        q1, _, q3 = statistics.quantiles(ratios, n=4)
        print(
            f"decode attention T=1 P={args.context} H=9 KV=3 D=64, {mode}, 1 thread, CPU time, "
            f"{args.rounds} rounds: f32 {statistics.median(times['f32']) * 1e6:.1f} us, "
            f"q8_0 {statistics.median(times['q8_0']) * 1e6:.1f} us a call; q8_0 / f32 median "
            f"{statistics.median(ratios):.3f} (quartiles {q1:.3f}-{q3:.3f})"
        )


if __name__ == "__main__":
    main()
