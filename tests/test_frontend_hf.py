"""HF frontend: tiny checkpoints -> graph IR, weight-map checks, bad inputs."""

from __future__ import annotations

import io
import json
import re
import shutil
import struct
from pathlib import Path

import pytest

from ckir.errors import CkirError
from ckir.frontend.hf import import_hf, model_name
from ckir.frontend.safetensors_header import read_checkpoint_header, read_safetensors_header

safetensors_torch = pytest.importorskip("safetensors.torch")
torch = pytest.importorskip("torch")


def _print(op) -> str:
    from xdsl.printer import Printer

    buf = io.StringIO()
    Printer(stream=buf).print_op(op)
    return buf.getvalue()


def _parse(text: str):
    from xdsl.context import Context
    from xdsl.dialects.builtin import Builtin
    from xdsl.parser import Parser

    from ckir.dialects.graph import Graph

    ctx = Context()
    ctx.load_dialect(Builtin)
    ctx.load_dialect(Graph)
    return Parser(ctx, text).parse_module()


def _model(module):
    from ckir.dialects import graph as g

    (model,) = [op for op in module.ops if isinstance(op, g.ModelOp)]
    return model


def _roundtrip(module) -> str:
    text = _print(module)
    again = _parse(text)
    again.verify()
    assert _print(again) == text
    return text


def _one_line(err: pytest.ExceptionInfo[CkirError]) -> str:
    msg = str(err.value)
    assert "\n" not in msg and msg
    return msg


def _load(path: Path) -> dict:
    return safetensors_torch.load_file(str(path))


def _save(tensors: dict, path: Path) -> None:
    safetensors_torch.save_file({k: v.contiguous() for k, v in tensors.items()}, str(path))


# --------------------------------------------------------------------------- imports


@pytest.mark.parametrize(
    "fixture,arch",
    [
        ("llama_dir", "llama"),
        ("mistral_dir", "llama"),
        ("qwen2_tied_dir", "qwen2"),
        ("qwen2_untied_dir", "qwen2"),
        ("gpt2_dir", "gpt2"),
    ],
)
def test_import_roundtrips(request: pytest.FixtureRequest, fixture: str, arch: str) -> None:
    model_dir = request.getfixturevalue(fixture)
    module, warnings = import_hf(model_dir)
    assert warnings == []
    text = _roundtrip(module)
    model = _model(module)
    assert model.arch.data == arch
    assert model.sym_name.data == model_name(model_dir)
    assert "graph.body repeat L" in text
    assert model.symbol_values()["L"] == 2


def test_llama_symbols_and_weights(llama_dir: Path) -> None:
    module, _ = import_hf(llama_dir)
    model = _model(module)
    assert model.symbol_values() == {
        "E": 64, "H": 4, "KV": 2, "D": 16, "I": 172, "L": 2, "V": 256, "C": 128,
    }  # fmt: skip
    weights = model.weights()
    assert weights["layers.{i}.attn.wk"].shape_dims == ("KV*D", "E")
    assert weights["layers.{i}.attn.wk"].hf_name == "model.layers.{i}.self_attn.k_proj.weight"
    assert weights["lm_head"].hf_name == "lm_head.weight"  # untied
    assert not any(name.startswith("layers.{i}.attn.b") for name in weights)  # no bias
    text = _print(module)
    for op in ("rmsnorm", "rope", "attention", "swiglu", "add", "lm_head"):
        assert f"graph.{op} " in text
    assert " kv_heads KV " in text


def test_qwen2_tied_and_untied(qwen2_tied_dir: Path, qwen2_untied_dir: Path) -> None:
    tied = _model(import_hf(qwen2_tied_dir)[0]).weights()
    untied = _model(import_hf(qwen2_untied_dir)[0]).weights()
    assert tied["lm_head"].tied_to_name == "embed" and tied["lm_head"].hf_name is None
    assert untied["lm_head"].tied_to_name is None
    assert untied["lm_head"].hf_name == "lm_head.weight"
    for w in (tied, untied):
        assert w["layers.{i}.attn.bq"].hf_name == "model.layers.{i}.self_attn.q_proj.bias"
        assert "layers.{i}.attn.bo" not in w


