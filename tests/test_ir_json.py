"""IR JSON (ckir/ir_json.py): every lit module round-trips text -> JSON -> text byte for
byte and JSON -> text -> JSON identically, validates against docs/ir-json.schema.json,
and bad JSON is one error line naming the JSON path."""

from __future__ import annotations

import copy
import functools
import json
from pathlib import Path
from typing import Any

import pytest
from ir_json_cases import FILECHECK, LitModule, label, lit_modules, modules_by_file
from xdsl.dialects.builtin import (
    ArrayAttr,
    DictionaryAttr,
    FloatAttr,
    IntAttr,
    IntegerAttr,
    StringAttr,
    SymbolRefAttr,
    f32,
    f64,
    i1,
    i64,
)

from ckir.ir_io import parse_module, print_module
from ckir.ir_json import (
    IRJSONError,
    attribute_from_json,
    attribute_to_json,
    dumps,
    looks_like_json,
    module_from_json,
    parse_json_module,
)

SCHEMA = Path(__file__).parent.parent / "docs" / "ir-json.schema.json"

#: lit files that hold no module by design (every chunk must fail, or the IR comes
#: from a checkpoint the RUN lines build in %t), with the reason
NO_MODULE = {
    "dialects/graph/invalid-gated.mlir": "verifier failures only",
    "dialects/graph/invalid-head-rmsnorm.mlir": "verifier failures only",
    "dialects/graph/invalid.mlir": "verifier failures only",
    "dialects/graph/rope-invalid.mlir": "verifier failures only",
    "dialects/graph/rope-local-invalid.mlir": "verifier failures only",
    "dialects/kernel/invalid.mlir": "verifier failures only",
    "dialects/layout/invalid.mlir": "verifier failures only",
    "dialects/layout/io-invalid.mlir": "verifier failures only",
    "dialects/layout/row-offset-invalid.mlir": "verifier failures and parse errors only",
    "passes/annotate-quant.mlir": "its RUN lines write their modules to %t files",
    "dialects/lowered/invalid.mlir": "verifier failures only",
    "inputs/kernel-opencl-bad.mlir": "an out-of-range schedule hint: the verifier refuses it",
    "pipelines/import-lower-plan.mlir": "the graph is imported from a checkpoint into %t",
    "tools/ckir-opt-errors.mlir": "an unclosed module, by design",
}

MODULES = lit_modules()


def test_every_lit_file_gives_a_module_or_is_known_not_to() -> None:
    for path, modules in modules_by_file().items():
        rel = str(path.relative_to(FILECHECK))
        if rel in NO_MODULE:
            assert not modules, f"{rel} now holds modules: drop it from NO_MODULE"
        else:
            assert modules, f"{rel}: no module found (add it to NO_MODULE with a reason?)"
    assert len(MODULES) >= 90  # chunks and RUN outputs of the suite today


@pytest.mark.parametrize("case", MODULES, ids=label)
def test_lit_module_round_trips(case: LitModule) -> None:
    if case.reparses:
        module = parse_module(case.text, label(case))
        as_json = dumps(module)
        back = parse_json_module(as_json, label(case))
        assert print_module(back) == case.text  # text -> JSON -> text
        # JSON -> text -> JSON: the same objects (JSON objects are unordered: an op a pass
        # built may hold its properties in another order than the parser inserts them)
        assert json.loads(dumps(parse_module(print_module(back)))) == json.loads(as_json)
        if case.json is not None:
            # ckir-opt -t json writes the same objects (from the pass-built module)
            assert json.loads(case.json) == json.loads(as_json)
    if case.json is not None:
        from_run = parse_json_module(case.json, label(case))
        assert print_module(from_run) == case.text
        assert dumps(from_run) == case.json


def test_every_lit_output_reparses_as_text() -> None:
    # lowered.call parameters with a negative float (`s = -5.000000e-01 : f64`) once
    # did not parse back; every printed module of the suite now does
    assert [label(m) for m in MODULES if not m.reparses] == []


