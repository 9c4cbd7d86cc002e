"""A picture of a layout plan's memory: one SVG, one panel per mode of the state arena.

Each panel draws the arena as call index (x) x byte offset (y, 0 at the top): a slot
live for calls ``first..last`` is a box over those calls and its bytes (canary
included), coloured by role; permanent slots (KV cache, io, gradients, optimizer
moments) span every call; a ``layout.view`` is a dashed outline inside its root's box,
an in-place reuse (an ``inplace`` view, ``--plan-views``) a gold hatched box with a
solid magenta outline, and a view at a run-time row (the KV append of ``--plan-views``:
k / v rows written straight into the cache) a dotted yellow outline over the blue KV
cache, drawn at row 0 (at run time it moves down by ``P`` rows); slots that reuse
bytes another slot of the mode held earlier are visible as boxes stacked at the same
offsets.  The lower bound (``bound.<mode>``, the most bytes live at once) is a red
line, the mode's arena end a black one.  Each mode has two panels: the whole arena,
then its transient slots alone (from the lowest transient offset), where the reuse
shows when permanent buffers dwarf the activations.
Plain SVG text, written here (no plotting library): ``ckir inspect BUILD --svg FILE``.
"""

from __future__ import annotations

from html import escape

from ckir.dialects import layout as ly

__all__ = ["INPLACE_STROKE", "ROLE_COLOURS", "ROW_VIEW_STROKE", "VIEW_STROKE", "plan_to_svg"]

#: fill colour per role (the roles of the layout dialect)
ROLE_COLOURS: dict[str, str] = {
    "weight": "#9e9e9e",
    "kv_cache": "#1f77b4",
    "activation": "#2ca02c",
    "io": "#ff7f0e",
    "scratch": "#9467bd",
    "grad": "#d62728",
    "optimizer_state": "#8c564b",
}
#: outline of a pure view (dashed) and of an in-place reuse (solid, over a hatched fill)
VIEW_STROKE = "#000000"
INPLACE_STROKE = "#c2188b"
#: outline of a view at a run-time row (the KV append, dotted; drawn at row 0)
ROW_VIEW_STROKE = "#ffeb3b"
_HATCH = (
    '<defs><pattern id="inplace-hatch" width="6" height="6" patternUnits="userSpaceOnUse" '
    'patternTransform="rotate(45)"><rect width="6" height="6" fill="#ffd54f" '
    'fill-opacity="0.55"/><line x1="0" y1="0" x2="0" y2="6" stroke="#c2188b" '
    'stroke-width="2"/></pattern></defs>'
)
_W = 900  # plot width of a panel
_H = 420  # plot height of a panel
_LEFT = 110
_TOP = 40
_GAP = 90


def _mib(n: int) -> str:
    return f"{n / 2**20:.2f} MiB" if n >= 2**20 else f"{n / 1024:.1f} KiB"


def _box(
    sx: float, sy: float, y0: float, x0: float, x1: float, b0: int, b1: int
) -> tuple[float, float, float, float]:
    """x, y, width, height of calls ``[x0, x1)`` x bytes ``[b0, b1)`` in a panel at ``y0``."""
    return (_LEFT + x0 * sx, y0 + b0 * sy, max((x1 - x0) * sx, 0.5), max((b1 - b0) * sy, 0.5))


