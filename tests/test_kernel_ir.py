"""Kernel IR -> C: every schedule hint changes the code and not the numbers; validation
against NumPy over edge shapes per op; builds per ISA with -Wall -Werror; the CLI."""

from __future__ import annotations

import ctypes
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ckir import kernel_tools as kt
from ckir.backend.kernel_c import KernelCodegenError, emit_module
from ckir.ir_io import parse_module
from ckir.runtime_build import isa_vector_width

MK, KN, MN = (
    "!graph.tensor<[M, K], f32>",
    "!graph.tensor<[K, N], f32>",
    "!graph.tensor<[M, N], f32>",
)

#: one variant per hint, against BASE: each differs from it in exactly that hint
BASE = {
    "tile_m": 4, "tile_n": 24, "tile_k": 8, "vectorize": 8, "unroll": 2, "order": "mnk", "mr": 2,
}  # fmt: skip
VARIANTS = {
    "tile_m": 3,
    "tile_n": 40,
    "tile_k": 5,
    "vectorize": 4,
    "unroll": 3,
    "order": "knm",
    "mr": 3,
}
#: vectorize = 1 (plain scalar C) and the build's full width (unset) are variants too
EXTRA = [{**BASE, "vectorize": 1}, {k: v for k, v in BASE.items() if k != "vectorize"}]

#: ≥ 20 (M, K, N): 1, primes, and non-multiples of every tile of BASE
SHAPES = [
    (1, 1, 1), (1, 7, 1), (2, 3, 5), (3, 17, 13), (5, 31, 7), (7, 1, 11), (8, 24, 8),
    (9, 25, 9), (13, 47, 29), (16, 16, 16), (17, 33, 19), (31, 2, 37), (1, 100, 1),
    (64, 64, 64), (37, 53, 41), (4, 23, 3), (11, 97, 2), (3, 129, 17), (23, 71, 5),
    (29, 8, 31), (2, 255, 3),
]  # fmt: skip


def _schedule(values: dict[str, int | str]) -> str:
    if not values:
        return ""
    body = ", ".join(f"{k} = {v}" for k, v in values.items())
    return f" {{schedule = #kernel.schedule<{body}>}}"


def _func(name: str, op: str, values: dict[str, int | str], *, bias: bool = False,
          act: str | None = None) -> str:  # fmt: skip
    attrs = dict(values)
    sched = _schedule(attrs)
    if act is not None:
        sched = sched[:-1] + f', activation = "{act}"}}' if sched else f' {{activation = "{act}"}}'
    bias_in = '  %z = kernel.input "bias" : !graph.tensor<[N], f32>\n' if bias else ""
    operands = "%a, %b, %z" if bias else "%a, %b"
    types = f"{MK}, {KN}, !graph.tensor<[N], f32>" if bias else f"{MK}, {KN}"
    return (
        f"kernel.func @{name} {{\n"
        f'  %a = kernel.input "A" : {MK}\n  %b = kernel.input "B" : {KN}\n{bias_in}'
        f"  %c = kernel.{op} {operands}{sched} : ({types}) -> {MN}\n"
        f"  kernel.output %c : {MN}\n}}\n"
    )


def _relu_func(name: str, values: dict[str, int | str]) -> str:
    t = "!graph.tensor<[R, N], f32>"
    return (
        f'kernel.func @{name} {{\n  %x = kernel.input "X" : {t}\n'
        f"  %y = kernel.relu %x{_schedule(values)} : ({t}) -> {t}\n  kernel.output %y : {t}\n}}\n"
    )


def _c_body(text: str) -> str:
    """The generated C without the function names (so two funcs compare by their code)."""
    src = emit_module(parse_module(text), 16).source
    return "\n".join(line for line in src.splitlines() if not line.startswith("/*"))


@pytest.fixture(scope="module")
def native_lib(tmp_path_factory: pytest.TempPathFactory) -> tuple[ctypes.CDLL, object]:
    """One library with a matmul_relu func per schedule variant (BASE, VARIANTS, EXTRA)."""
    text = _func("base", "matmul_relu", BASE)
    for hint, value in VARIANTS.items():
        text += _func(f"v_{hint}", "matmul_relu", {**BASE, hint: value})
    for i, values in enumerate(EXTRA):
        text += _func(f"x_{i}", "matmul_relu", values)
    module = parse_module(text)
    lib = kt.build(module, tmp_path_factory.mktemp("kir"), name="variants")
    return ctypes.CDLL(str(lib)), module


