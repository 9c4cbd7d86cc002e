"""attention_ext (score scale, logit soft-capping, sliding window) and softcap kernels
against float64 oracles (NumPy for the forward, PyTorch autograd for the backward),
for each ISA build: prefill and decode shapes, GQA / MQA / MHA, odd head dims,
windows of 1, shorter and longer than the context."""

from __future__ import annotations

import numpy as np
import pytest
from kernel_lib import both, close, rand

from ckir.reference.kernels import attention_oracle

F32 = np.float32
F64 = np.float64

SIZES = [1, 3, 7, 8, 15, 16, 17, 33, 100, 1000, 4 * 8192 + 5]


CASES = [
    # T, P, H, KV, D, scale, softcap, window
    (1, 0, 1, 1, 1, 1.0, 0.0, 0),
    (5, 0, 3, 1, 20, 0.3, 50.0, 0),
    (9, 0, 4, 2, 7, 0.5, 2.0, 3),
    (17, 4, 2, 2, 33, 0.2, 0.0, 5),
    (1, 30, 4, 2, 16, 0.25, 1.5, 8),
    (1, 30, 6, 3, 12, 0.25, 0.0, 1),
    (3, 11, 2, 1, 64, 0.125, 30.0, 100),
    (40, 0, 8, 4, 24, 0.2, 5.0, 7),
    # decode split between threads by positions (H * D <= 4096, >= 128 keys): the
    # window's first key mid-block, soft-capped; and every key
    (1, 300, 8, 4, 64, 0.125, 30.0, 157),
    (1, 700, 4, 1, 128, 0.09, 0.0, 0),
    # decode of many heads (H * D > 4096: one row at a time), a window
    (1, 90, 40, 8, 128, 0.09, 20.0, 33),
    # prefill blocks whose window starts in different chunks for different rows
    (37, 50, 4, 2, 48, 0.15, 0.0, 20),
    (21, 0, 2, 1, 16, 0.3, 8.0, 40),
]


@pytest.mark.parametrize("T,P,H,KV,D,scale,softcap,window", CASES)
def test_attention_ext(lib, threads, T, P, H, KV, D, scale, softcap, window):
    rng = np.random.default_rng(T * 31 + P + D)
    q = rand(rng, T, H * D, scale=2.0)
    kc, vc = rand(rng, P + T + 2, KV * D, scale=2.0), rand(rng, P + T + 2, KV * D)
    expected = attention_oracle(q, kc, vc, T, P, H, KV, D, scale, softcap, window)

    def args():
        return [q, kc, vc, np.full((T, H * D), np.nan, F32), T, P, H, KV, D, scale, softcap,
                window]  # fmt: skip

    both(lib, "attention_ext_f32", [3], args, lambda o: close(o, expected, rtol=1e-4, atol=1e-5))


def test_attention_ext_equals_plain_attention(lib):
    """scale 1/sqrt(D), no cap, no window: attention_f32's results within rounding."""
    rng = np.random.default_rng(3)
    T, P, H, KV, D = 6, 3, 4, 2, 16
    q, kc, vc = rand(rng, T, H * D), rand(rng, P + T, KV * D), rand(rng, P + T, KV * D)
    a, b = np.zeros((T, H * D), F32), np.zeros((T, H * D), F32)
    lib.call("attention_ext_f32", q, kc, vc, a, T, P, H, KV, D, D**-0.5, 0.0, 0)
    lib.call("attention_f32", q, kc, vc, b, T, P, H, KV, D)
    close(a, b.astype(F64), rtol=1e-5, atol=1e-6)


def torch_attention(q, k, v, T, H, KV, D, scale, softcap, window):
    import torch

    group = H // KV
    qh = q.view(T, H, D).transpose(0, 1)
    kh = k.view(T, KV, D).transpose(0, 1).repeat_interleave(group, 0)
    vh = v.view(T, KV, D).transpose(0, 1).repeat_interleave(group, 0)
    s = scale * qh @ kh.transpose(1, 2)
    if softcap:
        s = softcap * torch.tanh(s / softcap)
    i = torch.arange(T)[:, None]
    j = torch.arange(T)[None, :]
    keep = j <= i
    if window:
        keep &= j > i - window
    s = s.masked_fill(~keep, float("-inf"))
    return (torch.softmax(s, -1) @ vh).transpose(0, 1).reshape(T, H * D)


