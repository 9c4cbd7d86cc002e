"""Kernel selection: pick a C kernel from the registry for one graph op in one mode.

Selection happens here, at lowering time (ADR-005), never in the generated C.
A kernel fits when it implements the op kind, is allowed in the mode, takes as
many input and output buffers as the op provides, its operand dtypes equal the
buffers' dtypes, and its constraints hold for the op's integer parameters.
Among the kernels that fit, the first by name wins, so the choice is
deterministic; the registry is the only place that lists kernels.

The chosen kernel is declared in the ``lowered.model`` (:func:`declare_kernel`):
a ``lowered.kernel`` op copied from the registry entry, which is what the call
verifier, the fusion passes and the C emitter read afterwards.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ckir.dialects import lowered as lw
from ckir.errors import CkirError
from ckir.registry import KernelSpec, load_registry

ParamValue = int | float | str | tuple[float, ...]


def select_kernel(
    kind: str,
    mode: str,
    in_dtypes: Sequence[str],
    out_dtypes: Sequence[str],
    params: Mapping[str, ParamValue],
    *,
    where: str,
) -> KernelSpec:
    """The registry kernel for a graph op of ``kind`` in ``mode``; CkirError if none fits.

    ``params`` holds every value the lowering of that op can provide; a kernel
    fits only if each of its params is among them.  ``where`` names the op in
    error messages.
    """
    registry = load_registry()
    rejected: list[str] = []
    for name in sorted(registry):
        spec = registry[name]
        if spec.op != kind:
            continue
        if mode not in spec.modes:
            rejected.append(f"{name}: not for mode {mode}")
            continue
        ins, outs = spec.inputs(), spec.outputs()
        if len(ins) != len(in_dtypes) or len(outs) != len(out_dtypes):
            rejected.append(f"{name}: takes {len(ins)} inputs / {len(outs)} outputs")
            continue
        got = [*in_dtypes, *out_dtypes]
        want = [o.dtype for o in (*ins, *outs)]
        if got != want:
            rejected.append(f"{name}: dtypes {want} != {got}")
            continue
        missing = [p.name for p in spec.params if p.name not in params]
        if missing:
            rejected.append(f"{name}: lowering provides no {', '.join(missing)}")
            continue
        # run-time values (strings such as "T") are checked by the C entry points
        known = {p.name: params[p.name] for p in spec.params if not isinstance(params[p.name], str)}
        violated = spec.check(known, partial=True)
        if violated:
            rejected.append(f"{name}: {'; '.join(violated)}")
            continue
        return spec
    why = "; ".join(rejected) if rejected else "no kernel implements it"
    raise CkirError(f"{where}: no kernel for '{kind}' in mode {mode} ({why})")


def kernel_params(spec: KernelSpec, available: Mapping[str, ParamValue]) -> dict[str, ParamValue]:
    """The subset of ``available`` that ``spec`` takes, in the kernel's parameter order."""
    return {p.name: available[p.name] for p in spec.params}


def declare_kernel(model: lw.LoweredModelOp, spec: KernelSpec) -> lw.KernelOp:
    """The model's ``lowered.kernel`` for ``spec``, added if missing.

    Declarations sit at the top of the model, sorted by name, so the printed IR
    does not depend on the order in which passes select kernels.
    """
    block = model.body_block
    after: lw.KernelOp | None = None
    for op in block.ops:
        if not isinstance(op, lw.KernelOp):
            break
        if op.kernel_name == spec.name:
            return op
        if op.kernel_name > spec.name:
            break
        after = op
    decl = lw.KernelOp.from_spec(spec)
    if after is not None:
        block.insert_op_after(decl, after)
    elif block.first_op is not None:
        block.insert_op_before(decl, block.first_op)
    else:
        block.add_op(decl)
    return decl


def kernel_call(
    model: lw.LoweredModelOp,
    mode: str,
    types: Mapping[str, lw.BufferType],
    kind: str,
    ins: Sequence[str],
    outs: Sequence[str],
    params: Mapping[str, ParamValue],
    *,
    origin: lw.OriginAttr | None,
    where: str,
) -> lw.CallOp:
    """A ``lowered.call`` of the kernel that fits ``kind`` on these buffers, declared in
    ``model``: what every lowering (forward, gradients, optimizer) emits per call."""
    spec = select_kernel(
        kind,
        mode,
        [types[n].dtype_name for n in ins],
        [types[n].dtype_name for n in outs],
        params,
        where=where,
    )
    declare_kernel(model, spec)
    return lw.CallOp.make(spec.name, ins, outs, kernel_params(spec, params), origin=origin)
