"""The ``layout`` dialect: the memory plan of a lowered model, and its safety proof.

A ``layout.plan`` holds one ``layout.arena`` per memory region (``@weights``,
read-only and written into weights.bin; ``@state``, KV cache, activations, io,
scratch) and a final ``layout.totals``.  An arena holds one ``layout.slot`` per
root buffer (byte offset, size, role, the canary guard after it, the live range
of transient buffers) and ``layout.view``s aliasing a slot.

The verifier of a plan is the memory-safety proof: offsets and canaries are
aligned, every slot and canary lies inside its arena, no two slots whose bytes
overlap can be live at the same time, views lie inside their root, and the
totals are the sums of the slots.  Next to the ``lowered.model`` it plans, a plan is
also checked against it: every buffer and view has a slot (view) that holds its
bytes, and every call lies in the live range of every slot it names
(``PlanOp.planned_model``; a plan verified alone gets the layout checks only).

Example::

    layout.plan @tiny strategy "bump" align 64 canaries true {
      layout.arena @weights size 65600 {
        layout.slot @w.embed offset 0 size 65536 role weight canary 65536
      }
      layout.arena @state size 704 {
        layout.slot @decode.x offset 0 size 256 role activation canary 256 live "decode" 0 3
        layout.view @decode.q of @decode.x offset 0 size 128
      }
      layout.totals {activation = 256 : i64, weight = 65536 : i64}
    }

``ckir.backend.layout_writers`` renders a plan as layout.json / layout.map.
See docs/dialects/layout.md.
"""

from __future__ import annotations

import bisect
import heapq
import sys
from collections.abc import Mapping
from functools import lru_cache

from xdsl.dialects.builtin import (
    I64,
    ArrayAttr,
    DictionaryAttr,
    IntegerAttr,
    IntegerType,
    StringAttr,
    SymbolNameConstraint,
    SymbolRefAttr,
    UnitAttr,
    i64,
)
from xdsl.ir import Attribute, Block, Dialect, Region
from xdsl.irdl import (
    IRDLOperation,
    irdl_op_definition,
    opt_prop_def,
    prop_def,
    region_def,
    traits_def,
)
from xdsl.traits import HasParent, NoTerminator, SymbolOpInterface, SymbolTable
from xdsl.utils.exceptions import VerifyException

from ckir.dialects import lowered as lw
from ckir.dialects.common import SingleBody, Sized, ViewOf, int_entries, sym
from ckir.dialects.row_offset import RowOffset, make_rows, row_offset, rows_problem
from ckir.dialects.syntax import DIRECTIVES
from ckir.vocab import MODES, ROLES

__all__ = [
    "CANARY_BYTES",
    "ROLES",
    "STRATEGIES",
    "IO_ROLES",
    "ArenaOp",
    "IoOp",
    "Layout",
    "LayoutViewOp",
    "PlanOp",
    "SlotOp",
    "TotalsOp",
    "sym",
]

#: bytes of the guard written after every slot when canaries are on
CANARY_BYTES = 64
#: placement strategies
STRATEGIES: tuple[str, ...] = ("bump", "liveness")
_ROLE_SET = frozenset(ROLES)
#: the totals key for the bytes the liveness strategy saved over bump
SAVED = "saved"
#: totals key prefixes, followed by a mode: the bytes of the arena that mode uses
#: (``arena.decode``) and the most bytes live at once in it (``bound.decode``)
ARENA_KEY = "arena."
BOUND_KEY = "bound."
#: totals keys of ``--plan-views`` (passes/plan_views.py): the copies it removed (the
#: buffers a ``kv_store`` copied into the KV cache, now views at a run-time row of it:
#: recorded on the programs, equal to their run-time row views), and the bytes of the
#: buffers that became pure views or in-place aliases instead of slots of their own
#: (the sizes of the plan's views)
COPIES_KEY = "copies_removed"
VIEW_BYTES_KEY = "saved.views"
INPLACE_BYTES_KEY = "saved.inplace"
_VIEW_KEYS = (COPIES_KEY, VIEW_BYTES_KEY, INPLACE_BYTES_KEY)

_I1 = IntegerType(1)


@lru_cache(maxsize=65536)
def _int(value: int) -> IntegerAttr:
    return IntegerAttr(value, i64)


@lru_cache(maxsize=65536)
def _ref(name: str) -> SymbolRefAttr:
    return SymbolRefAttr(name)


# --------------------------------------------------------------------------- plan