@pytest.mark.parametrize("T,P,H,KV,D,scale,softcap,window", [c for c in CASES if c[1] == 0])
def test_attention_ext_bwd(lib, threads, T, P, H, KV, D, scale, softcap, window):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(T * 7 + D)
    q, k, v = rand(rng, T, H * D, scale=2.0), rand(rng, T, KV * D, scale=2.0), rand(rng, T, KV * D)
    dout = rand(rng, T, H * D)
    tq, tk, tv = (torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in (q, k, v))
    ref = torch_attention(tq, tk, tv, T, H, KV, D, scale, softcap, window)
    ref.backward(torch.tensor(dout, dtype=torch.float64))
    out = ref.detach().numpy().astype(F32)
    edq, edk, edv = (x.grad.numpy() for x in (tq, tk, tv))

    def args():
        nan = np.full((T, H * D), np.nan, F32)
        kv_nan = np.full((T, KV * D), np.nan, F32)
        return [q, k, v, out, dout, nan, kv_nan, kv_nan.copy(), T, H, KV, D, scale, softcap,
                window]  # fmt: skip

    def check(dq, dk, dv):
        close(dq, edq, rtol=1e-4, atol=1e-5)
        close(dk, edk, rtol=1e-4, atol=1e-5)
        close(dv, edv, rtol=1e-4, atol=1e-5)

    both(lib, "attention_ext_bwd_f32", [5, 6, 7], args, check)


# ------------------------------------------------------------------ softcap


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("cap", [30.0, 1.5])
def test_softcap(lib, threads, n, cap):
    rng = np.random.default_rng(n)
    x = rand(rng, n, scale=3 * cap)
    x[:: max(1, n // 4)] = rng.choice([-1e4, -100.0, 100.0, 1e4], size=x[:: max(1, n // 4)].size)
    expected = cap * np.tanh(x.astype(F64) / cap)
    both(
        lib,
        "softcap_f32",
        [1],
        lambda: [x, np.full(n, np.nan, F32), n, cap],
        lambda o: close(o, expected, rtol=1e-5, atol=1e-6 * cap),
    )


@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("cap", [30.0, 1.5])
def test_softcap_bwd(lib, threads, n, cap):
    rng = np.random.default_rng(n + 1)
    x, dy = rand(rng, n, scale=3 * cap), rand(rng, n)
    x[:: max(1, n // 4)] = rng.choice([-1e4, -100.0, 100.0, 1e4], size=x[:: max(1, n // 4)].size)
    t = np.tanh(x.astype(F64) / cap)
    expected = dy * (1.0 - t * t)
    both(
        lib,
        "softcap_bwd_f32",
        [2],
        lambda: [x, dy, np.full(n, np.nan, F32), n, cap],
        lambda o: close(o, expected, rtol=1e-5, atol=1e-6),
    )


@pytest.mark.parametrize("window", [0, 600, 70])
def test_attention_ext_decode_split_every_team(lib, window):
    """Decode splits the window's positions between up to 16 threads and merges their
    partial rows: with teams of 1 to 8 (more threads than cores), parts of a window that
    starts mid-block, and parts left empty, every row stays within rounding of the oracle."""
    T, P, H, KV, D, scale, softcap = 1, 1000, 4, 2, 40, 0.15, 20.0
    rng = np.random.default_rng(window + 1)
    q = rand(rng, T, H * D, scale=2.0)
    kc, vc = rand(rng, P + T, KV * D, scale=2.0), rand(rng, P + T, KV * D)
    expected = attention_oracle(q, kc, vc, T, P, H, KV, D, scale, softcap, window)
    for team in (1, 2, 3, 8):
        with lib.num_threads(team):
            out = np.full((T, H * D), np.nan, F32)
            lib.call("attention_ext_f32", q, kc, vc, out, T, P, H, KV, D, scale, softcap, window)
        close(out, expected, rtol=1e-4, atol=1e-5)
