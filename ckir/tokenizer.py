"""Tokenizers for compiled models: text <-> token ids, streaming decode, chat templates.

Built on the ``tokenizers`` library (the tokenization itself runs in its Rust
core); this module only assembles a tokenizer from what a checkpoint ships:

* ``Tokenizer.from_gguf(path)``: a GGUF file's ``tokenizer.ggml.*`` metadata.
  Byte-level BPE (``tokenizer.ggml.model = gpt2``) from ``tokens`` and
  ``merges``; the pre-tokenizer split named by ``tokenizer.ggml.pre``
  (:data:`PRE_TOKENIZERS`); control tokens (``token_type`` 3) become special
  tokens, user-defined ones (4) plain added tokens; BOS/EOS ids and the
  ``add_bos_token`` / ``add_eos_token`` flags; ``tokenizer.chat_template``.
* ``Tokenizer.from_hf_dir(path)``: a HF folder's ``tokenizer.json`` with
  ``tokenizer_config.json`` (special tokens, chat template; or
  ``chat_template.jinja``) and ``config.json`` / ``generation_config.json``
  for ids it does not name.

::

    tok = Tokenizer.from_gguf("SmolLM2-135M-Instruct.Q4_1.gguf")
    text = tok.apply_chat_template([{"role": "user", "content": "Hi"}])
    ids = tok.encode(text)
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
from datetime import datetime
from pathlib import Path
from typing import Any

from ckir.errors import CkirError, one_line
from ckir.fileio import read_json_object

# GGUF token types (tokenizer.ggml.token_type)
TOKEN_NORMAL = 1
TOKEN_UNKNOWN = 2
TOKEN_CONTROL = 3
TOKEN_USER_DEFINED = 4
TOKEN_UNUSED = 5
TOKEN_BYTE = 6

#: version of the ``Tokenizer.to_json`` text
SERIAL_FORMAT = 1

#: GPT-2's split: contractions, letter runs, digit runs, other runs, whitespace
_GPT2_SPLIT = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
#: Llama 3: case-insensitive contractions, digits in groups of up to three
_LLAMA3_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
#: Qwen2: as Llama 3 but every digit on its own
_QWEN2_SPLIT = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}"
    r"| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)

#: ``tokenizer.ggml.pre`` -> (regex splits applied in order, BPE ignore_merges).
#: The last split is followed by byte-level mapping.  A missing key means "default".
PRE_TOKENIZERS: dict[str, tuple[tuple[str, ...], bool]] = {
    "default": ((_GPT2_SPLIT,), False),
    "gpt2": ((_GPT2_SPLIT,), False),
    "gpt-2": ((_GPT2_SPLIT,), False),
    # StarCoder-family vocabularies (SmolLM, SmolLM2, Refact): each digit alone first
    "smollm": ((r"\p{N}", _GPT2_SPLIT), False),
    "starcoder": ((r"\p{N}", _GPT2_SPLIT), False),
    "refact": ((r"\p{N}", _GPT2_SPLIT), False),
    "llama-bpe": ((_LLAMA3_SPLIT,), True),
    "llama3": ((_LLAMA3_SPLIT,), True),
    "smaug-bpe": ((_LLAMA3_SPLIT,), True),
    "qwen2": ((_QWEN2_SPLIT,), False),
    "deepseek-r1-qwen": ((_QWEN2_SPLIT,), False),
}


class StreamDecoder:
    """Incremental detokenization: ``push(id)`` returns only complete UTF-8 text.

    A byte-level token may end in the middle of a multi-byte character (an
    emoji spread over several tokens); such bytes are held back until the
    character is complete.  ``flush()`` returns whatever is still held (an
    incomplete tail decodes to U+FFFD).  Concatenating every ``push`` and the
    final ``flush`` gives ``decode(all ids)``.
    """

    def __init__(self, tokenizer: Tokenizer, skip_special_tokens: bool = False) -> None:
        self._tok = tokenizer
        self._skip = skip_special_tokens
        self._ids: list[int] = []
        self._start = 0  # first id not yet returned as text

    def push(self, token_id: int) -> str:
        """Add one token id; the text it completes ('' while a character is incomplete)."""
        self._ids.append(int(token_id))
        text = self._tok.decode(self._ids[self._start :], skip_special_tokens=self._skip)
        if not text or text.endswith("\ufffd"):
            return ""
        self._start = len(self._ids)
        return text

    def push_many(self, ids: Iterable[int]) -> str:
        """``push`` each id; the text they complete."""
        return "".join(self.push(i) for i in ids)

    def flush(self) -> str:
        """The text still held back (incomplete characters decode to U+FFFD)."""
        text = self._tok.decode(self._ids[self._start :], skip_special_tokens=self._skip)
        self._start = len(self._ids)
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
        chat_template: str | None = None,
        source: str = "tokenizer",
    ) -> None:
        self.backend = backend  # a tokenizers.Tokenizer
        self.bos_id = bos_id
        self.eos_id = eos_id
        self.chat_template = chat_template
        self.source = source

    # -- construction -------------------------------------------------------
    @classmethod
    def from_gguf(cls, path: str | Path) -> Tokenizer:
        """The tokenizer stored in a GGUF file's ``tokenizer.ggml.*`` metadata."""
        path = Path(path)
        meta = _gguf_metadata(path)
        return _tokenizer_from_gguf_metadata(meta, path.name)

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
        """Render the model's chat template (Jinja2, sandboxed) for ``messages``.

        ``messages`` is a list of ``{"role": ..., "content": ...}``; extra
        keyword arguments are passed to the template (``tools=...``).  The
        template also sees ``bos_token`` and ``eos_token``.
        """
        if self.chat_template is None:
            raise CkirError(f"{self.source}: has no chat template")
        if isinstance(messages, Mapping) or not isinstance(messages, Sequence):
            raise CkirError(f"{self.source}: messages must be a list of {{role, content}} dicts")
        for n, m in enumerate(messages):
            if not isinstance(m, Mapping) or not isinstance(m.get("role"), str):
                raise CkirError(f"{self.source}: message {n} must be a dict with a 'role' string")
        template = _compile_chat_template(self.chat_template, self.source)
        context = {
            "messages": [dict(m) for m in messages],
            "add_generation_prompt": add_generation_prompt,
            "bos_token": self.bos_token or "",
            "eos_token": self.eos_token or "",
            **kwargs,
        }
        try:
            return template.render(**context)
        except CkirError:
            raise
        except Exception as err:  # jinja2 errors, sandbox violations
            raise CkirError(
                f"{self.source}: chat template failed: {type(err).__name__}: {one_line(err)}"
            ) from None

    def __repr__(self) -> str:
        return (
            f"Tokenizer({self.source!r}, vocab={self.vocab_size}, bos={self.bos_id}, "
            f"eos={self.eos_id})"
        )


