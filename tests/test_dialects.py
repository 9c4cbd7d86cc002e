"""The graph, lowered and layout dialects: round-trips, builders, accessors, verifiers.

The lit suites under tests/filecheck/dialects/ check the printed text and one
message per verifier; here we check the Python API other code is written against,
exact round-trips of a realistic module (graph + lowered + layout), the messages
of attributes that only Python can build, and parse speed.
"""

from __future__ import annotations

import io
import json
import random
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from xdsl.context import Context
from xdsl.dialects.builtin import (
    ArrayAttr,
    Builtin,
    DictionaryAttr,
    FloatAttr,
    IntegerAttr,
    ModuleOp,
    StringAttr,
    f64,
)
from xdsl.ir import Operation
from xdsl.parser import Parser
from xdsl.printer import Printer
from xdsl.utils.exceptions import VerifyException

from ckir.backend.layout_writers import plan_to_json, plan_to_map
from ckir.dialects import dims
from ckir.dialects import graph as g
from ckir.dialects import layout as ly
from ckir.dialects import lowered as lw
from ckir.passes import plan_layout
from ckir.registry import (
    KernelSpec,
    OperandSpec,
    ParamSpec,
    RegistryError,
    load_registry,
    parse_registry,
)

ROOT = Path(__file__).resolve().parent.parent
LIT = ROOT / "tests" / "filecheck" / "dialects"


def make_ctx() -> Context:
    ctx = Context()
    ctx.load_dialect(Builtin)
    ctx.load_dialect(g.Graph)
    ctx.load_dialect(lw.Lowered)
    ctx.load_dialect(ly.Layout)
    return ctx


def parse(text: str) -> ModuleOp:
    return Parser(make_ctx(), text).parse_module()


def show(op: Operation, generic: bool = False) -> str:
    out = io.StringIO()
    Printer(stream=out, print_generic_format=generic).print_op(op)
    return out.getvalue()


def lit_body(name: str) -> str:
    """The IR of a lit ops.mlir file, without RUN/CHECK comments."""
    text = (LIT / name / "ops.mlir").read_text()
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("//"))


# --------------------------------------------------------------------------- fixtures

GRAPH = """
graph.model @tiny arch "llama" symbols {D = 16, E = 64, H = 4, I = 128, KV = 2, L = 2, V = 256} {
  graph.weight @embed : [V, E] f32 hf "model.embed_tokens.weight"
  graph.weight @"layers.{i}.attn_norm" : [E] f32 hf "model.layers.{i}.input_layernorm.weight"
  graph.weight @"layers.{i}.wq" : [H*D, E] f32 hf "model.layers.{i}.self_attn.q_proj.weight"
  graph.weight @"layers.{i}.wk" : [KV*D, E] f32 hf "model.layers.{i}.self_attn.k_proj.weight"
  graph.weight @"layers.{i}.wv" : [KV*D, E] f32 hf "model.layers.{i}.self_attn.v_proj.weight"
  graph.weight @"layers.{i}.wo" : [E, H*D] f32 hf "model.layers.{i}.self_attn.o_proj.weight"
  graph.weight @"layers.{i}.mlp_norm" : [E] f32 hf "model.layers.{i}.post_attention_layernorm.weight"
  graph.weight @"layers.{i}.w_gate" : [I, E] f32 hf "model.layers.{i}.mlp.gate_proj.weight"
  graph.weight @"layers.{i}.w_up" : [I, E] f32 hf "model.layers.{i}.mlp.up_proj.weight"
  graph.weight @"layers.{i}.w_down" : [E, I] f32 hf "model.layers.{i}.mlp.down_proj.weight"
  graph.weight @norm : [E] f32 hf "model.norm.weight"
  graph.weight @lm_head : [V, E] f32 tied_to @embed
  graph.header {
    %tok = graph.input "tokens" : !graph.tensor<[T], i32>
    %x = graph.embed %tok {weights = [@embed]} : (!graph.tensor<[T], i32>) -> !graph.tensor<[T, E], f32>
    graph.yield %x : !graph.tensor<[T, E], f32>
  }
  graph.body repeat L (%x : !graph.tensor<[T, E], f32>) {
    %h = graph.rmsnorm %x {weights = [@"layers.{i}.attn_norm"], eps = 1.000000e-05 : f64} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>
    %q = graph.linear %h {weights = [@"layers.{i}.wq"]} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, H*D], f32>
    %k = graph.linear %h {weights = [@"layers.{i}.wk"]} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, KV*D], f32>
    %v = graph.linear %h {weights = [@"layers.{i}.wv"]} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, KV*D], f32>
    %q2, %k2 = graph.rope %q, %k heads H kv_heads KV head_dim D {theta = 1.000000e+04 : f64} : (!graph.tensor<[T, H*D], f32>, !graph.tensor<[T, KV*D], f32>) -> (!graph.tensor<[T, H*D], f32>, !graph.tensor<[T, KV*D], f32>)
    %o = graph.attention %q2, %k2, %v heads H kv_heads KV head_dim D {causal} : (!graph.tensor<[T, H*D], f32>, !graph.tensor<[T, KV*D], f32>, !graph.tensor<[T, KV*D], f32>) -> !graph.tensor<[T, H*D], f32>
    %a = graph.linear %o {weights = [@"layers.{i}.wo"]} : (!graph.tensor<[T, H*D], f32>) -> !graph.tensor<[T, E], f32>
    %x1 = graph.add %x, %a : (!graph.tensor<[T, E], f32>, !graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>
    %h2 = graph.rmsnorm %x1 {weights = [@"layers.{i}.mlp_norm"], eps = 1.000000e-05 : f64} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>
    %gt = graph.linear %h2 {weights = [@"layers.{i}.w_gate"]} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, I], f32>
    %u = graph.linear %h2 {weights = [@"layers.{i}.w_up"]} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, I], f32>
    %s = graph.swiglu %gt, %u : (!graph.tensor<[T, I], f32>, !graph.tensor<[T, I], f32>) -> !graph.tensor<[T, I], f32>
    %d = graph.linear %s {weights = [@"layers.{i}.w_down"]} : (!graph.tensor<[T, I], f32>) -> !graph.tensor<[T, E], f32>
    %x2 = graph.add %x1, %d : (!graph.tensor<[T, E], f32>, !graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>
    graph.yield %x2 : !graph.tensor<[T, E], f32>
  }
  graph.footer (%x : !graph.tensor<[T, E], f32>) {
    %h = graph.rmsnorm %x {weights = [@norm], eps = 1.000000e-05 : f64} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>
    %logits = graph.lm_head %h {weights = [@lm_head]} : (!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, V], f32>
    %tgt = graph.input "targets" : !graph.tensor<[T], i32>
    %loss = graph.cross_entropy %logits, %tgt {when = ["backward"]} : (!graph.tensor<[T, V], f32>, !graph.tensor<[T], i32>) -> !graph.tensor<[1], f32>
    graph.output %logits : !graph.tensor<[T, V], f32>
  }
}
"""  # noqa: E501


