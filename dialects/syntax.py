"""Custom directives of the declarative assembly formats of the three dialects.

An op's ``assembly_format`` names them as ``custom<Name>(...)``; each prints and
parses one piece of syntax the generic directives cannot express:

- ``custom<Body>($body)``: a single-block region without block arguments,
  ``{ ... }`` (an empty block prints as ``{}`` and parses back to one empty block);
- ``custom<Section>($body)``: a section's block arguments, then its region:
  ``(%x : !graph.tensor<[T, E], f32>) { ... }``;
- ``custom<Ident>($role)``: a string attribute printed as a bare identifier (``weight``);
- ``custom<Dim>($heads)``: a ``#graph.dim`` attribute printed as its bare
  expression (``H*D``), the way it reads inside an op;
- ``custom<Flag>($canaries)``: an ``i1`` integer attribute as ``true`` / ``false``;
- ``custom<IntMap>($symbols)``: a dictionary of ``i64`` integers as ``{C = 128, D = 16}``;
- ``custom<BufferRole>($role)`` / ``custom<SlotRole>($role)``: a role of
  ``ckir.vocab.ROLES`` as a bare identifier, an unknown one being a parse error;
- ``custom<Live>($live)``: a slot's optional live range, ``live "decode" 0 3``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import ClassVar

from xdsl.dialects.builtin import ArrayAttr, DictionaryAttr, IntegerAttr, StringAttr, i1, i64
from xdsl.ir import Attribute, Block, Region
from xdsl.irdl import IRDLOperation
from xdsl.irdl.declarative_assembly_format import (
    AttributeVariable,
    CustomDirective,
    ParsingState,
    PrintingState,
    RegionVariable,
    irdl_custom_directive,
)
from xdsl.parser import AttrParser, Parser
from xdsl.printer import Printer

from ckir.dialects.dims import DimAttr, parse_dim_expr
from ckir.vocab import ROLES

__all__ = [
    "DIRECTIVES",
    "Body",
    "BufferRole",
    "Dim",
    "Flag",
    "Ident",
    "IntMap",
    "Live",
    "Section",
    "SlotRole",
]


def _one_block(region: Region) -> Region:
    if not region.blocks:
        region.add_block(Block())
    return region


def _print_body(printer: Printer, state: PrintingState, region: Region) -> None:
    state.print_whitespace(printer)
    printer.print_region(region, print_entry_block_args=False, print_empty_block=False)


@irdl_custom_directive
class Body(CustomDirective):
    """A single-block region without block arguments."""

    body: RegionVariable

    def parse(self, parser: Parser, state: ParsingState) -> None:
        self.body.set(state, _one_block(parser.parse_region([])))

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        _print_body(printer, state, self.body.get(op))


@irdl_custom_directive
class Section(CustomDirective):
    """``(%a : type, ...)`` (omitted when there are none), then the single-block region."""

    body: RegionVariable

    def parse(self, parser: Parser, state: ParsingState) -> None:
        args: list[Parser.Argument] = []
        opened = parser.parse_optional_punctuation("(") is not None
        if opened and parser.parse_optional_punctuation(")") is None:
            args.append(parser.parse_argument())
            while parser.parse_optional_punctuation(",") is not None:
                args.append(parser.parse_argument())
            parser.parse_punctuation(")")
        self.body.set(state, _one_block(parser.parse_region(args)))

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        region = self.body.get(op)
        args = region.block.args if region.blocks else ()
        if args:
            state.print_whitespace(printer)
            printer.print_string("(")
            for i, arg in enumerate(args):
                if i:
                    printer.print_string(", ")
                printer.print_ssa_value(arg)
                printer.print_string(" : ")
                printer.print_attribute(arg.type)
            printer.print_string(")")
        _print_body(printer, state, region)


class _Bare(CustomDirective):
    """An attribute written as bare text: a subclass says how to read and write it."""

    attr: AttributeVariable

    def read(self, parser: Parser) -> Attribute:
        """The attribute at the parser's position."""
        raise NotImplementedError

    def text(self, attr: Attribute) -> str:
        """The attribute's text."""
        raise NotImplementedError

    def parse(self, parser: Parser, state: ParsingState) -> None:
        self.attr.set(state, self.read(parser))

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        attr = self.attr.get(op)
        assert attr is not None
        state.print_whitespace(printer)
        printer.print_string(self.text(attr))


@irdl_custom_directive
class Ident(_Bare):
    """A string attribute written as a bare identifier; the op's verifier checks its value."""

    attr: AttributeVariable

    def read(self, parser: Parser) -> Attribute:
        return StringAttr(parser.parse_identifier())

    def text(self, attr: Attribute) -> str:
        assert isinstance(attr, StringAttr)
        return attr.data


@irdl_custom_directive
class Dim(_Bare):
    """A dim attribute written as its bare expression: ``H*D``."""

    attr: AttributeVariable

    def read(self, parser: Parser) -> Attribute:
        return DimAttr.get(parse_dim_expr(parser))

    def text(self, attr: Attribute) -> str:
        assert isinstance(attr, DimAttr)
        return attr.text


@irdl_custom_directive
class Flag(_Bare):
    """An ``i1`` integer attribute written ``true`` or ``false``."""

    attr: AttributeVariable

    def read(self, parser: Parser) -> Attribute:
        return IntegerAttr(int(parser.parse_boolean(f" ({self.attr.name} true or false)")), i1)

    def text(self, attr: Attribute) -> str:
        assert isinstance(attr, IntegerAttr)
        return "true" if attr.value.data else "false"


