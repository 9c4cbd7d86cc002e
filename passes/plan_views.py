"""``--plan-views``: buffers that need no bytes of their own become views of a root.

Runs on the ``lowered`` programs, after lowering and fusion and before
``--plan-layout`` (which places each ``lowered.view`` as a ``layout.view`` of its
root's slot, never as a slot of its own).  One rewrite today:

**In-place reuse.**  An elementwise call (``add``, ``mul``, ``swiglu``, ``geglu``,
``gelu``, ``relu``, ``mul_scalar``, ``softcap`` kernels: every operand indexed by the
same element count, so output element ``i`` depends on input element ``i`` only)
writes its output over an input that dies at that call: the output buffer becomes
``lowered.view @out of @in offset 0 {inplace}``.  Its uses become uses of the
input's root (the planner extends that slot's live range), so the two never hold
bytes at the same time.  Conditions, checked per call in program order: the output
is a program's ``activation`` / ``scratch`` buffer (not ``io``: the manifest hands it
to callers) first named by this call and aliased by no view; the input's root is an
``activation`` / ``scratch`` buffer of the program of the same byte size and dtype,
read at offset 0, named by no other operand of the call, and named by no call after
this one.  The runtime's elementwise kernels and the interpreter's references read
each element before they write it (neither uses ``restrict``), so the alias is safe.

Example (``ckir-opt m.mlir --lower-prefill --plan-views --plan-layout``)::

    lowered.call @add_f32(@prefill.header.x, @prefill.layers.0.o) -> (@prefill.layers.0.x1)
    // @prefill.layers.0.o is not used after this call, so:
    lowered.view @prefill.layers.0.x1 of @prefill.layers.0.o offset 0 {inplace} : ...

The pass records ``views = {copies = C, inplace = N}`` on every program it changes
(``copies`` removed is 0 until a rewrite removes copy calls); ``--plan-layout``
reports ``copies_removed``, ``saved.views`` and ``saved.inplace`` in
``layout.totals`` (docs/memory.md).

Why no other views: in this IR a reshape or a head split is never a call (the
attention and RoPE kernels take ``[T, H*D]`` rows and the head counts as
parameters), fused projections (``fused_qkv``, ``fused_gate_up``) write their
outputs straight into separate buffers, and the KV append (``kv_store``) and the
last-row copy of ``--logits last`` copy to or from a row chosen at run time (``P``,
``T - 1``), which a ``layout.view`` (a constant offset) cannot express.
"""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import DictionaryAttr, IntegerAttr, ModuleOp, UnitAttr
from xdsl.passes import ModulePass

from ckir.dialects import layout as ly
from ckir.dialects import lowered as lw
from ckir.errors import CkirError
from ckir.passes.kv_append_views import kv_append_views

#: kernel op kind -> its output operand that may be written over an input, and the
#: inputs it may take (the same element count, output element i computed from input
#: elements i only, each read before it is written: the runtime's kernels use no
#: ``restrict`` and the interpreter's references read every operand first)
ALIASABLE: dict[str, tuple[str, tuple[str, ...]]] = {
    "add": ("out", ("a", "b")),
    "mul": ("out", ("a", "b")),
    "swiglu": ("out", ("gate", "up")),
    "geglu": ("out", ("gate", "up")),
    "gelu": ("out", ("x",)),
    "gelu_erf": ("out", ("x",)),
    "relu": ("out", ("x",)),
    "mul_scalar": ("out", ("x",)),
    "softcap": ("out", ("x",)),
    # the residual sum s = a + b of an add+RMSNorm (row by row: s stored, then h)
    "fused_add_rmsnorm": ("s", ("a", "b")),
}
#: roles of the program buffers an in-place output and its input root may have
TRANSIENT_ROLES = frozenset({"activation", "scratch"})


@dataclass
class _Program:
    """One program's buffers, views and call uses, kept current while it is rewritten."""

    program: lw.ProgramOp
    buffers: dict[str, lw.BufferOp]
    views: dict[str, lw.ViewOp]
    calls: list[lw.CallOp]
    first: dict[str, int]
    last: dict[str, int]

    @staticmethod
    def of(program: lw.ProgramOp) -> _Program:
        buffers: dict[str, lw.BufferOp] = {}
        views: dict[str, lw.ViewOp] = {}
        calls: list[lw.CallOp] = []
        first: dict[str, int] = {}
        last: dict[str, int] = {}
        for op in program.body_block.ops:
            if isinstance(op, lw.BufferOp):
                buffers[op.buffer_name] = op
            elif isinstance(op, lw.ViewOp):
                views[op.view_name] = op
            elif isinstance(op, lw.CallOp):
                for name in (*op.in_names, *op.out_names):
                    root = views[name].root_name if name in views else name
                    first.setdefault(root, len(calls))
                    last[root] = len(calls)
                calls.append(op)
        return _Program(program, buffers, views, calls, first, last)

    def root(self, name: str) -> tuple[str, int]:
        """The root of ``name`` and the byte offset of ``name`` in it."""
        view = self.views.get(name)
        return (view.root_name, view.offset_bytes) if view is not None else (name, 0)


