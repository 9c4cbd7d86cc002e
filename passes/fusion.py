"""What the fusion passes share: reading lowered calls, moving them safely, registry lookups.

The fusion passes (``--fuse-qkv``, ``--fuse-gate-up``, ``--fuse-add-rmsnorm``)
rewrite groups of ``lowered.call`` ops of one ``lowered.program`` into one call
of a fused kernel.  They run after ``--lower-prefill`` / ``--lower-decode`` and
before ``--plan-layout``.  Every pass follows the same rules, implemented here:

- **Calls are read through their declarations.**  What a call's kernel does
  (its op kind, which operands it reads and writes) comes from the
  ``lowered.kernel`` it names, never from the registry.
- **Fused kernels come from the registry.**  A group is fused only when the
  registry has a kernel of the fused op kind (``fused_qkv``, ``fused_gate_up``,
  ``fused_add_rmsnorm``) for the program's mode, the operand dtypes and the
  parameters at hand (:func:`find_kernel`, which uses the lowering's own
  :func:`ckir.passes.lowering.kernels.select_kernel` and declares the kernel
  it picks in the model).
- **Calls move only when nothing in between notices.**  The fused call takes
  the place of one call of the group (the anchor); the others move there.
  :meth:`ProgramView.can_move` allows a move when no call passed over writes
  what the moved call reads, or reads or writes what it writes.  Buffers are
  compared by root (a view counts as its root buffer), so overlapping views
  are never reordered.
- **Buffer names that are still used stay; buffers that become unused go.**
  :func:`erase_unused` removes the program-local buffers (and their views)
  of a fused group that no call names any more, e.g. the gate/up outputs.
- **What fired is recorded** on the program as a dictionary attribute
  ``fused = {gate_up = 30 : i64, qkv = 30 : i64}`` (:func:`record`), so the
  printed IR and ``ckir inspect`` show which patterns fired and how often.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from xdsl.dialects.builtin import DictionaryAttr, IntegerAttr, ModuleOp
from xdsl.pattern_rewriter import (
    GreedyRewritePatternApplier,
    PatternRewriter,
    PatternRewriteWalker,
    RewritePattern,
)

from ckir.dialects import lowered as lw
from ckir.dialects.dims import TOKENS, scaled
from ckir.errors import CkirError
from ckir.passes.lowering.kernels import (
    ParamValue,
    declare_kernel,
    kernel_params,
    select_kernel,
)
from ckir.registry import KernelSpec, RegistryError

#: program attribute holding {pattern name: number of times it fired}
FUSED_ATTR = "fused"
#: roles of program buffers a fusion may delete once no call names them
REMOVABLE_ROLES = ("activation", "scratch")


@dataclass(frozen=True)
class Linear:
    """A call of a ``linear`` kernel: ``y = x · wᵀ (+ b)`` with M rows (1 in decode)."""

    call: lw.CallOp
    x: str
    w: str
    b: str | None
    y: str
    M: ParamValue
    N: int
    K: int


class ProgramView:
    """A snapshot of one program's calls: order, kernel declarations, buffer roots and dtypes.

    Cheap to build (one walk); rebuilt after every rewrite of the program.
    """

    def __init__(self, program: lw.ProgramOp) -> None:
        self.program = program
        self.mode = program.mode_name
        self.kernels: dict[str, lw.KernelOp] = {}
        self.calls: list[lw.CallOp] = program.calls()
        self.index: dict[int, int] = {id(c): i for i, c in enumerate(self.calls)}
        self.types: dict[str, lw.BufferType] = {}
        self.roots: dict[str, str] = {}
        self.local: dict[str, lw.BufferOp | lw.ViewOp] = {}
        model = program.parent_op()
        self.model = model if isinstance(model, lw.LoweredModelOp) else None
        containers = [model, program] if isinstance(model, lw.LoweredModelOp) else [program]
        for container in containers:
            for op in container.body_block.ops:
                if isinstance(op, lw.KernelOp):
                    self.kernels[op.kernel_name] = op
                elif isinstance(op, lw.BufferOp):
                    self.types[op.buffer_name] = op.buffer_type
                    self.roots[op.buffer_name] = op.buffer_name
                    if container is program:
                        self.local[op.buffer_name] = op
                elif isinstance(op, lw.ViewOp):
                    self.types[op.view_name] = op.view_type
                    self.roots[op.view_name] = op.root_name
                    if container is program:
                        self.local[op.view_name] = op
        self._reads: dict[int, frozenset[str]] = {}
        self._writes: dict[int, frozenset[str]] = {}
        self._linear: dict[int, Linear | None] = {}
        self._users: dict[str, list[lw.CallOp]] | None = None

    # -- calls ------------------------------------------------------------------------
    def decl(self, call: lw.CallOp) -> lw.KernelOp | None:
        """The ``lowered.kernel`` the call names (None when undeclared)."""
        return self.kernels.get(call.kernel_name)

    def kind(self, call: lw.CallOp) -> str | None:
        """The op kind of the call's kernel (``linear``, ``add``, ...), from its declaration."""
        decl = self.decl(call)
        return decl.kind_name if decl is not None else None

    def operands(
        self, call: lw.CallOp, kind: str, n_in: int, n_out: int
    ) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
        """``(in_names, out_names)`` of a ``kind`` call with ``n_in`` inputs and ``n_out``
        outputs; None for any other call."""
        if self.kind(call) != kind or len(call.in_names) != n_in or len(call.out_names) != n_out:
            return None
        return call.in_names, call.out_names

    def position(self, call: lw.CallOp) -> int:
        return self.index[id(call)]

    def root(self, name: str) -> str:
        return self.roots.get(name, name)

    def reads(self, call: lw.CallOp) -> frozenset[str]:
        """Roots the call reads (its inputs, and its readwrite outputs)."""
        key = id(call)
        if key not in self._reads:
            names = set(call.in_names)
            decl = self.decl(call)
            if decl is None:  # undeclared kernel: assume it reads its outputs too
                names |= set(call.out_names)
            else:
                outs = decl.outputs()
                names |= {
                    n
                    for n, o in zip(call.out_names, outs, strict=False)
                    if o.access_text == "readwrite"
                }
            self._reads[key] = frozenset(self.root(n) for n in names)
        return self._reads[key]

    def writes(self, call: lw.CallOp) -> frozenset[str]:
        key = id(call)
        if key not in self._writes:
            self._writes[key] = frozenset(self.root(n) for n in call.out_names)
        return self._writes[key]

    def uses(self, root: str) -> list[lw.CallOp]:
        """Calls that name ``root`` or one of its views, in program order."""
        if self._users is None:
            self._users = {}
            for c in self.calls:
                for r in sorted(self.reads(c) | self.writes(c)):
                    self._users.setdefault(r, []).append(c)
        return self._users.get(root, [])

    def last_writer_before(self, call: lw.CallOp, root: str) -> lw.CallOp | None:
        for c in reversed(self.calls[: self.position(call)]):
            if root in self.writes(c):
                return c
        return None

    def dtype(self, name: str) -> str:
        return self.types[name].dtype_name

    # -- moving -----------------------------------------------------------------------
    def can_move(self, call: lw.CallOp, to: lw.CallOp, group: Iterable[lw.CallOp]) -> bool:
        """Whether ``call`` may run at the position of ``to`` instead of its own.

        The calls strictly between the two positions, other than those of
        ``group`` (which fuse together), must not write what ``call`` reads and
        must not read or write what it writes.
        """
        i, j = self.position(call), self.position(to)
        skip = {id(c) for c in group}
        lo, hi = min(i, j), max(i, j)
        reads, writes = self.reads(call), self.writes(call)
        for other in self.calls[lo + 1 : hi]:
            if id(other) in skip:
                continue
            if self.writes(other) & (reads | writes) or self.reads(other) & writes:
                return False
        return True

    # -- linear calls ---------------------------------------------------------------
    def linear(self, call: lw.CallOp) -> Linear | None:
        """The call as a :class:`Linear` when its kernel implements ``linear`` (cached)."""
        key = id(call)
        if key not in self._linear:
            self._linear[key] = self._as_linear(call)
        return self._linear[key]

    def _as_linear(self, call: lw.CallOp) -> Linear | None:
        if self.kind(call) != "linear":
            return None
        ins, outs = call.in_names, call.out_names
        params = call.param_values
        if len(ins) not in (2, 3) or len(outs) != 1 or "N" not in params or "K" not in params:
            return None
        n, k = params["N"], params["K"]
        if not isinstance(n, int) or not isinstance(k, int):
            return None
        b = ins[2] if len(ins) == 3 else None
        return Linear(call, ins[0], ins[1], b, outs[0], params.get("M", 1), n, k)


