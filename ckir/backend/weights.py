"""weights.bin: the weights arena written from safetensors data at the layout's offsets.

Layout of the file::

    [0, 4096)            header: magic "CKIRWTS1", u32 version, u32 0,
                         u64 build fingerprint, u64 arena bytes, zeros
    [4096, 4096 + size)  the weights arena: each weight at its slot offset,
                         a canary after each slot when the plan has canaries

Weights are streamed one tensor at a time from a :class:`WeightSource`
(for HF folders: np.memmap of the safetensors file, packing applied,
encoded in the buffer dtype), so the model is never
in memory twice.  The file is written under a temporary name and renamed
only when complete.
"""

from __future__ import annotations

import os
import struct
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Protocol

import numpy as np

from ckir.backend.abi import (
    WEIGHTS_HEADER_BYTES,
    WEIGHTS_MAGIC,
    WEIGHTS_VERSION,
    arenas,
    build_fingerprint,
    canary_bytes,
)
from ckir.dialects import graph as g
from ckir.dialects import layout as ly
from ckir.dialects import lowered as lw
from ckir.dialects.dims import evaluate_dim
from ckir.errors import CkirError
from ckir.frontend.safetensors_header import TensorInfo, read_checkpoint_header
from ckir.vocab import BLOCK_DTYPES, PANEL_DTYPES, PANEL_VALUES, dtype_info

_NP_DTYPES = {"F32": np.dtype("<f4"), "F16": np.dtype("<f2"), "BF16": np.dtype("<u2")}


class WeightSource(Protocol):
    """Where weight bytes come from (a HF folder, a GGUF file, ...).

    ``bytes_for`` returns one weight instance, packed as the graph declares it
    (slices, transposes, row permutations undone) and encoded in ``dtype``,
    as a contiguous uint8 array of exactly the buffer's byte size.
    """

    def bytes_for(
        self, decl: g.WeightOp, layer: int | None, symbols: Mapping[str, int], dtype: str
    ) -> np.ndarray: ...


def read_tensor(t: TensorInfo, name: str) -> np.ndarray:
    """A safetensors tensor as float32 (memory-mapped read; bf16/f16 converted)."""
    dtype = _NP_DTYPES.get(t.dtype)
    if dtype is None:
        raise CkirError(f"{t.file}: tensor '{name}' has dtype {t.dtype}; ckir reads F32/F16/BF16")
    count = int(np.prod(t.shape)) if t.shape else 1
    start, end = t.absolute_offsets
    if count * dtype.itemsize != t.nbytes or end > t.file.stat().st_size:
        raise CkirError(f"{t.file}: tensor '{name}' data is truncated or inconsistent")
    raw = np.memmap(t.file, dtype=dtype, mode="r", offset=start, shape=(count,))
    if t.dtype == "BF16":
        arr = (raw.astype(np.uint32) << 16).view(np.float32)
    else:
        arr = raw.astype(np.float32)
    return arr.reshape(t.shape)


def check_finite(arr: np.ndarray, dtype: str, what: str) -> None:
    """CkirError when weight ``what`` holds NaN or Inf (``arr``: float32, or bytes of
    ``dtype``): a non-finite weight makes every logit NaN, never a usable answer."""
    from ckir import quant

    bad = quant.count_non_finite(arr, dtype)
    if bad:
        kind = "scales" if dtype in BLOCK_DTYPES else "values"
        raise CkirError(
            f"weights: tensor '{what}' has {bad} non-finite {kind} (NaN or Inf); "
            "the checkpoint is corrupt"
        )


