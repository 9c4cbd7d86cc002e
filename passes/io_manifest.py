"""``--io-manifest``: name the plan's inputs, params, state and outputs (``layout.io``).

Run after ``--plan-layout``: it adds one ``layout.io`` handle to the
``layout.plan`` (after its arenas, before its totals) for every buffer a caller
reads or writes, replacing any handles an earlier run added.  What the handles
are, from the lowered model alone (no architecture is named here):

* **input** / **output**: the ``io`` buffers of each program, named
  ``<mode>.<last part of the buffer name>`` (``prefill.tokens``,
  ``backward.targets``, ``decode.logits``, ``backward.loss``); their role comes
  from the buffer's source (``output`` -> output, anything else -> input);
* **param**: every weight, named by its source (the graph weight, ``layers.0.attn.wq``);
* **state**: the KV cache, gradient and optimizer-moment buffers, named as the
  buffers are (``kv.layers.0.k``, ``grad.embed``, ``adam.m.embed``).

``dims`` marks the dimensions that follow a run-time symbol: the leading dim of an
io buffer that equals its program's token capacity (> 1) follows ``T``; the leading
dim of a KV cache buffer follows ``PT`` (the positions filled so far).  The position
``P`` is a scalar of the model handle, not a buffer, so it has no handle.

Example: ``ckir-opt m.mlir --lower-prefill --plan-layout --io-manifest``
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

from ckir.dialects import layout as ly
from ckir.dialects import lowered as lw
from ckir.dialects.dims import CONTEXT, TOKENS
from ckir.errors import CkirError

#: lowered buffer role -> manifest role, for the model-level buffers a caller may touch
STATE_ROLES = {"kv_cache": "state", "grad": "state", "optimizer_state": "state"}


def _io_handles(program: lw.ProgramOp) -> list[tuple[str, str, lw.BufferOp]]:
    """``(handle, role, buffer)`` of a program's io buffers, in IR order."""
    mode = program.mode_name
    out: list[tuple[str, str, lw.BufferOp]] = []
    for op in program.body_block.ops:
        if isinstance(op, lw.BufferOp) and op.role == "io":
            role = "output" if op.source_name == "output" else "input"
            out.append((f"{mode}.{op.buffer_name.rsplit('.', 1)[-1]}", role, op))
    return out


def manifest(model: lw.LoweredModelOp, plan: ly.PlanOp) -> list[ly.IoOp]:
    """The ``layout.io`` handles of a planned model, in order: each program's inputs and
    outputs (programs in IR order), then params, then state."""
    places = plan.places()
    ops: list[ly.IoOp] = []

    def add(handle: str, role: str, mode: str | None, buf: lw.BufferOp, dims: tuple[str, ...]):
        place = places.get(buf.buffer_name)
        if place is None:
            raise CkirError(f"io-manifest: buffer @{buf.buffer_name} has no slot in the plan")
        arena, offset, _ = place
        ops.append(
            ly.IoOp.make(handle, role, mode, buf.buffer_name, buf.buffer_type, dims, arena, offset)
        )

    for program in model.body_block.ops:
        if not isinstance(program, lw.ProgramOp):
            continue
        handles = _io_handles(program)
        rows = max(
            (
                b.buffer_type.shape_ints[0]
                for _, r, b in handles
                if r == "input" and b.buffer_type.shape_ints
            ),
            default=0,
        )
        for handle, role, buf in handles:
            shape = buf.buffer_type.shape_ints
            dims = tuple(
                TOKENS if i == 0 and rows > 1 and d == rows else "" for i, d in enumerate(shape)
            )
            add(handle, role, program.mode_name, buf, dims)
    state: list[lw.BufferOp] = []
    for op in model.body_block.ops:
        if isinstance(op, lw.BufferOp):
            if op.role == "weight":
                add(op.source_name or op.buffer_name, "param", None, op, ("",) * _rank(op))
            elif op.role in STATE_ROLES:
                state.append(op)
    for op in state:
        lead = CONTEXT if op.role == "kv_cache" else ""
        dims = tuple(lead if i == 0 else "" for i in range(_rank(op)))
        add(op.buffer_name, STATE_ROLES[op.role], None, op, dims)
    return ops


def _rank(op: lw.BufferOp) -> int:
    return len(op.buffer_type.shape_ints)


@dataclass(frozen=True)
class IoManifestPass(ModulePass):
    """Add the I/O manifest (``layout.io`` handles) to the ``layout.plan`` of the module.

    Needs one ``lowered.model`` and its ``layout.plan`` (run ``--plan-layout`` first);
    replaces the handles of an earlier run.  The plan's verifier then checks every
    handle against its slot and buffer.

    Example: ``ckir-opt m.mlir --lower-decode --plan-layout --io-manifest``
    """

    name = "io-manifest"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        models = [o for o in op.ops if isinstance(o, lw.LoweredModelOp)]
        plans = [o for o in op.ops if isinstance(o, ly.PlanOp)]
        if len(models) != 1 or len(plans) != 1:
            raise CkirError(
                "io-manifest: expected one lowered.model and one layout.plan (run a lowering "
                f"and --plan-layout first), found {len(models)} and {len(plans)}"
            )
        plan = plans[0]
        for old in plan.io_handles():
            Rewriter.erase_op(old)
        handles = manifest(models[0], plan)
        totals = plan.body_block.last_op
        for io in handles:
            if isinstance(totals, ly.TotalsOp):
                plan.body_block.insert_op_before(io, totals)
            else:
                plan.body_block.add_op(io)
