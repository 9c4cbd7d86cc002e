"""weights.bin: the weights arena written from safetensors data at the layout's offsets.

Layout of the file::

    [0, 4096)            header: magic "CKIRWTS1", u32 version, u32 0,
                         u64 layout hash, u64 arena bytes, zeros
    [4096, 4096 + size)  the weights arena: each weight at its slot offset,
                         a canary after each slot when the plan has canaries

Weights are streamed one tensor at a time (np.memmap of the safetensors
file, packing applied, converted to the buffer dtype), so the model is never
in memory twice.  The file is written under a temporary name and renamed
only when complete.
"""

from __future__ import annotations

import json
import os
import struct
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ckir.backend.abi import (
    WEIGHTS_HEADER_BYTES,
    WEIGHTS_MAGIC,
    WEIGHTS_VERSION,
    arenas,
    canary_bytes,
    layout_hash,
)
from ckir.dialects import graph as g
from ckir.dialects import layout as ly
from ckir.dialects import lowered as lw
from ckir.dialects.dims import evaluate_dim
from ckir.errors import CkirError

_NP_DTYPES = {"F32": np.dtype("<f4"), "F16": np.dtype("<f2"), "BF16": np.dtype("<u2")}
_OUT_DTYPES = {"f32": np.dtype("<f4")}


@dataclass(frozen=True)
class StoredTensor:
    """Where one tensor's bytes are in a safetensors file."""

    file: Path
    dtype: str
    shape: tuple[int, ...]
    offset: int  # absolute byte offset in the file
    nbytes: int


def index_safetensors(model_dir: Path) -> dict[str, StoredTensor]:
    """Every tensor of a HF checkpoint folder (single file or sharded), header only."""
    files = sorted(model_dir.glob("*.safetensors"))
    if not files:
        raise CkirError(f"{model_dir}: no *.safetensors files")
    out: dict[str, StoredTensor] = {}
    for path in files:
        with open(path, "rb") as f:
            raw = f.read(8)
            if len(raw) != 8:
                raise CkirError(f"{path}: truncated safetensors header")
            (length,) = struct.unpack("<Q", raw)
            try:
                header = json.loads(f.read(length))
            except (ValueError, UnicodeDecodeError) as err:
                raise CkirError(f"{path}: corrupt safetensors header ({err})") from None
        base = 8 + length
        for name, info in header.items():
            if name == "__metadata__":
                continue
            start, end = info["data_offsets"]
            out[name] = StoredTensor(
                path, info["dtype"], tuple(info["shape"]), base + start, end - start
            )
    return out


def read_tensor(t: StoredTensor, name: str) -> np.ndarray:
    """The tensor as float32 (memory-mapped read; bf16/f16 converted)."""
    dtype = _NP_DTYPES.get(t.dtype)
    if dtype is None:
        raise CkirError(f"{t.file}: tensor '{name}' has dtype {t.dtype}; ckir reads F32/F16/BF16")
    count = int(np.prod(t.shape)) if t.shape else 1
    if count * dtype.itemsize != t.nbytes or t.offset + t.nbytes > t.file.stat().st_size:
        raise CkirError(f"{t.file}: tensor '{name}' data is truncated or inconsistent")
    raw = np.memmap(t.file, dtype=dtype, mode="r", offset=t.offset, shape=(count,))
    if t.dtype == "BF16":
        arr = (raw.astype(np.uint32) << 16).view(np.float32)
    else:
        arr = raw.astype(np.float32)
    return arr.reshape(t.shape)


def weight_instances(model: g.ModelOp) -> dict[str, tuple[g.WeightOp, int | None]]:
    """Instance name (``layers.3.wq``) -> its declaration and layer index."""
    layers = 0
    for op in model.body_block.ops:
        if isinstance(op, g.BodyOp):
            layers = evaluate_dim(op.repeat.data, model.symbol_values())
    out: dict[str, tuple[g.WeightOp, int | None]] = {}
    for name, decl in model.weights().items():
        if decl.per_layer:
            for i in range(layers):
                out[name.replace("{i}", str(i))] = (decl, i)
        else:
            out[name] = (decl, None)
    return out


def packed_weight(
    decl: g.WeightOp,
    layer: int | None,
    symbols: Mapping[str, int],
    tensors: Mapping[str, StoredTensor],
) -> np.ndarray:
    """A weight as the graph declares it: the HF tensor, sliced and transposed as mapped."""
    hf = decl.hf_name
    if hf is None:
        raise CkirError(f"graph.weight @{decl.weight_name}: has no HF source tensor")
    if layer is not None:
        hf = hf.replace("{i}", str(layer))
    stored = tensors.get(hf)
    if stored is None:
        raise CkirError(f"checkpoint has no tensor '{hf}' (graph.weight @{decl.weight_name})")
    arr = read_tensor(stored, hf)
    spec = decl.slice_spec
    if spec is not None:
        axis, start, stop = spec  # stop is exclusive
        index = [slice(None)] * arr.ndim
        index[axis] = slice(evaluate_dim(start, symbols), evaluate_dim(stop, symbols))
        arr = arr[tuple(index)]
    if decl.is_transposed:
        arr = arr.T
    return arr


def write_weights_bin(
    module_graph: g.ModelOp,
    lowered: lw.LoweredModelOp,
    plan: ly.PlanOp,
    model_dir: Path,
    out_path: Path,
    progress: Callable[[int, int], None] | None = None,
) -> None:
    """Write weights.bin for ``plan`` from the checkpoint in ``model_dir``."""
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
    tensors = index_safetensors(model_dir)
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
                layout_hash(plan),
                arena.size_bytes,
            )
            f.write(header)
            f.truncate(WEIGHTS_HEADER_BYTES + arena.size_bytes)
            guard = canary_bytes()
            for k, slot in enumerate(slots):
                name = slot.buffer_name
                source = sources.get(name)
                if source is None or source not in instances:
                    raise CkirError(f"weights.bin: slot @{name} has no graph weight source")
                decl, layer = instances[source]
                arr = packed_weight(decl, layer, symbols, tensors)
                btype = btypes[name]
                if tuple(arr.shape) != tuple(btype.shape_ints):
                    raise CkirError(
                        f"weights.bin: '{decl.hf_name}' packs to shape {list(arr.shape)}, "
                        f"buffer @{name} needs {list(btype.shape_ints)}"
                    )
                out_dtype = _OUT_DTYPES.get(btype.dtype_name)
                if out_dtype is None:
                    raise CkirError(
                        f"weights.bin: no writer for dtype {btype.dtype_name} (@{name})"
                    )
                data = np.ascontiguousarray(arr, dtype=out_dtype).tobytes()
                if len(data) != slot.size_bytes:
                    raise CkirError(f"weights.bin: @{name} is {len(data)} bytes, slot holds "
                                    f"{slot.size_bytes}")
                f.seek(WEIGHTS_HEADER_BYTES + slot.offset_bytes)
                f.write(data)
                if slot.canary_offset is not None:
                    f.seek(WEIGHTS_HEADER_BYTES + slot.canary_offset)
                    f.write(guard)
                if progress is not None:
                    progress(k + 1, len(slots))
        os.replace(tmp, out_path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