def encode(arr: np.ndarray, dtype: str, what: str) -> np.ndarray:
    """float32 array -> the bytes of ``dtype`` (f32, or a format of :mod:`ckir.quant`:
    bf16, f32p / bf16p / q8_0p / q4_1p / q4_0p panels, GGUF blocks); a CkirError naming
    ``what`` if ``arr`` holds NaN or Inf, or does not fit the format (a panel matrix
    that is not 2-D, an odd K for bf16p, K % 32 != 0 for q8_0p, q4_1p and q4_0p, a
    block scale beyond float16's range)."""
    check_finite(arr, "f32", what)
    out = _encode(arr, dtype, what)
    if dtype in BLOCK_DTYPES:
        from ckir import quant

        if quant.count_non_finite(out, dtype):
            raise CkirError(
                f"weights: tensor '{what}' does not fit {dtype}: its values (up to "
                f"{float(np.abs(arr).max()):.3g} in magnitude) overflow the float16 block "
                "scales; build it in f32 or bf16"
            )
    return out


def _encode(arr: np.ndarray, dtype: str, what: str) -> np.ndarray:
    if dtype == "f32":
        return np.ascontiguousarray(arr, dtype="<f4").view(np.uint8).reshape(-1)
    from ckir import quant

    if dtype == "bf16":
        return np.ascontiguousarray(quant.to_bf16(arr)).view(np.uint8).reshape(-1)
    if dtype in PANEL_DTYPES:
        group = dtype_info(dtype).k_group
        if np.ndim(arr) != 2 or np.shape(arr)[1] % group:
            need = "[N, K] matrices" + (f" with K % {group} == 0" if group > 1 else "")
            raise CkirError(
                f"weights.bin: {what} has shape {list(np.shape(arr))}; {dtype} stores {need}"
            )
        return np.ascontiguousarray(quant.pack_panels(arr, dtype)).view(np.uint8).reshape(-1)
    quantizer = getattr(quant, f"quantize_{dtype}", None)
    if quantizer is None:
        raise CkirError(f"weights.bin: no encoder for dtype {dtype} ({what})")
    return np.ascontiguousarray(quantizer(np.ascontiguousarray(arr))).view(np.uint8).reshape(-1)


def encode_blocks(rows: np.ndarray, dtype: str, what: str) -> np.ndarray:
    """Block bytes of a matrix (uint8 ``[N, K/32 * block bytes]``, a GGUF tensor's
    rows) -> the bytes of ``dtype``: the rows themselves for their own block format,
    or that format's block panel dtype (``q8_0p`` for Q8_0 rows, ``q4_1p`` for Q4_1
    ones: the blocks permuted into panels, bit for bit, never dequantized).  CkirError
    naming ``what`` otherwise."""
    from ckir import quant

    if dtype in BLOCK_DTYPES and dtype not in PANEL_DTYPES:
        return np.ascontiguousarray(rows).reshape(-1)
    if dtype in PANEL_DTYPES and dtype in BLOCK_DTYPES:
        try:
            return quant.pack_block_panels(rows, dtype).reshape(-1)
        except ValueError as err:
            raise CkirError(f"weights.bin: {what}: {err}") from None
    raise CkirError(
        f"weights.bin: {what}: no block repacking to {dtype} "
        f"(block panel dtypes: {', '.join(d for d in PANEL_VALUES if d in BLOCK_DTYPES)})"
    )


class SafetensorsSource:
    """Weights of a HF checkpoint folder (single file or sharded), read lazily."""

    def __init__(self, model_dir: Path) -> None:
        self.tensors, _ = read_checkpoint_header(model_dir)

    def bytes_for(
        self, decl: g.WeightOp, layer: int | None, symbols: Mapping[str, int], dtype: str
    ) -> np.ndarray:
        hf = decl.source_tensor("hf", layer)
        stored = self.tensors.get(hf)
        if stored is None:
            raise CkirError(f"checkpoint has no tensor '{hf}' (graph.weight @{decl.weight_name})")
        return encode(pack_tensor(read_tensor(stored, hf), decl, symbols, f"'{hf}'"), dtype, hf)


