"""The checkpoint-mapping language of graph.weight (dialects/weight_map.py) on its own."""

from __future__ import annotations

import io

import pytest
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

from ckir.dialects.weight_map import WeightMap, parse_weight_map, print_weight_map
from ckir.errors import CkirError
from ckir.ir_io import ir_context

GPT2_WQ = ' hf "transformer.h.{i}.attn.c_attn.weight" [E, 3*E] slice(1, 0, E) transpose'


def _parse(text: str) -> WeightMap:
    return parse_weight_map(Parser(ir_context(), text))


def _print(mapping: WeightMap) -> str:
    out = io.StringIO()
    print_weight_map(Printer(stream=out), mapping)
    return out.getvalue()


@pytest.mark.parametrize(
    "text",
    [
        GPT2_WQ,
        ' hf "model.embed_tokens.weight"',
        ' gguf "blk.{i}.attn_q.weight"',
        ' hf "lm_head.weight" gguf "output.weight"',
        ' gguf "blk.{i}.attn_qkv.weight" [(H+2*KV)*D, E] slice(0, H*D, (H+KV)*D)',
        ' gguf "blk.{i}.ffn_up.weight" [2*I, E]',
        " tied_to @embed",
        "",
    ],
)
def test_round_trip(text: str) -> None:
    assert _print(_parse(text)) == text


def test_parse_gives_the_clauses_as_values() -> None:
    m = _parse(' hf "w.{i}" [E, 3 * E] slice(1, E, 2 * E) transpose')
    assert m == WeightMap(
        hf="w.{i}", hf_shape=("E", "3*E"), slice=("1", "E", "2*E"), transpose=True
    )
    assert m.slice_spec == (1, "E", "2*E")
    assert _parse(" tied_to @embed").tied_to == "embed"


def test_packing_of_a_gguf_source() -> None:
    """Without an hf source, the tensor shape and slice follow the gguf name; with one,
    they belong to the hf tensor (a clause after the gguf name is not packing)."""
    m = _parse(' gguf "blk.{i}.ffn_up.weight" [2 * I, E] slice(0, I, 2 * I)')
    assert m == WeightMap(
        gguf="blk.{i}.ffn_up.weight", hf_shape=("2*I", "E"), slice=("0", "I", "2*I")
    )
    assert m.packs_gguf and m.slice_spec == (0, "I", "2*I")
    both = _parse(' hf "a" [2*E] slice(0, 0, E) gguf "b"')
    assert not both.packs_gguf and both.hf_shape == ("2*E",)
    m.verify_clauses("w", per_layer=True)
    m.verify_shape("w", ("I", "E"), {"I": 3, "E": 4})
    with pytest.raises(VerifyException, match="does not give the declared shape"):
        m.verify_shape("w", ("E", "E"), {"I": 3, "E": 4})


def test_source_tensor_per_layer_and_missing() -> None:
    m = WeightMap(hf="model.layers.{i}.q.weight")
    assert m.source_tensor("wq", "hf", 3) == "model.layers.3.q.weight"
    assert WeightMap(gguf="output.weight").source_tensor("lm_head", "gguf", None) == "output.weight"
    with pytest.raises(CkirError, match=r"graph.weight @wq: has no GGUF source tensor"):
        m.source_tensor("wq", "gguf", 0)


@pytest.mark.parametrize(
    ("mapping", "per_layer", "message"),
    [
        (WeightMap(hf="a", tied_to="b"), False, "tied_to excludes an hf/gguf source"),
        (WeightMap(), False, "has no source"),
        (WeightMap(gguf="a", transpose=True), False, "transpose needs an hf source"),
        (
            WeightMap(tied_to="b", hf_shape=("E",), slice=("0", "0", "E")),
            False,
            "a tensor shape and slice need an hf or gguf source",
        ),
        (WeightMap(hf="a.{i}"), False, "must both contain {i} or neither"),
        (WeightMap(hf="a", slice=("x", "0", "E")), False, "slice must be"),
        (WeightMap(hf="a", slice=("0", "0", "E")), False, "slice needs the hf shape"),
        (WeightMap(hf="a", hf_shape=("E",), slice=("1", "0", "E")), False, "out of range"),
        (WeightMap(hf="a", hf_shape=("E",), slice=("0", "0", "2 * E")), False, "canonical"),
    ],
)
def test_verify_clauses(mapping: WeightMap, per_layer: bool, message: str) -> None:
    with pytest.raises(VerifyException, match=rf"^w: .*{message}"):
        mapping.verify_clauses("w", per_layer)


def test_verify_shape() -> None:
    symbols = {"E": 4}
    gpt2 = _parse(GPT2_WQ)
    gpt2.verify_clauses("w", True)
    gpt2.verify_shape("w", ("E", "E"), symbols)
    with pytest.raises(VerifyException, match="does not give the declared shape"):
        gpt2.verify_shape("w", ("E", "2*E"), symbols)
    too_far = WeightMap(hf="a", hf_shape=("E", "3*E"), slice=("1", "2*E", "4*E"))
    with pytest.raises(VerifyException, match="is empty or exceeds hf dim 3\\*E"):
        too_far.verify_shape("w", ("E", "2*E"), symbols)
    with pytest.raises(VerifyException, match="transpose needs a 2-D hf tensor"):
        WeightMap(hf="a", hf_shape=("E",), transpose=True).verify_shape("w", ("E",), symbols)
