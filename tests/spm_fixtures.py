"""Tiny SentencePiece-style vocabularies for tokenizer tests, trained with ``tokenizers``.

``train_spm_bpe()`` trains a small BPE on a multilingual corpus and lays its
vocabulary out as SentencePiece (and llama.cpp's converter) does: ``<unk>``,
``<s>``, ``</s>``, the 256 byte tokens ``<0x00>`` .. ``<0xFF>``, the merged
pieces by merge rank (score ``-rank``), then the single characters (lower
scores still).  From it:

* ``spm_metadata(vocab, ...)``: the ``tokenizer.ggml.*`` keys of a GGUF file
  with ``tokenizer.ggml.model = llama`` (tokens, scores, token types, ids, flags).
* ``write_bpe_folder(dir, vocab, style=...)``: a HF folder (``tokenizer.json`` +
  ``tokenizer_config.json``) as transformers saves a Llama-style tokenizer
  (``Metaspace`` prefix, byte fallback) or a Gemma-style one (spaces replaced
  by a normalizer, no prefix).
* ``write_unigram_folder(dir, ...)``: a Unigram model with byte fallback.

Characters outside the training corpus (emoji, most of Unicode) have no piece,
so they exercise byte fallback.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

SPECIALS = ("<unk>", "<s>", "</s>")
BYTE_TOKENS = tuple(f"<0x{b:02X}>" for b in range(256))

CORPUS = [
    "The quick brown fox jumps over the lazy dog. The dog sleeps in the sun.",
    "Hello world! Hello there, how are you today? I am fine, thank you very much.",
    "Über die Brücke gehen wir, schöne Grüße aus München. Die Straße ist groß und schön.",
    "我们今天去北京，中文字符很有意思。北京是中国的首都，我们喜欢中文。",
    "日本語のテキストです。東京は日本の首都です。こんにちは世界、ありがとう。",
    "def main():\n    return 42  # the answer\n",
    "Numbers 1234 and 2026, prices $3.50 and 7%.",
]

#: a multilingual text: English, German umlauts, Chinese, Japanese, emoji and a
#: character no piece covers (byte fallback), leading / repeated spaces, newlines
TEXTS = [
    "Hello world! The quick brown fox.",
    "Schöne Grüße aus München: die Straße ist groß.",
    "我们今天去北京。中文字符",
    "日本語のテキスト、東京。",
    "emoji 🤗🚀👩‍👩‍👧 ok",
    "Ǆ ⅲ ∰ outside the vocabulary",
    "  two leading spaces and   three inside",
    " one leading space",
    "new\nlines\n\nand a tab\there \n",
    "<s>special</s> tokens <unk> in text",
    "trailing space ",
    "",
]


@dataclass(frozen=True)
class SpmVocab:
    """A SentencePiece-ordered vocabulary and the merges it was trained with."""

    tokens: list[str]
    scores: list[float]
    types: list[int]  # GGUF token types: 1 normal, 2 unknown, 3 control, 6 byte
    merges: list[tuple[str, str]]

    @property
    def ids(self) -> dict[str, int]:
        return {t: i for i, t in enumerate(self.tokens)}


@lru_cache(maxsize=4)
def train_spm_bpe(vocab_size: int = 600) -> SpmVocab:
    """Train a BPE (spaces as ``▁``, words not crossed) and order it as SentencePiece
    (trained once per size; callers must not change the lists)."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="always", split=True)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=list(SPECIALS), show_progress=False
    )
    tok.train_from_iterator(CORPUS * 20, trainer)
    model = json.loads(tok.to_str())["model"]
    merges = [tuple(m) for m in model["merges"]]
    merged: list[str] = []
    for left, right in merges:
        if left + right not in merged:
            merged.append(left + right)
    chars = [
        t
        for t in sorted(model["vocab"], key=model["vocab"].get)
        if t not in SPECIALS and t not in merged
    ]
    tokens = [*SPECIALS, *BYTE_TOKENS, *merged, *chars]
    n = len(merged)
    scores = [0.0] * (len(SPECIALS) + 256)
    scores += [-float(i) for i in range(n)] + [-float(n + i) for i in range(len(chars))]
    types = [2, 3, 3] + [6] * 256 + [1] * (n + len(chars))
    return SpmVocab(tokens, scores, types, merges)


