"""The fused kernels (runtime/kernels/fused_*.c) against NumPy float64 oracles.

For each ISA build ("scalar", "avx2", "native") and 1 and 2 OpenMP threads,
every fused kernel and its ``ckir_ref_`` twin are checked against the oracle
on ragged shapes (M = 1, N and K not multiples of 16, K = 1, the small-M /
blocked-GEMM boundary at M = 8 / 9, tiles of 96 rows and 128 columns plus
one, SmolLM-135M and Qwen2-0.5B sizes).  Outputs start as NaN so an unwritten
element fails.  The fused kernels must also agree with the unfused kernels
they replace: bit for bit where the docs say so (decode qkv = three gemv_f32
calls, add_rmsnorm = add_f32 + rmsnorm_f32), within rounding otherwise.
"""

from __future__ import annotations

import numpy as np
import pytest
from kernel_lib import gemm_bf16_x, rand

from ckir.reference.kernels import silu_mul

F32 = np.float32


def nan(*shape):
    return np.full(shape, np.nan, F32)


def close(actual, expected, rtol=2e-5, atol=2e-5):
    assert not np.isnan(actual).any(), "unwritten (NaN) output elements"
    np.testing.assert_allclose(actual.astype(np.float64), expected, rtol=rtol, atol=atol)


# ---------------------------------------------------------------------------- qkv

QKV_SHAPES = [  # (M, Nq, Nk, Nv, K)
    (1, 1, 1, 1, 1),
    (1, 64, 32, 32, 64),
    (1, 17, 5, 3, 33),
    (1, 7, 9, 11, 1),
    (1, 576, 192, 192, 576),  # SmolLM-135M
    (1, 896, 128, 128, 896),  # Qwen2-0.5B
    (2, 19, 6, 6, 40),
    (8, 64, 32, 32, 100),
    (9, 64, 32, 32, 100),
    (33, 50, 17, 17, 17),
    (128, 576, 192, 192, 576),
    (300, 40, 8, 8, 4096),  # K * GEMM_MC floats > the driver's 2 MiB pack: row blocks
]


def qkv_inputs(rng, M, Nq, Nk, Nv, K, bias):
    x = rand(rng, M, K)
    ws = [rand(rng, n, K, scale=K**-0.5) for n in (Nq, Nk, Nv)]
    bs = [rand(rng, n, scale=0.5) for n in (Nq, Nk, Nv)] if bias else []
    return x, ws, bs


def qkv_expected(x, ws, bs):
    xd = x.astype(np.float64)
    outs = [xd @ w.astype(np.float64).T for w in ws]
    if bs:
        outs = [o + b for o, b in zip(outs, bs, strict=True)]
    return outs


