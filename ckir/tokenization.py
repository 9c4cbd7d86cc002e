"""Tokenizers for ``ckir generate``: from GGUF metadata or a HF ``tokenizer.json``.

Built with the ``tokenizers`` library.  A GGUF file with
``tokenizer.ggml.model = gpt2`` carries a byte-level BPE: its token list,
merges, token types (control tokens become special tokens) and the name of
its pre-tokenizer (``tokenizer.ggml.pre``); the chat template is
``tokenizer.chat_template``, rendered with a sandboxed jinja2.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ckir.errors import CkirError

#: GGUF token types that are not ordinary text (control, user-defined)
_SPECIAL_TYPES = (3, 4)


def _pre_tokenizer(name: str) -> Any:
    """The pre-tokenizer a GGUF ``tokenizer.ggml.pre`` name stands for."""
    from tokenizers import pre_tokenizers as pt

    byte_level = pt.ByteLevel(add_prefix_space=False, use_regex=True)
    # names whose rule is "split digits one by one, then GPT-2's byte-level regex"
    if name in ("smollm", "starcoder", "refact"):
        return pt.Sequence([pt.Digits(individual_digits=True), byte_level])
    if name in ("gpt2", "gpt-2", "default", "olmo", "jina-es"):
        return byte_level
    raise CkirError(f"tokenizer: unsupported GGUF pre-tokenizer '{name}'")


class Tokenizer:
    """encode / decode / chat template / streaming decode."""

    def __init__(
        self,
        backend: Any,
        *,
        bos_id: int | None,
        eos_id: int | None,
        chat_template: str | None,
        special: Mapping[str, str] | None = None,
    ) -> None:
        self.backend = backend
        self.bos_id = bos_id
        self.eos_id = eos_id
        self.chat_template = chat_template
        self.special = dict(special or {})

    # -- construction ---------------------------------------------------------------
    @classmethod
    def from_gguf(cls, path: str | Path) -> Tokenizer:
        import gguf
        from tokenizers import AddedToken, decoders, models
        from tokenizers import Tokenizer as Backend

        path = Path(path)
        reader = gguf.GGUFReader(path, "r")

        def field(key: str) -> Any:
            f = reader.fields.get(key)
            return None if f is None else f.contents()

        kind = field("tokenizer.ggml.model")
        if kind != "gpt2":
            raise CkirError(f"{path.name}: tokenizer model '{kind}' is not supported (gpt2 BPE)")
        tokens: list[str] = field("tokenizer.ggml.tokens") or []
        merges: list[str] = field("tokenizer.ggml.merges") or []
        types: list[int] = field("tokenizer.ggml.token_type") or [1] * len(tokens)
        if not tokens:
            raise CkirError(f"{path.name}: no tokenizer.ggml.tokens")
        bpe = models.BPE(
            vocab={t: i for i, t in enumerate(tokens)},
            merges=[tuple(m.split(" ", 1)) for m in merges],
        )
        backend = Backend(bpe)
        backend.pre_tokenizer = _pre_tokenizer(str(field("tokenizer.ggml.pre") or "default"))
        backend.decoder = decoders.ByteLevel()
        specials = [t for t, ty in zip(tokens, types, strict=False) if ty in _SPECIAL_TYPES]
        backend.add_special_tokens(
            [AddedToken(t, special=True, normalized=False) for t in specials]
        )

        def tok(key: str) -> int | None:
            v = field(key)
            return int(v) if v is not None else None

        bos, eos = tok("tokenizer.ggml.bos_token_id"), tok("tokenizer.ggml.eos_token_id")
        names = {
            "bos_token": tokens[bos] if bos is not None else "",
            "eos_token": tokens[eos] if eos is not None else "",
        }
        return cls(
            backend,
            bos_id=bos,
            eos_id=eos,
            chat_template=field("tokenizer.chat_template"),
            special=names,
        )

    @classmethod
    def from_hf_dir(cls, model_dir: str | Path) -> Tokenizer:
        from tokenizers import Tokenizer as Backend

        model_dir = Path(model_dir)
        path = model_dir / "tokenizer.json"
        if not path.is_file():
            raise CkirError(f"{model_dir}: no tokenizer.json (needed to encode a text prompt)")
        backend = Backend.from_file(str(path))
        cfg_path = model_dir / "tokenizer_config.json"
        cfg: dict[str, Any] = json.loads(cfg_path.read_text()) if cfg_path.is_file() else {}

        def token_id(key: str) -> int | None:
            tok = cfg.get(key)
            if isinstance(tok, dict):
                tok = tok.get("content")
            return backend.token_to_id(tok) if isinstance(tok, str) else None

        names = {k: v for k in ("bos_token", "eos_token") if isinstance(v := cfg.get(k), str)}
        return cls(
            backend,
            bos_id=token_id("bos_token"),
            eos_id=token_id("eos_token"),
            chat_template=cfg.get("chat_template"),
            special=names,
        )

    # -- use ------------------------------------------------------------------------
    def encode(self, text: str) -> list[int]:
        return list(self.backend.encode(text, add_special_tokens=False).ids)

    def decode(self, ids: Sequence[int]) -> str:
        return str(self.backend.decode(list(ids), skip_special_tokens=False))

    def apply_chat_template(
        self, messages: Sequence[Mapping[str, str]], add_generation_prompt: bool = True
    ) -> str:
        if not self.chat_template:
            raise CkirError("--chat: this model has no chat template")
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)

        def raise_exception(message: str) -> None:
            raise CkirError(f"chat template: {message}")

        env.globals["raise_exception"] = raise_exception
        return env.from_string(self.chat_template).render(
            messages=list(messages), add_generation_prompt=add_generation_prompt, **self.special
        )

    def stream_decoder(self) -> StreamDecoder:
        return StreamDecoder(self)


class StreamDecoder:
    """Turns a stream of ids into text pieces, holding back incomplete UTF-8 sequences."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        self.tok = tokenizer
        self.ids: list[int] = []
        self.emitted = 0

    def push(self, token: int) -> str:
        self.ids.append(token)
        text = self.tok.decode(self.ids)
        if text.endswith("\ufffd"):  # a multi-byte character is not complete yet
            return ""
        piece, self.emitted = text[self.emitted :], len(text)
        return piece

    def flush(self) -> str:
        text = self.tok.decode(self.ids)
        piece, self.emitted = text[self.emitted :], len(text)
        return piece