def test_gpt2_packing(gpt2_dir: Path) -> None:
    module, _ = import_hf(gpt2_dir)
    model = _model(module)
    assert model.symbol_values()["I"] == 256  # n_inner null -> 4*E
    w = model.weights()
    wk = w["layers.{i}.attn.wk"]
    assert wk.hf_name == "transformer.h.{i}.attn.c_attn.weight"
    assert wk.hf_dims == ("E", "3*E")
    assert wk.slice_spec == (1, "E", "2*E")
    assert wk.is_transposed
    assert w["layers.{i}.attn.bv"].slice_spec == (0, "2*E", "3*E")
    assert w["layers.{i}.mlp.fc"].shape_dims == ("I", "E")
    assert w["layers.{i}.mlp.fc"].hf_dims == ("E", "I")
    assert w["lm_head"].tied_to_name == "embed"
    text = _print(module)
    assert "graph.pos_embed" in text and 'approximate = "tanh"' in text
    assert "graph.rope" not in text


def test_gpt2_without_prefix_and_with_mask_buffers(gpt2_dir: Path, copy_checkpoint) -> None:
    """GPT2Model-style names (no "transformer.") and old attn.bias buffers import cleanly."""
    d = copy_checkpoint(gpt2_dir)
    tensors = _load(d / "model.safetensors")
    renamed = {k.removeprefix("transformer."): v for k, v in tensors.items()}
    renamed["h.0.attn.bias"] = torch.ones(1, 1, 128, 128)
    renamed["h.1.attn.bias"] = torch.ones(1, 1, 128, 128)
    _save(renamed, d / "model.safetensors")
    module, warnings = import_hf(d)
    assert warnings == []
    assert _model(module).weights()["embed"].hf_name == "wte.weight"
    _roundtrip(module)


def test_mistral_small_sliding_window_warns(tiny_model, copy_checkpoint) -> None:
    d = copy_checkpoint(tiny_model("mistral"))
    cfg = json.loads((d / "config.json").read_text())
    cfg["sliding_window"] = 64
    (d / "config.json").write_text(json.dumps(cfg))
    _, warnings = import_hf(d)
    assert len(warnings) == 1 and "sliding_window" in warnings[0]


def test_bf16_checkpoint(llama_dir: Path, copy_checkpoint) -> None:
    d = copy_checkpoint(llama_dir)
    tensors = _load(d / "model.safetensors")
    _save({k: v.to(torch.bfloat16) for k, v in tensors.items()}, d / "model.safetensors")
    module, _ = import_hf(d)
    assert _model(module).weights()["embed"].dtype_name == "bf16"
    assert _model(module).weights()["lm_head"].dtype_name == "bf16"
    _roundtrip(module)


def test_template_override_by_name_and_path(mistral_dir: Path) -> None:
    by_type = _print(import_hf(mistral_dir)[0])
    assert _print(import_hf(mistral_dir, "llama")[0]) == by_type
    repo_templates = Path(__file__).resolve().parent.parent / "templates"
    assert _print(import_hf(mistral_dir, repo_templates / "llama.yaml")[0]) == by_type


# --------------------------------------------------------------------------- sharded


def test_sharded_checkpoint(llama_dir: Path, tmp_path: Path) -> None:
    d = tmp_path / "sharded" / llama_dir.name  # same folder name: same model name
    d.mkdir(parents=True)
    shutil.copy(llama_dir / "config.json", d / "config.json")
    tensors = _load(llama_dir / "model.safetensors")
    names = sorted(tensors)
    half = len(names) // 2
    shards = {
        "model-00001-of-00002.safetensors": names[:half],
        "model-00002-of-00002.safetensors": names[half:],
    }
    weight_map = {}
    for shard, members in shards.items():
        _save({n: tensors[n] for n in members}, d / shard)
        weight_map.update({n: shard for n in members})
    index = {"metadata": {"total_size": 0}, "weight_map": weight_map}
    (d / "model.safetensors.index.json").write_text(json.dumps(index))

    infos, source = read_checkpoint_header(d)
    assert source.name == "model.safetensors.index.json"
    assert {i.file.name for i in infos.values()} == set(shards)
    module, warnings = import_hf(d)
    assert warnings == []
    assert _print(module) == _print(import_hf(llama_dir)[0])


def test_sharded_index_names_missing_shard(llama_dir: Path, tmp_path: Path) -> None:
    d = tmp_path / "bad_index"
    d.mkdir()
    shutil.copy(llama_dir / "config.json", d / "config.json")
    index = {"weight_map": {"model.embed_tokens.weight": "model-00001-of-00002.safetensors"}}
    (d / "model.safetensors.index.json").write_text(json.dumps(index))
    with pytest.raises(CkirError) as err:
        import_hf(d)
    assert "model-00001-of-00002.safetensors" in _one_line(err)