def pack_tensor(
    arr: np.ndarray, decl: g.WeightOp, symbols: Mapping[str, int], what: str
) -> np.ndarray:
    """``arr`` (the source tensor ``what``) sliced and transposed as ``decl`` declares,
    checked against the weight's shape."""
    spec = decl.slice_spec
    if spec is not None:
        axis, start, stop = spec  # stop is exclusive
        index = [slice(None)] * arr.ndim
        index[axis] = slice(evaluate_dim(start, symbols), evaluate_dim(stop, symbols))
        arr = arr[tuple(index)]
    if decl.is_transposed:
        arr = arr.T
    want = tuple(evaluate_dim(d, symbols) for d in decl.shape_dims)
    if tuple(arr.shape) != want:
        raise CkirError(
            f"weights.bin: {what} packs to shape {list(arr.shape)}, "
            f"graph.weight @{decl.weight_name} needs {list(want)}"
        )
    return arr


def weight_instances(model: g.ModelOp) -> dict[str, tuple[g.WeightOp, int | None]]:
    """Instance name (``layers.3.wq``) -> its declaration and layer index."""
    layers = 0
    for op in model.body_block.ops:
        if isinstance(op, g.BodyOp):
            layers = evaluate_dim(op.repeat.text, model.symbol_values())
    out: dict[str, tuple[g.WeightOp, int | None]] = {}
    for name, decl in model.weights().items():
        if decl.per_layer:
            for i in range(layers):
                out[name.replace("{i}", str(i))] = (decl, i)
        else:
            out[name] = (decl, None)
    return out


def write_weights_bin(
    module_graph: g.ModelOp,
    lowered: lw.LoweredModelOp,
    plan: ly.PlanOp,
    weights: WeightSource,
    out_path: Path,
    progress: Callable[[int, int], None] | None = None,
    fingerprint: int | None = None,
) -> None:
    """Write weights.bin for ``plan`` with the weight bytes of ``source``; ``fingerprint``
    is the build's when the caller computed it already."""
    arena = arenas(plan).get("weights")
    if arena is None:
        raise CkirError("weights.bin: the layout plan has no weights arena")
    sources = {
        op.buffer_name: op.source_name
        for op in lowered.body_block.ops
        if isinstance(op, lw.BufferOp) and op.role == "weight"
    }
    btypes = {
        op.buffer_name: op.buffer_type
        for op in lowered.body_block.ops
        if isinstance(op, lw.BufferOp) and op.role == "weight"
    }
    instances = weight_instances(module_graph)
    symbols = module_graph.symbol_values()
    slots = [op for op in arena.body_block.ops if isinstance(op, ly.SlotOp)]

    out_path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=out_path.parent, prefix=".weights.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            header = bytearray(WEIGHTS_HEADER_BYTES)
            struct.pack_into(
                "<8sIIQQ",
                header,
                0,
                WEIGHTS_MAGIC,
                WEIGHTS_VERSION,
                0,
                build_fingerprint(lowered, plan) if fingerprint is None else fingerprint,
                arena.size_bytes,
            )
            f.write(header)
            f.truncate(WEIGHTS_HEADER_BYTES + arena.size_bytes)
            guard = canary_bytes()
            for k, slot in enumerate(slots):
                name = slot.buffer_name
                source_name = sources.get(name)
                if source_name is None or source_name not in instances:
                    raise CkirError(f"weights.bin: slot @{name} has no graph weight source")
                decl, layer = instances[source_name]
                data = weights.bytes_for(decl, layer, symbols, btypes[name].dtype_name)
                if data.nbytes != slot.size_bytes:
                    raise CkirError(
                        f"weights.bin: @{name} is {data.nbytes} bytes, slot holds {slot.size_bytes}"
                    )
                f.seek(WEIGHTS_HEADER_BYTES + slot.offset_bytes)
                f.write(data.tobytes())
                if slot.canary_offset is not None:
                    f.seek(WEIGHTS_HEADER_BYTES + slot.canary_offset)
                    f.write(guard)
                if progress is not None:
                    progress(k + 1, len(slots))
        os.replace(tmp, out_path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
