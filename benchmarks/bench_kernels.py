"""Quick timings of the runtime's hot kernels (not a test; run by hand).

    .venv/bin/python benchmarks/bench_kernels.py [--isa native] [--threads 1 2]
    .venv/bin/python benchmarks/bench_kernels.py --cold

Prints GFLOP/s for gemm/matmul, GB/s of weights streamed for gemv, and the
time of attention calls.  The machine is shared: compare ratios within a run.

``--ab DIR`` is a paired A/B of the kernels against another runtime tree (DIR
holds ``kernels/`` and ``include/``, e.g. ``git archive main runtime``): both
libraries are built with the same compiler and flags, loaded into this process,
and every case alternates old and new for ``--rounds`` rounds; it prints the
median time of each and the ratio new/old (below 1: the new code is faster).

``--amx`` is the same paired comparison inside one library: the prefill GEMMs
that AMX takes (bf16p; q8_0p / q4_1p on int8 x) with the tiles on against off
(``ckir_set_amx``), alternating in rounds, with each side's GFLOP/s; on a
CPU without AMX it says so and stops (``--amx emulate`` runs the
emulated tiles instead: a check that the comparison runs, no speed).

``--cold`` measures the prefill GEMM shapes with the weights cold, as in a
model's prefill (no model here fits in cache): each call takes the next of
several weight copies (>= 96 MB in all).  It also runs two independent
single-thread GEMMs at once (two Python threads; ctypes releases the GIL) to
show how far the machine itself scales from one thread to two.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
from kernel_lib import RuntimeLib, build_runtime, pack_block_panels  # noqa: E402
from test_panel_kernels import pack_bf16p, pack_f32p  # noqa: E402

from ckir import quant  # noqa: E402
from ckir.runtime_build import BASE_CFLAGS, LINK_LIBS, isa_flags  # noqa: E402


def add_cpu_option(ap: argparse.ArgumentParser) -> None:
    """``--cpu``: time the calling thread's CPU time instead of the wall clock."""
    ap.add_argument(
        "--cpu",
        action="store_true",
        help="time the calling thread's CPU time (with --threads 1 only): the kernels' own "
        "time on a host whose other jobs take the core away (stalls on memory included)",
    )


def clock_of(args: argparse.Namespace):
    """The clock ``--cpu`` asks for (``time.thread_time``, refused unless ``--threads 1``),
    else ``time.perf_counter``."""
    if args.cpu and args.threads != 1:
        sys.exit("--cpu measures the calling thread only: use it with --threads 1")
    return time.thread_time if args.cpu else time.perf_counter


def best_time(lib, name: str, args: list, reps: int) -> float:
    lib.call(name, *args)
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        lib.call(name, *args)
        best = min(best, time.perf_counter() - t0)
    return best


COLD_BYTES = 96e6
PREFILL_SHAPES = [(128, 576, 576), (128, 1536, 576), (128, 4864, 896), (128, 896, 4864)]


