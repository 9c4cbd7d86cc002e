"""Panel-dtype kernels (weights pre-packed in GEMM panels: f32p fp32, bf16p bf16
pairs) against NumPy oracles.

For each ISA build and 1 and 2 OpenMP threads: gemv / gemm (+bias), embed and the
fused qkv / gate_up kernels of weight dtypes f32p and bf16p, and their ``ckir_ref_``
twins, on ragged shapes: N around the 32-row panel (1, 31, 32, 33, 65), K = 1 and
odd (bf16p, whose K is even: K + 1), M on both sides of the streaming /
blocked-GEMM boundary (8 / 9), of the bf16 dot-product boundary (32 / 33) and of
the 12-row register tile, and model sizes.  Outputs start as NaN so an unwritten
element fails.  The panels are packed here from the layouts' definitions
(ckir_internal.h), independently of ckir.quant.  bf16p oracles take the weights'
bf16 values and, for a public GEMM of a build with vdpbf16ps, x rounded as
gemm_bf16 rounds it (kernel_lib.gemm_bf16_x).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
from kernel_lib import (
    PANEL,
    QBLOCK,
    emulate_gemv,
    gemm_bf16_x,
    pack_block_panels,
    rand,
    same_on_every_team,
)

from ckir import quant

F32 = np.float32


def pack_f32p(w: np.ndarray) -> np.ndarray:
    """w[N, K] as f32p: element (n, k) at ((n // 32) * K + k) * 32 + n % 32, rows >= N zero."""
    n, k = w.shape
    p = -(-n // PANEL)
    padded = np.zeros((p * PANEL, k), F32)
    padded[:n] = w
    return np.ascontiguousarray(padded.reshape(p, PANEL, k).transpose(0, 2, 1)).reshape(-1)


def pack_bf16p(w: np.ndarray) -> np.ndarray:
    """w[N, K] (K even) as bf16p: the bf16 bits of element (n, k) at uint16
    ((n // 32) * (K / 2) + k // 2) * 64 + (n % 32) * 2 + k % 2, rows >= N zero."""
    n, k = w.shape
    p = -(-n // PANEL)
    padded = np.zeros((p * PANEL, k), np.uint16)
    padded[:n] = quant.to_bf16(w)
    pairs = padded.reshape(p, PANEL, k // 2, 2).transpose(0, 2, 1, 3)
    return np.ascontiguousarray(pairs).reshape(-1)


@dataclass(frozen=True)
class Panels:
    """One panel dtype: how to pack w, the values its kernels multiply, its K."""

    dtype: str

    def pack(self, w: np.ndarray) -> np.ndarray:
        return pack_f32p(w) if self.dtype == "f32p" else pack_bf16p(w)

    def values(self, w: np.ndarray) -> np.ndarray:
        """The weights as the kernels see them, float64."""
        if self.dtype == "bf16p":
            return quant.from_bf16(quant.to_bf16(w)).astype(np.float64)
        return w.astype(np.float64)

    def k(self, K: int) -> int:
        """A K this dtype stores (bf16p: even)."""
        return K + K % 2 if self.dtype == "bf16p" else K

    def x(self, lib, x: np.ndarray, public: bool) -> np.ndarray:
        """The x a GEMM of this dtype multiplies, float64."""
        return (
            gemm_bf16_x(x, lib.bf16_dot, public) if self.dtype == "bf16p" else x.astype(np.float64)
        )


@pytest.fixture(params=["f32p", "bf16p"])
def panels(request: pytest.FixtureRequest) -> Panels:
    return Panels(request.param)


def nan(*shape: int) -> np.ndarray:
    return np.full(shape, np.nan, F32)


def close(actual: np.ndarray, expected: np.ndarray, tol: float = 2e-5) -> None:
    assert not np.isnan(actual).any(), "unwritten (NaN) output elements"
    np.testing.assert_allclose(actual.astype(np.float64), expected, rtol=tol, atol=tol)


def test_pack_layout():
    w = np.arange(33 * 3, dtype=F32).reshape(33, 3)
    p = pack_f32p(w)
    assert p.size == 2 * PANEL * 3
    for n in range(33):
        for k in range(3):
            assert p[((n // PANEL) * 3 + k) * PANEL + n % PANEL] == w[n, k]
    for n in range(33, 2 * PANEL):  # the last panel's padding rows are zero
        for k in range(3):
            assert p[((n // PANEL) * 3 + k) * PANEL + n % PANEL] == 0


def test_pack_bf16p_layout():
    w = np.arange(33 * 4, dtype=F32).reshape(33, 4)  # small integers: exact in bf16
    p = pack_bf16p(w)
    assert p.size == 2 * PANEL * 4
    for n in range(2 * PANEL):
        for k in range(4):
            got = quant.from_bf16(p[((n // PANEL) * 2 + k // 2) * 64 + (n % PANEL) * 2 + k % 2])
            assert got == (w[n, k] if n < 33 else 0)


GEMM_SHAPES = [  # (M, N, K)
    (1, 1, 1),
    (1, 31, 7),
    (1, 33, 17),
    (2, 32, 64),
    (4, 65, 300),
    (5, 576, 576),
    (8, 97, 33),
    (9, 97, 33),
    (12, 32, 1),
    (13, 65, 257),
    (32, 64, 40),
    (33, 64, 40),
    (37, 100, 520),
    (128, 576, 576),
    (150, 70, 96),
    (40, 70, 1300),  # k-slices of weights read in place (GEMM_KC_IN_PLACE 1024 on AVX2)
]


@pytest.mark.parametrize("bias", [False, True], ids=["nobias", "bias"])
@pytest.mark.parametrize("M,N,K", GEMM_SHAPES)
def test_gemm(lib, threads, panels, M, N, K, bias):
    K = panels.k(K)
    rng = np.random.default_rng(M * 1000 + N + K)
    x, w = rand(rng, M, K), rand(rng, N, K, scale=K**-0.5)
    b = rand(rng, N, scale=0.5)
    wv, wp = panels.values(w), panels.pack(w)
    kinds = ["gemm"] + (["gemv"] if M == 1 else [])
    for kind in kinds:
        name = f"{kind}{'_bias' if bias else ''}_{panels.dtype}"
        dims = ([M] if kind == "gemm" else []) + [N, K]
        for fn in (lib.call, lib.ref):
            want = panels.x(lib, x, fn == lib.call) @ wv.T + (b if bias else 0.0)
            y = nan(M, N)
            xs = x if kind == "gemm" else x[0]
            fn(name, xs, wp, *([b] if bias else []), y if kind == "gemm" else y[0], *dims)
            close(y, want)


@pytest.mark.parametrize("M,N,K", [(1, 576, 576), (5, 65, 33), (128, 1536, 576), (130, 33, 17)])
def test_gemm_f32p_is_gemm_f32_up_to_rounding(lib, M, N, K):
    """Same fp32 values, same kind of summation: only the order may differ."""
    rng = np.random.default_rng(7)
    x, w = rand(rng, M, K), rand(rng, N, K, scale=K**-0.5)
    y32, yp = nan(M, N), nan(M, N)
    lib.call("gemm_f32", x, w, y32, M, N, K)
    lib.call("gemm_f32p", x, pack_f32p(w), yp, M, N, K)
    np.testing.assert_allclose(yp, y32, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("M,N,K", [(1, 576, 576), (5, 65, 34), (20, 100, 64), (128, 1536, 576)])
def test_gemm_bf16p_is_gemm_bf16_up_to_rounding(lib, M, N, K):
    """Same bf16 weights, the same x rounding rule: only the order of the sums differs."""
    rng = np.random.default_rng(8)
    x, w = rand(rng, M, K), rand(rng, N, K, scale=K**-0.5)
    y16, yp = nan(M, N), nan(M, N)
    lib.call("gemm_bf16", x, quant.to_bf16(w), y16, M, N, K)
    lib.call("gemm_bf16p", x, pack_bf16p(w), yp, M, N, K)
    np.testing.assert_allclose(yp, y16, rtol=1e-5, atol=1e-5)


def test_results_do_not_depend_on_the_thread_count(lib, panels):
    rng = np.random.default_rng(3)
    before = lib.get_num_threads()
    try:
        for M, N, K in [(1, 1536, 576), (4, 577, 96), (20, 300, 64), (128, 1000, 576)]:
            x, wp = rand(rng, M, K), panels.pack(rand(rng, N, K))
            outs = []
            for nt in (1, 2):
                lib.set_num_threads(nt)
                y = nan(M, N)
                lib.call(f"gemm_{panels.dtype}", x, wp, y, M, N, K)
                outs.append(y)
            np.testing.assert_array_equal(outs[0], outs[1])
    finally:
        lib.set_num_threads(before)


@pytest.mark.parametrize("V,E,T", [(1, 1, 1), (33, 7, 5), (100, 576, 40), (64, 96, 3)])
def test_embed_exact(lib, panels, V, E, T):
    E = panels.k(E)
    rng = np.random.default_rng(V + E)
    table = rand(rng, V, E)
    tokens = rng.integers(0, V, T).astype(np.int32)
    tokens[-1] = V - 1  # the last row of the last (padded) panel
    want = panels.values(table)[tokens]
    for fn in (lib.call, lib.ref):
        out = nan(T, E)
        fn(f"embed_{panels.dtype}", tokens, panels.pack(table), out, T, E)
        np.testing.assert_array_equal(out, want)


QKV_SHAPES = [  # (M, Nq, Nk, Nv, K)
    (1, 1, 1, 1, 1),
    (1, 17, 5, 3, 33),
    (1, 576, 192, 192, 576),
    (1, 33, 65, 31, 40),
    (8, 64, 32, 32, 100),
    (9, 70, 40, 40, 17),
    (40, 70, 40, 40, 64),
    (128, 576, 192, 192, 576),
]


@pytest.mark.parametrize("bias", [False, True], ids=["nobias", "bias"])
@pytest.mark.parametrize("shape", QKV_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_qkv(lib, threads, panels, shape, bias):
    M, Nq, Nk, Nv, K = shape
    K = panels.k(K)
    rng = np.random.default_rng(sum(shape) + bias)
    x = rand(rng, M, K)
    ws = [rand(rng, n, K, scale=K**-0.5) for n in (Nq, Nk, Nv)]
    bs = [rand(rng, n, scale=0.5) for n in (Nq, Nk, Nv)] if bias else []
    wps = [panels.pack(w) for w in ws]
    kinds = ["gemm"] + (["gemv"] if M == 1 else [])
    for kind in kinds:
        name = f"{kind}_qkv{'_bias' if bias else ''}_{panels.dtype}"
        dims = ([M] if kind == "gemm" else []) + [Nq, Nk, Nv, K]
        for fn in (lib.call, lib.ref):
            xe = panels.x(lib, x, fn == lib.call)
            want = [xe @ panels.values(w).T for w in ws]
            if bias:
                want = [o + b for o, b in zip(want, bs, strict=True)]
            outs = [nan(M, n) for n in (Nq, Nk, Nv)]
            xs = x if kind == "gemm" else x[0]
            fn(name, xs, *wps, *bs, *(o if kind == "gemm" else o[0] for o in outs), *dims)
            for o, e in zip(outs, want, strict=True):
                close(o, e)


def test_gemv_qkv_is_three_gemvs_bit_for_bit(lib, threads, panels):
    rng = np.random.default_rng(11)
    Nq, Nk, Nv, K = 577, 65, 33, 96
    x = rand(rng, K)
    ws = [panels.pack(rand(rng, n, K)) for n in (Nq, Nk, Nv)]
    fused = [nan(n) for n in (Nq, Nk, Nv)]
    lib.call(f"gemv_qkv_{panels.dtype}", x, *ws, *fused, Nq, Nk, Nv, K)
    for w, n, f in zip(ws, (Nq, Nk, Nv), fused, strict=True):
        one = nan(n)
        lib.call(f"gemv_{panels.dtype}", x, w, one, n, K)
        np.testing.assert_array_equal(f, one)


@pytest.mark.parametrize(
    "M,N,K",
    [
        (1, 1, 1),
        (1, 33, 17),
        (1, 1536, 576),
        (4, 300, 65),
        (9, 257, 40),
        (40, 100, 64),
        (128, 1536, 576),
    ],
)
def test_gate_up(lib, threads, panels, M, N, K):
    K = panels.k(K)
    rng = np.random.default_rng(M + N + K)
    x = rand(rng, M, K)
    wg, wu = rand(rng, N, K, scale=K**-0.5), rand(rng, N, K, scale=K**-0.5)
    kinds = ["gemm"] + (["gemv"] if M == 1 else [])
    for kind in kinds:
        name = f"{kind}_gate_up_{panels.dtype}"
        dims = ([M] if kind == "gemm" else []) + [N, K]
        for fn in (lib.call, lib.ref):
            xe = panels.x(lib, x, fn == lib.call)
            g, u = xe @ panels.values(wg).T, xe @ panels.values(wu).T
            want = g / (1.0 + np.exp(-g)) * u
            out = nan(M, N)
            xs = x if kind == "gemm" else x[0]
            fn(name, xs, panels.pack(wg), panels.pack(wu), out if kind == "gemm" else out[0], *dims)
            close(out, want)


# ---------------------------------------------------------------- q8_0p, q4_1p, q4_0p
# Q8_0 / Q4_1 / Q4_0 blocks in panels: gemv multiplies quantized x (the integer
# scheme of gemv_q8_0 / gemv_q4_1 / gemv_q4_0, emulated by kernel_lib.emulate_gemv),
# gemm fp32 x against the dequantized weights (gemm_q8_0's / ...'s numerics), except
# the public gemm of a build with lib.qp_int8 (every SIMD build, unless switched to
# fp32 x by ckir_runtime_qp_fp32_x: fixture qp_x): every row as gemv_<p> computes
# it, bit for bit.


def block_values(w: np.ndarray, plain: str) -> np.ndarray:
    return quant.dequantize(quant.quantize(w, plain), plain).reshape(w.shape).astype(np.float64)


@pytest.fixture(params=list(QBLOCK))
def qpanels(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture(params=["int8", "fp32"])
def qp_x(request: pytest.FixtureRequest, lib):
    """The x of the q8_0p / q4_1p GEMMs: int8 (where the build has the int8 GEMM) or
    fp32 (ckir_runtime_qp_fp32_x, on every build); set back afterwards."""
    if request.param == "int8" and not lib.qp_int8:
        pytest.skip(f"the {lib.isa} build has no int8 GEMM: fp32 x only")
    lib.qp_fp32_x(request.param == "fp32")
    yield request.param
    lib.qp_fp32_x(False)


def test_pack_block_panels_layout(qpanels):
    plain, nbytes = QBLOCK[qpanels]
    rng = np.random.default_rng(1)
    w = rand(rng, 33, 64)
    p, blocks = pack_block_panels(w, qpanels), quant.quantize(w, plain).reshape(33, 2, nbytes)
    assert p.size == 2 * PANEL * 2 * nbytes
    head = 4 if qpanels == "q4_1p" else 2  # d (and m)
    for n in range(2 * PANEL):
        r = n % PANEL
        for b in range(2):
            base = ((n // PANEL) * 2 + b) * PANEL * nbytes
            got = [*p[base + 2 * r : base + 2 * r + 2]]
            if qpanels == "q4_1p":
                got += [*p[base + 64 + 2 * r : base + 64 + 2 * r + 2]]
            body = nbytes - head
            got += [int(p[base + 32 * head + (i // 4) * 128 + 4 * r + i % 4]) for i in range(body)]
            want = list(blocks[n, b]) if n < 33 else [0] * nbytes
            assert got == want, (n, b)


Q8P_GEMM_SHAPES = [
    (1, 1, 32),
    (1, 33, 64),
    (2, 32, 64),
    (4, 65, 320),
    (8, 97, 96),
    (9, 97, 96),
    (13, 65, 256),
    (33, 64, 96),
    (128, 576, 576),
    (150, 70, 96),
]


@pytest.mark.parametrize("bias", [False, True], ids=["nobias", "bias"])
@pytest.mark.parametrize("M,N,K", Q8P_GEMM_SHAPES)
def test_gemm_block_panels(lib, threads, qpanels, qp_x, M, N, K, bias):
    plain = QBLOCK[qpanels][0]
    rng = np.random.default_rng(M * 1000 + N + K)
    x, w = rand(rng, M, K), rand(rng, N, K, scale=K**-0.5)
    b = rand(rng, N, scale=0.5)
    want = x.astype(np.float64) @ block_values(w, plain).T + (b if bias else 0.0)
    wp = pack_block_panels(w, qpanels)
    for fn in (lib.call, lib.ref):
        y = nan(M, N)
        fn(f"gemm{'_bias' if bias else ''}_{qpanels}", x, wp, *([b] if bias else []), y, M, N, K)
        if fn == lib.call and lib.qp_int8:
            assert not np.isnan(y).any(), "unwritten (NaN) output elements"
            for m in range(M):
                row, mag, _ = emulate_gemv(x[m], quant.quantize(w, plain), plain)
                err = np.abs(y[m] - row - (b if bias else 0.0))
                assert np.all(err <= 1e-5 * mag + 1e-6), (m, err.max())
                one = nan(N)
                lib.call(
                    f"gemv{'_bias' if bias else ''}_{qpanels}",
                    x[m],
                    wp,
                    *([b] if bias else []),
                    one,
                    N,
                    K,
                )
                np.testing.assert_array_equal(y[m], one)
        else:
            close(y, want)


@pytest.mark.parametrize("bias", [False, True], ids=["nobias", "bias"])
@pytest.mark.parametrize("N,K", [(1, 32), (3, 64), (33, 96), (65, 4128), (576, 576), (100, 1536)])
def test_gemv_block_panels(lib, threads, qpanels, N, K, bias):
    plain = QBLOCK[qpanels][0]
    rng = np.random.default_rng(N * 1000 + K)
    x, w = rand(rng, K), rand(rng, N, K, scale=K**-0.5)
    b = rand(rng, N, scale=0.5)
    want, mag, _ = emulate_gemv(x, quant.quantize(w, plain), plain)
    want = want + (b if bias else 0.0)
    wp = pack_block_panels(w, qpanels)
    for fn in (lib.call, lib.ref):
        y = nan(N)
        fn(f"gemv{'_bias' if bias else ''}_{qpanels}", x, wp, *([b] if bias else []), y, N, K)
        assert not np.isnan(y).any()
        assert np.all(np.abs(y - want) <= 1e-5 * mag + 1e-30), np.abs(y - want).max()


@pytest.mark.parametrize("V,E,T", [(1, 32, 1), (33, 64, 5), (100, 576, 40)])
def test_embed_block_panels_exact(lib, qpanels, V, E, T):
    rng = np.random.default_rng(V + E)
    table = rand(rng, V, E)
    tokens = rng.integers(0, V, T).astype(np.int32)
    tokens[-1] = V - 1
    want = block_values(table, QBLOCK[qpanels][0])[tokens].astype(F32)
    for fn in (lib.call, lib.ref):
        out = nan(T, E)
        fn(f"embed_{qpanels}", tokens, pack_block_panels(table, qpanels), out, T, E)
        np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("M", [1, 9, 128, 300])  # 300: three gate_up row tiles
def test_fused_block_panels(lib, threads, qpanels, qp_x, M):
    """qkv and gate_up: gemv from the unfused gemv_<p> (qkv bit for bit); gemm on int8
    x from the unfused gemm_<p> (bit for bit), on fp32 x against the fp32 oracle (the
    gate_up tiles run on worker threads, which must not fall back to int8 x)."""
    plain = QBLOCK[qpanels][0]
    rng = np.random.default_rng(M)
    Nq, Nk, Nv, K = 96, 33, 33, 64
    x = rand(rng, M, K)
    ws = [rand(rng, n, K, scale=K**-0.5) for n in (Nq, Nk, Nv)]
    wps = [pack_block_panels(w, qpanels) for w in ws]
    outs = [nan(M, n) for n in (Nq, Nk, Nv)]
    gate_up = nan(M, Nq)
    if M == 1:
        lib.call(f"gemv_qkv_{qpanels}", x[0], *wps, *(o[0] for o in outs), Nq, Nk, Nv, K)
        lib.call(f"gemv_gate_up_{qpanels}", x[0], wps[0], wps[0], gate_up[0], Nq, K)
        for o, wp, n in zip(outs, wps, (Nq, Nk, Nv), strict=True):
            one = nan(n)
            lib.call(f"gemv_{qpanels}", x[0], wp, one, n, K)
            np.testing.assert_array_equal(o[0], one)
        g = outs[0][0].astype(np.float64)
        np.testing.assert_allclose(gate_up[0], g / (1 + np.exp(-g)) * g, rtol=1e-5, atol=1e-6)
    else:
        lib.call(f"gemm_qkv_{qpanels}", x, *wps, *outs, M, Nq, Nk, Nv, K)
        lib.call(f"gemm_gate_up_{qpanels}", x, wps[0], wps[0], gate_up, M, Nq, K)
        xs = x.astype(np.float64)
        for o, w, wp, n in zip(outs, ws, wps, (Nq, Nk, Nv), strict=True):
            if lib.qp_int8:  # the unfused gemm_<p>, bit for bit
                one = nan(M, n)
                lib.call(f"gemm_{qpanels}", x, wp, one, M, n, K)
                np.testing.assert_array_equal(o, one)
            else:
                close(o, xs @ block_values(w, plain).T)
        if lib.qp_int8:
            g = outs[0].astype(np.float64)
            np.testing.assert_allclose(gate_up, g / (1 + np.exp(-g)) * g, rtol=1e-5, atol=1e-6)
        else:
            g = xs @ block_values(ws[0], plain).T
            close(gate_up, g / (1 + np.exp(-g)) * g)


def claimed_every_team(lib, dtype: str, pack) -> None:
    """The decode GEMVs claim their panels (ckir_internal.h, CKIR_CLAIMED_ITEMS): with
    more threads than this machine's cores the threads take panels from each other's
    shares, and every output is still written once, equal to the one-thread result bit
    for bit (gemv, qkv, gate_up; odd panel counts and a short last panel)."""
    rng = np.random.default_rng(17)
    K, Nq, Nk, Ni = 512, 33 * PANEL + 5, 77, 29 * PANEL + 1
    x = rand(rng, K)
    wq, wk, wv, wg, wu = (pack(rand(rng, n, K, scale=K**-0.5)) for n in (Nq, Nk, Nk, Ni, Ni))

    def run() -> list[np.ndarray]:
        y, q, k, v, gu = nan(Nq), nan(Nq), nan(Nk), nan(Nk), nan(Ni)
        lib.call(f"gemv_{dtype}", x, wq, y, Nq, K)
        lib.call(f"gemv_qkv_{dtype}", x, wq, wk, wv, q, k, v, Nq, Nk, Nk, K)
        lib.call(f"gemv_gate_up_{dtype}", x, wg, wu, gu, Ni, K)
        return [y, q, k, v, gu]

    same_on_every_team(lib, run)


def test_claimed_block_panels_every_team(lib, qpanels):
    claimed_every_team(lib, qpanels, lambda w: pack_block_panels(w, qpanels))


def test_claimed_panels_every_team(lib, panels):
    claimed_every_team(lib, panels.dtype, panels.pack)
