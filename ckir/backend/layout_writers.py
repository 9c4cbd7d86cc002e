"""The layout writers: a ``layout.plan`` rendered as the build's ``layout.json`` and
``layout.map``.

* :func:`plan_to_dict` / :func:`plan_to_json` — the plan as plain data / as JSON
  (sorted keys, indent 2: byte-deterministic);
* :func:`plan_to_map` — a fixed-width table per arena (slots and views, hex and
  decimal offsets, live ranges), then the totals: the file a person reads.

``ckir compile`` writes both next to ``layout.mlir`` (docs/dialects/layout.md).
"""

from __future__ import annotations

import json
from typing import Any

from ckir.dialects import layout as ly

__all__ = ["plan_to_dict", "plan_to_json", "plan_to_map"]


def plan_to_dict(plan: ly.PlanOp) -> dict[str, Any]:
    """The plan as plain data (what layout.json holds)."""
    arenas: list[dict[str, Any]] = []
    for arena in plan.body_block.ops:
        if not isinstance(arena, ly.ArenaOp):
            continue
        slots = []
        views = []
        for op in arena.body_block.ops:
            if isinstance(op, ly.SlotOp):
                live = op.live_range
                slots.append(
                    {
                        "name": op.buffer_name,
                        "offset": op.offset_bytes,
                        "size": op.size_bytes,
                        "role": op.role,
                        "canary": op.canary_offset,
                        "live": None
                        if live is None
                        else {"mode": live[0], "first": live[1], "last": live[2]},
                    }
                )
            elif isinstance(op, ly.LayoutViewOp):
                view: dict[str, Any] = {
                    "name": op.view_name,
                    "root": op.root_name,
                    "offset": op.offset_bytes,
                    "size": op.size_bytes,
                }
                rows = op.row_offset
                if rows is not None:  # at run time: offset + P * row_bytes
                    view["rows"] = {"symbol": rows[0], "row_bytes": rows[1]}
                views.append(view)
        arenas.append(
            {"name": arena.arena_name, "size": arena.size_bytes, "slots": slots, "views": views}
        )
    return {
        "plan": plan.plan_name.data,
        "strategy": plan.strategy_name,
        "align": plan.align_bytes,
        "canaries": plan.has_canaries,
        "canary_bytes": ly.CANARY_BYTES if plan.has_canaries else 0,
        "arenas": arenas,
        "totals": plan.totals(),
    }


def plan_to_json(plan: ly.PlanOp) -> str:
    """layout.json: the plan with sorted keys, indent 2 and a trailing newline."""
    return json.dumps(plan_to_dict(plan), sort_keys=True, indent=2) + "\n"


def plan_to_map(plan: ly.PlanOp) -> str:
    """layout.map: a fixed-width table per arena (slots and views), then the totals."""
    lines = [
        f"layout plan @{plan.plan_name.data}: strategy {plan.strategy_name}, "
        f"align {plan.align_bytes}, canaries "
        + (f"on ({ly.CANARY_BYTES} bytes after each slot)" if plan.has_canaries else "off"),
    ]
    header = (
        f"  {'offset (hex)':>12}  {'offset':>12}  {'size':>12}  {'role':<15}  {'live':<20}  name"
    )
    for arena in plan.body_block.ops:
        if not isinstance(arena, ly.ArenaOp):
            continue
        lines.append("")
        lines.append(
            f"arena @{arena.arena_name}: {arena.size_bytes} bytes (0x{arena.size_bytes:x})"
        )
        lines.append(header)
        slots = {s.buffer_name: s for s in arena.slots()}
        for op in arena.body_block.ops:
            if isinstance(op, ly.SlotOp):
                live = op.live_range
                live_text = "*" if live is None else f"{live[0]} {live[1]}..{live[2]}"
                lines.append(
                    f"  0x{op.offset_bytes:010x}  {op.offset_bytes:>12}  {op.size_bytes:>12}  "
                    f"{op.role:<15}  {live_text:<20}  {op.buffer_name}"
                )
            elif isinstance(op, ly.LayoutViewOp):
                root = slots.get(op.root_name)
                base = root.offset_bytes if root is not None else 0
                at = base + op.offset_bytes
                rows = op.row_offset
                at_row = "" if rows is None else f" + {rows[0]} * {rows[1]}"
                lines.append(
                    f"  0x{at:010x}  {at:>12}  {op.size_bytes:>12}  {'view':<15}  "
                    f"{'(root)':<20}  {op.view_name} = {op.root_name} + {op.offset_bytes}"
                    f"{at_row}"
                )
    lines.append("")
    lines.append("totals")
    for k, v in sorted(plan.totals().items()):
        lines.append(f"  {k:<15}  {v:>12}")
    return "\n".join(lines) + "\n"