def _inplace_input(p: _Program, index: int, decl: lw.KernelOp) -> tuple[str, str] | None:
    """``(output, input root)`` when call ``index`` can write its output over an input."""
    out_arg_name, in_arg_names = ALIASABLE[decl.kind_name]
    call = p.calls[index]
    bindings = call.bindings(decl)
    outs = [(arg, name) for arg, name in bindings if arg.name_text == out_arg_name]
    if len(outs) != 1 or not outs[0][0].writes:
        return None
    out_arg, out = outs[0]
    buf = p.buffers.get(out)
    if buf is None or buf.role not in TRANSIENT_ROLES or p.first.get(out) != index:
        return None
    if any(v.root_name == out for v in p.views.values()):
        return None
    size = buf.buffer_type.byte_size
    roots = [p.root(name)[0] for _, name in bindings]
    for arg, name in bindings:
        if arg.writes or arg.name_text not in in_arg_names:
            continue
        root, offset = p.root(name)
        rbuf = p.buffers.get(root)
        if (
            rbuf is None
            or rbuf.role not in TRANSIENT_ROLES
            or offset != 0
            or rbuf.buffer_type.byte_size != size
            or rbuf.buffer_type.dtype_name != buf.buffer_type.dtype_name
            or arg.dtype_name != out_arg.dtype_name
            or arg.extent_text != out_arg.extent_text
            or p.last.get(root) != index
        ):
            continue
        # another operand naming the same root must be this very input (add(a, a))
        if all(r != root or n == name for r, (_, n) in zip(roots, bindings, strict=True)):
            return out, root
    return None


def inplace_reuse(program: lw.ProgramOp, kernels: dict[str, lw.KernelOp]) -> int:
    """Turn the outputs of ``program``'s elementwise calls into in-place views of an
    input that dies there; return how many."""
    p = _Program.of(program)
    count = 0
    for index, call in enumerate(p.calls):
        decl = kernels.get(call.kernel_name)
        if decl is None or decl.kind_name not in ALIASABLE:
            continue
        found = _inplace_input(p, index, decl)
        if found is None:
            continue
        out, root = found
        buf = p.buffers.pop(out)
        view = lw.ViewOp.make(out, root, 0, buf.buffer_type)
        view.attributes[ly.INPLACE_ATTR] = UnitAttr()
        program.body_block.insert_op_before(view, buf)
        program.body_block.erase_op(buf)
        p.views[out] = view
        p.last[root] = p.last.pop(out, index)
        p.first.pop(out, None)
        count += 1
    return count


def record(program: lw.ProgramOp, copies: int, inplace: int) -> None:
    """Add the counts to the program's ``views`` attribute (created when absent)."""
    old = ly.views_recorded(program)
    counts = {"copies": old.get("copies", 0) + copies, "inplace": old.get("inplace", 0) + inplace}
    program.attributes[ly.VIEWS_ATTR] = DictionaryAttr(
        {k: IntegerAttr(v, 64) for k, v in sorted(counts.items())}
    )


@dataclass(frozen=True)
class PlanViewsPass(ModulePass):
    """Alias buffers that need no bytes of their own: in-place reuse of elementwise calls.

    In every ``lowered.program``, an elementwise call (add, mul, swiglu, geglu, gelu,
    relu, mul_scalar, softcap kernels) whose input dies at it writes its output over
    that input: the output becomes ``lowered.view @out of @in offset 0 {inplace}``
    (conditions in the module docstring).  Records ``views = {copies, inplace}`` on
    the programs; ``--plan-layout`` then places the views inside their roots' slots
    and reports ``copies_removed``, ``saved.views`` and ``saved.inplace``.

    Options:
      inplace (bool, default true): do the in-place reuse.

    Example: ``ckir-opt m.mlir --lower-prefill --lower-decode --plan-views --plan-layout``
    """

    name = "plan-views"

    inplace: bool = True
    kv: bool = True

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        models = [o for o in op.ops if isinstance(o, lw.LoweredModelOp)]
        if not models:
            raise CkirError(
                "plan-views: no lowered.model (run --lower-prefill, --lower-decode or "
                "--lower-backward first)"
            )
        for model in models:
            kernels = {k.kernel_name: k for k in model.body_block.ops if isinstance(k, lw.KernelOp)}
            caches = {
                b.buffer_name: b
                for b in model.body_block.ops
                if isinstance(b, lw.BufferOp) and b.role == "kv_cache"
            }
            for program in model.programs().values():
                copies = kv_append_views(program, kernels, caches) if self.kv else 0
                reused = inplace_reuse(program, kernels) if self.inplace else 0
                record(program, copies, reused)
