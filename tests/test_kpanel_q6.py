"""q6_kp (Q6_K super-blocks in 32-row panels): the SIMD core of runtime/kernels/quant_q6kp.c
and the public kernels that run on it, against NumPy oracles.

Oracles:
- an exact emulation of the core's contract (ckir_kpanel.h), in NumPy: x quantized per
  super-block of 256 (Q8_K), each row's super-block integer S - 32 M formed exactly
  (int64), then per row acc = acc + (d d_x) (float)(S - 32 M) in fp32, super-block after
  super-block; the outputs must equal it bit for bit (no fused multiply-add, the same
  order for every number of rows of x);
- the row-major kernels: gemv_q6_kp equals ckir_ref_gemv_q6_k (the scalar reference of
  the unpacked rows) and its own reference twin bit for bit;
- the float64 product of the dequantized weights and the Q8_K-rounded x, within 1e-5 of
  the magnitude of the sum (the fp32 rounding of the kernels' partial sums);
- gemm_q6_kp on int8 x: row m is gemv_q6_kp of row m bit for bit (M = 1..9: 1 to 4 rows
  of x per core call and every tail); on fp32 x (scalar builds) the float64 product;
- fused qkv / gate_up: the unfused kernels.
Builds: native (AVX-512 VNNI here), avx2, scalar, and the core alone compiled for
AVX-512 without VNNI (vpmaddubsw + vpmaddwd), for AVX-512 VNNI without BW (the ymm core
with vpdpbusd) and for AVX-VNNI, where the CPU runs them.  Shapes: N = 1, 17, 31, 32, 33, 95 (panel
tails), K = 256, 512, 2304; extreme levels (every q 63, every q 0) and scales (127,
-128) against |a| = 127.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np
import pytest
from kernel_lib import build_runtime, cpu_flags, isa_supported, q6_kp_slots

from ckir import kquant, quant
from ckir.reference import kernels as reference
from ckir.runtime_build import build_standalone_library, runtime_dir

F32 = np.float32
PANEL = 32
BLOCK = 210  # bytes of a Q6_K super-block
NS = (1, 17, 31, 32, 33, 95)
KS = (256, 512, 2304)


class Q8K(ctypes.Structure):
    """ckir_q8k (ckir_kpanel.h): one row of x in Q8_K."""

    _fields_ = [("a", ctypes.c_void_p), ("dx", ctypes.c_void_p), ("bs", ctypes.c_void_p)]


class Lib:
    """A runtime build (or the core alone) through ctypes: every argument a NumPy array
    (its address) or an int (int64_t)."""

    def __init__(self, path: Path, isa: str):
        self.isa = isa
        self.dll = ctypes.CDLL(str(path))
        core = self.dll.ckir_internal_core_q6_kp
        core.restype = None
        core.argtypes = [
            ctypes.c_void_p,
            ctypes.c_int64,
            ctypes.c_void_p,
            ctypes.c_int,
            ctypes.c_int64,
            ctypes.c_void_p,
        ]

    def __call__(self, name: str, *args) -> None:
        fn = getattr(self.dll, name)
        fn.restype = None
        fn.argtypes = [
            ctypes.c_void_p if isinstance(a, np.ndarray) else ctypes.c_int64 for a in args
        ]
        fn(*[a.ctypes.data if isinstance(a, np.ndarray) else int(a) for a in args])

    def threads(self, n: int) -> None:
        self.dll.ckir_set_num_threads(ctypes.c_int(n))

    @property
    def int8_gemm(self) -> bool:
        """Whether gemm_<p> takes int8 x (a SIMD build): each row is then gemv_<p>'s."""
        return bool(self.dll.ckir_runtime_qp_int8_gemm())

    def core(self, panel: np.ndarray, nb: int, xs: list[tuple], pfd: int) -> np.ndarray:
        """ckir_internal_core_q6_kp of one panel against the Q8_K rows xs (a, dx, bs)."""
        arr = (Q8K * len(xs))(
            *[Q8K(a.ctypes.data, dx.ctypes.data, bs.ctypes.data) for a, dx, bs in xs]
        )
        out = np.full(len(xs) * PANEL, np.nan, F32)
        self.dll.ckir_internal_core_q6_kp(panel.ctypes.data, nb, arr, len(xs), pfd, out.ctypes.data)
        return out.reshape(len(xs), PANEL)


