"""Helpers that write tiny GGUF files for tests (with ``gguf.GGUFWriter``).

``write_gguf(path, arch, metadata, tensors)`` writes any file: ``tensors``
maps a GGUF tensor name to a float32 array in row-major ``[out, in]`` order
and a GGUF type name (``F32``, ``F16``, ``BF16``, ``Q8_0``, ``Q4_0``,
``Q4_1``, ...; quantized with ``gguf.quants.quantize``; ``Q4_K``, ``Q5_K`` and
``Q6_K``, which the gguf package cannot quantize, with ``ckir.quant.quantize``).

``gguf_from_hf(hf_dir, path, ...)`` converts a tiny HF Llama or Qwen2
checkpoint (:func:`ckir.tools.zoo.make_tiny_model`) the way llama.cpp's converter
lays a file out: its metadata keys and tensor names, Llama's q/k rows
interleaved per head (:func:`permute_rows`), no ``output.weight`` when the
embedding is tied.  ``tokenizer_metadata()`` is a small byte-level BPE
vocabulary for tokenizer tests.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

#: HF tensor name (``{i}`` per layer) -> GGUF tensor name, for Llama and Qwen2
HF_TO_GGUF = {
    "model.embed_tokens.weight": "token_embd.weight",
    "model.norm.weight": "output_norm.weight",
    "lm_head.weight": "output.weight",
    "model.layers.{i}.input_layernorm.weight": "blk.{i}.attn_norm.weight",
    "model.layers.{i}.self_attn.q_proj.weight": "blk.{i}.attn_q.weight",
    "model.layers.{i}.self_attn.k_proj.weight": "blk.{i}.attn_k.weight",
    "model.layers.{i}.self_attn.v_proj.weight": "blk.{i}.attn_v.weight",
    "model.layers.{i}.self_attn.o_proj.weight": "blk.{i}.attn_output.weight",
    "model.layers.{i}.self_attn.q_norm.weight": "blk.{i}.attn_q_norm.weight",
    "model.layers.{i}.self_attn.k_norm.weight": "blk.{i}.attn_k_norm.weight",
    "model.layers.{i}.self_attn.q_proj.bias": "blk.{i}.attn_q.bias",
    "model.layers.{i}.self_attn.k_proj.bias": "blk.{i}.attn_k.bias",
    "model.layers.{i}.self_attn.v_proj.bias": "blk.{i}.attn_v.bias",
    "model.layers.{i}.self_attn.o_proj.bias": "blk.{i}.attn_output.bias",
    "model.layers.{i}.mlp.gate_proj.bias": "blk.{i}.ffn_gate.bias",
    "model.layers.{i}.mlp.up_proj.bias": "blk.{i}.ffn_up.bias",
    "model.layers.{i}.mlp.down_proj.bias": "blk.{i}.ffn_down.bias",
    "model.layers.{i}.post_attention_layernorm.weight": "blk.{i}.ffn_norm.weight",
    "model.layers.{i}.mlp.gate_proj.weight": "blk.{i}.ffn_gate.weight",
    "model.layers.{i}.mlp.up_proj.weight": "blk.{i}.ffn_up.weight",
    "model.layers.{i}.mlp.down_proj.weight": "blk.{i}.ffn_down.weight",
}


def permute_rows(w: np.ndarray, heads: int) -> np.ndarray:
    """What the converter does to Llama's q/k rows: per head, the rotate-half
    order ``[x0 .. x(D/2-1), y0 .. y(D/2-1)]`` becomes pairs ``[x0, y0, x1, y1, ...]``
    (``reshape(heads, 2, D/2, K).swapaxes(1, 2)``)."""
    n = w.shape[0]
    rest = w.shape[1:]
    return w.reshape(heads, 2, n // heads // 2, *rest).swapaxes(1, 2).reshape(n, *rest)


def _qtype(name: str) -> Any:
    import gguf

    return gguf.GGMLQuantizationType[name]


def add_metadata(writer: Any, metadata: Mapping[str, Any]) -> None:
    """Python values -> GGUF metadata: int -> UINT32 (negative: INT32), float -> FLOAT32,
    bool, str, lists of str / int / float.  ``(value, GGUFValueType)`` forces a type."""
    import gguf

    vt = gguf.GGUFValueType
    for key, value in metadata.items():
        if isinstance(value, tuple):
            writer.add_key_value(key, value[0], value[1])
        elif isinstance(value, bool):
            writer.add_bool(key, value)
        elif isinstance(value, int):
            writer.add_key_value(key, value, vt.UINT32 if value >= 0 else vt.INT32)
        elif isinstance(value, float):
            writer.add_float32(key, value)
        elif isinstance(value, str):
            writer.add_string(key, value)
        elif isinstance(value, list):
            writer.add_array(key, value)
        else:
            raise TypeError(f"metadata {key}: unsupported value {value!r}")


def write_gguf(
    path: Path,
    arch: str,
    metadata: Mapping[str, Any],
    tensors: Mapping[str, tuple[np.ndarray, str]],
) -> Path:
    """Write a GGUF file; tensors are ``name -> (float32 [out, in] array, GGUF type name)``."""
    import gguf

    path = Path(path)
    writer = gguf.GGUFWriter(path, arch)
    add_metadata(writer, metadata)
    for name, (arr, kind) in tensors.items():
        arr = np.ascontiguousarray(arr, dtype=np.float32)
        if kind == "F32":
            writer.add_tensor(name, arr)
        elif kind == "F16":
            writer.add_tensor(name, arr.astype(np.float16))
        elif kind in ("Q4_K", "Q5_K", "Q6_K"):
            from ckir import quant

            writer.add_tensor(name, quant.quantize(arr, kind.lower()), raw_dtype=_qtype(kind))
        else:
            data = gguf.quants.quantize(arr, _qtype(kind))
            writer.add_tensor(name, data, raw_dtype=_qtype(kind))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def read_f32_gguf(
    path: Path, arch: str
) -> tuple[dict[str, Any], dict[str, tuple[np.ndarray, str]]]:
    """``(metadata, tensors)`` of an all-F32 GGUF file, in :func:`write_gguf`'s form:
    the ``{arch}.`` metadata keys and every tensor with its shape (to edit and
    write back)."""
    import gguf

    reader = gguf.GGUFReader(path)
    meta = {k: f.contents() for k, f in reader.fields.items() if k.startswith(f"{arch}.")}
    tensors = {
        t.name: (
            np.asarray(t.data, np.float32).reshape([int(d) for d in reversed(list(t.shape))]),
            "F32",
        )
        for t in reader.tensors
    }
    return meta, tensors


def _hf_tensors(hf_dir: Path) -> dict[str, np.ndarray]:
    from safetensors.numpy import load_file

    tensors = load_file(str(hf_dir / "model.safetensors"))
    return {k: v.astype(np.float32) for k, v in tensors.items()}


def gguf_metadata_from_config(config: Mapping[str, Any], arch: str) -> dict[str, Any]:
    """The model metadata llama.cpp's converter writes for a Llama/Qwen2 config (and
    the like: a config with ``norm_epsilon`` instead of ``rms_norm_eps`` has LayerNorm,
    ``attention.layer_norm_epsilon``)."""
    heads = config["num_attention_heads"]
    head_dim = config.get("head_dim") or config["hidden_size"] // heads
    theta = config.get("rope_theta")
    if theta is None:
        theta = (config.get("rope_parameters") or {}).get("rope_theta", 10000.0)
    if "rms_norm_eps" in config:
        eps = {f"{arch}.attention.layer_norm_rms_epsilon": float(config["rms_norm_eps"])}
    else:
        eps = {f"{arch}.attention.layer_norm_epsilon": float(config["norm_epsilon"])}
    return {
        **eps,
        f"{arch}.context_length": config["max_position_embeddings"],
        f"{arch}.embedding_length": config["hidden_size"],
        f"{arch}.block_count": config["num_hidden_layers"],
        f"{arch}.feed_forward_length": config["intermediate_size"],
        f"{arch}.attention.head_count": heads,
        f"{arch}.attention.head_count_kv": config.get("num_key_value_heads") or heads,
        f"{arch}.rope.freq_base": float(theta),
        f"{arch}.rope.dimension_count": head_dim,
        f"{arch}.vocab_size": config["vocab_size"],
        "general.name": "tiny",
        # the converter writes the key/value widths when the config names head_dim
        **(
            {f"{arch}.attention.key_length": head_dim, f"{arch}.attention.value_length": head_dim}
            if config.get("head_dim")
            else {}
        ),
    }


def gguf_from_hf(
    hf_dir: Path,
    path: Path,
    *,
    arch: str | None = None,
    qtype: str = "F32",
    qtypes: Mapping[str, str] | None = None,
    permute: bool | None = None,
    drop: Iterable[str] = (),
    metadata: Mapping[str, Any] | None = None,
    drop_metadata: Iterable[str] = (),
    extra: Mapping[str, tuple[np.ndarray, str]] | None = None,
) -> Path:
    """Convert a tiny HF Llama/Qwen2 folder into a GGUF file at ``path``.

    ``qtype`` is the GGUF type of every 2-D tensor (norms and biases stay F32);
    ``qtypes`` overrides it per GGUF name (``{"token_embd.weight": "Q8_0"}``).
    ``permute`` (default: for Llama) interleaves q/k rows as the converter does.
    ``drop`` leaves GGUF tensors out; ``metadata`` adds or replaces keys and
    ``drop_metadata`` removes them; ``extra`` adds tensors.
    """
    hf_dir = Path(hf_dir)
    config = json.loads((hf_dir / "config.json").read_text())
    arch = arch or config["model_type"]
    if permute is None:
        permute = config["model_type"] in ("llama", "mistral")
    heads = config["num_attention_heads"]
    kv_heads = config.get("num_key_value_heads") or heads
    kv = gguf_metadata_from_config(config, arch)
    kv.update(metadata or {})
    for k in drop_metadata:
        kv.pop(k, None)
    layers = config["num_hidden_layers"]
    dropped = set(drop)
    out: dict[str, tuple[np.ndarray, str]] = {}
    for hf_name, arr in _hf_tensors(hf_dir).items():
        gname = None
        for pat, gpat in HF_TO_GGUF.items():
            for i in range(layers) if "{i}" in pat else [None]:
                name = pat if i is None else pat.replace("{i}", str(i))
                if name == hf_name:
                    gname = gpat if i is None else gpat.replace("{i}", str(i))
        if gname is None:
            raise KeyError(f"no GGUF name for {hf_name}")
        if gname in dropped:
            continue
        if permute and (".attn_q." in gname or ".attn_k." in gname):
            arr = permute_rows(arr, heads if ".attn_q." in gname else kv_heads)
        kind = (qtypes or {}).get(gname, qtype if arr.ndim == 2 else "F32")
        out[gname] = (arr, kind)
    if config.get("tie_word_embeddings") and "output.weight" in out:
        del out["output.weight"]
    out.update(extra or {})
    return write_gguf(path, arch, kv, out)


# ---------------------------------------------------------------------------
# tokenizer metadata
# ---------------------------------------------------------------------------


def byte_alphabet() -> list[str]:
    """GPT-2's byte-level alphabet: byte b -> a printable unicode character."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1))
    keep += list(range(0xAE, 0xFF + 1))
    chars: dict[int, str] = {b: chr(b) for b in keep}
    n = 0
    for b in range(256):
        if b not in chars:
            chars[b] = chr(256 + n)
            n += 1
    return [chars[b] for b in range(256)]


