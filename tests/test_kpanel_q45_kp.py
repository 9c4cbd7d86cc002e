"""q4_kp and q5_kp (Q4_K / Q5_K super-blocks in 32-row panels): their shared SIMD core
(runtime/kernels/quant_q45kp.c) through the public kernels, on every build of this
machine: native (AVX-512 VNNI and GFNI here), AVX-512 VNNI without GFNI, AVX-512 without
VNNI (vpmaddubsw + vpmaddwd on zmm), AVX2 and scalar (the portable core).  Every test
runs for both formats (`fmt`, the row-major dtype; its panel dtype is fmt + "p");
q4_kp's names below stand for both.

Oracles:
- gemv_q4_kp and gemv_bias_q4_kp: bit-equal to the reference twin of the row-major
  kernel, ckir_ref_gemv_q4_k, on the unpacked rows (the core forms each super-block's
  exact integers and rounds dx (d S - dmin M) as the scalar code does, summing the
  super-blocks in order); and within 1e-5 of the partial sums' magnitude of
  test_kquant's float64 emulation of the integer scheme and of the float64 product
  of the dequantized weights with x rounded to Q8_K;
- gemm_q4_kp (int8 x, every SIMD build): row m bit-equal to gemv_q4_kp of row m, for
  M = 1 .. 9 (the core's 1 to 4 rows of x per call and every tail);
- gemv_qkv / gemv_gate_up / gemm_qkv / gemm_gate_up: the unfused kernels' outputs;
- extreme levels (every level 15 or 0, every 6-bit scale and min 63) against |a| = 127:
  no int16 sum or pair product of any path saturates; q5_kp also every level 31, every
  fifth bit set over zero nibbles (16) and every nibble 15 with no fifth bit.
Shapes: N = 1, 17, 31, 32, 33, 95 (one or more panels and their tails), K = 256, 512,
2304 (1, 2 and 9 super-blocks).
"""

from __future__ import annotations

import numpy as np
import pytest
from kernel_lib import RuntimeLib, build_runtime, isa_supported
from test_kquant import emulate_gemv, extreme_blocks, random_blocks
from test_quant_kernels import cpu_flags, custom_build

from ckir import quant
from ckir.reference.kernels import quantized_x

F32 = np.float32
NS = [1, 17, 31, 32, 33, 95]
FMTS = ["q4_k", "q5_k"]
BYTES = {"q4_k": 144, "q5_k": 176}
KS = [256, 512, 2304]
# build -> (flags of a custom build, or None for build_library's ISA; CPU flags it needs)
BUILDS = {
    "native": (None, set()),
    "avx512novnni": (["-march=skylake-avx512"], {"avx512f", "avx512bw", "avx512vl"}),
    # VNNI without GFNI: q5_kp's shift-and-merge levels on vpdpbusd (native takes GFNI)
    "avx512nogfni": (["-march=cascadelake"], {"avx512f", "avx512bw", "avx512vl", "avx512_vnni"}),
    "avx2": (None, {"avx2", "fma", "f16c"}),
    "scalar": (None, set()),
}


