"""The bf16p GEMMs on AMX tiles (runtime/kernels/gemm_amx.c) against NumPy oracles.

Builds with the path (AVX-512 with AVX512-BF16: ``lib.bf16_dot``) run every test
on emulated tiles (``ckir_set_amx(CKIR_AMX_EMULATE)``: the driver, the packing of
x, the tile configuration, tails and epilogue, with each tile instruction done in
C as the SDM defines it), and, where the CPU has AMX-TILE and AMX-BF16, again on
the hardware.  Shapes: M across the 16-row tile and the 32-row block (33, 47, 48,
49, 64, 65), gate_up's row tiles (300 rows) and row ownership (128 with 2 threads), the
per-thread row blocks of a deep K (150 rows at K = 8192); K in pairs around the
16-pair step (K = 2, 30, 32, 34, 62, 66) and model sizes; N around the 32-column
panel.  Outputs start as NaN, so an unwritten element fails; the AMX call counter
must move, so a silent fallback to vdpbf16ps fails too.
"""

from __future__ import annotations

import numpy as np
import pytest
from kernel_lib import AMX_EMULATE, AMX_OFF, AMX_ON, QBLOCK, amx_cpu, pack_block_panels, rand
from test_panel_kernels import nan, pack_bf16p

from ckir import quant

HW = amx_cpu()
MODES = [
    pytest.param(AMX_EMULATE, id="emulated"),
    pytest.param(
        AMX_ON,
        id="hardware",
        marks=pytest.mark.skipif(
            not HW,
            reason="this CPU has no AMX-TILE / AMX-BF16 / AMX-INT8 (/proc/cpuinfo): the tile "
            "instructions run in emulation only here",
        ),
    ),
]


@pytest.fixture(params=MODES)
def amx(request: pytest.FixtureRequest, lib):
    """``lib`` with its AMX mode set to the parameter, restored afterwards."""
    if not lib.bf16_dot:
        pytest.skip(f"the {lib.isa} build has no AMX path: it needs AVX512-BF16")
    before = lib.amx
    mode = lib.set_amx(request.param)
    assert mode == request.param, "ckir_set_amx refused a mode this machine has"
    yield lib
    lib.set_amx(before)


def bf16(a: np.ndarray) -> np.ndarray:
    """a rounded to bf16 (nearest even), as float64: what the tiles multiply."""
    return quant.from_bf16(quant.to_bf16(a)).astype(np.float64)


def close(actual: np.ndarray, expected: np.ndarray) -> None:
    assert not np.isnan(actual).any(), "unwritten (NaN) output elements"
    np.testing.assert_allclose(actual.astype(np.float64), expected, rtol=2e-5, atol=2e-5)


def ran_on_tiles(lib, call) -> None:
    before = lib.amx_calls
    call()
    assert lib.amx_calls > before, "the GEMM did not run on the AMX path"


GEMM_SHAPES = [  # (M, N, K)
    (33, 32, 32),
    (33, 1, 2),
    (47, 31, 30),
    (48, 33, 34),
    (49, 65, 62),
    (64, 64, 66),
    (65, 100, 96),
    (128, 96, 576),
    (40, 70, 600),
]


@pytest.mark.parametrize("bias", [False, True], ids=["nobias", "bias"])
@pytest.mark.parametrize("M,N,K", GEMM_SHAPES)
def test_gemm(amx, threads, M, N, K, bias):
    rng = np.random.default_rng(M * 1000 + N + K)
    x, w = rand(rng, M, K), rand(rng, N, K, scale=K**-0.5)
    b = rand(rng, N, scale=0.5)
    y = nan(M, N)
    name = f"gemm{'_bias' if bias else ''}_bf16p"
    ran_on_tiles(amx, lambda: amx.call(name, x, pack_bf16p(w), *([b] if bias else []), y, M, N, K))
    close(y, bf16(x) @ bf16(w).T + (b if bias else 0.0))


