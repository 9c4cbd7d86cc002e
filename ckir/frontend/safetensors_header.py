"""Read safetensors headers without touching tensor data.

A ``.safetensors`` file is an 8-byte little-endian header length ``N``, ``N``
bytes of JSON (``{"name": {"dtype": "F32", "shape": [..], "data_offsets":
[begin, end]}, "__metadata__": {...}}``), then the data; offsets are relative
to the first data byte (``8 + N``).  Only the first ``8 + N`` bytes are read.

A sharded checkpoint has ``model.safetensors.index.json`` whose ``weight_map``
maps each tensor to its shard file; :func:`read_checkpoint_header` merges the
shards' headers.
"""

from __future__ import annotations

import json
import math
import struct
from dataclasses import dataclass
from pathlib import Path

from ckir.errors import CkirError, one_line

#: bytes per element of each safetensors dtype
DTYPE_SIZES: dict[str, int] = {
    "BOOL": 1,
    "U8": 1,
    "I8": 1,
    "F8_E4M3": 1,
    "F8_E5M2": 1,
    "I16": 2,
    "U16": 2,
    "F16": 2,
    "BF16": 2,
    "I32": 4,
    "U32": 4,
    "F32": 4,
    "I64": 8,
    "U64": 8,
    "F64": 8,
}

#: refuse headers larger than this (a corrupt length field would otherwise read GBs)
MAX_HEADER_BYTES = 100 * 1024 * 1024

SINGLE_FILE = "model.safetensors"
INDEX_FILE = "model.safetensors.index.json"


@dataclass(frozen=True)
class TensorInfo:
    """Where one tensor is: its dtype, shape, byte range and file.

    ``data_offsets`` are relative to the data section, as in the header;
    ``data_start`` is the absolute file offset of the data section (``8 + N``),
    so the tensor's bytes are ``[data_start + begin, data_start + end)``.
    """

    dtype: str
    shape: tuple[int, ...]
    data_offsets: tuple[int, int]
    file: Path
    data_start: int = 0

    @property
    def nbytes(self) -> int:
        return self.data_offsets[1] - self.data_offsets[0]

    @property
    def absolute_offsets(self) -> tuple[int, int]:
        return self.data_start + self.data_offsets[0], self.data_start + self.data_offsets[1]


def read_safetensors_header(path: str | Path) -> dict[str, TensorInfo]:
    """The tensors of one ``.safetensors`` file, from its header only.

    Raises :class:`CkirError` naming the file when the header is truncated,
    not JSON, or inconsistent (unknown dtype, offsets that do not match the
    shape or run past the end of the file).
    """
    path = Path(path)
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            raw = f.read(8)
            if len(raw) < 8:
                raise CkirError(
                    f"{path}: truncated safetensors header ({size} bytes, need at least 8)"
                )
            (length,) = struct.unpack("<Q", raw)
            if length > MAX_HEADER_BYTES or 8 + length > size:
                raise CkirError(
                    f"{path}: truncated or corrupt safetensors header (header length {length}, "
                    f"file has {size} bytes)"
                )
            text = f.read(length)
    except FileNotFoundError:
        raise CkirError(f"{path}: file not found") from None
    except OSError as e:
        raise CkirError(f"{path}: cannot read: {e.strerror or e}") from None
    try:
        header = json.loads(text.decode("utf-8"), object_pairs_hook=_no_duplicates)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CkirError(f"{path}: corrupt safetensors header (not JSON: {e})") from None
    except _DuplicateName as e:
        raise CkirError(
            f"{path}: corrupt safetensors header: tensor '{e}' is named twice"
        ) from None
    if not isinstance(header, dict):
        raise CkirError(f"{path}: corrupt safetensors header (not a JSON object)")
    data_start = 8 + length
    data_size = size - data_start
    out: dict[str, TensorInfo] = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        out[name] = _tensor_info(path, name, entry, data_start, data_size)
    _validate_with_library(path)
    return out