@irdl_op_definition
class PlanOp(SingleBody, IRDLOperation):
    """The memory plan of a model: arenas, then ``layout.totals``.

    ``layout.plan @tiny strategy "liveness" align 64 canaries true { ... }``

    ``strategy`` is ``bump`` (deterministic reference: every buffer its own bytes) or
    ``liveness`` (activation slots reuse memory across disjoint live ranges);
    ``align`` is a power of two >= 8; ``canaries`` says whether every slot is
    followed by a ``CANARY_BYTES`` guard.  Like ``lowered.model`` it is a symbol
    table but not a symbol itself (``.sym_name`` still returns its name).
    """

    name = "layout.plan"

    plan_name = prop_def(SymbolNameConstraint())
    strategy = prop_def(StringAttr)
    align = prop_def(IntegerAttr[I64])
    canaries = prop_def(IntegerAttr)
    body = region_def("single_block")

    traits = traits_def(SymbolTable(), NoTerminator())

    custom_directives = DIRECTIVES
    assembly_format = (
        "$plan_name `strategy` $strategy `align` $align `canaries` custom<Flag>($canaries) "
        "attr-dict-with-keyword custom<Body>($body)"
    )

    @staticmethod
    def make(name: str, strategy: str, align: int, canaries: bool) -> PlanOp:
        return PlanOp.create(
            properties={
                "plan_name": StringAttr(name),
                "strategy": StringAttr(strategy),
                "align": _int(align),
                "canaries": IntegerAttr(int(bool(canaries)), _I1),
            },
            regions=[Region(Block())],
        )

    @property
    def sym_name(self) -> StringAttr:
        return self.plan_name

    @property
    def strategy_name(self) -> str:
        return self.strategy.data

    @property
    def align_bytes(self) -> int:
        return self.align.value.data

    @property
    def has_canaries(self) -> bool:
        return bool(self.canaries.value.data)

    def arenas(self) -> dict[str, ArenaOp]:
        return {op.arena_name: op for op in self.body.block.ops if isinstance(op, ArenaOp)}

    def totals(self) -> dict[str, int]:
        """The ``layout.totals`` values (empty when there is none)."""
        last = self.body.block.last_op
        return last.values() if isinstance(last, TotalsOp) else {}

    def planned_model(self) -> lw.LoweredModelOp | None:
        """The ``lowered.model`` this plan places, None when the plan stands alone.

        The planner names a plan after its model and inserts it after it, so this is
        the nearest ``lowered.model`` of the same name among the plan's siblings
        (preceding ones first); with none of that name, the only ``lowered.model`` of
        the block (the one ``--emit-c`` would pair the plan with), if there is exactly one.
        """
        block = self.parent_block()
        if block is None:
            return None
        before: list[lw.LoweredModelOp] = []
        after: list[lw.LoweredModelOp] = []
        seen = False
        for op in block.ops:
            if op is self:
                seen = True
            elif isinstance(op, lw.LoweredModelOp):
                (after if seen else before).append(op)
        name = self.plan_name.data
        named = [m for m in reversed(before) if m.model_name.data == name]
        named += [m for m in after if m.model_name.data == name]
        if named:
            return named[0]
        models = before + after
        return models[0] if len(models) == 1 else None

    def verify_(self) -> None:
        where = f"layout.plan {sym(self.plan_name.data)}"
        if self.strategy.data not in STRATEGIES:
            raise VerifyException(
                f'{where}: unknown strategy "{self.strategy.data}" (expected bump or liveness)'
            )
        align = self.align_bytes
        if align < 8 or align & (align - 1):
            raise VerifyException(f"{where}: align {align} must be a power of two >= 8")
        if not isinstance(self.canaries.type, IntegerType) or self.canaries.type.width.data != 1:
            raise VerifyException(f"{where}: canaries must be true or false")
        ops = list(self.body.block.ops)
        sums: dict[str, int] = {}
        names: dict[str, str] = {}
        totals: TotalsOp | None = None
        for i, op in enumerate(ops):
            if isinstance(op, TotalsOp):
                if i != len(ops) - 1:
                    raise VerifyException(f"{where}: layout.totals must be the last op")
                totals = op
            elif isinstance(op, ArenaOp):
                for inner in op.body.block.ops:
                    if isinstance(inner, SlotOp | LayoutViewOp):
                        name = inner.sym_name.data
                        if name in names:
                            raise VerifyException(
                                f"{where}: {sym(name)} is placed in both arena "
                                f"{sym(names[name])} and arena {sym(op.arena_name)}"
                            )
                        names[name] = op.arena_name
                    if isinstance(inner, SlotOp):
                        sums[inner.role] = sums.get(inner.role, 0) + inner.size_bytes
            elif not isinstance(op, IoOp):
                raise VerifyException(
                    f"{where}: '{op.name}' is not allowed in a plan (only layout.arena, "
                    "layout.io, layout.totals)"
                )
        if totals is None:
            raise VerifyException(f"{where}: needs a layout.totals as its last op")
        values = totals.values()
        for role in sorted(set(values) | set(sums)):
            if role == SAVED or role in _VIEW_KEYS or _mode_key(role) is not None:
                continue
            got = values.get(role)
            want = sums.get(role, 0)
            if got is None:
                raise VerifyException(
                    f"{where}: totals lack role {role} (its slots add up to {want} bytes)"
                )
            if got != want:
                raise VerifyException(
                    f"{where}: totals say {role} = {got} bytes but its slots add up to {want}"
                )
        model = self.planned_model()
        if model is not None:
            _ModelCheck(self, model, where).run()
        _check_manifest(self, model, where)
        _check_view_totals(self, values, where)
        # after the model check: a live range the program contradicts is named as such
        _check_bounds(self, values, where)

    def places(self) -> dict[str, tuple[str, int, int]]:
        """Slot or view name -> (arena, byte offset in it, bytes); a view's offset is its
        root's plus its own (views whose root is no slot of their arena are left out)."""
        out: dict[str, tuple[str, int, int]] = {}
        for arena in self.arenas().values():
            roots: dict[str, int] = {}
            for op in arena.body.block.ops:
                if isinstance(op, SlotOp):
                    roots[op.buffer_name] = op.offset_bytes
                    out[op.buffer_name] = (arena.arena_name, op.offset_bytes, op.size_bytes)
            for op in arena.body.block.ops:
                if isinstance(op, LayoutViewOp) and op.root_name in roots:
                    at = roots[op.root_name] + op.offset_bytes
                    out[op.view_name] = (arena.arena_name, at, op.size_bytes)
        return out

    def io_handles(self) -> list[IoOp]:
        """The ``layout.io`` handles of the plan (its I/O manifest), in order."""
        return [op for op in self.body.block.ops if isinstance(op, IoOp)]


# --------------------------------------------------------------------------- arena


_Extent = tuple[int, int, "SlotOp"]


