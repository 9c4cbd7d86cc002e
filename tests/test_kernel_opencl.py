"""Kernel IR -> OpenCL C on PoCL: every schedule hint changes the OpenCL and not the numbers;
validation against NumPy over edge shapes per op; device limits and bad hints give
messages; ``ckir kernel lower|validate|bench --target opencl``.

Tests that run kernels skip (saying why) where no OpenCL device exists."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from test_kernel_ir import (
    BASE,
    RELU_BASE,
    RELU_VARIANTS,
    SHAPES,
    VARIANTS,
    _func,
    _relu_func,
    _shape_sets,
    kt_acts,
)

from ckir import kernel_tools as kt
from ckir.backend.kernel_opencl import DEFAULT_VECTORIZE, emit_module
from ckir.dialects.kernel import LOOP_ORDERS
from ckir.errors import CkirError
from ckir.ir_io import parse_module
from ckir.opencl_runtime import OpenCLProgram, open_device, unavailable_reason

MN = "!graph.tensor<[M, N], f32>"


def _device_or_skip() -> None:
    reason = unavailable_reason()
    if reason is not None:
        pytest.skip(f"OpenCL tests need a device: {reason}")


def _cl_body(text: str) -> str:
    """The generated OpenCL without comments (so two funcs compare by their code)."""
    src = emit_module(parse_module(text)).source
    return "\n".join(line for line in src.splitlines() if not line.lstrip().startswith(("/*", "*")))


@pytest.fixture(scope="module")
def variants() -> tuple[OpenCLProgram, object]:
    """One program with a matmul_relu func per schedule variant, and one per loop order."""
    _device_or_skip()
    text = _func("base", "matmul_relu", BASE)
    for hint, value in VARIANTS.items():
        text += _func(f"v_{hint}", "matmul_relu", {**BASE, hint: value})
    text += _func("x_scalar", "matmul_relu", {**BASE, "vectorize": 1})
    text += _func("x_default", "matmul_relu", {k: v for k, v in BASE.items() if k != "vectorize"})
    for order in LOOP_ORDERS:
        text += _func(f"o_{order}", "matmul_relu", {**BASE, "order": order})
    module = parse_module(text)
    return OpenCLProgram(emit_module(module)), module


@pytest.mark.parametrize("hint", list(VARIANTS))
def test_every_hint_changes_the_opencl_not_the_numbers(
    hint: str, request: pytest.FixtureRequest
) -> None:
    base = _cl_body(_func("f", "matmul_relu", BASE))
    other = _cl_body(_func("f", "matmul_relu", {**BASE, hint: VARIANTS[hint]}))
    assert base != other, f"{hint} did not change the generated OpenCL"
    prog, module = request.getfixturevalue("variants")  # skips without a device
    funcs = {f.func_name: f for f in kt.funcs(module)}
    for m, kk, n in [(13, 47, 29), (1, 1, 1), (9, 25, 64), (5, 17, 41)]:
        symbols = {"M": m, "K": kk, "N": n}
        inputs = kt.random_inputs(funcs["base"], symbols, seed=m)
        want = prog.run("base", inputs, symbols)[0]
        got = prog.run(f"v_{hint}", inputs, symbols)[0]
        np.testing.assert_array_equal(got, want)  # the same bits: same k order, one fma each
        ref = kt.reference(funcs["base"], inputs)[0]
        assert kt.relative_error(got, ref) < 1e-5


def test_every_order_scalar_and_default_width_give_the_same_bits(variants: tuple) -> None:
    prog, module = variants
    funcs = {f.func_name: f for f in kt.funcs(module)}
    names = [f"o_{o}" for o in LOOP_ORDERS] + ["x_scalar", "x_default"]
    for m, kk, n in [(5, 33, 41), (11, 9, 3), (1, 20, 50)]:  # k splits into 1..5 tiles of 8
        symbols = {"M": m, "K": kk, "N": n}
        inputs = kt.random_inputs(funcs["base"], symbols, seed=kk)
        want = prog.run("base", inputs, symbols)[0]
        for name in names:
            np.testing.assert_array_equal(prog.run(name, inputs, symbols)[0], want, err_msg=name)
    scalar = _cl_body(_func("f", "matmul_relu", {**BASE, "vectorize": 1}))
    assert "const float b0 = b[0], b1 = b[1];" in scalar and "fma(a1, b0, acc1_0)" in scalar
    default = _cl_body(
        _func("f", "matmul_relu", {k: v for k, v in BASE.items() if k != "vectorize"})
    )
    assert f"float{DEFAULT_VECTORIZE} acc0_0" in default


def test_order_places_the_k_loop_and_the_epilogue() -> None:
    src = {o: emit_module(parse_module(_func("f", "linear", {**BASE, "order": o}, bias=True,
                                             act="silu"))) for o in LOOP_ORDERS}  # fmt: skip
    for order, gen in src.items():
        (launch,) = gen.funcs[0].launches
        inner = order[2] == "k"
        assert launch.host_loops == ("" if inner else order[: order.index("k") + 1])
        assert ("f_op3_epilogue" in gen.source) == (not inner)
        assert ("the silu epilogue, in registers" in gen.source) == inner
        assert launch.m_dim == (1 if order.index("m") < order.index("n") else 0)
    assert "get_group_id(1) * 4" in src["mnk"].source  # m tiles on NDRange dim 1
    assert "get_group_id(0) * 4" in src["nmk"].source


RELU_SHAPES = [(1, 1), (7, 45), (5, 64), (3, 129)]


@pytest.mark.parametrize("hint", list(RELU_VARIANTS))
def test_relu_hints_change_the_opencl_not_the_numbers(hint: str) -> None:
    other = {**RELU_BASE, hint: RELU_VARIANTS[hint]}
    assert _cl_body(_relu_func("r", RELU_BASE)) != _cl_body(_relu_func("r", other))
    _device_or_skip()
    text = _relu_func("base", RELU_BASE) + _relu_func("scalar", {**RELU_BASE, "vectorize": 1})
    text += _relu_func("v", other)
    module = parse_module(text)
    prog = OpenCLProgram(emit_module(module))
    for r, n in RELU_SHAPES:
        symbols = {"R": r, "N": n}
        x = kt.random_inputs(kt.funcs(module)[0], symbols, seed=r)
        want = np.maximum(x[0], 0.0)
        for name in ("base", "scalar", "v"):
            np.testing.assert_array_equal(prog.run(name, x, symbols)[0], want)


def test_vectorised_loads_with_a_guarded_fallback() -> None:
    src = emit_module(parse_module(_func("f", "matmul", {**BASE, "vectorize": 4}))).source
    assert "if (n >= 4) return vload4(0, p);" in src  # whole vector inside: vload4
    assert "t[l] = l < n ? p[l] : 0.0f;" in src  # at an edge: lane by lane, zeros outside
    assert "ckir_stage4(Bs + i * " in src and "b1 = vload4(1, b);" in src
    assert "acc1_1 = fma(a1, b1, acc1_1);" in src  # mr = 2 rows share each B vector
    assert "barrier(CLK_LOCAL_MEM_FENCE);" in src and "__local float As[" in src
    scalar = emit_module(parse_module(_func("f", "matmul", {**BASE, "vectorize": 1}))).source
    assert "vload" not in scalar and "Bs[i * 24 + j] = (gr < k1 && gc < n1)" in scalar


def test_validate_every_op_over_edge_shapes() -> None:
    _device_or_skip()
    assert len(SHAPES) >= 20
    ops = [("mm", "matmul"), ("mm_relu", "matmul_relu"), ("lin", "linear")]
    text = "".join(_func(name, op, BASE) for name, op in ops)
    text += _func("mm_mr3", "matmul", {**BASE, "mr": 3})  # mr does not divide tile_m = 4
    text += "".join(_func(f"lin_{a}", "linear", BASE, bias=True, act=a) for a in kt_acts())
    text += _relu_func("relu", {"tile_m": 3, "tile_n": 20, "vectorize": 8})
    module = parse_module(text)
    prog = OpenCLProgram(emit_module(module))
    counts: dict[str, int] = {}
    for func in kt.funcs(module):
        name = func.func_name
        if name == "relu":
            sets = [f"X={m}x{n}" for m, _, n in SHAPES]
        else:
            sets = _shape_sets(bias=name.startswith("lin_"))
        for text_set in sets:
            symbols = kt.bind_shapes(func, kt.parse_shape_set(text_set), text_set)
            inputs = kt.random_inputs(func, symbols, seed=len(text_set))
            got = prog.run(name, inputs, symbols)
            want = kt.reference(func, inputs)
            err = kt.relative_error(got[0], want[0])
            assert err <= (0 if name == "relu" else 1e-5), f"@{name} {text_set}: {err:.2e}"
            counts[name] = counts.get(name, 0) + 1
    assert all(c >= 20 for c in counts.values()) and len(counts) == 9


def test_chained_ops_use_temporaries(tmp_path: Path) -> None:
    _device_or_skip()
    mk, kn = "!graph.tensor<[M, K], f32>", "!graph.tensor<[K, N], f32>"
    text = (
        f'kernel.func @chain {{\n  %a = kernel.input "A" : {mk}\n  %b = kernel.input "B" : {kn}\n'
        f"  %c = kernel.matmul %a, %b : ({mk}, {kn}) -> {MN}\n"
        f"  %r = kernel.relu %c : ({MN}) -> {MN}\n"
        f"  kernel.output %r, %c, %a : {MN}, {MN}, {mk}\n}}\n"
    )
    module = parse_module(text)
    prog = OpenCLProgram(emit_module(module))
    func = kt.funcs(module)[0]
    symbols = {"M": 7, "K": 9, "N": 11}
    inputs = kt.random_inputs(func, symbols, 0)
    for got, want in zip(prog.run("chain", inputs, symbols), kt.reference(func, inputs),
                         strict=True):  # fmt: skip
        assert kt.relative_error(got, want) < 1e-5


def test_mr_rows_per_work_item_pad_a_tile_they_do_not_divide() -> None:
    gen = emit_module(parse_module(_func("f", "matmul", {**BASE, "tile_m": 5, "mr": 2})))
    assert any("tile_m = 5 is not a multiple of mr = 2: each work-group computes 1 padded"
               in n for n in gen.notes)  # fmt: skip
    (launch,) = gen.funcs[0].launches
    assert launch.local == (2, 3)  # 24 / (8 * 2) x ceil(5 / 2)
    assert "__local float As[48];" in gen.source  # 6 rows (one of zeros) x tile_k = 8
    assert "const long row = m0 + ly * 2;" in gen.source
    assert "if (row + 1 >= m1) return;" in gen.source
    unset = emit_module(parse_module(_func("f", "matmul", {"tile_m": 6, "tile_n": 16})))
    assert unset.funcs[0].launches[0].schedule.mr == 3 and not unset.notes  # divides 6


def test_tiles_larger_than_a_constant_dim_are_cut_with_the_c_targets_note() -> None:
    t = "!graph.tensor<[3, 5], f32>"
    text = (
        f'kernel.func @r {{\n  %x = kernel.input "X" : {t}\n'
        f"  %y = kernel.relu %x {{schedule = #kernel.schedule<tile_m = 8, tile_n = 2, "
        f"vectorize = 4>}} : ({t}) -> {t}\n  kernel.output %y : {t}\n}}\n"
    )
    gen = emit_module(parse_module(text))
    assert any("tile_m = 8 exceeds the dim 3: using 3" in n for n in gen.notes)
    assert any("tile_n = 2 is narrower than vectorize = 4" in n for n in gen.notes)
    assert "reqd_work_group_size(1, 3, 1)" in gen.source and "get_group_id(0) * 4" in gen.source
    assert "/* note: kernel.func @r: kernel.relu %y: tile_m = 8 exceeds" in gen.source


def test_schedules_past_the_device_limits_are_refused() -> None:
    _device_or_skip()
    dev = open_device().device
    wide = _func("mm", "matmul", {"tile_m": 4096, "tile_n": 64, "vectorize": 1, "unroll": 1})
    with pytest.raises(CkirError, match=r"kernel.func @mm: kernel.matmul %c: 64 x 1024 = 65536 "
                       r"work-items per work-group .* use smaller tiles"):  # fmt: skip
        OpenCLProgram(emit_module(parse_module(wide)), "w.mlir")
    big = {"tile_m": 1, "tile_n": 4096, "tile_k": 4096, "vectorize": 16, "unroll": 16}
    need = 4 * (1 * 4096 + 4096 * 4096)
    if need <= dev.local_mem_size:
        pytest.skip(f"the device has {dev.local_mem_size} bytes of local memory")
    with pytest.raises(CkirError, match=f"the tiles need {need} bytes of local memory"):
        OpenCLProgram(emit_module(parse_module(_func("mm", "matmul", big))), "w.mlir")


# --------------------------------------------------------------------------- CLI


def _ckir(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ckir.cli", *args],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )


def test_cli_lower_opencl_needs_no_device_and_refuses_bad_hints(tmp_path: Path) -> None:
    f = tmp_path / "mm.mlir"
    f.write_text(_func("mm", "matmul_relu", {"tile_m": 8, "vectorize": 4}))
    env = {**os.environ, "OCL_ICD_VENDORS": str(tmp_path / "none")}
    out = _ckir("kernel", "lower", str(f), "--target", "opencl", env=env)
    assert out.returncode == 0, out.stderr
    assert "__kernel __attribute__((reqd_work_group_size(" in out.stdout
    assert "void mm_op2(__global const float *restrict A" in out.stdout
    bad = tmp_path / "bad.mlir"
    bad.write_text(_func("mm", "matmul", {"vectorize": 3}))
    out = _ckir("kernel", "lower", str(bad), "--target", "opencl")
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert "vectorize = 3 must be one of 1, 2, 4, 8, 16" in out.stderr
    assert out.stderr.startswith(f"error: {bad}") and len(out.stderr.strip().splitlines()) == 1
    out = _ckir("kernel", "bench", str(f), "--target", "opencl", "--shape-set", "A=3x5,B=5x7",
                "--schedule", "order=mmk")  # fmt: skip
    assert out.returncode == 1
    assert "order = mmk must be a permutation of m, n, k" in out.stderr
    assert "Traceback" not in out.stderr


def test_cli_without_an_opencl_platform_says_so(tmp_path: Path) -> None:
    f = tmp_path / "mm.mlir"
    f.write_text(_func("mm", "matmul", {}))
    env = {**os.environ, "OCL_ICD_VENDORS": str(tmp_path / "none")}
    for cmd in ("validate", "bench"):
        out = _ckir("kernel", cmd, str(f), "--target", "opencl", "--shape-set", "A=2x3,B=3x4",
                    env=env)  # fmt: skip
        assert out.returncode == 1
        assert out.stderr.startswith("error: no OpenCL") and "Traceback" not in out.stderr
        assert len(out.stderr.strip().splitlines()) == 1


def test_cli_validate_and_bench_opencl(tmp_path: Path) -> None:
    _device_or_skip()
    f = tmp_path / "mm.mlir"
    f.write_text(_func("mm", "matmul_relu", {"tile_m": 8, "tile_n": 32, "vectorize": 4}))
    sets = ["--shape-set", "A=1x1,B=1x1", "--shape-set", "A=13x17,B=17x31"]
    out = _ckir("kernel", "validate", str(f), "--target", "opencl", *sets)
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("pass  @mm") == 2 and "2/2 passed" in out.stdout
    out = _ckir("kernel", "validate", str(f), "--target", "opencl", "--shape-set",
                "A=13x170,B=170x31", "--tol", "0")  # fmt: skip
    assert out.returncode == 1 and "FAIL  @mm" in out.stdout  # f32 vs float64: never 0
    scheds = ["ir", "tile_m=4,unroll=2", "vectorize=1,order=kmn"]
    args = [a for s in scheds for a in ("--schedule", s)]
    out = _ckir("kernel", "bench", str(f), "--target", "opencl", "--shape-set", "A=33x65,B=65x17",
                *args, "--reps", "1")  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "OpenCL device:" in out.stdout and "baseline: NumPy matmul, 1 thread:" in out.stdout
    rows = [line.split() for line in out.stdout.splitlines() if line.startswith("mm ")]
    assert [r[2] for r in rows] == scheds
    for r in rows:
        assert float(r[4]) > 0 and float(r[5]) > 0 and float(r[6]) > 0 and "WRONG" not in r
