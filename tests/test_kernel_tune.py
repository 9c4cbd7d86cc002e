"""The kernel cache (hits, misses, damaged entries), tuning records (merge, apply) and
``ckir kernel tune`` (budget, NumPy check before timing, the search itself)."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from ckir import kernel_cache as kc
from ckir import kernel_records as kr
from ckir import kernel_tools as kt
from ckir import kernel_tune as ktu
from ckir.backend import kernel_c
from ckir.dialects import kernel as k
from ckir.errors import CkirError
from ckir.ir_io import parse_module
from ckir.ir_json import dumps
from ckir.runtime_build import isa_vector_width

MK, KN, MN = (
    "!graph.tensor<[M, K], f32>",
    "!graph.tensor<[K, N], f32>",
    "!graph.tensor<[M, N], f32>",
)


def _mm(name: str = "mm", a: str = "A", b: str = "B", sched: str = "tile_m = 16, unroll = 2",
        ssa: tuple[str, str, str] = ("a", "b", "c")) -> str:  # fmt: skip
    x, y, z = ssa
    attr = f" {{schedule = #kernel.schedule<{sched}>}}" if sched else ""
    return (
        f'kernel.func @{name} {{\n  %{x} = kernel.input "{a}" : {MK}\n'
        f'  %{y} = kernel.input "{b}" : {KN}\n'
        f"  %{z} = kernel.matmul_relu %{x}, %{y}{attr} : ({MK}, {KN}) -> {MN}\n"
        f"  kernel.output %{z} : {MN}\n}}\n"
    )


def _module(text: str):  # noqa: ANN202 - an xDSL ModuleOp
    return kt.prepare_kernels(parse_module(text), "<test>")


# --------------------------------------------------------------------------- cache


def test_second_build_hits_and_the_library_works(tmp_path: Path) -> None:
    module = _module(_mm())
    with kc.KernelCache.open(tmp_path) as cache:
        first = cache.build(module)
        second = cache.build(_module(_mm()))
    assert not first.hit and second.hit and first.key == second.key
    assert second.library == first.library and second.library.parent.parent == tmp_path
    header = json.loads((second.library.parent / "entry.json").read_text())
    assert header["format"] == "ckir-kernel-cache" and header["key"] == first.key
    for part in ("ir", "dtype", "shape_bucket", "target", "device", "isa", "compiler", "source"):
        assert header["parts"][part], part
    assert header["parts"]["dtype"] == "f32" and header["parts"]["target"] == "c"
    [r] = kt.validate(module, second.library, ["A=7x5,B=5x3"])
    assert r.passed


def test_renaming_every_tensor_is_a_hit_and_json_too(tmp_path: Path) -> None:
    with kc.KernelCache.open(tmp_path) as cache:
        first = cache.build(_module(_mm()))
        renamed = _module(_mm(a="lhs", b="rhs", ssa=("p", "q", "out")))
        again = cache.build(renamed)
        from_json = cache.build(kt.prepare_kernels(parse_module(_mm()), "j"))
    assert again.hit and again.key == first.key and from_json.hit
    assert "const float *restrict lhs" in again.source  # the source given back has its names
    # the library serves the renamed kernel (parameters are positional)
    [r] = kt.validate(renamed, again.library, ["lhs=4x9,rhs=9x17"])
    assert r.passed


def test_ir_json_file_is_the_same_kernel(tmp_path: Path) -> None:
    text_file = tmp_path / "mm.mlir"
    text_file.write_text(_mm())
    json_file = tmp_path / "mm.json"
    json_file.write_text(dumps(parse_module(_mm())))
    a, b = kt.load_kernels(text_file), kt.load_kernels(json_file)
    assert kc.key_parts(a, "native")["key"] == kc.key_parts(b, "native")["key"]


@pytest.mark.parametrize(
    "other",
    [
        _mm(sched="tile_m = 8, unroll = 2"),  # one hint changed
        _mm(sched="tile_m = 16, unroll = 2, order = nmk"),  # one hint added
        _mm(sched=""),  # schedule removed
        _mm(name="mm2"),  # another exported symbol
    ],
)
def test_changing_a_hint_or_the_entry_point_is_a_miss(tmp_path: Path, other: str) -> None:
    base = kc.key_parts(_module(_mm()), "native")
    changed = kc.key_parts(_module(other), "native")
    assert base["key"] != changed["key"]


def test_the_key_covers_isa_and_compiler(monkeypatch: pytest.MonkeyPatch) -> None:
    module = _module(_mm(sched="tile_m = 16, vectorize = 8"))
    native = kc.key_parts(module, "native")
    assert kc.key_parts(module, "scalar")["key"] != native["key"]
    monkeypatch.setattr(kc, "compiler_version", lambda: "cc 0.0 (another compiler)")
    other = kc.key_parts(module, "native")
    assert other["key"] != native["key"] and other["compiler"] == "cc 0.0 (another compiler)"


def _corrupt_library(entry: Path) -> None:
    lib = entry / "libkernel.so"
    data = bytearray(lib.read_bytes())
    data[len(data) // 2] ^= 0xFF
    lib.write_bytes(bytes(data))


def _corrupt_header(entry: Path) -> None:
    (entry / "entry.json").write_text('{"format": "ckir-kernel-cache", "vers')


def _mismatching_header(entry: Path) -> None:
    header = json.loads((entry / "entry.json").read_text())
    header["parts"]["compiler"] = "some other compiler"
    (entry / "entry.json").write_text(json.dumps(header))


def _truncated_library(entry: Path) -> None:
    (entry / "libkernel.so").write_bytes(b"")


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (_corrupt_library, "content differs from the recorded SHA-256"),
        (_corrupt_header, "entry.json: not JSON"),
        (_mismatching_header, "key parts differ (compiler)"),
        (_truncated_library, "libkernel.so: 0 bytes"),
    ],
)
def test_a_damaged_entry_is_rebuilt_with_a_note(tmp_path: Path, damage, reason: str) -> None:  # noqa: ANN001
    module = _module(_mm())
    notes: list[str] = []
    with kc.KernelCache.open(tmp_path, on_note=notes.append) as cache:
        first = cache.build(module)
        damage(first.library.parent)
        again = cache.build(module)
    assert not again.hit and again.key == first.key
    assert len(notes) == 1 and reason in notes[0] and "rebuilding" in notes[0], notes
    assert kc.entry_problem(again.library.parent, kc.key_parts(module, "native")) is None
    [r] = kt.validate(module, again.library, ["A=3x31,B=31x18"])
    assert r.passed


def test_no_cache_builds_in_a_temporary_folder(tmp_path: Path) -> None:
    with kc.KernelCache.open(tmp_path / "c", disabled=True) as cache:
        built = cache.build(_module(_mm()))
        assert built.library.is_file() and not built.hit
    assert not built.library.exists() and not (tmp_path / "c").exists()


def _ckir(*args: str, env_cache: Path | None = None) -> subprocess.CompletedProcess[str]:
    import os

    env = dict(os.environ)
    if env_cache is not None:
        env["CKIR_CACHE_DIR"] = str(env_cache)
    return subprocess.run(
        [sys.executable, "-m", "ckir.cli", *args],
        capture_output=True, text=True, timeout=600, env=env,
    )  # fmt: skip


def test_cli_build_validate_bench_share_the_cache(tmp_path: Path) -> None:
    f = tmp_path / "mm.mlir"
    f.write_text(_mm())
    cache = tmp_path / "env-cache"
    out = _ckir("kernel", "build", str(f), "-o", str(tmp_path / "b"), env_cache=cache)
    assert out.returncode == 0, out.stderr
    assert "kernel cache: miss, compiled" in out.stderr and (tmp_path / "b" / "libmm.so").is_file()
    assert (tmp_path / "b" / "mm.c").read_text().startswith("/*")
    assert len(list((cache / "kernels").iterdir())) == 1  # $CKIR_CACHE_DIR/kernels
    out = _ckir("kernel", "validate", str(f), "--shape-set", "A=5x7,B=7x9", env_cache=cache)
    assert out.returncode == 0 and "kernel cache: hit" in out.stderr, out.stderr
    g = tmp_path / "renamed.mlir"
    g.write_text(_mm(a="X", b="Y", ssa=("u", "v", "w")))
    other = tmp_path / "opt-cache"
    out = _ckir("kernel", "build", str(g), "-o", str(tmp_path / "b2"), "--cache-dir", str(other))
    assert out.returncode == 0 and "miss" in out.stderr, out.stderr
    out = _ckir("kernel", "build", str(f), "-o", str(tmp_path / "b3"), "--cache-dir", str(other))
    assert out.returncode == 0 and "kernel cache: hit" in out.stderr, out.stderr
    out = _ckir("kernel", "build", str(f), "-o", str(tmp_path / "b4"), "--no-cache")
    assert out.returncode == 0 and "kernel cache" not in out.stderr, out.stderr
    out = _ckir(
        "kernel", "validate", str(f), "--shape-set", "A=5x7,B=7x9", "--cache-dir", "/proc/x"
    )
    assert out.returncode == 1 and out.stderr.startswith("error: kernel cache /proc/x: cannot use")


# --------------------------------------------------------------------------- records


def _record(**fields: object) -> dict[str, object]:
    base = {
        "key": "k1", "bucket": "K=8,M=8,N=8", "target": "c", "device": "cpu", "isa": "native",
        "vector_width": 16, "compiler": "cc 1", "schedule": {"tile_m": 8}, "gflops": 1.0,
        "trials": 3, "date": "2026-01-01T00:00:00Z",
    }  # fmt: skip
    return {**base, **fields}


def test_merge_keeps_the_best_per_identity_deterministically(tmp_path: Path) -> None:
    a = [_record(gflops=2.0), _record(bucket="K=16,M=8,N=8", gflops=1.0), _record(key="k0")]
    b = [_record(gflops=3.0, schedule={"tile_m": 4}), _record(isa="avx2", vector_width=8)]
    merged = kr.merge_records([*a, *b])
    assert len(merged) == 4
    best = [
        r
        for r in merged
        if r["key"] == "k1" and r["isa"] == "native" and r["bucket"] == "K=8,M=8,N=8"
    ]
    assert best == [b[0]]
    assert kr.merge_records([*b, *reversed(a)]) == merged  # any order, same result
    pa, pb = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    kr.write_records(pa, a)
    kr.write_records(pb, b)
    out1, out2 = tmp_path / "c1.jsonl", tmp_path / "c2.jsonl"
    for x, y, out in ((pa, pb, out1), (pb, pa, out2)):
        proc = _ckir("kernel", "tune", "--merge", str(x), str(y), "-o", str(out))
        assert proc.returncode == 0, proc.stderr
    assert out1.read_bytes() == out2.read_bytes()
    assert [json.loads(line) for line in out1.read_text().splitlines()] == merged
    tie = kr.merge_records([_record(schedule={"tile_m": 4}), _record(schedule={"tile_m": 2})])
    assert tie == kr.merge_records(list(reversed(tie + [_record(schedule={"tile_m": 4})])))


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", "r.jsonl:2: not JSON"),
        ('{"key": "k"}', "r.jsonl:2: the record has no 'bucket'"),
        (json.dumps(_record(gflops="fast")), "r.jsonl:2: 'gflops' has the wrong type"),
        (json.dumps(_record(schedule={"unroll": 99})), "unroll = 99 must be at most 16"),
    ],
)
def test_bad_records_name_file_and_line(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text(json.dumps(_record()) + "\n" + line + "\n")
    with pytest.raises(CkirError, match=message.replace("(", r"\(").replace(")", r"\)")):
        kr.read_records(path)


def test_records_apply_to_renamed_kernels_per_bucket(tmp_path: Path) -> None:
    module = _module(_mm())
    [func] = kt.funcs(module)
    machine = kr.Machine("native")
    recs = [
        machine.record(key=kr.func_key(func), bucket="K=8,M=8,N=8", schedule={"tile_m": 3},
                       gflops=1.0, trials=1),
        machine.record(key=kr.func_key(func), bucket="K=64,M=64,N=64",
                       schedule={"tile_m": 5, "order": "nmk"}, gflops=1.0, trials=1),
    ]  # fmt: skip
    path = tmp_path / "r.jsonl"
    kr.write_records(path, recs)
    renamed = _module(_mm(name="other", a="P", b="Q", sched=""))
    tuned = kr.apply_records(renamed, path, ["P=50x33,Q=33x64"], "native", "x.mlir")
    [op] = [o for o in kt.funcs(tuned)[0].body_block.ops if isinstance(o, k.KernelComputeOp)]
    assert op.schedule_values() == {"tile_m": 5, "order": "nmk"}
    with pytest.raises(CkirError, match="records for the buckets .*: give --shape-set"):
        kr.apply_records(renamed, path, None, "native", "x.mlir")
    with pytest.raises(CkirError, match=r"x.mlir: kernel.func @other: no record in .* for this"):
        kr.apply_records(renamed, path, ["P=500x33,Q=33x64"], "native", "x.mlir")
    assert kr.shape_bucket({"M": 97, "N": 1, "K": 64}) == "K=64,M=128,N=1"
    assert kr.shape_bucket({}) == "static"


# --------------------------------------------------------------------------- tune


def test_schedule_space_comes_from_the_dialect() -> None:
    relu = _module(
        'kernel.func @r {\n  %x = kernel.input "X" : !graph.tensor<[R, C], f32>\n'
        "  %y = kernel.relu %x : (!graph.tensor<[R, C], f32>) -> !graph.tensor<[R, C], f32>\n"
        "  kernel.output %y : !graph.tensor<[R, C], f32>\n}\n"
    )
    space = ktu.schedule_space(kt.funcs(relu)[0], "native", [5, 300])
    assert set(space) == set(k.ReluOp.SCHEDULE_APPLIES)
    assert max(space["tile_n"]) == 512 and max(space["vectorize"]) == isa_vector_width("native")
    mm = ktu.schedule_space(kt.funcs(_module(_mm()))[0], "avx2", [9, 9, 9])
    assert list(mm) == list(k.SCHEDULE_FIELDS) and mm["order"] == list(k.LOOP_ORDERS)
    assert max(mm["vectorize"]) == 8 and max(mm["unroll"]) == k.MAX_UNROLL
    assert all(k.field_problem(f, v) is None for f, vs in mm.items() for v in vs)


def test_tune_records_the_best_within_the_budget(tmp_path: Path) -> None:
    module = _module(_mm())
    log: list[str] = []
    with kc.KernelCache.open(tmp_path) as cache:
        [rec] = ktu.tune_module(
            module, ["A=33x40,B=40x21"], isa="native", cache=cache, trials=6, rounds=3,
            log=log.append,
        )  # fmt: skip
    assert rec["trials"] <= 6 and rec["func"] == "mm" and rec["bucket"] == "K=64,M=64,N=32"
    assert rec["gflops"] > 0 and rec["baseline_gflops"] > 0
    width = isa_vector_width("native")
    start = {f: width if v is None else v for f, v in kernel_c.DEFAULTS["matmul"].items()}
    start.update(tile_m=16, unroll=2)  # the IR's schedule over the C generator's defaults
    assert log[0] == f"@mm A=33x40,B=40x21: start {kr.schedule_text(start)}"
    assert sum("GFLOP/s" in line for line in log) == rec["trials"]
    tuned = kr.apply_records(module, _write([rec], tmp_path), ["A=33x40,B=40x21"], "native", "")
    [r] = kt.validate(tuned, kt.build(tuned, tmp_path / "t", name="t"), ["A=33x40,B=40x21"])
    assert r.passed


def _write(records: list[dict[str, object]], tmp_path: Path) -> Path:
    path = tmp_path / "r.jsonl"
    kr.write_records(path, records)
    return path


def test_wrong_candidates_are_rejected_before_timing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_run = kt.run
    calls = {"n": 0}

    def run(lib, func, inputs, symbols):  # noqa: ANN001, ANN202
        calls["n"] += 1
        out = real_run(lib, func, inputs, symbols)
        return out if calls["n"] == 1 else [o + 1.0 for o in out]  # only the start is right

    monkeypatch.setattr(kt, "run", run)
    timed: list[object] = []
    monkeypatch.setattr(ktu._Tuner, "paired", lambda self, a, b, n: timed.append(b) or (1, 1, 1))
    log: list[str] = []
    with kc.KernelCache.open(tmp_path) as cache:
        result = ktu.tune_func(
            kt.funcs(_module(_mm()))[0], "A=9x10,B=10x11", isa="native", cache=cache, trials=5,
            rounds=3, seed=0, tol=1e-4, where="", log=log.append, min_seconds=0.001,
        )  # fmt: skip
    assert result.trials == 5 and result.rejected == 5 and result.best == result.start
    assert sum("WRONG" in line for line in log) == 5
    assert len(timed) == 1  # only the final measurement of the start against itself


def test_the_search_descends_a_cost_model(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With timing replaced by a cost model, the search (not random) finds its optimum."""

    def cost(v: dict[str, int | str]) -> float:
        return (
            abs(math.log2(int(v["tile_m"]) / 4)) + abs(math.log2(int(v["tile_n"]) / 64))
            + abs(math.log2(int(v["tile_k"]) / 32)) + (v["order"] != "nkm")
            + abs(int(v["unroll"]) - 3) + (int(v["vectorize"]) != 8)
        )  # fmt: skip

    def compare(self, inc_values, inc, values, call, calls):  # noqa: ANN001, ANN202
        return (1 + cost(values)) / (1 + cost(inc_values)), 1.0

    monkeypatch.setattr(ktu._Tuner, "compare", compare)
    with kc.KernelCache.open(tmp_path) as cache:
        result = ktu.tune_func(
            kt.funcs(_module(_mm()))[0], "A=64x64,B=64x64", isa="avx2", cache=cache, trials=50,
            rounds=1, seed=0, tol=1e-4, where="", log=lambda s: None, min_seconds=0.001,
        )  # fmt: skip
    assert cost(result.best) == 0, result.best
    assert result.trials <= 50