@functools.cache
def _validator() -> Any:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads(SCHEMA.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


@pytest.mark.parametrize("case", MODULES, ids=label)
def test_lit_module_json_matches_schema(case: LitModule) -> None:
    data = json.loads(case.json if case.json is not None else dumps(parse_module(case.text)))
    _validator().validate(data)


def test_schema_rejects_what_the_reader_rejects() -> None:
    validator = _validator()
    good = json.loads(dumps(parse_module((FILECHECK / "inputs" / "tiny_llama.mlir").read_text())))
    assert validator.is_valid(good)
    for mutate in (
        lambda d: d.pop("format"),
        lambda d: d["ops"][0].pop("op"),
        lambda d: d["ops"][0].__setitem__("operands", [3]),
        lambda d: d["ops"][0]["properties"].__setitem__("sym_name", {"strng": "x"}),
        lambda d: d["ops"][0]["properties"].__setitem__("sym_name", "llama"),
    ):
        bad = copy.deepcopy(good)
        mutate(bad)
        assert not validator.is_valid(bad)
        with pytest.raises(IRJSONError):
            module_from_json(bad)


# --------------------------------------------------------------------------- attributes


@pytest.mark.parametrize(
    ("attr", "expected"),
    [
        (IntAttr(3), {"int": 3}),
        (IntegerAttr(-7, i64), {"int": -7, "type": "i64"}),
        (IntegerAttr(1, i1), {"int": IntegerAttr(1, i1).value.data, "type": "i1"}),
        (FloatAttr(1e-5, f64), {"float": 1e-5, "type": "f64"}),
        (FloatAttr(0.1, f32), {"float": FloatAttr(0.1, f32).value.data, "type": "f32"}),
        (StringAttr('a "quoted"\nline'), {"string": 'a "quoted"\nline'}),
        (SymbolRefAttr("a", ["b", "c"]), {"symbol": "a", "nested": ["b", "c"]}),
        (ArrayAttr([IntAttr(1), StringAttr("x")]), {"array": [{"int": 1}, {"string": "x"}]}),
        (
            DictionaryAttr({"z": IntAttr(1), "a": IntAttr(2)}),
            {"dict": {"z": {"int": 1}, "a": {"int": 2}}},
        ),
        (f32, {"text": "f32"}),
        (FloatAttr(float("nan"), f64), {"text": "0x7ff8000000000000 : f64"}),
    ],
)
def test_attribute_forms(attr: object, expected: object) -> None:
    assert attribute_to_json(attr) == expected  # type: ignore[arg-type]
    assert attribute_from_json(expected) == attr


def test_ckir_types_are_structured() -> None:
    from ckir.dialects.graph import ScheduleAttr, TensorType
    from ckir.dialects.lowered import BufferType

    tensor = TensorType.make(["T", "H*D"], "f32")
    assert attribute_to_json(tensor) == {
        "type": "graph.tensor",
        "shape": ["T", "H*D"],
        "dtype": "f32",
    }
    buf = BufferType.make([3, 5], "bf16")
    assert attribute_to_json(buf) == {"type": "lowered.buf", "shape": [3, 5], "dtype": "bf16"}
    sched = ScheduleAttr.make(tile_m=8, vectorize=4)
    encoded = attribute_to_json(sched)
    assert encoded == {
        "attr": "graph.schedule",
        "params": [{"int": 8}, {"none": True}, {"none": True}, {"int": 4}],
    }
    for attr in (tensor, buf, sched):
        assert attribute_from_json(attribute_to_json(attr)) == attr


# --------------------------------------------------------------------------- errors


def _llama_json() -> dict:
    return json.loads(dumps(parse_module((FILECHECK / "inputs" / "tiny_llama.mlir").read_text())))


def _body_op(data: dict, index: int) -> dict:
    model = data["ops"][0]["regions"][0]["blocks"][0]["ops"]
    body = next(op for op in model if op["op"] == "graph.body")
    return body["regions"][0]["blocks"][0]["ops"][index]


BODY = "ops[0].regions[0].blocks[0].ops[13].regions[0].blocks[0]"


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (
            lambda d: _body_op(d, 0).__setitem__("op", "graph.nonesuch"),
            f"m.json: {BODY}.ops[0].op: unknown op 'graph.nonesuch'",
        ),
        (
            lambda d: _body_op(d, 0)["properties"].__setitem__("eps", {"float": "x"}),
            f"m.json: {BODY}.ops[0].properties.eps.float: expected a number",
        ),
        (
            lambda d: _body_op(d, 0)["properties"].__setitem__("eps", {"text": "1.0 : f99"}),
            f"m.json: {BODY}.ops[0].properties.eps.text: cannot parse '1.0 : f99'",
        ),
        (
            lambda d: _body_op(d, 0)["properties"].__setitem__("eps", {"floot": 1.0}),
            f"m.json: {BODY}.ops[0].properties.eps: an attribute needs one of the keys",
        ),
        (
            lambda d: _body_op(d, 0)["properties"]["eps"].__setitem__("extra", 1),
            f"m.json: {BODY}.ops[0].properties.eps.extra: unexpected key",
        ),
        (
            lambda d: _body_op(d, 1).__setitem__("operands", ["%missing"]),
            f"m.json: {BODY}.ops[1].operands[0]: unknown value %missing",
        ),
        (
            lambda d: _body_op(d, 1)["results"][0].__setitem__("id", "%h"),
            f"m.json: {BODY}.ops[1].results[0].id: value %h is defined twice",
        ),
        (
            lambda d: _body_op(d, 1)["results"][0].__setitem__("id", "%1bad"),
            f"m.json: {BODY}.ops[1].results[0].id: '1bad' is not a valid name",
        ),
        (
            lambda d: _body_op(d, 0)["results"][0]["type"].__setitem__("dtype", "f99"),
            f"m.json: {BODY}.ops[0].results[0].type: bad 'graph.tensor'",
        ),
        (
            lambda d: _body_op(d, 0)["results"][0]["type"].__setitem__("shape", ["T", "E+"]),
            f"m.json: {BODY}.ops[0].results[0].type.shape[1]: bad 'graph.dim': graph.dim: bad dim",
        ),
        (
            lambda d: _body_op(d, 0)["results"][0]["type"].__setitem__("shape", ["T", "V"]),
            f"m.json: {BODY}.ops[0]: graph.rmsnorm: operand and result have different types",
        ),
        (lambda d: d.__setitem__("version", 9), "m.json: version: expected 1, got 9"),
        (lambda d: d.__setitem__("ops", {}), "m.json: ops: expected a list, got an object"),
    ],
)
def test_bad_json_is_one_line_naming_the_path(mutate: object, message: str) -> None:
    data = _llama_json()
    mutate(data)  # type: ignore[operator]
    with pytest.raises(IRJSONError) as info:
        module_from_json(data, "m.json")
    text = str(info.value)
    assert "\n" not in text
    assert text.startswith(message), text


def test_malformed_json_text() -> None:
    with pytest.raises(IRJSONError, match=r"^x.json:1:\d+: malformed JSON"):
        parse_json_module('{"format": ', "x.json")


def test_looks_like_json() -> None:
    assert looks_like_json('  \n{"format": 1}')
    assert looks_like_json(b"{")
    assert not looks_like_json("builtin.module {}")
    assert not looks_like_json('"builtin.module"() ({})')