@pytest.mark.parametrize("bias", [False, True], ids=["nobias", "bias"])
@pytest.mark.parametrize("M,K", [(47, 34), (128, 576)])
def test_qkv(amx, threads, M, K, bias):
    rng = np.random.default_rng(M + K + bias)
    ns = (70, 33, 31)
    x = rand(rng, M, K)
    ws = [rand(rng, n, K, scale=K**-0.5) for n in ns]
    bs = [rand(rng, n, scale=0.5) for n in ns] if bias else []
    outs = [nan(M, n) for n in ns]
    name = f"gemm_qkv{'_bias' if bias else ''}_bf16p"
    ran_on_tiles(amx, lambda: amx.call(name, x, *map(pack_bf16p, ws), *bs, *outs, M, *ns, K))
    for i, (o, w) in enumerate(zip(outs, ws, strict=True)):
        close(o, bf16(x) @ bf16(w).T + (bs[i] if bias else 0.0))


@pytest.mark.parametrize("M,N,K", [(40, 100, 64), (128, 300, 576), (300, 64, 96), (150, 64, 8192)])
def test_gate_up(amx, threads, M, N, K):
    """gate_up splits a block of more than 144 rows into row tiles on the 12-row
    grid, off the tiles' 16 (300 rows; 150 a thread with 2); 150 x 8192 runs each
    thread's pack in row blocks."""
    rng = np.random.default_rng(M + N + K)
    x = rand(rng, M, K)
    wg, wu = rand(rng, N, K, scale=K**-0.5), rand(rng, N, K, scale=K**-0.5)
    out = nan(M, N)
    ran_on_tiles(
        amx,
        lambda: amx.call("gemm_gate_up_bf16p", x, pack_bf16p(wg), pack_bf16p(wu), out, M, N, K),
    )
    g, u = bf16(x) @ bf16(wg).T, bf16(x) @ bf16(wu).T
    close(out, g / (1.0 + np.exp(-g)) * u)


def test_results_do_not_depend_on_the_thread_count(amx):
    rng = np.random.default_rng(5)
    M, N, K = 128, 200, 96
    x, wp = rand(rng, M, K), pack_bf16p(rand(rng, N, K))
    before = amx.get_num_threads()
    outs = []
    try:
        for nt in (1, 2):
            amx.set_num_threads(nt)
            y = nan(M, N)
            amx.call("gemm_bf16p", x, wp, y, M, N, K)
            outs.append(y)
    finally:
        amx.set_num_threads(before)
    np.testing.assert_array_equal(outs[0], outs[1])


def test_small_m_and_odd_k_stay_off_the_tiles(amx):
    """M <= 32 streams the weights (gemv kernels); those calls never reach the tiles."""
    rng = np.random.default_rng(6)
    M, N, K = 32, 64, 64
    x, w = rand(rng, M, K), rand(rng, N, K, scale=K**-0.5)
    before = amx.amx_calls
    y = nan(M, N)
    amx.call("gemm_bf16p", x, pack_bf16p(w), y, M, N, K)
    assert amx.amx_calls == before
    close(y, x.astype(np.float64) @ bf16(w).T)


def test_set_amx_reports_the_mode_in_effect(lib):
    before = lib.amx
    try:
        assert lib.set_amx(AMX_OFF) == AMX_OFF and lib.amx == AMX_OFF
        # a CPU whose flags show AMX runs a kernel that grants the tile state
        assert lib.set_amx(AMX_ON) == (AMX_ON if lib.bf16_dot and HW else AMX_OFF)
        emulate = lib.set_amx(AMX_EMULATE)
        assert emulate == (AMX_EMULATE if lib.bf16_dot else AMX_OFF)
        assert lib.amx == emulate
        assert lib.set_amx(7) == AMX_OFF, "an unknown mode must turn AMX off"
    finally:
        lib.set_amx(before)