def rows_times(rows: ParamValue, cols: int) -> ParamValue | None:
    """The element count ``rows * cols`` as a call parameter (``"T*64"`` for rows ``"T"``)."""
    if isinstance(rows, int):
        return rows * cols
    if rows == TOKENS:
        return scaled(TOKENS, cols)
    return None


def find_kernel(
    view: ProgramView,
    kind: str,
    ins: Sequence[str],
    outs: Sequence[str],
    params: Mapping[str, ParamValue],
) -> KernelSpec | None:
    """The registry kernel of op ``kind`` for this mode, these buffers' dtypes and params,
    declared in the model.

    None when the registry has none (the pass then leaves the calls alone).
    """
    try:
        spec = select_kernel(
            kind,
            view.mode,
            [view.dtype(n) for n in ins],
            [view.dtype(n) for n in outs],
            params,
            where=f"{view.mode} fusion",
        )
    except RegistryError:  # a broken registry file is the user's to hear about
        raise
    except CkirError:
        return None
    if view.model is not None:
        declare_kernel(view.model, spec)
    return spec


def make_call(
    spec: KernelSpec,
    ins: Sequence[str],
    outs: Sequence[str],
    params: Mapping[str, ParamValue],
    group: Sequence[lw.CallOp],
    tag: str,
) -> lw.CallOp:
    """The fused call; its origin lists the origins of the calls it replaces.

    ``#lowered.origin<scope "layers.0", fusion "fuse-add-rmsnorm", of [...]>``: the
    scope is the first replaced call's (what emit-c groups canary checks by).
    Replaced calls without an origin (hand-written IR) are left out of the list;
    if none has one, neither has the fused call.
    """
    parts = [c.origin for c in group if c.origin is not None]
    origin = lw.OriginAttr.fused(tag, parts) if parts else None
    return lw.CallOp.make(spec.name, ins, outs, kernel_params(spec, params), origin=origin)


