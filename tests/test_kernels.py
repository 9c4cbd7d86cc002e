"""Every runtime kernel against a NumPy (float64) oracle, for each ISA build.

The library is built once per ISA ("scalar", "avx2", "native") per session.
Each test checks the public kernel and its scalar twin ``ckir_ref_*`` against
the oracle, and the two against each other.  Threaded kernels also run with 1
and 2 OpenMP threads.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from kernel_lib import rand, rope_oracle, rope_plain

from ckir.reference.kernels import attention_oracle as reference_attention

F32 = np.float32


def both(lib, name, outputs, make_args, check):
    """Run the public kernel and its ref twin on fresh copies; check each, compare both."""
    results = []
    for fn in (lib.call, lib.ref):
        args = make_args()
        fn(name, *args)
        outs = [args[i] for i in outputs]
        for o in outs:
            check(o)
        results.append(outs)
    return results


def close(actual, expected, rtol=1e-5, atol=1e-5):
    np.testing.assert_allclose(actual.astype(np.float64), expected, rtol=rtol, atol=atol)


# --------------------------------------------------------------- embeddings


@pytest.mark.parametrize("T,E", [(1, 1), (1, 17), (7, 64), (5, 33)])
def test_embed(lib, T, E):
    rng = np.random.default_rng(T * 100 + E)
    V = 50
    table = rand(rng, V, E)
    tokens = rng.integers(0, V, size=T).astype(np.int32)
    tokens[0] = V - 1
    expected = table[tokens]

    def args():
        return [tokens, table, np.full((T, E), np.nan, F32), T, E]

    both(lib, "embed_f32", [2], args, lambda o: np.testing.assert_array_equal(o, expected))


@pytest.mark.parametrize("T,E,P", [(1, 3, 0), (3, 33, 5), (1, 64, 127), (4, 17, 0)])
def test_pos_embed_add(lib, T, E, P):
    rng = np.random.default_rng(T + E + P)
    wpe = rand(rng, P + T + 3, E)
    x0 = rand(rng, T, E)
    expected = x0.astype(np.float64) + wpe[P : P + T]
    both(
        lib,
        "pos_embed_add_f32",
        [1],
        lambda: [wpe, x0.copy(), T, E, P],
        lambda o: close(o, expected),
    )


@pytest.mark.parametrize("T,P,KVD,ctx", [(1, 0, 8, 4), (3, 5, 17, 8), (1, 7, 64, 8), (4, 0, 6, 4)])
def test_kv_store(lib, T, P, KVD, ctx):
    rng = np.random.default_rng(T + P + KVD)
    k, v = rand(rng, T, KVD), rand(rng, T, KVD)
    kc0, vc0 = rand(rng, ctx, KVD), rand(rng, ctx, KVD)
    ek, ev = kc0.copy(), vc0.copy()
    ek[P : P + T], ev[P : P + T] = k, v

    def args():
        return [k, v, kc0.copy(), vc0.copy(), T, P, KVD]

    for fn in (lib.call, lib.ref):
        a = args()
        fn("kv_store_f32", *a)
        np.testing.assert_array_equal(a[2], ek)
        np.testing.assert_array_equal(a[3], ev)


# ------------------------------------------------------------------ norms


@pytest.mark.parametrize("T,E", [(1, 1), (1, 7), (5, 64), (3, 100), (9, 576), (128, 288)])
@pytest.mark.parametrize("eps", [1e-5, 1e-6])
def test_rmsnorm(lib, T, E, eps):
    rng = np.random.default_rng(T * E)
    x, gamma = rand(rng, T, E, scale=2.0), rand(rng, E, loc=1.0)
    xd = x.astype(np.float64)
    expected = xd / np.sqrt((xd**2).mean(axis=1, keepdims=True) + eps) * gamma
    both(
        lib,
        "rmsnorm_f32",
        [2],
        lambda: [x, gamma, np.zeros_like(x), T, E, eps],
        lambda o: close(o, expected),
    )


def test_rmsnorm_in_place(lib):
    rng = np.random.default_rng(1)
    x, gamma = rand(rng, 4, 40), rand(rng, 40)
    xd = x.astype(np.float64)
    expected = xd / np.sqrt((xd**2).mean(axis=1, keepdims=True) + 1e-5) * gamma
    buf = x.copy()
    lib.call("rmsnorm_f32", buf, gamma, buf, 4, 40, 1e-5)
    close(buf, expected)


@pytest.mark.parametrize("T,E", [(1, 1), (1, 7), (5, 64), (3, 100), (9, 768), (64, 300)])
def test_layernorm(lib, T, E):
    rng = np.random.default_rng(T * E + 1)
    x = rand(rng, T, E, scale=2.0, loc=3.0)  # offset mean: checks the centred variance
    gamma, beta = rand(rng, E, loc=1.0), rand(rng, E)
    xd = x.astype(np.float64)
    mu = xd.mean(axis=1, keepdims=True)
    var = ((xd - mu) ** 2).mean(axis=1, keepdims=True)
    expected = (xd - mu) / np.sqrt(var + 1e-5) * gamma + beta
    both(
        lib,
        "layernorm_f32",
        [3],
        lambda: [x, gamma, beta, np.zeros_like(x), T, E, 1e-5],
        lambda o: close(o, expected, rtol=2e-5, atol=2e-5),
    )


# ----------------------------------------------------------------- linear

GEMM_SHAPES = [
    (1, 1, 1),
    (1, 3, 5),
    (2, 17, 33),
    (3, 100, 64),
    (4, 33, 17),
    (5, 17, 100),
    (13, 31, 100),
    (12, 32, 256),
    (25, 70, 513),
    (67, 129, 300),
    (100, 1, 3),
    (1, 600, 40),
    (48, 640, 40),
    (8, 600, 70),  # largest M of the dot-product path, threaded
    (9, 65, 31),  # smallest M of the packed path
    (300, 40, 200),  # narrow N: threads split M
    (130, 600, 520),  # row tail, several column chunks per thread, K in 3 equal slices
]


def gemm_tol(K):
    return dict(rtol=1e-5, atol=2e-6 * math.sqrt(K) * 4)


@pytest.mark.parametrize("M,N,K", GEMM_SHAPES)
@pytest.mark.parametrize("bias", [False, True], ids=["nobias", "bias"])
def test_gemm(lib, threads, M, N, K, bias):
    rng = np.random.default_rng(M * 7919 + N * 31 + K)
    x, w, b = rand(rng, M, K), rand(rng, N, K), rand(rng, N)
    expected = x.astype(np.float64) @ w.astype(np.float64).T + (b if bias else 0.0)
    name = "gemm_bias_f32" if bias else "gemm_f32"

    def args():
        y = np.full((M, N), np.nan, F32)  # every element must be written
        return [x, w, b, y, M, N, K] if bias else [x, w, y, M, N, K]

    out = 3 if bias else 2
    (pub,), (ref,) = both(lib, name, [out], args, lambda o: close(o, expected, **gemm_tol(K)))
    close(pub, ref.astype(np.float64), **gemm_tol(K))


@pytest.mark.parametrize("N,K", [(1, 1), (3, 5), (17, 33), (100, 16), (1000, 576), (129, 1000)])
@pytest.mark.parametrize("bias", [False, True], ids=["nobias", "bias"])
def test_gemv(lib, threads, N, K, bias):
    rng = np.random.default_rng(N * 13 + K)
    x, w, b = rand(rng, K), rand(rng, N, K), rand(rng, N)
    expected = w.astype(np.float64) @ x.astype(np.float64) + (b if bias else 0.0)
    name = "gemv_bias_f32" if bias else "gemv_f32"

    def args():
        y = np.full(N, np.nan, F32)
        return [x, w, b, y, N, K] if bias else [x, w, y, N, K]

    both(lib, name, [3 if bias else 2], args, lambda o: close(o, expected, **gemm_tol(K)))


@pytest.mark.parametrize("M,N,K", GEMM_SHAPES)
@pytest.mark.parametrize("relu", [False, True], ids=["plain", "relu"])
def test_matmul(lib, threads, M, N, K, relu):
    rng = np.random.default_rng(M * 31 + N * 7 + K)
    a, b = rand(rng, M, K), rand(rng, K, N)
    expected = a.astype(np.float64) @ b.astype(np.float64)
    if relu:
        expected = np.maximum(expected, 0.0)
    name = "matmul_relu_f32" if relu else "matmul_f32"
    both(
        lib,
        name,
        [2],
        lambda: [a, b, np.full((M, N), np.nan, F32), M, N, K],
        lambda o: close(o, expected, **gemm_tol(K)),
    )


# ------------------------------------------------------------------- rope


@pytest.mark.parametrize(
    "T,H,KV,D,P,theta",
    [
        (1, 1, 1, 2, 0, 10000.0),
        (3, 4, 2, 6, 5, 10000.0),
        (5, 6, 2, 18, 100, 1e6),
        (2, 2, 2, 64, 1000, 10000.0),
        (4, 3, 1, 128, 7, 1e6),
        (1, 2, 1, 10, 4095, 10000.0),
        (9, 9, 3, 64, 0, 10000.0),
        (2, 1, 1, 300, 3, 10000.0),
    ],
)
def test_rope(lib, T, H, KV, D, P, theta):
    rng = np.random.default_rng(T + H + D + P)
    q0, k0 = rand(rng, T, H * D), rand(rng, T, KV * D)
    pos = [P + t for t in range(T)]
    eq, ek = rope_oracle(q0, H, D, pos, theta), rope_oracle(k0, KV, D, pos, theta)
    # float32 angles: a 1-ulp difference in inv_freq moves the angle by ~1 ulp of p.
    atol = 2e-6 + 4 * float(np.spacing(F32(P + T))) * 4.0
    for fn in (lib.call, lib.ref):
        q, k = q0.copy(), k0.copy()
        fn("rope_f32", q, k, T, H, KV, D, P, theta, *rope_plain(D))
        close(q, eq, rtol=1e-5, atol=atol)
        close(k, ek, rtol=1e-5, atol=atol)


def test_rope_reuses_tables_by_their_key(lib):
    """rope_f32 keeps each thread's cos/sin tables of its recent positions (ckir_rope.h):
    calls sharing a position, or its cache slot (256 positions apart), but not D or theta
    each get their own angles, and a repeated call, which reuses the tables, gives the
    same bits as the first.  T = 1 runs on the calling thread, T = 40 on every thread."""
    H, KV = 3, 1
    for P, D, theta in [
        (5, 64, 1e4),
        (261, 64, 1e4),
        (5, 64, 1e6),
        (5, 32, 1e4),
        (5, 128, 1e4),
        (5, 64, 1e4),
    ]:
        for T in (1, 40):
            rng = np.random.default_rng(P + D + T)
            q0, k0 = rand(rng, T, H * D), rand(rng, T, KV * D)
            pos = [P + t for t in range(T)]
            eq, ek = rope_oracle(q0, H, D, pos, theta), rope_oracle(k0, KV, D, pos, theta)
            atol = 2e-6 + 16 * float(np.spacing(F32(P + T)))
            runs = []
            for _ in range(2):
                q, k = q0.copy(), k0.copy()
                lib.call("rope_f32", q, k, T, H, KV, D, P, theta, *rope_plain(D))
                close(q, eq, rtol=1e-5, atol=atol)
                close(k, ek, rtol=1e-5, atol=atol)
                runs.append((q, k))
            for a, b in zip(runs[0], runs[1], strict=True):
                np.testing.assert_array_equal(b, a, err_msg=f"P={P} D={D} theta={theta} T={T}")


def test_rope_matches_hf(lib):
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from transformers.models.llama.modeling_llama import rotate_half

    T, H, KV, D, P, theta = 6, 4, 2, 32, 11, 10000.0
    rng = np.random.default_rng(5)
    q0, k0 = rand(rng, T, H * D), rand(rng, T, KV * D)
    inv = 1.0 / (theta ** (torch.arange(0, D, 2, dtype=torch.int64).float() / D))
    pos = torch.arange(P, P + T).float()
    freqs = pos[:, None] * inv[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    cos, sin = emb.cos()[:, None, :], emb.sin()[:, None, :]
    qt = torch.from_numpy(q0).view(T, H, D)
    kt = torch.from_numpy(k0).view(T, KV, D)
    eq = (qt * cos + rotate_half(qt) * sin).reshape(T, H * D).numpy()
    ek = (kt * cos + rotate_half(kt) * sin).reshape(T, KV * D).numpy()
    q, k = q0.copy(), k0.copy()
    lib.call("rope_f32", q, k, T, H, KV, D, P, theta, *rope_plain(D))
    np.testing.assert_allclose(q, eq, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(k, ek, rtol=1e-5, atol=1e-5)


# -------------------------------------------------------------- attention


def attention_oracle(q, kc, vc, T, P, H, KV, D):
    """attention_f32: the shared oracle at scale 1/sqrt(D), no cap, no window."""
    return reference_attention(q, kc, vc, T, P, H, KV, D, 1.0 / math.sqrt(D), 0.0, 0)


ATTN_CASES = [
    # T, P, H, KV, D, ctx
    (1, 0, 1, 1, 6, 1),  # P+T = 1
    (1, 0, 6, 2, 10, 8),
    (1, 37, 6, 2, 18, 40),  # decode with P > 0
    (5, 0, 4, 4, 64, 8),  # MHA prefill
    (7, 13, 6, 2, 64, 20),  # P+T = max_ctx
    (3, 20, 2, 1, 128, 64),
    (2, 15, 3, 3, 6, 17),  # P+T = max_ctx, odd head count, tiny D
    (1, 100, 2, 2, 256, 101),
    (16, 17, 4, 2, 18, 33),  # key blocks with ragged tails
    (40, 0, 6, 2, 64, 40),  # prefill: row blocks of one vector, the last one partial
    (33, 17, 3, 1, 80, 50),  # prefill after a cached prefix, D = 80, 32-key chunks
    (130, 0, 9, 3, 64, 130),  # prefill, SmolLM2 heads: many chunks per row block
    (9, 3, 2, 2, 256, 12),  # prefill, the largest D
    (1, 150, 9, 3, 64, 160),  # decode, SmolLM2 heads: one contiguous head range per thread
    (1, 60, 5, 5, 80, 64),  # decode, D = 80: p . V in chunk groups of 4 and 1
    (1, 300, 14, 2, 64, 320),  # decode, Qwen2 heads: positions split between threads
    (1, 200, 12, 12, 64, 201),  # decode, GPT-2 heads
    (1, 255, 4, 1, 24, 256),  # decode, D = 24: a ragged last chunk in every part
    (1, 70, 20, 4, 256, 72),  # decode, H * D > 4096: a range of heads per thread
]


@pytest.mark.parametrize("T,P,H,KV,D,ctx", ATTN_CASES)
def test_attention(lib, threads, T, P, H, KV, D, ctx):
    rng = np.random.default_rng(T * 1000 + P * 10 + D)
    q = rand(rng, T, H * D, scale=2.0)
    kc, vc = rand(rng, ctx, KV * D), rand(rng, ctx, KV * D)
    kc[P + T :] = np.nan  # rows past P+T-1 must never be read
    vc[P + T :] = np.nan
    expected = attention_oracle(q, kc, vc, T, P, H, KV, D)
    (pub,), (ref,) = both(
        lib,
        "attention_f32",
        [3],
        lambda: [q, kc, vc, np.full((T, H * D), np.nan, F32), T, P, H, KV, D],
        lambda o: close(o, expected, rtol=1e-5, atol=1e-5),
    )
    close(pub, ref.astype(np.float64), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("n_threads", [3, 5])
@pytest.mark.parametrize("P,H,KV,D", [(300, 9, 3, 64), (130, 6, 2, 18), (40, 3, 1, 8)])
def test_attention_decode_uneven_parts(lib, n_threads, P, H, KV, D):
    """Decode splits the cached positions between threads: parts of unequal
    length, empty parts (few positions, many threads), heads merged by threads
    that did not compute them."""
    rng = np.random.default_rng(P + H)
    q = rand(rng, 1, H * D, scale=2.0)
    kc, vc = rand(rng, P + 1, KV * D), rand(rng, P + 1, KV * D)
    expected = attention_oracle(q, kc, vc, 1, P, H, KV, D)
    out = np.full((1, H * D), np.nan, F32)
    with lib.num_threads(n_threads):
        lib.call("attention_f32", q, kc, vc, out, 1, P, H, KV, D)
    close(out, expected, rtol=1e-5, atol=1e-5)


def test_attention_decode_peaked_scores_across_parts(lib, threads):
    """One part holds the only keys that matter: the others' weights underflow to 0."""
    P, H, KV, D = 400, 2, 1, 16
    rng = np.random.default_rng(5)
    q = rand(rng, 1, H * D, scale=30.0)
    kc, vc = rand(rng, P + 1, KV * D, scale=0.01), rand(rng, P + 1, KV * D)
    kc[350:360] = rand(rng, 10, KV * D, scale=3.0)
    expected = attention_oracle(q, kc, vc, 1, P, H, KV, D)
    out = np.zeros((1, H * D), F32)
    lib.call("attention_f32", q, kc, vc, out, 1, P, H, KV, D)
    close(out, expected, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("T,P", [(2, 40), (37, 5)])
def test_attention_peaked_scores(lib, T, P):
    """Large score spread: the online softmax must rescale without overflow (prefill
    row blocks: lanes whose keys of a chunk are all masked, or all underflow)."""
    H, KV, D = 2, 1, 16
    rng = np.random.default_rng(3)
    q = rand(rng, T, H * D, scale=30.0)
    kc, vc = rand(rng, P + T, KV * D, scale=3.0), rand(rng, P + T, KV * D)
    expected = attention_oracle(q, kc, vc, T, P, H, KV, D)
    out = np.zeros((T, H * D), F32)
    lib.call("attention_f32", q, kc, vc, out, T, P, H, KV, D)
    close(out, expected, rtol=1e-4, atol=1e-5)


# ------------------------------------------------------------ element-wise

EW_SIZES = [1, 7, 16, 17, 100, 40000]


@pytest.mark.parametrize("n", EW_SIZES)
def test_swiglu(lib, n):
    rng = np.random.default_rng(n)
    g, u = rand(rng, n, scale=4.0), rand(rng, n)
    g[:: max(1, n // 5)] = rng.choice([-120.0, -30.0, 30.0, 95.0], size=g[:: max(1, n // 5)].size)
    gd = g.astype(np.float64)
    expected = gd / (1.0 + np.exp(-gd)) * u
    both(lib, "swiglu_f32", [2], lambda: [g, u, np.zeros(n, F32), n], lambda o: close(o, expected))


@pytest.mark.parametrize("n", EW_SIZES)
def test_gelu_tanh(lib, n):
    rng = np.random.default_rng(n + 1)
    x = rand(rng, n, scale=3.0)
    x[:: max(1, n // 4)] = rng.choice([-60.0, -9.0, 9.0, 60.0], size=x[:: max(1, n // 4)].size)
    xd = x.astype(np.float64)
    expected = 0.5 * xd * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (xd + 0.044715 * xd**3)))
    both(
        lib,
        "gelu_tanh_f32",
        [1],
        lambda: [x, np.zeros(n, F32), n],
        lambda o: close(o, expected, rtol=1e-5, atol=1e-6),
    )


@pytest.mark.parametrize("n", EW_SIZES)
def test_add(lib, n):
    rng = np.random.default_rng(n + 2)
    a, b = rand(rng, n), rand(rng, n)
    expected = a.astype(np.float64) + b
    both(lib, "add_f32", [2], lambda: [a, b, np.zeros(n, F32), n], lambda o: close(o, expected))
    for alias in (0, 1):  # out aliases a, then b
        bufs = [a.copy(), b.copy()]
        lib.call("add_f32", bufs[0], bufs[1], bufs[alias], n)
        close(bufs[alias], expected)


@pytest.mark.parametrize("n", EW_SIZES)
def test_mul(lib, n):
    rng = np.random.default_rng(n + 5)
    a, b = rand(rng, n), rand(rng, n)
    expected = a.astype(np.float64) * b
    both(lib, "mul_f32", [2], lambda: [a, b, np.zeros(n, F32), n], lambda o: close(o, expected))
    for alias in (0, 1):  # out aliases a, then b
        bufs = [a.copy(), b.copy()]
        lib.call("mul_f32", bufs[0], bufs[1], bufs[alias], n)
        close(bufs[alias], expected)


@pytest.mark.parametrize("n", EW_SIZES)
def test_relu(lib, n):
    rng = np.random.default_rng(n + 3)
    x = rand(rng, n)
    expected = np.maximum(x, 0).astype(np.float64)
    both(
        lib,
        "relu_f32",
        [1],
        lambda: [x, np.full(n, np.nan, F32), n],
        lambda o: close(o, expected, rtol=0, atol=0),
    )


@pytest.mark.parametrize("T,cols", [(1, 1), (1, 7), (5, 64), (3, 33), (128, 576)])
def test_copy_last_row(lib, T, cols):
    """out = x[T-1]; rows past T (stale rows of a max-context buffer) are never read and
    nothing past ``cols`` is written."""
    rng = np.random.default_rng(T * 1000 + cols)
    x = np.full((T + 2, cols), np.nan, F32)
    x[:T] = rand(rng, T, cols)
    for fn in (lib.call, lib.ref):
        out = np.full(cols + 1, np.nan, F32)
        fn("copy_last_row_f32", x, out, T, cols)
        np.testing.assert_array_equal(out[:cols], x[T - 1])
        assert np.isnan(out[cols])


# --------------------------------------------------------- softmax / loss


@pytest.mark.parametrize("rows,cols", [(1, 1), (1, 5), (3, 16), (4, 33), (2, 1000), (64, 600)])
def test_softmax(lib, rows, cols):
    rng = np.random.default_rng(rows * cols)
    x = rand(rng, rows, cols, scale=20.0, loc=50.0)
    xd = x.astype(np.float64)
    e = np.exp(xd - xd.max(axis=1, keepdims=True))
    expected = e / e.sum(axis=1, keepdims=True)
    both(
        lib,
        "softmax_f32",
        [1],
        lambda: [x, np.zeros_like(x), rows, cols],
        lambda o: close(o, expected, rtol=1e-5, atol=1e-7),
    )


@pytest.mark.parametrize("T,V", [(1, 1), (1, 7), (4, 50), (3, 1000), (64, 1024)])
def test_cross_entropy(lib, T, V):
    rng = np.random.default_rng(T * V + 9)
    logits = rand(rng, T, V, scale=5.0, loc=10.0)
    targets = rng.integers(0, V, size=T).astype(np.int32)
    ld = logits.astype(np.float64)
    mx = ld.max(axis=1)
    lse = np.log(np.exp(ld - mx[:, None]).sum(axis=1)) + mx
    expected = np.array([np.mean(lse - ld[np.arange(T), targets])])
    both(
        lib,
        "cross_entropy_f32",
        [2],
        lambda: [logits, targets, np.full(1, np.nan, F32), T, V],
        lambda o: close(o, expected, rtol=1e-5, atol=1e-5),
    )


# ---------------------------------------------------------------- threads


def test_thread_count_roundtrip(lib):
    before = lib.get_num_threads()
    try:
        lib.set_num_threads(1)
        assert lib.get_num_threads() == 1
        lib.set_num_threads(2)
        assert lib.get_num_threads() == 2
    finally:
        lib.set_num_threads(before)
