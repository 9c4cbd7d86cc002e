"""The kernel registry: loader validation, constraint checks, and agreement with
the C header and the built library."""

from __future__ import annotations

import ctypes
import os
import re
import subprocess
from pathlib import Path

import pytest
import yaml
from kernel_lib import TABLE_SECTIONS, kernel_table, norm_params

from ckir.registry import (
    KernelSpec,
    OperandSpec,
    ParamSpec,
    RegistryError,
    load_registry,
    parse_registry,
    registry_path,
)
from ckir.runtime_build import build_library, runtime_dir
from ckir.vocab import MODES

EXPECTED = {
    "embed_f32",
    "pos_embed_add_f32",
    "rmsnorm_f32",
    "layernorm_f32",
    "gemm_f32",
    "gemm_bias_f32",
    "gemv_f32",
    "gemv_bias_f32",
    "rope_f32",
    "kv_store_f32",
    "attention_f32",
    "swiglu_f32",
    "gelu_tanh_f32",
    "add_f32",
    "relu_f32",
    "matmul_f32",
    "matmul_relu_f32",
    "softmax_f32",
    "cross_entropy_f32",
}
NOT_KERNELS = {
    "ckir_set_num_threads",
    "ckir_get_num_threads",
    "ckir_runtime_isa",
    "ckir_runtime_bf16_dot",
    "ckir_runtime_qp_int8_gemm",
    "ckir_runtime_qp_fp32_x",
    "ckir_set_amx",
    "ckir_runtime_amx",
    "ckir_runtime_amx_calls",
}
PROTO = re.compile(r"\bvoid\s+(ckir_\w+)\s*\(([^)]*)\)\s*;", re.S)


def header_prototypes(path: Path) -> dict[str, str]:
    """The prototypes written out in a header (not those generated from the table)."""
    text = re.sub(r"/\*.*?\*/", "", path.read_text(), flags=re.S)
    return {name: norm_params(args) for name, args in PROTO.findall(text)}


def sig_args(spec: KernelSpec) -> str:
    sig = spec.c_signature()
    return norm_params(sig[sig.index("(") + 1 : sig.rindex(")")])


def test_registry_loads_expected_kernels():
    reg = load_registry()
    assert set(reg) >= EXPECTED
    assert load_registry() is reg  # cached
    for name, spec in reg.items():
        assert spec.name == name
        assert spec.c_name == f"ckir_{name}"
        assert spec.outputs(), name
        assert set(spec.modes) <= set(MODES)
    assert reg["gemm_f32"].modes == ("prefill", "backward")
    assert reg["gemv_bias_f32"].modes == ("decode",)
    assert reg["rmsnorm_f32"].modes == ("prefill", "decode", "backward")
    assert reg["adamw_f32"].modes == ("optimize",)


def test_spec_accessors():
    spec = load_registry()["gemm_bias_f32"]
    assert spec.op == "linear"
    assert [o.name for o in spec.inputs()] == ["x", "w", "b"]
    assert spec.outputs() == (OperandSpec("y", "f32", "write"),)
    assert spec.params == (ParamSpec("M", "i64"), ParamSpec("N", "i64"), ParamSpec("K", "i64"))
    assert spec.c_signature() == (
        "void ckir_gemm_bias_f32(const float *x, const float *w, const float *b, float *y, "
        "int64_t M, int64_t N, int64_t K)"
    )
    rope = load_registry()["rope_f32"]
    assert [o.name for o in rope.outputs()] == ["q", "k"]  # readwrite counts as output
    assert rope.inputs() == ()


def test_kernel_table_matches_registry():
    """ckir_kernels.def and the registry list the same kernels with the same C
    parameters (operand C types and names in order, then params), both ways."""
    table = kernel_table()
    reg = load_registry()
    for spec in reg.values():
        name = spec.c_name.removeprefix("ckir_")
        assert name in table, f"{spec.c_name} is registered but not in ckir_kernels.def"
        assert table[name] == sig_args(spec), f"{name}: table and registry differ"
    registered = {s.c_name.removeprefix("ckir_") for s in reg.values()}
    extra = sorted(set(table) - registered)
    assert not extra, f"in ckir_kernels.def but not registered: {extra}"
    # each section belongs to one header; together they are the whole table
    parts = [kernel_table((sec,)) for sec in TABLE_SECTIONS]
    assert sum(len(p) for p in parts) == len(table)


