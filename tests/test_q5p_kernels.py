"""The Q5_0 / Q5_1 panel dtypes q5_0p / q5_1p: their byte layout and every public kernel
(runtime/kernels/quant_q5p.c) against the row-major q5_0 / q5_1 kernels.

- the packer puts every byte where docs/quantization.md ("q5_0p, q5_1p") says (d, m,
  then quad plane 0 the row's qh, planes 1..4 its qs), padding rows are zero, unpacking
  is exact;
- on native, avx2, scalar and AVX-512-without-VNNI builds: the reference twins equal
  the row-major reference twins bit for bit (GEMV and GEMM); the public GEMV equals
  the reference twin bit for bit too (the SIMD cores do the same integer sums and the
  same fp32 operations in the same order); gemm rows equal the gemv of each row of x
  (int8 x), the fp32-x gemm equals the row-major gemm bit for bit; embed equals the
  row-major embed; the fused qkv / gate_up equal separate gemvs;
- extreme levels (q = 0 and 31, the fifth bit everywhere) against |a| = 127.
"""

from __future__ import annotations

import numpy as np
import pytest
from kernel_lib import RuntimeLib, build_runtime, isa_supported
from test_quant_kernels import VARIANTS, cpu_flags, custom_build

from ckir import quant

F32 = np.float32
FORMATS = {"q5_0p": quant.quantize_q5_0, "q5_1p": quant.quantize_q5_1}
BYTES = {"q5_0p": 22, "q5_1p": 24}
SHAPES = [(1, 32), (31, 96), (33, 896), (95, 4128)]


def rows(dtype: str, n: int, k: int, seed: int = 0) -> np.ndarray:
    """Row-major Q5_0 / Q5_1 blocks of a random [n, k] matrix (rows of varied scale)."""
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((n, k)) * np.exp(rng.uniform(-2, 1, (n, 1))) + 0.3
    return FORMATS[dtype](w.astype(F32))