@pytest.fixture(scope="module", params=["native", "avx2", "scalar"])
def lib(request, tmp_path_factory) -> Lib:
    isa = request.param
    if not isa_supported(isa):
        pytest.skip(f"CPU lacks {isa}")
    rt = build_runtime(isa, tmp_path_factory.mktemp(f"kp6_{isa}"))
    return Lib(rt.path, isa)


#: the core alone in builds the runtime's ISA choices do not make here: name -> (compiler
#: flags, CPU flags it needs)
CORE_BUILDS = {
    # AVX-512 without VNNI: vpmaddubsw + vpmaddwd on zmm
    "avx512novnni": (["-march=skylake-avx512"], {"avx512f", "avx512bw", "avx512vl"}),
    # AVX-512F + VL + VNNI without BW: the ymm core with vpdpbusd on ymm
    "ymmvnni": (
        ["-march=haswell", "-mavx512f", "-mavx512vl", "-mavx512vnni"],
        {"avx512f", "avx512vl", "avx512_vnni"},
    ),
    # AVX-VNNI (VEX) on the AVX2 core
    "avxvnni": (["-march=haswell", "-mavxvnni"], {"avx2", "fma", "f16c", "avx_vnni"}),
}


@pytest.fixture(scope="module")
def cores(tmp_path_factory) -> list[Lib]:
    """quant_q6kp.c alone (-Werror) in every CORE_BUILDS build this CPU can run."""
    out = []
    for name, (flags, need) in CORE_BUILDS.items():
        if not need <= cpu_flags():
            continue
        path = tmp_path_factory.mktemp(f"kp6_{name}") / f"libkp6_{name}.so"
        src = runtime_dir() / "kernels" / "quant_q6kp.c"
        build_standalone_library(path, [src], isa="native", extra_flags=[*flags, "-Werror"])
        out.append(Lib(path, name))
    return out


# ----------------------------------------------------------------------- the data


def random_rows(rng: np.random.Generator, n: int, nb: int) -> np.ndarray:
    """Random Q6_K rows (uint8 [n, nb * 210]): every byte random but the f16 d, finite
    and of magnitudes 2^-14 .. 2^3 with either sign."""
    raw = rng.integers(0, 256, (n * nb, BLOCK), dtype=np.uint8)
    d = rng.uniform(1, 2, n * nb) * 2.0 ** rng.integers(-14, 4, n * nb)
    d *= rng.choice([-1.0, 1.0], n * nb)
    raw[:, 208:210] = d.astype(np.float16).view(np.uint8).reshape(-1, 2)
    return raw.reshape(n, nb * BLOCK)


def extreme_rows(n: int, nb: int, level: int, scale: int) -> np.ndarray:
    """Q6_K rows whose every q is `level` (63: all bits set, or 0) and every int8 scale
    `scale`, d = 1."""
    raw = np.zeros((n * nb, BLOCK), np.uint8)
    raw[:, :192] = 0xFF if level == 63 else 0
    assert level in (0, 63)
    raw[:, 192:208] = np.array([scale], np.int8).view(np.uint8)[0]
    raw[:, 208:210] = np.array([1.0], np.float16).view(np.uint8)
    return raw.reshape(n, nb * BLOCK)


