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

    Checks the magic, and that every tensor's data lies inside the file.  The
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
    for t in reader.tensors:
        end = int(t.data_offset) + int(t.n_bytes)
        if end > size:
            raise CkirError(
                f"{path.name}: tensor '{t.name}' data ends at byte {end}, past the end of the "
                f"file ({size} bytes): truncated"
            )
    _LAST.clear()
    _LAST[key] = reader
    return reader


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