# --------------------------------------------------------------------------- header reader


def test_read_safetensors_header_only(llama_dir: Path) -> None:
    path = llama_dir / "model.safetensors"
    infos = read_safetensors_header(path)
    q = infos["model.layers.0.self_attn.q_proj.weight"]
    assert (q.dtype, q.shape, q.file) == ("F32", (64, 64), path)
    assert q.nbytes == 64 * 64 * 4
    (length,) = struct.unpack("<Q", path.read_bytes()[:8])
    assert q.data_start == 8 + length
    start, end = q.absolute_offsets
    raw = path.read_bytes()[start:end]
    expected = _load(path)["model.layers.0.self_attn.q_proj.weight"].numpy().tobytes()
    assert raw == expected


@pytest.mark.parametrize("cut", [0, 5, 8, 40])
def test_truncated_header(llama_dir: Path, copy_checkpoint, cut: int) -> None:
    d = copy_checkpoint(llama_dir)
    f = d / "model.safetensors"
    f.write_bytes(f.read_bytes()[:cut])
    with pytest.raises(CkirError) as err:
        import_hf(d)
    msg = _one_line(err)
    assert "model.safetensors" in msg and "truncated" in msg


def test_truncated_data(llama_dir: Path, copy_checkpoint) -> None:
    d = copy_checkpoint(llama_dir)
    f = d / "model.safetensors"
    data = f.read_bytes()
    f.write_bytes(data[: len(data) - 100])
    with pytest.raises(CkirError, match="truncated") as err:
        import_hf(d)
    assert "model.safetensors" in _one_line(err)


def test_corrupt_header_json(llama_dir: Path, copy_checkpoint) -> None:
    d = copy_checkpoint(llama_dir)
    body = b"{not json" + b" " * 100
    (d / "model.safetensors").write_bytes(struct.pack("<Q", len(body)) + body)
    with pytest.raises(CkirError, match="corrupt safetensors header") as err:
        import_hf(d)
    assert "model.safetensors" in _one_line(err)


def test_inconsistent_offsets(tmp_path: Path) -> None:
    header = {"w": {"dtype": "F32", "shape": [4, 4], "data_offsets": [0, 60]}}
    body = json.dumps(header).encode()
    f = tmp_path / "x.safetensors"
    f.write_bytes(struct.pack("<Q", len(body)) + body + b"\0" * 64)
    with pytest.raises(CkirError, match=r"tensor 'w' has data_offsets \[0, 60\]"):
        read_safetensors_header(f)


# --------------------------------------------------------------------------- bad checkpoints


def test_missing_weight(llama_dir: Path, copy_checkpoint) -> None:
    d = copy_checkpoint(llama_dir)
    tensors = _load(d / "model.safetensors")
    del tensors["model.layers.1.mlp.up_proj.weight"]
    _save(tensors, d / "model.safetensors")
    with pytest.raises(CkirError) as err:
        import_hf(d)
    msg = _one_line(err)
    assert msg.startswith("model.safetensors: missing tensor 'model.layers.1.mlp.up_proj.weight'")
    assert "layers.{i}.mlp.up" in msg and "template llama" in msg


def test_missing_untied_lm_head(qwen2_untied_dir: Path, copy_checkpoint) -> None:
    d = copy_checkpoint(qwen2_untied_dir)
    tensors = _load(d / "model.safetensors")
    del tensors["lm_head.weight"]
    _save(tensors, d / "model.safetensors")
    with pytest.raises(CkirError, match="missing tensor 'lm_head.weight'"):
        import_hf(d)


def test_wrong_shape(llama_dir: Path, copy_checkpoint) -> None:
    d = copy_checkpoint(llama_dir)
    tensors = _load(d / "model.safetensors")
    tensors["model.layers.0.self_attn.q_proj.weight"] = torch.zeros(64, 32)
    _save(tensors, d / "model.safetensors")
    with pytest.raises(CkirError) as err:
        import_hf(d)
    assert _one_line(err) == (
        "model.safetensors: tensor 'model.layers.0.self_attn.q_proj.weight' has shape "
        "[64, 32], template llama expects [64, 64] (H*D, E)"
    )