@pytest.fixture(scope="module", params=list(BUILDS))
def lib(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> RuntimeLib:
    flags, needs = BUILDS[request.param]
    if not needs <= cpu_flags() or not isa_supported(request.param):
        pytest.skip(f"CPU lacks {sorted(needs - cpu_flags())}")
    out = tmp_path_factory.mktemp(f"kp4_{request.param}")
    if flags is None:
        return build_runtime(request.param, out)
    return RuntimeLib(custom_build(out / f"libckir_{request.param}.so", flags))


@pytest.fixture(params=FMTS)
def fmt(request: pytest.FixtureRequest) -> str:
    return request.param


def kq_rows(rng: np.random.Generator, fmt: str, n: int, k: int) -> np.ndarray:
    """Q4_K / Q5_K rows [n, k/256 * bytes]: random bytes (every scale and level) whose f16
    d and dmin are of moderate magnitude (no overflow of dx d S)."""
    raw = random_blocks(rng, fmt, n, k // 256).reshape(n * (k // 256), BYTES[fmt])
    mags = np.float32(2.0) ** rng.integers(-14, 4, (raw.shape[0], 2)).astype(F32)
    vals = (rng.uniform(1, 2, mags.shape) * mags * rng.choice([-1, 1], mags.shape)).astype(F32)
    raw[:, 0:4] = vals.astype(np.float16).view(np.uint8).reshape(-1, 4)
    return raw.reshape(n, -1)


def bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=F32).view(np.uint32)


def gemv(
    lib: RuntimeLib,
    name: str,
    x: np.ndarray,
    w: np.ndarray,
    n: int,
    *,
    ref: bool = False,
    b: np.ndarray | None = None,
) -> np.ndarray:
    y = np.full(n, np.nan, F32)
    run = lib.ref if ref else lib.call
    if b is None:
        run(f"gemv_{name}", x, w, y, n, x.size)
    else:
        run(f"gemv_bias_{name}", x, w, b, y, n, x.size)
    return y


@pytest.mark.parametrize("k", KS)
@pytest.mark.parametrize("n", NS)
def test_gemv_bit_equal_to_row_major_ref(lib: RuntimeLib, fmt: str, n: int, k: int) -> None:
    rng = np.random.default_rng(n * 10007 + k)
    rows = kq_rows(rng, fmt, n, k)
    if n > 2:  # a quantized real matrix too: rows 0 .. 1 from quant.quantize
        rows[:2] = quant.quantize(rng.standard_normal((2, k)).astype(F32), fmt)
    wp = quant.pack_block_panels(rows, fmt + "p")
    x = rng.standard_normal(k).astype(F32)
    x[5] = 13.0  # an outlier: a coarse d_x
    if k >= 512:
        x[256:512] = 0.0  # an all-zero super-block (d_x = 0)
    b = rng.standard_normal(n).astype(F32)
    want = gemv(lib, fmt, x, rows, n, ref=True)
    want_b = gemv(lib, fmt, x, rows, n, ref=True, b=b)
    emu, scale = emulate_gemv(x, rows, fmt)
    assert np.all(np.abs(want - emu) <= 1e-5 * scale + 1e-30)
    # the float64 product of the dequantized weights with x rounded to Q8_K
    exact = quant.dequantize(rows, fmt).astype(np.float64) @ quantized_x(x, 256)
    assert np.all(np.abs(want - exact) <= 1e-5 * scale + 1e-30)
    for threads in (1, 2):
        lib.set_num_threads(threads)
        for ref in (False, True):
            y = gemv(lib, fmt + "p", x, wp, n, ref=ref)
            np.testing.assert_array_equal(bits(y), bits(want), err_msg=f"{threads=} {ref=}")
            yb = gemv(lib, fmt + "p", x, wp, n, ref=ref, b=b)
            np.testing.assert_array_equal(bits(yb), bits(want_b), err_msg=f"{threads=} {ref=}")
    lib.set_num_threads(2)


@pytest.mark.parametrize("k", KS)
@pytest.mark.parametrize("n", [17, 33, 95])
def test_gemm_rows_bit_equal_to_gemv(lib: RuntimeLib, fmt: str, n: int, k: int) -> None:
    """Rows of x 1 .. 9 (the core's X = 1 .. 4 and every tail): each row of gemm_q4_kp
    (int8 x) is gemv_q4_kp of that row, and the reference twin's on the unpacked rows."""
    if not lib.qp_int8:
        pytest.skip(f"the {lib.isa} build's GEMM takes fp32 x")
    rng = np.random.default_rng(n + k)
    rows = kq_rows(rng, fmt, n, k)
    wp = quant.pack_block_panels(rows, fmt + "p")
    b = rng.standard_normal(n).astype(F32)
    for m in range(1, 10):
        x = rng.standard_normal((m, k)).astype(F32)
        x[m - 1, 7] = -20.0
        y = np.full((m, n), np.nan, F32)
        yb = np.full((m, n), np.nan, F32)
        lib.call(f"gemm_{fmt}p", x, wp, y, m, n, k)
        lib.call(f"gemm_bias_{fmt}p", x, wp, b, yb, m, n, k)
        for i in range(m):
            want = gemv(lib, fmt, x[i].copy(), rows, n, ref=True)
            np.testing.assert_array_equal(bits(y[i]), bits(want), err_msg=f"{m=} row {i}")
            np.testing.assert_array_equal(
                bits(y[i]), bits(gemv(lib, fmt + "p", x[i].copy(), wp, n))
            )
            want_b = gemv(lib, fmt + "p", x[i].copy(), wp, n, b=b)
            np.testing.assert_array_equal(bits(yb[i]), bits(want_b), err_msg=f"{m=} row {i}")


# (qh byte, qs byte) of the extreme blocks (q4_k: qs only)
LEVELS = [(0xFF, 0xFF), (0x00, 0x00), (0xFF, 0x00), (0x00, 0xFF)]


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_extreme_levels(lib: RuntimeLib, fmt: str, level: tuple[int, int], sign: float) -> None:
    """Every 6-bit scale and min 63, every level 15 (or 0; q5_k 31, 0, 16 = fifth bit
    over nibble 0, 15 = nibble without fifth bit), d = 1, dmin = 0.5, against |a| = 127
    everywhere (x = +-1, and +-1 alternating: bs at its largest and mixed)."""
    if fmt == "q4_k" and level[0] != level[1]:
        pytest.skip("q4_k has no fifth bits")
    n, k = 33, 2304
    nbytes = BYTES[fmt]
    rows = extreme_blocks(fmt, n, k // 256, 0xFF).reshape(n * (k // 256), nbytes)
    rows[:, 16:] = level[1]
    if fmt == "q5_k":
        rows[:, 16:48] = level[0]
    rows = rows.reshape(n, -1)
    wp = quant.pack_block_panels(rows, fmt + "p")
    xs = [np.full(k, sign, F32), np.where(np.arange(k) % 3 == 0, sign, -sign).astype(F32)]
    for x in xs:
        emu, scale = emulate_gemv(x, rows, fmt)
        want = gemv(lib, fmt, x, rows, n, ref=True)
        assert np.all(np.abs(want - emu) <= 1e-5 * scale)
        np.testing.assert_array_equal(bits(gemv(lib, fmt + "p", x, wp, n)), bits(want))
        if lib.qp_int8:
            xm = np.stack([x, -x, x, x, -x]).astype(F32)
            y = np.full((5, n), np.nan, F32)
            lib.call(f"gemm_{fmt}p", xm, wp, y, 5, n, k)
            np.testing.assert_array_equal(bits(y[0]), bits(want))
            np.testing.assert_array_equal(bits(y[1]), bits(gemv(lib, fmt + "p", -x, wp, n)))


@pytest.mark.parametrize("m", [1, 6])
def test_fused(lib: RuntimeLib, fmt: str, m: int) -> None:
    """qkv and gate_up over q4_kp: the unfused kernels' outputs (gemv bit for bit; gemm on
    int8 x bit for bit, on fp32 x within the GEMM's rounding)."""
    rng = np.random.default_rng(m)
    k, nq, nk = 512, 95, 17
    ws = [quant.quantize(rng.standard_normal((nn, k)).astype(F32), fmt) for nn in (nq, nk, nk)]
    wps = [quant.pack_block_panels(w, fmt + "p") for w in ws]
    x = rng.standard_normal((m, k)).astype(F32)
    lib.set_num_threads(2)
    outs = [np.full(nn, np.nan, F32) for nn in (nq, nk, nk)]
    lib.call(f"gemv_qkv_{fmt}p", x[0].copy(), *wps, *outs, nq, nk, nk, k)
    for wp, out, nn in zip(wps, outs, (nq, nk, nk), strict=True):
        np.testing.assert_array_equal(bits(out), bits(gemv(lib, fmt + "p", x[0].copy(), wp, nn)))
    g = np.full(nk, np.nan, F32)
    lib.call(f"gemv_gate_up_{fmt}p", x[0].copy(), wps[1], wps[2], g, nk, k)
    y1, y2 = (gemv(lib, fmt + "p", x[0].copy(), wp, nk).astype(np.float64) for wp in wps[1:])
    np.testing.assert_allclose(g, y1 / (1 + np.exp(-y1)) * y2, rtol=1e-5, atol=1e-6)
    if not lib.qp_int8:
        return
    gouts = [np.full((m, nn), np.nan, F32) for nn in (nq, nk, nk)]
    lib.call(f"gemm_qkv_{fmt}p", x, *wps, *gouts, m, nq, nk, nk, k)
    for wp, out, nn in zip(wps, gouts, (nq, nk, nk), strict=True):
        y = np.full((m, nn), np.nan, F32)
        lib.call(f"gemm_{fmt}p", x, wp, y, m, nn, k)
        np.testing.assert_array_equal(bits(out), bits(y))
    gg = np.full((m, nk), np.nan, F32)
    lib.call(f"gemm_gate_up_{fmt}p", x, wps[1], wps[2], gg, m, nk, k)
    y1, y2 = (np.full((m, nk), np.nan, F32) for _ in range(2))
    lib.call(f"gemm_{fmt}p", x, wps[1], y1, m, nk, k)
    lib.call(f"gemm_{fmt}p", x, wps[2], y2, m, nk, k)
    g64 = y1.astype(np.float64)
    np.testing.assert_allclose(gg, g64 / (1 + np.exp(-g64)) * y2, rtol=1e-5, atol=1e-6)