def plan_to_svg(plan: ly.PlanOp) -> str:
    """The SVG document of ``plan``: a panel per mode with live slots, a legend."""
    usage = ly.mode_usage(plan)
    state = [a for a in plan.arenas().values() if any(s.live_range for s in a.slots())]
    panels: list[str] = []
    roles_seen: set[str] = set()
    views_seen: set[str] = set()
    y0 = _TOP
    for arena in state:
        slots = arena.slots()
        by_name = {s.buffer_name: s for s in slots}
        for mode in sorted({s.live_range[0] for s in slots if s.live_range is not None}):
            for zoom in (False, True):
                used, bound = usage[mode]
                mine = [s for s in slots if s.live_range is None or s.live_range[0] == mode]
                calls = 1 + max(s.live_range[2] for s in mine if s.live_range is not None)
                lo = 0
                if zoom:  # the second panel: the transient slots alone, their bytes filling it
                    mine = [s for s in mine if s.live_range is not None]
                    lo = min(s.offset_bytes for s in mine)
                top = max(used - lo, 1)
                sx = _W / calls
                sy = _H / top

                out = [
                    f'<text x="{_LEFT}" y="{y0 - 12}" font-size="15" font-weight="bold">'
                    f"arena @{escape(arena.arena_name)}, mode {escape(mode)}: {_mib(used)} used, "
                    f"lower bound {_mib(bound)} ({used / bound:.3f}x), {calls} calls"
                    + (f"; transient slots from offset {lo:,}" if zoom else "")
                    + "</text>",
                    f'<rect x="{_LEFT}" y="{y0}" width="{_W}" height="{_H}" fill="#ffffff" '
                    'stroke="#444444"/>',
                ]
                for s in mine:
                    live = s.live_range
                    first, last = (0, calls - 1) if live is None else (live[1], live[2])
                    x, y, w, h = _box(
                        sx, sy, y0, first, last + 1, s.offset_bytes - lo, s.end_bytes - lo
                    )
                    roles_seen.add(s.role)
                    colour = ROLE_COLOURS.get(s.role, "#17becf")
                    span = "every call" if live is None else f"calls {first}..{last}"
                    out.append(
                        f'<rect x="{x:.2f}" y="{y:.2f}" width="{w:.2f}" height="{h:.2f}" '
                        f'fill="{colour}" fill-opacity="0.8" stroke="#ffffff" stroke-width="0.3">'
                        f"<title>{escape(s.buffer_name)}: {s.role}, offset {s.offset_bytes}, "
                        f"{s.size_bytes} bytes, {span}</title></rect>"
                    )
                shown = {s.buffer_name for s in mine}
                for v in arena.views():
                    root = by_name.get(v.root_name)
                    if root is None or root.buffer_name not in shown:
                        continue
                    live = root.live_range
                    first, last = (0, calls - 1) if live is None else (live[1], live[2])
                    b0 = root.offset_bytes + v.offset_bytes
                    x, y, w, h = _box(sx, sy, y0, first, last + 1, b0 - lo, b0 - lo + v.size_bytes)
                    rows = v.row_offset
                    if rows is not None:  # the KV append: drawn at P = 0, moves down by P rows
                        views_seen.add("rows")
                        style = (
                            f'class="rowview" fill="none" stroke="{ROW_VIEW_STROKE}" '
                            'stroke-dasharray="1,1.5" stroke-width="1.2"'
                        )
                        what = f"view at run-time row {rows[0]} (+ {rows[0]} * {rows[1]} bytes)"
                    elif v.is_inplace:
                        views_seen.add("inplace")
                        style = (
                            f'class="inplace" fill="url(#inplace-hatch)" stroke="{INPLACE_STROKE}" '
                            'stroke-width="1.2"'
                        )
                        what = "in-place reuse"
                    else:
                        views_seen.add("view")
                        style = (
                            f'class="view" fill="none" stroke="{VIEW_STROKE}" '
                            'stroke-dasharray="3,2" stroke-width="0.8"'
                        )
                        what = "view"
                    out.append(
                        f'<rect x="{x:.2f}" y="{y:.2f}" width="{w:.2f}" height="{h:.2f}" {style}>'
                        f"<title>{what} {escape(v.view_name)} of {escape(v.root_name)} + "
                        f"{v.offset_bytes}, {v.size_bytes} bytes</title></rect>"
                    )
                lines = [(used, "#000000", "arena end"), (bound, "#e41a1c", "lower bound")]
                if used == bound:  # one line, one label
                    lines = [(bound, "#e41a1c", "arena = bound")]
                for value, colour, label in lines:
                    yy = y0 + (value - lo) * sy
                    out.append(
                        f'<line x1="{_LEFT}" y1="{yy:.2f}" x2="{_LEFT + _W}" y2="{yy:.2f}" '
                        f'stroke="{colour}" stroke-width="2" stroke-dasharray="8,4"/>'
                    )
                    out.append(
                        f'<text x="{_LEFT - 6}" y="{yy + 4:.2f}" font-size="11" text-anchor="end" '
                        f'fill="{colour}">{label}</text>'
                    )
                out.append(
                    f'<text x="{_LEFT + _W / 2}" y="{y0 + _H + 18}" font-size="12" '
                    'text-anchor="middle">call index</text>'
                )
                out.append(
                    f'<text x="{_LEFT - 6}" y="{y0 + 10}" font-size="11" '
                    f'text-anchor="end">offset {lo:,}</text>'
                )
                panels.append("\n".join(out))
                y0 += _H + _GAP
    legend = ['<g font-size="13">']
    lx = _LEFT
    for role in [r for r in ROLE_COLOURS if r in roles_seen]:
        legend.append(
            f'<rect x="{lx}" y="{y0 - 20}" width="14" height="14" fill="{ROLE_COLOURS[role]}"/>'
            f'<text x="{lx + 20}" y="{y0 - 9}">{role}</text>'
        )
        lx += 40 + 9 * len(role)
    legend.append(
        f'<rect x="{lx}" y="{y0 - 20}" width="14" height="14" fill="none" '
        f'stroke="{VIEW_STROKE}" stroke-dasharray="3,2"/>'
        f'<text x="{lx + 20}" y="{y0 - 9}">view</text>'
    )
    if "rows" in views_seen:
        lx += 70
        legend.append(
            f'<rect x="{lx}" y="{y0 - 20}" width="14" height="14" fill="none" '
            f'stroke="{ROW_VIEW_STROKE}" stroke-dasharray="1,1.5"/>'
            f'<text x="{lx + 20}" y="{y0 - 9}">KV append (row P)</text>'
        )
        lx += 80
    if "inplace" in views_seen:
        lx += 70
        legend.append(
            f'<rect x="{lx}" y="{y0 - 20}" width="14" height="14" fill="url(#inplace-hatch)" '
            f'stroke="{INPLACE_STROKE}"/><text x="{lx + 20}" y="{y0 - 9}">in-place reuse</text>'
        )
    legend.append("</g>")
    width = _LEFT + _W + 40
    height = y0 + 10
    title = f"ckir layout plan @{escape(plan.plan_name.data)} ({escape(plan.strategy_name)})"
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif">\n'
        f"<title>{title}</title>\n{_HATCH}\n"
        f'<rect width="{width}" height="{height}" fill="#ffffff"/>\n'
        + "\n".join(panels)
        + "\n"
        + "\n".join(legend)
        + "\n</svg>\n"
    )


def arena_lines(plan: ly.PlanOp) -> list[str]:
    """``ckir inspect``'s lines: per mode, the arena bytes against the lower bound."""
    lines = ["arena per mode (bytes used / lower bound = most bytes live at once):"]
    for mode, (used, bound) in ly.mode_usage(plan).items():
        lines.append(f"  {mode:<9} {used:>14,} / {bound:>14,}  {used / bound:.2f}x")
    totals = plan.totals()
    if ly.COPIES_KEY in totals:
        views = [v for a in plan.arenas().values() for v in a.views()]
        inplace = sum(1 for v in views if v.is_inplace)
        rows = sum(1 for v in views if v.row_offset is not None)
        lines.append(
            f"views (--plan-views): {totals[ly.COPIES_KEY]} copies removed; "
            f"{len(views) - inplace} views ({rows} of them the KV append at row P), "
            f"{totals.get(ly.VIEW_BYTES_KEY, 0):,} bytes; "
            f"{inplace} in-place reuses, {totals.get(ly.INPLACE_BYTES_KEY, 0):,} bytes "
            "(bytes: what those buffers would take as slots of their own)"
        )
    return lines