def test_wrong_shape_packed(gpt2_dir: Path, copy_checkpoint) -> None:
    d = copy_checkpoint(gpt2_dir)
    tensors = _load(d / "model.safetensors")
    tensors["transformer.h.1.attn.c_attn.weight"] = torch.zeros(64, 128)
    _save(tensors, d / "model.safetensors")
    with pytest.raises(CkirError) as err:
        import_hf(d)
    assert _one_line(err) == (
        "model.safetensors: tensor 'transformer.h.1.attn.c_attn.weight' has shape [64, 128], "
        "template gpt2 expects [64, 192] (E, 3*E)"
    )


def test_wrong_dtype(llama_dir: Path, copy_checkpoint) -> None:
    d = copy_checkpoint(llama_dir)
    tensors = _load(d / "model.safetensors")
    tensors["model.norm.weight"] = torch.ones(64, dtype=torch.int64)
    _save(tensors, d / "model.safetensors")
    with pytest.raises(CkirError, match="'model.norm.weight' has dtype I64") as err:
        import_hf(d)
    _one_line(err)


def test_unmapped_tensor_is_an_error(llama_dir: Path, copy_checkpoint) -> None:
    """A tensor no weight uses would be silently dropped: an error naming it, unless
    --allow-unused (a glob) allows it; the template's ignore: patterns stay silent."""
    d = copy_checkpoint(llama_dir)
    tensors = _load(d / "model.safetensors")
    tensors["model.extra.weight"] = torch.zeros(3)
    tensors["model.layers.0.self_attn.rotary_emb.inv_freq"] = torch.zeros(8)  # ignored
    _save(tensors, d / "model.safetensors")
    with pytest.raises(CkirError) as err:
        import_hf(d)
    assert _one_line(err) == (
        "model.safetensors: 1 tensor(s) not used by template llama: 'model.extra.weight'. "
        "A model built without them computes something else than the checkpoint (is it the "
        "right template?); if they are not needed, allow them with --allow-unused "
        "'model.extra.weight' (Python: allow_unused=[...])"
    )
    module, warnings = import_hf(d, allow_unused=["model.extra.*", "nothing.*"])
    assert warnings == [
        "model.safetensors: tensor 'model.extra.weight' is not used by template llama; "
        "left out as --allow-unused 'model.extra.*' allows",
        "--allow-unused 'nothing.*' matches no unused tensor",
    ]
    _roundtrip(module)


def test_config_missing_key(llama_dir: Path, copy_checkpoint) -> None:
    d = copy_checkpoint(llama_dir)
    cfg = json.loads((d / "config.json").read_text())
    del cfg["intermediate_size"]
    (d / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CkirError) as err:
        import_hf(d)
    msg = _one_line(err)
    assert "config.json: missing key 'intermediate_size'" in msg
    assert "template llama" in msg and "symbol I" in msg and "llama.yaml" in msg


