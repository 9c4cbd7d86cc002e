"""SentencePiece-style tokenizers: GGUF ``tokenizer.ggml.model = llama`` and HF folders
(BPE with byte fallback, Unigram), token for token against transformers.

Oracles: ``transformers.AutoTokenizer`` on the same GGUF file (``gguf_file=``) and
on the same HF folder; its ``generate_merges`` for the merges a vocabulary's
scores imply; its ``apply_chat_template`` for chat prompts.  The vocabularies are
trained here with the ``tokenizers`` library (tests/spm_fixtures.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("tokenizers")
pytest.importorskip("gguf")
transformers = pytest.importorskip("transformers")

from gguf_fixtures import write_gguf  # noqa: E402
from spm_fixtures import (  # noqa: E402
    BYTE_TOKENS,
    TEXTS,
    SpmVocab,
    spm_metadata,
    train_spm_bpe,
    write_bpe_folder,
    write_unigram_folder,
)

from ckir.errors import CkirError  # noqa: E402
from ckir.tokenizer import Tokenizer  # noqa: E402
from ckir.tokenizer_gguf import merges_from_scores  # noqa: E402

#: the special tokens bos, eos, unk of the fixture vocabularies
SPECIALS_123 = ("<s>", "</s>", "<unk>")

#: a chat template that writes BOS itself and has a generation prompt
TEMPLATE = (
    "{{ bos_token }}{% for m in messages %}"
    "{% if m['role'] == 'user' %}[INST] {{ m['content'] }} [/INST]"
    "{% else %} {{ m['content'] }}{{ eos_token }}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %} Answer:{% endif %}"
)

#: two turns and a question: English, German, Chinese, emoji (byte fallback)
CHAT = [
    {"role": "user", "content": "Grüße aus München! Wie geht's?"},
    {"role": "assistant", "content": "Gut, danke. 我们今天去北京 🤗"},
    {"role": "user", "content": " The quick brown fox?"},
]


@pytest.fixture(scope="module")
def vocab() -> SpmVocab:
    return train_spm_bpe()


def _model_keys(count: int) -> dict[str, Any]:
    """The llama.* keys transformers' GGUF loader reads for the config."""
    return {
        "llama.context_length": 64,
        "llama.embedding_length": 8,
        "llama.block_count": 1,
        "llama.feed_forward_length": 16,
        "llama.attention.head_count": 2,
        "llama.attention.head_count_kv": 2,
        "llama.rope.freq_base": 10000.0,
        "llama.rope.dimension_count": 4,
        "llama.attention.layer_norm_rms_epsilon": 1e-5,
        "llama.vocab_size": count,
    }


def _gguf(tmp: Path, vocab: SpmVocab, name: str = "spm.gguf", **flags: Any) -> Path:
    meta = {**_model_keys(len(vocab.tokens)), **spm_metadata(vocab, TEMPLATE, **flags)}
    return write_gguf(tmp / name, "llama", meta, {})


def _reference_gguf(path: Path) -> Any:
    return transformers.AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)


def _same_as(ours: Tokenizer, ref: Any, texts: list[str] = TEXTS) -> None:
    """encode (with and without BOS/EOS) and decode (with and without specials) agree."""
    for text in texts:
        ids = ours.encode(text)
        assert ids == ref.encode(text), text
        assert ours.encode(text, add_special_tokens=False) == ref.encode(
            text, add_special_tokens=False
        ), text
        assert ours.decode(ids) == ref.decode(ids), text
        assert ours.decode(ids, skip_special_tokens=True) == ref.decode(
            ids, skip_special_tokens=True
        ), text
        assert [ours.id_to_token(i) for i in ids] == ref.convert_ids_to_tokens(ids), text


def _byte_fallback_fires(tok: Tokenizer) -> None:
    ids = tok.encode("🤗", add_special_tokens=False)
    # U+1F917 has no piece: its four UTF-8 bytes as byte tokens (after the prefix ▁)
    assert [tok.id_to_token(i) for i in ids][-4:] == ["<0xF0>", "<0x9F>", "<0xA4>", "<0x97>"]
    assert tok.decode(ids).strip() == "🤗"


# --------------------------------------------------------------------------- GGUF


def test_merges_from_scores_match_transformers(vocab: SpmVocab) -> None:
    from transformers.tokenization_utils_base import generate_merges

    ids = {t: i for i, t in enumerate(vocab.tokens)}
    want = generate_merges(ids, dict(zip(vocab.tokens, vocab.scores, strict=True)))
    got = merges_from_scores(vocab.tokens, vocab.scores)
    assert got == [tuple(m) for m in want]
    assert len(got) > len(vocab.merges)  # every cut, not only the trained ones


