"""The I/O manifest of a build, emitted three ways from the plan's ``layout.io`` handles.

* ``model.h``: one ``CKIR_IO_<NAME>`` constant per handle, its index for
  ``ckir_io_desc`` (a comment says its arena, offset, dtype and shape);
* ``model.c``: the handle table and the query API ``ckir_io_count()`` /
  ``ckir_io_desc(i, &out)`` (``ckir_handle_desc`` of ``runtime/include/ckir_model.h``),
  and ``ckir_fingerprint()``;
* ``manifest.json`` in the build folder: the same handles and the build fingerprint.

docs/manifest.md describes all three.
"""

from __future__ import annotations

import json
from typing import Any

from ckir.backend.abi import ARENA_INDEX, c_initializer, fingerprint_hex
from ckir.dialects import layout as ly
from ckir.errors import CkirError

#: entries of ``ckir_handle_desc.shape`` / ``dims``
MAX_RANK = 4
#: the name of the manifest in a build folder
MANIFEST_FILE = "manifest.json"


def handle_dict(io: ly.IoOp) -> dict[str, Any]:
    """One handle as plain data (an entry of manifest.json's ``handles``)."""
    ty = io.io_type
    return {
        "name": io.handle_name,
        "role": io.role,
        "mode": io.mode_name or "",
        "dtype": ty.dtype_name,
        "shape": list(ty.shape_ints),
        "dims": list(io.dim_symbols),
        "arena": io.arena_name,
        "offset": io.offset_bytes,
        "bytes": ty.byte_size,
        "slot": io.slot_name,
    }


def manifest_json(plan: ly.PlanOp, fingerprint: int) -> str:
    """The text of manifest.json: the build fingerprint and every handle, in order."""
    data = {
        "model": plan.plan_name.data,
        "fingerprint": fingerprint_hex(fingerprint),
        "handles": [handle_dict(io) for io in plan.io_handles()],
    }
    return json.dumps(data, indent=2) + "\n"


def _macro(name: str, used: set[str]) -> str:
    base = "CKIR_IO_" + "".join(c if c.isalnum() else "_" for c in name).upper()
    macro, n = base, 1
    while macro in used:
        macro, n = f"{base}_{n}", n + 1
    used.add(macro)
    return macro


def header_lines(plan: ly.PlanOp) -> list[str]:
    """model.h: ``CKIR_IO_COUNT`` and one index constant per handle."""
    handles = plan.io_handles()
    lines = [
        "",
        "/* the I/O manifest: each handle's index for ckir_io_desc (docs/manifest.md) */",
        f"#define CKIR_IO_COUNT {len(handles)}",
    ]
    used: set[str] = set()
    for i, io in enumerate(handles):
        d = handle_dict(io)
        shape = ", ".join(sym or str(n) for n, sym in zip(d["shape"], d["dims"], strict=True))
        lines.append(
            f"#define {_macro(io.handle_name, used)} {i} /* {d['role']} {d['name']}: "
            f"{d['arena']} + {d['offset']}, [{shape}] {d['dtype']} */"
        )
    return lines


def source_lines(plan: ly.PlanOp) -> list[str]:
    """model.c: the handle table, ``ckir_io_count``, ``ckir_io_desc``, ``ckir_fingerprint``."""
    from ckir.backend.c_emitter import c_string as _c_string  # c_emitter imports this module

    rows: list[str] = []
    for io in plan.io_handles():
        d = handle_dict(io)
        rank = len(d["shape"])
        if rank > MAX_RANK:
            raise CkirError(f'emit-c: io handle "{d["name"]}" has {rank} dims (at most 4)')
        pad = MAX_RANK - rank
        shape = [f"{n}LL" for n in d["shape"]] + ["0"] * pad
        dims = [_c_string(s) for s in d["dims"]] + ['""'] * pad
        values = {
            "name": _c_string(d["name"]),
            "role": _c_string(d["role"]),
            "mode": _c_string(d["mode"]),
            "dtype": _c_string(d["dtype"]),
            "rank": str(rank),
            "shape": "{" + ", ".join(shape) + "}",
            "dims": "{" + ", ".join(dims) + "}",
            "arena": str(ARENA_INDEX[d["arena"]]),
            "offset": f"{d['offset']}LL",
            "bytes": f"{d['bytes']}LL",
        }
        rows.append(f"  {c_initializer('ckir_handle_desc', values)},")
    n = len(rows)
    if not rows:  # C has no empty arrays: one zero entry, never returned
        rows.append("  {0},")
    return [
        "static const ckir_handle_desc ckir_handles[] = {",
        *rows,
        "};",
        f"int64_t ckir_io_count(void) {{ return {n}; }}",
        "int ckir_io_desc(int64_t i, ckir_handle_desc *out) {",
        f"  if (i < 0 || i >= {n} || out == NULL) return CKIR_ERR_ARG;",
        "  *out = ckir_handles[i];",
        "  return CKIR_OK;",
        "}",
        "uint64_t ckir_fingerprint(void) { return CKIR_FINGERPRINT; }",
        "",
    ]