def realistic_module_text() -> str:
    """A 2-layer graph model, a lowered model with two programs and two layout plans.

    The plans are the planner's for the lowered model (bump with canaries, liveness
    without): a plan next to its model is verified against it, so the hand-written
    plans of layout/ops.mlir (which place other buffers) cannot sit next to it.
    """
    lowered = lit_body("lowered")
    model = next(op for op in parse(lowered).ops if isinstance(op, lw.LoweredModelOp))
    plans = "\n".join(
        show(plan_layout.plan(model, strategy, 64, canaries))
        for strategy, canaries in (("bump", True), ("liveness", False))
    )
    return GRAPH + lowered + plans


# --------------------------------------------------------------------------- round-trips


def test_realistic_module_round_trips_exactly() -> None:
    module = parse(realistic_module_text())
    module.verify()
    custom = show(module)
    again = parse(custom)
    again.verify()
    assert show(again) == custom
    generic = show(module, generic=True)
    assert '"graph.model"()' in generic and '"lowered.call"()' in generic
    from_generic = parse(generic)
    from_generic.verify()
    assert show(from_generic) == custom
    assert module.is_structurally_equivalent(again)
    assert module.is_structurally_equivalent(from_generic)


@pytest.mark.parametrize("dialect", ["graph", "lowered", "layout"])
def test_lit_inputs_round_trip(dialect: str) -> None:
    module = parse(lit_body(dialect))
    module.verify()
    custom = show(module)
    assert show(parse(custom)) == custom
    assert show(parse(show(module, generic=True))) == custom


def test_empty_containers_round_trip() -> None:
    module = ModuleOp(
        [
            g.ModelOp.make("a", "llama", {"E": 4}),
            lw.LoweredModelOp.make("a"),
            _plan_with_totals(),
        ]
    )
    module.verify()
    custom = show(module)
    assert 'graph.model @a arch "llama" symbols {E = 4} {\n  }' in custom
    for text in (custom, show(module, generic=True)):
        back = parse(text)
        back.verify()
        assert show(back) == custom
        assert back.is_structurally_equivalent(module)


def _plan_with_totals() -> ly.PlanOp:
    plan = ly.PlanOp.make("a", "bump", 64, False)
    plan.body_block.add_op(ly.TotalsOp.make({}))
    return plan


# --------------------------------------------------------------------------- dims


def test_dims_normalize_and_evaluate() -> None:
    assert dims.normalize_dim(" H * D ") == "H*D"
    assert dims.normalize_dim(64) == "64"
    assert dims.normalize_dim("(E + 1) / 2") == "(E+1)/2"
    assert dims.dim_symbols("3*E/H+T") == frozenset({"E", "H", "T"})
    syms = {"E": 64, "H": 4}
    assert dims.evaluate_dim("E/H", syms) == 16
    assert dims.evaluate_dim("3*E-(H+4)", syms) == 184
    assert dims.evaluate_dim(7, {}) == 7
    assert dims.try_evaluate_dim("E*Q", syms) is None
    with pytest.raises(KeyError):
        dims.evaluate_dim("Q", syms)
    with pytest.raises(ValueError, match="not an integer"):
        dims.evaluate_dim("E/3", syms)
    with pytest.raises(ZeroDivisionError):
        dims.evaluate_dim("E/(H-4)", syms)
    for bad in ("", "E+", "(E", "E)", "3**E", "E$", "E H"):
        with pytest.raises(dims.DimError, match="bad dim expression"):
            dims.normalize_dim(bad)


# --------------------------------------------------------------------------- graph API