def _validate_with_library(path: Path) -> None:
    """The ``safetensors`` library's own header validation (overlapping or out-of-order
    data offsets, duplicate names, gaps), which ``json.loads`` above does not see."""
    from safetensors import SafetensorError, safe_open

    try:
        with safe_open(str(path), framework="numpy"):
            pass
    except (SafetensorError, OSError, ValueError) as err:
        raise CkirError(f"{path}: corrupt safetensors file: {one_line(err)}") from None


class _DuplicateName(Exception):
    """A JSON object of the header has a key twice (``json.loads`` would keep the last)."""


def _no_duplicates(pairs: list[tuple[str, object]]) -> dict[str, object]:
    out: dict[str, object] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateName(key)
        out[key] = value
    return out


def _tensor_info(
    path: Path, name: str, entry: object, data_start: int, data_size: int
) -> TensorInfo:
    bad = f"{path}: corrupt safetensors header: tensor '{name}'"
    if not isinstance(entry, dict):
        raise CkirError(f"{bad} is not an object")
    dtype = entry.get("dtype")
    shape = entry.get("shape")
    offsets = entry.get("data_offsets")
    if not isinstance(dtype, str) or dtype not in DTYPE_SIZES:
        raise CkirError(f"{bad} has unknown dtype {dtype!r}")
    if not isinstance(shape, list) or not all(
        isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape
    ):
        raise CkirError(f"{bad} has a bad shape {shape!r}")
    if (
        not isinstance(offsets, list)
        or len(offsets) != 2
        or not all(isinstance(o, int) and not isinstance(o, bool) for o in offsets)
    ):
        raise CkirError(f"{bad} has bad data_offsets {offsets!r}")
    begin, end = offsets
    expected = math.prod(shape) * DTYPE_SIZES[dtype]
    if not 0 <= begin <= end or end - begin != expected:
        raise CkirError(
            f"{bad} has data_offsets [{begin}, {end}] but {dtype} {shape} needs {expected} bytes"
        )
    if end > data_size:
        raise CkirError(
            f"{path}: truncated: tensor '{name}' ends at byte {end} of the data section, "
            f"which has {data_size} bytes"
        )
    return TensorInfo(dtype, tuple(shape), (begin, end), path, data_start)


def read_checkpoint_header(model_dir: str | Path) -> tuple[dict[str, TensorInfo], Path]:
    """All tensors of a HF checkpoint directory: ``(tensors, source)``.

    ``source`` is the file that lists them: ``model.safetensors.index.json``
    for a sharded checkpoint (each shard's header is read), else
    ``model.safetensors``.
    """
    model_dir = Path(model_dir)
    index = model_dir / INDEX_FILE
    single = model_dir / SINGLE_FILE
    if index.is_file():
        return _read_sharded(index), index
    if single.is_file():
        return read_safetensors_header(single), single
    raise CkirError(f"{model_dir}: no {SINGLE_FILE} or {INDEX_FILE}")


def _read_sharded(index: Path) -> dict[str, TensorInfo]:
    try:
        doc = json.loads(index.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CkirError(f"{index}: cannot read the shard index: {e}") from None
    weight_map = doc.get("weight_map") if isinstance(doc, dict) else None
    if not isinstance(weight_map, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in weight_map.items()
    ):
        raise CkirError(f"{index}: 'weight_map' must map tensor names to shard file names")
    shards: dict[str, dict[str, TensorInfo]] = {}
    for shard in sorted(set(weight_map.values())):
        shard_path = index.parent / shard
        if Path(shard).is_absolute() or ".." in Path(shard).parts:
            raise CkirError(f"{index}: shard '{shard}' is not a file in the checkpoint directory")
        if not shard_path.is_file():
            raise CkirError(f"{index}: shard file '{shard}' does not exist")
        shards[shard] = read_safetensors_header(shard_path)
    out: dict[str, TensorInfo] = {}
    for name in sorted(weight_map):
        shard = weight_map[name]
        info = shards[shard].get(name)
        if info is None:
            raise CkirError(f"{index}: tensor '{name}' is mapped to '{shard}', which lacks it")
        out[name] = info
    for shard in sorted(shards):  # tensors a shard has but the index forgot: keep them
        for name, info in shards[shard].items():
            out.setdefault(name, info)
    return out
