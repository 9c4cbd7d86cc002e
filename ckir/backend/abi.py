"""Constants and hashes shared by the C emitter, the weights writer and the loader.

They mirror ``runtime/include/ckir_model.h``; a test checks that both agree.
"""

from __future__ import annotations

import hashlib

from ckir.dialects import layout as ly

WEIGHTS_MAGIC = b"CKIRWTS1"
WEIGHTS_VERSION = 1
WEIGHTS_HEADER_BYTES = 4096
CANARY_WORD = 0xDEADBEEF
#: bumped whenever the generated-model ABI (ckir_model.h) changes
MODEL_ABI_VERSION = 3

ARENA_INDEX = {"weights": 0, "state": 1}


def arenas(plan: ly.PlanOp) -> dict[str, ly.ArenaOp]:
    return {a.arena_name: a for a in plan.body_block.ops if isinstance(a, ly.ArenaOp)}


def layout_hash(plan: ly.PlanOp) -> int:
    """64-bit hash of the weights arena: slot names, offsets, sizes, canaries, arena size.

    weights.bin carries it in its header and model.c compiles it in, so a blob
    written for another layout is refused at load time.
    """
    arena = arenas(plan).get("weights")
    h = hashlib.sha256(f"ckir-weights-v{WEIGHTS_VERSION}\n".encode())
    if arena is not None:
        h.update(f"size {arena.size_bytes}\n".encode())
        for op in arena.body_block.ops:
            if isinstance(op, ly.SlotOp):
                h.update(
                    f"{op.buffer_name} {op.offset_bytes} {op.size_bytes} "
                    f"{op.canary_offset}\n".encode()
                )
    return int.from_bytes(h.digest()[:8], "little")


def canary_bytes() -> bytes:
    return CANARY_WORD.to_bytes(4, "little") * (ly.CANARY_BYTES // 4)