def test_graph_builders_print_the_documented_syntax() -> None:
    model = g.ModelOp.make("tiny", "gpt2", {"V": 256, "E": 64, "L": 2, "H": 4, "D": 16})
    blk = model.body_block
    blk.add_op(g.WeightOp.make("embed", ["V", "E"], "f32", hf="transformer.wte.weight"))
    blk.add_op(
        g.WeightOp.make(
            "layers.{i}.wq",
            ["E", "E"],
            "f32",
            hf="transformer.h.{i}.attn.c_attn.weight",
            hf_shape=["E", "3 * E"],
            slice=(1, 0, "E"),
            transpose=True,
        )
    )
    blk.add_op(g.WeightOp.make("lm_head", ["V", "E"], "f32", tied_to="embed"))
    blk.add_op(g.WeightOp.make("layers.{i}.wk", ["E", "E"], "q8_0", gguf="blk.{i}.attn_k.weight"))
    x_t = g.TensorType.make(["T", "E"], "f32")
    tok_t = g.TensorType.make(["T"], "i32")

    header = g.HeaderOp.make()
    tok = g.InputOp.make("tokens", tok_t)
    tok.results[0].name_hint = "tok"
    emb = g.compute_op("embed", [tok.results[0]], [x_t], weights=["embed"])
    emb.results[0].name_hint = "x"
    header.block.add_op(tok)
    header.block.add_op(emb)
    header.block.add_op(g.YieldOp.make([emb.results[0]]))
    blk.add_op(header)

    body = g.BodyOp.make("L", [x_t])
    arg = body.block.args[0]
    arg.name_hint = "x"
    q = g.compute_op("linear", [arg], [x_t], weights=["layers.{i}.wq"], when=["prefill"])
    q.results[0].name_hint = "q"
    att = g.compute_op(
        "attention",
        [q.results[0], q.results[0], q.results[0]],
        [x_t],
        attrs={"heads": "H", "kv_heads": "H", "head_dim": "D", "causal": True},
    )
    att.results[0].name_hint = "o"
    body.block.add_op(q)
    body.block.add_op(att)
    body.block.add_op(g.YieldOp.make([att.results[0]]))
    blk.add_op(body)

    footer = g.FooterOp.make([x_t])
    farg = footer.block.args[0]
    farg.name_hint = "x"
    norm = g.compute_op("rmsnorm", [farg], [x_t], weights=["embed"], attrs={"eps": 1e-5})
    footer.block.add_op(norm)
    footer.block.add_op(g.OutputOp.make([farg]))
    blk.add_op(footer)

    module = ModuleOp([model])
    with pytest.raises(VerifyException, match="gamma @embed has shape"):
        module.verify()
    norm.properties["weights"] = g.compute_op("relu", [farg], [x_t]).weights  # empty
    with pytest.raises(VerifyException, match="graph.rmsnorm: expects 1 weight"):
        module.verify()
    footer.block.detach_op(norm)
    norm.erase()
    module.verify()

    text = show(module)
    assert 'graph.model @tiny arch "gpt2" symbols {D = 16, E = 64, H = 4, L = 2, V = 256}' in text
    assert (
        'graph.weight @"layers.{i}.wq" : [E, E] f32 hf "transformer.h.{i}.attn.c_attn.weight" '
        "[E, 3*E] slice(1, 0, E) transpose"
    ) in text
    assert "graph.weight @lm_head : [V, E] f32 tied_to @embed" in text
    assert 'graph.weight @"layers.{i}.wk" : [E, E] q8_0 gguf "blk.{i}.attn_k.weight"' in text
    assert (
        '%q = graph.linear %x {weights = [@"layers.{i}.wq"], when = ["prefill"]} : '
        "(!graph.tensor<[T, E], f32>) -> !graph.tensor<[T, E], f32>"
    ) in text
    assert "heads H kv_heads H head_dim D {causal}" in text
    assert show(parse(text)) == text


def test_graph_accessors() -> None:
    module = parse(GRAPH)
    model = next(iter(module.ops))
    assert isinstance(model, g.ModelOp)
    assert model.symbol_values() == {
        "D": 16, "E": 64, "H": 4, "I": 128, "KV": 2, "L": 2, "V": 256,
    }  # fmt: skip
    weights = model.weights()
    assert list(weights)[:2] == ["embed", "layers.{i}.attn_norm"]
    wq = weights["layers.{i}.wq"]
    assert wq.weight_name == "layers.{i}.wq"
    assert wq.shape_dims == ("H*D", "E")
    assert wq.dtype_name == "f32"
    assert wq.hf_name == "model.layers.{i}.self_attn.q_proj.weight"
    assert wq.hf_dims is None and wq.slice_spec is None and not wq.is_transposed
    assert wq.per_layer and not weights["embed"].per_layer
    assert weights["lm_head"].tied_to_name == "embed"
    assert weights["lm_head"].hf_name is None and weights["lm_head"].gguf_name is None
    header, body, footer = model.sections()
    assert header is not None and body is not None and footer is not None
    assert body.repeat.text == "L"
    assert [t.dims for t in body.block.arg_types] == [("T", "E")]  # type: ignore[attr-defined]
    ops: dict[str, g.ComputeOp] = {}
    for op in body.block.ops:
        if isinstance(op, g.COMPUTE_OP_TYPES):
            ops.setdefault(op.kind, op)
    assert ops["rmsnorm"].weight_names == ("layers.{i}.attn_norm",)
    assert ops["rmsnorm"].modes is None
    assert ops["rope"].NUM_OUTPUTS == 2
    loss = [op for op in footer.block.ops if isinstance(op, g.CrossEntropyOp)][0]
    assert loss.modes == ("backward",)
    assert loss.kind == "cross_entropy"


def test_weight_slice_accessors() -> None:
    w = g.WeightOp.make(
        "layers.{i}.wk", [64, "E"], "f32", hf="h.{i}.c_attn", hf_shape=["E", "3*E"],
        slice=(1, "E", "2 * E"), transpose=True,
    )  # fmt: skip
    assert w.shape_dims == ("64", "E")
    assert w.hf_dims == ("E", "3*E")
    assert w.slice_spec == (1, "E", "2*E")
    assert w.is_transposed