def test_cli_tune_then_build_and_bench_with_records(tmp_path: Path) -> None:
    f = tmp_path / "mm.json"
    f.write_text(dumps(parse_module(_mm())))  # tune reads IR JSON too
    rec = tmp_path / "r.jsonl"
    cache = ["--cache-dir", str(tmp_path / "c")]
    shapes = ["--shape-set", "A=20x30,B=30x40"]
    out = _ckir("kernel", "tune", str(f), *shapes, "--trials", "4", "--rounds", "3", "-o",
                str(rec), *cache)  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "@mm  A=20x30,B=30x40  best " in out.stdout and "after 4 trials" in out.stdout
    [line] = rec.read_text().splitlines()
    record = json.loads(line)
    assert record["trials"] == 4 and record["target"] == "c"
    out = _ckir("kernel", "build", str(f), "--records", str(rec), "-o", str(tmp_path / "b"), *cache)
    assert out.returncode == 0, out.stderr
    out = _ckir("kernel", "bench", str(f), *shapes, "--records", str(rec), "--reps", "1", *cache)
    assert out.returncode == 0, out.stderr
    assert "tuned:" + kr.schedule_text(record["schedule"]) in out.stdout
    assert "WRONG" not in out.stdout
    out = _ckir("kernel", "tune", str(f), "-o", str(rec))
    assert out.returncode == 1 and out.stderr.startswith("error: tune FILE --shape-set"), out.stderr
