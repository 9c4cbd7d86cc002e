"""The I/O manifest of a loaded build, checked against the runtime's own description.

The manifest (``ckir_io_desc``, docs/manifest.md) is what the Python API reads and
writes buffers through: the gradients and weights of a training build, and the arena
regions that data-parallel training all-reduces.  The library also carries the
runtime's description (``ckir_describe()``), from which its C entry points take the
offsets of tokens, targets, logits, the loss and every trained weight, gradient and
AdamW moment.  :func:`check_manifest` refuses a manifest that disagrees with it, or
that names bytes outside its arena, naming the handle: a manifest that lied would make
``gradients()`` or an all-reduce read or write the wrong bytes, silently.

:func:`trained_weights` pairs each trained weight with its four handles (param,
``grad.``, ``adam.m.``, ``adam.v.``); :func:`span` gives the one region of an arena
that holds a set of handles and the gaps between them (one all-reduce per step).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ckir.errors import CkirError
from ckir.vocab import DTYPE_TABLE, INFERENCE_MODES, PANEL_DTYPES

if TYPE_CHECKING:
    from ckir.model.bindings import Handle

#: bytes per element of the dtypes whose size follows from their shape (not the block
#: formats, nor the GEMM panels: padded to whole panels)
_ITEMSIZE = {
    d.name: np.dtype(d.numpy).itemsize
    for d in DTYPE_TABLE
    if d.numpy is not None and d.name not in PANEL_DTYPES
}
#: arena index -> its name in messages
ARENA_NAMES = ("weights", "state")
#: the prefixes of a trained weight's state handles: gradient, AdamW's two moments
GRAD, ADAM_M, ADAM_V = "grad.", "adam.m.", "adam.v."


@dataclass(frozen=True)
class TrainedWeight:
    """One trained weight and the manifest handles of its value, gradient and moments."""

    name: str
    param: Handle
    grad: Handle
    m: Handle
    v: Handle


def _lie(build: str, h: Handle, what: str) -> CkirError:
    return CkirError(
        f"{build}: the I/O manifest lies about handle '{h.name}': {what}; the library and "
        "its manifest disagree, recompile the build"
    )


def _check_extent(build: str, h: Handle, arena_bytes: tuple[int, int]) -> None:
    """The handle's arena exists, its bytes lie inside it, and its byte count is its shape's."""
    if h.arena not in (0, 1):
        raise _lie(build, h, f"arena {h.arena} (a build has arenas 0 weights and 1 state)")
    size = arena_bytes[h.arena]
    if h.offset < 0 or h.bytes < 0 or h.offset + h.bytes > size:
        raise _lie(
            build,
            h,
            f"bytes [{h.offset}, {h.offset + h.bytes}) of the {ARENA_NAMES[h.arena]} arena, "
            f"which holds {size}",
        )
    item = _ITEMSIZE.get(h.dtype)
    if item is not None and h.bytes != math.prod(h.shape) * item:
        raise _lie(
            build, h, f"{h.bytes} bytes for shape {list(h.shape)} of {h.dtype} ({item} each)"
        )


def _check_at(build: str, h: Handle | None, arena: int, offset: int, what: str) -> None:
    """The handle (when the manifest has it) is where the runtime reads or writes ``what``."""
    if h is None:
        return
    if (h.arena, h.offset) != (arena, offset):
        raise _lie(
            build,
            h,
            f"{ARENA_NAMES[h.arena] if h.arena in (0, 1) else h.arena} + {h.offset}, but the "
            f"runtime's {what} is at {ARENA_NAMES[arena]} + {offset}",
        )


def runtime_offsets(desc: Any) -> list[tuple[str, int, str]]:
    """``(handle name, state offset, what)`` of each input and output the runtime's
    entry points copy or read at a fixed offset of the state arena."""
    out: list[tuple[str, int, str]] = []
    for mode in INFERENCE_MODES:
        md = getattr(desc, mode)
        if md.run:
            out.append((f"{mode}.tokens", int(md.tokens_offset), f"{mode} tokens"))
            out.append((f"{mode}.logits", int(md.logits_offset), f"{mode} logits"))
    t = desc.train
    if t.backward:
        out.append(("backward.tokens", int(t.tokens_offset), "training tokens"))
        out.append(("backward.targets", int(t.targets_offset), "training targets"))
        out.append(("backward.loss", int(t.loss_offset), "loss"))
    return out


def trained_weights(build: str, desc: Any, manifest: Mapping[str, Handle]) -> list[TrainedWeight]:
    """Every trained weight of the runtime's description (``train.params``), with its
    param, gradient and moment handles; CkirError naming the handle that is missing or
    is not where the runtime keeps it."""
    by_offset = {h.offset: h for h in manifest.values() if h.role == "param"}
    t = desc.train
    out: list[TrainedWeight] = []
    for i in range(int(t.n_params)):
        p = t.params[i]
        slot = p.name.decode()
        param = by_offset.get(int(p.weight_offset))
        if param is None or param.arena != 0:
            raise CkirError(
                f"{build}: trained weight {slot} (weights + {p.weight_offset}) has no param "
                "handle in the I/O manifest; recompile the build"
            )
        handles = {}
        for prefix, field in ((GRAD, "grad_offset"), (ADAM_M, "m_offset"), (ADAM_V, "v_offset")):
            h = manifest.get(prefix + param.name)
            if h is None:
                raise CkirError(
                    f"{build}: the I/O manifest has no handle '{prefix}{param.name}' for "
                    f"trained weight {param.name}; recompile the build"
                )
            _check_at(build, h, 1, int(getattr(p, field)), f"{prefix.rstrip('.')} of {slot}")
            if h.dtype != "f32" or h.shape != param.shape:
                raise _lie(
                    build,
                    h,
                    f"{h.dtype} {list(h.shape)}, but its weight {param.name} is "
                    f"{param.dtype} {list(param.shape)} (the runtime trains f32)",
                )
            handles[prefix] = h
        if param.dtype != "f32" or math.prod(param.shape) != int(p.numel):
            raise _lie(
                build,
                param,
                f"{param.dtype} {list(param.shape)}, but the runtime trains {p.numel} f32 values",
            )
        out.append(
            TrainedWeight(param.name, param, handles[GRAD], handles[ADAM_M], handles[ADAM_V])
        )
    return out


def check_manifest(build: str, desc: Any, manifest: Mapping[str, Handle]) -> None:
    """CkirError naming the first handle that lies: outside its arena, a byte count
    that is not its shape's, or not where the runtime's description puts the buffer
    (tokens, targets, logits, loss; each trained weight's value, gradient and moments).
    A build without a manifest (none of its handles) has nothing to check."""
    if not manifest:
        return
    sizes = (int(desc.weights_bytes), int(desc.state_bytes))
    for h in manifest.values():
        _check_extent(build, h, sizes)
    for name, offset, what in runtime_offsets(desc):
        _check_at(build, manifest.get(name), 1, offset, what)
    trained_weights(build, desc, manifest)


def span(handles: Iterable[Handle]) -> tuple[int, int, int, list[tuple[int, int]]]:
    """``(arena, offset, bytes, gaps)``: the one region from the first of ``handles`` to
    the end of the last (all in one arena), and the ``(offset, bytes)`` within it, relative
    to its start, that no handle covers (alignment padding, canaries)."""
    ordered = sorted(handles, key=lambda h: h.offset)
    if not ordered:
        raise CkirError("span: no handles")
    arenas = {h.arena for h in ordered}
    if len(arenas) != 1:
        raise CkirError(f"span: handles in {len(arenas)} arenas ({ordered[0].name}, ...)")
    start, end = ordered[0].offset, ordered[0].offset
    gaps: list[tuple[int, int]] = []
    for h in ordered:
        if h.offset < end:
            raise CkirError(f"span: handle '{h.name}' overlaps the one before it")
        if h.offset > end:
            gaps.append((end - start, h.offset - end))
        end = h.offset + h.bytes
    return ordered[0].arena, start, end - start, gaps