def tokenizer_metadata(
    merges: Sequence[str] = ("Ġ t", "h e", "Ġt he", "i n", "Ġ a"),
    specials: Sequence[str] = ("<|endoftext|>", "<|im_start|>", "<|im_end|>"),
    chat_template: str | None = None,
    **flags: Any,
) -> dict[str, Any]:
    """``tokenizer.ggml.*`` metadata: the special tokens first (control), then the 256
    byte characters, then one token per merge."""
    alphabet = byte_alphabet()
    tokens = list(specials) + alphabet + ["".join(m.split(" ")) for m in merges]
    types = [3] * len(specials) + [1] * (len(tokens) - len(specials))
    kv: dict[str, Any] = {
        "tokenizer.ggml.model": "gpt2",
        "tokenizer.ggml.pre": "gpt2",
        "tokenizer.ggml.tokens": tokens,
        "tokenizer.ggml.token_type": types,
        "tokenizer.ggml.merges": list(merges),
        "tokenizer.ggml.bos_token_id": 1 if len(specials) > 1 else 0,
        "tokenizer.ggml.eos_token_id": 2 if len(specials) > 2 else 0,
    }
    if chat_template is not None:
        kv["tokenizer.chat_template"] = chat_template
    kv.update({f"tokenizer.ggml.{k}": v for k, v in flags.items()})
    return kv
