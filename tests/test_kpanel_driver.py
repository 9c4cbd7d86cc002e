"""The K-quant panel dtypes q4_kp / q5_kp / q6_kp: their byte layout and the driver of their
kernels (runtime/kernels/quant_kpanels.c), whatever each format's SIMD core does.

- the packer puts every byte where docs/quantization.md ("q4_kp, q6_kp") says, the last
  panel's padding rows are zero, and unpacking is exact;
- the reference twins equal the row-major K-quants' reference twins on the unpacked rows
  bit for bit (the portable core on the scalar quantization of x);
- the public kernels, on every ISA build: gemv within the fp32 summation error of the
  row-major reference, gemm rows equal to gemv of each row of x (int8 x) and to the
  row-major GEMM bit for bit on fp32 x, embed equal to the row-major embed, and the
  fused qkv / gate_up equal to separate gemv calls (one quantization of x, the same
  core).

The SIMD cores' own edge cases (extreme levels and scales) are in
tests/test_kpanel_q45_kp.py / test_kpanel_q6_kp.py.
"""

from __future__ import annotations

import numpy as np
import pytest
from kernel_lib import RuntimeLib, build_runtime, isa_supported, q6_kp_slots, same_on_every_team

from ckir import quant
from ckir.kquant import quantize_q4_k, quantize_q5_k, quantize_q6_k

F32 = np.float32
FORMATS = {"q4_kp": quantize_q4_k, "q5_kp": quantize_q5_k, "q6_kp": quantize_q6_k}


def rows(dtype: str, n: int, k: int, seed: int = 0) -> np.ndarray:
    """Row-major K-quant blocks of a random [n, k] matrix."""
    rng = np.random.default_rng(seed)
    return FORMATS[dtype](rng.standard_normal((n, k)).astype(F32))


