"""Kernels of geglu, mul_scalar and rmsnorm with a gamma offset (and their backward)
against NumPy float64 oracles, for each ISA build (scalar, AVX2, native AVX-512), over
sizes that cover one element, the vector tails and the threaded chunking."""

from __future__ import annotations

import numpy as np
import pytest
from kernel_lib import both, close, num_grad, rand

from ckir.reference.kernels import gelu_tanh, rmsnorm_fwd

F32 = np.float32
F64 = np.float64

SIZES = [1, 3, 7, 8, 15, 16, 17, 33, 100, 1000, 4 * 8192 + 5]
ROWS = [(1, 1), (1, 7), (3, 17), (5, 64), (9, 100), (70, 576), (130, 33), (130, 300)]


def num_diff(f, x: np.ndarray, h: float = 1e-6) -> np.ndarray:
    return (f(x + h) - f(x - h)) / (2 * h)


# ------------------------------------------------------------------ geglu


@pytest.mark.parametrize("n", SIZES)
def test_geglu(lib, threads, n):
    rng = np.random.default_rng(n)
    g, u = rand(rng, n, scale=3.0), rand(rng, n)
    g[:: max(1, n // 4)] = rng.choice([-60.0, -9.0, 9.0, 60.0], size=g[:: max(1, n // 4)].size)
    expected = gelu_tanh(g.astype(F64)) * u
    both(
        lib,
        "geglu_f32",
        [2],
        lambda: [g, u, np.full(n, np.nan, F32), n],
        lambda o: close(o, expected, rtol=1e-5, atol=1e-6),
    )


def test_geglu_in_place(lib):
    rng = np.random.default_rng(3)
    g, u = rand(rng, 45, scale=2.0), rand(rng, 45)
    expected = gelu_tanh(g.astype(F64)) * u
    buf = g.copy()
    lib.call("geglu_f32", buf, u, buf, 45)  # out = gate
    close(buf, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("n", SIZES)
def test_geglu_bwd(lib, threads, n):
    rng = np.random.default_rng(n + 7)
    gate, up, dy = rand(rng, n, scale=3.0), rand(rng, n), rand(rng, n)
    g, u, d = gate.astype(F64), up.astype(F64), dy.astype(F64)
    edup = d * gelu_tanh(g)
    edgate = d * u * num_diff(gelu_tanh, g)

    def args():
        return [gate, up, dy, np.full(n, np.nan, F32), np.full(n, np.nan, F32), n]

    def check(dgate, dup):
        close(dgate, edgate, rtol=1e-5, atol=1e-6)
        close(dup, edup, rtol=1e-5, atol=1e-6)

    both(lib, "geglu_bwd_f32", [3, 4], args, check)


def test_geglu_bwd_extremes_and_in_place(lib):
    gate = np.array([-100.0, -30.0, -5.0, 0.0, 5.0, 30.0, 88.0, 100.0, 1e-3], F32)
    up, dy = np.linspace(-2, 2, gate.size).astype(F32), np.ones(gate.size, F32)
    g = gate.astype(F64)
    bg, bu = gate.copy(), up.copy()
    lib.call("geglu_bwd_f32", bg, bu, dy, bg, bu, gate.size)  # dgate = gate, dup = up
    close(bg, up * num_diff(gelu_tanh, g), rtol=1e-5, atol=1e-6)
    close(bu, gelu_tanh(g), rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------------ mul_scalar


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("s", [8.0**0.5, -0.25, 0.0])
def test_mul_scalar(lib, threads, n, s):
    rng = np.random.default_rng(n)
    x = rand(rng, n, scale=5.0)
    expected = x.astype(F64) * F64(F32(s))
    both(
        lib,
        "mul_scalar_f32",
        [1],
        lambda: [x, np.full(n, np.nan, F32), n, s],
        lambda o: close(o, expected, rtol=1e-6, atol=0),
    )


def test_mul_scalar_in_place_is_the_f32_product(lib):
    x = np.linspace(-3, 3, 37).astype(F32)
    buf = x.copy()
    lib.call("mul_scalar_f32", buf, buf, 37, 3.0**0.5)
    np.testing.assert_array_equal(buf, x * F32(3.0**0.5))  # one f32 rounding, as torch


# ------------------------------------------------------------------ rmsnorm + offset


@pytest.mark.parametrize("T,E", ROWS)
@pytest.mark.parametrize("offset", [1.0, -0.5])
def test_rmsnorm_offset(lib, threads, T, E, offset):
    rng = np.random.default_rng(T * E)
    eps = 1e-6
    x, gamma = rand(rng, T, E, scale=2.0), rand(rng, E, scale=0.1)
    expected = rmsnorm_fwd(x.astype(F64), gamma.astype(F64), eps, offset)
    both(
        lib,
        "rmsnorm_offset_f32",
        [2],
        lambda: [x, gamma, np.full((T, E), np.nan, F32), T, E, eps, offset],
        lambda o: close(o, expected),
    )


def test_rmsnorm_offset_zero_is_rmsnorm(lib):
    rng = np.random.default_rng(5)
    T, E = 6, 37
    x, gamma = rand(rng, T, E), rand(rng, E, loc=1.0)
    a, b = np.zeros((T, E), F32), np.zeros((T, E), F32)
    lib.call("rmsnorm_offset_f32", x, gamma, a, T, E, 1e-5, 0.0)
    lib.call("rmsnorm_f32", x, gamma, b, T, E, 1e-5)
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("T,E", ROWS)
def test_rmsnorm_offset_bwd(lib, threads, T, E):
    rng = np.random.default_rng(T * E + 1)
    eps, offset = 1e-6, 1.0
    x, gamma, dy = rand(rng, T, E, scale=2.0), rand(rng, E, scale=0.1), rand(rng, T, E)
    dg0 = rand(rng, E)
    xd, gd, dd = x.astype(F64), gamma.astype(F64) + offset, dy.astype(F64)
    r = 1.0 / np.sqrt((xd**2).mean(axis=1, keepdims=True) + eps)
    edx = r * gd * dd - xd * r**3 / E * (gd * dd * xd).sum(axis=1, keepdims=True)
    edg = (dd * xd * r).sum(axis=0)

    def args():
        return [x, gamma, dy, np.full((T, E), np.nan, F32), dg0.copy(), T, E, eps, offset]

    def check(dx, dg):
        close(dx, edx, rtol=1e-4, atol=1e-5)
        close(dg, dg0 + edg, rtol=1e-4, atol=1e-4)

    both(lib, "rmsnorm_offset_bwd_f32", [3, 4], args, check)


def test_rmsnorm_offset_bwd_gradient_check(lib):
    rng = np.random.default_rng(2)
    T, E, eps, offset = 2, 11, 1e-6, 1.0
    x, gamma = rand(rng, T, E).astype(F64), rand(rng, E, scale=0.1).astype(F64)
    dy = rand(rng, T, E)
    dx, dg = np.zeros((T, E), F32), np.zeros(E, F32)
    args = (x.astype(F32), gamma.astype(F32), dy, dx, dg, T, E, eps, offset)
    lib.call("rmsnorm_offset_bwd_f32", *args)

    def loss(xx, gg):
        return (rmsnorm_fwd(xx, gg, eps, offset) * dy).sum()

    close(dx, num_grad(lambda xx: loss(xx, gamma), x), rtol=1e-4, atol=1e-5)
    close(dg, num_grad(lambda gg: loss(x, gg), gamma), rtol=1e-4, atol=1e-5)


def test_rmsnorm_bwd_unchanged_by_the_offset_refactor(lib):
    """rmsnorm_bwd_f32 is rmsnorm_offset_bwd_f32 with offset 0, bit for bit."""
    rng = np.random.default_rng(9)
    T, E = 67, 45
    x, gamma, dy = rand(rng, T, E), rand(rng, E, loc=1.0), rand(rng, T, E)
    outs = []
    for name, extra in (("rmsnorm_bwd_f32", ()), ("rmsnorm_offset_bwd_f32", (0.0,))):
        dx, dg = np.zeros((T, E), F32), np.ones(E, F32)
        lib.call(name, x, gamma, dy, dx, dg, T, E, 1e-5, *extra)
        outs.append((dx, dg))
    np.testing.assert_array_equal(outs[0][0], outs[1][0])
    np.testing.assert_array_equal(outs[0][1], outs[1][1])