# ---------------------------------------------------------------------------
# chat templates
# ---------------------------------------------------------------------------

_TEMPLATES: dict[str, Any] = {}


def _compile_chat_template(text: str, source: str) -> Any:
    cached = _TEMPLATES.get(text)
    if cached is not None:
        return cached
    import jinja2
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message: object) -> None:
        raise CkirError(f"{source}: chat template: {one_line(message)}")

    def strftime_now(fmt: str) -> str:
        return datetime.now().strftime(fmt)

    def tojson(value: Any, indent: int | None = None, ensure_ascii: bool = False, **kw: Any) -> str:
        return json.dumps(value, indent=indent, ensure_ascii=ensure_ascii, **kw)

    # trim_blocks / lstrip_blocks: the whitespace conventions chat templates are written for
    env = ImmutableSandboxedEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"]
    )
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    try:
        template = env.from_string(text)
    except jinja2.TemplateError as err:
        raise CkirError(f"{source}: chat template does not parse: {one_line(err)}") from None
    _TEMPLATES[text] = template
    return template


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


def _ids_field(meta: Mapping[str, Any], key: str, name: str, count: int) -> int | None:
    value = meta.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < count:
        raise CkirError(f"{name}: '{key}' = {value!r} is not a token id (vocabulary {count})")
    return int(value)


