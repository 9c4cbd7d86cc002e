"""Tokenizers for compiled models: text <-> token ids, streaming decode, chat templates.

Built on the ``tokenizers`` library (the tokenization itself runs in its Rust
core); ckir only assembles a tokenizer from what a checkpoint ships:

* ``Tokenizer.from_gguf(path)``: a GGUF file's ``tokenizer.ggml.*`` metadata,
  byte-level BPE (``tokenizer.ggml.model = gpt2``) or SentencePiece BPE
  (``llama``): :mod:`ckir.tokenizer_gguf`; ``tokenizer.chat_template``.
* ``Tokenizer.from_hf_dir(path)``: a HF folder's ``tokenizer.json`` (any model
  the ``tokenizers`` library reads: byte-level BPE, SentencePiece-style BPE with
  byte fallback, Unigram, WordPiece), with ``tokenizer_config.json`` (special
  tokens, chat template; or ``chat_template.jinja``) and ``config.json`` /
  ``generation_config.json`` for ids it does not name.  A folder with only a
  ``tokenizer.model`` (SentencePiece protobuf) or ``vocab.json`` + ``merges.txt``
  is refused, naming the file and the kind.

Chat templates are rendered by :mod:`ckir.chat_template`; ``encode_chat`` gives
the prompt ids as transformers' ``apply_chat_template(..., tokenize=True)`` does
(the template writes BOS itself: no special tokens are added).

::

    tok = Tokenizer.from_gguf("SmolLM2-135M-Instruct.Q4_1.gguf")
    ids = tok.encode_chat([{"role": "user", "content": "Hi"}])
    stream = tok.stream_decoder()
    for t in generated:
        print(stream.push(t), end="")
    print(stream.flush())

Every problem with the input files raises :class:`~ckir.errors.CkirError`
with one line naming the file and the key.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from ckir.errors import CkirError, one_line
from ckir.fileio import read_json_object

#: version of the ``Tokenizer.to_json`` text
SERIAL_FORMAT = 1


class StreamDecoder:
    """Incremental detokenization: ``push(id)`` returns only complete UTF-8 text.

    A token may end in the middle of a multi-byte character (an emoji spread
    over several byte tokens); such bytes are held back until the character is
    complete.  ``flush()`` returns whatever is still held (an incomplete tail
    decodes to U+FFFD).  Concatenating every ``push`` and the final ``flush``
    gives ``decode(all ids)``.

    New ids are decoded together with the ids returned just before them (the
    context), and only the text past the context's is returned: a decoder's
    edits that depend on the position (SentencePiece's ``▁`` -> space, with the
    text's first space dropped) then apply once, as in ``decode(all ids)``.
    """

    def __init__(self, tokenizer: Tokenizer, skip_special_tokens: bool = False) -> None:
        self._tok = tokenizer
        self._skip = skip_special_tokens
        self._ids: list[int] = []
        self._context = 0  # first id of the context decoded with the new ids
        self._start = 0  # first id not yet returned as text

    def _pending(self) -> str:
        """The text of the ids not yet returned (decoded after their context)."""
        ids = self._ids[self._context :]
        before = self._start - self._context
        full = self._tok.decode(ids, skip_special_tokens=self._skip)
        known = self._tok.decode(ids[:before], skip_special_tokens=self._skip) if before else ""
        return full[len(known) :] if full.startswith(known) else full

    def push(self, token_id: int) -> str:
        """Add one token id; the text it completes ('' while a character is incomplete)."""
        self._ids.append(int(token_id))
        text = self._pending()
        if not text or text.endswith("\ufffd"):
            return ""
        self._context, self._start = self._start, len(self._ids)
        return text

    def push_many(self, ids: Iterable[int]) -> str:
        """``push`` each id; the text they complete."""
        return "".join(self.push(i) for i in ids)

    def flush(self) -> str:
        """The text still held back (incomplete characters decode to U+FFFD)."""
        text = self._pending()
        self._context = self._start = len(self._ids)
        return text

    @property
    def ids(self) -> list[int]:
        """Every id pushed so far."""
        return list(self._ids)


class Tokenizer:
    """Text <-> token ids for one model (see the module docstring)."""

    def __init__(
        self,
        backend: Any,
        *,
        bos_id: int | None = None,
        eos_id: int | None = None,
        unk_id: int | None = None,
        pad_id: int | None = None,
        chat_template: str | None = None,
        source: str = "tokenizer",
    ) -> None:
        self.backend = backend  # a tokenizers.Tokenizer
        self.bos_id = bos_id
        self.eos_id = eos_id
        self.unk_id = unk_id
        self.pad_id = pad_id
        self.chat_template = chat_template
        self.source = source

    # -- construction -------------------------------------------------------
    @classmethod
    def from_gguf(cls, path: str | Path) -> Tokenizer:
        """The tokenizer stored in a GGUF file's ``tokenizer.ggml.*`` metadata."""
        from ckir.tokenizer_gguf import vocabulary_from_gguf

        path = Path(path)
        meta = _gguf_metadata(path)
        options = gguf_tokenizer_options(meta.get("general.architecture"))
        v = vocabulary_from_gguf(meta, path.name, options)
        return cls(
            v.backend,
            bos_id=v.bos_id,
            eos_id=v.eos_id,
            unk_id=v.unk_id,
            pad_id=v.pad_id,
            chat_template=v.chat_template,
            source=path.name,
        )

    @classmethod
    def from_hf_dir(cls, model_dir: str | Path) -> Tokenizer:
        """A HF folder's ``tokenizer.json`` (+ ``tokenizer_config.json``, chat template)."""
        return _tokenizer_from_hf_dir(Path(model_dir))

    @classmethod
    def from_path(cls, path: str | Path) -> Tokenizer:
        """``from_gguf`` for a file, ``from_hf_dir`` for a folder."""
        path = Path(path)
        return cls.from_gguf(path) if path.is_file() else cls.from_hf_dir(path)

    # -- serialization (the compile cache keeps GGUF tokenizers this way) ---
    def to_json(self) -> str:
        """The whole tokenizer as one JSON text (``from_json`` reads it back)."""
        return json.dumps(
            {
                "format": SERIAL_FORMAT,
                "backend": self.backend.to_str(),
                "bos_id": self.bos_id,
                "eos_id": self.eos_id,
                "unk_id": self.unk_id,
                "pad_id": self.pad_id,
                "chat_template": self.chat_template,
                "source": self.source,
            }
        )

    @classmethod
    def from_json(cls, text: str, name: str = "tokenizer") -> Tokenizer:
        """A tokenizer written by ``to_json``; ``name`` (a file) is named in errors."""
        from tokenizers import Tokenizer as Backend

        try:
            data = json.loads(text)
            if not isinstance(data, dict) or data.get("format") != SERIAL_FORMAT:
                raise ValueError(f"not a ckir tokenizer (format {SERIAL_FORMAT})")
            backend = Backend.from_str(data["backend"])
            return cls(
                backend,
                bos_id=data["bos_id"],
                eos_id=data["eos_id"],
                unk_id=data.get("unk_id"),
                pad_id=data.get("pad_id"),
                chat_template=data["chat_template"],
                source=data["source"],
            )
        except Exception as err:  # json, key and tokenizers errors
            raise CkirError(f"{name}: unreadable tokenizer ({one_line(err)})") from None

    # -- ids ----------------------------------------------------------------
    @property
    def vocab_size(self) -> int:
        """Number of ids (the vocabulary with added tokens)."""
        return int(self.backend.get_vocab_size(with_added_tokens=True))

    def token_to_id(self, token: str) -> int | None:
        return self.backend.token_to_id(token)

    def id_to_token(self, token_id: int) -> str | None:
        return self.backend.id_to_token(int(token_id))

    @property
    def bos_token(self) -> str | None:
        return self.id_to_token(self.bos_id) if self.bos_id is not None else None

    @property
    def eos_token(self) -> str | None:
        return self.id_to_token(self.eos_id) if self.eos_id is not None else None

    # -- text <-> ids -------------------------------------------------------
    def encode(self, text: str, add_special_tokens: bool = True) -> list[int]:
        """Token ids of ``text``; special tokens written in the text (``<|im_start|>``)
        map to their ids.  ``add_special_tokens`` adds BOS/EOS where the model asks for them."""
        if not isinstance(text, str):
            raise CkirError(f"{self.source}: encode needs a string, got {type(text).__name__}")
        return list(self.backend.encode(text, add_special_tokens=add_special_tokens).ids)

    def decode(self, ids: Sequence[int] | Iterable[int], skip_special_tokens: bool = False) -> str:
        """The text of ``ids`` (incomplete UTF-8 at the end decodes to U+FFFD)."""
        ids = [int(i) for i in ids]
        limit = self.vocab_size
        bad = next((i for i in ids if not 0 <= i < limit), None)
        if bad is not None:
            raise CkirError(f"{self.source}: token id {bad} is out of range [0, {limit})")
        return self.backend.decode(ids, skip_special_tokens=skip_special_tokens)

    def stream_decoder(self, skip_special_tokens: bool = False) -> StreamDecoder:
        """A :class:`StreamDecoder` for printing generated ids as they come."""
        return StreamDecoder(self, skip_special_tokens)

    # -- chat ---------------------------------------------------------------
    def apply_chat_template(
        self,
        messages: Sequence[Mapping[str, Any]],
        add_generation_prompt: bool = True,
        **kwargs: Any,
    ) -> str:
        """Render the model's chat template for ``messages`` (:mod:`ckir.chat_template`).

        ``messages`` is a list of ``{"role": ..., "content": ...}``; extra
        keyword arguments are passed to the template (``tools=...``).  The
        template also sees ``bos_token``, ``eos_token`` and, when the model
        names them, ``unk_token`` and ``pad_token``.
        """
        from ckir.chat_template import render_chat_template

        if self.chat_template is None:
            raise CkirError(f"{self.source}: has no chat template")
        tokens = {"bos_token": self.bos_token or "", "eos_token": self.eos_token or ""}
        for key, tid in (("unk_token", self.unk_id), ("pad_token", self.pad_id)):
            if tid is not None:
                tokens[key] = self.id_to_token(tid)
        return render_chat_template(
            self.chat_template,
            self.source,
            messages,
            add_generation_prompt=add_generation_prompt,
            **{**tokens, **kwargs},
        )

    def encode_chat(
        self,
        messages: Sequence[Mapping[str, Any]],
        add_generation_prompt: bool = True,
        **kwargs: Any,
    ) -> list[int]:
        """The token ids of the rendered chat template, without added BOS/EOS (the
        template writes them), as transformers' ``apply_chat_template(tokenize=True)``."""
        text = self.apply_chat_template(messages, add_generation_prompt, **kwargs)
        return self.encode(text, add_special_tokens=False)

    def __repr__(self) -> str:
        return (
            f"Tokenizer({self.source!r}, vocab={self.vocab_size}, bos={self.bos_id}, "
            f"eos={self.eos_id})"
        )


# ---------------------------------------------------------------------------
# GGUF
# ---------------------------------------------------------------------------


def _gguf_metadata(path: Path) -> dict[str, Any]:
    """Scalar and array metadata of a GGUF file (tensor data is not read)."""
    from ckir.frontend.gguf_file import metadata, open_gguf

    reader = open_gguf(path)
    return {
        key: metadata(reader, key, path.name)
        for key in reader.fields
        if key.startswith(("tokenizer.", "general.architecture"))
    }


def gguf_tokenizer_options(
    architecture: object, templates_dir: str | Path | None = None
) -> dict[str, str]:
    """The ``gguf.tokenizer`` options of the template serving ``architecture``
    (``general.architecture``); none when no template serves it (the vocabulary
    is still readable with the defaults: a template error is reported when the
    model is compiled)."""
    from ckir.template import select_gguf_template

    if not isinstance(architecture, str) or not architecture:
        return {}
    try:
        tpl = select_gguf_template(architecture, templates_dir=templates_dir)
    except CkirError:
        return {}
    return dict(tpl.gguf.tokenizer) if tpl.gguf is not None else {}


# ---------------------------------------------------------------------------
# HF folders
# ---------------------------------------------------------------------------


def _read_json(path: Path) -> dict[str, Any] | None:
    return read_json_object(path) if path.is_file() else None


def _token_text(value: Any) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, Mapping) and isinstance(value.get("content"), str):
        return value["content"]
    return None