def parse_keyed_entries(
    parser: Parser,
    key: Callable[[], str],
    value: Callable[[], Attribute],
    twice: Callable[[str], str],
    context: str,
) -> dict[str, Attribute] | None:
    """``{key = value, ...}`` (``{}`` too), or None when no ``{`` opens it; a key given
    twice is a parse error at that key, saying ``twice(key)``."""
    entries: dict[str, Attribute] = {}

    def entry() -> None:
        start = parser.pos
        k = key()
        if k in entries:
            parser.raise_error(twice(k), start, parser.pos)
        parser.parse_punctuation("=")
        entries[k] = value()

    if parser.parse_optional_comma_separated_list(parser.Delimiter.BRACES, entry, context) is None:
        return None
    return entries


def parse_one_of(parser: AttrParser, choices: Sequence[str], what: str, hint: str) -> str:
    """An identifier that must be one of ``choices``; another is a parse error at it,
    ``unknown <what> '<word>' (expected one of ...)``.  ``hint`` completes the message
    of a missing identifier."""
    start = parser.pos
    word = parser.parse_identifier(hint)
    if word not in choices:
        parser.raise_error(
            f"unknown {what} '{word}' (expected one of {', '.join(choices)})", start, parser.pos
        )
    return word


def parse_schedule_fields(
    parser: AttrParser,
    attr: str,
    fields: Sequence[str],
    read: Callable[[str], int | str],
    problem: Callable[[str, int | str], str | None],
) -> dict[str, int | str]:
    """The ``<key = value, ...>`` of a schedule attribute (``#graph.schedule``,
    ``#kernel.schedule``): an unknown or repeated key is a parse error at the key,
    ``read(key)`` parses its value and ``problem(key, value)`` (a message or None)
    rejects it at the value, as ``<attr>: <problem>``."""
    found: dict[str, int | str] = {}

    def entry() -> None:
        start = parser.pos
        key = parse_one_of(parser, fields, f"{attr} field", f" (a {attr} field)")
        if key in found:
            parser.raise_error(f"duplicate {attr} field '{key}'", start, parser.pos)
        parser.parse_punctuation("=")
        vstart = parser.pos
        value = read(key)
        message = problem(key, value)
        if message:
            parser.raise_error(f"{attr}: {message}", vstart, parser.pos)
        found[key] = value

    parser.parse_comma_separated_list(parser.Delimiter.ANGLE, entry)
    return found


@irdl_custom_directive
class IntMap(_Bare):
    """A dictionary of ``i64`` integers: ``{C = 128, D = 16}``; a key given twice is an error."""

    attr: AttributeVariable

    def read(self, parser: Parser) -> Attribute:
        entries = parse_keyed_entries(
            parser,
            lambda: parser.parse_identifier(" (a symbol name)"),
            lambda: IntegerAttr(parser.parse_integer(allow_boolean=False), i64),
            lambda key: f"symbol {key} is bound twice",
            " (model symbols)",
        )
        if entries is None:
            parser.parse_punctuation("{", " (model symbols)")
        return DictionaryAttr(entries or {})

    def text(self, attr: Attribute) -> str:
        assert isinstance(attr, DictionaryAttr)
        items = (
            f"{k} = {v.value.data if isinstance(v, IntegerAttr) else v}"
            for k, v in attr.data.items()
        )
        return "{" + ", ".join(items) + "}"


class _Role(Ident):
    """A role of ``ckir.vocab.ROLES``; another identifier is a parse error naming ``WHAT``."""

    WHAT: ClassVar[str] = ""

    def read(self, parser: Parser) -> Attribute:
        return StringAttr(
            parse_one_of(parser, ROLES, f"{self.WHAT} role", f" (the {self.WHAT} role)")
        )


@irdl_custom_directive
class BufferRole(_Role):
    """The role of a ``lowered.buffer``."""

    WHAT: ClassVar[str] = "buffer"
    attr: AttributeVariable


@irdl_custom_directive
class SlotRole(_Role):
    """The role of a ``layout.slot``."""

    WHAT: ClassVar[str] = "slot"
    attr: AttributeVariable


@irdl_custom_directive
class Live(CustomDirective):
    """An optional ``live "<mode>" first last`` clause: ``[mode, first, last]``, or absent."""

    attr: AttributeVariable

    def parse(self, parser: Parser, state: ParsingState) -> None:
        if parser.parse_optional_keyword("live") is None:
            return
        mode = parser.parse_str_literal(" (the live mode)")
        first = parser.parse_integer(allow_boolean=False)
        last = parser.parse_integer(allow_boolean=False)
        self.attr.set(
            state, ArrayAttr((StringAttr(mode), IntegerAttr(first, i64), IntegerAttr(last, i64)))
        )

    def print(self, printer: Printer, state: PrintingState, op: IRDLOperation) -> None:
        attr = self.attr.get(op)
        if attr is None:
            return
        assert isinstance(attr, ArrayAttr)
        mode, first, last = attr.data
        assert isinstance(mode, StringAttr)
        assert isinstance(first, IntegerAttr) and isinstance(last, IntegerAttr)
        state.print_whitespace(printer)
        printer.print_string("live ")
        printer.print_string_literal(mode.data)
        printer.print_string(f" {first.value.data} {last.value.data}")


#: every directive, for an op's ``custom_directives``
DIRECTIVES = (Body, Section, Ident, Dim, Flag, IntMap, BufferRole, SlotRole, Live)
