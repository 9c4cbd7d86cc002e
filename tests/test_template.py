"""Template engine: dim expressions, conditions, loading/validation, binding, selection."""

from __future__ import annotations

from pathlib import Path

import pytest

from ckir.dialects.dims import DimError
from ckir.errors import CkirError
from ckir.template import (
    TEMPLATES_DIR,
    TemplateError,
    list_templates,
    load_template,
    parse_condition,
    parse_dim,
    select_template,
)

MINI = """\
name: mini
model_types: [mini]
symbols:
  E: dim
  V: vocab
  L: {key: layers, default: 1}
params:
  eps: {key: eps, type: float, default: 1.0e-5}
weights:
  embed:
    shape: [V, E]
    hf: emb
  head:
    shape: [V, E]
    hf: head
layer_weights:
  norm:
    shape: [E]
    hf: blk.{i}.norm
  w:
    shape: [E, E]
    hf: blk.{i}.w
header:
  inputs:
    tokens: {shape: [T], dtype: i32}
  ops:
    - op: x = embed(tokens)
      weights: [embed]
      shape: [T, E]
  yield: [x]
body:
  repeat: L
  args: [x]
  ops:
    - op: h = rmsnorm(x)
      weights: [norm]
      attrs: {eps: $eps}
    - op: y = linear(h)
      weights: [w]
      shape: [T, E]
    - op: x1 = add(x, y)
  yield: [x1]
footer:
  args: [x]
  ops:
    - op: logits = lm_head(x)
      weights: [head]
      shape: [T, V]
  output: [logits]
"""
MINI_CONFIG = {"model_type": "mini", "dim": 8, "vocab": 16}

LLAMA_CONFIG = {
    "model_type": "llama",
    "hidden_size": 64,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "intermediate_size": 172,
    "num_hidden_layers": 2,
    "vocab_size": 256,
    "max_position_embeddings": 128,
    "rms_norm_eps": 1e-5,
    "rope_parameters": {"rope_theta": 10000.0, "rope_type": "default"},
    "tie_word_embeddings": False,
}
GPT2_CONFIG = {
    "model_type": "gpt2",
    "n_embd": 64,
    "n_head": 4,
    "n_layer": 2,
    "n_positions": 128,
    "vocab_size": 256,
    "n_inner": None,
    "layer_norm_epsilon": 1e-5,
    "activation_function": "gelu_new",
}