def _first_id(value: Any) -> int | None:
    if isinstance(value, list):
        value = value[0] if value else None
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    return value


#: vocabulary files of HF folders without a ``tokenizer.json``, and what they hold
_OTHER_VOCABULARIES: tuple[tuple[str, str], ...] = (
    ("tokenizer.model", "a SentencePiece model (protobuf)"),
    ("merges.txt", "a byte-level BPE vocabulary (vocab.json + merges.txt)"),
    ("vocab.txt", "a WordPiece vocabulary"),
)


def _refuse_other_vocabulary(model_dir: Path) -> None:
    """A folder whose vocabulary is in a file ckir cannot read: one line naming it."""
    for name, kind in _OTHER_VOCABULARIES:
        if (model_dir / name).is_file():
            raise CkirError(
                f"{model_dir / name}: {kind}, a vocabulary kind ckir cannot read; it reads "
                "tokenizer.json (transformers writes one: "
                "AutoTokenizer.from_pretrained(folder).save_pretrained(folder))"
            )


def _tokenizer_from_hf_dir(model_dir: Path) -> Tokenizer:
    from tokenizers import Tokenizer as Backend

    if not model_dir.is_dir():
        raise CkirError(f"{model_dir}: not a directory")
    tj = model_dir / "tokenizer.json"
    if not tj.is_file():
        _refuse_other_vocabulary(model_dir)
        raise CkirError(f"{tj}: not found (ckir reads HF fast tokenizers, tokenizer.json)")
    try:
        backend = Backend.from_file(str(tj))
    except Exception as err:
        raise CkirError(f"{tj}: does not load ({one_line(err)})") from None
    cfg = _read_json(model_dir / "tokenizer_config.json") or {}
    model_cfg = _read_json(model_dir / "config.json") or {}
    gen_cfg = _read_json(model_dir / "generation_config.json") or {}

    def token_id(key: str, required: bool = True) -> int | None:
        text = _token_text(cfg.get(key))
        if text is not None:
            tid = backend.token_to_id(text)
            if tid is None and required:
                where = model_dir / "tokenizer_config.json"
                raise CkirError(f"{where}: {key} '{text}' is not in the vocabulary")
            return tid
        for source in (gen_cfg, model_cfg):
            tid = _first_id(source.get(f"{key}_id"))
            if tid is not None:
                return tid
        return None

    # chat_template.jinja, when present, wins over tokenizer_config.json (as in transformers)
    jinja = model_dir / "chat_template.jinja"
    template = jinja.read_text(encoding="utf-8") if jinja.is_file() else cfg.get("chat_template")
    if isinstance(template, list):  # [{"name": "default", "template": "..."}, ...]
        named = {t.get("name"): t.get("template") for t in template if isinstance(t, Mapping)}
        template = named.get("default")
    if template is not None and not isinstance(template, str):
        raise CkirError(f"{model_dir / 'tokenizer_config.json'}: chat_template is not a string")
    return Tokenizer(
        backend,
        bos_id=token_id("bos_token"),
        eos_id=token_id("eos_token"),
        # only offered to chat templates: one the vocabulary lacks is left out
        unk_id=token_id("unk_token", required=False),
        pad_id=token_id("pad_token", required=False),
        chat_template=template,
        source=model_dir.name,
    )