def q8k(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """x [K] in Q8_K as the kernels quantize it: a int8 [K], dx fp32 [K/256], bs int16
    [K/16] (the sums of 16 consecutive a)."""
    a, dx = reference.quantize_x(x, 256)
    a8 = np.ascontiguousarray(a.reshape(-1), dtype=np.int8)
    bs = a.reshape(-1, 16).sum(axis=1).astype(np.int16)
    return a8, np.ascontiguousarray(dx, dtype=F32), bs


def exact(wq: np.ndarray, x: np.ndarray) -> np.ndarray:
    """The core's contract for rows wq (Q6_K, uint8 [N, nb * 210]) and x [K], fp32 [N]:
    per super-block the exact integer sum_i sc[i] sum_l (q - 32) a, then acc = acc +
    (d dx) (float) that, in fp32, in super-block order."""
    n = wq.shape[0]
    a, dx = reference.quantize_x(x, 256)
    nb = a.shape[0]
    blk = wq.reshape(n * nb, BLOCK)
    lv = kquant._q6_levels(blk).astype(np.int64).reshape(n, nb, 16, 16)  # q - 32
    sc = blk[:, 192:208].view(np.int8).astype(np.int64).reshape(n, nb, 16)
    t = (sc * (lv * a.reshape(1, nb, 16, 16)).sum(axis=3)).sum(axis=2)  # [n, nb], exact
    d = blk[:, 208:210].copy().view(np.float16).astype(F32).reshape(n, nb)
    acc = np.zeros(n, F32)
    for b in range(nb):
        acc = acc + (d[:, b] * dx[b]).astype(F32) * t[:, b].astype(F32)
    return acc


def oracle(wq: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the float64 product of the dequantized rows and the Q8_K-rounded x, the magnitude
    sum |w| |x| that bounds the fp32 rounding of the partial sums)."""
    wd = quant.dequantize(wq, "q6_k").astype(np.float64)
    xq = reference.quantized_x(x, 256)
    # the kernels add the unsigned q against a and -32 sum(a) apart: a partial sum may be
    # up to 64 / |q - 32| times the product's own magnitude
    return wd @ xq, (np.abs(wd) * 64 + 1e-30) @ np.abs(xq)


def assert_bits(got: np.ndarray, want: np.ndarray, what: str) -> None:
    assert got.dtype == want.dtype == F32
    bad = np.flatnonzero(got.view(np.uint32) != want.view(np.uint32))
    assert bad.size == 0, (
        f"{what}: {bad.size} outputs differ, first {bad[:5]}: "
        f"{got.reshape(-1)[bad[:5]]} vs {want.reshape(-1)[bad[:5]]}"
    )


def silu_mul(g: np.ndarray, u: np.ndarray) -> np.ndarray:
    """silu(g) * u in float64 (exp may overflow to inf: silu is then -0)."""
    with np.errstate(over="ignore"):
        return g / (1 + np.exp(-g.astype(np.float64))) * u


def make_x(rng: np.random.Generator, k: int) -> np.ndarray:
    x = rng.standard_normal(k).astype(F32)
    x[1] = 7.5  # an outlier: a coarse d_x for its super-block
    if k >= 512:
        x[256:512] = 0.0  # an all-zero super-block (d_x = 0)
    return x


# ------------------------------------------------------------------------- the core


def check_core(lib: Lib, wq: np.ndarray, xs: list[np.ndarray], what: str) -> None:
    """Every panel of wq through the core with 1 .. 4 rows of x (and a prefetch
    distance or none): bit-equal to `exact`; rows past N are 0."""
    n, k = wq.shape[0], wq.shape[1] // BLOCK * 256
    nb = k // 256
    panels = quant.pack_block_panels(wq, "q6_kp")
    assert panels.shape == (-(-n // PANEL), nb, PANEL * BLOCK)
    want = [exact(wq, x) for x in xs]
    qx = [q8k(x) for x in xs]
    for p in range(panels.shape[0]):
        rows = slice(p * PANEL, min(n, (p + 1) * PANEL))
        nr = rows.stop - rows.start
        for nx in range(1, 5):
            for pfd in (0, 4096):
                got = lib.core(np.ascontiguousarray(panels[p]), nb, qx[:nx], pfd)
                for i in range(nx):
                    assert_bits(got[i, :nr], want[i][rows], f"{what} {lib.isa} X={nx} x{i}")
                    assert np.all(got[i, nr:] == 0), (what, lib.isa)


@pytest.mark.parametrize("k", KS)
def test_core(lib: Lib, cores: list[Lib], k: int) -> None:
    rng = np.random.default_rng(k)
    wq = random_rows(rng, max(NS), k // 256)
    xs = [make_x(rng, k) for _ in range(4)]
    for n in NS:
        for core in (lib, *cores):
            check_core(core, wq[:n], xs, f"N={n} K={k}")


@pytest.mark.parametrize("level", [0, 63])
@pytest.mark.parametrize("scale", [127, -128, -127])
def test_core_extremes(lib: Lib, cores: list[Lib], level: int, scale: int) -> None:
    """The largest integer sums the core forms: every level at 0 or 63 and every scale at
    its extreme, against a = +-127 everywhere (and x of mixed signs)."""
    k = 2304
    wq = extreme_rows(33, k // 256, level, scale)
    signs = np.where(np.arange(k) % 3 == 0, -1.0, 1.0).astype(F32)
    xs = [np.ones(k, F32), -np.ones(k, F32), signs, -signs]
    for core in (lib, *cores):
        check_core(core, wq, xs, f"level={level} scale={scale}")


def test_packer_layout() -> None:
    """pack_block_panels lays q6_kp out as ckir_kpanel.h (and the core) read it: f16 d of
    row r at 2r, then byte 64 + 128 s + 4 r + j = byte 4 g + j of row r's block, plane g
    in slot s in the core's read order (kernel_lib.q6_kp_slots)."""
    rng = np.random.default_rng(5)
    wq = random_rows(rng, 33, 2)
    panels = quant.pack_block_panels(wq, "q6_kp")
    blk = wq.reshape(33, 2, BLOCK)
    for n in (0, 13, 31, 32):
        p, r = divmod(n, PANEL)
        for b in range(2):
            pb = panels[p, b]
            assert bytes(pb[2 * r : 2 * r + 2]) == bytes(blk[n, b, 208:210])
            for s, g in enumerate(q6_kp_slots()):
                at = 64 + 128 * s + 4 * r
                assert bytes(pb[at : at + 4]) == bytes(blk[n, b, 4 * g : 4 * g + 4])
    pad = panels[1].copy()  # rows 33 .. 63: zero bytes
    pad[:, 0:2] = 0
    for g in range(52):
        pad[:, 64 + 128 * g : 64 + 128 * g + 4] = 0
    assert not pad.any()
    assert np.array_equal(quant.unpack_block_panels(panels, (33, 512), "q6_kp"), wq)


# ---------------------------------------------------------------- the public kernels


@pytest.mark.parametrize("k", KS)
def test_gemv(lib: Lib, k: int) -> None:
    """gemv_q6_kp (+ bias) and its reference twin: the exact emulation and the row-major
    reference ckir_ref_gemv_q6_k bit for bit, the float64 oracle within rounding; 1 and
    2 threads."""
    rng = np.random.default_rng(k + 1)
    for n in NS:
        wq = random_rows(rng, n, k // 256)
        panels = quant.pack_block_panels(wq, "q6_kp")
        x = make_x(rng, k)
        b = rng.standard_normal(n).astype(F32)
        want = exact(wq, x)
        row_major = np.full(n, np.nan, F32)
        lib("ckir_ref_gemv_q6_k", x, wq, row_major, n, k)
        assert_bits(row_major, want, "ckir_ref_gemv_q6_k")
        prod, mag = oracle(wq, x)
        for threads in (1, 2):
            lib.threads(threads)
            for fn in ("ckir_gemv_q6_kp", "ckir_ref_gemv_q6_kp"):
                y = np.full(n, np.nan, F32)
                lib(fn, x, panels, y, n, k)
                assert_bits(y, want, f"{fn} N={n} K={k} threads={threads}")
                assert np.all(np.abs(y - prod) <= 1e-5 * mag)
                yb = np.full(n, np.nan, F32)
                lib(fn.replace("gemv", "gemv_bias"), x, panels, b, yb, n, k)
                assert_bits(yb, (want + b).astype(F32), f"{fn} bias N={n}")


def test_gemv_extremes(lib: Lib) -> None:
    k, n = 512, 33
    for level, scale in ((63, 127), (63, -128), (0, 127), (0, -128)):
        wq = extreme_rows(n, k // 256, level, scale)
        panels = quant.pack_block_panels(wq, "q6_kp")
        for x in (np.ones(k, F32), -np.ones(k, F32)):
            y = np.full(n, np.nan, F32)
            lib("ckir_gemv_q6_kp", x, panels, y, n, k)
            assert_bits(y, exact(wq, x), f"level={level} scale={scale}")


@pytest.mark.parametrize("n,k", [(33, 512), (95, 2304), (1, 256)])
def test_gemm(lib: Lib, n: int, k: int) -> None:
    """gemm_q6_kp (+ bias), M = 1 .. 9: on int8 x (SIMD builds) row m is gemv_q6_kp's
    bit for bit; on fp32 x (scalar builds) the float64 product of the dequantized rows."""
    rng = np.random.default_rng(n + k)
    wq = random_rows(rng, n, k // 256)
    panels = quant.pack_block_panels(wq, "q6_kp")
    b = rng.standard_normal(n).astype(F32)
    wd = quant.dequantize(wq, "q6_k").astype(np.float64)
    for m in range(1, 10):
        x = np.stack([make_x(rng, k) for _ in range(m)])
        for threads in (1, 2):
            lib.threads(threads)
            y = np.full((m, n), np.nan, F32)
            lib("ckir_gemm_q6_kp", x, panels, y, m, n, k)
            yb = np.full((m, n), np.nan, F32)
            lib("ckir_gemm_bias_q6_kp", x, panels, b, yb, m, n, k)
            if lib.int8_gemm:
                for i in range(m):
                    assert_bits(y[i], exact(wq, x[i]), f"gemm M={m} row {i} threads={threads}")
                assert_bits(yb, (y + b).astype(F32), f"gemm_bias M={m}")
            else:
                tol = 1e-5 * np.abs(x).astype(np.float64) @ np.abs(wd).T + 1e-6
                assert np.all(np.abs(y - x.astype(np.float64) @ wd.T) <= tol)
                assert np.all(np.abs(yb - x.astype(np.float64) @ wd.T - b) <= tol + 1e-6)


def test_fused(lib: Lib) -> None:
    """gemv / gemm qkv (+ bias) and gate_up on q6_kp: the unfused kernels' results (bit
    for bit where they run the same cores on the same x)."""
    rng = np.random.default_rng(9)
    k, ns = 512, (95, 33, 33)
    ws = [quant.pack_block_panels(random_rows(rng, nn, k // 256), "q6_kp") for nn in ns]
    bs = [rng.standard_normal(nn).astype(F32) for nn in ns]
    x = make_x(rng, k)
    lib.threads(2)
    outs = [np.full(nn, np.nan, F32) for nn in ns]
    lib("ckir_gemv_qkv_q6_kp", x, *ws, *outs, *ns, k)
    outb = [np.full(nn, np.nan, F32) for nn in ns]
    lib("ckir_gemv_qkv_bias_q6_kp", x, *ws, *bs, *outb, *ns, k)
    for w, o, ob, bias, nn in zip(ws, outs, outb, bs, ns, strict=True):
        y = np.full(nn, np.nan, F32)
        lib("ckir_gemv_q6_kp", x, w, y, nn, k)
        assert_bits(o, y, "gemv_qkv")
        assert_bits(ob, (y + bias).astype(F32), "gemv_qkv_bias")
    g = np.full(ns[1], np.nan, F32)
    lib("ckir_gemv_gate_up_q6_kp", x, ws[1], ws[2], g, ns[1], k)
    y1, y2 = outs[1], outs[2]  # the gate's and the up's gemv_q6_kp
    np.testing.assert_allclose(g, silu_mul(y1, y2), rtol=1e-5, atol=1e-30)
    m = 6
    xm = np.stack([make_x(rng, k) for _ in range(m)])
    outs = [np.full((m, nn), np.nan, F32) for nn in ns]
    lib("ckir_gemm_qkv_q6_kp", xm, *ws, *outs, m, *ns, k)
    for w, o, nn in zip(ws, outs, ns, strict=True):
        y = np.full((m, nn), np.nan, F32)
        lib("ckir_gemm_q6_kp", xm, w, y, m, nn, k)
        if lib.int8_gemm:
            assert_bits(o, y, "gemm_qkv")
        else:
            np.testing.assert_allclose(o, y, rtol=1e-5, atol=1e-5)
    g = np.full((m, ns[1]), np.nan, F32)
    lib("ckir_gemm_gate_up_q6_kp", xm, ws[1], ws[2], g, m, ns[1], k)
    y1, y2 = outs[1], outs[2]  # the gate's and the up's through gemm_qkv (checked above)
    want = silu_mul(y1, y2)
    np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-5)