def test_off_runs_vdpbf16ps(lib):
    """With AMX off the bf16p GEMMs keep their vdpbf16ps path (no AMX call)."""
    if not lib.bf16_dot:
        pytest.skip(f"the {lib.isa} build has no AMX path: it needs AVX512-BF16")
    before_mode = lib.amx
    lib.set_amx(AMX_OFF)
    try:
        rng = np.random.default_rng(9)
        M, N, K = 64, 64, 64
        x, w = rand(rng, M, K), rand(rng, N, K, scale=K**-0.5)
        y = nan(M, N)
        calls = lib.amx_calls
        lib.call("gemm_bf16p", x, pack_bf16p(w), y, M, N, K)
        assert lib.amx_calls == calls
        close(y, bf16(x) @ bf16(w).T)
    finally:
        lib.set_amx(before_mode)


# ---------------------------------------------------------------- q8_0p, q4_1p, q4_0p
# int8 x (quantized per block of 32 as gemv_<p> quantizes it) times Q8_0 / Q4_1 /
# Q4_0 blocks in panels: on the tiles, every row is still gemv_<p>'s bit for bit, so
# the oracle is the vpdpbusd path (AMX off) and gemv_<p> itself.

QP_SHAPES = [  # (M, N, K): 16-row tiles, 32-row groups, the 128-row calls
    (9, 33, 64),
    (16, 32, 32),
    (17, 65, 96),
    (33, 70, 96),
    (130, 100, 320),
    (300, 40, 64),
]


def run_both(amx, call) -> tuple:
    """``call()`` on the tiles (checking that it reached them), then with AMX off."""
    mode = amx.amx
    on = None
    try:
        before = amx.amx_calls
        on = call()
        assert amx.amx_calls > before, "the GEMM did not run on the AMX path"
        amx.set_amx(AMX_OFF)
        off = call()
    finally:
        amx.set_amx(mode)
    return on, off


@pytest.mark.parametrize("qpanels", list(QBLOCK))
@pytest.mark.parametrize("bias", [False, True], ids=["nobias", "bias"])
@pytest.mark.parametrize("M,N,K", QP_SHAPES)
def test_gemm_block_panels(amx, threads, qpanels, M, N, K, bias):
    rng = np.random.default_rng(M * 1000 + N + K)
    x, w = rand(rng, M, K), rand(rng, N, K, scale=K**-0.5)
    b = rand(rng, N, scale=0.5)
    wp = pack_block_panels(w, qpanels)
    name = f"gemm{'_bias' if bias else ''}_{qpanels}"

    def call():
        y = nan(M, N)
        amx.call(name, x, wp, *([b] if bias else []), y, M, N, K)
        return y

    on, off = run_both(amx, call)
    assert not np.isnan(on).any(), "unwritten (NaN) output elements"
    np.testing.assert_array_equal(on, off)
    for m in (0, M // 2, M - 1):  # rows of the first, a middle and the last tile
        one = nan(N)
        amx.call(
            f"gemv{'_bias' if bias else ''}_{qpanels}", x[m], wp, *([b] if bias else []), one, N, K
        )
        np.testing.assert_array_equal(on[m], one)


@pytest.mark.parametrize("qpanels", list(QBLOCK))
@pytest.mark.parametrize("M", [40, 300])
def test_fused_block_panels(amx, threads, qpanels, M):
    rng = np.random.default_rng(M)
    ns, K = (96, 33, 65), 64
    x = rand(rng, M, K)
    wps = [pack_block_panels(rand(rng, n, K, scale=K**-0.5), qpanels) for n in ns]

    def call():
        outs = [nan(M, n) for n in ns]
        amx.call(f"gemm_qkv_{qpanels}", x, *wps, *outs, M, *ns, K)
        gate_up = nan(M, ns[0])
        amx.call(f"gemm_gate_up_{qpanels}", x, wps[0], wps[0], gate_up, M, ns[0], K)
        return [*outs, gate_up]

    on, off = run_both(amx, call)
    for a, b in zip(on, off, strict=True):
        assert not np.isnan(a).any(), "unwritten (NaN) output elements"
        np.testing.assert_array_equal(a, b)
