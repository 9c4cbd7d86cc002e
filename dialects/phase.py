"""``#lowered.phase<...>``: which phase of its program a ``lowered.call`` runs in.

A program runs in three phases: the *prologue* (the graph's header: the
embedding, ...), the *steady* phase (the repeated body, one layer at a time,
``#lowered.phase<steady 3>`` for layer 3) and the *epilogue* (the footer: final
norm, lm_head, the loss).  The backward program runs them forward, then the
gradient of each in reverse: its gradient calls carry ``grad``
(``#lowered.phase<epilogue grad>``, ``#lowered.phase<steady 3 grad>`` from the
last layer down to ``steady 0 grad``, then ``#lowered.phase<prologue grad>``).

The attribute sits in a call's attribute dictionary::

    lowered.call @gemv_f32(@decode.layers.0.h, @w.layers.0.wq) -> (@decode.layers.0.q)
        {N = 64 : i64, K = 64 : i64, origin = #lowered.origin<scope "layers.0", op "graph.linear">}
        attributes {phase = #lowered.phase<steady 0>}

``--tag-phases`` (passes/tag_phases.py) sets it on every call; the C emitter
turns each run of calls of one phase into a function of its own
(docs/runtime.md, "Running one layer at a time").
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import IntAttr, StringAttr
from xdsl.ir import Attribute, ParametrizedAttribute
from xdsl.irdl import irdl_attr_definition
from xdsl.parser import AttrParser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

from ckir.dialects.syntax import parse_one_of

PROLOGUE = "prologue"
STEADY = "steady"
EPILOGUE = "epilogue"
#: the phase kinds, in the order a forward pass runs them
PHASE_KINDS = (PROLOGUE, STEADY, EPILOGUE)
#: the key of the phase in a call's attribute dictionary
PHASE_KEY = "phase"


@irdl_attr_definition
class PhaseAttr(ParametrizedAttribute):
    """The phase of a call: ``#lowered.phase<prologue>``, ``<steady 3>``, ``<epilogue grad>``.

    ``kind`` is ``prologue``, ``steady`` or ``epilogue``; ``layer`` the layer
    index of a steady call (-1 for the others); ``grad`` 1 for the calls of a
    backward program that compute gradients, else 0.
    Verifier: a known kind; a steady phase has a layer >= 0, the others none.
    """

    name = "lowered.phase"

    kind: StringAttr
    layer: IntAttr
    grad: IntAttr

    @staticmethod
    def make(kind: str, layer: int | None = None, grad: bool = False) -> PhaseAttr:
        return PhaseAttr(
            StringAttr(kind), IntAttr(-1 if layer is None else layer), IntAttr(int(grad))
        )

    @property
    def kind_name(self) -> str:
        return self.kind.data

    @property
    def layer_index(self) -> int | None:
        """The layer of a steady call, None for prologue and epilogue."""
        return None if self.layer.data < 0 else self.layer.data

    @property
    def is_grad(self) -> bool:
        return bool(self.grad.data)

    @property
    def label(self) -> str:
        """``prologue``, ``layer 3``, ``epilogue``; `` (grad)`` after gradient phases."""
        text = self.kind.data if self.layer_index is None else f"layer {self.layer_index}"
        return text + (" (grad)" if self.is_grad else "")

    def verify(self) -> None:
        kind, layer = self.kind.data, self.layer.data
        if kind not in PHASE_KINDS:
            raise VerifyException(
                f"lowered.phase: unknown phase '{kind}' (expected one of {', '.join(PHASE_KINDS)})"
            )
        if kind == STEADY and layer < 0:
            raise VerifyException(f"lowered.phase: a steady phase needs a layer >= 0, got {layer}")
        if kind != STEADY and layer != -1:
            raise VerifyException(f"lowered.phase: a {kind} phase has no layer (got {layer})")
        if self.grad.data not in (0, 1):
            raise VerifyException(f"lowered.phase: grad is 0 or 1, got {self.grad.data}")

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            kind = parse_one_of(parser, PHASE_KINDS, "phase", " (the phase)")
            layer = -1
            if kind == STEADY:
                layer = parser.parse_integer(
                    allow_boolean=False, allow_negative=False, context_msg=" (the layer index)"
                )
            grad = parser.parse_optional_keyword("grad") is not None
        return (StringAttr(kind), IntAttr(layer), IntAttr(int(grad)))

    def print_parameters(self, printer: Printer) -> None:
        text = self.kind.data
        if self.kind.data == STEADY:
            text += f" {self.layer.data}"
        if self.grad.data:
            text += " grad"
        printer.print_string(f"<{text}>")