def _first_clash(extents: list[_Extent]) -> tuple[_Extent, _Extent] | None:
    """Two slots that share a byte (canaries included) and may be live together, or None.

    A sweep over byte offsets.  The slots still open at a slot's start all contain that
    byte, so (the plan being safe so far) the open slots of one mode have disjoint live
    ranges: kept sorted by first call, one bisection finds the only candidate that can
    meet a new range.  A permanent slot (no ``live``) meets every open slot.  Costs
    O(n log n) comparisons whatever the number of slots sharing bytes.
    """
    extents = sorted(extents, key=lambda e: (e[0], e[1]))
    open_slots: dict[int, _Extent] = {}  # in opening order
    permanent: dict[int, _Extent] = {}
    closing: list[tuple[int, int]] = []  # heap of (end, index)
    lines: dict[str, list[tuple[int, int, int]]] = {}  # mode -> sorted (first, last, index)
    for index, ext in enumerate(extents):
        start, end, op = ext
        if start == end:
            continue
        while closing and closing[0][0] <= start:
            _, gone = heapq.heappop(closing)
            live = open_slots.pop(gone)[2].live_range
            if live is None:
                del permanent[gone]
            else:
                line = lines[live[0]]
                del line[bisect.bisect_left(line, (live[1], live[2], gone))]
        live = op.live_range
        if live is None:
            other = next(iter(open_slots.values()), None)
        else:
            other = next(iter(permanent.values()), None)
            line = lines.setdefault(live[0], [])
            at = bisect.bisect_right(line, (live[2], sys.maxsize, sys.maxsize))
            if other is None and at and line[at - 1][1] >= live[1]:
                other = open_slots[line[at - 1][2]]
        if other is not None:
            return other, ext
        open_slots[index] = ext
        heapq.heappush(closing, (end, index))
        if live is None:
            permanent[index] = ext
        else:
            bisect.insort(lines[live[0]], (live[1], live[2], index))
    return None


def _fmt_live(live: tuple[str, int, int] | None) -> str:
    return "the whole run" if live is None else f'"{live[0]}" {live[1]}..{live[2]}'


@irdl_op_definition
class ArenaOp(SingleBody, IRDLOperation):
    """One contiguous memory region of ``size`` bytes holding slots and views.

    ``layout.arena @state size 9000 { layout.slot ... ; layout.view ... }``

    The verifier proves the arena safe: aligned offsets and canaries, everything in
    bounds, no two simultaneously live slots sharing a byte, views inside their root.
    """

    name = "layout.arena"

    sym_name = prop_def(SymbolNameConstraint())
    size = prop_def(IntegerAttr[I64])
    body = region_def("single_block")

    custom_directives = DIRECTIVES
    assembly_format = "$sym_name `size` $size attr-dict-with-keyword custom<Body>($body)"

    traits = traits_def(SymbolOpInterface(), SymbolTable(), HasParent(PlanOp), NoTerminator())

    @staticmethod
    def make(name: str, size: int) -> ArenaOp:
        return ArenaOp.create(
            properties={"sym_name": StringAttr(name), "size": _int(size)},
            regions=[Region(Block())],
        )

    @property
    def arena_name(self) -> str:
        return self.sym_name.data

    @property
    def size_bytes(self) -> int:
        return self.size.value.data

    def slots(self) -> list[SlotOp]:
        return [op for op in self.body.block.ops if isinstance(op, SlotOp)]

    def views(self) -> list[LayoutViewOp]:
        return [op for op in self.body.block.ops if isinstance(op, LayoutViewOp)]

    def verify_(self) -> None:
        where = f"layout.arena {sym(self.arena_name)}"
        size = self.size_bytes
        if size < 0:
            raise VerifyException(f"{where}: size {size} is negative")
        plan = self.parent_op()
        align = plan.align_bytes if isinstance(plan, PlanOp) else 1
        canaries = plan.has_canaries if isinstance(plan, PlanOp) else None
        if align <= 0:
            align = 1
        slots: dict[str, SlotOp] = {}
        extents: list[tuple[int, int, SlotOp]] = []
        for op in self.body.block.ops:
            if isinstance(op, SlotOp):
                s = sym(op.buffer_name)
                off, n = op.offset_bytes, op.size_bytes
                if off % align:
                    raise VerifyException(
                        f"{where}: slot {s} offset {off} is not a multiple of align {align}"
                    )
                end = off + n
                canary = op.canary_offset
                if canary is not None:
                    if canaries is False:
                        raise VerifyException(
                            f"{where}: slot {s} has a canary but the plan has canaries false"
                        )
                    if canary % align:
                        raise VerifyException(
                            f"{where}: slot {s} canary offset {canary} is not a multiple of "
                            f"align {align}"
                        )
                    if canary < end:
                        raise VerifyException(
                            f"{where}: slot {s} canary at {canary} starts inside the slot "
                            f"[{off}, {end})"
                        )
                    end = canary + CANARY_BYTES
                elif canaries:
                    raise VerifyException(
                        f"{where}: slot {s} has no canary but the plan has canaries true"
                    )
                if end > size:
                    raise VerifyException(
                        f"{where}: slot {s} bytes [{off}, {end}) (with canary) exceed the "
                        f"arena size {size}"
                    )
                slots[op.buffer_name] = op
                extents.append((off, end, op))
            elif not isinstance(op, LayoutViewOp):
                raise VerifyException(
                    f"{where}: '{op.name}' is not allowed in an arena (only layout.slot, "
                    "layout.view)"
                )
        clash = _first_clash(extents)
        if clash is not None:
            (a_start, a_end, other), (start, end, op) = clash
            lo, hi = max(a_start, start), min(a_end, end)
            raise VerifyException(
                f"{where}: slots {sym(other.buffer_name)} and {sym(op.buffer_name)} "
                f"overlap in bytes [{lo}, {hi}) while both are live "
                f"({_fmt_live(other.live_range)} / {_fmt_live(op.live_range)})"
            )
        for op in self.body.block.ops:
            if isinstance(op, LayoutViewOp):
                v = sym(op.view_name)
                root = slots.get(op.root_name)
                if root is None:
                    kind = (
                        "a view"
                        if any(
                            isinstance(o, LayoutViewOp) and o.view_name == op.root_name
                            for o in self.body.block.ops
                        )
                        else "not a slot of this arena"
                    )
                    raise VerifyException(f"{where}: view {v} root {sym(op.root_name)} is {kind}")
                if op.offset_bytes < 0 or op.offset_bytes + op.size_bytes > root.size_bytes:
                    raise VerifyException(
                        f"{where}: view {v} bytes [{op.offset_bytes}, "
                        f"{op.offset_bytes + op.size_bytes}) exceed its root "
                        f"{sym(op.root_name)} of {root.size_bytes} bytes"
                    )
                rows = op.row_offset
                if rows is not None and any(
                    n % rows[1] for n in (root.size_bytes, op.size_bytes, op.offset_bytes)
                ):
                    raise VerifyException(
                        f"{where}: view {v} at a run-time row of {rows[1]} bytes is no whole "
                        f"rows of its root {sym(op.root_name)} (offset {op.offset_bytes}, "
                        f"size {op.size_bytes}, root {root.size_bytes} bytes)"
                    )