@pytest.mark.parametrize("hint", list(VARIANTS))
def test_every_hint_changes_the_c_not_the_numbers(hint: str, native_lib: tuple) -> None:
    base_c = _c_body(_func("f", "matmul_relu", BASE))
    variant_c = _c_body(_func("f", "matmul_relu", {**BASE, hint: VARIANTS[hint]}))
    assert base_c != variant_c, f"{hint} did not change the generated C"
    lib, module = native_lib
    funcs = {f.func_name: f for f in kt.funcs(module)}
    for m, kk, n in [(13, 47, 29), (1, 1, 1), (9, 25, 64)]:
        symbols = {"M": m, "K": kk, "N": n}
        inputs = kt.random_inputs(funcs["base"], symbols, seed=m)
        want = kt.run(lib, funcs["base"], inputs, symbols)[0]
        got = kt.run(lib, funcs[f"v_{hint}"], inputs, symbols)[0]
        np.testing.assert_array_equal(got, want)  # the same bits: same k order, one fma each
        ref = kt.reference(funcs["base"], inputs)[0]
        assert kt.relative_error(got, ref) < 1e-5


RELU_BASE = {"tile_m": 2, "tile_n": 16, "vectorize": 8, "unroll": 2}
RELU_VARIANTS = {"tile_m": 3, "tile_n": 32, "vectorize": 4, "unroll": 4}


@pytest.fixture(scope="module")
def relu_lib(tmp_path_factory: pytest.TempPathFactory) -> tuple[ctypes.CDLL, object]:
    """One library with a relu func per hint variant."""
    text = _relu_func("base", RELU_BASE) + _relu_func("scalar", {**RELU_BASE, "vectorize": 1})
    for hint, value in RELU_VARIANTS.items():
        text += _relu_func(f"v_{hint}", {**RELU_BASE, hint: value})
    module = parse_module(text)
    lib = kt.build(module, tmp_path_factory.mktemp("kir"), name="relus")
    return ctypes.CDLL(str(lib)), module


@pytest.mark.parametrize("hint", list(RELU_VARIANTS))
def test_relu_hints_change_the_c_not_the_numbers(hint: str, relu_lib: tuple) -> None:
    other = {**RELU_BASE, hint: RELU_VARIANTS[hint]}
    assert _c_body(_relu_func("r", RELU_BASE)) != _c_body(_relu_func("r", other))
    lib, module = relu_lib
    funcs = {f.func_name: f for f in kt.funcs(module)}
    for r, n in [(1, 1), (7, 45), (5, 64)]:
        symbols = {"R": r, "N": n}
        x = kt.random_inputs(funcs["base"], symbols, seed=r)
        x[0][0, 0] = -0.0
        want = np.maximum(x[0], 0.0)
        for name in ("base", "scalar", f"v_{hint}"):
            got = kt.run(lib, funcs[name], x, symbols)[0]
            np.testing.assert_array_equal(got, want)


def test_scalar_and_default_width_match_bitwise(native_lib: tuple) -> None:
    lib, module = native_lib
    funcs = {f.func_name: f for f in kt.funcs(module)}
    symbols = {"M": 5, "K": 33, "N": 41}
    inputs = kt.random_inputs(funcs["base"], symbols, seed=3)
    want = kt.run(lib, funcs["base"], inputs, symbols)[0]
    for name in ("x_0", "x_1"):
        np.testing.assert_array_equal(kt.run(lib, funcs[name], inputs, symbols)[0], want)
    assert "KFMA(a0, b0" in _c_body(_func("f", "matmul_relu", EXTRA[0]))  # vectorize 1: scalar
    assert "ckv_load_n(pb + 0 * CKV_W, CKV_W)" in _c_body(_func("f", "matmul_relu", EXTRA[1]))


def test_epilogue_placement_follows_the_order() -> None:
    inner = emit_module(parse_module(_func("f", "matmul_relu", BASE)), 16).source
    outer = emit_module(parse_module(_func("f", "matmul_relu", {**BASE, "order": "kmn"})), 16)
    assert "epilogue of this tile" in inner and "after the nest" not in inner
    assert "after the nest" in outer.source