def write(tmp_path: Path, text: str, name: str = "mini.yaml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def load_error(tmp_path: Path, text: str) -> str:
    path = write(tmp_path, text)
    with pytest.raises(CkirError) as err:
        load_template(path)
    msg = str(err.value)
    assert "\n" not in msg
    assert msg.startswith(str(path)) or "mini.yaml" in msg
    return msg


# --------------------------------------------------------------------------- dims


@pytest.mark.parametrize(
    "text,canon,value",
    [
        ("E", "E", 64),
        (64, "64", 64),
        ("H * D", "H*D", 64),
        ("E / H", "E/H", 16),
        ("3*E", "3*E", 192),
        ("( E + 2 ) * 2", "(E+2)*2", 132),
        ("E - (H - D)", "E-(H-D)", 76),
        ("E / (H * 2)", "E/(H*2)", 8),
        ("E*H/D", "E*H/D", 16),
    ],
)
def test_dim_parse_and_eval(text: object, canon: str, value: int) -> None:
    d = parse_dim(text)
    assert str(d) == canon
    assert d.evaluate({"E": 64, "H": 4, "D": 16}) == value
    assert str(parse_dim(str(d))) == canon  # canonical text re-parses to itself


@pytest.mark.parametrize("bad", ["H*", "", "E +", "3E", "E $ 2", "(E", "E)", -1, True, 1.5])
def test_dim_errors(bad: object) -> None:
    with pytest.raises(TemplateError):
        parse_dim(bad)


def test_dim_exact_division() -> None:
    # templates share the dim language of ckir.dialects.dims, and its errors
    with pytest.raises(DimError, match="not an integer"):
        parse_dim("E/H").evaluate({"E": 64, "H": 5})


# --------------------------------------------------------------------------- conditions

NAMES = {"tied": "bool", "bias": "bool", "act": "str", "W": "int", "C": "int", "eps": "float"}


@pytest.mark.parametrize(
    "text,env,expected",
    [
        ("tied", {"tied": True}, True),
        ("not tied", {"tied": True}, False),
        ("tied and not bias", {"tied": True, "bias": False}, True),
        ("not (tied or bias)", {"tied": False, "bias": False}, True),
        ("act == silu", {"act": "silu"}, True),
        ("act != 'gelu_new'", {"act": "gelu_new"}, False),
        ("W == 0 or W >= C", {"W": 64, "C": 128}, False),
        ("W == 0 or W >= C", {"W": 0, "C": 128}, True),
        ("eps < 1e-3", {"eps": 1e-5}, True),
        (True, {}, True),
    ],
)
def test_conditions(text: object, env: dict, expected: bool) -> None:
    assert parse_condition(text, NAMES).evaluate(env) is expected


@pytest.mark.parametrize(
    "bad,match",
    [
        ("tide", "unknown name 'tide'"),
        ("act", "compare it with"),
        ("tied == 3", "cannot compare"),
        ("act < silu", "needs numbers"),
        ("tied and", "unexpected end"),
        ("(tied", "expected '\\)'"),
        ("tied tied", "unexpected 'tied'"),
        ("", "non-empty"),
    ],
)
def test_condition_errors(bad: str, match: str) -> None:
    with pytest.raises(TemplateError, match=match):
        parse_condition(bad, NAMES)


# --------------------------------------------------------------------------- repo templates


def test_repo_templates_load() -> None:
    by_name = {t.name: t for t in list_templates()}
    assert set(by_name) >= {"llama", "qwen2", "gpt2"}
    assert by_name["llama"].model_types == ("llama", "mistral")
    assert by_name["qwen2"].model_types == ("qwen2",)
    assert by_name["gpt2"].model_types == ("gpt2",)


@pytest.mark.parametrize(
    "model_type,name",
    [("llama", "llama"), ("mistral", "llama"), ("qwen2", "qwen2"), ("gpt2", "gpt2")],
)
def test_select_by_model_type(model_type: str, name: str) -> None:
    assert select_template(model_type).name == name


def test_select_errors_and_overrides(tmp_path: Path) -> None:
    with pytest.raises(CkirError, match="model_type 'bert' is not served by any template"):
        select_template("bert")
    with pytest.raises(CkirError, match="no 'model_type'"):
        select_template(None)
    with pytest.raises(CkirError, match="template 'lama' not found .*llama"):
        select_template("llama", "lama")
    assert select_template(None, "gpt2").name == "gpt2"
    assert select_template("whatever", TEMPLATES_DIR / "qwen2.yaml").name == "qwen2"
    with pytest.raises(CkirError, match="template file not found"):
        select_template("llama", tmp_path / "missing.yaml")
    # a template directory of one's own; two templates claiming one model_type is an error
    write(tmp_path, MINI, "a.yaml")
    write(tmp_path, MINI.replace("name: mini", "name: mini2"), "b.yaml")
    with pytest.raises(CkirError, match="model_type 'mini' is served by"):
        select_template("mini", templates_dir=tmp_path)
    assert select_template("x", "mini2", templates_dir=tmp_path).name == "mini2"


# --------------------------------------------------------------------------- binding


def test_llama_binding_defaults() -> None:
    tpl = select_template("llama")
    symbols, params = tpl.bind(LLAMA_CONFIG)
    assert symbols == {"E": 64, "H": 4, "KV": 2, "D": 16, "I": 172, "L": 2, "V": 256, "C": 128}
    assert params["theta"] == 10000.0 and params["tied"] is False
    cfg = {k: v for k, v in LLAMA_CONFIG.items() if k not in ("num_key_value_heads",)}
    cfg["head_dim"] = 32  # head_dim wins over E / H when present
    cfg["rope_theta"] = 500000.0  # older configs: top-level rope_theta
    del cfg["rope_parameters"]
    symbols, params = tpl.bind(cfg)
    assert symbols["KV"] == 4 and symbols["D"] == 32  # KV defaults to H (explicit in llama.yaml)
    assert params["theta"] == 500000.0
    cfg["head_dim"] = None  # null means "not given": the default applies
    assert tpl.bind(cfg)[0]["D"] == 16


def test_gpt2_binding() -> None:
    tpl = select_template("gpt2")
    assert tpl.bind(GPT2_CONFIG)[0]["I"] == 256  # n_inner null -> 4*E
    assert tpl.bind({**GPT2_CONFIG, "n_inner": 100})[0]["I"] == 100
    with pytest.raises(CkirError, match=r"symbol D \(template gpt2\): 'E/H' = 64/5 is not"):
        tpl.bind({**GPT2_CONFIG, "n_head": 5})


@pytest.mark.parametrize(
    "change,match",
    [
        ({"hidden_size": None}, "config.json: missing key 'hidden_size' (template llama needs it"),
        ({"hidden_size": "64"}, "key 'hidden_size' must be an integer, got str '64'"),
        ({"hidden_size": 64.0}, "key 'hidden_size' must be an integer"),
        ({"num_hidden_layers": 0}, "symbol L (template llama) must be positive, got 0"),
        ({"rms_norm_eps": "small"}, "key 'rms_norm_eps': expected a number"),
        ({"tie_word_embeddings": "yes"}, "key 'tie_word_embeddings': expected true/false"),
        ({"hidden_act": "gelu"}, "key 'hidden_act' is 'gelu'; template llama supports only silu"),
        (
            {"rope_parameters": {"rope_theta": 1.0, "rope_type": "longrope"}},
            "key 'rope_parameters.rope_type' is 'longrope'",
        ),
    ],
)
def test_binding_errors(change: dict, match: str) -> None:
    cfg = {**LLAMA_CONFIG, **change}
    cfg = {k: v for k, v in cfg.items() if v is not None}
    with pytest.raises(CkirError) as err:
        select_template("llama").bind(cfg)
    assert match in str(err.value) and "\n" not in str(err.value)


def test_missing_key_names_template_file() -> None:
    cfg = {k: v for k, v in LLAMA_CONFIG.items() if k != "vocab_size"}
    with pytest.raises(CkirError) as err:
        select_template("llama").bind(cfg, config_name="m/config.json")
    msg = str(err.value)
    assert msg.startswith("m/config.json: missing key 'vocab_size'")
    assert "symbol V" in msg and "llama.yaml" in msg


def test_llama_bias_flags_select_weights() -> None:
    tpl = select_template("llama")
    plain = tpl.instantiate(LLAMA_CONFIG)
    biased = tpl.instantiate({**LLAMA_CONFIG, "attention_bias": True, "mlp_bias": True})
    names = {w.name for w in plain.weights}
    assert "layers.{i}.attn.bq" not in names
    assert {"layers.{i}.attn.bq", "layers.{i}.attn.bo", "layers.{i}.mlp.bdown"} <= {
        w.name for w in biased.weights
    }
    q_plain = next(op for op in plain.body.ops if op.outs == ("q",))
    q_biased = next(op for op in biased.body.ops if op.outs == ("q",))
    assert q_plain.weights == ("layers.{i}.attn.wq",)
    assert q_biased.weights == ("layers.{i}.attn.wq", "layers.{i}.attn.bq")
    tied = tpl.instantiate({**LLAMA_CONFIG, "tie_word_embeddings": True})
    head = next(w for w in tied.weights if w.name == "lm_head")
    assert head.tied_to == "embed" and head.hf == ()


def test_buffers_and_ignore() -> None:
    spec = select_template("llama").instantiate(LLAMA_CONFIG)
    kv = {b.name: b for b in spec.buffers}
    assert kv["kv.k"].shape_values == (128, 32) and kv["kv.k"].role == "kv_cache"
    assert str(kv["kv.k"].shape[1]) == "KV*D" and kv["kv.k"].per_layer
    gpt2 = select_template("gpt2").instantiate(GPT2_CONFIG)
    assert "transformer.h.{i}.attn.bias" in gpt2.ignore and "h.{i}.attn.bias" in gpt2.ignore


@pytest.mark.parametrize(
    "model_type,config", [("llama", LLAMA_CONFIG), ("qwen2", LLAMA_CONFIG), ("gpt2", GPT2_CONFIG)]
)
def test_every_repo_template_builds_a_verified_graph(model_type: str, config: dict) -> None:
    from ckir.frontend.build_graph import build_graph

    spec = select_template(model_type).instantiate({**config, "model_type": model_type})
    module = build_graph(spec, "m")  # no checkpoint: first HF name, f32
    module.verify()


# --------------------------------------------------------------------------- the mini template


def test_mini_instantiates(tmp_path: Path) -> None:
    tpl = load_template(write(tmp_path, MINI))
    spec = tpl.instantiate(MINI_CONFIG)
    assert spec.symbols == {"E": 8, "V": 16, "L": 1}
    assert spec.layers == 1
    h = spec.body.ops[0]
    assert h.kind == "rmsnorm" and h.attrs == {"eps": 1e-5}
    assert [str(d) for d in h.out_types[0].shape] == ["T", "E"]  # copied from the input
    assert h.weights == ("layers.{i}.norm",)
    from ckir.frontend.build_graph import build_graph

    build_graph(spec, "mini").verify()


@pytest.mark.parametrize(
    "old,new,match",
    [
        ("name: mini\n", "name: mini\nfoo: 1\n", "top level: unknown key 'foo'"),
        ("model_types: [mini]\n", "", "missing required key 'model_types'"),
        ("h = rmsnorm(x)", "h = rmsnrom(x)", "body.ops[0] 'h = rmsnrom(x)': unknown op kind"),
        ("x1 = add(x, y)", "x1 = add(x, z)", "body.ops[2] 'x1 = add(x, z)': undefined value 'z'"),
        ("yield: [x1]", "yield: [x9]", "body.yield: undefined value 'x9'"),
        (
            "shape: [T, V]",
            "shape: [T, V*]",
            "footer.ops[0] 'logits = lm_head(x)'.shape[1]: bad dim",
        ),
        ("shape: [T, V]", "shape: [T, W]", "uses unknown symbol 'W'"),
        ("shape: [E, E]", "shape: E", "layer_weights.w.shape: expected a list, got str 'E'"),
        ("    hf: blk.{i}.w", "    hf: blk.w", "per-layer HF name 'blk.w' has no '{i}'"),
        ("    hf: emb", "    hf: emb.{i}", "put per-layer weights in layer_weights"),
        ("weights: [w]", "weights: [ww]", "unknown weight 'ww'"),
        ("weights: [embed]", "weights: [norm]", "layer weights are used only in the body"),
        ("x1 = add(x, y)", "x1 = add(x)", "add takes 2 inputs, got 1"),
        ("weights: [w]", "weights: [w, w, w]", "linear takes 1 to 2 weights, got 3"),
        ("attrs: {eps: $eps}", "attrs: {}", "rmsnorm needs attribute 'eps'"),
        ("attrs: {eps: $eps}", "attrs: {eps: $eps, heads: E}", "rmsnorm has no attribute 'heads'"),
        ("attrs: {eps: $eps}", "attrs: {eps: $epz}", "unknown param 'epz'"),
        ("attrs: {eps: $eps}", "attrs: {eps: tiny}", "eps: expected a number, got str 'tiny'"),
        ("type: float", "type: double", "params.eps.type: unknown type 'double'"),
        ("  V: vocab\n", "  V: vocab\n  V: vocab2\n", "duplicate key 'V'"),
        ("    - op: h = rmsnorm(x)", "    - op: h = rmsnorm(x\n      - bad", "YAML error"),
        ("  L: {key: layers, default: 1}", "  L: {key: layers, default: Q}", "unknown symbol 'Q'"),
        ("  E: dim\n", "  E: {key: dim, default: V}\n", "symbols.E.default: dim expression 'V'"),
        ("  yield: [x1]", "  yield: [x1, x1]", "body.yield: the body yields 2 values but takes 1"),
        ("    - op: y = linear(h)", "    - op: h = linear(h)", "value 'h' is already defined"),
        ("x1 = add(x, y)", "x1 = add x y", "is not of the form"),
        ("repeat: L", "repeat: 2*", "body.repeat: bad dim expression"),
        ("  repeat: L\n", "", "body: missing 'repeat'"),
        (
            "    - op: x1 = add(x, y)",
            "    - op: x1 = add(x, y)\n      when: [train]",
            "unknown mode",
        ),
        ("    - op: x1 = add(x, y)", "    - op: x1 = add(x, y)\n      if: tide", "unknown name"),
        ("dtype: i32", "dtype: int32", "unknown dtype 'int32'"),
    ],
)
def test_template_errors(tmp_path: Path, old: str, new: str, match: str) -> None:
    assert old in MINI
    msg = load_error(tmp_path, MINI.replace(old, new, 1))
    assert match in msg, msg


def test_op_cut_by_flow_mapping_comma(tmp_path: Path) -> None:
    text = MINI.replace("    - op: x1 = add(x, y)\n", "    - {op: x1 = add(x, y)}\n")
    assert "is cut at a comma" in load_error(tmp_path, text)


def test_gelu_approximate_choices(tmp_path: Path) -> None:
    text = MINI.replace(
        "    - op: x1 = add(x, y)\n",
        "    - op: g = gelu(y)\n      attrs: {approximate: erf}\n    - op: x1 = add(x, g)\n",
    )
    assert "'erf' is not one of tanh, none" in load_error(tmp_path, text)


def test_body_yield_type_must_match_args(tmp_path: Path) -> None:
    text = MINI.replace(
        "    - op: x1 = add(x, y)\n",
        "    - op: x1 = linear(y)\n      weights: [w]\n      shape: [T, V]\n",
    )
    tpl = load_template(write(tmp_path, text))
    with pytest.raises(CkirError, match="body.yield: value 'x1' has type \\[T, V\\] f32 but arg"):
        tpl.instantiate(MINI_CONFIG)


PACKED = """\
  packed:
    shape: [E, E]
    hf: blk.{i}.qkv
    hf_shape: [E, 3*E]
    slice: {axis: 1, start: E, stop: 2*E}
    transpose: true
"""


def test_slice_checked_against_shapes(tmp_path: Path) -> None:
    good = MINI.replace("layer_weights:\n", "layer_weights:\n" + PACKED)
    spec = load_template(write(tmp_path, good)).instantiate(MINI_CONFIG)
    w = next(w for w in spec.weights if w.name == "layers.{i}.packed")
    assert w.hf_shape_values == (8, 24) and w.shape_values == (8, 8)
    assert (w.slice[0], str(w.slice[1]), str(w.slice[2])) == (1, "E", "2*E")
    sized = good.replace("stop: 2*E}", "size: E}")
    spec = load_template(write(tmp_path, sized)).instantiate(MINI_CONFIG)
    w = next(w for w in spec.weights if w.name == "layers.{i}.packed")
    assert str(w.slice[2]) == "E+E"
    bad = good.replace("stop: 2*E", "stop: 3*E")
    with pytest.raises(CkirError, match="after slice/transpose gives \\[16, 8\\]"):
        load_template(write(tmp_path, bad)).instantiate(MINI_CONFIG)
    outside = good.replace("start: E, stop: 2*E", "start: E, stop: 4*E")
    with pytest.raises(CkirError, match="empty or outside axis 1"):
        load_template(write(tmp_path, outside)).instantiate(MINI_CONFIG)
    no_axis = good.replace("axis: 1, ", "")
    assert "expected {axis: n, start: dim, stop: dim}" in load_error(tmp_path, no_axis)
    no_hf_shape = good.replace("    hf_shape: [E, 3*E]\n", "")
    assert "a sliced weight needs 'hf_shape'" in load_error(tmp_path, no_hf_shape)


# --------------------------------------------------------------------------- conditional wiring

FLAGGED = """\
name: flagged
model_types: [flagged]
symbols:
  E: dim
  V: vocab
  C: {value: 32}
  L: {value: 1}
params:
  pos: {key: position, type: str, default: rope, choices: [rope, learned]}
  tied: {key: tie, type: bool, default: true}
checks:
  - assert: E >= 4
    message: dim must be at least 4
  - assert: V > E
    severity: warning
    message: vocab is not larger than dim
weights:
  embed: {shape: [V, E], hf: emb}
  wpe:
    if: pos == learned
    shape: [C, E]
    hf: pos
  head:
    - if: tied
      shape: [V, E]
      tied_to: embed
    - if: not tied
      shape: [V, E]
      hf: head
header:
  inputs:
    tokens: {shape: [T], dtype: i32}
  ops:
    - op: e = embed(tokens)
      weights: [embed]
      shape: [T, E]
    - op: x = pos_embed(e)
      if: pos == learned
      weights: [wpe]
    - op: x = relu(e)
      if: pos == rope
  yield: [x]
body:
  repeat: L
  args: [x]
  ops:
    - op: y = relu(x)
      when: [prefill, decode]
  yield: [y]
footer:
  args: [x]
  ops:
    - op: logits = lm_head(x)
      weights: [head]
      shape: [T, V]
  output: [logits]
"""


def test_conditional_ops_and_weights(tmp_path: Path) -> None:
    tpl = load_template(write(tmp_path, FLAGGED))
    rope = tpl.instantiate({"dim": 8, "vocab": 16})
    assert [op.kind for op in rope.header.ops] == ["embed", "relu"]
    assert "wpe" not in {w.name for w in rope.weights}
    assert rope.body.ops[0].when == ("prefill", "decode")
    learned = tpl.instantiate({"dim": 8, "vocab": 16, "position": "learned", "tie": False})
    assert [op.kind for op in learned.header.ops] == ["embed", "pos_embed"]
    head = next(w for w in learned.weights if w.name == "head")
    assert head.tied_to is None and head.hf == ("head",)
    with pytest.raises(CkirError, match="key 'position' is 'alibi'; template flagged supports"):
        tpl.instantiate({"dim": 8, "vocab": 16, "position": "alibi"})
    with pytest.raises(
        CkirError, match="dim must be at least 4 \\(template flagged checks: E >= 4"
    ):
        tpl.instantiate({"dim": 2, "vocab": 16})
    spec = tpl.instantiate({"dim": 8, "vocab": 8})
    assert len(spec.warnings) == 1 and "vocab is not larger than dim" in spec.warnings[0]
    from ckir.frontend.build_graph import build_graph

    build_graph(learned, "flagged").verify()
    build_graph(rope, "flagged").verify()


def test_value_of_disabled_op(tmp_path: Path) -> None:
    text = FLAGGED.replace("    - op: x = relu(e)\n      if: pos == rope\n", "")
    tpl = load_template(write(tmp_path, text))
    with pytest.raises(CkirError, match="value 'x' is not produced: header.ops\\[1\\]"):
        tpl.instantiate({"dim": 8, "vocab": 16})


def test_weight_of_disabled_variant_is_dropped_but_arity_checked(tmp_path: Path) -> None:
    text = FLAGGED.replace("    - if: not tied\n", "    - if: tied and not tied\n")
    tpl = load_template(write(tmp_path, text))
    with pytest.raises(CkirError, match="lm_head needs 1 to 2 weights, but this config leaves out"):
        tpl.instantiate({"dim": 8, "vocab": 16, "tie": False})


def test_redefinition_needs_conditions(tmp_path: Path) -> None:
    text = FLAGGED.replace(
        "    - op: x = relu(e)\n      if: pos == rope\n", "    - op: x = relu(e)\n"
    )
    assert "value 'x' is already defined" in load_error(tmp_path, text)


def test_period_of_reads_an_int_from_a_list(tmp_path: Path) -> None:
    """`period_of`: an int param from a list of strings, the period of one entry in it
    ((i + 1) % n == 0 exactly where it sits); an int value as it is; any other list fails
    naming the key; only for int params."""
    from ckir.template_instantiate import list_period

    assert list_period(["a", "a", "f", "a", "a", "f", "a"], "f") == 3
    assert list_period(["f", "f"], "f") == 1
    assert list_period(["a", "a"], "f") == 3
    assert list_period(["f", "a"], "f") is None
    assert list_period(["a", 1], "f") is None
    param = "  n: {key: [kinds, every], type: int, period_of: f, default: 6}\n"
    tpl = load_template(write(tmp_path, MINI.replace("params:\n", "params:\n" + param, 1)))
    assert tpl.bind({**MINI_CONFIG, "kinds": ["a", "f", "a", "f"]})[1]["n"] == 2
    assert tpl.bind({**MINI_CONFIG, "every": 4})[1]["n"] == 4
    assert tpl.bind(MINI_CONFIG)[1]["n"] == 6
    with pytest.raises(CkirError, match="key 'kinds' does not have 'f' exactly at every n-th"):
        tpl.bind({**MINI_CONFIG, "kinds": ["f", "a", "a"]})
    bad = MINI.replace(
        "params:\n",
        "params:\n" + param.replace("type: int", "type: str").replace("default: 6", "default: x"),
        1,
    )
    assert "period_of: needs type int" in load_error(tmp_path, bad)
