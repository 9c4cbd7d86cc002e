"""``--tag-phases``: tag every ``lowered.call`` with its phase (``#lowered.phase<...>``).

The phase is inferred from the call's origin, which lowering sets from the
graph's structure (the template's header / body / footer: the body is what
repeats per layer):

* origin scope ``header`` -> ``prologue``;
* ``layers.<i>`` -> ``steady i``;
* any other scope (``footer``, ``loss``, ``optimizer``) -> ``epilogue``;
* in a backward program, a call that computes a gradient (its origin's graph
  op is ``grad(...)``, or one of a fused call's parts is) also carries ``grad``.

A fused call has its first part's scope, so an add + RMSNorm fused across a
layer boundary runs in the earlier layer.  Inferring the phase in a pass
(rather than in lowering) keeps it right after any fusion: run it last before
``--plan-layout``; ``ckir compile`` does.  The C emitter infers the same phases
for calls that have none.

The pass then checks the order: a forward program runs ``prologue``,
``steady 0`` ... ``steady L-1``, ``epilogue``, each phase once and contiguous;
a backward program continues with ``epilogue grad``, ``steady L-1 grad`` ...
``steady 0 grad``, ``prologue grad``.  A call out of that order is an error
that names it.

Example: ``ckir-opt m.mlir --lower-decode --fuse-add-rmsnorm --tag-phases``
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from ckir.dialects import lowered as lw
from ckir.dialects.phase import EPILOGUE, PHASE_KEY, PROLOGUE, STEADY, PhaseAttr
from ckir.errors import CkirError

HEADER_SCOPE = "header"
LAYER_PREFIX = "layers."
GRAD_PREFIX = "grad("


def _is_grad(origin: lw.OriginAttr) -> bool:
    if origin.fusion_name is not None:
        return any(_is_grad(p) for p in origin.replaced)
    return origin.op_name.startswith(GRAD_PREFIX)


def infer_phase(call: lw.CallOp) -> PhaseAttr:
    """The phase of ``call`` from its origin (a call without one: ``epilogue``)."""
    origin = call.origin
    if origin is None:
        return PhaseAttr.make(EPILOGUE)
    scope, grad = origin.scope_name, _is_grad(origin)
    if scope == HEADER_SCOPE:
        return PhaseAttr.make(PROLOGUE, grad=grad)
    rest = scope.removeprefix(LAYER_PREFIX)
    if rest != scope and rest.isdigit():
        return PhaseAttr.make(STEADY, int(rest), grad=grad)
    return PhaseAttr.make(EPILOGUE, grad=grad)


def phase_of(call: lw.CallOp) -> PhaseAttr:
    """The call's ``phase`` attribute, or the inferred one when it has none."""
    attr = call.attributes.get(PHASE_KEY)
    return attr if isinstance(attr, PhaseAttr) else infer_phase(call)


def _rank(phase: PhaseAttr, layers: int) -> int:
    """Position of a phase in the order a program runs them (forward, then grad)."""
    kind, layer = phase.kind_name, phase.layer_index
    forward = {PROLOGUE: 0, STEADY: 1 + (layer or 0), EPILOGUE: 1 + layers}
    if not phase.is_grad:
        return forward[kind]
    back = {EPILOGUE: 0, STEADY: 1 + (layers - 1 - (layer or 0)), PROLOGUE: 1 + layers}
    return 2 + layers + back[kind]


@dataclass
class Segment:
    """A run of consecutive calls of one phase."""

    phase: PhaseAttr
    calls: list[lw.CallOp] = field(default_factory=list)


def segments(program: lw.ProgramOp) -> list[Segment]:
    """The program's calls cut into phases, in order; raises when the order is wrong.

    Every phase appears at most once and in the order of :func:`_rank` (forward
    phases, then gradient phases in reverse).  Steady phases number 0..L-1
    without gaps in each direction.
    """
    out: list[Segment] = []
    for call in program.calls():
        phase = phase_of(call)
        if out and out[-1].phase == phase:
            out[-1].calls.append(call)
        else:
            out.append(Segment(phase, [call]))
    layers = 1 + max((s.phase.layer_index or 0 for s in out), default=-1)
    where = f"tag-phases: lowered.program @{program.sym_name.data}"
    seen: dict[PhaseAttr, int] = {}
    last = -1
    for n, seg in enumerate(out):
        first = seg.calls[0]
        call_text = f"lowered.call @{first.kernel_name}"
        if first.origin is not None:
            call_text += f" ({first.origin.label})"
        if seg.phase in seen:
            raise CkirError(
                f"{where}: {call_text} is in phase '{seg.phase.label}', which ended "
                "earlier: the calls of a phase must be contiguous"
            )
        rank = _rank(seg.phase, layers)
        if rank < last:
            raise CkirError(
                f"{where}: {call_text} in phase '{seg.phase.label}' comes after phase "
                f"'{out[n - 1].phase.label}' (expected prologue, layers 0..{layers - 1}, "
                "epilogue, then the gradient phases in reverse)"
            )
        seen[seg.phase] = n
        last = rank
    for grad in (False, True):
        steady = sorted(
            s.phase.layer_index or 0
            for s in out
            if s.phase.kind_name == STEADY and s.phase.is_grad == grad
        )
        if steady and steady != list(range(len(steady))):
            missing = sorted(set(range(max(steady) + 1)) - set(steady))
            raise CkirError(
                f"{where}: no call in layer {missing[0]}"
                + (" (grad)" if grad else "")
                + f" although layer {max(steady)} has calls"
            )
    return out


def tag_program(program: lw.ProgramOp) -> None:
    """Set the inferred phase on every call of ``program`` and check the order."""
    for call in program.calls():
        call.attributes[PHASE_KEY] = infer_phase(call)
    segments(program)


@dataclass(frozen=True)
class TagPhasesPass(ModulePass):
    """Tag every call of every lowered program with ``phase = #lowered.phase<...>``.

    prologue (header), steady <i> (layer i of the repeated body), epilogue
    (footer, loss, optimizer); ``grad`` on a backward program's gradient calls.
    Replaces phases an earlier run set; checks that each program runs its phases
    in order, each contiguous (an error names the first call out of place).
    """

    name = "tag-phases"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        models = [m for m in op.ops if isinstance(m, lw.LoweredModelOp)]
        if not models:
            raise CkirError(
                "tag-phases: no lowered.model (run --lower-prefill/--lower-decode first)"
            )
        for model in models:
            for program in model.programs().values():
                tag_program(program)