def _shape_sets(bias: bool = False) -> list[str]:
    out = []
    for m, kk, n in SHAPES:
        text = f"A={m}x{kk},B={kk}x{n}"
        out.append(text + (f",bias={n}" if bias else ""))
    return out


@pytest.mark.parametrize("isa", ["native", "avx2", "scalar"])
def test_validate_every_op_over_edge_shapes(isa: str, tmp_path: Path) -> None:
    if isa == "avx2" and not _cpu_has("avx2", "fma"):
        pytest.skip("this CPU has no AVX2 + FMA")
    text = "".join(
        [
            _func("mm", "matmul", BASE),
            _func("mm_relu", "matmul_relu", BASE),
            _func("lin", "linear", BASE),
        ]
    )
    results = kt.validate(
        parse_module(text), kt.build(parse_module(text), tmp_path, name="ops", isa=isa),
        _shape_sets(), tol=1e-5,
    )  # fmt: skip
    assert len(results) == 3 * len(SHAPES) and len(SHAPES) >= 20
    assert all(r.passed for r in results), [r.line() for r in results if not r.passed]

    text = "".join(_func(f"lin_{a}", "linear", BASE, bias=True, act=a) for a in kt_acts())
    module = parse_module(text)
    results = kt.validate(
        module, kt.build(module, tmp_path, name="lin", isa=isa), _shape_sets(True), tol=1e-5
    )
    assert len(results) == 4 * len(SHAPES)
    assert all(r.passed for r in results), [r.line() for r in results if not r.passed]

    # register blocks as a fast build uses them: the defaults (6 x 2 vectors), tall
    # 14 x 2 and 4 x 4 blocks whose tiles are not multiples of the block
    fast = [{}, {"mr": 14, "unroll": 2, "tile_m": 30, "tile_n": 50, "tile_k": 20},
            {"mr": 4, "unroll": 4, "tile_m": 9, "tile_k": 7, "order": "kmn"}]  # fmt: skip
    text = "".join(_func(f"fast{i}", "matmul", v) for i, v in enumerate(fast))
    module = parse_module(text)
    sets = _shape_sets() + ["A=67x129,B=129x97", "A=100x300,B=300x70"]
    results = kt.validate(module, kt.build(module, tmp_path, name="fast", isa=isa), sets, tol=1e-5)
    assert len(results) == len(fast) * len(sets)
    assert all(r.passed for r in results), [r.line() for r in results if not r.passed]

    module = parse_module(_relu_func("relu", {"tile_m": 3, "tile_n": 20, "vectorize": 8}))
    sets = [f"X={m}x{n}" for m, _, n in SHAPES]
    results = kt.validate(module, kt.build(module, tmp_path, name="relu", isa=isa), sets, tol=0)
    assert all(r.passed for r in results), [r.line() for r in results if not r.passed]


def kt_acts() -> tuple[str, ...]:
    from ckir.dialects.kernel import ACTIVATIONS

    return ACTIVATIONS


def _cpu_has(*flags: str) -> bool:
    try:
        words = set(Path("/proc/cpuinfo").read_text().split())
    except OSError:
        return False
    return all(f in words for f in flags)


def test_vectorize_16_on_avx512_and_refused_on_avx2(tmp_path: Path) -> None:
    text = _func("mm", "matmul", {**BASE, "vectorize": 16})
    with pytest.raises(KernelCodegenError, match="vectorize = 16 needs 16-lane vectors"):
        kt.generate(parse_module(text), "avx2")
    if isa_vector_width("native") < 16:
        pytest.skip("this CPU has no AVX-512: vectorize = 16 cannot be built here")
    module = parse_module(text)
    results = kt.validate(module, kt.build(module, tmp_path, name="v16"), _shape_sets()[:8])
    assert all(r.passed for r in results)


def test_tiles_larger_than_a_constant_dim_are_cut_with_a_note() -> None:
    t = "!graph.tensor<[3, 5], f32>"
    text = (
        f'kernel.func @r {{\n  %x = kernel.input "X" : {t}\n'
        f"  %y = kernel.relu %x {{schedule = #kernel.schedule<tile_m = 8, tile_n = 2, "
        f"vectorize = 4>}} : ({t}) -> {t}\n  kernel.output %y : {t}\n}}\n"
    )
    gen = emit_module(parse_module(text), 16)
    assert any("tile_m = 8 exceeds the dim 3: using 3" in n for n in gen.notes)
    assert any("tile_n = 2 is narrower than vectorize = 4" in n for n in gen.notes)
    assert "r0 += 3" in gen.source and "c0 += 4" in gen.source


