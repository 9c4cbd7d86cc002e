"""LongRoPE (rope_type longrope) against transformers, fp32, tiny random Phi-3 configs.

The phi3 template maps ``rope_parameters`` / ``rope_scaling`` {longrope,
short_factor, original_max_position_embeddings, factor, attention_factor} onto
graph.rope's ``ext_factors`` table; the lowering calls the rope_ext kernels.
transformers switches to the long factors once a sequence passes
original_max_position_embeddings (32 here, max_position_embeddings 64): ckir
compiles with max_context <= 32, where the short factors are exact, and refuses
more.  Oracles: prefill logits, decode logits with HF's KV cache and every
weight's gradient, within 1e-4 of the largest reference entry (test_parity's
and test_training's helpers).  llama.cpp's phi3 GGUF files of such checkpoints
(factors as the tensors rope_factors_short/long.weight) compile to the same model.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from test_parity import (  # noqa: E402
    assert_close,
    assert_decode_matches,
    assert_prefill_matches,
    compiled,
)
from test_templates_phi3_starcoder2 import hf_model, save_random_model  # noqa: E402
from test_training import assert_gradients_match  # noqa: E402

import ckir  # noqa: E402
from ckir.errors import CkirError  # noqa: E402
from ckir.frontend import import_model  # noqa: E402
from ckir.frontend.hf import import_hf  # noqa: E402

ORIGINAL = 32
MAX_CONTEXT = 32


def _factors(n: int, seed: int, high: float) -> list[float]:
    rng = np.random.default_rng(seed)
    return [float(v) for v in np.sort(1.0 + (high - 1.0) * rng.random(n))]


def _config(head_dim: int, **rope: object) -> dict[str, object]:
    """Odd sizes: 5 heads of ``head_dim`` over 1 kv head, intermediate 61, vocab 149."""
    return dict(
        hidden_size=5 * head_dim,
        num_attention_heads=5,
        num_key_value_heads=1,
        intermediate_size=61,
        num_hidden_layers=2,
        vocab_size=149,
        max_position_embeddings=2 * ORIGINAL,
        original_max_position_embeddings=ORIGINAL,
        bos_token_id=1,
        eos_token_id=2,
        pad_token_id=0,
        rope_scaling={
            "type": "longrope",
            "short_factor": _factors(head_dim // 2, 3, 6.0),
            "long_factor": _factors(head_dim // 2, 4, 40.0),
            **rope,
        },
    )


#: attention factor: from max_position_embeddings / original (sqrt(1 + ln 2 / ln 32)),
#: from a given factor, given outright
CASES: dict[str, dict[str, object]] = {
    "derived": _config(14),
    "factor": _config(10, factor=3.0),
    "attention_factor": _config(18, attention_factor=1.31),
}


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("longrope_models")
    return {
        key: save_random_model(transformers.Phi3Config(**kw), "Phi3ForCausalLM", root / key)
        for key, kw in CASES.items()
    }


@pytest.fixture(scope="module")
def builds(checkpoints: dict[str, Path], tmp_path_factory: pytest.TempPathFactory):
    yield from compiled(checkpoints, tmp_path_factory.mktemp("longrope_builds"), MAX_CONTEXT)


def test_the_short_factors_reach_graph_rope(checkpoints) -> None:
    module, _ = import_hf(checkpoints["derived"])
    rope = next(op for op in module.walk() if op.name == "graph.rope")
    assert rope.properties["rope_type"].data == "longrope"
    got = [float(v) for v in rope.properties["ext_factors"].get_values()]
    assert got == CASES["derived"]["rope_scaling"]["short_factor"]
    assert rope.properties["original_context"].value.data == ORIGINAL


@pytest.mark.parametrize("key", list(CASES))
def test_prefill_matches_hf(key: str, checkpoints, builds) -> None:
    model = builds[key]
    # the whole context: every position up to original_max_position_embeddings
    tokens = np.random.default_rng(1).integers(0, model.vocab_size, size=MAX_CONTEXT)
    assert_prefill_matches(model, hf_model(checkpoints[key]), tokens, key)


@pytest.mark.parametrize("key", list(CASES))
def test_decode_matches_hf(key: str, checkpoints, builds) -> None:
    rng = np.random.default_rng(2)
    model = builds[key]
    prompt = rng.integers(0, model.vocab_size, size=5)
    steps = rng.integers(0, model.vocab_size, size=MAX_CONTEXT - 5)
    assert_decode_matches(model, hf_model(checkpoints[key]), prompt, steps, key)


@pytest.mark.parametrize("key", ["derived", "attention_factor"])
def test_gradients_match_autograd(key: str, checkpoints, tmp_path: Path) -> None:
    model = ckir.compile(
        checkpoints[key], tmp_path / "build", modes=("prefill", "backward"), max_context=MAX_CONTEXT
    )
    assert_gradients_match(key, model, hf_model(checkpoints[key], train=True), tmp_path, size=23)
    model.close()


def test_a_context_past_the_original_is_refused(checkpoints, tmp_path: Path) -> None:
    with pytest.raises(CkirError) as info:
        ckir.compile(checkpoints["derived"], tmp_path / "build", max_context=ORIGINAL + 1)
    text = str(info.value)
    assert f"original_max_position_embeddings = {ORIGINAL}" in text
    assert f"compiled for {ORIGINAL + 1}" in text
    assert f"--max-context {ORIGINAL}" in text


def test_a_table_of_the_wrong_length_is_refused(checkpoints, tmp_path: Path) -> None:
    dst = tmp_path / "m"
    shutil.copytree(checkpoints["derived"], dst)
    config = json.loads((dst / "config.json").read_text())
    config["rope_parameters"]["short_factor"] = [1.0, 2.0]
    (dst / "config.json").write_text(json.dumps(config))
    with pytest.raises(CkirError, match="ext_factors has 2 values; .* need 7"):
        import_hf(dst)


def test_interpreter_equals_the_c_build(builds) -> None:
    """The plan interpreter's NumPy reference of rope_ext (ckir.reference.kernels) gives
    the C build's logits, prefill and decode."""
    from ckir.interp import PlanInterpreter

    model = builds["attention_factor"]
    interp = PlanInterpreter(model.build_dir)
    tokens = np.random.default_rng(6).integers(0, model.vocab_size, size=9)
    model.reset()
    assert_close(interp.prefill(tokens), model.prefill(tokens), "interpreter prefill")
    for token in (3, model.vocab_size - 1):
        assert_close(interp.decode(token), model.decode(token), "interpreter decode")