def test_gguf_matches_transformers(tmp_path: Path, vocab: SpmVocab) -> None:
    path = _gguf(tmp_path, vocab)
    ours = Tokenizer.from_gguf(path)
    ref = _reference_gguf(path)
    assert ours.vocab_size == len(vocab.tokens) == len(ref)
    assert (ours.bos_id, ours.eos_id, ours.unk_id) == (1, 2, 0)
    assert (ours.bos_id, ours.eos_id) == (ref.bos_token_id, ref.eos_token_id)
    _same_as(ours, ref)
    _byte_fallback_fires(ours)
    # a multilingual text is mostly pieces, not bytes
    ids = ours.encode("Schöne Grüße aus München", add_special_tokens=False)
    assert len(ids) < len("Schöne Grüße aus München") / 2


def test_gguf_chat_ids_match_transformers(tmp_path: Path, vocab: SpmVocab) -> None:
    """encode_chat: the template writes BOS, encode adds none (no double BOS)."""
    path = _gguf(tmp_path, vocab)
    ours = Tokenizer.from_gguf(path)
    ref = _reference_gguf(path)
    for gen in (True, False):
        want = ref.apply_chat_template(CHAT, add_generation_prompt=gen, tokenize=True)
        if isinstance(want, dict) or hasattr(want, "input_ids"):
            want = want["input_ids"]
        got = ours.encode_chat(CHAT, add_generation_prompt=gen)
        assert got == list(want)
        assert got[0] == ours.bos_id and got[1] != ours.bos_id
        assert ours.apply_chat_template(CHAT, add_generation_prompt=gen) == (
            ref.apply_chat_template(CHAT, add_generation_prompt=gen, tokenize=False)
        )


def test_gguf_flags(tmp_path: Path, vocab: SpmVocab) -> None:
    """add_bos_token false / add_eos_token true, as transformers reads them."""
    path = _gguf(tmp_path, vocab, "flags.gguf", add_bos_token=False, add_eos_token=True)
    ours = Tokenizer.from_gguf(path)
    _same_as(ours, _reference_gguf(path), TEXTS[:3])
    assert ours.encode("a")[-1] == 2 and ours.encode("a")[0] != 1
    # no add_bos_token key: BOS is added (llama.cpp's default for SentencePiece)
    meta = {**_model_keys(len(vocab.tokens)), **spm_metadata(vocab)}
    del meta["tokenizer.ggml.add_bos_token"]
    path = write_gguf(tmp_path / "nobos.gguf", "llama", meta, {})
    ours = Tokenizer.from_gguf(path)
    assert ours.encode("a")[0] == 1
    _same_as(ours, _reference_gguf(path), TEXTS[:3])


def test_gguf_without_space_prefix_matches_the_file(tmp_path: Path, vocab: SpmVocab) -> None:
    """add_space_prefix = false: no ``▁`` before the text.  transformers' GGUF loader
    ignores the key, so the oracle is transformers on a tokenizer.json that says
    the same (Metaspace that never prefixes)."""
    ours = Tokenizer.from_gguf(_gguf(tmp_path, vocab, "np.gguf", add_space_prefix=False))
    ref = transformers.AutoTokenizer.from_pretrained(
        str(write_bpe_folder(tmp_path / "np", vocab, style="no-prefix"))
    )
    hello = ours.encode("Hello", add_special_tokens=False)
    assert not ours.id_to_token(hello[0]).startswith("\u2581")
    for text in TEXTS:
        ids = ours.encode(text)
        assert [ours.id_to_token(i) for i in ids] == ref.convert_ids_to_tokens(ref.encode(text)), (
            text
        )
        assert ours.decode(ids) == ref.decode(ids), text


def test_gguf_json_round_trip_and_stream(tmp_path: Path, vocab: SpmVocab) -> None:
    tok = Tokenizer.from_gguf(_gguf(tmp_path, vocab))
    again = Tokenizer.from_json(tok.to_json())
    assert (again.unk_id, again.bos_id, again.eos_id) == (0, 1, 2)
    for text in TEXTS:
        assert again.encode(text) == tok.encode(text)
    text = "Grüße 🤗 aus 東京 Ǆ"
    ids = tok.encode(text, add_special_tokens=False)
    stream = tok.stream_decoder()
    pieces = [stream.push(i) for i in ids]
    assert "".join(pieces) + stream.flush() == tok.decode(ids) == text
    assert all("\ufffd" not in p for p in pieces)