def test_compute_ops_table() -> None:
    assert set(g.COMPUTE_OPS) >= {  # none lost; test_vocab checks the rest against the vocab
        "embed", "pos_embed", "rmsnorm", "layernorm", "linear", "rope", "attention", "swiglu",
        "gelu", "relu", "add", "mul", "lm_head", "cross_entropy", "matmul", "fused_matmul_relu",
        "softmax", "geglu", "mul_scalar", "softcap",
    }  # fmt: skip
    for kind, cls in g.COMPUTE_OPS.items():
        assert cls.kind == kind
        assert cls.name == f"graph.{kind}"
        assert cls in g.COMPUTE_OP_TYPES
    t = g.TensorType.make(["T", "E"], "f32")
    op = g.compute_op("rmsnorm", [], [t], weights=["g"], attrs={"eps": 1e-6})
    assert op.properties["eps"] == FloatAttr(1e-6, f64)
    op = g.compute_op("rope", [], [t, t], attrs={"theta": 10000, "heads": "H", "kv_heads": 2})
    assert op.properties["theta"] == FloatAttr(10000.0, f64)
    assert op.properties["kv_heads"] == g.DimAttr.get(2)
    sched = g.ScheduleAttr.make(tile_m=8, vectorize=4)
    op = g.compute_op("matmul", [], [t], attrs={"schedule": sched})
    assert op.properties["schedule"] == sched
    assert sched.values() == {"tile_m": 8, "vectorize": 4}
    with pytest.raises(ValueError, match="unknown graph compute op"):
        g.compute_op("conv", [], [t])


def test_types_and_attributes_verify() -> None:
    t = g.TensorType.make(["T", " 3 * E "], "bf16")
    assert t.dims == ("T", "3*E") and t.dtype_name == "bf16"
    assert str(t) == "!graph.tensor<[T, 3*E], bf16>"
    with pytest.raises(VerifyException, match="graph.tensor: unknown dtype 'f8'"):
        g.TensorType.make(["T"], "f8")
    with pytest.raises(VerifyException, match="should be of base attribute graph.dim"):
        g.TensorType(g.ArrayAttr([StringAttr("E")]), StringAttr("f32"))
    with pytest.raises(VerifyException, match="not in canonical form"):
        g.DimAttr(StringAttr("E + 1"))
    with pytest.raises(VerifyException, match="bad dim expression 'E\\*'"):
        g.DimAttr(StringAttr("E*"))
    assert g.DimAttr.get(" H * D ").text == "H*D" and g.DimAttr.get(64).text == "64"
    assert str(g.DimAttr.get("H*D")) == "#graph.dim<H*D>"
    with pytest.raises(VerifyException, match="graph.schedule: vectorize = 3 must be one of"):
        g.ScheduleAttr.make(vectorize=3)
    with pytest.raises(VerifyException, match="graph.schedule: tile_n = 0 must be positive"):
        g.ScheduleAttr.make(tile_n=0)
    assert str(g.ScheduleAttr.make(tile_k=8)) == "#graph.schedule<tile_k = 8>"
    with pytest.raises(VerifyException, match="lowered.buf: dims must be positive"):
        lw.BufferType.make([0], "f32")
    with pytest.raises(VerifyException, match="lowered.buf: a buffer needs at least one dim"):
        lw.BufferType.make([], "f32")
    with pytest.raises(VerifyException, match="lowered.buf: q4_0 rows must be a multiple of 32"):
        lw.BufferType.make([2, 40], "q4_0")
    with pytest.raises(VerifyException, match="lowered.buf: unknown dtype 'f64'"):
        lw.BufferType.make([2], "f64")
    with pytest.raises(VerifyException, match="lowered.rt: unknown run-time symbol 'Q'"):
        lw.RuntimeSymAttr.make("Q")
    assert str(lw.RuntimeSymAttr.make("T*64")) == "#lowered.rt<T*64>"


# --------------------------------------------------------------------------- lowered API


@pytest.mark.parametrize(
    ("shape", "dtype", "size"),
    [
        ([4, 64], "f32", 1024),
        ([4, 64], "i32", 1024),
        ([4, 64], "bf16", 512),
        ([4, 64], "f16", 512),
        ([3], "i64", 24),
        ([4, 64], "q8_0", 4 * 2 * 34),
        ([4, 64], "q4_0", 4 * 2 * 18),
        ([4, 64], "q4_1", 4 * 2 * 20),
        ([2, 3, 256], "q4_k", 6 * 144),
    ],
)
def test_buffer_byte_size(shape: list[int], dtype: str, size: int) -> None:
    t = lw.BufferType.make(shape, dtype)
    assert t.shape_ints == tuple(shape)
    assert t.dtype_name == dtype
    assert t.byte_size == size
    n = 1
    for d in shape:
        n *= d
    assert t.num_elements == n


