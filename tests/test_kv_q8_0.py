"""The Q8_0 KV cache's kernels against NumPy oracles, for each ISA build.

kv_store_q8_0 must write exactly ckir.quant.quantize_q8_0's bytes (the weights'
format); attention_q8_0 must equal fp32 attention over the dequantized cache
(ckir.quant.dequantize), for 1 token, odd context lengths, GQA and MHA, D of
one block and of several, prefill after a cached prefix, and rows of the cache
past P+T never read.  The public kernel and its scalar twin are both checked.
"""

from __future__ import annotations

import numpy as np
import pytest
from kernel_lib import close, rand
from test_kernels import attention_oracle

from ckir import quant

F32 = np.float32


def q8_rows(x: np.ndarray) -> np.ndarray:
    """[n, KVD] float32 -> [n, KVD/32*34] Q8_0 bytes (the weights' quantizer)."""
    return quant.quantize_q8_0(x)


@pytest.mark.parametrize(
    "T,P,KVD,ctx", [(1, 0, 32, 1), (3, 5, 96, 8), (1, 7, 64, 8), (4, 0, 192, 4), (17, 3, 32, 20)]
)
def test_kv_store_q8_0(lib, T, P, KVD, ctx):
    rng = np.random.default_rng(T + P + KVD)
    k, v = rand(rng, T, KVD, scale=3.0), rand(rng, T, KVD)
    k[0, :32] = 0.0  # an all-zero block: d = 0, q = 0
    v[-1, 5] = 1e-30  # a tiny block: d below f16's normal range
    kc0 = rng.integers(0, 256, (ctx, KVD // 32 * 34), dtype=np.uint8)
    vc0 = rng.integers(0, 256, (ctx, KVD // 32 * 34), dtype=np.uint8)
    ek, ev = kc0.copy(), vc0.copy()
    ek[P : P + T], ev[P : P + T] = q8_rows(k), q8_rows(v)
    for fn in (lib.call, lib.ref):
        kc, vc = kc0.copy(), vc0.copy()
        fn("kv_store_q8_0", k, v, kc, vc, T, P, KVD)
        np.testing.assert_array_equal(kc, ek)  # rows outside P..P+T-1 untouched too
        np.testing.assert_array_equal(vc, ev)


def test_kv_store_q8_0_f16_rounding(lib):
    """Block scales across f16's range: normal, subnormal, ties, near the top."""
    rng = np.random.default_rng(0)
    scales = [1e-9, 3e-7, 6.1e-5, 1e-3, 0.5, 1.0, 7.0, 300.0, 6e6]
    rows = []
    for s in scales:
        for _ in range(4):
            rows.append(rand(rng, 32, scale=s))
    k = np.stack(rows).reshape(len(rows), 32)
    n = k.shape[0]
    kc = np.zeros((n, 34), np.uint8)
    vc = np.zeros((n, 34), np.uint8)
    lib.call("kv_store_q8_0", k, k, kc, vc, n, 0, 32)
    np.testing.assert_array_equal(kc, q8_rows(k))


# T, P, H, KV, D, ctx
Q8_ATTN_CASES = [
    (1, 0, 1, 1, 32, 1),  # one token, one key
    (1, 0, 6, 2, 64, 8),
    (1, 36, 6, 2, 32, 40),  # decode, odd context 37
    (1, 150, 9, 3, 64, 160),  # decode, SmolLM2 heads, odd context 151
    (1, 300, 14, 2, 64, 320),  # decode, Qwen2 heads: positions split between threads
    (1, 254, 4, 1, 96, 256),  # decode, D = 96: a ragged last chunk of D for AVX-512
    (1, 70, 20, 4, 256, 72),  # decode, H * D > 4096: a range of heads per thread
    (5, 0, 4, 4, 64, 8),  # MHA prefill
    (7, 13, 6, 2, 64, 20),  # prefill after a prefix, P+T = max_ctx
    (33, 17, 3, 1, 160, 50),  # prefill, D = 160, 32-key chunks with tails
    (130, 0, 9, 3, 64, 130),  # prefill, SmolLM2 heads, many chunks per row block
    (9, 3, 2, 2, 256, 12),  # the largest D
]


@pytest.mark.parametrize("T,P,H,KV,D,ctx", Q8_ATTN_CASES)
def test_attention_q8_0(lib, threads, T, P, H, KV, D, ctx):
    rng = np.random.default_rng(T * 1000 + P * 10 + D)
    q = rand(rng, T, H * D, scale=2.0)
    k, v = rand(rng, P + T, KV * D), rand(rng, P + T, KV * D)
    kc = np.full((ctx, KV * D // 32 * 34), 0xFF, np.uint8)  # 0xFFFF: an f16 NaN scale
    vc = kc.copy()
    kc[: P + T], vc[: P + T] = q8_rows(k), q8_rows(v)  # rows past P+T-1 must not be read
    kd = quant.dequantize(kc[: P + T], "q8_0").reshape(P + T, KV * D)
    vd = quant.dequantize(vc[: P + T], "q8_0").reshape(P + T, KV * D)
    expected = attention_oracle(q, kd, vd, T, P, H, KV, D)
    outs = []
    for fn in (lib.call, lib.ref):
        out = np.full((T, H * D), np.nan, F32)
        fn("attention_q8_0", q, kc, vc, out, T, P, H, KV, D)
        close(out, expected, rtol=1e-5, atol=1e-5)
        outs.append(out)
    close(outs[0], outs[1].astype(np.float64), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("n_threads", [3, 5])
def test_attention_q8_0_decode_uneven_parts(lib, n_threads):
    """Decode positions split unevenly (and some parts empty) between threads."""
    P, H, KV, D = 130, 6, 2, 32
    rng = np.random.default_rng(P + n_threads)
    q = rand(rng, 1, H * D, scale=2.0)
    kc, vc = q8_rows(rand(rng, P + 1, KV * D)), q8_rows(rand(rng, P + 1, KV * D))
    kd = quant.dequantize(kc, "q8_0").reshape(P + 1, KV * D)
    vd = quant.dequantize(vc, "q8_0").reshape(P + 1, KV * D)
    expected = attention_oracle(q, kd, vd, 1, P, H, KV, D)
    out = np.full((1, H * D), np.nan, F32)
    with lib.num_threads(n_threads):
        lib.call("attention_q8_0", q, kc, vc, out, 1, P, H, KV, D)
    close(out, expected, rtol=1e-5, atol=1e-5)


def test_attention_q8_0_near_fp32(lib):
    """The quantized cache's error against fp32 attention over the unquantized
    rows is what Q8_0 rounding allows (a bound, not exactness)."""
    T, P, H, KV, D = 1, 200, 9, 3, 64
    rng = np.random.default_rng(11)
    q = rand(rng, T, H * D, scale=2.0)
    k, v = rand(rng, P + T, KV * D), rand(rng, P + T, KV * D)
    exact = attention_oracle(q, k, v, T, P, H, KV, D)
    out = np.zeros((T, H * D), F32)
    lib.call("attention_q8_0", q, q8_rows(k), q8_rows(v), out, T, P, H, KV, D)
    err = np.abs(out - exact).max() / np.abs(exact).max()
    assert 0 < err < 2e-2, err