@pytest.mark.parametrize("bias", [False, True], ids=["nobias", "bias"])
@pytest.mark.parametrize("shape", QKV_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_qkv(lib, threads, shape, bias):
    M, Nq, Nk, Nv, K = shape
    rng = np.random.default_rng(sum(shape) + bias)
    x, ws, bs = qkv_inputs(rng, M, Nq, Nk, Nv, K, bias)
    expected = qkv_expected(x, ws, bs)
    kinds = ["gemm"] + (["gemv"] if M == 1 else [])
    for kind in kinds:
        name = f"{kind}_qkv{'_bias' if bias else ''}_f32"
        dims = ([M] if kind == "gemm" else []) + [Nq, Nk, Nv, K]
        for fn in (lib.call, lib.ref):
            outs = [nan(M, n) for n in (Nq, Nk, Nv)]
            fn(name, x, *ws, *bs, *outs, *dims)
            for o, e in zip(outs, expected, strict=True):
                close(o, e)


@pytest.mark.parametrize("bias", [False, True], ids=["nobias", "bias"])
@pytest.mark.parametrize("shape", [(64, 32, 32, 64), (17, 5, 3, 33), (576, 192, 192, 576)])
def test_gemv_qkv_is_three_gemvs_bit_for_bit(lib, threads, shape, bias):
    """The decode kernel accumulates exactly as gemv_f32: fusing changes no bit."""
    Nq, Nk, Nv, K = shape
    rng = np.random.default_rng(K)
    x, ws, bs = qkv_inputs(rng, 1, Nq, Nk, Nv, K, bias)
    fused = [nan(1, n) for n in (Nq, Nk, Nv)]
    lib.call(f"gemv_qkv{'_bias' if bias else ''}_f32", x, *ws, *bs, *fused, Nq, Nk, Nv, K)
    for i, (w, n) in enumerate(zip(ws, (Nq, Nk, Nv), strict=True)):
        alone = nan(1, n)
        if bias:
            lib.call("gemv_bias_f32", x, w, bs[i], alone, n, K)
        else:
            lib.call("gemv_f32", x, w, alone, n, K)
        np.testing.assert_array_equal(fused[i], alone)


def test_gemm_qkv_matches_the_unfused_gemms(lib):
    """Prefill: the fused call equals three gemm_bias_f32 calls (small and large M)."""
    rng = np.random.default_rng(5)
    for M in (3, 40):
        x, ws, bs = qkv_inputs(rng, M, 96, 40, 40, 70, True)
        fused = [nan(M, n) for n in (96, 40, 40)]
        lib.call("gemm_qkv_bias_f32", x, *ws, *bs, *fused, M, 96, 40, 40, 70)
        for w, b, f in zip(ws, bs, fused, strict=True):
            alone = nan(M, w.shape[0])
            lib.call("gemm_bias_f32", x, w, b, alone, M, w.shape[0], 70)
            np.testing.assert_allclose(f, alone, rtol=1e-6, atol=1e-6)


# ------------------------------------------------------------------------ gate_up

GATE_UP_SHAPES = [  # (M, N, K)
    (1, 1, 1),
    (1, 17, 33),
    (1, 172, 64),
    (1, 100, 1),
    (1, 1536, 576),  # SmolLM-135M
    (1, 4864, 896),  # Qwen2-0.5B
    (2, 65, 40),
    (8, 172, 64),
    (9, 172, 64),
    (50, 129, 31),
    (96, 128, 16),
    (97, 257, 100),
    (128, 1536, 576),
    (200, 300, 1),
    (300, 40, 4096),  # row blocks of the driver's pack
]


def gate_up_inputs(rng, M, N, K, scale=1.0):
    x = rand(rng, M, K, scale=scale)
    wg = rand(rng, N, K, scale=K**-0.5)
    wu = rand(rng, N, K, scale=K**-0.5)
    return x, wg, wu


def gate_up_expected(x, wg, wu):
    xd = x.astype(np.float64)
    g = (xd @ wg.astype(np.float64).T).astype(F32).astype(np.float64)
    u = (xd @ wu.astype(np.float64).T).astype(F32).astype(np.float64)
    return silu_mul(g, u)


@pytest.mark.parametrize("shape", GATE_UP_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_gate_up(lib, threads, shape):
    M, N, K = shape
    rng = np.random.default_rng(M * 7 + N + K)
    x, wg, wu = gate_up_inputs(rng, M, N, K)
    expected = gate_up_expected(x, wg, wu)
    calls = [("gemm_gate_up_f32", [M, N, K])]
    if M == 1:
        calls.append(("gemv_gate_up_f32", [N, K]))
    for name, dims in calls:
        for fn in (lib.call, lib.ref):
            out = nan(M, N)
            fn(name, x, wg, wu, out, *dims)
            close(out, expected)


@pytest.mark.parametrize("M", [1, 4, 30])
def test_gate_up_saturates_without_nan(lib, M):
    """|gate| up to ~300: e^-gate overflows / underflows; silu must give g or -0."""
    rng = np.random.default_rng(M)
    N, K = 100, 48
    x, wg, wu = gate_up_inputs(rng, M, N, K, scale=60.0)
    expected = gate_up_expected(x, wg, wu)
    assert np.abs(x.astype(np.float64) @ wg.T.astype(np.float64)).max() > 150
    name, dims = ("gemv_gate_up_f32", [N, K]) if M == 1 else ("gemm_gate_up_f32", [M, N, K])
    for fn in (lib.call, lib.ref):
        out = nan(M, N)
        fn(name, x, wg, wu, out, *dims)
        assert np.isfinite(out).all()
        close(out, expected, rtol=2e-5, atol=1e-3)


@pytest.mark.parametrize("M,N,K", [(1, 172, 64), (1, 1536, 576), (5, 100, 33), (64, 300, 96)])
def test_gate_up_matches_gemm_then_swiglu(lib, M, N, K):
    """Fused = the two linear calls + swiglu_f32 of the unfused program (to rounding)."""
    rng = np.random.default_rng(N)
    x, wg, wu = gate_up_inputs(rng, M, N, K)
    g, u, ref = nan(M, N), nan(M, N), nan(M, N)
    if M == 1:
        lib.call("gemv_f32", x, wg, g, N, K)
        lib.call("gemv_f32", x, wu, u, N, K)
    else:
        lib.call("gemm_f32", x, wg, g, M, N, K)
        lib.call("gemm_f32", x, wu, u, M, N, K)
    lib.call("swiglu_f32", g, u, ref, M * N)
    out = nan(M, N)
    if M == 1:
        lib.call("gemv_gate_up_f32", x, wg, wu, out, N, K)
    else:
        lib.call("gemm_gate_up_f32", x, wg, wu, out, M, N, K)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6)


# -------------------------------------------------------------------- add_rmsnorm

ADD_RMS_SHAPES = [(1, 1), (1, 7), (1, 64), (3, 33), (9, 100), (1, 576), (128, 576), (64, 900)]


def add_rms_expected(a, b, gamma, eps):
    s = a + b  # fp32, exact IEEE addition like the kernel
    sd = s.astype(np.float64)
    h = sd / np.sqrt((sd**2).mean(axis=1, keepdims=True) + eps) * gamma
    return s, h


@pytest.mark.parametrize("eps", [1e-5, 1e-6])
@pytest.mark.parametrize("shape", ADD_RMS_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_add_rmsnorm(lib, threads, shape, eps):
    T, E = shape
    rng = np.random.default_rng(T * 1000 + E)
    a, b = rand(rng, T, E, scale=2.0), rand(rng, T, E)
    gamma = (1.0 + 0.1 * rng.standard_normal(E)).astype(F32)
    s_exp, h_exp = add_rms_expected(a, b, gamma, eps)
    for fn in (lib.call, lib.ref):
        s, h = nan(T, E), nan(T, E)
        fn("add_rmsnorm_f32", a, b, gamma, s, h, T, E, eps)
        np.testing.assert_array_equal(s, s_exp)
        close(h, h_exp)


@pytest.mark.parametrize("shape", [(1, 64), (3, 33), (1, 576), (128, 576), (5, 7)])
def test_add_rmsnorm_is_add_then_rmsnorm_bit_for_bit(lib, threads, shape):
    T, E = shape
    rng = np.random.default_rng(E)
    a, b = rand(rng, T, E), rand(rng, T, E)
    gamma = rand(rng, E)
    s0, h0 = nan(T, E), nan(T, E)
    lib.call("add_f32", a, b, s0, T * E)
    lib.call("rmsnorm_f32", s0, gamma, h0, T, E, 1e-5)
    s, h = nan(T, E), nan(T, E)
    lib.call("add_rmsnorm_f32", a, b, gamma, s, h, T, E, 1e-5)
    np.testing.assert_array_equal(s, s0)
    np.testing.assert_array_equal(h, h0)


def test_add_rmsnorm_aliasing(lib):
    """s may alias a (in-place residual); h may alias b."""
    rng = np.random.default_rng(11)
    T, E = 4, 70
    a, b, gamma = rand(rng, T, E), rand(rng, T, E), rand(rng, E)
    s_exp, h_exp = add_rms_expected(a, b, gamma, 1e-5)
    for fn in (lib.call, lib.ref):
        s, h = a.copy(), b.copy()
        fn("add_rmsnorm_f32", s, h, gamma, s, h, T, E, 1e-5)
        np.testing.assert_array_equal(s, s_exp)
        close(h, h_exp)


# ------------------------------------------------------------------ thread count


def test_results_do_not_depend_on_the_thread_count(lib):
    rng = np.random.default_rng(3)
    x, ws, bs = qkv_inputs(rng, 1, 576, 192, 192, 576, True)
    xm, wg, wu = gate_up_inputs(rng, 100, 1536, 96)
    a, b, gamma = rand(rng, 128, 576), rand(rng, 128, 576), rand(rng, 576)
    results = []
    before = lib.get_num_threads()
    try:
        for n in (1, 2, 3):
            lib.set_num_threads(n)
            qkv = [nan(1, m) for m in (576, 192, 192)]
            lib.call("gemv_qkv_bias_f32", x, *ws, *bs, *qkv, 576, 192, 192, 576)
            gu1, gu = nan(1, 1536), nan(100, 1536)
            lib.call("gemv_gate_up_f32", xm[:1].copy(), wg, wu, gu1, 1536, 96)
            lib.call("gemm_gate_up_f32", xm, wg, wu, gu, 100, 1536, 96)
            s, h = nan(128, 576), nan(128, 576)
            lib.call("add_rmsnorm_f32", a, b, gamma, s, h, 128, 576, 1e-5)
            results.append([*qkv, gu1, gu, s, h])
    finally:
        lib.set_num_threads(before)
    for other in results[1:]:
        for r0, r in zip(results[0], other, strict=True):
            np.testing.assert_array_equal(r, r0)


# ------------------------------------------------- bf16 / q8_0 / q4_0 / q4_1 weights
#
# These kernels compose the unfused weight-dtype kernels; the oracle is those
# kernels (same build, same numerics: q8-quantized x in decode for the block
# formats), plus a loose check against NumPy on the dequantized weights.

WDTYPES = ("bf16", "q8_0", "q4_0", "q4_1", "q5_0", "q5_1")
W_QKV_SHAPES = [  # (M, Nq, Nk, Nv, K); K % 32 == 0 for the block formats
    (1, 1, 1, 1, 32),
    (1, 17, 5, 3, 64),
    (1, 576, 192, 192, 576),
    (3, 40, 8, 8, 96),
    (12, 64, 32, 32, 64),
    (40, 96, 40, 24, 128),
    (300, 40, 8, 8, 4096),  # row blocks of the driver's pack
]
W_GATE_UP_SHAPES = [
    (1, 1, 32),
    (1, 100, 64),
    (1, 1536, 576),
    (1, 300, 32),
    (4, 70, 96),
    (30, 257, 64),
    (150, 300, 128),
    (300, 40, 4096),  # row blocks of the driver's pack
]


def wstore(rng, n, k, dtype):
    from ckir import quant

    w = rng.standard_normal((n, k)) * k**-0.5
    stored = quant.quantize(w, dtype)
    if dtype == "bf16":
        return stored, quant.from_bf16(stored).astype(np.float64)
    return stored, quant.dequantize(stored, dtype).reshape(n, k).astype(np.float64)


def loose(out, x, wd, dtype, decode, bf16_dot=False):
    """Against NumPy on the dequantized weights: exact-ish for fp32 x (bf16-rounded x on
    the vdpbf16ps path, gemm_bf16_x), q8 error for block gemv."""
    x64 = x.astype(np.float64) if decode else gemm_bf16_x(x, bf16_dot and dtype == "bf16")
    ref = x64 @ wd.T
    mag = np.abs(x64) @ np.abs(wd).T
    tol = 2e-2 if decode and dtype != "bf16" else 2e-5
    assert np.all(np.abs(out - ref) <= tol * mag + 1e-6)


@pytest.mark.parametrize("bias", [False, True], ids=["nobias", "bias"])
@pytest.mark.parametrize("shape", W_QKV_SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("dtype", WDTYPES)
def test_qkv_wdtype(lib, threads, dtype, shape, bias):
    M, Nq, Nk, Nv, K = shape
    rng = np.random.default_rng(sum(shape) + bias)
    x = rand(rng, M, K)
    pairs = [wstore(rng, n, K, dtype) for n in (Nq, Nk, Nv)]
    ws = [p[0] for p in pairs]
    bs = [rand(rng, n, scale=0.5) for n in (Nq, Nk, Nv)] if bias else []
    sfx = f"{'_bias' if bias else ''}_{dtype}"
    kinds = ["gemm"] + (["gemv"] if M == 1 else [])
    for kind in kinds:
        dims = ([M] if kind == "gemm" else []) + [Nq, Nk, Nv, K]
        for fn in (lib.call, lib.ref):
            outs = [nan(M, n) for n in (Nq, Nk, Nv)]
            fn(f"{kind}_qkv{sfx}", x, *ws, *bs, *outs, *dims)
            for i, (o, n) in enumerate(zip(outs, (Nq, Nk, Nv), strict=True)):
                alone = nan(M, n)
                single = f"{kind}{'_bias' if bias else ''}_{dtype}"
                sdims = ([M] if kind == "gemm" else []) + [n, K]
                fn(single, x, ws[i], *([bs[i]] if bias else []), alone, *sdims)
                if kind == "gemv":  # each row as the unfused GEMV computes it (x quantized once)
                    np.testing.assert_array_equal(o, alone)
                np.testing.assert_allclose(o, alone, rtol=1e-6, atol=1e-7)
                ob = o - bs[i] if bias else o
                dot = lib.bf16_dot and fn == lib.call
                loose(ob.astype(np.float64), x, pairs[i][1], dtype, kind == "gemv", dot)


@pytest.mark.parametrize("shape", W_GATE_UP_SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("dtype", WDTYPES)
def test_gate_up_wdtype(lib, threads, dtype, shape):
    M, N, K = shape
    rng = np.random.default_rng(M * 7 + N + K)
    x = rand(rng, M, K)
    (wg, gd), (wu, ud) = wstore(rng, N, K, dtype), wstore(rng, N, K, dtype)
    kinds = ["gemm"] + (["gemv"] if M == 1 else [])
    for kind in kinds:
        dims = ([M] if kind == "gemm" else []) + [N, K]
        for fn in (lib.call, lib.ref):
            out = nan(M, N)
            fn(f"{kind}_gate_up_{dtype}", x, wg, wu, out, *dims)
            g, u, ref = nan(M, N), nan(M, N), nan(M, N)
            fn(f"{kind}_{dtype}", x, wg, g, *dims)
            fn(f"{kind}_{dtype}", x, wu, u, *dims)
            fn("swiglu_f32", g, u, ref, M * N)
            if kind == "gemv":  # gate and up as the unfused GEMVs (x quantized once), swiglu's body
                np.testing.assert_array_equal(out, ref)
            np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6)
            if dtype == "bf16" or kind == "gemm":
                dot = lib.bf16_dot and fn == lib.call and dtype == "bf16" and kind == "gemm"
                x64 = gemm_bf16_x(x, dot)
                close(out, silu_mul(x64 @ gd.T, x64 @ ud.T), rtol=1e-4, atol=1e-4)