def test_chained_ops_use_temporaries(tmp_path: Path) -> None:
    text = (
        f'kernel.func @chain {{\n  %a = kernel.input "A" : {MK}\n  %b = kernel.input "B" : {KN}\n'
        f"  %c = kernel.matmul %a, %b : ({MK}, {KN}) -> {MN}\n"
        f"  %r = kernel.relu %c : ({MN}) -> {MN}\n"
        f"  kernel.output %r, %c, %a : {MN}, {MN}, {MK}\n}}\n"
    )
    path = tmp_path / "chain.mlir"
    path.write_text(text)
    module = kt.load_kernels(path, fuse=True)  # two uses of %c: nothing fuses
    assert "kernel.matmul_relu" not in str(module)
    results = kt.validate(module, kt.build(module, tmp_path, name="chain"), ["A=7x9,B=9x11"])
    assert all(r.passed for r in results)


# --------------------------------------------------------------------------- CLI


def _ckir(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ckir.cli", *args], capture_output=True, text=True, timeout=300
    )


def test_cli_lower_build_validate(tmp_path: Path) -> None:
    graph_ir = (
        f'kernel.func @mm {{\n  %a = kernel.input "A" : {MK}\n  %b = kernel.input "B" : {KN}\n'
        f"  %c = graph.matmul %a, %b {{schedule = #graph.schedule<tile_m = 8, vectorize = 4>}}"
        f" : ({MK}, {KN}) -> {MN}\n  %r = graph.relu %c : ({MN}) -> {MN}\n"
        f"  kernel.output %r : {MN}\n}}\n"
    )
    f = tmp_path / "mm.mlir"
    f.write_text(graph_ir)
    out = _ckir("kernel", "lower", str(f))
    assert out.returncode == 0, out.stderr
    assert "int mm(const float *restrict A, const float *restrict B, float *restrict out0" in (
        out.stdout
    )
    assert "m0 += 8" in out.stdout and "relu epilogue" in out.stdout
    out = _ckir("kernel", "build", str(f), "-o", str(tmp_path / "b"), "--isa", "scalar")
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "b" / "libmm.so").is_file() and (tmp_path / "b" / "mm.c").is_file()
    sets = ["--shape-set", "A=1x1,B=1x1", "--shape-set", "A=13x17,B=17x31"]
    out = _ckir("kernel", "validate", str(f), *sets)
    assert out.returncode == 0, out.stderr
    assert out.stdout.count("pass  @mm") == 2 and "2/2 passed" in out.stdout
    out = _ckir("kernel", "validate", str(f), "--shape-set", "A=13x170,B=170x31", "--tol", "0")
    assert out.returncode == 1 and "FAIL  @mm" in out.stdout  # f32 vs float64: never 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--shape-set", "A=3x4,B=5x6"], "input B dim 0 is 5 but K = 4 from the other sizes"),
        (["--shape-set", "A=3x4,C=4x6"], "no input C (inputs: A, B)"),
        (["--shape-set", "A=3x4x1,B=4x6"], "input A is [M, K] (rank 2) but the set gives 3x4x1"),
        (["--shape-set", "A=3x4,B"], "cannot read 'B'"),
        (["--shape-set", "A=3x4"], "input B has no shape"),
        (["--shape-set", "A=0x4,B=4x1"], "A has a size 0"),
    ],
)
def test_cli_bad_shape_sets(tmp_path: Path, args: list[str], message: str) -> None:
    f = tmp_path / "mm.mlir"
    f.write_text(_func("mm", "matmul", {}))
    out = _ckir("kernel", "validate", str(f), *args)
    assert out.returncode == 1
    assert message in out.stderr and len(out.stderr.strip().splitlines()) == 1
    assert "Traceback" not in out.stderr