def spm_metadata(vocab: SpmVocab, chat_template: str | None = None, **flags: Any) -> dict[str, Any]:
    """``tokenizer.ggml.*`` metadata of a SentencePiece (``llama``) GGUF vocabulary;
    ``flags`` set ``tokenizer.ggml.<flag>`` (``add_space_prefix=False``)."""
    kv: dict[str, Any] = {
        "tokenizer.ggml.model": "llama",
        "tokenizer.ggml.tokens": vocab.tokens,
        "tokenizer.ggml.scores": vocab.scores,
        "tokenizer.ggml.token_type": vocab.types,
        "tokenizer.ggml.bos_token_id": 1,
        "tokenizer.ggml.eos_token_id": 2,
        "tokenizer.ggml.unknown_token_id": 0,
        "tokenizer.ggml.add_bos_token": True,
        "tokenizer.ggml.add_eos_token": False,
        "tokenizer.ggml.add_space_prefix": True,
    }
    if chat_template is not None:
        kv["tokenizer.chat_template"] = chat_template
    kv.update({f"tokenizer.ggml.{k}": v for k, v in flags.items()})
    return kv


def write_bpe_folder(
    out: Path,
    vocab: SpmVocab,
    *,
    style: str = "llama",
    chat_template: str | None = None,
    tokenizer_class: str | None = None,
) -> Path:
    """A HF folder with a SentencePiece-style BPE ``tokenizer.json``.

    ``style="llama"``: ``Metaspace`` (prefix before the first piece), decoder
    strips it again; ``"gemma"``: a normalizer replaces spaces, no prefix;
    ``"no-prefix"``: ``Metaspace`` that never prefixes."""
    from tokenizers import (
        AddedToken,
        Tokenizer,
        decoders,
        models,
        normalizers,
        pre_tokenizers,
        processors,
    )

    tok = Tokenizer(
        models.BPE(vocab.ids, vocab.merges, unk_token="<unk>", byte_fallback=True, fuse_unk=True)
    )
    steps = [decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse()]
    if style == "llama":
        tok.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="first", split=False)
        steps.append(decoders.Strip(" ", 1, 0))
    elif style == "gemma":
        tok.normalizer = normalizers.Replace(" ", "\u2581")
    elif style == "no-prefix":
        tok.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="never", split=False)
    else:
        raise ValueError(style)
    tok.decoder = decoders.Sequence(steps)
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIALS])
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", 1)]
    )
    default_class = {"llama": "LlamaTokenizer", "gemma": "GemmaTokenizer"}.get(style)
    return _save(out, tok, tokenizer_class or default_class or "TokenizersBackend", chat_template)


def write_unigram_folder(out: Path, chat_template: str | None = None) -> Path:
    """A HF folder with a Unigram ``tokenizer.json`` (byte fallback, ``Metaspace``)."""
    from tokenizers import (
        AddedToken,
        Tokenizer,
        decoders,
        models,
        pre_tokenizers,
        processors,
        trainers,
    )

    trainer_tok = Tokenizer(models.Unigram())
    trainer_tok.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="always", split=True)
    trainer = trainers.UnigramTrainer(
        vocab_size=400,
        special_tokens=list(SPECIALS),
        unk_token="<unk>",
        show_progress=False,
    )
    trainer_tok.train_from_iterator(CORPUS * 20, trainer)
    pieces = [
        (p, s) for p, s in json.loads(trainer_tok.to_str())["model"]["vocab"] if p not in SPECIALS
    ]
    vocab = [(t, 0.0) for t in SPECIALS] + [(t, 0.0) for t in BYTE_TOKENS] + pieces
    tok = Tokenizer(models.Unigram(vocab, unk_id=0, byte_fallback=True))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="first", split=True)
    tok.decoder = decoders.Sequence(
        [
            decoders.Replace("\u2581", " "),
            decoders.ByteFallback(),
            decoders.Fuse(),
            decoders.Strip(" ", 1, 0),
        ]
    )
    tok.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIALS])
    tok.post_processor = processors.TemplateProcessing(
        single="$A </s>", pair="$A </s> $B </s>", special_tokens=[("</s>", 2)]
    )
    return _save(out, tok, "TokenizersBackend", chat_template)


def _save(out: Path, tok: Any, tokenizer_class: str, chat_template: str | None) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    tok.save(str(out / "tokenizer.json"))
    config: dict[str, Any] = {
        "tokenizer_class": tokenizer_class,
        "bos_token": "<s>",
        "eos_token": "</s>",
        "unk_token": "<unk>",
        "legacy": False,
    }
    if chat_template is not None:
        config["chat_template"] = chat_template
    (out / "tokenizer_config.json").write_text(json.dumps(config, indent=1))
    return out