def test_lowered_builders_and_accessors() -> None:
    model = lw.LoweredModelOp.make("tiny")
    assert model.sym_name.data == "tiny"
    w = lw.BufferOp.make("w.embed", "weight", lw.BufferType.make([256, 64], "f32"), source="embed")
    model.body_block.add_op(w)
    prog = lw.ProgramOp.make("decode", "decode", 128)
    model.body_block.add_op(prog)
    tok = lw.BufferOp.make("decode.tokens", "io", lw.BufferType.make([1], "i32"), source="input")
    x = lw.BufferOp.make("decode.x", "activation", lw.BufferType.make([1, 64], "f32"))
    view = lw.ViewOp.make("decode.x.lo", "decode.x", 128, lw.BufferType.make([1, 32], "f32"))
    origin = lw.OriginAttr.make("header", "graph.embed")
    call = lw.CallOp.make(
        "embed_f32",
        ["decode.tokens", "w.embed"],
        ["decode.x"],
        {"T": 1, "E": 64},
        origin=origin,
    )
    spec = KernelSpec(
        name="embed_f32",
        c_name="ckir_embed_f32",
        op="embed",
        modes=("prefill", "decode"),
        operands=(
            OperandSpec("tokens", "i32", "read"),
            OperandSpec("table", "f32", "read"),
            OperandSpec("out", "f32", "write"),
        ),
        params=(ParamSpec("T", "i64"), ParamSpec("E", "i64")),
        constraints=("T >= 1",),
        doc="",
    )
    decl = lw.KernelOp.from_spec(spec)
    model.body_block.insert_op_before(decl, w)
    for op in (tok, x, view, call):
        prog.body_block.add_op(op)
    module = ModuleOp([model])
    module.verify()
    assert w.buffer_name == "w.embed" and w.role == "weight" and w.source_name == "embed"
    assert w.buffer_type.byte_size == 256 * 64 * 4
    assert x.source_name is None
    assert prog.mode_name == "decode" and prog.max_ctx == 128
    assert model.programs() == {"decode": prog}
    assert view.view_name == "decode.x.lo" and view.root_name == "decode.x"
    assert view.offset_bytes == 128 and view.view_type.byte_size == 128
    assert call.kernel_name == "embed_f32"
    assert call.in_names == ("decode.tokens", "w.embed")
    assert call.out_names == ("decode.x",)
    assert call.param_values == {"T": 1, "E": 64}
    assert call.origin == origin and call.scope_name == "header"
    assert origin.label == "header: graph.embed" and origin.fusion_name is None
    assert call.declaration() is decl
    assert decl.kind_name == "embed" and decl.spec() == spec
    assert [a.name_text for a in decl.inputs()] == ["tokens", "table"]
    assert [a.name_text for a in decl.outputs()] == ["out"]
    assert decl.param_types() == [("T", "i64"), ("E", "i64")]
    assert [(a.name_text, n) for a, n in call.bindings(decl)] == [
        ("tokens", "decode.tokens"),
        ("table", "w.embed"),
        ("out", "decode.x"),
    ]
    text = show(module)
    assert (
        'lowered.kernel @embed_f32 op "embed" c "ckir_embed_f32" modes ["prefill", "decode"] '
        "(tokens: read i32, table: read f32, out: write f32) params (T: i64, E: i64) "
        'constraints ["T >= 1"]'
    ) in text
    assert (
        "lowered.call @embed_f32(@decode.tokens, @w.embed) -> (@decode.x) "
        '{T = 1 : i64, E = 64 : i64, origin = #lowered.origin<scope "header", op "graph.embed">}'
    ) in text
    assert show(parse(text)) == text
    assert show(parse(show(module, generic=True))) == text

    fused = lw.OriginAttr.fused(
        "fuse-add-rmsnorm",
        [
            lw.OriginAttr.make("layers.0", "graph.add"),
            lw.OriginAttr.make("layers.1", "graph.rmsnorm"),
        ],
    )
    assert fused.scope_name == "layers.0" and fused.fusion_name == "fuse-add-rmsnorm"
    assert fused.label == "layers.0: graph.add + layers.1: graph.rmsnorm [fuse-add-rmsnorm]"
    assert [p.op_name for p in fused.replaced] == ["graph.add", "graph.rmsnorm"]
    with pytest.raises(VerifyException, match="either an op .* or a fusion, not both"):
        lw.OriginAttr(*(StringAttr(t) for t in ("s", "graph.add", "fuse-x")), ArrayAttr(()))
    with pytest.raises(VerifyException, match="not neither"):
        lw.OriginAttr(*(StringAttr(t) for t in ("s", "", "")), ArrayAttr(()))

    rt = lw.CallOp.make("add_f32", ["decode.x", "decode.x"], ["decode.x"], {"n": "T*64"})
    assert rt.param_values == {"n": "T*64"}
    f = lw.CallOp.make("x", [], [], {"eps": 1e-5})
    assert f.param_values == {"eps": 1e-5}


def test_call_checked_against_its_declaration() -> None:
    text = lit_body("lowered").replace(
        "{N = 256 : i64, K = 64 : i64} attributes", "{N = 256 : i64, K = 0 : i64} attributes"
    )
    with pytest.raises(VerifyException, match=r"lowered.call @gemv_f32: constraint 'K >= 1'"):
        parse(text).verify()
    # the constraint comes from the declaration in the module, not the registry
    decl = 'params (N: i64, K: i64) constraints ["N >= 1", "K >= 1"]'
    assert decl in lit_body("lowered")
    stricter = lit_body("lowered").replace(decl, decl.replace("K >= 1", "K >= 128"))
    with pytest.raises(VerifyException, match=r"lowered.call @gemv_f32: constraint 'K >= 128'"):
        parse(stricter).verify()


# --------------------------------------------------------------------------- layout API


def _plan() -> ly.PlanOp:
    plan = ly.PlanOp.make("tiny", "liveness", 64, True)
    weights = ly.ArenaOp.make("weights", 65600)
    weights.body_block.add_op(ly.SlotOp.make("w.embed", 0, 65536, "weight", 65536, None))
    state = ly.ArenaOp.make("state", 704)
    state.body_block.add_op(ly.SlotOp.make("kv.0.k", 0, 128, "kv_cache", 128, None))
    state.body_block.add_op(
        ly.SlotOp.make("decode.x", 192, 256, "activation", 448, ("decode", 0, 3))
    )
    state.body_block.add_op(
        ly.SlotOp.make("decode.y", 192, 256, "activation", 448, ("decode", 4, 6))
    )
    state.body_block.add_op(ly.LayoutViewOp.make("decode.q", "decode.x", 64, 128))
    plan.body_block.add_op(weights)
    plan.body_block.add_op(state)
    plan.body_block.add_op(
        ly.TotalsOp.make({"weight": 65536, "kv_cache": 128, "activation": 512, "saved": 256})
    )
    return plan