def erase_unused(
    rewriter: PatternRewriter,
    view: ProgramView,
    names: Iterable[str],
    removed: Iterable[lw.CallOp],
    added: Iterable[lw.CallOp] = (),
) -> list[str]:
    """Erase the program-local buffers among ``names`` (and their views) no call names now.

    ``view`` is the snapshot taken before the rewrite that erased the calls
    ``removed`` and inserted ``added``.  Only activation/scratch buffers are
    removed; io buffers and model-level buffers always stay.  Returns the
    erased symbol names.
    """
    gone = {id(c) for c in removed}
    named = {view.root(n) for c in added for n in (*c.in_names, *c.out_names)}
    erased: list[str] = []
    for root in sorted({view.root(n) for n in names}):
        buf = view.local.get(root)
        if not isinstance(buf, lw.BufferOp) or buf.role not in REMOVABLE_ROLES or root in named:
            continue
        if any(id(c) not in gone for c in view.uses(root)):
            continue
        for name, op in list(view.local.items()):
            if isinstance(op, lw.ViewOp) and op.root_name == root:
                rewriter.erase(op)
                erased.append(name)
        rewriter.erase(buf)
        erased.append(root)
    return erased


def record(program: lw.ProgramOp, pattern: str, count: int) -> None:
    """Add ``count`` firings of ``pattern`` to the program's ``fused`` attribute."""
    if count <= 0:
        return
    old = program.attributes.get(FUSED_ATTR)
    counts: dict[str, int] = {}
    if isinstance(old, DictionaryAttr):
        for k, v in old.data.items():
            if isinstance(v, IntegerAttr):
                counts[k] = v.value.data
    counts[pattern] = counts.get(pattern, 0) + count
    program.attributes[FUSED_ATTR] = DictionaryAttr(
        {k: IntegerAttr(counts[k], 64) for k in sorted(counts)}
    )


