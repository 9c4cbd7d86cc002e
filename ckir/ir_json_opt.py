"""IR JSON as an input of ``ckir-opt``: a ``json`` frontend and content sniffing.

``ckir-opt FILE.json`` reads IR JSON (docs/ir-json.md); so does any input,
including stdin (no file or ``-``), whose first non-space character is ``{``
(IR text never starts with one).  Errors are :class:`ckir.ir_json.IRJSONError`:
one line naming the file and the JSON path.
"""

from __future__ import annotations

import io
import sys
from typing import IO, TYPE_CHECKING

if TYPE_CHECKING:
    from xdsl.xdsl_opt_main import xDSLOptMain


def register_json_frontend(driver: xDSLOptMain) -> None:
    """Add the ``json`` frontend (``--frontend json`` or a ``.json`` input) to ``driver``."""

    def parse_json(stream: IO[bytes]):  # noqa: ANN202 - xDSL's frontend signature
        from ckir.ir_json import parse_json_module

        return parse_json_module(stream.read(), _input_name(driver), driver.ctx)

    driver.available_frontends["json"] = parse_json


def json_aware_input(driver: xDSLOptMain) -> tuple[IO[bytes], str]:
    """The input bytes and the frontend for them: ``json`` for ``.json`` files and for
    content starting with ``{``, else the file's extension (``mlir`` for stdin)."""
    from ckir.ir_json import looks_like_json

    given = driver.args.input_file
    if given is None or given == "-":
        data = sys.stdin.buffer.read()
        extension = "mlir"
    else:
        with open(given, "rb") as f:
            data = f.read()
        extension = given.rsplit(".", 1)[-1] if "." in given.rsplit("/", 1)[-1] else ""
    if looks_like_json(data):
        extension = "json"
    return io.BytesIO(data), extension


def _input_name(driver: xDSLOptMain) -> str:
    given = driver.args.input_file
    return "<stdin>" if given in (None, "-") else given