def test_layout_builders_accessors_and_round_trip() -> None:
    plan = _plan()
    module = ModuleOp([plan])
    module.verify()
    assert plan.sym_name.data == "tiny"
    assert plan.strategy_name == "liveness" and plan.align_bytes == 64 and plan.has_canaries
    arenas = plan.arenas()
    assert list(arenas) == ["weights", "state"]
    state = arenas["state"]
    assert state.arena_name == "state" and state.size_bytes == 704
    x = state.slots()[1]
    assert x.buffer_name == "decode.x" and x.offset_bytes == 192 and x.size_bytes == 256
    assert x.role == "activation" and x.canary_offset == 448
    assert x.live_range == ("decode", 0, 3)
    assert state.slots()[0].live_range is None
    v = state.views()[0]
    assert (v.view_name, v.root_name, v.offset_bytes, v.size_bytes) == (
        "decode.q",
        "decode.x",
        64,
        128,
    )
    assert plan.totals() == {"activation": 512, "kv_cache": 128, "saved": 256, "weight": 65536}
    text = show(module)
    assert (
        'layout.slot @decode.x offset 192 size 256 role activation canary 448 live "decode" 0 3'
    ) in text
    assert "layout.totals {activation = 512 : i64, kv_cache = 128 : i64, saved = 256 : i64" in text
    assert show(parse(text)) == text
    assert show(parse(show(module, generic=True))) == text


def test_layout_overlap_is_rejected_when_live_ranges_meet() -> None:
    plan = _plan()
    state = plan.arenas()["state"]
    y = state.slots()[2]
    y.properties["live"] = ly.SlotOp.make("y", 0, 0, "activation", None, ("decode", 3, 6)).live
    with pytest.raises(VerifyException, match=r"slots @decode.x and @decode.y overlap in bytes"):
        ModuleOp([plan]).verify()


def test_overlap_sweep_agrees_with_all_pairs() -> None:
    """The arena's sweep finds a clash exactly when some pair of slots clashes."""
    rng = random.Random(11)

    def clash(a: ly.SlotOp, b: ly.SlotOp) -> bool:
        if a.size_bytes == 0 or b.size_bytes == 0:
            return False
        if a.offset_bytes >= b.end_bytes or b.offset_bytes >= a.end_bytes:
            return False
        la, lb = a.live_range, b.live_range
        if la is None or lb is None:
            return True
        return la[0] == lb[0] and not (la[2] < lb[1] or lb[2] < la[1])

    found = 0
    for _ in range(400):
        slots = []
        for i in range(rng.randint(2, 9)):
            first = rng.randint(0, 6)
            live = (
                None
                if rng.random() < 0.15
                else (rng.choice(("prefill", "decode")), first, first + rng.randint(0, 3))
            )
            offset, size = 64 * rng.randint(0, 6), rng.choice([0, 64, 128, 192])
            slots.append(ly.SlotOp.make(f"s{i}", offset, size, "activation", None, live))
        got = ly._first_clash([(s.offset_bytes, s.end_bytes, s) for s in slots])
        want = any(clash(a, b) for i, a in enumerate(slots) for b in slots[i + 1 :])
        assert (got is not None) == want
        if got is not None:
            assert clash(got[0][2], got[1][2])
            found += 1
    assert 50 < found < 350  # both outcomes are exercised


def test_plan_to_json_is_deterministic() -> None:
    text = plan_to_json(_plan())
    assert text.endswith("}\n")
    assert text == plan_to_json(_plan())
    data = json.loads(text)
    assert list(data) == sorted(data)
    assert data["strategy"] == "liveness" and data["align"] == 64 and data["canary_bytes"] == 64
    state = data["arenas"][1]
    assert state["name"] == "state" and state["size"] == 704
    assert state["slots"][1] == {
        "name": "decode.x", "offset": 192, "size": 256, "role": "activation", "canary": 448,
        "live": {"mode": "decode", "first": 0, "last": 3},
    }  # fmt: skip
    assert state["views"] == [{"name": "decode.q", "root": "decode.x", "offset": 64, "size": 128}]
    assert data["totals"]["saved"] == 256


def test_plan_to_map_is_a_table() -> None:
    text = plan_to_map(_plan())
    assert text.startswith("layout plan @tiny: strategy liveness, align 64, canaries on")
    assert "arena @state: 704 bytes (0x2c0)" in text
    row = [line for line in text.splitlines() if line.rstrip().endswith("  decode.x")][0]
    assert re.search(r"0x00000000c0\s+192\s+256\s+activation\s+decode 0\.\.3\s+decode\.x", row)
    assert re.search(r"0x0000000100\s+256\s+128\s+view\s+.*decode\.q = decode\.x \+ 64", text)
    assert re.search(r"^  weight\s+65536$", text, re.M)
    assert text == plan_to_map(_plan())


# --------------------------------------------------------------------------- plan vs model


def _tiny_with_plan(strategy: str = "liveness") -> tuple[ModuleOp, lw.LoweredModelOp, ly.PlanOp]:
    """lowered/ops.mlir (model @tiny: prefill with q/k/v views of a qkv buffer) and its plan."""
    module = parse(lit_body("lowered"))
    model = next(op for op in module.ops if isinstance(op, lw.LoweredModelOp))
    plan = plan_layout.plan(model, strategy, 64, True)
    module.body.block.insert_op_after(plan, model)
    return module, model, plan


def _slot(plan: ly.PlanOp, name: str) -> ly.SlotOp:
    return next(s for a in plan.arenas().values() for s in a.slots() if s.buffer_name == name)


def _set_live(slot: ly.SlotOp, live: tuple[str, int, int]) -> None:
    slot.properties["live"] = ly.SlotOp.make("x", 0, 0, "activation", None, live).live


