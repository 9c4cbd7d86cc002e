"""attention_bias_f32 (attention with an additive bias: the ONNX backend's attn_mask)
against its float64 NumPy oracle (ckir.reference.kernels.attention_bias_oracle).

Edge shapes: T = 1, S = 1, odd head sizes, D != Dv, GQA and MHA, -inf entries,
fully masked rows (out = 0, probabilities 0), causal offsets after a past (P > 0)
and before it (P < 0), left / right windows, soft-capping, and every
qk_matmul_output mode of the scores output.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from kernel_lib import rand

from ckir.reference.kernels import attention_bias_oracle

F32 = np.float32

CASES = [
    # T, S, H, KV, D, Dv, P, causal, left, right, softcap
    (1, 1, 1, 1, 1, 1, 0, 0, -1, -1, 0.0),
    (3, 5, 2, 1, 7, 7, 2, 1, -1, -1, 0.0),
    (4, 4, 4, 2, 8, 10, 0, 0, -1, -1, 0.0),
    (5, 9, 6, 3, 17, 5, 4, 1, 2, -1, 0.0),
    (6, 6, 3, 3, 16, 16, 0, 0, 1, 2, 3.0),
    (2, 7, 2, 2, 33, 9, -3, 1, -1, -1, 0.0),
    (7, 12, 8, 2, 32, 32, 5, 1, -1, -1, 50.0),
]


def _bias(rng: np.random.Generator, H: int, T: int, S: int) -> np.ndarray:
    """A random additive bias with -inf cells and one row masked everywhere."""
    b = rand(rng, H, T, S)
    b[rng.random((H, T, S)) < 0.25] = -np.inf
    b[0, T // 2, :] = -np.inf
    return b


@pytest.mark.parametrize("mode", [-1, 0, 2, 3])
@pytest.mark.parametrize("case", CASES, ids=lambda c: "x".join(map(str, c[:7])))
def test_attention_bias(lib, threads, case, mode) -> None:
    T, S, H, KV, D, Dv, P, causal, left, right, cap = case
    rng = np.random.default_rng(T * 100 + S)
    q, k, v = rand(rng, T, H * D), rand(rng, S, KV * D), rand(rng, S, KV * Dv)
    bias = _bias(rng, H, T, S)
    p = dict(
        T=T,
        S=S,
        H=H,
        KV=KV,
        D=D,
        Dv=Dv,
        P=P,
        scale=1.0 / math.sqrt(D),
        softcap=cap,
        causal=causal,
        left=left,
        right=right,
        mode=mode,
    )
    eout, escores = attention_bias_oracle(q, k, v, bias, p)
    assert np.isfinite(eout).all()
    for fn in (lib.call, lib.ref):
        out = np.full((T, H * Dv), np.nan, F32)
        scores = np.full((H, T, S), np.nan, F32)
        fn("attention_bias_f32", q, k, v, bias, out, scores, *p.values())
        np.testing.assert_allclose(out, eout, rtol=2e-5, atol=2e-6)
        np.testing.assert_allclose(scores, escores, rtol=2e-5, atol=2e-6)
        assert (out.reshape(T, H, Dv)[T // 2, 0] == 0).all()  # the fully masked row


def test_attention_bias_zero_bias_is_plain_attention(lib) -> None:
    """With a zero bias and the causal flag, the kernel is attention_ext_f32's causal
    attention (the same q, cache and P)."""
    T, S, H, KV, D, P = 3, 8, 4, 2, 12, 5
    rng = np.random.default_rng(3)
    q, k, v = rand(rng, T, H * D), rand(rng, S, KV * D), rand(rng, S, KV * D)
    out, ref = np.zeros((T, H * D), F32), np.zeros((T, H * D), F32)
    scores = np.zeros((H, T, S), F32)
    sc = 1.0 / math.sqrt(D)
    lib.call(
        "attention_bias_f32",
        q,
        k,
        v,
        np.zeros((H, T, S), F32),
        out,
        scores,
        T,
        S,
        H,
        KV,
        D,
        D,
        P,
        sc,
        0.0,
        1,
        -1,
        -1,
        -1,
    )
    lib.call("attention_ext_f32", q, k, v, ref, T, P, H, KV, D, sc, 0.0, 0)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6)
