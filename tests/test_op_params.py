"""An op's kernel parameters come from one place (passes/lowering/op_params.py).

The forward patterns and the gradient rules must both take an op's parameters
from :func:`op_params`: changing what it returns for a kind changes the forward
call and the gradient call alike, and an unsupported attribute value is refused
with the same message by both.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from xdsl.context import Context

from ckir.dialects import graph as g
from ckir.ir_io import parse_module, print_module
from ckir.passes.lower_backward import LowerBackwardPass
from ckir.passes.lower_prefill import LowerPrefillPass
from ckir.passes.lowering import op_params as op_params_module
from ckir.passes.lowering.gradients import RULES
from ckir.passes.lowering.kernels import ParamValue
from ckir.passes.lowering.patterns import PATTERNS
from ckir.vocab import GRAPH_OPS

INPUTS = Path(__file__).parent / "filecheck" / "inputs"


def _lower(text: str, mode: str) -> str:
    module = parse_module(text)
    lowering = LowerBackwardPass(max_context=16) if mode == "backward" else LowerPrefillPass(16)
    lowering.apply(Context(), module)
    return print_module(module)


def test_every_lowered_kind_has_params() -> None:
    """Each kind a pattern or gradient rule lowers has its parameters defined."""
    for kind in {p.kind for p in PATTERNS} | set(RULES):
        sig = GRAPH_OPS[kind]
        assert kind in op_params_module.PARAMS or sig.elementwise, kind


def test_forward_and_gradient_share_norm_params(monkeypatch: pytest.MonkeyPatch) -> None:
    """A changed rmsnorm eps reaches both rmsnorm_f32 and rmsnorm_bwd through op_params."""
    original = op_params_module.PARAMS["rmsnorm"]

    def patched(ctx: object, op: g.ComputeOp, where: str) -> dict[str, ParamValue]:
        return {**original(ctx, op, where), "eps": 0.125}  # type: ignore[arg-type]

    monkeypatch.setitem(op_params_module.PARAMS, "rmsnorm", patched)  # type: ignore[arg-type]
    text = _lower((INPUTS / "tiny_llama.mlir").read_text(), "backward")
    calls = [line for line in text.splitlines() if "lowered.call @rmsnorm" in line]
    forward = [c for c in calls if "_bwd" not in c]
    backward = [c for c in calls if "_bwd" in c]
    assert forward and backward
    for call in calls:
        assert "eps = 1.250000e-01" in call, call


@pytest.mark.parametrize("mode", ["prefill", "backward"])
def test_gelu_approximation_checked_once(mode: str) -> None:
    """The forward and the gradient pick the kernels of the same approximation (gelu_kind):
    erf for approximate = "none", tanh otherwise."""
    text = (INPUTS / "tiny_gpt2.mlir").read_text()
    assert 'approximate = "tanh"' in text
    tanh = _lower(text, mode)
    erf = _lower(text.replace('approximate = "tanh"', 'approximate = "none"'), mode)
    assert "@gelu_tanh_f32(" in tanh and "gelu_erf" not in tanh
    assert "@gelu_erf_f32(" in erf and "gelu_tanh" not in erf
    if mode == "backward":
        assert "@gelu_tanh_bwd_f32(" in tanh and "@gelu_erf_bwd_f32(" in erf