@pytest.mark.parametrize("n", [1, 31, 33, 95])
@pytest.mark.parametrize("dtype", list(FORMATS))
def test_pack_layout(dtype: str, n: int) -> None:
    k, nb, nbytes = 96, 3, BYTES[dtype]
    nf = 2 if dtype == "q5_1p" else 1
    blocks = rows(dtype, n, k, seed=n)
    p = quant.pack_block_panels(blocks, dtype)
    panels = -(-n // 32)
    assert p.shape == (panels, nb, 32 * nbytes)
    for r in range(n):
        blk = blocks[r].reshape(nb, nbytes)
        for b in range(nb):
            pb, rr = p[r // 32, b], r % 32
            for f in range(nf):  # d (and m): 32 f16 per field
                assert bytes(pb[64 * f + 2 * rr :][:2]) == bytes(blk[b, 2 * f : 2 * f + 2])
            quads = 64 * nf
            assert bytes(pb[quads + 4 * rr :][:4]) == bytes(blk[b, 2 * nf : 2 * nf + 4])  # qh
            for g in range(4):  # qs[4g .. 4g + 3]
                at = quads + 128 * (g + 1) + 4 * rr
                qs = 2 * nf + 4
                assert bytes(pb[at : at + 4]) == bytes(blk[b, qs + 4 * g : qs + 4 * g + 4])
    assert quant.panel_block_bytes(dtype) == 32 * nbytes
    full = quant.unpack_block_panels(p, (panels * 32, k), dtype)
    assert not full[n:].any()
    assert np.array_equal(quant.unpack_block_panels(p, (n, k), dtype), blocks)


@pytest.fixture(scope="module", params=["native", "avx2", "scalar", "avx512novnni"])
def lib(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> RuntimeLib:
    isa = request.param
    out = tmp_path_factory.mktemp(f"q5p_{isa}")
    if isa == "avx512novnni":
        flags, needs = VARIANTS[isa]
        if not needs <= cpu_flags():
            pytest.skip(f"CPU lacks {sorted(needs - cpu_flags())}")
        return RuntimeLib(custom_build(out / "libckir_novnni.so", flags))
    if not isa_supported(isa):
        pytest.skip(f"CPU lacks {isa}")
    return build_runtime(isa, out)


def _gemv(lib: RuntimeLib, name: str, x: np.ndarray, w: np.ndarray, n: int, ref: bool = False):
    y = np.full(n, np.nan, F32)
    (lib.ref if ref else lib.call)(f"gemv_{name}", x, w.reshape(-1), y, n, x.size)
    return y


def _check(lib: RuntimeLib, dtype: str, blocks: np.ndarray, x: np.ndarray, xs: np.ndarray) -> None:
    n, k = blocks.shape[0], x.size
    base = dtype[:-1]
    packed = quant.pack_block_panels(blocks, dtype)
    ref_rows = _gemv(lib, base, x, blocks, n, ref=True)
    assert np.array_equal(_gemv(lib, dtype, x, packed, n, ref=True), ref_rows)
    # the public GEMV: the reference's integers and fp32 operations, in its order
    assert np.array_equal(_gemv(lib, dtype, x, packed, n), ref_rows)
    m = xs.shape[0]
    y = np.full(m * n, np.nan, F32)
    lib.call(f"gemm_{dtype}", xs.reshape(-1), packed.reshape(-1), y, m, n, k)
    y32, want = np.full(m * n, np.nan, F32), np.full(m * n, np.nan, F32)
    lib.call(f"gemm_{base}", xs.reshape(-1), blocks.reshape(-1), want, m, n, k)
    if lib.qp_int8:
        for i in range(m):
            assert np.array_equal(y.reshape(m, n)[i], _gemv(lib, dtype, xs[i], packed, n))
    else:  # a scalar build: fp32 x in prefill, as gemm_q5_*
        assert np.array_equal(y, want)
    lib.qp_fp32_x(True)
    try:
        lib.call(f"gemm_{dtype}", xs.reshape(-1), packed.reshape(-1), y32, m, n, k)
    finally:
        lib.qp_fp32_x(False)
    assert np.array_equal(y32, want)
    # the GEMM reference twins: bit-equal (the same values summed in double)
    yr, wr = np.full(m * n, np.nan, F32), np.full(m * n, np.nan, F32)
    lib.ref(f"gemm_{dtype}", xs.reshape(-1), packed.reshape(-1), yr, m, n, k)
    lib.ref(f"gemm_{base}", xs.reshape(-1), blocks.reshape(-1), wr, m, n, k)
    assert np.array_equal(yr, wr)


@pytest.mark.parametrize("dtype", list(FORMATS))
@pytest.mark.parametrize("n,k", SHAPES)
def test_kernels_against_the_row_major_ones(lib: RuntimeLib, dtype: str, n: int, k: int) -> None:
    rng = np.random.default_rng(n * 7 + k)
    blocks = rows(dtype, n, k, seed=k)
    x = rng.standard_normal(k).astype(F32)
    xs = rng.standard_normal((6, k)).astype(F32)
    _check(lib, dtype, blocks, x, xs)
    # embed: rows gathered from their panels, dequantized as the row-major embed
    packed = quant.pack_block_panels(blocks, dtype)
    tokens = np.array([0, n - 1, n // 2, 0], np.int32)
    for fn in (lib.call, lib.ref):
        out, want = np.zeros(4 * k, F32), np.zeros(4 * k, F32)
        fn(f"embed_{dtype}", tokens, packed.reshape(-1), out, 4, k)
        fn(f"embed_{dtype[:-1]}", tokens, blocks.reshape(-1), want, 4, k)
        assert np.array_equal(out, want)


@pytest.mark.parametrize("dtype", list(FORMATS))
def test_extreme_levels(lib: RuntimeLib, dtype: str) -> None:
    """Every level 31 (the fifth bit everywhere), every level 0, and alternating ones,
    against x whose quantization is +-127: the int32 sums at their largest."""
    n, k, nbytes = 37, 128, BYTES[dtype]
    nf = 2 if dtype == "q5_1p" else 1
    rng = np.random.default_rng(3)
    blocks = rows(dtype, n, k, seed=1).reshape(n, k // 32, nbytes)
    qh, qs = 2 * nf, 2 * nf + 4
    blocks[0:10, :, qh:] = 0xFF  # q = 31
    blocks[10:20, :, qh:] = 0x00  # q = 0
    blocks[20:30, :, qh : qh + 4] = rng.integers(0, 256, (10, k // 32, 4), dtype=np.uint8)
    blocks[20:30, :, qs:] = 0xF0  # levels 0 / 15 plus the fifth bit at random
    blocks = np.ascontiguousarray(blocks.reshape(n, -1))
    x = np.where(rng.random(k) < 0.5, -1.0, 1.0).astype(F32) * 3.0
    xs = np.stack([x, -x, np.abs(x), rng.standard_normal(k).astype(F32)])
    _check(lib, dtype, blocks, x, xs)
    _check(lib, dtype, blocks, np.abs(x), xs[::-1].copy())


@pytest.mark.parametrize("dtype", list(FORMATS))
def test_fused_kernels_equal_separate_gemvs(lib: RuntimeLib, dtype: str) -> None:
    k, nq, nk, ni = 896, 96, 33, 95
    rng = np.random.default_rng(5)
    blocks = {
        name: rows(dtype, nn, k, seed=i)
        for i, (name, nn) in enumerate((("q", nq), ("k", nk), ("v", nk), ("g", ni), ("u", ni)))
    }
    w = {name: quant.pack_block_panels(b, dtype).reshape(-1) for name, b in blocks.items()}
    x = rng.standard_normal(k).astype(F32)
    bias = [rng.standard_normal(nn).astype(F32) for nn in (nq, nk, nk)]
    q, kk, v = (np.full(nn, np.nan, F32) for nn in (nq, nk, nk))
    lib.call(f"gemv_qkv_bias_{dtype}", x, w["q"], w["k"], w["v"], *bias, q, kk, v, nq, nk, nk, k)
    for got, name, nn, b in ((q, "q", nq, bias[0]), (kk, "k", nk, bias[1]), (v, "v", nk, bias[2])):
        assert np.array_equal(got, _gemv(lib, dtype, x, w[name], nn) + b)
    out = np.full(ni, np.nan, F32)
    lib.call(f"gemv_gate_up_{dtype}", x, w["g"], w["u"], out, ni, k)
    g, u = _gemv(lib, dtype, x, w["g"], ni), _gemv(lib, dtype, x, w["u"], ni)
    np.testing.assert_allclose(
        out, g / (1 + np.exp(-g.astype(np.float64))) * u, rtol=1e-5, atol=1e-6 * np.abs(g * u).max()
    )
    m = 5
    xs = rng.standard_normal((m, k)).astype(F32)
    ym = np.full(m * ni, np.nan, F32)
    lib.call(f"gemm_gate_up_{dtype}", xs.reshape(-1), w["g"], w["u"], ym, m, ni, k)
    yq = [np.full(m * nn, np.nan, F32) for nn in (nq, nk, nk)]
    lib.call(f"gemm_qkv_{dtype}", xs.reshape(-1), w["q"], w["k"], w["v"], *yq, m, nq, nk, nk, k)
    for i in range(m):
        one = np.full(ni, np.nan, F32)
        lib.call(f"gemv_gate_up_{dtype}", xs[i], w["g"], w["u"], one, ni, k)
        if lib.qp_int8:
            assert np.array_equal(ym.reshape(m, ni)[i], one)
            for got, name, nn in zip(yq, "qkv", (nq, nk, nk), strict=True):
                assert np.array_equal(got.reshape(m, nn)[i], _gemv(lib, dtype, xs[i], w[name], nn))
        else:  # fp32 x in prefill: within the int8 rounding of x
            np.testing.assert_allclose(
                ym.reshape(m, ni)[i], one, rtol=0.05, atol=0.05 * np.abs(one).max()
            )
    # fp32 x: the fused GEMMs equal the row-major dtype's fused GEMMs bit for bit
    base, rw = dtype[:-1], {name: b.reshape(-1) for name, b in blocks.items()}
    for mm in (m, 40):
        xs = rng.standard_normal((mm, k)).astype(F32)
        got = [np.full(mm * nn, np.nan, F32) for nn in (nq, nk, nk, ni)]
        want = [np.full(mm * nn, np.nan, F32) for nn in (nq, nk, nk, ni)]
        lib.qp_fp32_x(True)
        try:
            for ws, out, d in ((w, got, dtype), (rw, want, base)):
                lib.call(f"gemm_qkv_{d}", xs.reshape(-1), ws["q"], ws["k"], ws["v"], *out[:3],
                         mm, nq, nk, nk, k)  # fmt: skip
                lib.call(f"gemm_gate_up_{d}", xs.reshape(-1), ws["g"], ws["u"], out[3], mm, ni, k)
        finally:
            lib.qp_fp32_x(False)
        for a, b in zip(got, want, strict=True):
            assert np.array_equal(a, b)
