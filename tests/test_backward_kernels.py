"""The backward (training) kernels and the AdamW step against NumPy, per ISA build.

Each kernel and its scalar twin ``ckir_ref_*`` run on fresh copies (``both``)
and are compared with a float64 NumPy oracle; the ``*_bwd`` kernels are also
checked against a central finite difference of the forward formula (a
gradient check), and AdamW against ``torch.optim.AdamW`` when torch is
importable.  Outputs that are overwritten start as NaN; outputs that are
accumulated into start as random values.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from kernel_lib import both, close, num_grad, rand

from ckir.reference.kernels import adamw_oracle, rmsnorm_bwd_oracle
from ckir.runtime_build import build_library

F32 = np.float32
F64 = np.float64


SIZES = [1, 3, 7, 8, 15, 16, 17, 33, 100, 1000, 4 * 8192 + 5]


# --------------------------------------------------------------------- AdamW


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("step", [1, 2, 10, 1000])
@pytest.mark.parametrize("gscale", [1.0, 0.37])
def test_adamw(lib, threads, n, step, gscale):
    rng = np.random.default_rng(n + step)
    w, g = rand(rng, n), rand(rng, n, scale=0.1)
    m = rand(rng, n, scale=0.01)
    v = np.abs(rand(rng, n, scale=1e-3))
    if step == 1:
        m[:], v[:] = 0, 0
    hp = dict(lr=1e-3, b1=0.9, b2=0.999, eps=1e-8, wd=0.1)
    ew, em, ev = adamw_oracle(w, g * F32(gscale), m, v, step=step, **hp)
    gs = np.array([gscale], F32)

    def args():
        return [g, gs, w.copy(), m.copy(), v.copy(), n, *hp.values(), step]

    def check(wo, mo, vo):
        close(wo, ew, rtol=1e-6, atol=1e-7)
        close(mo, em, rtol=1e-6, atol=1e-8)  # b1 m + (1 - b1) g may cancel
        close(vo, ev, rtol=1e-6, atol=1e-12)

    both(lib, "adamw_f32", [2, 3, 4], args, check)


@pytest.mark.parametrize("max_norm", [0.0, 1.0, 1e6])
def test_adamw_with_clipping_matches_torch(lib, max_norm):
    """grad_sumsq -> clip_coef -> adamw equals clip_grad_norm_ then AdamW.step (two tensors)."""
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(7)
    n = 1037
    w0 = rand(rng, n)
    lr, b1, b2, eps, wd = 3e-3, 0.85, 0.99, 1e-6, 0.05
    w1 = rand(rng, 5)
    p = torch.nn.Parameter(torch.from_numpy(w0.copy()))
    p1 = torch.nn.Parameter(torch.from_numpy(w1.copy()))
    opt = torch.optim.AdamW([p, p1], lr=lr, betas=(b1, b2), eps=eps, weight_decay=wd)
    ws = [w0.copy(), w1.copy()]
    ms = [np.zeros(n, F32), np.zeros(5, F32)]
    vs = [np.zeros(n, F32), np.zeros(5, F32)]
    sumsq, coef = np.zeros(1, F32), np.zeros(1, F32)
    for step in range(1, 6):
        gs = [rand(rng, n, scale=0.5), rand(rng, 5, scale=3.0)]
        p.grad, p1.grad = (torch.from_numpy(g.copy()) for g in gs)
        if max_norm > 0:
            torch.nn.utils.clip_grad_norm_([p, p1], max_norm)
        opt.step()
        lib.call("zero_f32", sumsq, 1)
        for g in gs:
            lib.call("grad_sumsq_f32", g, sumsq, g.size)
        lib.call("clip_coef_f32", sumsq, coef, max_norm)
        for w, g, m, v in zip(ws, gs, ms, vs, strict=True):
            lib.call("adamw_f32", g, coef, w, m, v, g.size, lr, b1, b2, eps, wd, step)
    state = opt.state[p]
    close(ws[0], p.detach().numpy().astype(F64), rtol=1e-5, atol=1e-6)
    close(ws[1], p1.detach().numpy().astype(F64), rtol=1e-5, atol=1e-6)
    close(ms[0], state["exp_avg"].numpy().astype(F64), rtol=1e-5, atol=1e-7)
    close(vs[0], state["exp_avg_sq"].numpy().astype(F64), rtol=1e-5, atol=1e-9)


@pytest.mark.parametrize("sumsq", [0.0, 0.25, 4.0, 1e8])
@pytest.mark.parametrize("max_norm", [-1.0, 0.0, 0.5, 1.0])
def test_clip_coef(lib, sumsq, max_norm):
    norm = np.sqrt(sumsq)
    expected = 1.0 if max_norm <= 0 else min(1.0, max_norm / (norm + 1e-6))
    both(
        lib,
        "clip_coef_f32",
        [1],
        lambda: [np.array([sumsq], F32), np.full(1, np.nan, F32), max_norm],
        lambda c: close(c, np.array([expected]), rtol=1e-6, atol=0),
    )


@pytest.mark.parametrize("n", SIZES)
def test_zero(lib, threads, n):
    both(lib, "zero_f32", [0], lambda: [np.full(n, np.nan, F32), n], lambda x: close(x, 0 * x))


# ------------------------------------------------------- grad_sumsq, scale


@pytest.mark.parametrize("n", SIZES)
def test_grad_sumsq_adds_into_out(lib, threads, n):
    rng = np.random.default_rng(n)
    g = rand(rng, n)
    start = np.array([2.5], F32)
    expected = 2.5 + (g.astype(F64) ** 2).sum()
    both(
        lib,
        "grad_sumsq_f32",
        [1],
        lambda: [g, start.copy(), n],
        lambda o: close(o, np.array([expected]), rtol=1e-5, atol=0),
    )


def test_grad_sumsq_global_norm_over_tensors(lib):
    rng = np.random.default_rng(3)
    grads = [rand(rng, k) for k in (5, 64, 1001)]
    out = np.zeros(1, F32)
    for g in grads:
        lib.call("grad_sumsq_f32", g, out, g.size)
    expected = sum((g.astype(F64) ** 2).sum() for g in grads)
    close(out, np.array([expected]), rtol=1e-6, atol=0)


@pytest.mark.parametrize("n", SIZES)
def test_scale(lib, threads, n):
    rng = np.random.default_rng(n)
    x = rand(rng, n)
    s = 0.37
    both(
        lib,
        "scale_f32",
        [0],
        lambda: [x.copy(), n, s],
        lambda o: np.testing.assert_array_equal(o, x * F32(s)),
    )


# ------------------------------------------------------------ cross-entropy


def log_softmax(x):
    x = x.astype(F64)
    z = x - x.max(axis=1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=1, keepdims=True))


def ce_loss(x, targets):
    return -log_softmax(x)[np.arange(len(targets)), targets].mean()


@pytest.mark.parametrize("T,V", [(1, 1), (1, 7), (3, 17), (5, 100), (8, 1000), (40, 1031)])
def test_cross_entropy_fwd_bwd(lib, threads, T, V):
    rng = np.random.default_rng(T * V)
    logits = rand(rng, T, V, scale=3.0)
    targets = rng.integers(0, V, size=T).astype(np.int32)
    targets[0] = V - 1
    p = np.exp(log_softmax(logits))
    onehot = np.zeros((T, V))
    onehot[np.arange(T), targets] = 1.0
    expected_d = (p - onehot) / T
    expected_loss = ce_loss(logits, targets)

    def args():
        return [logits, targets, np.full(1, np.nan, F32), np.full((T, V), np.nan, F32), T, V]

    def check(loss, d):
        close(loss, np.array([expected_loss]), rtol=1e-5, atol=1e-6)
        close(d, expected_d, rtol=1e-4, atol=1e-7)

    both(lib, "cross_entropy_fwd_bwd_f32", [2, 3], args, check)
    # the loss agrees with the forward kernel
    fwd = np.full(1, np.nan, F32)
    lib.call("cross_entropy_f32", logits, targets, fwd, T, V)
    close(fwd, np.array([expected_loss]), rtol=1e-5, atol=1e-6)


def test_cross_entropy_fwd_bwd_in_place(lib):
    rng = np.random.default_rng(5)
    T, V = 4, 37
    logits = rand(rng, T, V)
    targets = np.array([0, 36, 5, 5], np.int32)
    loss, buf = np.zeros(1, F32), logits.copy()
    lib.call("cross_entropy_fwd_bwd_f32", buf, targets, loss, buf, T, V)
    expected = np.exp(log_softmax(logits))
    expected[np.arange(T), targets] -= 1.0
    close(buf, expected / T, rtol=1e-4, atol=1e-7)
    close(loss, np.array([ce_loss(logits, targets)]), rtol=1e-5, atol=1e-6)


def test_cross_entropy_gradient_check(lib):
    rng = np.random.default_rng(11)
    T, V = 3, 9
    logits = rand(rng, T, V).astype(F64)
    targets = np.array([1, 8, 1], np.int32)
    d = np.zeros((T, V), F32)
    lib.call("cross_entropy_fwd_bwd_f32", logits.astype(F32), targets, np.zeros(1, F32), d, T, V)
    num = num_grad(lambda lg: ce_loss(lg, targets), logits)
    close(d, num, rtol=1e-4, atol=1e-6)


# ----------------------------------------------------------- rmsnorm backward


def rmsnorm_fwd(x, gamma, eps):
    return x / np.sqrt((x**2).mean(axis=-1, keepdims=True) + eps) * gamma


@pytest.mark.parametrize(
    "T,E", [(1, 1), (1, 7), (3, 17), (5, 64), (9, 100), (70, 576), (130, 33), (130, 300)]
)
def test_rmsnorm_bwd(lib, threads, T, E):
    rng = np.random.default_rng(T * E)
    eps = 1e-5
    x, gamma, dy = rand(rng, T, E, scale=2.0), rand(rng, E, loc=1.0), rand(rng, T, E)
    dg0 = rand(rng, E)
    edx, edg = rmsnorm_bwd_oracle(x, gamma, dy, eps)

    def args():
        return [x, gamma, dy, np.full((T, E), np.nan, F32), dg0.copy(), T, E, eps]

    def check(dx, dg):
        close(dx, edx, rtol=1e-4, atol=1e-5)
        close(dg, dg0 + edg, rtol=1e-4, atol=1e-4)

    both(lib, "rmsnorm_bwd_f32", [3, 4], args, check)


def test_rmsnorm_bwd_independent_of_threads(lib):
    rng = np.random.default_rng(4)
    T, E = 150, 300  # three row blocks, threaded
    x, gamma, dy = rand(rng, T, E), rand(rng, E, loc=1.0), rand(rng, T, E)
    before = lib.get_num_threads()
    outs = []
    try:
        for nthr in (1, 2):
            lib.set_num_threads(nthr)
            dx, dg = np.zeros((T, E), F32), np.ones(E, F32)
            lib.call("rmsnorm_bwd_f32", x, gamma, dy, dx, dg, T, E, 1e-5)
            outs.append((dx, dg))
    finally:
        lib.set_num_threads(before)
    np.testing.assert_array_equal(outs[0][0], outs[1][0])
    np.testing.assert_array_equal(outs[0][1], outs[1][1])


def test_rmsnorm_bwd_gradient_check(lib):
    rng = np.random.default_rng(2)
    T, E, eps = 2, 11, 1e-6
    x, gamma, dy = rand(rng, T, E).astype(F64), rand(rng, E, loc=1.0).astype(F64), rand(rng, T, E)
    dx, dg = np.zeros((T, E), F32), np.zeros(E, F32)
    lib.call("rmsnorm_bwd_f32", x.astype(F32), gamma.astype(F32), dy, dx, dg, T, E, eps)

    def loss(xx, gg):
        return (rmsnorm_fwd(xx, gg, eps) * dy).sum()

    ndx = num_grad(lambda xx: loss(xx, gamma), x)
    ndg = num_grad(lambda gg: loss(x, gg), gamma)
    close(dx, ndx, rtol=1e-4, atol=1e-5)
    close(dg, ndg, rtol=1e-4, atol=1e-5)


# ------------------------------------------------ swiglu / gelu backward


def silu(g):
    return g / (1.0 + np.exp(-g))


def gelu_tanh(x):
    return 0.5 * x * (1.0 + np.tanh(np.sqrt(2.0 / np.pi) * (x + 0.044715 * x**3)))


def num_diff(f, x, h=1e-6):
    return (f(x + h) - f(x - h)) / (2 * h)


@pytest.mark.parametrize("n", SIZES)
def test_swiglu_bwd(lib, threads, n):
    rng = np.random.default_rng(n)
    gate, up, dy = rand(rng, n, scale=3.0), rand(rng, n), rand(rng, n)
    g, u, d = gate.astype(F64), up.astype(F64), dy.astype(F64)
    s = 1.0 / (1.0 + np.exp(-g))
    edup = d * g * s
    edgate = d * u * s * (1.0 + g * (1.0 - s))
    # the analytic derivative is the forward's: central differences in float64
    close(edgate, d * u * num_diff(silu, g), rtol=1e-6, atol=1e-8)

    def args():
        return [gate, up, dy, np.full(n, np.nan, F32), np.full(n, np.nan, F32), n]

    def check(dgate, dup):
        close(dgate, edgate, rtol=1e-5, atol=1e-6)
        close(dup, edup, rtol=1e-5, atol=1e-6)

    both(lib, "swiglu_bwd_f32", [3, 4], args, check)


def test_swiglu_bwd_extremes_and_in_place(lib):
    gate = np.array([-100.0, -30.0, -5.0, 0.0, 5.0, 30.0, 88.0, 100.0, 1e-3], F32)
    up, dy = np.linspace(-2, 2, gate.size).astype(F32), np.ones(gate.size, F32)
    g = gate.astype(F64)
    s = 1.0 / (1.0 + np.exp(-g))
    edgate = up * s * (1.0 + g * (1.0 - s))
    bg, bu = gate.copy(), up.copy()
    lib.call("swiglu_bwd_f32", bg, bu, dy, bg, bu, gate.size)  # dgate = gate, dup = up
    close(bg, edgate, rtol=1e-5, atol=1e-6)
    close(bu, g * s, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("n", SIZES)
def test_gelu_tanh_bwd(lib, threads, n):
    rng = np.random.default_rng(n)
    x, dy = rand(rng, n, scale=3.0), rand(rng, n)
    expected = dy.astype(F64) * num_diff(gelu_tanh, x.astype(F64))

    def args():
        return [x, dy, np.full(n, np.nan, F32), n]

    both(lib, "gelu_tanh_bwd_f32", [2], args, lambda o: close(o, expected, rtol=1e-5, atol=1e-6))


def test_gelu_tanh_bwd_in_place(lib):
    rng = np.random.default_rng(8)
    x, dy = rand(rng, 45), rand(rng, 45)
    expected = dy.astype(F64) * num_diff(gelu_tanh, x.astype(F64))
    for buf, other in ((x.copy(), "x"), (dy.copy(), "dy")):
        args = [buf, dy, buf] if other == "x" else [x, buf, buf]
        lib.call("gelu_tanh_bwd_f32", *args, 45)
        close(buf, expected, rtol=1e-5, atol=1e-6)


def test_gelu_tanh_bwd_extremes(lib):
    x = np.array([-100.0, -20.0, -5.0, -1.0, 0.0, 1e-4, 1.0, 5.0, 20.0, 100.0], F32)
    dy = np.ones(x.size, F32)
    expected = num_diff(gelu_tanh, x.astype(F64))
    for fn in (lib.call, lib.ref):
        out = np.full(x.size, np.nan, F32)
        fn("gelu_tanh_bwd_f32", x, dy, out, x.size)
        assert np.isfinite(out).all()
        close(out, expected, rtol=1e-5, atol=1e-6)


# ------------------------------------------------------- embedding backward


@pytest.mark.parametrize("T,E", [(1, 1), (1, 17), (7, 64), (5, 33), (300, 100), (64, 768)])
def test_embed_bwd(lib, threads, T, E):
    rng = np.random.default_rng(T * 100 + E)
    V = 50
    tokens = rng.integers(0, V, size=T).astype(np.int32)
    tokens[0] = V - 1
    if T > 2:
        tokens[1] = tokens[2] = 3  # repeated tokens accumulate
    dy = rand(rng, T, E)
    dt0 = rand(rng, V, E)
    expected = dt0.astype(F64)
    np.add.at(expected, tokens, dy.astype(F64))

    def args():
        return [tokens, dy, dt0.copy(), T, E]

    both(lib, "embed_bwd_f32", [2], args, lambda o: close(o, expected, rtol=1e-5, atol=1e-5))


def test_embed_bwd_one_token_repeated_is_deterministic(lib, threads):
    rng = np.random.default_rng(9)
    T, E, V = 500, 130, 4
    tokens = np.zeros(T, np.int32)
    dy = rand(rng, T, E)
    out = np.zeros((V, E), F32)
    lib.call("embed_bwd_f32", tokens, dy, out, T, E)
    close(out[0], dy.astype(F64).sum(axis=0), rtol=1e-4, atol=1e-4)
    assert not out[1:].any()
    ref = np.zeros((V, E), F32)
    lib.ref("embed_bwd_f32", tokens, dy, ref, T, E)
    np.testing.assert_array_equal(out, ref)  # rows are added in token order, as the twin does


# ------------------------------------------------------------- debug checks


def test_debug_build_rejects_targets_outside_the_vocabulary(tmp_path):
    lib_path = build_library(tmp_path / "libdbg.so", isa="scalar", debug=True)
    for bad in (-1, 5):
        code = textwrap.dedent(
            f"""
            import ctypes
            lib = ctypes.CDLL({str(lib_path)!r})
            buf = (ctypes.c_float * 64)()
            tgt = (ctypes.c_int32 * 2)(0, {bad})
            I = ctypes.c_int64
            lib.ckir_cross_entropy_fwd_bwd_f32(buf, tgt, buf, buf, I(2), I(5))
            """
        )
        proc = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            env={**os.environ, "OMP_NUM_THREADS": "1"},
        )
        assert proc.returncode != 0, bad
        assert "cross_entropy_fwd_bwd_f32: constraint violated" in proc.stderr
