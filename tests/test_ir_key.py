"""The structural IR key (ckir/ir_key.py): blind to value, symbol and label names, to key
order and to text vs JSON; changed by any shape, dtype, attribute value, op or wiring."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from ckir.ir_io import parse_module, print_module
from ckir.ir_json import dumps, module_from_json
from ckir.ir_key import LABELS, SYMBOL_STRINGS, ir_key, ir_key_of_json

INPUTS = Path(__file__).parent / "filecheck" / "inputs"
OPS_FILES = Path(__file__).parent / "filecheck" / "dialects"


@cache
def _modules() -> dict[str, str]:
    """name -> IR text: graph IR and lowered + layout IR (prefill, decode, backward)."""
    from ir_json_cases import _run_opt

    out = {
        "graph": (INPUTS / "tiny_llama.mlir").read_text(),
        "graph-ops": (OPS_FILES / "graph" / "ops.mlir").read_text(),
        "lowered-ops": (OPS_FILES / "lowered" / "ops.mlir").read_text(),
    }
    planned = _run_opt(
        [
            str(INPUTS / "tiny_gpt2.mlir"),
            "--lower-prefill{max-context=16}",
            "--lower-decode{max-context=16}",
            "--plan-layout",
        ]
    )
    assert planned is not None
    out["planned"] = planned
    return {k: print_module(parse_module(v, k)) for k, v in out.items()}


NAMES = ["graph", "graph-ops", "lowered-ops", "planned"]


def _json(name: str) -> dict[str, Any]:
    return json.loads(dumps(parse_module(_modules()[name])))


def _walk_ops(data: dict[str, Any]):  # noqa: ANN202 - a generator of op dicts
    for op in data["ops"]:
        yield from _walk_op(op)


def _walk_op(op: dict[str, Any]):  # noqa: ANN202
    yield op
    for region in op.get("regions", []):
        for block in region["blocks"]:
            yield from _walk_ops(block)


def _rename_everything(data: dict[str, Any]) -> dict[str, Any]:
    """Every value id, block name, symbol and label renamed (consistently)."""
    data = copy.deepcopy(data)
    values: dict[str, str] = {}
    symbols: dict[str, str] = {}

    def value(ident: str) -> str:
        if ident[1:].isdigit():
            return ident
        return values.setdefault(ident, f"%renamed{len(values)}")

    def symbol(name: str) -> str:
        return symbols.setdefault(name, f"sym{len(symbols)}_{name[::-1]}")

    def attr(a: dict[str, Any]) -> None:
        if "symbol" in a:
            a["symbol"] = symbol(a["symbol"])
            a["nested"] = [symbol(n) for n in a.get("nested", [])] or a.pop("nested", None)
            if a.get("nested") is None:
                a.pop("nested", None)
        for sub in a.get("array", []):
            attr(sub)
        for sub in a.get("dict", {}).values():
            attr(sub)
        for sub in a.get("params", []):
            attr(sub)

    for op in _walk_ops(data):
        op["operands"] = [value(v) for v in op.get("operands", [])] or op.pop("operands", [])
        if not op["operands"]:
            del op["operands"]
        for res in op.get("results", []):
            res["id"] = value(res["id"])
        for region in op.get("regions", []):
            for block in region["blocks"]:
                for arg in block.get("args", []):
                    arg["id"] = value(arg["id"])
        for kind in ("properties", "attributes"):
            for key, a in op.get(kind, {}).items():
                if key == "sym_name" or (op["op"], key) in SYMBOL_STRINGS:
                    a["string"] = symbol(a["string"])
                elif (op["op"], key) in LABELS:
                    a["string"] = "label_" + a["string"][::-1]
                else:
                    attr(a)
    return data


@pytest.mark.parametrize("name", NAMES)
def test_renaming_every_value_symbol_and_label_keeps_the_key(name: str) -> None:
    data = _json(name)
    renamed = _rename_everything(data)
    module = module_from_json(renamed, name)
    assert print_module(module) != _modules()[name]  # the names really changed
    assert ir_key(module) == ir_key(parse_module(_modules()[name]))


@pytest.mark.parametrize("name", NAMES)
def test_text_json_and_key_order_give_one_key(name: str) -> None:
    text = _modules()[name]
    key = ir_key(parse_module(text))
    assert len(key) == 64
    assert ir_key_of_json(_json(name)) == key
    generic = print_module(parse_module(text))  # same module, printed again
    assert ir_key(parse_module(generic)) == key
    reordered = _json(name)
    for op in _walk_ops(reordered):
        for kind in ("properties", "attributes"):
            if kind in op:
                op[kind] = dict(reversed(list(op[kind].items())))
    assert ir_key_of_json(reordered) == key


def _graph_body(data: dict[str, Any]) -> list[dict[str, Any]]:
    model = data["ops"][0]["regions"][0]["blocks"][0]["ops"]
    body = next(op for op in model if op["op"] == "graph.body")
    return body["regions"][0]["blocks"][0]["ops"]


def _first(data: dict[str, Any], op_name: str) -> dict[str, Any]:
    return next(op for op in _walk_ops(data) if op["op"] == op_name)


def _swap_add_operands(d: dict[str, Any]) -> None:
    add = next(op for op in _graph_body(d) if op["op"] == "graph.add")
    add["operands"].reverse()


def _set_dtype(d: dict[str, Any]) -> None:
    weight = _first(d, "graph.weight")
    weight["properties"]["dtype"] = {"string": "bf16"}


def _grow_symbol(d: dict[str, Any]) -> None:
    symbols = _first(d, "graph.model")["properties"]["symbols"]["dict"]
    symbols["I"] = {"int": symbols["I"]["int"] + 1, "type": "i64"}


def _set_eps(d: dict[str, Any]) -> None:
    _first(d, "graph.rmsnorm")["properties"]["eps"]["float"] = 2e-5


def _swap_weights(d: dict[str, Any]) -> None:
    # two projections of the same shape read each other's weight: only the wiring changes
    wk, wv = [op for op in _graph_body(d) if op["op"] == "graph.linear"][1:3]
    wk["properties"]["weights"], wv["properties"]["weights"] = (
        wv["properties"]["weights"],
        wk["properties"]["weights"],
    )


def _rope_theta(d: dict[str, Any]) -> None:
    _first(d, "graph.rope")["properties"]["theta"]["float"] = 5e5


GRAPH_CHANGES: dict[str, Callable[[dict[str, Any]], None]] = {
    "operand wiring": _swap_add_operands,
    "weight wiring": _swap_weights,
    "dtype": _set_dtype,
    "symbol value": _grow_symbol,
    "attribute value": _set_eps,
    "rope theta": _rope_theta,
}


@pytest.mark.parametrize("change", GRAPH_CHANGES, ids=str)
def test_any_structural_change_changes_the_key(change: str) -> None:
    data = _json("graph")
    key = ir_key_of_json(data)
    changed = copy.deepcopy(data)
    GRAPH_CHANGES[change](changed)
    assert changed != data
    assert ir_key_of_json(changed) != key


def test_shape_and_op_changes_in_lowered_ir_change_the_key() -> None:
    data = _json("planned")
    key = ir_key_of_json(data)
    shape = copy.deepcopy(data)
    buffer = _first(shape, "lowered.buffer")
    buffer_type = next(v for v in buffer["properties"].values() if v.get("type") == "lowered.buf")
    buffer_type["shape"][0] += 1
    assert ir_key(module_from_json(shape, verify=False)) != key
    op_name = copy.deepcopy(data)
    gelu = next(
        op
        for op in _walk_ops(op_name)
        if op["op"] == "lowered.kernel" and op["properties"]["kind"]["string"] == "gelu"
    )
    gelu["properties"]["c_name"]["string"] += "_other"
    assert ir_key(module_from_json(op_name, verify=False)) != key
    order = copy.deepcopy(data)
    program = _first(order, "lowered.program")
    calls = program["regions"][0]["blocks"][0]["ops"]
    calls[0], calls[1] = calls[1], calls[0]
    assert ir_key(module_from_json(order, verify=False)) != key