# --------------------------------------------------------------------------- slot / view


@irdl_op_definition
class SlotOp(Sized, IRDLOperation):
    """The bytes of one root buffer in an arena.

    ``layout.slot @decode.x offset 0 size 256 role activation canary 256 live "decode" 0 3``

    ``canary`` is the byte offset of the ``CANARY_BYTES`` guard after the slot
    (absent when canaries are off).  ``live "<mode>" first last`` is the range of
    call indices of that mode's program that use the buffer; without it the slot
    is live for the whole run (weights, KV cache, io).
    """

    name = "layout.slot"

    sym_name = prop_def(SymbolNameConstraint())
    offset = prop_def(IntegerAttr[I64])
    size = prop_def(IntegerAttr[I64])
    slot_role = prop_def(StringAttr)
    canary = opt_prop_def(IntegerAttr[I64])
    live = opt_prop_def(ArrayAttr)

    traits = traits_def(SymbolOpInterface(), HasParent(ArenaOp))

    custom_directives = DIRECTIVES
    assembly_format = (
        "$sym_name `offset` $offset `size` $size `role` custom<SlotRole>($slot_role) "
        "(`canary` $canary^)? custom<Live>($live) attr-dict-with-keyword"
    )

    @staticmethod
    def make(
        buffer: str,
        offset: int,
        size: int,
        role: str,
        canary: int | None = None,
        live: tuple[str, int, int] | None = None,
    ) -> SlotOp:
        props: dict[str, Attribute] = {
            "sym_name": StringAttr(buffer),
            "offset": _int(offset),
            "size": _int(size),
            "slot_role": StringAttr(role),
        }
        if canary is not None:
            props["canary"] = _int(canary)
        if live is not None:
            mode, first, last = live
            props["live"] = ArrayAttr((StringAttr(mode), _int(first), _int(last)))
        return SlotOp.create(properties=props)

    @property
    def buffer_name(self) -> str:
        return self.sym_name.data

    @property
    def role(self) -> str:
        return self.slot_role.data

    @property
    def canary_offset(self) -> int | None:
        return self.canary.value.data if self.canary is not None else None

    @property
    def live_range(self) -> tuple[str, int, int] | None:
        """``(mode, first call, last call)``, or None: live for the whole run."""
        if self.live is None:
            return None
        mode, first, last = self.live.data
        assert isinstance(mode, StringAttr)
        assert isinstance(first, IntegerAttr) and isinstance(last, IntegerAttr)
        return mode.data, first.value.data, last.value.data

    @property
    def end_bytes(self) -> int:
        """One past the last byte, canary included."""
        if self.canary is not None:
            return self.canary.value.data + CANARY_BYTES
        return self.offset_bytes + self.size_bytes

    def verify_(self) -> None:
        where = f"layout.slot {sym(self.buffer_name)}"
        if self.role not in _ROLE_SET:
            raise VerifyException(
                f"{where}: unknown role '{self.role}' (expected one of {', '.join(ROLES)})"
            )
        if self.offset_bytes < 0:
            raise VerifyException(f"{where}: offset {self.offset_bytes} is negative")
        if self.size_bytes < 0:
            raise VerifyException(f"{where}: size {self.size_bytes} is negative")
        if self.live is not None:
            data = self.live.data
            if (
                len(data) != 3
                or not isinstance(data[0], StringAttr)
                or not isinstance(data[1], IntegerAttr)
                or not isinstance(data[2], IntegerAttr)
            ):
                raise VerifyException(f'{where}: live must be ["<mode>", first, last]')
            mode, first, last = self.live_range or ("", 0, 0)
            if mode not in MODES:
                raise VerifyException(
                    f'{where}: live mode "{mode}" is not one of {", ".join(MODES)}'
                )
            if first < 0 or last < first:
                raise VerifyException(f"{where}: live range {first}..{last} is empty or negative")