# --------------------------------------------------------------------------- HF folders


@pytest.mark.parametrize("style", ["llama", "gemma"])
def test_hf_bpe_folder_matches_transformers(tmp_path: Path, vocab: SpmVocab, style: str) -> None:
    d = write_bpe_folder(tmp_path / style, vocab, style=style, chat_template=TEMPLATE)
    ours = Tokenizer.from_hf_dir(d)
    ref = transformers.AutoTokenizer.from_pretrained(str(d))
    assert (ours.bos_id, ours.eos_id, ours.unk_id) == (1, 2, 0)
    _same_as(ours, ref)
    _byte_fallback_fires(ours)
    want = ref.apply_chat_template(CHAT, add_generation_prompt=True, tokenize=True)
    if isinstance(want, dict) or hasattr(want, "input_ids"):
        want = want["input_ids"]
    assert ours.encode_chat(CHAT) == list(want)


def test_hf_unigram_folder_matches_transformers(tmp_path: Path) -> None:
    d = write_unigram_folder(tmp_path / "uni", chat_template=TEMPLATE)
    assert json.loads((d / "tokenizer.json").read_text())["model"]["type"] == "Unigram"
    ours = Tokenizer.from_hf_dir(d)
    ref = transformers.AutoTokenizer.from_pretrained(str(d))
    _same_as(ours, ref)
    _byte_fallback_fires(ours)


@pytest.mark.parametrize(
    "name,kind",
    [
        ("tokenizer.model", "a SentencePiece model (protobuf)"),
        ("merges.txt", "a byte-level BPE vocabulary (vocab.json + merges.txt)"),
        ("vocab.txt", "a WordPiece vocabulary"),
    ],
)
def test_hf_folder_of_another_kind_is_refused(tmp_path: Path, name: str, kind: str) -> None:
    (tmp_path / name).write_bytes(b"\x0a\x03abc")
    with pytest.raises(CkirError) as err:
        Tokenizer.from_hf_dir(tmp_path)
    msg = str(err.value)
    assert "\n" not in msg
    assert msg.startswith(f"{tmp_path / name}: {kind}, a vocabulary kind ckir cannot read"), msg


def test_byte_tokens_are_laid_out_as_sentencepiece(vocab: SpmVocab) -> None:
    """The fixture itself: bytes 3..258, byte type; every trained merge's result a token."""
    assert vocab.tokens[3 : 3 + 256] == list(BYTE_TOKENS)
    assert set(vocab.types[3 : 3 + 256]) == {6}
    ids = vocab.ids
    assert all(left + right in ids for left, right in vocab.merges)


def test_gguf_vocabulary_saved_as_hf_files(tmp_path: Path, vocab: SpmVocab) -> None:
    """save_pretrained of a GGUF build writes tokenizer.json + tokenizer_config.json;
    transformers reads them back as the same tokenizer."""
    from ckir.backend.hf_export import tokenizer_files

    ours = Tokenizer.from_gguf(_gguf(tmp_path, vocab))
    out = tmp_path / "saved"
    out.mkdir()
    for name, data in tokenizer_files(ours).items():
        (out / name).write_bytes(data)
    config = json.loads((out / "tokenizer_config.json").read_text())
    assert (config["bos_token"], config["eos_token"], config["unk_token"]) == SPECIALS_123
    _same_as(ours, transformers.AutoTokenizer.from_pretrained(str(out)))
    assert Tokenizer.from_hf_dir(out).encode_chat(CHAT) == ours.encode_chat(CHAT)


# --------------------------------------------------------------------------- per-architecture


def _arch_keys(arch: str, count: int) -> dict[str, Any]:
    return {k.replace("llama.", f"{arch}.", 1): v for k, v in _model_keys(count).items()}


def _spaced_vocab_gguf(tmp: Path, vocab: SpmVocab, arch: str, random_scores: bool, **flags: Any):
    """A GGUF whose vocabulary also has tokens of real spaces ("  ", "   "), with
    the fixture's scores or scores that do not follow the merge order."""
    import random

    tokens = [*vocab.tokens, "  ", "   "]
    rnd = random.Random(0)
    if random_scores:
        scores = [rnd.uniform(-1000.0, 0.0) for _ in tokens]
    else:
        scores = [*vocab.scores, -5000.0, -5001.0]
    meta = {**_arch_keys(arch, len(tokens)), **spm_metadata(vocab, **flags)}
    meta["tokenizer.ggml.tokens"] = tokens
    meta["tokenizer.ggml.scores"] = scores
    meta["tokenizer.ggml.token_type"] = [*vocab.types, 1, 1]
    path = write_gguf(tmp / f"{arch}.gguf", arch, meta, {})
    return path, meta


