"""Run-time row offsets of views: ``offset 0 + P * 128``.

A ``lowered.view`` or ``layout.view`` may carry a row offset known only at run time:
its first byte is ``offset + P * row_bytes`` of its root, ``P`` being the position the
program already has (the tokens in the KV cache before this call).  ``--plan-views``
makes the k / v rows of an attention layer such views of the layer's KV cache, so the
kernels that produce them write straight into cache rows ``P .. P+T-1`` and the
``kv_store`` copy goes (docs/passes/plan-views.md).

Both dialects store it as the optional property ``rows = ["P", 128 : i64]`` (the symbol,
the bytes of one root row) and print it after the constant offset through the custom
directive :class:`RowOffset`::

    lowered.view @decode.layers.0.k of @kv.layers.0.k offset 0 + P * 128
        : !lowered.buf<[1, 32], f32>
    layout.view @decode.layers.0.k of @kv.layers.0.k offset 0 + P * 128 size 128
"""

from __future__ import annotations

from xdsl.dialects.builtin import ArrayAttr, IntegerAttr, StringAttr, i64
from xdsl.ir import Attribute
from xdsl.irdl import IRDLOperation
from xdsl.irdl.declarative_assembly_format import (
    AttributeVariable,
    CustomDirective,
    ParsingState,
    PrintingState,
    irdl_custom_directive,
)
from xdsl.parser import Parser
from xdsl.printer import Printer

from ckir.dialects.dims import POSITION

__all__ = ["ROW_OFFSET_SYMBOLS", "RowOffset", "make_rows", "row_offset", "rows_problem"]

#: the run-time symbols a view's row offset may follow: the KV position only
ROW_OFFSET_SYMBOLS: tuple[str, ...] = (POSITION,)


def make_rows(symbol: str, row_bytes: int) -> ArrayAttr:
    """The ``rows`` property of a view at row ``symbol`` of rows of ``row_bytes`` bytes."""
    return ArrayAttr((StringAttr(symbol), IntegerAttr(row_bytes, i64)))


def rows_problem(attr: Attribute | None) -> str | None:
    """Why a ``rows`` property is malformed, or None (also None when absent)."""
    if attr is None:
        return None
    data = attr.data if isinstance(attr, ArrayAttr) else ()
    if (
        len(data) != 2
        or not isinstance(data[0], StringAttr)
        or not isinstance(data[1], IntegerAttr)
    ):
        return 'rows must be ["<symbol>", <row bytes>]'
    symbol, row_bytes = data[0].data, data[1].value.data
    if symbol not in ROW_OFFSET_SYMBOLS:
        return (
            f"row offset symbol '{symbol}' is not one of {', '.join(ROW_OFFSET_SYMBOLS)} "
            "(the KV position of the program's call)"
        )
    if row_bytes <= 0:
        return f"row bytes {row_bytes} must be positive"
    return None


def row_offset(attr: Attribute | None) -> tuple[str, int] | None:
    """``(symbol, row bytes)`` of a well-formed ``rows`` property, None when absent."""
    if attr is None or rows_problem(attr) is not None:
        return None
    assert isinstance(attr, ArrayAttr)
    symbol, row_bytes = attr.data
    assert isinstance(symbol, StringAttr) and isinstance(row_bytes, IntegerAttr)
    return symbol.data, row_bytes.value.data


@irdl_custom_directive
class RowOffset(CustomDirective):
    """An optional ``+ P * <row bytes>`` after a view's constant offset (absent: none)."""

    attr: AttributeVariable

    def parse(self, parser: Parser, state: ParsingState) -> None:
        if parser.parse_optional_punctuation("+") is None:
            return
        symbol = parser.parse_identifier(" (the row offset's run-time symbol, P)")
        parser.parse_punctuation("*", " (then the bytes of one row)")
        row_bytes = parser.parse_integer(allow_boolean=False, allow_negative=False)
        self.attr.set(state, make_rows(symbol, row_bytes))

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        attr = self.attr.get(op)
        if attr is None:
            return
        assert isinstance(attr, ArrayAttr)
        symbol, row_bytes = attr.data
        state.print_whitespace(printer)
        sym_text = symbol.data if isinstance(symbol, StringAttr) else str(symbol)
        bytes_text = row_bytes.value.data if isinstance(row_bytes, IntegerAttr) else row_bytes
        printer.print_string(f"+ {sym_text} * {bytes_text}")