@irdl_op_definition
class LayoutViewOp(ViewOf, Sized, IRDLOperation):
    """An alias of part of a root slot of the same arena.

    ``layout.view @prefill.k of @prefill.qkv offset 1024 size 512``

    ``0 <= offset`` and ``offset + size <= root size``; the root is a slot, not a view.

    ``inplace`` marks an in-place reuse made by ``--plan-views``: an elementwise call's
    output written over an input that dies at that call, so it aliases the input's
    root from offset 0 (its own bytes never needed a slot):

    ``layout.view @prefill.layers.0.x1 of @prefill.layers.0.o offset 0 size 32768 inplace``

    A run-time row offset (``ckir.dialects.row_offset``, made by ``--plan-views`` for the
    KV append) starts the view at root row ``P`` of the call: its first byte is
    ``offset + P * row_bytes`` of the root.  The arena checks it at ``P = 0`` (inside
    its root, whole rows of the root); the entry points keep ``P + T <= max_context``:

    ``layout.view @decode.layers.0.k of @kv.layers.0.k offset 0 + P * 128 size 128``
    """

    name = "layout.view"

    sym_name = prop_def(SymbolNameConstraint())
    root = prop_def(SymbolRefAttr)
    offset = prop_def(IntegerAttr[I64])
    rows = opt_prop_def(ArrayAttr)
    size = prop_def(IntegerAttr[I64])
    inplace = opt_prop_def(UnitAttr)

    traits = traits_def(SymbolOpInterface(), HasParent(ArenaOp))

    custom_directives = (RowOffset,)
    assembly_format = (
        "$sym_name `of` $root `offset` $offset custom<RowOffset>($rows) `size` $size "
        "(`inplace` $inplace^)? attr-dict-with-keyword"
    )

    @staticmethod
    def make(
        name: str,
        root: str,
        offset: int,
        size: int,
        inplace: bool = False,
        rows: tuple[str, int] | None = None,
    ) -> LayoutViewOp:
        props: dict[str, Attribute] = {
            "sym_name": StringAttr(name),
            "root": _ref(root.data if isinstance(root, StringAttr) else root),
            "offset": _int(offset),
            "size": _int(size),
        }
        if inplace:
            props["inplace"] = UnitAttr()
        if rows is not None:
            props["rows"] = make_rows(*rows)
        return LayoutViewOp.create(properties=props)

    @property
    def is_inplace(self) -> bool:
        return self.inplace is not None

    @property
    def row_offset(self) -> tuple[str, int] | None:
        """``(run-time symbol, bytes per row)`` of a run-time row offset, or None."""
        return row_offset(self.rows)

    def verify_(self) -> None:
        where = f"layout.view {sym(self.view_name)}"
        if self.size_bytes < 0:
            raise VerifyException(f"{where}: size {self.size_bytes} is negative")
        problem = rows_problem(self.rows)
        if problem is not None:
            raise VerifyException(f"{where}: {problem}")
        if self.is_inplace and self.rows is not None:
            raise VerifyException(
                f"{where}: an inplace view writes over its root from offset 0; it has no "
                "run-time row offset"
            )
        if self.is_inplace and self.offset_bytes != 0:
            raise VerifyException(
                f"{where}: an inplace view writes over its root from offset 0, "
                f"not {self.offset_bytes}"
            )


# --------------------------------------------------------------------------- totals


@irdl_op_definition
class TotalsOp(IRDLOperation):
    """Bytes per role (root slots only) and ``saved`` (liveness vs bump); last op of a plan.

    ``layout.totals {activation = 256 : i64, io = 4 : i64, saved = 0 : i64, weight = 65536 : i64}``
    """

    name = "layout.totals"

    totals = prop_def(DictionaryAttr)

    traits = traits_def(HasParent(PlanOp))

    assembly_format = "$totals attr-dict-with-keyword"

    @staticmethod
    def make(totals: Mapping[str, int]) -> TotalsOp:
        """Keys are sorted, so the printed text is deterministic."""
        return TotalsOp.create(
            properties={"totals": DictionaryAttr({k: _int(totals[k]) for k in sorted(totals)})}
        )

    def values(self) -> dict[str, int]:
        return int_entries(self.totals)

    def verify_(self) -> None:
        for k, v in self.totals.data.items():
            known = k == SAVED or k in _ROLE_SET or k in _VIEW_KEYS
            if not known and _mode_key(k) is None:
                raise VerifyException(
                    f"layout.totals: unknown key '{k}' (expected a role, '{SAVED}', "
                    f"'{ARENA_KEY}<mode>', '{BOUND_KEY}<mode>' or one of {', '.join(_VIEW_KEYS)})"
                )
            if not isinstance(v, IntegerAttr):
                raise VerifyException(f"layout.totals: {k} must be an integer")
            if v.value.data < 0:
                raise VerifyException(f"layout.totals: {k} = {v.value.data} must be >= 0")


# --------------------------------------------------------------------------- lower bound


def _mode_key(key: str) -> tuple[str, str] | None:
    """``("arena" | "bound", mode)`` for a per-mode totals key, else None."""
    for prefix in (ARENA_KEY, BOUND_KEY):
        if key.startswith(prefix) and key[len(prefix) :] in MODES:
            return prefix[:-1], key[len(prefix) :]
    return None