def _longrope_gguf(src: Path, out: Path, *, attn_factor: bool, drop: str = "") -> Path:
    """A phi3 GGUF file of a LongRoPE checkpoint as llama.cpp's converter writes one:
    the factors as F32 tensors ``rope_factors_short`` / ``rope_factors_long``, the
    original context and (``attn_factor``) the attention factor as metadata."""
    from gguf_fixtures import read_f32_gguf, write_gguf
    from test_templates_phi3_starcoder2 import PHI3_GGUF, hf_to_gguf

    meta, tensors = read_f32_gguf(hf_to_gguf(src, out.with_suffix(".base.gguf"), PHI3_GGUF), "phi3")
    config = json.loads((src / "config.json").read_text())
    rope = config.get("rope_parameters") or config["rope_scaling"]
    for kind in ("short", "long"):
        tensors[f"rope_factors_{kind}.weight"] = (
            np.asarray(rope[f"{kind}_factor"], np.float32),
            "F32",
        )
    tensors.pop(drop, None)
    meta["phi3.rope.scaling.original_context_length"] = ORIGINAL
    if attn_factor:  # the converter's value: sqrt(1 + ln(C / original) / ln(original))
        scale = config["max_position_embeddings"] / ORIGINAL
        meta["phi3.rope.scaling.attn_factor"] = float(
            rope.get("attention_factor") or np.sqrt(1 + np.log(scale) / np.log(ORIGINAL))
        )
    return write_gguf(out, "phi3", meta, tensors)


@pytest.mark.parametrize(
    ("key", "attn_factor"),
    [("derived", True), ("derived", False), ("attention_factor", True)],
)
def test_gguf_file_matches_hf(key: str, attn_factor: bool, checkpoints, tmp_path: Path) -> None:
    """llama.cpp's LongRoPE phi3 file: the short factors become graph.rope's table (the
    attention factor from the file's metadata, or derived as from an HF config), and
    prefill over the whole context matches transformers on the checkpoint."""
    path = _longrope_gguf(checkpoints[key], tmp_path / "m.gguf", attn_factor=attn_factor)
    module, _, _ = import_model(path)
    rope = next(op for op in module.walk() if op.name == "graph.rope")
    assert rope.properties["rope_type"].data == "longrope"
    config = json.loads((checkpoints[key] / "config.json").read_text())
    short = np.asarray(config["rope_parameters"]["short_factor"], np.float32)  # stored F32
    assert [float(v) for v in rope.properties["ext_factors"].get_values()] == short.tolist()
    with ckir.compile(path, tmp_path / "b", max_context=MAX_CONTEXT) as model:
        tokens = np.random.default_rng(8).integers(0, model.vocab_size, size=MAX_CONTEXT)
        assert_prefill_matches(model, hf_model(checkpoints[key]), tokens, f"{key} GGUF")


@pytest.mark.parametrize("drop", ["rope_factors_short.weight", "rope_factors_long.weight"])
def test_gguf_file_with_one_factor_table_is_refused(drop: str, checkpoints, tmp_path) -> None:
    path = _longrope_gguf(checkpoints["derived"], tmp_path / "m.gguf", attn_factor=True, drop=drop)
    with pytest.raises(CkirError, match="has no partner '" + drop.replace(".", r"\.")):
        import_model(path)


@pytest.mark.parametrize(
    "source", ["@longrope_factors:rope_factors_short.weight", "@longrope_factors:a,b,c"]
)
def test_a_longrope_source_without_two_tensors_is_refused_at_load(source: str, tmp_path) -> None:
    from ckir.template import TEMPLATES_DIR
    from ckir.template_loader import load_template

    original = (TEMPLATES_DIR / "phi3.yaml").read_text()
    good = next(line for line in original.splitlines() if "@longrope_factors:" in line)
    bad = tmp_path / "phi3.yaml"
    bad.write_text(original.replace(good, f'    rope_scaling: "{source}"'))
    with pytest.raises(CkirError, match="gguf.config.rope_scaling: .* must name two tensors"):
        load_template(bad)
