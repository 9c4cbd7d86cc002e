"""Backward of layernorm, rope, causal attention and the position table, per ISA build.

Each kernel and its scalar twin ``ckir_ref_*`` run on fresh copies (``both``)
and are compared with a float64 NumPy oracle over edge shapes, with 1 and 2
threads; a central finite difference of the forward formula checks each
oracle-free on a tiny shape, and, when torch is importable, torch's autograd
of the forward ops (``scaled_dot_product_attention`` with ``is_causal`` and
``repeat_interleave`` for GQA, ``F.layer_norm``, HF's rotate_half) checks the
kernels once more.  Outputs that are overwritten start as NaN; outputs that
are accumulated into start as random values.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from kernel_lib import both, close, num_grad, rand, rope_oracle, rope_plain

from ckir.reference.kernels import attention_bwd_oracle, layernorm_bwd_oracle

F32 = np.float32
F64 = np.float64

TS = [1, 2, 5, 17, 64]
ES = [1, 3, 8, 17, 100]
HEADS = [(1, 1, 2), (4, 4, 8), (4, 2, 16), (6, 1, 64), (9, 3, 64), (2, 1, 256)]
ATTN_HEADS = [*HEADS, (2, 2, 1), (3, 1, 17)]  # and head sizes off the vector width


def head_ids(heads):
    return [f"H{h}KV{kv}D{d}" for h, kv, d in heads]


def run_threads(lib, nthreads, fn):
    before = lib.get_num_threads()
    lib.set_num_threads(nthreads)
    try:
        return fn()
    finally:
        lib.set_num_threads(before)


# ------------------------------------------------------------ layernorm


def layernorm_fwd(x, gamma, beta, eps):
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    return (x - mu) / np.sqrt(var + eps) * gamma + beta


@pytest.mark.parametrize("T,E", [(t, e) for t in TS for e in ES] + [(130, 300), (70, 576)])
def test_layernorm_bwd(lib, threads, T, E):
    rng = np.random.default_rng(T * 1000 + E)
    eps = 1e-5
    x = rand(rng, T, E, scale=2.0, loc=3.0)  # offset mean: the centring matters
    gamma, dy = rand(rng, E, loc=1.0), rand(rng, T, E)
    dg0, db0 = rand(rng, E), rand(rng, E)
    edx, edg, edb = layernorm_bwd_oracle(x, gamma, dy, eps)

    def args():
        dx = np.full((T, E), np.nan, F32)
        return [x, gamma, dy, dx, dg0.copy(), db0.copy(), T, E, eps]

    def check(dx, dg, db):
        # E = 1: xh = 0 and dx = 0 exactly, up to eps-sized noise in r (x - mean)
        close(dx, edx, rtol=1e-4, atol=2e-5)
        close(dg, dg0 + edg, rtol=1e-4, atol=1e-4)
        close(db, db0 + edb, rtol=1e-5, atol=1e-4)

    both(lib, "layernorm_bwd_f32", [3, 4, 5], args, check)


def test_layernorm_bwd_independent_of_threads(lib):
    rng = np.random.default_rng(4)
    T, E = 150, 300  # three row blocks, threaded
    x, gamma, dy = rand(rng, T, E), rand(rng, E, loc=1.0), rand(rng, T, E)

    def run():
        dx, dg, db = np.zeros((T, E), F32), np.ones(E, F32), np.ones(E, F32)
        lib.call("layernorm_bwd_f32", x, gamma, dy, dx, dg, db, T, E, 1e-5)
        return dx, dg, db

    for a, b in zip(run_threads(lib, 1, run), run_threads(lib, 2, run), strict=True):
        np.testing.assert_array_equal(a, b)


def test_layernorm_bwd_gradient_check(lib):
    rng = np.random.default_rng(2)
    T, E, eps = 2, 7, 1e-6
    x, gamma, beta = (rand(rng, *s).astype(F64) for s in ((T, E), (E,), (E,)))
    dy = rand(rng, T, E)
    dx, dg, db = np.zeros((T, E), F32), np.zeros(E, F32), np.zeros(E, F32)
    lib.call("layernorm_bwd_f32", x.astype(F32), gamma.astype(F32), dy, dx, dg, db, T, E, eps)

    def loss(xx, gg, bb):
        return (layernorm_fwd(xx, gg, bb, eps) * dy).sum()

    close(dx, num_grad(lambda xx: loss(xx, gamma, beta), x), rtol=1e-4, atol=1e-5)
    close(dg, num_grad(lambda gg: loss(x, gg, beta), gamma), rtol=1e-4, atol=1e-5)
    close(db, num_grad(lambda bb: loss(x, gamma, bb), beta), rtol=1e-4, atol=1e-5)


def test_layernorm_bwd_matches_torch(lib):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(6)
    T, E, eps = 9, 40, 1e-5
    x, gamma, beta, dy = (
        rand(rng, T, E, loc=1.0),
        rand(rng, E, loc=1.0),
        rand(rng, E),
        rand(rng, T, E),
    )
    xt, gt, bt = (
        torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in (x, gamma, beta)
    )
    torch.nn.functional.layer_norm(xt, (E,), gt, bt, eps).backward(torch.from_numpy(dy).double())
    dx, dg, db = np.zeros((T, E), F32), np.zeros(E, F32), np.zeros(E, F32)
    lib.call("layernorm_bwd_f32", x, gamma, dy, dx, dg, db, T, E, eps)
    close(dx, xt.grad.numpy(), rtol=1e-4, atol=1e-5)
    close(dg, gt.grad.numpy(), rtol=1e-4, atol=1e-5)
    close(db, bt.grad.numpy(), rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------------ rope

ROPE_HEADS = [hd for hd in HEADS if hd[2] % 2 == 0]


@pytest.mark.parametrize("H,KV,D", ROPE_HEADS, ids=head_ids(ROPE_HEADS))
@pytest.mark.parametrize("T", TS)
@pytest.mark.parametrize("P,theta", [(0, 10000.0), (37, 1e6)])
def test_rope_bwd(lib, threads, T, H, KV, D, P, theta):
    rng = np.random.default_rng(T + H + D + P)
    dq0, dk0 = rand(rng, T, H * D), rand(rng, T, KV * D)
    pos = [P + t for t in range(T)]
    eq, ek = rope_oracle(dq0, H, D, pos, theta, -1.0), rope_oracle(dk0, KV, D, pos, theta, -1.0)
    atol = 2e-6 + 16 * float(np.spacing(F32(P + T)))  # float32 angles, as test_rope

    def check(dq, dk):
        close(dq, eq, rtol=1e-5, atol=atol)
        close(dk, ek, rtol=1e-5, atol=atol)

    both(
        lib,
        "rope_bwd_f32",
        [0, 1],
        lambda: [dq0.copy(), dk0.copy(), T, H, KV, D, P, theta, *rope_plain(D)],
        check,
    )


def test_rope_bwd_inverts_rope(lib):
    """The rotation by the opposite angle, from the same float32 angles: rope then rope_bwd
    gives back the input (up to rounding), for either order."""
    rng = np.random.default_rng(8)
    T, H, KV, D, P, theta = 7, 4, 2, 64, 4000, 10000.0
    q0, k0 = rand(rng, T, H * D), rand(rng, T, KV * D)
    for first, second in (("rope_f32", "rope_bwd_f32"), ("rope_bwd_f32", "rope_f32")):
        for fn in (lib.call, lib.ref):
            q, k = q0.copy(), k0.copy()
            fn(first, q, k, T, H, KV, D, P, theta, *rope_plain(D))
            fn(second, q, k, T, H, KV, D, P, theta, *rope_plain(D))
            close(q, q0, rtol=0, atol=2e-6)
            close(k, k0, rtol=0, atol=2e-6)


def test_rope_bwd_gradient_check(lib):
    """rope is linear in q: the gradient of sum(rope(q) * dy) with respect to q is rope_bwd(dy)."""
    rng = np.random.default_rng(3)
    T, H, KV, D, P, theta = 3, 2, 1, 6, 5, 10000.0
    q, dy = rand(rng, T, H * D).astype(F64), rand(rng, T, H * D)
    dk = rand(rng, T, KV * D)
    pos = list(range(P, P + T))
    num = num_grad(lambda qq: (rope_oracle(qq, H, D, pos, theta) * dy).sum(), q)
    dq = dy.copy()
    lib.call("rope_bwd_f32", dq, dk, T, H, KV, D, P, theta, *rope_plain(D))
    close(dq, num, rtol=1e-5, atol=1e-6)


def test_rope_bwd_matches_torch(lib):
    torch = pytest.importorskip("torch")

    def rotate_half(x):
        x1, x2 = x.chunk(2, dim=-1)
        return torch.cat((-x2, x1), dim=-1)

    T, H, KV, D, P, theta = 6, 4, 2, 32, 11, 10000.0
    rng = np.random.default_rng(5)
    inv = 1.0 / (theta ** (torch.arange(0, D, 2, dtype=torch.int64).float() / D))
    freqs = torch.arange(P, P + T).float()[:, None] * inv[None, :]  # float32 angles, as HF
    emb = torch.cat((freqs, freqs), dim=-1).double()
    cos, sin = emb.cos()[:, None, :], emb.sin()[:, None, :]
    grads = []
    for n in (H, KV):
        x = torch.tensor(rand(rng, T, n, D), dtype=torch.float64, requires_grad=True)
        dy = rand(rng, T, n * D)
        (x * cos + rotate_half(x) * sin).backward(torch.from_numpy(dy).double().view(T, n, D))
        grads.append((dy, x.grad.reshape(T, n * D).numpy()))
    (dq, eq), (dk, ek) = grads
    lib.call("rope_bwd_f32", dq, dk, T, H, KV, D, P, theta, *rope_plain(D))
    close(dq, eq, rtol=1e-5, atol=1e-5)
    close(dk, ek, rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------ pos_embed


@pytest.mark.parametrize("T,E", [(1, 1), (2, 3), (5, 17), (17, 100), (64, 8), (300, 130)])
@pytest.mark.parametrize("P", [0, 5])
def test_pos_embed_bwd(lib, threads, T, E, P):
    rng = np.random.default_rng(T * E + P)
    dy = rand(rng, T, E)
    w0 = rand(rng, P + T + 2, E)  # rows outside [P, P+T) stay as they are
    expected = w0.astype(F64)
    expected[P : P + T] += dy

    both(
        lib,
        "pos_embed_bwd_f32",
        [1],
        lambda: [dy, w0.copy(), T, E, P],
        lambda w: close(w, expected, rtol=1e-6, atol=1e-6),
    )


# ------------------------------------------------------------ attention


def attention_fwd(q, k, v, H, KV, D):
    """Causal GQA attention at P = 0 in float64: out [T, H*D]."""
    T, g = q.shape[0], H // KV
    q, k, v = q.reshape(T, H, D), k.reshape(T, KV, D), v.reshape(T, KV, D)
    mask = np.tril(np.ones((T, T), bool))
    out = np.zeros((T, H, D))
    for h in range(H):
        s = np.where(mask, q[:, h] @ k[:, h // g].T / math.sqrt(D), -np.inf)
        p = np.exp(s - s.max(axis=1, keepdims=True))
        out[:, h] = (p / p.sum(axis=1, keepdims=True)) @ v[:, h // g]
    return out.reshape(T, H * D)


def attention_inputs(rng, T, H, KV, D, qscale=1.0):
    q = rand(rng, T, H * D, scale=qscale)
    k, v = rand(rng, T, KV * D), rand(rng, T, KV * D)
    out = attention_fwd(q.astype(F64), k.astype(F64), v.astype(F64), H, KV, D).astype(F32)
    return q, k, v, out, rand(rng, T, H * D)


def attention_args(inputs, T, H, KV, D):
    q, k, v, out, dout = inputs
    nan = [np.full(a.shape, np.nan, F32) for a in (q, k, v)]
    return [q, k, v, out, dout, *nan, T, H, KV, D]


@pytest.mark.parametrize("H,KV,D", ATTN_HEADS, ids=head_ids(ATTN_HEADS))
@pytest.mark.parametrize("T", TS)
def test_attention_bwd(lib, threads, T, H, KV, D):
    rng = np.random.default_rng(T * 100 + H * 10 + D)
    inputs = attention_inputs(rng, T, H, KV, D, qscale=2.0)
    expected = attention_bwd_oracle(*inputs, H, KV, D)

    def check(*grads):
        for got, exp in zip(grads, expected, strict=True):
            close(got, exp, rtol=1e-4, atol=2e-5)

    (pub), (ref) = both(
        lib, "attention_bwd_f32", [5, 6, 7], lambda: attention_args(inputs, T, H, KV, D), check
    )
    for a, b in zip(pub, ref, strict=True):
        close(a, b.astype(F64), rtol=1e-4, atol=2e-5)


@pytest.mark.parametrize("T,H,KV,D", [(128, 9, 3, 64), (70, 8, 1, 32), (33, 4, 4, 40)])
def test_attention_bwd_deterministic(lib, T, H, KV, D):
    """The same bits run to run and at 1 or 2 threads (the SmolLM-135M shape, MQA)."""
    rng = np.random.default_rng(T)
    inputs = attention_inputs(rng, T, H, KV, D)

    def run():
        args = attention_args(inputs, T, H, KV, D)
        lib.call("attention_bwd_f32", *args)
        return args[5:8]

    runs = [run_threads(lib, n, run) for n in (2, 2, 1)]
    for other in runs[1:]:
        for a, b in zip(runs[0], other, strict=True):
            np.testing.assert_array_equal(a, b)
    for got, exp in zip(runs[0], attention_bwd_oracle(*inputs, H, KV, D), strict=True):
        close(got, exp, rtol=1e-4, atol=2e-5)


def test_attention_bwd_peaked_scores(lib):
    """Large scores: probabilities near 0 and 1 (exp of very negative arguments)."""
    T, H, KV, D = 20, 2, 1, 16
    rng = np.random.default_rng(3)
    inputs = attention_inputs(rng, T, H, KV, D, qscale=30.0)
    expected = attention_bwd_oracle(*inputs, H, KV, D)
    for fn in (lib.call, lib.ref):
        args = attention_args(inputs, T, H, KV, D)
        fn("attention_bwd_f32", *args)
        for got, exp in zip(args[5:8], expected, strict=True):
            close(got, exp, rtol=1e-3, atol=1e-4)


def test_attention_bwd_gradient_check(lib):
    rng = np.random.default_rng(12)
    T, H, KV, D = 4, 4, 2, 3
    q, k, v = (rand(rng, T, n * D).astype(F64) for n in (H, KV, KV))
    dout = rand(rng, T, H * D)
    out = attention_fwd(q, k, v, H, KV, D).astype(F32)
    args = attention_args((q.astype(F32), k.astype(F32), v.astype(F32), out, dout), T, H, KV, D)
    lib.call("attention_bwd_f32", *args)

    def loss(qq, kk, vv):
        return (attention_fwd(qq, kk, vv, H, KV, D) * dout).sum()

    nums = (
        num_grad(lambda x: loss(x, k, v), q),
        num_grad(lambda x: loss(q, x, v), k),
        num_grad(lambda x: loss(q, k, x), v),
    )
    for got, num in zip(args[5:8], nums, strict=True):
        close(got, num, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("T,H,KV,D", [(5, 4, 2, 16), (17, 9, 3, 64), (3, 3, 1, 8)])
def test_attention_bwd_matches_torch(lib, T, H, KV, D):
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    rng = np.random.default_rng(T + D)
    q, k, v = (rand(rng, T, n * D) for n in (H, KV, KV))
    dout = rand(rng, T, H * D)
    qt, kt, vt = (
        torch.tensor(a, dtype=torch.float64).view(T, n, D).transpose(0, 1).requires_grad_()
        for a, n in ((q, H), (k, KV), (v, KV))
    )
    rep = H // KV
    o = F.scaled_dot_product_attention(
        qt, kt.repeat_interleave(rep, dim=0), vt.repeat_interleave(rep, dim=0), is_causal=True
    )
    o.backward(torch.from_numpy(dout).double().view(T, H, D).transpose(0, 1))
    out = o.detach().transpose(0, 1).reshape(T, H * D).numpy().astype(F32)
    args = attention_args((q, k, v, out, dout), T, H, KV, D)
    lib.call("attention_bwd_f32", *args)
    for got, x, n in zip(args[5:8], (qt, kt, vt), (H, KV, KV), strict=True):
        close(got, x.grad.transpose(0, 1).reshape(T, n * D).numpy(), rtol=1e-4, atol=2e-5)
