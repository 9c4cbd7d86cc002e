"""gelu_erf_f32 and gelu_erf_bwd_f32 (the erf GELU) against math.erf in float64.

For each ISA build (``lib``): sizes around the vector widths (1, 7, 15, 16, 17,
33 … and a threaded size), zero, signed zeros, tiny and large |x| (where the
normal CDF underflows or rounds to 1), and aliasing of the output over an
input.  The public kernels must be within a few float32 ulps of the oracle
(3e-7 relative plus the underflow floor); the scalar twins (libm's erfc in
double) within one rounding.
"""

from __future__ import annotations

import numpy as np
import pytest
from kernel_lib import both, close, rand

from ckir.reference.kernels import gelu_erf, gelu_erf_grad

F32, F64 = np.float32, np.float64
SIZES = [1, 7, 15, 16, 17, 31, 33, 100, 4 * 8192 + 5]
#: the kernels' own accuracy: relative to the float64 value, above float32's normal range
RTOL, ATOL = 6e-7, 1e-37


def bwd_close(actual: np.ndarray, expected: np.ndarray, dy: np.ndarray) -> None:
    """dx within 1e-6 relative, or 5e-7 |dy| absolute: the derivative has a root near
    x = -0.7518, where Phi(x) + x phi(x) cancels (Phi's float32 error, ~1e-7, remains)."""
    err = np.abs(actual.astype(F64) - expected)
    bound = 1e-6 * np.abs(expected) + 5e-7 * np.abs(dy.astype(F64)) + 1e-37
    worst = int(np.argmax(err - bound))
    assert (err <= bound).all(), f"index {worst}: {actual[worst]} != {expected[worst]}"


def edge_values(rng: np.random.Generator, n: int) -> np.ndarray:
    """n float32 values: normal samples (scale 3), with edge values spread over the lanes."""
    x = rand(rng, n, scale=3.0)
    edges = np.array(
        [
            0.0,
            -0.0,
            1e-30,
            -1e-30,
            1e-7,
            -0.7518,
            0.5,
            -3.0,
            -9.0,
            9.0,
            -13.0,
            13.5,
            -20.0,
            30.0,
            -1e4,
            1e4,
        ],
        F32,
    )
    idx = np.arange(0, n, max(1, n // edges.size))[: edges.size]
    x[idx] = edges[: idx.size]
    return x


@pytest.mark.parametrize("n", SIZES)
def test_gelu_erf(lib, threads, n):
    rng = np.random.default_rng(n)
    x = edge_values(rng, n)
    expected = gelu_erf(x.astype(F64))
    runs = both(
        lib,
        "gelu_erf_f32",
        [1],
        lambda: [x, np.full(n, np.nan, F32), n],
        lambda o: close(o, expected, rtol=RTOL, atol=ATOL),
    )
    close(runs[1][0], expected, rtol=1.2e-7, atol=ATOL)  # the twin: one rounding


def test_gelu_erf_dense_relative_error(lib):
    """A dense sweep over [-13, 6]: the worst relative error stays near 1e-7 (a few ulps)."""
    x = np.linspace(-13.0, 6.0, 200_001).astype(F32)
    out = np.empty_like(x)
    lib.call("gelu_erf_f32", x, out, x.size)
    expected = gelu_erf(x.astype(F64))
    nz = expected != 0.0
    rel = np.abs(out[nz] / expected[nz] - 1.0)
    assert rel.max() < RTOL, f"max relative error {rel.max():.3g}"
    assert rel.mean() < 1.5e-7, f"mean relative error {rel.mean():.3g}"
    assert out[~nz].tolist() == [0.0] * int((~nz).sum())


def test_gelu_erf_special_values(lib):
    x = np.array([0.0, -0.0, np.inf, np.nan, -1e30, 1e30, -14.5, 14.5], F32)
    for fn in (lib.call, lib.ref):
        out = np.full(x.size, 7.0, F32)
        fn("gelu_erf_f32", x, out, x.size)
        assert out[0] == 0.0 and out[1] == 0.0
        assert out[2] == np.inf and np.isnan(out[3])
        assert abs(out[4]) < 1e-30 and out[5] == np.float32(1e30)
        assert abs(out[6]) < 1e-36 and out[7] == np.float32(14.5)


def test_gelu_erf_in_place(lib):
    rng = np.random.default_rng(5)
    x = edge_values(rng, 45)
    buf = x.copy()
    lib.call("gelu_erf_f32", buf, buf, buf.size)
    close(buf, gelu_erf(x.astype(F64)), rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("n", SIZES)
def test_gelu_erf_bwd(lib, threads, n):
    rng = np.random.default_rng(n + 11)
    x, dy = edge_values(rng, n), rand(rng, n)
    xd = x.astype(F64)
    expected = dy.astype(F64) * gelu_erf_grad(xd)
    # the analytic derivative is the forward's: central differences in float64
    smooth = np.abs(xd) < 50
    h = 1e-6
    close(
        expected[smooth],
        dy[smooth] * (gelu_erf(xd[smooth] + h) - gelu_erf(xd[smooth] - h)) / (2 * h),
        rtol=1e-6,
        atol=1e-8,
    )

    def args():
        return [x, dy, np.full(n, np.nan, F32), n]

    both(lib, "gelu_erf_bwd_f32", [2], args, lambda o: bwd_close(o, expected, dy))


def test_gelu_erf_bwd_in_place(lib):
    rng = np.random.default_rng(8)
    x, dy = edge_values(rng, 45), rand(rng, 45)
    expected = dy.astype(F64) * gelu_erf_grad(x.astype(F64))
    for alias in ("x", "dy"):
        buf = (x if alias == "x" else dy).copy()
        args = [buf, dy, buf] if alias == "x" else [x, buf, buf]
        lib.call("gelu_erf_bwd_f32", *args, 45)
        bwd_close(buf, expected, dy)