def footprint(size: int, align: int, canaries: bool) -> int:
    """The bytes a slot of ``size`` bytes takes from an aligned offset to the next aligned
    offset after it: its size rounded up to ``align``, plus its canary (also rounded up).

    This is how alignment counts in the lower bound: no plan with this alignment and
    canary setting can place a slot in fewer bytes, so a plan can reach the bound."""
    fp = -(-size // align) * align
    if canaries:
        fp += -(-CANARY_BYTES // align) * align
    return fp


def mode_usage(plan: PlanOp) -> dict[str, tuple[int, int]]:
    """Per mode: ``(arena bytes, lower bound)`` of the arenas holding that mode's slots.

    A mode's arena bytes are the end of the last slot (canary included, rounded up to
    ``align``) among the permanent slots and the slots live in that mode: what the arena
    would need if only that mode ran.  The lower bound is the most bytes live at once:
    the footprints (:func:`footprint`) of the permanent slots plus the maximum, over the
    mode's call indices, of the footprints of the slots whose ``live`` range contains
    the call.  It uses the ``live`` ranges the planner derived and the verifier checks
    against the program, so it holds for any placement of these slots.  Arenas without
    ``live`` slots (``@weights``) have no modes.
    """
    align = plan.align_bytes
    canaries = plan.has_canaries
    out: dict[str, tuple[int, int]] = {}
    for arena in plan.arenas().values():
        perm_end = 0
        perm_fp = 0
        ends: dict[str, int] = {}
        events: dict[str, list[tuple[int, int]]] = {}
        for slot in arena.slots():
            live = slot.live_range
            fp = footprint(slot.size_bytes, align, canaries)
            if live is None:
                perm_end = max(perm_end, slot.end_bytes)
                perm_fp += fp
                continue
            mode, first, last = live
            ends[mode] = max(ends.get(mode, 0), slot.end_bytes)
            ev = events.setdefault(mode, [])
            ev.append((first, fp))
            ev.append((last + 1, -fp))
        for mode, ev in events.items():
            ev.sort()
            cur = peak = 0
            for _, delta in ev:
                cur += delta
                peak = max(peak, cur)
            used = -(-max(perm_end, ends[mode]) // align) * align
            a, b = out.get(mode, (0, 0))
            out[mode] = (a + used, b + perm_fp + peak)
    return dict(sorted(out.items()))


def usage_totals(plan: PlanOp) -> dict[str, int]:
    """The ``arena.<mode>`` / ``bound.<mode>`` totals entries of a plan."""
    out: dict[str, int] = {}
    for mode, (used, bound) in mode_usage(plan).items():
        out[ARENA_KEY + mode] = used
        out[BOUND_KEY + mode] = bound
    return out


def _check_bounds(plan: PlanOp, values: Mapping[str, int], where: str) -> None:
    """Per-mode totals, where present, equal what the slots say."""
    keys = [k for k in values if _mode_key(k) is not None]
    if not keys:
        return
    want = usage_totals(plan)
    for k in sorted(keys):
        if k not in want:
            raise VerifyException(f"{where}: totals give {k} but no slot is live in that mode")
        if values[k] != want[k]:
            raise VerifyException(
                f"{where}: totals say {k} = {values[k]} bytes but the slots give {want[k]}"
            )


def view_totals(plan: PlanOp) -> dict[str, int]:
    """``saved.views`` / ``saved.inplace``: the bytes of the plan's pure and in-place views
    (what their buffers would have taken as slots of their own)."""
    pure = inplace = 0
    for arena in plan.arenas().values():
        for view in arena.views():
            if view.is_inplace:
                inplace += view.size_bytes
            else:
                pure += view.size_bytes
    return {VIEW_BYTES_KEY: pure, INPLACE_BYTES_KEY: inplace}


def _check_view_totals(plan: PlanOp, values: Mapping[str, int], where: str) -> None:
    """``saved.views`` / ``saved.inplace``, where present, equal the sizes of the views;
    next to the model, ``copies_removed`` equals what its programs record."""
    want = view_totals(plan)
    for key, bytes_ in want.items():
        if key in values and values[key] != bytes_:
            raise VerifyException(
                f"{where}: totals say {key} = {values[key]} bytes but the views give {bytes_}"
            )
    model = plan.planned_model()
    if COPIES_KEY in values and model is not None:
        copies = 0
        for program in model.programs().values():
            recorded = views_recorded(program).get("copies", 0)
            # each copy removed is a buffer now written in place at a run-time row
            rows = sum(
                1
                for op in program.body_block.ops
                if isinstance(op, lw.ViewOp) and op.row_offset is not None
            )
            if recorded != rows:
                raise VerifyException(
                    f"{where}: lowered.program {sym(program.sym_name.data)} records {recorded} "
                    f"copies removed but has {rows} views at a run-time row"
                )
            copies += recorded
        if values[COPIES_KEY] != copies:
            raise VerifyException(
                f"{where}: totals say {COPIES_KEY} = {values[COPIES_KEY]} but the programs "
                f"record {copies} copies removed"
            )


#: the attribute ``--plan-views`` records on a ``lowered.program`` (``{copies, inplace}``
#: counts) and the unit attribute it puts on the ``lowered.view`` of an in-place reuse
VIEWS_ATTR = "views"
INPLACE_ATTR = "inplace"


def views_recorded(program: lw.ProgramOp) -> dict[str, int]:
    """The counts ``--plan-views`` recorded on ``program`` (empty when it did not run)."""
    attr = program.attributes.get(VIEWS_ATTR)
    return int_entries(attr) if isinstance(attr, DictionaryAttr) else {}


# --------------------------------------------------------------------------- plan vs model


def _rows_text(rows: tuple[str, int] | None) -> str:
    """``+ P * 128`` or ``none``, for messages."""
    return "none" if rows is None else f"+ {rows[0]} * {rows[1]}"


def _describe(ty: lw.BufferType) -> str:
    """``[1, 256] f32, 1024 bytes``: a buffer type and its storage size, for messages."""
    shape = ", ".join(str(d) for d in ty.shape_ints)
    return f"[{shape}] {ty.dtype_name}, {ty.byte_size} bytes"


class _ModelCheck:
    """The plan checked against the ``lowered.model`` it places (``PlanOp.verify_``).

    Sizes: every lowered buffer has one slot of its role holding its bytes, every
    lowered view a ``layout.view`` at the same root and offset holding its bytes, and
    every slot and view places a symbol of the model.  Lifetimes: every call that
    names a buffer (directly or through a view) lies in its slot's live range, whose
    mode is the call's program's.  Index maps are built once: linear in the number of
    buffers, views and call operands.
    """

    def __init__(self, plan: PlanOp, model: lw.LoweredModelOp, where: str) -> None:
        self.where = where
        self.model = model
        self.slots: dict[str, SlotOp] = {}
        self.views: dict[str, LayoutViewOp] = {}
        for arena in plan.body.block.ops:
            if isinstance(arena, ArenaOp):
                for op in arena.body.block.ops:
                    if isinstance(op, SlotOp):
                        self.slots[op.buffer_name] = op
                    elif isinstance(op, LayoutViewOp):
                        self.views[op.view_name] = op
        #: every lowered buffer and view -> where it is declared
        self.declared: dict[str, str] = {}

    def run(self) -> None:
        """Raise a one-line VerifyException on the first mismatch."""
        model_ref = f"lowered.model {sym(self.model.model_name.data)}"
        model_roots = self._declare(self.model.body.block, model_ref)
        programs: list[tuple[lw.ProgramOp, dict[str, str]]] = []
        for op in self.model.body.block.ops:
            if isinstance(op, lw.ProgramOp):
                ref = f"lowered.program {sym(op.sym_name.data)}"
                programs.append((op, {**model_roots, **self._declare(op.body.block, ref)}))
        for name in self.slots:
            if name not in self.declared:
                raise VerifyException(
                    f"{self.where}: slot {sym(name)} places no buffer of {model_ref}"
                )
        for name in self.views:
            if name not in self.declared:
                raise VerifyException(
                    f"{self.where}: layout.view {sym(name)} places no view of {model_ref}"
                )
        for program, roots in programs:
            self._live(program, roots)

    def _declare(self, block: Block, ref: str) -> dict[str, str]:
        """Check the buffers and views of ``block``; return its views' roots by name."""
        roots: dict[str, str] = {}
        for op in block.ops:
            if isinstance(op, lw.BufferOp | lw.ViewOp):
                self._note(op.sym_name.data, ref)
                self._place(op, ref)
                if isinstance(op, lw.ViewOp):
                    roots[op.view_name] = op.root_name
        return roots

    def _note(self, name: str, ref: str) -> None:
        other = self.declared.get(name)
        if other is not None:
            raise VerifyException(
                f"{self.where}: {sym(name)} is declared in both {other} and {ref}, "
                "but a plan has one slot per name"
            )
        self.declared[name] = ref

    def _place(self, op: lw.BufferOp | lw.ViewOp, ref: str) -> None:
        """A buffer's slot (or a view's ``layout.view``) exists, holds it and matches it."""
        is_buffer = isinstance(op, lw.BufferOp)
        name = sym(op.sym_name.data)
        kind, want = ("buffer", "slot") if is_buffer else ("view", "layout.view")
        table, other = (self.slots, self.views) if is_buffer else (self.views, self.slots)
        placed = table.get(op.sym_name.data)
        if placed is None:
            hint = ""
            if op.sym_name.data in other:
                hint = " (only a layout.view)" if is_buffer else " (a slot instead)"
            raise VerifyException(f"{self.where}: {kind} {name} of {ref} has no {want}{hint}")
        ty = op.buffer_type
        if placed.size_bytes < ty.byte_size:
            raise VerifyException(
                f"{self.where}: {want} {name} of {placed.size_bytes} bytes cannot hold {kind} "
                f"{name} of {ref} ({_describe(ty)})"
            )
        if isinstance(op, lw.BufferOp) and isinstance(placed, SlotOp) and placed.role != op.role:
            raise VerifyException(
                f"{self.where}: slot {name} has role {placed.role} but buffer {name} of "
                f"{ref} has role {op.role}"
            )
        if isinstance(placed, LayoutViewOp) and isinstance(op, lw.ViewOp):
            if placed.is_inplace != (INPLACE_ATTR in op.attributes):
                plan_says, ir_says = ("is", "is not") if placed.is_inplace else ("is not", "is")
                raise VerifyException(
                    f"{self.where}: layout.view {name} {plan_says} inplace but view {name} "
                    f"of {ref} {ir_says}"
                )
            at = (op.root_name, op.offset_bytes)
            if (placed.root_name, placed.offset_bytes) != at:
                raise VerifyException(
                    f"{self.where}: layout.view {name} is {sym(placed.root_name)} + "
                    f"{placed.offset_bytes} but view {name} of {ref} is {sym(at[0])} + {at[1]}"
                )
            if placed.row_offset != op.row_offset:
                raise VerifyException(
                    f"{self.where}: layout.view {name} has run-time row offset "
                    f"{_rows_text(placed.row_offset)} but view {name} of {ref} has "
                    f"{_rows_text(op.row_offset)}"
                )

    def _live(self, program: lw.ProgramOp, roots: dict[str, str]) -> None:
        """Every call of ``program`` lies in the live range of every slot it names.

        Call indices count the program's ``lowered.call``s from 0, as the planner does.
        """
        mode = program.mode_name
        ref = f"lowered.program {sym(program.sym_name.data)}"
        index = 0
        for op in program.body.block.ops:
            if not isinstance(op, lw.CallOp):
                continue
            for verb, names in (("reads", op.in_names), ("writes", op.out_names)):
                for name in names:
                    root = roots.get(name, name)
                    slot = self.slots.get(root)
                    live = slot.live_range if slot is not None else None
                    if live is None or (live[0] == mode and live[1] <= index <= live[2]):
                        continue
                    what = sym(root) if root == name else f"{sym(name)} (a view of {sym(root)})"
                    raise VerifyException(
                        f"{self.where}: call {index} ({sym(op.kernel_name)}) of {ref} {verb} "
                        f"{what}, but slot {sym(root)} is live only for "
                        f'"{live[0]}" calls {live[1]}..{live[2]}'
                    )
            index += 1


# --------------------------------------------------------------------------- I/O manifest

#: what an I/O handle is to a caller: written before a call (input), the model's
#: trained or loaded values (param), kept across calls (state: KV cache, gradients,
#: optimizer moments), read after a call (output)
IO_ROLES: tuple[str, ...] = ("input", "param", "state", "output")


@irdl_op_definition
class IoOp(IRDLOperation):
    """One named handle of the plan's I/O manifest: where a caller reads or writes it.

    ``layout.io "prefill.tokens" role "input" mode "prefill" slot @prefill.header.tokens
    : !lowered.buf<[128], i32> dims ["T"] at @state offset 8448``

    ``role`` is one of :data:`IO_ROLES`; ``mode`` (absent for params and state) the
    program it belongs to; ``slot`` the slot or view holding its bytes, in arena
    ``at``, at byte ``offset``; the type its dtype and (largest) shape; ``dims`` one
    entry per dimension: ``""`` when the dimension is static, else the run-time symbol
    it follows (``T`` tokens of the call, ``PT`` positions filled in the KV cache).
    Handles live in a ``layout.plan``, after its arenas; the plan's verifier checks
    each against the slot it names (arena, offset, bytes) and, next to the
    ``lowered.model``, against the buffer (dtype, shape).
    """

    name = "layout.io"

    handle = prop_def(StringAttr)
    io_role = prop_def(StringAttr)
    mode = opt_prop_def(StringAttr)
    slot = prop_def(SymbolRefAttr)
    io_type = prop_def(lw.BufferType)
    dims = prop_def(ArrayAttr)
    arena = prop_def(SymbolRefAttr)
    offset = prop_def(IntegerAttr[I64])

    traits = traits_def(HasParent(PlanOp))

    assembly_format = (
        "$handle `role` $io_role (`mode` $mode^)? `slot` $slot `:` qualified($io_type) "
        "`dims` $dims `at` $arena `offset` $offset attr-dict-with-keyword"
    )

    @staticmethod
    def make(
        handle: str,
        role: str,
        mode: str | None,
        slot: str,
        type: lw.BufferType,
        dims: tuple[str, ...],
        arena: str,
        offset: int,
    ) -> IoOp:
        props: dict[str, Attribute] = {
            "handle": StringAttr(handle),
            "io_role": StringAttr(role),
            "slot": _ref(slot),
            "io_type": type,
            "dims": ArrayAttr(tuple(StringAttr(d) for d in dims)),
            "arena": _ref(arena),
            "offset": _int(offset),
        }
        if mode is not None:
            props["mode"] = StringAttr(mode)
        return IoOp.create(properties=props)

    @property
    def handle_name(self) -> str:
        return self.handle.data

    @property
    def role(self) -> str:
        return self.io_role.data

    @property
    def mode_name(self) -> str | None:
        return self.mode.data if self.mode is not None else None

    @property
    def slot_name(self) -> str:
        return self.slot.root_reference.data

    @property
    def arena_name(self) -> str:
        return self.arena.root_reference.data

    @property
    def offset_bytes(self) -> int:
        return self.offset.value.data

    @property
    def dim_symbols(self) -> tuple[str, ...]:
        return tuple(d.data if isinstance(d, StringAttr) else "?" for d in self.dims.data)

    def verify_(self) -> None:
        where = f'layout.io "{self.handle_name}"'
        if self.role not in IO_ROLES:
            raise VerifyException(
                f"{where}: unknown role '{self.role}' (expected one of {', '.join(IO_ROLES)})"
            )
        mode = self.mode_name
        if mode is not None and mode not in MODES:
            raise VerifyException(f'{where}: mode "{mode}" is not one of {", ".join(MODES)}')
        if not all(isinstance(d, StringAttr) for d in self.dims.data):
            raise VerifyException(f'{where}: dims must be strings ("" for a static dim)')
        rank = len(self.io_type.shape_ints)
        if len(self.dims.data) != rank:
            raise VerifyException(f"{where}: {len(self.dims.data)} dims for a shape of rank {rank}")
        if self.offset_bytes < 0:
            raise VerifyException(f"{where}: offset {self.offset_bytes} is negative")


def _check_manifest(plan: PlanOp, model: lw.LoweredModelOp | None, where: str) -> None:
    """Every ``layout.io`` of ``plan`` tells the truth about the slot (view) it names.

    Arena, offset (a view's: its root's plus its own) and byte size are checked against
    the plan; dtype and shape against the buffer or view of ``model`` (when the plan
    is verified next to it).  Handle names are unique.
    """
    handles = plan.io_handles()
    if not handles:
        return
    places = plan.places()
    types: dict[str, lw.BufferType] = {}
    if model is not None:
        for op in model.walk():
            if isinstance(op, lw.BufferOp):
                types[op.buffer_name] = op.buffer_type
            elif isinstance(op, lw.ViewOp):
                types[op.view_name] = op.view_type
    seen: set[str] = set()
    for io in handles:
        h = f'io handle "{io.handle_name}"'
        if io.handle_name in seen:
            raise VerifyException(f"{where}: {h} is declared twice")
        seen.add(io.handle_name)
        slot = sym(io.slot_name)
        place = places.get(io.slot_name)
        if place is None:
            raise VerifyException(
                f"{where}: {h} names {slot}, which is no slot or view of the plan"
            )
        arena, offset, size = place
        if io.arena_name != arena:
            raise VerifyException(
                f"{where}: {h} says arena {sym(io.arena_name)} but {slot} is in arena {sym(arena)}"
            )
        if io.offset_bytes != offset:
            raise VerifyException(
                f"{where}: {h} says offset {io.offset_bytes} but {slot} is at offset {offset}"
            )
        ty = io.io_type
        if ty.byte_size > size:
            raise VerifyException(
                f"{where}: {h} ({_describe(ty)}) does not fit in the {size} bytes of {slot}"
            )
        want = types.get(io.slot_name)
        if want is None:
            continue
        if ty.dtype_name != want.dtype_name:
            raise VerifyException(
                f"{where}: {h} says dtype {ty.dtype_name} but {slot} is {want.dtype_name}"
            )
        if ty.shape_ints != want.shape_ints:
            got_s = ", ".join(map(str, ty.shape_ints))
            want_s = ", ".join(map(str, want.shape_ints))
            raise VerifyException(f"{where}: {h} says shape [{got_s}] but {slot} is [{want_s}]")


Layout = Dialect("layout", [PlanOp, ArenaOp, SlotOp, LayoutViewOp, TotalsOp, IoOp], [])
