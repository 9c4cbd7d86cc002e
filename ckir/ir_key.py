"""A structural key of an IR module: what a kernel cache keys on.

``ir_key(module)`` is a SHA-256 hex digest of the module's structure.  It is the
same for two modules that differ only in

* SSA value and block names (``%h`` vs ``%x7``): operands are wired by position;
* symbol names, renamed consistently: every ``sym_name`` (the symbol an op
  defines), every symbol reference (``@embed``) and the string attributes that
  name a symbol (:data:`SYMBOL_STRINGS`, e.g. ``lowered.buffer``'s ``source``) are
  replaced by their order of first appearance, so which op uses which symbol still
  counts but what it is called does not;
* label strings that only name a tensor outside the IR (:data:`LABELS`, e.g. a
  weight's checkpoint name ``hf``, a model input's name): replaced by a marker;
* the order of keys in properties, attributes and dictionary attributes;
* whitespace and layout of the text or JSON it was read from (the key is taken
  from the module, so IR text and IR JSON of one module give one key).

Everything else changes the key: op names and their order, operand wiring,
result and block-argument types (shapes, dtypes), every other attribute value
(integers, floats, strings, arrays, schedules, ...), regions and blocks.

Example::

    key = ir_key(load_module(Path("graph.mlir")))   # 64 hex digits
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from xdsl.dialects.builtin import ModuleOp

from ckir.ir_json import module_from_json, module_to_json

__all__ = ["LABELS", "SYMBOL_STRINGS", "ir_key", "ir_key_of_json", "normalized"]

JSON = Any

#: (op, attribute) whose string value names a symbol: renamed like the symbol
SYMBOL_STRINGS: frozenset[tuple[str, str]] = frozenset(
    {
        ("lowered.buffer", "source"),  # the graph weight a buffer holds
        ("lowered.model", "model_name"),  # the graph.model it was lowered from
        ("layout.plan", "plan_name"),  # the model it plans
    }
)

#: (op, attribute) whose string value is only a label of a tensor: not in the key
LABELS: frozenset[tuple[str, str]] = frozenset(
    {
        ("graph.weight", "hf"),  # the checkpoint tensor a weight is loaded from
        ("graph.input", "input_name"),  # the name of a model input
        ("kernel.input", "input_name"),  # a kernel's parameter (inputs are positional)
    }
)

_LABEL = "<label>"


class _Normalizer:
    """Rewrites an IR JSON tree into its name-free canonical form."""

    def __init__(self) -> None:
        self._symbols: dict[str, str] = {}
        self._values: list[dict[str, int]] = [{}]
        self._next_value = 0

    def symbol(self, name: str) -> str:
        if name not in self._symbols:
            self._symbols[name] = f"@{len(self._symbols)}"
        return self._symbols[name]

    def module(self, data: JSON) -> JSON:
        return {
            "props": self._attr_map("builtin.module", data.get("properties", {})),
            "attrs": self._attr_map("builtin.module", data.get("attributes", {})),
            "ops": [self.op(op) for op in data["ops"]],
        }

    def op(self, data: JSON) -> JSON:
        name = data["op"]
        out: dict[str, JSON] = {"op": name}
        out["operands"] = [self._use(v) for v in data.get("operands", [])]
        out["results"] = [self._define(r) for r in data.get("results", [])]
        out["props"] = self._attr_map(name, data.get("properties", {}))
        out["attrs"] = self._attr_map(name, data.get("attributes", {}))
        out["regions"] = [self._region(r) for r in data.get("regions", [])]
        out["successors"] = list(data.get("successors", []))
        return out

    def _region(self, data: JSON) -> JSON:
        self._values.append({})
        try:
            return [
                {
                    "args": [self._define(a) for a in block.get("args", [])],
                    "ops": [self.op(op) for op in block["ops"]],
                }
                for block in data["blocks"]
            ]
        finally:
            self._values.pop()

    def _define(self, value: JSON) -> JSON:
        self._values[-1][value["id"]] = self._next_value
        self._next_value += 1
        return self.attr(value["type"])

    def _use(self, ident: str) -> int:
        for scope in reversed(self._values):
            if ident in scope:
                return scope[ident]
        raise ValueError(f"unknown value {ident}")  # module_to_json never writes one

    def _attr_map(self, op: str, attrs: dict[str, JSON]) -> JSON:
        out: dict[str, JSON] = {}
        for key in sorted(attrs):  # symbols numbered in an order independent of key order
            value = attrs[key]
            if (key == "sym_name" or (op, key) in SYMBOL_STRINGS) and "string" in value:
                out[key] = {"symbol": self.symbol(value["string"])}
            elif (op, key) in LABELS:
                out[key] = _LABEL
            else:
                out[key] = self.attr(value)
        return out

    def attr(self, data: JSON) -> JSON:
        if "symbol" in data:
            names = [data["symbol"], *data.get("nested", [])]
            return {"symbol": [self.symbol(n) for n in names]}
        if "array" in data:
            return {"array": [self.attr(a) for a in data["array"]]}
        if "dict" in data:
            return {"dict": {k: self.attr(data["dict"][k]) for k in sorted(data["dict"])}}
        if "params" in data:
            return {"attr": data["attr"], "params": [self.attr(p) for p in data["params"]]}
        return data


def normalized(module: ModuleOp) -> JSON:
    """The name-free canonical tree the key hashes (for looking at what the key covers)."""
    return _Normalizer().module(module_to_json(module))


def ir_key(module: ModuleOp) -> str:
    """The structural key of ``module``: 64 hex digits (see the module docstring)."""
    canonical = json.dumps(normalized(module), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def ir_key_of_json(data: JSON, name: str = "<json>") -> str:
    """The key of a module given as IR JSON (equal to the key of its text form)."""
    return ir_key(module_from_json(data, name))
