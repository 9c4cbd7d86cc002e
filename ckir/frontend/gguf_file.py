"""Opening GGUF files (magic check, the ``gguf`` package's reader, truncation) and
reading their metadata values.

Both the GGUF frontend (config, tensors, weights) and the tokenizer (its
``tokenizer.ggml.*`` metadata) read a model file through :func:`open_gguf`.
Constructing a ``gguf.GGUFReader`` parses every metadata field into NumPy
views, which takes seconds for a real vocabulary (SmolLM2: ~4 s for 49k
tokens and merges), so the reader of the last file opened is kept and
handed out again while the file's inode, size, mtime and ctime are unchanged
(the same test as the compile cache's source fingerprint; an edit in place
that restores the mtime still changes the ctime):
``ckir generate`` reads the tokenizer and then compiles the same file with
one parse.  This module does not import xDSL.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ckir.errors import CkirError, one_line

GGUF_MAGIC = b"GGUF"

#: (resolved path, inode, size, mtime_ns, ctime_ns) -> reader, for the last file opened
_LAST: dict[tuple[str, int, int, int, int], Any] = {}


def is_gguf_file(path: str | Path) -> bool:
    """True for an existing file that starts with the GGUF magic."""
    p = Path(path)
    if not p.is_file():
        return False
    try:
        with p.open("rb") as f:
            return f.read(4) == GGUF_MAGIC
    except OSError:
        return False


def open_gguf(path: str | Path) -> Any:
    """A ``gguf.GGUFReader`` for ``path`` (memory-mapped), or a one-line CkirError.

    Checks the magic and the tensor data layout (:func:`check_tensor_layout`).  The
    same reader is returned again for an unchanged file (see the module doc).
    """
    path = Path(path)
    if not path.is_file():
        raise CkirError(f"{path}: no such GGUF file")
    st = path.stat()
    key = (str(path.resolve()), st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    if key in _LAST:
        return _LAST[key]
    size = st.st_size
    if not is_gguf_file(path):
        raise CkirError(f"{path.name}: not a GGUF file (no 'GGUF' magic in its first 4 bytes)")
    import gguf

    try:
        reader = gguf.GGUFReader(path, "r")
    except Exception as err:  # the gguf package raises plain errors on bad files
        raise CkirError(
            f"{path.name}: truncated or corrupt GGUF file ({size} bytes): {one_line(err)}"
        ) from None
    check_tensor_layout(reader, path.name, size)
    _LAST.clear()
    _LAST[key] = reader
    return reader


def check_tensor_layout(reader: Any, name: str, size: int) -> None:
    """Every tensor's data aligned, inside the file, and packed as a GGUF writer packs it.

    A writer places tensors in order, each at an offset aligned to
    ``general.alignment``, with less than one alignment of padding between one
    tensor's end and the next one's start.  Each tensor's byte size comes from
    its type and shape, so a moved offset, a changed type or shape, or
    overlapping tensors break one of: alignment, bounds, no overlap, padding.
    """
    align = int(reader.alignment)
    base = int(reader.data_offset)
    spans = sorted((int(t.data_offset), int(t.n_bytes), str(t.name)) for t in reader.tensors)
    prev_end, prev_name = base, None
    for start, nbytes, tname in spans:
        end = start + nbytes
        where = f"{name}: tensor '{tname}'"
        if end > size:
            raise CkirError(
                f"{where} data ends at byte {end}, past the end of the file ({size} bytes): "
                "truncated"
            )
        if (start - base) % align:
            raise CkirError(
                f"{where} data offset {start - base} is not a multiple of the file's "
                f"alignment {align}: corrupt tensor table"
            )
        if start < prev_end:
            raise CkirError(
                f"{where} data [{start}, {end}) overlaps tensor '{prev_name}' "
                f"(which ends at {prev_end}): corrupt tensor table"
            )
        if start - prev_end >= align:
            after = f"tensor '{prev_name}'" if prev_name else "the tensor table"
            raise CkirError(
                f"{where} starts {start - prev_end} bytes after the end of {after}, more than "
                f"the alignment {align}: its type, shape or offset does not match the data"
            )
        prev_end, prev_name = end, tname


def metadata(reader: Any, key: str, source: str) -> Any:
    """The value of metadata ``key`` (Python scalar, str or list), None when absent."""
    field = reader.fields.get(key)
    if field is None:
        return None
    try:
        value = field.contents()
    except Exception as err:
        raise CkirError(f"{source}: metadata '{key}' is unreadable ({one_line(err)})") from None
    return value.item() if isinstance(value, np.generic) else value
