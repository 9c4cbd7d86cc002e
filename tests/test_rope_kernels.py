"""rope_f32 / rope_bwd_f32 with frequency scaling and partial rotation, per ISA build.

The kernels take the coefficients of ckir_rope.h's one inverse-frequency formula
(R rotated dims, factor, ramp_w, ramp_i, ramp_0, mscale); the NumPy oracle is
kernel_lib.rope_oracle.  Shapes: R = 2, R below the vector width and off it,
R = D and R < D with an odd D, rotated halves longer than the table chunk (64
pairs), T = 1 and T large enough to thread (the wider heads).  That the
coefficients reproduce transformers' inverse frequencies is tests/test_rope_scaling.py's
part.
"""

import subprocess
import sys
import textwrap

import numpy as np
import pytest
from kernel_lib import both, close, num_grad, rand, rope_oracle

from ckir.runtime_build import build_library

F32 = np.float32

# (H, KV, D, R): partial rotation with odd D and the pass-through tail, R at the
# vector widths' edges, halves past the 64-pair table chunk
SHAPES = [
    (1, 1, 2, 2),
    (1, 1, 3, 2),
    (2, 1, 9, 4),
    (3, 3, 17, 16),
    (4, 2, 33, 30),
    (2, 1, 64, 16),
    (2, 2, 64, 64),
    (1, 1, 161, 146),
    (3, 1, 300, 258),
]
# (factor, ramp, mscale): plain, linear, a ramp over b, a ramp over i, both and a scale
SCALINGS = [
    (1.0, (0.0, 0.0, 0.0), 1.0),
    (4.0, (0.0, 0.0, 0.0), 1.0),
    (8.0, (2000.0, 0.0, -0.3), 1.0),
    (3.5, (0.0, -0.25, 1.75), 1.1253),
    (2.0, (50.0, -0.1, 0.4), 0.8),
]


def _args(q, k, T, H, KV, D, P, theta, R, scaling):
    factor, ramp, mscale = scaling
    return [q, k, T, H, KV, D, P, theta, R, factor, *ramp, mscale]


def _oracle(x, n, D, P, T, theta, R, scaling, sign):
    factor, ramp, mscale = scaling
    pos = [P + t for t in range(T)]
    return rope_oracle(x, n, D, pos, theta, sign, R=R, factor=factor, ramp=ramp, mscale=mscale)


def _checker(q0, k0, eq, ek, T, P, H, KV, D, R):
    """The check of a rotation of q0, k0 against the oracle's eq, ek: float32 angles
    (as test_rope), and the dims past R passed through bit for bit."""
    atol = 2e-6 + 16 * float(np.spacing(F32(P + T)))

    def check(q, k):
        close(q, eq, rtol=1e-5, atol=atol)
        close(k, ek, rtol=1e-5, atol=atol)
        np.testing.assert_array_equal(q.reshape(T, H, D)[:, :, R:], q0.reshape(T, H, D)[:, :, R:])
        np.testing.assert_array_equal(k.reshape(T, KV, D)[:, :, R:], k0.reshape(T, KV, D)[:, :, R:])

    return check


@pytest.mark.parametrize("H,KV,D,R", SHAPES, ids=lambda v: str(v))
@pytest.mark.parametrize("T,P", [(1, 0), (40, 4070)])
@pytest.mark.parametrize("scaling", SCALINGS, ids=[f"s{i}" for i in range(len(SCALINGS))])
@pytest.mark.parametrize("kernel,sign", [("rope_f32", 1.0), ("rope_bwd_f32", -1.0)])
def test_rope_scaled_partial(lib, kernel, sign, scaling, T, P, H, KV, D, R):
    theta = 10000.0 if D < 100 else 5e5
    rng = np.random.default_rng(T + H + D + R + P)
    q0, k0 = rand(rng, T, H * D), rand(rng, T, KV * D)
    eq = _oracle(q0, H, D, P, T, theta, R, scaling, sign)
    ek = _oracle(k0, KV, D, P, T, theta, R, scaling, sign)

    def make():
        return _args(q0.copy(), k0.copy(), T, H, KV, D, P, theta, R, scaling)

    both(lib, kernel, [0, 1], make, _checker(q0, k0, eq, ek, T, P, H, KV, D, R))


def test_rope_bwd_is_the_transpose_when_scaled(lib):
    """With mscale and partial rotation, rope is still linear in q: the gradient of
    sum(rope(q) * dy) is rope_bwd(dy) (the scaled rotation by the opposite angle)."""
    rng = np.random.default_rng(3)
    T, H, KV, D, R, P, theta = 3, 2, 1, 7, 4, 5, 10000.0
    scaling = (3.0, (0.0, -0.5, 1.2), 1.3)
    q, dy = rand(rng, T, H * D).astype(np.float64), rand(rng, T, H * D)
    dk = rand(rng, T, KV * D)
    num = num_grad(lambda qq: (_oracle(qq, H, D, P, T, theta, R, scaling, 1.0) * dy).sum(), q)
    dq = dy.copy()
    lib.call("rope_bwd_f32", *_args(dq, dk, T, H, KV, D, P, theta, R, scaling))
    close(dq, num, rtol=1e-5, atol=1e-6)


