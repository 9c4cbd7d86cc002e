"""``ckir inspect --tensors``: the tensor table of a graph ``.mlir`` or of a build.

A build's table is read from its ``layout.mlir`` (the graph model as compiled: the
weights in the dtypes the build stores, the qbits that ``--annotate-quant`` and the
compile finalised); a ``.mlir`` file's from its graph models (annotated on the fly if
it was written before the table existed).  ``--json FILE`` writes the rows as JSON
(:func:`ckir.tensor_table.table_json`).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ckir.errors import CkirError
from ckir.fileio import write_text_atomically

#: build.json: the build's QConfig asked for int8 activations (``ckir run`` then runs its
#: prefill on int8 x, as ``--int8-prefill`` does)
INT8_PREFILL_KEY = "qconfig_int8_prefill"


def register_tensors_options(parser: argparse.ArgumentParser) -> None:
    """``--tensors`` and ``--json FILE`` on ``ckir inspect``."""
    parser.add_argument(
        "--tensors",
        action="store_true",
        help="print the tensor table (role, layout, dtype, qbits of every tensor); BUILD may "
        "also be a graph .mlir",
    )
    parser.add_argument("--json", metavar="FILE", help="write the tensor table as JSON to FILE")


def table_source(path: Path) -> Path:
    """The IR file holding the table of ``path`` (a build folder or an ``.mlir`` file)."""
    if path.is_dir():
        ir = path / "layout.mlir"
        if not ir.exists():
            raise CkirError(f"{path}: no layout.mlir (not a ckir build folder?)")
        return ir
    if not path.exists():
        raise CkirError(f"{path}: no such file or folder")
    return path


def inspect_tensors(path: Path, json_out: str | None) -> int:
    """Print the table of ``path``; with ``json_out`` also write it as JSON there."""
    from ckir.ir_io import load_module
    from ckir.tensor_table import format_table, table_json, tensor_table

    source = table_source(path)
    try:
        rows = tensor_table(load_module(source))
    except ValueError as err:
        raise CkirError(f"{source}: {err}") from None
    if not rows:
        raise CkirError(f"{source}: no graph.model (nothing to tabulate)")
    sys.stdout.write(format_table(rows))
    if json_out:
        write_text_atomically(Path(json_out), table_json(rows))
    return 0
