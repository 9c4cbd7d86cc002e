"""Constants, hashes and the model description's struct layout, shared by the C
emitter, the weights writer and the loader.

``runtime/include/ckir_model.h`` is written by hand; this module mirrors what Python
needs of it, and tests/test_abi.py parses the header and checks that both agree: the
constants below, and :data:`DESC_STRUCTS`, the one table of the description structs
(``ckir_slot_desc`` ... ``ckir_model_desc``) that ``ckir_describe()`` returns.  The
table was chosen over generating that part of the header so the header stays one
readable file for C users; the loader's ctypes structures
(:mod:`ckir.model.bindings`) and the emitter's initializers of those structs
(:func:`c_initializer`) are both built from the table, so neither spells a field.
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Mapping
from typing import NamedTuple

from xdsl.printer import Printer

from ckir.dialects import layout as ly
from ckir.dialects import lowered as lw
from ckir.vocab import INFERENCE_MODES

WEIGHTS_MAGIC = b"CKIRWTS1"
WEIGHTS_VERSION = 1
WEIGHTS_HEADER_BYTES = 4096
CANARY_WORD = 0xDEADBEEF
#: bumped whenever the generated-model ABI (ckir_model.h) changes
MODEL_ABI_VERSION = 6

ARENA_INDEX = {"weights": 0, "state": 1}


class Field(NamedTuple):
    """One field of a description struct, as ``ckir_model.h`` declares it."""

    name: str
    #: the C type as the header spells it: ``int``, ``int64_t``, ``uint64_t``,
    #: ``const char *``, ``ckir_mode_fn`` (a function pointer), ``const S *`` or ``S``
    #: (S another struct of the table)
    ctype: str
    #: elements of an array field (``int64_t shape[4]``); 0 for a scalar
    length: int = 0


#: The structs of the generated-model description, in dependency order (a struct
#: refers only to ones above it).  ckir_model_desc has one ckir_mode_desc per
#: inference mode, in vocabulary order.
DESC_STRUCTS: dict[str, tuple[Field, ...]] = {
    "ckir_slot_desc": (
        Field("name", "const char *"),
        Field("arena", "int"),
        Field("offset", "int64_t"),
        Field("size", "int64_t"),
        Field("canary", "int64_t"),
    ),
    "ckir_mode_desc": (
        Field("name", "const char *"),
        Field("run", "ckir_mode_fn"),
        Field("tokens_offset", "int64_t"),
        Field("tokens_rows", "int64_t"),
        Field("logits_offset", "int64_t"),
        Field("logits_rows", "int64_t"),
        Field("token_bound", "int64_t"),
    ),
    "ckir_param_desc": (
        Field("name", "const char *"),
        Field("weight_offset", "int64_t"),
        Field("grad_offset", "int64_t"),
        Field("m_offset", "int64_t"),
        Field("v_offset", "int64_t"),
        Field("numel", "int64_t"),
        Field("ndim", "int64_t"),
        Field("shape", "int64_t", 4),
    ),
    "ckir_train_desc": (
        Field("backward", "ckir_mode_fn"),
        Field("optimize", "ckir_mode_fn"),
        Field("tokens_offset", "int64_t"),
        Field("targets_offset", "int64_t"),
        Field("loss_offset", "int64_t"),
        Field("sumsq_offset", "int64_t"),
        Field("rows", "int64_t"),
        Field("token_bound", "int64_t"),
        Field("params", "const ckir_param_desc *"),
        Field("n_params", "int64_t"),
    ),
    "ckir_handle_desc": (
        Field("name", "const char *"),
        Field("role", "const char *"),
        Field("mode", "const char *"),
        Field("dtype", "const char *"),
        Field("rank", "int64_t"),
        Field("shape", "int64_t", 4),
        Field("dims", "const char *", 4),
        Field("arena", "int"),
        Field("offset", "int64_t"),
        Field("bytes", "int64_t"),
    ),
    "ckir_model_desc": (
        Field("name", "const char *"),
        Field("fingerprint", "uint64_t"),
        Field("weights_bytes", "int64_t"),
        Field("state_bytes", "int64_t"),
        Field("max_context", "int64_t"),
        Field("vocab", "int64_t"),
        Field("align", "int64_t"),
        Field("slots", "const ckir_slot_desc *"),
        Field("n_slots", "int64_t"),
        *(Field(mode, "ckir_mode_desc") for mode in INFERENCE_MODES),
        Field("train", "ckir_train_desc"),
        Field("n_layers", "int64_t"),
    ),
}


def c_initializer(struct: str, values: Mapping[str, str], *, indent: int | None = None) -> str:
    """A C initializer of ``struct`` (a key of :data:`DESC_STRUCTS`) from its fields'
    values (C expressions), which must name every field of the table in its order.

    ``indent`` None: positional, on one line (``{"w.x", 0, 64LL, ...}``); else
    designated, one field a line, the closing brace ``indent`` spaces in.
    """
    names = [f.name for f in DESC_STRUCTS[struct]]
    if list(values) != names:
        raise ValueError(f"{struct} initializer: fields {list(values)}, the header's {names}")
    if indent is None:
        return "{" + ", ".join(values.values()) + "}"
    pad = " " * (indent + 2)
    lines = [f"{pad}.{k} = {v}," for k, v in values.items()]
    return "{\n" + "\n".join(lines) + "\n" + " " * indent + "}"


def arenas(plan: ly.PlanOp) -> dict[str, ly.ArenaOp]:
    return {a.arena_name: a for a in plan.body_block.ops if isinstance(a, ly.ArenaOp)}


def placed_offsets(plan: ly.PlanOp) -> dict[str, tuple[str, int]]:
    """Every slot and view of ``plan`` -> (arena, byte offset in it), in plan order; a
    view's offset is its root's plus its own."""
    out: dict[str, tuple[str, int]] = {}
    for aname, arena in arenas(plan).items():
        for op in arena.body_block.ops:
            if isinstance(op, ly.SlotOp):
                out[op.buffer_name] = (aname, op.offset_bytes)
            elif isinstance(op, ly.LayoutViewOp):
                out[op.view_name] = (aname, out[op.root_name][1] + op.offset_bytes)
    return out


def row_offsets(plan: ly.PlanOp) -> dict[str, tuple[str, int]]:
    """The views of ``plan`` at a run-time row -> ``(symbol, bytes per row)``: their
    address is :func:`placed_offsets`' plus the symbol's value times the row bytes."""
    return {
        v.view_name: rows
        for arena in arenas(plan).values()
        for v in arena.views()
        if (rows := v.row_offset) is not None
    }


def declared(
    model: lw.LoweredModelOp,
) -> tuple[dict[str, lw.KernelOp], dict[str, lw.BufferType]]:
    """The kernel declarations of ``model`` by name, and the type of every buffer and
    view (global and per program) by name."""
    kernels: dict[str, lw.KernelOp] = {}
    types: dict[str, lw.BufferType] = {}
    for op in model.walk():
        if isinstance(op, lw.KernelOp):
            kernels[op.kernel_name] = op
        elif isinstance(op, lw.BufferOp):
            types[op.buffer_name] = op.buffer_type
        elif isinstance(op, lw.ViewOp):
            types[op.view_name] = op.view_type
    return kernels, types


def build_fingerprint(model: lw.LoweredModelOp, plan: ly.PlanOp) -> int:
    """64-bit fingerprint of a build: its program, its plan and its weights layout.

    The SHA-256 of the printed ``lowered.model`` (kernels, buffers, every call of every
    program) and of the printed ``layout.plan`` (both arenas' slots and views, the I/O
    manifest, the totals).  weights.bin carries it in its header and model.c compiles
    it in (``ckir_describe()->fingerprint``, ``ckir_fingerprint()``), so a library and a
    weights.bin of different builds refuse each other, even when the weights arenas
    happen to have the same layout.
    """
    h = hashlib.sha256(f"ckir-build-v{WEIGHTS_VERSION}\n".encode())
    for op in (model, plan):
        text = io.StringIO()
        Printer(stream=text).print_op(op)
        h.update(text.getvalue().encode())
        h.update(b"\0")
    return int.from_bytes(h.digest()[:8], "little")


def fingerprint_hex(value: int) -> str:
    """How messages and manifest.json spell a fingerprint: ``0x`` and 16 hex digits."""
    return f"0x{value:016x}"


def canary_bytes() -> bytes:
    return CANARY_WORD.to_bytes(4, "little") * (ly.CANARY_BYTES // 4)
