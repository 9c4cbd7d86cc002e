"""Phi GGUF files (llama.cpp's ``phi2`` architecture) and the ``@expr:`` source.

llama.cpp's converter stores phi's partial rotary width as a count of rotary
dimensions per head (``phi2.rope.dimension_count``); transformers' config has the
fraction ``partial_rotary_factor``.  phi.yaml's ``gguf.config`` turns one into the
other with ``@expr:`` (ckir/metadata_expr.py).  The file is written by hand in
llama.cpp's layout (its tensor names, separate q/k/v in rotate-half order, the LM
head's bias as ``output.bias``); the oracle is transformers on the checkpoint.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
pytest.importorskip("gguf")

from test_parity import assert_close, assert_decode_matches  # noqa: E402
from test_templates_phi3_starcoder2 import hf_model, make_model  # noqa: E402

import ckir  # noqa: E402
from ckir import metadata_expr  # noqa: E402
from ckir.errors import CkirError  # noqa: E402
from ckir.frontend import import_model  # noqa: E402
from ckir.template_loader import load_template  # noqa: E402

#: HF module under model.layers.{i} -> llama.cpp's phi2 tensor name
_BLOCK = {
    "input_layernorm": "attn_norm",
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.dense": "attn_output",
    "mlp.fc1": "ffn_up",
    "mlp.fc2": "ffn_down",
}
_TOP = {
    "model.embed_tokens": "token_embd",
    "model.final_layernorm": "output_norm",
    "lm_head": "output",
}


def phi2_gguf(hf_dir: Path, out: Path, **meta_changes: object) -> Path:
    """A phi2 GGUF file of a tiny phi folder, as llama.cpp's converter lays it out."""
    from gguf_fixtures import write_gguf
    from safetensors.numpy import load_file

    c = json.loads((hf_dir / "config.json").read_text())
    heads = c["num_attention_heads"]
    head_dim = c["hidden_size"] // heads
    factor = (c.get("rope_parameters") or {}).get("partial_rotary_factor") or c.get(
        "partial_rotary_factor", 0.5
    )
    meta: dict[str, object] = {
        "phi2.context_length": c["max_position_embeddings"],
        "phi2.embedding_length": c["hidden_size"],
        "phi2.feed_forward_length": c["intermediate_size"],
        "phi2.block_count": c["num_hidden_layers"],
        "phi2.attention.head_count": heads,
        "phi2.attention.head_count_kv": c.get("num_key_value_heads") or heads,
        "phi2.attention.layer_norm_epsilon": float(c["layer_norm_eps"]),
        # the converter's count: int(partial_rotary_factor * head_dim), as transformers rotates
        "phi2.rope.dimension_count": int(factor * head_dim),
        "phi2.vocab_size": c["vocab_size"],
        "general.name": "tiny",
    }
    meta.update(meta_changes)
    tensors: dict[str, tuple[np.ndarray, str]] = {}
    for name, arr in load_file(str(hf_dir / "model.safetensors")).items():
        module, leaf = name.rsplit(".", 1)
        if module.startswith("model.layers."):
            _, _, layer, rest = module.split(".", 3)
            gname = f"blk.{layer}.{_BLOCK[rest]}.{leaf}"
        else:
            gname = f"{_TOP[module]}.{leaf}"
        tensors[gname] = (arr.astype(np.float32), "F32")
    return write_gguf(out, "phi2", meta, tensors)


@pytest.fixture(scope="module")
def phi_dirs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("phi2_gguf")
    return {key: make_model(key, root / key) for key in ("phi_gqa", "phi_mha")}


@pytest.mark.parametrize("key", ["phi_gqa", "phi_mha"])
def test_phi2_file_matches_transformers(key: str, phi_dirs, tmp_path: Path) -> None:
    """Rotary widths 4 of 12 (GQA, factor 0.4) and 4 of 8 (MHA, 0.5) come back from the
    counts, and prefill and decode match transformers on the checkpoint."""
    path = phi2_gguf(phi_dirs[key], tmp_path / "m.gguf")
    module, warnings, _ = import_model(path)
    assert warnings == []
    assert "partial_rotary_factor" in str(module)
    model = ckir.compile(path, tmp_path / "b", max_context=48)
    try:
        hf = hf_model(phi_dirs[key])
        rng = np.random.default_rng(3)
        tokens = rng.integers(0, model.vocab_size, size=11)
        model.reset()
        ours = model.prefill(tokens)
        with torch.no_grad():
            ref = hf(torch.tensor(tokens[None, :])).logits[0].numpy()
        assert_close(ours, ref, f"{key} phi2 GGUF prefill")
        steps = rng.integers(0, model.vocab_size, size=5)
        assert_decode_matches(model, hf, tokens[:6], steps, f"{key} phi2 GGUF")
    finally:
        model.close()


def test_missing_rotary_count_falls_back_to_the_template_default(phi_dirs, tmp_path: Path) -> None:
    """An ``@expr:`` whose key is absent gives no value: the template's default (0.5)."""
    import gguf
    from gguf_fixtures import write_gguf

    full = phi2_gguf(phi_dirs["phi_gqa"], tmp_path / "full.gguf")
    reader = gguf.GGUFReader(full)
    meta = {
        k: f.contents()
        for k, f in reader.fields.items()
        if k.startswith("phi2.") and k != "phi2.rope.dimension_count"
    }
    tensors = {
        t.name: (np.asarray(t.data, np.float32).reshape([int(d) for d in reversed(t.shape)]), "F32")
        for t in reader.tensors
    }
    module, _, _ = import_model(write_gguf(tmp_path / "no_count.gguf", "phi2", meta, tensors))
    assert "partial_rotary_factor = 5.000000e-01" in str(module)


def test_non_numeric_metadata_is_named(phi_dirs, tmp_path: Path) -> None:
    path = phi2_gguf(phi_dirs["phi_mha"], tmp_path / "m.gguf", **{"phi2.rope.dimension_count": "4"})
    with pytest.raises(CkirError, match=r"m\.gguf: metadata 'phi2\.rope\.dimension_count' is '4'"):
        import_model(path)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a.b +", "is not an arithmetic expression"),
        ("a.b ** 2", "only numbers, metadata keys"),
        ("f(a.b)", "only numbers, metadata keys"),
        ("2 * 3", "names no metadata key"),
    ],
)
def test_bad_expressions_are_refused_at_template_load(
    text: str, message: str, tmp_path: Path
) -> None:
    from ckir.template import TEMPLATES_DIR

    original = (TEMPLATES_DIR / "phi.yaml").read_text()
    good = next(line for line in original.splitlines() if "@expr:" in line)
    text_yaml = original.replace(good, f'    partial_rotary_factor: "@expr:{text}"')
    bad = tmp_path / "phi.yaml"
    bad.write_text(text_yaml)
    with pytest.raises(CkirError, match=f"gguf.config.partial_rotary_factor.*{message}"):
        load_template(bad)


def test_expression_values() -> None:
    tree, keys = metadata_expr.parse("x.a * (y.b - 2) / -z")
    assert keys == ("x.a", "y.b", "z")
    assert metadata_expr.evaluate(tree, [3.0, 6.0, 4.0]) == -3.0