def _refresh_totals(plan: ly.PlanOp) -> None:
    """Recompute the ``arena.<mode>`` / ``bound.<mode>`` totals after a hand edit."""
    old = plan.body_block.last_op
    assert isinstance(old, ly.TotalsOp)
    values = {k: v for k, v in old.values().items() if "." not in k}
    plan.body_block.add_op(ly.TotalsOp.make({**values, **ly.usage_totals(plan)}))
    old.detach()
    old.erase()


@pytest.mark.parametrize("strategy", ["bump", "liveness"])
@pytest.mark.parametrize("fuse", [False, True])
def test_planned_pipelines_verify_against_their_model(strategy: str, fuse: bool) -> None:
    """What the lowerings, the fuse-* passes and the planner make passes the cross-checks."""
    from ckir.passes.fuse_add_rmsnorm import FuseAddRmsnormPass
    from ckir.passes.fuse_gate_up import FuseGateUpPass
    from ckir.passes.fuse_qkv import FuseQkvPass
    from ckir.passes.lower_decode import LowerDecodePass
    from ckir.passes.lower_prefill import LowerPrefillPass

    module = parse((ROOT / "tests" / "filecheck" / "inputs" / "tiny_llama.mlir").read_text())
    passes = [LowerPrefillPass(max_context=16), LowerDecodePass(max_context=16)]
    if fuse:
        passes += [FuseQkvPass(), FuseGateUpPass(), FuseAddRmsnormPass()]
    for p in (*passes, plan_layout.PlanLayoutPass(strategy=strategy)):
        p.apply(Context(), module)
    module.verify()
    model = next(op for op in module.ops if isinstance(op, lw.LoweredModelOp))
    plan = next(op for op in module.ops if isinstance(op, ly.PlanOp))
    assert plan.planned_model() is model
    # and the checks are live on it: cut the last slot of the decode program short
    last = max(
        (s for s in plan.arenas()["state"].slots() if s.live_range is not None),
        key=lambda s: (s.live_range or ("", 0, 0))[2],
    )
    mode, first, end = last.live_range or ("", 0, 0)
    if first == end:
        first -= 1
    _set_live(last, (mode, first, end - 1))
    with pytest.raises(VerifyException, match=rf"call {end} \(@\S+\) of lowered.program @"):
        module.verify()


def test_plan_live_ranges_cover_uses_through_views() -> None:
    module, _, plan = _tiny_with_plan()
    module.verify()
    qkv = _slot(plan, "prefill.0.qkv")
    assert qkv.live_range == ("prefill", 2, 5)  # gemm_bias writes q ... attention reads q
    _set_live(qkv, ("prefill", 2, 4))
    with pytest.raises(VerifyException) as info:
        module.verify()
    assert str(info.value) == (
        "layout.plan @tiny: call 5 (@attention_f32) of lowered.program @prefill reads "
        "@prefill.0.q (a view of @prefill.0.qkv), but slot @prefill.0.qkv is live only for "
        '"prefill" calls 2..4'
    )


def test_plan_cross_checks_need_the_model() -> None:
    """Alone, a plan is checked as a layout only; next to one model of another name, against it."""
    module, model, plan = _tiny_with_plan("bump")
    _set_live(_slot(plan, "decode.x"), ("prefill", 0, 1))
    _refresh_totals(plan)  # the per-mode arena / bound entries follow the edit
    wrong_mode = r'call 0 \(@embed_f32\) of lowered.program @decode writes @decode.x, .*"prefill"'
    with pytest.raises(VerifyException, match=wrong_mode):
        module.verify()
    plan.plan_name = StringAttr("other")
    empty = next(op for op in module.ops if isinstance(op, lw.LoweredModelOp) and op is not model)
    assert plan.planned_model() is None  # two models, neither named @other
    ly.PlanOp.verify_(plan)  # checks that do not need the model still run (and pass)
    empty.detach()
    assert plan.planned_model() is model  # the only model: what emit-c pairs the plan with
    with pytest.raises(VerifyException, match=wrong_mode):
        ly.PlanOp.verify_(plan)
    plan.detach()
    assert plan.planned_model() is None
    plan.verify()


def test_plan_rejects_one_name_in_two_programs() -> None:
    module, model, _ = _tiny_with_plan()
    decode = model.programs()["decode"]
    decode.body_block.insert_op_before(
        lw.BufferOp.make("prefill.x", "activation", lw.BufferType.make([1, 64], "f32")),
        decode.body_block.first_op,
    )
    with pytest.raises(VerifyException, match=r"@prefill.x is declared in both lowered.program"):
        ly.PlanOp.verify_(next(op for op in module.ops if isinstance(op, ly.PlanOp)))


# --------------------------------------------------------------------------- invalid suites


@pytest.mark.parametrize("dialect", ["graph", "lowered", "layout"])
def test_each_invalid_case_reports_its_own_message(dialect: str) -> None:
    """Stricter than FileCheck: the CHECK of a case must appear in that case's output."""
    opt = shutil.which("ckir-opt") or str(Path(sys.executable).parent / "ckir-opt")
    if not Path(opt).exists():
        pytest.skip("ckir-opt is not installed")
    path = LIT / dialect / "invalid.mlir"
    run = subprocess.run(
        [opt, str(path), "--split-input-file", "--verify-diagnostics", "--parsing-diagnostics"],
        capture_output=True,
        text=True,
        check=False,
    )
    cases = path.read_text().split("// -----")
    outputs = run.stdout.split("// -----")
    assert len(cases) == len(outputs), run.stderr
    for case, out in zip(cases, outputs, strict=True):
        checks = re.findall(r"// CHECK: (.*)", case)
        assert checks, case
        for check in checks:
            assert check in out, f"expected {check!r} in:\n{out}"