def _tokenizer_from_gguf_metadata(meta: Mapping[str, Any], name: str) -> Tokenizer:
    from tokenizers import AddedToken, Regex, decoders, models, pre_tokenizers, processors
    from tokenizers import Tokenizer as Backend

    model = meta.get("tokenizer.ggml.model")
    if model is None:
        raise CkirError(f"{name}: no tokenizer (metadata 'tokenizer.ggml.model' is missing)")
    if model != "gpt2":
        raise CkirError(
            f"{name}: tokenizer.ggml.model is '{model}'; ckir reads byte-level BPE ('gpt2') "
            "tokenizers only"
        )
    tokens = meta.get("tokenizer.ggml.tokens")
    if not isinstance(tokens, list) or not tokens or not all(isinstance(t, str) for t in tokens):
        raise CkirError(f"{name}: 'tokenizer.ggml.tokens' is missing or not a list of strings")
    merges_raw = meta.get("tokenizer.ggml.merges")
    if not isinstance(merges_raw, list):
        raise CkirError(f"{name}: 'tokenizer.ggml.merges' is missing (BPE needs merges)")
    types = meta.get("tokenizer.ggml.token_type")
    if types is None:
        types = [TOKEN_NORMAL] * len(tokens)
    if not isinstance(types, list) or len(types) != len(tokens):
        got = len(types) if isinstance(types, list) else 0
        raise CkirError(
            f"{name}: 'tokenizer.ggml.token_type' has {got} entries for {len(tokens)} tokens"
        )
    pre = meta.get("tokenizer.ggml.pre", "default")
    if pre not in PRE_TOKENIZERS:
        raise CkirError(
            f"{name}: tokenizer.ggml.pre '{pre}' is not supported "
            f"(known: {', '.join(sorted(PRE_TOKENIZERS))})"
        )
    splits, ignore_merges = PRE_TOKENIZERS[pre]

    vocab: dict[str, int] = {}
    for i, t in enumerate(tokens):
        vocab.setdefault(t, i)  # a duplicated string keeps its first id
    merges: list[tuple[str, str]] = []
    for n, m in enumerate(merges_raw):
        parts = m.split(" ") if isinstance(m, str) else []
        if len(parts) != 2 or not parts[0] or not parts[1]:
            raise CkirError(f"{name}: tokenizer.ggml.merges[{n}] = {m!r} is not 'left right'")
        merges.append((parts[0], parts[1]))
    try:
        bpe = models.BPE(vocab, merges, ignore_merges=ignore_merges)
    except Exception as err:
        raise CkirError(f"{name}: the BPE vocabulary does not load ({one_line(err)})") from None
    backend = Backend(bpe)
    steps = [pre_tokenizers.Split(Regex(r), behavior="isolated") for r in splits]
    steps.append(pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False))
    backend.pre_tokenizer = pre_tokenizers.Sequence(steps)
    backend.decoder = decoders.ByteLevel()

    special = [
        AddedToken(tokens[i], special=True, normalized=False)
        for i, t in enumerate(types)
        if t == TOKEN_CONTROL
    ]
    user = [
        AddedToken(tokens[i], special=False, normalized=False)
        for i, t in enumerate(types)
        if t == TOKEN_USER_DEFINED
    ]
    if special:
        backend.add_special_tokens(special)
    if user:
        backend.add_tokens(user)

    count = len(tokens)
    bos = _ids_field(meta, "tokenizer.ggml.bos_token_id", name, count)
    eos = _ids_field(meta, "tokenizer.ggml.eos_token_id", name, count)
    add_bos = bool(meta.get("tokenizer.ggml.add_bos_token", False))
    add_eos = bool(meta.get("tokenizer.ggml.add_eos_token", False))
    _set_post_processor(
        backend, processors, tokens, bos if add_bos else None, eos if add_eos else None, name
    )
    template = meta.get("tokenizer.chat_template")
    if template is not None and not isinstance(template, str):
        raise CkirError(f"{name}: 'tokenizer.chat_template' is not a string")
    return Tokenizer(backend, bos_id=bos, eos_id=eos, chat_template=template, source=name)


def _set_post_processor(
    backend: Any,
    processors: Any,
    tokens: Sequence[str],
    bos: int | None,
    eos: int | None,
    name: str,
) -> None:
    """BOS / EOS added by ``encode(..., add_special_tokens=True)`` when the file asks."""
    if bos is None and eos is None:
        return
    single = ([f"{tokens[bos]}:0"] if bos is not None else []) + ["$A:0"]
    single += [f"{tokens[eos]}:0"] if eos is not None else []
    pair = single + ([f"{tokens[bos]}:1"] if bos is not None else []) + ["$B:1"]
    pair += [f"{tokens[eos]}:1"] if eos is not None else []
    specials = [(tokens[i], i) for i in {x for x in (bos, eos) if x is not None}]
    try:
        backend.post_processor = processors.TemplateProcessing(
            single=" ".join(single), pair=" ".join(pair), special_tokens=specials
        )
    except Exception as err:
        raise CkirError(f"{name}: cannot add BOS/EOS tokens ({one_line(err)})") from None


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


def _tokenizer_from_hf_dir(model_dir: Path) -> Tokenizer:
    from tokenizers import Tokenizer as Backend

    if not model_dir.is_dir():
        raise CkirError(f"{model_dir}: not a directory")
    tj = model_dir / "tokenizer.json"
    if not tj.is_file():
        raise CkirError(f"{tj}: not found (ckir reads HF fast tokenizers, tokenizer.json)")
    try:
        backend = Backend.from_file(str(tj))
    except Exception as err:
        raise CkirError(f"{tj}: does not load ({one_line(err)})") from None
    cfg = _read_json(model_dir / "tokenizer_config.json") or {}
    model_cfg = _read_json(model_dir / "config.json") or {}
    gen_cfg = _read_json(model_dir / "generation_config.json") or {}

    def token_id(key: str) -> int | None:
        text = _token_text(cfg.get(key))
        if text is not None:
            tid = backend.token_to_id(text)
            if tid is None:
                where = model_dir / "tokenizer_config.json"
                raise CkirError(f"{where}: {key} '{text}' is not in the vocabulary")
            return tid
        for source in (gen_cfg, model_cfg):
            tid = _first_id(source.get(f"{key}_id"))
            if tid is not None:
                return tid
        return None

    template = cfg.get("chat_template")
    jinja = model_dir / "chat_template.jinja"
    if template is None and jinja.is_file():
        template = jinja.read_text(encoding="utf-8")
    if isinstance(template, list):  # [{"name": "default", "template": "..."}, ...]
        named = {t.get("name"): t.get("template") for t in template if isinstance(t, Mapping)}
        template = named.get("default")
    if template is not None and not isinstance(template, str):
        raise CkirError(f"{model_dir / 'tokenizer_config.json'}: chat_template is not a string")
    return Tokenizer(
        backend,
        bos_id=token_id("bos_token"),
        eos_id=token_id("eos_token"),
        chat_template=template,
        source=model_dir.name,
    )