def _ours(meta: dict, options: dict[str, str]) -> Tokenizer:
    from ckir.tokenizer_gguf import vocabulary_from_gguf

    v = vocabulary_from_gguf(meta, "x.gguf", options)
    return Tokenizer(v.backend, bos_id=v.bos_id, eos_id=v.eos_id, unk_id=v.unk_id)


SPACED = [*TEXTS, "a  b   c", "<s>  x</s> y"]


def _differs(a: Tokenizer, b: Tokenizer) -> bool:
    return any(a.encode(t) != b.encode(t) for t in SPACED)


def test_merges_by_order_and_visible_space_tokens(tmp_path: Path, vocab: SpmVocab) -> None:
    """``merges: order`` + ``space_tokens: visible`` (a vocabulary whose scores do not
    follow the merge order, spaces written as spaces: what transformers does for
    general.architecture = gemma).  transformers cannot load such a file's config,
    so the oracle is its GGUF tokenizer converter itself."""
    from transformers import TokenizersBackend
    from transformers.integrations.gguf import convert_gguf_tokenizer, get_gguf_tokenizer

    path, meta = _spaced_vocab_gguf(tmp_path, vocab, "gemma", True, add_space_prefix=False)
    arch, tokenizer_dict, config = get_gguf_tokenizer(str(path))
    backend, _ = convert_gguf_tokenizer(arch, tokenizer_dict)
    ref = TokenizersBackend(
        tokenizer_object=backend, **{k: v for k, v in config.items() if v is not None}
    )
    ours = _ours(meta, {"merges": "order", "space_tokens": "visible"})
    _same_as(ours, ref, SPACED)
    assert ours.encode("a  b", add_special_tokens=False) == ref.encode(
        "a  b", add_special_tokens=False
    )
    assert "\u2581\u2581" in [ours.id_to_token(i) for i in ours.encode("a  b")]
    assert _differs(ours, _ours(meta, {}))  # the options matter for this vocabulary


def test_space_prefix_every_text(tmp_path: Path, vocab: SpmVocab) -> None:
    """``space_prefix: every_text``: ▁ before every piece of text, as transformers
    reads general.architecture = phi3 files."""
    path, meta = _spaced_vocab_gguf(tmp_path, vocab, "phi3", False)
    ref = _reference_gguf(path)
    ours = _ours(meta, {"space_prefix": "every_text"})
    _same_as(ours, ref, SPACED)
    assert _differs(ours, _ours(meta, {}))
    # the plain llama reading of the same vocabulary keeps the real-space tokens unused
    path, meta = _spaced_vocab_gguf(tmp_path, vocab, "llama", False)
    _same_as(Tokenizer.from_gguf(path), _reference_gguf(path), SPACED)


def test_template_tokenizer_options(tmp_path: Path) -> None:
    """A template's gguf.tokenizer block reaches the GGUF tokenizer; bad ones are
    one-line template errors."""
    from ckir.template import TEMPLATES_DIR
    from ckir.tokenizer import gguf_tokenizer_options

    text = (TEMPLATES_DIR / "llama.yaml").read_text()
    assert "\ngguf:\n  architectures: [llama]" in text
    d = tmp_path / "templates"
    d.mkdir()
    block = (
        "\ngguf:\n  tokenizer: {merges: order, space_prefix: every_text}\n  architectures: [spm]"
    )
    (d / "spm.yaml").write_text(text.replace("\ngguf:\n  architectures: [llama]", block))
    assert gguf_tokenizer_options("spm", d) == {"merges": "order", "space_prefix": "every_text"}
    assert gguf_tokenizer_options("llama") == {}
    assert gguf_tokenizer_options("unserved", d) == {}
    (d / "spm.yaml").write_text(
        text.replace("\ngguf:\n  architectures: [llama]", block.replace("order", "random"))
    )
    from ckir.template_loader import load_template

    with pytest.raises(CkirError) as err:
        load_template(d / "spm.yaml")
    msg = str(err.value)
    assert "\n" not in msg and "gguf.tokenizer.merges" in msg and "'random' is not one of" in msg
