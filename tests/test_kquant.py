"""K-quants (Q4_K, Q5_K, Q6_K): ckir.kquant against gguf.quants, and the C kernels against
NumPy oracles.

Oracles:
- dequantization: bit-equal to ``gguf.quants.dequantize`` over random bytes (every
  scale and quant value) with finite f16 fields of every magnitude (subnormal to
  65504);
- quantizers (the gguf package has none for these types): the round trip of each
  sub-block stays within its own quantization step (q4_k / q5_k: ``d sc / 2`` plus the
  offset's rounding ``dmin / 2`` plus the clipping of the 6-bit scale; q6_k: ``d sc /
  2`` plus clipping), and the relative RMS error of Gaussian rows stays below
  measured bounds;
- embed_<k>: bit-identical to ``ckir.kquant.dequantize_kquant``;
- gemv_<k>: an exact NumPy emulation of the integer scheme (x quantized per super-
  block of 256 to int8, integer super-block sums), tolerance 1e-5 of the magnitude of
  the partial sums; and the float64 product on the dequantized weights within the activation-
  quantization bound sum_b (d_x[b] / 2) sum |w|;
- gemm_<k>: on fp32 x the float64 product on the dequantized weights, 1e-5 of sum |x| |w|;
  on int8 x (the SIMD builds' default) every row bit-equal to gemv_<k> of that row of x;
- fused GEMMs: the unfused gemm_<k> on either x.
Edge shapes: N = 1, odd N, N not a multiple of any tile; M of every tail of the GEMM's
4-row tile and more than one tile of quantized x; K = 256 .. 2048 (1, 2, 3, 5 and 8
super-blocks).
"""

from __future__ import annotations

import numpy as np
import pytest
from kernel_lib import build_runtime, isa_supported

from ckir import kquant, quant
from ckir.reference import kernels as reference

gguf = pytest.importorskip("gguf")
GGML = gguf.GGMLQuantizationType
KTYPES = {"q4_k": GGML.Q4_K, "q5_k": GGML.Q5_K, "q6_k": GGML.Q6_K}
F32 = np.float32


def random_blocks(rng: np.random.Generator, dtype: str, rows: int, nb: int) -> np.ndarray:
    """Random super-block bytes whose f16 fields are finite, of every magnitude."""
    nbytes = kquant.KQUANT_BYTES[dtype]
    raw = rng.integers(0, 256, (rows * nb, nbytes), dtype=np.uint8)
    off, count = kquant.KQUANT_F16[dtype]
    mags = np.float32(2.0) ** rng.integers(-24, 16, (rows * nb, count)).astype(F32)
    vals = (rng.uniform(1, 2, mags.shape) * mags * rng.choice([-1, 1], mags.shape)).astype(F32)
    vals[0] = 65504.0  # the largest f16
    raw[:, off : off + 2 * count] = vals.astype(np.float16).view(np.uint8).reshape(-1, 2 * count)
    return raw.reshape(rows, nb * nbytes)


@pytest.mark.parametrize("dtype", list(KTYPES))
def test_dequantize_bit_equal_to_gguf(dtype: str) -> None:
    rng = np.random.default_rng(1)
    raw = random_blocks(rng, dtype, 13, 3)
    ours = quant.dequantize(raw, dtype)
    ref = gguf.quants.dequantize(raw, KTYPES[dtype]).astype(F32)
    assert ours.shape == (13, 768)
    assert np.array_equal(ours.view(np.uint32), ref.view(np.uint32))
    assert quant.count_non_finite(raw, dtype) == 0


