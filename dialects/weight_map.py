"""The checkpoint-mapping language of ``graph.weight``: where a weight's tensor comes from.

A graph weight names its source in a checkpoint with a few ordered, optional
clauses written after its shape and dtype::

    hf "<hf name>" [[hf dims]] [slice(axis, start, stop)] [transpose]
    gguf "<gguf name>"
    tied_to @other

``hf`` names the safetensors tensor, optionally with its shape when it differs
from the weight's, a ``slice`` of one axis (``[start, stop)``, dim expressions)
and a 2-D ``transpose``; ``gguf`` names the tensor in a GGUF file; ``tied_to``
shares another weight's storage (exclusive with ``hf``/``gguf``).  ``{i}`` in a
tensor name stands for the layer index.  A weight with a ``gguf`` source and no
``hf`` one takes the tensor shape and ``slice`` after its GGUF name (rows of a
fused GGUF tensor)::

    gguf "<gguf name>" [[tensor dims]] [slice(axis, start, stop)]

This module holds the language: its data model (:class:`WeightMap`), its parser
and printer (:func:`parse_weight_map`, :func:`print_weight_map`), the checks that
need no model (:meth:`WeightMap.verify_clauses`) or only the model's symbols
(:meth:`WeightMap.verify_shape`), and the resolution of a tensor name for a layer
(:meth:`WeightMap.source_tensor`).  ``graph.weight`` (``WeightOp`` in
``dialects/graph.py``) stores the clauses as properties and verifies them with
the model's symbol table.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

from ckir.dialects.common import sym
from ckir.dialects.dims import (
    check_dims_text,
    dims_text,
    parse_dim_expr,
    shapes_equal,
    try_evaluate_dim,
)
from ckir.errors import CkirError

__all__ = ["WeightMap", "parse_weight_map", "print_weight_map"]


@dataclass(frozen=True)
class WeightMap:
    """The checkpoint clauses of one weight, as plain values.

    ``slice`` keeps the clause's three texts ``(axis, start, stop)`` as written
    (the verifier checks their form); :attr:`slice_spec` is the typed view.
    ``hf_shape`` and ``slice`` describe the packed source tensor: the ``hf`` one, or
    the ``gguf`` one when there is no ``hf`` source (:attr:`packs_gguf`).
    """

    hf: str | None = None
    hf_shape: tuple[str, ...] | None = None
    slice: tuple[str, ...] | None = None
    transpose: bool = False
    gguf: str | None = None
    tied_to: str | None = None

    @property
    def packs_gguf(self) -> bool:
        """The tensor shape and slice belong to the ``gguf`` source (there is no ``hf``)."""
        return self.hf is None and self.gguf is not None

    @property
    def slice_spec(self) -> tuple[int, str, str] | None:
        """``(axis, start, stop)``; start/stop are dim expressions (stop exclusive)."""
        if self.slice is None:
            return None
        axis, start, stop = self.slice
        return int(axis), start, stop

    def source_tensor(self, weight: str, source: str, layer: int | None) -> str:
        """The tensor's name in an ``"hf"`` or ``"gguf"`` file, ``{i}`` replaced by ``layer``.

        ``CkirError`` naming ``weight`` when it has no tensor in that kind of file."""
        pattern = self.hf if source == "hf" else self.gguf
        if pattern is None:
            kind = "HF" if source == "hf" else "GGUF"
            raise CkirError(f"graph.weight {sym(weight)}: has no {kind} source tensor")
        return pattern if layer is None else pattern.replace("{i}", str(layer))

    def verify_clauses(self, where: str, per_layer: bool) -> None:
        """The checks that need no model: which clauses go together, and the slice's form.

        ``per_layer``: the weight's name has ``{i}``.  ``VerifyException`` prefixed
        with ``where``."""
        has_src = self.hf is not None or self.gguf is not None
        if self.tied_to is not None and has_src:
            raise VerifyException(f"{where}: tied_to excludes an hf/gguf source")
        if self.tied_to is None and not has_src:
            raise VerifyException(f"{where}: has no source (hf, gguf or tied_to)")
        if self.hf is None and self.transpose:
            raise VerifyException(f"{where}: transpose needs an hf source")
        if (
            self.hf is None
            and self.gguf is None
            and (self.hf_shape is not None or self.slice is not None)
        ):
            raise VerifyException(f"{where}: a tensor shape and slice need an hf or gguf source")
        if self.hf is not None and ("{i}" in self.hf) != per_layer:
            raise VerifyException(
                f'{where}: hf name "{self.hf}" and the weight name must both contain '
                "{i} or neither"
            )
        if self.slice is not None:
            if len(self.slice) != 3 or not self.slice[0].isdigit():
                raise VerifyException(f"{where}: slice must be (axis, start, stop)")
            problem = check_dims_text((self.slice[1], self.slice[2]))
            if problem is not None:
                raise VerifyException(f"{where}: slice: {problem}")
            if self.hf_shape is None:
                raise VerifyException(f"{where}: slice needs the hf shape")
            axis = int(self.slice[0])
            if axis >= len(self.hf_shape):
                raise VerifyException(
                    f"{where}: slice axis {axis} is out of range for hf shape "
                    f"{dims_text(self.hf_shape)} (rank {len(self.hf_shape)})"
                )

    def verify_shape(self, where: str, shape: Sequence[str], symbols: Mapping[str, int]) -> None:
        """The hf tensor, sliced and transposed, gives the weight's ``shape``.

        Dims are compared by value where they evaluate with the model's ``symbols``;
        a slice whose bounds evaluate must be non-empty and inside the hf dim.
        Call after :meth:`verify_clauses`."""
        hf_dims = self.hf_shape
        if hf_dims is not None:
            packed = list(hf_dims)
            if self.slice is not None:
                axis, start, stop = self.slice_spec or (0, "0", "0")
                a = try_evaluate_dim(start, symbols)
                b = try_evaluate_dim(stop, symbols)
                n = try_evaluate_dim(hf_dims[axis], symbols)
                if a is not None and b is not None:
                    if not (0 <= a < b) or (n is not None and b > n):
                        raise VerifyException(
                            f"{where}: slice({axis}, {start}, {stop}) is empty or exceeds hf "
                            f"dim {hf_dims[axis]}"
                        )
                    packed[axis] = str(b - a)
                else:
                    packed[axis] = f"({stop})-({start})"
            if self.transpose:
                if len(packed) != 2:
                    raise VerifyException(
                        f"{where}: transpose needs a 2-D hf tensor, got rank {len(packed)}"
                    )
                packed.reverse()
            if not shapes_equal(shape, packed, symbols):
                raise VerifyException(
                    f"{where}: hf shape {dims_text(hf_dims)} with its slice/transpose does not "
                    f"give the declared shape {dims_text(shape)}"
                )
        elif self.transpose and len(shape) != 2:
            raise VerifyException(f"{where}: transpose needs a 2-D weight")


def _parse_packing(parser: Parser) -> tuple[tuple[str, ...] | None, tuple[str, ...] | None]:
    """The optional ``[dims]`` and ``slice(axis, start, stop)`` after a tensor name."""
    shape: tuple[str, ...] | None = None
    slice_: tuple[str, ...] | None = None
    if parser.parse_optional_punctuation("[") is not None:
        dims = [parse_dim_expr(parser)]
        while parser.parse_optional_punctuation(",") is not None:
            dims.append(parse_dim_expr(parser))
        parser.parse_punctuation("]")
        shape = tuple(dims)
    if parser.parse_optional_keyword("slice") is not None:
        parser.parse_punctuation("(")
        axis = parser.parse_integer(allow_boolean=False, allow_negative=False)
        parser.parse_punctuation(",")
        start = parse_dim_expr(parser)
        parser.parse_punctuation(",")
        stop = parse_dim_expr(parser)
        parser.parse_punctuation(")")
        slice_ = (str(axis), start, stop)
    return shape, slice_


def _print_packing(printer: Printer, mapping: WeightMap) -> None:
    if mapping.hf_shape is not None:
        printer.print_string(" " + dims_text(mapping.hf_shape))
    if mapping.slice is not None:
        printer.print_string(" slice(" + ", ".join(mapping.slice) + ")")


def parse_weight_map(parser: Parser) -> WeightMap:
    """Parse the clauses after a weight's dtype (none of them is required here)."""
    hf: str | None = None
    hf_shape: tuple[str, ...] | None = None
    slice_: tuple[str, ...] | None = None
    transpose = False
    gguf: str | None = None
    tied_to: str | None = None
    if parser.parse_optional_keyword("hf") is not None:
        hf = parser.parse_str_literal(" (the HF tensor name)")
        hf_shape, slice_ = _parse_packing(parser)
        if parser.parse_optional_keyword("transpose") is not None:
            transpose = True
    if parser.parse_optional_keyword("gguf") is not None:
        gguf = parser.parse_str_literal(" (the GGUF tensor name)")
        if hf is None:
            hf_shape, slice_ = _parse_packing(parser)
    if parser.parse_optional_keyword("tied_to") is not None:
        tied_to = parser.parse_symbol_name().data
    return WeightMap(hf, hf_shape, slice_, transpose, gguf, tied_to)


def print_weight_map(printer: Printer, mapping: WeightMap) -> None:
    """Print the clauses, each with its leading space, in the order the parser reads them."""
    if mapping.hf is not None:
        printer.print_string(" hf ")
        printer.print_string_literal(mapping.hf)
        _print_packing(printer, mapping)
        if mapping.transpose:
            printer.print_string(" transpose")
    if mapping.gguf is not None:
        printer.print_string(" gguf ")
        printer.print_string_literal(mapping.gguf)
        if mapping.packs_gguf:
            _print_packing(printer, mapping)
    if mapping.tied_to is not None:
        printer.print_string(" tied_to ")
        printer.print_symbol_name(mapping.tied_to)