def gemm_copies(rng, M: int, N: int, K: int):
    """x, y and enough copies of w[N, K] that cycling through them misses every cache."""
    copies = max(2, int(COLD_BYTES // (N * K * 4)))
    ws = [rng.standard_normal((N, K), dtype=np.float32) for _ in range(copies)]
    return rng.standard_normal((M, K), dtype=np.float32), ws, np.empty((M, N), np.float32)


def cold_gflops(lib, x, ws, y, reps: int) -> float:
    M, K = x.shape
    N = y.shape[1]
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        for w in ws:
            lib.call("gemm_f32", x, w, y, M, N, K)
        best = min(best, (time.perf_counter() - t0) / len(ws))
    return 2 * M * N * K / best / 1e9


def cold_gemms(lib, rng, reps: int) -> None:
    for M, N, K in PREFILL_SHAPES:
        x, ws, y = gemm_copies(rng, M, N, K)
        per = []
        for nt in (1, 2):
            lib.set_num_threads(nt)
            per.append(cold_gflops(lib, x, ws, y, reps))
        print(f"gemm cold {M}x{N}x{K}: 1 thread {per[0]:6.1f}, 2 threads {per[1]:6.1f} GFLOP/s")
    # two independent single-thread GEMMs at once vs one alone
    M, N, K = 128, 2432, 896
    probs = [gemm_copies(rng, M, N, K) for _ in range(2)]
    lib.set_num_threads(1)
    alone = cold_gflops(lib, *probs[0], reps)
    rates: list[float] = [0.0, 0.0]

    def run(i: int) -> None:
        lib.set_num_threads(1)  # OpenMP settings are per thread
        rates[i] = cold_gflops(lib, *probs[i], reps)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    print(
        f"gemm cold {M}x{N}x{K}, 1 thread: alone {alone:6.1f}; two independent at once "
        f"{rates[0]:6.1f} + {rates[1]:6.1f} = {sum(rates):6.1f} GFLOP/s"
    )


def build_tree(tree: Path, isa: str, out: Path) -> RuntimeLib:
    """A library of every kernel source of another runtime tree, built as build_library does."""
    sources = sorted(str(p) for p in (tree / "kernels").glob("*.c"))
    if not sources:
        sys.exit(f"bench_kernels: no kernels/*.c under {tree}")
    cmd = ["cc", *BASE_CFLAGS, *isa_flags(isa), "-I", str(tree / "include"), "-shared"]
    subprocess.run([*cmd, *sources, "-o", str(out), *LINK_LIBS], check=True)
    return RuntimeLib(out)


def bf16(a: np.ndarray) -> np.ndarray:
    """bf16 bits (truncated) of float32 values."""
    return (a.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16)


def q8_0_blocks(rng, N: int, K: int) -> np.ndarray:
    """N rows of K/32 q8_0 blocks (f16 scale, 32 int8) with finite random values."""
    nb = K // 32
    d = (rng.random((N, nb, 1)) * 0.01 + 1e-3).astype(np.float16).view(np.uint8)
    q = rng.integers(-127, 128, (N, nb, 32)).astype(np.int8).view(np.uint8)
    return np.ascontiguousarray(np.concatenate([d, q], axis=2)).reshape(N, nb * 34)


def q4_1_blocks(rng, N: int, K: int) -> np.ndarray:
    """N rows of K/32 q4_1 blocks (f16 scale, f16 min, 16 nibble bytes), finite values."""
    nb = K // 32
    d = (rng.random((N, nb, 1)) * 0.01 + 1e-3).astype(np.float16).view(np.uint8)
    m = (rng.random((N, nb, 1)) * -0.1).astype(np.float16).view(np.uint8)
    q = rng.integers(0, 256, (N, nb, 16)).astype(np.uint8)
    return np.ascontiguousarray(np.concatenate([d, m, q], axis=2)).reshape(N, nb * 20)


def ab_cases(rng) -> list[tuple[str, str, list]]:
    """(label, kernel, args) of the kernels the vector layer rewrote, at decode and
    prefill shapes of SmolLM2-135M / Qwen2-0.5B."""
    f = lambda *shape: rng.standard_normal(shape, dtype=np.float32)  # noqa: E731
    cases: list[tuple[str, str, list]] = []
    for n in (1536, 4864, 128 * 1536):
        cases.append((f"swiglu n={n}", "swiglu_f32", [f(n), f(n), np.empty(n, np.float32), n]))
        cases.append((f"gelu n={n}", "gelu_tanh_f32", [f(n), np.empty(n, np.float32), n]))
        cases.append((f"add n={n}", "add_f32", [f(n), f(n), np.empty(n, np.float32), n]))
        cases.append((f"relu n={n}", "relu_f32", [f(n), np.empty(n, np.float32), n]))
    for T, E in ((1, 576), (1, 896), (128, 576)):
        x, g, b, o = f(T, E), f(E), f(E), np.empty((T, E), np.float32)
        cases.append((f"rmsnorm {T}x{E}", "rmsnorm_f32", [x, g, o, T, E, 1e-5]))
        cases.append((f"layernorm {T}x{E}", "layernorm_f32", [x, g, b, o, T, E, 1e-5]))
        s, h = np.empty_like(o), np.empty_like(o)
        cases.append((f"add_rmsnorm {T}x{E}", "add_rmsnorm_f32", [x, f(T, E), g, s, h, T, E, 1e-5]))
    for rows, cols in ((9, 160), (9 * 128, 128), (1, 49152)):
        x, o = f(rows, cols), np.empty((rows, cols), np.float32)
        cases.append((f"softmax {rows}x{cols}", "softmax_f32", [x, o, rows, cols]))
    tg = rng.integers(0, 49152, 16).astype(np.int32)
    cases.append(
        (
            "cross_entropy 16x49152",
            "cross_entropy_f32",
            [f(16, 49152), tg, np.empty(1, np.float32), 16, 49152],
        )
    )
    for T, H, KV, D in ((1, 9, 3, 64), (128, 9, 3, 64), (1, 14, 2, 64)):
        q, k = f(T, H * D), f(T, KV * D)
        cases.append((f"rope T={T} H={H} D={D}", "rope_f32", [q, k, T, H, KV, D, 100, 1e4]))
    for T, P, H, KV, D in ((1, 511, 9, 3, 64), (128, 0, 9, 3, 64), (1, 1023, 14, 2, 64)):
        q, kc, vc = f(T, H * D), f(P + T, KV * D), f(P + T, KV * D)
        cases.append(
            (
                f"attention T={T} P={P}",
                "attention_f32",
                [q, kc, vc, np.empty_like(q), T, P, H, KV, D],
            )
        )
    for N, K in ((576, 576), (1536, 576), (576, 1536), (4864, 896), (49152, 576)):
        x, w = f(K), f(N, K)
        cases.append((f"gemv {N}x{K}", "gemv_f32", [x, w, np.empty(N, np.float32), N, K]))
        cases.append(
            (f"gemv_bf16 {N}x{K}", "gemv_bf16", [x, bf16(w), np.empty(N, np.float32), N, K])
        )
        y = np.empty(N, np.float32)
        cases.append((f"gemv_q8_0 {N}x{K}", "gemv_q8_0", [x, q8_0_blocks(rng, N, K), y, N, K]))
        cases.append((f"gemv_q4_1 {N}x{K}", "gemv_q4_1", [x, q4_1_blocks(rng, N, K), y, N, K]))
    for M, N, K in PREFILL_SHAPES:
        x, w = f(M, K), f(N, K)
        cases.append(
            (f"gemm M={M} {N}x{K}", "gemm_f32", [x, w, np.empty((M, N), np.float32), M, N, K])
        )
    for M in (2, 5, 8):
        N, K = 1536, 576
        x, w = f(M, K), f(N, K)
        cases.append(
            (f"gemm M={M} {N}x{K}", "gemm_f32", [x, w, np.empty((M, N), np.float32), M, N, K])
        )
    K, N, Nkv = 576, 576, 192
    x, wq, wk, wv = f(K), f(N, K), f(Nkv, K), f(Nkv, K)
    out = [np.empty(N, np.float32), np.empty(Nkv, np.float32), np.empty(Nkv, np.float32)]
    cases.append(
        ("gemv_qkv 576+192+192 x576", "gemv_qkv_f32", [x, wq, wk, wv, *out, N, Nkv, Nkv, K])
    )
    wg, wu = f(1536, K), f(1536, K)
    cases.append(
        (
            "gemv_gate_up 1536x576",
            "gemv_gate_up_f32",
            [x, wg, wu, np.empty(1536, np.float32), 1536, K],
        )
    )
    xm = f(128, K)
    cases.append(
        (
            "gemm_gate_up 128x1536x576",
            "gemm_gate_up_f32",
            [xm, wg, wu, np.empty((128, 1536), np.float32), 128, 1536, K],
        )
    )
    for M in (16, 128):
        N, K = 1536, 576
        x, w, y = f(M, K), f(N, K), np.empty((M, N), np.float32)
        cases.append((f"gemm_bf16 M={M} {N}x{K}", "gemm_bf16", [x, bf16(w), y, M, N, K]))
        wq = q8_0_blocks(rng, N, K)
        cases.append((f"gemm_q8_0 M={M} {N}x{K}", "gemm_q8_0", [x, wq, y, M, N, K]))
        cases.append((f"gemm_f32p M={M} {N}x{K}", "gemm_f32p", [x, pack_f32p(w), y, M, N, K]))
        cases.append((f"gemm_bf16p M={M} {N}x{K}", "gemm_bf16p", [x, pack_bf16p(w), y, M, N, K]))
    for dt in ("q8_0", "q4_0", "q4_1"):  # row-major blocks (--no-panels): fused decode GEMVs
        wg, wu = (quant.quantize(f(1536, 576) * np.float32(576**-0.5), dt) for _ in range(2))
        wq, wk = (quant.quantize(f(n, 576) * np.float32(576**-0.5), dt) for n in (576, 192))
        o1536, o576, o192 = (np.empty(n, np.float32) for n in (1536, 576, 192))
        cases.append(
            (
                f"gemv_gate_up_{dt} 1536x576",
                f"gemv_gate_up_{dt}",
                [f(576), wg, wu, o1536, 1536, 576],
            )
        )
        cases.append(
            (
                f"gemv_qkv_{dt} 576+192+192 x576",
                f"gemv_qkv_{dt}",
                [f(576), wq, wk, wk, o576, o192, o192.copy(), 576, 192, 192, 576],
            )
        )
    for dt in ("q8_0p", "q4_1p"):  # block panels: prefill on int8 x, decode GEMV
        for N, K in ((1536, 576), (576, 1536)):
            w = pack_block_panels(f(N, K) * np.float32(K**-0.5), dt)
            xm, y = f(128, K), np.empty((128, N), np.float32)
            cases.append((f"gemm_{dt} M=128 {N}x{K}", f"gemm_{dt}", [xm, w, y, 128, N, K]))
            cases.append((f"gemv_{dt} {N}x{K}", f"gemv_{dt}", [f(K), w, y[0], N, K]))
    for T, E in ((1, 576), (128, 576)):
        tok = rng.integers(0, 4096, T).astype(np.int32)
        cases.append(
            (
                f"embed_bf16 {T}x{E}",
                "embed_bf16",
                [tok, bf16(f(4096, E)), np.empty((T, E), np.float32), T, E],
            )
        )
    return cases


def bound_call(lib: RuntimeLib, name: str, args: list):
    """A no-argument callable running kernel `name` on `args` (ctypes arguments
    converted once, so the timing loop measures the kernel, not the argument checks)."""
    spec = lib.registry[name]
    fn = lib._fn(spec.c_name, spec)
    nb = len(spec.operands)
    cargs = [a.ctypes.data for a in args[:nb]]
    cargs += [
        int(v) if p.type == "i64" else float(v) for p, v in zip(spec.params, args[nb:], strict=True)
    ]
    return lambda: fn(*cargs)


def one_time(call, inner: int) -> float:
    t0 = time.perf_counter()
    for _ in range(inner):
        call()
    return (time.perf_counter() - t0) / inner


def ab(tree: Path, isa: str, threads: int, rounds: int, only: str) -> None:
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as d:
        old = build_tree(tree, isa, Path(d) / "libold.so")
        new = build_runtime(isa, Path(d))
        print(f"A/B {isa} ({new.isa}), {threads} thread(s), {rounds} rounds")
        print(f"{'case':32s} {'old us':>10s} {'new us':>10s}  new/old")
        for lib in (old, new):
            lib.set_num_threads(threads)
        for label, name, args in ab_cases(rng):
            if only not in label:
                continue
            calls = {"old": bound_call(old, name, args), "new": bound_call(new, name, args)}
            one = one_time(calls["new"], 3)
            inner = max(1, min(5000, int(1e-3 / max(one, 1e-7))))
            times: dict[str, list[float]] = {"old": [], "new": []}
            for r in range(rounds):
                for key in ("old", "new") if r % 2 == 0 else ("new", "old"):
                    times[key].append(one_time(calls[key], inner))
            mo, mn = statistics.median(times["old"]), statistics.median(times["new"])
            print(f"{label:32s} {mo * 1e6:10.2f} {mn * 1e6:10.2f}  {mn / mo:5.2f}")


def amx_cases(rng) -> list[tuple[str, str, list]]:
    """The GEMMs AMX takes, at prefill shapes of SmolLM2 and Qwen2 (M = 128)."""
    cases = []
    for N, K in ((1536, 576), (576, 1536), (4864, 896), (896, 4864)):
        M = 128
        x = rng.standard_normal((M, K), dtype=np.float32)
        w = (rng.standard_normal((N, K)) * K**-0.5).astype(np.float32)
        y = np.empty((M, N), np.float32)
        for dt in ("bf16p", "q8_0p", "q4_1p"):
            wp = pack_bf16p(w) if dt == "bf16p" else pack_block_panels(w, dt)
            cases.append((f"gemm_{dt} M={M} {N}x{K}", f"gemm_{dt}", [x, wp, y, M, N, K]))
    return cases


def amx_ab(isa: str, threads: int, rounds: int, emulate: bool) -> None:
    from kernel_lib import AMX_EMULATE, AMX_OFF, AMX_ON

    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as d:
        lib = build_runtime(isa, Path(d))
        on = lib.set_amx(AMX_EMULATE if emulate else AMX_ON)
        if on == AMX_OFF:
            print(f"no AMX here: the {lib.isa} runtime on this CPU keeps its tiles off")
            return
        lib.set_num_threads(threads)
        print(f"AMX {'emulated' if emulate else 'tiles'} against off, {threads} thread(s)")
        print(f"{'case':32s} {'off us':>10s} {'AMX us':>10s}  AMX/off  off, AMX GFLOP/s")
        for label, name, args in amx_cases(rng):
            call = bound_call(lib, name, args)
            M = int(args[-3])
            flops = 2.0 * M * int(args[-2]) * int(args[-1])
            times: dict[int, list[float]] = {AMX_OFF: [], on: []}
            for r in range(rounds):
                for mode in (AMX_OFF, on) if r % 2 == 0 else (on, AMX_OFF):
                    lib.set_amx(mode)
                    times[mode].append(one_time(call, 3 if emulate else 20))
            lib.set_amx(on)
            off_t, on_t = statistics.median(times[AMX_OFF]), statistics.median(times[on])
            us = f"{off_t * 1e6:10.1f} {on_t * 1e6:10.1f}  {on_t / off_t:6.2f}"
            print(f"{label:32s} {us}  {flops / off_t / 1e9:7.1f} {flops / on_t / 1e9:7.1f}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--isa", default="native")
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--cold", action="store_true", help="prefill GEMMs with cold weights")
    ap.add_argument("--ab", type=Path, metavar="DIR", help="paired A/B against the runtime in DIR")
    ap.add_argument("--rounds", type=int, default=15, help="rounds of the --ab comparison")
    ap.add_argument("--only", default="", help="--ab: only the cases whose label contains this")
    ap.add_argument(
        "--amx",
        nargs="?",
        const="tiles",
        choices=["tiles", "emulate"],
        help="the prefill GEMMs with AMX on against off (emulate: the emulated tiles)",
    )
    args = ap.parse_args()
    if args.amx:
        for nt in args.threads:
            amx_ab(args.isa, nt, args.rounds, args.amx == "emulate")
        return
    if args.ab:
        for nt in args.threads:
            ab(args.ab, args.isa, nt, args.rounds, args.only)
        return
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as d:
        lib = build_runtime(args.isa, Path(d))
        print(f"library ISA path: {lib.isa}")
        if args.cold:
            cold_gemms(lib, rng, args.reps)
            return
        for nt in args.threads:
            lib.set_num_threads(nt)
            print(f"--- {nt} thread(s)")
            for M, N, K in [(512, 2048, 2048), (128, 576, 576), (128, 1536, 576), (128, 4864, 896)]:
                x = rng.standard_normal((M, K), dtype=np.float32)
                w = rng.standard_normal((N, K), dtype=np.float32)
                y = np.empty((M, N), np.float32)
                t = best_time(lib, "gemm_f32", [x, w, y, M, N, K], args.reps)
                print(f"gemm   {M}x{N}x{K}: {2 * M * N * K / t / 1e9:7.1f} GFLOP/s")
            M, N, K = 512, 2048, 2048
            a = rng.standard_normal((M, K), dtype=np.float32)
            b = rng.standard_normal((K, N), dtype=np.float32)
            c = np.empty((M, N), np.float32)
            t = best_time(lib, "matmul_f32", [a, b, c, M, N, K], args.reps)
            print(f"matmul {M}x{N}x{K}: {2 * M * N * K / t / 1e9:7.1f} GFLOP/s")
            for N, K in [(4864, 896), (49152, 576), (2048, 2048)]:
                x = rng.standard_normal(K, dtype=np.float32)
                w = rng.standard_normal((N, K), dtype=np.float32)
                y = np.empty(N, np.float32)
                t = best_time(lib, "gemv_f32", [x, w, y, N, K], args.reps * 4)
                print(f"gemv   {N}x{K}: {N * K * 4 / t / 1e9:7.1f} GB/s  ({t * 1e6:.0f} us)")
            for T, P, H, KV, D in [(1, 511, 9, 3, 64), (128, 0, 9, 3, 64), (1, 1023, 14, 2, 64)]:
                q = rng.standard_normal((T, H * D), dtype=np.float32)
                kc = rng.standard_normal((P + T, KV * D), dtype=np.float32)
                vc = rng.standard_normal((P + T, KV * D), dtype=np.float32)
                out = np.empty_like(q)
                attn = [q, kc, vc, out, T, P, H, KV, D]
                t = best_time(lib, "attention_f32", attn, args.reps * 4)
                print(f"attention T={T} P={P} H={H} KV={KV} D={D}: {t * 1e6:8.1f} us")
                if P == 0:  # the training shape: backward of the same call
                    dout = rng.standard_normal(q.shape, dtype=np.float32)
                    grads = [np.empty_like(q), np.empty_like(kc), np.empty_like(vc)]
                    bwd = [q, kc, vc, out, dout, *grads, T, H, KV, D]
                    tb = best_time(lib, "attention_bwd_f32", bwd, args.reps * 4)
                    print(f"attention_bwd T={T} H={H} KV={KV} D={D}: {tb * 1e6:8.1f} us", end="")
                    print(f"  ({tb / t:.2f}x forward)")


if __name__ == "__main__":
    main()