def test_rope_tables_keyed_by_scaling(lib):
    """The per-thread table cache (ckir_rope.h) keys on every coefficient: calls that
    differ in one coefficient only, at one position, each get their own angles."""
    T, H, KV, D, P, theta = 1, 2, 1, 16, 9, 10000.0
    rng = np.random.default_rng(1)
    q0, k0 = rand(rng, T, H * D), rand(rng, T, KV * D)
    base = (2.0, (10.0, -0.2, 0.5), 1.0)
    variants = [
        (16, base),
        (8, base),
        (16, (3.0, base[1], 1.0)),
        (16, (2.0, (11.0, -0.2, 0.5), 1.0)),
        (16, (2.0, (10.0, -0.3, 0.5), 1.0)),
        (16, (2.0, (10.0, -0.2, 0.6), 1.0)),
        (16, (2.0, base[1], 1.5)),
        (16, base),
    ]
    for R, scaling in variants:
        q, k = q0.copy(), k0.copy()
        lib.call("rope_f32", *_args(q, k, T, H, KV, D, P, theta, R, scaling))
        close(q, _oracle(q0, H, D, P, T, theta, R, scaling, 1.0), rtol=1e-5, atol=1e-5)
        close(k, _oracle(k0, KV, D, P, T, theta, R, scaling, 1.0), rtol=1e-5, atol=1e-5)


def test_debug_build_refuses_bad_rotary_dims(tmp_path):
    """R odd, zero or wider than the head: a debug build's argument check stops the
    call (no write past the head)."""
    lib_path = build_library(tmp_path / "libdbg.so", isa="scalar", debug=True)
    for R in (0, 3, 18):
        code = textwrap.dedent(
            f"""
            import ctypes
            lib = ctypes.CDLL({str(lib_path)!r})
            buf = (ctypes.c_float * 64)()
            I, F = ctypes.c_int64, ctypes.c_float
            lib.ckir_rope_f32(buf, buf, I(1), I(1), I(1), I(16), I(0), F(1e4), I({R}),
                              F(1), F(0), F(0), F(0), F(1))
            """
        )
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        assert proc.returncode != 0, R
        assert "rope_f32: constraint violated" in proc.stderr, R


# (H, KV, D, R) for the per-pair divisor table (LongRoPE): R = 2, odd D with a
# pass-through tail, R/2 off the vector widths, halves past the table chunk
EXT_SHAPES = [(1, 1, 2, 2), (2, 1, 9, 6), (3, 1, 35, 34), (2, 2, 64, 64), (1, 1, 161, 146)]


@pytest.mark.parametrize("H,KV,D,R", EXT_SHAPES, ids=lambda v: str(v))
@pytest.mark.parametrize("T,P", [(1, 0), (1, 31), (40, 4070)])
@pytest.mark.parametrize("mscale", [1.0, 1.19])
@pytest.mark.parametrize("kernel,sign", [("rope_ext_f32", 1.0), ("rope_ext_bwd_f32", -1.0)])
def test_rope_ext_divisors(lib, kernel, sign, mscale, T, P, H, KV, D, R):
    theta = 10000.0
    rng = np.random.default_rng(T + H + D + R + P)
    ext = (1.0 + 40.0 * rng.random(R // 2)).astype(F32)  # LongRoPE factors are >= 1
    q0, k0 = rand(rng, T, H * D), rand(rng, T, KV * D)
    pos = [P + t for t in range(T)]
    kw = dict(R=R, mscale=mscale, ext=ext)
    eq = rope_oracle(q0, H, D, pos, theta, sign, **kw)
    ek = rope_oracle(k0, KV, D, pos, theta, sign, **kw)

    def make():
        return [q0.copy(), k0.copy(), T, H, KV, D, P, theta, R, mscale, ext]

    both(lib, kernel, [0, 1], make, _checker(q0, k0, eq, ek, T, P, H, KV, D, R))


def test_rope_ext_table_cache_keyed_by_contents(lib):
    """The per-thread table cache compares the divisors' contents: a second call at the
    same positions with other divisors in the same memory rotates by the new ones."""
    H, KV, D, R, T, P, theta = 2, 1, 8, 8, 3, 5, 10000.0
    rng = np.random.default_rng(7)
    q0, k0 = rand(rng, T, H * D), rand(rng, T, KV * D)
    ext = np.ones(R // 2, F32)
    pos = [P + t for t in range(T)]
    for fill in (1.0, 3.0, 1.0):
        ext[:] = fill
        q, k = q0.copy(), k0.copy()
        lib.call("rope_ext_f32", q, k, T, H, KV, D, P, theta, R, 1.0, ext)
        close(q, rope_oracle(q0, H, D, pos, theta, R=R, ext=ext), rtol=1e-5, atol=1e-5)
        close(k, rope_oracle(k0, KV, D, pos, theta, R=R, ext=ext), rtol=1e-5, atol=1e-5)