# --------------------------------------------------------------------------- speed


def _big_graph(n_layers_ops: int) -> str:
    lines = [
        'graph.model @big arch "llama" symbols {E = 64, L = 2} {',
        *(
            f'  graph.weight @"layers.{{i}}.w{j}" : [E, E] f32 hf "h.{{i}}.w{j}"'
            for j in range(n_layers_ops)
        ),
        "  graph.header {",
        '    %x = graph.input "x" : !graph.tensor<[T, E], f32>',
        "    graph.yield %x : !graph.tensor<[T, E], f32>",
        "  }",
        "  graph.body repeat L (%x0 : !graph.tensor<[T, E], f32>) {",
    ]
    t = "!graph.tensor<[T, E], f32>"
    for j in range(n_layers_ops):
        ref = f'@"layers.{{i}}.w{j}"'
        lines.append(f"    %x{j + 1} = graph.linear %x{j} {{weights = [{ref}]}} : ({t}) -> {t}")
    lines += [f"    graph.yield %x{n_layers_ops} : {t}", "  }", "}"]
    return "\n".join(lines)


def _big_lowered(n: int) -> str:
    lines = [
        "lowered.model @big {",
        '  lowered.kernel @gemm_f32 op "linear" c "ckir_gemm_f32" modes ["prefill"] '
        "(x: read f32, w: read f32, y: write f32) params (M: i64, N: i64, K: i64) "
        'constraints ["M >= 1", "N >= 1", "K >= 1"]',
    ]
    lines += [
        f'  lowered.buffer @w{j} weight : !lowered.buf<[64, 64], f32> {{source = "w{j}"}}'
        for j in range(n // 4)
    ]
    lines.append('  lowered.program @prefill mode "prefill" max_context 64 {')
    lines += [
        f"    lowered.buffer @x{j} activation : !lowered.buf<[64, 64], f32>" for j in range(n // 4)
    ]
    for j in range(n // 2):
        a, w, b = j % (n // 4), j % (n // 4), (j + 1) % (n // 4)
        lines.append(
            f"    lowered.call @gemm_f32(@x{a}, @w{w}) -> (@x{b}) "
            "{M = #lowered.rt<T>, N = 64 : i64, K = 64 : i64}"
        )
    lines += ["  }", "}"]
    return "\n".join(lines)


@pytest.mark.parametrize("make", [_big_graph, _big_lowered], ids=["graph", "lowered"])
def test_parsing_scales_linearly(make) -> None:  # type: ignore[no-untyped-def]
    """Parsing 4x the ops takes well under 16x the CPU time (no quadratic lookups).

    A ratio of two runs in one process, not an absolute time: shared machines
    make absolute times meaningless (speed targets live in the benchmarks)."""
    small, large = (250, 1000) if make is _big_graph else (500, 2000)

    def cpu(n: int) -> float:
        text = make(n)
        best = float("inf")
        for _ in range(3):
            start = time.process_time()
            module = Parser(make_ctx(), text).parse_module()
            best = min(best, time.process_time() - start)
        module.verify()
        assert sum(1 for _ in module.walk()) >= n
        return best

    t_small, t_large = cpu(small), cpu(large)
    assert t_large < 8 * t_small, f"4x the ops took {t_large / t_small:.1f}x the CPU time"


def test_extents_come_from_the_registry_and_bound_every_buffer() -> None:
    decl = lw.KernelOp.from_spec(load_registry()["kv_store_f32"])
    assert [a.extent_text for a in decl.arg_list] == ["T*KVD", "T*KVD", "(P+T)*KVD", "(P+T)*KVD"]
    model = lw.LoweredModelOp.make("m")
    model.body_block.add_op(decl)
    for name, width in (("kv.k", 32), ("kv.v", 32)):
        model.body_block.add_op(
            lw.BufferOp.make(name, "kv_cache", lw.BufferType.make([8, width], "f32"))
        )
    prog = lw.ProgramOp.make("prefill", "prefill", 8)
    model.body_block.add_op(prog)
    for name in ("k", "v"):
        prog.body_block.add_op(
            lw.BufferOp.make(name, "activation", lw.BufferType.make([8, 32], "f32"))
        )
    call = lw.CallOp.make(
        "kv_store_f32", ["k", "v"], ["kv.k", "kv.v"], {"T": "T", "P": "P", "KVD": 32}
    )
    prog.body_block.add_op(call)
    module = ModuleOp([model])
    module.verify()  # 32-float rows into 32-float rows: fits exactly
    assert call.largest_params(prog) == {"T": 8, "P": 0, "KVD": 32}
    call.params = DictionaryAttr({**call.params.data, "KVD": IntegerAttr(96, 64)})
    with pytest.raises(VerifyException, match="operand k = @k holds 256 elements, but the kernel"):
        module.verify()


def test_registry_extents_are_validated() -> None:
    entry = {
        "op": "relu",
        "modes": ["decode"],
        "operands": [{"name": "x", "dtype": "f32", "access": "read", "extent": "n*m"}],
        "params": {"n": "i64"},
    }
    with pytest.raises(RegistryError, match="operand x: extent 'n\\*m' names no param m"):
        parse_registry({"version": 2, "kernels": {"x": entry}})
    entry["operands"][0]["extent"] = "n*"
    with pytest.raises(RegistryError, match="operand x: bad extent 'n\\*'"):
        parse_registry({"version": 2, "kernels": {"x": entry}})
    entry["operands"][0]["extent"] = "2 * n"
    spec = parse_registry({"version": 2, "kernels": {"x": entry}})["x"]
    assert spec.operands[0].extent == "2*n"