def test_config_defaults_are_explicit(llama_dir: Path, copy_checkpoint) -> None:
    """KV defaults to H and D to E/H when the keys are absent (written in llama.yaml)."""
    d = copy_checkpoint(llama_dir)
    cfg = json.loads((d / "config.json").read_text())
    del cfg["num_key_value_heads"], cfg["head_dim"]
    (d / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(
        CkirError, match="has shape \\[32, 64\\], template llama expects \\[64, 64\\]"
    ):
        import_hf(d)  # KV = H = 4 now, but the checkpoint has 2 kv heads


def test_config_bad_json_and_missing(llama_dir: Path, copy_checkpoint, tmp_path: Path) -> None:
    d = copy_checkpoint(llama_dir)
    (d / "config.json").write_text("{")
    with pytest.raises(CkirError, match="config.json: not valid JSON"):
        import_hf(d)
    (d / "config.json").unlink()
    with pytest.raises(CkirError, match="config.json: not found"):
        import_hf(d)
    with pytest.raises(CkirError, match="not a directory"):
        import_hf(tmp_path / "nope")


def test_unknown_model_type(llama_dir: Path, copy_checkpoint) -> None:
    d = copy_checkpoint(llama_dir)
    cfg = json.loads((d / "config.json").read_text())
    cfg["model_type"] = "mamba"
    (d / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CkirError, match="model_type 'mamba' is not served by any template") as e:
        import_hf(d)
    _one_line(e)
    module, warnings = import_hf(d, "llama")  # explicit template: accepted with a warning
    assert len(warnings) == 1 and "mamba" in warnings[0]


def test_unsupported_config_value(qwen2_tied_dir: Path, copy_checkpoint) -> None:
    d = copy_checkpoint(qwen2_tied_dir)
    cfg = json.loads((d / "config.json").read_text())
    cfg["hidden_act"] = "gelu"
    (d / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CkirError, match="key 'hidden_act' is 'gelu'; template qwen2 supports only"):
        import_hf(d)
    cfg["hidden_act"] = "silu"
    cfg["use_sliding_window"] = True
    (d / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(CkirError, match="sliding-window attention is not supported"):
        import_hf(d)


def test_template_typo_surfaces_as_one_line(llama_dir: Path, tmp_path: Path) -> None:
    repo = Path(__file__).resolve().parent.parent / "templates" / "llama.yaml"
    text = repo.read_text().replace("op: m = swiglu(gate, up)", "op: m = swigul(gate, up)")
    bad = tmp_path / "typo.yaml"
    bad.write_text(text)
    with pytest.raises(CkirError) as err:
        import_hf(llama_dir, bad)
    msg = _one_line(err)
    assert "typo.yaml" in msg and "unknown op kind 'swigul'" in msg


# --------------------------------------------------------------------------- a new template

RENAMED_TEMPLATE = """\
# A Llama variant with its own tensor names and config keys: no code change needed.
name: renamed
model_types: [renamed_llama]
symbols:
  E: d_model
  H: n_heads
  KV: {key: n_kv_heads, default: H}
  D: {expr: E / H}
  I: ffn_dim
  L: n_layers
  V: n_vocab
  C: max_seq_len
params:
  eps: {key: norm_eps, type: float}
  theta: {key: rope_base, type: float, default: 10000.0}
  tied: {key: share_embeddings, type: bool, default: false}
weights:
  embed:
    shape: [V, E]
    hf: tok_embeddings.weight
  final_norm:
    shape: [E]
    hf: norm.scale
  lm_head:
    - if: tied
      shape: [V, E]
      tied_to: embed
    - if: not tied
      shape: [V, E]
      hf: output.weight
layer_weights:
  attn_norm:   {shape: [E],      hf: "blocks.{i}.attn_norm.scale"}
  attn.wq:     {shape: [H*D, E], hf: "blocks.{i}.attn.query"}
  attn.wk:     {shape: [KV*D, E], hf: "blocks.{i}.attn.key"}
  attn.wv:     {shape: [KV*D, E], hf: "blocks.{i}.attn.value"}
  attn.wo:     {shape: [E, H*D], hf: "blocks.{i}.attn.out"}
  mlp_norm:    {shape: [E],      hf: "blocks.{i}.ffn_norm.scale"}
  mlp.gate:    {shape: [I, E],   hf: "blocks.{i}.ffn.w1"}
  mlp.up:      {shape: [I, E],   hf: "blocks.{i}.ffn.w3"}
  mlp.down:    {shape: [E, I],   hf: "blocks.{i}.ffn.w2"}
header:
  inputs:
    tokens: {shape: [T], dtype: i32}
  ops:
    - {op: x = embed(tokens), weights: [embed], shape: [T, E]}
  yield: [x]
body:
  repeat: L
  args: [x]
  ops:
    - {op: h = rmsnorm(x), weights: [attn_norm], attrs: {eps: $eps}, shape: [T, E]}
    - {op: q = linear(h), weights: [attn.wq], shape: [T, H*D]}
    - {op: k = linear(h), weights: [attn.wk], shape: [T, KV*D]}
    - {op: v = linear(h), weights: [attn.wv], shape: [T, KV*D]}
    - op: qr, kr = rope(q, k)
      attrs: {theta: $theta, heads: H, kv_heads: KV, head_dim: D}
      shapes: [[T, H*D], [T, KV*D]]
    - op: a = attention(qr, kr, v)
      attrs: {heads: H, kv_heads: KV, head_dim: D, causal: true}
      shape: [T, H*D]
    - {op: o = linear(a), weights: [attn.wo], shape: [T, E]}
    - {op: "x1 = add(x, o)", shape: [T, E]}
    - {op: h2 = rmsnorm(x1), weights: [mlp_norm], attrs: {eps: $eps}, shape: [T, E]}
    - {op: gate = linear(h2), weights: [mlp.gate], shape: [T, I]}
    - {op: up = linear(h2), weights: [mlp.up], shape: [T, I]}
    - {op: "m = swiglu(gate, up)", shape: [T, I]}
    - {op: d = linear(m), weights: [mlp.down], shape: [T, E]}
    - {op: "x2 = add(x1, d)", shape: [T, E]}
  yield: [x2]
footer:
  args: [x]
  ops:
    - {op: h = rmsnorm(x), weights: [final_norm], attrs: {eps: $eps}, shape: [T, E]}
    - {op: logits = lm_head(h), weights: [lm_head], shape: [T, V]}
  output: [logits]
"""

_TENSOR_RENAMES = [
    (r"model\.embed_tokens\.weight", "tok_embeddings.weight"),
    (r"model\.norm\.weight", "norm.scale"),
    (r"lm_head\.weight", "output.weight"),
    (r"model\.layers\.(\d+)\.input_layernorm\.weight", r"blocks.\1.attn_norm.scale"),
    (r"model\.layers\.(\d+)\.self_attn\.q_proj\.weight", r"blocks.\1.attn.query"),
    (r"model\.layers\.(\d+)\.self_attn\.k_proj\.weight", r"blocks.\1.attn.key"),
    (r"model\.layers\.(\d+)\.self_attn\.v_proj\.weight", r"blocks.\1.attn.value"),
    (r"model\.layers\.(\d+)\.self_attn\.o_proj\.weight", r"blocks.\1.attn.out"),
    (r"model\.layers\.(\d+)\.post_attention_layernorm\.weight", r"blocks.\1.ffn_norm.scale"),
    (r"model\.layers\.(\d+)\.mlp\.gate_proj\.weight", r"blocks.\1.ffn.w1"),
    (r"model\.layers\.(\d+)\.mlp\.up_proj\.weight", r"blocks.\1.ffn.w3"),
    (r"model\.layers\.(\d+)\.mlp\.down_proj\.weight", r"blocks.\1.ffn.w2"),
]
_CONFIG_RENAMES = {
    "hidden_size": "d_model",
    "num_attention_heads": "n_heads",
    "num_key_value_heads": "n_kv_heads",
    "intermediate_size": "ffn_dim",
    "num_hidden_layers": "n_layers",
    "vocab_size": "n_vocab",
    "max_position_embeddings": "max_seq_len",
    "rms_norm_eps": "norm_eps",
    "tie_word_embeddings": "share_embeddings",
}


def _rename(name: str) -> str:
    for pattern, repl in _TENSOR_RENAMES:
        if re.fullmatch(pattern, name):
            return re.sub(pattern, repl, name)
    raise AssertionError(f"no rename for {name}")


def _strip_hf(text: str) -> list[str]:
    """The module text without model header line and HF names (what a rename changes)."""
    lines = text.splitlines()[2:]
    return [re.sub(r' hf "[^"]*"', "", line) for line in lines]


def test_new_template_for_renamed_variant(llama_dir: Path, tmp_path: Path) -> None:
    d = tmp_path / llama_dir.name
    d.mkdir()
    tensors = _load(llama_dir / "model.safetensors")
    _save({_rename(k): v for k, v in tensors.items()}, d / "model.safetensors")
    cfg = json.loads((llama_dir / "config.json").read_text())
    new_cfg = {_CONFIG_RENAMES.get(k, k): v for k, v in cfg.items()}
    new_cfg["model_type"] = "renamed_llama"
    new_cfg["rope_base"] = cfg["rope_parameters"]["rope_theta"]
    del new_cfg["rope_parameters"], new_cfg["head_dim"]
    (d / "config.json").write_text(json.dumps(new_cfg))
    tpl = tmp_path / "templates" / "renamed.yaml"
    tpl.parent.mkdir()
    tpl.write_text(RENAMED_TEMPLATE)

    module, warnings = import_hf(d, template=tpl)
    assert warnings == []
    text = _roundtrip(module)
    model = _model(module)
    assert model.arch.data == "renamed"
    assert model.weights()["layers.{i}.attn.wq"].hf_name == "blocks.{i}.attn.query"
    reference = _print(import_hf(llama_dir)[0])
    assert _model(import_hf(llama_dir)[0]).symbol_values() == model.symbol_values()
    assert _strip_hf(text) == _strip_hf(reference)

    # the repo templates do not know it: selection by model_type fails, naming it
    with pytest.raises(CkirError, match="model_type 'renamed_llama' is not served"):
        import_hf(d)
    # a typo in the new template names the template file and the op
    tpl.write_text(RENAMED_TEMPLATE.replace("x1 = add(x, o)", "x1 = add(x, oo)"))
    with pytest.raises(CkirError) as err:
        import_hf(d, template=tpl)
    msg = _one_line(err)
    assert "renamed.yaml" in msg and "x1 = add(x, oo)" in msg and "undefined value 'oo'" in msg