def fused_counts(module: ModuleOp) -> dict[str, dict[str, int]]:
    """``{mode: {pattern: count}}`` of every program that records fusions."""
    out: dict[str, dict[str, int]] = {}
    for op in module.walk():
        if isinstance(op, lw.ProgramOp):
            attr = op.attributes.get(FUSED_ATTR)
            if isinstance(attr, DictionaryAttr):
                out[op.mode_name] = {
                    k: v.value.data for k, v in attr.data.items() if isinstance(v, IntegerAttr)
                }
    return out


class FusionPattern(RewritePattern):
    """Base of the fusion patterns: one program, a lazily rebuilt view, a firing count.

    Subclasses implement :meth:`fuse`, called for every ``lowered.call`` of the
    program; it returns True when it rewrote the program (the view is then
    rebuilt before the next match).
    """

    def __init__(self, program: lw.ProgramOp) -> None:
        self.program = program
        self.fired = 0
        self._view: ProgramView | None = None

    @property
    def view(self) -> ProgramView:
        if self._view is None:
            self._view = ProgramView(self.program)
        return self._view

    def match_and_rewrite(self, op: lw.CallOp, rewriter: PatternRewriter) -> None:  # type: ignore[override]
        if not isinstance(op, lw.CallOp) or op.parent_op() is not self.program:
            return
        if self.fuse(op, rewriter):
            self.fired += 1
            self._view = None

    def fuse(self, call: lw.CallOp, rewriter: PatternRewriter) -> bool:
        raise NotImplementedError

    def fuse_into(
        self,
        rewriter: PatternRewriter,
        kind: str,
        ins: Sequence[str],
        outs: Sequence[str],
        params: Mapping[str, ParamValue],
        group: Sequence[lw.CallOp],
        anchor: lw.CallOp,
        tag: str,
    ) -> lw.CallOp | None:
        """Replace ``group`` by one call of a ``kind`` kernel placed at ``anchor``; the call.

        None (nothing changed) when no kernel of that kind fits; ``tag`` (the pass
        name) goes into the fused call's origin."""
        spec = find_kernel(self.view, kind, ins, outs, params)
        if spec is None:
            return None
        fused = make_call(spec, ins, outs, params, group, tag)
        self.replace(rewriter, fused, anchor, group)
        return fused

    def replace(
        self,
        rewriter: PatternRewriter,
        fused: lw.CallOp,
        anchor: lw.CallOp,
        group: Sequence[lw.CallOp],
    ) -> None:
        """Put ``fused`` where ``anchor`` is and erase every call of ``group``."""
        from xdsl.rewriter import InsertPoint

        rewriter.insert(fused, InsertPoint.before(anchor))
        for c in group:
            rewriter.erase(c)


def run_fusion(
    module: ModuleOp, make_pattern: Callable[[lw.ProgramOp], FusionPattern], name: str
) -> dict[str, int]:
    """Apply one fusion pattern to every lowered.program; record and return counts per mode."""
    counts: dict[str, int] = {}
    programs = [op for op in module.walk() if isinstance(op, lw.ProgramOp)]
    if not programs:
        raise CkirError(
            f"fuse-{name.replace('_', '-')}: no lowered.program "
            "(run --lower-prefill or --lower-decode first)"
        )
    for program in programs:
        pattern = make_pattern(program)
        PatternRewriteWalker(
            GreedyRewritePatternApplier([pattern], dce_enabled=False),
            apply_recursively=False,
        ).rewrite_region(program.body)
        record(program, name, pattern.fired)
        counts[program.mode_name] = pattern.fired
    for model in {id(p.parent_op()): p.parent_op() for p in programs}.values():
        if isinstance(model, lw.LoweredModelOp):
            _erase_unused_kernels(model)
    return counts


def _erase_unused_kernels(model: lw.LoweredModelOp) -> None:
    """Remove the kernel declarations no call of the model names any more."""
    used = {op.kernel_name for op in model.walk() if isinstance(op, lw.CallOp)}
    for op in list(model.body_block.ops):
        if isinstance(op, lw.KernelOp) and op.kernel_name not in used:
            model.body_block.erase_op(op)
