"""Generators of bad inputs for ``tests/test_bad_inputs.py``: corrupt checkpoints and files.

Every function writes into a folder the test owns (a pytest ``tmp_path``) and
returns the path of the bad input; nothing here is checked in as a binary.
The inputs are derived from the tiny random checkpoints of ``conftest.py``:

* safetensors: overlapping data offsets, a duplicated tensor name, NaN/Inf values;
* GGUF (written with ``tests/gguf_fixtures.py``): a tensor offset moved by 16
  bytes, a tensor type changed, two tensors overlapping, a NaN block scale;
* a template with ``causal: false``; a FIFO where a template is expected.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
from pathlib import Path

import numpy as np

GGUF_TYPE_IDS = {"F32": 0, "F16": 1, "Q4_0": 2, "Q4_1": 3, "Q8_0": 8}


# ---------------------------------------------------------------------------
# safetensors
# ---------------------------------------------------------------------------


def read_safetensors(path: Path) -> tuple[dict[str, dict], bytes]:
    """(header as a dict, data section bytes) of a ``.safetensors`` file."""
    raw = path.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    return json.loads(raw[8 : 8 + n]), raw[8 + n :]


def safetensors_data_start(path: Path) -> int:
    """Absolute file offset of the data section (8 + header length)."""
    with path.open("rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
    return 8 + n


def write_safetensors_raw(path: Path, header_text: str, data: bytes) -> None:
    """Write a safetensors file from header text (not re-serialized) and data bytes."""
    head = header_text.encode()
    path.write_bytes(struct.pack("<Q", len(head)) + head + data)


def tiny_llama(dst: Path, seed: int) -> Path:
    """A tiny random Llama whose every K is a multiple of 32 (so block formats apply)."""
    from ckir.tools.zoo import make_tiny_model

    return make_tiny_model("llama", dst, seed=seed, intermediate_size=128)


def copy_model(src: Path, dst: Path) -> Path:
    """A copy of the checkpoint folder ``src`` at ``dst`` (to be damaged)."""
    shutil.copytree(src, dst)
    return dst


def _same_size_pair(header: dict[str, dict]) -> tuple[str, str]:
    """Two tensors of the same dtype and shape (e.g. two layers' norms)."""
    seen: dict[tuple[str, tuple[int, ...]], str] = {}
    for name in sorted(header):
        if name == "__metadata__":
            continue
        key = (header[name]["dtype"], tuple(header[name]["shape"]))
        if key in seen:
            return seen[key], name
        seen[key] = name
    raise AssertionError("no two tensors of the same size")


def safetensors_overlap(model: Path, dst: Path) -> Path:
    """Two tensors whose data offsets point at the same bytes (bounds and sizes still fine)."""
    out = copy_model(model, dst)
    st = out / "model.safetensors"
    header, data = read_safetensors(st)
    a, b = _same_size_pair(header)
    header[b]["data_offsets"] = list(header[a]["data_offsets"])
    write_safetensors_raw(st, json.dumps(header), data)
    return out


def safetensors_duplicate_key(model: Path, dst: Path) -> Path:
    """A header naming one tensor twice, the second time with another tensor's bytes
    (``json.loads`` keeps the last entry; the format forbids duplicates)."""
    out = copy_model(model, dst)
    st = out / "model.safetensors"
    header, data = read_safetensors(st)
    a, b = _same_size_pair(header)
    text = json.dumps(header)
    dup = json.dumps({a: header[b]})[1:-1]
    write_safetensors_raw(st, text[:-1] + ", " + dup + "}", data)
    return out


def safetensors_non_finite(model: Path, dst: Path, value: float) -> Path:
    """One element of a weight matrix replaced by ``value`` (NaN or Inf)."""
    out = copy_model(model, dst)
    st = out / "model.safetensors"
    header, data = read_safetensors(st)
    name = next(n for n in sorted(header) if n.endswith("q_proj.weight"))
    entry = header[name]
    width = {"F32": 4, "BF16": 2, "F16": 2}[entry["dtype"]]
    at = entry["data_offsets"][0] + 5 * width
    enc = {
        "F32": np.float32(value).tobytes(),
        "F16": np.float16(value).tobytes(),
        "BF16": np.float32(value).tobytes()[2:],
    }[entry["dtype"]]
    patched = data[:at] + enc + data[at + width :]
    text = json.dumps(header)
    write_safetensors_raw(st, text, patched)
    return out


# ---------------------------------------------------------------------------
# GGUF
# ---------------------------------------------------------------------------


def tensor_info_fields(raw: bytes, name: str) -> tuple[int, int]:
    """File offsets of the type (u32) and data offset (u64) fields of tensor ``name``'s info."""
    key = struct.pack("<Q", len(name)) + name.encode()
    pos = raw.index(key) + len(key)
    (n_dims,) = struct.unpack_from("<I", raw, pos)
    type_pos = pos + 4 + 8 * n_dims
    return type_pos, type_pos + 4


def gguf_tensors(path: Path) -> list[tuple[str, str, int, int]]:
    """(name, type, absolute data offset, bytes) of each tensor, in file order."""
    import gguf

    reader = gguf.GGUFReader(path, "r")
    rows = [
        (str(t.name), t.tensor_type.name, int(t.data_offset), int(t.n_bytes))
        for t in reader.tensors
    ]
    return sorted(rows, key=lambda r: r[2])


def _patch(path: Path, dst: Path, edits: list[tuple[int, bytes]]) -> Path:
    raw = bytearray(path.read_bytes())
    for at, data in edits:
        raw[at : at + len(data)] = data
    dst.write_bytes(bytes(raw))
    return dst


def _offset_edit(raw: bytes, name: str, delta: int) -> tuple[int, bytes]:
    _, off_pos = tensor_info_fields(raw, name)
    (offset,) = struct.unpack_from("<Q", raw, off_pos)
    return off_pos, struct.pack("<Q", offset + delta)


def gguf_offset_moved(src: Path, dst: Path) -> Path:
    """A middle tensor's data offset moved by 16 bytes (misaligned, still inside the file)."""
    raw = src.read_bytes()
    name = gguf_tensors(src)[1][0]
    return _patch(src, dst, [_offset_edit(raw, name, 16)])


def gguf_type_changed(src: Path, dst: Path) -> Path:
    """A Q8_0 matrix relabelled Q4_0: its computed size shrinks, leaving a gap."""
    raw = src.read_bytes()
    name = next(n for n, kind, _, _ in gguf_tensors(src) if kind == "Q8_0")
    type_pos, _ = tensor_info_fields(raw, name)
    return _patch(src, dst, [(type_pos, struct.pack("<I", GGUF_TYPE_IDS["Q4_0"]))])


def gguf_overlap(src: Path, dst: Path) -> Path:
    """Two tensors of one size at the same data offset."""
    raw = src.read_bytes()
    rows = gguf_tensors(src)
    by_size: dict[tuple[str, int], str] = {}
    for name, kind, _offset, nbytes in rows:
        first = by_size.setdefault((kind, nbytes), name)
        if first != name:
            _, off_pos = tensor_info_fields(raw, name)
            _, first_pos = tensor_info_fields(raw, first)
            return _patch(src, dst, [(off_pos, raw[first_pos : first_pos + 8])])
    raise AssertionError("no two GGUF tensors of the same size")


def gguf_nan_scale(src: Path, dst: Path) -> Path:
    """The f16 scale of a Q8_0 block set to NaN (the block's 32 weights become NaN)."""
    name, _, offset, _ = next(r for r in gguf_tensors(src) if r[1] == "Q8_0")
    del name
    return _patch(src, dst, [(offset + 34, np.float16(np.nan).tobytes())])


def gguf_f32_inf(src: Path, dst: Path) -> Path:
    """One value of an F32 tensor (a norm) set to +Inf."""
    _, _, offset, _ = next(r for r in gguf_tensors(src) if r[1] == "F32")
    return _patch(src, dst, [(offset + 8, np.float32(np.inf).tobytes())])


# ---------------------------------------------------------------------------
# templates and other files
# ---------------------------------------------------------------------------


def template_not_causal(templates_dir: Path, dst: Path) -> Path:
    """The llama template with ``causal: false``."""
    text = (templates_dir / "llama.yaml").read_text()
    assert "causal: true" in text
    dst.write_text(text.replace("causal: true", "causal: false"))
    return dst


def fifo(dst: Path) -> Path:
    """A named pipe (reading it blocks until a writer opens it)."""
    os.mkfifo(dst)
    return dst


def snapshot(root: Path) -> dict[str, tuple[str, int, int]]:
    """Every entry under ``root``: relative path -> (kind, size, mtime_ns), to detect changes."""
    out: dict[str, tuple[str, int, int]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            st = p.lstat()
            kind = "dir" if p.is_dir() else "file"
            size = 0 if kind == "dir" else st.st_size
            out[str(p.relative_to(root))] = (kind, size, st.st_mtime_ns)
    return out


def clean_error(proc: subprocess.CompletedProcess[str], pattern: str) -> str:
    """Assert exit code 1 (not a signal), no traceback and one ``error:`` line matching
    ``pattern`` on stderr; returns that line."""
    assert proc.returncode == 1, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("error:")]
    assert len(lines) == 1, proc.stderr
    assert re.search(pattern, lines[0]), lines[0]
    return lines[0]
