"""Row ownership: prefill kernels that split rows as the row kernels do
(ckir_own_rows in runtime/kernels/ckir_internal.h) compute every element as
one thread does.

For each ISA build: the GEMMs that split M by ownership (f32p, bf16p, q8_0p /
q4_1p on int8 x, the fused qkv and gate_up of those), the ones next to them
that pack their weights at every call and so split N (f32, q8_0p / q4_1p on
fp32 x, bf16p widened on AVX2) and prefill attention (each thread its own
rows first, then the others' leftovers) give
the same bits at 1, 2 and 3 threads, on row counts that split unevenly
(M = 97 at 2 threads, 150 at 3: rows 50 each, not whole register tiles) and on
one below the split (M = 40).  Outputs start as NaN, so a row no thread
computed fails; the 1-thread results are checked against NumPy elsewhere
(test_kernels, test_panel_kernels, test_fused_kernels).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
from kernel_lib import pack_block_panels, rand
from test_panel_kernels import pack_bf16p, pack_f32p

F32 = np.float32
THREADS = (1, 2, 3)
ROWS = (40, 97, 150)


def nan(*shape: int) -> np.ndarray:
    return np.full(shape, np.nan, F32)


def same_at_every_thread_count(lib, run: Callable[[], list[np.ndarray]]) -> None:
    before = lib.get_num_threads()
    results = []
    try:
        for n in THREADS:
            lib.set_num_threads(n)
            results.append(run())
    finally:
        lib.set_num_threads(before)
    for out in results[0]:
        assert not np.isnan(out).any(), "unwritten (NaN) output elements"
    for n, other in zip(THREADS[1:], results[1:], strict=True):
        for a, b in zip(results[0], other, strict=True):
            np.testing.assert_array_equal(b, a, err_msg=f"{n} threads")


WEIGHTS = {
    "f32": lambda w: w,
    "f32p": pack_f32p,
    "bf16p": pack_bf16p,
    "q8_0p": lambda w: pack_block_panels(w, "q8_0p"),
    "q4_1p": lambda w: pack_block_panels(w, "q4_1p"),
    "q4_0p": lambda w: pack_block_panels(w, "q4_0p"),
}


GEMMS = [(d, "fp32") for d in WEIGHTS] + [(d, "int8") for d in ("q8_0p", "q4_1p", "q4_0p")]


@pytest.mark.parametrize("M", ROWS)
@pytest.mark.parametrize("dtype,x_kind", GEMMS, ids=lambda v: v)
def test_gemm(lib, dtype, x_kind, M):
    """x_kind: the x of q8_0p / q4_1p (int8 where the build has the int8 GEMM)."""
    if x_kind == "int8" and not lib.qp_int8:
        pytest.skip(f"the {lib.isa} build has no int8 GEMM")
    N, K = 300, 576
    rng = np.random.default_rng(M + N)
    x = rand(rng, M, K)
    w = WEIGHTS[dtype](rand(rng, N, K, scale=K**-0.5))
    b = rand(rng, N, scale=0.5)

    def run() -> list[np.ndarray]:
        y, yb = nan(M, N), nan(M, N)
        lib.call(f"gemm_{dtype}", x, w, y, M, N, K)
        if dtype == "f32":
            lib.call("gemm_bias_f32", x, w, b, yb, M, N, K)
        else:
            yb = y
        return [y, yb]

    lib.qp_fp32_x(x_kind == "fp32")
    try:
        same_at_every_thread_count(lib, run)
    finally:
        lib.qp_fp32_x(False)


@pytest.mark.parametrize("M", ROWS)
@pytest.mark.parametrize("dtype", ["f32", "bf16p", "q8_0p"])
def test_fused(lib, dtype, M):
    K, Ns = 576, (576, 192, 192)
    rng = np.random.default_rng(M)
    x = rand(rng, M, K)
    ws = [WEIGHTS[dtype](rand(rng, n, K, scale=K**-0.5)) for n in Ns]
    wg, wu = (WEIGHTS[dtype](rand(rng, 400, K, scale=K**-0.5)) for _ in range(2))

    def run() -> list[np.ndarray]:
        qkv = [nan(M, n) for n in Ns]
        lib.call(f"gemm_qkv_{dtype}", x, *ws, *qkv, M, *Ns, K)
        gu = nan(M, 400)
        lib.call(f"gemm_gate_up_{dtype}", x, wg, wu, gu, M, 400, K)
        return [*qkv, gu]

    same_at_every_thread_count(lib, run)


@pytest.mark.parametrize("T,P", [(150, 0), (97, 13), (40, 0)])
@pytest.mark.parametrize("H,KV,D", [(9, 3, 64), (4, 4, 24)])
def test_attention_prefill(lib, T, P, H, KV, D):
    rng = np.random.default_rng(T + P + H)
    q = rand(rng, T, H * D, scale=2.0)
    kc, vc = rand(rng, P + T, KV * D), rand(rng, P + T, KV * D)

    def run() -> list[np.ndarray]:
        out = nan(T, H * D)
        lib.call("attention_f32", q, kc, vc, out, T, P, H, KV, D)
        return [out]

    same_at_every_thread_count(lib, run)
