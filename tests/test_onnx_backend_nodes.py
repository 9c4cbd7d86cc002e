"""onnx's own backend node tests through ckir's backend (``ckir.onnx_backend``).

The test cases are the ones the ``onnx`` package writes with ``python -m
onnx.backend.test.cmd_tools generate-data`` (loaded here in memory by
``onnx.backend.test.BackendTest``): every single-node case whose op_type is one
docs/onnx.md lists as supported by the backend.  A case the backend refuses
(:class:`ckir.onnx_backend.Unsupported`) is skipped with the one-line reason,
and docs/onnx.md lists every skipped name with its reason: a test checks the
list matches the skips the backend makes today.
"""

from __future__ import annotations

import re
import unittest
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("onnx")

import onnx.backend.test  # noqa: E402
from onnx.backend.test.loader import load_model_tests  # noqa: E402

from ckir import onnx_backend as ob  # noqa: E402

DOCS = Path(__file__).resolve().parent.parent / "docs" / "onnx.md"
#: the op_types whose node tests run (docs/onnx.md, "The ONNX backend")
OP_TYPES = sorted(ob.SUPPORTED_OPS)


def _cases() -> list[Any]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cases = load_model_tests(kind="node")
    return [
        c
        for c in cases
        if len(c.model.graph.node) == 1 and c.model.graph.node[0].op_type in OP_TYPES
    ]


CASES = _cases()


class _SkippingBackend(ob.CkirBackend):
    """The backend, with a refusal turned into a skip naming the reason."""

    @classmethod
    def prepare(cls, model: Any, device: str = "CPU", **kwargs: Any) -> ob.CkirRep:
        try:
            return super().prepare(model, device, **kwargs)
        except ob.Unsupported as e:
            raise unittest.SkipTest(str(e)) from None


def _node_tests() -> type[unittest.TestCase]:
    """BackendTest's node test class, with only the methods of :data:`CASES`."""
    runner = onnx.backend.test.BackendTest(_SkippingBackend, __name__)
    names = {f"{c.name}_cpu" for c in CASES}
    cls = runner.test_cases["OnnxBackendNodeModelTest"]
    for attr in list(vars(cls)):
        if attr.startswith("test_") and attr not in names:
            delattr(cls, attr)
    return cls


OnnxBackendNodeModelTest = _node_tests()


def _actual_skips() -> dict[str, str]:
    out = {}
    for c in CASES:
        try:
            ob.prepare(c.model)
        except ob.Unsupported as e:
            out[c.name] = str(e)
    return out


def _documented_skips() -> dict[str, str]:
    """``- `test_name`: reason`` lines of the skipped-tests list in docs/onnx.md."""
    text = DOCS.read_text()
    start = text.index("<!-- backend-skips -->")
    end = text.index("<!-- /backend-skips -->")
    found = {}
    for line in text[start:end].splitlines():
        m = re.match(r"- `(test_\w+)`: (.+)$", line.strip())
        if m:
            found[m.group(1)] = m.group(2)
    return found


def test_every_op_type_has_cases() -> None:
    ops = {c.model.graph.node[0].op_type for c in CASES}
    assert ops == set(OP_TYPES)
    runs = {c.model.graph.node[0].op_type for c in CASES if c.name not in _actual_skips()}
    assert runs == set(OP_TYPES), f"op_types with no node test that runs: {set(OP_TYPES) - runs}"


def test_docs_list_the_skips() -> None:
    actual, documented = _actual_skips(), _documented_skips()
    assert sorted(documented) == sorted(actual), (
        f"skipped but not in docs/onnx.md: {sorted(set(actual) - set(documented))}; "
        f"in docs/onnx.md but not skipped: {sorted(set(documented) - set(actual))}"
    )
    for name, why in actual.items():
        reason = why.split("): ", 1)[1]
        assert reason in documented[name], (
            f"{name}: docs say {documented[name]!r}, backend {reason!r}"
        )


def test_docs_list_the_op_types() -> None:
    text = DOCS.read_text()
    section = text[text.index("## The ONNX backend") :]
    for op in OP_TYPES:
        assert f"`{op}`" in section, op


def test_kernels_do_the_arithmetic() -> None:
    """A supported node runs on the C kernels its mapping names (not a NumPy fallback)."""
    from onnx import TensorProto, helper

    k = ob.kernels()
    before = dict(k.calls)
    node = helper.make_node("Gemm", ["a", "b", "c"], ["y"], alpha=0.5, transB=1)
    graph = helper.make_graph(
        [node],
        "g",
        [
            helper.make_tensor_value_info("a", TensorProto.FLOAT, [3, 5]),
            helper.make_tensor_value_info("b", TensorProto.FLOAT, [7, 5]),
            helper.make_tensor_value_info("c", TensorProto.FLOAT, [7]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 7])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    rng = np.random.default_rng(0)
    a, b, c = (rng.standard_normal(s).astype(np.float32) for s in ((3, 5), (7, 5), (7,)))
    (y,) = ob.run_model(model, [a, b, c])
    np.testing.assert_allclose(y, 0.5 * a @ b.T + c, rtol=1e-5, atol=1e-6)
    for name in ("matmul_f32", "mul_scalar_f32", "add_f32"):
        assert k.calls.get(name, 0) > before.get(name, 0), name


def test_refusal_is_one_line() -> None:
    from onnx import TensorProto, helper

    node = helper.make_node("Gelu", ["x"], ["y"], name="g0", approximate="sigmoid")
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20)])
    assert not ob.CkirBackend.supports_model(model)
    with pytest.raises(ob.Unsupported) as e:
        ob.CkirBackend.prepare(model)
    assert str(e.value) == "ONNX node 'g0': Gelu (opset 20): approximate = 'sigmoid'"
