"""``--plan-layout``: place every lowered buffer at a byte offset in one of two arenas.

Arenas:

* ``weights`` — every weight buffer, in declaration order (this is the byte
  layout of ``weights.bin``);
* ``state`` — the KV cache and io buffers (live for the whole run), then the
  activation and scratch buffers of every program.

Strategies (the default, :data:`DEFAULT_STRATEGY`, is ``liveness``: ``ckir-opt
--plan-layout`` and ``ckir compile`` plan alike; ``ckir compile --debug`` asks
for :data:`DEBUG_STRATEGY`):

* ``bump`` (the deterministic reference): every buffer gets its own range,
  one after the other, in the order the IR declares them.
* ``liveness``: a buffer's lifetime is the range of call indices in its
  program that name it (or a view of it); two activation buffers may share
  bytes when their programs differ (only one mode runs at a time) or their
  lifetimes do not intersect.  Greedy best-offset placement, largest first,
  ties broken by name, so the plan is deterministic.  ``saved`` is the
  difference between the bump extent and the liveness extent of the state
  arena, counting root buffers only.

With canaries on, each slot is followed by a CANARY_BYTES guard at the next
aligned offset; the guard belongs to the slot for overlap purposes.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.rewriter import InsertPoint, Rewriter

from ckir.dialects import layout as ly
from ckir.dialects import lowered as lw
from ckir.errors import CkirError
from ckir.vocab import PERMANENT_ROLES, REPORTED_ROLES

#: the strategy of ``--plan-layout`` and of ``ckir compile`` when none is given
DEFAULT_STRATEGY = "liveness"
#: the strategy of debug builds: every slot (and its canary) has its own bytes, so a
#: canary check after every layer names the buffer that overran
DEBUG_STRATEGY = "bump"
#: alignment of every offset unless told otherwise (``ckir-opt`` and ``ckir compile``)
DEFAULT_ALIGN = 64
#: canaries after every slot unless told otherwise (``ckir-opt`` and ``ckir compile``)
DEFAULT_CANARIES = True


@dataclass
class Item:
    """A root buffer to place."""

    name: str
    size: int
    role: str
    live: tuple[str, int, int] | None  # None: live for the whole run


@dataclass
class Placed:
    item: Item
    offset: int
    canary: int | None

    @property
    def end(self) -> int:
        """First byte after the slot and its canary."""
        if self.canary is not None:
            return self.canary + ly.CANARY_BYTES
        return self.offset + self.item.size


def align_up(n: int, align: int) -> int:
    return (n + align - 1) // align * align


def conflicts(a: Item, b: Item) -> bool:
    """Whether two buffers may be in use at the same time."""
    if a.live is None or b.live is None:
        return True
    if a.live[0] != b.live[0]:
        return False
    return not (a.live[2] < b.live[1] or b.live[2] < a.live[1])


class Planner:
    """Places items into one arena with a given alignment and canary setting."""

    def __init__(self, align: int, canaries: bool) -> None:
        if align < 8 or align & (align - 1):
            raise CkirError(f"plan-layout: align must be a power of two >= 8, got {align}")
        self.align = align
        self.canaries = canaries

    def _placed(self, item: Item, offset: int) -> Placed:
        canary = align_up(offset + item.size, self.align) if self.canaries else None
        return Placed(item, offset, canary)

    def bump(self, items: Iterable[Item], start: int = 0) -> list[Placed]:
        out: list[Placed] = []
        cur = start
        for item in items:
            p = self._placed(item, align_up(cur, self.align))
            out.append(p)
            cur = p.end
        return out

    def footprint(self, item: Item) -> int:
        """Bytes the item takes from its aligned offset to the next aligned offset."""
        return ly.footprint(item.size, self.align, self.canaries)

    def best_fit(self, items: Iterable[Item], start: int) -> list[Placed]:
        """Place transient items: the modes apart (they never conflict), each mode by the
        first of the orders (:meth:`rankings`) x :data:`FITS` whose extent reaches the
        mode's lower bound, else by the one with the smallest extent (ties: the earlier
        one)."""
        by_mode: dict[str, list[Item]] = {}
        for item in items:
            by_mode.setdefault(item.live[0] if item.live else "", []).append(item)
        placed: list[Placed] = []
        base = align_up(start, self.align)
        for group in by_mode.values():
            goal = base + self.peak(group)
            best: list[Placed] | None = None
            breadth = self.breadth(group)
            orders = [lambda i, b=breadth: (-b[i.name], -i.size, i.name), *ORDERS.values()]
            for ranked in self.rankings(group, orders, breadth):
                for fit in FITS:
                    trial = self.place(ranked, base, fit)
                    if best is None or extent(trial, base) < extent(best, base):
                        best = trial
                    if extent(best, base) <= goal:
                        break
                if best is not None and extent(best, base) <= goal:
                    break
            placed += best or []
        return placed

    def rankings(
        self, group: list[Item], orders: list[Callable[[Item], Any]], breadth: dict[str, int]
    ) -> Iterator[list[Item]]:
        """The orders to try, in turn: the fixed ones (:data:`ORDERS`, breadth first), then
        :func:`shuffle_trials` seeded perturbations of breadth and size and random
        orders (a fixed seed: the plan stays deterministic)."""
        for order in orders:
            yield sorted(group, key=order)
        rng = random.Random(len(group))
        for t in range(shuffle_trials(len(group))):
            noise = {i.name: rng.random() for i in group}
            if t % 3 == 0:  # breadth, each item's weight jittered by +-10%
                yield sorted(
                    group, key=lambda i: (-breadth[i.name] * (0.9 + 0.2 * noise[i.name]), i.name)
                )
            elif t % 3 == 1:  # size, jittered by +-20%
                yield sorted(
                    group, key=lambda i: (-self.footprint(i) * (0.8 + 0.4 * noise[i.name]), i.name)
                )
            else:
                yield sorted(group, key=lambda i: (noise[i.name], i.name))

    def breadth(self, items: list[Item]) -> dict[str, int]:
        """Per item, the most footprint bytes live at any one call of its lifetime: placing
        the items of the busiest calls first packs those calls tightly (greedy by breadth)."""
        span = max((i.live[2] for i in items if i.live), default=0) + 2
        diff = [0] * span
        for item in items:
            assert item.live is not None
            fp = self.footprint(item)
            diff[item.live[1]] += fp
            diff[item.live[2] + 1] -= fp
        live = list(itertools.accumulate(diff))
        out: dict[str, int] = {}
        for item in items:
            assert item.live is not None
            out[item.name] = max(live[item.live[1] : item.live[2] + 1])
        return out

    def peak(self, items: list[Item]) -> int:
        """The most footprint bytes of ``items`` (one mode's) live at one call."""
        events: list[tuple[int, int]] = []
        for item in items:
            assert item.live is not None
            fp = self.footprint(item)
            events += [(item.live[1], fp), (item.live[2] + 1, -fp)]
        cur = peak = 0
        for _, delta in sorted(events):
            cur += delta
            peak = max(peak, cur)
        return peak

    def place(self, ranked: list[Item], base: int, fit: str) -> list[Placed]:
        """Place ``ranked`` in order at ``base`` or above, never over a conflicting placed
        item: ``first`` takes the lowest offset that fits, ``best`` the smallest free gap
        between conflicting items that fits (else the top of them)."""
        placed: list[Placed] = []
        for item in ranked:
            need = self.footprint(item)
            spans = sorted(
                (p.offset, align_up(p.end, self.align)) for p in placed if conflicts(p.item, item)
            )
            offset = base
            choice: tuple[int, int] | None = None  # (gap size, offset)
            for lo, hi in spans:
                if lo - offset >= need:
                    if fit == "first":
                        break
                    if choice is None or lo - offset < choice[0]:
                        choice = (lo - offset, offset)
                offset = max(offset, hi)
            else:
                if fit == "best" and choice is not None:
                    offset = choice[1]
            placed.append(self._placed(item, offset))
        return placed


#: orderings tried by the liveness planner, in this order (keys of ``sorted``)
ORDERS = {
    "size": lambda i: (-i.size, i.name),
    "lifetime": lambda i: (-(i.live[2] - i.live[1]), -i.size, i.name),
    "area": lambda i: (-i.size * (i.live[2] - i.live[1] + 1), i.name),
    "first-use": lambda i: (i.live[1], -i.size, i.name),
}
#: offset choices tried for each ordering (:meth:`Planner.place`)
FITS = ("first", "best")
#: the seeded orders tried after :data:`ORDERS` miss the bound cost about this many
#: item-pair steps of :meth:`Planner.place` in all (at most :data:`MAX_SHUFFLES` orders):
#: a few dozen for the graphs of tiny models, none for a 30-layer model's thousands of
#: slots (which the fixed orders pack to the bound)
SHUFFLE_BUDGET = 2_000_000
MAX_SHUFFLES = 64


def shuffle_trials(n: int) -> int:
    """How many seeded orders to try for ``n`` items of one mode."""
    return min(MAX_SHUFFLES, SHUFFLE_BUDGET // max(n * n, 1))


def extent(placed: list[Placed], start: int) -> int:
    return max((p.end for p in placed), default=start)


def collect(model: lw.LoweredModelOp) -> tuple[list[Item], list[Item], list[lw.ViewOp]]:
    """Weights, state items (permanent first, then per program) and views (model-level
    ones included), in IR order."""
    weights: list[Item] = []
    permanent: list[Item] = []
    transient: list[Item] = []
    views: list[lw.ViewOp] = []
    for op in model.body_block.ops:
        if isinstance(op, lw.BufferOp):
            item = Item(op.buffer_name, op.buffer_type.byte_size, op.role, None)
            (weights if op.role == "weight" else permanent).append(item)
        elif isinstance(op, lw.ViewOp):
            views.append(op)
        elif isinstance(op, lw.ProgramOp):
            p_perm, p_trans, p_views = _program_items(op)
            permanent += p_perm
            transient += p_trans
            views += p_views
    return weights, permanent + transient, views


def _program_items(program: lw.ProgramOp) -> tuple[list[Item], list[Item], list[lw.ViewOp]]:
    roots: dict[str, str] = {}
    buffers: list[lw.BufferOp] = []
    views: list[lw.ViewOp] = []
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    index = 0
    for op in program.body_block.ops:
        if isinstance(op, lw.BufferOp):
            buffers.append(op)
        elif isinstance(op, lw.ViewOp):
            views.append(op)
            roots[op.view_name] = op.root_name
        elif isinstance(op, lw.CallOp):
            for name in (*op.in_names, *op.out_names):
                root = roots.get(name, name)
                first.setdefault(root, index)
                last[root] = index
            index += 1
    mode = program.mode_name
    permanent: list[Item] = []
    transient: list[Item] = []
    for buf in buffers:
        name = buf.buffer_name
        if buf.role in PERMANENT_ROLES:
            permanent.append(Item(name, buf.buffer_type.byte_size, buf.role, None))
        else:
            live = (mode, first.get(name, 0), last.get(name, 0))
            transient.append(Item(name, buf.buffer_type.byte_size, buf.role, live))
    return permanent, transient, views


def plan(model: lw.LoweredModelOp, strategy: str, align: int, canaries: bool) -> ly.PlanOp:
    """The ``layout.plan`` for a lowered model."""
    if strategy not in ly.STRATEGIES:
        known = " or ".join(ly.STRATEGIES)
        raise CkirError(f"plan-layout: unknown strategy '{strategy}' ({known})")
    planner = Planner(align, canaries)
    weights, state, views = collect(model)
    if not weights and not state:
        raise CkirError("plan-layout: the lowered model has no buffers (run a lowering first)")

    w_placed = planner.bump(weights)
    permanent = [i for i in state if i.live is None]
    transient = [i for i in state if i.live is not None]
    s_perm = planner.bump(permanent)
    base = extent(s_perm, 0)
    bump_transient = planner.bump(transient, base)
    if strategy == "bump":
        s_trans = bump_transient
        saved = 0
    else:
        s_trans = planner.best_fit(transient, base)
        saved = max(0, extent(bump_transient, base) - extent(s_trans, base))

    root_of: dict[str, Placed] = {p.item.name: p for p in (*w_placed, *s_perm, *s_trans)}
    plan_op = ly.PlanOp.make(model.sym_name.data, strategy, align, canaries)
    weight_names = {p.item.name for p in w_placed}
    for arena_name, placed, arena_views in (
        ("weights", w_placed, [v for v in views if v.root_name in weight_names]),
        ("state", [*s_perm, *s_trans], [v for v in views if v.root_name not in weight_names]),
    ):
        size = align_up(extent(placed, 0), align)
        arena = ly.ArenaOp.make(arena_name, size)
        for p in placed:
            item = p.item
            slot = ly.SlotOp.make(item.name, p.offset, item.size, item.role, p.canary, item.live)
            arena.body_block.add_op(slot)
        for v in arena_views:
            if v.root_name not in root_of:
                raise CkirError(f"plan-layout: view @{v.view_name} has no root @{v.root_name}")
            size = v.view_type.byte_size
            inplace = ly.INPLACE_ATTR in v.attributes
            arena.body_block.add_op(
                ly.LayoutViewOp.make(
                    v.view_name, v.root_name, v.offset_bytes, size, inplace, v.row_offset
                )
            )
        plan_op.body_block.add_op(arena)

    totals: dict[str, int] = {}
    for p in (*w_placed, *s_perm, *s_trans):
        totals[p.item.role] = totals.get(p.item.role, 0) + p.item.size
    for role in REPORTED_ROLES:
        totals.setdefault(role, 0)
    totals["saved"] = saved
    totals.update(ly.usage_totals(plan_op))
    recorded = [ly.views_recorded(p) for p in model.programs().values()]
    if any(recorded):  # --plan-views ran: what it removed and saved
        totals[ly.COPIES_KEY] = sum(r.get("copies", 0) for r in recorded)
        totals.update(ly.view_totals(plan_op))
    plan_op.body_block.add_op(ly.TotalsOp.make(totals))
    return plan_op


@dataclass(frozen=True)
class PlanLayoutPass(ModulePass):
    """Plan the memory of the lowered model into a ``layout.plan`` (replacing any earlier plan).

    Two arenas: ``weights`` (the bytes of weights.bin) and ``state`` (KV
    cache, io, activations). Every offset is a multiple of ``align``; with
    canaries, a 64-byte guard follows every slot. The plan's verifier proves
    alignment and that no two slots that can be live together overlap.

    Options:
      strategy (str, default "liveness", as ``ckir compile``): "liveness" lets
        activations whose lifetimes (call index ranges, per mode) do not
        intersect share bytes, and reports the bytes saved against bump in
        ``layout.totals``; "bump" gives every buffer its own bytes, in IR order.
      align (int, default 64): alignment of every offset, a power of two >= 8.
      canaries (bool, default true): put a guard after every slot.

    Example: ``ckir-opt m.mlir --lower-decode --plan-layout{strategy=bump align=128}``
    """

    name = "plan-layout"

    strategy: str = DEFAULT_STRATEGY
    align: int = DEFAULT_ALIGN
    canaries: bool = DEFAULT_CANARIES

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        models = [o for o in op.ops if isinstance(o, lw.LoweredModelOp)]
        if len(models) != 1:
            raise CkirError(
                f"plan-layout: expected one lowered.model (run --lower-prefill or "
                f"--lower-decode first), found {len(models)}"
            )
        new_plan = plan(models[0], self.strategy, self.align, self.canaries)
        for old in [o for o in op.ops if isinstance(o, ly.PlanOp)]:
            Rewriter.erase_op(old)
        Rewriter.insert_op(new_plan, InsertPoint.after(models[0]))