@pytest.mark.parametrize("dtype", list(KTYPES))
def test_quantize_round_trip(dtype: str) -> None:
    rng = np.random.default_rng(2)
    w = (rng.standard_normal((9, 512)) * np.exp(rng.uniform(-3, 2, (9, 1)))).astype(F32)
    w[0, :256] = 0.0  # an all-zero super-block
    w[1, 7] = 40.0  # an outlier
    w[2] = np.abs(w[2])  # no negative values: no offset
    q = quant.quantize(w, dtype)
    assert q.dtype == np.uint8 and q.shape == (9, 2 * kquant.KQUANT_BYTES[dtype])
    back = quant.dequantize(q, dtype)
    # gguf reads our bytes as we do
    assert np.array_equal(back, gguf.quants.dequantize(q, KTYPES[dtype]).astype(F32))
    assert np.all(back[0, :256] == 0)
    err = np.abs(back - w)
    blk = q.reshape(-1, kquant.KQUANT_BYTES[dtype])
    sub = 16 if dtype == "q6_k" else 32
    if dtype == "q6_k":
        d = blk[:, 208:210].copy().view(np.float16).astype(F32)
        step = d * np.abs(blk[:, 192:208].view(np.int8).astype(F32))  # [nb, 16]
        slack = d  # a scale rounded down by up to d/2 clips the extreme by up to 32 * d/2 / sc
        bound = step / 2 + slack * 16
    else:
        d = blk[:, 0:2].copy().view(np.float16).astype(F32)
        dmin = blk[:, 2:4].copy().view(np.float16).astype(F32)
        sc, _ = kquant.unpack_scale_min(blk[:, 4:16])
        step = d * sc.astype(F32)
        nmax = 15 if dtype == "q4_k" else 31
        bound = step / 2 + dmin / 2 + d * nmax / 2
    per_sub = err.reshape(-1, 256 // sub, sub).max(axis=2)
    assert np.all(per_sub <= bound + 1e-6 * np.abs(w).max())
    rel = float(np.sqrt(np.mean((back[3:] - w[3:]) ** 2) / np.mean(w[3:] ** 2)))
    assert rel < {"q4_k": 0.09, "q5_k": 0.045, "q6_k": 0.025}[dtype], rel


def test_quantize_refuses_ragged_k() -> None:
    with pytest.raises(ValueError, match="multiple of 256"):
        quant.quantize(np.zeros((2, 288), F32), "q4_k")
    assert quant.block_bytes("q6_k") == (256, 210)
    assert quant.row_bytes("q5_k", 512) == 352


# ------------------------------------------------------------------- kernels


@pytest.fixture(scope="module", params=["native", "avx2", "scalar"])
def lib(request, tmp_path_factory):
    if not isa_supported(request.param):
        pytest.skip(f"CPU lacks {request.param}")
    return build_runtime(request.param, tmp_path_factory.mktemp(f"kq_{request.param}"))


def quantize_x(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """x [K] -> (a int [K/256, 256], d_x [K/256]) as the kernels quantize it (Q8_K)."""
    return reference.quantize_x(x, 256)


def emulate_gemv(x: np.ndarray, wq: np.ndarray, dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """(y, scale) of the kernels' integer scheme, in float64; scale bounds the magnitude of
    every partial sum a kernel may round (sum over super-blocks of d_x (|d| sum_j sc |q a|
    + |dmin| sum_j m |sum a|)), the fp32 sums of the scalar and SIMD paths differing in
    order."""
    a, dx = quantize_x(x)
    nb = a.shape[0]
    blk = wq.reshape(wq.shape[0], nb, -1)
    n = wq.shape[0]
    if dtype == "q6_k":
        levels = kquant._q6_levels(blk.reshape(-1, 210)).reshape(n, nb, 16, 16)
        sc = blk[:, :, 192:208].view(np.int8).astype(np.float64)  # [n, nb, 16]
        prod = levels * a.reshape(1, nb, 16, 16)
        s = prod.sum(axis=3)  # exact in float64
        d = blk[:, :, 208:210].copy().view(np.float16).astype(np.float64)[..., 0]
        terms = d * dx[None, :] * (sc * s).sum(axis=2)
        # the kernels sum the unsigned q (0..63) against a, and 32 sum a apart
        mag = (np.abs(levels + 32) * np.abs(a.reshape(1, nb, 16, 16))).sum(axis=3)
        mag += 32 * np.abs(a.reshape(1, nb, 16, 16)).sum(axis=3)
        parts = np.abs(d) * dx[None, :] * (np.abs(sc) * mag).sum(axis=2)
    else:
        (big_d, big_m), q = kquant._affine_levels(blk.reshape(-1, blk.shape[2]), dtype)
        sc, m = kquant.unpack_scale_min(blk.reshape(-1, blk.shape[2])[:, 4:16])
        q = q.reshape(n, nb, 8, 32)
        prod = q * a.reshape(1, nb, 8, 32)
        s = prod.sum(axis=3)
        sums = a.reshape(nb, 8, 32).sum(axis=2)[None]
        d = blk[:, :, 0:2].copy().view(np.float16).astype(np.float64)[..., 0]
        dmin = blk[:, :, 2:4].copy().view(np.float16).astype(np.float64)[..., 0]
        big_s = (sc.reshape(n, nb, 8) * s).sum(axis=2)
        big_m = (m.reshape(n, nb, 8) * sums).sum(axis=2)
        terms = dx[None, :] * (d * big_s - dmin * big_m)
        big_sa = (sc.reshape(n, nb, 8) * np.abs(prod).sum(axis=3)).sum(axis=2)
        big_ma = (m.reshape(n, nb, 8) * np.abs(sums)).sum(axis=2)
        parts = dx[None, :] * (np.abs(d) * big_sa + np.abs(dmin) * big_ma)
    return terms.sum(axis=1), parts.sum(axis=1)


SHAPES = [(1, 256), (7, 512), (33, 256), (65, 1024), (130, 2048)]


@pytest.mark.parametrize("dtype", list(KTYPES))
@pytest.mark.parametrize("n,k", SHAPES)
def test_gemv(lib, dtype: str, n: int, k: int) -> None:
    rng = np.random.default_rng(n * 7 + k)
    w = (rng.standard_normal((n, k)) * np.exp(rng.uniform(-2, 1, (n, 1)))).astype(F32)
    wq = quant.quantize(w, dtype)
    x = rng.standard_normal(k).astype(F32)
    x[3] = 9.0
    if k >= 512:
        x[256:512] = 0.0  # an all-zero super-block (d_x = 0)
    b = rng.standard_normal(n).astype(F32)
    emu, scale = emulate_gemv(x, wq, dtype)
    wd = quant.dequantize(wq, dtype).astype(np.float64)
    _, dx = quantize_x(x)
    qbound = (np.abs(wd).reshape(n, -1, 256).sum(axis=2) * dx[None, :] / 2).sum(axis=1)
    exact = wd @ x.astype(np.float64)
    for threads in (1, 2):
        lib.set_num_threads(threads)
        for run in (lib.call, lib.ref):
            y = np.zeros(n, F32)
            run(f"gemv_{dtype}", x, wq, y, n, k)
            assert np.all(np.abs(y - emu) <= 1e-5 * scale + 1e-30), (run, threads)
            assert np.all(np.abs(y - exact) <= qbound + 1e-5 * np.abs(wd) @ np.abs(x) + 1e-30)
            yb = np.zeros(n, F32)
            run(f"gemv_bias_{dtype}", x, wq, b, yb, n, k)
            np.testing.assert_allclose(yb, y + b, rtol=1e-6, atol=1e-6)
    # the SIMD rows compute the scalar ones' integers: only fp32 summation order differs
    y1, y2 = np.zeros(n, F32), np.zeros(n, F32)
    lib.call(f"gemv_{dtype}", x, wq, y1, n, k)
    lib.ref(f"gemv_{dtype}", x, wq, y2, n, k)
    assert np.all(np.abs(y1 - y2) <= 2e-6 * scale + 1e-30)


def extreme_blocks(dtype: str, rows: int, nb: int, sc_byte: int) -> np.ndarray:
    """Super-blocks whose every level is the largest (q4_k 15, q5_k 31, q6_k 63) and every
    scale byte is sc_byte, f16 d = 1 and dmin = 0.5: the largest integer sums the kernels
    form (q6_k: 4 * 63 * 127 = 32004 in a 4-product sum, just under int16's limit)."""
    nbytes = kquant.KQUANT_BYTES[dtype]
    raw = np.full((rows * nb, nbytes), 0xFF, np.uint8)
    off, count = kquant.KQUANT_F16[dtype]
    halves = np.array([1.0, 0.5][:count], np.float16).view(np.uint8)
    raw[:, off : off + 2 * count] = halves
    if dtype == "q6_k":
        raw[:, 192:208] = sc_byte
    else:
        raw[:, 4:16] = sc_byte
    return raw.reshape(rows, nb * nbytes)


@pytest.mark.parametrize("dtype", list(KTYPES))
@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_gemv_extreme_levels(lib, dtype: str, sign: float) -> None:
    """Every level and scale at its largest against |a| = 127 everywhere: no int16 pack or
    pair product of the SIMD rows saturates (q6_k's scale also at -128)."""
    n, k = 3, 512
    for sc_byte in (0xFF, 0x80) if dtype == "q6_k" else (0xFF,):
        wq = extreme_blocks(dtype, n, k // 256, sc_byte)
        x = np.full(k, sign, F32)
        emu, scale = emulate_gemv(x, wq, dtype)
        for threads in (1, 2):
            lib.set_num_threads(threads)
            for run in (lib.call, lib.ref):
                y = np.zeros(n, F32)
                run(f"gemv_{dtype}", x, wq, y, n, k)
                assert np.all(np.abs(y - emu) <= 1e-5 * scale), (run, threads, sc_byte, y, emu)


@pytest.fixture(params=["int8", "fp32"])
def kq_x(request: pytest.FixtureRequest, lib):
    """The x of gemm_<k>: int8 (Q8_K rows, every SIMD build by default) or fp32
    (ckir_runtime_qp_fp32_x, on every build); set back afterwards."""
    if request.param == "int8" and not lib.qp_int8:
        pytest.skip(f"the {lib.isa} build has no int8 GEMM: fp32 x only")
    lib.qp_fp32_x(request.param == "fp32")
    yield request.param
    lib.qp_fp32_x(False)


def gemv_rows(lib, dtype: str, x: np.ndarray, wq: np.ndarray, n: int, b=None) -> np.ndarray:
    """gemv_<k> (or gemv_bias_<k>) of every row of x, stacked."""
    out = np.zeros((x.shape[0], n), F32)
    for m in range(x.shape[0]):
        if b is None:
            lib.call(f"gemv_{dtype}", x[m].copy(), wq, out[m], n, x.shape[1])
        else:
            lib.call(f"gemv_bias_{dtype}", x[m].copy(), wq, b, out[m], n, x.shape[1])
    return out


# M: every tail of the 4-row tile (1, 2, 3, 0 rows left), and 300 rows at K = 2048, more
# than one tile of quantized x rows (KQ_XB); K: 1, 2, 3 and 5 super-blocks and 8
GEMM_SHAPES = [(1, 7, 256), (2, 1, 512), (3, 9, 768), (5, 33, 512), (6, 65, 1280), (40, 65, 768),
               (97, 3, 1024), (300, 5, 2048)]


@pytest.mark.parametrize("dtype", list(KTYPES))
@pytest.mark.parametrize("m,n,k", GEMM_SHAPES)
def test_gemm_and_embed(lib, kq_x: str, dtype: str, m: int, n: int, k: int) -> None:
    """gemm_<k> on fp32 x: the float64 product on the dequantized weights, 1e-5 of sum
    |x| |w|; on int8 x (the SIMD builds' default): row m is gemv_<k>(row m) bit for bit,
    within the activation-quantization bound of the exact product. The reference twin
    is the fp32-x product on both."""
    rng = np.random.default_rng(m + n + k)
    w = rng.standard_normal((n, k)).astype(F32)
    wq = quant.quantize(w, dtype)
    wd = quant.dequantize(wq, dtype)
    x = rng.standard_normal((m, k)).astype(F32)
    x[0, 5] = 11.0  # an outlier: a coarse d_x for its super-block
    if k >= 512:
        x[m - 1, 256:512] = 0.0  # an all-zero super-block (d_x = 0)
    b = rng.standard_normal(n).astype(F32)
    exact = x.astype(np.float64) @ wd.astype(np.float64).T
    mag = np.abs(x).astype(np.float64) @ np.abs(wd).astype(np.float64).T
    tol = 1e-5 * mag + 1e-6
    qbound = np.zeros((m, n))
    wsum = np.abs(wd.astype(np.float64)).reshape(n, -1, 256).sum(axis=2)  # [n, K/256]
    for i in range(m):
        _, dx = quantize_x(x[i])
        qbound[i] = (wsum * dx / 2).sum(axis=1)
    for threads in (1, 2):
        lib.set_num_threads(threads)
        for run in (lib.call, lib.ref):
            int8 = kq_x == "int8" and run == lib.call
            y = np.zeros((m, n), F32)
            run(f"gemm_{dtype}", x, wq, y, m, n, k)
            yb = np.zeros((m, n), F32)
            run(f"gemm_bias_{dtype}", x, wq, b, yb, m, n, k)
            if int8:
                ref = gemv_rows(lib, dtype, x, wq, n)
                assert np.array_equal(y.view(np.uint32), ref.view(np.uint32))
                ref_b = gemv_rows(lib, dtype, x, wq, n, b)
                assert np.array_equal(yb.view(np.uint32), ref_b.view(np.uint32))
                assert np.all(np.abs(y - exact) <= qbound + tol)
            else:
                assert np.all(np.abs(y - exact) <= tol)
                assert np.all(np.abs(yb - exact - b) <= tol + 1e-6 * np.abs(b))
    tokens = np.array([n - 1, 0, n // 2, 0], dtype=np.int32)
    for run in (lib.call, lib.ref):
        out = np.zeros((4, k), F32)
        run(f"embed_{dtype}", tokens, wq, out, 4, k)
        assert np.array_equal(out.view(np.uint32), wd[tokens].view(np.uint32))


@pytest.mark.parametrize("dtype", list(KTYPES))
@pytest.mark.parametrize("m", [3, 300])
def test_fused_gemms(lib, kq_x: str, dtype: str, m: int) -> None:
    """gemm_qkv / gemm_gate_up: the unfused gemm_<k>'s numerics on either x (M = 300: the
    gate_up tiles run on two threads; M = 3: below the fp32 GEMM's small-M switch)."""
    rng = np.random.default_rng(m)
    k, nq, nk = 512, 33, 17
    ws = [quant.quantize(rng.standard_normal((nn, k)).astype(F32), dtype) for nn in (nq, nk, nk)]
    x = rng.standard_normal((m, k)).astype(F32)

    def mag(wq: np.ndarray) -> np.ndarray:
        wd = np.abs(quant.dequantize(wq, dtype)).astype(np.float64)
        return np.abs(x).astype(np.float64) @ wd.T

    lib.set_num_threads(2)
    outs = [np.zeros((m, nn), F32) for nn in (nq, nk, nk)]
    lib.call(f"gemm_qkv_{dtype}", x, *ws, *outs, m, nq, nk, nk, k)
    for wq, out, nn in zip(ws, outs, (nq, nk, nk), strict=True):
        y = np.zeros((m, nn), F32)
        lib.call(f"gemm_{dtype}", x, wq, y, m, nn, k)
        if kq_x == "int8":  # the same gemm_<k> calls
            assert np.array_equal(out, y)
        else:  # the fp32 driver against gemm_<k>'s own: summation order
            assert np.all(np.abs(out - y) <= 1e-5 * mag(wq) + 1e-6)
    g = np.zeros((m, nk), F32)
    lib.call(f"gemm_gate_up_{dtype}", x, ws[1], ws[2], g, m, nk, k)
    y1, y2 = np.zeros((m, nk), F32), np.zeros((m, nk), F32)
    lib.call(f"gemm_{dtype}", x, ws[1], y1, m, nk, k)
    lib.call(f"gemm_{dtype}", x, ws[2], y2, m, nk, k)
    sig = 1 / (1 + np.exp(-y1.astype(np.float64)))
    want = y1 * sig * y2
    if kq_x == "int8":
        np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-30)
    else:  # the gate's and up's rounding, carried by silu(g) u
        err = 1e-5 * (mag(ws[1]) * np.abs(sig * y2) * 1.2 + mag(ws[2]) * np.abs(y1 * sig)) + 1e-6
        assert np.all(np.abs(g - want) <= err)


@pytest.mark.parametrize("dtype", list(KTYPES))
def test_fused_kernels(lib, dtype: str) -> None:
    """gemv_qkv / gemv_gate_up / gemm_qkv compose the unfused kernels' numerics."""
    rng = np.random.default_rng(3)
    k, nq, nk = 512, 33, 17
    ws = [quant.quantize(rng.standard_normal((nn, k)).astype(F32), dtype) for nn in (nq, nk, nk)]
    x = rng.standard_normal(k).astype(F32)
    outs = [np.zeros(nn, F32) for nn in (nq, nk, nk)]
    lib.call(f"gemv_qkv_{dtype}", x, *ws, *outs, nq, nk, nk, k)
    for wq, out, nn in zip(ws, outs, (nq, nk, nk), strict=True):
        y = np.zeros(nn, F32)
        lib.call(f"gemv_{dtype}", x, wq, y, nn, k)
        np.testing.assert_allclose(out, y, rtol=1e-6, atol=1e-6)
    g = np.zeros(nk, F32)
    lib.call(f"gemv_gate_up_{dtype}", x, ws[1], ws[2], g, nk, k)
    y1, y2 = np.zeros(nk, F32), np.zeros(nk, F32)
    lib.call(f"gemv_{dtype}", x, ws[1], y1, nk, k)
    lib.call(f"gemv_{dtype}", x, ws[2], y2, nk, k)
    np.testing.assert_allclose(g, y1 / (1 + np.exp(-y1)) * y2, rtol=1e-5, atol=1e-5)