@pytest.mark.parametrize("n", [1, 31, 32, 33, 70])
def test_pack_layout(n: int) -> None:
    k, nb = 512, 2
    for dtype, fields, nbytes in (
        ("q4_kp", (0, 2), 144),
        ("q5_kp", (0, 2), 176),
        ("q6_kp", (208,), 210),
    ):
        blocks = rows(dtype, n, k, seed=n)
        p = quant.pack_block_panels(blocks, dtype)
        panels = -(-n // 32)
        assert p.shape == (panels, nb, 32 * nbytes)
        head = [o + i for o in fields for i in range(2)]
        rest = [i for i in range(nbytes) if i not in head]
        for r in range(n):
            blk = blocks[r].reshape(nb, nbytes)
            for b in range(nb):
                pb = p[r // 32, b]
                for f, o in enumerate(fields):  # the f16 fields, 32 per field
                    assert bytes(pb[64 * f + 2 * (r % 32) :][:2]) == bytes(blk[b, o : o + 2])
                # quad planes of the other bytes, in order (q6_kp: in its read order)
                for at_slot in range(len(rest) // 4):
                    g = q6_kp_slots()[at_slot] if dtype == "q6_kp" else at_slot
                    at = 64 * len(fields) + 128 * at_slot + 4 * (r % 32)
                    assert bytes(pb[at : at + 4]) == bytes(blk[b, rest[4 * g : 4 * g + 4]])
        full = quant.unpack_block_panels(p, (panels * 32, k), dtype)
        assert not full[n:].any()  # the padding rows are zero bytes
        assert np.array_equal(quant.unpack_block_panels(p, (n, k), dtype), blocks)


def test_pack_refuses_wrong_input() -> None:
    with pytest.raises(ValueError, match=r"q4_kp packs q4_k rows \(uint8 \[N, K/256 \* 144\]\)"):
        quant.pack_block_panels(np.zeros((3, 100), np.uint8), "q4_kp")
    with pytest.raises(ValueError, match=r"q6_kp \[33, 512\] is 26880 bytes"):
        quant.unpack_block_panels(np.zeros(100, np.uint8), (33, 512), "q6_kp")
    with pytest.raises(ValueError, match=r"needs K % 256 == 0"):
        quant.unpack_block_panels(np.zeros(100, np.uint8), (3, 100), "q4_kp")


@pytest.fixture(scope="module", params=["native", "avx2", "scalar"])
def lib(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> RuntimeLib:
    if not isa_supported(request.param):
        pytest.skip(f"CPU lacks {request.param}")
    return build_runtime(request.param, tmp_path_factory.mktemp(f"kpd_{request.param}"))


def _gemv(lib: RuntimeLib, name: str, x: np.ndarray, w: np.ndarray, n: int, ref: bool = False):
    y = np.full(n, np.nan, F32)
    (lib.ref if ref else lib.call)(f"gemv_{name}", x, w.reshape(-1), y, n, x.size)
    return y


@pytest.mark.parametrize("dtype", list(FORMATS))
@pytest.mark.parametrize("n,k", [(1, 256), (33, 512), (95, 768), (64, 2304)])
def test_kernels_against_the_row_major_ones(lib: RuntimeLib, dtype: str, n: int, k: int) -> None:
    base = dtype[:-1]
    rng = np.random.default_rng(n * 7 + k)
    blocks = rows(dtype, n, k, seed=k)
    packed = quant.pack_block_panels(blocks, dtype)
    x = rng.standard_normal(k).astype(F32)
    ref_rows = _gemv(lib, base, x, blocks, n, ref=True)
    # the reference twins: bit-equal to the row-major ones
    assert np.array_equal(_gemv(lib, dtype, x, packed, n, ref=True), ref_rows)
    # the public GEMV: the same integers, the fp32 sum in another order at most
    got = _gemv(lib, dtype, x, packed, n)
    np.testing.assert_allclose(got, ref_rows, rtol=2e-6, atol=2e-6 * np.abs(ref_rows).max())
    # gemm rows (int8 x where the build has it): each the gemv of that row of x
    m = 7
    xs = rng.standard_normal((m, k)).astype(F32)
    y = np.full(m * n, np.nan, F32)
    lib.call(f"gemm_{dtype}", xs.reshape(-1), packed.reshape(-1), y, m, n, k)
    for i in range(m):
        one = _gemv(lib, dtype, xs[i], packed, n)
        if lib.qp_int8:
            assert np.array_equal(y.reshape(m, n)[i], one)
        else:  # a scalar build: fp32 x in prefill, the dequantized rows in fp32
            want = quant.dequantize(blocks, base).astype(np.float64) @ xs[i]
            np.testing.assert_allclose(y.reshape(m, n)[i], want, rtol=1e-5, atol=1e-5)
    # fp32 x: the row-major GEMM's dequantized rows, bit for bit
    lib.qp_fp32_x(True)
    try:
        y32, want = np.full(m * n, np.nan, F32), np.full(m * n, np.nan, F32)
        lib.call(f"gemm_{dtype}", xs.reshape(-1), packed.reshape(-1), y32, m, n, k)
        lib.call(f"gemm_{base}", xs.reshape(-1), blocks.reshape(-1), want, m, n, k)
    finally:
        lib.qp_fp32_x(False)
    assert np.array_equal(y32, want)
    # embed: rows gathered from their panels, dequantized as gguf does
    tokens = np.array([0, n - 1, n // 2, 0], np.int32)
    out, want_e = np.zeros(4 * k, F32), np.zeros(4 * k, F32)
    lib.call(f"embed_{dtype}", tokens, packed.reshape(-1), out, 4, k)
    lib.call(f"embed_{base}", tokens, blocks.reshape(-1), want_e, 4, k)
    assert np.array_equal(out, want_e)


@pytest.mark.parametrize("dtype", list(FORMATS))
def test_fused_kernels_equal_separate_gemvs(lib: RuntimeLib, dtype: str) -> None:
    k, nq, nk, ni = 512, 96, 33, 290
    rng = np.random.default_rng(5)
    w = {
        name: quant.pack_block_panels(rows(dtype, nn, k, seed=i), dtype).reshape(-1)
        for i, (name, nn) in enumerate((("q", nq), ("k", nk), ("v", nk), ("g", ni), ("u", ni)))
    }
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
    # prefill: gate_up rows equal the decode of each row of x (int8 x builds)
    m = 5
    xs = rng.standard_normal((m, k)).astype(F32)
    ym = np.full(m * ni, np.nan, F32)
    lib.call(f"gemm_gate_up_{dtype}", xs.reshape(-1), w["g"], w["u"], ym, m, ni, k)
    for i in range(m):
        one = np.full(ni, np.nan, F32)
        lib.call(f"gemv_gate_up_{dtype}", xs[i], w["g"], w["u"], one, ni, k)
        if lib.qp_int8:
            assert np.array_equal(ym.reshape(m, ni)[i], one)
        else:  # fp32 x in prefill: within the Q8_K rounding of x
            np.testing.assert_allclose(
                ym.reshape(m, ni)[i], one, rtol=0.05, atol=0.05 * np.abs(one).max()
            )


@pytest.mark.parametrize("dtype", list(FORMATS))
def test_claimed_panels_every_team(lib: RuntimeLib, dtype: str) -> None:
    """The decode GEMVs split their panels by claiming (ckir_internal.h, CKIR_CLAIMED_ITEMS),
    and the int8-x GEMMs the panels of each tile of x's rows: each thread streams its own
    share and then takes panels from the back of the others'.
    Whatever the team (more threads than this machine's cores make the threads finish
    their shares at different times, so they take each other's panels), every output is
    written once and equals the one-thread result bit for bit: a panel is computed by one
    core call, whichever thread claims it."""
    k, nq, nk, ni = 512, 33 * 32 + 5, 77, 29 * 32 + 1  # odd panel counts, a short last panel
    rng = np.random.default_rng(11)
    w = {
        name: quant.pack_block_panels(rows(dtype, nn, k, seed=i), dtype).reshape(-1)
        for i, (name, nn) in enumerate((("q", nq), ("k", nk), ("v", nk), ("g", ni), ("u", ni)))
    }
    x = rng.standard_normal(k).astype(F32)
    m = 300  # prefill: tiles of x's rows (KP_XB bytes of them), each tile's panels claimed
    xm = rng.standard_normal((m, k)).astype(F32)

    def run() -> list[np.ndarray]:
        y = _gemv(lib, dtype, x, w["q"], nq)
        q, kk, v = (np.full(nn, np.nan, F32) for nn in (nq, nk, nk))
        lib.call(f"gemv_qkv_{dtype}", x, w["q"], w["k"], w["v"], q, kk, v, nq, nk, nk, k)
        out = np.full(ni, np.nan, F32)
        lib.call(f"gemv_gate_up_{dtype}", x, w["g"], w["u"], out, ni, k)
        qm, km, vm = (np.full(m * nn, np.nan, F32) for nn in (nq, nk, nk))
        lib.call(f"gemm_qkv_{dtype}", xm, w["q"], w["k"], w["v"], qm, km, vm, m, nq, nk, nk, k)
        gu = np.full(m * ni, np.nan, F32)
        lib.call(f"gemm_gate_up_{dtype}", xm, w["g"], w["u"], gu, m, ni, k)
        return [y, q, kk, v, out, qm, km, vm, gu]

    same_on_every_team(lib, run)


def _y(
    lib: RuntimeLib,
    fn: str,
    x: np.ndarray,
    ws: list[np.ndarray],
    bs: list[np.ndarray],
    dims: list[int],
    ns: tuple[int, ...],
    m: int = 1,
    ref: bool = False,
) -> list[np.ndarray]:
    """The outputs of one call of kernel fn (NaN where it writes nothing)."""
    outs = [np.full(m * n, np.nan, F32) for n in ns]
    (lib.ref if ref else lib.call)(fn, x.reshape(-1), *ws, *bs, *outs, *dims)
    return outs


@pytest.mark.parametrize("dtype", ["q4_kp", "q5_kp"])
@pytest.mark.parametrize("bias", [False, True], ids=["nobias", "bias"])
def test_mixed_qkv_equals_separate_calls(lib: RuntimeLib, dtype: str, bias: bool) -> None:
    """gemv_qkv_<d>_v_q6_kp (q and k in a K-quant panel dtype, v in q6_kp; a Q4_K_M
    file's layers whose attn_v is Q6_K): each output equals the unfused kernel of its
    own dtype bit for bit, decode (x quantized once for the three, the panels of
    matrices of two formats in one claimed sequence) and prefill (int8 x per tile, or
    fp32 x), on every team; the reference twins are the unfused reference kernels."""
    k, nq, nk = 768, 6 * 32 + 7, 33  # short last panels; v's format differs from q's
    rng = np.random.default_rng(21 + bias)
    fmts = {"q": dtype, "k": dtype, "v": "q6_kp"}
    ns = {"q": nq, "k": nk, "v": nk}
    w = {
        name: quant.pack_block_panels(rows(fmts[name], ns[name], k, seed=i), fmts[name]).reshape(-1)
        for i, name in enumerate("qkv")
    }
    ws = [w[n] for n in "qkv"]
    bs = [rng.standard_normal(ns[n]).astype(F32) for n in "qkv"] if bias else []
    sfx = f"{'_bias' if bias else ''}"
    x = rng.standard_normal(k).astype(F32)

    def alone(kind: str, xs: np.ndarray, m: int, ref: bool = False) -> list[np.ndarray]:
        out = []
        for i, n in enumerate("qkv"):
            dims = ([m] if kind == "gemm" else []) + [ns[n], k]
            out += _y(
                lib,
                f"{kind}{sfx}_{fmts[n]}",
                xs,
                [ws[i]],
                bs[i : i + 1] if bias else [],
                dims,
                (ns[n],),
                m,
                ref,
            )
        return out

    fused = f"qkv{sfx}_{dtype}_v_q6_kp"
    want = alone("gemv", x, 1)
    assert all(np.isfinite(a).all() for a in want)
    for team in (1, 2, 3):
        with lib.num_threads(team):
            got = _y(lib, f"gemv_{fused}", x, ws, bs, [nq, nk, nk, k], (nq, nk, nk))
        for g, e in zip(got, want, strict=True):
            assert np.array_equal(g, e), f"{team} threads"
    ref = _y(lib, f"gemv_{fused}", x, ws, bs, [nq, nk, nk, k], (nq, nk, nk), ref=True)
    for g, e in zip(ref, alone("gemv", x, 1, ref=True), strict=True):
        assert np.array_equal(g, e)
    # prefill, on int8 x (SIMD builds) and on fp32 x
    m = 5
    xs = rng.standard_normal((m, k)).astype(F32)
    for fp32_x in (False, True):
        lib.qp_fp32_x(fp32_x)
        try:
            got = _y(lib, f"gemm_{fused}", xs, ws, bs, [m, nq, nk, nk, k], (nq, nk, nk), m)
            sep = alone("gemm", xs, m)
        finally:
            lib.qp_fp32_x(False)
        for g, e in zip(got, sep, strict=True):
            assert np.isfinite(g).all() and np.array_equal(g, e), f"fp32 x {fp32_x}"
    ref = _y(lib, f"gemm_{fused}", xs, ws, bs, [m, nq, nk, nk, k], (nq, nk, nk), m, ref=True)
    for g, e in zip(ref, alone("gemm", xs, m, ref=True), strict=True):
        assert np.array_equal(g, e)