def test_cli_bad_ir_and_refused_hint(tmp_path: Path) -> None:
    bad = tmp_path / "bad.mlir"
    bad.write_text('kernel.func @k {\n  %a = kernel.input "A" : !graph.tensor<[M], f32>\n}\n')
    out = _ckir("kernel", "lower", str(bad))
    assert out.returncode == 1
    assert out.stderr.strip() == f"error: {bad}: kernel.func @k: must end with kernel.output"
    typo = tmp_path / "typo.mlir"
    typo.write_text("kernel.func @k {\n  kernel.outpt\n}\n")
    out = _ckir("kernel", "lower", str(typo))
    assert out.returncode == 1 and f"error: {typo}:" in out.stderr and "kernel.outpt" in out.stderr
    assert "Traceback" not in out.stderr
    v16 = tmp_path / "v16.mlir"
    v16.write_text(_func("mm", "matmul", {"vectorize": 16}))
    out = _ckir("kernel", "lower", str(v16), "--isa", "avx2")
    assert out.returncode == 1
    assert out.stderr.startswith(f"error: {v16}: kernel.func @mm: kernel.matmul %c: vectorize")


def test_cli_bench_times_each_schedule_and_checks_it(tmp_path: Path) -> None:
    f = tmp_path / "mm.mlir"
    f.write_text(_func("mm", "matmul_relu", {}))
    scheds = ["ir", "tile_m=8,unroll=2", "vectorize=1,order=kmn"]
    args = [a for s in scheds for a in ("--schedule", s)]
    out = _ckir("kernel", "bench", str(f), "--shape-set", "A=33x65,B=65x17", *args, "--reps", "1")
    assert out.returncode == 0, out.stderr
    assert "fp32 FMA peak, 1 thread, measured now:" in out.stdout
    rows = [line.split() for line in out.stdout.splitlines() if line.startswith("mm ")]
    assert [r[2] for r in rows] == scheds
    for r in rows:
        assert float(r[4]) > 0 and float(r[5]) >= 0 and "WRONG" not in r
    out = _ckir("kernel", "bench", str(f), "--shape-set", "A=3x5,B=5x7", "--schedule", "unroll=0")
    assert out.returncode == 1
    assert out.stderr.strip() == "error: schedule 'unroll=0': unroll = 0 must be positive"


def test_parse_schedule_and_with_schedule() -> None:
    assert kt.parse_schedule("tile_m=8, order=nkm") == {"tile_m": 8, "order": "nkm"}
    with pytest.raises(Exception, match="cannot read 'tile_x=1'"):
        kt.parse_schedule("tile_x=1")
    with pytest.raises(Exception, match="vectorize = 3 must be one of"):
        kt.parse_schedule("vectorize=3")
    text = _func("mm", "matmul", BASE) + _relu_func("r", {})
    copy = kt.with_schedule(parse_module(text), {"tile_k": 4, "unroll": 3}, "_x")
    printed = str(copy)
    assert "kernel.func @mm_x" in printed and "kernel.func @r_x" in printed
    assert "#kernel.schedule<tile_k = 4, unroll = 3>" in printed  # the matmul: both fields
    assert "#kernel.schedule<unroll = 3>" in printed  # the relu: tile_k does not apply


@pytest.mark.parametrize("width", [16, 8])
def test_default_schedule_fits_the_register_file_and_verifies(width: int) -> None:
    from ckir.backend.kernel_c import default_schedule
    from ckir.dialects.kernel import field_problem

    registers = 32 if width == 16 else 16
    for m, n, kk in [(1, 1, 1), (512, 512, 512), (97, 53, 301), (4096, 16, 128), (8, 2048, 4096)]:
        s = default_schedule(m, n, kk, width)
        assert all(field_problem(f, v) is None for f, v in s.items()), s
        mr, unroll = int(s["mr"]), int(s["unroll"])
        assert mr * unroll + unroll + 1 <= registers, s  # accumulators + B vectors + A
        assert int(s["tile_m"]) % mr == 0
    assert default_schedule(64, 8, 64, 16)["unroll"] == 1  # one vector covers N


def test_mr_larger_than_tile_m_is_cut_with_a_note() -> None:
    text = _func("mm", "matmul", {"tile_m": 4, "mr": 6})
    gen = emit_module(parse_module(text), 16)
    assert any("mr = 6 exceeds tile_m = 4: using mr = 4" in n for n in gen.notes)
    assert "enum { MR = 4," in gen.source