def test_headers_declare_the_table(tmp_path):
    """The public headers declare every table entry and its reference twin with exactly
    the table's type (a pointer initialised from each must compile warning-free), and
    write out no other kernel prototype."""
    headers = ("ckir_runtime.h", "ckir_quant.h", "ckir_fused.h")
    lines = [f'#include "{h}"' for h in headers]
    for i, (name, params) in enumerate(sorted(kernel_table().items())):
        lines.append(f"void (*const k{i})({params}) = ckir_{name};")
        lines.append(f"void (*const r{i})({params}) = ckir_ref_{name};")
    src = tmp_path / "decls.c"
    src.write_text("#include <stdint.h>\n" + "\n".join(lines) + "\n")
    cc = os.environ.get("CC", "cc")
    inc = str(runtime_dir() / "include")
    proc = subprocess.run(
        [cc, "-std=c11", "-Wall", "-Werror", "-fsyntax-only", "-I", inc, str(src)],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    for h in headers:
        for name in header_prototypes(runtime_dir() / "include" / h):
            assert name in NOT_KERNELS or name.startswith("ckir_internal_"), (
                f"{h} writes out {name}: list kernels in ckir_kernels.def"
            )
    header = (runtime_dir() / "include" / "ckir_runtime.h").read_text()
    for name in NOT_KERNELS:
        assert re.search(rf"\b{name}\s*\(", header), name


def test_every_kernel_is_in_the_library(tmp_path):
    lib = ctypes.CDLL(str(build_library(tmp_path / "libckir.so")))
    for spec in load_registry().values():
        assert hasattr(lib, spec.c_name), spec.c_name
        assert hasattr(lib, spec.c_name.replace("ckir_", "ckir_ref_", 1)), spec.c_name
    for name in NOT_KERNELS:
        assert hasattr(lib, name)


def test_check_constraints():
    att = load_registry()["attention_f32"]
    ok = {"T": 1, "P": 0, "H": 6, "KV": 2, "D": 64}
    assert att.check(ok) == []
    msgs = att.check({**ok, "KV": 4, "D": 300})
    assert len(msgs) == 2
    assert any("H % KV == 0" in m and "KV=4" in m for m in msgs)
    assert any("D <= 256" in m for m in msgs)
    assert "needs" in att.check({"T": 1})[1]
    # partial: constraints over params known only at run time are skipped
    assert att.check({"H": 6, "KV": 2, "D": 64}, partial=True) == []
    assert len(att.check({"H": 6, "KV": 4, "D": 64}, partial=True)) == 1
    rms = load_registry()["rmsnorm_f32"]
    assert rms.check({"T": 2, "E": 8, "eps": 1e-5}) == []
    assert rms.check({"T": 2, "E": 8, "eps": -1.0})


def _registry_with(entry: dict) -> dict:
    base = {
        "op": "add",
        "modes": ["prefill"],
        "operands": [{"name": "x", "dtype": "f32", "access": "read"}],
        "params": {"n": "i64"},
        "constraints": ["n >= 1"],
        "doc": "foo",
    }
    base.update(entry)
    return {"version": 2, "kernels": {"foo": base}}


@pytest.mark.parametrize(
    "entry,needle",
    [
        ({"op": "nonsense"}, "unknown op"),
        ({"modes": ["train"]}, "modes"),
        ({"operands": [{"name": "x", "dtype": "f32", "access": "rw"}]}, "access"),
        (
            {
                "operands": [
                    {"name": "y", "dtype": "f32", "access": "write"},
                    {"name": "x", "dtype": "f32", "access": "read"},
                ]
            },
            "read operand 'x' follows a written one",
        ),
        ({"operands": [{"name": "x", "dtype": "f99", "access": "read"}]}, "dtype"),
        ({"params": {"n": "int"}}, "type"),
        ({"params": [{"name": "n", "type": "i64"}]}, "params must map each name"),
        ({"params": {True: "i64"}}, "not an identifier"),
        ({"constraints": ["__import__('os').system('true')"]}, "bad constraint"),
        ({"constraints": ["n.real > 0"]}, "bad constraint"),
        ({"constraints": ["m >= 1"]}, "unknown name"),
        ({"constraints": ["n >="]}, "bad constraint"),
        ({"params": {"x": "i64"}, "constraints": []}, "duplicate"),
        ({"extra": 1}, "unknown field"),
        ({"c_name": "ckir_foo"}, "unknown field"),  # version 1's field: the name gives it
        ({"doc": "{dtype} kernel"}, "needs a family row"),
        ({"where": {"f32": {"doc": "x"}}}, "needs a family row"),
    ],
)
def test_malformed_entries_name_the_kernel(entry, needle):
    with pytest.raises(RegistryError, match="kernel 'foo'") as info:
        parse_registry(_registry_with(entry))
    assert needle in str(info.value)
    assert "\n" not in str(info.value)


def test_missing_field_and_bad_file(tmp_path):
    data = _registry_with({})
    del data["kernels"]["foo"]["op"]
    with pytest.raises(RegistryError, match="kernel 'foo': missing field 'op'"):
        parse_registry(data)
    bad = tmp_path / "reg.yaml"
    bad.write_text(yaml.safe_dump({"version": 1, "kernels": {}}))
    with pytest.raises(RegistryError, match="reg.yaml: unsupported version 1 .expected 2"):
        load_registry(bad)
    bad.write_text("version: 2\nkernels: {foo: [\n")
    with pytest.raises(RegistryError, match="reg.yaml: invalid YAML") as info:
        load_registry(bad)
    assert "\n" not in str(info.value)
    bad.write_text(yaml.safe_dump({"version": 2, "kernels": {"a": {}}, "sets": {}}))
    with pytest.raises(RegistryError, match="unknown top-level field.s. sets"):
        load_registry(bad)


# ------------------------------------------------------------------- family rows


def _family(**fields) -> dict:
    row = {
        "op": "linear",
        "modes": ["decode"],
        "dtypes": ["bf16", "q8_0", "q4_1p"],
        "operands": [
            {"name": "x", "dtype": "f32", "access": "read", "extent": "K"},
            {"name": "w", "dtype": "{dtype}", "access": "read", "extent": "N*K"},
            {"name": "y", "dtype": "f32", "access": "write", "extent": "N"},
        ],
        "params": {"N": "i64", "K": "i64"},
        "constraints": ["N >= 1"],
        "doc": "y = w·x, w in {dtype}",
    }
    row.update(fields)
    return {"version": 2, "kernels": {"mv_{dtype}": row}}


def test_family_row_expands_per_dtype():
    data = _family(
        where={
            "blocks": {"constraints": ["K % 32 == 0"]},
            "q4_1p": {"constraints": ["K <= 4096"], "modes": ["prefill"], "doc": "panels"},
        }
    )
    reg = parse_registry(data)
    assert list(reg) == ["mv_bf16", "mv_q8_0", "mv_q4_1p"]
    bf16, q8, q41p = reg["mv_bf16"], reg["mv_q8_0"], reg["mv_q4_1p"]
    assert bf16.c_name == "ckir_mv_bf16"
    assert [o.dtype for o in q8.operands] == ["f32", "q8_0", "f32"]
    assert bf16.constraints == ("N >= 1",) and bf16.doc == "y = w·x, w in bf16"
    assert q8.constraints == ("N >= 1", "K % 32 == 0") and q8.modes == ("decode",)
    # where clauses apply in the order written: constraints add up, modes and doc replace
    assert q41p.constraints == ("N >= 1", "K % 32 == 0", "K <= 4096")
    assert q41p.modes == ("prefill",) and q41p.doc == "panels"


def test_family_dtype_sets_follow_the_vocabulary():
    from ckir.registry import dtype_sets
    from ckir.vocab import BLOCK_DTYPES, PANEL_DTYPES, WEIGHT_DTYPES

    sets = dtype_sets()
    assert sets["weights"] == WEIGHT_DTYPES
    assert set(sets["blocks"]) == set(WEIGHT_DTYPES) & set(BLOCK_DTYPES)
    assert set(sets["panels"]) == set(PANEL_DTYPES)
    reg = parse_registry(_family(dtypes=["weights", "-f32", "-panels"]))
    want = {f"mv_{d}" for d in WEIGHT_DTYPES if d != "f32" and d not in PANEL_DTYPES}
    assert set(reg) == want
    # every weight dtype has its linear, embedding and fused kernels in the runtime's
    # registry: a weight dtype added to ckir.vocab joins every family row
    full = load_registry()
    for d in WEIGHT_DTYPES:
        for k in ("gemv", "gemv_bias", "gemm", "gemm_bias", "embed"):
            assert f"{k}_{d}" in full, f"{k}_{d}"
        for k in ("gemv_qkv", "gemv_qkv_bias", "gemm_qkv", "gemm_qkv_bias"):
            assert f"{k}_{d}" in full, f"{k}_{d}"
        for k in ("gemv_gate_up", "gemm_gate_up"):
            assert f"{k}_{d}" in full, f"{k}_{d}"


@pytest.mark.parametrize(
    "fields,needle",
    [
        ({"dtypes": "weights"}, "dtypes must be a non-empty list"),
        ({"dtypes": []}, "dtypes must be a non-empty list"),
        ({"dtypes": ["q7_0"]}, "'q7_0' is no dtype or dtype set"),
        ({"dtypes": ["bf16", "-bf16"]}, "leave no dtype"),
        ({"where": {"blokcs": {"doc": "x"}}}, "where: 'blokcs' is no dtype or dtype set"),
        ({"where": {"f32": {"doc": "x"}}}, "where f32: names none of the row's dtypes"),
        ({"where": {"bf16": {"op": "embed"}}}, "where bf16: unknown field(s) op"),
        ({"where": {"bf16": {"constraints": "K > 1"}}}, "constraints must be a list"),
        ({"where": {"bf16": {}}}, "where bf16: must map some of"),
        ({"where": ["bf16"]}, "where must map dtypes or sets"),
        ({"constraints": "N >= 1"}, "constraints must be a list of strings"),
    ],
)
def test_malformed_family_rows_name_the_row(fields, needle):
    with pytest.raises(RegistryError) as info:
        parse_registry(_family(**fields), "reg.yaml")
    msg = str(info.value)
    assert msg.startswith("reg.yaml: kernel 'mv_{dtype}'"), msg
    assert needle in msg, msg
    assert "\n" not in msg


def test_family_expansion_errors_name_the_dtype():
    data = _family(where={"q8_0": {"constraints": ["Z > 1"]}})
    with pytest.raises(RegistryError, match=r"reg.yaml: kernel 'mv_\{dtype\}' \(mv_q8_0\): bad"):
        parse_registry(data, "reg.yaml")
    row = _family()["kernels"]["mv_{dtype}"]
    with pytest.raises(RegistryError, match="name must contain"):
        parse_registry({"version": 2, "kernels": {"mv": row}}, "reg.yaml")
    twice = {
        "version": 2,
        "kernels": {"mv_{dtype}": row, "mv_bf16": _registry_with({})["kernels"]["foo"]},
    }
    with pytest.raises(RegistryError, match="kernel 'mv_bf16' gives 'mv_bf16', which kernel"):
        parse_registry(twice, "reg.yaml")


def test_cli_reports_a_broken_registry_in_one_line(tmp_path, monkeypatch, capsys):
    """A malformed registry file is a user's mistake: one line, no traceback."""
    import ckir.registry as registry
    from ckir.cli import main

    bad = tmp_path / "registry.yaml"
    bad.write_text(yaml.safe_dump(_family(dtypes=["q7_0"])))
    monkeypatch.setattr(registry, "registry_paths", lambda: [bad])
    registry._load_all.cache_clear()
    try:
        from ckir.tools.zoo import make_numpy_model

        src = make_numpy_model("llama", tmp_path / "m")
        code = main(["compile", str(src), "--out", str(tmp_path / "out")])
    finally:
        registry._load_all.cache_clear()
    err = capsys.readouterr().err
    assert code == 1
    assert "error: registry.yaml: kernel 'mv_{dtype}': dtypes: 'q7_0' is no dtype" in err
    assert "Traceback" not in err


def test_constraint_arithmetic():
    data = _registry_with(
        {
            "params": {"a": "i64", "b": "f32"},
            # the dim language of ckir.dialects.dims: exact / and %, "and" of comparisons
            "constraints": ["a / 2 * 2 == a and a % 4 == 0", "b * 2 > 1", "1 < a and a <= 8"],
        }
    )
    spec = parse_registry(data)["foo"]
    assert spec.check({"a": 4, "b": 1.0}) == []
    assert len(spec.check({"a": 5, "b": 1.0})) == 1  # 5/2 is inexact: violated, not a crash
    assert len(spec.check({"a": 6, "b": 1.0})) == 1
    assert len(spec.check({"a": 4, "b": 0.1})) == 1
    assert len(spec.check({"a": 12, "b": 1.0})) == 1


def test_registry_file_is_the_default():
    assert registry_path() == runtime_dir() / "registry.yaml"
