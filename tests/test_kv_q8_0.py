"""The Q8_0 KV cache's kernels against NumPy oracles, for each ISA build.

kv_store_q8_0 must write exactly ckir.quant.quantize_q8_0's bytes (the weights'
format) of each head's D values zero-padded to whole blocks of 32; attention_q8_0
and attention_ext_q8_0 (score scale, soft-capping, sliding window) must equal fp32
attention over the dequantized cache (ckir.quant.dequantize, padding dropped), for
1 token, odd context lengths, GQA and MHA, D of one block, of several and with a
tail (40, 72, 80, ...), prefill after a cached prefix, and rows of the cache past
P+T never read.  The public kernel and its scalar twin are both checked.
"""

from __future__ import annotations

import numpy as np
import pytest
from kernel_lib import close, rand
from test_kernels import attention_oracle

from ckir import quant
from ckir.reference.kernels import attention_oracle as ext_oracle

F32 = np.float32


def q8_rows(x: np.ndarray, D: int | None = None) -> np.ndarray:
    """[n, KV*D] float32 -> [n, KV*ceil(D/32)*34] Q8_0 bytes (the weights' quantizer),
    each head's D values zero-padded to whole blocks (D None: the whole row, D % 32 == 0)."""
    if D is None or D % 32 == 0:
        return quant.quantize_q8_0(x)
    n, kvd = x.shape
    dp = -(-D // 32) * 32
    pad = np.zeros((n, kvd // D, dp), F32)
    pad[:, :, :D] = x.reshape(n, kvd // D, D)
    return quant.quantize_q8_0(pad.reshape(n, -1))


def q8_values(c: np.ndarray, KV: int, D: int) -> np.ndarray:
    """The fp32 values of [n, KV*ceil(D/32)*34] Q8_0 cache rows: [n, KV*D], padding dropped."""
    dp = -(-D // 32) * 32
    full = quant.dequantize(c, "q8_0").reshape(c.shape[0], KV, dp)
    return np.ascontiguousarray(full[:, :, :D].reshape(c.shape[0], KV * D))


@pytest.mark.parametrize(
    "T,P,KVD,D,ctx",
    [
        (1, 0, 32, 32, 1),
        (3, 5, 96, 32, 8),
        (1, 7, 64, 64, 8),
        (4, 0, 192, 64, 4),
        (17, 3, 32, 32, 20),
        (2, 3, 80, 40, 6),  # head_dim 40: two blocks a head, the second 8 values + 24 zeros
        (1, 0, 72, 72, 2),  # head_dim 72: 3 blocks
        (3, 1, 240, 80, 5),  # 3 heads of 80
        (2, 0, 5, 1, 3),  # head_dim 1
        (1, 2, 66, 33, 3),  # head_dim 33: a tail of one value
    ],
)
def test_kv_store_q8_0(lib, T, P, KVD, D, ctx):
    rng = np.random.default_rng(T + P + KVD)
    k, v = rand(rng, T, KVD, scale=3.0), rand(rng, T, KVD)
    k[0, : min(32, D)] = 0.0  # an all-zero block: d = 0, q = 0
    v[-1, 0] = 1e-30  # a tiny value
    row = KVD // D * -(-D // 32) * 34
    kc0 = rng.integers(0, 256, (ctx, row), dtype=np.uint8)
    vc0 = rng.integers(0, 256, (ctx, row), dtype=np.uint8)
    ek, ev = kc0.copy(), vc0.copy()
    ek[P : P + T], ev[P : P + T] = q8_rows(k, D), q8_rows(v, D)
    for fn in (lib.call, lib.ref):
        kc, vc = kc0.copy(), vc0.copy()
        fn("kv_store_q8_0", k, v, kc, vc, T, P, KVD, D, -(-D // 32))
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
    lib.call("kv_store_q8_0", k, k, kc, vc, n, 0, 32, 32, 1)
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
    (1, 40, 6, 2, 40, 48),  # decode, head_dim 40: padded heads (2 blocks, 24 zeros)
    (1, 130, 8, 4, 72, 131),  # decode, head_dim 72, split between threads
    (1, 66, 5, 5, 80, 70),  # decode, MHA, head_dim 80
    (1, 9, 3, 1, 1, 10),  # decode, head_dim 1
    (1, 70, 20, 4, 200, 72),  # decode, H * D > 4096 with a tail: heads per thread
    (19, 5, 4, 2, 40, 24),  # prefill after a prefix, head_dim 40
    (33, 0, 6, 3, 72, 33),  # prefill, head_dim 72
    (7, 2, 2, 1, 33, 9),  # prefill, head_dim 33: one value in the last block
]


@pytest.mark.parametrize("T,P,H,KV,D,ctx", Q8_ATTN_CASES)
def test_attention_q8_0(lib, threads, T, P, H, KV, D, ctx):
    rng = np.random.default_rng(T * 1000 + P * 10 + D)
    q = rand(rng, T, H * D, scale=2.0)
    k, v = rand(rng, P + T, KV * D), rand(rng, P + T, KV * D)
    kc = np.full((ctx, KV * -(-D // 32) * 34), 0xFF, np.uint8)  # 0xFFFF: an f16 NaN scale
    vc = kc.copy()
    kc[: P + T], vc[: P + T] = q8_rows(k, D), q8_rows(v, D)  # rows past P+T-1 not read
    kd, vd = q8_values(kc[: P + T], KV, D), q8_values(vc[: P + T], KV, D)
    expected = attention_oracle(q, kd, vd, T, P, H, KV, D)
    outs = []
    for fn in (lib.call, lib.ref):
        out = np.full((T, H * D), np.nan, F32)
        fn("attention_q8_0", q, kc, vc, out, T, P, H, KV, D, -(-D // 32))
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
        lib.call("attention_q8_0", q, kc, vc, out, 1, P, H, KV, D, 1)
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
    lib.call("attention_q8_0", q, q8_rows(k), q8_rows(v), out, T, P, H, KV, D, 2)
    err = np.abs(out - exact).max() / np.abs(exact).max()
    assert 0 < err < 2e-2, err


# T, P, H, KV, D, scale, softcap, window, ctx
Q8_EXT_CASES = [
    (1, 0, 1, 1, 32, 1.0, 0.0, 0, 1),  # one token, one key
    (5, 0, 3, 1, 64, 0.3, 50.0, 0, 5),  # prefill, soft-capped
    (9, 0, 4, 2, 40, 0.5, 2.0, 3, 12),  # prefill, window 3, head_dim 40
    (17, 4, 2, 2, 96, 0.2, 0.0, 5, 21),  # prefill after a prefix, window 5
    (1, 30, 4, 2, 72, 0.25, 1.5, 8, 31),  # decode, window shorter than the context
    (1, 30, 6, 3, 32, 0.25, 0.0, 1, 32),  # decode, window 1: the key itself only
    (3, 11, 2, 1, 64, 0.125, 30.0, 100, 16),  # window longer than the context
    (40, 0, 8, 4, 80, 0.2, 5.0, 7, 40),  # gemma-like: softcap and window, head_dim 80
    (1, 200, 8, 4, 256, 0.0625, 50.0, 0, 201),  # decode, head_dim 256, 4 chunks of keys
    (1, 150, 8, 4, 256, 0.0625, 0.0, 129, 160),  # decode, a window across chunk edges
]


@pytest.mark.parametrize("T,P,H,KV,D,scale,softcap,window,ctx", Q8_EXT_CASES)
def test_attention_ext_q8_0(lib, threads, T, P, H, KV, D, scale, softcap, window, ctx):
    rng = np.random.default_rng(T * 31 + P + D)
    q = rand(rng, T, H * D, scale=2.0)
    k, v = rand(rng, P + T, KV * D, scale=2.0), rand(rng, P + T, KV * D)
    kc = np.full((ctx, KV * -(-D // 32) * 34), 0xFF, np.uint8)  # rows past P+T-1 not read
    vc = kc.copy()
    kc[: P + T], vc[: P + T] = q8_rows(k, D), q8_rows(v, D)
    kd, vd = q8_values(kc[: P + T], KV, D), q8_values(vc[: P + T], KV, D)
    expected = ext_oracle(q, kd, vd, T, P, H, KV, D, scale, softcap, window)
    for fn in (lib.call, lib.ref):
        out = np.full((T, H * D), np.nan, F32)
        fn(
            "attention_ext_q8_0",
            q,
            kc,
            vc,
            out,
            T,
            P,
            H,
            KV,
            D,
            -(-D // 32),
            scale,
            softcap,
            window,
        )
        close(out, expected, rtol=1e-4, atol=1e-5)


def test_attention_ext_q8_0_equals_plain(lib):
    """scale 1/sqrt(D), no cap, no window: attention_q8_0's results within rounding."""
    T, P, H, KV, D = 6, 70, 4, 2, 40
    rng = np.random.default_rng(5)
    q = rand(rng, T, H * D)
    kc, vc = q8_rows(rand(rng, P + T, KV * D), D), q8_rows(rand(rng, P + T, KV * D), D)
    a, b = np.zeros((T, H * D), F32), np.zeros((T, H * D), F32)
    lib.call("attention_ext_q8_0", q, kc, vc, a, T, P, H, KV, D, 2, D**-0.5, 0.0, 0)
    lib.call("attention_q8_0", q, kc, vc, b, T, P, H, KV, D, 2)
    close(a, b.astype(np.float64), rtol=1e-5, atol=1e-6)
