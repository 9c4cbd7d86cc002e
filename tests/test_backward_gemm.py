"""The linear-layer backward kernels (kernels/backward_gemm.c) against NumPy, per ISA build.

For y = x W^T + b: linear_bwd_input (dx = dy W), linear_bwd_weight (dw = dy^T x)
and bias_bwd (db = column sums of dy).  Each public kernel and its scalar twin
``ckir_ref_*`` run on fresh inputs and are compared with a float64 NumPy oracle,
and with each other; every output is overwritten, so it starts as NaN.  The
shapes cross the register-block edges of every ISA (MR/NR of 12/32, 6/16,
4/8), the cache blocks (96 rows, 256 columns, K slices of 256) and both thread
splits of the driver (output columns; output rows).  A torch autograd check of
``torch.nn.functional.linear`` pins the three kernels' conventions.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from kernel_lib import rand

F32 = np.float32
F64 = np.float64

# (M, N, K): M tokens, N output features, K input features.  The weight gradient's
# product is [N, K] deep M, the input gradient's [M, K] deep N.
SHAPES = [
    (1, 1, 1),
    (2, 5, 17),
    (5, 17, 2),
    (17, 33, 5),
    (33, 2, 65),
    (31, 65, 33),
    (65, 31, 100),
    (100, 257, 5),
    (1, 100, 257),
    (257, 100, 65),
    (257, 257, 33),  # threaded, both products split their output rows
    (33, 257, 257),  # threaded, both split their output columns; N = 257: two K slices of dx
    (257, 1000, 17),  # threaded: dw's 1000 rows split, the packed dy^T at row offsets
    (100, 65, 1000),  # threaded, dx in four column blocks, dw rows of one thread's share
    (33, 600, 400),  # dx: 400 columns in two blocks of 224 and 176
    (17, 1000, 200),  # threaded: dw splits its rows though it has columns enough (dy^T larger)
]


def tol(depth: int) -> dict:
    """tests/test_kernels.py's gemm tolerance for a reduction of `depth` terms."""
    return dict(rtol=1e-5, atol=2e-6 * math.sqrt(depth) * 4)


def close(actual, expected, depth):
    np.testing.assert_allclose(actual.astype(F64), expected, **tol(depth))


def run_both(lib, name, inputs, out_shape, expected, depth):
    """Run `name` and its ref twin into NaN-filled outputs; check both and compare them."""
    outs = []
    for fn in (lib.call, lib.ref):
        out = np.full(out_shape, np.nan, F32)
        fn(name, *inputs[:-1], out, *inputs[-1])
        close(out, expected, depth)
        outs.append(out)
    close(outs[0], outs[1].astype(F64), depth)


@pytest.mark.parametrize("M,N,K", SHAPES)
def test_linear_bwd_input(lib, threads, M, N, K):
    rng = np.random.default_rng(M * 7919 + N * 31 + K)
    dy, w = rand(rng, M, N), rand(rng, N, K)
    expected = dy.astype(F64) @ w.astype(F64)
    run_both(lib, "linear_bwd_input_f32", [dy, w, (M, N, K)], (M, K), expected, N)


@pytest.mark.parametrize("M,N,K", SHAPES)
def test_linear_bwd_weight(lib, threads, M, N, K):
    rng = np.random.default_rng(M * 31 + N * 7 + K)
    dy, x = rand(rng, M, N), rand(rng, M, K)
    expected = dy.astype(F64).T @ x.astype(F64)
    run_both(lib, "linear_bwd_weight_f32", [dy, x, (M, N, K)], (N, K), expected, M)


@pytest.mark.parametrize(
    "M,N",
    [(1, 1), (2, 5), (4, 17), (5, 33), (17, 1024), (33, 1025), (100, 2049), (3, 5000), (129, 4100)],
)
def test_bias_bwd(lib, threads, M, N):
    rng = np.random.default_rng(M * 13 + N)
    dy = rand(rng, M, N, loc=0.5)
    expected = dy.astype(F64).sum(axis=0)
    run_both(lib, "bias_bwd_f32", [dy, (M, N)], (N,), expected, M)


def test_results_do_not_depend_on_the_thread_count(lib):
    """The products split the output, never the sum over M: every thread count
    gives the same bits (docs/runtime.md's guarantee)."""
    rng = np.random.default_rng(5)
    M, N, K = 128, 576, 1000
    dy, w, x = rand(rng, M, N), rand(rng, N, K), rand(rng, M, K)
    results = []
    before = lib.get_num_threads()
    try:
        for n in (1, 2, 3):
            lib.set_num_threads(n)
            dx, dw = np.full((M, K), np.nan, F32), np.full((N, K), np.nan, F32)
            db = np.full(N, np.nan, F32)
            lib.call("linear_bwd_input_f32", dy, w, dx, M, N, K)
            lib.call("linear_bwd_weight_f32", dy, x, dw, M, N, K)
            lib.call("bias_bwd_f32", dy, db, M, N)
            results.append((dx, dw, db))
    finally:
        lib.set_num_threads(before)
    for other in results[1:]:
        for r0, r in zip(results[0], other, strict=True):
            np.testing.assert_array_equal(r, r0)


@pytest.mark.parametrize("M,N,K", [(5, 17, 33), (65, 100, 257)])
def test_against_torch_autograd(lib, threads, M, N, K):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(M + N + K)
    x, w, b, dy = rand(rng, M, K), rand(rng, N, K), rand(rng, N), rand(rng, M, N)
    tx, tw, tb = (torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in (x, w, b))
    torch.nn.functional.linear(tx, tw, tb).backward(torch.tensor(dy, dtype=torch.float64))
    dx, dw, db = np.full((M, K), np.nan, F32), np.full((N, K), np.nan, F32), np.full(N, np.nan, F32)
    lib.call("linear_bwd_input_f32", dy, w, dx, M, N, K)
    lib.call("linear_bwd_weight_f32", dy, x, dw, M, N, K)
    lib.call("bias_bwd_f32", dy, db, M, N)
    close(dx, tx.grad.numpy(), N)
    close(dw, tw.grad.numpy(), M)
    close(db, tb.grad.numpy(), M)
